/*
 * test_core_shortcuts.c - the core's shortcuts that leave out work no decision depends
 * on, checked against the plain computation.
 *
 * Random event sequences (seeded, deterministic: splitmix64) drive two schedulers with
 * the very same calls: s[0] with the shortcuts off (fg__sched_set_plain, a hook for
 * tests), s[1] with them on. After every pass both decide exactly the same (starts,
 * placements, preemptions, next_wake), and every job has the same state, reason and
 * estimate. The shortcuts:
 *   - a preemption search under fair share skips the running lists of an account at or
 *     under its entitlement (not the waiting job's), and of the waiting job's account
 *     when its member holds all the account's running GPUs, unless one of the account's
 *     jobs may have started at the time of the pass (such a job lowers next_wake);
 *   - feasible() answers from a bit mask of the sizes of one node, any type, already
 *     found feasible while no node was added or changed state;
 *   - the wfq order sets up (usage terms, weights, cursors, heaps) only the accounts and
 *     members with pending jobs, kept as sets (bits and an ascending list) as jobs enter
 *     and leave the queues;
 *   - the look ahead's reading of a queue passes a run of FG__QBLK entries at once when
 *     the run's summary (each size's least time limit, the fewest whole nodes) refuses
 *     them all; a summary is stale once an entry of its run is written;
 *   - the wfq order's inline step keeps only its account's counts (GPUs walked, jobs
 *     left) for a member alone in its account (under the plain hook every step keeps
 *     every member's);
 *   - a walk that another walk follows ends when a start leaves no GPU free (it looks
 *     at fewer jobs then: `scanned` may only be lower in such a pass).
 * Sequences have three or four accounts of one to three members with weights, nodes of 8
 * and 4 GPUs of two types that go down and come back, jobs of 1 to 16 GPUs in every
 * class, cancels, short quanta and waits (many preemptions), and often a second pass at
 * the same time after new submissions (victims that started at that time). Wrong
 * versions and
 * the first seed that fails: skipping a list even when one of its jobs started at the
 * time of the pass, 2; skipping the waiting job's account whatever its members hold,
 * 24; skipping accounts up to 1.5 GPUs over their entitlement, 34; taking accounts up
 * to half a GPU under their entitlement as over it in victim_ok, 48; a mask kept across
 * a node change, 2; a member marked as having pending jobs only at its second, 2; a
 * member's stale count of jobs in the band read although it has none pending, 11; the
 * list losing the index after the one taken out, 1; a member alone with jobs in the band
 * taken as alone in its account by the inline step, 3. A second set of sequences (seeds
 * 1000001..., FG_SHORTCUTS_SEED included) has long queues under wfq (one member per
 * account, many jobs, one GPU type, short windows, time limits and times in steps of
 * 100 s): a summary left valid when a job leaves its queue from the front fails at
 * 1000011, a run passed although the reading's stop lies inside it at 1000013, a time
 * limit equal to its size's bound taken as refused at 1000012, and the jobs of whole
 * nodes left out of the summary at 1000156. A third set (seeds 2000001...) caps the
 * walks of a pass at one to three, so that a pass's last walk often starts jobs and
 * leaves what counts: a walk ended after a start with one GPU still free fails at seed
 * 1, and the last walk ended like the others at 2000003. Two more (seeds 3000001... and
 * 4000001...) replay the first two under fair (fair share and LAS queues at once).
 * Five more tests check pieces on their own: the preemption search's water fill sorted
 * from the last search's order (ties broken by descending index fail at seed 1, a 2 %
 * tolerance at 11), and the look ahead's bound on an account's reading, fg__key_stop
 * (one past the first key after the best fails at seed 6 from the guess and at 104
 * from the bisection, a tie taken the wrong way at 6; in the sequences of
 * test_core_estimates, ignoring the account index on a tie fails at seed 1000065),
 * the k smallest whole-node keys off a tree's leaves, fg__tree_smallest (a key equal to
 * the k-th taken in place of the earlier node fails at seed 2, an infinite key among the
 * first k at seed 1), and a claim's leaf update, fg__node_leaf_claim, that writes only
 * the keys that may change (never the whole-node key fails at seed 1, one key too few at
 * 1, the whole-node key's change not marked for the minima at 3), and the wfq account
 * order, sorted and as a heap, against a plain scan for the smallest (key, index).
 * A failure prints its seed; FG_SHORTCUTS_SEED=<seed> replays just that sequence.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/internal.h" /* the hooks for tests and the trees (fg__sched_set_plain, ...) */
#include "fairgpu/core.h"
#include "splitmix.h"
#include "twin.h"

#define MAXJOBS 600

typedef struct world {
    uint64_t seed, rng;
    const char *off; /* the shortcuts off in s[0] */
    fg_sched_t *s[2];
    fg_time_t now;
    fg_job_id_t next_id;
    int nnodes;
    bool longq;    /* long queues (run_sequence) */
    int max_walks; /* walks per pass capped (run_sequence; 0: not) */
    bool fair;     /* the policy forced to fair (run_sequence) */
    bool running[MAXJOBS];
    int32_t attempt[MAXJOBS];
    fg_time_t end_at[MAXJOBS];
} world_t;

static int64_t g_preempts; /* preemptions over all sequences: the searches were exercised */
static int64_t g_cuts;     /* passes with a walk cut short after a start: exercised too */

static const char *const accts[] = {"a", "b", "c", "d"};
static const char *const users[] = {"u", "v", "w"};

static void fail_seed(const world_t *w, const char *what, fg_job_id_t id)
{
    print_error("seed %llu (shortcuts off: %s), t=%lld, job %llu: %s\n",
                (unsigned long long)(w->seed + (w->longq ? 1000000 : 0) +
                                     (w->max_walks ? 2000000 : 0) + (w->fair ? 3000000 : 0)),
                w->off, (long long)w->now, (unsigned long long)id, what);
    fail();
}

static void submit(world_t *w, int naccts, int nusers)
{
    static const int32_t sizes[] = {1, 1, 2, 4, 8, 16}, long_sizes[] = {1, 2, 4, 8, 16, 24};
    static const char *const types[] = {NULL, NULL, NULL, "a100", "t4"};
    if (w->next_id >= MAXJOBS)
        return;
    uint64_t *r = &w->rng;
    fg_job_spec_t j = {.id = w->next_id,
                       .account = accts[rnd(r, 0, naccts - 1)],
                       .user = users[rnd(r, 0, nusers - 1)],
                       .gpus = w->longq ? long_sizes[rnd(r, 0, 5)] : sizes[rnd(r, 0, 5)],
                       .gpu_type = w->longq ? NULL : types[rnd(r, 0, 4)],
                       .time_limit_s = w->longq ? 100 * rnd(r, 1, 30) : rnd(r, 50, 4000),
                       .prio = (fg_prio_t)(rnd(r, 0, 5) == 0 ? rnd(r, 0, 2) : FG_PRIO_NORMAL),
                       .max_retries = 0,
                       .checkpoint_interval_s = rnd(r, 0, 1) ? 120 : 0,
                       .submit_time = w->now};
    int rc0 = fg_sched_submit(w->s[0], &j, w->now);
    assert_int_equal(rc0, fg_sched_submit(w->s[1], &j, w->now));
    w->next_id++;
}

static void end_attempt(world_t *w, fg_job_id_t id, fg_end_cause_t cause)
{
    int rc;
    if (!twin_attempt_ended(w->s, id, w->attempt[id], cause, w->now, &rc))
        fail_seed(w, "attempts ended differently", id);
    w->running[id] = false;
}

static void pass(world_t *w)
{
    fg_decisions_t d[2];
    const int64_t cut_before = w->s[1]->walks_cut;
    for (int k = 0; k < 2; k++) {
        fg_decisions_init(&d[k]);
        assert_int_equal(fg_sched_pass(w->s[k], w->now, &d[k]), FG_OK);
    }
    /* (a walk cut short looks at fewer jobs; else both look at the same) */
    const bool cut = w->s[1]->walks_cut > cut_before;
    g_cuts += cut;
    if (!twin_decisions_equal(&d[0], &d[1]) ||
        (cut ? d[1].scanned > d[0].scanned : d[0].scanned != d[1].scanned))
        fail_seed(w, "decisions differ", 0);
    for (fg_job_id_t id = 1; id < w->next_id; id++) {
        fg_job_info_t a, b;
        int rc0 = fg_sched_job_info(w->s[0], id, &a);
        assert_int_equal(rc0, fg_sched_job_info(w->s[1], id, &b));
        if (rc0 == FG_OK && (a.state != b.state || a.reason != b.reason ||
                             a.estimated_start != b.estimated_start || a.attempt != b.attempt))
            fail_seed(w, "job infos differ", id);
    }
    uint64_t *r = &w->rng;
    for (size_t i = 0; i < d[0].nstarts; i++) {
        fg_job_id_t id = d[0].starts[i].job;
        w->running[id] = true;
        w->attempt[id] = d[0].starts[i].attempt;
        w->end_at[id] = w->now + rnd(r, 1, 3000);
    }
    g_preempts += (int64_t)d[0].npreempts;
    for (size_t i = 0; i < d[0].npreempts; i++) /* confirmed at once */
        end_attempt(w, d[0].preempts[i].job, FG_END_PREEMPTED);
    for (int k = 0; k < 2; k++)
        fg_decisions_free(&d[k]);
}

/* One random sequence; `fair` replaces the policy it draws by fair (the draws stay those
 * of the same seed without it). */
static void run_sequence(uint64_t seed, bool longq, int max_walks, bool fair)
{
    world_t w;
    memset(&w, 0, sizeof w);
    w.seed = seed;
    w.longq = longq;
    w.max_walks = max_walks;
    w.fair = fair;
    w.rng = seed * 0x2545f4914f6cdd1dull + 11;
    uint64_t *r = &w.rng;
    fg_config_t c;
    fg_config_default(&c);
    static const fg_policy_t pols[] = {FG_POLICY_WFQ, FG_POLICY_WFQ, FG_POLICY_RR, FG_POLICY_LAS,
                                       FG_POLICY_PRIORITY};
    c.policy = pols[rnd(r, 0, 4)];
    c.preemption = rnd(r, 0, 5) != 0;
    c.preempt_jobs_per_pass = (int32_t)rnd(r, 1, 3);
    c.preempt_wait_s = rnd(r, 0, 200);
    c.min_run_s = rnd(r, 0, 200);
    c.quantum_s = rnd(r, 50, 600);
    c.half_life_s = rnd(r, 0, 1) ? 3600 : 0;
    c.reserve_depth = (int32_t)rnd(r, 0, 4);
    c.estimate_depth = (int32_t)rnd(r, 0, 40);
    if (longq) { /* the look ahead reads long queues of one member per account */
        c.policy = FG_POLICY_WFQ;
        c.backfill_depth = (int32_t)rnd(r, 4, 40);
        c.estimate_depth = (int32_t)rnd(r, 0, 6);
    }
    if (fair)
        c.policy = FG_POLICY_FAIR;
    assert_int_equal(fg_config_check(&c, NULL), FG_OK);
    const int naccts = (int)rnd(r, longq ? 2 : 3, longq ? 3 : 4);
    const int nusers = longq ? 1 : (int)rnd(r, 1, 3);
    for (int k = 0; k < 2; k++) {
        w.s[k] = fg_sched_new(&c);
        assert_non_null(w.s[k]);
        fg_sched_set_estimates_on_demand(w.s[k], true);
    }
    /* odd seeds: every shortcut off; even ones: one of them, by name */
    w.off = seed % 2 ? "all" : fg__shortcut_name((int)(seed / 2 % FG__SC_COUNT));
    assert_int_equal(fg__shortcut_set(w.s[0], w.off, false), FG_OK);
    for (int k = 0; k < 2; k++) /* (a pass's last walk may start jobs: nothing is cut there) */
        fg__sched_set_max_walks(w.s[k], max_walks);
    for (int a = 0; a < naccts; a++) {
        double aw = (double)rnd(r, 1, 3);
        for (int k = 0; k < 2; k++)
            assert_true(fg_sched_account_set(w.s[k], accts[a], aw, -1) >= 0);
        for (int u = 0; u < nusers; u++) {
            double uw = (double)rnd(r, 1, 2);
            for (int k = 0; k < 2; k++)
                assert_true(fg_sched_member_set(w.s[k], accts[a], users[u], uw) >= 0);
        }
    }
    w.nnodes = (int)rnd(r, longq ? 4 : 2, 9);
    for (int n = 0; n < w.nnodes; n++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", n);
        int32_t gpus = longq || rnd(r, 0, 3) ? 8 : 4;
        const char *type = longq || rnd(r, 0, 2) ? "a100" : "t4";
        for (int k = 0; k < 2; k++)
            assert_int_equal(fg_sched_node_add(w.s[k], name, gpus, type, FG_NODE_UP), n);
    }
    w.next_id = 1;
    for (int step = 0; step < 90; step++) {
        int nsub = (int)rnd(r, 0, longq ? 12 : 4);
        for (int e = 0; e < nsub; e++)
            submit(&w, naccts, nusers);
        for (fg_job_id_t id = 1; id < w.next_id; id++)
            if (w.running[id] && w.end_at[id] <= w.now)
                end_attempt(&w, id, FG_END_COMPLETED);
        for (int nc = (int)rnd(r, 0, 2); nc > 0 && w.next_id > 1; nc--) { /* cancels */
            fg_job_id_t id = (fg_job_id_t)rnd(r, 1, (int64_t)w.next_id - 1);
            int rc0 = fg_sched_cancel(w.s[0], id, w.now);
            assert_int_equal(rc0, fg_sched_cancel(w.s[1], id, w.now));
        }
        if (rnd(r, 0, 14) == 0) { /* a node goes down (its jobs are lost) or comes back */
            int n = (int)rnd(r, 0, w.nnodes - 1);
            fg_node_info_t ni;
            assert_int_equal(fg_sched_node_info(w.s[0], n, &ni), FG_OK);
            fg_node_state_t st = ni.state == FG_NODE_UP ? FG_NODE_DOWN : FG_NODE_UP;
            for (int k = 0; k < 2; k++)
                assert_int_equal(fg_sched_node_set_state(w.s[k], n, st, w.now), FG_OK);
            for (fg_job_id_t id = 1; id < w.next_id && st == FG_NODE_DOWN; id++) {
                fg_job_info_t ji;
                if (!w.running[id] || fg_sched_job_info(w.s[0], id, &ji) != FG_OK)
                    continue;
                for (int32_t k = 0; k < ji.nallocs; k++)
                    if (ji.allocs[k].node == n) {
                        end_attempt(&w, id, FG_END_NODE_LOST);
                        break;
                    }
            }
        }
        pass(&w);
        if (rnd(r, 0, 2) == 0) { /* more work at the same time: victims that just started */
            for (int e = 0; e < 3; e++)
                submit(&w, naccts, nusers);
            pass(&w);
        }
        w.now += longq ? 100 * rnd(r, 0, 3) : rnd(r, 0, 300);
    }
    for (int k = 0; k < 2; k++)
        fg_sched_free(w.s[k]);
}

static void test_the_shortcuts_decide_what_the_plain_computation_decides(void **state)
{
    (void)state;
    const char *one = getenv("FG_SHORTCUTS_SEED");
    if (one) {
        const uint64_t seed = strtoull(one, NULL, 10), set = seed / 1000000, n = seed % 1000000;
        run_sequence(n, set == 1 || set == 4, set == 2 ? 1 + (int)(n % 3) : 0, set >= 3);
        return;
    }
    for (uint64_t seed = 1; seed <= 1500; seed++)
        run_sequence(seed, false, 0, false);
    assert_true(g_preempts > 0);
    assert_true(g_cuts > 0);
    /* (seeds 1000001...: FG_SHORTCUTS_SEED replays them with the long queues) */
    for (uint64_t seed = 1; seed <= 600; seed++)
        run_sequence(seed, true, 0, false);
    /* (seeds 2000001...: at most one to three walks per pass) */
    for (uint64_t seed = 1; seed <= 300; seed++)
        run_sequence(seed, false, 1 + (int)(seed % 3), false);
    /* (seeds 3000001... and 4000001...: the first two sets under fair) */
    for (uint64_t seed = 1; seed <= 600; seed++)
        run_sequence(seed, false, 0, true);
    for (uint64_t seed = 1; seed <= 300; seed++)
        run_sequence(seed, true, 0, true);
}

/* The accounts' water fill of a preemption search is kept sorted from the last search
 * (fg_fair_kept_t): after random changes of a few demands (and now and then a weight), the
 * same bits as sorting from scratch. Demands and weights are small (many ties of d/w) or
 * fractional (rounding). */
static void test_the_kept_water_fill_gives_the_same_bits(void **state)
{
    (void)state;
    enum { N = 24 };
    static const double ws[] = {1.0, 1.0, 2.0, 3.0, 0.5, 1.5, 0.7, 3.1};
    for (uint64_t seed = 1; seed <= 2000; seed++) {
        uint64_t r = seed * 0x9e3779b97f4a7c15ull + 3;
        const size_t n = (size_t)rnd(&r, 1, N);
        double d[N], w[N], plain[N], fast[N];
        int32_t idx[N];
        fg_fair_kept_t f = {0};
        fg_fair_kept_init(&f, n);
        for (size_t i = 0; i < n; i++) {
            w[i] = ws[rnd(&r, 0, 7)];
            d[i] = (double)rnd(&r, 0, 12);
            fg_fair_kept_set(&f, i, d[i], w[i]);
        }
        for (int call = 0; call < 40; call++) {
            const double cap = (double)rnd(&r, 0, 80);
            fg_fair_water_fill(n, d, w, cap, plain, idx);
            fg_fair_kept_fill(&f, cap, fast);
            if (memcmp(plain, fast, sizeof *plain * n) != 0) {
                print_error("water fill seed %llu, call %d\n", (unsigned long long)seed, call);
                fail();
            }
            for (int64_t c = rnd(&r, 1, 3); c > 0; c--) { /* a few demands change */
                const size_t i = (size_t)rnd(&r, 0, (int64_t)n - 1);
                d[i] = (double)rnd(&r, 0, 12);
                if (rnd(&r, 0, 9) == 0)
                    w[i] = ws[rnd(&r, 0, 7)];
                fg_fair_kept_set(&f, i, d[i], w[i]);
            }
        }
        fg_fair_kept_free(&f);
    }
}

/* The look ahead's bound on an account's reading (fg__key_stop): the least p >= p0 whose
 * key (base + p over w, as the order computes it) comes after a best key bk (or equals it,
 * with `tie`), found from a guess; the same p as trying p0, p0 + 1, ... one by one. Keys
 * of other accounts' jobs as best keys (exact ties), weights of 1 and fractional ones,
 * bases from 0 to 10^9 (rounding). */
static void test_the_look_aheads_bound_is_the_first_key_after_the_best(void **state)
{
    (void)state;
    static const double ws[] = {1.0, 1.0, 2.0, 3.0, 0.5, 1.5, 0.7, 3.1, 0.3};
    for (uint64_t seed = 1; seed <= 50000; seed++) {
        uint64_t r = seed * 0x2545f4914f6cdd1dull + 5;
        const double w = ws[rnd(&r, 0, 8)], w2 = ws[rnd(&r, 0, 8)];
        const double scale = rnd(&r, 0, 2) == 0 ? 1e9 : rnd(&r, 0, 1) ? 1e3 : 1.0;
        const double base = (double)rnd(&r, 0, 1000000) / 1000000.0 * scale;
        const double base2 = (double)rnd(&r, 0, 1000000) / 1000000.0 * scale;
        const int64_t p0 = rnd(&r, 0, 300), p2 = rnd(&r, 0, 600);
        const bool tie = rnd(&r, 0, 1);
        /* the best key: another account's key at some GPU count, or this one's */
        const double x = rnd(&r, 0, 3) ? base2 + (double)p2 : base + (double)(p0 + p2);
        const double wx = rnd(&r, 0, 3) ? w2 : w;
        const double bk = wx == 1.0 ? x : x / wx;
        int64_t want = p0;
        for (; want < p0 + 100000; want++) {
            const double y = base + (double)want;
            const double key = w == 1.0 ? y : y / w;
            if (key > bk || (key == bk && tie))
                break;
        }
        const int64_t got = fg__key_stop(base, w, bk, tie, p0);
        if (want < p0 + 100000 && got != want) {
            print_error("key bound seed %llu: %lld, want %lld\n", (unsigned long long)seed,
                        (long long)got, (long long)want);
            fail();
        }
    }
}

/* A claim of k whole nodes picks the k nodes with the smallest finite whole-node key by
 * (key, position) off the tree's leaves (fg__tree_smallest): the first k finite keys
 * sorted, then only keys below the k-th. The same nodes, in the same order, and the same
 * k-th key as sorting every finite (key, position) pair. Keys from a few values (ties),
 * some infinite (nodes out of the tree), 1 to 70 nodes. */
static void test_the_smallest_whole_node_keys_are_those_of_a_full_sort(void **state)
{
    (void)state;
    enum { NMAX = 70, KMAX = FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS };
    for (uint64_t seed = 1; seed <= 20000; seed++) {
        uint64_t r = seed * 0x9e3779b97f4a7c15ull + 17;
        fg__type_t ty;
        memset(&ty, 0, sizeof ty);
        ty.n = (int32_t)rnd(&r, 1, NMAX);
        ty.tsize = 512;
        ty.tinner = 73;
        ty.tspan = 73 + 512;
        int64_t tree[FG__TREE_KEYS * (73 + 512)];
        int32_t ids[NMAX];
        ty.tree = tree;
        ty.nodes = ids;
        const int64_t span = ty.tinner + ty.tsize;
        int64_t *leaf = &tree[(FG__TREE_KEYS - 1) * span + ty.tinner];
        const int64_t spread = rnd(&r, 1, 3) == 1 ? 3 : 1000;
        for (int32_t p = 0; p < ty.n; p++) {
            ids[p] = 100 + p;
            leaf[p] = rnd(&r, 0, 5) == 0 ? FG__INF : rnd(&r, 0, spread);
        }
        const int32_t k = (int32_t)rnd(&r, 1, KMAX);
        int32_t got_nodes[KMAX], want_nodes[NMAX];
        int64_t kth = 0;
        const int32_t got = fg__tree_smallest(&ty, FG__TREE_KEYS - 1, k, got_nodes, &kth);
        /* the plain way: every finite pair, sorted by (key, position) */
        int32_t m = 0;
        for (int32_t p = 0; p < ty.n; p++)
            if (leaf[p] != FG__INF) {
                int32_t q = m++;
                while (q > 0 && leaf[want_nodes[q - 1]] > leaf[p]) {
                    want_nodes[q] = want_nodes[q - 1];
                    q--;
                }
                want_nodes[q] = p;
            }
        const int32_t want = m < k ? m : k;
        bool same = got == want && kth == (want ? leaf[want_nodes[want - 1]] : FG__INF);
        for (int32_t c = 0; same && c < want; c++)
            same = got_nodes[c] == ids[want_nodes[c]];
        if (!same) {
            print_error("smallest keys seed %llu\n", (unsigned long long)seed);
            fail();
        }
    }
}

/* A claim's leaf update, fg__node_leaf_claim, writes only the keys that may change: the
 * first c + g (c old keys past the first g below the new end x, then g times x) and the
 * whole-node key when key 7 is new. The same leaves, minima and argmins as re-sorting
 * the node's avail (fg__node_leaf_update), with reads of random keys between claims
 * (the minima above the leaves are made lazily, key by key). 1 to 70 nodes of 8 GPUs,
 * availabilities and ends from a few values (ties), some long ago. */
static void test_a_claims_leaf_keys_are_those_of_a_full_sort(void **state)
{
    (void)state;
    enum { NMAX = 70 };
    for (uint64_t seed = 1; seed <= 4000; seed++) {
        uint64_t r = seed * 0x9e3779b97f4a7c15ull + 29;
        fg_sched_t *s = calloc(1, sizeof *s);
        fg__node_t *nodes = calloc(NMAX, sizeof *nodes);
        assert_non_null(s);
        assert_non_null(nodes);
        fg__type_t ty[2];
        int32_t ids[NMAX];
        const int32_t n = (int32_t)rnd(&r, 1, NMAX);
        const int64_t spread = rnd(&r, 1, 3) == 1 ? 3 : 1000;
        s->nodes = nodes;
        s->walk_no = 7;
        for (int w = 0; w < 2; w++) {
            memset(&ty[w], 0, sizeof ty[w]);
            ty[w].n = n;
            ty[w].nodes = ids;
            ty[w].tsize = 1;
            while (ty[w].tsize < n) {
                ty[w].tinner += ty[w].tsize;
                ty[w].tsize *= 8;
            }
            const size_t span = (size_t)ty[w].tinner + (size_t)ty[w].tsize;
            ty[w].tspan = span;
            ty[w].tree = malloc(sizeof(int64_t) * span * FG__TREE_KEYS);
            ty[w].tdirty = calloc(span, sizeof(uint16_t));
            assert_non_null(ty[w].tree);
            assert_non_null(ty[w].tdirty);
            for (size_t i = 0; i < span * FG__TREE_KEYS; i++)
                ty[w].tree[i] = FG__INF;
        }
        for (int32_t p = 0; p < n; p++) {
            fg__node_t *nd = &nodes[p];
            ids[p] = p;
            nd->gpus = FG_WHOLE_NODE_GPUS;
            nd->type_pos = p;
            nd->state = FG_NODE_UP;
            nd->touched = s->walk_no;
            for (int i = 0; i < FG_WHOLE_NODE_GPUS; i++)
                nd->avail[i] = rnd(&r, 0, 3) == 0 ? FG__PAST : (fg_time_t)rnd(&r, 0, spread);
            for (int w = 0; w < 2; w++) {
                s->types = &ty[w];
                fg__node_leaf_update(s, p);
            }
        }
        bool same = true;
        for (int step = 0; same && step < 60; step++) {
            if (rnd(&r, 0, 2) == 0) { /* read a key */
                const int k = (int)rnd(&r, 0, FG__TREE_KEYS - 1);
                same = fg__tree_min(&ty[0], k) == fg__tree_min(&ty[1], k) &&
                       fg__tree_argmin(&ty[0], k) == fg__tree_argmin(&ty[1], k);
                continue;
            }
            const int32_t p = (int32_t)rnd(&r, 0, n - 1);
            const int g = (int)rnd(&r, 1, FG_WHOLE_NODE_GPUS);
            const fg_time_t x = (fg_time_t)rnd(&r, 0, spread + 2);
            fg__node_t *nd = &nodes[p];
            for (int c = 0; c < g; c++) { /* the g smallest avail now end at x */
                int best = -1;
                for (int i = 0; i < FG_WHOLE_NODE_GPUS; i++)
                    if (nd->res_from[i] != 1 && (best < 0 || nd->avail[i] < nd->avail[best]))
                        best = i;
                nd->res_from[best] = 1;
            }
            for (int i = 0; i < FG_WHOLE_NODE_GPUS; i++) {
                if (nd->res_from[i] == 1)
                    nd->avail[i] = x;
                nd->res_from[i] = 0;
            }
            s->types = &ty[0];
            fg__node_leaf_claim(s, p, g, x);
            s->types = &ty[1];
            fg__node_leaf_update(s, p);
        }
        const size_t span = (size_t)ty[0].tinner + (size_t)ty[0].tsize;
        for (int k = 0; same && k < FG__TREE_KEYS; k++) {
            same = fg__tree_min(&ty[0], k) == fg__tree_min(&ty[1], k);
            for (int32_t p = 0; same && p < n; p++)
                same = ty[0].tree[(size_t)k * span + (size_t)ty[0].tinner + (size_t)p] ==
                       ty[1].tree[(size_t)k * span + (size_t)ty[1].tinner + (size_t)p];
        }
        for (int w = 0; w < 2; w++) {
            free(ty[w].tree);
            free(ty[w].tdirty);
        }
        free(nodes);
        free(s);
        if (!same) {
            print_error("claim leaf keys seed %llu\n", (unsigned long long)seed);
            fail();
        }
    }
}

/* The wfq account order's two forms (order.h) pick what a plain scan for the smallest
 * (key, index) picks: sorted with the smallest last (fg__hk_sort_last, then
 * fg__acct_sink after each pick, with no sentinel before the array) and a heap
 * (fg__sift_key). Keys from a few values (ties), picks that add 1 to 8 GPUs over a
 * weight of 1 or 2, accounts that run out of jobs, 1 to 70 accounts. */
static void test_the_account_orders_pick_the_smallest_key_then_index(void **state)
{
    (void)state;
    enum { N = 70 };
    for (uint64_t seed = 1; seed <= 3000; seed++) {
        uint64_t r = seed * 0x9e3779b97f4a7c15ull + 11;
        const int32_t n = (int32_t)rnd(&r, 1, N);
        fg__hk_t sorted[N], heap[N];
        double key[N], w[N];
        int64_t left[N];
        for (int32_t i = 0; i < n; i++) {
            key[i] = (double)rnd(&r, 0, 4);
            w[i] = rnd(&r, 0, 1) ? 1.0 : 2.0;
            left[i] = rnd(&r, 1, 5);
            sorted[i] = heap[i] = (fg__hk_t){key[i], i, -1};
        }
        fg__hk_sort_last(sorted, n);
        for (int32_t i = n / 2 - 1; i >= 0; i--)
            fg__sift_key(heap, n, i);
        int32_t ns = n, nh = n;
        while (ns > 0) {
            int32_t want = -1;
            for (int32_t i = 0; i < n; i++)
                if (left[i] &&
                    (want < 0 || key[i] < key[want] || (key[i] == key[want] && i < want)))
                    want = i;
            if (sorted[ns - 1].id != want || heap[0].id != want || nh != ns) {
                print_error("account order seed %llu: %d and %d, want %d\n",
                            (unsigned long long)seed, sorted[ns - 1].id, heap[0].id, want);
                fail();
            }
            key[want] += (double)rnd(&r, 1, 8) / w[want];
            if (--left[want] == 0) {
                ns--;
                heap[0] = heap[--nh];
            } else {
                if (ns > 1)
                    fg__acct_sink(sorted, ns, key[want]);
                heap[0].key = key[want];
            }
            if (nh > 1)
                fg__sift_key(heap, nh, 0);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_shortcuts_decide_what_the_plain_computation_decides),
        cmocka_unit_test(test_the_kept_water_fill_gives_the_same_bits),
        cmocka_unit_test(test_the_look_aheads_bound_is_the_first_key_after_the_best),
        cmocka_unit_test(test_the_smallest_whole_node_keys_are_those_of_a_full_sort),
        cmocka_unit_test(test_a_claims_leaf_keys_are_those_of_a_full_sort),
        cmocka_unit_test(test_the_account_orders_pick_the_smallest_key_then_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
