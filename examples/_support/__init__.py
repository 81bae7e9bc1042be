"""What the examples share: checking HIP-Python's results, the types of
their command-line arguments (a bad value is a usage error: the message and
exit status 2, never a traceback), and saying what to set when there is no
GPU runtime to run on."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from hip import hip


def hip_check(result: Any) -> Any:
    """The value of a HIP-Python call, or RuntimeError naming the error.

    HIP-Python returns ``(error,)``, ``(error, value)`` or a bare error; the
    value is returned (``None`` when there is none).
    """
    err = result[0] if isinstance(result, tuple) else result
    if err != hip.hipError_t.hipSuccess:
        raise RuntimeError(f"HIP error {err!r}")
    if isinstance(result, tuple) and len(result) > 1:
        return result[1]
    return None


def positive_int(text: str) -> int:
    """argparse type: an integer > 0 (decimal or ``0x`` hexadecimal)."""
    try:
        n = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return n


def folder(text: str) -> str:
    """argparse type: an existing folder."""
    if not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a folder")
    return text


def folder_to_make(text: str) -> str:
    """argparse type: a folder, made if missing (its parent must exist)."""
    if os.path.exists(text) and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a folder")
    parent = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(parent):
        raise argparse.ArgumentTypeError(f"{text!r}: its parent folder {parent!r} does not exist")
    return text


def new_file(text: str) -> str:
    """argparse type: a file to create or replace, in an existing folder."""
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is a folder, not a file")
    parent = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(parent):
        raise argparse.ArgumentTypeError(f"{text!r}: the folder {parent!r} does not exist")
    return text


def require_runtime(program: str | None = None) -> None:
    """Exit with one line saying what to set when the HIP runtime, a GPU or
    libhipfile cannot be found (a machine without ROCm, where
    ``hip.hipMalloc`` would fail with "failed to dlopen libamdhip64.so").

    Raises
    ------
    SystemExit
        With that line (exit status 1).
    """
    import hipfile

    if "-h" in sys.argv[1:] or "--help" in sys.argv[1:]:
        return                          # the usage needs no GPU
    name = os.path.basename(program or sys.argv[0]) or "this example"
    hint = (f"no ROCm GPU here? run it on the CPU with the emulated platform: "
            f"HIPFILE_PLATFORM=emulated python examples/{name}")
    try:
        result = hip.hipGetDeviceCount()
    except RuntimeError:                # HIP-Python could not dlopen the runtime
        raise SystemExit(f"{name}: cannot load the HIP runtime (libamdhip64.so); {hint}"
                         ) from None
    err, count = result if isinstance(result, tuple) else (result, 0)
    if err != hip.hipError_t.hipSuccess or not count:
        raise SystemExit(f"{name}: no GPU found ({getattr(err, 'name', err)}); {hint}")
    try:
        hipfile.get_version()           # loads libhipfile
    except hipfile.HipFileLibraryNotFound:
        raise SystemExit(f"{name}: libhipfile not found (set ROCM_PATH or HIPFILE_LIBRARY); "
                         f"{hint}") from None


def require_torch_gpu(program: str | None = None, what: str = "--framework pt") -> None:
    """Exit with one line when torch, or a GPU that torch can use, is
    missing (``what`` needs both).

    Raises
    ------
    SystemExit
        With that line (exit status 1).
    """
    name = os.path.basename(program or sys.argv[0]) or "this example"
    try:
        import torch
    except ImportError as e:
        raise SystemExit(f"{name}: {what} needs torch, which cannot be imported here ({e}); "
                         "leave it out to load hipfile.safetensors.DeviceTensor objects"
                         ) from None
    if not torch.cuda.is_available():
        raise SystemExit(f"{name}: {what} needs torch with a GPU, and torch "
                         f"{torch.__version__} sees none here (torch.cuda.is_available() is "
                         "False); leave it out to load hipfile.safetensors.DeviceTensor "
                         "objects")
