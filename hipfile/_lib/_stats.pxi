# Cross-process statistics (hipfile-stats.h), included from _hipfile.pyx.
#
# Optional symbols, resolved on first use with _resolve (absent:
# HipFileSymbolNotFound naming the function). Each wrapper calls with the GIL
# released and returns the hipFileStatsError_t as an int; hipfile.stats turns
# it into an exception. Contexts are passed as integers.

cdef fn_stats_create_t _p_stats_create = NULL
cdef fn_stats_close_t _p_stats_close = NULL
cdef fn_stats_connect_t _p_stats_connect = NULL
cdef fn_stats_poll_t _p_stats_poll = NULL
cdef fn_stats_report_t _p_stats_report = NULL


def stats_create_context(int pid):
    """Wraps ``hipFileStatsCreateContext``; returns ``(status, context)``."""
    global _p_stats_create
    if _p_stats_create == NULL:
        _p_stats_create = <fn_stats_create_t>_resolve(b"hipFileStatsCreateContext")
    cdef hipFileStatsContext_p ctx = NULL
    cdef hipFileStatsError_t e
    with nogil:
        e = _p_stats_create(&ctx, pid)
    return (e, <uintptr_t>ctx)


def stats_close_context(uintptr_t context):
    """Wraps ``hipFileStatsCloseContext`` (0 is accepted and ignored)."""
    global _p_stats_close
    if _p_stats_close == NULL:
        _p_stats_close = <fn_stats_close_t>_resolve(b"hipFileStatsCloseContext")
    with nogil:
        _p_stats_close(<hipFileStatsContext_p>context)


def stats_connect_to_target_process(uintptr_t context):
    """Wraps ``hipFileStatsConnectToTargetProcess``; returns the status."""
    global _p_stats_connect
    if _p_stats_connect == NULL:
        _p_stats_connect = <fn_stats_connect_t>_resolve(b"hipFileStatsConnectToTargetProcess")
    cdef hipFileStatsError_t e
    with nogil:
        e = _p_stats_connect(<hipFileStatsContext_p>context)
    return e


def stats_poll_target_process(uintptr_t context, bint block):
    """Wraps ``hipFileStatsPollTargetProcess``; returns the status."""
    global _p_stats_poll
    if _p_stats_poll == NULL:
        _p_stats_poll = <fn_stats_poll_t>_resolve(b"hipFileStatsPollTargetProcess")
    cdef hipFileStatsError_t e
    with nogil:
        e = _p_stats_poll(<const void *>context, block)
    return e


def stats_generate_report(uintptr_t context, int fd):
    """Wraps ``hipFileStatsGenerateReport``; writes to ``fd``, returns the status."""
    global _p_stats_report
    if _p_stats_report == NULL:
        _p_stats_report = <fn_stats_report_t>_resolve(b"hipFileStatsGenerateReport")
    cdef hipFileStatsError_t e
    with nogil:
        e = _p_stats_report(<const void *>context, fd)
    return e
