"""KvikIO's Python API on hipFile: ``from hipfile.compat import kvikio``.

* :class:`CuFile` with KvikIO's flags (``"r"``, ``"w"``, ``"r+"``, ``"w+"``)
  and calls: ``read``/``write``/``pread``/``pwrite(buf, size=None,
  file_offset=0, task_size=None)``, ``raw_read``/``raw_write``,
  ``raw_read_async``/``raw_write_async`` (an :class:`IOFutureStream` with
  ``check_bytes_done()``), ``close``, ``closed``, ``fileno``,
  ``open_flags``, ``is_direct_io_supported``;
* :class:`IOFuture` (``get()``, ``done()``);
* :class:`Mmap`: a file read through a memory mapping into host or device
  memory (``read``, ``pread``, ``file_size``, ``close``, ``closed()``);
* :mod:`~hipfile.compat.kvikio.defaults` under every KvikIO key
  (``get``, ``set`` and its context-manager form), and
  :class:`CompatMode`;
* :mod:`~hipfile.compat.kvikio.cufile_driver` (``properties``, ``get``,
  ``set``, ``driver_open``/``driver_close``, ``libcufile_version``);
* :mod:`~hipfile.compat.kvikio.numpy` (``fromfile``, ``tofile``,
  ``LikeWrapper``);
* :func:`memory_register`/:func:`memory_deregister`,
  :func:`stream_register`/:func:`stream_deregister`,
  :func:`bounce_buffer_free`;
* the page-cache tools :func:`get_page_cache_info`,
  :func:`drop_file_page_cache`, :func:`drop_system_page_cache` and
  :func:`clear_page_cache`;
* :mod:`~hipfile.compat.kvikio.utils` (``kvikio_deprecation_notice``,
  ``kvikio_deprecate_module``);
* :func:`is_remote_file_available` (False: there are no remote files here),
  ``__version__`` (this package's version: the compat layer is part of it;
  :data:`__kvikio_version__` names the KvikIO release whose Python API it
  follows) and ``__git_commit__`` (empty, as in a KvikIO built without it).

Errors are KvikIO's :class:`RuntimeError` and this package's typed
exceptions at once (see :mod:`hipfile.compat.kvikio.cufile`). KvikIO's
remote files (``RemoteFile``) and Zarr support are not here.
"""

from __future__ import annotations

from hipfile import __version__
from hipfile.compat.kvikio import cufile_driver, defaults, numpy, utils
from hipfile.compat.kvikio.buffer import bounce_buffer_free, memory_deregister, memory_register
from hipfile.compat.kvikio.cufile import (
    CuFile,
    IOFuture,
    IOFutureStream,
    clear_page_cache,
    drop_file_page_cache,
    drop_system_page_cache,
    get_page_cache_info,
)
from hipfile.compat.kvikio.defaults import CompatMode
from hipfile.compat.kvikio.mmap import Mmap
from hipfile.compat.kvikio.remote_file import is_remote_file_available
from hipfile.compat.kvikio.stream import stream_deregister, stream_register

#: The commit this package was built from, where known ("" otherwise, as
#: KvikIO has it when built without one).
__git_commit__ = ""

#: The KvikIO release whose Python API this module follows.
__kvikio_version__ = "26.10.00"

__all__ = [
    "CompatMode",
    "CuFile",
    "IOFuture",
    "IOFutureStream",
    "Mmap",
    "__git_commit__",
    "__kvikio_version__",
    "__version__",
    "bounce_buffer_free",
    "clear_page_cache",
    "cufile_driver",
    "defaults",
    "drop_file_page_cache",
    "drop_system_page_cache",
    "get_page_cache_info",
    "is_remote_file_available",
    "memory_deregister",
    "memory_register",
    "numpy",
    "stream_deregister",
    "stream_register",
    "utils",
]
