/*
 * sched.c - the scheduler thread: the only owner of the core (fg_sched_t).
 *
 * HTTP threads push messages (submit, cancel, agent reports, registrations, drains,
 * account changes) into an inbox and signal. The thread wakes, takes EVERY queued
 * message (events that arrive together are coalesced into one pass), applies them to
 * the core, runs one pass, and makes the outcome durable in ONE store batch: job
 * updates, attempt records, events, node states. Only after that commit does it queue
 * start/stop messages for the agents and answer waiting callers, so no job starts
 * that the store does not know is running. It also wakes on a timer (1 s, or sooner
 * for the core's next_wake) to check heartbeats, controller-side time limits, save
 * fair-share usage (every 10 s and at shutdown) and refresh pending reasons.
 *
 * In-memory job records are changed by this thread only (under srv->mu), so the store
 * writer may read them during the commit while this thread waits for it.
 */
#include "server/server.h"

#include "common/log.h"
#include "common/xalloc.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

/* ------------------------------------------------------------------ sync calls */

void srv_sync_init(srv_sync_t *y)
{
    memset(y, 0, sizeof *y);
    pthread_mutex_init(&y->mu, NULL);
    pthread_cond_init(&y->cv, NULL);
}

void srv_sync_wait(srv_sync_t *y)
{
    pthread_mutex_lock(&y->mu);
    while (!y->done)
        pthread_cond_wait(&y->cv, &y->mu);
    pthread_mutex_unlock(&y->mu);
}

void srv_sync_destroy(srv_sync_t *y)
{
    pthread_mutex_destroy(&y->mu);
    pthread_cond_destroy(&y->cv);
    if (y->reply)
        json_decref(y->reply);
}

static void sync_done(srv_sync_t *y)
{
    if (y->conn) {
        /* an asynchronous caller: y belongs to its request, which may run (and finish)
         * as soon as it is resumed; touch nothing of y after that */
        srv_t *s = y->srv;
        y->done = true;
        hd_resume(y->conn);
        atomic_fetch_sub(&s->async_inflight, 1);
        return;
    }
    pthread_mutex_lock(&y->mu);
    y->done = true;
    pthread_cond_signal(&y->cv);
    pthread_mutex_unlock(&y->mu);
}

static void sync_error(srv_sync_t *y, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void sync_error(srv_sync_t *y, int status, const char *code, const char *fmt, ...)
{
    if (!y)
        return;
    y->status = status;
    snprintf(y->code, sizeof y->code, "%s", code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(y->msg, sizeof y->msg, fmt, ap);
    va_end(ap);
}

static void sync_ok(srv_sync_t *y, int status, json_t *reply)
{
    if (!y) {
        json_decref(reply);
        return;
    }
    y->status = status;
    if (y->reply)
        json_decref(y->reply);
    y->reply = reply;
}

srv_msg_t *srv_msg_new(int kind)
{
    srv_msg_t *m = fg_xcalloc(1, sizeof *m);
    m->kind = kind;
    return m;
}

void srv_msg_free(srv_msg_t *m)
{
    if (!m)
        return;
    if (m->json)
        json_decref(m->json);
    for (size_t i = 0; i < m->nslots; i++) {
        srv_msg_free(m->slots[i].m);
        json_decref(m->slots[i].error);
    }
    free(m->slots);
    free(m);
}

void srv_sched_post(srv_t *s, srv_msg_t *m)
{
    pthread_mutex_lock(&s->sched_mu);
    m->next = NULL;
    bool was_empty = s->inbox_head == NULL;
    if (s->inbox_tail)
        s->inbox_tail->next = m;
    else
        s->inbox_head = m;
    s->inbox_tail = m;
    /* one wake-up per batch: whoever made the inbox non-empty signalled already */
    if (was_empty)
        pthread_cond_signal(&s->sched_cv);
    pthread_mutex_unlock(&s->sched_mu);
}

void srv_sched_wait(srv_t *s, srv_msg_t *m, srv_sync_t *y)
{
    srv_sync_init(y);
    m->sync = y;
    srv_sched_post(s, m);
    srv_sync_wait(y);
}

static void sync_free(void *p)
{
    srv_sync_t *y = p;
    srv_sync_destroy(y);
    free(y);
}

/* Second half of an asynchronous call: the scheduler has answered. */
static int sched_resume(srv_req_t *r)
{
    srv_t *s = r->srv;
    srv_sync_t *y = r->ctx;
    if (y->status < 400 && y->render_job) {
        pthread_mutex_lock(&s->mu);
        srv_job_t *j = srv_job_get(s, y->render_job);
        if (j && !srv_job_published(s, j)) { /* changed again since the call's commit */
            pthread_mutex_unlock(&s->mu);
            return srv_park_unpublished(r); /* (runs this again after the next commit) */
        }
        json_t *o = j ? srv_job_json(s, j, true) : json_object();
        pthread_mutex_unlock(&s->mu);
        return srv_reply_json(r, 200, o);
    }
    if (y->reply) {
        json_t *o = y->reply;
        y->reply = NULL;
        return srv_reply_json(r, (unsigned)(y->status ? y->status : 200), o);
    }
    if (y->status >= 400)
        return srv_reply_error(r, (unsigned)y->status, y->code, NULL, "%s", y->msg);
    return srv_reply_json(r, 200, json_object());
}

int srv_sched_call_job(srv_req_t *r, srv_msg_t *m, uint64_t render_job)
{
    srv_t *s = r->srv;
    atomic_fetch_add(&s->async_inflight, 1);
    if (atomic_load(&s->stopping)) {
        atomic_fetch_sub(&s->async_inflight, 1);
        srv_msg_free(m);
        return srv_reply_error(r, 503, "unavailable", NULL, "the server is shutting down");
    }
    srv_sync_t *y = fg_xmalloc(sizeof *y);
    srv_sync_init(y);
    y->srv = s;
    y->conn = r->conn;
    y->render_job = render_job;
    m->sync = y;
    r->ctx = y;
    r->ctx_free = sync_free;
    r->resume = sched_resume;
    srv_park_request(r);
    srv_sched_post(s, m);
    return SRV_YES;
}

int srv_sched_call(srv_req_t *r, srv_msg_t *m)
{
    return srv_sched_call_job(r, m, 0);
}

/* ------------------------------------------------------------------ iteration state */

typedef struct out_msg {
    char node[FG_NAME_MAX + 1];
    json_t *msg;
} out_msg_t;

typedef struct sctx {
    srv_t *s;
    fg_sched_t *core;
    fg_decisions_t d;
    uint64_t *parked; /* jobs the core refused for now (no fitting node, quota) */
    size_t nparked, parked_cap;
    bool retry_parked;
    /* the iteration's durable batch */
    uint64_t *dirty;
    size_t ndirty, dirty_cap;
    fg_store_event_t *evs;
    size_t nevs, evs_cap;
    fg_store_attempt_t *atts; /* copies */
    int *att_kind;            /* OP_ATTEMPT_INSERT / OP_ATTEMPT_UPDATE */
    size_t natts, atts_cap, att_kind_cap;
    fg_store_usage_t *usage;
    size_t nusage, usage_cap;
    char **node_states; /* pairs name, state */
    size_t nnode_states, node_states_cap;
    fg_store_node_t *node_upserts;
    size_t nnode_upserts, node_upserts_cap;
    out_msg_t *outs;
    size_t nouts, outs_cap;
    srv_sync_t **syncs;
    size_t nsyncs, syncs_cap;
    int64_t last_usage_save, last_refresh_ms, last_session_gc;
    bool changed; /* something happened since the last refresh */
    int64_t now;
} sctx_t;

static srv_job_t *job(sctx_t *c, uint64_t id)
{
    return srv_job_get(c->s, id);
}

/* The iteration now open: its changes are shown once commit() has made them durable.
 * Every change to a job or node is made with mu held, so readers that wait for
 * pub_iter (srv_job_published) never show one before its commit. */
static void mark_changed(srv_t *s)
{
    s->dirty_iter = s->pub_iter + 1;
}

static void mark_dirty(sctx_t *c, srv_job_t *j)
{
    mark_changed(c->s);
    j->dirty_iter = c->s->pub_iter + 1;
    for (size_t i = 0; i < c->ndirty; i++)
        if (c->dirty[i] == (uint64_t)j->r.id)
            return;
    c->dirty = fg_xgrow(c->dirty, &c->dirty_cap, c->ndirty + 1, sizeof *c->dirty);
    c->dirty[c->ndirty++] = (uint64_t)j->r.id;
}

static void add_event(sctx_t *c, const char *kind, uint64_t job_id, const char *from,
                      const char *to, const char *reason, const char *node)
{
    c->evs = fg_xgrow(c->evs, &c->evs_cap, c->nevs + 1, sizeof *c->evs);
    fg_store_event_t *e = &c->evs[c->nevs++];
    memset(e, 0, sizeof *e);
    e->time = c->now;
    e->kind = fg_xstrdup(kind);
    e->job_id = (int64_t)job_id;
    e->from_state = srv_strdup0(from);
    e->to_state = srv_strdup0(to);
    e->reason = srv_strdup0(reason);
    e->node = srv_strdup0(node);
}

static void add_attempt(sctx_t *c, const fg_store_attempt_t *a, int kind)
{
    c->atts = fg_xgrow(c->atts, &c->atts_cap, c->natts + 1, sizeof *c->atts);
    c->att_kind = fg_xgrow(c->att_kind, &c->att_kind_cap, c->natts + 1, sizeof *c->att_kind);
    fg_store_attempt_t *x = &c->atts[c->natts];
    *x = *a;
    x->nodes_json = srv_strdup0(a->nodes_json);
    x->gpu_uuids_json = srv_strdup0(a->gpu_uuids_json);
    c->att_kind[c->natts++] = kind;
}

static void add_node_state(sctx_t *c, const char *name, const char *state)
{
    mark_changed(c->s);
    c->node_states =
        fg_xgrow(c->node_states, &c->node_states_cap, c->nnode_states + 2, sizeof *c->node_states);
    c->node_states[c->nnode_states++] = fg_xstrdup(name);
    c->node_states[c->nnode_states++] = fg_xstrdup(state);
}

static void send_to(sctx_t *c, const char *node, json_t *msg)
{
    c->outs = fg_xgrow(c->outs, &c->outs_cap, c->nouts + 1, sizeof *c->outs);
    snprintf(c->outs[c->nouts].node, sizeof c->outs[c->nouts].node, "%s", node);
    c->outs[c->nouts++].msg = msg;
}

static void add_sync(sctx_t *c, srv_sync_t *y)
{
    if (!y)
        return;
    c->syncs = fg_xgrow(c->syncs, &c->syncs_cap, c->nsyncs + 1, sizeof *c->syncs);
    c->syncs[c->nsyncs++] = y;
}

/* Sets a job's state keeping the per-state and per-user counters right (mu held). */
static void set_state(srv_t *s, srv_job_t *j, fg_job_state_t st)
{
    srv_job_count_state(s, j, -1);
    j->state = st;
    j->r.state = st;
    srv_job_count_state(s, j, +1);
}

static void set_reason(srv_job_t *j, int code, const char *text)
{
    j->r.reason_code = code;
    if (text && j->r.reason && !strcmp(text, j->r.reason))
        return;
    free(j->r.reason);
    j->r.reason = srv_strdup0(text);
}

/* ------------------------------------------------------------------ commit */

/* Makes the iteration durable, then publishes it: events into memory, messages into
 * agent outboxes, answers to waiting callers. */
static void commit(sctx_t *c)
{
    srv_t *s = c->s;
    srv_batch_t b = {0};
    for (size_t i = 0; i < c->natts; i++)
        srv_batch_add(&b, c->att_kind[i], &c->atts[i]);
    for (size_t i = 0; i < c->ndirty; i++)
        srv_batch_add(&b, OP_JOB_UPDATE, &job(c, c->dirty[i])->r);
    for (size_t i = 0; i < c->nnode_upserts; i++)
        srv_batch_add(&b, OP_NODE_UPSERT, &c->node_upserts[i]);
    for (size_t i = 0; i + 1 < c->nnode_states; i += 2) {
        srv_op_t *o = srv_batch_add(&b, OP_NODE_STATE, NULL);
        o->s1 = c->node_states[i];
        o->s2 = c->node_states[i + 1];
    }
    for (size_t i = 0; i < c->nusage; i++)
        srv_batch_add(&b, OP_USAGE_SET, &c->usage[i]);
    size_t ev0 = b.n;
    for (size_t i = 0; i < c->nevs; i++)
        srv_batch_add(&b, OP_EVENT, &c->evs[i]);
    int rc = 0;
    if (b.n) {
        for (int tries = 0; tries < 50; tries++) {
            rc = srv_batch_commit(s, &b);
            if (rc != FG_STORE_EIO)
                break;
            /* a failed commit stored nothing: retry (the disk may come back) */
            fg_log(FG_LOG_ERROR, "scheduler: commit failed (%s), retrying", fg_store_strerror(rc));
            struct timespec ts = {0, 100 * 1000000L};
            nanosleep(&ts, NULL);
        }
        if (rc && rc != FG_STORE_EIO && rc != FG_STORE_ECLOSED) {
            /* One operation was refused (a bug or an inconsistency): do not lose the rest
             * of the iteration with it. Commit each operation alone; keep going. */
            fg_log(FG_LOG_ERROR,
                   "scheduler: commit of %zu changes refused at op %d (kind %d): %s;"
                   " committing them one by one",
                   b.n, b.failed_op, b.failed_op >= 0 ? b.ops[b.failed_op].kind : -1,
                   fg_store_strerror(rc));
            for (size_t i = 0; i < b.n; i++) {
                srv_batch_t one = {0};
                srv_op_t *o = srv_batch_add(&one, b.ops[i].kind, b.ops[i].rec);
                o->i1 = b.ops[i].i1;
                o->s1 = b.ops[i].s1;
                o->s2 = b.ops[i].s2;
                o->d1 = b.ops[i].d1;
                int r1 = srv_batch_commit(s, &one);
                b.ops[i].out = r1 ? 0 : o->out;
                if (r1)
                    fg_log(FG_LOG_ERROR, "scheduler: op %zu (kind %d) refused: %s", i,
                           b.ops[i].kind, fg_store_strerror(r1));
                srv_batch_free(&one);
            }
            rc = 0;
        } else if (rc) {
            fg_log(FG_LOG_ERROR, "scheduler: commit of %zu changes failed: %s", b.n,
                   fg_store_strerror(rc));
        }
    }
    pthread_mutex_lock(&s->mu);
    /* the iteration is durable (or its commit failed for good, logged above): its
     * changes may be shown now */
    s->pub_iter++;
    bool published = s->dirty_iter == s->pub_iter; /* this iteration changed something */
    for (size_t i = 0; i < c->nevs; i++) {
        c->evs[i].seq = rc ? 0 : b.ops[ev0 + i].out;
        srv_event_mem(s, &c->evs[i]);
    }
    for (size_t i = 0; i < c->nouts; i++) {
        srv_node_t *n = srv_node_by_name(s, c->outs[i].node);
        if (n)
            srv_node_send(s, n, c->outs[i].msg);
        else
            json_decref(c->outs[i].msg);
    }
    pthread_mutex_unlock(&s->mu);
    srv_batch_free(&b);
    bool any_out = c->nouts > 0, any_ev = c->nevs > 0;
    for (size_t i = 0; i < c->nsyncs; i++)
        sync_done(c->syncs[i]);
    /* reset */
    for (size_t i = 0; i < c->nevs; i++)
        fg_store_event_clear(&c->evs[i]);
    for (size_t i = 0; i < c->natts; i++)
        fg_store_attempt_clear(&c->atts[i]);
    for (size_t i = 0; i < c->nusage; i++)
        free(c->usage[i].account);
    for (size_t i = 0; i < c->nnode_states; i++)
        free(c->node_states[i]);
    for (size_t i = 0; i < c->nnode_upserts; i++) {
        free(c->node_upserts[i].name);
        free(c->node_upserts[i].state);
        free(c->node_upserts[i].gpus_json);
    }
    c->ndirty = c->nevs = c->natts = c->nusage = c->nnode_states = c->nouts = c->nsyncs = 0;
    c->nnode_upserts = 0;
    if (any_out)
        srv_wake_kind(s, WAIT_AGENT);
    if (any_ev)
        srv_wake_kind(s, WAIT_EVENTS);
    if (any_ev || published) /* (a stream waits for the job an event shows, too) */
        srv_wake_kind(s, WAIT_STREAM);
    if (published)
        srv_wake_kind(s, WAIT_PUBLISH);
}

/* ------------------------------------------------------------------ core view sync */

/* Copies accounts and memberships into the core (creates or updates). */
static void sync_accounts(sctx_t *c)
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

static void park(sctx_t *c, uint64_t id)
{
    for (size_t i = 0; i < c->nparked; i++)
        if (c->parked[i] == id)
            return;
    c->parked = fg_xgrow(c->parked, &c->parked_cap, c->nparked + 1, sizeof *c->parked);
    c->parked[c->nparked++] = id;
}

static void unpark_job(sctx_t *c, uint64_t id)
{
    for (size_t i = 0; i < c->nparked; i++)
        if (c->parked[i] == id) {
            c->parked[i] = c->parked[--c->nparked];
            return;
        }
}

static void fill_spec(srv_t *s, const srv_job_t *j, fg_job_spec_t *sp, char *user, size_t un)
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

/* Hands a pending job to the core; a job no node (or quota) can hold yet is parked
 * with its reason and retried when nodes or accounts change. mu held. */
static void core_submit(sctx_t *c, srv_job_t *j, bool restoring)
{
    srv_t *s = c->s;
    fg_job_spec_t sp;
    char user[80];
    fill_spec(s, j, &sp, user, sizeof user);
    /* restoring: the job was accepted before; no admission limit applies */
    int rc = restoring ? fg_sched_submit_restored(c->core, &sp, c->now)
                       : fg_sched_submit(c->core, &sp, c->now);
    if (rc == FG_ENOENT && !restoring) {
        pthread_mutex_unlock(&s->mu);
        sync_accounts(c);
        pthread_mutex_lock(&s->mu);
        rc = fg_sched_submit(c->core, &sp, c->now);
    }
    if (rc == 0) {
        j->in_core = true;
        unpark_job(c, (uint64_t)j->r.id);
        if (restoring && (j->r.attempts || j->r.retries_used || j->r.attained_gpu_s))
            fg_sched_restore_pending(c->core, sp.id, j->r.attempts, j->r.retries_used,
                                     j->r.attained_gpu_s, j->r.eligible_time);
        return;
    }
    char why[200];
    int code = FG_REASON_GPU_TYPE;
    if (rc == FG_EQUOTA) {
        code = FG_REASON_QUOTA;
        snprintf(why, sizeof why, "%d GPUs exceed the quota of account %s", j->r.gpus,
                 j->r.account);
    } else if (rc == FG_ENOFIT) {
        snprintf(why, sizeof why, "no node can hold %d GPUs%s%s yet", j->r.gpus,
                 j->r.gpu_type ? " of type " : "", j->r.gpu_type ? j->r.gpu_type : "");
    } else {
        code = FG_REASON_PRIORITY;
        snprintf(why, sizeof why, "not scheduled: %s", fg_strerror(rc));
        fg_log(FG_LOG_WARN, "scheduler: job %lld refused by the core: %s", (long long)j->r.id,
               fg_strerror(rc));
    }
    set_reason(j, code, why);
    park(c, (uint64_t)j->r.id);
}

/* ------------------------------------------------------------------ attempts */

static json_t *stop_msg(const srv_job_t *j, int rank, const char *why)
{
    char id[24];
    snprintf(id, sizeof id, "%lld", (long long)j->r.id);
    return json_pack("{s:s,s:s,s:i,s:I,s:i,s:s}", "type", "stop", "job_id", id, "attempt",
                     j->r.attempts, "epoch", (json_int_t)j->epoch, "rank", rank, "why", why);
}

/* Sends `stop` to every rank of j's attempt that has not ended (mu held). */
static void stop_ranks(sctx_t *c, srv_job_t *j, const char *why, int except_rank)
{
    for (int k = 0; k < j->nranks; k++)
        if (!j->ranks[k].ended && k != except_rank)
            send_to(c, j->ranks[k].node, stop_msg(j, k, why));
}

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

/* Ends the current attempt of running job j with `cause` (mu held). */
static void end_attempt(sctx_t *c, srv_job_t *j, fg_end_cause_t cause, bool has_exit,
                        int32_t exit_code, int32_t signal)
{
    srv_t *s = c->s;
    fg_attempt_t rec;
    int rc =
        fg_sched_attempt_ended(c->core, (fg_job_id_t)j->r.id, j->r.attempts, cause, c->now, &rec);
    if (rc) {
        fg_log(FG_LOG_ERROR, "scheduler: ending attempt %d of job %lld: %s", j->r.attempts,
               (long long)j->r.id, fg_strerror(rc));
        return;
    }
    atomic_fetch_add(&s->m.ended, 1);
    /* the attempt's end: the latest rank end the agents reported, else now */
    int64_t end_ms = 0;
    for (int k = 0; k < j->nranks; k++)
        if (j->ranks[k].ended && j->ranks[k].end_ms > end_ms)
            end_ms = j->ranks[k].end_ms;
    int64_t now_ms = srv_now_ms();
    j->cur.end_time_ms = end_ms > 0 && end_ms <= now_ms ? end_ms : now_ms;
    if (j->cur.end_time_ms <= j->cur.start_time_ms)
        j->cur.end_time_ms = j->cur.start_time_ms + 1;
    j->cur.end_cause = cause;
    j->cur.has_exit_code = has_exit;
    j->cur.exit_code = exit_code;
    j->cur.signal = signal;
    add_attempt(c, &j->cur, OP_ATTEMPT_UPDATE);
    j->r.attained_gpu_s += rec.gpu_seconds;
    j->r.has_exit_code = has_exit;
    j->r.exit_code = exit_code;
    const char *node = j->nranks ? j->ranks[0].node : NULL;
    char nodebuf[FG_NAME_MAX + 1] = {0};
    if (node)
        snprintf(nodebuf, sizeof nodebuf, "%s", node);
    free(j->ranks);
    j->ranks = NULL;
    j->nranks = 0;
    j->stop_sent = false;
    if (rec.new_state == FG_JOB_PENDING) {
        fg_job_info_t info;
        if (fg_sched_job_info(c->core, (fg_job_id_t)j->r.id, &info) == 0) {
            j->r.retries_used = info.retries_used;
            j->r.eligible_time = info.eligible_time;
        }
        j->r.cancel_requested = false;
        set_state(s, j, FG_JOB_PENDING);
        const char *why = requeue_reason(cause);
        set_reason(j, FG_REASON_RETRY_BACKOFF, why);
        add_event(c, "job", (uint64_t)j->r.id, "RUNNING", "PENDING", why,
                  nodebuf[0] ? nodebuf : NULL);
    } else {
        j->in_core = false;
        j->r.end_time = c->now;
        set_state(s, j, rec.new_state);
        set_reason(j, 0, NULL);
        add_event(c, "job", (uint64_t)j->r.id, "RUNNING", fg_job_state_name(rec.new_state),
                  fg_end_cause_name(cause), nodebuf[0] ? nodebuf : NULL);
    }
    mark_dirty(c, j);
}

/* ------------------------------------------------------------------ messages */

static void do_cancel(sctx_t *c, srv_msg_t *m)
{
    srv_t *s = c->s;
    pthread_mutex_lock(&s->mu);
    srv_job_t *j = job(c, m->job);
    if (!j) {
        sync_error(m->sync, 404, "not_found", "no job %llu", (unsigned long long)m->job);
    } else if (j->state == FG_JOB_PENDING) {
        if (j->in_core) {
            int rc = fg_sched_cancel(c->core, (fg_job_id_t)j->r.id, c->now);
            if (rc)
                fg_log(FG_LOG_WARN, "scheduler: cancel of pending job %llu: %s",
                       (unsigned long long)m->job, fg_strerror(rc));
            j->in_core = false;
        }
        unpark_job(c, m->job);
        set_state(s, j, FG_JOB_CANCELLED);
        set_reason(j, 0, NULL);
        j->r.end_time = c->now;
        j->r.cancel_requested = true;
        add_event(c, "job", m->job, "PENDING", "CANCELLED", "cancelled", NULL);
        mark_dirty(c, j);
        sync_ok(m->sync, 200, NULL);
    } else if (j->state == FG_JOB_RUNNING) {
        if (!j->r.cancel_requested) {
            j->r.cancel_requested = true;
            mark_dirty(c, j);
            stop_ranks(c, j, "cancel", -1);
        }
        sync_ok(m->sync, 200, NULL);
    } else {
        sync_error(m->sync, 409, "conflict", "job %llu has already ended (%s)",
                   (unsigned long long)m->job, fg_job_state_name(j->state));
    }
    pthread_mutex_unlock(&s->mu);
    add_sync(c, m->sync);
}

/* Fencing for an agent report: the job's current attempt, epoch, rank and node. */
static srv_job_t *fence(sctx_t *c, srv_msg_t *m)
{
    srv_job_t *j = job(c, m->job);
    if (!j) {
        sync_error(m->sync, 404, "not_found", "no job %llu", (unsigned long long)m->job);
        return NULL;
    }
    if (j->state == FG_JOB_RUNNING && m->attempt == j->r.attempts && m->rank >= 0 &&
        m->rank < j->nranks && strcmp(j->ranks[m->rank].node, m->node)) {
        /* the reporting node (its credential's) does not hold this rank */
        sync_error(m->sync, 403, "forbidden",
                   "rank %d of attempt %d of job %llu is not assigned to node %s", m->rank,
                   m->attempt, (unsigned long long)m->job, m->node);
        return NULL;
    }
    if (j->state != FG_JOB_RUNNING || m->attempt != j->r.attempts || m->epoch != j->epoch ||
        m->rank < 0 || m->rank >= j->nranks || strcmp(j->ranks[m->rank].node, m->node)) {
        sync_error(m->sync, 409, "conflict",
                   "stale report: job %llu attempt %d epoch %lld rank %d on %s is not a live "
                   "attempt rank",
                   (unsigned long long)m->job, m->attempt, (long long)m->epoch, m->rank, m->node);
        return NULL;
    }
    if (j->ranks[m->rank].ended) {
        sync_error(m->sync, 409, "conflict", "rank %d of attempt %d already ended", m->rank,
                   m->attempt);
        return NULL;
    }
    return j;
}

static void do_started(sctx_t *c, srv_msg_t *m)
{
    srv_t *s = c->s;
    pthread_mutex_lock(&s->mu);
    srv_job_t *j = fence(c, m);
    if (j) {
        srv_rank_t *rk = &j->ranks[m->rank];
        if (!rk->started) {
            rk->started = true;
            rk->start_ms = m->start_ms ? m->start_ms : srv_now_ms();
            /* the attempt starts with its earliest rank */
            if (rk->start_ms < j->cur.start_time_ms) {
                j->cur.start_time_ms = rk->start_ms;
                add_attempt(c, &j->cur, OP_ATTEMPT_UPDATE);
            }
        }
        sync_ok(m->sync, 200, json_object());
    }
    pthread_mutex_unlock(&s->mu);
    if (!m->batched)
        add_sync(c, m->sync);
}

static void do_exited(sctx_t *c, srv_msg_t *m)
{
    srv_t *s = c->s;
    pthread_mutex_lock(&s->mu);
    srv_job_t *j = fence(c, m);
    if (j) {
        srv_rank_t *rk = &j->ranks[m->rank];
        rk->ended = true;
        rk->end_cause = m->cause;
        rk->has_exit = m->has_exit;
        rk->exit_code = m->exit_code;
        rk->has_signal = m->has_signal;
        rk->signal = m->signal;
        rk->end_ms = m->end_ms;
        if (m->cause != FG_END_COMPLETED)
            stop_ranks(c, j, "peer_failed", m->rank);
        bool all = true;
        fg_end_cause_t cause = FG_END_COMPLETED;
        bool has_exit = false;
        int32_t code = 0, sig = 0;
        for (int k = 0; k < j->nranks; k++) {
            if (!j->ranks[k].ended) {
                all = false;
                break;
            }
            if (cause == FG_END_COMPLETED && j->ranks[k].end_cause != FG_END_COMPLETED) {
                cause = (fg_end_cause_t)j->ranks[k].end_cause;
                has_exit = j->ranks[k].has_exit;
                code = j->ranks[k].exit_code;
                sig = j->ranks[k].has_signal ? j->ranks[k].signal : 0;
            }
        }
        /* a rank that could not set up its Unix identity means the attempt never ran
         * as it should: not charged, whatever its peers reported after their stop */
        for (int k = 0; all && k < j->nranks; k++)
            if (j->ranks[k].end_cause == FG_END_SETUP_FAILED) {
                cause = FG_END_SETUP_FAILED;
                has_exit = false;
                code = sig = 0;
            }
        if (all) {
            if (cause == FG_END_COMPLETED) {
                has_exit = j->ranks[0].has_exit;
                code = j->ranks[0].exit_code;
            }
            end_attempt(c, j, cause, has_exit, code, sig);
        }
        sync_ok(m->sync, 200, json_object());
    }
    pthread_mutex_unlock(&s->mu);
    if (!m->batched)
        add_sync(c, m->sync);
}

/*
 * Several started/exited reports of one request (POST /v1/agent/reports): each entry is
 * fenced and applied exactly as if it had come alone, in request order, in this
 * iteration (one commit for all of them); the request is answered after the commit with
 * one result per entry. A refused entry (stale, unknown job) changes nothing.
 */
static void do_reports(sctx_t *c, srv_msg_t *m)
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
                do_started(c, sl->m);
            else
                do_exited(c, sl->m);
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
    sync_ok(m->sync, 200, json_pack("{s:o}", "results", results));
    add_sync(c, m->sync);
}

/* Declares node n down: ends every attempt with a rank there (node_lost). mu held. */
static void node_down(sctx_t *c, srv_node_t *n, const char *why)
{
    srv_t *s = c->s;
    fg_log(FG_LOG_WARN, "node %s is down (%s)", n->name, why);
    n->state = FG_NODE_DOWN;
    n->registered = false;
    if (n->core_index >= 0)
        fg_sched_node_set_state(c->core, n->core_index, FG_NODE_DOWN, c->now);
    add_node_state(c, n->name, "down");
    add_event(c, "node", 0, NULL, "down", why, n->name);
    json_array_clear(n->outbox);
    size_t nrun_ = 0;
    uint64_t *run_ = srv_running_snapshot(s, &nrun_);
    for (size_t ri_ = 0; ri_ < nrun_; ri_++) {
        uint64_t id = run_[ri_];
        srv_job_t *j = s->jobs[id - 1];
        if (!j || j->state != FG_JOB_RUNNING)
            continue;
        bool here = false;
        for (int k = 0; k < j->nranks; k++)
            if (!strcmp(j->ranks[k].node, n->name) && !j->ranks[k].ended)
                here = true;
        if (!here)
            continue;
        /* stop the ranks on other nodes, then end the attempt */
        for (int k = 0; k < j->nranks; k++)
            if (strcmp(j->ranks[k].node, n->name) && !j->ranks[k].ended)
                send_to(c, j->ranks[k].node, stop_msg(j, k, "peer_failed"));
        end_attempt(c, j, FG_END_NODE_LOST, false, 0, 0);
    }
    free(run_);
}

static const char *node_state_name(const srv_node_t *n, srv_t *s)
{
    if (n->state == FG_NODE_DOWN)
        return "down";
    if (n->state == FG_NODE_UP)
        return "up";
    /* draining: drained once nothing runs there */
    size_t nrun_ = 0;
    uint64_t *run_ = srv_running_snapshot(s, &nrun_);
    bool busy = false;
    for (size_t ri_ = 0; ri_ < nrun_ && !busy; ri_++) {
        uint64_t id = run_[ri_];
        srv_job_t *j = s->jobs[id - 1];
        if (!j || j->state != FG_JOB_RUNNING)
            continue;
        for (int k = 0; k < j->nranks; k++)
            if (!strcmp(j->ranks[k].node, n->name))
                busy = true;
    }
    free(run_);
    return busy ? "draining" : "drained";
}

static void do_register(sctx_t *c, srv_msg_t *m)
{
    srv_t *s = c->s;
    json_t *b = m->json;
    const char *name = srv_jstr(b, "node", "");
    pthread_mutex_lock(&s->mu);
    srv_node_t *n = srv_node_by_name(s, name);
    bool fresh = !n;
    if (!n) {
        n = fg_xcalloc(1, sizeof *n);
        snprintf(n->name, sizeof n->name, "%s", name);
        n->core_index = -1;
        n->outbox = json_array();
        n->next_msg_seq = 1;
        n->created_at = c->now;
        n->state = FG_NODE_UP;
        s->nodes = fg_xgrow(s->nodes, &s->nodes_cap, s->nnodes + 1, sizeof *s->nodes);
        s->nodes[s->nnodes++] = n;
    }
    snprintf(n->instance, sizeof n->instance, "%s", srv_jstr(b, "instance", ""));
    snprintf(n->addr, sizeof n->addr, "%s", srv_jstr(b, "addr", "127.0.0.1"));
    n->cpus = (int)json_integer_value(json_object_get(b, "cpus"));
    n->memory_mb = json_integer_value(json_object_get(b, "memory_mb"));
    /* An agent that does not say is not known to isolate its jobs. */
    n->isolated = json_is_true(json_object_get(b, "isolated"));
    const char *iso = srv_jstr(b, "isolation", "");
    snprintf(n->isolation, sizeof n->isolation, "%s", iso);
    if (strlen(iso) >= sizeof n->isolation) { /* cut: drop a partial UTF-8 character */
        size_t k = strlen(n->isolation);
        while (k > 0 && ((unsigned char)n->isolation[k - 1] & 0xC0) == 0x80)
            k--;
        if (k > 0 && ((unsigned char)n->isolation[k - 1] & 0x80))
            k--;
        n->isolation[k] = '\0';
    }
    const char *gtype = srv_jstr(b, "gpu_type", "");
    json_t *gpus = json_object_get(b, "gpus");
    int ng = (int)json_array_size(gpus);
    if (n->core_index < 0 || ng == n->ngpus) {
        n->ngpus = ng;
        for (int g = 0; g < ng; g++) {
            json_t *gj = json_array_get(gpus, (size_t)g);
            srv_gpu_t *G = &n->gpus[g];
            G->index = (int)json_integer_value(json_object_get(gj, "index"));
            snprintf(G->uuid, sizeof G->uuid, "%s", srv_jstr(gj, "uuid", ""));
            snprintf(G->type, sizeof G->type, "%s", srv_jstr(gj, "type", gtype));
            G->memory_mb = json_integer_value(json_object_get(gj, "memory_mb"));
            G->util_pct = -1;
            G->mem_used_mb = -1;
        }
    } else {
        fg_log(FG_LOG_WARN, "node %s re-registered with %d GPUs instead of %d; keeping %d", name,
               ng, n->ngpus, n->ngpus);
    }
    snprintf(n->gpu_type, sizeof n->gpu_type, "%s", gtype[0] ? gtype : n->gpus[0].type);
    n->last_heartbeat_ms = srv_now_ms();
    n->registered = true;
    fg_node_state_t want = n->state == FG_NODE_DRAINING ? FG_NODE_DRAINING : FG_NODE_UP;
    bool changed = n->state != want || fresh;
    n->state = want;
    if (n->core_index < 0) {
        int idx = fg_sched_node_add(c->core, n->name, n->ngpus, n->gpu_type, want);
        if (idx < 0) {
            fg_log(FG_LOG_ERROR, "node %s: the core refused it: %s", n->name, fg_strerror(idx));
        } else {
            n->core_index = idx;
        }
    } else {
        fg_sched_node_set_state(c->core, n->core_index, want, c->now);
    }
    c->retry_parked = true;
    /* persist the node */
    c->node_upserts = fg_xgrow(c->node_upserts, &c->node_upserts_cap, c->nnode_upserts + 1,
                               sizeof *c->node_upserts);
    fg_store_node_t *sn = &c->node_upserts[c->nnode_upserts++];
    mark_changed(s);
    memset(sn, 0, sizeof *sn);
    sn->name = fg_xstrdup(n->name);
    sn->state = fg_xstrdup(want == FG_NODE_UP ? "up" : "draining");
    sn->cpus = n->cpus;
    sn->memory_mb = n->memory_mb;
    json_t *ga = json_array();
    for (int g = 0; g < n->ngpus; g++)
        json_array_append_new(ga, json_pack("{s:i,s:s,s:s,s:I}", "index", n->gpus[g].index, "uuid",
                                            n->gpus[g].uuid, "type", n->gpus[g].type, "memory_mb",
                                            (json_int_t)n->gpus[g].memory_mb));
    sn->gpus_json = json_dumps(ga, JSON_COMPACT);
    json_decref(ga);
    sn->last_heartbeat = c->now;
    sn->created_at = n->created_at;
    if (changed)
        add_event(c, "node", 0, NULL, want == FG_NODE_UP ? "up" : "draining", "registered",
                  n->name);
    /* reconcile */
    json_array_clear(n->outbox);
    int64_t after = n->next_msg_seq - 1;
    json_t *running = json_object_get(b, "running");
    json_t *stops = json_array();
    size_t i;
    json_t *e;
    /* (4)(5)(6): entries the agent holds */
    json_array_foreach(running, i, e)
    {
        uint64_t jid = 0;
        srv_parse_job_id(srv_jstr(e, "job_id", ""), &jid);
        int att = (int)json_integer_value(json_object_get(e, "attempt"));
        int64_t ep = json_integer_value(json_object_get(e, "epoch"));
        int rank = (int)json_integer_value(json_object_get(e, "rank"));
        srv_job_t *j = jid ? job(c, jid) : NULL;
        bool live = j && j->state == FG_JOB_RUNNING && j->r.attempts == att &&
                    (j->epoch == ep || j->epoch == 0) && rank >= 0 && rank < j->nranks &&
                    !strcmp(j->ranks[rank].node, n->name) && !j->ranks[rank].ended;
        const char *why = !live ? "stale" : (j->r.cancel_requested ? "cancel" : NULL);
        if (why)
            json_array_append_new(stops,
                                  json_pack("{s:O,s:i,s:I,s:i,s:s}", "job_id",
                                            json_object_get(e, "job_id"), "attempt", att, "epoch",
                                            (json_int_t)ep, "rank", rank, "why", why));
        if (live) {
            j->ranks[rank].started = true;
            j->epoch = ep; /* adopted (restored attempts learn their epoch here) */
        }
    }
    /* (3): ranks assigned here that the agent does not hold are lost */
    size_t nrun_ = 0;
    uint64_t *run_ = srv_running_snapshot(s, &nrun_);
    for (size_t ri_ = 0; ri_ < nrun_; ri_++) {
        uint64_t id = run_[ri_];
        srv_job_t *j = s->jobs[id - 1];
        if (!j || j->state != FG_JOB_RUNNING)
            continue;
        for (int k = 0; k < j->nranks; k++) {
            if (strcmp(j->ranks[k].node, n->name) || j->ranks[k].ended)
                continue;
            bool held = false;
            json_array_foreach(running, i, e)
            {
                uint64_t jid = 0;
                srv_parse_job_id(srv_jstr(e, "job_id", ""), &jid);
                if (jid == id &&
                    json_integer_value(json_object_get(e, "attempt")) == j->r.attempts &&
                    json_integer_value(json_object_get(e, "rank")) == k &&
                    (json_integer_value(json_object_get(e, "epoch")) == j->epoch || j->epoch == 0))
                    held = true;
            }
            if (!held) {
                /* a rank never acknowledged (no started report, never held at a
                 * register) never reached this node: its start was committed but not
                 * delivered (controller crash, agent restart). It is requeued without
                 * using a retry; one that did start is lost with its node. */
                fg_end_cause_t why = j->ranks[k].started ? FG_END_NODE_LOST : FG_END_NOT_STARTED;
                /* a start that never arrives again and again (an agent that dies at each
                 * launch) stops being free: it is lost like any other */
                if (why == FG_END_NOT_STARTED && ++j->not_started > SRV_NOT_STARTED_MAX)
                    why = FG_END_NODE_LOST;
                for (int q = 0; q < j->nranks; q++)
                    if (q != k && !j->ranks[q].ended)
                        send_to(c, j->ranks[q].node, stop_msg(j, q, "peer_failed"));
                end_attempt(c, j, why, false, 0, 0);
                break;
            }
        }
    }
    free(run_);
    json_t *reply =
        json_pack("{s:I,s:s,s:i,s:I,s:o,s:b}", "epoch", (json_int_t)s->epoch, "node_state",
                  node_state_name(n, s), "heartbeat_interval_s", s->cfg.heartbeat_interval_s,
                  "after", (json_int_t)after, "stop", stops, "batch_reports", 1);
    pthread_mutex_unlock(&s->mu);
    sync_ok(m->sync, 200, reply);
    add_sync(c, m->sync);
}

static json_t *node_json_locked(srv_t *s, srv_node_t *n);

static void do_node_state(sctx_t *c, srv_msg_t *m)
{
    srv_t *s = c->s;
    pthread_mutex_lock(&s->mu);
    srv_node_t *n = srv_node_by_name(s, m->node);
    if (!n) {
        sync_error(m->sync, 404, "not_found", "no node '%s'", m->node);
    } else {
        bool drain = m->cause == 1;
        if (n->state != FG_NODE_DOWN) {
            fg_node_state_t st = drain ? FG_NODE_DRAINING : FG_NODE_UP;
            if (st != n->state) {
                n->state = st;
                if (n->core_index >= 0)
                    fg_sched_node_set_state(c->core, n->core_index, st, c->now);
                add_node_state(c, n->name, drain ? "draining" : "up");
                add_event(c, "node", 0, NULL, drain ? "draining" : "up", drain ? "drain" : "resume",
                          n->name);
                c->retry_parked = true;
            }
        } else if (!drain) {
            sync_error(m->sync, 409, "conflict",
                       "node '%s' is down; it comes back when its agent registers", m->node);
            goto done;
        } else {
            /* a down node marked for drain stays drained when it returns */
            n->state = FG_NODE_DOWN;
        }
        sync_ok(m->sync, 200, node_json_locked(s, n));
    }
done:
    pthread_mutex_unlock(&s->mu);
    add_sync(c, m->sync);
}

/* ------------------------------------------------------------------ the pass */

static void apply_starts(sctx_t *c)
{
    srv_t *s = c->s;
    fg_decisions_t *d = &c->d;
    if (!d->nstarts && !d->npreempts)
        return;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < d->nstarts; i++) {
        fg_start_t *st = &d->starts[i];
        srv_job_t *j = job(c, st->job);
        if (!j) {
            fg_log(FG_LOG_ERROR, "scheduler: the core started unknown job %llu",
                   (unsigned long long)st->job);
            continue;
        }
        atomic_fetch_add(&s->m.starts, 1);
        json_t *nodes = json_array(), *idx = json_array(), *uuids = json_array();
        free(j->ranks);
        j->nranks = st->alloc_n;
        j->ranks = fg_xcalloc((size_t)(st->alloc_n ? st->alloc_n : 1), sizeof *j->ranks);
        for (int k = 0; k < st->alloc_n; k++) {
            fg_alloc_t *al = &d->allocs[st->alloc_off + k];
            fg_node_info_t ni;
            fg_sched_node_info(c->core, al->node, &ni);
            srv_node_t *n = srv_node_by_name(s, ni.name);
            snprintf(j->ranks[k].node, sizeof j->ranks[k].node, "%s", ni.name);
            j->ranks[k].gpu_mask = al->gpu_mask;
            json_array_append_new(nodes, json_string(ni.name));
            json_t *ix = json_array();
            for (int g = 0; g < FG_MAX_NODE_GPUS; g++)
                if (al->gpu_mask & (1ULL << g)) {
                    json_array_append_new(ix, json_integer(g));
                    json_array_append_new(uuids,
                                          json_string(n && g < n->ngpus ? n->gpus[g].uuid : ""));
                }
            json_array_append_new(idx, ix);
        }
        free(j->r.nodes_json);
        free(j->r.gpu_indices_json);
        j->r.nodes_json = json_dumps(nodes, JSON_COMPACT);
        j->r.gpu_indices_json = json_dumps(idx, JSON_COMPACT);
        j->r.attempts = st->attempt;
        j->r.start_time = c->now;
        j->r.end_time = 0;
        j->r.has_exit_code = false;
        j->r.estimated_start = 0;
        j->epoch = s->epoch;
        j->stop_sent = false;
        set_state(s, j, FG_JOB_RUNNING);
        set_reason(j, 0, NULL);
        fg_store_attempt_clear(&j->cur);
        j->cur.job_id = j->r.id;
        j->cur.attempt = st->attempt;
        j->cur.nodes_json = srv_strdup0(j->r.nodes_json);
        j->cur.gpu_uuids_json = json_dumps(uuids, JSON_COMPACT);
        j->cur.start_time_ms = srv_now_ms();
        j->cur.end_cause = -1;
        add_attempt(c, &j->cur, OP_ATTEMPT_INSERT);
        mark_dirty(c, j);
        add_event(c, "job", (uint64_t)j->r.id, "PENDING", "RUNNING", "started", j->ranks[0].node);
        /* one start message per rank */
        srv_node_t *n0 = srv_node_by_name(s, j->ranks[0].node);
        int port = 29500;
        if (n0) {
            port = 29500 + (n0->master_port_next++ % 500);
        }
        json_t *cmd =
            j->r.command_json ? json_loads(j->r.command_json, JSON_DECODE_ANY, NULL) : json_array();
        json_t *env = j->r.env_json ? json_loads(j->r.env_json, 0, NULL) : json_object();
        srv_user_t *u = srv_user_by_id(s, j->r.user_id);
        char id[24];
        snprintf(id, sizeof id, "%lld", (long long)j->r.id);
        for (int k = 0; k < j->nranks; k++) {
            srv_node_t *n = srv_node_by_name(s, j->ranks[k].node);
            json_t *g = json_array(), *gu = json_array();
            for (int q = 0; q < FG_MAX_NODE_GPUS; q++)
                if (j->ranks[k].gpu_mask & (1ULL << q)) {
                    json_array_append_new(g, json_integer(q));
                    json_array_append_new(gu,
                                          json_string(n && q < n->ngpus ? n->gpus[q].uuid : ""));
                }
            json_t *msg = json_pack(
                "{s:s,s:s,s:i,s:I,s:i,s:i,s:s,s:i,s:s,s:s?,s:s,s:O,s:O,s:o,s:o,s:I,s:i,s:s}",
                "type", "start", "job_id", id, "attempt", j->r.attempts, "epoch",
                (json_int_t)j->epoch, "rank", k, "num_nodes", j->nranks, "master_addr",
                n0 ? n0->addr : "127.0.0.1", "master_port", port, "name",
                j->r.name ? j->r.name : "", "user", u ? u->r.username : NULL, "account",
                j->r.account, "command", cmd ? cmd : json_null(), "env", env ? env : json_object(),
                "gpus", g, "gpu_uuids", gu, "time_limit_s", (json_int_t)j->r.time_limit_s,
                "grace_s", 30, "priority", fg_prio_name((fg_prio_t)j->r.priority));
            if (j->r.model)
                json_object_set_new(msg, "model", json_string(j->r.model));
            if (j->r.dataset)
                json_object_set_new(msg, "dataset", json_string(j->r.dataset));
            if (j->r.cpus)
                json_object_set_new(msg, "cpus", json_integer(j->r.cpus));
            if (j->r.memory_mb)
                json_object_set_new(msg, "memory_mb", json_integer(j->r.memory_mb));
            send_to(c, j->ranks[k].node, msg);
        }
        json_decref(cmd);
        json_decref(env);
        json_decref(nodes);
        json_decref(idx);
        json_decref(uuids);
    }
    for (size_t i = 0; i < d->npreempts; i++) {
        fg_preempt_t *p = &d->preempts[i];
        srv_job_t *j = job(c, p->job);
        if (!j || j->state != FG_JOB_RUNNING || j->stop_sent)
            continue;
        atomic_fetch_add(&s->m.preemptions, 1);
        j->stop_sent = true;
        stop_ranks(c, j, "preempt", -1);
    }
    pthread_mutex_unlock(&s->mu);
}

/* Heartbeats and controller-side time limits (mu taken here). */
static void check_timers(sctx_t *c)
{
    srv_t *s = c->s;
    int64_t now_ms = srv_now_ms();
    int64_t limit_ms = (int64_t)s->cfg.heartbeat_interval_s * s->cfg.heartbeat_misses * 1000;
    /* a controller too busy to read heartbeats does not judge them missed */
    bool behind = srv_http_behind(s, limit_ms);
    pthread_mutex_lock(&s->mu);
    srv_event_gap_check(s);
    for (size_t i = 0; i < s->nnodes && !behind; i++) {
        srv_node_t *n = s->nodes[i];
        if (n->state == FG_NODE_DOWN)
            continue;
        if (now_ms - n->last_heartbeat_ms > limit_ms)
            node_down(c, n, "missed heartbeats");
    }
    /* a job past its time limit (plus a grace) whose agent did not stop it */
    size_t nrun_ = 0;
    uint64_t *run_ = srv_running_snapshot(s, &nrun_);
    for (size_t ri_ = 0; ri_ < nrun_; ri_++) {
        uint64_t id = run_[ri_];
        srv_job_t *j = s->jobs[id - 1];
        if (!j || j->state != FG_JOB_RUNNING || j->stop_sent)
            continue;
        if (c->now > j->r.start_time + j->r.time_limit_s + 30) {
            j->stop_sent = true;
            stop_ranks(c, j, "timeout", -1);
        }
    }
    free(run_);
    pthread_mutex_unlock(&s->mu);
}

static const char *generic_reason(fg_reason_t r)
{
    switch (r) {
    case FG_REASON_PRIORITY:
        return "other jobs are ahead of it by fair share or class";
    case FG_REASON_RESOURCES:
        return "not enough free GPUs";
    case FG_REASON_FRAGMENTATION:
        return "enough free GPUs, but not on one node (or not whole nodes)";
    case FG_REASON_RESERVATION:
        return "the GPUs it could use are held for another job";
    case FG_REASON_QUOTA:
        return "its account is at its GPU quota";
    case FG_REASON_BUDGET:
        return "its account's budget is exhausted";
    case FG_REASON_RETRY_BACKOFF:
        return "waiting out the retry backoff";
    case FG_REASON_GPU_TYPE:
        return "no node has that GPU type or enough GPUs";
    case FG_REASON_NODES_DOWN:
        return "the nodes it could use are down or draining";
    default:
        return NULL;
    }
}

/* Copies pending reasons and estimates from the core into memory (every second).
 * The core is read without srv->mu (this thread owns it); the results are applied under
 * the lock in short chunks. fg_sched_explain is only asked about jobs the last pass
 * reached (those with an estimate): for the others it would walk the plan order, O(queue)
 * each; they get the plain meaning of their reason code. */
typedef struct reason_upd {
    uint64_t id;
    int code;
    int64_t est;
    char *text; /* allocated, or NULL for the generic text */
} reason_upd_t;

static void refresh_reasons(sctx_t *c)
{
    srv_t *s = c->s;
    size_t n = fg_sched_job_count(c->core);
    if (n == 0)
        return;
    reason_upd_t *u = fg_xmalloc(n * sizeof *u);
    size_t nu = 0;
    char buf[FG_REASON_MAX];
    for (size_t k = 0; k < n; k++) {
        fg_job_info_t info;
        if (fg_sched_job_at(c->core, k, &info) || info.state != FG_JOB_PENDING)
            continue;
        reason_upd_t *x = &u[nu++];
        x->id = info.id;
        x->est = info.estimated_start == FG_TIME_NEVER ? 0 : info.estimated_start;
        x->code = (int)info.reason;
        x->text = NULL;
        if (info.reason != FG_REASON_NONE && info.estimated_start != FG_TIME_NEVER) {
            int code = fg_sched_explain(c->core, info.id, c->now, buf, sizeof buf);
            if (code > 0)
                x->code = code;
            x->text = fg_xstrdup(buf);
        }
    }
    for (size_t i = 0; i < nu; i += 1024) {
        pthread_mutex_lock(&s->mu);
        for (size_t k = i; k < nu && k < i + 1024; k++) {
            reason_upd_t *x = &u[k];
            srv_job_t *j = job(c, x->id);
            if (!j || j->state != FG_JOB_PENDING)
                continue;
            j->r.estimated_start = x->est;
            if (x->code != FG_REASON_NONE)
                set_reason(j, x->code, x->text ? x->text : generic_reason((fg_reason_t)x->code));
        }
        pthread_mutex_unlock(&s->mu);
    }
    for (size_t k = 0; k < nu; k++)
        free(u[k].text);
    free(u);
}

static void refresh_fairshare(sctx_t *c)
{
    srv_t *s = c->s;
    json_t *accts = json_array();
    size_t na = fg_sched_account_count(c->core);
    double tau = (double)fg_sched_config(c->core)->half_life_s / log(2.0);
    for (size_t a = 0; a < na; a++) {
        fg_account_info_t ai;
        if (fg_sched_account_info(c->core, (int)a, &ai))
            continue;
        double usage = fg_sched_account_usage(c->core, (int)a, c->now);
        json_t *members = json_array();
        size_t nm = fg_sched_member_count(c->core);
        for (size_t m = 0; m < nm; m++) {
            fg_member_info_t mi;
            if (fg_sched_member_info(c->core, (int)m, &mi) || mi.account != (int)a)
                continue;
            double mu = fg_sched_member_usage(c->core, (int)m, c->now);
            json_array_append_new(
                members, json_pack("{s:s,s:f,s:f,s:f,s:i,s:i,s:f}", "name", mi.user, "weight",
                                   mi.weight, "normalized_share", mi.normalized_share,
                                   "usage_gpu_seconds", mu, "running_gpus", mi.running_gpus,
                                   "pending_jobs", mi.pending_jobs, "fair_share_factor", 0.0));
        }
        /* factor: share over recent usage fraction, 2^(-usage/share) style (Slurm's
         * classic): 1 = unused, 0.5 = exactly at share, -> 0 when far over. */
        json_array_append_new(
            accts, json_pack("{s:s,s:f,s:f,s:f,s:i,s:i,s:f,s:o,s:o}", "name", ai.name, "weight",
                             ai.weight, "normalized_share", ai.normalized_share,
                             "usage_gpu_seconds", usage, "running_gpus", ai.running_gpus,
                             "pending_jobs", ai.pending_jobs, "fair_share_factor", 0.0, "gpu_quota",
                             ai.gpu_quota < 0 ? json_null() : json_integer(ai.gpu_quota), "users",
                             members));
    }
    /* fair_share_factor = 2^(-(usage share)/(normalized share)) per level */
    double total = 0;
    size_t k;
    json_t *e;
    json_array_foreach(accts, k, e) total +=
        json_real_value(json_object_get(e, "usage_gpu_seconds"));
    json_array_foreach(accts, k, e)
    {
        double u = json_real_value(json_object_get(e, "usage_gpu_seconds"));
        double sh = json_real_value(json_object_get(e, "normalized_share"));
        double f = (total > 0 && sh > 0) ? pow(2.0, -(u / total) / sh) : 1.0;
        json_object_set_new(e, "fair_share_factor", json_real(f));
        json_t *us = json_object_get(e, "users");
        double mt = 0;
        size_t q;
        json_t *me;
        json_array_foreach(us, q, me) mt +=
            json_real_value(json_object_get(me, "usage_gpu_seconds"));
        json_array_foreach(us, q, me)
        {
            double mu = json_real_value(json_object_get(me, "usage_gpu_seconds"));
            double ms = json_real_value(json_object_get(me, "normalized_share"));
            double mf = (mt > 0 && ms > 0) ? pow(2.0, -(mu / mt) / ms) : 1.0;
            json_object_set_new(me, "fair_share_factor", json_real(mf));
        }
    }
    json_t *o = json_pack(
        "{s:s,s:I,s:f,s:i,s:i,s:o}", "policy", fg_policy_name(fg_sched_config(c->core)->policy),
        "half_life_s", (json_int_t)fg_sched_config(c->core)->half_life_s, "tau_s", tau, "gpus_up",
        fg_sched_gpus_up(c->core), "gpus_free", fg_sched_gpus_free(c->core), "accounts", accts);
    json_object_set_new(o, "as_of", json_integer(c->now));
    pthread_mutex_lock(&s->mu);
    json_t *old = s->fairshare;
    s->fairshare = o;
    pthread_mutex_unlock(&s->mu);
    json_decref(old);
}

/* Queues every account's and member's usage for the next commit. */
static void save_usage(sctx_t *c)
{
    size_t na = fg_sched_account_count(c->core), nm = fg_sched_member_count(c->core);
    for (size_t a = 0; a < na; a++) {
        fg_account_info_t ai;
        if (fg_sched_account_info(c->core, (int)a, &ai))
            continue;
        c->usage = fg_xgrow(c->usage, &c->usage_cap, c->nusage + 1, sizeof *c->usage);
        fg_store_usage_t *u = &c->usage[c->nusage++];
        memset(u, 0, sizeof *u);
        u->account = fg_xstrdup(ai.name);
        u->gpu_s = fg_sched_account_usage(c->core, (int)a, c->now);
        u->as_of = c->now;
    }
    for (size_t m = 0; m < nm; m++) {
        fg_member_info_t mi;
        if (fg_sched_member_info(c->core, (int)m, &mi))
            continue;
        fg_account_info_t ai;
        if (fg_sched_account_info(c->core, mi.account, &ai))
            continue;
        pthread_mutex_lock(&c->s->mu);
        srv_user_t *usr = srv_user_by_name(c->s, mi.user);
        int64_t uid = usr ? usr->r.id : 0;
        pthread_mutex_unlock(&c->s->mu);
        if (!uid)
            continue;
        c->usage = fg_xgrow(c->usage, &c->usage_cap, c->nusage + 1, sizeof *c->usage);
        fg_store_usage_t *u = &c->usage[c->nusage++];
        memset(u, 0, sizeof *u);
        u->account = fg_xstrdup(ai.name);
        u->user_id = uid;
        u->gpu_s = fg_sched_member_usage(c->core, (int)m, c->now);
        u->as_of = c->now;
    }
    c->last_usage_save = c->now;
}

/* ------------------------------------------------------------------ the thread */

static sctx_t g_ctx; /* the one scheduler thread's state */

static void *sched_main(void *arg)
{
    prctl(PR_SET_NAME, "fg-scheduler"); /* as top -H and ps -L show it */
    srv_t *s = arg;
    sctx_t *c = &g_ctx;
    int64_t next_wake = FG_TIME_NEVER;
    for (;;) {
        pthread_mutex_lock(&s->sched_mu);
        if (!s->inbox_head && !s->sched_stop) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            int64_t wake_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + 1000;
            if (next_wake != FG_TIME_NEVER && next_wake * 1000 < wake_ms)
                wake_ms = next_wake * 1000;
            struct timespec dl = {.tv_sec = wake_ms / 1000, .tv_nsec = (wake_ms % 1000) * 1000000L};
            pthread_cond_timedwait(&s->sched_cv, &s->sched_mu, &dl);
        }
        bool busy = s->inbox_head != NULL;
        pthread_mutex_unlock(&s->sched_mu);
        if (busy && !s->sched_stop) {
            /* let events that arrive together gather: one pass for all of them */
            struct timespec nap = {0, 1000000L};
            nanosleep(&nap, NULL);
        }
        pthread_mutex_lock(&s->sched_mu);
        srv_msg_t *batch = s->inbox_head;
        s->inbox_head = s->inbox_tail = NULL;
        bool stop = s->sched_stop;
        pthread_mutex_unlock(&s->sched_mu);

        int64_t now = srv_now();
        if (now < c->now)
            now = c->now; /* never backwards */
        c->now = now;
        bool accounts = false;
        for (srv_msg_t *m = batch; m; m = m->next)
            if (m->kind == MSG_ACCOUNT)
                accounts = true;
        if (accounts)
            sync_accounts(c);
        for (srv_msg_t *m = batch; m; m = m->next) {
            switch (m->kind) {
            case MSG_SUBMIT: {
                pthread_mutex_lock(&s->mu);
                srv_job_t *j = job(c, m->job);
                if (j && j->state == FG_JOB_PENDING && !j->in_core)
                    core_submit(c, j, false);
                pthread_mutex_unlock(&s->mu);
                break;
            }
            case MSG_CANCEL:
                do_cancel(c, m);
                break;
            case MSG_STARTED:
                do_started(c, m);
                break;
            case MSG_EXITED:
                do_exited(c, m);
                break;
            case MSG_REPORTS:
                do_reports(c, m);
                break;
            case MSG_REGISTER:
                do_register(c, m);
                break;
            case MSG_NODE_STATE:
                do_node_state(c, m);
                break;
            default:
                break;
            }
        }
        if (c->retry_parked && c->nparked) {
            c->retry_parked = false;
            pthread_mutex_lock(&s->mu);
            size_t n = c->nparked;
            uint64_t *ids = fg_xmalloc(n * sizeof *ids);
            memcpy(ids, c->parked, n * sizeof *ids);
            for (size_t i = 0; i < n; i++) {
                srv_job_t *j = job(c, ids[i]);
                if (j && j->state == FG_JOB_PENDING && !j->in_core)
                    core_submit(c, j, false);
                else
                    unpark_job(c, ids[i]);
            }
            pthread_mutex_unlock(&s->mu);
            free(ids);
        }
        c->retry_parked = false;
        check_timers(c);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int rc = fg_sched_pass(c->core, c->now, &c->d);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long us = (long)((t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000);
        atomic_fetch_add(&s->m.passes, 1);
        atomic_fetch_add(&s->m.pass_us_total, us);
        atomic_store(&s->m.last_pass_us, us);
        if (us > atomic_load(&s->m.max_pass_us))
            atomic_store(&s->m.max_pass_us, us);
        if (rc) {
            fg_log(FG_LOG_ERROR, "scheduler: pass failed: %s", fg_strerror(rc));
            next_wake = FG_TIME_NEVER;
        } else {
            apply_starts(c);
            next_wake = c->d.next_wake;
        }
        if (stop || c->now - c->last_usage_save >= 10)
            save_usage(c);
        if (batch || c->d.nstarts || c->d.npreempts)
            c->changed = true;
        if (c->now - c->last_session_gc >= 600) {
            /* expired login sessions leave the store every 10 minutes */
            c->last_session_gc = c->now;
            srv_batch_t gc = {0};
            srv_batch_add(&gc, OP_SESSION_EXPIRE, NULL)->i1 = c->now;
            srv_batch_commit(s, &gc);
            srv_batch_free(&gc);
            pthread_mutex_lock(&s->mu); /* and from memory */
            srv_token_sweep(s, c->now);
            pthread_mutex_unlock(&s->mu);
        }
        commit(c);
        int64_t nms = srv_now_ms();
        /* reasons and the fair-share view: every second while things change, every 10 s
         * when idle (estimates and usage still move with time). A refresh reads every live
         * job, so beyond 100,000 of them it comes every n / 100,000 seconds instead: the
         * thread reads at most ~100,000 jobs a second for it (300,000 pending jobs were
         * a third of its time under the submission benchmark). */
        size_t nlive = fg_sched_job_count(c->core);
        int64_t every_ms = nlive > 100000 ? (int64_t)(nlive / 100) : 1000;
        if ((nms - c->last_refresh_ms >= every_ms && c->changed) ||
            nms - c->last_refresh_ms >= (every_ms > 10000 ? every_ms : 10000) || stop) {
            c->last_refresh_ms = nms;
            c->changed = false;
            refresh_reasons(c);
            refresh_fairshare(c);
        }
        while (batch) {
            srv_msg_t *nx = batch->next;
            srv_msg_free(batch);
            batch = nx;
        }
        if (stop)
            break;
    }
    return NULL;
}

/* ------------------------------------------------------------------ restore */

/* Builds the core from the in-memory model loaded from the store (before any thread
 * runs): accounts, members, usage, nodes, running jobs on their GPUs, pending jobs
 * with their original submit times and counters. */
fg_sched_t *srv_core_build(srv_t *s)
{
    sctx_t *c = &g_ctx;
    memset(c, 0, sizeof *c);
    c->s = s;
    fg_config_t cfg = s->cfg.core;
    cfg.max_pending_per_user = 0; /* the controller enforces both, before the commit */
    cfg.shed_pending = 0;
    c->core = fg_sched_new(&cfg);
    if (!c->core)
        return NULL;
    fg_decisions_init(&c->d);
    c->now = srv_now();
    c->last_usage_save = c->now;
    sync_accounts(c);
    /* usage */
    fg_store_tx_t *tx;
    if (fg_store_read_begin(s->store, &tx) == 0) {
        fg_store_usage_list_t ul = {0};
        if (fg_store_usage_list(tx, &ul) == 0) {
            for (size_t i = 0; i < ul.n; i++) {
                fg_store_usage_t *u = &ul.items[i];
                int64_t as_of = u->as_of ? u->as_of : c->now;
                if (as_of > c->now)
                    as_of = c->now;
                if (u->user_id == 0) {
                    int a = fg_sched_account_find(c->core, u->account);
                    if (a >= 0)
                        fg_sched_account_set_usage(c->core, a, u->gpu_s, as_of);
                } else {
                    srv_user_t *usr = srv_user_by_id(s, u->user_id);
                    int m = usr ? fg_sched_member_find(c->core, u->account, usr->r.username) : -1;
                    if (m >= 0)
                        fg_sched_member_set_usage(c->core, m, u->gpu_s, as_of);
                }
            }
        }
        fg_store_usage_list_free(&ul);
        fg_store_read_end(tx);
    }
    /* nodes */
    for (size_t i = 0; i < s->nnodes; i++) {
        srv_node_t *n = s->nodes[i];
        if (n->ngpus < 1)
            continue;
        int idx = fg_sched_node_add(c->core, n->name, n->ngpus, n->gpu_type, n->state);
        n->core_index = idx >= 0 ? idx : -1;
    }
    /* jobs: running first (their GPUs), then pending in id order */
    for (int pass = 0; pass < 2; pass++) {
        for (uint64_t id = 1; id <= s->max_job_id; id++) {
            srv_job_t *j = s->jobs[id - 1];
            if (!j)
                continue;
            if (pass == 0 && j->state == FG_JOB_RUNNING) {
                fg_job_spec_t sp;
                char user[80];
                fill_spec(s, j, &sp, user, sizeof user);
                json_t *nodes = j->r.nodes_json ? json_loads(j->r.nodes_json, 0, NULL) : NULL;
                json_t *idx =
                    j->r.gpu_indices_json ? json_loads(j->r.gpu_indices_json, 0, NULL) : NULL;
                int na = (int)json_array_size(nodes);
                fg_alloc_t al[FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS];
                int nal = 0;
                j->nranks = na;
                j->ranks = fg_xcalloc((size_t)(na ? na : 1), sizeof *j->ranks);
                for (int k = 0; k < na && nal < (int)(sizeof al / sizeof al[0]); k++) {
                    const char *nn = json_string_value(json_array_get(nodes, (size_t)k));
                    srv_node_t *n = nn ? srv_node_by_name(s, nn) : NULL;
                    uint64_t mask = 0;
                    size_t q;
                    json_t *g;
                    json_array_foreach(json_array_get(idx, (size_t)k), q, g) mask |=
                        1ULL << (json_integer_value(g) & 63);
                    snprintf(j->ranks[k].node, sizeof j->ranks[k].node, "%s", nn ? nn : "");
                    j->ranks[k].gpu_mask = mask;
                    /* not known to have started until its agent holds it at register */
                    j->ranks[k].started = false;
                    if (n && n->core_index >= 0) {
                        al[nal].node = n->core_index;
                        al[nal].gpu_mask = mask;
                        nal++;
                    }
                }
                json_decref(nodes);
                json_decref(idx);
                /* The attempt was assigned by an earlier run; the store keeps no epoch per
                 * attempt, so it is unknown (0) until the node's agent registers and the
                 * reconcile adopts the rank with the epoch the agent holds. */
                j->epoch = 0;
                int rc = nal == na
                             ? fg_sched_restore_running(c->core, &sp, j->r.attempts,
                                                        j->r.retries_used, j->r.attained_gpu_s,
                                                        j->r.start_time, al, nal, c->now)
                             : FG_ENOENT;
                if (rc) {
                    fg_log(FG_LOG_WARN,
                           "restore: running job %lld cannot be placed back (%s); it will be "
                           "requeued as node_lost",
                           (long long)j->r.id, fg_strerror(rc));
                    /* its attempt is lost (node_lost: counted against max_retries); the
                     * change is committed by the scheduler thread's first iteration */
                    free(j->ranks);
                    j->ranks = NULL;
                    j->nranks = 0;
                    if (j->cur.attempt == j->r.attempts && j->cur.end_time_ms == 0) {
                        j->cur.end_time_ms = srv_now_ms();
                        j->cur.end_cause = FG_END_NODE_LOST;
                        add_attempt(c, &j->cur, OP_ATTEMPT_UPDATE);
                    }
                    if (j->r.start_time > 0 && c->now > j->r.start_time)
                        j->r.attained_gpu_s += (c->now - j->r.start_time) * j->r.gpus;
                    mark_dirty(c, j);
                    if (j->r.retries_used < j->r.max_retries) {
                        j->r.retries_used++;
                        set_state(s, j, FG_JOB_PENDING);
                        set_reason(j, FG_REASON_RETRY_BACKOFF, "node_lost");
                        add_event(c, "job", id, "RUNNING", "PENDING", "node_lost", NULL);
                        core_submit(c, j, true);
                    } else {
                        set_state(s, j, FG_JOB_FAILED);
                        j->r.end_time = c->now;
                        add_event(c, "job", id, "RUNNING", "FAILED", "node_lost", NULL);
                    }
                } else {
                    j->in_core = true;
                }
            } else if (pass == 1 && j->state == FG_JOB_PENDING) {
                core_submit(c, j, true);
            }
        }
    }
    s->core = c->core;
    refresh_fairshare(c);
    return c->core;
}

int srv_sched_start(srv_t *s)
{
    if (pthread_create(&s->sched_thread, NULL, sched_main, s) != 0)
        return -1;
    s->sched_running = true;
    return 0;
}

void srv_sched_stop(srv_t *s)
{
    if (!s->sched_running)
        return;
    pthread_mutex_lock(&s->sched_mu);
    s->sched_stop = true;
    pthread_cond_signal(&s->sched_cv);
    pthread_mutex_unlock(&s->sched_mu);
    pthread_join(s->sched_thread, NULL);
    s->sched_running = false;
    sctx_t *c = &g_ctx;
    fg_decisions_free(&c->d);
    fg_sched_free(c->core);
    c->core = NULL;
    s->core = NULL;
    free(c->parked);
    free(c->dirty);
    free(c->evs);
    free(c->atts);
    free(c->att_kind);
    free(c->usage);
    free(c->node_states);
    free(c->node_upserts);
    free(c->outs);
    free(c->syncs);
}

/* ------------------------------------------------------------------ node rendering */

static json_t *node_json_locked(srv_t *s, srv_node_t *n)
{
    json_t *gpus = json_array();
    for (int g = 0; g < n->ngpus; g++) {
        srv_gpu_t *G = &n->gpus[g];
        uint64_t holder = 0;
        for (size_t ri = 0; ri < s->nrunning && !holder; ri++) {
            srv_job_t *j = s->jobs[s->running[ri] - 1];
            for (int k = 0; k < j->nranks; k++)
                if (!strcmp(j->ranks[k].node, n->name) && (j->ranks[k].gpu_mask >> g & 1))
                    holder = s->running[ri];
        }
        char jid[24];
        snprintf(jid, sizeof jid, "%llu", (unsigned long long)holder);
        json_array_append_new(
            gpus,
            json_pack("{s:i,s:s,s:s,s:I,s:o,s:o,s:o}", "index", G->index, "uuid", G->uuid, "type",
                      G->type, "memory_mb", (json_int_t)G->memory_mb, "util_pct",
                      G->util_pct < 0 ? json_null() : json_integer(G->util_pct), "mem_used_mb",
                      G->mem_used_mb < 0 ? json_null() : json_integer(G->mem_used_mb), "job_id",
                      holder ? json_string(jid) : json_null()));
    }
    return json_pack("{s:s,s:s,s:s,s:i,s:I,s:s,s:o,s:o,s:b,s:s}", "name", n->name, "state",
                     node_state_name(n, s), "addr", n->addr, "cpus", n->cpus, "memory_mb",
                     (json_int_t)n->memory_mb, "gpu_type", n->gpu_type, "gpus", gpus,
                     "last_heartbeat",
                     n->last_heartbeat_ms ? json_integer(n->last_heartbeat_ms / 1000) : json_null(),
                     "isolated", n->isolated, "isolation", n->isolation);
}

json_t *srv_node_json(srv_t *s, srv_node_t *n)
{
    return node_json_locked(s, n);
}
