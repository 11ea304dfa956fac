/*
 * histest.c - the replay's history-based start estimate (--estimates history).
 *
 * The replay records every job that ends (its run time against its limit) in a
 * run-time model (src/estimate/runtime.c). After the passes at an arrival time, for the
 * arrivals that still wait, it projects the queue three times (p10, p50, p90;
 * src/estimate/project.c):
 *   - each node's GPUs are free at now, or at the predicted end of the job on them:
 *     now + the model's remaining run time given how long it has run (a resumed job:
 *     what it kept from its checkpoints, plus this attempt);
 *   - the pending jobs, in the core's plan order (fg_sched_plan_order) up to the last
 *     arrival, run for their predicted run times (a requeued job: given what it kept);
 *     without backfill (fifo, or backfill off) each starts no earlier than the one
 *     before it;
 *   - the preemption rule (fair, wfq, round-robin, las with preemption on): a job that
 *     waits may stop long runners once it has waited preempt_wait_s (W). So a job the
 *     projection starts after now + W starts at now + W instead if there is room then:
 *     on one node (8k GPUs: k whole nodes), GPUs free by then or held by jobs that will
 *     be long runners by then (quantum_s of run, and min_run_s and a checkpoint
 *     interval in their attempt: docs/scheduler.md, "Preemption"). Jobs earlier in plan
 *     order take that room first. Which tenants may stop which (entitlements, LAS
 *     queues) is not modelled: the room is any long runner's;
 *   - each arrival's projected start is its estimate, the p10 and p90 projections its
 *     range.
 * It only reads the core's state: no decision depends on it.
 *
 * Worked example (one node of 8 GPUs): a 4-GPU job has run 10 min of a 4 h limit and its
 * user's jobs ran 0.25 of their limits (p50): it is predicted to end in 50 min. Pending
 * in plan order: an 8-GPU job (predicted 30 min), then the arrival (4 GPUs, predicted
 * 2 h: too long for the gap the 8-GPU job leaves). The 8-GPU job is projected at 50 min,
 * the arrival at 80 min; the core's limit-based estimate
 * says after the 8-GPU job's whole limit. Under fair with W = 10 min, had the running
 * job already been a long runner (1 h of run), the 8-GPU job would be estimated at now
 * + 10 min (it may preempt it then: 4 GPUs free and the long runner's 4), and the
 * arrival still at 80 min: the job ahead of it in plan order takes that room first.
 *
 * Cost: the plan order is read in growing prefixes (256, 512, ...) until it holds every
 * arrival, so a job near the head costs little; the projection is O(prefix x nodes)
 * (src/estimate/project.c).
 */
#include "sim/histest.h"

#include "common/xalloc.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define ORDER_FIRST 256

void fg_histest_init(fg_histest_t *h, const fg_sched_t *s, size_t njobs)
{
    memset(h, 0, sizeof *h);
    h->model = fg_rt_new();
    h->njobs = njobs;
    h->stamp = fg_xcalloc(njobs + 1, sizeof *h->stamp);
    h->end = fg_xcalloc(njobs + 1, sizeof *h->end);
    h->longrun = fg_xcalloc(njobs + 1, sizeof *h->longrun);
    h->nnodes = (int32_t)fg_sched_node_count(s);
    h->nodes = fg_xcalloc(3 * (size_t)h->nnodes + 1, sizeof *h->nodes);
    h->victim = fg_xcalloc((size_t)h->nnodes * FG_MAX_NODE_GPUS + 1, sizeof *h->victim);
    h->usable = fg_xcalloc(3 * (size_t)h->nnodes * FG_MAX_NODE_GPUS + 1, sizeof *h->usable);
    h->room_nodes = fg_xcalloc((size_t)h->nnodes + 1, sizeof *h->room_nodes);
    const fg_config_t *c = fg_sched_config(s);
    h->preempts = c->preemption && (c->policy == FG_POLICY_FAIR || c->policy == FG_POLICY_WFQ ||
                                    c->policy == FG_POLICY_RR || c->policy == FG_POLICY_LAS);
    h->in_order = !c->backfill || c->policy == FG_POLICY_FIFO;
    h->wait_s = c->preempt_wait_s;
    h->quantum_s = c->quantum_s;
    h->min_run_s = c->min_run_s;
}

void fg_histest_free(fg_histest_t *h)
{
    fg_rt_free(h->model);
    free(h->stamp);
    free(h->end);
    free(h->longrun);
    free(h->victim);
    free(h->usable);
    free(h->room_nodes);
    free(h->order);
    free(h->nodes);
    free(h->pj);
    free(h->start);
    memset(h, 0, sizeof *h);
}

void fg_histest_record(fg_histest_t *h, const char *account, const char *user, int64_t limit_s,
                       int64_t ran_s)
{
    fg_rt_record(h->model, account, user, limit_s, ran_s);
}

/* The predicted ends (p10, p50, p90) of running job id, made once per call. */
static const int64_t *running_end(fg_histest_t *h, fg_job_id_t id, int64_t now,
                                  fg_histest_job_fn fn, void *ctx)
{
    assert(id >= 1 && id <= h->njobs);
    if (h->stamp[id] != h->call) {
        fg_histest_job_t j;
        fn(ctx, id, now, &j);
        fg_rt_pred_t p;
        fg_rt_predict(h->model, j.account, j.user, j.limit_s, j.ran_s, &p);
        h->end[id][0] = now + p.p10;
        h->end[id][1] = now + p.p50;
        h->end[id][2] = now + p.p90;
        /* a victim by then: quantum_s of run in all, min_run_s and a checkpoint interval
         * in this attempt (docs/scheduler.md, "Preemption") */
        const int64_t need = j.checkpoint_s > h->min_run_s ? j.checkpoint_s : h->min_run_s;
        h->longrun[id] = j.ran_s + h->wait_s >= h->quantum_s && j.attempt_s + h->wait_s >= need;
        h->stamp[id] = h->call;
    }
    return h->end[id];
}

/* The nodes of quantile q = 0, 1, 2 at now: h->nodes[q * nnodes ...]. */
static void nodes_fill(fg_histest_t *h, const fg_sched_t *s, int64_t now, fg_histest_job_fn fn,
                       void *ctx)
{
    for (int32_t k = 0; k < h->nnodes; k++) {
        fg_node_info_t ni;
        int e = fg_sched_node_info(s, k, &ni);
        assert(e == FG_OK);
        (void)e;
        for (int q = 0; q < 3; q++) {
            fg_proj_node_t *n = &h->nodes[(size_t)q * (size_t)h->nnodes + (size_t)k];
            n->gpus = ni.gpus;
            n->type = 0; /* replayed jobs ask for any type */
            n->up = ni.state == FG_NODE_UP;
        }
        for (int32_t g = 0; g < ni.gpus; g++) {
            const int64_t *end = ni.gpu_job[g] ? running_end(h, ni.gpu_job[g], now, fn, ctx) : NULL;
            h->victim[(size_t)k * FG_MAX_NODE_GPUS + (size_t)g] = end && h->longrun[ni.gpu_job[g]];
            for (int q = 0; q < 3; q++)
                h->nodes[(size_t)q * (size_t)h->nnodes + (size_t)k].free_at[g] = end ? end[q] : now;
        }
    }
}

/* The room for preemption of quantile q: h->usable[q * nnodes * FG_MAX_NODE_GPUS ...]. */
static bool *room_of(const fg_histest_t *h, int q)
{
    return h->usable + (size_t)q * (size_t)h->nnodes * FG_MAX_NODE_GPUS;
}

/* Marks in room_of(q) the GPUs a job could take at t by preemption under quantile q's
 * ends of the running jobs, as the core's victim search counts them: free by t, or held
 * by a job that will be a long runner then (GPUs free by t that the projection gives
 * to earlier jobs are counted too: an approximation). Returns how many. */
static int64_t room_fill(fg_histest_t *h, int q, int64_t t)
{
    int64_t total = 0;
    for (int32_t k = 0; k < h->nnodes; k++) {
        const fg_proj_node_t *n = &h->nodes[(size_t)q * (size_t)h->nnodes + (size_t)k];
        bool *u = room_of(h, q) + (size_t)k * FG_MAX_NODE_GPUS;
        for (int32_t i = 0; i < n->gpus; i++) {
            u[i] = n->up &&
                   (n->free_at[i] <= t || h->victim[(size_t)k * FG_MAX_NODE_GPUS + (size_t)i]);
            total += u[i];
        }
    }
    return total;
}

/* Takes room for a job of g GPUs from room_of(q): g GPUs of one node (g <= 8), or k
 * whole nodes of at least 8 GPUs (8k). Returns how many GPUs it took (0: no room). */
static int32_t room_take(fg_histest_t *h, int q, int32_t g)
{
    bool *room = room_of(h, q);
    const int32_t k = g <= FG_WHOLE_NODE_GPUS ? 1 : g / FG_WHOLE_NODE_GPUS;
    int32_t found = 0, took = 0;
    int32_t *at = h->room_nodes;
    for (int32_t n = 0; n < h->nnodes && found < k; n++) {
        const bool *u = room + (size_t)n * FG_MAX_NODE_GPUS;
        const int32_t gpus = h->nodes[n].gpus; /* the same in every quantile */
        int32_t c = 0;
        for (int32_t i = 0; i < gpus; i++)
            c += u[i];
        if (g <= FG_WHOLE_NODE_GPUS ? c >= g : gpus >= FG_WHOLE_NODE_GPUS && c == gpus)
            at[found++] = n;
    }
    if (found < k)
        return 0;
    for (int32_t m = 0; m < k; m++) {
        bool *u = room + (size_t)at[m] * FG_MAX_NODE_GPUS;
        const int32_t gpus = h->nodes[at[m]].gpus;
        for (int32_t i = 0, left = g <= FG_WHOLE_NODE_GPUS ? g : gpus; i < gpus && left > 0; i++)
            if (u[i]) {
                u[i] = false;
                left--;
                took++;
            }
    }
    return took;
}

/* Projects h->pj[0..len) on quantile q's nodes into h->start. Without backfill (fifo,
 * or backfill off) a job starts no earlier than the one before it: one job at a time,
 * each not before the last start (the gaps a job leaves are then of no use to later
 * ones, so nothing is lost between the calls). */
static void project(fg_histest_t *h, int q, size_t len, int64_t now)
{
    fg_proj_node_t *nodes = &h->nodes[(size_t)q * (size_t)h->nnodes];
    if (!h->in_order) {
        fg_proj_run(nodes, h->nnodes, h->pj, (int32_t)len, now, h->start);
        return;
    }
    int64_t last = now;
    for (size_t i = 0; i < len; i++) {
        if (h->pj[i].not_before < last)
            h->pj[i].not_before = last;
        fg_proj_run(nodes, h->nnodes, &h->pj[i], 1, now, &h->start[i]);
        if (h->start[i] == FG_TIME_NEVER) { /* blocks every job behind it */
            for (size_t k = i + 1; k < len; k++)
                h->start[k] = FG_TIME_NEVER;
            return;
        }
        last = h->start[i];
    }
}

/* The plan order up to the last of ids[0..n): its length, or 0 if some is not in it. */
static size_t order_prefix(fg_histest_t *h, fg_sched_t *s, int64_t now, const fg_job_id_t *ids,
                           size_t n)
{
    const size_t pending = fg_sched_pending_count(s);
    for (size_t want = ORDER_FIRST;; want *= 2) {
        if (want > pending)
            want = pending;
        h->order = fg_xgrow(h->order, &h->order_cap, want + 1, sizeof *h->order);
        const size_t got = fg_sched_plan_order(s, now, h->order, want);
        size_t last = 0, found = 0;
        for (size_t i = 0; i < got && found < n; i++)
            for (size_t k = 0; k < n; k++)
                if (h->order[i] == ids[k]) {
                    found++;
                    last = i + 1;
                }
        if (found == n)
            return last;
        if (got < want || want == pending)
            return 0;
    }
}

void fg_histest_estimate(fg_histest_t *h, fg_sched_t *s, int64_t now, const fg_job_id_t *ids,
                         size_t n, fg_histest_job_fn fn, void *ctx, int64_t (*out)[3])
{
    for (size_t k = 0; k < n; k++)
        out[k][0] = out[k][1] = out[k][2] = FG_TIME_NEVER;
    const size_t len = order_prefix(h, s, now, ids, n);
    if (len == 0)
        return;
    if (++h->call == 0) { /* wrapped: forget every stamp */
        memset(h->stamp, 0, (h->njobs + 1) * sizeof *h->stamp);
        h->call = 1;
    }
    nodes_fill(h, s, now, fn, ctx);
    /* the preemption rule (fair, wfq, round-robin, las): a job still waiting after the
     * passes at its submission may preempt long runners once it has waited wait_s; the
     * jobs ahead in plan order that would wait longer take that room first */
    const int64_t by = now + h->wait_s;
    int64_t room[3] = {0, 0, 0};
    for (int q = 0; q < 3 && h->preempts; q++)
        room[q] = room_fill(h, q, by);
    if (h->pj_cap < len) {
        size_t cap = h->pj_cap;
        h->pj = fg_xgrow(h->pj, &cap, len, sizeof *h->pj);
        h->start = fg_xrealloc(h->start, cap * sizeof *h->start);
        h->pj_cap = cap;
    }
    fg_rt_pred_t *pred = fg_xmalloc(len * sizeof *pred);
    fg_time_t *nb = fg_xmalloc(len * sizeof *nb);
    int32_t *gpus = fg_xmalloc(len * sizeof *gpus);
    for (size_t i = 0; i < len; i++) {
        fg_histest_job_t j;
        fn(ctx, h->order[i], now, &j);
        fg_rt_predict(h->model, j.account, j.user, j.limit_s, j.ran_s, &pred[i]);
        nb[i] = j.not_before;
        gpus[i] = j.gpus;
    }
    for (int q = 0; q < 3; q++) {
        for (size_t i = 0; i < len; i++) {
            const fg_time_t run = q == 0 ? pred[i].p10 : q == 1 ? pred[i].p50 : pred[i].p90;
            h->pj[i] =
                (fg_proj_job_t){.gpus = gpus[i], .type = -1, .run_s = run, .not_before = nb[i]};
        }
        project(h, q, len, now);
        for (size_t i = 0; i < len && room[q] > 0; i++) {
            if (h->start[i] == FG_TIME_NEVER || h->start[i] <= by)
                continue;
            const int32_t took = room_take(h, q, gpus[i]);
            room[q] -= took;
            if (took)
                h->start[i] = by; /* by preemption */
        }
        for (size_t i = 0; i < len; i++)
            for (size_t k = 0; k < n; k++)
                if (h->order[i] == ids[k])
                    out[k][q] = h->start[i];
    }
    for (size_t k = 0; k < n; k++) { /* a projection of shorter runs may start later */
        int64_t *o = out[k];
        if (o[0] > o[1]) {
            const int64_t t = o[0];
            o[0] = o[1];
            o[1] = t;
        }
        if (o[1] > o[2]) {
            const int64_t t = o[1];
            o[1] = o[2];
            o[2] = t;
        }
        if (o[0] > o[1]) {
            const int64_t t = o[0];
            o[0] = o[1];
            o[1] = t;
        }
    }
    h->projections++;
    h->projected_jobs += (int64_t)len;
    free(pred);
    free(nb);
    free(gpus);
}
