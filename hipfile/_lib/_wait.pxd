# cython: language_level=3
# The one timeout rule and the one interruptible wait. See _wait.pyx.

from libc.stdint cimport uintptr_t

cdef enum WaitKind:
    WAIT_EVENT = 0     # target: a hipEvent_t
    WAIT_STREAM = 1    # target: a hipStream_t
    WAIT_FLAG = 2      # target: address of an unsigned char, ready when == ready_value

cdef double c_as_timeout(object timeout, str name=*) except? -2.0

# The end of a wait (see _wait.pyx)
cdef class Deadline:
    cdef readonly double at      # CLOCK_MONOTONIC seconds; -1: no end
    cdef double left_s(self, double cap) noexcept
    cpdef bint passed(self)
# One slice of a wait: waits at most `seconds` (0: only looks); nonzero once over
ctypedef int (*slice_wait_t)(void *ctx, double seconds) except -1
cdef int wait_sliced(slice_wait_t wait_slice, void *ctx, Deadline deadline,
                     double slice_s) except -1
cdef int wait_interruptible(int kind, uintptr_t target, double timeout_s,
                            unsigned char ready_value=*) except -1
