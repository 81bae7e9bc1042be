# cython: language_level=3
# Foreign buffers and streams decoded in C (see _decode.pyx).

from libc.stdint cimport uintptr_t

cdef object foreign_buffer_info(object obj, uintptr_t *base, size_t *length)
cdef uintptr_t foreign_stream_handle(object obj) except? 0
cdef int check_handle_range(object value) except -1
