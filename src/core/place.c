/*
 * place.c - TODO banner
 */
#include "plan.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ helpers */

static uint64_t low_bits(int n)
{
    return n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1);
}

/* Makes node n's pass-local view (avail, reservations) live for this pass. */
static void touch(fg_sched_t *s, int32_t n)
{
    fg__node_t *nd = &s->nodes[n];
    if (nd->touched == s->walk_no)
        return;
    nd->touched = s->walk_no;
    s->plan_ver++;
    if (nd->nfree > s->touched_free_max)
        s->touched_free_max = nd->nfree;
    const fg_time_t *real = nd->rvalid ? nd->ravail : fg__node_real_avail(s, nd);
    if (nd->gpus == FG_WHOLE_NODE_GPUS) { /* the common node: copies of a fixed size */
        memcpy(nd->avail, real, sizeof *real * FG_WHOLE_NODE_GPUS);
        for (int i = 0; i < FG_WHOLE_NODE_GPUS; i++) {
            nd->res_from[i] = FG__INF;
            nd->res_job[i] = 0;
        }
    } else {
        for (int i = 0; i < nd->gpus; i++) {
            nd->avail[i] = real[i];
            nd->res_from[i] = FG__INF;
            nd->res_job[i] = 0;
        }
    }
    if (s->ntouched == s->touched_cap)
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

/* Best-fit single node for j (g <= 8) starting now; fills *al. */
bool fg__place_single(fg_sched_t *s, const fg__job_t *j, fg_time_t now, fg_alloc_t *al)
{
    const int g = j->gpus;
    const fg_time_t end = now + j->time_limit;
    int32_t best = -1, best_free = 0;
    uint64_t best_mask = 0;
    for (size_t ti = 0; ti < s->ntypes; ti++) {
        const fg__type_t *t = &s->types[ti];
        if (!fg__type_matches(j, (int32_t)ti) || t->free_gpus < g || t->dirty)
            continue;
        /* the buckets f >= g that are not empty, in order (the others hold no node) */
        for (uint64_t fs = t->bfull >> (g - 1); fs; fs &= fs - 1) {
            const int f = g + __builtin_ctzll(fs);
            if (best >= 0 && f > best_free)
                break;
            const uint64_t *bm = &t->bm[(size_t)f * (size_t)t->words];
            int32_t found = -1;
            for (int32_t w = 0; w < t->words && found < 0; w++) {
                uint64_t bits = bm[w];
                while (bits) {
                    int32_t pos = w * 64 + __builtin_ctzll(bits);
                    bits &= bits - 1;
                    int32_t n = t->nodes[pos];
                    if (!fg__is_touched(s, n)) {
                        found = n;
                        break;
                    }
                }
            }
            if (found >= 0) {
                if (best < 0 || f < best_free || (f == best_free && found < best)) {
                    best = found;
                    best_free = f;
                    best_mask = lowest_n_bits(s->nodes[found].free_mask, g);
                }
                break;
            }
        }
    }
    /* touched nodes had at most touched_free_max free GPUs (and lose them, never gain) */
    for (size_t k = 0; s->touched_free_max >= g && k < s->ntouched; k++) {
        int32_t n = s->touched_nodes[k];
        const fg__node_t *nd = &s->nodes[n];
        if (nd->state != FG_NODE_UP || !fg__type_matches(j, nd->type) || nd->nfree < g)
            continue;
        uint64_t m = usable_mask(s, n, end);
        if (__builtin_popcountll(m) < g)
            continue;
        if (best < 0 || nd->nfree < best_free || (nd->nfree == best_free && n < best)) {
            best = n;
            best_free = nd->nfree;
            best_mask = lowest_n_bits(m, g);
        }
    }
    if (best < 0)
        return false;
    memset(al, 0, sizeof *al); /* no stray padding bytes in the decisions */
    al->node = best;
    al->gpu_mask = best_mask;
    return true;
}

/* k whole nodes of one type for j (g = 8k) starting now; fills al[0..k). */
bool fg__place_whole(fg_sched_t *s, const fg__job_t *j, fg_time_t now, fg_alloc_t *al)
{
    const int32_t k = j->gpus / FG_WHOLE_NODE_GPUS;
    const fg_time_t end = now + j->time_limit;
    for (size_t ti = 0; ti < s->ntypes; ti++) {
        const fg__type_t *t = &s->types[ti];
        if (!fg__type_matches(j, (int32_t)ti) || t->free_gpus < j->gpus || t->dirty)
            continue;
        int32_t got = 0;
        /* smallest nodes first (best fit), then lowest index */
        for (int f = FG_WHOLE_NODE_GPUS; f <= t->maxgpus && got < k; f++) {
            const uint64_t *bm = &t->bm[(size_t)f * (size_t)t->words];
            for (int32_t w = 0; w < t->words && got < k; w++) {
                uint64_t bits = bm[w];
                while (bits && got < k) {
                    int32_t n = t->nodes[w * 64 + __builtin_ctzll(bits)];
                    bits &= bits - 1;
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
        if (got == k)
            return true;
    }
    return false;
}

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

/* ------------------------------------------------------------------ the plan */

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

/* Puts nodes excluded by plan_claim back into their tree. */
static void unexclude(fg_sched_t *s, const int32_t *nodes, int32_t n)
{
    for (int32_t c = 0; c < n; c++) {
        s->nodes[nodes[c]].excluded = false;
        fg__node_leaf_update(s, nodes[c]);
    }
}

/* Claims for j, in the availability model, the GPUs that free up soonest; with
 * `protect`, later jobs may not use them before the claim starts. Returns the
 * estimated start (FG_TIME_NEVER if no up node could ever hold j). */
fg_time_t fg__plan_claim(fg_sched_t *s, fg__job_t *j, fg_time_t now, bool protect)
{
    const int g = j->gpus;
    if (g <= FG_WHOLE_NODE_GPUS) {
        int64_t best = FG__INF;
        int32_t bt = -1;
        for (size_t ti = 0; ti < s->ntypes; ti++) {
            if (!fg__type_matches(j, (int32_t)ti) || s->types[ti].dirty)
                continue;
            int64_t v = fg__tree_min(&s->types[ti], g - 1);
            if (v < best) {
                best = v;
                bt = (int32_t)ti;
            }
        }
        if (bt < 0)
            return FG_TIME_NEVER;
        int32_t n = fg__tree_argmin_read(&s->types[bt], g - 1); /* (read just above) */
        fg_time_t T = best > now ? best : now;
        touch(s, n);
        fg__node_t *nd = &s->nodes[n];
        /* The g GPUs with the smallest avail, ties to the lowest index: best is the
         * g-th smallest, so every GPU below it and the first ones equal to it. (The
         * order in which they are taken changes nothing: reserve_gpu only counts.) */
        if (g == 1) { /* none below the smallest: the first GPU equal to it */
            int i = 0;
            while (nd->avail[i] != best)
                i++;
            nd->avail[i] = T + j->time_limit;
            if (protect)
                reserve_gpu(s, nd, i, T, j->id, now);
        } else {
            const int ng = nd->gpus;
            int below = 0;
            if (ng == FG_WHOLE_NODE_GPUS) { /* the common node: a loop of fixed length */
#pragma GCC unroll 8
                for (int i = 0; i < FG_WHOLE_NODE_GPUS; i++)
                    below += nd->avail[i] < best;
            } else {
                for (int i = 0; i < ng; i++)
                    below += nd->avail[i] < best;
            }
            int equal = g - below;
            for (int i = 0; i < ng; i++) {
                if (nd->avail[i] > best || (nd->avail[i] == best && equal-- <= 0))
                    continue;
                nd->avail[i] = T + j->time_limit;
                if (protect)
                    reserve_gpu(s, nd, i, T, j->id, now);
            }
        }
        fg__node_leaf_claim(s, n, g, T + j->time_limit);
        j->r_a = n;
        return T;
    }
    const int32_t k = g / FG_WHOLE_NODE_GPUS;
    int32_t chosen[FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS],
        best[FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS];
    int64_t bestT = FG__INF;
    int32_t bt = -1;
    bool best_out = false; /* the best type's nodes are out of their tree */
    for (size_t ti = 0; ti < s->ntypes; ti++) {
        fg__type_t *t = &s->types[ti];
        if (!fg__type_matches(j, (int32_t)ti) || t->dirty)
            continue;
        int32_t got = 0;
        int64_t T = FG__INF;
        /* With few nodes per node asked for, one read of the leaves picks them all (the
         * same nodes in the same order, none taken out); else one descent per node, each
         * taken out of the tree while the next ones are picked. */
        bool out = t->n > 64 * k;
        if (!out) {
            got = fg__tree_smallest(t, FG__TREE_KEYS - 1, k, chosen, &T);
        } else {
            while (got < k) {
                int32_t n = fg__tree_argmin(t, FG__TREE_KEYS - 1);
                if (n < 0)
                    break;
                T = fg__tree_min(t, FG__TREE_KEYS - 1);
                chosen[got++] = n;
                if (got < k) { /* out of the tree while the next ones are picked */
                    s->nodes[n].excluded = true;
                    fg__node_leaf_update(s, n);
                }
            }
        }
        /* The best type's nodes stay excluded until they are claimed below (the last
         * one picked never was: no pick came after it). */
        if (got == k && T < bestT) {
            if (bt >= 0 && best_out)
                unexclude(s, best, k - 1);
            memcpy(best, chosen, sizeof *chosen * (size_t)k);
            bestT = T;
            bt = (int32_t)ti;
            best_out = out;
        } else if (out) {
            unexclude(s, chosen, got < k ? got : k - 1);
        }
    }
    if (bt < 0)
        return FG_TIME_NEVER;
    fg_time_t T = bestT > now ? bestT : now;
    /* Claim them in the order they were picked: (key, index), as the argmin would pick
     * them again one by one (a claimed node's key becomes T + limit > T). */
    for (int32_t c = 0; c < k; c++) {
        int32_t n = best[c];
        s->nodes[n].excluded = false;
        touch(s, n);
        fg__node_t *nd = &s->nodes[n];
        for (int i = 0; i < nd->gpus; i++) {
            nd->avail[i] = T + j->time_limit;
            if (protect)
                reserve_gpu(s, nd, i, T, j->id, now);
        }
        fg__node_leaf_claim(s, n, nd->gpus, T + j->time_limit);
        if (c == 0)
            j->r_a = n;
    }
    return T;
}

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

bool fg__feasible_count(fg_sched_t *s, const fg__job_t *j, fg_reason_t *why)
{
    bool exists = false; /* some node, any state, could hold it */
    const int gi = j->gpus <= FG_WHOLE_NODE_GPUS ? j->gpus : FG_WHOLE_NODE_GPUS;
    for (size_t ti = 0; ti < s->ntypes; ti++) {
        fg__type_t *t = &s->types[ti];
        if (!fg__type_matches(j, (int32_t)ti))
            continue;
        if (t->fit_gen != s->node_gen) { /* nodes changed: recount */
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
        int32_t up = t->up_ge[gi], any = t->any_ge[gi];
        int32_t need = j->gpus <= FG_WHOLE_NODE_GPUS ? 1 : j->gpus / FG_WHOLE_NODE_GPUS;
        if (up >= need)
            return true;
        if (any >= need)
            exists = true;
    }
    *why = exists ? FG_REASON_NODES_DOWN : FG_REASON_GPU_TYPE;
    return false;
}
