/* The stream-ordered parallel I/O engine (see engine.h). */
#define _GNU_SOURCE
#include "engine_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct gate {
    const uint32_t *ptr;
    uint32_t value;
    void *event;              /* an event gate, when ptr is NULL */
    int n;
    hfe_op **ops;
    struct gate *next;
} gate_t;


static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER;   /* ready queue or stop */
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;   /* gates or stop */
static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;   /* an operation finished */

static hfe_op *ready_head, *ready_tail;
static chunk_t *chunk_head, *chunk_tail;   /* staged chunks, in submission order */
static gate_t *gates;
static long outstanding;      /* submitted, not finished (under lock) */
static int draining;          /* a stop waits for the outstanding operations */
static int stopping;          /* the threads exit */
static int called_library;    /* a worker has called hipFile (op->fn) since it started */
static int nthreads;          /* workers running */
static pthread_t *workers;
static pthread_t gate_thread;
static int gate_running;
static hfe_set_device_fn set_device_fn;
static hfe_event_fn event_query_fn, event_destroy_fn;

static __thread int thread_device = -1;

/* ---------------------------------------------------------------- ops */

hfe_op *hfe_op_new(int opcode, const hfe_span *range, int device, size_t task_size,
                   uint32_t *flag, uint32_t flag_value)
{
    size_t size = (size_t)range->len;
    hfe_op *op = calloc(1, sizeof(*op));
    if (!op)
        return NULL;
    op->refs = 1;
    op->opcode = opcode;
    op->size = size;
    op->file_offset = range->file_offset;
    op->buffer_offset = range->buffer_offset;
    op->device = device;
    op->task = task_size ? task_size : ((size_t)4 << 20);
    op->flag = flag;
    op->flag_value = flag_value;
    /* a zero-byte operation is one empty chunk, so that it still finishes
     * in stream order */
    op->chunks_left = size ? (long)((size + op->task - 1) / op->task) : 1;
    return op;
}

void hfe_op_set_io(hfe_op *op, hfe_io_fn fn, void *fh, void *base)
{
    op->fn = fn;
    op->fh = fh;
    op->base = base;
}

void hfe_op_incref(hfe_op *op) { __atomic_add_fetch(&op->refs, 1, __ATOMIC_RELAXED); }

void hfe_op_decref(hfe_op *op)
{
    if (op && __atomic_sub_fetch(&op->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        free(op->spans);
        free(op->span_start);
        free(op);
    }
}

int hfe_op_set_spans(hfe_op *op, const hfe_span *spans, int n)
{
    hfe_span *copy = malloc((size_t)(n > 0 ? n : 1) * sizeof(*copy));
    uint64_t *start = malloc((size_t)(n > 0 ? n : 1) * sizeof(*start));
    if (!copy || !start) {
        free(copy);
        free(start);
        return ENOMEM;
    }
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        copy[i] = spans[i];
        start[i] = total;
        total += spans[i].len;
    }
    free(op->spans);
    free(op->span_start);
    op->spans = copy;
    op->span_start = start;
    op->nspans = n;
    op->size = (size_t)total;
    op->chunks_left = total ? (long)((total + op->task - 1) / op->task) : 1;
    return 0;
}

int hfe_op_done(const hfe_op *op)
{
    return __atomic_load_n(&op->state, __ATOMIC_ACQUIRE) == OP_DONE;
}

int64_t hfe_op_result(const hfe_op *op, int *err_no)
{
    int64_t e = __atomic_load_n(&op->error, __ATOMIC_ACQUIRE);
    if (err_no)
        *err_no = op->err_no;
    return e ? e : __atomic_load_n(&op->bytes, __ATOMIC_ACQUIRE);
}

long hfe_op_calls(const hfe_op *op) { return __atomic_load_n(&op->calls, __ATOMIC_ACQUIRE); }

/* CLOCK_REALTIME: the clock of pthread_cond_timedwait on a default condition */
static void deadline_after(struct timespec *ts, double seconds)
{
    clock_gettime(CLOCK_REALTIME, ts);
    long sec = (long)seconds;
    long nsec = (long)((seconds - (double)sec) * 1e9);
    ts->tv_sec += sec;
    ts->tv_nsec += nsec;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec += 1;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Whether a waiter may yield in a loop: more online cores than the
 * engine's threads, the gate thread and the waiter. */
static int spare_cores(void)
{
    static long ncpu;
    if (!ncpu)
        ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    return ncpu > (long)__atomic_load_n(&nthreads, __ATOMIC_RELAXED) + 2;
}

int hfe_op_wait(hfe_op *op, double timeout_s)
{
    struct timespec until, t0;
    if (hfe_op_done(op))
        return 1;
    /* Yield first (see HFE_SPIN_S) where the machine has a core to spare
     * beside the engine's threads and the caller's; then sleep on the
     * condition. */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double spent = 0.0;
    double spin = spare_cores() ? HFE_SPIN_S : 0.0;
    while (spent < spin && (timeout_s < 0 || spent < timeout_s)) {
        sched_yield();
        if (hfe_op_done(op))
            return 1;
        spent = hfe_seconds_since(&t0);
    }
    if (timeout_s >= 0) {
        if (spent >= timeout_s)
            return 0;
        deadline_after(&until, timeout_s - spent);
    }
    pthread_mutex_lock(&done_lock);
    while (!hfe_op_done(op)) {
        if (timeout_s < 0) {
            pthread_cond_wait(&done_cv, &done_lock);
        } else if (pthread_cond_timedwait(&done_cv, &done_lock, &until) == ETIMEDOUT) {
            break;
        }
    }
    pthread_mutex_unlock(&done_lock);
    return hfe_op_done(op);
}

void hfe__finish(hfe_op *op)
{
    /* The completion flag is stored and the operation leaves the count in
     * one critical section: a caller that saw the flag finds the count
     * without it (hfe_outstanding takes the lock), and nothing that waits
     * for the count to reach zero (trim_pool frees flag pages then) can
     * run between the two. */
    pthread_mutex_lock(&lock);
    if (op->flag && !op->stream_completes)
        __atomic_store_n(op->flag, op->flag_value, __ATOMIC_RELEASE);
    outstanding--;
    if (draining)
        pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&lock);
    pthread_mutex_lock(&done_lock);
    __atomic_store_n(&op->state, OP_DONE, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&done_cv);
    pthread_mutex_unlock(&done_lock);
    hfe_op_decref(op);   /* the engine's reference */
}

/* Move `want` bytes between the file at foff and the buffer at boff with
 * as many calls as it takes, adding them to *moved. A 0 ends it (end of
 * file for a read; for a write the library made no progress, which is an
 * error). Returns -1 once the operation has its error, else 0. */
static int move_range(hfe_op *op, size_t want, int64_t foff, int64_t boff, size_t *moved)
{
    size_t done = 0;
    while (done < want) {
        errno = 0;
        ssize_t r = op->fn(op->fh, op->base, want - done, foff + (int64_t)done,
                           boff + (int64_t)done);
        __atomic_add_fetch(&op->calls, 1, __ATOMIC_RELAXED);
        if (r < 0 || (r == 0 && op->opcode == 1)) {
            hfe__set_error(op, r < 0 ? (int64_t)r : -1, r < 0 ? errno : EIO);
            *moved += done;
            return -1;
        }
        if (r == 0)
            break;                 /* end of file */
        done += (size_t)r;
    }
    *moved += done;
    return 0;
}

/* A grouped operation's chunk: the part of each range that falls in
 * off..off+len, range by range (a range that meets the end of the file
 * gives way to the next); returns the bytes moved. */
static size_t run_spans(hfe_op *op, size_t off, size_t len)
{
    size_t moved = 0;
    uint64_t v = off, end = (uint64_t)off + len;
    int lo = 0, hi = op->nspans - 1, i;
    while (lo < hi) {              /* the last range starting at or before v */
        int mid = (lo + hi + 1) / 2;
        if (op->span_start[mid] <= v)
            lo = mid;
        else
            hi = mid - 1;
    }
    for (i = lo; i < op->nspans && v < end; i++) {
        const hfe_span *s = &op->spans[i];
        uint64_t first = op->span_start[i], stop = first + s->len;
        if (stop <= v)
            continue;
        if (stop > end)
            stop = end;
        if (move_range(op, (size_t)(stop - v), s->file_offset + (int64_t)(v - first),
                       s->buffer_offset + (int64_t)(v - first), &moved))
            break;
        v = stop;
    }
    return moved;
}

/* One chunk: its bytes moved (move_range; a grouped operation walks its
 * ranges, run_spans), then the operation's count of chunks goes down. */
static void run_chunk(hfe_op *op, size_t off, size_t len)
{
    size_t done = 0;
    if (__atomic_load_n(&op->error, __ATOMIC_ACQUIRE) == 0) {
        if (op->device >= 0 && thread_device != op->device && set_device_fn) {
            if (set_device_fn(op->device) == 0)
                thread_device = op->device;
        }
        __atomic_store_n(&called_library, 1, __ATOMIC_RELAXED);
        if (op->nspans)
            done = run_spans(op, off, len);
        else
            move_range(op, len, op->file_offset + (int64_t)off,
                       op->buffer_offset + (int64_t)off, &done);
        __atomic_add_fetch(&op->bytes, (int64_t)done, __ATOMIC_ACQ_REL);
    }
    if (__atomic_sub_fetch(&op->chunks_left, 1, __ATOMIC_ACQ_REL) == 0)
        hfe__finish(op);
}

/* ------------------------------------------------------------- threads */

static void push_ready_locked(hfe_op *op)
{
    op->next = NULL;
    if (ready_tail)
        ready_tail->next = op;
    else
        ready_head = op;
    ready_tail = op;
}

static void *worker_main(void *arg)
{
    (void)arg;
    /* Short sleeps while polling flags (backoff_step) should be short: the
     * default timer slack (50 us) would stretch every one of them. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!ready_head && !chunk_head && !stopping)
            pthread_cond_wait(&work_cv, &lock);
        if (chunk_head) {
            /* staged chunks are taken in submission order (hfe_stage_submit);
             * an O_DIRECT read chunk with the chunks after it that continue
             * it, which one request reads (hfe_ring_set_direct_slots) */
            chunk_t *taken[HFE_MAX_DIRECT_SLOTS];
            chunk_t *c = chunk_head;
            int n = 1, most = c->ring->direct_slots;
            taken[0] = c;
            while (n < most && hfe__direct_follows(taken[n - 1], taken[n - 1]->next)) {
                taken[n] = taken[n - 1]->next;
                n++;
            }
            chunk_head = taken[n - 1]->next;
            if (!chunk_head)
                chunk_tail = NULL;
            pthread_mutex_unlock(&lock);
            if (n == 1)
                hfe__run_staged(c);
            else
                hfe__run_staged_direct(taken, n);
            pthread_mutex_lock(&lock);
            continue;
        }
        if (!ready_head)
            break;   /* stopping, and nothing left to do */
        hfe_op *op = ready_head;
        size_t off = op->cursor;
        size_t len = op->size - off < op->task ? op->size - off : op->task;
        op->cursor += len;
        if (op->cursor >= op->size) {
            ready_head = op->next;
            if (!ready_head)
                ready_tail = NULL;
        }
        pthread_mutex_unlock(&lock);
        run_chunk(op, off, len);
        pthread_mutex_lock(&lock);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

void hfe_set_event_fns(hfe_event_fn query, hfe_event_fn destroy)
{
    event_query_fn = query;
    event_destroy_fn = destroy;
}

static int gate_open(gate_t *g)
{
    if (g->ptr) {
        uint32_t cur = __atomic_load_n(g->ptr, __ATOMIC_ACQUIRE);
        return (int32_t)(cur - g->value) >= 0;
    }
    /* hipErrorNotReady (600) keeps it closed; success, or an error that
     * will not go away, opens it (never a gate that cannot open) */
    if (event_query_fn && event_query_fn(g->event) == 600)
        return 0;
    if (event_destroy_fn)
        event_destroy_fn(g->event);
    g->event = NULL;
    return 1;
}

static void *gate_main(void *arg)
{
    (void)arg;
    long idle = 0;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!gates && !stopping)
            pthread_cond_wait(&gate_cv, &lock);
        if (!gates && stopping)
            break;
        int moved = 0;
        gate_t **pp = &gates;
        while (*pp) {
            gate_t *g = *pp;
            if (gate_open(g)) {
                *pp = g->next;
                for (int i = 0; i < g->n; i++)
                    push_ready_locked(g->ops[i]);
                free(g->ops);
                free(g);
                moved = 1;
            } else {
                pp = &g->next;
            }
        }
        if (moved) {
            pthread_cond_broadcast(&work_cv);
            idle = 0;
            continue;
        }
        if (!gates)
            continue;
        /* nothing opened: back off, from a few microseconds to 200 us */
        pthread_mutex_unlock(&lock);
        struct timespec ts = {0, idle < 64 ? 2000 : (idle < 512 ? 20000 : 200000)};
        idle++;
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&lock);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

/* Called in a forked child by the package's one fork hook (engine.cengine). */
void hfe_after_fork_child(void)
{
    /* The threads do not exist in the child: forget them and whatever the
     * parent had queued (its operations belong to the parent). */
    pthread_mutex_init(&lock, NULL);
    pthread_cond_init(&work_cv, NULL);
    pthread_cond_init(&gate_cv, NULL);
    pthread_mutex_init(&done_lock, NULL);
    pthread_cond_init(&done_cv, NULL);
    ready_head = ready_tail = NULL;
    chunk_head = chunk_tail = NULL;
    gates = NULL;
    outstanding = 0;
    stopping = 0;
    draining = 0;
    nthreads = 0;
    workers = NULL;
    gate_running = 0;
    called_library = 0;
    thread_device = -1;
}

static int start_locked(int n)
{
    pthread_t *w = calloc((size_t)n, sizeof(pthread_t));
    int i, rc = 0;
    if (!w)
        return ENOMEM;
    for (i = 0; i < n; i++) {
        rc = pthread_create(&w[i], NULL, worker_main, NULL);
        if (rc)
            break;
    }
    if (!rc && !gate_running) {
        rc = pthread_create(&gate_thread, NULL, gate_main, NULL);
        if (!rc)
            gate_running = 1;
    }
    workers = w;
    nthreads = i;
    return rc;
}

static int join_all(double timeout_s);

int hfe_start(int n, hfe_set_device_fn set_device)
{
    int rc = 0;
    if (n <= 0)
        return EINVAL;
    pthread_mutex_lock(&lock);
    set_device_fn = set_device;
    if (nthreads == n && !stopping && !draining) {
        pthread_mutex_unlock(&lock);
        return 0;
    }
    if (nthreads && outstanding) {
        /* busy: keep the running pool */
        pthread_mutex_unlock(&lock);
        return 0;
    }
    pthread_mutex_unlock(&lock);
    if (nthreads) {
        rc = hfe_stop(-1);
        if (rc)
            return rc;
    }
    pthread_mutex_lock(&lock);
    stopping = 0;
    rc = start_locked(n);
    pthread_mutex_unlock(&lock);
    if (rc)
        join_all(-1);
    return rc;
}

static int join_all(double timeout_s)
{
    struct timespec until;
    pthread_mutex_lock(&lock);
    draining = 1;
    if (timeout_s >= 0) {
        /* CLOCK_REALTIME for pthread_cond_timedwait's default clock */
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += (time_t)timeout_s;
    }
    while (outstanding) {
        if (timeout_s < 0) {
            pthread_cond_wait(&gate_cv, &lock);
        } else if (pthread_cond_timedwait(&gate_cv, &lock, &until) == ETIMEDOUT) {
            draining = 0;
            pthread_mutex_unlock(&lock);
            return ETIMEDOUT;
        }
    }
    stopping = 1;
    pthread_t *w = workers;
    int n = nthreads, g = gate_running;
    workers = NULL;
    nthreads = 0;
    gate_running = 0;
    pthread_cond_broadcast(&work_cv);
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < n; i++)
        pthread_join(w[i], NULL);
    if (g)
        pthread_join(gate_thread, NULL);
    free(w);
    pthread_mutex_lock(&lock);
    stopping = 0;
    draining = 0;
    pthread_mutex_unlock(&lock);
    return 0;
}

int hfe_stop(double timeout_s) { return join_all(timeout_s); }

/* Threads that called hipFile keep the library's per-thread state until
 * they exit; a thread that exits after the driver closed frees that state
 * into a library that has torn down what it points to (cuFile 1.15: heap
 * corruption at the next submission, or a crash in hipFileDriverClose).
 * So before the driver closes, such threads are stopped (the next
 * submission starts new ones). Returns ETIMEDOUT when operations were
 * still outstanding after `timeout_s` (nothing stopped), else 0. */
int hfe_retire_library_threads(double timeout_s)
{
    pthread_mutex_lock(&lock);
    int busy = nthreads && __atomic_load_n(&called_library, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lock);
    if (!busy)
        return 0;
    int rc = join_all(timeout_s);
    if (!rc)
        __atomic_store_n(&called_library, 0, __ATOMIC_RELAXED);
    return rc;
}

int hfe_called_library(void) { return __atomic_load_n(&called_library, __ATOMIC_RELAXED); }

int hfe_threads(void)
{
    pthread_mutex_lock(&lock);
    int n = nthreads;
    pthread_mutex_unlock(&lock);
    return n;
}

long hfe_outstanding(void)
{
    pthread_mutex_lock(&lock);
    long n = outstanding;
    pthread_mutex_unlock(&lock);
    return n;
}

/* --------------------------------------------------------------- submit */

int hfe_submit(hfe_op **ops, int n, const uint32_t *gate, uint32_t gate_value,
               void *gate_event)
{
    gate_t *g = NULL;
    if (n <= 0)
        return EINVAL;
    if (gate || gate_event) {
        g = calloc(1, sizeof(*g));
        if (!g)
            return ENOMEM;
        g->ops = malloc((size_t)n * sizeof(hfe_op *));
        if (!g->ops) {
            free(g);
            return ENOMEM;
        }
        memcpy(g->ops, ops, (size_t)n * sizeof(hfe_op *));
        g->n = n;
        g->ptr = gate;
        g->value = gate_value;
        g->event = gate ? NULL : gate_event;
    }
    pthread_mutex_lock(&lock);
    if (!nthreads || stopping || draining) {
        pthread_mutex_unlock(&lock);
        if (g) {
            free(g->ops);
            free(g);
        }
        return ESHUTDOWN;
    }
    for (int i = 0; i < n; i++) {
        hfe_op_incref(ops[i]);   /* the engine's reference, dropped in finish() */
        outstanding++;
    }
    if (g) {
        gate_t **pp = &gates;   /* keep submission order */
        while (*pp)
            pp = &(*pp)->next;
        *pp = g;
        pthread_cond_signal(&gate_cv);
    } else {
        for (int i = 0; i < n; i++)
            push_ready_locked(ops[i]);
        pthread_cond_broadcast(&work_cv);
    }
    pthread_mutex_unlock(&lock);
    return 0;
}

/* Queue staged chunks (first..last, linked through ->next in sequence
 * order) for the workers, with `ngroups` more operations outstanding;
 * -ESHUTDOWN when the engine is not running or is stopping. */
int hfe__queue_chunks(chunk_t *first, chunk_t *last, long ngroups, int *idle)
{
    pthread_mutex_lock(&lock);
    if (!nthreads || stopping || draining) {
        pthread_mutex_unlock(&lock);
        return -ESHUTDOWN;
    }
    if (idle)   /* nothing queued before these: the workers take them at once */
        *idle = !chunk_head && !ready_head;
    if (first) {
        if (chunk_tail)
            chunk_tail->next = first;
        else
            chunk_head = first;
        chunk_tail = last;
    }
    outstanding += ngroups;
    if (first)   /* chunks read at submit (stage.c) wake no worker */
        pthread_cond_broadcast(&work_cv);
    pthread_mutex_unlock(&lock);
    return 0;
}

/* --------------------------------------------------------- host functions */

void hfe_host_wait(void *arg)
{
    hfe_op *op = arg;
    hfe_op_wait(op, -1.0);
    hfe_op_decref(op);
}


/* -------------------------------------------------------- runtime probing */

struct exports_query {
    const char *library, *symbol;
    int found;
};

static int exports_visit(struct dl_phdr_info *info, size_t size, void *data)
{
    struct exports_query *q = data;
    (void)size;
    if (!info->dlpi_name || !strstr(info->dlpi_name, q->library))
        return 0;
    void *h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
    if (h) {
        q->found = dlsym(h, q->symbol) != NULL;
        dlclose(h);
    }
    return q->found;
}

int hfe_runtime_exports(const char *library, const char *symbol)
{
    struct exports_query q = {library, symbol, 0};
    dl_iterate_phdr(exports_visit, &q);
    return q.found;
}
