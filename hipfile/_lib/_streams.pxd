# cython: language_level=3
# The core of Stream and the registered streams' states (see _streams.pyx).

from libc.stdint cimport uintptr_t

cdef class StreamState:
    cdef readonly uintptr_t handle
    cdef readonly unsigned flags
    cdef readonly bint registered
    cdef readonly Py_ssize_t pending
    cdef unsigned long epoch
    cdef unsigned long gen

cdef class StreamCore:
    cdef uintptr_t _handle
    cdef unsigned _flags
    cdef object _owner
    cdef StreamState _state

cdef dict stream_states

# Set by _observe when it is imported: how many stream-ordered operations
# using an object (a buffer, file or stream state) are still in flight, once
# the completed ones have been observed.
ctypedef Py_ssize_t (*settle_fn)(object) except -1
cdef settle_fn settle_hook
cdef Py_ssize_t settle(object obj) except -1
