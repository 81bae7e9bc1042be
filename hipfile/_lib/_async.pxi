# Cores of FileHandle, Buffer and Stream, and AsyncIOHandle with its pool of
# pinned slots. Included into _hipfile.pyx so that the submit path is C calls.

from cpython.ref cimport PyObject
import time as _time

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

ctypedef struct Slots:
    size_t size
    hoff_t file_offset
    hoff_t buffer_offset
    ssize_t bytes_done

DEF SLOTS_PER_PAGE = 2048

cdef enum:
    SLOT_FREE = 0
    SLOT_USED = 1
    SLOT_PARKED = 2
    SLOT_DONE = 3      # written by a host function on the stream's thread

cdef enum:
    FIXED_BUF_OFFSET = 1
    FIXED_FILE_OFFSET = 2
    FIXED_FILE_SIZE = 4

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
    from hipfile.errors import HipRuntimeError
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


cdef class _Page:
    """One pinned allocation holding SLOTS_PER_PAGE slots."""
    cdef object mem          # HIP-Python Pointer from hipHostMalloc
    cdef unsigned char *state   # malloc'ed, never moves

    def __dealloc__(self):
        if self.state != NULL:
            free(self.state)
            self.state = NULL


cdef list _pages = []         # the _Page objects (own the memory)
cdef dict _parked = {}        # slot number -> _Parked

# C views of the pool for the hot path: per page its slots, states and use
# count; a stack of free slot numbers.
cdef Slots **_pslots = NULL
cdef unsigned char **_pstate = NULL
cdef int *_pused = NULL
cdef int _npages = 0
cdef int _pcap = 0
cdef int *_fstack = NULL
cdef int _nfree = 0


cdef class _Parked:
    cdef object file
    cdef object buffer
    cdef object stream_state
    cdef object event


cdef int _new_page() except -1:
    global _pslots, _pstate, _pused, _pcap, _npages, _fstack, _nfree
    cdef int cap, i, base
    cdef void *p
    cdef unsigned char *state
    # The HIP call may let other threads run (and grow the pool too), so it
    # comes first; everything after it runs without releasing the GIL.
    h = _hipapi()
    mem = h.check(h.hip.hipHostMalloc(SLOTS_PER_PAGE * sizeof(Slots), 0), "hipHostMalloc")
    state = <unsigned char *>malloc(SLOTS_PER_PAGE)
    if state == NULL:
        h.hip.hipHostFree(mem)
        raise MemoryError()
    memset(state, SLOT_FREE, SLOTS_PER_PAGE)
    cdef _Page page = _Page.__new__(_Page)
    page.mem = mem
    page.state = state
    cdef Slots *slots = <Slots *><uintptr_t>int(mem)
    # from here to the append: C only, so no other thread runs in between
    if _npages == _pcap:
        cap = 8 if _pcap == 0 else 2 * _pcap
        p = realloc(_pslots, cap * sizeof(Slots *))
        if p != NULL:
            _pslots = <Slots **>p
            p = realloc(_pstate, cap * sizeof(unsigned char *))
        if p != NULL:
            _pstate = <unsigned char **>p
            p = realloc(_pused, cap * sizeof(int))
        if p != NULL:
            _pused = <int *>p
            p = realloc(_fstack, cap * SLOTS_PER_PAGE * sizeof(int))
        if p == NULL:
            h.hip.hipHostFree(mem)
            raise MemoryError()  # page frees its state
        _fstack = <int *>p
        _pcap = cap
    _pslots[_npages] = slots
    _pstate[_npages] = state
    _pused[_npages] = 0
    base = _npages * SLOTS_PER_PAGE
    _npages += 1
    for i in range(SLOTS_PER_PAGE - 1, -1, -1):
        _fstack[_nfree] = base + i
        _nfree += 1
    _pages.append(page)
    return 0


cdef inline Slots *_slot_ptr(int n) noexcept:
    return &_pslots[n // SLOTS_PER_PAGE][n % SLOTS_PER_PAGE]


cdef inline unsigned char *_state_ptr(int n) noexcept:
    return &_pstate[n // SLOTS_PER_PAGE][n % SLOTS_PER_PAGE]


cdef int _sweep() except -1:
    """Return parked slots whose operation has passed to the free list."""
    cdef int n
    cdef _Parked rec
    if not _parked:
        return 0
    done = [n for n in _parked if hipfile_atomic_load_u8(_state_ptr(n)) == SLOT_DONE]
    for n in done:
        o = _parked.pop(n, None)
        if o is None:  # another thread's sweep took it
            continue
        rec = <_Parked>o
        _release_refs(rec.file, rec.buffer, rec.stream_state)
        _destroy_event(rec.event)
        _give_back(n)
    return 0


cdef inline void _give_back(int n) noexcept:
    global _nfree
    _state_ptr(n)[0] = SLOT_FREE
    _pused[n // SLOTS_PER_PAGE] -= 1
    _fstack[_nfree] = n
    _nfree += 1


cdef int _refill() except -1:
    _sweep()
    if _nfree == 0:
        _new_page()
    return 0


cdef inline int _take() except -1:
    global _nfree
    cdef int n
    # _refill may let other threads run and take the new slots: check again
    # until one is free with no Python code in between
    while _nfree == 0:
        _refill()
    _nfree -= 1
    n = _fstack[_nfree]
    _state_ptr(n)[0] = SLOT_USED
    _pused[n // SLOTS_PER_PAGE] += 1
    return n


cdef void _host_done(void *state) noexcept nogil:
    # Runs on the stream's thread: no HIP call, no GIL.
    hipfile_atomic_store_u8(<unsigned char *>state, SLOT_DONE)


def trim_pool():
    """Free the pinned pages when none of their slots is in use; returns the
    pages freed. Slots parked behind operations still in flight are kept.
    """
    global _npages, _nfree
    cdef int i, freed = 0
    _sweep()
    if _npages == 0:
        return 0
    for i in range(_npages):
        if _pused[i]:
            return 0
    # detach the pages first (C only), then free them: threads that submit
    # meanwhile start new pages
    _npages = 0
    _nfree = 0
    pages = list(_pages)
    _pages.clear()
    h = _hipapi()
    for p in pages:
        h.check(h.hip.hipHostFree((<_Page>p).mem), "hipHostFree")
        (<_Page>p).mem = None
        freed += 1
    return freed


def pool_stats():
    """Counts of the slot pool: pages, free, in_use, parked."""
    _sweep()
    cdef int i, used = 0
    for i in range(_npages):
        used += _pused[i]
    return {"pages": _npages, "free": _nfree, "in_use": used - len(_parked),
            "parked": len(_parked), "slots_per_page": SLOTS_PER_PAGE}


# --------------------------------------------------------------------------
# Cores
# --------------------------------------------------------------------------

cdef class _StreamState:
    """Registration state of one stream, shared by its Stream objects and
    the handles of operations on it."""
    cdef readonly uintptr_t handle
    cdef readonly unsigned flags
    cdef readonly bint registered
    cdef readonly Py_ssize_t pending
    cdef unsigned long epoch


cdef dict _stream_states = {}     # handle -> _StreamState (registered streams)


cdef class _BufferCore:
    """Address, size and registration of a buffer (base of :class:`Buffer`)."""
    cdef uintptr_t _ptr
    cdef size_t _length
    cdef int _flags
    cdef bint _registered
    cdef Py_ssize_t _pending
    cdef object _owner
    cdef int _device
    cdef Py_ssize_t _held
    cdef unsigned long _epoch

    def _hold(self, Py_ssize_t delta):
        """Count operations outside AsyncIOHandle (batch entries) using this buffer."""
        self._held += delta

    @property
    def ptr(self):
        """Integer address of the memory."""
        return self._ptr

    @property
    def length(self):
        """Size of the memory in bytes."""
        return self._length

    @property
    def registered(self):
        """Whether the memory is registered with hipFile by this object (a
        registration dropped by closing the driver counts as gone)."""
        return bool(self._registered and self._epoch == _driver_epoch)

    @property
    def pending(self):
        """Number of asynchronous operations on this buffer not yet observed complete."""
        return self._pending

    @property
    def flags(self):
        """Registration flags."""
        return self._flags

    def _setup(self, uintptr_t ptr, size_t length, int flags, object owner):
        if self._registered:
            raise ValueError("cannot change a registered buffer")
        self._ptr = ptr
        self._length = length
        self._flags = flags
        self._owner = owner

    def register(self):
        """Register the memory with hipFile (idempotent).

        Raises
        ------
        HipFileException
            E.g. ``MemoryAlreadyRegisteredError`` when another registration
            covers it, ``PointerError`` for memory that is not device memory.

        See Also
        --------
        hipFileBufRegister
        """
        if self._registered and self._epoch == _driver_epoch:
            return
        if self._length == 0:
            raise ValueError("cannot register an empty buffer")
        buf_register(self._ptr, self._length, self._flags)
        self._registered = 1
        self._epoch = _driver_epoch

    def deregister(self):
        """Deregister the memory (idempotent).

        Raises
        ------
        InFlightError
            Asynchronous operations on this buffer are still in flight.

        See Also
        --------
        hipFileBufDeregister
        """
        if not self._registered:
            return
        if self._epoch != _driver_epoch:
            # the driver was closed since: the library dropped the registration
            self._registered = 0
            return
        if self._held:
            from hipfile.errors import InFlightError
            raise InFlightError(detail=f"cannot deregister the buffer at {self._ptr:#x}: "
                                f"{self._held} operation(s) (batch entries, parallel "
                                "reads or writes) still in flight")
        if self._pending and settle(self):
            from hipfile.errors import InFlightError
            raise InFlightError(detail=f"cannot deregister the buffer at {self._ptr:#x}: "
                                f"{self._pending} asynchronous operation(s) still in flight")
        self._registered = 0
        buf_deregister(self._ptr)


cdef class _StreamCore:
    """Handle and registration state of a stream (base of :class:`Stream`)."""
    cdef uintptr_t _handle
    cdef unsigned _flags
    cdef object _owner
    cdef _StreamState _state

    @property
    def handle(self):
        """The ``hipStream_t`` as an integer (0 is the null stream)."""
        return self._handle

    @property
    def registered(self):
        """Whether the stream is registered with hipFile by this object."""
        return self._state is not None and self._state.registered

    @property
    def pending(self):
        """Asynchronous operations on this stream not yet observed complete."""
        return 0 if self._state is None else self._state.pending

    @property
    def flags(self):
        """Registration flags (``StreamFlags`` bits)."""
        return self._flags

    def _setup(self, uintptr_t handle, unsigned flags, object owner):
        if self.registered:
            raise ValueError("cannot change a registered stream")
        if flags & ~0xF:
            raise ValueError(f"stream flags {flags:#x} outside the mask 0xf")
        self._handle = handle
        self._flags = flags
        self._owner = owner

    def register(self):
        """Register the stream with hipFile (idempotent for this object).

        Raises
        ------
        InvalidValueError
            The stream is registered already (by another object), or the
            flags are invalid.

        See Also
        --------
        hipFileStreamRegister
        """
        if self._state is not None and self._state.registered:
            return
        stream_register(self._handle, self._flags)
        cdef _StreamState st = _StreamState.__new__(_StreamState)
        st.handle = self._handle
        st.flags = self._flags
        st.registered = 1
        st.epoch = _driver_epoch
        self._state = st
        _stream_states[self._handle] = st

    def deregister(self):
        """Deregister the stream (idempotent).

        Raises
        ------
        InFlightError
            Asynchronous operations on the stream are still in flight.

        See Also
        --------
        hipFileStreamDeregister
        """
        cdef _StreamState st = self._state
        if st is None or not st.registered:
            return
        if st.pending and settle(st):
            from hipfile.errors import InFlightError
            raise InFlightError(detail=f"cannot deregister stream {self._handle:#x}: "
                                f"{st.pending} asynchronous operation(s) still in flight")
        st.registered = 0
        if _stream_states.get(self._handle) is st:
            del _stream_states[self._handle]
        self._state = None
        if st.epoch == _driver_epoch:
            stream_deregister(self._handle)
            return
        # the driver was closed since: some libraries drop stream
        # registrations with it, others keep them
        from hipfile.errors import InvalidValueError
        try:
            stream_deregister(self._handle)
        except InvalidValueError:
            pass


cdef class _FileCore:
    """Registered hipFile handle of an open file (base of :class:`FileHandle`)."""
    cdef hipFileHandle_t _fh
    cdef bint _is_open
    cdef Py_ssize_t _pending
    cdef Py_ssize_t _held
    cdef unsigned long _epoch

    def _hold(self, Py_ssize_t delta):
        """Count operations outside AsyncIOHandle (batch entries) using this file."""
        self._held += delta

    @property
    def pending(self):
        """Asynchronous operations on this file not yet observed complete."""
        return self._pending

    @property
    def handle(self):
        """The registered ``hipFileHandle_t`` as an int, or None when closed."""
        return <uintptr_t>self._fh if self._is_open else None

    def _attach(self, uintptr_t fh):
        self._fh = <hipFileHandle_t>fh
        self._is_open = 1
        self._epoch = _driver_epoch

    def _check_registered(self):
        """Raise unless the file is open and its registration is current.

        Raises
        ------
        ClosedFileError
            The file is closed.
        HandleNotRegisteredError
            The driver was closed since the file was opened, which dropped
            the registration; the stale handle is never passed on.
        """
        _check_file(self)

    def _detach(self):
        """Mark closed and return the handle to deregister (None if not open).

        Raises InFlightError while operations on this file are in flight.
        """
        if not self._is_open:
            return None
        if self._held:
            from hipfile.errors import InFlightError
            raise InFlightError(detail=f"cannot close the file: {self._held} operation(s) "
                                "(batch entries, parallel reads or writes) still in flight")
        if self._pending and settle(self):
            from hipfile.errors import InFlightError
            raise InFlightError(detail=f"cannot close the file: {self._pending} asynchronous "
                                "operation(s) still in flight; wait for them first")
        self._is_open = 0
        if self._epoch != _driver_epoch:
            return None  # dropped with the driver: nothing to deregister
        return <uintptr_t>self._fh

    def read_async(self, buffer, size=None, file_offset=0, buffer_offset=0, stream=0):
        """Enqueue a read of ``size`` bytes at ``file_offset`` into ``buffer``
        at ``buffer_offset`` on ``stream``; returns an :class:`AsyncIOHandle`.

        ``buffer`` is a :class:`Buffer` or anything :class:`Buffer` accepts;
        ``stream`` a :class:`Stream`, anything it accepts, or an int. The
        call returns once the operation is enqueued. The handle keeps the
        file, buffer and stream alive until completion is observed.

        Raises
        ------
        ValueError
            The file is closed, or the range does not fit the buffer.
        HipFileException
            The library refused the submission.

        See Also
        --------
        hipFileReadAsync
        """
        return _submit(self, 0, buffer, size, file_offset, buffer_offset, stream)

    def write_async(self, buffer, size=None, file_offset=0, buffer_offset=0, stream=0):
        """Enqueue a write of ``size`` bytes from ``buffer`` at
        ``buffer_offset`` to the file at ``file_offset`` on ``stream``; returns
        an :class:`AsyncIOHandle`. See :meth:`read_async`.

        See Also
        --------
        hipFileWriteAsync
        """
        return _submit(self, 1, buffer, size, file_offset, buffer_offset, stream)


_interop_mod = None


cdef object _interop():
    global _interop_mod
    if _interop_mod is None:
        from hipfile import _interop as m
        _interop_mod = m
    return _interop_mod


# Intrusive list of handles submitted and not yet observed complete
# (borrowed pointers; a handle unlinks itself before it dies).
cdef PyObject *_pending_head = NULL


cdef int _check_file(_FileCore f) except -1:
    if not f._is_open:
        from hipfile.errors import ClosedFileError
        raise ClosedFileError("I/O operation on a closed FileHandle")
    if f._epoch != _driver_epoch:
        from hipfile.errors import HandleNotRegisteredError
        raise HandleNotRegisteredError(
            5027, 0, None, "the driver was closed after this file was opened, which "
            "dropped its registration; close and reopen the file")
    return 0


cdef AsyncIOHandle _submit(_FileCore f, int opcode, object buffer, object size,
                           object file_offset, object buffer_offset, object stream):
    global _pending_head
    cdef fn_io_async_t fn = _get_async(opcode)
    cdef uintptr_t base
    cdef size_t length
    cdef _BufferCore bc = None
    cdef object buf_owner
    cdef _StreamState st = None
    cdef uintptr_t sh
    cdef object stream_owner = None
    cdef hoff_t foff, boff
    cdef size_t nbytes
    cdef hipFileError_t e
    cdef int err_no = 0
    cdef Slots *s
    cdef AsyncIOHandle h

    if not f._is_open or f._epoch != _driver_epoch:
        _check_file(f)
    # buffer
    if isinstance(buffer, _BufferCore):
        bc = <_BufferCore>buffer
        base = bc._ptr
        length = bc._length
        buf_owner = buffer
    else:
        base, length, buf_owner = _interop().buffer_info(buffer)
    # stream
    if isinstance(stream, _StreamCore):
        sh = (<_StreamCore>stream)._handle
        st = (<_StreamCore>stream)._state
        stream_owner = stream
    elif type(stream) is int:
        sh = <uintptr_t>stream
        o = _stream_states.get(stream) if _stream_states else None
        if o is not None:
            st = <_StreamState>o
    else:
        if stream is None:
            sh = 0
        else:
            sh, stream_owner = _interop().stream_info(stream)
        if _stream_states:
            o = _stream_states.get(sh)
            if o is not None:
                st = <_StreamState>o
    if st is not None and not st.registered:
        st = None
    # ranges: refuse anything that would let the library touch memory
    # outside the buffer
    cdef long long req
    foff = file_offset
    boff = buffer_offset
    if foff < 0 or boff < 0:
        raise ValueError(f"offsets must be >= 0 (file_offset={foff}, buffer_offset={boff})")
    if <size_t>boff > length:
        raise ValueError(f"buffer_offset {boff} is past the end of the {length}-byte buffer")
    if size is None:
        nbytes = length - <size_t>boff
    else:
        req = size
        if req < 0:
            raise ValueError(f"size must be >= 0, got {req}")
        nbytes = <size_t>req
        if nbytes > length - <size_t>boff:
            raise ValueError(f"size {nbytes} at buffer_offset {boff} overruns the "
                             f"{length}-byte buffer")

    h = AsyncIOHandle.__new__(AsyncIOHandle)
    h._slot = _take()
    s = _slot_ptr(h._slot)
    h._s = s
    s.size = nbytes
    s.file_offset = foff
    s.buffer_offset = boff
    s.bytes_done = 0
    with nogil:
        libc.errno.errno = 0
        e = fn(f._fh, <void *>base, &s.size, &s.file_offset, &s.buffer_offset,
               &s.bytes_done, <hipStream_t>sh)
        if e.err != 0:
            err_no = libc.errno.errno
    if e.err != 0:
        # not enqueued: the library keeps no pointer to the slots
        _give_back(h._slot)
        h._slot = -1
        h._s = NULL
        if e.err == -1 and err_no:
            raise OSError(err_no, os.strerror(err_no))
        raise_status(e.err, e.hip_drv_err,
                     "hipFileReadAsync" if opcode == 0 else "hipFileWriteAsync")
    h._opcode = opcode
    h._submitted = 1
    h._file = f
    h._buffer = buf_owner
    h._stream_owner = stream_owner
    h._stream = sh
    h._state = st
    h._flags = st.flags if st is not None else 0
    h._submitted_size = nbytes
    h._buf_len = length
    f._pending += 1
    if bc is not None:
        bc._pending += 1
    if st is not None:
        st.pending += 1
    # link
    h._next = _pending_head
    h._prev = NULL
    if _pending_head != NULL:
        (<AsyncIOHandle>_pending_head)._prev = <PyObject *>h
    _pending_head = <PyObject *>h
    return h


cdef void _unlink(AsyncIOHandle h):
    global _pending_head
    if h._prev != NULL:
        (<AsyncIOHandle>h._prev)._next = h._next
    elif _pending_head == <PyObject *>h:
        _pending_head = h._next
    if h._next != NULL:
        (<AsyncIOHandle>h._next)._prev = h._prev
    h._prev = NULL
    h._next = NULL


cdef void _release_refs(object file, object buffer, object state):
    if file is not None:
        (<_FileCore>file)._pending -= 1
    if isinstance(buffer, _BufferCore):
        (<_BufferCore>buffer)._pending -= 1
    if state is not None:
        (<_StreamState>state).pending -= 1


cdef void _destroy_event(object event):
    if event is None:
        return
    try:
        _hipapi().hip.hipEventDestroy(event)
    except Exception:
        pass


def pending_handles():
    """Handles submitted through hipfile whose completion is not yet observed."""
    out = []
    cdef PyObject *p = _pending_head
    while p != NULL:
        out.append(<object>p)
        p = (<AsyncIOHandle>p)._next
    return out


def settle(obj=None):
    """Observe completion of every pending operation that has finished
    (all of them, or those using ``obj``: a file, buffer or stream state),
    without blocking. Returns how many of those are still in flight."""
    _sweep()
    cdef int left = 0
    for h in pending_handles():
        if obj is not None and not (<AsyncIOHandle>h)._uses(obj):
            continue
        if not (<AsyncIOHandle>h).done():
            left += 1
    for n, rec in list(_parked.items()):
        if obj is None or obj is (<_Parked>rec).file or obj is (<_Parked>rec).buffer \
                or obj is (<_Parked>rec).stream_state:
            left += 1
    return left


# Not tracked by the cyclic GC (``no_gc``): a handle only refers to the file,
# buffer, stream and event it keeps alive, which do not refer back to it, and
# skipping the tracking keeps the submit path short.
@cython.no_gc
@cython.freelist(64)
cdef class AsyncIOHandle:
    """One stream-ordered read or write and the four values it uses.

    The slots (size, file offset, buffer offset, bytes done) live in pinned
    host memory from a pool allocated through HIP-Python, so they stay valid
    for as long as the library may touch them, even if this object is
    dropped first. Until its completion has been observed the handle keeps
    the file, buffer and stream alive. Created by
    :meth:`FileHandle.read_async` / :meth:`FileHandle.write_async`; created
    directly (``AsyncIOHandle(size, file_offset, buffer_offset)``) it holds
    values for the raw layer and is not submitted.
    """
    cdef int _slot
    cdef Slots *_s
    cdef int _opcode
    cdef bint _submitted
    cdef bint _complete
    cdef object _file
    cdef object _buffer
    cdef object _stream_owner
    cdef _StreamState _state
    cdef uintptr_t _stream
    cdef unsigned _flags
    cdef size_t _submitted_size
    cdef size_t _buf_len
    cdef object _event
    cdef object _slots_ptr
    cdef PyObject *_prev
    cdef PyObject *_next

    def __cinit__(self):
        self._slot = -1
        self._s = NULL

    def __init__(self, size_t size=0, hoff_t file_offset=0, hoff_t buffer_offset=0):
        if self._slot < 0:
            self._slot = _take()
            self._s = _slot_ptr(self._slot)
        self._s.size = size
        self._s.file_offset = file_offset
        self._s.buffer_offset = buffer_offset
        self._s.bytes_done = 0
        self._submitted_size = size

    cdef bint _uses(self, obj):
        return obj is self._file or obj is self._buffer or obj is self._state

    cdef void _observed(self):
        if self._complete or not self._submitted:
            return
        self._complete = 1
        _unlink(self)
        _release_refs(self._file, self._buffer, self._state)
        self._file = None
        self._buffer = None
        self._stream_owner = None
        self._state = None

    def __dealloc__(self):
        cdef _Parked rec
        if self._slot < 0:
            return
        if not self._submitted or self._complete:
            if self._event is not None:
                _destroy_event(self._event)
            _give_back(self._slot)
            return
        # Dropped before completion was observed: park the slots (and the
        # objects the operation uses) until a host function enqueued behind
        # the operation marks them done. No blocking here.
        _unlink(self)
        cdef unsigned char *state = _state_ptr(self._slot)
        state[0] = SLOT_PARKED
        rec = _Parked.__new__(_Parked)
        rec.file = self._file
        rec.buffer = self._buffer
        rec.stream_state = self._state
        rec.event = self._event
        _parked[self._slot] = rec
        try:
            _load_hip_capi()
        except BaseException:
            pass
        if _launch_marker(self._stream, state) != HIP_SUCCESS:
            # Could not enqueue a marker: settle now if the stream is idle,
            # otherwise the slots stay parked (never reused).
            try:
                if _stream_query(self._stream) == HIP_SUCCESS:
                    state[0] = SLOT_DONE
            except BaseException:
                pass

    # -- values ---------------------------------------------------------

    @property
    def submitted(self):
        """Whether this handle was submitted to a stream."""
        return bool(self._submitted)

    @property
    def opcode(self):
        """0 for a read, 1 for a write."""
        return self._opcode

    @property
    def stream(self):
        """The stream handle (int) the operation was enqueued on."""
        return self._stream

    @property
    def stream_flags(self):
        """Registration flags of the stream at submit (0 if unregistered)."""
        return self._flags

    @property
    def slots(self):
        """The four slots as a HIP-Python ``Pointer`` (size_t size, off_t
        file_offset, off_t buffer_offset, ssize_t bytes_done)."""
        if self._slots_ptr is None:
            _hipapi()
            self._slots_ptr = _PointerType(<uintptr_t>self._s)
        return self._slots_ptr

    cdef int _check_settable(self, unsigned fixed_flag, str name) except -1:
        if self._complete:
            raise ValueError(f"cannot set {name}: the operation has completed")
        if self._submitted and (self._flags & fixed_flag):
            raise ValueError(f"cannot set {name}: the stream was registered with a FIXED "
                             f"flag for it, so the library copied it at submit")
        return 0

    @property
    def size(self):
        """Bytes requested. May shrink after submit (never grow) while the
        operation has not run, unless the stream fixes it."""
        return self._s.size

    @size.setter
    def size(self, value):
        self._check_settable(FIXED_FILE_SIZE, "size")
        if value < 0:
            raise ValueError("size must be >= 0")
        if self._submitted:
            if value > self._submitted_size:
                raise ValueError(f"size may only shrink after submit ({value} > "
                                 f"{self._submitted_size})")
            if <size_t>self._s.buffer_offset + <size_t>value > self._buf_len:
                raise ValueError("size would overrun the buffer")
        self._s.size = value

    @property
    def file_offset(self):
        """File offset used when the operation runs."""
        return self._s.file_offset

    @file_offset.setter
    def file_offset(self, value):
        self._check_settable(FIXED_FILE_OFFSET, "file_offset")
        if value < 0:
            raise ValueError("file_offset must be >= 0")
        self._s.file_offset = value

    @property
    def buffer_offset(self):
        """Buffer offset used when the operation runs."""
        return self._s.buffer_offset

    @buffer_offset.setter
    def buffer_offset(self, value):
        self._check_settable(FIXED_BUF_OFFSET, "buffer_offset")
        if value < 0:
            raise ValueError("buffer_offset must be >= 0")
        if self._submitted and <size_t>value + self._s.size > self._buf_len:
            raise ValueError(f"buffer_offset {value} with size {self._s.size} would overrun "
                             f"the {self._buf_len}-byte buffer")
        self._s.buffer_offset = value

    @property
    def bytes_done(self):
        """Bytes moved, or a negative error code, once the operation has
        completed; ``None`` while it has not (not yet valid)."""
        if self._complete or not self._submitted:
            return self._s.bytes_done
        if self.done():
            return self._s.bytes_done
        return None

    # -- completion -----------------------------------------------------

    def done(self):
        """Whether the operation has completed (never blocks).

        Queries the stream; if it is busy with later work, records an event
        behind the operation once and queries that.
        """
        if self._complete or not self._submitted:
            return bool(self._complete)
        cdef int err
        if self._event is None:
            err = _stream_query(self._stream)
            if err == HIP_SUCCESS:
                self._observed()
                return True
            if err != HIP_ERROR_NOT_READY:
                _hip_fail(err, "hipStreamQuery")
            self._record()
        err = _event_query(self._event)
        if err == HIP_SUCCESS:
            self._observed()
            return True
        if err != HIP_ERROR_NOT_READY:
            _hip_fail(err, "hipEventQuery")
        return False

    cdef _record(self):
        h = _hipapi()
        ev = h.check(h.hip.hipEventCreateWithFlags(h.hip.hipEventDisableTiming),
                     "hipEventCreateWithFlags")
        try:
            h.check(h.hip.hipEventRecord(ev, self._stream), "hipEventRecord")
        except BaseException:
            h.hip.hipEventDestroy(ev)
            raise
        self._event = ev

    def record_event(self):
        """A HIP event (HIP-Python ``hipEvent_t``) that completes once this
        operation has run, for ``hipStreamWaitEvent`` on another stream.

        Recorded on first call (behind everything enqueued on the stream so
        far, so record it right after submitting). Owned by the handle.
        """
        if not self._submitted:
            raise ValueError("the handle was never submitted")
        if self._event is None:
            self._record()
        return self._event

    def wait(self, timeout=None):
        """Block until the operation completes; return the bytes moved.

        Parameters
        ----------
        timeout
            Seconds to wait, or None for no limit.

        Raises
        ------
        TimeoutError
            Not complete within ``timeout``.
        OSError, HipFileException
            The operation failed when it ran (a negative count).
        """
        if not self._submitted:
            raise ValueError("the handle was never submitted")
        if not self._complete:
            if timeout is None:
                if self._event is not None:
                    _event_sync(self._event)
                else:
                    _stream_sync(self._stream)
                self._observed()
            else:
                deadline = _time.monotonic() + float(timeout)
                delay = 1e-5
                while not self.done():
                    if _time.monotonic() >= deadline:
                        raise TimeoutError(f"operation not complete after {timeout} s")
                    _time.sleep(delay)
                    delay = min(delay * 2, 1e-3)
        return self._result()

    def result(self, timeout=None):
        """Same as :meth:`wait` (the ``concurrent.futures`` name)."""
        return self.wait(timeout)

    cdef object _result(self):
        cdef ssize_t n = self._s.bytes_done
        if n >= 0:
            return n
        raise_result(n, 0, "hipFileReadAsync" if self._opcode == 0 else "hipFileWriteAsync",
                     deferred=True)

    def __repr__(self):
        kind = "read" if self._opcode == 0 else "write"
        if not self._submitted:
            state = "unsubmitted"
        elif self._complete:
            state = f"done bytes_done={self._s.bytes_done}"
        else:
            state = "pending"
        return (f"<AsyncIOHandle {kind} size={self._s.size} "
                f"file_offset={self._s.file_offset} buffer_offset={self._s.buffer_offset} "
                f"stream=0x{self._stream:x} {state}>")
