"""What the examples share: checking HIP-Python's results."""

from __future__ import annotations

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
