# cython: language_level=3
# Reference design for the submit benchmark: the async slots are members of
# a Python object and the wrapper is a plain def taking ints, as in the
# simplest possible binding. Not safe (the object may die before the stream
# writes its count); it only sets the floor a binding can reach.
from libc.stdint cimport uintptr_t
from posix.dlfcn cimport dlopen, dlsym, RTLD_NOW
from posix.types cimport off_t

cdef extern from *:
    ctypedef long ssize_t

ctypedef struct err_t:
    int err
    int hip_drv_err

ctypedef err_t (*fn_t)(void *, void *, size_t *, off_t *, off_t *, ssize_t *, void *) noexcept nogil

cdef fn_t _fn = NULL


def load(bytes path):
    global _fn
    cdef void *lib = dlopen(path, RTLD_NOW)
    _fn = <fn_t>dlsym(lib, b"hipFileReadAsync")


cdef class MemberSlots:
    cdef size_t size
    cdef off_t file_offset
    cdef off_t buffer_offset
    cdef ssize_t bytes_done

    def __cinit__(self, size_t size, off_t file_offset, off_t buffer_offset):
        self.size = size
        self.file_offset = file_offset
        self.buffer_offset = buffer_offset


def read_async(uintptr_t handle, uintptr_t buf, MemberSlots io, uintptr_t stream):
    cdef err_t e
    with nogil:
        e = _fn(<void *>handle, <void *>buf, &io.size, &io.file_offset, &io.buffer_offset,
                &io.bytes_done, <void *>stream)
    return (e.err, e.hip_drv_err)


class File:
    def __init__(self, handle):
        self.handle = handle

    def read_async(self, buffer, size, file_offset, buffer_offset, stream):
        if self.handle is None:
            raise RuntimeError("not open")
        io = MemberSlots(size, file_offset, buffer_offset)
        err, extra = read_async(self.handle, buffer.ptr, io, stream)
        if err != 0:
            raise RuntimeError(err)
        return io
