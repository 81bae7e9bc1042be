"""Driver properties, configuration parameters and the library version."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest

import hipfile
from hipfile import (
    BoolConfigParameter,
    Driver,
    DriverControlFlags,
    DriverProperties,
    DriverStatusFlags,
    FeatureFlags,
    SizeTConfigParameter,
    StringConfigParameter,
    driver_get_properties,
    get_parameter,
    set_parameter,
)
from hipfile._lib import _hipfile

# The keys of upstream's driver_get_properties() dict, in its order.
UPSTREAM_KEYS = [
    "nvfs_major_version",
    "nvfs_minor_version",
    "nvfs_poll_thresh_size",
    "nvfs_max_direct_io_size",
    "nvfs_driver_status_flags",
    "nvfs_driver_control_flags",
    "feature_flags",
    "max_device_cache_size",
    "per_buffer_cache_size",
    "max_device_pinned_mem_size",
    "max_batch_io_count",
    "max_batch_io_timeout_msecs",
]

# Property fields that the emulated platform keeps as configuration parameters.
MIRRORED = [
    ("nvfs_poll_thresh_size", SizeTConfigParameter.POLLTHRESHOLD_SIZE_KB),
    ("nvfs_max_direct_io_size", SizeTConfigParameter.PROPERTIES_MAX_DIRECT_IO_SIZE_KB),
    ("max_device_cache_size", SizeTConfigParameter.PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB),
    ("per_buffer_cache_size", SizeTConfigParameter.PROPERTIES_PER_BUFFER_CACHE_SIZE_KB),
    (
        "max_device_pinned_mem_size",
        SizeTConfigParameter.PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB,
    ),
    ("max_batch_io_count", SizeTConfigParameter.PROPERTIES_IO_BATCHSIZE),
    ("max_batch_io_timeout_msecs", SizeTConfigParameter.PROPERTIES_BATCH_IO_TIMEOUT_MS),
]


@pytest.fixture
def props() -> DriverProperties:
    with Driver():
        return driver_get_properties()


# -- properties -----------------------------------------------------------------------


@pytest.mark.needs("hipFileDriverGetProperties")
def test_properties_are_typed(props: DriverProperties) -> None:
    assert type(props) is DriverProperties
    for field in dataclasses.fields(props):
        value = getattr(props, field.name)
        assert type(value) is int, field.name
        assert value >= 0
    assert isinstance(props.features, FeatureFlags)
    assert isinstance(props.driver_status, DriverStatusFlags)
    assert isinstance(props.driver_control, DriverControlFlags)
    assert props.features == props.feature_flags
    assert props.driver_status == props.nvfs_driver_status_flags
    assert props.driver_control == props.nvfs_driver_control_flags
    with pytest.raises(dataclasses.FrozenInstanceError):
        props.feature_flags = 0  # type: ignore[misc]


@pytest.mark.needs("hipFileDriverGetProperties")
def test_properties_are_a_mapping_with_upstream_keys(props: DriverProperties) -> None:
    assert isinstance(props, Mapping)
    assert list(props) == UPSTREAM_KEYS
    assert len(props) == len(UPSTREAM_KEYS)
    for key in UPSTREAM_KEYS:
        assert props[key] == getattr(props, key)
        assert key in props
    as_dict = dict(props)
    assert as_dict == dataclasses.asdict(props)
    assert props.get("feature_flags") == props.feature_flags
    with pytest.raises(KeyError, match="no_such_key"):
        props["no_such_key"]
    assert "features" not in list(props)


@pytest.mark.emulated
def test_emulated_properties(props: DriverProperties) -> None:
    assert (props.nvfs_major_version, props.nvfs_minor_version) == hipfile.get_version()[:2]
    assert FeatureFlags.BATCH_IO_SUPPORTED in props.features
    assert FeatureFlags.STREAMS_SUPPORTED in props.features
    assert DriverStatusFlags.NVME_SUPPORTED in props.driver_status
    assert props.max_batch_io_count > 0


@pytest.mark.emulated
@pytest.mark.parametrize(("field", "param"), MIRRORED, ids=[f for f, _ in MIRRORED])
def test_properties_agree_with_parameters(field: str, param: SizeTConfigParameter) -> None:
    with Driver():
        assert driver_get_properties()[field] == get_parameter(param)


@pytest.mark.emulated
def test_control_flags_agree_with_parameters(props: DriverProperties) -> None:
    assert (DriverControlFlags.ALLOW_COMPAT_MODE in props.driver_control) is get_parameter(
        BoolConfigParameter.PROPERTIES_ALLOW_COMPAT_MODE
    )
    assert (DriverControlFlags.USE_POLL_MODE in props.driver_control) is get_parameter(
        BoolConfigParameter.PROPERTIES_USE_POLL_MODE
    )


# -- version -------------------------------------------------------------------------


def test_get_version_is_a_tuple_of_ints() -> None:
    version = hipfile.get_version()
    assert type(version) is tuple
    assert len(version) == 3
    assert all(type(v) is int and v >= 0 for v in version)
    assert version >= (0, 2, 0)


@pytest.mark.emulated
def test_emulated_version() -> None:
    assert hipfile.get_version() == (0, 2, 0)


# -- configuration parameters ---------------------------------------------------------


@pytest.mark.emulated
@pytest.mark.parametrize(
    ("enum", "kind"),
    [(SizeTConfigParameter, int), (BoolConfigParameter, bool), (StringConfigParameter, str)],
)
def test_every_parameter_reads_with_its_type(enum: type, kind: type) -> None:
    for param in enum:
        value = get_parameter(param)
        assert type(value) is kind, param


@pytest.mark.emulated
def test_size_parameter_round_trip(saved_config: None) -> None:
    param = SizeTConfigParameter.EXECUTION_MAX_IO_THREADS
    old = get_parameter(param)
    assert isinstance(old, int)
    set_parameter(param, old + 3)
    assert get_parameter(param) == old + 3
    set_parameter(SizeTConfigParameter.PROFILE_STATS, 2)
    assert get_parameter(SizeTConfigParameter.PROFILE_STATS) == 2
    assert get_parameter(param) == old + 3


@pytest.mark.emulated
def test_bool_parameter_round_trip(saved_config: None) -> None:
    param = BoolConfigParameter.FS_MISC_API_CHECK_AGGRESSIVE
    old = get_parameter(param)
    assert isinstance(old, bool)
    set_parameter(param, not old)
    assert get_parameter(param) is (not old)
    set_parameter(param, old)
    assert get_parameter(param) is old


@pytest.mark.emulated
@pytest.mark.parametrize("text", ["DEBUG", "", "/tmp/h\u00e9llo log", "x" * 1000])
def test_string_parameter_round_trip(saved_config: None, text: str) -> None:
    set_parameter(StringConfigParameter.LOGGING_LEVEL, text)
    assert get_parameter(StringConfigParameter.LOGGING_LEVEL) == text
    set_parameter(StringConfigParameter.LOG_DIR, "/var/log/x")
    assert get_parameter(StringConfigParameter.LOG_DIR) == "/var/log/x"
    assert get_parameter(StringConfigParameter.LOGGING_LEVEL) == text


@pytest.mark.parametrize(
    ("param", "value"),
    [
        (SizeTConfigParameter.PROFILE_STATS, True),
        (SizeTConfigParameter.PROFILE_STATS, 1.0),
        (SizeTConfigParameter.PROFILE_STATS, "1"),
        (SizeTConfigParameter.PROFILE_STATS, None),
        (BoolConfigParameter.PROFILE_NVTX, 1),
        (BoolConfigParameter.PROFILE_NVTX, "true"),
        (BoolConfigParameter.PROFILE_NVTX, None),
        (StringConfigParameter.LOG_DIR, b"/tmp"),
        (StringConfigParameter.LOG_DIR, 3),
    ],
)
def test_set_parameter_rejects_wrong_value_types(param: Any, value: Any) -> None:
    with pytest.raises(TypeError, match=param.name):
        set_parameter(param, value)


@pytest.mark.parametrize("param", [0, "LOG_DIR", None, hipfile.OpError.SUCCESS, 1.0])
def test_parameter_functions_reject_non_parameters(param: Any) -> None:
    with pytest.raises(TypeError, match="ConfigParameter"):
        get_parameter(param)
    with pytest.raises(TypeError, match="ConfigParameter"):
        set_parameter(param, 1)


def test_negative_size_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="PROFILE_STATS must be >= 0"):
        set_parameter(SizeTConfigParameter.PROFILE_STATS, -1)


def test_string_with_nul_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="NUL"):
        set_parameter(StringConfigParameter.LOG_DIR, "a\0b")


@pytest.mark.emulated
@pytest.mark.parametrize(
    ("param", "value"),
    [
        (SizeTConfigParameter.EXECUTION_MAX_IO_THREADS, 0),
        (SizeTConfigParameter.PROPERTIES_MAX_DIRECT_IO_SIZE_KB, 0),
        (SizeTConfigParameter.PROPERTIES_IO_BATCHSIZE, 2**32),
        (StringConfigParameter.LOGGING_LEVEL, "y" * 5000),
    ],
)
def test_library_refusals_are_invalid_value(saved_config: None, param: Any, value: Any) -> None:
    before = get_parameter(param)
    with pytest.raises(hipfile.InvalidValueError) as info:
        set_parameter(param, value)
    assert info.value.func is not None
    assert info.value.func.startswith("hipFileSetParameter")
    assert get_parameter(param) == before


@pytest.mark.emulated
def test_string_too_long_for_the_buffer(saved_config: None) -> None:
    set_parameter(StringConfigParameter.LOG_DIR, "/a/long/directory/name")
    with pytest.raises(hipfile.InvalidValueError) as info:
        _hipfile.get_parameter_string(int(StringConfigParameter.LOG_DIR), 8)
    assert info.value.func == "hipFileGetParameterString"
    with pytest.raises(ValueError, match="capacity"):
        _hipfile.get_parameter_string(int(StringConfigParameter.LOG_DIR), 0)


def test_size_parameter_too_large_for_size_t() -> None:
    with pytest.raises(OverflowError):
        set_parameter(SizeTConfigParameter.PROFILE_STATS, 2**64)
