"""Load one .safetensors file into GPU memory three ways, warm and cold.

Side by side, in one run and on one file:

* ``safetensors``: ``safetensors.torch.load_file(path, device="cuda")``;
* ``hipfile``: ``hipfile.safetensors.load_file`` (torch tensors when torch is
  importable, else ``DeviceTensor``): one device allocation, coalesced aligned
  ranges, ``O_DIRECT`` when the file system takes it, parallel ``pread``;
* ``page-cache limit``: the file read into pinned host memory with many
  threads (``os.preadv``), no device copy: what any loader that goes through
  the page cache cannot beat.

Each is timed ``--repeats`` times with a warm page cache (the file read once
before) and with a cold one (``posix_fadvise(DONTNEED)`` before every run,
plus ``/proc/sys/vm/drop_caches`` when writable, i.e. as root). Prints median
seconds, GB/s and the ratio to ``safetensors``.

    HIPFILE_PLATFORM=cuda python benchmarks/bench_safetensors.py --size-gib 4 --dir /nvme

On the emulated platform (no GPU) it refuses to time anything; with
``--allow-emulated`` it loads a small file once and checks every byte
against the reference ``safetensors`` package instead.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from _common import add_common_arguments, drop_page_cache, select_platform

ITEMSIZE = {"BF16": 2, "F16": 2, "F32": 4, "U8": 1, "F8_E4M3": 1}



def write_model(path: str, total: int, ntensors: int, dtype: str) -> dict[str, int]:
    """Write a safetensors file of about ``total`` bytes in ``ntensors``
    tensors of varied sizes; returns name -> bytes."""
    size = ITEMSIZE[dtype]
    rng = np.random.default_rng(0)
    weights = rng.uniform(0.2, 1.8, ntensors)
    elems = [max(1, int(total * w / weights.sum()) // size) for w in weights]
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    sizes = {}
    for i, n in enumerate(elems):
        name = f"model.layers.{i}.weight"
        cols = 1024 if n >= 1024 else 1
        rows = n // cols
        nbytes = rows * cols * size
        header[name] = {"dtype": dtype, "shape": [rows, cols],
                        "data_offsets": [offset, offset + nbytes]}
        sizes[name] = nbytes
        offset += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    block = rng.integers(0, 256, 64 << 20, dtype=np.uint8).tobytes()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        left = offset
        while left:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n
        f.flush()
        os.fsync(f.fileno())
    return sizes


def warm(path: str) -> None:
    with open(path, "rb") as f:
        while f.read(64 << 20):
            pass


def page_cache_reader(path: str, threads: int, chunk: int) -> tuple[Callable[[], int],
                                                                    Callable[[], None]]:
    """A function reading the file into pinned host memory with ``threads``
    threads, and one releasing the memory."""
    import torch

    size = os.path.getsize(path)
    host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    view = memoryview(host.numpy())
    pool = concurrent.futures.ThreadPoolExecutor(threads)

    def part(fd: int, off: int) -> int:
        n = min(chunk, size - off)
        return os.preadv(fd, [view[off:off + n]], off)

    def run() -> int:
        fd = os.open(path, os.O_RDONLY)
        try:
            return sum(pool.map(lambda o: part(fd, o), range(0, size, chunk)))
        finally:
            os.close(fd)

    def close() -> None:
        pool.shutdown()
        view.release()

    return run, close


def check_emulated(args: argparse.Namespace) -> int:
    """Correctness only: our loader against the reference parser, byte for byte."""
    import safetensors

    from hipfile import safetensors as hst
    from hipfile._hip import hip

    folder = tempfile.mkdtemp(dir=args.dir)
    path = os.path.join(folder, "model.safetensors")
    total = min(int(args.size_gib * (1 << 30)), 64 << 20)
    write_model(path, total, args.tensors, args.dtype)
    with open(path, "rb") as f:
        ref = dict(safetensors.deserialize(f.read()))
    ok = True
    info: dict[str, Any] = {}
    out = hst.load_file(path, framework="hip", task_size=args.task_mib << 20, info=info,
                        reader=args.reader)
    for name, t in out.items():
        host = np.empty(t.nbytes, dtype=np.uint8)
        hip.hipMemcpy(host, t.ptr, t.nbytes, hip.hipMemcpyKind.hipMemcpyDeviceToHost)
        if host.tobytes() != bytes(ref[name]["data"]) or list(t.shape) != ref[name]["shape"]:
            ok = False
            print(f"MISMATCH in {name}")
    del out
    os.unlink(path)
    os.rmdir(folder)
    print(f"emulated platform: correctness only; {len(ref)} tensors, {total} bytes, "
          f"direct={info.get('direct')}: {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gib", type=float, default=4.0, help="file size, 2-8 GiB (4)")
    ap.add_argument("--tensors", type=int, default=200, help="number of tensors (200)")
    ap.add_argument("--dtype", choices=sorted(ITEMSIZE), default="BF16",
                    help="tensor dtype (BF16)")
    ap.add_argument("--repeats", type=int, default=3, help="timed loads per case (3)")
    ap.add_argument("--task-mib", type=int, default=16, help="hipfile pread task size (16)")
    ap.add_argument("--threads", type=int, default=32, help="page-cache reader threads (32)")
    ap.add_argument("--reader", choices=("parallel", "stream"), default="stream",
                    help="hipfile.safetensors read engine: the thread pool (parallel) or "
                         "the stream-ordered engine (stream)")
    ap.add_argument("--cache", choices=("warm", "cold", "both"), default="both",
                    help="page cache state to time (both)")
    ap.add_argument("--device", type=int, default=0, help="GPU to load onto (0)")
    ap.add_argument("--keep", action="store_true", help="keep the file")
    add_common_arguments(ap, data="the file",
                         allow_emulated="on the emulated platform, check correctness "
                                        "instead of timing")
    return ap


def main() -> int:
    ap = build_parser()
    args = ap.parse_args()
    if args.tensors <= 0 or args.repeats <= 0 or args.task_mib <= 0 or args.threads <= 0:
        ap.error("--tensors, --repeats, --task-mib and --threads must be positive")
    if not 0 < args.size_gib <= 64:
        ap.error("--size-gib must be in (0, 64]")

    hipfile = select_platform(args.platform)
    from hipfile import safetensors as hst

    platform = hipfile.platforms.active() or "rocm"
    if platform == "emulated":
        if not args.allow_emulated:
            print("refusing to time the emulated platform (no GPU, no DMA); run on a GPU "
                  "machine, or pass --allow-emulated for a correctness check",
                  file=sys.stderr)
            return 2
        return check_emulated(args)
    if not 2 <= args.size_gib <= 8:
        print(f"note: --size-gib {args.size_gib} is outside the 2-8 GiB the comparison is "
              "meant for", file=sys.stderr)

    import torch
    from safetensors.torch import load_file as st_load

    folder = tempfile.mkdtemp(dir=args.dir)
    path = os.path.join(folder, "model.safetensors")
    sizes = write_model(path, int(args.size_gib * (1 << 30)), args.tensors, args.dtype)
    file_size = os.path.getsize(path)
    dev = f"cuda:{args.device}"
    torch.cuda.set_device(args.device)

    def run_safetensors() -> Any:
        out = st_load(path, device=dev)
        torch.cuda.synchronize()
        return out

    info: dict[str, Any] = {}

    def run_hipfile() -> Any:
        out = hst.load_file(path, device=args.device, framework="torch",
                            task_size=args.task_mib << 20, info=info, reader=args.reader)
        torch.cuda.synchronize()
        return out

    cache_read, cache_close = page_cache_reader(path, args.threads, 16 << 20)
    methods: dict[str, Callable[[], Any]] = {
        "safetensors": run_safetensors,
        "hipfile": run_hipfile,
        "page-cache limit": cache_read,
    }
    hipfile.set_num_threads(max(hipfile.get_num_threads(), 16))

    # correctness, once
    a, b = run_safetensors(), run_hipfile()
    bad = [k for k in sizes if not torch.equal(a[k].view(torch.uint8), b[k].view(torch.uint8))]
    del a, b
    torch.cuda.empty_cache()
    print(f"platform={platform} file={file_size / 2**30:.2f} GiB tensors={len(sizes)} "
          f"dtype={args.dtype} O_DIRECT={info.get('direct')} reads={info.get('reads')} "
          f"task={args.task_mib} MiB hipfile threads={hipfile.get_num_threads()} "
          f"check={'OK' if not bad else 'MISMATCH ' + ', '.join(bad[:3])}")

    modes = ["warm", "cold"] if args.cache == "both" else [args.cache]
    try:
        with hipfile.Driver():  # one driver for the whole run, as a server would
            for mode in modes:
                times: dict[str, list[float]] = {name: [] for name in methods}
                for _ in range(args.repeats):
                    for name, fn in methods.items():
                        if mode == "cold":
                            drop_page_cache(path)
                        else:
                            warm(path)
                        t0 = time.perf_counter()
                        out = fn()
                        times[name].append(time.perf_counter() - t0)
                        del out
                        torch.cuda.empty_cache()
                base = statistics.median(times["safetensors"])
                print(f"\n{mode} cache, median of {args.repeats}:")
                for name, ts in times.items():
                    med = statistics.median(ts)
                    print(f"  {name:18s} {med * 1e3:9.1f} ms  {file_size / med / 1e9:7.2f} GB/s"
                          f"  {base / med:5.2f}x safetensors")
    finally:
        cache_close()
        if not args.keep:
            os.unlink(path)
            os.rmdir(folder)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
