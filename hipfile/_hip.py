"""HIP runtime access through HIP-Python (defined in :mod:`hipfile._lib._hip`,
below the compiled core that uses it)."""

from __future__ import annotations

from hipfile._lib._hip import Pointer, check, error_name, hip

__all__ = ["Pointer", "check", "error_name", "hip"]
