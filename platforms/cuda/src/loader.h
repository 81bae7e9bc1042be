/* Run-time loading of NVIDIA's libraries for the cuda test platform.
 *
 * Neither library of this platform links against CUDA at build time: the
 * CUDA runtime (libcudart) and cuFile (libcufile) are found and opened the
 * first time they are needed, so the platform builds on any Linux machine.
 * This header is private to the platform; its functions are hidden. */
#ifndef HIPFILE_CUDA_LOADER_H
#define HIPFILE_CUDA_LOADER_H

#include <stddef.h>

#define HFC_EXPORT __attribute__((visibility("default")))
#define HFC_HIDDEN __attribute__((visibility("hidden")))

/* What to look for. */
struct hfc_search {
    const char *what;            /* "the CUDA runtime", for messages */
    const char *env_var;         /* full path override, e.g. HIPFILE_CUFILE_LIBRARY */
    const char *const *sonames;  /* NULL-terminated, most preferred first */
    const char *probe_symbol;    /* a symbol the library must export */
};

/* Open the library: the file named by env_var if set (and nothing else),
 * else a copy already loaded in the process under one of the sonames, else
 * the sonames through the system loader, else each soname in the folders
 * baked in at build time and $CUDA_HOME/lib64, $CUDA_PATH/lib64,
 * /usr/local/cuda/lib64. Returns the dlopen handle or NULL; on failure
 * prints one message naming every place tried. `path` receives the file
 * that was opened (may be NULL). */
HFC_HIDDEN void *hfc_open(const struct hfc_search *s, char *path, size_t path_len);

/* Resolve `name` in `lib` into *slot (NULL when absent). */
HFC_HIDDEN void hfc_sym(void *lib, const char *name, void *slot);

/* True when HIPFILE_CUDA_VERBOSE is set to a true value. */
HFC_HIDDEN int hfc_verbose(void);

/* Print "hipfile cuda platform: ..." on stderr. */
HFC_HIDDEN void hfc_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print once per `flag` (an int that starts at 0). */
HFC_HIDDEN void hfc_say_once(int *flag, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Parse a boolean environment value: 1 true, 0 false, -1 unset or unknown. */
HFC_HIDDEN int hfc_env_bool(const char *name);

#endif
