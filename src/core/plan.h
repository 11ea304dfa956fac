/*
 * plan.h - what the files of the plan share: the walk (walk.c), placement and claims
 * (place.c), reasons (reasons.c), estimates on demand (ondemand.c) and preemption
 * (preempt.c). The plan is a walk's pass-local view of the cluster: the nodes it
 * touched (fg__is_touched) carry per-GPU availability (avail) and reservations
 * (res_from, res_job); untouched nodes are as the availability trees say (index.c).
 *
 * The inline helpers below are the walk's per-job steps that more than one file takes:
 * the memos of failed placements (fg__fail_known), of feasibility (fg__feasible) and of
 * blocked reasons (fg__blocked_reason_memo), the reasons that need no plan
 * (fg__reason_account_or_fit) and an estimate (fg__estimate). Example: in one walk, a
 * 4-GPU job ending at t=500 fails to fit; fg__fail_known then answers "no" for a later
 * 4-GPU job ending at t=800 without a placement, and that job's blocked reason comes
 * from the memo when a job of the same size and type already got one on the same plan.
 */
#ifndef FG_CORE_PLAN_H
#define FG_CORE_PLAN_H

#include "internal.h"

#include <string.h>

typedef struct ent_calc {
    double *ent_a, *ent_m;
    double *d, *w, *om;
    int32_t *idx, *ms;
    bool *m_done; /* per account: its members' entitlements are in ent_m */
    bool done;
} ent_calc_t;

/* ondemand.c */
void fg__plan_settle(fg_sched_t *s); /* makes what the walk left: its tail, queued estimates */
void fg__plan_restore(fg_sched_t *s);
void fg__defer_start(fg_sched_t *s, int32_t slot, const fg_alloc_t *al, int32_t n);
/* place.c */
bool fg__place_now(fg_sched_t *s, const fg__job_t *j, fg_time_t now, fg_alloc_t *al);
bool fg__place_single(fg_sched_t *s, const fg__job_t *j, fg_time_t now, fg_alloc_t *al);
bool fg__place_whole(fg_sched_t *s, const fg__job_t *j, fg_time_t now, fg_alloc_t *al);
fg_time_t fg__plan_claim(fg_sched_t *s, fg__job_t *j, fg_time_t now, bool protect);
fg__fail_t *fg__fail_memo_fill(fg_sched_t *s, size_t ts);
bool fg__feasible_fill(fg_sched_t *s, const fg__job_t *j, fg__feas_memo_t *m);
bool fg__feasible_count(fg_sched_t *s, const fg__job_t *j, fg_reason_t *why);
/* preempt.c */
void fg__serve_claims(fg_sched_t *s, fg_time_t now, fg_decisions_t *out);
void fg__try_preempt(fg_sched_t *s, fg__job_t *j, fg_time_t now, ent_calc_t *e, fg_decisions_t *out,
                     fg_time_t *wake);
bool fg__preempt_may_search(fg_sched_t *s, const fg__job_t *j, fg_time_t now, ent_calc_t *e);
/* reasons.c */
fg_reason_t fg__blocked_reason_fill(fg_sched_t *s, fg__job_t *j, fg__why_memo_t *m);
/* walk.c */
void fg__push_start(fg_decisions_t *d, const fg__job_t *j, const fg_alloc_t *al, int32_t n);
void fg__push_preempt(fg_decisions_t *d, const fg__job_t *v, fg_preempt_why_t why,
                      fg_job_id_t for_job);

static inline bool fg__type_matches(const fg__job_t *j, int32_t t)
{
    return j->type < 0 || j->type == t;
}

static inline bool fg__is_touched(const fg_sched_t *s, int32_t n)
{
    return s->nodes[n].touched == s->walk_no;
}

static inline fg__fail_t *fg__fail_memo(fg_sched_t *s, size_t ts)
{
    if (ts < s->fail_cap && s->fail[ts].walk == s->walk_no)
        return &s->fail[ts];
    return fg__fail_memo_fill(s, ts);
}

/* Did a job of no more GPUs than j, ending no later than `end`, already fail to fit? */
static inline bool fg__fail_known(const fg__fail_t *f, const fg__job_t *j, fg_time_t end)
{
    if (j->gpus <= FG_WHOLE_NODE_GPUS)
        return f->single[j->gpus] != FG__INF && f->single[j->gpus] <= end;
    for (int32_t k = 0; k < f->nwhole; k++)
        if (f->whole_k[k] <= j->gpus / FG_WHOLE_NODE_GPUS && f->whole_end[k] <= end)
            return true;
    return false;
}

/* Could j ever run on the cluster as it is (ignoring what runs)? Sets *why. The same
 * size and type get the same answer until a node is added or changes state; the sizes
 * of one node and any type found feasible are also a bit mask, read first. */
static inline bool fg__feasible(fg_sched_t *s, const fg__job_t *j, fg_reason_t *why)
{
    if (j->type < 0 && j->gpus <= FG_WHOLE_NODE_GPUS && (s->feas_any >> j->gpus & 1))
        return true;
    fg__feas_memo_t *m = &s->feas_memo[(j->gpus + 7 * (j->type + 1)) & 15];
    if (m->gen != s->node_gen || m->gpus != j->gpus || m->type != j->type)
        fg__feasible_fill(s, j, m);
    if (!m->ok)
        *why = m->why;
    return m->ok;
}

/* A pending job looked at in this walk: no reason, estimate or numbers yet. */
static inline void fg__reason_clear(const fg_sched_t *s, fg__job_t *j)
{
    j->reason_walk = s->walk_no;
    j->est = FG_TIME_NEVER;
    memset(&j->why, 0, sizeof j->why);
}

/* No room for j now (resources, fragmentation): `free` GPUs of its type are free. */
static inline void fg__why_room(fg__job_t *j, fg_reason_t code, int32_t free)
{
    j->why.code = code;
    j->why.room.free = free;
    j->why.room.victim = 0;
}

/* Without backfill, j waits behind `head`, the first blocked job. */
static inline void fg__why_priority(fg__job_t *j, fg_job_id_t head)
{
    j->why.code = FG_REASON_PRIORITY;
    j->why.priority.head = head;
}

/* The reasons that depend on neither the plan nor the order, in the order every walk
 * tests them: the account's budget, its quota, no node that could ever run it. Sets the
 * reason and returns true when one applies. */
static inline bool fg__reason_account_or_fit(fg_sched_t *s, fg__job_t *j, const fg__account_t *a)
{
    fg_reason_t why;
    if (fg__budget_blocks(a, j)) {
        j->why.code = FG_REASON_BUDGET;
    } else if (a->quota >= 0 && a->running + j->gpus > a->quota) {
        j->why.code = FG_REASON_QUOTA;
        j->why.quota.running = a->running;
        j->why.quota.quota = a->quota;
    } else if (!fg__feasible(s, j, &why)) {
        j->why.code = why;
    } else {
        return false;
    }
    return true;
}

/* j's blocked reason (reasons.c: resources, fragmentation or reservation) through the
 * walk's memo: the same job size and type get the same answer while the plan is
 * unchanged (plan_ver), unless the reservation it names is j's own. Sets j->why. */
static inline fg_reason_t fg__blocked_reason_memo(fg_sched_t *s, fg__job_t *j)
{
    fg__why_memo_t *m =
        &s->why_memo[(j->gpus <= FG_WHOLE_NODE_GPUS ? j->gpus : 8 + j->gpus / FG_WHOLE_NODE_GPUS) &
                     15];
    if (m->walk == s->walk_no && m->ver == s->plan_ver && m->gpus == j->gpus &&
        m->type == j->type &&
        !(m->why.code == FG_REASON_RESERVATION && m->why.reservation.holder == j->id)) {
        j->why = m->why;
        return j->why.code;
    }
    return fg__blocked_reason_fill(s, j, m);
}

/* j's estimate, from the plan as it is, or queued until asked for. */
static inline fg_time_t fg__estimate(fg_sched_t *s, fg__job_t *j, fg_time_t now)
{
    if (!s->est_on_demand)
        return fg__plan_claim(s, j, now, false);
    if (s->ndeferred == s->deferred_cap)
        s->deferred =
            fg__grow(s->deferred, &s->deferred_cap, s->ndeferred + 1, sizeof *s->deferred);
    s->deferred[s->ndeferred++] = (int32_t)(j - s->jobs);
    s->plan_now = now;
    return FG_TIME_NEVER;
}

#endif
