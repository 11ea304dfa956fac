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
 * pending job, then three projections of the n jobs (O(n x nodes), project.c) and, with
 * the preemption rule, O(nodes) per job to find room. The arrays of a call live in a
 * scratch the caller keeps (fg_est_scratch_t): a call in a loop allocates nothing of
 * its own once they have grown (fg_proj_run still allocates its own).
 */
#include "fairgpu/estimate.h"

#include "common/xalloc.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define TYPES_MAX 64 /* distinct GPU types told apart (others: one more type) */

/* A running job seen in this call: the first GPU it was seen on (node x
 * FG_MAX_NODE_GPUS + GPU), which holds its predicted ends and whether it is a victim. */
typedef struct run_slot {
    fg_job_id_t id; /* 0: empty */
    int32_t at;
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
    fg_proj_node_t *nodes[3]; /* per quantile: nnodes nodes */
    bool *victim;             /* per node GPU (node x FG_MAX_NODE_GPUS): a long runner's */
    int32_t *room;            /* per quantile, node: GPUs of room for preemption */
    int32_t *room_nodes;      /* scratch: the nodes found for one job */
    run_slot_t *runs;         /* open addressing by id; size a power of two */
    size_t runs_mask, nruns;  /* (at least twice the busy GPUs: half empty at most) */
    const char *types[TYPES_MAX];
    int32_t ntypes;
} queue_t;

/* What a call needs beyond its inputs, kept from call to call (fairgpu/estimate.h):
 * each array grows to the largest call's need and stays. */
struct fg_est_scratch {
    fg_proj_node_t *nodes[3];
    size_t nodes_cap[3];
    bool *victim;
    int32_t *room;
    size_t victim_cap, room_cap;
    int32_t *room_nodes;
    size_t room_nodes_cap;
    run_slot_t *runs;
    size_t runs_cap;
    fg_rt_pred_t *pred;
    fg_proj_job_t *pj, *base;
    fg_time_t *start;
    size_t pred_cap, pj_cap, base_cap, start_cap;
};

fg_est_scratch_t *fg_est_scratch_new(void)
{
    return fg_xcalloc(1, sizeof(fg_est_scratch_t));
}

void fg_est_scratch_free(fg_est_scratch_t *w)
{
    if (!w)
        return;
    for (int k = 0; k < 3; k++)
        free(w->nodes[k]);
    free(w->victim);
    free(w->room);
    free(w->room_nodes);
    free(w->runs);
    free(w->pred);
    free(w->pj);
    free(w->base);
    free(w->start);
    free(w);
}

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

static fg_proj_node_t *nodes_of(const queue_t *q, int k)
{
    return q->nodes[k];
}

/* Sets GPU g of node n, held by running job id: free at the job's predicted ends (p10,
 * p50, p90 in quantiles 0, 1, 2), and a victim if the job will be a long runner by
 * now + wait_s. The caller is asked once per job: its other GPUs copy the first. */
static void gpu_held(queue_t *q, int32_t n, int32_t g, fg_job_id_t id)
{
    const int32_t at = n * FG_MAX_NODE_GPUS + g;
    run_slot_t *r = run_slot(q->runs, q->runs_mask, id);
    if (r->id) {
        for (int k = 0; k < 3; k++)
            nodes_of(q, k)[n].free_at[g] =
                nodes_of(q, k)[r->at / FG_MAX_NODE_GPUS].free_at[r->at % FG_MAX_NODE_GPUS];
        q->victim[at] = q->victim[r->at];
        return;
    }
    assert(2 * ++q->nruns <= q->runs_mask + 1);
    *r = (run_slot_t){.id = id, .at = at};
    fg_est_job_t j;
    memset(&j, 0, sizeof j);
    q->fn(q->ctx, id, q->now, &j);
    fg_rt_pred_t p;
    fg_rt_predict(q->m, j.account, j.user, j.limit_s, j.ran_s, &p);
    nodes_of(q, 0)[n].free_at[g] = q->now + p.p10;
    nodes_of(q, 1)[n].free_at[g] = q->now + p.p50;
    nodes_of(q, 2)[n].free_at[g] = q->now + p.p90;
    /* a victim by then: quantum_s of run in all, min_run_s and a checkpoint interval
     * in this attempt (docs/scheduler.md, "Preemption") */
    const fg_time_t need = j.checkpoint_s > q->min_run_s ? j.checkpoint_s : q->min_run_s;
    q->victim[at] = j.served_s + q->wait_s >= q->quantum_s && j.attempt_s + q->wait_s >= need;
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
        for (int32_t g = 0; g < ni.gpus; g++)
            if (ni.gpu_job[g])
                gpu_held(q, n, g, ni.gpu_job[g]);
            else
                for (int k = 0; k < 3; k++)
                    nodes_of(q, k)[n].free_at[g] = q->now; /* (victim: calloc's false) */
    }
}

static int32_t *room_of(const queue_t *q, int k)
{
    return q->room + (size_t)k * (size_t)q->nnodes;
}

/* Counts per node in room_of(k) the GPUs a job could take at t by preemption under
 * quantile k's ends of the running jobs, as the core's victim search counts them: free
 * by t, or held by a job that will be a long runner then (GPUs free by t that the
 * projection gives to earlier jobs are counted too: an approximation). Returns the
 * total. */
static int64_t room_fill(queue_t *q, int k, fg_time_t t)
{
    int64_t total = 0;
    for (int32_t n = 0; n < q->nnodes; n++) {
        const fg_proj_node_t *p = &nodes_of(q, k)[n];
        int32_t c = 0;
        for (int32_t i = 0; i < p->gpus; i++)
            c += p->up &&
                 (p->free_at[i] <= t || q->victim[(size_t)n * FG_MAX_NODE_GPUS + (size_t)i]);
        room_of(q, k)[n] = c;
        total += c;
    }
    return total;
}

/* Takes room for a job of g GPUs from room_of(k): g GPUs of the first node with that
 * many (g <= 8), or the first m nodes of at least 8 GPUs whose every GPU is room (8m).
 * Returns how many GPUs it took (0: no room). */
static int32_t room_take(queue_t *q, int k, int32_t g)
{
    int32_t *room = room_of(q, k);
    if (g <= FG_WHOLE_NODE_GPUS) {
        for (int32_t n = 0; n < q->nnodes; n++)
            if (room[n] >= g) {
                room[n] -= g;
                return g;
            }
        return 0;
    }
    const int32_t m = g / FG_WHOLE_NODE_GPUS;
    int32_t found = 0, took = 0;
    int32_t *at = q->room_nodes;
    for (int32_t n = 0; n < q->nnodes && found < m; n++) {
        const int32_t gpus = q->nodes[0][n].gpus; /* the same in every quantile */
        if (gpus >= FG_WHOLE_NODE_GPUS && room[n] == gpus)
            at[found++] = n;
    }
    if (found < m)
        return 0;
    for (int32_t x = 0; x < m; x++) {
        took += room[at[x]];
        room[at[x]] = 0;
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

/* The running jobs on the nodes: at most one per busy GPU. */
static size_t busy_gpus(const fg_sched_t *s, int32_t nnodes)
{
    size_t busy = 0;
    for (int32_t n = 0; n < nnodes; n++) {
        fg_node_info_t ni;
        if (fg_sched_node_info(s, n, &ni) == FG_OK)
            for (int32_t g = 0; g < ni.gpus; g++)
                busy += ni.gpu_job[g] != 0;
    }
    return busy;
}

/* Sets up q for a call, its arrays in w (grown as needed; victim and runs cleared). */
static void queue_init(queue_t *q, fg_est_scratch_t *w, const fg_sched_t *s, const fg_rt_model_t *m,
                       fg_time_t now, fg_est_job_fn fn, void *ctx)
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
    const size_t nn = (size_t)q->nnodes + 1, gpus = nn * FG_MAX_NODE_GPUS;
    for (int k = 0; k < 3; k++) /* (each written before it is read) */
        q->nodes[k] = w->nodes[k] =
            fg_xgrow(w->nodes[k], &w->nodes_cap[k], nn, sizeof(fg_proj_node_t));
    q->victim = w->victim = fg_xgrow(w->victim, &w->victim_cap, gpus, sizeof(bool));
    memset(q->victim, 0, gpus * sizeof(bool));
    if (q->preempts)
        q->room = w->room = fg_xgrow(w->room, &w->room_cap, 3 * nn, sizeof(int32_t));
    q->room_nodes = w->room_nodes =
        fg_xgrow(w->room_nodes, &w->room_nodes_cap, nn, sizeof(int32_t));
    size_t cap = 16;
    while (cap < 2 * busy_gpus(s, q->nnodes))
        cap *= 2;
    q->runs = w->runs = fg_xgrow(w->runs, &w->runs_cap, cap, sizeof(run_slot_t));
    memset(q->runs, 0, cap * sizeof(run_slot_t));
    q->runs_mask = cap - 1;
}

void fg_est_queue(fg_est_scratch_t *w, const fg_sched_t *s, const fg_rt_model_t *m, fg_time_t now,
                  const fg_job_id_t *ids, size_t n, fg_est_job_fn fn, void *ctx,
                  fg_est_start_t *out)
{
    assert(s && m && fn && (n == 0 || (ids && out)));
    if (n == 0)
        return;
    fg_est_scratch_t *own = w ? NULL : fg_est_scratch_new();
    if (!w)
        w = own;
    queue_t q;
    queue_init(&q, w, s, m, now, fn, ctx);
    nodes_fill(&q); /* (the node types first: a job's type is one of theirs if any) */
    const fg_time_t by = now + q.wait_s;
    int64_t room[3] = {0, 0, 0};
    for (int k = 0; k < 3 && q.preempts; k++)
        room[k] = room_fill(&q, k, by);
    fg_rt_pred_t *pred = w->pred = fg_xgrow(w->pred, &w->pred_cap, n, sizeof *pred);
    fg_proj_job_t *pj = w->pj = fg_xgrow(w->pj, &w->pj_cap, n, sizeof *pj);
    fg_proj_job_t *base = w->base = fg_xgrow(w->base, &w->base_cap, n, sizeof *base);
    fg_time_t *start = w->start = fg_xgrow(w->start, &w->start_cap, n, sizeof *start);
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
    fg_est_scratch_free(own);
}
