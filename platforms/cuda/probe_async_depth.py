"""How many stream-ordered operations can be outstanding on one stream?

Submits N reads of 4 KiB with ``read_async`` on one stream (from 1 and from
16 threads), then synchronises, each N in its own process so that a library
abort is reported rather than fatal. Run with the platform active:

    HIPFILE_PLATFORM=cuda python platforms/cuda/probe_async_depth.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

CHILD = r"""
import os, sys, threading, warnings
warnings.simplefilter("ignore")
import hipfile
from hip import hip
n, threads, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
err, dev = hip.hipMalloc(4096 * 64)
err, s = hip.hipStreamCreate()
with hipfile.Driver(), hipfile.FileHandle(path) as fh:
    keep = []
    def work():
        keep.extend(fh.read_async(dev, 4096, 0, 0, s) for _ in range(n // threads))
    ts = [threading.Thread(target=work) for _ in range(threads)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    hip.hipStreamSynchronize(s)
    assert all(h.wait() == 4096 for h in keep)
    keep.clear()
hip.hipStreamDestroy(s)
hip.hipFree(dev)
print("ok")
"""


def main() -> int:
    folder = tempfile.mkdtemp(dir=os.environ.get("PROBE_DIR", "/tmp"))
    path = os.path.join(folder, "probe.bin")
    with open(path, "wb") as f:
        f.write(os.urandom(1 << 20))
    for threads in (1, 16):
        for n in (64, 256, 1024, 4096, 16384):
            proc = subprocess.run([sys.executable, "-c", CHILD, str(n), str(threads), path],
                                  capture_output=True, text=True, timeout=120)
            state = "ok" if proc.returncode == 0 else f"FAILED rc={proc.returncode}"
            tail = "" if proc.returncode == 0 else " " + proc.stderr.strip()[-200:]
            print(f"outstanding={n:6d} threads={threads:2d}: {state}{tail}")
    os.unlink(path)
    os.rmdir(folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
