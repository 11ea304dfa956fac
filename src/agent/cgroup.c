/*
 * cgroup.c - per-job control groups on cgroup v2 or v1 (see cgroup.h).
 *
 * v2: ROOT/fairgpu has cpu, memory and pids enabled for its children; a job's cgroup
 * gets cpu.max, memory.max (+ memory.swap.max 0, memory.oom.group 1) and pids.max.
 * v1: one parent per controller (ROOT/cpu/fairgpu, ...); a job's cgroups get
 * cpu.cfs_quota_us, memory.limit_in_bytes (+ memory.memsw.limit_in_bytes when swap is
 * accounted), pids.max and a devices allow list (devices.deny "a", then one
 * devices.allow line per device). On v2 the same list is an eBPF device program
 * attached to the job's cgroup (devfilter.c).
 */
#include "agent/cgroup.h"
#include "agent/devfilter.h"
#include "agent/launcher.h"
#include "common/xalloc.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* v1 controllers in the order of fg_cg_host_t.parent. */
static const char *const V1_CTRL[FG_CG_MAXDIRS] = {"cpu", "memory", "pids", "devices"};
enum { V1_CPU, V1_MEM, V1_PIDS, V1_DEV };

/* Writes val into dir/file; 0 or -1 (errno set). */
static int cg_write(const char *dir, const char *file, const char *val)
{
    char path[600];
    if (fg_fmt(path, sizeof path, "%s/%s", dir, file) != 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t n = strlen(val);
    ssize_t w = write(fd, val, n);
    int e = errno;
    close(fd);
    errno = e;
    return w == (ssize_t)n ? 0 : -1;
}

int fg_cg_read(const char *dir, const char *file, char *buf, size_t len)
{
    assert(len > 0);
    char path[600];
    if (fg_fmt(path, sizeof path, "%s/%s", dir, file) != 0)
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    while (n > 0 && buf[n - 1] == '\n')
        buf[--n] = '\0';
    return 0;
}

/* 1 if dir/file exists. */
static int cg_has(const char *dir, const char *file)
{
    char path[600];
    return fg_fmt(path, sizeof path, "%s/%s", dir, file) == 0 && access(path, F_OK) == 0;
}

/* 1 if the blank-separated word list `words` contains w. */
static int has_word(const char *words, const char *w)
{
    size_t n = strlen(w);
    for (const char *p = words; (p = strstr(p, w)) != NULL; p += n)
        if ((p == words || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
            return 1;
    return 0;
}

/* Appends "what" to the missing list. */
static void missing(fg_cg_host_t *h, const char *what)
{
    size_t n = strlen(h->missing);
    snprintf(h->missing + n, sizeof h->missing - n, "%s%s", n ? ", " : "", what);
}

/* Probes a cgroup v2 hierarchy at root. */
static void probe_v2(const char *root, fg_cg_host_t *h)
{
    h->version = FG_CG_V2;
    char ctl[256], parent[300];
    if (fg_fmt(parent, sizeof parent, "%s/fairgpu", root) != 0 ||
        (mkdir(parent, 0755) != 0 && errno != EEXIST)) {
        missing(h, "cgroup v2 not writable");
        h->version = FG_CG_NONE;
        return;
    }
    snprintf(h->parent[0], sizeof h->parent[0], "%s", parent);
    cg_write(root, "cgroup.subtree_control", "+cpu +memory +pids");
    cg_write(parent, "cgroup.subtree_control", "+cpu +memory +pids");
    if (fg_cg_read(parent, "cgroup.subtree_control", ctl, sizeof ctl) != 0)
        ctl[0] = '\0';
    static const char *const need[] = {"cpu", "memory", "pids"};
    for (int i = 0; i < 3; i++) {
        if (!has_word(ctl, need[i])) {
            char m[64];
            snprintf(m, sizeof m, "cgroup v2 controller %s", need[i]);
            missing(h, m);
        }
    }
    char why[300];
    if (fg_devfilter_probe(why, sizeof why) == 0)
        h->devices = 1;
    else
        missing(h, why);
}

/* Probes cgroup v1 hierarchies under root. */
static void probe_v1(const char *root, fg_cg_host_t *h)
{
    static const char *const knob[FG_CG_MAXDIRS] = {"cpu.cfs_quota_us", "memory.limit_in_bytes",
                                                    "pids.max", "devices.allow"};
    for (int i = 0; i < FG_CG_MAXDIRS; i++) {
        char parent[300];
        if (fg_fmt(parent, sizeof parent, "%s/%s/fairgpu", root, V1_CTRL[i]) != 0 ||
            (mkdir(parent, 0755) != 0 && errno != EEXIST) || !cg_has(parent, knob[i])) {
            if (i != V1_DEV) {
                char m[64];
                snprintf(m, sizeof m, "cgroup controller %s", V1_CTRL[i]);
                missing(h, m);
            }
            continue;
        }
        h->version = FG_CG_V1;
        snprintf(h->parent[i], sizeof h->parent[i], "%s", parent);
    }
    h->devices = h->parent[V1_DEV][0] != '\0';
    h->memsw = h->parent[V1_MEM][0] && cg_has(h->parent[V1_MEM], "memory.memsw.limit_in_bytes");
}

int fg_cg_probe(const char *root, fg_cg_host_t *h)
{
    memset(h, 0, sizeof *h);
    struct stat st;
    if (strchr(root, ':')) {
        missing(h, "cgroup root contains ':'");
    } else if (stat(root, &st) != 0 || !S_ISDIR(st.st_mode)) {
        missing(h, "no cgroup hierarchy");
    } else if (cg_has(root, "cgroup.controllers")) {
        probe_v2(root, h);
    } else {
        probe_v1(root, h);
        if (h->version == FG_CG_NONE) {
            h->missing[0] = '\0';
            missing(h, "no usable cgroup hierarchy");
        }
    }
    return h->missing[0] ? -1 : 0;
}

/* Writes one limit; on failure err says which. 0 or -1. */
static int limit(const char *dir, const char *file, const char *val, char *err, size_t errlen)
{
    if (cg_write(dir, file, val) == 0)
        return 0;
    snprintf(err, errlen, "cgroup: cannot write %s/%s: %s", dir, file, strerror(errno));
    return -1;
}

/* Attaches the v2 device filter for lim's devices and the ptys (136:*, as on v1) to dir. */
static int devfilter(const char *dir, const fg_cg_limits_t *lim, char *err, size_t errlen)
{
    assert(lim->ndevs >= 0 && (lim->ndevs == 0 || lim->devs));
    fg_dev_t *devs = fg_xcalloc((size_t)lim->ndevs + 1, sizeof *devs);
    if (lim->ndevs > 0)
        memcpy(devs, lim->devs, (size_t)lim->ndevs * sizeof *devs);
    devs[lim->ndevs] = (fg_dev_t){.major = 136, .minor = FG_DEVFILTER_ANY, .name = "pts"};
    int rc = fg_devfilter_attach(dir, devs, lim->ndevs + 1, err, errlen);
    free(devs);
    return rc;
}

/* Applies lim to the job's cgroup dir of v1 controller i (or v2 when i < 0). */
static int apply(const fg_cg_host_t *h, int i, const char *dir, const fg_cg_limits_t *lim,
                 char *err, size_t errlen)
{
    char v[64];
    int v2 = i < 0;
    /* v2 with controllers missing (an unisolated node, warned at start): the limits of
     * those are skipped, as a missing v1 hierarchy is; the device filter still applies. */
    int partial = v2 && h->missing[0];
    int cpu = v2 ? !partial || cg_has(dir, "cpu.max") : i == V1_CPU;
    int mem = v2 ? !partial || cg_has(dir, "memory.max") : i == V1_MEM;
    int pids = v2 ? !partial || cg_has(dir, "pids.max") : i == V1_PIDS;
    if (cpu && lim->cpus > 0) {
        snprintf(v, sizeof v, "%lld", (long long)lim->cpus * 100000);
        if (v2) {
            snprintf(v, sizeof v, "%lld 100000", (long long)lim->cpus * 100000);
            if (limit(dir, "cpu.max", v, err, errlen))
                return -1;
        } else if (limit(dir, "cpu.cfs_period_us", "100000", err, errlen) ||
                   limit(dir, "cpu.cfs_quota_us", v, err, errlen)) {
            return -1;
        }
    }
    if (mem && lim->memory_mb > 0) {
        snprintf(v, sizeof v, "%lld", (long long)lim->memory_mb * 1024 * 1024);
        if (limit(dir, v2 ? "memory.max" : "memory.limit_in_bytes", v, err, errlen))
            return -1;
        if (v2 && cg_has(dir, "memory.swap.max") && limit(dir, "memory.swap.max", "0", err, errlen))
            return -1;
        if (!v2 && h->memsw && limit(dir, "memory.memsw.limit_in_bytes", v, err, errlen))
            return -1;
    }
    if (v2 && cg_has(dir, "memory.oom.group"))
        cg_write(dir, "memory.oom.group", "1"); /* an OOM kill takes the whole job */
    if (pids && lim->pids_max > 0) {
        snprintf(v, sizeof v, "%lld", (long long)lim->pids_max);
        if (limit(dir, "pids.max", v, err, errlen))
            return -1;
    }
    if (v2 && devfilter(dir, lim, err, errlen) != 0)
        return -1;
    if (i == V1_DEV) {
        if (limit(dir, "devices.deny", "a", err, errlen) ||
            limit(dir, "devices.allow", "c 136:* rwm", err, errlen)) /* its own ptys */
            return -1;
        for (int d = 0; d < lim->ndevs; d++) {
            snprintf(v, sizeof v, "c %u:%u rwm", lim->devs[d].major, lim->devs[d].minor);
            if (limit(dir, "devices.allow", v, err, errlen))
                return -1;
        }
    }
    return 0;
}

int fg_cg_create(const fg_cg_host_t *h, const char *name, const fg_cg_limits_t *lim, int *fds,
                 char *list, size_t listlen, char *err, size_t errlen)
{
    assert(listlen > 0 && !strchr(name, '/'));
    list[0] = '\0';
    int nfd = 0;
    for (int i = 0; i < FG_CG_MAXDIRS && h->version != FG_CG_NONE; i++) {
        if (!h->parent[i][0])
            continue;
        char dir[400], procs[420];
        size_t used = strlen(list);
        if (fg_fmt(dir, sizeof dir, "%s/%s", h->parent[i], name) != 0 ||
            fg_fmt(procs, sizeof procs, "%s/cgroup.procs", dir) != 0 ||
            fg_fmt(list + used, listlen - used, "%s%s", used ? ":" : "", dir) != 0) {
            snprintf(err, errlen, "cgroup: name too long");
            list[used] = '\0';
            goto fail;
        }
        /* the rank's own: one left by a crash is empty and goes; one in use is not ours */
        if (mkdir(dir, 0755) != 0 &&
            (errno != EEXIST || rmdir(dir) != 0 || mkdir(dir, 0755) != 0)) {
            snprintf(err, errlen, "cgroup: cannot create %s: %s", dir,
                     errno == EBUSY ? "in use by other processes" : strerror(errno));
            list[used] = '\0';
            goto fail;
        }
        if (apply(h, h->version == FG_CG_V2 ? -1 : i, dir, lim, err, errlen) != 0)
            goto fail;
        fds[nfd] = open(procs, O_WRONLY | O_CLOEXEC);
        if (fds[nfd] < 0) {
            snprintf(err, errlen, "cgroup: cannot open %s: %s", procs, strerror(errno));
            goto fail;
        }
        nfd++;
        if (h->version == FG_CG_V2)
            break;
    }
    return nfd;
fail:
    while (nfd > 0)
        close(fds[--nfd]);
    fg_cg_remove(list);
    list[0] = '\0';
    return -1;
}

/* Calls fn on each directory of the ':'-separated list until one returns non-zero;
 * returns that value, or 0. */
static int each_dir(const char *list, int (*fn)(const char *dir))
{
    const char *p = list;
    while (p && *p) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char dir[600];
        if (n > 0 && n < sizeof dir) {
            memcpy(dir, p, n);
            dir[n] = '\0';
            int rc = fn(dir);
            if (rc)
                return rc;
        }
        p = e ? e + 1 : NULL;
    }
    return 0;
}

/* SIGKILLs every pid listed in dir/cgroup.procs. */
static void kill_listed(const char *dir)
{
    char path[620];
    if (fg_fmt(path, sizeof path, "%s/cgroup.procs", dir) != 0)
        return;
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    long pid;
    while (fscanf(f, "%ld", &pid) == 1)
        if (pid > 1)
            kill((pid_t)pid, SIGKILL);
    fclose(f);
}

/* Kills the processes of one cgroup directory. Always 0 (each_dir goes on). */
static int kill_dir(const char *dir)
{
    if (cg_write(dir, "cgroup.kill", "1") != 0)
        kill_listed(dir);
    return 0;
}

void fg_cg_kill(const char *list)
{
    each_dir(list, kill_dir);
}

/* 1 if the OOM killer killed a process of one cgroup directory (v2 memory.events or
 * v1 memory.oom_control), else 0. */
static int oom_killed_dir(const char *dir)
{
    char buf[512];
    if (fg_cg_read(dir, "memory.events", buf, sizeof buf) != 0 &&
        fg_cg_read(dir, "memory.oom_control", buf, sizeof buf) != 0)
        return 0;
    const char *k = strstr(buf, "oom_kill ");
    return k && strtol(k + 9, NULL, 10) > 0;
}

int fg_cg_oom_killed(const char *list)
{
    return each_dir(list, oom_killed_dir);
}

/*
 * Removal runs on a worker thread of its own: a cgroup rmdir waits for the kernel (RCU
 * grace periods, memory cgroup teardown: milliseconds on cgroup v1), and reaps run under
 * the agent's lock. The queue is bounded; when it is full the caller removes the
 * directories itself. A directory still busy (a process that just exited still counted)
 * is retried a few times.
 */
#define RM_MAX 1024
static pthread_mutex_t g_rm_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_rm_cond = PTHREAD_COND_INITIALIZER;
static char *g_rm[RM_MAX]; /* ':'-separated lists, oldest first */
static int g_nrm;
static pthread_once_t g_rm_once = PTHREAD_ONCE_INIT;
static int g_rm_thread; /* 1: the worker runs */

/* Removes one job cgroup directory, retrying briefly while it is busy. Always 0. */
static int remove_dir(const char *dir)
{
    for (int i = 0; i < 20 && rmdir(dir) != 0 && errno == EBUSY; i++) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* The removal worker: takes lists off the queue and removes their directories. */
static void *rm_main(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&g_rm_mu);
        while (g_nrm == 0)
            pthread_cond_wait(&g_rm_cond, &g_rm_mu);
        char *list = g_rm[0];
        memmove(g_rm, g_rm + 1, (size_t)--g_nrm * sizeof *g_rm);
        pthread_mutex_unlock(&g_rm_mu);
        each_dir(list, remove_dir);
        free(list);
    }
    return NULL;
}

static void rm_start(void)
{
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    g_rm_thread = pthread_create(&t, &at, rm_main, NULL) == 0;
    pthread_attr_destroy(&at);
}

void fg_cg_remove(const char *list)
{
    if (!list[0])
        return;
    pthread_once(&g_rm_once, rm_start);
    pthread_mutex_lock(&g_rm_mu);
    int queued = g_rm_thread && g_nrm < RM_MAX;
    if (queued) {
        g_rm[g_nrm++] = fg_xstrdup(list);
        pthread_cond_signal(&g_rm_cond);
    }
    pthread_mutex_unlock(&g_rm_mu);
    if (!queued)
        each_dir(list, remove_dir);
}
