# cython: language_level=3
# HIP runtime access, devices, and the
# process an object belongs to (fork, exit, driver epochs). See _runtime.pyx.

from libc.stdint cimport uintptr_t

cdef extern from *:
    """
    static inline void hipfile_atomic_store_u8(unsigned char *p, unsigned char v) {
        __atomic_store_n(p, v, __ATOMIC_RELEASE);
    }
    static inline unsigned char hipfile_atomic_load_u8(unsigned char *p) {
        return __atomic_load_n(p, __ATOMIC_ACQUIRE);
    }
    """
    void hipfile_atomic_store_u8(unsigned char *p, unsigned char v) nogil
    unsigned char hipfile_atomic_load_u8(unsigned char *p) nogil

cdef enum:
    HIP_SUCCESS = 0
    HIP_ERROR_NOT_READY = 600
    HIP_EVENT_DISABLE_TIMING = 2

ctypedef void (*host_fn_t)(void *) noexcept nogil
ctypedef int (*hip_launch_host_func_t)(void *, host_fn_t, void *) noexcept nogil
ctypedef int (*hip_handle_fn_t)(void *) noexcept nogil
ctypedef int (*hip_host_malloc_t)(void **, size_t, unsigned int) noexcept nogil
ctypedef int (*hip_event_create_t)(void **, unsigned int) noexcept nogil
ctypedef int (*hip_event_record_t)(void *, void *) noexcept nogil
ctypedef int (*hip_int_out_t)(int *) noexcept nogil
ctypedef int (*hip_int_in_t)(int) noexcept nogil
ctypedef int (*hip_void_fn_t)() noexcept nogil
ctypedef int (*hip_device_attribute_t)(int *, int, int) noexcept nogil
ctypedef int (*hip_host_device_pointer_t)(void **, void *, unsigned int) noexcept nogil
ctypedef int (*hip_pointer_attributes_t)(void *, const void *) noexcept nogil
ctypedef int (*hip_stream_get_device_t)(void *, int *) noexcept nogil
ctypedef int (*hip_malloc_t)(void **, size_t) noexcept nogil
ctypedef int (*hip_host_register_t)(void *, size_t, unsigned int) noexcept nogil

# HIP-Python's C-level functions (NULL until load_hip_capi, or when absent)
cdef hip_launch_host_func_t c_launch_host_func
cdef hip_handle_fn_t c_stream_query
cdef hip_handle_fn_t c_event_query
cdef hip_host_malloc_t c_host_malloc
cdef hip_handle_fn_t c_host_free
cdef hip_event_create_t c_event_create
cdef hip_event_record_t c_event_rec
cdef hip_handle_fn_t c_event_free
cdef hip_int_out_t c_get_device
cdef hip_int_in_t c_set_device
cdef hip_int_out_t c_device_count
cdef hip_device_attribute_t c_device_attribute
cdef hip_host_device_pointer_t c_host_device_pointer
cdef hip_event_create_t c_stream_create
cdef hip_handle_fn_t c_stream_destroy
cdef hip_void_fn_t c_device_synchronize
cdef hip_pointer_attributes_t c_pointer_attributes
cdef hip_stream_get_device_t c_stream_get_device
cdef hip_malloc_t c_malloc
cdef hip_handle_fn_t c_free
cdef hip_host_register_t c_host_register
cdef hip_handle_fn_t c_host_unregister
cdef object PointerType
cdef object EventType

cdef void *hip_fn(str name, bytes params)
cdef int load_hip_capi() except -1
cdef object hipapi()
cdef int stream_query(uintptr_t stream) except? -1
cdef int event_query(object event) except? -1
cdef int event_query_h(uintptr_t ev) except? -1

cdef int hip_fail(int err, str func) except -1
cdef int stream_fail(int err, str func, uintptr_t stream) except -1
cdef void destroy_event(object event)

# HIP calls outside the hot paths (see _runtime.pyx): C where HIP-Python
# exports them, its Python layer otherwise
cdef int hc_get_device() except? -2
cdef int hc_set_device(int device) except -1
cdef int hc_device_count() except -1
cdef int hc_device_attribute(int attr, int device, int *value) except -1
cdef uintptr_t hc_host_malloc(size_t size, unsigned int flags) except? 0
cdef int hc_host_free(uintptr_t ptr) except -1
cdef tuple hc_pinned_pages(size_t size)
cdef int hc_pinned_pages_free(tuple pages) except -1
cdef uintptr_t hc_host_device_pointer(uintptr_t host) except? 0
cdef uintptr_t hc_stream_create(unsigned int flags) except? 0
cdef int hc_stream_destroy(uintptr_t stream) except -1
cdef uintptr_t hc_event_create(unsigned int flags) except? 0
cdef int hc_event_record(uintptr_t event, uintptr_t stream) except -1
cdef int hc_event_destroy(uintptr_t event) except -1
cdef int hc_device_synchronize() except -1
cdef uintptr_t hc_malloc(size_t size) except? 0
cdef int hc_free(uintptr_t ptr) except -1

# devices
cdef int current_device() except? -2
cdef int pointer_device(uintptr_t ptr, bint *is_device=*) except? -2
cdef int stream_device(uintptr_t stream) except? -2

# the process
cdef unsigned long fork_gen
cdef bint exiting
cdef unsigned long c_driver_epoch
cdef int raise_forked(str what) except -1
cdef void note_driver_close()
ctypedef int (*driver_close_fn)() except -1
# run before hipFileDriverClose (the engine stops threads that called hipFile)
cdef driver_close_fn driver_close_hook

# The names every handle of an operation in flight answers besides wait()
# (see hipfile.Completion); the compiled handles derive from it.
cdef class CompletionBase:
    pass
