/* libhipfile.so of the cuda test platform: the hipFile C ABI implemented
 * over NVIDIA's cuFile (GPUDirect Storage), which is opened at run time.
 *
 * This is not AMD's hipFile. hipFile handles are cuFile handles, hipStream_t
 * is a CUDA stream, and hipFile's error numbers equal cuFile's up to 5038;
 * newer cuFile codes are folded into the nearest hipFile code.
 *
 * The platform keeps its own record of registered file handles, buffers,
 * batches and streams, so that a stale or foreign handle gives an error code
 * instead of reaching cuFile, and so that the last hipFileDriverClose drops
 * every registration as hipFile does. Unlike cuFile, which opens itself at
 * the first call, every call that needs the driver reports
 * hipFileDriverNotInitialized until hipFileDriverOpen has succeeded. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cufile_abi.h"
#include "hip_errors.h"
#include "hipfile_abi.h"
#include "loader.h"

#ifndef HIPFILE_CUDA_JSON
#define HIPFILE_CUDA_JSON ""
#endif

/* The version of the hipFile ABI this library provides: every function of
 * hipFile 0.2.0 (the Stats functions of 0.5.0 are absent). */
#define HFC_VERSION_MAJOR 0u
#define HFC_VERSION_MINOR 2u
#define HFC_VERSION_PATCH 0u

/* One synchronous call moves at most this many bytes, as hipFile does. */
#define HFC_MAX_IO 0x7ffff000ul

HFC_EXPORT hipFileError_t hipFileDriverOpen(void);

/* ---- loading cuFile ---------------------------------------------------- */

static struct hfc_cufile cf_table;
static const struct hfc_cufile *cf_loaded;
static pthread_once_t cf_once = PTHREAD_ONCE_INIT;
static char cf_path[4096];
static char cf_json[4096];

/* Point cuFile at the platform's configuration (compatibility mode allowed)
 * unless the user chose one. Done before cuFile is loaded, since it reads
 * the variable when it starts. */
static void choose_config(void)
{
    const char *user = getenv("CUFILE_ENV_PATH_JSON");
    Dl_info info;
    if (user && *user) {
        snprintf(cf_json, sizeof cf_json, "%s (from CUFILE_ENV_PATH_JSON)", user);
        return;
    }
    cf_json[0] = '\0';
    if (dladdr((void *)&hipFileDriverOpen, &info) && info.dli_fname) {
        char candidate[4096];
        const char *slash = strrchr(info.dli_fname, '/');
        int dir_len = slash ? (int)(slash - info.dli_fname) : 1;
        const char *dir = slash ? info.dli_fname : ".";
        snprintf(candidate, sizeof candidate, "%.*s/../share/hipfile-cuda/cufile.json", dir_len,
                 dir);
        if (access(candidate, R_OK) == 0)
            snprintf(cf_json, sizeof cf_json, "%s", candidate);
    }
    if (cf_json[0] == '\0' && HIPFILE_CUDA_JSON[0] && access(HIPFILE_CUDA_JSON, R_OK) == 0)
        snprintf(cf_json, sizeof cf_json, "%s", HIPFILE_CUDA_JSON);
    if (cf_json[0] == '\0') {
        snprintf(cf_json, sizeof cf_json, "cuFile's default (/etc/cufile.json)");
        return;
    }
    setenv("CUFILE_ENV_PATH_JSON", cf_json, 0);
}

/* cuFile reads /proc/modules when its driver opens and, where the file
 * cannot be opened (sandboxed kernels such as gVisor), loops forever. Refuse
 * to use cuFile there, so that every call returns an error instead. */
static int system_supported(void)
{
    if (hfc_env_bool("HIPFILE_CUDA_SKIP_SYSTEM_CHECK") == 1)
        return 1;
    if (access("/proc/modules", R_OK) != 0) {
        hfc_say("/proc/modules is not readable on this system, and cuFile stops responding "
                "without it; cuFile is not used and hipFile calls return "
                "hipFilePlatformNotSupported (HIPFILE_CUDA_SKIP_SYSTEM_CHECK=1 overrides)");
        return 0;
    }
    return 1;
}

static void cf_load(void)
{
    static const char *const sonames[] = {"libcufile.so.0", "libcufile.so", NULL};
    static const struct hfc_search search = {"cuFile (libcufile)", "HIPFILE_CUFILE_LIBRARY",
                                             sonames, "cuFileDriverOpen"};
    void *lib;
    if (!system_supported())
        return;
    choose_config();
    lib = hfc_open(&search, cf_path, sizeof cf_path);
    if (lib == NULL)
        return;
#define HFC_RESOLVE(name, ret, params) hfc_sym(lib, #name, &cf_table.name);
    HFC_CUFILE_FUNCS(HFC_RESOLVE)
#undef HFC_RESOLVE
    /* cuFile's header maps cuFileDriverClose onto the _v2 entry point. */
    if (cf_table.cuFileDriverClose_v2)
        cf_table.cuFileDriverClose = cf_table.cuFileDriverClose_v2;
    __atomic_store_n(&cf_loaded, &cf_table, __ATOMIC_RELEASE);
}

static const struct hfc_cufile *cf(void)
{
    pthread_once(&cf_once, cf_load);
    return __atomic_load_n(&cf_loaded, __ATOMIC_ACQUIRE);
}

/* ---- errors -------------------------------------------------------------- */

static hipFileError_t make_error(int err)
{
    hipFileError_t r = {err, hipSuccess};
    return r;
}

static const hipFileError_t ok = {hipFileSuccess, hipSuccess};

static int op_from_cufile(int e)
{
    if (e == CU_FILE_SUCCESS)
        return hipFileSuccess;
    if (e > 5000 && e < hipFileIOMaxError)
        return e; /* the same numbers and meanings */
    switch (e) {
    case CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR:
        return hipFileBatchSubmitFailed;
    case CU_FILE_INVALID_CONTEXT_ERROR:
        return hipFileHipContextMismatch;
    case CU_FILE_NVFS_INTERNAL_DRIVER_ERROR:
        return hipFileDriverError;
    case CU_FILE_BATCH_NOCOMPAT_ERROR:
        return hipFileIONotSupported;
    default:
        return hipFileInternalError;
    }
}

static hipFileError_t from_cufile(CUfileError_t e)
{
    hipFileError_t r;
    r.err = op_from_cufile(e.err);
    r.hip_drv_err = r.err == hipFileHipDriverError ? hfc_hip_from_cu_result(e.cu_err) : 0;
    return r;
}

/* A cuFile ssize_t result as hipFile reports it. errno is left as cuFile set
 * it for -1. */
static ssize_t from_cufile_count(ssize_t r)
{
    ssize_t code;
    if (r >= -1)
        return r;
    code = -r;
    if (code > 5000 && code <= CU_FILE_IO_MAX_ERROR) {
        if (code == CU_FILE_IO_ERROR) {
            errno = EIO;
            return -1;
        }
        return -(ssize_t)op_from_cufile((int)code);
    }
    if (code < 4096) { /* a negated errno */
        errno = (int)code;
        return -1;
    }
    return -(ssize_t)hipFileInternalError;
}

static hipFileError_t not_loaded(void)
{
    /* hfc_open has said why on stderr. */
    return make_error(hipFilePlatformNotSupported);
}

static hipFileError_t missing(const char *name)
{
    static int told;
    hfc_say_once(&told, "cuFile at %s lacks %s (first missing function); it returns "
                        "hipFileInternalError",
                 cf_path, name);
    return make_error(hipFileInternalError);
}

#define NEED(fn)                                                                           \
    const struct hfc_cufile *F = cf();                                                     \
    if (F == NULL)                                                                         \
        return not_loaded();                                                               \
    if (F->fn == NULL)                                                                     \
    return missing(#fn)

/* NEED, and an explicit hipFileDriverOpen. */
#define NEED_OPEN(fn)                                                                      \
    NEED(fn);                                                                              \
    if (!driver_is_open())                                                                 \
    return make_error(hipFileDriverNotInitialized)

/* ---- records of live registrations ------------------------------------- */

struct ptr_set {
    void **items;
    size_t count, cap;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ptr_set handles, batches, streams, buffers;

/* hipFileDriverOpen/Close reference count of this process. Registrations
 * open the driver implicitly (see implicit_open); the other calls report
 * hipFileDriverNotInitialized until it is open. */
static pthread_mutex_t driver_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t open_count;

static int driver_is_open(void)
{
    return __atomic_load_n(&open_count, __ATOMIC_ACQUIRE) > 0;
}

static int set_find(const struct ptr_set *s, const void *p)
{
    for (size_t i = 0; i < s->count; i++)
        if (s->items[i] == p)
            return (int)i;
    return -1;
}

static int set_add(struct ptr_set *s, void *p)
{
    if (s->count == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        void **items = realloc(s->items, cap * sizeof *items);
        if (items == NULL)
            return -1;
        s->items = items;
        s->cap = cap;
    }
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

static int is_registered(struct ptr_set *s, const void *p)
{
    int found;
    pthread_mutex_lock(&reg_lock);
    found = set_find(s, p) >= 0;
    pthread_mutex_unlock(&reg_lock);
    return found;
}

static void order_forget(const void *base);

/* Ends in cuFile one registration of the kind that set `s` holds (a file
 * handle, batch, stream or buffer), where cuFile has the function. */
static void cufile_release(const struct hfc_cufile *F, const struct ptr_set *s, void *p)
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
static int track(const struct hfc_cufile *F, struct ptr_set *s, void *p)
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
static int forget(struct ptr_set *s, const void *p)
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
static hipFileError_t implicit_open(const struct hfc_cufile *F)
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

#define NEED_IMPLICIT_OPEN(fn)                                                             \
    NEED(fn);                                                                              \
    do {                                                                                   \
        hipFileError_t opened = implicit_open(F);                                          \
        if (opened.err != hipFileSuccess)                                                  \
            return opened;                                                                 \
    } while (0)

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

/* ---- file handles ------------------------------------------------------ */

HFC_EXPORT hipFileError_t hipFileHandleRegister(hipFileHandle_t *fh, hipFileDescr_t *descr)
{
    CUfileDescr_t d;
    CUfileHandle_t h = NULL;
    CUfileError_t e;
    if (fh == NULL || descr == NULL)
        return make_error(hipFileInvalidValue);
    if (descr->type < hipFileHandleTypeOpaqueFD || descr->type > hipFileHandleTypeUserspaceFS)
        return make_error(hipFileInvalidValue);
    NEED_IMPLICIT_OPEN(cuFileHandleRegister);
    memset(&d, 0, sizeof d);
    d.type = descr->type; /* the same numbers */
    if (descr->type == hipFileHandleTypeOpaqueFD)
        d.handle.fd = descr->handle.fd;
    else
        d.handle.handle = descr->handle.hFile;
    d.fs_ops = descr->fs_ops;
    e = F->cuFileHandleRegister(&h, &d);
    if (e.err != CU_FILE_SUCCESS) {
        static int told;
        /* cuFile looks each file's block device up in udev's database; a
         * machine where udev does not run has none. */
        if (e.err == hipFileHandleNotRegistered && access("/run/udev/data", F_OK) != 0)
            hfc_say_once(&told, "cuFile could not register a file, and this machine has no "
                                "udev database (/run/udev/data), which cuFile reads; "
                                "platforms/cuda/udev-stub.sh (as root) provides the entries "
                                "it needs");
        return from_cufile(e);
    }
    if (track(F, &handles, h) != 0)
        return make_error(hipFileInternalError);
    *fh = h;
    return ok;
}

HFC_EXPORT void hipFileHandleDeregister(hipFileHandle_t fh)
{
    const struct hfc_cufile *F = cf();
    if (F != NULL && fh != NULL && forget(&handles, fh))
        cufile_release(F, &handles, fh);
}

/* ---- buffers and synchronous I/O -------------------------------------- */

HFC_EXPORT hipFileError_t hipFileBufRegister(const void *base, size_t length, int flags)
{
    if (base == NULL || length == 0)
        return make_error(hipFileInvalidValue);
    CUfileError_t e;
    NEED_IMPLICIT_OPEN(cuFileBufRegister);
    e = F->cuFileBufRegister(base, length, flags);
    if (e.err == CU_FILE_SUCCESS && track(F, &buffers, (void *)base) != 0)
        return make_error(hipFileInternalError);
    return from_cufile(e);
}

HFC_EXPORT hipFileError_t hipFileBufDeregister(const void *base)
{
    if (base == NULL)
        return make_error(hipFileInvalidValue);
    CUfileError_t e;
    NEED_OPEN(cuFileBufDeregister);
    e = F->cuFileBufDeregister(base);
    if (e.err == CU_FILE_SUCCESS) {
        forget(&buffers, base);
        order_forget(base);
    }
    return from_cufile(e);
}

/* hipFileRead and hipFileWrite: the checks they share, then one cuFileRead or
 * cuFileWrite of at most HFC_MAX_IO bytes (a write only reads buffer_base). */
static ssize_t sync_io(int is_write, hipFileHandle_t fh, void *buffer_base, size_t size,
                       hoff_t file_offset, hoff_t buffer_offset)
{
    const struct hfc_cufile *F = cf();
    if (F == NULL)
        return -(ssize_t)hipFilePlatformNotSupported;
    if (is_write ? F->cuFileWrite == NULL : F->cuFileRead == NULL)
        return -(ssize_t)missing(is_write ? "cuFileWrite" : "cuFileRead").err;
    if (!driver_is_open())
        return -(ssize_t)hipFileDriverNotInitialized;
    if (file_offset < 0 || buffer_offset < 0) {
        errno = EINVAL;
        return -1;
    }
    if (buffer_base == NULL)
        return -(ssize_t)hipFileInvalidValue;
    if (fh == NULL || !is_registered(&handles, fh))
        return -(ssize_t)hipFileHandleNotRegistered;
    if (size == 0)
        return 0;
    if (size > HFC_MAX_IO)
        size = HFC_MAX_IO;
    /* An unregistered buffer: fold the offset into the base, as for the
     * stream-ordered calls (cuFile's compatibility mode mishandles a nonzero
     * devPtr_offset on memory it has no registration for). */
    if (buffer_offset != 0 && !is_registered(&buffers, buffer_base)) {
        buffer_base = (char *)buffer_base + buffer_offset;
        buffer_offset = 0;
    }
    return from_cufile_count(
        is_write ? F->cuFileWrite(fh, buffer_base, size, (off_t)file_offset, (off_t)buffer_offset)
                 : F->cuFileRead(fh, buffer_base, size, (off_t)file_offset, (off_t)buffer_offset));
}

HFC_EXPORT ssize_t hipFileRead(hipFileHandle_t fh, void *buffer_base, size_t size,
                               hoff_t file_offset, hoff_t buffer_offset)
{
    return sync_io(0, fh, buffer_base, size, file_offset, buffer_offset);
}

HFC_EXPORT ssize_t hipFileWrite(hipFileHandle_t fh, const void *buffer_base, size_t size,
                                hoff_t file_offset, hoff_t buffer_offset)
{
    return sync_io(1, fh, (void *)buffer_base, size, file_offset, buffer_offset);
}

/* ---- stream-ordered I/O -------------------------------------------------- */

HFC_EXPORT hipFileError_t hipFileStreamRegister(hipStream_t stream, unsigned flags)
{
    CUfileError_t e;
    if (flags & ~HIPFILE_STREAM_FLAGS_MASK)
        return make_error(hipFileInvalidValue);
    NEED_OPEN(cuFileStreamRegister);
    pthread_mutex_lock(&reg_lock);
    if (set_find(&streams, stream) >= 0) {
        pthread_mutex_unlock(&reg_lock);
        return make_error(hipFileInvalidValue);
    }
    e = F->cuFileStreamRegister((CUstream)stream, flags);
    if (e.err == CU_FILE_SUCCESS && set_add(&streams, stream) != 0) {
        pthread_mutex_unlock(&reg_lock);
        cufile_release(F, &streams, stream);
        return make_error(hipFileInternalError);
    }
    pthread_mutex_unlock(&reg_lock);
    return from_cufile(e);
}

HFC_EXPORT hipFileError_t hipFileStreamDeregister(hipStream_t stream)
{
    NEED_OPEN(cuFileStreamDeregister);
    if (!forget(&streams, stream))
        return make_error(hipFileInvalidValue);
    return from_cufile(F->cuFileStreamDeregister((CUstream)stream));
}

/* ---- stream-ordered I/O ------------------------------------------------
 *
 * Two behaviours of cuFile 1.15's compatibility mode that AMD's hipFile does
 * not share are hidden here (measured on an H200, see docs/platform-cuda.md):
 * - an operation on a buffer that is not registered fails when it runs
 *   (*bytes_p = -5) unless its buffer offset is 0: the platform folds the
 *   offset into the base at submit (the offset is then fixed at submit on
 *   this platform, whatever the stream's flags);
 * - operations on one registered buffer from several streams at once share
 *   cuFile's bounce buffer for that registration: they report full counts and
 *   move the wrong bytes. The platform orders them: each operation on a
 *   registered buffer waits for the previous one on that buffer (an event
 *   recorded behind it), so they run one at a time, as on one stream. */

/* From this platform's libamdhip64.so (linked). */
hipError_t hipEventCreateWithFlags(hipEvent_t *event, unsigned flags);
hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream);
hipError_t hipEventDestroy(hipEvent_t event);
hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned flags);
hipError_t hipStreamGetDevice(hipStream_t stream, int *device);
hipError_t hipGetDevice(int *device);
hipError_t hipSetDevice(int device);

/* The last operation submitted on each registered buffer (under order_lock). */
struct buf_order {
    const void *base;
    hipEvent_t last;
};
static pthread_mutex_t order_lock = PTHREAD_MUTEX_INITIALIZER;
static struct buf_order *orders;
static size_t n_orders, cap_orders;

static struct buf_order *order_find(const void *base)
{
    for (size_t i = 0; i < n_orders; i++)
        if (orders[i].base == base)
            return &orders[i];
    return NULL;
}

/* Forget a buffer's order (on deregistration); its event may still be
 * pending, which hipEventDestroy allows. */
static void order_forget(const void *base)
{
    pthread_mutex_lock(&order_lock);
    struct buf_order *o = order_find(base);
    if (o != NULL) {
        if (o->last != NULL)
            hipEventDestroy(o->last);
        *o = orders[--n_orders];
    }
    pthread_mutex_unlock(&order_lock);
}

/* Called with order_lock held: the record of `base`, created on first use
 * with its event on the device of `stream` (an event is recorded only on
 * streams of its own device; a buffer's streams share its device); NULL when
 * memory or an event cannot be had. */
static struct buf_order *order_get(const void *base, hipStream_t stream)
{
    struct buf_order *o = order_find(base);
    if (o != NULL)
        return o;
    if (n_orders == cap_orders) {
        size_t cap = cap_orders ? cap_orders * 2 : 16;
        struct buf_order *grown = realloc(orders, cap * sizeof *grown);
        if (grown == NULL)
            return NULL;
        orders = grown;
        cap_orders = cap;
    }
    o = &orders[n_orders];
    o->base = base;
    int device, current;
    int switched = hipStreamGetDevice(stream, &device) == 0 && hipGetDevice(&current) == 0 &&
                   device != current && hipSetDevice(device) == 0;
    hipError_t made = hipEventCreateWithFlags(&o->last, hipEventDisableTiming);
    if (switched)
        hipSetDevice(current);
    if (made != 0)
        return NULL;
    n_orders++;
    return o;
}

static const off_t zero_offset = 0;

static hipFileError_t submit_async(hfc_cuFileReadAsync_fn fn, hipFileHandle_t fh, void *base,
                                   size_t *size_p, hoff_t *file_offset_p, hoff_t *buffer_offset_p,
                                   ssize_t *bytes_p, hipStream_t stream)
{
    if (base == NULL || size_p == NULL || file_offset_p == NULL || buffer_offset_p == NULL ||
        bytes_p == NULL)
        return make_error(hipFileInvalidValue);
    if (*file_offset_p < 0 || *buffer_offset_p < 0)
        return make_error(hipFileInvalidValue);
    if (fh == NULL || !is_registered(&handles, fh))
        return make_error(hipFileHandleNotRegistered);
    *bytes_p = 0;
    if (!is_registered(&buffers, base))
        return from_cufile(fn(fh, (char *)base + *buffer_offset_p, size_p,
                              (off_t *)file_offset_p, (off_t *)&zero_offset, bytes_p,
                              (CUstream)stream));
    pthread_mutex_lock(&order_lock);
    struct buf_order *o = order_get(base, stream);
    if (o == NULL) {
        pthread_mutex_unlock(&order_lock);
        return make_error(hipFileInternalError);
    }
    if (hipStreamWaitEvent(stream, o->last, 0) != 0) {
        pthread_mutex_unlock(&order_lock);
        return make_error(hipFileHipDriverError);
    }
    hipFileError_t e = from_cufile(fn(fh, base, size_p, (off_t *)file_offset_p,
                                      (off_t *)buffer_offset_p, bytes_p, (CUstream)stream));
    if (e.err == hipFileSuccess && hipEventRecord(o->last, stream) != 0)
        e = make_error(hipFileHipDriverError);
    pthread_mutex_unlock(&order_lock);
    return e;
}

/* hipFileReadAsync and hipFileWriteAsync: submit_async over cuFileReadAsync
 * or cuFileWriteAsync (same signature). */
#define HFC_ASYNC_IO(name, cufile_fn)                                                      \
    HFC_EXPORT hipFileError_t name(hipFileHandle_t fh, void *buffer_base, size_t *size_p,   \
                                   hoff_t *file_offset_p, hoff_t *buffer_offset_p,          \
                                   ssize_t *bytes_p, hipStream_t stream)                    \
    {                                                                                      \
        NEED_OPEN(cufile_fn);                                                              \
        return submit_async(F->cufile_fn, fh, buffer_base, size_p, file_offset_p,          \
                            buffer_offset_p, bytes_p, stream);                             \
    }

HFC_ASYNC_IO(hipFileReadAsync, cuFileReadAsync)
HFC_ASYNC_IO(hipFileWriteAsync, cuFileWriteAsync)

/* ---- batch I/O ----------------------------------------------------------- */

_Static_assert(sizeof(hipFileIOParams_t) == sizeof(CUfileIOParams_t), "batch params");
_Static_assert(offsetof(hipFileIOParams_t, fh) == offsetof(CUfileIOParams_t, fh), "params.fh");
_Static_assert(offsetof(hipFileIOParams_t, opcode) == offsetof(CUfileIOParams_t, opcode),
               "params.opcode");
_Static_assert(offsetof(hipFileIOParams_t, cookie) == offsetof(CUfileIOParams_t, cookie),
               "params.cookie");
_Static_assert(offsetof(hipFileIOParams_t, u.batch.size) ==
                   offsetof(CUfileIOParams_t, u.batch.size),
               "params.size");
_Static_assert(sizeof(hipFileIOEvents_t) == sizeof(CUfileIOEvents_t), "batch events");
_Static_assert(offsetof(hipFileIOEvents_t, ret) == offsetof(CUfileIOEvents_t, ret),
               "events.ret");

HFC_EXPORT hipFileError_t hipFileBatchIOSetUp(hipFileBatchHandle_t *batch, unsigned max_nr)
{
    CUfileBatchHandle_t b = NULL;
    CUfileError_t e;
    if (batch == NULL || max_nr == 0)
        return make_error(hipFileInvalidValue);
    NEED_OPEN(cuFileBatchIOSetUp);
    e = F->cuFileBatchIOSetUp(&b, max_nr);
    if (e.err != CU_FILE_SUCCESS)
        return from_cufile(e);
    if (track(F, &batches, b) != 0)
        return make_error(hipFileInternalError);
    *batch = b;
    return ok;
}

HFC_EXPORT hipFileError_t hipFileBatchIOSubmit(hipFileBatchHandle_t batch, unsigned nr,
                                               hipFileIOParams_t *params, unsigned flags)
{
    NEED_OPEN(cuFileBatchIOSubmit);
    if (batch == NULL || !is_registered(&batches, batch))
        return make_error(hipFileInvalidValue);
    if (nr > 0 && params == NULL)
        return make_error(hipFileInvalidValue);
    for (unsigned i = 0; i < nr; i++) {
        const hipFileIOParams_t *p = &params[i];
        if (p->mode != hipFileBatch ||
            (p->opcode != hipFileBatchRead && p->opcode != hipFileBatchWrite) ||
            p->u.batch.devPtr_base == NULL || p->u.batch.file_offset < 0 ||
            p->u.batch.devPtr_offset < 0)
            return make_error(hipFileInvalidValue);
        if (p->fh == NULL || !is_registered(&handles, p->fh))
            return make_error(hipFileHandleNotRegistered);
    }
    /* hipFile's parameter array has cuFile's layout, and a hipFile handle is
     * a cuFile handle: cuFile reads the caller's array itself, which must
     * stay valid until the entries complete, as hipFile requires. */
    return from_cufile(
        F->cuFileBatchIOSubmit(batch, nr, (CUfileIOParams_t *)(void *)params, flags));
}

/* Whether a bounded wait is left to cuFile (HIPFILE_CUDA_BATCH_WAIT=cufile)
 * rather than done here by polling. */
static int batch_wait_in_cufile(void)
{
    static int cached = -1;
    if (cached < 0) {
        const char *v = getenv("HIPFILE_CUDA_BATCH_WAIT");
        cached = v != NULL && strcmp(v, "cufile") == 0;
    }
    return cached;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A bounded wait for min_nr events: cuFile is only asked for what has
 * completed (min_nr 0, no timeout), and the platform paces the polls itself
 * (again at once while events arrive, else after 16 us doubling to 1 ms)
 * until min_nr events are gathered, the array is full or the deadline
 * passes. cuFile's own handling of a timeout is not relied upon. Events
 * already gathered are returned even if a later poll fails; the failure
 * shows at the next call. */
static CUfileError_t poll_status(const struct hfc_cufile *F, hipFileBatchHandle_t batch,
                                 unsigned min_nr, unsigned *nr, hipFileIOEvents_t *events,
                                 const struct timespec *timeout)
{
    const double deadline = now_s() + (double)timeout->tv_sec + (double)timeout->tv_nsec * 1e-9;
    const unsigned cap = *nr;
    unsigned got = 0;
    long pause_us = 16;
    CUfileError_t e = {CU_FILE_SUCCESS, 0};
    for (;;) {
        unsigned n = cap - got;
        e = F->cuFileBatchIOGetStatus(batch, 0, &n, (CUfileIOEvents_t *)(void *)(events + got),
                                      NULL);
        if (e.err != CU_FILE_SUCCESS) {
            if (got > 0)
                e.err = CU_FILE_SUCCESS;
            break;
        }
        got += n <= cap - got ? n : cap - got;
        if (got >= min_nr || got == cap)
            break;
        double left = deadline - now_s();
        if (left <= 0)
            break;
        if (n > 0) { /* progress: ask again at once */
            pause_us = 16;
            continue;
        }
        long us = (double)pause_us * 1e-6 < left ? pause_us : (long)(left * 1e6) + 1;
        struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
        nanosleep(&ts, NULL);
        if (pause_us < 1000)
            pause_us *= 2;
    }
    *nr = got;
    return e;
}

HFC_EXPORT hipFileError_t hipFileBatchIOGetStatus(hipFileBatchHandle_t batch, unsigned min_nr,
                                                  unsigned *nr, hipFileIOEvents_t *events,
                                                  struct timespec *timeout)
{
    CUfileError_t e;
    NEED_OPEN(cuFileBatchIOGetStatus);
    if (batch == NULL || !is_registered(&batches, batch) || nr == NULL)
        return make_error(hipFileInvalidValue);
    if ((*nr > 0 && events == NULL) || min_nr > *nr)
        return make_error(hipFileInvalidValue);
    if (timeout != NULL && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 ||
                            timeout->tv_nsec >= 1000000000L))
        return make_error(hipFileInvalidValue);
    if (timeout != NULL && *nr > 0 && !batch_wait_in_cufile())
        e = poll_status(F, batch, min_nr, nr, events, timeout);
    else
        e = F->cuFileBatchIOGetStatus(batch, min_nr, nr, (CUfileIOEvents_t *)(void *)events,
                                      timeout);
    if (e.err != CU_FILE_SUCCESS)
        return from_cufile(e);
    for (unsigned i = 0; i < *nr; i++) {
        ssize_t r = (ssize_t)events[i].ret;
        if (r < -1 && -r > 5000 && -r <= CU_FILE_IO_MAX_ERROR)
            events[i].ret = (size_t)(-(ssize_t)op_from_cufile((int)-r));
    }
    return ok;
}

HFC_EXPORT hipFileError_t hipFileBatchIOCancel(hipFileBatchHandle_t batch)
{
    NEED_OPEN(cuFileBatchIOCancel);
    if (batch == NULL || !is_registered(&batches, batch))
        return make_error(hipFileInvalidValue);
    return from_cufile(F->cuFileBatchIOCancel(batch));
}

HFC_EXPORT void hipFileBatchIODestroy(hipFileBatchHandle_t batch)
{
    const struct hfc_cufile *F = cf();
    if (F != NULL && batch != NULL && forget(&batches, batch))
        cufile_release(F, &batches, batch);
}

/* ---- versions and messages ------------------------------------------------ */

HFC_EXPORT hipFileError_t hipFileGetVersion(unsigned *major, unsigned *minor, unsigned *patch)
{
    if (major == NULL || minor == NULL || patch == NULL)
        return make_error(hipFileInvalidValue);
    *major = HFC_VERSION_MAJOR;
    *minor = HFC_VERSION_MINOR;
    *patch = HFC_VERSION_PATCH;
    return ok;
}

struct op_message {
    int code;
    const char *text;
};

static const struct op_message op_messages[] = {
    {hipFileSuccess, "success"},
    {hipFileDriverNotInitialized, "the hipFile driver is not initialized"},
    {hipFileDriverInvalidProps, "invalid driver property"},
    {hipFileDriverUnsupportedLimit, "driver property out of range"},
    {hipFileDriverVersionMismatch, "driver version mismatch"},
    {hipFileDriverVersionReadError, "cannot read the driver version"},
    {hipFileDriverClosing, "the driver is shutting down"},
    {hipFilePlatformNotSupported, "direct GPU file I/O is not supported on this platform"},
    {hipFileIONotSupported, "direct GPU file I/O is not supported for this file"},
    {hipFileDeviceNotSupported, "direct GPU file I/O is not supported on this GPU"},
    {hipFileDriverError, "kernel driver error"},
    {hipFileHipDriverError, "GPU driver error (see hip_drv_err)"},
    {hipFileHipPointerInvalid, "invalid device pointer"},
    {hipFileHipMemoryTypeInvalid, "unsupported memory type"},
    {hipFileHipPointerRangeError, "range exceeds the allocation"},
    {hipFileHipContextMismatch, "GPU context mismatch"},
    {hipFileInvalidMappingSize, "access beyond the pinned size"},
    {hipFileInvalidMappingRange, "access beyond the mapped range"},
    {hipFileInvalidFileType, "unsupported file type"},
    {hipFileInvalidFileOpenFlag, "unsupported file open flags"},
    {hipFileDIONotSet, "the file is not open with O_DIRECT"},
    {hipFileInvalidValue, "invalid argument"},
    {hipFileMemoryAlreadyRegistered, "buffer already registered"},
    {hipFileMemoryNotRegistered, "buffer not registered"},
    {hipFilePermissionDenied, "permission denied"},
    {hipFileDriverAlreadyOpen, "the driver is already open"},
    {hipFileHandleNotRegistered, "file handle not registered"},
    {hipFileHandleAlreadyRegistered, "file handle already registered"},
    {hipFileDeviceNotFound, "GPU not found"},
    {hipFileInternalError, "internal error"},
    {hipFileGetNewFDFailed, "cannot obtain a new file descriptor"},
    {hipFileDriverSetupError, "driver setup error"},
    {hipFileIODisabled, "direct GPU file I/O disabled by configuration"},
    {hipFileBatchSubmitFailed, "batch submission failed"},
    {hipFileGPUMemoryPinningFailed, "cannot pin GPU memory"},
    {hipFileBatchFull, "batch queue full"},
    {hipFileAsyncNotSupported, "stream-ordered I/O not supported"},
    {hipFileIOMaxError, "largest hipFile error number"},
};

HFC_EXPORT const char *hipFileGetOpErrorString(int status)
{
    int code = status < 0 && status != INT_MIN ? -status : status;
    for (size_t i = 0; i < sizeof op_messages / sizeof op_messages[0]; i++)
        if (op_messages[i].code == code)
            return op_messages[i].text;
    return "unknown hipFile error";
}
