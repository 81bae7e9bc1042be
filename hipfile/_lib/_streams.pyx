# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The core of Stream: a stream's handle and its registration, shared by the
Stream objects and the operations on the stream (``StreamState``), and the
registered streams by handle.

A registration is owned by the StreamCore that made it; in a forked child an
inherited one is dropped, never passed to the library, and a registration
older than the driver's epoch may already be gone (see _runtime.pyx).
"""

from hipfile._lib._errors import (
    BAD_STREAM_CODES, HipRuntimeError, InFlightError, InvalidValueError, error_name,
    stream_error)
from hipfile._lib import _bindings
from hipfile._lib._runtime cimport (
    HIP_ERROR_NOT_READY, HIP_SUCCESS, c_driver_epoch, fork_gen, raise_forked, stream_query)


cdef Py_ssize_t settle(object obj) except -1:
    """Operations using ``obj`` still in flight, once completed ones have
    been observed (0 until _observe sets the hook)."""
    return settle_hook(obj) if settle_hook != NULL else 0


cdef class StreamState:
    """Registration state of one stream, shared by its Stream objects and
    the handles of operations on it."""


stream_states = {}     # handle -> StreamState (registered streams)


cdef class StreamCore:
    """Handle and registration state of a stream (base of :class:`Stream`)."""

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
                    and self._state.gen != fork_gen)

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
            The library refused: the handle names no stream HIP knows, the
            stream is registered already (by another object), or the flags
            are invalid. The message says which, where the package can tell.
        InvalidStreamError
            The library passed on HIP's answer for a handle that names no
            stream (AMD's hipFile does); the message says so.

        See Also
        --------
        hipFileStreamRegister
        """
        if self._state is not None and self._state.registered:
            if self._state.gen != fork_gen:
                raise_forked("this Stream")
            return
        try:
            _bindings.stream_register(self._handle, self._flags)
        except InvalidValueError as e:
            why = self._refusal()
            if not why:
                raise
            raise InvalidValueError(e.hipfile_err, e.hip_err, "hipFileStreamRegister",
                                    why) from None
        except HipRuntimeError as e:
            # a library that asks HIP about the stream (AMD's) passes HIP's
            # answer on: an unknown handle is said to be one
            if type(e) is HipRuntimeError and e.hip_err in BAD_STREAM_CODES and self._handle:
                raise stream_error(e.hip_err, "hipFileStreamRegister", self._handle) from None
            raise
        cdef StreamState st = StreamState.__new__(StreamState)
        st.handle = self._handle
        st.flags = self._flags
        st.registered = 1
        st.epoch = c_driver_epoch
        st.gen = fork_gen
        self._state = st
        stream_states[self._handle] = st

    def _refusal(self):
        """Why the library may have refused to register this stream, or ''."""
        cdef int err
        if self._handle in stream_states:
            return (f"the stream {self._handle:#x} is registered already, by another "
                    "hipfile.Stream object")
        if self._handle != 0:
            err = stream_query(self._handle)
            if err != HIP_SUCCESS and err != HIP_ERROR_NOT_READY:
                return (f"the stream {self._handle:#x} is not a valid stream: hipStreamQuery "
                        f"answers {error_name(err)} (a handle never created, or destroyed)")
        return ""

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
        cdef StreamState st = self._state
        if st is None or not st.registered:
            return
        if st.gen != fork_gen:
            # inherited through fork: the parent owns the registration
            st.registered = 0
            self._state = None
            return
        if st.pending and settle(st):
            raise InFlightError(detail=f"cannot deregister stream {self._handle:#x}: "
                                f"{st.pending} asynchronous operation(s) still in flight")
        st.registered = 0
        if stream_states.get(self._handle) is st:
            del stream_states[self._handle]
        self._state = None
        if st.epoch == c_driver_epoch:
            _bindings.stream_deregister(self._handle)
            return
        # the driver was closed since: some libraries drop stream
        # registrations with it, others keep them
        try:
            _bindings.stream_deregister(self._handle)
        except InvalidValueError:
            pass
