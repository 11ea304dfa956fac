/*
 * test_estimate.c - the estimate library (fairgpu/estimate.h, src/estimate/): the
 * run-time model (history, fallbacks, conditioning, bounds) and the projection of the
 * queue (1-GPU and 8-GPU clusters, whole nodes, backfill, never fits, GPU type, nodes
 * down). Each test is a scenario, the expected answer, and why.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fairgpu/estimate.h"
#include "splitmix.h"

/* ------------------------------------------------------------------ run-time model */

static void record_n(fg_rt_model_t *m, const char *acct, const char *user, fg_time_t limit,
                     fg_time_t ran, int n)
{
    for (int i = 0; i < n; i++)
        fg_rt_record(m, acct, user, limit, ran);
}

/* The header's example: alice's jobs ran 0.4, 0.5 and 0.6 of their limits (two of each);
 * her job of a 2 h limit that has run 10 min has 50 min left (p50), 38..62 min. */
static void test_worked_example(void **state)
{
    (void)state;
    fg_rt_model_t *m = fg_rt_new();
    record_n(m, "ml", "alice", 1000, 400, 2);
    record_n(m, "ml", "alice", 1000, 500, 2);
    record_n(m, "ml", "alice", 1000, 600, 2);
    fg_rt_pred_t p;
    fg_rt_predict(m, "ml", "alice", 7200, 600, &p);
    assert_int_equal(p.source, FG_RT_USER);
    assert_int_equal(p.samples, 6);
    assert_int_equal(p.p10, 38 * 60);
    assert_int_equal(p.p50, 50 * 60);
    assert_int_equal(p.p90, 62 * 60);
    assert_string_equal(fg_rt_source_name(p.source), "user");

    /* and the projection: on one GPU, a pending job behind it starts at 50 min */
    fg_proj_node_t node = {.gpus = 1, .type = 0, .up = true, .free_at = {p.p50}};
    fg_proj_job_t job = {.gpus = 1, .type = -1, .run_s = 3600};
    fg_time_t start;
    fg_proj_run(&node, 1, &job, 1, 0, &start);
    assert_int_equal(start, 50 * 60);
    fg_rt_free(m);
}

/* With no history the answer is the rest of the limit; with a few of the user's own
 * jobs (fewer than the minimum) it is the account's, then everyone's. */
static void test_fallbacks(void **state)
{
    (void)state;
    fg_rt_model_t *m = fg_rt_new();
    fg_rt_pred_t p;
    fg_rt_predict(m, "ml", "bob", 1000, 100, &p);
    assert_int_equal(p.source, FG_RT_LIMIT);
    assert_int_equal(p.samples, 0);
    assert_int_equal(p.p10, 900);
    assert_int_equal(p.p90, 900);

    record_n(m, "ops", "carol", 1000, 100, 5); /* everyone's: 0.1 */
    fg_rt_predict(m, "ml", "bob", 1000, 0, &p);
    assert_int_equal(p.source, FG_RT_ALL);
    assert_int_equal(p.p50, 100);

    record_n(m, "ml", "dave", 1000, 300, 5); /* the account's: 0.3 */
    fg_rt_predict(m, "ml", "bob", 1000, 0, &p);
    assert_int_equal(p.source, FG_RT_ACCOUNT);
    assert_int_equal(p.p50, 300);

    record_n(m, "ml", "bob", 1000, 800, 4); /* 4 of his own: not enough */
    fg_rt_predict(m, "ml", "bob", 1000, 0, &p);
    assert_int_equal(p.source, FG_RT_ACCOUNT);
    fg_rt_record(m, "ml", "bob", 1000, 800); /* the 5th */
    fg_rt_predict(m, "ml", "bob", 2000, 0, &p);
    assert_int_equal(p.source, FG_RT_USER);
    assert_int_equal(p.p50, 1600); /* 0.8 of this job's limit */

    /* no account, no user: everyone's */
    fg_rt_predict(m, NULL, NULL, 1000, 0, &p);
    assert_int_equal(p.source, FG_RT_ALL);
    /* a bad record changes nothing */
    fg_rt_record(m, "ml", "erin", 0, 10);
    fg_rt_predict(m, "ml", "erin", 1000, 0, &p);
    assert_int_equal(p.source, FG_RT_ACCOUNT);
    fg_rt_free(m);
}

/* A job that has run longer than most of its user's jobs: only the longer ones count. */
static void test_conditioning(void **state)
{
    (void)state;
    fg_rt_model_t *m = fg_rt_new();
    record_n(m, "a", "u", 100, 10, 20); /* most ran 0.1 */
    record_n(m, "a", "u", 100, 90, 6);  /* some ran 0.9 */
    fg_rt_pred_t p;
    fg_rt_predict(m, "a", "u", 1000, 0, &p);
    assert_int_equal(p.p50, 100);
    assert_int_equal(p.samples, 26);
    /* it ran 200 s of 1000: the 0.1 jobs would have ended; 6 entries of 0.9 remain */
    fg_rt_predict(m, "a", "u", 1000, 200, &p);
    assert_int_equal(p.source, FG_RT_USER);
    assert_int_equal(p.samples, 6);
    assert_int_equal(p.p50, 700);
    /* it ran exactly 0.9: nothing of the user's history ran longer (strictly) */
    fg_rt_predict(m, "a", "u", 1000, 900, &p);
    assert_int_not_equal(p.source, FG_RT_USER);
    assert_int_equal(p.source, FG_RT_LIMIT); /* and nobody else's either */
    assert_int_equal(p.p50, 100);
    fg_rt_free(m);
}

/* The window: the user's last 50 jobs count, older ones are dropped. */
static void test_window_forgets(void **state)
{
    (void)state;
    fg_rt_model_t *m = fg_rt_new();
    record_n(m, "a", "u", 100, 90, 50);
    record_n(m, "a", "u", 100, 20, 50);
    fg_rt_pred_t p;
    fg_rt_predict(m, "a", "u", 100, 0, &p);
    assert_int_equal(p.samples, 50);
    assert_int_equal(p.p90, 20);
    fg_rt_free(m);
}

/* Random histories and questions: p10 <= p50 <= p90, each in 1 .. limit - ran. */
static void test_bounds(void **state)
{
    (void)state;
    fg_rt_model_t *m = fg_rt_new();
    uint64_t x = 42;
    static const char *users[] = {"u0", "u1", "u2", "u3"};
    for (int it = 0; it < 20000; it++) {
        const fg_time_t limit = 1 + (fg_time_t)(rng_next(&x) % 100000);
        if (rng_next(&x) % 3 == 0) {
            const fg_time_t ran = (fg_time_t)(rng_next(&x) % (uint64_t)(2 * limit)) - 5;
            fg_rt_record(m, "a", users[rng_next(&x) % 4], limit, ran);
        }
        const fg_time_t ran = (fg_time_t)(rng_next(&x) % (uint64_t)(limit + 10));
        fg_rt_pred_t p;
        fg_rt_predict(m, "a", users[rng_next(&x) % 4], limit, ran, &p);
        const fg_time_t left = limit - ran < 1 ? 1 : limit - ran;
        assert_true(1 <= p.p10);
        assert_true(p.p10 <= p.p50);
        assert_true(p.p50 <= p.p90);
        assert_true(p.p90 <= left);
        assert_true(p.source == FG_RT_LIMIT ? p.samples == 0 : p.samples >= 5);
    }
    fg_rt_free(m);
}

/* ------------------------------------------------------------------ projection */

static fg_proj_node_t node_of(int32_t gpus, int32_t type, fg_time_t free_at)
{
    fg_proj_node_t n = {.gpus = gpus, .type = type, .up = true};
    for (int32_t i = 0; i < gpus; i++)
        n.free_at[i] = free_at;
    return n;
}

/* One GPU: jobs one after the other, in plan order. */
static void test_projection_one_gpu(void **state)
{
    (void)state;
    fg_proj_node_t n = node_of(1, 0, 50);
    fg_proj_job_t jobs[3] = {{1, -1, 100, 0}, {1, -1, 10, 0}, {1, 0, 5, 0}};
    fg_time_t start[3];
    fg_proj_run(&n, 1, jobs, 3, 0, start);
    assert_int_equal(start[0], 50);
    assert_int_equal(start[1], 150);
    assert_int_equal(start[2], 160);
    assert_int_equal(n.free_at[0], 165);

    /* runs as long as the type allows do not wrap: the next job starts at the latest
     * time below FG_TIME_NEVER */
    fg_proj_job_t huge[2] = {{1, -1, INT64_MAX - 10, 0}, {1, -1, 10, 0}};
    fg_proj_run(&n, 1, huge, 2, 0, start);
    assert_int_equal(start[0], 165);
    assert_int_equal(start[1], FG_TIME_NEVER - 1);
}

/* The banner's example: 8 GPUs, 0-3 busy until 100. J (8) at 100, C (4, 30) backfills
 * at 0 in the gap J leaves, D (4, 200) fits no gap: after J. */
static void test_projection_backfill(void **state)
{
    (void)state;
    fg_proj_node_t n = node_of(8, 0, 0);
    for (int i = 0; i < 4; i++)
        n.free_at[i] = 100;
    fg_proj_job_t jobs[4] = {{8, -1, 50, 0}, {4, -1, 30, 0}, {4, -1, 200, 0}, {4, -1, 70, 0}};
    fg_time_t start[4];
    fg_proj_run(&n, 1, jobs, 4, 0, start);
    assert_int_equal(start[0], 100);
    assert_int_equal(start[1], 0);
    assert_int_equal(start[2], 150);
    assert_int_equal(start[3], 30); /* the rest of the gap, [30, 100), holds 70 */
}

/* 8-GPU nodes: small jobs start now where GPUs are free, and pack first fit. */
static void test_projection_8gpu(void **state)
{
    (void)state;
    fg_proj_node_t n[2] = {node_of(8, 0, 0), node_of(8, 0, 0)};
    for (int i = 0; i < 6; i++)
        n[0].free_at[i] = 300;
    fg_proj_job_t jobs[4] = {{2, -1, 100, 0}, {4, -1, 100, 0}, {8, -1, 10, 0}, {1, -1, 10, 0}};
    fg_time_t start[4];
    fg_proj_run(n, 2, jobs, 4, 0, start);
    assert_int_equal(start[0], 0); /* n0's two free GPUs */
    assert_int_equal(start[1], 0); /* on n1 */
    /* 8 GPUs: n1 whole at 100, n0 at 300 */
    assert_int_equal(start[2], 100);
    /* 1 GPU: n1's GPUs 4-7 are idle over [0, 100) in J's gap */
    assert_int_equal(start[3], 0);
}

/* Whole nodes: a 16-GPU job takes the two nodes that become whole soonest. */
static void test_projection_multi_node(void **state)
{
    (void)state;
    fg_proj_node_t n[3] = {node_of(8, 0, 500), node_of(8, 0, 100), node_of(8, 0, 200)};
    n[1].free_at[3] = 250; /* n1 whole at 250 */
    fg_proj_job_t jobs[3] = {{16, -1, 1000, 0}, {8, -1, 10, 0}, {24, -1, 10, 0}};
    fg_time_t start[3];
    fg_proj_run(n, 3, jobs, 3, 0, start);
    assert_int_equal(start[0], 250); /* n2 (200) and n1 (250) */
    /* 8 GPUs for 10 s: n2's GPUs are all idle over [200, 250) (the 16-GPU job's gap) */
    assert_int_equal(start[1], 200);
    assert_int_equal(start[2], 1250); /* all three */
    assert_int_equal(n[0].free_at[0], 1260);
    assert_int_equal(n[2].free_at[7], 1260);
}

/* A job of a type no node has, larger than any node, or of a bad size never starts,
 * and changes nothing for the jobs after it. */
static void test_projection_never_fits_and_type(void **state)
{
    (void)state;
    fg_proj_node_t n[2] = {node_of(4, 0, 0), node_of(8, 1, 0)};
    fg_proj_job_t jobs[6] = {{1, 2, 10, 0}, {16, -1, 10, 0}, {12, -1, 10, 0},
                             {8, 0, 10, 0}, {4, 1, 10, 0},   {1, 0, 10, 0}};
    fg_time_t start[6];
    fg_proj_run(n, 2, jobs, 6, 0, start);
    assert_int_equal(start[0], FG_TIME_NEVER); /* type 2: none */
    assert_int_equal(start[1], FG_TIME_NEVER); /* 2 whole nodes of 8: one */
    assert_int_equal(start[2], FG_TIME_NEVER); /* 12: not a multiple of 8 */
    assert_int_equal(start[3], FG_TIME_NEVER); /* 8 of type 0: n0 has 4 */
    assert_int_equal(start[4], 0);             /* type 1: n1 */
    assert_int_equal(start[5], 0);             /* type 0: n0 */
    assert_int_equal(n[0].free_at[0], 10);
    assert_int_equal(n[0].free_at[1], 0);
}

/* Down nodes hold nothing; not_before delays a job (backoff). */
static void test_projection_down_and_not_before(void **state)
{
    (void)state;
    fg_proj_node_t n[2] = {node_of(8, 0, 0), node_of(8, 0, 0)};
    n[0].up = false;
    fg_proj_job_t jobs[3] = {{8, -1, 100, 0}, {8, -1, 100, 0}, {16, -1, 1, 0}};
    fg_time_t start[3];
    fg_proj_run(n, 2, jobs, 3, 10, start);
    assert_int_equal(start[0], 10);
    assert_int_equal(start[1], 110);
    assert_int_equal(start[2], FG_TIME_NEVER);
    n[0].up = n[1].up = false;
    fg_proj_job_t one = {1, -1, 5, 0};
    fg_proj_run(n, 2, &one, 1, 10, start);
    assert_int_equal(start[0], FG_TIME_NEVER);

    fg_proj_node_t m = node_of(2, 0, 0);
    fg_proj_job_t late[2] = {{1, -1, 5, 40}, {1, -1, 5, 0}};
    fg_proj_run(&m, 1, late, 2, 10, start);
    assert_int_equal(start[0], 40);
    assert_int_equal(start[1], 10);
}

/* Random queues on random clusters: no job starts before now or its not_before, and at
 * no time are more GPUs of a node busy than it has (a sweep over the placed runs). */
static void test_projection_random_consistency(void **state)
{
    (void)state;
    uint64_t x = 7;
    for (int it = 0; it < 300; it++) {
        fg_proj_node_t n[6];
        const int32_t nn = 1 + (int32_t)(rng_next(&x) % 6);
        for (int32_t i = 0; i < nn; i++) {
            n[i] = node_of(rng_next(&x) % 2 ? 8 : 4, 0, 0);
            for (int32_t g = 0; g < n[i].gpus; g++)
                n[i].free_at[g] = (fg_time_t)(rng_next(&x) % 200);
        }
        fg_proj_job_t jobs[40];
        fg_time_t start[40];
        static const int32_t sizes[] = {1, 1, 2, 4, 8, 16};
        for (int q = 0; q < 40; q++)
            jobs[q] =
                (fg_proj_job_t){sizes[rng_next(&x) % 6], -1, 1 + (fg_time_t)(rng_next(&x) % 300),
                                (fg_time_t)(rng_next(&x) % 100)};
        const fg_time_t now = 20;
        fg_proj_node_t before[6];
        memcpy(before, n, sizeof n);
        fg_proj_run(n, nn, jobs, 40, now, start);
        int32_t total = 0, whole = 0;
        for (int32_t i = 0; i < nn; i++) {
            total += n[i].gpus;
            whole += n[i].gpus == 8;
        }
        int32_t busy_max = 0;
        for (fg_time_t t = now; t < 20000; t += 7) {
            int32_t busy = 0; /* GPUs of running jobs + GPU-count of projected jobs */
            for (int32_t i = 0; i < nn; i++)
                for (int32_t g = 0; g < before[i].gpus; g++)
                    busy += before[i].free_at[g] > t;
            for (int q = 0; q < 40; q++)
                if (start[q] != FG_TIME_NEVER && start[q] <= t && t < start[q] + jobs[q].run_s)
                    busy += jobs[q].gpus;
            if (busy > busy_max)
                busy_max = busy;
        }
        assert_true(busy_max <= total);
        for (int q = 0; q < 40; q++) {
            if (start[q] == FG_TIME_NEVER) {
                assert_true(jobs[q].gpus / 8 > whole); /* 8 or 16 GPUs, too few 8-GPU nodes */
                continue;
            }
            assert_true(start[q] >= now && start[q] >= jobs[q].not_before);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worked_example),
        cmocka_unit_test(test_fallbacks),
        cmocka_unit_test(test_conditioning),
        cmocka_unit_test(test_window_forgets),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_projection_one_gpu),
        cmocka_unit_test(test_projection_backfill),
        cmocka_unit_test(test_projection_8gpu),
        cmocka_unit_test(test_projection_multi_node),
        cmocka_unit_test(test_projection_never_fits_and_type),
        cmocka_unit_test(test_projection_down_and_not_before),
        cmocka_unit_test(test_projection_random_consistency),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
