"""Load a model-like checkpoint onto the GPU: hipfile, safetensors, fastsafetensors.

Every loader is called bare, as a user calls it (nothing held open by the
benchmark: no driver, no file, no pool), on two checkpoints written first:

* ``single``: one model-like file (default 24 layers of four bf16
  4096 x 4096 matrices, f32 and f16 vectors of odd sizes, a bf16
  32000 x 4096 embedding: 3.5 GB);
* ``sharded``: the same tensors in ``--shards`` files with a
  ``model.safetensors.index.json``.

Side by side in one run, each timed ``--repeats`` times, warm (the files
read once before) and cold (``posix_fadvise(DONTNEED)`` on every file, and
``/proc/sys/vm/drop_caches`` when writable):

* ``safetensors``: ``safetensors.torch.load_file(f, device="cuda:N")`` per file;
* ``hipfile``: ``hipfile.safetensors.torch.load_file(path, device="cuda:N")``
  (the index in one call for ``sharded``); ``hipfile stream`` and
  ``hipfile staged`` force one reader;
* ``fastsafetensors nogds`` / ``fastsafetensors cuFile``:
  ``fastsafe_open(files, device="cuda:N", nogds=...)`` and every
  ``get_tensor``;
* ``page cache -> pinned``: the files read into pinned host memory by
  ``--threads`` threads (``os.preadv``, 16 MiB), no device copy: the limit of
  any loader without GDS (warm), the disk (cold).

A peer that is not importable is skipped with a note. Every loader's tensors
are compared once with safetensors' before timing. The first hipfile call of
the process (which opens the driver) is timed and printed on its own.
Prints, per checkpoint and cache state, median seconds, GB/s and the ratios
to safetensors, to fastsafetensors nogds and to the page-cache limit;
``--json`` also writes them to a file.

    HIPFILE_PLATFORM=cuda python benchmarks/bench_safetensors.py --dir /nvme/bench
    HIPFILE_PLATFORM=cuda python benchmarks/bench_safetensors.py --quick --dir /nvme/bench

On the emulated platform (no GPU) it refuses to time anything; with
``--allow-emulated`` it writes a small checkpoint and checks every byte
loaded by ``hipfile.safetensors`` (single file and sharded) against the
reference ``safetensors`` package instead.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from _common import add_common_arguments, drop_page_cache, select_platform, temp_folder

# --------------------------------------------------------------------------
# The checkpoint
# --------------------------------------------------------------------------

ITEMSIZE = {"BF16": 2, "F16": 2, "F32": 4}


def model_tensors(layers: int, hidden: int, vocab: int) -> list[tuple[str, str, list[int]]]:
    """``(name, dtype, shape)`` of a decoder-like model."""
    out = [("model.embed_tokens.weight", "BF16", [vocab, hidden])]
    for i in range(layers):
        p = f"model.layers.{i}."
        for m in ("q_proj", "k_proj", "v_proj", "o_proj"):
            out.append((f"{p}self_attn.{m}.weight", "BF16", [hidden, hidden]))
        out.append((f"{p}input_layernorm.weight", "F32", [hidden]))
        out.append((f"{p}self_attn.rotary.inv_freq", "F32", [hidden // 64 + 3 + i]))
        out.append((f"{p}mlp.bias", "F16", [hidden + 2 * i + 1]))
    out.append(("model.norm.weight", "F32", [hidden]))
    return out


def write_file(path: str, tensors: Sequence[tuple[str, str, list[int]]], block: bytes,
               metadata: dict[str, str] | None = None) -> int:
    """Write ``tensors`` (random bytes) laid out as safetensors lays them out;
    returns the file's size."""
    from hipfile.safetensors import DTYPES, build_header

    entries = [(n, DTYPES[d], s, int(np.prod(s)) * ITEMSIZE[d]) for n, d, s in tensors]
    head, _ = build_header(entries, metadata)
    total = sum(e[3] for e in entries)
    with open(path, "wb") as f:
        f.write(head)
        left = total
        while left:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n
        f.flush()
        os.fsync(f.fileno())
    return len(head) + total


def write_checkpoints(folder: str, layers: int, hidden: int, vocab: int, shards: int
                      ) -> dict[str, tuple[str, list[str]]]:
    """The two checkpoints: name -> (path to load, files)."""
    block = np.random.default_rng(0).integers(0, 256, 64 << 20, dtype=np.uint8).tobytes()
    tensors = model_tensors(layers, hidden, vocab)
    single = os.path.join(folder, "model.safetensors")
    write_file(single, tensors, block, {"format": "pt"})
    sizes = [int(np.prod(s)) * ITEMSIZE[d] for _, d, s in tensors]
    per = sum(sizes) / shards
    parts: list[list[tuple[str, str, list[int]]]] = [[]]
    acc = 0
    for t, n in zip(tensors, sizes, strict=True):
        if acc >= per * len(parts) and len(parts) < shards:
            parts.append([])
        parts[-1].append(t)
        acc += n
    files, wmap = [], {}
    for k, part in enumerate(parts):
        name = f"model-{k + 1:05d}-of-{len(parts):05d}.safetensors"
        path = os.path.join(folder, name)
        write_file(path, part, block, {"format": "pt"})
        files.append(path)
        wmap.update({t[0]: name for t in part})
    index = os.path.join(folder, "model.safetensors.index.json")
    with open(index, "w") as f:
        json.dump({"metadata": {"total_size": sum(sizes)}, "weight_map": wmap}, f)
    return {"single": (single, [single]), "sharded": (index, files)}


def warm(files: Sequence[str]) -> None:
    for path in files:
        with open(path, "rb") as f:
            while f.read(64 << 20):
                pass


# --------------------------------------------------------------------------
# The loaders
# --------------------------------------------------------------------------


def page_cache_reader(files: Sequence[str], threads: int, chunk: int = 16 << 20
                      ) -> tuple[Callable[[], int], Callable[[], None]]:
    """Read the files into pinned host memory with ``threads`` threads; and a
    function releasing the memory and the threads."""
    import torch

    sizes = [os.path.getsize(p) for p in files]
    host = torch.empty(max(sizes), dtype=torch.uint8, pin_memory=True)
    view = memoryview(host.numpy())
    pool = concurrent.futures.ThreadPoolExecutor(threads)

    def run() -> int:
        got = 0
        for path, size in zip(files, sizes, strict=True):
            fd = os.open(path, os.O_RDONLY)
            try:
                got += sum(pool.map(
                    lambda o, fd=fd, size=size: os.preadv(fd, [view[o:min(o + chunk, size)]],
                                                          o), range(0, size, chunk)))
            finally:
                os.close(fd)
        return got

    def close() -> None:
        pool.shutdown()
        view.release()

    return run, close


def loaders(device: str, peers: set[str]) -> tuple[dict[str, Callable[[str, list[str]], Any]],
                                                    list[str]]:
    """name -> load(path, files) returning name -> tensor; and notes on
    skipped peers."""
    import torch

    from hipfile.safetensors import torch as hst_torch

    out: dict[str, Callable[[str, list[str]], Any]] = {}
    notes: list[str] = []

    def sync(d: dict[str, Any]) -> dict[str, Any]:
        torch.cuda.synchronize()
        return d

    if "safetensors" in peers:
        try:
            from safetensors.torch import load_file as st_load

            def run_st(path: str, files: list[str]) -> Any:
                d: dict[str, Any] = {}
                for f in files:
                    d.update(st_load(f, device=device))
                return sync(d)

            out["safetensors"] = run_st
        except ImportError as e:
            notes.append(f"safetensors skipped: {e}")
    out["hipfile"] = lambda path, files: sync(hst_torch.load_file(path, device=device))
    out["hipfile stream"] = lambda path, files: sync(
        _hst().load_file(path, device, "pt", reader="stream"))
    out["hipfile staged"] = lambda path, files: sync(
        _hst().load_file(path, device, "pt", reader="staged"))
    for label, nogds in (("fastsafetensors nogds", True), ("fastsafetensors cuFile", False)):
        if "fastsafetensors" not in peers:
            break
        try:
            from fastsafetensors import fastsafe_open
        except ImportError as e:
            notes.append(f"fastsafetensors skipped: {e}")
            break
        if nogds:
            from importlib.metadata import version

            have = version("fastsafetensors")
            notes.append(f"fastsafetensors {have}"
                         + ("" if have == "0.5.0" else " (the comparison is meant for 0.5.0)"))

        def run_fst(path: str, files: list[str], nogds: bool = nogds) -> Any:
            with fastsafe_open(filenames=list(files), framework="pt", device=device,
                               nogds=nogds) as f:
                d = {k: f.get_tensor(k) for k in f.keys()}
            return sync(d)

        out[label] = run_fst
    return out, notes


def _hst() -> Any:
    from hipfile import safetensors

    return safetensors


def check(reference: dict[str, Any], got: dict[str, Any]) -> str:
    """"OK", or what differs."""
    import torch

    if set(reference) != set(got):
        return f"MISMATCH: names differ ({len(reference)} against {len(got)})"
    for k, v in reference.items():
        g = got[k]
        if g.dtype != v.dtype or g.shape != v.shape or not torch.equal(
                g.reshape(-1).view(torch.uint8), v.reshape(-1).view(torch.uint8)):
            return f"MISMATCH in {k}"
    return "OK"


# --------------------------------------------------------------------------
# Emulated platform: correctness only
# --------------------------------------------------------------------------


def check_emulated(args: argparse.Namespace) -> int:
    import safetensors

    from hipfile import safetensors as hst

    folder = temp_folder(args.dir)
    cks = write_checkpoints(folder, 2, 256, 1000, 3)
    ok = True
    for name, (path, files) in cks.items():
        ref: dict[str, Any] = {}
        for f in files:
            with open(f, "rb") as fh:
                ref.update({k: v for k, v in safetensors.deserialize(fh.read())})
        for reader in ("auto", "stream", "staged"):
            out = hst.load_file(path, 0, "hip", reader=reader)
            for k, t in out.items():
                if (t.copy_to_host().tobytes() != bytes(ref[k]["data"])
                        or list(t.shape) != list(ref[k]["shape"])):
                    ok = False
                    print(f"MISMATCH in {name}/{reader}: {k}")
            del out
        print(f"emulated platform: correctness only; {name}: {len(ref)} tensors in "
              f"{len(files)} file(s): {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="a small model (4 layers, hidden 2048, vocab 8000: 0.2 GB), "
                         "1 repeat, warm and cold")
    ap.add_argument("--layers", type=int, default=24, help="decoder layers (24)")
    ap.add_argument("--hidden", type=int, default=4096, help="hidden size (4096)")
    ap.add_argument("--vocab", type=int, default=32000, help="vocabulary (32000)")
    ap.add_argument("--shards", type=int, default=4, help="files of the sharded checkpoint (4)")
    ap.add_argument("--threads", type=int, default=16,
                    help="threads of the page-cache -> pinned reader (16)")
    ap.add_argument("--cache", choices=("warm", "cold", "both"), default="both",
                    help="page cache state to time (both)")
    ap.add_argument("--checkpoints", default="single,sharded",
                    help="which checkpoints: single, sharded or both (single,sharded)")
    ap.add_argument("--peers", default="safetensors,fastsafetensors",
                    help="peers to compare with, when importable (safetensors,fastsafetensors)")
    ap.add_argument("--device", type=int, default=0, help="GPU to load onto (0)")
    ap.add_argument("--json", default=None, help="also write the results to this file")
    add_common_arguments(ap, repeats=3, data="the checkpoints",
                         allow_emulated="on the emulated platform, check correctness "
                                        "instead of timing")
    return ap


def main() -> int:
    ap = build_parser()
    args = ap.parse_args()
    if args.quick:
        args.layers, args.hidden, args.vocab, args.repeats = 4, 2048, 8000, 1
    if min(args.layers, args.hidden, args.vocab, args.shards, args.repeats, args.threads) <= 0:
        ap.error("--layers, --hidden, --vocab, --shards, --repeats and --threads must be "
                 "positive")
    chosen = [c for c in args.checkpoints.split(",") if c]
    if not chosen or set(chosen) - {"single", "sharded"}:
        ap.error("--checkpoints takes single, sharded or both")

    hipfile = select_platform(args.platform)
    platform = hipfile.platforms.active() or "rocm"
    if platform == "emulated":
        if not args.allow_emulated:
            print("refusing to time the emulated platform (no GPU, no DMA); run on a GPU "
                  "machine, or pass --allow-emulated for a correctness check",
                  file=sys.stderr)
            return 2
        return check_emulated(args)

    import torch

    device = f"cuda:{args.device}"
    torch.cuda.set_device(args.device)
    folder = temp_folder(args.dir)
    t0 = time.perf_counter()
    cks = {k: v for k, v in write_checkpoints(folder, args.layers, args.hidden, args.vocab,
                                              args.shards).items() if k in chosen}
    print(f"wrote the checkpoints in {time.perf_counter() - t0:.0f} s to {folder}")
    methods, notes = loaders(device, set(args.peers.split(",")))
    for n in notes:
        print(f"note: {n}")

    # the first hipfile call of the process: it opens the driver
    first_path, first_files = next(iter(cks.values()))
    warm(first_files)
    t0 = time.perf_counter()
    first = methods["hipfile"](first_path, first_files)
    first_s = time.perf_counter() - t0
    del first
    gc.collect()
    torch.cuda.empty_cache()

    results: dict[str, Any] = {"platform": platform, "device": torch.cuda.get_device_name(),
                               "layers": args.layers, "hidden": args.hidden,
                               "vocab": args.vocab, "shards": args.shards,
                               "repeats": args.repeats, "first_call_s": first_s, "runs": {}}
    bad = False
    modes = ["warm", "cold"] if args.cache == "both" else [args.cache]
    for ck, (path, files) in cks.items():
        nbytes = sum(os.path.getsize(f) for f in files)
        ntensors = len(model_tensors(args.layers, args.hidden, args.vocab))
        print(f"\n== {ck}: {len(files)} file(s), {nbytes / 1e9:.2f} GB, {ntensors} tensors "
              f"(layers={args.layers} hidden={args.hidden} vocab={args.vocab})")
        # correctness, once, warm
        warm(files)
        live = dict(methods)
        ref_name = "safetensors" if "safetensors" in live else "hipfile stream"
        reference = live[ref_name](path, files)
        for name, fn in list(live.items()):
            if name == ref_name:
                continue
            try:
                verdict = check(reference, fn(path, files))
            except Exception as e:  # a peer that fails here is reported, not timed
                verdict = f"FAILED: {type(e).__name__}: {e}"
            gc.collect()
            torch.cuda.empty_cache()
            print(f"  check {name:24s} {verdict}")
            if verdict != "OK":
                bad = True
                del live[name]
        del reference
        gc.collect()
        torch.cuda.empty_cache()
        cache_read, cache_close = page_cache_reader(files, args.threads)
        live["page cache -> pinned"] = lambda p, f, read=cache_read: read()
        try:
            for mode in modes:
                times: dict[str, list[float]] = {name: [] for name in live}
                for _ in range(args.repeats):
                    for name, fn in live.items():
                        for f in files:
                            if mode == "cold":
                                drop_page_cache(f)
                        if mode == "warm":
                            warm(files)
                        t0 = time.perf_counter()
                        out = fn(path, files)
                        times[name].append(time.perf_counter() - t0)
                        del out
                        gc.collect()
                        torch.cuda.empty_cache()
                med = {name: statistics.median(ts) for name, ts in times.items()}
                results["runs"][f"{ck}/{mode}"] = {
                    name: {"median_s": m, "GBps": nbytes / m / 1e9, "times": times[name]}
                    for name, m in med.items()}
                print(f"\n  {mode} cache, median of {args.repeats} "
                      f"({nbytes / 1e9:.2f} GB):")
                head = "x safetensors  x fst-nogds  x limit"
                print(f"    {'loader':24s} {'ms':>9s} {'GB/s':>7s}  {head}")
                for name, m in med.items():
                    ratios = []
                    for base in ("safetensors", "fastsafetensors nogds",
                                 "page cache -> pinned"):
                        ratios.append(f"{med[base] / m:10.2f}x" if base in med else
                                      f"{'-':>11s}")
                    print(f"    {name:24s} {m * 1e3:9.1f} {nbytes / m / 1e9:7.2f}  "
                          + " ".join(ratios))
        finally:
            cache_close()
    print(f"\nfirst hipfile call of the process (opens the driver): {first_s * 1e3:.0f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
