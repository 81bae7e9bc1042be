"""The ``hipfile`` command: ``info``, ``bench`` and ``stats``.

Run as ``hipfile <command>`` (the console script) or ``python -m hipfile
<command>``; ``--help`` on every command lists its options.

``info``
    What this machine offers, in the spirit of NVIDIA's ``gdscheck``: the
    active platform, the library and its version, HIP-Python, the devices,
    the driver properties, and for each ``--path`` folder the file system,
    O_DIRECT support and alignment, and whether hipFile's direct path can be
    used there.
``bench``
    Read/write throughput in the spirit of ``gdsio``, over I/O kinds (see
    :data:`IO_KINDS`), sizes, thread counts and task sizes, on files it
    creates in ``--path`` and removes afterwards.
``stats``
    The statistics report of a process using hipFile, where the library
    offers one.

I/O kinds of ``bench`` are entries of :data:`IO_KINDS`: a name, a help line
and a function that moves ``size`` bytes once and returns the bytes moved.
Adding an entry adds a choice to ``--io``.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import errno
import importlib
import json
import mmap
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

__all__ = ["IO_KINDS", "BenchJob", "IOKind", "build_parser", "main"]

# -- shared helpers ---------------------------------------------------------------------------


def _size(text: str) -> int:
    from hipfile.defaults import parse_size

    try:
        n = parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return n


def _positive(text: str) -> int:
    try:
        n = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return n


def _human(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def _platform() -> tuple[str, bool]:
    """(name, is a test platform)."""
    from hipfile import platforms

    name = platforms.active()
    if name is None:
        return "rocm", False
    return name, name != "rocm"


# -- info -------------------------------------------------------------------------------------

#: statfs f_type magic numbers (linux/magic.h and file system sources).
FS_MAGIC: dict[int, str] = {
    0xEF53: "ext2/3/4",
    0x58465342: "xfs",
    0x9123683E: "btrfs",
    0x01021994: "tmpfs",
    0x858458F6: "ramfs",
    0x6969: "nfs",
    0xFF534D42: "cifs",
    0xFE534D42: "smb2",
    0x794C7630: "overlayfs",
    0x65735546: "fuse",
    0x0BD00BD0: "lustre",
    0x47504653: "gpfs",
    0x19830326: "beegfs",
    0x2FC12FC1: "zfs",
    0xF2F52010: "f2fs",
    0x00C36400: "ceph",
    0x73717368: "squashfs",
    0x4D44: "vfat",
    0x5346544E: "ntfs",
    0x9FA0: "proc",
    0x62656572: "sysfs",
}

#: File systems on which hipFile's direct path can be used (ext4 in ordered
#: data mode, xfs); elsewhere it uses its buffered fallback.
DIRECT_FILE_SYSTEMS = ("ext4", "xfs")


class _Statfs(ctypes.Structure):
    # struct statfs on 64-bit Linux: f_type first, then f_bsize, ...
    _fields_ = [("f_type", ctypes.c_long), ("f_bsize", ctypes.c_long),
                ("_rest", ctypes.c_byte * 104)]


def _statfs_type(path: str) -> int | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        buf = _Statfs()
        if libc.statfs(os.fsencode(path), ctypes.byref(buf)) != 0:
            return None
        return int(buf.f_type) & 0xFFFFFFFF
    except (OSError, AttributeError):
        return None


def _mount_of(path: str) -> tuple[str, str, list[str]] | None:
    """(mount point, fs type name, options) of the mount holding ``path``."""
    best: tuple[str, str, list[str]] | None = None
    real = os.path.realpath(path)
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 4:
                    continue
                mnt = parts[1].replace("\\040", " ")
                inside = real == mnt or real.startswith(mnt.rstrip("/") + "/")
                if inside and (best is None or len(mnt) >= len(best[0])):
                    best = (mnt, parts[2], parts[3].split(","))
    except OSError:
        return None
    return best


def _logical_block_size(path: str) -> int | None:
    dev = os.stat(path).st_dev
    base = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    for cand in (base / "queue" / "logical_block_size",
                 base / ".." / "queue" / "logical_block_size"):
        try:
            return int(cand.read_text().strip())
        except (OSError, ValueError):
            continue
    return None


def _probe_o_direct(folder: str) -> dict[str, Any]:
    """Open a temporary file with O_DIRECT and find the smallest write
    alignment that works."""
    o_direct = getattr(os, "O_DIRECT", 0)
    out: dict[str, Any] = {"supported": False, "alignment": None, "error": None}
    if not o_direct:
        out["error"] = "O_DIRECT is not available on this system"
        return out
    fd, name = tempfile.mkstemp(prefix=".hipfile-odirect-", dir=folder)
    os.close(fd)
    try:
        try:
            fd = os.open(name, os.O_RDWR | o_direct)
        except OSError as exc:
            out["error"] = f"open with O_DIRECT: {exc.strerror} (errno {exc.errno})"
            return out
        try:
            with mmap.mmap(-1, 1 << 16) as page:  # page-aligned memory
                view = memoryview(page)
                for align in (512, 1024, 2048, 4096, 8192, 16384, 65536):
                    try:
                        os.pwrite(fd, view[:align], 0)
                    except OSError as exc:
                        if exc.errno != errno.EINVAL:
                            out["error"] = f"O_DIRECT write: {exc.strerror}"
                            return out
                        continue
                    out["supported"] = True
                    out["alignment"] = align
                    break
                view.release()
            if not out["supported"]:
                out["error"] = "O_DIRECT writes fail with EINVAL at every alignment up to 64 KiB"
        finally:
            os.close(fd)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)
    return out


def path_report(folder: str, platform: str) -> dict[str, Any]:
    """The ``--path`` part of ``hipfile info``: file system, O_DIRECT and
    whether hipFile's direct path is eligible (and why not)."""
    rep: dict[str, Any] = {"path": folder}
    if not os.path.isdir(folder):
        rep["error"] = "not a folder"
        rep["fast_path"] = {"eligible": False, "reasons": ["not a folder"]}
        return rep
    magic = _statfs_type(folder)
    mount = _mount_of(folder)
    fs = FS_MAGIC.get(magic, "unknown") if magic is not None else "unknown"
    if mount is not None and (fs == "ext2/3/4" or fs == "unknown"):
        fs = mount[1]
    rep["fs_type"] = fs
    rep["fs_magic"] = None if magic is None else f"0x{magic:x}"
    rep["mount_point"] = mount[0] if mount else None
    rep["mount_options"] = mount[2] if mount else []
    rep["logical_block_size"] = _logical_block_size(folder)
    try:
        rep["o_direct"] = _probe_o_direct(folder)
    except OSError as exc:
        rep["o_direct"] = {"supported": False, "alignment": None, "error": str(exc)}
    reasons = []
    if platform == "emulated":
        reasons.append("the emulated test platform moves data on the CPU (no GPU-direct path)")
    if not rep["o_direct"]["supported"]:
        reasons.append(f"O_DIRECT is not supported here ({rep['o_direct']['error']})")
    if fs not in DIRECT_FILE_SYSTEMS:
        reasons.append(f"file system {fs!r} is not one hipFile's direct path uses "
                       f"({', '.join(DIRECT_FILE_SYSTEMS)}); I/O goes through its "
                       "buffered fallback")
    elif fs == "ext4" and any(o.startswith("data=") and o != "data=ordered"
                              for o in rep["mount_options"]):
        reasons.append("ext4 is mounted without data=ordered")
    unsupported = os.environ.get("HIPFILE_UNSUPPORTED_FILE_SYSTEMS", "")
    if fs in {n.strip() for n in unsupported.replace(";", ",").split(",")}:
        reasons.append(f"HIPFILE_UNSUPPORTED_FILE_SYSTEMS lists {fs!r}")
    force = os.environ.get("HIPFILE_FORCE_COMPAT_MODE", "").strip().lower()
    if force and force not in ("0", "false", "no", "off"):
        reasons.append(f"HIPFILE_FORCE_COMPAT_MODE={force} forces the buffered fallback")
    rep["fast_path"] = {"eligible": not reasons, "reasons": reasons,
                        "note": "files must be opened with O_DIRECT "
                                "(hipfile.open(path, mode, direct=True))"}
    return rep


def _flag_names(flags: Any) -> list[str]:
    return [m.name for m in type(flags) if m.value and (flags & m) == m and m.name]


def info_report(paths: Sequence[str]) -> dict[str, Any]:
    """Everything ``hipfile info`` reports, as a JSON-ready dict. Parts
    that fail are reported with an ``error`` entry instead of raising."""
    import hipfile
    from hipfile import defaults
    from hipfile._lib import _hipfile
    from hipfile.errors import HipFileException, InternalError

    name, test = _platform()
    rep: dict[str, Any] = {
        "hipfile": hipfile.__version__,
        "platform": {"name": name, "test_platform": test,
                     "rocm_path": os.environ.get("ROCM_PATH")},
    }
    lib: dict[str, Any] = {}
    try:
        lib["path"] = _hipfile.load_library()
        lib["version"] = ".".join(map(str, hipfile.get_version()))
    except Exception as exc:
        lib["error"] = f"{type(exc).__name__}: {exc}"
    rep["library"] = lib

    try:
        from importlib.metadata import version

        rep["hip_python"] = version("hip-python")
    except Exception:
        rep["hip_python"] = None

    devices: dict[str, Any] = {}
    try:
        from hipfile import _hip

        check = _hip.check
        hip: Any = _hip.hip
        count = int(check(hip.hipGetDeviceCount(), "hipGetDeviceCount"))
        listed = []
        for i in range(count):
            props = check(hip.hipGetDeviceProperties(i), "hipGetDeviceProperties")
            dev_name = props.name
            if isinstance(dev_name, bytes):
                dev_name = dev_name.decode(errors="replace")
            listed.append({"index": i, "name": str(dev_name),
                           "total_memory": int(getattr(props, "totalGlobalMem", 0))})
        devices["count"] = count
        devices["devices"] = listed
        runtime = check(hip.hipRuntimeGetVersion(), "hipRuntimeGetVersion")
        devices["runtime_version"] = int(runtime)
    except Exception as exc:
        devices["error"] = f"{type(exc).__name__}: {exc}"
    rep["hip"] = devices

    driver: dict[str, Any] = {}
    if "error" not in lib:
        try:
            with hipfile.Driver():
                props = hipfile.driver_get_properties()
                driver["properties"] = dict(props)
                driver["status_flags"] = _flag_names(props.driver_status)
                driver["control_flags"] = _flag_names(props.driver_control)
                driver["feature_flags"] = _flag_names(props.features)
                driver["supports_async"] = hipfile.supports_async()
        except InternalError:
            driver["error"] = ("hipFileDriverGetProperties is not implemented by this "
                               "library (hipFileInternalError 5030)")
        except HipFileException as exc:
            driver["error"] = f"{type(exc).__name__}: {exc}"
    else:
        driver["error"] = "the library could not be loaded"
    rep["driver"] = driver
    rep["defaults"] = dict(defaults.items())
    rep["paths"] = [path_report(p, name) for p in paths]
    return rep


def _print_info(rep: dict[str, Any], out: TextIO) -> None:
    plat = rep["platform"]
    label = " (a TEST platform, not AMD's ROCm)" if plat["test_platform"] else ""
    print(f"hipfile {rep['hipfile']}", file=out)
    print(f"platform          : {plat['name']}{label}", file=out)
    print(f"ROCM_PATH         : {plat['rocm_path']}", file=out)
    lib = rep["library"]
    if "error" in lib:
        print(f"library           : NOT LOADED: {lib['error']}", file=out)
    else:
        print(f"library           : {lib['path']}", file=out)
        print(f"library version   : {lib['version']}", file=out)
    print(f"HIP-Python        : {rep['hip_python']}", file=out)
    hipinfo = rep["hip"]
    if "error" in hipinfo:
        print(f"devices           : unavailable: {hipinfo['error']}", file=out)
    else:
        print(f"HIP runtime       : {hipinfo['runtime_version']}", file=out)
        for d in hipinfo["devices"]:
            print(f"device {d['index']:<11}: {d['name']}", file=out)
    drv = rep["driver"]
    if "error" in drv:
        print(f"driver properties : unavailable: {drv['error']}", file=out)
    else:
        for key, value in drv["properties"].items():
            print(f"  {key:<28}: {value}", file=out)
        for key in ("status_flags", "control_flags", "feature_flags"):
            print(f"  {key:<28}: {', '.join(drv[key]) or '-'}", file=out)
        print(f"  {'supports_async':<28}: {drv['supports_async']}", file=out)
    print("defaults          :", ", ".join(f"{k}={v}" for k, v in rep["defaults"].items()),
          file=out)
    for p in rep["paths"]:
        print(f"path {p['path']}", file=out)
        if "error" in p:
            print(f"  error             : {p['error']}", file=out)
            continue
        od = p["o_direct"]
        print(f"  file system       : {p['fs_type']} (magic {p['fs_magic']}, "
              f"mounted at {p['mount_point']})", file=out)
        print(f"  logical block     : {p['logical_block_size']}", file=out)
        direct = (f"yes, alignment {od['alignment']} B" if od["supported"]
                  else f"no: {od['error']}")
        print(f"  O_DIRECT          : {direct}", file=out)
        fast = p["fast_path"]
        verdict = "eligible" if fast["eligible"] else "not eligible"
        print(f"  direct path       : {verdict}", file=out)
        for reason in fast["reasons"]:
            print(f"    - {reason}", file=out)


def cmd_info(args: argparse.Namespace) -> int:
    rep = info_report(args.path or [])
    if args.json:
        json.dump(rep, sys.stdout, indent=2, default=str)
        print()
    else:
        _print_info(rep, sys.stdout)
    return 0 if "error" not in rep["library"] else 1


# -- bench ------------------------------------------------------------------------------------


@dataclass
class BenchJob:
    """What an I/O kind's function gets: an open file, a registered device
    buffer, and the parameters of one measurement."""

    fh: Any
    buffer: Any
    size: int
    write: bool
    threads: int
    task_size: int
    executor: ThreadPoolExecutor | None = None
    stream: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class IOKind:
    """One ``--io`` choice of ``hipfile bench``.

    ``run(job)`` moves ``job.size`` bytes once (read or write as
    ``job.write`` says) and returns the bytes moved; ``uses_threads`` and
    ``uses_task_size`` say which sweep parameters matter (others are
    reported as ``null``); ``needs_stream`` asks for a registered stream in
    ``job.stream``.
    """

    run: Callable[[BenchJob], int]
    help: str
    uses_threads: bool = False
    uses_task_size: bool = False
    needs_stream: bool = False


def _io_sync(job: BenchJob) -> int:
    done = 0
    call = job.fh.write if job.write else job.fh.read
    while done < job.size:
        n = int(call(job.buffer, job.size - done, done, done))
        if n <= 0:
            break
        done += n
    return done


def _io_pread(job: BenchJob) -> int:
    call = job.fh.pwrite if job.write else job.fh.pread
    return int(call(job.buffer, job.size, 0, 0, task_size=job.task_size,
                    executor=job.executor).result())


def _spans(size: int, task: int) -> list[tuple[int, int]]:
    return [(off, min(task, size - off)) for off in range(0, size, task)]


def _io_async(job: BenchJob) -> int:
    call = job.fh.write_async if job.write else job.fh.read_async
    handles = []
    try:
        for off, n in _spans(job.size, job.task_size):
            handles.append(call(job.buffer, n, off, off, job.stream))
        return sum(int(h.wait()) for h in handles)
    except BaseException:
        # let the stream pass what was submitted before the buffer goes away
        for h in handles:
            with contextlib.suppress(Exception):
                h.wait()
        raise


def _io_stream(job: BenchJob) -> int:
    call = job.fh.pwrite_async_ranges if job.write else job.fh.pread_async_ranges
    ranges = [(n, off, off) for off, n in _spans(job.size, job.task_size)]
    handles = call(job.buffer, ranges, job.stream, task_size=job.task_size)
    total = 0
    first: BaseException | None = None
    for h in handles:          # every range is waited for before an error is raised
        try:
            total += int(h.wait())
        except Exception as exc:
            if first is None:
                first = exc
    if first is not None:
        raise first
    return total


def _io_batch(job: BenchJob) -> int:
    import hipfile
    from hipfile import defaults

    spans = _spans(job.size, job.task_size)
    per_batch = min(len(spans), defaults.batch_max_entries())
    total = 0
    with hipfile.BatchIO(per_batch) as batch:
        add = batch.write if job.write else batch.read
        for first in range(0, len(spans), per_batch):
            for off, n in spans[first:first + per_batch]:
                add(job.fh, job.buffer, n, off, off)
            batch.submit()
            for event in batch.wait():
                err = event.error()
                if err is not None:
                    raise err
                total += event.result
    return total


#: The I/O kinds of ``hipfile bench --io``, by name.
IO_KINDS: dict[str, IOKind] = {
    "sync": IOKind(_io_sync, "FileHandle.read/write: one synchronous call after another"),
    "pread": IOKind(_io_pread, "FileHandle.pread/pwrite: tasks of --task-size on a pool of "
                    "--threads threads", uses_threads=True, uses_task_size=True),
    "async": IOKind(_io_async, "read_async/write_async: one stream-ordered operation per "
                    "--task-size chunk on a registered stream", uses_task_size=True,
                    needs_stream=True),
    "batch": IOKind(_io_batch, "BatchIO: one entry per --task-size chunk, in batches of "
                    "defaults.batch_max_entries", uses_task_size=True),
    "stream": IOKind(_io_stream, "pread_async_ranges/pwrite_async_ranges: the stream-ordered "
                     "engine, one range per --task-size chunk, all submitted at once on a "
                     "stream (engine threads: defaults.engine_threads)", uses_task_size=True,
                     needs_stream=True),
}


def _progress(total: int, enabled: bool) -> Any:
    """A tqdm bar when tqdm is installed and stderr is a terminal, else None
    (plain lines are printed instead)."""
    if not enabled or not sys.stderr.isatty():
        return None
    try:
        tqdm = importlib.import_module("tqdm").tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="run", file=sys.stderr, leave=False)


@contextlib.contextmanager
def _bench_folder(parent: str | None) -> Iterator[str]:
    """A fresh folder for the benchmark's files, removed on the way out
    (also on Ctrl-C and SIGTERM)."""
    folder = tempfile.mkdtemp(prefix="hipfile-bench-", dir=parent)

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        old = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread
        old = None
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if old is not None:
            signal.signal(signal.SIGTERM, old)


def _fill(path: str, size: int) -> None:
    """A file of ``size`` bytes of incompressible data."""
    block = os.urandom(1 << 20)
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n
        f.flush()
        os.fsync(f.fileno())


def _runs(args: argparse.Namespace) -> list[dict[str, Any]]:
    modes = ["read", "write"] if args.mode == "both" else [args.mode]
    runs = []
    for size in args.size:
        for kind_name in args.io:
            kind = IO_KINDS[kind_name]
            threads = args.threads if kind.uses_threads else [None]
            tasks = args.task_size if kind.uses_task_size else [None]
            for mode in modes:
                for t in threads:
                    for ts in tasks:
                        runs.append({"mode": mode, "io": kind_name, "size": size,
                                     "threads": t, "task_size": ts})
    return runs


def run_bench(args: argparse.Namespace, log: TextIO) -> dict[str, Any]:
    """Run every combination of the sweep; returns the JSON-ready report."""
    import hipfile
    from hipfile import _hip, defaults

    check = _hip.check
    hip: Any = _hip.hip
    name, _ = _platform()
    emulated = name == "emulated"
    runs = _runs(args)
    report: dict[str, Any] = {
        "platform": name, "emulated": emulated,
        "library_version": None, "direct": args.direct, "repeat": args.repeat,
        "results": [],
    }
    flags_direct = getattr(os, "O_DIRECT", 0) if args.direct else 0
    biggest = max(args.size)
    bar = _progress(len(runs) * args.repeat, enabled=not args.quiet)
    tag = " [EMULATED]" if emulated else ""
    with _bench_folder(args.path) as folder, hipfile.Driver():
        report["library_version"] = ".".join(map(str, hipfile.get_version()))
        path = os.path.join(folder, "bench.bin")
        _fill(path, biggest)
        dev = check(hip.hipMalloc(biggest), "hipMalloc")
        stream = None
        try:
            if any(IO_KINDS[k].needs_stream for k in args.io):
                stream = check(hip.hipStreamCreate(), "hipStreamCreate")
            with hipfile.FileHandle(path, os.O_RDWR | flags_direct) as fh, \
                    hipfile.Buffer(dev, biggest) as buf, \
                    contextlib.ExitStack() as stack:
                st = stack.enter_context(hipfile.Stream(stream)) if stream is not None else None
                for i, run in enumerate(runs, 1):
                    kind = IO_KINDS[run["io"]]
                    threads = run["threads"] or defaults.num_threads()
                    task = run["task_size"] or defaults.task_size()
                    job = BenchJob(fh=fh, buffer=buf, size=run["size"],
                                   write=run["mode"] == "write", threads=threads,
                                   task_size=task, stream=st)
                    times = []
                    moved = 0
                    with ThreadPoolExecutor(threads, thread_name_prefix="hipfile-bench") \
                            if kind.uses_threads else contextlib.nullcontext() as pool:
                        job.executor = pool
                        for _ in range(args.repeat):
                            t0 = time.perf_counter()
                            moved = kind.run(job)
                            times.append(time.perf_counter() - t0)
                            if bar is not None:
                                bar.update(1)
                    if moved != run["size"]:
                        raise RuntimeError(f"{run['io']} {run['mode']} moved {moved} of "
                                           f"{run['size']} bytes")
                    best = min(times)
                    result = dict(run, emulated=emulated, seconds=times,
                                  best_gib_s=run["size"] / best / (1 << 30),
                                  mean_gib_s=run["size"] / statistics.mean(times) / (1 << 30))
                    report["results"].append(result)
                    if bar is None and not args.quiet:
                        print(f"[{i}/{len(runs)}] {_result_line(result)}{tag}", file=log,
                              flush=True)
        finally:
            if bar is not None:
                bar.close()
            if stream is not None:
                check(hip.hipStreamDestroy(stream), "hipStreamDestroy")
            check(hip.hipFree(dev), "hipFree")
    return report


def _result_line(r: dict[str, Any]) -> str:
    threads = "-" if r["threads"] is None else str(r["threads"])
    task = "-" if r["task_size"] is None else _human(r["task_size"])
    return (f"{r['mode']:<5} {r['io']:<6} size={_human(r['size']):<9} threads={threads:<3} "
            f"task={task:<8} best={r['best_gib_s']:.3f} GiB/s mean={r['mean_gib_s']:.3f} GiB/s")


def cmd_bench(args: argparse.Namespace) -> int:
    name, _ = _platform()
    if name == "emulated" and not args.allow_emulated:
        print("hipfile bench: the emulated test platform is active; its figures measure a "
              "CPU emulation, not GPU-direct I/O. Pass --allow-emulated to run anyway "
              "(every figure is then labelled as emulated).", file=sys.stderr)
        return 2
    if args.path is not None and not os.path.isdir(args.path):
        print(f"hipfile bench: --path {args.path!r} is not a folder", file=sys.stderr)
        return 2
    from hipfile.errors import HipFileException

    try:
        report = run_bench(args, sys.stderr if args.json else sys.stdout)
    except KeyboardInterrupt:
        print("hipfile bench: interrupted; its files were removed", file=sys.stderr)
        return 130
    except (OSError, ValueError, RuntimeError, HipFileException) as exc:
        print(f"hipfile bench: failed ({type(exc).__name__}: {exc}); its files were removed",
              file=sys.stderr)
        return 1
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        tag = " [EMULATED]" if report["emulated"] else ""
        print(f"platform {report['platform']}{tag}, library {report['library_version']}, "
              f"O_DIRECT {'on' if report['direct'] else 'off'}, best of {report['repeat']}")
        for r in report["results"]:
            print(_result_line(r) + tag)
    return 0


# -- stats ------------------------------------------------------------------------------------


def cmd_stats(args: argparse.Namespace) -> int:
    from hipfile import stats
    from hipfile.errors import HipFileLibraryError, HipFileSymbolNotFound

    try:
        text = stats.report(args.pid)
    except HipFileSymbolNotFound as e:
        print(f"hipfile stats: this libhipfile has no statistics support ({e})",
              file=sys.stderr)
        return 2
    except HipFileLibraryError as e:  # no library at all
        print(f"hipfile stats: {e}", file=sys.stderr)
        return 2
    except stats.StatsError as e:
        print(f"hipfile stats: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


# -- the parser -------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The ``hipfile`` argument parser (every command and option has help)."""
    parser = argparse.ArgumentParser(
        prog="hipfile",
        description="hipfile: GPU-direct file I/O for ROCm. Reports what this machine "
                    "offers, measures throughput and prints library statistics.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    info = sub.add_parser("info", help="report the platform, library, devices, driver "
                          "properties and, per folder, direct-path eligibility",
                          description="Report the active platform, the hipFile library and "
                          "its version, HIP-Python, the devices, the driver properties and, "
                          "for each --path folder, the file system, O_DIRECT support and "
                          "alignment, and whether hipFile's direct path is eligible there.")
    info.add_argument("--json", action="store_true", help="print the report as JSON")
    info.add_argument("--path", action="append", metavar="DIR",
                      help="a folder to check (repeat for several)")
    info.set_defaults(func=cmd_info)

    bench = sub.add_parser(
        "bench", help="measure read/write throughput",
        description="Measure read and write throughput over I/O kinds, sizes, thread "
                    "counts and task sizes, on a file created in --path and removed "
                    "afterwards. Refuses the emulated platform unless --allow-emulated.",
        epilog="I/O kinds: " + "; ".join(f"{k}: {v.help}" for k, v in IO_KINDS.items()))
    bench.add_argument("--mode", choices=("read", "write", "both"), default="both",
                       help="what to measure (default: both)")
    bench.add_argument("--io", nargs="+", choices=sorted(IO_KINDS), default=["sync", "pread"],
                       metavar="KIND", help="I/O kinds to run, among "
                       f"{', '.join(sorted(IO_KINDS))} (default: sync pread)")
    bench.add_argument("--size", nargs="+", type=_size, default=[64 << 20], metavar="SIZE",
                       help="bytes per transfer, with units (256M, 1G; default: 64M)")
    bench.add_argument("--threads", nargs="+", type=_positive, default=None, metavar="N",
                       help="thread counts for pread (default: defaults.num_threads)")
    bench.add_argument("--task-size", nargs="+", type=_size, default=None, metavar="SIZE",
                       help="task sizes for pread, async and batch "
                            "(default: defaults.task_size)")
    bench.add_argument("--repeat", type=_positive, default=3,
                       help="measurements per combination; the best and the mean are "
                            "reported (default: 3)")
    bench.add_argument("--path", metavar="DIR", default=None,
                       help="folder for the benchmark's file (default: the temporary folder)")
    bench.add_argument("--direct", action="store_true",
                       help="open the file with O_DIRECT (hipFile's direct path)")
    bench.add_argument("--json", action="store_true",
                       help="print the results as JSON (progress goes to stderr)")
    bench.add_argument("--quiet", action="store_true", help="no progress output")
    bench.add_argument("--allow-emulated", action="store_true",
                       help="run on the emulated test platform; every figure is labelled "
                            "as emulated")
    bench.set_defaults(func=cmd_bench)

    stats = sub.add_parser("stats", help="print the statistics of a process using hipFile",
                           description="Print the statistics report of a process using "
                           "hipFile, where the library offers statistics.")
    stats.add_argument("pid", type=_positive, help="process id")
    stats.set_defaults(func=cmd_stats)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hipfile`` console script and ``python -m hipfile``.

    Returns
    -------
    int
        The exit status: 0 on success, 1 on failure, 2 for bad usage or a
        missing feature, 130 when interrupted.
    """
    args = build_parser().parse_args(argv)
    if args.command == "bench":
        from hipfile import defaults

        if args.threads is None:
            args.threads = [defaults.num_threads()]
        if args.task_size is None:
            args.task_size = [defaults.task_size()]
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)
