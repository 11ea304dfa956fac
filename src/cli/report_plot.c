/*
 * report_plot.c - files in the report's directory and gnuplot run on them: see
 * report_plot.h. gnuplot starts with posix_spawnp (no shell), its working directory
 * the report's (posix_spawn_file_actions_addchdir_np), stdin from /dev/null, stdout
 * and stderr into gnuplot.log; a run past its time is killed (by its PID).
 */
#define _GNU_SOURCE /* posix_spawn_file_actions_addchdir_np */
#include "cli/report_plot.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

int fg_rep_mkdir(const char *dir)
{
    struct stat st;
    if (mkdir(dir, 0755) == 0 || (errno == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode)))
        return 0;
    fprintf(stderr, "fairgpu report: --out %s: %s\n", dir,
            errno == EEXIST ? "exists and is not a directory" : strerror(errno));
    return -1;
}

/* Opens name in dir with flags (no link followed); -1 with errno. */
static int open_in(const char *dir, const char *name, int flags)
{
    if (strchr(name, '/')) {
        errno = EINVAL;
        return -1;
    }
    int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0)
        return -1;
    int fd = openat(d, name, flags | O_NOFOLLOW | O_CLOEXEC, 0644);
    int e = errno;
    close(d);
    errno = e;
    return fd;
}

int fg_rep_write(const char *dir, const char *name, const char *data, size_t n)
{
    int fd = open_in(dir, name, O_WRONLY | O_CREAT | O_TRUNC);
    if (fd < 0) {
        fprintf(stderr, "fairgpu report: %s/%s: %s\n", dir, name, strerror(errno));
        return -1;
    }
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, data + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            fprintf(stderr, "fairgpu report: writing %s/%s: %s\n", dir, name, strerror(errno));
            close(fd);
            return -1;
        }
        off += (size_t)w;
    }
    return close(fd) == 0 ? 0 : -1;
}

/* Waits for pid at most timeout_s; kills it past that. Its wait status, or -1. */
static int wait_bounded(pid_t pid, int timeout_s)
{
    struct timespec tick = {0, 20 * 1000000L};
    for (long i = 0; i < (long)timeout_s * 50; i++) {
        int st;
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return st;
        if (w < 0 && errno != EINTR)
            return -1;
        nanosleep(&tick, NULL);
    }
    kill(pid, SIGKILL);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return -1;
}

int fg_rep_gnuplot(const char *dir, const char *script, int timeout_s, char *msg, size_t n)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addchdir_np(&fa, dir);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "gnuplot.log", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    char *argv[] = {"gnuplot", (char *)script, NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc == ENOENT) {
        snprintf(msg, n, "gnuplot is not installed (Debian: gnuplot-nox)");
        return 1;
    }
    if (rc) {
        snprintf(msg, n, "cannot run gnuplot: %s", strerror(rc));
        return -1;
    }
    int st = wait_bounded(pid, timeout_s);
    if (st == -1) {
        snprintf(msg, n, "gnuplot did not finish in %d s (killed)", timeout_s);
        return -1;
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127) {
        snprintf(msg, n, "gnuplot is not installed (Debian: gnuplot-nox)");
        return 1;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st)) {
        snprintf(msg, n, "gnuplot failed (see gnuplot.log)");
        return -1;
    }
    return 0;
}

int fg_rep_is_png(const char *dir, const char *name)
{
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    int fd = open_in(dir, name, O_RDONLY);
    if (fd < 0)
        return 0;
    unsigned char b[8];
    ssize_t r = read(fd, b, sizeof b);
    close(fd);
    return r == (ssize_t)sizeof b && !memcmp(b, sig, sizeof sig);
}
