"""Load a file into GPU memory two ways: parallel pread and one batch.

Writes a few MiB of random bytes to a temporary file, reads the file into
device memory with ``FileHandle.pread`` (tasks on a thread pool) and again
with a ``BatchIO`` (one entry per chunk, submitted together), copies both
back to the host and compares them with the source. Exits with status 1 on a
mismatch.

Run on a ROCm machine as is, or on the emulated test platform::

    HIPFILE_PLATFORM=emulated python3 examples/parallel_load.py [--size 8388608]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
from _support import hip_check, positive_int, require_runtime  # examples/_support
from hip import hip

import hipfile

SIZE = 6 << 20 | 12345  # not a multiple of the chunk sizes on purpose
TASK_SIZE = 1 << 20
CHUNK = 512 << 10


def to_host(dev: object, nbytes: int) -> np.ndarray:
    out = np.empty(nbytes, dtype=np.uint8)
    hip_check(hip.hipMemcpy(out, dev, nbytes, hip.hipMemcpyKind.hipMemcpyDeviceToHost))
    return out


def load_parallel(path: str, dev: object, size: int, task_size: int) -> int:
    with hipfile.FileHandle(path) as fh:
        return fh.pread(dev, size, task_size=task_size).result()


def load_batch(path: str, dev: object, size: int, chunk: int) -> int:
    offsets = list(range(0, size, chunk))
    per_batch = min(len(offsets), 128)  # hipFile's cap on one batch
    total = 0
    with hipfile.FileHandle(path) as fh, hipfile.BatchIO(per_batch) as batch:
        # probe before submitting: a library that does not implement batch
        # status raises InternalError here, while nothing holds the file yet
        batch.get_status(0, timeout=0)
        for first in range(0, len(offsets), per_batch):
            for off in offsets[first:first + per_batch]:
                batch.read(fh, dev, min(chunk, size - off), off, off, cookie=off)
            batch.submit()
            for event in batch.wait(timeout=60):
                if not event.ok:
                    raise RuntimeError(f"chunk at {event.cookie} failed") from event.error()
                total += event.result
    return total


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=positive_int, default=SIZE,
                    help=f"file size in bytes (default: {SIZE}, not a multiple of the "
                         "chunk sizes on purpose)")
    ap.add_argument("--task-size", type=positive_int, default=TASK_SIZE,
                    help=f"bytes per pread task (default: {TASK_SIZE})")
    ap.add_argument("--chunk", type=positive_int, default=CHUNK,
                    help=f"bytes per batch entry (default: {CHUNK})")
    return ap


def main() -> int:
    args = build_parser().parse_args()
    if min(args.size, args.task_size, args.chunk) <= 0:
        build_parser().error("sizes must be positive")
    size, task_size, chunk = args.size, args.task_size, args.chunk
    data = np.random.default_rng(7).integers(0, 256, size, dtype=np.uint8)
    with tempfile.TemporaryDirectory() as tmp, hipfile.Driver():
        path = os.path.join(tmp, "weights.bin")
        with open(path, "wb") as f:
            f.write(data.tobytes())
        dev_a = hip_check(hip.hipMalloc(size))
        dev_b = hip_check(hip.hipMalloc(size))
        try:
            t0 = time.perf_counter()
            n_a = load_parallel(path, dev_a, size, task_size)
            t1 = time.perf_counter()
            batch_kind = f"batch ({-(-size // chunk)} entries)"
            try:
                n_b = load_batch(path, dev_b, size, chunk)
            except hipfile.InternalError as e:
                # some libhipfile releases declare batch I/O without implementing it
                print(f"batch I/O unavailable ({e}); falling back to parallel pread")
                batch_kind = "fallback parallel pread"
                t1 = time.perf_counter()
                n_b = load_parallel(path, dev_b, size, task_size)
            t2 = time.perf_counter()
            ok_a = n_a == size and np.array_equal(to_host(dev_a, size), data)
            ok_b = n_b == size and np.array_equal(to_host(dev_b, size), data)
        finally:
            hip_check(hip.hipFree(dev_a))
            hip_check(hip.hipFree(dev_b))
    mib = size / (1 << 20)
    print(f"platform={hipfile.platforms.active() or 'rocm'}")
    print(f"file: {mib:.2f} MiB, {hipfile.get_num_threads()} threads")
    print(f"parallel pread ({-(-size // task_size)} tasks): {n_a} bytes in "
          f"{(t1 - t0) * 1e3:.1f} ms, {'match' if ok_a else 'MISMATCH'}")
    print(f"{batch_kind}: {n_b} bytes in "
          f"{(t2 - t1) * 1e3:.1f} ms, {'match' if ok_b else 'MISMATCH'}")
    return 0 if ok_a and ok_b else 1


if __name__ == "__main__":
    require_runtime(__file__)  # one line saying what to set, without a GPU runtime
    sys.exit(main())
