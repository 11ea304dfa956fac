/*
 * test_sim_whatif.c - what-if replays of a snapshot (src/sim/whatif.c): the banner's
 * worked example under fifo and wfq, usage carried into the fair share, quotas that
 * hold back pending jobs but not running ones, a changed node count, bad snapshots.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sim/whatif.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define H 3600

/* The banner's cluster: one node of 8 GPUs, accounts a and b. */
typedef struct fixture {
    fg_whatif_account_t acct[2];
    fg_whatif_job_t jobs[3];
    fg_sim_nodes_t group;
    double weights[2];
    int32_t quotas[2];
    fg_whatif_snapshot_t snap;
} fixture_t;

static void fixture_init(fixture_t *f, fg_policy_t policy, double usage_a)
{
    memset(f, 0, sizeof *f);
    snprintf(f->acct[0].name, sizeof f->acct[0].name, "a");
    snprintf(f->acct[1].name, sizeof f->acct[1].name, "b");
    for (int k = 0; k < 2; k++) {
        f->acct[k].weight = f->weights[k] = 1.0;
        f->acct[k].quota = f->quotas[k] = -1;
    }
    f->acct[0].usage_gpu_s = usage_a;
    /* a: 8 GPUs running, 1 h left; a: 8 GPUs pending (first); b: 1 GPU pending */
    f->jobs[0] = (fg_whatif_job_t){0, 8, true, 0, 2 * H, H};
    f->jobs[1] = (fg_whatif_job_t){0, 8, false, 100, 2 * H, H};
    f->jobs[2] = (fg_whatif_job_t){1, 1, false, 200, 2 * H, H};
    f->group = (fg_sim_nodes_t){.count = 1, .gpus = 8, .gpu_type = "gpu"};
    fg_config_default(&f->snap.live.cfg);
    f->snap.live.cfg.policy = policy;
    f->snap.live.groups = &f->group;
    f->snap.live.ngroups = 1;
    f->snap.live.weights = f->weights;
    f->snap.live.quotas = f->quotas;
    f->snap.accounts = f->acct;
    f->snap.naccounts = 2;
    f->snap.jobs = f->jobs;
    f->snap.njobs = 3;
}

static void run_ok(const fixture_t *f, const fg_whatif_settings_t *set, fg_whatif_result_t *res)
{
    char err[256];
    if (fg_whatif_run(&f->snap, set, res, err, sizeof err) != 0)
        fail_msg("whatif: %s", err);
}

/* fifo: a's pending 8-GPU job first (at 1 h), b's after it (2 h); waits from t = 1. */
static void fifo_serves_in_submit_order(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f, FG_POLICY_FIFO, 0);
    fg_whatif_result_t r;
    run_ok(&f, &f.snap.live, &r);
    assert_int_equal(r.accounts[0].pending_jobs, 1);
    assert_int_equal(r.accounts[1].pending_jobs, 1);
    assert_true(fabs(r.accounts[0].wait_avg_s - (H - 1)) < 1e-9);
    assert_true(fabs(r.accounts[1].wait_avg_s - (2 * H - 1)) < 1e-9);
    assert_int_equal(r.makespan_s, 3 * H);
    assert_int_equal(r.all.pending_jobs, 2);
    /* GPU time: 8 h + 8 h + 1 h over 8 GPUs x 3 h */
    assert_true(fabs(r.all.gpu_s - 17.0 * H) < 1e-9);
    assert_true(fabs(r.all.utilization - 17.0 / 24.0) < 1e-9);
    fg_whatif_result_free(&r);
}

/* wfq, with a's usage far above b's: b's job first, a's after it; the live settings
 * changed to wfq give the other order than the same snapshot under fifo. */
static void wfq_with_usage_serves_the_light_account_first(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f, FG_POLICY_FIFO, 1e7);
    fg_whatif_settings_t set;
    fg_whatif_settings_copy(&f.snap.live, f.snap.naccounts, &set);
    set.cfg.policy = FG_POLICY_WFQ;
    fg_whatif_result_t r;
    run_ok(&f, &set, &r);
    assert_true(fabs(r.accounts[1].wait_avg_s - (H - 1)) < 1e-9);
    assert_true(fabs(r.accounts[0].wait_avg_s - (2 * H - 1)) < 1e-9);
    fg_whatif_result_free(&r);
    /* the same under wfq with no usage: a and b tie on usage, a's job is older */
    f.acct[0].usage_gpu_s = 0;
    run_ok(&f, &set, &r);
    assert_true(r.accounts[1].wait_avg_s >= H - 1);
    fg_whatif_settings_free(&set);
    fg_whatif_result_free(&r);
}

/* A quota of 1 GPU on a: its running 8-GPU job still runs (quotas come in force after
 * t = 0), its pending 8-GPU job can never start under it and is skipped. */
static void quota_holds_pending_not_running(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f, FG_POLICY_FIFO, 0);
    fg_whatif_settings_t set;
    fg_whatif_settings_copy(&f.snap.live, f.snap.naccounts, &set);
    set.quotas[0] = 1;
    fg_whatif_result_t r;
    run_ok(&f, &set, &r);
    assert_true(fabs(r.accounts[0].gpu_s - 8.0 * H) < 1e-9); /* its running hour */
    assert_int_equal(r.accounts[0].pending_jobs, 0);
    assert_int_equal(r.accounts[0].skipped_jobs, 1);
    assert_int_equal(r.accounts[1].pending_jobs, 1);
    assert_true(fabs(r.accounts[1].wait_avg_s - (H - 1)) < 1e-9);
    fg_whatif_result_free(&r);
    fg_whatif_settings_free(&set);
}

/* With nothing running, the quota still holds the pending jobs from the start; a job
 * requeued above a lowered quota would never run again: the replay ends, counting it. */
static void quota_applies_with_nothing_running(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f, FG_POLICY_FIFO, 0);
    f.jobs[0].running = false;
    fg_whatif_settings_t set;
    fg_whatif_settings_copy(&f.snap.live, f.snap.naccounts, &set);
    set.quotas[0] = 4;
    fg_whatif_result_t r;
    run_ok(&f, &set, &r);
    assert_int_equal(r.accounts[0].skipped_jobs, 2);
    assert_int_equal(r.accounts[1].pending_jobs, 1);
    assert_true(r.accounts[1].wait_avg_s < 1.0);
    fg_whatif_settings_free(&set);
    fg_whatif_result_free(&r);
}

/* Two nodes instead of one: nothing waits behind the running job. */
static void more_nodes_cut_the_waits(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f, FG_POLICY_FIFO, 0);
    fg_whatif_settings_t set;
    fg_whatif_settings_copy(&f.snap.live, f.snap.naccounts, &set);
    set.groups[0].count = 2;
    fg_whatif_result_t r;
    run_ok(&f, &set, &r);
    assert_true(r.accounts[0].wait_avg_s < 1.0);
    assert_true(r.all.wait_avg_s < H);
    assert_int_equal(r.gpus, 16);
    fg_whatif_settings_free(&set);
    fg_whatif_result_free(&r);
}

static void bad_snapshots_are_refused(void **state)
{
    (void)state;
    fixture_t f;
    char err[256];
    fg_whatif_result_t r;
    fixture_init(&f, FG_POLICY_FIFO, 0);
    f.jobs[1].run_s = f.jobs[1].limit_s + 1;
    assert_int_equal(fg_whatif_run(&f.snap, &f.snap.live, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "job 1"));
    fixture_init(&f, FG_POLICY_FIFO, 0);
    f.jobs[2].gpus = 12;
    assert_int_equal(fg_whatif_run(&f.snap, &f.snap.live, &r, err, sizeof err), -1);
    fixture_init(&f, FG_POLICY_FIFO, 0);
    f.jobs[0].account = 5;
    assert_int_equal(fg_whatif_run(&f.snap, &f.snap.live, &r, err, sizeof err), -1);
    fixture_init(&f, FG_POLICY_FIFO, 0);
    f.weights[1] = 0;
    assert_int_equal(fg_whatif_run(&f.snap, &f.snap.live, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "account b"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fifo_serves_in_submit_order),
        cmocka_unit_test(wfq_with_usage_serves_the_light_account_first),
        cmocka_unit_test(quota_holds_pending_not_running),
        cmocka_unit_test(quota_applies_with_nothing_running),
        cmocka_unit_test(more_nodes_cut_the_waits),
        cmocka_unit_test(bad_snapshots_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
