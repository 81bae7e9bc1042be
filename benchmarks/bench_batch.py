"""Batch I/O against the stream-ordered engine on the same scattered blocks.

Reads ``--blocks`` blocks of ``--block-kib`` KiB from a file in the page cache
into one device buffer, block ``i`` of the file landing at a permuted slot of
the buffer (the shape of a paged KV cache), two ways:

* ``engine``: ``FileHandle.pread_async_ranges(buf, ranges, stream)``, then
  every handle waited;
* ``batch_read``: ``hipfile.batch_read(fh, buf, ranges)`` (hipFile's batch
  API: ``hipFileBatchIOSetUp`` / ``Submit`` / ``GetStatus``), with its
  default batches in flight (``--in-flight`` to change);
* ``batch_read_1``: the same with one batch in flight at a time.

Prints medians of interleaved repeats and ``batch_read/engine`` as a speed
ratio (engine time over batch time; the goal is >= 0.5). Every case is checked
once against the file's bytes before timing.

``--trace`` first runs one ``batch_read`` with every batch call of the
library timed (``SetUp``, ``Submit``, ``GetStatus``, ``Cancel``,
``Destroy``: calls, total and longest time, entries). A watchdog prints every
thread's stack each ``--watchdog`` seconds while the run lasts, so a batch
that does not finish shows the call it waits in; ``--timeout`` bounds each
``batch_read`` (``TimeoutError`` rather than a hang).

    python benchmarks/bench_batch.py --platform cuda --blocks 1024 --block-kib 64 --dir /tmp --trace
"""

from __future__ import annotations

import argparse
import ctypes
import faulthandler
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from _common import add_common_arguments, hip_check, select_platform, temp_folder, time_interleaved


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=1024, help="blocks per load (default: 1024)")
    ap.add_argument("--block-kib", type=int, default=64, help="KiB per block (default: 64)")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="entries per batch for batch_read (default: the library's)")
    ap.add_argument("--in-flight", type=int, default=None,
                    help="batches in flight at once for batch_read (default: batch_read's)")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds each batch_read may take before TimeoutError (default: 120)")
    ap.add_argument("--trace", action="store_true",
                    help="time every batch library call of one batch_read first")
    ap.add_argument("--watchdog", type=float, default=30.0,
                    help="print every thread's stack each this many seconds while the run "
                         "lasts (default: 30)")
    ap.add_argument("--seed", type=int, default=17, help="seed of the slot permutation")
    ap.add_argument("--json", default=None, help="write the results to this file")
    add_common_arguments(ap, repeats=7, data="the data file")
    return ap


class _CallTimes:
    """Wraps the shim's batch calls and records how long each took."""

    def __init__(self, shim: Any, events_dtype: Any) -> None:
        self.shim = shim
        self.events_dtype = events_dtype
        self.statuses: dict[str, int] = {}  # status of every event handed over
        self.rows: dict[str, list[tuple[float, int]]] = {
            key: [] for key in ("set_up", "submit", "get_status", "cancel", "destroy")}
        self._saved: dict[str, Callable[..., Any]] = {}

    def __enter__(self) -> _CallTimes:
        for name in ("batch_io_set_up", "batch_io_submit", "batch_io_get_status",
                     "batch_io_cancel", "batch_io_destroy"):
            fn = getattr(self.shim, name)
            self._saved[name] = fn
            setattr(self.shim, name, self._wrap(name.removeprefix("batch_io_"), fn))
        return self

    def __exit__(self, *exc: object) -> None:
        for name, fn in self._saved.items():
            setattr(self.shim, name, fn)

    def _wrap(self, key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        rows = self.rows[key]

        def call(*args: Any) -> Any:
            t0 = time.perf_counter()
            out = fn(*args)
            took = time.perf_counter() - t0
            count = args[1] if key == "submit" else int(out or 0) if key == "get_status" \
                else 0
            rows.append((took, count))
            if key == "get_status" and count:
                self._tally(args[3], count)
            return out

        return call

    def _tally(self, address: int, count: int) -> None:
        import numpy as np

        from hipfile.enums import Status

        raw = (ctypes.c_char * (count * self.events_dtype.itemsize)).from_address(address)
        for status in np.frombuffer(raw, dtype=self.events_dtype)["status"].tolist():
            try:
                name = Status(status).name or str(status)
            except ValueError:
                name = str(status)
            self.statuses[name] = self.statuses.get(name, 0) + 1

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, rows in self.rows.items():
            times = [t for t, _ in rows]
            counts = [c for _, c in rows]
            out[key] = {"calls": len(rows), "total_s": sum(times),
                        "max_s": max(times, default=0.0), "entries": sum(counts),
                        "zero_calls": sum(1 for c in counts if c == 0)}
        out["statuses"] = dict(self.statuses)
        return out


def main() -> int:
    args = build_parser().parse_args()
    hipfile = select_platform(args.platform)
    from hip import hip

    from hipfile._lib import _hipfile
    from hipfile.batch._abi import IO_EVENTS

    block = args.block_kib << 10
    n = args.blocks
    total = n * block
    folder = temp_folder(args.dir)
    path = os.path.join(folder, "blocks.bin")
    data = os.urandom(total)
    with open(path, "wb") as f:
        f.write(data)
    slots = list(range(n))
    random.Random(args.seed).shuffle(slots)
    ranges = [(block, i * block, slots[i] * block) for i in range(n)]
    expect = bytearray(total)
    for i in range(n):
        expect[slots[i] * block:(slots[i] + 1) * block] = data[i * block:(i + 1) * block]

    try:
        import torch

        uses_torch = torch.cuda.is_available()
    except ImportError:
        uses_torch = False
    if uses_torch:
        kv: Any = torch.empty(total, dtype=torch.uint8, device="cuda")
        stream = torch.cuda.Stream()
        io_h = stream.cuda_stream

        def sync_all() -> None:
            torch.cuda.synchronize()
    else:
        kv = hip_check(hip.hipMalloc(total))
        io_h = int(hip_check(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking)))

        def sync_all() -> None:
            hip_check(hip.hipDeviceSynchronize())

    platform = hipfile.platforms.active() or "rocm"
    results: dict[str, Any] = {"platform": platform, "blocks": n, "block_bytes": block,
                               "date": time.strftime("%Y-%m-%d"), "cases": {}}
    print(f"{n} blocks of {args.block_kib} KiB ({total / 2**20:.0f} MiB), slots permuted; "
          f"device memory: {'torch' if uses_torch else 'hipMalloc'}", flush=True)

    # every thread's stack each --watchdog seconds until the run ends, so a
    # call that does not return shows where it waits
    faulthandler.dump_traceback_later(args.watchdog, repeat=True, file=sys.stderr)
    with hipfile.Driver(), hipfile.FileHandle(path) as fh, hipfile.Buffer(kv) as buf, \
            hipfile.Stream(io_h) as io:

        def clear() -> None:
            hip_check(hip.hipMemset(buf.ptr, 0, total))

        def check(name: str) -> None:
            host = bytearray(total)
            sync_all()
            hip_check(hip.hipMemcpy(host, buf.ptr, total,
                                    hip.hipMemcpyKind.hipMemcpyDeviceToHost))
            if host != expect:
                bad = sum(1 for i in range(n) if host[i * block:(i + 1) * block]
                          != expect[i * block:(i + 1) * block])
                raise SystemExit(f"{name}: {bad} of {n} slots hold wrong bytes")

        def engine() -> None:
            got = sum(h.wait() for h in fh.pread_async_ranges(buf, ranges, io))
            assert got == total, got

        def batch() -> None:
            got = sum(hipfile.batch_read(fh, buf, ranges, batch_size=args.batch_size,
                                         in_flight=args.in_flight, timeout=args.timeout))
            assert got == total, got

        def batch_one() -> None:
            got = sum(hipfile.batch_read(fh, buf, ranges, batch_size=args.batch_size,
                                         in_flight=1, timeout=args.timeout))
            assert got == total, got

        cases = {"engine": engine, "batch_read": batch, "batch_read_1": batch_one}
        if args.trace:
            results["trace"] = {}
            for name in ("batch_read", "batch_read_1"):
                clear()
                error = None
                with _CallTimes(_hipfile, IO_EVENTS) as ct:
                    t0 = time.perf_counter()
                    try:
                        cases[name]()
                    except Exception as exc:  # reported with the calls made so far
                        error = f"{type(exc).__name__}: {exc}"
                    took = time.perf_counter() - t0
                trace = ct.summary()
                results["trace"][name] = {"seconds": took, "error": error, **trace}
                print(f"trace: one {name} took {took * 1e3:.1f} ms"
                      + (f", then raised {error}" if error else ""), flush=True)
                print(f"  event statuses: {trace.pop('statuses')}", flush=True)
                for key, row in trace.items():
                    print(f"  {key:<10} {row['calls']:5d} calls  {row['total_s'] * 1e3:9.1f} ms "
                          f"total  {row['max_s'] * 1e3:8.2f} ms longest  {row['entries']:6d} "
                          f"entries  {row['zero_calls']} calls with none", flush=True)
                if error is None:
                    check(f"{name} (trace)")

        failed: dict[str, str] = {}
        for name, fn in cases.items():
            clear()
            try:
                fn()
            except Exception as exc:
                failed[name] = f"{type(exc).__name__}: {exc}"
                print(f"{name}: not timed, it raised {failed[name]}", flush=True)
                continue
            check(name)
        timed = {k: v for k, v in cases.items() if k not in failed}
        times = time_interleaved(timed, args.repeats, sync_all, warm_up=False)
    faulthandler.cancel_dump_traceback_later()
    results["failed"] = failed
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in times.items():
        results["cases"][k] = {"median_s": med[k], "times_s": v,
                               "gb_s": total / med[k] / 1e9}
        print(f"{k:<13} {med[k] * 1e3:9.2f} ms  {total / med[k] / 1e9:7.2f} GB/s", flush=True)
    for k in ("batch_read", "batch_read_1"):
        if k in med and "engine" in med:
            results[f"{k}_vs_engine"] = med["engine"] / med[k]
            print(f"{k}/engine speed: {results[f'{k}_vs_engine']:.2f}x (goal >= 0.5)",
                  flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    if not uses_torch:
        hip_check(hip.hipStreamDestroy(io_h))
        hip_check(hip.hipFree(kv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
