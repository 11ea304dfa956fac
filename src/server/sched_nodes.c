/*
 * sched_nodes.c - node states on the scheduler thread: down (missed heartbeats), drain
 * and resume by an admin, and a node as GET /v1/nodes shows it.
 *
 * A node is up, draining (no new jobs; running ones finish), drained (draining with
 * nothing left running) or down. A node whose agent misses heartbeats for
 * heartbeat_interval_s × heartbeat_misses is declared down and every attempt with a
 * rank there ends node_lost; it comes back up when its agent registers again
 * (sched_register.c). Example: with a 5 s interval and 3 misses, a node last heard
 * from 16 s ago is down; its 2-node job gets "stop (peer_failed)" on the other node
 * and is requeued "node_lost".
 */
#include "server/sched_int.h"

#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Declares node n down: ends every attempt with a rank there (node_lost). mu held. */
static void node_down(sctx_t *c, srv_node_t *n, const char *why)
{
    srv_t *s = c->s;
    fg_log(FG_LOG_WARN, "node %s is down (%s)", n->name, why);
    atomic_fetch_add(&s->m.node_losses, 1);
    n->state = FG_NODE_DOWN;
    n->registered = false;
    if (n->core_index >= 0)
        fg_sched_node_set_state(c->core, n->core_index, FG_NODE_DOWN, c->now);
    srv__add_node_state(c, n->name, "down");
    srv__add_event(c, "node", 0, NULL, "down", why, n->name);
    json_array_clear(n->outbox);
    size_t nrun;
    srv_job_t **run = srv__running_jobs(s, n->name, &nrun);
    for (size_t ri = 0; ri < nrun; ri++) {
        srv_job_t *j = run[ri];
        /* stop the ranks on other nodes, then end the attempt */
        for (int k = 0; k < j->nranks; k++)
            if (strcmp(j->ranks[k].node, n->name) && !j->ranks[k].ended)
                srv__send_to(c, j->ranks[k].node, srv__stop_msg(j, k, "peer_failed"));
        srv__end_attempt(c, j, FG_END_NODE_LOST, false, 0, 0);
    }
    free(run);
}

/* The state shown for n: "up", "down", "draining" or "drained". mu held. */
const char *srv__node_state_name(const srv_node_t *n, srv_t *s)
{
    if (n->state == FG_NODE_DOWN)
        return "down";
    if (n->state == FG_NODE_UP)
        return "up";
    /* draining: drained once nothing runs there */
    bool busy = false;
    for (size_t ri = 0; ri < s->nrunning && !busy; ri++) {
        const srv_job_t *j = s->jobs[s->running[ri] - 1];
        for (int k = 0; k < j->nranks; k++)
            if (!strcmp(j->ranks[k].node, n->name))
                busy = true;
    }
    return busy ? "draining" : "drained";
}

/* MSG_NODE_STATE: an admin's drain (cause 1) or resume (0) of node m->node. A down
 * node cannot be resumed (its agent must register); one drained while down stays so. */
void srv__do_node_state(sctx_t *c, srv_msg_t *m)
{
    srv_t *s = c->s;
    pthread_mutex_lock(&s->mu);
    srv_node_t *n = srv_node_by_name(s, m->node);
    if (!n) {
        srv__sync_error(m->sync, 404, "not_found", "no node '%s'", m->node);
    } else {
        bool drain = m->cause == 1;
        if (n->state != FG_NODE_DOWN) {
            fg_node_state_t st = drain ? FG_NODE_DRAINING : FG_NODE_UP;
            if (st != n->state) {
                n->state = st;
                if (n->core_index >= 0)
                    fg_sched_node_set_state(c->core, n->core_index, st, c->now);
                srv__add_node_state(c, n->name, drain ? "draining" : "up");
                srv__add_event(c, "node", 0, NULL, drain ? "draining" : "up",
                               drain ? "drain" : "resume", n->name);
                c->retry_parked = true;
            }
        } else if (!drain) {
            srv__sync_error(m->sync, 409, "conflict",
                            "node '%s' is down; it comes back when its agent registers", m->node);
            goto done;
        } else {
            /* a down node marked for drain stays drained when it returns */
            n->state = FG_NODE_DOWN;
        }
        srv__sync_ok(m->sync, 200, srv_node_json(s, n));
    }
done:
    pthread_mutex_unlock(&s->mu);
    srv__add_sync(c, m->sync);
}

/* Declares down every node (not down yet) last heard from more than limit_ms before
 * now_ms. mu held. */
void srv__check_heartbeats(sctx_t *c, int64_t now_ms, int64_t limit_ms)
{
    srv_t *s = c->s;
    for (size_t i = 0; i < s->nnodes; i++) {
        srv_node_t *n = s->nodes[i];
        if (n->state == FG_NODE_DOWN)
            continue;
        if (now_ms - n->last_heartbeat_ms > limit_ms)
            node_down(c, n, "missed heartbeats");
    }
}

/* ------------------------------------------------------------------ node rendering */

/* Node n as GET /v1/nodes shows it, with the job holding each GPU. mu held. */
json_t *srv_node_json(srv_t *s, srv_node_t *n)
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
                     srv__node_state_name(n, s), "addr", n->addr, "cpus", n->cpus, "memory_mb",
                     (json_int_t)n->memory_mb, "gpu_type", n->gpu_type, "gpus", gpus,
                     "last_heartbeat",
                     n->last_heartbeat_ms ? json_integer(n->last_heartbeat_ms / 1000) : json_null(),
                     "isolated", n->isolated, "isolation", n->isolation);
}
