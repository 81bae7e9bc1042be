# cython: language_level=3
# The stream engine's threads, staging rings and parked operations
# (see ops.pyx).

from libc.stdint cimport uint32_t
from hipfile._lib.engine.cengine cimport hfe_op, hfe_ring
from hipfile._lib.engine.device cimport Flag, PerDevice

cdef class Ring(PerDevice):
    cdef hfe_ring *ring
    cdef readonly size_t slot_size
    cdef readonly int nslots
    cdef object staging_mem
    cdef tuple staging_pages      # staging_mem's registered mapping (hc_pinned_pages)
    cdef object flags_mem
    cdef list copy_streams        # hipStream_t, hipEvent_t (ints): the ring's
    cdef list copy_events
    cdef int release(self) except -1

cdef class ParkedOp:
    cdef hfe_op *op
    cdef Flag flag
    cdef uint32_t value
    cdef bint stream_completes
    cdef object file
    cdef object bcore
    cdef object keep

cdef dict _rings
cdef list eng_parked
ctypedef int (*watched_sweep_fn)() except -1
cdef watched_sweep_fn watched_sweep_hook

cdef Ring ring_for(int device)
cdef int eng_start() except -1
cdef void unhold(object file, object bcore)
cdef int eng_sweep() except -1
cdef int eng_trim() except -1
