/*
 * test_core_random.c - randomized invariants of the scheduling core.
 *
 * Thousands of random event sequences (seeded, deterministic: splitmix64) drive three or
 * four schedulers with the very same calls:
 *   s[0]  the scheduler under test, maintained incrementally;
 *   s[1]  its twin, to check determinism: same calls, the same answers byte for byte;
 *   s[2]  a twin on which fg_sched_rebuild() runs before every pass: incremental passes
 *         must decide exactly what passes over freshly rebuilt structures decide;
 *   s[3]  from a random step on, a scheduler restored from what s[0] exports (a controller
 *         restart): it must decide as s[0] from then on.
 * A sequence has random nodes (8 or 4 GPUs, two GPU types, some draining or down at
 * times), accounts with weights and quotas, members with weights, a random configuration
 * (every policy), and random events between passes at increasing times: submits of
 * 1/2/4/8/16-GPU jobs of every class, completions, failures, timeouts, cancels, node
 * losses, preemption confirmations, stale reports, budget flags.
 *
 * After every pass, on s[0]:
 *   - no GPU is given twice, the node table and the jobs' allocations agree, and free
 *     counts are right (so no node is over capacity);
 *   - every start was pending and eligible, gets exactly the GPUs it asked for, on up
 *     nodes of its GPU type, on GPUs that were free; jobs of 8k GPUs get k whole 8-GPU
 *     nodes, GPUs 0..7 of each;
 *   - no account runs more GPUs than its quota, and none out of budget starts a job;
 *   - preemptions follow the rules (high over low only; fair share and las only past
 *     the quantum, the minimum run time and the victim's checkpoint interval; none when
 *     preemption is off; never a job started in the same pass);
 * the account and member counters match the jobs; and all schedulers agree on decisions,
 * job tables, node tables and usage; and a pass with no event before next_wake decides
 * nothing (see g_quiet_passes).
 *
 * A failure prints its seed; FG_RANDOM_SEED=<seed> replays just that sequence.
 * FG_RANDOM_SEQUENCES=<n> changes the number of short sequences (default 2000, 500 under
 * AddressSanitizer; the long ones are a hundredth of it), e.g. 100000 for a soak.
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
#include "splitmix.h"

#define NSCHED   4 /* at most: the fourth is restored mid-sequence */
#define MAXNODES 192
#define MAXACCT  6
#define MAXMEM   4
#define MAXJOBS  2048

/* ------------------------------------------------------------------ the PRNG */

static bool chance(uint64_t *x, int percent)
{
    return rnd(x, 0, 99) < percent;
}

/* ------------------------------------------------------------------ a growable string */

typedef struct text {
    char *p;
    size_t len, cap;
} text_t;

static void text_add(text_t *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = t->cap - t->len;
        int w = vsnprintf(t->p ? t->p + t->len : NULL, room, fmt, ap);
        va_end(ap);
        assert_true(w >= 0);
        if ((size_t)w < room) {
            t->len += (size_t)w;
            return;
        }
        t->cap = t->cap ? 2 * t->cap + (size_t)w : 4096;
        t->p = realloc(t->p, t->cap);
        assert_non_null(t->p);
    }
}

static void text_clear(text_t *t)
{
    t->len = 0;
    if (t->p)
        t->p[0] = '\0';
}

/* ------------------------------------------------------------------ the world */

typedef struct djob { /* what the driver knows of a job it submitted */
    bool live;        /* in the core: pending or running */
    bool running;     /* running (else pending) */
    bool preempting;  /* running, a preemption was decided */
    int32_t gpus;
    const char *type;
    int acct, member; /* indices into the world's accounts and their users */
    fg_prio_t prio;
    fg_time_t limit;
    fg_time_t checkpoint;
    int32_t max_retries;
    int32_t attempt;       /* attempts started so far */
    fg_time_t start_time;  /* of the running attempt */
    fg_time_t planned_end; /* of the running attempt */
    fg_time_t prior_run;   /* run time of its ended attempts */
} djob_t;

typedef struct world {
    uint64_t seed, rng;
    int step;
    fg_config_t cfg;
    fg_sched_t *s[NSCHED];
    int nsched;     /* 3, or 4 once s[3] has been restored from s[0] */
    int restore_at; /* the step before whose pass s[3] is restored; -1: never */
    fg_time_t wake; /* next_wake of the last pass */
    fg_time_t now;
    int nnodes, nacct, nmem[MAXACCT];
    char node_name[MAXNODES][16];
    const char *node_type[MAXNODES];
    int32_t node_gpus[MAXNODES];
    char acct_name[MAXACCT][16];
    int32_t quota[MAXACCT];
    double acct_weight[MAXACCT], mem_weight[MAXACCT][MAXMEM];
    bool budget_out[MAXACCT];
    djob_t job[MAXJOBS + 1]; /* by id; ids 1 .. next_id - 1 */
    fg_job_id_t next_id;
    int max_jobs;
    text_t a, b; /* serializations to compare */
    text_t last; /* the decisions of the last pass that decided something */
    /* statistics over the whole run, to show the test is not vacuous */
    long starts, preempts, multi_node_starts, passes, restores;
} world_t;

static world_t *g_world; /* for failure messages */
/* Restore a fourth scheduler mid-sequence (FG_RANDOM_LIGHT=1 turns it off). Sometimes
 * pass again with no event before next_wake: it must decide nothing (on by default;
 * FG_RANDOM_NO_QUIET=1 turns it off). Known exception, outside the default seeds:
 * wfq's keys decay continuously with time, which next_wake does not predict, so in
 * rare sequences a later pass (before next_wake) starts a job the previous pass did not
 * (seeds 5306 and 1000069 of FG_RANDOM_SEQUENCES=20000). Fixed for this check: a second
 * set of victims for a job whose first set is still stopping; a victim started at the
 * same time by an earlier pass; no walk after a preemption; a las victim that passes
 * the waiting job's queue later while it runs (no wake-up for it); jobs started by
 * claims still in the plan of the first walk (seed 3991). */
static bool g_restore = true;
static bool g_quiet_passes;

static void failf(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    print_error("seed %llu, step %d, t=%lld: %s\n(replay with FG_RANDOM_SEED=%llu)\n",
                (unsigned long long)g_world->seed, g_world->step, (long long)g_world->now, msg,
                (unsigned long long)g_world->seed);
    fail();
}

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond))                                                                               \
            failf("check failed: " #cond "; " __VA_ARGS__);                                        \
    } while (0)

/* Makes the same call (an expression using S, and k_ for per-scheduler outputs) on every
 * scheduler; the answers must be equal; rc gets the answer. */
#define ALL(rc, expr_with_S)                                                                       \
    do {                                                                                           \
        int rc_[NSCHED] = {0};                                                                     \
        for (int k_ = 0; k_ < w->nsched; k_++) {                                                   \
            fg_sched_t *S = w->s[k_];                                                              \
            rc_[k_] = (expr_with_S);                                                               \
        }                                                                                          \
        for (int k_ = 1; k_ < w->nsched; k_++)                                                     \
            CHECK(rc_[k_] == rc_[0], "scheduler %d answered %d, scheduler 0 %d", k_, rc_[k_],      \
                  rc_[0]);                                                                         \
        (rc) = rc_[0];                                                                             \
    } while (0)

static fg_job_info_t info0(world_t *w, fg_job_id_t id)
{
    fg_job_info_t ji;
    int rc = fg_sched_job_info(w->s[0], id, &ji);
    CHECK(rc == FG_OK, "job %llu: %s", (unsigned long long)id, fg_strerror(rc));
    return ji;
}

/* ------------------------------------------------------------------ serializations */

static void text_decisions(text_t *t, const fg_decisions_t *d, bool stats)
{
    text_clear(t);
    for (size_t i = 0; i < d->nstarts; i++) {
        const fg_start_t *st = &d->starts[i];
        text_add(t, "start %llu a%d g%d:", (unsigned long long)st->job, st->attempt, st->gpus);
        for (int32_t k = 0; k < st->alloc_n; k++)
            text_add(t, " %d/%llx", d->allocs[st->alloc_off + k].node,
                     (unsigned long long)d->allocs[st->alloc_off + k].gpu_mask);
        text_add(t, "\n");
    }
    for (size_t i = 0; i < d->npreempts; i++)
        text_add(t, "preempt %llu a%d why %d for %llu\n", (unsigned long long)d->preempts[i].job,
                 d->preempts[i].attempt, (int)d->preempts[i].why,
                 (unsigned long long)d->preempts[i].for_job);
    text_add(t, "wake %lld\n", (long long)d->next_wake);
    if (stats)
        text_add(t, "scanned %lld pass %lld\n", (long long)d->scanned, (long long)d->pass_no);
}

/* Are two pass results the same decisions (and, with stats, the same statistics)? */
static bool decisions_equal(const fg_decisions_t *x, const fg_decisions_t *y, bool stats)
{
    if (x->nstarts != y->nstarts || x->npreempts != y->npreempts || x->next_wake != y->next_wake)
        return false;
    if (stats && (x->scanned != y->scanned || x->pass_no != y->pass_no))
        return false;
    for (size_t i = 0; i < x->nstarts; i++) {
        const fg_start_t *a = &x->starts[i], *b = &y->starts[i];
        if (a->job != b->job || a->attempt != b->attempt || a->gpus != b->gpus ||
            a->alloc_n != b->alloc_n)
            return false;
        for (int32_t k = 0; k < a->alloc_n; k++)
            if (x->allocs[a->alloc_off + k].node != y->allocs[b->alloc_off + k].node ||
                x->allocs[a->alloc_off + k].gpu_mask != y->allocs[b->alloc_off + k].gpu_mask)
                return false;
    }
    for (size_t i = 0; i < x->npreempts; i++) {
        const fg_preempt_t *a = &x->preempts[i], *b = &y->preempts[i];
        if (a->job != b->job || a->attempt != b->attempt || a->why != b->why ||
            a->for_job != b->for_job)
            return false;
    }
    return true;
}

/* A job as text; only the fields its state defines (start and placement when running;
 * eligibility, reason and estimate when pending). */
static void text_job(text_t *t, const fg_job_info_t *ji)
{
    text_add(t, "job %llu st%d acct%d mem%d g%d p%d sub%lld lim%lld att%d ret%d/%d svc%lld",
             (unsigned long long)ji->id, (int)ji->state, ji->account, ji->member, ji->gpus,
             (int)ji->prio, (long long)ji->submit_time, (long long)ji->time_limit_s, ji->attempt,
             ji->retries_used, ji->max_retries, (long long)ji->attained_gpu_s);
    if (ji->state == FG_JOB_RUNNING) {
        text_add(t, " start%lld pre%d:", (long long)ji->start_time, (int)ji->preempting);
        for (int32_t k = 0; k < ji->nallocs; k++)
            text_add(t, " %d/%llx", ji->allocs[k].node, (unsigned long long)ji->allocs[k].gpu_mask);
    } else {
        text_add(t, " elig%lld why%d est%lld", (long long)ji->eligible_time, (int)ji->reason,
                 (long long)ji->estimated_start);
    }
    text_add(t, "\n");
}

/* Everything observable about scheduler k, in a canonical order (by job id, node index,
 * account and member index). Calls fg_sched_*_usage, which every scheduler gets alike. */
static void text_state(world_t *w, int k, text_t *t)
{
    fg_sched_t *s = w->s[k];
    text_clear(t);
    text_add(t, "jobs %zu pending %zu up %d free %d\n", fg_sched_job_count(s),
             fg_sched_pending_count(s), fg_sched_gpus_up(s), fg_sched_gpus_free(s));
    for (fg_job_id_t id = 1; id < w->next_id; id++) {
        fg_job_info_t ji;
        int rc = fg_sched_job_info(s, id, &ji);
        if (rc == FG_OK)
            text_job(t, &ji);
        else
            text_add(t, "job %llu rc %d\n", (unsigned long long)id, rc);
    }
    for (int n = 0; n < w->nnodes; n++) {
        fg_node_info_t ni;
        assert_int_equal(fg_sched_node_info(s, n, &ni), FG_OK);
        text_add(t, "node %s %s st%d g%d free%d:", ni.name, ni.gpu_type, (int)ni.state, ni.gpus,
                 ni.free_gpus);
        for (int32_t g = 0; g < ni.gpus; g++)
            text_add(t, " %llu", (unsigned long long)ni.gpu_job[g]);
        text_add(t, "\n");
    }
    for (size_t a = 0; a < fg_sched_account_count(s); a++) {
        fg_account_info_t ai;
        assert_int_equal(fg_sched_account_info(s, (int)a, &ai), FG_OK);
        text_add(t, "acct %s run%d pend%d usage %.17g\n", ai.name, ai.running_gpus, ai.pending_jobs,
                 fg_sched_account_usage(s, (int)a, w->now));
    }
    for (size_t m = 0; m < fg_sched_member_count(s); m++) {
        fg_member_info_t mi;
        assert_int_equal(fg_sched_member_info(s, (int)m, &mi), FG_OK);
        text_add(t, "member %s/%d run%d pend%d usage %.17g\n", mi.user, mi.account, mi.running_gpus,
                 mi.pending_jobs, fg_sched_member_usage(s, (int)m, w->now));
    }
}

/* Prints the first line where two serializations differ (print_error truncates long
 * messages, so whole dumps would be cut). */
static void print_first_difference(const char *what_a, const char *a, const char *what_b,
                                   const char *b)
{
    size_t line = 1, i = 0;
    size_t start = 0;
    while (a[i] && a[i] == b[i]) {
        if (a[i] == '\n') {
            line++;
            start = i + 1;
        }
        i++;
    }
    const char *ea = strchr(a + start, '\n'), *eb = strchr(b + start, '\n');
    int la = ea ? (int)(ea - (a + start)) : (int)strlen(a + start);
    int lb = eb ? (int)(eb - (b + start)) : (int)strlen(b + start);
    print_error("first difference at line %zu:\n  %s: %.*s\n  %s: %.*s\n", line, what_a, la,
                a + start, what_b, lb, b + start);
}

static void compare_states(world_t *w)
{
    text_state(w, 0, &w->a);
    static const char *const label[NSCHED] = {"scheduler 0", "twin", "rebuilt", "restored"};
    for (int k = 1; k < w->nsched; k++) {
        text_state(w, k, &w->b);
        if (strcmp(w->a.p, w->b.p) != 0) {
            print_first_difference(label[0], w->a.p, label[k], w->b.p);
            failf("scheduler %d's state differs from scheduler 0's", k);
        }
    }
}

/* ------------------------------------------------------------------ setup */

/* Node counts of the bigger clusters (the large-cluster test widens them). */
static int g_big_lo = 30, g_big_hi = 64;

static void world_init(world_t *w, uint64_t seed, bool big)
{
    memset(w, 0, sizeof *w);
    g_world = w;
    w->seed = seed;
    w->rng = seed * 0x2545f4914f6cdd1dull + 1;
    uint64_t *r = &w->rng;

    fg_config_t *c = &w->cfg;
    fg_config_default(c);
    c->policy = (fg_policy_t)rnd(r, 0, FG_POLICY_COUNT - 1);
    const fg_time_t half_lives[3] = {0, 3600, 604800};
    c->half_life_s = half_lives[rnd(r, 0, 2)];
    c->backfill = chance(r, 80);
    const int32_t depths[4] = {0, 2, 16, 256};
    c->backfill_depth = depths[rnd(r, 0, 3)];
    c->reserve_depth = (int32_t)rnd(r, 1, 3);
    c->estimate_depth = (int32_t)rnd(r, 1, 40);
    c->preemption = chance(r, 75);
    c->quantum_s = rnd(r, 100, 3000);
    c->preempt_wait_s = rnd(r, 0, 600);
    c->min_run_s = rnd(r, 0, 1000);
    c->preempt_jobs_per_pass = (int32_t)rnd(r, 1, 3);
    c->retry_backoff_s = rnd(r, 1, 60);
    c->retry_backoff_max_s = c->retry_backoff_s * rnd(r, 1, 8);
    c->max_pending_per_user = chance(r, 20) ? (int32_t)rnd(r, 3, 20) : 0;
    c->shed_pending = chance(r, 20) ? (int32_t)rnd(r, 5, 40) : 0;
    const char *msg = NULL;
    CHECK(fg_config_check(c, &msg) == FG_OK, "config refused: %s", msg ? msg : "?");

    w->nsched = 3;
    for (int k = 0; k < w->nsched; k++) {
        w->s[k] = fg_sched_new(c);
        CHECK(w->s[k] != NULL, "fg_sched_new");
    }

    w->nnodes = big ? (int)rnd(r, g_big_lo, g_big_hi) : (int)rnd(r, 1, 10);
    for (int n = 0; n < w->nnodes; n++) {
        snprintf(w->node_name[n], sizeof w->node_name[n], "n%d", n);
        w->node_gpus[n] = chance(r, 20) ? 4 : 8;
        w->node_type[n] = chance(r, 30) ? "h100" : "a100";
        fg_node_state_t st = chance(r, 10) ? FG_NODE_DRAINING : FG_NODE_UP;
        int rc;
        ALL(rc, fg_sched_node_add(S, w->node_name[n], w->node_gpus[n], w->node_type[n], st));
        CHECK(rc == n, "node_add %d: %d", n, rc);
    }
    w->nacct = (int)rnd(r, 1, MAXACCT - 1);
    for (int a = 0; a < w->nacct; a++) {
        snprintf(w->acct_name[a], sizeof w->acct_name[a], "acct%d", a);
        const int32_t quotas[4] = {4, 8, 16, 24};
        w->quota[a] = chance(r, 30) ? quotas[rnd(r, 0, 3)] : -1;
        double weight = (double)rnd(r, 1, 4);
        w->acct_weight[a] = weight;
        int rc;
        ALL(rc, fg_sched_account_set(S, w->acct_name[a], weight, w->quota[a]));
        CHECK(rc >= 0, "account_set: %d", rc);
        w->nmem[a] = (int)rnd(r, 1, MAXMEM);
        for (int m = 0; m < w->nmem[a]; m++) {
            char user[16];
            snprintf(user, sizeof user, "u%d", m);
            double mweight = (double)rnd(r, 1, 3); /* once: ALL evaluates per scheduler */
            w->mem_weight[a][m] = mweight;
            ALL(rc, fg_sched_member_set(S, w->acct_name[a], user, mweight));
            CHECK(rc >= 0, "member_set: %d", rc);
        }
    }
    w->next_id = 1;
    w->max_jobs = big ? MAXJOBS : 200;
}

static void world_free(world_t *w)
{
    for (int k = 0; k < w->nsched; k++)
        fg_sched_free(w->s[k]);
    free(w->a.p);
    free(w->b.p);
    free(w->last.p);
}

/* ------------------------------------------------------------------ events */

static void ev_submit(world_t *w)
{
    uint64_t *r = &w->rng;
    if ((int)w->next_id > w->max_jobs)
        return;
    static const int32_t sizes[] = {1, 1, 1, 1, 2, 2, 4, 4, 8, 8, 16};
    int a = (int)rnd(r, 0, w->nacct - 1);
    char user[16];
    int member = (int)rnd(r, 0, w->nmem[a] - 1);
    snprintf(user, sizeof user, "u%d", member);
    fg_job_spec_t j = {.id = w->next_id,
                       .account = w->acct_name[a],
                       .user = user,
                       .gpus = sizes[rnd(r, 0, (int64_t)(sizeof sizes / sizeof *sizes) - 1)],
                       .gpu_type = NULL,
                       .time_limit_s = rnd(r, 20, 3000),
                       .prio = (fg_prio_t)(chance(r, 15)   ? FG_PRIO_HIGH
                                           : chance(r, 30) ? FG_PRIO_LOW
                                                           : FG_PRIO_NORMAL),
                       .max_retries = (int32_t)rnd(r, 0, 2),
                       .checkpoint_interval_s = chance(r, 30) ? rnd(r, 10, 500) : 0,
                       .submit_time = w->now};
    int64_t t = rnd(r, 0, 9);
    if (t == 0)
        j.gpu_type = "h100";
    else if (t == 1)
        j.gpu_type = "a100";
    int rc;
    ALL(rc, fg_sched_submit(S, &j, w->now));
    CHECK(rc == FG_OK || rc == FG_EQUEUE_FULL || rc == FG_ESHED || rc == FG_ENOFIT ||
              rc == FG_EQUOTA,
          "submit %llu: %s", (unsigned long long)j.id, fg_strerror(rc));
    if (rc == FG_ESHED)
        CHECK(j.prio == FG_PRIO_LOW && w->cfg.shed_pending > 0, "shed a non-low job");
    if (rc == FG_EQUEUE_FULL)
        CHECK(w->cfg.max_pending_per_user > 0, "pending cap without a cap");
    if (rc == FG_EQUOTA)
        CHECK(w->quota[a] >= 0 && j.gpus > w->quota[a], "EQUOTA for %d GPUs, quota %d", j.gpus,
              w->quota[a]);
    if (rc != FG_OK)
        return; /* the id is not used: the next submit takes it */
    djob_t *dj = &w->job[w->next_id++];
    memset(dj, 0, sizeof *dj);
    dj->live = true;
    dj->gpus = j.gpus;
    dj->type = j.gpu_type;
    dj->acct = a;
    dj->member = member;
    dj->prio = j.prio;
    dj->limit = j.time_limit_s;
    dj->checkpoint = j.checkpoint_interval_s;
    dj->max_retries = j.max_retries;
}

/* Reports the end of job id's running attempt with `cause` on every scheduler and checks
 * the record. */
static void end_attempt(world_t *w, fg_job_id_t id, fg_end_cause_t cause)
{
    djob_t *dj = &w->job[id];
    fg_job_info_t before = info0(w, id);
    CHECK(before.state == FG_JOB_RUNNING, "ending job %llu which is not running",
          (unsigned long long)id);
    fg_attempt_t rec[NSCHED];
    int rc;
    ALL(rc, fg_sched_attempt_ended(S, id, before.attempt, cause, w->now, &rec[k_]));
    CHECK(rc == FG_OK, "attempt_ended %llu: %s", (unsigned long long)id, fg_strerror(rc));
    for (int k = 1; k < w->nsched; k++)
        CHECK(rec[k].new_state == rec[0].new_state &&
                  rec[k].eligible_time == rec[0].eligible_time &&
                  rec[k].gpu_seconds == rec[0].gpu_seconds &&
                  rec[k].lost_gpu_seconds == rec[0].lost_gpu_seconds,
              "attempt records differ");
    const fg_attempt_t *a = &rec[0];
    CHECK(a->job == id && a->attempt == before.attempt && a->cause == cause, "record header");
    CHECK(a->start_time == before.start_time && a->end_time == w->now, "record times");
    /* a lost node's attempt is not charged (as billing refunds it) */
    const bool charged = cause != FG_END_NODE_LOST;
    CHECK(a->gpus == dj->gpus &&
              a->gpu_seconds == (charged ? (int64_t)dj->gpus * (w->now - before.start_time) : 0),
          "record GPU-seconds %lld", (long long)a->gpu_seconds);
    CHECK(a->lost_gpu_seconds >= 0 && a->lost_gpu_seconds <= a->gpu_seconds, "lost GPU-seconds");
    fg_job_state_t want;
    bool retry = before.retries_used < dj->max_retries;
    switch (cause) {
    case FG_END_COMPLETED:
        want = FG_JOB_COMPLETED;
        break;
    case FG_END_CANCELLED:
        want = FG_JOB_CANCELLED;
        break;
    case FG_END_TIMEOUT:
        want = FG_JOB_TIMEOUT;
        break;
    case FG_END_PREEMPTED:
        want = FG_JOB_PENDING;
        break;
    default: /* failed, node lost */
        want = retry ? FG_JOB_PENDING : FG_JOB_FAILED;
        break;
    }
    CHECK(a->new_state == want, "job %llu cause %s: new state %s, want %s", (unsigned long long)id,
          fg_end_cause_name(cause), fg_job_state_name(a->new_state), fg_job_state_name(want));
    if (cause == FG_END_PREEMPTED)
        CHECK(a->eligible_time <= w->now, "a preempted job waits no backoff");
    if ((cause == FG_END_FAILED || cause == FG_END_NODE_LOST) && retry) {
        fg_time_t b = w->cfg.retry_backoff_s;
        for (int i = 0; i < before.retries_used && b < w->cfg.retry_backoff_max_s; i++)
            b *= 2;
        if (b > w->cfg.retry_backoff_max_s)
            b = w->cfg.retry_backoff_max_s;
        CHECK(a->eligible_time == w->now + b, "retry %d: eligible %lld, want %lld",
              before.retries_used + 1, (long long)a->eligible_time, (long long)(w->now + b));
    }
    dj->prior_run += w->now - before.start_time;
    dj->running = dj->preempting = false;
    if (a->new_state != FG_JOB_PENDING)
        dj->live = false;
}

static void ev_ends(world_t *w)
{
    uint64_t *r = &w->rng;
    for (fg_job_id_t id = 1; id < w->next_id; id++) {
        djob_t *dj = &w->job[id];
        if (!dj->running)
            continue;
        if (dj->preempting && chance(r, 70)) {
            end_attempt(w, id, FG_END_PREEMPTED);
            continue;
        }
        if (dj->planned_end > w->now)
            continue;
        fg_end_cause_t cause;
        if (dj->planned_end == dj->start_time + dj->limit)
            cause = FG_END_TIMEOUT;
        else {
            int64_t c = rnd(r, 0, 9);
            cause = c < 6   ? FG_END_COMPLETED
                    : c < 8 ? FG_END_FAILED
                    : c < 9 ? FG_END_CANCELLED
                            : FG_END_NODE_LOST;
        }
        end_attempt(w, id, cause);
    }
}

static fg_job_id_t pick_live(world_t *w, fg_job_state_t state)
{
    fg_job_id_t ids[MAXJOBS];
    size_t n = 0;
    for (fg_job_id_t id = 1; id < w->next_id; id++)
        if (w->job[id].live && w->job[id].running == (state == FG_JOB_RUNNING))
            ids[n++] = id;
    return n ? ids[rnd(&w->rng, 0, (int64_t)n - 1)] : 0;
}

static void ev_cancel(world_t *w)
{
    fg_job_id_t id = pick_live(w, FG_JOB_PENDING);
    if (id) {
        int rc;
        ALL(rc, fg_sched_cancel(S, id, w->now));
        CHECK(rc == FG_OK, "cancel pending %llu: %s", (unsigned long long)id, fg_strerror(rc));
        w->job[id].live = false;
    }
    id = pick_live(w, FG_JOB_RUNNING);
    if (id) {
        int rc;
        ALL(rc, fg_sched_cancel(S, id, w->now));
        CHECK(rc == FG_ESTATE, "cancel running %llu: %d", (unsigned long long)id, rc);
    }
}

static void ev_stale(world_t *w)
{
    fg_job_id_t id = pick_live(w, FG_JOB_RUNNING);
    if (!id)
        return;
    fg_job_info_t ji = info0(w, id);
    int32_t bad = ji.attempt > 1 && chance(&w->rng, 50) ? ji.attempt - 1 : ji.attempt + 1;
    int rc;
    ALL(rc, fg_sched_attempt_ended(S, id, bad, FG_END_COMPLETED, w->now, NULL));
    CHECK(rc == FG_ESTALE, "report for attempt %d of %llu (running %d): %d", bad,
          (unsigned long long)id, ji.attempt, rc);
}

static void ev_node(world_t *w)
{
    uint64_t *r = &w->rng;
    int n = (int)rnd(r, 0, w->nnodes - 1);
    int64_t c = rnd(r, 0, 9);
    fg_node_state_t st = c < 5 ? FG_NODE_UP : c < 8 ? FG_NODE_DRAINING : FG_NODE_DOWN;
    int rc;
    ALL(rc, fg_sched_node_set_state(S, n, st, w->now));
    CHECK(rc == FG_OK, "node_set_state: %s", fg_strerror(rc));
    if (st != FG_NODE_DOWN)
        return;
    /* The node is gone: the caller reports each of its jobs as lost. */
    fg_node_info_t ni;
    assert_int_equal(fg_sched_node_info(w->s[0], n, &ni), FG_OK);
    for (int32_t g = 0; g < ni.gpus; g++) {
        fg_job_id_t id = ni.gpu_job[g];
        if (id && w->job[id].running) {
            bool seen = false;
            for (int32_t h = 0; h < g; h++)
                seen = seen || ni.gpu_job[h] == id;
            if (!seen)
                end_attempt(w, id, FG_END_NODE_LOST);
        }
    }
}

static void ev_budget(world_t *w)
{
    int a = (int)rnd(&w->rng, 0, w->nacct - 1);
    w->budget_out[a] = !w->budget_out[a];
    int idx = fg_sched_account_find(w->s[0], w->acct_name[a]);
    int rc;
    ALL(rc, fg_sched_account_set_budget_exhausted(S, idx, w->budget_out[a]));
    CHECK(rc == FG_OK, "set_budget_exhausted: %s", fg_strerror(rc));
}

static void ev_explain(world_t *w)
{
    fg_job_id_t id = pick_live(w, FG_JOB_PENDING);
    if (!id)
        return;
    char buf[NSCHED][FG_REASON_MAX];
    int rc;
    ALL(rc, fg_sched_explain(S, id, w->now, buf[k_], sizeof buf[k_]));
    CHECK(rc >= FG_REASON_NONE && rc < FG_REASON_COUNT, "explain %llu: %d", (unsigned long long)id,
          rc);
    for (int k = 1; k < w->nsched; k++)
        CHECK(strcmp(buf[0], buf[k]) == 0, "explanations differ: \"%s\" / \"%s\"", buf[0], buf[k]);
}

/* The controller restarts: s[3] is built from what s[0] exports (node table, accounts,
 * members, usage, budgets, and every live job through fg_sched_restore_running or
 * fg_sched_submit_restored + fg_sched_restore_pending + fg_sched_restore_claim, and the
 * round-robin turn), in job-id order rather than s[0]'s slot
 * order. Preemptions in flight are confirmed first: "preempting" is not exported. From
 * here on s[3] gets every event and must decide as s[0]. */
static void restore_twin(world_t *w)
{
    for (fg_job_id_t id = 1; id < w->next_id; id++)
        if (w->job[id].preempting)
            end_attempt(w, id, FG_END_PREEMPTED);
    fg_sched_t *r = fg_sched_new(&w->cfg);
    CHECK(r != NULL, "fg_sched_new");
    for (int n = 0; n < w->nnodes; n++) {
        fg_node_info_t ni;
        assert_int_equal(fg_sched_node_info(w->s[0], n, &ni), FG_OK);
        CHECK(fg_sched_node_add(r, ni.name, ni.gpus, ni.gpu_type, ni.state) == n, "node_add");
    }
    for (int a = 0; a < w->nacct; a++) {
        CHECK(fg_sched_account_set(r, w->acct_name[a], w->acct_weight[a], w->quota[a]) >= 0,
              "account_set");
        for (int m = 0; m < w->nmem[a]; m++) {
            char user[16];
            snprintf(user, sizeof user, "u%d", m);
            CHECK(fg_sched_member_set(r, w->acct_name[a], user, w->mem_weight[a][m]) >= 0,
                  "member_set");
        }
        int idx = fg_sched_account_find(r, w->acct_name[a]);
        CHECK(fg_sched_account_set_budget_exhausted(r, idx, w->budget_out[a]) == FG_OK, "budget");
    }
    /* usage as of now; read on every scheduler alike (reading advances the stored value) */
    for (size_t a = 0; a < fg_sched_account_count(w->s[0]); a++) {
        double u[NSCHED];
        for (int k = 0; k < w->nsched; k++)
            u[k] = fg_sched_account_usage(w->s[k], (int)a, w->now);
        CHECK(fg_sched_account_set_usage(r, (int)a, u[0], w->now) == FG_OK, "set_usage");
    }
    for (size_t m = 0; m < fg_sched_member_count(w->s[0]); m++) {
        double u[NSCHED];
        for (int k = 0; k < w->nsched; k++)
            u[k] = fg_sched_member_usage(w->s[k], (int)m, w->now);
        CHECK(fg_sched_member_set_usage(r, (int)m, u[0], w->now) == FG_OK, "set_usage");
    }
    for (fg_job_id_t id = 1; id < w->next_id; id++) {
        const djob_t *dj = &w->job[id];
        if (!dj->live)
            continue;
        fg_job_info_t ji = info0(w, id);
        char user[16];
        snprintf(user, sizeof user, "u%d", dj->member);
        fg_job_spec_t spec = {.id = id,
                              .account = w->acct_name[dj->acct],
                              .user = user,
                              .gpus = dj->gpus,
                              .gpu_type = dj->type,
                              .time_limit_s = dj->limit,
                              .prio = dj->prio,
                              .max_retries = dj->max_retries,
                              .checkpoint_interval_s = dj->checkpoint,
                              .submit_time = ji.submit_time};
        int rc;
        if (ji.state == FG_JOB_RUNNING) {
            rc = fg_sched_restore_running(r, &spec, ji.attempt, ji.retries_used, ji.attained_gpu_s,
                                          ji.start_time, ji.allocs, ji.nallocs, w->now);
            CHECK(rc == FG_OK, "restore_running %llu: %s", (unsigned long long)id, fg_strerror(rc));
        } else {
            rc = fg_sched_submit_restored(r, &spec, w->now);
            CHECK(rc == FG_OK, "restoring pending %llu: submit_restored: %s",
                  (unsigned long long)id, fg_strerror(rc));
            rc = fg_sched_restore_pending(r, id, ji.attempt, ji.retries_used, ji.attained_gpu_s,
                                          ji.eligible_time);
            CHECK(rc == FG_OK, "restore_pending %llu: %s", (unsigned long long)id, fg_strerror(rc));
            if (ji.claimed) {
                rc = fg_sched_restore_claim(r, id, ji.claim_victims);
                CHECK(rc == FG_OK, "restore_claim %llu: %s", (unsigned long long)id,
                      fg_strerror(rc));
            }
        }
    }
    CHECK(fg_sched_set_rr_turn(r, fg_sched_rr_turn(w->s[0])) == FG_OK, "set_rr_turn");
    w->s[3] = r;
    w->nsched = 4;
    w->restores++;
}

/* ------------------------------------------------------------------ the pass and its checks */

typedef struct snapshot { /* s[0] before the pass */
    fg_node_info_t node[MAXNODES];
    fg_job_info_t job[MAXJOBS + 1]; /* by id; state PENDING/RUNNING, or -1 if gone */
} snapshot_t;

static void take_snapshot(world_t *w, snapshot_t *sn)
{
    for (int n = 0; n < w->nnodes; n++)
        assert_int_equal(fg_sched_node_info(w->s[0], n, &sn->node[n]), FG_OK);
    for (fg_job_id_t id = 1; id < w->next_id; id++)
        if (!w->job[id].live || fg_sched_job_info(w->s[0], id, &sn->job[id]) != FG_OK)
            sn->job[id].state = (fg_job_state_t)-1;
}

static void check_start(world_t *w, const snapshot_t *sn, const fg_decisions_t *d,
                        const fg_start_t *st, uint64_t *taken)
{
    fg_job_id_t id = st->job;
    CHECK(id >= 1 && id < w->next_id, "start of unknown job %llu", (unsigned long long)id);
    const djob_t *dj = &w->job[id];
    const fg_job_info_t *pre = &sn->job[id];
    CHECK(pre->state == FG_JOB_PENDING, "job %llu started but was in state %d",
          (unsigned long long)id, (int)pre->state);
    CHECK(pre->eligible_time <= w->now, "job %llu started before its backoff ended (%lld)",
          (unsigned long long)id, (long long)pre->eligible_time);
    CHECK(st->attempt == pre->attempt + 1, "job %llu attempt %d after %d", (unsigned long long)id,
          st->attempt, pre->attempt);
    CHECK(st->gpus == dj->gpus, "job %llu started with %d GPUs, asked %d", (unsigned long long)id,
          st->gpus, dj->gpus);
    CHECK(!w->budget_out[dj->acct], "job %llu of an account out of budget started",
          (unsigned long long)id);
    int32_t want_allocs = dj->gpus <= FG_WHOLE_NODE_GPUS ? 1 : dj->gpus / FG_WHOLE_NODE_GPUS;
    CHECK(st->alloc_n == want_allocs, "job %llu (%d GPUs) on %d nodes", (unsigned long long)id,
          dj->gpus, st->alloc_n);
    CHECK(st->alloc_off >= 0 && (size_t)(st->alloc_off + st->alloc_n) <= d->nallocs, "alloc range");
    int32_t total = 0;
    for (int32_t k = 0; k < st->alloc_n; k++) {
        const fg_alloc_t *al = &d->allocs[st->alloc_off + k];
        CHECK(al->node >= 0 && al->node < w->nnodes, "job %llu on node %d", (unsigned long long)id,
              al->node);
        const fg_node_info_t *ni = &sn->node[al->node];
        CHECK(ni->state == FG_NODE_UP, "job %llu started on %s node %s", (unsigned long long)id,
              fg_node_state_name(ni->state), ni->name);
        CHECK(!dj->type || strcmp(dj->type, ni->gpu_type) == 0,
              "job %llu wants %s, started on %s (%s)", (unsigned long long)id, dj->type, ni->name,
              ni->gpu_type);
        CHECK(ni->gpus >= 64 || (al->gpu_mask >> ni->gpus) == 0,
              "job %llu: mask %llx beyond node %s's %d GPUs", (unsigned long long)id,
              (unsigned long long)al->gpu_mask, ni->name, ni->gpus);
        for (int32_t j = 0; j < k; j++)
            CHECK(d->allocs[st->alloc_off + j].node != al->node, "job %llu twice on node %d",
                  (unsigned long long)id, al->node);
        for (int32_t g = 0; g < ni->gpus; g++)
            if (al->gpu_mask >> g & 1) {
                CHECK(ni->gpu_job[g] == 0, "job %llu given GPU %d of %s held by job %llu",
                      (unsigned long long)id, g, ni->name, (unsigned long long)ni->gpu_job[g]);
                CHECK(!(taken[al->node] >> g & 1), "GPU %d of %s given twice in one pass", g,
                      ni->name);
            }
        taken[al->node] |= al->gpu_mask;
        total += __builtin_popcountll(al->gpu_mask);
        if (dj->gpus >= FG_WHOLE_NODE_GPUS) {
            /* 8k GPUs: whole 8-GPU nodes, GPUs 0..7, which were all free */
            CHECK(
                ni->gpus == FG_WHOLE_NODE_GPUS && al->gpu_mask == 0xff && ni->free_gpus == ni->gpus,
                "job %llu (%d GPUs) got mask %llx of %s (%d GPUs, %d free)", (unsigned long long)id,
                dj->gpus, (unsigned long long)al->gpu_mask, ni->name, ni->gpus, ni->free_gpus);
        }
    }
    CHECK(total == dj->gpus, "job %llu got %d GPUs, asked %d", (unsigned long long)id, total,
          dj->gpus);
    /* The job now runs there. */
    fg_job_info_t now = info0(w, id);
    CHECK(now.state == FG_JOB_RUNNING && now.attempt == st->attempt && now.start_time == w->now,
          "job %llu after its start: state %d attempt %d start %lld", (unsigned long long)id,
          (int)now.state, now.attempt, (long long)now.start_time);
    CHECK(now.nallocs == st->alloc_n, "job %llu: %d placements in its info, %d in the decision",
          (unsigned long long)id, now.nallocs, st->alloc_n);
    for (int32_t k = 0; k < now.nallocs; k++)
        CHECK(now.allocs[k].node == d->allocs[st->alloc_off + k].node &&
                  now.allocs[k].gpu_mask == d->allocs[st->alloc_off + k].gpu_mask,
              "job %llu: info and decision placements differ", (unsigned long long)id);
}

static void check_preempt(world_t *w, const snapshot_t *sn, const fg_preempt_t *p)
{
    const fg_config_t *c = &w->cfg;
    CHECK(c->preemption, "a preemption with preemption off");
    fg_job_id_t id = p->job;
    CHECK(id >= 1 && id < w->next_id, "preempt of unknown job");
    const fg_job_info_t *pre = &sn->job[id];
    CHECK(pre->state != FG_JOB_PENDING,
          "job %llu (%s) started and preempted (%s, for job %llu) in the same pass under %s",
          (unsigned long long)id, fg_prio_name(w->job[id].prio), fg_preempt_why_name(p->why),
          (unsigned long long)p->for_job, fg_policy_name(c->policy));
    CHECK(pre->state == FG_JOB_RUNNING && !pre->preempting,
          "job %llu preempted in state %d (preempting %d)", (unsigned long long)id, (int)pre->state,
          (int)pre->preempting);
    CHECK(p->attempt == pre->attempt, "preempt attempt %d, running %d", p->attempt, pre->attempt);
    CHECK(p->for_job >= 1 && p->for_job < w->next_id && sn->job[p->for_job].state == FG_JOB_PENDING,
          "job %llu preempted for job %llu which is not pending", (unsigned long long)id,
          (unsigned long long)p->for_job);
    const djob_t *victim = &w->job[id], *waiter = &w->job[p->for_job];
    fg_time_t ran = w->now - pre->start_time;
    switch (p->why) {
    case FG_PREEMPT_PRIORITY:
        CHECK(waiter->prio == FG_PRIO_HIGH, "class preemption for a %s job",
              fg_prio_name(waiter->prio));
        CHECK(victim->prio == FG_PRIO_LOW && waiter->prio == FG_PRIO_HIGH,
              "class preemption of a %s job for a %s job", fg_prio_name(victim->prio),
              fg_prio_name(waiter->prio));
        break;
    case FG_PREEMPT_FAIR_SHARE:
    case FG_PREEMPT_LAS:
        CHECK(c->policy == FG_POLICY_FAIR ||
                  (p->why == FG_PREEMPT_FAIR_SHARE
                       ? (c->policy == FG_POLICY_WFQ || c->policy == FG_POLICY_RR)
                       : c->policy == FG_POLICY_LAS),
              "preemption reason %s under %s", fg_preempt_why_name(p->why),
              fg_policy_name(c->policy));
        CHECK(victim->prio != FG_PRIO_HIGH, "a high job preempted for %s",
              fg_preempt_why_name(p->why));
        /* a victim has saved its work at least once in this attempt */
        CHECK(ran >= victim->checkpoint,
              "job %llu preempted (%s) after %lld s < its checkpoint interval %lld",
              (unsigned long long)id, fg_preempt_why_name(p->why), (long long)ran,
              (long long)victim->checkpoint);
        CHECK(ran >= c->min_run_s, "job %llu preempted (%s, %s) after %lld s < min_run %lld",
              (unsigned long long)id, fg_preempt_why_name(p->why), fg_policy_name(c->policy),
              (long long)ran, (long long)c->min_run_s);
        CHECK(victim->prior_run + ran >= c->quantum_s,
              "job %llu preempted (%s, %s) after %lld s in all < quantum %lld",
              (unsigned long long)id, fg_preempt_why_name(p->why), fg_policy_name(c->policy),
              (long long)(victim->prior_run + ran), (long long)c->quantum_s);
        break;
    default:
        failf("preemption reason %d", (int)p->why);
    }
    fg_job_info_t now = info0(w, id);
    CHECK(now.state == FG_JOB_RUNNING && now.preempting, "victim %llu: state %d preempting %d",
          (unsigned long long)id, (int)now.state, (int)now.preempting);
}

/* The whole-table invariants after a pass: allocations and the node table agree, no GPU
 * twice, quotas, counts. */
static void check_tables(world_t *w)
{
    fg_sched_t *s = w->s[0];
    static fg_job_id_t owner[MAXNODES][FG_MAX_NODE_GPUS];
    memset(owner, 0, sizeof owner[0] * (size_t)w->nnodes);
    int32_t acct_run[MAXACCT + 1], acct_pend[MAXACCT + 1];
    int32_t mem_run[MAXACCT][MAXMEM], mem_pend[MAXACCT][MAXMEM];
    memset(acct_run, 0, sizeof acct_run);
    memset(acct_pend, 0, sizeof acct_pend);
    memset(mem_run, 0, sizeof mem_run);
    memset(mem_pend, 0, sizeof mem_pend);
    size_t pending = 0, live = 0;
    for (fg_job_id_t id = 1; id < w->next_id; id++) {
        const djob_t *dj = &w->job[id];
        fg_job_info_t ji;
        int rc = fg_sched_job_info(s, id, &ji);
        CHECK((rc == FG_OK) == dj->live, "job %llu: live %d in the driver, info rc %d",
              (unsigned long long)id, (int)dj->live, rc);
        if (rc != FG_OK)
            continue;
        live++;
        CHECK(ji.gpus == dj->gpus && ji.prio == dj->prio, "job %llu changed its spec",
              (unsigned long long)id);
        CHECK((ji.state == FG_JOB_RUNNING) == dj->running && ji.preempting == dj->preempting &&
                  ji.attempt == dj->attempt,
              "job %llu: state %d preempting %d attempt %d; the driver expects running %d "
              "preempting %d attempt %d",
              (unsigned long long)id, (int)ji.state, (int)ji.preempting, ji.attempt,
              (int)dj->running, (int)dj->preempting, dj->attempt);
        if (ji.state == FG_JOB_PENDING) {
            pending++;
            acct_pend[dj->acct]++;
            mem_pend[dj->acct][dj->member]++;
            CHECK(ji.nallocs == 0 && !ji.preempting, "pending job %llu holds GPUs",
                  (unsigned long long)id);
            CHECK(ji.estimated_start >= w->now,
                  "pending job %llu estimated to start at %lld, in the past",
                  (unsigned long long)id, (long long)ji.estimated_start);
            continue;
        }
        CHECK(ji.state == FG_JOB_RUNNING, "job %llu in state %d", (unsigned long long)id,
              (int)ji.state);
        acct_run[dj->acct] += ji.gpus;
        mem_run[dj->acct][dj->member] += ji.gpus;
        int32_t total = 0;
        for (int32_t k = 0; k < ji.nallocs; k++) {
            const fg_alloc_t *al = &ji.allocs[k];
            CHECK(al->node >= 0 && al->node < w->nnodes, "bad node");
            for (int32_t g = 0; g < FG_MAX_NODE_GPUS; g++)
                if (al->gpu_mask >> g & 1) {
                    CHECK(g < w->node_gpus[al->node], "job %llu on GPU %d of a %d-GPU node",
                          (unsigned long long)id, g, w->node_gpus[al->node]);
                    CHECK(owner[al->node][g] == 0, "GPU %d of node %d held by jobs %llu and %llu",
                          g, al->node, (unsigned long long)owner[al->node][g],
                          (unsigned long long)id);
                    owner[al->node][g] = id;
                    total++;
                }
        }
        CHECK(total == ji.gpus, "running job %llu holds %d GPUs, asked %d", (unsigned long long)id,
              total, ji.gpus);
    }
    CHECK(fg_sched_job_count(s) == live, "job_count %zu, live %zu", fg_sched_job_count(s), live);
    CHECK(fg_sched_pending_count(s) == pending, "pending_count %zu, pending %zu",
          fg_sched_pending_count(s), pending);
    int32_t up = 0, free_up = 0;
    for (int n = 0; n < w->nnodes; n++) {
        fg_node_info_t ni;
        assert_int_equal(fg_sched_node_info(s, n, &ni), FG_OK);
        CHECK(ni.gpus == w->node_gpus[n], "node %d GPUs", n);
        int32_t nfree = 0;
        for (int32_t g = 0; g < ni.gpus; g++) {
            CHECK(ni.gpu_job[g] == owner[n][g],
                  "node %s GPU %d: the node table says job %llu, the jobs say %llu", ni.name, g,
                  (unsigned long long)ni.gpu_job[g], (unsigned long long)owner[n][g]);
            nfree += ni.gpu_job[g] == 0;
        }
        CHECK(ni.free_gpus == nfree, "node %s: free_gpus %d, counted %d", ni.name, ni.free_gpus,
              nfree);
        if (ni.state == FG_NODE_UP) {
            up += ni.gpus;
            free_up += nfree;
        }
    }
    CHECK(fg_sched_gpus_up(s) == up, "gpus_up %d, counted %d", fg_sched_gpus_up(s), up);
    CHECK(fg_sched_gpus_free(s) == free_up, "gpus_free %d, counted %d", fg_sched_gpus_free(s),
          free_up);
    for (int a = 0; a < w->nacct; a++) {
        fg_account_info_t ai;
        assert_int_equal(fg_sched_account_info(s, fg_sched_account_find(s, w->acct_name[a]), &ai),
                         FG_OK);
        CHECK(ai.running_gpus == acct_run[a] && ai.pending_jobs == acct_pend[a],
              "account %s: running_gpus %d, pending_jobs %d; counted %d, %d", w->acct_name[a],
              ai.running_gpus, ai.pending_jobs, acct_run[a], acct_pend[a]);
        for (int m = 0; m < w->nmem[a]; m++) {
            char user[16];
            snprintf(user, sizeof user, "u%d", m);
            fg_member_info_t mi;
            assert_int_equal(
                fg_sched_member_info(s, fg_sched_member_find(s, w->acct_name[a], user), &mi),
                FG_OK);
            CHECK(mi.running_gpus == mem_run[a][m] && mi.pending_jobs == mem_pend[a][m],
                  "member %s/%s: running_gpus %d, pending_jobs %d; counted %d, %d", w->acct_name[a],
                  user, mi.running_gpus, mi.pending_jobs, mem_run[a][m], mem_pend[a][m]);
        }
        CHECK(w->quota[a] < 0 || acct_run[a] <= w->quota[a], "account %s runs %d GPUs, quota %d",
              w->acct_name[a], acct_run[a], w->quota[a]);
    }
}

/* Runs a pass on every scheduler and checks it; returns the number of decisions (starts
 * and preemptions) and leaves the pass's next_wake in w->wake. */
static size_t do_pass(world_t *w)
{
    static snapshot_t sn;
    take_snapshot(w, &sn);
    fg_decisions_t d[NSCHED];
    for (int k = 0; k < w->nsched; k++) {
        fg_decisions_init(&d[k]);
        if (k == 2)
            fg_sched_rebuild(w->s[k]);
        int rc = fg_sched_pass(w->s[k], w->now, &d[k]);
        CHECK(rc == FG_OK, "pass on scheduler %d: %s", k, fg_strerror(rc));
    }
    w->passes++;

    /* Determinism (everything, statistics included) and incremental == rebuild. The
     * decisions are compared field by field; their text shows where they differ. */
    if (!decisions_equal(&d[0], &d[1], true)) {
        text_decisions(&w->a, &d[0], true);
        text_decisions(&w->b, &d[1], true);
        print_first_difference("scheduler 0", w->a.p, "twin", w->b.p);
        failf("two schedulers fed the same events decided differently");
    }
    if (!decisions_equal(&d[0], &d[2], false)) {
        text_decisions(&w->a, &d[0], false);
        text_decisions(&w->b, &d[2], false);
        print_first_difference("incremental", w->a.p, "after rebuild", w->b.p);
        failf("the rebuilt scheduler decided differently");
    }
    if (w->nsched > 3 && !decisions_equal(&d[0], &d[3], false)) {
        text_decisions(&w->a, &d[0], false);
        text_decisions(&w->b, &d[3], false);
        print_first_difference("original", w->a.p, "restored", w->b.p);
        failf("the scheduler restored at step %d decided differently", w->restore_at);
    }
    CHECK(d[0].next_wake >= w->now, "next_wake %lld before now", (long long)d[0].next_wake);
    uint64_t taken[MAXNODES];
    memset(taken, 0, sizeof taken);
    for (size_t i = 0; i < d[0].nstarts; i++) {
        check_start(w, &sn, &d[0], &d[0].starts[i], taken);
        djob_t *dj = &w->job[d[0].starts[i].job];
        dj->running = true;
        dj->attempt = d[0].starts[i].attempt;
        dj->start_time = w->now;
        /* mostly well within the limit; sometimes exactly at it (a timeout) */
        dj->planned_end = w->now + (chance(&w->rng, 15) ? dj->limit : rnd(&w->rng, 1, dj->limit));
        w->starts++;
        w->multi_node_starts += d[0].starts[i].alloc_n > 1;
    }
    for (size_t i = 0; i < d[0].npreempts; i++) {
        check_preempt(w, &sn, &d[0].preempts[i]);
        w->job[d[0].preempts[i].job].preempting = true;
        for (size_t j = 0; j < i; j++)
            CHECK(d[0].preempts[j].job != d[0].preempts[i].job, "job preempted twice in a pass");
        w->preempts++;
    }
    check_tables(w);
    size_t decided = d[0].nstarts + d[0].npreempts;
    if (decided)
        text_decisions(&w->last, &d[0], false); /* for failure messages */
    w->wake = d[0].next_wake;
    for (int k = 0; k < w->nsched; k++)
        fg_decisions_free(&d[k]);
    return decided;
}

/* ------------------------------------------------------------------ one sequence */

static void run_sequence(world_t *w, uint64_t seed, bool big)
{
    world_init(w, seed, big);
    uint64_t *r = &w->rng;
    int steps = big ? 400 : 60;
    w->restore_at = g_restore ? (int)rnd(r, 1, steps - 1) : -1;
    for (int i = 0; i < (big ? 40 : 6); i++)
        ev_submit(w);
    for (w->step = 0; w->step < steps; w->step++) {
        int nev = (int)rnd(r, 0, big ? 12 : 5);
        for (int e = 0; e < nev; e++) {
            int64_t c = rnd(r, 0, 99);
            if (c < 60)
                ev_submit(w);
            else if (c < 70)
                ev_cancel(w);
            else if (c < 76)
                ev_node(w);
            else if (c < 82)
                ev_stale(w);
            else if (c < 85)
                ev_budget(w);
            else
                ev_explain(w);
        }
        ev_ends(w);
        if (w->step == w->restore_at)
            restore_twin(w);
        do_pass(w);
        if (w->step % 10 == 9 || w->step == steps - 1)
            compare_states(w);
        /* the next time: a random step, but no later than the next planned end */
        fg_time_t next = w->now + rnd(r, 0, 300), first_end = FG_TIME_NEVER;
        for (fg_job_id_t id = 1; id < w->next_id; id++) {
            const djob_t *dj = &w->job[id];
            if (dj->running && dj->planned_end > w->now && dj->planned_end < first_end)
                first_end = dj->planned_end;
        }
        /* Sometimes a pass with no event, at the same time or later but before next_wake:
         * it must decide nothing (an event-driven caller would not even run it). */
        fg_time_t quiet_until = w->wake < first_end ? w->wake : first_end;
        if (g_quiet_passes && quiet_until > w->now && chance(r, 25)) {
            fg_time_t wake = w->wake;
            if (chance(r, 50))
                w->now =
                    rnd(r, w->now, quiet_until - 1 < w->now + 600 ? quiet_until - 1 : w->now + 600);
            size_t n = do_pass(w);
            CHECK(n == 0, "a pass with no event before next_wake %lld decided:\n%s",
                  (long long)wake, w->last.p);
        }
        w->now = next < first_end ? (next > w->now ? next : w->now) : first_end;
    }
    world_free(w);
}

/* Sequences by default: 2000 (a few seconds in a Debug build); a quarter of that under
 * AddressSanitizer, which makes every call several times slower. */
#if defined(__SANITIZE_ADDRESS__)
#define DEFAULT_SEQUENCES 500
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DEFAULT_SEQUENCES 500
#endif
#endif
#ifndef DEFAULT_SEQUENCES
#define DEFAULT_SEQUENCES 2000
#endif

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char *end;
    long x = strtol(v, &end, 10);
    return *end == '\0' && x > 0 ? x : dflt;
}

static world_t g_w; /* large: keep it off the stack */

static void run_many(long n, bool big, uint64_t seed0)
{
    const char *light = getenv("FG_RANDOM_LIGHT");
    g_restore = !(light && strcmp(light, "1") == 0);
    const char *noq = getenv("FG_RANDOM_NO_QUIET");
    g_quiet_passes = !(noq && strcmp(noq, "1") == 0);
    const char *one = getenv("FG_RANDOM_SEED");
    long starts = 0, preempts = 0, multi = 0, passes = 0, restores = 0;
    if (one && *one) {
        run_sequence(&g_w, strtoull(one, NULL, 10), big);
        return;
    }
    for (long i = 0; i < n; i++) {
        run_sequence(&g_w, seed0 + (uint64_t)i, big);
        starts += g_w.starts;
        preempts += g_w.preempts;
        multi += g_w.multi_node_starts;
        passes += g_w.passes;
        restores += g_w.restores;
    }
    print_message("%ld sequences (%ld with a restart), %ld passes: %ld starts (%ld on several "
                  "nodes), %ld preemptions\n",
                  n, restores, passes, starts, multi, preempts);
    /* Not vacuous: the sequences did start, spread and preempt jobs. */
    assert_true(starts > n);
    assert_true(multi > 0);
    assert_true(preempts > 0);
}

/* Thousands of short sequences on small clusters (1..10 nodes, up to 200 jobs). */
static void test_invariants_hold_over_random_sequences_on_small_clusters(void **state)
{
    (void)state;
    run_many(env_long("FG_RANDOM_SEQUENCES", DEFAULT_SEQUENCES), false, 1);
}

/* A few long sequences on bigger clusters (30..64 nodes, up to 2048 jobs). */
static void test_invariants_hold_over_long_random_sequences_on_bigger_clusters(void **state)
{
    (void)state;
    long n = env_long("FG_RANDOM_SEQUENCES", DEFAULT_SEQUENCES) / 100;
    run_many(n > 0 ? n : 1, true, 1000000);
}

/* A few long sequences on large clusters (65..192 nodes): a GPU type with more than 64
 * nodes has availability trees three levels deep (index.c), whose lazily recomputed
 * minima the smaller clusters never reach below the root. */
static void test_invariants_hold_over_long_random_sequences_on_large_clusters(void **state)
{
    (void)state;
    long n = env_long("FG_RANDOM_SEQUENCES", DEFAULT_SEQUENCES) / 250;
    g_big_lo = 65;
    g_big_hi = MAXNODES;
    run_many(n > 0 ? n : 1, true, 2000000);
    g_big_lo = 30;
    g_big_hi = 64;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invariants_hold_over_random_sequences_on_small_clusters),
        cmocka_unit_test(test_invariants_hold_over_long_random_sequences_on_bigger_clusters),
        cmocka_unit_test(test_invariants_hold_over_long_random_sequences_on_large_clusters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
