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

from _common import (
    LayerCompute,
    add_common_arguments,
    hip_check,
    select_platform,
    temp_folder,
    time_interleaved,
    write_random_file,
)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=32, help="layers of KV blocks (default: 32)")
    ap.add_argument("--layer-mib", type=int, default=16,
                    help="KV bytes per layer, MiB (default: 16)")
    ap.add_argument("--dim", type=int, default=4096,
                    help="matrix size of each layer's product (default: 4096)")
    ap.add_argument("--matmuls", type=int, default=4, help="products per layer (default: 4)")
    add_common_arguments(ap, repeats=5, data="the KV file")
    return ap


def main() -> int:
    args = build_parser().parse_args()
    hipfile = select_platform(args.platform)
    from hip import hip

    layers, chunk = args.layers, args.layer_mib << 20
    total = layers * chunk
    folder = temp_folder(args.dir)
    path = os.path.join(folder, "kv.bin")
    write_random_file(path, total, chunk)
    check = hip_check
    lc = LayerCompute(total, chunk, args.dim, args.matmuls)
    kv_obj, copy_h, compute_h = lc.kv, lc.io_stream, lc.compute_stream
    compute, sync_all, kind = lc.compute, lc.sync_all, lc.kind

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
        results = time_interleaved(cases, args.repeats, sync_all, sync_after=False)
    lc.close()
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
