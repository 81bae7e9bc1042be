"""Where a lone mid-size call's time goes: each step of the engine's path
beside the two steps of its floor, measured in one run.

The floor of a lone read of ``--size`` bytes (2 MiB by default) from a warm
file into device memory is one POSIX ``preadv`` into pinned memory and one
host-to-device copy. The engine's path adds: handing the read to a worker
thread (its wake-up), the staging slot (memory pinned with
``hipHostRegister``), the copy's enqueue (``hipMemcpyAsync`` or
``hipMemcpyBatchAsync``), the stream's wait on a flag in host memory that
the worker writes (``hipStreamWaitValue32``), the completion flag the stream
writes and the caller's wait for it. Rows:

* steps of the floor: ``preadv`` into ``hipHostMalloc`` memory, into
  ``hipHostRegister`` memory, a copy alone (``hipMemcpy``), a copy enqueued
  then the stream synchronised;
* the floor with each of the engine's extra steps added by hand: the copy
  behind ``hipStreamWaitValue32`` on a flag that this thread writes after
  its ``preadv``; the same with the ``preadv`` on another thread (woken by a
  condition variable, as a worker is); the stream's completion written to a
  flag (``hipStreamWriteValue32``) and polled, instead of a synchronise;
* the package's calls: ``fh.read`` (hipFileRead), ``fh.pread(...).result()``,
  ``fh.pread_async(..., stream).wait()`` (read by the calling thread where
  the page cache holds the bytes), and the same calls read by the workers
  instead (read first, then copied), ``pread_async`` with the read-first
  rule off too (the copies wait on the workers' flag), with
  ``engine_batch_copies`` off, on one thread, in one task; the time
  ``pread_async`` takes to return, and the time from its return until
  ``done()`` is first true (spinning).

    HIPFILE_PLATFORM=cuda python benchmarks/bench_lone_call.py --platform cuda --dir /tmp

On the emulated platform "device" memory is host memory: the figures only
check that every row runs.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from _common import add_common_arguments, hip_check, select_platform, switched, temp_folder


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=2 << 20, help="bytes per call (default: 2 MiB)")
    ap.add_argument("--calls", type=int, default=200, help="timed calls per row (default: 200)")
    ap.add_argument("--json", default=None, help="write every figure to this file")
    add_common_arguments(ap, data="the file read")
    return ap


def medians_us(cases: dict[str, Callable[[], object]], calls: int) -> dict[str, float]:
    """Each case's median (us), the cases taking turns in rounds of 10
    calls, the order shuffled each round."""
    for fn in cases.values():
        fn()
        fn()
    times: dict[str, list[float]] = {k: [] for k in cases}
    order = list(cases.items())
    shuffle = random.Random(7).shuffle
    done = 0
    while done < calls:
        shuffle(order)
        for k, fn in order:
            for _ in range(10):
                t0 = time.perf_counter()
                fn()
                times[k].append(time.perf_counter() - t0)
        done += 10
    return {k: statistics.median(v) * 1e6 for k, v in times.items()}


class Worker:
    """One thread that runs a function when woken (a condition variable),
    as an engine worker is handed a chunk."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._job: Callable[[], None] | None = None
        self._stop = False
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while True:
            with self._cv:
                while self._job is None and not self._stop:
                    self._cv.wait()
                if self._stop:
                    return
                job, self._job = self._job, None
            assert job is not None
            job()

    def hand(self, job: Callable[[], None]) -> None:
        with self._cv:
            self._job = job
            self._cv.notify()

    def close(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify()
        self._t.join()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    select_platform(args.platform)
    from hip import hip

    import hipfile

    size = args.size
    folder = temp_folder(args.dir)
    path = os.path.join(folder, "lone.bin")
    with open(path, "wb") as f:
        f.write(os.urandom(size))
    fd = os.open(path, os.O_RDONLY)
    dev = hip_check(hip.hipMalloc(size))
    stream = int(hip_check(hip.hipStreamCreate()))
    pinned = int(hip_check(hip.hipHostMalloc(size, 0)))
    # memory pinned as the engine's staging ring is (hipHostRegister)
    reg_raw = ctypes.create_string_buffer(size + 4096)
    reg = (ctypes.addressof(reg_raw) + 4095) & ~4095
    hip_check(hip.hipHostRegister(reg, size, 0))
    flag_mem = int(hip_check(hip.hipHostMalloc(64, 2)))    # mapped, as the engine's flags
    flags = (ctypes.c_uint32 * 16).from_address(flag_mem)
    flag_dev = int(hip_check(hip.hipHostGetDevicePointer(flag_mem, 0)))
    mv_pinned = memoryview((ctypes.c_char * size).from_address(pinned)).cast("B")
    mv_reg = memoryview((ctypes.c_char * size).from_address(reg)).cast("B")
    h2d = hip.hipMemcpyKind.hipMemcpyHostToDevice
    gte = 0      # hipStreamWaitValueGte
    worker = Worker()
    seq = [0]

    def read_pinned() -> None:
        os.preadv(fd, [mv_pinned], 0)

    def read_registered() -> None:
        os.preadv(fd, [mv_reg], 0)

    def copy_sync() -> None:
        hip_check(hip.hipMemcpy(dev, pinned, size, h2d))

    def copy_async() -> None:
        hip_check(hip.hipMemcpyAsync(dev, pinned, size, h2d, stream))
        hip_check(hip.hipStreamSynchronize(stream))

    def floor() -> None:
        read_pinned()
        copy_sync()

    def next_value() -> int:
        seq[0] += 1
        return seq[0]

    def flag_wait_self() -> None:
        v = next_value()
        hip_check(hip.hipStreamWaitValue32(stream, flag_dev, v, gte, 0xFFFFFFFF))
        hip_check(hip.hipMemcpyAsync(dev, reg, size, h2d, stream))
        read_registered()
        flags[0] = v
        hip_check(hip.hipStreamSynchronize(stream))

    def flag_wait_worker() -> None:
        v = next_value()
        hip_check(hip.hipStreamWaitValue32(stream, flag_dev, v, gte, 0xFFFFFFFF))
        hip_check(hip.hipMemcpyAsync(dev, reg, size, h2d, stream))

        def job() -> None:
            read_registered()
            flags[0] = v
        worker.hand(job)
        hip_check(hip.hipStreamSynchronize(stream))

    def completion_flag() -> None:
        v = next_value()
        read_pinned()
        hip_check(hip.hipMemcpyAsync(dev, pinned, size, h2d, stream))
        hip_check(hip.hipStreamWriteValue32(stream, flag_dev + 4, v, 0))
        while flags[1] != v:
            pass

    fh = hipfile.open(path)
    first_max = hipfile._lib._hipfile.engine_read_first_max

    def read() -> None:
        fh.read(dev, size, 0)

    def pread() -> None:
        fh.pread(dev, size, 0).result()

    def pread_async() -> None:
        fh.pread_async(dev, size, 0, 0, stream).wait()

    def with_setting(call: Callable[[], None], **values: Any) -> Callable[[], None]:
        def run() -> None:
            with hipfile.defaults.set(**values):
                call()
        return run

    read_here = hipfile._lib._hipfile.engine_read_here
    rule_off = switched(first_max, 0, pread_async)
    here_off = switched(read_here, False, pread_async)
    here_off_pread = switched(read_here, False, pread)

    def one_task() -> None:
        fh.pread_async(dev, size, 0, 0, stream, task_size=size).wait()

    cases: dict[str, Callable[[], None]] = {
        "preadv into hipHostMalloc memory": read_pinned,
        "preadv into hipHostRegister memory": read_registered,
        "hipMemcpy alone": copy_sync,
        "hipMemcpyAsync + hipStreamSynchronize": copy_async,
        "floor: preadv + hipMemcpy": floor,
        "floor, copy behind hipStreamWaitValue32 (same thread)": flag_wait_self,
        "floor, copy behind hipStreamWaitValue32 (read on a woken thread)": flag_wait_worker,
        "floor, completion by hipStreamWriteValue32 + spin": completion_flag,
        "fh.read (hipFileRead)": read,
        "fh.pread(...).result()": pread,
        "fh.pread_async(...).wait()": pread_async,
        "pread_async, not read by the caller (workers, read first)": here_off,
        "pread, not read by the caller (workers, read first)": here_off_pread,
        "pread_async, read-first rule off (workers, stream waits)": rule_off,
        "pread_async, one task": one_task,
    }
    results = medians_us(cases, args.calls)
    # settings change the engine (a restart of its threads): timed apart
    for label, values in (("pread_async, engine_batch_copies off",
                           {"engine_batch_copies": False}),
                          ("pread_async, engine_threads=1", {"engine_threads": 1})):
        with hipfile.defaults.set(**values):
            results[label] = medians_us({label: pread_async}, args.calls)[label]
    # pread_async split: the submission, then until done() (spinning)
    subs, rest = [], []
    for _ in range(args.calls):
        t0 = time.perf_counter()
        h = fh.pread_async(dev, size, 0, 0, stream)
        t1 = time.perf_counter()
        while not h.done():
            pass
        t2 = time.perf_counter()
        h.wait()
        subs.append(t1 - t0)
        rest.append(t2 - t1)
    results["pread_async: submission returns"] = statistics.median(subs) * 1e6
    results["pread_async: from return to done() (spin)"] = statistics.median(rest) * 1e6
    info = hipfile.engine.info()

    fh.close()
    worker.close()
    os.close(fd)
    hip_check(hip.hipHostUnregister(reg))
    hip_check(hip.hipHostFree(pinned))
    hip_check(hip.hipHostFree(flag_mem))
    hip_check(hip.hipStreamDestroy(stream))
    hip_check(hip.hipFree(dev))

    fl = results["floor: preadv + hipMemcpy"]
    print(f"\nlone {size >> 10} KiB call, warm, device memory (median us of {args.calls}; "
          f"x = floor / row)")
    for k, v in results.items():
        print(f"  {k:66s} {v:9.1f} us {fl / v:5.2f}x  {size / v / 1e3:6.2f} GB/s")
    d = {str(k): {kk: v[kk] for kk in ("mechanism", "staging_slot_bytes", "staging_pinned_by")}
         for k, v in info["devices"].items()}
    print(f"  engine: threads {info['threads']}, task size {info['task_size']}, devices {d}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"size": size, "us": results, "engine": d}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
