"""Upstream's module of the exception type: ``from hipfile.error import
HipFileException`` (AMD's ``hipfile`` 0.4 package) works here unchanged.

:class:`HipFileException` is the same class as
:class:`hipfile.HipFileException` (``hipfile.errors``), with upstream's
``hipfile_err`` and ``hip_err`` attributes; the errors this package raises
are its subclasses (see :mod:`hipfile.errors`).
"""

from __future__ import annotations

from hipfile.errors import HipFileException

__all__ = ["HipFileException"]
