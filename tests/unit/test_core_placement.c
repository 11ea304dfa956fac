/*
 * test_core_placement.c - gang placement by best fit (docs/scheduler.md, "One pass", 3).
 *
 * A job of g <= 8 GPUs goes to the up node of a matching type with the fewest free GPUs
 * that still has g (ties: lowest node index) and gets the lowest free GPU indices. A job
 * of 8k GPUs gets k nodes with all GPUs free (lowest indices first), GPUs 0..7 of each,
 * all at once or not at all.
 *
 * Each test builds a small cluster, puts jobs on chosen GPUs with
 * fg_sched_restore_running() so that the starting occupancy is exact, submits jobs and
 * checks the node and GPU mask of every start against a hand-computed answer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "core/internal.h" /* fg__sched_check */
#include "fairgpu/core.h"

/* ------------------------------------------------------------------ helpers */

/* A scheduler with the documented defaults and one account "a" with user "u". */
static fg_sched_t *sched_new(void)
{
    fg_config_t cfg;
    fg_config_default(&cfg);
    fg_sched_t *s = fg_sched_new(&cfg);
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

static fg_job_spec_t job(fg_job_id_t id, int gpus, const char *type, fg_time_t now)
{
    fg_job_spec_t j = {.id = id,
                       .account = "a",
                       .user = "u",
                       .gpus = gpus,
                       .gpu_type = type,
                       .time_limit_s = 1000,
                       .prio = FG_PRIO_NORMAL,
                       .max_retries = 0,
                       .checkpoint_interval_s = 0,
                       .submit_time = now};
    return j;
}

static void submit(fg_sched_t *s, fg_job_id_t id, int gpus, const char *type, fg_time_t now)
{
    fg_job_spec_t j = job(id, gpus, type, now);
    assert_int_equal(fg_sched_submit(s, &j, now), FG_OK);
}

/* Puts running job `id` (attempt 1, started at 0) on the GPUs of `mask` on `node`. */
static void occupy(fg_sched_t *s, fg_job_id_t id, int node, uint64_t mask)
{
    fg_job_spec_t j = job(id, __builtin_popcountll(mask), NULL, 0);
    fg_alloc_t a = {.node = node, .gpu_mask = mask};
    assert_int_equal(fg_sched_restore_running(s, &j, 1, 0, 0, 0, &a, 1, 0), FG_OK);
}

static const fg_start_t *find_start(const fg_decisions_t *d, fg_job_id_t id)
{
    for (size_t i = 0; i < d->nstarts; i++)
        if (d->starts[i].job == id)
            return &d->starts[i];
    return NULL;
}

/* Asserts that job `id` started in *d on exactly one node with exactly `mask`. */
static void expect_start_on(const fg_decisions_t *d, fg_job_id_t id, int node, uint64_t mask)
{
    const fg_start_t *st = find_start(d, id);
    assert_non_null(st);
    assert_int_equal(st->alloc_n, 1);
    assert_int_equal(d->allocs[st->alloc_off].node, node);
    assert_int_equal(d->allocs[st->alloc_off].gpu_mask, mask);
}

static int free_gpus(const fg_sched_t *s, int node)
{
    fg_node_info_t ni;
    assert_int_equal(fg_sched_node_info(s, node, &ni), FG_OK);
    return ni.free_gpus;
}

/* ------------------------------------------------------------------ tests */

/* Three 8-GPU nodes: n0 empty, n1 with 3 free GPUs, n2 with 2 free GPUs.
 * Plan order is submit order (one user): job 1 (3 GPUs), job 2 (2 GPUs), job 3 (8 GPUs).
 *   job 1: fits n0 (8 free) and n1 (3 free)          -> n1, the fewest free: GPUs 5,6,7
 *   job 2: fits n0 (8 free) and n2 (2 free)          -> n2: GPUs 6,7
 *   job 3: needs a whole node, n0 was kept whole     -> n0: GPUs 0..7 */
static void test_best_fit_packs_partly_used_nodes_and_keeps_whole_nodes_whole(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new();
    int n0 = add_node(s, "n0", 8, "a100", FG_NODE_UP);
    int n1 = add_node(s, "n1", 8, "a100", FG_NODE_UP);
    int n2 = add_node(s, "n2", 8, "a100", FG_NODE_UP);
    occupy(s, 101, n1, 0x1f); /* GPUs 0-4 busy: 3 free */
    occupy(s, 102, n2, 0x3f); /* GPUs 0-5 busy: 2 free */
    submit(s, 1, 3, NULL, 10);
    submit(s, 2, 2, NULL, 11);
    submit(s, 3, 8, NULL, 12);

    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, 20, &d), FG_OK);
    assert_int_equal(d.nstarts, 3);
    expect_start_on(&d, 1, n1, 0xe0);
    expect_start_on(&d, 2, n2, 0xc0);
    expect_start_on(&d, 3, n0, 0xff);
    assert_int_equal(free_gpus(s, n0), 0);
    assert_int_equal(free_gpus(s, n1), 0);
    assert_int_equal(free_gpus(s, n2), 0);
    assert_int_equal(fg_sched_gpus_free(s), 0);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* Two empty 8-GPU nodes: equal free counts, so the lowest index wins (n0), and the job
 * gets the lowest GPU index (0). The second 1-GPU job then prefers n0 (7 free) to n1
 * (8 free) and gets GPU 1. */
static void test_ties_go_to_the_lowest_node_and_the_lowest_gpu(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new();
    int n0 = add_node(s, "n0", 8, "a100", FG_NODE_UP);
    add_node(s, "n1", 8, "a100", FG_NODE_UP);
    submit(s, 1, 1, NULL, 0);
    submit(s, 2, 1, NULL, 1);

    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, 5, &d), FG_OK);
    assert_int_equal(d.nstarts, 2);
    expect_start_on(&d, 1, n0, 0x01);
    expect_start_on(&d, 2, n0, 0x02);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* n0 has GPUs 0,2,5,7 busy (mask 0xa5), so 1,3,4,6 are free. A 3-GPU job goes to n0
 * (4 free beats n1's 8) and takes the three lowest free indices 1,3,4: mask 0x1a. */
static void test_a_job_gets_the_lowest_free_gpu_indices_around_holes(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new();
    int n0 = add_node(s, "n0", 8, "a100", FG_NODE_UP);
    add_node(s, "n1", 8, "a100", FG_NODE_UP);
    occupy(s, 101, n0, 0xa5);
    submit(s, 1, 3, NULL, 0);

    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, 5, &d), FG_OK);
    assert_int_equal(d.nstarts, 1);
    expect_start_on(&d, 1, n0, 0x1a);
    assert_int_equal(free_gpus(s, n0), 1); /* only GPU 6 left */
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* Four 8-GPU nodes, n0 and n2 each with one busy GPU. A 16-GPU job gets the two whole
 * nodes n1 and n3, GPUs 0..7 of each, in one start with two placements. */
static void test_a_16_gpu_job_gets_two_whole_nodes(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new();
    int n0 = add_node(s, "n0", 8, "a100", FG_NODE_UP);
    int n1 = add_node(s, "n1", 8, "a100", FG_NODE_UP);
    int n2 = add_node(s, "n2", 8, "a100", FG_NODE_UP);
    int n3 = add_node(s, "n3", 8, "a100", FG_NODE_UP);
    occupy(s, 101, n0, 0x01);
    occupy(s, 102, n2, 0x80);
    submit(s, 1, 16, NULL, 0);

    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, 5, &d), FG_OK);
    assert_int_equal(d.nstarts, 1);
    const fg_start_t *st = find_start(&d, 1);
    assert_non_null(st);
    assert_int_equal(st->gpus, 16);
    assert_int_equal(st->alloc_n, 2);
    assert_int_equal(d.allocs[st->alloc_off].node, n1);
    assert_int_equal(d.allocs[st->alloc_off].gpu_mask, 0xff);
    assert_int_equal(d.allocs[st->alloc_off + 1].node, n3);
    assert_int_equal(d.allocs[st->alloc_off + 1].gpu_mask, 0xff);

    fg_job_info_t ji;
    assert_int_equal(fg_sched_job_info(s, 1, &ji), FG_OK);
    assert_int_equal(ji.state, FG_JOB_RUNNING);
    assert_int_equal(ji.nallocs, 2);
    assert_int_equal(free_gpus(s, n1), 0);
    assert_int_equal(free_gpus(s, n3), 0);
    assert_int_equal(free_gpus(s, n0), 7);
    assert_int_equal(free_gpus(s, n2), 7);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* Three 8-GPU nodes, n0 and n1 each with one busy GPU: 7 + 7 + 8 = 22 GPUs are free but
 * only one node is whole. The 16-GPU job must not start, and must not hold n2 partly:
 * n2 keeps its 8 free GPUs. Its reason is fragmentation (enough GPUs, not whole nodes).
 * When job 102 on n1 ends, n1 and n2 are whole and the job takes both at once. */
static void test_a_16_gpu_job_starts_whole_or_not_at_all(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new();
    int n0 = add_node(s, "n0", 8, "a100", FG_NODE_UP);
    int n1 = add_node(s, "n1", 8, "a100", FG_NODE_UP);
    int n2 = add_node(s, "n2", 8, "a100", FG_NODE_UP);
    occupy(s, 101, n0, 0x01);
    occupy(s, 102, n1, 0x01);
    submit(s, 1, 16, NULL, 0);

    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, 5, &d), FG_OK);
    assert_int_equal(d.nstarts, 0);
    assert_int_equal(free_gpus(s, n2), 8);
    assert_int_equal(fg_sched_gpus_free(s), 22);
    fg_job_info_t ji;
    assert_int_equal(fg_sched_job_info(s, 1, &ji), FG_OK);
    assert_int_equal(ji.state, FG_JOB_PENDING);
    assert_int_equal(ji.reason, FG_REASON_FRAGMENTATION);

    fg_attempt_t rec;
    assert_int_equal(fg_sched_attempt_ended(s, 102, 1, FG_END_COMPLETED, 50, &rec), FG_OK);
    assert_int_equal(fg_sched_pass(s, 50, &d), FG_OK);
    assert_int_equal(d.nstarts, 1);
    const fg_start_t *st = find_start(&d, 1);
    assert_non_null(st);
    assert_int_equal(st->alloc_n, 2);
    assert_int_equal(d.allocs[st->alloc_off].node, n1);
    assert_int_equal(d.allocs[st->alloc_off].gpu_mask, 0xff);
    assert_int_equal(d.allocs[st->alloc_off + 1].node, n2);
    assert_int_equal(d.allocs[st->alloc_off + 1].gpu_mask, 0xff);
    assert_int_equal(free_gpus(s, n0), 7);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* An 8-GPU job cannot use a 4-GPU node, however empty: with n0 (4 GPUs, empty) and n1
 * (8 GPUs, one busy), it waits; a 4-GPU job takes n0 (4 free, best fit before n1's 7). */
static void test_an_8_gpu_job_needs_a_whole_8_gpu_node(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new();
    int n0 = add_node(s, "n0", 4, "a100", FG_NODE_UP);
    int n1 = add_node(s, "n1", 8, "a100", FG_NODE_UP);
    occupy(s, 101, n1, 0x01);
    submit(s, 1, 8, NULL, 0);
    submit(s, 2, 4, NULL, 1);

    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, 5, &d), FG_OK);
    assert_null(find_start(&d, 1));
    /* Job 1 is blocked and holds a reservation on n1 (frees at 0 + 1000); job 2 ends
     * at 5 + 1000 = 1005 but on n0, which job 1 cannot use, so it starts now. */
    expect_start_on(&d, 2, n0, 0x0f);
    assert_int_equal(free_gpus(s, n1), 7);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* GPU type: node a0 (a100) is empty; node h0 (h100) has 2 free GPUs.
 *   job 1 (2 GPUs, a100) -> a0 GPUs 0,1, although h0 is the better fit by count
 *   job 2 (2 GPUs, any)  -> h0 GPUs 6,7 (2 free beats a0's 6)
 *   job 3 (4 GPUs, h100) -> nothing: h0 is full, and a0 is the wrong type. */
static void test_gpu_type_restricts_the_candidate_nodes(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new();
    int a0 = add_node(s, "a0", 8, "a100", FG_NODE_UP);
    int h0 = add_node(s, "h0", 8, "h100", FG_NODE_UP);
    occupy(s, 101, h0, 0x3f);
    submit(s, 1, 2, "a100", 0);
    submit(s, 2, 2, NULL, 1);
    submit(s, 3, 4, "h100", 2);

    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, 5, &d), FG_OK);
    assert_int_equal(d.nstarts, 2);
    expect_start_on(&d, 1, a0, 0x03);
    expect_start_on(&d, 2, h0, 0xc0);
    assert_null(find_start(&d, 3));
    assert_int_equal(free_gpus(s, a0), 6);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* Nothing starts on a draining or down node, even when it is the best fit: n0 draining
 * and n1 down are empty, n2 (up) has 6 free. Two 3-GPU jobs both go to n2 (GPUs 2-4,
 * then 5-7); a third waits. Only n2 counts in gpus_up. */
static void test_nothing_starts_on_draining_or_down_nodes(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new();
    int n0 = add_node(s, "n0", 8, "a100", FG_NODE_DRAINING);
    int n1 = add_node(s, "n1", 8, "a100", FG_NODE_DOWN);
    int n2 = add_node(s, "n2", 8, "a100", FG_NODE_UP);
    occupy(s, 101, n2, 0x03);
    submit(s, 1, 3, NULL, 0);
    submit(s, 2, 3, NULL, 1);
    submit(s, 3, 3, NULL, 2);
    assert_int_equal(fg_sched_gpus_up(s), 8);

    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, 5, &d), FG_OK);
    assert_int_equal(d.nstarts, 2);
    expect_start_on(&d, 1, n2, 0x1c);
    expect_start_on(&d, 2, n2, 0xe0);
    assert_null(find_start(&d, 3));
    assert_int_equal(free_gpus(s, n0), 8);
    assert_int_equal(free_gpus(s, n1), 8);

    /* The drained node comes back: job 3 starts there at the next pass. */
    assert_int_equal(fg_sched_node_set_state(s, n0, FG_NODE_UP, 10), FG_OK);
    assert_int_equal(fg_sched_pass(s, 10, &d), FG_OK);
    assert_int_equal(d.nstarts, 1);
    expect_start_on(&d, 3, n0, 0x07);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* A placement is visible in the node table: every GPU of a start names its job. */
static void test_node_info_names_the_job_on_every_gpu(void **state)
{
    (void)state;
    fg_sched_t *s = sched_new();
    int n0 = add_node(s, "n0", 8, "a100", FG_NODE_UP);
    submit(s, 7, 2, NULL, 0);
    submit(s, 9, 4, NULL, 1);

    fg_decisions_t d;
    fg_decisions_init(&d);
    assert_int_equal(fg_sched_pass(s, 5, &d), FG_OK);
    expect_start_on(&d, 7, n0, 0x03);
    expect_start_on(&d, 9, n0, 0x3c);
    fg_node_info_t ni;
    assert_int_equal(fg_sched_node_info(s, n0, &ni), FG_OK);
    const fg_job_id_t want[8] = {7, 7, 9, 9, 9, 9, 0, 0};
    for (int i = 0; i < 8; i++)
        assert_int_equal(ni.gpu_job[i], want[i]);
    assert_int_equal(ni.free_gpus, 2);
    fg_decisions_free(&d);
    fg_sched_free(s);
}

/* A job of k whole nodes is planned on the k nodes that free up entirely first, whether
 * the type has few nodes per node asked for (its leaves read at once) or many (one
 * descent per node, each taken out of the tree while the next is picked): the same
 * nodes. With n nodes of 8 GPUs, all busy with jobs of time limit 1000, node n - 3
 * started at 0 (free at 1000), node 5 at 10 (free at 1010), the others at 50 (free at
 * 1050). At t=60 job 1 (16 GPUs) reserves nodes n - 3 and 5, estimated start 1010;
 * job 2 (16 GPUs) gets the next two, nodes 0 and 1: 1050. */
static void test_whole_nodes_are_planned_where_they_free_up_first(void **state)
{
    (void)state;
    static const int sizes[] = {10, 130};
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        const int n = sizes[c];
        fg_sched_t *s = sched_new();
        for (int i = 0; i < n; i++) {
            char name[16];
            snprintf(name, sizeof name, "n%d", i);
            add_node(s, name, 8, "a100", FG_NODE_UP);
            const fg_time_t start = i == n - 3 ? 0 : i == 5 ? 10 : 50;
            fg_job_spec_t j = job((fg_job_id_t)(100 + i), 8, NULL, start);
            fg_alloc_t a = {.node = i, .gpu_mask = 0xff};
            assert_int_equal(fg_sched_restore_running(s, &j, 1, 0, 0, start, &a, 1, 60), FG_OK);
        }
        submit(s, 1, 16, NULL, 60);
        submit(s, 2, 16, NULL, 61);
        fg_decisions_t d;
        fg_decisions_init(&d);
        assert_int_equal(fg_sched_pass(s, 62, &d), FG_OK);
        assert_int_equal(d.nstarts, 0);
        fg_decisions_free(&d);
        fg_job_info_t ji;
        assert_int_equal(fg_sched_job_info(s, 1, &ji), FG_OK);
        assert_int_equal(ji.reason, FG_REASON_RESOURCES);
        assert_int_equal(ji.estimated_start, 1010);
        assert_int_equal(fg_sched_job_info(s, 2, &ji), FG_OK);
        assert_int_equal(ji.estimated_start, 1050);
        fg__sched_check(s);
        fg_sched_free(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_best_fit_packs_partly_used_nodes_and_keeps_whole_nodes_whole),
        cmocka_unit_test(test_ties_go_to_the_lowest_node_and_the_lowest_gpu),
        cmocka_unit_test(test_a_job_gets_the_lowest_free_gpu_indices_around_holes),
        cmocka_unit_test(test_a_16_gpu_job_gets_two_whole_nodes),
        cmocka_unit_test(test_a_16_gpu_job_starts_whole_or_not_at_all),
        cmocka_unit_test(test_an_8_gpu_job_needs_a_whole_8_gpu_node),
        cmocka_unit_test(test_gpu_type_restricts_the_candidate_nodes),
        cmocka_unit_test(test_nothing_starts_on_draining_or_down_nodes),
        cmocka_unit_test(test_node_info_names_the_job_on_every_gpu),
        cmocka_unit_test(test_whole_nodes_are_planned_where_they_free_up_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
