/*
 * test_core_restore.c - a controller restart changes no decision.
 *
 * The controller persists what fg_sched_job_info and the usage getters export, and after
 * a restart rebuilds a scheduler with fg_sched_restore_running (running jobs),
 * fg_sched_submit_restored + fg_sched_restore_pending (pending jobs), the usage setters,
 * fg_sched_restore_claim (jobs preemptions were issued for) and fg_sched_set_rr_turn. From then on
 * the restored scheduler must decide exactly what the original decides, fed the same events
 * (core.h, "Restores ..."; issue 2: "usage and the attempt history must be exportable so the
 * controller can persist them").
 *
 * Each test runs a history on the original, exports it into a fresh scheduler at time T,
 * then feeds both the same events and compares every pass.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/internal.h" /* fg__sched_check */
#include "fairgpu/core.h"

/* ------------------------------------------------------------------ the world */

#define MAXJ 64

/* Specs of the jobs submitted so far, by id (what the controller's store keeps). */
typedef struct world {
    fg_config_t cfg;
    fg_job_spec_t spec[MAXJ];
    bool known[MAXJ];
} world_t;

/* Accounts a (weight 1; user u) and b (weight 1; user v); one 8-GPU node n0. */
static fg_sched_t *sched_new(const world_t *w)
{
    fg_sched_t *s = fg_sched_new(&w->cfg);
    assert_non_null(s);
    assert_true(fg_sched_account_set(s, "a", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(s, "a", "u", 1.0) >= 0);
    assert_true(fg_sched_account_set(s, "b", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(s, "b", "v", 1.0) >= 0);
    assert_int_equal(fg_sched_node_add(s, "n0", 8, "a100", FG_NODE_UP), 0);
    return s;
}

static void submit(world_t *w, fg_sched_t *s, fg_job_id_t id, char account, int gpus,
                   fg_prio_t prio, int32_t max_retries, fg_time_t now)
{
    assert_true(id < MAXJ);
    fg_job_spec_t j = {.id = id,
                       .account = account == 'a' ? "a" : "b",
                       .user = account == 'a' ? "u" : "v",
                       .gpus = gpus,
                       .gpu_type = NULL,
                       .time_limit_s = 100000,
                       .prio = prio,
                       .max_retries = max_retries,
                       .checkpoint_interval_s = 0,
                       .submit_time = now};
    w->spec[id] = j;
    w->known[id] = true;
    assert_int_equal(fg_sched_submit(s, &j, now), FG_OK);
}

/* The restart: fills the fresh scheduler s (same accounts, members and nodes as old,
 * created in the same order) from what `old` exports at time `now`. Returns s. */
static fg_sched_t *restore_onto(world_t *w, fg_sched_t *old, fg_sched_t *s, fg_time_t now)
{
    for (size_t a = 0; a < fg_sched_account_count(old); a++)
        assert_int_equal(
            fg_sched_account_set_usage(s, (int)a, fg_sched_account_usage(old, (int)a, now), now),
            FG_OK);
    for (size_t m = 0; m < fg_sched_member_count(old); m++)
        assert_int_equal(
            fg_sched_member_set_usage(s, (int)m, fg_sched_member_usage(old, (int)m, now), now),
            FG_OK);
    for (fg_job_id_t id = 1; id < MAXJ; id++) {
        fg_job_info_t ji;
        if (!w->known[id] || fg_sched_job_info(old, id, &ji) != FG_OK)
            continue;
        assert_false(ji.preempting); /* the tests confirm preemptions before a restart */
        fg_job_spec_t spec = w->spec[id];
        spec.submit_time = ji.submit_time;
        if (ji.state == FG_JOB_RUNNING) {
            assert_int_equal(fg_sched_restore_running(s, &spec, ji.attempt, ji.retries_used,
                                                      ji.attained_gpu_s, ji.start_time, ji.allocs,
                                                      ji.nallocs, now),
                             FG_OK);
        } else {
            assert_int_equal(fg_sched_submit_restored(s, &spec, now), FG_OK);
            assert_int_equal(fg_sched_restore_pending(s, id, ji.attempt, ji.retries_used,
                                                      ji.attained_gpu_s, ji.eligible_time),
                             FG_OK);
            if (ji.claimed)
                assert_int_equal(fg_sched_restore_claim(s, id, ji.claim_victims), FG_OK);
        }
    }
    assert_int_equal(fg_sched_set_rr_turn(s, fg_sched_rr_turn(old)), FG_OK);
    return s;
}

/* The restart onto a scheduler built like sched_new's. */
static fg_sched_t *restore(world_t *w, fg_sched_t *old, fg_time_t now)
{
    return restore_onto(w, old, sched_new(w), now);
}

/* One pass at `now` on both; their decisions must be the same. Returns the number of
 * preemptions. */
static size_t pass_both(fg_sched_t *old, fg_sched_t *restored, fg_time_t now)
{
    fg_decisions_t a, b;
    fg_decisions_init(&a);
    fg_decisions_init(&b);
    assert_int_equal(fg_sched_pass(old, now, &a), FG_OK);
    assert_int_equal(fg_sched_pass(restored, now, &b), FG_OK);
    fg__sched_check(old); /* counts in step on both (debug builds) */
    fg__sched_check(restored);
    if (a.nstarts != b.nstarts || a.npreempts != b.npreempts || a.next_wake != b.next_wake) {
        print_error("t=%lld: original %zu starts, %zu preemptions, wake %lld; restored %zu, %zu, "
                    "wake %lld\n",
                    (long long)now, a.nstarts, a.npreempts, (long long)a.next_wake, b.nstarts,
                    b.npreempts, (long long)b.next_wake);
        fail();
    }
    for (size_t i = 0; i < a.nstarts; i++) {
        assert_int_equal(a.starts[i].job, b.starts[i].job);
        assert_int_equal(a.starts[i].attempt, b.starts[i].attempt);
        assert_int_equal(a.allocs[a.starts[i].alloc_off].gpu_mask,
                         b.allocs[b.starts[i].alloc_off].gpu_mask);
    }
    for (size_t i = 0; i < a.npreempts; i++) {
        assert_int_equal(a.preempts[i].job, b.preempts[i].job);
        assert_int_equal(a.preempts[i].why, b.preempts[i].why);
        assert_int_equal(a.preempts[i].for_job, b.preempts[i].for_job);
    }
    assert_int_equal(a.next_wake, b.next_wake);
    size_t n = a.npreempts;
    fg_decisions_free(&a);
    fg_decisions_free(&b);
    return n;
}

static int32_t start_now(fg_sched_t *s, fg_time_t now, fg_job_id_t id)
{
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, now, &d), FG_OK);
    int32_t attempt = 0;
    for (size_t i = 0; i < d.nstarts; i++)
        if (d.starts[i].job == id)
            attempt = d.starts[i].attempt;
    fg_decisions_free(&d);
    return attempt;
}

/* ------------------------------------------------------------------ tests */

/* The quantum counts the run time of earlier attempts. Defaults (quantum 3600, wait 600,
 * min_run 600, backoff 30). Job 1 (a, 8 GPUs, one retry) runs 0..3000, fails, and runs
 * again from 3030 (attempt 2). Job 2 (b, 4 GPUs) arrives at 3100; the restart happens
 * then. At t=3700 job 2 has waited 600 s and job 1 has run 3000 + 670 = 3670 >= 3600 in
 * all and 670 >= 600 in this attempt: both schedulers preempt job 1 for job 2 (the
 * restored one knows the 3000 s from attained_gpu_s = 8 x 3000). */
static void test_a_restored_scheduler_counts_earlier_attempts_toward_the_quantum(void **state)
{
    (void)state;
    static world_t w;
    memset(&w, 0, sizeof w);
    fg_config_default(&w.cfg);
    w.cfg.policy = FG_POLICY_WFQ; /* (its preemption waits preempt_wait_s, whatever the estimate) */
    fg_sched_t *old = sched_new(&w);
    submit(&w, old, 1, 'a', 8, FG_PRIO_NORMAL, 1, 0);
    assert_int_equal(start_now(old, 0, 1), 1);
    assert_int_equal(fg_sched_attempt_ended(old, 1, 1, FG_END_FAILED, 3000, NULL), FG_OK);
    assert_int_equal(start_now(old, 3030, 1), 2);
    submit(&w, old, 2, 'b', 4, FG_PRIO_NORMAL, 0, 3100);

    fg_sched_t *restored = restore(&w, old, 3100);
    assert_int_equal(pass_both(old, restored, 3100), 0);
    assert_int_equal(pass_both(old, restored, 3699), 0);
    assert_int_equal(pass_both(old, restored, 3700), 1);
    fg_sched_free(old);
    fg_sched_free(restored);
}

/* The preemption wait of a requeued job counts from when it is eligible again (core.h,
 * fg_sched_restore_pending). quantum and min_run 100 s. Job 1 (a, 4 GPUs, one retry) runs
 * 0..4000 and fails (eligible again at 4000 + 30 = 4030); job 2 (b, 8 GPUs, waiting since
 * t=10) takes the whole node at 4000. The restart happens at 4050. Job 1 is starved (a
 * runs 0 + 4 <= its 4 entitled GPUs) but has waited only since 4030: no preemption at
 * 4100 although job 2 is a long runner by then; job 2 is preempted at 4030 + 600 = 4630.
 * The restored scheduler must agree at every pass. */
static void test_a_restored_scheduler_counts_the_wait_from_the_requeue(void **state)
{
    (void)state;
    static world_t w;
    memset(&w, 0, sizeof w);
    fg_config_default(&w.cfg);
    w.cfg.policy = FG_POLICY_WFQ; /* (its preemption waits preempt_wait_s, whatever the estimate) */
    w.cfg.quantum_s = 100;
    w.cfg.min_run_s = 100;
    fg_sched_t *old = sched_new(&w);
    submit(&w, old, 1, 'a', 4, FG_PRIO_NORMAL, 1, 0);
    assert_int_equal(start_now(old, 0, 1), 1);
    submit(&w, old, 2, 'b', 8, FG_PRIO_NORMAL, 0, 10);
    assert_int_equal(fg_sched_attempt_ended(old, 1, 1, FG_END_FAILED, 4000, NULL), FG_OK);
    assert_int_equal(start_now(old, 4000, 2), 1);

    fg_sched_t *restored = restore(&w, old, 4050);
    assert_int_equal(pass_both(old, restored, 4050), 0);
    assert_int_equal(pass_both(old, restored, 4100), 0);
    assert_int_equal(pass_both(old, restored, 4629), 0);
    assert_int_equal(pass_both(old, restored, 4630), 1);
    fg_sched_free(old);
    fg_sched_free(restored);
}

/* A restart keeps every pending job, even where the user is above its pending cap (a
 * requeue is not a submit). max_pending_per_user 1. u's job 1 (low, 8 GPUs) runs, u's job 2
 * (1 GPU) waits: u is at its cap. v's high job 3 preempts job 1, which is requeued: u now
 * has 2 pending jobs. The restored scheduler must take both (and then decide the same). */
static void test_a_restart_keeps_pending_jobs_above_the_users_cap(void **state)
{
    (void)state;
    static world_t w;
    memset(&w, 0, sizeof w);
    fg_config_default(&w.cfg);
    w.cfg.max_pending_per_user = 1;
    fg_sched_t *old = sched_new(&w);
    submit(&w, old, 1, 'a', 8, FG_PRIO_LOW, 0, 0);
    assert_int_equal(start_now(old, 0, 1), 1);
    submit(&w, old, 2, 'a', 1, FG_PRIO_NORMAL, 0, 5);
    submit(&w, old, 3, 'b', 8, FG_PRIO_HIGH, 0, 10);
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(old, 10, &d), FG_OK);
    assert_int_equal(d.npreempts, 1);
    fg_decisions_free(&d);
    assert_int_equal(fg_sched_attempt_ended(old, 1, 1, FG_END_PREEMPTED, 20, NULL), FG_OK);
    fg_member_info_t mi;
    assert_int_equal(fg_sched_member_info(old, fg_sched_member_find(old, "a", "u"), &mi), FG_OK);
    assert_int_equal(mi.pending_jobs, 2);

    fg_sched_t *restored = restore(&w, old, 20);
    assert_int_equal(fg_sched_pending_count(restored), fg_sched_pending_count(old));
    pass_both(old, restored, 20);
    fg_sched_free(old);
    fg_sched_free(restored);
}

/* A restart keeps round-robin's turn. One 3-GPU node; u has 1-GPU jobs 1, 2, 3 and v has
 * 4, 5 (all at t=0). The first pass starts 1 (u), 4 (v), 2 (u): the turn is v's. Job 1
 * ends at 100 and the controller restarts then: the next pass gives the GPU to v's job 5
 * in both schedulers (not to u's job 3, as a fresh turn would). */
static void test_a_restart_keeps_the_round_robin_turn(void **state)
{
    (void)state;
    static world_t w;
    memset(&w, 0, sizeof w);
    fg_config_default(&w.cfg);
    w.cfg.policy = FG_POLICY_RR;
    fg_sched_t *old = fg_sched_new(&w.cfg);
    assert_non_null(old);
    assert_true(fg_sched_account_set(old, "a", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(old, "a", "u", 1.0) >= 0);
    assert_true(fg_sched_account_set(old, "b", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(old, "b", "v", 1.0) >= 0);
    assert_int_equal(fg_sched_node_add(old, "n0", 3, "a100", FG_NODE_UP), 0);
    for (fg_job_id_t id = 1; id <= 5; id++)
        submit(&w, old, id, id <= 3 ? 'a' : 'b', 1, FG_PRIO_NORMAL, 0, 0);
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(old, 0, &d), FG_OK);
    assert_int_equal(d.nstarts, 3);
    fg_decisions_free(&d);
    assert_int_equal(fg_sched_attempt_ended(old, 1, 1, FG_END_COMPLETED, 100, NULL), FG_OK);

    fg_sched_t *fresh = fg_sched_new(&w.cfg);
    assert_non_null(fresh);
    assert_true(fg_sched_account_set(fresh, "a", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(fresh, "a", "u", 1.0) >= 0);
    assert_true(fg_sched_account_set(fresh, "b", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(fresh, "b", "v", 1.0) >= 0);
    assert_int_equal(fg_sched_node_add(fresh, "n0", 3, "a100", FG_NODE_UP), 0);
    fg_sched_t *restored = restore_onto(&w, old, fresh, 100);
    assert_int_equal(start_now(old, 100, 5), 1);
    assert_int_equal(start_now(restored, 100, 5), 1);
    fg_sched_free(old);
    fg_sched_free(restored);
}

/* A restart keeps the claim of a job a preemption was issued for. fifo, one 8-GPU node:
 * job 1 (a, low, 8 GPUs) runs; job 2 (b, high, 8 GPUs) arrives at 10 and preempts it; the
 * caller confirms at 20 and restarts then. The freed node goes to job 2 in both
 * schedulers, although fifo order alone (submit 0 before 10) would restart job 1. */
static void test_a_restart_keeps_the_claim_of_a_preemption(void **state)
{
    (void)state;
    static world_t w;
    memset(&w, 0, sizeof w);
    fg_config_default(&w.cfg);
    w.cfg.policy = FG_POLICY_FIFO;
    fg_sched_t *old = sched_new(&w);
    submit(&w, old, 1, 'a', 8, FG_PRIO_LOW, 0, 0);
    assert_int_equal(start_now(old, 0, 1), 1);
    submit(&w, old, 2, 'b', 8, FG_PRIO_HIGH, 0, 10);
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(old, 10, &d), FG_OK);
    assert_int_equal(d.npreempts, 1);
    fg_decisions_free(&d);
    assert_int_equal(fg_sched_attempt_ended(old, 1, 1, FG_END_PREEMPTED, 20, NULL), FG_OK);

    fg_sched_t *restored = restore(&w, old, 20);
    assert_int_equal(start_now(old, 20, 2), 1);
    assert_int_equal(start_now(restored, 20, 2), 1);
    fg_sched_free(old);
    fg_sched_free(restored);
}

/* Ties between victims do not depend on where the core keeps its jobs. One 2-GPU node:
 * low jobs 5 and 3 (submitted in that order, 1 GPU each, no checkpoint) both start at 0;
 * high job 9 arrives at 10 and needs one GPU: either victim loses 1 x 10 GPU-s. The
 * restored scheduler (jobs restored in id order, 3 then 5) must pick the same one. */
static void test_a_restart_breaks_victim_ties_the_same_way(void **state)
{
    (void)state;
    static world_t w;
    memset(&w, 0, sizeof w);
    fg_config_default(&w.cfg);
    fg_sched_t *old = fg_sched_new(&w.cfg);
    assert_non_null(old);
    assert_true(fg_sched_account_set(old, "a", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(old, "a", "u", 1.0) >= 0);
    assert_true(fg_sched_account_set(old, "b", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(old, "b", "v", 1.0) >= 0);
    assert_int_equal(fg_sched_node_add(old, "n0", 2, "a100", FG_NODE_UP), 0);
    submit(&w, old, 5, 'a', 1, FG_PRIO_LOW, 0, 0);
    submit(&w, old, 3, 'a', 1, FG_PRIO_LOW, 0, 0);
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(old, 0, &d), FG_OK);
    assert_int_equal(d.nstarts, 2);
    fg_decisions_free(&d);

    fg_sched_t *fresh = fg_sched_new(&w.cfg);
    assert_non_null(fresh);
    assert_true(fg_sched_account_set(fresh, "a", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(fresh, "a", "u", 1.0) >= 0);
    assert_true(fg_sched_account_set(fresh, "b", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(fresh, "b", "v", 1.0) >= 0);
    assert_int_equal(fg_sched_node_add(fresh, "n0", 2, "a100", FG_NODE_UP), 0);
    fg_sched_t *restored = restore_onto(&w, old, fresh, 10);
    submit(&w, old, 9, 'b', 1, FG_PRIO_HIGH, 0, 10);
    assert_int_equal(fg_sched_submit(restored, &w.spec[9], 10), FG_OK);
    assert_int_equal(pass_both(old, restored, 10), 1);
    fg_sched_free(old);
    fg_sched_free(restored);
}

/* A restart is invisible in the common case: two accounts share the node with usage
 * behind them, jobs run, wait, fail and retry; the restored scheduler starts the same jobs
 * on the same GPUs at every later pass. */
static void test_a_restored_scheduler_starts_the_same_jobs(void **state)
{
    (void)state;
    static world_t w;
    memset(&w, 0, sizeof w);
    fg_config_default(&w.cfg);
    w.cfg.half_life_s = 3600;
    w.cfg.preemption = false;
    fg_sched_t *old = sched_new(&w);
    for (fg_job_id_t id = 1; id <= 12; id++)
        submit(&w, old, id, id % 3 ? 'a' : 'b', (int)(1 + id % 4), FG_PRIO_NORMAL, 2,
               (fg_time_t)id);
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(old, 20, &d), FG_OK);
    assert_true(d.nstarts > 0);
    /* the first started job fails (retry with backoff), the second completes */
    assert_int_equal(fg_sched_attempt_ended(old, d.starts[0].job, 1, FG_END_FAILED, 500, NULL),
                     FG_OK);
    if (d.nstarts > 1)
        assert_int_equal(
            fg_sched_attempt_ended(old, d.starts[1].job, 1, FG_END_COMPLETED, 700, NULL), FG_OK);
    fg_decisions_free(&d);

    fg_sched_t *restored = restore(&w, old, 800);
    for (fg_time_t t = 800; t <= 4000; t += 400) {
        pass_both(old, restored, t);
        /* end the oldest running job on both */
        for (fg_job_id_t id = 1; id <= 12; id++) {
            fg_job_info_t ji;
            if (fg_sched_job_info(old, id, &ji) == FG_OK && ji.state == FG_JOB_RUNNING) {
                assert_int_equal(
                    fg_sched_attempt_ended(old, id, ji.attempt, FG_END_COMPLETED, t + 100, NULL),
                    FG_OK);
                assert_int_equal(fg_sched_attempt_ended(restored, id, ji.attempt, FG_END_COMPLETED,
                                                        t + 100, NULL),
                                 FG_OK);
                break;
            }
        }
    }
    fg_sched_free(old);
    fg_sched_free(restored);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_restored_scheduler_counts_earlier_attempts_toward_the_quantum),
        cmocka_unit_test(test_a_restored_scheduler_counts_the_wait_from_the_requeue),
        cmocka_unit_test(test_a_restart_keeps_pending_jobs_above_the_users_cap),
        cmocka_unit_test(test_a_restart_keeps_the_round_robin_turn),
        cmocka_unit_test(test_a_restart_keeps_the_claim_of_a_preemption),
        cmocka_unit_test(test_a_restart_breaks_victim_ties_the_same_way),
        cmocka_unit_test(test_a_restored_scheduler_starts_the_same_jobs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
