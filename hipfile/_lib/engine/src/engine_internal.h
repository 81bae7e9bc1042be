/* The engine's parts shared between its files: engine.c (operations,
 * worker threads, gates), stage.c (the staged path) and stage_copy.c (its
 * stream side). Not public. */
#ifndef HIPFILE_ENGINE_INTERNAL_H
#define HIPFILE_ENGINE_INTERNAL_H

#include "engine.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>

enum { OP_QUEUED = 0, OP_DONE = 1 };

struct hfe_op {
    int refs;                 /* atomic */
    int opcode;               /* 0 read, 1 write */
    hfe_io_fn fn;
    void *fh;
    void *base;
    size_t size;
    int64_t file_offset;
    int64_t buffer_offset;
    int device;
    size_t task;
    uint32_t *flag;
    uint32_t flag_value;
    /* dispatch (under the engine lock) */
    size_t cursor;
    struct hfe_op *next;
    /* progress (atomic) */
    long chunks_left;
    long calls;
    int64_t bytes;
    int64_t error;            /* first negative result, 0 if none */
    int err_no;
    int state;
    int stream_completes;     /* a staged read: its stream writes the flag */
    /* a grouped operation on the worker path: its ranges, and where each
     * starts in the operation's 0..size (NULL, 0: one range) */
    hfe_span *spans;
    uint64_t *span_start;
    int nspans;
};

/* A failed call: keep the operation's first error (and its errno). */
static inline void hfe__set_error(hfe_op *op, int64_t r, int err_no)
{
    int64_t expected = 0;
    if (__atomic_compare_exchange_n(&op->error, &expected, r, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        op->err_no = err_no;
}

/* ---------------------------------------------------------- staged path */
/* The staged path (see engine.h). Ownership: a chunk has two references,
 * the engine's (dropped by run_staged) and the submitter's (dropped at the
 * end of hfe_stage_submit, which reads its slot, generation and copies
 * while it enqueues the stream's side). */

struct hfe_ring {
    char *staging;
    size_t slot_size;
    int nslots;
    uint32_t *flags;          /* filled[nslots], then drained[nslots] */
    uint64_t flags_dev;
    uint64_t next;            /* the next chunk's sequence number (under ring->lock) */
    pthread_mutex_t lock;     /* one submission's reservation and enqueue at a time */
    int ncopy;                /* copy streams (1: the submission's stream only) */
    void *copy_streams[HFE_MAX_COPY_STREAMS];
    void *fork_event;
    void *join_events[HFE_MAX_COPY_STREAMS];
    int copy_batch;           /* read chunks per stream wait (1: one wait per chunk) */
    int direct_slots;         /* O_DIRECT read chunks one request reads (1: one each) */
    uint64_t stream_waits;    /* stream waits enqueued on slot flags (under lock) */
    uint64_t stream_calls;    /* runtime calls that enqueued stream work (under lock) */
};

/* A runtime call of the stream side, counted in ring->stream_calls (the
 * caller holds ring->lock); returns the call's hipError_t. */
static inline int hfe__counted(hfe_ring *ring, int err)
{
    ring->stream_calls++;
    return err;
}

enum { CHUNK_PENDING = 0, CHUNK_DONE = 1, CHUNK_ABANDONED = 2 };

typedef struct run {          /* file side: one pread/pwrite loop */
    int fd;                   /* the run's file */
    int fd_alt;               /* the same file, for calls fd refuses with EINVAL (-1: none) */
    int64_t file_offset;
    uint64_t staging_off;
    uint64_t len;
    hfe_op *group;
    int gidx;                 /* the group's index in its submission */
    int64_t got;              /* bytes moved (set by hfe__run_staged) */
} run_t;

typedef struct copy {         /* device side: one copy */
    uint64_t device;
    uint64_t staging_off;
    uint64_t len;
} copy_t;

typedef struct chunk chunk_t;

/* Read chunks whose stream side is one wait, their copies and their
 * drained writes: the last of their workers to end (`remaining` reaches 0)
 * writes `flag` (the batch's last chunk's filled flag) and frees it. */
typedef struct batch {
    int remaining;            /* atomic */
    uint32_t *flag;
    uint32_t value;
} batch_t;

struct chunk {
    struct chunk *next;       /* the engine's FIFO */
    int refs;                 /* atomic */
    hfe_ring *ring;
    int slot;
    uint32_t gen;
    int opcode;
    const uint32_t *gate;
    uint32_t gate_value;
    int state;                /* atomic: CHUNK_* */
    int inline_read;          /* read before its stream side was enqueued: no wait */
    int nruns, ncopies;
    run_t *runs;
    copy_t *copies;
    batch_t *batch;           /* a read chunk in a batch, or NULL */
    int batch_n;              /* the first chunk of a batch: its chunks; else 0 */
};

/* A chunk's staging slot (host memory). */
static inline char *hfe__slot(const chunk_t *c)
{
    return c->ring->staging + (size_t)c->slot * c->ring->slot_size;
}

/* An operation's last chunk (or hold) has ended: it is done. */
void hfe__finish(hfe_op *op);
/* The staged path's file side (stage_io.c). A worker runs one staged
 * chunk's file side and drops its reference. */
void hfe__run_staged(chunk_t *c);
/* Drop a reference to a chunk (the last frees it). */
void hfe__chunk_decref(chunk_t *c);
/* One of a group's runs (or the submitter's hold) has ended, with `bytes`. */
void hfe__group_account(hfe_op *g, int64_t bytes);
/* After a chunk's file calls: hand its slot's other side back, account its
 * runs to their groups and drop the engine's reference. */
void hfe__release_chunk(chunk_t *c);
uint64_t hfe__chunk_bytes(const chunk_t *c);
/* The submitting thread reads a small read chunk the page cache holds
 * (RWF_NOWAIT); 1 when it did, 0 when the workers must. */
int hfe__try_inline_read(chunk_t *c);
/* The submitting thread reads a read chunk (blocking: the page cache need
 * not hold it), its slot free; the bytes not read are zeroed. */
void hfe__read_chunk_here(chunk_t *c);
/* Whether `d`, queued right after `c`, continues c's O_DIRECT read in the
 * file and in the ring (hfe_ring_set_direct_slots). */
int hfe__direct_follows(const chunk_t *c, const chunk_t *d);
/* A worker reads `n` chunks that follow each other (hfe__direct_follows)
 * with one request and drops their references. */
void hfe__run_staged_direct(chunk_t **cs, int n);
/* Queue chunks for the workers (first NULL: none) and count `ngroups`
 * operations in flight; `idle` (or NULL) says whether nothing was queued
 * before them. */
int hfe__queue_chunks(chunk_t *first, chunk_t *last, long ngroups, int *idle);
/* The stream side of one chunk, and of the `n` chunks of a batch (one wait
 * on the last one's filled flag); a hipError_t (stage_copy.c). Each stream
 * wait enqueued is counted in the ring's stream_waits. */
int hfe__enqueue_chunk(const hfe_runtime *rt, void *stream, chunk_t *c);
int hfe__enqueue_batch(const hfe_runtime *rt, void *stream, chunk_t *const *chunks, int n);

/* The caller's thread (not an engine thread) has the default timer slack,
 * 50 us: each of backoff_step's short sleeps would last that long, and a
 * condition variable's wake-up costs tens of us. A wait on the host yields
 * for its first HFE_SPIN_S seconds instead (the chunks and copies of a few
 * MiB end within them), then sleeps. */
#define HFE_SPIN_S 1e-3

static inline double hfe_seconds_since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* Polls host memory with a backoff: yields briefly, then sleeps from 2 us
 * up to 100 us. */
typedef struct backoff {
    long n;
} backoff_t;

static inline void backoff_step(backoff_t *b)
{
    if (b->n < 64) {
        b->n++;
        sched_yield();
        return;
    }
    /* about 10 ms of 2 us sleeps, then 20 us, then 100 us after a second */
    struct timespec ts = {0, b->n < 4096 ? 2000 : (b->n < 50000 ? 20000 : 100000)};
    b->n++;
    nanosleep(&ts, NULL);
}

static inline int reached(const uint32_t *flag, uint32_t value)
{
    return (int32_t)(__atomic_load_n(flag, __ATOMIC_ACQUIRE) - value) >= 0;
}

#endif
