/*
 * queue.c - the start estimate of the queue from the core's state (fg_est_queue in
 * fairgpu/estimate.h; pure C, no I/O): the one estimate the controller and the simulator
 * make. It reads the core's nodes and running jobs, predicts run times with the run-time
 * model (runtime.c) and projects the pending jobs three times (p10, p50, p90;
 * project.c):
 *   - each node's GPUs are free at now, or at the predicted end of the job on them:
 *     now + the model's remaining run given how long it has run (the caller's ran_s);
 *   - the pending jobs given, in plan order, run for their predicted run times; without
 *     backfill (fifo, or backfill off) each starts no earlier than the one before it
 *     (the in-order rule);
 *   - the preemption rule (fair, wfq, round-robin, las with preemption on): a job that
 *     waits may stop long runners once it has waited preempt_wait_s (W). So a job the
 *     projection starts after now + W starts at now + W instead if there is room then:
 *     on one node (8k GPUs: k whole nodes), GPUs free by then or held by jobs that will
 *     be long runners by then (quantum_s of run over all attempts, and min_run_s and a
 *     checkpoint interval in this attempt: docs/scheduler.md, "Preemption"). Jobs
 *     earlier in plan order take that room first. Which tenants may stop which
 *     (entitlements, LAS queues) is not modelled: the room is any long runner's;
 *   - a projection of shorter runs may start a job later (backfill is not monotone):
 *     each job's three starts are sorted into p10 <= p50 <= p90.
 * It only reads the core: no decision depends on it. Job ids may be any values: the
 * running jobs seen in one call are kept in a small hash by id, the pending ones by
 * position.
 *
 * Worked example (one node of 8 GPUs): a 4-GPU job has run 10 min of a 4 h limit and its
 * user's jobs ran 0.25 of their limits (p50): it is predicted to end in 50 min. Pending
 * in plan order: an 8-GPU job (predicted 30 min), then a 4-GPU job (predicted 2 h: too
 * long for the gap the 8-GPU job leaves). The 8-GPU job is projected at 50 min, the
 * 4-GPU one at 80 min; the core's limit-based estimate says after the 8-GPU job's whole
 * limit. Under fair with W = 10 min, had the running job already been a long runner
 * (1 h of run), the 8-GPU job would be estimated at now + 10 min (it may preempt it
 * then: 4 GPUs free and the long runner's 4), and the 4-GPU job still at 80 min: the
 * job ahead of it in plan order takes that room first.
 *
 * Cost: O(nodes x GPUs) to read the nodes, one prediction per running job and per
 * pending job, then three projections of the n jobs (O(n x nodes), project.c).
 */
#include "fairgpu/estimate.h"

#include "common/xalloc.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define TYPES_MAX 64 /* distinct GPU types told apart (others: one more type) */

/* A running job seen in this call: its predicted ends and whether it is a victim. */
typedef struct run_slot {
    fg_job_id_t id; /* 0: empty */
    fg_time_t end[3];
    bool longrun;
} run_slot_t;

typedef struct queue {
    const fg_sched_t *s;
    const fg_rt_model_t *m;
    fg_time_t now;
    fg_est_job_fn fn;
    void *ctx;
    bool preempts, in_order;
    fg_time_t wait_s, quantum_s, min_run_s;
    int32_t nnodes;
    fg_proj_node_t *nodes;   /* per quantile: nnodes nodes */
    bool *victim;            /* per node GPU (node x FG_MAX_NODE_GPUS): a long runner's */
    bool *room;              /* per quantile, node GPU: room for preemption */
    int32_t *room_nodes;     /* scratch: the nodes found for one job */
    run_slot_t *runs;        /* open addressing by id; size a power of two */
    size_t runs_mask, nruns; /* (grown when half full) */
    const char *types[TYPES_MAX];
    int32_t ntypes;
} queue_t;

/* The small integer of node GPU type t (added when new and room is left; beyond
 * TYPES_MAX distinct ones: TYPES_MAX). */
static int32_t node_type(queue_t *q, const char *t)
{
    if (!t)
        t = "";
    for (int32_t i = 0; i < q->ntypes; i++)
        if (!strcmp(q->types[i], t))
            return i;
    if (q->ntypes == TYPES_MAX)
        return TYPES_MAX;
    q->types[q->ntypes] = t; /* the core's: it lives through the call */
    return q->ntypes++;
}

/* The type a pending job asks for: -1 any (NULL or ""), a node type's integer, or
 * TYPES_MAX (no node has it). */
static int32_t job_type(const queue_t *q, const char *t)
{
    if (!t || !*t)
        return -1;
    for (int32_t i = 0; i < q->ntypes; i++)
        if (!strcmp(q->types[i], t))
            return i;
    return TYPES_MAX;
}

/* The slot of running job id in runs[mask + 1]: its own, or the empty one where it
 * goes. */
static run_slot_t *run_slot(run_slot_t *runs, size_t mask, fg_job_id_t id)
{
    assert(id != 0);
    size_t i = (size_t)(id * 0x9E3779B97F4A7C15ull >> 17) & mask;
    while (runs[i].id && runs[i].id != id)
        i = (i + 1) & mask;
    return &runs[i];
}

/* Doubles the running jobs' table (a call sees few running jobs on most clusters: it
 * starts small). */
static void runs_grow(queue_t *q)
{
    const size_t cap = 2 * (q->runs_mask + 1);
    run_slot_t *t = fg_xcalloc(cap, sizeof *t);
    for (size_t i = 0; i <= q->runs_mask; i++)
        if (q->runs[i].id)
            *run_slot(t, cap - 1, q->runs[i].id) = q->runs[i];
    free(q->runs);
    q->runs = t;
    q->runs_mask = cap - 1;
}

/* The predicted ends (p10, p50, p90) of running job id, asked of the caller once per
 * call (the slot returned is valid until the next call). */
static const run_slot_t *running(queue_t *q, fg_job_id_t id)
{
    run_slot_t *r = run_slot(q->runs, q->runs_mask, id);
    if (r->id)
        return r;
    if (2 * (q->nruns + 1) > q->runs_mask + 1) {
        runs_grow(q);
        r = run_slot(q->runs, q->runs_mask, id);
    }
    q->nruns++;
    fg_est_job_t j;
    memset(&j, 0, sizeof j);
    q->fn(q->ctx, id, q->now, &j);
    fg_rt_pred_t p;
    fg_rt_predict(q->m, j.account, j.user, j.limit_s, j.ran_s, &p);
    r->id = id;
    r->end[0] = q->now + p.p10;
    r->end[1] = q->now + p.p50;
    r->end[2] = q->now + p.p90;
    /* a victim by then: quantum_s of run in all, min_run_s and a checkpoint interval
     * in this attempt (docs/scheduler.md, "Preemption") */
    const fg_time_t need = j.checkpoint_s > q->min_run_s ? j.checkpoint_s : q->min_run_s;
    r->longrun = j.served_s + q->wait_s >= q->quantum_s && j.attempt_s + q->wait_s >= need;
    return r;
}

static fg_proj_node_t *nodes_of(const queue_t *q, int k)
{
    return &q->nodes[(size_t)k * (size_t)q->nnodes];
}

/* The nodes of quantile k = 0, 1, 2 at now, and the GPUs held by long runners. */
static void nodes_fill(queue_t *q)
{
    for (int32_t n = 0; n < q->nnodes; n++) {
        fg_node_info_t ni;
        int e = fg_sched_node_info(q->s, n, &ni);
        assert(e == FG_OK);
        (void)e;
        const int32_t type = node_type(q, ni.gpu_type);
        for (int k = 0; k < 3; k++) {
            fg_proj_node_t *p = &nodes_of(q, k)[n];
            p->gpus = ni.gpus;
            p->type = type;
            p->up = ni.state == FG_NODE_UP;
        }
        for (int32_t g = 0; g < ni.gpus; g++) {
            const run_slot_t *r = ni.gpu_job[g] ? running(q, ni.gpu_job[g]) : NULL;
            q->victim[(size_t)n * FG_MAX_NODE_GPUS + (size_t)g] = r && r->longrun;
            for (int k = 0; k < 3; k++)
                nodes_of(q, k)[n].free_at[g] = r ? r->end[k] : q->now;
        }
    }
}

static bool *room_of(const queue_t *q, int k)
{
    return q->room + (size_t)k * (size_t)q->nnodes * FG_MAX_NODE_GPUS;
}

/* Marks in room_of(k) the GPUs a job could take at t by preemption under quantile k's
 * ends of the running jobs, as the core's victim search counts them: free by t, or held
 * by a job that will be a long runner then (GPUs free by t that the projection gives
 * to earlier jobs are counted too: an approximation). Returns how many. */
static int64_t room_fill(queue_t *q, int k, fg_time_t t)
{
    int64_t total = 0;
    for (int32_t n = 0; n < q->nnodes; n++) {
        const fg_proj_node_t *p = &nodes_of(q, k)[n];
        bool *u = room_of(q, k) + (size_t)n * FG_MAX_NODE_GPUS;
        for (int32_t i = 0; i < p->gpus; i++) {
            u[i] = p->up &&
                   (p->free_at[i] <= t || q->victim[(size_t)n * FG_MAX_NODE_GPUS + (size_t)i]);
            total += u[i];
        }
    }
    return total;
}

/* Takes room for a job of g GPUs from room_of(k): g GPUs of one node (g <= 8), or m
 * whole nodes of at least 8 GPUs (8m). Returns how many GPUs it took (0: no room). */
static int32_t room_take(queue_t *q, int k, int32_t g)
{
    bool *room = room_of(q, k);
    const int32_t m = g <= FG_WHOLE_NODE_GPUS ? 1 : g / FG_WHOLE_NODE_GPUS;
    int32_t found = 0, took = 0;
    int32_t *at = q->room_nodes;
    for (int32_t n = 0; n < q->nnodes && found < m; n++) {
        const bool *u = room + (size_t)n * FG_MAX_NODE_GPUS;
        const int32_t gpus = q->nodes[n].gpus; /* the same in every quantile */
        int32_t c = 0;
        for (int32_t i = 0; i < gpus; i++)
            c += u[i];
        if (g <= FG_WHOLE_NODE_GPUS ? c >= g : gpus >= FG_WHOLE_NODE_GPUS && c == gpus)
            at[found++] = n;
    }
    if (found < m)
        return 0;
    for (int32_t x = 0; x < m; x++) {
        bool *u = room + (size_t)at[x] * FG_MAX_NODE_GPUS;
        const int32_t gpus = q->nodes[at[x]].gpus;
        for (int32_t i = 0, left = g <= FG_WHOLE_NODE_GPUS ? g : gpus; i < gpus && left > 0; i++)
            if (u[i]) {
                u[i] = false;
                left--;
                took++;
            }
    }
    return took;
}

/* Projects pj[0..n) on quantile k's nodes into start[]. Without backfill (the in-order
 * rule) a job starts no earlier than the one before it: one job at a time, each not
 * before the last start (the gaps a job leaves are then of no use to later ones, so
 * nothing is lost between the calls); a job no node can hold blocks every job behind. */
static void project(queue_t *q, int k, fg_proj_job_t *pj, size_t n, fg_time_t *start)
{
    fg_proj_node_t *nodes = nodes_of(q, k);
    if (!q->in_order) {
        fg_proj_run(nodes, q->nnodes, pj, (int32_t)n, q->now, start);
        return;
    }
    fg_time_t last = q->now;
    for (size_t i = 0; i < n; i++) {
        if (pj[i].not_before < last)
            pj[i].not_before = last;
        fg_proj_run(nodes, q->nnodes, &pj[i], 1, q->now, &start[i]);
        if (start[i] == FG_TIME_NEVER) {
            for (size_t x = i + 1; x < n; x++)
                start[x] = FG_TIME_NEVER;
            return;
        }
        last = start[i];
    }
}

/* Moves a job of the projection whose start is after `by` to `by` where room_of(k) has
 * room for it, in plan order, while room is left. */
static void preempt(queue_t *q, int k, const fg_proj_job_t *pj, size_t n, fg_time_t by,
                    int64_t room, fg_time_t *start)
{
    for (size_t i = 0; i < n && room > 0; i++) {
        if (start[i] == FG_TIME_NEVER || start[i] <= by)
            continue;
        const int32_t took = room_take(q, k, pj[i].gpus);
        room -= took;
        if (took)
            start[i] = by;
    }
}

static void swap_if(fg_time_t *a, fg_time_t *b)
{
    if (*a > *b) {
        const fg_time_t t = *a;
        *a = *b;
        *b = t;
    }
}

static void queue_init(queue_t *q, const fg_sched_t *s, const fg_rt_model_t *m, fg_time_t now,
                       fg_est_job_fn fn, void *ctx)
{
    memset(q, 0, sizeof *q);
    q->s = s;
    q->m = m;
    q->now = now;
    q->fn = fn;
    q->ctx = ctx;
    const fg_config_t *c = fg_sched_config(s);
    q->preempts = c->preemption && (c->policy == FG_POLICY_FAIR || c->policy == FG_POLICY_WFQ ||
                                    c->policy == FG_POLICY_RR || c->policy == FG_POLICY_LAS);
    q->in_order = !c->backfill || c->policy == FG_POLICY_FIFO;
    q->wait_s = c->preempt_wait_s;
    q->quantum_s = c->quantum_s;
    q->min_run_s = c->min_run_s;
    q->nnodes = (int32_t)fg_sched_node_count(s);
    const size_t gpus = (size_t)q->nnodes * FG_MAX_NODE_GPUS;
    q->nodes = fg_xcalloc(3 * (size_t)q->nnodes + 1, sizeof *q->nodes);
    q->victim = fg_xcalloc(gpus + 1, sizeof *q->victim);
    q->room = fg_xcalloc(3 * gpus + 1, sizeof *q->room);
    q->room_nodes = fg_xcalloc((size_t)q->nnodes + 1, sizeof *q->room_nodes);
    q->runs = fg_xcalloc(64, sizeof *q->runs);
    q->runs_mask = 63;
}

static void queue_free(queue_t *q)
{
    free(q->nodes);
    free(q->victim);
    free(q->room);
    free(q->room_nodes);
    free(q->runs);
}

void fg_est_queue(const fg_sched_t *s, const fg_rt_model_t *m, fg_time_t now,
                  const fg_job_id_t *ids, size_t n, fg_est_job_fn fn, void *ctx,
                  fg_est_start_t *out)
{
    assert(s && m && fn && (n == 0 || (ids && out)));
    if (n == 0)
        return;
    queue_t q;
    queue_init(&q, s, m, now, fn, ctx);
    nodes_fill(&q); /* (the node types first: a job's type is one of theirs if any) */
    const fg_time_t by = now + q.wait_s;
    int64_t room[3] = {0, 0, 0};
    for (int k = 0; k < 3 && q.preempts; k++)
        room[k] = room_fill(&q, k, by);
    fg_rt_pred_t *pred = fg_xmalloc(n * sizeof *pred);
    fg_proj_job_t *pj = fg_xmalloc(n * sizeof *pj), *base = fg_xmalloc(n * sizeof *base);
    fg_time_t *start = fg_xmalloc(n * sizeof *start);
    for (size_t i = 0; i < n; i++) {
        fg_est_job_t j;
        memset(&j, 0, sizeof j);
        j.gpus = 1;
        fn(ctx, ids[i], now, &j);
        fg_rt_predict(m, j.account, j.user, j.limit_s, j.ran_s, &pred[i]);
        base[i] = (fg_proj_job_t){
            .gpus = j.gpus, .type = job_type(&q, j.gpu_type), .not_before = j.not_before};
    }
    for (int k = 0; k < 3; k++) {
        for (size_t i = 0; i < n; i++) {
            pj[i] = base[i];
            pj[i].run_s = k == 0 ? pred[i].p10 : k == 1 ? pred[i].p50 : pred[i].p90;
        }
        project(&q, k, pj, n, start);
        if (q.preempts)
            preempt(&q, k, pj, n, by, room[k], start);
        for (size_t i = 0; i < n; i++)
            *(k == 0 ? &out[i].p10 : k == 1 ? &out[i].p50 : &out[i].p90) = start[i];
    }
    for (size_t i = 0; i < n; i++) {
        swap_if(&out[i].p10, &out[i].p50);
        swap_if(&out[i].p50, &out[i].p90);
        swap_if(&out[i].p10, &out[i].p50);
        out[i].source = pred[i].source;
        assert(out[i].p10 <= out[i].p50 && out[i].p50 <= out[i].p90);
    }
    free(pred);
    free(pj);
    free(base);
    free(start);
    queue_free(&q);
}
