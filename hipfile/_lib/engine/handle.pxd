# cython: language_level=3
# StreamIOHandle (see handle.pyx).

from cpython.ref cimport PyObject
from libc.stdint cimport uint32_t, uintptr_t
from hipfile._lib._runtime cimport CompletionBase
from hipfile._lib.chipfile cimport hoff_t
from hipfile._lib.engine.cengine cimport hfe_io_fn, hfe_op, hfe_span
from hipfile._lib.engine.device cimport Flag, FlagPool

cdef class GateRef:
    cdef Flag flag

cdef class StreamIOHandle(CompletionBase):
    cdef hfe_op *_op
    cdef Flag _flag
    cdef uint32_t _value
    cdef int _opcode
    cdef size_t _size
    cdef hoff_t _file_offset
    cdef hoff_t _buffer_offset
    cdef int _device
    cdef uintptr_t _stream
    cdef bint _submitted
    cdef bint _observed
    cdef object _file
    cdef object _path                # the file's path, for its errors (one file)
    cdef object _bcore
    cdef object _buffer
    cdef object _stream_owner
    cdef object _gate
    cdef object _event
    cdef str _mechanism
    cdef unsigned long _gen          # fork generation at submit
    cdef int _count                  # ranges covered (a grouped submission: all)
    cdef bint _stream_completes      # a staged read: its stream writes the flag
    cdef bint _staged                # moved through the staging ring
    cdef PyObject *_live_prev        # the live list (see handle.pyx): borrowed
    cdef PyObject *_live_next
    cdef bint _live

    cdef int make_op(self, size_t task, hfe_io_fn fn, void *fh, void *base) except -1
    cdef int set_spans(self, const hfe_span *spans, int n) except -1
    cdef void set_gate(self, GateRef gate, bint staged)
    cdef void hand_over(self, object files, object bcore, object buffer, object stream_owner)
    cdef void _abandon(self)
    cdef void _observe(self)
    cdef void _destroy_event(self)
    cdef bint _complete(self)
    cdef object _result(self)
    cdef int _release_to(self, uintptr_t sh) except -1
    cdef int watch(self) except -1
    cdef void link_live(self)
    cdef void _unlink_live(self)

cdef StreamIOHandle new_handle(int opcode, const hfe_span *range, int device, uintptr_t stream,
                               FlagPool pool, int count)
