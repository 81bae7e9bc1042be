# A submission planned (see plan.pyx).

from libc.stdint cimport uint32_t, uint64_t, uintptr_t
from libc.string cimport memset

from hipfile._lib.chipfile cimport hoff_t
from hipfile._lib._core cimport FileCore
from hipfile._lib.engine.cengine cimport hfe_op, hfe_piece, hfe_span, hfe_submission
from hipfile._lib.engine.device cimport Flag, FlagPool
from hipfile._lib.engine.handle cimport StreamIOHandle

# One stream-ordered submission, made once by its entry point (submit.pyx)
# and passed whole: what it moves, where, and how. ``staged`` is the engine's
# part of a staged submission (hfe_stage_submit), filled by plan_staged
# (pieces, operations, completion flags) and _submit_staged (stream, gate).
ctypedef struct Submission:
    int opcode                  # 0: read, 1: write
    int fd                      # the file's POSIX descriptor (-1: none; many files: the first's)
    uintptr_t base              # the buffer's address (0: the spans' buffer offsets are addresses)
    hfe_span *spans             # the ranges, checked
    int n
    uintptr_t stream            # the caller's stream
    int device                  # the buffer's device
    size_t task                 # bytes a chunk (a task of the worker path)
    bint ordered                # later work on the stream waits for it (else: the engine's stream)
    bint grouped                # one operation over all the ranges
    bint prefetch               # a staged read's file side starts at once
    bint gated                  # the worker path starts behind the stream (else at once)
    int *fds                    # many files: each range's descriptor (NULL: ``fd``)
    long long *ends             # ... and, for a read, where its file's reads stop
    int *allocs                 # by address: each range's device allocation (NULL: one)
    hfe_submission staged


cdef inline Submission new_submission(int opcode, int fd, uintptr_t base,
                                      uintptr_t stream) noexcept:
    # A submission of no range yet, ordered and gated, one operation per range.
    cdef Submission sub
    memset(&sub, 0, sizeof(sub))
    sub.opcode = opcode
    sub.fd = fd
    sub.base = base
    sub.stream = stream
    sub.device = -1
    sub.ordered = 1
    sub.gated = 1
    return sub


cdef class StagedPlan:
    cdef hfe_piece *pieces
    cdef hfe_op **groups
    cdef uint64_t *cdev           # a read operation's completion flag (device address)
    cdef uint32_t *cval           # ... and the value that completes it
    cdef int ng
    cdef list handles
    cdef int abandon(self) except -1

cdef hfe_span *parse_ranges(object ranges, size_t length, Py_ssize_t *count) except NULL
cdef size_t lone_range_task(size_t total, size_t task) noexcept
cdef int lone_range_batch(int opcode, int n, size_t total, size_t task) noexcept
cdef tuple entry_files(entries)
cdef tuple enter_files(list files, int opcode, list entered, str call)
cdef object closed_entry(object exc, list files, list idx)
cdef StagedPlan plan_staged(FileCore f, Submission *sub, FlagPool pool)
cdef long long file_end(FileCore f, int fd) except -1
cdef int record_write_end(FileCore f, long long wend) except -1
cdef int direct_descriptor(FileCore f, hfe_span *checked, int n) except -2
cdef int plan_addresses(object ranges, list files, list file_fds, list file_ends,
                        Submission *sub) except -1
