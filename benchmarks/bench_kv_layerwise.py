"""Layer-wise KV-cache load overlapped with compute.

N layers of KV blocks are read with ``read_async`` on a copy stream, each
followed by an event; the compute stream waits on layer ``l``'s event and
then runs that layer's compute (a matrix product over the layer's KV block
with PyTorch where a CUDA/ROCm device is available, else a device memset).
Prints median t_io (reads alone), t_compute (compute alone) and t_both
(overlapped), and the overlap achieved.

    python benchmarks/bench_kv_layerwise.py --platform cuda --layers 32 --layer-mib 16 --dim 4096
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from _common import add_platform_argument, select_platform, temp_folder


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=32, help="layers of KV blocks (default: 32)")
    ap.add_argument("--layer-mib", type=int, default=16,
                    help="KV bytes per layer, MiB (default: 16)")
    ap.add_argument("--dim", type=int, default=4096,
                    help="matrix size of each layer's product (default: 4096)")
    ap.add_argument("--matmuls", type=int, default=4, help="products per layer (default: 4)")
    ap.add_argument("--repeats", type=int, default=5,
                    help="timed runs per case; medians are printed (default: 5)")
    ap.add_argument("--dir", default=None,
                    help="folder for the KV file (default: the temporary folder)")
    add_platform_argument(ap)
    return ap


def main() -> int:
    args = build_parser().parse_args()
    hipfile = select_platform(args.platform)
    from hip import hip

    layers, chunk = args.layers, args.layer_mib << 20
    total = layers * chunk
    folder = temp_folder(args.dir)
    path = os.path.join(folder, "kv.bin")
    with open(path, "wb") as f:
        block = os.urandom(min(chunk, 64 << 20))
        for _ in range(total // len(block)):
            f.write(block)

    try:
        import torch

        use_torch = torch.cuda.is_available()
    except ImportError:
        use_torch = False

    def check(res: Any) -> Any:
        assert res[0] == hip.hipError_t.hipSuccess, res
        return res[1] if len(res) > 1 else None

    if use_torch:
        kv = torch.empty(total, dtype=torch.uint8, device="cuda")
        copy_t, compute_t = torch.cuda.Stream(), torch.cuda.Stream()
        copy_h, compute_h = copy_t.cuda_stream, compute_t.cuda_stream
        n = args.dim
        weight = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
        per_layer_elems = min(chunk // 2, n * n)
        rows = per_layer_elems // n
        out = torch.empty(rows, n, dtype=torch.bfloat16, device="cuda")

        def compute(layer: int) -> None:
            with torch.cuda.stream(compute_t):
                a = kv[layer * chunk:layer * chunk + rows * n * 2].view(torch.bfloat16)
                a = a.view(rows, n)
                for _ in range(args.matmuls):
                    torch.matmul(a, weight, out=out)

        kind = f"torch {torch.__version__} bf16 matmul ({rows}x{n} @ {n}x{n}) x{args.matmuls}"
        kv_obj: Any = kv
        sync_all: Callable[[], None] = torch.cuda.synchronize
    else:
        kv_obj = check(hip.hipMalloc(total))
        copy_h = int(check(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking)))
        compute_h = int(check(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking)))
        scratch = check(hip.hipMalloc(chunk))

        def compute(layer: int) -> None:
            for _ in range(args.matmuls):
                check(hip.hipMemsetAsync(scratch, layer & 0xFF, chunk, compute_h))

        kind = "device memset (no GPU framework)"

        def sync_all() -> None:
            check(hip.hipDeviceSynchronize())

    results: dict[str, list[float]] = {"t_io": [], "t_compute": [], "t_both": []}
    with hipfile.Driver(), hipfile.FileHandle(path) as fh, hipfile.Buffer(kv_obj) as buf, \
            hipfile.Stream(copy_h) as io:

        def run_io() -> None:
            hs = [fh.read_async(buf, chunk, i * chunk, i * chunk, io) for i in range(layers)]
            assert all(h.wait() == chunk for h in hs)

        def run_compute() -> None:
            for i in range(layers):
                compute(i)
            check(hip.hipStreamSynchronize(compute_h))

        def run_both() -> None:
            hs = []
            for i in range(layers):
                h = fh.read_async(buf, chunk, i * chunk, i * chunk, io)
                check(hip.hipStreamWaitEvent(compute_h, h.record_event(), 0))
                compute(i)
                hs.append(h)
            check(hip.hipStreamSynchronize(compute_h))
            assert all(h.wait() == chunk for h in hs)

        cases = {"t_io": run_io, "t_compute": run_compute, "t_both": run_both}
        for fn in cases.values():  # warm-up
            fn()
        sync_all()
        for _ in range(args.repeats):
            for name, fn in cases.items():
                sync_all()
                t0 = time.perf_counter()
                fn()
                results[name].append(time.perf_counter() - t0)
    if not use_torch:
        check(hip.hipStreamDestroy(copy_h))
        check(hip.hipStreamDestroy(compute_h))
        check(hip.hipFree(kv_obj))
        check(hip.hipFree(scratch))
    med = {k: statistics.median(v) for k, v in results.items()}
    hidden = (med["t_io"] + med["t_compute"] - med["t_both"]) / min(med["t_io"], med["t_compute"])
    print(f"platform={hipfile.platforms.active() or 'rocm'} layers={layers} "
          f"layer={args.layer_mib} MiB total={total >> 20} MiB compute={kind} "
          f"repeats={args.repeats}")
    for k, v in med.items():
        print(f"  {k:10s} median {v * 1e3:9.2f} ms")
    ratio_max = med["t_both"] / max(med["t_io"], med["t_compute"])
    print(f"  t_both / max(t_io, t_compute) = {ratio_max:.2f}"
          f"   t_both / (t_io + t_compute) = {med['t_both'] / (med['t_io'] + med['t_compute']):.2f}"
          f"   overlap hidden = {100 * hidden:.0f}% of the shorter")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
