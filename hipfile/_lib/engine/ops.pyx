# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The stream-ordered parallel engine: FileHandle.pread_async/pwrite_async
and their _ranges forms (C threads in engine.c move the bytes).

Invariants
- Start: an operation touches neither file nor buffer before the caller's
  stream has passed the submit point. Where the stream is idle at submit
  the operation starts at once; otherwise the stream writes a gate flag
  (hipStreamWriteValue32) that the engine's gate thread polls, or, without
  stream memory operations, a host function opens the gate.
- Completion: a worker stores the operation's flag value (release) when
  its last chunk ends, failed or not, so a stream waiting on it
  (hipStreamWaitValue32 >= value, or a blocking host function where stream
  waits are unsupported) is always released; errors are reported on the
  host by wait()/result().
- Flags are 32-bit counters in mapped pinned host memory, that only grow
  (waits compare with >=, which CUDA's cyclic compare matches): a slot is
  reused at once after completion (older waiters stay satisfied), and
  freed only by trim once no operation is outstanding and the devices
  holding flags were synchronized.
- A StreamIOHandle holds its file, buffer and stream (and the file's and
  buffer's ``_held`` counts) until completion is observed; dropped before
  that, they are parked and released by the next sweep. The C engine
  never touches Python objects.
- Every host-side wait polls in slices of at most 50 ms with the GIL
  released, checking for signals between slices.


  released, checking for signals between slices.
"""

import atexit
import os

from libc.stdint cimport uint32_t, uint64_t, uintptr_t
from libc.string cimport memset

from hipfile._lib._core cimport BufferCore, FileCore
from hipfile._lib.engine.cengine cimport eng, hfe_op, hfe_ring, hfe_set_device_fn
from hipfile._lib.engine.device cimport (
    HIP_HOST_MALLOC_MAPPED, HIP_STREAM_NON_BLOCKING, eng_api, eng_settings_ok, eng_cfg, flag_pools, Flag, FlagPool,
    load_engine_capi, per_device, PerDevice, release_per_device)
from hipfile._lib.engine.device import (
    MECHANISM_HOST_FUNCTIONS, MECHANISM_STREAM_MEMOPS)
from hipfile._lib._runtime cimport (
    HIP_EVENT_DISABLE_TIMING, hc_event_create, hc_event_destroy, hc_host_device_pointer,
    hc_host_free, hc_host_malloc, hc_pinned_pages, hc_pinned_pages_free, hc_stream_create,
    hc_stream_destroy)
from hipfile._lib._wait cimport c_as_timeout
from hipfile._lib._runtime import on_device, on_fork_child

from hipfile._lib cimport _core, _pool, _runtime

cdef bint _eng_atexit = 0

def engine_inject_faults(int err_no=0, int count=0, size_t short_max=0, int after=0):
    """Test hook: after ``after`` more file calls of the staged path, the
    next ``count`` fail with ``err_no``; every call moves at most
    ``short_max`` bytes (0: no limit). ``engine_inject_faults()`` clears
    them."""
    eng.inject(err_no, count, short_max, after)


cdef enum:
    MIN_SLOTS = 4     # staging slots a ring has at least

cdef class Ring:
    """A device's staging ring: pinned host slots the engine's threads read
    and write with POSIX calls, and their filled/drained flags in mapped
    pinned memory that streams wait on and write (see engine.h)."""

    cdef int release(self) except -1:
        if self.ring != NULL:
            eng.ring_free(self.ring)
            self.ring = NULL
        with on_device(self.device):
            for ev in self.copy_events or ():
                hc_event_destroy(<uintptr_t>ev)
            for st in self.copy_streams or ():
                hc_stream_destroy(<uintptr_t>st)
            self.copy_events = []
            self.copy_streams = []
            if self.staging_pages is not None:
                pages, self.staging_pages, self.staging_mem = self.staging_pages, None, None
                hc_pinned_pages_free(pages)
            elif self.staging_mem is not None:
                hc_host_free(<uintptr_t>self.staging_mem)
                self.staging_mem = None
            if self.flags_mem is not None:
                hc_host_free(<uintptr_t>self.flags_mem)
                self.flags_mem = None
        return 0


_rings = {}      # device -> Ring


cdef Ring ring_for(int device):
    return <Ring>per_device(_rings, device, _new_ring)


cdef size_t _slot_size(size_t total, size_t task):
    """A ring's slot: the default task (a chunk holds at most one task, so a
    larger slot would pin memory that default-sized chunks never touch),
    whole pages, 64 KiB to 8 MiB, halved until ``total`` holds MIN_SLOTS."""
    cdef size_t slot = (task + 4095) & ~(<size_t>4095)
    slot = max(<size_t>(64 << 10), min(slot, <size_t>(8 << 20)))
    while slot > (64 << 10) and total // slot < MIN_SLOTS:
        slot = max(<size_t>(64 << 10), (slot // 2) & ~(<size_t>4095))
    return slot


def ring_layout(total, task):
    """``(slot_size, nslots)`` of a ring of ``total`` bytes when the default
    task is ``task`` bytes (the layout _new_ring makes; a test hook too)."""
    cdef size_t slot = _slot_size(<size_t>total, <size_t>task)
    return slot, <int>max(2, <size_t>total // slot)


cdef PerDevice _new_ring(int device):
    eng_settings_ok()
    cdef size_t slot
    cdef int nslots
    slot, nslots = ring_layout(eng_cfg.staging_size, eng_cfg.task_size)
    # the settings are taken before the first allocation, and a failure or
    # Ctrl-C after it releases what was made: a ring half made is never
    # forgotten with its pinned memory
    cdef int copy_batch = eng_cfg.copy_batch
    cdef size_t direct_io = eng_cfg.direct_io_size
    cdef int ncopy = eng_cfg.copy_streams
    cdef Ring r
    r = Ring.__new__(Ring)
    try:
        _make_ring(r, device, slot, nslots, copy_batch, direct_io, ncopy)
    except BaseException:
        r.release()
        raise
    return r


cdef int _make_ring(Ring r, int device, size_t slot, int nslots, int copy_batch,
                    size_t direct_io, int ncopy) except -1:
    """Allocate and set up the ring ``r`` (released by the caller on failure)."""
    cdef uintptr_t fbase, fdev
    r.device = device
    r.slot_size = slot
    r.nslots = nslots
    cdef void *cs[8]
    cdef void *je[8]
    cdef int k
    with on_device(device):
        r.staging_pages = hc_pinned_pages(slot * nslots)
        if r.staging_pages is not None:
            r.staging_mem = r.staging_pages[0]
        else:
            r.staging_mem = hc_host_malloc(slot * nslots, 0)
        fbase = hc_host_malloc(8 * nslots, HIP_HOST_MALLOC_MAPPED)
        r.flags_mem = fbase
        try:
            fdev = hc_host_device_pointer(fbase)
        except Exception:
            fdev = fbase
    memset(<void *>fbase, 0, 8 * nslots)
    r.ring = eng.ring_new(<void *><uintptr_t>int(r.staging_mem), slot, nslots,
                          <uint32_t *>fbase, fdev)
    if r.ring == NULL:
        raise MemoryError()
    eng.ring_set_copy_batch(r.ring, copy_batch)
    # whole slots; the C side bounds it (1 to 8, half the ring): only the
    # cast to int is bounded here
    eng.ring_set_direct_slots(r.ring, <int>min(direct_io // slot, <size_t>(1 << 16)))
    if ncopy > 1 and eng_api.stream_wait_event != NULL and eng_api.event_record != NULL:
        r.copy_streams = []
        r.copy_events = []
        with on_device(device):
            for k in range(ncopy):
                r.copy_streams.append(hc_stream_create(HIP_STREAM_NON_BLOCKING))
            for k in range(ncopy + 1):
                r.copy_events.append(hc_event_create(HIP_EVENT_DISABLE_TIMING))
        for k in range(ncopy):
            cs[k] = <void *><uintptr_t>int(r.copy_streams[k])
            je[k] = <void *><uintptr_t>int(r.copy_events[k + 1])
        eng.ring_set_copy_streams(r.ring, ncopy, cs,
                                  <void *><uintptr_t>int(r.copy_events[0]), je)
    return 0


cdef int eng_start() except -1:
    global _eng_atexit
    eng_settings_ok()
    load_engine_capi()
    cdef int rc = eng.start(eng_cfg.threads, <hfe_set_device_fn>eng_api.set_device)
    if rc:
        raise OSError(rc, f"the stream engine could not start its threads: {os.strerror(rc)}")
    if not _eng_atexit:
        atexit.register(_eng_atexit_stop)
        _eng_atexit = 1
    return 0


def _eng_atexit_stop():
    with nogil:
        eng.stop(5.0)


def engine_shutdown(timeout=None):
    """Stop the engine's threads once its outstanding operations finish.

    Raises
    ------
    TimeoutError
        Operations were still outstanding after ``timeout`` seconds.
    TypeError, ValueError
        ``timeout`` is not a number >= 0 or None.
    """
    cdef double t = c_as_timeout(timeout)
    cdef int rc
    eng_sweep()
    with nogil:
        rc = eng.stop(t)
    if rc:
        raise TimeoutError(f"{eng.outstanding()} stream-engine operation(s) still outstanding")


def engine_info():
    """The engine's state: threads running, outstanding operations, parked
    handles, pread/pwrite requests not yet ended, and per device the release
    mechanism, flags allocated, staging ring (bytes, bytes per slot), the
    seconds its making took and the runtime calls its submissions made."""
    from hipfile._lib.engine.handle import watched_requests

    eng_sweep()
    eng_settings_ok()
    return {
        "threads": eng.threads(),
        "threads_configured": eng_cfg.threads,
        "task_size": eng_cfg.task_size,
        "outstanding": eng.outstanding(),
        "parked": len(eng_parked),
        "requests": watched_requests(),
        "devices": {d: _device_info(<FlagPool>p, _rings.get(d)) for d, p in flag_pools.items()},
    }


cdef dict _device_info(FlagPool p, object ring):
    """One device's entry of :func:`engine_info` (``ring``: its staging
    ring, or None before one is made)."""
    cdef Ring r
    cdef uint64_t calls = 0, waits = 0
    cdef size_t slot = 0, nslots = 0
    cdef int direct = 0
    cdef double made = p.made_s
    pinned_by = None
    if ring is not None:
        r = <Ring>ring
        eng.ring_stream_counts(r.ring, &calls, &waits)
        slot, nslots, made = r.slot_size, r.nslots, made + r.made_s
        pinned_by = "hipHostRegister" if r.staging_pages is not None else "hipHostMalloc"
        direct = eng.ring_direct_slots(r.ring)
    return {"mechanism": MECHANISM_STREAM_MEMOPS if p.memops else MECHANISM_HOST_FUNCTIONS,
            "flags": p.nflags,
            "staging_bytes": slot * nslots,
            "staging_slot_bytes": slot,
            "staging_pinned_by": pinned_by,
            "direct_io_bytes": slot * direct,
            "stream_waits": waits,
            "stream_calls": calls,
            "setup_s": made}


cdef class ParkedOp:
    """A dropped StreamIOHandle's operation, kept until it has finished."""

    def __dealloc__(self):
        if self.op != NULL:
            eng.op_decref(self.op)
            self.op = NULL


eng_parked = []


cdef void unhold(object file, object bcore):
    # file: one file, or a tuple of them (a many-file operation)
    if file is not None:
        if type(file) is tuple:
            for o in <tuple>file:
                (<FileCore>o).add_held(-1)
        else:
            (<FileCore>file).add_held(-1)
    if bcore is not None:
        (<BufferCore>bcore).add_held(-1)


cdef watched_sweep_fn watched_sweep_hook = NULL   # handle.pyx: its watched handles


cdef bint _sweeping = 0


cdef int eng_sweep() except -1:
    """Release what the parked operations that have ended hold (and observe
    the watched handles that have ended). Dropping a reference can run
    Python code that parks another operation: one sweep at a time, and
    what is parked meanwhile stays for the next."""
    global _sweeping
    cdef ParkedOp rec
    cdef list keep, todo
    cdef Py_ssize_t n
    if _sweeping:
        return 0
    _sweeping = 1
    try:
        if watched_sweep_hook != NULL:
            watched_sweep_hook()
        if not eng_parked:
            return 0
        n = len(eng_parked)
        todo = eng_parked[:n]
        keep = _sweep_parked(todo)
        eng_parked[:n] = keep
    finally:
        _sweeping = 0
    return 0


cdef list _sweep_parked(list todo):
    cdef ParkedOp rec
    cdef list keep = []
    for o in todo:
        rec = <ParkedOp>o
        if eng.op_done(rec.op) and (not rec.stream_completes or rec.flag is None
                                    or eng.flag_reached(rec.flag.ptr, rec.value)):
            unhold(rec.file, rec.bcore)
            rec.file = None
            rec.bcore = None
            if rec.flag is not None:
                rec.flag.pool.free.append(rec.flag)
                rec.flag = None
        else:
            keep.append(rec)
    return keep


cdef int eng_trim() except -1:
    """Free the flags and internal streams once nothing is outstanding (the
    next submission makes them again, with the settings in effect then)."""
    eng_sweep()
    if eng_parked or eng.outstanding():
        return 0
    for p in flag_pools.values():
        if len((<FlagPool>p).free) != (<FlagPool>p).nflags:
            return 0      # a live handle (or its gate) still holds a flag
    release_per_device(flag_pools)    # a pool holding flags synchronizes its device first
    release_per_device(_rings)
    return 0




def _after_fork_in_child():
    # a fork made while a sweep ran (a finalizer let another thread in)
    global _sweeping
    _sweeping = 0
    # the staging rings' registered pages are not mapped here (MADV_DONTFORK):
    # forgotten, never touched or freed; a submission makes a new ring
    for d, r in list(_rings.items()):
        if (<Ring>r).staging_pages is not None:
            (<Ring>r).ring = NULL
            (<Ring>r).staging_pages = (<Ring>r).staging_mem = None
            (<Ring>r).flags_mem = None
            (<Ring>r).copy_streams = (<Ring>r).copy_events = []
            del _rings[d]


on_fork_child(_after_fork_in_child)
cdef int eng_before_driver_close() except -1:
    """Stop the engine's threads if one of them called hipFile (the worker
    path: hipFileRead/hipFileWrite), before hipFileDriverClose: a thread
    that called the library must not exit after its driver closed (cuFile
    frees its per-thread state at the thread's exit into a driver that is
    gone: a heap corruption at the next submission). Nothing stops while an
    operation is outstanding; the next submission starts new threads."""
    with nogil:
        eng.retire_library_threads(0.0)
    return 0


_core.held_sweep_hook = eng_sweep
_pool.trim_hook = eng_trim
_runtime.driver_close_hook = eng_before_driver_close
