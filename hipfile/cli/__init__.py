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
import os
import sys
from collections.abc import Callable, Sequence

from hipfile.cli import _bench
from hipfile.cli._bench import BenchJob, IOKind, cmd_bench
from hipfile.cli._bench import run_bench as run_bench
from hipfile.cli._info import DIRECT_FILE_SYSTEMS as DIRECT_FILE_SYSTEMS
from hipfile.cli._info import FS_MAGIC as FS_MAGIC
from hipfile.cli._info import cmd_info
from hipfile.cli._info import info_report as info_report
from hipfile.cli._info import path_report as path_report

__all__ = ["IO_KINDS", "BenchJob", "IOKind", "build_parser", "main"]

#: The I/O kinds of ``hipfile bench --io``, by name (the dict ``bench`` looks them up in).
IO_KINDS: dict[str, IOKind] = _bench.IO_KINDS

# -- shared helpers ---------------------------------------------------------------------------


def _size(text: str) -> int:
    from hipfile.defaults import parse_size

    try:
        n = parse_size(text)
    except ValueError as exc:
        if text.strip().startswith("-"):   # a negative byte count
            with contextlib.suppress(ValueError):
                parse_size(text.strip()[1:])
                raise argparse.ArgumentTypeError(f"{text!r} must be positive") from None
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


def _seconds(text: str) -> float:
    try:
        t = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not t >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0")
    return t


# -- stats ------------------------------------------------------------------------------------


def cmd_stats(args: argparse.Namespace) -> int:
    from hipfile import stats
    from hipfile.errors import HipFileLibraryError, HipFileSymbolNotFound

    try:
        text = stats.report(args.pid, timeout=args.timeout)
    except TimeoutError:
        print(f"hipfile stats: process {args.pid} served no statistics within "
              f"{args.timeout:g} s. Is it a program using hipFile, with statistics turned on? "
              "Run the command again, or give a longer --timeout.", file=sys.stderr)
        return 1
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
    from hipfile import __version__

    parser = argparse.ArgumentParser(
        prog="hipfile",
        description="hipfile: GPU-direct file I/O for ROCm. Reports what this machine "
                    "offers, measures throughput and prints library statistics.")
    parser.add_argument("--version", action="version", version=f"hipfile {__version__}",
                        help="print the package's version and exit")
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
    stats.add_argument("--timeout", type=_seconds, default=None, metavar="SECONDS",
                       help="give up when the process has served no statistics after "
                            "this long (default: wait until it does or exits; Ctrl-C "
                            "stops the wait)")
    stats.set_defaults(func=cmd_stats)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hipfile`` console script and ``python -m hipfile``.

    Returns
    -------
    int
        The exit status: 0 on success, 1 on failure, 2 for bad usage, a
        missing feature or a ``HIPFILE_PLATFORM`` that names no built
        platform, 130 when interrupted, 141 when the reader of the output
        went away (``hipfile info | head -1``: the rest is dropped quietly,
        as shell tools do on ``SIGPIPE``).
    """
    args = build_parser().parse_args(argv)
    from hipfile import platforms

    if platforms.environment_error is not None:
        value = os.environ.get("HIPFILE_PLATFORM", "").strip()
        print(f"hipfile {args.command}: HIPFILE_PLATFORM={value}: "
              f"{platforms.environment_error}", file=sys.stderr)
        return 2
    if args.command == "bench":
        from hipfile import defaults

        if args.threads is None:
            args.threads = [defaults.num_threads()]
        if args.task_size is None:
            args.task_size = [defaults.task_size()]
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        status = func(args)
        sys.stdout.flush()          # a closed pipe shows here, not at exit
        return status
    except BrokenPipeError:
        # the reader stopped reading: drop the rest, and keep the flush at
        # exit from reporting the same pipe again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 141
    except KeyboardInterrupt:
        # Ctrl-C ends a command quietly, as it ends a shell tool
        print(f"hipfile {args.command}: interrupted", file=sys.stderr)
        return 130
