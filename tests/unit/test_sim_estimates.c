/*
 * test_sim_estimates.c - the replay's start estimates at submission (--estimates
 * history, src/sim/histest.c), their accuracy report (src/sim/estacc.c) and the rounded
 * time-limit model (src/sim/tlimit.c).
 *
 * The main scenario: users whose jobs run a stable fraction of their limits (here a
 * quarter: limit = 4 x duration) on a contended cluster. The core's estimate takes
 * every running job to use its whole limit, so it is late by about three quarters of
 * the runs ahead; the history learns the quarter and must be at least twice as close
 * (median), and the replay's decisions must be exactly those without it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sim/estacc.h"
#include "sim/sim.h"
#include "sim/tlimit.h"
#include "splitmix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The estacc.c banner's example: three jobs that waited. */
static void test_accuracy_worked_example(void **state)
{
    (void)state;
    fg_est_rec_t r[4] = {
        {.submit = 0,
         .start = 300,
         .gpus = 1,
         .waited = true,
         .limit_est = 1000,
         .hist = {0, 400, 500}},
        {.submit = 0,
         .start = 1200,
         .gpus = 2,
         .waited = true,
         .limit_est = 3600,
         .hist = {900, 1000, 1300}},
        {.submit = 0,
         .start = 30000,
         .gpus = 16,
         .waited = true,
         .limit_est = 20000,
         .hist = {24000, 25000, 26000}},
        {.submit = 5, .start = 5, .gpus = 1, .waited = false, .limit_est = 5, .hist = {5, 5, 5}},
    };
    fg_estacc_t a;
    fg_estacc_compute(r, 4, &a);
    assert_int_equal(a.jobs, 4);
    assert_int_equal(a.at_once, 1);
    assert_int_equal(a.waited, 3);
    assert_int_equal(a.all.jobs, 3);
    assert_int_equal(a.all.limit.p50, 2400);
    assert_int_equal(a.all.limit.p90, 10000);
    assert_int_equal(a.all.history.p50, 200);
    assert_int_equal(a.all.history.p90, 5000);
    assert_int_equal(a.all.covered, 2);
    assert_int_equal(a.by_horizon[0].jobs, 1);
    assert_int_equal(a.by_horizon[1].jobs, 1);
    assert_int_equal(a.by_horizon[2].jobs, 0);
    assert_int_equal(a.by_horizon[3].jobs, 1);
    assert_int_equal(a.by_size[0].jobs, 1);
    assert_int_equal(a.by_size[1].jobs, 1);
    assert_int_equal(a.by_size[3].history.p50, 5000);
    /* a job without a core estimate is left out of the comparison, not of hist_all */
    r[0].limit_est = -1;
    fg_estacc_compute(r, 4, &a);
    assert_int_equal(a.no_limit, 1);
    assert_int_equal(a.all.jobs, 2);
    assert_int_equal(a.hist_all.jobs, 3);
}

/* The rounded model: a usual value at least the duration, the same for the same inputs,
 * and users' factors spread around 2.5. */
static void test_rounded_limits(void **state)
{
    (void)state;
    static const int64_t steps[] = {1800,  3600,  7200,   14400,  28800,
                                    43200, 86400, 172800, 259200, 604800};
    uint64_t x = 3;
    for (int k = 0; k < 5000; k++) {
        const int64_t d = rnd(&x, 1, 30 * 86400);
        const int32_t u = (int32_t)rnd(&x, 0, 100);
        const int64_t lim = fg_tlimit_rounded(7, u, (uint64_t)k, d);
        assert_true(lim >= d);
        bool usual = lim % 604800 == 0;
        for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
            usual |= lim == steps[i];
        assert_true(usual);
        assert_int_equal(lim, fg_tlimit_rounded(7, u, (uint64_t)k, d));
    }
    int below = 0, differ = 0;
    for (int32_t u = 0; u < 1000; u++) {
        const double f = fg_tlimit_user_factor(1, u);
        assert_true(f >= 1.0);
        below += f < 2.5;
        differ += f != fg_tlimit_user_factor(2, u);
    }
    assert_in_range(below, 400, 600); /* the median is 2.5 */
    assert_true(differ > 990);        /* the seed matters */
    assert_int_equal(fg_tlimit_parse("rounded"), FG_TLIMIT_ROUNDED);
    assert_int_equal(fg_tlimit_parse("factor"), FG_TLIMIT_FACTOR);
    assert_int_equal(fg_tlimit_parse("round"), -1);
}

/* A contended synthetic trace: 6 users, jobs of 1, 2, 4 and 8 GPUs (2.7 on average) of
 * 5 to 60 min, one every 400 s on average, on 2 nodes of 8 GPUs: an offered load of
 * 2.7 x 1950 / 400 = 13 GPUs, 0.83 of the cluster (bursts make queues). */
static char *synthetic_trace(size_t njobs)
{
    const size_t cap = 64 * (njobs + 1);
    char *s = malloc(cap);
    assert_non_null(s);
    size_t len = (size_t)snprintf(s, cap, "job_id,user,submit_time_s,num_gpus,duration_s\n");
    static const int32_t sizes[] = {1, 1, 1, 2, 2, 4, 8};
    uint64_t x = 11;
    int64_t t = 0;
    for (size_t j = 0; j < njobs; j++) {
        t += rnd(&x, 0, 800);
        len +=
            (size_t)snprintf(s + len, cap - len, "j%zu,u%d,%lld,%d,%lld\n", j, (int)rnd(&x, 0, 5),
                             (long long)t, sizes[rnd(&x, 0, 6)], (long long)rnd(&x, 300, 3600));
    }
    return s;
}

static void run_sim(const fg_trace_t *t, fg_sim_opts_t *o, fg_sim_result_t *r, fg_jobrec_t **recs)
{
    char err[256];
    if (fg_sim_run_recs(t, o, r, recs, err, sizeof err) != 0)
        fail_msg("run: %s", err);
}

static void opts_for(fg_sim_opts_t *o, fg_sim_nodes_t *g)
{
    fg_sim_opts_default(o);
    g->count = 2;
    g->gpus = 8;
    snprintf(g->gpu_type, sizeof g->gpu_type, "gpu");
    o->groups = g;
    o->ngroups = 1;
    o->time_limit_factor = 4; /* every job runs a quarter of its limit */
}

static void test_history_beats_limit_on_stable_fractions(void **state)
{
    (void)state;
    char *csv = synthetic_trace(1500);
    fg_trace_t t;
    char err[256];
    if (fg_trace_parse("synthetic.csv", csv, strlen(csv), NULL, &t, err, sizeof err) != 0)
        fail_msg("parse: %s", err);
    fg_sim_opts_t o;
    fg_sim_nodes_t g;
    opts_for(&o, &g);
    fg_sim_result_t plain, hist;
    fg_jobrec_t *rp, *rh;
    run_sim(&t, &o, &plain, &rp);
    o.estimates_history = true;
    run_sim(&t, &o, &hist, &rh);
    assert_false(plain.has_estacc);
    assert_true(hist.has_estacc);
    /* the same decisions, job by job */
    for (size_t i = 0; i < t.njobs; i++) {
        assert_int_equal(rp[i].start, rh[i].start);
        assert_int_equal(rp[i].end, rh[i].end);
        assert_int_equal(rp[i].estimate, rh[i].estimate);
    }
    const fg_estacc_t *a = &hist.estacc;
    printf("stable quarter: %lld waited, %lld compared: limit p50 %lld p90 %lld, history p50 "
           "%lld p90 %lld, coverage %.2f\n",
           (long long)a->waited, (long long)a->all.jobs, (long long)a->all.limit.p50,
           (long long)a->all.limit.p90, (long long)a->all.history.p50,
           (long long)a->all.history.p90, (double)a->all.covered / (double)a->all.jobs);
    assert_true(a->all.jobs >= 200);
    assert_true(2 * a->all.history.p50 <= a->all.limit.p50);
    assert_true(a->all.history.p90 < a->all.limit.p90);
    char *js = fg_sim_result_json(&hist);
    assert_non_null(strstr(js, "\"estimates\":{"));
    assert_non_null(strstr(js, "\"horizon\":\"10m-1h\""));
    free(js);
    js = fg_sim_result_json(&plain);
    assert_null(strstr(js, "\"estimates\""));
    assert_null(strstr(js, "time_limit_model"));
    free(js);
    fg_sim_recs_free(rp, &t);
    fg_sim_recs_free(rh, &t);
    fg_trace_free(&t);
    free(csv);
}

/* The same trace with rounded limits: the history still learns each user's centre. */
static void test_history_with_rounded_limits(void **state)
{
    (void)state;
    char *csv = synthetic_trace(1500);
    fg_trace_t t;
    char err[256];
    if (fg_trace_parse("synthetic.csv", csv, strlen(csv), NULL, &t, err, sizeof err) != 0)
        fail_msg("parse: %s", err);
    fg_sim_opts_t o;
    fg_sim_nodes_t g;
    opts_for(&o, &g);
    o.time_limit_model = FG_TLIMIT_ROUNDED;
    o.estimates_history = true;
    fg_sim_result_t r;
    run_sim(&t, &o, &r, NULL);
    const fg_estacc_t *a = &r.estacc;
    printf("rounded: %lld compared: limit p50 %lld p90 %lld, history p50 %lld p90 %lld, "
           "coverage %.2f\n",
           (long long)a->all.jobs, (long long)a->all.limit.p50, (long long)a->all.limit.p90,
           (long long)a->all.history.p50, (long long)a->all.history.p90,
           (double)a->all.covered / (double)a->all.jobs);
    assert_true(a->all.jobs >= 200);
    assert_true(a->all.history.p50 < a->all.limit.p50);
    char *js = fg_sim_result_json(&r);
    assert_non_null(strstr(js, "\"time_limit_model\":\"rounded\""));
    free(js);
    fg_trace_free(&t);
    free(csv);
}

/* The preemption rule: a 10-hour job of A holds the only node; B's 1-GPU job arrives
 * after 55 min, while A's job is not yet a long runner (quantum 1 h), so it waits. The
 * core's estimate is the end of A's limit (20 h); under fair, B preempts A within
 * preempt_wait_s (A is a long runner by then), which the history estimate says (no
 * history at all here: without the rule it would say 20 h too). */
static void test_history_estimate_knows_preemption(void **state)
{
    (void)state;
    static const char csv[] = "job_id,user,submit_time_s,num_gpus,duration_s\n"
                              "a1,A,0,8,36000\n"
                              "b1,B,3300,1,100\n";
    fg_trace_t t;
    char err[256];
    if (fg_trace_parse("preempt.csv", csv, strlen(csv), NULL, &t, err, sizeof err) != 0)
        fail_msg("parse: %s", err);
    fg_sim_opts_t o;
    fg_sim_nodes_t g;
    opts_for(&o, &g);
    g.count = 1;
    o.time_limit_factor = 2;
    o.estimates_history = true;
    fg_sim_result_t r;
    fg_jobrec_t *recs;
    run_sim(&t, &o, &r, &recs);
    const fg_estacc_t *a = &r.estacc;
    assert_int_equal(a->waited, 1);
    assert_int_equal(a->all.jobs, 1);
    assert_true(recs[1].start > 3300 && recs[1].start <= 3300 + o.cfg.preempt_wait_s);
    assert_true(a->all.history.p50 <= o.cfg.preempt_wait_s); /* estimate 3900 */
    assert_true(a->all.limit.p50 > 60000);                   /* estimate 72000 */
    /* without preemption B waits for A's end, and the estimate says the end of A's limit
     * (no history: the first job of the trace) */
    o.cfg.preemption = false;
    fg_sim_recs_free(recs, &t);
    run_sim(&t, &o, &r, &recs);
    assert_int_equal(recs[1].start, 36000);
    assert_int_equal(r.estacc.all.history.p50, 72000 - 36000);
    fg_sim_recs_free(recs, &t);
    fg_trace_free(&t);
}

/* Without backfill (fifo) the projection keeps the plan order: c1 (1 GPU) cannot start
 * in the 4 idle GPUs before b1 (8 GPUs), which waits for a1. No job has ended, so the
 * run times are the limits (2 x duration): b1 is estimated at 2000, c1 after it at 2200;
 * they start at 1000 and 1100. */
static void test_history_estimate_without_backfill(void **state)
{
    (void)state;
    static const char csv[] = "job_id,user,submit_time_s,num_gpus,duration_s\n"
                              "a1,A,0,4,1000\n"
                              "b1,B,10,8,100\n"
                              "c1,C,20,1,50\n";
    fg_trace_t t;
    char err[256];
    if (fg_trace_parse("fifo.csv", csv, strlen(csv), NULL, &t, err, sizeof err) != 0)
        fail_msg("parse: %s", err);
    fg_sim_opts_t o;
    fg_sim_nodes_t g;
    opts_for(&o, &g);
    g.count = 1;
    o.time_limit_factor = 2;
    o.estimates_history = true;
    o.cfg.policy = FG_POLICY_FIFO;
    fg_sim_result_t r;
    fg_jobrec_t *recs;
    run_sim(&t, &o, &r, &recs);
    assert_int_equal(recs[1].start, 1000);
    assert_int_equal(recs[2].start, 1100);
    assert_int_equal(r.estacc.waited, 2);
    assert_int_equal(r.estacc.by_size[2].history.p50, 2000 - 1000); /* b1 */
    assert_int_equal(r.estacc.by_size[0].history.p50, 2200 - 1100); /* c1, not 20 */
    fg_sim_recs_free(recs, &t);
    fg_trace_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accuracy_worked_example),
        cmocka_unit_test(test_rounded_limits),
        cmocka_unit_test(test_history_beats_limit_on_stable_fractions),
        cmocka_unit_test(test_history_with_rounded_limits),
        cmocka_unit_test(test_history_estimate_knows_preemption),
        cmocka_unit_test(test_history_estimate_without_backfill),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
