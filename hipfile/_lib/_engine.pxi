# The stream-ordered parallel engine: FileHandle.pread_async/pwrite_async
# and their _ranges forms (C threads in engine.c move the bytes).
#
# Invariants
# - Start: an operation touches neither file nor buffer before the caller's
#   stream has passed the submit point. Where the stream is idle at submit
#   the operation starts at once; otherwise the stream writes a gate flag
#   (hipStreamWriteValue32) that the engine's gate thread polls, or, without
#   stream memory operations, a host function opens the gate.
# - Completion: a worker stores the operation's flag value (release) when
#   its last chunk ends, failed or not, so a stream waiting on it
#   (hipStreamWaitValue32 >= value, or a blocking host function where stream
#   waits are unsupported) is always released; errors are reported on the
#   host by wait()/result().
# - Flags are 32-bit counters in mapped pinned host memory, that only grow
#   (waits compare with >=, which CUDA's cyclic compare matches): a slot is
#   reused at once after completion (older waiters stay satisfied), and
#   freed only by trim once no operation is outstanding and the devices
#   holding flags were synchronized.
# - A StreamIOHandle holds its file, buffer and stream (and the file's and
#   buffer's ``_held`` counts) until completion is observed; dropped before
#   that, they are parked and released by the next sweep. The C engine
#   never touches Python objects.
# - Every host-side wait polls in slices of at most 50 ms with the GIL
#   released, checking for signals between slices.

from libc.stdint cimport uint32_t, uint64_t
from cpython.exc cimport PyErr_CheckSignals

cdef extern from "engine.h" nogil:
    ctypedef struct hfe_op:
        pass
    ctypedef ssize_t (*hfe_io_fn)(void *, void *, size_t, int64_t, int64_t) noexcept nogil
    ctypedef int (*hfe_set_device_fn)(int) noexcept nogil
    int hfe_start(int nthreads, hfe_set_device_fn set_device)
    int hfe_stop(double timeout_s)
    int hfe_threads()
    long hfe_outstanding()
    hfe_op *hfe_op_new(int opcode, hfe_io_fn fn, void *fh, void *base, size_t size,
                       int64_t file_offset, int64_t buffer_offset, int device,
                       size_t task_size, uint32_t *flag, uint32_t flag_value)
    void hfe_op_incref(hfe_op *op)
    void hfe_op_decref(hfe_op *op)
    ctypedef int (*hfe_event_fn)(void *) noexcept nogil
    void hfe_set_event_fns(hfe_event_fn query, hfe_event_fn destroy)
    int hfe_submit(hfe_op **ops, int n, const uint32_t *gate, uint32_t gate_value,
                   void *gate_event)
    int hfe_op_done(const hfe_op *op)
    int hfe_op_wait(hfe_op *op, double timeout_s)
    int64_t hfe_op_result(const hfe_op *op, int *err_no)
    long hfe_op_calls(const hfe_op *op)
    void hfe_host_wait(void *arg)
    ctypedef struct hfe_ring:
        pass
    ctypedef struct hfe_runtime:
        int (*wait_value32)(void *, void *, uint32_t, unsigned, uint32_t) noexcept nogil
        int (*write_value32)(void *, void *, uint32_t, unsigned) noexcept nogil
        int (*memcpy_async)(void *, const void *, size_t, int, void *) noexcept nogil
        int (*event_record)(void *, void *) noexcept nogil
        int (*stream_wait_event)(void *, void *, unsigned) noexcept nogil
        int (*memcpy_batch_async)(void **, void **, size_t *, size_t, void *, size_t *,
                                  size_t, size_t *, void *) noexcept nogil
    ctypedef struct hfe_piece:
        int64_t file_offset
        uint64_t device
        uint64_t len
        int group
    hfe_ring *hfe_ring_new(void *staging, size_t slot_size, int nslots, uint32_t *flags_host,
                           uint64_t flags_dev)
    void hfe_ring_free(hfe_ring *ring)
    void hfe_ring_set_copy_streams(hfe_ring *ring, int n, void **streams, void *fork_event,
                                   void **join_events)
    int hfe_stage_submit(hfe_ring *ring, const hfe_runtime *rt, int opcode, int fd,
                         const hfe_piece *pieces, int npieces, hfe_op **groups, int ngroups,
                         const uint64_t *complete_dev, const uint32_t *complete_value,
                         void *stream, const uint32_t *gate, uint32_t gate_value,
                         size_t chunk_cap)
    int hfe_flag_wait(const uint32_t *flag, uint32_t value, double timeout_s)
    int hfe_flag_reached(const uint32_t *flag, uint32_t value)
    void hfe_inject(int err_no, int count, size_t short_max, int after)
    int hfe_runtime_exports(const char *library, const char *symbol)

DEF HIP_STREAM_WAIT_VALUE_GTE = 0
DEF HIP_HOST_MALLOC_MAPPED = 2
DEF HIP_ATTR_CAN_USE_STREAM_WAIT_VALUE = 10013
DEF FLAGS_PER_HOST_PAGE = 1024

ctypedef int (*hip_int_fn_t)(int) noexcept nogil
ctypedef int (*hip_wait32_t)(void *, void *, uint32_t, unsigned, uint32_t) noexcept nogil
ctypedef int (*hip_write32_t)(void *, void *, uint32_t, unsigned) noexcept nogil

cdef hip_int_fn_t _c_set_device = NULL
cdef hip_wait32_t _c_wait_value32 = NULL
cdef hip_write32_t _c_write_value32 = NULL
cdef hip_handle_fn_t _c_event_destroy = NULL
ctypedef int (*hip_record_fn_t)(void *, void *) noexcept nogil
cdef hip_record_fn_t _c_event_record = NULL
ctypedef int (*hip_memcpy_async_t)(void *, const void *, size_t, int, void *) noexcept nogil
cdef hip_memcpy_async_t _c_memcpy_async = NULL
ctypedef int (*hip_wait_event_t)(void *, void *, unsigned) noexcept nogil
cdef hip_wait_event_t _c_stream_wait_event = NULL
ctypedef int (*hip_memcpy_batch_t)(void **, void **, size_t *, size_t, void *, size_t *,
                                   size_t, size_t *, void *) noexcept nogil
cdef hip_memcpy_batch_t _c_memcpy_batch = NULL
ctypedef int (*hip_count_fn_t)(int *) noexcept nogil
cdef hfe_runtime _eng_rt
cdef bint _eng_capi_tried = 0

#: Mechanisms by which completion reaches GPU streams.
MECHANISM_STREAM_MEMOPS = "stream-memory-operations"
MECHANISM_HOST_FUNCTIONS = "host-waits"


def _engine_batch_copies(enable=None):
    """Whether the staged path hands a chunk's copies to the stream in one
    hipMemcpyBatchAsync (the runtime has it and it is not switched off).
    ``enable``: switch it on (where the runtime has it) or off; None: only
    report. Test hook."""
    _load_engine_capi()
    if enable is not None:
        _eng_rt.memcpy_batch_async = _c_memcpy_batch if enable else NULL
    return _eng_rt.memcpy_batch_async != NULL


def _engine_inject_faults(int err_no=0, int count=0, size_t short_max=0, int after=0):
    """Test hook: after ``after`` more file calls of the staged path, the
    next ``count`` fail with ``err_no``; every call moves at most
    ``short_max`` bytes (0: no limit). ``_engine_inject_faults()`` clears
    them."""
    hfe_inject(err_no, count, short_max, after)


cdef int _load_engine_capi() except -1:
    global _eng_capi_tried, _c_set_device, _c_wait_value32, _c_write_value32
    global _c_event_destroy, _c_event_record, _c_memcpy_async, _c_stream_wait_event
    global _c_memcpy_batch
    cdef hip_count_fn_t count_fn
    cdef int ndev = 0
    if _eng_capi_tried:
        return 0
    _load_hip_capi()
    import sys
    for mod in list(sys.modules.values()):
        capi = getattr(mod, "__pyx_capi__", None)
        if not isinstance(capi, dict) or "hipSetDevice" not in capi:
            continue
        _c_set_device = <hip_int_fn_t>_capsule_fn(capi, "hipSetDevice", b"enum hipError_t (int)")
        _c_wait_value32 = <hip_wait32_t>_capsule_fn(
            capi, "hipStreamWaitValue32",
            b"enum hipError_t (hipStream_t, void *, uint32_t, unsigned int, uint32_t)")
        _c_write_value32 = <hip_write32_t>_capsule_fn(
            capi, "hipStreamWriteValue32",
            b"enum hipError_t (hipStream_t, void *, uint32_t, unsigned int)")
        _c_event_destroy = <hip_handle_fn_t>_capsule_fn(
            capi, "hipEventDestroy", b"enum hipError_t (hipEvent_t)")
        _c_event_record = <hip_record_fn_t>_capsule_fn(
            capi, "hipEventRecord", b"enum hipError_t (hipEvent_t, hipStream_t)")
        _c_stream_wait_event = <hip_wait_event_t>_capsule_fn(
            capi, "hipStreamWaitEvent", b"enum hipError_t (hipStream_t, hipEvent_t, unsigned int)")
        for sig in (b"enum hipError_t (void *, void const *, size_t, enum hipMemcpyKind, "
                    b"hipStream_t)",
                    b"enum hipError_t (void *, const void *, size_t, enum hipMemcpyKind, "
                    b"hipStream_t)"):
            _c_memcpy_async = <hip_memcpy_async_t>_capsule_fn(capi, "hipMemcpyAsync", sig)
            if _c_memcpy_async != NULL:
                break
        # HIP-Python declares every entry point; the runtime it loads may
        # predate hipMemcpyBatchAsync (ROCm 7), so ask the library itself,
        # once a first call has made HIP-Python load it.
        count_fn = <hip_count_fn_t>_capsule_fn(capi, "hipGetDeviceCount",
                                               b"enum hipError_t (int *)")
        if count_fn != NULL:
            count_fn(&ndev)
        if hfe_runtime_exports(b"libamdhip64", b"hipMemcpyBatchAsync"):
            _c_memcpy_batch = <hip_memcpy_batch_t>_capsule_fn(
                capi, "hipMemcpyBatchAsync",
                b"enum hipError_t (void **, void **, size_t *, size_t, "
                b"struct hipMemcpyAttributes *, size_t *, size_t, size_t *, hipStream_t)")
        break
    _eng_rt.wait_value32 = _c_wait_value32
    _eng_rt.write_value32 = _c_write_value32
    _eng_rt.memcpy_async = _c_memcpy_async
    _eng_rt.event_record = <int (*)(void *, void *) noexcept nogil>_c_event_record
    _eng_rt.stream_wait_event = _c_stream_wait_event
    if os.environ.get("HIPFILE_ENGINE_BATCH_COPIES", "").strip() != "0":
        _eng_rt.memcpy_batch_async = _c_memcpy_batch
    _eng_capi_tried = 1
    if _c_event_query != NULL and _c_event_destroy != NULL:
        hfe_set_event_fns(<hfe_event_fn>_c_event_query, <hfe_event_fn>_c_event_destroy)
    return 0


cdef int _wait_value32(uintptr_t stream, uintptr_t ptr, uint32_t value) except -1:
    cdef int err
    if _c_wait_value32 != NULL:
        with nogil:
            err = _c_wait_value32(<void *>stream, <void *>ptr, value,
                                  HIP_STREAM_WAIT_VALUE_GTE, 0xFFFFFFFF)
    else:
        err = int(_hipapi().hip.hipStreamWaitValue32(
            stream, ptr, value, HIP_STREAM_WAIT_VALUE_GTE, 0xFFFFFFFF)[0])
    if err != HIP_SUCCESS:
        _hip_fail(err, "hipStreamWaitValue32")
    return 0


cdef int _write_value32(uintptr_t stream, uintptr_t ptr, uint32_t value):
    """Enqueue the gate write; returns the hipError_t."""
    if _c_write_value32 != NULL:
        with nogil:
            return _c_write_value32(<void *>stream, <void *>ptr, value, 0)
    try:
        return int(_hipapi().hip.hipStreamWriteValue32(stream, ptr, value, 0)[0])
    except BaseException:
        return -1


# --------------------------------------------------------------------------
# Flags
# --------------------------------------------------------------------------

cdef class _Flag:
    """One 32-bit completion or gate counter."""
    cdef uint32_t *ptr        # host view
    cdef uintptr_t devptr     # what a stream waits on or writes
    cdef uint32_t value       # the last value handed out
    cdef _FlagPool pool

    cdef uint32_t next_value(self):
        self.value += 1
        if self.value == 0:
            self.value = 1
        return self.value


cdef class _FlagPool:
    """The flags of one device, and how streams of that device are released."""
    cdef readonly int device
    cdef readonly bint memops         # stream memory operations usable
    cdef list free
    cdef list mems                    # HIP-Python pointers of the pages to free
    cdef object stream                # internal stream for record_event
    cdef int nflags

    cdef _Flag take(self):
        # _grow calls HIP, which may let another thread take the new flags
        while not self.free:
            self._grow()
        return <_Flag>self.free.pop()

    cdef int _grow(self) except -1:
        # Mapped pinned host memory: the engine's threads store completions
        # into it and the gate thread reads it, while streams wait on it or
        # write it through its device address. (Signal memory from
        # hipExtMallocWithFlags is not host-writable on every platform; AMD's
        # runtime accepts any memory it knows unless GPU_STREAMOPS_CP_WAIT=1,
        # under which the engine uses host functions instead.)
        h = _hipapi()
        cdef _Flag f
        cdef int i
        cdef uintptr_t base, devbase
        with _on_device(self.device):
            mem = h.check(h.hip.hipHostMalloc(FLAGS_PER_HOST_PAGE * 4, HIP_HOST_MALLOC_MAPPED),
                          "hipHostMalloc")
            self.mems.append(mem)
            base = <uintptr_t>int(mem)
            try:
                devbase = <uintptr_t>int(h.check(
                    h.hip.hipHostGetDevicePointer(mem, 0), "hipHostGetDevicePointer"))
            except Exception:
                devbase = base
        memset(<void *>base, 0, FLAGS_PER_HOST_PAGE * 4)
        for i in range(FLAGS_PER_HOST_PAGE):
            f = _Flag.__new__(_Flag)
            f.ptr = <uint32_t *>(base + 4 * i)
            f.devptr = devbase + 4 * i
            f.pool = self
            self.free.append(f)
            self.nflags += 1
        return 0

    cdef int release(self) except -1:
        """Free every flag (no operation may be outstanding)."""
        h = _hipapi()
        with _on_device(self.device):
            h.check(h.hip.hipDeviceSynchronize(), "hipDeviceSynchronize")
            if self.stream is not None:
                h.check(h.hip.hipStreamDestroy(self.stream), "hipStreamDestroy")
                self.stream = None
            for mem in self.mems:
                h.check(h.hip.hipHostFree(mem), "hipHostFree")
        self.mems = []
        self.free = []
        self.nflags = 0
        return 0


cdef dict _flag_pools = {}      # device -> _FlagPool


cdef _FlagPool _pool_for(int device):
    o = _flag_pools.get(device)
    if o is not None:
        return <_FlagPool>o
    cdef bint memops = _memops_supported(device)   # HIP calls: other threads may run
    cdef _FlagPool p = _FlagPool.__new__(_FlagPool)
    p.device = device
    p.free = []
    p.mems = []
    p.memops = memops
    return <_FlagPool>_flag_pools.setdefault(device, p)


cdef bint _memops_supported(int device) except -1:
    forced = os.environ.get("HIPFILE_ENGINE_RELEASE", "").strip().lower()
    if forced in ("host", "host-waits", "host-functions"):
        return 0
    if os.environ.get("GPU_STREAMOPS_CP_WAIT", "").strip().lower() in ("1", "true", "yes"):
        return 0      # AMD's runtime then waits on signal memory only
    _load_engine_capi()
    if _c_wait_value32 == NULL or _c_write_value32 == NULL:
        if not hasattr(_hipapi().hip, "hipStreamWaitValue32"):
            return 0
    h = _hipapi()
    try:
        dev = device if device >= 0 else h.check(h.hip.hipGetDevice(), "hipGetDevice")
        err, value = h.hip.hipDeviceGetAttribute(
            h.hip.hipDeviceAttribute_t.hipDeviceAttributeCanUseStreamWaitValue, dev)
    except Exception:
        return 0
    return err == h.hip.hipError_t.hipSuccess and bool(value)


# --------------------------------------------------------------------------
# Staging rings (the staged data path)
# --------------------------------------------------------------------------

DEF MIN_SLOTS = 4

cdef class _Ring:
    """A device's staging ring: pinned host slots the engine's threads read
    and write with POSIX calls, and their filled/drained flags in mapped
    pinned memory that streams wait on and write (see engine.h)."""
    cdef hfe_ring *ring
    cdef readonly int device
    cdef readonly size_t slot_size
    cdef readonly int nslots
    cdef object staging_mem
    cdef object flags_mem
    cdef list copy_streams        # HIP-Python streams, events: the ring's
    cdef list copy_events

    cdef int release(self) except -1:
        h = _hipapi()
        if self.ring != NULL:
            hfe_ring_free(self.ring)
            self.ring = NULL
        with _on_device(self.device):
            for ev in self.copy_events or ():
                h.hip.hipEventDestroy(ev)
            for st in self.copy_streams or ():
                h.hip.hipStreamDestroy(st)
            self.copy_events = []
            self.copy_streams = []
            if self.staging_mem is not None:
                h.check(h.hip.hipHostFree(self.staging_mem), "hipHostFree")
                self.staging_mem = None
            if self.flags_mem is not None:
                h.check(h.hip.hipHostFree(self.flags_mem), "hipHostFree")
                self.flags_mem = None
        return 0


cdef dict _rings = {}      # device -> _Ring


cdef _Ring _ring_for(int device):
    o = _rings.get(device)
    if o is not None:
        return <_Ring>o
    d = _settings_module()
    cdef size_t total = <size_t>d.engine_staging_size()
    cdef size_t slot = 8 << 20
    while slot > (64 << 10) and total // slot < MIN_SLOTS:
        slot //= 2
    cdef int nslots = <int>max(2, total // slot)
    cdef uintptr_t fbase, fdev
    cdef _Ring r
    h = _hipapi()
    r = _Ring.__new__(_Ring)
    r.device = device
    r.slot_size = slot
    r.nslots = nslots
    with _on_device(device):
        r.staging_mem = h.check(h.hip.hipHostMalloc(slot * nslots, 0), "hipHostMalloc")
        try:
            r.flags_mem = h.check(h.hip.hipHostMalloc(8 * nslots, HIP_HOST_MALLOC_MAPPED),
                                  "hipHostMalloc")
            fbase = <uintptr_t>int(r.flags_mem)
            try:
                fdev = <uintptr_t>int(h.check(h.hip.hipHostGetDevicePointer(r.flags_mem, 0),
                                              "hipHostGetDevicePointer"))
            except Exception:
                fdev = fbase
        except BaseException:
            r.release()
            raise
    memset(<void *>fbase, 0, 8 * nslots)
    r.ring = hfe_ring_new(<void *><uintptr_t>int(r.staging_mem), slot, nslots,
                          <uint32_t *>fbase, fdev)
    if r.ring == NULL:
        r.release()
        raise MemoryError()
    cdef int ncopy = <int>d.engine_copy_streams()
    cdef void *cs[8]
    cdef void *je[8]
    cdef int k
    if ncopy > 1 and _c_stream_wait_event != NULL and _c_event_record != NULL:
        r.copy_streams = []
        r.copy_events = []
        try:
            with _on_device(device):
                for k in range(ncopy):
                    r.copy_streams.append(h.check(h.hip.hipStreamCreateWithFlags(
                        h.hip.hipStreamNonBlocking), "hipStreamCreateWithFlags"))
                for k in range(ncopy + 1):
                    r.copy_events.append(h.check(h.hip.hipEventCreateWithFlags(
                        h.hip.hipEventDisableTiming), "hipEventCreateWithFlags"))
        except BaseException:
            r.release()
            raise
        for k in range(ncopy):
            cs[k] = <void *><uintptr_t>int(r.copy_streams[k])
            je[k] = <void *><uintptr_t>int(r.copy_events[k + 1])
        hfe_ring_set_copy_streams(r.ring, ncopy, cs,
                                  <void *><uintptr_t>int(r.copy_events[0]), je)
    # the HIP calls above let other threads in: one of them may have made
    # the device's ring first, and then this one is given back
    kept = <_Ring>_rings.setdefault(device, r)
    if kept is not r:
        r.release()
    return kept


cdef bint _staged_path(int fd, _FlagPool pool, bint is_device) except -1:
    """Whether a submission takes the staged path: a POSIX descriptor, stream
    waits on the buffer's device, the runtime's copy entry point, and device
    memory (anything else goes to hipFile, which gives its own verdict)."""
    if fd < 0 or not pool.memops or not is_device:
        return 0
    if os.environ.get("HIPFILE_ENGINE_DATA_PATH", "").strip().lower() == "hipfile":
        return 0
    _load_engine_capi()
    return (_c_memcpy_async != NULL and _c_wait_value32 != NULL
            and _c_write_value32 != NULL)


cdef object _internal_stream(_FlagPool pool):
    """The device's own non-blocking stream (copies of unordered submissions,
    record_event)."""
    h = _hipapi()
    if pool.stream is None:
        with _on_device(pool.device):
            pool.stream = h.check(h.hip.hipStreamCreateWithFlags(h.hip.hipStreamNonBlocking),
                                  "hipStreamCreateWithFlags")
    return pool.stream


cdef int _stream_after(uintptr_t target, uintptr_t stream, int device) except -1:
    """Make ``target`` wait for the work enqueued on ``stream`` so far."""
    h = _hipapi()
    with _on_device(device):
        ev = h.check(h.hip.hipEventCreateWithFlags(h.hip.hipEventDisableTiming),
                     "hipEventCreateWithFlags")
        try:
            h.check(h.hip.hipEventRecord(ev, stream), "hipEventRecord")
            h.check(h.hip.hipStreamWaitEvent(target, ev, 0), "hipStreamWaitEvent")
        finally:
            h.hip.hipEventDestroy(ev)
    return 0


# --------------------------------------------------------------------------
# Engine threads and settings
# --------------------------------------------------------------------------

cdef int _eng_threads_wanted = 0      # as read at the last submission
cdef size_t _eng_task_default = 0
cdef bint _eng_atexit = 0
cdef object _eng_defaults_mod = None


def engine_configure(threads=None, task_size=None):
    """Set the engine's worker thread count and default task (chunk) size
    in bytes; None keeps the current value. The same as
    ``hipfile.defaults.set(engine_threads=..., engine_task_size=...)``: a
    new thread count takes effect at the next submission once the engine is
    idle.

    Raises
    ------
    TypeError, ValueError
        A value that is not a positive integer (nothing is changed).
    """
    values = {}
    if threads is not None:
        values["engine_threads"] = threads
    if task_size is not None:
        values["engine_task_size"] = task_size
    if values:
        _settings_module().set(values)


def engine_settings():
    """The engine's thread count and default task size in bytes, from
    ``hipfile.defaults``."""
    _eng_defaults()
    return {"threads": _eng_threads_wanted, "task_size": _eng_task_default}


cdef object _settings_module():
    global _eng_defaults_mod
    if _eng_defaults_mod is None:
        from hipfile import defaults
        _eng_defaults_mod = defaults
    return _eng_defaults_mod


cdef int _eng_defaults() except -1:
    """Read ``engine_threads`` and ``engine_task_size`` from
    ``hipfile.defaults`` (set(), else the environment, else the default),
    the one source of the engine's settings; called at every submission."""
    global _eng_threads_wanted, _eng_task_default
    d = _settings_module()
    _eng_threads_wanted = <int>d.engine_threads()
    _eng_task_default = <size_t>d.engine_task_size()
    return 0


cdef int _eng_start() except -1:
    global _eng_atexit
    _eng_defaults()
    _load_engine_capi()
    cdef int rc = hfe_start(_eng_threads_wanted, <hfe_set_device_fn>_c_set_device)
    if rc:
        raise OSError(rc, f"the stream engine could not start its threads: {os.strerror(rc)}")
    if not _eng_atexit:
        import atexit
        atexit.register(_eng_atexit_stop)
        _eng_atexit = 1
    return 0


def _eng_atexit_stop():
    with nogil:
        hfe_stop(5.0)


def engine_shutdown(timeout=None):
    """Stop the engine's threads once its outstanding operations finish.

    Raises
    ------
    TimeoutError
        Operations were still outstanding after ``timeout`` seconds.
    TypeError, ValueError
        ``timeout`` is not a number >= 0 or None.
    """
    cdef double t = _as_timeout(timeout)
    cdef int rc
    _eng_sweep()
    with nogil:
        rc = hfe_stop(t)
    if rc:
        raise TimeoutError(f"{hfe_outstanding()} stream-engine operation(s) still outstanding")


def engine_info():
    """The engine's state: threads running, outstanding operations, parked
    handles, and per device the release mechanism and flags allocated."""
    _eng_sweep()
    _eng_defaults()
    return {
        "threads": hfe_threads(),
        "threads_configured": _eng_threads_wanted,
        "task_size": _eng_task_default,
        "outstanding": hfe_outstanding(),
        "parked": len(_eng_parked),
        "devices": {d: {"mechanism": MECHANISM_STREAM_MEMOPS if (<_FlagPool>p).memops
                        else MECHANISM_HOST_FUNCTIONS,
                        "flags": (<_FlagPool>p).nflags,
                        "staging_bytes": ((<_Ring>_rings[d]).slot_size * (<_Ring>_rings[d]).nslots
                                          if d in _rings else 0)}
                    for d, p in _flag_pools.items()},
    }


def engine_mechanism(int device=-1):
    """How completion reaches GPU streams on ``device`` (-1: the current
    device): ``"stream-memory-operations"`` (hipStreamWaitValue32 on a flag)
    or ``"host-waits"`` (the device cannot wait on a flag: ``wait_on`` and
    stream-ordered submissions wait on the host)."""
    if device < 0:
        device = _current_device()
    return MECHANISM_STREAM_MEMOPS if _pool_for(device).memops else MECHANISM_HOST_FUNCTIONS


# --------------------------------------------------------------------------
# Parked handles and trimming
# --------------------------------------------------------------------------

cdef class _ParkedOp:
    cdef hfe_op *op
    cdef _Flag flag
    cdef uint32_t value
    cdef bint stream_completes
    cdef object file
    cdef object bcore
    cdef object keep

    def __dealloc__(self):
        if self.op != NULL:
            hfe_op_decref(self.op)
            self.op = NULL


cdef list _eng_parked = []


cdef void _unhold(object file, object bcore):
    if file is not None:
        (<_FileCore>file)._held -= 1
    if bcore is not None:
        (<_BufferCore>bcore)._held -= 1


cdef int _eng_sweep() except -1:
    cdef _ParkedOp rec
    cdef list keep
    if not _eng_parked:
        return 0
    keep = []
    for o in _eng_parked:
        rec = <_ParkedOp>o
        if hfe_op_done(rec.op) and (not rec.stream_completes or rec.flag is None
                                    or hfe_flag_reached(rec.flag.ptr, rec.value)):
            _unhold(rec.file, rec.bcore)
            rec.file = None
            rec.bcore = None
            if rec.flag is not None:
                rec.flag.pool.free.append(rec.flag)
                rec.flag = None
        else:
            keep.append(rec)
    _eng_parked[:] = keep
    return 0


cdef int _eng_trim() except -1:
    """Free the flags and internal streams once nothing is outstanding."""
    _eng_sweep()
    if _eng_parked or hfe_outstanding():
        return 0
    for p in _flag_pools.values():
        if len((<_FlagPool>p).free) != (<_FlagPool>p).nflags:
            return 0      # a live handle (or its gate) still holds a flag
    for p in list(_flag_pools.values()):
        (<_FlagPool>p).release()     # synchronizes the device first
    _flag_pools.clear()
    for r in list(_rings.values()):
        (<_Ring>r).release()
    _rings.clear()
    return 0


# --------------------------------------------------------------------------
# Submit
# --------------------------------------------------------------------------

def engine_submit(_FileCore f, int opcode, buffer, ranges, stream=0, task_size=None,
                  int fd=-1, bint ordered=True, bint grouped=False):
    """Submit stream-ordered ranges ``(size, file_offset, buffer_offset)`` of
    ``buffer`` to the engine; returns one :class:`StreamIOHandle` per range
    (``grouped``: one for all of them).

    The ranges start together once ``stream`` passes the submit point. With
    ``fd`` (a POSIX descriptor of the file) and stream waits on the buffer's
    device, the bytes move through the device's staging ring and the copies
    to or from device memory are enqueued on ``stream`` (``ordered``) or on
    the device's own stream; otherwise worker threads call
    ``hipFileRead``/``hipFileWrite``.

    Raises
    ------
    TypeError, ValueError
        A bad buffer, stream, range or task size (nothing is submitted).
    ClosedFileError, HandleNotRegisteredError
        The file is closed, or its registration was dropped.
    HipRuntimeError
        The runtime refused a stream operation of the submission.
    """
    cdef uintptr_t base, sh
    cdef size_t length, nbytes, task
    cdef hoff_t foff, boff
    cdef _BufferCore bc = None
    cdef object buf_owner, stream_owner = None
    cdef int device, i, n, ng
    cdef long long t
    cdef _FlagPool pool
    cdef StreamIOHandle hd
    cdef bint is_device = 0
    cdef PyObject *state = NULL

    buf_owner = submit_preamble(f, buffer, stream, &base, &length, &sh, &state)
    if isinstance(buffer, _BufferCore):
        bc = <_BufferCore>buffer
    if stream is not None and type(stream) is not int:
        stream_owner = stream
    _eng_defaults()
    if task_size is None:
        task = _eng_task_default
    else:
        t = _as_index(task_size, "task_size")
        if t <= 0:
            raise ValueError(f"task_size must be positive, got {t}")
        task = <size_t>t
    checked = []
    for r in ranges:
        if not isinstance(r, tuple) or len(r) != 3:
            raise TypeError(f"each range must be a tuple (size, file_offset, buffer_offset), "
                            f"got {r!r}")
        _io_range(length, r[0], r[1], r[2], &nbytes, &foff, &boff)
        checked.append((nbytes, foff, boff))
    n = len(checked)
    if n == 0:
        return []

    _eng_sweep()
    _eng_start()
    device = _pointer_device(base, &is_device)   # one query: the device and the kind
    if bc is not None:
        if bc._device < 0:
            bc._device = device
        device = bc._device
    pool = _pool_for(device)
    if _staged_path(fd, pool, is_device):
        handles = _submit_staged(f, opcode, fd, base, checked, sh, device, pool, task,
                                 ordered, grouped)
    else:
        handles = _submit_workers(f, opcode, base, checked, sh, device, pool, task, grouped)
        if ordered and handles:
            _order_after(handles, sh)
    # submitted: the handles now hold the file, buffer and stream
    ng = len(handles)
    f._held += ng
    if bc is not None:
        bc._held += ng
    for o in handles:
        hd = <StreamIOHandle>o
        hd._submitted = 1
        hd._file = f
        hd._bcore = bc
        hd._buffer = buf_owner
        hd._stream_owner = stream_owner
        hd._mechanism = MECHANISM_STREAM_MEMOPS if pool.memops else MECHANISM_HOST_FUNCTIONS
    return handles


cdef int _order_after(list handles, uintptr_t sh) except -1:
    """Order later work on ``sh`` after every handle (the default order of
    the worker path): stream waits on their flags, or, without stream waits,
    a wait on the host."""
    for o in handles:
        (<StreamIOHandle>o)._release_to(sh)
    return 0


cdef StreamIOHandle _new_handle(int opcode, size_t nbytes, hoff_t foff, hoff_t boff, int device,
                                uintptr_t sh, _FlagPool pool, int count):
    cdef StreamIOHandle hd = StreamIOHandle.__new__(StreamIOHandle)
    hd._flag = pool.take()
    hd._value = hd._flag.next_value()
    hd._opcode = opcode
    hd._size = nbytes
    hd._file_offset = foff
    hd._buffer_offset = boff
    hd._device = device
    hd._stream = sh
    hd._count = count
    return hd


cdef list _submit_staged(_FileCore f, int opcode, int fd, uintptr_t base, list checked,
                         uintptr_t sh, int device, _FlagPool pool, size_t task, bint ordered,
                         bint grouped):
    cdef _Ring ring = _ring_for(device)
    cdef int n = len(checked), ng = 1 if grouped else n, i, rc = 0, qerr
    cdef size_t nbytes, total = 0
    cdef hoff_t foff, boff
    cdef long long end = -1
    cdef hfe_piece *pieces = NULL
    cdef hfe_op **groups = NULL
    cdef uint64_t *cdev = NULL
    cdef uint32_t *cval = NULL
    cdef const uint32_t *gate = NULL
    cdef uint32_t gvalue = 0
    cdef _Flag gflag = None
    cdef _GateRef gate_ref = None
    cdef _FlagPool spool
    cdef uintptr_t target = sh
    cdef StreamIOHandle hd
    cdef int sdev
    if opcode == 0:
        # Reads stop at the end of the file: as it is now, or as the staged
        # writes submitted on this file before will leave it (a write then a
        # read of the same bytes, in stream order).
        end = max(os.fstat(fd).st_size, getattr(f, "_staged_write_end", 0))
    else:
        for nbytes, foff, boff in checked:
            if nbytes and foff + <long long>nbytes > getattr(f, "_staged_write_end", 0):
                try:
                    f._staged_write_end = foff + <long long>nbytes
                except AttributeError:
                    pass
    pieces = <hfe_piece *>malloc(n * sizeof(hfe_piece))
    groups = <hfe_op **>calloc(ng, sizeof(hfe_op *))
    cdev = <uint64_t *>calloc(ng, sizeof(uint64_t))
    cval = <uint32_t *>calloc(ng, sizeof(uint32_t))
    handles = []
    try:
        if pieces == NULL or groups == NULL or cdev == NULL or cval == NULL:
            raise MemoryError()
        for i in range(n):
            nbytes, foff, boff = checked[i]
            if end >= 0:
                nbytes = 0 if foff >= end else <size_t>min(<long long>nbytes, end - foff)
            pieces[i].file_offset = foff
            pieces[i].device = base + boff
            pieces[i].len = nbytes
            pieces[i].group = 0 if grouped else i
            total += nbytes
            if grouped and i > 0:
                continue
            hd = _new_handle(opcode, nbytes, foff, boff, device, sh, pool, n if grouped else 1)
            handles.append(hd)
        if grouped:
            (<StreamIOHandle>handles[0])._size = total
        for i in range(ng):
            hd = <StreamIOHandle>handles[i]
            hd._op = hfe_op_new(opcode, NULL, NULL, NULL, hd._size, hd._file_offset,
                                hd._buffer_offset, device, task, hd._flag.ptr, hd._value)
            if hd._op == NULL:
                raise MemoryError()
            groups[i] = hd._op
            hd._stream_completes = opcode == 0
            if opcode == 0:
                cdev[i] = hd._flag.devptr
                cval[i] = hd._value

        # the gate: a read's file I/O starts once the caller's stream has
        # passed this point (always a flag the stream writes: a query that
        # finds the stream idle can race with another thread's enqueue)
        if opcode == 0:
            sdev = _stream_device(sh)
            spool = _pool_for(sdev)
            if not spool.memops:
                raise ValueError("the stream's device cannot use stream waits: "
                                 "the buffer and the stream must be on one device")
            gflag = spool.take()
            gvalue = gflag.next_value()
            qerr = _write_value32(sh, gflag.devptr, gvalue)
            if qerr != HIP_SUCCESS:
                spool.free.append(gflag)
                gflag = None
                _hip_fail(qerr, "hipStreamWriteValue32")
            gate = gflag.ptr
        if not ordered:
            target = <uintptr_t>int(_internal_stream(pool))
            _stream_after(target, sh, device)
        with nogil:
            rc = hfe_stage_submit(ring.ring, &_eng_rt, opcode, fd, pieces, n, groups, ng,
                                  cdev, cval, <void *>target, gate, gvalue, task)
        if rc < 0:
            raise OSError(-rc, f"the stream engine refused the submission: {os.strerror(-rc)}")
    except BaseException:
        for o in handles:
            (<StreamIOHandle>o)._abandon()
        if gflag is not None and rc == 0:
            gflag.pool.free.append(gflag)
        raise
    finally:
        free(pieces)
        free(groups)
        free(cdev)
        free(cval)
    if gflag is not None:
        gate_ref = _GateRef.__new__(_GateRef)
        gate_ref.flag = gflag
    for o in handles:
        (<StreamIOHandle>o)._gate = gate_ref
        (<StreamIOHandle>o)._staged = 1
    if rc > 0:
        # the runtime refused a stream operation part way: what was enqueued
        # runs; the handles report the failure and are parked until done
        _submitted_anyway(f, handles)
        _hip_fail(rc, "the stream-engine submission")
    if opcode == 1 and ordered:
        # later work on the stream sees the file written, as after write_async
        # (a read of the same bytes submitted next starts after it)
        for o in handles:
            hd = <StreamIOHandle>o
            _wait_value32(sh, hd._flag.devptr, hd._value)
    return handles


cdef int _submitted_anyway(_FileCore f, list handles) except -1:
    cdef StreamIOHandle hd
    for o in handles:
        hd = <StreamIOHandle>o
        hd._submitted = 1
        hd._file = f
        f._held += 1
    return 0


cdef list _submit_workers(_FileCore f, int opcode, uintptr_t base, list checked, uintptr_t sh,
                          int device, _FlagPool pool, size_t task, bint grouped):
    """The worker path: each range's chunks run as hipFileRead/hipFileWrite
    calls on the engine's threads (no staging ring: no POSIX descriptor, no
    stream waits, or ``HIPFILE_ENGINE_DATA_PATH=hipfile``)."""
    cdef size_t nbytes
    cdef hoff_t foff, boff
    cdef int sdev, i, n = len(checked), rc
    cdef hfe_io_fn fn = <hfe_io_fn>_get_io(opcode)
    cdef hfe_op **ops = NULL
    cdef uintptr_t gate_event = 0
    cdef _Flag gflag = None
    cdef _GateRef gate_ref = None
    cdef uint32_t gvalue = 0
    cdef _FlagPool spool
    cdef StreamIOHandle hd
    cdef int qerr
    if grouped:
        raise ValueError("a grouped submission needs the staged path: a file opened with a "
                         "POSIX descriptor, on a device that can use stream waits")
    ops = <hfe_op **>malloc(n * sizeof(hfe_op *))
    if ops == NULL:
        raise MemoryError()
    handles = []
    try:
        for i in range(n):
            nbytes, foff, boff = checked[i]
            hd = _new_handle(opcode, nbytes, foff, boff, device, sh, pool, 1)
            hd._op = hfe_op_new(opcode, fn, <void *>f._fh, <void *>base, nbytes, foff, boff,
                                device, task, hd._flag.ptr, hd._value)
            if hd._op == NULL:
                pool.free.append(hd._flag)
                hd._flag = None
                raise MemoryError()
            handles.append(hd)
            ops[i] = hd._op

        # the gate: start at once when the caller's stream is idle
        qerr = _stream_query(sh)
        if qerr == HIP_SUCCESS:
            rc = hfe_submit(ops, n, NULL, 0, NULL)
        elif qerr != HIP_ERROR_NOT_READY:
            _hip_fail(qerr, "hipStreamQuery")
        else:
            sdev = _stream_device(sh)
            spool = _pool_for(sdev)
            rc = -1
            if spool.memops:
                gflag = spool.take()
                gvalue = gflag.next_value()
                if _write_value32(sh, gflag.devptr, gvalue) == HIP_SUCCESS:
                    rc = hfe_submit(ops, n, gflag.ptr, gvalue, NULL)
                else:
                    spool.free.append(gflag)
                    gflag = None
            if rc == -1:
                # an event the gate thread polls (no host function)
                gate_event = _gate_event(sh, sdev)
                if gate_event:
                    rc = hfe_submit(ops, n, NULL, 0, <void *>gate_event)
                    if rc:
                        _destroy_event_handle(gate_event)
                else:
                    # no event: wait here (interruptibly) for the stream
                    qerr = wait_interruptible(WAIT_STREAM, sh, -1.0)
                    if qerr != HIP_SUCCESS:
                        _hip_fail(qerr, "hipStreamQuery")
                    rc = hfe_submit(ops, n, NULL, 0, NULL)
        if rc:
            if gflag is not None:
                spool.free.append(gflag)
            raise OSError(rc, f"the stream engine refused the submission: {os.strerror(rc)}")
    except BaseException:
        for o in handles:
            (<StreamIOHandle>o)._abandon()
        raise
    finally:
        free(ops)
    if gflag is not None:
        gate_ref = _GateRef.__new__(_GateRef)
        gate_ref.flag = gflag
    for o in handles:
        (<StreamIOHandle>o)._gate = gate_ref
    return handles


cdef uintptr_t _gate_event(uintptr_t stream, int device) except? 0:
    """An event recorded on ``stream`` now (0 if the runtime refused)."""
    h = _hipapi()
    cdef uintptr_t ev
    cdef int err
    try:
        with _on_device(device):
            ev = <uintptr_t>int(h.check(h.hip.hipEventCreateWithFlags(
                h.hip.hipEventDisableTiming), "hipEventCreateWithFlags"))
    except Exception:
        return 0
    if _c_event_record != NULL:
        err = _c_event_record(<void *>ev, <void *>stream)
    else:
        err = int(h.hip.hipEventRecord(ev, stream)[0])
    if err != HIP_SUCCESS:
        _destroy_event_handle(ev)
        return 0
    return ev


cdef void _destroy_event_handle(uintptr_t ev):
    if _c_event_destroy != NULL:
        _c_event_destroy(<void *>ev)
    else:
        try:
            _hipapi().hip.hipEventDestroy(ev)
        except Exception:
            pass


include "_engine_handle.pxi"
