# cython: language_level=3, boundscheck=False, wraparound=False
"""Observing completion outside a handle's own calls.

Invariants
- ``wait_for`` is the one wait for "everything using this object"
  (with-blocks, Driver exit): it goes through ``wait_interruptible`` only,
  so it is interruptible and loses nothing.
- A finalizer that finds operations in flight never drops a registration:
  the object is kept in ``_deferred`` and released by the sweep that sees
  the operations complete (``sweep_parked`` calls ``_retry_deferred``).
- A handle that takes part in a reference cycle (``fh.h = fh.read_async()``)
  is not tracked by the cyclic GC, which keeps submit short: each
  collection of the older generations schedules (``Py_AddPendingCall``)
  an observation of the pending handles that have completed (one
  non-blocking query per stream), which drops their references and so
  breaks the cycle. Nothing is added to the submit path.
- Nothing here runs inside a GC callback but the scheduling: the callback
  may fire in the middle of any loop over the pending list or ``parked_slots``.
"""

import gc as _gc

from libc.stdint cimport uintptr_t

from hipfile._lib._aio cimport AsyncIOHandle, pending_head
from hipfile._lib._pool cimport SLOT_DONE, lose_parked, Parked, parked_slots, slot_state_ptr, sweep_parked
from hipfile._lib._runtime cimport (
    HIP_ERROR_NOT_READY, HIP_SUCCESS, event_query, exiting, fork_gen, stream_query)
from hipfile._lib._wait cimport WAIT_FLAG, Deadline, wait_interruptible, wait_sliced

from cpython.ref cimport PyObject

from hipfile._lib cimport _streams

def pending_handles():
    """Handles submitted through hipfile whose completion is not yet observed."""
    out = []
    cdef PyObject *p = pending_head
    while p != NULL:
        out.append(<object>p)
        p = (<AsyncIOHandle>p)._next
    return out


cdef Py_ssize_t _settle(object obj) except -1:
    return settle(obj)


def settle(obj=None):
    """Observe completion of every pending operation that has finished
    (all of them, or those using ``obj``: a file, buffer or stream state),
    without blocking. Returns how many of those are still in flight."""
    sweep_parked()
    cdef int left = 0
    for h in pending_handles():
        if obj is not None and not (<AsyncIOHandle>h)._uses(obj):
            continue
        if not (<AsyncIOHandle>h).done():
            left += 1
    cdef Parked r
    # a snapshot: the loop body may let other threads change parked_slots
    snapshot = list(parked_slots.items())
    for n, rec in snapshot:
        r = <Parked>rec
        if r.lost:
            continue
        if obj is None or obj is r.file or obj is r.buffer or obj is r.stream_state:
            err = stream_query(r.stream)
            if err != HIP_SUCCESS and err != HIP_ERROR_NOT_READY:
                lose_parked(r)   # destroyed behind the binding's back
                continue
            left += 1
    return left


def wait_for(obj=None, timeout=None):
    """Wait until the stream-ordered operations using ``obj`` (a file,
    buffer or stream state; every one when None), parked ones included,
    have completed, at most ``timeout`` seconds (None: no limit): the
    ``read_async``/``write_async`` handles, and the stream engine's
    (``pread_async`` and its family, the many-file forms), which are
    observed here, so that nobody has to call ``done()`` or ``wait()``
    for a close to see them end. Results stay in their handles.
    Interruptible (Ctrl-C raises within a few ms; nothing observed is
    lost). Returns how many are still in flight.
    """
    cdef int n
    cdef Py_ssize_t engine_left = 0
    cdef Deadline deadline = Deadline(timeout)
    for h in pending_handles():
        if obj is not None and not (<AsyncIOHandle>h)._uses(obj):
            continue
        (<AsyncIOHandle>h)._wait_complete(deadline.left_s(-1.0))
    # a snapshot: the loop body may let other threads change parked_slots
    snapshot = list(parked_slots.items())
    for n, rec in snapshot:
        if obj is None or obj is (<Parked>rec).file or obj is (<Parked>rec).buffer \
                or obj is (<Parked>rec).stream_state:
            _wait_parked(n, <Parked>rec, deadline)
    if engine_wait_hook != NULL:
        engine_left = engine_wait_hook(obj, deadline)
    return settle(obj) + engine_left


cdef struct _parked_wait_t:
    int n
    PyObject *rec
    bint done


cdef int _parked_slice(void *p, double seconds) except -1:
    # One slice of _wait_parked: the slot's marker for at most `seconds`,
    # then the stream, so that a stream destroyed meanwhile ends the wait
    # (the slot is then lost) instead of blocking for ever.
    cdef _parked_wait_t *c = <_parked_wait_t *>p
    cdef Parked rec = <Parked>c.rec
    cdef int err
    if rec.lost:
        return 1
    if wait_interruptible(WAIT_FLAG, <uintptr_t>slot_state_ptr(c.n), seconds,
                          SLOT_DONE) == HIP_SUCCESS:
        c.done = 1
        return 1
    err = stream_query(rec.stream)
    if err != HIP_SUCCESS and err != HIP_ERROR_NOT_READY:
        lose_parked(rec)
        return 1
    return 0


cdef int _wait_parked(int n, Parked rec, Deadline deadline) except -1:
    # Wait for the marker behind a parked slot, in slices of wait_sliced:
    # 1 once it is done, 0 when lost or when the deadline passed first.
    cdef _parked_wait_t c
    c.n = n
    c.rec = <PyObject *>rec
    c.done = 0
    wait_sliced(_parked_slice, &c, deadline, 0.1)
    return c.done


ctypedef int (*_pending_fn_t)(void *) noexcept

cdef extern from "Python.h":
    int Py_AddPendingCall(_pending_fn_t func, void *arg) noexcept

cdef bint _observe_scheduled = 0


def _gc_observe(phase, info):
    # A GC callback runs inside arbitrary allocations, even in the middle of
    # our own loops over the pending list or the parked slots: it only
    # schedules the work, which the main thread runs between bytecodes
    # (where other threads may run too, so our structures are consistent).
    global _observe_scheduled
    if phase != "start" or exiting or _observe_scheduled:
        return
    if info.get("generation", 0) < 1 or (pending_head == NULL and not parked_slots):
        return
    if Py_AddPendingCall(<_pending_fn_t>_observe_pending, NULL) == 0:
        _observe_scheduled = 1


cdef int _observe_pending(void *arg) except -1:
    # Observe completed handles, which drops their references and breaks
    # cycles through them (handles are not tracked by the cyclic GC). Never
    # blocks; errors are dropped, a KeyboardInterrupt propagates.
    global _observe_scheduled
    _observe_scheduled = 0
    if exiting:
        return 0
    cdef dict idle
    cdef AsyncIOHandle h
    try:
        if pending_head != NULL:
            idle = {}
            for o in pending_handles():
                h = <AsyncIOHandle>o
                if h._complete or h._gen != fork_gen:
                    continue
                ok = idle.get(h._stream)
                if ok is None:
                    ok = stream_query(h._stream) == HIP_SUCCESS
                    idle[h._stream] = ok
                if not ok and h._event is not None:
                    ok = event_query(h._event) == HIP_SUCCESS
                if ok:
                    h._observed()
        sweep_parked()
    except Exception:
        pass
    return 0


_gc.callbacks.append(_gc_observe)
_streams.settle_hook = _settle
