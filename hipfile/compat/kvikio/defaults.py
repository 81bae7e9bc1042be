"""KvikIO's ``kvikio.defaults`` under its key names, on hipfile's settings.

Every key KvikIO has is accepted by :func:`get` and :func:`set`, with
KvikIO's checks and exception types; :data:`EFFECT` says what each one does
here.

========================  ====================================================
key                       here
========================  ====================================================
``num_threads``           ``hipfile.defaults`` ``num_threads``: threads of the
                          pool that ``pread``/``pwrite`` (and ``read``/
                          ``write``, and :class:`~hipfile.compat.kvikio.Mmap`)
                          use
``task_size``             ``hipfile.defaults`` ``task_size``: bytes per task
``bounce_buffer_size``    bytes per host-to-device copy of
                          :class:`~hipfile.compat.kvikio.Mmap` reads into
                          device memory, and of each pinned bounce buffer of
                          ``compat_mode`` ON (freed by ``bounce_buffer_free``);
                          hipFile's own bounce buffers are sized by the
                          driver (``cufile_driver`` ``max_device_cache_size``)
``compat_mode``           a :class:`CompatMode`, answered by
                          :func:`is_compat_mode_preferred`. ON: ``CuFile``'s
                          ``pread``/``pwrite`` (and ``read``/``write``) of
                          device memory move through bounce buffers with
                          POSIX calls, as KvikIO's compatibility mode does;
                          AUTO and OFF: hipFile chooses its direct path or
                          its buffered fallback per request itself
``gds_threshold``         bytes; recorded only (every device transfer goes
                          through hipFile, whatever its size)
``http_max_attempts``,    recorded only: there are no remote files here
``http_status_codes``,    (:func:`~hipfile.compat.kvikio.is_remote_file_available`
``http_timeout``          is False)
``auto_direct_io_read``,  recorded, and answered by ``CuFile.is_direct_io_supported()``
``auto_direct_io_write``  (False when both are False); they do not change the
                          I/O: hipFile chooses how it reaches the file
========================  ====================================================

``num_threads`` and ``task_size`` are hipfile's own settings: setting them
here sets them for the whole package, and their environment variables are
hipfile's (``HIPFILE_NTHREADS``, ``HIPFILE_TASK_SIZE``). The other keys
start from KvikIO's variables (``KVIKIO_COMPAT_MODE``,
``KVIKIO_GDS_THRESHOLD``, ``KVIKIO_BOUNCE_BUFFER_SIZE``,
``KVIKIO_HTTP_MAX_ATTEMPTS``, ``KVIKIO_HTTP_STATUS_CODES``,
``KVIKIO_HTTP_TIMEOUT``, ``KVIKIO_AUTO_DIRECT_IO_READ``,
``KVIKIO_AUTO_DIRECT_IO_WRITE``) when set, else KvikIO's defaults.

Bad values raise what KvikIO raises: :class:`OverflowError` for a negative
count or size (ours is also a :class:`ValueError`), :class:`ValueError` for
a zero where a positive integer is needed, :class:`TypeError` for a value
of the wrong type, :class:`KeyError` for an unknown key. :func:`set` with a
dict checks every value before it applies any: on an error nothing changes.

::

    from hipfile.compat.kvikio import defaults

    defaults.set("task_size", 1 << 20)                  # from now on
    with defaults.set({"num_threads": 4, "compat_mode": "on",
                       "bounce_buffer_size": 1 << 20}):
        ...                                             # inside the block only
    defaults.get("num_threads")
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

from hipfile import defaults as _hipfile_defaults
from hipfile._interop import as_int_unbounded
from hipfile.compat._errors import also
from hipfile.compat.kvikio._args import SIZE_T_MAX, config_arguments

__all__ = [
    "EFFECT",
    "KEYS",
    "CompatMode",
    "ConfigContextManager",
    "auto_direct_io_read",
    "auto_direct_io_write",
    "bounce_buffer_size",
    "compat_mode",
    "gds_threshold",
    "get",
    "http_max_attempts",
    "http_status_codes",
    "http_timeout",
    "is_compat_mode_preferred",
    "num_threads",
    "set",
    "set_bounce_buffer_size",
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

_SIZE_T_MAX = SIZE_T_MAX
_UINT_MAX = (1 << 32) - 1
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1


def _compat_mode(name: str, value: Any) -> CompatMode:
    if isinstance(value, bool):
        return CompatMode.ON if value else CompatMode.OFF
    if isinstance(value, str):
        try:
            return _WORDS[value.strip().lower()]
        except KeyError:
            raise ValueError(f"compat_mode must be on, off or auto, got {value!r}") from None
    try:
        return CompatMode(value)
    except (ValueError, TypeError):
        raise ValueError(f"compat_mode must be a CompatMode (0, 1 or 2), got {value!r}") from None


def _unsigned(high: int, positive: bool, what: str) -> Callable[[str, Any], int]:
    """The check of an unsigned C value (``what``, at most ``high``), as
    KvikIO converts it: a negative value raises OverflowError (also a
    ValueError here), a zero where ``positive`` ValueError."""
    def check(name: str, value: Any) -> int:
        n = as_int_unbounded(value, name)
        if n < 0:
            raise also(OverflowError(f"can't convert negative value to {what}: {name} must "
                                     f"be a {'positive' if positive else 'non-negative'} "
                                     f"integer, got {n}"), ValueError)
        if n > high:
            raise also(OverflowError(f"value too large to convert to {what}: {name} must be "
                                     f"at most {high}, got {n}"), ValueError)
        if positive and n == 0:
            raise ValueError(f"{name} must be a positive integer, got 0")
        return n
    return check


def _timeout(name: str, value: Any) -> int:
    n = as_int_unbounded(value, name)
    if n < _LONG_MIN or n > _LONG_MAX:
        raise also(OverflowError(f"{name}: value too large to convert to long, got {n}"),
                   ValueError)
    if n <= 0:
        raise ValueError(f"{name} (timeout_seconds) must be a positive integer, got {n}")
    return n


def _status_codes(name: str, value: Any) -> list[int]:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a list of ints, not {type(value).__name__}")
    codes = []
    for i, code in enumerate(value):
        code = as_int_unbounded(code, f"{name}[{i}]")
        if not -(1 << 31) <= code < (1 << 31):
            raise also(OverflowError(f"{name}: {code} does not fit a C int"), ValueError)
        codes.append(int(code))
    return codes


def _flag(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return bool(value)
    raise TypeError(f"{name} must be a bool, not {type(value).__name__}")


def _env_flag(text: str) -> bool:
    t = text.strip().lower()
    try:
        return bool(int(t))
    except ValueError:
        pass
    if t in ("true", "on", "yes"):
        return True
    if t in ("false", "off", "no"):
        return False
    raise ValueError(f"unknown value {text!r} (expected true/false, on/off, yes/no or 1/0)")


def _env_codes(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"{text!r} is not a comma-separated list of HTTP status codes") from None


@dataclass(frozen=True)
class _Key:
    """One KvikIO key: its check, and where the value comes from when it is
    not set (``env``: KvikIO's variable, ``parse`` its text; None for the
    keys that are hipfile's settings)."""

    check: Callable[[str, Any], Any]
    env: str | None = None
    parse: Callable[[str], Any] = str
    default: Any = None
    effect: str = ""


def _size_text(text: str) -> int:
    return _hipfile_defaults.parse_size(text)


_SPEC: dict[str, _Key] = {
    "compat_mode": _Key(_compat_mode, "KVIKIO_COMPAT_MODE", str, CompatMode.AUTO,
                        "answered by is_compat_mode_preferred(); ON: CuFile.pread/pwrite "
                        "of device memory move through bounce buffers with POSIX calls, "
                        "else the I/O path is engine_data_path's and hipFile's choice"),
    "num_threads": _Key(_unsigned(_UINT_MAX, True, "unsigned int"),
                        effect="hipfile.defaults num_threads: threads of the pread/pwrite "
                               "pool (host memory)"),
    "task_size": _Key(_unsigned(_SIZE_T_MAX, True, "size_t"),
                      effect="hipfile.defaults task_size: bytes per pread/pwrite task "
                             "(host memory)"),
    "gds_threshold": _Key(_unsigned(_SIZE_T_MAX, False, "size_t"), "KVIKIO_GDS_THRESHOLD",
                          _size_text, 16 << 10, "no effect (recorded only)"),
    "bounce_buffer_size": _Key(_unsigned(_SIZE_T_MAX, True, "size_t"),
                               "KVIKIO_BOUNCE_BUFFER_SIZE", _size_text, 16 << 20,
                               "bytes per host-to-device copy of Mmap reads into device "
                               "memory, and of each bounce buffer of compat_mode ON"),
    "http_max_attempts": _Key(_unsigned(_SIZE_T_MAX, True, "size_t"),
                              "KVIKIO_HTTP_MAX_ATTEMPTS", _size_text, 3,
                              "no effect (no remote files here)"),
    "http_status_codes": _Key(_status_codes, "KVIKIO_HTTP_STATUS_CODES", _env_codes,
                              (429, 500, 502, 503, 504), "no effect (no remote files here)"),
    "http_timeout": _Key(_timeout, "KVIKIO_HTTP_TIMEOUT", lambda t: int(t.strip(), 0), 60,
                         "no effect (no remote files here)"),
    "auto_direct_io_read": _Key(_flag, "KVIKIO_AUTO_DIRECT_IO_READ", _env_flag, False,
                                "recorded; answered by CuFile.is_direct_io_supported()"),
    "auto_direct_io_write": _Key(_flag, "KVIKIO_AUTO_DIRECT_IO_WRITE", _env_flag, True,
                                 "recorded; answered by CuFile.is_direct_io_supported()"),
}

#: Every KvikIO key, in KvikIO's order.
KEYS: tuple[str, ...] = tuple(_SPEC)

#: What each key does here (``"no effect ..."`` for those accepted and
#: recorded only).
EFFECT: dict[str, str] = {name: spec.effect for name, spec in _SPEC.items()}

_HIPFILE_KEYS = ("num_threads", "task_size")
_lock = threading.Lock()
_own: dict[str, Any] = {}        # the keys that are not hipfile's, once set


def _key(name: Any) -> str:
    if not isinstance(name, str):
        raise TypeError(f"a key must be a str, not {type(name).__name__}")
    if name not in _SPEC:
        raise KeyError(f"{name!r} is not a KvikIO setting; the keys are {', '.join(KEYS)}")
    return name


def _copy(value: Any) -> Any:
    # a list given back is the caller's to change: never the stored one
    return list(value) if isinstance(value, list | tuple) else value


def get(config_name: str) -> Any:
    """The value of one setting (KvikIO's ``kvikio.defaults.get``): the
    value given to :func:`set`, else its environment variable, else
    KvikIO's default.

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
            return _copy(_own[name])
    spec = _SPEC[name]
    assert spec.env is not None
    # the environment is read where hipfile's own settings read it
    found, value = _hipfile_defaults.Setting(
        name, spec.env, lambda: spec.default, spec.check, spec.parse, spec.effect,
        repr(spec.default)).from_environment()
    return _copy(value if found else spec.default)


class ConfigContextManager:
    """What :func:`set` returns: the values are set already; leaving a
    ``with`` block puts back the ones in effect before."""

    def __init__(self, config: dict[str, Any]) -> None:
        names = [_key(k) for k in config]
        # every value is checked before any is applied
        checked = {k: _SPEC[k].check(k, v) for k, v in config.items()}
        ours = {k: v for k, v in checked.items() if k in _HIPFILE_KEYS}
        own = {k: v for k, v in checked.items() if k not in _HIPFILE_KEYS}
        self._restore_hipfile = _hipfile_defaults.set(ours) if ours else None
        self._restore_own = _hipfile_defaults._apply(_own, _lock, own)
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
    ``set("key", value)``. Every value is checked before any is applied.

    Raises
    ------
    ValueError
        Another call form (as KvikIO), a zero where a positive integer is
        needed, or another bad value.
    OverflowError
        A negative count or size, or one too large for KvikIO's C type;
        also a :class:`ValueError`.
    KeyError
        A key that is not one of :data:`KEYS`.
    TypeError
        A value of the wrong type.
    """
    return ConfigContextManager(config_arguments(config, "defaults.set"))


def is_compat_mode_preferred() -> bool:
    """Whether POSIX I/O is preferred over the GPU-direct path: ``compat_mode``
    ON, or AUTO on the emulated platform (whose hipFile has no GPU-direct
    path). As in KvikIO, AUTO is resolved here, at the time of the call."""
    mode = get("compat_mode")
    if mode == CompatMode.AUTO:
        from hipfile import platforms

        return platforms.active() == "emulated"
    return bool(mode == CompatMode.ON)


# -- KvikIO's one-setting functions -----------------------------------------------------------

_T = TypeVar("_T")


def _older_getter(key: str, cast: Callable[[Any], _T]) -> Callable[[], _T]:
    """KvikIO's getter of ``key``: ``get(key)``."""

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
bounce_buffer_size = _older_getter("bounce_buffer_size", int)
http_max_attempts = _older_getter("http_max_attempts", int)
http_status_codes = _older_getter("http_status_codes", list)
http_timeout = _older_getter("http_timeout", int)
auto_direct_io_read = _older_getter("auto_direct_io_read", bool)
auto_direct_io_write = _older_getter("auto_direct_io_write", bool)
set_compat_mode = _older_setter("compat_mode")
set_num_threads = _older_setter("num_threads")
set_task_size = _older_setter("task_size")
set_gds_threshold = _older_setter("gds_threshold")
set_bounce_buffer_size = _older_setter("bounce_buffer_size")
