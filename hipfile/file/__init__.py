"""Files registered with hipFile: :class:`FileHandle`, :func:`open`, and
their mode strings."""

from __future__ import annotations

from hipfile.file._args import MODES, mode_string, parse_mode
from hipfile.file._handle import FileHandle
from hipfile.file._open import open

__all__ = ["MODES", "FileHandle", "mode_string", "open", "parse_mode"]

# The public home of the names (reprs and the documentation).
for _obj in (FileHandle, mode_string, open, parse_mode):
    _obj.__module__ = __name__
del _obj
