/*
 * reasons.c - why a pending job waits: its blocked reason, and explain.
 *
 * Every walk leaves on each pending job it looks at a reason (fg__why_t, internal.h:
 * a code and the numbers its text shows). The reasons that need no plan (backoff,
 * budget, quota, no node that could hold it) come from plan.h's
 * fg__reason_account_or_fit; a job that could have started but did not fit gets its
 * blocked reason here, from the walk's plan: resources (too few free GPUs of its type),
 * reservation (free GPUs it fits are held for a job ahead) or fragmentation (enough
 * free GPUs, not on one node or on whole nodes as it needs them). fg_sched_explain
 * says the same in words; a job the last pass did not reach reads as "behind N jobs".
 *
 * Worked example: 2 nodes x 8 GPUs, n0 with 3 GPUs free, n1 with 6 free that the walk
 * reserved from t=50 for job 7. A 6-GPU job that would end after t=50: 9 GPUs free in
 * all (not resources), and n1 would fit it but holds them for job 7: "the free GPUs it
 * fits are reserved for job 7 from t=50; expected at ..." (its estimate). A 7-GPU job fits
 * no node: "9 GPUs free but not 7 on one node; ..." (fragmentation).
 */
#include "plan.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Why a job that could not start waits (sets j->why): too few free GPUs of its type
 * (resources), free GPUs it would fit that are held for another job (reservation), or
 * free GPUs not on one node or on whole nodes as it needs them (fragmentation). */
static fg_reason_t blocked_reason(fg_sched_t *s, fg__job_t *j)
{
    int32_t free_any = 0;
    for (size_t ti = 0; ti < s->ntypes; ti++)
        if (fg__type_matches(j, (int32_t)ti))
            free_any += s->types[ti].free_gpus;
    if (free_any < j->gpus) {
        fg__why_room(j, FG_REASON_RESOURCES, free_any);
        return FG_REASON_RESOURCES;
    }
    for (size_t k = 0; k < s->ntouched; k++) {
        const fg__node_t *nd = &s->nodes[s->touched_nodes[k]];
        if (nd->state != FG_NODE_UP || !fg__type_matches(j, nd->type))
            continue;
        bool fits = j->gpus <= FG_WHOLE_NODE_GPUS ? nd->nfree >= j->gpus : nd->nfree == nd->gpus;
        if (!fits)
            continue;
        for (int i = 0; i < nd->gpus; i++)
            if (nd->gpu_job[i] < 0 && nd->res_job[i] && nd->res_job[i] != j->id) {
                j->why.code = FG_REASON_RESERVATION;
                j->why.reservation.holder = nd->res_job[i];
                j->why.reservation.from = nd->res_from[i];
                return FG_REASON_RESERVATION;
            }
    }
    fg__why_room(j, FG_REASON_FRAGMENTATION, free_any);
    return FG_REASON_FRAGMENTATION;
}

/* blocked_reason_memo when the memo does not hold the answer: makes it and keeps it. */
fg_reason_t fg__blocked_reason_fill(fg_sched_t *s, fg__job_t *j, fg__why_memo_t *m)
{
    const fg_reason_t r = blocked_reason(s, j);
    m->walk = s->walk_no;
    m->ver = s->plan_ver;
    m->gpus = j->gpus;
    m->type = j->type;
    m->why = j->why;
    return r;
}

/* ------------------------------------------------------------------ explain */

static int fmt(char *buf, size_t n, const char *f, ...) __attribute__((format(printf, 3, 4)));
static int fmt(char *buf, size_t n, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int r = vsnprintf(buf, n, f, ap);
    va_end(ap);
    return r;
}

static void when(char *b, size_t n, fg_time_t t, fg_time_t now)
{
    if (t == FG_TIME_NEVER)
        fmt(b, n, "no estimate yet");
    else if (t <= now)
        fmt(b, n, "expected now");
    else
        fmt(b, n, "expected at t=%" PRId64 " (in %" PRId64 " s)", t, t - now);
}

/* A job the last pass did not reach (or whose reason was left to be made when asked for,
 * and nobody asked before the next event): the jobs before it in plan order. */
static void explain_unreached(fg_sched_t *s, const fg__job_t *j, fg_time_t now, char *buf, size_t n)
{
    fg__order_t tmp = {0};
    fg__order_prepare(s, &tmp, now);
    int64_t ahead = 0;
    int32_t slot;
    while ((slot = fg__order_next(s, &tmp)) >= 0 && &s->jobs[slot] != j)
        ahead++;
    fg__order_free(&tmp);
    fmt(buf, n, "behind %" PRId64 " jobs ahead of it in %s order; not reached by the last pass",
        ahead, fg_policy_name(s->cfg.policy));
}

/* The words for pending job j's reason, with its numbers and its estimate. */
static void explain_why(const fg_sched_t *s, const fg__job_t *j, fg_time_t now, char *buf, size_t n)
{
    const fg__account_t *a = &s->accounts[j->account];
    const fg__why_t *y = &j->why;
    const char *where = j->gpus > FG_WHOLE_NODE_GPUS ? "on whole nodes" : "on one node";
    char w[96];
    when(w, sizeof w, j->est, now);
    switch (y->code) {
    case FG_REASON_PRIORITY:
        fmt(buf, n, "behind job %" PRIu64 " at the head of the %s queue; %s", y->priority.head,
            fg_policy_name(s->cfg.policy), w);
        break;
    case FG_REASON_RESOURCES:
        if (y->room.victim)
            fmt(buf, n, "waiting for %d GPUs (%d free); preempting job %" PRIu64 " to make room",
                j->gpus, y->room.free, y->room.victim);
        else
            fmt(buf, n, "waiting for %d free GPUs %s (%d free now); node %s; %s", j->gpus, where,
                y->room.free, j->est != FG_TIME_NEVER ? s->nodes[j->est_node].name : "?", w);
        break;
    case FG_REASON_FRAGMENTATION:
        fmt(buf, n, "%d GPUs free but not %d %s; %s", y->room.free, j->gpus, where, w);
        break;
    case FG_REASON_RESERVATION:
        fmt(buf, n, "the free GPUs it fits are reserved for job %" PRIu64 " from t=%" PRId64 "; %s",
            y->reservation.holder, y->reservation.from, w);
        break;
    case FG_REASON_QUOTA:
        fmt(buf, n, "account %s at its quota: %d/%d GPUs in use, needs %d", a->name,
            y->quota.running, y->quota.quota, j->gpus);
        break;
    case FG_REASON_BUDGET:
        if (a->budget_exhausted)
            fmt(buf, n, "account %s has exhausted its budget", a->name);
        else
            fmt(buf, n,
                "account %s's safe budget has %" PRId64 " micros left to reserve; this job's "
                "time limit at its rate costs %" PRId64,
                a->name, a->budget_left, j->limit_cost);
        break;
    case FG_REASON_RETRY_BACKOFF:
        fmt(buf, n, "retry %d of %d after a failure; eligible at t=%" PRId64 " (in %" PRId64 " s)",
            j->retries_used, j->max_retries, j->eligible_time, j->eligible_time - now);
        break;
    case FG_REASON_GPU_TYPE:
        fmt(buf, n, "no node has %d GPUs of type %s", j->gpus,
            j->type >= 0 ? s->types[j->type].name : "any");
        break;
    case FG_REASON_NODES_DOWN:
        fmt(buf, n, "every node that can hold its %d GPUs is down or draining", j->gpus);
        break;
    default:
        fmt(buf, n, "waiting for the next scheduling pass");
        break;
    }
}

/* Does a job with reason r wait for GPUs others hold or are given first (not for its
 * account's limits, its backoff or the nodes)? */
static bool waits_for_others(fg_reason_t r)
{
    return r == FG_REASON_PRIORITY || r == FG_REASON_RESOURCES || r == FG_REASON_FRAGMENTATION ||
           r == FG_REASON_RESERVATION;
}

/* Account a's entitlement: the water fill of the up GPUs over the accounts' demand
 * (running + pending GPUs), as preemption computes it. */
static double account_entitlement(const fg_sched_t *s, int32_t a)
{
    const size_t na = s->naccounts;
    double *d = fg__realloc(NULL, 3 * na * sizeof *d);
    int32_t *scratch = fg__realloc(NULL, na * sizeof *scratch);
    double *w = d + na, *out = d + 2 * na;
    for (size_t i = 0; i < na; i++) {
        d[i] = (double)s->accounts[i].running + (double)s->accounts[i].pending_gpus;
        w[i] = s->accounts[i].weight;
    }
    fg_fair_water_fill(na, d, w, (double)fg_sched_gpus_up(s), out, scratch);
    const double e = out[a];
    free(d);
    free(scratch);
    return e;
}

/* The numbers of the fair-share rules that order pending job j (wfq, fair), appended to
 * buf[0..n) after its reason: its LAS queue (fair), and its account's GPUs running
 * against its entitlement and its recent usage (decayed GPU-seconds over tau: the
 * average GPUs of the last half-lives), over its weight. Looking changes nothing. */
static void explain_share(const fg_sched_t *s, const fg__job_t *j, fg_time_t now, char *buf,
                          size_t n)
{
    const fg__account_t *a = &s->accounts[j->account];
    size_t len = strlen(buf);
    if (s->cfg.policy == FG_POLICY_FAIR && len < n) {
        const int32_t q = fg__band_las(s, j->band);
        if (q + 1 < s->cfg.las_levels)
            len += (size_t)fmt(buf + len, n - len,
                               "; LAS queue %d of %d (attained %" PRId64
                               " GPU-s, the next queue from %" PRId64 ")",
                               q, s->cfg.las_levels, j->attained_gpu_s,
                               s->cfg.las_thresholds_gpu_s[q]);
        else
            len +=
                (size_t)fmt(buf + len, n - len, "; LAS queue %d of %d (attained %" PRId64 " GPU-s)",
                            q, s->cfg.las_levels, j->attained_gpu_s);
    }
    if (len >= n)
        return;
    double usage = a->usage;
    fg_time_t at = a->usage_at;
    fg__usage_advance(s, &usage, &at, a->running, now);
    const double ent = account_entitlement(s, j->account);
    len += (size_t)fmt(buf + len, n - len,
                       "; account %s (weight %g) runs %d GPUs of %.1f entitled (%s)", a->name,
                       a->weight, a->running, ent,
                       (double)a->running + j->gpus <= ent + 1e-9 ? "within its share with this job"
                                                                  : "over its share with this job");
    if (s->tau > 0 && len < n)
        fmt(buf + len, n - len, ", recent usage %.2f GPUs", usage / s->tau);
}

int fg_sched_explain(fg_sched_t *s, fg_job_id_t id, fg_time_t now, char *buf, size_t n)
{
    fg__job_t *j = fg__job_by_id(s, id);
    if (!j)
        return FG_ENOENT;
    if (!buf || !n)
        return FG_EINVAL;
    fg__plan_ask(s, (int32_t)(j - s->jobs));
    if (j->state == FG_JOB_RUNNING) {
        fmt(buf, n, "running%s", j->preempting ? "; being preempted" : "");
        return FG_REASON_NONE;
    }
    const bool keyed = fg__keyed(s);
    if (j->reason_walk != s->walk_no || j->why.code == FG__REASON_LAZY) {
        explain_unreached(s, j, now, buf, n);
        if (keyed)
            explain_share(s, j, now, buf, n);
        return FG_REASON_PRIORITY;
    }
    explain_why(s, j, now, buf, n);
    if (keyed && waits_for_others(j->why.code))
        explain_share(s, j, now, buf, n);
    return (int)j->why.code;
}
