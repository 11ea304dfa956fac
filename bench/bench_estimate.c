/*
 * bench_estimate.c - what the estimate library (fairgpu/estimate.h) costs.
 *
 * The model: 1,000 users in 50 accounts, each with a full history (50 jobs per user) of
 * ratios ran/limit. Measured:
 *   estimate_predict_rate   fg_rt_predict calls per second, half of them for running
 *                           jobs (ran > 0, conditioned), half for pending ones
 *   estimate_proj_10k_500   fg_proj_run of 10,000 pending jobs (1/2/4/8/16 GPUs, one in
 *                           ten of a second GPU type) on 500 nodes x 8 GPUs that are
 *                           busy for random times: wall ms, median of the repetitions
 *   estimate_proj_..._cpu   the same in this thread's CPU time
 * Each line is `name value unit`.
 *
 * Usage: bench_estimate [repetitions]   (default 5)
 * Build the release preset: cmake --preset release && cmake --build --preset release
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fairgpu/estimate.h"

#define USERS    1000
#define ACCOUNTS 50
#define NODES    500
#define JOBS     10000
#define PREDICTS 2000000

static uint64_t rng_next(uint64_t *x) /* splitmix64 */
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
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

static char users[USERS][16], accounts[ACCOUNTS][16];

static fg_rt_model_t *model_make(uint64_t *x)
{
    fg_rt_model_t *m = fg_rt_new();
    for (int i = 0; i < USERS; i++)
        snprintf(users[i], sizeof users[i], "u%d", i);
    for (int i = 0; i < ACCOUNTS; i++)
        snprintf(accounts[i], sizeof accounts[i], "a%d", i);
    for (int k = 0; k < 50 * USERS; k++) {
        const int u = (int)(rng_next(x) % USERS);
        const fg_time_t limit = 600 + (fg_time_t)(rng_next(x) % 86400);
        fg_rt_record(m, accounts[u % ACCOUNTS], users[u], limit,
                     (fg_time_t)(rng_next(x) % (uint64_t)limit));
    }
    return m;
}

static void bench_predict(const fg_rt_model_t *m, uint64_t *x)
{
    int64_t sink = 0;
    const double t = clock_s(CLOCK_MONOTONIC);
    for (int k = 0; k < PREDICTS; k++) {
        const int u = (int)(rng_next(x) % USERS);
        const fg_time_t limit = 3600;
        const fg_time_t ran = k % 2 ? (fg_time_t)(rng_next(x) % 3600) : 0;
        fg_rt_pred_t p;
        fg_rt_predict(m, accounts[u % ACCOUNTS], users[u], limit, ran, &p);
        sink += p.p50;
    }
    const double dt = clock_s(CLOCK_MONOTONIC) - t;
    printf("estimate_predict_rate %.0f calls/s\n", PREDICTS / dt);
    if (sink == 42) /* keeps the loop */
        printf("#\n");
}

static void bench_projection(int reps, uint64_t *x)
{
    static fg_proj_node_t base[NODES], nodes[NODES];
    static fg_proj_job_t jobs[JOBS];
    static fg_time_t start[JOBS];
    static const int32_t sizes[] = {1, 1, 1, 2, 4, 8, 8, 16};
    for (int n = 0; n < NODES; n++) {
        base[n] = (fg_proj_node_t){.gpus = 8, .type = n % 10 == 0, .up = true};
        for (int g = 0; g < 8; g++)
            base[n].free_at[g] = (fg_time_t)(rng_next(x) % 86400);
    }
    for (int q = 0; q < JOBS; q++)
        jobs[q] = (fg_proj_job_t){.gpus = sizes[rng_next(x) % 8],
                                  .type = rng_next(x) % 10 == 0 ? 1 : -1,
                                  .run_s = 60 + (fg_time_t)(rng_next(x) % 36000)};
    double *wall = calloc((size_t)reps, sizeof *wall), *cpu = calloc((size_t)reps, sizeof *cpu);
    for (int r = 0; r < reps; r++) {
        memcpy(nodes, base, sizeof nodes);
        const double w = clock_s(CLOCK_MONOTONIC), c = clock_s(CLOCK_THREAD_CPUTIME_ID);
        fg_proj_run(nodes, NODES, jobs, JOBS, 0, start);
        wall[r] = clock_s(CLOCK_MONOTONIC) - w;
        cpu[r] = clock_s(CLOCK_THREAD_CPUTIME_ID) - c;
    }
    printf("estimate_proj_10k_500 %.2f ms\n", median(wall, (size_t)reps) * 1e3);
    printf("estimate_proj_10k_500_cpu %.2f ms\n", median(cpu, (size_t)reps) * 1e3);
    free(wall);
    free(cpu);
}

int main(int argc, char **argv)
{
    int reps = 5;
    if (argc > 1) {
        char *end;
        const long v = strtol(argv[1], &end, 10);
        if (*end || v < 1 || v > 1000) {
            fprintf(stderr, "usage: bench_estimate [repetitions 1..1000]\n");
            return 2;
        }
        reps = (int)v;
    }
    uint64_t x = 1;
    fg_rt_model_t *m = model_make(&x);
    bench_predict(m, &x);
    fg_rt_free(m);
    bench_projection(reps, &x);
    return 0;
}
