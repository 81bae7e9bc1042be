# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The pool of pinned slots for stream-ordered operations.

Invariants
- Slots live in pages of pinned host memory (``hipHostMalloc`` through
  HIP-Python); a page never moves and is freed only when none of its slots
  is in use or parked (``trim_pool``).
- The C arrays (``pslots``, ``pstate``, ``_pused``, ``_fstack``) are
  changed only with the GIL held and without yielding it between reading
  and writing them: growing calls HIP first, then updates the arrays in C
  only, so two threads never interleave an update.
- A slot is FREE, USED (owned by one AsyncIOHandle), PARKED (its handle
  died before completion was observed; ``parked_slots`` owns the objects the
  operation uses) or DONE (a host function behind the operation said the
  stream passed it; written on the stream's thread with a release store).
- A parked slot is ``lost`` when its stream can no longer be queried
  (destroyed behind the binding's back): no marker can follow the
  operation, so the slot is reclaimed only after ``hipDeviceSynchronize``
  (``trim_pool``), never reused before.

Objects whose finalizer found operations in flight are kept here too
(``defer_release``) and released by the sweep that sees them complete.
"""

from libc.limits cimport INT_MAX
from libc.stdint cimport uintptr_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memset

from hipfile._lib._errors import InFlightError
from hipfile._lib._core cimport c_as_index, release_refs
from hipfile._lib._runtime cimport (
    HIP_SUCCESS, c_host_free, c_host_malloc, c_launch_host_func, destroy_event, exiting,
    fork_gen, hip_fail, hipapi, load_hip_capi, hipfile_atomic_load_u8, hipfile_atomic_store_u8)
from hipfile._lib import _finalize, _runtime

cdef class _Page:
    """One pinned allocation holding SLOTS_PER_PAGE slots.

    ``base`` is set by the C call that allocates it, so the page owns the
    memory from the first instant; a page dropped before the pool adopted
    it (an exception, or Ctrl-C, while growing) frees it again."""
    cdef object mem          # HIP-Python Pointer (when allocated through it)
    cdef void *base          # the allocation (C path)
    cdef bint adopted        # in _pages: freed by trim_pool only
    cdef unsigned char *state   # malloc'ed, never moves

    def __dealloc__(self):
        if self.base != NULL and not self.adopted and c_host_free != NULL \
                and not exiting and not fork_gen:
            c_host_free(self.base)
        self.base = NULL
        if self.state != NULL:
            free(self.state)
            self.state = NULL


cdef list _pages = []         # the _Page objects (own the memory)
parked_slots = {}                  # slot number -> Parked

# C views of the pool for the hot path: per page its slots, states and use
# count; a stack of free slot numbers.
pslots = NULL      # (declared with slot_ptr and slot_state_ptr in _pool.pxd)
pstate = NULL
cdef int *_pused = NULL
cdef int _npages = 0
cdef int _pcap = 0
cdef int *_fstack = NULL
cdef int _nfree = 0


cdef class Parked:
    """What a slot parked behind an operation in flight keeps alive."""


cdef void lose_parked(Parked rec):
    # The stream can no longer be queried: what the operation uses is
    # released now; the slot waits for a device synchronise (trim_pool).
    rec.lost = 1
    release_refs(rec.file, rec.buffer, rec.stream_state)
    rec.file = None
    rec.buffer = None
    rec.stream_state = None


cdef int _new_page() except -1:
    global pslots, pstate, _pused, _pcap, _npages, _fstack, _nfree
    cdef int cap, i, base
    cdef void *p
    cdef unsigned char *state
    # The HIP call may let other threads run (and grow the pool too), so it
    # comes first; everything after it runs without releasing the GIL. The
    # page exists before the allocation and holds it from the C call on:
    # no Python code runs between them (Ctrl-C cannot orphan the memory).
    cdef _Page page = _Page.__new__(_Page)
    cdef int err = 0
    cdef Slots *slots
    load_hip_capi()
    if c_host_malloc != NULL and c_host_free != NULL:
        with nogil:
            err = c_host_malloc(&page.base, SLOTS_PER_PAGE * sizeof(Slots), 0)
        if err != HIP_SUCCESS:
            page.base = NULL
            hip_fail(err, "hipHostMalloc")
        slots = <Slots *>page.base
    else:
        # HIP-Python without C-level exports: its Python-level call
        h = hipapi()
        page.mem = h.check(h.hip.hipHostMalloc(SLOTS_PER_PAGE * sizeof(Slots), 0),
                           "hipHostMalloc")
        slots = <Slots *><uintptr_t>int(page.mem)
    state = <unsigned char *>malloc(SLOTS_PER_PAGE)
    if state == NULL:
        raise MemoryError()   # the page frees its memory
    memset(state, SLOT_FREE, SLOTS_PER_PAGE)
    page.state = state
    # from here to the append: C only, so no other thread runs in between
    if _npages == _pcap:
        cap = 8 if _pcap == 0 else 2 * _pcap
        p = realloc(pslots, cap * sizeof(Slots *))
        if p != NULL:
            pslots = <Slots **>p
            p = realloc(pstate, cap * sizeof(unsigned char *))
        if p != NULL:
            pstate = <unsigned char **>p
            p = realloc(_pused, cap * sizeof(int))
        if p != NULL:
            _pused = <int *>p
            p = realloc(_fstack, cap * SLOTS_PER_PAGE * sizeof(int))
        if p == NULL:
            raise MemoryError()  # the page frees its memory and state
        _fstack = <int *>p
        _pcap = cap
    pslots[_npages] = slots
    pstate[_npages] = state
    _pused[_npages] = 0
    base = _npages * SLOTS_PER_PAGE
    _npages += 1
    for i in range(SLOTS_PER_PAGE - 1, -1, -1):
        _fstack[_nfree] = base + i
        _nfree += 1
    _pages.append(page)
    page.adopted = 1
    return 0


cdef int sweep_parked() except -1:
    """Return parked slots whose operation has passed to the free list."""
    cdef int n
    cdef Parked rec
    if not parked_slots:
        if _deferred:
            _retry_deferred()
        return 0
    done = [n for n in parked_slots if hipfile_atomic_load_u8(slot_state_ptr(n)) == SLOT_DONE]
    for n in done:
        o = parked_slots.pop(n, None)
        if o is None:  # another thread's sweep took it
            continue
        rec = <Parked>o
        give_back(n)   # first: nothing below may leave the slot without owner
        release_refs(rec.file, rec.buffer, rec.stream_state)
        destroy_event(rec.event)
    if _deferred:
        _retry_deferred()
    return 0


cdef void give_back(int n) noexcept:
    global _nfree
    slot_state_ptr(n)[0] = SLOT_FREE
    _pused[n // SLOTS_PER_PAGE] -= 1
    _fstack[_nfree] = n
    _nfree += 1


cdef int _refill() except -1:
    sweep_parked()
    if _nfree == 0:
        _new_page()
    return 0


cdef int take_slot() except -1:
    global _nfree
    cdef int n
    # _refill may let other threads run and take the new slots: check again
    # until one is free with no Python code in between
    while _nfree == 0:
        _refill()
    _nfree -= 1
    n = _fstack[_nfree]
    slot_state_ptr(n)[0] = SLOT_USED
    _pused[n // SLOTS_PER_PAGE] += 1
    return n


cdef void _host_done(void *state) noexcept nogil:
    # Runs on the stream's thread: no HIP call, no GIL.
    hipfile_atomic_store_u8(<unsigned char *>state, SLOT_DONE)


def trim_pool():
    """Free the pinned pages when none of their slots is in use; returns the
    pages freed. Slots parked behind operations still in flight are kept.
    Slots lost to a stream destroyed while they were in flight are
    reclaimed after ``hipDeviceSynchronize``. The stream engine's flags are
    freed too when none of its operations is outstanding (after
    synchronizing the devices that hold them). Does nothing in a forked
    child or at interpreter exit.
    """
    global _npages, _nfree
    cdef int i, freed = 0
    cdef int n
    if fork_gen or exiting:
        return 0
    if trim_hook != NULL:
        trim_hook()
    lost = [n for n, rec in parked_slots.items() if (<Parked>rec).lost]
    if lost:
        # the device has passed every operation once it synchronises, also
        # those of streams destroyed since
        h = hipapi()
        h.check(h.hip.hipDeviceSynchronize(), "hipDeviceSynchronize")
        for n in lost:
            hipfile_atomic_store_u8(slot_state_ptr(n), SLOT_DONE)
    sweep_parked()
    if _npages == 0:
        return 0
    for i in range(_npages):
        if _pused[i]:
            return 0
    # detach the pages first (C only), then free them: threads that submit
    # meanwhile start new pages
    _npages = 0
    _nfree = 0
    pages = list(_pages)
    _pages.clear()
    cdef _Page pg
    cdef int err, first_err = 0
    h = None
    for p in pages:
        pg = <_Page>p
        if pg.base != NULL:
            # C only: Ctrl-C cannot stop the loop half way
            err = c_host_free(pg.base)
            pg.base = NULL
            if err != HIP_SUCCESS and first_err == 0:
                first_err = err
        else:
            if h is None:
                h = hipapi()
            h.check(h.hip.hipHostFree(pg.mem), "hipHostFree")
            pg.mem = None
        freed += 1
    if first_err:
        hip_fail(first_err, "hipHostFree")
    return freed


def reserve_pool(slots):
    """Grow the pool of pinned slots (one per ``read_async``/``write_async``
    in flight) until at least ``slots`` are free; returns the pages
    allocated (0 when enough are free). :func:`trim_pool` frees them again
    once unused.

    A submission that finds no free slot allocates a page of pinned host
    memory, and CUDA counts a page-locked allocation among the operations
    that synchronise the device implicitly: such a submission may wait for
    all the work in flight on the GPU. A serving process reserves the slots
    of its largest burst once at start-up.

    Raises
    ------
    TypeError
        ``slots`` is not an int (bools refused).
    ValueError
        ``slots`` is negative, or more than the pool can index.
    HipRuntimeError
        ``hipHostMalloc`` failed.
    """
    cdef long long want = c_as_index(slots, "slots")
    cdef int pages = 0
    if want < 0:
        raise ValueError(f"slots must be >= 0, got {want}")
    if want > INT_MAX - SLOTS_PER_PAGE:
        raise ValueError(f"slots {want} is more than the pool can hold "
                         f"({INT_MAX - SLOTS_PER_PAGE})")
    sweep_parked()
    while _nfree < want:
        _new_page()
        pages += 1
    return pages


def pool_stats():
    """Counts of the slot pool: pages, free, in_use, parked."""
    sweep_parked()
    cdef int i, used = 0
    for i in range(_npages):
        used += _pused[i]
    return {"pages": _npages, "free": _nfree, "in_use": used - len(parked_slots),
            "parked": len(parked_slots), "slots_per_page": SLOTS_PER_PAGE}


# Finalizers that found operations in flight: the objects are kept here and
# closed or deregistered once those complete, so a registration never leaks.
_deferred = []
cdef bint _retrying = 0


def defer_release(obj, str method):
    """Keep ``obj`` until its operations complete, then call
    ``obj.<method>()`` (a finalizer that found operations in flight)."""
    _deferred.append((obj, method))


cdef int _retry_deferred() except -1:
    global _retrying
    if _retrying or not _deferred or exiting:
        return 0
    _retrying = 1
    try:
        items = list(_deferred)
        for item in items:
            try:
                # a finalizer's work: Ctrl-C waits until it is done (a
                # release cut short half way could not be finished later)
                _finalize.run_uninterrupted(getattr(item[0], item[1]))
            except InFlightError:
                continue
            except Exception:
                pass
            try:
                _deferred.remove(item)
            except ValueError:
                pass
    finally:
        _retrying = 0
    return 0


def deferred_releases():
    """Objects whose close or deregistration waits for operations in flight."""
    return [item[0] for item in _deferred]


cdef int launch_marker(uintptr_t stream, unsigned char *state):
    """Enqueue _host_done(state) on the stream; returns the hipError_t."""
    if c_launch_host_func != NULL:
        return c_launch_host_func(<void *>stream, _host_done, <void *>state)
    try:
        return int(hipapi().hip.hipLaunchHostFunc(
            stream, <uintptr_t>&_host_done, <uintptr_t>state)[0])
    except BaseException:
        return -1


def _after_fork_in_child():
    # the parent's parked slots: their completion can never be observed here
    parked = list(parked_slots.values())
    parked_slots.clear()
    del parked       # dropped here: their finalizers see the new generation


_runtime.on_fork_child(_after_fork_in_child)
