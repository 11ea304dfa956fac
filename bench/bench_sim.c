/*
 * bench_sim.c - replay speed of the simulator on the largest shared trace (Philly,
 * 74k jobs), at the default cluster size of `fairgpu sim` (offered load ~1). Prints
 * `name value unit` lines: jobs/s of replay per policy (defaults otherwise), and for
 * the default policy how it changes with the backfill scan depth. `_jobs_per_s` is
 * jobs / wall-clock replay time (the figure); `_jobs_per_cpu_s` divides by the
 * thread's CPU time instead, which other processes on a shared machine do not inflate.
 *
 * usage: bench_sim [TRACE.csv] [--max-jobs N]   (run from the repository root; the
 * default trace is ../shared/traces/philly_2017_sep_nov/trace.csv)
 */
#include "sim/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int run(const fg_trace_t *t, fg_sim_opts_t *o, const char *name)
{
    fg_sim_result_t r;
    char err[512];
    double c0 = cpu_s();
    int rc = fg_sim_run(t, o, &r, err, sizeof err);
    double cpu = cpu_s() - c0;
    if (rc != 0) {
        fprintf(stderr, "bench_sim: %s: %s\n", name, err);
        printf("%s_jobs_per_s NaN jobs/s\n", name);
        return -1;
    }
    printf("%s_jobs_per_s %.0f jobs/s\n", name, (double)r.jobs / r.replay_seconds);
    printf("%s_jobs_per_cpu_s %.0f jobs/s\n", name, (double)r.jobs / cpu);
    printf("%s_replay_seconds %.3f s\n", name, r.replay_seconds);
    printf("%s_passes %lld passes\n", name, (long long)r.passes);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = "../shared/traces/philly_2017_sep_nov/trace.csv";
    fg_trace_opts_t topts = {0, 0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--max-jobs") && i + 1 < argc) {
            char *end = NULL;
            long long v = strtoll(argv[++i], &end, 10);
            if (!end || *end || v < 1) {
                fprintf(stderr, "bench_sim: bad --max-jobs\n");
                return 2;
            }
            topts.max_jobs = (size_t)v;
        } else {
            path = argv[i];
        }
    }
    fg_trace_t t;
    char err[512];
    double t0 = now_s();
    if (fg_trace_load(path, &topts, &t, err, sizeof err) != 0) {
        fprintf(stderr, "bench_sim: %s (run from the repository root or give the trace)\n", err);
        return 1;
    }
    double load = now_s() - t0;
    printf("sim_trace_jobs %zu jobs\n", t.njobs);
    printf("sim_parse_jobs_per_s %.0f jobs/s\n", (double)t.njobs / load);
    fg_sim_nodes_t g = {(int32_t)fg_sim_auto_nodes(&t, 8), 8, "gpu"};
    printf("sim_cluster_gpus %d gpus\n", g.count * g.gpus);
    fg_sim_opts_t o;
    int bad = 0;
    char name[64];
    for (int p = 0; p < FG_POLICY_COUNT; p++) {
        fg_sim_opts_default(&o);
        o.groups = &g;
        o.ngroups = 1;
        o.cfg.policy = (fg_policy_t)p;
        snprintf(name, sizeof name, "sim_%s", fg_policy_name((fg_policy_t)p));
        for (char *c = name; *c; c++)
            if (*c == '-')
                *c = '_';
        bad |= run(&t, &o, name);
    }
    static const int depths[] = {16, 64, 256, 0};
    for (size_t k = 0; k < sizeof depths / sizeof depths[0]; k++) {
        fg_sim_opts_default(&o);
        o.groups = &g;
        o.ngroups = 1;
        o.cfg.backfill_depth = depths[k];
        snprintf(name, sizeof name, "sim_%s_backfill_depth_%d", fg_policy_name(o.cfg.policy),
                 depths[k]);
        bad |= run(&t, &o, name);
    }
    fg_trace_free(&t);
    return bad ? 1 : 0;
}
