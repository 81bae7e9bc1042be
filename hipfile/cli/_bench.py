"""The ``bench`` command of ``hipfile``: read/write throughput over I/O kinds, sizes,
thread counts and task sizes."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TextIO

from hipfile.cli._info import _human, _platform

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
    return int(call(job.buffer, job.size, 0, task_size=job.task_size,
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
    from hipfile.engine import _wait_all

    return _wait_all(call(job.buffer, ranges, job.stream, task_size=job.task_size))


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
    "pread": IOKind(_io_pread, "FileHandle.pread/pwrite as a program calls them: tasks of "
                    "--task-size (device memory: on the engine's threads, defaults."
                    "engine_threads)", uses_task_size=True),
    "pool": IOKind(_io_pread, "FileHandle.pread/pwrite given an executor: tasks of "
                   "--task-size on a pool of --threads threads, each hipFileRead/"
                   "hipFileWrite calls", uses_threads=True, uses_task_size=True),
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


#: The benchmark's file is written in chunks of this size, so that Ctrl-C acts
#: between two chunks, and flushed to the disk every _FILL_SYNC bytes, so
#: that no flush at the end (which Ctrl-C cannot cut short) lasts long.
_FILL_CHUNK = 1 << 20
_FILL_SYNC = 64 << 20


class BenchRefused(Exception):
    """The benchmark cannot run as asked (too little device memory or free
    disk space); nothing was written. Its message is the one line
    ``hipfile bench`` prints."""


def _approx(n: int) -> str:
    """``n`` bytes to one decimal in the largest binary unit that fits."""
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} B"


def _device_memory() -> tuple[int, int]:
    """``(free, total)`` bytes of the current device's memory."""
    from hipfile._lib import _hip

    hip: Any = _hip.hip
    free, total = _hip.check(hip.hipMemGetInfo(), "hipMemGetInfo")
    return int(free), int(total)


def preflight(sizes: list[int], folder: str | None) -> None:
    """Check, before anything is written, that the largest of ``sizes``
    fits in the device's free memory (``hipMemGetInfo``) and in the free
    space of ``folder`` (``os.statvfs``; None: the temporary folder).

    Raises
    ------
    BenchRefused
        It does not fit; the message says what is free.
    """
    biggest = max(sizes)
    free, total = _device_memory()
    if biggest > free:
        raise BenchRefused(
            f"--size {_human(biggest)} does not fit in the device's memory ({_approx(free)} "
            f"free of {_approx(total)}); give a smaller --size")
    where = folder if folder is not None else tempfile.gettempdir()
    st = os.statvfs(where)
    space = st.f_bavail * st.f_frsize
    if biggest > space:
        raise BenchRefused(
            f"--size {_human(biggest)} does not fit in the free space of {where} "
            f"({_approx(space)} free); give a smaller --size or another --path")


def _fill(path: str, size: int, log: TextIO | None = None) -> None:
    """A file of ``size`` bytes of incompressible data, written in chunks
    of :data:`_FILL_CHUNK` (Ctrl-C acts between two) and flushed every
    :data:`_FILL_SYNC` bytes; progress goes to ``log`` (None: quiet): one
    line updated in place on a terminal, else a line per quarter for files
    of 256 MiB and more."""
    block = os.urandom(_FILL_CHUNK)
    view = memoryview(block)
    tty = log is not None and log.isatty()
    step = size // 4 if log is not None and not tty and size >= (256 << 20) else 0
    shown = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        done = 0
        synced = 0
        while done < size:
            n = min(size - done, len(block))
            done += os.write(fd, view[:n])
            if done - synced >= _FILL_SYNC:
                os.fdatasync(fd)
                synced = done
                if tty:
                    assert log is not None
                    print(f"\rwriting the benchmark's file: {_approx(done)} of "
                          f"{_approx(size)}", end="", file=log, flush=True)
            if step and done - shown >= step and done < size:
                assert log is not None
                shown = done
                print(f"writing the benchmark's file: {_approx(done)} of {_approx(size)}",
                      file=log, flush=True)
        os.fsync(fd)
        if tty:
            assert log is not None
            print("\r\033[K", end="", file=log, flush=True)
    finally:
        os.close(fd)


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
    from hipfile import defaults
    from hipfile._lib import _hip

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
    preflight(args.size, args.path)
    with _bench_folder(args.path) as folder, hipfile.Driver():
        report["library_version"] = ".".join(map(str, hipfile.get_version()))
        path = os.path.join(folder, "bench.bin")
        dev = check(hip.hipMalloc(biggest), "hipMalloc")
        stream = None
        try:
            _fill(path, biggest, None if args.quiet else sys.stderr)
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
    except BenchRefused as exc:
        print(f"hipfile bench: {exc}", file=sys.stderr)
        return 1
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
