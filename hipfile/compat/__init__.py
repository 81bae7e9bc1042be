"""Drop-in modules for code written against other GPU-direct I/O packages.

* :mod:`hipfile.compat.cufile`: the cufile-python API (``CuFileDriver``,
  ``CuFile``, and ``cufile.bindings`` as :mod:`hipfile.compat.cufile.bindings`)
  on hipFile, so that ``import cufile`` becomes
  ``from hipfile.compat import cufile``.
* :mod:`hipfile.compat.kvikio`: KvikIO's ``CuFile``, ``Mmap``,
  ``IOFuture``, ``kvikio.defaults``, ``kvikio.cufile_driver``,
  ``kvikio.numpy`` and its registration and page-cache functions, so that
  ``import kvikio`` becomes
  ``from hipfile.compat import kvikio``.

Nothing here is imported by ``import hipfile``.
"""

from __future__ import annotations

__all__ = ["cufile", "kvikio"]
