"""Exceptions raised by hipfile.

Every hipFile status becomes a :class:`HipFileException` (or a subclass chosen
by its code, which also inherits the matching builtin where one exists);
``-1`` results of the I/O calls become :class:`OSError` subclasses chosen by
``errno``; a missing library or symbol becomes :class:`HipFileLibraryError`.
:class:`HipFileException` subclasses raised by the package itself, not for a
library status: :class:`InFlightError` and :class:`ClosedError` (an object
used after close; :class:`ClosedFileError` for a file) (``hipfile_err`` 0,
``from_library`` False). The statistics errors
(:class:`hipfile.stats.StatsError`) are :class:`HipFileException` too. All of them pickle.

The classes are defined in :mod:`hipfile._lib._errors`, below the compiled
core that raises them, and are public here.
"""

from __future__ import annotations

from hipfile._lib._errors import *  # noqa: F403  (the names below)
from hipfile._lib._errors import (
    error_for_result,
    exception_for,
    op_error_string,
    raise_result,
    raise_status,
)

__all__ = [
    "AsyncNotSupportedError",
    "BatchFullError",
    "ClosedError",
    "ClosedFileError",
    "DriverNotInitializedError",
    "ForkedProcessError",
    "HandleAlreadyRegisteredError",
    "HandleNotRegisteredError",
    "HipFileException",
    "HipFileLibraryError",
    "HipFileLibraryNotFound",
    "HipFileSymbolNotFound",
    "HipRuntimeError",
    "InFlightError",
    "InFlightTimeoutError",
    "InternalError",
    "InvalidStreamError",
    "InvalidValueError",
    "MemoryAlreadyRegisteredError",
    "MemoryNotRegisteredError",
    "NotSupportedError",
    "PermissionDeniedError",
    "PointerError",
]

#: Helpers of the package's own modules (not part of the public API).
_HELPERS = (error_for_result, exception_for, op_error_string, raise_result, raise_status)

# The public home of the classes (reprs, pickles and the documentation).
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
for _helper in _HELPERS:
    _helper.__module__ = __name__
del _helper
