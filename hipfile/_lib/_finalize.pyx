# cython: language_level=3
"""Finalizers that a signal cannot cut short, and steps that must not stop
half way.

Python runs a signal's handler between two bytecodes of the main thread,
whichever frame they belong to: a Ctrl-C that lands in a finalizer's Python
code raises KeyboardInterrupt there, the interpreter prints "Exception
ignored" and drops it, the caller never sees it, and the cleanup stops half
way. So the package's finalizers run no Python code of their own (compiled
``__dealloc__``, :class:`DeviceMemory`), or run it through
:func:`run_uninterrupted`, which defers SIGINT until the cleanup is done and
then delivers it to the code the finalizer interrupted.
"""

from libc.stdint cimport uintptr_t

from hipfile._lib._runtime cimport HIP_SUCCESS, c_free, c_get_device, c_set_device, exiting, fork_gen
from hipfile._lib._runtime import device_free, device_malloc

# the C functions themselves: the `signal` module's wrappers are Python
# code, where a pending signal would be handled (and, here, lost)
import _signal
import threading as _threading

cdef extern from "Python.h":
    int PyErr_SetInterruptEx(int signum) noexcept
    unsigned long PyThread_get_thread_ident() noexcept

cdef unsigned long _main_ident = <unsigned long>_threading.main_thread().ident
cdef bint _deferring = 0
cdef bint _sigint_deferred = 0
_sigint = _signal.SIGINT
_getsignal = _signal.getsignal
_setsignal = _signal.signal
_finalizer_hook = None


def _note_sigint(signum, frame):
    """The SIGINT handler while a finalizer runs: remember, raise nothing."""
    global _sigint_deferred
    _sigint_deferred = 1


cdef void _install(object handler):
    # signal.signal runs the handlers of signals already pending first: a
    # KeyboardInterrupt from the handler being replaced is remembered, and
    # the handler set again (no signal is pending then)
    global _sigint_deferred
    cdef int tries
    for tries in range(4):
        try:
            _setsignal(_sigint, handler)
            return
        except KeyboardInterrupt:
            _sigint_deferred = 1
        except BaseException:
            pass


def run_uninterrupted(fn, *args):
    """Run ``fn(*args)`` with Ctrl-C deferred, and return its result: a
    finalizer, or a step that must not stop half way (a registration made
    and recorded, a descriptor closed and forgotten). In the main thread, a
    SIGINT that arrives meanwhile (or was pending) is remembered instead of
    raising ``KeyboardInterrupt`` inside ``fn``, and is delivered again
    once ``fn`` has returned, so that the code after it (or the code a
    finalizer interrupted) receives it. Exceptions of ``fn`` propagate (the
    interpreter reports a finalizer's as it does). In other threads no
    signal handler runs, and ``fn`` is called as it is; so it is inside
    another such call.
    """
    global _deferring, _sigint_deferred
    if _deferring or PyThread_get_thread_ident() != _main_ident or exiting:
        return fn(*args)
    previous = _getsignal(_sigint)      # C: runs no handler
    if previous is None or not callable(previous):
        return fn(*args)      # SIG_DFL or SIG_IGN: no Python handler raises
    # Installing runs the handlers of signals already pending (with the
    # handler being replaced: its KeyboardInterrupt is remembered); what a
    # collection during them finalizes guards itself, as nothing is
    # deferred yet. From here on SIGINT only sets the flag.
    _install(_note_sigint)
    _deferring = 1
    try:
        if _finalizer_hook is not None:
            _finalizer_hook()       # tests: a signal inside the finalizer
        return fn(*args)
    except KeyboardInterrupt:
        _sigint_deferred = 1      # not from SIGINT (an async exception)
    finally:
        _install(previous)        # runs _note_sigint for a pending SIGINT
        _deferring = 0
        if _sigint_deferred:
            _sigint_deferred = 0
            PyErr_SetInterruptEx(_sigint)


def set_finalizer_hook(hook=None):
    """Test hook: ``hook()`` is called inside every call that
    :func:`run_uninterrupted` guards (finalizers among them), before its
    work (to deliver a signal there); None removes it."""
    global _finalizer_hook
    _finalizer_hook = hook


cdef class _BoundFinalizer:
    cdef object fn
    cdef object obj
    cdef object live

    def __call__(self):
        if self.live is not None and not getattr(self.obj, self.live):
            return None       # compiled check: nothing to release, no Python code ran
        return run_uninterrupted(self.fn, self.obj)


cdef class guarded_del:
    """A ``__del__`` for a Python class: ``__del__ = guarded_del(fn, live)``
    calls ``fn(self)`` through :func:`run_uninterrupted` (Ctrl-C deferred, no
    Python code before the guard), unless the attribute ``live`` (a
    compiled property, e.g. ``registered``) says there is nothing to
    release."""
    cdef object fn
    cdef object live

    def __init__(self, fn, live=None):
        self.fn = fn
        self.live = live

    def __get__(self, obj, cls):
        if obj is None:
            return self
        cdef _BoundFinalizer b = _BoundFinalizer.__new__(_BoundFinalizer)
        b.fn = self.fn
        b.obj = obj
        b.live = self.live
        return b


cdef class DeviceMemory:
    """``size`` bytes of device memory from ``hipMalloc`` on ``device``
    (-1: the current one), freed by :meth:`free` or when the object is
    collected. Freeing runs no Python code (``hipFree`` on the device,
    without the GIL), so a signal can neither interrupt it half way nor be
    lost in it.

    Raises
    ------
    HipRuntimeError
        ``hipSetDevice`` or ``hipMalloc`` failed.

    See Also
    --------
    hipMalloc, hipFree
    """
    cdef readonly uintptr_t ptr
    cdef readonly int device
    cdef unsigned long _gen

    def __cinit__(self, size_t size, int device=-1):
        self.device = device
        self._gen = fork_gen
        self.ptr = <uintptr_t>device_malloc(size, device)

    @property
    def freed(self):
        """Whether the memory has been freed."""
        return self.ptr == 0

    def free(self):
        """Free the memory now (idempotent); returns the hipError_t."""
        return self._release()

    cdef int _release(self) noexcept:
        cdef uintptr_t p = self.ptr
        cdef int prev = -1
        cdef int err = 0
        cdef int dev = self.device
        if p == 0:
            return 0
        self.ptr = 0           # first: never freed twice
        if c_free == NULL or c_get_device == NULL or c_set_device == NULL:
            try:               # HIP-Python without C functions: its Python layer
                err = device_free(p, dev)
            except BaseException:
                err = -1
            return err
        with nogil:
            if dev >= 0:
                if c_get_device(&prev) != HIP_SUCCESS:
                    prev = -1
                if prev != dev:
                    c_set_device(dev)
            err = c_free(<void *>p)
            if dev >= 0 and prev >= 0 and prev != dev:
                c_set_device(prev)
        return err

    def __dealloc__(self):
        if self.ptr != 0 and not exiting and self._gen == fork_gen:
            self._release()
