# The process an object belongs to: fork and interpreter exit.
#
# Invariants
# - ``_fork_gen`` counts the forks this process descends from (0 in the
#   process that imported hipfile). Cores record it when they are opened or
#   registered, handles when they are submitted: an object whose generation
#   differs was inherited through ``fork``.
# - In a child, inherited objects never reach the library: using them raises
#   ForkedProcessError; closing, deregistering and finalizing them only drop
#   references (the registration belongs to the parent).
# - The child also starts a new driver epoch, so every inherited
#   registration counts as gone, and forgets the parent's pending list and
#   parked slots (their completion can never be observed here).
# - Once the interpreter exits (``atexit``), finalizers call nothing: the
#   HIP runtime may already be shutting down.

cdef unsigned long _fork_gen = 0
cdef bint _exiting = 0


def _after_fork_in_child():
    global _fork_gen, _driver_epoch, _pending_head
    _fork_gen += 1
    _driver_epoch += 1
    _pending_head = NULL
    parked = list(_parked.values())
    _parked.clear()
    del parked       # dropped here: their finalizers see the new generation


def _at_exit():
    global _exiting
    _exiting = 1


os.register_at_fork(after_in_child=_after_fork_in_child)
import atexit as _atexit
_atexit.register(_at_exit)


def fork_generation():
    """How many ``fork`` calls separate this process from the one that
    imported hipfile (0 there)."""
    return _fork_gen


def finalizing():
    """Whether the interpreter is exiting (finalizers then do nothing)."""
    return bool(_exiting)


cdef int _forked(str what) except -1:
    raise ForkedProcessError(detail=f"{what} was opened, registered or submitted in the "
                             "parent process before fork; hipFile state does not survive "
                             "fork: open, register and submit again in this process")
