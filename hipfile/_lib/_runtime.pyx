# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""HIP runtime access for the hot paths, the one timeout rule, the one
interruptible wait, devices, and the process an object belongs to.

Invariants
- HIP is reached through HIP-Python only: its C-level functions, taken from
  the ``__pyx_capi__`` capsules of its Cython module (signature checked),
  or its Python functions when a capsule is missing. The capsules are
  taken from that module alone (``rocm.bindings.cyhip``), so the engine's
  set-up and the load paths never import HIP-Python's Python layer, which
  costs a first call about 0.1 s; HIP-Python still opens the runtime, with
  its own loader, so a process has one copy of it.
- ``c_*`` pointers are set once, under the GIL, by ``load_hip_capi``;
  they may then be called without the GIL from any thread.
- Host functions enqueued on a stream (``host_fn_t``) make no HIP call and
  never take the GIL.
- The atomics are the only way memory shared with a stream's thread or
  with worker threads is read or written.
- Every blocking wait goes through ``_wait.wait_sliced`` (see _wait.pyx).
- ``fork_gen`` counts the forks this process descends from (0 in the
  process that imported hipfile). Objects record it when they are opened,
  registered or submitted: one whose generation differs was inherited
  through ``fork``, never reaches the library (``ForkedProcessError``), and
  closing or finalizing it only drops references.
- A fork starts a new driver epoch (every inherited registration counts as
  gone). ``c_driver_epoch`` also grows whenever a close brings the driver's
  count to 0: the library then drops every registration.
- One fork hook: the child runs the resets registered with
  ``on_fork_child``, in the order of registration (each layer registers its
  own at import, so lower layers reset first).
- Once the interpreter exits (``atexit``), finalizers call nothing: the HIP
  runtime may already be shutting down.
"""

import os
import atexit

from cpython.exc cimport PyErr_Clear, PyErr_Occurred
from libc.string cimport memset
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_GetName, PyCapsule_CheckExact
from cpython.ref cimport PyObject
from libc.stdint cimport uintptr_t

from hipfile._lib._errors import ForkedProcessError, HipRuntimeError, stream_error
from hipfile._lib._bindings import driver_close as _driver_close, use_count as _use_count

_hip_mod = None
PointerType = None
EventType = None    # HIP-Python hipEvent_t

# HIP-Python exports its C-level HIP functions as capsules
# (``__pyx_capi__`` of its Cython module); calling those keeps HIP access
# inside HIP-Python while skipping Python-level overhead on hot paths.

# Allocations whose owner must be set before any Python code can run (a
# signal handler raising KeyboardInterrupt runs at any bytecode boundary,
# also inside HIP-Python's Python-level wrappers): made through the C-level
# functions, the handle lands in its owner in the same C statement.
cdef bint _capi_tried = 0

cdef void *_capsule_fn(dict capi, str name, bytes signature):
    cap = capi.get(name)
    if cap is None or not PyCapsule_CheckExact(cap):
        return NULL
    cdef const char *sig = PyCapsule_GetName(cap)
    if sig == NULL or <bytes>sig != signature:
        return NULL
    return PyCapsule_GetPointer(cap, sig)


cdef object _hip_capi = None    # HIP-Python's C entry points, once found


#: HIP-Python's Cython modules of C-level HIP functions, newest layout
#: first. Importing one of them alone loads neither HIP-Python's Python
#: layer nor the runtime (HIP-Python opens the runtime at the first call,
#: through its own loader, so there is only ever its copy).
_CAPI_MODULES = ("rocm.bindings.cyhip", "hip.chip")


cdef dict _find_hip_capi():
    """HIP-Python's table of C entry points (the ``__pyx_capi__`` of its
    Cython module that exports ``hipLaunchHostFunc`` as expected), found
    without importing HIP-Python's Python layer where its layout allows;
    None where it has no such table."""
    global _hip_capi
    if _hip_capi is None:
        import importlib
        import sys
        for name in _CAPI_MODULES:
            try:
                mod = importlib.import_module(name)
            except ImportError:
                continue
            capi = getattr(mod, "__pyx_capi__", None)
            if isinstance(capi, dict) and _capsule_fn(
                    capi, "hipLaunchHostFunc",
                    b"enum hipError_t (hipStream_t, hipHostFn_t, void *)") != NULL:
                _hip_capi = capi
                return _hip_capi
        hipapi()
        for mod in list(sys.modules.values()):
            capi = getattr(mod, "__pyx_capi__", None)
            if isinstance(capi, dict) and _capsule_fn(
                    capi, "hipLaunchHostFunc",
                    b"enum hipError_t (hipStream_t, hipHostFn_t, void *)") != NULL:
                _hip_capi = capi
                break
    return _hip_capi


cdef void *hip_fn(str name, bytes params):
    """HIP-Python's C function ``name``, which takes ``params`` (its C
    parameter list as HIP-Python declares it) and returns ``hipError_t``;
    NULL where HIP-Python has no such function."""
    capi = _find_hip_capi()
    if capi is None:
        return NULL
    return _capsule_fn(capi, name, b"enum hipError_t (" + params + b")")


cdef int load_hip_capi() except -1:
    global _capi_tried, c_launch_host_func, c_stream_query, c_event_query
    global c_host_malloc, c_host_free, c_event_create, c_event_rec, c_event_free
    global c_get_device, c_set_device, c_device_count, c_device_attribute
    global c_host_device_pointer, c_stream_create, c_stream_destroy
    global c_device_synchronize, c_pointer_attributes, c_stream_get_device
    global c_malloc, c_free, c_host_register, c_host_unregister
    if _capi_tried:
        return 0
    _capi_tried = 1
    c_launch_host_func = <hip_launch_host_func_t>hip_fn(
        "hipLaunchHostFunc", b"hipStream_t, hipHostFn_t, void *")
    c_stream_query = <hip_handle_fn_t>hip_fn("hipStreamQuery", b"hipStream_t")
    c_event_query = <hip_handle_fn_t>hip_fn("hipEventQuery", b"hipEvent_t")
    c_host_malloc = <hip_host_malloc_t>hip_fn("hipHostMalloc", b"void **, size_t, unsigned int")
    c_host_free = <hip_handle_fn_t>hip_fn("hipHostFree", b"void *")
    c_event_create = <hip_event_create_t>hip_fn("hipEventCreateWithFlags",
                                                  b"hipEvent_t *, unsigned int")
    c_event_rec = <hip_event_record_t>hip_fn("hipEventRecord", b"hipEvent_t, hipStream_t")
    c_event_free = <hip_handle_fn_t>hip_fn("hipEventDestroy", b"hipEvent_t")
    c_get_device = <hip_int_out_t>hip_fn("hipGetDevice", b"int *")
    c_set_device = <hip_int_in_t>hip_fn("hipSetDevice", b"int")
    c_device_count = <hip_int_out_t>hip_fn("hipGetDeviceCount", b"int *")
    c_device_attribute = <hip_device_attribute_t>hip_fn(
        "hipDeviceGetAttribute", b"int *, enum hipDeviceAttribute_t, int")
    c_host_device_pointer = <hip_host_device_pointer_t>hip_fn(
        "hipHostGetDevicePointer", b"void **, void *, unsigned int")
    c_stream_create = <hip_event_create_t>hip_fn("hipStreamCreateWithFlags",
                                                   b"hipStream_t *, unsigned int")
    c_stream_destroy = <hip_handle_fn_t>hip_fn("hipStreamDestroy", b"hipStream_t")
    c_device_synchronize = <hip_void_fn_t>hip_fn("hipDeviceSynchronize", b"void")
    for src in (b"void const *", b"const void *"):   # as HIP-Python versions spell it
        c_pointer_attributes = <hip_pointer_attributes_t>hip_fn(
            "hipPointerGetAttributes", b"struct hipPointerAttribute_t *, " + src)
        if c_pointer_attributes != NULL:
            break
    c_stream_get_device = <hip_stream_get_device_t>hip_fn("hipStreamGetDevice",
                                                             b"hipStream_t, int *")
    c_malloc = <hip_malloc_t>hip_fn("hipMalloc", b"void **, size_t")
    c_free = <hip_handle_fn_t>hip_fn("hipFree", b"void *")
    c_host_register = <hip_host_register_t>hip_fn("hipHostRegister",
                                                   b"void *, size_t, unsigned int")
    c_host_unregister = <hip_handle_fn_t>hip_fn("hipHostUnregister", b"void *")
    return 0


# --------------------------------------------------------------------------
# HIP calls the package makes outside its hot paths (set-up, devices), in C
# where HIP-Python exports the function and through its Python layer
# otherwise; each raises HipRuntimeError with the function's name. The
# first call of a process may be the one that makes HIP-Python open the
# runtime: an error of its loader is raised as it set it.
# --------------------------------------------------------------------------

cdef int _hc_check(int err, str func) except -1:
    if PyErr_Occurred() != NULL:
        return -1
    if err != HIP_SUCCESS:
        raise HipRuntimeError(hip_err=err, func=func)
    return 0


cdef object _py_hip(str func, tuple args):
    h = hipapi()
    return h.check(getattr(h.hip, func)(*args), func)


cdef int hc_get_device() except? -2:
    """hipGetDevice: the calling thread's device."""
    cdef int dev = 0
    cdef int err
    load_hip_capi()
    if c_get_device == NULL:
        return int(_py_hip("hipGetDevice", ()))
    err = c_get_device(&dev)
    _hc_check(err, "hipGetDevice")
    return dev


cdef int hc_set_device(int device) except -1:
    """hipSetDevice."""
    load_hip_capi()
    if c_set_device == NULL:
        _py_hip("hipSetDevice", (device,))
        return 0
    return _hc_check(c_set_device(device), "hipSetDevice")


cdef int hc_device_count() except -1:
    """hipGetDeviceCount."""
    cdef int n = 0
    load_hip_capi()
    if c_device_count == NULL:
        return int(_py_hip("hipGetDeviceCount", ()))
    _hc_check(c_device_count(&n), "hipGetDeviceCount")
    return n


cdef int hc_device_attribute(int attr, int device, int *value) except -1:
    """hipDeviceGetAttribute into ``*value``; returns the hipError_t (not
    raised: callers treat an unknown attribute as absent)."""
    cdef int err
    load_hip_capi()
    if c_device_attribute == NULL:
        h = hipapi()
        err, v = h.hip.hipDeviceGetAttribute(h.hip.hipDeviceAttribute_t(attr), device)
        if int(err) == HIP_SUCCESS:
            value[0] = int(v)
        return int(err)
    err = c_device_attribute(value, attr, device)
    if PyErr_Occurred() != NULL:
        return -1
    return err


cdef uintptr_t hc_host_malloc(size_t size, unsigned int flags) except? 0:
    """hipHostMalloc: page-locked host memory of ``size`` bytes."""
    cdef void *p = NULL
    cdef int err
    load_hip_capi()
    if c_host_malloc == NULL:
        return <uintptr_t>int(_py_hip("hipHostMalloc", (size, flags)))
    with nogil:
        err = c_host_malloc(&p, size, flags)
    _hc_check(err, "hipHostMalloc")
    return <uintptr_t>p


cdef int hc_host_free(uintptr_t ptr) except -1:
    """hipHostFree."""
    load_hip_capi()
    if c_host_free == NULL:
        _py_hip("hipHostFree", (ptr,))
        return 0
    return _hc_check(c_host_free(<void *>ptr), "hipHostFree")


cdef extern from *:
    """
    #include <sys/mman.h>
    #ifndef MADV_DONTFORK
    #define MADV_DONTFORK 10
    #endif
    #ifndef MADV_HUGEPAGE
    #define MADV_HUGEPAGE 14
    #endif
    #ifndef MADV_POPULATE_WRITE
    #define MADV_POPULATE_WRITE 23
    #endif
    static void *hipfile_map_anon(size_t n) {
        void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    """
    void *hipfile_map_anon(size_t n) nogil
    int munmap(void *addr, size_t n) nogil
    int madvise(void *addr, size_t n, int advice) nogil
    enum:
        MADV_DONTFORK
        MADV_HUGEPAGE
        MADV_POPULATE_WRITE

cdef enum:
    HUGE_PAGE = 2 << 20


cdef tuple hc_pinned_pages(size_t size):
    """Page-locked host memory of ``size`` bytes (whole 2 MiB pages) made by
    registering (hipHostRegister) anonymous memory advised for transparent
    huge pages and populated by the kernel: a third to a half of the time
    that hipHostMalloc takes for the same bytes on an H100 (it pins 4 KiB
    pages one by one). The mapping is not inherited by a forked child (MADV_DONTFORK: a
    copy-on-write page would leave the device reading the parent's old
    page). Returns ``(address, mapping, mapping bytes)`` for
    :func:`hc_pinned_pages_free`, or None where the runtime lacks
    hipHostRegister or refuses (the caller then uses hipHostMalloc)."""
    cdef size_t n = (size + HUGE_PAGE - 1) & ~(<size_t>HUGE_PAGE - 1)
    cdef size_t span = n + HUGE_PAGE
    cdef char *base
    cdef char *addr
    cdef int err
    load_hip_capi()
    if c_host_register == NULL or c_host_unregister == NULL or size == 0:
        return None
    with nogil:
        base = <char *>hipfile_map_anon(span)
        if base != NULL:
            addr = <char *>((<uintptr_t>base + HUGE_PAGE - 1) & ~(<uintptr_t>HUGE_PAGE - 1))
            madvise(addr, n, MADV_DONTFORK)
            madvise(addr, n, MADV_HUGEPAGE)
            madvise(addr, n, MADV_POPULATE_WRITE)    # older kernels: the registration faults
            err = c_host_register(addr, n, 0)
            if err != HIP_SUCCESS:
                munmap(base, span)
                base = NULL
    _hc_check(0, "hipHostRegister")     # HIP-Python's loader failed: its error
    if base == NULL:
        return None
    return (<uintptr_t>addr, <uintptr_t>base, span)


cdef int hc_pinned_pages_free(tuple pages) except -1:
    """Unregister and unmap memory of :func:`hc_pinned_pages`."""
    cdef uintptr_t addr = pages[0], base = pages[1]
    cdef size_t span = pages[2]
    cdef int err = c_host_unregister(<void *>addr)
    munmap(<void *>base, span)
    return _hc_check(err, "hipHostUnregister")


cdef uintptr_t hc_host_device_pointer(uintptr_t host) except? 0:
    """hipHostGetDevicePointer of mapped host memory."""
    cdef void *p = NULL
    load_hip_capi()
    if c_host_device_pointer == NULL:
        return <uintptr_t>int(_py_hip("hipHostGetDevicePointer", (host, 0)))
    _hc_check(c_host_device_pointer(&p, <void *>host, 0), "hipHostGetDevicePointer")
    return <uintptr_t>p


cdef uintptr_t hc_stream_create(unsigned int flags) except? 0:
    """hipStreamCreateWithFlags."""
    cdef void *s = NULL
    load_hip_capi()
    if c_stream_create == NULL:
        return <uintptr_t>int(_py_hip("hipStreamCreateWithFlags", (flags,)))
    _hc_check(c_stream_create(&s, flags), "hipStreamCreateWithFlags")
    return <uintptr_t>s


cdef int hc_stream_destroy(uintptr_t stream) except -1:
    """hipStreamDestroy."""
    load_hip_capi()
    if c_stream_destroy == NULL:
        _py_hip("hipStreamDestroy", (stream,))
        return 0
    return _hc_check(c_stream_destroy(<void *>stream), "hipStreamDestroy")


cdef uintptr_t hc_event_create(unsigned int flags) except? 0:
    """hipEventCreateWithFlags."""
    cdef void *e = NULL
    load_hip_capi()
    if c_event_create == NULL:
        return <uintptr_t>int(_py_hip("hipEventCreateWithFlags", (flags,)))
    _hc_check(c_event_create(&e, flags), "hipEventCreateWithFlags")
    return <uintptr_t>e


cdef int hc_event_record(uintptr_t event, uintptr_t stream) except -1:
    """hipEventRecord; returns the hipError_t (not raised)."""
    cdef int err
    load_hip_capi()
    if c_event_rec == NULL:
        return int(hipapi().hip.hipEventRecord(event, stream)[0])
    with nogil:
        err = c_event_rec(<void *>event, <void *>stream)
    return err


cdef int hc_event_destroy(uintptr_t event) except -1:
    """hipEventDestroy; returns the hipError_t (not raised)."""
    load_hip_capi()
    if c_event_free == NULL:
        return int(hipapi().hip.hipEventDestroy(event)[0])
    return c_event_free(<void *>event)


cdef int hc_device_synchronize() except -1:
    """hipDeviceSynchronize; returns the hipError_t (not raised)."""
    cdef int err
    load_hip_capi()
    if c_device_synchronize == NULL:
        return int(hipapi().hip.hipDeviceSynchronize()[0])
    with nogil:
        err = c_device_synchronize()
    return err


cdef uintptr_t hc_malloc(size_t size) except? 0:
    """hipMalloc on the current device."""
    cdef void *p = NULL
    cdef int err
    load_hip_capi()
    if c_malloc == NULL:
        return <uintptr_t>int(_py_hip("hipMalloc", (size,)))
    with nogil:
        err = c_malloc(&p, size)
    _hc_check(err, "hipMalloc")
    return <uintptr_t>p


cdef int hc_free(uintptr_t ptr) except -1:
    """hipFree; returns the hipError_t (not raised)."""
    cdef int err
    load_hip_capi()
    if c_free == NULL:
        return int(hipapi().hip.hipFree(ptr)[0])
    with nogil:
        err = c_free(<void *>ptr)
    return err


def device_malloc(size_t size, int device=-1):
    """hipMalloc of ``size`` bytes on ``device`` (-1: the current one);
    returns the address. HipRuntimeError when the runtime refuses."""
    with on_device(device):
        return hc_malloc(size)


def device_free(uintptr_t ptr, int device=-1):
    """hipFree of an address from :func:`device_malloc`; returns the
    hipError_t (0 on success)."""
    with on_device(device):
        return hc_free(ptr)


cdef int _query(hip_handle_fn_t fn, str name, uintptr_t handle) except? -1:
    """``name`` (hipStreamQuery or hipEventQuery) of ``handle``: HIP-Python's
    C function ``fn`` without the GIL, or its Python function where there is
    no C one."""
    cdef int err
    if fn != NULL:
        with nogil:
            err = fn(<void *>handle)
        return err
    return int(getattr(hipapi().hip, name)(handle)[0])


cdef int stream_query(uintptr_t stream) except? -1:
    load_hip_capi()
    return _query(c_stream_query, "hipStreamQuery", stream)


cdef int event_query(object event) except? -1:
    return event_query_h(<uintptr_t>int(event))


cdef int event_query_h(uintptr_t ev) except? -1:
    load_hip_capi()
    return _query(c_event_query, "hipEventQuery", ev)


cdef int hip_fail(int err, str func) except -1:
    raise HipRuntimeError(hip_err=err, func=func)


cdef int stream_fail(int err, str func, uintptr_t stream) except -1:
    """Raise for a failed HIP call on the caller's stream: an unknown
    stream handle is said to be one (InvalidStreamError)."""
    raise stream_error(err, func, stream)


cdef object hipapi():
    global _hip_mod, PointerType, EventType
    if _hip_mod is None:
        from hipfile._lib import _hip
        _hip_mod = _hip
        PointerType = _hip.Pointer
        EventType = _hip.hip.hipEvent_t
    return _hip_mod



cdef void destroy_event(object event):
    # The C-level call when HIP-Python exports it: no Python code runs, so
    # Ctrl-C cannot land half way (the event is destroyed or left alone).
    cdef uintptr_t ev
    if event is None or exiting:
        return
    if c_event_free != NULL:
        ev = <uintptr_t>int(event)
        c_event_free(<void *>ev)
        return
    try:
        hipapi().hip.hipEventDestroy(event)
    except Exception:
        pass


# --------------------------------------------------------------------------
# Devices
# --------------------------------------------------------------------------

class on_device:
    """Make ``device`` current on this thread for a block (-1: leave as is)."""

    def __init__(self, int device):
        self.device = device
        self.prev = -1

    def __enter__(self):
        if self.device >= 0:
            self.prev = hc_get_device()
            if self.prev != self.device:
                hc_set_device(self.device)
        return self

    def __exit__(self, *exc):
        if self.device >= 0 and self.prev >= 0 and self.prev != self.device:
            try:
                hc_set_device(self.prev)
            except Exception:
                pass      # the device the block left is current; nothing to report
        return False


cdef int current_device() except? -2:
    try:
        return hc_get_device()
    except Exception:
        return -1


cdef int pointer_device(uintptr_t ptr, bint *is_device=NULL) except? -2:
    """The device of a device pointer, or the current device when the
    runtime cannot say; ``*is_device``: whether the runtime knows ``ptr`` as
    device (or managed) memory."""
    # hipPointerAttribute_t starts with the memory type and the device
    # (two ints) in every HIP release; the rest of it is not read.
    cdef int attrs[16]
    cdef int err
    if is_device != NULL:
        is_device[0] = 0
    load_hip_capi()
    if c_pointer_attributes != NULL:
        memset(attrs, 0, sizeof(attrs))
        err = c_pointer_attributes(<void *>attrs, <const void *>ptr)
        if PyErr_Occurred() != NULL:
            PyErr_Clear()
        elif err == HIP_SUCCESS and attrs[0] in (2, 3):
            if is_device != NULL:
                is_device[0] = 1
            return attrs[1]
        return current_device()
    h = hipapi()
    try:
        err, a = h.hip.hipPointerGetAttributes(ptr)
        if err == h.hip.hipError_t.hipSuccess and int(a.type) in (2, 3):
            if is_device != NULL:
                is_device[0] = 1
            return int(a.device)
    except Exception:
        pass
    return current_device()


cdef int stream_device(uintptr_t stream) except? -2:
    cdef int dev = -1
    cdef int err
    if stream == 0:
        return current_device()
    load_hip_capi()
    if c_stream_get_device != NULL:
        err = c_stream_get_device(<void *>stream, &dev)
        if PyErr_Occurred() != NULL:
            PyErr_Clear()
        elif err == HIP_SUCCESS:
            return dev
        return current_device()
    h = hipapi()
    try:
        return h.check(h.hip.hipStreamGetDevice(stream), "hipStreamGetDevice")
    except Exception:
        return current_device()


# --------------------------------------------------------------------------
# The process: fork, exit and driver epochs
# --------------------------------------------------------------------------

cdef unsigned long fork_gen = 0
cdef bint exiting = 0
cdef unsigned long c_driver_epoch = 0
cdef list _fork_resets = []


def on_fork_child(reset):
    """Register ``reset()`` to run in the child after ``fork``, after the
    resets registered before it (the one fork hook of the package)."""
    _fork_resets.append(reset)


def _after_fork_in_child():
    global fork_gen, c_driver_epoch
    fork_gen += 1
    c_driver_epoch += 1
    for reset in list(_fork_resets):
        reset()


def _at_exit():
    global exiting
    exiting = 1


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_at_exit)


def fork_generation():
    """How many ``fork`` calls separate this process from the one that
    imported hipfile (0 there)."""
    return fork_gen


def finalizing():
    """Whether the interpreter is exiting (finalizers then do nothing)."""
    return bool(exiting)


def driver_epoch():
    """How many times the driver's open count has dropped to 0 through
    :func:`driver_close` (or a fork) in this process."""
    return c_driver_epoch


cdef int raise_forked(str what) except -1:
    raise ForkedProcessError(detail=f"{what} was opened, registered or submitted in the "
                             "parent process before fork; hipFile state does not survive "
                             "fork: open, register and submit again in this process")


cdef void note_driver_close():
    # a close that brings the driver's count to 0 drops every registration
    global c_driver_epoch
    try:
        if _use_count() == 0:
            c_driver_epoch += 1
    except Exception:
        c_driver_epoch += 1


def driver_close():
    """Wraps ``hipFileDriverClose``; a close that brings the driver's count
    to 0 starts a new driver epoch (every registration counts as gone)."""
    if driver_close_hook != NULL:
        driver_close_hook()
    _driver_close()
    note_driver_close()


cdef class CompletionBase:
    """``result`` and ``get``, the names of ``concurrent.futures`` and of
    KvikIO for ``wait`` (see :class:`hipfile.Completion`), for the compiled
    handles, which derive from it."""

    def result(self, timeout=None):
        """Same as ``wait`` (the ``concurrent.futures`` name)."""
        return self.wait(timeout)

    def get(self, timeout=None):
        """Same as ``wait`` (KvikIO's name)."""
        return self.wait(timeout)

