/* A native backtrace for a crash in a Python process, for platforms where no
 * debugger is installed.
 *
 *     gcc -shared -fPIC -O1 -o /tmp/native_backtrace.so tools/native_backtrace.c -ldl
 *     LD_PRELOAD=/tmp/native_backtrace.so python -X faulthandler -m pytest ...
 *
 * On SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT it writes to stderr the
 * signal, the faulting address, the instruction pointer, the thread id, the
 * native frames (library and offset, for addr2line) and the executable
 * mappings. It then calls the handler the program installed for that signal
 * (Python's faulthandler prints the Python stack) and lets the signal take
 * its course: the process still dies of it.
 *
 * It stays first whoever installs a handler later (faulthandler, a GPU
 * runtime, a file library): sigaction() and signal() are interposed for
 * those signals, so a later handler is recorded and chained to rather than
 * put in its place, and sigaction() reports the recorded one as current.
 * With NATIVE_BACKTRACE_INSTALLS=1 each such installation is reported, with
 * the library that made it and the library holding the handler.
 *
 * It writes to a copy of stderr made when it loads (pytest later points
 * descriptor 2 at a capture file, lost in a crash), or to the file named
 * by NATIVE_BACKTRACE_FILE. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef sighandler_t (*signal_fn)(int, sighandler_t);

static sigaction_fn real_sigaction;
static struct sigaction chained[NSIG]; /* what the program believes is installed */
static volatile sig_atomic_t watched[NSIG];
static volatile int printing;          /* one thread prints at a time */
static int out_fd = 2;
static int report_installs;            /* NATIVE_BACKTRACE_INSTALLS=1 */

static const int WATCHED[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

static void put(const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(out_fd, s, n);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

static unsigned long parse_hex(const char *s, size_t n, size_t *used)
{
    unsigned long v = 0;
    size_t i = 0;
    for (; i < n; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            break;
        v = v * 16 + (unsigned long)d;
    }
    *used = i;
    return v;
}

/* The text snprintf wrote into buf (of cap bytes), n as it returned. */
static void put_formatted(const char *buf, int n, size_t cap)
{
    if (n > 0)
        put(buf, (size_t)n < cap ? (size_t)n : cap - 1);
}

/* The lines of /proc/self/maps that map code, or (at != 0) the one line
 * whose range holds ``at``. */
static void put_mappings(unsigned long at)
{
    int fd = open("/proc/self/maps", O_RDONLY);
    if (fd < 0)
        return;
    if (at == 0)
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
            if (at != 0) {
                size_t a, b;
                unsigned long lo = parse_hex(line, used, &a);
                unsigned long hi = a < used ? parse_hex(line + a + 1, used - a - 1, &b) : 0;
                if (lo <= at && at < hi) {
                    put("[native] the instruction pointer is in: ", 40);
                    put(line, used);
                }
            } else if (memmem(line, used, " r-xp ", 6) != NULL) {
                put(line, used);
            }
            used = 0;
        }
    }
    close(fd);
}

static void lock_printing(void)
{
    /* a second thread faulting at the same time waits up to 2 s, then
     * prints anyway: interleaved output beats none */
    struct timespec nap = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 200 && __atomic_exchange_n(&printing, 1, __ATOMIC_ACQUIRE); i++)
        nanosleep(&nap, NULL);
}

static void on_fault(int sig, siginfo_t *info, void *context)
{
    const ucontext_t *uc = context;
    char head[224];
    lock_printing();
    int n = snprintf(head, sizeof head,
                     "\n[native] signal %d at address %p, ip %p, thread %ld, code %d\n", sig,
                     info->si_addr, (void *)uc->uc_mcontext.gregs[REG_RIP],
                     (long)syscall(SYS_gettid), info->si_code);
    put_formatted(head, n, sizeof head);
    /* where it happened first: the unwinder may itself fault on a broken
     * stack */
    put_mappings((unsigned long)uc->uc_mcontext.gregs[REG_RIP]);
    void *frames[128];
    backtrace_symbols_fd(frames, backtrace(frames, 128), out_fd);
    put_mappings(0);
    put("[native] end\n", 13);
    __atomic_store_n(&printing, 0, __ATOMIC_RELEASE);

    struct sigaction then = chained[sig];
    void *fn = (then.sa_flags & SA_SIGINFO) ? (void *)then.sa_sigaction : (void *)then.sa_handler;
    n = snprintf(head, sizeof head, "[native] next: the program's handler %p\n", fn);
    put_formatted(head, n, sizeof head);

    /* the program's own handler next (it may re-raise: the signal is
     * blocked here, so that stays pending until this handler returns) */
    if ((then.sa_flags & SA_SIGINFO) && then.sa_sigaction != NULL)
        then.sa_sigaction(sig, info, context);
    else if (!(then.sa_flags & SA_SIGINFO) && then.sa_handler != SIG_DFL
             && then.sa_handler != SIG_IGN)
        then.sa_handler(sig);
    /* then the default action: a fault re-executes and dies, an abort is
     * raised again */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    real_sigaction(sig, &dfl, NULL);
    if (sig == SIGABRT || info->si_code <= 0)
        raise(sig);
}

static int is_watched(int sig)
{
    return sig > 0 && sig < NSIG && watched[sig];
}

static const char *library_of(const void *p)
{
    Dl_info info;
    if (p != NULL && dladdr(p, &info) && info.dli_fname != NULL)
        return info.dli_fname;
    return "?";
}

/* Not in a signal handler: stdio and dladdr are fine here. */
static void report_install(int sig, const void *handler, const void *caller)
{
    if (!report_installs)
        return;
    char line[1024];
    int n = snprintf(line, sizeof line,
                     "[native] signal %d: %s installs handler %p (%s), to run after the native frames\n",
                     sig, library_of(caller), handler,
                     handler == (void *)SIG_DFL   ? "SIG_DFL"
                     : handler == (void *)SIG_IGN ? "SIG_IGN"
                                                  : library_of(handler));
    put_formatted(line, n, sizeof line);
}

int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (real_sigaction == NULL)
        real_sigaction = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    if (!is_watched(sig))
        return real_sigaction(sig, act, old);
    if (old != NULL)
        *old = chained[sig];
    if (act != NULL) {
        chained[sig] = *act;
        report_install(sig, (act->sa_flags & SA_SIGINFO) ? (void *)act->sa_sigaction
                                                         : (void *)act->sa_handler,
                       __builtin_return_address(0));
    }
    return 0;
}

sighandler_t signal(int sig, sighandler_t handler)
{
    if (!is_watched(sig)) {
        signal_fn real_signal = (signal_fn)dlsym(RTLD_NEXT, "signal");
        return real_signal != NULL ? real_signal(sig, handler) : SIG_ERR;
    }
    sighandler_t before = (chained[sig].sa_flags & SA_SIGINFO)
                              ? (sighandler_t)(void *)chained[sig].sa_sigaction
                              : chained[sig].sa_handler;
    memset(&chained[sig], 0, sizeof chained[sig]);
    chained[sig].sa_handler = handler;
    report_install(sig, (void *)handler, __builtin_return_address(0));
    return before;
}

__attribute__((constructor)) static void install(void)
{
    real_sigaction = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    const char *verbose = getenv("NATIVE_BACKTRACE_INSTALLS");
    report_installs = verbose != NULL && *verbose == '1';
    const char *path = getenv("NATIVE_BACKTRACE_FILE");
    int fd = path != NULL && *path ? open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)
                                   : fcntl(2, F_DUPFD_CLOEXEC, 100);
    if (fd >= 0)
        out_fd = fd;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof WATCHED / sizeof WATCHED[0]; i++) {
        real_sigaction(WATCHED[i], &sa, &chained[WATCHED[i]]);
        watched[WATCHED[i]] = 1;
    }
    void *warm[1];
    backtrace(warm, 1); /* loads the unwinder now rather than inside the handler */
}
