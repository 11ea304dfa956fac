/*
 * pass.c - one scheduling pass: place, reserve, backfill, estimate, preempt.
 *
 * The pass walks pending jobs in plan order (order.c) and for each one:
 *   1. skips it if it waits out a retry backoff, its account is at quota or out of
 *      budget, or no up node could hold it;
 *   2. starts it now on the best-fit node (fewest free GPUs that still fit), unless a
 *      job before it blocked and the policy has no backfill (fifo, --no-backfill);
 *   3. otherwise, the first `reserve_depth` blocked jobs get a reservation: the GPUs
 *      that free up soonest (running jobs' start + time limit, from the availability
 *      trees of index.c). Reserved GPUs carry res_from = the reservation's start; a
 *      later job may start on a free GPU only if it ends (now + its time limit) by then.
 *      Blocked jobs up to `estimate_depth` get an estimate from the same model.
 *
 * EASY backfill, worked example: 2 nodes x 8 GPUs. n0 runs a 4-GPU job until t=100,
 * n1 is full until t=50. At t=0 an 8-GPU job J is first in plan order: it cannot
 * start; its reservation is n1 from t=50 (whole-node key 50 < 100). Then a 1-GPU job
 * with limit 200 may start on n0 (not reserved), and a 1-GPU job could start on n1
 * only if it were free and ended by t=50. J starts at t=50 at the latest.
 *
 * Preemption comes last, for up to `preempt_jobs_per_pass` blocked jobs whose GPUs
 * are not already being freed: high takes from low at once; under wfq/round-robin a
 * job that waited `preempt_wait_s` and whose account (member) is below its entitlement
 * takes from long runners (>= quantum_s in all, >= min_run_s this attempt) of
 * over-entitled accounts (members); under las, from long runners in a higher LAS queue.
 * Victims are the cheapest in GPU-time lost since their last checkpoint.
 */
#include "internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ decisions */

void fg_decisions_init(fg_decisions_t *d)
{
    memset(d, 0, sizeof *d);
}

void fg_decisions_free(fg_decisions_t *d)
{
    free(d->starts);
    free(d->allocs);
    free(d->preempts);
    memset(d, 0, sizeof *d);
}

static void push_start(fg_decisions_t *d, const fg__job_t *j, const fg_alloc_t *al, int32_t n)
{
    d->starts = fg__grow(d->starts, &d->starts_cap, d->nstarts + 1, sizeof *d->starts);
    d->allocs = fg__grow(d->allocs, &d->allocs_cap, d->nallocs + (size_t)n, sizeof *d->allocs);
    fg_start_t *st = &d->starts[d->nstarts++];
    st->job = j->id;
    st->attempt = j->attempt;
    st->gpus = j->gpus;
    st->alloc_off = (int32_t)d->nallocs;
    st->alloc_n = n;
    memcpy(&d->allocs[d->nallocs], al, sizeof *al * (size_t)n);
    d->nallocs += (size_t)n;
}

static void push_preempt(fg_decisions_t *d, const fg__job_t *v, fg_preempt_why_t why,
                         fg_job_id_t for_job)
{
    d->preempts = fg__grow(d->preempts, &d->preempts_cap, d->npreempts + 1, sizeof *d->preempts);
    fg_preempt_t *p = &d->preempts[d->npreempts++];
    p->job = v->id;
    p->attempt = v->attempt;
    p->why = why;
    p->for_job = for_job;
}

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

static bool is_touched(const fg_sched_t *s, int32_t n)
{
    return s->nodes[n].touched == s->walk_no;
}

/* GPUs of node n that a job ending at `end` may take now: free, and not reserved
 * before `end`. */
static uint64_t usable_mask(const fg_sched_t *s, int32_t n, fg_time_t end)
{
    const fg__node_t *nd = &s->nodes[n];
    if (!is_touched(s, n))
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

static bool type_matches(const fg__job_t *j, int32_t t)
{
    return j->type < 0 || j->type == t;
}

/* ------------------------------------------------------------------ placing now */

/* Best-fit single node for j (g <= 8) starting now; fills *al. */
static bool place_single(fg_sched_t *s, const fg__job_t *j, fg_time_t now, fg_alloc_t *al)
{
    const int g = j->gpus;
    const fg_time_t end = now + j->time_limit;
    int32_t best = -1, best_free = 0;
    uint64_t best_mask = 0;
    for (size_t ti = 0; ti < s->ntypes; ti++) {
        const fg__type_t *t = &s->types[ti];
        if (!type_matches(j, (int32_t)ti) || t->free_gpus < g || t->dirty)
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
                    if (!is_touched(s, n)) {
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
        if (nd->state != FG_NODE_UP || !type_matches(j, nd->type) || nd->nfree < g)
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
static bool place_whole(fg_sched_t *s, const fg__job_t *j, fg_time_t now, fg_alloc_t *al)
{
    const int32_t k = j->gpus / FG_WHOLE_NODE_GPUS;
    const fg_time_t end = now + j->time_limit;
    for (size_t ti = 0; ti < s->ntypes; ti++) {
        const fg__type_t *t = &s->types[ti];
        if (!type_matches(j, (int32_t)ti) || t->free_gpus < j->gpus || t->dirty)
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
                    if (is_touched(s, n) && usable_mask(s, n, end) != low_bits(nd->gpus))
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
static __attribute__((noinline)) fg__fail_t *fail_memo_fill(fg_sched_t *s, size_t ts)
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

static inline fg__fail_t *fail_memo(fg_sched_t *s, size_t ts)
{
    if (ts < s->fail_cap && s->fail[ts].walk == s->walk_no)
        return &s->fail[ts];
    return fail_memo_fill(s, ts);
}

/* Did a job of no more GPUs than j, ending no later than `end`, already fail to fit? */
static inline bool fail_known(const fg__fail_t *f, const fg__job_t *j, fg_time_t end)
{
    if (j->gpus <= FG_WHOLE_NODE_GPUS)
        return f->single[j->gpus] != FG__INF && f->single[j->gpus] <= end;
    for (int32_t k = 0; k < f->nwhole; k++)
        if (f->whole_k[k] <= j->gpus / FG_WHOLE_NODE_GPUS && f->whole_end[k] <= end)
            return true;
    return false;
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
static bool place_now(fg_sched_t *s, const fg__job_t *j, fg_time_t now, fg_alloc_t *al)
{
    const fg_time_t end = now + j->time_limit;
    fg__fail_t *own = fail_memo(s, (size_t)(j->type + 1));
    if (fail_known(own, j, end) || (j->type >= 0 && fail_known(fail_memo(s, 0), j, end)))
        return false;
    bool ok =
        j->gpus <= FG_WHOLE_NODE_GPUS ? place_single(s, j, now, al) : place_whole(s, j, now, al);
    if (!ok) /* (own is still in place: fail_memo(s, 0) never grows the array) */
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
static fg_time_t plan_claim(fg_sched_t *s, fg__job_t *j, fg_time_t now, bool protect)
{
    const int g = j->gpus;
    if (g <= FG_WHOLE_NODE_GPUS) {
        int64_t best = FG__INF;
        int32_t bt = -1;
        for (size_t ti = 0; ti < s->ntypes; ti++) {
            if (!type_matches(j, (int32_t)ti) || s->types[ti].dirty)
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
        if (!type_matches(j, (int32_t)ti) || t->dirty)
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

static bool feasible_count(fg_sched_t *s, const fg__job_t *j, fg_reason_t *why);

static __attribute__((noinline)) bool feasible_fill(fg_sched_t *s, const fg__job_t *j,
                                                    fg__feas_memo_t *m)
{
    m->why = FG_REASON_NONE;
    m->ok = feasible_count(s, j, &m->why);
    m->gen = s->node_gen;
    m->gpus = j->gpus;
    m->type = j->type;
    if (m->ok && j->type < 0 && j->gpus <= FG_WHOLE_NODE_GPUS && !s->plain)
        s->feas_any |= 1u << j->gpus;
    return m->ok;
}

/* Could j ever run on the cluster as it is (ignoring what runs)? Sets *why. The same
 * size and type get the same answer until a node is added or changes state; the sizes
 * of one node and any type found feasible are also a bit mask, read first. */
static inline bool feasible(fg_sched_t *s, const fg__job_t *j, fg_reason_t *why)
{
    if (j->type < 0 && j->gpus <= FG_WHOLE_NODE_GPUS && (s->feas_any >> j->gpus & 1))
        return true;
    fg__feas_memo_t *m = &s->feas_memo[(j->gpus + 7 * (j->type + 1)) & 15];
    if (m->gen != s->node_gen || m->gpus != j->gpus || m->type != j->type)
        feasible_fill(s, j, m);
    if (!m->ok)
        *why = m->why;
    return m->ok;
}

/* A pending job looked at in this pass: no estimate or numbers yet. */
static inline void reason_clear(const fg_sched_t *s, fg__job_t *j)
{
    j->reason_walk = s->walk_no;
    j->est = FG_TIME_NEVER;
    j->r_job = 0;
    j->r_a = j->r_b = 0;
}

/* The reasons that depend on neither the plan nor the order, in the order every walk
 * tests them: the account's budget, its quota, no node that could ever run it. Sets the
 * reason and returns true when one applies. */
static inline bool reason_account_or_fit(fg_sched_t *s, fg__job_t *j, const fg__account_t *a)
{
    fg_reason_t why;
    if (a->budget_exhausted) {
        j->reason = FG_REASON_BUDGET;
    } else if (a->quota >= 0 && a->running + j->gpus > a->quota) {
        j->reason = FG_REASON_QUOTA;
        j->r_a = a->running;
        j->r_b = a->quota;
    } else if (!feasible(s, j, &why)) {
        j->reason = why;
    } else {
        return false;
    }
    return true;
}

static bool feasible_count(fg_sched_t *s, const fg__job_t *j, fg_reason_t *why)
{
    bool exists = false; /* some node, any state, could hold it */
    const int gi = j->gpus <= FG_WHOLE_NODE_GPUS ? j->gpus : FG_WHOLE_NODE_GPUS;
    for (size_t ti = 0; ti < s->ntypes; ti++) {
        fg__type_t *t = &s->types[ti];
        if (!type_matches(j, (int32_t)ti))
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

/* Why a job that could not start waits: reserved GPUs, fragmentation or resources. */
static fg_reason_t blocked_reason(fg_sched_t *s, fg__job_t *j)
{
    int32_t free_any = 0;
    for (size_t ti = 0; ti < s->ntypes; ti++)
        if (type_matches(j, (int32_t)ti))
            free_any += s->types[ti].free_gpus;
    j->r_b = free_any;
    if (free_any < j->gpus)
        return FG_REASON_RESOURCES;
    /* Free GPUs that would fit it but are held for another job? */
    for (size_t k = 0; k < s->ntouched; k++) {
        const fg__node_t *nd = &s->nodes[s->touched_nodes[k]];
        if (nd->state != FG_NODE_UP || !type_matches(j, nd->type))
            continue;
        bool fits = j->gpus <= FG_WHOLE_NODE_GPUS ? nd->nfree >= j->gpus : nd->nfree == nd->gpus;
        if (!fits)
            continue;
        for (int i = 0; i < nd->gpus; i++)
            if (nd->gpu_job[i] < 0 && nd->res_job[i] && nd->res_job[i] != j->id) {
                j->r_job = nd->res_job[i];
                j->r_a = nd->res_from[i];
                return FG_REASON_RESERVATION;
            }
    }
    return FG_REASON_FRAGMENTATION;
}

/* blocked_reason_memo when the memo does not hold the answer: makes it and keeps it. */
static __attribute__((noinline)) fg_reason_t blocked_reason_fill(fg_sched_t *s, fg__job_t *j,
                                                                 fg__why_memo_t *m)
{
    fg_job_id_t r_job = j->r_job;
    int64_t r_a = j->r_a;
    fg_reason_t r = blocked_reason(s, j);
    m->walk = s->walk_no;
    m->ver = s->plan_ver;
    m->gpus = j->gpus;
    m->type = j->type;
    m->reason = r;
    m->r_b = j->r_b;
    m->r_job = r == FG_REASON_RESERVATION ? j->r_job : r_job;
    m->r_a = r == FG_REASON_RESERVATION ? j->r_a : r_a;
    return r;
}

/* blocked_reason through the walk's memo: the same job size and type get the same
 * answer while the plan is unchanged (plan_ver). */
static inline fg_reason_t blocked_reason_memo(fg_sched_t *s, fg__job_t *j)
{
    fg__why_memo_t *m =
        &s->why_memo[(j->gpus <= FG_WHOLE_NODE_GPUS ? j->gpus : 8 + j->gpus / FG_WHOLE_NODE_GPUS) &
                     15];
    if (m->walk == s->walk_no && m->ver == s->plan_ver && m->gpus == j->gpus &&
        m->type == j->type && m->r_job != j->id) {
        j->r_b = m->r_b;
        if (m->reason == FG_REASON_RESERVATION) {
            j->r_job = m->r_job;
            j->r_a = m->r_a;
        }
        return m->reason;
    }
    return blocked_reason_fill(s, j, m);
}

/* Lazy reasons (estimates on demand only). Once a walk has made every claim that
 * decisions depend on (its first blocked jobs' reservations and preemption candidates)
 * and a job is known not to fit (no free GPU, or a failed placement of the walk proves
 * it: see fg__fail_t), what the walk leaves on that job is its blocked reason and, within
 * the first estimate_depth jobs, a queued estimate. The reason depends only on the job's
 * size, type and id and on what blocked_reason reads: the free GPUs, and the touched
 * nodes' free GPUs and reservations. Until the walk's next start or preemption, or the
 * next event, only estimate-only claims change the plan, and they reserve nothing and
 * only add touched nodes without reservations at the end of the list: the answer is the
 * same. So the walk marks the job (FG__REASON_LAZY) and lists it; its reason is made when
 * asked for (fg__plan_ask), or before a start or a preemption of the walk (lazy_flush);
 * one not asked for before the next walk, event or pass stays unknown (the job shows as
 * not reached). */
static void lazy_fix(fg_sched_t *s, fg__job_t *j)
{
    if (j->reason != FG__REASON_LAZY || s->no_reasons)
        return;
    j->r_job = 0;
    j->r_a = j->r_b = 0;
    j->reason = blocked_reason_memo(s, j);
    if (j->reason == FG_REASON_RESERVATION)
        j->r_b = j->r_a; /* as the walk writes it (no claim in between) */
}

static void lazy_flush(fg_sched_t *s)
{
    for (size_t k = 0; k < s->nlazy; k++)
        lazy_fix(s, &s->jobs[s->lazy[k]]);
    s->nlazy = 0;
}

/* ------------------------------------------------------------------ preemption */

typedef struct ent_calc {
    double *ent_a, *ent_m;
    double *d, *w, *om;
    int32_t *idx, *ms;
    bool *m_done; /* per account: its members' entitlements are in ent_m */
    bool done;
} ent_calc_t;

/* The fill of a weighted max-min split: the m entities with demand in fill[], in order
 * of (d/w, index), each given min(d, its weight's part of what is left). */
static void water_fill_sorted(const int32_t *fill, size_t m, const double *d, const double *w,
                              double cap, double *out)
{
    double wsum = 0;
    for (size_t a = 0; a < m; a++)
        wsum += w[fill[a]];
    for (size_t a = 0; a < m; a++) {
        int32_t i = fill[a];
        double share = wsum > 0 ? cap * w[i] / wsum : 0;
        out[i] = d[i] < share ? d[i] : share;
        cap -= out[i];
        wsum -= w[i];
    }
}

/* Weighted max-min split of `cap` among n entities with demand d[i] and weight w[i] > 0.
 * Those with demand are filled by (d/w, index). */
void fg__water_fill(size_t n, const double *d, const double *w, double cap, double *out,
                    int32_t *idx)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        out[i] = 0;
        if (d[i] > 0) {
            idx[m++] = (int32_t)i;
            out[i] = d[i] / w[i]; /* its sort key until its share replaces it below */
        }
    }
    /* insertion sort by d/w (n is the number of accounts or members: small) */
    for (size_t a = 1; a < m; a++) {
        int32_t v = idx[a];
        size_t b = a;
        while (b > 0 && out[idx[b - 1]] > out[v]) {
            idx[b] = idx[b - 1];
            b--;
        }
        idx[b] = v;
    }
    water_fill_sorted(idx, m, d, w, cap, out);
}

/* The same split kept sorted from one call to the next (a few demands change between two
 * preemption searches): every entity sits in order by (key, index), key d/w or -1 without
 * demand (w > 0: a key with demand is >= 0), so those with demand come last, in the
 * order fg__water_fill sorts them in (by d/w, ties by index: a total order, so one
 * order whatever the sort). fg__wf_set moves one entity to its new place. */
void fg__wf_init(fg__wf_t *f, size_t n)
{
    free(f->key);
    f->key = fg__alloc((sizeof(double) * 3 + sizeof(int32_t) * 2) * (n ? n : 1));
    f->d = f->key + n;
    f->w = f->d + n;
    f->order = (int32_t *)(f->w + n);
    f->pos = f->order + n;
    f->n = f->none = n;
    for (size_t i = 0; i < n; i++) {
        f->key[i] = -1.0;
        f->d[i] = 0;
        f->w[i] = 1.0;
        f->order[i] = f->pos[i] = (int32_t)i;
    }
}

void fg__wf_set(fg__wf_t *f, int32_t i, double d, double w)
{
    if (d == f->d[i] && w == f->w[i])
        return;
    f->none += (size_t) !(d > 0) - (size_t) !(f->d[i] > 0);
    f->d[i] = d;
    f->w[i] = w;
    const double k = d > 0 ? d / w : -1.0;
    size_t p = (size_t)f->pos[i];
    while (p > 0 && (f->key[p - 1] > k || (f->key[p - 1] == k && f->order[p - 1] > i))) {
        f->key[p] = f->key[p - 1];
        f->order[p] = f->order[p - 1];
        f->pos[f->order[p]] = (int32_t)p;
        p--;
    }
    while (p + 1 < f->n && (f->key[p + 1] < k || (f->key[p + 1] == k && f->order[p + 1] < i))) {
        f->key[p] = f->key[p + 1];
        f->order[p] = f->order[p + 1];
        f->pos[f->order[p]] = (int32_t)p;
        p++;
    }
    f->key[p] = k;
    f->order[p] = i;
    f->pos[i] = (int32_t)p;
}

void fg__wf_fill(const fg__wf_t *f, double cap, double *out)
{
    for (size_t a = 0; a < f->none; a++)
        out[f->order[a]] = 0;
    water_fill_sorted(f->order + f->none, f->n - f->none, f->d, f->w, cap, out);
}

/* The accounts' entitlements, once per preemption search; the members' are made per
 * account when one of them is first read (ent_member): a search reads those of the
 * waiting job's account and of the victims' in that account only. One block
 * (s->ent_blk, kept from one search to the next) holds them and the scratch arrays.
 * The accounts' split is kept sorted from the last search (s->ent_wf): only the accounts
 * whose demand or weight changed since move. */
static void entitlements(fg_sched_t *s, ent_calc_t *e)
{
    if (e->done)
        return;
    e->done = true;
    size_t na = s->naccounts, nm = s->nmembers, n = na + nm + 1;
    s->ent_blk = fg__grow(s->ent_blk, &s->ent_cap,
                          sizeof(double) * (na + nm + 1 + 3 * n) + sizeof(int32_t) * (2 * n) +
                              sizeof(bool) * (na + 1),
                          1);
    double *blk = s->ent_blk;
    e->ent_a = blk;
    e->ent_m = blk + na;
    e->d = e->ent_m + nm + 1;
    e->w = e->d + n;
    e->om = e->w + n;
    e->idx = (int32_t *)(e->om + n);
    e->ms = e->idx + n;
    e->m_done = (bool *)(e->ms + n);
    memset(e->m_done, 0, sizeof(bool) * (na + 1));
    const double cap = (double)fg_sched_gpus_up(s);
    if (s->plain) {
        double *d = e->d, *w = e->w;
        for (size_t i = 0; i < na; i++) {
            d[i] = (double)s->accounts[i].running + (double)s->accounts[i].pending_gpus;
            w[i] = s->accounts[i].weight;
        }
        fg__water_fill(na, d, w, cap, e->ent_a, e->idx);
        return;
    }
    fg__wf_t *f = &s->ent_wf;
    if (f->n != na) /* (a new account: start again) */
        fg__wf_init(f, na);
    for (size_t i = 0; i < na; i++) {
        const double d = (double)s->accounts[i].running + (double)s->accounts[i].pending_gpus;
        if (d != f->d[i] || s->accounts[i].weight != f->w[i])
            fg__wf_set(f, (int32_t)i, d, s->accounts[i].weight);
    }
    fg__wf_fill(f, cap, e->ent_a);
}

/* Member m's entitlement (entitlements made): its account's entitlement split among the
 * account's members in ascending index order, made for all of them at the first read. */
static double ent_member(fg_sched_t *s, ent_calc_t *e, int32_t m)
{
    const int32_t a = s->members[m].account;
    if (!e->m_done[a]) {
        e->m_done[a] = true;
        /* The members of each account in ascending index (s->ent_mem: from first[a] to
         * first[a + 1] in the list after first[]), made again when a member or an account
         * was added (a member never leaves nor changes account); under
         * fg__sched_set_plain, every member is read. */
        const size_t na = s->naccounts, nm = s->nmembers;
        if (!s->plain && (s->ent_mem_na != na || s->ent_mem_nm != nm)) {
            free(s->ent_mem);
            s->ent_mem = fg__alloc(sizeof(int32_t) * (na + 1 + nm));
            int32_t *first = s->ent_mem, *list = first + na + 1;
            memset(first, 0, sizeof(int32_t) * (na + 1));
            for (size_t i = 0; i < nm; i++)
                first[s->members[i].account + 1]++;
            for (size_t b = 0; b < na; b++)
                first[b + 1] += first[b];
            for (size_t i = 0; i < nm; i++) /* (first[b] ends at b's end, then moves back) */
                list[first[s->members[i].account]++] = (int32_t)i;
            for (size_t b = na; b > 0; b--)
                first[b] = first[b - 1];
            first[0] = 0;
            s->ent_mem_na = na;
            s->ent_mem_nm = nm;
        }
        const int32_t *list = s->ent_mem + na + 1;
        const size_t from = s->plain ? 0 : (size_t)s->ent_mem[a];
        const size_t to = s->plain ? nm : (size_t)s->ent_mem[a + 1];
        size_t c = 0;
        for (size_t k = from; k < to; k++) {
            const size_t i = s->plain ? k : (size_t)list[k];
            const fg__member_t *mb = &s->members[i];
            if (mb->account != a)
                continue;
            e->d[c] = (double)mb->running + (double)mb->pending_gpus;
            e->w[c] = mb->weight;
            e->ms[c++] = (int32_t)i;
        }
        fg__water_fill(c, e->d, e->w, e->ent_a[a], e->om, e->idx);
        for (size_t k = 0; k < c; k++)
            e->ent_m[e->ms[k]] = e->om[k];
    }
    return e->ent_m[m];
}

/* Has running job v run long enough to be stopped under fair share or las: quantum_s of
 * run time over all attempts, and in this attempt min_run_s and, when the job declares
 * one, a checkpoint interval (so every attempt keeps some progress)? If not, lowers
 * *wake to when it will have. */
static inline bool ran_enough(const fg__job_t *v, fg_time_t now, fg_time_t min_run,
                              fg_time_t quantum, fg_time_t *wake)
{
    fg_time_t ok_at = v->start_time + (min_run > v->ckpt ? min_run : v->ckpt);
    fg_time_t q = v->start_time + quantum - v->run_s;
    if (q > ok_at)
        ok_at = q;
    if (ok_at > now) {
        if (ok_at < *wake)
            *wake = ok_at;
        return false;
    }
    return true;
}

/* Is running job v a legal victim for waiting job j in this mode? Sets *wake when v
 * would become one later by running longer. `over`: under fair share, for v of another
 * account than j's, whether v's account runs more than its entitlement (the caller's
 * answer for the whole list: the same test), else -1. */
static bool victim_ok(fg_sched_t *s, const fg__job_t *j, const fg__job_t *v, fg_preempt_why_t why,
                      ent_calc_t *e, fg_time_t now, fg_time_t *wake, int over)
{
    if (v->preempting || v->state != FG_JOB_RUNNING || v->id == j->id)
        return false;
    /* Never start and stop a job at the same time (in one pass, or in a second pass at
     * that time: passes at one time decide what one pass would)... */
    if (v->start_time >= now) {
        if (now + 1 < *wake)
            *wake = now + 1; /* ...but it may be a victim a second later */
        return false;
    }
    if (why == FG_PREEMPT_PRIORITY)
        return v->prio == FG_PRIO_LOW;
    if (v->prio == FG_PRIO_HIGH || v->prio > j->prio)
        return false;
    fg_time_t ran = now - v->start_time;
    if (why == FG_PREEMPT_LAS) {
        int64_t att = v->attained_gpu_s + (int64_t)v->gpus * ran;
        if (fg__las_level(s, att) <= j->band) {
            /* its attained service grows while it runs: it may pass j's queue later */
            if (j->band + 1 < s->cfg.las_levels && v->gpus > 0) {
                int64_t need = s->cfg.las_thresholds_gpu_s[j->band] - att;
                fg_time_t at = now + (need + v->gpus - 1) / v->gpus;
                if (at > now && at < *wake)
                    *wake = at;
            }
            return false;
        }
    } else if (over >= 0) {
        if (!over)
            return false;
    } else {
        entitlements(s, e);
        if (v->account != j->account) {
            if ((double)s->accounts[v->account].running <= e->ent_a[v->account] + 1e-9)
                return false;
        } else if (v->member == j->member ||
                   (double)s->members[v->member].running <= ent_member(s, e, v->member) + 1e-9) {
            return false;
        }
    }
    /* Fair share and las stop only long runners (ran_enough) */
    return ran_enough(v, now, s->cfg.min_run_s, s->cfg.quantum_s, wake);
}

/* victim_ok under fair share for v of another account than j's, one that runs more
 * than its entitlement (over == 1), with the configuration's min_run_s and quantum_s
 * read once per search, and its class test made once per running list (`cls`: the
 * list's class is neither high nor above j's; a job's class never changes): the same
 * tests in the same order. */
static inline bool over_victim_ok(const fg__job_t *j, const fg__job_t *v, fg_time_t now,
                                  fg_time_t min_run, fg_time_t quantum, bool cls, fg_time_t *wake)
{
    if (v->preempting || v->state != FG_JOB_RUNNING || v->id == j->id)
        return false;
    if (v->start_time >= now) {
        if (now + 1 < *wake)
            *wake = now + 1;
        return false;
    }
    if (!cls)
        return false;
    return ran_enough(v, now, min_run, quantum, wake);
}

static int64_t lost_gpu_s(const fg__job_t *v, fg_time_t now)
{
    fg_time_t ran = now - v->start_time;
    return (int64_t)v->gpus * (v->ckpt > 0 ? ran % v->ckpt : ran);
}

typedef struct victim {
    int32_t slot;
    fg_job_id_t id;
    int64_t lost;
} victim_t;

static int victim_cmp(const void *a, const void *b)
{
    const victim_t *x = a, *y = b;
    if (x->lost != y->lost)
        return x->lost < y->lost ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id; /* not the slot: restores lay them out anew */
}

/* GPUs of node n that are free or held by a job already being preempted, and the
 * GPUs held by this pass's legal victims; *cost is what those victims lose. */
/* Is GPU i of node nd, in this walk's plan, held for another job of j's class or
 * higher (ahead of j)? Preempting cannot give j such a GPU. */
static bool held_for_other(const fg_sched_t *s, const fg__node_t *nd, int i, const fg__job_t *j)
{
    if (nd->touched != s->walk_no || !nd->res_job[i] || nd->res_job[i] == j->id)
        return false;
    const fg__job_t *r = fg__job_by_id(s, nd->res_job[i]);
    return r && r->prio >= j->prio;
}

/* GPUs of node nd that j could have: free or held by a job already being preempted,
 * and the GPUs held by this search's legal victims (not those held for another). */
static void node_room(const fg_sched_t *s, const fg__node_t *nd, const fg__job_t *j, int32_t *have,
                      int32_t *vict)
{
    *have = *vict = 0;
    for (int i = 0; i < nd->gpus; i++) {
        int32_t slot = nd->gpu_job[i];
        if (held_for_other(s, nd, i, j))
            continue;
        if (slot < 0 || s->jobs[slot].preempting)
            (*have)++;
        else if (s->jobs[slot].victim_pass == s->stamp)
            (*vict)++;
    }
}

/* GPUs of node nd held by job `slot` that job j could use once they are freed. */
static int32_t gpus_of_on(const fg_sched_t *s, const fg__node_t *nd, const fg__job_t *j,
                          int32_t slot)
{
    int32_t n = 0;
    for (int i = 0; i < nd->gpus; i++)
        n += nd->gpu_job[i] == slot && !held_for_other(s, nd, i, j);
    return n;
}

/* The distinct legal victims (this search's marks) running on node nd, cheapest
 * first; returns how many were written to vs (room for FG_MAX_NODE_GPUS). */
static int32_t node_victims(const fg_sched_t *s, const fg__node_t *nd, fg_time_t now, victim_t *vs)
{
    int32_t nv = 0;
    for (int i = 0; i < nd->gpus; i++) {
        int32_t slot = nd->gpu_job[i];
        if (slot < 0 || s->jobs[slot].victim_pass != s->stamp || s->jobs[slot].preempting)
            continue;
        bool seen = false;
        for (int32_t k = 0; k < nv; k++)
            seen |= vs[k].slot == slot;
        if (!seen) {
            vs[nv].slot = slot;
            vs[nv].id = s->jobs[slot].id;
            vs[nv].lost = lost_gpu_s(&s->jobs[slot], now);
            nv++;
        }
    }
    for (int32_t a = 1; a < nv; a++) { /* (at most FG_MAX_NODE_GPUS: by insertion) */
        victim_t x = vs[a];
        int32_t b = a;
        for (; b > 0 && victim_cmp(&vs[b - 1], &x) > 0; b--)
            vs[b] = vs[b - 1];
        vs[b] = x;
    }
    return nv;
}

static int int32_cmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* Tries to free room for blocked job j by preemption; pushes the victims.
 * Candidates come from the running lists of the accounts and classes that may lose
 * GPUs, so the cost is the number of possible victims, not the cluster size. */
static void try_preempt(fg_sched_t *s, fg__job_t *j, fg_time_t now, ent_calc_t *e,
                        fg_decisions_t *out, fg_time_t *wake)
{
    /* Victims already stopping for j: their GPUs go to j first (serve_claims), so it
     * never frees a second set, even when the walk's plan lends those GPUs to a
     * reservation ahead of j and its estimate stays in the future. */
    if (j->claim > 0)
        return;
    fg_preempt_why_t why;
    if (j->prio == FG_PRIO_HIGH) {
        why = FG_PREEMPT_PRIORITY;
    } else if (s->cfg.policy == FG_POLICY_WFQ || s->cfg.policy == FG_POLICY_RR ||
               s->cfg.policy == FG_POLICY_LAS) {
        fg_time_t ready = j->queued_since + s->cfg.preempt_wait_s;
        if (ready > now) {
            if (ready < *wake)
                *wake = ready;
            return;
        }
        why = s->cfg.policy == FG_POLICY_LAS ? FG_PREEMPT_LAS : FG_PREEMPT_FAIR_SHARE;
        if (why == FG_PREEMPT_FAIR_SHARE) {
            entitlements(s, e);
            bool acct_under =
                (double)s->accounts[j->account].running + j->gpus <= e->ent_a[j->account] + 1e-9;
            if (!acct_under && !((double)s->members[j->member].running + j->gpus <=
                                 ent_member(s, e, j->member) + 1e-9))
                return;
        }
    } else {
        return;
    }

    /* 1. legal victims, marked with victim_pass; their nodes become candidates */
    s->stamp++;
    const bool whole = j->gpus > FG_WHOLE_NODE_GPUS;
    const int32_t need_nodes = whole ? j->gpus / FG_WHOLE_NODE_GPUS : 1;
    /* (each node is a candidate at most once: room for all of them) */
    if (s->cand_cap < s->nnodes)
        s->cand = fg__grow(s->cand, &s->cand_cap, s->nnodes, sizeof *s->cand);
    int32_t *cand = s->cand;
    size_t ncand = 0;
    /* (in locals: the marks written below could alias them) */
    fg__job_t *const jobs = s->jobs;
    fg__node_t *const nodes = s->nodes;
    const int64_t stamp = s->stamp;
    const fg_time_t min_run = s->cfg.min_run_s, quantum = s->cfg.quantum_s;
    fg_time_t wk = *wake;
    for (size_t a = 0; a < s->naccounts; a++) {
        /* Under fair share no job of an account at or under its entitlement (not j's), nor
         * of j's account when j's member holds all its running GPUs, is a legal victim
         * (victim_ok); their lists are read only when one of their jobs may have started
         * at `now` (last_start), which lowers *wake. */
        if (why == FG_PREEMPT_FAIR_SHARE && s->accounts[a].last_start < now &&
            ((int32_t)a != j->account ? (double)s->accounts[a].running <= e->ent_a[a] + 1e-9
                                      : s->members[j->member].running == s->accounts[a].running) &&
            !s->plain)
            continue;
        const int over = why == FG_PREEMPT_FAIR_SHARE && (int32_t)a != j->account && !s->plain
                             ? !((double)s->accounts[a].running <= e->ent_a[a] + 1e-9)
                             : -1;
        for (int c = FG_PRIO_LOW; c <= FG_PRIO_NORMAL; c++) {
            if (why == FG_PREEMPT_PRIORITY && c != FG_PRIO_LOW)
                continue;
            const bool cls = c != FG_PRIO_HIGH && c <= (int)j->prio;
            for (int32_t v = s->accounts[a].run_head[c]; v >= 0; v = jobs[v].rnext) {
                fg__job_t *vj = &jobs[v];
                if (!(over == 1 ? over_victim_ok(j, vj, now, min_run, quantum, cls, &wk)
                                : victim_ok(s, j, vj, why, e, now, &wk, over)))
                    continue;
                vj->victim_pass = stamp;
                const int32_t nal = vj->nallocs;
                const fg_alloc_t *al = nal > 1 ? vj->allocm : &vj->alloc1;
                for (int32_t k = 0; k < nal; k++) {
                    fg__node_t *nd = &nodes[al[k].node];
                    /* (a job on one node holds all its GPUs there: fg__job_start,
                     * fg_sched_restore_running) */
                    const int32_t g = nal == 1 ? vj->gpus : __builtin_popcountll(al[k].gpu_mask);
                    if (nd->cand_pass == stamp) {
                        nd->cand_vict += g;
                        continue;
                    }
                    if (nd->state != FG_NODE_UP || !type_matches(j, nd->type) ||
                        (whole ? nd->gpus < FG_WHOLE_NODE_GPUS : nd->gpus < j->gpus))
                        continue;
                    nd->cand_pass = stamp;
                    nd->cand_vict = g;
                    cand[ncand++] = al[k].node;
                }
            }
        }
    }
    *wake = wk;
    if (!ncand)
        return;
    /* whole-node jobs may also use nodes that are already entirely free */
    if (whole) {
        for (size_t n = 0; n < s->nnodes; n++) {
            fg__node_t *nd = &s->nodes[n];
            if (nd->cand_pass != s->stamp && nd->state == FG_NODE_UP && type_matches(j, nd->type) &&
                nd->gpus >= FG_WHOLE_NODE_GPUS && nd->nfree == nd->gpus) {
                nd->cand_pass = s->stamp;
                nd->cand_vict = 0;
                cand[ncand++] = (int32_t)n;
            }
        }
    }
    /* node_room's have + vict counts GPUs that are free (nfree), held by a job being
     * preempted or held by a legal victim (cand_vict), less those held for another: with
     * no job being preempted, nfree + cand_vict bounds it, and a node under the target
     * by that bound has no room (most candidates: their other GPUs run other jobs). Such
     * nodes are no candidates (unmarked: the order below reads the marks). */
    if (s->npreempting == 0 && !s->plain) {
        size_t k = 0;
        for (size_t ci = 0; ci < ncand; ci++) {
            fg__node_t *nd = &s->nodes[cand[ci]];
            if (nd->nfree + nd->cand_vict >= (whole ? nd->gpus : j->gpus))
                cand[k++] = cand[ci];
            else
                nd->cand_pass = 0;
        }
        ncand = k;
        if (!ncand)
            return;
    }
    /* ascending node index: the marked nodes read in order when they are many for the
     * cluster, else sorted (distinct indices: the same order either way) */
    if (ncand > 1 && s->nnodes <= 16 * ncand) {
        size_t k = 0;
        for (size_t n = 0; n < s->nnodes; n++)
            if (s->nodes[n].cand_pass == s->stamp)
                cand[k++] = (int32_t)n;
    } else if (ncand > 1 && ncand <= 16) {
        for (size_t a = 1; a < ncand; a++) {
            int32_t v = cand[a];
            size_t b = a;
            for (; b > 0 && cand[b - 1] > v; b--)
                cand[b] = cand[b - 1];
            cand[b] = v;
        }
    } else {
        qsort(cand, ncand, sizeof *cand, int32_cmp);
    }

    /* 2. cost of making room on each candidate node; keep the cheapest need_nodes */
    int32_t best_nodes[FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS];
    int64_t best_cost[FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS];
    int32_t nbest = 0;
    victim_t vs[FG_MAX_NODE_GPUS];
    for (size_t ci = 0; ci < ncand; ci++) {
        const fg__node_t *nd = &s->nodes[cand[ci]];
        int32_t have, vict;
        node_room(s, nd, j, &have, &vict);
        int32_t target = whole ? nd->gpus : j->gpus;
        if (have + vict < target)
            continue;
        int32_t nv = node_victims(s, nd, now, vs);
        int64_t cost = 0;
        for (int32_t k = 0; k < nv && have < target; k++) {
            have += gpus_of_on(s, nd, j, vs[k].slot);
            cost += vs[k].lost;
        }
        if (have < target)
            continue;
        int32_t p = nbest; /* insertion by (cost, node index): nodes come ascending */
        while (p > 0 && best_cost[p - 1] > cost)
            p--;
        if (p >= need_nodes)
            continue;
        int32_t last = nbest < need_nodes ? nbest : need_nodes - 1;
        for (int32_t q = last; q > p; q--) {
            best_nodes[q] = best_nodes[q - 1];
            best_cost[q] = best_cost[q - 1];
        }
        best_nodes[p] = cand[ci];
        best_cost[p] = cost;
        if (nbest < need_nodes)
            nbest++;
    }
    if (nbest < need_nodes)
        return;

    /* 3. preempt: on each chosen node, the cheapest victims until it has room */
    const size_t before = out->npreempts;
    for (int32_t b = 0; b < nbest; b++) {
        const fg__node_t *nd = &s->nodes[best_nodes[b]];
        int32_t have, vict;
        node_room(s, nd, j, &have, &vict);
        int32_t nv = node_victims(s, nd, now, vs);
        int32_t target = whole ? nd->gpus : j->gpus;
        for (int32_t k = 0; k < nv && have < target; k++) {
            fg__job_t *v = &s->jobs[vs[k].slot];
            have += gpus_of_on(s, nd, j, vs[k].slot);
            v->preempting = true;
            s->npreempting++;
            v->r_job = j->id;
            push_preempt(out, v, why, j->id);
            j->claim++;
            if (!j->claimed) {
                j->claimed = true;
                s->claims = fg__grow(s->claims, &s->claims_cap, s->nclaims + 1, sizeof *s->claims);
                s->claims[s->nclaims++] = (int32_t)(j - s->jobs);
            }
            const fg_alloc_t *al = fg__job_allocs(v);
            for (int32_t k2 = 0; k2 < v->nallocs; k2++)
                fg__node_changed(s, al[k2].node); /* its GPUs are now "free soon" */
        }
    }
    if (out->npreempts > before)
        j->r_job = out->preempts[out->npreempts - 1].job;
}

/* ------------------------------------------------------------------ the pass */

/* Estimates on demand (fg_sched_set_estimates_on_demand). An estimate-only claim (not
 * protected, not for a preemption candidate) changes nothing but later estimate-only
 * claims: it reserves nothing, and placement treats a node it touched like any other.
 * Such claims come after every protecting or candidate claim of the walk, so the walk
 * may queue them and make them later, in the same order, on the same plan: before a
 * preemption changes the plan (fg__plan_settle), when the walk started jobs (another
 * walk follows; the starts are taken back and made again in between: deferred_replay),
 * or when one of them is asked for after the pass
 * (fg__plan_ask). The plan then stays in the trees until the next event or pass
 * (fg__plan_close), which drops the claims never asked for. */
static void deferred_replay(fg_sched_t *s, size_t upto);
static void deferred_run(fg_sched_t *s, size_t upto)
{
    if (s->ndsnap && upto > s->dhead) { /* estimates queued before a start */
        deferred_replay(s, upto);
        return;
    }
    while (s->dhead < upto) {
        fg__job_t *j = &s->jobs[s->deferred[s->dhead++]];
        lazy_fix(s, j); /* its reason before the claim writes r_a */
        j->est = plan_claim(s, j, s->plan_now, false);
    }
}

/* A start with estimates queued (walk) does not make them first: it leaves a mark in
 * the queue and the nodes it changes as they were, so that the estimates are made only
 * if someone needs them (a walk that started something is followed by another walk of
 * the same pass, which makes them moot: plan_next_walk; only the last walk a pass may
 * make keeps them, fg__plan_settle). To make them, the starts are taken back, newest first, and the
 * queue is replayed in its order: each estimate on the plan as it was then, each start
 * made again (fg__job_take_gpus), so the plan ends as the walk left it. The estimates
 * from deferred[upto] on are not made (moot, or dropped by fg__plan_close). Between
 * the first queued estimate and the end of the walk only starts change the nodes (a
 * walk's reserving and candidate claims come before its estimate-only ones, and a walk
 * that started something preempts nothing). */
static void deferred_replay(fg_sched_t *s, size_t upto)
{
    for (size_t k = s->ndsnap; k-- > 0;) {
        const fg__node_snap_t *sn = &s->dsnap[k];
        fg__node_t *nd = &s->nodes[sn->node];
        nd->nfree = sn->nfree;
        nd->free_mask = sn->free_mask;
        for (int i = 0; i < nd->gpus; i++) {
            nd->gpu_job[i] = sn->gpu_job[i];
            nd->avail[i] = sn->avail[i];
        }
        fg__node_changed(s, sn->node);
    }
    s->ndsnap = 0;
    for (size_t k = s->dhead; k < s->ndeferred; k++) {
        int32_t e = s->deferred[k];
        if (e < 0) {
            fg__job_t *j = &s->jobs[-1 - e];
            fg__job_take_gpus(s, -1 - e, fg__job_allocs(j), j->nallocs,
                              s->plan_now + j->time_limit);
        } else if (k < upto) {
            fg__job_t *j = &s->jobs[e];
            lazy_fix(s, j);
            j->est = plan_claim(s, j, s->plan_now, false);
        }
    }
    s->dhead = s->ndeferred;
}

/* Job `slot` starts on al[0..n) while estimates are queued: its mark and the nodes as
 * they were (deferred_replay). */
static void defer_start(fg_sched_t *s, int32_t slot, const fg_alloc_t *al, int32_t n)
{
    if (s->ndeferred == s->deferred_cap)
        s->deferred =
            fg__grow(s->deferred, &s->deferred_cap, s->ndeferred + 1, sizeof *s->deferred);
    s->deferred[s->ndeferred++] = -1 - slot;
    if (s->ndsnap + (size_t)n > s->dsnap_cap)
        s->dsnap = fg__grow(s->dsnap, &s->dsnap_cap, s->ndsnap + (size_t)n, sizeof *s->dsnap);
    for (int32_t k = 0; k < n; k++) {
        const fg__node_t *nd = &s->nodes[al[k].node];
        fg__node_snap_t *sn = &s->dsnap[s->ndsnap++];
        sn->node = al[k].node;
        sn->nfree = nd->nfree;
        sn->free_mask = nd->free_mask;
        for (int i = 0; i < nd->gpus; i++) {
            sn->gpu_job[i] = nd->gpu_job[i];
            sn->avail[i] = nd->avail[i];
        }
    }
}

static void walk_tail(fg_sched_t *s);

/* Makes the walk's queued estimate-only claims now (and walks what it left first). Inside a
 * walk (before its preemption changes the plan: fg__node_changed) another walk follows, as
 * after every preemption, unless it is the last a pass may make: what the walk left is
 * then moot and dropped (the pass shows what its last walk leaves). */
void fg__plan_settle(fg_sched_t *s)
{
    if (s->in_walk && !s->walk_last) {
        s->tail_on = false;
        s->nlazy = 0;
        s->dhead = s->ndeferred = s->ndsnap = 0;
        return;
    }
    walk_tail(s);
    lazy_flush(s);
    deferred_run(s, s->ndeferred);
}

/* j's estimate, from the plan as it is, or queued until asked for. */
static inline fg_time_t estimate(fg_sched_t *s, fg__job_t *j, fg_time_t now)
{
    if (!s->est_on_demand)
        return plan_claim(s, j, now, false);
    if (s->ndeferred == s->deferred_cap)
        s->deferred =
            fg__grow(s->deferred, &s->deferred_cap, s->ndeferred + 1, sizeof *s->deferred);
    s->deferred[s->ndeferred++] = (int32_t)(j - s->jobs);
    s->plan_now = now;
    return FG_TIME_NEVER;
}

/* The rest of a walk that stopped with no GPU free (walk): every claim that decisions
 * depend on is made (the first blocked jobs' reservations and preemption candidates),
 * nothing can start (no GPU is free and the walk starts nothing), and no pending job waits
 * out a backoff (so none of them moves next_wake). What is left up to the walk's end, its
 * first estimate_depth jobs, only gets reasons and queued estimates, on a plan that only
 * estimate-only claims change until the next event or pass: walked here, as the walk
 * would have walked it, when someone asks about a job it did not reach yet
 * (fg__plan_ask), before a preemption of the walk (fg__plan_settle) and before an
 * account, member or turn changes (fg__plan_finish_walk); dropped at the next event or
 * pass (fg__plan_close). */
static void walk_tail(fg_sched_t *s)
{
    if (!s->tail_on)
        return;
    s->tail_on = false;
    const fg_time_t now = s->tail_now;
    const bool window = s->tail_window;
    fg__order_t *o = s->tail_o;
    int64_t left = s->tail_left;
    int32_t slot;
    while (left > 0 && (slot = fg__order_next(s, o)) >= 0) {
        fg__job_t *j = &s->jobs[slot];
        /* (the backfill window counts every job the order gives; the first K, pending ones) */
        left -= window || j->state == FG_JOB_PENDING;
        if (j->state != FG_JOB_PENDING)
            continue;
        if (s->wout)
            s->wout->scanned++;
        reason_clear(s, j);
        if (j->eligible_time > now) { /* (not when the walk stopped: s->max_eligible) */
            j->reason = FG_REASON_RETRY_BACKOFF;
            j->est = j->eligible_time;
        } else if (reason_account_or_fit(s, j, &s->accounts[j->account])) {
            /* (set) */
        } else if (s->tail_head) { /* no backfill: behind the first blocked job */
            j->reason = FG_REASON_PRIORITY;
            j->r_job = s->tail_head;
            estimate(s, j, now);
        } else if (window) { /* past the first K: a reason only (lazy_fix) */
            if (s->no_reasons) {
                j->reason = FG__REASON_LAZY;
                continue;
            }
            j->reason = blocked_reason_memo(s, j);
            if (j->reason == FG_REASON_RESERVATION)
                j->r_b = j->r_a;
        } else { /* blocked_reason with no GPU free */
            j->reason = FG_REASON_RESOURCES;
            estimate(s, j, now);
        }
    }
}

/* Could walk_tail reach pending job j? (Not if the walk's order already gave it, or if
 * more of its member's jobs come before it than walk_tail has looks left.) */
static bool tail_may_reach(const fg_sched_t *s, const fg__job_t *j)
{
    const int32_t slot = (int32_t)(j - s->jobs);
    const fg__order_t *o = s->tail_o;
    const int64_t left = s->tail_left; /* jobs it looks at at most */
    if (o->band < 0 || o->band >= FG__NBANDS || j->band > o->band)
        return true;
    if (j->band < o->band)
        return false; /* its band was walked: the order gave it */
    /* its place in its member's queue (sorted by submit time, then id) */
    const fg__queue_t *q = &s->members[j->member].q[j->band];
    int32_t lo = q->head, hi = q->len;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        const fg__job_t *x = &s->jobs[q->v[mid]];
        if (x->submit_time < j->submit_time || (x->submit_time == j->submit_time && x->id < j->id))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo >= q->len || q->v[lo] != slot)
        return true; /* (not found: cannot happen; the safe answer) */
    const int32_t cur = o->cursor[j->member];
    return lo >= cur && lo - cur < left;
}

void fg__plan_finish_walk(fg_sched_t *s)
{
    walk_tail(s);
}

/* Drops the pass-local view: leaves go back to the real state. */
static void plan_restore(fg_sched_t *s)
{
    for (size_t k = 0; k < s->ntouched; k++) {
        int32_t n = s->touched_nodes[k];
        s->nodes[n].touched = -1;
        fg__node_leaf_restore(s, n);
    }
    s->ntouched = 0;
    s->plan_alive = false;
    s->tail_on = false;
}

void fg__plan_close(fg_sched_t *s)
{
    /* estimates and lazy reasons not asked for stay unknown */
    s->dhead = s->ndeferred = s->ndsnap = s->nlazy = 0;
    if (s->plan_alive)
        plan_restore(s);
}

void fg__plan_ask(fg_sched_t *s, int32_t slot)
{
    if (!s->plan_alive)
        return;
    fg__job_t *j = &s->jobs[slot];
    if (s->tail_on && j->state == FG_JOB_PENDING && tail_may_reach(s, j))
        walk_tail(s);
    if (j->reason == FG__REASON_LAZY && j->reason_walk == s->walk_no)
        lazy_fix(s, j); /* (a mark of this pass while the plan lives: the walk's list) */
    for (size_t k = s->dhead; k < s->ndeferred; k++)
        if (s->deferred[k] == slot) {
            deferred_run(s, k + 1);
            return;
        }
}

void fg__sched_set_plain(fg_sched_t *s, bool on)
{
    s->plain = on;
    s->feas_any = 0;
}

void fg__sched_set_max_walks(fg_sched_t *s, int32_t n)
{
    s->max_walks = n > 0 && n < FG__MAX_WALKS ? n : 0;
}

void fg_sched_set_estimates_on_demand(fg_sched_t *s, bool on)
{
    fg__plan_close(s);
    s->est_on_demand = on;
}

void fg_sched_set_no_reasons(fg_sched_t *s, bool on)
{
    fg__plan_close(s);
    s->no_reasons = on;
}

/* Starts, before the walk, the jobs that preemptions were issued for, so the GPUs
 * freed for them do not go to the jobs that were stopped (under fifo those come
 * first again). A claim ends when the job starts or no victim is left stopping. */
static void serve_claims(fg_sched_t *s, fg_time_t now, fg_decisions_t *out)
{
    if (!s->nclaims)
        return;
    /* deterministic whatever the insertion order: by (submit, id) */
    for (size_t a = 1; a < s->nclaims; a++) {
        int32_t v = s->claims[a];
        size_t b = a;
        while (b > 0 && (s->jobs[s->claims[b - 1]].submit_time > s->jobs[v].submit_time ||
                         (s->jobs[s->claims[b - 1]].submit_time == s->jobs[v].submit_time &&
                          s->jobs[s->claims[b - 1]].id > s->jobs[v].id))) {
            s->claims[b] = s->claims[b - 1];
            b--;
        }
        s->claims[b] = v;
    }
    fg_alloc_t al[FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS];
    size_t keep = 0;
    for (size_t k = 0; k < s->nclaims; k++) {
        int32_t slot = s->claims[k];
        fg__job_t *j = &s->jobs[slot];
        if (j->state != FG_JOB_PENDING || !j->claimed)
            continue; /* started by a walk meanwhile */
        const fg__account_t *a = &s->accounts[j->account];
        fg_reason_t why;
        bool ok = j->eligible_time <= now && !a->budget_exhausted &&
                  (a->quota < 0 || a->running + j->gpus <= a->quota) && feasible(s, j, &why);
        if (ok && (j->gpus <= FG_WHOLE_NODE_GPUS ? place_single(s, j, now, al)
                                                 : place_whole(s, j, now, al))) {
            int32_t n = j->gpus <= FG_WHOLE_NODE_GPUS ? 1 : j->gpus / FG_WHOLE_NODE_GPUS;
            fg__job_start(s, slot, al, n, now);
            push_start(out, j, al, n);
            continue;
        }
        if (j->claim > 0) /* victims still stopping: keep waiting for their GPUs */
            s->claims[keep++] = slot;
        else
            j->claimed = false; /* they stopped and it still does not fit: plain order */
    }
    s->nclaims = keep;
}

/* For fg__order_peek, in a walk past its claims (see walk): could pending job `slot` start
 * now? Not when it waits for its account's budget or quota, could never run, or a failed
 * placement of the walk proves it cannot fit; any other job may (the safe answer). */
typedef struct peek_ctx {
    fg_time_t now;
    /* [g], g = 1..8: a job of g GPUs of any type fits now iff it ends by this */
    fg_time_t fit_end[FG_WHOLE_NODE_GPUS + 1];
    /* With one GPU type (whole_exact): a job of k whole nodes fits now iff k <= nwhole
     * and it ends by whole_end[k - 1] (the k-th latest end a whole free node allows) */
    bool whole_exact;
    int32_t nwhole;
    fg_time_t whole_end[FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS];
} peek_ctx_t;

/* The whole free nodes of the only GPU type as place_whole sees them: a node of f >= 8
 * GPUs with all f free (its bucket f) may take a job ending by the earliest reservation
 * on its GPUs (none: any end, untouched: none either). Kept sorted, latest first, up to
 * the most nodes a job may ask for. */
static void peek_fill_whole(fg_sched_t *s, peek_ctx_t *p)
{
    const int32_t cap = FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS;
    p->nwhole = 0;
    p->whole_exact = s->ntypes == 1 && !s->types[0].dirty;
    if (!p->whole_exact)
        return;
    const fg__type_t *t = &s->types[0];
    for (int f = FG_WHOLE_NODE_GPUS; f <= t->maxgpus; f++) {
        const uint64_t *bm = &t->bm[(size_t)f * (size_t)t->words];
        for (int32_t w = 0; w < t->words; w++)
            for (uint64_t bits = bm[w]; bits; bits &= bits - 1) {
                const int32_t n = t->nodes[w * 64 + __builtin_ctzll(bits)];
                const fg__node_t *nd = &s->nodes[n];
                if (nd->gpus != f)
                    continue;
                fg_time_t until = FG__INF;
                if (is_touched(s, n))
                    for (int i = 0; i < nd->gpus; i++)
                        until = nd->res_from[i] < until ? nd->res_from[i] : until;
                if (p->nwhole == cap && until <= p->whole_end[cap - 1])
                    continue;
                int32_t q = p->nwhole < cap ? p->nwhole++ : cap - 1;
                while (q > 0 && p->whole_end[q - 1] < until) {
                    p->whole_end[q] = p->whole_end[q - 1];
                    q--;
                }
                p->whole_end[q] = until;
            }
    }
}

/* The walk's plan as place_single sees it: a job of g GPUs of any type ending at E fits iff
 * an untouched up node has g free GPUs, or a touched up node has g free GPUs not reserved
 * before E, i.e. E is at most the g-th latest reservation start among its free GPUs. */
static void peek_fill(fg_sched_t *s, peek_ctx_t *p)
{
    int32_t untouched = 0; /* most free GPUs on an untouched up node */
    for (size_t ti = 0; ti < s->ntypes; ti++) {
        const fg__type_t *t = &s->types[ti];
        if (t->dirty)
            continue;
        for (int f = t->maxgpus; f > untouched; f--) {
            const uint64_t *bm = &t->bm[(size_t)f * (size_t)t->words];
            bool found = false;
            for (int32_t w = 0; w < t->words && !found; w++)
                for (uint64_t bits = bm[w]; bits && !found; bits &= bits - 1)
                    found = !is_touched(s, t->nodes[w * 64 + __builtin_ctzll(bits)]);
            if (found) {
                untouched = f;
                break;
            }
        }
    }
    peek_fill_whole(s, p);
    for (int g = 1; g <= FG_WHOLE_NODE_GPUS; g++)
        p->fit_end[g] = g <= untouched ? FG__INF : INT64_MIN;
    for (size_t k = 0; k < s->ntouched; k++) {
        const fg__node_t *nd = &s->nodes[s->touched_nodes[k]];
        if (nd->state != FG_NODE_UP || nd->nfree <= 0)
            continue;
        fg_time_t r[FG_MAX_NODE_GPUS];
        int n = 0;
        for (int i = 0; i < nd->gpus; i++)
            if (nd->gpu_job[i] < 0) { /* insertion, latest first */
                int q = n++;
                while (q > 0 && r[q - 1] < nd->res_from[i]) {
                    r[q] = r[q - 1];
                    q--;
                }
                r[q] = nd->res_from[i];
            }
        for (int g = 1; g <= FG_WHOLE_NODE_GPUS && g <= n; g++)
            if (r[g - 1] > p->fit_end[g])
                p->fit_end[g] = r[g - 1];
    }
}

static bool could_start(fg_sched_t *s, int32_t slot, void *ctx)
{
    const peek_ctx_t *p = ctx;
    const fg_time_t now = p->now;
    fg__job_t *j = &s->jobs[slot];
    const fg__account_t *a = &s->accounts[j->account];
    fg_reason_t why;
    if (j->state != FG_JOB_PENDING || j->eligible_time > now)
        return true;
    if (a->budget_exhausted || (a->quota >= 0 && a->running + j->gpus > a->quota) ||
        !feasible(s, j, &why))
        return false;
    const fg_time_t end = now + j->time_limit;
    if (j->type < 0 && j->gpus <= FG_WHOLE_NODE_GPUS) /* exact (place_single) */
        return end <= p->fit_end[j->gpus];
    if (j->gpus > FG_WHOLE_NODE_GPUS && p->whole_exact) { /* exact (place_whole) */
        const int32_t k = j->gpus / FG_WHOLE_NODE_GPUS;
        return k <= p->nwhole && end <= p->whole_end[k - 1];
    }
    return !(fail_known(fail_memo(s, (size_t)(j->type + 1)), j, end) ||
             (j->type >= 0 && fail_known(fail_memo(s, 0), j, end)));
}

/* Could try_preempt search for victims for blocked job j? Its first tests, which read
 * neither the plan nor the nodes: no while victims stop for j, yes for a high job, and
 * under wfq, round-robin and las only once j waited preempt_wait_s, and under fair share
 * only when j's account or member would stay within its entitlement. */
static bool preempt_may_search(fg_sched_t *s, const fg__job_t *j, fg_time_t now, ent_calc_t *e)
{
    if (j->claim > 0)
        return false;
    if (j->prio == FG_PRIO_HIGH)
        return true;
    const fg_policy_t p = s->cfg.policy;
    if (p != FG_POLICY_WFQ && p != FG_POLICY_RR && p != FG_POLICY_LAS)
        return false;
    if (j->queued_since + s->cfg.preempt_wait_s > now)
        return false;
    if (p == FG_POLICY_LAS)
        return true;
    entitlements(s, e);
    return (double)s->accounts[j->account].running + j->gpus <= e->ent_a[j->account] + 1e-9 ||
           (double)s->members[j->member].running + j->gpus <= ent_member(s, e, j->member) + 1e-9;
}

/* The walk stops here; walk_tail walks the rest (`left` jobs) when needed. */
static void tail_stop(fg_sched_t *s, fg__order_t *o, int64_t left, fg_time_t now, bool window,
                      fg_job_id_t head)
{
    s->tail_on = true;
    s->tail_window = window;
    s->tail_head = head;
    s->tail_o = o;
    s->tail_left = left;
    s->tail_now = now;
}

/* What the walk leaves on a job fg__order_peek moved past (it cannot start; pending,
 * eligible): as the walk would, with a blocked reason made lazily (lazy_fix). */
static void peeked(fg_sched_t *s, int32_t slot)
{
    fg__job_t *j = &s->jobs[slot];
    reason_clear(s, j);
    if (s->no_reasons) { /* (no estimate either: it lies past the first K) */
        j->reason = FG__REASON_LAZY;
        return;
    }
    if (!reason_account_or_fit(s, j, &s->accounts[j->account])) {
        j->reason = FG__REASON_LAZY;
        s->lazy[s->nlazy++] = slot; /* (room made by the caller) */
    }
}

/* One walk over the pending jobs in plan order (see the banner). Appends starts to
 * *out, records blocked preemption candidates in s->blocked, lowers *wake. */
static void walk(fg_sched_t *s, fg_time_t now, fg_decisions_t *out, fg_time_t *wakep)
{
    const size_t starts_before = out->nstarts;
    s->walk_no++;
    s->ntouched = 0;
    s->touched_free_max = 0;
    s->in_walk = true;
    s->dhead = s->ndeferred = s->ndsnap = s->nlazy = 0;
    s->tail_on = false;
    s->nblocked = 0;
    s->reserved_free = 0;
    s->window_max = 0;
    const fg_config_t *c = &s->cfg;
    const bool no_backfill = c->policy == FG_POLICY_FIFO || !c->backfill;
    const int64_t K = c->estimate_depth;
    fg_time_t wake = *wakep;
    /* (fg__order_next reads the queues, unchanged until the walk ends) */
    fg__order_t *o = &s->it;
    fg__order_prepare(s, o, now);
    int64_t idx = 0, after_block = 0;
    int32_t reserved = 0, nblk = 0;
    fg_job_id_t head_blocked = 0;
    int32_t slot;
    fg_alloc_t al[FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS];
    /* free GPUs change only with the walk's starts; which time limits are pending, not
     * at all during the walk (so the answer changes only with window_max) */
    int32_t free_now = fg_sched_gpus_free(s);
    fg_time_t short_for = -1;
    bool short_any = false;
    /* lazy reasons (lazy_fix): with estimates on demand and backfill */
    const bool can_lazy = s->est_on_demand && !no_backfill;
    const bool can_peek = can_lazy && c->policy == FG_POLICY_WFQ && c->backfill_depth > 0;
    /* past every claim that decisions depend on (the first blocked jobs' reservations and
     * preemption candidates; without backfill, the first blocked job's): past_claims;
     * and with estimates on demand, no start in this walk and no pending job in a
     * backoff: tail_ok (both change only when a job blocks or starts) */
    bool past_claims = false, tail_ok = false;
    int64_t peek_at = can_peek ? K : INT64_MAX; /* the next look ahead: at the K-th job on */
    /* Once the walk started a job, another walk follows (unless this one is the last the
     * pass may make), and the pass shows what that one leaves: what this walk leaves on
     * the jobs that cannot start (reasons, estimates) is moot. Only its starts and the
     * reservations they respect count. */
    bool moot = false;
    ent_calc_t e = {0}; /* (the preemption candidates' entitlements, made once) */
    int defer = 0;      /* the reservations left may be deferred: 1, not: -1, unknown: 0 */

    for (;;) {
        /* With estimates on demand, no GPU free, no start and no pending job in a backoff
         * (so nothing can start, and no job can move next_wake), once the preemption
         * candidates are known (and their claims made) and none of them can search for
         * victims (the only reader of the other reservations), the reservations still to
         * be made decide nothing. With no GPU free a reservation holds no free GPU, so it
         * changes no other job's reason, placement or estimate: such a job gets what
         * walk_tail gives the rest of the first K jobs (reason resources, a queued
         * estimate: the start its reservation would have had). (Only past a blocked job:
         * with none yet, the walk looks past the first K jobs for one; walk_tail does
         * not.) */
        if (can_lazy && !past_claims && head_blocked && free_now == 0 && idx < K &&
            reserved < c->reserve_depth && out->nstarts == starts_before &&
            s->max_eligible <= now && (!c->preemption || nblk >= c->preempt_jobs_per_pass)) {
            if (!defer) {
                defer = 1;
                for (size_t b = 0; b < s->nblocked && defer > 0; b++)
                    if (preempt_may_search(s, &s->jobs[s->blocked[b]], now, &e))
                        defer = -1;
            }
            if (defer > 0) {
                tail_stop(s, o, K - idx, now, false, 0);
                break;
            }
        }
        /* Past every claim that decisions depend on, with estimates on demand: what is
         * left may only need reasons (and queued estimates). When the walk started
         * nothing and no pending job waits out a backoff (tail_ok), it is the last walk
         * unless it preempts, and such a rest is left to walk_tail. */
        if (past_claims && s->est_on_demand) {
            /* With no GPU free (or without backfill, behind the first blocked job) the
             * rest up to the K-th job only gets reasons and queued estimates: left to
             * walk_tail. */
            if (tail_ok && idx < K && (no_backfill || free_now == 0)) {
                tail_stop(s, o, K - idx, now, false, no_backfill ? head_blocked : 0);
                break;
            }
            /* The same past the first K jobs with GPUs free, under wfq, when none of the
             * rest of the backfill window can start (fg__order_peek). Else (or in a walk
             * that started a job: another walk follows) the order moves past the jobs
             * that cannot start, up to the first that might or to the window's end, which
             * get their reasons lazily, and it looks again past the one that might. (Not
             * when the walk stops at its next job anyway: every free GPU reserved and no
             * pending job short enough.) */
            if (idx >= peek_at && free_now > 0 && after_block < c->backfill_depth) {
                bool stops = false;
                if (free_now <= s->reserved_free) { /* (reserved >= reserve_depth) */
                    if (short_for != s->window_max) {
                        short_for = s->window_max;
                        short_any = fg__pending_limit_at_most(s, short_for);
                    }
                    stops = !short_any;
                }
                const int64_t wleft = c->backfill_depth - after_block;
                int64_t r = -1;
                if (!stops) { /* (moot: the jobs it moves past need nothing, see below) */
                    /* (not zeroed: peek_fill sets every field that is read) */
                    peek_ctx_t pc;
                    pc.now = now;
                    peek_fill(s, &pc);
                    /* No pending job at all can fit in the plan (its size's fit_end):
                     * none of the window either, without looking at it. */
                    if (tail_ok &&
                        fg__pending_none_fits(s, pc.fit_end,
                                              !pc.whole_exact ? pc.fit_end[FG_WHOLE_NODE_GPUS]
                                              : pc.nwhole     ? pc.whole_end[0]
                                                              : INT64_MIN,
                                              now)) {
                        tail_stop(s, o, wleft, now, true, 0);
                        break;
                    }
                    if ((size_t)wleft > s->peek_cap)
                        s->peek_buf =
                            fg__grow(s->peek_buf, &s->peek_cap, (size_t)wleft, sizeof *s->peek_buf);
                    r = fg__order_peek(s, o, wleft, pc.fit_end, pc.whole_end,
                                       pc.whole_exact ? pc.nwhole : -1, now, could_start, &pc,
                                       s->peek_buf, !tail_ok && !moot);
                }
                if (r == wleft && (tail_ok || moot)) {
                    if (tail_ok)
                        tail_stop(s, o, wleft, now, true, 0);
                    break; /* (moot: the rest of the window can only get reasons) */
                }
                /* the order moved past the r jobs that cannot start: what the walk leaves
                 * on them (as below, their reasons lazily) */
                if (r > 0 && s->nlazy + (size_t)r > s->lazy_cap)
                    s->lazy =
                        fg__grow(s->lazy, &s->lazy_cap, s->nlazy + (size_t)r, sizeof *s->lazy);
                for (int64_t k = 0; k < r && !moot; k++)
                    peeked(s, s->peek_buf[k]);
                idx += r > 0 ? r : 0;
                after_block += r > 0 ? r : 0;
                out->scanned += r > 0 ? r : 0;
                peek_at = r >= 0 ? idx + 1 : INT64_MAX; /* again past the one that may */
            }
        }
        if ((slot = fg__order_next(s, o)) < 0)
            break;
        idx++;
        if (head_blocked) {
            after_block++;
            bool cands_done = !c->preemption || nblk >= c->preempt_jobs_per_pass;
            if (idx > K && cands_done) {
                if (no_backfill || free_now == 0 ||
                    (c->backfill_depth > 0 && after_block > c->backfill_depth))
                    break;
                /* Every free GPU is reserved and no pending job is short enough to
                 * end before the reservations: nothing more can start. */
                if (reserved >= c->reserve_depth && free_now <= s->reserved_free) {
                    if (short_for != s->window_max) {
                        short_for = s->window_max;
                        short_any = fg__pending_limit_at_most(s, short_for);
                    }
                    if (!short_any)
                        break;
                }
            }
        } else if (idx > K && free_now == 0 && c->backfill_depth > 0 &&
                   idx > K + c->backfill_depth) {
            break; /* keep looking for the first blocked job: it gets the reservation */
        }
        fg__job_t *j = &s->jobs[slot];
        if (j->state != FG_JOB_PENDING) { /* started earlier in this pass */
            idx--;
            continue;
        }
        fg__account_t *a = &s->accounts[j->account];
        fg_reason_t why;
        /* Past every claim that decisions depend on (the first blocked jobs' reservations
         * and preemption candidates), a job that cannot fit gets only its reason (and,
         * among the first K, a queued estimate): with no free GPU the reason is known
         * (blocked_reason: resources, none free); else it is made when asked for. */
        if (can_lazy && past_claims && j->eligible_time <= now && !a->budget_exhausted &&
            (a->quota < 0 || a->running + j->gpus <= a->quota) && feasible(s, j, &why)) {
            bool lazy = false;
            if (free_now > 0) {
                const fg_time_t end = now + j->time_limit;
                lazy = fail_known(fail_memo(s, (size_t)(j->type + 1)), j, end) ||
                       (j->type >= 0 && fail_known(fail_memo(s, 0), j, end));
            }
            if (free_now == 0 || lazy) {
                out->scanned++;
                j->reason_walk = s->walk_no;
                j->est = FG_TIME_NEVER;
                j->r_job = 0;
                j->r_a = j->r_b = 0;
                if (lazy) {
                    j->reason = FG__REASON_LAZY;
                    if (!s->no_reasons) {
                        if (s->nlazy == s->lazy_cap)
                            s->lazy =
                                fg__grow(s->lazy, &s->lazy_cap, s->nlazy + 1, sizeof *s->lazy);
                        s->lazy[s->nlazy++] = slot;
                    }
                } else {
                    j->reason = FG_REASON_RESOURCES;
                }
                if (idx <= K && !moot)
                    estimate(s, j, now);
                continue;
            }
        }
        out->scanned++;
        reason_clear(s, j);

        if (j->eligible_time > now) {
            j->reason = FG_REASON_RETRY_BACKOFF;
            j->est = j->eligible_time;
            if (j->eligible_time < wake)
                wake = j->eligible_time;
            continue;
        }
        if (reason_account_or_fit(s, j, a))
            continue;
        if (no_backfill && head_blocked) {
            j->reason = FG_REASON_PRIORITY;
            j->r_job = head_blocked;
            if (idx <= K)
                j->est = estimate(s, j, now);
            continue;
        }
        bool placed = place_now(s, j, now, al);
        if (placed) {
            int32_t n = j->gpus <= FG_WHOLE_NODE_GPUS ? 1 : j->gpus / FG_WHOLE_NODE_GPUS;
            for (int32_t k = 0; k < n; k++) { /* backfilled onto reserved GPUs? */
                const fg__node_t *nd = &s->nodes[al[k].node];
                if (!is_touched(s, al[k].node))
                    continue;
                for (int i = 0; i < nd->gpus; i++)
                    if (al[k].gpu_mask >> i & 1 && nd->res_from[i] != FG__INF)
                        s->reserved_free--;
            }
            if (!moot && !s->walk_last) { /* what the walk left so far is moot too */
                moot = true;
                s->nlazy = 0;
                s->dhead = s->ndeferred = s->ndsnap = 0;
            }
            if (!moot) {
                lazy_flush(s); /* their reasons, on the plan before this start */
                /* queued estimates see the plan before this start: deferred_replay */
                if (s->dhead < s->ndeferred)
                    defer_start(s, slot, al, n);
            }
            s->in_walk = false; /* (not a preemption: fg__node_changed) */
            fg__job_start(s, slot, al, n, now);
            s->in_walk = true;
            push_start(out, j, al, n);
            free_now = fg_sched_gpus_free(s);
            tail_ok = false;
            /* With no GPU free nothing else in this walk can start (a placement takes free
             * GPUs, and only a walk that started nothing preempts), and the rest of a
             * walk that another follows is moot: it ends here. */
            if (moot && free_now == 0 && !s->plain) {
                s->walks_cut++;
                break;
            }
            continue;
        }
        bool protect = reserved < c->reserve_depth;
        /* Preemption serves the first preempt_jobs_per_pass blocked jobs in plan order;
         * they always get an estimate, so what is preempted never depends on
         * estimate_depth. */
        bool candidate = c->preemption && nblk++ < c->preempt_jobs_per_pass;
        /* (a candidate's reason decides whether it may preempt: always made) */
        j->reason =
            (s->no_reasons || moot) && !candidate ? FG__REASON_LAZY : blocked_reason_memo(s, j);
        fg_job_id_t keep_job = j->r_job;
        int64_t keep_from = j->r_a;
        if (!head_blocked)
            head_blocked = j->id;
        if (protect || candidate || (idx <= K && !moot)) {
            j->est = protect || candidate ? plan_claim(s, j, now, protect) : estimate(s, j, now);
            reserved += protect;
        }
        if (j->reason == FG_REASON_RESERVATION) {
            j->r_job = keep_job;
            j->r_b = keep_from;
        }
        if (candidate && j->reason != FG_REASON_RESERVATION && j->est != FG_TIME_NEVER &&
            j->est > now) {
            s->blocked = fg__grow(s->blocked, &s->blocked_cap, s->nblocked + 1, sizeof *s->blocked);
            s->blocked[s->nblocked++] = slot;
        }
        past_claims = (no_backfill || reserved >= c->reserve_depth) &&
                      (!c->preemption || nblk >= c->preempt_jobs_per_pass);
        tail_ok = s->est_on_demand && past_claims && out->nstarts == starts_before &&
                  s->max_eligible <= now;
    }

    /* Preemption, in the walk that started nothing (the last one), while its
     * reservations are still in view: GPUs held for a job ahead are not room. */
    if (out->nstarts == starts_before && c->preemption && s->nblocked) {
        int32_t served = 0;
        for (size_t b = 0; b < s->nblocked && served < c->preempt_jobs_per_pass; b++) {
            fg__job_t *bj = &s->jobs[s->blocked[b]];
            size_t before = out->npreempts;
            try_preempt(s, bj, now, &e, out, &wake);
            served += out->npreempts > before;
        }
    }

    s->in_walk = false;
    *wakep = wake;
    if (s->dhead < s->ndeferred || s->nlazy || s->tail_on) {
        s->plan_alive = true; /* kept for fg__plan_ask (or dropped by plan_next_walk) */
        return;
    }
    plan_restore(s);
}

/* Before another walk of the same pass. A pass shows what its last walk leaves (a job's
 * reason and estimate count only when that walk wrote them: reason_walk), and the next
 * walk looks at its jobs anew, so whatever this walk left to be made when asked for (its
 * tail, queued estimates, lazy reasons) is moot: dropped, and the plan restored. */
static void plan_next_walk(fg_sched_t *s)
{
    fg__plan_close(s);
}

/* Takes the jobs started by out->starts[from..] out of their pending queues. */
static void leave_queues(fg_sched_t *s, const fg_decisions_t *out, size_t from)
{
    for (size_t k = from; k < out->nstarts; k++)
        fg__pending_del(s, (int32_t)(fg__job_by_id(s, out->starts[k].job) - s->jobs));
}

int fg_sched_pass(fg_sched_t *s, fg_time_t now, fg_decisions_t *out)
{
    if (!s || !out)
        return FG_EINVAL;
    fg__plan_close(s);
    if (now < s->last_now)
        now = s->last_now; /* time never runs backwards inside the core */
    s->last_now = now;
    out->nstarts = out->nallocs = out->npreempts = 0;
    out->scanned = 0;
    s->wout = out;
    out->next_wake = FG_TIME_NEVER;
    s->pass_no++;
    out->pass_no = s->pass_no;
    for (size_t t = 0; t < s->ntypes; t++)
        if (s->types[t].dirty)
            fg__type_rebuild(s, (int32_t)t);
    fg_time_t wake = FG_TIME_NEVER;

    serve_claims(s, now, out);
    /* Jobs the claims started leave their queues before the first walk: in the plan
     * they would still take their member's turn or count twice in its key. */
    leave_queues(s, out, 0);
    /* Walk again while a walk started or preempted something: starts change the keys,
     * the free GPUs and the blocked jobs the plan saw, and a preemption makes the
     * victims' GPUs free for their job, so GPUs it held may go to others. So a second
     * pass at the same time, with no event in between, decides nothing new. At most
     * FG__MAX_WALKS walks; if the last one still decided something, next_wake = now asks
     * the caller to pass again. (A full cluster makes the next walk short.) */
    bool settled = false;
    const int max_walks = s->max_walks ? s->max_walks : FG__MAX_WALKS;
    for (int w = 0; w < max_walks && !settled; w++) {
        size_t before = out->nstarts, pbefore = out->npreempts;
        wake = FG_TIME_NEVER;
        s->walk_last = w + 1 == max_walks;
        walk(s, now, out, &wake);
        leave_queues(s, out, before); /* now that the walk over them is over */
        settled = out->nstarts == before && out->npreempts == pbefore;
        if (!settled) {
            if (w + 1 < max_walks)
                plan_next_walk(s);
            else
                fg__plan_settle(s); /* no walk follows: these estimates stay */
        }
    }
    if (!settled)
        wake = now;
    s->wout = NULL;

    out->next_wake = wake;
    return FG_OK;
}

/* ------------------------------------------------------------------ explain */

static int fmt(char *buf, size_t n, const char *f, ...) __attribute__((format(printf, 3, 4)));
static int fmt(char *buf, size_t n, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int r = vsnprintf(buf, n, f, ap);
    va_end(ap);
    return r;
}

static void when(char *b, size_t n, fg_time_t t, fg_time_t now)
{
    if (t == FG_TIME_NEVER)
        fmt(b, n, "no estimate yet");
    else if (t <= now)
        fmt(b, n, "expected now");
    else
        fmt(b, n, "expected at t=%" PRId64 " (in %" PRId64 " s)", t, t - now);
}

int fg_sched_explain(fg_sched_t *s, fg_job_id_t id, fg_time_t now, char *buf, size_t n)
{
    fg__job_t *j = fg__job_by_id(s, id);
    if (!j)
        return FG_ENOENT;
    if (!buf || !n)
        return FG_EINVAL;
    fg__plan_ask(s, (int32_t)(j - s->jobs));
    if (j->state == FG_JOB_RUNNING) {
        fmt(buf, n, "running%s", j->preempting ? "; being preempted" : "");
        return FG_REASON_NONE;
    }
    const fg__account_t *a = &s->accounts[j->account];
    char w[96];
    when(w, sizeof w, j->est, now);
    if (j->reason_walk != s->walk_no || j->reason == FG__REASON_LAZY) {
        /* not reached by the last pass (or its reason was left to be made when asked
         * for, and nobody asked before the next event): count the jobs before it in plan order */
        fg__order_t tmp = {0};
        fg__order_prepare(s, &tmp, now);
        int64_t ahead = 0;
        int32_t slot;
        while ((slot = fg__order_next(s, &tmp)) >= 0 && &s->jobs[slot] != j)
            ahead++;
        fg__order_free(&tmp);
        fmt(buf, n, "behind %" PRId64 " jobs ahead of it in %s order; not reached by the last pass",
            ahead, fg_policy_name(s->cfg.policy));
        return FG_REASON_PRIORITY;
    }
    switch (j->reason) {
    case FG_REASON_PRIORITY:
        fmt(buf, n, "behind job %" PRIu64 " at the head of the %s queue; %s", j->r_job,
            fg_policy_name(s->cfg.policy), w);
        break;
    case FG_REASON_RESOURCES:
        if (j->r_job)
            fmt(buf, n,
                "waiting for %d GPUs (%" PRId64 " free); preempting job %" PRIu64 " to make room",
                j->gpus, j->r_b, j->r_job);
        else
            fmt(buf, n, "waiting for %d free GPUs%s (%" PRId64 " free now); node %s; %s", j->gpus,
                j->gpus > FG_WHOLE_NODE_GPUS ? " on whole nodes" : " on one node", j->r_b,
                j->est != FG_TIME_NEVER ? s->nodes[j->r_a].name : "?", w);
        break;
    case FG_REASON_FRAGMENTATION:
        fmt(buf, n, "%" PRId64 " GPUs free but not %d %s; %s", j->r_b, j->gpus,
            j->gpus > FG_WHOLE_NODE_GPUS ? "on whole nodes" : "on one node", w);
        break;
    case FG_REASON_RESERVATION:
        fmt(buf, n, "the free GPUs it fits are reserved for job %" PRIu64 " from t=%" PRId64 "; %s",
            j->r_job, j->r_b, w);
        break;
    case FG_REASON_QUOTA:
        fmt(buf, n, "account %s at its quota: %" PRId64 "/%" PRId64 " GPUs in use, needs %d",
            a->name, j->r_a, j->r_b, j->gpus);
        break;
    case FG_REASON_BUDGET:
        fmt(buf, n, "account %s has exhausted its budget", a->name);
        break;
    case FG_REASON_RETRY_BACKOFF:
        fmt(buf, n, "retry %d of %d after a failure; eligible at t=%" PRId64 " (in %" PRId64 " s)",
            j->retries_used, j->max_retries, j->eligible_time, j->eligible_time - now);
        break;
    case FG_REASON_GPU_TYPE:
        fmt(buf, n, "no node has %d GPUs of type %s", j->gpus,
            j->type >= 0 ? s->types[j->type].name : "any");
        break;
    case FG_REASON_NODES_DOWN:
        fmt(buf, n, "every node that can hold its %d GPUs is down or draining", j->gpus);
        break;
    default:
        fmt(buf, n, "waiting for the next scheduling pass");
        break;
    }
    return (int)j->reason;
}
