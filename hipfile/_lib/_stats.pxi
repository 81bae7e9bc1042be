# Cross-process statistics (hipfile-stats.h), included from _hipfile.pyx.
#
# Optional symbols, bound with the others when the library is opened (absent:
# HipFileSymbolNotFound naming the function). Each wrapper calls with the GIL
# released and returns the hipFileStatsError_t as an int; hipfile.stats turns
# it into an exception. Contexts are passed as integers.


def stats_create_context(int pid):
    """Wraps ``hipFileStatsCreateContext``; returns ``(status, context)``."""
    _need(_p_stats_create, b"hipFileStatsCreateContext")
    cdef hipFileStatsContext_p ctx = NULL
    cdef hipFileStatsError_t e
    with nogil:
        e = _p_stats_create(&ctx, pid)
    return (e, <uintptr_t>ctx)


def stats_close_context(uintptr_t context):
    """Wraps ``hipFileStatsCloseContext`` (0 is accepted and ignored)."""
    _need(_p_stats_close, b"hipFileStatsCloseContext")
    with nogil:
        _p_stats_close(<hipFileStatsContext_p>context)


def stats_connect_to_target_process(uintptr_t context):
    """Wraps ``hipFileStatsConnectToTargetProcess``; returns the status."""
    _need(_p_stats_connect, b"hipFileStatsConnectToTargetProcess")
    cdef hipFileStatsError_t e
    with nogil:
        e = _p_stats_connect(<hipFileStatsContext_p>context)
    return e


def stats_poll_target_process(uintptr_t context, bint block):
    """Wraps ``hipFileStatsPollTargetProcess``; returns the status."""
    _need(_p_stats_poll, b"hipFileStatsPollTargetProcess")
    cdef hipFileStatsError_t e
    with nogil:
        e = _p_stats_poll(<const void *>context, block)
    return e


def stats_generate_report(uintptr_t context, int fd):
    """Wraps ``hipFileStatsGenerateReport``; writes to ``fd``, returns the status."""
    _need(_p_stats_report, b"hipFileStatsGenerateReport")
    cdef hipFileStatsError_t e
    with nogil:
        e = _p_stats_report(<const void *>context, fd)
    return e
