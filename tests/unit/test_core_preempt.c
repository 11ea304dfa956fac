/*
 * test_core_preempt.c - preemption (docs/scheduler.md, "One pass", 6).
 *
 * - A `high` job takes GPUs from running `low` jobs at once, whatever their run time.
 * - Under wfq a job that has waited preempt_wait_s, whose account runs fewer GPUs than
 *   its entitlement, may stop normal/low jobs of over-entitled accounts that have run at
 *   least quantum_s in all and min_run_s (and their checkpoint interval, if longer) in
 *   the current attempt.
 * - Victims lose the least GPU-time (work since their last checkpoint).
 * - A preempted job keeps its GPUs until the caller reports FG_END_PREEMPTED, then
 *   returns to PENDING at once with its submit time and attained service; it does not
 *   count as a retry.
 *
 * Defaults used below: quantum_s 3600, preempt_wait_s 600, min_run_s 600.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "fairgpu/core.h"

/* ------------------------------------------------------------------ helpers */

/* Accounts "a" (user "u") and "b" (user "v"), weight 1 each, and one 8-GPU node n0. */
static fg_sched_t *sched_new(const fg_config_t *cfg)
{
    fg_sched_t *s = fg_sched_new(cfg);
    assert_non_null(s);
    assert_true(fg_sched_account_set(s, "a", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(s, "a", "u", 1.0) >= 0);
    assert_true(fg_sched_account_set(s, "b", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(s, "b", "v", 1.0) >= 0);
    assert_int_equal(fg_sched_node_add(s, "n0", 8, "a100", FG_NODE_UP), 0);
    return s;
}

/* The fair-share rules of wfq (fair's own are in test_core_fair.c). */
static fg_sched_t *sched_default(void)
{
    fg_config_t cfg;
    fg_config_default(&cfg);
    cfg.policy = FG_POLICY_WFQ;
    return sched_new(&cfg);
}

/* Submits job `id` of account "a" (user u) or "b" (user v). */
static void submit(fg_sched_t *s, fg_job_id_t id, char account, int gpus, fg_prio_t prio,
                   fg_time_t limit, fg_time_t checkpoint, fg_time_t now)
{
    fg_job_spec_t j = {.id = id,
                       .account = account == 'a' ? "a" : "b",
                       .user = account == 'a' ? "u" : "v",
                       .gpus = gpus,
                       .gpu_type = NULL,
                       .time_limit_s = limit,
                       .prio = prio,
                       .max_retries = 0,
                       .checkpoint_interval_s = checkpoint,
                       .submit_time = now};
    assert_int_equal(fg_sched_submit(s, &j, now), FG_OK);
}

static const fg_start_t *find_start(const fg_decisions_t *d, fg_job_id_t id)
{
    for (size_t i = 0; i < d->nstarts; i++)
        if (d->starts[i].job == id)
            return &d->starts[i];
    return NULL;
}

static void expect_start_on(const fg_decisions_t *d, fg_job_id_t id, uint64_t mask)
{
    const fg_start_t *st = find_start(d, id);
    assert_non_null(st);
    assert_int_equal(st->alloc_n, 1);
    assert_int_equal(d->allocs[st->alloc_off].node, 0);
    assert_int_equal(d->allocs[st->alloc_off].gpu_mask, mask);
}

static fg_job_info_t info(fg_sched_t *s, fg_job_id_t id)
{
    fg_job_info_t ji;
    assert_int_equal(fg_sched_job_info(s, id, &ji), FG_OK);
    return ji;
}

/* A pass at `now` that must decide nothing at all. */
static void expect_quiet_pass(fg_sched_t *s, fg_time_t now)
{
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, now, &d), FG_OK);
    assert_int_equal(d.nstarts, 0);
    assert_int_equal(d.npreempts, 0);
    fg_decisions_free(&d);
}

/* A pass at `now` that must decide exactly one preemption: `victim` for `for_job`. */
static void expect_preemption(fg_sched_t *s, fg_time_t now, fg_job_id_t victim,
                              fg_preempt_why_t why, fg_job_id_t for_job)
{
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, now, &d), FG_OK);
    assert_int_equal(d.nstarts, 0);
    assert_int_equal(d.npreempts, 1);
    assert_int_equal(d.preempts[0].job, victim);
    assert_int_equal(d.preempts[0].attempt, info(s, victim).attempt);
    assert_int_equal(d.preempts[0].why, why);
    assert_int_equal(d.preempts[0].for_job, for_job);
    assert_true(info(s, victim).preempting);
    assert_int_equal(info(s, victim).state, FG_JOB_RUNNING);
    fg_decisions_free(&d);
}

/* ------------------------------------------------------------------ class preemption */

/* Job 1 (a, 8 GPUs, low) starts at 0. Job 2 (b, 4 GPUs, high) arrives at t=10: job 1 is
 * preempted at once (run time 10, far below min_run and quantum), reason priority.
 * Job 1 keeps its GPUs until the caller reports the end: a second pass at 10 decides
 * nothing new. After the report the record says 8 GPUs x 10 s = 80 GPU-s, all of it lost
 * (no checkpoint); job 1 is PENDING again, eligible at once, no retry used, submit time
 * and attained service kept. Job 2 then starts on GPUs 0-3. */
static void test_high_preempts_low_at_once(void **state)
{
    (void)state;
    fg_sched_t *s = sched_default();
    fg_decisions_t d;
    fg_decisions_init(&d);
    submit(s, 1, 'a', 8, FG_PRIO_LOW, 100000, 0, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    expect_start_on(&d, 1, 0xff);

    submit(s, 2, 'b', 4, FG_PRIO_HIGH, 1000, 0, 10);
    expect_preemption(s, 10, 1, FG_PREEMPT_PRIORITY, 2);
    expect_quiet_pass(s, 10);

    fg_attempt_t rec;
    assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_PREEMPTED, 10, &rec), FG_OK);
    assert_int_equal(rec.job, 1);
    assert_int_equal(rec.attempt, 1);
    assert_int_equal(rec.start_time, 0);
    assert_int_equal(rec.end_time, 10);
    assert_int_equal(rec.cause, FG_END_PREEMPTED);
    assert_int_equal(rec.gpus, 8);
    assert_int_equal(rec.gpu_seconds, 80);
    assert_int_equal(rec.lost_gpu_seconds, 80);
    assert_int_equal(rec.new_state, FG_JOB_PENDING);
    assert_int_equal(rec.eligible_time, 10);
    fg_job_info_t j1 = info(s, 1);
    assert_int_equal(j1.state, FG_JOB_PENDING);
    assert_int_equal(j1.retries_used, 0);
    assert_int_equal(j1.attempt, 1);
    assert_int_equal(j1.submit_time, 0);
    assert_int_equal(j1.attained_gpu_s, 80);
    assert_false(j1.preempting);

    assert_int_equal(fg_sched_pass(s, 10, &d), FG_OK);
    assert_int_equal(d.nstarts, 1);
    expect_start_on(&d, 2, 0x0f);
    assert_int_equal(d.npreempts, 0); /* job 1 (low) takes nothing from job 2 (high) */
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* Two low jobs share n0: job 1 (GPUs 0-3, no checkpoint) and job 2 (GPUs 4-7, checkpoint
 * every 100 s), both from t=0. A high 4-GPU job 3 arrives at t=250. Preempting job 1
 * loses 4 x 250 = 1000 GPU-s; job 2 loses only 4 x (250 mod 100) = 200 GPU-s. So job 2
 * is the victim, and job 3 starts on its GPUs 4-7. */
static void test_the_victim_is_the_job_that_loses_the_least_work(void **state)
{
    (void)state;
    fg_sched_t *s = sched_default();
    fg_decisions_t d;
    fg_decisions_init(&d);
    submit(s, 1, 'a', 4, FG_PRIO_LOW, 100000, 0, 0);
    submit(s, 2, 'a', 4, FG_PRIO_LOW, 100000, 100, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    expect_start_on(&d, 1, 0x0f);
    expect_start_on(&d, 2, 0xf0);

    submit(s, 3, 'b', 4, FG_PRIO_HIGH, 1000, 0, 250);
    expect_preemption(s, 250, 2, FG_PREEMPT_PRIORITY, 3);
    assert_false(info(s, 1).preempting);

    fg_attempt_t rec;
    assert_int_equal(fg_sched_attempt_ended(s, 2, 1, FG_END_PREEMPTED, 250, &rec), FG_OK);
    assert_int_equal(rec.gpu_seconds, 1000);
    assert_int_equal(rec.lost_gpu_seconds, 200);
    assert_int_equal(fg_sched_pass(s, 250, &d), FG_OK);
    assert_int_equal(d.nstarts, 1);
    expect_start_on(&d, 3, 0xf0);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* A pass never starts a job and preempts it at once: n0 runs job 1 (a, low, 6 GPUs).
 * Job 2 (b, high, 4 GPUs) and job 3 (a, low, 2 GPUs, limit 100) arrive. Job 2 cannot
 * start (2 free GPUs) and takes job 1's GPUs by class. Whether job 3 also starts on the
 * two free GPUs or waits, it must not be both started and preempted in this pass
 * (contradictory decisions: the caller would launch it and stop it at once). */
static void test_a_job_started_in_a_pass_is_not_preempted_in_it(void **state)
{
    (void)state;
    fg_sched_t *s = sched_default();
    fg_decisions_t d;
    fg_decisions_init(&d);
    submit(s, 1, 'a', 6, FG_PRIO_LOW, 100000, 0, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    expect_start_on(&d, 1, 0x3f);
    submit(s, 2, 'b', 4, FG_PRIO_HIGH, 1000, 0, 10);
    submit(s, 3, 'a', 2, FG_PRIO_LOW, 100, 0, 10);
    assert_int_equal(fg_sched_pass(s, 10, &d), FG_OK);
    assert_null(find_start(&d, 2));
    bool job1_preempted = false;
    for (size_t i = 0; i < d.npreempts; i++) {
        assert_int_equal(d.preempts[i].for_job, 2);
        assert_int_equal(d.preempts[i].why, FG_PREEMPT_PRIORITY);
        if (find_start(&d, d.preempts[i].job)) {
            print_error("job %llu started and preempted in the same pass\n",
                        (unsigned long long)d.preempts[i].job);
            fail();
        }
        job1_preempted = job1_preempted || d.preempts[i].job == 1;
    }
    assert_true(job1_preempted);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* A high job does not take GPUs from a normal job by class: job 2 (high) waits behind
 * job 1 (normal, 8 GPUs) at t=10 and at t=700 (job 1 ran 700 s < quantum 3600). */
static void test_high_does_not_preempt_normal_by_class(void **state)
{
    (void)state;
    fg_sched_t *s = sched_default();
    fg_decisions_t d;
    fg_decisions_init(&d);
    submit(s, 1, 'a', 8, FG_PRIO_NORMAL, 100000, 0, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    expect_start_on(&d, 1, 0xff);
    submit(s, 2, 'b', 4, FG_PRIO_HIGH, 1000, 0, 10);
    expect_quiet_pass(s, 10);
    expect_quiet_pass(s, 700);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* With preemption off nothing is ever preempted, not even low for high. */
static void test_preemption_off_preempts_nothing(void **state)
{
    (void)state;
    fg_config_t cfg;
    fg_config_default(&cfg);
    cfg.preemption = false;
    fg_sched_t *s = sched_new(&cfg);
    fg_decisions_t d;
    fg_decisions_init(&d);
    submit(s, 1, 'a', 8, FG_PRIO_LOW, 100000, 0, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    expect_start_on(&d, 1, 0xff);
    submit(s, 2, 'b', 8, FG_PRIO_HIGH, 1000, 0, 10);
    expect_quiet_pass(s, 10);
    expect_quiet_pass(s, 5000);
    assert_false(info(s, 1).preempting);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* ------------------------------------------------------------------ fair-share preemption */

/* Job 1 (a, 8 GPUs, normal) runs from t=0. Job 2 (b, 4 GPUs) arrives at t=100.
 * Entitlement: 8 up GPUs split 1:1 between the two accounts with demand -> 4 each; a runs
 * 8 > 4, b runs 0 < 4, so b is starved once job 2 has waited 600 s (t=700). Job 1 is a
 * long runner only at 0 + quantum 3600 = 3600:
 *   t=700  : waited 600, but job 1 ran 700 < 3600       -> nothing
 *   t=3599 : job 1 ran 3599 < 3600                      -> nothing; next wake-up 3600
 *   t=3600 : job 1 ran 3600 >= quantum, >= min_run      -> preempt job 1 for job 2
 * After the report job 2 starts on GPUs 0-3; job 1 is pending with 8 x 3600 = 28800 GPU-s
 * attained, its submit time 0 and no retry used. */
static void run_until_first_fair_share_preemption(fg_sched_t *s)
{
    fg_decisions_t d;
    fg_decisions_init(&d);
    submit(s, 1, 'a', 8, FG_PRIO_NORMAL, 100000, 0, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    expect_start_on(&d, 1, 0xff);

    submit(s, 2, 'b', 4, FG_PRIO_NORMAL, 1000, 0, 100);
    assert_int_equal(fg_sched_pass(s, 100, &d), FG_OK);
    assert_int_equal(d.npreempts, 0);
    assert_true(d.next_wake > 100 && d.next_wake <= 3600);
    expect_quiet_pass(s, 700);
    assert_int_equal(fg_sched_pass(s, 3599, &d), FG_OK);
    assert_int_equal(d.npreempts, 0);
    assert_int_equal(d.next_wake, 3600);
    expect_preemption(s, 3600, 1, FG_PREEMPT_FAIR_SHARE, 2);

    fg_attempt_t rec;
    assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_PREEMPTED, 3600, &rec), FG_OK);
    assert_int_equal(rec.new_state, FG_JOB_PENDING);
    assert_int_equal(rec.gpu_seconds, 28800);
    assert_int_equal(fg_sched_pass(s, 3600, &d), FG_OK);
    expect_start_on(&d, 2, 0x0f);
    fg_job_info_t j1 = info(s, 1);
    assert_int_equal(j1.state, FG_JOB_PENDING);
    assert_int_equal(j1.attained_gpu_s, 28800);
    assert_int_equal(j1.submit_time, 0);
    assert_int_equal(j1.retries_used, 0);
    fg_decisions_free(&d);
}

static void test_fair_share_preemption_comes_after_the_quantum(void **state)
{
    (void)state;
    fg_sched_t *s = sched_default();
    run_until_first_fair_share_preemption(s);
    fg_sched_free(s);
}

/* A fair-share victim must have saved its work once in this attempt: it needs
 * max(min_run_s, its checkpoint interval) of run time, so a job whose checkpoints are
 * rarer than min_run is not preempted before its first one (it would lose everything,
 * again and again). Job 1 (a, 8 GPUs, checkpoint every 5000 s) runs from t=0; job 2
 * (b, 4 GPUs) arrives at t=100:
 *   t=3600 : past quantum 3600 and min_run 600, but 3600 < 5000 -> nothing
 *   t=5000 : first checkpoint reached                          -> preempt job 1, which
 *            loses 8 x (5000 mod 5000) = 0 GPU-s */
static void test_a_fair_share_victim_has_reached_its_first_checkpoint(void **state)
{
    (void)state;
    fg_sched_t *s = sched_default();
    fg_decisions_t d;
    fg_decisions_init(&d);
    submit(s, 1, 'a', 8, FG_PRIO_NORMAL, 100000, 5000, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    expect_start_on(&d, 1, 0xff);
    submit(s, 2, 'b', 4, FG_PRIO_NORMAL, 1000, 0, 100);
    expect_quiet_pass(s, 100);
    expect_quiet_pass(s, 3600);
    expect_quiet_pass(s, 4999);
    expect_preemption(s, 5000, 1, FG_PREEMPT_FAIR_SHARE, 2);
    fg_attempt_t rec;
    assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_PREEMPTED, 5000, &rec), FG_OK);
    assert_int_equal(rec.lost_gpu_seconds, 0);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* With min_run_s = 1800, after the preemption above: job 2 ends at t=4000 and job 1
 * restarts (attempt 2) on the whole node. Job 3 (b, 4 GPUs) arrives at t=4010 and has
 * waited 600 s at t=4610. Job 1 has run 3600 + 610 s in all (past the quantum) but only
 * 610 s in this attempt:
 *   t=4610 : 610 < min_run 1800   -> nothing
 *   t=5799 : 1799 < 1800          -> nothing; next wake-up at most 4000 + 1800 = 5800
 *   t=5800 : 1800 >= 1800         -> preempt job 1 (attempt 2) for job 3 */
static void test_no_fair_share_preemption_within_the_minimum_run_time(void **state)
{
    (void)state;
    fg_config_t cfg;
    fg_config_default(&cfg);
    cfg.min_run_s = 1800;
    fg_sched_t *s = sched_new(&cfg);
    run_until_first_fair_share_preemption(s);

    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_attempt_ended(s, 2, 1, FG_END_COMPLETED, 4000, NULL), FG_OK);
    assert_int_equal(fg_sched_pass(s, 4000, &d), FG_OK);
    expect_start_on(&d, 1, 0xff);
    assert_int_equal(d.starts[0].attempt, 2);

    submit(s, 3, 'b', 4, FG_PRIO_NORMAL, 1000, 0, 4010);
    expect_quiet_pass(s, 4010);
    expect_quiet_pass(s, 4610);
    assert_int_equal(fg_sched_pass(s, 5799, &d), FG_OK);
    assert_int_equal(d.npreempts, 0);
    assert_true(d.next_wake > 5799 && d.next_wake <= 5800);
    expect_preemption(s, 5800, 1, FG_PREEMPT_FAIR_SHARE, 3);
    assert_int_equal(info(s, 1).attempt, 2);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* Fair share never stops a high job: job 1 (a, 8 GPUs, high) keeps running past the
 * quantum while job 2 (b, normal) waits. */
static void test_fair_share_does_not_preempt_high_jobs(void **state)
{
    (void)state;
    fg_sched_t *s = sched_default();
    fg_decisions_t d;
    fg_decisions_init(&d);
    submit(s, 1, 'a', 8, FG_PRIO_HIGH, 100000, 0, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    expect_start_on(&d, 1, 0xff);
    submit(s, 2, 'b', 4, FG_PRIO_NORMAL, 1000, 0, 100);
    expect_quiet_pass(s, 100);
    expect_quiet_pass(s, 3600);
    expect_quiet_pass(s, 7200);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* An account within its entitlement is not starved: job 1 (a, 4 GPUs) runs from t=0 and
 * job 2 (b, 4 GPUs) from t=0 too; job 3 (b, 4 GPUs) arrives at t=100. b runs 4 = its
 * entitlement (8 split 1:1), so even at t=7200 job 1 is not preempted for job 3. */
static void test_no_preemption_for_an_account_at_its_entitlement(void **state)
{
    (void)state;
    fg_sched_t *s = sched_default();
    fg_decisions_t d;
    fg_decisions_init(&d);
    submit(s, 1, 'a', 4, FG_PRIO_NORMAL, 100000, 0, 0);
    submit(s, 2, 'b', 4, FG_PRIO_NORMAL, 100000, 0, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    assert_int_equal(d.nstarts, 2);
    submit(s, 3, 'b', 4, FG_PRIO_NORMAL, 1000, 0, 100);
    expect_quiet_pass(s, 100);
    expect_quiet_pass(s, 7200);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* Under las a job in a lower LAS queue may stop a long runner in a higher one; "long
 * runner" as for fair share: at least quantum_s in all and min_run_s in this attempt.
 * Job 1 (a, 8 GPUs) runs from t=0; its attained service reaches the first threshold
 * (3600 GPU-s) at t=450, so it is in queue 1 from then on. Job 2 (b, 1 GPU, queue 0)
 * arrives at t=0 and has waited preempt_wait 600 s at t=600:
 *   t=600  : job 1 ran 600 >= min_run, but 600 < quantum 3600 -> nothing
 *   t=3599 : 3599 < 3600                                      -> nothing
 *   t=3600 : a long runner in a higher queue                  -> preempt job 1 (las) */
static void test_las_preempts_long_runners_of_higher_queues_after_the_quantum(void **state)
{
    (void)state;
    fg_config_t cfg;
    fg_config_default(&cfg);
    cfg.policy = FG_POLICY_LAS;
    fg_sched_t *s = sched_new(&cfg);
    fg_decisions_t d;
    fg_decisions_init(&d);
    submit(s, 1, 'a', 8, FG_PRIO_NORMAL, 100000, 0, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    expect_start_on(&d, 1, 0xff);
    submit(s, 2, 'b', 1, FG_PRIO_NORMAL, 1000, 0, 0);
    expect_quiet_pass(s, 0);
    expect_quiet_pass(s, 600);
    expect_quiet_pass(s, 3599);
    expect_preemption(s, 3600, 1, FG_PREEMPT_LAS, 2);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* Two blocked jobs in one pass (las, preempt_jobs_per_pass 2, quantum 500, no wait, no
 * minimum run). n0 runs, from t=0: job 1 (a, normal, 4 GPUs, checkpoint every 1000 s),
 * job 2 (a, low, 2 GPUs), job 3 (a, high, 2 GPUs). At t=1000 job 1 has attained
 * 4 x 1000 = 4000 GPU-s (LAS queue 1), job 2 2000 (queue 0).
 *   job 4 (b, normal, 8 GPUs, queue 0) comes first: job 1 is a legal las victim but frees
 *        only 4 of 8 GPUs (job 3 is high): no preemption;
 *   job 5 (b, high, 2 GPUs, attained 10000: queue 1) comes next: by class it may take only
 *        low jobs: job 2 (2 GPUs), although job 1 would lose less (1000 mod 1000 = 0).
 * Expected: exactly one preemption, job 2 (priority) for job 5. */
static void test_class_preemption_takes_only_low_jobs_after_another_jobs_attempt(void **state)
{
    (void)state;
    fg_config_t cfg;
    fg_config_default(&cfg);
    cfg.policy = FG_POLICY_LAS;
    cfg.preempt_jobs_per_pass = 2;
    cfg.quantum_s = 500;
    cfg.preempt_wait_s = 0;
    cfg.min_run_s = 0;
    fg_sched_t *s = sched_new(&cfg);
    fg_decisions_t d;
    fg_decisions_init(&d);
    submit(s, 1, 'a', 4, FG_PRIO_NORMAL, 100000, 1000, 0);
    submit(s, 2, 'a', 2, FG_PRIO_LOW, 100000, 0, 0);
    submit(s, 3, 'a', 2, FG_PRIO_HIGH, 100000, 0, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    assert_int_equal(d.nstarts, 3);
    submit(s, 4, 'b', 8, FG_PRIO_NORMAL, 1000, 0, 1000);
    submit(s, 5, 'b', 2, FG_PRIO_HIGH, 1000, 0, 1000);
    assert_int_equal(fg_sched_restore_pending(s, 5, 1, 0, 10000, 1000), FG_OK);
    assert_int_equal(fg_sched_pass(s, 1000, &d), FG_OK);
    assert_int_equal(d.nstarts, 0);
    assert_int_equal(d.npreempts, 1);
    assert_int_equal(d.preempts[0].job, 2);
    assert_int_equal(d.preempts[0].why, FG_PREEMPT_PRIORITY);
    assert_int_equal(d.preempts[0].for_job, 5);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* The GPUs freed by a preemption go to the job they were freed for. Under fifo, job 1
 * (a, low, 8 GPUs, submitted at 0) runs; job 2 (b, high, 8 GPUs) arrives at t=10 and
 * preempts it. Once the caller confirms (t=20), job 1 is pending again with its
 * original submit time 0, so fifo order puts it before job 2 (t=10); yet job 2 must get
 * the node: otherwise job 1 restarts and is preempted again at the next pass, forever. */
static void test_under_fifo_the_freed_gpus_go_to_the_high_job(void **state)
{
    (void)state;
    fg_config_t cfg;
    fg_config_default(&cfg);
    cfg.policy = FG_POLICY_FIFO;
    fg_sched_t *s = sched_new(&cfg);
    fg_decisions_t d;
    fg_decisions_init(&d);
    submit(s, 1, 'a', 8, FG_PRIO_LOW, 100000, 0, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    expect_start_on(&d, 1, 0xff);
    submit(s, 2, 'b', 8, FG_PRIO_HIGH, 1000, 0, 10);
    expect_preemption(s, 10, 1, FG_PREEMPT_PRIORITY, 2);
    assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_PREEMPTED, 20, NULL), FG_OK);
    assert_int_equal(fg_sched_pass(s, 20, &d), FG_OK);
    assert_int_equal(d.nstarts, 1);
    expect_start_on(&d, 2, 0xff);
    expect_quiet_pass(s, 20);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* A preemption frees GPUs its job can use: not GPUs reserved for a job ahead of it.
 * preempt_jobs_per_pass 2. Two 8-GPU nodes, from t=0: n0 runs job 1 (a, normal, 6 GPUs,
 * until 1000) and job 2 (a, low, 2 GPUs, until 900, checkpoint every 10 s); n1 runs job 3
 * (a, normal, 6 GPUs, long) and job 4 (a, low, 2 GPUs, long, no checkpoint). At t=10
 * job 5 (b, high, 8 GPUs, limit 100) and job 6 (b, high, 2 GPUs, limit 5000) arrive.
 *   job 5: needs a whole node; no low victims can make one (jobs 1 and 3 are normal): it
 *          reserves n0 from 1000;
 *   job 6: stopping job 2 would lose nothing (checkpoint), but its GPUs on n0 are
 *          reserved for job 5 from 1000 and job 6 would run until 5010: useless. Stopping
 *          job 4 (n1, 2 x 10 = 20 GPU-s lost) lets it start.
 * Expected: one preemption, job 4 for job 6; and after the caller confirms it, job 6
 * starts on n1's GPUs 6-7 with no further preemption. */
static void test_a_preemption_frees_gpus_its_job_can_use(void **state)
{
    (void)state;
    fg_config_t cfg;
    fg_config_default(&cfg);
    cfg.preempt_jobs_per_pass = 2;
    fg_sched_t *s = sched_new(&cfg);
    assert_int_equal(fg_sched_node_add(s, "n1", 8, "a100", FG_NODE_UP), 1);
    fg_decisions_t d;
    fg_decisions_init(&d);
    submit(s, 1, 'a', 6, FG_PRIO_NORMAL, 1000, 0, 0);
    submit(s, 3, 'a', 6, FG_PRIO_NORMAL, 100000, 0, 0);
    submit(s, 2, 'a', 2, FG_PRIO_LOW, 900, 10, 0);
    submit(s, 4, 'a', 2, FG_PRIO_LOW, 100000, 0, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    assert_int_equal(d.nstarts, 4);
    assert_int_equal(info(s, 1).allocs[0].node, 0);
    assert_int_equal(info(s, 2).allocs[0].node, 0);
    assert_int_equal(info(s, 3).allocs[0].node, 1);
    assert_int_equal(info(s, 4).allocs[0].node, 1);

    submit(s, 5, 'b', 8, FG_PRIO_HIGH, 100, 0, 10);
    submit(s, 6, 'b', 2, FG_PRIO_HIGH, 5000, 0, 10);
    expect_preemption(s, 10, 4, FG_PREEMPT_PRIORITY, 6);
    assert_int_equal(fg_sched_attempt_ended(s, 4, 1, FG_END_PREEMPTED, 20, NULL), FG_OK);
    assert_int_equal(fg_sched_pass(s, 20, &d), FG_OK);
    assert_int_equal(d.npreempts, 0);
    assert_int_equal(d.nstarts, 1);
    assert_int_equal(d.starts[0].job, 6);
    assert_int_equal(d.allocs[d.starts[0].alloc_off].node, 1);
    assert_int_equal(d.allocs[d.starts[0].alloc_off].gpu_mask, 0xc0);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* GPUs being freed for a job are never freed twice, even when the walk's plan lends them
 * to a reservation ahead of it. las (one band: submit order, whatever the class),
 * preempt_jobs_per_pass 2, two 8-GPU nodes. From t=0: job 1 and job 5 (a, low, 1 GPU,
 * until 2500) and job 6 (a, normal, 6 GPUs, until 2000) fill n0; job 2 (a, low, 8 GPUs,
 * until 3000) fills n1. At t=10 job 7 (b, normal, 8 GPUs) and job 8 (b, high, 2 GPUs,
 * limit 5000) arrive.
 *   job 7: reserves n0, whole from 2500 (it waits preempt_wait_s before it may preempt);
 *          once jobs 1 and 5 are being stopped, from 2000 (job 6's end);
 *   job 8: n0's GPUs are reserved for job 7 before job 8 could end, n1 frees at 3000:
 *          estimate 3000, so it preempts: jobs 1 and 5 (20 GPU-s lost) rather than job 2
 *          (80 GPU-s).
 * A second pass at t=15: n0 now frees at 2000, and job 7's reservation takes the GPUs of
 * jobs 1 and 5 too, so job 8's estimate is still 3000; it must not stop job 2 as well:
 * its claim waits for jobs 1 and 5. Once they stop, job 8 starts on their GPUs. */
static void test_gpus_being_freed_for_a_job_are_not_freed_twice(void **state)
{
    (void)state;
    fg_config_t cfg;
    fg_config_default(&cfg);
    cfg.policy = FG_POLICY_LAS;
    cfg.preempt_jobs_per_pass = 2;
    fg_sched_t *s = sched_new(&cfg);
    assert_int_equal(fg_sched_node_add(s, "n1", 8, "a100", FG_NODE_UP), 1);
    fg_decisions_t d;
    fg_decisions_init(&d);
    submit(s, 1, 'a', 1, FG_PRIO_LOW, 2500, 0, 0);
    submit(s, 2, 'a', 8, FG_PRIO_LOW, 3000, 0, 0);
    submit(s, 5, 'a', 1, FG_PRIO_LOW, 2500, 0, 0);
    submit(s, 6, 'a', 6, FG_PRIO_NORMAL, 2000, 0, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    assert_int_equal(d.nstarts, 4);
    assert_int_equal(info(s, 1).allocs[0].node, 0);
    assert_int_equal(info(s, 2).allocs[0].node, 1);
    assert_int_equal(info(s, 5).allocs[0].node, 0);
    assert_int_equal(info(s, 6).allocs[0].node, 0);

    submit(s, 7, 'b', 8, FG_PRIO_NORMAL, 5000, 0, 10);
    submit(s, 8, 'b', 2, FG_PRIO_HIGH, 5000, 0, 10);
    assert_int_equal(fg_sched_pass(s, 10, &d), FG_OK);
    assert_int_equal(d.nstarts, 0);
    assert_int_equal(d.npreempts, 2);
    assert_int_equal(d.preempts[0].for_job, 8);
    assert_int_equal(d.preempts[1].for_job, 8);
    assert_true(info(s, 1).preempting);
    assert_true(info(s, 5).preempting);
    assert_false(info(s, 2).preempting);
    /* the pass walked again after the preemption: n0 frees at 2000 for job 7 now */
    assert_int_equal(info(s, 7).estimated_start, 2000);

    expect_quiet_pass(s, 15);
    assert_false(info(s, 2).preempting);

    assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_PREEMPTED, 20, NULL), FG_OK);
    assert_int_equal(fg_sched_attempt_ended(s, 5, 1, FG_END_PREEMPTED, 20, NULL), FG_OK);
    assert_int_equal(fg_sched_pass(s, 20, &d), FG_OK);
    assert_int_equal(d.npreempts, 0);
    const fg_start_t *st = find_start(&d, 8);
    assert_non_null(st);
    assert_int_equal(d.allocs[st->alloc_off].node, 0);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_high_preempts_low_at_once),
        cmocka_unit_test(test_the_victim_is_the_job_that_loses_the_least_work),
        cmocka_unit_test(test_a_job_started_in_a_pass_is_not_preempted_in_it),
        cmocka_unit_test(test_high_does_not_preempt_normal_by_class),
        cmocka_unit_test(test_preemption_off_preempts_nothing),
        cmocka_unit_test(test_fair_share_preemption_comes_after_the_quantum),
        cmocka_unit_test(test_no_fair_share_preemption_within_the_minimum_run_time),
        cmocka_unit_test(test_a_fair_share_victim_has_reached_its_first_checkpoint),
        cmocka_unit_test(test_fair_share_does_not_preempt_high_jobs),
        cmocka_unit_test(test_no_preemption_for_an_account_at_its_entitlement),
        cmocka_unit_test(test_las_preempts_long_runners_of_higher_queues_after_the_quantum),
        cmocka_unit_test(test_class_preemption_takes_only_low_jobs_after_another_jobs_attempt),
        cmocka_unit_test(test_under_fifo_the_freed_gpus_go_to_the_high_job),
        cmocka_unit_test(test_a_preemption_frees_gpus_its_job_can_use),
        cmocka_unit_test(test_gpus_being_freed_for_a_job_are_not_freed_twice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
