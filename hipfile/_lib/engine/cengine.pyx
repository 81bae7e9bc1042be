# cython: language_level=3
"""The engine's C source, compiled into this module alone (src/engine.c,
src/stage.c, src/stage_io.c, src/stage_copy.c), and the table of its
functions (``eng``) through which the other engine modules call it. Its
reset after ``fork`` runs from the package's one fork hook (:func:`hipfile._lib._runtime.on_fork_child`)."""

from hipfile._lib import _runtime

cdef extern from *:
    """
    void hfe_after_fork_child(void);
    """
    void hfe_after_fork_child() nogil


eng.start = hfe_start
eng.stop = hfe_stop
eng.retire_library_threads = hfe_retire_library_threads
eng.called_library = hfe_called_library
eng.threads = hfe_threads
eng.outstanding = hfe_outstanding
eng.op_new = hfe_op_new
eng.op_set_io = hfe_op_set_io
eng.op_decref = hfe_op_decref
eng.op_set_spans = hfe_op_set_spans
eng.set_event_fns = hfe_set_event_fns
eng.submit = hfe_submit
eng.op_done = hfe_op_done
eng.op_wait = hfe_op_wait
eng.op_result = hfe_op_result
eng.op_calls = hfe_op_calls
eng.ring_new = hfe_ring_new
eng.ring_free = hfe_ring_free
eng.ring_set_copy_streams = hfe_ring_set_copy_streams
eng.ring_set_copy_batch = hfe_ring_set_copy_batch
eng.ring_set_direct_slots = hfe_ring_set_direct_slots
eng.ring_direct_slots = hfe_ring_direct_slots
eng.ring_stream_counts = hfe_ring_stream_counts
eng.stage_submit = hfe_stage_submit
eng.flag_wait = hfe_flag_wait
eng.flag_reached = hfe_flag_reached
eng.inject = hfe_inject
eng.runtime_exports = hfe_runtime_exports


def _after_fork_in_child():
    # the engine's threads do not exist in the child: forget them and what
    # the parent had queued (its operations belong to the parent)
    hfe_after_fork_child()


_runtime.on_fork_child(_after_fork_in_child)
