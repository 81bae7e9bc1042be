"""Helpers of the HIP runtime tests: HIP-Python calls checked, and the
platform's runtime library for the emulated platform's counters."""

from __future__ import annotations

import ctypes
import os
import threading
import warnings

import numpy as np
import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    if not os.environ.get("HIPFILE_PLATFORM") and not os.environ.get("ROCM_PATH"):
        os.environ["HIPFILE_PLATFORM"] = "emulated"
    import hipfile  # noqa: F401  (activates the platform named in the environment)
    from hipfile import platforms

from hip import hip

try:  # HIP-Python 6.x/7.x
    from hip._version import __version__ as _HIP_PYTHON_VERSION
except ImportError:  # 10.x keeps the old layout as a thin package
    _HIP_PYTHON_VERSION = "10"

# These tests call HIP-Python 10's signatures (6.x/7.x differ in places, e.g.
# hipGetDeviceProperties); the binding's own tests run on every version.
NEEDS_HIP_PYTHON_10 = pytest.mark.skipif(
    int(str(_HIP_PYTHON_VERSION).split(".")[0]) < 10,
    reason="the emulated HIP runtime's tests use HIP-Python 10's API")

PLATFORM = platforms.active() or "rocm"
E = hip.hipError_t
K = hip.hipMemcpyKind

HOST_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
STREAM_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)

WAIT_S = 10.0  # upper bound for anything a test waits for


def ok(result: tuple) -> object:  # type: ignore[type-arg]
    """Check that a HIP-Python call succeeded; return its payload."""
    assert result[0] == E.hipSuccess, f"HIP call failed: {result[0]!r}"
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


def err(result: tuple) -> E:  # type: ignore[type-arg]
    return result[0]


def fn_ptr(cfunc: object) -> int:
    value = ctypes.cast(cfunc, ctypes.c_void_p).value
    assert value
    return value


def host_view(ptr: object, nbytes: int) -> np.ndarray:
    """A numpy view of host-accessible memory at a HIP pointer."""
    buf = (ctypes.c_ubyte * nbytes).from_address(int(ptr))  # type: ignore[call-overload]
    return np.ctypeslib.as_array(buf)


def runtime_library() -> ctypes.CDLL:
    """The libamdhip64.so that HIP-Python loaded (same file, same handle)."""
    return ctypes.CDLL(os.path.join(os.environ["ROCM_PATH"], "lib", "libamdhip64.so"))


def emu_counters() -> dict[str, int]:
    lib = runtime_library()
    values = [ctypes.c_longlong(-1) for _ in range(4)]
    assert lib.hipEmuCounters(*(ctypes.byref(v) for v in values)) == 0
    names = ("allocations", "host_allocations", "streams", "events")
    return {n: v.value for n, v in zip(names, values, strict=True)}


class Gate:
    """A host function that blocks its stream until the test opens the gate."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.entered = threading.Event()
        self.cfunc = HOST_FN(self._run)

    def _run(self, _user_data: int | None) -> None:
        self.entered.set()
        self.opened.wait(WAIT_S)

    def launch(self, stream: object) -> None:
        ok(hip.hipLaunchHostFunc(stream, fn_ptr(self.cfunc), None))

    def open(self) -> None:
        self.opened.set()

