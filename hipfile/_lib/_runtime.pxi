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
# - Every blocking wait goes through ``wait_interruptible``: short queries
#   with a backoff, the GIL released while sleeping, signals checked between
#   them, so Ctrl-C is seen within a few milliseconds and nothing blocks in C.

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
cdef object _EventType = None    # HIP-Python hipEvent_t

# HIP-Python exports its C-level HIP functions as capsules
# (``__pyx_capi__`` of its Cython module); calling those keeps HIP access
# inside HIP-Python while skipping Python-level overhead on hot paths.
ctypedef void (*host_fn_t)(void *) noexcept nogil
ctypedef int (*hip_launch_host_func_t)(void *, host_fn_t, void *) noexcept nogil
ctypedef int (*hip_handle_fn_t)(void *) noexcept nogil

cdef hip_launch_host_func_t _c_launch_host_func = NULL
cdef hip_handle_fn_t _c_stream_query = NULL
cdef hip_handle_fn_t _c_event_query = NULL
# Allocations whose owner must be set before any Python code can run (a
# signal handler raising KeyboardInterrupt runs at any bytecode boundary,
# also inside HIP-Python's Python-level wrappers): made through the C-level
# functions, the handle lands in its owner in the same C statement.
ctypedef int (*hip_host_malloc_t)(void **, size_t, unsigned int) noexcept nogil
ctypedef int (*hip_event_create_t)(void **, unsigned int) noexcept nogil
ctypedef int (*hip_event_record_t)(void *, void *) noexcept nogil
cdef hip_host_malloc_t _c_host_malloc = NULL
cdef hip_handle_fn_t _c_host_free = NULL
cdef hip_event_create_t _c_event_create = NULL
cdef hip_event_record_t _c_event_rec = NULL
cdef hip_handle_fn_t _c_event_free = NULL
cdef bint _capi_tried = 0

DEF HIP_EVENT_DISABLE_TIMING = 2

DEF HIP_SUCCESS = 0
DEF HIP_ERROR_NOT_READY = 600

from cpython.exc cimport PyErr_CheckSignals
from posix.time cimport nanosleep, clock_gettime, CLOCK_MONOTONIC
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
    global _capi_tried, _c_launch_host_func, _c_stream_query, _c_event_query
    global _c_host_malloc, _c_host_free, _c_event_create, _c_event_rec, _c_event_free
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
        _c_event_query = <hip_handle_fn_t>_capsule_fn(
            capi, "hipEventQuery", b"enum hipError_t (hipEvent_t)")
        _c_host_malloc = <hip_host_malloc_t>_capsule_fn(
            capi, "hipHostMalloc", b"enum hipError_t (void **, size_t, unsigned int)")
        _c_host_free = <hip_handle_fn_t>_capsule_fn(
            capi, "hipHostFree", b"enum hipError_t (void *)")
        _c_event_create = <hip_event_create_t>_capsule_fn(
            capi, "hipEventCreateWithFlags", b"enum hipError_t (hipEvent_t *, unsigned int)")
        _c_event_rec = <hip_event_record_t>_capsule_fn(
            capi, "hipEventRecord", b"enum hipError_t (hipEvent_t, hipStream_t)")
        _c_event_free = <hip_handle_fn_t>_capsule_fn(
            capi, "hipEventDestroy", b"enum hipError_t (hipEvent_t)")
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


cdef int _event_query_h(uintptr_t ev) except? -1:
    cdef int err
    _load_hip_capi()
    if _c_event_query != NULL:
        with nogil:
            err = _c_event_query(<void *>ev)
        return err
    return int(_hipapi().hip.hipEventQuery(ev)[0])


# --------------------------------------------------------------------------
# The one timeout rule
# --------------------------------------------------------------------------

from numbers import Real as _Real


cdef double _as_timeout(object timeout, str name="timeout") except? -2.0:
    """A wait's ``timeout`` in seconds; -1.0 for no limit (None or
    infinity). The rule of every wait in the package, as ``threading`` and
    ``concurrent.futures`` would refuse: a real number >= 0 or None; a bool,
    a string or any other non-number is a TypeError, a negative number or
    NaN a ValueError."""
    cdef double t
    if timeout is None:
        return -1.0
    if type(timeout) is not float and type(timeout) is not int:
        if isinstance(timeout, bool) or not isinstance(timeout, _Real):
            raise TypeError(f"{name} must be a number of seconds or None, not "
                            f"{type(timeout).__name__}")
    try:
        t = float(timeout)
    except OverflowError:     # an int beyond any float: no limit in practice
        return -1.0 if timeout > 0 else _as_timeout(-1.0, name)
    if not t >= 0:
        raise ValueError(f"{name} must be >= 0 seconds or None, got {timeout!r}")
    if t == float("inf"):
        return -1.0
    return t


def as_timeout(timeout, name="timeout"):
    """``timeout`` checked by the rule every wait of the package follows:
    None (or infinity) for no limit, else seconds >= 0 as a float.

    Raises
    ------
    TypeError
        Neither a real number nor None (a bool or a string is refused).
    ValueError
        Negative, or NaN.
    """
    cdef double t = _as_timeout(timeout, name)
    return None if t < 0 else t


# --------------------------------------------------------------------------
# The one interruptible wait
# --------------------------------------------------------------------------

cdef enum WaitKind:
    WAIT_EVENT = 0     # target: a hipEvent_t
    WAIT_STREAM = 1    # target: a hipStream_t
    WAIT_FLAG = 2      # target: address of an unsigned char, ready when == ready_value


cdef inline double _now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


cdef int wait_interruptible(int kind, uintptr_t target, double timeout_s,
                            unsigned char ready_value=1) except -1:
    """Wait until a HIP event or stream has passed its work, or until a C
    flag (written by another thread or a host function with a release
    store) equals ``ready_value``.

    ``kind`` is ``WAIT_EVENT``, ``WAIT_STREAM`` or ``WAIT_FLAG``; ``target``
    the ``hipEvent_t``, ``hipStream_t`` or ``unsigned char *`` as an integer;
    ``timeout_s`` seconds, negative for no limit; ``ready_value`` the flag's
    value that means ready (WAIT_FLAG only). Returns ``HIP_SUCCESS``
    (0) once ready, ``HIP_ERROR_NOT_READY`` (600) when the timeout passed,
    or the ``hipError_t`` of a failed query (left to the caller). Never
    blocks in C for more than 2 ms: queries are repeated with a backoff
    (10 us doubling to 2 ms) and the GIL is released while sleeping;
    ``PyErr_CheckSignals`` runs between them, so a signal handler's
    exception (``KeyboardInterrupt``) is raised from here within a few
    milliseconds. Safe to call from any thread holding the GIL.
    """
    cdef int err
    cdef double deadline = -1.0
    cdef long delay_ns = 10000
    cdef timespec ts
    if timeout_s >= 0:
        deadline = _now() + timeout_s
    while True:
        if kind == WAIT_FLAG:
            err = HIP_SUCCESS if hipfile_atomic_load_u8(<unsigned char *>target) \
                == ready_value else HIP_ERROR_NOT_READY
        elif kind == WAIT_EVENT:
            err = _event_query_h(target)
        else:
            err = _stream_query(target)
        if err != HIP_ERROR_NOT_READY:
            return err
        if deadline >= 0 and _now() >= deadline:
            return HIP_ERROR_NOT_READY
        PyErr_CheckSignals()
        ts.tv_sec = 0
        ts.tv_nsec = delay_ns
        with nogil:
            nanosleep(&ts, NULL)
        if delay_ns < 2000000:
            delay_ns *= 2
            if delay_ns > 2000000:
                delay_ns = 2000000


cdef int _hip_fail(int err, str func) except -1:
    raise HipRuntimeError(hip_err=err, func=func)


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
    global _hip_mod, _PointerType, _EventType
    if _hip_mod is None:
        from hipfile import _hip
        _hip_mod = _hip
        _PointerType = _hip.Pointer
        _EventType = _hip.hip.hipEvent_t
    return _hip_mod

