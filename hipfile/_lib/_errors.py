"""The exception classes of hipfile and the mapping from hipFile statuses
and I/O results to them (see :mod:`hipfile.errors`, which makes them
public). Defined here, below every compiled module of :mod:`hipfile._lib`,
so that the core raises them without importing the Python layer.
"""

from __future__ import annotations

import errno as _errno
import os
from typing import Any, NoReturn

from hipfile._lib._enums import OpError, member_or_int

_FALLBACK_STRINGS = {e.value: e.name.replace("_", " ").lower() for e in OpError}

#: What the library answers, set by :mod:`hipfile._lib._bindings` when it is
#: imported (this module sits below it and never imports it):
#: ``(library_loaded, get_op_error_string, get_version)``.
_library_queries: tuple[Any, Any, Any] | None = None

#: Where a failure to load libhipfile points the caller (also
#: :data:`hipfile.platforms.NO_ROCM_HINT`).
NO_ROCM_HINT = ("To try hipfile without a GPU or ROCm, use the emulated platform that ships "
                "with it: set HIPFILE_PLATFORM=emulated in the environment before Python "
                "starts (or call hipfile.platforms.activate('emulated') before anything "
                "imports HIP-Python).")


def op_error_string(code: int) -> str:
    """Text for a hipFile status: ``hipFileGetOpErrorString`` when the library
    is loaded, else the enum's name. Never raises."""
    try:
        if _library_queries is not None and _library_queries[0]():
            text = _library_queries[1](code)
            if text is not None:
                return str(text)
    except Exception:
        pass
    return _FALLBACK_STRINGS.get(code, f"unknown hipFile error {code}")


class HipFileException(Exception):
    """A hipFile call failed with a ``hipFileOpError_t`` status.

    Parameters
    ----------
    hipfile_err
        The ``hipFileOpError_t`` code (see :class:`hipfile.OpError`).
    hip_err
        The ``hipError_t``; meaningful when ``hipfile_err`` is
        ``OpError.HIP_DRIVER_ERROR`` (5011).
    func
        Name of the C function that reported it, if known.
    detail
        Extra context for the message.
    """

    def __init__(
        self, hipfile_err: int, hip_err: int = 0, func: str | None = None, detail: str = ""
    ) -> None:
        self._hipfile_err = int(hipfile_err)
        self._hip_err = int(hip_err)
        self._func = func
        self._detail = detail
        super().__init__(hipfile_err, hip_err)

    #: Whether the status came from a hipFile call (False for the errors the
    #: package raises itself, whose ``hipfile_err`` is 0).
    from_library = True

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._hipfile_err, self._hip_err, self._func, self._detail))

    @property
    def hipfile_err(self) -> int:
        """The ``hipFileOpError_t`` code."""
        return self._hipfile_err

    @property
    def hip_err(self) -> int:
        """The ``hipError_t`` (meaningful for ``OpError.HIP_DRIVER_ERROR``)."""
        return self._hip_err

    @property
    def err(self) -> OpError | int:
        """The code as an :class:`OpError` where it is one."""
        return member_or_int(OpError, self._hipfile_err)

    @property
    def func(self) -> str | None:
        """The C function that failed, if known."""
        return self._func

    def __str__(self) -> str:
        code = self._hipfile_err
        name = self.err.name if isinstance(self.err, OpError) else str(code)
        msg = f"{name} ({code}): {op_error_string(code)}"
        if code == OpError.HIP_DRIVER_ERROR:
            msg += f"; hipError_t {self._hip_err} ({_hip_error_name(self._hip_err)})"
        if self._func:
            msg = f"{self._func}: {msg}"
        if self._detail:
            msg += f" [{self._detail}]"
        return msg


class DriverNotInitializedError(HipFileException):
    """The driver is not open (``DriverNotInitialized``, 5001)."""


class InvalidValueError(HipFileException, ValueError):
    """An argument was rejected (``InvalidValue``, 5022)."""


class MemoryAlreadyRegisteredError(HipFileException):
    """The buffer, or part of it, is registered already (5023)."""


class MemoryNotRegisteredError(HipFileException):
    """The buffer is not registered (5024)."""


class HandleNotRegisteredError(HipFileException):
    """The file handle is not (or no longer) registered (5027)."""


class HandleAlreadyRegisteredError(HipFileException):
    """The file descriptor is registered already (5028)."""


class PermissionDeniedError(HipFileException, PermissionError):
    """hipFile refused the operation for lack of permission (5025)."""


class PointerError(HipFileException, ValueError):
    """The memory is not usable by hipFile: invalid pointer, wrong memory
    type, or a range outside the allocation (5012, 5013, 5014)."""


class NotSupportedError(HipFileException, NotImplementedError):
    """The platform, device or I/O kind is not supported (5007, 5008, 5009)."""


class AsyncNotSupportedError(NotSupportedError):
    """The library does not implement stream-ordered I/O (5038)."""


class BatchFullError(HipFileException):
    """The batch has no room for more entries (5037)."""


class InternalError(HipFileException):
    """The library failed internally (5030), also the code of functions a
    release declares but does not implement."""


class HipRuntimeError(HipFileException):
    """A HIP runtime error (``hipError_t``), reported as ``HIP_DRIVER_ERROR``."""

    def __init__(
        self, hipfile_err: int = OpError.HIP_DRIVER_ERROR, hip_err: int = 0,
        func: str | None = None, detail: str = ""
    ) -> None:
        super().__init__(hipfile_err, hip_err, func, detail)


class InvalidStreamError(HipRuntimeError, ValueError):
    """A stream handle that names no stream: HIP answers
    ``hipErrorContextIsDestroyed`` (or ``hipErrorInvalidHandle``) for a
    handle it does not know (never created, or destroyed), and the package
    says so. A :class:`HipRuntimeError` (``hip_err`` is HIP's code) and a
    :class:`ValueError` (a bad argument)."""


#: hipError_t codes HIP answers for a stream handle it does not know
#: (hipErrorInvalidHandle, hipErrorContextIsDestroyed).
BAD_STREAM_CODES = (400, 709)


def stream_error(hip_err: int, func: str, stream: int) -> HipRuntimeError:
    """The exception for a failed HIP call on the caller's ``stream``: an
    :class:`InvalidStreamError` saying the stream is not a valid stream
    when HIP answers one of :data:`BAD_STREAM_CODES` for a stream other than
    the null stream, else :class:`HipRuntimeError`."""
    if stream and hip_err in BAD_STREAM_CODES:
        return InvalidStreamError(hip_err=hip_err, func=func, detail=(
            f"the stream {stream:#x} is not a valid stream: HIP answers "
            f"{_hip_error_name(hip_err)} for a handle that names no stream (one never "
            "created, or destroyed)"))
    return HipRuntimeError(hip_err=hip_err, func=func)


class _PackageError(HipFileException):
    """A :class:`HipFileException` raised by the package itself, not by a
    library call: :attr:`hipfile_err` is 0 (no ``hipFileOpError_t``),
    :attr:`from_library` is False and the message is the whole text."""

    from_library = False
    _default = ""

    def __init__(self, detail: str = "", func: str | None = None) -> None:
        super().__init__(0, 0, func, detail)
        self.args = (detail,)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._detail, self._func))

    def __str__(self) -> str:
        return self._detail or self._default


class InFlightError(_PackageError, RuntimeError):
    """A resource was closed or deregistered while asynchronous operations
    that use it are still in flight. Wait for them first.

    Raised by the package, not by hipFile: ``hipfile_err`` is 0 and
    ``from_library`` is False (it used to carry ``INVALID_VALUE``).
    """

    _default = "operations are still in flight"


class InFlightTimeoutError(InFlightError, TimeoutError):
    """A close that waits (``FileHandle.close(wait=True, timeout=...)``,
    ``Driver.close(wait=True, timeout=...)``) gave up after its timeout
    with operations still in flight. Nothing was closed, and the object
    accepts new operations again.

    Both an :class:`InFlightError` and a :class:`TimeoutError` (as
    ``concurrent.futures`` raises for a wait that timed out). Raised by the
    package, not by hipFile: ``hipfile_err`` is 0.
    """

    _default = "operations are still in flight after the timeout"


class ClosedError(_PackageError, ValueError, RuntimeError):
    """An object of the package was used after it was closed: a
    :class:`~hipfile.FileHandle` (:class:`ClosedFileError`), a
    :class:`~hipfile.BatchIO`, a :class:`~hipfile.stats.StatsContext`.

    A :class:`HipFileException` (so that ``except HipFileException`` sees
    every failure of a hipFile operation) raised by the package, not by
    hipFile: ``hipfile_err`` is 0 and ``from_library`` is False. Also a
    ValueError, as for closed Python files, and a RuntimeError, as upstream
    raised.
    """

    _default = "operation on a closed object"


class ClosedFileError(ClosedError):
    """An operation on a closed :class:`~hipfile.FileHandle` (a
    :class:`ClosedError`)."""

    _default = "I/O operation on a closed FileHandle"


class ForkedProcessError(_PackageError, RuntimeError):
    """An object opened, registered or submitted in another process (the
    parent of a ``fork``) was used here. hipFile state does not survive
    ``fork``: the child must open its own files and register its own
    buffers and streams. Inherited objects can still be closed or
    deregistered (nothing is asked of the library) and are dropped quietly.
    Raised by the package: ``hipfile_err`` is 0."""

    _default = "object inherited across fork"


class HipFileLibraryError(OSError):
    """libhipfile could not be used: not found, or lacking a function."""


class HipFileLibraryNotFound(HipFileLibraryError):
    """No libhipfile could be loaded; the message lists every path tried."""


class HipFileSymbolNotFound(HipFileLibraryError):
    """The loaded libhipfile lacks a function (an older release)."""


_BY_CODE: dict[int, type[HipFileException]] = {
    OpError.DRIVER_NOT_INITIALIZED: DriverNotInitializedError,
    OpError.INVALID_VALUE: InvalidValueError,
    OpError.MEMORY_ALREADY_REGISTERED: MemoryAlreadyRegisteredError,
    OpError.MEMORY_NOT_REGISTERED: MemoryNotRegisteredError,
    OpError.HANDLE_NOT_REGISTERED: HandleNotRegisteredError,
    OpError.HANDLE_ALREADY_REGISTERED: HandleAlreadyRegisteredError,
    OpError.PERMISSION_DENIED: PermissionDeniedError,
    OpError.HIP_POINTER_INVALID: PointerError,
    OpError.HIP_MEMORY_TYPE_INVALID: PointerError,
    OpError.HIP_POINTER_RANGE_ERROR: PointerError,
    OpError.PLATFORM_NOT_SUPPORTED: NotSupportedError,
    OpError.IO_NOT_SUPPORTED: NotSupportedError,
    OpError.DEVICE_NOT_SUPPORTED: NotSupportedError,
    OpError.ASYNC_NOT_SUPPORTED: AsyncNotSupportedError,
    OpError.BATCH_FULL: BatchFullError,
    OpError.INTERNAL_ERROR: InternalError,
    OpError.HIP_DRIVER_ERROR: HipRuntimeError,
}


def _hip_error_name(code: int) -> str:
    return error_name(code)


def error_name(code: int) -> str:
    """The ``hipError_t`` enum name of a code (HIP-Python's), or a neutral
    text. Never raises."""
    try:
        from hip import hip

        return str(hip.hipError_t(code).name)
    except Exception:
        return f"hipError_t {code}"


#: The functions a hipFile release may export without implementing them
#: (they answer hipFileInternalError, 5030, whatever the arguments): the
#: driver's properties and setters, the configuration parameters and the
#: batch calls after submission. Any other function that answers 5030 failed.
DECLARED_ONLY = frozenset({
    "hipFileDriverGetProperties", "hipFileDriverSetPollMode",
    "hipFileDriverSetMaxDirectIOSize", "hipFileDriverSetMaxCacheSize",
    "hipFileDriverSetMaxPinnedMemSize", "hipFileGetParameterSizeT",
    "hipFileGetParameterBool", "hipFileGetParameterString", "hipFileSetParameterSizeT",
    "hipFileSetParameterBool", "hipFileSetParameterString", "hipFileBatchIOGetStatus",
    "hipFileBatchIOCancel", "hipFileBatchIODestroy",
})


def exception_for(hipfile_err: int, hip_err: int = 0, func: str | None = None,
                  detail: str = "") -> HipFileException:
    """The exception instance for a hipFile status (not raised). An
    ``INTERNAL_ERROR`` of a function in :data:`DECLARED_ONLY` says that the
    library may not implement it."""
    cls = _BY_CODE.get(int(hipfile_err), HipFileException)
    if int(hipfile_err) == OpError.INTERNAL_ERROR and func in DECLARED_ONLY and not detail:
        # the code some releases return from functions they declare only
        detail = (f"hipFile {_library_version()}: this library may not implement "
                  f"{func}")
    return cls(hipfile_err, hip_err, func, detail)


def _library_version() -> str:
    try:
        assert _library_queries is not None
        return ".".join(map(str, _library_queries[2]()))
    except Exception:
        return "version unknown"


def raise_status(hipfile_err: int, hip_err: int, func: str) -> NoReturn:
    """Raise for a failed ``hipFileError_t``."""
    raise exception_for(hipfile_err, hip_err, func)


def error_for_result(ret: int, err_no: int, func: str, *, deferred: bool = False) -> Exception:
    """The exception for a negative ``ssize_t`` result of an I/O call.

    ``-1`` with ``errno`` set is a system error (an :class:`OSError` subclass
    chosen by errno). ``-1`` with errno lost, and small negatives that are not
    hipFile codes, are negated ``hipError_t`` values. ``< -1`` inside the
    hipFile range are negated ``hipFileOpError_t`` codes. ``deferred`` marks
    a count written later by a stream-ordered operation, whose ``-1`` is a
    system error with no errno available.
    """
    code = -int(ret)
    if ret == -1 and deferred:
        # written on the stream's thread: the errno stayed there
        return OSError(f"{func}: a system error occurred when the operation ran "
                       "(the library reports no errno for stream-ordered I/O)")
    if ret == -1 and err_no:
        return OSError(err_no, f"{os.strerror(err_no)} ({func})")
    if OpError.DRIVER_NOT_INITIALIZED <= code < OpError.IO_MAX_ERROR:
        detail = "" if not err_no else f"errno {_errno.errorcode.get(err_no, err_no)}"
        return exception_for(code, 0, func, detail)
    return HipRuntimeError(OpError.HIP_DRIVER_ERROR, code, func, "negated hipError_t result")


def raise_result(ret: int, err_no: int, func: str, *, deferred: bool = False) -> NoReturn:
    """Raise for a negative ``ssize_t`` result of an I/O call."""
    raise error_for_result(ret, err_no, func, deferred=deferred)


def read_only_error(mode: str | None, path: Any) -> OSError:
    """The one error of a write through a handle opened for reading only,
    on every write path (not raised): ``EBADF``, saying so, naming the file.
    """
    how = f" (mode {mode!r})" if mode else ""
    return OSError(_errno.EBADF, f"cannot write: the file was opened read-only{how}; "
                   "open it with 'r+' or 'w' to write",
                   os.fspath(path) if path is not None else None)


def name_file(exc: BaseException, path: Any) -> BaseException:
    """``exc`` with ``path`` as its :attr:`OSError.filename` where it is an
    :class:`OSError` of an errno (ENOSPC, EIO, ...) that names no file yet,
    so that its message names the file (``[Errno 28] ...: 'path'``);
    returns ``exc``."""
    if (isinstance(exc, OSError) and exc.errno and exc.filename is None
            and path is not None):
        exc.filename = os.fspath(path)
    return exc
