/*
 * test_sim.c - the replay through the real core: tiny hand-written traces with
 * hand-computed figures, preemption with checkpoint roll-back, conservation (every job
 * ends exactly once, GPU-time adds up), determinism, jobs that never fit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sim/sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define assert_near(a, b) assert_true(fabs((double)(a) - (double)(b)) < 1e-9)

static void load(const char *text, fg_trace_t *t)
{
    char err[256];
    if (fg_trace_parse("inline.csv", text, strlen(text), NULL, t, err, sizeof err) != 0)
        fail_msg("parse: %s", err);
}

static void opts_for(fg_sim_opts_t *o, fg_sim_nodes_t *g, int32_t nodes, fg_policy_t p)
{
    fg_sim_opts_default(o);
    o->cfg.policy = p;
    g->count = nodes;
    g->gpus = 8;
    snprintf(g->gpu_type, sizeof g->gpu_type, "gpu");
    o->groups = g;
    o->ngroups = 1;
}

static void run(const fg_trace_t *t, const fg_sim_opts_t *o, fg_sim_result_t *r, fg_jobrec_t **recs)
{
    char err[256];
    if (fg_sim_run_recs(t, o, r, recs, err, sizeof err) != 0)
        fail_msg("run: %s", err);
}

/*
 * One node of 8 GPUs; tenants A and B.
 *   j1 A submit 0,  8 GPUs, 100 s
 *   j2 B submit 10, 4 GPUs,  50 s
 *   j3 A submit 20, 4 GPUs,  30 s
 *   j4 B submit 30, 1 GPU,   10 s
 * fifo: j1 runs 0-100 while the rest wait (no room). At 100, in submit order, j2 and j3
 * (4 + 4 GPUs) start; j4 does not fit until j3 ends at 130; it runs 130-140; j2 ends
 * at 150. Every job ends, so the figures are those test_sim_metrics.c derives by hand:
 * makespan 150, GPU-seconds 1130, JCT 100/140/110/110, waits 0/90/80/100.
 * wfq gives the same schedule: at 100 all 8 GPUs are free and j2, j3 fit together
 * whatever the order; j4 (1 GPU) is behind j2 in B's queue, so B's turn after j2 goes
 * to A (smaller key) and j4 finds no room; nothing waits 600 s, so nothing is preempted.
 */
static const char example[] = "job_id,user,submit_time_s,num_gpus,duration_s\n"
                              "j1,A,0,8,100\n"
                              "j2,B,10,4,50\n"
                              "j3,A,20,4,30\n"
                              "j4,B,30,1,10\n";

static void check_example(fg_policy_t p)
{
    fg_trace_t t;
    load(example, &t);
    fg_sim_opts_t o;
    fg_sim_nodes_t g;
    opts_for(&o, &g, 1, p);
    fg_sim_result_t r;
    fg_jobrec_t *recs;
    run(&t, &o, &r, &recs);
    static const int64_t start[4] = {0, 100, 100, 130}, end[4] = {100, 150, 130, 140};
    for (int i = 0; i < 4; i++) {
        if (recs[i].start != start[i] || recs[i].end != end[i])
            fail_msg("%s: j%d ran %lld-%lld, expected %lld-%lld", fg_policy_name(p), i + 1,
                     (long long)recs[i].start, (long long)recs[i].end, (long long)start[i],
                     (long long)end[i]);
    }
    assert_int_equal(r.jobs, 4);
    assert_int_equal(r.makespan_s, 150);
    assert_int_equal(r.gpu_seconds, 1130);
    assert_near(r.utilization, 1130.0 / 1200.0);
    assert_near(r.jct_avg_s, 115);
    assert_int_equal(r.jct_p50_s, 110);
    assert_int_equal(r.jct_p99_s, 140);
    assert_near(r.wait_avg_s, 67.5);
    assert_int_equal(r.wait_p50_s, 80);
    assert_int_equal(r.wait_p50_by_size[0], 100);
    assert_int_equal(r.wait_p50_by_size[1], 80);
    assert_int_equal(r.wait_p50_by_size[2], 0);
    assert_false(r.has_size[3]);
    assert_int_equal(r.wait_max_s, 100);
    assert_int_equal(r.preemptions, 0);
    assert_int_equal(r.lost_gpu_seconds, 0);
    double xa = 920.0 / 560.0, xb = 210.0 / 570.0;
    assert_near(r.jain, (xa + xb) * (xa + xb) / (2 * (xa * xa + xb * xb)));
    assert_near(r.ftf_rho_avg, (100.0 / 190.0 + 140.0 / 50.0 + 110.0 / 30.0 + 11.0) / 4);
    assert_near(r.ftf_rho_max, 11.0);
    assert_int_equal(r.nodes, 1);
    assert_int_equal(r.gpus, 8);
    assert_string_equal(r.policy, fg_policy_name(p));
    if (p == FG_POLICY_FIFO) {
        /* Estimates at submission, from start + time limit (2 x duration): j1 starts at
         * once (0); j2 and j3 wait for j1's limit (200); j4 for j3's (200 + 60). Errors
         * |a - E|: 0, 100, 100, 130. */
        static const int64_t est[4] = {0, 200, 200, 260};
        for (int i = 0; i < 4; i++)
            assert_int_equal(recs[i].estimate, est[i]);
        assert_int_equal(r.estimate_jobs, 4);
        assert_int_equal(r.est_err_p50_s, 100);
        assert_int_equal(r.est_err_p90_s, 130);
        assert_int_equal(r.est_err_p50_by_size[0], 130);
        assert_int_equal(r.est_err_p50_by_size[1], 100);
        assert_int_equal(r.est_err_p50_by_size[2], 0);
        assert_false(r.has_est[3]);
    }
    fg_sim_recs_free(recs, &t);
    fg_trace_free(&t);
}

static void test_example_fifo(void **state)
{
    (void)state;
    check_example(FG_POLICY_FIFO);
}

static void test_example_wfq(void **state)
{
    (void)state;
    check_example(FG_POLICY_WFQ);
}

/*
 * Backfill: one node; j1 (A, 4 GPUs, 100 s, limit 200) runs from 0; j2 (B, 8 GPUs,
 * 50 s) arrives at 10 and cannot start: it is reserved the node at 200 (j1's start +
 * limit); j3 (A, 2 GPUs, 30 s, limit 60) arrives at 20: under wfq it backfills at once
 * (20 + 60 <= 200) and ends at 50; j2 starts when j1 ends at 100. fifo does not
 * backfill: j3 waits behind j2 and runs 150-180.
 */
static void test_backfill(void **state)
{
    (void)state;
    const char *text = "job_id,user,submit_time_s,num_gpus,duration_s\n"
                       "j1,A,0,4,100\n"
                       "j2,B,10,8,50\n"
                       "j3,A,20,2,30\n";
    fg_trace_t t;
    load(text, &t);
    fg_sim_opts_t o;
    fg_sim_nodes_t g;
    fg_sim_result_t r;
    fg_jobrec_t *recs;
    opts_for(&o, &g, 1, FG_POLICY_WFQ);
    run(&t, &o, &r, &recs);
    assert_int_equal(recs[2].start, 20);
    assert_int_equal(recs[1].start, 100);
    assert_int_equal(r.makespan_s, 150);
    fg_sim_recs_free(recs, &t);
    opts_for(&o, &g, 1, FG_POLICY_FIFO);
    run(&t, &o, &r, &recs);
    assert_int_equal(recs[1].start, 100);
    assert_int_equal(recs[2].start, 150);
    assert_int_equal(r.makespan_s, 180);
    fg_sim_recs_free(recs, &t);
    fg_trace_free(&t);
}

/*
 * Fair-share preemption with checkpoint roll-back: one node; A's job (8 GPUs, 10000 s)
 * runs from 0; B's job (1 GPU, 50 s) arrives at 100. B has waited preempt_wait (600 s)
 * by 700, but A's job is a long runner only at the quantum (3600 s): it is preempted at
 * 3600. With a checkpoint every 1000 s it loses 600 s of work (8 x 600 GPU-seconds)
 * and keeps 3000 s. B runs 3600-3650; A's job resumes at 3650 with 7000 s left.
 * Restart overhead 0 (the replay before the cost model): it ends at 10650; GPU-time run
 * 8 x 3600 + 50 + 8 x 7000 = 84850, preempt_cost_frac = 4800 / 84850.
 * Overhead 120 (the default): the resume first runs 120 s without progress (8 x 120 =
 * 960 restart GPU-seconds) and ends at 3650 + 120 + 7000 = 10770; GPU-time run
 * 8 x 3600 + 50 + 8 x 7120 = 85810, preempt_cost_frac = (4800 + 960) / 85810. The
 * decisions (who starts and is preempted when) are the same; only a's end moves.
 */
static void test_preemption_rollback(void **state)
{
    (void)state;
    const char *text = "job_id,user,submit_time_s,num_gpus,duration_s\n"
                       "a,A,0,8,10000\n"
                       "b,B,100,1,50\n";
    fg_trace_t t;
    load(text, &t);
    fg_sim_opts_t o;
    fg_sim_nodes_t g;
    opts_for(&o, &g, 1, FG_POLICY_WFQ);
    assert_int_equal(o.restart_overhead_s, 120); /* the default */
    o.checkpoint_interval_s = 1000;
    static const int64_t overhead[2] = {0, 120}, a_end[2] = {10650, 10770};
    static const int64_t restart[2] = {0, 960}, run_gpu_s[2] = {84850, 85810};
    for (int k = 0; k < 2; k++) {
        o.restart_overhead_s = overhead[k];
        fg_sim_result_t r;
        fg_jobrec_t *recs;
        run(&t, &o, &r, &recs);
        assert_int_equal(r.preemptions, 1);
        assert_int_equal(r.lost_gpu_seconds, 8 * 600);
        assert_int_equal(r.restart_gpu_seconds, restart[k]);
        assert_int_equal(r.restart_overhead_s, overhead[k]);
        assert_int_equal(recs[1].start, 3600);
        assert_int_equal(recs[1].end, 3650);
        assert_int_equal(recs[0].start, 0); /* first start */
        assert_int_equal(recs[0].end, a_end[k]);
        assert_int_equal(recs[0].attempts, 2);
        /* useful 8 x 10000 + 50, plus the lost 8 x 600, plus the overhead */
        assert_int_equal(r.gpu_seconds, 8 * 10000 + 50 + 8 * 600 + restart[k]);
        assert_int_equal(r.gpu_seconds, run_gpu_s[k]);
        assert_near(r.preempt_cost_frac, (4800.0 + (double)restart[k]) / (double)run_gpu_s[k]);
        assert_near(r.jct_avg_s, ((double)a_end[k] + 3550.0) / 2);
        assert_int_equal(r.makespan_s, a_end[k]);
        fg_sim_recs_free(recs, &t);
    }
    /* without preemption, B simply waits for A, and nothing is lost */
    o.restart_overhead_s = 120;
    o.cfg.preemption = false;
    fg_sim_result_t r;
    fg_jobrec_t *recs;
    run(&t, &o, &r, &recs);
    assert_int_equal(r.preemptions, 0);
    assert_int_equal(r.restart_gpu_seconds, 0);
    assert_near(r.preempt_cost_frac, 0);
    assert_int_equal(recs[1].start, 10000);
    fg_sim_recs_free(recs, &t);
    fg_trace_free(&t);
}

/*
 * A resumed attempt preempted again: the trace above plus B's job c (1 GPU, 50 s) at
 * 3700. a resumes at 3650; c has waited 600 s at 4300, and a's resumed attempt is a
 * possible victim once it has run min_run (600 s) and its checkpoint interval (1000 s):
 * at 4650, whatever the overhead (the core does not know it). c runs 4650-4700; a
 * resumes again at 4700. Only the run time past a resume's overhead is productive, and
 * its checkpoints count from the overhead's end (K = 1000):
 *   S = 0:    at 4650 a ran 1000 s, all productive: it keeps 1000 (a checkpoint at
 *             1000), loses 0; progress 4000; ends 4700 + 6000 = 10700. lost 4800,
 *             restart 0; run 8 x 3600 + 50 + 8 x 1000 + 50 + 8 x 6000 = 84900.
 *   S = 120:  at 4650: overhead 120, productive 880 < K: keeps 0, loses 880 (7040
 *             GPU-s); progress 3000; ends 4700 + 120 + 7000 = 11820. lost 4800 + 7040
 *             = 11840, restart 8 x (120 + 120) = 1920; run 8 x 3600 + 50 + 8 x 1000 +
 *             50 + 8 x 7120 = 93860 = 80100 useful + 11840 + 1920.
 *   S = 2000: at 4650 a is still in its overhead (1000 of 2000 s): nothing is lost, the
 *             1000 s cut short are restart time; ends 4700 + 2000 + 7000 = 13700. lost
 *             4800, restart 8 x (1000 + 2000) = 24000; run 80100 + 4800 + 24000 =
 *             108900.
 * JCT: a's end; b 3550; c 4700 - 3700 = 1000.
 */
static void test_preempted_resume(void **state)
{
    (void)state;
    const char *text = "job_id,user,submit_time_s,num_gpus,duration_s\n"
                       "a,A,0,8,10000\n"
                       "b,B,100,1,50\n"
                       "c,B,3700,1,50\n";
    fg_trace_t t;
    load(text, &t);
    fg_sim_opts_t o;
    fg_sim_nodes_t g;
    opts_for(&o, &g, 1, FG_POLICY_WFQ);
    o.checkpoint_interval_s = 1000;
    static const int64_t overhead[3] = {0, 120, 2000}, a_end[3] = {10700, 11820, 13700};
    static const int64_t lost[3] = {4800, 11840, 4800}, restart[3] = {0, 1920, 24000};
    static const int64_t run_gpu_s[3] = {84900, 93860, 108900};
    for (int k = 0; k < 3; k++) {
        o.restart_overhead_s = overhead[k];
        fg_sim_result_t r;
        fg_jobrec_t *recs;
        run(&t, &o, &r, &recs);
        assert_int_equal(r.preemptions, 2);
        assert_int_equal(recs[0].attempts, 3);
        assert_int_equal(recs[1].start, 3600);
        assert_int_equal(recs[2].start, 4650);
        assert_int_equal(recs[2].end, 4700);
        if (recs[0].end != a_end[k])
            fail_msg("S=%lld: a ended at %lld, expected %lld", (long long)overhead[k],
                     (long long)recs[0].end, (long long)a_end[k]);
        assert_int_equal(r.lost_gpu_seconds, lost[k]);
        assert_int_equal(r.restart_gpu_seconds, restart[k]);
        assert_int_equal(r.gpu_seconds, run_gpu_s[k]);
        assert_int_equal(r.gpu_seconds, 80100 + lost[k] + restart[k]);
        assert_near(r.preempt_cost_frac, (double)(lost[k] + restart[k]) / (double)run_gpu_s[k]);
        assert_near(r.jct_avg_s, ((double)a_end[k] + 3550.0 + 1000.0) / 3);
        assert_near(r.utilization, (double)run_gpu_s[k] / (8.0 * (double)a_end[k]));
        fg_sim_recs_free(recs, &t);
    }
    fg_trace_free(&t);
}

/* A deterministic synthetic trace: n jobs of 6 tenants, sizes 1/2/4/8/16/12 (12 is
 * rounded up), durations 1 s .. ~3 h, arrivals bunched so the queue is contended. */
static char *synthetic(int n)
{
    size_t cap = (size_t)n * 48 + 64, len = 0;
    char *s = malloc(cap);
    assert_non_null(s);
    len += (size_t)snprintf(s, cap, "job_id,user,submit_time_s,num_gpus,duration_s\n");
    uint64_t x = 88172645463325252ULL;
    int64_t t = 0;
    static const int sizes[8] = {1, 1, 1, 2, 4, 8, 16, 12};
    for (int i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        t += (int64_t)(x % 120);
        int gpus = sizes[(x >> 8) % 8];
        int64_t dur = 1 + (int64_t)((x >> 20) % 10800);
        len += (size_t)snprintf(s + len, cap - len, "j%d,t%d,%lld,%d,%lld\n", i,
                                (int)((x >> 40) % 6), (long long)t, gpus, (long long)dur);
    }
    return s;
}

/* Conservation: every job ends exactly once; with no preemption, run GPU-time equals
 * the sum of g*d; with preemption, it equals that plus the lost and the restart
 * GPU-seconds (restart 0 with overhead 0), and the extra attempts are the preemptions.
 * Checked for every policy, with overhead 120 and 0. */
static void test_conservation(void **state)
{
    (void)state;
    char *text = synthetic(3000);
    fg_trace_t t;
    load(text, &t);
    free(text);
    int64_t want = 0;
    for (size_t i = 0; i < t.njobs; i++)
        want += (int64_t)t.jobs[i].gpus * t.jobs[i].duration;
    for (int p = 0; p < FG_POLICY_COUNT; p++) {
        for (int pre = 0; pre < 3; pre++) {
            fg_sim_opts_t o;
            fg_sim_nodes_t g;
            opts_for(&o, &g, 6, (fg_policy_t)p);
            o.cfg.preemption = pre > 0;
            o.restart_overhead_s = pre == 2 ? 0 : 120;
            fg_sim_result_t r;
            fg_jobrec_t *recs;
            run(&t, &o, &r, &recs);
            assert_int_equal(r.jobs, (int64_t)t.njobs);
            int64_t attempts = 0, sum = 0;
            for (size_t i = 0; i < t.njobs; i++) {
                if (recs[i].ends != 1)
                    fail_msg("%s: job %zu ended %d times", fg_policy_name(p), i, recs[i].ends);
                assert_true(recs[i].start >= recs[i].submit);
                assert_true(recs[i].end >= recs[i].start + recs[i].duration);
                attempts += recs[i].attempts;
                sum += recs[i].gpu_seconds;
            }
            assert_int_equal(sum, r.gpu_seconds);
            assert_int_equal(attempts - (int64_t)t.njobs, r.preemptions);
            if (!pre)
                assert_int_equal(r.preemptions, 0);
            if (pre == 2 || !r.preemptions)
                assert_int_equal(r.restart_gpu_seconds, 0);
            assert_int_equal(r.gpu_seconds, want + r.lost_gpu_seconds + r.restart_gpu_seconds);
            assert_near(r.preempt_cost_frac, (double)(r.lost_gpu_seconds + r.restart_gpu_seconds) /
                                                 (double)r.gpu_seconds);
            assert_true(r.utilization > 0 && r.utilization <= 1.0);
            fg_sim_recs_free(recs, &t);
        }
    }
    fg_trace_free(&t);
}

/* Overhead 0 is the replay before the cost model: on the contended synthetic trace,
 * for every policy, no restart GPU-time and run GPU-time = sum g*d + lost, where every
 * preemption's lost work is the core's own lost_gpu_seconds (apply_preempt asserts it
 * when a preemption has no overhead, as here; the decisions and JCTs against the build
 * before are checked on the shared traces with `--restart-overhead 0`, docs/sim.md).
 * Without preemption there is no resume, so the overhead changes no byte. */
static void test_overhead_zero_is_free(void **state)
{
    (void)state;
    char *text = synthetic(3000);
    fg_trace_t t;
    load(text, &t);
    free(text);
    int64_t want = 0;
    for (size_t i = 0; i < t.njobs; i++)
        want += (int64_t)t.jobs[i].gpus * t.jobs[i].duration;
    for (int p = 0; p < FG_POLICY_COUNT; p++) {
        fg_sim_opts_t o;
        fg_sim_nodes_t g;
        opts_for(&o, &g, 6, (fg_policy_t)p);
        o.restart_overhead_s = 0;
        fg_sim_result_t r;
        run(&t, &o, &r, NULL);
        if (p == FG_POLICY_WFQ)
            assert_true(r.preemptions > 0);
        assert_int_equal(r.restart_gpu_seconds, 0);
        assert_int_equal(r.gpu_seconds, want + r.lost_gpu_seconds);
        o.cfg.preemption = false;
        fg_sim_result_t a, b;
        run(&t, &o, &a, NULL);
        o.restart_overhead_s = 120;
        run(&t, &o, &b, NULL);
        a.replay_seconds = b.replay_seconds = 0;
        a.restart_overhead_s = 120;
        char *ja = fg_sim_result_json(&a), *jb = fg_sim_result_json(&b);
        assert_string_equal(ja, jb);
        free(ja);
        free(jb);
    }
    fg_trace_free(&t);
}

/* Same input, same output bytes (the wall-clock field aside). */
static void test_determinism(void **state)
{
    (void)state;
    char *text = synthetic(2000);
    fg_trace_t t;
    load(text, &t);
    free(text);
    fg_sim_opts_t o;
    fg_sim_nodes_t g;
    opts_for(&o, &g, 5, FG_POLICY_WFQ);
    fg_sim_result_t a, b;
    run(&t, &o, &a, NULL);
    run(&t, &o, &b, NULL);
    a.replay_seconds = b.replay_seconds = 0;
    char *ja = fg_sim_result_json(&a), *jb = fg_sim_result_json(&b);
    assert_string_equal(ja, jb);
    free(ja);
    free(jb);
    fg_trace_free(&t);
}

/* A job bigger than the cluster is skipped and counted; the rest run. */
static void test_too_big(void **state)
{
    (void)state;
    const char *text = "job_id,user,submit_time_s,num_gpus,duration_s\n"
                       "a,A,0,16,10\n"
                       "b,A,5,8,10\n"
                       "c,B,6,12,10\n";
    fg_trace_t t;
    load(text, &t);
    assert_int_equal(t.rounded_up, 1);
    fg_sim_opts_t o;
    fg_sim_nodes_t g;
    opts_for(&o, &g, 1, FG_POLICY_WFQ);
    fg_sim_result_t r;
    run(&t, &o, &r, NULL);
    assert_int_equal(r.jobs, 1);
    assert_int_equal(r.skipped_too_big, 2);
    assert_int_equal(r.rounded_up, 1);
    assert_int_equal(r.makespan_s, 10);
    fg_trace_free(&t);
}

/*
 * Weights reach the core and the metrics: one node of 8 GPUs, tenants A and B each
 * submit 40 one-GPU jobs of 3600 s at t=0. With weights 3:1, wfq runs them 6:2 at a
 * time, which is exactly the weighted entitlement (6, 2): Jain ~1. Were the weights
 * ignored, the core would run 4:4 and Jain against the 3:1 entitlement would be
 * (4/6 + 4/2)^2 / (2 (4/6)^2 + 2 (4/2)^2) = 0.8.
 */
static void test_weights(void **state)
{
    (void)state;
    char text[4096];
    size_t len =
        (size_t)snprintf(text, sizeof text, "job_id,user,submit_time_s,num_gpus,duration_s\n");
    for (int i = 0; i < 80; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "j%d,%s,0,1,3600\n", i,
                                i % 2 ? "B" : "A");
    fg_trace_t t;
    load(text, &t);
    assert_string_equal(t.tenants[0], "A");
    double w[2] = {3, 1};
    fg_sim_opts_t o;
    fg_sim_nodes_t g;
    opts_for(&o, &g, 1, FG_POLICY_WFQ);
    o.weights = w;
    fg_sim_result_t r;
    fg_jobrec_t *recs;
    run(&t, &o, &r, &recs);
    assert_int_equal(r.jobs, 80);
    int a_at_0 = 0, b_at_0 = 0;
    for (size_t i = 0; i < t.njobs; i++)
        if (recs[i].start == 0)
            *(t.jobs[i].tenant == 0 ? &a_at_0 : &b_at_0) += 1;
    assert_int_equal(a_at_0, 6);
    assert_int_equal(b_at_0, 2);
    assert_true(r.jain > 0.99);
    fg_sim_recs_free(recs, &t);
    fg_trace_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_fifo),     cmocka_unit_test(test_example_wfq),
        cmocka_unit_test(test_backfill),         cmocka_unit_test(test_preemption_rollback),
        cmocka_unit_test(test_preempted_resume), cmocka_unit_test(test_overhead_zero_is_free),
        cmocka_unit_test(test_conservation),     cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_too_big),          cmocka_unit_test(test_weights),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
