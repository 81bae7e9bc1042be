# cython: language_level=3
# The pool of pinned slots for stream-ordered operations, and the objects
# whose release waits for them (see _pool.pyx).

cimport cython
from libc.stdint cimport uintptr_t
from hipfile._lib.chipfile cimport hoff_t, ssize_t

ctypedef struct Slots:
    size_t size
    hoff_t file_offset
    hoff_t buffer_offset
    ssize_t bytes_done

cdef enum:
    SLOTS_PER_PAGE = 2048

cdef enum:
    SLOT_FREE = 0
    SLOT_USED = 1
    SLOT_PARKED = 2
    SLOT_DONE = 3      # written by a host function on the stream's thread

cdef class Parked:
    cdef object file
    cdef object buffer
    cdef object stream_state
    cdef object event
    cdef bint lost
    cdef uintptr_t stream

cdef dict parked_slots
cdef list _deferred

# The slots and their states, per page (read on the submit path of every
# module, inline; changed by _pool only).
cdef Slots **pslots
cdef unsigned char **pstate


@cython.cdivision(True)
cdef inline Slots *slot_ptr(int n) noexcept:
    return &pslots[n // SLOTS_PER_PAGE][n % SLOTS_PER_PAGE]


@cython.cdivision(True)
cdef inline unsigned char *slot_state_ptr(int n) noexcept:
    return &pstate[n // SLOTS_PER_PAGE][n % SLOTS_PER_PAGE]


cdef void lose_parked(Parked rec)
cdef int take_slot() except -1
cdef void give_back(int n) noexcept
cdef int sweep_parked() except -1
cdef int launch_marker(uintptr_t stream, unsigned char *state)

# The engine's trim, lent by the engine when it is imported.
ctypedef int (*trim_fn)() except -1
cdef trim_fn trim_hook
