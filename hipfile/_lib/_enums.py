"""Enumerations of the hipFile C ABI, as ``IntEnum``/``IntFlag`` with the C
prefix stripped (``hipFileInvalidValue`` -> ``OpError.INVALID_VALUE``)."""

from __future__ import annotations

from enum import IntEnum, IntFlag
from typing import TypeVar

_E = TypeVar("_E", bound=IntEnum)


def member_or_int(kind: type[_E], value: int) -> _E | int:
    """``kind(value)`` where ``value`` is one of its members, else ``value``
    itself (a code that a newer library added stays readable)."""
    try:
        return kind(value)
    except ValueError:
        return value


#: First hipFile error number (``HIPFILE_BASE_ERR``).
BASE_ERR = 5000


class OpError(IntEnum):
    """``hipFileOpError_t``: hipFile's status codes."""

    SUCCESS = 0
    DRIVER_NOT_INITIALIZED = 5001
    DRIVER_INVALID_PROPS = 5002
    DRIVER_UNSUPPORTED_LIMIT = 5003
    DRIVER_VERSION_MISMATCH = 5004
    DRIVER_VERSION_READ_ERROR = 5005
    DRIVER_CLOSING = 5006
    PLATFORM_NOT_SUPPORTED = 5007
    IO_NOT_SUPPORTED = 5008
    DEVICE_NOT_SUPPORTED = 5009
    DRIVER_ERROR = 5010
    HIP_DRIVER_ERROR = 5011
    HIP_POINTER_INVALID = 5012
    HIP_MEMORY_TYPE_INVALID = 5013
    HIP_POINTER_RANGE_ERROR = 5014
    HIP_CONTEXT_MISMATCH = 5015
    INVALID_MAPPING_SIZE = 5016
    INVALID_MAPPING_RANGE = 5017
    INVALID_FILE_TYPE = 5018
    INVALID_FILE_OPEN_FLAG = 5019
    DIO_NOT_SET = 5020
    INVALID_VALUE = 5022
    MEMORY_ALREADY_REGISTERED = 5023
    MEMORY_NOT_REGISTERED = 5024
    PERMISSION_DENIED = 5025
    DRIVER_ALREADY_OPEN = 5026
    HANDLE_NOT_REGISTERED = 5027
    HANDLE_ALREADY_REGISTERED = 5028
    DEVICE_NOT_FOUND = 5029
    INTERNAL_ERROR = 5030
    GET_NEW_FD_FAILED = 5031
    DRIVER_SETUP_ERROR = 5033
    IO_DISABLED = 5034
    BATCH_SUBMIT_FAILED = 5035
    GPU_MEMORY_PINNING_FAILED = 5036
    BATCH_FULL = 5037
    ASYNC_NOT_SUPPORTED = 5038
    IO_MAX_ERROR = 5039


class FileHandleType(IntEnum):
    """``hipFileFileHandleType_t``: what a ``hipFileDescr_t`` holds."""

    OPAQUE_FD = 1
    OPAQUE_WIN32 = 2
    USERSPACE_FS = 3


class StreamFlags(IntFlag):
    """Flags of ``hipFileStreamRegister``: which async inputs are fixed at submit."""

    NONE = 0
    FIXED_BUF_OFFSET = 1
    FIXED_FILE_OFFSET = 2
    FIXED_FILE_SIZE = 4
    PAGE_ALIGNED_INPUTS = 8
    MASK = 0xF


class DriverStatusFlags(IntFlag):
    """Bits of ``hipFileDriverProps_t.nvfs.driver_status_flags`` (as bit values)."""

    LUSTRE_SUPPORTED = 1 << 0
    WEKAFS_SUPPORTED = 1 << 1
    NFS_SUPPORTED = 1 << 2
    GPFS_SUPPORTED = 1 << 3
    NVME_SUPPORTED = 1 << 4
    NVMEOF_SUPPORTED = 1 << 5
    SCSI_SUPPORTED = 1 << 6
    SCALEFLUX_CSD_SUPPORTED = 1 << 7
    NVMESH_SUPPORTED = 1 << 8
    BEEGFS_SUPPORTED = 1 << 9
    NVME_P2P_SUPPORTED = 1 << 11
    SCATEFS_SUPPORTED = 1 << 12


class DriverControlFlags(IntFlag):
    """Bits of ``hipFileDriverProps_t.nvfs.driver_control_flags`` (as bit values)."""

    USE_POLL_MODE = 1 << 0
    ALLOW_COMPAT_MODE = 1 << 1


class FeatureFlags(IntFlag):
    """Bits of ``hipFileDriverProps_t.feature_flags`` (as bit values)."""

    DYN_ROUTING_SUPPORTED = 1 << 0
    BATCH_IO_SUPPORTED = 1 << 1
    STREAMS_SUPPORTED = 1 << 2
    PARALLEL_IO_SUPPORTED = 1 << 3


class Opcode(IntEnum):
    """``hipFileOpcode_t``: the operation of a batch entry."""

    READ = 0
    WRITE = 1


class BatchMode(IntEnum):
    """``hipFileBatchMode_t``."""

    BATCH = 1


class Status(IntFlag):
    """``hipFileStatus_t``: the state of a batch entry."""

    WAITING = 1
    PENDING = 2
    INVALID = 4
    CANCELED = 8
    COMPLETE = 16
    TIMEOUT = 32
    FAILED = 64


class SizeTConfigParameter(IntEnum):
    """``size_t`` configuration parameters (``hipFileGet/SetParameterSizeT``)."""

    PROFILE_STATS = 0
    EXECUTION_MAX_IO_QUEUE_DEPTH = 1
    EXECUTION_MAX_IO_THREADS = 2
    EXECUTION_MIN_IO_THRESHOLD_SIZE_KB = 3
    EXECUTION_MAX_REQUEST_PARALLELISM = 4
    PROPERTIES_MAX_DIRECT_IO_SIZE_KB = 5
    PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB = 6
    PROPERTIES_PER_BUFFER_CACHE_SIZE_KB = 7
    PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB = 8
    PROPERTIES_IO_BATCHSIZE = 9
    POLLTHRESHOLD_SIZE_KB = 10
    PROPERTIES_BATCH_IO_TIMEOUT_MS = 11


class BoolConfigParameter(IntEnum):
    """``bool`` configuration parameters (``hipFileGet/SetParameterBool``)."""

    PROPERTIES_USE_POLL_MODE = 0
    PROPERTIES_ALLOW_COMPAT_MODE = 1
    FORCE_COMPAT_MODE = 2
    FS_MISC_API_CHECK_AGGRESSIVE = 3
    EXECUTION_PARALLEL_IO = 4
    PROFILE_NVTX = 5
    PROPERTIES_ALLOW_SYSTEM_MEMORY = 6
    USE_PCIP2PDMA = 7
    PREFER_IO_URING = 8
    FORCE_ODIRECT_MODE = 9
    SKIP_TOPOLOGY_DETECTION = 10
    STREAM_MEMOPS_BYPASS = 11


class StringConfigParameter(IntEnum):
    """String configuration parameters (``hipFileGet/SetParameterString``)."""

    LOGGING_LEVEL = 0
    ENV_LOGFILE_PATH = 1
    LOG_DIR = 2
