/* Batch I/O of the emulated libhipfile.so.
 *
 * Entries run on a small process-wide pool of worker threads, started by the
 * first hipFileBatchIOSetUp. A batch has max_nr slots; a slot is taken at
 * submit and given back when GetStatus reports its completion, so a batch
 * can be refilled as completions arrive. The parameters are copied at
 * submit. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include "hipfile_internal.h"

#define EMU_BATCH_WORKERS 4

enum { SLOT_FREE = 0, SLOT_QUEUED, SLOT_RUNNING, SLOT_DONE };

typedef struct emu_batch emu_batch_t;

typedef struct emu_entry {
    struct emu_entry *next; /* in the work queue, then in the done list */
    emu_batch_t *batch;
    int state;
    emu_handle_t *h;
    int is_write;
    char *buf;
    size_t size;
    off_t file_offset;
    void *cookie;
    int fault;
    size_t short_max;
    unsigned long long delay_us;
    hipFileStatus_t status;
    size_t ret;
} emu_entry_t;

struct emu_batch {
    emu_batch_t *next;
    uintptr_t token;
    unsigned max_nr;
    unsigned used;    /* slots not free */
    unsigned running; /* entries a worker is running */
    emu_entry_t *done_head, *done_tail;
    unsigned done_count;
    emu_entry_t slots[];
};

static emu_batch_t *batches;
static emu_entry_t *work_head, *work_tail;
static pthread_cond_t work_cond = PTHREAD_COND_INITIALIZER;
static int workers_started;

static emu_batch_t *batch_find_locked(hipFileBatchHandle_t id)
{
    for (emu_batch_t *b = batches; b != NULL; b = b->next)
        if (b->token == (uintptr_t)id)
            return b;
    return NULL;
}

static void finish_locked(emu_entry_t *e, hipFileStatus_t status, size_t ret)
{
    emu_batch_t *b = e->batch;
    e->state = SLOT_DONE;
    e->status = status;
    e->ret = ret;
    EMU_QUEUE_APPEND(b->done_head, b->done_tail, e, next);
    b->done_count++;
    emu_handle_release_locked(e->h);
    e->h = NULL;
    pthread_cond_broadcast(&emu_cond);
}

static void *worker_main(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&emu_lock);
    for (;;) {
        while (work_head == NULL)
            pthread_cond_wait(&work_cond, &emu_lock);
        emu_entry_t *e = work_head;
        work_head = e->next;
        if (work_head == NULL)
            work_tail = NULL;
        e->state = SLOT_RUNNING;
        e->batch->running++;
        pthread_mutex_unlock(&emu_lock);

        emu_sleep_us(e->delay_us);
        hipFileStatus_t status;
        size_t ret;
        int err = 0;
        ssize_t n = e->fault ? emu_fault_result(e->fault, &err)
                             : emu_do_io(e->h, e->is_write, e->buf, e->size, e->file_offset,
                                         e->short_max, &err);
        if (n >= 0) {
            status = hipFileComplete;
            ret = (size_t)n;
        } else {
            /* A system error reports -errno, a hipFile error -code. */
            status = hipFileFailed;
            ret = (size_t)(n == -1 ? -(ssize_t)err : n);
        }

        pthread_mutex_lock(&emu_lock);
        e->batch->running--;
        finish_locked(e, status, ret);
    }
    return NULL;
}

static void start_workers_locked(void)
{
    if (workers_started)
        return;
    /* Workers take no signals: they belong to the process's main thread. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (int i = 0; i < EMU_BATCH_WORKERS; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker_main, NULL) == 0) {
            pthread_detach(t);
            workers_started++;
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

EMU_EXPORT hipFileError_t hipFileBatchIOSetUp(hipFileBatchHandle_t *batch_idp, unsigned max_nr)
{
    if (batch_idp == NULL || max_nr == 0)
        return emu_err(hipFileInvalidValue);
    emu_batch_t *b = calloc(1, sizeof(*b) + (size_t)max_nr * sizeof(emu_entry_t));
    if (b == NULL)
        return emu_err(hipFileInternalError);
    b->max_nr = max_nr;
    hipFileOpError_t e = hipFileSuccess;
    pthread_mutex_lock(&emu_lock);
    /* A closed driver is no error here, as in AMD's library (the use count
     * stays); a batch set up then lives until destroyed or the next close. */
    if (emu_closing)
        e = hipFileDriverClosing;
    else if (max_nr > emu_props.max_batch_io_count)
        e = hipFileInvalidValue;
    if (e == hipFileSuccess) {
        start_workers_locked();
        if (workers_started == 0)
            e = hipFileInternalError;
    }
    if (e == hipFileSuccess) {
        b->token = emu_new_token(EMU_TAG_BATCH);
        b->next = batches;
        batches = b;
        emu_counters.batches++;
        *batch_idp = (hipFileBatchHandle_t)b->token;
    }
    pthread_mutex_unlock(&emu_lock);
    if (e != hipFileSuccess)
        free(b);
    return emu_err(e);
}

/* Finds the batch and checks that nr entries fit in it. */
static hipFileOpError_t batch_room_locked(hipFileBatchHandle_t id, unsigned nr, emu_batch_t **out)
{
    emu_batch_t *b = batch_find_locked(id);
    *out = b;
    if (b == NULL || nr > b->max_nr)
        return hipFileInvalidValue;
    if (nr > b->max_nr - b->used)
        return hipFileBatchFull;
    return hipFileSuccess;
}

EMU_EXPORT hipFileError_t hipFileBatchIOSubmit(hipFileBatchHandle_t batch_idp, unsigned nr,
                                               hipFileIOParams_t *iocbp, unsigned flags)
{
    if (nr == 0 || iocbp == NULL || flags != 0)
        return emu_err(hipFileInvalidValue);
    emu_batch_t *b;
    pthread_mutex_lock(&emu_lock);
    hipFileOpError_t e = batch_room_locked(batch_idp, nr, &b);
    pthread_mutex_unlock(&emu_lock);
    if (e != hipFileSuccess)
        return emu_err(e);
    /* Every entry is checked before any is queued; the buffers are looked
     * up without emu_lock (the HIP runtime has its own lock). */
    for (unsigned i = 0; i < nr; i++) {
        const hipFileIOParams_t *p = &iocbp[i];
        if (p->mode != hipFileBatch ||
            (p->opcode != hipFileBatchRead && p->opcode != hipFileBatchWrite) ||
            p->u.batch.file_offset < 0 || p->u.batch.devPtr_offset < 0)
            return emu_err(hipFileInvalidValue);
        size_t size = p->u.batch.size > EMU_MAX_IO_SIZE ? EMU_MAX_IO_SIZE : p->u.batch.size;
        if (size > (uint64_t)(INT64_MAX - p->u.batch.file_offset))
            return emu_err(hipFileInvalidValue);
        e = emu_check_device_range(p->u.batch.devPtr_base, p->u.batch.devPtr_offset, size, NULL,
                                   NULL, NULL);
        if (e != hipFileSuccess)
            return emu_err(e);
    }
    emu_handle_t **held = calloc(nr, sizeof(*held));
    if (held == NULL)
        return emu_err(hipFileInternalError);
    size_t short_max = emu_short_transfer();
    unsigned long long delay_us = emu_completion_delay();

    pthread_mutex_lock(&emu_lock);
    e = batch_room_locked(batch_idp, nr, &b);
    if (e == hipFileSuccess) {
        start_workers_locked(); /* again after a fork: the child has none */
        if (workers_started == 0)
            e = hipFileInternalError;
    }
    /* Take every handle first so that a bad one queues nothing. */
    unsigned got = 0;
    while (e == hipFileSuccess && got < nr) {
        held[got] = emu_handle_acquire_locked(iocbp[got].fh);
        if (held[got] == NULL)
            e = hipFileHandleNotRegistered;
        else
            got++;
    }
    if (e != hipFileSuccess) {
        for (unsigned i = 0; i < got; i++)
            emu_handle_release_locked(held[i]);
        pthread_mutex_unlock(&emu_lock);
        free(held);
        return emu_err(e);
    }
    unsigned slot = 0;
    for (unsigned i = 0; i < nr; i++) {
        const hipFileIOParams_t *p = &iocbp[i];
        while (b->slots[slot].state != SLOT_FREE)
            slot++;
        emu_entry_t *en = &b->slots[slot];
        en->batch = b;
        en->state = SLOT_QUEUED;
        en->h = held[i];
        en->is_write = p->opcode == hipFileBatchWrite;
        en->buf = (char *)p->u.batch.devPtr_base + p->u.batch.devPtr_offset;
        en->size = p->u.batch.size > EMU_MAX_IO_SIZE ? EMU_MAX_IO_SIZE : p->u.batch.size;
        en->file_offset = p->u.batch.file_offset;
        en->cookie = p->cookie;
        en->fault = emu_fault_take(HIPFILE_EMU_OP_BATCH);
        en->short_max = short_max;
        en->delay_us = delay_us;
        EMU_QUEUE_APPEND(work_head, work_tail, en, next);
        b->used++;
    }
    pthread_cond_broadcast(&work_cond);
    pthread_mutex_unlock(&emu_lock);
    free(held);
    return emu_err(hipFileSuccess);
}

EMU_EXPORT hipFileError_t hipFileBatchIOGetStatus(hipFileBatchHandle_t batch_idp, unsigned min_nr,
                                                  unsigned *nr, hipFileIOEvents_t *iocbp,
                                                  struct timespec *timeout)
{
    if (nr == NULL || (*nr > 0 && iocbp == NULL) || min_nr > *nr)
        return emu_err(hipFileInvalidValue);
    if (timeout != NULL && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 ||
                            timeout->tv_nsec >= 1000000000L))
        return emu_err(hipFileInvalidValue);
    struct timespec deadline;
    if (timeout != NULL) {
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += timeout->tv_sec;
        deadline.tv_nsec += timeout->tv_nsec;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&emu_lock);
    emu_batch_t *b;
    /* Wait for min_nr completions, or for every entry still outstanding
     * when fewer remain, so that no call can wait for ever. The batch is
     * looked up again after each wait: it may have been destroyed. */
    for (;;) {
        b = batch_find_locked(batch_idp);
        if (b == NULL)
            break;
        unsigned target = min_nr < b->used ? min_nr : b->used;
        if (b->done_count >= target)
            break;
        if (timeout == NULL)
            pthread_cond_wait(&emu_cond, &emu_lock);
        else if (pthread_cond_clockwait(&emu_cond, &emu_lock, CLOCK_MONOTONIC, &deadline) ==
                 ETIMEDOUT) {
            b = batch_find_locked(batch_idp);
            break;
        }
    }
    if (b == NULL) {
        pthread_mutex_unlock(&emu_lock);
        *nr = 0;
        return emu_err(hipFileInvalidValue);
    }
    unsigned n = 0;
    while (n < *nr && b->done_head != NULL) {
        emu_entry_t *e = b->done_head;
        b->done_head = e->next;
        if (b->done_head == NULL)
            b->done_tail = NULL;
        b->done_count--;
        iocbp[n].cookie = e->cookie;
        iocbp[n].status = e->status;
        iocbp[n].ret = e->ret;
        e->state = SLOT_FREE;
        b->used--;
        n++;
    }
    pthread_mutex_unlock(&emu_lock);
    *nr = n;
    return emu_err(hipFileSuccess);
}

/* Cancels the queued entries of b and waits for its running ones. */
static void cancel_locked(emu_batch_t *b)
{
    emu_entry_t **pp = &work_head;
    work_tail = NULL;
    while (*pp != NULL) {
        emu_entry_t *e = *pp;
        if (e->batch == b) {
            *pp = e->next;
            finish_locked(e, hipFileCanceled, 0);
        } else {
            work_tail = e;
            pp = &e->next;
        }
    }
    while (b->running > 0)
        pthread_cond_wait(&emu_cond, &emu_lock);
}

EMU_EXPORT hipFileError_t hipFileBatchIOCancel(hipFileBatchHandle_t batch_idp)
{
    pthread_mutex_lock(&emu_lock);
    emu_batch_t *b = batch_find_locked(batch_idp);
    if (b != NULL)
        cancel_locked(b);
    pthread_mutex_unlock(&emu_lock);
    return emu_err(b != NULL ? hipFileSuccess : hipFileInvalidValue);
}

/* Unlinks b first, so that waiters and later calls see it gone. */
static void destroy_locked(emu_batch_t **link)
{
    emu_batch_t *b = *link;
    *link = b->next;
    cancel_locked(b);
    emu_counters.batches--;
    pthread_cond_broadcast(&emu_cond);
    free(b);
}

EMU_EXPORT void hipFileBatchIODestroy(hipFileBatchHandle_t batch_idp)
{
    pthread_mutex_lock(&emu_lock);
    for (emu_batch_t **pp = &batches; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->token == (uintptr_t)batch_idp) {
            destroy_locked(pp);
            break;
        }
    }
    pthread_mutex_unlock(&emu_lock);
}

void emu_batches_drop_all_locked(void)
{
    while (batches != NULL)
        destroy_locked(&batches);
}

/* In a forked child only the forking thread exists: the workers are gone,
 * so every entry queued or running is reported as canceled, and workers are
 * started again by the next setup or submit. */
void emu_batches_after_fork_locked(void)
{
    workers_started = 0;
    work_head = work_tail = NULL;
    for (emu_batch_t *b = batches; b != NULL; b = b->next) {
        b->running = 0;
        for (unsigned i = 0; i < b->max_nr; i++) {
            emu_entry_t *e = &b->slots[i];
            if (e->state == SLOT_QUEUED || e->state == SLOT_RUNNING)
                finish_locked(e, hipFileCanceled, 0);
        }
    }
}
