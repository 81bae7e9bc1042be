"""The C ABI: exported functions, version, error strings, driver, properties, parameters."""

from __future__ import annotations

import ctypes
import errno

import pytest
from _abi_calls import *  # noqa: F403

from hipfile.batch._abi import DRIVER_PROPS_SIZE

# --------------------------------------------------------------------------
# Layouts, version, error strings.


def test_struct_sizes_match_the_abi() -> None:
    assert ctypes.sizeof(Error) == 8
    assert ctypes.sizeof(IOParams) == 64
    assert IOParams.fh.offset == 40 and IOParams.cookie.offset == 56
    assert ctypes.sizeof(IOEvent) == 24
    assert ctypes.sizeof(Props) == 72 == DRIVER_PROPS_SIZE


def test_every_abi_function_is_exported(lib: ctypes.CDLL) -> None:
    for name in SIGNATURES:
        assert hasattr(lib, name), name


@pytest.mark.cufile_differs("NULL version outputs give InvalidValue")
def test_version(lib: ctypes.CDLL) -> None:
    v = [ctypes.c_uint(99) for _ in range(3)]
    assert code(lib.hipFileGetVersion(*(ctypes.byref(x) for x in v))) == SUCCESS
    assert [x.value for x in v] == [0, 2, 0]
    # NULL outputs are skipped, as AMD's library does
    null = ctypes.POINTER(ctypes.c_uint)()
    v[1].value = 99
    assert code(lib.hipFileGetVersion(null, ctypes.byref(v[1]), null)) == SUCCESS
    assert v[1].value == 2
    assert code(lib.hipFileGetVersion(null, null, null)) == SUCCESS


@pytest.mark.cufile_differs("its own text for unknown codes")
def test_error_strings(lib: ctypes.CDLL) -> None:
    unknown = lib.hipFileGetOpErrorString(4242)
    assert unknown in (b"unknown error", b"Unknown hipFile error")  # emulated, AMD's library
    assert lib.hipFileGetOpErrorString(5021) == unknown
    assert lib.hipFileGetOpErrorString(5032) == unknown
    assert lib.hipFileGetOpErrorString(-1) == unknown
    seen = set()
    for value in [0, *range(5001, 5021), *range(5022, 5032), *range(5033, 5039)]:
        text = lib.hipFileGetOpErrorString(value)
        assert text and text != unknown, value
        seen.add(text)
    assert len(seen) == 1 + 20 + 10 + 6
    assert b"O_DIRECT" in lib.hipFileGetOpErrorString(DIO_NOT_SET)


# --------------------------------------------------------------------------
# Driver life cycle, properties, parameters.


@pytest.mark.emulated
def test_driver_reference_count(lib: ctypes.CDLL, from_zero: None) -> None:
    assert code(lib.hipFileDriverClose()) == DRIVER_NOT_INITIALIZED
    assert code(lib.hipFileDriverOpen()) == SUCCESS
    assert code(lib.hipFileDriverOpen()) == SUCCESS
    assert lib.hipFileUseCount() == 2
    assert code(lib.hipFileDriverClose()) == SUCCESS
    assert lib.hipFileUseCount() == 1
    assert code(lib.hipFileDriverClose()) == SUCCESS
    assert lib.hipFileUseCount() == 0
    assert code(lib.hipFileDriverClose()) == DRIVER_NOT_INITIALIZED
    assert lib.hipFileUseCount() == 0


@pytest.mark.emulated
def test_calls_that_need_an_open_driver(
    lib: ctypes.CDLL, from_zero: None, devmem: Alloc, stream: int
) -> None:
    props = Props()
    assert code(lib.hipFileDriverGetProperties(ctypes.byref(props))) == DRIVER_NOT_INITIALIZED
    assert code(lib.hipFileDriverSetMaxDirectIOSize(1024)) == DRIVER_NOT_INITIALIZED
    assert code(lib.hipFileDriverSetPollMode(True, 4)) == DRIVER_NOT_INITIALIZED
    assert code(lib.hipFileDriverSetMaxCacheSize(1)) == DRIVER_NOT_INITIALIZED
    assert code(lib.hipFileDriverSetMaxPinnedMemSize(1)) == DRIVER_NOT_INITIALIZED
    buf = devmem(4096)
    ctypes.set_errno(0)
    assert lib.hipFileRead(0x1234, buf, 16, 0, 0) == -1
    assert ctypes.get_errno() == errno.EINVAL
    assert lib.hipFileUseCount() == 0
    # As AMD's library: a batch needs no open driver and leaves the count.
    batch = P()
    assert code(lib.hipFileBatchIOSetUp(ctypes.byref(batch), 4)) == SUCCESS
    assert lib.hipFileUseCount() == 0
    lib.hipFileBatchIODestroy(batch)
    # As AMD's library: stream-ordered calls open the driver implicitly.
    slots = Slots(16)
    assert read_async(lib, 0x1234, buf, slots, stream) == HANDLE_NOT_REGISTERED
    assert slots.bytes.value == -12345
    assert lib.hipFileUseCount() == 1
    assert code(lib.hipFileDriverClose()) == SUCCESS
    # Parameters need no open driver.
    value = SZ()
    assert code(lib.hipFileGetParameterSizeT(P_MAX_DIRECT_IO_KB, ctypes.byref(value))) == 0


@pytest.mark.emulated
def test_registration_opens_the_driver_and_close_drops_everything(
    lib: ctypes.CDLL, from_zero: None, devmem: Alloc, files: Files
) -> None:
    buf = devmem(8192)
    assert code(lib.hipFileBufRegister(buf, 8192, 0)) == SUCCESS
    assert lib.hipFileUseCount() == 1
    rc, fh = register(lib, files(b"x" * 100))
    assert rc == SUCCESS
    assert lib.hipFileUseCount() == 1
    batch = P()
    assert code(lib.hipFileBatchIOSetUp(ctypes.byref(batch), 2)) == SUCCESS
    live = counters()
    assert (live["handles"], live["buffers"], live["batches"]) == (1, 1, 1)

    assert code(lib.hipFileDriverClose()) == SUCCESS
    live = counters()
    assert (live["handles"], live["buffers"], live["batches"]) == (0, 0, 0)
    ctypes.set_errno(0)
    assert lib.hipFileRead(fh, buf, 10, 0, 0) == -1
    assert ctypes.get_errno() == errno.EINVAL
    assert code(lib.hipFileBufDeregister(buf)) == DRIVER_CLOSING  # as AMD's library
    lib.hipFileBatchIODestroy(batch)
    assert code(lib.hipFileDriverOpen()) == SUCCESS
    assert lib.hipFileRead(fh, buf, 10, 0, 0) == -HANDLE_NOT_REGISTERED
    nr = ctypes.c_uint(0)
    assert code(lib.hipFileBatchIOGetStatus(batch, 0, ctypes.byref(nr), None, None)) == (
        INVALID_VALUE
    )


@pytest.mark.cufile_differs("string parameters without a value give InvalidValue")
def test_default_properties(lib: ctypes.CDLL, saved_config: None) -> None:
    props = props_of(lib)
    assert (props.nvfs.major_version, props.nvfs.minor_version) == (0, 2)
    assert props.feature_flags & (1 << 1) and props.feature_flags & (1 << 2)
    assert props.nvfs.driver_control_flags & (1 << 1)  # compat mode allowed
    assert props.max_batch_io_count == size_param(lib, P_IO_BATCHSIZE) == 128
    assert props.nvfs.poll_thresh_size == size_param(lib, P_POLL_THRESHOLD_KB) == 4
    assert props.nvfs.max_direct_io_size == size_param(lib, P_MAX_DIRECT_IO_KB) == 16384
    assert props.max_batch_io_timeout_msecs == size_param(lib, P_BATCH_TIMEOUT_MS)
    assert code(lib.hipFileDriverGetProperties(None)) == INVALID_VALUE


@pytest.mark.cufile_differs("string parameters without a value give InvalidValue")
def test_setters_and_parameters_agree(lib: ctypes.CDLL, saved_config: None) -> None:
    assert code(lib.hipFileDriverSetMaxDirectIOSize(1024)) == SUCCESS
    assert props_of(lib).nvfs.max_direct_io_size == 1024
    assert size_param(lib, P_MAX_DIRECT_IO_KB) == 1024
    assert code(lib.hipFileSetParameterSizeT(P_MAX_DIRECT_IO_KB, 2048)) == SUCCESS
    assert props_of(lib).nvfs.max_direct_io_size == 2048

    assert code(lib.hipFileDriverSetPollMode(True, 64)) == SUCCESS
    props = props_of(lib)
    assert props.nvfs.driver_control_flags & 1 and props.nvfs.poll_thresh_size == 64
    assert bool_param(lib, P_USE_POLL_MODE) and size_param(lib, P_POLL_THRESHOLD_KB) == 64
    assert code(lib.hipFileSetParameterBool(P_USE_POLL_MODE, False)) == SUCCESS
    assert not props_of(lib).nvfs.driver_control_flags & 1

    assert code(lib.hipFileDriverSetMaxCacheSize(777)) == SUCCESS
    assert props_of(lib).max_device_cache_size == size_param(lib, P_MAX_CACHE_KB) == 777
    assert code(lib.hipFileDriverSetMaxPinnedMemSize(888)) == SUCCESS
    assert props_of(lib).max_device_pinned_mem_size == size_param(lib, P_MAX_PINNED_KB) == 888
    assert code(lib.hipFileSetParameterSizeT(P_PER_BUFFER_CACHE_KB, 99)) == SUCCESS
    assert props_of(lib).per_buffer_cache_size == 99
    assert code(lib.hipFileSetParameterSizeT(P_IO_BATCHSIZE, 16)) == SUCCESS
    assert props_of(lib).max_batch_io_count == 16
    assert code(lib.hipFileSetParameterSizeT(P_BATCH_TIMEOUT_MS, 250)) == SUCCESS
    assert props_of(lib).max_batch_io_timeout_msecs == 250
    assert code(lib.hipFileSetParameterBool(P_ALLOW_COMPAT, False)) == SUCCESS
    assert not props_of(lib).nvfs.driver_control_flags & 2
    # A parameter that is no property keeps its value too.
    assert code(lib.hipFileSetParameterSizeT(2, 7)) == SUCCESS
    assert size_param(lib, 2) == 7
    assert code(lib.hipFileSetParameterBool(5, True)) == SUCCESS
    assert bool_param(lib, 5)


@pytest.mark.cufile_differs("string parameters without a value give InvalidValue")
def test_batch_limit_follows_the_parameter(lib: ctypes.CDLL, saved_config: None) -> None:
    batch = P()
    assert code(lib.hipFileSetParameterSizeT(P_IO_BATCHSIZE, 4)) == SUCCESS
    assert code(lib.hipFileBatchIOSetUp(ctypes.byref(batch), 5)) == INVALID_VALUE
    assert code(lib.hipFileBatchIOSetUp(ctypes.byref(batch), 4)) == SUCCESS
    lib.hipFileBatchIODestroy(batch)


@pytest.mark.cufile_differs("string parameters without a value give InvalidValue")
def test_parameter_errors(lib: ctypes.CDLL, saved_config: None) -> None:
    v, b = SZ(), ctypes.c_bool()
    s = ctypes.create_string_buffer(64)
    for bad in (12, -1, 1000):
        assert code(lib.hipFileGetParameterSizeT(bad, ctypes.byref(v))) == INVALID_VALUE
        assert code(lib.hipFileSetParameterSizeT(bad, 1)) == INVALID_VALUE
        assert code(lib.hipFileGetParameterBool(bad, ctypes.byref(b))) == INVALID_VALUE
        assert code(lib.hipFileSetParameterBool(bad, True)) == INVALID_VALUE
    for bad in (3, -1):
        assert code(lib.hipFileGetParameterString(bad, s, 64)) == INVALID_VALUE
        assert code(lib.hipFileSetParameterString(bad, b"x")) == INVALID_VALUE
    assert code(lib.hipFileGetParameterSizeT(0, None)) == INVALID_VALUE
    assert code(lib.hipFileGetParameterBool(0, None)) == INVALID_VALUE
    assert code(lib.hipFileGetParameterString(0, None, 64)) == INVALID_VALUE
    assert code(lib.hipFileSetParameterString(0, None)) == INVALID_VALUE
    assert code(lib.hipFileSetParameterSizeT(P_MAX_DIRECT_IO_KB, 0)) == INVALID_VALUE
    assert code(lib.hipFileSetParameterSizeT(P_IO_BATCHSIZE, 0)) == INVALID_VALUE
    assert code(lib.hipFileSetParameterSizeT(P_IO_BATCHSIZE, 2**32)) == INVALID_VALUE
    assert code(lib.hipFileDriverSetMaxDirectIOSize(0)) == INVALID_VALUE
    assert code(lib.hipFileSetParameterString(P_LOGGING_LEVEL, b"x" * 5000)) == INVALID_VALUE


@pytest.mark.cufile_differs("string parameters without a value give InvalidValue")
def test_string_parameters(lib: ctypes.CDLL, saved_config: None) -> None:
    s = ctypes.create_string_buffer(64)
    assert code(lib.hipFileGetParameterString(P_LOGGING_LEVEL, s, 64)) == SUCCESS
    assert s.value == b"ERROR"
    assert code(lib.hipFileSetParameterString(P_LOGGING_LEVEL, b"DEBUG")) == SUCCESS
    assert code(lib.hipFileGetParameterString(P_LOGGING_LEVEL, s, 64)) == SUCCESS
    assert s.value == b"DEBUG"
    # The value must fit with its NUL; a short buffer is left untouched.
    small = ctypes.create_string_buffer(b"?????", 5)
    assert code(lib.hipFileGetParameterString(P_LOGGING_LEVEL, small, 5)) == INVALID_VALUE
    assert small.raw == b"?????"
    assert code(lib.hipFileGetParameterString(P_LOGGING_LEVEL, small, 0)) == INVALID_VALUE
    exact = ctypes.create_string_buffer(6)
    assert code(lib.hipFileGetParameterString(P_LOGGING_LEVEL, exact, 6)) == SUCCESS
    assert exact.value == b"DEBUG"
    assert code(lib.hipFileSetParameterString(2, b"/tmp/logs")) == SUCCESS
    assert code(lib.hipFileGetParameterString(2, s, 64)) == SUCCESS
    assert s.value == b"/tmp/logs"
