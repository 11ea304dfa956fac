/*
 * test_estimate_queue.c - the queue estimate from the core (fg_est_queue,
 * src/estimate/queue.c), the one the controller and the simulator make: on a hand-made
 * core (one 8-GPU node, accounts "a" and "b") with job ids far apart, the projection
 * with backfill, the preemption rule, the in-order rule (fifo, backfill off), GPU
 * types, jobs that never fit, and one question per running job. Each test is a
 * scenario, the expected starts, and why.
 *
 * Every user's jobs ran 0.25 of their limits (five of them each), so a job of limit L
 * is predicted to run L / 4 in all (p10 = p50 = p90).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fairgpu/core.h"
#include "fairgpu/estimate.h"

/* Ids far apart, as the controller's are (never array indexes). */
#define R_ID 0xFFFF000000000001ull /* running, account a */
#define J_ID 0x0000010000000000ull /* pending, account b */
#define C_ID 0x7000000000000003ull /* pending, account b */

/* The test's records of its jobs (what the caller knows and the core does not). */
typedef struct rec {
    fg_job_id_t id;
    char account; /* 'a' (user u) or 'b' (user v) */
    int32_t gpus;
    fg_time_t limit_s;
    fg_time_t start;      /* running: since when; -1: pending */
    fg_time_t served_s;   /* run time of earlier attempts */
    const char *gpu_type; /* pending: the type asked */
} rec_t;

typedef struct world {
    fg_sched_t *s;
    fg_rt_model_t *m;
    rec_t recs[8];
    int nrecs;
    int calls[8]; /* fn calls per record */
} world_t;

static void job_fn(void *ctx, fg_job_id_t id, fg_time_t now, fg_est_job_t *out)
{
    world_t *w = ctx;
    for (int i = 0; i < w->nrecs; i++) {
        const rec_t *r = &w->recs[i];
        if (r->id != id)
            continue;
        w->calls[i]++;
        out->account = r->account == 'a' ? "a" : "b";
        out->user = r->account == 'a' ? "u" : "v";
        out->gpus = r->gpus;
        out->limit_s = r->limit_s;
        out->gpu_type = r->gpu_type;
        if (r->start >= 0) {
            out->ran_s = out->attempt_s = now - r->start;
            out->served_s = r->served_s + now - r->start;
        }
        return;
    }
    fail_msg("fn asked for an unknown job");
}

/* One 8-GPU a100 node; cfg's policy; every user's jobs ran 0.25 of their limits. */
static void world_init(world_t *w, fg_policy_t policy, bool preemption, bool backfill)
{
    memset(w, 0, sizeof *w);
    fg_config_t cfg;
    fg_config_default(&cfg); /* quantum_s 3600, preempt_wait_s 600, min_run_s 600 */
    cfg.policy = policy;
    cfg.preemption = preemption;
    cfg.backfill = backfill;
    w->s = fg_sched_new(&cfg);
    assert_non_null(w->s);
    assert_true(fg_sched_account_set(w->s, "a", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(w->s, "a", "u", 1.0) >= 0);
    assert_true(fg_sched_account_set(w->s, "b", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(w->s, "b", "v", 1.0) >= 0);
    assert_int_equal(fg_sched_node_add(w->s, "n0", 8, "a100", FG_NODE_UP), 0);
    w->m = fg_rt_new();
    for (int i = 0; i < 5; i++) {
        fg_rt_record(w->m, "a", "u", 1000, 250);
        fg_rt_record(w->m, "b", "v", 1000, 250);
    }
}

static void world_free(world_t *w)
{
    fg_sched_free(w->s);
    fg_rt_free(w->m);
}

/* Submits a job of the records (not started: no pass runs). */
static void submit(world_t *w, rec_t r, fg_time_t now)
{
    fg_job_spec_t j = {.id = r.id,
                       .account = r.account == 'a' ? "a" : "b",
                       .user = r.account == 'a' ? "u" : "v",
                       .gpus = r.gpus,
                       .gpu_type = r.gpu_type,
                       .time_limit_s = r.limit_s,
                       .prio = FG_PRIO_NORMAL,
                       .submit_time = now};
    assert_int_equal(fg_sched_submit(w->s, &j, now), FG_OK);
    r.start = -1;
    w->recs[w->nrecs++] = r;
}

/* Submits running job R (4 GPUs of account a, limit `limit`) at 0 and starts it. */
static void start_r(world_t *w, fg_time_t limit)
{
    submit(w, (rec_t){.id = R_ID, .account = 'a', .gpus = 4, .limit_s = limit}, 0);
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(w->s, 0, &d), FG_OK);
    assert_int_equal(d.nstarts, 1);
    assert_true(d.starts[0].job == R_ID);
    fg_decisions_free(&d);
    w->recs[0].start = 0;
}

/* The estimates at now of the plan order (at most 8 jobs) into out; returns how many. */
static size_t estimate(world_t *w, fg_time_t now, fg_job_id_t *ids, fg_est_start_t *out)
{
    size_t n = fg_sched_plan_order(w->s, now, ids, 8);
    fg_est_queue(NULL, w->s, w->m, now, ids, n, job_fn, w, out);
    return n;
}

/* The banner's example. R (4 GPUs, limit 4 h) has run 10 min: 1 h in all, 50 min left.
 * Pending: J (8 GPUs, limit 2 h: 30 min), then C (4 GPUs, limit 8 h: 2 h, too long for
 * the gap J leaves). Without preemption J starts when R ends (at 600 + 3000), C when J
 * ends (80 min from now), each with its user's history as source. */
static void test_backfill_projection(void **state)
{
    (void)state;
    world_t w;
    world_init(&w, FG_POLICY_FAIR, false, true);
    start_r(&w, 4 * 3600);
    submit(&w, (rec_t){.id = J_ID, .account = 'b', .gpus = 8, .limit_s = 7200}, 600);
    submit(&w, (rec_t){.id = C_ID, .account = 'b', .gpus = 4, .limit_s = 8 * 3600}, 600);
    fg_job_id_t ids[8];
    fg_est_start_t out[8];
    assert_int_equal(estimate(&w, 600, ids, out), 2);
    assert_true(ids[0] == J_ID && ids[1] == C_ID);
    assert_int_equal(out[0].p50, 600 + 3000);
    assert_int_equal(out[0].p10, out[0].p50); /* a constant ratio: a point */
    assert_int_equal(out[0].p90, out[0].p50);
    assert_int_equal(out[1].p50, 600 + 80 * 60);
    assert_int_equal(out[0].source, FG_RT_USER);
    assert_int_equal(out[1].source, FG_RT_USER);
    assert_int_equal(w.calls[0], 1); /* R holds 4 GPUs: asked once */
    world_free(&w);
}

/* A short job fits in the gap before J: with backfill it starts now, in the 4 free GPUs
 * (it ends before R). */
static void test_backfill_short_job(void **state)
{
    (void)state;
    world_t w;
    world_init(&w, FG_POLICY_FAIR, false, true);
    start_r(&w, 4 * 3600);
    submit(&w, (rec_t){.id = J_ID, .account = 'b', .gpus = 8, .limit_s = 7200}, 600);
    submit(&w, (rec_t){.id = C_ID, .account = 'b', .gpus = 4, .limit_s = 4000}, 600);
    fg_job_id_t ids[8];
    fg_est_start_t out[8];
    assert_int_equal(estimate(&w, 600, ids, out), 2);
    assert_int_equal(out[0].p50, 3600);
    assert_int_equal(out[1].p50, 600);
    world_free(&w);
}

/* The in-order rule: under fifo, and under fair with backfill off, C (1000 s) starts no
 * earlier than J, the job before it: when J ends (3600 + 1800). */
static void test_in_order(void **state)
{
    (void)state;
    const struct {
        fg_policy_t policy;
        bool backfill;
    } cases[] = {{FG_POLICY_FIFO, true}, {FG_POLICY_FAIR, false}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        world_t w;
        world_init(&w, cases[k].policy, false, cases[k].backfill);
        start_r(&w, 4 * 3600);
        submit(&w, (rec_t){.id = J_ID, .account = 'b', .gpus = 8, .limit_s = 7200}, 600);
        submit(&w, (rec_t){.id = C_ID, .account = 'b', .gpus = 4, .limit_s = 4000}, 600);
        fg_job_id_t ids[8];
        fg_est_start_t out[8];
        assert_int_equal(estimate(&w, 600, ids, out), 2);
        assert_true(ids[0] == J_ID && ids[1] == C_ID);
        assert_int_equal(out[0].p50, 3600);
        assert_int_equal(out[1].p50, 3600 + 1800);
        world_free(&w);
    }
}

/* The preemption rule. R (limit 8 h: 2 h in all) has run 50 min at now = 3000, so by
 * now + 600 it is a long runner (1 h in all, 10 min in this attempt). Under fair J may
 * then stop it: 4 free GPUs and R's 4 make room, J is estimated at now + 600 instead of
 * R's end (now + 70 min). C, behind J in plan order, finds no room left: it keeps its
 * projected start after J (R's end + J's 30 min). Without preemption, or under fifo,
 * J waits for R's end. */
static void test_preemption_rule(void **state)
{
    (void)state;
    const fg_time_t now = 3000, r_end = now + 7200 - 3000;
    const struct {
        fg_policy_t policy;
        bool preemption;
        fg_time_t j;
    } cases[] = {{FG_POLICY_FAIR, true, now + 600},
                 {FG_POLICY_WFQ, true, now + 600},
                 {FG_POLICY_FAIR, false, r_end},
                 {FG_POLICY_FIFO, true, r_end}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        world_t w;
        world_init(&w, cases[k].policy, cases[k].preemption, true);
        start_r(&w, 8 * 3600);
        submit(&w, (rec_t){.id = J_ID, .account = 'b', .gpus = 8, .limit_s = 7200}, now);
        submit(&w, (rec_t){.id = C_ID, .account = 'b', .gpus = 4, .limit_s = 8 * 3600}, now);
        fg_job_id_t ids[8];
        fg_est_start_t out[8];
        assert_int_equal(estimate(&w, now, ids, out), 2);
        assert_true(ids[0] == J_ID && ids[1] == C_ID);
        assert_int_equal(out[0].p50, cases[k].j);
        assert_int_equal(out[1].p50, r_end + 1800);
        world_free(&w);
    }
}

/* Not yet a long runner: R has run 20 min at now = 1200 (by now + 600: 30 min < the 1 h
 * quantum), so J waits for R's end even under fair. Earlier attempts count toward the
 * quantum: with 40 min served before, R is one by then. */
static void test_preemption_needs_long_runner(void **state)
{
    (void)state;
    for (int served = 0; served <= 1; served++) {
        world_t w;
        world_init(&w, FG_POLICY_FAIR, true, true);
        start_r(&w, 8 * 3600);
        w.recs[0].served_s = served ? 2400 : 0;
        submit(&w, (rec_t){.id = J_ID, .account = 'b', .gpus = 8, .limit_s = 7200}, 1200);
        fg_job_id_t ids[8];
        fg_est_start_t out[8];
        assert_int_equal(estimate(&w, 1200, ids, out), 1);
        assert_int_equal(out[0].p50, served ? 1200 + 600 : 7200);
        world_free(&w);
    }
}

/* A job no node can hold (16 GPUs on one 8-GPU node, or a type no node has) gets no
 * estimate; with backfill the jobs behind it still do, in order (fifo) they do not. */
static void test_never_fits(void **state)
{
    (void)state;
    for (int fifo = 0; fifo <= 1; fifo++) {
        world_t w;
        world_init(&w, fifo ? FG_POLICY_FIFO : FG_POLICY_FAIR, false, true);
        start_r(&w, 4 * 3600);
        submit(&w, (rec_t){.id = J_ID, .account = 'b', .gpus = 16, .limit_s = 7200}, 600);
        submit(&w, (rec_t){.id = C_ID, .account = 'b', .gpus = 4, .limit_s = 4000}, 600);
        fg_job_id_t ids[8];
        fg_est_start_t out[8];
        assert_int_equal(estimate(&w, 600, ids, out), 2);
        assert_true(out[0].p10 == FG_TIME_NEVER && out[0].p90 == FG_TIME_NEVER);
        if (fifo)
            assert_true(out[1].p50 == FG_TIME_NEVER);
        else
            assert_int_equal(out[1].p50, 600);
        world_free(&w);
    }
}

/* GPU types as the core matches them: "a100" fits the node, "h100" no node. */
static void test_gpu_type(void **state)
{
    (void)state;
    world_t w;
    world_init(&w, FG_POLICY_FAIR, false, true);
    start_r(&w, 4 * 3600);
    submit(&w, (rec_t){.id = J_ID, .account = 'b', .gpus = 2, .limit_s = 7200, .gpu_type = "h100"},
           600);
    submit(&w, (rec_t){.id = C_ID, .account = 'b', .gpus = 2, .limit_s = 7200, .gpu_type = "a100"},
           600);
    fg_job_id_t ids[8];
    fg_est_start_t out[8];
    assert_int_equal(estimate(&w, 600, ids, out), 2);
    for (int i = 0; i < 2; i++)
        if (ids[i] == J_ID)
            assert_true(out[i].p50 == FG_TIME_NEVER);
        else
            assert_int_equal(out[i].p50, 600);
    world_free(&w);
}

/* No history: the prediction is the limit (source "limit"), and with no pending job
 * asked for nothing is asked of the caller. */
static void test_no_history(void **state)
{
    (void)state;
    world_t w;
    world_init(&w, FG_POLICY_FAIR, false, true);
    fg_rt_free(w.m);
    w.m = fg_rt_new();
    start_r(&w, 3600);
    submit(&w, (rec_t){.id = J_ID, .account = 'b', .gpus = 8, .limit_s = 7200}, 600);
    fg_job_id_t ids[8];
    fg_est_start_t out[8];
    fg_est_queue(NULL, w.s, w.m, 600, ids, 0, job_fn, &w, out);
    assert_int_equal(w.calls[0] + w.calls[1], 0);
    assert_int_equal(estimate(&w, 600, ids, out), 1);
    assert_int_equal(out[0].p50, 3600); /* R's whole limit */
    assert_int_equal(out[0].source, FG_RT_LIMIT);
    world_free(&w);
}

/* Many running jobs, ids far apart: 24 nodes of 8 GPUs each run eight 1-GPU jobs and
 * one 16-GPU job spans the last two nodes. Each running job is asked for once; the
 * pending 8-GPU job starts when the first node empties: the 1-GPU jobs' ends. */
static void ask_count_fn(void *ctx, fg_job_id_t id, fg_time_t now, fg_est_job_t *out)
{
    int *calls = ctx;
    const bool pending = id == 7;
    const bool big = id == 0xB16B16B16ull;
    calls[pending ? 0 : big ? 1 : 2]++;
    out->account = "a";
    out->user = "u";
    out->gpus = pending ? 8 : big ? 16 : 1;
    out->limit_s = big ? 99999 : 1000;
    out->ran_s = out->served_s = out->attempt_s = pending ? 0 : now;
}

static void test_many_running_jobs(void **state)
{
    (void)state;
    fg_config_t cfg;
    fg_config_default(&cfg);
    fg_sched_t *s = fg_sched_new(&cfg);
    assert_true(fg_sched_account_set(s, "a", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(s, "a", "u", 1.0) >= 0);
    for (int n = 0; n < 24; n++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", n);
        assert_int_equal(fg_sched_node_add(s, name, 8, "a100", FG_NODE_UP), n);
    }
    fg_job_spec_t j = {.account = "a", .user = "u", .time_limit_s = 1000, .prio = FG_PRIO_NORMAL};
    j.gpus = 16;
    j.time_limit_s = 99999;
    j.id = 0xB16B16B16ull;
    assert_int_equal(fg_sched_submit(s, &j, 0), FG_OK);
    j.gpus = 1;
    j.time_limit_s = 1000;
    for (int i = 0; i < 22 * 8; i++) {
        j.id = ((fg_job_id_t)(i + 1) << 40) + 12345;
        assert_int_equal(fg_sched_submit(s, &j, 0), FG_OK);
    }
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    assert_int_equal(d.nstarts, 22 * 8 + 1);
    fg_decisions_free(&d);
    j.id = 7;
    j.gpus = 8;
    assert_int_equal(fg_sched_submit(s, &j, 100), FG_OK);
    fg_rt_model_t *m = fg_rt_new(); /* no history: each runs its whole limit */
    int calls[3] = {0, 0, 0};
    fg_job_id_t id = 7;
    fg_est_start_t out;
    fg_est_scratch_t *w = fg_est_scratch_new(); /* kept between calls: the same answers */
    for (int call = 1; call <= 2; call++) {
        fg_est_queue(w, s, m, 100, &id, 1, ask_count_fn, calls, &out);
        assert_int_equal(calls[0], call);
        assert_int_equal(calls[1], call);
        assert_int_equal(calls[2], call * 22 * 8);
        assert_int_equal(out.p50, 1000);
    }
    fg_est_scratch_free(w);
    fg_rt_free(m);
    fg_sched_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backfill_projection),
        cmocka_unit_test(test_backfill_short_job),
        cmocka_unit_test(test_in_order),
        cmocka_unit_test(test_preemption_rule),
        cmocka_unit_test(test_preemption_needs_long_runner),
        cmocka_unit_test(test_never_fits),
        cmocka_unit_test(test_gpu_type),
        cmocka_unit_test(test_no_history),
        cmocka_unit_test(test_many_running_jobs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
