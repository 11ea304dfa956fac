/*
 * test_core_why.c - why one pending job waits, with its evidence (fairgpu/why.h), and
 * when an account's fair-share factor recovers (fg_fair_recovers_in, fairshare.h).
 *
 * Each test is a scenario and the numbers `fairgpu why` would show for it: the free
 * GPUs and the largest block per node of a fragmented cluster, the nodes that could
 * hold the job and when, its place in the plan order and why each job before it goes
 * first, the GPUs of its type, and the recovery time of an account over its share.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "fairgpu/core.h"
#include "fairgpu/fairshare.h"
#include "fairgpu/why.h"

/* ------------------------------------------------------------------ helpers */

/* wfq, half-life 1 h, no preemption (the scenarios keep their jobs running) */
static fg_sched_t *sched_new(void)
{
    fg_config_t cfg;
    fg_config_default(&cfg);
    cfg.policy = FG_POLICY_WFQ;
    cfg.half_life_s = 3600;
    cfg.preemption = false;
    fg_sched_t *s = fg_sched_new(&cfg);
    assert_non_null(s);
    assert_true(fg_sched_account_set(s, "a", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(s, "a", "u", 1.0) >= 0);
    assert_true(fg_sched_account_set(s, "b", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(s, "b", "v", 1.0) >= 0);
    return s;
}

static void submit(fg_sched_t *s, fg_job_id_t id, const char *acct, const char *user, int gpus,
                   const char *type, fg_prio_t prio, fg_time_t limit, fg_time_t now)
{
    fg_job_spec_t j = {.id = id,
                       .account = acct,
                       .user = user,
                       .gpus = gpus,
                       .gpu_type = type,
                       .time_limit_s = limit,
                       .prio = prio,
                       .max_retries = 0,
                       .submit_time = now};
    assert_int_equal(fg_sched_submit(s, &j, now), FG_OK);
}

static size_t pass(fg_sched_t *s, fg_time_t now)
{
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, now, &d), FG_OK);
    size_t n = d.nstarts;
    fg_decisions_free(&d);
    return n;
}

static fg_why_t why(fg_sched_t *s, fg_job_id_t id, fg_time_t now)
{
    fg_why_t w;
    assert_int_equal(fg_sched_why(s, id, now, 1000, &w), FG_OK);
    assert_int_equal(w.id, id);
    return w;
}

/* ------------------------------------------------------------------ fragmentation */

/* Two 8-GPU nodes, 3 GPUs busy on each (job 2 on one until 201, job 1 on the other until
 * 300): an 8-GPU job sees 10 free, the largest block 5, and both nodes as holders, job
 * 2's first (free at 201, once job 2 ends), then job 1's (300). */
static void test_fragmentation_shows_the_free_blocks_and_the_holders(void **st)
{
    (void)st;
    fg_sched_t *s = sched_new();
    assert_true(fg_sched_node_add(s, "n0", 8, "a100", FG_NODE_UP) >= 0);
    assert_true(fg_sched_node_add(s, "n1", 8, "a100", FG_NODE_UP) >= 0);
    /* 10 fills a node, 1 and 11 share the other; 10 ends, 2 takes its node, 11 ends */
    submit(s, 10, "a", "u", 8, NULL, FG_PRIO_NORMAL, 1000, 0);
    submit(s, 1, "a", "u", 3, NULL, FG_PRIO_NORMAL, 300, 0);
    submit(s, 11, "a", "u", 5, NULL, FG_PRIO_NORMAL, 1000, 0);
    assert_int_equal(pass(s, 0), 3);
    assert_int_equal(fg_sched_attempt_ended(s, 10, 1, FG_END_COMPLETED, 1, NULL), FG_OK);
    submit(s, 2, "a", "u", 3, NULL, FG_PRIO_NORMAL, 200, 1);
    assert_int_equal(pass(s, 1), 1);
    assert_int_equal(fg_sched_attempt_ended(s, 11, 1, FG_END_COMPLETED, 1, NULL), FG_OK);
    assert_int_equal(fg_sched_gpus_free(s), 10);
    submit(s, 4, "b", "v", 8, NULL, FG_PRIO_NORMAL, 100, 1);
    assert_int_equal(pass(s, 1), 0);
    fg_why_t w = why(s, 4, 1);
    assert_int_equal(w.code, FG_REASON_FRAGMENTATION);
    assert_int_equal(w.gpus, 8);
    assert_int_equal(w.type_free, 10);
    assert_int_equal(w.type_up, 16);
    assert_int_equal(w.largest_free, 5);
    assert_int_equal(w.nlargest, 2);
    assert_int_equal(w.largest[0].free_gpus, 5);
    assert_int_equal(w.holders_total, 2);
    assert_int_equal(w.nholders, 2);
    assert_int_equal(w.holders[0].at, 201); /* job 2's node first */
    assert_int_equal(w.holders[0].last, 2);
    assert_int_equal(w.holders[1].at, 300);
    assert_int_equal(w.holders[1].last, 1);
    assert_string_not_equal(w.holders[0].name, w.holders[1].name);
    assert_int_equal(w.position, 1); /* nothing before it */
    assert_int_equal(w.ahead_jobs, 0);
    fg_sched_free(s);
}

/* One 8-GPU node, job 1 on 4 GPUs until 100; job 2 (8 GPUs) goes first and holds the node
 * from 100; job 3 (4 GPUs, would end after 100) cannot backfill: reservation, held for
 * job 2 from 100, and the node could hold it at 100 once job 1 ends. */
static void test_a_reservation_names_its_holder_and_start(void **st)
{
    (void)st;
    fg_sched_t *s = sched_new();
    assert_true(fg_sched_node_add(s, "n0", 8, "a100", FG_NODE_UP) >= 0);
    submit(s, 1, "a", "u", 4, NULL, FG_PRIO_NORMAL, 100, 0);
    assert_int_equal(pass(s, 0), 1);
    submit(s, 2, "b", "v", 8, NULL, FG_PRIO_HIGH, 100, 1);
    submit(s, 3, "a", "u", 4, NULL, FG_PRIO_NORMAL, 1000, 2);
    assert_int_equal(pass(s, 3), 0);
    fg_why_t w = why(s, 3, 3);
    assert_int_equal(w.code, FG_REASON_RESERVATION);
    assert_int_equal(w.res_holder, 2);
    assert_int_equal(w.res_from, 100);
    assert_int_equal(w.type_free, 4);
    assert_int_equal(w.nholders, 1);
    assert_int_equal(w.holders[0].at, 3); /* 4 free now: it fits, but they are held */
    assert_int_equal(w.position, 2);
    assert_int_equal(w.ahead[0].id, 2);
    assert_int_equal(w.ahead[0].first, FG_FIRST_CLASS);
    fg_sched_free(s);
}

/* A 16-GPU job needs two whole nodes: each node is a holder once all its jobs end. */
static void test_a_whole_node_job_counts_whole_nodes(void **st)
{
    (void)st;
    fg_sched_t *s = sched_new();
    assert_true(fg_sched_node_add(s, "n0", 8, "a100", FG_NODE_UP) >= 0);
    assert_true(fg_sched_node_add(s, "n1", 8, "a100", FG_NODE_UP) >= 0);
    submit(s, 1, "a", "u", 1, NULL, FG_PRIO_NORMAL, 500, 0);
    assert_int_equal(pass(s, 0), 1);
    submit(s, 2, "b", "v", 16, NULL, FG_PRIO_NORMAL, 100, 1);
    assert_int_equal(pass(s, 1), 0);
    fg_why_t w = why(s, 2, 1);
    assert_int_equal(w.type_free, 15);
    assert_int_equal(w.nholders, 2);
    assert_int_equal(w.holders[0].at, 1); /* the free node, now */
    assert_int_equal(w.holders[0].last, 0);
    assert_int_equal(w.holders[1].at, 500);
    assert_int_equal(w.holders[1].last, 1);
    fg_sched_free(s);
}

/* ------------------------------------------------------------------ fair share, position */

/* Account a used 4 GPU-hours, b nothing; one GPU, busy. a's job came first, yet b's goes
 * before it: lower usage for its share. a's numbers (accounts a, b and "default" of
 * weight 1): usage share ~1 against a share of 1/3 (factor ~2^-3), entitlement 1/3 of
 * the one GPU. */
static void test_an_account_over_its_share_waits_behind_another(void **st)
{
    (void)st;
    fg_sched_t *s = sched_new();
    assert_true(fg_sched_node_add(s, "n0", 1, "a100", FG_NODE_UP) >= 0);
    submit(s, 1, "b", "v", 1, NULL, FG_PRIO_NORMAL, 1000, 0);
    assert_int_equal(pass(s, 0), 1);
    assert_int_equal(fg_sched_account_set_usage(s, fg_sched_account_find(s, "a"), 14400, 0), FG_OK);
    assert_int_equal(fg_sched_account_set_usage(s, fg_sched_account_find(s, "b"), 0, 0), FG_OK);
    submit(s, 2, "a", "u", 1, NULL, FG_PRIO_NORMAL, 100, 1);
    submit(s, 3, "b", "v", 1, NULL, FG_PRIO_NORMAL, 100, 2);
    assert_int_equal(pass(s, 3), 0);
    fg_why_t w = why(s, 2, 3);
    assert_string_equal(w.account.name, "a");
    assert_true(w.account.usage > 14000 && w.account.usage <= 14400);
    assert_true(w.account.siblings_usage > 0 && w.account.siblings_usage < 10); /* b's 1 GPU */
    assert_true(fabs(w.account.share - 1.0 / 3) < 1e-9);
    assert_true(w.account.usage_share > 0.99);
    assert_true(w.account.factor < 0.126 && w.account.factor > 0.12);
    assert_true(fabs(w.account.entitlement_gpus - 1.0 / 3) < 1e-9);
    assert_int_equal(w.account.running_gpus, 0);
    assert_string_equal(w.user.name, "u");
    assert_true(fabs(w.user.share - 1.0) < 1e-9);
    assert_true(fabs(w.user.entitlement_gpus - 1.0 / 3) < 1e-9);
    assert_int_equal(w.position, 2);
    assert_int_equal(w.ahead_jobs, 1);
    assert_int_equal(w.ahead_gpus, 1);
    assert_int_equal(w.nahead, 1);
    assert_int_equal(w.ahead[0].id, 3);
    assert_string_equal(w.ahead[0].account, "b");
    assert_int_equal(w.ahead[0].first, FG_FIRST_SHARE);
    assert_string_equal(fg_why_first_name(w.ahead[0].first), "share");
    /* b's job goes first, nothing before it */
    fg_why_t wb = why(s, 3, 3);
    assert_int_equal(wb.position, 1);
    assert_true(wb.account.factor > 0.5);
    fg_sched_free(s);
}

/* A high job goes before by its class; an earlier job of the same user by its submit
 * time. A bound smaller than its place leaves position 0 and counts the bound. */
static void test_jobs_ahead_say_why_they_go_first(void **st)
{
    (void)st;
    fg_sched_t *s = sched_new();
    assert_true(fg_sched_node_add(s, "n0", 1, "a100", FG_NODE_UP) >= 0);
    submit(s, 1, "a", "u", 1, NULL, FG_PRIO_NORMAL, 1000, 0);
    assert_int_equal(pass(s, 0), 1);
    submit(s, 2, "a", "u", 1, NULL, FG_PRIO_NORMAL, 100, 1);
    submit(s, 3, "b", "v", 1, NULL, FG_PRIO_HIGH, 100, 2);
    submit(s, 4, "a", "u", 1, NULL, FG_PRIO_NORMAL, 100, 3);
    assert_int_equal(pass(s, 4), 0);
    fg_why_t w = why(s, 4, 4);
    assert_int_equal(w.position, 3);
    assert_int_equal(w.nahead, 2);
    assert_int_equal(w.ahead[0].id, 3);
    assert_int_equal(w.ahead[0].first, FG_FIRST_CLASS);
    assert_int_equal(w.ahead[1].id, 2);
    assert_int_equal(w.ahead[1].first, FG_FIRST_SUBMIT);
    fg_why_t b;
    assert_int_equal(fg_sched_why(s, 4, 4, 1, &b), FG_OK);
    assert_int_equal(b.position, 0);
    assert_int_equal(b.ahead_jobs, 1);
    fg_sched_free(s);
}

/* Several jobs in one walk (a repeat and an unknown one among them): the same answers as
 * one at a time. */
static void test_many_in_one_walk_answer_as_one_at_a_time(void **st)
{
    (void)st;
    fg_sched_t *s = sched_new();
    assert_true(fg_sched_node_add(s, "n0", 1, "a100", FG_NODE_UP) >= 0);
    submit(s, 1, "a", "u", 1, NULL, FG_PRIO_NORMAL, 1000, 0);
    assert_int_equal(pass(s, 0), 1);
    for (fg_job_id_t id = 2; id <= 9; id++)
        submit(s, id, id % 2 ? "a" : "b", id % 2 ? "u" : "v", 1, NULL,
               id == 7 ? FG_PRIO_HIGH : FG_PRIO_NORMAL, 100, (fg_time_t)id);
    assert_int_equal(pass(s, 10), 0);
    const fg_job_id_t ids[] = {9, 2, 42, 9, 5, 1};
    fg_why_t w[6];
    int rc[6];
    assert_int_equal(fg_sched_why_many(s, ids, 6, 10, 1000, w, rc), FG_OK);
    assert_int_equal(rc[2], FG_ENOENT);
    assert_int_equal(rc[5], FG_ESTATE); /* running */
    for (size_t k = 0; k < 6; k++) {
        if (rc[k])
            continue;
        fg_why_t one = why(s, ids[k], 10);
        assert_int_equal(w[k].position, one.position);
        assert_int_equal(w[k].ahead_jobs, one.ahead_jobs);
        assert_int_equal(w[k].ahead_gpus, one.ahead_gpus);
        assert_int_equal(w[k].nahead, one.nahead);
        for (size_t i = 0; i < one.nahead; i++) {
            assert_int_equal(w[k].ahead[i].id, one.ahead[i].id);
            assert_int_equal(w[k].ahead[i].first, one.ahead[i].first);
        }
    }
    assert_int_equal(w[0].position, w[3].position);
    assert_int_equal(w[1].ahead[0].id, 7); /* the high job first */
    assert_int_equal(w[1].ahead[0].first, FG_FIRST_CLASS);
    fg_sched_free(s);
}

/* ------------------------------------------------------------------ type, quota, errors */

/* A job of a type no node has: 0 GPUs of it up; quota and running GPUs are shown. */
static void test_gpu_type_and_quota_numbers(void **st)
{
    (void)st;
    fg_sched_t *s = sched_new();
    assert_true(fg_sched_node_add(s, "n0", 8, "a100", FG_NODE_UP) >= 0);
    assert_true(fg_sched_account_set(s, "b", 1.0, 2) >= 0);
    submit(s, 1, "b", "v", 2, NULL, FG_PRIO_NORMAL, 1000, 0);
    submit(s, 2, "b", "v", 1, NULL, FG_PRIO_NORMAL, 1000, 0);
    submit(s, 3, "a", "u", 1, "h100", FG_PRIO_NORMAL, 1000, 0);
    assert_int_equal(pass(s, 0), 1);
    fg_why_t q = why(s, 2, 0);
    assert_int_equal(q.code, FG_REASON_QUOTA);
    assert_int_equal(q.quota, 2);
    assert_int_equal(q.quota_running, 2);
    fg_why_t t = why(s, 3, 0);
    assert_int_equal(t.code, FG_REASON_GPU_TYPE);
    assert_string_equal(t.gpu_type, "h100");
    assert_int_equal(t.type_up, 0);
    assert_int_equal(t.type_total, 0);
    assert_int_equal(t.nholders, 0);
    fg_why_t r;
    assert_int_equal(fg_sched_why(s, 1, 0, 10, &r), FG_ESTATE);
    assert_int_equal(fg_sched_why(s, 99, 0, 10, &r), FG_ENOENT);
    assert_int_equal(fg_sched_why(s, 2, 0, 10, NULL), FG_EINVAL);
    fg_sched_free(s);
}

/* ------------------------------------------------------------------ recovery */

/* The banner's example: h = 1 day, U = 300, s = 0.25, S = 100: log2(9) days; after that
 * time the usage share is back at its share (factor 0.5). */
static void test_recovery_time_brings_the_factor_back_to_one_half(void **st)
{
    (void)st;
    const int64_t h = 86400;
    double t = fg_fair_recovers_in(300, 100, 0.25, h);
    assert_true(fabs(t - 86400 * log2(9.0)) < 1e-6);
    double u = 300 * pow(2.0, -t / (double)h);
    assert_true(fabs(fg_fair_share_factor(u, u + 100, 0.25) - 0.5) < 1e-9);
    /* a quarter of the usage for a quarter share: at its share now */
    assert_true(fg_fair_recovers_in(100, 300, 0.25, h) == 0.0);
    assert_true(fg_fair_recovers_in(50, 300, 0.25, h) == 0.0);
    /* nobody else used anything: never; no usage, no memory, the only one: now */
    assert_true(fg_fair_recovers_in(300, 0, 0.25, h) < 0);
    assert_true(fg_fair_recovers_in(0, 0, 0.25, h) == 0.0);
    assert_true(fg_fair_recovers_in(300, 100, 0.25, 0) == 0.0);
    assert_true(fg_fair_recovers_in(300, 0, 1.0, h) == 0.0);
    /* U(1-s)/(sS) = 200*0.5/(0.5*25) = 8 = 2^3: three half-lives */
    assert_true(fabs(fg_fair_recovers_in(200, 25, 0.5, 3600) - 3 * 3600) < 1e-6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fragmentation_shows_the_free_blocks_and_the_holders),
        cmocka_unit_test(test_a_reservation_names_its_holder_and_start),
        cmocka_unit_test(test_a_whole_node_job_counts_whole_nodes),
        cmocka_unit_test(test_an_account_over_its_share_waits_behind_another),
        cmocka_unit_test(test_jobs_ahead_say_why_they_go_first),
        cmocka_unit_test(test_many_in_one_walk_answer_as_one_at_a_time),
        cmocka_unit_test(test_gpu_type_and_quota_numbers),
        cmocka_unit_test(test_recovery_time_brings_the_factor_back_to_one_half),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
