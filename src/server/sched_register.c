/*
 * sched_register.c - an agent's registration (POST /v1/agent/register): the node joins
 * (or rejoins) the cluster and the core, and what the agent holds is reconciled with
 * what the controller believes runs there.
 *
 * A registration carries the node's hardware (CPUs, memory, GPUs) and the ranks the
 * agent holds. The reconcile then settles every difference:
 *   - a rank the agent holds that is not live here (an ended attempt, another node's,
 *     an older epoch) is told to stop ("stale"); one of a cancelled job, "cancel";
 *   - a live rank the agent holds is adopted (restored attempts learn their epoch);
 *   - a rank assigned here that the agent does not hold is lost: its attempt ends
 *     node_lost, or not_started (requeued without using a retry) if it never started.
 * Example: the controller restarts while job 4 runs on node a; at a's registration its
 * agent lists job 4 rank 0 with epoch 7, so the rank is adopted with epoch 7 and the
 * job keeps running. Had the agent listed nothing, job 4's attempt would end.
 */
#include "server/sched_int.h"

#include "common/log.h"
#include "common/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The node called name, added (up, not in the core yet) if it is new; *fresh says
 * which. mu held. */
static srv_node_t *find_or_add_node(sctx_t *c, const char *name, bool *fresh)
{
    srv_t *s = c->s;
    srv_node_t *n = srv_node_by_name(s, name);
    *fresh = !n;
    if (n)
        return n;
    n = fg_xcalloc(1, sizeof *n);
    snprintf(n->name, sizeof n->name, "%s", name);
    n->core_index = -1;
    n->outbox = json_array();
    n->next_msg_seq = 1;
    n->created_at = c->now;
    n->state = FG_NODE_UP;
    s->nodes = fg_xgrow(s->nodes, &s->nodes_cap, s->nnodes + 1, sizeof *s->nodes);
    s->nodes[s->nnodes++] = n;
    return n;
}

/* Copies src into dst (n bytes); a cut string loses its partial UTF-8 character. */
static void copy_utf8_cut(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src);
    if (strlen(src) < n)
        return;
    size_t k = strlen(dst);
    while (k > 0 && ((unsigned char)dst[k - 1] & 0xC0) == 0x80)
        k--;
    if (k > 0 && ((unsigned char)dst[k - 1] & 0x80))
        k--;
    dst[k] = '\0';
}

/* The host part of a registration body b: instance, address, CPUs, memory and how
 * the agent isolates its jobs. */
static void read_host(srv_node_t *n, json_t *b)
{
    snprintf(n->instance, sizeof n->instance, "%s", srv_jstr(b, "instance", ""));
    snprintf(n->addr, sizeof n->addr, "%s", srv_jstr(b, "addr", "127.0.0.1"));
    n->cpus = (int)json_integer_value(json_object_get(b, "cpus"));
    n->memory_mb = json_integer_value(json_object_get(b, "memory_mb"));
    /* An agent that does not say is not known to isolate its jobs. */
    n->isolated = json_is_true(json_object_get(b, "isolated"));
    copy_utf8_cut(n->isolation, sizeof n->isolation, srv_jstr(b, "isolation", ""));
}

/* The GPUs of a registration body b. A node already in the core keeps its GPU count
 * (the core's slots for it do not change); its GPUs are read again when the count is
 * the same. */
static void read_gpus(srv_node_t *n, json_t *b)
{
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
        fg_log(FG_LOG_WARN, "node %s re-registered with %d GPUs instead of %d; keeping %d", n->name,
               ng, n->ngpus, n->ngpus);
    }
    snprintf(n->gpu_type, sizeof n->gpu_type, "%s", gtype[0] ? gtype : n->gpus[0].type);
}

/* The registered node is up again (or stays draining) and in the core; returns its
 * state. */
static fg_node_state_t join_core(sctx_t *c, srv_node_t *n)
{
    n->last_heartbeat_ms = srv_now_ms();
    n->registered = true;
    fg_node_state_t want = n->state == FG_NODE_DRAINING ? FG_NODE_DRAINING : FG_NODE_UP;
    n->state = want;
    if (n->core_index < 0) {
        int idx = fg_sched_node_add(c->core, n->name, n->ngpus, n->gpu_type, want);
        if (idx < 0)
            fg_log(FG_LOG_ERROR, "node %s: the core refused it: %s", n->name, fg_strerror(idx));
        else
            n->core_index = idx;
    } else {
        fg_sched_node_set_state(c->core, n->core_index, want, c->now);
    }
    c->retry_parked = true;
    return want;
}

/* Queues the node's record (state, hardware, GPUs) for the commit. */
static void queue_node_upsert(sctx_t *c, const srv_node_t *n, fg_node_state_t st)
{
    c->node_upserts = fg_xgrow(c->node_upserts, &c->node_upserts_cap, c->nnode_upserts + 1,
                               sizeof *c->node_upserts);
    fg_store_node_t *sn = &c->node_upserts[c->nnode_upserts++];
    srv__mark_changed(c->s);
    memset(sn, 0, sizeof *sn);
    sn->name = fg_xstrdup(n->name);
    sn->state = fg_xstrdup(st == FG_NODE_UP ? "up" : "draining");
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
}

/* The job of a `running` entry e, or 0. */
static uint64_t entry_job(json_t *e)
{
    uint64_t jid = 0;
    srv_parse_job_id(srv_jstr(e, "job_id", ""), &jid);
    return jid;
}

/* Goes through the ranks the agent holds (entries of `running`): adopts the live ones
 * and returns the stops for the others, and for those of cancelled jobs. mu held. */
static json_t *reconcile_held(sctx_t *c, const srv_node_t *n, json_t *running)
{
    json_t *stops = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(running, i, e)
    {
        uint64_t jid = entry_job(e);
        int att = (int)json_integer_value(json_object_get(e, "attempt"));
        int64_t ep = json_integer_value(json_object_get(e, "epoch"));
        int rank = (int)json_integer_value(json_object_get(e, "rank"));
        srv_job_t *j = jid ? srv__job(c, jid) : NULL;
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
    return stops;
}

/* Whether the agent holds rank k of j's current attempt (an entry of `running`). */
static bool agent_holds(json_t *running, const srv_job_t *j, int k)
{
    size_t i;
    json_t *e;
    bool held = false;
    json_array_foreach(running, i, e)
    {
        if (entry_job(e) == (uint64_t)j->r.id &&
            json_integer_value(json_object_get(e, "attempt")) == j->r.attempts &&
            json_integer_value(json_object_get(e, "rank")) == k &&
            (json_integer_value(json_object_get(e, "epoch")) == j->epoch || j->epoch == 0))
            held = true;
    }
    return held;
}

/* Rank k of j is not held by its node's agent: the attempt ends. A rank never
 * acknowledged (no started report, never held at a register) never reached the node:
 * its start was committed but not delivered (controller crash, agent restart), so it
 * is requeued without using a retry; one that did start is lost with its node. A start
 * that fails to arrive again and again (an agent that dies at each launch) stops
 * being free: it is lost like any other. mu held. */
static void lose_rank(sctx_t *c, srv_job_t *j, int k)
{
    fg_end_cause_t why = j->ranks[k].started ? FG_END_NODE_LOST : FG_END_NOT_STARTED;
    if (why == FG_END_NOT_STARTED && ++j->not_started > SRV_NOT_STARTED_MAX)
        why = FG_END_NODE_LOST;
    for (int q = 0; q < j->nranks; q++)
        if (q != k && !j->ranks[q].ended)
            srv__send_to(c, j->ranks[q].node, srv__stop_msg(j, q, "peer_failed"));
    srv__end_attempt(c, j, why, false, 0, 0);
}

/* Ends the attempts with a rank assigned to n that the agent does not hold. mu held. */
static void reconcile_missing(sctx_t *c, const srv_node_t *n, json_t *running)
{
    srv_t *s = c->s;
    size_t nrun;
    srv_job_t **run = srv__running_jobs(s, n->name, &nrun);
    for (size_t ri = 0; ri < nrun; ri++) {
        srv_job_t *j = run[ri];
        for (int k = 0; k < j->nranks; k++) {
            if (strcmp(j->ranks[k].node, n->name) || j->ranks[k].ended)
                continue;
            if (!agent_holds(running, j, k)) {
                lose_rank(c, j, k);
                break;
            }
        }
    }
    free(run);
}

/* MSG_REGISTER: the node joins, is stored, and is reconciled with its agent; the
 * agent is answered with the epoch, the node's state, the stops and the outbox
 * position to read from. */
void srv__do_register(sctx_t *c, srv_msg_t *m)
{
    srv_t *s = c->s;
    json_t *b = m->json;
    pthread_mutex_lock(&s->mu);
    bool fresh;
    srv_node_t *n = find_or_add_node(c, srv_jstr(b, "node", ""), &fresh);
    read_host(n, b);
    read_gpus(n, b);
    fg_node_state_t before = n->state;
    fg_node_state_t st = join_core(c, n);
    queue_node_upsert(c, n, st);
    if (st != before || fresh)
        srv__add_event(c, "node", 0, NULL, st == FG_NODE_UP ? "up" : "draining", "registered",
                       n->name);
    json_array_clear(n->outbox);
    int64_t after = n->next_msg_seq - 1;
    json_t *running = json_object_get(b, "running");
    json_t *stops = reconcile_held(c, n, running);
    reconcile_missing(c, n, running);
    json_t *reply =
        json_pack("{s:I,s:s,s:i,s:I,s:o,s:b}", "epoch", (json_int_t)s->epoch, "node_state",
                  srv__node_state_name(n, s), "heartbeat_interval_s", s->cfg.heartbeat_interval_s,
                  "after", (json_int_t)after, "stop", stops, "batch_reports", 1);
    pthread_mutex_unlock(&s->mu);
    srv__sync_ok(m->sync, 200, reply);
    srv__add_sync(c, m->sync);
}
