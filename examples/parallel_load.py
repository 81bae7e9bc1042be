"""Load a file into GPU memory two ways: parallel pread and one batch.

Writes a few MiB of random bytes to a temporary file, reads the file into
device memory with ``FileHandle.pread`` (tasks on a thread pool) and again
with a ``BatchIO`` (one entry per chunk, submitted together), copies both
back to the host and compares them with the source. Exits with status 1 on a
mismatch.

Run on a ROCm machine as is, or on the emulated test platform::

    HIPFILE_PLATFORM=emulated python3 examples/parallel_load.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import numpy as np
from hip import hip

import hipfile

SIZE = 6 << 20 | 12345  # not a multiple of the chunk sizes on purpose
TASK_SIZE = 1 << 20
CHUNK = 512 << 10


def hip_check(result: tuple) -> object:
    err = result[0]
    if err != hip.hipError_t.hipSuccess:
        raise RuntimeError(f"HIP call failed: {err!r}")
    return result[1] if len(result) > 1 else None


def to_host(dev: object, nbytes: int) -> np.ndarray:
    out = np.empty(nbytes, dtype=np.uint8)
    hip_check(hip.hipMemcpy(out, dev, nbytes, hip.hipMemcpyKind.hipMemcpyDeviceToHost))
    return out


def load_parallel(path: str, dev: object) -> int:
    with hipfile.FileHandle(path) as fh:
        return fh.pread(dev, SIZE, task_size=TASK_SIZE).result()


def load_batch(path: str, dev: object) -> int:
    offsets = list(range(0, SIZE, CHUNK))
    with hipfile.FileHandle(path) as fh, hipfile.BatchIO(len(offsets)) as batch:
        # probe before submitting: a library that does not implement batch
        # status raises InternalError here, while nothing holds the file yet
        batch.get_status(0, timeout=0)
        for off in offsets:
            batch.read(fh, dev, min(CHUNK, SIZE - off), off, off, cookie=off)
        batch.submit()
        total = 0
        for event in batch.wait(timeout=60):
            if not event.ok:
                raise RuntimeError(f"chunk at {event.cookie} failed") from event.error()
            total += event.result
        return total


def main() -> int:
    data = np.random.default_rng(7).integers(0, 256, SIZE, dtype=np.uint8)
    with tempfile.TemporaryDirectory() as tmp, hipfile.Driver():
        path = os.path.join(tmp, "weights.bin")
        with open(path, "wb") as f:
            f.write(data.tobytes())
        dev_a = hip_check(hip.hipMalloc(SIZE))
        dev_b = hip_check(hip.hipMalloc(SIZE))
        try:
            t0 = time.perf_counter()
            n_a = load_parallel(path, dev_a)
            t1 = time.perf_counter()
            batch_kind = f"batch ({-(-SIZE // CHUNK)} entries)"
            try:
                n_b = load_batch(path, dev_b)
            except hipfile.InternalError as e:
                # some libhipfile releases declare batch I/O without implementing it
                print(f"batch I/O unavailable ({e}); falling back to parallel pread")
                batch_kind = "fallback parallel pread"
                t1 = time.perf_counter()
                n_b = load_parallel(path, dev_b)
            t2 = time.perf_counter()
            ok_a = n_a == SIZE and np.array_equal(to_host(dev_a, SIZE), data)
            ok_b = n_b == SIZE and np.array_equal(to_host(dev_b, SIZE), data)
        finally:
            hip_check(hip.hipFree(dev_a))
            hip_check(hip.hipFree(dev_b))
    mib = SIZE / (1 << 20)
    print(f"file: {mib:.2f} MiB, {hipfile.get_num_threads()} threads")
    print(f"parallel pread ({-(-SIZE // TASK_SIZE)} tasks): {n_a} bytes in "
          f"{(t1 - t0) * 1e3:.1f} ms, {'match' if ok_a else 'MISMATCH'}")
    print(f"{batch_kind}: {n_b} bytes in "
          f"{(t2 - t1) * 1e3:.1f} ms, {'match' if ok_b else 'MISMATCH'}")
    return 0 if ok_a and ok_b else 1


if __name__ == "__main__":
    sys.exit(main())
