"""vLLM's KV offloading to files: hipfile's worker beside what it is measured against.

A vLLM-shaped cache (``--layers`` x K,V tensors of blocks of ``--tokens`` x
``--heads`` x ``--head-dim`` fp16; ``--blocks-per-file`` blocks per file, one
file per request), jobs of each of ``--requests`` requests, warm page cache,
medians of ``--repeats`` runs, all in one run:

* **worker**: ``HipFileOffloadingWorker`` (made by vLLM's
  ``OffloadingSpecFactory``) storing and loading a job, timed from submit
  until ``get_finished`` reports it; beside **contiguous**: the same bytes
  moved by the engine from/to one file into one device buffer
  (``pread_async``/``pwrite_async``), and **pool**: vLLM's own
  ``ThreadPoolFSWorker`` with 16 threads doing POSIX ``preadv``/``pwritev``
  into pinned memory (``hipHostMalloc``) plus one ``hipMemcpy`` per block,
  what a vLLM user writes today;
* **latency**: a one-request load against its floor, one ``preadv`` of the
  file into pinned memory and one copy;
* **beside compute**: a model-like loop on another stream (bf16 matmuls
  with a GPU PyTorch, else device memsets) alone and while a job of the
  largest size loads; the loop's slowdown in percent.

    python benchmarks/bench_vllm.py --platform cuda --dir /mnt/nvme

On the emulated platform "device" memory is host memory: the figures only
check that every row runs (``--layers 2 --requests 1,2`` is a smoke run).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from _common import LayerCompute, add_common_arguments, hip_check, select_platform, temp_folder


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=32, help="layers (each a K and a V tensor)")
    ap.add_argument("--tokens", type=int, default=16, help="tokens per GPU block")
    ap.add_argument("--heads", type=int, default=8, help="KV heads")
    ap.add_argument("--head-dim", type=int, default=128, help="head size (fp16)")
    ap.add_argument("--blocks-per-file", type=int, default=16, help="GPU blocks per file")
    ap.add_argument("--requests", default="1,4,16,64",
                    help="job sizes in requests (one file each), comma-separated")
    ap.add_argument("--pool-threads", type=int, default=16, help="threads of the pool worker")
    ap.add_argument("--compute-iters", type=int, default=20,
                    help="iterations of the compute loop per timing")
    add_common_arguments(ap, data="the chunk files", repeats=5)
    return ap


class Cache:
    """The KV tensors in device memory (hipMalloc), as vLLM's canonical tensors
    would hold them: ``refs`` tensors of ``num_blocks`` pages."""

    def __init__(self, refs: int, num_blocks: int, page: int) -> None:
        from hip import hip

        self.refs, self.num_blocks, self.page = refs, num_blocks, page
        self.bases = [int(hip_check(hip.hipMalloc(num_blocks * page))) for _ in range(refs)]
        for b in self.bases:
            hip_check(hip.hipMemset(b, 0x5A, num_blocks * page))

    def pointers(self, block_ids: list[int]) -> Any:
        """vLLM's ``DevicePointers`` of these blocks (one group)."""
        import numpy as np
        from vllm.v1.kv_offload.base import DevicePointers

        ids = np.asarray(block_ids, dtype=np.uint64)
        ptrs = np.concatenate([np.uint64(b) + ids * np.uint64(self.page) for b in self.bases])
        return DevicePointers(ptrs=ptrs, sizes=np.full(len(ptrs), self.page, dtype=np.uint64),
                              group_block_counts=(len(block_ids),),
                              group_data_ref_counts=(self.refs,), block_indices=(0,))

    def free(self) -> None:
        from hip import hip

        for b in self.bases:
            hip.hipFree(b)


def _spec(root: str, a: argparse.Namespace, page: int) -> Any:
    import uuid

    from vllm.v1.kv_offload import config as c
    from vllm.v1.kv_offload.factory import OffloadingSpecFactory

    layers = tuple(f"model.layers.{i}.attn" for i in range(a.layers))
    cfg = c.OffloadingConfig(
        groups=(c.OffloadingGroupConfig(tokens_per_block=a.tokens, layer_names=layers,
                                        group_id=0),),
        worker_kv_bytes_per_block=2 * a.layers * page, enable_kv_cache_events=False,
        extra_config={"spec_name": "HipFileOffloadingSpec",
                      "spec_module_path": "hipfile.integrations.vllm", "root_dir": root,
                      "max_bytes": 1 << 50},
        engine_id=str(uuid.uuid4()), model=c.OffloadingModelConfig("bench/model", "float16"),
        cache=c.OffloadingCacheConfig(tokens_per_hash=a.tokens,
                                      blocks_per_chunk=a.blocks_per_file),
        parallel=c.OffloadingParallelConfig(0, 1, 1, 1, 1, 1, 0, 1, None, False))
    return OffloadingSpecFactory.create_spec(cfg)


def _pool_worker(mapper: Any, bpf: int, threads: int, max_op: int) -> Any:
    """vLLM's ThreadPoolFSWorker with POSIX preadv/pwritev into pinned memory
    and a copy per block."""
    import threading

    from hip import hip
    from vllm.v1.kv_offload.fs.worker import ThreadPoolFSWorker

    local = threading.local()
    pinned: list[int] = []
    h2d, d2h = hip.hipMemcpyKind.hipMemcpyHostToDevice, hip.hipMemcpyKind.hipMemcpyDeviceToHost

    def buf() -> tuple[int, memoryview]:
        if not hasattr(local, "buf"):
            p = int(hip_check(hip.hipHostMalloc(max_op, 0)))
            pinned.append(p)
            import ctypes

            local.buf = (p, memoryview((ctypes.c_char * max_op).from_address(p)).cast("B"))
        return local.buf  # type: ignore[no-any-return]

    import torch

    class _NoEvent:     # CPU torch cannot record events: its tensors are written already
        def record(self) -> None:
            pass

        def synchronize(self) -> None:
            pass

    class PoolWorker(ThreadPoolFSWorker):  # type: ignore[misc]
        def _submit_io(self, *args: Any, **kw: Any) -> Any:
            if torch.accelerator.current_accelerator() is not None:
                return super()._submit_io(*args, **kw)
            event, torch.Event = torch.Event, _NoEvent
            try:
                return super()._submit_io(*args, **kw)
            finally:
                torch.Event = event

        def read_block(self, path: str, ops: list[Any]) -> None:
            p, mv = buf()
            fd = os.open(path, os.O_RDONLY)
            try:
                for op in ops:
                    n = os.preadv(fd, [mv[:op.size_bytes]], op.file_offset)
                    assert n == op.size_bytes, (path, n)
                    hip_check(hip.hipMemcpy(op.device_ptr, p, n, h2d))
            finally:
                os.close(fd)

        def write_block(self, path: str, ops: list[Any]) -> None:
            p, mv = buf()
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                for op in ops:
                    hip_check(hip.hipMemcpy(p, op.device_ptr, op.size_bytes, d2h))
                    os.pwritev(fd, [mv[:op.size_bytes]], op.file_offset)
            finally:
                os.close(fd)

    w = PoolWorker(mapper, bpf, max_io_threads=threads)
    w.pinned = pinned
    return w


def _run_job(worker: Any, job: int, submit: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    submit()
    while True:
        done = worker.get_finished()
        if done:
            assert [r.job_id for r in done] == [job] and done[0].success, done
            return time.perf_counter() - t0


class Bench:
    def __init__(self, a: argparse.Namespace, hipfile: Any, root: str) -> None:
        self.a, self.hipfile = a, hipfile
        self.page = a.tokens * a.heads * a.head_dim * 2
        self.sizes = [int(x) for x in a.requests.split(",")]
        self.bpf = a.blocks_per_file
        top = max(self.sizes) * self.bpf
        self.cache = Cache(2 * a.layers, 2 * top, self.page)
        self.spec = _spec(root, a, self.page)
        self.worker = self.spec.get_worker(None)
        self.pool = _pool_worker(self.spec.file_mapper, self.bpf, a.pool_threads, self.page)
        self.job = 0
        self.file_bytes = self.cache.refs * self.bpf * self.page
        self.flat_path = os.path.join(root, "contiguous.bin")
        from hip import hip

        flat_bytes = max(self.sizes) * self.file_bytes
        self.flat = int(hip_check(hip.hipMalloc(flat_bytes)))
        self.flat_buf = hipfile.Buffer(self.flat, flat_bytes)

    def keys(self, n: int) -> list[Any]:
        from vllm.v1.kv_offload.base import make_offload_key

        return [make_offload_key(i.to_bytes(8, "big") * 4, 0) for i in range(n)]

    def timed(self, worker: Any, requests: int, store: bool) -> float:
        from vllm.v1.kv_offload.fs.worker import FSLoadStoreSpec

        n = requests * self.bpf
        spec = FSLoadStoreSpec(self.keys(requests))
        job, self.job = self.job, self.job + 1
        if store:
            ptrs = self.cache.pointers(list(range(n)))
            return _run_job(worker, job, lambda: worker.submit_store(job, ptrs, spec))
        ptrs = self.cache.pointers(list(range(self.cache.num_blocks - n, self.cache.num_blocks)))
        return _run_job(worker, job, lambda: worker.submit_load(job, spec, ptrs))

    def contiguous(self, nbytes: int, store: bool) -> float:
        hf = self.hipfile
        with hf.open(self.flat_path, "r+" if os.path.exists(self.flat_path) else "w") as fh:
            t0 = time.perf_counter()
            if store:
                fh.pwrite_async(self.flat_buf, nbytes, 0, 0, 0).wait()
            else:
                fh.pread_async(self.flat_buf, nbytes, 0, 0, 0).wait()
            return time.perf_counter() - t0

    def floor(self) -> float:
        """One preadv of a request's file into pinned memory and one copy."""
        import ctypes

        from hip import hip

        n = self.file_bytes
        p = int(hip_check(hip.hipHostMalloc(n, 0)))
        try:
            mv = memoryview((ctypes.c_char * n).from_address(p)).cast("B")
            path = self.spec.file_mapper.get_file_name(self.keys(1)[0])
            t0 = time.perf_counter()
            fd = os.open(path, os.O_RDONLY)
            os.preadv(fd, [mv], 0)
            os.close(fd)
            hip_check(hip.hipMemcpy(self.cache.bases[0], p, n,
                                    hip.hipMemcpyKind.hipMemcpyHostToDevice))
            return time.perf_counter() - t0
        finally:
            hip.hipHostFree(p)

    def close(self) -> None:
        from hip import hip

        self.worker.shutdown()
        self.pool.shutdown()
        for p in self.pool.pinned:
            hip.hipHostFree(p)
        self.cache.free()
        hip.hipFree(self.flat)


def _median(f: Callable[[], float], repeats: int) -> float:
    return statistics.median(f() for _ in range(repeats))


def _throughput(b: Bench) -> None:
    print("\nGB/s by job size (warm page cache; x = worker / other)")
    print(f"  {'requests':>8s} {'GiB':>6s} {'dir':>5s} {'worker':>8s} {'contig':>8s} "
          f"{'x':>5s} {'pool':>8s} {'x':>5s}")
    for r in b.sizes:
        nbytes = r * b.file_bytes
        for store in (True, False):
            w = nbytes / _median(partial(b.timed, b.worker, r, store), b.a.repeats) / 1e9
            c = nbytes / _median(partial(b.contiguous, nbytes, store), b.a.repeats) / 1e9
            p = nbytes / _median(partial(b.timed, b.pool, r, store), b.a.repeats) / 1e9
            print(f"  {r:8d} {nbytes / 2**30:6.2f} {'store' if store else 'load':>5s} "
                  f"{w:8.2f} {c:8.2f} {w / c:5.2f} {p:8.2f} {w / p:5.2f}", flush=True)


def _latency(b: Bench) -> None:
    b.timed(b.worker, 1, True)
    w = _median(lambda: b.timed(b.worker, 1, False), b.a.repeats)
    f = _median(b.floor, b.a.repeats)
    print(f"\none-request load ({b.file_bytes / 2**20:.1f} MiB): worker {w * 1e3:.2f} ms, "
          f"floor {f * 1e3:.2f} ms, {w / f:.2f}x the floor")


def _beside_compute(b: Bench) -> None:
    chunk = 8 << 20
    comp = LayerCompute(chunk * 2, chunk, 4096, 4)
    iters = b.a.compute_iters

    def loop() -> float:
        t0 = time.perf_counter()
        for i in range(iters):
            comp.compute(i % 2)
        comp.sync_all()
        return (time.perf_counter() - t0) / iters

    loop()
    alone = _median(loop, b.a.repeats)
    r = max(b.sizes)
    from vllm.v1.kv_offload.fs.worker import FSLoadStoreSpec

    n = r * b.bpf
    ptrs = b.cache.pointers(list(range(b.cache.num_blocks - n, b.cache.num_blocks)))
    during = []
    for _ in range(b.a.repeats):
        job, b.job = b.job, b.job + 1
        b.worker.submit_load(job, FSLoadStoreSpec(b.keys(r)), ptrs)
        finished = False
        while not finished:
            during.append(loop())
            finished = bool(b.worker.get_finished())
    slow = statistics.median(during)
    comp.close()
    print(f"\ncompute loop ({comp.kind}): {alone * 1e3:.3f} ms/iter alone, "
          f"{slow * 1e3:.3f} ms/iter beside a {r}-request load: "
          f"{(slow / alone - 1) * 100:+.1f}%")


def main() -> None:
    a = build_parser().parse_args()
    hipfile = select_platform(a.platform)
    import warnings

    root = temp_folder(a.dir)
    # torch's compile cache, which importing vLLM makes, goes with the rest
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(root, "inductor"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import hipfile.integrations.vllm
    b = Bench(a, hipfile, root)
    try:
        print(f"cache: {a.layers} layers x K,V, blocks of {a.tokens}x{a.heads}x{a.head_dim} "
              f"fp16 ({b.page >> 10} KiB), {b.bpf} blocks per file "
              f"({b.file_bytes / 2**20:.1f} MiB); root {root}")
        _throughput(b)
        _latency(b)
        _beside_compute(b)
    finally:
        b.close()


if __name__ == "__main__":
    main()
