# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""StreamIOHandle: one range of the stream-ordered parallel engine, as seen
from Python (see ops.pyx for the invariants)."""

cimport cython

from cpython.ref cimport PyObject
from libc.stdint cimport int64_t, uint32_t, uintptr_t

from hipfile._lib._core cimport stream_handle
from hipfile._lib._decode import check_stream_handle
from hipfile._lib.engine.cengine cimport eng, hfe_io_fn, hfe_span
from hipfile._lib.engine.device cimport Flag, FlagPool, internal_stream, pool_for, wait_value32
from hipfile._lib.engine.device import MECHANISM_HOST_FUNCTIONS, MECHANISM_STREAM_MEMOPS
from hipfile._lib.engine cimport ops
from hipfile._lib.engine.ops cimport eng_parked, ParkedOp, unhold
from hipfile._lib._errors import error_for_result, name_file
from hipfile._lib._runtime cimport (
    CompletionBase, destroy_event, exiting, fork_gen, raise_forked, hipapi)
from hipfile._lib._wait cimport Deadline, wait_sliced
from hipfile._lib cimport _observe
from hipfile._lib._runtime import on_device

cdef double WAIT_SLICE = 0.05


cdef struct _op_wait_t:
    hfe_op *op
    const uint32_t *flag          # the stream's completion flag, or NULL
    uint32_t value


cdef int _op_wait_slice(void *p, double seconds) except -1:
    """One slice of :meth:`StreamIOHandle.wait`: the engine's side on its
    condition variable, then the stream's copies (the flag)."""
    cdef _op_wait_t *c = <_op_wait_t *>p
    cdef int ok
    with nogil:
        ok = eng.op_wait(c.op, seconds)
        if ok and c.flag != NULL:
            ok = eng.flag_wait(c.flag, c.value, seconds)
    return ok


cdef bint _wait_op(hfe_op *op, Flag flag, bint stream_completes, uint32_t value,
                   Deadline deadline) except -1:
    """Wait, in slices (interruptible), until an operation's engine side has
    ended and, where its stream completes it, the stream has written its
    flag; False when ``deadline`` passed first."""
    cdef _op_wait_t c
    c.op = op
    c.flag = flag.ptr if stream_completes and flag is not None else NULL
    c.value = value
    return wait_sliced(_op_wait_slice, &c, deadline, WAIT_SLICE)


# Handles of hipfile.pread/pwrite (engine_transfer): each sweep observes the
# ones that have ended, so their file and buffer are released whether or not
# anyone looks (as the thread pool's tasks release theirs when they end).
cdef list _watched = []


cdef int _sweep_watched() except -1:
    # under eng_sweep (one at a time); a handle watched while this runs (an
    # observed handle's references dropped can run Python code) stays
    cdef StreamIOHandle hd
    cdef list keep, todo
    cdef Py_ssize_t n = len(_watched)
    if n == 0:
        return 0
    todo = _watched[:n]
    keep = []
    for o in todo:
        hd = <StreamIOHandle>o
        if hd._gen != fork_gen:
            continue          # the parent's (never runs here): dropped
        if hd._observed:
            continue
        if hd._complete():
            hd._observe()
        else:
            keep.append(hd)
    _watched[:n] = keep
    return 0


ops.watched_sweep_hook = _sweep_watched


# Every submitted handle whose completion nobody has observed yet, linked
# through the handles themselves (borrowed references: a handle leaves the
# list when it is observed or freed), so that a close waiting for a file
# finds and observes them: "the engine knows when an operation ends".
cdef PyObject *_live_head = NULL


cdef bint _uses(object users, object obj):
    # users: a file, a tuple of files (a many-file operation), or a buffer core
    if users is obj:
        return 1
    return type(users) is tuple and obj in <tuple>users


cdef Py_ssize_t _engine_wait(object obj, Deadline deadline) except -1:
    """Wait until the engine's operations using ``obj`` (a file or a
    buffer; every one when None) have ended, within ``deadline``: live
    handles (observed here) and parked ones (released by the sweep).
    Returns how many are still running. Interruptible (wait_sliced)."""
    cdef StreamIOHandle hd
    cdef ParkedOp rec
    cdef Py_ssize_t left = 0
    cdef list todo = []
    cdef PyObject *p = _live_head
    while p != NULL:
        hd = <StreamIOHandle>p
        if hd._gen == fork_gen and (obj is None or _uses(hd._file, obj) or hd._bcore is obj):
            todo.append(hd)
        p = hd._live_next
    for o in todo:
        hd = <StreamIOHandle>o
        if hd._observed or hd.done():
            continue
        if deadline.passed() or not _wait_op(hd._op, hd._flag, hd._stream_completes, hd._value,
                                             deadline):
            left += 1
            continue
        hd._observe()
    for o in list(eng_parked):
        rec = <ParkedOp>o
        if rec.op == NULL or not (obj is None or _uses(rec.file, obj) or rec.bcore is obj):
            continue
        if deadline.passed() or not _wait_op(rec.op, rec.flag, rec.stream_completes, rec.value,
                                             deadline):
            left += 1
    ops.eng_sweep()
    return left


_observe.engine_wait_hook = _engine_wait


def watched_requests():
    """pread/pwrite requests on the engine not yet seen to have ended."""
    return sum(1 for o in _watched if not (<StreamIOHandle>o)._observed)


cdef class GateRef:
    """Returns a gate flag to its pool once no handle of the submission
    needs it (the gate has opened by then: every holder is done or parked)."""

    def __dealloc__(self):
        if self.flag is not None and self.flag.pool is not None:
            self.flag.pool.free.append(self.flag)
            self.flag = None


cdef StreamIOHandle new_handle(int opcode, const hfe_span *range, int device, uintptr_t stream,
                               FlagPool pool, int count):
    """A handle of a submission not yet made: ``count`` ranges over
    ``range`` (its size and offsets) of ``device`` behind ``stream``, with a
    completion flag of ``pool`` (its next value taken). Its engine operation
    comes next (:meth:`StreamIOHandle.make_op`)."""
    cdef StreamIOHandle hd = StreamIOHandle.__new__(StreamIOHandle)
    hd._flag = pool.take()
    hd._value = hd._flag.next_value()
    hd._opcode = opcode
    hd._size = range.len
    hd._file_offset = range.file_offset
    hd._buffer_offset = range.buffer_offset
    hd._device = device
    hd._stream = stream
    hd._count = count
    hd._mechanism = MECHANISM_STREAM_MEMOPS if pool.memops else MECHANISM_HOST_FUNCTIONS
    return hd


@cython.no_gc_clear
cdef class StreamIOHandle(CompletionBase):
    """One stream-ordered read or write run by the parallel engine.

    Returned by :meth:`FileHandle.pread_async`,
    :meth:`FileHandle.pwrite_async` and their ``_ranges`` forms. The
    operation starts once the stream given at submit has passed the submit
    point; the engine's threads then move the bytes with synchronous
    ``hipFileRead``/``hipFileWrite`` calls. Completion is observed on the
    host with :meth:`done`, :meth:`wait` and :attr:`bytes_done`, and released
    to GPU streams without blocking the host with :meth:`wait_on`.

    The handle keeps the file, buffer and stream alive until completion is
    observed; dropped earlier, it hands them to the engine, which releases
    them once the operation has finished.
    """

    def __cinit__(self):
        self._device = -1
        self._gen = fork_gen

    def __init__(self):
        raise TypeError("StreamIOHandle objects are returned by FileHandle.pread_async "
                        "and friends")

    cdef int make_op(self, size_t task, hfe_io_fn fn, void *fh, void *base) except -1:
        """Make the handle's engine operation over its range
        (``hfe_op_new``) in chunks of ``task`` bytes; ``fn`` (NULL: the
        staged path, whose read's stream writes its flag) is the worker
        path's call, ``fn(fh, base, ...)`` (``hfe_op_set_io``). Raises
        MemoryError."""
        cdef hfe_span whole
        whole.len = self._size
        whole.file_offset = self._file_offset
        whole.buffer_offset = self._buffer_offset
        self._op = eng.op_new(self._opcode, &whole, self._device, task, self._flag.ptr,
                              self._value)
        if self._op == NULL:
            raise MemoryError()
        if fn != NULL:
            eng.op_set_io(self._op, fn, fh, base)
        self._stream_completes = fn == NULL and self._opcode == 0
        return 0

    cdef int set_spans(self, const hfe_span *spans, int n) except -1:
        """Make the operation one group of ``n`` ranges
        (``hfe_op_set_spans``); its size becomes their total. Raises
        MemoryError."""
        cdef int i
        cdef size_t total = 0
        if eng.op_set_spans(self._op, spans, n):
            raise MemoryError()
        for i in range(n):
            total += spans[i].len
        self._size = total
        return 0

    cdef void set_gate(self, GateRef gate, bint staged):
        """The submission's gate flag (shared; None: none) and whether its
        bytes move through the staging ring."""
        self._gate = gate
        self._staged = staged

    cdef void hand_over(self, object files, object bcore, object buffer, object stream_owner):
        """Submitted: the handle holds the file(s) (one, or a tuple), the
        buffer's core and owner and the stream until its completion is
        observed (the caller has counted the file and buffer as held)."""
        self._submitted = 1
        self._file = files
        if type(files) is not tuple:
            self._path = getattr(files, "_path", None)
        self._bcore = bcore
        self._buffer = buffer
        self._stream_owner = stream_owner
        self.link_live()

    cdef void _abandon(self):
        # never submitted: give back what the submission took
        if self._flag is not None and not self._submitted:
            self._flag.pool.free.append(self._flag)
            self._flag = None
        if self._op != NULL and not self._submitted:
            eng.op_decref(self._op)
            self._op = NULL

    cdef void link_live(self):
        """Enter the live list (a submitted handle, see ``_live_head``)."""
        global _live_head
        if self._live:
            return
        self._live = 1
        self._live_prev = NULL
        self._live_next = _live_head
        if _live_head != NULL:
            (<StreamIOHandle>_live_head)._live_prev = <PyObject *>self
        _live_head = <PyObject *>self

    cdef void _unlink_live(self):
        global _live_head
        if not self._live:
            return
        self._live = 0
        if self._live_prev != NULL:
            (<StreamIOHandle>self._live_prev)._live_next = self._live_next
        else:
            _live_head = self._live_next
        if self._live_next != NULL:
            (<StreamIOHandle>self._live_next)._live_prev = self._live_prev
        self._live_prev = self._live_next = NULL

    cdef void _observe(self):
        if self._observed or not self._submitted:
            return
        self._observed = 1
        self._unlink_live()
        unhold(self._file, self._bcore)
        self._file = None
        self._bcore = None
        self._buffer = None
        self._stream_owner = None
        self._gate = None
        if self._flag is not None:
            self._flag.pool.free.append(self._flag)
            self._flag = None

    def __dealloc__(self):
        cdef ParkedOp rec
        self._unlink_live()
        if self._op == NULL:
            return
        if self._gen != fork_gen or exiting:
            # the parent's operation (its engine threads are not here), or
            # interpreter exit: drop the reference only, never wait or park
            self._op = NULL
            return
        if self._submitted and not self._observed:
            if not self._complete():
                rec = ParkedOp.__new__(ParkedOp)
                rec.op = self._op        # the handle's reference moves to the record
                self._op = NULL
                rec.file = self._file
                rec.bcore = self._bcore
                rec.flag = self._flag
                rec.value = self._value
                rec.stream_completes = self._stream_completes
                rec.keep = (self._buffer, self._stream_owner, self._gate)
                eng_parked.append(rec)
                self._destroy_event()
                return
            self._observe()
        self._destroy_event()
        eng.op_decref(self._op)
        self._op = NULL

    cdef int watch(self) except -1:
        """Let every sweep observe this handle once it has ended (see
        ``_watched``)."""
        _watched.append(self)
        return 0

    cdef void _destroy_event(self):
        if self._event is not None:
            destroy_event(self._event)
            self._event = None

    # -- values ---------------------------------------------------------

    @property
    def opcode(self):
        """0 for a read, 1 for a write."""
        return self._opcode

    @property
    def size(self):
        """Bytes requested."""
        return self._size

    @property
    def file_offset(self):
        """File offset of the range."""
        return self._file_offset

    @property
    def buffer_offset(self):
        """Buffer offset of the range."""
        return self._buffer_offset

    @property
    def stream(self):
        """The stream handle (int) the operation was ordered after."""
        return self._stream

    @property
    def device(self):
        """The buffer's device (worker threads make it current)."""
        return self._device

    @property
    def mechanism(self):
        """How completion reaches GPU streams: ``"stream-memory-operations"``
        or ``"host-functions"``."""
        return self._mechanism

    @property
    def data_path(self):
        """How the bytes move: ``"staged"`` (the engine's threads read and
        write the file with POSIX calls through pinned staging memory, the
        copies to or from device memory run on a stream) or ``"hipfile"``
        (the engine's threads call ``hipFileRead``/``hipFileWrite``)."""
        return "staged" if self._staged else "hipfile"

    @property
    def ranges(self):
        """The number of ranges the operation covers (more than 1 for
        :meth:`FileHandle.pread_async_scatter` and
        :meth:`FileHandle.pwrite_async_gather`)."""
        return self._count

    @property
    def calls(self):
        """File calls made so far (``hipFileRead``/``hipFileWrite``, or on
        the staged path ``pread``/``pwrite``)."""
        return eng.op_calls(self._op) if self._op != NULL else 0

    @property
    def bytes_done(self):
        """Bytes moved, or a negative error code, once the operation has
        completed; ``None`` while it has not."""
        if not self.done():
            return None
        return eng.op_result(self._op, NULL)

    def _flag_values(self):
        """For diagnosis: the values now in the completion flag and in the
        gate flag, each with the value that opens it, as
        ``{"complete": (now, opens_at), "gate": (now, opens_at) or None}``;
        ``None`` once the handle has given its flags back (observed done)."""
        cdef Flag g
        if self._flag is None:
            return None
        gate = None
        if self._gate is not None:
            g = (<GateRef>self._gate).flag
            if g is not None:
                gate = (g.ptr[0], g.value)
        return {"complete": (self._flag.ptr[0], self._value), "gate": gate}

    # -- completion -----------------------------------------------------

    cdef bint _complete(self):
        """Engine side finished and, for a staged read, the stream's copies
        too (its completion flag written); no HIP call."""
        if self._op == NULL or not eng.op_done(self._op):
            return 0
        if self._stream_completes and self._flag is not None:
            return eng.flag_reached(self._flag.ptr, self._value)
        return 1

    def done(self):
        """Whether the operation has completed (never blocks, no HIP call).

        Raises
        ------
        ForkedProcessError
            The operation was submitted by the parent of this (forked)
            process: it never runs here.
        """
        if self._observed:
            return True
        if self._gen != fork_gen:
            raise_forked("this stream-engine operation")
        if self._complete():
            self._observe()
            return True
        return False

    def wait(self, timeout=None):
        """Block until the operation completes; return the bytes moved.

        ``timeout`` in seconds, None for no limit (the rule of every wait:
        a number >= 0 or None). The wait can be interrupted (Ctrl-C) and
        loses nothing: a later call returns the result.

        Raises
        ------
        TimeoutError
            Not complete within ``timeout``.
        OSError, HipFileException
            A chunk of the range failed: the first error decoded.
        TypeError, ValueError
            A bad ``timeout`` (bools refused).
        """
        cdef Deadline deadline = Deadline(timeout)
        if not self.done():
            if not _wait_op(self._op, self._flag, self._stream_completes, self._value,
                            deadline):
                raise TimeoutError(f"operation not complete after {timeout} s")
        self._observe()
        return self._result()

    cdef object _result(self):
        cdef int err_no = 0
        cdef int64_t n = eng.op_result(self._op, &err_no)
        if n >= 0:
            return n
        if self._staged:     # the engine's own POSIX calls on the staging ring
            func = "pread" if self._opcode == 0 else "pwrite"
        else:
            func = "hipFileRead" if self._opcode == 0 else "hipFileWrite"
        raise name_file(error_for_result(n, err_no, func), self._path)

    def wait_on(self, stream):
        """Make ``stream`` wait for this operation, without blocking the host.

        Work enqueued on ``stream`` after this call runs once the operation
        has completed (failed or not: check :meth:`wait` on the host for
        errors); work enqueued before is not delayed. Uses
        ``hipStreamWaitValue32`` on the operation's completion flag. Where
        stream waits are unsupported, it waits on the host instead (no host
        function: a host function blocked on a range can deadlock with a
        device-wide synchronisation made meanwhile).

        Raises
        ------
        TypeError
            ``stream`` is not a stream.
        ValueError
            ``stream`` is an int that HIP does not know as a stream
            (``hipStreamQuery``).
        HipRuntimeError
            The runtime refused the wait.

        See Also
        --------
        hipStreamWaitValue32
        """
        cdef uintptr_t sh = stream_handle(stream)
        if type(stream) is int:
            check_stream_handle(sh)   # a made-up handle is refused
        self._release_to(sh)
        return None

    cdef int _release_to(self, uintptr_t sh) except -1:
        if self.done():
            return 0      # nothing left to wait for
        if self._mechanism == MECHANISM_STREAM_MEMOPS:   # as it was submitted
            wait_value32(sh, self._flag.devptr, self._value)
            return 0
        self.wait()
        return 0

    def record_event(self):
        """A HIP event (HIP-Python ``hipEvent_t``) that completes once this
        operation has, for ``hipStreamWaitEvent`` on another stream. Owned
        by the handle. (:meth:`wait_on` is cheaper.)

        See Also
        --------
        hipEventRecord
        """
        if self._event is not None:
            return self._event
        h = hipapi()
        cdef FlagPool pool = pool_for(self._device)
        stream = internal_stream(pool)
        with on_device(self._device):
            ev = h.check(h.hip.hipEventCreateWithFlags(h.hip.hipEventDisableTiming),
                         "hipEventCreateWithFlags")
            try:
                self.wait_on(stream)
                h.check(h.hip.hipEventRecord(ev, stream), "hipEventRecord")
            except BaseException:
                h.hip.hipEventDestroy(ev)
                raise
        self._event = ev
        return ev

    def __repr__(self):
        kind = "read" if self._opcode == 0 else "write"
        state = "pending"
        if self._op != NULL and eng.op_done(self._op):
            state = f"done bytes_done={eng.op_result(self._op, NULL)}"
        return (f"<StreamIOHandle {kind} size={self._size} file_offset={self._file_offset} "
                f"buffer_offset={self._buffer_offset} stream=0x{self._stream:x} {state}>")
