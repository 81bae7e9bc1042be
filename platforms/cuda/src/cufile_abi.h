/* The cuFile functions and types this platform calls, declared from cuFile's
 * documented ABI, and the table they are resolved into at run time. No
 * cuFile header is needed to build. */
#ifndef HIPFILE_CUDA_CUFILE_ABI_H
#define HIPFILE_CUDA_CUFILE_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

typedef struct CUstream_st *CUstream;

/* CUfileError_t: a CUfileOpError (numbered as hipFileOpError_t up to 5038;
 * newer cuFile releases add codes above that) and a CUresult. */
typedef struct hfc_cufile_error {
    int err;
    int cu_err;
} CUfileError_t;

enum {
    CU_FILE_SUCCESS = 0,
    CU_FILE_CUDA_DRIVER_ERROR = 5011,
    CU_FILE_INVALID_VALUE = 5022,
    /* Codes after CU_FILE_ASYNC_NOT_SUPPORTED (5038) in newer releases. */
    CU_FILE_INTERNAL_BATCH_SETUP_ERROR = 5039,
    CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR = 5040,
    CU_FILE_INTERNAL_BATCH_GETSTATUS_ERROR = 5041,
    CU_FILE_INTERNAL_BATCH_CANCEL_ERROR = 5042,
    CU_FILE_NOMEM_ERROR = 5043,
    CU_FILE_IO_ERROR = 5044,
    CU_FILE_INTERNAL_BUF_REGISTER_ERROR = 5045,
    CU_FILE_HASH_OPR_ERROR = 5046,
    CU_FILE_INVALID_CONTEXT_ERROR = 5047,
    CU_FILE_NVFS_INTERNAL_DRIVER_ERROR = 5048,
    CU_FILE_BATCH_NOCOMPAT_ERROR = 5049,
    CU_FILE_IO_MAX_ERROR = 5050,
};

typedef void *CUfileHandle_t;
typedef void *CUfileBatchHandle_t;

typedef struct hfc_cufile_descr {
    int type; /* 1 opaque fd, 2 win32, 3 user-space file system */
    union {
        int fd;
        void *handle;
    } handle;
    const void *fs_ops;
} CUfileDescr_t;

/* cuFile's properties use 32-bit fields where hipFile's use 64-bit ones. */
typedef struct hfc_cufile_drv_props {
    struct {
        unsigned major_version;
        unsigned minor_version;
        size_t poll_thresh_size;
        size_t max_direct_io_size;
        unsigned dstatusflags;
        unsigned dcontrolflags;
    } nvfs;
    unsigned fflags;
    unsigned max_device_cache_size;
    unsigned per_buffer_cache_size;
    unsigned max_device_pinned_mem_size;
    unsigned max_batch_io_size;
    unsigned max_batch_io_timeout_msecs;
} CUfileDrvProps_t;

typedef struct hfc_cufile_io_params {
    int mode; /* 1: batch */
    union {
        struct {
            void *devPtr_base;
            off_t file_offset;
            off_t devPtr_offset;
            size_t size;
        } batch;
    } u;
    CUfileHandle_t fh;
    int opcode; /* 0 read, 1 write */
    void *cookie;
} CUfileIOParams_t;

typedef struct hfc_cufile_io_events {
    void *cookie;
    int status; /* the same bits as hipFileStatus_t */
    size_t ret;
} CUfileIOEvents_t;

_Static_assert(sizeof(CUfileError_t) == 8, "CUfileError_t layout");
_Static_assert(sizeof(CUfileDescr_t) == 24, "CUfileDescr_t layout");
_Static_assert(sizeof(CUfileDrvProps_t) == 56, "CUfileDrvProps_t layout");
_Static_assert(sizeof(CUfileIOParams_t) == 64, "CUfileIOParams_t layout");
_Static_assert(sizeof(CUfileIOEvents_t) == 24, "CUfileIOEvents_t layout");

/* X(name, return type, parameter list) */
#define HFC_CUFILE_FUNCS(X)                                                                \
    X(cuFileDriverOpen, CUfileError_t, (void))                                             \
    X(cuFileDriverClose_v2, CUfileError_t, (void))                                         \
    X(cuFileDriverClose, CUfileError_t, (void))                                            \
    X(cuFileUseCount, long, (void))                                                        \
    X(cuFileDriverGetProperties, CUfileError_t, (CUfileDrvProps_t * props))                \
    X(cuFileDriverSetPollMode, CUfileError_t, (bool poll, size_t threshold))               \
    X(cuFileDriverSetMaxDirectIOSize, CUfileError_t, (size_t kib))                         \
    X(cuFileDriverSetMaxCacheSize, CUfileError_t, (size_t kib))                            \
    X(cuFileDriverSetMaxPinnedMemSize, CUfileError_t, (size_t kib))                        \
    X(cuFileGetParameterSizeT, CUfileError_t, (int param, size_t *value))                  \
    X(cuFileGetParameterBool, CUfileError_t, (int param, bool *value))                     \
    X(cuFileGetParameterString, CUfileError_t, (int param, char *buf, int len))            \
    X(cuFileSetParameterSizeT, CUfileError_t, (int param, size_t value))                   \
    X(cuFileSetParameterBool, CUfileError_t, (int param, bool value))                      \
    X(cuFileSetParameterString, CUfileError_t, (int param, const char *value))             \
    X(cuFileHandleRegister, CUfileError_t, (CUfileHandle_t * fh, CUfileDescr_t * descr))   \
    X(cuFileHandleDeregister, void, (CUfileHandle_t fh))                                   \
    X(cuFileBufRegister, CUfileError_t, (const void *base, size_t length, int flags))      \
    X(cuFileBufDeregister, CUfileError_t, (const void *base))                              \
    X(cuFileRead, ssize_t,                                                                 \
      (CUfileHandle_t fh, void *base, size_t size, off_t file_offset, off_t buf_offset))   \
    X(cuFileWrite, ssize_t,                                                                \
      (CUfileHandle_t fh, const void *base, size_t size, off_t file_offset,                \
       off_t buf_offset))                                                                  \
    X(cuFileReadAsync, CUfileError_t,                                                      \
      (CUfileHandle_t fh, void *base, size_t *size_p, off_t *file_offset_p,                \
       off_t *buf_offset_p, ssize_t *bytes_p, CUstream stream))                            \
    X(cuFileWriteAsync, CUfileError_t,                                                     \
      (CUfileHandle_t fh, void *base, size_t *size_p, off_t *file_offset_p,                \
       off_t *buf_offset_p, ssize_t *bytes_p, CUstream stream))                            \
    X(cuFileStreamRegister, CUfileError_t, (CUstream stream, unsigned flags))              \
    X(cuFileStreamDeregister, CUfileError_t, (CUstream stream))                            \
    X(cuFileBatchIOSetUp, CUfileError_t, (CUfileBatchHandle_t * batch, unsigned max_nr))   \
    X(cuFileBatchIOSubmit, CUfileError_t,                                                  \
      (CUfileBatchHandle_t batch, unsigned nr, CUfileIOParams_t * params, unsigned flags)) \
    X(cuFileBatchIOGetStatus, CUfileError_t,                                               \
      (CUfileBatchHandle_t batch, unsigned min_nr, unsigned *nr, CUfileIOEvents_t *events, \
       struct timespec *timeout))                                                          \
    X(cuFileBatchIOCancel, CUfileError_t, (CUfileBatchHandle_t batch))                     \
    X(cuFileBatchIODestroy, void, (CUfileBatchHandle_t batch))                             \
    X(cuFileGetVersion, CUfileError_t, (int *version))

#define HFC_DECLARE_FN(name, ret, params) typedef ret(*hfc_##name##_fn) params;
HFC_CUFILE_FUNCS(HFC_DECLARE_FN)
#undef HFC_DECLARE_FN

struct hfc_cufile {
#define HFC_MEMBER(name, ret, params) hfc_##name##_fn name;
    HFC_CUFILE_FUNCS(HFC_MEMBER)
#undef HFC_MEMBER
};

/* cuFile's config parameter enums, by name (hipFile's enums list the same
 * names; the tables in hipfile.c map one onto the other by name). */
enum {
    CUFILE_PARAM_PROFILE_STATS = 0,
    CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH = 1,
    CUFILE_PARAM_EXECUTION_MAX_IO_THREADS = 2,
    CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB = 3,
    CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM = 4,
    CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB = 5,
    CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB = 6,
    CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB = 7,
    CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB = 8,
    CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE = 9,
    CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB = 10,
    CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS = 11,
};
enum {
    CUFILE_PARAM_PROPERTIES_USE_POLL_MODE = 0,
    CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE = 1,
    CUFILE_PARAM_FORCE_COMPAT_MODE = 2,
    CUFILE_PARAM_FS_MISC_API_CHECK_AGGRESSIVE = 3,
    CUFILE_PARAM_EXECUTION_PARALLEL_IO = 4,
    CUFILE_PARAM_PROFILE_NVTX = 5,
    CUFILE_PARAM_PROPERTIES_ALLOW_SYSTEM_MEMORY = 6,
    CUFILE_PARAM_USE_PCIP2PDMA = 7,
    CUFILE_PARAM_PREFER_IO_URING = 8,
    CUFILE_PARAM_FORCE_ODIRECT_MODE = 9,
    CUFILE_PARAM_SKIP_TOPOLOGY_DETECTION = 10,
    CUFILE_PARAM_STREAM_MEMOPS_BYPASS = 11,
};
enum {
    CUFILE_PARAM_LOGGING_LEVEL = 0,
    CUFILE_PARAM_ENV_LOGFILE_PATH = 1,
    CUFILE_PARAM_LOG_DIR = 2,
};

#endif
