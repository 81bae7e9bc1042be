"""Layer-wise KV-cache load overlapped with compute.

The pattern of a KV-cache offload connector: every layer's KV block is read
from a file on a side ("copy") stream; the compute stream waits on an event
per layer, so layer ``l`` starts as soon as its own block is in device memory
while later blocks are still loading. Written with HIP-Python streams and
events; the "compute" here is a device-to-device copy into a workspace, so
the result can be checked: a layer computed before its block arrived would
leave wrong bytes behind.

    HIPFILE_PLATFORM=emulated python examples/kv_cache_layerwise.py --layers 16
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
from _support import hip_check, new_file, positive_int, require_runtime  # examples/_support
from hip import hip

import hipfile


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=positive_int, default=8,
                    help="layers of KV blocks (default: 8)")
    ap.add_argument("--chunk-kib", type=positive_int, default=256,
                    help="KV bytes per layer, KiB (default: 256)")
    ap.add_argument("--file", type=new_file,
                    help="KV file to create (default: a temporary file); an existing file "
                         "is refused unless --overwrite is given")
    ap.add_argument("--overwrite", action="store_true",
                    help="let --file replace an existing file")
    return ap


def main() -> int:
    ap = build_parser()
    args = ap.parse_args()
    if args.file and os.path.lexists(args.file) and not args.overwrite:
        ap.error(f"--file: {args.file!r} exists; pass --overwrite to replace it")
    layers, chunk = args.layers, args.chunk_kib * 1024
    total = layers * chunk

    kv_host = np.random.default_rng(7).integers(0, 256, total, dtype=np.uint8)
    tmpdir = tempfile.TemporaryDirectory()
    path = args.file or os.path.join(tmpdir.name, "kv.bin")
    with open(path, "wb") as f:
        f.write(kv_host.tobytes())

    kv = hip_check(hip.hipMalloc(total))  # the KV cache in device memory
    work = hip_check(hip.hipMalloc(total))  # the compute's output
    copy_stream = hip_check(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
    compute_stream = hip_check(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
    d2d = hip.hipMemcpyKind.hipMemcpyDeviceToDevice
    try:
        hip_check(hip.hipMemset(work, 0, total))
        t0 = time.perf_counter()
        with hipfile.Driver(), hipfile.FileHandle(path) as fh, \
                hipfile.Buffer(kv) as buf, hipfile.Stream(copy_stream) as io:
            handles = []
            for layer in range(layers):
                off = layer * chunk
                h = fh.read_async(buf, chunk, off, off, io)  # enqueue, return at once
                ready = h.record_event()  # completes once this layer's block is in
                hip_check(hip.hipStreamWaitEvent(compute_stream, ready, 0))
                # "attention" of this layer: reads only its own block
                hip_check(hip.hipMemcpyAsync(int(work) + off, int(kv) + off, chunk, d2d,
                                             compute_stream))
                handles.append(h)
            submitted = time.perf_counter()
            hip_check(hip.hipStreamSynchronize(compute_stream))
            moved = sum(h.wait() for h in handles)  # raises if a read failed
        elapsed = time.perf_counter() - t0

        out = np.empty(total, dtype=np.uint8)
        hip_check(hip.hipMemcpy(out, work, total, hip.hipMemcpyKind.hipMemcpyDeviceToHost))
        ok = moved == total and np.array_equal(out, kv_host)
        print(f"platform={hipfile.platforms.active() or 'rocm'} layers={layers} "
              f"chunk={chunk} B read={moved} B submit={1e3 * (submitted - t0):.2f} ms "
              f"total={1e3 * elapsed:.2f} ms result={'OK' if ok else 'MISMATCH'}")
        return 0 if ok else 1
    finally:
        hip_check(hip.hipStreamDestroy(copy_stream))
        hip_check(hip.hipStreamDestroy(compute_stream))
        hip_check(hip.hipFree(kv))
        hip_check(hip.hipFree(work))
        tmpdir.cleanup()


if __name__ == "__main__":
    require_runtime(__file__)  # one line saying what to set, without a GPU runtime
    sys.exit(main())
