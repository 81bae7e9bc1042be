# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""AsyncIOHandle and the submit path of hipFileReadAsync/hipFileWriteAsync.

Invariants
- ``_submit`` runs with the GIL held from the slot take to the link into
  the pending list; only the library call itself runs without the GIL.
- A submitted handle keeps its file, buffer and stream alive until its
  completion is observed (``_observed``), then drops them at once.
- A handle dropped before that parks its slot in the pool (never blocks in
  the garbage collector) and enqueues a host function that marks it done.
- The pending list holds borrowed pointers: a handle unlinks itself before
  it dies.
- A stream that can no longer be queried (destroyed behind the binding's
  back) ends its handles as *lost*: their file, buffer and stream are
  released, the slot is never reused before ``hipDeviceSynchronize``, and
  ``wait()`` raises HipRuntimeError.
- Completion already observed (``_complete``) or marked (``SLOT_DONE``) is
  read without touching the stream.
- Handles are not tracked by the cyclic GC (submit speed); cycles through
  them are broken by observing completion (see _observe.pyx).
"""

cimport cython
cimport libc.errno
import os

from cpython.ref cimport PyObject
from libc.stdint cimport uintptr_t

from hipfile._lib.chipfile cimport *
from hipfile._lib._bindings cimport bind, p_hipFileReadAsync, p_hipFileWriteAsync
from hipfile._lib._core cimport (
    FIXED_BUF_OFFSET, FIXED_FILE_OFFSET, FIXED_FILE_SIZE, c_as_index, BufferCore,
    ensure_registered, FileCore, io_range, release_refs, submit_preamble)
from hipfile._lib._streams cimport StreamState
from hipfile._lib._pool cimport (
    SLOT_DONE, SLOT_PARKED, Slots, give_back, launch_marker, lose_parked, Parked, parked_slots, slot_ptr,
    slot_state_ptr, take_slot)
from hipfile._lib._runtime cimport (
    HIP_ERROR_NOT_READY, HIP_EVENT_DISABLE_TIMING, HIP_SUCCESS, c_event_create, c_event_free,
    c_event_rec, destroy_event, event_query, EventType, exiting, fork_gen, raise_forked, hip_fail,
    hipapi, load_hip_capi, pointer_device, PointerType, stream_query, CompletionBase)
from hipfile._lib._wait cimport WAIT_EVENT, c_as_timeout, wait_interruptible

from hipfile._lib import _runtime
from hipfile._lib._errors import HipRuntimeError, raise_result, raise_status, stream_error
from hipfile._lib._runtime import on_device

# Intrusive list of handles submitted and not yet observed complete
# (borrowed pointers; a handle unlinks itself before it dies).
pending_head = NULL


cdef inline hipFileReadAsync_t _async_fn(int opcode) except NULL:
    """hipFileReadAsync or hipFileWriteAsync (the two share one signature)."""
    if opcode == 0:
        if p_hipFileReadAsync != NULL:
            return p_hipFileReadAsync
        return <hipFileReadAsync_t>bind(b"hipFileReadAsync")
    if p_hipFileWriteAsync != NULL:
        return <hipFileReadAsync_t>p_hipFileWriteAsync
    return <hipFileReadAsync_t>bind(b"hipFileWriteAsync")


cdef inline str _fn_name(int opcode):
    """The C function of an opcode, as errors name it."""
    return "hipFileReadAsync" if opcode == 0 else "hipFileWriteAsync"


cdef int _not_enqueued(FileCore f, AsyncIOHandle h, hipFileError_t e, int err_no,
                       long long appended, size_t nbytes, int opcode, uintptr_t sh) except -1:
    """The library refused the submission: the slot goes back (it keeps no
    pointer to it), an append's range is given back, and the error raised."""
    give_back(h._slot)
    h._slot = -1
    h._s = NULL
    if appended >= 0:
        f._append.failed(appended, nbytes)
    if e.err == -1 and err_no:
        raise OSError(err_no, os.strerror(err_no))
    if e.err == 5011:     # hipFileHipDriverError: an unknown stream is said to be one
        raise stream_error(e.hip_drv_err, _fn_name(opcode), sh)
    raise_status(e.err, e.hip_drv_err, _fn_name(opcode))
    return -1


cdef inline int _count_pending(AsyncIOHandle h, FileCore f, object buf_owner,
                               StreamState st) except -1:
    """An enqueued operation counted on its file, buffer and stream, and
    linked into the pending list."""
    global pending_head
    f._pending += 1
    if isinstance(buf_owner, BufferCore):
        (<BufferCore>buf_owner)._pending += 1
    if st is not None:
        st.pending += 1
    h._next = pending_head
    h._prev = NULL
    if pending_head != NULL:
        (<AsyncIOHandle>pending_head)._prev = <PyObject *>h
    pending_head = <PyObject *>h
    return 0


cdef AsyncIOHandle _submit(FileCore f, int opcode, object buffer, object size,
                           object file_offset, object buffer_offset, object stream):
    cdef hipFileReadAsync_t fn
    cdef uintptr_t base
    cdef size_t length
    cdef PyObject *state = NULL
    cdef StreamState st = None
    cdef uintptr_t sh
    cdef hoff_t foff, boff
    cdef size_t nbytes
    cdef hipFileError_t e
    cdef int err_no = 0
    cdef Slots *s
    cdef AsyncIOHandle h
    cdef long long appended = -1

    fn = _async_fn(opcode)
    if opcode == 1:
        # a read-only handle: the one error of every write path, before
        # the library is asked (it would fail when the operation runs)
        if f._descriptors is not None:
            f._descriptors.refuse_read_only()
    buf_owner = submit_preamble(f, buffer, stream, &base, &length, &sh, &state)
    try:   # counted in f._entering by the preamble until counted in _pending
        if state != NULL:
            st = <StreamState>state
        given = file_offset is not None
        if not given:
            file_offset = 0
        if opcode == 1 and f._append is not None:
            # an append handle: the range at the end of the file, taken now (a
            # given offset must be that end; FileHandle.appends)
            io_range(length, size, file_offset, buffer_offset, &nbytes, &foff, &boff, buf_owner)
            appended = f._append.reserve(foff if given else None, nbytes)
            file_offset = appended
        io_range(length, size, file_offset, buffer_offset, &nbytes, &foff, &boff, buf_owner)

        if not f._registered:
            ensure_registered(f)
        h = AsyncIOHandle.__new__(AsyncIOHandle)
        h._slot = take_slot()
        s = slot_ptr(h._slot)
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
            _not_enqueued(f, h, e, err_no, appended, nbytes, opcode, sh)
        h._opcode = opcode
        h._gen = fork_gen
        h._submitted = 1
        h._file = f
        h._buffer = buf_owner
        if stream is not None and type(stream) is not int:
            h._stream_owner = stream
        h._stream = sh
        h._base = base
        h._state = st
        h._flags = st.flags if st is not None else 0
        h._submitted_size = nbytes
        h._buf_len = length
        _count_pending(h, f, buf_owner, st)
        return h
    finally:
        f._entering -= 1


@cython.annotation_typing(False)    # the hints are for help() and IDEs, not Cython
def read_async(FileCore self, buffer: Any, size: int | None = None, file_offset: int = 0,
               buffer_offset: int = 0, stream: Any = 0) -> AsyncIOHandle:
    """Enqueue a read of ``size`` bytes at ``file_offset`` into ``buffer``
    at ``buffer_offset`` on ``stream``; returns an :class:`AsyncIOHandle`.

    ``buffer`` is a :class:`Buffer` or anything :class:`Buffer` accepts;
    ``stream`` a :class:`Stream`, anything it accepts, or an int. The
    call returns once the operation is enqueued. The handle keeps the
    file, buffer and stream alive until completion is observed.

    Raises
    ------
    ClosedFileError
        The file is closed, or closing: ``close(wait=True)`` (or the end of
        its ``with`` block) in another thread waits for the operations in
        flight and refuses new ones (also a ValueError).
    ValueError
        The range does not fit the buffer.
    HipFileException
        The library refused the submission.

    See Also
    --------
    hipFileReadAsync
    """
    return _submit(self, 0, buffer, size, file_offset, buffer_offset, stream)


@cython.annotation_typing(False)    # the hints are for help() and IDEs, not Cython
def write_async(FileCore self, buffer: Any, size: int | None = None,
                file_offset: int | None = None, buffer_offset: int = 0,
                stream: Any = 0) -> AsyncIOHandle:
    """Enqueue a write of ``size`` bytes from ``buffer`` at
    ``buffer_offset`` to the file at ``file_offset`` on ``stream``; returns
    an :class:`AsyncIOHandle`. See :meth:`read_async`.

    ``file_offset`` left out (None) is 0, or on an append handle
    (``FileHandle.appends``) the end of the file, taken when the call is
    made (the end of earlier appends still in flight through the handle
    included), where a given ``file_offset`` must be that end
    (:class:`ValueError` otherwise).

    See Also
    --------
    hipFileWriteAsync
    """
    return _submit(self, 1, buffer, size, file_offset, buffer_offset, stream)


cdef void _unlink(AsyncIOHandle h):
    global pending_head
    if h._prev != NULL:
        (<AsyncIOHandle>h._prev)._next = h._next
    elif pending_head == <PyObject *>h:
        pending_head = h._next
    if h._next != NULL:
        (<AsyncIOHandle>h._next)._prev = h._prev
    h._prev = NULL
    h._next = NULL


# Not tracked by the cyclic GC (``no_gc``), which keeps the submit path
# short: a cycle through a handle (``fh.h = fh.read_async(...)``) is broken
# once its completion is observed, by the GC callback in _observe.pxi.
@cython.no_gc
@cython.freelist(64)
cdef class AsyncIOHandle(CompletionBase):
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

    def __cinit__(self):
        self._slot = -1
        self._s = NULL

    def __init__(self, size=0, file_offset=0, buffer_offset=0):
        cdef size_t n
        cdef hoff_t f, b
        if size is None:
            raise TypeError("size must be an int, not None")
        io_range(<size_t>-1, size, file_offset, buffer_offset, &n, &f, &b)
        self._gen = fork_gen
        if self._slot < 0:
            self._slot = take_slot()
            self._s = slot_ptr(self._slot)
        self._s.size = n
        self._s.file_offset = f
        self._s.buffer_offset = b
        self._s.bytes_done = 0
        self._submitted_size = n

    cdef bint _uses(self, obj):
        return obj is self._file or obj is self._buffer or obj is self._state

    cdef void _observed(self):
        if self._complete or not self._submitted:
            return
        self._complete = 1
        _unlink(self)
        release_refs(self._file, self._buffer, self._state)
        self._file = None
        self._buffer = None
        self._stream_owner = None
        self._state = None

    cdef void _abandon(self, int err):
        # The stream (or event) can no longer be queried: release what the
        # operation uses; the slot stays out of use (see _park_lost).
        self._lost = err if err != 0 else -1
        self._stream_gone = self._event is None
        self._observed()

    cdef int _prove_complete(self) except -1:
        # Lost to a stream that can no longer be queried, with no event
        # recorded behind the operation: once the device holding the buffer
        # has synchronised, it has passed every operation submitted before,
        # those of destroyed streams included, so the count in the slot is
        # final. Without that proof the handle stays lost.
        cdef int dev
        if not self._lost or not self._stream_gone:
            return 0
        h = hipapi()
        dev = pointer_device(self._base)
        try:
            with on_device(dev):
                err = int(h.hip.hipDeviceSynchronize()[0])
        except Exception:
            return 0
        if err == HIP_SUCCESS:
            self._lost = 0
            self._stream_gone = 0
        return 0

    def __dealloc__(self):
        cdef Parked rec
        if self._slot < 0 or self._gen != fork_gen:
            return   # inherited through fork: the parent owns the slot
        if self._lost:
            rec = Parked.__new__(Parked)
            rec.event = self._event
            rec.lost = 1
            slot_state_ptr(self._slot)[0] = SLOT_PARKED
            parked_slots[self._slot] = rec
            return
        if not self._submitted or self._complete:
            give_back(self._slot)   # first: the slot never stays without owner
            if self._event is not None:
                destroy_event(self._event)
            return
        if exiting:
            return   # in flight at exit: touch nothing
        # Dropped before completion was observed: park the slots (and the
        # objects the operation uses) until a host function enqueued behind
        # the operation marks them done. No blocking here.
        _unlink(self)
        cdef unsigned char *state = slot_state_ptr(self._slot)
        state[0] = SLOT_PARKED
        rec = Parked.__new__(Parked)
        rec.file = self._file
        rec.buffer = self._buffer
        rec.stream_state = self._state
        rec.event = self._event
        rec.stream = self._stream
        parked_slots[self._slot] = rec
        try:
            load_hip_capi()
        except BaseException:
            pass
        if launch_marker(self._stream, state) != HIP_SUCCESS:
            # Could not enqueue a marker: settle now if the stream is idle,
            # otherwise the slots stay parked (never reused).
            try:
                err = stream_query(self._stream)
                if err == HIP_SUCCESS:
                    state[0] = SLOT_DONE
                elif err != HIP_ERROR_NOT_READY:
                    lose_parked(rec)
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
            hipapi()
            self._slots_ptr = PointerType(<uintptr_t>self._s)
        return self._slots_ptr

    cdef long long _settable(self, object value, unsigned fixed_flag, str name) except? -1:
        # a new size or offset: an int >= 0, while the operation has not
        # completed and the stream did not fix it at submit
        cdef long long n = c_as_index(value, name)
        self._check_settable(fixed_flag, name)
        if n < 0:
            raise ValueError(f"{name} must be >= 0, got {n}")
        return n

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
        value = self._settable(value, FIXED_FILE_SIZE, "size")
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
        self._s.file_offset = self._settable(value, FIXED_FILE_OFFSET, "file_offset")

    @property
    def buffer_offset(self):
        """Buffer offset used when the operation runs."""
        return self._s.buffer_offset

    @buffer_offset.setter
    def buffer_offset(self, value):
        value = self._settable(value, FIXED_BUF_OFFSET, "buffer_offset")
        if self._submitted and <size_t>value + self._s.size > self._buf_len:
            raise ValueError(f"buffer_offset {value} with size {self._s.size} would overrun "
                             f"the {self._buf_len}-byte buffer")
        self._s.buffer_offset = value

    @property
    def bytes_done(self):
        """Bytes moved, or a negative error code, once the operation has
        completed; ``None`` while it has not (not yet valid), and for an
        operation whose stream was destroyed before its completion was
        observed (its outcome is undefined)."""
        if self._lost:
            return None
        if self._complete or not self._submitted:
            return self._s.bytes_done
        if self.done():
            return self._s.bytes_done
        return None

    # -- completion -----------------------------------------------------

    def done(self):
        """Whether the operation has completed (never blocks).

        Queries the stream; if it is busy with later work, records an event
        behind the operation once and queries that. Completion already
        observed is answered without touching the stream. If the stream can
        no longer be queried (destroyed before completion was observed), the
        handle ends as lost: True here, and :meth:`wait` raises.

        Raises
        ------
        ForkedProcessError
            The operation was submitted in the parent of a ``fork``.
        """
        if self._complete or not self._submitted:
            return bool(self._complete)
        if self._gen != fork_gen:
            raise_forked("this AsyncIOHandle")
        if self._event is None:
            if self._answered(stream_query(self._stream)):
                return True
            self._record()
        return bool(self._answered(event_query(self._event)))

    cdef bint _answered(self, int err) except -1:
        # a query's answer: complete (observed now), gone (lost), or pending
        if err == HIP_SUCCESS:
            self._observed()
            return 1
        if err != HIP_ERROR_NOT_READY:
            self._abandon(err)
            return 1
        return 0

    cdef _record(self):
        cdef void *ev = NULL
        cdef int err = 0
        load_hip_capi()
        hipapi()      # the event is handed out as HIP-Python's hipEvent_t
        if c_event_create != NULL and c_event_rec != NULL and c_event_free != NULL:
            # C only from the creation to the owner: Ctrl-C cannot orphan it
            with nogil:
                err = c_event_create(&ev, HIP_EVENT_DISABLE_TIMING)
                if err == HIP_SUCCESS:
                    err = c_event_rec(ev, <void *>self._stream)
                    if err != HIP_SUCCESS:
                        c_event_free(ev)
            if err != HIP_SUCCESS:
                hip_fail(err, "hipEventRecord")
            if self._event is not None:
                c_event_free(ev)   # another thread recorded one meanwhile
                return
            self._event = EventType.fromObj(<uintptr_t>ev)
            return
        h = hipapi()
        ev_obj = h.check(h.hip.hipEventCreateWithFlags(h.hip.hipEventDisableTiming),
                         "hipEventCreateWithFlags")
        try:
            h.check(h.hip.hipEventRecord(ev_obj, self._stream), "hipEventRecord")
        except BaseException:
            h.hip.hipEventDestroy(ev_obj)
            raise
        if self._event is not None:
            # another thread recorded one while the HIP calls let it run
            h.hip.hipEventDestroy(ev_obj)
            return
        self._event = ev_obj

    cdef int _wait_complete(self, double timeout_s) except -1:
        # Wait (interruptibly) until completion is observed or the handle is
        # lost; returns 1 when done, 0 on timeout. An interrupted wait
        # changes nothing: the next call starts over.
        cdef int err
        if self._complete or not self._submitted:
            return 1
        if self.done():
            return 1
        err = wait_interruptible(WAIT_EVENT, <uintptr_t>int(self._event), timeout_s)
        if err == HIP_ERROR_NOT_READY:
            return 0
        if err == HIP_SUCCESS:
            self._observed()
        else:
            self._abandon(err)
        return 1

    def record_event(self):
        """A HIP event (HIP-Python ``hipEvent_t``) that completes once this
        operation has run, for ``hipStreamWaitEvent`` on another stream.

        Recorded on first call (behind everything enqueued on the stream so
        far, so record it right after submitting). Owned by the handle.

        Raises
        ------
        ValueError
            The handle was never submitted (one made directly holds values
            for the raw layer only).
        ForkedProcessError
            The operation was submitted in the parent of a ``fork``.

        See Also
        --------
        hipEventRecord
        """
        if not self._submitted:
            raise ValueError("the handle was never submitted")
        if self._gen != fork_gen:
            raise_forked("this AsyncIOHandle")
        if self._event is None:
            self._record()
        return self._event

    def wait(self, timeout=None):
        """Block until the operation completes; return the bytes moved.

        The wait polls the stream (or an event behind the operation) with a
        backoff and checks for signals between polls: Ctrl-C raises
        ``KeyboardInterrupt`` within a few milliseconds, and a later call
        still returns the result.

        Parameters
        ----------
        timeout
            Seconds to wait, or None for no limit.

        Raises
        ------
        ValueError
            The handle was never submitted (as :meth:`record_event`).
        TimeoutError
            Not complete within ``timeout``.
        TypeError, ValueError
            ``timeout`` is not a number >= 0 or None (bools refused).
        OSError, HipFileException
            The operation failed when it ran (a negative count).
        HipRuntimeError
            The stream was destroyed (or became invalid) before completion
            was observed, and completion cannot be proven: an event recorded
            behind the operation (:meth:`record_event`, or one that
            :meth:`done` recorded while it was pending) still answers, and
            without one the device holding the buffer is synchronised
            (``hipDeviceSynchronize``), after which the count is final;
            only if that fails is whether it ran undefined.
        ForkedProcessError
            The operation was submitted in the parent of a ``fork``.

        See Also
        --------
        hipStreamQuery, hipEventQuery
        """
        cdef double t = c_as_timeout(timeout)
        if not self._submitted:
            raise ValueError("the handle was never submitted")
        if not self._complete:
            if self._gen != fork_gen:
                raise_forked("this AsyncIOHandle")
            if not self._wait_complete(t):
                raise TimeoutError(f"operation not complete after {timeout} s")
        if self._lost:
            self._prove_complete()
        return self._result()

    cdef object _result(self):
        if self._lost:
            raise HipRuntimeError(
                hip_err=self._lost if self._lost > 0 else 0, func="hipStreamQuery",
                detail="the stream was destroyed (or became invalid) before this "
                       "operation's completion was observed; whether it ran is undefined")
        cdef ssize_t n = self._s.bytes_done
        if n >= 0:
            return n
        raise_result(n, 0, _fn_name(self._opcode), deferred=True)

    def __repr__(self):
        kind = "read" if self._opcode == 0 else "write"
        if not self._submitted:
            state = "unsubmitted"
        elif self._lost:
            state = "lost (stream destroyed)"
        elif self._complete:
            state = f"done bytes_done={self._s.bytes_done}"
        else:
            state = "pending"
        return (f"<AsyncIOHandle {kind} size={self._s.size} "
                f"file_offset={self._s.file_offset} buffer_offset={self._s.buffer_offset} "
                f"stream=0x{self._stream:x} {state}>")


def _after_fork_in_child():
    # the parent's pending handles: their completion is never observed here
    global pending_head
    pending_head = NULL


_runtime.on_fork_child(_after_fork_in_child)
