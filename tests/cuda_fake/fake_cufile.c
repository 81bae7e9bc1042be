/* A stand-in for libcufile with just what the cuda platform's batch path
 * calls, so that its hipFileBatchIOGetStatus can be tested on a machine
 * without a GPU. "Device" pointers are host memory here.
 *
 * Entries are read or written with pread/pwrite at submit and reported as
 * complete FAKE_CUFILE_DELAY_US microseconds later, each exactly once.
 * GetStatus with a timeout behaves like a library that ignores it (it waits
 * for min_nr entries however long that takes) and counts such calls, so a
 * test can check that the platform never relies on it. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cufile_abi.h"

#define EXPORT __attribute__((visibility("default")))

typedef struct {
    int fd;
} fake_handle;

typedef struct {
    void *cookie;
    int status;
    size_t ret;
    double ready; /* when it may be reported */
    int reported;
} fake_entry;

typedef struct {
    unsigned max_nr, used;
    fake_entry *e;
} fake_batch;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long timed_calls;
static unsigned long polls;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static CUfileError_t result(int err)
{
    CUfileError_t e = {err, 0};
    return e;
}

EXPORT unsigned long fake_cufile_timed_calls(void) { return timed_calls; }
EXPORT unsigned long fake_cufile_polls(void) { return polls; }

EXPORT CUfileError_t cuFileDriverOpen(void) { return result(CU_FILE_SUCCESS); }
EXPORT CUfileError_t cuFileDriverClose_v2(void) { return result(CU_FILE_SUCCESS); }

EXPORT CUfileError_t cuFileHandleRegister(CUfileHandle_t *fh, CUfileDescr_t *descr)
{
    fake_handle *h = malloc(sizeof *h);
    if (h == NULL)
        return result(CU_FILE_NOMEM_ERROR);
    h->fd = descr->handle.fd;
    *fh = h;
    return result(CU_FILE_SUCCESS);
}

EXPORT void cuFileHandleDeregister(CUfileHandle_t fh) { free(fh); }

EXPORT CUfileError_t cuFileBatchIOSetUp(CUfileBatchHandle_t *batch, unsigned max_nr)
{
    fake_batch *b = calloc(1, sizeof *b);
    if (b == NULL || (b->e = calloc(max_nr, sizeof *b->e)) == NULL) {
        free(b);
        return result(CU_FILE_NOMEM_ERROR);
    }
    b->max_nr = max_nr;
    *batch = b;
    return result(CU_FILE_SUCCESS);
}

EXPORT CUfileError_t cuFileBatchIOSubmit(CUfileBatchHandle_t batch, unsigned nr,
                                         CUfileIOParams_t *p, unsigned flags)
{
    fake_batch *b = batch;
    const char *d = getenv("FAKE_CUFILE_DELAY_US");
    double delay = d ? atof(d) * 1e-6 : 0;
    (void)flags;
    pthread_mutex_lock(&lock);
    if (b->used != 0 || nr > b->max_nr) { /* one submission at a time, as cuFile */
        pthread_mutex_unlock(&lock);
        return result(CU_FILE_INVALID_VALUE);
    }
    for (unsigned i = 0; i < nr; i++) {
        int fd = ((fake_handle *)p[i].fh)->fd;
        char *buf = (char *)p[i].u.batch.devPtr_base + p[i].u.batch.devPtr_offset;
        ssize_t n = p[i].opcode == 0 ? pread(fd, buf, p[i].u.batch.size, p[i].u.batch.file_offset)
                                     : pwrite(fd, buf, p[i].u.batch.size, p[i].u.batch.file_offset);
        b->e[i].cookie = p[i].cookie;
        b->e[i].status = n >= 0 ? 1 << 4 : 1 << 6; /* complete, failed */
        b->e[i].ret = (size_t)(n >= 0 ? n : -5);
        b->e[i].ready = now_s() + delay;
        b->e[i].reported = 0;
    }
    b->used = nr;
    pthread_mutex_unlock(&lock);
    return result(CU_FILE_SUCCESS);
}

/* Hands over ready entries not reported yet, at most *nr. */
static unsigned take_locked(fake_batch *b, unsigned cap, CUfileIOEvents_t *ev)
{
    unsigned n = 0, left = 0;
    double t = now_s();
    for (unsigned i = 0; i < b->used; i++) {
        fake_entry *e = &b->e[i];
        if (e->reported)
            continue;
        if (n < cap && e->ready <= t) {
            ev[n].cookie = e->cookie;
            ev[n].status = e->status;
            ev[n].ret = e->ret;
            e->reported = 1;
            n++;
        } else {
            left++;
        }
    }
    if (left == 0)
        b->used = 0;
    return n;
}

EXPORT CUfileError_t cuFileBatchIOGetStatus(CUfileBatchHandle_t batch, unsigned min_nr,
                                            unsigned *nr, CUfileIOEvents_t *ev,
                                            struct timespec *timeout)
{
    fake_batch *b = batch;
    unsigned got = 0;
    pthread_mutex_lock(&lock);
    polls++;
    if (timeout != NULL)
        timed_calls++;
    for (;;) {
        got += take_locked(b, *nr - got, ev + got);
        if (got >= min_nr || b->used == 0)
            break;
        pthread_mutex_unlock(&lock);
        usleep(200); /* the timeout is ignored on purpose */
        pthread_mutex_lock(&lock);
    }
    pthread_mutex_unlock(&lock);
    *nr = got;
    return result(CU_FILE_SUCCESS);
}

EXPORT CUfileError_t cuFileBatchIOCancel(CUfileBatchHandle_t batch)
{
    fake_batch *b = batch;
    pthread_mutex_lock(&lock);
    for (unsigned i = 0; i < b->used; i++)
        if (!b->e[i].reported) {
            b->e[i].status = 1 << 3; /* canceled */
            b->e[i].ret = 0;
            b->e[i].ready = 0;
        }
    pthread_mutex_unlock(&lock);
    return result(CU_FILE_SUCCESS);
}

EXPORT void cuFileBatchIODestroy(CUfileBatchHandle_t batch)
{
    fake_batch *b = batch;
    free(b->e);
    free(b);
}
