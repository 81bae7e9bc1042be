"""Enumerations of the hipFile C ABI, as ``IntEnum``/``IntFlag`` with the C
prefix stripped (``hipFileInvalidValue`` -> ``OpError.INVALID_VALUE``).

Defined in :mod:`hipfile._lib._enums`, below the compiled core, and public
here.
"""

from __future__ import annotations

from hipfile._lib._enums import *  # noqa: F403  (the names below)

__all__ = [
    "BASE_ERR",
    "BatchMode",
    "BoolConfigParameter",
    "DriverControlFlags",
    "DriverStatusFlags",
    "FeatureFlags",
    "FileHandleType",
    "OpError",
    "Opcode",
    "SizeTConfigParameter",
    "Status",
    "StreamFlags",
    "StringConfigParameter",
]

# The public home of the classes (reprs, pickles and the documentation).
for _name in __all__[1:]:
    globals()[_name].__module__ = __name__
del _name
