# cython: language_level=3
# Finding and opening libhipfile (see _loader.pyx).

cdef object lock
cdef void *handle() except NULL
cdef object path()
cdef bint loaded() noexcept
