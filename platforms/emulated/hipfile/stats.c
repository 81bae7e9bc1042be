/* Cross-process I/O statistics of the emulated libhipfile.so: the API of
 * AMD's hipfile-stats.h (hipFileStatsCreateContext and friends).
 *
 * Every process that loads the library keeps its counters in a memfd
 * ("hipfile-emu-stats") mapped shared, and a thread listening on the abstract
 * Unix socket "hipfile-emu-stats.<pid>" hands that descriptor (SCM_RIGHTS) to
 * whoever connects. A monitoring process creates a context for the target's
 * pid, connects, maps the counters read-only and writes a report in the
 * format of AMD's library. The counters stay readable after the target
 * exits. HIPFILE_STATS_LEVEL, read at load, as AMD's: 0 records nothing,
 * unset or anything else that is not a number is 1; levels 1 and above record
 * totals and the histograms by transfer size.
 *
 * The fast path here is an O_DIRECT transfer on the caller's descriptor; any
 * other transfer is the fallback (buffered), and counts as a fast path
 * rejection. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "hipfile_internal.h"

#define EMU_EXPORT __attribute__((visibility("default")))
#define STATS_MAGIC 0x3154534d45464848ull /* "HHFEMST1" */
#define STATS_BINS 16

typedef enum {
    hipFileStatsSuccess,
    hipFileStatsInvalidArgument,
    hipFileStatsTargetProcessNotFound,
    hipFileStatsTargetProcessNotAccessible,
    hipFileStatsReportGenerationFailed,
} hipFileStatsError_t;

typedef struct {
    uint64_t count, bytes, ns, errors, unaligned;
    uint64_t bin_bytes[STATS_BINS], bin_ns[STATS_BINS], bin_errors[STATS_BINS];
} emu_path_stats_t;

typedef struct {
    uint64_t magic;
    int32_t level;
    int32_t pid;
    uint64_t handle_registrations, buffer_registrations, fastpath_rejections;
    emu_path_stats_t path[2][2]; /* [0 fast path, 1 fallback][0 read, 1 write] */
} emu_stats_shm_t;

struct hipFileStatsContext {
    int pid;
    int memfd;
    const emu_stats_shm_t *shm;
};

static emu_stats_shm_t emu_stats_off; /* where records go before the memfd exists */
static emu_stats_shm_t *emu_stats = &emu_stats_off;
static int emu_stats_level = 1;
static int emu_stats_memfd = -1;
static int emu_stats_listener = -1;
static pid_t emu_stats_owner = 0;
static pthread_mutex_t emu_stats_lock = PTHREAD_MUTEX_INITIALIZER;

static void socket_name(struct sockaddr_un *addr, socklen_t *len, int pid)
{
    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    /* abstract namespace: sun_path[0] is NUL */
    int n = snprintf(addr->sun_path + 1, sizeof(addr->sun_path) - 1, "hipfile-emu-stats.%d", pid);
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static void *serve(void *arg)
{
    int listener = (int)(intptr_t)arg;
    for (;;) {
        int conn = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        if (conn < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return NULL; /* the listener was shut down */
        }
        char byte = 'S';
        struct iovec iov = {&byte, 1};
        union {
            struct cmsghdr align;
            char buf[CMSG_SPACE(sizeof(int))];
        } control;
        memset(&control, 0, sizeof(control));
        struct msghdr msg = {0};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.buf;
        msg.msg_controllen = sizeof(control.buf);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &emu_stats_memfd, sizeof(int));
        (void)sendmsg(conn, &msg, MSG_NOSIGNAL);
        close(conn);
    }
}

static int read_level(void)
{
    const char *text = getenv("HIPFILE_STATS_LEVEL");
    if (text == NULL || *text == '\0')
        return 1;
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (*end != '\0' || v < 0 || v > 1000)
        return 1;
    return (int)v;
}

/* Creates this process's counters and starts its server (again after a
 * fork, so a child never writes into its parent's counters). */
static void stats_start(void)
{
    pthread_mutex_lock(&emu_stats_lock);
    pid_t self = getpid();
    if (emu_stats_owner == self) {
        pthread_mutex_unlock(&emu_stats_lock);
        return;
    }
    emu_stats_owner = self;
    emu_stats = &emu_stats_off;
    if (emu_stats_memfd >= 0)
        close(emu_stats_memfd); /* the parent's, inherited */
    if (emu_stats_listener >= 0)
        close(emu_stats_listener);
    emu_stats_memfd = emu_stats_listener = -1;
    emu_stats_level = read_level();

    int fd = memfd_create("hipfile-emu-stats", MFD_CLOEXEC);
    void *map = MAP_FAILED;
    if (fd >= 0 && ftruncate(fd, sizeof(emu_stats_shm_t)) == 0)
        map = mmap(NULL, sizeof(emu_stats_shm_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        if (fd >= 0)
            close(fd);
        pthread_mutex_unlock(&emu_stats_lock);
        return; /* no statistics for this process; I/O is unaffected */
    }
    emu_stats_shm_t *shm = map;
    shm->level = emu_stats_level;
    shm->pid = (int32_t)self;
    __atomic_store_n(&shm->magic, STATS_MAGIC, __ATOMIC_RELEASE);
    emu_stats_memfd = fd;

    struct sockaddr_un addr;
    socklen_t len;
    socket_name(&addr, &len, (int)self);
    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    pthread_t thread;
    pthread_attr_t attr;
    int started = 0;
    if (listener >= 0 && bind(listener, (struct sockaddr *)&addr, len) == 0 &&
        listen(listener, 8) == 0 && pthread_attr_init(&attr) == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        /* the server thread blocks no signal the application expects */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        started = pthread_create(&thread, &attr, serve, (void *)(intptr_t)listener) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
    }
    if (started) {
        emu_stats_listener = listener;
    } else if (listener >= 0) {
        close(listener);
    }
    emu_stats = shm;
    pthread_mutex_unlock(&emu_stats_lock);
}

__attribute__((constructor)) static void emu_stats_init(void) { stats_start(); }

__attribute__((destructor)) static void emu_stats_fini(void)
{
    if (emu_stats_listener >= 0 && emu_stats_owner == getpid())
        shutdown(emu_stats_listener, SHUT_RDWR);
}

/* Records go to this process's counters, started anew in a forked child. */
static emu_stats_shm_t *stats_here(void)
{
    if (emu_stats_owner != getpid())
        stats_start();
    return emu_stats;
}

static void add(uint64_t *p, uint64_t v) { __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }

/* Bins by KiB: 0-4, 4-8, 8-16, ..., 32768-65536, 65536 and more. */
static int bin_of(size_t size)
{
    size_t kib = size >> 10, lo = 4;
    if (kib < lo)
        return 0;
    int bin = 1;
    while (kib >= 2 * lo && bin < STATS_BINS - 1) {
        lo *= 2;
        bin++;
    }
    return bin;
}

uint64_t emu_stats_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void emu_stats_record_io(int is_write, int fast, const void *buf, size_t size, off_t off,
                         ssize_t result, uint64_t ns)
{
    if (emu_stats_level <= 0)
        return;
    emu_stats_shm_t *s = stats_here();
    emu_path_stats_t *p = &s->path[fast ? 0 : 1][is_write ? 1 : 0];
    int bin = bin_of(size);
    add(&p->count, 1);
    add(&p->ns, ns);
    add(&p->bin_ns[bin], ns);
    if (result < 0) {
        add(&p->errors, 1);
        add(&p->bin_errors[bin], 1);
    } else {
        add(&p->bytes, (uint64_t)result);
        add(&p->bin_bytes[bin], (uint64_t)result);
    }
    if ((uintptr_t)buf % EMU_DIRECT_ALIGN || (uint64_t)off % EMU_DIRECT_ALIGN ||
        size % EMU_DIRECT_ALIGN)
        add(&p->unaligned, 1);
    if (!fast)
        add(&s->fastpath_rejections, 1);
}

void emu_stats_record_registration(int buffer)
{
    if (emu_stats_level <= 0)
        return;
    emu_stats_shm_t *s = stats_here();
    add(buffer ? &s->buffer_registrations : &s->handle_registrations, 1);
}

/* ---- the monitoring side ---------------------------------------------------- */

static int process_gone(int pid)
{
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 1;
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')'); /* state follows the command name */
    return paren != NULL && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

EMU_EXPORT hipFileStatsError_t hipFileStatsCreateContext(struct hipFileStatsContext **context,
                                                         int targetPid)
{
    if (context == NULL || targetPid <= 0)
        return hipFileStatsInvalidArgument;
    if (kill(targetPid, 0) != 0 && errno == ESRCH)
        return hipFileStatsTargetProcessNotFound;
    struct hipFileStatsContext *ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        return hipFileStatsInvalidArgument;
    ctx->pid = targetPid;
    ctx->memfd = -1;
    *context = ctx;
    return hipFileStatsSuccess;
}

EMU_EXPORT void hipFileStatsCloseContext(struct hipFileStatsContext *context)
{
    if (context == NULL)
        return;
    if (context->shm != NULL)
        munmap((void *)context->shm, sizeof(emu_stats_shm_t));
    if (context->memfd >= 0)
        close(context->memfd);
    free(context);
}

/* One attempt: the target's counters descriptor, or -1. */
static int receive_counters(int pid)
{
    struct sockaddr_un addr;
    socklen_t len;
    socket_name(&addr, &len, pid);
    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0)
        return -1;
    struct timeval tv = {2, 0};
    setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    int fd = -1;
    if (connect(sock, (struct sockaddr *)&addr, len) == 0) {
        char byte;
        struct iovec iov = {&byte, 1};
        union {
            struct cmsghdr align;
            char buf[CMSG_SPACE(sizeof(int))];
        } control;
        struct msghdr msg = {0};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.buf;
        msg.msg_controllen = sizeof(control.buf);
        if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) == 1) {
            struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
            if (c != NULL && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
                memcpy(&fd, CMSG_DATA(c), sizeof(int));
        }
    }
    close(sock);
    return fd;
}

EMU_EXPORT hipFileStatsError_t hipFileStatsConnectToTargetProcess(
    struct hipFileStatsContext *context)
{
    if (context == NULL)
        return hipFileStatsInvalidArgument;
    if (context->shm != NULL)
        return hipFileStatsSuccess;
    /* As AMD's library: wait until the target serves its statistics (it may
     * not have loaded the library yet) or exits. */
    int fd = -1;
    for (;;) {
        fd = receive_counters(context->pid);
        if (fd >= 0 || process_gone(context->pid))
            break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (fd < 0)
        return hipFileStatsTargetProcessNotAccessible;
    struct stat st;
    void *map = MAP_FAILED;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(emu_stats_shm_t))
        map = mmap(NULL, sizeof(emu_stats_shm_t), PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED ||
        __atomic_load_n(&((const emu_stats_shm_t *)map)->magic, __ATOMIC_ACQUIRE) != STATS_MAGIC ||
        ((const emu_stats_shm_t *)map)->pid != context->pid) {
        if (map != MAP_FAILED)
            munmap(map, sizeof(emu_stats_shm_t));
        close(fd);
        return hipFileStatsTargetProcessNotAccessible;
    }
    context->memfd = fd;
    context->shm = map;
    return hipFileStatsSuccess;
}

/* Success once the target has exited; NotAccessible while it runs (AMD's
 * answers). block waits for the exit. */
EMU_EXPORT hipFileStatsError_t hipFileStatsPollTargetProcess(
    const struct hipFileStatsContext *context, bool block)
{
    if (context == NULL)
        return hipFileStatsInvalidArgument;
    while (!process_gone(context->pid)) {
        if (!block)
            return hipFileStatsTargetProcessNotAccessible;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return hipFileStatsSuccess;
}

static uint64_t load(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }

static double gib_per_s(uint64_t bytes, uint64_t ns)
{
    return ns == 0 ? 0.0 : ((double)bytes / (double)ns) * 1e9 / (double)(1ull << 30);
}

static double micros(uint64_t ns, uint64_t count)
{
    return count == 0 ? 0.0 : (double)ns / (double)count / 1000.0;
}

static const char *const path_names[2] = {"Fastpath", "Fallback"};
static const char *const dir_names[2] = {"Read", "Write"};

static void histogram(FILE *out, const emu_stats_shm_t *s, const char *title, const char *what,
                      int kind)
{
    fprintf(out, "%s\n%-18s", title, "IO Size (KiB)");
    for (int p = 0; p < 2; p++)
        for (int d = 0; d < 2; d++) {
            char head[96];
            snprintf(head, sizeof(head), "%s %s %s", path_names[p], dir_names[d], what);
            fprintf(out, "%34s", head);
        }
    fputc('\n', out);
    for (int b = 0; b < STATS_BINS; b++) {
        char label[32];
        if (b == 0)
            snprintf(label, sizeof(label), "0-4");
        else if (b == STATS_BINS - 1)
            snprintf(label, sizeof(label), "%u-...", 4u << (b - 1));
        else
            snprintf(label, sizeof(label), "%u-%u", 4u << (b - 1), 8u << (b - 1));
        fprintf(out, "%-18s", label);
        for (int p = 0; p < 2; p++)
            for (int d = 0; d < 2; d++) {
                const emu_path_stats_t *ps = &s->path[p][d];
                uint64_t bytes = load(&ps->bin_bytes[b]), ns = load(&ps->bin_ns[b]);
                if (kind == 0)
                    fprintf(out, "%34" PRIu64, bytes);
                else if (kind == 1)
                    fprintf(out, "%34g", gib_per_s(bytes, ns));
                else if (kind == 2)
                    fprintf(out, "%34" PRIu64, load(&ps->bin_errors[b]));
            }
        fputc('\n', out);
    }
}

static void report(FILE *out, const emu_stats_shm_t *s)
{
    fprintf(out, "AIS-STATS Version: 1\n");
    fprintf(out, "HipFile Stats Level: %d\n", (int)s->level);
    fprintf(out, "File Handle Registrations: %" PRIu64 "\n", load(&s->handle_registrations));
    fprintf(out, "Buffer Registrations: %" PRIu64 "\n", load(&s->buffer_registrations));
    fprintf(out, "Fastpath Rejections: %" PRIu64 "\n", load(&s->fastpath_rejections));
    for (int p = 0; p < 2; p++)
        for (int d = 0; d < 2; d++) {
            const emu_path_stats_t *ps = &s->path[p][d];
            const char *pn = path_names[p], *dn = dir_names[d];
            uint64_t count = load(&ps->count), bytes = load(&ps->bytes), ns = load(&ps->ns);
            fprintf(out, "\n");
            fprintf(out, "Total %s %s Size (B): %" PRIu64 "\n", pn, dn, bytes);
            fprintf(out, "Average %s %s Bandwidth (GiB/s): %g\n", pn, dn, gib_per_s(bytes, ns));
            fprintf(out, "Average %s %s Latency (us): %g\n", pn, dn, micros(ns, count));
            fprintf(out, "Total %s %s Errors: %" PRIu64 "\n", pn, dn, load(&ps->errors));
            fprintf(out, "Total %s %s Unaligned: %" PRIu64 "\n", pn, dn, load(&ps->unaligned));
            fprintf(out, "Total %s %s Count: %" PRIu64 "\n", pn, dn, count);
        }
    fprintf(out, "\n");
    if (s->level >= 1) {
        /* one table for all devices: this library does not split by device */
        fprintf(out, "All GPUs:\n");
        histogram(out, s, "IO Size Histogram", "Size (B)", 0);
        histogram(out, s, "IO Bandwidth Histogram", "Bandwidth (GiB/s)", 1);
        histogram(out, s, "IO Errors Histogram", "Error Count", 2);
        fprintf(out, "\n");
    }
}

EMU_EXPORT hipFileStatsError_t hipFileStatsGenerateReport(
    const struct hipFileStatsContext *context, int fd)
{
    if (context == NULL)
        return hipFileStatsInvalidArgument;
    if (context->shm == NULL || fd < 0)
        return hipFileStatsReportGenerationFailed;
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    if (out == NULL)
        return hipFileStatsReportGenerationFailed;
    report(out, context->shm);
    if (fclose(out) != 0) {
        free(text);
        return hipFileStatsReportGenerationFailed;
    }
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, text + done, size - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    free(text);
    return done == size ? hipFileStatsSuccess : hipFileStatsReportGenerationFailed;
}
