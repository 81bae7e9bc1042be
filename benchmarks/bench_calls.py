"""Calls as users make them, each beside its floor measured in the same run.

Rows (warm page cache unless said; device memory; one caller thread; medians):

* **small calls**: 4 KiB, 64 KiB and 2 MiB through each path a user calls
  bare -- ``fh.read`` (hipFileRead), ``fh.pread(...).result()``,
  ``fh.pread_async(..., stream).wait()`` -- beside the floor: one POSIX
  ``preadv`` into pinned memory and one host-to-device copy of the same size.
  The lone 2 MiB call also runs with each ``task_size`` of ``LONE_TASKS``
  (``pread`` and ``pread_async``: one part per thread by default), and
  ``pread_async`` with each ``engine_threads`` of ``LONE_THREADS``, and both
  with the read-first rule off (their copies then wait on the workers' flag); the
  engine's mechanism and staging ring per device are printed with them.
  Each case is timed ``SMALL_MIN_CALLS`` times at least, the cases taking
  turns in rounds of ``SMALL_ROUND`` calls.
* **open/close**: ``hipfile.open(path)`` then ``close()``.
* **many files**: ``--files`` chunk files of ``--file-mib`` each (one file per
  KV chunk), opened, read into scattered slots of one device buffer and
  closed: one call per file, and one operation over all of them
  (``hipfile.pread_async_scatter``), against the same bytes from one file
  with ``FileHandle.pread_async_scatter``.
* **first call** (``--first-gib``): ``hipfile.safetensors.torch.load_file``
  of a checkpoint in a new interpreter per sample, against the second call
  in the same interpreter; bare, and after ``hipfile.engine.prepare()``
  (timed apart), for each ``--first-staging`` size of the staging ring.
* **cold** (``--cold``): the page cache dropped before each read of a
  ``--cold-gib`` file: the engine, ``pread``, ``load_file`` (with a GPU
  PyTorch: the file is then a safetensors file of one tensor), KvikIO's
  default when it is installed, and plain readers (one thread and 8 threads of 16 MiB
  ``O_DIRECT`` reads into pinned memory, 16 threads buffered) -- the disk's
  floor; the engine also with 4 MiB tasks, 16 threads and one request per
  2 MiB chunk (``engine_direct_io_size=2M``), each case once a round, the
  rounds' order shuffled. ``--cold-sweep`` adds what the disk wants (request size x depth x
  order, ``O_DIRECT`` or not, into host memory) and the engine's cold read
  over task sizes, thread counts and ``O_DIRECT`` request sizes.

    python benchmarks/bench_calls.py --platform cuda --repeats 50 --first-gib 3.5 --cold

On the emulated platform "device" memory is host memory: the figures only
check that every row runs.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from _common import (
    add_common_arguments,
    drop_page_cache,
    hip_check,
    select_platform,
    switched,
    temp_folder,
)

SIZES = (4 << 10, 64 << 10, 2 << 20)
#: task sizes a lone 2 MiB call is also timed with (parts of 256 KiB to the whole)
LONE_TASKS = (256 << 10, 512 << 10, 1 << 20, 2 << 20)
#: engine_threads of the lone 2 MiB pread_async's second sweep
LONE_THREADS = (1, 2, 4, 8, 16)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=256, help="chunk files (default: 256)")
    ap.add_argument("--file-mib", type=int, default=2, help="MiB per chunk file (default: 2)")
    ap.add_argument("--first-gib", type=float, default=0.0,
                    help="checkpoint size for the first-call rows, GiB (0: no such rows)")
    ap.add_argument("--first-samples", type=int, default=3,
                    help="fresh interpreters for the first-call rows (default: 3)")
    ap.add_argument("--first-staging", default="",
                    help="comma-separated engine_staging_size values to run the first-call "
                         "rows with, e.g. 256M,128M,64M (default: the setting's default)")
    ap.add_argument("--cold", action="store_true", help="add the cold rows")
    ap.add_argument("--cold-gib", type=float, default=2.0, help="cold file size, GiB (default: 2)")
    ap.add_argument("--cold-sweep", action="store_true",
                    help="add a sweep of request size, depth, order and O_DIRECT on a cold "
                         "file (the disk alone), and of the engine's task size and threads")
    ap.add_argument("--only", default="",
                    help="comma-separated row groups to run: small,open,files,first,cold")
    ap.add_argument("--json", default=None, help="write every figure to this file")
    add_common_arguments(ap, repeats=30, data="the files")
    return ap


#: calls timed per small case at least, whatever ``--repeats`` says (the
#: cases take microseconds to a quarter of a millisecond; 10 samples of a
#: 2 MiB call moved its median by 20%)
SMALL_MIN_CALLS = 200

#: calls of one case in a row before the next case takes its turn
SMALL_ROUND = 10


def median_us(fn: Callable[[], object], repeats: int) -> float:
    return medians_us({"": fn}, repeats)[""]


def medians_us(cases: dict[str, Callable[[], object]], calls: int) -> dict[str, float]:
    """Each case's median time of one call (us): ``calls`` timed calls each,
    in rounds of ``SMALL_ROUND`` that take the cases in turn, so that a slow
    spell of the machine falls on all of them, in an order shuffled each
    round (seeded), so that no case always follows the same one (what a call
    leaves behind, another library's threads still polling, falls on every
    case alike)."""
    for fn in cases.values():
        fn()
        fn()
    times: dict[str, list[float]] = {k: [] for k in cases}
    order = list(cases.items())
    shuffle = random.Random(SMALL_ROUND).shuffle
    done = 0
    while done < calls:
        n = min(SMALL_ROUND, calls - done)
        shuffle(order)
        for k, fn in order:
            for _ in range(n):
                t0 = time.perf_counter()
                fn()
                times[k].append(time.perf_counter() - t0)
        done += n
    return {k: statistics.median(v) * 1e6 for k, v in times.items()}


class Device:
    """Device memory, a stream and a synchronise, through PyTorch where it
    has a GPU (as serving code holds them), else HIP-Python."""

    def __init__(self, nbytes: int) -> None:
        from hip import hip

        self.hip = hip
        try:
            import torch

            use_torch = torch.cuda.is_available()
        except ImportError:
            use_torch = False
        self.torch = use_torch
        if use_torch:
            self.buf: Any = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
            self._stream = torch.cuda.Stream()
            self.stream: Any = self._stream
            self.addr = self.buf.data_ptr()
            self.sync: Callable[[], None] = torch.cuda.synchronize
        else:
            self.buf = hip_check(hip.hipMalloc(nbytes))
            self.stream = int(hip_check(hip.hipStreamCreate()))
            self.addr = int(self.buf)

            def sync() -> None:
                hip_check(hip.hipDeviceSynchronize())

            self.sync = sync

    def close(self) -> None:
        if not self.torch:
            hip_check(self.hip.hipStreamDestroy(self.stream))
            hip_check(self.hip.hipFree(self.buf))


def write_file(path: str, nbytes: int, safetensors: bool = False) -> None:
    """``nbytes`` random bytes; ``safetensors``: as a safetensors file of one
    ``U8`` tensor, ``"data"``, whose header and bytes make ``nbytes``."""
    block = os.urandom(min(nbytes, 64 << 20))
    with open(path, "wb") as f:
        left = nbytes
        if safetensors:
            head = b""
            for _ in range(2):       # the header's length depends on the tensor's
                n = nbytes - 8 - len(head)
                text = json.dumps({"data": {"dtype": "U8", "shape": [n],
                                            "data_offsets": [0, n]}}).encode()
                head = text + b" " * (-len(text) % 8)
            f.write(len(head).to_bytes(8, "little") + head)
            left -= 8 + len(head)
        while left:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n


def small_rows(hipfile: Any, dev: Device, folder: str, repeats: int,
               out: dict[str, Any]) -> None:
    hip = dev.hip
    path = os.path.join(folder, "small.bin")
    write_file(path, max(SIZES) * 4)
    pinned = hip_check(hip.hipHostMalloc(max(SIZES), 0))
    view = (ctypes.c_char * max(SIZES)).from_address(int(pinned))
    fd = os.open(path, os.O_RDONLY)
    rows: dict[str, dict[str, float]] = {}
    try:
        with hipfile.open(path) as fh:
            for size in SIZES:
                mv = memoryview(view)[:size]

                def floor(size: int = size, mv: memoryview = mv) -> None:
                    os.preadv(fd, [mv], 0)
                    hip_check(hip.hipMemcpy(dev.addr, pinned, size,
                                            hip.hipMemcpyKind.hipMemcpyHostToDevice))

                def read(size: int = size) -> None:
                    fh.read(dev.buf, size, 0)

                def pread(size: int = size) -> None:
                    fh.pread(dev.buf, size, 0).result()

                def pread_async(size: int = size) -> None:
                    fh.pread_async(dev.buf, size, 0, 0, dev.stream).wait()

                t_sub: list[float] = []

                def submit_only(size: int = size, t_sub: list[float] = t_sub) -> None:
                    h = fh.pread_async(dev.buf, size, 0, 0, dev.stream)
                    t_sub.append(time.perf_counter())
                    h.wait()

                cases: dict[str, Callable[[], object]] = {
                    "floor": floor, "read": read, "pread": pread, "pread_async": pread_async}
                if size == max(SIZES):
                    for task in LONE_TASKS:
                        def lone_pread(task: int = task, size: int = size) -> None:
                            fh.pread(dev.buf, size, 0, task_size=task).result()

                        def lone_async(task: int = task, size: int = size) -> None:
                            fh.pread_async(dev.buf, size, 0, 0, dev.stream,
                                           task_size=task).wait()

                        cases[f"pread_t{task >> 10}K"] = lone_pread
                        cases[f"pread_async_t{task >> 10}K"] = lone_async
                    # the same calls with the read-first rule off: their copies wait
                    # on the workers' flag in host memory (hipStreamWaitValue32)
                    from hipfile._lib._hipfile import engine_read_first_max as first_max

                    cases["pread_flag"] = switched(first_max, 0, pread)
                    cases["pread_async_flag"] = switched(first_max, 0, pread_async)
                r = medians_us(cases, max(repeats, SMALL_MIN_CALLS))
                # the time pread_async takes to return (the rest is the wait)
                subs = []
                for _ in range(max(repeats, SMALL_MIN_CALLS)):
                    t0 = time.perf_counter()
                    t_sub.clear()
                    submit_only()
                    subs.append(t_sub[0] - t0)
                r["pread_async_submit"] = statistics.median(subs) * 1e6
                rows[str(size)] = r
            # the lone 2 MiB read by the engine's thread count (each count a
            # setting of its own: the engine restarts its threads)
            big_size = max(SIZES)
            by_threads: dict[str, float] = {}
            for t in LONE_THREADS:
                with hipfile.defaults.set(engine_threads=t):
                    by_threads[str(t)] = median_us(
                        lambda: fh.pread_async(dev.buf, big_size, 0, 0, dev.stream).wait(),
                        max(repeats, SMALL_MIN_CALLS // 2))
        engine = {str(d): {k: v[k] for k in ("mechanism", "staging_bytes", "staging_slot_bytes",
                                             "staging_pinned_by")}
                  for d, v in hipfile.engine.info()["devices"].items()}
        # hipfile.open + close, bare
        oc = median_us(lambda: hipfile.open(path).close(), max(repeats, SMALL_MIN_CALLS))
    finally:
        os.close(fd)
        hip_check(hip.hipHostFree(pinned))
    out["small"] = rows
    out["small_lone_2MiB_by_threads_us"] = by_threads
    out["engine"] = engine
    out["open_close_us"] = oc
    print("\nsmall calls, warm, device memory (median us; x = floor / path)")
    print(f"  {'size':>8s} {'floor':>8s} {'read':>14s} {'pread':>14s} {'pread_async':>14s} "
          f"{'(submit)':>9s}")
    for size in SIZES:
        r = rows[str(size)]
        cells = [f"{r[k]:7.1f} {r['floor'] / r[k]:4.2f}x" for k in ("read", "pread",
                                                                       "pread_async")]
        print(f"  {size:>8d} {r['floor']:8.1f} " + " ".join(f"{c:>14s}" for c in cells)
              + f" {r['pread_async_submit']:9.1f}")
    big = rows[str(max(SIZES))]

    def gbs(us: float) -> str:
        """The 2 MiB call's speed for a median of ``us`` microseconds."""
        return f"{max(SIZES) / us / 1e3:.1f}"

    print(f"  2 MiB as GB/s: floor {gbs(big['floor'])}, read {gbs(big['read'])}, "
          f"pread {gbs(big['pread'])}, pread_async {gbs(big['pread_async'])}")
    print("  lone 2 MiB by task_size (GB/s): "
          + ", ".join(f"{t >> 10}K pread {gbs(big[f'pread_t{t >> 10}K'])} "
                      f"pread_async {gbs(big[f'pread_async_t{t >> 10}K'])}"
                      for t in LONE_TASKS))
    print(f"  lone 2 MiB, read first (default) / stream waits on the workers' flag (GB/s): "
          f"pread {gbs(big['pread'])} / {gbs(big['pread_flag'])}, "
          f"pread_async {gbs(big['pread_async'])} / {gbs(big['pread_async_flag'])}")
    print("  lone 2 MiB pread_async by engine_threads (GB/s): "
          + ", ".join(f"{t} {gbs(us)}" for t, us in by_threads.items()))
    for d, e in engine.items():
        print(f"  engine on device {d}: {e['mechanism']}, staging {e['staging_bytes'] >> 20} MiB "
              f"in {e['staging_slot_bytes'] >> 10} KiB slots, pinned by {e['staging_pinned_by']}")
    print(f"  hipfile.open + close: {oc:.1f} us")


def files_rows(hipfile: Any, dev: Device, folder: str, nfiles: int, fsize: int, repeats: int,
               out: dict[str, Any]) -> None:
    import random

    paths = [os.path.join(folder, f"chunk{i:05d}.bin") for i in range(nfiles)]
    block = os.urandom(fsize)
    for p in paths:
        with open(p, "wb") as f:
            f.write(block)
    one = os.path.join(folder, "chunks-in-one.bin")
    with open(one, "wb") as f:
        for _ in paths:
            f.write(block)
    total = nfiles * fsize
    slots = list(range(nfiles))
    random.Random(0).shuffle(slots)   # scattered slots of one buffer (paged KV blocks)

    def per_file() -> None:
        for i, p in enumerate(paths):
            with hipfile.open(p) as fh:
                fh.pread_async(dev.buf, fsize, 0, slots[i] * fsize, dev.stream).wait()

    def one_op() -> None:
        fhs = [hipfile.open(p) for p in paths]
        try:
            h = hipfile.pread_async_scatter(
                dev.buf, [(fh, fsize, 0, slots[i] * fsize) for i, fh in enumerate(fhs)],
                dev.stream, prefetch=True)
            h.wait()
        finally:
            for fh in fhs:
                fh.close()

    def one_file() -> None:
        with hipfile.open(one) as fh:
            fh.pread_async_scatter(dev.buf, [(fsize, i * fsize, slots[i] * fsize)
                                             for i in range(nfiles)],
                                   dev.stream, prefetch=True).wait()

    cases: dict[str, Callable[[], None]] = {"per_file": per_file, "one_file": one_file}
    if hasattr(hipfile, "pread_async_scatter"):
        cases["files_one_op"] = one_op
    times: dict[str, list[float]] = {k: [] for k in cases}
    for fn in cases.values():
        fn()
    for _ in range(max(3, repeats // 5)):
        for k, fn in cases.items():
            dev.sync()
            t0 = time.perf_counter()
            fn()
            dev.sync()
            times[k].append(time.perf_counter() - t0)
    gbps = {k: total / statistics.median(v) / 1e9 for k, v in times.items()}
    out["files_gbps"] = gbps
    print(f"\n{nfiles} files x {fsize >> 20} MiB into scattered slots, open+read+close, warm")
    for k, v in gbps.items():
        print(f"  {k:14s} {v:7.2f} GB/s  {v / gbps['one_file']:5.2f}x one file")
    for p in [*paths, one]:
        os.unlink(p)


FIRST_CHILD = r"""
import os, sys, time, json
t0 = time.perf_counter()
import torch
torch.cuda.init(); torch.empty(1, device="cuda")
t_torch = time.perf_counter()
import hipfile.safetensors.torch as hst
t_imp = time.perf_counter()
prepare = sys.argv[2] == "prepare"
if prepare:
    import hipfile.engine
    hipfile.engine.prepare()
t_prep = time.perf_counter()
d = hst.load_file(sys.argv[1], device="cuda:0")
torch.cuda.synchronize()
t1 = time.perf_counter()
del d
d = hst.load_file(sys.argv[1], device="cuda:0")
torch.cuda.synchronize()
t2 = time.perf_counter()
print(json.dumps({"import_s": t_imp - t_torch, "prepare_s": t_prep - t_imp,
                  "first_s": t1 - t_prep, "second_s": t2 - t1,
                  "hip_python_layer": any(m in sys.modules for m in ("hip.hip",
                                                                     "rocm.bindings.hip"))}))
"""


def _first_samples(path: str, samples: int, staging: str, prepare: bool) -> list[dict[str, Any]]:
    env = dict(os.environ)
    if staging:
        env["HIPFILE_ENGINE_STAGING_SIZE"] = staging
    got = []
    for _ in range(samples):
        r = subprocess.run([sys.executable, "-c", FIRST_CHILD, path,
                            "prepare" if prepare else "bare"], env=env,
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            print(r.stderr[-2000:])
            raise SystemExit("first-call child failed")
        got.append(json.loads(r.stdout.strip().splitlines()[-1]))
    return got


def first_rows(folder: str, gib: float, samples: int, stagings: list[str],
               out: dict[str, Any]) -> None:
    import numpy as np

    try:
        import torch
        from safetensors.torch import save_file
    except ImportError:
        print("\nfirst call: skipped (needs torch and safetensors)")
        return
    if not torch.cuda.is_available():
        print("\nfirst call: skipped (needs a GPU)")
        return
    path = os.path.join(folder, "model.safetensors")
    # model-like: 4096x4096 bf16 matrices and odd-sized vectors
    tensors: dict[str, Any] = {}
    left = int(gib * (1 << 30))
    rng = np.random.default_rng(0)
    i = 0
    while left > 0:
        m = torch.from_numpy(rng.integers(0, 255, (4096, 4096 * 2), dtype=np.uint8))
        tensors[f"layers.{i}.w"] = m.view(torch.bfloat16)
        tensors[f"layers.{i}.norm"] = torch.ones(4096 + i % 7, dtype=torch.float32)
        left -= m.numel()
        i += 1
    save_file(tensors, path)
    del tensors
    size = os.path.getsize(path)
    rows: dict[str, Any] = {}
    print(f"\nfirst call, fresh interpreter ({samples} samples), load_file of "
          f"{size / 1e9:.2f} GB warm; 'prepare': hipfile.engine.prepare() before it, "
          f"timed apart")
    for staging in stagings:
        for prepare in (False, True):
            got = _first_samples(path, samples, staging, prepare)
            med = {k: statistics.median(float(s[k]) for s in got)
                   for k in ("import_s", "prepare_s", "first_s", "second_s")}
            name = f"{'prepare' if prepare else 'bare'} staging={staging or 'default'}"
            rows[name] = {**med, "samples": got}
            first, second = med["first_s"], med["second_s"]
            print(f"  {name:28s} first {first * 1e3:7.1f} ms ({size / first / 1e9:5.1f} GB/s)"
                  f"  second {second * 1e3:7.1f} ms ({size / second / 1e9:5.1f} GB/s)"
                  f"  first/second {second / first:4.2f}x  prepare "
                  f"{med['prepare_s'] * 1e3:6.1f} ms  import {med['import_s'] * 1e3:5.1f} ms"
                  f"  HIP-Python layer imported: "
                  f"{any(s['hip_python_layer'] for s in got)}")
    bare = rows[f"bare staging={stagings[0] or 'default'}"]
    out["first"] = {"bytes": size, "first_s": bare["first_s"], "second_s": bare["second_s"],
                    "import_s": bare["import_s"], "rows": rows}
    os.unlink(path)


def _plain_reader(path: str, threads: int, block: int, direct: bool, *,
                  partitioned: bool = False, hip: Any = None, dev: Device | None = None
                  ) -> Callable[[], None]:
    """A plain reader of the whole file: ``threads`` threads of ``block``-byte
    ``preadv`` calls (``O_DIRECT`` or buffered), each thread taking the next
    block from one queue, or a contiguous part of the file
    (``partitioned``). With ``dev``, each block is read into pinned memory and
    copied into device memory (a device read's floor); else into host memory
    only (the disk's side alone)."""
    import mmap

    size = os.path.getsize(path)
    pinned = [hip_check(hip.hipHostMalloc(block, 0)) for _ in range(threads)] \
        if dev is not None else []
    bufs: list[Any] = [(ctypes.c_char * block).from_address(int(p)) for p in pinned] \
        if dev is not None else [mmap.mmap(-1, block) for _ in range(threads)]
    flags = os.O_RDONLY | (getattr(os, "O_DIRECT", 0) if direct else 0)

    def run() -> None:
        fd = os.open(path, flags)
        blocks = list(range(0, size, block))
        lock = threading.Lock()

        def worker(k: int) -> None:
            view = memoryview(bufs[k])

            def one(off: int) -> None:
                n = os.preadv(fd, [view[:min(block, size - off)]], off)
                if dev is not None:
                    hip_check(hip.hipMemcpy(dev.addr + off, pinned[k], n,
                                            hip.hipMemcpyKind.hipMemcpyHostToDevice))

            if partitioned:
                for off in blocks[k * len(blocks) // threads:(k + 1) * len(blocks) // threads]:
                    one(off)
                return
            while True:
                with lock:
                    if not blocks:
                        return
                    off = blocks.pop(0)
                one(off)

        ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        os.close(fd)

    run.pinned = pinned  # type: ignore[attr-defined]
    return run


def _engine_read(hipfile: Any, dev: Device, path: str, size: int) -> None:
    """The whole file into device memory with the engine, as a loader calls
    it: 16 MiB ranges, prefetched, on the caller's stream."""
    with hipfile.open(path) as fh:
        n = 16 << 20
        hs = fh.pread_async_ranges(dev.buf, [(n, o, o) for o in range(0, size, n)],
                                   dev.stream, prefetch=True)
        for h in hs:
            h.wait()


def cold_sweep(hipfile: Any, dev: Device, folder: str, gib: float, out: dict[str, Any]) -> None:
    """What the disk wants: request size x depth (threads) x order, with and
    without ``O_DIRECT``, into host memory; and the engine's cold read for
    task sizes, thread counts and ``O_DIRECT`` request sizes
    (``engine_direct_io_size``), into device memory. The page cache is
    dropped before each read; two reads per case, the better one kept."""
    path = os.path.join(folder, "sweep.bin")
    size = int(gib * (1 << 30)) // (32 << 20) * (32 << 20)
    write_file(path, size)
    cases: dict[str, Callable[[], None]] = {}
    for block in (1 << 20, 4 << 20, 16 << 20):
        for threads in (1, 4, 8, 16, 32):
            for part in (False, True):
                if threads == 1 and part:
                    continue
                name = f"odirect {block >> 20:2d} MiB x{threads:2d} " + \
                    ("parts" if part else "queue")
                cases[name] = _plain_reader(path, threads, block, True, partitioned=part)
    for block in (1 << 20, 4 << 20):
        for threads in (1, 8, 16):
            cases[f"buffered {block >> 20:2d} MiB x{threads:2d} queue"] = _plain_reader(
                path, threads, block, False)

    def engine_read() -> None:
        _engine_read(hipfile, dev, path, size)

    settings: dict[str, dict[str, int]] = {}     # engine case -> its settings
    for task in (2 << 20, 4 << 20, 8 << 20):
        # requests of one chunk up to 8 chunks (whole slots) for 2 MiB tasks
        for direct in ((2 << 20, 4 << 20, 8 << 20, 16 << 20) if task == 2 << 20 else (task,)):
            for threads in (8, 16) if task == 2 << 20 else (8, 16, 32):
                name = (f"engine task {task >> 20} MiB x{threads:2d} threads, "
                        f"requests {direct >> 20:2d} MiB")
                settings[name] = {"engine_task_size": task, "engine_threads": threads,
                                  "engine_direct_io_size": direct}
    got: dict[str, float] = {}
    for k, fn in {**cases, **dict.fromkeys(settings, engine_read)}.items():
        best = float("inf")
        for _ in range(2):
            with contextlib.ExitStack() as setting:
                if k in settings:
                    # a ring in slots of this task size, made before the
                    # timed read (its pinning is not the disk's time)
                    setting.enter_context(hipfile.defaults.set(**settings[k]))
                    hipfile.engine.shutdown()
                    hipfile.trim_pool()
                    hipfile.engine.prepare()
                drop_page_cache(path)
                dev.sync()
                t0 = time.perf_counter()
                fn()
                dev.sync()
                best = min(best, time.perf_counter() - t0)
        got[k] = size / best / 1e9
    hipfile.engine.shutdown()
    hipfile.trim_pool()
    out["cold_sweep_gbps"] = got
    top = max(got.values())
    print(f"\ncold sweep (page cache dropped), {size >> 20} MiB, best of two, fastest first")
    for k, v in sorted(got.items(), key=lambda kv: -kv[1]):
        print(f"  {k:52s} {v:6.2f} GB/s  {v / top:5.2f}x")
    os.unlink(path)


COLD_SEED = 7


def cold_rows(hipfile: Any, dev: Device, folder: str, gib: float, repeats: int,
              out: dict[str, Any]) -> None:
    hip = dev.hip
    path = os.path.join(folder, "cold.bin")
    size = int(gib * (1 << 30)) // (16 << 20) * (16 << 20)
    write_file(path, size, safetensors=dev.torch)
    cases: dict[str, Callable[[], None]] = {}

    def engine() -> None:
        _engine_read(hipfile, dev, path, size)

    def pread() -> None:
        with hipfile.open(path) as fh:
            fh.pread(dev.buf, size, 0).result()

    cases["engine"] = engine
    cases["pread"] = pread
    # the setting the cold sweeps favour, as a process started with
    # HIPFILE_ENGINE_TASK_SIZE=4M has it: a ring in 4 MiB slots, made
    # before the timed read (around it: the default ring again)
    # and 16 threads of 2 MiB tasks (the other 32 MiB in flight they favour)
    settings = contextlib.ExitStack()

    def setting_on(**kw: int) -> Callable[[], None]:
        def on() -> None:
            settings.enter_context(hipfile.defaults.set(**kw))
            hipfile.trim_pool()
            hipfile.engine.prepare()
        return on

    def setting_off() -> None:
        settings.close()
        hipfile.trim_pool()
        hipfile.engine.prepare()

    cases["engine_task_4MiB"] = engine
    cases["engine_threads_16"] = engine
    # one request per 2 MiB chunk (engine_direct_io_size of one slot): the
    # engine's cold read before requests of consecutive chunks were merged
    cases["engine_direct_2MiB"] = engine
    around = {"engine_task_4MiB": (setting_on(engine_task_size=4 << 20), setting_off),
              "engine_threads_16": (setting_on(engine_threads=16), setting_off),
              "engine_direct_2MiB": (setting_on(engine_direct_io_size=2 << 20), setting_off)}
    if dev.torch:       # the file is then a checkpoint of one tensor
        from hipfile.safetensors.torch import load_file

        def load() -> None:
            load_file(path, device="cuda:0")

        cases["load_file"] = load
    readers = {"odirect_1x16MiB": _plain_reader(path, 1, 16 << 20, True, hip=hip, dev=dev),
               "odirect_8x16MiB": _plain_reader(path, 8, 16 << 20, True, hip=hip, dev=dev),
               "buffered_16x4MiB": _plain_reader(path, 16, 4 << 20, False, hip=hip, dev=dev)}
    cases.update(readers)
    try:
        import cupy  # noqa: F401
        import kvikio

        def kvik() -> None:
            with kvikio.CuFile(path, "r") as f:
                f.pread(dev.buf, size, 0).get()

        cases["kvikio_default"] = kvik
    except ImportError:
        pass
    times: dict[str, list[float]] = {k: [] for k in cases}
    order = list(cases.items())
    shuffle = random.Random(COLD_SEED).shuffle
    rounds = max(3, repeats // 2)
    for _ in range(rounds):
        shuffle(order)          # no case always follows the same one
        for k, fn in order:
            on, off = around.get(k, (None, None))
            if on is not None:
                on()
            drop_page_cache(path)
            dev.sync()
            t0 = time.perf_counter()
            fn()
            dev.sync()
            times[k].append(time.perf_counter() - t0)
            if off is not None:
                off()
    for r in readers.values():
        for p in r.pinned:  # type: ignore[attr-defined]
            hip.hipHostFree(p)
    gbps = {k: size / statistics.median(v) / 1e9 for k, v in times.items()}
    out["cold_gbps"] = gbps
    best = max(gbps[k] for k in readers)
    print(f"\ncold (page cache dropped), {size >> 20} MiB into device memory, median of "
          f"{rounds} rounds in shuffled order")
    for k, v in gbps.items():
        print(f"  {k:18s} {v:6.2f} GB/s  {v / best:5.2f}x best plain reader")
    os.unlink(path)


def main() -> int:
    args = build_parser().parse_args()
    hipfile = select_platform(args.platform)
    only = set(filter(None, args.only.split(","))) or {"small", "open", "files", "first",
                                                        "cold"}
    folder = temp_folder(args.dir)
    out: dict[str, Any] = {}
    need = max(args.files * (args.file_mib << 20), max(SIZES) * 4)
    if (args.cold or args.cold_sweep) and "cold" in only:
        need = max(need, int(args.cold_gib * (1 << 30)))
    dev = Device(need)
    try:
        if "small" in only or "open" in only:
            small_rows(hipfile, dev, folder, args.repeats, out)
        if "files" in only:
            files_rows(hipfile, dev, folder, args.files, args.file_mib << 20, args.repeats, out)
        if args.cold and "cold" in only:
            cold_rows(hipfile, dev, folder, args.cold_gib, args.repeats, out)
        if args.cold_sweep and "cold" in only:
            cold_sweep(hipfile, dev, folder, args.cold_gib, out)
    finally:
        dev.close()
    if args.first_gib > 0 and "first" in only:
        first_rows(folder, args.first_gib, args.first_samples,
                   [x.strip() for x in args.first_staging.split(",")], out)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
