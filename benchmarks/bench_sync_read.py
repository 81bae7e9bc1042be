"""Synchronous read of one large file into device memory.

Compares, in one run and on one file: ``FileHandle.read`` (one thread),
``FileHandle.pread`` (a thread pool), a raw loop over the C function
through ctypes (``hipFileRead``), a raw loop over ``cuFileRead`` when
libcufile is loaded (the cuda platform), and KvikIO's ``CuFile.pread`` when
KvikIO and CuPy are importable. Prints median GB/s and ratios to the raw
cuFile loop (or, without cuFile, to the raw hipFileRead loop).

    python benchmarks/bench_sync_read.py --platform cuda --size-mib 1024 --repeats 5 [--cold]

``--cold`` evicts the file from the page cache before every timed read
(``posix_fadvise(DONTNEED)``, plus ``/proc/sys/vm/drop_caches`` when writable).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import time
from collections.abc import Callable

from _common import add_common_arguments, drop_page_cache, select_platform, temp_folder

CHUNK = 0x7FFFF000


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=1024, help="file size, MiB (default: 1024)")
    ap.add_argument("--cold", action="store_true",
                    help="evict the file from the page cache before every timed read")
    ap.add_argument("--task-mib", type=int, default=16,
                    help="pread task size, MiB (default: 16)")
    add_common_arguments(ap, repeats=5, data="the file")
    return ap


def main() -> int:
    args = build_parser().parse_args()
    hipfile = select_platform(args.platform)
    import numpy as np
    from hip import hip

    from hipfile._lib import _hipfile

    size = args.size_mib << 20
    folder = temp_folder(args.dir)
    path = os.path.join(folder, "bench.bin")
    block = np.random.default_rng(0).integers(0, 256, 64 << 20, dtype=np.uint8).tobytes()
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n
    expect_head = np.frombuffer(block[:4096], dtype=np.uint8)

    err, dev = hip.hipMalloc(size)
    assert err == hip.hipError_t.hipSuccess, err

    def verify() -> None:
        out = np.empty(4096, dtype=np.uint8)
        hip.hipMemcpy(out, dev, 4096, hip.hipMemcpyKind.hipMemcpyDeviceToHost)
        assert np.array_equal(out, expect_head), "data mismatch"
        hip.hipMemset(dev, 0, 4096)

    methods: dict[str, Callable[[], int]] = {}
    cleanups: list[Callable[[], None]] = []
    drv = hipfile.Driver().open()
    cleanups.append(drv.close)
    fh = hipfile.FileHandle(path, os.O_RDONLY).open()
    cleanups.append(fh.close)
    buf = hipfile.Buffer(dev)
    buf.register()
    cleanups.append(buf.deregister)

    methods["hipfile FileHandle.read"] = lambda: fh.read(buf)
    task = args.task_mib << 20
    methods[f"hipfile FileHandle.pread ({args.task_mib} MiB tasks)"] = (
        lambda: fh.pread(buf, task_size=task).result()
    )

    lib = ctypes.CDLL(_hipfile.load_library())
    hf_read = lib.hipFileRead
    hf_read.restype = ctypes.c_ssize_t
    hf_read.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int64,
                        ctypes.c_int64]
    handle, base = fh.handle, int(dev)

    def raw_loop(read: Callable[..., int], fh: object, name: str) -> Callable[[], int]:
        def run() -> int:
            done = 0
            while done < size:
                n = read(fh, base, min(CHUNK, size - done), done, done)
                if n <= 0:
                    raise OSError(f"{name} returned {n}")
                done += n
            return done

        return run

    methods["raw hipFileRead loop (ctypes)"] = raw_loop(hf_read, handle, "hipFileRead")
    reference = "raw hipFileRead loop (ctypes)"

    try:
        cufile = ctypes.CDLL("libcufile.so.0", mode=os.RTLD_NOLOAD)
    except OSError:
        cufile = None
    if cufile is not None:
        class Descr(ctypes.Structure):
            _fields_ = (("type", ctypes.c_int), ("fd", ctypes.c_int64), ("fs_ops", ctypes.c_void_p))

        cu_read = cufile.cuFileRead
        cu_read.restype = ctypes.c_ssize_t
        cu_read.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int64,
                            ctypes.c_int64]
        cufile.cuFileHandleRegister.restype = ctypes.c_uint64
        cufile.cuFileDriverOpen.restype = ctypes.c_uint64
        cufile.cuFileDriverOpen()
        raw_fd = os.open(path, os.O_RDONLY)
        d = Descr(1, raw_fd, None)
        cu_handle = ctypes.c_void_p()
        status = cufile.cuFileHandleRegister(ctypes.byref(cu_handle), ctypes.byref(d))
        if status & 0xFFFFFFFF == 0:
            methods["raw cuFileRead loop (ctypes)"] = raw_loop(cu_read, cu_handle, "cuFileRead")
            reference = "raw cuFileRead loop (ctypes)"
            cleanups.append(lambda: (cufile.cuFileHandleDeregister(cu_handle), os.close(raw_fd)))
        else:
            print(f"raw cuFile: cuFileHandleRegister failed ({status & 0xFFFFFFFF})")
            os.close(raw_fd)

    try:
        import cupy
        import kvikio

        kv_file = kvikio.CuFile(path, "r")
        kv_buf = cupy.cuda.UnownedMemory(int(dev), size, owner=None)
        kv_arr = cupy.ndarray((size,), dtype=cupy.uint8,
                              memptr=cupy.cuda.MemoryPointer(kv_buf, 0))
        methods["KvikIO CuFile.pread"] = lambda: kv_file.pread(kv_arr).get()
        cleanups.append(kv_file.close)
        mode = getattr(getattr(kvikio, "defaults", None), "compat_mode", None)
        print(f"kvikio {kvikio.__version__}, compat mode: {mode() if callable(mode) else '?'}")
    except Exception as exc:  # optional comparison
        print(f"KvikIO not measured: {type(exc).__name__}: {exc}")

    results: dict[str, list[float]] = {name: [] for name in methods}
    for name, fn in methods.items():  # warm-up and correctness
        if args.cold:
            drop_page_cache(path)
        assert fn() == size, name
        verify()
    for _ in range(args.repeats):
        for name, fn in methods.items():  # interleaved, so drift hits all alike
            if args.cold:
                drop_page_cache(path)
            t0 = time.perf_counter()
            n = fn()
            results[name].append(time.perf_counter() - t0)
            assert n == size, (name, n)
    verify()
    for c in reversed(cleanups):
        c()
    hip.hipFree(dev)

    print(f"platform={hipfile.platforms.active() or 'rocm'} size={args.size_mib} MiB "
          f"cache={'cold' if args.cold else 'warm'} repeats={args.repeats} "
          f"python={sys.version.split()[0]}")
    ref = statistics.median(results[reference])
    for name, times in results.items():
        med = statistics.median(times)
        print(f"  {name:42s} median {size / med / 1e9:7.2f} GB/s  {med * 1e3:8.1f} ms  "
              f"time ratio to {reference.split(' (')[0]}: {med / ref:5.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
