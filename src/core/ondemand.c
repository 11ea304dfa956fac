/*
 * ondemand.c - estimates on demand: what a walk leaves on the jobs that cannot start is
 * made only when someone asks for it (fg_sched_set_estimates_on_demand).
 *
 * The simulator replays months of a trace in seconds: it passes after every event but
 * reads few estimates. So in this mode a walk, once it has made every claim decisions
 * depend on (the first blocked jobs' reservations, the preemption candidates' claims),
 * leaves two things to be made later, on the plan it leaves (plan_alive), which stays
 * in the trees until the next event or pass (fg__plan_close):
 *   - queued estimates: an estimate-only claim (not protected, not a candidate's)
 *     reserves nothing, so it changes nothing but later estimate-only claims; the walk
 *     queues them (fg__estimate) and they are made later in the same order;
 *   - its tail (walk_tail): the rest of a walk that stopped early (walk.c: tail-stop).
 * fg__plan_ask makes what one job needs when its info or explanation is asked for;
 * fg__plan_settle makes all of it before a preemption changes the plan (or drops it,
 * when another walk follows) or when the pass ends with a walk that started jobs; what
 * nobody asked for before the next event or pass stays unknown (no estimate; the reason
 * reads as not reached).
 *
 * Worked example: estimate_depth 40, a full cluster, 500 pending jobs. The walk makes
 * the reservations of the first reserve_depth blocked jobs and its candidates' claims;
 * no GPU is free, so the rest of the first 40 jobs can only get the reason "resources"
 * and an estimate. The walk stops there, leaving the order where it is (tail-stop).
 * When the simulator then asks for job 17's estimate, walk_tail walks the rest as the
 * walk would have (a reason and a queued estimate for each of the 40), and the queued
 * estimates up to job 17's are made, in plan order, on the plan the walk left.
 *
 * It is worth its code: the Philly replay under wfq (74,167 jobs) takes about 1.0 s of
 * CPU without it, 0.4 s with it (under 100,000 jobs/s against about 200,000).
 */
#include "plan.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ queued estimates */

/* Job `slot` starts on al[0..n) while estimates are queued: its mark in the queue and
 * the nodes as they were, so that the estimates are made only if someone needs them (a
 * walk that started something is followed by another walk of the same pass, which
 * makes them moot; only the last walk a pass may make keeps them). deferred_replay
 * takes the start back to make them. */
void fg__defer_start(fg_sched_t *s, int32_t slot, const fg_alloc_t *al, int32_t n)
{
    if (s->ndeferred == s->deferred_cap)
        s->deferred =
            fg__grow(s->deferred, &s->deferred_cap, s->ndeferred + 1, sizeof *s->deferred);
    s->deferred[s->ndeferred++] = -1 - slot;
    if (s->ndsnap + (size_t)n > s->dsnap_cap)
        s->dsnap = fg__grow(s->dsnap, &s->dsnap_cap, s->ndsnap + (size_t)n, sizeof *s->dsnap);
    for (int32_t k = 0; k < n; k++) {
        const fg__node_t *nd = &s->nodes[al[k].node];
        fg__node_snap_t *sn = &s->dsnap[s->ndsnap++];
        sn->node = al[k].node;
        sn->nfree = nd->nfree;
        sn->free_mask = nd->free_mask;
        for (int i = 0; i < nd->gpus; i++) {
            sn->gpu_job[i] = nd->gpu_job[i];
            sn->avail[i] = nd->avail[i];
        }
    }
}

/* Puts the nodes of the queued starts back as they were before them, newest first. */
static void undo_starts(fg_sched_t *s)
{
    for (size_t k = s->ndsnap; k-- > 0;) {
        const fg__node_snap_t *sn = &s->dsnap[k];
        fg__node_t *nd = &s->nodes[sn->node];
        nd->nfree = sn->nfree;
        nd->free_mask = sn->free_mask;
        for (int i = 0; i < nd->gpus; i++) {
            nd->gpu_job[i] = sn->gpu_job[i];
            nd->avail[i] = sn->avail[i];
        }
        fg__node_changed(s, sn->node);
    }
    s->ndsnap = 0;
}

/* A queued estimate, made now. */
static void estimate_now(fg_sched_t *s, fg__job_t *j)
{
    j->est = fg__plan_claim(s, j, s->plan_now, false);
}

/* The queue with starts in it: the starts are taken back, and the queue is replayed in
 * its order, each estimate on the plan as it was then, each start made again
 * (fg__job_take_gpus), so the plan ends as the walk left it. The estimates from
 * deferred[upto] on are not made (moot, or dropped by fg__plan_close). (Between the
 * first queued estimate and the end of the walk only starts change the nodes: a walk's
 * reserving and candidate claims come before its estimate-only ones, and a walk that
 * started something preempts nothing.) */
static void deferred_replay(fg_sched_t *s, size_t upto)
{
    undo_starts(s);
    for (size_t k = s->dhead; k < s->ndeferred; k++) {
        const int32_t e = s->deferred[k];
        if (e < 0) {
            fg__job_t *j = &s->jobs[-1 - e];
            fg__job_take_gpus(s, -1 - e, fg__job_allocs(j), j->nallocs,
                              s->plan_now + j->time_limit);
        } else if (k < upto) {
            estimate_now(s, &s->jobs[e]);
        }
    }
    s->dhead = s->ndeferred;
}

/* Makes the queued estimates up to deferred[upto], in their order. */
static void deferred_run(fg_sched_t *s, size_t upto)
{
    if (s->ndsnap && upto > s->dhead) { /* estimates queued before a start */
        deferred_replay(s, upto);
        return;
    }
    while (s->dhead < upto)
        estimate_now(s, &s->jobs[s->deferred[s->dhead++]]);
}

/* ------------------------------------------------------------------ the tail */

/* What the walk leaves on pending job j of its tail (walk_tail): as walk.c's steps. */
static void tail_job(fg_sched_t *s, fg__job_t *j, fg_time_t now, bool window)
{
    fg__reason_clear(s, j);
    if (j->eligible_time > now) { /* (not when the walk stopped: s->max_eligible) */
        j->why.code = FG_REASON_RETRY_BACKOFF;
        j->est = j->eligible_time;
    } else if (fg__reason_account_or_fit(s, j, &s->accounts[j->account])) {
        /* (set) */
    } else if (s->tail_head) { /* no backfill: behind the first blocked job */
        fg__why_priority(j, s->tail_head);
        fg__estimate(s, j, now);
    } else if (window) { /* past the first K: a reason only */
        if (s->no_reasons)
            j->why.code = FG__REASON_LAZY;
        else
            fg__blocked_reason_memo(s, j);
    } else { /* blocked_reason with no GPU free */
        fg__why_room(j, FG_REASON_RESOURCES, 0);
        fg__estimate(s, j, now);
    }
}

/* The rest of a walk that stopped early (walk.c, tail-stop): every claim that decisions
 * depend on is made, nothing can start, and no pending job waits out a backoff (so none
 * of them moves next_wake). What is left (the rest of the first estimate_depth jobs, or
 * of the backfill window) only gets reasons and queued estimates, on a plan that only
 * estimate-only claims change until the next event or pass: walked here, as the walk
 * would have walked it, when someone asks about a job it did not reach yet
 * (fg__plan_ask), before a preemption of the walk (fg__plan_settle) and before an
 * account, member or turn changes (fg__plan_finish_walk); dropped at the next event or
 * pass (fg__plan_close). */
static void walk_tail(fg_sched_t *s)
{
    if (!s->tail_on)
        return;
    s->tail_on = false;
    int64_t left = s->tail_left;
    int32_t slot;
    while (left > 0 && (slot = fg__order_next(s, s->tail_o)) >= 0) {
        fg__job_t *j = &s->jobs[slot];
        /* (the backfill window counts every job the order gives; the first K, pending ones) */
        left -= s->tail_window || j->state == FG_JOB_PENDING;
        if (j->state != FG_JOB_PENDING)
            continue;
        if (s->wout)
            s->wout->scanned++;
        tail_job(s, j, s->tail_now, s->tail_window);
    }
}

/* Could walk_tail reach pending job j? (Not if the walk's order already gave it, or if
 * more of its member's jobs come before it than walk_tail has looks left.) */
static bool tail_may_reach(const fg_sched_t *s, const fg__job_t *j)
{
    const int32_t slot = (int32_t)(j - s->jobs);
    const fg__order_t *o = s->tail_o;
    const int64_t left = s->tail_left; /* jobs it looks at at most */
    if (o->band < 0 || o->band >= FG__NBANDS || j->band > o->band)
        return true;
    if (j->band < o->band)
        return false; /* its band was walked: the order gave it */
    /* its place in its member's queue (sorted by submit time, then id) */
    const fg__queue_t *q = &s->members[j->member].q[j->band];
    const int32_t lo = fg__queue_lower_bound(s, q, j);
    if (lo >= q->len || q->v[lo] != slot)
        return true; /* (not found: cannot happen; the safe answer) */
    const int32_t cur = o->cursor[j->member];
    return lo >= cur && lo - cur < left;
}

/* ------------------------------------------------------------------ the plan's life */

/* Makes what the walk left to be made when asked for now: its tail, its queued
 * estimates: before a walk's first preemption changes the plan (preempt.c), and at the
 * end of a pass whose last walk started jobs. A preemption in a walk that another
 * follows makes them moot: they are dropped. */
void fg__plan_settle(fg_sched_t *s)
{
    if (!s->walk_last) { /* a preemption: another walk follows, and this one's rest is moot */
        s->tail_on = false;
        s->dhead = s->ndeferred = s->ndsnap = 0;
        return;
    }
    walk_tail(s);
    deferred_run(s, s->ndeferred);
}

/* Before an account, member or turn changes: the tail is walked on the old ones. */
void fg__plan_finish_walk(fg_sched_t *s)
{
    walk_tail(s);
}

/* Drops the pass-local view: leaves go back to the real state. */
void fg__plan_restore(fg_sched_t *s)
{
    for (size_t k = 0; k < s->ntouched; k++) {
        int32_t n = s->touched_nodes[k];
        s->nodes[n].touched = -1;
        fg__node_leaf_restore(s, n);
    }
    s->ntouched = 0;
    s->plan_alive = false;
    s->tail_on = false;
}

/* At the next event or pass: what nobody asked for stays unknown, and the plan goes. */
void fg__plan_close(fg_sched_t *s)
{
    /* estimates not asked for stay unknown */
    s->dhead = s->ndeferred = s->ndsnap = 0;
    if (s->plan_alive)
        fg__plan_restore(s);
}

/* Someone asks about job `slot` (its info, its explanation): its reason and estimate,
 * as the walk would have left them. */
void fg__plan_ask(fg_sched_t *s, int32_t slot)
{
    if (!s->plan_alive)
        return;
    fg__job_t *j = &s->jobs[slot];
    if (s->tail_on && j->state == FG_JOB_PENDING && tail_may_reach(s, j))
        walk_tail(s);
    for (size_t k = s->dhead; k < s->ndeferred; k++)
        if (s->deferred[k] == slot) {
            deferred_run(s, k + 1);
            return;
        }
}

/* ------------------------------------------------------------------ settings */

const char *fg__shortcut_name(int k)
{
    static const char *const names[] = {
#define FG__SC_NAME(e, name, what) name,
        FG__SHORTCUTS(FG__SC_NAME)
#undef FG__SC_NAME
    };
    return k >= 0 && k < FG__SC_COUNT ? names[k] : NULL;
}

int fg__shortcut_set(fg_sched_t *s, const char *name, bool on)
{
    int found = -1;
    for (int k = 0; k < FG__SC_COUNT; k++)
        if (!strcmp(name, "all") || !strcmp(name, fg__shortcut_name(k))) {
            s->sc_off = on ? s->sc_off & ~(UINT32_C(1) << k) : s->sc_off | (UINT32_C(1) << k);
            found = k;
        }
    s->feas_any = 0; /* (the mask may have been filled with "feasible-mask" on) */
    return found >= 0 ? FG_OK : FG_EINVAL;
}

void fg__sched_set_max_walks(fg_sched_t *s, int32_t n)
{
    s->max_walks = n > 0 && n < FG__MAX_WALKS ? n : 0;
}

void fg_sched_set_estimates_on_demand(fg_sched_t *s, bool on)
{
    fg__plan_close(s);
    s->est_on_demand = on;
}

void fg_sched_set_no_reasons(fg_sched_t *s, bool on)
{
    fg__plan_close(s);
    s->no_reasons = on;
}
