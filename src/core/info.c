/*
 * info.c - the inspection getters: jobs, nodes, accounts, members, GPUs up and free.
 *
 * They copy the state into the public info structs and change nothing, with one
 * exception: with estimates on demand, fg_sched_job_info and fg_sched_job_at first make
 * the job's estimate and reason if the last pass left them to be made when asked for
 * (ondemand.c), so they take a scheduler that is not const. A reason is shown only if
 * the last walk of the last pass wrote it; otherwise the job reads as not reached
 * (reason priority, no estimate).
 *
 * Example: a pending job that the last pass found blocked behind a reservation reads
 * reason FG_REASON_RESERVATION with its estimated start; after the next submission
 * and before the next pass it still reads the same (the pass's last walk wrote it).
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ inspection */

static void job_info(const fg_sched_t *s, const fg__job_t *j, fg_job_info_t *o)
{
    /* all but allocs[], which is 2 KiB and read only up to nallocs (set below): the
     * controller reads every live job each second */
    memset(o, 0, offsetof(fg_job_info_t, allocs));
    o->id = j->id;
    o->state = j->state;
    o->account = j->account;
    o->member = j->member;
    o->gpus = j->gpus;
    o->prio = j->prio;
    o->submit_time = j->submit_time;
    o->time_limit_s = j->time_limit;
    o->attempt = j->attempt;
    o->retries_used = j->retries_used;
    o->max_retries = j->max_retries;
    o->attained_gpu_s = j->attained_gpu_s;
    o->start_time = j->state == FG_JOB_RUNNING ? j->start_time : 0;
    o->eligible_time = j->eligible_time;
    o->preempting = j->preempting;
    o->claimed = j->state == FG_JOB_PENDING && j->claimed;
    o->claim_victims = o->claimed ? j->claim : 0;
    /* (a reason left to be made when asked for, and not asked for before the next
     * event: as if the pass had not reached the job) */
    bool fresh = j->state == FG_JOB_PENDING && j->reason_walk == s->walk_no &&
                 j->why.code != FG__REASON_LAZY;
    o->reason = j->state != FG_JOB_PENDING ? FG_REASON_NONE
                : fresh                    ? j->why.code
                                           : FG_REASON_PRIORITY;
    /* (with no reasons, a lazy mark of this pass keeps the estimate the pass gave) */
    o->estimated_start =
        fresh || (j->state == FG_JOB_PENDING && j->reason_walk == s->walk_no && s->no_reasons)
            ? j->est
            : FG_TIME_NEVER;
    if (j->state == FG_JOB_RUNNING) {
        o->nallocs = j->nallocs;
        memcpy(o->allocs, fg__job_allocs(j), sizeof(fg_alloc_t) * (size_t)j->nallocs);
    }
}

int fg_sched_job_info(fg_sched_t *s, fg_job_id_t id, fg_job_info_t *out)
{
    int32_t slot = fg__hash_get(s, id);
    if (slot < 0)
        return FG_ENOENT;
    fg__plan_ask(s, slot); /* estimates on demand: may make its estimate and reason */
    job_info(s, &s->jobs[slot], out);
    return FG_OK;
}

size_t fg_sched_job_count(const fg_sched_t *s)
{
    return s->nlive;
}

size_t fg_sched_pending_count(const fg_sched_t *s)
{
    return s->npending;
}

int fg_sched_job_at(fg_sched_t *s, size_t i, fg_job_info_t *out)
{
    if (i >= s->nlive)
        return FG_ENOENT;
    fg__plan_ask(s, s->live[i]); /* (as in fg_sched_job_info) */
    job_info(s, &s->jobs[s->live[i]], out);
    return FG_OK;
}

size_t fg_sched_node_count(const fg_sched_t *s)
{
    return s->nnodes;
}

int fg_sched_node_info(const fg_sched_t *s, int node, fg_node_info_t *out)
{
    if (node < 0 || (size_t)node >= s->nnodes)
        return FG_ENOENT;
    const fg__node_t *nd = &s->nodes[node];
    memset(out, 0, sizeof *out);
    out->name = nd->name;
    out->gpu_type = s->types[nd->type].name;
    out->state = nd->state;
    out->gpus = nd->gpus;
    out->free_gpus = nd->nfree;
    for (int i = 0; i < nd->gpus; i++)
        out->gpu_job[i] = nd->gpu_job[i] < 0 ? 0 : s->jobs[nd->gpu_job[i]].id;
    return FG_OK;
}

size_t fg_sched_account_count(const fg_sched_t *s)
{
    return s->naccounts;
}

int fg_sched_account_info(const fg_sched_t *s, int account, fg_account_info_t *out)
{
    if (account < 0 || (size_t)account >= s->naccounts)
        return FG_ENOENT;
    const fg__account_t *a = &s->accounts[account];
    double sum = 0;
    for (size_t i = 0; i < s->naccounts; i++)
        sum += s->accounts[i].weight;
    memset(out, 0, sizeof *out);
    out->name = a->name;
    out->weight = a->weight;
    out->gpu_quota = a->quota;
    out->budget_exhausted = a->budget_exhausted;
    out->running_gpus = a->running;
    out->pending_jobs = a->pending;
    out->normalized_share = sum > 0 ? a->weight / sum : 0;
    return FG_OK;
}

size_t fg_sched_member_count(const fg_sched_t *s)
{
    return s->nmembers;
}

int fg_sched_member_info(const fg_sched_t *s, int member, fg_member_info_t *out)
{
    if (member < 0 || (size_t)member >= s->nmembers)
        return FG_ENOENT;
    const fg__member_t *m = &s->members[member];
    double sum = 0;
    for (size_t i = 0; i < s->nmembers; i++)
        if (s->members[i].account == m->account)
            sum += s->members[i].weight;
    memset(out, 0, sizeof *out);
    out->user = m->user;
    out->account = m->account;
    out->weight = m->weight;
    out->running_gpus = m->running;
    out->pending_jobs = m->pending;
    out->normalized_share = sum > 0 ? m->weight / sum : 0;
    return FG_OK;
}

/* (Most clusters have one GPU type: the pass asks for these at every walk.) */
int32_t fg_sched_gpus_up(const fg_sched_t *s)
{
    if (s->ntypes == 1)
        return s->types[0].up_gpus;
    int32_t n = 0;
    for (size_t i = 0; i < s->ntypes; i++)
        n += s->types[i].up_gpus;
    return n;
}

int32_t fg_sched_gpus_free(const fg_sched_t *s)
{
    if (s->ntypes == 1)
        return s->types[0].free_gpus;
    int32_t n = 0;
    for (size_t i = 0; i < s->ntypes; i++)
        n += s->types[i].free_gpus;
    return n;
}

size_t fg_sched_plan_order(fg_sched_t *s, fg_time_t now, fg_job_id_t *ids, size_t max)
{
    fg__order_t o = {0};
    fg__order_prepare(s, &o, now);
    size_t n = 0;
    int32_t slot;
    while (n < max && (slot = fg__order_next(s, &o)) >= 0) {
        assert(s->jobs[slot].state == FG_JOB_PENDING);
        ids[n++] = s->jobs[slot].id;
    }
    fg__order_free(&o);
    return n;
}
