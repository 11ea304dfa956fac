/*
 * ckptwatch.c - noticing a rank's checkpoints by scanning its checkpoint directory (see
 * ckptwatch.h for the rules and why the observation time, not an mtime, is recorded).
 *
 * Example: baseline {count 1, names H("step_100.pt"), ctime 09:59}; the job writes
 * step_200.pt; the next scan sees {count 2, names H(..100)+H(..200), ctime 10:01:29}: the
 * largest ctime grew, so the tick records its own now_ms as last_checkpoint_ms.
 */
#define _GNU_SOURCE /* O_PATH (fg_sfs_open_parent's descriptor) */
#include "agent/ckptwatch.h"
#include "agent/safefs.h"

#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Monotonic milliseconds (the scan's own time bound; not a timestamp). */
static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* 64-bit FNV-1a of a name: entries are summed, so readdir's order does not matter. */
static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static int64_t ts_ns(const struct timespec *t)
{
    return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec;
}

/* 1 for the names the agent itself writes into the directory (the preemption notice and
 * its temporary file, launcher.c / safefs.c): they are no checkpoint of the job. */
static int agent_own(const char *name)
{
    return !strcmp(name, ".") || !strcmp(name, "..") || !strcmp(name, "FAIRGPU_PREEMPT") ||
           !strcmp(name, ".FAIRGPU_PREEMPT.fairgpu-tmp");
}

/* Opens dir for reading without following a symbolic link on its path (its last
 * component included); O_NONBLOCK so a FIFO planted in its place cannot block. -1 if
 * it cannot be opened as a real directory. */
static int open_dir_nofollow(const char *dir)
{
    char leaf[256];
    int pfd = fg_sfs_open_parent(dir, 0, leaf, sizeof leaf);
    if (pfd < 0)
        return -1;
    int fd = openat(pfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    close(pfd);
    return fd;
}

void fg_ckpt_scan(const char *dir, fg_ckpt_sig_t *out)
{
    memset(out, 0, sizeof *out);
    if (!dir || !dir[0])
        return;
    int fd = open_dir_nofollow(dir);
    if (fd < 0)
        return;
    struct stat ds;
    if (fstat(fd, &ds) != 0 || !S_ISDIR(ds.st_mode)) {
        close(fd);
        return;
    }
    DIR *d = fdopendir(fd); /* owns fd from here */
    if (!d) {
        close(fd);
        return;
    }
    out->readable = 1;
    out->dir_ctime_ns = ts_ns(&ds.st_ctim);
    int64_t t0 = mono_ms();
    unsigned looked = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (agent_own(de->d_name))
            continue;
        if (looked >= FG_CKPT_MAX_ENTRIES ||
            (looked % 32 == 31 && mono_ms() - t0 > FG_CKPT_MAX_SCAN_MS)) {
            out->truncated = 1;
            break;
        }
        looked++;
        struct stat st;
        /* the name only, never followed: a symbolic link counts as itself */
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue; /* removed meanwhile */
        out->count++;
        out->names += name_hash(de->d_name);
        if (ts_ns(&st.st_mtim) > out->max_mtime_ns)
            out->max_mtime_ns = ts_ns(&st.st_mtim);
        if (ts_ns(&st.st_ctim) > out->max_ctime_ns)
            out->max_ctime_ns = ts_ns(&st.st_ctim);
    }
    closedir(d);
}

int fg_ckpt_changed(const fg_ckpt_sig_t *prev, const fg_ckpt_sig_t *cur)
{
    if (!cur->readable || cur->count == 0)
        return 0; /* nothing there (or nothing we may look at): no checkpoint */
    if (!prev->readable)
        return 1; /* the directory appeared with entries */
    if (cur->max_ctime_ns > prev->max_ctime_ns || cur->max_mtime_ns > prev->max_mtime_ns)
        return 1;
    if (cur->names != prev->names && cur->count >= prev->count)
        return 1; /* a rename over an older entry, say */
    return cur->truncated && cur->dir_ctime_ns > prev->dir_ctime_ns;
}

void fg_ckpt_watch_begin(fg_ckpt_watch_t *w, const char *dir, int64_t now_ms)
{
    memset(w, 0, sizeof *w);
    fg_ckpt_scan(dir, &w->last);
    w->started = 1;
    w->next_scan_ms = now_ms + FG_CKPT_SCAN_MS;
}

int fg_ckpt_watch_tick(fg_ckpt_watch_t *w, const char *dir, int64_t now_ms)
{
    assert(w->started);
    fg_ckpt_sig_t cur;
    fg_ckpt_scan(dir, &cur);
    w->next_scan_ms = now_ms + FG_CKPT_SCAN_MS;
    int changed = fg_ckpt_changed(&w->last, &cur);
    if (cur.readable)
        w->last = cur; /* an unreadable moment (replaced, renamed) keeps the old view */
    if (changed && now_ms > w->last_checkpoint_ms)
        w->last_checkpoint_ms = now_ms;
    return changed;
}
