/*
 * test_core_fairshare.c - weighted fair queuing over GPU-time and usage decay
 * (docs/scheduler.md, "State" and "One pass", 1).
 *
 * Within a class, the account with the smallest key (U/tau + R + P) / w goes next, where
 * U is its decayed usage (GPU-seconds), tau = half_life / ln 2, R its running GPUs and P
 * the GPUs of its jobs already walked in this pass; then the member with the smallest key
 * of the same form inside the account; ties go to the lower index. With half-life h,
 *   U(t) = U(t0) * 2^(-(t-t0)/h) + R * (1 - 2^(-(t-t0)/h)) * tau,
 * and half-life 0 means no memory (U = 0).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "fairgpu/core.h"
#include "fairgpu/fairshare.h"
#include "splitmix.h"

/* ------------------------------------------------------------------ helpers */

static fg_sched_t *sched_new(fg_time_t half_life, bool preemption)
{
    fg_config_t cfg;
    fg_config_default(&cfg);
    cfg.half_life_s = half_life;
    cfg.preemption = preemption;
    fg_sched_t *s = fg_sched_new(&cfg);
    assert_non_null(s);
    return s;
}

static int account(fg_sched_t *s, const char *name, double weight)
{
    int a = fg_sched_account_set(s, name, weight, -1);
    assert_true(a >= 0);
    return a;
}

static int member(fg_sched_t *s, const char *acct, const char *user, double weight)
{
    int m = fg_sched_member_set(s, acct, user, weight);
    assert_true(m >= 0);
    return m;
}

static void submit(fg_sched_t *s, fg_job_id_t id, const char *acct, const char *user, int gpus,
                   fg_prio_t prio, fg_time_t limit, fg_time_t now)
{
    fg_job_spec_t j = {.id = id,
                       .account = acct,
                       .user = user,
                       .gpus = gpus,
                       .gpu_type = NULL,
                       .time_limit_s = limit,
                       .prio = prio,
                       .max_retries = 0,
                       .checkpoint_interval_s = 0,
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

/* The single job that a pass at `now` starts (asserts there is exactly one). */
static fg_job_id_t the_one_start(fg_sched_t *s, fg_time_t now)
{
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, now, &d), FG_OK);
    assert_int_equal(d.nstarts, 1);
    fg_job_id_t id = d.starts[0].job;
    fg_decisions_free(&d);
    return id;
}

/* |got - want| <= tol * |want| */
static void assert_close(double got, double want, double tol)
{
    if (fabs(got - want) > tol * fabs(want)) {
        print_error("got %.6f, want %.6f (relative tolerance %g)\n", got, want, tol);
        fail();
    }
}

/* ------------------------------------------------------------------ a contended cluster */

/* Two groups (accounts or members) keep 1-GPU jobs queued on one node of `slots` GPUs
 * (node n0, added by the caller). Each job
 * runs 60..600 s (limit 600). The loop jumps from one job end to the next, reports the
 * ends, tops the queues up to 16 jobs each and runs a pass. Returns each group's
 * GPU-seconds from the attempt records. Job ids encode the group: (g + 1) * 10^6 + n. */
struct group {
    const char *account, *user;
};

static void contend(fg_sched_t *s, const struct group grp[2], int slots, fg_time_t horizon,
                    double gpu_s[2])
{
    enum { QUEUED = 16, SLOTS = 8 };
    assert_true(slots <= SLOTS);
    struct {
        fg_job_id_t id;
        fg_time_t end;
    } run[SLOTS];
    int nrun = 0, queued[2] = {0, 0};
    fg_job_id_t next[2] = {1, 1};
    uint64_t rng = 42;
    gpu_s[0] = gpu_s[1] = 0;
    fg_decisions_t d;
    fg_decisions_init(&d);
    for (fg_time_t t = 0; t < horizon;) {
        for (int g = 0; g < 2; g++)
            for (; queued[g] < QUEUED; queued[g]++)
                submit(s, (fg_job_id_t)(g + 1) * 1000000 + next[g]++, grp[g].account, grp[g].user,
                       1, FG_PRIO_NORMAL, 600, t);
        assert_int_equal(fg_sched_pass(s, t, &d), FG_OK);
        for (size_t i = 0; i < d.nstarts; i++) {
            assert_true(nrun < slots);
            run[nrun].id = d.starts[i].job;
            run[nrun].end = t + 60 + (fg_time_t)(rng_next(&rng) % 541);
            queued[d.starts[i].job / 1000000 - 1]--;
            nrun++;
        }
        assert_int_equal(nrun, slots); /* always contended: the node stays full */
        fg_time_t next_t = FG_TIME_NEVER;
        for (int i = 0; i < nrun; i++)
            if (run[i].end < next_t)
                next_t = run[i].end;
        t = next_t;
        for (int i = 0; i < nrun;) {
            if (run[i].end != t) {
                i++;
                continue;
            }
            fg_attempt_t rec;
            assert_int_equal(fg_sched_attempt_ended(s, run[i].id, 1, FG_END_COMPLETED, t, &rec),
                             FG_OK);
            gpu_s[run[i].id / 1000000 - 1] += (double)rec.gpu_seconds;
            run[i] = run[--nrun];
        }
    }
    fg_decisions_free(&d);
}

/* Accounts a (weight 2) and b (weight 1) both keep the 8-GPU node busy for 48 simulated
 * hours (half-life 1 h). 8 GPUs cannot be split 2:1 at any instant (5.33 : 2.67), so the
 * split alternates between 5:3 and 6:2 and the decayed usage evens it out: the GPU-time
 * ratio must be 2 within 5%. The decayed usages stand in the same ratio. */
static void test_weights_2_to_1_give_gpu_time_2_to_1(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(3600, false);
    int a = account(s, "a", 2.0);
    int b = account(s, "b", 1.0);
    member(s, "a", "u", 1.0);
    member(s, "b", "v", 1.0);
    assert_true(fg_sched_node_add(s, "n0", 8, "a100", FG_NODE_UP) >= 0);
    const struct group grp[2] = {{"a", "u"}, {"b", "v"}};
    double gpu_s[2];
    contend(s, grp, 8, 48 * 3600, gpu_s);
    double ratio = gpu_s[0] / gpu_s[1];
    print_message("GPU-seconds a=%.0f b=%.0f ratio %.4f\n", gpu_s[0], gpu_s[1], ratio);
    assert_close(ratio, 2.0, 0.05);
    fg_time_t now = 48 * 3600 + 600;
    double ua = fg_sched_account_usage(s, a, now), ub = fg_sched_account_usage(s, b, now);
    assert_true(ua > 0 && ub > 0);
    assert_close(ua / ub, 2.0, 0.15); /* the last hours only: a noisier window */
    fg_sched_free(s);
}

/* The same on a 6-GPU node, where 2:1 is a whole split (4:2) at every instant: the
 * GPU-time ratio is 2 within 5%. */
static void test_weights_2_to_1_give_gpu_time_2_to_1_on_a_6_gpu_node(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(3600, false);
    account(s, "a", 2.0);
    account(s, "b", 1.0);
    member(s, "a", "u", 1.0);
    member(s, "b", "v", 1.0);
    assert_true(fg_sched_node_add(s, "n0", 6, "a100", FG_NODE_UP) >= 0);
    const struct group grp[2] = {{"a", "u"}, {"b", "v"}};
    double gpu_s[2];
    contend(s, grp, 6, 24 * 3600, gpu_s);
    double ratio = gpu_s[0] / gpu_s[1];
    print_message("GPU-seconds a=%.0f b=%.0f ratio %.4f\n", gpu_s[0], gpu_s[1], ratio);
    assert_close(ratio, 2.0, 0.05);
    fg_sched_free(s);
}

/* Inside one account, users u1 (weight 3) and u2 (weight 1) share 8 GPUs 6:2, so their
 * GPU-time ratio is 3 within 5%. */
static void test_member_weights_3_to_1_give_gpu_time_3_to_1_inside_an_account(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(3600, false);
    account(s, "a", 1.0);
    member(s, "a", "u1", 3.0);
    member(s, "a", "u2", 1.0);
    assert_true(fg_sched_node_add(s, "n0", 8, "a100", FG_NODE_UP) >= 0);
    const struct group grp[2] = {{"a", "u1"}, {"a", "u2"}};
    double gpu_s[2];
    contend(s, grp, 8, 24 * 3600, gpu_s);
    double ratio = gpu_s[0] / gpu_s[1];
    print_message("GPU-seconds u1=%.0f u2=%.0f ratio %.4f\n", gpu_s[0], gpu_s[1], ratio);
    assert_close(ratio, 3.0, 0.05);
    fg_sched_free(s);
}

/* The first pass on a fresh cluster, hand-computed. One 6-GPU node, no usage, a (weight
 * 2, jobs 1..) and b (weight 1, jobs 101..), each with plenty of 1-GPU jobs. Keys P/w:
 *   a 0/2 = b 0/1 -> a (lower index), a: 1/2
 *   b 0   < 0.5   -> b,              b: 1
 *   a 0.5 < 1     -> a,              a: 2/2 = 1
 *   a 1   = b 1   -> a (tie),        a: 3/2
 *   b 1   < 1.5   -> b,              b: 2
 *   a 1.5 < 2     -> a,              a: 4/2 = 2
 * On one node each start takes the lowest free GPU, so GPU k goes to the k-th job in plan
 * order: GPUs 0..5 = jobs 1, 101, 2, 3, 102, 4. */
static void test_the_first_pass_interleaves_accounts_by_weight(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(604800, true);
    account(s, "a", 2.0);
    account(s, "b", 1.0);
    member(s, "a", "u", 1.0);
    member(s, "b", "v", 1.0);
    assert_int_equal(fg_sched_node_add(s, "n0", 6, "a100", FG_NODE_UP), 0);
    for (fg_job_id_t i = 0; i < 6; i++) {
        submit(s, 1 + i, "a", "u", 1, FG_PRIO_NORMAL, 1000, 0);
        submit(s, 101 + i, "b", "v", 1, FG_PRIO_NORMAL, 1000, 0);
    }
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, 0, &d), FG_OK);
    assert_int_equal(d.nstarts, 6);
    const fg_job_id_t on_gpu[6] = {1, 101, 2, 3, 102, 4};
    for (int k = 0; k < 6; k++) {
        const fg_start_t *st = find_start(&d, on_gpu[k]);
        assert_non_null(st);
        assert_int_equal(d.allocs[st->alloc_off].gpu_mask, 1ull << k);
    }
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* A higher class goes first whatever the usage: a has a huge usage and a high job; b has
 * none and a normal job; the one GPU goes to a's high job. */
static void test_class_comes_before_fair_share(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(604800, true);
    int a = account(s, "a", 1.0);
    account(s, "b", 1.0);
    member(s, "a", "u", 1.0);
    member(s, "b", "v", 1.0);
    assert_int_equal(fg_sched_account_set_usage(s, a, 1e9, 0), FG_OK);
    assert_int_equal(fg_sched_node_add(s, "n0", 1, "a100", FG_NODE_UP), 0);
    submit(s, 2, "b", "v", 1, FG_PRIO_NORMAL, 1000, 0);
    submit(s, 1, "a", "u", 1, FG_PRIO_HIGH, 1000, 0);
    assert_int_equal(the_one_start(s, 0), 1);
    fg_sched_free(s);
}

/* ------------------------------------------------------------------ decay */

/* Half-life 3600 s: a usage of 1000 GPU-s set at t=0 reads 500 at t=3600 and 250 at
 * t=7200, for accounts and members alike. */
static void test_usage_halves_after_one_half_life(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(3600, true);
    int a = account(s, "a", 1.0);
    int m = member(s, "a", "u", 1.0);
    assert_int_equal(fg_sched_account_set_usage(s, a, 1000.0, 0), FG_OK);
    assert_int_equal(fg_sched_member_set_usage(s, m, 1000.0, 0), FG_OK);
    assert_close(fg_sched_account_usage(s, a, 0), 1000.0, 1e-9);
    assert_close(fg_sched_account_usage(s, a, 3600), 500.0, 1e-6);
    assert_close(fg_sched_member_usage(s, m, 3600), 500.0, 1e-6);
    assert_close(fg_sched_account_usage(s, a, 7200), 250.0, 1e-6);
    assert_close(fg_sched_member_usage(s, m, 7200), 250.0, 1e-6);
    fg_sched_free(s);
}

/* A 4-GPU job running from t=0, half-life h = 3600 s, tau = h / ln 2 = 5193.98 s:
 *   U(3600) = 4 * (1 - 2^-1) * tau = 2 * 3600 / ln 2 = 10387.95 GPU-s
 *   U(7200) = 4 * (1 - 2^-2) * tau = 3 * 3600 / ln 2 = 15581.93 GPU-s
 * (less than the 14400 / 28800 raw GPU-seconds: the oldest part has decayed already). */
static void test_running_jobs_accrue_decayed_usage(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(3600, true);
    int a = account(s, "a", 1.0);
    int m = member(s, "a", "u", 1.0);
    assert_true(fg_sched_node_add(s, "n0", 8, "a100", FG_NODE_UP) >= 0);
    submit(s, 1, "a", "u", 4, FG_PRIO_NORMAL, 100000, 0);
    assert_int_equal(the_one_start(s, 0), 1);
    const double tau = 3600.0 / log(2.0);
    assert_close(fg_sched_account_usage(s, a, 3600), 4 * 0.5 * tau, 1e-6);
    assert_close(fg_sched_member_usage(s, m, 3600), 4 * 0.5 * tau, 1e-6);
    assert_close(fg_sched_account_usage(s, a, 7200), 4 * 0.75 * tau, 1e-6);
    /* The job ends at 7200; one more half-life later only half is left. */
    assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_COMPLETED, 7200, NULL), FG_OK);
    assert_close(fg_sched_account_usage(s, a, 10800), 4 * 0.375 * tau, 1e-6);
    fg_sched_free(s);
}

/* Half-life 0 keeps no memory: a set usage reads 0 and a running job accrues nothing. */
static void test_half_life_zero_keeps_no_usage(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(0, true);
    int a = account(s, "a", 1.0);
    member(s, "a", "u", 1.0);
    assert_true(fg_sched_node_add(s, "n0", 8, "a100", FG_NODE_UP) >= 0);
    assert_int_equal(fg_sched_account_set_usage(s, a, 1000.0, 0), FG_OK);
    assert_true(fg_sched_account_usage(s, a, 10) == 0.0);
    submit(s, 1, "a", "u", 8, FG_PRIO_NORMAL, 100000, 10);
    assert_int_equal(the_one_start(s, 10), 1);
    assert_true(fg_sched_account_usage(s, a, 5000) == 0.0);
    fg_sched_free(s);
}

/* Decay changes the order. Half-life 3600 s. b gets usage 1000 at t=0; a gets 600 at
 * t=3600, when b's has decayed to 500 < 600: at t=3600 b's job goes first on the single
 * GPU. With a 7-day half-life b's usage is still 1000 * 2^(-3600/604800) = 995.9 > 600,
 * and a's job goes first. */
static void test_decayed_usage_decides_who_goes_next(void **state)
{
    (void)state;
    const fg_time_t half_lives[2] = {3600, 604800};
    const fg_job_id_t first[2] = {2, 1};
    for (int k = 0; k < 2; k++) {
        fg_sched_t *s = sched_new(half_lives[k], true);
        int a = account(s, "a", 1.0);
        int b = account(s, "b", 1.0);
        member(s, "a", "u", 1.0);
        member(s, "b", "v", 1.0);
        assert_int_equal(fg_sched_node_add(s, "n0", 1, "a100", FG_NODE_UP), 0);
        assert_int_equal(fg_sched_account_set_usage(s, b, 1000.0, 0), FG_OK);
        assert_int_equal(fg_sched_account_set_usage(s, a, 600.0, 3600), FG_OK);
        submit(s, 1, "a", "u", 1, FG_PRIO_NORMAL, 1000, 3600);
        submit(s, 2, "b", "v", 1, FG_PRIO_NORMAL, 1000, 3600);
        assert_int_equal(the_one_start(s, 3600), first[k]);
        fg_sched_free(s);
    }
}

/* Half-life 0 forgets at once: a's job 1 held the only GPU from 0 to 10000. At t=10000 a
 * and b each submit one job. With no memory both keys are 0 and the tie goes to a (lower
 * index): job 2. With a 7-day half-life a's usage puts b first: job 3. */
static void test_half_life_zero_forgets_past_usage(void **state)
{
    (void)state;
    const fg_time_t half_lives[2] = {0, 604800};
    const fg_job_id_t first[2] = {2, 3};
    for (int k = 0; k < 2; k++) {
        fg_sched_t *s = sched_new(half_lives[k], true);
        account(s, "a", 1.0);
        account(s, "b", 1.0);
        member(s, "a", "u", 1.0);
        member(s, "b", "v", 1.0);
        assert_int_equal(fg_sched_node_add(s, "n0", 1, "a100", FG_NODE_UP), 0);
        submit(s, 1, "a", "u", 1, FG_PRIO_NORMAL, 20000, 0);
        assert_int_equal(the_one_start(s, 0), 1);
        assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_COMPLETED, 10000, NULL), FG_OK);
        submit(s, 2, "a", "u", 1, FG_PRIO_NORMAL, 1000, 10000);
        submit(s, 3, "b", "v", 1, FG_PRIO_NORMAL, 1000, 10000);
        assert_int_equal(the_one_start(s, 10000), first[k]);
        fg_sched_free(s);
    }
}

/* normalized_share: weight over the sum of weights (accounts: all accounts, the default
 * account included; members: within their account). */
static void test_normalized_shares_follow_the_weights(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(604800, true);
    int def = fg_sched_account_find(s, "default");
    assert_true(def >= 0);
    fg_account_info_t di;
    assert_int_equal(fg_sched_account_info(s, def, &di), FG_OK);
    int a = account(s, "a", 2.0);
    int b = account(s, "b", 1.0);
    int u1 = member(s, "a", "u1", 3.0);
    int u2 = member(s, "a", "u2", 1.0);
    double total = di.weight + 3.0;
    fg_account_info_t ai;
    assert_int_equal(fg_sched_account_info(s, a, &ai), FG_OK);
    assert_close(ai.normalized_share, 2.0 / total, 1e-9);
    assert_int_equal(fg_sched_account_info(s, b, &ai), FG_OK);
    assert_close(ai.normalized_share, 1.0 / total, 1e-9);
    fg_member_info_t mi;
    assert_int_equal(fg_sched_member_info(s, u1, &mi), FG_OK);
    assert_close(mi.normalized_share, 0.75, 1e-9);
    assert_int_equal(mi.account, a);
    assert_int_equal(fg_sched_member_info(s, u2, &mi), FG_OK);
    assert_close(mi.normalized_share, 0.25, 1e-9);
    fg_sched_free(s);
}

/* ------------------------------------------------------------------ the water fill */

/* src/core/fairshare.c's worked example: 10 GPUs, weights 1, demands 2, 5, 20: A gets
 * its 2, B and C split the 8 left (B asks 5 > 4). A tenant without demand gets 0. */
static void test_the_water_fill_gives_a_demand_that_fits_and_splits_the_rest(void **state)
{
    (void)state;
    const double d[4] = {2, 5, 20, 0}, w[4] = {1, 1, 1, 1};
    double e[4];
    int32_t scratch[4];
    fg_fair_water_fill(4, d, w, 10, e, scratch);
    assert_true(e[0] == 2 && e[1] == 4 && e[2] == 4 && e[3] == 0);
    const double d2[2] = {100, 100}, w2[2] = {3, 1};
    fg_fair_water_fill(2, d2, w2, 8, e, scratch);
    assert_true(e[0] == 6 && e[1] == 2);
}

/* Every entity past the first whose demand does not fit gets the same part of what is
 * left, bit for bit (10 over three equal demands: 10/3 each), and the kept split gives
 * the plain one's bits. */
static void test_saturated_entities_get_the_same_part_bit_for_bit(void **state)
{
    (void)state;
    const double d[3] = {20, 20, 20}, w[3] = {1, 1, 1};
    double e[3], k[3];
    int32_t scratch[3];
    fg_fair_water_fill(3, d, w, 10, e, scratch);
    assert_true(e[0] == 10.0 / 3 && e[1] == 10.0 / 3 && e[2] == 10.0 / 3);
    fg_fair_kept_t kept = {0};
    fg_fair_kept_init(&kept, 3);
    for (size_t i = 0; i < 3; i++)
        fg_fair_kept_set(&kept, i, d[i], w[i]);
    fg_fair_kept_fill(&kept, 10, k);
    assert_memory_equal(e, k, sizeof e);
    fg_fair_kept_set(&kept, 1, 0, 1); /* B leaves: A and C get 5 each */
    fg_fair_kept_fill(&kept, 10, k);
    assert_true(k[0] == 5 && k[1] == 0 && k[2] == 5);
    fg_fair_kept_free(&kept);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weights_2_to_1_give_gpu_time_2_to_1),
        cmocka_unit_test(test_weights_2_to_1_give_gpu_time_2_to_1_on_a_6_gpu_node),
        cmocka_unit_test(test_member_weights_3_to_1_give_gpu_time_3_to_1_inside_an_account),
        cmocka_unit_test(test_the_first_pass_interleaves_accounts_by_weight),
        cmocka_unit_test(test_class_comes_before_fair_share),
        cmocka_unit_test(test_usage_halves_after_one_half_life),
        cmocka_unit_test(test_running_jobs_accrue_decayed_usage),
        cmocka_unit_test(test_half_life_zero_keeps_no_usage),
        cmocka_unit_test(test_decayed_usage_decides_who_goes_next),
        cmocka_unit_test(test_half_life_zero_forgets_past_usage),
        cmocka_unit_test(test_normalized_shares_follow_the_weights),
        cmocka_unit_test(test_the_water_fill_gives_a_demand_that_fits_and_splits_the_rest),
        cmocka_unit_test(test_saturated_entities_get_the_same_part_bit_for_bit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
