# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Cores of FileHandle and Buffer (the Stream core is in _streams): what the C paths need of them,
the one range check of every I/O path, and the one submit preamble of the
stream-ordered paths (``read_async``/``write_async`` and the engine).

Invariants
- A core owns its registration; the public subclasses add Python-level
  conveniences only, and the core never calls up into them: what it needs
  of a file handle is given to it when the handle is made (``_descriptors``,
  ``_append``).
- ``_pending`` counts AsyncIOHandles using the object whose completion has
  not been observed (parked ones included); ``_held`` counts other users
  (batch entries, parallel tasks, engine ranges). Closing or deregistering
  while either is non-zero raises InFlightError and changes nothing.
- ``_epoch`` is the driver epoch at registration: a registration older
  than ``c_driver_epoch`` was dropped by the library and is never used or
  deregistered again.
- ``_gen`` / ``gen`` is the fork generation at open or registration: in a
  forked child an inherited registration is dropped, never passed to the
  library (see _runtime.pyx).
- close()/deregister() never wait: with operations in flight they raise
  InFlightError and change nothing. Leaving a ``with`` block waits for this
  object's stream-ordered operations first (see hipfile/_lifetime.py).
- Every submission goes through ``submit_preamble`` (the stream-ordered
  paths) or ``_hold_open`` (the others): a closed, closing, stale or
  inherited file, and a Buffer or Stream registered before fork, are
  refused there, the same way for every path.
- A file is *closing* while ``_closing`` > 0 (``close(wait=True)`` and the
  exit of a ``with`` block, waiting for what is in flight): new submissions
  are refused with ClosedFileError. The check and the count that makes a
  submission visible to close (``_entering`` in the preamble, ``_held`` in
  ``_hold_open``) happen together, holding the GIL with no Python code in
  between, so a submission racing with the start of a close is either
  counted in flight (and waited for) or refused.
"""

import threading as _threading
from operator import index as _operator_index
from weakref import ref as _weak_ref

from cpython.ref cimport PyObject
from libc.stdint cimport uintptr_t

from hipfile._lib._enums import OpError
from hipfile._lib._errors import (
    ClosedFileError, HandleNotRegisteredError, InFlightError)
from hipfile._lib import _bindings
from hipfile._lib._finalize import run_uninterrupted
from hipfile._lib._decode cimport foreign_buffer_info, foreign_stream_handle
from hipfile._lib._streams cimport settle, stream_states, StreamCore, StreamState
from hipfile._lib._runtime cimport c_driver_epoch, fork_gen, raise_forked, hipapi

cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object, int *) except? -1


cdef int _sweep_held() except -1:
    if held_sweep_hook != NULL:
        held_sweep_hook()
    return 0


# Driver.close(wait=True) calls waiting (submissions on every file refused),
# and the files open now (for what such a close waits for): weak references
# without callbacks, by address, each removed by its file's __dealloc__ (a
# WeakSet's callback would run Python code in a finalizer, where Ctrl-C is
# lost: see _finalize.run_uninterrupted).
cdef Py_ssize_t _driver_closing = 0
cdef dict _open_files = {}


def begin_driver_closing():
    """Refuse new submissions on every file (ClosedFileError, "the driver
    is closing") until :func:`end_driver_closing` (counted, as a file's
    ``_begin_closing``)."""
    global _driver_closing
    _driver_closing += 1


def end_driver_closing():
    """Undo one :func:`begin_driver_closing`."""
    global _driver_closing
    if _driver_closing > 0:
        _driver_closing -= 1


def files_held():
    """Operations other than stream-ordered ones (batch entries,
    synchronous, parallel and stream-engine reads and writes) and
    submissions under way, on every open file."""
    cdef Py_ssize_t n = 0
    for r in list(_open_files.values()):
        f = r()
        if f is not None and (<FileCore>f)._is_open:
            n += f._held_count()
    return n


# --------------------------------------------------------------------------
# Buffers and streams: the package's own cores read here, others decoded by
# _decode
# --------------------------------------------------------------------------

cdef object c_buffer_info(object obj, uintptr_t *base, size_t *length):
    """Address and size of a buffer object; returns the object to keep
    alive. Buffer cores are read here, other objects by _decode."""
    if isinstance(obj, BufferCore):
        base[0] = (<BufferCore>obj)._ptr
        length[0] = (<BufferCore>obj)._length
        return obj
    return foreign_buffer_info(obj, base, length)


cdef uintptr_t stream_handle(object obj) except? 0:
    """A stream object's handle. Stream cores, ints and None are read here,
    others decoded by _decode; the object itself (unless an int or None) is
    what to keep alive while the stream is used."""
    if isinstance(obj, StreamCore):
        return (<StreamCore>obj)._handle
    if obj is None:
        return 0
    if type(obj) is int:
        if obj < 0 or obj >= (1 << 64):
            raise ValueError(f"stream handle {obj:#x} out of range")
        return <uintptr_t>obj
    return foreign_stream_handle(obj)


cdef int check_file(FileCore f) except -1:
    if f._gen != fork_gen and f._is_open:
        raise_forked("this FileHandle")
    if _driver_closing and f._is_open:
        raise ClosedFileError(
            "I/O operation on a FileHandle while the driver is closing (Driver.close"
            "(wait=True) or the end of its with block is waiting for the operations "
            "in flight): no new operations are accepted")
    if f._closing and f._is_open:
        raise ClosedFileError(
            "I/O operation on a FileHandle that is closing: the file is closing "
            "(close(wait=True) or the end of its with block is waiting for the "
            "operations in flight) and accepts no new ones")
    if not f._is_open:
        raise ClosedFileError(f._descriptors.closed_reason() if f._descriptors is not None
                              else "I/O operation on a closed FileHandle")
    if f._registered and f._epoch != c_driver_epoch:
        raise HandleNotRegisteredError(
            OpError.HANDLE_NOT_REGISTERED, 0, None,
            "the driver was closed after this file was opened, which dropped its "
            "registration; close and reopen the file")
    return 0


cdef int ensure_registered(FileCore f) except -1:
    """Register an open file with hipFile if it is not yet
    (hipFileHandleRegister on its descriptor, then ``_attach``): the
    registration, and with it the implicit driver open, happens at the
    first call that goes through hipFile's own data path. Threads making
    their first call at once: one registers."""
    if not f._registered:
        check_file(f)
        with _register_lock:
            if not f._registered:
                fd = f._descriptors.fileno()      # ClosedFileError once closed
                # registered and recorded in one step that Ctrl-C cannot cut
                # (a registration nobody records would outlive the descriptor)
                run_uninterrupted(_register_fd, f, fd)
    return 0


_register_lock = _threading.Lock()


def _register_fd(FileCore f, int fd):
    from hipfile._lib._api import handle_register    # _api builds on this module
    handle = handle_register(fd, int(f._descriptors.handle_type))
    if not f._is_open or f._descriptors.fd != fd:
        # closed by another thread while the library registered it
        _bindings.handle_deregister(handle)
        raise ClosedFileError(f._descriptors.closed_reason())
    f._attach(handle)


cdef object submit_preamble(FileCore f, object buffer, object stream, uintptr_t *base,
                            size_t *length, uintptr_t *sh, PyObject **state):
    """What every stream-ordered submission checks and reads first: the
    file is open, current and this process's; the buffer's address and
    size (a Buffer registered before fork is refused); the stream's handle
    and, for a registered stream, its state (``*state``, borrowed; NULL
    when unregistered; a Stream registered before fork is refused).
    Returns the object that keeps the buffer alive.

    A file that is closing is refused like a closed one. On success the
    submission is counted in ``f._entering`` (close then waits for it); the
    caller takes it off (``f._entering -= 1``, in a ``finally``) once the
    operation is counted in ``_pending``/``_held`` or has failed."""
    cdef BufferCore bc
    if (not f._is_open or (f._closing | _driver_closing)
            or (f._registered and f._epoch != c_driver_epoch)):
        check_file(f)
    # buffer
    if isinstance(buffer, BufferCore):
        bc = <BufferCore>buffer
        if bc._gen != fork_gen and bc._registered:
            raise_forked("this Buffer")
        base[0] = bc._ptr
        length[0] = bc._length
        buf_owner = buffer
    else:
        buf_owner = foreign_buffer_info(buffer, base, length)
    stream_preamble(stream, sh, state)
    # Decoding may have run Python code (a foreign buffer's or stream's
    # protocol), and a close may have begun meanwhile: check again, then
    # count the submission, with nothing in between that lets a close in.
    if (not f._is_open or (f._closing | _driver_closing)
            or (f._registered and f._epoch != c_driver_epoch)):
        check_file(f)
    f._entering += 1
    return buf_owner


cdef int stream_preamble(object stream, uintptr_t *sh, PyObject **state) except -1:
    """The stream part of :func:`submit_preamble`: the stream's handle and,
    for a registered stream, its state (``*state``, borrowed; NULL when
    unregistered; a Stream registered before fork is refused)."""
    cdef StreamState st = None
    if isinstance(stream, StreamCore):
        sh[0] = (<StreamCore>stream)._handle
        st = (<StreamCore>stream)._state
    elif type(stream) is int:
        try:
            sh[0] = <uintptr_t>stream
        except OverflowError:   # the rule of stream_handle, off the fast path
            raise ValueError(f"stream handle {stream:#x} out of range") from None
        if stream_states:
            o = stream_states.get(stream)
            if o is not None:
                st = <StreamState>o
    else:
        sh[0] = stream_handle(stream)
        if stream_states:
            o = stream_states.get(sh[0])
            if o is not None:
                st = <StreamState>o
    if st is not None and (not st.registered or st.gen != fork_gen):
        if st.registered:
            raise_forked("this Stream")
        st = None
    state[0] = <PyObject *>st if st is not None else NULL
    return 0


cdef void release_refs(object file, object buffer, object state):
    if file is not None:
        (<FileCore>file)._pending -= 1
    if isinstance(buffer, BufferCore):
        (<BufferCore>buffer)._pending -= 1
    if state is not None:
        (<StreamState>state).pending -= 1


# --------------------------------------------------------------------------
# The one range check of every I/O path
# --------------------------------------------------------------------------

cdef long long c_as_index(object value, str name) except? -1:
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
        raise ValueError(f"{name} {value} is out of range (it must be below 2**63)")
    return n


cdef long long c_as_positive(object value, str name) except? -1:
    """``value`` as a positive int (the rule of ``c_as_index``, and > 0)."""
    cdef long long n = c_as_index(value, name)
    if n <= 0:
        raise ValueError(f"{name} must be positive, got {n}")
    return n


cdef long long c_as_size(object value, str name) except? -1:
    """``value`` as an int >= 0 (the rule of ``c_as_index``)."""
    cdef long long n = c_as_index(value, name)
    if n < 0:
        raise ValueError(f"{name} must be >= 0, got {n}")
    return n


cdef int io_range(size_t length, object size, object file_offset, object buffer_offset,
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
    cdef long long f = c_as_index(file_offset, "file_offset")
    cdef long long b = c_as_index(buffer_offset, "buffer_offset")
    cdef long long n = 0
    if size is not None:
        n = c_as_index(size, "size")
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


cdef tuple _allocation_room(BufferCore buf):
    """``(room, base, size, reason)`` for a buffer made from a bare address:
    ``room`` is how many bytes lie between its address and the end of the
    device allocation holding it (``hipMemGetAddressRange``), 0 when the
    runtime knows no such allocation (``reason`` then says why). Asked at
    each transfer that goes past the declared length, never cached: the
    buffer does not own the memory, which may be freed and reallocated."""
    h = hipapi()
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
    if not isinstance(buf, BufferCore) or not (<BufferCore>buf)._bare:
        return 0
    if (<BufferCore>buf).registered:
        return 0        # hipFile holds a registered buffer to its registration
    room = <unsigned long long>(_allocation_room(<BufferCore>buf)[0])
    return <unsigned long long>b <= room and <unsigned long long>n <= room - <unsigned long long>b


cdef int _raise_outside(object buf, size_t length, object size, long long b,
                        long long n) except -1:
    cdef BufferCore bc
    if <unsigned long long>b > length:
        what = f"buffer_offset {b} is past the {length}-byte buffer"
    else:
        what = f"size {n} at buffer_offset {b} overruns the {length}-byte buffer"
    if not isinstance(buf, BufferCore) or not (<BufferCore>buf)._bare:
        raise ValueError(what)
    bc = <BufferCore>buf
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


cdef class BufferCore:
    """Address, size and registration of a buffer (base of :class:`Buffer`)."""

    def __cinit__(self):
        self._device = -1

    def _hold(self, Py_ssize_t delta):
        """Count operations outside AsyncIOHandle (batch entries) using this buffer."""
        self._held += delta

    cdef void add_held(self, Py_ssize_t n) noexcept:
        """``_hold`` for compiled callers: ``n`` more (or fewer) operations use the buffer."""
        self._held += n

    cdef int engine_device(self, int found) noexcept:
        """The buffer's device for the stream engine: the first one ``found``
        (a pointer query) is kept."""
        if self._device < 0:
            self._device = found
        return self._device

    def _held_count(self):
        return self._held

    @property
    def inherited(self):
        """Whether the buffer was registered in the parent of a ``fork``."""
        return bool(self._registered and self._gen != fork_gen)

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
        return bool(self._registered and self._epoch == c_driver_epoch)

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
        if self._registered and self._gen != fork_gen:
            raise_forked("this Buffer")
        if self._registered and self._epoch == c_driver_epoch:
            return
        if self._length == 0:
            raise ValueError("cannot register an empty buffer")
        _bindings.buf_register(self._ptr, self._length, self._flags)
        self._registered = 1
        self._epoch = c_driver_epoch
        self._gen = fork_gen

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
        if self._epoch != c_driver_epoch or self._gen != fork_gen:
            # the driver was closed since (the library dropped the
            # registration), or this is a forked child (the parent owns it)
            self._registered = 0
            return
        if self._held:
            _sweep_held()
        if self._held:
            raise InFlightError(detail=f"cannot deregister the buffer at {self._ptr:#x}: "
                                f"{self._held} operation(s) (batch entries, parallel "
                                "reads or writes) still in flight")
        if self._pending and settle(self):
            raise InFlightError(detail=f"cannot deregister the buffer at {self._ptr:#x}: "
                                f"{self._pending} asynchronous operation(s) still in flight")
        self._registered = 0
        _bindings.buf_deregister(self._ptr)


cdef class FileCore:
    """Registered hipFile handle of an open file (base of :class:`FileHandle`)."""

    def _hold(self, Py_ssize_t delta):
        """Count operations outside AsyncIOHandle (batch entries) using this file."""
        self._held += delta

    cdef void add_held(self, Py_ssize_t n) noexcept:
        """``_hold`` for compiled callers: ``n`` more (or fewer) operations use the file."""
        self._held += n

    cdef void note_write_end(self, long long wend) noexcept:
        """A staged write submitted on the file ends at ``wend`` (reads see that end)."""
        if wend > self._staged_write_end:
            self._staged_write_end = wend

    cdef void add_entering(self, Py_ssize_t n) noexcept:
        """``n`` more (or fewer) submissions past their checks, not yet in ``_held``."""
        self._entering += n

    def _hold_open(self):
        """Check the file as every submission does and count one more operation
        using it (``_hold(+1)``), in one step no close can come between: the hold
        of the synchronous, parallel and batch paths, released with ``_hold(-1)``.

        Raises
        ------
        ClosedFileError
            The file is closed or closing.
        HandleNotRegisteredError
            The driver was closed since the file was opened.
        """
        if (not self._is_open or (self._closing | _driver_closing)
                or (self._registered and self._epoch != c_driver_epoch)):
            check_file(self)
        self._held += 1

    def _held_count(self):
        """Operations outside AsyncIOHandle using this file (batch entries,
        parallel tasks, engine ranges, synchronous calls) and submissions
        under way (past the preamble, not yet counted)."""
        if self._held:
            _sweep_held()   # stream-engine ranges that ended are counted off here
        return self._held + self._entering

    def _begin_closing(self):
        """Refuse new submissions (ClosedFileError, "the file is closing")
        until :meth:`_end_closing`; counts the callers, so that one close
        giving up does not reopen the file under another still waiting."""
        self._closing += 1

    def _end_closing(self):
        """Undo one :meth:`_begin_closing`."""
        if self._closing > 0:
            self._closing -= 1

    @property
    def _is_closing(self):
        """Whether a close is waiting for this file's operations in flight."""
        return bool(self._closing and self._is_open)

    @property
    def pending(self):
        """Asynchronous operations on this file not yet observed complete."""
        return self._pending

    @property
    def handle(self):
        """The registered ``hipFileHandle_t`` as an int, or None when closed.

        An open file is registered with hipFile (``hipFileHandleRegister``,
        which opens the driver if it is not open) at the first call that
        goes through hipFile's own data path; reading this property is such
        a call.

        Raises
        ------
        HipFileException
            The registration failed (the file stays open, unregistered).
        """
        if not self._is_open:
            return None
        if not self._registered:
            ensure_registered(self)
        return <uintptr_t>self._fh

    @property
    def _open(self):
        """Whether the file is open (registered or not); no library call."""
        return bool(self._is_open)

    @property
    def _is_registered(self):
        """Whether the open file holds a hipFile registration now."""
        return bool(self._is_open and self._registered)

    def _attach_fd(self):
        """Mark the file open, not yet registered (see :attr:`handle`)."""
        self._fh = NULL
        self._registered = 0
        self._is_open = 1
        self._epoch = c_driver_epoch
        self._gen = fork_gen

    def _attach(self, uintptr_t fh):
        self._fh = <hipFileHandle_t>fh
        self._registered = 1
        self._is_open = 1
        self._epoch = c_driver_epoch
        self._gen = fork_gen
        try:
            _open_files[<uintptr_t><PyObject *>self] = _weak_ref(self)
        except TypeError:   # a subclass without weak references: not tracked
            pass

    def __dealloc__(self):
        # C only (no Python code runs in a finalizer here)
        _open_files.pop(<uintptr_t><PyObject *>self, None)

    @property
    def inherited(self):
        """Whether the file was opened in the parent of a ``fork`` (it is
        then unusable here; close() only drops it)."""
        return bool(self._is_open and self._gen != fork_gen)

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
        check_file(self)

    def _detach(self):
        """Mark closed and return the handle to deregister (None if not open).

        Raises InFlightError while operations on this file are in flight.
        """
        if not self._is_open:
            return None
        if self._gen != fork_gen:
            self._is_open = 0   # inherited through fork: the parent owns it
            return None
        if self._held:
            _sweep_held()
        if self._entering:
            raise InFlightError(detail=f"cannot close the file: {self._entering} "
                                "submission(s) under way in other threads; "
                                "close(wait=True) waits for them first")
        if self._held:
            raise InFlightError(detail=f"cannot close the file: {self._held} operation(s) "
                                "(batch entries, synchronous, parallel or stream-engine "
                                "reads or writes) still in flight; close(wait=True) "
                                "waits for them first")
        if self._pending and settle(self):
            raise InFlightError(detail=f"cannot close the file: {self._pending} asynchronous "
                                "operation(s) still in flight; close(wait=True) waits "
                                "for them first")
        self._is_open = 0
        if not self._registered:
            return None  # never registered: nothing to deregister
        self._registered = 0
        if self._epoch != c_driver_epoch:
            return None  # dropped with the driver: nothing to deregister
        return <uintptr_t>self._fh
