"""What the examples share: checking HIP-Python's results, and the types of
their command-line arguments (a bad value is a usage error: the message and
exit status 2, never a traceback)."""

from __future__ import annotations

import argparse
import os
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
