"""Enumerations: every value as the hipFile C ABI numbers it."""

from __future__ import annotations

from enum import IntEnum, IntFlag

import pytest

import hipfile
from hipfile import enums
from hipfile._lib import _hipfile

# hipFileOpError_t in the ABI's order (5021 and 5032 are unused).
OP_ERRORS = {
    "SUCCESS": 0,
    "DRIVER_NOT_INITIALIZED": 5001,
    "DRIVER_INVALID_PROPS": 5002,
    "DRIVER_UNSUPPORTED_LIMIT": 5003,
    "DRIVER_VERSION_MISMATCH": 5004,
    "DRIVER_VERSION_READ_ERROR": 5005,
    "DRIVER_CLOSING": 5006,
    "PLATFORM_NOT_SUPPORTED": 5007,
    "IO_NOT_SUPPORTED": 5008,
    "DEVICE_NOT_SUPPORTED": 5009,
    "DRIVER_ERROR": 5010,
    "HIP_DRIVER_ERROR": 5011,
    "HIP_POINTER_INVALID": 5012,
    "HIP_MEMORY_TYPE_INVALID": 5013,
    "HIP_POINTER_RANGE_ERROR": 5014,
    "HIP_CONTEXT_MISMATCH": 5015,
    "INVALID_MAPPING_SIZE": 5016,
    "INVALID_MAPPING_RANGE": 5017,
    "INVALID_FILE_TYPE": 5018,
    "INVALID_FILE_OPEN_FLAG": 5019,
    "DIO_NOT_SET": 5020,
    "INVALID_VALUE": 5022,
    "MEMORY_ALREADY_REGISTERED": 5023,
    "MEMORY_NOT_REGISTERED": 5024,
    "PERMISSION_DENIED": 5025,
    "DRIVER_ALREADY_OPEN": 5026,
    "HANDLE_NOT_REGISTERED": 5027,
    "HANDLE_ALREADY_REGISTERED": 5028,
    "DEVICE_NOT_FOUND": 5029,
    "INTERNAL_ERROR": 5030,
    "GET_NEW_FD_FAILED": 5031,
    "DRIVER_SETUP_ERROR": 5033,
    "IO_DISABLED": 5034,
    "BATCH_SUBMIT_FAILED": 5035,
    "GPU_MEMORY_PINNING_FAILED": 5036,
    "BATCH_FULL": 5037,
    "ASYNC_NOT_SUPPORTED": 5038,
    "IO_MAX_ERROR": 5039,
}

TABLES: list[tuple[type, type, dict[str, int]]] = [
    (enums.OpError, IntEnum, OP_ERRORS),
    (enums.FileHandleType, IntEnum, {"OPAQUE_FD": 1, "OPAQUE_WIN32": 2, "USERSPACE_FS": 3}),
    (
        enums.StreamFlags,
        IntFlag,
        {
            "NONE": 0,
            "FIXED_BUF_OFFSET": 1,
            "FIXED_FILE_OFFSET": 2,
            "FIXED_FILE_SIZE": 4,
            "PAGE_ALIGNED_INPUTS": 8,
            "MASK": 0xF,
        },
    ),
    (
        enums.DriverStatusFlags,
        IntFlag,
        {
            "LUSTRE_SUPPORTED": 1 << 0,
            "WEKAFS_SUPPORTED": 1 << 1,
            "NFS_SUPPORTED": 1 << 2,
            "GPFS_SUPPORTED": 1 << 3,
            "NVME_SUPPORTED": 1 << 4,
            "NVMEOF_SUPPORTED": 1 << 5,
            "SCSI_SUPPORTED": 1 << 6,
            "SCALEFLUX_CSD_SUPPORTED": 1 << 7,
            "NVMESH_SUPPORTED": 1 << 8,
            "BEEGFS_SUPPORTED": 1 << 9,
            "NVME_P2P_SUPPORTED": 1 << 11,
            "SCATEFS_SUPPORTED": 1 << 12,
        },
    ),
    (enums.DriverControlFlags, IntFlag, {"USE_POLL_MODE": 1, "ALLOW_COMPAT_MODE": 2}),
    (
        enums.FeatureFlags,
        IntFlag,
        {
            "DYN_ROUTING_SUPPORTED": 1,
            "BATCH_IO_SUPPORTED": 2,
            "STREAMS_SUPPORTED": 4,
            "PARALLEL_IO_SUPPORTED": 8,
        },
    ),
    (enums.Opcode, IntEnum, {"READ": 0, "WRITE": 1}),
    (enums.BatchMode, IntEnum, {"BATCH": 1}),
    (
        enums.Status,
        IntFlag,
        {
            "WAITING": 1,
            "PENDING": 2,
            "INVALID": 4,
            "CANCELED": 8,
            "COMPLETE": 16,
            "TIMEOUT": 32,
            "FAILED": 64,
        },
    ),
    (
        enums.SizeTConfigParameter,
        IntEnum,
        {
            "PROFILE_STATS": 0,
            "EXECUTION_MAX_IO_QUEUE_DEPTH": 1,
            "EXECUTION_MAX_IO_THREADS": 2,
            "EXECUTION_MIN_IO_THRESHOLD_SIZE_KB": 3,
            "EXECUTION_MAX_REQUEST_PARALLELISM": 4,
            "PROPERTIES_MAX_DIRECT_IO_SIZE_KB": 5,
            "PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB": 6,
            "PROPERTIES_PER_BUFFER_CACHE_SIZE_KB": 7,
            "PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB": 8,
            "PROPERTIES_IO_BATCHSIZE": 9,
            "POLLTHRESHOLD_SIZE_KB": 10,
            "PROPERTIES_BATCH_IO_TIMEOUT_MS": 11,
        },
    ),
    (
        enums.BoolConfigParameter,
        IntEnum,
        {
            "PROPERTIES_USE_POLL_MODE": 0,
            "PROPERTIES_ALLOW_COMPAT_MODE": 1,
            "FORCE_COMPAT_MODE": 2,
            "FS_MISC_API_CHECK_AGGRESSIVE": 3,
            "EXECUTION_PARALLEL_IO": 4,
            "PROFILE_NVTX": 5,
            "PROPERTIES_ALLOW_SYSTEM_MEMORY": 6,
            "USE_PCIP2PDMA": 7,
            "PREFER_IO_URING": 8,
            "FORCE_ODIRECT_MODE": 9,
            "SKIP_TOPOLOGY_DETECTION": 10,
            "STREAM_MEMOPS_BYPASS": 11,
        },
    ),
    (
        enums.StringConfigParameter,
        IntEnum,
        {"LOGGING_LEVEL": 0, "ENV_LOGFILE_PATH": 1, "LOG_DIR": 2},
    ),
]


@pytest.mark.parametrize(("cls", "base", "table"), TABLES, ids=lambda v: getattr(v, "__name__", ""))
def test_values_match_the_abi(cls: type, base: type, table: dict[str, int]) -> None:
    assert issubclass(cls, base)
    assert {name: int(m.value) for name, m in cls.__members__.items()} == table


@pytest.mark.parametrize(("cls", "base", "table"), TABLES, ids=lambda v: getattr(v, "__name__", ""))
def test_members_are_ints(cls: type, base: type, table: dict[str, int]) -> None:
    for name, value in table.items():
        member = cls[name]
        assert isinstance(member, int)
        assert member == value
        assert cls(value) is member


def test_base_err() -> None:
    assert enums.BASE_ERR == 5000
    assert enums.OpError.DRIVER_NOT_INITIALIZED == enums.BASE_ERR + 1


def test_unused_error_numbers_are_not_members() -> None:
    for value in (5021, 5032):
        with pytest.raises(ValueError):
            enums.OpError(value)


def test_flags_combine() -> None:
    both = enums.StreamFlags.FIXED_BUF_OFFSET | enums.StreamFlags.FIXED_FILE_SIZE
    assert both == 5
    assert enums.StreamFlags.FIXED_FILE_SIZE in both
    assert enums.StreamFlags.FIXED_FILE_OFFSET not in both
    assert isinstance(both, enums.StreamFlags)
    assert enums.Status.COMPLETE | enums.Status.FAILED == 80


def test_reexported_from_the_package() -> None:
    for name in enums.__all__:
        assert getattr(hipfile, name) is getattr(enums, name)


@pytest.mark.emulated
def test_library_knows_every_error_code() -> None:
    """Every code has its own text in the loaded library (same numbering)."""
    texts = {code: _hipfile.get_op_error_string(int(code)) for code in enums.OpError}
    unknown = _hipfile.get_op_error_string(5021)
    for code, text in texts.items():
        if code is enums.OpError.IO_MAX_ERROR:
            continue
        assert text and text != unknown, code
    assert len({t for c, t in texts.items() if c is not enums.OpError.IO_MAX_ERROR}) == len(
        texts
    ) - 1
