/*
 * sched_restore.c - the core built from the store at start, before any thread runs.
 *
 * The controller's memory (jobs, nodes, accounts, users) is loaded from the store
 * first (persist.c); this file gives the core the same picture: accounts and members,
 * their saved usage (decayed from when it was saved), the nodes, the running jobs on
 * the GPUs they hold, then the pending jobs in id order with their original submit
 * times and counters, so the plan order is the one before the restart. A running job
 * that cannot be placed back (its node is gone or changed) loses its attempt as
 * node_lost: it is requeued if it has retries left, else it fails.
 * Example: job 3 ran on node a GPUs [0,1] before a restart; the core gets it back as
 * running there (epoch 0, unknown until a's agent registers and the reconcile adopts
 * the rank); if a is no longer known, job 3 is requeued "node_lost".
 */
#include "server/sched_int.h"

#include "common/log.h"
#include "common/xalloc.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A fresh context with a new core (the controller enforces the pending limits itself,
 * before the commit); NULL if the core cannot be made. */
static fg_sched_t *new_core(sctx_t *c, srv_t *s)
{
    memset(c, 0, sizeof *c);
    c->s = s;
    fg_config_t cfg = s->cfg.core;
    cfg.max_pending_per_user = 0;
    cfg.shed_pending = 0;
    c->core = fg_sched_new(&cfg);
    if (!c->core)
        return NULL;
    fg_decisions_init(&c->d);
    c->now = srv_now();
    c->last_usage_save = c->now;
    return c->core;
}

/* Gives the core one saved usage record: an account's (user 0) or a member's. */
static void restore_usage_record(sctx_t *c, const fg_store_usage_t *u)
{
    int64_t as_of = u->as_of ? u->as_of : c->now;
    if (as_of > c->now)
        as_of = c->now;
    if (u->user_id == 0) {
        int a = fg_sched_account_find(c->core, u->account);
        if (a >= 0)
            fg_sched_account_set_usage(c->core, a, u->gpu_s, as_of);
    } else {
        srv_user_t *usr = srv_user_by_id(c->s, u->user_id);
        int m = usr ? fg_sched_member_find(c->core, u->account, usr->r.username) : -1;
        if (m >= 0)
            fg_sched_member_set_usage(c->core, m, u->gpu_s, as_of);
    }
}

/* Gives the core the usage saved in the store. */
static void restore_usage(sctx_t *c)
{
    fg_store_tx_t *tx;
    if (fg_store_read_begin(c->s->store, &tx) != 0)
        return;
    fg_store_usage_list_t ul = {0};
    if (fg_store_usage_list(tx, &ul) == 0)
        for (size_t i = 0; i < ul.n; i++)
            restore_usage_record(c, &ul.items[i]);
    fg_store_usage_list_free(&ul);
    fg_store_read_end(tx);
}

/* Adds every known node with GPUs to the core, in its stored state. */
static void restore_nodes(sctx_t *c)
{
    srv_t *s = c->s;
    for (size_t i = 0; i < s->nnodes; i++) {
        srv_node_t *n = s->nodes[i];
        if (n->ngpus < 1)
            continue;
        int idx = fg_sched_node_add(c->core, n->name, n->ngpus, n->gpu_type, n->state);
        n->core_index = idx >= 0 ? idx : -1;
    }
}

/* The GPU mask of a stored list of GPU indices. */
static uint64_t mask_of(json_t *indices)
{
    uint64_t mask = 0;
    size_t q;
    json_t *g;
    json_array_foreach(indices, q, g) mask |= 1ULL << (json_integer_value(g) & 63);
    return mask;
}

/* Rebuilds running job j's ranks from its stored nodes and GPU indices, and the
 * allocations of those on nodes the core knows (al, room for max); returns how many
 * ranks j had, *nal how many were placed. */
static int restore_ranks(srv_t *s, srv_job_t *j, fg_alloc_t *al, int max, int *nal)
{
    json_t *nodes = j->r.nodes_json ? json_loads(j->r.nodes_json, 0, NULL) : NULL;
    json_t *idx = j->r.gpu_indices_json ? json_loads(j->r.gpu_indices_json, 0, NULL) : NULL;
    int na = (int)json_array_size(nodes);
    *nal = 0;
    j->nranks = na;
    j->ranks = fg_xcalloc((size_t)(na ? na : 1), sizeof *j->ranks);
    for (int k = 0; k < na && *nal < max; k++) {
        const char *nn = json_string_value(json_array_get(nodes, (size_t)k));
        srv_node_t *n = nn ? srv_node_by_name(s, nn) : NULL;
        uint64_t mask = mask_of(json_array_get(idx, (size_t)k));
        snprintf(j->ranks[k].node, sizeof j->ranks[k].node, "%s", nn ? nn : "");
        j->ranks[k].gpu_mask = mask;
        /* not known to have started until its agent holds it at register */
        j->ranks[k].started = false;
        if (n && n->core_index >= 0) {
            al[*nal].node = n->core_index;
            al[*nal].gpu_mask = mask;
            (*nal)++;
        }
    }
    json_decref(nodes);
    json_decref(idx);
    return na;
}

/* Running job j cannot be placed back (rc): its attempt is lost as node_lost (counted
 * against max_retries) and it is requeued, or fails without retries left. The change
 * is committed by the scheduler thread's first iteration. */
static void lose_restored(sctx_t *c, srv_job_t *j, int rc)
{
    srv_t *s = c->s;
    uint64_t id = (uint64_t)j->r.id;
    fg_log(FG_LOG_WARN,
           "restore: running job %lld cannot be placed back (%s); it will be requeued as "
           "node_lost",
           (long long)j->r.id, fg_strerror(rc));
    free(j->ranks);
    j->ranks = NULL;
    j->nranks = 0;
    if (j->cur.attempt == j->r.attempts && j->cur.end_time_ms == 0) {
        j->cur.end_time_ms = srv_now_ms();
        j->cur.end_cause = FG_END_NODE_LOST;
        srv__add_attempt(c, &j->cur, OP_ATTEMPT_UPDATE);
        srv__bill_attempt_end(c, j);
    }
    if (j->r.start_time > 0 && c->now > j->r.start_time)
        j->r.attained_gpu_s += (c->now - j->r.start_time) * j->r.gpus;
    srv__mark_dirty(c, j);
    if (j->r.retries_used < j->r.max_retries) {
        j->r.retries_used++;
        srv__set_state(s, j, FG_JOB_PENDING);
        srv__set_reason(j, FG_REASON_RETRY_BACKOFF, "node_lost");
        srv__add_event(c, "job", id, "RUNNING", "PENDING", "node_lost", NULL);
        srv__core_submit(c, j, true);
    } else {
        srv__set_state(s, j, FG_JOB_FAILED);
        j->r.end_time = c->now;
        srv__add_event(c, "job", id, "RUNNING", "FAILED", "node_lost", NULL);
    }
}

/* Gives the core running job j back on the GPUs it holds. */
static void restore_running(sctx_t *c, srv_job_t *j)
{
    fg_job_spec_t sp;
    char user[80];
    srv__fill_spec(c->s, j, &sp, user, sizeof user);
    sp.limit_cost = j->limit_cost = srv__limit_cost(c, j);
    fg_alloc_t al[FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS];
    int nal;
    int na = restore_ranks(c->s, j, al, (int)(sizeof al / sizeof al[0]), &nal);
    /* The attempt was assigned by an earlier run; the store keeps no epoch per
     * attempt, so it is unknown (0) until the node's agent registers and the
     * reconcile adopts the rank with the epoch the agent holds. */
    j->epoch = 0;
    int rc = nal == na
                 ? fg_sched_restore_running(c->core, &sp, j->r.attempts, j->r.retries_used,
                                            j->r.attained_gpu_s, j->r.start_time, al, nal, c->now)
                 : FG_ENOENT;
    if (rc) {
        lose_restored(c, j, rc);
    } else {
        j->in_core = true;
        srv__bill_restore(c, j);
    }
}

/* Builds the core from the in-memory model loaded from the store (before any thread
 * runs): accounts, members, usage, nodes, running jobs on their GPUs, pending jobs
 * with their original submit times and counters. */
fg_sched_t *srv_core_build(srv_t *s)
{
    sctx_t *c = srv__sched_ctx();
    if (!new_core(c, s))
        return NULL;
    srv__sync_accounts(c);
    restore_usage(c);
    restore_nodes(c);
    /* jobs: running first (their GPUs), then pending in id order */
    for (uint64_t id = 1; id <= s->max_job_id; id++) {
        srv_job_t *j = s->jobs[id - 1];
        if (j && j->state == FG_JOB_RUNNING)
            restore_running(c, j);
    }
    for (uint64_t id = 1; id <= s->max_job_id; id++) {
        srv_job_t *j = s->jobs[id - 1];
        if (j && j->state == FG_JOB_PENDING && !j->in_core)
            srv__core_submit(c, j, true);
    }
    s->core = c->core;
    srv__est_model_build(c);
    srv__refresh_fairshare(c);
    return c->core;
}
