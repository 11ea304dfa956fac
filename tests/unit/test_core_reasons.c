/*
 * test_core_reasons.c - why a job waits and when it should start (docs/scheduler.md,
 * "One pass", 2, 4 and 5; reason codes of the API contract).
 *
 * Every pending job the pass looked at carries a reason code and, for the first
 * estimate_depth jobs in plan order, an estimated start from the free-at model (running
 * jobs' start + time limit, reservations and earlier estimated jobs included).
 * fg_sched_explain() says the same in plain words with the numbers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/internal.h" /* fg__sched_set_max_walks */
#include "fairgpu/core.h"

/* ------------------------------------------------------------------ helpers */

static fg_sched_t *sched_new(const fg_config_t *cfg)
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
    return s;
}

static int add_node(fg_sched_t *s, const char *name, int gpus, const char *type,
                    fg_node_state_t state)
{
    int n = fg_sched_node_add(s, name, gpus, type, state);
    assert_true(n >= 0);
    return n;
}

static fg_job_spec_t spec(fg_job_id_t id, int gpus, const char *type, fg_time_t limit,
                          fg_time_t now)
{
    fg_job_spec_t j = {.id = id,
                       .account = "a",
                       .user = "u",
                       .gpus = gpus,
                       .gpu_type = type,
                       .time_limit_s = limit,
                       .prio = FG_PRIO_NORMAL,
                       .max_retries = 3,
                       .checkpoint_interval_s = 0,
                       .submit_time = now};
    return j;
}

static void submit(fg_sched_t *s, fg_job_id_t id, int gpus, const char *type, fg_time_t limit,
                   fg_time_t now)
{
    fg_job_spec_t j = spec(id, gpus, type, limit, now);
    assert_int_equal(fg_sched_submit(s, &j, now), FG_OK);
}

static fg_job_info_t info(fg_sched_t *s, fg_job_id_t id)
{
    fg_job_info_t ji;
    assert_int_equal(fg_sched_job_info(s, id, &ji), FG_OK);
    return ji;
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

/* A pass that preempts one job: its id. */
static fg_job_id_t pass_preempting(fg_sched_t *s, fg_time_t now)
{
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, now, &d), FG_OK);
    assert_int_equal(d.npreempts, 1);
    const fg_job_id_t victim = d.preempts[0].job;
    fg_decisions_free(&d);
    return victim;
}

/* Does text mention `word`? A number must stand alone ("100" is not in "1000"), so the
 * tests check the numbers of an explanation, not its phrasing. */
static bool mentions(const char *text, const char *word)
{
    bool number = word[0] >= '0' && word[0] <= '9';
    size_t n = strlen(word);
    for (const char *p = strstr(text, word); p; p = strstr(p + 1, word)) {
        if (!number)
            return true;
        bool digit_before = p > text && p[-1] >= '0' && p[-1] <= '9';
        bool digit_after = p[n] >= '0' && p[n] <= '9';
        if (!digit_before && !digit_after)
            return true;
    }
    return false;
}

/* Asserts job `id` is pending with `reason` both in its info and from explain, and that
 * the explanation mentions every string of `words` (NULL-terminated). */
static void expect_reason(fg_sched_t *s, fg_job_id_t id, fg_time_t now, fg_reason_t reason,
                          const char *const *words)
{
    fg_job_info_t ji = info(s, id);
    assert_int_equal(ji.state, FG_JOB_PENDING);
    if (ji.reason != reason) {
        print_error("job %llu: reason %s, want %s\n", (unsigned long long)id,
                    fg_reason_code(ji.reason), fg_reason_code(reason));
        fail();
    }
    char buf[FG_REASON_MAX];
    assert_int_equal(fg_sched_explain(s, id, now, buf, sizeof buf), (int)reason);
    assert_true(strlen(buf) > 0);
    for (; words && *words; words++)
        if (!mentions(buf, *words)) {
            print_error("job %llu: \"%s\" does not mention \"%s\"\n", (unsigned long long)id, buf,
                        *words);
            fail();
        }
}

/* ------------------------------------------------------------------ reasons */

/* Job 1 holds all 8 GPUs until 0 + 1000. Job 2 (4 GPUs) waits for resources, expected at
 * 1000. */
static void test_not_enough_free_gpus_is_resources(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(NULL);
    add_node(s, "n0", 8, "a100", FG_NODE_UP);
    submit(s, 1, 8, NULL, 1000, 0);
    assert_int_equal(pass(s, 0), 1);
    submit(s, 2, 4, NULL, 500, 10);
    assert_int_equal(pass(s, 10), 0);
    assert_int_equal(info(s, 2).estimated_start, 1000);
    const char *words[] = {"4", "1000", NULL}; /* GPUs wanted, expected start */
    expect_reason(s, 2, 10, FG_REASON_RESOURCES, words);
    fg_sched_free(s);
}

/* Jobs 1 and 2 (6 GPUs each, limits 1000 and 500) leave 2 free GPUs on each node: 4 free
 * in all, but a 3-GPU job fits on neither node -> fragmentation. The first node with 3
 * free GPUs is n1 when job 2 ends, at 0 + 500. */
static void test_enough_gpus_on_no_single_node_is_fragmentation(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(NULL);
    add_node(s, "n0", 8, "a100", FG_NODE_UP);
    add_node(s, "n1", 8, "a100", FG_NODE_UP);
    submit(s, 1, 6, NULL, 1000, 0);
    submit(s, 2, 6, NULL, 500, 0);
    assert_int_equal(pass(s, 0), 2);
    submit(s, 3, 3, NULL, 100, 10);
    assert_int_equal(pass(s, 10), 0);
    assert_int_equal(fg_sched_gpus_free(s), 4);
    assert_int_equal(info(s, 3).estimated_start, 500);
    const char *words[] = {"4", "3", "500", NULL}; /* free, wanted, expected start */
    expect_reason(s, 3, 10, FG_REASON_FRAGMENTATION, words);
    fg_sched_free(s);
}

/* Job 77 (8 GPUs) holds a reservation of n0 from 1000; job 88 (1 GPU, limit 5000) could
 * use the free GPU 7 but would end at 10 + 5000 > 1000 -> reservation, naming job 77 and
 * 1000. Its own estimate: after job 77 has had the node from 1000 to 1000 + 100 = 1100. */
static void test_gpus_held_for_a_reserved_job_is_reservation(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(NULL);
    add_node(s, "n0", 8, "a100", FG_NODE_UP);
    submit(s, 1, 7, NULL, 1000, 0);
    assert_int_equal(pass(s, 0), 1);
    submit(s, 77, 8, NULL, 100, 5);
    submit(s, 88, 1, NULL, 5000, 6);
    assert_int_equal(pass(s, 10), 0);
    assert_int_equal(info(s, 77).estimated_start, 1000);
    assert_int_equal(info(s, 88).estimated_start, 1100);
    const char *words[] = {"77", "1000", "1100", NULL}; /* holder, from, expected start */
    expect_reason(s, 88, 10, FG_REASON_RESERVATION, words);
    fg_sched_free(s);
}

/* A failed job waits out its backoff: failed at t=100, eligible at 100 + 30 = 130. */
static void test_a_job_in_its_retry_backoff_says_until_when(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(NULL);
    add_node(s, "n0", 8, "a100", FG_NODE_UP);
    submit(s, 1, 1, NULL, 1000, 0);
    assert_int_equal(pass(s, 0), 1);
    assert_int_equal(fg_sched_attempt_ended(s, 1, 1, FG_END_FAILED, 100, NULL), FG_OK);
    assert_int_equal(pass(s, 110), 0);
    const char *words[] = {"130", NULL};
    expect_reason(s, 1, 110, FG_REASON_RETRY_BACKOFF, words);
    assert_int_equal(pass(s, 130), 1);
    fg_sched_free(s);
}

/* The only h100 node is down and the a100 node is up: an h100 job waits with nodes_down,
 * an any-type job starts on the a100 node. When h0 comes back, the h100 job starts. */
static void test_a_job_whose_nodes_are_down_says_nodes_down(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(NULL);
    add_node(s, "a0", 8, "a100", FG_NODE_UP);
    int h0 = add_node(s, "h0", 8, "h100", FG_NODE_DOWN);
    submit(s, 1, 2, "h100", 1000, 0);
    submit(s, 2, 2, NULL, 1000, 0);
    assert_int_equal(pass(s, 0), 1);
    assert_int_equal(info(s, 2).state, FG_JOB_RUNNING);
    expect_reason(s, 1, 0, FG_REASON_NODES_DOWN, NULL);
    assert_int_equal(fg_sched_node_set_state(s, h0, FG_NODE_DRAINING, 10), FG_OK);
    assert_int_equal(pass(s, 10), 0);
    expect_reason(s, 1, 10, FG_REASON_NODES_DOWN, NULL);
    assert_int_equal(fg_sched_node_set_state(s, h0, FG_NODE_UP, 20), FG_OK);
    assert_int_equal(pass(s, 20), 1);
    assert_int_equal(info(s, 1).state, FG_JOB_RUNNING);
    fg_sched_free(s);
}

/* No node has the GPU type asked for: the job is accepted (an h100 node may join later)
 * and waits with reason gpu_type, naming the type; fg_sched_check_fit says it can never
 * fit today's cluster. When an h100 node joins, it starts. */
static void test_a_gpu_type_no_node_has_is_gpu_type(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(NULL);
    add_node(s, "a0", 8, "a100", FG_NODE_UP);
    assert_int_equal(fg_sched_check_fit(s, 1, "h100"), FG_ENOFIT);
    submit(s, 1, 1, "h100", 1000, 0);
    assert_int_equal(pass(s, 0), 0);
    const char *words[] = {"h100", NULL};
    expect_reason(s, 1, 0, FG_REASON_GPU_TYPE, words);
    int h0 = add_node(s, "h0", 8, "h100", FG_NODE_UP);
    assert_int_equal(pass(s, 10), 1);
    fg_job_info_t ji = info(s, 1);
    assert_int_equal(ji.state, FG_JOB_RUNNING);
    assert_int_equal(ji.allocs[0].node, h0);
    fg_sched_free(s);
}

/* An account out of budget waits with reason budget; the flag cleared, it starts. */
static void test_an_exhausted_budget_is_budget(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(NULL);
    add_node(s, "n0", 8, "a100", FG_NODE_UP);
    int a = fg_sched_account_find(s, "a");
    assert_int_equal(fg_sched_account_set_budget_exhausted(s, a, true), FG_OK);
    submit(s, 1, 1, NULL, 1000, 0);
    assert_int_equal(pass(s, 0), 0);
    expect_reason(s, 1, 0, FG_REASON_BUDGET, NULL);
    assert_int_equal(fg_sched_account_set_budget_exhausted(s, a, false), FG_OK);
    assert_int_equal(pass(s, 10), 1);
    fg_sched_free(s);
}

/* ------------------------------------------------------------------ estimates */

/* One 8-GPU node runs job 1 (8 GPUs) until 0 + 1000. Pending in plan order:
 *   job 2 (4 GPUs, limit 500): GPUs 0-3 free at 1000             -> estimate 1000
 *   job 3 (4 GPUs, limit 700): GPUs 4-7 free at 1000             -> estimate 1000
 *   job 4 (8 GPUs):  the whole node once jobs 2 and 3 have run:
 *                    max(1000 + 500, 1000 + 700)                  -> estimate 1700
 * With estimate_depth 2, job 4 gets no estimate (FG_TIME_NEVER). */
static void test_estimates_follow_the_plan(void **state)
{
    (void)state;
    for (int depth = 32; depth >= 2; depth -= 30) {
        fg_config_t cfg;
        fg_config_default(&cfg);
        cfg.estimate_depth = depth;
        fg_sched_t *s = sched_new(&cfg);
        add_node(s, "n0", 8, "a100", FG_NODE_UP);
        submit(s, 1, 8, NULL, 1000, 0);
        assert_int_equal(pass(s, 0), 1);
        submit(s, 2, 4, NULL, 500, 10);
        submit(s, 3, 4, NULL, 700, 11);
        submit(s, 4, 8, NULL, 100, 12);
        assert_int_equal(pass(s, 100), 0);
        assert_int_equal(info(s, 2).estimated_start, 1000);
        assert_int_equal(info(s, 3).estimated_start, 1000);
        assert_int_equal(info(s, 4).estimated_start, depth >= 3 ? 1700 : FG_TIME_NEVER);
        fg_sched_free(s);
    }
}

/* Jobs the pass did not reach: one 1-GPU node, busy; estimate_depth 2. Pending in plan
 * order: 100, 200, 400, 500 (1 GPU each). The pass stops once no GPU is free and the
 * first two have estimates, so 400 and 500 get none; explain computes their place on
 * demand: job 500 waits behind 3 jobs (priority). */
static void test_jobs_beyond_the_estimate_depth_are_explained_by_their_place(void **state)
{
    (void)state;
    fg_config_t cfg;
    fg_config_default(&cfg);
    cfg.estimate_depth = 2;
    fg_sched_t *s = sched_new(&cfg);
    add_node(s, "n0", 1, "a100", FG_NODE_UP);
    submit(s, 900, 1, NULL, 1000, 0);
    assert_int_equal(pass(s, 0), 1);
    submit(s, 100, 1, NULL, 100, 10);
    submit(s, 200, 1, NULL, 100, 11);
    submit(s, 400, 1, NULL, 100, 12);
    submit(s, 500, 1, NULL, 100, 13);
    assert_int_equal(pass(s, 20), 0);
    assert_int_equal(info(s, 100).estimated_start, 1000);
    assert_int_equal(info(s, 200).estimated_start, 1100);
    assert_int_equal(info(s, 400).estimated_start, FG_TIME_NEVER);
    assert_int_equal(info(s, 500).estimated_start, FG_TIME_NEVER);
    char buf[FG_REASON_MAX];
    assert_int_equal(fg_sched_explain(s, 500, 20, buf, sizeof buf), FG_REASON_PRIORITY);
    if (!mentions(buf, "3")) {
        print_error("job 500: \"%s\" does not say it is behind 3 jobs\n", buf);
        fail();
    }
    fg_sched_free(s);
}

/* One node of 8 GPUs, one reservation, no preemption, estimates on demand or not, at most
 * max_walks walks per pass (0: the default); pending in plan order: 1 (4 GPUs), 2 (8),
 * 3 (8), 4 (4 GPUs, short). The pass at 10 starts 1 and 4 (checked), and its next_wake is
 * returned. */
static fg_sched_t *four_jobs_passed(int32_t estimate_depth, bool on_demand, int32_t max_walks,
                                    fg_time_t *next_wake)
{
    fg_config_t cfg;
    fg_config_default(&cfg);
    cfg.estimate_depth = estimate_depth;
    cfg.reserve_depth = 1;
    cfg.preemption = false;
    fg_sched_t *s = sched_new(&cfg);
    fg_sched_set_estimates_on_demand(s, on_demand);
    fg__sched_set_max_walks(s, max_walks);
    add_node(s, "n0", 8, "a100", FG_NODE_UP);
    submit(s, 1, 4, NULL, 100, 1);
    submit(s, 2, 8, NULL, 100, 2);
    submit(s, 3, 8, NULL, 100, 3);
    submit(s, 4, 4, NULL, 50, 4);
    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, 10, &d), FG_OK);
    assert_int_equal(d.nstarts, 2);
    assert_int_equal(d.starts[0].job, 1);
    assert_int_equal(d.starts[1].job, 4);
    *next_wake = d.next_wake;
    fg_decisions_free(&d);
    return s;
}

/* A pass shows what its last walk leaves. four_jobs_passed with estimate_depth 1: the
 * first walk starts 1, reserves GPUs for 2, finds 3 blocked (resources) and
 * backfills 4, which takes the last free GPUs; it started jobs, so a second walk follows.
 * That walk reserves for 2 again and, with no GPU free, stops before 3: job 3 shows as not
 * reached (priority, no estimate), not the reason the first walk gave it. Both modes. */
static void test_a_job_only_an_earlier_walk_reached_shows_as_not_reached(void **state)
{
    (void)state;
    for (int on_demand = 0; on_demand <= 1; on_demand++) {
        fg_time_t wake;
        fg_sched_t *s = four_jobs_passed(1, on_demand, 0, &wake);
        const char *const reserved_at[] = {"110", NULL};
        expect_reason(s, 2, 10, FG_REASON_RESOURCES, reserved_at);
        assert_int_equal(info(s, 2).estimated_start, 110);
        const char *const behind[] = {"1", "not reached", NULL};
        expect_reason(s, 3, 10, FG_REASON_PRIORITY, behind);
        assert_int_equal(info(s, 3).estimated_start, FG_TIME_NEVER);
        fg_sched_free(s);
    }
}

/* The last walk a pass may make shows what it leaves even when it started jobs (what a
 * walk leaves after a start is moot only when another walk follows). The same jobs with
 * one walk per pass: it starts 1, reserves GPUs for 2 (from 110), estimates 3 (after 2:
 * 210) and backfills 4; the pass asks to be run again (next_wake = now). Both modes (on
 * demand, the estimate queued before 4 started is made on the plan before that start). */
static void test_the_last_walk_a_pass_may_make_shows_what_it_leaves(void **state)
{
    (void)state;
    for (int on_demand = 0; on_demand <= 1; on_demand++) {
        fg_time_t wake;
        fg_sched_t *s = four_jobs_passed(32, on_demand, 1, &wake);
        assert_int_equal(wake, 10);
        assert_int_equal(info(s, 2).estimated_start, 110);
        const char *const after_2[] = {"210", NULL};
        expect_reason(s, 3, 10, FG_REASON_RESOURCES, after_2);
        assert_int_equal(info(s, 3).estimated_start, 210);
        fg_sched_free(s);
    }
}

/* A job the pass's last walk preempts for names its victim: with one walk per pass, the
 * high job on a node full of a low one reads "resources", the GPUs free and the job
 * preempted for it; the quota's numbers read as in use / quota. */
static void test_reasons_name_the_victim_and_the_quota(void **state)
{
    (void)state;
    for (int on_demand = 0; on_demand <= 1; on_demand++) {
        fg_config_t c;
        fg_config_default(&c);
        c.preemption = true;
        fg_sched_t *s = sched_new(&c);
        fg_sched_set_estimates_on_demand(s, on_demand);
        fg__sched_set_max_walks(s, 1);
        add_node(s, "n0", 8, "a100", FG_NODE_UP);
        fg_job_spec_t lo = spec(1, 6, NULL, 1000, 0);
        lo.prio = FG_PRIO_LOW;
        assert_int_equal(fg_sched_submit(s, &lo, 0), FG_OK);
        assert_int_equal(pass(s, 0), 1);
        fg_job_spec_t hi = spec(2, 8, NULL, 100, 5);
        hi.prio = FG_PRIO_HIGH;
        assert_int_equal(fg_sched_submit(s, &hi, 5), FG_OK);
        assert_int_equal(pass_preempting(s, 10), 1);
        const char *const victim[] = {"8", "2", "preempting job", "1", NULL};
        expect_reason(s, 2, 10, FG_REASON_RESOURCES, victim);
        fg_sched_free(s);
    }
    fg_sched_t *s = sched_new(NULL);
    assert_true(fg_sched_account_set(s, "a", 1.0, 4) >= 0);
    add_node(s, "n0", 8, "a100", FG_NODE_UP);
    submit(s, 1, 3, NULL, 1000, 0);
    submit(s, 2, 2, NULL, 1000, 1);
    assert_int_equal(pass(s, 10), 1);
    const char *const quota[] = {"3/4", "2", NULL}; /* in use / quota, needs */
    expect_reason(s, 2, 10, FG_REASON_QUOTA, quota);
    fg_sched_free(s);
}

/* explain writes at most n bytes, NUL included, and returns the reason code whatever the
 * room: the first n-1 characters of the full text. An unknown job is an error. */
static void test_explain_fits_any_buffer(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new(NULL);
    add_node(s, "n0", 8, "a100", FG_NODE_UP);
    submit(s, 1, 8, NULL, 1000, 0);
    assert_int_equal(pass(s, 0), 1);
    submit(s, 2, 4, NULL, 500, 10);
    assert_int_equal(pass(s, 10), 0);
    char full[FG_REASON_MAX];
    assert_int_equal(fg_sched_explain(s, 2, 10, full, sizeof full), FG_REASON_RESOURCES);
    for (size_t n = 1; n <= 8; n++) {
        char buf[16];
        memset(buf, 'X', sizeof buf);
        assert_int_equal(fg_sched_explain(s, 2, 10, buf, n), FG_REASON_RESOURCES);
        assert_int_equal(buf[n - 1], '\0');
        assert_int_equal(strncmp(buf, full, n - 1), 0);
        assert_int_equal(buf[n], 'X'); /* nothing written past n */
    }
    assert_true(fg_sched_explain(s, 99, 10, full, sizeof full) < 0);
    fg_sched_free(s);
}

/* Every reason code has a name, as in the API contract. */
static void test_reason_codes_have_their_api_names(void **state)
{
    (void)state;
    const char *const names[FG_REASON_COUNT] = {
        [FG_REASON_PRIORITY] = "priority",
        [FG_REASON_RESOURCES] = "resources",
        [FG_REASON_FRAGMENTATION] = "fragmentation",
        [FG_REASON_RESERVATION] = "reservation",
        [FG_REASON_QUOTA] = "quota",
        [FG_REASON_BUDGET] = "budget",
        [FG_REASON_RETRY_BACKOFF] = "retry_backoff",
        [FG_REASON_GPU_TYPE] = "gpu_type",
        [FG_REASON_NODES_DOWN] = "nodes_down",
    };
    for (int r = FG_REASON_PRIORITY; r < FG_REASON_COUNT; r++)
        assert_string_equal(fg_reason_code((fg_reason_t)r), names[r]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_not_enough_free_gpus_is_resources),
        cmocka_unit_test(test_enough_gpus_on_no_single_node_is_fragmentation),
        cmocka_unit_test(test_gpus_held_for_a_reserved_job_is_reservation),
        cmocka_unit_test(test_a_job_in_its_retry_backoff_says_until_when),
        cmocka_unit_test(test_a_job_whose_nodes_are_down_says_nodes_down),
        cmocka_unit_test(test_a_gpu_type_no_node_has_is_gpu_type),
        cmocka_unit_test(test_an_exhausted_budget_is_budget),
        cmocka_unit_test(test_estimates_follow_the_plan),
        cmocka_unit_test(test_jobs_beyond_the_estimate_depth_are_explained_by_their_place),
        cmocka_unit_test(test_a_job_only_an_earlier_walk_reached_shows_as_not_reached),
        cmocka_unit_test(test_the_last_walk_a_pass_may_make_shows_what_it_leaves),
        cmocka_unit_test(test_reasons_name_the_victim_and_the_quota),
        cmocka_unit_test(test_explain_fits_any_buffer),
        cmocka_unit_test(test_reason_codes_have_their_api_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
