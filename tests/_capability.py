"""Probes for functions a libhipfile declares but may not implement, or
does not export (the statistics API before hipFile 0.5.0).

Some releases export a function that only returns ``hipFileInternalError``
(5030). A test that needs such a function is marked
``@pytest.mark.needs("hipFileX")``; the conftest calls the function once
through the binding and skips the test, naming the function, when the
library answers 5030. The probe is by capability, never by platform name.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import hipfile
from hipfile._lib import _hipfile

NOT_IMPLEMENTED = int(hipfile.OpError.INTERNAL_ERROR)


def _with_driver(call: Callable[[], object]) -> Callable[[], object]:
    def run() -> object:
        _hipfile.driver_open()
        try:
            return call()
        finally:
            _hipfile.driver_close()
    return run


def _batch_status() -> object:
    batch = _hipfile.batch_io_set_up(1)
    try:
        return _hipfile.batch_io_get_status(batch, 0, 0, 0, 0)
    finally:
        _hipfile.batch_io_destroy(batch)


def _batch_cancel() -> object:
    batch = _hipfile.batch_io_set_up(1)
    try:
        return _hipfile.batch_io_cancel(batch)
    finally:
        _hipfile.batch_io_destroy(batch)


_PROBES: dict[str, Callable[[], object]] = {
    "hipFileBatchIOGetStatus": _with_driver(_batch_status),
    "hipFileBatchIOCancel": _with_driver(_batch_cancel),
    "hipFileDriverGetProperties": _with_driver(_hipfile.driver_get_properties),
    "hipFileGetParameterSizeT": lambda: _hipfile.get_parameter_size_t(
        int(hipfile.SizeTConfigParameter.POLLTHRESHOLD_SIZE_KB)),
    "hipFileGetParameterBool": lambda: _hipfile.get_parameter_bool(
        int(hipfile.BoolConfigParameter.FORCE_COMPAT_MODE)),
    # hipFile 0.5.0 and later (the statistics API); exported is enough
    "hipFileStatsCreateContext": lambda: None,
}


@functools.cache
def implemented(func: str) -> bool:
    """Whether ``func`` does something other than answer 5030 (probed once)."""
    if not _hipfile.has_symbol(func):
        return False
    try:
        _PROBES[func]()
    except hipfile.HipFileException as e:
        return e.hipfile_err != NOT_IMPLEMENTED
    except hipfile.HipFileSymbolNotFound:
        return False
    return True


def skip_reason(func: str) -> str | None:
    """Why a test needing ``func`` is skipped, or None when it can run."""
    if func not in _PROBES:
        raise KeyError(f"no capability probe for {func}")
    if implemented(func):
        return None
    if not _hipfile.has_symbol(func):
        return (f"{func} is not exported by this libhipfile (hipFile "
                f"{'.'.join(map(str, _hipfile.get_version()))})")
    return (f"{func} is not implemented by this libhipfile "
            f"(hipFile {'.'.join(map(str, _hipfile.get_version()))} returns "
            f"hipFileInternalError {NOT_IMPLEMENTED})")
