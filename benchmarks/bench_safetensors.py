"""Load model-like checkpoints onto the GPU: hipfile, safetensors, fastsafetensors.

Every loader is called bare, as a user calls it (nothing held open by the
benchmark that a user would not hold: no driver, no file, no pool; a fresh
``safe_open`` per file, as loaders open them), on checkpoints written first:

* ``single``: one model-like file (default 24 layers of four bf16
  4096 x 4096 matrices, f32 and f16 vectors of odd sizes, a bf16
  32000 x 4096 embedding: 3.5 GB);
* ``sharded``: the same tensors in ``--shards`` files with a
  ``model.safetensors.index.json``;
* ``small``: a 4 KiB f32 tensor among a few others, and a 1024 x 1024 f32
  tensor ``big``.

The shapes (``--shapes``, all by default), each with its peers side by side
in the same run, ``--repeats`` samples per case, medians reported, warm (the
files read once before the block) and cold (``posix_fadvise(DONTNEED)`` on
every file before every sample, and ``/proc/sys/vm/drop_caches`` when
writable: as root; the part of the files still cached after a drop, as
``mincore`` reports it, is printed) as ``--cache`` says. The cases of one
checkpoint are timed in one block, interleaved round by round: ``load`` of
``single`` with ``keyloop``, ``load`` of ``sharded`` with ``sharded`` (a
case that two shapes share, such as hipfile's ``load_file``, is timed once
and reported in both):

``load``
    Whole checkpoints (``single`` and ``sharded``, per ``--checkpoints``):
    ``hipfile.safetensors.torch.load_file(path, device="cuda:N")`` (the
    index in one call for ``sharded``), ``hipfile stream`` (the engine's reader
    forced); ``safetensors.torch.load_file`` per file;
    ``fastsafe_open(files, device="cuda:N", nogds=...)`` and every
    ``get_tensor`` (``fastsafetensors nogds`` / ``cuFile``); ``page cache ->
    pinned``: the files read into pinned host memory by ``--threads`` threads
    (``os.preadv``, 16 MiB), no device copy: the limit of any loader without
    GDS (warm), the disk (cold).
``keyloop``
    ``single`` as loaders walk a file: ``with safe_open(p, "pt",
    device="cuda:N") as f: {k: f.get_tensor(k) for k in f.keys()}``, hipfile
    and safetensors; against ``safetensors.torch.load_file``,
    fastsafetensors and hipfile's own ``load_file``.
``small``
    One handle opened once per library (``safe_open(p, "pt",
    device="cuda:N")``); each ``f.get_tensor("small")`` (4 KiB) and each
    ``f.get_slice("big")[0:256]`` (1 MiB of a 4 MiB tensor) timed on its own
    with the device synchronized, ``--calls`` calls; beside them the reads
    under them, each into a fresh tensor: ``hipfile pread_async`` (the
    engine's call on a file held open) and ``floor`` (one ``preadv`` into
    pinned memory and one copy); every case once a round, in an order
    shuffled each round; warm only. ``--host`` times this shape into host
    memory (``device="cpu"``, no GPU needed), its floor one ``preadv`` into
    the result; ``--host --shapes load`` the single checkpoint into host
    memory (``load_file`` and the key-by-key loop) beside one ``preadv`` of
    the file into fresh memory and ``safetensors``' memory-mapped
    ``load_file`` (alone, and with every page touched once).
``slices``
    ``single`` split for tensor parallelism over ``--ranks`` processes on one
    GPU (each a fresh interpreter, started with multiprocessing's ``spawn``):
    each rank opens the file with ``safe_open`` and takes its rows
    (``f.get_slice(k)[r*n//R:(r+1)*n//R]``) or columns (``[:, r*m//R:...]``)
    of every 2-D tensor and every 1-D tensor whole (``get_tensor``). hipfile
    reads onto the GPU (``device="cuda:N"``); safetensors reads on the CPU
    and copies each part with ``.to("cuda:N")``, as tensor-parallel loaders
    do. The clock runs from a barrier that the ranks pass once imports and
    the CUDA context are done (each library's first-call set-up is timed) to
    the last rank's finish; aggregate GB/s = bytes the ranks received / that
    time (the slowest rank's ``safe_open`` is printed beside it). Warm only.
    The rows split has two references, each in 4 processes the same way:
    ``hipfile one read`` (each rank's ranges in one engine operation, no
    gaps between calls) and ``copy floor`` (each rank's bytes already in
    pinned memory, only the copies to the GPU timed).
``sharded``
    ``sharded`` as vLLM's default weights iterator walks it: the index read,
    then file by file (the weight map's files, sorted) and key by key with a
    fresh ``safe_open`` per file, hipfile and safetensors; against
    fastsafetensors over the files and hipfile's ``load_file`` of the index.

A peer that is not importable is skipped with a note. Every loader's tensors
are compared with safetensors' before timing (``slices``: each hipfile rank's
parts of the first sample, against safetensors on the CPU). The first
hipfile call of the process (which opens the driver) is timed and printed
on its own. Prints, per shape and cache state, median seconds and GB/s (per
call for ``small``), then the ratios hipfile / peer (in speed: how many
times faster hipfile is; for ``small`` in time per call) with their goals
(keyloop: 0.8x its own ``load_file``, 4x the safetensors loop warm, 1.0x
``safetensors.torch.load_file`` cold; small: at most 1.2x safetensors' time
per ``get_tensor``; slices: 1.5x safetensors by rows, 1.0x by columns),
and the seconds each block took; ``--json`` also writes them to a file.

    python benchmarks/bench_safetensors.py --platform cuda --dir /nvme/bench --json st.json
    python benchmarks/bench_safetensors.py --platform cuda --quick --dir /nvme/bench
    python benchmarks/bench_safetensors.py --platform cuda --shapes keyloop,small --dir /nvme/bench

On the emulated platform (no GPU) it refuses to time anything; with
``--allow-emulated`` it writes small checkpoints and checks every byte
loaded by ``hipfile.safetensors`` (whole files, sharded, key by key, single
tensors, row slices per rank) against the reference ``safetensors`` package
instead.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import gc
import json
import mmap
import multiprocessing
import os
import queue
import random
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from _common import add_common_arguments, drop_page_cache, select_platform, temp_folder

SHAPES = ("load", "keyloop", "small", "slices", "sharded")

# --------------------------------------------------------------------------
# The checkpoints
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


#: The ``small`` file: a 4 KiB f32 tensor between other f32 tensors, a
#: 1024 x 1024 f32 tensor to slice, and a bf16 matrix.
SMALL_TENSORS: list[tuple[str, str, list[int]]] = [
    ("a.weight", "BF16", [4096, 1024]),
    ("a.bias", "F32", [3001]),
    ("big", "F32", [1024, 1024]),
    ("small", "F32", [1024]),
    ("z.bias", "F32", [5003]),
]


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


def random_block() -> bytes:
    return np.random.default_rng(0).integers(0, 256, 64 << 20, dtype=np.uint8).tobytes()


def write_checkpoints(folder: str, layers: int, hidden: int, vocab: int, shards: int,
                      sharded: bool = True) -> dict[str, tuple[str, list[str]]]:
    """The two checkpoints (``single`` only, without ``sharded``): name ->
    (path to load, files)."""
    block = random_block()
    tensors = model_tensors(layers, hidden, vocab)
    single = os.path.join(folder, "model.safetensors")
    write_file(single, tensors, block, {"format": "pt"})
    if not sharded:
        return {"single": (single, [single])}
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
    with open(index, "w") as fh:
        json.dump({"metadata": {"total_size": sum(sizes)}, "weight_map": wmap}, fh)
    return {"single": (single, [single]), "sharded": (index, files)}


def write_small(folder: str) -> str:
    path = os.path.join(folder, "small.safetensors")
    write_file(path, SMALL_TENSORS, random_block()[:8 << 20], {"format": "pt"})
    return path


def index_files(index: str) -> list[str]:
    """The files of a sharded checkpoint, as loaders list them: the weight
    map's files, unique, sorted, beside the index."""
    with open(index) as fh:
        wmap = json.load(fh)["weight_map"]
    folder = os.path.dirname(index)
    return [os.path.join(folder, name) for name in sorted(set(wmap.values()))]


def warm(files: Sequence[str]) -> None:
    for path in files:
        with open(path, "rb") as f:
            while f.read(64 << 20):
                pass


def drop(files: Sequence[str]) -> None:
    for path in files:
        drop_page_cache(path)


def resident_fraction(files: Sequence[str]) -> float | None:
    """The part of the files' pages in the page cache, as ``mincore``
    reports it; None where it cannot be asked."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    except (OSError, AttributeError):
        return None
    failed = ctypes.c_void_p(-1).value
    pages = resident = 0
    for path in files:
        size = os.path.getsize(path)
        if not size:
            continue
        fd = os.open(path, os.O_RDONLY)
        try:
            addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            if addr is None or addr == failed:
                return None
            try:
                vec = (ctypes.c_ubyte * ((size + mmap.PAGESIZE - 1) // mmap.PAGESIZE))()
                if libc.mincore(addr, size, vec) != 0:
                    return None
            finally:
                libc.munmap(addr, size)
        finally:
            os.close(fd)
        got = np.ctypeslib.as_array(vec)
        pages += got.size
        resident += int(np.count_nonzero(got & 1))
    return resident / pages if pages else None


def synchronize(device: str) -> None:
    """Wait for the device that was loaded onto (nothing to wait for on the CPU)."""
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def release() -> None:
    """Free what a sample left: its tensors, and the allocator's cached memory."""
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# --------------------------------------------------------------------------
# Peers
# --------------------------------------------------------------------------


class Peers:
    """The peers that are importable: ``safetensors`` (the module) and
    fastsafetensors' ``fastsafe_open``; notes on the others."""

    def __init__(self) -> None:
        self.safetensors: Any = None
        self.fastsafe_open: Any = None
        self.notes: list[str] = []


def import_peers(chosen: set[str]) -> Peers:
    out = Peers()
    if "safetensors" in chosen:
        try:
            import safetensors
            import safetensors.torch

            out.safetensors = safetensors
        except ImportError as e:
            out.notes.append(f"safetensors skipped: {e}")
    if "fastsafetensors" in chosen:
        try:
            from fastsafetensors import fastsafe_open  # type: ignore[import-not-found,unused-ignore]

            out.fastsafe_open = fastsafe_open
            from importlib.metadata import version

            have = version("fastsafetensors")
            out.notes.append(f"fastsafetensors {have}"
                             + ("" if have == "0.5.0" else " (the comparison is meant for 0.5.0)"))
        except ImportError as e:
            out.notes.append(f"fastsafetensors skipped: {e}")
    return out


def fastsafetensors_cases(peers: Peers, device: str, files: Sequence[str]
                          ) -> dict[str, Callable[[], Any]]:
    """``fastsafe_open`` over ``files`` and every ``get_tensor``, with and
    without GDS."""
    fopen = peers.fastsafe_open
    if fopen is None:
        return {}
    out: dict[str, Callable[[], Any]] = {}
    for label, nogds in (("fastsafetensors nogds", True), ("fastsafetensors cuFile", False)):
        def run(nogds: bool = nogds) -> Any:
            with fopen(filenames=list(files), framework="pt", device=device, nogds=nogds) as f:
                d = {k: f.get_tensor(k) for k in f.keys()}
            synchronize(device)
            return d

        out[label] = run
    return out


# --------------------------------------------------------------------------
# The cases
# --------------------------------------------------------------------------


def page_cache_reader(files: Sequence[str], threads: int, chunk: int = 16 << 20
                      ) -> tuple[Callable[[], int], Callable[[], None]]:
    """Read the files into pinned host memory with ``threads`` threads; and a
    function releasing the memory and the threads."""
    import torch

    sizes = [os.path.getsize(p) for p in files]
    host = torch.empty(max(sizes), dtype=torch.uint8, pin_memory=True)
    view = host.numpy().data
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


def synced(device: str, fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn``, then wait for the device."""
    def run() -> Any:
        out = fn()
        synchronize(device)
        return out

    return run


def load_cases(device: str, path: str, files: Sequence[str], peers: Peers
               ) -> dict[str, Callable[[], Any]]:
    """Whole checkpoints, one call per loader (``path``: the file or the index)."""
    from hipfile import safetensors as hst
    from hipfile.safetensors import torch as hst_torch

    out: dict[str, Callable[[], Any]] = {}
    if peers.safetensors is not None:
        st_load = peers.safetensors.torch.load_file

        def run_st() -> Any:
            d: dict[str, Any] = {}
            for f in files:
                d.update(st_load(f, device=device))
            return d

        out["safetensors load_file"] = synced(device, run_st)
    out["hipfile load_file"] = synced(device, lambda: hst_torch.load_file(path, device=device))
    out["hipfile stream"] = synced(
        device, lambda: hst.load_file(path, device, "pt", reader="stream"))
    out.update(fastsafetensors_cases(peers, device, files))
    return out


def keyloop_cases(device: str, files: Callable[[], Sequence[str]], peers: Peers,
                  what: str) -> dict[str, Callable[[], Any]]:
    """Key by key, file by file, a fresh ``safe_open`` per file: ``hipfile
    <what>`` and ``safetensors <what>``; ``files`` lists the files (for a
    sharded checkpoint, from its index: loaders read it first)."""
    from hipfile.safetensors import safe_open as hst_open

    def loop(open_fn: Callable[..., Any]) -> Callable[[], Any]:
        def run() -> Any:
            out = {}
            for path in files():
                with open_fn(path, "pt", device=device) as f:
                    for k in f.keys():
                        out[k] = f.get_tensor(k)
            synchronize(device)
            return out

        return run

    cases = {f"hipfile {what}": loop(hst_open)}
    if peers.safetensors is not None:
        cases[f"safetensors {what}"] = loop(peers.safetensors.safe_open)
    return cases


def check(reference: Mapping[str, Any], got: Mapping[str, Any]) -> str:
    """"OK", or what differs."""
    import torch

    if set(reference) != set(got):
        return f"MISMATCH: names differ ({len(reference)} against {len(got)})"
    for k, v in reference.items():
        g = got[k]
        if g.device != v.device:
            g = g.to(v.device)
        if g.dtype != v.dtype or g.shape != v.shape or not torch.equal(
                g.reshape(-1).view(torch.uint8), v.reshape(-1).view(torch.uint8)):
            return f"MISMATCH in {k}"
    return "OK"


# --------------------------------------------------------------------------
# Timing and reporting
# --------------------------------------------------------------------------


class Ratio(NamedTuple):
    """hipfile case / peer case: in speed (``peer time / hipfile time``, how
    many times faster hipfile is) or in time (``hipfile time / peer
    time``); goal per cache state (a floor in speed, a ceiling in time)."""

    case: str
    peer: str
    kind: str = "speed"
    goals: Mapping[str, float] | None = None


class View(NamedTuple):
    """What one shape reports of a block: its cases and ratios."""

    shape: str
    cases: tuple[str, ...]
    ratios: tuple[Ratio, ...]


LOAD_CASES = ("hipfile load_file", "hipfile stream", "safetensors load_file",
              "fastsafetensors nogds", "fastsafetensors cuFile", "page cache -> pinned")
LOAD_RATIOS = (
    Ratio("hipfile load_file", "safetensors load_file"),
    Ratio("hipfile load_file", "fastsafetensors nogds"),
    Ratio("hipfile load_file", "page cache -> pinned"),
)
KEYLOOP = View("keyloop", (
    "hipfile keyloop", "safetensors keyloop", "hipfile load_file", "safetensors load_file",
    "fastsafetensors nogds", "fastsafetensors cuFile"), (
    Ratio("hipfile keyloop", "hipfile load_file", goals={"warm": 0.8, "cold": 0.8}),
    Ratio("hipfile keyloop", "safetensors keyloop", goals={"warm": 4.0}),
    Ratio("hipfile keyloop", "safetensors load_file", goals={"cold": 1.0}),
    Ratio("hipfile keyloop", "fastsafetensors nogds"),
    Ratio("hipfile keyloop", "fastsafetensors cuFile"),
))
SMALL_RATIOS = (
    Ratio("hipfile get_tensor", "safetensors get_tensor", "time", {"warm": 1.2}),
    Ratio("hipfile get_slice", "safetensors get_slice", "time"),
    Ratio("hipfile get_tensor", "hipfile pread_async get_tensor", "time"),
    Ratio("hipfile pread_async get_tensor", "floor get_tensor", "time"),
    Ratio("safetensors get_tensor", "floor get_tensor", "time"),
    Ratio("hipfile get_slice", "hipfile pread_async get_slice", "time"),
    Ratio("hipfile pread_async get_slice", "floor get_slice", "time"),
    Ratio("safetensors get_slice", "floor get_slice", "time"),
)
SLICES_RATIOS = (
    Ratio("hipfile rows", "safetensors rows", goals={"warm": 1.5}),
    Ratio("hipfile columns", "safetensors columns", goals={"warm": 1.0}),
    Ratio("hipfile rows", "hipfile one read"),
    Ratio("hipfile rows", "copy floor"),
    Ratio("safetensors rows", "copy floor"),
)
#: The rows split's references, each rank in its own process as for the
#: libraries (see :func:`reference_rank`).
REFERENCES = ("hipfile one read", "copy floor")
SHARDED = View("sharded", (
    "hipfile iterator", "safetensors iterator", "hipfile load_file", "fastsafetensors nogds",
    "fastsafetensors cuFile"), (
    Ratio("hipfile iterator", "safetensors iterator"),
    Ratio("hipfile iterator", "fastsafetensors nogds"),
    Ratio("hipfile iterator", "fastsafetensors cuFile"),
    Ratio("hipfile iterator", "hipfile load_file"),
))


class Bench:
    """What every shape needs: the options, the device, the files, the
    peers, and where results go; ``bad`` once a check failed."""

    def __init__(self, args: argparse.Namespace, shapes: list[str], device: str, folder: str,
                 checkpoints: dict[str, tuple[str, list[str]]], peers: Peers,
                 results: dict[str, Any]) -> None:
        self.args = args
        self.shapes = shapes
        self.device = device
        self.folder = folder
        self.checkpoints = checkpoints
        self.peers = peers
        self.results = results
        self.bad = False

    @property
    def modes(self) -> list[str]:
        return ["warm", "cold"] if self.args.cache == "both" else [self.args.cache]


def time_rounds(cases: Mapping[str, Callable[[], Any]], repeats: int,
                before: Callable[[], None]) -> dict[str, list[float]]:
    """Seconds of each case, ``repeats`` rounds with the cases interleaved;
    ``before`` runs ahead of every sample, untimed."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            before()
            t0 = time.perf_counter()
            out = fn()
            times[name].append(time.perf_counter() - t0)
            del out
            release()
    return times


def verify(cases: Mapping[str, Callable[[], Any]], reference: str
           ) -> tuple[dict[str, Callable[[], Any]], bool]:
    """Run every case once (also a warm-up) and compare its tensors with
    ``reference``'s; returns the cases that agree, and whether all did."""
    ok = True
    live = dict(cases)
    ref = live[reference]()
    for name, fn in cases.items():
        if name == reference or name == "page cache -> pinned":
            continue
        try:
            verdict = check(ref, fn())
        except Exception as e:  # a peer that fails here is reported, not timed
            verdict = f"FAILED: {type(e).__name__}: {e}"
        release()
        print(f"  check {name:26s} {verdict}  (against {reference})")
        if verdict != "OK":
            ok = False
            del live[name]
    del ref
    release()
    return live, ok


def record(b: Bench, shape: str, mode: str, times: Mapping[str, list[float]], nbytes: int,
           ratios: Sequence[Ratio], per_call: bool = False, note: str = "") -> None:
    """Keep and print one shape's table: medians per case, then the ratios."""
    med = {name: statistics.median(ts) for name, ts in times.items()}
    samples = len(next(iter(times.values())))
    cases: dict[str, Any] = {}
    for name, m in med.items():
        cases[name] = {"median_s": m, "times": times[name]}
        if not per_call:
            cases[name]["GBps"] = nbytes / m / 1e9
    b.results["shapes"][f"{shape}/{mode}"] = {"bytes": nbytes, "cases": cases}
    if per_call:
        print(f"\n  {shape}, {mode} cache, median of {samples} calls{note}")
        w = max(26, *(len(name) for name in med))
        print(f"    {'case':{w}s} {'us':>9s} {'p90 us':>9s}")
        for name, m in med.items():
            p90 = float(np.percentile(times[name], 90))
            print(f"    {name:{w}s} {m * 1e6:9.1f} {p90 * 1e6:9.1f}")
    else:
        w = max(26, *(len(name) for name in med))
        print(f"\n  {shape}, {mode} cache, median of {samples} ({nbytes / 1e9:.3f} GB{note})")
        print(f"    {'case':{w}s} {'ms':>9s} {'GB/s':>7s}")
        for name, m in med.items():
            print(f"    {name:{w}s} {m * 1e3:9.1f} {nbytes / m / 1e9:7.2f}")
    for r in ratios:
        if r.case not in med or r.peer not in med:
            continue
        value = med[r.peer] / med[r.case] if r.kind == "speed" else med[r.case] / med[r.peer]
        goal = (r.goals or {}).get(mode)
        met = None if goal is None else (value >= goal if r.kind == "speed" else value <= goal)
        entry = {"shape": shape, "mode": mode, "ratio": f"{r.case} / {r.peer}", "in": r.kind,
                 "value": value, "goal": goal, "met": met}
        b.results["ratios"].append(entry)
        print("    " + ratio_line(entry))


def ratio_line(e: Mapping[str, Any]) -> str:
    goal = "" if e["goal"] is None else (
        f"  (goal {'>=' if e['in'] == 'speed' else '<='} {e['goal']:g}: "
        f"{'met' if e['met'] else 'MISSED'})")
    return f"{e['ratio']:48s} {e['value']:6.2f}x in {e['in']}{goal}"


def run_block(b: Bench, label: str, files: Sequence[str], cases: dict[str, Callable[[], Any]],
              views: Sequence[View]) -> None:
    """Check ``cases``, then time them together (interleaved, warm and/or
    cold over ``files``) and report each shape's view of them."""
    nbytes = sum(os.path.getsize(f) for f in files)
    reference = next(n for n in ("safetensors load_file", "safetensors keyloop",
                                 "safetensors iterator", "hipfile stream", "hipfile load_file")
                     if n in cases)
    live, ok = verify(cases, reference)
    b.bad |= not ok
    for mode in b.modes:
        note = ""
        if mode == "warm":
            warm(files)

            def before() -> None:
                pass
        else:
            drop(files)
            left = resident_fraction(files)
            note = "" if left is None else f"; {left:.0%} of it cached after a drop"

            def before() -> None:
                drop(files)
        times = time_rounds(live, b.args.repeats, before)
        b.results["blocks"][f"{label}/{mode}"] = {
            name: {"median_s": statistics.median(ts), "times": ts} for name, ts in times.items()}
        for v in views:
            record(b, v.shape, mode, {n: times[n] for n in v.cases if n in times}, nbytes,
                   v.ratios, note=note)


# --------------------------------------------------------------------------
# The shapes
# --------------------------------------------------------------------------


def _checkpoint_block(b: Bench, kind: str, shape: str, view: View,
                      keyloop_files: Callable[[], list[str]], word: str,
                      loads_only: tuple[str, ...], title: str) -> None:
    """One checkpoint's block: the per-key shape ``shape`` (``view``, its
    cases named ``word``, over ``keyloop_files()``) and the ``load`` shape,
    timed together; ``loads_only`` are the cases that only ``load`` shows."""
    source, files = b.checkpoints[kind]
    views: list[View] = []
    cases: dict[str, Callable[[], Any]] = {}
    if shape in b.shapes:
        cases.update(keyloop_cases(b.device, keyloop_files, b.peers, word))
        views.append(view)
    cases.update(load_cases(b.device, source, files, b.peers))
    load = "load" in b.shapes and kind in b.args.checkpoints
    if not load:
        for name in loads_only:
            del cases[name]
    closers = []
    if load:
        views.insert(0, View(f"load {kind}", LOAD_CASES, LOAD_RATIOS))
        read, close = page_cache_reader(files, b.args.threads)
        cases["page cache -> pinned"] = read
        closers.append(close)
    print(f"\n== {' and '.join(v.shape for v in views)}: {title}")
    try:
        run_block(b, kind, files, cases, views)
    finally:
        for close in closers:
            close()


def block_single(b: Bench) -> None:
    """``load single`` and ``keyloop``: the one file, timed together."""
    path, files = b.checkpoints["single"]
    _checkpoint_block(b, "single", "keyloop", KEYLOOP, lambda: files, "keyloop",
                      ("hipfile stream",),
                      f"{os.path.basename(path)}, {os.path.getsize(path) / 1e9:.2f} GB")


def block_sharded(b: Bench) -> None:
    """``load sharded`` and ``sharded``: the sharded checkpoint, timed together."""
    index, files = b.checkpoints["sharded"]
    nbytes = sum(os.path.getsize(f) for f in files)
    _checkpoint_block(b, "sharded", "sharded", SHARDED, lambda: index_files(index), "iterator",
                      ("hipfile stream", "safetensors load_file"),
                      f"{len(files)} files and {os.path.basename(index)}, "
                      f"{nbytes / 1e9:.2f} GB")


#: The seed of the order of ``small``'s cases, shuffled each round.
SMALL_SEED = 11


def small_ranges(path: str) -> dict[str, tuple[int, int]]:
    """Where the ``small`` file's two timed reads lie: ``"small"`` (the 4
    KiB tensor) and ``"big"`` (its first 256 rows, 1 MiB) as ``(file
    offset, bytes)``, from the file's own header."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    base = 8 + n

    def at(name: str, nbytes: int | None = None) -> tuple[int, int]:
        begin, end = header[name]["data_offsets"]
        return base + begin, (end - begin) if nbytes is None else nbytes

    return {"small": at("small"), "big": at("big", 256 * 1024 * 4)}


def small_references(path: str, device: str) -> tuple[dict[str, Callable[[], Any]], Any]:
    """The reads under ``small``'s two calls, each into a fresh tensor as the
    calls return: ``hipfile pread_async`` (the engine's call that
    ``get_tensor`` and a slice make, on a file held open) and ``floor`` (one
    ``preadv`` into pinned memory and one copy to the GPU, the least any
    loader without GPU-direct I/O does); on the CPU (``--host``) only the
    floor, one ``preadv`` into the result. Returns the cases and what to
    close."""
    import torch

    import hipfile

    ranges = small_ranges(path)
    on_host = torch.device(device).type == "cpu"
    fh = None if on_host else hipfile.open(path, "rb")
    fd = os.open(path, os.O_RDONLY)
    pinned = torch.empty(max(n for _, n in ranges.values()), dtype=torch.uint8,
                         pin_memory=not on_host)
    host = pinned.numpy()
    shapes = {"small": (1024,), "big": (256, 1024)}
    cases: dict[str, Callable[[], Any]] = {}
    for call, key in (("get_tensor", "small"), ("get_slice", "big")):
        off, n = ranges[key]
        shape = shapes[key]
        if on_host:
            # host memory: the floor is one preadv into the result itself
            def read(off: int = off, n: int = n, shape: tuple[int, ...] = shape) -> Any:
                t = torch.empty(shape, dtype=torch.float32)
                if os.preadv(fd, [t.view(-1).view(torch.uint8).numpy()], off) != n:
                    raise OSError(f"short read of {path}")
                return t

            cases[f"floor {call}"] = read
            continue

        def engine(off: int = off, n: int = n, shape: tuple[int, ...] = shape) -> Any:
            t = torch.empty(shape, dtype=torch.float32, device=device)
            assert fh is not None
            fh.pread_async(t, n, off, 0, torch.cuda.current_stream().cuda_stream).wait()
            return t

        def floor(off: int = off, n: int = n, shape: tuple[int, ...] = shape) -> Any:
            t = torch.empty(shape, dtype=torch.float32, device=device)
            if os.preadv(fd, [memoryview(host)[:n]], off) != n:
                raise OSError(f"short read of {path}")
            t.view(-1).view(torch.uint8).copy_(pinned[:n], non_blocking=True)
            return t

        cases[f"hipfile pread_async {call}"] = synced(device, engine)
        cases[f"floor {call}"] = synced(device, floor)

    class Closer:
        def close(self) -> None:
            if fh is not None:
                fh.close()
            os.close(fd)

    return cases, Closer()


def shape_small(b: Bench) -> None:
    """Single small reads through a handle held open, beside the reads
    under them; the cases in an order shuffled each round."""
    from hipfile.safetensors import safe_open as hst_open

    path = write_small(b.folder)
    device = b.device
    st = b.peers.safetensors
    floor = ("one preadv into the result" if device == "cpu"
             else "the engine's read and preadv into pinned memory + one copy")
    print(f"\n== small: get_tensor('small') (4 KiB) and get_slice('big')[0:256] (1 MiB), "
          f"one handle per library, {b.args.calls} calls, beside {floor} for each, in an "
          "order shuffled each round")
    warm([path])
    handles: dict[str, Any] = {"hipfile": hst_open(path, "pt", device=device)}
    try:
        if st is not None:
            handles["safetensors"] = st.safe_open(path, "pt", device=device)
        cases: dict[str, Callable[[], Any]] = {}
        for lib, f in handles.items():
            def get_tensor(f: Any = f) -> Any:
                return f.get_tensor("small")

            def get_slice(f: Any = f) -> Any:
                return f.get_slice("big")[0:256]

            cases[f"{lib} get_tensor"] = synced(device, get_tensor)
            cases[f"{lib} get_slice"] = synced(device, get_slice)
        refs, closer = small_references(path, device)
        handles["references"] = closer
        cases.update(refs)
        if st is not None:
            for what in ("get_tensor", "get_slice"):
                want = {"t": cases[f"safetensors {what}"]()}
                for name in (f"hipfile {what}", f"hipfile pread_async {what}",
                             f"floor {what}"):
                    if name not in cases:
                        continue
                    verdict = check(want, {"t": cases[name]()})
                    print(f"  check {name:29s} {verdict}  (against safetensors)")
                    b.bad |= verdict != "OK"
        times: dict[str, list[float]] = {name: [] for name in cases}
        order = list(cases)
        shuffle = random.Random(SMALL_SEED).shuffle
        for _ in range(b.args.calls):
            shuffle(order)      # no case always follows the same one
            for name in order:
                fn = cases[name]
                t0 = time.perf_counter()
                out = fn()
                times[name].append(time.perf_counter() - t0)
                del out
        record(b, "small", "warm", times, 0, SMALL_RATIOS, per_call=True)
    finally:
        for f in handles.values():
            if hasattr(f, "close"):
                f.close()
        del handles
        release()


def rank_part(f: Any, split: str, rank: int, ranks: int, move: Callable[[Any], Any]
              ) -> dict[str, Any]:
    """One rank's part of an open file: its rows (``split="rows"``) or
    columns of every 2-D tensor, every other tensor whole."""
    out: dict[str, Any] = {}
    for k in f.keys():
        sl = f.get_slice(k)
        shape = sl.get_shape()
        if len(shape) == 2 and split == "rows":
            n = shape[0]
            out[k] = move(sl[rank * n // ranks:(rank + 1) * n // ranks])
        elif len(shape) == 2:
            m = shape[1]
            out[k] = move(sl[:, rank * m // ranks:(rank + 1) * m // ranks])
        else:
            out[k] = move(f.get_tensor(k))
    return out


def rank_row_ranges(path: str, rank: int, ranks: int) -> list[tuple[int, int]]:
    """``(file offset, bytes)`` of one rank's part of a file split by rows:
    its rows of every 2-D tensor, every other tensor whole."""
    from hipfile.safetensors import read_header

    h = read_header(path)
    out = []
    for info in h.tensors.values():
        base = h.data_offset + info.begin
        if len(info.shape) == 2 and info.shape[0]:
            n = info.shape[0]
            row = info.nbytes // n
            out.append((base + rank * n // ranks * row,
                        ((rank + 1) * n // ranks - rank * n // ranks) * row))
        else:
            out.append((base, info.nbytes))
    return out


def reference_rank(lib: str, path: str, device: str, rank: int, ranks: int, barrier: Any
                   ) -> tuple[float, float, int]:
    """One rank of the rows split's two references, after its barrier:
    ``"copy floor"`` (the rank's bytes already in pinned memory, read
    before the barrier, copied to the device in 8 MiB pieces: what 4
    processes' copies alone take) and ``"hipfile one read"`` (the rank's
    ranges in one ``hipfile.pread_async_scatter``-style operation of the
    engine, made before the barrier: its ceiling without the gaps between
    calls or its first use). Returns the
    start, end and bytes."""
    import torch

    ranges = rank_row_ranges(path, rank, ranks)
    total = sum(n for _, n in ranges)
    out = torch.empty(total, dtype=torch.uint8, device=device)
    if lib == "copy floor":
        pinned = torch.empty(total, dtype=torch.uint8, pin_memory=True)
        view = pinned.numpy().data
        fd = os.open(path, os.O_RDONLY)
        try:
            at = 0
            for off, n in ranges:
                os.preadv(fd, [view[at:at + n]], off)
                at += n
        finally:
            os.close(fd)
        barrier.wait(timeout=600)
        t0 = time.perf_counter()
        piece = 8 << 20
        for at in range(0, total, piece):
            out[at:at + piece].copy_(pinned[at:at + piece], non_blocking=True)
        torch.cuda.synchronize(device)
        return t0, time.perf_counter(), total
    import hipfile

    hipfile.engine.prepare()          # the ceiling of the reads alone: no set-up timed
    with hipfile.open(path) as fh:
        spans, at = [], 0
        for off, n in ranges:
            spans.append((n, off, at))
            at += n
        barrier.wait(timeout=600)
        t0 = time.perf_counter()
        fh.pread_async_scatter(out, spans, torch.cuda.current_stream(device).cuda_stream,
                               prefetch=True).wait()
    torch.cuda.synchronize(device)
    return t0, time.perf_counter(), total


def slice_rank(lib: str, path: str, device: str, split: str, rank: int, ranks: int,
               barrier: Any, results: Any, verify_part: bool) -> None:
    """One rank of ``slices``, in its own process: imports and the CUDA
    context first (a loader's process has them), then the barrier, then the
    timed part."""
    try:
        import torch

        dev = torch.device(device)
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
            torch.empty(1, device=dev)
            torch.cuda.synchronize(dev)
        if lib in REFERENCES:
            t0, t1, nbytes = reference_rank(lib, path, device, rank, ranks, barrier)
            results.put((rank, t0, 0.0, t1, nbytes, "", 0.0, 0.0))
            return
        from safetensors import safe_open as st_open

        if lib == "hipfile":
            from hipfile.safetensors import safe_open as hst_open

            def open_file() -> Any:
                return hst_open(path, "pt", device=device)

            def move(t: Any) -> Any:
                return t
        else:
            def open_file() -> Any:
                return st_open(path, "pt")

            def move(t: Any) -> Any:
                return t.to(device)

        first_at: list[float] = []

        def timed_move(t: Any) -> Any:
            # the first tensor's arrival: the process's first read, set-up included
            if not first_at:
                first_at.append(time.perf_counter())
            return move(t)

        barrier.wait(timeout=600)
        t0 = time.perf_counter()
        with open_file() as f:
            t_open = time.perf_counter()
            out = rank_part(f, split, rank, ranks, timed_move)
        synchronize(device)
        t1 = time.perf_counter()
        nbytes = sum(t.numel() * t.element_size() for t in out.values())
        verdict = ""
        if verify_part:
            with st_open(path, "pt") as f:
                ref = rank_part(f, split, rank, ranks, lambda t: t)
            verdict = check(ref, out)
        setup = 0.0
        if lib == "hipfile":      # the engine's making, part of the first tensor's time
            import hipfile

            setup = sum(float(d.get("setup_s", 0.0))
                        for d in hipfile.engine.info()["devices"].values())
        results.put((rank, t0, t_open - t0, t1, nbytes, verdict,
                     (first_at[0] if first_at else t1) - t_open, setup))
    except BaseException as e:
        results.put((rank, None, 0.0, None, 0, f"FAILED: {type(e).__name__}: {e}", 0.0, 0.0))
        raise


def run_ranks(lib: str, path: str, device: str, split: str, ranks: int, verify_part: bool
              ) -> tuple[float, float, float, float, int, list[str]]:
    """Start ``ranks`` fresh processes and return the seconds from the
    barrier to the last rank's finish, the slowest rank's seconds in
    ``safe_open``, to its first tensor after it and in making the engine's
    runtime (hipfile), the bytes they received and the verdicts of their
    checks."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(ranks)
    results = ctx.Queue()
    procs = [ctx.Process(target=slice_rank, args=(lib, path, device, split, r, ranks, barrier,
                                                  results, verify_part), daemon=True)
             for r in range(ranks)]
    for p in procs:
        p.start()
    got: list[tuple[int, float | None, float, float | None, int, str, float, float]] = []
    deadline = time.monotonic() + 900
    try:
        while len(got) < ranks:
            try:
                got.append(results.get(timeout=1.0))
            except queue.Empty:
                if (any(p.exitcode not in (None, 0) for p in procs)
                        or time.monotonic() > deadline):
                    barrier.abort()
                    said = next((g[5] for g in got if g[5].startswith("FAILED")), "")
                    raise RuntimeError(f"{lib} {split}: ranks exited with "
                                       f"{[p.exitcode for p in procs]} {said}") from None
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.terminate()
                p.join()
    failed = [g[5] for g in got if g[5].startswith("FAILED")]
    if failed:
        raise RuntimeError(f"{lib} {split}: {failed[0]}")
    starts = [g[1] for g in got if g[1] is not None]
    ends = [g[3] for g in got if g[3] is not None]
    return (max(ends) - min(starts), max(g[2] for g in got), max(g[6] for g in got),
            max(g[7] for g in got), sum(g[4] for g in got), [g[5] for g in got])


def shape_slices(b: Bench) -> None:
    """Tensor-parallel parts of one file, ``--ranks`` processes on one GPU."""
    path, files = b.checkpoints["single"]
    ranks = b.args.ranks
    print(f"\n== slices: {os.path.basename(path)}, {ranks} ranks (processes) on {b.device}, "
          "rows and columns of every 2-D tensor")
    if b.peers.safetensors is None:
        print("  skipped: needs safetensors (the peer, and the reference of the check)")
        return
    warm(files)
    libs = ("hipfile", "safetensors")
    splits = ("rows", "columns")

    def named(lib: str, split: str) -> str:
        return lib if lib in REFERENCES else f"{lib} {split}"

    cases = {s: [(lib, named(lib, s)) for lib in libs + (REFERENCES if s == "rows" else ())]
             for s in splits}
    times: dict[str, list[float]] = {name: [] for s in splits for _, name in cases[s]}
    opens: dict[str, list[float]] = {name: [] for name in times}
    firsts: dict[str, list[float]] = {name: [] for name in times}
    setups: dict[str, list[float]] = {name: [] for name in times}
    received: dict[str, int] = {}
    for rep in range(b.args.repeats):
        for split in splits:
            for lib, name in cases[split]:
                first = rep == 0 and lib == "hipfile"
                try:
                    secs, opened, first_s, setup_s, nbytes, verdicts = run_ranks(
                        lib, path, b.device, split, ranks, first)
                except RuntimeError as e:
                    print(f"  {name} FAILED: {e}; slices stops here")
                    b.bad = True
                    return
                times[name].append(secs)
                opens[name].append(opened)
                firsts[name].append(first_s)
                setups[name].append(setup_s)
                if received.setdefault(split, nbytes) != nbytes:
                    raise RuntimeError(f"{name}: {nbytes} bytes received, "
                                       f"{received[split]} by the other library")
                if first:
                    verdict = next((v for v in verdicts if v != "OK"), "OK")
                    print(f"  check {name:26s} {verdict}  (every rank, against safetensors "
                          "on the CPU)")
                    b.bad |= verdict != "OK"
    for split in splits:
        record(b, f"slices {split}", "warm", {name: times[name] for _, name in cases[split]},
               received[split], SLICES_RATIOS, note=f" received by {ranks} ranks")
        for lib in libs:
            name = f"{lib} {split}"
            case = b.results["shapes"][f"slices {split}/warm"]["cases"][name]
            case["open_s"] = opens[name]
            case["first_tensor_s"] = firsts[name]
            case["engine_setup_s"] = setups[name]
            made = (f" (the engine's making {statistics.median(setups[name]) * 1e3:.1f} ms)"
                    if lib == "hipfile" else "")
            print(f"    {name}: of which, slowest rank, medians: safe_open "
                  f"{statistics.median(opens[name]) * 1e3:.1f} ms, then the first tensor "
                  f"{statistics.median(firsts[name]) * 1e3:.1f} ms{made}")


def run_shapes(b: Bench) -> dict[str, float]:
    """Every chosen shape, in one order; seconds per block."""
    took: dict[str, float] = {}
    blocks: list[tuple[str, Callable[[Bench], None]]] = []
    if "keyloop" in b.shapes or ("load" in b.shapes and "single" in b.args.checkpoints):
        blocks.append(("single", block_single))
    if "small" in b.shapes:
        blocks.append(("small", shape_small))
    if "slices" in b.shapes:
        blocks.append(("slices", shape_slices))
    if "sharded" in b.shapes or ("load" in b.shapes and "sharded" in b.args.checkpoints):
        blocks.append(("sharded", block_sharded))
    for name, fn in blocks:
        t0 = time.perf_counter()
        fn(b)
        took[name] = time.perf_counter() - t0
    return took


# --------------------------------------------------------------------------
# Emulated platform: correctness only
# --------------------------------------------------------------------------


def reference_tensors(files: Sequence[str]) -> dict[str, Any]:
    """name -> ``{"dtype", "shape", "data"}`` as the reference package reads
    the files."""
    import safetensors

    out: dict[str, Any] = {}
    for f in files:
        with open(f, "rb") as fh:
            out.update(dict(safetensors.deserialize(fh.read())))  # type: ignore[no-untyped-call]
    return out


def check_emulated(args: argparse.Namespace) -> int:
    from hipfile import safetensors as hst

    folder = temp_folder(args.dir)
    cks = write_checkpoints(folder, 2, 256, 1000, 3)
    small = write_small(folder)
    ok = True

    def same(name: str, t: Any, ref: Mapping[str, Any]) -> bool:
        return (t.copy_to_host().tobytes() == bytes(ref["data"])
                and list(t.shape) == list(ref["shape"]))

    for name, (path, files) in cks.items():
        ref = reference_tensors(files)
        for reader in ("auto", "stream", "staged"):
            out = hst.load_file(path, 0, "hip", reader=reader)
            for k, t in out.items():
                if not same(name, t, ref[k]):
                    ok = False
                    print(f"MISMATCH in {name}/{reader}: {k}")
            del out
        # key by key, a fresh safe_open per file (keyloop, sharded)
        seen = 0
        for f in (index_files(path) if path.endswith(".json") else files):
            with hst.safe_open(f, "hip", device=0) as sf:
                for k in sf.keys():
                    seen += 1
                    if not same(name, sf.get_tensor(k), ref[k]):
                        ok = False
                        print(f"MISMATCH in {name}/safe_open: {k}")
        if seen != len(ref):
            ok = False
            print(f"MISMATCH in {name}/safe_open: {seen} tensors, {len(ref)} in the files")
        print(f"emulated platform: correctness only; {name}: {len(ref)} tensors in "
              f"{len(files)} file(s): {'OK' if ok else 'MISMATCH'} (whole, and key by key "
              "through safe_open)")
    # row slices of every rank (slices); column slices need torch on a GPU
    path = cks["single"][0]
    ref = reference_tensors([path])
    for rank in range(4):
        with hst.safe_open(path, "hip", device=0) as sf:
            part = rank_part(sf, "rows", rank, 4, lambda t: t)
        for k, t in part.items():
            shape, data = ref[k]["shape"], bytes(ref[k]["data"])
            if len(shape) == 2:
                row = len(data) // shape[0]
                lo, hi = rank * shape[0] // 4, (rank + 1) * shape[0] // 4
                data, shape = data[lo * row:hi * row], [hi - lo, shape[1]]
            if t.copy_to_host().tobytes() != data or list(t.shape) != shape:
                ok = False
                print(f"MISMATCH in rows of rank {rank}: {k}")
    print(f"emulated platform: row slices of 4 ranks: {'OK' if ok else 'MISMATCH'}")
    # small: a 4 KiB tensor and 256 rows of big through one handle
    ref = reference_tensors([small])
    with hst.safe_open(small, "hip", device=0) as sf:
        for _ in range(3):
            ok = same("small", sf.get_tensor("small"), ref["small"]) and ok
            rows = sf.get_slice("big")[0:256]
            ok = (rows.copy_to_host().tobytes() == bytes(ref["big"]["data"])[:256 * 4096]
                  and ok)
    print(f"emulated platform: small get_tensor and get_slice: {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="a small model (4 layers, hidden 2048, vocab 8000: 0.2 GB), "
                         "1 repeat, 50 calls for small, warm and cold")
    ap.add_argument("--shapes", default=",".join(SHAPES),
                    help="what to time, comma-separated: load (whole checkpoints), keyloop "
                         "(safe_open and get_tensor per key), small (single small reads), "
                         "slices (tensor-parallel parts in --ranks processes), sharded (file "
                         f"by file, key by key) (default: {','.join(SHAPES)})")
    ap.add_argument("--layers", type=int, default=24, help="decoder layers (24)")
    ap.add_argument("--hidden", type=int, default=4096, help="hidden size (4096)")
    ap.add_argument("--vocab", type=int, default=32000, help="vocabulary (32000)")
    ap.add_argument("--shards", type=int, default=4, help="files of the sharded checkpoint (4)")
    ap.add_argument("--threads", type=int, default=16,
                    help="threads of the page-cache -> pinned reader (16)")
    ap.add_argument("--calls", type=int, default=200,
                    help="timed calls of each case of small; medians are reported (200)")
    ap.add_argument("--ranks", type=int, default=4,
                    help="processes of slices, all on the one GPU (4)")
    ap.add_argument("--cache", choices=("warm", "cold", "both"), default="both",
                    help="page cache state to time (both); small and slices are warm only")
    ap.add_argument("--checkpoints", default="single,sharded",
                    help="which checkpoints load times: single, sharded or both "
                         "(single,sharded)")
    ap.add_argument("--peers", default="safetensors,fastsafetensors",
                    help="peers to compare with, when importable (safetensors,fastsafetensors)")
    ap.add_argument("--device", type=int, default=0, help="GPU to load onto (0)")
    ap.add_argument("--host", action="store_true",
                    help="time --shapes small and load into host memory (device='cpu'), "
                         "which needs no GPU and no platform")
    ap.add_argument("--json", default=None, help="also write the results to this file")
    add_common_arguments(ap, repeats=3, data="the checkpoints",
                         allow_emulated="on the emulated platform, check correctness "
                                        "instead of timing")
    return ap


HOST_LOAD_RATIOS = (
    Ratio("hipfile load_file", "floor: preadv, plain pages"),
    Ratio("hipfile keyloop", "floor: preadv, plain pages"),
    Ratio("hipfile load_file", "safetensors load_file + touch"),
)


def shape_host_load(b: Bench) -> None:
    """``--host --shapes load``: the single checkpoint into host memory,
    warm: hipfile's ``load_file(device="cpu")`` and key-by-key loop beside
    one ``preadv`` of the file into fresh memory (plain pages, and pages
    advised for transparent huge pages) and ``safetensors``' ``load_file``,
    which maps the file and reads it at first touch (alone, and with one
    byte of every page touched, what any first use pays)."""
    import mmap as mmap_module

    import torch

    from hipfile.safetensors import safe_open as hst_open
    from hipfile.safetensors import torch as hst_torch

    path = b.checkpoints["single"][0]
    size = os.path.getsize(path)
    warm([path])
    print(f"\n== load into host memory: {size / 1e9:.2f} GB, warm, {b.args.repeats} rounds")

    def preadv_into(view: memoryview) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            got = 0
            while got < size:
                n = os.preadv(fd, [view[got:]], got)
                if n == 0:
                    raise OSError(f"short read of {path}")
                got += n
        finally:
            os.close(fd)

    def plain() -> Any:
        t = torch.empty(size, dtype=torch.uint8)
        preadv_into(memoryview(t.numpy()))
        return t

    def huge() -> Any:
        m = mmap_module.mmap(-1, size, flags=mmap_module.MAP_PRIVATE | mmap_module.MAP_ANONYMOUS)
        if hasattr(m, "madvise") and hasattr(mmap_module, "MADV_HUGEPAGE"):
            m.madvise(mmap_module.MADV_HUGEPAGE)
        preadv_into(memoryview(m))
        return m

    def keyloop() -> Any:
        with hst_open(path, "pt", device="cpu") as f:
            return {k: f.get_tensor(k) for k in f.keys()}

    cases: dict[str, Callable[[], Any]] = {
        "hipfile load_file": lambda: hst_torch.load_file(path, device="cpu"),
        "hipfile keyloop": keyloop,
        "floor: preadv, plain pages": plain,
        "floor: preadv, huge pages": huge,
    }
    st = b.peers.safetensors
    if st is not None:
        st_load = st.torch.load_file

        def touched() -> Any:
            out = st_load(path, device="cpu")
            for t in out.values():
                if t.numel():
                    int(t.reshape(-1).view(torch.uint8)[::4096].sum())
            return out

        cases["safetensors load_file"] = lambda: st_load(path, device="cpu")
        cases["safetensors load_file + touch"] = touched
        want = st_load(path, device="cpu")
        for name in ("hipfile load_file", "hipfile keyloop"):
            verdict = check(want, cases[name]())
            print(f"  check {name:29s} {verdict}  (against safetensors)")
            b.bad |= verdict != "OK"
        del want
    times = time_rounds(cases, b.args.repeats, lambda: None)
    record(b, "load", "warm", times, size, HOST_LOAD_RATIOS)


def host_main(args: argparse.Namespace) -> int:
    """``--host``: shapes into host memory (torch on the CPU; no GPU
    library is loaded, as for any host-memory load): ``small``, and
    ``load`` (the single checkpoint whole and key by key)."""
    import platform as platform_module

    folder = temp_folder(args.dir)
    peers = import_peers(set(args.peers.split(",")) & {"safetensors"})
    for n in peers.notes:
        print(f"note: {n}")
    shapes = [s for s in args.shapes.split(",") if s]
    results: dict[str, Any] = {"platform": "host", "device": "cpu",
                               "cpu": platform_module.processor() or platform_module.machine(),
                               "calls": args.calls, "shapes_run": shapes, "blocks": {},
                               "shapes": {}, "ratios": []}
    cks: dict[str, tuple[str, list[str]]] = {}
    if "load" in shapes:
        cks = write_checkpoints(folder, args.layers, args.hidden, args.vocab, args.shards,
                                False)
    b = Bench(args, shapes, "cpu", folder, cks, peers, results)
    if "small" in shapes:
        shape_small(b)
    if "load" in shapes:
        shape_host_load(b)
    print("\n== ratios hipfile / peer (time: per-call time)")
    for e in results["ratios"]:
        print(f"  {e['shape'] + ' ' + e['mode']:20s} {ratio_line(e)}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 1 if b.bad else 0


def main() -> int:
    ap = build_parser()
    args = ap.parse_args()
    if args.quick:
        args.layers, args.hidden, args.vocab, args.repeats = 4, 2048, 8000, 1
        args.calls = min(args.calls, 50)
    if min(args.layers, args.hidden, args.vocab, args.shards, args.repeats, args.threads,
           args.calls, args.ranks) <= 0:
        ap.error("--layers, --hidden, --vocab, --shards, --repeats, --threads, --calls and "
                 "--ranks must be positive")
    chosen = [c for c in args.checkpoints.split(",") if c]
    if not chosen or set(chosen) - {"single", "sharded"}:
        ap.error("--checkpoints takes single, sharded or both")
    args.checkpoints = chosen
    shapes = [s for s in args.shapes.split(",") if s]
    if not shapes or set(shapes) - set(SHAPES):
        ap.error(f"--shapes takes some of {', '.join(SHAPES)}")

    if args.host:
        if set(shapes) - {"small", "load"}:
            ap.error("--host times --shapes small and load only")
        return host_main(args)

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
    need_sharded = "sharded" in shapes or ("load" in shapes and "sharded" in args.checkpoints)
    cks = write_checkpoints(folder, args.layers, args.hidden, args.vocab, args.shards,
                            need_sharded)
    print(f"wrote the checkpoints in {time.perf_counter() - t0:.0f} s to {folder} "
          f"(layers={args.layers} hidden={args.hidden} vocab={args.vocab}, "
          f"{len(model_tensors(args.layers, args.hidden, args.vocab))} tensors)")
    peers = import_peers(set(args.peers.split(",")))
    for n in peers.notes:
        print(f"note: {n}")

    # the first hipfile call of the process: it opens the driver
    first_path, first_files = cks["single"]
    warm(first_files)
    t0 = time.perf_counter()
    first = load_cases(device, first_path, first_files, Peers())["hipfile load_file"]()
    first_s = time.perf_counter() - t0
    del first
    release()

    results: dict[str, Any] = {"platform": platform, "device": torch.cuda.get_device_name(),
                               "layers": args.layers, "hidden": args.hidden,
                               "vocab": args.vocab, "shards": args.shards,
                               "repeats": args.repeats, "calls": args.calls,
                               "ranks": args.ranks, "shapes_run": shapes,
                               "first_call_s": first_s, "blocks": {}, "shapes": {}, "ratios": []}
    b = Bench(args, shapes, device, folder, cks, peers, results)
    took = run_shapes(b)
    results["seconds_per_block"] = took

    print(f"\nfirst hipfile call of the process (opens the driver): {first_s * 1e3:.0f} ms")
    print("\n== ratios hipfile / peer (speed: times faster; time: per-call time)")
    for e in results["ratios"]:
        print(f"  {e['shape'] + ' ' + e['mode']:20s} {ratio_line(e)}")
    print("\nseconds per block: " + ", ".join(f"{k} {v:.0f}" for k, v in took.items()))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 1 if b.bad else 0


if __name__ == "__main__":
    sys.exit(main())
