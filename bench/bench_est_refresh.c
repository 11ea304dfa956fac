/*
 * bench_est_refresh.c - what the controller's history-based estimates add to a refresh
 * of the pending reasons (src/server/sched_project.c), with 10,000 pending jobs.
 *
 * The cluster: 500 nodes x 8 GPUs, every GPU running a 1-GPU job of one of 1,000 users
 * (50 accounts) that started at a random time in the last hour with a 2 h limit; the
 * model holds 50 ended jobs per user. Then 10,000 pending jobs of 1, 2, 4 or 8 GPUs.
 * Measured (median of the repetitions, this thread's CPU time: the machine is shared):
 *   est_project_10k_d32     srv__est_project: the plan order's first 32 jobs (the
 *                           default estimate_depth), 3 projections
 *   est_project_10k_d1000   the same with estimate_depth 1,000
 *   est_refresh_10k_d32     a whole refresh (srv__refresh_reasons: the core's reasons of
 *                           every pending job, its explanations, and the projection)
 * Each line is `name value unit`.
 *
 * Usage: bench_est_refresh [repetitions]   (default 5; build the release preset)
 */
#include "server/sched_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NODES   500
#define USERS   1000
#define ACCTS   50
#define PENDING 10000
#define NOW     1000000

static char users[USERS][16], accts[ACCTS][16];

static uint64_t rng(uint64_t *x) /* splitmix64 */
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The core: accounts, members, nodes, one running job per GPU, the pending queue. */
static fg_sched_t *make_core(int32_t depth, uint64_t *x)
{
    fg_config_t cfg;
    fg_config_default(&cfg);
    cfg.estimate_depth = depth;
    fg_sched_t *core = fg_sched_new(&cfg);
    for (int a = 0; a < ACCTS; a++) {
        snprintf(accts[a], sizeof accts[a], "a%d", a);
        fg_sched_account_set(core, accts[a], 1.0, -1);
    }
    for (int u = 0; u < USERS; u++) {
        snprintf(users[u], sizeof users[u], "u%d", u);
        fg_sched_member_set(core, accts[u % ACCTS], users[u], 1.0);
    }
    char name[32];
    uint64_t id = 1;
    for (int n = 0; n < NODES; n++) {
        snprintf(name, sizeof name, "n%d", n);
        int node = fg_sched_node_add(core, name, 8, "h100", FG_NODE_UP);
        for (int g = 0; g < 8; g++, id++) {
            int u = (int)(rng(x) % USERS);
            fg_job_spec_t sp = {.id = id,
                                .account = accts[u % ACCTS],
                                .user = users[u],
                                .gpus = 1,
                                .time_limit_s = 7200,
                                .prio = FG_PRIO_NORMAL,
                                .submit_time = NOW - 3600};
            fg_alloc_t al = {.node = node, .gpu_mask = UINT64_C(1) << g};
            fg_sched_restore_running(core, &sp, 1, 0, 0, NOW - (fg_time_t)(rng(x) % 3600), &al, 1,
                                     NOW);
        }
    }
    static const int32_t sizes[] = {1, 1, 2, 4, 8};
    for (int k = 0; k < PENDING; k++, id++) {
        int u = (int)(rng(x) % USERS);
        fg_job_spec_t sp = {.id = id,
                            .account = accts[u % ACCTS],
                            .user = users[u],
                            .gpus = sizes[rng(x) % 5],
                            .time_limit_s = 600 + (fg_time_t)(rng(x) % 36000),
                            .prio = FG_PRIO_NORMAL,
                            .submit_time = NOW - 60};
        fg_sched_submit(core, &sp, NOW);
    }
    return core;
}

static fg_rt_model_t *make_model(uint64_t *x)
{
    fg_rt_model_t *m = fg_rt_new();
    for (int k = 0; k < 50 * USERS; k++) {
        int u = k % USERS;
        fg_time_t limit = 600 + (fg_time_t)(rng(x) % 36000);
        fg_rt_record(m, accts[u % ACCTS], users[u], limit, (fg_time_t)(rng(x) % (uint64_t)limit));
    }
    return m;
}

/* The median wall time (ms) of reps calls of what (0: project, 1: refresh). */
static double measure(sctx_t *c, int reps, int what)
{
    double *t = calloc((size_t)reps, sizeof *t);
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        if (what == 0) {
            srv_proj_t *pr;
            size_t n = srv__est_project(c, NULL, &pr);
            if (n == 0)
                fprintf(stderr, "bench_est_refresh: nothing projected\n");
            free(pr);
        } else {
            srv__refresh_reasons(c);
        }
        t[r] = (now_s() - t0) * 1e3;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    double m = t[reps / 2];
    free(t);
    return m;
}

int main(int argc, char **argv)
{
    char *end = NULL;
    long reps = argc > 1 ? strtol(argv[1], &end, 10) : 5;
    if (reps < 1 || reps > 1000 || (end && *end)) {
        fprintf(stderr, "usage: bench_est_refresh [repetitions 1..1000]\n");
        return 2;
    }
    static srv_t s;
    pthread_mutex_init(&s.mu, NULL);
    static const int32_t depths[] = {32, 1000};
    for (int d = 0; d < 2; d++) {
        uint64_t x = 1;
        sctx_t c = {.s = &s, .now = NOW};
        c.core = make_core(depths[d], &x);
        c.rt = make_model(&x);
        fg_decisions_init(&c.d);
        fg_sched_pass(c.core, NOW, &c.d); /* the reasons and the core's estimates */
        printf("est_project_10k_d%d %.2f ms\n", depths[d], measure(&c, (int)reps, 0));
        if (d == 0)
            printf("est_refresh_10k_d32 %.2f ms\n", measure(&c, (int)reps, 1));
        fg_decisions_free(&c.d);
        fg_rt_free(c.rt);
        fg_est_scratch_free(c.est_ws);
        fg_sched_free(c.core);
    }
    return 0;
}
