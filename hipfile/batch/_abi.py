"""The hipFile structures as numpy dtypes, declared once for the Python side.

Every dtype is built from the sizes and offsets the compiled shim reports
(:func:`hipfile._lib._hipfile.abi_layout`), so the layout is stated in one
place only: the C header the shim is compiled against. The batch API fills
arrays of :data:`IO_PARAMS` and reads arrays of :data:`IO_EVENTS`; the tests
use the same dtypes to call the library directly.

Field names follow the package's keywords rather than the C member names
(``buffer`` for ``u.batch.devPtr_base``, ``buffer_offset`` for
``u.batch.devPtr_offset``). Pointer members are unsigned integers of pointer
width; ``hipFileIOEvents_t.ret`` is a ``size_t`` that holds a byte count or a
negative error, so it is declared signed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hipfile._lib import _hipfile

__all__ = ["DESCR", "DRIVER_PROPS_SIZE", "IO_EVENTS", "IO_PARAMS"]

_PTR = np.dtype(np.uintp)
_INT = np.dtype(np.int32)
_I64 = np.dtype(np.int64)

#: numpy type of each member, by the names ``abi_layout()`` uses.
_IO_PARAMS_TYPES: dict[str, np.dtype[Any]] = {
    "mode": _INT,
    "buffer": _PTR,
    "file_offset": _I64,
    "buffer_offset": _I64,
    "size": _PTR,
    "fh": _PTR,
    "opcode": _INT,
    "cookie": _PTR,
}
_IO_EVENTS_TYPES: dict[str, np.dtype[Any]] = {
    "cookie": _PTR, "status": _INT, "ret": np.dtype(np.intp)}


def _struct(size: int, offsets: dict[str, int], types: dict[str, np.dtype[Any]]) -> np.dtype[Any]:
    if set(offsets) != set(types):  # pragma: no cover - a shim out of step with this module
        raise ImportError(f"hipfile.batch._abi: the shim reports members {sorted(offsets)}, "
                          f"expected {sorted(types)}")
    names = sorted(offsets, key=offsets.__getitem__)
    return np.dtype({
        "names": names,
        "formats": [types[n] for n in names],
        "offsets": [offsets[n] for n in names],
        "itemsize": size,
    })


def _build() -> tuple[np.dtype[Any], np.dtype[Any], np.dtype[Any], int]:
    layout = _hipfile.abi_layout()
    size, members = layout["io_params"]
    params = _struct(size, members, _IO_PARAMS_TYPES)
    size, members = layout["io_events"]
    events = _struct(size, members, _IO_EVENTS_TYPES)
    size, handle, fs_ops = layout["descr"]
    # ``handle`` is a union of an ``int`` fd and a ``void *``: two fields
    # over the same bytes.
    descr = np.dtype({
        "names": ["type", "fd", "handle", "fs_ops"],
        "formats": [_INT, _INT, _PTR, _PTR],
        "offsets": [0, handle, handle, fs_ops],
        "itemsize": size,
    })
    return params, events, descr, int(layout["driver_props"])


#: ``hipFileIOParams_t``: mode, the ``batch`` member of the union (buffer,
#: file_offset, buffer_offset, size), fh, opcode, cookie.
#: ``hipFileIOEvents_t``: cookie, status, ret.
#: ``hipFileDescr_t``: type, handle (``fd`` or ``handle``), fs_ops.
#: ``sizeof(hipFileDriverProps_t)``.
IO_PARAMS, IO_EVENTS, DESCR, DRIVER_PROPS_SIZE = _build()
