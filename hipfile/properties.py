"""Driver properties, configuration parameters and the library version."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, NoReturn

from hipfile._interop import as_int_unbounded
from hipfile._lib import _hipfile
from hipfile.enums import (
    BoolConfigParameter,
    DriverControlFlags,
    DriverStatusFlags,
    FeatureFlags,
    SizeTConfigParameter,
    StringConfigParameter,
)

__all__ = [
    "DriverProperties",
    "driver_get_properties",
    "get_parameter",
    "get_version",
    "set_parameter",
]


@dataclass(frozen=True, eq=False)
class DriverProperties(dict[str, int]):
    """``hipFileDriverProps_t``. Sizes are in KiB as the library reports them.

    A ``dict`` with upstream's keys (``props["feature_flags"]``, ``==`` with a
    dict, ``json.dumps``, ``dict(props)``), read-only, whose values are also
    typed attributes (``props.feature_flags``, ``props.features``).
    """

    nvfs_major_version: int
    nvfs_minor_version: int
    nvfs_poll_thresh_size: int
    nvfs_max_direct_io_size: int
    nvfs_driver_status_flags: int
    nvfs_driver_control_flags: int
    feature_flags: int
    max_device_cache_size: int
    per_buffer_cache_size: int
    max_device_pinned_mem_size: int
    max_batch_io_count: int
    max_batch_io_timeout_msecs: int

    def __post_init__(self) -> None:
        dict.update(self, {f.name: int(getattr(self, f.name)) for f in fields(self)})

    @property
    def driver_status(self) -> DriverStatusFlags:
        """The status flags as bits."""
        return DriverStatusFlags(self.nvfs_driver_status_flags)

    @property
    def driver_control(self) -> DriverControlFlags:
        """The control flags as bits."""
        return DriverControlFlags(self.nvfs_driver_control_flags)

    @property
    def features(self) -> FeatureFlags:
        """The feature flags as bits."""
        return FeatureFlags(self.feature_flags)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), tuple(getattr(self, f.name) for f in fields(self)))

    def _read_only(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("DriverProperties is read-only")

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only


def driver_get_properties() -> DriverProperties:
    """The driver's properties. Wraps ``hipFileDriverGetProperties``.

    Raises
    ------
    HipFileException
        E.g. ``InternalError`` where a release does not implement it.
    """
    return DriverProperties(**_hipfile.driver_get_properties())


def get_version() -> tuple[int, int, int]:
    """Version of the loaded libhipfile. Wraps ``hipFileGetVersion``."""
    major, minor, patch = _hipfile.get_version()
    return (int(major), int(minor), int(patch))


Parameter = SizeTConfigParameter | BoolConfigParameter | StringConfigParameter


def get_parameter(param: Parameter) -> int | bool | str:
    """A configuration parameter's value; its enum type picks the C function
    (``hipFileGetParameterSizeT``/``Bool``/``String``).

    Raises
    ------
    TypeError
        ``param`` is not one of the three parameter enums.
    """
    if isinstance(param, SizeTConfigParameter):
        return int(_hipfile.get_parameter_size_t(int(param)))
    if isinstance(param, BoolConfigParameter):
        return bool(_hipfile.get_parameter_bool(int(param)))
    if isinstance(param, StringConfigParameter):
        return str(_hipfile.get_parameter_string(int(param)))
    raise TypeError(f"expected a *ConfigParameter enum member, got {param!r}")


def set_parameter(param: Parameter, value: int | bool | str) -> None:
    """Set a configuration parameter (``hipFileSetParameterSizeT``/``Bool``/``String``).

    Raises
    ------
    TypeError
        Wrong enum, or a value of the wrong type.
    ValueError
        A negative size.
    """
    if isinstance(param, SizeTConfigParameter):
        value = as_int_unbounded(value, param.name)   # size_t: above 2**63 too
        if value < 0:
            raise ValueError(f"{param.name} must be >= 0, got {value}")
        _hipfile.set_parameter_size_t(int(param), value)
    elif isinstance(param, BoolConfigParameter):
        if not isinstance(value, bool):
            raise TypeError(f"{param.name} takes a bool")
        _hipfile.set_parameter_bool(int(param), value)
    elif isinstance(param, StringConfigParameter):
        if not isinstance(value, str):
            raise TypeError(f"{param.name} takes a str")
        _hipfile.set_parameter_string(int(param), value)
    else:
        raise TypeError(f"expected a *ConfigParameter enum member, got {param!r}")
