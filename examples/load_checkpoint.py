"""Load a sharded safetensors checkpoint the way model loaders call it.

Writes a small sharded checkpoint (``model-0000k-of-0000n.safetensors``
files and ``model.safetensors.index.json``) to a temporary folder, then
reads it into GPU memory with ``hipfile.safetensors`` in the three shapes
loaders use, checking every tensor against the bytes written:

1. file by file and key by key (``safe_open`` + ``get_tensor``, the shape of
   vLLM's default weights iterator and of transformers): the handle reads
   the next tensors ahead while the caller takes one;
2. the slices a tensor-parallel rank takes: its rows of every 2-D tensor
   (one contiguous read each) and its columns (each row's part, one
   scatter operation per tensor);
3. the whole checkpoint in one call (``load_file`` of the index).

Exits with status 1 on a mismatch. Run on a ROCm machine as is, or on the
emulated test platform::

    HIPFILE_PLATFORM=emulated python3 examples/load_checkpoint.py [--layers 4] [--ranks 2]

``--framework pt`` returns torch tensors (needs torch with a GPU); the
default ``hip`` returns ``hipfile.safetensors.DeviceTensor`` objects.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
from _support import positive_int, require_runtime, require_torch_gpu  # examples/_support

from hipfile import safetensors as hst
from hipfile.safetensors import numpy as hst_numpy


def write_checkpoint(folder: str, layers: int, shards: int) -> dict[str, np.ndarray]:
    """A model-like checkpoint in ``shards`` files with an index; returns
    the tensors written."""
    rng = np.random.default_rng(0)
    tensors: dict[str, np.ndarray] = {"embed.weight": rng.standard_normal((512, 96),
                                                                         np.float32)}
    for i in range(layers):
        for part in ("q", "k", "v", "o"):
            tensors[f"layers.{i}.{part}.weight"] = rng.standard_normal((96, 96), np.float32)
        tensors[f"layers.{i}.norm.weight"] = rng.standard_normal(96 + i, np.float32)
    names = sorted(tensors)
    weight_map = {}
    for k in range(shards):
        file = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[k::shards]}
        hst_numpy.save_file(part, os.path.join(folder, file))
        weight_map |= {n: file for n in part}
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return tensors


def to_host(t: Any) -> np.ndarray:
    """A loaded tensor's values on the host."""
    if hasattr(t, "copy_to_host"):
        return np.asarray(t.copy_to_host())
    return t.cpu().numpy()


def weights_iterator(folder: str, framework: str, device: Any) -> Iterator[tuple[str, Any]]:
    """Every tensor, file by file and key by key (vLLM's default iterator)."""
    with open(os.path.join(folder, "model.safetensors.index.json")) as f:
        files = sorted(set(json.load(f)["weight_map"].values()))
    for file in files:
        with hst.safe_open(os.path.join(folder, file), framework, device=device) as st:
            for name in st.keys():
                yield name, st.get_tensor(name)


def rank_slices(folder: str, framework: str, device: Any, rank: int, ranks: int
                ) -> Iterator[tuple[str, str, Any, tuple[slice, ...]]]:
    """One rank's rows and columns of every 2-D tensor: (name, split,
    tensor, index)."""
    with open(os.path.join(folder, "model.safetensors.index.json")) as f:
        weight_map = json.load(f)["weight_map"]
    for file in sorted(set(weight_map.values())):
        with hst.safe_open(os.path.join(folder, file), framework, device=device) as st:
            for name in st.keys():
                s = st.get_slice(name)
                shape = s.get_shape()
                if len(shape) != 2:
                    continue
                n, m = shape
                rows = (slice(rank * n // ranks, (rank + 1) * n // ranks),)
                cols = (slice(None), slice(rank * m // ranks, (rank + 1) * m // ranks))
                yield name, "rows", s[rows], rows
                yield name, "columns", s[cols], cols


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=positive_int, default=4, help="decoder layers (4)")
    ap.add_argument("--shards", type=positive_int, default=3, help="files (3)")
    ap.add_argument("--ranks", type=positive_int, default=2,
                    help="tensor-parallel ranks whose slices are read (2)")
    ap.add_argument("--framework", choices=("hip", "pt"), default="hip",
                    help="what the tensors are: DeviceTensor (hip) or torch (pt)")
    return ap


def main() -> int:
    args = build_parser().parse_args()
    require_runtime()
    if args.framework == "pt":
        require_torch_gpu()
    device: Any = 0 if args.framework == "hip" else "cuda:0"
    bad = 0
    with tempfile.TemporaryDirectory() as folder:
        written = write_checkpoint(folder, args.layers, args.shards)
        nbytes = sum(a.nbytes for a in written.values())

        start = time.perf_counter()
        seen = 0
        for name, t in weights_iterator(folder, args.framework, device):
            seen += 1
            if not np.array_equal(to_host(t), written[name]):
                print(f"MISMATCH {name} (key by key)")
                bad += 1
        took = time.perf_counter() - start
        print(f"key by key: {seen} tensors, {nbytes} bytes in {took * 1e3:.1f} ms")

        for rank in range(args.ranks):
            count = 0
            for name, split, t, index in rank_slices(folder, args.framework, device, rank,
                                                     args.ranks):
                count += 1
                if not np.array_equal(to_host(t), written[name][index]):
                    print(f"MISMATCH {name} ({split} of rank {rank})")
                    bad += 1
            print(f"rank {rank} of {args.ranks}: {count} slices (rows and columns)")

        start = time.perf_counter()
        everything = hst.load_file(os.path.join(folder, "model.safetensors.index.json"),
                                   device=device, framework="hip" if args.framework == "hip"
                                   else "torch")
        took = time.perf_counter() - start
        for name, a in written.items():
            if not np.array_equal(to_host(everything[name]), a):
                print(f"MISMATCH {name} (load_file)")
                bad += 1
        print(f"load_file of the index: {len(everything)} tensors in {took * 1e3:.1f} ms")
    print("OK" if not bad else f"{bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
