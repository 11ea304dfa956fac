/*
 * sched_commit.c - the scheduler iteration's durable batch: what changed, collected as
 * it happens, stored in ONE store write, then shown.
 *
 * While an iteration applies its messages and the pass's decisions, every change is
 * added here: jobs made dirty (srv__mark_dirty), events, attempt records, node states
 * and upserts, usage, messages for agents (srv__send_to) and callers to answer
 * (srv__add_sync). srv__commit then writes them as one batch and only after that
 * publishes: events into memory, messages into agent outboxes, answers to callers.
 * So an agent never gets a start the store does not know, and a reader waiting for
 * pub_iter (srv_job_published) never shows a change before its commit.
 * Example: a cancel of a pending job adds one dirty job and one "PENDING -> CANCELLED"
 * event; the commit stores both, appends the event to the in-memory log (with the
 * sequence number the store gave it) and resumes the cancelling request.
 */
#include "server/sched_int.h"

#include "common/log.h"
#include "common/xalloc.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ filling the batch */

/* The job with this id, or NULL. */
srv_job_t *srv__job(sctx_t *c, uint64_t id)
{
    return srv_job_get(c->s, id);
}

/* Whether running job j has a rank on node that has not ended. */
static bool live_rank_on(const srv_job_t *j, const char *node)
{
    for (int k = 0; k < j->nranks; k++)
        if (!strcmp(j->ranks[k].node, node) && !j->ranks[k].ended)
            return true;
    return false;
}

/* The jobs running now (node NULL), or those with a live rank on node, as a snapshot
 * that stays valid while the caller ends their attempts (ending one changes no other);
 * caller frees. mu held. */
srv_job_t **srv__running_jobs(srv_t *s, const char *node, size_t *n)
{
    size_t nids;
    uint64_t *ids = srv_running_snapshot(s, &nids);
    srv_job_t **jobs = fg_xmalloc((nids ? nids : 1) * sizeof *jobs);
    *n = 0;
    for (size_t i = 0; i < nids; i++) {
        srv_job_t *j = s->jobs[ids[i] - 1];
        assert(j && j->state == FG_JOB_RUNNING); /* the running list holds running jobs */
        if (!node || live_rank_on(j, node))
            jobs[(*n)++] = j;
    }
    free(ids);
    return jobs;
}

/* The iteration now open: its changes are shown once srv__commit has made them durable.
 * Every change to a job or node is made with mu held, so readers that wait for
 * pub_iter (srv_job_published) never show one before its commit. */
void srv__mark_changed(srv_t *s)
{
    s->dirty_iter = s->pub_iter + 1;
}

/* Whether job id is in the iteration's dirty list (for the asserts: a scan). */
static inline bool listed_dirty(const sctx_t *c, uint64_t id)
{
    for (size_t i = 0; i < c->ndirty; i++)
        if (c->dirty[i] == id)
            return true;
    return false;
}

/* Queues j's record for the commit (once per iteration); mu held. j->dirty_iter is set
 * only here and the list is emptied only when pub_iter moves on (srv__commit), so a job
 * whose dirty_iter is the open iteration is listed already: no scan of the list (live
 * charging marks every running job at once, which made the scan quadratic). */
void srv__mark_dirty(sctx_t *c, srv_job_t *j)
{
    srv__mark_changed(c->s);
    uint64_t iter = c->s->pub_iter + 1, id = (uint64_t)j->r.id;
    if (j->dirty_iter == iter) {
        assert(listed_dirty(c, id));
        return;
    }
    assert(!listed_dirty(c, id));
    j->dirty_iter = iter;
    c->dirty = fg_xgrow(c->dirty, &c->dirty_cap, c->ndirty + 1, sizeof *c->dirty);
    c->dirty[c->ndirty++] = id;
}

/* Queues an event (kind "job" or "node"); the strings are copied, NULLs stay NULL. */
void srv__add_event(sctx_t *c, const char *kind, uint64_t job_id, const char *from, const char *to,
                    const char *reason, const char *node)
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

/* Queues a copy of attempt record a, inserted or updated (kind). */
void srv__add_attempt(sctx_t *c, const fg_store_attempt_t *a, int kind)
{
    c->atts = fg_xgrow(c->atts, &c->atts_cap, c->natts + 1, sizeof *c->atts);
    c->att_kind = fg_xgrow(c->att_kind, &c->att_kind_cap, c->natts + 1, sizeof *c->att_kind);
    fg_store_attempt_t *x = &c->atts[c->natts];
    *x = *a;
    x->nodes_json = srv_strdup0(a->nodes_json);
    x->gpu_uuids_json = srv_strdup0(a->gpu_uuids_json);
    c->att_kind[c->natts++] = kind;
}

/* Queues a node's new state ("up", "draining", "down") for the store. */
void srv__add_node_state(sctx_t *c, const char *name, const char *state)
{
    srv__mark_changed(c->s);
    c->node_states =
        fg_xgrow(c->node_states, &c->node_states_cap, c->nnode_states + 2, sizeof *c->node_states);
    c->node_states[c->nnode_states++] = fg_xstrdup(name);
    c->node_states[c->nnode_states++] = fg_xstrdup(state);
}

/* Queues msg for node's agent, delivered after the commit; takes msg. */
void srv__send_to(sctx_t *c, const char *node, json_t *msg)
{
    c->outs = fg_xgrow(c->outs, &c->outs_cap, c->nouts + 1, sizeof *c->outs);
    snprintf(c->outs[c->nouts].node, sizeof c->outs[c->nouts].node, "%s", node);
    c->outs[c->nouts++].msg = msg;
}

/* Queues y's caller to be answered after the commit (NULL: nobody waits). */
void srv__add_sync(sctx_t *c, srv_sync_t *y)
{
    if (!y)
        return;
    c->syncs = fg_xgrow(c->syncs, &c->syncs_cap, c->nsyncs + 1, sizeof *c->syncs);
    c->syncs[c->nsyncs++] = y;
}

/* Sets a job's state keeping the per-state and per-user counters right (mu held). */
void srv__set_state(srv_t *s, srv_job_t *j, fg_job_state_t st)
{
    assert(s->njobs_by_state[j->state] > 0);
    srv_job_count_state(s, j, -1);
    j->state = st;
    j->r.state = st;
    srv_job_count_state(s, j, +1);
    /* the running list and the running count move together */
    assert((int64_t)s->nrunning == s->njobs_by_state[FG_JOB_RUNNING]);
}

/* Sets a job's reason code and text (NULL: none); mu held. */
void srv__set_reason(srv_job_t *j, int code, const char *text)
{
    j->r.reason_code = code;
    if (text && j->r.reason && !strcmp(text, j->r.reason))
        return;
    free(j->r.reason);
    j->r.reason = srv_strdup0(text);
}

/* ------------------------------------------------------------------ the commit */

/* Puts the iteration's changes into b, events last; returns the index of the first
 * event operation (their sequence numbers come back there). */
static size_t fill_batch(sctx_t *c, srv_batch_t *b)
{
    for (size_t i = 0; i < c->natts; i++)
        srv_batch_add(b, c->att_kind[i], &c->atts[i]);
    for (size_t i = 0; i < c->ndirty; i++) {
        srv_job_t *j = srv__job(c, c->dirty[i]);
        assert(j); /* jobs are never freed while the scheduler runs */
        srv_batch_add(b, OP_JOB_UPDATE, &j->r);
    }
    for (size_t i = 0; i < c->nnode_upserts; i++)
        srv_batch_add(b, OP_NODE_UPSERT, &c->node_upserts[i]);
    for (size_t i = 0; i + 1 < c->nnode_states; i += 2) {
        srv_op_t *o = srv_batch_add(b, OP_NODE_STATE, NULL);
        o->s1 = c->node_states[i];
        o->s2 = c->node_states[i + 1];
    }
    for (size_t i = 0; i < c->nusage; i++)
        srv_batch_add(b, OP_USAGE_SET, &c->usage[i]);
    for (size_t i = 0; i < c->nrows; i++)
        srv_batch_add(b, OP_LEDGER, &c->rows[i]);
    size_t ev0 = b->n;
    for (size_t i = 0; i < c->nevs; i++)
        srv_batch_add(b, OP_EVENT, &c->evs[i]);
    return ev0;
}

/* Commits b, retrying while the store reports an I/O error (a failed commit stored
 * nothing; the disk may come back): at most 50 tries, 100 ms apart. */
static int commit_with_retries(srv_t *s, srv_batch_t *b)
{
    int rc = 0;
    for (int tries = 0; tries < 50; tries++) {
        rc = srv_batch_commit(s, b);
        if (rc != FG_STORE_EIO)
            break;
        fg_log(FG_LOG_ERROR, "scheduler: commit failed (%s), retrying", fg_store_strerror(rc));
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return rc;
}

/* One operation of b was refused (a bug or an inconsistency): commits each operation
 * alone, so that the rest of the iteration is not lost with it. */
static void commit_one_by_one(srv_t *s, srv_batch_t *b, int rc)
{
    fg_log(FG_LOG_ERROR,
           "scheduler: commit of %zu changes refused at op %d (kind %d): %s;"
           " committing them one by one",
           b->n, b->failed_op, b->failed_op >= 0 ? b->ops[b->failed_op].kind : -1,
           fg_store_strerror(rc));
    for (size_t i = 0; i < b->n; i++) {
        srv_batch_t one = {0};
        srv_op_t *o = srv_batch_add(&one, b->ops[i].kind, b->ops[i].rec);
        o->i1 = b->ops[i].i1;
        o->s1 = b->ops[i].s1;
        o->s2 = b->ops[i].s2;
        o->d1 = b->ops[i].d1;
        int r1 = srv_batch_commit(s, &one);
        b->ops[i].out = r1 ? 0 : o->out;
        if (r1)
            fg_log(FG_LOG_ERROR, "scheduler: op %zu (kind %d) refused: %s", i, b->ops[i].kind,
                   fg_store_strerror(r1));
        srv_batch_free(&one);
    }
}

/* Stores b; returns 0, or the error of a commit that failed for good (logged). */
static int store_batch(srv_t *s, srv_batch_t *b)
{
    if (!b->n)
        return 0;
    int rc = commit_with_retries(s, b);
    if (rc && rc != FG_STORE_EIO && rc != FG_STORE_ECLOSED) {
        commit_one_by_one(s, b, rc);
        return 0;
    }
    if (rc)
        fg_log(FG_LOG_ERROR, "scheduler: commit of %zu changes failed: %s", b->n,
               fg_store_strerror(rc));
    return rc;
}

/* Shows the stored iteration: events into memory (with their sequence numbers from
 * b, 0 when the commit failed), messages into the agents' outboxes. Returns whether
 * the iteration changed a job or a node. */
static bool publish(sctx_t *c, const srv_batch_t *b, size_t ev0, int rc)
{
    srv_t *s = c->s;
    pthread_mutex_lock(&s->mu);
    /* the iteration is durable (or its commit failed for good, logged above): its
     * changes may be shown now */
    s->pub_iter++;
    bool published = s->dirty_iter == s->pub_iter; /* this iteration changed something */
    for (size_t i = 0; i < c->nevs; i++) {
        c->evs[i].seq = rc ? 0 : b->ops[ev0 + i].out;
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
    return published;
}

/* Empties the iteration's batch for the next one. */
static void reset_batch(sctx_t *c)
{
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
    c->nrows = 0;
}

/* Wakes the parked requests that wait for what the iteration showed. */
static void wake_waiters(srv_t *s, bool any_out, bool any_ev, bool published)
{
    if (any_out)
        srv_wake_kind(s, WAIT_AGENT);
    if (any_ev)
        srv_wake_kind(s, WAIT_EVENTS);
    if (any_ev || published) /* (a stream waits for the job an event shows, too) */
        srv_wake_kind(s, WAIT_STREAM);
    if (published)
        srv_wake_kind(s, WAIT_PUBLISH);
}

/* Makes the iteration durable, then publishes it: events into memory, messages into
 * agent outboxes, answers to waiting callers. */
void srv__commit(sctx_t *c)
{
    srv_t *s = c->s;
    srv_batch_t b = {0};
    size_t ev0 = fill_batch(c, &b);
    int rc = store_batch(s, &b);
    bool published = publish(c, &b, ev0, rc);
    srv_batch_free(&b);
    bool any_out = c->nouts > 0, any_ev = c->nevs > 0;
    for (size_t i = 0; i < c->nsyncs; i++)
        srv__sync_done(c->syncs[i]);
    reset_batch(c);
    wake_waiters(s, any_out, any_ev, published);
}
