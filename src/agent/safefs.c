/*
 * safefs.c - symlink-safe file operations in job-writable directories (see safefs.h).
 */
#define _GNU_SOURCE /* O_PATH */
#include "agent/safefs.h"
#include "agent/launcher.h"
#include "common/log.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fg_sfs_open_parent(const char *path, int create, char *leaf, size_t leaflen)
{
    char buf[1024];
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    if (n == 0 || n >= sizeof buf) {
        errno = n ? ENAMETOOLONG : EINVAL;
        return -1;
    }
    memcpy(buf, path, n);
    buf[n] = '\0';
    char *last = strrchr(buf, '/');
    const char *name = last ? last + 1 : buf;
    if (!name[0] || !strcmp(name, ".") || !strcmp(name, "..") ||
        fg_fmt(leaf, leaflen, "%s", name) != 0) {
        errno = EINVAL;
        return -1;
    }
    int fd = open(buf[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || !last)
        return fd;
    *last = '\0';
    for (char *c = buf, *next; c && *c;) {
        next = strchr(c, '/');
        if (next)
            *next++ = '\0';
        if (!c[0] || !strcmp(c, ".")) {
            c = next;
            continue;
        }
        if (!strcmp(c, "..")) {
            close(fd);
            errno = EINVAL;
            return -1;
        }
        int sub = openat(fd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0 && errno == ENOENT && create && (mkdirat(fd, c, 0711) == 0 || errno == EEXIST))
            sub = openat(fd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        close(fd);
        if (sub < 0) {
            errno = e;
            return -1;
        }
        fd = sub;
        c = next;
    }
    return fd;
}

/* Renames entry `leaf` of directory pfd aside (it is not ours to use). 0 or -1. */
static int reject_entry(int pfd, const char *path, const char *leaf, const char *what)
{
    char aside[400];
    static unsigned seq;
    if (fg_fmt(aside, sizeof aside, ".fairgpu-rejected.%s.%lld.%u", leaf, (long long)fg_now_ms(),
               __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED)) != 0)
        return -1;
    if (renameat(pfd, leaf, pfd, aside) != 0)
        return -1;
    fg_log(FG_LOG_WARN, "%s was %s: moved aside to %s", path, what, aside);
    return 0;
}

/* 1 if the directory described by sb may be used as the job's (owned by the agent, or
 * by the job's uid when switching users). */
static int dir_acceptable(const struct stat *sb, int switch_user, uid_t uid)
{
    return S_ISDIR(sb->st_mode) && (sb->st_uid == geteuid() || (switch_user && sb->st_uid == uid));
}

int fg_sfs_own_dir(const char *path, int switch_user, uid_t uid, gid_t gid, char *err,
                   size_t errlen, char *warn, size_t warnlen)
{
    char leaf[256];
    int pfd = fg_sfs_open_parent(path, 1, leaf, sizeof leaf);
    if (pfd < 0) {
        snprintf(err, errlen, "cannot open the parent of %s: %s", path, strerror(errno));
        return -1;
    }
    int fd = -1;
    struct stat sb;
    for (int tries = 0; tries < 4 && fd < 0; tries++) {
        fd = openat(pfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) {
            if (mkdirat(pfd, leaf, 0700) != 0 && errno != EEXIST)
                break;
            continue; /* opened and checked on the next round */
        }
        char what[80];
        if (fd >= 0) {
            int st = fstat(fd, &sb);
            if (st == 0 && dir_acceptable(&sb, switch_user, uid))
                break;
            snprintf(what, sizeof what, "a directory of uid %d", st == 0 ? (int)sb.st_uid : -1);
            close(fd);
            fd = -1;
        } else if (errno == ELOOP || errno == ENOTDIR) {
            snprintf(what, sizeof what, "a symbolic link or not a directory");
        } else {
            break;
        }
        if (reject_entry(pfd, path, leaf, what) != 0) {
            snprintf(err, errlen, "%s is %s and cannot be moved aside: %s", path, what,
                     strerror(errno));
            close(pfd);
            return -1;
        }
    }
    int e = errno;
    close(pfd);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create %s: %s", path, strerror(e ? e : EEXIST));
        return -1;
    }
    /* sb describes fd: the directory that was checked. mkdir's mode went through the
     * umask; an existing one may have been changed by its user. */
    if ((sb.st_mode & 07777) != 0700 && fchmod(fd, 0700) != 0) {
        snprintf(err, errlen, "cannot chmod %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (switch_user && (sb.st_uid != uid || sb.st_gid != gid) && fchown(fd, uid, gid) != 0 && warn)
        snprintf(warn, warnlen, "cannot give %s to the job's user (%s)", path, strerror(errno));
    close(fd);
    return 0;
}

int fg_sfs_replace_file(const char *dir, const char *name, const char *body, size_t len)
{
    assert(name[0] && !strchr(name, '/'));
    char leaf[256], tmp[300];
    if (fg_fmt(tmp, sizeof tmp, ".%s.fairgpu-tmp", name) != 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int pfd = fg_sfs_open_parent(dir, 0, leaf, sizeof leaf);
    if (pfd < 0)
        return -1;
    int dfd = openat(pfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    close(pfd);
    if (dfd < 0) {
        errno = e;
        return -1;
    }
    struct stat sb;
    int fd = -1, rc = -1;
    if (fstat(dfd, &sb) != 0)
        goto out;
    for (int tries = 0; tries < 4 && fd < 0; tries++) {
        unlinkat(dfd, tmp, 0); /* whatever is there: a name, never followed */
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST)
            goto out;
    }
    if (fd < 0)
        goto out;
    ssize_t w = write(fd, body, len);
    if (geteuid() == 0 && sb.st_uid != 0 && fchown(fd, sb.st_uid, sb.st_gid) != 0)
        fg_log(FG_LOG_DEBUG, "cannot chown the new %s/%s: %s", dir, name, strerror(errno));
    if (close(fd) != 0 || w != (ssize_t)len) {
        unlinkat(dfd, tmp, 0);
        goto out;
    }
    if (renameat(dfd, tmp, dfd, name) != 0) {
        e = errno;
        unlinkat(dfd, tmp, 0);
        errno = e;
        goto out;
    }
    rc = 0;
out:
    e = errno;
    close(dfd);
    errno = e;
    return rc;
}
