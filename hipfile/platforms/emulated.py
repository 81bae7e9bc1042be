"""Test hooks of the emulated platform.

The emulated ``libhipfile.so`` and ``libamdhip64.so`` export a few functions
beyond the C ABIs they implement, so that tests can inject faults, slow down
completions and check that nothing was left behind. This module wraps them
with :mod:`ctypes`, on the copies of the libraries that the process has
already loaded (``dlopen`` of the same path returns the same instance), so the
hooks act on the very state that ``hipfile`` and HIP-Python use.

Every function raises :class:`RuntimeError` unless the emulated platform is the
active one (``HIPFILE_PLATFORM=emulated`` or
``hipfile.platforms.activate("emulated")``).
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from hipfile import platforms

__all__ = [
    "FAULT_OPS",
    "STREAM_MEM_FAULT_OPS",
    "counters",
    "inject_fault",
    "inject_stream_mem_fault",
    "require_signal_memory",
    "reset",
    "set_completion_delay",
    "set_short_transfer",
]

#: Operations that :func:`inject_fault` accepts, with their number in the C hook.
FAULT_OPS: dict[str, int] = {
    "read": 0,
    "write": 1,
    "read_async": 2,
    "write_async": 3,
    "batch": 4,
    "register": 5,
}

_HIPFILE_COUNTERS = ("handles", "buffers", "streams_registered", "inflight", "batches")
_HIP_COUNTERS = ("allocations", "host_allocations", "streams", "events")
_STREAM_MEM_COUNTERS = ("stream_waits", "blocked_waits")

#: Operations that :func:`inject_stream_mem_fault` accepts, with their number
#: in the C hook.
STREAM_MEM_FAULT_OPS: dict[str, int] = {"wait_value": 0, "write_value": 1}


class _Counters(ctypes.Structure):
    _fields_ = [(name, ctypes.c_longlong) for name in _HIPFILE_COUNTERS]


class _Libraries:
    def __init__(self, hipfile_lib: ctypes.CDLL, hip_lib: ctypes.CDLL) -> None:
        self.hipfile = hipfile_lib
        self.hip = hip_lib
        hipfile_lib.hipfileEmuInjectFault.argtypes = [
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_uint,
        ]
        hipfile_lib.hipfileEmuInjectFault.restype = ctypes.c_int
        hipfile_lib.hipfileEmuSetShortTransfer.argtypes = [ctypes.c_size_t]
        hipfile_lib.hipfileEmuSetShortTransfer.restype = None
        hipfile_lib.hipfileEmuSetCompletionDelay.argtypes = [ctypes.c_ulonglong]
        hipfile_lib.hipfileEmuSetCompletionDelay.restype = None
        hipfile_lib.hipfileEmuGetCounters.argtypes = [ctypes.POINTER(_Counters)]
        hipfile_lib.hipfileEmuGetCounters.restype = None
        hipfile_lib.hipfileEmuReset.argtypes = []
        hipfile_lib.hipfileEmuReset.restype = None
        counter_p = ctypes.POINTER(ctypes.c_longlong)
        hip_lib.hipEmuCounters.argtypes = [counter_p] * 4
        hip_lib.hipEmuCounters.restype = ctypes.c_int
        self.hip_reset = getattr(hip_lib, "hipEmuReset", None)
        if self.hip_reset is not None:
            self.hip_reset.argtypes = []
            self.hip_reset.restype = None
        self.stream_mem_counters = getattr(hip_lib, "hipEmuStreamMemCounters", None)
        if self.stream_mem_counters is not None:
            self.stream_mem_counters.argtypes = [counter_p] * 2
            self.stream_mem_counters.restype = ctypes.c_int
            inject = hip_lib.hipEmuStreamMemInjectFault
            inject.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_uint]
            hip_lib.hipEmuStreamMemInjectFault.restype = ctypes.c_int
            hip_lib.hipEmuStreamMemRequireSignal.argtypes = [ctypes.c_int]
            hip_lib.hipEmuStreamMemRequireSignal.restype = None
            hip_lib.hipEmuStreamMemReset.argtypes = []
            hip_lib.hipEmuStreamMemReset.restype = None


_lock = threading.Lock()
_libs: _Libraries | None = None



_NOT_ACTIVE = """    RuntimeError
        If the emulated platform is not active.
"""

_F = TypeVar("_F", bound=Callable[..., Any])


def _c_hooks(*names: str) -> Callable[[_F], _F]:
    """Complete a hook function's docstring with what every one shares: the
    ``RuntimeError`` of an inactive platform (added to its Raises section)
    and the C hooks it calls (See Also)."""

    def complete(fn: _F) -> _F:
        doc = (fn.__doc__ or "").rstrip() + "\n"
        raises = "\n    Raises\n    ------\n"
        if raises in doc:
            doc = doc.replace(raises, raises + _NOT_ACTIVE, 1)
        else:
            doc += raises + _NOT_ACTIVE
        plural = "s" if len(names) > 1 else ""
        doc += f"\n    See Also\n    --------\n    {', '.join(names)} : the C hook{plural}.\n    "
        fn.__doc__ = doc
        return fn

    return complete


def _open_loaded(path: str) -> ctypes.CDLL:
    """Return the already loaded library at ``path`` (never a second copy)."""
    try:
        return ctypes.CDLL(path, mode=os.RTLD_NOLOAD | ctypes.RTLD_GLOBAL)
    except OSError as exc:
        raise RuntimeError(
            f"the emulated platform is active but {path} is not loaded in this process"
        ) from exc


def _libraries() -> _Libraries:
    global _libs
    if platforms.active() != "emulated":
        raise RuntimeError(
            "the emulated platform is not active in this process "
            f"(active: {platforms.active()!r}); set HIPFILE_PLATFORM=emulated "
            "before importing hipfile"
        )
    with _lock:
        if _libs is None:
            lib = platforms.prefix("emulated") / "lib"
            _libs = _Libraries(
                _open_loaded(str(lib / "libhipfile.so")),
                _open_loaded(str(lib / "libamdhip64.so")),
            )
        return _libs


@_c_hooks("hipfileEmuInjectFault")
def inject_fault(op: str, errno: int, count: int = 1, after: int = 0) -> None:
    """Make the next calls of one operation fail.

    The next ``count`` calls of ``op``, after ``after`` calls that succeed,
    fail with ``errno``. Calls rejected for bad arguments do not count.

    Parameters
    ----------
    op
        One of :data:`FAULT_OPS`: ``"read"``/``"write"`` (``hipFileRead``/
        ``hipFileWrite`` return -1 and set ``errno``), ``"read_async"``/
        ``"write_async"`` (the submit succeeds; when the operation runs on the
        stream it writes -1 to the bytes slot), ``"batch"`` (each entry counts
        once; it completes as Failed with ``ret`` = -errno), ``"register"``
        (``hipFileHandleRegister``, ``hipFileBufRegister`` and
        ``hipFileStreamRegister`` count; the call returns
        ``hipFileInternalError``).
    errno
        A system error number (1..4999), or a hipFile error code
        (5001..5038) to make the call fail with that code instead: -code from
        the I/O calls and in the bytes slot, the code itself from the
        registrations.
    count
        How many calls fail; 0 clears the fault of ``op``.
    after
        How many calls pass before the first failure.

    Raises
    ------
    ValueError
        For an unknown ``op``, a negative ``count`` or ``after``, or an
        ``errno`` outside both ranges.
    """
    if op not in FAULT_OPS:
        raise ValueError(f"unknown fault op {op!r}; expected one of {sorted(FAULT_OPS)}")
    if not 0 <= count < 2**32 or not 0 <= after < 2**32:
        raise ValueError("count and after must be in 0..2**32-1")
    if not 0 < errno < 2**31:
        raise ValueError(f"bad errno {errno!r}: expected 1..4999 or a hipFile code 5001..5038")
    libs = _libraries()
    if libs.hipfile.hipfileEmuInjectFault(FAULT_OPS[op], errno, count, after) != 0:
        raise ValueError(f"bad errno {errno!r}: expected 1..4999 or a hipFile code 5001..5038")


def _stream_mem_lib() -> ctypes.CDLL:
    libs = _libraries()
    if libs.stream_mem_counters is None:
        raise RuntimeError("the loaded emulated HIP runtime has no stream memory operations")
    return libs.hip


@_c_hooks("hipEmuStreamMemInjectFault")
def inject_stream_mem_fault(op: str, error: int, count: int = 1) -> None:
    """Make the next stream memory operations fail.

    The next ``count`` calls of ``op`` that pass the argument checks return
    ``error`` and enqueue nothing.

    Parameters
    ----------
    op
        One of :data:`STREAM_MEM_FAULT_OPS`: ``"wait_value"``
        (``hipStreamWaitValue32``/``hipStreamWaitValue64``) or
        ``"write_value"`` (``hipStreamWriteValue32``/``hipStreamWriteValue64``).
    error
        The ``hipError_t`` number to return (not ``hipSuccess``).
    count
        How many calls fail; 0 clears the fault of ``op``.

    Raises
    ------
    ValueError
        For an unknown ``op``, a ``count`` outside 0..2**32-1, or an ``error``
        of 0 or outside the C ``int`` range.
    """
    if op not in STREAM_MEM_FAULT_OPS:
        raise ValueError(
            f"unknown stream memory op {op!r}; expected one of {sorted(STREAM_MEM_FAULT_OPS)}"
        )
    if not 0 <= count < 2**32:
        raise ValueError("count must be in 0..2**32-1")
    error = int(error)
    if error == 0 or not -(2**31) <= error < 2**31:
        raise ValueError(f"bad error {error!r}: expected a hipError_t other than hipSuccess")
    if _stream_mem_lib().hipEmuStreamMemInjectFault(STREAM_MEM_FAULT_OPS[op], error, count) != 0:
        raise ValueError(f"bad error {error!r}: expected a hipError_t other than hipSuccess")


@_c_hooks("hipEmuStreamMemRequireSignal")
def require_signal_memory(enabled: bool | None) -> None:
    """Choose which memory ``hipStreamWaitValue32/64`` accept.

    AMD's runtime accepts any memory it allocated or registered, unless
    ``GPU_STREAMOPS_CP_WAIT`` is set, when it accepts only signal memory
    (``hipExtMallocWithFlags(..., hipMallocSignalMemory)``) and returns
    ``hipErrorInvalidValue`` for anything else. This switches the emulated
    runtime between the two.

    Parameters
    ----------
    enabled
        ``True``: signal memory only; ``False``: any known memory; ``None``:
        follow ``GPU_STREAMOPS_CP_WAIT`` (the default, restored by
        :func:`reset`).
    """
    _stream_mem_lib().hipEmuStreamMemRequireSignal(-1 if enabled is None else int(bool(enabled)))


@_c_hooks("hipfileEmuSetShortTransfer")
def set_short_transfer(max_bytes: int | None) -> None:
    """Cap every transfer and return its count.

    While set, each read or write of the library (synchronous, stream-ordered
    or batch) performs a single ``pread``/``pwrite`` of at most ``max_bytes``
    and reports what it moved, so callers see short counts and must loop.

    Parameters
    ----------
    max_bytes
        The cap in bytes; ``None`` or 0 turns it off.

    Raises
    ------
    ValueError
        If ``max_bytes`` is negative.
    """
    value = 0 if max_bytes is None else max_bytes
    if value < 0:
        raise ValueError("max_bytes must not be negative")
    _libraries().hipfile.hipfileEmuSetShortTransfer(value)


@_c_hooks("hipfileEmuSetCompletionDelay")
def set_completion_delay(microseconds: int) -> None:
    """Delay stream-ordered operations and batch entries.

    Each operation queued afterwards sleeps this long on its stream (or batch
    worker) before it moves data and writes its result, so the result is
    visibly late.

    Parameters
    ----------
    microseconds
        The delay; 0 turns it off.

    Raises
    ------
    ValueError
        If ``microseconds`` is negative.
    """
    if microseconds < 0:
        raise ValueError("microseconds must not be negative")
    _libraries().hipfile.hipfileEmuSetCompletionDelay(microseconds)


@_c_hooks("hipfileEmuGetCounters", "hipEmuCounters", "hipEmuStreamMemCounters")
def counters() -> dict[str, int]:
    """Live resources of both emulated libraries.

    Returns
    -------
    dict[str, int]
        ``handles``, ``buffers``, ``streams_registered``, ``inflight`` (stream
        ordered operations not yet run) and ``batches`` from ``libhipfile``;
        ``allocations``, ``host_allocations``, ``streams`` and ``events`` from
        ``libamdhip64``, and its ``stream_waits`` (``hipStreamWaitValue32/64``
        operations queued or running) and ``blocked_waits`` (those a stream
        is blocked in now). All are zero when nothing is left behind.
    """
    libs = _libraries()
    own = _Counters()
    libs.hipfile.hipfileEmuGetCounters(ctypes.byref(own))
    result = {name: int(getattr(own, name)) for name in _HIPFILE_COUNTERS}
    result.update(_long_long_counters(libs.hip.hipEmuCounters, _HIP_COUNTERS))
    if libs.stream_mem_counters is not None:
        result.update(_long_long_counters(libs.stream_mem_counters, _STREAM_MEM_COUNTERS))
    return result


def _long_long_counters(hook: Callable[..., int], names: tuple[str, ...]) -> dict[str, int]:
    """The counters a C hook writes through one ``long long *`` per name."""
    values = [ctypes.c_longlong(0) for _ in names]
    hook(*(ctypes.byref(v) for v in values))
    return {name: int(v.value) for name, v in zip(names, values, strict=True)}


@_c_hooks("hipfileEmuReset", "hipEmuReset", "hipEmuStreamMemReset")
def reset() -> None:
    """Clear injected faults, the short transfer cap and the completion delay.

    Also clears the calling thread's last HIP error, the stream memory
    faults and the signal-memory requirement of :func:`require_signal_memory`.
    Live counters are left as they are: they are what tells a leak.
    """
    libs = _libraries()
    libs.hipfile.hipfileEmuReset()
    if libs.hip_reset is not None:
        libs.hip_reset()
    if libs.stream_mem_counters is not None:
        libs.hip.hipEmuStreamMemReset()
