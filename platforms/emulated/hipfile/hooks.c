/* Test hooks of the emulated libhipfile.so: fault injection, short
 * transfers, completion delay and resource counters. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "hipfile_internal.h"

/* The hooks have their own lock: they are consulted from stream workers and
 * batch workers that must not contend with registry waits. */
static pthread_mutex_t hook_lock = PTHREAD_MUTEX_INITIALIZER;

static struct {
    int err;
    unsigned count;
    unsigned after;
} faults[HIPFILE_EMU_OP_COUNT];
static size_t short_max;
static unsigned long long delay_us;
static uintptr_t next_token = 1;

void emu_hooks_lock(void) { pthread_mutex_lock(&hook_lock); }
void emu_hooks_unlock(void) { pthread_mutex_unlock(&hook_lock); }

EMU_EXPORT int hipfileEmuInjectFault(int op, int err, unsigned count, unsigned after)
{
    if (op < 0 || op >= HIPFILE_EMU_OP_COUNT)
        return -1;
    int is_errno = err > 0 && err < HIPFILE_BASE_ERR;
    int is_code = err > HIPFILE_BASE_ERR && err < hipFileIOMaxError;
    if (count > 0 && !is_errno && !is_code)
        return -1;
    pthread_mutex_lock(&hook_lock);
    faults[op].err = count ? err : 0;
    faults[op].count = count;
    faults[op].after = count ? after : 0;
    pthread_mutex_unlock(&hook_lock);
    return 0;
}

int emu_fault_take(int op)
{
    int e = 0;
    pthread_mutex_lock(&hook_lock);
    if (faults[op].count > 0) {
        if (faults[op].after > 0) {
            faults[op].after--;
        } else {
            e = faults[op].err;
            if (--faults[op].count == 0)
                faults[op].err = 0;
        }
    }
    pthread_mutex_unlock(&hook_lock);
    return e;
}

int emu_register_fault(hipFileOpError_t e)
{
    return e == hipFileSuccess ? emu_fault_take(HIPFILE_EMU_OP_REGISTER) : 0;
}

hipFileError_t emu_register_result(hipFileOpError_t e, int fault, void *rec)
{
    if (e == hipFileSuccess && !fault)
        return emu_err(hipFileSuccess);
    free(rec);
    if (!fault)
        return emu_err(e);
    if (fault >= HIPFILE_BASE_ERR)
        return emu_err((hipFileOpError_t)fault);
    errno = fault;
    return emu_err(hipFileInternalError);
}

EMU_EXPORT void hipfileEmuSetShortTransfer(size_t max_bytes)
{
    pthread_mutex_lock(&hook_lock);
    short_max = max_bytes;
    pthread_mutex_unlock(&hook_lock);
}

size_t emu_short_transfer(void)
{
    pthread_mutex_lock(&hook_lock);
    size_t v = short_max;
    pthread_mutex_unlock(&hook_lock);
    return v;
}

EMU_EXPORT void hipfileEmuSetCompletionDelay(unsigned long long microseconds)
{
    pthread_mutex_lock(&hook_lock);
    delay_us = microseconds;
    pthread_mutex_unlock(&hook_lock);
}

unsigned long long emu_completion_delay(void)
{
    pthread_mutex_lock(&hook_lock);
    unsigned long long v = delay_us;
    pthread_mutex_unlock(&hook_lock);
    return v;
}

void emu_sleep_us(unsigned long long us)
{
    if (us == 0)
        return;
    struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

EMU_EXPORT void hipfileEmuGetCounters(hipfileEmuCounters_t *out)
{
    if (out == NULL)
        return;
    pthread_mutex_lock(&emu_lock);
    *out = emu_counters;
    pthread_mutex_unlock(&emu_lock);
}

EMU_EXPORT void hipfileEmuReset(void)
{
    pthread_mutex_lock(&hook_lock);
    for (int i = 0; i < HIPFILE_EMU_OP_COUNT; i++) {
        faults[i].err = 0;
        faults[i].count = 0;
        faults[i].after = 0;
    }
    short_max = 0;
    delay_us = 0;
    pthread_mutex_unlock(&hook_lock);
}

uintptr_t emu_new_token(uintptr_t tag)
{
    pthread_mutex_lock(&hook_lock);
    uintptr_t t = tag | (next_token++ << 4);
    pthread_mutex_unlock(&hook_lock);
    return t;
}
