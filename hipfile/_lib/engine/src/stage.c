/* The stream engine's staged path (see engine.h): file I/O by worker
 * threads into a ring of pinned staging slots, the device side enqueued on
 * the stream at submit. Here: the ring, the plan of a submission's chunks
 * and the submission; the file side is in stage_io.c, the stream side in
 * stage_copy.c. */
#define _GNU_SOURCE
#include "engine_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

int hfe_flag_reached(const uint32_t *flag, uint32_t value) { return reached(flag, value); }

int hfe_flag_wait(const uint32_t *flag, uint32_t value, double timeout_s)
{
    struct timespec t0;
    backoff_t b = {0};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!reached(flag, value)) {
        double spent = hfe_seconds_since(&t0);
        if (timeout_s >= 0 && spent >= timeout_s)
            return 0;
        if (spent < HFE_SPIN_S)
            sched_yield();
        else
            backoff_step(&b);
    }
    return 1;
}

hfe_ring *hfe_ring_new(void *staging, size_t slot_size, int nslots, uint32_t *flags_host,
                       uint64_t flags_dev)
{
    if (!staging || !slot_size || nslots <= 0 || !flags_host)
        return NULL;
    hfe_ring *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->staging = staging;
    r->slot_size = slot_size;
    r->nslots = nslots;
    r->flags = flags_host;
    r->flags_dev = flags_dev;
    r->ncopy = 1;
    r->copy_batch = 1;
    r->direct_slots = 1;
    pthread_mutex_init(&r->lock, NULL);
    return r;
}

void hfe_ring_set_copy_streams(hfe_ring *ring, int n, void *const *streams, void *fork_event,
                               void *const *join_events)
{
    pthread_mutex_lock(&ring->lock);
    if (n <= 1 || n > HFE_MAX_COPY_STREAMS || !streams || !fork_event || !join_events) {
        ring->ncopy = 1;
    } else {
        for (int i = 0; i < n; i++) {
            ring->copy_streams[i] = streams[i];
            ring->join_events[i] = join_events[i];
        }
        ring->fork_event = fork_event;
        ring->ncopy = n;
    }
    pthread_mutex_unlock(&ring->lock);
}

/* Read chunks per stream wait as the ring allows: 1 to half its slots. */
static int batch_bound(const hfe_ring *ring, int n)
{
    int most = ring->nslots / 2;
    n = n > most ? most : n;
    return n < 1 ? 1 : n;
}

void hfe_ring_set_copy_batch(hfe_ring *ring, int n)
{
    pthread_mutex_lock(&ring->lock);
    ring->copy_batch = batch_bound(ring, n);
    pthread_mutex_unlock(&ring->lock);
}

void hfe_ring_set_direct_slots(hfe_ring *ring, int n)
{
    int most = ring->nslots / 2 < HFE_MAX_DIRECT_SLOTS ? ring->nslots / 2 : HFE_MAX_DIRECT_SLOTS;
    pthread_mutex_lock(&ring->lock);
    ring->direct_slots = n > most ? most : (n < 1 ? 1 : n);
    pthread_mutex_unlock(&ring->lock);
}

int hfe_ring_direct_slots(const hfe_ring *ring) { return ring->direct_slots; }

void hfe_ring_stream_counts(hfe_ring *ring, uint64_t *calls, uint64_t *waits)
{
    pthread_mutex_lock(&ring->lock);
    *calls = ring->stream_calls;
    *waits = ring->stream_waits;
    pthread_mutex_unlock(&ring->lock);
}

void hfe_ring_free(hfe_ring *ring)
{
    if (ring) {
        pthread_mutex_destroy(&ring->lock);
        free(ring);
    }
}

size_t hfe_ring_slot_size(const hfe_ring *ring) { return ring->slot_size; }

/* Room for item n of an array of `size`-byte items with *cap of them
 * allocated: doubles it (from 4) when full; -1 without memory. */
static int reserve(void **items, int *cap, int n, size_t size)
{
    if (n < *cap)
        return 0;
    int grown_cap = *cap ? 2 * *cap : 4;
    void *grown = realloc(*items, (size_t)grown_cap * size);
    if (!grown)
        return -1;
    *items = grown;
    *cap = grown_cap;
    return 0;
}

/* Packs a submission's pieces in order into chunks of at most `cap` bytes;
 * file runs merge where one group's file range continues, copies where
 * device memory of one allocation does.
 * last_chunk[g]: the index of group g's last chunk (-1: none). */
static int plan(const hfe_submission *sub, size_t cap, chunk_t ***out, int *nout,
                int *last_chunk)
{
    const hfe_piece *pieces = sub->pieces;
    int opcode = sub->opcode, fd = sub->fd;
    chunk_t **chunks = NULL;
    int n = 0, capn = 0, i;
    chunk_t *c = NULL;
    uint64_t used = 0;
    int runs_cap = 0, copies_cap = 0;
    int copy_alloc = 0;     /* the allocation of the chunk's last copy */
    for (i = 0; i < sub->npieces; i++) {
        const hfe_piece *p = &pieces[i];
        uint64_t done = 0;
        while (done < p->len) {
            if (!c || used == cap) {
                if (reserve((void **)&chunks, &capn, n, sizeof(*chunks)))
                    goto fail;
                c = calloc(1, sizeof(*c));
                if (!c)
                    goto fail;
                c->opcode = opcode;
                c->refs = 2;
                chunks[n++] = c;
                used = 0;
                runs_cap = copies_cap = 0;
            }
            uint64_t len = p->len - done;
            if (len > cap - used)
                len = cap - used;
            hfe_op *g = sub->groups[p->group];
            int pfd = p->fd >= 0 ? p->fd : fd;
            int palt = p->fd >= 0 ? p->fd_alt : -1;
            int64_t foff = p->file_offset + (int64_t)done;
            run_t *lr = c->nruns ? &c->runs[c->nruns - 1] : NULL;
            if (lr && lr->group == g && lr->fd == pfd && lr->fd_alt == palt &&
                lr->file_offset + (int64_t)lr->len == foff && lr->staging_off + lr->len == used) {
                lr->len += len;
            } else {
                if (reserve((void **)&c->runs, &runs_cap, c->nruns, sizeof(run_t)))
                    goto fail;
                c->runs[c->nruns++] = (run_t){pfd, palt, foff, used, len, g, p->group, 0};
            }
            copy_t *lc = c->ncopies ? &c->copies[c->ncopies - 1] : NULL;
            if (lc && copy_alloc == p->alloc && lc->device + lc->len == p->device + done &&
                lc->staging_off + lc->len == used) {
                lc->len += len;
            } else {
                if (reserve((void **)&c->copies, &copies_cap, c->ncopies, sizeof(copy_t)))
                    goto fail;
                c->copies[c->ncopies++] = (copy_t){p->device + done, used, len};
                copy_alloc = p->alloc;
            }
            used += len;
            done += len;
            last_chunk[p->group] = n - 1;
        }
    }
    *out = chunks;
    *nout = n;
    return 0;
fail:
    for (i = 0; i < n; i++) {
        free(chunks[i]->runs);
        free(chunks[i]->copies);
        free(chunks[i]);
    }
    free(chunks);
    return ENOMEM;
}

/* One submission as the helpers below see it: the chunks planned over the
 * ring, the groups (operations) they belong to and where each group's
 * completion goes. */
typedef struct submission {
    hfe_ring *ring;
    const hfe_runtime *rt;
    int opcode;
    void *stream;
    chunk_t **chunks;
    int nchunks;
    hfe_op **groups;
    int ngroups;
    int *last_chunk;              /* a group's last chunk; -1: it has none */
    const uint64_t *complete_dev; /* a read group's completion flag (device address), or 0 */
    const uint32_t *complete_value;
    int copy_batch;               /* read chunks per stream wait (the ring's, or the caller's) */
} submission_t;

/* Each group: the engine's reference, and a hold of the submitter's so that
 * it cannot finish before the stream's side is enqueued; each chunk holds
 * the groups of its runs. */
static void take_references(const submission_t *sb)
{
    int i, j, k;
    for (i = 0; i < sb->ngroups; i++) {
        sb->groups[i]->chunks_left = 1;
        sb->groups[i]->stream_completes = sb->opcode == 0 && sb->complete_dev[i] != 0;
        hfe_op_incref(sb->groups[i]);
    }
    for (j = 0; j < sb->nchunks; j++)
        for (k = 0; k < sb->chunks[j]->nruns; k++) {
            __atomic_add_fetch(&sb->chunks[j]->runs[k].group->chunks_left, 1, __ATOMIC_RELAXED);
            hfe_op_incref(sb->chunks[j]->runs[k].group);   /* the chunk's */
        }
}

/* The engine refused the chunks (shut down): drop every reference taken. */
static void drop_references(const submission_t *sb)
{
    int i, j, k;
    for (j = 0; j < sb->nchunks; j++) {
        if (sb->chunks[j]->batch_n)
            free(sb->chunks[j]->batch);   /* no worker ran any of it */
        for (k = 0; k < sb->chunks[j]->nruns; k++)
            hfe_op_decref(sb->chunks[j]->runs[k].group);
        hfe__chunk_decref(sb->chunks[j]);
        hfe__chunk_decref(sb->chunks[j]);
    }
    for (i = 0; i < sb->ngroups; i++)
        hfe_op_decref(sb->groups[i]);
}

/* Slots and generations in sequence order (under ring->lock). */
static void reserve_slots(const submission_t *sb, const uint32_t *gate, uint32_t gate_value)
{
    hfe_ring *ring = sb->ring;
    int j;
    for (j = 0; j < sb->nchunks; j++) {
        uint64_t seq = ring->next + (uint64_t)j;
        chunk_t *c = sb->chunks[j];
        c->ring = ring;
        c->slot = (int)(seq % (uint64_t)ring->nslots);
        c->gen = (uint32_t)(seq / (uint64_t)ring->nslots + 1);
        c->gate = sb->opcode == 0 ? gate : NULL;
        c->gate_value = gate_value;
        c->next = j + 1 < sb->nchunks ? sb->chunks[j + 1] : NULL;
    }
}

/* The copy stream chunk j goes to when the submission spreads its copies
 * over ncopy > 1 streams: a group's chunks to one stream where there are
 * several groups, else round robin. */
static int copy_stream_of(const submission_t *sb, int j, int ncopy)
{
    const chunk_t *c = sb->chunks[j];
    return sb->ngroups > 1 && c->nruns ? c->runs[0].gidx % ncopy : j % ncopy;
}

/* Read chunks in batches of up to sb->copy_batch (under ring->lock,
 * after reserve_slots, before the workers see the chunks): consecutive
 * chunks that go to one copy stream, a batch ending where a group ends
 * (its completion is not held back by the next group's reads). Without
 * memory, chunks stay one by one. */
static void form_batches(const submission_t *sb)
{
    hfe_ring *ring = sb->ring;
    int ncopy = sb->nchunks > 1 ? ring->ncopy : 1, i, j = 0;
    if (sb->opcode != 0 || sb->copy_batch <= 1 || sb->nchunks < 2)
        return;
    char *ends = calloc((size_t)sb->nchunks, 1);
    if (!ends)
        return;
    for (i = 0; i < sb->ngroups; i++)
        if (sb->last_chunk[i] >= 0)
            ends[sb->last_chunk[i]] = 1;
    while (j < sb->nchunks) {
        int pick = ncopy > 1 ? copy_stream_of(sb, j, ncopy) : 0, n = 1;
        while (j + n < sb->nchunks && n < sb->copy_batch && !ends[j + n - 1] &&
               (ncopy == 1 || copy_stream_of(sb, j + n, ncopy) == pick))
            n++;
        batch_t *b = n > 1 ? malloc(sizeof(*b)) : NULL;
        if (b) {
            b->remaining = n;
            b->flag = ring->flags + sb->chunks[j + n - 1]->slot;
            b->value = sb->chunks[j + n - 1]->gen;
            for (i = 0; i < n; i++)
                sb->chunks[j + i]->batch = b;
            sb->chunks[j]->batch_n = n;
        }
        j += n;
    }
    free(ends);
}

/* Write read group i's completion flag on stream s. */
static int complete_group(const submission_t *sb, void *s, int i)
{
    return hfe__counted(sb->ring, sb->rt->write_value32(s, (void *)(uintptr_t)sb->complete_dev[i],
                                                        sb->complete_value[i], 0));
}

/* The stream's side, chunk by chunk, while the engine already moves file
 * bytes. A read group's completion is written after its last copy (a group
 * with no bytes: before the first chunk). With several copy streams, the
 * chunks are spread over them between a fork from the submission's stream
 * and a join back into it: a group's chunks go to one copy stream where
 * there are several groups (its completion then follows its last chunk
 * there), else round robin (its completion follows the join). Each copy
 * stream gets its chunks in sequence order, so every wait still points to
 * earlier work. Returns the hipError_t of a failed enqueue, with the first
 * chunk whose side may be incomplete in *failed_at. */
static int enqueue_stream_side(const submission_t *sb, int *failed_at)
{
    hfe_ring *ring = sb->ring;
    const hfe_runtime *rt = sb->rt;
    int reads = sb->opcode == 0, i, j, k, n, err = 0;
    int ncopy = sb->nchunks > 1 ? ring->ncopy : 1;
    int *where = NULL;            /* a group's copy stream; -2: several */
    if (ncopy > 1) {
        where = malloc((size_t)(sb->ngroups > 0 ? sb->ngroups : 1) * sizeof(int));
        if (!where)
            ncopy = 1;
        for (i = 0; where && i < sb->ngroups; i++)
            where[i] = -1;
    }
    for (i = 0; reads && !err && i < sb->ngroups; i++)
        if (sb->last_chunk[i] < 0 && sb->complete_dev[i])
            err = complete_group(sb, sb->stream, i);
    if (!err && ncopy > 1) {
        err = hfe__counted(ring, rt->event_record(ring->fork_event, sb->stream));
        for (k = 0; !err && k < ncopy; k++)
            err = hfe__counted(ring, rt->stream_wait_event(ring->copy_streams[k],
                                                           ring->fork_event, 0));
    }
    for (j = 0; !err && j < sb->nchunks; j += n) {
        chunk_t *c = sb->chunks[j];
        void *s = sb->stream;
        n = c->batch_n > 1 ? c->batch_n : 1;   /* a batch's chunks go to one stream */
        if (ncopy > 1) {
            int pick = copy_stream_of(sb, j, ncopy), m;
            s = ring->copy_streams[pick];
            for (m = j; m < j + n; m++)
                for (k = 0; k < sb->chunks[m]->nruns; k++) {
                    int g = sb->chunks[m]->runs[k].gidx;
                    where[g] = where[g] == -1 || where[g] == pick ? pick : -2;
                }
        }
        err = n > 1 ? hfe__enqueue_batch(rt, s, sb->chunks + j, n) : hfe__enqueue_chunk(rt, s, c);
        for (i = 0; reads && !err && i < sb->ngroups; i++)
            if (sb->last_chunk[i] >= j && sb->last_chunk[i] < j + n && sb->complete_dev[i] &&
                (ncopy == 1 || where[i] >= 0))
                err = complete_group(sb, s, i);
        if (err)
            *failed_at = j;
    }
    if (!err && ncopy > 1) {
        for (k = 0; !err && k < ncopy; k++) {
            err = hfe__counted(ring, rt->event_record(ring->join_events[k],
                                                      ring->copy_streams[k]));
            if (!err)
                err = hfe__counted(ring, rt->stream_wait_event(sb->stream,
                                                               ring->join_events[k], 0));
        }
        for (i = 0; reads && !err && i < sb->ngroups; i++)
            if (sb->last_chunk[i] >= 0 && sb->complete_dev[i] && where[i] < 0)
                err = complete_group(sb, sb->stream, i);
        if (err)
            *failed_at = sb->nchunks - 1;
    }
    free(where);
    if (err && *failed_at < 0)
        *failed_at = 0;
    return err;
}

/* A failed enqueue: abandon every chunk whose stream side is not complete
 * (the engine then skips its file I/O and releases the slot itself; a read
 * chunk the engine finished already has its slot released here), and fail
 * the groups whose completion was not enqueued, releasing their waiters
 * from here (under ring->lock). */
static void abandon_from(const submission_t *sb, int failed_at)
{
    hfe_ring *ring = sb->ring;
    int reads = sb->opcode == 0, i, j;
    for (j = failed_at; j < sb->nchunks; j++) {
        chunk_t *c = sb->chunks[j];
        int expected = CHUNK_PENDING;
        if (!__atomic_compare_exchange_n(&c->state, &expected, CHUNK_ABANDONED, 0,
                                         __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) && reads)
            __atomic_store_n(ring->flags + ring->nslots + c->slot, c->gen, __ATOMIC_RELEASE);
    }
    for (i = 0; i < sb->ngroups; i++) {
        if (sb->last_chunk[i] >= failed_at || (reads && sb->last_chunk[i] < 0 && failed_at == 0)) {
            hfe_op *g = sb->groups[i];
            hfe__set_error(g, -1, EIO);
            if (reads && sb->complete_dev[i] && g->flag)
                __atomic_store_n(g->flag, g->flag_value, __ATOMIC_RELEASE);
        }
    }
}

/* Whether a submission is a lone buffered read of at most `most` bytes,
 * to be read before its stream side is enqueued (hfe_stage_submit). */
static int read_first(const submission_t *sb, const uint32_t *gate, uint64_t most)
{
    uint64_t total = 0;
    if (!most || sb->opcode != 0 || gate || sb->ngroups != 1)
        return 0;
    for (int j = 0; j < sb->nchunks; j++) {
        const chunk_t *c = sb->chunks[j];
        for (int k = 0; k < c->nruns; k++)
            if (c->runs[k].fd_alt >= 0)   /* O_DIRECT: the disk, not the page cache */
                return 0;
        total += hfe__chunk_bytes(c);
    }
    return total <= most;
}

/* Wait (yielding, at most HFE_SPIN_S) for the workers to read every chunk
 * of the submission; if they all have, mark them so that their stream
 * side waits for no flag. */
static void wait_read(const submission_t *sb)
{
    struct timespec t0;
    int j = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (j < sb->nchunks) {
        if (__atomic_load_n(&sb->chunks[j]->state, __ATOMIC_ACQUIRE) == CHUNK_DONE)
            j++;       /* its bytes are in its slot (release_chunk) */
        else if (hfe_seconds_since(&t0) < HFE_SPIN_S)
            sched_yield();
        else
            return;    /* still reading: the stream waits for it */
    }
    for (j = 0; j < sb->nchunks; j++)
        sb->chunks[j]->inline_read = 1;
}

/* Whether a submission is a lone buffered read (one group, its stream
 * idle: no gate) of at most `most` bytes: one the submitting thread reads
 * itself where the page cache holds it (read_here). */
static int lone_read(const hfe_submission *sub, uint64_t most)
{
    uint64_t total = 0;
    if (!most || sub->opcode != 0 || sub->gate || sub->ngroups != 1 || sub->npieces <= 0)
        return 0;
    for (int i = 0; i < sub->npieces; i++) {
        if (sub->pieces[i].fd >= 0 && sub->pieces[i].fd_alt >= 0)
            return 0;      /* O_DIRECT: the disk, not the page cache */
        total += sub->pieces[i].len;
    }
    return total > 0 && total <= most;
}

/* Whether every chunk's slot is free now (the copy of its last use has
 * handed it back): the submitting thread never waits for a stream. */
static int slots_free(const submission_t *sb)
{
    const hfe_ring *r = sb->ring;
    for (int j = 0; j < sb->nchunks; j++) {
        const chunk_t *c = sb->chunks[j];
        if (!reached(r->flags + r->nslots + c->slot, c->gen - 1))
            return 0;
    }
    return 1;
}

/* The submitting thread reads a lone read's chunks in order, the first
 * read already (hfe__try_inline_read): each chunk's stream side (its
 * copies and the slot handed back, no wait) is enqueued as soon as its
 * bytes are in, so that the copy runs while the next chunk is read, as
 * one preadv and one copy would go, overlapped. A chunk the page cache no
 * longer holds is read here all the same (blocking: its slot is free).
 * Under ring->lock, the group counted outstanding. Returns the hipError_t
 * of a failed enqueue, with the first chunk not released in *failed_at. */
static int read_here(const submission_t *sb, int *failed_at)
{
    int j, err = 0;
    for (j = 0; j < sb->nchunks; j++) {
        chunk_t *c = sb->chunks[j];
        if (j > 0 && !hfe__try_inline_read(c))
            hfe__read_chunk_here(c);
        err = hfe__enqueue_chunk(sb->rt, sb->stream, c);
        if (!err && j == sb->last_chunk[0] && sb->complete_dev[0])
            err = complete_group(sb, sb->stream, 0);
        if (err) {
            *failed_at = j;
            return err;
        }
        hfe__release_chunk(c);   /* the workers' reference: the submitter keeps its own */
    }
    return 0;
}

/* The rest of hfe_stage_submit for a lone read whose first chunk the
 * submitting thread has read (under ring->lock, which it releases). */
static int lone_submit(submission_t *sb, hfe_ring *ring)
{
    int j, err, failed_at = -1;
    if (hfe__queue_chunks(NULL, NULL, sb->ngroups, NULL)) {
        pthread_mutex_unlock(&ring->lock);
        drop_references(sb);
        free(sb->chunks);
        free(sb->last_chunk);
        return -ESHUTDOWN;
    }
    ring->next += (uint64_t)sb->nchunks;
    err = read_here(sb, &failed_at);
    if (err) {
        abandon_from(sb, failed_at);
        for (j = failed_at; j < sb->nchunks; j++)
            hfe__release_chunk(sb->chunks[j]);   /* no worker has them */
    }
    pthread_mutex_unlock(&ring->lock);
    for (j = 0; j < sb->nchunks; j++)
        hfe__chunk_decref(sb->chunks[j]);
    hfe__group_account(sb->groups[0], 0);   /* the submitter's hold */
    free(sb->chunks);
    free(sb->last_chunk);
    return err;
}

int hfe_stage_submit(hfe_ring *ring, const hfe_runtime *rt, const hfe_submission *sub)
{
    int opcode = sub->opcode, ngroups = sub->ngroups;
    hfe_op **groups = sub->groups;
    const uint32_t *gate = sub->gate;
    size_t chunk_cap = sub->chunk_cap, inline_max = sub->inline_max;
    submission_t sb = {ring, rt, opcode, sub->stream, NULL, 0, groups, ngroups, NULL,
                       sub->complete_dev, sub->complete_value, 0};
    int i, j, err = 0, failed_at = -1;
    sb.last_chunk = malloc((size_t)(ngroups > 0 ? ngroups : 1) * sizeof(int));
    if (!sb.last_chunk)
        return -ENOMEM;
    if (chunk_cap == 0 || chunk_cap > ring->slot_size)
        chunk_cap = ring->slot_size;
    int lone = lone_read(sub, inline_max);
    for (i = 0; i < ngroups; i++)
        sb.last_chunk[i] = -1;
    if (plan(sub, chunk_cap, &sb.chunks, &sb.nchunks, sb.last_chunk)) {
        free(sb.last_chunk);
        return -ENOMEM;
    }
    take_references(&sb);

    pthread_mutex_lock(&ring->lock);
    sb.copy_batch = sub->copy_batch <= 0 ? ring->copy_batch : batch_bound(ring, sub->copy_batch);
    reserve_slots(&sb, gate, sub->gate_value);
    if (lone && sb.nchunks && slots_free(&sb) && hfe__try_inline_read(sb.chunks[0]))
        return lone_submit(&sb, ring);
    /* a lone small read chunk that the page cache holds: read here */
    int inline_done = sb.nchunks == 1 && opcode == 0 && !gate && inline_max &&
                      sb.chunks[0]->nruns && hfe__chunk_bytes(sb.chunks[0]) <= inline_max &&
                      hfe__try_inline_read(sb.chunks[0]);
    if (!inline_done)
        form_batches(&sb);
    int queue = sb.nchunks && !inline_done, idle = 0;
    if (hfe__queue_chunks(queue ? sb.chunks[0] : NULL, queue ? sb.chunks[sb.nchunks - 1] : NULL,
                          ngroups, &idle)) {
        pthread_mutex_unlock(&ring->lock);
        drop_references(&sb);
        free(sb.chunks);
        free(sb.last_chunk);
        return -ESHUTDOWN;
    }
    ring->next += (uint64_t)sb.nchunks;
    if (inline_done)
        /* the workers' reference: the submitter keeps its own */
        hfe__release_chunk(sb.chunks[0]);

    /* waited for under ring->lock: on every stream, stream sides stay in
     * sequence order, so that the copy releasing a slot is never behind one
     * that waits for that slot's next chunk (two threads' reads on the
     * engine's stream, each wrapping onto the other's slots, would deadlock) */
    if (queue && idle && read_first(&sb, gate, sub->read_first))
        wait_read(&sb);
    err = enqueue_stream_side(&sb, &failed_at);
    if (err)
        abandon_from(&sb, failed_at);
    pthread_mutex_unlock(&ring->lock);
    for (j = 0; j < sb.nchunks; j++)
        hfe__chunk_decref(sb.chunks[j]);
    for (i = 0; i < ngroups; i++)
        hfe__group_account(groups[i], 0);   /* the submitter's hold */
    free(sb.chunks);
    free(sb.last_chunk);
    return err;
}
