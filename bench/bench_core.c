/*
 * bench_core.c - how long a scheduling pass takes at scale.
 *
 * The cluster: 1,000 nodes x 8 GPUs, 20 users in 4 accounts, 100,000 pending jobs of
 * 1/2/4/8/16 GPUs. Measured (wall clock, CLOCK_MONOTONIC):
 *   core_first_pass_empty   the first pass on the empty cluster (fills it)
 *   core_full_pass          fg_sched_rebuild() + a pass: a pass from scratch (median)
 *   core_rebuild            fg_sched_rebuild() alone (median)
 *   core_incremental_pass   one running job ends + one job is submitted + a pass (median)
 * Each line is `name value unit`. Goals: full pass < 10 ms, incremental < 100 us.
 *
 * Usage: bench_core [repetitions]   (default 21; the median of that many runs)
 * Build it as Release: cmake -S . -B build/rel -G Ninja -DCMAKE_BUILD_TYPE=Release
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fairgpu/core.h"

#define NODES    1000
#define ACCOUNTS 4
#define USERS    5 /* per account: 20 in all */
#define JOBS     100000

static uint64_t rng_next(uint64_t *x) /* splitmix64 */
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
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
    uint64_t rng = 12345;
    fg_job_id_t next_id = 1;
    for (; next_id <= JOBS; next_id++) {
        int rc = submit_random(s, &rng, next_id, (fg_time_t)(next_id / 100));
        if (rc != FG_OK)
            die("submit", rc);
    }

    /* running jobs (id, attempt), to end one per incremental step */
    size_t nrun = 0, caprun = NODES * 8;
    fg_job_id_t *run_id = malloc(caprun * sizeof *run_id);
    int32_t *run_att = malloc(caprun * sizeof *run_att);
    double *t_full = malloc((size_t)reps * sizeof *t_full);
    double *t_rebuild = malloc((size_t)reps * sizeof *t_rebuild);
    double *t_incr = malloc((size_t)reps * sizeof *t_incr);
    if (!run_id || !run_att || !t_full || !t_rebuild || !t_incr)
        die("malloc", FG_ENOMEM);

    fg_decisions_t d;
    fg_decisions_init(&d);
    fg_time_t now = JOBS / 100 + 1;

    double t0 = now_s();
    int rc = fg_sched_pass(s, now, &d);
    double first = now_s() - t0;
    if (rc != FG_OK)
        die("pass", rc);
    for (size_t i = 0; i < d.nstarts && nrun < caprun; i++) {
        run_id[nrun] = d.starts[i].job;
        run_att[nrun++] = d.starts[i].attempt;
    }
    size_t first_starts = d.nstarts;

    for (long r = 0; r < reps; r++) {
        now++;
        double a = now_s();
        fg_sched_rebuild(s);
        double b = now_s();
        if ((rc = fg_sched_pass(s, now, &d)) != FG_OK)
            die("pass", rc);
        double c = now_s();
        t_rebuild[r] = b - a;
        t_full[r] = c - a;
        for (size_t i = 0; i < d.nstarts && nrun < caprun; i++) {
            run_id[nrun] = d.starts[i].job;
            run_att[nrun++] = d.starts[i].attempt;
        }
    }

    int64_t scanned = 0;
    for (long r = 0; r < reps; r++) {
        now++;
        if (nrun == 0)
            die("no running job to end", FG_ESTATE);
        size_t k = (size_t)(rng_next(&rng) % nrun);
        fg_job_id_t id = run_id[k];
        int32_t att = run_att[k];
        run_id[k] = run_id[--nrun];
        run_att[k] = run_att[nrun];
        double a = now_s();
        if ((rc = fg_sched_attempt_ended(s, id, att, FG_END_COMPLETED, now, NULL)) != FG_OK)
            die("attempt_ended", rc);
        if ((rc = submit_random(s, &rng, next_id++, now)) != FG_OK)
            die("submit", rc);
        if ((rc = fg_sched_pass(s, now, &d)) != FG_OK)
            die("pass", rc);
        t_incr[r] = now_s() - a;
        scanned += d.scanned;
        for (size_t i = 0; i < d.nstarts && nrun < caprun; i++) {
            run_id[nrun] = d.starts[i].job;
            run_att[nrun++] = d.starts[i].attempt;
        }
    }

    printf("core_nodes %d nodes\n", NODES);
    printf("core_pending_jobs %zu jobs\n", fg_sched_pending_count(s));
    printf("core_first_pass_starts %zu jobs\n", first_starts);
    printf("core_first_pass_empty %.3f ms\n", first * 1e3);
    printf("core_rebuild %.3f ms\n", median(t_rebuild, (size_t)reps) * 1e3);
    printf("core_full_pass %.3f ms\n", median(t_full, (size_t)reps) * 1e3);
    printf("core_incremental_pass %.1f us\n", median(t_incr, (size_t)reps) * 1e6);
    printf("core_incremental_scanned %.1f jobs\n", (double)scanned / (double)reps);
    printf("core_repetitions %ld runs\n", reps);

    fg_decisions_free(&d);
    fg_sched_free(s);
    free(run_id);
    free(run_att);
    free(t_full);
    free(t_rebuild);
    free(t_incr);
    return 0;
}
