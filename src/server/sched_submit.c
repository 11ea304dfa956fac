/*
 * sched_submit.c - pending jobs into the core: submission, the jobs the core refuses
 * for now (parked), the accounts it needs, and cancellation of pending jobs.
 *
 * A job is submitted to the core once its record is committed (MSG_SUBMIT). The core
 * may refuse it for now: no node can hold it yet (FG_ENOFIT), or it exceeds its
 * account's quota (FG_EQUOTA). Such a job stays PENDING with a reason that says why,
 * and is "parked": tried again whenever nodes or accounts change (retry_parked).
 * Example: a 16-GPU job on a cluster of 8-GPU nodes is parked with "no node can hold
 * 16 GPUs yet"; when a 16-GPU node registers, the next iteration submits it again and
 * the core takes it.
 */
#include "server/sched_int.h"

#include "common/log.h"
#include "common/xalloc.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Copies accounts and memberships into the core (creates or updates). */
void srv__sync_accounts(sctx_t *c)
{
    srv_t *s = c->s;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->naccounts; i++) {
        srv_account_t *a = s->accounts[i];
        fg_sched_account_set(c->core, a->r.name, a->r.weight, a->r.gpu_quota);
    }
    for (size_t i = 0; i < s->nmembers; i++) {
        srv_member_t *m = s->members[i];
        if (m->deleted)
            continue;
        srv_user_t *u = srv_user_by_id(s, m->r.user_id);
        if (u)
            fg_sched_member_set(c->core, m->r.account, u->r.username, m->r.weight);
    }
    pthread_mutex_unlock(&s->mu);
    c->retry_parked = true;
}

/* Keeps job id to be submitted again when nodes or accounts change. */
static void park(sctx_t *c, uint64_t id)
{
    for (size_t i = 0; i < c->nparked; i++)
        if (c->parked[i] == id)
            return;
    c->parked = fg_xgrow(c->parked, &c->parked_cap, c->nparked + 1, sizeof *c->parked);
    c->parked[c->nparked++] = id;
}

/* Forgets a parked job (submitted, cancelled or gone). */
void srv__unpark(sctx_t *c, uint64_t id)
{
    for (size_t i = 0; i < c->nparked; i++)
        if (c->parked[i] == id) {
            c->parked[i] = c->parked[--c->nparked];
            return;
        }
}

/* The core's view of job j; user (un bytes) receives its owner's name. mu held. */
void srv__fill_spec(srv_t *s, const srv_job_t *j, fg_job_spec_t *sp, char *user, size_t un)
{
    srv_user_t *u = srv_user_by_id(s, j->r.user_id);
    snprintf(user, un, "%s", u ? u->r.username : "?");
    memset(sp, 0, sizeof *sp);
    sp->id = (fg_job_id_t)j->r.id;
    sp->account = j->r.account;
    sp->user = user;
    sp->gpus = j->r.gpus;
    sp->gpu_type = j->r.gpu_type;
    sp->time_limit_s = j->r.time_limit_s;
    sp->prio = (fg_prio_t)j->r.priority;
    sp->max_retries = j->r.max_retries;
    sp->checkpoint_interval_s = j->r.checkpoint_interval_s;
    sp->submit_time = j->r.submit_time;
}

/* The reason shown for a job the core refused with rc (into why, n bytes); returns
 * its reason code. */
static int refusal_reason(const srv_job_t *j, int rc, char *why, size_t n)
{
    if (rc == FG_EQUOTA) {
        snprintf(why, n, "%d GPUs exceed the quota of account %s", j->r.gpus, j->r.account);
        return FG_REASON_QUOTA;
    }
    if (rc == FG_ENOFIT) {
        snprintf(why, n, "no node can hold %d GPUs%s%s yet", j->r.gpus,
                 j->r.gpu_type ? " of type " : "", j->r.gpu_type ? j->r.gpu_type : "");
        return FG_REASON_GPU_TYPE;
    }
    snprintf(why, n, "not scheduled: %s", fg_strerror(rc));
    fg_log(FG_LOG_WARN, "scheduler: job %lld refused by the core: %s", (long long)j->r.id,
           fg_strerror(rc));
    return FG_REASON_PRIORITY;
}

/* Hands a pending job to the core; a job no node (or quota) can hold yet is parked
 * with its reason and retried when nodes or accounts change. mu held. */
void srv__core_submit(sctx_t *c, srv_job_t *j, bool restoring)
{
    srv_t *s = c->s;
    assert(j->state == FG_JOB_PENDING && !j->in_core);
    fg_job_spec_t sp;
    char user[80];
    srv__fill_spec(s, j, &sp, user, sizeof user);
    sp.limit_cost = j->limit_cost = srv__limit_cost(c, j);
    /* restoring: the job was accepted before; no admission limit applies */
    int rc = restoring ? fg_sched_submit_restored(c->core, &sp, c->now)
                       : fg_sched_submit(c->core, &sp, c->now);
    if (rc == FG_ENOENT && !restoring) {
        pthread_mutex_unlock(&s->mu);
        srv__sync_accounts(c);
        pthread_mutex_lock(&s->mu);
        rc = fg_sched_submit(c->core, &sp, c->now);
    }
    if (rc == 0) {
        j->in_core = true;
        srv__unpark(c, (uint64_t)j->r.id);
        if (restoring && (j->r.attempts || j->r.retries_used || j->r.attained_gpu_s))
            fg_sched_restore_pending(c->core, sp.id, j->r.attempts, j->r.retries_used,
                                     j->r.attained_gpu_s, j->r.eligible_time);
        return;
    }
    char why[200];
    int code = refusal_reason(j, rc, why, sizeof why);
    srv__set_reason(j, code, why);
    park(c, (uint64_t)j->r.id);
}

/* MSG_SUBMIT: a committed pending job joins the core. */
void srv__do_submit(sctx_t *c, srv_msg_t *m)
{
    srv_t *s = c->s;
    pthread_mutex_lock(&s->mu);
    srv_job_t *j = srv__job(c, m->job);
    if (j && j->state == FG_JOB_PENDING && !j->in_core)
        srv__core_submit(c, j, false);
    pthread_mutex_unlock(&s->mu);
}

/* Submits the parked jobs again (nodes or accounts changed since they were parked);
 * forgets those no longer pending. */
void srv__retry_parked(sctx_t *c)
{
    srv_t *s = c->s;
    if (c->retry_parked && c->nparked) {
        c->retry_parked = false;
        pthread_mutex_lock(&s->mu);
        size_t n = c->nparked;
        uint64_t *ids = fg_xmalloc(n * sizeof *ids);
        memcpy(ids, c->parked, n * sizeof *ids);
        for (size_t i = 0; i < n; i++) {
            srv_job_t *j = srv__job(c, ids[i]);
            if (j && j->state == FG_JOB_PENDING && !j->in_core)
                srv__core_submit(c, j, false);
            else
                srv__unpark(c, ids[i]);
        }
        pthread_mutex_unlock(&s->mu);
        free(ids);
    }
    c->retry_parked = false;
}

/* MSG_CANCEL: a pending job ends CANCELLED at once; a running one is asked to stop
 * (its attempt ends when the agents report the ranks' exits). */
void srv__do_cancel(sctx_t *c, srv_msg_t *m)
{
    srv_t *s = c->s;
    pthread_mutex_lock(&s->mu);
    srv_job_t *j = srv__job(c, m->job);
    if (!j) {
        srv__sync_error(m->sync, 404, "not_found", "no job %llu", (unsigned long long)m->job);
    } else if (j->state == FG_JOB_PENDING) {
        if (j->in_core) {
            int rc = fg_sched_cancel(c->core, (fg_job_id_t)j->r.id, c->now);
            if (rc)
                fg_log(FG_LOG_WARN, "scheduler: cancel of pending job %llu: %s",
                       (unsigned long long)m->job, fg_strerror(rc));
            j->in_core = false;
        }
        srv__unpark(c, m->job);
        srv__set_state(s, j, FG_JOB_CANCELLED);
        srv__set_reason(j, 0, NULL);
        j->r.end_time = c->now;
        j->r.cancel_requested = true;
        srv__add_event(c, "job", m->job, "PENDING", "CANCELLED", "cancelled", NULL);
        srv__mark_dirty(c, j);
        srv__sync_ok(m->sync, 200, NULL);
    } else if (j->state == FG_JOB_RUNNING) {
        if (!j->r.cancel_requested) {
            j->r.cancel_requested = true;
            srv__mark_dirty(c, j);
            srv__stop_ranks(c, j, "cancel", -1);
        }
        srv__sync_ok(m->sync, 200, NULL);
    } else {
        srv__sync_error(m->sync, 409, "conflict", "job %llu has already ended (%s)",
                        (unsigned long long)m->job, fg_job_state_name(j->state));
    }
    pthread_mutex_unlock(&s->mu);
    srv__add_sync(c, m->sync);
}
