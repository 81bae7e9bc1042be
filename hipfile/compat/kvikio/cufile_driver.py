"""KvikIO's ``kvikio.cufile_driver`` on hipFile's driver.

``properties`` has KvikIO's attributes, read from
``hipFileDriverGetProperties`` (sizes in KiB, as KvikIO gives them) and set
through ``hipFileDriverSet*``; :func:`get`, :func:`set` (and its
``with`` form) take KvikIO's keys:

=========================  ==================================================
key                        here
=========================  ==================================================
``poll_mode``              ``USE_POLL_MODE`` of the control flags; set with
                           ``hipFileDriverSetPollMode``
``poll_thresh_size``       ``nvfs_poll_thresh_size`` (KiB); set with
                           ``hipFileDriverSetPollMode``
``max_device_cache_size``  KiB; ``hipFileDriverSetMaxCacheSize``
``max_pinned_memory_size`` ``max_device_pinned_mem_size`` (KiB);
                           ``hipFileDriverSetMaxPinnedMemSize``
``is_gds_available``       read-only: the driver reports a version and the
                           platform is not the emulated one (which has no
                           GPU-direct path)
``major_version``,         read-only: ``nvfs_major_version``,
``minor_version``          ``nvfs_minor_version``
``allow_compat_mode``      read-only: ``ALLOW_COMPAT_MODE`` of the control flags
``per_buffer_cache_size``  read-only (KiB)
=========================  ==================================================

As in KvikIO, a value set is what the getter answers afterwards (KvikIO
keeps the properties it read and updates them on each set). Setting a
read-only key raises ``KeyError("... read-only")``, an unknown key
:class:`KeyError`, a negative size :class:`OverflowError` (also a
:class:`ValueError`); a hipFile failure raises its
:class:`hipfile.HipFileException`, also a :class:`RuntimeError`. A dict
given to :func:`set` is checked whole before anything is set.

The driver is opened on first use (the process's own reference);
:func:`driver_open`/:func:`driver_close` take and drop references of
their own.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

from hipfile.compat.kvikio._args import config_arguments, size_t
from hipfile.compat.kvikio.cufile import _runtime
from hipfile.errors import HipFileException

__all__ = ["ConfigContextManager", "DriverProperties", "driver_close", "driver_open", "get",
           "initialize", "libcufile_version", "properties", "set"]



def _kib(name: str, value: Any) -> int:
    return size_t(name, value, "KiB")


def _flag(name: str, value: Any) -> bool:
    if isinstance(value, bool | int):
        return bool(value)
    raise TypeError(f"{name} must be a bool, not {type(value).__name__}")


def _props() -> Any:
    from hipfile.driver import process_driver
    from hipfile.properties import driver_get_properties

    try:
        process_driver()
        return driver_get_properties()
    except HipFileException as e:
        raise _runtime(e) from None


def _call(fn: Callable[[], None]) -> None:
    from hipfile.driver import process_driver

    try:
        process_driver()
        fn()
    except HipFileException as e:
        raise _runtime(e) from None


class DriverProperties:
    """The driver's properties under KvikIO's names (``properties``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set: dict[str, Any] = {}

    def _read(self, name: str, fn: Callable[[Any], Any]) -> Any:
        with self._lock:
            if name in self._set:
                return self._set[name]
        return fn(_props())

    def _write(self, name: str, value: Any, apply: Callable[[], None]) -> None:
        with self._lock:
            _call(apply)
            self._set[name] = value

    @property
    def is_gds_available(self) -> bool:
        """Whether the GPU-direct path can be used (read-only)."""
        from hipfile import platforms

        try:
            p = _props()
        except RuntimeError:
            return False
        return bool((p.nvfs_major_version or p.nvfs_minor_version)
                    and platforms.active() != "emulated")

    @property
    def major_version(self) -> int:
        """The driver's major version (read-only)."""
        return int(_props().nvfs_major_version)

    @property
    def minor_version(self) -> int:
        """The driver's minor version (read-only)."""
        return int(_props().nvfs_minor_version)

    @property
    def allow_compat_mode(self) -> bool:
        """Whether the driver falls back to POSIX I/O (read-only)."""
        from hipfile.enums import DriverControlFlags

        return bool(_props().nvfs_driver_control_flags & DriverControlFlags.ALLOW_COMPAT_MODE)

    @property
    def per_buffer_cache_size(self) -> int:
        """KiB of bounce cache per buffer (read-only)."""
        return int(_props().per_buffer_cache_size)

    @property
    def poll_mode(self) -> bool:
        """Whether small reads poll for completion."""
        from hipfile.enums import DriverControlFlags

        return bool(self._read("poll_mode", lambda p: bool(
            p.nvfs_driver_control_flags & DriverControlFlags.USE_POLL_MODE)))

    @poll_mode.setter
    def poll_mode(self, enable: bool) -> None:
        from hipfile.driver import Driver

        on = _flag("poll_mode", enable)
        size = self.poll_thresh_size
        self._write("poll_mode", on, lambda: Driver.set_poll_mode(on, size))

    @property
    def poll_thresh_size(self) -> int:
        """KiB up to which reads poll (in poll mode)."""
        return int(self._read("poll_thresh_size", lambda p: int(p.nvfs_poll_thresh_size)))

    @poll_thresh_size.setter
    def poll_thresh_size(self, size_in_kb: int) -> None:
        from hipfile.driver import Driver

        size = _kib("poll_thresh_size", size_in_kb)
        on = self.poll_mode
        self._write("poll_thresh_size", size, lambda: Driver.set_poll_mode(on, size))

    @property
    def max_device_cache_size(self) -> int:
        """KiB of device bounce cache."""
        return int(self._read("max_device_cache_size", lambda p: int(p.max_device_cache_size)))

    @max_device_cache_size.setter
    def max_device_cache_size(self, size_in_kb: int) -> None:
        from hipfile.driver import Driver

        size = _kib("max_device_cache_size", size_in_kb)
        self._write("max_device_cache_size", size, lambda: Driver.set_max_cache_size(size))

    @property
    def max_pinned_memory_size(self) -> int:
        """KiB of pinned memory the driver may use."""
        return int(self._read("max_pinned_memory_size",
                              lambda p: int(p.max_device_pinned_mem_size)))

    @max_pinned_memory_size.setter
    def max_pinned_memory_size(self, size_in_kb: int) -> None:
        from hipfile.driver import Driver

        size = _kib("max_pinned_memory_size", size_in_kb)
        self._write("max_pinned_memory_size", size,
                    lambda: Driver.set_max_pinned_mem_size(size))

    def __repr__(self) -> str:
        return "<hipfile.compat.kvikio.cufile_driver.DriverProperties>"


#: The driver's properties; :func:`get` and :func:`set` use them.
properties = DriverProperties()

_SETTABLE: dict[str, Callable[[str, Any], Any]] = {
    "poll_mode": _flag, "poll_thresh_size": _kib, "max_device_cache_size": _kib,
    "max_pinned_memory_size": _kib}
_READ_ONLY = ("is_gds_available", "major_version", "minor_version", "allow_compat_mode",
              "per_buffer_cache_size")


def _check_key(name: Any, setting: bool) -> str:
    if not isinstance(name, str):
        raise TypeError(f"a key must be a str, not {type(name).__name__}")
    if setting and name in _READ_ONLY:
        raise KeyError(f"{name!r}: This property is read-only.")
    if name not in _SETTABLE and (setting or name not in _READ_ONLY):
        raise KeyError(f"{name!r} is not a cuFile driver property; the keys are "
                       f"{', '.join((*_SETTABLE, *_READ_ONLY))}")
    return name


def get(config_name: str) -> Any:
    """The value of one property (KvikIO's ``cufile_driver.get``).

    Raises
    ------
    KeyError
        An unknown key.
    RuntimeError
        The driver cannot be opened (also the :class:`hipfile.HipFileException`).

    See Also
    --------
    hipFileDriverGetProperties
    """
    return getattr(properties, _check_key(config_name, False))


class ConfigContextManager:
    """What :func:`set` returns: the values are set already; leaving a
    ``with`` block puts back the ones in effect before."""

    def __init__(self, config: dict[str, Any]) -> None:
        checked = {_check_key(k, True): _SETTABLE[k](k, v) for k, v in config.items()}
        self._old: dict[str, Any] = {}
        try:
            for key, value in checked.items():
                old = getattr(properties, key)
                setattr(properties, key, value)
                self._old[key] = old
        except BaseException:
            self._restore()
            raise

    def _restore(self) -> None:
        for key, value in reversed(list(self._old.items())):
            setattr(properties, key, value)
        self._old = {}

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._restore()


def set(*config: Any) -> ConfigContextManager:
    """Set properties for the process, or for a ``with`` block (KvikIO's
    ``cufile_driver.set``): ``set({"key": value, ...})`` or
    ``set("key", value)``. Every key and value is checked before any is
    set; if hipFile refuses one, those set before it are put back.

    Raises
    ------
    ValueError
        Another call form.
    KeyError
        An unknown or read-only key.
    TypeError, OverflowError
        A bad value (OverflowError, for a negative size, is also a
        :class:`ValueError`).
    RuntimeError
        hipFile refused (also the :class:`hipfile.HipFileException`).

    See Also
    --------
    hipFileDriverSetPollMode, hipFileDriverSetMaxCacheSize, hipFileDriverSetMaxPinnedMemSize
    """
    return ConfigContextManager(config_arguments(config, "cufile_driver.set"))


def libcufile_version() -> tuple[int, int]:
    """``(major, minor)`` of the loaded libhipfile (KvikIO gives
    libcufile's).

    See Also
    --------
    hipFileGetVersion
    """
    from hipfile.properties import get_version

    major, minor, _patch = get_version()
    return (major, minor)


_opened: list[Any] = []
_opened_lock = threading.Lock()


def driver_open() -> None:
    """Take a driver reference; each needs a :func:`driver_close`.

    Raises
    ------
    RuntimeError
        The driver cannot be opened (also the :class:`hipfile.HipFileException`).

    See Also
    --------
    hipFileDriverOpen
    """
    from hipfile.driver import Driver

    try:
        drv = Driver().open()
    except HipFileException as e:
        raise _runtime(e) from None
    with _opened_lock:
        _opened.append(drv)


def driver_close() -> None:
    """Drop a reference taken by :func:`driver_open`.

    Raises
    ------
    RuntimeError
        No reference of :func:`driver_open` is left.

    See Also
    --------
    hipFileDriverClose
    """
    with _opened_lock:
        if not _opened:
            raise RuntimeError("driver_close() without a driver_open() to match")
        drv = _opened.pop()
    drv.close()


def initialize() -> None:
    """:func:`driver_open`, and :func:`driver_close` at interpreter exit."""
    driver_open()
    atexit.register(driver_close)
