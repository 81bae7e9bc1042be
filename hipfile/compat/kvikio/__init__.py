"""KvikIO's Python API on hipFile: ``from hipfile.compat import kvikio``.

* :class:`CuFile` with KvikIO's flags (``"r"``, ``"w"``, ``"r+"``, ``"w+"``)
  and calls: ``read``/``write``/``pread``/``pwrite(buf, size=None,
  file_offset=0, task_size=None)``, ``raw_read``/``raw_write``,
  ``raw_read_async``/``raw_write_async`` (an :class:`IOFutureStream` with
  ``check_bytes_done()``), ``close``, ``closed``, ``fileno``,
  ``open_flags``;
* :class:`IOFuture` (``get()``, ``done()``);
* :mod:`hipfile.compat.kvikio.defaults` under KvikIO's key names
  (``num_threads``, ``task_size``, ``compat_mode``, ``gds_threshold``):
  ``get``, ``set`` and its context-manager form;
* :class:`CompatMode`.

Errors are KvikIO's :class:`RuntimeError` and this package's typed
exceptions at once (see :mod:`hipfile.compat.kvikio.cufile`). What KvikIO
offers beyond files on a local file system (remote files, ``Mmap``, Zarr,
page-cache tools, bounce buffers) is not here.
"""

from __future__ import annotations

from hipfile.compat.kvikio import defaults
from hipfile.compat.kvikio.cufile import CuFile, IOFuture, IOFutureStream
from hipfile.compat.kvikio.defaults import CompatMode

__all__ = ["CompatMode", "CuFile", "IOFuture", "IOFutureStream", "defaults"]
