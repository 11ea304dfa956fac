/*
 * walk.c - one scheduling pass: walks of the pending jobs in plan order (EASY backfill).
 *
 * fg_sched_pass serves the preemptions' claims (preempt.c), then walks the pending jobs
 * in plan order (order.c) until a walk decides nothing new. A walk, job by job (walk):
 *   1. skips it if it waits out a retry backoff, its account is at quota or out of
 *      budget, or no up node could hold it (its reason says which);
 *   2. starts it now on the best-fit node (place.c), unless a job before it blocked and
 *      the policy has no backfill (fifo, --no-backfill: its reason is "priority");
 *   3. otherwise it is blocked: the first `reserve_depth` blocked jobs get a reservation
 *      (the GPUs that free up soonest; a later job may take a reserved GPU only if it
 *      ends by the reservation's start), the first `estimate_depth` jobs an estimate,
 *      the first `preempt_jobs_per_pass` blocked ones are preemption candidates;
 *   4. stops once nothing more can start or change (walk_stops): past the first K
 *      (estimate_depth) jobs and the candidates, with no GPU free, past the backfill
 *      window, or when every free GPU is reserved and no pending job is short enough.
 * A walk that started nothing then lets its candidates preempt (walk_preempt).
 *
 * EASY backfill, worked example: 2 nodes x 8 GPUs. n0 runs a 4-GPU job until t=100,
 * n1 is full until t=50. At t=0 an 8-GPU job J is first in plan order: it cannot
 * start; its reservation is n1 from t=50 (whole-node key 50 < 100). Then a 1-GPU job
 * with limit 200 may start on n0 (not reserved), and a 1-GPU job could start on n1
 * only if it were free and ended by t=50. J starts at t=50 at the latest.
 *
 * The speed shortcuts (shortcuts.h), each a named helper beside the loop, each one off
 * by name in the random tests: "tail-stop" (the rest of a walk that can only get
 * reasons and queued estimates is left to walk_tail, ondemand.c), "look-ahead" (the
 * order moves past the backfill window's jobs that cannot start, fg__order_peek) and
 * "walk-cut" (a walk that another follows ends when a start leaves no GPU free). The
 * first two need estimates on demand (ondemand.c), as does known_not_to_fit (a job a
 * failed placement of the walk proves cannot fit is not placed again).
 */
#include "plan.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ decisions */

void fg_decisions_init(fg_decisions_t *d)
{
    memset(d, 0, sizeof *d);
}

void fg_decisions_free(fg_decisions_t *d)
{
    free(d->starts);
    free(d->allocs);
    free(d->preempts);
    memset(d, 0, sizeof *d);
}

void fg__push_start(fg_decisions_t *d, const fg__job_t *j, const fg_alloc_t *al, int32_t n)
{
    d->starts = fg__grow(d->starts, &d->starts_cap, d->nstarts + 1, sizeof *d->starts);
    d->allocs = fg__grow(d->allocs, &d->allocs_cap, d->nallocs + (size_t)n, sizeof *d->allocs);
    fg_start_t *st = &d->starts[d->nstarts++];
    st->job = j->id;
    st->attempt = j->attempt;
    st->gpus = j->gpus;
    st->alloc_off = (int32_t)d->nallocs;
    st->alloc_n = n;
    memcpy(&d->allocs[d->nallocs], al, sizeof *al * (size_t)n);
    d->nallocs += (size_t)n;
}

void fg__push_preempt(fg_decisions_t *d, const fg__job_t *v, fg_preempt_why_t why,
                      fg_job_id_t for_job)
{
    d->preempts = fg__grow(d->preempts, &d->preempts_cap, d->npreempts + 1, sizeof *d->preempts);
    fg_preempt_t *p = &d->preempts[d->npreempts++];
    p->job = v->id;
    p->attempt = v->attempt;
    p->why = why;
    p->for_job = for_job;
}

/* For fg__order_peek, in a walk past its claims (see walk): could pending job `slot` start
 * now? Not when it waits for its account's budget or quota, could never run, or a failed
 * placement of the walk proves it cannot fit; any other job may (the safe answer). */
typedef struct peek_ctx {
    fg_time_t now;
    /* [g], g = 1..8: a job of g GPUs of any type fits now iff it ends by this */
    fg_time_t fit_end[FG_WHOLE_NODE_GPUS + 1];
    /* With one GPU type (whole_exact): a job of k whole nodes fits now iff k <= nwhole
     * and it ends by whole_end[k - 1] (the k-th latest end a whole free node allows) */
    bool whole_exact;
    int32_t nwhole;
    fg_time_t whole_end[FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS];
} peek_ctx_t;

/* The whole free nodes of the only GPU type as place_whole sees them: a node of f >= 8
 * GPUs with all f free (its bucket f) may take a job ending by the earliest reservation
 * on its GPUs (none: any end, untouched: none either). Kept sorted, latest first, up to
 * the most nodes a job may ask for. */
static void peek_fill_whole(fg_sched_t *s, peek_ctx_t *p)
{
    const int32_t cap = FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS;
    p->nwhole = 0;
    p->whole_exact = s->ntypes == 1 && !s->types[0].dirty;
    if (!p->whole_exact)
        return;
    const fg__type_t *t = &s->types[0];
    for (int f = FG_WHOLE_NODE_GPUS; f <= t->maxgpus; f++) {
        const uint64_t *bm = &t->bm[(size_t)f * (size_t)t->words];
        for (int32_t w = 0; w < t->words; w++)
            for (uint64_t bits = bm[w]; bits; bits &= bits - 1) {
                const int32_t n = t->nodes[w * 64 + __builtin_ctzll(bits)];
                const fg__node_t *nd = &s->nodes[n];
                if (nd->gpus != f)
                    continue;
                fg_time_t until = FG__INF;
                if (fg__is_touched(s, n))
                    for (int i = 0; i < nd->gpus; i++)
                        until = nd->res_from[i] < until ? nd->res_from[i] : until;
                if (p->nwhole == cap && until <= p->whole_end[cap - 1])
                    continue;
                int32_t q = p->nwhole < cap ? p->nwhole++ : cap - 1;
                while (q > 0 && p->whole_end[q - 1] < until) {
                    p->whole_end[q] = p->whole_end[q - 1];
                    q--;
                }
                p->whole_end[q] = until;
            }
    }
}

/* The walk's plan as place_single sees it: a job of g GPUs of any type ending at E fits iff
 * an untouched up node has g free GPUs, or a touched up node has g free GPUs not reserved
 * before E, i.e. E is at most the g-th latest reservation start among its free GPUs. */
static void peek_fill(fg_sched_t *s, peek_ctx_t *p)
{
    int32_t untouched = 0; /* most free GPUs on an untouched up node */
    for (size_t ti = 0; ti < s->ntypes; ti++) {
        const fg__type_t *t = &s->types[ti];
        if (t->dirty)
            continue;
        for (int f = t->maxgpus; f > untouched; f--) {
            const uint64_t *bm = &t->bm[(size_t)f * (size_t)t->words];
            bool found = false;
            for (int32_t w = 0; w < t->words && !found; w++)
                for (uint64_t bits = bm[w]; bits && !found; bits &= bits - 1)
                    found = !fg__is_touched(s, t->nodes[w * 64 + __builtin_ctzll(bits)]);
            if (found) {
                untouched = f;
                break;
            }
        }
    }
    peek_fill_whole(s, p);
    for (int g = 1; g <= FG_WHOLE_NODE_GPUS; g++)
        p->fit_end[g] = g <= untouched ? FG__INF : INT64_MIN;
    for (size_t k = 0; k < s->ntouched; k++) {
        const fg__node_t *nd = &s->nodes[s->touched_nodes[k]];
        if (nd->state != FG_NODE_UP || nd->nfree <= 0)
            continue;
        fg_time_t r[FG_MAX_NODE_GPUS];
        int n = 0;
        for (int i = 0; i < nd->gpus; i++)
            if (nd->gpu_job[i] < 0) { /* insertion, latest first */
                int q = n++;
                while (q > 0 && r[q - 1] < nd->res_from[i]) {
                    r[q] = r[q - 1];
                    q--;
                }
                r[q] = nd->res_from[i];
            }
        for (int g = 1; g <= FG_WHOLE_NODE_GPUS && g <= n; g++)
            if (r[g - 1] > p->fit_end[g])
                p->fit_end[g] = r[g - 1];
    }
}

static bool could_start(fg_sched_t *s, int32_t slot, void *ctx)
{
    const peek_ctx_t *p = ctx;
    const fg_time_t now = p->now;
    fg__job_t *j = &s->jobs[slot];
    const fg__account_t *a = &s->accounts[j->account];
    fg_reason_t why;
    if (j->state != FG_JOB_PENDING || j->eligible_time > now)
        return true;
    if (fg__budget_blocks(a, j) || (a->quota >= 0 && a->running + j->gpus > a->quota) ||
        !fg__feasible(s, j, &why))
        return false;
    const fg_time_t end = now + j->time_limit;
    if (j->type < 0 && j->gpus <= FG_WHOLE_NODE_GPUS) /* exact (place_single) */
        return end <= p->fit_end[j->gpus];
    if (j->gpus > FG_WHOLE_NODE_GPUS && p->whole_exact) { /* exact (place_whole) */
        const int32_t k = j->gpus / FG_WHOLE_NODE_GPUS;
        return k <= p->nwhole && end <= p->whole_end[k - 1];
    }
    return !(fg__fail_known(fg__fail_memo(s, (size_t)(j->type + 1)), j, end) ||
             (j->type >= 0 && fg__fail_known(fg__fail_memo(s, 0), j, end)));
}

/* ------------------------------------------------------------------ the walk */

/* One walk's state: its inputs, its counters and what it has learnt so far. */
typedef struct walk {
    fg_sched_t *s;
    const fg_config_t *c;
    fg_decisions_t *out;
    fg__order_t *o; /* the plan order (read-only queues until the walk ends) */
    fg_time_t now;
    fg_time_t wake;           /* the earliest end of a backoff seen */
    size_t starts_before;     /* out->nstarts when the walk began */
    bool no_backfill;         /* fifo or no backfill: nothing starts behind a blocked job */
    int64_t K;                /* estimate_depth */
    int64_t idx;              /* pending jobs the order gave so far */
    int64_t after_block;      /* jobs the order gave since the first blocked one */
    int32_t reserved;         /* reservations made (at most reserve_depth) */
    int32_t nblk;             /* preemption candidates seen (at most preempt_jobs_per_pass) */
    fg_job_id_t head_blocked; /* the first blocked job; 0: none yet */
    /* free GPUs: they change only with the walk's starts */
    int32_t free_now;
    /* pending_limit_at_most(window_max), kept while window_max stays short_for (which
     * time limits are pending does not change during the walk) */
    fg_time_t short_for;
    bool short_any;
    /* the shortcuts past the claims are possible (estimates on demand, backfill), the
     * look ahead too (and wfq with a backfill window) */
    bool can_skip, can_peek;
    /* past every claim that decisions depend on: the first blocked jobs' reservations and
     * preemption candidates (without backfill, the first blocked job's) */
    bool past_claims;
    /* past_claims with estimates on demand, no start in this walk and no pending job in
     * a backoff: what is left may be walked later (walk_tail) */
    bool tail_ok;
    int64_t peek_at; /* the next look ahead, at this idx: the K-th job on */
    /* The walk started a job and another walk follows (unless this one is the last the
     * pass may make), and the pass shows what that one leaves: what this walk leaves on
     * the jobs that cannot start (reasons, estimates) is moot. Only its starts and the
     * reservations they respect count. */
    bool moot;
    int defer;    /* may the reservations left be deferred: 1, not: -1, unknown: 0 */
    ent_calc_t e; /* the preemption candidates' entitlements, made once */
    fg_alloc_t al[FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS];
} walk_t;

static bool walk_started(const walk_t *w)
{
    return w->out->nstarts != w->starts_before;
}

/* Every preemption candidate is known (or preemption is off). */
static bool candidates_known(const walk_t *w)
{
    return !w->c->preemption || w->nblk >= w->c->preempt_jobs_per_pass;
}

/* Every free GPU is reserved and no pending job is short enough to end before the
 * reservations (window_max): nothing more can start in this walk. */
static bool nothing_fits_before_reservations(walk_t *w)
{
    fg_sched_t *s = w->s;
    if (w->free_now > s->reserved_free)
        return false;
    if (w->short_for != s->window_max) {
        w->short_for = s->window_max;
        w->short_any = fg__pending_limit_at_most(s, w->short_for);
    }
    return !w->short_any;
}

/* The walk stops here (tail-stop); walk_tail walks the rest (`left` jobs) when needed. */
static void tail_stop(walk_t *w, int64_t left, bool window, fg_job_id_t head)
{
    fg_sched_t *s = w->s;
    s->tail_on = true;
    s->tail_window = window;
    s->tail_head = head;
    s->tail_o = w->o;
    s->tail_left = left;
    s->tail_now = w->now;
    s->walks_cut++;
}

/* Shortcut tail-stop, with a blocked job and no GPU free (no start, no pending job in a
 * backoff: nothing can start and no job can move next_wake): once the preemption
 * candidates are known and none of them may search for victims (the only reader of the
 * other reservations), the reservations still to be made decide nothing. With no GPU
 * free a reservation holds no free GPU, so it changes no other job's reason, placement
 * or estimate: such a job gets what walk_tail gives the rest of the first K jobs (reason
 * resources, a queued estimate: the start its reservation would have had). (Only past a
 * blocked job: with none yet, the walk looks past the first K jobs for one.) */
static bool reservations_decide_nothing(walk_t *w)
{
    fg_sched_t *s = w->s;
    if (!fg__sc(s, FG__SC_TAIL_STOP) || !w->can_skip || w->past_claims || !w->head_blocked ||
        w->free_now != 0 || w->idx >= w->K || w->reserved >= w->c->reserve_depth ||
        walk_started(w) || s->max_eligible > w->now || !candidates_known(w))
        return false;
    if (!w->defer) {
        w->defer = 1;
        for (size_t b = 0; b < s->nblocked && w->defer > 0; b++)
            if (fg__preempt_may_search(s, &s->jobs[s->blocked[b]], w->now, &w->e))
                w->defer = -1;
    }
    return w->defer > 0;
}

/* Shortcut tail-stop, past the claims: with no GPU free (or without backfill, behind the
 * first blocked job) the rest up to the K-th job only gets reasons and queued
 * estimates, left to walk_tail. */
static bool rest_needs_only_reasons(const walk_t *w)
{
    return fg__sc(w->s, FG__SC_TAIL_STOP) && w->tail_ok && w->idx < w->K &&
           (w->no_backfill || w->free_now == 0);
}

/* A job that cannot start, past the walk's claims: its blocked reason (none without
 * reasons: it reads as not reached). */
static void reason_blocked(fg_sched_t *s, fg__job_t *j)
{
    if (s->no_reasons)
        j->why.code = FG__REASON_LAZY;
    else
        fg__blocked_reason_memo(s, j);
}

/* What the walk leaves on a job fg__order_peek moved past (it cannot start; pending,
 * eligible): as the walk would, its reason. (No estimate: it lies past the first K.) */
static void peeked(fg_sched_t *s, int32_t slot)
{
    fg__job_t *j = &s->jobs[slot];
    fg__reason_clear(s, j);
    if (s->no_reasons || !fg__reason_account_or_fit(s, j, &s->accounts[j->account]))
        reason_blocked(s, j);
}

/* Shortcut look-ahead: past the first K jobs under wfq with GPUs free, the order moves
 * past the jobs of the backfill window that cannot start (fg__order_peek), up to the
 * first that might, and the walk looks again past that one. When none of the window
 * can start, its rest is left to walk_tail (tail-stop), or ends a moot walk. Not when
 * the walk stops at its next job anyway. True when the walk ends here. */
static bool look_ahead(walk_t *w)
{
    fg_sched_t *s = w->s;
    const int64_t wleft = w->c->backfill_depth - w->after_block;
    const bool leave_tail = w->tail_ok && fg__sc(s, FG__SC_TAIL_STOP);
    int64_t r = -1;
    if (!nothing_fits_before_reservations(w)) {
        peek_ctx_t pc = {.now = w->now};
        peek_fill(s, &pc);
        /* No pending job at all can fit in the plan (its size's fit_end): none of the
         * window either, without looking at it. */
        const fg_time_t whole_end = !pc.whole_exact ? pc.fit_end[FG_WHOLE_NODE_GPUS]
                                    : pc.nwhole     ? pc.whole_end[0]
                                                    : INT64_MIN;
        if (leave_tail && fg__pending_none_fits(s, pc.fit_end, whole_end, w->now)) {
            tail_stop(w, wleft, true, 0);
            return true;
        }
        if ((size_t)wleft > s->peek_cap)
            s->peek_buf = fg__grow(s->peek_buf, &s->peek_cap, (size_t)wleft, sizeof *s->peek_buf);
        r = fg__order_peek(s, w->o, wleft, pc.fit_end, pc.whole_end,
                           pc.whole_exact ? pc.nwhole : -1, w->now, could_start, &pc, s->peek_buf,
                           !leave_tail && !w->moot);
        if (r == wleft && (leave_tail || w->moot)) {
            if (leave_tail)
                tail_stop(w, wleft, true, 0);
            else
                s->walks_cut++; /* (moot: the rest of the window can only get reasons) */
            return true;
        }
    }
    if (r > 0) { /* the order moved past r jobs that cannot start */
        for (int64_t k = 0; k < r && !w->moot; k++)
            peeked(s, s->peek_buf[k]);
        w->idx += r;
        w->after_block += r;
        w->out->scanned += r;
    }
    w->peek_at = r >= 0 ? w->idx + 1 : INT64_MAX; /* again past the one that may */
    return false;
}

/* The shortcuts the walk may take before its next job. True when the walk ends here. */
static bool walk_shortcuts(walk_t *w)
{
    if (reservations_decide_nothing(w)) {
        tail_stop(w, w->K - w->idx, false, 0);
        return true;
    }
    if (!w->past_claims || !w->s->est_on_demand)
        return false;
    if (rest_needs_only_reasons(w)) {
        tail_stop(w, w->K - w->idx, false, w->no_backfill ? w->head_blocked : 0);
        return true;
    }
    if (w->idx >= w->peek_at && w->free_now > 0 && w->after_block < w->c->backfill_depth)
        return look_ahead(w);
    return false;
}

/* The stop rules, at the walk's idx-th job (docs/scheduler.md): past the first K jobs and
 * the preemption candidates, the walk goes on only while something may still start
 * (backfill, a free GPU, within the backfill window, a job short enough to end before
 * the reservations); with no job blocked yet, it looks for the first one (it gets the
 * reservation) up to K + backfill_depth jobs when no GPU is free. */
static bool walk_stops(walk_t *w)
{
    const fg_config_t *c = w->c;
    if (!w->head_blocked)
        return w->idx > w->K && w->free_now == 0 && c->backfill_depth > 0 &&
               w->idx > w->K + c->backfill_depth;
    w->after_block++;
    if (w->idx <= w->K || !candidates_known(w))
        return false;
    if (w->no_backfill || w->free_now == 0 ||
        (c->backfill_depth > 0 && w->after_block > c->backfill_depth))
        return true;
    return w->reserved >= c->reserve_depth && nothing_fits_before_reservations(w);
}

/* With estimates on demand, past the claims: a job known not to fit gets its reason (and,
 * among the first K, a queued estimate) without a placement: with no free GPU the reason
 * is known (blocked_reason: resources, none free, made even without reasons); with some,
 * a failed placement of the walk proves it cannot fit (fg__fail_known). True when the
 * job is done with. (Not a shortcut by name: without it, a walk without reasons would
 * leave no reason on a job with no GPU free. It does not change the wfq replay's
 * instructions, 3,526 M, and saves 1.6 % of the priority one's.) */
static bool known_not_to_fit(walk_t *w, int32_t slot)
{
    fg_sched_t *s = w->s;
    fg__job_t *j = &s->jobs[slot];
    const fg__account_t *a = &s->accounts[j->account];
    fg_reason_t why;
    if (!w->can_skip || !w->past_claims || j->eligible_time > w->now || fg__budget_blocks(a, j) ||
        (a->quota >= 0 && a->running + j->gpus > a->quota) || !fg__feasible(s, j, &why))
        return false;
    if (w->free_now > 0) {
        const fg_time_t end = w->now + j->time_limit;
        if (!fg__fail_known(fg__fail_memo(s, (size_t)(j->type + 1)), j, end) &&
            !(j->type >= 0 && fg__fail_known(fg__fail_memo(s, 0), j, end)))
            return false;
    }
    w->out->scanned++;
    fg__reason_clear(s, j);
    if (w->free_now == 0)
        fg__why_room(j, FG_REASON_RESOURCES, 0);
    else if (w->moot)
        j->why.code = FG__REASON_LAZY; /* (never shown) */
    else
        reason_blocked(s, j);
    if (w->idx <= w->K && !w->moot)
        fg__estimate(s, j, w->now);
    return true;
}

/* A job in a retry backoff: its reason, and the wake-up at its end. */
static bool waits_backoff(walk_t *w, fg__job_t *j)
{
    if (j->eligible_time <= w->now)
        return false;
    j->why.code = FG_REASON_RETRY_BACKOFF;
    j->est = j->eligible_time;
    if (j->eligible_time < w->wake)
        w->wake = j->eligible_time;
    return true;
}

/* Without backfill, a job behind the first blocked one waits for it. */
static void behind_head(walk_t *w, fg__job_t *j)
{
    fg__why_priority(j, w->head_blocked);
    if (w->idx <= w->K)
        j->est = fg__estimate(w->s, j, w->now);
}

/* The invariants of a start (docs/scheduler.md): its GPUs are free (no GPU is given
 * twice), it fits its account's quota, and a backfilled job ends by the reservations on
 * the GPUs it takes (a reservation is never delayed). */
static void assert_start_ok(const walk_t *w, const fg__job_t *j, int32_t n)
{
    const fg_sched_t *s = w->s;
    const fg__account_t *a = &s->accounts[j->account];
    assert(a->quota < 0 || a->running + j->gpus <= a->quota);
    for (int32_t k = 0; k < n; k++) {
        const fg__node_t *nd = &s->nodes[w->al[k].node];
        for (int i = 0; i < nd->gpus; i++) {
            if (!(w->al[k].gpu_mask >> i & 1))
                continue;
            assert(nd->gpu_job[i] < 0);
            assert(!fg__is_touched(s, w->al[k].node) || nd->res_from[i] >= w->now + j->time_limit);
        }
    }
    (void)a;
}

/* Job `slot` starts on w->al. What the walk left on the jobs before it is made on the
 * plan before the start (queued estimates: fg__defer_start), or is moot.
 * True when the walk ends here (walk-cut). */
static bool walk_start(walk_t *w, int32_t slot)
{
    fg_sched_t *s = w->s;
    fg__job_t *j = &s->jobs[slot];
    const int32_t n = j->gpus <= FG_WHOLE_NODE_GPUS ? 1 : j->gpus / FG_WHOLE_NODE_GPUS;
    assert_start_ok(w, j, n);
    for (int32_t k = 0; k < n; k++) { /* backfilled onto reserved GPUs? */
        const fg__node_t *nd = &s->nodes[w->al[k].node];
        if (!fg__is_touched(s, w->al[k].node))
            continue;
        for (int i = 0; i < nd->gpus; i++)
            if (w->al[k].gpu_mask >> i & 1 && nd->res_from[i] != FG__INF)
                s->reserved_free--;
    }
    assert(s->reserved_free >= 0);
    if (!w->moot && !s->walk_last) { /* what the walk left so far is moot too */
        w->moot = true;
        s->dhead = s->ndeferred = s->ndsnap = 0;
    }
    if (!w->moot && s->dhead < s->ndeferred)
        fg__defer_start(s, slot, w->al, n);
    fg__job_start(s, slot, w->al, n, w->now);
    fg__push_start(w->out, j, w->al, n);
    w->free_now = fg_sched_gpus_free(s);
    w->tail_ok = false;
    /* Shortcut walk-cut: with no GPU free nothing else in this walk can start (a placement
     * takes free GPUs, and only a walk that started nothing preempts), and the rest of a
     * walk that another follows is moot: it ends here. */
    if (w->moot && w->free_now == 0 && fg__sc(s, FG__SC_WALK_CUT)) {
        s->walks_cut++;
        return true;
    }
    return false;
}

/* May blocked job j take one of the pass's preemption turns? A high job stops only low
 * jobs (class preemption): without a low job running anywhere it would spend the turn
 * on nothing, and a job behind it that could preempt would not. */
static bool may_take_turn(const fg_sched_t *s, const fg__job_t *j)
{
    if (j->prio != FG_PRIO_HIGH)
        return true;
    for (size_t a = 0; a < s->naccounts; a++)
        if (s->accounts[a].run_head[FG_PRIO_LOW] >= 0)
            return true;
    return false;
}

/* Job `slot` cannot start now: its reason; the first reserve_depth blocked jobs reserve
 * the GPUs that free up soonest, the first estimate_depth get an estimate, the first
 * preempt_jobs_per_pass are preemption candidates. */
static void walk_blocked(walk_t *w, int32_t slot)
{
    fg_sched_t *s = w->s;
    const fg_config_t *c = w->c;
    fg__job_t *j = &s->jobs[slot];
    const bool protect = w->reserved < c->reserve_depth;
    /* Preemption serves the first preempt_jobs_per_pass blocked jobs in plan order that
     * may take a turn; until they are found every blocked job claims its estimate as they
     * do (so what is preempted never depends on estimate_depth, and the claims decisions
     * depend on come before the estimate-only ones). */
    const bool in_turns = c->preemption && w->nblk < c->preempt_jobs_per_pass;
    const bool candidate = in_turns && may_take_turn(s, j);
    w->nblk += candidate;
    /* (a candidate's reason decides whether it may preempt: always made) */
    if ((s->no_reasons || w->moot) && !candidate)
        j->why.code = FG__REASON_LAZY;
    else
        fg__blocked_reason_memo(s, j);
    if (!w->head_blocked)
        w->head_blocked = j->id;
    if (protect || in_turns)
        j->est = fg__plan_claim(s, j, w->now, protect);
    else if (w->idx <= w->K && !w->moot)
        j->est = fg__estimate(s, j, w->now);
    w->reserved += protect;
    if (candidate && j->why.code != FG_REASON_RESERVATION && j->est != FG_TIME_NEVER &&
        j->est > w->now) {
        /* (its numbers name the job preempted for it: fg__try_preempt) */
        assert(j->why.code == FG_REASON_RESOURCES || j->why.code == FG_REASON_FRAGMENTATION);
        s->blocked = fg__grow(s->blocked, &s->blocked_cap, s->nblocked + 1, sizeof *s->blocked);
        s->blocked[s->nblocked++] = slot;
    }
    w->past_claims = (w->no_backfill || w->reserved >= c->reserve_depth) && candidates_known(w);
    w->tail_ok =
        s->est_on_demand && w->past_claims && !walk_started(w) && s->max_eligible <= w->now;
}

/* Starts the walk: its state, the plan's, the order. */
static void walk_begin(walk_t *w, fg_sched_t *s, fg_time_t now, fg_decisions_t *out, fg_time_t wake)
{
    memset(w, 0, sizeof *w);
    w->s = s;
    w->c = &s->cfg;
    w->out = out;
    w->o = &s->it;
    w->now = now;
    w->wake = wake;
    w->starts_before = out->nstarts;
    w->no_backfill = w->c->policy == FG_POLICY_FIFO || !w->c->backfill;
    w->K = w->c->estimate_depth;
    w->free_now = fg_sched_gpus_free(s);
    w->short_for = -1;
    w->can_skip = s->est_on_demand && !w->no_backfill;
    w->can_peek =
        w->can_skip && fg__keyed(s) && w->c->backfill_depth > 0 && fg__sc(s, FG__SC_LOOK_AHEAD);
    w->peek_at = w->can_peek ? w->K : INT64_MAX;
    s->walk_no++;
    s->ntouched = 0;
    s->touched_free_max = 0;
    s->dhead = s->ndeferred = s->ndsnap = 0;
    s->tail_on = false;
    s->nblocked = 0;
    s->reserved_free = 0;
    s->window_max = 0;
    fg__order_prepare(s, w->o, now);
}

/* Preemption, in the walk that started nothing (the last one), while its reservations
 * are still in view: GPUs held for a job ahead are not room. (Before its first victim,
 * fg__try_preempt settles what the walk left to be made when asked for.) */
static void walk_preempt(walk_t *w)
{
    fg_sched_t *s = w->s;
    const fg_config_t *c = w->c;
    if (walk_started(w) || !c->preemption || !s->nblocked)
        return;
    int32_t served = 0;
    for (size_t b = 0; b < s->nblocked && served < c->preempt_jobs_per_pass; b++) {
        const size_t before = w->out->npreempts;
        fg__try_preempt(s, &s->jobs[s->blocked[b]], w->now, &w->e, w->out, &w->wake);
        served += w->out->npreempts > before;
    }
}

/* One walk over the pending jobs in plan order (see the banner). Appends starts to *out,
 * records blocked preemption candidates in s->blocked, lowers *wakep. */
static void walk(fg_sched_t *s, fg_time_t now, fg_decisions_t *out, fg_time_t *wakep)
{
    walk_t w;
    walk_begin(&w, s, now, out, *wakep);
    int32_t slot;
    while (!walk_shortcuts(&w) && (slot = fg__order_next(s, w.o)) >= 0) {
        w.idx++;
        if (walk_stops(&w))
            break;
        fg__job_t *j = &s->jobs[slot];
        if (j->state != FG_JOB_PENDING) { /* started earlier in this pass */
            w.idx--;
            continue;
        }
        if (known_not_to_fit(&w, slot))
            continue;
        out->scanned++;
        fg__reason_clear(s, j);
        if (waits_backoff(&w, j) || fg__reason_account_or_fit(s, j, &s->accounts[j->account]))
            continue;
        if (w.no_backfill && w.head_blocked)
            behind_head(&w, j);
        else if (!fg__place_now(s, j, now, w.al))
            walk_blocked(&w, slot);
        else if (walk_start(&w, slot))
            break;
    }
    walk_preempt(&w);
    *wakep = w.wake;
    if (s->dhead < s->ndeferred || s->tail_on)
        s->plan_alive = true; /* kept for fg__plan_ask (or fg__plan_close drops it) */
    else
        fg__plan_restore(s);
}

/* Takes the jobs started by out->starts[from..] out of their pending queues (each one
 * once: the counts stay in step with the starts). */
static void leave_queues(fg_sched_t *s, const fg_decisions_t *out, size_t from)
{
    const size_t pending = s->npending;
    for (size_t k = from; k < out->nstarts; k++) {
        const int32_t slot = (int32_t)(fg__job_by_id(s, out->starts[k].job) - s->jobs);
        assert(s->jobs[slot].state == FG_JOB_RUNNING);
        fg__pending_del(s, slot);
    }
    assert(s->npending + (out->nstarts - from) == pending);
    (void)pending;
}

int fg_sched_pass(fg_sched_t *s, fg_time_t now, fg_decisions_t *out)
{
    if (!s || !out)
        return FG_EINVAL;
    fg__plan_close(s);
    if (now < s->last_now)
        now = s->last_now; /* time never runs backwards inside the core */
    s->last_now = now;
    out->nstarts = out->nallocs = out->npreempts = 0;
    out->scanned = 0;
    s->wout = out;
    out->next_wake = FG_TIME_NEVER;
    s->pass_no++;
    out->pass_no = s->pass_no;
    for (size_t t = 0; t < s->ntypes; t++)
        if (s->types[t].dirty)
            fg__type_rebuild(s, (int32_t)t);
    fg_time_t wake = FG_TIME_NEVER;

    fg__serve_claims(s, now, out);
    /* Jobs the claims started leave their queues before the first walk: in the plan
     * they would still take their member's turn or count twice in its key. */
    leave_queues(s, out, 0);
    /* Walk again while a walk started or preempted something: starts change the keys,
     * the free GPUs and the blocked jobs the plan saw, and a preemption makes the
     * victims' GPUs free for their job, so GPUs it held may go to others. So a second
     * pass at the same time, with no event in between, decides nothing new. At most
     * FG__MAX_WALKS walks; if the last one still decided something, next_wake = now asks
     * the caller to pass again. (A full cluster makes the next walk short.) */
    bool settled = false;
    const int max_walks = s->max_walks ? s->max_walks : FG__MAX_WALKS;
    for (int w = 0; w < max_walks && !settled; w++) {
        size_t before = out->nstarts, pbefore = out->npreempts;
        wake = FG_TIME_NEVER;
        s->walk_last = w + 1 == max_walks;
        walk(s, now, out, &wake);
        leave_queues(s, out, before); /* now that the walk over them is over */
        settled = out->nstarts == before && out->npreempts == pbefore;
        /* Before another walk of the same pass: the pass shows what its last walk
         * leaves (a job's reason and estimate count only when that walk wrote them:
         * reason_walk), so what this walk left to be made when asked for (its tail,
         * queued estimates) is moot: dropped, and the plan restored. */
        if (!settled) {
            if (w + 1 < max_walks)
                fg__plan_close(s);
            else
                fg__plan_settle(s); /* no walk follows: these estimates stay */
        }
    }
    if (!settled)
        wake = now;
    s->wout = NULL;

    out->next_wake = wake;
    return FG_OK;
}
