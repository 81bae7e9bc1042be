"""Per-operation submit overhead of ``FileHandle.read_async``.

Times, in one run and against one libhipfile, the Python submit path of
hipfile against a direct ctypes call of ``hipFileReadAsync`` with slots
allocated beforehand, and prints medians and ratios.

By default the library is ``nullhipfile.c`` (compiled on the fly), whose
calls return at once, so only the binding is timed; ``--library real`` uses
the active platform's libhipfile (real stream work is then included).

    pip install -e '.[bench]'      # Cython, to build the reference design
    python benchmarks/bench_submit.py --platform emulated [--ops 20000] [--repeats 15]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import add_common_arguments, require_platform, select_platform, temp_folder

HERE = Path(__file__).resolve().parent


def build_null_library(out_dir: str) -> str:
    out = os.path.join(out_dir, "libhipfile.so")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", out, str(HERE / "nullhipfile.c")],
                   check=True)
    return out


def build_member_slots(out_dir: str) -> object:
    """Compile member_slots.pyx (the floor a binding can reach) and import it."""
    import importlib.util
    import sysconfig

    c_file = os.path.join(out_dir, "member_slots.c")
    subprocess.run([sys.executable, "-m", "cython", "-3", "-o", c_file,
                    str(HERE / "member_slots.pyx")], check=True)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    so = os.path.join(out_dir, "member_slots" + suffix)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-Wno-unused-function",
                    f"-I{sysconfig.get_paths()['include']}", "-o", so, c_file], check=True)
    spec = importlib.util.spec_from_file_location("member_slots", so)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=20000,
                    help="read_async calls per timed run (default: 20000)")
    ap.add_argument("--library", choices=("null", "real"), default="null",
                    help="null: a libhipfile whose calls return at once (times the binding "
                         "only); real: the platform's libhipfile (default: null)")
    add_common_arguments(ap, repeats=15)
    return ap


def main() -> int:
    args = build_parser().parse_args()
    require_platform(args.platform)
    try:
        import Cython  # noqa: F401
    except ImportError:
        print("bench_submit.py needs Cython: pip install -e '.[bench]'", file=sys.stderr)
        return 2
    tmp = temp_folder()
    if args.library == "null":
        os.environ["HIPFILE_LIBRARY"] = build_null_library(tmp)
    hipfile = select_platform(args.platform)
    from hip import hip

    from hipfile._lib import _hipfile

    lib_path = _hipfile.load_library()
    ops, repeats = args.ops, args.repeats
    nbytes = 1 << 20
    err, dev = hip.hipMalloc(nbytes)
    assert err == hip.hipError_t.hipSuccess
    err, stream = hip.hipStreamCreate()
    assert err == hip.hipError_t.hipSuccess
    path = os.path.join(tmp, "data.bin")
    with open(path, "wb") as f:
        f.write(b"\0" * nbytes)

    results: dict[str, float] = {}
    with hipfile.Driver(), hipfile.FileHandle(path) as fh, hipfile.Stream(stream) as st:
        buf = hipfile.Buffer(dev)
        sh = st.handle
        keep: list[object] = [None] * ops

        def sync_and_release() -> None:
            hip.hipStreamSynchronize(stream)
            for i in range(ops):
                keep[i] = None

        # hipfile: Buffer + int stream (upstream style), handles kept
        def run_hipfile_int(n: int) -> None:
            ra = fh.read_async
            for i in range(n):
                keep[i] = ra(buf, 4096, 0, 0, sh)

        def run_hipfile_stream(n: int) -> None:
            ra = fh.read_async
            for i in range(n):
                keep[i] = ra(buf, 4096, 0, 0, st)

        # HIP-Python objects as they come: a DeviceArray and a hipStream_t
        def run_hipfile_hip_objects(n: int) -> None:
            ra = fh.read_async
            for i in range(n):
                keep[i] = ra(dev, 4096, 0, 0, stream)

        # ctypes: direct call, slots allocated beforehand
        lib = ctypes.CDLL(lib_path)
        fn = lib.hipFileReadAsync
        fn.restype = ctypes.c_int64  # the 8-byte hipFileError_t comes back in rax
        fn.argtypes = [ctypes.c_void_p] * 7
        slots = (ctypes.c_int64 * (4 * ops))()
        base = ctypes.addressof(slots)
        handle, bufp = fh.handle, int(dev)

        def run_ctypes(n: int) -> None:
            for i in range(n):
                s = base + 32 * i
                slots[4 * i] = 4096
                slots[4 * i + 1] = 0
                slots[4 * i + 2] = 0
                fn(handle, bufp, s, s + 8, s + 16, s + 24, sh)

        ms = build_member_slots(tmp)
        ms.load(lib_path.encode())  # type: ignore[attr-defined]
        ref_file = ms.File(handle)  # type: ignore[attr-defined]

        def run_member_slots(n: int) -> None:
            ra = ref_file.read_async
            for i in range(n):
                keep[i] = ra(buf, 4096, 0, 0, sh)

        cases = (("hipfile read_async (Buffer, int stream)", run_hipfile_int),
                 ("hipfile read_async (Buffer, Stream)", run_hipfile_stream),
                 ("hipfile read_async (DeviceArray, hipStream_t)", run_hipfile_hip_objects),
                 ("member-slot floor (unsafe reference design)", run_member_slots),
                 ("ctypes hipFileReadAsync, preallocated slots", run_ctypes))
        for _, run in cases:  # warm up: pool pages, symbol lookup
            run(ops)
            sync_and_release()
        samples: dict[str, list[float]] = {name: [] for name, _ in cases}
        for _ in range(repeats):  # interleaved, so drift hits every case alike
            for name, run in cases:
                t0 = time.perf_counter_ns()
                run(ops)
                samples[name].append((time.perf_counter_ns() - t0) / ops)
                sync_and_release()
        results = {name: statistics.median(v) for name, v in samples.items()}
        keep.clear()
    hip.hipStreamSynchronize(stream)
    hip.hipStreamDestroy(stream)
    hip.hipFree(dev)
    hipfile.trim_pool()

    print(f"library: {lib_path} ({args.library}); {ops} ops x {repeats} repeats; "
          f"python {sys.version.split()[0]}")
    ref = results["ctypes hipFileReadAsync, preallocated slots"]
    floor = results["member-slot floor (unsafe reference design)"]
    for name, ns in results.items():
        print(f"  {name:46s} median {ns / 1000:7.3f} us/op   "
              f"vs ctypes {ns / ref:5.2f}   vs floor {ns / floor:5.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
