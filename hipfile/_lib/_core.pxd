# cython: language_level=3
# Cores of FileHandle and Buffer (Stream: _streams), the one range check, and the one
# submit preamble of every stream-ordered path (see _core.pyx).

from cpython.ref cimport PyObject
from libc.stdint cimport uintptr_t
from hipfile._lib.chipfile cimport hipFileHandle_t, hoff_t

cdef enum:
    FIXED_BUF_OFFSET = 1
    FIXED_FILE_OFFSET = 2
    FIXED_FILE_SIZE = 4

cdef class BufferCore:
    cdef uintptr_t _ptr
    cdef size_t _length
    cdef int _flags
    cdef bint _registered
    cdef Py_ssize_t _pending
    cdef object _owner
    cdef int _device          # -1 until the engine asks
    cdef Py_ssize_t _held
    cdef unsigned long _epoch
    cdef unsigned long _gen
    cdef bint _bare           # made from a bare address: see _allocation_room
    cdef void add_held(self, Py_ssize_t n) noexcept
    cdef int engine_device(self, int found) noexcept

cdef class FileCore:
    cdef hipFileHandle_t _fh
    cdef bint _is_open
    cdef bint _registered            # _fh holds a registration (made at first need)
    cdef Py_ssize_t _pending
    cdef Py_ssize_t _held
    cdef Py_ssize_t _entering    # submissions past the preamble, not yet counted
    cdef Py_ssize_t _closing     # close(wait=True) calls waiting: submissions refused
    cdef unsigned long _epoch
    cdef unsigned long _gen
    cdef long long _staged_write_end   # where staged writes submitted so far leave the file
    # What the handle gives its core when it is made, holding no reference
    # to the handle: its descriptors (hipfile.file._descriptors.Descriptors:
    # the one to register, the engine's, the closed message) and, for an
    # append handle, where its writes go (hipfile.file._append.AppendEnd;
    # None for other handles)
    cdef public object _descriptors
    cdef public object _append
    cdef void add_held(self, Py_ssize_t n) noexcept
    cdef void add_entering(self, Py_ssize_t n) noexcept
    cdef void note_write_end(self, long long wend) noexcept

# What the layers above lend the cores (set when they are imported):
# counting off the engine's ranges that ended (engine.ops). How many
# stream-ordered operations using an object are still in flight is
# _streams.settle (its hook is set by _observe).
ctypedef int (*sweep_fn)() except -1
cdef sweep_fn held_sweep_hook

cdef long long c_as_index(object value, str name) except? -1
cdef long long c_as_positive(object value, str name) except? -1
cdef long long c_as_size(object value, str name) except? -1
cdef int io_range(size_t length, object size, object file_offset, object buffer_offset,
                   size_t *nbytes, hoff_t *foff, hoff_t *boff, object buf=*) except -1


cdef inline bint range_fits(size_t length, long long n, long long f, long long b) noexcept nogil:
    # The accept case of io_range for a caller that holds C integers: every
    # size and offset >= 0 and [b, b + n) inside the ``length`` bytes. Any
    # other range goes to io_range, which raises (or, for a bare address,
    # checks the allocation).
    return (f >= 0 and b >= 0 and n >= 0 and <unsigned long long>b <= length
            and <unsigned long long>n <= length - <size_t>b)
cdef int check_file(FileCore f) except -1
cdef int ensure_registered(FileCore f) except -1
cdef object c_buffer_info(object obj, uintptr_t *base, size_t *length)
cdef uintptr_t stream_handle(object obj) except? 0
cdef object submit_preamble(FileCore f, object buffer, object stream, uintptr_t *base,
                            size_t *length, uintptr_t *sh, PyObject **state)
cdef int stream_preamble(object stream, uintptr_t *sh, PyObject **state) except -1
cdef void release_refs(object file, object buffer, object state)
