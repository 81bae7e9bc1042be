"""Ranges by device address against the same bytes scattered into one buffer.

A KV-cache offload hands its worker raw block addresses spread over the 2 x
layers KV tensors (separate allocations). This times, in one run, a job of
``--rows`` such ranges (default 1,000: blocks of ``--block-kib`` KiB, block k
of every tensor stored side by side in the files, ``--blocks-per-file``
blocks a file) moved with one ``hipfile.pread_async_addresses`` /
``pwrite_async_addresses`` into and out of ``--tensors`` allocations, and
the same bytes of the same files moved with one ``pread_async_scatter`` /
``pwrite_async_gather`` into one buffer at the same offsets (the rows'
tuples built beforehand). It prints each case's median time and GB/s, the
ratio of the address form to the scatter form (1.0: the same speed), and
the median time the submitting call takes before it returns (what the
planning costs, rows checked against their allocations included).

    python benchmarks/bench_addresses.py --platform cuda [--rows 1000] [--repeats 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from _common import (
    add_common_arguments,
    hip_check,
    select_platform,
    temp_folder,
    time_interleaved,
)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1000, help="ranges per job (default: 1000)")
    ap.add_argument("--tensors", type=int, default=64,
                    help="device allocations, 2 x layers (default: 64)")
    ap.add_argument("--block-kib", type=int, default=32,
                    help="KiB per block of one tensor (default: 32: 16 tokens x 8 heads x "
                         "128 x fp16)")
    ap.add_argument("--blocks-per-file", type=int, default=2,
                    help="blocks a file holds, each block's every tensor (default: 2)")
    ap.add_argument("--json", default=None, help="write the results to this file")
    add_common_arguments(ap, data="the block files", repeats=15)
    return ap


def layout(rows: int, tensors: int, block: int, per_file: int, seed: int = 0
           ) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Row r: tensor r % tensors, block r // tensors; its file and file
    offset as the blocks are stored, and its slot in the tensor (blocks
    shuffled). Returns (file index and offset per row, (tensor, slot) per
    row, the files, the slots a tensor holds)."""
    nblocks = -(-rows // tensors)
    nfiles = -(-nblocks // per_file)
    cap = 2 * nblocks
    slots = np.random.default_rng(seed).permutation(cap)[:nblocks]
    r = np.arange(rows)
    t, k = r % tensors, r // tensors
    files = np.stack([k // per_file, ((k % per_file) * tensors + t) * block], axis=1)
    places = np.stack([t, slots[k]], axis=1)
    return files, places, nfiles, cap


def main() -> int:
    args = build_parser().parse_args()
    hipfile = select_platform(args.platform)
    from hip import hip

    block = args.block_kib << 10
    files_of, places, nfiles, cap = layout(args.rows, args.tensors, block,
                                           args.blocks_per_file)
    total = args.rows * block
    folder = temp_folder(args.dir)
    file_bytes = args.blocks_per_file * args.tensors * block
    paths = [os.path.join(folder, f"blocks{i:04d}.bin") for i in range(nfiles)]
    for p in paths:
        with open(p, "wb") as f:
            f.write(os.urandom(file_bytes))
    tensor_bytes = cap * block
    allocs = [int(hip_check(hip.hipMalloc(tensor_bytes))) for _ in range(args.tensors)]
    one = hip_check(hip.hipMalloc(args.tensors * tensor_bytes))
    stream = hip_check(hip.hipStreamCreate())
    fhs = [hipfile.open(p, "r+") for p in paths]
    try:
        addr = np.array([allocs[t] + s * block for t, s in places], dtype=np.int64)
        rows = np.ascontiguousarray(np.stack(
            [files_of[:, 0], files_of[:, 1], addr, np.full(args.rows, block)], axis=1),
            dtype=np.int64)
        entries = [(fhs[int(f)], block, int(o), int(t) * tensor_bytes + int(s) * block)
                   for (f, o), (t, s) in zip(files_of, places, strict=True)]

        def sync() -> None:
            hip_check(hip.hipStreamSynchronize(stream))

        cases: dict[str, Callable[[], Any]] = {
            "read_addresses": lambda: hipfile.pread_async_addresses(fhs, rows, stream),
            "read_scatter": lambda: hipfile.pread_async_scatter(one, entries, stream),
            "write_addresses": lambda: hipfile.pwrite_async_addresses(fhs, rows, stream),
            "write_gather": lambda: hipfile.pwrite_async_gather(one, entries, stream),
        }
        waited = {name: (lambda fn=fn: fn().wait()) for name, fn in cases.items()}
        times = time_interleaved(waited, args.repeats, sync)
        submit: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.repeats):
            for name, fn in cases.items():
                sync()
                t0 = time.perf_counter()
                h = fn()
                submit[name].append(time.perf_counter() - t0)
                h.wait()
        results: dict[str, Any] = {
            name: {"median_s": statistics.median(ts),
                   "gbps": total / statistics.median(ts) / 1e9,
                   "submit_us": statistics.median(submit[name]) * 1e6}
            for name, ts in times.items()}
    finally:
        for fh in fhs:
            fh.close()
        hip_check(hip.hipStreamDestroy(stream))
        hip_check(hip.hipFree(one))
        for a in allocs:
            hip_check(hip.hipFree(a))
    ratios = {
        "read_addresses_vs_scatter": (results["read_scatter"]["median_s"]
                                      / results["read_addresses"]["median_s"]),
        "write_addresses_vs_gather": (results["write_gather"]["median_s"]
                                      / results["write_addresses"]["median_s"]),
    }
    print(f"rows={args.rows} of {args.block_kib} KiB ({total / 2**20:.1f} MiB) over "
          f"{args.tensors} allocations and {nfiles} files; medians of {args.repeats} runs")
    for name, r in results.items():
        print(f"  {name:16s} {r['median_s'] * 1e3:9.3f} ms  {r['gbps']:7.2f} GB/s  "
              f"submit {r['submit_us']:8.1f} us")
    for name, v in ratios.items():
        print(f"  {name}: {v:.2f}x (speed of the address form / the one-buffer form)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results, "ratios": ratios}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
