# cython: language_level=3
# Finding and opening libhipfile (see _loader.pyx).

from hipfile._lib.chipfile cimport hipFileError_t

cdef object lock
cdef void *handle() except NULL
cdef object path()
cdef bint loaded() noexcept
cdef void *symbol(const char *name) except NULL
cdef int check_status(hipFileError_t e, const char *func) except -1 nogil
