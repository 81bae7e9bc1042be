"""Drop-in modules for code written against other GPU-direct I/O packages.

* :mod:`hipfile.compat.cufile`: the cufile-python API (``CuFileDriver``,
  ``CuFile``) on hipFile, so that ``import cufile`` becomes
  ``from hipfile.compat import cufile``.

Nothing here is imported by ``import hipfile``.
"""

from __future__ import annotations

__all__ = ["cufile"]
