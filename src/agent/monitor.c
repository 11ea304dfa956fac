/*
 * monitor.c - the zygote and the monitor (see monitor.h and launcher.h for the shape).
 * Async-signal-safe code only after each fork; nothing here logs or uses the agent's
 * helpers (only the header-only clock reads of common/clock.h), so the file also builds
 * the static `fairgpu-monitor` helper.
 */
#define _GNU_SOURCE /* pipe2, clone */
#include "agent/monitor.h"

#include "common/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

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

void fg_mon_close_from(int first)
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

/* execve returning the error number itself: monitors may share the zygote's memory and
 * with it errno (see spawn_monitor), so the 126/127 exit code must not depend on it. */
static int exec_raw(const char *path, char *const argv[], char *const envp[])
{
#if defined(__x86_64__)
    long r;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "0"((long)SYS_execve), "D"(path), "S"(argv), "d"(envp)
                     : "rcx", "r11", "memory");
    return (int)-r;
#else
    execve(path, argv, envp);
    return errno;
#endif
}

/* Switches the job's process to pp's account: every uid and gid (real, effective,
 * saved) and the groups, then checks the result: neither root nor the monitor's (the
 * agent's) uid. 0, or an errno value (EPERM when the ids came out wrong). */
static int switch_user(const fg_mon_prep_t *pp)
{
    uid_t agent_uid = getuid(), agent_euid = geteuid();
    if (setgroups((size_t)pp->ngroups, pp->groups) != 0 ||
        setresgid(pp->gid, pp->gid, pp->gid) != 0 || setresuid(pp->uid, pp->uid, pp->uid) != 0)
        return errno ? errno : EPERM;
    uid_t r, e, sv;
    gid_t gr, ge, gs;
    if (getresuid(&r, &e, &sv) != 0 || getresgid(&gr, &ge, &gs) != 0)
        return EPERM;
    if (r != pp->uid || e != pp->uid || sv != pp->uid || gr != pp->gid || ge != pp->gid ||
        gs != pp->gid || r == 0 || e == 0 || r == agent_uid || r == agent_euid || e == agent_uid ||
        e == agent_euid)
        return EPERM;
    return 0;
}

/* The job's command: the grandchild of the agent (or, isolated, the child of the
 * namespace's init), run in a vfork child (so: system calls on its own descriptors and
 * attributes only; the one write to the parent's memory is *setup_err, which the parent
 * reads after vfork returned, as posix_spawn does). own_group: it leads a new process
 * group and joins the cgroups itself (not isolated). Never returns. */
static void job_exec(const fg_mon_prep_t *pp, int pipe_w, int own_group, volatile int *setup_err)
{
    if (own_group) {
        setpgid(0, 0); /* its own process group (the monitor does the same: no race) */
        /* "0" moves the writing process into the cgroup. */
        for (int i = 0; i < pp->ncg; i++)
            if (write(FG_MON_CG + i, "0", 1) != 1)
                s_puts(pipe_w, "fairgpu: warning: could not join the job's cgroup\n");
    }
    dup2(FG_MON_NULL, 0);
    dup2(pipe_w, 1);
    dup2(pipe_w, 2);
    fg_mon_close_from(3);
    if (pp->switch_user) {
        /* Fail closed: a job whose identity cannot be set never runs (as root or the
         * agent's user); the monitor records "setup ERRNO" for the agent. */
        int e = switch_user(pp);
        if (e) {
            s_puts(2, "fairgpu: could not switch to user ");
            s_puts(2, pp->unix_user);
            s_puts(2, " (");
            s_puts(2, s_errname(e));
            s_puts(2, "); the job does not run\n");
            *setup_err = e;
            _exit(126);
        }
    }
    /* No setuid or file-capability program gives the job more rights than it has. */
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    if (chdir(pp->job_dir) != 0) {
        s_puts(2, "fairgpu: warning: cannot enter the job directory; running in /\n");
        if (chdir("/") != 0)
            _exit(126);
    }
    int e = exec_raw(pp->exec_path, pp->argv, pp->envp);
    if (pp->shell && pp->shell[0]) {
        /* A command string run directly (its words as argv) that could not be executed:
         * sh runs it after all (builtins such as `exit 3` or `cd`, sh's own message and
         * status for a missing program). */
        char *sh_argv[] = {"/bin/sh", "-c", (char *)pp->shell, NULL};
        e = exec_raw("/bin/sh", sh_argv, pp->envp);
        s_puts(2, "fairgpu: cannot execute /bin/sh: ");
        s_puts(2, s_errname(e));
        s_puts(2, "\n");
        _exit(e == ENOENT ? 127 : 126);
    }
    s_puts(2, "fairgpu: cannot execute ");
    s_puts(2, pp->argv[0]);
    s_puts(2, ": ");
    s_puts(2, s_errname(e));
    s_puts(2, "\n");
    _exit(e == ENOENT ? 127 : 126);
}

/* ------------------------------------------------------- the isolated job's init */

/* What the namespace's init tells the monitor: that the command runs (NS_RUNS, its pid
 * in the namespace), then when it ends its wait status (NS_ENDED); or instead why the
 * job could not be isolated (NS_FAILED, an errno) or its user switch failed (NS_SETUP,
 * an errno: the command never ran). One write each. */
enum { NS_ENDED = 0, NS_FAILED = 1, NS_RUNS = 2, NS_SETUP = 3 };
typedef struct ns_rec {
    int32_t kind, value;
} ns_rec_t;

/* Creates the directories of path (absolute) that do not exist, mode 0755. 0 or -1. */
static int s_mkdirs(const char *path)
{
    char buf[1024];
    size_t n = s_len(path);
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return -1;
        buf[i] = c;
    }
    return 0;
}

/* "/proc/self/fd/N" for descriptor fd into buf (>= 40 bytes). */
static const char *s_fd_path(char *buf, int fd)
{
    char num[24];
    const char *pre = "/proc/self/fd/";
    size_t n = s_len(pre);
    memcpy(buf, pre, n);
    s_fmt_i64(num, fd);
    memcpy(buf + n, num, s_len(num) + 1);
    return buf;
}

/* 1 if path lies under /tmp (or is it). */
static int under_tmp(const char *path)
{
    return path && !strncmp(path, "/tmp", 4) && (path[4] == '/' || path[4] == '\0');
}

/* Mounts what was the directory fd (opened before /tmp was replaced) at path again. */
static int rebind(const char *path, int fd)
{
    char src[48];
    if (fd < 0 || s_mkdirs(path) != 0)
        return -1;
    return mount(s_fd_path(src, fd), path, NULL, MS_BIND | MS_REC, NULL);
}

/* Parses one unsigned decimal at *p; advances past it and one blank. */
static unsigned s_uint(const char **p)
{
    unsigned v = 0;
    while (**p >= '0' && **p <= '9')
        v = v * 10 + (unsigned)(*(*p)++ - '0');
    if (**p == ' ')
        (*p)++;
    return v;
}

/* Fills the private /dev (a fresh tmpfs): the devices of pp->devs, a new devpts
 * instance, its own /dev/shm, the usual symbolic links. 0 or -1 (*what says where). */
static int fill_dev(const fg_mon_prep_t *pp, const char **what)
{
    const char *p = pp->devs ? pp->devs : "";
    while (*p) {
        unsigned maj = s_uint(&p), min = s_uint(&p);
        char path[80] = "/dev/";
        size_t n = 5;
        while (*p && *p != '\n' && n + 1 < sizeof path)
            path[n++] = *p++;
        path[n] = '\0';
        while (*p && *p != '\n')
            p++;
        if (*p == '\n')
            p++;
        *what = "mknod in /dev";
        if (mknod(path, S_IFCHR | 0666, makedev(maj, min)) != 0 && errno != EEXIST)
            return -1;
    }
    *what = "mount /dev/pts";
    if (mkdir("/dev/pts", 0755) != 0 || mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                                              "newinstance,ptmxmode=0666,mode=0620") != 0)
        return -1;
    *what = "mount /dev/shm";
    if (mkdir("/dev/shm", 01777) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
        return -1;
    static const char *const links[][2] = {{"/proc/self/fd", "/dev/fd"},
                                           {"/proc/self/fd/0", "/dev/stdin"},
                                           {"/proc/self/fd/1", "/dev/stdout"},
                                           {"/proc/self/fd/2", "/dev/stderr"}};
    *what = "symlink in /dev";
    for (size_t k = 0; k < sizeof links / sizeof links[0]; k++)
        if (symlink(links[k][0], links[k][1]) != 0 && errno != EEXIST)
            return -1;
    return 0;
}

/* The job's mount namespace: private propagation, a private /tmp (the job's own
 * directories under /tmp mounted back in place), a private /dev and a /proc of its PID
 * namespace. 0 or -1 with errno set and *what naming the step. */
static int ns_mounts(const fg_mon_prep_t *pp, const char **what)
{
    *what = "make / private";
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        return -1;
    int jfd = under_tmp(pp->job_dir) ? open(pp->job_dir, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
    int cfd = under_tmp(pp->ckpt_dir) ? open(pp->ckpt_dir, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
    *what = "mount /tmp";
    if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
        return -1;
    *what = "keep the job's directories under /tmp";
    if ((jfd >= 0 && rebind(pp->job_dir, jfd) != 0) || (cfd >= 0 && rebind(pp->ckpt_dir, cfd) != 0))
        return -1;
    if (jfd >= 0)
        close(jfd);
    if (cfd >= 0)
        close(cfd);
    *what = "mount /dev";
    if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755") != 0)
        return -1;
    mode_t um = umask(0);
    int rc = fill_dev(pp, what);
    umask(um);
    if (rc != 0)
        return -1;
    *what = "mount /proc";
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
        return -1;
    return 0;
}

/*
 * The isolated job's first process: pid 1 of the job's PID namespace, in its own mount
 * namespace, the leader of the job's process group. It joins the cgroups, sets up the
 * mounts, vforks the command (in its group: the agent's group signals reach the command
 * and its children, not this init, which the kernel shields from signals it has no
 * handler for except SIGKILL), reaps whatever is orphaned in the namespace, and when the
 * command ends sends its wait status on st_w and exits: the kernel then kills every
 * other process of the namespace. Never returns.
 */
static void ns_init(const fg_mon_prep_t *pp, int out_w, int st_w)
{
    ns_rec_t rec = {NS_FAILED, 0};
    const char *what = "join the job's cgroup";
    setpgid(0, 0);
    close(FG_MON_LIFE);
    close(FG_MON_LOG);
    for (int i = 0; i < pp->ncg; i++)
        if (write(FG_MON_CG + i, "0", 1) != 1)
            goto fail;
    for (int i = 0; i < pp->ncg; i++) /* (unused numbers may hold out_w and st_w) */
        close(FG_MON_CG + i);
    if (ns_mounts(pp, &what) != 0)
        goto fail;
    volatile int setup_err = 0; /* set by the command's process when its user switch failed */
    pid_t cmd = vfork();
    if (cmd == 0)
        job_exec(pp, out_w, 0, &setup_err);
    what = "start the command";
    if (cmd < 0)
        goto fail;
    if (setup_err) { /* it never ran: the monitor records "setup ERRNO" */
        rec.kind = NS_SETUP;
        rec.value = setup_err;
        s_write_all(st_w, (const char *)&rec, sizeof rec);
        _exit(126);
    }
    /* The command runs (vfork returns after its exec): now the monitor tells the agent
     * the group, so no stop signal can come while only this init is there to ignore it. */
    rec.kind = NS_RUNS;
    rec.value = cmd;
    s_write_all(st_w, (const char *)&rec, sizeof rec);
    close(out_w);
    close(FG_MON_NULL);
    for (;;) {
        int st;
        pid_t r = waitpid(-1, &st, 0);
        if (r == cmd) {
            rec.kind = NS_ENDED;
            rec.value = st;
            s_write_all(st_w, (const char *)&rec, sizeof rec);
            _exit(0);
        }
        if (r < 0 && errno != EINTR)
            _exit(1);
    }
fail:
    rec.value = errno;
    s_puts(out_w, "fairgpu: cannot isolate the job: ");
    s_puts(out_w, what);
    s_puts(out_w, ": ");
    s_puts(out_w, s_errname(rec.value));
    s_puts(out_w, "\n");
    s_write_all(st_w, (const char *)&rec, sizeof rec);
    _exit(126);
}

/* Starts the isolated job: a fork (no shared memory: it outlives its setup) whose child
 * is pid 1 of new PID and mount namespaces. The child never returns; the parent gets
 * its pid (in our namespace) or -1. */
static pid_t start_ns_init(const fg_mon_prep_t *pp, int out_r, int out_w, int st_r, int st_w)
{
    /* Raw clone: like fork (the child runs on a copy of this stack), without the C
     * library's fork handlers, which must not run in memory shared with the zygote. */
    long r = syscall(SYS_clone, (unsigned long)(CLONE_NEWPID | CLONE_NEWNS | SIGCHLD), 0UL, NULL,
                     NULL, 0UL);
    if (r == 0) {
        close(out_r);
        close(st_r);
        ns_init(pp, out_w, st_w);
    }
    return (pid_t)r;
}

/* Records "kind num end_ms\n": as the extended attribute FG_MON_EXIT_XATTR of the log
 * (set on the open descriptor: no file to create and delete per rank, which on ext4 cost
 * about as much as the rest of the monitor), or, where the log's file system has no
 * user attributes, in the status file. The file is not atomic (no tmp + rename); a
 * reader that finds it incomplete treats the status as lost, and the agent reads it only
 * after the monitor exited. */
static void monitor_status(const fg_mon_prep_t *pp, const char *kind, int64_t num)
{
    char a[24], b[24], line[80];
    size_t n = 0;
    const char *parts[] = {kind, " ", s_fmt_i64(a, num), " ", s_fmt_i64(b, fg_clock_real_ms()),
                           "\n"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        size_t l = s_len(parts[i]);
        if (n + l >= sizeof line)
            break;
        memcpy(line + n, parts[i], l);
        n += l;
    }
    if (fsetxattr(FG_MON_LOG, FG_MON_EXIT_XATTR, line, n, 0) == 0)
        return; /* no fsync either way: after a machine crash the job is gone anyway */
    int fd = open(pp->status_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return;
    s_write_all(fd, line, n); /* one write */
    close(fd);                /* no fsync: after a machine crash the job is gone anyway */
}

/* Copies one read of the job's output into the log, honouring the limit. */
static void monitor_copy(const fg_mon_prep_t *pp, const char *buf, size_t n, int64_t *written,
                         int *truncated)
{
    if (*truncated)
        return;
    if (*written + (int64_t)n <= pp->log_limit) {
        s_write_all(FG_MON_LOG, buf, n);
        *written += (int64_t)n;
        return;
    }
    size_t fit = (size_t)(pp->log_limit - *written);
    s_write_all(FG_MON_LOG, buf, fit);
    *written += (int64_t)fit;
    s_puts(FG_MON_LOG, pp->marker);
    *truncated = 1;
}

/* The monitor: the agent's child. Never returns. */
void fg_mon_monitor_main(const fg_mon_prep_t *pp)
{
    char buf[65536]; /* on the monitor's own stack: monitors may share memory */
    setsid();
    /* Orphans of the job are re-parented to us (not init), so we can reap them all. */
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    /* Descriptors to fixed numbers, everything else closed. */
    enum { NF = 3 + FG_MON_CG_MAX };
    int fds[NF] = {pp->life_w, pp->log_fd, pp->null_fd};
    for (int i = 0; i < FG_MON_CG_MAX; i++)
        fds[3 + i] = i < pp->ncg ? pp->cg_fds[i] : -1;
    int high[NF];
    for (int i = 0; i < NF; i++)
        high[i] = fds[i] >= 0 ? fcntl(fds[i], F_DUPFD, 256) : -1;
    for (int i = 0; i < NF; i++) {
        if (high[i] >= 0) {
            dup2(high[i], FG_MON_LIFE + i);
        } else {
            close(FG_MON_LIFE + i);
        }
    }
    fg_mon_close_from(FG_MON_FIRST_FREE);
    /* A clean signal state for the job (the agent may ignore or block some). */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int sig = 1; sig < 32; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            signal(sig, SIG_DFL);

    /* The life record: this monitor's pid and the job's (0: none), one 8-byte write. */
    fg_mon_life_t rec = {(int32_t)getpid(), 0};
    int pfd[2];
    if (pipe(pfd) != 0) {
        s_write_all(FG_MON_LIFE, (const char *)&rec, sizeof rec);
        monitor_status(pp, "error", errno);
        _exit(1);
    }
    /* Isolated: the job's init in new namespaces (st: its report at the end). Else
     * vfork: the job borrows the monitor's memory until its execve (no copy of the page
     * tables, which a trivial job pays for twice with fork: at the copy and at exec).
     * job_exec only makes system calls on its own descriptors and process attributes and
     * never returns; the monitor is single-threaded, so nothing else runs meanwhile. */
    volatile int setup_err = 0; /* set by the job's process when its user switch failed */
    int st[2] = {-1, -1};
    pid_t job;
    if (pp->isolate) {
        job = pipe(st) == 0 ? start_ns_init(pp, pfd[0], pfd[1], st[0], st[1]) : -1;
    } else {
        job = vfork();
        if (job == 0) {
            close(pfd[0]);
            job_exec(pp, pfd[1], 1, &setup_err);
        }
    }
    int job_errno = errno;
    close(pfd[1]);
    if (st[1] >= 0)
        close(st[1]);
    /* Isolated: the agent learns the job's group once its command runs (see ns_init). */
    ns_rec_t first = {NS_RUNS, 0};
    if (job > 0 && st[0] >= 0) {
        ssize_t r;
        while ((r = read(st[0], &first, sizeof first)) < 0 && errno == EINTR)
            ;
        if (r != (ssize_t)sizeof first)
            first.kind = NS_RUNS; /* the init died: its status says how */
    }
    if (job < 0) {
        s_write_all(FG_MON_LIFE, (const char *)&rec, sizeof rec);
        monitor_status(pp, "error", job_errno);
        _exit(1);
    }
    /* Both sides set the group, so it exists before the agent learns the pgid. */
    setpgid(job, job);
    rec.job = (int32_t)job;
    s_write_all(FG_MON_LIFE, (const char *)&rec, sizeof rec);
    signal(SIGPIPE, SIG_IGN);

    int64_t written = 0;
    int truncated = 0;
    int main_done = 0, status = 0;
    int64_t drain_until = 0, next_check = fg_clock_mono_ms() + 200;
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
        int64_t now = fg_clock_mono_ms();
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
    int64_t reap_until = fg_clock_mono_ms() + 2000;
    for (;;) {
        pid_t r = waitpid(-1, NULL, WNOHANG);
        if (r > 0)
            continue;
        if ((r < 0 && errno == ECHILD) || fg_clock_mono_ms() > reap_until)
            break;
        kill(-job, SIGKILL);
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    if (st[0] >= 0) {
        /* The init's report: the command's status, or why isolation or the user switch
         * failed. None: the init itself was killed (SIGKILL), which is then the job's
         * end. */
        ns_rec_t nr = first;
        if (first.kind == NS_FAILED || first.kind == NS_SETUP ||
            (WIFEXITED(status) && read(st[0], &nr, sizeof nr) == (ssize_t)sizeof nr)) {
            if (nr.kind != NS_ENDED) {
                monitor_status(pp, nr.kind == NS_SETUP ? "setup" : "error", nr.value);
                _exit(0);
            }
            status = nr.value;
        }
        close(st[0]);
    }
    if (setup_err)
        monitor_status(pp, "setup", setup_err);
    else if (WIFSIGNALED(status))
        monitor_status(pp, "signal", WTERMSIG(status));
    else
        monitor_status(pp, "exit", WEXITSTATUS(status));
    _exit(0);
}

int fg_mon_read_full(int fd, void *buf, size_t n)
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

int fg_mon_write_full(int fd, const void *buf, size_t n)
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

/* Sends n bytes with up to FG_MON_MAXFDS descriptors attached. */
int fg_mon_send_fds(int sock, const void *buf, size_t n, const int *fds, int nfds)
{
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = n};
    union {
        char buf[CMSG_SPACE(FG_MON_MAXFDS * sizeof(int))];
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
        return fg_mon_write_full(sock, (const char *)buf + w, n - (size_t)w);
    return 0;
}

/* Receives exactly n bytes; descriptors that came with them go to fds (-1 if none). */
int fg_mon_recv_fds(int sock, void *buf, size_t n, int *fds, int maxfds)
{
    for (int i = 0; i < maxfds; i++)
        fds[i] = -1;
    struct iovec iov = {.iov_base = buf, .iov_len = n};
    union {
        char buf[CMSG_SPACE(FG_MON_MAXFDS * sizeof(int))];
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
        return fg_mon_read_full(sock, (char *)buf + r, n - (size_t)r);
    return 0;
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

/*
 * Monitors as processes that share the zygote's memory (clone with CLONE_VM, each on its
 * own stack): no page tables to copy at the start and none to tear down at the end (on
 * the test machine a fork + exit of even this small static process cost ~1.4 ms of
 * CPU, a CLONE_VM clone ~0.15 ms). It is safe because a monitor touches only its own
 * block (its launch, copied there, and its stack) and makes system calls; it never
 * allocates and never returns (it _exits); the zygote frees a block only after reaping
 * its monitor. errno is shared, so nothing that matters reads it after a call that
 * other monitors may fail concurrently (the job's exec reports its own error number).
 * The monitors outlive the zygote as before: the memory lives while one of them does.
 * Sanitizer builds keep fork (the sanitizers do not follow foreign stacks).
 */
#if defined(__SANITIZE_ADDRESS__)
#define FG_MON_SHARED_VM 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FG_MON_SHARED_VM 0
#endif
#endif
#ifndef FG_MON_SHARED_VM
#define FG_MON_SHARED_VM 1
#endif

#if FG_MON_SHARED_VM
#define MON_STACK (256 * 1024)
#define MON_GUARD 4096
#define MON_DATA  (64 * 1024) /* launches up to this size use a standard, reusable block */
#define MON_STD   (MON_GUARD + MON_STACK + MON_DATA)
#define MON_FREE  64 /* standard blocks kept for reuse (no munmap, no new page faults) */

typedef struct mon_block {
    pid_t pid;
    int sock; /* the zygote's socket, closed first thing in the monitor */
    size_t size;
    fg_mon_prep_t pp;
} mon_block_t;

static mon_block_t **g_blocks; /* live monitors' blocks (zygote only) */
static size_t g_nblocks, g_capblocks;
static char *g_free[MON_FREE]; /* bases of standard blocks whose monitor was reaped */
static int g_nfree;

/* Frees the block of reaped monitor pid, if it has one: a standard one is kept for the
 * next monitor (an unmap of memory shared by processes on several CPUs costs a TLB
 * shootdown, and a fresh block's stack costs page faults again). */
static void release_block(pid_t pid)
{
    for (size_t i = 0; i < g_nblocks; i++) {
        if (g_blocks[i]->pid == pid) {
            mon_block_t *b = g_blocks[i];
            g_blocks[i] = g_blocks[--g_nblocks];
            char *base = (char *)b - MON_GUARD - MON_STACK;
            if (b->size == MON_STD && g_nfree < MON_FREE)
                g_free[g_nfree++] = base;
            else
                munmap(base, b->size);
            return;
        }
    }
}

static int monitor_entry(void *arg)
{
    mon_block_t *b = arg;
    close(b->sock);
    fg_mon_monitor_main(&b->pp);
    return 0; /* not reached */
}

/* Starts the monitor of pp (whose strings lie in strs[0..len)) sharing our memory:
 * [guard page][stack][block: pp, argv and envp arrays, the strings]. pid or -1. */
static pid_t spawn_monitor(const fg_mon_prep_t *pp, int sock, const char *strs, size_t len,
                           int argc, int envc)
{
    size_t data = sizeof(mon_block_t) + ((size_t)argc + (size_t)envc + 2) * sizeof(char *) + len;
    size_t size =
        data <= MON_DATA ? MON_STD : (MON_GUARD + MON_STACK + data + 4095) & ~(size_t)4095;
    char *base;
    if (size == MON_STD && g_nfree > 0) {
        base = g_free[--g_nfree];
    } else {
        base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1,
                    0);
        if (base == MAP_FAILED)
            return -1;
        mprotect(base, MON_GUARD, PROT_NONE);
    }
    mon_block_t *b = (mon_block_t *)(base + MON_GUARD + MON_STACK);
    char **argv = (char **)(b + 1);
    char **envp = argv + argc + 1;
    char *s = (char *)(envp + envc + 1);
    memcpy(s, strs, len);
#define REBASE(ptr) ((ptr) ? s + ((const char *)(ptr)-strs) : NULL)
    b->size = size;
    b->sock = sock;
    b->pp = *pp;
    b->pp.exec_path = REBASE(pp->exec_path);
    b->pp.job_dir = REBASE(pp->job_dir);
    b->pp.status_path = REBASE(pp->status_path);
    b->pp.unix_user = REBASE(pp->unix_user);
    b->pp.shell = REBASE(pp->shell);
    b->pp.devs = REBASE(pp->devs);
    b->pp.ckpt_dir = REBASE(pp->ckpt_dir);
    for (int i = 0; i < argc; i++)
        argv[i] = REBASE(pp->argv[i]);
    argv[argc] = NULL;
    for (int i = 0; i < envc; i++)
        envp[i] = REBASE(pp->envp[i]);
    envp[envc] = NULL;
#undef REBASE
    b->pp.argv = argv;
    b->pp.envp = envp;
    if (g_nblocks == g_capblocks) {
        size_t cap = g_capblocks ? g_capblocks * 2 : 64;
        mon_block_t **nb = realloc(g_blocks, cap * sizeof *nb);
        if (!nb) {
            munmap(base, size);
            errno = ENOMEM;
            return -1;
        }
        g_blocks = nb;
        g_capblocks = cap;
    }
    /* the stack grows down from the block, 16-byte aligned */
    char *top = (char *)((uintptr_t)b & ~(uintptr_t)15);
    b->pid = clone(monitor_entry, top, CLONE_VM | SIGCHLD, b);
    if (b->pid < 0) {
        int e = errno;
        munmap(base, size);
        errno = e;
        return -1;
    }
    g_blocks[g_nblocks++] = b;
    return b->pid;
}

#else
/* Monitors are forked: nothing to free. */
static void release_block(pid_t pid)
{
    (void)pid;
}
#endif

/* The zygote's loop. Never returns. */
void fg_mon_zygote_main(int sock)
{
    signal(SIGCHLD, SIG_DFL);
    signal(SIGPIPE, SIG_IGN);
    for (;;) {
        pid_t done;
        while ((done = waitpid(-1, NULL, WNOHANG)) > 0) /* reap finished monitors */
            release_block(done);
        struct pollfd pf = {.fd = sock, .events = POLLIN};
        if (poll(&pf, 1, 1000) == 0)
            continue;
        fg_mon_req_t rq;
        int fds[FG_MON_MAXFDS]; /* log, /dev/null, the life pipe's write end, cgroups */
        if (fg_mon_recv_fds(sock, &rq, sizeof rq, fds, FG_MON_MAXFDS) != 0)
            _exit(0); /* the agent is gone */
        char *strs = malloc(rq.len + 1);
        if (!strs || rq.len > (64u << 20) || fg_mon_read_full(sock, strs, rq.len) != 0)
            _exit(1);
        const char *p = strs, *end = strs + rq.len;
        fg_mon_prep_t pp;
        memset(&pp, 0, sizeof pp);
        pp.exec_path = buf_take(&p, end);
        pp.job_dir = buf_take(&p, end);
        pp.status_path = buf_take(&p, end);
        pp.unix_user = buf_take(&p, end);
        const char *marker = buf_take(&p, end);
        pp.shell = buf_take(&p, end);
        pp.devs = buf_take(&p, end);
        pp.ckpt_dir = buf_take(&p, end);
        char **argv = calloc((size_t)rq.argc + 1, sizeof *argv);
        char **envp = calloc((size_t)rq.envc + 1, sizeof *envp);
        int okp = pp.exec_path && pp.job_dir && pp.status_path && pp.unix_user && marker &&
                  pp.shell && pp.devs && pp.ckpt_dir && argv && envp && rq.argc > 0 &&
                  rq.ngroups >= 0 && rq.ngroups <= 64 && rq.ncg >= 0 && rq.ncg <= FG_MON_CG_MAX;
        for (int i = 0; okp && i < rq.argc; i++)
            okp = (argv[i] = (char *)buf_take(&p, end)) != NULL;
        for (int i = 0; okp && i < rq.envc; i++)
            okp = (envp[i] = (char *)buf_take(&p, end)) != NULL;
        /* No reply: the agent made the life pipe and reads the monitor's record (its pid
         * and the job's) from it. If no monitor starts, the record says why. */
        int err = 0;
        for (int i = 0; okp && i < rq.ncg; i++)
            okp = fds[3 + i] >= 0;
        if (!okp || fds[0] < 0 || fds[1] < 0 || fds[2] < 0) {
            err = EINVAL;
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
            pp.life_w = fds[2];
            pp.ncg = rq.ncg;
            for (int i = 0; i < rq.ncg; i++)
                pp.cg_fds[i] = fds[3 + i];
            pp.isolate = rq.isolate;
#if FG_MON_SHARED_VM
            pid_t mon = spawn_monitor(&pp, sock, strs, rq.len, rq.argc, rq.envc);
#else
            pid_t mon = fork();
            if (mon == 0) {
                close(sock);
                fg_mon_monitor_main(&pp);
            }
#endif
            if (mon < 0)
                err = errno ? errno : EAGAIN;
        }
        if (err && fds[2] >= 0) {
            fg_mon_life_t rec = {0, -err};
            fg_mon_write_full(fds[2], &rec, sizeof rec);
        }
        for (int i = 0; i < FG_MON_MAXFDS; i++)
            if (fds[i] >= 0)
                close(fds[i]);
        free(argv);
        free(envp);
        free(strs);
    }
}