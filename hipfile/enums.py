"""Enumerations of the hipFile C ABI, as ``IntEnum``/``IntFlag`` with the C
prefix stripped (``hipFileInvalidValue`` -> ``OpError.INVALID_VALUE``).

Defined in :mod:`hipfile._lib._enums`, below the compiled core, and public
here.
"""

from __future__ import annotations

from hipfile._lib import _enums
from hipfile._lib._enums import *  # noqa: F403  (the public names: _enums.__all__)

__all__ = list(_enums.__all__)

# The public home of the classes (reprs, pickles and the documentation).
for _name in __all__:
    if isinstance(getattr(_enums, _name), type):
        getattr(_enums, _name).__module__ = __name__
del _name
