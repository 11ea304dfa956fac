/*
 * pass.c - one scheduling pass: place, reserve, backfill, estimate, preempt.
 *
 * The pass walks pending jobs in plan order (order.c) and for each one:
 *   1. skips it if it waits out a retry backoff, its account is at quota or out of
 *      budget, or no up node could hold it;
 *   2. starts it now on the best-fit node (fewest free GPUs that still fit), unless a
 *      job before it blocked and the policy has no backfill (fifo, --no-backfill);
 *   3. otherwise, the first `reserve_depth` blocked jobs get a reservation: the GPUs
 *      that free up soonest (running jobs' start + time limit, from the availability
 *      trees of index.c). Reserved GPUs carry res_from = the reservation's start; a
 *      later job may start on a free GPU only if it ends (now + its time limit) by then.
 *      Blocked jobs up to `estimate_depth` get an estimate from the same model.
 *
 * EASY backfill, worked example: 2 nodes x 8 GPUs. n0 runs a 4-GPU job until t=100,
 * n1 is full until t=50. At t=0 an 8-GPU job J is first in plan order: it cannot
 * start; its reservation is n1 from t=50 (whole-node key 50 < 100). Then a 1-GPU job
 * with limit 200 may start on n0 (not reserved), and a 1-GPU job could start on n1
 * only if it were free and ended by t=50. J starts at t=50 at the latest.
 *
 * Preemption comes last, for up to `preempt_jobs_per_pass` blocked jobs whose GPUs
 * are not already being freed: high takes from low at once; under wfq/round-robin a
 * job that waited `preempt_wait_s` and whose account (member) is below its entitlement
 * takes from long runners (>= quantum_s in all, >= min_run_s this attempt) of
 * over-entitled accounts (members); under las, from long runners in a higher LAS queue.
 * Victims are the cheapest in GPU-time lost since their last checkpoint.
 */
#include "plan.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
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
    if (a->budget_exhausted || (a->quota >= 0 && a->running + j->gpus > a->quota) ||
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

/* The walk stops here; walk_tail walks the rest (`left` jobs) when needed. */
static void tail_stop(fg_sched_t *s, fg__order_t *o, int64_t left, fg_time_t now, bool window,
                      fg_job_id_t head)
{
    s->tail_on = true;
    s->tail_window = window;
    s->tail_head = head;
    s->tail_o = o;
    s->tail_left = left;
    s->tail_now = now;
}

/* What the walk leaves on a job fg__order_peek moved past (it cannot start; pending,
 * eligible): as the walk would, with a blocked reason made lazily (lazy_fix). */
static void peeked(fg_sched_t *s, int32_t slot)
{
    fg__job_t *j = &s->jobs[slot];
    fg__reason_clear(s, j);
    if (s->no_reasons) { /* (no estimate either: it lies past the first K) */
        j->reason = FG__REASON_LAZY;
        return;
    }
    if (!fg__reason_account_or_fit(s, j, &s->accounts[j->account])) {
        j->reason = FG__REASON_LAZY;
        s->lazy[s->nlazy++] = slot; /* (room made by the caller) */
    }
}

/* One walk over the pending jobs in plan order (see the banner). Appends starts to
 * *out, records blocked preemption candidates in s->blocked, lowers *wake. */
static void walk(fg_sched_t *s, fg_time_t now, fg_decisions_t *out, fg_time_t *wakep)
{
    const size_t starts_before = out->nstarts;
    s->walk_no++;
    s->ntouched = 0;
    s->touched_free_max = 0;
    s->in_walk = true;
    s->dhead = s->ndeferred = s->ndsnap = s->nlazy = 0;
    s->tail_on = false;
    s->nblocked = 0;
    s->reserved_free = 0;
    s->window_max = 0;
    const fg_config_t *c = &s->cfg;
    const bool no_backfill = c->policy == FG_POLICY_FIFO || !c->backfill;
    const int64_t K = c->estimate_depth;
    fg_time_t wake = *wakep;
    /* (fg__order_next reads the queues, unchanged until the walk ends) */
    fg__order_t *o = &s->it;
    fg__order_prepare(s, o, now);
    int64_t idx = 0, after_block = 0;
    int32_t reserved = 0, nblk = 0;
    fg_job_id_t head_blocked = 0;
    int32_t slot;
    fg_alloc_t al[FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS];
    /* free GPUs change only with the walk's starts; which time limits are pending, not
     * at all during the walk (so the answer changes only with window_max) */
    int32_t free_now = fg_sched_gpus_free(s);
    fg_time_t short_for = -1;
    bool short_any = false;
    /* lazy reasons (lazy_fix): with estimates on demand and backfill */
    const bool can_lazy = s->est_on_demand && !no_backfill;
    const bool can_peek = can_lazy && c->policy == FG_POLICY_WFQ && c->backfill_depth > 0;
    /* past every claim that decisions depend on (the first blocked jobs' reservations and
     * preemption candidates; without backfill, the first blocked job's): past_claims;
     * and with estimates on demand, no start in this walk and no pending job in a
     * backoff: tail_ok (both change only when a job blocks or starts) */
    bool past_claims = false, tail_ok = false;
    int64_t peek_at = can_peek ? K : INT64_MAX; /* the next look ahead: at the K-th job on */
    /* Once the walk started a job, another walk follows (unless this one is the last the
     * pass may make), and the pass shows what that one leaves: what this walk leaves on
     * the jobs that cannot start (reasons, estimates) is moot. Only its starts and the
     * reservations they respect count. */
    bool moot = false;
    ent_calc_t e = {0}; /* (the preemption candidates' entitlements, made once) */
    int defer = 0;      /* the reservations left may be deferred: 1, not: -1, unknown: 0 */

    for (;;) {
        /* With estimates on demand, no GPU free, no start and no pending job in a backoff
         * (so nothing can start, and no job can move next_wake), once the preemption
         * candidates are known (and their claims made) and none of them can search for
         * victims (the only reader of the other reservations), the reservations still to
         * be made decide nothing. With no GPU free a reservation holds no free GPU, so it
         * changes no other job's reason, placement or estimate: such a job gets what
         * walk_tail gives the rest of the first K jobs (reason resources, a queued
         * estimate: the start its reservation would have had). (Only past a blocked job:
         * with none yet, the walk looks past the first K jobs for one; walk_tail does
         * not.) */
        if (can_lazy && !past_claims && head_blocked && free_now == 0 && idx < K &&
            reserved < c->reserve_depth && out->nstarts == starts_before &&
            s->max_eligible <= now && (!c->preemption || nblk >= c->preempt_jobs_per_pass)) {
            if (!defer) {
                defer = 1;
                for (size_t b = 0; b < s->nblocked && defer > 0; b++)
                    if (fg__preempt_may_search(s, &s->jobs[s->blocked[b]], now, &e))
                        defer = -1;
            }
            if (defer > 0) {
                tail_stop(s, o, K - idx, now, false, 0);
                break;
            }
        }
        /* Past every claim that decisions depend on, with estimates on demand: what is
         * left may only need reasons (and queued estimates). When the walk started
         * nothing and no pending job waits out a backoff (tail_ok), it is the last walk
         * unless it preempts, and such a rest is left to walk_tail. */
        if (past_claims && s->est_on_demand) {
            /* With no GPU free (or without backfill, behind the first blocked job) the
             * rest up to the K-th job only gets reasons and queued estimates: left to
             * walk_tail. */
            if (tail_ok && idx < K && (no_backfill || free_now == 0)) {
                tail_stop(s, o, K - idx, now, false, no_backfill ? head_blocked : 0);
                break;
            }
            /* The same past the first K jobs with GPUs free, under wfq, when none of the
             * rest of the backfill window can start (fg__order_peek). Else (or in a walk
             * that started a job: another walk follows) the order moves past the jobs
             * that cannot start, up to the first that might or to the window's end, which
             * get their reasons lazily, and it looks again past the one that might. (Not
             * when the walk stops at its next job anyway: every free GPU reserved and no
             * pending job short enough.) */
            if (idx >= peek_at && free_now > 0 && after_block < c->backfill_depth) {
                bool stops = false;
                if (free_now <= s->reserved_free) { /* (reserved >= reserve_depth) */
                    if (short_for != s->window_max) {
                        short_for = s->window_max;
                        short_any = fg__pending_limit_at_most(s, short_for);
                    }
                    stops = !short_any;
                }
                const int64_t wleft = c->backfill_depth - after_block;
                int64_t r = -1;
                if (!stops) { /* (moot: the jobs it moves past need nothing, see below) */
                    peek_ctx_t pc = {.now = now};
                    peek_fill(s, &pc);
                    /* No pending job at all can fit in the plan (its size's fit_end):
                     * none of the window either, without looking at it. */
                    if (tail_ok &&
                        fg__pending_none_fits(s, pc.fit_end,
                                              !pc.whole_exact ? pc.fit_end[FG_WHOLE_NODE_GPUS]
                                              : pc.nwhole     ? pc.whole_end[0]
                                                              : INT64_MIN,
                                              now)) {
                        tail_stop(s, o, wleft, now, true, 0);
                        break;
                    }
                    if ((size_t)wleft > s->peek_cap)
                        s->peek_buf =
                            fg__grow(s->peek_buf, &s->peek_cap, (size_t)wleft, sizeof *s->peek_buf);
                    r = fg__order_peek(s, o, wleft, pc.fit_end, pc.whole_end,
                                       pc.whole_exact ? pc.nwhole : -1, now, could_start, &pc,
                                       s->peek_buf, !tail_ok && !moot);
                }
                if (r == wleft && (tail_ok || moot)) {
                    if (tail_ok)
                        tail_stop(s, o, wleft, now, true, 0);
                    break; /* (moot: the rest of the window can only get reasons) */
                }
                /* the order moved past the r jobs that cannot start: what the walk leaves
                 * on them (as below, their reasons lazily) */
                if (r > 0 && s->nlazy + (size_t)r > s->lazy_cap)
                    s->lazy =
                        fg__grow(s->lazy, &s->lazy_cap, s->nlazy + (size_t)r, sizeof *s->lazy);
                for (int64_t k = 0; k < r && !moot; k++)
                    peeked(s, s->peek_buf[k]);
                idx += r > 0 ? r : 0;
                after_block += r > 0 ? r : 0;
                out->scanned += r > 0 ? r : 0;
                peek_at = r >= 0 ? idx + 1 : INT64_MAX; /* again past the one that may */
            }
        }
        if ((slot = fg__order_next(s, o)) < 0)
            break;
        idx++;
        if (head_blocked) {
            after_block++;
            bool cands_done = !c->preemption || nblk >= c->preempt_jobs_per_pass;
            if (idx > K && cands_done) {
                if (no_backfill || free_now == 0 ||
                    (c->backfill_depth > 0 && after_block > c->backfill_depth))
                    break;
                /* Every free GPU is reserved and no pending job is short enough to
                 * end before the reservations: nothing more can start. */
                if (reserved >= c->reserve_depth && free_now <= s->reserved_free) {
                    if (short_for != s->window_max) {
                        short_for = s->window_max;
                        short_any = fg__pending_limit_at_most(s, short_for);
                    }
                    if (!short_any)
                        break;
                }
            }
        } else if (idx > K && free_now == 0 && c->backfill_depth > 0 &&
                   idx > K + c->backfill_depth) {
            break; /* keep looking for the first blocked job: it gets the reservation */
        }
        fg__job_t *j = &s->jobs[slot];
        if (j->state != FG_JOB_PENDING) { /* started earlier in this pass */
            idx--;
            continue;
        }
        fg__account_t *a = &s->accounts[j->account];
        fg_reason_t why;
        /* Past every claim that decisions depend on (the first blocked jobs' reservations
         * and preemption candidates), a job that cannot fit gets only its reason (and,
         * among the first K, a queued estimate): with no free GPU the reason is known
         * (blocked_reason: resources, none free); else it is made when asked for. */
        if (can_lazy && past_claims && j->eligible_time <= now && !a->budget_exhausted &&
            (a->quota < 0 || a->running + j->gpus <= a->quota) && fg__feasible(s, j, &why)) {
            bool lazy = false;
            if (free_now > 0) {
                const fg_time_t end = now + j->time_limit;
                lazy = fg__fail_known(fg__fail_memo(s, (size_t)(j->type + 1)), j, end) ||
                       (j->type >= 0 && fg__fail_known(fg__fail_memo(s, 0), j, end));
            }
            if (free_now == 0 || lazy) {
                out->scanned++;
                j->reason_walk = s->walk_no;
                j->est = FG_TIME_NEVER;
                j->r_job = 0;
                j->r_a = j->r_b = 0;
                if (lazy) {
                    j->reason = FG__REASON_LAZY;
                    if (!s->no_reasons) {
                        if (s->nlazy == s->lazy_cap)
                            s->lazy =
                                fg__grow(s->lazy, &s->lazy_cap, s->nlazy + 1, sizeof *s->lazy);
                        s->lazy[s->nlazy++] = slot;
                    }
                } else {
                    j->reason = FG_REASON_RESOURCES;
                }
                if (idx <= K && !moot)
                    fg__estimate(s, j, now);
                continue;
            }
        }
        out->scanned++;
        fg__reason_clear(s, j);

        if (j->eligible_time > now) {
            j->reason = FG_REASON_RETRY_BACKOFF;
            j->est = j->eligible_time;
            if (j->eligible_time < wake)
                wake = j->eligible_time;
            continue;
        }
        if (fg__reason_account_or_fit(s, j, a))
            continue;
        if (no_backfill && head_blocked) {
            j->reason = FG_REASON_PRIORITY;
            j->r_job = head_blocked;
            if (idx <= K)
                j->est = fg__estimate(s, j, now);
            continue;
        }
        bool placed = fg__place_now(s, j, now, al);
        if (placed) {
            int32_t n = j->gpus <= FG_WHOLE_NODE_GPUS ? 1 : j->gpus / FG_WHOLE_NODE_GPUS;
            for (int32_t k = 0; k < n; k++) { /* backfilled onto reserved GPUs? */
                const fg__node_t *nd = &s->nodes[al[k].node];
                if (!fg__is_touched(s, al[k].node))
                    continue;
                for (int i = 0; i < nd->gpus; i++)
                    if (al[k].gpu_mask >> i & 1 && nd->res_from[i] != FG__INF)
                        s->reserved_free--;
            }
            if (!moot && !s->walk_last) { /* what the walk left so far is moot too */
                moot = true;
                s->nlazy = 0;
                s->dhead = s->ndeferred = s->ndsnap = 0;
            }
            if (!moot) {
                fg__lazy_flush(s); /* their reasons, on the plan before this start */
                /* queued estimates see the plan before this start: deferred_replay */
                if (s->dhead < s->ndeferred)
                    fg__defer_start(s, slot, al, n);
            }
            s->in_walk = false; /* (not a preemption: fg__node_changed) */
            fg__job_start(s, slot, al, n, now);
            s->in_walk = true;
            fg__push_start(out, j, al, n);
            free_now = fg_sched_gpus_free(s);
            tail_ok = false;
            /* With no GPU free nothing else in this walk can start (a placement takes free
             * GPUs, and only a walk that started nothing preempts), and the rest of a
             * walk that another follows is moot: it ends here. */
            if (moot && free_now == 0 && fg__sc(s, FG__SC_WALK_CUT)) {
                s->walks_cut++;
                break;
            }
            continue;
        }
        bool protect = reserved < c->reserve_depth;
        /* Preemption serves the first preempt_jobs_per_pass blocked jobs in plan order;
         * they always get an estimate, so what is preempted never depends on
         * estimate_depth. */
        bool candidate = c->preemption && nblk++ < c->preempt_jobs_per_pass;
        /* (a candidate's reason decides whether it may preempt: always made) */
        j->reason =
            (s->no_reasons || moot) && !candidate ? FG__REASON_LAZY : fg__blocked_reason_memo(s, j);
        fg_job_id_t keep_job = j->r_job;
        int64_t keep_from = j->r_a;
        if (!head_blocked)
            head_blocked = j->id;
        if (protect || candidate || (idx <= K && !moot)) {
            j->est =
                protect || candidate ? fg__plan_claim(s, j, now, protect) : fg__estimate(s, j, now);
            reserved += protect;
        }
        if (j->reason == FG_REASON_RESERVATION) {
            j->r_job = keep_job;
            j->r_b = keep_from;
        }
        if (candidate && j->reason != FG_REASON_RESERVATION && j->est != FG_TIME_NEVER &&
            j->est > now) {
            s->blocked = fg__grow(s->blocked, &s->blocked_cap, s->nblocked + 1, sizeof *s->blocked);
            s->blocked[s->nblocked++] = slot;
        }
        past_claims = (no_backfill || reserved >= c->reserve_depth) &&
                      (!c->preemption || nblk >= c->preempt_jobs_per_pass);
        tail_ok = s->est_on_demand && past_claims && out->nstarts == starts_before &&
                  s->max_eligible <= now;
    }

    /* Preemption, in the walk that started nothing (the last one), while its
     * reservations are still in view: GPUs held for a job ahead are not room. */
    if (out->nstarts == starts_before && c->preemption && s->nblocked) {
        int32_t served = 0;
        for (size_t b = 0; b < s->nblocked && served < c->preempt_jobs_per_pass; b++) {
            fg__job_t *bj = &s->jobs[s->blocked[b]];
            size_t before = out->npreempts;
            fg__try_preempt(s, bj, now, &e, out, &wake);
            served += out->npreempts > before;
        }
    }

    s->in_walk = false;
    *wakep = wake;
    if (s->dhead < s->ndeferred || s->nlazy || s->tail_on) {
        s->plan_alive = true; /* kept for fg__plan_ask (or dropped by plan_next_walk) */
        return;
    }
    fg__plan_restore(s);
}

/* Before another walk of the same pass. A pass shows what its last walk leaves (a job's
 * reason and estimate count only when that walk wrote them: reason_walk), and the next
 * walk looks at its jobs anew, so whatever this walk left to be made when asked for (its
 * tail, queued estimates, lazy reasons) is moot: dropped, and the plan restored. */
static void plan_next_walk(fg_sched_t *s)
{
    fg__plan_close(s);
}

/* Takes the jobs started by out->starts[from..] out of their pending queues. */
static void leave_queues(fg_sched_t *s, const fg_decisions_t *out, size_t from)
{
    for (size_t k = from; k < out->nstarts; k++)
        fg__pending_del(s, (int32_t)(fg__job_by_id(s, out->starts[k].job) - s->jobs));
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
        if (!settled) {
            if (w + 1 < max_walks)
                plan_next_walk(s);
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
