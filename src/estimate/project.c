/*
 * project.c - the projection of the queue: when each pending job starts if the jobs
 * start in plan order as GPUs free up, with predicted run times (fg_proj_run in
 * fairgpu/estimate.h; pure C, no I/O).
 *
 * Each GPU is modelled by when it is free for good (its free_at: after the running job
 * and every job projected onto it) and by at most one gap: an idle stretch [from, to)
 * before a job projected to start later, the hole that EASY backfill fills. Jobs are
 * taken in plan order; each goes where it can start earliest, never before now or its
 * not_before:
 *   - a job of g <= 8 GPUs: on one up node of its type with at least g GPUs, at the
 *     earliest time s at which g of that node's GPUs are idle for its whole run
 *     [s, s + run): free for good by s, or in a gap that holds the run. Ties go to the
 *     lowest node index (first fit, which packs small jobs as the core's best fit
 *     does). Inside the node it takes the GPUs that became idle last (least idle time
 *     left behind);
 *   - a job of 8k GPUs: k whole nodes (every GPU idle) of its type with at least 8
 *     GPUs, the k that become whole soonest (ties: lowest index), from the latest of
 *     those k times; it takes GPUs 0..7 of each, as the core does. Whole-node jobs do
 *     not go into gaps (one gap on every GPU of k nodes at once is rare);
 *   - no such node (type, size, all down): FG_TIME_NEVER, and it changes nothing.
 * A job placed at s on a GPU idle since f < s leaves the gap [f, s) there (when the
 * GPU has no gap yet: the earlier gap is the one a backfill soon would use); a job
 * placed in a gap moves the gap's start to its end. So a later short job may start
 * before an earlier long one, in what that one leaves; the earlier job's start never
 * moves (a gap is used only by a run that ends by the gap's end).
 *
 * Worked example, one node of 8 GPUs at now = 0: GPUs 0-3 run a job predicted to end
 * at 100, GPUs 4-7 are free. Plan order: J (8 GPUs, run 50), C (4 GPUs, run 30), D (4
 * GPUs, run 200). J needs all 8: it starts at 100 (GPUs 4-7 get the gap [0, 100)), and
 * every GPU is busy until 150. C fits in the gap: it starts at 0 on GPUs 4-7 (the gap
 * is now [30, 100)). D (run 200) fits in no gap: it starts at 150.
 *
 * Cost: per job, O(GPUs of a node) per candidate node for the free-for-good time, and
 * O(GPUs^2) on nodes with gaps; a node that cannot beat the best start so far is
 * skipped, and a start at the earliest possible time ends the search.
 */
#include "fairgpu/estimate.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

/* Beside the caller's nodes: GPU i of node n is at off[n] + i in gap_from/gap_to (an
 * empty gap has from >= to) and the node's free_at values, ascending, are at off[n] ..
 * in tail[]. Per node: how many gaps are not empty, the earliest start of those and the
 * longest of them (a job that runs longer, or can start sooner elsewhere, skips them). */
typedef struct proj {
    fg_proj_node_t *nodes;
    int32_t nnodes;
    fg_time_t now;
    int32_t *off;
    fg_time_t *gap_from, *gap_to;
    fg_time_t *tail;
    int32_t *ngaps;
    fg_time_t *gap_lo, *gap_len;
} proj_t;

static bool type_ok(const fg_proj_node_t *n, int32_t type)
{
    return n->up && (type < 0 || n->type == type);
}

/* s + run (run >= 1), saturated below FG_TIME_NEVER: runs as long as the caller's type
 * allows must not wrap. */
static fg_time_t end_of(fg_time_t s, fg_time_t run)
{
    assert(run >= 1);
    return run > FG_TIME_NEVER - 1 - (s > 0 ? s : 0) ? FG_TIME_NEVER - 1 : s + run;
}

/* Whether GPU i of node n is idle over [s, s + run). */
static bool idle_over(const proj_t *p, int32_t n, int32_t i, fg_time_t s, fg_time_t run)
{
    if (p->nodes[n].free_at[i] <= s)
        return true;
    const int32_t g = p->off[n] + i;
    return p->gap_from[g] <= s && end_of(s, run) <= p->gap_to[g];
}

/* How many GPUs of node n are idle over [s, s + run). */
static int32_t idle_count(const proj_t *p, int32_t n, fg_time_t s, fg_time_t run)
{
    int32_t c = 0;
    for (int32_t i = 0; i < p->nodes[n].gpus; i++)
        c += idle_over(p, n, i, s, run);
    return c;
}

/* The earliest start >= t0 and < bound of a job of g GPUs and `run` on node n, or
 * FG_TIME_NEVER. Without gaps: when its g-th GPU is free for good. With gaps that could
 * hold it, the candidates are t0 and each time a GPU's idle stretch begins. */
static fg_time_t single_start(const proj_t *p, int32_t n, int32_t g, fg_time_t run, fg_time_t t0,
                              fg_time_t bound)
{
    const fg_proj_node_t *nd = &p->nodes[n];
    fg_time_t best = p->tail[p->off[n] + g - 1];
    if (best <= t0)
        return t0 < bound ? t0 : FG_TIME_NEVER;
    if (best > bound)
        best = bound;
    if (p->ngaps[n] > 0 && p->gap_len[n] >= run && p->gap_lo[n] < best) {
        if (idle_count(p, n, t0, run) >= g)
            return t0;
        for (int32_t i = 0; i < nd->gpus; i++) {
            const int32_t gi = p->off[n] + i;
            const fg_time_t c[2] = {p->gap_from[gi], nd->free_at[i]};
            for (int k = 0; k < 2; k++)
                if (c[k] > t0 && c[k] < best && idle_count(p, n, c[k], run) >= g)
                    best = c[k];
        }
    }
    return best < bound ? best : FG_TIME_NEVER;
}

/* Replaces the value `from` by `to` in the ascending v[0..n). */
static void sorted_move(fg_time_t *v, int32_t n, fg_time_t from, fg_time_t to)
{
    int32_t i = 0;
    while (i < n && v[i] != from)
        i++;
    assert(i < n);
    for (; i + 1 < n && v[i + 1] < to; i++)
        v[i] = v[i + 1];
    for (; i > 0 && v[i - 1] > to; i--)
        v[i] = v[i - 1];
    v[i] = to;
}

/* Marks GPU i of node n busy over [s, s + run). */
static void take_gpu(proj_t *p, int32_t n, int32_t i, fg_time_t s, fg_time_t run)
{
    fg_proj_node_t *nd = &p->nodes[n];
    const int32_t g = p->off[n] + i;
    const bool had_gap = p->gap_from[g] < p->gap_to[g];
    if (nd->free_at[i] <= s) { /* after everything else on it */
        const fg_time_t idle = nd->free_at[i] > p->now ? nd->free_at[i] : p->now;
        if (idle < s && !had_gap) {
            p->gap_from[g] = idle;
            p->gap_to[g] = s;
        }
        sorted_move(&p->tail[p->off[n]], nd->gpus, nd->free_at[i], end_of(s, run));
        nd->free_at[i] = end_of(s, run);
    } else { /* in its gap */
        assert(p->gap_from[g] <= s && end_of(s, run) <= p->gap_to[g]);
        p->gap_from[g] = end_of(s, run);
    }
    p->ngaps[n] += (p->gap_from[g] < p->gap_to[g]) - had_gap;
}

/* Makes node n's gap bounds again after its gaps changed. */
static void gap_bounds(proj_t *p, int32_t n)
{
    fg_time_t lo = FG_TIME_NEVER, len = 0;
    for (int32_t i = 0; i < p->nodes[n].gpus; i++) {
        const int32_t g = p->off[n] + i;
        if (p->gap_from[g] >= p->gap_to[g])
            continue;
        if (p->gap_from[g] < lo)
            lo = p->gap_from[g];
        if (p->gap_to[g] - p->gap_from[g] > len)
            len = p->gap_to[g] - p->gap_from[g];
    }
    p->gap_lo[n] = lo;
    p->gap_len[n] = len;
}

/* When GPU i of node n became idle for a start at s (later is a better fit). */
static fg_time_t idle_since(const proj_t *p, int32_t n, int32_t i, fg_time_t s)
{
    const fg_time_t f = p->nodes[n].free_at[i];
    return f <= s ? f : p->gap_from[p->off[n] + i];
}

/* Places g GPUs of node n at s: the idle ones that became idle last. */
static void place_single(proj_t *p, int32_t n, int32_t g, fg_time_t s, fg_time_t run)
{
    bool used[FG_MAX_NODE_GPUS] = {false};
    for (int32_t k = 0; k < g; k++) {
        int32_t pick = -1;
        for (int32_t i = 0; i < p->nodes[n].gpus; i++)
            if (!used[i] && idle_over(p, n, i, s, run) &&
                (pick < 0 || idle_since(p, n, i, s) > idle_since(p, n, pick, s)))
                pick = i;
        assert(pick >= 0);
        used[pick] = true;
    }
    for (int32_t i = 0; i < p->nodes[n].gpus; i++)
        if (used[i])
            take_gpu(p, n, i, s, run);
    gap_bounds(p, n);
}

static fg_time_t project_single(proj_t *p, const fg_proj_job_t *j, fg_time_t t0)
{
    fg_time_t best = FG_TIME_NEVER;
    int32_t at = -1;
    for (int32_t n = 0; n < p->nnodes && best > t0; n++) {
        if (!type_ok(&p->nodes[n], j->type) || p->nodes[n].gpus < j->gpus)
            continue;
        const fg_time_t s = single_start(p, n, j->gpus, j->run_s, t0, best);
        if (s < best) {
            best = s;
            at = n;
        }
    }
    if (at >= 0)
        place_single(p, at, j->gpus, best, j->run_s);
    return best;
}

typedef struct whole {
    fg_time_t at;
    int32_t node;
} whole_t;

static int cmp_whole(const void *a, const void *b)
{
    const whole_t *x = a, *y = b;
    if (x->at != y->at)
        return x->at < y->at ? -1 : 1;
    return (x->node > y->node) - (x->node < y->node);
}

static fg_time_t project_whole(proj_t *p, const fg_proj_job_t *j, fg_time_t t0, whole_t *scratch)
{
    const int32_t k = j->gpus / FG_WHOLE_NODE_GPUS;
    int32_t m = 0;
    for (int32_t n = 0; n < p->nnodes; n++) {
        const fg_proj_node_t *nd = &p->nodes[n];
        if (!type_ok(nd, j->type) || nd->gpus < FG_WHOLE_NODE_GPUS)
            continue;
        const fg_time_t w = p->tail[p->off[n] + nd->gpus - 1];
        scratch[m++] = (whole_t){w > t0 ? w : t0, n};
    }
    if (m < k)
        return FG_TIME_NEVER;
    qsort(scratch, (size_t)m, sizeof *scratch, cmp_whole);
    const fg_time_t s = scratch[k - 1].at;
    for (int32_t q = 0; q < k; q++) {
        for (int32_t i = 0; i < FG_WHOLE_NODE_GPUS; i++)
            take_gpu(p, scratch[q].node, i, s, j->run_s);
        gap_bounds(p, scratch[q].node);
    }
    return s;
}

static void sort_times(fg_time_t *v, int32_t n) /* insertion sort: n is a node's GPUs */
{
    for (int32_t i = 1; i < n; i++) {
        const fg_time_t x = v[i];
        int32_t j = i;
        for (; j > 0 && v[j - 1] > x; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

static bool size_ok(int32_t g)
{
    return g >= 1 && g <= FG_MAX_JOB_GPUS &&
           (g <= FG_WHOLE_NODE_GPUS || g % FG_WHOLE_NODE_GPUS == 0);
}

void fg_proj_run(fg_proj_node_t *nodes, int32_t nnodes, const fg_proj_job_t *jobs, int32_t njobs,
                 fg_time_t now, fg_time_t *start)
{
    proj_t p = {.nodes = nodes, .nnodes = nnodes, .now = now};
    p.off = fg_xmalloc(((size_t)nnodes + 1) * sizeof *p.off);
    p.ngaps = fg_xcalloc((size_t)nnodes + 1, sizeof *p.ngaps);
    int32_t total = 0;
    for (int32_t n = 0; n < nnodes; n++) {
        assert(nodes[n].gpus >= 1 && nodes[n].gpus <= FG_MAX_NODE_GPUS);
        p.off[n] = total;
        total += nodes[n].gpus;
    }
    p.gap_from = fg_xcalloc((size_t)total + 1, sizeof *p.gap_from);
    p.gap_to = fg_xcalloc((size_t)total + 1, sizeof *p.gap_to);
    p.tail = fg_xmalloc(((size_t)total + 1) * sizeof *p.tail);
    p.gap_lo = fg_xmalloc(((size_t)nnodes + 1) * sizeof *p.gap_lo);
    p.gap_len = fg_xcalloc((size_t)nnodes + 1, sizeof *p.gap_len);
    for (int32_t n = 0; n < nnodes; n++) {
        fg_time_t *v = &p.tail[p.off[n]];
        memcpy(v, nodes[n].free_at, (size_t)nodes[n].gpus * sizeof *v);
        sort_times(v, nodes[n].gpus);
        p.gap_lo[n] = FG_TIME_NEVER;
    }
    whole_t *scratch = fg_xmalloc(((size_t)nnodes + 1) * sizeof *scratch);
    for (int32_t q = 0; q < njobs; q++) {
        fg_proj_job_t j = jobs[q];
        if (j.run_s < 1)
            j.run_s = 1;
        const fg_time_t t0 = j.not_before > now ? j.not_before : now;
        if (!size_ok(j.gpus))
            start[q] = FG_TIME_NEVER;
        else if (j.gpus <= FG_WHOLE_NODE_GPUS)
            start[q] = project_single(&p, &j, t0);
        else
            start[q] = project_whole(&p, &j, t0, scratch);
    }
    free(scratch);
    free(p.gap_from);
    free(p.gap_to);
    free(p.tail);
    free(p.gap_lo);
    free(p.gap_len);
    free(p.ngaps);
    free(p.off);
}
