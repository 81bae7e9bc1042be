"""The emulated HIP runtime answers as ROCm's runtime does where AMD's
hipFile depends on it: pointer attributes of unknown memory, address ranges,
hipGetProcAddress and allocation alignment."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from _util import check, device_array
from hip import hip

E = hip.hipError_t
pytestmark = pytest.mark.emulated


def test_unknown_memory_is_unregistered_not_an_error() -> None:
    host = np.zeros(64, np.uint8)
    attrs = check(hip.hipPointerGetAttributes(host))
    assert attrs.type == hip.hipMemoryType.hipMemoryTypeUnregistered
    assert int(attrs.devicePointer or 0) == 0
    assert hip.hipGetLastError()[0] == E.hipSuccess


def test_address_range_of_unknown_memory_is_not_found() -> None:
    host = np.zeros(64, np.uint8)
    assert hip.hipMemGetAddressRange(host.ctypes.data)[0] == E.hipErrorNotFound
    assert hip.hipGetLastError()[0] == E.hipErrorNotFound
    with device_array(1 << 16) as dev:
        base, size = check(hip.hipMemGetAddressRange(int(dev) + 100))
        assert (int(base), size) == (int(dev), 1 << 16)


@pytest.mark.parametrize("size", [1, 100, 4096 + 1, 3 << 20])
def test_device_allocations_are_page_aligned(size: int) -> None:
    ptrs = [check(hip.hipMalloc(size)) for _ in range(4)]
    try:
        assert all(int(p) % 4096 == 0 for p in ptrs)
    finally:
        for p in ptrs:
            check(hip.hipFree(p))


def test_get_proc_address_finds_the_runtime_functions() -> None:
    err, pfn, status = hip.hipGetProcAddress(b"hipGetDeviceCount", 700, 0)
    assert err == E.hipSuccess
    assert status == hip.hipDriverProcAddressQueryResult.HIP_GET_PROC_ADDRESS_SUCCESS
    count_fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int))(int(pfn))
    n = ctypes.c_int(-1)
    assert count_fn(ctypes.byref(n)) == 0
    assert n.value == check(hip.hipGetDeviceCount())


def test_get_proc_address_of_an_unknown_name() -> None:
    err, pfn, status = hip.hipGetProcAddress(b"hipAmdFileRead", 700, 0)
    assert err == E.hipErrorInvalidValue
    assert pfn is None or int(pfn) == 0
    assert status == hip.hipDriverProcAddressQueryResult.HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
    assert hip.hipGetLastError()[0] == E.hipErrorInvalidValue
    assert hip.hipGetProcAddress(b"", 700, 0)[0] == E.hipErrorInvalidValue
