/* hipError_t names and descriptions: the one table of both test platforms
 * (platforms/common/hip_error_table.c, compiled into each platform's
 * libamdhip64.so). Private to the test platforms; hidden in both libraries. */
#ifndef HIPFILE_PLATFORMS_HIP_ERROR_TABLE_H
#define HIPFILE_PLATFORMS_HIP_ERROR_TABLE_H

struct hip_error_info {
    int code;         /* HIP's number */
    const char *name; /* hipGetErrorName: the enumerator's name */
    const char *text; /* hipGetErrorString */
};

/* The entry of a hipError_t number, or NULL for a number HIP does not
 * define. */
__attribute__((visibility("hidden"))) const struct hip_error_info *hip_error_info(int code);

/* hipGetErrorName and hipGetErrorString: "hipErrorUnknown" and "unknown
 * error" for a number HIP does not define, as HIP answers. */
__attribute__((visibility("hidden"))) const char *hip_error_name(int code);
__attribute__((visibility("hidden"))) const char *hip_error_string(int code);

#endif
