"""KvikIO's ``kvikio.defaults`` under its key names, on hipfile's settings.

==================  ==========================================================
key                 here
==================  ==========================================================
``num_threads``     ``hipfile.defaults`` ``num_threads``: threads of the pool
                    that ``pread``/``pwrite`` (and ``read``/``write``) use
``task_size``       ``hipfile.defaults`` ``task_size``: bytes per task
``compat_mode``     a :class:`~hipfile.compat.kvikio.CompatMode`; recorded
                    and answered by :func:`is_compat_mode_preferred`, it does
                    not change the I/O: hipFile chooses its direct path or its
                    buffered fallback per request itself
``gds_threshold``   bytes; recorded only (every device transfer goes through
                    hipFile, whatever its size)
==================  ==========================================================

``num_threads`` and ``task_size`` are hipfile's own settings: setting them
here sets them for the whole package, and their environment variables are
hipfile's (``HIPFILE_NTHREADS``, ``HIPFILE_TASK_SIZE``). ``compat_mode`` and
``gds_threshold`` start from KvikIO's variables ``KVIKIO_COMPAT_MODE`` and
``KVIKIO_GDS_THRESHOLD`` when set. KvikIO's other keys (``bounce_buffer_size``,
``http_*``, ``auto_direct_io_*``) mean nothing here and raise
:class:`KeyError`, as an unknown key does in KvikIO.

::

    from hipfile.compat.kvikio import defaults

    defaults.set("task_size", 1 << 20)                  # from now on
    with defaults.set({"num_threads": 4, "compat_mode": "on"}):
        ...                                             # inside the block only
    defaults.get("num_threads")
"""

from __future__ import annotations

import enum
import os
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from hipfile import defaults as _hipfile_defaults

__all__ = [
    "KEYS",
    "CompatMode",
    "ConfigContextManager",
    "compat_mode",
    "gds_threshold",
    "get",
    "is_compat_mode_preferred",
    "num_threads",
    "set",
    "set_compat_mode",
    "set_gds_threshold",
    "set_num_threads",
    "set_task_size",
    "task_size",
]


class CompatMode(enum.IntEnum):
    """KvikIO's compatibility mode (same names and numbers)."""

    OFF = 0
    ON = 1
    AUTO = 2


_WORDS = {"on": CompatMode.ON, "true": CompatMode.ON, "yes": CompatMode.ON,
          "1": CompatMode.ON, "off": CompatMode.OFF, "false": CompatMode.OFF,
          "no": CompatMode.OFF, "0": CompatMode.OFF, "auto": CompatMode.AUTO}


def _compat_mode(value: Any) -> CompatMode:
    if isinstance(value, bool):
        return CompatMode.ON if value else CompatMode.OFF
    if isinstance(value, str):
        try:
            return _WORDS[value.strip().lower()]
        except KeyError:
            raise ValueError(f"compat_mode must be on, off or auto, got {value!r}") from None
    try:
        return CompatMode(value)
    except ValueError:
        raise ValueError(f"compat_mode must be a CompatMode (0, 1 or 2), got {value!r}") from None


def _gds_threshold(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = value.__index__()
        except (AttributeError, TypeError):
            raise TypeError(f"gds_threshold must be an int, not {type(value).__name__}") from None
    if value < 0:
        raise ValueError(f"gds_threshold must be >= 0, got {value}")
    return int(value)


def _from_env(name: str, parse: Callable[[Any], Any], default: Any) -> Any:
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        return parse(text if parse is _compat_mode else _hipfile_defaults.parse_size(text))
    except (TypeError, ValueError) as e:
        raise ValueError(f"environment variable {name}={text!r}: {e}") from None


#: The keys, and what each is checked by.
KEYS: tuple[str, ...] = ("compat_mode", "num_threads", "task_size", "gds_threshold")

_HIPFILE_KEYS = ("num_threads", "task_size")
_lock = threading.Lock()
_own: dict[str, Any] = {}        # compat_mode and gds_threshold, once set
_CHECKS: dict[str, Callable[[Any], Any]] = {"compat_mode": _compat_mode,
                                             "gds_threshold": _gds_threshold}
_ENV = {"compat_mode": ("KVIKIO_COMPAT_MODE", CompatMode.AUTO),
        "gds_threshold": ("KVIKIO_GDS_THRESHOLD", 16 << 10)}


def _key(name: Any) -> str:
    if not isinstance(name, str):
        raise TypeError(f"a key must be a str, not {type(name).__name__}")
    if name not in KEYS:
        raise KeyError(f"{name!r} is not a setting here; the KvikIO keys that mean "
                       f"something on hipFile are {', '.join(KEYS)}")
    return name


def get(config_name: str) -> Any:
    """The value of one setting (KvikIO's ``kvikio.defaults.get``).

    Raises
    ------
    KeyError
        A key that is not one of :data:`KEYS`.
    ValueError
        Its environment variable holds a bad value.
    """
    name = _key(config_name)
    if name in _HIPFILE_KEYS:
        return _hipfile_defaults.get(name)
    with _lock:
        if name in _own:
            return _own[name]
    variable, default = _ENV[name]
    return _from_env(variable, _CHECKS[name], default)


class ConfigContextManager:
    """What :func:`set` returns: the values are set already; leaving a
    ``with`` block puts back the ones in effect before."""

    def __init__(self, config: dict[str, Any]) -> None:
        names = [_key(k) for k in config]
        checked = {k: _CHECKS[k](v) for k, v in config.items() if k not in _HIPFILE_KEYS}
        ours = {k: v for k, v in config.items() if k in _HIPFILE_KEYS}
        # hipfile's settings are checked by hipfile.defaults.set, which changes
        # nothing unless all of them pass; do it before touching ours
        self._restore_hipfile = _hipfile_defaults.set(ours) if ours else None
        self._restore_own = _hipfile_defaults._apply(_own, _lock, checked)
        self._names = names

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._restore_own.__exit__(None, None, None)
        if self._restore_hipfile is not None:
            self._restore_hipfile.__exit__(None, None, None)

    def __repr__(self) -> str:
        return f"<hipfile.compat.kvikio.defaults.ConfigContextManager {self._names}>"


def set(*config: Any) -> ConfigContextManager:
    """Set settings for the process, or for a ``with`` block (KvikIO's
    ``kvikio.defaults.set``): ``set({"key": value, ...})`` or
    ``set("key", value)``.

    Raises
    ------
    ValueError
        Another call form (as KvikIO), or a bad value.
    KeyError
        A key that is not one of :data:`KEYS`.
    TypeError
        A value of the wrong type.
    """
    usage = ("Valid arguments are defaults.set(config: dict) or "
             "defaults.set(key: str, value: Any)")
    if len(config) == 1:
        if not isinstance(config[0], dict):
            raise ValueError(usage)
        return ConfigContextManager(dict(config[0]))
    if len(config) == 2:
        if not isinstance(config[0], str):
            raise ValueError(usage)
        return ConfigContextManager({config[0]: config[1]})
    raise ValueError(usage)


def is_compat_mode_preferred() -> bool:
    """Whether POSIX I/O is preferred over the GPU-direct path: ``compat_mode``
    ON, or AUTO on the emulated platform (whose hipFile has no GPU-direct
    path). As in KvikIO, AUTO is resolved here, at the time of the call."""
    mode = get("compat_mode")
    if mode == CompatMode.AUTO:
        from hipfile import platforms

        return platforms.active() == "emulated"
    return bool(mode == CompatMode.ON)


# -- KvikIO's older one-setting functions ---------------------------------------------------

_T = TypeVar("_T")


def _older_getter(key: str, cast: Callable[[Any], _T]) -> Callable[[], _T]:
    """KvikIO's older getter of ``key``: ``get(key)``."""

    def getter() -> _T:
        return cast(get(key))

    getter.__name__ = getter.__qualname__ = key
    getter.__doc__ = f"``get({key!r})``."
    return getter


def _older_setter(key: str) -> Callable[[Any], ConfigContextManager]:
    """KvikIO's older setter of ``key``: ``set(key, value)``."""

    def setter(value: Any) -> ConfigContextManager:
        return set(key, value)

    setter.__name__ = setter.__qualname__ = f"set_{key}"
    setter.__doc__ = f"``set({key!r}, value)``."
    return setter


compat_mode = _older_getter("compat_mode", CompatMode)
num_threads = _older_getter("num_threads", int)
task_size = _older_getter("task_size", int)
gds_threshold = _older_getter("gds_threshold", int)
set_compat_mode = _older_setter("compat_mode")
set_num_threads = _older_setter("num_threads")
set_task_size = _older_setter("task_size")
set_gds_threshold = _older_setter("gds_threshold")
