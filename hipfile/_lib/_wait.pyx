# cython: language_level=3
"""The one timeout rule and the one interruptible wait.

- ``c_as_timeout`` (``as_timeout`` in Python) is the rule of every wait's
  ``timeout``: a real number >= 0 or None.
- ``Deadline`` counts every wait down.
- Every blocking wait goes through ``wait_sliced``: slices of a few
  milliseconds with the GIL released, signals checked between them, so
  Ctrl-C is seen within a slice and nothing blocks in C for longer.
  ``wait_interruptible`` is its form for HIP events, streams and flags
  (queries with a backoff); the engine's handles wait on its condition
  variable in slices; Python's ``threading.Event`` waits go through
  ``hipfile._interop.wait_event``.
"""

from numbers import Real as _Real

from cpython.exc cimport PyErr_CheckSignals
from libc.stdint cimport uintptr_t
from posix.time cimport nanosleep, clock_gettime, CLOCK_MONOTONIC, timespec

from hipfile._lib._runtime cimport (
    HIP_ERROR_NOT_READY, HIP_SUCCESS, event_query_h, hipfile_atomic_load_u8, stream_query)


# --------------------------------------------------------------------------
# The one timeout rule
# --------------------------------------------------------------------------

cdef double c_as_timeout(object timeout, str name="timeout") except? -2.0:
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
        return -1.0 if timeout > 0 else c_as_timeout(-1.0, name)
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
    cdef double t = c_as_timeout(timeout, name)
    return None if t < 0 else t


# --------------------------------------------------------------------------
# The one interruptible wait
# --------------------------------------------------------------------------

cdef double _now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


cdef class Deadline:
    """The end of a wait of ``timeout`` seconds counted from now (None or
    infinity: no end; the rule of :func:`as_timeout`): the one way the
    package's waits count down.

    Raises
    ------
    TypeError, ValueError
        A bad ``timeout`` (see :func:`as_timeout`).
    """

    def __init__(self, timeout=None):
        cdef double t = c_as_timeout(timeout)
        self.at = -1.0 if t < 0 else _now() + t

    cdef double left_s(self, double cap) noexcept:
        """Seconds left (>= 0), at most ``cap`` (< 0: no cap); -1 with
        neither an end nor a cap."""
        cdef double left
        if self.at < 0:
            return cap
        left = self.at - _now()
        if left < 0:
            left = 0.0
        if cap >= 0 and cap < left:
            return cap
        return left

    def left(self, cap=None):
        """Seconds left (>= 0), at most ``cap``; None when there is no end
        and no ``cap``."""
        cdef double v = self.left_s(-1.0 if cap is None else <double>cap)
        return None if v < 0 else v

    cpdef bint passed(self):
        """Whether the end has come (never, without one)."""
        return self.at >= 0 and _now() >= self.at

    @property
    def unlimited(self):
        """Whether the wait has no end."""
        return self.at < 0


cdef Deadline _deadline_in(double timeout_s):
    """A :class:`Deadline` of ``timeout_s`` seconds that the caller has
    checked (< 0: no end), made without the Python-level constructor; a
    NaN goes through it, which refuses it."""
    cdef Deadline d
    if timeout_s != timeout_s:
        return Deadline(timeout_s)
    d = Deadline.__new__(Deadline)
    d.at = -1.0 if timeout_s < 0 else _now() + timeout_s
    return d


cdef int wait_sliced(slice_wait_t wait_slice, void *ctx, Deadline deadline,
                     double slice_s) except -1:
    """The one interruptible wait loop: call ``wait_slice(ctx, seconds)``,
    which waits at most ``seconds`` (0: only looks) and returns nonzero once
    the wait is over, until it does (returns 1) or ``deadline`` has passed
    (returns 0). Each slice is at most ``slice_s`` seconds, and
    ``PyErr_CheckSignals`` runs between slices, so a signal handler's
    exception (``KeyboardInterrupt``) is raised from here between two of
    them; nothing is lost, the caller may wait again."""
    while True:
        if wait_slice(ctx, deadline.left_s(slice_s)):
            return 1
        if deadline.passed():
            return 0
        PyErr_CheckSignals()


cdef int _call_slice(void *fn, double seconds) except -1:
    return 1 if (<object>fn)(seconds) else 0


def wait_slices(wait_slice, Deadline deadline not None, double slice_s):
    """:c:func:`wait_sliced`, the one interruptible wait loop, for Python
    code: call ``wait_slice(seconds)``, which waits at most ``seconds``
    (at most ``slice_s``; 0 once ``deadline`` has passed: only look) and
    returns true once the wait is over, until it does or ``deadline``
    passes. Signal handlers run between slices, so Ctrl-C raises
    ``KeyboardInterrupt`` from here within a slice; an exception from
    ``wait_slice`` propagates unchanged.

    Returns
    -------
    bool
        True once ``wait_slice`` returned true, False when ``deadline``
        passed first.

    Raises
    ------
    ValueError
        ``slice_s`` is negative or NaN.
    """
    if not slice_s >= 0:
        raise ValueError(f"slice_s must be >= 0 seconds, got {slice_s!r}")
    return wait_sliced(_call_slice, <void *>wait_slice, deadline, slice_s) == 1


cdef struct _poll_t:
    int kind
    uintptr_t target
    unsigned char ready_value
    int err
    long delay_ns


cdef int _poll_slice(void *p, double seconds) except -1:
    """One query of ``wait_interruptible``'s target; when not ready, a sleep
    of the backoff's step (at most ``seconds``) without the GIL."""
    cdef _poll_t *c = <_poll_t *>p
    cdef timespec ts
    cdef long ns
    if c.kind == WAIT_FLAG:
        c.err = HIP_SUCCESS if hipfile_atomic_load_u8(<unsigned char *>c.target) \
            == c.ready_value else HIP_ERROR_NOT_READY
    elif c.kind == WAIT_EVENT:
        c.err = event_query_h(c.target)
    else:
        c.err = stream_query(c.target)
    if c.err != HIP_ERROR_NOT_READY:
        return 1
    ns = c.delay_ns
    if seconds < ns * 1e-9:
        ns = <long>(seconds * 1e9)
    if ns > 0:
        ts.tv_sec = 0
        ts.tv_nsec = ns
        with nogil:
            nanosleep(&ts, NULL)
    if c.delay_ns < 2000000:
        c.delay_ns = min(c.delay_ns * 2, 2000000)
    return 0


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
    the loop is :func:`wait_sliced`'s, so Ctrl-C raises
    ``KeyboardInterrupt`` from here within a few milliseconds. Safe to
    call from any thread holding the GIL.
    """
    cdef _poll_t c
    c.kind = kind
    c.target = target
    c.ready_value = ready_value
    c.err = HIP_ERROR_NOT_READY
    c.delay_ns = 10000
    wait_sliced(_poll_slice, &c, _deadline_in(timeout_s), 0.002)
    return c.err
