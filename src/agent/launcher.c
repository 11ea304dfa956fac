/*
 * launcher.c - monitor + job process trees (see launcher.h for the shape).
 *
 * Everything that allocates or may take a lock (environment, PATH lookup, user lookup,
 * cgroup setup, messages) happens in the agent before fork; the monitor and the job's
 * pre-exec code use only async-signal-safe calls (the agent is multi-threaded, and after
 * fork only the forking thread exists, possibly with other threads' locks held).
 */
#define _GNU_SOURCE /* pipe2 */
#include "agent/launcher.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Fixed descriptor numbers inside the monitor. */
enum { M_LIFE = 3, M_LOG = 4, M_NULL = 5, M_CG = 6, M_FIRST_FREE = 7 };

static pthread_mutex_t g_fork_mu = PTHREAD_MUTEX_INITIALIZER;

int64_t fg_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int fg_fmt(char *out, size_t outlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, outlen, fmt, ap);
    va_end(ap);
    return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

int fg_mkdir_p(const char *dir, mode_t mode)
{
    char buf[1024];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i < n; i++) {
        if (buf[i] != '/')
            continue;
        buf[i] = '\0';
        if (mkdir(buf, 0711) != 0 && errno != EEXIST)
            return -1;
        buf[i] = '/';
    }
    if (mkdir(buf, mode) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* ------------------------------------------------- async-signal-safe helpers */

static size_t s_len(const char *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    return n;
}

static void s_write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

static void s_puts(int fd, const char *s)
{
    s_write_all(fd, s, s_len(s));
}

/* Formats v in decimal into buf (>= 24 bytes); returns buf. */
static char *s_fmt_i64(char *buf, int64_t v)
{
    char tmp[24];
    int i = 0, neg = v < 0;
    uint64_t u = neg ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[i++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    int j = 0;
    if (neg)
        buf[j++] = '-';
    while (i)
        buf[j++] = tmp[--i];
    buf[j] = '\0';
    return buf;
}

static int64_t s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t s_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void s_close_from(int first)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)first, ~0U, 0) == 0)
        return;
#endif
    for (int fd = first; fd < 4096; fd++)
        close(fd);
}

static const char *s_errname(int e)
{
    switch (e) {
    case ENOENT:
        return "No such file or directory";
    case EACCES:
        return "Permission denied";
    case ENOEXEC:
        return "Exec format error";
    case ENOTDIR:
        return "Not a directory";
    case EPERM:
        return "Operation not permitted";
    case ENOMEM:
        return "Out of memory";
    case E2BIG:
        return "Argument list too long";
    default:
        return "error";
    }
}

/* Everything the monitor and the job need, prepared before fork. */
typedef struct prep {
    const char *exec_path; /* resolved program */
    char **argv;
    char **envp;
    const char *job_dir;
    const char *status_path;
    int switch_user;
    uid_t uid;
    gid_t gid;
    gid_t groups[64];
    int ngroups;
    const char *unix_user;
    int64_t log_limit;
    char marker[200];
    int life_w, log_fd, null_fd, cg_fd;
} prep_t;

/* The job: the grandchild of the agent, run in a vfork child (so: system calls on its own
 * descriptors and attributes only, nothing written to memory the monitor reads). Never
 * returns. */
static void job_exec(const prep_t *pp, int pipe_w)
{
    setpgid(0, 0); /* its own process group (the monitor does the same: no race) */
    if (pp->cg_fd >= 0) {
        /* "0" moves the writing process into the cgroup. */
        if (write(M_CG, "0", 1) != 1)
            s_puts(pipe_w, "fairgpu: warning: could not join the job's cgroup\n");
    }
    dup2(M_NULL, 0);
    dup2(pipe_w, 1);
    dup2(pipe_w, 2);
    s_close_from(3);
    if (pp->switch_user) {
        if (setgroups((size_t)pp->ngroups, pp->groups) != 0 || setgid(pp->gid) != 0 ||
            setuid(pp->uid) != 0) {
            int e = errno;
            s_puts(2, "fairgpu: warning: could not switch to user ");
            s_puts(2, pp->unix_user);
            s_puts(2, " (");
            s_puts(2, s_errname(e));
            s_puts(2, "); the job runs as the agent's user\n");
        }
    }
    if (chdir(pp->job_dir) != 0) {
        s_puts(2, "fairgpu: warning: cannot enter the job directory; running in /\n");
        if (chdir("/") != 0)
            _exit(126);
    }
    execve(pp->exec_path, pp->argv, pp->envp);
    int e = errno;
    s_puts(2, "fairgpu: cannot execute ");
    s_puts(2, pp->argv[0]);
    s_puts(2, ": ");
    s_puts(2, s_errname(e));
    s_puts(2, "\n");
    _exit(e == ENOENT ? 127 : 126);
}

/* Writes "kind num end_ms\n" to the status file. Not atomic (no tmp + rename: file
 * creation is the costly part of a trivial job); a reader that finds it incomplete
 * treats the status as lost, and the agent reads it only after the monitor exited. */
static void monitor_status(const prep_t *pp, const char *kind, int64_t num)
{
    char a[24], b[24], line[80];
    size_t n = 0;
    const char *parts[] = {kind, " ", s_fmt_i64(a, num), " ", s_fmt_i64(b, s_now_ms()), "\n"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        size_t l = s_len(parts[i]);
        if (n + l >= sizeof line)
            break;
        memcpy(line + n, parts[i], l);
        n += l;
    }
    int fd = open(pp->status_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return;
    s_write_all(fd, line, n); /* one write */
    close(fd);                /* no fsync: after a machine crash the job is gone anyway */
}

/* Copies one read of the job's output into the log, honouring the limit. */
static void monitor_copy(const prep_t *pp, const char *buf, size_t n, int64_t *written,
                         int *truncated)
{
    if (*truncated)
        return;
    if (*written + (int64_t)n <= pp->log_limit) {
        s_write_all(M_LOG, buf, n);
        *written += (int64_t)n;
        return;
    }
    size_t fit = (size_t)(pp->log_limit - *written);
    s_write_all(M_LOG, buf, fit);
    *written += (int64_t)fit;
    s_puts(M_LOG, pp->marker);
    *truncated = 1;
}

/* The monitor: the agent's child. Never returns. */
static void monitor_main(const prep_t *pp)
{
    static char buf[65536];
    setsid();
    /* Orphans of the job are re-parented to us (not init), so we can reap them all. */
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    /* Descriptors to fixed numbers, everything else closed. */
    int fds[4] = {pp->life_w, pp->log_fd, pp->null_fd, pp->cg_fd};
    int high[4];
    for (int i = 0; i < 4; i++)
        high[i] = fds[i] >= 0 ? fcntl(fds[i], F_DUPFD, 256) : -1;
    for (int i = 0; i < 4; i++) {
        if (high[i] >= 0) {
            dup2(high[i], M_LIFE + i);
        } else {
            close(M_LIFE + i);
        }
    }
    s_close_from(M_FIRST_FREE);
    /* A clean signal state for the job (the agent may ignore or block some). */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int sig = 1; sig < 32; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            signal(sig, SIG_DFL);

    int pfd[2];
    if (pipe(pfd) != 0) {
        pid_t zero = 0;
        s_write_all(M_LIFE, (const char *)&zero, sizeof zero);
        monitor_status(pp, "error", errno);
        _exit(1);
    }
    /* vfork: the job borrows the monitor's memory until its execve (no copy of the page
     * tables, which a trivial job pays for twice with fork: at the copy and at exec).
     * job_exec only makes system calls on its own descriptors and process attributes and
     * never returns; the monitor is single-threaded, so nothing else runs meanwhile. */
    pid_t job = vfork();
    if (job == 0) {
        close(pfd[0]);
        job_exec(pp, pfd[1]);
    }
    close(pfd[1]);
    if (job < 0) {
        int e = errno;
        pid_t zero = 0;
        s_write_all(M_LIFE, (const char *)&zero, sizeof zero);
        monitor_status(pp, "error", e);
        _exit(1);
    }
    /* Both sides set the group, so it exists before the agent learns the pgid. */
    setpgid(job, job);
    s_write_all(M_LIFE, (const char *)&job, sizeof job);
    signal(SIGPIPE, SIG_IGN);

    int64_t written = 0;
    int truncated = 0;
    int main_done = 0, status = 0;
    int64_t drain_until = 0, next_check = s_mono_ms() + 200;
    for (;;) {
        struct pollfd pf = {.fd = pfd[0], .events = POLLIN};
        int pr = poll(&pf, 1, main_done ? 100 : 200);
        if (pr > 0) {
            ssize_t n = read(pfd[0], buf, sizeof buf);
            if (n == 0)
                break; /* EOF: every holder of the pipe is gone */
            if (n > 0)
                monitor_copy(pp, buf, (size_t)n, &written, &truncated);
            else if (errno != EINTR && errno != EAGAIN)
                break;
        }
        int64_t now = s_mono_ms();
        if (!main_done && (pr == 0 || now >= next_check)) {
            next_check = now + 200;
            siginfo_t si;
            memset(&si, 0, sizeof si);
            if (waitid(P_PID, (id_t)job, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
                si.si_pid == job) {
                /* Main process ended: nothing of the attempt may outlive it. */
                kill(-job, SIGKILL);
                main_done = 1;
                drain_until = now + 2000;
            }
        } else if (main_done && now > drain_until) {
            break; /* a process that escaped the group still holds the pipe */
        }
    }
    close(pfd[0]);
    /* Wait for the main process without reaping, kill the rest of its group, reap. */
    siginfo_t si;
    while (waitid(P_PID, (id_t)job, &si, WEXITED | WNOWAIT) != 0 && errno == EINTR)
        ;
    kill(-job, SIGKILL);
    while (waitpid(job, &status, 0) < 0 && errno == EINTR)
        ;
    /* As a subreaper, every descendant whose parent died is now our child: reap them
     * until none is left, so "exited" means every process of the attempt is gone.
     * Bounded: one that left the group (setsid) is out of reach of kill(-job). */
    int64_t reap_until = s_mono_ms() + 2000;
    for (;;) {
        pid_t r = waitpid(-1, NULL, WNOHANG);
        if (r > 0)
            continue;
        if ((r < 0 && errno == ECHILD) || s_mono_ms() > reap_until)
            break;
        kill(-job, SIGKILL);
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    if (WIFSIGNALED(status))
        monitor_status(pp, "signal", WTERMSIG(status));
    else
        monitor_status(pp, "exit", WEXITSTATUS(status));
    _exit(0);
}

/* ------------------------------------------------------------ the zygote */

/*
 * Forking the agent itself is costly: it is multi-threaded, so every fork write-protects
 * its pages and each later write by another thread takes a copy-on-write fault plus a
 * TLB shootdown across CPUs (measured: most of the agent's CPU per trivial job). So the
 * agent forks once, early, a single-threaded *zygote*, and asks it over a socket to fork
 * the monitors. The request carries the prepared launch (strings and numbers) and the
 * log, /dev/null and cgroup descriptors (SCM_RIGHTS); the reply carries the monitor's
 * and the job's pids and the read end of the life pipe. Monitors are the zygote's
 * children; it reaps them. It exits when the agent closes the socket (or dies).
 */

static int g_zy_fd = -1;   /* agent side of the socket; -1: not started */
static pid_t g_zy_pid = 0; /* the zygote */

static int read_full(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static int write_full(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Sends n bytes with up to 3 descriptors attached. */
static int send_fds(int sock, const void *buf, size_t n, const int *fds, int nfds)
{
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = n};
    union {
        char buf[CMSG_SPACE(3 * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > 0) {
        memset(&u, 0, sizeof u);
        mh.msg_control = u.buf;
        mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
    }
    ssize_t w;
    while ((w = sendmsg(sock, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    if (w < 0)
        return -1;
    if ((size_t)w < n)
        return write_full(sock, (const char *)buf + w, n - (size_t)w);
    return 0;
}

/* Receives exactly n bytes; descriptors that came with them go to fds (-1 if none). */
static int recv_fds(int sock, void *buf, size_t n, int *fds, int maxfds)
{
    for (int i = 0; i < maxfds; i++)
        fds[i] = -1;
    struct iovec iov = {.iov_base = buf, .iov_len = n};
    union {
        char buf[CMSG_SPACE(3 * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    mh.msg_control = u.buf;
    mh.msg_controllen = sizeof u.buf;
    ssize_t r;
    while ((r = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
        ;
    if (r <= 0)
        return -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            if (k > maxfds)
                k = maxfds;
            memcpy(fds, CMSG_DATA(c), (size_t)k * sizeof(int));
        }
    }
    if ((size_t)r < n)
        return read_full(sock, (char *)buf + r, n - (size_t)r);
    return 0;
}

/* The request: fixed header, then the strings, NUL-separated. */
typedef struct zy_req {
    uint32_t len; /* bytes of strings that follow */
    int32_t switch_user, uid, gid, ngroups, argc, envc, has_cg;
    gid_t groups[64];
    int64_t log_limit;
} zy_req_t;

typedef struct zy_rep {
    int32_t monitor, job, err;
} zy_rep_t;

static void buf_add(char **b, size_t *n, size_t *cap, const char *s)
{
    size_t l = strlen(s) + 1;
    *b = fg_xgrow(*b, cap, *n + l, 1);
    memcpy(*b + *n, s, l);
    *n += l;
}

/* Takes the next NUL-terminated string of [*p, end); NULL if malformed. */
static const char *buf_take(const char **p, const char *end)
{
    const char *s = *p;
    const char *z = memchr(s, '\0', (size_t)(end - s));
    if (!z)
        return NULL;
    *p = z + 1;
    return s;
}

/* The zygote's loop. Never returns. */
static void zygote_main(int sock)
{
    signal(SIGCHLD, SIG_DFL);
    signal(SIGPIPE, SIG_IGN);
    for (;;) {
        while (waitpid(-1, NULL, WNOHANG) > 0) /* reap finished monitors */
            ;
        struct pollfd pf = {.fd = sock, .events = POLLIN};
        if (poll(&pf, 1, 1000) == 0)
            continue;
        zy_req_t rq;
        int fds[3];
        if (recv_fds(sock, &rq, sizeof rq, fds, 3) != 0)
            _exit(0); /* the agent is gone */
        char *strs = malloc(rq.len + 1);
        zy_rep_t rep = {0, 0, 0};
        if (!strs || rq.len > (64u << 20) || read_full(sock, strs, rq.len) != 0)
            _exit(1);
        const char *p = strs, *end = strs + rq.len;
        prep_t pp;
        memset(&pp, 0, sizeof pp);
        pp.exec_path = buf_take(&p, end);
        pp.job_dir = buf_take(&p, end);
        pp.status_path = buf_take(&p, end);
        pp.unix_user = buf_take(&p, end);
        const char *marker = buf_take(&p, end);
        char **argv = calloc((size_t)rq.argc + 1, sizeof *argv);
        char **envp = calloc((size_t)rq.envc + 1, sizeof *envp);
        int okp = pp.exec_path && pp.job_dir && pp.status_path && pp.unix_user && marker && argv &&
                  envp && rq.argc > 0 && rq.ngroups >= 0 && rq.ngroups <= 64;
        for (int i = 0; okp && i < rq.argc; i++)
            okp = (argv[i] = (char *)buf_take(&p, end)) != NULL;
        for (int i = 0; okp && i < rq.envc; i++)
            okp = (envp[i] = (char *)buf_take(&p, end)) != NULL;
        int life[2] = {-1, -1};
        if (!okp || fds[0] < 0 || fds[1] < 0) {
            rep.err = EINVAL;
        } else if (pipe2(life, O_CLOEXEC) != 0) {
            rep.err = errno;
        } else {
            snprintf(pp.marker, sizeof pp.marker, "%s", marker);
            pp.argv = argv;
            pp.envp = envp;
            pp.switch_user = rq.switch_user;
            pp.uid = (uid_t)rq.uid;
            pp.gid = (gid_t)rq.gid;
            pp.ngroups = rq.ngroups;
            memcpy(pp.groups, rq.groups, sizeof pp.groups);
            pp.log_limit = rq.log_limit;
            pp.log_fd = fds[0];
            pp.null_fd = fds[1];
            pp.cg_fd = rq.has_cg ? fds[2] : -1;
            pp.life_w = life[1];
            pid_t mon = fork();
            if (mon == 0) {
                close(sock);
                monitor_main(&pp);
            }
            close(life[1]);
            if (mon < 0) {
                rep.err = errno;
            } else {
                rep.monitor = mon; /* the job's pid follows on the life pipe */
                rep.job = 0;
            }
        }
        int lfd = life[0];
        send_fds(sock, &rep, sizeof rep, &lfd, lfd >= 0 && !rep.err ? 1 : 0);
        if (life[0] >= 0)
            close(life[0]);
        for (int i = 0; i < 3; i++)
            if (fds[i] >= 0)
                close(fds[i]);
        free(argv);
        free(envp);
        free(strs);
    }
}

int fg_launcher_init(void)
{
    pthread_mutex_lock(&g_fork_mu);
    if (g_zy_fd >= 0) {
        pthread_mutex_unlock(&g_fork_mu);
        return 0;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        pthread_mutex_unlock(&g_fork_mu);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        /* Single-threaded from here on. Own session: terminal signals are the agent's. */
        setsid();
        if (sv[1] != 3) {
            dup2(sv[1], 3);
            close(sv[1]);
        }
        s_close_from(4);
        int fd0 = open("/dev/null", O_RDWR);
        if (fd0 >= 0 && fd0 != 0) {
            dup2(fd0, 0);
            close(fd0);
        }
        zygote_main(3);
    }
    close(sv[1]);
    if (pid < 0) {
        close(sv[0]);
        pthread_mutex_unlock(&g_fork_mu);
        return -1;
    }
    g_zy_fd = sv[0];
    g_zy_pid = pid;
    pthread_mutex_unlock(&g_fork_mu);
    return 0;
}

void fg_launcher_shutdown(void)
{
    pthread_mutex_lock(&g_fork_mu);
    if (g_zy_fd >= 0) {
        close(g_zy_fd);
        g_zy_fd = -1;
        while (waitpid(g_zy_pid, NULL, 0) < 0 && errno == EINTR)
            ;
        g_zy_pid = 0;
    }
    pthread_mutex_unlock(&g_fork_mu);
}

/* Asks the zygote to start the monitor of pp. 0 with p filled, or -1 (use fork). */
static int zygote_launch(const prep_t *pp, fg_proc_t *p)
{
    if (g_zy_fd < 0 && fg_launcher_init() != 0)
        return -1;
    zy_req_t rq;
    memset(&rq, 0, sizeof rq);
    char *b = NULL;
    size_t n = 0, cap = 0;
    buf_add(&b, &n, &cap, pp->exec_path);
    buf_add(&b, &n, &cap, pp->job_dir);
    buf_add(&b, &n, &cap, pp->status_path);
    buf_add(&b, &n, &cap, pp->unix_user ? pp->unix_user : "");
    buf_add(&b, &n, &cap, pp->marker);
    for (; pp->argv[rq.argc]; rq.argc++)
        buf_add(&b, &n, &cap, pp->argv[rq.argc]);
    for (; pp->envp[rq.envc]; rq.envc++)
        buf_add(&b, &n, &cap, pp->envp[rq.envc]);
    rq.len = (uint32_t)n;
    rq.switch_user = pp->switch_user;
    rq.uid = (int32_t)pp->uid;
    rq.gid = (int32_t)pp->gid;
    rq.ngroups = pp->ngroups;
    memcpy(rq.groups, pp->groups, sizeof rq.groups);
    rq.log_limit = pp->log_limit;
    rq.has_cg = pp->cg_fd >= 0;
    int fds[3] = {pp->log_fd, pp->null_fd, pp->cg_fd};
    zy_rep_t rep;
    int lfd[1] = {-1};
    pthread_mutex_lock(&g_fork_mu);
    int ok = g_zy_fd >= 0 && send_fds(g_zy_fd, &rq, sizeof rq, fds, rq.has_cg ? 3 : 2) == 0 &&
             write_full(g_zy_fd, b, n) == 0 && recv_fds(g_zy_fd, &rep, sizeof rep, lfd, 1) == 0;
    if (!ok && g_zy_fd >= 0) {
        /* The zygote died: forget it (the next launch starts a new one). */
        close(g_zy_fd);
        g_zy_fd = -1;
        waitpid(g_zy_pid, NULL, WNOHANG);
        g_zy_pid = 0;
    }
    pthread_mutex_unlock(&g_fork_mu);
    free(b);
    if (!ok || rep.err || lfd[0] < 0) {
        if (lfd[0] >= 0)
            close(lfd[0]);
        return -1;
    }
    p->monitor = rep.monitor;
    p->pgid = 0;
    p->pgid_known = 0;
    p->life_fd = lfd[0];
    p->child = 0; /* the zygote reaps it */
    return 0;
}

/* ------------------------------------------------------------ agent side */

/* Appends "; msg" to the proc's warnings and logs it. */
static void warn(fg_proc_t *p, const char *msg)
{
    size_t n = strlen(p->warnings);
    snprintf(p->warnings + n, sizeof p->warnings - n, "%s%s", n ? "; " : "", msg);
    fg_log(FG_LOG_WARN, "%s", msg);
}

/* Resolves argv0 through PATH (as execvp would); returns a malloc'd path. */
static char *resolve(const char *argv0, const char *path)
{
    if (strchr(argv0, '/'))
        return fg_xstrdup(argv0);
    const char *p = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
    char cand[1024];
    while (*p) {
        const char *e = strchr(p, ':');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0 && len + strlen(argv0) + 2 < sizeof cand) {
            snprintf(cand, sizeof cand, "%.*s/%s", (int)len, p, argv0);
            if (access(cand, X_OK) == 0)
                return fg_xstrdup(cand);
        }
        if (!e)
            break;
        p = e + 1;
    }
    return fg_xstrdup(argv0); /* execve fails; the job's log says why */
}

typedef struct strv {
    char **v;
    size_t n, cap;
} strv_t;

static void strv_push(strv_t *s, char *owned)
{
    s->v = fg_xgrow(s->v, &s->cap, s->n + 2, sizeof *s->v);
    s->v[s->n++] = owned;
    s->v[s->n] = NULL;
}

static char *kv(const char *k, const char *v)
{
    size_t n = strlen(k) + strlen(v) + 2;
    char *s = fg_xmalloc(n);
    snprintf(s, n, "%s=%s", k, v);
    return s;
}

static void strv_free(strv_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
}

/* 1 if "KEY=..." names a variable the agent owns. */
static int reserved_env(const char *s)
{
    return !strncmp(s, "FAIRGPU_", 8) || !strncmp(s, "CUDA_VISIBLE_DEVICES=", 21) ||
           !strchr(s, '=');
}

/* Builds the job's environment: base, the job's own env, then the FAIRGPU_* variables. */
static void build_env(const fg_launch_t *l, const char *home, const char *user, strv_t *env)
{
    const char *path = getenv("PATH");
    strv_push(env, kv("PATH", path && *path ? path
                                            : "/usr/local/sbin:/usr/local/bin:/usr/sbin:"
                                              "/usr/bin:/sbin:/bin"));
    strv_push(env, kv("HOME", home));
    if (user) {
        strv_push(env, kv("USER", user));
        strv_push(env, kv("LOGNAME", user));
    }
    const char *lang = getenv("LANG");
    if (lang)
        strv_push(env, kv("LANG", lang));
    for (size_t i = 0; l->env && l->env[i]; i++) {
        if (reserved_env(l->env[i]))
            continue;
        /* A job variable replaces a base one of the same name. */
        size_t klen = (size_t)(strchr(l->env[i], '=') - l->env[i]);
        for (size_t j = 0; j < env->n; j++) {
            if (!strncmp(env->v[j], l->env[i], klen + 1)) {
                free(env->v[j]);
                memmove(&env->v[j], &env->v[j + 1], (env->n - j) * sizeof *env->v);
                env->n--;
                break;
            }
        }
        strv_push(env, fg_xstrdup(l->env[i]));
    }
    char num[32];
    strv_push(env,
              kv("CUDA_VISIBLE_DEVICES", l->cuda_visible_devices ? l->cuda_visible_devices : ""));
    strv_push(env, kv("FAIRGPU_GPU_INDICES", l->gpu_indices ? l->gpu_indices : ""));
    strv_push(env, kv("FAIRGPU_JOB_ID", l->job_id));
    snprintf(num, sizeof num, "%d", l->attempt);
    strv_push(env, kv("FAIRGPU_ATTEMPT", num));
    if (l->model)
        strv_push(env, kv("FAIRGPU_MODEL", l->model));
    if (l->dataset)
        strv_push(env, kv("FAIRGPU_DATASET", l->dataset));
    strv_push(env, kv("FAIRGPU_CHECKPOINT_DIR", l->checkpoint_dir));
    snprintf(num, sizeof num, "%d", l->rank);
    strv_push(env, kv("FAIRGPU_NODE_RANK", num));
    snprintf(num, sizeof num, "%d", l->num_nodes > 0 ? l->num_nodes : 1);
    strv_push(env, kv("FAIRGPU_NUM_NODES", num));
    strv_push(env, kv("FAIRGPU_MASTER_ADDR", l->master_addr ? l->master_addr : "127.0.0.1"));
    snprintf(num, sizeof num, "%d", l->master_port > 0 ? l->master_port : 29500);
    strv_push(env, kv("FAIRGPU_MASTER_PORT", num));
}

/* Writes a small value into a cgroup control file; 0 or -1. */
static int cg_write(const char *dir, const char *file, const char *val)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, val, strlen(val));
    close(fd);
    return n == (ssize_t)strlen(val) ? 0 : -1;
}

/*
 * Creates the job's cgroup v2 directory with its limits and opens its cgroup.procs.
 * Returns the fd or -1 (then a warning was recorded).
 */
static int cg_setup(const fg_launch_t *l, fg_proc_t *p)
{
    char parent[512], msg[600];
    snprintf(parent, sizeof parent, "%s", l->cgroup_dir);
    char *slash = strrchr(parent, '/');
    if (!slash || slash == parent) {
        warn(p, "cgroup: bad cgroup directory; cpu/memory limits not applied");
        return -1;
    }
    *slash = '\0';
    char root[512];
    snprintf(root, sizeof root, "%s", parent);
    slash = strrchr(root, '/');
    if (slash && slash != root)
        *slash = '\0';
    /* Enable the controllers for the fairgpu parent and inside it (errors are checked by
     * the limit writes below). */
    if (mkdir(parent, 0755) != 0 && errno != EEXIST) {
        snprintf(msg, sizeof msg, "cgroup v2 not writable (%s: %s); cpu/memory limits not applied",
                 parent, strerror(errno));
        warn(p, msg);
        return -1;
    }
    cg_write(root, "cgroup.subtree_control", "+cpu +memory");
    cg_write(parent, "cgroup.subtree_control", "+cpu +memory");
    if (mkdir(l->cgroup_dir, 0755) != 0 && errno != EEXIST) {
        snprintf(msg, sizeof msg, "cgroup: cannot create %s (%s); limits not applied",
                 l->cgroup_dir, strerror(errno));
        warn(p, msg);
        return -1;
    }
    char val[64];
    if (l->cpus > 0) {
        snprintf(val, sizeof val, "%lld 100000", (long long)l->cpus * 100000);
        if (cg_write(l->cgroup_dir, "cpu.max", val) != 0)
            warn(p, "cgroup: cpu.max not writable; CPU limit not applied");
    }
    if (l->memory_mb > 0) {
        snprintf(val, sizeof val, "%lld", (long long)l->memory_mb * 1024 * 1024);
        if (cg_write(l->cgroup_dir, "memory.max", val) != 0)
            warn(p, "cgroup: memory.max not writable; memory limit not applied");
    }
    char procs[600];
    fg_fmt(procs, sizeof procs, "%s/cgroup.procs", l->cgroup_dir);
    int fd = open(procs, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        fg_fmt(msg, sizeof msg, "cgroup: cannot open %s (%s); limits not applied", procs,
               strerror(errno));
        warn(p, msg);
        rmdir(l->cgroup_dir);
        return -1;
    }
    snprintf(p->cgroup, sizeof p->cgroup, "%s", l->cgroup_dir);
    return fd;
}

/* Makes dir (0700) and gives it to uid/gid when switching users. */
static int own_dir(const char *dir, int switch_user, uid_t uid, gid_t gid, fg_proc_t *p)
{
    if (fg_mkdir_p(dir, 0700) != 0)
        return -1;
    chmod(dir, 0700);
    if (switch_user && chown(dir, uid, gid) != 0) {
        char msg[700];
        snprintf(msg, sizeof msg, "cannot give %s to the job's user (%s)", dir, strerror(errno));
        warn(p, msg);
    }
    return 0;
}

int fg_launch_start(const fg_launch_t *l, fg_proc_t *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    p->life_fd = -1;
    prep_t pp;
    memset(&pp, 0, sizeof pp);
    pp.life_w = pp.log_fd = pp.null_fd = pp.cg_fd = -1;
    strv_t argv = {0}, env = {0};
    char *exec_path = NULL;
    int life[2] = {-1, -1};
    int rc = -1;

    /* The Unix account. */
    char pwbuf[4096];
    struct passwd pw, *pwr = NULL;
    if (l->unix_user) {
        if (getpwnam_r(l->unix_user, &pw, pwbuf, sizeof pwbuf, &pwr) != 0 || !pwr) {
            snprintf(err, errlen, "no Unix account %s for the job", l->unix_user);
            goto out;
        }
        if (pwr->pw_uid == 0) {
            snprintf(err, errlen, "refusing to run a job as root (account %s)", l->unix_user);
            goto out;
        }
        pp.switch_user = 1;
        pp.uid = pwr->pw_uid;
        pp.gid = pwr->pw_gid;
        pp.unix_user = l->unix_user;
        int ng = (int)(sizeof pp.groups / sizeof pp.groups[0]);
        if (getgrouplist(l->unix_user, pwr->pw_gid, pp.groups, &ng) < 0) {
            pp.groups[0] = pwr->pw_gid;
            ng = 1;
        }
        pp.ngroups = ng;
    }

    /* Directories. */
    if (fg_mkdir_p(l->run_dir, 0700) != 0) {
        snprintf(err, errlen, "cannot create %s: %s", l->run_dir, strerror(errno));
        goto out;
    }
    if (own_dir(l->job_dir, pp.switch_user, pp.uid, pp.gid, p) != 0 ||
        own_dir(l->checkpoint_dir, pp.switch_user, pp.uid, pp.gid, p) != 0) {
        snprintf(err, errlen, "cannot create the job's directories: %s", strerror(errno));
        goto out;
    }
    snprintf(p->log_path, sizeof p->log_path, "%s/output.log", l->run_dir);
    snprintf(p->status_path, sizeof p->status_path, "%s/exit", l->run_dir);
    pp.status_path = p->status_path;
    pp.job_dir = l->job_dir;
    unlink(p->status_path);
    pp.log_fd = open(p->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    pp.null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (pp.log_fd < 0 || pp.null_fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", p->log_path, strerror(errno));
        goto out;
    }
    pp.log_limit = l->log_limit_bytes > 0 ? l->log_limit_bytes : FG_LOG_LIMIT_DEFAULT;
    snprintf(pp.marker, sizeof pp.marker,
             "\n[fairgpu: log truncated: limit of %lld bytes reached, further output "
             "discarded]\n",
             (long long)pp.log_limit);
    if (l->cgroup_dir)
        pp.cg_fd = cg_setup(l, p);

    /* Command and environment. */
    if (l->argv && l->argv[0]) {
        for (size_t i = 0; l->argv[i]; i++)
            strv_push(&argv, fg_xstrdup(l->argv[i]));
    } else if (l->shell) {
        strv_push(&argv, fg_xstrdup("/bin/sh"));
        strv_push(&argv, fg_xstrdup("-c"));
        strv_push(&argv, fg_xstrdup(l->shell));
    } else {
        snprintf(err, errlen, "empty command");
        goto out;
    }
    build_env(l, l->job_dir, pp.switch_user ? l->unix_user : NULL, &env);
    const char *envpath = getenv("PATH");
    for (size_t i = 0; i < env.n; i++)
        if (!strncmp(env.v[i], "PATH=", 5))
            envpath = env.v[i] + 5;
    exec_path = resolve(argv.v[0], envpath);
    pp.exec_path = exec_path;
    pp.argv = argv.v;
    pp.envp = env.v;

    if (zygote_launch(&pp, p) == 0) {
        if (!l->async_pgid)
            fg_proc_poll_pgid(p, -1);
        rc = 0;
        goto out;
    }
    /* No zygote (it could not be started): fork the monitor from here. */
    if (pipe2(life, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        goto out;
    }
    pp.life_w = life[1];

    pthread_mutex_lock(&g_fork_mu);
    pid_t mon = fork();
    if (mon == 0)
        monitor_main(&pp);
    pthread_mutex_unlock(&g_fork_mu);
    if (mon < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        goto out;
    }
    close(life[1]);
    life[1] = -1;
    p->monitor = mon;
    p->child = 1;
    p->life_fd = life[0];
    life[0] = -1;
    p->pgid = 0;
    p->pgid_known = 0;
    if (!l->async_pgid)
        fg_proc_poll_pgid(p, -1);
    rc = 0;
out:
    if (life[0] >= 0)
        close(life[0]);
    if (life[1] >= 0)
        close(life[1]);
    if (pp.log_fd >= 0)
        close(pp.log_fd);
    if (pp.null_fd >= 0)
        close(pp.null_fd);
    if (pp.cg_fd >= 0)
        close(pp.cg_fd);
    if (rc != 0 && p->cgroup[0])
        rmdir(p->cgroup);
    free(exec_path);
    strv_free(&argv);
    strv_free(&env);
    return rc;
}

int fg_proc_poll_pgid(fg_proc_t *p, int timeout_ms)
{
    if (p->pgid_known)
        return 1;
    if (p->life_fd < 0) {
        p->pgid_known = 1;
        return 1;
    }
    struct pollfd pf = {.fd = p->life_fd, .events = POLLIN};
    int pr;
    while ((pr = poll(&pf, 1, timeout_ms)) < 0 && errno == EINTR)
        ;
    if (pr <= 0)
        return 0;
    pid_t job = 0;
    /* One 4-byte write by the monitor: atomic on a pipe. EOF: it never started one. */
    if (read_full(p->life_fd, &job, sizeof job) != 0 || job < 0)
        job = 0;
    p->pgid = job;
    p->pgid_known = 1;
    return 1;
}

void fg_proc_signal(const fg_proc_t *p, int sig)
{
    if (p->pgid > 0)
        kill(-p->pgid, sig);
    if (sig == SIGKILL && p->cgroup[0])
        cg_write(p->cgroup, "cgroup.kill", "1");
}

/* Reads "pid (comm) S ppid pgrp" from /proc/PID/stat: state and pgrp. 0 or -1. */
static int proc_stat(const char *pid, char *state, long *pgrp)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *rp = strrchr(buf, ')'); /* comm may contain spaces and parentheses */
    long ppid;
    if (!rp || sscanf(rp + 1, " %c %ld %ld", state, &ppid, pgrp) != 3)
        return -1;
    return 0;
}

int fg_proc_group_alive(const fg_proc_t *p)
{
    if (p->pgid <= 0)
        return 0;
    if (kill(-p->pgid, 0) != 0 && errno != EPERM)
        return 0;
    /* Members exist, but dead ones (zombies not yet reaped by init) do not count. */
    DIR *d = opendir("/proc");
    if (!d)
        return 1;
    int alive = 0;
    struct dirent *de;
    while (!alive && (de = readdir(d))) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        char st;
        long pg;
        if (proc_stat(de->d_name, &st, &pg) == 0 && pg == (long)p->pgid && st != 'Z' && st != 'X')
            alive = 1;
    }
    closedir(d);
    return alive;
}

int fg_proc_running(const fg_proc_t *p)
{
    return access(p->status_path, F_OK) != 0;
}

int fg_proc_reap(fg_proc_t *p, fg_exit_t *ex)
{
    memset(ex, 0, sizeof *ex);
    ex->code = -1;
    fg_proc_poll_pgid(p, 0);
    if (p->child && p->monitor > 0) {
        int st;
        while (waitpid(p->monitor, &st, 0) < 0 && errno == EINTR)
            ;
        p->child = 0;
    }
    if (p->life_fd >= 0) {
        close(p->life_fd);
        p->life_fd = -1;
    }
    if (p->cgroup[0]) {
        rmdir(p->cgroup);
        p->cgroup[0] = '\0';
    }
    FILE *f = fopen(p->status_path, "re");
    if (!f) {
        snprintf(ex->error, sizeof ex->error, "exit status lost (monitor vanished)");
        ex->end_ms = fg_now_ms();
        return -1;
    }
    char kind[16] = "";
    long long num = 0, end = 0;
    int n = fscanf(f, "%15s %lld %lld", kind, &num, &end);
    fclose(f);
    ex->end_ms = n == 3 ? end : fg_now_ms();
    if (n >= 2 && !strcmp(kind, "exit")) {
        ex->code = (int)num;
    } else if (n >= 2 && !strcmp(kind, "signal")) {
        ex->signal = (int)num;
    } else {
        snprintf(ex->error, sizeof ex->error, "could not start the job: %s",
                 n >= 2 ? strerror((int)num) : "unknown error");
    }
    return 0;
}

int fg_write_preempt_notice(const char *dir, const char *why)
{
    char path[600], tmp[610], body[128];
    snprintf(path, sizeof path, "%s/FAIRGPU_PREEMPT", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int n = snprintf(body, sizeof body, "%s %lld\n", why, (long long)(fg_now_ms() / 1000));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    ssize_t w = write(fd, body, (size_t)n);
    close(fd);
    if (w != n || rename(tmp, path) != 0)
        return -1;
    return 0;
}
