# cython: language_level=3
# What the stream engine needs of the HIP runtime and of the package
# (see device.pyx).

from libc.stdint cimport uint32_t, uintptr_t
from hipfile._lib.engine.cengine cimport hfe_runtime
from hipfile._lib._runtime cimport hip_handle_fn_t

cdef enum:
    HIP_STREAM_WAIT_VALUE_GTE = 0
    HIP_HOST_MALLOC_MAPPED = 2
    HIP_STREAM_NON_BLOCKING = 1
    HIP_ATTR_CAN_USE_STREAM_WAIT_VALUE = 10013
    FLAGS_PER_HOST_PAGE = 1024

ctypedef int (*hip_int_fn_t)(int) noexcept nogil
ctypedef int (*hip_wait32_t)(void *, void *, uint32_t, unsigned, uint32_t) noexcept nogil
ctypedef int (*hip_write32_t)(void *, void *, uint32_t, unsigned) noexcept nogil
ctypedef int (*hip_record_fn_t)(void *, void *) noexcept nogil
ctypedef int (*hip_memcpy_async_t)(void *, const void *, size_t, int, void *) noexcept nogil
ctypedef int (*hip_wait_event_t)(void *, void *, unsigned) noexcept nogil
ctypedef int (*hip_memcpy_batch_t)(void **, void **, size_t *, size_t, void *, size_t *,
                                   size_t, size_t *, void *) noexcept nogil
ctypedef int (*hip_memset_d32_t)(void *, int, size_t, void *) noexcept nogil
ctypedef int (*hip_count_fn_t)(int *) noexcept nogil

# HIP-Python's C functions the engine uses (NULL until load_engine_capi,
# which writes them once): one struct, shared through one symbol
ctypedef struct eng_api_t:
    hip_int_fn_t set_device
    hip_wait32_t wait_value32
    hip_write32_t write_value32
    hip_handle_fn_t event_destroy
    hip_record_fn_t event_record
    hip_memcpy_async_t memcpy_async
    hip_wait_event_t stream_wait_event
    hip_memcpy_batch_t memcpy_batch
    hip_memset_d32_t memset_d32
    hfe_runtime rt              # the same, as the engine's C source takes them
                                # (a submission takes its copy through eng_runtime)
    bint tried                  # load_engine_capi has run

cdef eng_api_t eng_api

# The engine's settings: its compiled defaults until hipfile.defaults pushes
# the settings in effect (engine_push_settings, at import and after every
# change); one struct, written in one place.
ctypedef struct eng_settings_t:
    int threads                 # engine_threads
    size_t task_size            # engine_task_size
    size_t staging_size         # engine_staging_size (read when a ring is made)
    int copy_streams            # engine_copy_streams (idem)
    int copy_batch              # engine_copy_batch (idem)
    size_t direct_io_size       # engine_direct_io_size (idem)
    bint batch_copies           # engine_batch_copies
    bint release_host           # engine_release == "host-waits"
    bint data_hipfile           # engine_data_path == "hipfile"
    bint refused                # the last push carried a bad variable: refuse to submit

cdef eng_settings_t eng_cfg

cdef class PerDevice:
    cdef readonly int device
    cdef readonly double made_s    # seconds its making took
    cdef int release(self) except -1

ctypedef PerDevice (*per_device_fn)(int device)

cdef class Flag:
    cdef uint32_t *ptr        # host view
    cdef uintptr_t devptr     # what a stream waits on or writes
    cdef uint32_t value       # the last value handed out
    cdef FlagPool pool
    cdef uint32_t next_value(self)

cdef class FlagPool(PerDevice):
    cdef readonly bint can_memops     # the device can use stream memory operations
    cdef readonly bint memops         # ... and engine_release lets the next submission
    cdef list free
    cdef list mems                    # HIP-Python pointers of the pages to free
    cdef object stream                # internal stream for record_event
    cdef int nflags
    cdef Flag take(self)
    cdef int _grow(self) except -1
    cdef int release(self) except -1

cdef dict flag_pools

cdef int load_engine_capi() except -1
cdef int wait_value32(uintptr_t stream, uintptr_t ptr, uint32_t value) except -1
cdef int write_value32(uintptr_t stream, uintptr_t ptr, uint32_t value)
cdef PerDevice per_device(dict made, int device, per_device_fn make)
cdef int release_per_device(dict made) except -1
cdef FlagPool pool_for(int device)
cdef int device_arg(object device) except -2
cdef bint memops_supported(int device) except -1
cdef bint staged_path(int fd, FlagPool pool, bint is_device) except -1
cdef object internal_stream(FlagPool pool)
cdef int stream_after(uintptr_t target, uintptr_t stream, int device) except -1
cdef int eng_settings_ok() except -1
cdef void eng_runtime(hfe_runtime *rt) noexcept
cdef uintptr_t record_gate_event(uintptr_t stream, int device) except? 0
cdef void destroy_event_handle(uintptr_t ev)
