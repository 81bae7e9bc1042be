/* A native backtrace for a crash in a Python process, for platforms where no
 * debugger is installed.
 *
 *     gcc -shared -fPIC -O1 -o /tmp/native_backtrace.so tools/native_backtrace.c
 *     LD_PRELOAD=/tmp/native_backtrace.so python -X faulthandler -m pytest ...
 *
 * On SIGSEGV or SIGBUS it writes to stderr the faulting address, the
 * instruction pointer, the thread id, the native frames (library and offset,
 * for addr2line) and the executable mappings, then lets the signal take its
 * course. Python's faulthandler, enabled after this library loads, runs
 * first and prints the Python stack; it then re-raises the signal and this
 * handler runs with the faulting frames below the two signal frames. */
#define _GNU_SOURCE
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

static struct sigaction previous_segv, previous_bus;

static void put(const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(2, s, n);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

/* The lines of /proc/self/maps that map code. */
static void put_code_mappings(void)
{
    int fd = open("/proc/self/maps", O_RDONLY);
    if (fd < 0)
        return;
    put("[native] code mappings:\n", 24);
    char chunk[8192], line[512];
    size_t used = 0;
    ssize_t r;
    while ((r = read(fd, chunk, sizeof chunk)) > 0) {
        for (ssize_t i = 0; i < r; i++) {
            if (used < sizeof line)
                line[used++] = chunk[i];
            if (chunk[i] != '\n')
                continue;
            if (memmem(line, used, " r-xp ", 6) != NULL)
                put(line, used);
            used = 0;
        }
    }
    close(fd);
}

static void on_fault(int sig, siginfo_t *info, void *context)
{
    const ucontext_t *uc = context;
    char head[192];
    int n = snprintf(head, sizeof head, "\n[native] signal %d at address %p, ip %p, thread %ld\n",
                     sig, info->si_addr, (void *)uc->uc_mcontext.gregs[REG_RIP],
                     (long)syscall(SYS_gettid));
    if (n > 0)
        put(head, (size_t)n < sizeof head ? (size_t)n : sizeof head - 1);
    void *frames[128];
    backtrace_symbols_fd(frames, backtrace(frames, 128), 2);
    put_code_mappings();
    sigaction(sig, sig == SIGSEGV ? &previous_segv : &previous_bus, NULL);
    raise(sig);
}

__attribute__((constructor)) static void install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, &previous_segv);
    sigaction(SIGBUS, &sa, &previous_bus);
    void *warm[1];
    backtrace(warm, 1); /* loads the unwinder now rather than inside the handler */
}
