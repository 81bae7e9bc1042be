# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: embedsignature=True
"""The stream-ordered parallel engine: FileHandle.pread_async/pwrite_async
and their _ranges forms (C threads in src/engine.c move the bytes)."""

cimport cython
from libc.stdint cimport int64_t, uint64_t, uintptr_t
from libc.string cimport memset
from libc.stdlib cimport malloc, calloc, free
from cpython.ref cimport PyObject
import os
import time as _time

from hipfile._lib.chipfile cimport *
from hipfile._lib._bindings cimport bind, p_hipFileRead, p_hipFileWrite
from hipfile._lib._core cimport (
    _as_index,
    _BufferCore,
    _FileCore,
    _io_range,
    _stream_handle,
    submit_preamble,
)
from hipfile._lib cimport _core, _pool
from hipfile._lib._runtime cimport (
    HIP_ERROR_NOT_READY,
    HIP_SUCCESS,
    WAIT_STREAM,
    _as_timeout,
    _c_event_query,
    _capsule_fn,
    _current_device,
    _destroy_event,
    _exiting,
    _fork_gen,
    _forked,
    _hip_fail,
    _hipapi,
    _load_hip_capi,
    _pointer_device,
    _stream_device,
    _stream_query,
    hip_handle_fn_t,
    wait_interruptible,
)
from hipfile._lib._errors import raise_result
from hipfile._lib._runtime import on_device as _on_device
from hipfile._lib import _decode

cdef void *_get_io(int opcode) except NULL:
    if opcode == 0:
        return <void *>p_hipFileRead if p_hipFileRead != NULL else bind(b"hipFileRead")
    return <void *>p_hipFileWrite if p_hipFileWrite != NULL else bind(b"hipFileWrite")


include "_engine.pxi"

_core.held_sweep_hook = _eng_sweep
_pool.trim_hook = _eng_trim
