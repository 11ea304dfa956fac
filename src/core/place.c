/*
 * place.c - where a job goes now (best fit), and the plan's claims on the GPUs that
 * free up soonest (the availability model of index.c).
 *
 * Placing now (docs/scheduler.md, step 3). A job of g <= 8 GPUs goes to the up node of
 * a matching type with the fewest free GPUs that still has g it may use (best fit),
 * ties to the lowest node index, and takes the lowest of those GPU indices. A job of 8k
 * GPUs takes k nodes whose GPUs are all free: smallest nodes first, then lowest index.
 * The nodes the walk has not touched are found through index.c's free-count buckets;
 * the few it touched may hold reservations and are checked one by one: a GPU may go to
 * a job ending at E when it is free and not reserved before E.
 *
 * Claims (steps 4 and 5). A job that cannot start gets, in the plan, the GPUs that free
 * up soonest: for g <= 8 GPUs the node whose g-th soonest GPU frees up first (the
 * trees' key g), and on it the g soonest GPUs; for k whole nodes the k nodes that free
 * up entirely first (the trees' whole-node key). Its estimated start is when the last of
 * them frees up (or now). The claimed GPUs are then busy in the plan until that start
 * plus the job's time limit, so later claims see them taken. A reservation also marks
 * them reserved from the start: later jobs may only backfill them if they end by then.
 *
 * Example: two 8-GPU nodes at t=0. n0 has GPUs 0-1 busy until t=50 and 6 free; n1 has
 * GPUs 0-5 busy until t=100 and 2 free. A 2-GPU job goes to n1 (2 free: the best fit),
 * on GPUs 6 and 7. An 8-GPU job then cannot start; its reservation is n0 (free entirely
 * at 50, n1 only at 100), estimated start 50, all 8 GPUs reserved from 50. A 1-GPU job
 * of time limit 40 may still start on n0's GPU 2 (it ends by 50); one of limit 60 waits.
 */
#include "plan.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ the walk's view of a node */

static uint64_t low_bits(int n)
{
    return n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1);
}

/* Makes node n's view for this walk live: its plan (avail) starts as its real
 * availability, with no reservation. */
static void touch(fg_sched_t *s, int32_t n)
{
    fg__node_t *nd = &s->nodes[n];
    if (nd->touched == s->walk_no)
        return;
    nd->touched = s->walk_no;
    s->plan_ver++;
    if (nd->nfree > s->touched_free_max)
        s->touched_free_max = nd->nfree;
    const fg_time_t *real = fg__node_real_avail(s, nd);
    for (int i = 0; i < nd->gpus; i++) {
        nd->avail[i] = real[i];
        nd->res_from[i] = FG__INF;
        nd->res_job[i] = 0;
    }
    s->touched_nodes =
        fg__grow(s->touched_nodes, &s->touched_cap, s->ntouched + 1, sizeof *s->touched_nodes);
    s->touched_nodes[s->ntouched++] = n;
}

/* GPUs of node n that a job ending at `end` may take now: free, and not reserved
 * before `end`. */
static uint64_t usable_mask(const fg_sched_t *s, int32_t n, fg_time_t end)
{
    const fg__node_t *nd = &s->nodes[n];
    if (!fg__is_touched(s, n))
        return nd->free_mask;
    uint64_t m = 0;
    for (int i = 0; i < nd->gpus; i++)
        if (nd->gpu_job[i] < 0 && nd->res_from[i] >= end)
            m |= (uint64_t)1 << i;
    return m;
}

/* The n lowest set bits of m. */
static uint64_t lowest_n_bits(uint64_t m, int n)
{
    uint64_t r = 0;
    while (n-- > 0 && m) {
        uint64_t b = m & -m;
        r |= b;
        m &= m - 1;
    }
    return r;
}

/* ------------------------------------------------------------------ placing now */

/* The best node so far for a job of one node: the fewest free GPUs, then the lowest
 * index; node -1: none yet. */
typedef struct fit {
    int32_t node, nfree;
    uint64_t mask; /* the GPUs it would take */
} fit_t;

/* Is a node n with nfree free GPUs a better fit than *b? */
static bool fit_better(const fit_t *b, int32_t nfree, int32_t n)
{
    return b->node < 0 || nfree < b->nfree || (nfree == b->nfree && n < b->node);
}

/* The untouched node of bucket f of type t (up, f GPUs free) of the lowest position,
 * or -1. */
static int32_t bucket_first_untouched(const fg_sched_t *s, const fg__type_t *t, int f)
{
    const uint64_t *bm = &t->bm[(size_t)f * (size_t)t->words];
    for (int32_t w = 0; w < t->words; w++)
        for (uint64_t bits = bm[w]; bits; bits &= bits - 1) {
            int32_t n = t->nodes[w * 64 + __builtin_ctzll(bits)];
            if (!fg__is_touched(s, n))
                return n;
        }
    return -1;
}

/* Best fit for g GPUs among type t's untouched nodes, into *best if better: the first
 * bucket f >= g (not empty) that holds one. An untouched node has no reservation, so
 * its free GPUs are all usable. */
static void fit_untouched(const fg_sched_t *s, const fg__type_t *t, int g, fit_t *best)
{
    for (uint64_t fs = t->bfull >> (g - 1); fs; fs &= fs - 1) {
        const int f = g + __builtin_ctzll(fs);
        if (best->node >= 0 && f > best->nfree)
            return;
        const int32_t n = bucket_first_untouched(s, t, f);
        if (n < 0)
            continue;
        if (fit_better(best, f, n))
            *best = (fit_t){n, f, lowest_n_bits(s->nodes[n].free_mask, g)};
        return;
    }
}

/* Best fit for j (ending at `end`) among the nodes the walk touched, into *best if
 * better. Those had at most touched_free_max free GPUs when touched, and since only
 * lost some. */
static void fit_touched(const fg_sched_t *s, const fg__job_t *j, fg_time_t end, fit_t *best)
{
    const int g = j->gpus;
    if (s->touched_free_max < g)
        return;
    for (size_t k = 0; k < s->ntouched; k++) {
        const int32_t n = s->touched_nodes[k];
        const fg__node_t *nd = &s->nodes[n];
        if (nd->state != FG_NODE_UP || !fg__type_matches(j, nd->type) || nd->nfree < g)
            continue;
        const uint64_t m = usable_mask(s, n, end);
        if (__builtin_popcountll(m) >= g && fit_better(best, nd->nfree, n))
            *best = (fit_t){n, nd->nfree, lowest_n_bits(m, g)};
    }
}

/* Best-fit single node for j (g <= 8) starting now; fills *al. */
bool fg__place_single(fg_sched_t *s, const fg__job_t *j, fg_time_t now, fg_alloc_t *al)
{
    fit_t best = {-1, 0, 0};
    for (size_t ti = 0; ti < s->ntypes; ti++) {
        const fg__type_t *t = &s->types[ti];
        if (fg__type_matches(j, (int32_t)ti) && t->free_gpus >= j->gpus && !t->dirty)
            fit_untouched(s, t, j->gpus, &best);
    }
    fit_touched(s, j, now + j->time_limit, &best);
    if (best.node < 0)
        return false;
    memset(al, 0, sizeof *al); /* no stray padding bytes in the decisions */
    al->node = best.node;
    al->gpu_mask = best.mask;
    return true;
}

/* Up to k whole nodes of type t for a job ending at `end`, smallest nodes first
 * (best fit), then lowest index, into al[]; returns how many it found. */
static int32_t whole_nodes_of_type(const fg_sched_t *s, const fg__type_t *t, int32_t k,
                                   fg_time_t end, fg_alloc_t *al)
{
    int32_t got = 0;
    for (int f = FG_WHOLE_NODE_GPUS; f <= t->maxgpus && got < k; f++) {
        const uint64_t *bm = &t->bm[(size_t)f * (size_t)t->words];
        for (int32_t w = 0; w < t->words && got < k; w++) {
            for (uint64_t bits = bm[w]; bits && got < k; bits &= bits - 1) {
                const int32_t n = t->nodes[w * 64 + __builtin_ctzll(bits)];
                const fg__node_t *nd = &s->nodes[n];
                if (nd->gpus != f) /* f free GPUs but not whole */
                    continue;
                if (fg__is_touched(s, n) && usable_mask(s, n, end) != low_bits(nd->gpus))
                    continue;
                memset(&al[got], 0, sizeof al[got]);
                al[got].node = n;
                al[got].gpu_mask = low_bits(FG_WHOLE_NODE_GPUS);
                got++;
            }
        }
    }
    return got;
}

/* k whole nodes of one type for j (g = 8k) starting now; fills al[0..k). */
bool fg__place_whole(fg_sched_t *s, const fg__job_t *j, fg_time_t now, fg_alloc_t *al)
{
    const int32_t k = j->gpus / FG_WHOLE_NODE_GPUS;
    for (size_t ti = 0; ti < s->ntypes; ti++) {
        const fg__type_t *t = &s->types[ti];
        if (fg__type_matches(j, (int32_t)ti) && t->free_gpus >= j->gpus && !t->dirty &&
            whole_nodes_of_type(s, t, k, now + j->time_limit, al) == k)
            return true;
    }
    return false;
}

/* ------------------------------------------------------------------ failed placements */

/* The walk's memo of failed placements for type slot ts (0 = any type, 1 + t = type
 * t), reset at the first use in a walk. */
fg__fail_t *fg__fail_memo_fill(fg_sched_t *s, size_t ts)
{
    if (ts >= s->fail_cap) {
        size_t old = s->fail_cap;
        s->fail = fg__grow(s->fail, &s->fail_cap, ts + 1, sizeof *s->fail);
        for (size_t k = old; k < s->fail_cap; k++)
            s->fail[k].walk = -1;
    }
    fg__fail_t *f = &s->fail[ts];
    if (f->walk != s->walk_no) {
        f->walk = s->walk_no;
        for (int g = 0; g <= FG_WHOLE_NODE_GPUS; g++)
            f->single[g] = FG__INF;
        f->nwhole = 0;
    }
    return f;
}

static void fail_record(fg__fail_t *f, const fg__job_t *j, fg_time_t end)
{
    if (j->gpus <= FG_WHOLE_NODE_GPUS) {
        for (int g = j->gpus; g <= FG_WHOLE_NODE_GPUS; g++)
            if (end < f->single[g])
                f->single[g] = end;
    } else if (f->nwhole < FG__FAIL_WHOLE) {
        f->whole_k[f->nwhole] = j->gpus / FG_WHOLE_NODE_GPUS;
        f->whole_end[f->nwhole++] = end;
    }
}

/* place_single / place_whole for a walk: the same answer, but a job that a failure
 * earlier in the walk proves cannot fit (see fg__fail_t) is not searched again. */
bool fg__place_now(fg_sched_t *s, const fg__job_t *j, fg_time_t now, fg_alloc_t *al)
{
    const fg_time_t end = now + j->time_limit;
    fg__fail_t *own = fg__fail_memo(s, (size_t)(j->type + 1));
    if (fg__fail_known(own, j, end) ||
        (j->type >= 0 && fg__fail_known(fg__fail_memo(s, 0), j, end)))
        return false;
    bool ok = j->gpus <= FG_WHOLE_NODE_GPUS ? fg__place_single(s, j, now, al)
                                            : fg__place_whole(s, j, now, al);
    if (!ok) /* (own is still in place: fg__fail_memo(s, 0) never grows the array) */
        fail_record(own, j, end);
    return ok;
}

/* ------------------------------------------------------------------ the plan's claims */

/* What a claim writes on each GPU it takes: busy in the plan until `end`; with
 * `protect` (a reservation), also reserved for job `id` from `start`. */
typedef struct claim {
    fg_time_t now, start, end;
    fg_job_id_t id;
    bool protect;
} claim_t;

/* Marks GPU i of node nd reserved from T for job `id`; keeps the pass's count of
 * free GPUs under a reservation and the longest backfill window they leave. */
static void reserve_gpu(fg_sched_t *s, fg__node_t *nd, int i, fg_time_t T, fg_job_id_t id,
                        fg_time_t now)
{
    if (T >= nd->res_from[i])
        return;
    s->plan_ver++;
    if (nd->gpu_job[i] < 0) {
        if (nd->res_from[i] == FG__INF)
            s->reserved_free++;
        if (T - now > s->window_max)
            s->window_max = T - now;
    }
    nd->res_from[i] = T;
    nd->res_job[i] = id;
}

/* Claim c takes GPU i of node nd (touched). */
static void claim_gpu(fg_sched_t *s, fg__node_t *nd, int i, const claim_t *c)
{
    nd->avail[i] = c->end;
    if (c->protect)
        reserve_gpu(s, nd, i, c->start, c->id, c->now);
}

/* Among the types j may use, the one whose tree has the least value of `key`, or -1 if
 * none has a finite one; that value in *min. */
static int32_t soonest_type(fg_sched_t *s, const fg__job_t *j, int key, int64_t *min)
{
    int32_t bt = -1;
    *min = FG__INF;
    for (size_t ti = 0; ti < s->ntypes; ti++) {
        if (!fg__type_matches(j, (int32_t)ti) || s->types[ti].dirty)
            continue;
        const int64_t v = fg__tree_min(&s->types[ti], key);
        if (v < *min) {
            *min = v;
            bt = (int32_t)ti;
        }
    }
    return bt;
}

/* Claim c takes the g GPUs of node nd that free up soonest, kth being the g-th
 * soonest: every GPU below it, then the first ones equal to it (lowest index). */
static void claim_soonest_gpus(fg_sched_t *s, fg__node_t *nd, int g, fg_time_t kth,
                               const claim_t *c)
{
    int below = 0;
    for (int i = 0; i < nd->gpus; i++)
        below += nd->avail[i] < kth;
    int equal = g - below;
    for (int i = 0; i < nd->gpus; i++)
        if (nd->avail[i] < kth || (nd->avail[i] == kth && equal-- > 0))
            claim_gpu(s, nd, i, c);
}

/* fg__plan_claim for a job of g <= 8 GPUs: the node whose g-th soonest GPU frees up
 * first (the trees' key g - 1), and its g soonest GPUs. */
static fg_time_t claim_single(fg_sched_t *s, fg__job_t *j, fg_time_t now, bool protect)
{
    const int g = j->gpus;
    int64_t kth;
    const int32_t bt = soonest_type(s, j, g - 1, &kth);
    if (bt < 0)
        return FG_TIME_NEVER;
    const int32_t n = fg__tree_argmin(&s->types[bt], g - 1);
    const fg_time_t T = kth > now ? kth : now;
    const claim_t c = {now, T, T + j->time_limit, j->id, protect};
    touch(s, n);
    claim_soonest_gpus(s, &s->nodes[n], g, kth, &c);
    fg__node_leaf_claim(s, n, g, c.end);
    j->est_node = n;
    return T;
}

/* Puts the n nodes[] that picking took out of their tree back in. */
static void unexclude(fg_sched_t *s, const int32_t *nodes, int32_t n)
{
    for (int32_t c = 0; c < n; c++) {
        s->nodes[nodes[c]].excluded = false;
        fg__node_leaf_update(s, nodes[c]);
    }
}

/* Picks type t's k nodes that free up entirely first, by (whole-node key, position),
 * into chosen[]; returns how many it found (fewer than k: t has too few up nodes), and
 * in *T the key of the last one. With few nodes per node asked for, one read of the
 * leaves picks them all (shortcut "whole-leaves"); else one descent per node, each node but the
 * last taken out of the tree (excluded, *out set) while the next ones are picked: the same nodes in
 * the same order. */
static int32_t pick_whole(fg_sched_t *s, fg__type_t *t, int32_t k, int32_t *chosen, int64_t *T,
                          bool *out)
{
    *out = t->n > 64 * k || !fg__sc(s, FG__SC_WHOLE_LEAVES); /* (else descents) */
    if (!*out)
        return fg__tree_smallest(t, FG__TREE_KEYS - 1, k, chosen, T);
    int32_t got = 0;
    *T = FG__INF;
    while (got < k) {
        const int32_t n = fg__tree_argmin(t, FG__TREE_KEYS - 1);
        if (n < 0)
            break;
        *T = fg__tree_min(t, FG__TREE_KEYS - 1);
        chosen[got++] = n;
        if (got < k) {
            s->nodes[n].excluded = true;
            fg__node_leaf_update(s, n);
        }
    }
    return got;
}

/* Among the types j may use, the k whole nodes that free up first (the least key of the
 * last; ties to the first type), into best[]; returns the type, or -1 if none has k up
 * nodes, and their key in *T. Picked nodes of the type chosen stay out of their tree
 * until claimed; the others are put back. */
static int32_t soonest_whole_nodes(fg_sched_t *s, const fg__job_t *j, int32_t k, int32_t *best,
                                   int64_t *T)
{
    int32_t chosen[FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS];
    int32_t bt = -1;
    bool best_out = false; /* the best type's nodes are out of their tree */
    *T = FG__INF;
    for (size_t ti = 0; ti < s->ntypes; ti++) {
        fg__type_t *t = &s->types[ti];
        if (!fg__type_matches(j, (int32_t)ti) || t->dirty)
            continue;
        bool out;
        int64_t tt;
        const int32_t got = pick_whole(s, t, k, chosen, &tt, &out);
        if (got == k && tt < *T) {
            if (bt >= 0 && best_out)
                unexclude(s, best, k - 1);
            memcpy(best, chosen, sizeof *chosen * (size_t)k);
            *T = tt;
            bt = (int32_t)ti;
            best_out = out;
        } else if (out) {
            unexclude(s, chosen, got < k ? got : k - 1);
        }
    }
    return bt;
}

/* fg__plan_claim for a job of k whole nodes: the k nodes that free up entirely first,
 * claimed in the order they were picked, (key, index), as the argmin would pick them
 * again one by one (a claimed node's key becomes the claim's end, later than its
 * start). */
static fg_time_t claim_whole(fg_sched_t *s, fg__job_t *j, fg_time_t now, bool protect)
{
    const int32_t k = j->gpus / FG_WHOLE_NODE_GPUS;
    int32_t best[FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS];
    int64_t last;
    if (soonest_whole_nodes(s, j, k, best, &last) < 0)
        return FG_TIME_NEVER;
    const fg_time_t T = last > now ? last : now;
    const claim_t c = {now, T, T + j->time_limit, j->id, protect};
    for (int32_t p = 0; p < k; p++) {
        const int32_t n = best[p];
        fg__node_t *nd = &s->nodes[n];
        nd->excluded = false;
        touch(s, n);
        for (int i = 0; i < nd->gpus; i++)
            claim_gpu(s, nd, i, &c);
        fg__node_leaf_claim(s, n, nd->gpus, c.end);
    }
    j->est_node = best[0];
    return T;
}

/* Claims for j, in the plan, the GPUs that free up soonest; with `protect`, later jobs
 * may not use them before the claim starts (a reservation). Returns the estimated
 * start (FG_TIME_NEVER if no up node could ever hold j); j->est_node: the (first) node. */
fg_time_t fg__plan_claim(fg_sched_t *s, fg__job_t *j, fg_time_t now, bool protect)
{
    return j->gpus <= FG_WHOLE_NODE_GPUS ? claim_single(s, j, now, protect)
                                         : claim_whole(s, j, now, protect);
}

/* ------------------------------------------------------------------ feasibility */

/* fg__feasible (plan.h) on a miss of its memo: counts, and fills memo m. */
bool fg__feasible_fill(fg_sched_t *s, const fg__job_t *j, fg__feas_memo_t *m)
{
    m->why = FG_REASON_NONE;
    m->ok = fg__feasible_count(s, j, &m->why);
    m->gen = s->node_gen;
    m->gpus = j->gpus;
    m->type = j->type;
    if (m->ok && j->type < 0 && j->gpus <= FG_WHOLE_NODE_GPUS && fg__sc(s, FG__SC_FEASIBLE_MASK))
        s->feas_any |= 1u << j->gpus;
    return m->ok;
}

/* Recounts type t's nodes with >= g GPUs (g = 1..8), up and in any state, if nodes
 * changed since the last count. */
static void fit_counts(const fg_sched_t *s, fg__type_t *t)
{
    if (t->fit_gen == s->node_gen)
        return;
    memset(t->up_ge, 0, sizeof t->up_ge);
    memset(t->any_ge, 0, sizeof t->any_ge);
    for (int32_t p = 0; p < t->n; p++) {
        const fg__node_t *nd = &s->nodes[t->nodes[p]];
        for (int g = 1; g <= FG_WHOLE_NODE_GPUS && g <= nd->gpus; g++) {
            t->any_ge[g]++;
            t->up_ge[g] += nd->state == FG_NODE_UP;
        }
    }
    t->fit_gen = s->node_gen;
}

/* Could j ever run on the up nodes as they are (ignoring what runs)? If not, *why says
 * whether some node in another state could (nodes down) or none (GPU type). */
bool fg__feasible_count(fg_sched_t *s, const fg__job_t *j, fg_reason_t *why)
{
    bool exists = false; /* some node, any state, could hold it */
    const int gi = j->gpus <= FG_WHOLE_NODE_GPUS ? j->gpus : FG_WHOLE_NODE_GPUS;
    const int32_t need = j->gpus <= FG_WHOLE_NODE_GPUS ? 1 : j->gpus / FG_WHOLE_NODE_GPUS;
    for (size_t ti = 0; ti < s->ntypes; ti++) {
        fg__type_t *t = &s->types[ti];
        if (!fg__type_matches(j, (int32_t)ti))
            continue;
        fit_counts(s, t);
        if (t->up_ge[gi] >= need)
            return true;
        if (t->any_ge[gi] >= need)
            exists = true;
    }
    *why = exists ? FG_REASON_NODES_DOWN : FG_REASON_GPU_TYPE;
    return false;
}
