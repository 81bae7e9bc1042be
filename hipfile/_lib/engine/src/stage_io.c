/* The staged path's file side (see stage.c): the workers' POSIX calls
 * between the file and a chunk's staging slot (one request for consecutive
 * O_DIRECT chunks, hfe_ring_set_direct_slots), the submitting thread's read
 * of a small chunk the page cache holds, the release of a chunk's slot and
 * groups after its calls, and the test faults of those calls. */
#define _GNU_SOURCE
#include "engine_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

void hfe__chunk_decref(chunk_t *c)
{
    if (c && __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        free(c->runs);
        free(c->copies);
        free(c);
    }
}

/* One of a group's runs (or the submitter's hold) has ended. */
void hfe__group_account(hfe_op *g, int64_t bytes)
{
    if (bytes)
        __atomic_add_fetch(&g->bytes, bytes, __ATOMIC_ACQ_REL);
    if (__atomic_sub_fetch(&g->chunks_left, 1, __ATOMIC_ACQ_REL) == 0)
        hfe__finish(g);
}

/* Faults of the staged path's file calls, for tests (hfe_inject). */
static int fault_errno, fault_count, fault_after;
static size_t fault_short;

void hfe_inject(int err_no, int count, size_t short_max, int after)
{
    __atomic_store_n(&fault_errno, err_no, __ATOMIC_RELEASE);
    __atomic_store_n(&fault_after, after, __ATOMIC_RELEASE);
    __atomic_store_n(&fault_count, count, __ATOMIC_RELEASE);
    __atomic_store_n(&fault_short, short_max, __ATOMIC_RELEASE);
}

static ssize_t file_call(const chunk_t *c, int fd, char *buf, size_t len, off_t off)
{
    int skip = __atomic_load_n(&fault_after, __ATOMIC_ACQUIRE);
    while (skip > 0) {
        if (__atomic_compare_exchange_n(&fault_after, &skip, skip - 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            goto call;   /* this call is one of the first `after`: it runs */
    }
    int left = __atomic_load_n(&fault_count, __ATOMIC_ACQUIRE);
    while (left > 0) {
        if (__atomic_compare_exchange_n(&fault_count, &left, left - 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            errno = __atomic_load_n(&fault_errno, __ATOMIC_ACQUIRE);
            return -1;
        }
    }
call:;
    size_t cap = __atomic_load_n(&fault_short, __ATOMIC_ACQUIRE);
    if (cap && len > cap)
        len = cap;
    return c->opcode == 0 ? pread(fd, buf, len, off) : pwrite(fd, buf, len, off);
}

/* One file run; returns the bytes moved, or -1 with *err_no. */
static ssize_t run_io(const chunk_t *c, const run_t *u, int *err_no)
{
    char *buf = c->ring->staging + (size_t)c->slot * c->ring->slot_size + u->staging_off;
    uint64_t done = 0;
    int fd = u->fd;
    while (done < u->len) {
        ssize_t n = file_call(c, fd, buf + done, u->len - done, u->file_offset + (off_t)done);
        __atomic_add_fetch(&u->group->calls, 1, __ATOMIC_RELAXED);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EINVAL && u->fd_alt >= 0 && fd != u->fd_alt) {
                fd = u->fd_alt;    /* O_DIRECT's alignment: the buffered descriptor */
                continue;
            }
            *err_no = errno;
            return -1;
        }
        if (n == 0) {
            if (c->opcode == 1) {
                *err_no = EIO;   /* a write that makes no progress */
                return -1;
            }
            break;               /* end of file: the file shrank after submit */
        }
        done += (uint64_t)n;
    }
    return (ssize_t)done;
}

static void run_chunk_io(chunk_t *c, char *slot, int abandoned);

void hfe__run_staged(chunk_t *c)
{
    hfe_ring *r = c->ring;
    uint32_t *filled = r->flags + c->slot;
    uint32_t *drained = r->flags + r->nslots + c->slot;
    char *slot = hfe__slot(c);
    backoff_t b = {0};

    /* Wait for the gate and the slot. Nothing here enters the runtime: the
     * flags are host memory that streams write. A write's abandoned chunk
     * never gets its data, so its wait ends on abandonment. */
    if (c->opcode == 0) {
        while (c->gate && !reached(c->gate, c->gate_value))
            backoff_step(&b);
        while (!reached(drained, c->gen - 1))
            backoff_step(&b);
    } else {
        while (!reached(filled, c->gen) &&
               __atomic_load_n(&c->state, __ATOMIC_ACQUIRE) != CHUNK_ABANDONED)
            backoff_step(&b);
    }
    int abandoned = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == CHUNK_ABANDONED;
    run_chunk_io(c, slot, abandoned);
    hfe__release_chunk(c);
}

int hfe__direct_follows(const chunk_t *c, const chunk_t *d)
{
    const hfe_ring *r = c->ring;
    if (!d || d->ring != r || c->opcode != 0 || d->opcode != 0 || c->nruns != 1 ||
        d->nruns != 1)
        return 0;
    const run_t *u = &c->runs[0], *v = &d->runs[0];
    /* one O_DIRECT descriptor (fd_alt: its buffered twin), c's run filling
     * its whole slot, d's slot the next one (no wrap: the two are one piece
     * of staging memory) and d's file range where c's ends, the same gate */
    return u->fd_alt >= 0 && v->fd == u->fd && v->fd_alt == u->fd_alt &&
           u->staging_off == 0 && u->len == r->slot_size && v->staging_off == 0 &&
           d->slot == c->slot + 1 && v->file_offset == u->file_offset + (int64_t)u->len &&
           d->gate == c->gate && d->gate_value == c->gate_value;
}

void hfe__run_staged_direct(chunk_t **cs, int n)
{
    chunk_t *c = cs[0];
    hfe_ring *r = c->ring;
    backoff_t b = {0};
    uint64_t total = 0;
    int i, whole = 1;

    while (c->gate && !reached(c->gate, c->gate_value))
        backoff_step(&b);
    for (i = 0; i < n; i++)
        while (!reached(r->flags + r->nslots + cs[i]->slot, cs[i]->gen - 1))
            backoff_step(&b);
    for (i = 0; i < n; i++) {
        whole = whole && __atomic_load_n(&cs[i]->state, __ATOMIC_ACQUIRE) != CHUNK_ABANDONED &&
                __atomic_load_n(&cs[i]->runs[0].group->error, __ATOMIC_ACQUIRE) == 0;
        total += cs[i]->runs[0].len;
    }
    if (!whole) {
        /* an abandoned chunk or a failed operation among them: each its own */
        for (i = 0; i < n; i++) {
            run_chunk_io(cs[i], hfe__slot(cs[i]),
                         __atomic_load_n(&cs[i]->state, __ATOMIC_ACQUIRE) == CHUNK_ABANDONED);
            hfe__release_chunk(cs[i]);
        }
        return;
    }
    /* one request into the slots, which are one piece of staging memory */
    run_t all = c->runs[0];
    int err_no = 0;
    all.len = total;
    ssize_t got = run_io(c, &all, &err_no);
    if (got < 0) {
        /* failed: each chunk is read again on its own, so that an error
         * fails the operation whose bytes it is in, not a neighbour that
         * the request took with it (chunks of other operations) */
        for (i = 0; i < n; i++) {
            run_chunk_io(cs[i], hfe__slot(cs[i]),
                         __atomic_load_n(&cs[i]->state, __ATOMIC_ACQUIRE) == CHUNK_ABANDONED);
            hfe__release_chunk(cs[i]);
        }
        return;
    }
    uint64_t left = (uint64_t)got;
    for (i = 0; i < n; i++) {
        run_t *u = &cs[i]->runs[0];
        uint64_t take = left < u->len ? left : u->len;
        if (take < u->len)   /* a stream never copies stale staging bytes */
            memset(hfe__slot(cs[i]) + u->staging_off + take, 0, u->len - take);
        u->got = (int64_t)take;
        left -= take;
    }
    for (i = 0; i < n; i++)
        hfe__release_chunk(cs[i]);
}

/* A chunk's file calls, run by run (none when abandoned); a read's bytes
 * that were not read are zeroed in the slot. */
static void run_chunk_io(chunk_t *c, char *slot, int abandoned)
{
    int i;
    for (i = 0; i < c->nruns; i++) {
        run_t *u = &c->runs[i];
        ssize_t got = 0;
        int err_no = 0;
        if (!abandoned && __atomic_load_n(&u->group->error, __ATOMIC_ACQUIRE) == 0) {
            got = run_io(c, u, &err_no);
            if (got < 0)
                hfe__set_error(u->group, -1, err_no);
        }
        if (c->opcode == 0 && (uint64_t)(got > 0 ? got : 0) < u->len) {
            /* a stream never copies stale staging bytes into device memory */
            size_t keep = got > 0 ? (size_t)got : 0;
            memset(slot + u->staging_off + keep, 0, u->len - keep);
        }
        u->got = got > 0 ? got : 0;
    }
}

void hfe__read_chunk_here(chunk_t *c)
{
    run_chunk_io(c, hfe__slot(c), 0);
    c->inline_read = 1;
}

/* After a chunk's file calls: release the slot's other side, account the
 * runs to their groups and drop the chunk's references. */
void hfe__release_chunk(chunk_t *c)
{
    hfe_ring *r = c->ring;
    uint32_t *filled = r->flags + c->slot;
    uint32_t *drained = r->flags + r->nslots + c->slot;
    int i;
    /* Release the slot's other side, before any group is accounted: once
     * every operation is done, no chunk touches the ring's memory again
     * (trim_pool may then free it). */
    int expected = CHUNK_PENDING;
    int was_pending = __atomic_compare_exchange_n(&c->state, &expected, CHUNK_DONE, 0,
                                                  __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    if (c->opcode == 0) {
        batch_t *b = c->batch;
        if (!b) {
            __atomic_store_n(filled, c->gen, __ATOMIC_RELEASE);
        } else if (__atomic_sub_fetch(&b->remaining, 1, __ATOMIC_ACQ_REL) == 0) {
            /* the batch's last worker: every slot of it holds its bytes.
             * Never lowered: after a failed enqueue (abandon_from) the
             * last chunk's slot may already hold a later chunk. */
            uint32_t cur = __atomic_load_n(b->flag, __ATOMIC_ACQUIRE);
            while ((int32_t)(cur - b->value) < 0 &&
                   !__atomic_compare_exchange_n(b->flag, &cur, b->value, 0, __ATOMIC_RELEASE,
                                                __ATOMIC_ACQUIRE))
                ;
            free(b);
        }
        if (!was_pending)   /* abandoned: no stream will drain the slot */
            __atomic_store_n(drained, c->gen, __ATOMIC_RELEASE);
    } else {
        __atomic_store_n(drained, c->gen, __ATOMIC_RELEASE);
    }
    /* a read's group is done on the host only once its stream has copied
     * (after the store above); a write's once its runs are */
    for (i = 0; i < c->nruns; i++)
        hfe__group_account(c->runs[i].group, c->runs[i].got);
    for (i = 0; i < c->nruns; i++)
        hfe_op_decref(c->runs[i].group);   /* the chunk's reference */
    hfe__chunk_decref(c);
}

uint64_t hfe__chunk_bytes(const chunk_t *c)
{
    uint64_t n = 0;
    for (int i = 0; i < c->nruns; i++)
        n += c->runs[i].len;
    return n;
}

/* The submitting thread reads a small read chunk itself when its slot is
 * free and every byte is in the page cache (preadv2 with RWF_NOWAIT, which
 * never waits for the disk): no hand-off to a worker and no stream wait on
 * its filled flag. Returns 1 when the chunk's runs hold their bytes (the
 * caller then releases it), 0 when the workers must read it (nothing was
 * committed: they read every run again). */
int hfe__try_inline_read(chunk_t *c)
{
    hfe_ring *r = c->ring;
    char *slot = hfe__slot(c);
    long calls[64];
    int i;
    if (c->opcode != 0 || c->gate || c->nruns > 64 ||
        __atomic_load_n(&fault_count, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&fault_after, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&fault_short, __ATOMIC_ACQUIRE) ||
        !reached(r->flags + r->nslots + c->slot, c->gen - 1))
        return 0;
    for (i = 0; i < c->nruns; i++) {
        run_t *u = &c->runs[i];
        uint64_t done = 0;
        calls[i] = 0;
        if (__atomic_load_n(&u->group->error, __ATOMIC_ACQUIRE))
            return 0;
        while (done < u->len) {
            struct iovec v = {slot + u->staging_off + done, (size_t)(u->len - done)};
            ssize_t n = preadv2(u->fd, &v, 1, u->file_offset + (off_t)done, RWF_NOWAIT);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return 0;      /* EAGAIN (not cached), or no RWF_NOWAIT: the workers */
            calls[i]++;
            if (n == 0)
                break;         /* end of file */
            done += (uint64_t)n;
        }
        u->got = (int64_t)done;
    }
    for (i = 0; i < c->nruns; i++) {
        run_t *u = &c->runs[i];
        __atomic_add_fetch(&u->group->calls, calls[i], __ATOMIC_RELAXED);
        if ((uint64_t)u->got < u->len)
            memset(slot + u->staging_off + u->got, 0, u->len - (uint64_t)u->got);
    }
    c->inline_read = 1;
    return 1;
}
