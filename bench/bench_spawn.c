/*
 * bench_spawn.c - the machine's own ceiling for trivial jobs: how many processes of
 * /usr/bin/true it can start and reap per second, with nothing of fairgpu involved.
 *
 * bench/bench_agent.sh measures jobs of `true` from submission to recorded exit; no
 * platform can finish such jobs faster than the machine can create and reap the
 * processes. This benchmark runs S streams at once (S = 1, 2 and 4; each stream is a
 * process of its own looping posix_spawn + waitpid) for N spawns per stream and prints
 *   spawn_true_per_s_Sstreams      processes started and reaped per second (wall)
 *   spawn_true_cpu_ms_Sstreams     CPU time per process: the children's (exec, dynamic
 *                                  loading, exit) plus this program's, per spawn
 * and, for comparison, fork() of a child that exits at once (no exec):
 *   fork_exit_cpu_ms               CPU time per fork + exit + waitpid, one stream
 * Each line is `name value unit`.
 *
 * Usage: bench_spawn [N]   (default 500 spawns per stream)
 */
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static const char *const TRUE_PATH = "/usr/bin/true";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double tv_s(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* CPU seconds used so far by this process and its reaped children. */
static double cpu_s(void)
{
    struct rusage self, kids;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &kids);
    return tv_s(self.ru_utime) + tv_s(self.ru_stime) + tv_s(kids.ru_utime) + tv_s(kids.ru_stime);
}

/* One stream: n spawns of /usr/bin/true, each reaped before the next. Returns NULL, or
 * an error string. */
static const char *stream(long n)
{
    char *argv[] = {(char *)TRUE_PATH, NULL};
    for (long i = 0; i < n; i++) {
        pid_t pid;
        if (posix_spawn(&pid, TRUE_PATH, NULL, NULL, argv, environ) != 0)
            return "posix_spawn failed";
        int st;
        while (waitpid(pid, &st, 0) < 0)
            if (errno != EINTR)
                return "waitpid failed";
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            return "the child did not exit 0";
    }
    return NULL;
}

/* Runs s streams of n spawns at once, each in a process of its own (as the agents'
 * launchers are), and prints their two lines; 0 or -1. */
static int run_streams(int s, long n)
{
    double c0 = cpu_s(), t0 = now_s();
    int failed = 0;
    for (int i = 0; i < s; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("bench_spawn: fork");
            return -1;
        }
        if (pid == 0) {
            /* a stream ends with the benchmark (stopped with Ctrl-C or kill) */
            prctl(PR_SET_PDEATHSIG, SIGTERM);
            if (getppid() == 1)
                _exit(1);
            const char *err = stream(n);
            if (err)
                fprintf(stderr, "bench_spawn: %s: %s\n", TRUE_PATH, err);
            _exit(err ? 1 : 0);
        }
    }
    for (int i = 0; i < s; i++) {
        int st;
        if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            failed = 1;
    }
    double t = now_s() - t0, c = cpu_s() - c0;
    if (failed)
        return -1;
    double total = (double)s * (double)n;
    printf("spawn_true_per_s_%dstreams %.1f processes/s\n", s, total / t);
    printf("spawn_true_cpu_ms_%dstreams %.3f ms\n", s, c * 1e3 / total);
    return 0;
}

int main(int argc, char **argv)
{
    long n = 500;
    if (argc > 1) {
        char *end;
        errno = 0;
        n = strtol(argv[1], &end, 10);
        if (errno || *end || n < 1 || n > 1000000) {
            fprintf(stderr, "usage: bench_spawn [spawns per stream, 1..1000000]\n");
            return 2;
        }
    }
    if (access(TRUE_PATH, X_OK) != 0) {
        fprintf(stderr, "bench_spawn: %s: %s\n", TRUE_PATH, strerror(errno));
        return 1;
    }
    static const int streams[] = {1, 2, 4};
    for (size_t i = 0; i < sizeof streams / sizeof streams[0]; i++)
        if (run_streams(streams[i], n) != 0)
            return 1;
    double c0 = cpu_s();
    for (long i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("bench_spawn: fork");
            return 1;
        }
        if (pid == 0)
            _exit(0);
        int st;
        while (waitpid(pid, &st, 0) < 0)
            if (errno != EINTR) {
                perror("bench_spawn: waitpid");
                return 1;
            }
    }
    printf("fork_exit_cpu_ms %.3f ms\n", (cpu_s() - c0) * 1e3 / (double)n);
    return 0;
}
