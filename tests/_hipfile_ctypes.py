"""hipFile's C functions declared for ctypes, with the standard library only.

One table serves both the ABI tests (``tests/abi/_abi_calls.py``, which load
the active platform's library) and the differential cases
(``tests/_differential_cases.py``, which run in a process without hipfile).
Pointers to hipFile's structures are ``void *`` unless the caller passes the
ctypes pointer type it wants to build them with.
"""

from __future__ import annotations

import ctypes
from typing import Any

P = ctypes.c_void_p
SZ = ctypes.c_size_t
OFF = ctypes.c_int64


class Error(ctypes.Structure):
    """``hipFileError_t``."""

    _fields_ = [("err", ctypes.c_int), ("hip_drv_err", ctypes.c_int)]


def signatures(props: Any = P, descr: Any = P, io_params: Any = P,
               io_events: Any = P) -> dict[str, tuple[Any, list[Any]]]:
    """Every hipFile function: name -> (restype, argtypes).

    ``props``, ``descr``, ``io_params`` and ``io_events`` are the argument
    types of the pointers to ``hipFileDriverProps_t``, ``hipFileDescr_t``,
    ``hipFileIOParams_t`` and ``hipFileIOEvents_t``.
    """
    uint_p = ctypes.POINTER(ctypes.c_uint)
    return {
        "hipFileGetVersion": (Error, [uint_p] * 3),
        "hipFileGetOpErrorString": (ctypes.c_char_p, [ctypes.c_int]),
        "hipFileDriverOpen": (Error, []),
        "hipFileDriverClose": (Error, []),
        "hipFileUseCount": (ctypes.c_int64, []),
        "hipFileDriverGetProperties": (Error, [props]),
        "hipFileDriverSetPollMode": (Error, [ctypes.c_bool, SZ]),
        "hipFileDriverSetMaxDirectIOSize": (Error, [SZ]),
        "hipFileDriverSetMaxCacheSize": (Error, [SZ]),
        "hipFileDriverSetMaxPinnedMemSize": (Error, [SZ]),
        "hipFileGetParameterSizeT": (Error, [ctypes.c_int, ctypes.POINTER(SZ)]),
        "hipFileGetParameterBool": (Error, [ctypes.c_int, ctypes.POINTER(ctypes.c_bool)]),
        "hipFileGetParameterString": (Error, [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]),
        "hipFileSetParameterSizeT": (Error, [ctypes.c_int, SZ]),
        "hipFileSetParameterBool": (Error, [ctypes.c_int, ctypes.c_bool]),
        "hipFileSetParameterString": (Error, [ctypes.c_int, ctypes.c_char_p]),
        "hipFileHandleRegister": (Error, [ctypes.POINTER(P), descr]),
        "hipFileHandleDeregister": (None, [P]),
        "hipFileBufRegister": (Error, [P, SZ, ctypes.c_int]),
        "hipFileBufDeregister": (Error, [P]),
        "hipFileRead": (ctypes.c_ssize_t, [P, P, SZ, OFF, OFF]),
        "hipFileWrite": (ctypes.c_ssize_t, [P, P, SZ, OFF, OFF]),
        "hipFileReadAsync": (Error, [P, P, P, P, P, P, P]),
        "hipFileWriteAsync": (Error, [P, P, P, P, P, P, P]),
        "hipFileStreamRegister": (Error, [P, ctypes.c_uint]),
        "hipFileStreamDeregister": (Error, [P]),
        "hipFileBatchIOSetUp": (Error, [ctypes.POINTER(P), ctypes.c_uint]),
        "hipFileBatchIOSubmit": (Error, [P, ctypes.c_uint, io_params, ctypes.c_uint]),
        "hipFileBatchIOGetStatus": (Error, [P, ctypes.c_uint, uint_p, io_events, P]),
        "hipFileBatchIOCancel": (Error, [P]),
        "hipFileBatchIODestroy": (None, [P]),
    }
