/* The staged path's stream side (see stage.c): the waits on a slot's
 * flags, the copies between staging slots and device memory, and the
 * writes that hand a slot back, for one chunk or for a batch of chunks.
 * Every runtime call is counted in the ring's stream_calls. */
#include "engine_internal.h"

#include <stdlib.h>

/* hipMemcpyHostToDevice, hipMemcpyDeviceToHost; hipStreamWaitValueGte */
enum { H2D = 1, D2H = 2, WAIT_GTE = 0 };

/* hipMemcpyAttributes: the source is read in stream order (the only
 * order in which a staging slot holds its bytes). */
typedef struct {
    int src_access_order;
    int src_loc_type, src_loc_id, dst_loc_type, dst_loc_id;
    unsigned flags;
} memcpy_attrs_t;
enum { SRC_ACCESS_ORDER_STREAM = 1, BATCH_ON_STACK = 64 };

static uint64_t filled_dev(const chunk_t *c)
{
    return c->ring->flags_dev + 4 * (uint64_t)c->slot;
}

static uint64_t drained_dev(const chunk_t *c)
{
    return c->ring->flags_dev + 4 * (uint64_t)(c->ring->nslots + c->slot);
}

/* One hipMemcpyBatchAsync over every copy of `n` chunks; 1 when it is not
 * worth it or was refused (the caller then copies one by one: a copy the
 * batch enqueued before it failed runs twice, with the same bytes). */
static int try_batch(const hfe_runtime *rt, void *stream, chunk_t *const *chunks, int n)
{
    int i, k, total = 0, h2d = chunks[0]->opcode == 0, err = 1;
    for (k = 0; k < n; k++)
        total += chunks[k]->ncopies;
    if (total < 2 || !rt->memcpy_batch_async)
        return 1;
    void *dst_local[BATCH_ON_STACK], *src_local[BATCH_ON_STACK];
    size_t size_local[BATCH_ON_STACK];
    void **dsts = dst_local, **srcs = src_local;
    size_t *sizes = size_local;
    if (total > BATCH_ON_STACK) {
        dsts = malloc((size_t)total * sizeof(void *));
        srcs = malloc((size_t)total * sizeof(void *));
        sizes = malloc((size_t)total * sizeof(size_t));
    }
    if (dsts && srcs && sizes) {
        int m = 0;
        for (k = 0; k < n; k++) {
            const chunk_t *c = chunks[k];
            char *slot = hfe__slot(c);
            for (i = 0; i < c->ncopies; i++, m++) {
                void *dev = (void *)(uintptr_t)c->copies[i].device;
                void *host = slot + c->copies[i].staging_off;
                dsts[m] = h2d ? dev : host;
                srcs[m] = h2d ? host : dev;
                sizes[m] = c->copies[i].len;
            }
        }
        memcpy_attrs_t attrs = {SRC_ACCESS_ORDER_STREAM, 0, 0, 0, 0, 0};
        size_t attrs_idx = 0, fail_idx = 0;
        err = hfe__counted(chunks[0]->ring,
                           rt->memcpy_batch_async(dsts, srcs, sizes, (size_t)total, &attrs,
                                                  &attrs_idx, 1, &fail_idx, stream)) != 0;
    }
    if (dsts != dst_local) {
        free(dsts);
        free(srcs);
        free(sizes);
    }
    return err;
}

/* The copies of `n` chunks between their staging slots and device memory:
 * one hipMemcpyBatchAsync where the runtime has it, else one
 * hipMemcpyAsync each. With hipMemcpyBatchAsync, 64 KiB scattered blocks
 * move at about three times the rate of one call per block. */
static int enqueue_copies(const hfe_runtime *rt, void *stream, chunk_t *const *chunks, int n)
{
    hfe_ring *ring = chunks[0]->ring;
    int i, k, err = 0;
    if (!try_batch(rt, stream, chunks, n))
        return 0;
    for (k = 0; !err && k < n; k++) {
        const chunk_t *c = chunks[k];
        char *slot = hfe__slot(c);
        for (i = 0; !err && i < c->ncopies; i++) {
            void *dev = (void *)(uintptr_t)c->copies[i].device;
            void *host = slot + c->copies[i].staging_off;
            size_t len = c->copies[i].len;
            err = hfe__counted(ring, c->opcode == 0
                                         ? rt->memcpy_async(dev, host, len, H2D, stream)
                                         : rt->memcpy_async(host, dev, len, D2H, stream));
        }
    }
    return err;
}

/* hipStreamWaitValue32 for *flag >= value (flag: a device address), counted
 * in the ring's stream_waits (the caller holds ring->lock). */
static int wait_flag(const hfe_runtime *rt, void *stream, hfe_ring *ring, uint64_t flag,
                     uint32_t value)
{
    int err = hfe__counted(ring, rt->wait_value32(stream, (void *)(uintptr_t)flag, value,
                                                  WAIT_GTE, 0xFFFFFFFFu));
    if (!err)
        ring->stream_waits++;
    return err;
}

/* Write *flag = value on the stream (a slot handed back or filled). */
static int write_flag(const hfe_runtime *rt, void *stream, hfe_ring *ring, uint64_t flag,
                      uint32_t value)
{
    return hfe__counted(ring, rt->write_value32(stream, (void *)(uintptr_t)flag, value, 0));
}

/* Hand back the slots of a batch's `n` chunks: one hipMemsetD32Async for
 * each run of consecutive slots of one generation (a batch wraps round the
 * ring at most once, so one or two calls) where the runtime has it, else
 * one write per chunk. */
static int write_drained(const hfe_runtime *rt, void *stream, chunk_t *const *chunks, int n)
{
    hfe_ring *ring = chunks[0]->ring;
    int k = 0, m, err = 0;
    while (!err && k < n) {
        const chunk_t *c = chunks[k];
        m = 1;
        while (rt->memset_d32_async && k + m < n && chunks[k + m]->slot == c->slot + m &&
               chunks[k + m]->gen == c->gen)
            m++;
        if (m > 1)
            err = hfe__counted(ring, rt->memset_d32_async((void *)(uintptr_t)drained_dev(c),
                                                          (int)c->gen, (size_t)m, stream));
        else
            err = write_flag(rt, stream, ring, drained_dev(c), c->gen);
        k += m;
    }
    return err;
}

int hfe__enqueue_chunk(const hfe_runtime *rt, void *stream, chunk_t *c)
{
    int err;
    if (c->opcode == 0) {
        /* a chunk read at submit is filled already: no wait */
        err = c->inline_read ? 0 : wait_flag(rt, stream, c->ring, filled_dev(c), c->gen);
        if (!err)
            err = enqueue_copies(rt, stream, &c, 1);
        if (!err)
            err = write_flag(rt, stream, c->ring, drained_dev(c), c->gen);
    } else {
        err = c->gen > 1 ? wait_flag(rt, stream, c->ring, drained_dev(c), c->gen - 1) : 0;
        if (!err)
            err = enqueue_copies(rt, stream, &c, 1);
        if (!err)
            err = write_flag(rt, stream, c->ring, filled_dev(c), c->gen);
    }
    return err;
}

int hfe__enqueue_batch(const hfe_runtime *rt, void *stream, chunk_t *const *chunks, int n)
{
    /* the last of the batch's workers to end writes the last chunk's
     * filled flag for all of them (release_chunk) */
    const chunk_t *last = chunks[n - 1];
    /* chunks read before the submission returned (hfe_stage_submit) need none */
    int err = last->inline_read ? 0 : wait_flag(rt, stream, last->ring, filled_dev(last),
                                                last->gen);
    if (!err)
        err = enqueue_copies(rt, stream, chunks, n);
    if (!err)
        err = write_drained(rt, stream, chunks, n);
    return err;
}
