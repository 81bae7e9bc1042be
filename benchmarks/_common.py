"""What every benchmark shares: an explicit platform choice and temporary
folders that are removed on the way out."""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

PLATFORMS = ("emulated", "cuda", "rocm")


def add_platform_argument(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--platform", choices=PLATFORMS, default=None,
                    help="platform to run on: a test platform (emulated, cuda) or rocm "
                         "(default: HIPFILE_PLATFORM, else the ROCm install of ROCM_PATH "
                         "or /opt/rocm; without any of them the benchmark stops)")


def add_common_arguments(ap: argparse.ArgumentParser, *, data: str | None = None,
                         allow_emulated: str | None = None, repeats: int | None = None) -> None:
    """Add ``--platform``; with ``data`` (what the benchmark writes, such as
    ``"the KV file"``), ``--dir`` for its folder; with ``allow_emulated`` (its
    help text), the ``--allow-emulated`` switch; with ``repeats`` (its
    default), ``--repeats``, the timed runs of each case (interleaved across
    cases where the benchmark says so), whose medians are reported."""
    if repeats is not None:
        ap.add_argument("--repeats", type=int, default=repeats,
                        help=f"timed runs per case; medians are reported (default: {repeats})")
    if data is not None:
        ap.add_argument("--dir", default=None,
                        help=f"folder for {data}, on disk, not tmpfs (default: the "
                             "temporary folder)")
    if allow_emulated is not None:
        ap.add_argument("--allow-emulated", action="store_true", help=allow_emulated)
    add_platform_argument(ap)


def _rocm_installed() -> bool:
    root = Path(os.environ.get("ROCM_PATH") or "/opt/rocm")
    return (root / "lib" / "libamdhip64.so").exists()


def require_platform(choice: str | None) -> None:
    """Exit with status 2 when no platform was chosen and no ROCm install is
    found: a benchmark never falls back to an emulator silently."""
    if not choice and not os.environ.get("HIPFILE_PLATFORM") and not _rocm_installed():
        print(f"{Path(sys.argv[0]).name}: no ROCm install found (ROCM_PATH unset or without "
              "lib/libamdhip64.so, no /opt/rocm); pass --platform emulated (or cuda), or set "
              "HIPFILE_PLATFORM, to run on a test platform", file=sys.stderr)
        raise SystemExit(2)


def select_platform(choice: str | None) -> ModuleType:
    """Activate the chosen platform (see :func:`require_platform`), import
    hipfile and print which platform is active."""
    require_platform(choice)
    if choice:
        os.environ["HIPFILE_PLATFORM"] = choice
    os.environ["HIPFILE_PLATFORM_QUIET"] = "1"  # said below, once, on stdout
    import hipfile

    name = hipfile.platforms.active() or "rocm"
    if name in ("emulated", "cuda"):
        print(f"platform: {name} (a test platform, not AMD's ROCm; "
              f"ROCM_PATH={os.environ.get('ROCM_PATH')})", flush=True)
    else:
        print(f"platform: rocm (ROCM_PATH={os.environ.get('ROCM_PATH') or '/opt/rocm'})",
              flush=True)
    return hipfile


def temp_folder(parent: str | None = None) -> str:
    """A new folder, removed with its contents when the process exits
    (also after an error or Ctrl-C)."""
    folder = tempfile.mkdtemp(prefix="hipfile-bench-", dir=parent)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def drop_page_cache(path: str) -> None:
    """Drop the file from the page cache (and all clean caches when root)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
    except OSError:
        pass


def write_random_file(path: str, total: int, chunk: int) -> None:
    """Write ``total`` bytes to ``path``: one random block of at most 64 MiB
    (and at most ``chunk``), repeated."""
    with open(path, "wb") as f:
        block = os.urandom(min(chunk, 64 << 20))
        for _ in range(total // len(block)):
            f.write(block)


def hip_check(res: Any) -> Any:
    """Assert that a HIP-Python call succeeded; return its value, if any."""
    from hip import hip

    err = res[0] if isinstance(res, tuple) else res
    assert err == hip.hipError_t.hipSuccess, res
    return res[1] if isinstance(res, tuple) and len(res) > 1 else None


class LayerCompute:
    """A device buffer of ``total`` bytes (``chunk`` per layer), an I/O
    stream, a compute stream and each layer's compute on the latter: bf16
    matrix products with PyTorch where it has a GPU, else a device memset.
    ``close`` frees what was allocated through HIP."""

    def __init__(self, total: int, chunk: int, dim: int, matmuls: int) -> None:
        from hip import hip

        self._hip = hip
        try:
            import torch

            self.uses_torch = torch.cuda.is_available()
        except ImportError:
            self.uses_torch = False
        self.sync_all: Callable[[], None]
        if self.uses_torch:
            kv = torch.empty(total, dtype=torch.uint8, device="cuda")
            io_t, comp_t = torch.cuda.Stream(), torch.cuda.Stream()
            self.io_stream, self.compute_stream = io_t.cuda_stream, comp_t.cuda_stream
            n = dim
            weight = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
            rows = min(chunk // 2, n * n) // n
            out = torch.empty(rows, n, dtype=torch.bfloat16, device="cuda")

            def compute(layer: int) -> None:
                with torch.cuda.stream(comp_t):
                    a = kv[layer * chunk:layer * chunk + rows * n * 2].view(torch.bfloat16)
                    for _ in range(matmuls):
                        torch.matmul(a.view(rows, n), weight, out=out)

            self.kind = f"torch {torch.__version__} bf16 matmul ({rows}x{n} @ {n}x{n}) x{matmuls}"
            self.kv: Any = kv
            self.sync_all = torch.cuda.synchronize
        else:
            self.kv = hip_check(hip.hipMalloc(total))
            self.io_stream = int(hip_check(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking)))
            self.compute_stream = int(hip_check(
                hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking)))
            scratch = self._scratch = hip_check(hip.hipMalloc(chunk))
            comp_h = self.compute_stream

            def compute(layer: int) -> None:
                for _ in range(matmuls):
                    hip_check(hip.hipMemsetAsync(scratch, layer & 0xFF, chunk, comp_h))

            self.kind = "device memset (no GPU framework)"

            def sync_all() -> None:
                hip_check(hip.hipDeviceSynchronize())

            self.sync_all = sync_all
        self.compute: Callable[[int], None] = compute

    def close(self) -> None:
        """Destroy the streams and free the memory allocated through HIP."""
        if not self.uses_torch:
            hip = self._hip
            hip_check(hip.hipStreamDestroy(self.io_stream))
            hip_check(hip.hipStreamDestroy(self.compute_stream))
            hip_check(hip.hipFree(self.kv))
            hip_check(hip.hipFree(self._scratch))


def switched(setter: Callable[[Any], Any], value: Any,
             call: Callable[[], object]) -> Callable[[], None]:
    """``call`` with an engine switch set to ``value`` for its duration:
    ``setter(value)`` returns the switch's previous value, which is put back
    after the call, however it ends."""
    def run() -> None:
        before = setter(value)
        try:
            call()
        finally:
            setter(before)
    return run


def time_interleaved(cases: Mapping[str, Callable[[], object]], repeats: int,
                     sync_all: Callable[[], None], *, warm_up: bool = True,
                     sync_after: bool = True,
                     before: Callable[[], None] | None = None) -> dict[str, list[float]]:
    """Seconds of each case, ``repeats`` rounds with the cases interleaved
    (so that drift hits all alike). ``warm_up`` runs every case once first;
    each timed run follows ``before`` (e.g. dropping the page cache) and a
    ``sync_all``, and with ``sync_after`` its time includes a ``sync_all``."""
    if warm_up:
        for fn in cases.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            if before is not None:
                before()
            sync_all()
            t0 = time.perf_counter()
            fn()
            if sync_after:
                sync_all()
            times[name].append(time.perf_counter() - t0)
    return times
