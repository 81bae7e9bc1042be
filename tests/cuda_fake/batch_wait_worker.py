"""Run in a process of its own by test_cuda_platform_batch_wait.py: drives the
cuda platform's libhipfile.so (argv[1]) over the stand-in cuFile named by
HIPFILE_CUFILE_LIBRARY through ctypes, and prints what it saw as JSON.

argv: LIBHIPFILE DATA_FILE CASE, CASE one of ``ready`` (entries complete at
once), ``late`` (entries complete FAKE_CUFILE_DELAY_US later), ``bad``
(timespecs the platform must refuse).
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _hipfile_ctypes import Error, signatures

ENTRIES = 8
BLOCK = 4096


class Descr(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("fd", ctypes.c_int64), ("fs_ops", ctypes.c_void_p)]


class Params(ctypes.Structure):
    _fields_ = [("mode", ctypes.c_int), ("base", ctypes.c_void_p),
                ("file_offset", ctypes.c_int64), ("buffer_offset", ctypes.c_int64),
                ("size", ctypes.c_size_t), ("fh", ctypes.c_void_p), ("opcode", ctypes.c_int),
                ("cookie", ctypes.c_void_p)]


class Events(ctypes.Structure):
    _fields_ = [("cookie", ctypes.c_void_p), ("status", ctypes.c_int), ("ret", ctypes.c_ssize_t)]


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def main() -> None:
    lib_path, data_path, case = sys.argv[1:4]
    assert ctypes.sizeof(Descr) == 24 and ctypes.sizeof(Params) == 64
    assert ctypes.sizeof(Events) == 24
    lib = ctypes.CDLL(lib_path)
    for name, (res, args) in signatures().items():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype, fn.argtypes = res, args
    fake = ctypes.CDLL(os.environ["HIPFILE_CUFILE_LIBRARY"])
    fake.fake_cufile_timed_calls.restype = ctypes.c_ulong
    out: dict[str, object] = {}

    def check(e: Error, what: str) -> None:
        if e.err != 0:
            raise SystemExit(f"{what}: {e.err}")

    check(lib.hipFileDriverOpen(), "hipFileDriverOpen")
    fd = os.open(data_path, os.O_RDONLY)
    descr = Descr(type=1, fd=fd)
    fh = ctypes.c_void_p()
    check(lib.hipFileHandleRegister(ctypes.byref(fh), ctypes.byref(descr)), "register")
    batch = ctypes.c_void_p()
    check(lib.hipFileBatchIOSetUp(ctypes.byref(batch), ENTRIES), "set up")
    dest = ctypes.create_string_buffer(ENTRIES * BLOCK)
    params = (Params * ENTRIES)()
    for i in range(ENTRIES):
        params[i] = Params(1, ctypes.addressof(dest), i * BLOCK, (ENTRIES - 1 - i) * BLOCK,
                           BLOCK, fh.value, 0, i + 1)
    events = (Events * ENTRIES)()
    nr = ctypes.c_uint(ENTRIES)

    def status(min_nr: int, seconds: float | None) -> tuple[int, int, float]:
        nr.value = ENTRIES
        ts = None
        if seconds is not None:
            ts = ctypes.byref(Timespec(int(seconds), int((seconds % 1) * 1e9)))
        t0 = time.monotonic()
        e = lib.hipFileBatchIOGetStatus(batch, min_nr, ctypes.byref(nr), events, ts)
        return e.err, nr.value, time.monotonic() - t0

    if case == "bad":
        check(lib.hipFileBatchIOSubmit(batch, ENTRIES, params, 0), "submit")
        for sec, nsec in ((0, -1), (-1, 0), (0, 1_000_000_000)):
            nr.value = ENTRIES
            e = lib.hipFileBatchIOGetStatus(batch, 0, ctypes.byref(nr), events,
                                            ctypes.byref(Timespec(sec, nsec)))
            out[f"{sec},{nsec}"] = e.err
        out["drained"] = status(ENTRIES, 5.0)[:2]
    else:
        check(lib.hipFileBatchIOSubmit(batch, ENTRIES, params, 0), "submit")
        if case == "late":
            out["short"] = status(ENTRIES, 0.05)
        out["full"] = status(ENTRIES, 5.0)
        reported = sorted(events[i].cookie for i in range(nr.value))
        out["cookies"] = reported
        out["rets"] = sorted({events[i].ret for i in range(nr.value)})
        with open(data_path, "rb") as f:
            data = f.read()
        raw = dest.raw
        out["data_ok"] = all(raw[(ENTRIES - 1 - i) * BLOCK:(ENTRIES - i) * BLOCK]
                             == data[i * BLOCK:(i + 1) * BLOCK] for i in range(ENTRIES))
    out["timed_calls"] = fake.fake_cufile_timed_calls()
    lib.hipFileBatchIODestroy(batch)
    lib.hipFileHandleDeregister(fh)
    os.close(fd)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
