/*
 * sched_attempts.c - an attempt's life after its start: the agents' reports (a rank
 * started, a rank exited), stopping ranks, and the end of the attempt.
 *
 * Each report is fenced first (fence): it must name the job's current attempt, its
 * epoch, a rank of it, and the node that holds that rank; a stale report (an earlier
 * attempt, a controller restart's older epoch) changes nothing and gets 409. An attempt
 * ends when its last rank has ended: its cause is the first rank's failure, or
 * "completed" when none failed. The core then says whether the job is requeued (a
 * retry, a preemption, a lost node) or ends for good, and how many GPU-seconds it used.
 * Example: a 2-node job; rank 1 exits with code 3, so rank 0 is sent "stop
 * (peer_failed)"; when rank 0's exit arrives the attempt ends "failed" with exit code 3,
 * and the job is requeued (PENDING, reason "failed_retry") if it has retries left.
 */
#include "server/sched_int.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The `stop` message for rank `rank` of j's current attempt. */
json_t *srv__stop_msg(const srv_job_t *j, int rank, const char *why)
{
    char id[24];
    snprintf(id, sizeof id, "%lld", (long long)j->r.id);
    return json_pack("{s:s,s:s,s:i,s:I,s:i,s:s}", "type", "stop", "job_id", id, "attempt",
                     j->r.attempts, "epoch", (json_int_t)j->epoch, "rank", rank, "why", why);
}

/* Sends `stop` to every rank of j's attempt that has not ended (mu held). */
void srv__stop_ranks(sctx_t *c, srv_job_t *j, const char *why, int except_rank)
{
    for (int k = 0; k < j->nranks; k++)
        if (!j->ranks[k].ended && k != except_rank)
            srv__send_to(c, j->ranks[k].node, srv__stop_msg(j, k, why));
}

/* The reason shown for a job requeued after an attempt that ended with `cause`. */
static const char *requeue_reason(fg_end_cause_t cause)
{
    switch (cause) {
    case FG_END_PREEMPTED:
        return "preempted";
    case FG_END_NODE_LOST:
        return "node_lost";
    case FG_END_SETUP_FAILED:
        return "user_setup_failed";
    case FG_END_NOT_STARTED:
        return "not_started";
    default:
        return "failed_retry";
    }
}

/* When j's attempt ended: the latest rank end the agents reported (unless in the
 * future), else now; always after the attempt's start. */
static int64_t attempt_end_ms(const srv_job_t *j)
{
    int64_t end_ms = 0;
    for (int k = 0; k < j->nranks; k++)
        if (j->ranks[k].ended && j->ranks[k].end_ms > end_ms)
            end_ms = j->ranks[k].end_ms;
    int64_t now_ms = srv_now_ms();
    int64_t t = end_ms > 0 && end_ms <= now_ms ? end_ms : now_ms;
    return t <= j->cur.start_time_ms ? j->cur.start_time_ms + 1 : t;
}

/* The run time j's attempt kept: from its start to the gang's last checkpoint in it
 * (the earliest rank's, as billing takes it), 0 without one. */
static int64_t attempt_kept_s(const srv_job_t *j)
{
    int64_t ck = 0;
    for (int k = 0; k < j->nranks; k++)
        if (j->ranks[k].last_checkpoint_ms > 0 && (!ck || j->ranks[k].last_checkpoint_ms < ck))
            ck = j->ranks[k].last_checkpoint_ms;
    if (ck <= j->cur.start_time_ms || ck > j->cur.end_time_ms)
        return 0;
    return (ck - j->cur.start_time_ms) / 1000;
}

/* Closes j's attempt record (queued for the commit), charges its GPU-seconds and
 * forgets its ranks. */
static void close_attempt(sctx_t *c, srv_job_t *j, fg_end_cause_t cause, bool has_exit,
                          int32_t exit_code, int32_t signal, int64_t gpu_seconds)
{
    j->cur.end_time_ms = attempt_end_ms(j);
    j->cur.end_cause = cause;
    j->cur.has_exit_code = has_exit;
    j->cur.exit_code = exit_code;
    j->cur.signal = signal;
    j->kept_s += attempt_kept_s(j);
    srv__add_attempt(c, &j->cur, OP_ATTEMPT_UPDATE);
    srv__bill_attempt_end(c, j); /* its ledger rows, in the same commit */
    j->r.attained_gpu_s += gpu_seconds;
    j->r.has_exit_code = has_exit;
    j->r.exit_code = exit_code;
    free(j->ranks);
    j->ranks = NULL;
    j->nranks = 0;
    j->stop_sent = false;
}

/* The core requeued j after its attempt ended with `cause`: PENDING again, with the
 * core's retry count and backoff. */
static void requeue(sctx_t *c, srv_job_t *j, fg_end_cause_t cause, const char *node)
{
    fg_job_info_t info;
    if (fg_sched_job_info(c->core, (fg_job_id_t)j->r.id, &info) == 0) {
        j->r.retries_used = info.retries_used;
        j->r.eligible_time = info.eligible_time;
    }
    j->r.cancel_requested = false;
    if ((int)cause >= 0 && (int)cause <= FG_END_CAUSE_MAX)
        atomic_fetch_add(&c->s->m.requeues[cause], 1);
    srv__set_state(c->s, j, FG_JOB_PENDING);
    const char *why = requeue_reason(cause);
    srv__set_reason(j, FG_REASON_RETRY_BACKOFF, why);
    srv__add_event(c, "job", (uint64_t)j->r.id, "RUNNING", "PENDING", why, node);
}

/* j ended for good in state st after its attempt ended with `cause`. */
static void finish(sctx_t *c, srv_job_t *j, fg_end_cause_t cause, fg_job_state_t st,
                   const char *node)
{
    j->in_core = false;
    j->r.end_time = c->now;
    srv__set_state(c->s, j, st);
    srv__set_reason(j, 0, NULL);
    srv__est_job_ended(c, j);
    srv__add_event(c, "job", (uint64_t)j->r.id, "RUNNING", fg_job_state_name(st),
                   fg_end_cause_name(cause), node);
}

/* Ends the current attempt of running job j with `cause` (mu held). */
void srv__end_attempt(sctx_t *c, srv_job_t *j, fg_end_cause_t cause, bool has_exit,
                      int32_t exit_code, int32_t signal)
{
    assert(j->state == FG_JOB_RUNNING && j->in_core);
    fg_attempt_t rec;
    int rc =
        fg_sched_attempt_ended(c->core, (fg_job_id_t)j->r.id, j->r.attempts, cause, c->now, &rec);
    if (rc) {
        fg_log(FG_LOG_ERROR, "scheduler: ending attempt %d of job %lld: %s", j->r.attempts,
               (long long)j->r.id, fg_strerror(rc));
        return;
    }
    atomic_fetch_add(&c->s->m.ended, 1);
    /* the event names the node of rank 0 (the ranks are gone after the close) */
    char node[FG_NAME_MAX + 1] = {0};
    if (j->nranks)
        snprintf(node, sizeof node, "%s", j->ranks[0].node);
    close_attempt(c, j, cause, has_exit, exit_code, signal, rec.gpu_seconds);
    if (rec.new_state == FG_JOB_PENDING)
        requeue(c, j, cause, node[0] ? node : NULL);
    else
        finish(c, j, cause, rec.new_state, node[0] ? node : NULL);
    srv__mark_dirty(c, j);
}

/* Fencing for an agent report: the job's current attempt, epoch, rank and node. */
static srv_job_t *fence(sctx_t *c, srv_msg_t *m)
{
    srv_job_t *j = srv__job(c, m->job);
    if (!j) {
        srv__sync_error(m->sync, 404, "not_found", "no job %llu", (unsigned long long)m->job);
        return NULL;
    }
    if (j->state == FG_JOB_RUNNING && m->attempt == j->r.attempts && m->rank >= 0 &&
        m->rank < j->nranks && strcmp(j->ranks[m->rank].node, m->node)) {
        /* the reporting node (its credential's) does not hold this rank */
        srv__sync_error(m->sync, 403, "forbidden",
                        "rank %d of attempt %d of job %llu is not assigned to node %s", m->rank,
                        m->attempt, (unsigned long long)m->job, m->node);
        return NULL;
    }
    if (j->state != FG_JOB_RUNNING || m->attempt != j->r.attempts || m->epoch != j->epoch ||
        m->rank < 0 || m->rank >= j->nranks || strcmp(j->ranks[m->rank].node, m->node)) {
        srv__sync_error(m->sync, 409, "conflict",
                        "stale report: job %llu attempt %d epoch %lld rank %d on %s is not a live "
                        "attempt rank",
                        (unsigned long long)m->job, m->attempt, (long long)m->epoch, m->rank,
                        m->node);
        return NULL;
    }
    if (j->ranks[m->rank].ended) {
        srv__sync_error(m->sync, 409, "conflict", "rank %d of attempt %d already ended", m->rank,
                        m->attempt);
        return NULL;
    }
    return j;
}

/* Applies a report that passed the fence to rank m->rank of j (mu held). */
typedef void report_fn(sctx_t *c, srv_job_t *j, srv_msg_t *m);

/* Fences report m, applies it with apply if it passes, and answers it: after the
 * commit, or with its batch (m->batched: the batch's caller answers). */
static void apply_report(sctx_t *c, srv_msg_t *m, report_fn *apply)
{
    srv_t *s = c->s;
    pthread_mutex_lock(&s->mu);
    srv_job_t *j = fence(c, m);
    if (j) {
        apply(c, j, m);
        srv__sync_ok(m->sync, 200, json_object());
    }
    pthread_mutex_unlock(&s->mu);
    if (!m->batched)
        srv__add_sync(c, m->sync);
}

/* A rank started; the attempt starts with its earliest rank. */
static void rank_started(sctx_t *c, srv_job_t *j, srv_msg_t *m)
{
    srv_rank_t *rk = &j->ranks[m->rank];
    if (rk->started)
        return;
    rk->started = true;
    rk->start_ms = m->start_ms ? m->start_ms : srv_now_ms();
    /* (once charged, the start is the origin of the attempt's charge curve: it stays) */
    if (rk->start_ms < j->cur.start_time_ms && !j->charged_to_ms) {
        j->cur.start_time_ms = rk->start_ms;
        srv__add_attempt(c, &j->cur, OP_ATTEMPT_UPDATE);
    }
}

/* MSG_STARTED */
void srv__do_started(sctx_t *c, srv_msg_t *m)
{
    apply_report(c, m, rank_started);
}

/* How an attempt whose ranks have all ended ended. */
typedef struct outcome {
    fg_end_cause_t cause;
    bool has_exit;
    int32_t code, sig;
} outcome_t;

/* The outcome of j's attempt once all its ranks have ended (false while one runs):
 * the first failed rank's cause, exit code and signal, or "completed" with rank 0's
 * exit code; "user_setup_failed" (not charged) if any rank could not set up its Unix
 * identity, whatever its peers reported after their stop. */
static bool attempt_outcome(const srv_job_t *j, outcome_t *o)
{
    *o = (outcome_t){.cause = FG_END_COMPLETED};
    for (int k = 0; k < j->nranks; k++) {
        const srv_rank_t *rk = &j->ranks[k];
        if (!rk->ended)
            return false;
        if (o->cause == FG_END_COMPLETED && rk->end_cause != FG_END_COMPLETED)
            *o = (outcome_t){(fg_end_cause_t)rk->end_cause, rk->has_exit, rk->exit_code,
                             rk->has_signal ? rk->signal : 0};
    }
    for (int k = 0; k < j->nranks; k++)
        if (j->ranks[k].end_cause == FG_END_SETUP_FAILED)
            *o = (outcome_t){.cause = FG_END_SETUP_FAILED};
    if (o->cause == FG_END_COMPLETED) {
        o->has_exit = j->ranks[0].has_exit;
        o->code = j->ranks[0].exit_code;
    }
    return true;
}

/* A rank ended; its peers are stopped if it failed, and the attempt ends with its
 * last rank. */
static void rank_exited(sctx_t *c, srv_job_t *j, srv_msg_t *m)
{
    srv_rank_t *rk = &j->ranks[m->rank];
    rk->ended = true;
    rk->end_cause = m->cause;
    rk->has_exit = m->has_exit;
    rk->exit_code = m->exit_code;
    rk->has_signal = m->has_signal;
    rk->signal = m->signal;
    rk->end_ms = m->end_ms;
    rk->last_checkpoint_ms = m->last_checkpoint_ms;
    if (m->cause != FG_END_COMPLETED)
        srv__stop_ranks(c, j, "peer_failed", m->rank);
    outcome_t o;
    if (attempt_outcome(j, &o))
        srv__end_attempt(c, j, o.cause, o.has_exit, o.code, o.sig);
}

/* MSG_EXITED */
void srv__do_exited(sctx_t *c, srv_msg_t *m)
{
    apply_report(c, m, rank_exited);
}

/*
 * Several started/exited reports of one request (POST /v1/agent/reports): each entry is
 * fenced and applied exactly as if it had come alone, in request order, in this
 * iteration (one commit for all of them); the request is answered after the commit with
 * one result per entry. A refused entry (stale, unknown job) changes nothing.
 */
void srv__do_reports(sctx_t *c, srv_msg_t *m)
{
    json_t *results = json_array();
    for (size_t i = 0; i < m->nslots; i++) {
        srv_report_slot_t *sl = &m->slots[i];
        if (sl->m) {
            srv_sync_t y;
            memset(&y, 0, sizeof y); /* only its answer fields are used */
            sl->m->sync = &y;
            sl->m->batched = true;
            if (sl->m->kind == MSG_STARTED)
                srv__do_started(c, sl->m);
            else
                srv__do_exited(c, sl->m);
            sl->m->sync = NULL;
            if (y.reply)
                json_decref(y.reply);
            sl->status = y.status ? y.status : 200;
            if (sl->status >= 400)
                sl->error = json_pack("{s:s,s:s}", "code", y.code, "message", y.msg);
        }
        json_t *o = json_pack("{s:i}", "status", sl->status);
        if (sl->error)
            json_object_set(o, "error", sl->error);
        json_array_append_new(results, o);
    }
    srv__sync_ok(m->sync, 200, json_pack("{s:o}", "results", results));
    srv__add_sync(c, m->sync);
}
