/*
 * test_core_fair.c - the default policy `fair` (docs/scheduler.md), rule by rule.
 *
 * 1. Plan order: bands are the class (high first) times the LAS queue (how many of
 *    las_thresholds_gpu_s, by default 3600, 36000 and 360000 GPU-s, the job's attained
 *    GPU-seconds has reached); a lower queue first inside a class. Inside a band exactly
 *    wfq's order: the account with the smallest key, then its member with the smallest
 *    key, then that member's oldest job.
 * 2. Preemption (on by default). Victims are long runners (quantum_s 3600 over all
 *    attempts, and min_run_s 600 and the checkpoint interval in this attempt), never
 *    high jobs, never of a class above the waiter's. Only the first
 *    preempt_jobs_per_pass (1) blocked jobs in plan order, whose estimate is in the
 *    future, search.
 *    a) A job whose account (or member) stays within its entitlement with its GPUs takes
 *       long runners of accounts over theirs (fair_share): at once when its estimated
 *       start is more than preempt_wait_s (600) away, else once it has waited 600 s.
 *    b) A job beyond its entitlement, once it has waited 600 s, takes long runners in a
 *       higher LAS queue (their current run counted) of its own account or of an account
 *       over its entitlement (las); never of an account within it. A job in the last
 *       LAS queue never searches.
 *    c) A high job takes low jobs' GPUs at once (priority).
 *
 * Entitlements are the weighted max-min water fill of the up GPUs over the accounts'
 * demands (running + pending GPUs). Example: 16 GPUs, a demands 16, b 8, weights 1:1:
 * 8 each; b with an 8-GPU job holds 0 + 8 <= 8 (within), a runs 16 > 8 (over).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "fairgpu/core.h"
#include "fairgpu/fairshare.h"

/* ------------------------------------------------------------------ helpers */

/* Accounts "a" (user "u"), "b" (user "v") and "c" (user "w"), weight 1 each, and
 * `nodes` nodes n0, n1, ... of `gpus` GPUs each. */
static fg_sched_t *sched_new(const fg_config_t *cfg, int nodes, int gpus)
{
    fg_sched_t *s = fg_sched_new(cfg);
    assert_non_null(s);
    assert_true(fg_sched_account_set(s, "a", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(s, "a", "u", 1.0) >= 0);
    assert_true(fg_sched_account_set(s, "b", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(s, "b", "v", 1.0) >= 0);
    assert_true(fg_sched_account_set(s, "c", 1.0, -1) >= 0);
    assert_true(fg_sched_member_set(s, "c", "w", 1.0) >= 0);
    for (int n = 0; n < nodes; n++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", n);
        assert_int_equal(fg_sched_node_add(s, name, gpus, "a100", FG_NODE_UP), n);
    }
    return s;
}

/* The defaults (policy fair) on `nodes` nodes of 8 GPUs. */
static fg_sched_t *sched_fair(int nodes)
{
    fg_config_t cfg;
    fg_config_default(&cfg);
    assert_int_equal(cfg.policy, FG_POLICY_FAIR);
    return sched_new(&cfg, nodes, 8);
}

/* The user of account 'a', 'b' or 'c'. */
static const char *user_of(char account)
{
    return account == 'a' ? "u" : account == 'b' ? "v" : "w";
}

/* Submits job `id` of account `account` (its one user), submitted at `now`. */
static void submit(fg_sched_t *s, fg_job_id_t id, char account, int gpus, fg_prio_t prio,
                   fg_time_t limit, fg_time_t checkpoint, fg_time_t now)
{
    const char acct[2] = {account, '\0'};
    fg_job_spec_t j = {.id = id,
                       .account = acct,
                       .user = user_of(account),
                       .gpus = gpus,
                       .gpu_type = NULL,
                       .time_limit_s = limit,
                       .prio = prio,
                       .max_retries = 0,
                       .checkpoint_interval_s = checkpoint,
                       .submit_time = now};
    assert_int_equal(fg_sched_submit(s, &j, now), FG_OK);
}

/* Gives pending job `id` (submitted at `submit`) `attained` GPU-seconds of past attempts,
 * as a controller restoring it would. */
static void set_attained(fg_sched_t *s, fg_job_id_t id, int64_t attained, fg_time_t submit)
{
    assert_int_equal(fg_sched_restore_pending(s, id, 1, 0, attained, submit), FG_OK);
}

static fg_job_info_t info(fg_sched_t *s, fg_job_id_t id)
{
    fg_job_info_t ji;
    assert_int_equal(fg_sched_job_info(s, id, &ji), FG_OK);
    return ji;
}

static const fg_start_t *find_start(const fg_decisions_t *d, fg_job_id_t id)
{
    for (size_t i = 0; i < d->nstarts; i++)
        if (d->starts[i].job == id)
            return &d->starts[i];
    return NULL;
}

/* Job `id` started in d on node `node`, GPUs `mask`. */
static void expect_start_on(const fg_decisions_t *d, fg_job_id_t id, int node, uint64_t mask)
{
    const fg_start_t *st = find_start(d, id);
    if (!st) {
        print_error("job %llu did not start\n", (unsigned long long)id);
        fail();
    }
    assert_int_equal(st->alloc_n, 1);
    assert_int_equal(d->allocs[st->alloc_off].node, node);
    assert_int_equal(d->allocs[st->alloc_off].gpu_mask, mask);
}

/* A pass at `now` that must decide nothing at all; returns its next_wake. */
static fg_time_t expect_quiet_pass(fg_sched_t *s, fg_time_t now)
{
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, now, &d), FG_OK);
    if (d.npreempts)
        print_error("t=%lld: job %llu preempted (why %d) for job %llu\n", (long long)now,
                    (unsigned long long)d.preempts[0].job, (int)d.preempts[0].why,
                    (unsigned long long)d.preempts[0].for_job);
    assert_int_equal(d.nstarts, 0);
    assert_int_equal(d.npreempts, 0);
    const fg_time_t wake = d.next_wake;
    fg_decisions_free(&d);
    return wake;
}

/* A pass at `now` that must decide exactly one preemption, `victim` for `for_job`
 * with reason `why`, and no start. */
static void expect_preemption(fg_sched_t *s, fg_time_t now, fg_job_id_t victim,
                              fg_preempt_why_t why, fg_job_id_t for_job)
{
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, now, &d), FG_OK);
    assert_int_equal(d.nstarts, 0);
    if (d.npreempts != 1) {
        print_error("t=%lld: %zu preemptions, want job %llu for job %llu\n", (long long)now,
                    d.npreempts, (unsigned long long)victim, (unsigned long long)for_job);
        fail();
    }
    assert_int_equal(d.preempts[0].job, victim);
    assert_int_equal(d.preempts[0].attempt, info(s, victim).attempt);
    assert_int_equal(d.preempts[0].why, why);
    assert_int_equal(d.preempts[0].for_job, for_job);
    assert_true(info(s, victim).preempting);
    fg_decisions_free(&d);
}

/* A pass at `now` that starts exactly the n jobs of `ids` and preempts nothing. */
static void expect_starts(fg_sched_t *s, fg_time_t now, const fg_job_id_t *ids, size_t n)
{
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, now, &d), FG_OK);
    assert_int_equal(d.npreempts, 0);
    assert_int_equal(d.nstarts, n);
    for (size_t i = 0; i < n; i++)
        assert_non_null(find_start(&d, ids[i]));
    fg_decisions_free(&d);
}

/* Runs one pass at `now` on a scheduler whose only node n0 is empty and whose pending
 * jobs take 1 GPU each: every start takes the lowest free GPU, so GPU k holds the k-th
 * job of the plan order. Asserts GPU k holds want[k], k = 0 .. n-1, and n starts. */
static void expect_plan_order(fg_sched_t *s, fg_time_t now, const fg_job_id_t *want, int n)
{
    /* fg_sched_plan_order gives the same order before the pass (as many as asked) */
    fg_job_id_t ids[16];
    assert_true(n <= 16);
    assert_int_equal(fg_sched_plan_order(s, now, ids, (size_t)n), (size_t)n);
    for (int k = 0; k < n; k++)
        assert_int_equal(ids[k], want[k]);
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, now, &d), FG_OK);
    assert_int_equal(d.nstarts, n);
    fg_node_info_t ni;
    assert_int_equal(fg_sched_node_info(s, 0, &ni), FG_OK);
    for (int k = 0; k < n; k++)
        if (ni.gpu_job[k] != want[k]) {
            print_error("%s: GPU %d holds job %llu, want job %llu (plan position %d)\n",
                        fg_policy_name(fg_sched_config(s)->policy), k,
                        (unsigned long long)ni.gpu_job[k], (unsigned long long)want[k], k);
            fail();
        }
    fg_decisions_free(&d);
}

/* ------------------------------------------------------------------ names and defaults */

/* `fair` is the default policy, and its name parses both ways. */
static void test_fair_is_the_default_and_parses(void **state)
{
    (void)state;
    fg_config_t cfg;
    fg_config_default(&cfg);
    assert_int_equal(cfg.policy, FG_POLICY_FAIR);
    assert_int_equal(fg_config_check(&cfg, NULL), FG_OK);
    assert_true(cfg.preemption);
    assert_int_equal(cfg.quantum_s, 3600);
    assert_int_equal(cfg.min_run_s, 600);
    assert_int_equal(cfg.preempt_wait_s, 600);
    assert_int_equal(cfg.preempt_jobs_per_pass, 1);
    assert_int_equal(cfg.las_levels, 4);
    assert_int_equal(cfg.las_thresholds_gpu_s[0], 3600);
    assert_int_equal(cfg.las_thresholds_gpu_s[1], 36000);
    assert_int_equal(cfg.las_thresholds_gpu_s[2], 360000);
    assert_int_equal(fg_policy_parse("fair"), FG_POLICY_FAIR);
    assert_string_equal(fg_policy_name(FG_POLICY_FAIR), "fair");
    assert_int_equal(fg_policy_parse(fg_policy_name(FG_POLICY_FAIR)), FG_POLICY_FAIR);
    assert_int_equal(fg_policy_parse("wfq"), FG_POLICY_WFQ); /* the old default stays */
    assert_int_equal(fg_policy_parse("Fair"), -1);
}

/* ------------------------------------------------------------------ 1. plan order */

/* One 6-GPU node. Account a carries 10^7 GPU-s of decayed usage (key about 11.5 with
 * the 7-day half-life), b none (key 0). Pending 1-GPU jobs:
 *   3 (a, normal, t=0, attained 5000: queue 1)    1 (a, normal, t=1, fresh: queue 0)
 *   2 (b, normal, t=2, attained 4000: queue 1)    4 (b, normal, t=3, fresh: queue 0)
 *   5 (a, high, t=4, attained 400000: queue 3, the last)   6 (b, low, t=5, fresh)
 * fair: class first (5), then normal queue 0 by key (4 of b, then 1 of a: a fresh job of
 * the heavy account before b's queue-1 job), then normal queue 1 by key (2, then 3),
 * then low (6): 5, 4, 1, 2, 3, 6.
 * For contrast, wfq (class, then key): 5, 2, 4, 3, 1, 6; las (queue, then submit time,
 * class ignored): 1, 4, 6, 3, 2, 5. */
static void test_plan_order_is_class_then_las_queue_then_fair_share(void **state)
{
    (void)state;
    static const struct {
        fg_policy_t policy;
        fg_job_id_t want[6];
    } cases[] = {
        {FG_POLICY_FAIR, {5, 4, 1, 2, 3, 6}},
        {FG_POLICY_WFQ, {5, 2, 4, 3, 1, 6}},
        {FG_POLICY_LAS, {1, 4, 6, 3, 2, 5}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        fg_config_t cfg;
        fg_config_default(&cfg);
        cfg.policy = cases[c].policy;
        fg_sched_t *s = sched_new(&cfg, 1, 6);
        assert_int_equal(fg_sched_account_set_usage(s, fg_sched_account_find(s, "a"), 1e7, 0),
                         FG_OK);
        submit(s, 3, 'a', 1, FG_PRIO_NORMAL, 1000, 0, 0);
        submit(s, 1, 'a', 1, FG_PRIO_NORMAL, 1000, 0, 1);
        submit(s, 2, 'b', 1, FG_PRIO_NORMAL, 1000, 0, 2);
        submit(s, 4, 'b', 1, FG_PRIO_NORMAL, 1000, 0, 3);
        submit(s, 5, 'a', 1, FG_PRIO_HIGH, 1000, 0, 4);
        submit(s, 6, 'b', 1, FG_PRIO_LOW, 1000, 0, 5);
        set_attained(s, 3, 5000, 0);
        set_attained(s, 2, 4000, 2);
        set_attained(s, 5, 400000, 4);
        expect_plan_order(s, 10, cases[c].want, 6);
        fg_sched_free(s);
    }
}

/* Attained service from a real preemption moves a job to a later queue. One 8-GPU node,
 * preempt_wait_s 0. a's job 1 (8 GPUs) runs from t=0; b's 8-GPU job 2 arrives at t=3500.
 * Demands 8 and 8 on 8 GPUs: entitlements 4 and 4, and b holds 0 + 8 > 4: job 2 is
 * beyond its entitlement and searches las victims: job 1 is in queue 1 (8 x 3500 >= 3600)
 * and a runs 8 > 4 (over), but it is a long runner only at t=3600 (quantum):
 *   t=3500: nothing;   t=3600: job 1 is stopped (las) for job 2.
 * Job 1 is pending again with 8 x 3600 = 28800 GPU-s (queue 1). a's fresh 1-GPU job 3
 * (t=3700, queue 0) then goes first when job 2 ends at t=4000, although job 1 is older
 * and of the same member: job 3 starts on GPU 0 and job 1 waits for the whole node. */
static void test_a_preempted_job_goes_behind_fresh_ones(void **state)
{
    (void)state;
    fg_config_t cfg;
    fg_config_default(&cfg);
    cfg.preempt_wait_s = 0;
    fg_sched_t *s = sched_new(&cfg, 1, 8);
    fg_decisions_t d;
    fg_decisions_init(&d);
    submit(s, 1, 'a', 8, FG_PRIO_NORMAL, 100000, 0, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    expect_start_on(&d, 1, 0, 0xff);
    submit(s, 2, 'b', 8, FG_PRIO_NORMAL, 400, 0, 3500);
    expect_quiet_pass(s, 3500);
    expect_preemption(s, 3600, 1, FG_PREEMPT_LAS, 2);
    assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_PREEMPTED, 3600, NULL), FG_OK);
    assert_int_equal(info(s, 1).attained_gpu_s, 28800);
    assert_int_equal(fg_sched_pass(s, 3600, &d), FG_OK);
    assert_int_equal(d.nstarts, 1);
    expect_start_on(&d, 2, 0, 0xff);
    submit(s, 3, 'a', 1, FG_PRIO_NORMAL, 1000, 0, 3700);
    expect_quiet_pass(s, 3700);
    assert_int_equal(fg_sched_attempt_ended(s, 2, 1, FG_END_COMPLETED, 4000, NULL), FG_OK);
    assert_int_equal(fg_sched_pass(s, 4000, &d), FG_OK);
    assert_int_equal(d.npreempts, 0);
    assert_int_equal(d.nstarts, 1); /* job 1 needs the 8 GPUs: it waits behind job 3 */
    expect_start_on(&d, 3, 0, 0x01);
    assert_int_equal(info(s, 1).state, FG_JOB_PENDING);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* Inside one band, fair is wfq. One 8-GPU node, all jobs fresh (queue 0), nothing
 * running. Account a (weight 2) has members u and x; x carries 2.5 tau GPU-s of usage
 * (member key 2.5), u none; account b (weight 1) has member v. Account keys (walked GPUs
 * over the weight): a 0, b 0 -> a (lower index); a 1/2, b 0 -> b; a 1/2, b 1 -> a;
 * a 1, b 1 -> a; a 3/2, b 1 -> b; a 3/2, b 2 -> a; a 2, b 2 -> a; a 5/2, b 2 -> b. Inside
 * a, member keys u 0, 1, 2 < x 2.5 -> u, u, u; then u 3 > x 2.5 -> x; then u 3 < x 3.5 ->
 * u. Jobs: u 10..13 (t=0..3), x 30, 31 (t=0, 1), v 20..22 (t=0..2), each member's oldest
 * first: 10, 20, 11, 12, 21, 30, 13, 22 under both policies. */
static void test_inside_a_band_the_order_is_wfqs(void **state)
{
    (void)state;
    static const fg_policy_t policies[] = {FG_POLICY_FAIR, FG_POLICY_WFQ};
    for (size_t p = 0; p < sizeof policies / sizeof policies[0]; p++) {
        fg_config_t cfg;
        fg_config_default(&cfg);
        cfg.policy = policies[p];
        fg_sched_t *s = fg_sched_new(&cfg);
        assert_non_null(s);
        assert_true(fg_sched_account_set(s, "a", 2.0, -1) >= 0);
        assert_true(fg_sched_member_set(s, "a", "u", 1.0) >= 0);
        const int x = fg_sched_member_set(s, "a", "x", 1.0);
        assert_true(x >= 0);
        assert_true(fg_sched_account_set(s, "b", 1.0, -1) >= 0);
        assert_true(fg_sched_member_set(s, "b", "v", 1.0) >= 0);
        assert_int_equal(fg_sched_node_add(s, "n0", 8, "a100", FG_NODE_UP), 0);
        assert_int_equal(fg_sched_member_set_usage(s, x, 2.5 * fg_fair_tau(cfg.half_life_s), 0),
                         FG_OK);
        fg_job_spec_t j = {.account = "a", .gpus = 1, .time_limit_s = 1000};
        for (int k = 0; k < 4; k++) {
            j.id = (fg_job_id_t)(10 + k), j.user = "u", j.submit_time = k;
            assert_int_equal(fg_sched_submit(s, &j, k), FG_OK);
        }
        for (int k = 0; k < 2; k++) {
            j.id = (fg_job_id_t)(30 + k), j.user = "x", j.submit_time = k;
            assert_int_equal(fg_sched_submit(s, &j, k), FG_OK);
        }
        j.account = "b";
        for (int k = 0; k < 3; k++) {
            j.id = (fg_job_id_t)(20 + k), j.user = "v", j.submit_time = k;
            assert_int_equal(fg_sched_submit(s, &j, k), FG_OK);
        }
        const fg_job_id_t want[] = {10, 20, 11, 12, 21, 30, 13, 22};
        expect_plan_order(s, 10, want, 8);
        fg_sched_free(s);
    }
}

/* ------------------------------------------------------------------ 2a. within share */

/* Two 8-GPU nodes. Heavy account a runs job 1 (n0) and job 2 (n1), 8 GPUs each, from
 * t=0, limit 100000. Light account b's 8-GPU job 3 arrives at t=3300. Demands a 16, b 8
 * on 16 GPUs: entitlements 8 and 8; b holds 0 + 8 <= 8 (within), a runs 16 > 8 (over).
 * Job 3's estimate is 100000 (the first end), far more than 600 s away:
 *   t=3300: jobs 1 and 2 ran 3300 < quantum 3600      -> nothing; next wake-up 3600
 *   t=3600: both long runners; job 3 waited only 300 s -> preempt job 1 (fair_share):
 *           both lose 8 x 3600 GPU-s, the lower id first.
 * Under wfq the same job waits preempt_wait_s whatever its estimate: not before 3900.
 * After the report job 3 starts on n0. */
static void test_a_light_job_preempts_at_once_when_it_would_wait_long(void **state)
{
    (void)state;
    static const fg_policy_t policies[] = {FG_POLICY_FAIR, FG_POLICY_WFQ};
    for (size_t p = 0; p < 2; p++) {
        fg_config_t cfg;
        fg_config_default(&cfg);
        cfg.policy = policies[p];
        fg_sched_t *s = sched_new(&cfg, 2, 8);
        fg_decisions_t d;
        fg_decisions_init(&d);
        submit(s, 1, 'a', 8, FG_PRIO_NORMAL, 100000, 0, 0);
        submit(s, 2, 'a', 8, FG_PRIO_NORMAL, 100000, 0, 0);
        assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
        expect_start_on(&d, 1, 0, 0xff);
        expect_start_on(&d, 2, 1, 0xff);

        submit(s, 3, 'b', 8, FG_PRIO_NORMAL, 1000, 0, 3300);
        /* next wake-up: fair when the victims become long runners, wfq when job 3 will
         * have waited preempt_wait_s */
        assert_int_equal(expect_quiet_pass(s, 3300), policies[p] == FG_POLICY_FAIR ? 3600 : 3900);
        assert_int_equal(info(s, 3).estimated_start, 100000);
        expect_quiet_pass(s, 3599);
        if (policies[p] == FG_POLICY_WFQ) {
            expect_quiet_pass(s, 3600);
            expect_quiet_pass(s, 3899);
            expect_preemption(s, 3900, 1, FG_PREEMPT_FAIR_SHARE, 3);
            fg_decisions_free(&d);
            fg_sched_free(s);
            continue;
        }
        expect_preemption(s, 3600, 1, FG_PREEMPT_FAIR_SHARE, 3);
        assert_false(info(s, 2).preempting);
        expect_quiet_pass(s, 3605); /* one preemption is enough */
        assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_PREEMPTED, 3610, NULL), FG_OK);
        assert_int_equal(fg_sched_pass(s, 3610, &d), FG_OK);
        assert_int_equal(d.npreempts, 0);
        assert_int_equal(d.nstarts, 1);
        expect_start_on(&d, 3, 0, 0xff);
        fg_decisions_free(&d);
        fg_sched_free(s);
    }
}

/* The same, but a's job 2 (n1) ends by t=3900 (limit 3900), and job 3 arrives at
 * t=3600, when both of a's jobs are long runners. Job 3's estimate is 3900, 300 s away
 * (not more than preempt_wait_s): no preemption at once. It would preempt once it has
 * waited 600 s (t=4200), but job 2 ends at 3900 and job 3 starts on n1 then: no job is
 * stopped at all. */
static void test_a_light_job_does_not_preempt_when_a_job_ends_soon(void **state)
{
    (void)state;
    fg_sched_t *s = sched_fair(2);
    fg_decisions_t d;
    fg_decisions_init(&d);
    submit(s, 1, 'a', 8, FG_PRIO_NORMAL, 100000, 0, 0);
    submit(s, 2, 'a', 8, FG_PRIO_NORMAL, 3900, 0, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    expect_start_on(&d, 1, 0, 0xff);
    expect_start_on(&d, 2, 1, 0xff);

    submit(s, 3, 'b', 8, FG_PRIO_NORMAL, 1000, 0, 3600);
    const fg_time_t wake = expect_quiet_pass(s, 3600);
    assert_int_equal(info(s, 3).estimated_start, 3900);
    assert_true(wake > 3600 && wake <= 4200);
    expect_quiet_pass(s, 3700);
    expect_quiet_pass(s, 3899);
    assert_false(info(s, 1).preempting);
    assert_int_equal(fg_sched_attempt_ended(s, 2, 1, FG_END_COMPLETED, 3900, NULL), FG_OK);
    assert_int_equal(fg_sched_pass(s, 3900, &d), FG_OK);
    assert_int_equal(d.npreempts, 0);
    assert_int_equal(d.nstarts, 1);
    expect_start_on(&d, 3, 1, 0xff);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* The victims of a fair-share search: long runners, never high jobs, never of a class
 * above the waiter's. Two 8-GPU nodes; a runs, from t=0, job 1 (n0, 8 GPUs, high) and
 * job 2 (n1, 8 GPUs, normal). b's job 3 (8 GPUs, low) arrives at t=4000: within its
 * entitlement (8 of 16), but job 1 is high and job 2 is of a class above job 3's:
 * nothing, even at t=8000. Then b's normal job 4 (8 GPUs) arrives at t=8000: now
 * b demands 16, a 16: entitlements 8 and 8, and b holds 0 + 8 <= 8: job 4 (first in
 * plan order, above job 3) stops job 2 (fair_share) at once; job 1 stays. */
static void test_fair_share_victims_are_normal_long_runners_of_the_waiters_class(void **state)
{
    (void)state;
    fg_sched_t *s = sched_fair(2);
    fg_decisions_t d;
    fg_decisions_init(&d);
    submit(s, 1, 'a', 8, FG_PRIO_HIGH, 100000, 0, 0);
    submit(s, 2, 'a', 8, FG_PRIO_NORMAL, 100000, 0, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    expect_start_on(&d, 1, 0, 0xff);
    expect_start_on(&d, 2, 1, 0xff);
    submit(s, 3, 'b', 8, FG_PRIO_LOW, 1000, 0, 4000);
    expect_quiet_pass(s, 4000);
    expect_quiet_pass(s, 4600);
    expect_quiet_pass(s, 8000);
    submit(s, 4, 'b', 8, FG_PRIO_NORMAL, 1000, 0, 8000);
    expect_preemption(s, 8000, 2, FG_PREEMPT_FAIR_SHARE, 4);
    assert_false(info(s, 1).preempting);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* Only preempt_jobs_per_pass (1) blocked jobs search per pass. Two 8-GPU nodes; a runs
 * four 4-GPU jobs 1..4 from t=0 (limit 100000). At t=4000 b's job 5 and c's job 6
 * (4 GPUs each) arrive. Demands a 16, b 4, c 4: entitlements a 8, b 4, c 4; b and c
 * are within, a is over. Plan order: b before c (equal keys, lower index). At t=4000
 * one preemption only, job 1 (cheapest: all lose 4 x 4000, lowest id) for job 5. Once
 * job 1 stopped (t=4010), job 5 starts on its GPUs and job 6, now the first blocked
 * job, stops job 2 (fair_share; a runs 12 > 8). */
static void test_one_blocked_job_searches_per_pass(void **state)
{
    (void)state;
    fg_sched_t *s = sched_fair(2);
    fg_decisions_t d;
    fg_decisions_init(&d);
    for (fg_job_id_t id = 1; id <= 4; id++)
        submit(s, id, 'a', 4, FG_PRIO_NORMAL, 100000, 0, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    assert_int_equal(d.nstarts, 4);
    const fg_job_info_t j1 = info(s, 1);
    assert_int_equal(j1.nallocs, 1);
    submit(s, 5, 'b', 4, FG_PRIO_NORMAL, 1000, 0, 4000);
    submit(s, 6, 'c', 4, FG_PRIO_NORMAL, 1000, 0, 4000);
    expect_preemption(s, 4000, 1, FG_PREEMPT_FAIR_SHARE, 5);
    assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_PREEMPTED, 4010, NULL), FG_OK);
    assert_int_equal(fg_sched_pass(s, 4010, &d), FG_OK);
    assert_int_equal(d.nstarts, 1);
    expect_start_on(&d, 5, j1.allocs[0].node, j1.allocs[0].gpu_mask); /* job 1's GPUs */
    assert_int_equal(d.npreempts, 1);
    assert_int_equal(d.preempts[0].job, 2);
    assert_int_equal(d.preempts[0].why, FG_PREEMPT_FAIR_SHARE);
    assert_int_equal(d.preempts[0].for_job, 6);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* ------------------------------------------------------------------ 2b. beyond share */

/* One 8-GPU node. b's job 2 (4 GPUs, checkpoint every 100 s) runs from t=0; a's job 1
 * (4 GPUs, no checkpoint) from t=3000. a's job 3 (4 GPUs, fresh: queue 0) arrives at
 * t=3100. Demands a 8, b 4 on 8 GPUs: entitlements a 4, b 4. a holds 4 + 4 > 4: job 3
 * is beyond its entitlement (las search once it waited 600 s, t=3700); b runs 4 <= 4,
 * within: job 2 is never a victim, although it is a long runner in queue 1 (4 x 3700 =
 * 14800 GPU-s >= 3600) and would lose nothing (its last checkpoint is at 3700).
 * Job 1's attained service, its current run counted, reaches 3600 at t=3900 (queue 1),
 * and it is a long runner at 3000 + 3600 = 6600:
 *   t=3700, 3900, 6599: nothing (next wake-up 6600)
 *   t=6600: job 1 (a's own, queue 1 > 0, long runner) is stopped for job 3 (las).
 * Afterwards job 1 (14400 GPU-s, queue 1) is beyond a's share and no job runs in a
 * higher queue than its own: it stops nothing. */
static void test_an_over_share_job_preempts_its_own_accounts_long_runner(void **state)
{
    (void)state;
    fg_sched_t *s = sched_fair(1);
    fg_decisions_t d;
    fg_decisions_init(&d);
    submit(s, 2, 'b', 4, FG_PRIO_NORMAL, 100000, 100, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    expect_start_on(&d, 2, 0, 0x0f);
    submit(s, 1, 'a', 4, FG_PRIO_NORMAL, 100000, 0, 3000);
    assert_int_equal(fg_sched_pass(s, 3000, &d), FG_OK);
    expect_start_on(&d, 1, 0, 0xf0);
    submit(s, 3, 'a', 4, FG_PRIO_NORMAL, 1000, 0, 3100);
    expect_quiet_pass(s, 3100);
    expect_quiet_pass(s, 3700);
    expect_quiet_pass(s, 3900);
    assert_int_equal(expect_quiet_pass(s, 6599), 6600);
    expect_preemption(s, 6600, 1, FG_PREEMPT_LAS, 3);
    assert_false(info(s, 2).preempting);
    assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_PREEMPTED, 6600, NULL), FG_OK);
    assert_int_equal(fg_sched_pass(s, 6600, &d), FG_OK);
    assert_int_equal(d.nstarts, 1);
    expect_start_on(&d, 3, 0, 0xf0);
    assert_int_equal(d.npreempts, 0);
    expect_quiet_pass(s, 20000);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* A job beyond its entitlement also takes long runners of an account over its own, but
 * only once it has waited preempt_wait_s, whatever its estimate. One 8-GPU node: b's
 * job 1 (8 GPUs) runs from t=0 (queue 1 from t=450: 8 x 450 = 3600; a long runner from
 * 3600). a's job 2 (8 GPUs) arrives at t=4000. Demands 8 and 8: entitlements 4 and 4:
 * a holds 0 + 8 > 4 (beyond), b runs 8 > 4 (over). Job 2's estimate is 100000, yet:
 *   t=4000, 4599: nothing (next wake-up 4600);   t=4600: job 1 is stopped (las). */
static void test_an_over_share_job_preempts_an_over_share_accounts_long_runner(void **state)
{
    (void)state;
    fg_sched_t *s = sched_fair(1);
    fg_decisions_t d;
    fg_decisions_init(&d);
    submit(s, 1, 'b', 8, FG_PRIO_NORMAL, 100000, 0, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    expect_start_on(&d, 1, 0, 0xff);
    submit(s, 2, 'a', 8, FG_PRIO_NORMAL, 1000, 0, 4000);
    assert_int_equal(expect_quiet_pass(s, 4000), 4600);
    assert_int_equal(info(s, 2).estimated_start, 100000);
    assert_int_equal(expect_quiet_pass(s, 4599), 4600);
    expect_preemption(s, 4600, 1, FG_PREEMPT_LAS, 2);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* A job in the last LAS queue never searches: the same as above, but a's job 2 has
 * attained 400000 GPU-s (queue 3 of 0..3). Job 1 (8 GPUs: queue 1 from t=450, 2 from
 * 4500, 3 from 45000) is never past it: nothing at 700, 3600, 7200 or 50000; and with
 * no search, no wake-up at 700 (when job 2 will have waited 600 s) either. */
static void test_a_job_in_the_last_las_queue_never_searches(void **state)
{
    (void)state;
    fg_sched_t *s = sched_fair(1);
    fg_decisions_t d;
    fg_decisions_init(&d);
    submit(s, 1, 'b', 8, FG_PRIO_NORMAL, 100000, 0, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    expect_start_on(&d, 1, 0, 0xff);
    submit(s, 2, 'a', 8, FG_PRIO_NORMAL, 1000, 0, 100);
    set_attained(s, 2, 400000, 100);
    assert_int_equal(expect_quiet_pass(s, 100), FG_TIME_NEVER); /* (no wait to count) */
    expect_quiet_pass(s, 700);
    expect_quiet_pass(s, 3600);
    expect_quiet_pass(s, 7200);
    expect_quiet_pass(s, 50000);
    assert_false(info(s, 1).preempting);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* ------------------------------------------------------------------ 2c. class */

/* A high job takes a low job's GPUs at once under fair too. One 8-GPU node: b's low
 * job 1 (8 GPUs) starts at t=0; a's high job 2 (4 GPUs, limit 10) arrives at t=10: job 1
 * (ran 10 s, far from min_run_s and the quantum) is stopped (priority) at once, and job 2
 * starts once it stopped. A normal job is not stopped by class: job 2 ends at t=20, job 1
 * is cancelled, b's normal job 3 (8 GPUs) starts at t=20, and a's high job 4 (4 GPUs,
 * t=30) waits (t=30, and t=700 once it waited preempt_wait_s). */
static void test_high_preempts_low_at_once(void **state)
{
    (void)state;
    fg_sched_t *s = sched_fair(1);
    fg_decisions_t d;
    fg_decisions_init(&d);
    submit(s, 1, 'b', 8, FG_PRIO_LOW, 100000, 0, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    expect_start_on(&d, 1, 0, 0xff);
    submit(s, 2, 'a', 4, FG_PRIO_HIGH, 10, 0, 10);
    expect_preemption(s, 10, 1, FG_PREEMPT_PRIORITY, 2);
    assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_PREEMPTED, 10, NULL), FG_OK);
    const fg_job_id_t two[] = {2};
    expect_starts(s, 10, two, 1);
    assert_int_equal(fg_sched_attempt_ended(s, 2, 1, FG_END_COMPLETED, 20, NULL), FG_OK);
    assert_int_equal(fg_sched_cancel(s, 1, 20), FG_OK);
    submit(s, 3, 'b', 8, FG_PRIO_NORMAL, 100000, 0, 20);
    const fg_job_id_t three[] = {3};
    expect_starts(s, 20, three, 1);
    submit(s, 4, 'a', 4, FG_PRIO_HIGH, 1000, 0, 30);
    expect_quiet_pass(s, 30);
    expect_quiet_pass(s, 700);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* A blocked high job with no low job to stop leaves the pass's preemption turn to the
 * jobs behind it. One 8-GPU node; b's normal 8-GPU job 1 runs from t=0 (limit 100000).
 * At t=100 a submits a high 4-GPU job 2 and a normal 4-GPU job 3; a (demand 8 of 16 in
 * all: entitled 4) is within its share with job 3. Job 2 comes first in plan order but
 * no low job runs: job 3 takes the turn, and at t=3600, when job 1 is a long runner,
 * job 1 is stopped for it (its estimate, t=100000, is far). */
static void test_a_high_job_with_no_low_victim_leaves_the_turn(void **state)
{
    (void)state;
    fg_sched_t *s = sched_fair(1);
    fg_decisions_t d;
    fg_decisions_init(&d);
    submit(s, 1, 'b', 8, FG_PRIO_NORMAL, 100000, 0, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    expect_start_on(&d, 1, 0, 0xff);
    submit(s, 2, 'a', 4, FG_PRIO_HIGH, 1000, 0, 100);
    submit(s, 3, 'a', 4, FG_PRIO_NORMAL, 1000, 0, 100);
    assert_int_equal(expect_quiet_pass(s, 100), 3600);
    expect_preemption(s, 3600, 1, FG_PREEMPT_FAIR_SHARE, 3);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* ------------------------------------------------------------------ victims and words */

/* On a node, the victim of the latest LAS queue goes first, whatever the work it loses.
 * One 8-GPU node; a's jobs 1 (4 GPUs, restored with 40000 GPU-s attained: queue 2;
 * checkpoint every 900 s) and 2 (4 GPUs, fresh; checkpoint every 1000 s) start at t=0.
 * At t=4300 b (within its share: 4 of 8) submits a 4-GPU job 3, whose estimate (t=100000)
 * is far: it preempts at once. Job 1 would lose 4300 mod 900 = 700 s x 4 GPUs, job 2
 * 4300 mod 1000 = 300 s x 4 (queue 1: 17200 GPU-s): fair stops job 1, of the later
 * queue; wfq (preemption wait 0) the cheaper job 2. */
static void test_the_victim_of_the_latest_las_queue_goes_first(void **state)
{
    (void)state;
    fg_sched_t *s = sched_fair(1);
    fg_decisions_t d;
    fg_decisions_init(&d);
    submit(s, 1, 'a', 4, FG_PRIO_NORMAL, 100000, 900, 0);
    set_attained(s, 1, 40000, 0);
    submit(s, 2, 'a', 4, FG_PRIO_NORMAL, 100000, 1000, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    assert_int_equal(d.nstarts, 2);
    submit(s, 3, 'b', 4, FG_PRIO_NORMAL, 1000, 0, 4300);
    expect_preemption(s, 4300, 1, FG_PREEMPT_FAIR_SHARE, 3);
    fg_decisions_free(&d);
    fg_sched_free(s);

    /* the same under wfq: the cheaper one, job 2 */
    fg_config_t cfg;
    fg_config_default(&cfg);
    cfg.policy = FG_POLICY_WFQ;
    cfg.preempt_wait_s = 0;
    s = sched_new(&cfg, 1, 8);
    fg_decisions_init(&d);
    submit(s, 1, 'a', 4, FG_PRIO_NORMAL, 100000, 900, 0);
    set_attained(s, 1, 40000, 0);
    submit(s, 2, 'a', 4, FG_PRIO_NORMAL, 100000, 1000, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    submit(s, 3, 'b', 4, FG_PRIO_NORMAL, 1000, 0, 4300);
    expect_preemption(s, 4300, 2, FG_PREEMPT_FAIR_SHARE, 3);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* fg_sched_explain names the rules that hold a waiting job, with their numbers. One
 * 8-GPU node; a runs eight 1-GPU jobs since t=0 and has two more queued; at t=5000 b
 * submits a 4-GPU job, which preempts four of a's at once (b within its share): jobs 1-4,
 * which lose the same work. Job 9 of a then reads: its LAS queue 0 of 4, and a running
 * 4 GPUs of its 4 entitled, over its share with this job; job 1, stopped, queue 1. */
static void test_explain_gives_the_las_queue_and_the_share(void **state)
{
    (void)state;
    fg_sched_t *s = sched_fair(1);
    fg_decisions_t d;
    fg_decisions_init(&d);
    for (fg_job_id_t id = 1; id <= 10; id++)
        submit(s, id, 'a', 1, FG_PRIO_NORMAL, 172800, 0, 0);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    assert_int_equal(d.nstarts, 8);
    submit(s, 20, 'b', 4, FG_PRIO_NORMAL, 600, 0, 5000);
    assert_int_equal(fg_sched_pass(s, 5000, &d), FG_OK);
    assert_int_equal(d.npreempts, 4);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(fg_sched_attempt_ended(s, d.preempts[i].job, d.preempts[i].attempt,
                                                FG_END_PREEMPTED, 5000, NULL),
                         FG_OK);
    assert_int_equal(fg_sched_pass(s, 5000, &d), FG_OK);
    assert_non_null(find_start(&d, 20));
    char buf[512];
    assert_true(fg_sched_explain(s, 9, 5000, buf, sizeof buf) >= 0);
    if (!strstr(buf, "LAS queue 0 of 4 (attained 0 GPU-s, the next queue from 3600)") ||
        !strstr(buf, "account a (weight 1) runs 4 GPUs of 4.0 entitled (over its share"))
        fail_msg("explain: %s", buf);
    /* a stopped job: queue 1, with its attained service */
    const fg_job_id_t stopped = 1;
    assert_int_equal(info(s, stopped).state, FG_JOB_PENDING);
    assert_true(fg_sched_explain(s, stopped, 5000, buf, sizeof buf) >= 0);
    if (!strstr(buf, "LAS queue 1 of 4 (attained 5000 GPU-s"))
        fail_msg("explain of a stopped job: %s", buf);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fair_is_the_default_and_parses),
        cmocka_unit_test(test_plan_order_is_class_then_las_queue_then_fair_share),
        cmocka_unit_test(test_a_preempted_job_goes_behind_fresh_ones),
        cmocka_unit_test(test_inside_a_band_the_order_is_wfqs),
        cmocka_unit_test(test_a_light_job_preempts_at_once_when_it_would_wait_long),
        cmocka_unit_test(test_a_light_job_does_not_preempt_when_a_job_ends_soon),
        cmocka_unit_test(test_fair_share_victims_are_normal_long_runners_of_the_waiters_class),
        cmocka_unit_test(test_one_blocked_job_searches_per_pass),
        cmocka_unit_test(test_an_over_share_job_preempts_its_own_accounts_long_runner),
        cmocka_unit_test(test_an_over_share_job_preempts_an_over_share_accounts_long_runner),
        cmocka_unit_test(test_a_job_in_the_last_las_queue_never_searches),
        cmocka_unit_test(test_high_preempts_low_at_once),
        cmocka_unit_test(test_a_high_job_with_no_low_victim_leaves_the_turn),
        cmocka_unit_test(test_the_victim_of_the_latest_las_queue_goes_first),
        cmocka_unit_test(test_explain_gives_the_las_queue_and_the_share),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
