# A submission planned (see plan.pyx).

from libc.stdint cimport uint32_t, uint64_t, uintptr_t

from hipfile._lib.chipfile cimport hoff_t
from hipfile._lib._core cimport FileCore
from hipfile._lib.engine.cengine cimport hfe_op, hfe_piece, hfe_span
from hipfile._lib.engine.device cimport Flag, FlagPool
from hipfile._lib.engine.handle cimport StreamIOHandle

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
cdef StreamIOHandle new_handle(int opcode, size_t nbytes, hoff_t foff, hoff_t boff, int device,
                               uintptr_t sh, FlagPool pool, int count)
cdef StagedPlan plan_staged(FileCore f, int opcode, int fd, uintptr_t base,
                            hfe_span *checked, int n, uintptr_t sh, int device, FlagPool pool,
                            size_t task, bint grouped, const int *fds, const long long *ends,
                            const int *allocs=*)
cdef long long file_end(FileCore f, int fd) except -1
cdef int record_write_end(FileCore f, long long wend) except -1
cdef int direct_descriptor(FileCore f, hfe_span *checked, int n) except -2
cdef int group_spans(StreamIOHandle hd, hfe_span *checked, int n) noexcept
cdef hfe_span *plan_addresses(object ranges, list files, list file_fds, list file_ends,
                              int opcode, int device, Py_ssize_t *count, int **fds,
                              long long **ends, int **allocs) except NULL
