/*
 * sched_starts.c - the pass's decisions applied: starts become RUNNING jobs with a
 * new attempt and one start message per rank; preemptions become stop messages.
 *
 * The core decides on GPU slots (node index, GPU mask); this file turns them into what
 * the store and the agents know: node names, GPU indices and UUIDs, the attempt record,
 * and the start messages. The messages are only queued here: they reach the agents
 * after the iteration's commit (sched_commit.c), so no job starts that the store does
 * not have as RUNNING.
 * Example: job 12 gets node 0 mask 0x3 and node 1 mask 0x3: it becomes RUNNING with
 * nodes ["a","b"], gpu indices [[0,1],[0,1]], attempt 1, and ranks 0 (on a, the master,
 * port 29500 + a's next port) and 1 (on b) each get a start message with their GPUs.
 */
#include "server/sched_int.h"

#include "common/log.h"
#include "common/xalloc.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The GPU indices of mask on node n, as an array; their UUIDs are appended to uuids
 * ("" where n does not list the GPU). */
static json_t *mask_gpus(const srv_node_t *n, uint64_t mask, json_t *uuids)
{
    json_t *ix = json_array();
    for (int g = 0; g < FG_MAX_NODE_GPUS; g++)
        if (mask & (1ULL << g)) {
            json_array_append_new(ix, json_integer(g));
            json_array_append_new(uuids, json_string(n && g < n->ngpus ? n->gpus[g].uuid : ""));
        }
    return ix;
}

/* Gives j one rank per allocation of start st (node name and GPU mask), and records
 * its nodes and GPU indices; the GPUs' UUIDs are appended to uuids. mu held. */
static void assign_ranks(sctx_t *c, srv_job_t *j, const fg_start_t *st, json_t *uuids)
{
    srv_t *s = c->s;
    json_t *nodes = json_array(), *idx = json_array();
    free(j->ranks);
    j->nranks = st->alloc_n;
    j->ranks = fg_xcalloc((size_t)(st->alloc_n ? st->alloc_n : 1), sizeof *j->ranks);
    for (int k = 0; k < st->alloc_n; k++) {
        const fg_alloc_t *al = &c->d.allocs[st->alloc_off + k];
        fg_node_info_t ni;
        fg_sched_node_info(c->core, al->node, &ni);
        srv_node_t *n = srv_node_by_name(s, ni.name);
        snprintf(j->ranks[k].node, sizeof j->ranks[k].node, "%s", ni.name);
        j->ranks[k].gpu_mask = al->gpu_mask;
        json_array_append_new(nodes, json_string(ni.name));
        json_array_append_new(idx, mask_gpus(n, al->gpu_mask, uuids));
    }
    free(j->r.nodes_json);
    free(j->r.gpu_indices_json);
    j->r.nodes_json = json_dumps(nodes, JSON_COMPACT);
    j->r.gpu_indices_json = json_dumps(idx, JSON_COMPACT);
    json_decref(nodes);
    json_decref(idx);
}

/* Makes j RUNNING as attempt st->attempt, with its attempt record (inserted at the
 * commit) and its "started" event. mu held. */
static void record_start(sctx_t *c, srv_job_t *j, const fg_start_t *st, json_t *uuids)
{
    srv_t *s = c->s;
    j->r.attempts = st->attempt;
    j->r.start_time = c->now;
    j->r.end_time = 0;
    j->r.has_exit_code = false;
    j->r.estimated_start = 0;
    srv__est_started(c, j);
    j->epoch = s->epoch;
    j->stop_sent = false;
    srv__set_state(s, j, FG_JOB_RUNNING);
    srv__set_reason(j, 0, NULL);
    fg_store_attempt_clear(&j->cur);
    j->cur.job_id = j->r.id;
    j->cur.attempt = st->attempt;
    j->cur.nodes_json = srv_strdup0(j->r.nodes_json);
    j->cur.gpu_uuids_json = json_dumps(uuids, JSON_COMPACT);
    j->cur.start_time_ms = srv_now_ms();
    j->cur.end_cause = -1;
    srv__add_attempt(c, &j->cur, OP_ATTEMPT_INSERT);
    srv__mark_dirty(c, j);
    srv__add_event(c, "job", (uint64_t)j->r.id, "PENDING", "RUNNING", "started", j->ranks[0].node);
}

/* What every rank's start message of one attempt shares. */
typedef struct start_common {
    const srv_node_t *master; /* rank 0's node, or NULL */
    int port;                 /* the master's rendezvous port */
    json_t *cmd, *env;
    const char *user;
    char id[24];
} start_common_t;

/* The start message of rank k of j. */
static json_t *start_msg(srv_t *s, const srv_job_t *j, int k, const start_common_t *sc)
{
    const srv_node_t *n = srv_node_by_name(s, j->ranks[k].node);
    json_t *gu = json_array();
    json_t *g = mask_gpus(n, j->ranks[k].gpu_mask, gu);
    json_t *msg =
        json_pack("{s:s,s:s,s:i,s:I,s:i,s:i,s:s,s:i,s:s,s:s?,s:s,s:O,s:O,s:o,s:o,s:I,s:i,s:s}",
                  "type", "start", "job_id", sc->id, "attempt", j->r.attempts, "epoch",
                  (json_int_t)j->epoch, "rank", k, "num_nodes", j->nranks, "master_addr",
                  sc->master ? sc->master->addr : "127.0.0.1", "master_port", sc->port, "name",
                  j->r.name ? j->r.name : "", "user", sc->user, "account", j->r.account, "command",
                  sc->cmd ? sc->cmd : json_null(), "env", sc->env ? sc->env : json_object(), "gpus",
                  g, "gpu_uuids", gu, "time_limit_s", (json_int_t)j->r.time_limit_s, "grace_s", 30,
                  "priority", fg_prio_name((fg_prio_t)j->r.priority));
    if (j->r.model)
        json_object_set_new(msg, "model", json_string(j->r.model));
    if (j->r.dataset)
        json_object_set_new(msg, "dataset", json_string(j->r.dataset));
    if (j->r.cpus)
        json_object_set_new(msg, "cpus", json_integer(j->r.cpus));
    if (j->r.memory_mb)
        json_object_set_new(msg, "memory_mb", json_integer(j->r.memory_mb));
    return msg;
}

/* Queues one start message per rank of running job j. mu held. */
static void send_starts(sctx_t *c, srv_job_t *j)
{
    srv_t *s = c->s;
    start_common_t sc = {.port = 29500};
    srv_node_t *n0 = srv_node_by_name(s, j->ranks[0].node);
    if (n0)
        sc.port = 29500 + (n0->master_port_next++ % 500);
    sc.master = n0;
    sc.cmd =
        j->r.command_json ? json_loads(j->r.command_json, JSON_DECODE_ANY, NULL) : json_array();
    sc.env = j->r.env_json ? json_loads(j->r.env_json, 0, NULL) : json_object();
    srv_user_t *u = srv_user_by_id(s, j->r.user_id);
    sc.user = u ? u->r.username : NULL;
    snprintf(sc.id, sizeof sc.id, "%lld", (long long)j->r.id);
    for (int k = 0; k < j->nranks; k++)
        srv__send_to(c, j->ranks[k].node, start_msg(s, j, k, &sc));
    json_decref(sc.cmd);
    json_decref(sc.env);
}

/* Applies start st of the last pass. mu held. */
static void apply_start(sctx_t *c, const fg_start_t *st)
{
    srv_job_t *j = srv__job(c, st->job);
    if (!j) {
        fg_log(FG_LOG_ERROR, "scheduler: the core started unknown job %llu",
               (unsigned long long)st->job);
        return;
    }
    /* the core starts only the pending jobs it was given, each on at least one node
     * (a job asks for 1 GPU or more) */
    assert(j->state == FG_JOB_PENDING && j->in_core);
    assert(st->alloc_n >= 1);
    atomic_fetch_add(&c->s->m.starts, 1);
    json_t *uuids = json_array();
    assign_ranks(c, j, st, uuids);
    record_start(c, j, st, uuids);
    send_starts(c, j);
    json_decref(uuids);
}

/* Asks the ranks of each job the last pass preempted to stop (once). mu held. */
static void apply_preempts(sctx_t *c)
{
    for (size_t i = 0; i < c->d.npreempts; i++) {
        srv_job_t *j = srv__job(c, c->d.preempts[i].job);
        if (!j || j->state != FG_JOB_RUNNING || j->stop_sent)
            continue;
        atomic_fetch_add(&c->s->m.preemptions, 1);
        j->stop_sent = true;
        srv__stop_ranks(c, j, "preempt", -1);
    }
}

/* Applies the last pass's starts and preemptions (mu taken here). */
void srv__apply_decisions(sctx_t *c)
{
    srv_t *s = c->s;
    if (!c->d.nstarts && !c->d.npreempts)
        return;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < c->d.nstarts; i++)
        apply_start(c, &c->d.starts[i]);
    apply_preempts(c);
    pthread_mutex_unlock(&s->mu);
}
