# cython: language_level=3
# AsyncIOHandle and the submit path of hipFileReadAsync/hipFileWriteAsync
# (see _aio.pyx).

from cpython.ref cimport PyObject
from libc.stdint cimport uintptr_t
from hipfile._lib._runtime cimport CompletionBase
from hipfile._lib._streams cimport StreamState
from hipfile._lib._pool cimport Slots

# Handles submitted and not yet observed complete (borrowed pointers).
cdef PyObject *pending_head

cdef class AsyncIOHandle(CompletionBase):
    cdef int _slot
    cdef Slots *_s
    cdef int _opcode
    cdef bint _submitted
    cdef bint _complete
    cdef object _file
    cdef object _buffer
    cdef object _stream_owner
    cdef StreamState _state
    cdef uintptr_t _stream
    cdef unsigned _flags
    cdef size_t _submitted_size
    cdef size_t _buf_len
    cdef object _event
    cdef object _slots_ptr
    cdef PyObject *_prev
    cdef PyObject *_next
    cdef int _lost
    cdef bint _stream_gone    # lost to a stream query, with no event behind it
    cdef uintptr_t _base      # the buffer's address (the device to synchronise)
    cdef unsigned long _gen

    cdef bint _uses(self, obj)
    cdef void _observed(self)
    cdef void _abandon(self, int err)
    cdef int _prove_complete(self) except -1
    cdef bint _answered(self, int err) except -1
    cdef long long _settable(self, object value, unsigned fixed_flag, str name) except? -1
    cdef int _check_settable(self, unsigned fixed_flag, str name) except -1
    cdef _record(self)
    cdef int _wait_complete(self, double timeout_s) except -1
    cdef object _result(self)

