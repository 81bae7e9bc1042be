"""Layer-wise loads and saves: the stream-ordered parallel engine side by side
with read_async, sync pread, KvikIO and the machine's limits, in one run.

Reads ``--layers`` ranges of ``--layer-mib`` MiB (one per layer) from a file
in the page cache into one device buffer, and writes them back, timing:

* ``read_async``: ``FileHandle.read_async`` per layer on one stream (the
  library's own stream-ordered path);
* ``engine``: ``FileHandle.pread_async_ranges`` (all layers at once);
* ``pread``: ``FileHandle.pread`` of the same bytes, as a user calls it
  (device memory: on the engine's threads, ordered after no stream), and
  ``pread_pool``: the same with a thread pool of ``num_threads`` given as
  its ``executor`` (``hipFileRead`` tasks, the page cache's reference);
* ``kvikio-*``: KvikIO's ``raw_read_async`` per layer on one stream and its
  ``pread``, each configuration in its own process (KvikIO reads its compat
  mode from the environment at import);
* limits: page cache -> pinned host with 16 threads, and the pinned H2D copy;
* overlap: each layer's compute (bf16 matrix products with PyTorch, else a
  memset) waits for its own layer only: ``t_both`` for the engine
  (``wait_on``) and for ``read_async`` (an event per layer);
* the save side: ``pwrite_async_ranges`` against a sync ``pwrite``;
* a paged KV cache: each layer as ``--block-kib`` blocks, contiguous in the
  file and scattered (permuted) over the whole device buffer, loaded with one
  ``pread_async_scatter`` per layer and released to the compute stream, side
  by side with the contiguous layers (the same bytes), and
  ``pread_async_ranges`` with one range per block, and the scatter with
  ``prefetch=True`` (each layer's file reads start at submit) beside the
  contiguous layers loaded the same way (one ``pread_async`` per layer,
  ``prefetch=True``);
* ``--batch``: ``batch_read`` of ``--batch-blocks`` of those blocks against
  the engine's scatter read of the same blocks (``bench_batch.py`` runs the
  same comparison with time limits);
* churn: the layer-wise load with compute while another thread allocates
  and frees ``--churn-mib`` of device memory in a loop (with PyTorch:
  ``torch.empty`` then ``torch.cuda.empty_cache``; else ``hipMalloc`` and
  ``hipFree``), each of which synchronises the device; the load must
  complete, and its time is compared with the same load alone. The same
  churn runs beside the engine's load without compute, beside sync
  ``pread`` and beside the compute alone, which say how much the process
  slows whatever it does (``churn_engine_with_compute_vs_compute``: the
  load's slowdown over the compute's, 1 when the engine adds none), and
  beside the compute with the GIL given away once per layer, which says
  whether the GIL is what slows; a second, paced churn pauses
  ``--churn-interval-ms`` between rounds. For the account of what slows,
  the layer-wise load with compute also reports, alone and beside the
  churn, the time in its submission, in its ``wait_on`` calls and in the
  compute's launches: runtime calls that a free can hold up. The stream
  waits one such load enqueues are printed too (one per chunk, or per
  batch of chunks with ``HIPFILE_ENGINE_COPY_BATCH``).

The new rows pass the framework's tensor and streams as they are, with no
driver, buffer or stream registration held by the benchmark.

Medians of interleaved repeats and the ratios the goals are stated in are
printed; ``--json`` writes everything. ``--cold`` adds a cold-cache read row
(the file dropped from the page cache before each timed read), ``--sweep``
a sweep of the engine's threads and task sizes.

    python benchmarks/bench_engine.py --layers 32 --layer-mib 16 --dir /tmp
"""

from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from _common import (
    LayerCompute,
    add_common_arguments,
    drop_page_cache,
    hip_check,
    select_platform,
    temp_folder,
    time_interleaved,
    write_random_file,
)

KVIKIO_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_kvikio_worker.py")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=32, help="ranges (layers) per load")
    ap.add_argument("--layer-mib", type=int, default=16, help="MiB per layer")
    ap.add_argument("--dim", type=int, default=4096, help="matrix size of each layer's product")
    ap.add_argument("--matmuls", type=int, default=4, help="matrix products per layer")
    ap.add_argument("--kvikio", action="store_true", help="add the KvikIO rows (needs kvikio)")
    ap.add_argument("--cold", action="store_true", help="add a cold-cache read row")
    ap.add_argument("--sweep", action="store_true", help="sweep engine threads x task sizes")
    ap.add_argument("--block-kib", type=int, default=64, help="KiB per paged KV block")
    ap.add_argument("--batch", action="store_true",
                    help="add the batch_read row (a library whose batch calls hang stops "
                         "the run: benchmarks/bench_batch.py runs it with time limits)")
    ap.add_argument("--batch-blocks", type=int, default=1024,
                    help="blocks read by the batch_read row")
    ap.add_argument("--churn-interval-ms", type=float, default=10.0,
                    help="pause between the paced churn thread's rounds (ms)")
    ap.add_argument("--churn-mib", type=int, default=256,
                    help="MiB allocated and freed per round by the churn thread")
    ap.add_argument("--json", default=None, help="write the results to this file")
    add_common_arguments(ap, repeats=7, data="the data file",
                         allow_emulated="run on the emulated platform (correctness only, "
                                        "no speed)")
    return ap


#: The churn's account: the phase now timed, and per phase the layer-wise
#: load's (submit, wait_on, launch) seconds (see ``both_layers``).
PHASE = ["cases"]
PARTS: dict[str, list[tuple[float, float, float]]] = {}


def churn_rows(loads: dict[str, Callable[[], None]], sync_all: Callable[[], None], nbytes: int,
               repeats: int, uses_torch: bool, interval_s: float = 0.0) -> dict[str, Any]:
    """Time each of ``loads`` alone and while another thread allocates and
    frees ``nbytes`` of device memory in a loop (``interval_s`` between
    rounds; 0: back to back). Each free waits for the whole device, so every
    load slows; the loads other than the engine's are the references that
    say by how much the process itself slows. A round that does not finish
    in 60 s is reported as stuck (the process is then ended, with every
    thread's stack on stderr)."""
    import faulthandler

    from hip import hip

    stop = threading.Event()
    frees = [0]

    def churn() -> None:
        if uses_torch:
            import torch

            while not stop.is_set():
                x = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
                del x
                torch.cuda.empty_cache()
                frees[0] += 1
                if interval_s:
                    stop.wait(interval_s)
        else:
            while not stop.is_set():
                p = hip_check(hip.hipMalloc(nbytes))
                hip_check(hip.hipFree(p))
                frees[0] += 1
                if interval_s:
                    stop.wait(interval_s)

    def timed(load: Callable[[], None]) -> float:
        sync_all()
        t0 = time.perf_counter()
        load()
        return time.perf_counter() - t0

    PARTS.clear()
    PHASE[0] = "alone"
    alone = {k: [timed(f) for _ in range(repeats)] for k, f in loads.items()}
    PHASE[0] = "churn"
    t = threading.Thread(target=churn, daemon=True)
    faulthandler.dump_traceback_later(60 * repeats * len(loads) + 60, exit=True)
    t0 = time.perf_counter()
    t.start()
    try:
        busy = {k: [timed(f) for _ in range(repeats)] for k, f in loads.items()}
    finally:
        stop.set()
        t.join(60)
        faulthandler.cancel_dump_traceback_later()
    spent = time.perf_counter() - t0
    parts = {phase: {name: statistics.median(p[k] for p in rows) * 1e3
                     for k, name in enumerate(("submit_ms", "wait_on_ms", "launch_ms"))}
             for phase, rows in PARTS.items()}
    return {"completed": True, "interval_s": interval_s, "engine_with_compute_parts": parts,
            "alone_s": {k: statistics.median(v) for k, v in alone.items()},
            "churn_s": {k: statistics.median(v) for k, v in busy.items()},
            "frees_per_s": frees[0] / spent,
            "churn": "torch.empty + empty_cache" if uses_torch else "hipMalloc + hipFree"}


def main() -> int:
    ap = build_parser()
    args = ap.parse_args()
    hipfile = select_platform(args.platform)
    from hip import hip

    platform = hipfile.platforms.active() or "rocm"
    if platform == "emulated" and not args.allow_emulated:
        print("refusing to time the emulated platform (no GPU): pass --allow-emulated",
              file=sys.stderr)
        return 2

    check = hip_check
    layers, chunk = args.layers, args.layer_mib << 20
    total = layers * chunk
    folder = temp_folder(args.dir)
    path = os.path.join(folder, "kv.bin")
    wpath = os.path.join(folder, "save.bin")
    results: dict[str, Any] = {"platform": platform, "layers": layers, "layer_bytes": chunk,
                               "engine": hipfile.engine.settings(), "cases": {}}
    try:
        write_random_file(path, total, chunk)
        with open(wpath, "wb") as f:
            f.truncate(total)

        lc = LayerCompute(total, chunk, args.dim, args.matmuls)
        kv_obj, io_h, comp_h = lc.kv, lc.io_stream, lc.compute_stream
        compute, sync_all = lc.compute, lc.sync_all
        results["compute"] = lc.kind
        pinned = check(hip.hipHostMalloc(total, 0))
        ranges = [(chunk, i * chunk, i * chunk) for i in range(layers)]

        with hipfile.Driver(), hipfile.FileHandle(path) as fh, \
                hipfile.FileHandle(wpath, os.O_RDWR) as wf, hipfile.Buffer(kv_obj) as buf, \
                hipfile.Stream(io_h) as io:

            def read_async() -> None:
                hs = [fh.read_async(buf, chunk, o, o, io) for _, o, _ in ranges]
                assert sum(h.wait() for h in hs) == total

            def engine() -> None:
                assert sum(h.wait() for h in fh.pread_async_ranges(buf, ranges, io_h)) == total

            def pread() -> None:
                assert fh.pread(buf, total).result() == total

            pool = concurrent.futures.ThreadPoolExecutor(hipfile.defaults.num_threads())

            def pread_pool() -> None:
                assert fh.pread(buf, total, executor=pool).result() == total

            def compute_only() -> None:
                for i in range(layers):
                    compute(i)
                check(hip.hipStreamSynchronize(comp_h))

            def compute_gil_handoff() -> None:
                # the compute with the GIL given away once per layer: beside
                # the churn, as slow as compute_only unless the churn's cost
                # is the GIL (a thread holding it through each free)
                for i in range(layers):
                    time.sleep(0)
                    compute(i)
                check(hip.hipStreamSynchronize(comp_h))

            def both_layers(target: Any) -> None:
                """The layer-wise load into ``target``, each layer's compute
                waiting for its own layer. Records, for the churn's account,
                the time in the submission, in the ``wait_on`` calls and in
                the compute's launches (each is runtime calls that a free
                can hold up)."""
                t0 = time.perf_counter()
                hs = fh.pread_async_ranges(target, ranges, io_h)
                t_submit = time.perf_counter() - t0
                t_wait_on = t_launch = 0.0
                for i, h in enumerate(hs):
                    t1 = time.perf_counter()
                    h.wait_on(comp_h)
                    t2 = time.perf_counter()
                    compute(i)
                    t_wait_on += t2 - t1
                    t_launch += time.perf_counter() - t2
                check(hip.hipStreamSynchronize(comp_h))
                assert sum(h.wait() for h in hs) == total
                PARTS.setdefault(PHASE[0], []).append((t_submit, t_wait_on, t_launch))

            def both_engine() -> None:
                both_layers(buf)

            def both_read_async() -> None:
                hs = []
                for i, (_, o, _) in enumerate(ranges):
                    h = fh.read_async(buf, chunk, o, o, io)
                    check(hip.hipStreamWaitEvent(comp_h, h.record_event(), 0))
                    compute(i)
                    hs.append(h)
                check(hip.hipStreamSynchronize(comp_h))
                assert sum(h.wait() for h in hs) == total

            def limit_pagecache() -> None:
                step = 16 << 20
                base = int(pinned)
                offs = list(range(0, total, step))
                fd = os.open(path, os.O_RDONLY)

                def part(k: int) -> None:
                    for o in offs[k::16]:
                        n = min(step, total - o)
                        view = (ctypes.c_char * n).from_address(base + o)
                        got = os.preadv(fd, [memoryview(view).cast("B")], o)
                        assert got == n

                ts = [threading.Thread(target=part, args=(k,)) for k in range(16)]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join()
                os.close(fd)

            def limit_h2d() -> None:
                check(hip.hipMemcpyAsync(buf.ptr, pinned, total,
                                         hip.hipMemcpyKind.hipMemcpyHostToDevice, io_h))
                check(hip.hipStreamSynchronize(io_h))

            def save_engine() -> None:
                assert sum(h.wait() for h in wf.pwrite_async_ranges(buf, ranges, io_h)) == total

            def save_pwrite() -> None:
                assert wf.pwrite(buf, total).result() == total

            # -- a paged KV cache: the same bytes as blocks scattered over kv
            block = args.block_kib << 10
            per_layer = chunk // block
            import random

            slots = list(range(layers * per_layer))
            random.Random(1).shuffle(slots)
            layer_blocks = [[(block, i * chunk + j * block, slots[i * per_layer + j] * block)
                             for j in range(per_layer)] for i in range(layers)]

            def both_paged_scatter() -> None:
                hs = []
                for i in range(layers):
                    h = fh.pread_async_scatter(kv_obj, layer_blocks[i], io_h)
                    h.wait_on(comp_h)
                    compute(i)
                    hs.append(h)
                check(hip.hipStreamSynchronize(comp_h))
                assert sum(h.wait() for h in hs) == total

            def both_contiguous() -> None:
                both_layers(kv_obj)          # the framework's tensor, as it is

            def paged_scatter() -> None:
                hs = [fh.pread_async_scatter(kv_obj, layer_blocks[i], io_h)
                      for i in range(layers)]
                assert sum(h.wait() for h in hs) == total

            def paged_scatter_prefetch() -> None:
                hs = [fh.pread_async_scatter(kv_obj, layer_blocks[i], io_h, prefetch=True)
                      for i in range(layers)]
                assert sum(h.wait() for h in hs) == total

            def contiguous_prefetch() -> None:
                # the same bytes as one range per layer, one call each, prefetch
                # (the like-for-like reference of paged_scatter_prefetch)
                hs = [fh.pread_async(kv_obj, chunk, i * chunk, i * chunk, io_h, prefetch=True)
                      for i in range(layers)]
                assert sum(h.wait() for h in hs) == total

            def paged_ranges() -> None:
                hs = [h for i in range(layers)
                      for h in fh.pread_async_ranges(kv_obj, layer_blocks[i], io_h)]
                assert sum(h.wait() for h in hs) == total

            some = [r for lb in layer_blocks for r in lb][:args.batch_blocks]
            some_bytes = sum(r[0] for r in some)

            def batch_blocks() -> None:
                assert sum(hipfile.batch_read(fh, kv_obj, some)) == some_bytes

            def engine_blocks() -> None:
                assert fh.pread_async_scatter(kv_obj, some, io_h).wait() == some_bytes

            cases: dict[str, Callable[[], None]] = {
                "read_async": read_async, "engine": engine, "pread": pread,
                "pread_pool": pread_pool,
                "compute": compute_only, "both_engine": both_engine,
                "both_read_async": both_read_async,
                "limit_pagecache_pinned_16t": limit_pagecache, "limit_h2d_pinned": limit_h2d,
                "save_engine": save_engine, "save_pwrite": save_pwrite,
                "both_contiguous_bare": both_contiguous, "both_paged_scatter": both_paged_scatter,
                "paged_scatter": paged_scatter, "paged_scatter_prefetch": paged_scatter_prefetch,
                "contiguous_prefetch": contiguous_prefetch,
                "paged_ranges": paged_ranges,
            }
            times = time_interleaved(cases, args.repeats, sync_all)
            if args.batch:
                blocks_times = time_interleaved({"batch_read": batch_blocks,
                                                 "engine_scatter": engine_blocks},
                                                args.repeats, sync_all)
                results["blocks"] = {
                    "count": len(some), "bytes": some_bytes,
                    **{k: {"median_s": statistics.median(v),
                           "gbps": some_bytes / statistics.median(v) / 1e9}
                       for k, v in blocks_times.items()}}
            def stream_counts() -> tuple[int, int]:
                devs = hipfile.engine.info()["devices"].values()
                return (sum(int(d.get("stream_waits", 0)) for d in devs),
                        sum(int(d.get("stream_calls", 0)) for d in devs))

            # the runtime calls one layer-wise load makes to enqueue its
            # stream side, and among them its stream waits on staging slots
            # (one per chunk, or per batch of chunks)
            w0, c0 = stream_counts()
            both_contiguous()
            w1, c1 = stream_counts()
            results["stream_waits_per_load"] = w1 - w0
            results["stream_calls_per_load"] = c1 - c0
            churn_loads = {"engine_with_compute": both_contiguous, "engine": engine,
                           "pread": pread, "pread_pool": pread_pool, "compute": compute_only,
                           "compute_gil_handoff": compute_gil_handoff}
            results["churn"] = churn_rows(churn_loads, sync_all, args.churn_mib << 20,
                                          args.repeats, lc.uses_torch)
            results["churn_paced"] = churn_rows(churn_loads, sync_all, args.churn_mib << 20,
                                                args.repeats, lc.uses_torch,
                                                interval_s=args.churn_interval_ms / 1e3)
            med = {k: statistics.median(v) for k, v in times.items()}
            results["cases"] = {k: {"median_s": v, "gbps": total / v / 1e9} for k, v in med.items()}

            if args.sweep:
                sweep: dict[str, float] = {}
                for threads in (4, 8, 16, 32):
                    for task_mib in (1, 2, 4, 8, 16):
                        hipfile.engine.shutdown()
                        hipfile.trim_pool()     # the ring is remade in slots of the task
                        with hipfile.defaults.set(engine_threads=threads,
                                                  engine_task_size=task_mib << 20):
                            engine()
                            ts = []
                            for _ in range(args.repeats):
                                t0 = time.perf_counter()
                                engine()
                                ts.append(time.perf_counter() - t0)
                        sweep[f"{threads}t x {task_mib} MiB"] = total / statistics.median(ts) / 1e9
                hipfile.engine.shutdown()
                results["sweep_gbps"] = sweep

            if args.sweep:
                # the overlap case across thread counts: the engine's threads
                # share the CPU with the thread that enqueues the compute
                overlap: dict[str, dict[str, float]] = {}
                for threads in (4, 8, 12, 16):
                    hipfile.engine.shutdown()
                    hipfile.trim_pool()
                    with hipfile.defaults.set(engine_threads=threads, engine_task_size=8 << 20):
                        both_engine()
                        tb, ti = [], []
                        for _ in range(args.repeats):
                            sync_all()
                            t0 = time.perf_counter()
                            both_engine()
                            tb.append(time.perf_counter() - t0)
                            sync_all()
                            t0 = time.perf_counter()
                            engine()
                            ti.append(time.perf_counter() - t0)
                    overlap[f"{threads}t x 8 MiB"] = {
                        "t_both_ms": 1e3 * statistics.median(tb),
                        "t_io_ms": 1e3 * statistics.median(ti),
                        "t_both_over_max": statistics.median(tb) / max(
                            statistics.median(ti), med["compute"])}
                hipfile.engine.shutdown()
                results["overlap_sweep"] = overlap

            if args.cold:
                with hipfile.FileHandle(path, os.O_RDONLY | os.O_DIRECT) as dfh:
                    fns: dict[str, Callable[[], object]] = {
                        "pread": pread, "engine": engine,
                        "pread_odirect": lambda: dfh.pread(buf, total).result(),
                        "engine_odirect": lambda: [h.wait() for h in
                                                   dfh.pread_async_ranges(buf, ranges, io_h)],
                    }
                    cold = time_interleaved(fns, max(3, args.repeats // 2), sync_all,
                                            warm_up=False, before=lambda: drop_page_cache(path))
                results["cold_gbps"] = {k: total / statistics.median(v) / 1e9
                                        for k, v in cold.items()}

        if args.kvikio:
            configs = {
                "kvikio-compat-tuned": {"KVIKIO_COMPAT_MODE": "ON", "BENCH_KVIKIO_THREADS": "16",
                                        "BENCH_KVIKIO_TASK": str(16 << 20)},
                "kvikio-compat-default": {"KVIKIO_COMPAT_MODE": "ON"},
                "kvikio-default": {},
            }
            results["kvikio"] = {}
            for cold_flag in (("0", "1") if args.cold else ("0",)):
                for name, extra in configs.items():
                    env = dict(os.environ, **extra)
                    if not extra:
                        env.pop("KVIKIO_COMPAT_MODE", None)
                    proc = subprocess.run(
                        [sys.executable, KVIKIO_WORKER, path, str(layers), str(chunk),
                         str(args.repeats), cold_flag], env=env, capture_output=True, text=True,
                        timeout=300)
                    line = [ln for ln in proc.stdout.splitlines()
                            if ln.startswith("KVIKIO_RESULT ")]
                    key = name + ("-cold" if cold_flag == "1" else "")
                    if proc.returncode or not line:
                        results["kvikio"][key] = {"error": (proc.stderr or proc.stdout)[-800:]}
                        continue
                    r = json.loads(line[0].split(" ", 1)[1])
                    for k in ("raw_read_async", "pread"):
                        if k in r:
                            r[k + "_gbps"] = total / r.pop(k) / 1e9
                    results["kvikio"][key] = r

        check(hip.hipHostFree(pinned))
        pool.shutdown()
        lc.close()
    finally:
        for p in (path, wpath):
            if os.path.exists(p):
                os.unlink(p)
        os.rmdir(folder)

    c = {k: v["median_s"] for k, v in results["cases"].items()}
    ratios = {
        "engine_vs_pread_throughput": c["pread"] / c["engine"],
        "engine_vs_pread_pool_throughput": c["pread_pool"] / c["engine"],
        "both_engine_over_max_io_compute": c["both_engine"] / max(c["engine"], c["compute"]),
        "both_read_async_over_max_io_compute":
            c["both_read_async"] / max(c["read_async"], c["compute"]),
        "engine_vs_read_async": c["read_async"] / c["engine"],
        "save_engine_vs_pwrite_throughput": c["save_pwrite"] / c["save_engine"],
        "engine_vs_limit_pagecache": c["limit_pagecache_pinned_16t"] / c["engine"],
    }
    ratios["paged_scatter_vs_contiguous_with_compute"] = (c["both_contiguous_bare"]
                                                          / c["both_paged_scatter"])
    ratios["paged_scatter_vs_contiguous_load"] = c["engine"] / c["paged_scatter"]
    ratios["paged_scatter_prefetch_vs_contiguous_load"] = (c["engine"]
                                                           / c["paged_scatter_prefetch"])
    ratios["paged_scatter_prefetch_vs_contiguous_prefetch"] = (c["contiguous_prefetch"]
                                                               / c["paged_scatter_prefetch"])
    ratios["paged_ranges_vs_contiguous_load"] = c["engine"] / c["paged_ranges"]
    if "blocks" in results:
        ratios["batch_read_vs_engine_same_blocks"] = (
            results["blocks"]["engine_scatter"]["median_s"]
            / results["blocks"]["batch_read"]["median_s"])
    for key, tag in (("churn", "churn"), ("churn_paced", "churn_paced")):
        ch = results[key]
        for load in ch["alone_s"]:
            ratios[f"{tag}_vs_alone_{load}"] = ch["alone_s"][load] / ch["churn_s"][load]
        # each free drains the device, so the churn slows every GPU load of
        # the process: the engine's own share is its slowdown over that of
        # the compute alone (1: the load slows no more than the compute does)
        ratios[f"{tag}_engine_with_compute_vs_compute"] = (
            ratios[f"{tag}_vs_alone_engine_with_compute"] / ratios[f"{tag}_vs_alone_compute"])
    kv_async = results.get("kvikio", {}).get("kvikio-compat-tuned", {}).get("raw_read_async_gbps")
    if kv_async:
        ratios["engine_vs_kvikio_raw_read_async"] = results["cases"]["engine"]["gbps"] / kv_async
    results["ratios"] = ratios
    print(f"platform={platform} layers={layers} x {args.layer_mib} MiB = {total >> 20} MiB, "
          f"compute: {results['compute']}, repeats={args.repeats}, "
          f"engine {results['engine']}, mechanism {hipfile.engine.mechanism()}")
    if platform == "emulated":
        print("EMULATED PLATFORM: no GPU; figures check correctness only")
    for k, v in results["cases"].items():
        print(f"  {k:28s} {v['median_s'] * 1e3:9.2f} ms  {v['gbps']:7.2f} GB/s")
    for k, v in results.get("kvikio", {}).items():
        print(f"  {k:28s} {v}")
    for k, v in results.get("sweep_gbps", {}).items():
        print(f"  sweep {k:22s} {v:7.2f} GB/s")
    for k, v in results.get("overlap_sweep", {}).items():
        print(f"  overlap {k:20s} t_both {v['t_both_ms']:7.2f} ms  t_io {v['t_io_ms']:7.2f} ms"
              f"  t_both/max {v['t_both_over_max']:5.2f}")
    if "blocks" in results:
        b = results["blocks"]
        print(f"  blocks: {b['count']} x {args.block_kib} KiB: batch_read "
              f"{b['batch_read']['gbps']:.2f} GB/s, engine scatter "
              f"{b['engine_scatter']['gbps']:.2f} GB/s")
    if "stream_waits_per_load" in results:
        print(f"  per layer-wise load: {results['stream_calls_per_load']} runtime calls, "
              f"{results['stream_waits_per_load']} of them stream waits "
              f"(engine_copy_batch {hipfile.defaults.engine_copy_batch()})")
    for key in ("churn", "churn_paced"):
        ch = results[key]
        print(f"  {key}: {ch['churn']}, {ch['frees_per_s']:.0f} frees/s, "
              f"pause {ch['interval_s'] * 1e3:.0f} ms")
        calls = results.get("stream_calls_per_load", 0)
        matmuls = args.layers * args.matmuls
        for phase, p in ch["engine_with_compute_parts"].items():
            # the account: what one runtime call of the submission and one
            # matmul's launch cost (beside the churn, every call waits)
            per_call = (f", {p['submit_ms'] * 1e3 / calls:7.1f} us per runtime call"
                        if calls else "")
            print(f"    engine_with_compute {phase:6s}: submit {p['submit_ms']:8.2f} ms"
                  f"{per_call}, wait_on {p['wait_on_ms']:8.2f} ms, compute launches "
                  f"{p['launch_ms']:8.2f} ms ({p['launch_ms'] * 1e3 / matmuls:7.1f} us "
                  "per matmul)")
    for k, v in results.get("cold_gbps", {}).items():
        print(f"  cold {k:23s} {v:7.2f} GB/s")
    for k, v in ratios.items():
        print(f"  ratio {k:44s} {v:6.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
