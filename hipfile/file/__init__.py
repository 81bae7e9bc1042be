"""Files registered with hipFile: :class:`FileHandle`, :func:`open`, and
their mode strings.

Upstream's module of the same name (AMD's ``hipfile`` 0.4 package) also
holds :class:`~hipfile.Stream` and :func:`~hipfile.supports_async`; they
are importable from here too (the same objects as ``hipfile.Stream`` and
``hipfile.supports_async``).
"""

from __future__ import annotations

from hipfile.async_io import supports_async
from hipfile.file._args import MODES, mode_string, parse_mode
from hipfile.file._handle import FileHandle
from hipfile.file._open import open
from hipfile.stream import Stream

__all__ = ["MODES", "FileHandle", "Stream", "mode_string", "open", "parse_mode",
           "supports_async"]

# The public home of the names (reprs and the documentation).
for _obj in (FileHandle, mode_string, open, parse_mode):
    _obj.__module__ = __name__
del _obj
