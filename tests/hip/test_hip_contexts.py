"""HIP's context entry points on the emulated runtime, as ROCm behaves: a
context is its device's primary context; making one current makes its device
current; each thread has a context stack; the primary context is active while
retained. (hip-python-interop maps NVIDIA's driver-API context calls onto
these; see compat/test_interop_cufile.py.)"""

from __future__ import annotations

import threading

import pytest
from _util import check
from hip import hip

pytestmark = pytest.mark.emulated

OK = hip.hipError_t.hipSuccess


def test_primary_context_is_active_while_retained() -> None:
    base = hip.hipDevicePrimaryCtxGetState(0)[2]
    ctx = check(hip.hipDevicePrimaryCtxRetain(0))
    try:
        err, flags, active = hip.hipDevicePrimaryCtxGetState(0)
        assert err == OK and active == 1 and flags == 0
        again = check(hip.hipDevicePrimaryCtxRetain(0))
        assert int(again) == int(ctx)  # one primary context per device
        check(hip.hipDevicePrimaryCtxRelease(0))
        assert hip.hipDevicePrimaryCtxGetState(0)[2] == 1  # still retained once
        # new flags are refused while it is active
        assert hip.hipDevicePrimaryCtxSetFlags(0, 0)[0] == \
            hip.hipError_t.hipErrorContextAlreadyInUse
    finally:
        check(hip.hipDevicePrimaryCtxRelease(0))
    assert hip.hipDevicePrimaryCtxGetState(0)[2] == base


def test_set_current_and_get_current() -> None:
    ctx = check(hip.hipDevicePrimaryCtxRetain(0))
    try:
        check(hip.hipCtxSetCurrent(ctx))
        assert int(check(hip.hipCtxGetCurrent())) == int(ctx)
        assert check(hip.hipCtxGetDevice()) == 0
        assert check(hip.hipCtxGetApiVersion(ctx)) > 0
        assert check(hip.hipCtxGetFlags()) == 0
        check(hip.hipCtxSynchronize())
        check(hip.hipCtxSetCurrent(None))  # pops it again
        assert hip.hipCtxPopCurrent()[0] == hip.hipError_t.hipErrorInvalidContext
    finally:
        check(hip.hipDevicePrimaryCtxRelease(0))


def test_context_errors() -> None:
    count = check(hip.hipGetDeviceCount())
    invalid = hip.hipError_t.hipErrorInvalidDevice
    assert hip.hipDevicePrimaryCtxRetain(count)[0] == invalid
    assert hip.hipDevicePrimaryCtxRelease(-1)[0] == invalid
    assert hip.hipDevicePrimaryCtxGetState(count)[0] == invalid
    assert hip.hipDevicePrimaryCtxSetFlags(count, 0)[0] == invalid
    assert hip.hipDevicePrimaryCtxReset(count)[0] == invalid
    assert hip.hipCtxCreate(0, count)[0] == invalid
    # nothing pushed on this thread: nothing to pop
    assert hip.hipCtxPopCurrent()[0] == hip.hipError_t.hipErrorInvalidContext
    assert hip.hipCtxPushCurrent(None)[0] == hip.hipError_t.hipErrorInvalidContext


def test_context_stack_sets_the_current_device() -> None:
    if check(hip.hipGetDeviceCount()) < 2:
        pytest.skip("needs two devices (HIPFILE_EMU_DEVICES=2)")
    check(hip.hipSetDevice(0))
    ctx0 = check(hip.hipDevicePrimaryCtxRetain(0))
    ctx1 = check(hip.hipDevicePrimaryCtxRetain(1))
    try:
        check(hip.hipCtxPushCurrent(ctx0))
        check(hip.hipCtxPushCurrent(ctx1))
        assert check(hip.hipGetDevice()) == 1
        assert check(hip.hipCtxGetDevice()) == 1
        assert int(check(hip.hipCtxPopCurrent())) == int(ctx1)
        assert check(hip.hipGetDevice()) == 0  # the context below is current again
        assert int(check(hip.hipCtxPopCurrent())) == int(ctx0)
        created = check(hip.hipCtxCreate(0, 1))  # ROCm: the device's context, pushed
        assert int(created) == int(ctx1) and check(hip.hipGetDevice()) == 1
        check(hip.hipCtxDestroy(created))
        assert hip.hipCtxPopCurrent()[0] == hip.hipError_t.hipErrorInvalidContext
    finally:
        check(hip.hipSetDevice(0))
        check(hip.hipDevicePrimaryCtxRelease(0))
        check(hip.hipDevicePrimaryCtxRelease(1))


def test_the_stack_is_per_thread() -> None:
    ctx = check(hip.hipDevicePrimaryCtxRetain(0))
    seen: list[object] = []
    try:
        check(hip.hipCtxPushCurrent(ctx))
        t = threading.Thread(target=lambda: seen.append(hip.hipCtxPopCurrent()[0]))
        t.start()
        t.join()
        assert seen == [hip.hipError_t.hipErrorInvalidContext]
        assert int(check(hip.hipCtxPopCurrent())) == int(ctx)
    finally:
        check(hip.hipDevicePrimaryCtxRelease(0))
