/*
 * test_core_retry_quota.c - retries, stale reports, quotas, pending caps and load
 * shedding (docs/scheduler.md, "Attempts, retries, quotas, shedding").
 *
 * - failed, node_lost and user_setup_failed requeue the job while retries_used <
 *   max_retries (all count); user_setup_failed is not charged (0 GPU-seconds, usage back);
 *   it is eligible again after retry_backoff_s * 2^(retries_used - 1), capped at
 *   retry_backoff_max_s. preempted requeues at once and does not count.
 * - A report for an attempt that is not the running one is refused (FG_ESTALE).
 * - An account never runs more GPUs than its quota.
 * - max_pending_per_user caps a member's pending jobs (FG_EQUEUE_FULL); at shed_pending
 *   pending jobs new low jobs are refused (FG_ESHED). A refusal changes nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/internal.h" /* fg__sched_check */
#include "fairgpu/core.h"

/* ------------------------------------------------------------------ helpers */

/* Accounts "a" (user "u") and "b" (user "v"), weight 1, unlimited; `nodes` 8-GPU nodes. */
static fg_sched_t *sched_new(const fg_config_t *cfg, int nodes)
{
    fg_config_t def;
    if (!cfg) {
        fg_config_default(&def);
        cfg = &def;
    }
    fg_sched_t *s = fg_sched_new(cfg);
    assert_non_null(s);
    assert_true(fg_sched_account_set(s, "a", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(s, "a", "u", 1.0) >= 0);
    assert_true(fg_sched_account_set(s, "b", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(s, "b", "v", 1.0) >= 0);
    for (int i = 0; i < nodes; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        assert_int_equal(fg_sched_node_add(s, name, 8, "a100", FG_NODE_UP), i);
    }
    return s;
}

static fg_job_spec_t spec(fg_job_id_t id, char account, int gpus, fg_prio_t prio,
                          int32_t max_retries, fg_time_t now)
{
    fg_job_spec_t j = {.id = id,
                       .account = account == 'a' ? "a" : "b",
                       .user = account == 'a' ? "u" : "v",
                       .gpus = gpus,
                       .gpu_type = NULL,
                       .time_limit_s = 1000,
                       .prio = prio,
                       .max_retries = max_retries,
                       .checkpoint_interval_s = 0,
                       .submit_time = now};
    return j;
}

static void submit(fg_sched_t *s, fg_job_id_t id, char account, int gpus, int32_t max_retries,
                   fg_time_t now)
{
    fg_job_spec_t j = spec(id, account, gpus, FG_PRIO_NORMAL, max_retries, now);
    assert_int_equal(fg_sched_submit(s, &j, now), FG_OK);
}

static const fg_start_t *find_start(const fg_decisions_t *d, fg_job_id_t id)
{
    for (size_t i = 0; i < d->nstarts; i++)
        if (d->starts[i].job == id)
            return &d->starts[i];
    return NULL;
}

static fg_job_info_t info(fg_sched_t *s, fg_job_id_t id)
{
    fg_job_info_t ji;
    assert_int_equal(fg_sched_job_info(s, id, &ji), FG_OK);
    return ji;
}

/* Runs a pass and returns the attempt number job `id` started with, or 0 if it did not. */
static int32_t pass_starts(fg_sched_t *s, fg_time_t now, fg_job_id_t id)
{
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, now, &d), FG_OK);
    const fg_start_t *st = find_start(&d, id);
    int32_t attempt = st ? st->attempt : 0;
    fg_decisions_free(&d);
    return attempt;
}

static int32_t account_running(const fg_sched_t *s, const char *name)
{
    fg_account_info_t ai;
    assert_int_equal(fg_sched_account_info(s, fg_sched_account_find(s, name), &ai), FG_OK);
    return ai.running_gpus;
}

/* ------------------------------------------------------------------ retries */

/* Job 1 (max_retries 3; backoff 30 s doubling, cap 3600):
 *   t=0    attempt 1 starts
 *   t=100  fails     -> retries 1, eligible 100 + 30*2^0 = 130
 *   t=129  not yet (reason retry_backoff; next wake-up 130); t=130 attempt 2 starts
 *   t=200  fails     -> retries 2, eligible 200 + 30*2^1 = 260; t=259 no, t=260 attempt 3
 *   t=300  node lost -> retries 3 (node loss counts), eligible 300 + 30*2^2 = 420
 *   t=420  attempt 4 starts
 *   t=500  fails     -> retries_used 3 = max_retries: FAILED, the job leaves the core. */
static void test_failed_attempts_retry_after_a_doubling_backoff_until_max_retries(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(NULL, 1);
    submit(s, 1, 'a', 1, 3, 0);
    assert_int_equal(pass_starts(s, 0, 1), 1);

    fg_attempt_t rec;
    assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_FAILED, 100, &rec), FG_OK);
    assert_int_equal(rec.new_state, FG_JOB_PENDING);
    assert_int_equal(rec.eligible_time, 130);
    assert_int_equal(rec.gpu_seconds, 100);
    assert_int_equal(info(s, 1).retries_used, 1);
    assert_int_equal(info(s, 1).eligible_time, 130);

    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, 129, &d), FG_OK);
    assert_int_equal(d.nstarts, 0);
    assert_int_equal(d.next_wake, 130);
    assert_int_equal(info(s, 1).reason, FG_REASON_RETRY_BACKOFF);
    fg_decisions_free(&d);
    assert_int_equal(pass_starts(s, 130, 1), 2);

    assert_int_equal(fg_sched_attempt_ended(s, 1, 2, FG_END_FAILED, 200, &rec), FG_OK);
    assert_int_equal(rec.eligible_time, 260);
    assert_int_equal(pass_starts(s, 259, 1), 0);
    assert_int_equal(pass_starts(s, 260, 1), 3);

    assert_int_equal(fg_sched_attempt_ended(s, 1, 3, FG_END_NODE_LOST, 300, &rec), FG_OK);
    assert_int_equal(rec.new_state, FG_JOB_PENDING);
    assert_int_equal(rec.eligible_time, 420);
    assert_int_equal(info(s, 1).retries_used, 3);
    assert_int_equal(pass_starts(s, 419, 1), 0);
    assert_int_equal(pass_starts(s, 420, 1), 4);

    assert_int_equal(fg_sched_attempt_ended(s, 1, 4, FG_END_FAILED, 500, &rec), FG_OK);
    assert_int_equal(rec.new_state, FG_JOB_FAILED);
    assert_int_equal(rec.attempt, 4);
    fg_job_info_t ji;
    assert_int_equal(fg_sched_job_info(s, 1, &ji), FG_ENOENT);
    assert_int_equal(fg_sched_gpus_free(s), 8);
    fg_sched_free(s);
}

/* The backoff is capped: backoff 100 s, cap 250 s. Failures give 100, 200, then
 * min(400, 250) = 250. */
static void test_the_retry_backoff_is_capped(void **state)
{
    (void)state;
    fg_config_t cfg;
    fg_config_default(&cfg);
    cfg.retry_backoff_s = 100;
    cfg.retry_backoff_max_s = 250;
    fg_sched_t *s = sched_new(&cfg, 1);
    submit(s, 1, 'a', 1, 5, 0);
    assert_int_equal(pass_starts(s, 0, 1), 1);
    fg_attempt_t rec;
    assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_FAILED, 10, &rec), FG_OK);
    assert_int_equal(rec.eligible_time, 10 + 100);
    assert_int_equal(pass_starts(s, 110, 1), 2);
    assert_int_equal(fg_sched_attempt_ended(s, 1, 2, FG_END_FAILED, 120, &rec), FG_OK);
    assert_int_equal(rec.eligible_time, 120 + 200);
    assert_int_equal(pass_starts(s, 320, 1), 3);
    assert_int_equal(fg_sched_attempt_ended(s, 1, 3, FG_END_FAILED, 330, &rec), FG_OK);
    assert_int_equal(rec.eligible_time, 330 + 250);
    assert_int_equal(pass_starts(s, 579, 1), 0);
    assert_int_equal(pass_starts(s, 580, 1), 4);
    fg_sched_free(s);
}

/* A job with max_retries 0 fails for good at its first failure; a node loss likewise. */
static void test_no_retries_left_ends_the_job(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(NULL, 1);
    submit(s, 1, 'a', 1, 0, 0);
    submit(s, 2, 'a', 1, 0, 0);
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    assert_int_equal(d.nstarts, 2);
    fg_decisions_free(&d);
    fg_attempt_t rec;
    assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_FAILED, 10, &rec), FG_OK);
    assert_int_equal(rec.new_state, FG_JOB_FAILED);
    assert_int_equal(fg_sched_attempt_ended(s, 2, 1, FG_END_NODE_LOST, 10, &rec), FG_OK);
    assert_int_equal(rec.new_state, FG_JOB_FAILED);
    assert_int_equal(fg_sched_job_count(s), 0);
    fg_sched_free(s);
}

/* user_setup_failed (the node could not set up the job's Unix account) is retried like
 * a failure, but never charged: job 1 (2 GPUs, max_retries 1) ends so at t=100, after
 * 100 s of holding its GPUs: 0 GPU-seconds, attained service 0, and the account's and
 * member's usage are back to 0 (job 2 of account b, a real failure, is charged). Its
 * second attempt ends the same way: FAILED. */
static void test_a_setup_failure_is_retried_and_not_charged(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(NULL, 1);
    submit(s, 1, 'a', 2, 1, 0);
    submit(s, 2, 'b', 2, 0, 0);
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    assert_int_equal(d.nstarts, 2);
    fg_decisions_free(&d);
    fg_attempt_t rec;
    assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_SETUP_FAILED, 100, &rec), FG_OK);
    assert_int_equal(rec.new_state, FG_JOB_PENDING);
    assert_int_equal(rec.gpu_seconds, 0);
    assert_int_equal(rec.cause, FG_END_SETUP_FAILED);
    assert_int_equal(info(s, 1).retries_used, 1);
    assert_int_equal(info(s, 1).attained_gpu_s, 0);
    assert_int_equal(fg_sched_attempt_ended(s, 2, 1, FG_END_FAILED, 100, &rec), FG_OK);
    assert_int_equal(rec.gpu_seconds, 200);
    int ma = fg_sched_member_find(s, "a", "u"), mb = fg_sched_member_find(s, "b", "v");
    assert_true(fg_sched_member_usage(s, ma, 100) < 1e-6);
    assert_true(fg_sched_account_usage(s, fg_sched_account_find(s, "a"), 100) < 1e-6);
    assert_true(fg_sched_member_usage(s, mb, 100) > 150.0);
    assert_string_equal(fg_end_cause_name(FG_END_SETUP_FAILED), "user_setup_failed");
    assert_int_equal(pass_starts(s, 200, 1), 2);
    assert_int_equal(fg_sched_attempt_ended(s, 1, 2, FG_END_SETUP_FAILED, 250, &rec), FG_OK);
    assert_int_equal(rec.new_state, FG_JOB_FAILED);
    assert_int_equal(rec.gpu_seconds, 0);
    assert_true(fg_sched_member_usage(s, ma, 250) < 1e-6);
    fg_sched_free(s);
}

/* Preemption does not use a retry: job 1 (low, max_retries 0) is preempted for a high
 * job, requeued at once (eligible at the end time), retries_used still 0. */
static void test_a_preemption_is_not_a_retry(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(NULL, 1);
    fg_job_spec_t low = spec(1, 'a', 8, FG_PRIO_LOW, 0, 0);
    assert_int_equal(fg_sched_submit(s, &low, 0), FG_OK);
    assert_int_equal(pass_starts(s, 0, 1), 1);
    fg_job_spec_t high = spec(2, 'b', 8, FG_PRIO_HIGH, 0, 50);
    assert_int_equal(fg_sched_submit(s, &high, 50), FG_OK);
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, 50, &d), FG_OK);
    assert_int_equal(d.npreempts, 1);
    assert_int_equal(d.preempts[0].job, 1);
    fg_decisions_free(&d);
    fg_attempt_t rec;
    assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_PREEMPTED, 60, &rec), FG_OK);
    assert_int_equal(rec.new_state, FG_JOB_PENDING);
    assert_int_equal(rec.eligible_time, 60);
    assert_int_equal(info(s, 1).retries_used, 0);
    assert_int_equal(pass_starts(s, 60, 2), 1);
    fg_sched_free(s);
}

/* A node dies under a 16-GPU job. Three 8-GPU nodes: job 1 (a, 16 GPUs, one retry) runs
 * on n0+n1, job 2 (b, 4 GPUs) on n2. At t=100 n1 goes down: the core keeps the job
 * running until the caller reports it (the node table still names job 1 on n1), then the
 * report frees all 16 GPUs on both nodes and requeues job 1 (retry 1 of 1, eligible at
 * 100 + 30). With n1 down only n0 is whole: job 1 waits. n1 comes back at t=200: job 1
 * starts again on n0+n1 (attempt 2). n0 dies at t=300: no retry left, FAILED, and both
 * nodes are free again. */
static void test_a_lost_node_frees_every_gpu_of_its_jobs(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(NULL, 3);
    submit(s, 1, 'a', 16, 1, 0);
    submit(s, 2, 'b', 4, 0, 0);
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    assert_int_equal(d.nstarts, 2);
    fg_job_info_t j1 = info(s, 1);
    assert_int_equal(j1.nallocs, 2);
    assert_int_equal(j1.allocs[0].node, 0);
    assert_int_equal(j1.allocs[1].node, 1);

    assert_int_equal(fg_sched_node_set_state(s, 1, FG_NODE_DOWN, 100), FG_OK);
    fg_node_info_t ni;
    assert_int_equal(fg_sched_node_info(s, 1, &ni), FG_OK);
    assert_int_equal(ni.state, FG_NODE_DOWN);
    for (int g = 0; g < 8; g++)
        assert_int_equal(ni.gpu_job[g], 1);
    assert_int_equal(info(s, 1).state, FG_JOB_RUNNING);

    fg_attempt_t rec;
    assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_NODE_LOST, 100, &rec), FG_OK);
    assert_int_equal(rec.new_state, FG_JOB_PENDING);
    assert_int_equal(rec.gpu_seconds, 0); /* a lost node's attempt is not charged */
    assert_int_equal(rec.eligible_time, 130);
    assert_int_equal(info(s, 1).retries_used, 1);
    for (int n = 0; n < 2; n++) {
        assert_int_equal(fg_sched_node_info(s, n, &ni), FG_OK);
        assert_int_equal(ni.free_gpus, 8);
    }
    assert_int_equal(fg_sched_gpus_up(s), 16);   /* n0 and n2 */
    assert_int_equal(fg_sched_gpus_free(s), 12); /* n0 8 + n2 4 */
    assert_int_equal(pass_starts(s, 130, 1), 0);

    assert_int_equal(fg_sched_node_set_state(s, 1, FG_NODE_UP, 200), FG_OK);
    assert_int_equal(fg_sched_pass(s, 200, &d), FG_OK);
    assert_int_equal(d.nstarts, 1);
    assert_int_equal(d.starts[0].job, 1);
    assert_int_equal(d.starts[0].attempt, 2);
    assert_int_equal(d.starts[0].alloc_n, 2);
    assert_int_equal(d.allocs[d.starts[0].alloc_off].node, 0);
    assert_int_equal(d.allocs[d.starts[0].alloc_off + 1].node, 1);

    assert_int_equal(fg_sched_node_set_state(s, 0, FG_NODE_DOWN, 300), FG_OK);
    assert_int_equal(fg_sched_attempt_ended(s, 1, 2, FG_END_NODE_LOST, 300, &rec), FG_OK);
    assert_int_equal(rec.new_state, FG_JOB_FAILED);
    assert_int_equal(fg_sched_job_info(s, 1, &j1), FG_ENOENT);
    assert_int_equal(fg_sched_gpus_free(s), 8 + 4); /* n1 8 + n2 4; n0 is down */
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* ------------------------------------------------------------------ stale reports */

/* Job 1 fails in attempt 1 and runs attempt 2. A late report for attempt 1, or one for an
 * attempt that never ran (3), is refused with FG_ESTALE and changes nothing: the job is
 * still RUNNING on its GPU. The right report (attempt 2) is accepted, once. */
static void test_a_report_for_another_attempt_is_stale(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(NULL, 1);
    submit(s, 1, 'a', 1, 2, 0);
    assert_int_equal(pass_starts(s, 0, 1), 1);
    assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_FAILED, 10, NULL), FG_OK);
    assert_int_equal(pass_starts(s, 40, 1), 2); /* eligible at 10 + 30 */

    assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_COMPLETED, 50, NULL), FG_ESTALE);
    assert_int_equal(fg_sched_attempt_ended(s, 1, 3, FG_END_COMPLETED, 50, NULL), FG_ESTALE);
    fg_job_info_t ji = info(s, 1);
    assert_int_equal(ji.state, FG_JOB_RUNNING);
    assert_int_equal(ji.attempt, 2);
    assert_int_equal(fg_sched_gpus_free(s), 7);

    fg_attempt_t rec;
    assert_int_equal(fg_sched_attempt_ended(s, 1, 2, FG_END_COMPLETED, 60, &rec), FG_OK);
    assert_int_equal(rec.new_state, FG_JOB_COMPLETED);
    assert_int_equal(rec.start_time, 40);
    assert_int_equal(rec.gpu_seconds, 20);
    assert_int_equal(fg_sched_gpus_free(s), 8);
    /* The job has left the core: a second report finds nothing. */
    assert_true(fg_sched_attempt_ended(s, 1, 2, FG_END_COMPLETED, 70, NULL) < 0);
    fg_sched_free(s);
}

/* ------------------------------------------------------------------ quotas */

/* Account a has quota 4 on a 16-GPU cluster. Jobs 1, 2, 3 (2 GPUs each) of a, then job 4
 * (8 GPUs) of b. Plan order: a and b alternate by fair share; whatever the order, a gets
 * 2 + 2 = 4 GPUs and job 3 would make 6 > 4, so it waits with reason quota; b's job is not
 * held up by a's quota. When job 1 ends, job 3 starts (4 GPUs again). An 8-GPU job of a
 * can never fit its quota: FG_EQUOTA at submit. */
static void test_an_account_never_runs_more_than_its_quota(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(NULL, 2);
    assert_true(fg_sched_account_set(s, "a", 1.0, 4) >= 0);
    submit(s, 1, 'a', 2, 0, 0);
    submit(s, 2, 'a', 2, 0, 1);
    submit(s, 3, 'a', 2, 0, 2);
    submit(s, 4, 'b', 8, 0, 3);
    fg_job_spec_t big = spec(5, 'a', 8, FG_PRIO_NORMAL, 0, 4);
    assert_int_equal(fg_sched_submit(s, &big, 4), FG_EQUOTA);

    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, 10, &d), FG_OK);
    assert_int_equal(d.nstarts, 3);
    assert_non_null(find_start(&d, 1));
    assert_non_null(find_start(&d, 2));
    assert_non_null(find_start(&d, 4));
    assert_int_equal(account_running(s, "a"), 4);
    assert_int_equal(info(s, 3).reason, FG_REASON_QUOTA);
    char buf[FG_REASON_MAX];
    assert_int_equal(fg_sched_explain(s, 3, 10, buf, sizeof buf), FG_REASON_QUOTA);
    if (!strstr(buf, "4/4")) {
        print_error("quota reason without its numbers (4/4): \"%s\"\n", buf);
        fail();
    }

    assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_COMPLETED, 20, NULL), FG_OK);
    assert_int_equal(fg_sched_pass(s, 20, &d), FG_OK);
    assert_int_equal(d.nstarts, 1);
    assert_non_null(find_start(&d, 3));
    assert_int_equal(account_running(s, "a"), 4);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* Lowering a quota below what runs stops new starts but preempts nothing: a runs 4 GPUs
 * (jobs 1, 2), the quota drops to 2; job 3 (1 GPU) waits with reason quota. */
static void test_a_lowered_quota_holds_new_starts_without_preempting(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(NULL, 1);
    submit(s, 1, 'a', 2, 0, 0);
    submit(s, 2, 'a', 2, 0, 0);
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    assert_int_equal(d.nstarts, 2);
    assert_true(fg_sched_account_set(s, "a", 1.0, 2) >= 0);
    submit(s, 3, 'a', 1, 0, 10);
    assert_int_equal(fg_sched_pass(s, 10, &d), FG_OK);
    assert_int_equal(d.nstarts, 0);
    assert_int_equal(d.npreempts, 0);
    assert_int_equal(info(s, 3).reason, FG_REASON_QUOTA);
    assert_int_equal(account_running(s, "a"), 4);
    /* One 2-GPU job ends: 2 running = quota 2, job 3 still waits; the second ends: 0 + 1
     * <= 2, job 3 starts. */
    assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_COMPLETED, 20, NULL), FG_OK);
    assert_int_equal(pass_starts(s, 20, 3), 0);
    assert_int_equal(fg_sched_attempt_ended(s, 2, 1, FG_END_COMPLETED, 30, NULL), FG_OK);
    assert_int_equal(pass_starts(s, 30, 3), 1);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* A safe budget of 100 micros in account a; jobs 1 (limit cost 60) and 2 (50) on an
 * idle 8-GPU node. The pass starts job 1 and reserves 60: 40 left, so job 2 waits with
 * reason budget and takes no preemption. Job 1 ends having used 30: the caller says
 * 100 - 30 = 70 are left, and job 2 starts. An account without one (b) is not held. */
static void test_a_safe_budget_starts_only_jobs_whose_limit_fits(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(NULL, 1);
    int a = fg_sched_account_find(s, "a");
    assert_int_equal(fg_sched_account_set_budget_left(s, a, 100), FG_OK);
    assert_int_equal(fg_sched_account_set_budget_left(s, a, -2), FG_EINVAL);
    fg_job_spec_t j1 = spec(1, 'a', 2, FG_PRIO_NORMAL, 0, 0),
                  j2 = spec(2, 'a', 2, FG_PRIO_HIGH, 0, 0);
    fg_job_spec_t j3 = spec(3, 'b', 2, FG_PRIO_NORMAL, 0, 0);
    j1.limit_cost = 60;
    j2.limit_cost = 50;
    j3.limit_cost = 1000000;
    assert_int_equal(fg_sched_submit(s, &j1, 0), FG_OK);
    assert_int_equal(fg_sched_submit(s, &j2, 0), FG_OK);
    assert_int_equal(fg_sched_submit(s, &j3, 0), FG_OK);
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    /* job 2 (high) came first in the order and reserved 50: job 1 (60) no longer fits */
    assert_non_null(find_start(&d, 2));
    assert_null(find_start(&d, 1));
    assert_non_null(find_start(&d, 3));
    assert_int_equal(d.npreempts, 0);
    assert_int_equal(info(s, 1).reason, FG_REASON_BUDGET);
    char why[FG_REASON_MAX];
    assert_int_equal(fg_sched_explain(s, 1, 0, why, sizeof why), FG_REASON_BUDGET);
    assert_non_null(strstr(why, "safe budget has 50 micros left"));
    assert_non_null(strstr(why, "costs 60"));
    assert_int_equal(pass_starts(s, 10, 1), 0);
    /* job 2 ends having spent 20 of its 50: 100 - 20 = 80 left, job 1 fits */
    assert_int_equal(fg_sched_attempt_ended(s, 2, 1, FG_END_COMPLETED, 20, NULL), FG_OK);
    assert_int_equal(fg_sched_account_set_budget_left(s, a, 80), FG_OK);
    assert_int_equal(pass_starts(s, 20, 1), 1);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* ------------------------------------------------------------------ pending cap, shedding */

/* The job table as text, to compare two schedulers or one before and after a refusal. */
static void jobs_text(fg_sched_t *s, char *buf, size_t n)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < fg_sched_job_count(s); i++) {
        fg_job_info_t ji;
        assert_int_equal(fg_sched_job_at(s, i, &ji), FG_OK);
        int w = snprintf(buf + off, n - off, "%llu:%d:%d:%d;", (unsigned long long)ji.id,
                         (int)ji.state, (int)ji.member, (int)ji.gpus);
        assert_true(w > 0 && (size_t)w < n - off);
        off += (size_t)w;
    }
}

/* max_pending_per_user 2: u's third pending job is refused with FG_EQUEUE_FULL and
 * nothing changes (job count, u's pending count, the job table); v may still submit.
 * Once one of u's jobs starts, u may submit again, even with the refused id. */
static void test_the_pending_cap_refuses_and_changes_nothing(void **state)
{
    (void)state;
    fg_config_t cfg;
    fg_config_default(&cfg);
    cfg.max_pending_per_user = 2;
    fg_sched_t *s = sched_new(&cfg, 1);
    submit(s, 1, 'a', 1, 0, 0);
    submit(s, 2, 'a', 1, 0, 0);
    char before[512], after[512];
    jobs_text(s, before, sizeof before);
    fg_job_spec_t third = spec(3, 'a', 1, FG_PRIO_NORMAL, 0, 0);
    assert_int_equal(fg_sched_submit(s, &third, 0), FG_EQUEUE_FULL);
    jobs_text(s, after, sizeof after);
    assert_string_equal(before, after);
    assert_int_equal(fg_sched_pending_count(s), 2);
    fg_member_info_t mi;
    assert_int_equal(fg_sched_member_info(s, fg_sched_member_find(s, "a", "u"), &mi), FG_OK);
    assert_int_equal(mi.pending_jobs, 2);
    submit(s, 4, 'b', 1, 0, 0);

    assert_int_equal(pass_starts(s, 10, 1), 1);
    third.submit_time = 10;
    assert_int_equal(fg_sched_submit(s, &third, 10), FG_OK);
    fg_sched_free(s);
}

/* shed_pending 3: with 3 pending jobs a new low job is refused (FG_ESHED) while normal
 * and high jobs are still taken. The refusal leaves no trace: a twin scheduler that never
 * saw it makes the same decisions. */
static void test_load_shedding_refuses_low_jobs_only_and_changes_nothing(void **state)
{
    (void)state;
    fg_config_t cfg;
    fg_config_default(&cfg);
    cfg.shed_pending = 3;
    fg_sched_t *s = sched_new(&cfg, 1);
    fg_sched_t *twin = sched_new(&cfg, 1);
    fg_sched_t *both[2] = {s, twin};
    for (int k = 0; k < 2; k++) {
        submit(both[k], 1, 'a', 8, 0, 0);
        submit(both[k], 2, 'a', 8, 0, 0);
        submit(both[k], 3, 'b', 8, 0, 0);
    }
    fg_job_spec_t low = spec(10, 'b', 1, FG_PRIO_LOW, 0, 5);
    assert_int_equal(fg_sched_submit(s, &low, 5), FG_ESHED);
    assert_int_equal(fg_sched_pending_count(s), 3);
    for (int k = 0; k < 2; k++) {
        fg_job_spec_t high = spec(11, 'b', 1, FG_PRIO_HIGH, 0, 5);
        assert_int_equal(fg_sched_submit(both[k], &high, 5), FG_OK);
        fg_job_spec_t normal = spec(12, 'a', 1, FG_PRIO_NORMAL, 0, 5);
        assert_int_equal(fg_sched_submit(both[k], &normal, 5), FG_OK);
    }
    for (fg_time_t t = 10; t <= 4010; t += 1000) {
        fg_decisions_t d1, d2;
        fg_decisions_init(&d1);
        fg_decisions_init(&d2);
        assert_int_equal(fg_sched_pass(s, t, &d1), FG_OK);
        assert_int_equal(fg_sched_pass(twin, t, &d2), FG_OK);
        assert_int_equal(d1.nstarts, d2.nstarts);
        for (size_t i = 0; i < d1.nstarts; i++) {
            assert_int_equal(d1.starts[i].job, d2.starts[i].job);
            assert_int_equal(d1.allocs[d1.starts[i].alloc_off].gpu_mask,
                             d2.allocs[d2.starts[i].alloc_off].gpu_mask);
        }
        for (size_t i = 0; i < d1.nstarts; i++) {
            fg_job_id_t id = d1.starts[i].job;
            assert_int_equal(fg_sched_attempt_ended(s, id, 1, FG_END_COMPLETED, t + 500, NULL),
                             FG_OK);
            assert_int_equal(fg_sched_attempt_ended(twin, id, 1, FG_END_COMPLETED, t + 500, NULL),
                             FG_OK);
        }
        fg_decisions_free(&d1);
        fg_decisions_free(&d2);
    }
    /* Every job has run by now (one 8-GPU job per pass): low jobs are welcome again. */
    assert_true(fg_sched_pending_count(s) < 3);
    low.submit_time = 5000;
    assert_int_equal(fg_sched_submit(s, &low, 5000), FG_OK);
    fg_sched_free(s);
    fg_sched_free(twin);
}

/* ------------------------------------------------------------------ submit validation */

/* A job no current node could hold is accepted (nodes may join later) and waits with
 * reason gpu_type; fg_sched_check_fit tells a caller that wants to refuse it: on one
 * 8-GPU a100 node, 8 GPUs fit, 16 do not, nor does any h100 job. Bad sizes, id 0, a
 * duplicate id, an unknown account or a user outside the account are refused, and a
 * refusal adds no job. */
static void test_submit_refuses_malformed_jobs_and_check_fit_tells_what_never_fits(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(NULL, 1);
    assert_int_equal(fg_sched_check_fit(s, 8, NULL), FG_OK);
    assert_int_equal(fg_sched_check_fit(s, 8, "a100"), FG_OK);
    assert_int_equal(fg_sched_check_fit(s, 16, NULL), FG_ENOFIT);
    assert_int_equal(fg_sched_check_fit(s, 1, "h100"), FG_ENOFIT);
    assert_int_equal(fg_sched_check_fit(s, 12, NULL), FG_EINVAL);

    submit(s, 1, 'a', 1, 0, 0);
    fg_job_spec_t j = spec(2, 'a', 16, FG_PRIO_NORMAL, 0, 0);
    assert_int_equal(fg_sched_submit(s, &j, 0), FG_OK);
    assert_int_equal(pass_starts(s, 0, 2), 0);
    assert_int_equal(info(s, 2).reason, FG_REASON_GPU_TYPE);
    assert_int_equal(fg_sched_cancel(s, 2, 0), FG_OK);

    j.gpus = 12; /* neither <= 8 nor a multiple of 8 */
    assert_int_equal(fg_sched_submit(s, &j, 0), FG_EINVAL);
    j.gpus = 0;
    assert_int_equal(fg_sched_submit(s, &j, 0), FG_EINVAL);
    j.gpus = 1;
    j.time_limit_s = 0;
    assert_int_equal(fg_sched_submit(s, &j, 0), FG_EINVAL);
    j.time_limit_s = 1000;
    j.id = 0;
    assert_int_equal(fg_sched_submit(s, &j, 0), FG_EINVAL);
    j.id = 1;
    assert_int_equal(fg_sched_submit(s, &j, 0), FG_EEXIST);
    j.id = 2;
    j.account = "nope";
    assert_int_equal(fg_sched_submit(s, &j, 0), FG_ENOENT);
    j.account = "a";
    j.user = "v"; /* v is a member of b, not of a */
    assert_int_equal(fg_sched_submit(s, &j, 0), FG_ENOENT);
    assert_int_equal(fg_sched_job_count(s), 1);
    j.user = "u";
    assert_int_equal(fg_sched_submit(s, &j, 0), FG_OK);
    fg_sched_free(s);
}

/* ------------------------------------------------------------------ counts in step */

/* Runs a pass at `now`, then checks every derived count (fg__sched_check asserts in
 * debug builds); returns the number of starts. */
static size_t pass_checked(fg_sched_t *s, fg_time_t now)
{
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, now, &d), FG_OK);
    size_t n = d.nstarts;
    fg_decisions_free(&d);
    fg__sched_check(s);
    return n;
}

/* Account a has a quota of 8 GPUs on two 8-GPU nodes. Jobs 1-3 (a: 4, 4, 2 GPUs) and 4-5
 * (b: 8, 1): the first pass starts 1, 2 (a at its quota) and 4; 3 waits on the quota and
 * 5 on the GPUs. Then job 1 fails (retry), 2 completes, 5 is cancelled, a node goes down
 * and comes back, and the scheduler is rebuilt: after each event the running GPUs, the
 * pending counts and the nodes' free GPUs stay in step with the jobs, and a never runs
 * more than 8 GPUs. */
static void test_counts_stay_in_step_through_starts_ends_and_a_rebuild(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(NULL, 2);
    assert_true(fg_sched_account_set(s, "a", 1.0, 8) >= 0);
    submit(s, 1, 'a', 4, 1, 0);
    submit(s, 2, 'a', 4, 0, 1);
    submit(s, 3, 'a', 2, 0, 2);
    submit(s, 4, 'b', 8, 0, 3);
    submit(s, 5, 'b', 1, 0, 4);
    fg__sched_check(s);
    assert_int_equal(pass_checked(s, 10), 3);
    assert_int_equal(account_running(s, "a"), 8);
    assert_int_equal(info(s, 3).reason, FG_REASON_QUOTA);
    assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_FAILED, 100, NULL), FG_OK);
    fg__sched_check(s);
    assert_int_equal(fg_sched_attempt_ended(s, 2, 1, FG_END_COMPLETED, 110, NULL), FG_OK);
    fg__sched_check(s);
    assert_int_equal(fg_sched_cancel(s, 5, 120), FG_OK);
    fg__sched_check(s);
    pass_checked(s, 130);
    assert_true(account_running(s, "a") <= 8);
    assert_int_equal(fg_sched_node_set_state(s, 1, FG_NODE_DOWN, 140), FG_OK);
    fg__sched_check(s);
    assert_int_equal(fg_sched_node_set_state(s, 1, FG_NODE_UP, 150), FG_OK);
    fg_sched_rebuild(s);
    fg__sched_check(s);
    pass_checked(s, 160);
    assert_true(account_running(s, "a") <= 8);
    fg_sched_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failed_attempts_retry_after_a_doubling_backoff_until_max_retries),
        cmocka_unit_test(test_the_retry_backoff_is_capped),
        cmocka_unit_test(test_no_retries_left_ends_the_job),
        cmocka_unit_test(test_a_setup_failure_is_retried_and_not_charged),
        cmocka_unit_test(test_a_preemption_is_not_a_retry),
        cmocka_unit_test(test_a_lost_node_frees_every_gpu_of_its_jobs),
        cmocka_unit_test(test_a_report_for_another_attempt_is_stale),
        cmocka_unit_test(test_an_account_never_runs_more_than_its_quota),
        cmocka_unit_test(test_a_lowered_quota_holds_new_starts_without_preempting),
        cmocka_unit_test(test_a_safe_budget_starts_only_jobs_whose_limit_fits),
        cmocka_unit_test(test_the_pending_cap_refuses_and_changes_nothing),
        cmocka_unit_test(test_load_shedding_refuses_low_jobs_only_and_changes_nothing),
        cmocka_unit_test(test_submit_refuses_malformed_jobs_and_check_fit_tells_what_never_fits),
        cmocka_unit_test(test_counts_stay_in_step_through_starts_ends_and_a_rebuild),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
