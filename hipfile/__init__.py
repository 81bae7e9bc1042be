"""hipfile: Python bindings for AMD hipFile, GPU-direct file I/O for ROCm.

Quick start::

    import hipfile
    with hipfile.Driver(), hipfile.open("weights.bin", "rb") as fh:
        n = fh.read(device_array)              # any device buffer object

No GPU? Set ``HIPFILE_PLATFORM=emulated`` before Python starts: the package
ships HIP and hipFile emulated on the CPU (:mod:`hipfile.platforms`).

The main names (``help(hipfile.<name>)`` documents each):

- files: :func:`open`, :class:`FileHandle` (``read``/``write``, ``pread``/
  ``pwrite`` futures, ``read_async``/``write_async``, the stream-ordered
  ``pread_async_ranges`` with :class:`StreamIOHandle`);
- memory and streams: :class:`Buffer`, :class:`Stream`;
- the driver: :class:`Driver`, :func:`use_count`, :func:`get_parameter`,
  :func:`set_parameter`, :func:`driver_get_properties`;
- batches: :class:`BatchIO`, :func:`batch_read`, :func:`batch_write`;
- statistics: :class:`StatsContext`, :class:`StatsReport`;
- settings: :mod:`hipfile.defaults`; errors: :mod:`hipfile.errors`
  (:class:`HipFileException` and its subclasses); hipFile's enums:
  :mod:`hipfile.enums`; drop-ins for other APIs: :mod:`hipfile.compat`;
- safetensors files: :mod:`hipfile.safetensors` (``load_file``,
  ``save_file`` and ``safe_open`` file to GPU with hipFile, and
  ``hipfile.safetensors.torch``/``.numpy``, drop-ins for safetensors'
  modules of those names).

The C library is loaded on first use (``HIPFILE_LIBRARY``, ``ROCM_PATH/lib``,
``/opt/rocm/lib``, then the system loader); importing never needs it.
"""

from hipfile import platforms as _platforms

_platforms._activate_from_environment()

from hipfile import defaults, errors, stats  # noqa: E402
from hipfile.async_io import (  # noqa: E402
    AsyncIOHandle,
    Completion,
    pool_stats,
    reserve_pool,
    supports_async,
    trim_pool,
)
from hipfile.batch import BatchEvent, BatchIO, batch_read, batch_write  # noqa: E402
from hipfile.buffer import Buffer  # noqa: E402
from hipfile.driver import (  # noqa: E402
    Driver,
    process_driver,
    release_process_driver,
    use_count,
)
from hipfile.engine import (  # noqa: E402
    StreamIOHandle,
    pread_async_addresses,
    pread_async_scatter,
    pwrite_async_addresses,
    pwrite_async_gather,
)
from hipfile.enums import (  # noqa: E402
    BASE_ERR,
    BatchMode,
    BoolConfigParameter,
    DriverControlFlags,
    DriverStatusFlags,
    FeatureFlags,
    FileHandleType,
    Opcode,
    OpError,
    SizeTConfigParameter,
    Status,
    StreamFlags,
    StringConfigParameter,
)
from hipfile.errors import *  # noqa: E402, F403 (exported through errors.__all__)
from hipfile.file import FileHandle, open  # noqa: E402
from hipfile.parallel import (  # noqa: E402
    IOFuture,
    get_num_threads,
    pread,
    pwrite,
    set_num_threads,
)
from hipfile.properties import (  # noqa: E402
    DriverProperties,
    driver_get_properties,
    get_parameter,
    get_version,
    set_parameter,
)

# The statistics classes, re-exported the PEP 484 way (``X as X``, kept in one
# statement); __all__ takes their names from stats.__all__.
# isort: off
from hipfile.stats import (  # noqa: E402
    PathStats as PathStats,
    StatsContext as StatsContext,
    StatsError as StatsError,
    StatsInvalidArgumentError as StatsInvalidArgumentError,
    StatsReport as StatsReport,
    StatsReportError as StatsReportError,
    StatsStatus as StatsStatus,
    StatsTargetNotAccessibleError as StatsTargetNotAccessibleError,
    StatsTargetNotFoundError as StatsTargetNotFoundError,
)
# isort: on
from hipfile.stream import Stream  # noqa: E402

#: This distribution's version (``importlib.metadata.version("hipfile")``).
#: Upstream's ``hipfile.__version__`` is the hipFile C library version its
#: bindings were compiled against; the version of the library loaded here is
#: :func:`get_version`.
__version__ = "0.1.0"

__all__ = [
    "BASE_ERR",
    "AsyncIOHandle",
    "BatchEvent",
    "BatchIO",
    "BatchMode",
    "BoolConfigParameter",
    "Buffer",
    "Completion",
    "Driver",
    "DriverControlFlags",
    "DriverProperties",
    "DriverStatusFlags",
    "FeatureFlags",
    "FileHandle",
    "FileHandleType",
    "IOFuture",
    "OpError",
    "Opcode",
    "SizeTConfigParameter",
    "Status",
    "Stream",
    "StreamFlags",
    "StreamIOHandle",
    "StringConfigParameter",
    "__version__",
    "batch_read",
    "batch_write",
    "defaults",
    "driver_get_properties",
    "get_num_threads",
    "get_parameter",
    "get_version",
    "open",
    "pool_stats",
    "pread",
    "pread_async_addresses",
    "pread_async_scatter",
    "process_driver",
    "pwrite",
    "pwrite_async_addresses",
    "pwrite_async_gather",
    "release_process_driver",
    "reserve_pool",
    "set_num_threads",
    "set_parameter",
    "supports_async",
    "trim_pool",
    "use_count",
]
# The exceptions are exported as hipfile.errors lists them, and the
# statistics classes as hipfile.stats does (its report() stays
# hipfile.stats.report).
__all__ += errors.__all__
__all__ += [name for name in stats.__all__ if name != "report"]


def __dir__() -> list[str]:
    """The module's names. For ``help(hipfile)`` only, classes are left out:
    the docstring's overview, not every class's pages (``help(hipfile.X)``
    documents each)."""
    names = sorted(globals())
    if _asked_by_pydoc():
        return [n for n in names if not isinstance(globals()[n], type)]
    return names


def _asked_by_pydoc() -> bool:
    import sys
    from types import FrameType

    try:
        frame: FrameType | None = sys._getframe(2)
    except ValueError:
        return False
    for _ in range(4):
        if frame is None:
            return False
        if frame.f_globals.get("__name__") == "pydoc":
            return True
        frame = frame.f_back
    return False
