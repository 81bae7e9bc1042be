/* Finding and opening libcudart / libcufile at run time (see loader.h). */
#define _GNU_SOURCE
#include "loader.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Folders holding NVIDIA's Python wheels' libraries (site-packages/nvidia/
 * * /lib), colon-separated, found by build.sh on the build machine. */
#ifndef HIPFILE_CUDA_LIBDIRS
#define HIPFILE_CUDA_LIBDIRS ""
#endif

#define TRIED_MAX 4096

void hfc_say(const char *fmt, ...)
{
    va_list ap;
    char line[1024];
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "hipfile cuda platform: %s\n", line);
    fflush(stderr);
}

void hfc_say_once(int *flag, const char *fmt, ...)
{
    va_list ap;
    char line[1024];
    if (__atomic_exchange_n(flag, 1, __ATOMIC_ACQ_REL))
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "hipfile cuda platform: %s\n", line);
    fflush(stderr);
}

int hfc_env_bool(const char *name)
{
    const char *v = getenv(name);
    if (v == NULL || *v == '\0')
        return -1;
    if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") ||
        !strcasecmp(v, "on"))
        return 1;
    if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") ||
        !strcasecmp(v, "off"))
        return 0;
    return -1;
}

int hfc_verbose(void)
{
    return hfc_env_bool("HIPFILE_CUDA_VERBOSE") == 1;
}

void hfc_sym(void *lib, const char *name, void *slot)
{
    void *p = lib ? dlsym(lib, name) : NULL;
    memcpy(slot, &p, sizeof p);
}

static void note_tried(char *tried, const char *entry)
{
    size_t used = strlen(tried);
    if (used + strlen(entry) + 3 >= TRIED_MAX)
        return;
    if (used)
        strcat(tried, ", ");
    strcat(tried, entry);
}

/* Keep the handle only if it exports the probe symbol. */
static void *keep_valid(void *h, const struct hfc_search *s, char *path, size_t path_len)
{
    Dl_info info;
    void *sym;
    if (h == NULL)
        return NULL;
    sym = dlsym(h, s->probe_symbol);
    if (sym == NULL) {
        dlclose(h);
        return NULL;
    }
    if (path && path_len) {
        path[0] = '\0';
        if (dladdr(sym, &info) && info.dli_fname)
            snprintf(path, path_len, "%s", info.dli_fname);
    }
    return h;
}

static void *try_dirs(const char *dirs, const struct hfc_search *s, char *tried,
                      char *path, size_t path_len)
{
    char buf[4096];
    const char *p = dirs;
    while (p && *p) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 0 && len < 2048) {
            for (const char *const *n = s->sonames; *n; n++) {
                void *h;
                snprintf(buf, sizeof buf, "%.*s/%s", (int)len, p, *n);
                note_tried(tried, buf);
                h = keep_valid(dlopen(buf, RTLD_NOW | RTLD_LOCAL), s, path, path_len);
                if (h)
                    return h;
            }
        }
        p = end ? end + 1 : NULL;
    }
    return NULL;
}

void *hfc_open(const struct hfc_search *s, char *path, size_t path_len)
{
    char tried[TRIED_MAX];
    char dir[2048];
    const char *env = getenv(s->env_var);
    void *h;

    tried[0] = '\0';
    if (env && *env) {
        void *raw = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        const char *err = raw ? NULL : dlerror();
        h = keep_valid(raw, s, path, path_len);
        if (h)
            return h;
        if (err)
            hfc_say("cannot load %s from %s=%s: %s", s->what, s->env_var, env, err);
        else
            hfc_say("cannot use %s=%s as %s: it does not export %s", s->env_var, env,
                    s->what, s->probe_symbol);
        return NULL;
    }
    /* A copy the process already holds (PyTorch's, CuPy's) comes first, so
     * that one runtime serves everybody. */
    for (const char *const *n = s->sonames; *n; n++) {
        h = keep_valid(dlopen(*n, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD), s, path, path_len);
        if (h)
            return h;
    }
    for (const char *const *n = s->sonames; *n; n++) {
        note_tried(tried, *n);
        h = keep_valid(dlopen(*n, RTLD_NOW | RTLD_LOCAL), s, path, path_len);
        if (h)
            return h;
    }
    h = try_dirs(HIPFILE_CUDA_LIBDIRS, s, tried, path, path_len);
    if (h)
        return h;
    for (int i = 0; i < 2; i++) {
        const char *root = getenv(i == 0 ? "CUDA_HOME" : "CUDA_PATH");
        if (root && *root) {
            snprintf(dir, sizeof dir, "%s/lib64", root);
            h = try_dirs(dir, s, tried, path, path_len);
            if (h)
                return h;
        }
    }
    h = try_dirs("/usr/local/cuda/lib64", s, tried, path, path_len);
    if (h)
        return h;
    hfc_say("cannot load %s; set %s to its full path. Tried: %s", s->what, s->env_var,
            tried);
    return NULL;
}
