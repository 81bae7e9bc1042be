# cython: language_level=3
# Observing completion outside a handle's own calls (see _observe.pyx).

from hipfile._lib._wait cimport Deadline

# What the engine lends wait_for (set when engine.handle is imported): wait
# until the stream-engine operations using an object (every one: None)
# have ended, within the deadline, observing them; returns how many are
# still running.
ctypedef Py_ssize_t (*engine_wait_fn)(object obj, Deadline deadline) except -1
cdef engine_wait_fn engine_wait_hook
