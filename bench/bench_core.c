/*
 * bench_core.c - how long a scheduling pass takes at scale.
 *
 * The cluster: 1,000 nodes x 8 GPUs, 20 users in 4 accounts, 100,000 pending jobs of
 * 1/2/4/8/16 GPUs (5% high, 15% low). Measured:
 *   core_first_pass_empty   the first pass on the empty cluster (fills it; median of 5)
 *   core_full_pass          fg_sched_rebuild() + a pass: a pass from scratch (median)
 *   core_rebuild            fg_sched_rebuild() alone (median)
 *   core_incremental_pass   one running job ends + one job is submitted + a pass (median)
 * Each is printed as wall-clock time and as this thread's CPU time (`..._cpu`), which
 * does not count waiting for a core on a busy machine. Each line is `name value unit`.
 * Goals: full pass < 10 ms, incremental < 100 us.
 *
 * Usage: bench_core [repetitions]   (default 21: medians of 21 full passes and of
 *                                   210 incremental steps)
 * Build it as Release: cmake -S . -B build/rel -G Ninja -DCMAKE_BUILD_TYPE=Release
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fairgpu/core.h"

#define NODES      1000
#define ACCOUNTS   4
#define USERS      5 /* per account: 20 in all */
#define JOBS       100000
#define FIRST_REPS 5 /* fresh clusters for the first-pass median */

static uint64_t rng_next(uint64_t *x) /* splitmix64 */
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A moment on two clocks: the wall clock, and this thread's CPU time (what the pass costs
 * when the machine is shared and the wall clock also counts waiting for a core). */
typedef struct stamp {
    double wall, cpu;
} stamp_t;

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static stamp_t stamp(void)
{
    stamp_t t = {clock_s(CLOCK_MONOTONIC), clock_s(CLOCK_THREAD_CPUTIME_ID)};
    return t;
}

/* Records the time from `from` to now as sample r of wall[] and cpu[]. */
static void record(stamp_t from, double *wall, double *cpu, long r)
{
    stamp_t to = stamp();
    wall[r] = to.wall - from.wall;
    cpu[r] = to.cpu - from.cpu;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_core: %s: %s\n", what, fg_strerror(rc));
    exit(1);
}

/* A random job: sizes 1 (40%), 2 (20%), 4 (15%), 8 (15%), 16 (10%); limits 10 min..1 day. */
static int submit_random(fg_sched_t *s, uint64_t *rng, fg_job_id_t id, fg_time_t now)
{
    char acct[16], user[16];
    unsigned a = (unsigned)(rng_next(rng) % ACCOUNTS);
    snprintf(acct, sizeof acct, "acct%u", a);
    snprintf(user, sizeof user, "user%u", a * USERS + (unsigned)(rng_next(rng) % USERS));
    unsigned p = (unsigned)(rng_next(rng) % 100);
    int32_t gpus = p < 40 ? 1 : p < 60 ? 2 : p < 75 ? 4 : p < 90 ? 8 : 16;
    unsigned c = (unsigned)(rng_next(rng) % 100);
    fg_job_spec_t j = {.id = id,
                       .account = acct,
                       .user = user,
                       .gpus = gpus,
                       .gpu_type = NULL,
                       .time_limit_s = 600 + (fg_time_t)(rng_next(rng) % 85800),
                       .prio = c < 5    ? FG_PRIO_HIGH
                               : c < 20 ? FG_PRIO_LOW
                                        : FG_PRIO_NORMAL,
                       .max_retries = 1,
                       .checkpoint_interval_s = 0,
                       .submit_time = now};
    return fg_sched_submit(s, &j, now);
}

/* The cluster and its queue: 1000 nodes, 4 accounts x 5 users, 100,000 pending jobs
 * submitted over 1000 s. *next_id gets the next free job id. */
static fg_sched_t *build(uint64_t *rng, fg_job_id_t *next_id)
{
    fg_config_t cfg;
    fg_config_default(&cfg);
    fg_sched_t *s = fg_sched_new(&cfg);
    if (!s)
        die("fg_sched_new", FG_EINVAL);
    for (int a = 0; a < ACCOUNTS; a++) {
        char acct[16], user[16];
        snprintf(acct, sizeof acct, "acct%d", a);
        int rc = fg_sched_account_set(s, acct, (double)(a + 1), -1);
        if (rc < 0)
            die("account_set", rc);
        for (int u = 0; u < USERS; u++) {
            snprintf(user, sizeof user, "user%d", a * USERS + u);
            if ((rc = fg_sched_member_set(s, acct, user, 1.0)) < 0)
                die("member_set", rc);
        }
    }
    for (int n = 0; n < NODES; n++) {
        char name[16];
        snprintf(name, sizeof name, "node%04d", n);
        int rc = fg_sched_node_add(s, name, 8, "h100", FG_NODE_UP);
        if (rc < 0)
            die("node_add", rc);
    }
    *rng = 12345;
    fg_job_id_t id = 1;
    for (; id <= JOBS; id++) {
        int rc = submit_random(s, rng, id, (fg_time_t)(id / 100));
        if (rc != FG_OK)
            die("submit", rc);
    }

    *next_id = id;
    return s;
}

int main(int argc, char **argv)
{
    long reps = 21;
    if (argc > 1) {
        char *end;
        reps = strtol(argv[1], &end, 10);
        if (*end || reps < 1 || reps > 100000) {
            fprintf(stderr, "usage: %s [repetitions]\n", argv[0]);
            return 2;
        }
    }

    /* The first pass on an empty cluster, on FIRST_REPS fresh schedulers; the last one
     * goes on to the full and incremental passes. */
    double t_first[FIRST_REPS], c_first[FIRST_REPS];
    fg_sched_t *s = NULL;
    uint64_t rng = 0;
    fg_job_id_t next_id = 0;
    fg_time_t now = JOBS / 100 + 1;
    fg_decisions_t d;
    fg_decisions_init(&d);
    int rc;
    for (int r = 0; r < FIRST_REPS; r++) {
        if (s)
            fg_sched_free(s);
        s = build(&rng, &next_id);
        stamp_t t0 = stamp();
        rc = fg_sched_pass(s, now, &d);
        record(t0, t_first, c_first, r);
        if (rc != FG_OK)
            die("pass", rc);
    }

    /* running jobs (id, attempt), to end one per incremental step */
    size_t nrun = 0, caprun = NODES * 8;
    fg_job_id_t *run_id = malloc(caprun * sizeof *run_id);
    int32_t *run_att = malloc(caprun * sizeof *run_att);
    /* samples: wall and CPU time of rebuild, full pass (rebuild + pass), incremental */
    const long ireps = 10 * reps; /* incremental steps are cheap: take more of them */
    double *t = malloc((4 * (size_t)reps + 2 * (size_t)ireps) * sizeof *t);
    if (!run_id || !run_att || !t)
        die("malloc", FG_ENOMEM);
    double *t_rebuild = t, *c_rebuild = t + reps, *t_full = t + 2 * reps, *c_full = t + 3 * reps;
    double *t_incr = t + 4 * reps, *c_incr = t + 4 * reps + ireps;

    for (size_t i = 0; i < d.nstarts && nrun < caprun; i++) {
        run_id[nrun] = d.starts[i].job;
        run_att[nrun++] = d.starts[i].attempt;
    }
    size_t first_starts = d.nstarts;

    for (long r = 0; r < reps; r++) {
        now++;
        stamp_t a = stamp();
        fg_sched_rebuild(s);
        record(a, t_rebuild, c_rebuild, r);
        if ((rc = fg_sched_pass(s, now, &d)) != FG_OK)
            die("pass", rc);
        record(a, t_full, c_full, r);
        for (size_t i = 0; i < d.nstarts && nrun < caprun; i++) {
            run_id[nrun] = d.starts[i].job;
            run_att[nrun++] = d.starts[i].attempt;
        }
    }

    int64_t scanned = 0;
    for (long r = 0; r < ireps; r++) {
        now++;
        if (nrun == 0)
            die("no running job to end", FG_ESTATE);
        size_t k = (size_t)(rng_next(&rng) % nrun);
        fg_job_id_t id = run_id[k];
        int32_t att = run_att[k];
        run_id[k] = run_id[--nrun];
        run_att[k] = run_att[nrun];
        stamp_t a = stamp();
        if ((rc = fg_sched_attempt_ended(s, id, att, FG_END_COMPLETED, now, NULL)) != FG_OK)
            die("attempt_ended", rc);
        if ((rc = submit_random(s, &rng, next_id++, now)) != FG_OK)
            die("submit", rc);
        if ((rc = fg_sched_pass(s, now, &d)) != FG_OK)
            die("pass", rc);
        record(a, t_incr, c_incr, r);
        scanned += d.scanned;
        for (size_t i = 0; i < d.nstarts && nrun < caprun; i++) {
            run_id[nrun] = d.starts[i].job;
            run_att[nrun++] = d.starts[i].attempt;
        }
    }

    printf("core_nodes %d nodes\n", NODES);
    printf("core_pending_jobs %zu jobs\n", fg_sched_pending_count(s));
    printf("core_first_pass_starts %zu jobs\n", first_starts);
    size_t n = (size_t)reps;
    printf("core_first_pass_empty %.3f ms\n", median(t_first, FIRST_REPS) * 1e3);
    printf("core_first_pass_empty_cpu %.3f ms\n", median(c_first, FIRST_REPS) * 1e3);
    printf("core_rebuild %.3f ms\n", median(t_rebuild, n) * 1e3);
    printf("core_rebuild_cpu %.3f ms\n", median(c_rebuild, n) * 1e3);
    printf("core_full_pass %.3f ms\n", median(t_full, n) * 1e3);
    printf("core_full_pass_cpu %.3f ms\n", median(c_full, n) * 1e3);
    printf("core_incremental_pass %.1f us\n", median(t_incr, (size_t)ireps) * 1e6);
    printf("core_incremental_pass_cpu %.1f us\n", median(c_incr, (size_t)ireps) * 1e6);
    printf("core_incremental_scanned %.1f jobs\n", (double)scanned / (double)ireps);
    printf("core_repetitions %ld runs\n", reps);
    printf("core_incremental_repetitions %ld runs\n", ireps);

    fg_decisions_free(&d);
    fg_sched_free(s);
    free(run_id);
    free(run_att);
    free(t);
    return 0;
}
