/* libhipfile.so of the cuda test platform: the records of live
 * registrations, the driver (open, close, properties, limits) and
 * hipFile's configuration parameters mapped onto cuFile's. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "hipfile_private.h"

/* ---- records of live registrations ------------------------------------- */

pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
struct ptr_set handles, batches, streams, buffers;

/* hipFileDriverOpen/Close reference count of this process. Registrations
 * open the driver implicitly (see implicit_open); the other calls report
 * hipFileDriverNotInitialized until it is open. */
static pthread_mutex_t driver_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t open_count;

int driver_is_open(void)
{
    return __atomic_load_n(&open_count, __ATOMIC_ACQUIRE) > 0;
}

int set_find(const struct ptr_set *s, const void *p)
{
    for (size_t i = 0; i < s->count; i++)
        if (s->items[i] == p)
            return (int)i;
    return -1;
}

void *hfc_grow(void *items, size_t count, size_t *cap, size_t size)
{
    if (count < *cap)
        return items;
    size_t grown = *cap ? *cap * 2 : 16;
    void *moved = realloc(items, grown * size);
    if (moved != NULL)
        *cap = grown;
    return moved;
}

int set_add(struct ptr_set *s, void *p)
{
    void **items = hfc_grow(s->items, s->count, &s->cap, sizeof *items);
    if (items == NULL)
        return -1;
    s->items = items;
    s->items[s->count++] = p;
    return 0;
}

static int set_remove(struct ptr_set *s, const void *p)
{
    int i = set_find(s, p);
    if (i < 0)
        return 0;
    s->items[i] = s->items[--s->count];
    return 1;
}

int is_registered(struct ptr_set *s, const void *p)
{
    int found;
    pthread_mutex_lock(&reg_lock);
    found = set_find(s, p) >= 0;
    pthread_mutex_unlock(&reg_lock);
    return found;
}

/* Ends in cuFile one registration of the kind that set `s` holds (a file
 * handle, batch, stream or buffer), where cuFile has the function. */
void cufile_release(const struct hfc_cufile *F, const struct ptr_set *s, void *p)
{
    if (s == &handles && F->cuFileHandleDeregister)
        F->cuFileHandleDeregister(p);
    else if (s == &batches && F->cuFileBatchIODestroy)
        F->cuFileBatchIODestroy(p);
    else if (s == &streams && F->cuFileStreamDeregister)
        F->cuFileStreamDeregister((CUstream)p);
    else if (s == &buffers) {
        if (F->cuFileBufDeregister)
            F->cuFileBufDeregister(p);
        order_forget(p);
    }
}

/* Records a registration that cuFile has just accepted. Returns 0, or -1
 * (after ending the registration in cuFile again) when the set cannot grow. */
int track(const struct hfc_cufile *F, struct ptr_set *s, void *p)
{
    int r;
    pthread_mutex_lock(&reg_lock);
    r = set_add(s, p);
    pthread_mutex_unlock(&reg_lock);
    if (r != 0)
        cufile_release(F, s, p);
    return r;
}

/* Forgets a registration; returns whether it was known. */
int forget(struct ptr_set *s, const void *p)
{
    int known;
    pthread_mutex_lock(&reg_lock);
    known = set_remove(s, p);
    pthread_mutex_unlock(&reg_lock);
    return known;
}

/* The last hipFileDriverClose drops every registration, as hipFile does. */
static void drop_all(const struct hfc_cufile *F)
{
    struct ptr_set *const sets[] = {&handles, &batches, &streams, &buffers};
    pthread_mutex_lock(&reg_lock);
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
        for (size_t i = 0; i < sets[k]->count; i++)
            cufile_release(F, sets[k], sets[k]->items[i]);
        sets[k]->count = 0;
    }
    pthread_mutex_unlock(&reg_lock);
}

/* ---- driver ------------------------------------------------------------ */

/* HIPFILE_ALLOW_COMPAT_MODE / HIPFILE_FORCE_COMPAT_MODE map onto cuFile's
 * parameters of the same meaning; they can only be staged while closed. */
static void apply_compat_environment(const struct hfc_cufile *F)
{
    static int told;
    int allow = hfc_env_bool("HIPFILE_ALLOW_COMPAT_MODE");
    int force = hfc_env_bool("HIPFILE_FORCE_COMPAT_MODE");
    if (allow < 0 && force < 0)
        return;
    if (F->cuFileSetParameterBool == NULL) {
        hfc_say_once(&told, "this cuFile cannot stage parameters; HIPFILE_*_COMPAT_MODE is "
                            "ignored (set CUFILE_ENV_PATH_JSON instead)");
        return;
    }
    if (allow >= 0)
        F->cuFileSetParameterBool(CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE, allow == 1);
    if (force >= 0)
        F->cuFileSetParameterBool(CUFILE_PARAM_FORCE_COMPAT_MODE, force == 1);
}

static void announce(const struct hfc_cufile *F)
{
    static int done;
    CUfileDrvProps_t props;
    int version = 0;
    if (!hfc_verbose() || __atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL))
        return;
    if (F->cuFileGetVersion)
        F->cuFileGetVersion(&version);
    memset(&props, 0, sizeof props);
    if (F->cuFileDriverGetProperties && F->cuFileDriverGetProperties(&props).err == 0)
        hfc_say("libhipfile uses cuFile %d.%d (%s), config %s; nvidia-fs %u.%u, "
                "status flags 0x%x, control flags 0x%x (compat mode %s), feature flags 0x%x",
                version / 1000, (version % 1000) / 10, cf_path, cf_json,
                props.nvfs.major_version, props.nvfs.minor_version, props.nvfs.dstatusflags,
                props.nvfs.dcontrolflags, (props.nvfs.dcontrolflags & 2u) ? "allowed" : "off",
                props.fflags);
    else
        hfc_say("libhipfile uses cuFile %d.%d (%s), config %s", version / 1000,
                (version % 1000) / 10, cf_path, cf_json);
}

/* One more open; the caller holds driver_lock. */
static CUfileError_t open_locked(const struct hfc_cufile *F)
{
    CUfileError_t e;
    if (open_count == 0)
        apply_compat_environment(F);
    e = F->cuFileDriverOpen();
    if (e.err == CU_FILE_SUCCESS) {
        __atomic_add_fetch(&open_count, 1, __ATOMIC_ACQ_REL);
        announce(F);
    }
    return e;
}

HFC_EXPORT hipFileError_t hipFileDriverOpen(void)
{
    CUfileError_t e;
    NEED(cuFileDriverOpen);
    pthread_mutex_lock(&driver_lock);
    e = open_locked(F);
    pthread_mutex_unlock(&driver_lock);
    return from_cufile(e);
}

/* As AMD documents, the first handle or buffer registration opens the
 * driver implicitly (count 0 -> 1), as the emulated platform does. */
hipFileError_t implicit_open(const struct hfc_cufile *F)
{
    CUfileError_t e = {CU_FILE_SUCCESS, 0};
    if (F->cuFileDriverOpen == NULL)
        return missing("cuFileDriverOpen");
    pthread_mutex_lock(&driver_lock);
    if (open_count == 0)
        e = open_locked(F);
    pthread_mutex_unlock(&driver_lock);
    return from_cufile(e);
}

HFC_EXPORT hipFileError_t hipFileDriverClose(void)
{
    CUfileError_t e = {CU_FILE_SUCCESS, 0};
    NEED(cuFileDriverClose);
    pthread_mutex_lock(&driver_lock);
    if (open_count == 0) {
        pthread_mutex_unlock(&driver_lock);
        return make_error(hipFileDriverNotInitialized);
    }
    if (open_count == 1) {
        drop_all(F);
        e = F->cuFileDriverClose();
        /* cuFile refuses while I/O is in flight; the registrations are gone
         * either way, so the count still drops. */
    }
    __atomic_sub_fetch(&open_count, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_unlock(&driver_lock);
    return from_cufile(e);
}

HFC_EXPORT int64_t hipFileUseCount(void)
{
    return __atomic_load_n(&open_count, __ATOMIC_ACQUIRE);
}

HFC_EXPORT hipFileError_t hipFileDriverGetProperties(hipFileDriverProps_t *props)
{
    union {
        CUfileDrvProps_t p;
        char room[512]; /* in case a release appends fields */
    } u;
    CUfileError_t e;
    if (props == NULL)
        return make_error(hipFileInvalidValue);
    NEED(cuFileDriverGetProperties);
    memset(&u, 0, sizeof u);
    e = F->cuFileDriverGetProperties(&u.p);
    if (e.err != CU_FILE_SUCCESS)
        return from_cufile(e);
    memset(props, 0, sizeof *props);
    props->nvfs.major_version = u.p.nvfs.major_version;
    props->nvfs.minor_version = u.p.nvfs.minor_version;
    props->nvfs.poll_thresh_size = u.p.nvfs.poll_thresh_size;
    props->nvfs.max_direct_io_size = u.p.nvfs.max_direct_io_size;
    props->nvfs.driver_status_flags = u.p.nvfs.dstatusflags & HIPFILE_STATUS_FLAGS_KNOWN;
    props->nvfs.driver_control_flags = u.p.nvfs.dcontrolflags & HIPFILE_CONTROL_FLAGS_KNOWN;
    props->feature_flags = u.p.fflags & HIPFILE_FEATURE_FLAGS_KNOWN;
    props->max_device_cache_size = u.p.max_device_cache_size;
    props->per_buffer_cache_size = u.p.per_buffer_cache_size;
    props->max_device_pinned_mem_size = u.p.max_device_pinned_mem_size;
    props->max_batch_io_count = u.p.max_batch_io_size;
    props->max_batch_io_timeout_msecs = u.p.max_batch_io_timeout_msecs;
    return ok;
}

HFC_EXPORT hipFileError_t hipFileDriverSetPollMode(bool poll, size_t poll_threshold_size)
{
    NEED(cuFileDriverSetPollMode);
    return from_cufile(F->cuFileDriverSetPollMode(poll, poll_threshold_size));
}

HFC_EXPORT hipFileError_t hipFileDriverSetMaxDirectIOSize(size_t kib)
{
    NEED(cuFileDriverSetMaxDirectIOSize);
    return from_cufile(F->cuFileDriverSetMaxDirectIOSize(kib));
}

HFC_EXPORT hipFileError_t hipFileDriverSetMaxCacheSize(size_t kib)
{
    NEED(cuFileDriverSetMaxCacheSize);
    return from_cufile(F->cuFileDriverSetMaxCacheSize(kib));
}

HFC_EXPORT hipFileError_t hipFileDriverSetMaxPinnedMemSize(size_t kib)
{
    NEED(cuFileDriverSetMaxPinnedMemSize);
    return from_cufile(F->cuFileDriverSetMaxPinnedMemSize(kib));
}

/* ---- configuration parameters ------------------------------------------ */

/* hipFile's enums, in hipFile's order, mapped by name onto cuFile's. */
static const int size_t_params[HIPFILE_PARAM_SIZE_T_COUNT] = {
    CUFILE_PARAM_PROFILE_STATS,
    CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH,
    CUFILE_PARAM_EXECUTION_MAX_IO_THREADS,
    CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB,
    CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM,
    CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB,
    CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB,
    CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB,
    CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB,
    CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE,
    CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB,
    CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS,
};

static const int bool_params[HIPFILE_PARAM_BOOL_COUNT] = {
    CUFILE_PARAM_PROPERTIES_USE_POLL_MODE,
    CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE,
    CUFILE_PARAM_FORCE_COMPAT_MODE,
    CUFILE_PARAM_FS_MISC_API_CHECK_AGGRESSIVE,
    CUFILE_PARAM_EXECUTION_PARALLEL_IO,
    CUFILE_PARAM_PROFILE_NVTX,
    CUFILE_PARAM_PROPERTIES_ALLOW_SYSTEM_MEMORY,
    CUFILE_PARAM_USE_PCIP2PDMA,
    CUFILE_PARAM_PREFER_IO_URING,
    CUFILE_PARAM_FORCE_ODIRECT_MODE,
    CUFILE_PARAM_SKIP_TOPOLOGY_DETECTION,
    CUFILE_PARAM_STREAM_MEMOPS_BYPASS,
};

static const int string_params[HIPFILE_PARAM_STRING_COUNT] = {
    CUFILE_PARAM_LOGGING_LEVEL,
    CUFILE_PARAM_ENV_LOGFILE_PATH,
    CUFILE_PARAM_LOG_DIR,
};

HFC_EXPORT hipFileError_t hipFileGetParameterSizeT(int param, size_t *value)
{
    if (param < 0 || param >= HIPFILE_PARAM_SIZE_T_COUNT || value == NULL)
        return make_error(hipFileInvalidValue);
    NEED(cuFileGetParameterSizeT);
    return from_cufile(F->cuFileGetParameterSizeT(size_t_params[param], value));
}

HFC_EXPORT hipFileError_t hipFileGetParameterBool(int param, bool *value)
{
    if (param < 0 || param >= HIPFILE_PARAM_BOOL_COUNT || value == NULL)
        return make_error(hipFileInvalidValue);
    NEED(cuFileGetParameterBool);
    return from_cufile(F->cuFileGetParameterBool(bool_params[param], value));
}

HFC_EXPORT hipFileError_t hipFileGetParameterString(int param, char *buf, int len)
{
    if (param < 0 || param >= HIPFILE_PARAM_STRING_COUNT || buf == NULL || len <= 0)
        return make_error(hipFileInvalidValue);
    NEED(cuFileGetParameterString);
    return from_cufile(F->cuFileGetParameterString(string_params[param], buf, len));
}

HFC_EXPORT hipFileError_t hipFileSetParameterSizeT(int param, size_t value)
{
    if (param < 0 || param >= HIPFILE_PARAM_SIZE_T_COUNT)
        return make_error(hipFileInvalidValue);
    NEED(cuFileSetParameterSizeT);
    return from_cufile(F->cuFileSetParameterSizeT(size_t_params[param], value));
}

HFC_EXPORT hipFileError_t hipFileSetParameterBool(int param, bool value)
{
    if (param < 0 || param >= HIPFILE_PARAM_BOOL_COUNT)
        return make_error(hipFileInvalidValue);
    NEED(cuFileSetParameterBool);
    return from_cufile(F->cuFileSetParameterBool(bool_params[param], value));
}

HFC_EXPORT hipFileError_t hipFileSetParameterString(int param, const char *value)
{
    if (param < 0 || param >= HIPFILE_PARAM_STRING_COUNT || value == NULL)
        return make_error(hipFileInvalidValue);
    NEED(cuFileSetParameterString);
    return from_cufile(F->cuFileSetParameterString(string_params[param], value));
}
