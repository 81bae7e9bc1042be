"""What every benchmark shares: an explicit platform choice and temporary
folders that are removed on the way out."""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType

PLATFORMS = ("emulated", "cuda", "rocm")


def add_platform_argument(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--platform", choices=PLATFORMS, default=None,
                    help="platform to run on: a test platform (emulated, cuda) or rocm "
                         "(default: HIPFILE_PLATFORM, else the ROCm install of ROCM_PATH "
                         "or /opt/rocm; without any of them the benchmark stops)")


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
