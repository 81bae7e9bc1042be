"""The emulated libhipfile.so, tested through its C ABI.

These tests call the C library directly with ctypes (a declaration of the ABI
lives in this module) and use HIP-Python for device memory and streams, so
they check the library itself, independently of the package's shim.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hipfile import platforms
from hipfile.platforms import emulated

pytestmark = pytest.mark.emulated

hip = pytest.importorskip("hip").hip

# --------------------------------------------------------------------------
# The ABI, declared with ctypes.

SUCCESS = 0
DRIVER_NOT_INITIALIZED = 5001
DRIVER_CLOSING = 5006
IO_NOT_SUPPORTED = 5008
HIP_DRIVER_ERROR = 5011
HIP_POINTER_INVALID = 5012
HIP_MEMORY_TYPE_INVALID = 5013
HIP_POINTER_RANGE_ERROR = 5014
HIP_CONTEXT_MISMATCH = 5015
INVALID_FILE_TYPE = 5018
INVALID_FILE_OPEN_FLAG = 5019
DIO_NOT_SET = 5020
INVALID_VALUE = 5022
MEMORY_ALREADY_REGISTERED = 5023
MEMORY_NOT_REGISTERED = 5024
HANDLE_NOT_REGISTERED = 5027
HANDLE_ALREADY_REGISTERED = 5028
INTERNAL_ERROR = 5030
BATCH_FULL = 5037
MAX_IO = 0x7FFFF000

FIXED_BUF_OFFSET, FIXED_FILE_OFFSET, FIXED_FILE_SIZE, PAGE_ALIGNED_INPUTS = 1, 2, 4, 8
CANCELED, COMPLETE, FAILED = 8, 16, 64
READ, WRITE = 0, 1

# Parameter enums used below.
P_MAX_DIRECT_IO_KB, P_MAX_CACHE_KB, P_PER_BUFFER_CACHE_KB, P_MAX_PINNED_KB = 5, 6, 7, 8
P_IO_BATCHSIZE, P_POLL_THRESHOLD_KB, P_BATCH_TIMEOUT_MS = 9, 10, 11
P_USE_POLL_MODE, P_ALLOW_COMPAT, P_FORCE_COMPAT = 0, 1, 2
P_LOGGING_LEVEL = 0


class Error(ctypes.Structure):
    _fields_ = [("err", ctypes.c_int), ("hip_drv_err", ctypes.c_int)]


class _Handle(ctypes.Union):
    _fields_ = [("fd", ctypes.c_int), ("hFile", ctypes.c_void_p)]


class Descr(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("handle", _Handle), ("fs_ops", ctypes.c_void_p)]


class Nvfs(ctypes.Structure):
    _fields_ = [
        ("major_version", ctypes.c_uint),
        ("minor_version", ctypes.c_uint),
        ("poll_thresh_size", ctypes.c_uint64),
        ("max_direct_io_size", ctypes.c_uint64),
        ("driver_status_flags", ctypes.c_uint),
        ("driver_control_flags", ctypes.c_uint),
    ]


class Props(ctypes.Structure):
    _fields_ = [
        ("nvfs", Nvfs),
        ("feature_flags", ctypes.c_uint),
        ("max_device_cache_size", ctypes.c_uint64),
        ("per_buffer_cache_size", ctypes.c_uint64),
        ("max_device_pinned_mem_size", ctypes.c_uint64),
        ("max_batch_io_count", ctypes.c_uint),
        ("max_batch_io_timeout_msecs", ctypes.c_uint),
    ]


class BatchArgs(ctypes.Structure):
    _fields_ = [
        ("devPtr_base", ctypes.c_void_p),
        ("file_offset", ctypes.c_int64),
        ("devPtr_offset", ctypes.c_int64),
        ("size", ctypes.c_size_t),
    ]


class IOParams(ctypes.Structure):
    _fields_ = [
        ("mode", ctypes.c_int),
        ("batch", BatchArgs),
        ("fh", ctypes.c_void_p),
        ("opcode", ctypes.c_int),
        ("cookie", ctypes.c_void_p),
    ]


class IOEvent(ctypes.Structure):
    _fields_ = [("cookie", ctypes.c_void_p), ("status", ctypes.c_int), ("ret", ctypes.c_size_t)]


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


P = ctypes.c_void_p
SZ = ctypes.c_size_t
OFF = ctypes.c_int64
_SIGNATURES: dict[str, tuple[object, list[object]]] = {
    "hipFileGetVersion": (Error, [ctypes.POINTER(ctypes.c_uint)] * 3),
    "hipFileGetOpErrorString": (ctypes.c_char_p, [ctypes.c_int]),
    "hipFileDriverOpen": (Error, []),
    "hipFileDriverClose": (Error, []),
    "hipFileUseCount": (ctypes.c_int64, []),
    "hipFileDriverGetProperties": (Error, [ctypes.POINTER(Props)]),
    "hipFileDriverSetPollMode": (Error, [ctypes.c_bool, SZ]),
    "hipFileDriverSetMaxDirectIOSize": (Error, [SZ]),
    "hipFileDriverSetMaxCacheSize": (Error, [SZ]),
    "hipFileDriverSetMaxPinnedMemSize": (Error, [SZ]),
    "hipFileGetParameterSizeT": (Error, [ctypes.c_int, ctypes.POINTER(SZ)]),
    "hipFileGetParameterBool": (Error, [ctypes.c_int, ctypes.POINTER(ctypes.c_bool)]),
    "hipFileGetParameterString": (Error, [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]),
    "hipFileSetParameterSizeT": (Error, [ctypes.c_int, SZ]),
    "hipFileSetParameterBool": (Error, [ctypes.c_int, ctypes.c_bool]),
    "hipFileSetParameterString": (Error, [ctypes.c_int, ctypes.c_char_p]),
    "hipFileHandleRegister": (Error, [ctypes.POINTER(P), ctypes.POINTER(Descr)]),
    "hipFileHandleDeregister": (None, [P]),
    "hipFileBufRegister": (Error, [P, SZ, ctypes.c_int]),
    "hipFileBufDeregister": (Error, [P]),
    "hipFileRead": (ctypes.c_ssize_t, [P, P, SZ, OFF, OFF]),
    "hipFileWrite": (ctypes.c_ssize_t, [P, P, SZ, OFF, OFF]),
    "hipFileReadAsync": (Error, [P, P, P, P, P, P, P]),
    "hipFileWriteAsync": (Error, [P, P, P, P, P, P, P]),
    "hipFileStreamRegister": (Error, [P, ctypes.c_uint]),
    "hipFileStreamDeregister": (Error, [P]),
    "hipFileBatchIOSetUp": (Error, [ctypes.POINTER(P), ctypes.c_uint]),
    "hipFileBatchIOSubmit": (Error, [P, ctypes.c_uint, ctypes.POINTER(IOParams), ctypes.c_uint]),
    "hipFileBatchIOGetStatus": (
        Error,
        [P, ctypes.c_uint, ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(IOEvent), P],
    ),
    "hipFileBatchIOCancel": (Error, [P]),
    "hipFileBatchIODestroy": (None, [P]),
}

_lib: ctypes.CDLL | None = None


def _load() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        path = platforms.prefix("emulated") / "lib" / "libhipfile.so"
        lib = ctypes.CDLL(str(path), use_errno=True)
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
        _lib = lib
    return _lib


@pytest.fixture
def lib() -> ctypes.CDLL:
    return _load()


def code(result: Error) -> int:
    return int(result.err)


def addr(obj: object) -> int:
    return int(obj)  # type: ignore[call-overload,no-any-return]


def hip_check(result: tuple[object, ...]) -> object:
    err = result[0]
    assert int(err) == 0, f"HIP call failed: {err}"  # type: ignore[call-overload]
    return result[1] if len(result) > 1 else None


# --------------------------------------------------------------------------
# Fixtures: every resource is released by the fixture that made it.


def counters() -> dict[str, int]:
    return emulated.counters()


@pytest.fixture
def driver(lib: ctypes.CDLL) -> Iterator[None]:
    assert code(lib.hipFileDriverOpen()) == SUCCESS
    yield
    assert code(lib.hipFileDriverClose()) == SUCCESS


@pytest.fixture
def from_zero(lib: ctypes.CDLL) -> Iterator[None]:
    """Run with the driver's use count at 0, and give the count back after."""
    live = counters()
    if live["handles"] or live["buffers"] or live["batches"]:
        pytest.skip("registrations of other tests are alive; the count cannot drop to 0")
    before = lib.hipFileUseCount()
    for _ in range(before):
        assert code(lib.hipFileDriverClose()) == SUCCESS
    assert lib.hipFileUseCount() == 0
    yield
    while lib.hipFileUseCount() > 0:
        assert code(lib.hipFileDriverClose()) == SUCCESS
    for _ in range(before):
        assert code(lib.hipFileDriverOpen()) == SUCCESS


@pytest.fixture
def devmem() -> Iterator[Callable[[int], int]]:
    made: list[object] = []

    def alloc(size: int) -> int:
        ptr = hip_check(hip.hipMalloc(size))
        made.append(ptr)
        return addr(ptr)

    yield alloc
    for ptr in made:
        hip_check(hip.hipFree(ptr))


@pytest.fixture
def hostmem() -> Iterator[Callable[[int], int]]:
    made: list[object] = []

    def alloc(size: int) -> int:
        ptr = hip_check(hip.hipHostMalloc(size, 0))
        made.append(ptr)
        return addr(ptr)

    yield alloc
    for ptr in made:
        hip_check(hip.hipHostFree(ptr))


@pytest.fixture
def stream() -> Iterator[int]:
    s = hip_check(hip.hipStreamCreate())
    yield addr(s)
    hip_check(hip.hipStreamDestroy(s))


def sync(stream: int | None) -> None:
    hip_check(hip.hipStreamSynchronize(stream))


def put(ptr: int, data: bytes) -> None:
    hip_check(hip.hipMemcpy(ptr, data, len(data), hip.hipMemcpyKind.hipMemcpyHostToDevice))


def get(ptr: int, size: int) -> bytes:
    out = bytearray(size)
    hip_check(hip.hipMemcpy(out, ptr, size, hip.hipMemcpyKind.hipMemcpyDeviceToHost))
    return bytes(out)


def pattern(size: int, seed: int = 1) -> bytes:
    return bytes((i * 7 + seed) % 251 for i in range(size))


@pytest.fixture
def files(tmp_path: Path) -> Iterator[Callable[..., int]]:
    """open_file(content=b"", flags=os.O_RDWR) -> fd of a new file in tmp_path."""
    fds: list[int] = []

    def open_file(content: bytes = b"", flags: int = os.O_RDWR, name: str | None = None) -> int:
        path = tmp_path / (name or f"f{len(fds)}")
        path.write_bytes(content)
        fd = os.open(path, flags)
        fds.append(fd)
        return fd

    yield open_file
    for fd in fds:
        os.close(fd)


def register(lib: ctypes.CDLL, fd: int, kind: int = 1) -> tuple[int, int]:
    descr = Descr()
    descr.type = kind
    descr.handle.fd = fd
    fh = P()
    result = lib.hipFileHandleRegister(ctypes.byref(fh), ctypes.byref(descr))
    return code(result), (fh.value or 0)


@pytest.fixture
def handles(lib: ctypes.CDLL) -> Iterator[Callable[[int], int]]:
    """register_fd(fd) -> a registered handle, deregistered at teardown."""
    made: list[int] = []

    def register_fd(fd: int) -> int:
        rc, fh = register(lib, fd)
        assert rc == SUCCESS
        made.append(fh)
        return fh

    yield register_fd
    for fh in made:
        lib.hipFileHandleDeregister(fh)


class Slots:
    """The four slots of one stream-ordered operation, in pageable memory."""

    def __init__(self, size: int, file_offset: int = 0, buffer_offset: int = 0) -> None:
        self.size = ctypes.c_size_t(size)
        self.file_offset = ctypes.c_int64(file_offset)
        self.buffer_offset = ctypes.c_int64(buffer_offset)
        self.bytes = ctypes.c_ssize_t(-12345)

    def args(self) -> list[object]:
        return [
            ctypes.addressof(self.size),
            ctypes.addressof(self.file_offset),
            ctypes.addressof(self.buffer_offset),
            ctypes.addressof(self.bytes),
        ]


def read_async(lib: ctypes.CDLL, fh: int, buf: int, slots: Slots, stream: int | None) -> int:
    return code(lib.hipFileReadAsync(fh, buf, *slots.args(), stream))


def write_async(lib: ctypes.CDLL, fh: int, buf: int, slots: Slots, stream: int | None) -> int:
    return code(lib.hipFileWriteAsync(fh, buf, *slots.args(), stream))


# --------------------------------------------------------------------------
# Layouts, version, error strings.


def test_struct_sizes_match_the_abi() -> None:
    assert ctypes.sizeof(Error) == 8
    assert ctypes.sizeof(Descr) == 24
    assert ctypes.sizeof(IOParams) == 64
    assert IOParams.fh.offset == 40 and IOParams.cookie.offset == 56
    assert ctypes.sizeof(IOEvent) == 24
    assert ctypes.sizeof(Props) == 72


def test_every_abi_function_is_exported(lib: ctypes.CDLL) -> None:
    for name in _SIGNATURES:
        assert hasattr(lib, name), name


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


def test_error_strings(lib: ctypes.CDLL) -> None:
    unknown = lib.hipFileGetOpErrorString(4242)
    assert unknown == b"unknown error"
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


def test_calls_that_need_an_open_driver(
    lib: ctypes.CDLL, from_zero: None, devmem: Callable[[int], int], stream: int
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


def test_registration_opens_the_driver_and_close_drops_everything(
    lib: ctypes.CDLL, from_zero: None, devmem: Callable[[int], int], files: Callable[..., int]
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


@pytest.fixture
def saved_config(lib: ctypes.CDLL, driver: None) -> Iterator[None]:
    """Put every property and parameter back as it was."""
    sizes = {p: size_param(lib, p) for p in range(12)}
    bools = {p: bool_param(lib, p) for p in range(12)}
    strings = {}
    for p in range(3):
        text = ctypes.create_string_buffer(2048)
        assert code(lib.hipFileGetParameterString(p, text, 2048)) == SUCCESS
        strings[p] = text.value
    yield
    for p, size in sizes.items():
        assert code(lib.hipFileSetParameterSizeT(p, size)) == SUCCESS
    for p, flag in bools.items():
        assert code(lib.hipFileSetParameterBool(p, flag)) == SUCCESS
    for p, value in strings.items():
        assert code(lib.hipFileSetParameterString(p, value)) == SUCCESS


def props_of(lib: ctypes.CDLL) -> Props:
    props = Props()
    assert code(lib.hipFileDriverGetProperties(ctypes.byref(props))) == SUCCESS
    return props


def size_param(lib: ctypes.CDLL, p: int) -> int:
    v = SZ()
    assert code(lib.hipFileGetParameterSizeT(p, ctypes.byref(v))) == SUCCESS
    return int(v.value)


def bool_param(lib: ctypes.CDLL, p: int) -> bool:
    v = ctypes.c_bool()
    assert code(lib.hipFileGetParameterBool(p, ctypes.byref(v))) == SUCCESS
    return bool(v.value)


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


def test_batch_limit_follows_the_parameter(lib: ctypes.CDLL, saved_config: None) -> None:
    batch = P()
    assert code(lib.hipFileSetParameterSizeT(P_IO_BATCHSIZE, 4)) == SUCCESS
    assert code(lib.hipFileBatchIOSetUp(ctypes.byref(batch), 5)) == INVALID_VALUE
    assert code(lib.hipFileBatchIOSetUp(ctypes.byref(batch), 4)) == SUCCESS
    lib.hipFileBatchIODestroy(batch)


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


# --------------------------------------------------------------------------
# File handles.


def test_handle_registration_rules(
    lib: ctypes.CDLL, driver: None, files: Callable[..., int], tmp_path: Path
) -> None:
    fd = files(b"abc")
    rc, fh = register(lib, fd)
    assert rc == SUCCESS and fh
    assert counters()["handles"] == 1
    assert register(lib, fd)[0] == HANDLE_ALREADY_REGISTERED
    lib.hipFileHandleDeregister(fh)
    assert counters()["handles"] == 0

    assert register(lib, fd, kind=2)[0] == IO_NOT_SUPPORTED
    assert register(lib, fd, kind=3)[0] == IO_NOT_SUPPORTED
    assert register(lib, fd, kind=99)[0] == INVALID_FILE_TYPE
    assert register(lib, -1)[0] == INVALID_VALUE
    closed = os.open(tmp_path / "closed", os.O_RDWR | os.O_CREAT)
    os.close(closed)
    assert register(lib, closed)[0] == INVALID_VALUE
    dfd = os.open(tmp_path, os.O_RDONLY)
    try:
        assert register(lib, dfd)[0] == INVALID_FILE_TYPE
    finally:
        os.close(dfd)
    r, w = os.pipe()
    try:
        assert register(lib, r)[0] == INVALID_FILE_TYPE
    finally:
        os.close(r)
        os.close(w)
    assert register(lib, files(b"", os.O_WRONLY | os.O_APPEND))[0] == INVALID_FILE_OPEN_FLAG
    fh_out = P()
    assert code(lib.hipFileHandleRegister(ctypes.byref(fh_out), None)) == INVALID_VALUE
    descr = Descr(type=1)
    descr.handle.fd = fd
    assert code(lib.hipFileHandleRegister(None, ctypes.byref(descr))) == INVALID_VALUE
    assert counters()["handles"] == 0


def test_stale_and_unknown_handles_are_rejected_not_dereferenced(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    devmem: Callable[[int], int],
    stream: int,
) -> None:
    buf = devmem(4096)
    rc, fh = register(lib, files(b"data"))
    assert rc == SUCCESS
    lib.hipFileHandleDeregister(fh)
    # A newer registration never reuses the value of a stale handle.
    rc, fh2 = register(lib, files(b"more"))
    assert rc == SUCCESS and fh2 != fh
    for bad in (fh, 0x1234, 0xDEADBEEF000, 1):
        assert lib.hipFileRead(bad, buf, 4, 0, 0) == -HANDLE_NOT_REGISTERED
        assert lib.hipFileWrite(bad, buf, 4, 0, 0) == -HANDLE_NOT_REGISTERED
        assert read_async(lib, bad, buf, Slots(4), stream) == HANDLE_NOT_REGISTERED
        lib.hipFileHandleDeregister(bad)  # no-op
    assert lib.hipFileRead(None, buf, 4, 0, 0) == -HANDLE_NOT_REGISTERED
    assert counters()["handles"] == 1
    assert lib.hipFileRead(fh2, buf, 4, 0, 0) == 4
    lib.hipFileHandleDeregister(fh2)
    lib.hipFileHandleDeregister(fh2)
    assert counters()["handles"] == 0


def test_compat_mode_policy(
    lib: ctypes.CDLL,
    saved_config: None,
    files: Callable[..., int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plain = files(b"p" * 8192)
    direct = try_open_direct(files)
    monkeypatch.setenv("HIPFILE_ALLOW_COMPAT_MODE", "false")
    assert register(lib, plain)[0] == DIO_NOT_SET
    rc, fh = register(lib, direct)
    assert rc == SUCCESS
    lib.hipFileHandleDeregister(fh)
    monkeypatch.setenv("HIPFILE_FORCE_COMPAT_MODE", "true")
    rc, fh = register(lib, plain)
    assert rc == SUCCESS
    lib.hipFileHandleDeregister(fh)
    monkeypatch.delenv("HIPFILE_FORCE_COMPAT_MODE")
    monkeypatch.delenv("HIPFILE_ALLOW_COMPAT_MODE")
    # The parameters do the same when the environment says nothing.
    assert code(lib.hipFileSetParameterBool(P_ALLOW_COMPAT, False)) == SUCCESS
    assert register(lib, plain)[0] == DIO_NOT_SET
    assert code(lib.hipFileSetParameterBool(P_FORCE_COMPAT, True)) == SUCCESS
    rc, fh = register(lib, plain)
    assert rc == SUCCESS
    lib.hipFileHandleDeregister(fh)
    # The environment wins over the parameter.
    assert code(lib.hipFileSetParameterBool(P_FORCE_COMPAT, False)) == SUCCESS
    monkeypatch.setenv("HIPFILE_ALLOW_COMPAT_MODE", "true")
    rc, fh = register(lib, plain)
    assert rc == SUCCESS
    lib.hipFileHandleDeregister(fh)


def try_open_direct(files: Callable[..., int], content: bytes = b"d" * 8192) -> int:
    try:
        return files(content, os.O_RDWR | os.O_DIRECT)
    except OSError as exc:
        pytest.skip(f"the file system of tmp_path refuses O_DIRECT: {exc}")


def test_o_direct_files_take_aligned_and_unaligned_io(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
) -> None:
    data = pattern(3 * 4096)
    fd = try_open_direct(files, data)
    fh = handles(fd)
    base = devmem(6 * 4096)
    buf = base + (-base % 4096)  # page aligned: the O_DIRECT descriptor can take it
    assert lib.hipFileRead(fh, buf, 8192, 4096, 0) == 8192
    assert get(buf, 8192) == data[4096:]
    assert lib.hipFileRead(fh, buf, 8192, 8192, 0) == 4096  # short at the end of the file
    assert lib.hipFileRead(fh, buf, 1000, 17, 3) == 1000  # unaligned: the buffered path
    assert get(buf + 3, 1000) == data[17:1017]
    new = pattern(4096, seed=9)
    put(buf, new)
    assert lib.hipFileWrite(fh, buf, 4096, 4096, 0) == 4096
    assert lib.hipFileWrite(fh, buf, 10, 5, 0) == 10
    assert lib.hipFileRead(fh, buf + 8192, 4096, 4096, 0) == 4096
    assert get(buf + 8192, 4096) == new
    assert lib.hipFileRead(fh, buf + 8192, 10, 5, 0) == 10
    assert get(buf + 8192, 10) == new[:10]
    # Both paths see the same file.
    assert lib.hipFileRead(fh, buf + 4096, 4096, 0, 0) == 4096
    assert get(buf + 4096, 4096) == data[:5] + new[:10] + data[15:4096]
    # The caller's descriptor keeps its flags.
    assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT


# --------------------------------------------------------------------------
# Buffers.


def test_buffer_registration_rules(
    lib: ctypes.CDLL,
    driver: None,
    devmem: Callable[[int], int],
    hostmem: Callable[[int], int],
) -> None:
    buf = devmem(1 << 16)
    assert code(lib.hipFileBufRegister(buf, 1 << 16, 0)) == SUCCESS
    assert counters()["buffers"] == 1
    assert code(lib.hipFileBufRegister(buf, 4096, 0)) == MEMORY_ALREADY_REGISTERED
    assert code(lib.hipFileBufRegister(buf + 4096, 4096, 0)) == MEMORY_ALREADY_REGISTERED
    assert code(lib.hipFileBufDeregister(buf + 4096)) == MEMORY_NOT_REGISTERED
    assert code(lib.hipFileBufDeregister(buf)) == SUCCESS
    assert code(lib.hipFileBufDeregister(buf)) == MEMORY_NOT_REGISTERED
    # Neighbours that do not overlap are fine.
    assert code(lib.hipFileBufRegister(buf, 4096, 0)) == SUCCESS
    assert code(lib.hipFileBufRegister(buf + 4096, 4096, 0)) == SUCCESS
    assert counters()["buffers"] == 2
    assert code(lib.hipFileBufDeregister(buf)) == SUCCESS
    assert code(lib.hipFileBufDeregister(buf + 4096)) == SUCCESS

    assert code(lib.hipFileBufRegister(buf, 0, 0)) == INVALID_VALUE
    assert code(lib.hipFileBufRegister(None, 16, 0)) == INVALID_VALUE
    assert code(lib.hipFileBufDeregister(None)) == INVALID_VALUE
    assert code(lib.hipFileBufRegister(buf, (1 << 16) + 1, 0)) == HIP_POINTER_RANGE_ERROR
    assert code(lib.hipFileBufRegister(buf + 100, 1 << 16, 0)) == HIP_POINTER_RANGE_ERROR
    assert code(lib.hipFileBufRegister(hostmem(4096), 4096, 0)) == HIP_MEMORY_TYPE_INVALID
    plain = ctypes.create_string_buffer(4096)
    # memory the runtime does not know is hipMemoryTypeUnregistered (as ROCm)
    assert code(lib.hipFileBufRegister(ctypes.addressof(plain), 4096, 0)) == (
        HIP_MEMORY_TYPE_INVALID)
    assert counters()["buffers"] == 0


# --------------------------------------------------------------------------
# Synchronous I/O.


def test_sync_round_trip(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
) -> None:
    fd = files()
    fh = handles(fd)
    src, dst = devmem(10000), devmem(10000)
    data = pattern(10000)
    put(src, data)
    assert code(lib.hipFileBufRegister(src, 10000, 0)) == SUCCESS  # registered or not: both work
    assert lib.hipFileWrite(fh, src, 6000, 100, 1000) == 6000
    assert os.pread(fd, 6000, 100) == data[1000:7000]
    assert os.pread(fd, 100, 0) == bytes(100)  # the hole before the offset
    assert lib.hipFileRead(fh, dst, 5000, 600, 7) == 5000
    assert get(dst + 7, 5000) == data[1500:6500]
    assert lib.hipFileRead(fh, dst, 0, 0, 0) == 0
    assert code(lib.hipFileBufDeregister(src)) == SUCCESS


def test_short_reads_at_end_of_file(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
) -> None:
    data = pattern(1000)
    fh = handles(files(data))
    buf = devmem(8192)
    assert lib.hipFileRead(fh, buf, 4096, 900, 0) == 100
    assert get(buf, 100) == data[900:]
    assert lib.hipFileRead(fh, buf, 4096, 1000, 0) == 0
    assert lib.hipFileRead(fh, buf, 4096, 5000, 0) == 0


def test_negative_offsets_are_invalid_values(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
) -> None:
    fh = handles(files(b"z" * 100))
    buf = devmem(4096)
    for fn in (lib.hipFileRead, lib.hipFileWrite):
        for foff, boff in ((-1, 0), (0, -1), (-(2**63), 0)):
            assert fn(fh, buf, 10, foff, boff) == -INVALID_VALUE  # as AMD's library
    ctypes.set_errno(0)
    assert lib.hipFileRead(fh, buf, 10, 2**63 - 5, 0) == -1  # the end would overflow
    assert ctypes.get_errno() == errno.EINVAL


def test_sync_io_checks_the_buffer(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
    hostmem: Callable[[int], int],
) -> None:
    fh = handles(files(b"q" * 8192))
    buf = devmem(4096)
    assert lib.hipFileRead(fh, hostmem(4096), 10, 0, 0) == -HIP_MEMORY_TYPE_INVALID
    plain = ctypes.create_string_buffer(4096)
    # as AMD's library: unknown memory is a memory type hipFile refuses, and
    # a NULL buffer or a range outside the allocation is an invalid value
    assert lib.hipFileRead(fh, ctypes.addressof(plain), 10, 0, 0) == -HIP_MEMORY_TYPE_INVALID
    assert lib.hipFileRead(fh, None, 10, 0, 0) == -INVALID_VALUE
    assert lib.hipFileRead(fh, buf, 4097, 0, 0) == -INVALID_VALUE
    assert lib.hipFileRead(fh, buf, 10, 0, 4090) == -INVALID_VALUE
    assert lib.hipFileWrite(fh, buf, 1, 0, 4096) == -INVALID_VALUE
    assert lib.hipFileRead(fh, buf, 6, 0, 4090) == 6  # up to the last byte is fine
    assert plain.raw == bytes(4096)


def test_sizes_are_clamped_before_the_range_check(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
) -> None:
    # A buffer of exactly the largest transfer (address space only: nothing
    # touches most of it). A bigger size passes only because it is clamped.
    fh = handles(files(pattern(4096)))
    err, ptr = hip.hipMalloc(MAX_IO)
    if int(err) != 0:
        pytest.skip(f"no room for a {MAX_IO}-byte device buffer: {err}")
    hip_check(hip.hipFree(ptr))
    buf = devmem(MAX_IO)
    assert lib.hipFileRead(fh, buf, MAX_IO + (1 << 20), 0, 0) == 4096
    assert lib.hipFileRead(fh, buf, 2**64 - 1, 0, 0) == 4096
    assert lib.hipFileRead(fh, buf, MAX_IO + (1 << 20), 0, 4096) == -INVALID_VALUE
    assert lib.hipFileRead(fh, buf, MAX_IO - 4096, 0, 4096) == 4096


def test_system_errors_set_errno(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
) -> None:
    buf = devmem(4096)
    ro = handles(files(b"r" * 100, os.O_RDONLY))
    wo = handles(files(b"w" * 100, os.O_WRONLY))
    ctypes.set_errno(0)
    assert lib.hipFileWrite(ro, buf, 10, 0, 0) == -1
    assert ctypes.get_errno() == errno.EBADF
    ctypes.set_errno(0)
    assert lib.hipFileRead(wo, buf, 10, 0, 0) == -1
    assert ctypes.get_errno() == errno.EBADF


def test_concurrent_sync_io(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
) -> None:
    data = pattern(64 * 1024)
    fh = handles(files(data))
    bufs = [devmem(len(data)) for _ in range(4)]
    results: list[int] = []

    def work(buf: int) -> None:
        for _ in range(20):
            results.append(lib.hipFileRead(fh, buf, len(data), 0, 0))

    threads = [threading.Thread(target=work, args=(b,)) for b in bufs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [len(data)] * 80
    assert all(get(b, len(data)) == data for b in bufs)


# --------------------------------------------------------------------------
# Stream-ordered I/O.


def test_async_round_trip_with_deferred_completion(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
    stream: int,
) -> None:
    data = pattern(20000)
    fd = files(data)
    fh = handles(fd)
    buf = devmem(20000)
    emulated.set_completion_delay(200_000)
    slots = Slots(20000)
    assert read_async(lib, fh, buf, slots, stream) == SUCCESS
    assert slots.bytes.value == 0  # written 0 at submit, the result comes later
    assert counters()["inflight"] == 1
    time.sleep(0.05)
    assert slots.bytes.value == 0
    sync(stream)
    assert slots.bytes.value == 20000
    assert counters()["inflight"] == 0
    assert get(buf, 20000) == data

    out = Slots(5000, file_offset=30000, buffer_offset=10)
    assert write_async(lib, fh, buf, out, stream) == SUCCESS
    assert out.bytes.value == 0
    sync(stream)
    assert out.bytes.value == 5000
    assert os.pread(fd, 5000, 30000) == data[10:5010]


def test_async_on_the_null_stream(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
) -> None:
    data = pattern(3000)
    fh = handles(files(data))
    buf = devmem(4096)
    slots = Slots(3000)
    assert read_async(lib, fh, buf, slots, None) == SUCCESS
    sync(None)
    assert slots.bytes.value == 3000
    assert get(buf, 3000) == data


def test_unfixed_slots_are_read_when_the_operation_runs(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
    stream: int,
) -> None:
    data = pattern(8192)
    fh = handles(files(data))
    buf = devmem(8192)
    put(buf, bytes(8192))
    emulated.set_completion_delay(150_000)
    slots = Slots(4096, file_offset=0, buffer_offset=0)
    assert read_async(lib, fh, buf, slots, stream) == SUCCESS
    slots.size.value = 100  # shrink
    slots.file_offset.value = 1000
    slots.buffer_offset.value = 8
    sync(stream)
    assert slots.bytes.value == 100
    assert get(buf, 108) == bytes(8) + data[1000:1100]


@pytest.mark.parametrize("flag", [FIXED_FILE_SIZE, FIXED_FILE_OFFSET, FIXED_BUF_OFFSET])
def test_fixed_slots_are_copied_at_submit(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
    stream: int,
    flag: int,
) -> None:
    data = pattern(8192)
    fh = handles(files(data))
    buf = devmem(8192)
    assert code(lib.hipFileStreamRegister(stream, flag)) == SUCCESS
    try:
        emulated.set_completion_delay(150_000)
        slots = Slots(2000, file_offset=100, buffer_offset=16)
        assert read_async(lib, fh, buf, slots, stream) == SUCCESS
        slots.size.value, slots.file_offset.value, slots.buffer_offset.value = 50, 3000, 40
        sync(stream)
    finally:
        assert code(lib.hipFileStreamDeregister(stream)) == SUCCESS
    size = 2000 if flag == FIXED_FILE_SIZE else 50
    foff = 100 if flag == FIXED_FILE_OFFSET else 3000
    boff = 16 if flag == FIXED_BUF_OFFSET else 40
    assert slots.bytes.value == size
    assert get(buf + boff, size) == data[foff : foff + size]


def test_all_fixed_flags_ignore_every_change(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
    stream: int,
) -> None:
    data = pattern(8192)
    fh = handles(files(data))
    buf = devmem(8192)
    assert code(lib.hipFileStreamRegister(stream, 7)) == SUCCESS
    emulated.set_completion_delay(100_000)
    slots = Slots(1000, file_offset=10, buffer_offset=20)
    assert read_async(lib, fh, buf, slots, stream) == SUCCESS
    slots.size.value = 10**9  # even growth is ignored: the value was copied
    slots.file_offset.value = -5
    slots.buffer_offset.value = -5
    sync(stream)
    assert code(lib.hipFileStreamDeregister(stream)) == SUCCESS
    assert slots.bytes.value == 1000
    assert get(buf + 20, 1000) == data[10:1010]


def test_execution_errors_come_back_as_negative_counts(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
    stream: int,
) -> None:
    fh = handles(files(pattern(8192)))
    buf = devmem(8192)
    emulated.set_completion_delay(50_000)
    grow = Slots(100)
    negative = Slots(100)
    outside = Slots(100)
    assert read_async(lib, fh, buf, grow, stream) == SUCCESS
    assert read_async(lib, fh, buf, negative, stream) == SUCCESS
    assert read_async(lib, fh, buf, outside, stream) == SUCCESS
    grow.size.value = 101
    negative.file_offset.value = -1
    outside.buffer_offset.value = 8192 - 50
    sync(stream)
    assert grow.bytes.value == -INVALID_VALUE
    assert negative.bytes.value == -INVALID_VALUE
    assert outside.bytes.value == -INVALID_VALUE
    # A system error: reading through a write-only descriptor.
    wo = handles(files(b"x" * 100, os.O_WRONLY))
    slots = Slots(10)
    assert read_async(lib, wo, buf, slots, stream) == SUCCESS
    sync(stream)
    assert slots.bytes.value == -1


def test_async_submit_validation(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
    hostmem: Callable[[int], int],
    stream: int,
) -> None:
    fh = handles(files(pattern(8192)))
    buf = devmem(4096)
    ok = Slots(100)
    args = [fh, buf, *ok.args(), stream]
    for i in range(1, 6):  # each of the five pointers
        bad = list(args)
        bad[i] = None
        assert code(lib.hipFileReadAsync(*bad)) == INVALID_VALUE
        assert code(lib.hipFileWriteAsync(*bad)) == INVALID_VALUE
    for slots in (Slots(100, file_offset=-1), Slots(100, buffer_offset=-1), Slots(4097)):
        assert read_async(lib, fh, buf, slots, stream) == INVALID_VALUE
        assert slots.bytes.value == -12345  # untouched when rejected
    assert read_async(lib, fh, buf, Slots(10, buffer_offset=4090), stream) == INVALID_VALUE
    assert read_async(lib, fh, hostmem(4096), Slots(10), stream) == HIP_MEMORY_TYPE_INVALID
    plain = ctypes.create_string_buffer(64)
    assert read_async(lib, fh, ctypes.addressof(plain), Slots(10), stream) == (
        HIP_MEMORY_TYPE_INVALID)
    assert counters()["inflight"] == 0


def test_async_on_an_unknown_stream_reports_the_hip_error(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
) -> None:
    fh = handles(files(pattern(100)))
    buf = devmem(4096)
    dead = hip_check(hip.hipStreamCreate())
    dead_addr = addr(dead)
    hip_check(hip.hipStreamDestroy(dead))
    slots = Slots(10)
    result = lib.hipFileReadAsync(fh, buf, *slots.args(), dead_addr)
    assert result.err == HIP_DRIVER_ERROR and result.hip_drv_err != 0
    assert counters()["inflight"] == 0


def test_buffer_must_live_on_the_stream_device(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
) -> None:
    count = hip_check(hip.hipGetDeviceCount())
    if count < 2:  # type: ignore[operator]
        pytest.skip("needs two devices (HIPFILE_EMU_DEVICES=2)")
    fh = handles(files(pattern(100)))
    hip_check(hip.hipSetDevice(1))
    try:
        other = hip_check(hip.hipMalloc(4096))
    finally:
        hip_check(hip.hipSetDevice(0))
    s = hip_check(hip.hipStreamCreate())
    try:
        assert read_async(lib, fh, addr(other), Slots(10), addr(s)) == HIP_CONTEXT_MISMATCH
    finally:
        hip_check(hip.hipStreamDestroy(s))
        hip_check(hip.hipFree(other))


def test_stream_registration_rules(lib: ctypes.CDLL, stream: int) -> None:
    assert code(lib.hipFileStreamRegister(stream, 0x10)) == INVALID_VALUE
    assert code(lib.hipFileStreamRegister(stream, 0xF)) == SUCCESS
    assert counters()["streams_registered"] == 1
    assert code(lib.hipFileStreamRegister(stream, 0)) == INVALID_VALUE
    assert code(lib.hipFileStreamDeregister(stream)) == SUCCESS
    assert code(lib.hipFileStreamDeregister(stream)) == INVALID_VALUE
    assert code(lib.hipFileStreamRegister(None, 0)) == SUCCESS
    assert code(lib.hipFileStreamDeregister(None)) == SUCCESS
    assert code(lib.hipFileStreamRegister(0xBAD0, 0)) == INVALID_VALUE
    assert counters()["streams_registered"] == 0


def test_page_aligned_inputs_are_checked(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
    stream: int,
) -> None:
    data = pattern(16384)
    fh = handles(files(data))
    buf = devmem(16384)
    assert code(lib.hipFileStreamRegister(stream, PAGE_ALIGNED_INPUTS)) == SUCCESS
    try:
        assert read_async(lib, fh, buf, Slots(100), stream) == INVALID_VALUE
        assert read_async(lib, fh, buf, Slots(4096, file_offset=10), stream) == INVALID_VALUE
        slots = Slots(4096, file_offset=8192, buffer_offset=4096)
        assert read_async(lib, fh, buf, slots, stream) == SUCCESS
        sync(stream)
    finally:
        assert code(lib.hipFileStreamDeregister(stream)) == SUCCESS
    assert slots.bytes.value == 4096
    assert get(buf + 4096, 4096) == data[8192:12288]


def test_deregister_waits_for_operations_in_flight(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    devmem: Callable[[int], int],
    stream: int,
) -> None:
    data = pattern(4096)
    rc, fh = register(lib, files(data))
    assert rc == SUCCESS
    buf = devmem(4096)
    emulated.set_completion_delay(200_000)
    slots = Slots(4096)
    assert read_async(lib, fh, buf, slots, stream) == SUCCESS
    lib.hipFileHandleDeregister(fh)
    assert slots.bytes.value == 4096  # the operation ran before the handle went
    assert counters()["handles"] == 0
    sync(stream)
    assert get(buf, 4096) == data


# --------------------------------------------------------------------------
# Batch I/O.


@pytest.fixture
def batches(lib: ctypes.CDLL) -> Iterator[Callable[[int], int]]:
    made: list[int] = []

    def setup(max_nr: int) -> int:
        batch = P()
        assert code(lib.hipFileBatchIOSetUp(ctypes.byref(batch), max_nr)) == SUCCESS
        made.append(batch.value or 0)
        return batch.value or 0

    yield setup
    for batch in made:
        lib.hipFileBatchIODestroy(batch)


def params(entries: list[tuple[int, int, int, int, int, int]]) -> ctypes.Array[IOParams]:
    """(opcode, fh, buf, buffer_offset, file_offset, size) -> an array; cookie = index + 1."""
    arr = (IOParams * len(entries))()
    for i, (op, fh, buf, boff, foff, size) in enumerate(entries):
        arr[i].mode = 1
        arr[i].opcode = op
        arr[i].fh = fh
        arr[i].batch.devPtr_base = buf
        arr[i].batch.devPtr_offset = boff
        arr[i].batch.file_offset = foff
        arr[i].batch.size = size
        arr[i].cookie = i + 1
    return arr


def status(
    lib: ctypes.CDLL, batch: int, min_nr: int, capacity: int, timeout: float | None = None
) -> tuple[int, list[tuple[int, int, int]]]:
    events = (IOEvent * max(capacity, 1))()
    nr = ctypes.c_uint(capacity)
    ts = None
    if timeout is not None:
        ts = Timespec(int(timeout), int((timeout % 1) * 1e9))
    rc = code(
        lib.hipFileBatchIOGetStatus(
            batch, min_nr, ctypes.byref(nr), events, ctypes.byref(ts) if ts else None
        )
    )
    return rc, [(events[i].cookie, events[i].status, events[i].ret) for i in range(nr.value)]


def signed(ret: int) -> int:
    return ret - 2**64 if ret >= 2**63 else ret


def test_batch_setup_rules(lib: ctypes.CDLL, driver: None, batches: Callable[[int], int]) -> None:
    batch = P()
    assert code(lib.hipFileBatchIOSetUp(ctypes.byref(batch), 0)) == INVALID_VALUE
    assert code(lib.hipFileBatchIOSetUp(ctypes.byref(batch), 129)) == INVALID_VALUE
    assert code(lib.hipFileBatchIOSetUp(None, 4)) == INVALID_VALUE
    b = batches(128)
    assert counters()["batches"] == 1
    lib.hipFileBatchIODestroy(b)
    assert counters()["batches"] == 0
    lib.hipFileBatchIODestroy(b)  # unknown now: a no-op
    lib.hipFileBatchIODestroy(0x5555)
    assert code(lib.hipFileBatchIOCancel(b)) == INVALID_VALUE
    assert status(lib, b, 0, 4)[0] == INVALID_VALUE


def test_batch_reads_and_writes(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
    batches: Callable[[int], int],
) -> None:
    data = pattern(10000)
    fd = files(data)
    fh = handles(fd)
    buf = devmem(16384)
    batch = batches(8)
    arr = params(
        [
            (READ, fh, buf, 0, 0, 4000),
            (READ, fh, buf, 4000, 4000, 4000),
            (READ, fh, buf, 8000, 8000, 4000),  # 2000 bytes left in the file
            (READ, fh, buf, 12000, 20000, 100),  # past the end
        ]
    )
    assert code(lib.hipFileBatchIOSubmit(batch, 4, arr, 0)) == SUCCESS
    rc, events = status(lib, batch, 4, 8)
    assert rc == SUCCESS
    assert sorted(events) == [(1, COMPLETE, 4000), (2, COMPLETE, 4000), (3, COMPLETE, 2000),
                              (4, COMPLETE, 0)]  # fmt: skip
    assert get(buf, 10000) == data
    # Each completion is reported once.
    assert status(lib, batch, 0, 8, timeout=0) == (SUCCESS, [])

    put(buf, pattern(3000, seed=5))
    arr = params([(WRITE, fh, buf, 0, 20000, 3000)])
    assert code(lib.hipFileBatchIOSubmit(batch, 1, arr, 0)) == SUCCESS
    assert status(lib, batch, 1, 1) == (SUCCESS, [(1, COMPLETE, 3000)])
    assert os.pread(fd, 3000, 20000) == pattern(3000, seed=5)


def test_batch_submit_validation(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
    hostmem: Callable[[int], int],
    batches: Callable[[int], int],
) -> None:
    fh = handles(files(pattern(100)))
    buf = devmem(4096)
    batch = batches(2)
    good = (READ, fh, buf, 0, 0, 10)

    def submit(entries: list[tuple[int, int, int, int, int, int]], nr: int | None = None) -> int:
        arr = params(entries)
        return code(lib.hipFileBatchIOSubmit(batch, len(entries) if nr is None else nr, arr, 0))

    assert submit([good] * 3) == INVALID_VALUE  # more than max_nr
    assert submit([good], nr=0) == INVALID_VALUE
    assert submit([(2, fh, buf, 0, 0, 10)]) == INVALID_VALUE
    assert submit([(READ, fh, buf, 0, -1, 10)]) == INVALID_VALUE
    assert submit([(READ, fh, buf, -1, 0, 10)]) == INVALID_VALUE
    assert submit([good, (READ, 0x999, buf, 0, 0, 10)]) == HANDLE_NOT_REGISTERED
    assert submit([(READ, fh, buf, 0, 0, 4097)]) == HIP_POINTER_RANGE_ERROR
    assert submit([(READ, fh, hostmem(64), 0, 0, 10)]) == HIP_MEMORY_TYPE_INVALID
    arr = params([good])
    arr[0].mode = 0
    assert code(lib.hipFileBatchIOSubmit(batch, 1, arr, 0)) == INVALID_VALUE
    assert code(lib.hipFileBatchIOSubmit(batch, 1, params([good]), 1)) == INVALID_VALUE
    assert code(lib.hipFileBatchIOSubmit(batch, 1, None, 0)) == INVALID_VALUE
    assert code(lib.hipFileBatchIOSubmit(0x777, 1, params([good]), 0)) == INVALID_VALUE
    # Nothing was queued by the rejected calls.
    assert status(lib, batch, 0, 2, timeout=0.05) == (SUCCESS, [])

    # Capacity: slots come back when their completion is reported.
    assert submit([good, good]) == SUCCESS
    assert submit([good]) == BATCH_FULL
    rc, events = status(lib, batch, 1, 1)
    assert rc == SUCCESS and len(events) == 1
    assert submit([good]) == SUCCESS
    rc, events = status(lib, batch, 2, 2)
    assert rc == SUCCESS and [e[1:] for e in events] == [(COMPLETE, 10)] * 2

    nr = ctypes.c_uint(1)
    events_arr = (IOEvent * 1)()
    assert code(lib.hipFileBatchIOGetStatus(batch, 2, ctypes.byref(nr), events_arr, None)) == (
        INVALID_VALUE
    )
    assert code(lib.hipFileBatchIOGetStatus(batch, 0, None, events_arr, None)) == INVALID_VALUE
    assert code(lib.hipFileBatchIOGetStatus(batch, 0, ctypes.byref(nr), None, None)) == (
        INVALID_VALUE
    )
    bad_ts = Timespec(0, 2_000_000_000)
    assert (
        code(
            lib.hipFileBatchIOGetStatus(
                batch, 0, ctypes.byref(nr), events_arr, ctypes.byref(bad_ts)
            )
        )
        == INVALID_VALUE
    )


def test_batch_min_nr_and_timeouts(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
    batches: Callable[[int], int],
) -> None:
    fh = handles(files(pattern(8192)))
    buf = devmem(8192)
    batch = batches(4)
    emulated.set_completion_delay(300_000)
    arr = params([(READ, fh, buf, 0, 0, 100), (READ, fh, buf, 100, 100, 100)])
    assert code(lib.hipFileBatchIOSubmit(batch, 2, arr, 0)) == SUCCESS
    start = time.monotonic()
    assert status(lib, batch, 0, 4, timeout=0) == (SUCCESS, [])
    assert status(lib, batch, 1, 4, timeout=0.05) == (SUCCESS, [])
    assert time.monotonic() - start >= 0.04
    rc, events = status(lib, batch, 2, 4)  # no timeout: waits for both
    assert time.monotonic() - start >= 0.25
    assert rc == SUCCESS and sorted(events) == [(1, COMPLETE, 100), (2, COMPLETE, 100)]
    # min_nr above what is outstanding does not wait for ever.
    assert status(lib, batch, 3, 4) == (SUCCESS, [])


def test_batch_parameters_are_copied_at_submit(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
    batches: Callable[[int], int],
) -> None:
    data = pattern(8192)
    fh = handles(files(data))
    buf = devmem(8192)
    batch = batches(1)
    emulated.set_completion_delay(100_000)
    arr = params([(READ, fh, buf, 0, 1000, 500)])
    assert code(lib.hipFileBatchIOSubmit(batch, 1, arr, 0)) == SUCCESS
    arr[0].batch.size = 7
    arr[0].batch.file_offset = 0
    arr[0].cookie = 99
    assert status(lib, batch, 1, 1) == (SUCCESS, [(1, COMPLETE, 500)])
    assert get(buf, 500) == data[1000:1500]


def test_batch_cancel(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
    batches: Callable[[int], int],
) -> None:
    fh = handles(files(pattern(8192)))
    buf = devmem(8192)
    batch = batches(16)
    emulated.set_completion_delay(100_000)
    arr = params([(READ, fh, buf, i * 100, i * 100, 100) for i in range(16)])
    assert code(lib.hipFileBatchIOSubmit(batch, 16, arr, 0)) == SUCCESS
    time.sleep(0.02)
    assert code(lib.hipFileBatchIOCancel(batch)) == SUCCESS
    # Cancel waited for the running entries: everything is reported now.
    rc, events = status(lib, batch, 0, 16, timeout=0)
    assert rc == SUCCESS and len(events) == 16
    assert sorted(e[0] for e in events) == list(range(1, 17))
    canceled = [e for e in events if e[1] == CANCELED]
    complete = [e for e in events if e[1] == COMPLETE]
    assert len(canceled) >= 1 and len(canceled) + len(complete) == 16
    assert all(e[2] == 0 for e in canceled) and all(e[2] == 100 for e in complete)
    # The batch is usable again.
    emulated.reset()
    assert code(lib.hipFileBatchIOSubmit(batch, 1, params([(READ, fh, buf, 0, 0, 10)]), 0)) == 0
    assert status(lib, batch, 1, 1) == (SUCCESS, [(1, COMPLETE, 10)])


def test_batch_destroy_with_entries_in_flight(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    devmem: Callable[[int], int],
) -> None:
    rc, fh = register(lib, files(pattern(8192)))
    assert rc == SUCCESS
    buf = devmem(8192)
    batch = P()
    assert code(lib.hipFileBatchIOSetUp(ctypes.byref(batch), 8)) == SUCCESS
    emulated.set_completion_delay(100_000)
    arr = params([(READ, fh, buf, i * 100, 0, 100) for i in range(8)])
    assert code(lib.hipFileBatchIOSubmit(batch, 8, arr, 0)) == SUCCESS
    waiter_result: list[int] = []

    def wait_all() -> None:
        waiter_result.append(status(lib, batch.value or 0, 8, 8)[0])

    t = threading.Thread(target=wait_all)
    t.start()
    time.sleep(0.02)
    lib.hipFileBatchIODestroy(batch)
    t.join(timeout=5)
    assert not t.is_alive()
    assert waiter_result in ([INVALID_VALUE], [SUCCESS])
    assert counters()["batches"] == 0
    lib.hipFileHandleDeregister(fh)


def test_forked_child_sees_nothing_in_flight(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    devmem: Callable[[int], int],
) -> None:
    rc, fh = register(lib, files(pattern(8192)))
    assert rc == SUCCESS
    buf = devmem(8192)
    batch = P()
    assert code(lib.hipFileBatchIOSetUp(ctypes.byref(batch), 4)) == SUCCESS
    emulated.set_completion_delay(300_000)
    arr = params([(READ, fh, buf, 0, 0, 100), (READ, fh, buf, 100, 100, 100)])
    assert code(lib.hipFileBatchIOSubmit(batch, 2, arr, 0)) == SUCCESS
    time.sleep(0.02)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: only hipFile calls, then leave at once
        result = 1
        try:
            rc, events = status(lib, batch.value or 0, 2, 4, timeout=2)
            ok = rc == SUCCESS and sorted(e[1] for e in events) == [CANCELED, CANCELED]
            lib.hipfileEmuReset()
            one = params([(READ, fh, buf, 0, 0, 10)])
            ok = ok and code(lib.hipFileBatchIOSubmit(batch, 1, one, 0)) == SUCCESS
            ok = ok and status(lib, batch.value or 0, 1, 1, timeout=2) == (
                SUCCESS,
                [(1, COMPLETE, 10)],
            )
            lib.hipFileBatchIODestroy(batch)
            lib.hipFileHandleDeregister(fh)  # would wait for ever if a user were left
            result = 0 if ok else 3
        finally:
            os._exit(result)
    deadline = time.monotonic() + 20
    while True:
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung")
        time.sleep(0.01)
    assert os.waitstatus_to_exitcode(wait_status) == 0
    # The parent's entries were not disturbed.
    rc, events = status(lib, batch.value or 0, 2, 4)
    assert rc == SUCCESS and sorted(events) == [(1, COMPLETE, 100), (2, COMPLETE, 100)]
    lib.hipFileBatchIODestroy(batch)
    lib.hipFileHandleDeregister(fh)


# --------------------------------------------------------------------------
# Fault injection and short transfers.


def test_hooks_refuse_another_platform(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platforms, "_active", "rocm")
    for call in (
        emulated.counters,
        emulated.reset,
        lambda: emulated.set_completion_delay(1),
        lambda: emulated.set_short_transfer(1),
        lambda: emulated.inject_fault("read", errno.EIO),
    ):
        with pytest.raises(RuntimeError, match="emulated platform is not active"):
            call()


def test_inject_fault_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="unknown fault op"):
        emulated.inject_fault("open", errno.EIO)
    with pytest.raises(ValueError, match="bad errno"):
        emulated.inject_fault("read", 0)
    with pytest.raises(ValueError, match="bad errno"):
        emulated.inject_fault("read", 5000)
    with pytest.raises(ValueError):
        emulated.inject_fault("read", errno.EIO, count=-1)


def test_sync_faults(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
) -> None:
    fh = handles(files(pattern(1000)))
    buf = devmem(4096)
    emulated.inject_fault("read", errno.EIO, count=2, after=1)
    assert lib.hipFileRead(fh, buf, 100, 0, 0) == 100
    for _ in range(2):
        ctypes.set_errno(0)
        assert lib.hipFileRead(fh, buf, 100, 0, 0) == -1
        assert ctypes.get_errno() == errno.EIO
    assert lib.hipFileRead(fh, buf, 100, 0, 0) == 100
    # Bad calls do not consume a fault.
    emulated.inject_fault("write", errno.ENOSPC)
    assert lib.hipFileWrite(fh, buf, 10, -1, 0) == -INVALID_VALUE
    ctypes.set_errno(0)
    assert lib.hipFileWrite(fh, buf, 10, 0, 0) == -1
    assert ctypes.get_errno() == errno.ENOSPC
    assert lib.hipFileWrite(fh, buf, 10, 0, 0) == 10
    # A hipFile code instead of an errno.
    emulated.inject_fault("read", INTERNAL_ERROR)
    assert lib.hipFileRead(fh, buf, 10, 0, 0) == -INTERNAL_ERROR
    # reset clears pending faults.
    emulated.inject_fault("read", errno.EIO, count=5)
    emulated.reset()
    assert lib.hipFileRead(fh, buf, 10, 0, 0) == 10


def test_async_faults(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
    stream: int,
) -> None:
    fh = handles(files(pattern(1000)))
    buf = devmem(4096)
    emulated.inject_fault("read_async", errno.EIO, after=1)
    emulated.inject_fault("write_async", INTERNAL_ERROR)
    first, second, third, write = Slots(100), Slots(100), Slots(100), Slots(100)
    assert read_async(lib, fh, buf, first, stream) == SUCCESS
    assert read_async(lib, fh, buf, second, stream) == SUCCESS  # the submit still succeeds
    assert read_async(lib, fh, buf, third, stream) == SUCCESS
    assert write_async(lib, fh, buf, write, stream) == SUCCESS
    sync(stream)
    assert (first.bytes.value, second.bytes.value, third.bytes.value) == (100, -1, 100)
    assert write.bytes.value == -INTERNAL_ERROR


def test_register_faults(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    devmem: Callable[[int], int],
    stream: int,
) -> None:
    fd = files(b"abc")
    buf = devmem(4096)
    emulated.inject_fault("register", errno.ENOMEM, count=3)
    assert register(lib, fd)[0] == INTERNAL_ERROR
    assert code(lib.hipFileBufRegister(buf, 4096, 0)) == INTERNAL_ERROR
    assert code(lib.hipFileStreamRegister(stream, 0)) == INTERNAL_ERROR
    live = counters()
    assert (live["handles"], live["buffers"], live["streams_registered"]) == (0, 0, 0)
    emulated.inject_fault("register", HANDLE_ALREADY_REGISTERED)
    assert register(lib, fd)[0] == HANDLE_ALREADY_REGISTERED
    rc, fh = register(lib, fd)
    assert rc == SUCCESS
    lib.hipFileHandleDeregister(fh)


def test_batch_faults(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
    batches: Callable[[int], int],
) -> None:
    fh = handles(files(pattern(1000)))
    buf = devmem(4096)
    batch = batches(4)
    emulated.inject_fault("batch", errno.EIO, count=1, after=1)
    arr = params(
        [(READ, fh, buf, 0, 0, 10), (READ, fh, buf, 10, 0, 10), (READ, fh, buf, 20, 0, 10)]
    )
    assert code(lib.hipFileBatchIOSubmit(batch, 3, arr, 0)) == SUCCESS
    rc, events = status(lib, batch, 3, 4)
    assert rc == SUCCESS
    by_cookie = {c: (s, signed(r)) for c, s, r in events}
    assert by_cookie == {1: (COMPLETE, 10), 2: (FAILED, -errno.EIO), 3: (COMPLETE, 10)}
    emulated.inject_fault("batch", INTERNAL_ERROR)
    assert code(lib.hipFileBatchIOSubmit(batch, 1, params([(READ, fh, buf, 0, 0, 10)]), 0)) == 0
    rc, events = status(lib, batch, 1, 4)
    assert [(s, signed(r)) for _, s, r in events] == [(FAILED, -INTERNAL_ERROR)]


def test_short_transfers(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    handles: Callable[[int], int],
    devmem: Callable[[int], int],
    stream: int,
    batches: Callable[[int], int],
) -> None:
    data = pattern(10000)
    fh = handles(files(data))
    buf = devmem(10000)
    emulated.set_short_transfer(4096)
    assert lib.hipFileRead(fh, buf, 10000, 0, 0) == 4096
    assert get(buf, 4096) == data[:4096]
    slots = Slots(10000)
    assert read_async(lib, fh, buf, slots, stream) == SUCCESS
    sync(stream)
    assert slots.bytes.value == 4096
    batch = batches(1)
    assert code(lib.hipFileBatchIOSubmit(batch, 1, params([(READ, fh, buf, 0, 0, 10000)]), 0)) == 0
    assert status(lib, batch, 1, 1) == (SUCCESS, [(1, COMPLETE, 4096)])
    # A caller that loops gets everything.
    done = 0
    while done < len(data):
        n = lib.hipFileRead(fh, buf, len(data) - done, done, done)
        assert 0 < n <= 4096
        done += n
    assert get(buf, len(data)) == data
    emulated.set_short_transfer(None)
    assert lib.hipFileRead(fh, buf, 10000, 0, 0) == 10000


def test_counters_track_resources_and_reset_keeps_them(
    lib: ctypes.CDLL,
    driver: None,
    files: Callable[..., int],
    devmem: Callable[[int], int],
    stream: int,
) -> None:
    base = counters()
    assert set(base) >= {
        "handles", "buffers", "streams_registered", "inflight", "batches",
        "allocations", "host_allocations", "streams", "events",
    }  # fmt: skip
    buf = devmem(4096)
    rc, fh = register(lib, files(b"x"))
    assert rc == SUCCESS
    assert code(lib.hipFileBufRegister(buf, 4096, 0)) == SUCCESS
    assert code(lib.hipFileStreamRegister(stream, 0)) == SUCCESS
    batch = P()
    assert code(lib.hipFileBatchIOSetUp(ctypes.byref(batch), 1)) == SUCCESS
    emulated.reset()
    live = counters()
    for key in ("handles", "buffers", "streams_registered", "batches"):
        assert live[key] == base[key] + 1, key
    assert live["allocations"] >= 1 and live["streams"] >= 1
    lib.hipFileBatchIODestroy(batch)
    assert code(lib.hipFileStreamDeregister(stream)) == SUCCESS
    assert code(lib.hipFileBufDeregister(buf)) == SUCCESS
    lib.hipFileHandleDeregister(fh)
    live = counters()
    for key in ("handles", "buffers", "streams_registered", "batches", "inflight"):
        assert live[key] == base[key], key
