"""The hipFile C ABI for calling the library directly with ctypes.

Structures that cross the ABI come from the package's one declaration
(``hipfile.batch._abi``, numpy dtypes built from the shim's offsets), turned into
ctypes types; only ``hipFileError_t``, ``hipFileDriverProps_t`` (whose
members the tests read) and ``struct timespec`` are declared here. The
library is the active platform's, as the shim loads it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from _hipfile_ctypes import OFF as OFF
from _hipfile_ctypes import SZ as SZ
from _hipfile_ctypes import Error as Error
from _hipfile_ctypes import P as P
from _hipfile_ctypes import signatures

from hipfile._lib import _hipfile
from hipfile.batch._abi import DESCR, IO_EVENTS, IO_PARAMS
from hipfile.enums import OpError

hip = pytest.importorskip("hip").hip

#: Fixture types: ``files(content, flags)`` -> fd; ``devmem(size)`` and the
#: like -> an address or handle.
Files = Callable[..., int]
Alloc = Callable[[int], int]
#: ``opened(content, size)`` -> (registered file handle, device memory).
Opened = Callable[[bytes, int], tuple[int, int]]
#: ``opened_fd(content, size)`` -> (descriptor, registered file handle, device memory).
OpenedFd = Callable[[bytes, int], tuple[int, int, int]]
#: ``file_8k``: (8 KiB of pattern(), registered file handle, device memory).
File8k = tuple[bytes, int, int]

# --------------------------------------------------------------------------
# The ABI, declared with ctypes.

# Status codes, as the package declares them (hipfile.enums.OpError).
SUCCESS = int(OpError.SUCCESS)
DRIVER_NOT_INITIALIZED = int(OpError.DRIVER_NOT_INITIALIZED)
DRIVER_CLOSING = int(OpError.DRIVER_CLOSING)
IO_NOT_SUPPORTED = int(OpError.IO_NOT_SUPPORTED)
HIP_DRIVER_ERROR = int(OpError.HIP_DRIVER_ERROR)
HIP_POINTER_INVALID = int(OpError.HIP_POINTER_INVALID)
HIP_MEMORY_TYPE_INVALID = int(OpError.HIP_MEMORY_TYPE_INVALID)
HIP_POINTER_RANGE_ERROR = int(OpError.HIP_POINTER_RANGE_ERROR)
HIP_CONTEXT_MISMATCH = int(OpError.HIP_CONTEXT_MISMATCH)
INVALID_FILE_TYPE = int(OpError.INVALID_FILE_TYPE)
INVALID_FILE_OPEN_FLAG = int(OpError.INVALID_FILE_OPEN_FLAG)
DIO_NOT_SET = int(OpError.DIO_NOT_SET)
INVALID_VALUE = int(OpError.INVALID_VALUE)
MEMORY_ALREADY_REGISTERED = int(OpError.MEMORY_ALREADY_REGISTERED)
MEMORY_NOT_REGISTERED = int(OpError.MEMORY_NOT_REGISTERED)
HANDLE_NOT_REGISTERED = int(OpError.HANDLE_NOT_REGISTERED)
HANDLE_ALREADY_REGISTERED = int(OpError.HANDLE_ALREADY_REGISTERED)
INTERNAL_ERROR = int(OpError.INTERNAL_ERROR)
BATCH_FULL = int(OpError.BATCH_FULL)
MAX_IO = 0x7FFFF000

FIXED_BUF_OFFSET, FIXED_FILE_OFFSET, FIXED_FILE_SIZE, PAGE_ALIGNED_INPUTS = 1, 2, 4, 8
CANCELED, COMPLETE, FAILED = 8, 16, 64
READ, WRITE = 0, 1

# Parameter enums used below.
P_MAX_DIRECT_IO_KB, P_MAX_CACHE_KB, P_PER_BUFFER_CACHE_KB, P_MAX_PINNED_KB = 5, 6, 7, 8
P_IO_BATCHSIZE, P_POLL_THRESHOLD_KB, P_BATCH_TIMEOUT_MS = 9, 10, 11
P_USE_POLL_MODE, P_ALLOW_COMPAT, P_FORCE_COMPAT = 0, 1, 2
P_LOGGING_LEVEL = 0


class Nvfs(ctypes.Structure):
    _fields_ = [
        ("major_version", ctypes.c_uint), ("minor_version", ctypes.c_uint),
        ("poll_thresh_size", ctypes.c_uint64), ("max_direct_io_size", ctypes.c_uint64),
        ("driver_status_flags", ctypes.c_uint), ("driver_control_flags", ctypes.c_uint),
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


#: ``hipFileIOParams_t``: fields named as in :data:`hipfile.batch._abi.IO_PARAMS`
#: (``buffer``, ``buffer_offset``, ``file_offset``, ``size`` for the batch member).
IOParams: Any = np.ctypeslib.as_ctypes_type(IO_PARAMS)
#: ``hipFileIOEvents_t`` (``ret`` read as signed).
IOEvent: Any = np.ctypeslib.as_ctypes_type(IO_EVENTS)


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


SIGNATURES = signatures(props=ctypes.POINTER(Props), io_params=ctypes.POINTER(IOParams),
                        io_events=ctypes.POINTER(IOEvent))

_lib: ctypes.CDLL | None = None


def load() -> ctypes.CDLL:
    """The active platform's libhipfile.so (the file the shim loads)."""
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(_hipfile.load_library(), use_errno=True)
        for name, (restype, argtypes) in SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
        _lib = lib
    return _lib


def code(result: Error) -> int:
    return int(result.err)


def addr(obj: object) -> int:
    return int(obj)  # type: ignore[call-overload,no-any-return]


def hip_check(result: tuple[object, ...]) -> object:
    err = result[0]
    assert int(err) == 0, f"HIP call failed: {err}"  # type: ignore[call-overload]
    return result[1] if len(result) > 1 else None


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


def assert_landed(stream: int | None, slots: Any, where: int, expected: bytes) -> None:
    """Once ``stream`` has finished, a stream-ordered read reported
    ``len(expected)`` bytes in its slots, and device memory at ``where``
    holds ``expected``."""
    sync(stream)
    assert slots.bytes.value == len(expected)
    assert get(where, len(expected)) == expected


def counters() -> dict[str, int]:
    """The emulated platform's resource counters (tests marked ``emulated``)."""
    from hipfile.platforms import emulated

    return emulated.counters()


def descr(fd: int, kind: int = 1) -> np.ndarray:
    """A ``hipFileDescr_t`` for ``fd`` (pass ``.ctypes.data``)."""
    d = np.zeros(1, dtype=DESCR)
    d["type"] = kind
    d["fd"] = fd
    return d


def register(lib: ctypes.CDLL, fd: int, kind: int = 1) -> tuple[int, int]:
    fh = P()
    result = lib.hipFileHandleRegister(ctypes.byref(fh), descr(fd, kind).ctypes.data)
    return code(result), (fh.value or 0)


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


@contextlib.contextmanager
def stream_registered(lib: ctypes.CDLL, stream: int, flags: int) -> Iterator[None]:
    """``stream`` registered with ``flags`` (asserted), deregistered on leaving."""
    assert code(lib.hipFileStreamRegister(stream, flags)) == SUCCESS
    try:
        yield
    finally:
        assert code(lib.hipFileStreamDeregister(stream)) == SUCCESS


def write_async(lib: ctypes.CDLL, fh: int, buf: int, slots: Slots, stream: int | None) -> int:
    return code(lib.hipFileWriteAsync(fh, buf, *slots.args(), stream))


def try_open_direct(files: Any, content: bytes = b"d" * 8192) -> int:
    try:
        return int(files(content, os.O_RDWR | os.O_DIRECT))
    except OSError as exc:
        pytest.skip(f"the file system of tmp_path refuses O_DIRECT: {exc}")


def params(entries: list[tuple[int, int, int, int, int, int]]) -> Any:
    """(opcode, fh, buf, buffer_offset, file_offset, size) -> an array; cookie = index + 1."""
    arr = (IOParams * len(entries))()
    for i, (op, fh, buf, boff, foff, size) in enumerate(entries):
        arr[i].mode = 1
        arr[i].opcode = op
        arr[i].fh = fh
        arr[i].buffer = buf
        arr[i].buffer_offset = boff
        arr[i].file_offset = foff
        arr[i].size = size
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
