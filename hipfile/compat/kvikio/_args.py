"""The argument rules KvikIO's settings and calls share: one checker each."""

from __future__ import annotations

from typing import Any

from hipfile._interop import as_int_unbounded
from hipfile.compat._errors import also

__all__ = ["SIZE_T_MAX", "config_arguments", "size_t"]

#: The largest value of C's ``size_t``, which KvikIO converts sizes to.
SIZE_T_MAX = (1 << 64) - 1


def size_t(name: str, value: Any, unit: str = "") -> int:
    """``value`` as KvikIO converts it to ``size_t``: an int (not a bool or a
    str; anything with ``__index__``); ``unit`` names its unit in the
    message.

    Raises
    ------
    TypeError
        Not an int.
    OverflowError
        Negative, or above :data:`SIZE_T_MAX` (also a :class:`ValueError`).
    """
    n = as_int_unbounded(value, name, f"an int ({unit})" if unit else None)
    if n < 0:
        raise also(OverflowError(f"can't convert negative value to size_t: {name} must be "
                                 f">= 0, got {n}"), ValueError)
    if n > SIZE_T_MAX:
        raise also(OverflowError(f"{name} {n} is too large for size_t"), ValueError)
    return n


def config_arguments(config: tuple[Any, ...], call: str) -> dict[Any, Any]:
    """The settings of KvikIO's ``set(config: dict)`` / ``set(key, value)``
    form (``call`` names it in the message) as a dict.

    Raises
    ------
    ValueError
        Any other form of arguments.
    """
    usage = f"Valid arguments are {call}(config: dict) or {call}(key: str, value: Any)"
    if len(config) == 1 and isinstance(config[0], dict):
        return dict(config[0])
    if len(config) == 2 and isinstance(config[0], str):
        return {config[0]: config[1]}
    raise ValueError(usage)
