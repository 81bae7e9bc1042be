# HIP runtime access for the hot paths.
#
# Invariants
# - HIP is reached through HIP-Python only: its C-level functions, taken from
#   the ``__pyx_capi__`` capsules of its Cython module (signature checked),
#   or its Python functions when a capsule is missing.
# - ``_c_*`` pointers are set once, under the GIL, by ``_load_hip_capi``;
#   they may then be called without the GIL from any thread.
# - Host functions enqueued on a stream (``host_fn_t``) make no HIP call and
#   never take the GIL.
# - The atomics are the only way memory shared with a stream's thread or
#   with worker threads is read or written.

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

_hip_mod = None
cdef object _PointerType = None

# HIP-Python exports its C-level HIP functions as capsules
# (``__pyx_capi__`` of its Cython module); calling those keeps HIP access
# inside HIP-Python while skipping Python-level overhead on hot paths.
ctypedef void (*host_fn_t)(void *) noexcept nogil
ctypedef int (*hip_launch_host_func_t)(void *, host_fn_t, void *) noexcept nogil
ctypedef int (*hip_handle_fn_t)(void *) noexcept nogil

cdef hip_launch_host_func_t _c_launch_host_func = NULL
cdef hip_handle_fn_t _c_stream_query = NULL
cdef hip_handle_fn_t _c_stream_sync = NULL
cdef hip_handle_fn_t _c_event_query = NULL
cdef hip_handle_fn_t _c_event_sync = NULL
cdef bint _capi_tried = 0

DEF HIP_SUCCESS = 0
DEF HIP_ERROR_NOT_READY = 600

from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_GetName, PyCapsule_CheckExact


cdef void *_capsule_fn(dict capi, str name, bytes signature):
    cap = capi.get(name)
    if cap is None or not PyCapsule_CheckExact(cap):
        return NULL
    cdef const char *sig = PyCapsule_GetName(cap)
    if sig == NULL or <bytes>sig != signature:
        return NULL
    return PyCapsule_GetPointer(cap, sig)


cdef int _load_hip_capi() except -1:
    global _capi_tried, _c_launch_host_func, _c_stream_query, _c_stream_sync
    global _c_event_query, _c_event_sync
    if _capi_tried:
        return 0
    _capi_tried = 1
    import sys
    _hipapi()
    for mod in list(sys.modules.values()):
        capi = getattr(mod, "__pyx_capi__", None)
        if not isinstance(capi, dict) or "hipLaunchHostFunc" not in capi:
            continue
        _c_launch_host_func = <hip_launch_host_func_t>_capsule_fn(
            capi, "hipLaunchHostFunc", b"enum hipError_t (hipStream_t, hipHostFn_t, void *)")
        _c_stream_query = <hip_handle_fn_t>_capsule_fn(
            capi, "hipStreamQuery", b"enum hipError_t (hipStream_t)")
        _c_stream_sync = <hip_handle_fn_t>_capsule_fn(
            capi, "hipStreamSynchronize", b"enum hipError_t (hipStream_t)")
        _c_event_query = <hip_handle_fn_t>_capsule_fn(
            capi, "hipEventQuery", b"enum hipError_t (hipEvent_t)")
        _c_event_sync = <hip_handle_fn_t>_capsule_fn(
            capi, "hipEventSynchronize", b"enum hipError_t (hipEvent_t)")
        if _c_launch_host_func != NULL:
            break
    return 0


cdef int _stream_query(uintptr_t stream) except? -1:
    cdef int err
    _load_hip_capi()
    if _c_stream_query != NULL:
        with nogil:
            err = _c_stream_query(<void *>stream)
        return err
    return int(_hipapi().hip.hipStreamQuery(stream)[0])


cdef int _event_query(object event) except? -1:
    cdef int err
    cdef uintptr_t ev = int(event)
    _load_hip_capi()
    if _c_event_query != NULL:
        with nogil:
            err = _c_event_query(<void *>ev)
        return err
    return int(_hipapi().hip.hipEventQuery(event)[0])


cdef int _hip_fail(int err, str func) except -1:
    raise HipRuntimeError(hip_err=err, func=func)


cdef int _stream_sync(uintptr_t stream) except -1:
    cdef int err
    _load_hip_capi()
    if _c_stream_sync != NULL:
        with nogil:
            err = _c_stream_sync(<void *>stream)
    else:
        err = int(_hipapi().hip.hipStreamSynchronize(stream)[0])
    if err != HIP_SUCCESS:
        _hip_fail(err, "hipStreamSynchronize")
    return 0


cdef int _event_sync(object event) except -1:
    cdef int err
    cdef uintptr_t ev = int(event)
    _load_hip_capi()
    if _c_event_sync != NULL:
        with nogil:
            err = _c_event_sync(<void *>ev)
    else:
        err = int(_hipapi().hip.hipEventSynchronize(event)[0])
    if err != HIP_SUCCESS:
        _hip_fail(err, "hipEventSynchronize")
    return 0


cdef int _launch_marker(uintptr_t stream, unsigned char *state):
    """Enqueue _host_done(state) on the stream; returns the hipError_t."""
    if _c_launch_host_func != NULL:
        return _c_launch_host_func(<void *>stream, _host_done, <void *>state)
    try:
        return int(_hipapi().hip.hipLaunchHostFunc(
            stream, <uintptr_t>&_host_done, <uintptr_t>state)[0])
    except BaseException:
        return -1


cdef object _hipapi():
    global _hip_mod, _PointerType
    if _hip_mod is None:
        from hipfile import _hip
        _hip_mod = _hip
        _PointerType = _hip.Pointer
    return _hip_mod

