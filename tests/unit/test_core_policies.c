/*
 * test_core_policies.c - the plan order of each policy (docs/scheduler.md, "One pass", 1).
 *
 *   fifo         submit time, then id, whatever the class or account;
 *   priority     class (high, normal, low), then submit time;
 *   round-robin  class; within a class members take turns, in index order;
 *   las          least attained service: LAS queue (thresholds 3600, 36000, 360000 GPU-s
 *                by default), then submit time;
 *   wfq          class, then fair share (test_core_fairshare.c).
 *
 * The trick: on one empty node every 1-GPU start takes the lowest free GPU, so after one
 * pass GPU k holds the k-th job in plan order, and the GPU masks spell out the order.
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

/* Accounts "a" (user "u") and "b" (user "v"), weight 1; one node of `gpus` GPUs. */
static fg_sched_t *sched_new(fg_policy_t policy, int gpus)
{
    fg_config_t cfg;
    fg_config_default(&cfg);
    cfg.policy = policy;
    fg_sched_t *s = fg_sched_new(&cfg);
    assert_non_null(s);
    assert_true(fg_sched_account_set(s, "a", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(s, "a", "u", 1.0) >= 0);
    assert_true(fg_sched_account_set(s, "b", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(s, "b", "v", 1.0) >= 0);
    assert_int_equal(fg_sched_node_add(s, "n0", gpus, "a100", FG_NODE_UP), 0);
    return s;
}

/* Submits 1-GPU job `id` of user u (account a) or v (account b). */
static void submit(fg_sched_t *s, fg_job_id_t id, char user, fg_prio_t prio, fg_time_t submit)
{
    fg_job_spec_t j = {.id = id,
                       .account = user == 'u' ? "a" : "b",
                       .user = user == 'u' ? "u" : "v",
                       .gpus = 1,
                       .gpu_type = NULL,
                       .time_limit_s = 1000,
                       .prio = prio,
                       .max_retries = 0,
                       .checkpoint_interval_s = 0,
                       .submit_time = submit};
    assert_int_equal(fg_sched_submit(s, &j, submit), FG_OK);
}

/* Runs one pass at `now` and asserts that GPU k went to want[k], k = 0 .. n-1, and that
 * nothing else started. */
static void expect_plan_order(fg_sched_t *s, fg_time_t now, const fg_job_id_t *want, int n)
{
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, now, &d), FG_OK);
    assert_int_equal(d.nstarts, n);
    fg_node_info_t ni;
    assert_int_equal(fg_sched_node_info(s, 0, &ni), FG_OK);
    for (int k = 0; k < n; k++)
        if (ni.gpu_job[k] != want[k]) {
            print_error("GPU %d holds job %llu, want job %llu (plan position %d)\n", k,
                        (unsigned long long)ni.gpu_job[k], (unsigned long long)want[k], k);
            fail();
        }
    fg_decisions_free(&d);
}

/* ------------------------------------------------------------------ the orders */

/* Jobs: 1 (v, normal, t=3), 2 (v, low, t=3), 3 (u, normal, t=4), 4 (u, high, t=5).
 * fifo: by submit time, then id: 1, 2, 3, 4 - the class does not count. */
static void test_fifo_is_submit_order_whatever_the_class(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(FG_POLICY_FIFO, 4);
    submit(s, 1, 'v', FG_PRIO_NORMAL, 3);
    submit(s, 2, 'v', FG_PRIO_LOW, 3);
    submit(s, 3, 'u', FG_PRIO_NORMAL, 4);
    submit(s, 4, 'u', FG_PRIO_HIGH, 5);
    const fg_job_id_t want[] = {1, 2, 3, 4};
    expect_plan_order(s, 10, want, 4);
    fg_sched_free(s);
}

/* The same jobs under priority: class first, then submit time: 4 (high), 1 and 3
 * (normal, t=3 before t=4), 2 (low). */
static void test_priority_is_class_then_submit_order(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(FG_POLICY_PRIORITY, 4);
    submit(s, 1, 'v', FG_PRIO_NORMAL, 3);
    submit(s, 2, 'v', FG_PRIO_LOW, 3);
    submit(s, 3, 'u', FG_PRIO_NORMAL, 4);
    submit(s, 4, 'u', FG_PRIO_HIGH, 5);
    const fg_job_id_t want[] = {4, 1, 3, 2};
    expect_plan_order(s, 10, want, 4);
    fg_sched_free(s);
}

/* Round-robin: u (member index 0) has jobs 10, 11, 12 (t=0, 1, 2), v (index 1) has 20, 21
 * (t=5, 6). Members take turns, one job each per round: 10, 20, 11, 21, 12 - where fifo
 * would give 10, 11, 12, 20, 21. */
static void test_round_robin_gives_members_turns(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(FG_POLICY_RR, 5);
    submit(s, 10, 'u', FG_PRIO_NORMAL, 0);
    submit(s, 11, 'u', FG_PRIO_NORMAL, 1);
    submit(s, 12, 'u', FG_PRIO_NORMAL, 2);
    submit(s, 20, 'v', FG_PRIO_NORMAL, 5);
    submit(s, 21, 'v', FG_PRIO_NORMAL, 6);
    const fg_job_id_t want[] = {10, 20, 11, 21, 12};
    expect_plan_order(s, 10, want, 5);
    fg_sched_free(s);
}

/* Round-robin still puts the class first: v's high job 22 (t=9) goes before everything,
 * then the normal jobs take turns: 22, 10, 20, 11. */
static void test_round_robin_serves_the_higher_class_first(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(FG_POLICY_RR, 4);
    submit(s, 10, 'u', FG_PRIO_NORMAL, 0);
    submit(s, 11, 'u', FG_PRIO_NORMAL, 1);
    submit(s, 20, 'v', FG_PRIO_NORMAL, 5);
    submit(s, 22, 'v', FG_PRIO_HIGH, 9);
    const fg_job_id_t want[] = {22, 10, 20, 11};
    expect_plan_order(s, 10, want, 4);
    fg_sched_free(s);
}

/* LAS: job 30 (t=0) has attained 4000 GPU-s (queue 1: past the first threshold, 3600),
 * job 31 (t=1) none, job 32 (t=2) 100 GPU-s (queue 0). Lower queues first, then submit
 * order: 31, 32, 30 - although 30 is the oldest. */
static void test_las_serves_the_least_attained_service_first(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(FG_POLICY_LAS, 3);
    submit(s, 30, 'u', FG_PRIO_NORMAL, 0);
    submit(s, 31, 'v', FG_PRIO_NORMAL, 1);
    submit(s, 32, 'u', FG_PRIO_NORMAL, 2);
    assert_int_equal(fg_sched_restore_pending(s, 30, 1, 0, 4000, 0), FG_OK);
    assert_int_equal(fg_sched_restore_pending(s, 32, 1, 0, 100, 0), FG_OK);
    const fg_job_id_t want[] = {31, 32, 30};
    expect_plan_order(s, 10, want, 3);
    fg_sched_free(s);
}

/* A pass is a fixpoint: run again at the same time with nothing new, it decides
 * nothing new (next_wake promises as much). Round-robin without backfill, one 4-GPU node:
 * u has jobs 1 (1 GPU) and 2 (2 GPUs), v has job 3 (4 GPUs), all at t=0. The first pass
 * walks 1 (u's turn: starts on GPU 0), 3 (v's turn: 3 GPUs free, blocked, and without
 * backfill it blocks everything behind it), 2. A second pass at t=0 must not start job 2
 * by beginning a new round with u's next job. */
static void test_round_robin_a_second_pass_decides_nothing_new(void **state)
{
    (void)state;
    fg_config_t cfg;
    fg_config_default(&cfg);
    cfg.policy = FG_POLICY_RR;
    cfg.backfill = false;
    fg_sched_t *s = fg_sched_new(&cfg);
    assert_non_null(s);
    assert_true(fg_sched_account_set(s, "a", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(s, "a", "u", 1.0) >= 0);
    assert_true(fg_sched_account_set(s, "b", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(s, "b", "v", 1.0) >= 0);
    assert_int_equal(fg_sched_node_add(s, "n0", 4, "a100", FG_NODE_UP), 0);
    fg_job_spec_t j = {.id = 1,
                       .account = "a",
                       .user = "u",
                       .gpus = 1,
                       .time_limit_s = 1000,
                       .prio = FG_PRIO_NORMAL,
                       .submit_time = 0};
    assert_int_equal(fg_sched_submit(s, &j, 0), FG_OK);
    j.id = 2;
    j.gpus = 2;
    assert_int_equal(fg_sched_submit(s, &j, 0), FG_OK);
    j.id = 3;
    j.gpus = 4;
    j.account = "b";
    j.user = "v";
    assert_int_equal(fg_sched_submit(s, &j, 0), FG_OK);
    const fg_job_id_t want[] = {1};
    expect_plan_order(s, 0, want, 1);
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    assert_int_equal(d.nstarts, 0);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* The policies' names, as the configuration and the API spell them. */
static void test_policy_names_parse_both_ways(void **state)
{
    (void)state;
    const char *const names[FG_POLICY_COUNT] = {
        [FG_POLICY_WFQ] = "wfq",           [FG_POLICY_FIFO] = "fifo",
        [FG_POLICY_PRIORITY] = "priority", [FG_POLICY_RR] = "round-robin",
        [FG_POLICY_LAS] = "las",           [FG_POLICY_FAIR] = "fair",
    };
    for (int p = 0; p < FG_POLICY_COUNT; p++) {
        assert_string_equal(fg_policy_name((fg_policy_t)p), names[p]);
        assert_int_equal(fg_policy_parse(names[p]), p);
    }
    assert_int_equal(fg_policy_parse("rr"), FG_POLICY_RR);
    assert_int_equal(fg_policy_parse("lottery"), -1);
    assert_int_equal(fg_policy_parse(NULL), -1);
    assert_int_equal(fg_prio_parse("high"), FG_PRIO_HIGH);
    assert_int_equal(fg_prio_parse("urgent"), -1);
    assert_string_equal(fg_prio_name(FG_PRIO_LOW), "low");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_is_submit_order_whatever_the_class),
        cmocka_unit_test(test_priority_is_class_then_submit_order),
        cmocka_unit_test(test_round_robin_gives_members_turns),
        cmocka_unit_test(test_round_robin_serves_the_higher_class_first),
        cmocka_unit_test(test_las_serves_the_least_attained_service_first),
        cmocka_unit_test(test_round_robin_a_second_pass_decides_nothing_new),
        cmocka_unit_test(test_policy_names_parse_both_ways),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
