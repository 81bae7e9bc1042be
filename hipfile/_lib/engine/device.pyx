# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""What the stream engine needs of the HIP runtime and of the package:
HIP-Python's C functions for stream memory operations, copies and events,
the completion and gate flags (per device, in mapped pinned memory), the
device's own stream, and the engine's settings. Nothing here calls the
engine's C source but through ``eng``."""

import os
from time import perf_counter

from cpython.exc cimport PyErr_Occurred
from libc.stdint cimport uint32_t, uintptr_t
from libc.string cimport memset

from hipfile._lib._core cimport c_as_index
from hipfile._lib.engine.cengine cimport eng, hfe_event_fn
from hipfile._lib._runtime cimport (
    HIP_EVENT_DISABLE_TIMING, HIP_SUCCESS, c_event_free, c_event_query, c_event_rec,
    current_device, hip_fail, hip_fn, hipapi, load_hip_capi, stream_fail,
    hc_device_attribute, hc_device_count, hc_device_synchronize, hc_event_create,
    hc_event_destroy, hc_event_record, hc_get_device, hc_host_device_pointer, hc_host_free,
    hc_host_malloc, hc_stream_create, hc_stream_destroy)
from hipfile._lib._runtime cimport c_set_device as runtime_set_device
from hipfile._lib._runtime import on_device

memset(&eng_api, 0, sizeof(eng_api))
# the compiled defaults (those of hipfile.defaults), until settings are pushed
eng_cfg.threads = max(4, min(16, (os.cpu_count() or 8) // 2))
eng_cfg.task_size = 2 << 20
eng_cfg.staging_size = 64 << 20
eng_cfg.copy_streams = 1
eng_cfg.copy_batch = 1
eng_cfg.direct_io_size = 4 << 20
eng_cfg.batch_copies = 1
eng_cfg.release_host = 0
eng_cfg.data_hipfile = 0
eng_cfg.refused = 0
_refusal = None          # why the settings pushed last are refused (a str), or None

#: Mechanisms by which completion reaches GPU streams.
MECHANISM_STREAM_MEMOPS = "stream-memory-operations"
MECHANISM_HOST_FUNCTIONS = "host-waits"


def engine_batch_copies():
    """Whether the staged path hands a chunk's copies to the stream in one
    hipMemcpyBatchAsync: the runtime has it and the ``engine_batch_copies``
    setting is on. Test hook."""
    eng_settings_ok()
    load_engine_capi()
    return eng_cfg.batch_copies and eng_api.rt.memcpy_batch_async != NULL


cdef int load_engine_capi() except -1:
    global eng_api
    cdef hip_count_fn_t count_fn
    cdef int ndev = 0
    if eng_api.tried:
        return 0
    load_hip_capi()
    # the event and device entry points _runtime looked up already
    eng_api.event_destroy = c_event_free
    eng_api.event_record = <hip_record_fn_t>c_event_rec
    eng_api.set_device = <hip_int_fn_t>runtime_set_device
    eng_api.wait_value32 = <hip_wait32_t>hip_fn(
        "hipStreamWaitValue32", b"hipStream_t, void *, uint32_t, unsigned int, uint32_t")
    eng_api.write_value32 = <hip_write32_t>hip_fn(
        "hipStreamWriteValue32", b"hipStream_t, void *, uint32_t, unsigned int")
    eng_api.stream_wait_event = <hip_wait_event_t>hip_fn(
        "hipStreamWaitEvent", b"hipStream_t, hipEvent_t, unsigned int")
    for src in (b"void const *", b"const void *"):   # as HIP-Python versions spell it
        eng_api.memcpy_async = <hip_memcpy_async_t>hip_fn(
            "hipMemcpyAsync", b"void *, " + src + b", size_t, enum hipMemcpyKind, hipStream_t")
        if eng_api.memcpy_async != NULL:
            break
    # HIP-Python declares every entry point; the runtime it loads may
    # predate hipMemcpyBatchAsync (ROCm 7), so ask the library itself,
    # once a first call has made HIP-Python load it.
    count_fn = <hip_count_fn_t>hip_fn("hipGetDeviceCount", b"int *")
    if count_fn != NULL:
        count_fn(&ndev)
        if PyErr_Occurred() != NULL:
            return -1       # HIP-Python could not load the runtime: its error, raised
    if eng.runtime_exports(b"libamdhip64", b"hipMemcpyBatchAsync"):
        eng_api.memcpy_batch = <hip_memcpy_batch_t>hip_fn(
            "hipMemcpyBatchAsync", b"void **, void **, size_t *, size_t, "
            b"struct hipMemcpyAttributes *, size_t *, size_t, size_t *, hipStream_t")
    if eng.runtime_exports(b"libamdhip64", b"hipMemsetD32Async"):
        eng_api.memset_d32 = <hip_memset_d32_t>hip_fn(
            "hipMemsetD32Async", b"void *, int, size_t, hipStream_t")
    eng_api.rt.wait_value32 = eng_api.wait_value32
    eng_api.rt.write_value32 = eng_api.write_value32
    eng_api.rt.memcpy_async = eng_api.memcpy_async
    eng_api.rt.event_record = <int (*)(void *, void *) noexcept nogil>eng_api.event_record
    eng_api.rt.stream_wait_event = eng_api.stream_wait_event
    eng_api.rt.memcpy_batch_async = eng_api.memcpy_batch
    eng_api.rt.memset_d32_async = eng_api.memset_d32
    eng_api.tried = 1
    if c_event_query != NULL and eng_api.event_destroy != NULL:
        eng.set_event_fns(<hfe_event_fn>c_event_query, <hfe_event_fn>eng_api.event_destroy)
    return 0


cdef void eng_runtime(hfe_runtime *rt) noexcept:
    """Fill ``rt`` for one submission: the runtime table (written once, by
    load_engine_capi), less the calls that batch (hipMemcpyBatchAsync,
    hipMemsetD32Async) where ``engine_batch_copies`` is off. The caller's
    copy is what the engine reads with the GIL released."""
    rt[0] = eng_api.rt
    if not eng_cfg.batch_copies:
        rt.memcpy_batch_async = NULL
        rt.memset_d32_async = NULL


cdef int wait_value32(uintptr_t stream, uintptr_t ptr, uint32_t value) except -1:
    cdef int err
    if eng_api.wait_value32 != NULL:
        with nogil:
            err = eng_api.wait_value32(<void *>stream, <void *>ptr, value,
                                  HIP_STREAM_WAIT_VALUE_GTE, 0xFFFFFFFF)
    else:
        err = int(hipapi().hip.hipStreamWaitValue32(
            stream, ptr, value, HIP_STREAM_WAIT_VALUE_GTE, 0xFFFFFFFF)[0])
    if err != HIP_SUCCESS:
        stream_fail(err, "hipStreamWaitValue32", stream)
    return 0


cdef int write_value32(uintptr_t stream, uintptr_t ptr, uint32_t value):
    """Enqueue the gate write; returns the hipError_t."""
    if eng_api.write_value32 != NULL:
        with nogil:
            return eng_api.write_value32(<void *>stream, <void *>ptr, value, 0)
    try:
        return int(hipapi().hip.hipStreamWriteValue32(stream, ptr, value, 0)[0])
    except BaseException:
        return -1


# --------------------------------------------------------------------------
# What the engine keeps per device: its flags (here) and its staging ring
# (ops)
# --------------------------------------------------------------------------

cdef class PerDevice:
    """What the engine keeps one of per device, made on first use and freed
    by ``trim_pool`` once nothing is outstanding."""

    cdef int release(self) except -1:
        """Free what it holds (no operation may be outstanding)."""
        return 0


cdef PerDevice per_device(dict made, int device, per_device_fn make):
    """The device's entry of ``made`` (device -> entry), made by ``make``
    the first time. Making one calls HIP, which lets other threads in: one
    of them may have stored the device's entry first, and then that one is
    kept and this one released."""
    cdef PerDevice fresh, kept
    o = made.get(device)
    if o is not None:
        return <PerDevice>o
    t0 = perf_counter()
    fresh = make(device)
    fresh.made_s = perf_counter() - t0
    kept = <PerDevice>made.setdefault(device, fresh)
    if kept is not fresh:
        fresh.release()
    return kept


cdef int release_per_device(dict made) except -1:
    """Release and forget every entry of ``made``."""
    for o in list(made.values()):
        (<PerDevice>o).release()
    made.clear()
    return 0


# --------------------------------------------------------------------------
# Flags
# --------------------------------------------------------------------------

cdef class Flag:
    """One 32-bit completion or gate counter."""

    cdef uint32_t next_value(self):
        self.value += 1
        if self.value == 0:
            self.value = 1
        return self.value


cdef class FlagPool:
    """The flags of one device, and how streams of that device are released."""

    cdef Flag take(self):
        # _grow calls HIP, which may let another thread take the new flags
        while not self.free:
            self._grow()
        return <Flag>self.free.pop()

    cdef int _grow(self) except -1:
        # Mapped pinned host memory: the engine's threads store completions
        # into it and the gate thread reads it, while streams wait on it or
        # write it through its device address. (Signal memory from
        # hipExtMallocWithFlags is not host-writable on every platform; AMD's
        # runtime accepts any memory it knows unless GPU_STREAMOPS_CP_WAIT=1,
        # under which the engine uses host functions instead.)
        cdef Flag f
        cdef int i
        cdef uintptr_t base, devbase
        with on_device(self.device):
            base = hc_host_malloc(FLAGS_PER_HOST_PAGE * 4, HIP_HOST_MALLOC_MAPPED)
            self.mems.append(base)
            try:
                devbase = hc_host_device_pointer(base)
            except Exception:
                devbase = base
        memset(<void *>base, 0, FLAGS_PER_HOST_PAGE * 4)
        for i in range(FLAGS_PER_HOST_PAGE):
            f = Flag.__new__(Flag)
            f.ptr = <uint32_t *>(base + 4 * i)
            f.devptr = devbase + 4 * i
            f.pool = self
            self.free.append(f)
            self.nflags += 1
        return 0

    cdef int release(self) except -1:
        """Free every flag (no operation may be outstanding), once the device
        has finished its work; a pool that never held a flag page or a
        stream holds nothing, and the device is not waited for."""
        if not self.mems and self.stream is None:
            return 0
        with on_device(self.device):
            err = hc_device_synchronize()
            if err != HIP_SUCCESS:
                hip_fail(err, "hipDeviceSynchronize")
            if self.stream is not None:
                hc_stream_destroy(<uintptr_t>self.stream)
                self.stream = None
            for mem in self.mems:
                hc_host_free(<uintptr_t>mem)
        self.mems = []
        self.free = []
        self.nflags = 0
        return 0


flag_pools = {}      # device -> FlagPool


cdef FlagPool pool_for(int device):
    return <FlagPool>per_device(flag_pools, device, _new_pool)


cdef PerDevice _new_pool(int device):
    cdef bint can = memops_supported(device)
    cdef FlagPool p = FlagPool.__new__(FlagPool)
    p.device = device
    p.free = []
    p.mems = []
    p.can_memops = can
    p.memops = can and not eng_cfg.release_host
    return p


cdef bint memops_supported(int device) except -1:
    """Whether streams of ``device`` can wait on a flag (whatever the
    ``engine_release`` setting says)."""
    if os.environ.get("GPU_STREAMOPS_CP_WAIT", "").strip().lower() in ("1", "true", "yes"):
        return 0      # AMD's runtime then waits on signal memory only
    cdef int value = 0
    cdef int dev
    load_engine_capi()
    if eng_api.wait_value32 == NULL or eng_api.write_value32 == NULL:
        if not hasattr(hipapi().hip, "hipStreamWaitValue32"):
            return 0
    try:
        dev = device if device >= 0 else hc_get_device()
        err = hc_device_attribute(HIP_ATTR_CAN_USE_STREAM_WAIT_VALUE, dev, &value)
    except Exception:
        return 0
    return err == HIP_SUCCESS and value != 0


cdef bint staged_path(int fd, FlagPool pool, bint is_device) except -1:
    """Whether a submission takes the staged path: a POSIX descriptor, stream
    waits on the buffer's device, the runtime's copy entry point, and device
    memory (anything else goes to hipFile, which gives its own verdict)."""
    if fd < 0 or not pool.memops or not is_device or eng_cfg.data_hipfile:
        return 0
    load_engine_capi()
    return (eng_api.memcpy_async != NULL and eng_api.wait_value32 != NULL
            and eng_api.write_value32 != NULL)


cdef object internal_stream(FlagPool pool):
    """The device's own non-blocking stream (copies of unordered submissions,
    record_event)."""
    if pool.stream is None:
        with on_device(pool.device):
            pool.stream = hc_stream_create(HIP_STREAM_NON_BLOCKING)
    return pool.stream


cdef int stream_after(uintptr_t target, uintptr_t stream, int device) except -1:
    """Make ``target`` wait for the work enqueued on ``stream`` so far."""
    cdef uintptr_t ev
    cdef int err
    with on_device(device):
        ev = hc_event_create(HIP_EVENT_DISABLE_TIMING)
        try:
            err = hc_event_record(ev, stream)
            if err != HIP_SUCCESS:
                stream_fail(err, "hipEventRecord", stream)   # the caller's stream
            load_engine_capi()
            if eng_api.stream_wait_event != NULL:
                err = eng_api.stream_wait_event(<void *>target, <void *>ev, 0)
            else:
                err = int(hipapi().hip.hipStreamWaitEvent(target, ev, 0)[0])
            if err != HIP_SUCCESS:
                stream_fail(err, "hipStreamWaitEvent", target)
        finally:
            hc_event_destroy(ev)
    return 0


def engine_settings():
    """The engine's thread count and default task size in bytes, as
    ``hipfile.defaults`` last pushed them (the compiled defaults before).

    Raises
    ------
    ValueError
        The settings pushed last came with a bad environment variable.
    """
    eng_settings_ok()
    return {"threads": eng_cfg.threads, "task_size": eng_cfg.task_size}


def engine_push_settings(values, refusal=None):
    """Take the engine's settings: ``values`` maps every engine setting of
    ``hipfile.defaults`` (``engine_threads``, ``engine_task_size``,
    ``engine_staging_size``, ``engine_copy_streams``, ``engine_copy_batch``,
    ``engine_direct_io_size``, ``engine_batch_copies``, ``engine_release``,
    ``engine_data_path``) to its checked value. ``hipfile.defaults`` calls
    it at import and after every change, the one way the engine's settings
    change. ``refusal`` (a str): the settings could not be read (a bad
    environment variable); the engine keeps its values and refuses to submit,
    with that message, until a push without one. Sizes, thread count and
    data path take effect at the next submission, the staging ring's at the
    next ring made, and ``engine_release`` for the next submission (those
    submitted before keep their way).

    Raises
    ------
    KeyError
        A setting is missing from ``values`` (nothing is changed).
    """
    global _refusal, eng_cfg
    cdef eng_settings_t cfg = eng_cfg
    cdef FlagPool p
    if refusal is not None:
        _refusal = str(refusal)
        eng_cfg.refused = 1
        return
    cfg.threads = <int>values["engine_threads"]
    cfg.task_size = <size_t>values["engine_task_size"]
    cfg.staging_size = <size_t>values["engine_staging_size"]
    cfg.copy_streams = <int>values["engine_copy_streams"]
    cfg.copy_batch = <int>values["engine_copy_batch"]
    cfg.direct_io_size = <size_t>values["engine_direct_io_size"]
    cfg.batch_copies = bool(values["engine_batch_copies"])
    cfg.release_host = values["engine_release"] == "host-waits"
    cfg.data_hipfile = values["engine_data_path"] == "hipfile"
    cfg.refused = 0
    # every value read (Python code) before the one assignment
    eng_cfg = cfg
    _refusal = None
    for o in list(flag_pools.values()):
        # operations submitted before keep their mechanism (each handle has
        # its own); the next submission takes the new one
        p = <FlagPool>o
        p.memops = p.can_memops and not cfg.release_host


cdef int eng_settings_ok() except -1:
    """Refuse to submit while the settings pushed last came with a bad
    environment variable (one C flag to test on a submission)."""
    if eng_cfg.refused:
        raise ValueError(_refusal)
    return 0


cdef int device_arg(object device) except -2:
    """``device`` as a device number: an int naming a device, or -1 for the
    current one (TypeError for anything else, bools too; ValueError for no
    such device)."""
    cdef long long dev = c_as_index(device, "device")
    cdef int count = hc_device_count()
    if dev < -1 or dev >= count:
        raise ValueError(f"no device {dev}: {count} device(s), or -1 for the current one")
    if dev == -1:
        return current_device()
    return <int>dev


def engine_mechanism(device=-1):
    """How completion reaches GPU streams on ``device`` (-1: the current
    device): ``"stream-memory-operations"`` (hipStreamWaitValue32 on a flag)
    or ``"host-waits"`` (the device cannot wait on a flag: ``wait_on`` and
    stream-ordered submissions wait on the host)."""
    cdef int dev = device_arg(device)
    eng_settings_ok()
    return MECHANISM_STREAM_MEMOPS if pool_for(dev).memops else MECHANISM_HOST_FUNCTIONS


cdef uintptr_t record_gate_event(uintptr_t stream, int device) except? 0:
    """An event recorded on ``stream`` now (0 if the runtime refused)."""
    cdef uintptr_t ev
    cdef int err
    try:
        with on_device(device):
            ev = hc_event_create(HIP_EVENT_DISABLE_TIMING)
    except Exception:
        return 0
    err = hc_event_record(ev, stream)
    if err != HIP_SUCCESS:
        destroy_event_handle(ev)
        return 0
    return ev


cdef void destroy_event_handle(uintptr_t ev):
    try:
        hc_event_destroy(ev)
    except Exception:
        pass
