/*
 * launcher.c - the agent's side of monitor + job process trees (see launcher.h for the
 * shape; the monitor and the zygote themselves are in monitor.c).
 *
 * Everything that allocates or may take a lock (environment, PATH lookup, user lookup,
 * cgroup setup, messages) happens in the agent before fork; the monitor and the job's
 * pre-exec code use only async-signal-safe calls (the agent is multi-threaded, and after
 * fork only the forking thread exists, possibly with other threads' locks held).
 */
#define _GNU_SOURCE /* pipe2 */
#include "agent/launcher.h"
#include "agent/account.h"
#include "agent/cgroup.h"
#include "agent/isolate.h"
#include "agent/monitor.h"
#include "agent/safefs.h"
#include "common/clock.h"
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
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static pthread_mutex_t g_fork_mu = PTHREAD_MUTEX_INITIALIZER;

int64_t fg_now_ms(void)
{
    return fg_clock_real_ms();
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
    /* Usually only the last component is missing (or none): one call, no walk. */
    if (mkdir(dir, mode) == 0 || errno == EEXIST)
        return 0;
    if (errno != ENOENT)
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

/* ------------------------------------------------------------ recycled files */

/*
 * A rank's log and state file are not deleted when it is done but emptied and moved to
 * SPARE_DIR/KIND.PID.N, and a later rank's file of the same kind is such a file moved
 * back (rename). On ext4 without a journal (the development VM's file system) every new
 * inode first skips each inode of its group freed in the last half minute or so
 * (`recently_deleted`), so with files created and deleted per rank a busy agent spent
 * half of its CPU in inode allocation; a rename allocates and frees nothing. The pool is
 * per process and bounded.
 */
#define POOL_MAX 256
static pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static char *g_pool[POOL_MAX]; /* SPARE_DIR/KIND.PID.N */
static int g_npool;
static unsigned long g_pool_seq;

/* Adds spare (a SPARE_DIR/KIND.* file) to the pool; deletes it when the pool is full. */
static void pool_push(const char *spare)
{
    pthread_mutex_lock(&g_pool_mu);
    if (g_npool < POOL_MAX) {
        g_pool[g_npool++] = fg_xstrdup(spare);
        spare = NULL;
    }
    pthread_mutex_unlock(&g_pool_mu);
    if (spare)
        unlink(spare);
}

void fg_file_recycle(const char *path, const char *spare_dir, const char *kind)
{
    char spare[800];
    pthread_mutex_lock(&g_pool_mu);
    int full = g_npool >= POOL_MAX;
    unsigned long seq = g_pool_seq++;
    pthread_mutex_unlock(&g_pool_mu);
    if (full || !spare_dir ||
        (size_t)snprintf(spare, sizeof spare, "%s/%s.%ld.%lu", spare_dir, kind, (long)getpid(),
                         seq) >= sizeof spare) {
        unlink(path);
        return;
    }
    /* Emptied through a descriptor: ext4 flushes a file truncated to 0 at its next close
     * (auto_da_alloc), which is this one, with nothing left to write. */
    int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno != ENOENT)
            unlink(path);
        return;
    }
    close(fd);
    if (rename(path, spare) != 0) {
        unlink(path);
        return;
    }
    pool_push(spare);
}

int fg_file_reuse(const char *path, const char *spare_dir, const char *kind)
{
    if (!spare_dir)
        return -1;
    char prefix[800];
    size_t pl = (size_t)snprintf(prefix, sizeof prefix, "%s/%s.", spare_dir, kind);
    if (pl >= sizeof prefix)
        return -1;
    for (;;) {
        char *got = NULL;
        pthread_mutex_lock(&g_pool_mu);
        for (int i = g_npool - 1; i >= 0; i--) {
            if (!strncmp(g_pool[i], prefix, pl)) {
                got = g_pool[i];
                g_pool[i] = g_pool[--g_npool];
                break;
            }
        }
        pthread_mutex_unlock(&g_pool_mu);
        if (!got)
            return -1;
        int r = rename(got, path);
        if (r != 0)
            unlink(got);
        free(got);
        if (r == 0)
            return 0;
    }
}

void fg_file_pool_scan(const char *spare_dir)
{
    DIR *d = opendir(spare_dir);
    if (!d)
        return;
    struct dirent *de;
    char path[1200];
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", spare_dir, de->d_name);
        pool_push(path);
    }
    closedir(d);
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

static void buf_add(char **b, size_t *n, size_t *cap, const char *s)
{
    size_t l = strlen(s) + 1;
    *b = fg_xgrow(*b, cap, *n + l, 1);
    memcpy(*b + *n, s, l);
    *n += l;
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
    /* The helper: "fairgpu-monitor" in the directory of our own executable. */
    char helper[1100] = "";
    char self[1024];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl > 0) {
        self[sl] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            snprintf(helper, sizeof helper, "%s/fairgpu-monitor", self);
            if (access(helper, X_OK) != 0)
                helper[0] = '\0';
        }
    }
    char *hargv[] = {"fairgpu-monitor", "zygote", NULL};
    pid_t pid = fork();
    if (pid == 0) {
        /* Single-threaded from here on. Own session: terminal signals are the agent's. */
        setsid();
        if (sv[1] != 3) {
            dup2(sv[1], 3);
            close(sv[1]);
        }
        fg_mon_close_from(4);
        int fd0 = open("/dev/null", O_RDWR);
        if (fd0 >= 0 && fd0 != 0) {
            dup2(fd0, 0);
            close(fd0);
        }
        if (helper[0])
            execve(helper, hargv, environ); /* returns only on failure: run it here */
        fg_mon_zygote_main(3);
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
    fg_log(FG_LOG_DEBUG, "launcher: zygote %d (%s)", (int)pid,
           helper[0] ? helper : "in-process: no fairgpu-monitor next to the binary");
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

/* Hands the launch pp to the zygote without waiting for it: the agent makes the life
 * pipe and sends its write end along; the monitor's pids arrive on the read end
 * (fg_proc_poll_pgid). 0 with p filled, or -1 (use fork). */
static int zygote_launch(const fg_mon_prep_t *pp, fg_proc_t *p)
{
    if (g_zy_fd < 0 && fg_launcher_init() != 0)
        return -1;
    int life[2];
    if (pipe2(life, O_CLOEXEC) != 0)
        return -1;
    fg_mon_req_t rq;
    memset(&rq, 0, sizeof rq);
    char *b = NULL;
    size_t n = 0, cap = 0;
    buf_add(&b, &n, &cap, pp->exec_path);
    buf_add(&b, &n, &cap, pp->job_dir);
    buf_add(&b, &n, &cap, pp->status_path);
    buf_add(&b, &n, &cap, pp->unix_user ? pp->unix_user : "");
    buf_add(&b, &n, &cap, pp->marker);
    buf_add(&b, &n, &cap, pp->shell ? pp->shell : "");
    buf_add(&b, &n, &cap, pp->devs ? pp->devs : "");
    buf_add(&b, &n, &cap, pp->ckpt_dir ? pp->ckpt_dir : "");
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
    rq.ncg = pp->ncg;
    rq.isolate = pp->isolate;
    int fds[FG_MON_MAXFDS] = {pp->log_fd, pp->null_fd, life[1]};
    for (int i = 0; i < pp->ncg; i++)
        fds[3 + i] = pp->cg_fds[i];
    pthread_mutex_lock(&g_fork_mu);
    int ok = g_zy_fd >= 0 && fg_mon_send_fds(g_zy_fd, &rq, sizeof rq, fds, 3 + pp->ncg) == 0 &&
             fg_mon_write_full(g_zy_fd, b, n) == 0;
    if (!ok && g_zy_fd >= 0) {
        /* The zygote died: forget it (the next launch starts a new one). A request it
         * may have half read is answered by the life pipe's EOF. */
        close(g_zy_fd);
        g_zy_fd = -1;
        waitpid(g_zy_pid, NULL, WNOHANG);
        g_zy_pid = 0;
    }
    pthread_mutex_unlock(&g_fork_mu);
    free(b);
    close(life[1]);
    if (!ok) {
        close(life[0]);
        return -1;
    }
    p->monitor = 0; /* its record says */
    p->pgid = 0;
    p->pgid_known = 0;
    p->life_fd = life[0];
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

/* The last few PATH lookups, kept for RESOLVE_TTL_MS: a burst of launches of the same
 * program does not probe every PATH directory again for each job (under g_cache_mu). */
#define RESOLVE_SLOTS  8
#define RESOLVE_TTL_MS 2000
static pthread_mutex_t g_cache_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char *argv0, *path, *found;
    int64_t at_ms;
} g_resolved[RESOLVE_SLOTS];
static unsigned g_resolved_next;

/* Resolves argv0 through PATH (as execvp would); returns a malloc'd path. Successful
 * lookups are reused for RESOLVE_TTL_MS. */
static char *resolve(const char *argv0, const char *path)
{
    if (strchr(argv0, '/'))
        return fg_xstrdup(argv0);
    const char *p = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
    int64_t now = fg_now_ms();
    pthread_mutex_lock(&g_cache_mu);
    for (int i = 0; i < RESOLVE_SLOTS; i++) {
        if (g_resolved[i].argv0 && now - g_resolved[i].at_ms < RESOLVE_TTL_MS &&
            now >= g_resolved[i].at_ms && !strcmp(g_resolved[i].argv0, argv0) &&
            !strcmp(g_resolved[i].path, p)) {
            char *r = fg_xstrdup(g_resolved[i].found);
            pthread_mutex_unlock(&g_cache_mu);
            return r;
        }
    }
    pthread_mutex_unlock(&g_cache_mu);
    char *found = NULL;
    char cand[1024];
    while (*p) {
        const char *e = strchr(p, ':');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0 && len + strlen(argv0) + 2 < sizeof cand) {
            snprintf(cand, sizeof cand, "%.*s/%s", (int)len, p, argv0);
            if (access(cand, X_OK) == 0) {
                found = fg_xstrdup(cand);
                break;
            }
        }
        if (!e)
            break;
        p = e + 1;
    }
    if (!found)
        return fg_xstrdup(argv0); /* execve fails; the job's log says why */
    pthread_mutex_lock(&g_cache_mu);
    unsigned k = g_resolved_next++ % RESOLVE_SLOTS;
    free(g_resolved[k].argv0);
    free(g_resolved[k].path);
    free(g_resolved[k].found);
    g_resolved[k].argv0 = fg_xstrdup(argv0);
    g_resolved[k].path = fg_xstrdup(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
    g_resolved[k].found = fg_xstrdup(found);
    g_resolved[k].at_ms = now;
    pthread_mutex_unlock(&g_cache_mu);
    return found;
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

/*
 * A command string (`"command": "..."`, run as /bin/sh -c STRING) that means the same
 * when its words are executed directly: words of letters, digits and `_ . / , : + @ % = -`
 * separated by blanks, the first word no assignment, reserved word or sh built-in. Then
 * its words are pushed to argv (1); otherwise (0) sh runs it. If the direct exec fails,
 * the job runs /bin/sh -c STRING after all (monitor.c), so a missing program gets sh's
 * message and status 127. Spawning /bin/true through sh cost ~3.0 ms of CPU on the
 * development VM, directly ~2.5 ms. `true` and `false` without arguments are built-ins
 * whose programs do exactly the same.
 */
static int plain_words(const char *cmd, strv_t *argv)
{
    static const char *const builtins[] = {
        ".",       ":",      "alias",  "bg",       "bind",    "break",     "builtin",  "caller",
        "case",    "cd",     "chdir",  "command",  "compgen", "complete",  "compopt",  "continue",
        "declare", "dirs",   "disown", "do",       "done",    "echo",      "elif",     "else",
        "enable",  "esac",   "eval",   "exec",     "exit",    "export",    "false",    "fc",
        "fg",      "fi",     "for",    "function", "getopts", "hash",      "help",     "history",
        "if",      "in",     "jobs",   "kill",     "let",     "local",     "logout",   "mapfile",
        "popd",    "printf", "pushd",  "pwd",      "read",    "readarray", "readonly", "return",
        "select",  "set",    "shift",  "shopt",    "source",  "suspend",   "test",     "then",
        "time",    "times",  "trap",   "true",     "type",    "typeset",   "ulimit",   "umask",
        "unalias", "unset",  "until",  "wait",     "while"};
    size_t len = strlen(cmd);
    if (len == 0 || len > 4096)
        return 0;
    for (const char *c = cmd; *c; c++) {
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              strchr("_./,:+@%=- \t", *c)))
            return 0;
    }
    strv_t w = {0};
    const char *c = cmd;
    while (*c) {
        while (*c == ' ' || *c == '\t')
            c++;
        if (!*c)
            break;
        const char *e = c;
        while (*e && *e != ' ' && *e != '\t')
            e++;
        char *word = fg_xmalloc((size_t)(e - c) + 1);
        memcpy(word, c, (size_t)(e - c));
        word[e - c] = '\0';
        strv_push(&w, word);
        c = e;
    }
    int ok = w.n > 0 && !strchr(w.v[0], '=');
    for (size_t i = 0; ok && i < sizeof builtins / sizeof builtins[0]; i++)
        if (!strcmp(w.v[0], builtins[i]))
            ok = w.n == 1 && (!strcmp(w.v[0], "true") || !strcmp(w.v[0], "false"));
    if (!ok) {
        strv_free(&w);
        return 0;
    }
    for (size_t i = 0; i < w.n; i++)
        strv_push(argv, w.v[i]);
    free(w.v);
    return 1;
}

int fg_shell_is_plain(const char *cmd)
{
    strv_t w = {0};
    int r = plain_words(cmd, &w);
    strv_free(&w);
    return r;
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
    /* A fixed PATH, not the agent's: directories only root can write to. */
    strv_push(env, kv("PATH", FG_JOB_PATH));
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
    if (l->fake_util_file)
        strv_push(env, kv("FAIRGPU_FAKE_UTIL_FILE", l->fake_util_file));
    snprintf(num, sizeof num, "%d", l->rank);
    strv_push(env, kv("FAIRGPU_NODE_RANK", num));
    snprintf(num, sizeof num, "%d", l->num_nodes > 0 ? l->num_nodes : 1);
    strv_push(env, kv("FAIRGPU_NUM_NODES", num));
    strv_push(env, kv("FAIRGPU_MASTER_ADDR", l->master_addr ? l->master_addr : "127.0.0.1"));
    snprintf(num, sizeof num, "%d", l->master_port > 0 ? l->master_port : 29500);
    strv_push(env, kv("FAIRGPU_MASTER_PORT", num));
}

_Static_assert(FG_CG_MAXDIRS <= FG_MON_CG_MAX, "the monitor takes every cgroup of a job");

/* Makes the job's cgroups (l->cgroup_name, limits from l) into pp's descriptors and
 * p->cgroup. 0, or -1 with err set when the node is isolated and they cannot be made
 * (unisolated: a warning, and the job runs without limits). */
static int cg_setup(const fg_launch_t *l, const fg_dev_t *devs, int ndevs, fg_mon_prep_t *pp,
                    fg_proc_t *p, char *err, size_t errlen)
{
    const fg_iso_t *iso = l->iso;
    if (!iso || iso->cg.version == FG_CG_NONE || !l->cgroup_name)
        return 0;
    fg_cg_limits_t lim = {.cpus = l->cpus,
                          .memory_mb = l->memory_mb,
                          .pids_max = iso->pids_max,
                          .devs = devs,
                          .ndevs = ndevs};
    char msg[400];
    int n = fg_cg_create(&iso->cg, l->cgroup_name, &lim, pp->cg_fds, p->cgroup, sizeof p->cgroup,
                         msg, sizeof msg);
    if (n >= 0) {
        pp->ncg = n;
        return 0;
    }
    if (iso->required) {
        snprintf(err, errlen, "%s", msg);
        return -1;
    }
    char w[460];
    snprintf(w, sizeof w, "%s; limits not applied", msg);
    warn(p, w);
    return 0;
}

/* The job's device list as the monitor's "MAJOR MINOR NAME\n" lines (malloc'd), and
 * the list itself in devs[0..*ndevs). */
static char *dev_lines(const fg_launch_t *l, fg_dev_t *devs, int *ndevs)
{
    *ndevs = l->iso ? fg_iso_job_devs(l->iso, l->gpu_minors, l->gpu_minors ? l->ngpu_minors : 0,
                                      devs, FG_ISO_MAXDEVS)
                    : 0;
    size_t cap = (size_t)*ndevs * 72 + 1, n = 0;
    char *s = fg_xmalloc(cap);
    s[0] = '\0';
    for (int i = 0; i < *ndevs; i++)
        n += (size_t)snprintf(s + n, cap - n, "%u %u %s\n", devs[i].major, devs[i].minor,
                              devs[i].name);
    return s;
}

/* Makes dir (0700) and gives it to uid/gid when switching users, following no symbolic
 * link (safefs.c): the job dir and the checkpoint dir are writable by jobs, and a shared
 * checkpoint root may be writable by every user. 0, or -1 with err. */
static int own_dir(const char *dir, int switch_user, uid_t uid, gid_t gid, fg_proc_t *p, char *err,
                   size_t errlen)
{
    char w[700] = "";
    if (fg_sfs_own_dir(dir, switch_user, uid, gid, err, errlen, w, sizeof w) != 0)
        return -1;
    if (w[0])
        warn(p, w);
    return 0;
}

/* Unix accounts looked up recently, kept for USER_TTL_MS: a burst of jobs of the same
 * user does not parse /etc/passwd and /etc/group again for each (under g_cache_mu). */
#define USER_SLOTS  16
#define USER_TTL_MS 2000
static struct {
    char name[64];
    uid_t uid;
    gid_t gid;
    gid_t groups[64];
    int ngroups;
    int64_t at_ms;
} g_users[USER_SLOTS];
static unsigned g_users_next;

int fg_user_lookup(const char *name, uid_t *uid, gid_t *gid, gid_t *groups, int *ngroups)
{
    int64_t now = fg_now_ms();
    pthread_mutex_lock(&g_cache_mu);
    for (int i = 0; i < USER_SLOTS; i++) {
        if (g_users[i].name[0] && !strcmp(g_users[i].name, name) &&
            now - g_users[i].at_ms < USER_TTL_MS && now >= g_users[i].at_ms) {
            *uid = g_users[i].uid;
            *gid = g_users[i].gid;
            if (groups && ngroups) {
                int n = g_users[i].ngroups < *ngroups ? g_users[i].ngroups : *ngroups;
                memcpy(groups, g_users[i].groups, (size_t)n * sizeof *groups);
                *ngroups = n;
            }
            pthread_mutex_unlock(&g_cache_mu);
            return 0;
        }
    }
    pthread_mutex_unlock(&g_cache_mu);
    char pwbuf[4096];
    struct passwd pw, *pwr = NULL;
    if (getpwnam_r(name, &pw, pwbuf, sizeof pwbuf, &pwr) != 0 || !pwr)
        return -1;
    gid_t gr[64];
    int ng = (int)(sizeof gr / sizeof gr[0]);
    if (getgrouplist(name, pwr->pw_gid, gr, &ng) < 0) {
        gr[0] = pwr->pw_gid;
        ng = 1;
    }
    *uid = pwr->pw_uid;
    *gid = pwr->pw_gid;
    if (groups && ngroups) {
        int n = ng < *ngroups ? ng : *ngroups;
        memcpy(groups, gr, (size_t)n * sizeof *groups);
        *ngroups = n;
    }
    if (strlen(name) >= sizeof g_users[0].name)
        return 0; /* not kept */
    pthread_mutex_lock(&g_cache_mu);
    unsigned k = g_users_next++ % USER_SLOTS;
    snprintf(g_users[k].name, sizeof g_users[k].name, "%s", name);
    g_users[k].uid = pwr->pw_uid;
    g_users[k].gid = pwr->pw_gid;
    memcpy(g_users[k].groups, gr, (size_t)ng * sizeof gr[0]);
    g_users[k].ngroups = ng;
    g_users[k].at_ms = now;
    pthread_mutex_unlock(&g_cache_mu);
    return 0;
}

int fg_launch_start(const fg_launch_t *l, fg_proc_t *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    p->life_fd = -1;
    fg_mon_prep_t pp;
    memset(&pp, 0, sizeof pp);
    pp.life_w = pp.log_fd = pp.null_fd = -1;
    strv_t argv = {0}, env = {0};
    char *exec_path = NULL;
    fg_dev_t devs[FG_ISO_MAXDEVS];
    int ndevs = 0;
    char *devtext = dev_lines(l, devs, &ndevs);
    int life[2] = {-1, -1};
    int rc = -1;

    /* The Unix account: never root, never the agent's own (account.c checks the same
     * before; the job checks its ids again after the switch, monitor.c). Without one
     * the job runs as the agent's user, only when the caller says so (run_as_agent). */
    if (l->unix_user) {
        int ng = (int)(sizeof pp.groups / sizeof pp.groups[0]);
        if (fg_user_lookup(l->unix_user, &pp.uid, &pp.gid, pp.groups, &ng) != 0) {
            snprintf(err, errlen, "no Unix account %s for the job", l->unix_user);
            p->setup_failed = 1;
            goto out;
        }
        if (fg_account_check_ids(l->unix_user, pp.uid, pp.gid, err, errlen) != 0) {
            p->setup_failed = 1;
            goto out;
        }
        for (int i = 0; i < ng; i++) {
            if (pp.groups[i] == 0) {
                snprintf(err, errlen, "refusing to run a job in group root (account %s)",
                         l->unix_user);
                p->setup_failed = 1;
                goto out;
            }
        }
        pp.switch_user = 1;
        pp.unix_user = l->unix_user;
        pp.ngroups = ng;
    } else if (!l->run_as_agent) {
        snprintf(err, errlen,
                 "no Unix account for the job; refusing to run it as the agent's user");
        p->setup_failed = 1;
        goto out;
    }

    /* Directories. The rank's own files: RUN_DIR/NAME.log and NAME.exit, or without a
     * run_name RUN_DIR/output.log and RUN_DIR/exit. */
    if (!l->run_name && fg_mkdir_p(l->run_dir, 0700) != 0) {
        snprintf(err, errlen, "cannot create %s: %s", l->run_dir, strerror(errno));
        goto out;
    }
    if (own_dir(l->job_dir, pp.switch_user, pp.uid, pp.gid, p, err, errlen) != 0 ||
        own_dir(l->checkpoint_dir, pp.switch_user, pp.uid, pp.gid, p, err, errlen) != 0)
        goto out;
    if (l->run_name) {
        snprintf(p->log_path, sizeof p->log_path, "%s/%s.log", l->run_dir, l->run_name);
        snprintf(p->status_path, sizeof p->status_path, "%s/%s.exit", l->run_dir, l->run_name);
    } else {
        snprintf(p->log_path, sizeof p->log_path, "%s/output.log", l->run_dir);
        snprintf(p->status_path, sizeof p->status_path, "%s/exit", l->run_dir);
    }
    pp.status_path = p->status_path;
    pp.job_dir = l->job_dir;
    unlink(p->status_path);
    /* A recycled log (see fg_file_recycle), emptied of the exit attribute of its last
     * rank; else a new file (an old one of the same name would keep its attribute). */
    if (l->run_name && fg_file_reuse(p->log_path, l->spare_dir, "log") == 0) {
        /* Already empty; O_TRUNC would make ext4 write the log back when the monitor
         * closes it (auto_da_alloc), a block I/O per rank. */
        pp.log_fd = open(p->log_path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        if (pp.log_fd >= 0 && fremovexattr(pp.log_fd, FG_MON_EXIT_XATTR) != 0 && errno != ENODATA) {
            close(pp.log_fd);
            pp.log_fd = -1;
            unlink(p->log_path);
        }
    }
    if (pp.log_fd < 0)
        pp.log_fd = open(p->log_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (pp.log_fd < 0 && errno == EEXIST && unlink(p->log_path) == 0)
        pp.log_fd = open(p->log_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (pp.log_fd < 0 && errno == ENOENT && l->run_name && fg_mkdir_p(l->run_dir, 0700) == 0)
        pp.log_fd = open(p->log_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
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
    if (cg_setup(l, devs, ndevs, &pp, p, err, errlen) != 0)
        goto out;
    pp.isolate = l->iso && l->iso->ns;
    pp.devs = devtext;
    pp.ckpt_dir = l->checkpoint_dir;

    /* Command and environment. */
    if (l->argv && l->argv[0]) {
        for (size_t i = 0; l->argv[i]; i++)
            strv_push(&argv, fg_xstrdup(l->argv[i]));
    } else if (l->shell && plain_words(l->shell, &argv)) {
        pp.shell = l->shell; /* the fallback if the words cannot be executed */
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
    if (pp.shell && !strchr(exec_path, '/')) {
        /* Not found in PATH: sh would not look in the working directory, execve would. */
        strv_free(&argv);
        memset(&argv, 0, sizeof argv);
        strv_push(&argv, fg_xstrdup("/bin/sh"));
        strv_push(&argv, fg_xstrdup("-c"));
        strv_push(&argv, fg_xstrdup(l->shell));
        pp.shell = NULL;
        free(exec_path);
        exec_path = fg_xstrdup("/bin/sh");
    }
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
        fg_mon_monitor_main(&pp);
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
    for (int i = 0; i < pp.ncg; i++)
        close(pp.cg_fds[i]);
    if (rc != 0 && p->cgroup[0]) {
        fg_cg_remove(p->cgroup);
        p->cgroup[0] = '\0';
    }
    free(devtext);
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
    /* One 8-byte write by the monitor (or the zygote): atomic on a pipe. EOF: no
     * monitor ever wrote it (it died first). */
    fg_mon_life_t rec = {0, 0};
    if (fg_mon_read_full(p->life_fd, &rec, sizeof rec) != 0)
        rec.job = 0;
    if (rec.monitor > 0 && p->monitor <= 0)
        p->monitor = rec.monitor;
    if (rec.job < 0)
        p->launch_err = -rec.job;
    p->pgid = rec.job > 0 ? rec.job : 0;
    p->pgid_known = 1;
    return 1;
}

void fg_proc_signal(const fg_proc_t *p, int sig)
{
    if (p->pgid > 0)
        kill(-p->pgid, sig);
    if (sig == SIGKILL && p->cgroup[0])
        fg_cg_kill(p->cgroup);
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

/* The exit status line the monitor left (the log's attribute, else the status file) into
 * buf (NUL-terminated); 0, or -1 when there is none (yet). */
static int read_status(const fg_proc_t *p, char *buf, size_t len)
{
    ssize_t n = p->log_path[0] ? getxattr(p->log_path, FG_MON_EXIT_XATTR, buf, len - 1) : -1;
    if (n < 0) {
        int fd = open(p->status_path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return -1;
        n = read(fd, buf, len - 1);
        close(fd);
        if (n < 0)
            n = 0; /* there, but unreadable: an incomplete status */
    }
    buf[n] = '\0';
    return 0;
}

int fg_proc_running(const fg_proc_t *p)
{
    char buf[80];
    return read_status(p, buf, sizeof buf) != 0;
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
    int oom = 0;
    if (p->cgroup[0]) {
        oom = fg_cg_oom_killed(p->cgroup);
        fg_cg_remove(p->cgroup);
        p->cgroup[0] = '\0';
    }
    char line[80];
    if (p->launch_err) {
        snprintf(ex->error, sizeof ex->error, "could not start the job's monitor: %s",
                 strerror(p->launch_err));
        ex->end_ms = fg_now_ms();
        return -1;
    }
    if (read_status(p, line, sizeof line) != 0) {
        snprintf(ex->error, sizeof ex->error, "exit status lost (monitor vanished)");
        ex->end_ms = fg_now_ms();
        return -1;
    }
    char kind[16] = "";
    long long num = 0, end = 0;
    int n = sscanf(line, "%15s %lld %lld", kind, &num, &end);
    ex->end_ms = n == 3 ? end : fg_now_ms();
    if (n >= 2 && !strcmp(kind, "exit")) {
        ex->code = (int)num;
    } else if (n >= 2 && !strcmp(kind, "signal")) {
        ex->signal = (int)num;
    } else if (n >= 2 && !strcmp(kind, "setup")) {
        ex->setup_failed = 1;
        snprintf(ex->error, sizeof ex->error,
                 "could not switch to the job's Unix account (%s): the job did not run",
                 strerror((int)num));
    } else {
        oom = 0;
        snprintf(ex->error, sizeof ex->error, "could not start the job: %s",
                 n >= 2 ? strerror((int)num) : "unknown error");
    }
    if (oom) {
        /* Said in the job's log too (the user reads that): its last line. */
        snprintf(ex->error, sizeof ex->error,
                 "out of memory: the job exceeded its memory limit and the kernel killed it");
        int fd = open(p->log_path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0) {
            char note[200];
            int k = snprintf(note, sizeof note, "\n[fairgpu: %s]\n", ex->error);
            if (write(fd, note, (size_t)k) != k)
                fg_log(FG_LOG_WARN, "cannot note the OOM kill in %s", p->log_path);
            close(fd);
        }
    }
    return 0;
}

int fg_write_preempt_notice(const char *dir, const char *why)
{
    char body[128];
    int n = snprintf(body, sizeof body, "%s %lld\n", why, (long long)(fg_now_ms() / 1000));
    /* The dir is the job's: the notice replaces whatever the job put there, without
     * following it (safefs.c). */
    return fg_sfs_replace_file(dir, "FAIRGPU_PREEMPT", body, (size_t)n);
}
