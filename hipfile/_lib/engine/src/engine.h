/* The stream-ordered parallel I/O engine: C threads that move the bytes of
 * stream-ordered reads and writes with synchronous hipFileRead/hipFileWrite
 * calls, gated on a flag the caller's stream writes, and released to other
 * streams through a flag they wait on.
 *
 * Threads
 * - Workers take chunks of ready operations, oldest operation first, and run
 *   the transfer loop with no Python and no GIL.
 * - One gate thread polls the gates of submitted operations (a flag the
 *   caller's stream writes, or an event recorded on it) and moves an
 *   operation to the ready queue once the stream has passed the gate
 *   (everything enqueued on it before the submit has finished). No host
 *   function is ever needed to start an operation, so a host function that
 *   blocks waiting for one cannot hold up its start.
 *
 * Lifetimes
 * - An operation is reference counted: its creator holds one reference, the
 *   engine one from submit to completion, every host function enqueued to
 *   wait for it one. It is freed when the count reaches 0.
 * - The engine never touches Python objects: whoever submits keeps the file,
 *   buffer and flag memory alive until the operation is done.
 */
#ifndef HIPFILE_ENGINE_H
#define HIPFILE_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef ssize_t (*hfe_io_fn)(void *fh, void *base, size_t size, int64_t file_offset,
                             int64_t buffer_offset);
typedef int (*hfe_set_device_fn)(int device);

typedef struct hfe_op hfe_op;

/* Start the threads (idempotent; a different thread count restarts the
 * pool once it is idle). Returns 0 or an errno value. */
int hfe_start(int nthreads, hfe_set_device_fn set_device);
/* Stop the threads once every submitted operation has finished, waiting at
 * most timeout_s seconds (< 0: no limit). Returns 0, or ETIMEDOUT when
 * operations were still outstanding (the threads are then left running). */
int hfe_stop(double timeout_s);
/* Stop the threads if one of them has called hipFile since they started
 * (before the driver closes: such a thread must not exit after it), once
 * nothing is outstanding, waiting at most timeout_s seconds. Returns 0, or
 * ETIMEDOUT (the threads are then left running). */
int hfe_retire_library_threads(double timeout_s);
/* Whether a thread running now has called hipFile. */
int hfe_called_library(void);
int hfe_threads(void);
/* Operations submitted and not yet finished. */
long hfe_outstanding(void);

/* One range: `len` bytes between the file at file_offset and the buffer at
 * buffer_offset. */
typedef struct hfe_span {
    uint64_t len;
    int64_t file_offset;
    int64_t buffer_offset;
} hfe_span;

/* A new operation (reference count 1, the caller's) over `range` (its
 * size and offsets). `flag`, when not NULL, receives `flag_value` (release
 * store) when the operation finishes. An operation of the worker path is
 * then given its library call (hfe_op_set_io); one of the staged path has
 * none. */
hfe_op *hfe_op_new(int opcode, const hfe_span *range, int device, size_t task_size,
                   uint32_t *flag, uint32_t flag_value);
/* The worker path's call for the operation's chunks: fn(fh, base, ...). */
void hfe_op_set_io(hfe_op *op, hfe_io_fn fn, void *fh, void *base);
void hfe_op_incref(hfe_op *op);
void hfe_op_decref(hfe_op *op);

/* Make a new operation (not yet submitted) one group of `n` ranges: its
 * size becomes their total and its chunks walk them in order, each range
 * through its own file and buffer offsets (the operation's own offsets
 * are then unused). A read that meets the end of the file in one range
 * goes on with the next. Returns 0 or ENOMEM. */
int hfe_op_set_spans(hfe_op *op, const hfe_span *spans, int n);

typedef int (*hfe_event_fn)(void *event);
/* The runtime's hipEventQuery and hipEventDestroy, for event gates. */
void hfe_set_event_fns(hfe_event_fn query, hfe_event_fn destroy);

/* Submit n operations at once. They start when *gate >= gate_value
 * (wrap-around compare); with gate NULL and gate_event not NULL, once that
 * HIP event has completed (the gate thread then destroys it); with both
 * NULL, at once. Returns 0 or an errno value (nothing is submitted then,
 * and the event is left to the caller). */
int hfe_submit(hfe_op **ops, int n, const uint32_t *gate, uint32_t gate_value,
               void *gate_event);

int hfe_op_done(const hfe_op *op);
/* Wait up to timeout_s seconds (< 0: no limit); 1 when done, 0 otherwise. */
int hfe_op_wait(hfe_op *op, double timeout_s);
/* Bytes moved, or a negative result of the library (-1: see *err_no). */
int64_t hfe_op_result(const hfe_op *op, int *err_no);
/* The chunk count and the number of library calls made (for tests). */
long hfe_op_calls(const hfe_op *op);

/* ---------------------------------------------------------------- staged
 * The staged data path: the engine's threads make no runtime call once a
 * submission is in. File I/O runs with POSIX pread/pwrite into pinned
 * staging slots of a ring; the copies between staging and device memory,
 * and the stream waits that order them after the file I/O, are all
 * enqueued on a stream at submit, by the submitting thread:
 *
 *   read chunk (slot s, generation g):
 *     engine:  wait drained[s] >= g-1 (and the gate), pread, store filled[s] = g
 *     stream:  wait filled[s] >= g, copy staging -> device, write drained[s] = g
 *   write chunk:
 *     stream:  wait drained[s] >= g-1, copy device -> staging, write filled[s] = g
 *     engine:  wait filled[s] >= g, pwrite, store drained[s] = g
 *
 * A stream never waits for a host thread that must enter the runtime, so a
 * device-wide synchronisation (hipFree) elsewhere cannot close a cycle
 * through the engine. */

typedef struct hfe_ring hfe_ring;

/* The runtime entry points the submitting thread uses (hipError_t results). */
typedef struct hfe_runtime {
    int (*wait_value32)(void *stream, void *ptr, uint32_t value, unsigned flags, uint32_t mask);
    int (*write_value32)(void *stream, void *ptr, uint32_t value, unsigned flags);
    int (*memcpy_async)(void *dst, const void *src, size_t bytes, int kind, void *stream);
    int (*event_record)(void *event, void *stream);
    int (*stream_wait_event)(void *stream, void *event, unsigned flags);
    /* hipMemcpyBatchAsync where the runtime has it, else NULL: a chunk's
     * copies then go to the stream in one call instead of one call each */
    int (*memcpy_batch_async)(void **dsts, void **srcs, size_t *sizes, size_t count,
                              void *attrs, size_t *attrs_idxs, size_t num_attrs,
                              size_t *fail_idx, void *stream);
    /* hipMemsetD32Async where the runtime has it, else NULL: a batch of read
     * chunks (hfe_ring_set_copy_batch) then hands its slots back with one
     * call instead of one hipStreamWriteValue32 each */
    int (*memset_d32_async)(void *dst, int value, size_t count, void *stream);
} hfe_runtime;

/* One piece of a submission: `len` bytes between the file at file_offset
 * and device memory at `device`, for group `group`. `fd` is the piece's
 * file (a POSIX descriptor); -1: the submission's `fd`. `fd_alt` (-1: none)
 * is a second descriptor of the same file that a call refused with EINVAL
 * is made again on: `fd` may be opened with O_DIRECT (reads from the disk
 * that skip the page cache), whose alignment rules an unaligned run (the
 * end of a file) breaks, and `fd_alt` then the buffered one. `alloc` names
 * the device allocation holding the piece's memory: the copies of two pieces
 * whose device memory continues are one copy only within one allocation
 * (two allocations may lie side by side, and one copy must not span them). */
typedef struct hfe_piece {
    int64_t file_offset;
    uint64_t device;
    uint64_t len;
    int group;
    int fd;
    int fd_alt;
    int alloc;
} hfe_piece;

/* A ring over `nslots` staging slots of `slot_size` bytes at `staging`
 * (pinned host memory), with 2 * nslots flags at `flags_host` (mapped:
 * `flags_dev` is the address streams use): filled[] then drained[]. */
hfe_ring *hfe_ring_new(void *staging, size_t slot_size, int nslots, uint32_t *flags_host,
                       uint64_t flags_dev);
/* Read chunks of one submission that go to one stream and one group are
 * made ready for the stream in batches of up to `n` (at most half the
 * ring; <= 1: one by one): one stream wait per batch instead of one per
 * chunk, and one copy call where the runtime batches copies. */
void hfe_ring_set_copy_batch(hfe_ring *ring, int n);
/* Read chunks of an O_DIRECT descriptor (a file read from the disk) that
 * follow each other in the file and in the ring are read by one worker
 * with one request of up to `n` slots (1 to HFE_MAX_DIRECT_SLOTS and half
 * the ring; <= 1: one request per chunk): with as many threads, more bytes
 * in flight and fewer, larger requests for the disk. Set before the ring's
 * first submission. */
#define HFE_MAX_DIRECT_SLOTS 8
void hfe_ring_set_direct_slots(hfe_ring *ring, int n);
int hfe_ring_direct_slots(const hfe_ring *ring);
/* The runtime calls that the ring's submissions made to enqueue their
 * stream side (waits, copies, flag writes, events), and the stream waits on
 * slot flags among them. */
void hfe_ring_stream_counts(hfe_ring *ring, uint64_t *calls, uint64_t *waits);
/* Spread the copies of later submissions over `n` streams of the ring's
 * device (n <= HFE_MAX_COPY_STREAMS; 1: all on the submission's stream):
 * each submission forks them from its stream with fork_event and joins them
 * back with join_events[i]. The streams and events stay the caller's. */
#define HFE_MAX_COPY_STREAMS 8
void hfe_ring_set_copy_streams(hfe_ring *ring, int n, void *const *streams, void *fork_event,
                               void *const *join_events);
/* Free the ring (no chunk of it may be outstanding). */
void hfe_ring_free(hfe_ring *ring);
size_t hfe_ring_slot_size(const hfe_ring *ring);

/* One staged submission: what moves, its operations, where and when its
 * stream side goes, and how its chunks are cut. Built by the caller, read by
 * hfe_stage_submit (which keeps no pointer to it). */
typedef struct hfe_submission {
    int opcode;                     /* 0: read, 1: write */
    int fd;                         /* the file of pieces whose fd is -1 */
    const hfe_piece *pieces;        /* in order */
    int npieces;
    hfe_op **groups;                /* made by hfe_op_new (no hfe_op_set_io) */
    int ngroups;
    /* a read group's completion: the stream writes complete_dev[i] =
     * complete_value[i] after its last copy (complete_dev[i] 0: none) */
    const uint64_t *complete_dev;
    const uint32_t *complete_value;
    void *stream;                   /* the stream side's stream */
    const uint32_t *gate;           /* NULL: a read's file I/O starts at once */
    uint32_t gate_value;
    size_t chunk_cap;               /* bytes a chunk at most (0: the ring's slot) */
    size_t inline_max;              /* a lone cached read read here (0: none) */
    size_t read_first;              /* a lone buffered read read first (0: none) */
    int copy_batch;                 /* read chunks per stream wait (<= 0: the ring's) */
} hfe_submission;

/* Submit sub->pieces (in order) with the staged path. Each group receives
 * its pieces' bytes and errors, and finishes once all its chunks have
 * (engine side). For a read, the stream then writes the group's completion
 * flag after its last copy (complete_dev); for a write, the group's own
 * flag is stored by the engine. Pieces are packed into chunks of at most
 * chunk_cap bytes; a piece's `fd` (else sub->fd) is the file it moves (one
 * chunk may hold the pieces of several files). The engine starts a read
 * chunk's file I/O once *gate >= gate_value (gate NULL: at once). A lone
 * chunk of at most inline_max bytes (0: none) that needs no gate is read by
 * the calling thread when the page cache holds it (RWF_NOWAIT). A lone
 * buffered read of at most read_first bytes (0: none) whose chunks go to
 * idle workers and need no gate is read before its stream side is enqueued
 * (the calling thread yields at most 1 ms for them), which then waits on no
 * flag. copy_batch > 0: read chunks per stream wait for this submission (at
 * most half the ring's slots) instead of the ring's own
 * (hfe_ring_set_copy_batch). Returns 0, or the hipError_t of an enqueue
 * that failed (then every chunk not enqueued is abandoned, every group not
 * released gets the error -1/EIO, and its flags are set). */
int hfe_stage_submit(hfe_ring *ring, const hfe_runtime *rt, const hfe_submission *sub);

/* Wait up to timeout_s seconds (< 0: no limit) for *flag >= value
 * (wrap-around compare), polling host memory; 1 when it holds. */
int hfe_flag_wait(const uint32_t *flag, uint32_t value, double timeout_s);
int hfe_flag_reached(const uint32_t *flag, uint32_t value);
/* Test faults of the staged path's file calls: after `after` more calls,
 * the next `count` calls fail with err_no; every call moves at most
 * short_max bytes (0: no limit). */
void hfe_inject(int err_no, int count, size_t short_max, int after);
/* Whether a loaded library whose path contains `library` exports `symbol`. */
int hfe_runtime_exports(const char *library, const char *symbol);

/* A host function (hipHostFn_t) that blocks its stream until the operation
 * `arg` is done, then drops the reference taken for it. It makes no HIP call
 * and takes no GIL. */
void hfe_host_wait(void *arg);

#ifdef __cplusplus
}
#endif
#endif
