"""HIP runtime access through HIP-Python, for every HIP-Python layout.

HIP-Python 6.x/7.x and 10.x keep their helper types in different modules
(``hip._util.types`` and ``rocm.bindings.util.types``); this module finds
them from the objects HIP-Python itself returns, so no module path is
hard-coded. Everything HIP that hipfile does goes through here.
"""

from __future__ import annotations

from typing import Any

from hip import hip

from hipfile._lib._errors import HipRuntimeError, error_name

__all__ = ["Pointer", "check", "error_name", "hip"]


def _find_pointer_type() -> type:
    for cls in hip.ihipStream_t.__mro__:
        if cls.__name__ == "Pointer":
            return cls
    raise ImportError("HIP-Python's Pointer type was not found")


#: HIP-Python's generic pointer wrapper type.
Pointer: type = _find_pointer_type()

_SUCCESS = hip.hipError_t.hipSuccess


def check(result: Any, func: str) -> Any:
    """Unpack a HIP-Python result tuple, raising :class:`HipRuntimeError`
    when its ``hipError_t`` is not ``hipSuccess``."""
    err = result[0] if isinstance(result, tuple) else result
    if err != _SUCCESS:
        raise HipRuntimeError(hip_err=int(err), func=func)
    if isinstance(result, tuple):
        if len(result) == 1:
            return None
        if len(result) == 2:
            return result[1]
        return result[1:]
    return None

