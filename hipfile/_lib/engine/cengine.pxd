# cython: language_level=3
# The engine's C source (src/engine.c, src/stage.c), compiled into this module
# alone: the other engine modules call it through ``eng``, a table of its
# functions, so that one copy of its state exists in the process.

from libc.stdint cimport int64_t, uint32_t, uint64_t
from hipfile._lib.chipfile cimport ssize_t

cdef extern from "engine.h" nogil:
    ctypedef struct hfe_op:
        pass
    ctypedef ssize_t (*hfe_io_fn)(void *, void *, size_t, int64_t, int64_t) noexcept nogil
    ctypedef int (*hfe_set_device_fn)(int) noexcept nogil
    int hfe_start(int nthreads, hfe_set_device_fn set_device)
    int hfe_stop(double timeout_s)
    int hfe_retire_library_threads(double timeout_s)
    int hfe_called_library()
    int hfe_threads()
    long hfe_outstanding()
    ctypedef struct hfe_span:
        uint64_t len
        int64_t file_offset
        int64_t buffer_offset
    hfe_op *hfe_op_new(int opcode, const hfe_span *range, int device, size_t task_size,
                       uint32_t *flag, uint32_t flag_value)
    void hfe_op_set_io(hfe_op *op, hfe_io_fn fn, void *fh, void *base)
    void hfe_op_incref(hfe_op *op)
    void hfe_op_decref(hfe_op *op)
    int hfe_op_set_spans(hfe_op *op, const hfe_span *spans, int n)
    ctypedef int (*hfe_event_fn)(void *) noexcept nogil
    void hfe_set_event_fns(hfe_event_fn query, hfe_event_fn destroy)
    int hfe_submit(hfe_op **ops, int n, const uint32_t *gate, uint32_t gate_value,
                   void *gate_event)
    int hfe_op_done(const hfe_op *op)
    int hfe_op_wait(hfe_op *op, double timeout_s)
    int64_t hfe_op_result(const hfe_op *op, int *err_no)
    long hfe_op_calls(const hfe_op *op)
    void hfe_host_wait(void *arg)
    ctypedef struct hfe_ring:
        pass
    ctypedef struct hfe_runtime:
        int (*wait_value32)(void *, void *, uint32_t, unsigned, uint32_t) noexcept nogil
        int (*write_value32)(void *, void *, uint32_t, unsigned) noexcept nogil
        int (*memcpy_async)(void *, const void *, size_t, int, void *) noexcept nogil
        int (*event_record)(void *, void *) noexcept nogil
        int (*stream_wait_event)(void *, void *, unsigned) noexcept nogil
        int (*memcpy_batch_async)(void **, void **, size_t *, size_t, void *, size_t *,
                                  size_t, size_t *, void *) noexcept nogil
        int (*memset_d32_async)(void *, int, size_t, void *) noexcept nogil
    ctypedef struct hfe_piece:
        int64_t file_offset
        uint64_t device
        uint64_t len
        int group
        int fd
        int fd_alt
        int alloc
    ctypedef struct hfe_submission:
        int opcode
        int fd
        const hfe_piece *pieces
        int npieces
        hfe_op **groups
        int ngroups
        const uint64_t *complete_dev
        const uint32_t *complete_value
        void *stream
        const uint32_t *gate
        uint32_t gate_value
        size_t chunk_cap
        size_t inline_max
        size_t read_first
        int copy_batch
    hfe_ring *hfe_ring_new(void *staging, size_t slot_size, int nslots, uint32_t *flags_host,
                           uint64_t flags_dev)
    void hfe_ring_free(hfe_ring *ring)
    void hfe_ring_set_copy_streams(hfe_ring *ring, int n, void **streams, void *fork_event,
                                   void **join_events)
    void hfe_ring_set_copy_batch(hfe_ring *ring, int n)
    void hfe_ring_set_direct_slots(hfe_ring *ring, int n)
    int hfe_ring_direct_slots(const hfe_ring *ring)
    void hfe_ring_stream_counts(hfe_ring *ring, uint64_t *calls, uint64_t *waits)
    int hfe_stage_submit(hfe_ring *ring, const hfe_runtime *rt, const hfe_submission *sub)
    int hfe_flag_wait(const uint32_t *flag, uint32_t value, double timeout_s)
    int hfe_flag_reached(const uint32_t *flag, uint32_t value)
    void hfe_inject(int err_no, int count, size_t short_max, int after)
    int hfe_runtime_exports(const char *library, const char *symbol)


ctypedef struct EngineC:
    int (*start)(int nthreads, hfe_set_device_fn set_device) noexcept nogil
    int (*stop)(double timeout_s) noexcept nogil
    int (*retire_library_threads)(double timeout_s) noexcept nogil
    int (*called_library)() noexcept nogil
    int (*threads)() noexcept nogil
    long (*outstanding)() noexcept nogil
    hfe_op *(*op_new)(int opcode, const hfe_span *range, int device, size_t task_size,
                      uint32_t *flag, uint32_t flag_value) noexcept nogil
    void (*op_set_io)(hfe_op *op, hfe_io_fn fn, void *fh, void *base) noexcept nogil
    void (*op_decref)(hfe_op *op) noexcept nogil
    int (*op_set_spans)(hfe_op *op, const hfe_span *spans, int n) noexcept nogil
    void (*set_event_fns)(hfe_event_fn query, hfe_event_fn destroy) noexcept nogil
    int (*submit)(hfe_op **ops, int n, const uint32_t *gate, uint32_t gate_value,
                  void *gate_event) noexcept nogil
    int (*op_done)(const hfe_op *op) noexcept nogil
    int (*op_wait)(hfe_op *op, double timeout_s) noexcept nogil
    int64_t (*op_result)(const hfe_op *op, int *err_no) noexcept nogil
    long (*op_calls)(const hfe_op *op) noexcept nogil
    hfe_ring *(*ring_new)(void *staging, size_t slot_size, int nslots, uint32_t *flags_host,
                          uint64_t flags_dev) noexcept nogil
    void (*ring_free)(hfe_ring *ring) noexcept nogil
    void (*ring_set_copy_streams)(hfe_ring *ring, int n, void **streams, void *fork_event,
                                  void **join_events) noexcept nogil
    void (*ring_set_copy_batch)(hfe_ring *ring, int n) noexcept nogil
    void (*ring_set_direct_slots)(hfe_ring *ring, int n) noexcept nogil
    int (*ring_direct_slots)(const hfe_ring *ring) noexcept nogil
    void (*ring_stream_counts)(hfe_ring *ring, uint64_t *calls, uint64_t *waits) noexcept nogil
    int (*stage_submit)(hfe_ring *ring, const hfe_runtime *rt,
                        const hfe_submission *sub) noexcept nogil
    int (*flag_wait)(const uint32_t *flag, uint32_t value, double timeout_s) noexcept nogil
    int (*flag_reached)(const uint32_t *flag, uint32_t value) noexcept nogil
    void (*inject)(int err_no, int count, size_t short_max, int after) noexcept nogil
    int (*runtime_exports)(const char *library, const char *symbol) noexcept nogil

# The engine's functions (filled when cengine is imported).
cdef EngineC eng
