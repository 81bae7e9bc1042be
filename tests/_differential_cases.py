"""C-level cases run against one libhipfile; prints their observations as JSON.

Run as ``python _differential_cases.py LIBDIR LIBNAME WORKDIR``: loads
``LIBDIR/libamdhip64.so`` and ``LIBDIR/LIBNAME`` by path with ctypes (one HIP
runtime per process) and runs every case of :data:`CASES`, each starting with
the driver closed. ``tests/test_amd_differential.py`` runs it once over AMD's
library and once over the emulated one and compares the answers.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from _hipfile_ctypes import OFF, SZ, Error, P, signatures

PAGE = 4096
FILE_SIZE = 10000


class _Handle(ctypes.Union):
    _fields_ = [("fd", ctypes.c_int), ("hFile", ctypes.c_void_p)]


class Descr(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("handle", _Handle), ("fs_ops", ctypes.c_void_p)]


SIGNATURES = signatures(descr=ctypes.POINTER(Descr))


class Env:
    """The two libraries of one prefix and a data file."""

    def __init__(self, libdir: str, libname: str, workdir: str) -> None:
        mode = ctypes.RTLD_GLOBAL
        self.hip = ctypes.CDLL(os.path.join(libdir, "libamdhip64.so"), mode=mode)
        self.lib = ctypes.CDLL(os.path.join(libdir, libname), use_errno=True)
        for name, (res, args) in SIGNATURES.items():
            fn = getattr(self.lib, name)
            fn.restype, fn.argtypes = res, args
        self.hip.hipMalloc.argtypes = [ctypes.POINTER(P), SZ]
        self.hip.hipFree.argtypes = [P]
        self.hip.hipHostMalloc.argtypes = [ctypes.POINTER(P), SZ, ctypes.c_uint]
        self.hip.hipHostFree.argtypes = [P]
        self.hip.hipStreamCreate.argtypes = [ctypes.POINTER(P)]
        self.hip.hipStreamDestroy.argtypes = [P]
        self.hip.hipMemcpy.argtypes = [P, P, SZ, ctypes.c_int]
        self.path = os.path.join(workdir, "data.bin")
        self.data = bytes((i * 7 + 3) & 0xFF for i in range(FILE_SIZE))
        with open(self.path, "wb") as f:
            f.write(self.data)

    # -- helpers --------------------------------------------------------------

    def close_driver(self) -> None:
        for _ in range(64):
            if self.lib.hipFileUseCount() <= 0:
                return
            self.lib.hipFileDriverClose()

    def use_count(self) -> int:
        return int(self.lib.hipFileUseCount())

    @contextlib.contextmanager
    def device(self, size: int) -> Iterator[int]:
        """Device memory of ``size`` bytes, freed on leaving."""
        p = P()
        assert self.hip.hipMalloc(ctypes.byref(p), size) == 0
        try:
            yield int(p.value)
        finally:
            self.hip.hipFree(p)

    @contextlib.contextmanager
    def pinned(self, size: int) -> Iterator[int]:
        """Pinned host memory of ``size`` bytes, freed on leaving."""
        p = P()
        assert self.hip.hipHostMalloc(ctypes.byref(p), size, 0) == 0
        try:
            yield int(p.value)
        finally:
            self.hip.hipHostFree(p)

    def register(self, flags: int = os.O_RDWR) -> tuple[int, int, Error]:
        """Opens the data file and registers it: (fd, handle, status)."""
        fd = os.open(self.path, flags)
        descr = Descr(type=1)
        descr.handle.fd = fd
        fh = P()
        e = self.lib.hipFileHandleRegister(ctypes.byref(fh), ctypes.byref(descr))
        return fd, int(fh.value or 0), e

    @contextlib.contextmanager
    def registered(self, flags: int = os.O_RDWR) -> Iterator[tuple[int, int, Error]]:
        """:meth:`register`, then on leaving the handle deregistered (if there
        is one) and the descriptor closed."""
        fd, handle, e = self.register(flags)
        try:
            yield fd, handle, e
        finally:
            if handle:
                self.lib.hipFileHandleDeregister(handle)
            os.close(fd)

    def stale_handle(self) -> int:
        """A handle that was registered and has been deregistered since."""
        with self.registered() as (_, handle, _):
            return handle

    def io(self, fn: Callable[..., int], *args: Any) -> dict[str, int]:
        ctypes.set_errno(0)
        ret = int(fn(*args))
        return {"ret": ret, "errno": ctypes.get_errno() if ret == -1 else 0}

    def device_bytes(self, dev: int, n: int) -> bytes:
        buf = ctypes.create_string_buffer(n)
        assert self.hip.hipMemcpy(ctypes.addressof(buf), dev, n, 2) == 0
        return buf.raw


def code(e: Error) -> int:
    return int(e.err)


# -- cases ----------------------------------------------------------------------


def case_version(env: Env) -> dict[str, Any]:
    v = [ctypes.c_uint(99) for _ in range(3)]
    e = env.lib.hipFileGetVersion(*(ctypes.byref(x) for x in v))
    return {"err": code(e), "version": [x.value for x in v]}


def case_version_null_outputs(env: Env) -> dict[str, Any]:
    return {"err": code(env.lib.hipFileGetVersion(None, None, None))}


def case_use_count_counts(env: Env) -> dict[str, Any]:
    out = [env.use_count()]
    out.append(code(env.lib.hipFileDriverOpen()))
    out.append(code(env.lib.hipFileDriverOpen()))
    out.append(env.use_count())
    out.append(code(env.lib.hipFileDriverClose()))
    out.append(code(env.lib.hipFileDriverClose()))
    out.append(env.use_count())
    out.append(code(env.lib.hipFileDriverClose()))
    return {"sequence": out}


def case_buf_register_null_opens_driver(env: Env) -> dict[str, Any]:
    e = env.lib.hipFileBufRegister(None, PAGE, 0)
    return {"err": code(e), "use_count": env.use_count()}


def case_read_async_null_opens_driver(env: Env) -> dict[str, Any]:
    e = env.lib.hipFileReadAsync(None, None, None, None, None, None, None)
    return {"err": code(e), "use_count": env.use_count()}


def case_write_async_null_opens_driver(env: Env) -> dict[str, Any]:
    e = env.lib.hipFileWriteAsync(None, None, None, None, None, None, None)
    return {"err": code(e), "use_count": env.use_count()}


def case_batch_setup_driver_closed(env: Env) -> dict[str, Any]:
    b = P()
    e = env.lib.hipFileBatchIOSetUp(ctypes.byref(b), 4)
    out = {"err": code(e), "handle": bool(b.value), "use_count": env.use_count()}
    if code(e) == 0:
        env.lib.hipFileBatchIODestroy(b)
    return out


def case_batch_setup_bad_arguments(env: Env) -> dict[str, Any]:
    env.lib.hipFileDriverOpen()
    b = P()
    return {"null_out": code(env.lib.hipFileBatchIOSetUp(None, 4)),
            "zero": code(env.lib.hipFileBatchIOSetUp(ctypes.byref(b), 0))}


def case_buf_deregister_unknown_driver_closed(env: Env) -> dict[str, Any]:
    with env.device(PAGE) as dev:
        return {"err": code(env.lib.hipFileBufDeregister(dev)), "use_count": env.use_count()}


def case_buf_deregister_unknown_driver_open(env: Env) -> dict[str, Any]:
    env.lib.hipFileDriverOpen()
    with env.device(PAGE) as dev:
        return {"err": code(env.lib.hipFileBufDeregister(dev))}


def case_buf_register_kinds(env: Env) -> dict[str, Any]:
    env.lib.hipFileDriverOpen()
    host = ctypes.create_string_buffer(PAGE)
    with env.pinned(PAGE) as pinned, env.device(2 * PAGE) as dev:
        out = {
            "host": code(env.lib.hipFileBufRegister(ctypes.addressof(host), PAGE, 0)),
            "pinned": code(env.lib.hipFileBufRegister(pinned, PAGE, 0)),
            "device": code(env.lib.hipFileBufRegister(dev, 2 * PAGE, 0)),
            "device_again": code(env.lib.hipFileBufRegister(dev, 2 * PAGE, 0)),
            "deregister": code(env.lib.hipFileBufDeregister(dev)),
            "deregister_again": code(env.lib.hipFileBufDeregister(dev)),
        }
        return out


def case_handle_register_bad_arguments(env: Env) -> dict[str, Any]:
    descr = Descr(type=1)
    descr.handle.fd = -1
    fh = P()
    out = {"bad_fd": code(env.lib.hipFileHandleRegister(ctypes.byref(fh), ctypes.byref(descr))),
           "use_count": env.use_count(),
           "null_descr": code(env.lib.hipFileHandleRegister(ctypes.byref(fh), None))}
    with env.registered() as (fd, _, e):
        out["ok"] = code(e)
        again = Descr(type=1)
        again.handle.fd = fd
        fh2 = P()
        out["twice"] = code(env.lib.hipFileHandleRegister(ctypes.byref(fh2), ctypes.byref(again)))
    return out


def _read_into(env: Env, buffer: int, size: int, offset: int, flags: int = os.O_RDWR,
               buffer_offset: int = 0) -> dict[str, Any]:
    with env.registered(flags) as (_, handle, e):
        if code(e):
            return {"register": code(e)}
        return env.io(env.lib.hipFileRead, handle, buffer, size, offset, buffer_offset)


def case_read_host_buffer(env: Env) -> dict[str, Any]:
    host = ctypes.create_string_buffer(PAGE)
    return _read_into(env, ctypes.addressof(host), PAGE, 0)


def case_read_pinned_buffer(env: Env) -> dict[str, Any]:
    with env.pinned(PAGE) as pinned:
        return _read_into(env, pinned, PAGE, 0)


def _read_device(env: Env, size: int, offset: int, flags: int = os.O_RDWR) -> dict[str, Any]:
    with env.device(4 * PAGE) as dev:
        out = _read_into(env, dev, size, offset, flags)
        if out.get("ret", 0) > 0:
            got = env.device_bytes(dev, out["ret"])
            out["data_ok"] = got == env.data[offset:offset + out["ret"]]
        return out


def case_read_full(env: Env) -> dict[str, Any]:
    return _read_device(env, 2 * PAGE, 0)


def case_read_across_eof(env: Env) -> dict[str, Any]:
    return _read_device(env, 2 * PAGE, 2 * PAGE)


def case_read_at_eof(env: Env) -> dict[str, Any]:
    return _read_device(env, PAGE, FILE_SIZE)


def case_read_past_eof(env: Env) -> dict[str, Any]:
    return _read_device(env, PAGE, 3 * FILE_SIZE)


def case_read_negative_offset(env: Env) -> dict[str, Any]:
    return _read_device(env, PAGE, -PAGE)


def case_read_outside_buffer(env: Env) -> dict[str, Any]:
    with env.device(PAGE) as dev:
        return {"size": _read_into(env, dev, 2 * PAGE, 0),
                "buffer_offset": _read_into(env, dev, 100, 0, buffer_offset=PAGE)}


def case_read_null_buffer(env: Env) -> dict[str, Any]:
    return _read_into(env, 0, PAGE, 0)


def case_read_null_handle(env: Env) -> dict[str, Any]:
    env.lib.hipFileDriverOpen()
    with env.device(PAGE) as dev:
        return env.io(env.lib.hipFileRead, None, dev, PAGE, 0, 0)


def case_read_negative_buffer_offset(env: Env) -> dict[str, Any]:
    with env.device(2 * PAGE) as dev:
        return _read_into(env, dev + PAGE, 100, 0, buffer_offset=-100)


def case_read_interior_pointer(env: Env) -> dict[str, Any]:
    with env.device(2 * PAGE) as dev:
        return _read_into(env, dev + PAGE, 100, 0)


def case_read_end_beyond_max_offset(env: Env) -> dict[str, Any]:
    return _read_device(env, PAGE, (1 << 63) - 100)


def case_buf_register_ranges(env: Env) -> dict[str, Any]:
    env.lib.hipFileDriverOpen()
    with env.device(2 * PAGE) as dev:
        out = {"too_long": code(env.lib.hipFileBufRegister(dev, 3 * PAGE, 0)),
               "zero": code(env.lib.hipFileBufRegister(dev, 0, 0)),
               "interior": code(env.lib.hipFileBufRegister(dev + PAGE, PAGE, 0))}
        out["overlap"] = code(env.lib.hipFileBufRegister(dev, 2 * PAGE, 0))
        out["interior_deregister"] = code(env.lib.hipFileBufDeregister(dev + PAGE))
        if out["overlap"] == 0:
            env.lib.hipFileBufDeregister(dev)
        return out


def case_write_host_buffer(env: Env) -> dict[str, Any]:
    host = ctypes.create_string_buffer(PAGE)
    with env.registered() as (_, handle, _):
        return env.io(env.lib.hipFileWrite, handle, ctypes.addressof(host), PAGE, 0, 0)


def case_read_driver_closed(env: Env) -> dict[str, Any]:
    with env.device(PAGE) as dev, env.registered() as (_, handle, _):
        env.close_driver()
        return env.io(env.lib.hipFileRead, handle, dev, PAGE, 0, 0)


def case_read_async_driver_closed(env: Env) -> dict[str, Any]:
    slots = [SZ(PAGE), OFF(0), OFF(0), ctypes.c_ssize_t(-7)]
    with env.device(PAGE) as dev, env.registered() as (_, handle, _):
        env.close_driver()
        e = env.lib.hipFileReadAsync(handle, dev, *(ctypes.byref(x) for x in slots), None)
        return {"err": code(e), "use_count": env.use_count()}


def case_read_async_unregistered_handle(env: Env) -> dict[str, Any]:
    env.lib.hipFileDriverOpen()
    with env.device(PAGE) as dev:
        handle = env.stale_handle()
        slots = [SZ(PAGE), OFF(0), OFF(0), ctypes.c_ssize_t(-7)]
        e = env.lib.hipFileReadAsync(handle, dev, *(ctypes.byref(x) for x in slots), None)
        return {"err": code(e)}


def case_read_unregistered_handle(env: Env) -> dict[str, Any]:
    env.lib.hipFileDriverOpen()
    with env.device(PAGE) as dev:
        return env.io(env.lib.hipFileRead, env.stale_handle(), dev, PAGE, 0, 0)


def case_read_o_direct_aligned(env: Env) -> dict[str, Any]:
    return _read_device(env, 2 * PAGE, PAGE, os.O_RDONLY | os.O_DIRECT)


def case_read_o_direct_unaligned_offset(env: Env) -> dict[str, Any]:
    return _read_device(env, 1000, 100, os.O_RDONLY | os.O_DIRECT)


def case_read_o_direct_unaligned_size(env: Env) -> dict[str, Any]:
    return _read_device(env, PAGE + 1, 0, os.O_RDONLY | os.O_DIRECT)


def case_write_then_read_back(env: Env) -> dict[str, Any]:
    with env.device(PAGE) as dev:
        pattern = bytes(range(256)) * (PAGE // 256)
        assert env.hip.hipMemcpy(dev, pattern, PAGE, 1) == 0
        try:
            with env.registered() as (_, handle, _), open(env.path, "rb") as f:
                w = env.io(env.lib.hipFileWrite, handle, dev, 3000, 500, 7)
                f.seek(500)
                back = f.read(3000)
            return {"write": w, "data_ok": back == pattern[7:3007]}
        finally:
            with open(env.path, "wb") as f:
                f.write(env.data)


def case_stream_register_flags(env: Env) -> dict[str, Any]:
    s = P()
    assert env.hip.hipStreamCreate(ctypes.byref(s)) == 0
    try:
        return {
            "bad_flags": code(env.lib.hipFileStreamRegister(s, 0x10)),
            "all_flags": code(env.lib.hipFileStreamRegister(s, 0xF)),
            "twice": code(env.lib.hipFileStreamRegister(s, 0)),
            "deregister": code(env.lib.hipFileStreamDeregister(s)),
            "deregister_again": code(env.lib.hipFileStreamDeregister(s)),
            "use_count": env.use_count(),
        }
    finally:
        env.hip.hipStreamDestroy(s)


# Functions some releases declare without implementing (5030 there).
def case_get_properties(env: Env) -> dict[str, Any]:
    env.lib.hipFileDriverOpen()
    props = ctypes.create_string_buffer(256)
    return {"err": code(env.lib.hipFileDriverGetProperties(ctypes.addressof(props)))}


def case_get_parameter(env: Env) -> dict[str, Any]:
    v = SZ()
    return {"err": code(env.lib.hipFileGetParameterSizeT(10, ctypes.byref(v)))}


def case_set_poll_mode(env: Env) -> dict[str, Any]:
    env.lib.hipFileDriverOpen()
    return {"err": code(env.lib.hipFileDriverSetPollMode(True, 4))}


def case_batch_get_status(env: Env) -> dict[str, Any]:
    env.lib.hipFileDriverOpen()
    b = P()
    assert code(env.lib.hipFileBatchIOSetUp(ctypes.byref(b), 4)) == 0
    nr = ctypes.c_uint(0)
    e = env.lib.hipFileBatchIOGetStatus(b, 0, ctypes.byref(nr), None, None)
    env.lib.hipFileBatchIODestroy(b)
    return {"err": code(e)}


CASES: dict[str, Callable[[Env], dict[str, Any]]] = {
    name[len("case_"):]: fn for name, fn in globals().items() if name.startswith("case_")
}


def main() -> int:
    libdir, libname, workdir = sys.argv[1:4]
    env = Env(libdir, libname, workdir)
    results: dict[str, Any] = {}
    for name, fn in CASES.items():
        env.close_driver()
        try:
            results[name] = fn(env)
        except Exception:
            results[name] = {"exception": traceback.format_exc(limit=2)}
        env.close_driver()
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
