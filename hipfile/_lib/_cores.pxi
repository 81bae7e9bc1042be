# Cores of FileHandle, Buffer and Stream: what the C paths need of them.
#
# Invariants
# - A core owns its registration; the public subclasses add Python-level
#   conveniences only.
# - ``_pending`` counts AsyncIOHandles using the object whose completion has
#   not been observed (parked ones included); ``_held`` counts other users
#   (batch entries, parallel tasks, engine ranges). Closing or deregistering
#   while either is non-zero raises InFlightError and changes nothing.
# - ``_epoch`` is the driver epoch at registration: a registration older
#   than ``_driver_epoch`` was dropped by the library and is never used or
#   deregistered again.
# - ``_gen`` / ``gen`` is the fork generation at open or registration: in a
#   forked child an inherited registration is dropped, never passed to the
#   library (see _process.pxi).
# - close()/deregister() never wait: with operations in flight they raise
#   InFlightError and change nothing. Leaving a ``with`` block waits for this
#   object's stream-ordered operations first (see hipfile/_lifetime.py).

cdef enum:
    FIXED_BUF_OFFSET = 1
    FIXED_FILE_OFFSET = 2
    FIXED_FILE_SIZE = 4
# --------------------------------------------------------------------------
# Buffers and streams of HIP-Python, resolved in C
# --------------------------------------------------------------------------

cdef object _HipNDBuffer = None     # HIP-Python's DeviceArray and its base
cdef object _HipDeviceArray = None
cdef object _HipStream = None       # hipStream_t (ihipStream_t)
cdef bint _hip_types_loaded = 0
# Field offsets inside HIP-Python's objects, measured once at run time on
# objects made for the purpose (-1: not found; the slow path is used).
cdef Py_ssize_t _off_ptr = -1         # Pointer._ptr (void *)
cdef Py_ssize_t _off_stream_ptr = -1  # the same field in ihipStream_t
cdef Py_ssize_t _off_itemsize = -1    # NDBuffer._itemsize (size_t)
cdef Py_ssize_t _off_cai = -1         # NDBuffer._cuda_array_interface (dict)


cdef Py_ssize_t _find_word(object a, object b, uintptr_t va, uintptr_t vb):
    """The offset of the one pointer-sized field holding ``va`` in ``a`` and
    ``vb`` in ``b`` (two objects of one type), or -1."""
    cdef Py_ssize_t n = type(a).__basicsize__
    cdef Py_ssize_t off, found = -1
    for off in range(sizeof(PyObject), n - <Py_ssize_t>sizeof(uintptr_t) + 1,
                     sizeof(uintptr_t)):
        if (<uintptr_t *>(<char *><PyObject *>a + off))[0] == va and \
                (<uintptr_t *>(<char *><PyObject *>b + off))[0] == vb:
            if found >= 0:
                return -1      # ambiguous
            found = off
    return found


cdef int _calibrate() except -1:
    global _off_ptr, _off_stream_ptr, _off_itemsize, _off_cai
    import gc
    cdef uintptr_t s1 = 0x5A17C0DE00001000, s2 = 0x5A17C0DE00042000
    try:
        if _HipDeviceArray is not None:
            a = _HipDeviceArray.fromObj(s1)
            b = _HipDeviceArray.fromObj(s2)
            _off_ptr = _find_word(a, b, s1, s2)
            a.configure(shape=(3, 5), typestr="f8", _force=True)
            b.configure(shape=(7,), typestr="i2", _force=True)
            _off_itemsize = _find_word(a, b, 8, 2)
            dicts = {id(o): o for o in gc.get_referents(a) if type(o) is dict}
            dicts_b = {id(o): o for o in gc.get_referents(b) if type(o) is dict}
            for da in dicts.values():
                for db in dicts_b.values():
                    if da.get("shape") == (3, 5) and db.get("shape") == (7,):
                        _off_cai = _find_word(a, b, <uintptr_t>id(da), <uintptr_t>id(db))
        if _HipStream is not None:
            _off_stream_ptr = _find_word(_HipStream.fromObj(s1), _HipStream.fromObj(s2), s1, s2)
    except Exception:
        _off_ptr = _off_stream_ptr = _off_itemsize = _off_cai = -1
    if _off_ptr < 0 or _off_itemsize < 0 or _off_cai < 0:
        _off_ptr = _off_itemsize = _off_cai = -1
    return 0


cdef int _load_hip_types() except -1:
    global _HipNDBuffer, _HipDeviceArray, _HipStream, _hip_types_loaded
    import sys
    h = _hipapi()
    mod = sys.modules.get(h.Pointer.__module__)
    _HipNDBuffer = getattr(mod, "NDBuffer", None)
    _HipDeviceArray = getattr(mod, "DeviceArray", None)
    _HipStream = getattr(h.hip, "ihipStream_t", None)
    _calibrate()
    _hip_types_loaded = 1
    return 0


cdef object _buffer_info(object obj, uintptr_t *base, size_t *length):
    """Address and size of a buffer object; returns the object to keep
    alive. Buffer cores and HIP-Python arrays are read in C; other objects
    go through the protocols of :mod:`hipfile._interop`."""
    cdef size_t n, item
    cdef char *p
    if isinstance(obj, _BufferCore):
        base[0] = (<_BufferCore>obj)._ptr
        length[0] = (<_BufferCore>obj)._length
        return obj
    if not _hip_types_loaded:
        _load_hip_types()
    t = type(obj)
    if t is _HipDeviceArray or t is _HipNDBuffer:
        if _off_cai >= 0:
            p = <char *><PyObject *>obj
            cai = <object>(<PyObject **>(p + _off_cai))[0]
            if type(cai) is dict and (<dict>cai).get("strides") is None:
                shape = (<dict>cai).get("shape")
                if type(shape) is tuple:
                    n = (<size_t *>(p + _off_itemsize))[0]
                    for d in <tuple>shape:
                        n *= <size_t>d
                    base[0] = (<uintptr_t *>(p + _off_ptr))[0]
                    length[0] = n
                    return obj
        base[0] = <uintptr_t>int(obj)
        length[0] = <size_t>obj.itemsize * <size_t>obj.size
        return obj
    b, n, owner = _interop().protocol_buffer_info(obj)
    base[0] = b
    length[0] = n
    return owner


cdef uintptr_t _stream_handle(object obj) except? 0:
    """A stream object's handle. Stream cores, ints, None and HIP-Python
    ``hipStream_t`` are read in C; the object itself (unless an int or None)
    is what to keep alive while the stream is used."""
    if isinstance(obj, _StreamCore):
        return (<_StreamCore>obj)._handle
    if obj is None:
        return 0
    if type(obj) is int:
        if obj < 0 or obj >= (1 << 64):
            raise ValueError(f"stream handle {obj:#x} out of range")
        return <uintptr_t>obj
    if not _hip_types_loaded:
        _load_hip_types()
    if type(obj) is _HipStream:
        if _off_stream_ptr >= 0:
            return (<uintptr_t *>(<char *><PyObject *>obj + _off_stream_ptr))[0]
        return <uintptr_t>int(obj)
    return <uintptr_t>_interop().stream_info(obj)[0]


def hip_layout():
    """The field offsets measured in HIP-Python's objects (-1: not found,
    the Python-level path is used)."""
    if not _hip_types_loaded:
        _load_hip_types()
    return {"ptr": _off_ptr, "stream_ptr": _off_stream_ptr, "itemsize": _off_itemsize,
            "cuda_array_interface": _off_cai}


def buffer_info(obj):
    """``(address, nbytes, owner)`` of a buffer object (see
    :func:`hipfile._interop.buffer_info`)."""
    cdef uintptr_t base = 0
    cdef size_t length = 0
    owner = _buffer_info(obj, &base, &length)
    return base, length, owner


# --------------------------------------------------------------------------
# The one range check of every I/O path
# --------------------------------------------------------------------------

cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object, int *) except? -1


cdef inline long long _as_index(object value, str name) except? -1:
    # ints (and numpy integers, through __index__) only: a float or a bool
    # is refused rather than truncated; a value no C long long holds (2**63
    # or more) is out of range, ValueError like any other bad size or
    # offset
    cdef int overflow = 0
    cdef long long n
    if type(value) is not int:
        if isinstance(value, bool):
            raise TypeError(f"{name} must be an int, not bool")
        try:
            value = _operator_index(value)
        except TypeError:
            raise TypeError(f"{name} must be an int, not {type(value).__name__}") from None
    n = PyLong_AsLongLongAndOverflow(value, &overflow)
    if overflow:
        raise ValueError(f"{name} {value} is out of range (a size or offset must be "
                         f"below 2**63)")
    return n


cdef int _io_range(size_t length, object size, object file_offset, object buffer_offset,
                   size_t *nbytes, hoff_t *foff, hoff_t *boff, object buf=None) except -1:
    """Check one transfer against a buffer of ``length`` bytes: the library
    is never asked to touch memory outside it. ``size`` None means the rest
    of the buffer.

    ``buf`` is the buffer object when the caller has it: an unregistered
    :class:`Buffer` made from a bare address (cuFile's convention: a base
    address, and an offset from it) is checked against the device
    allocation the address lies in rather than its declared length (see
    ``_allocation_room``); a registered one against its registration, as
    hipFile checks it."""
    cdef long long f = _as_index(file_offset, "file_offset")
    cdef long long b = _as_index(buffer_offset, "buffer_offset")
    cdef long long n = 0
    if size is not None:
        n = _as_index(size, "size")
    if f < 0:
        raise ValueError(f"file_offset must be >= 0, got {f}")
    if b < 0:
        raise ValueError(f"buffer_offset must be >= 0, got {b}")
    if size is not None and n < 0:
        raise ValueError(f"size must be >= 0, got {n}")
    if <unsigned long long>b > length:
        if size is None or not _fits_allocation(buf, b, n):
            _raise_outside(buf, length, size, b, n)
    elif size is None:
        n = length - <size_t>b
    elif <unsigned long long>n > length - <size_t>b and not _fits_allocation(buf, b, n):
        _raise_outside(buf, length, size, b, n)
    nbytes[0] = <size_t>n
    foff[0] = f
    boff[0] = b
    return 0


cdef tuple _allocation_room(_BufferCore buf):
    """``(room, base, size, reason)`` for a buffer made from a bare address:
    ``room`` is how many bytes lie between its address and the end of the
    device allocation holding it (``hipMemGetAddressRange``), 0 when the
    runtime knows no such allocation (``reason`` then says why). Asked at
    each transfer that goes past the declared length, never cached: the
    buffer does not own the memory, which may be freed and reallocated."""
    h = _hipapi()
    try:
        err, base, size = h.hip.hipMemGetAddressRange(buf._ptr)
    except Exception as e:          # a runtime without the function
        return 0, 0, 0, f"hipMemGetAddressRange is not available ({e})"
    if err != h.hip.hipError_t.hipSuccess:
        return 0, 0, 0, f"hipMemGetAddressRange answered {h.error_name(int(err))}"
    lo = int(base) if base is not None else 0
    hi = lo + int(size)
    if not lo <= buf._ptr < hi:
        return 0, lo, int(size), "hipMemGetAddressRange answered a range that does not hold it"
    return hi - buf._ptr, lo, int(size), None


cdef bint _fits_allocation(object buf, long long b, long long n) except -1:
    """Whether ``[b, b + n)`` from a bare-address buffer's address lies in
    its device allocation (False for any other buffer)."""
    if not isinstance(buf, _BufferCore) or not (<_BufferCore>buf)._bare:
        return 0
    if (<_BufferCore>buf).registered:
        return 0        # hipFile holds a registered buffer to its registration
    room = <unsigned long long>(_allocation_room(<_BufferCore>buf)[0])
    return <unsigned long long>b <= room and <unsigned long long>n <= room - <unsigned long long>b


cdef int _raise_outside(object buf, size_t length, object size, long long b,
                        long long n) except -1:
    cdef _BufferCore bc
    if <unsigned long long>b > length:
        what = f"buffer_offset {b} is past the {length}-byte buffer"
    else:
        what = f"size {n} at buffer_offset {b} overruns the {length}-byte buffer"
    if not isinstance(buf, _BufferCore) or not (<_BufferCore>buf)._bare:
        raise ValueError(what)
    bc = <_BufferCore>buf
    if bc.registered:
        raise ValueError(f"{what}: the buffer is registered with hipFile for those "
                         f"{length} bytes, and hipFile refuses transfers outside a "
                         f"registration; register the whole allocation, or leave the "
                         f"buffer unregistered")
    room, base, asize, reason = _allocation_room(bc)
    if reason is not None:
        raise ValueError(f"{what}: the buffer was made from the bare address {bc._ptr:#x}, "
                         f"which lies in no device allocation the HIP runtime knows "
                         f"({reason}), so the range is checked against the length "
                         f"it was given")
    if size is None:
        raise ValueError(f"{what}: give size, the bytes to move from buffer_offset "
                         f"(the device allocation holds {room} bytes from the "
                         f"buffer's address)")
    raise ValueError(f"size {n} at buffer_offset {b} overruns the device allocation: the "
                     f"buffer's address {bc._ptr:#x} lies in the {asize}-byte allocation at "
                     f"{base:#x}, which ends {room} bytes after it")


def io_range_check(size_t length, size, file_offset, buffer_offset, buf=None):
    """Check a transfer of ``size`` bytes (None: the rest of the buffer) at
    ``file_offset`` and ``buffer_offset`` against a buffer of ``length``
    bytes; returns ``(size, file_offset, buffer_offset)`` as ints.

    ``buf`` is the buffer object, when known: a :class:`~hipfile.Buffer`
    made from a bare address is checked against the device allocation
    holding it (``hipMemGetAddressRange``) rather than ``length``.

    Raises
    ------
    TypeError
        A value is not an integer (bools and floats are refused).
    ValueError
        A negative value, or a range that overruns the buffer.
    """
    cdef size_t n
    cdef hoff_t f, b
    _io_range(length, size, file_offset, buffer_offset, &n, &f, &b, buf)
    return n, f, b


cdef class _StreamState:
    """Registration state of one stream, shared by its Stream objects and
    the handles of operations on it."""
    cdef readonly uintptr_t handle
    cdef readonly unsigned flags
    cdef readonly bint registered
    cdef readonly Py_ssize_t pending
    cdef unsigned long epoch
    cdef unsigned long gen


cdef dict _stream_states = {}     # handle -> _StreamState (registered streams)


cdef class _BufferCore:
    """Address, size and registration of a buffer (base of :class:`Buffer`)."""
    cdef uintptr_t _ptr
    cdef size_t _length
    cdef int _flags
    cdef bint _registered
    cdef Py_ssize_t _pending
    cdef object _owner
    cdef int _device          # -1 until the engine asks
    cdef Py_ssize_t _held
    cdef unsigned long _epoch
    cdef unsigned long _gen
    cdef bint _bare           # made from a bare address: see _allocation_room

    def __cinit__(self):
        self._device = -1

    def _hold(self, Py_ssize_t delta):
        """Count operations outside AsyncIOHandle (batch entries) using this buffer."""
        self._held += delta

    def _held_count(self):
        return self._held

    @property
    def inherited(self):
        """Whether the buffer was registered in the parent of a ``fork``."""
        return bool(self._registered and self._gen != _fork_gen)

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

    @property
    def bare(self):
        """Whether the buffer was made from a bare address (an int,
        ``ctypes.c_void_p`` or sizeless pointer) with a length: its
        transfers may reach past that length, up to the end of the device
        allocation holding the address (cuFile's base-plus-offset
        convention)."""
        return bool(self._bare)

    def _setup(self, uintptr_t ptr, size_t length, int flags, object owner, bint bare=False):
        if self._registered:
            raise ValueError("cannot change a registered buffer")
        self._ptr = ptr
        self._device = -1
        self._bare = bare
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
        if self._registered and self._gen != _fork_gen:
            _forked("this Buffer")
        if self._registered and self._epoch == _driver_epoch:
            return
        if self._length == 0:
            raise ValueError("cannot register an empty buffer")
        buf_register(self._ptr, self._length, self._flags)
        self._registered = 1
        self._epoch = _driver_epoch
        self._gen = _fork_gen

    def deregister(self):
        """Deregister the memory (idempotent). Never waits; in a forked
        child an inherited registration is only dropped.

        Raises
        ------
        InFlightError
            Asynchronous operations on this buffer are still in flight
            (nothing is changed).

        See Also
        --------
        hipFileBufDeregister
        """
        if not self._registered:
            return
        if self._epoch != _driver_epoch or self._gen != _fork_gen:
            # the driver was closed since (the library dropped the
            # registration), or this is a forked child (the parent owns it)
            self._registered = 0
            return
        if self._held:
            _eng_sweep()
        if self._held:
            raise InFlightError(detail=f"cannot deregister the buffer at {self._ptr:#x}: "
                                f"{self._held} operation(s) (batch entries, parallel "
                                "reads or writes) still in flight")
        if self._pending and settle(self):
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
    def inherited(self):
        """Whether the stream was registered in the parent of a ``fork``."""
        return bool(self._state is not None and self._state.registered
                    and self._state.gen != _fork_gen)

    def _inflight_state(self):
        return self._state

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
            if self._state.gen != _fork_gen:
                _forked("this Stream")
            return
        stream_register(self._handle, self._flags)
        cdef _StreamState st = _StreamState.__new__(_StreamState)
        st.handle = self._handle
        st.flags = self._flags
        st.registered = 1
        st.epoch = _driver_epoch
        st.gen = _fork_gen
        self._state = st
        _stream_states[self._handle] = st

    def deregister(self):
        """Deregister the stream (idempotent). Never waits.

        If the stream was destroyed behind the binding's back, the handles
        on it end as lost (see :meth:`AsyncIOHandle.done`) and the
        deregistration goes ahead: it succeeds, or raises the library's
        error once (the object is deregistered either way). What HIP did
        with the work queued on a destroyed stream is undefined. In a forked
        child an inherited registration is only dropped.

        Raises
        ------
        InFlightError
            Asynchronous operations on the stream are still in flight
            (nothing is changed).
        HipFileException
            The library refused (e.g. a destroyed stream); raised once.

        See Also
        --------
        hipFileStreamDeregister
        """
        cdef _StreamState st = self._state
        if st is None or not st.registered:
            return
        if st.gen != _fork_gen:
            # inherited through fork: the parent owns the registration
            st.registered = 0
            self._state = None
            return
        if st.pending and settle(st):
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
    cdef unsigned long _gen

    def _hold(self, Py_ssize_t delta):
        """Count operations outside AsyncIOHandle (batch entries) using this file."""
        self._held += delta

    def _held_count(self):
        if self._held:
            _eng_sweep()   # stream-engine ranges that ended are counted off here
        return self._held

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
        self._gen = _fork_gen

    @property
    def inherited(self):
        """Whether the file was opened in the parent of a ``fork`` (it is
        then unusable here; close() only drops it)."""
        return bool(self._is_open and self._gen != _fork_gen)

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
        if self._gen != _fork_gen:
            self._is_open = 0   # inherited through fork: the parent owns it
            return None
        if self._held:
            _eng_sweep()
        if self._held:
            raise InFlightError(detail=f"cannot close the file: {self._held} operation(s) "
                                "(batch entries, parallel or stream-engine reads or "
                                "writes) still in flight; close(wait=True) waits for "
                                "them first")
        if self._pending and settle(self):
            raise InFlightError(detail=f"cannot close the file: {self._pending} asynchronous "
                                "operation(s) still in flight; close(wait=True) waits "
                                "for them first")
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

