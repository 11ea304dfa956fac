/*
 * index.c - the per-GPU-type indexes that make a pass cost what it scans.
 *
 * Free-count bitmaps. For each GPU type, bucket f is a bitmap over the type's nodes
 * that are up and have exactly f free GPUs. Best fit for a job of g GPUs is then the
 * first set bit of bucket g, g+1, ... : the node with the fewest free GPUs that still
 * fits, ties to the lowest node index. A mask of the buckets that are not empty (bfull)
 * skips the others.
 *
 * Availability trees. For each GPU type, a min tree over its nodes whose leaves
 * hold, for g = 1..8, the time at which g GPUs of the node are available (the g-th
 * smallest per-GPU availability: free = long ago, busy = its job's start + time limit),
 * and as a ninth key the time the whole node is. Inner nodes hold the minimum of their
 * children, so "the earliest time any node has g GPUs" is the root and its node is one
 * descent away. Reservations made during a pass change the leaves of the nodes they
 * touch (node->avail); the pass restores those leaves when it ends. The trees are
 * key-major (one 8-ary min tree per key) and lazy: a leaf change marks its ancestors
 * dirty for the keys that changed, and a key's minima are recomputed when that key is
 * read (fg__tree_min, fg__tree_argmin), so a key that no claim reads between two
 * changes costs nothing.
 *
 * Example: node n0 runs a 4-GPU job until t=100 and has 4 GPUs free; n1 runs an 8-GPU
 * job until t=50. Leaf n0: g=1..4 -> past, g=5..8 -> 100, whole -> 100. Leaf n1: all 50.
 * A blocked 8-GPU job reads the root's whole key: 50, at n1.
 *
 * This is the lowest layer of the plan: it reads nodes and their jobs and calls
 * nothing above it. A caller that changes a node during a walk (a preemption) first
 * settles what the planner queued (preempt.c), then calls fg__node_changed.
 */
#include "internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int32_t fg__type_find(const fg_sched_t *s, const char *name)
{
    for (size_t i = 0; i < s->ntypes; i++)
        if (!strcmp(s->types[i].name, name))
            return (int32_t)i;
    return -1;
}

/* Returns the index of GPU type `name`, creating it (with no nodes) if new. */
int32_t fg__type_get(fg_sched_t *s, const char *name)
{
    int32_t t = fg__type_find(s, name);
    if (t >= 0)
        return t;
    s->types = fg__grow(s->types, &s->types_cap, s->ntypes + 1, sizeof *s->types);
    fg__type_t *ty = &s->types[s->ntypes];
    memset(ty, 0, sizeof *ty);
    snprintf(ty->name, sizeof ty->name, "%s", name);
    return (int32_t)s->ntypes++;
}

fg_time_t fg__gpu_real_avail(const fg_sched_t *s, const fg__node_t *nd, int i)
{
    int32_t slot = nd->gpu_job[i];
    if (slot < 0)
        return FG__PAST;
    const fg__job_t *j = &s->jobs[slot];
    if (j->preempting)
        return FG__PAST; /* stops any moment */
    return j->start_time + j->time_limit;
}

/* The tree keys of a node of n GPUs whose GPUs are available at v[0..n): key g - 1
 * (g = 1..8) is when g of them are, the g-th smallest of v (FG__INF beyond n), and the
 * last key when all n are (FG__INF for a node smaller than a whole one). */
static void keys_of(const fg_time_t *v, int n, int64_t *key)
{
    fg_time_t a[FG_MAX_NODE_GPUS];
    for (int i = 0; i < n; i++) { /* insertion sort: n is small */
        fg_time_t x = v[i];
        int p = i;
        while (p > 0 && a[p - 1] > x) {
            a[p] = a[p - 1];
            p--;
        }
        a[p] = x;
    }
    for (int k = 0; k < FG__TREE_KEYS; k++)
        key[k] = FG__INF;
    for (int g = 1; g <= FG_WHOLE_NODE_GPUS && g <= n; g++)
        key[g - 1] = a[g - 1];
    if (n >= FG_WHOLE_NODE_GPUS)
        key[FG__TREE_KEYS - 1] = a[n - 1];
}

/* Fills the node's cache of real availability (ravail, rkey) if it is stale. */
static void real_fill(const fg_sched_t *s, fg__node_t *nd)
{
    if (nd->rvalid)
        return;
    for (int i = 0; i < nd->gpus; i++)
        nd->ravail[i] = fg__gpu_real_avail(s, nd, i);
    keys_of(nd->ravail, nd->gpus, nd->rkey);
    nd->rvalid = true;
}

/* The real availability of every GPU of nd (cached until fg__node_changed). */
const fg_time_t *fg__node_real_avail(const fg_sched_t *s, fg__node_t *nd)
{
    real_fill(s, nd);
    return nd->ravail;
}

/* The node's tree keys: from the pass's plan (avail) while touched, else real. */
static void leaf_keys(const fg_sched_t *s, fg__node_t *nd, int64_t *key)
{
    if (nd->state != FG_NODE_UP || nd->excluded) {
        for (int k = 0; k < FG__TREE_KEYS; k++)
            key[k] = FG__INF;
    } else if (nd->touched == s->walk_no) {
        keys_of(nd->avail, nd->gpus, key);
    } else {
        real_fill(s, nd);
        memcpy(key, nd->rkey, sizeof nd->rkey);
    }
}

/* The trees are 8-ary (FG__TREE_FAN children per inner node): node i has children
 * 8i+1..8i+8 and parent (i-1)/8; the root is 0 and the leaves are tinner..tinner+tsize,
 * so a cluster of up to 64 nodes is two levels deep. */
#define FG__TREE_FAN 8

/* Sets leaf `pos` of t's tree to `key`. The minima above it are recomputed lazily, key
 * by key, when that key is next read (tree_fix): a changed key marks the leaf's
 * ancestors dirty for it, stopping at the first ancestor already dirty for every
 * changed key (its own ancestors are then dirty too: a node dirty for a key always has
 * dirty ancestors for it). A pass claims and restores many leaves between two reads of
 * one key, and most keys of a claimed leaf are not read before it changes again. */
static void tree_mark(fg__type_t *t, size_t i, unsigned changed)
{
    while (changed && i > 0) {
        i = (i - 1) / FG__TREE_FAN;
        unsigned d = t->tdirty[i];
        if ((d & changed) == changed)
            break;
        t->tdirty[i] = (uint16_t)(d | changed);
    }
}

static void tree_set(fg__type_t *t, int32_t pos, const int64_t *key)
{
    const size_t span = t->tspan;
    const size_t i = (size_t)t->tinner + (size_t)pos;
    unsigned changed = 0;
    int64_t *leaf = &t->tree[i];
    for (int k = 0; k < FG__TREE_KEYS; k++, leaf += span) {
        changed |= (unsigned)(*leaf != key[k]) << k;
        *leaf = key[k];
    }
    tree_mark(t, i, changed);
}

/* The least of the FG__TREE_FAN values at v (the children of one tree node). */
static int64_t min_of_children(const int64_t *v)
{
    int64_t m = v[0];
    for (int c = 1; c < FG__TREE_FAN; c++)
        if (v[c] < m)
            m = v[c];
    return m;
}

/* Recomputes the minima of key k's tree at inner node i, which is dirty for it, and
 * below; returns node i's. Only dirty nodes are visited (leaves are never dirty). */
static int64_t tree_fix_at(fg__type_t *t, int64_t *tk, unsigned bit, size_t i)
{
    const size_t c0 = FG__TREE_FAN * i + 1;
    if (c0 < (size_t)t->tinner) /* its children are inner nodes */
        for (size_t c = c0; c < c0 + FG__TREE_FAN; c++)
            if (t->tdirty[c] & bit)
                tree_fix_at(t, tk, bit, c);
    t->tdirty[i] &= (uint16_t)~bit;
    return tk[i] = min_of_children(&tk[c0]);
}

/* Key k's tree, every minimum up to date. */
static const int64_t *tree_fix(fg__type_t *t, int key)
{
    int64_t *tk = &t->tree[(size_t)key * t->tspan];
    if (t->tdirty[0] & (1u << key))
        tree_fix_at(t, tk, 1u << key, 0);
    return tk;
}

/* A node's ldiff when its leaf is not known to be its rkey changed by claims only: set
 * by any leaf write that is not rkey or a claim, and when rkey itself goes stale. */
#define FG__LEAF_OTHER 0xffffu

void fg__node_leaf_update(fg_sched_t *s, int32_t n)
{
    fg__node_t *nd = &s->nodes[n];
    fg__type_t *t = &s->types[nd->type];
    if (t->dirty) {
        nd->ldiff = FG__LEAF_OTHER; /* (the rebuild sets the leaf) */
        return;
    }
    int64_t key[FG__TREE_KEYS];
    leaf_keys(s, nd, key);
    tree_set(t, nd->type_pos, key);
    /* the leaf holds rkey exactly when leaf_keys copied it */
    const bool real = nd->state == FG_NODE_UP && !nd->excluded && nd->touched != s->walk_no;
    nd->ldiff = real ? 0 : FG__LEAF_OTHER;
}

/* fg__node_leaf_update for a node the pass no longer touches. When its leaf went from
 * rkey to the pass's keys by claims only (fg__node_leaf_claim), those changed just the
 * keys in ldiff: writing rkey back over the leaf changes at most those, so marking them
 * stale is enough, without sorting or comparing (a key that a later claim set back to
 * its real value is marked for nothing: its minimum is recomputed, the same). */
void fg__node_leaf_restore(fg_sched_t *s, int32_t n)
{
    fg__node_t *nd = &s->nodes[n];
    fg__type_t *t = &s->types[nd->type];
    if (nd->ldiff == FG__LEAF_OTHER || !nd->rvalid || nd->state != FG_NODE_UP || nd->excluded ||
        t->dirty) {
        fg__node_leaf_update(s, n);
        return;
    }
    if (nd->ldiff == 0) /* touched but never claimed: the leaf holds rkey already */
        return;
    const size_t span = t->tspan;
    const size_t i = (size_t)t->tinner + (size_t)nd->type_pos;
    int64_t *leaf = &t->tree[i];
    for (int k = 0; k < FG__TREE_KEYS; k++, leaf += span)
        *leaf = nd->rkey[k];
    tree_mark(t, i, nd->ldiff);
    nd->ldiff = 0;
}

/* fg__node_leaf_update after a claim of node n's g GPUs with the smallest avail (each
 * now ending at x), n touched: a leaf always holds its node's keys, and for a node of
 * FG_WHOLE_NODE_GPUS GPUs those are its avail sorted (the last one twice), so the new
 * keys are the old ones past the first g merged with g times x: the same keys as
 * sorting the new avail, without sorting. */
void fg__node_leaf_claim(fg_sched_t *s, int32_t n, int g, fg_time_t x)
{
    fg__node_t *nd = &s->nodes[n];
    fg__type_t *t = &s->types[nd->type];
    if (nd->gpus != FG_WHOLE_NODE_GPUS || nd->state != FG_NODE_UP || nd->excluded ||
        nd->touched != s->walk_no || t->dirty) {
        fg__node_leaf_update(s, n);
        return;
    }
    const size_t span = t->tspan;
    const size_t i = (size_t)t->tinner + (size_t)nd->type_pos;
    int64_t *const leaf = &t->tree[i]; /* key k at leaf[k * span] */
    /* The old keys are sorted, so those past the first g below x are a run from key g:
     * c of them. The new keys are old[g .. g + c - 1], then g times x, then keys
     * c + g .. 7 as they were; the whole-node key (key 7 again) changes only when key 7
     * does, when c + g = 8 and key 7 is x. Only keys 0 .. c + g - 1 and then the whole
     * key are set. Key k < c changes when old[k + g] differs from old[k]; keys
     * c .. c + g - 1, and the whole-node key with them, are marked changed without
     * comparing: each was at most the g-th smallest avail or below x, and x is a claim's
     * end, later than its start (were one equal, a minimum would be recomputed for
     * nothing, the same). */
    int c = 0;
    for (const int64_t *lp = &leaf[(size_t)g * span]; g + c < FG_WHOLE_NODE_GPUS && *lp < x;
         lp += span)
        c++;
    const int kn = c + g;
    unsigned changed = ((1u << kn) - 1) & ~((1u << c) - 1);
    int64_t *lp = leaf;
    for (int k = 0; k < c; k++, lp += span) {
        const int64_t v = lp[(size_t)g * span];
        changed |= (unsigned)(*lp != v) << k;
        *lp = v;
    }
    for (int k = c; k < kn; k++, lp += span) /* keys c .. kn - 1: g of them */
        *lp = x;
    if (kn >= FG_WHOLE_NODE_GPUS) {
        leaf[(size_t)(FG__TREE_KEYS - 1) * span] = x;
        changed |= 1u << (FG__TREE_KEYS - 1);
    }
    tree_mark(t, i, changed);
    nd->ldiff |= (uint16_t)changed;
}

int64_t fg__tree_min(fg__type_t *t, int key)
{
    if (t->n == 0)
        return FG__INF;
    return tree_fix(t, key)[0];
}

/* The argmin of key k's tree (tk), every minimum up to date. */
static int32_t tree_descend(const fg__type_t *t, const int64_t *tk)
{
    if (tk[0] == FG__INF)
        return -1;
    /* Every minimum is up to date, so each node on the way down holds the root's value:
     * go to the first child that holds it (the lowest index). */
    const int64_t v = tk[0];
    size_t i = 0;
    while (i < (size_t)t->tinner) {
        i = FG__TREE_FAN * i + 1;
        while (tk[i] != v)
            i++;
    }
    return t->nodes[i - (size_t)t->tinner];
}

int32_t fg__tree_argmin(fg__type_t *t, int key)
{
    if (t->n == 0)
        return -1;
    return tree_descend(t, tree_fix(t, key));
}

/* Puts value x of position p into the sorted v[0..q] (and nodes[] alike), over slot q:
 * an insertion step, larger values move up by one. */
static inline void kept_insert(int64_t *v, int32_t *nodes, int32_t q, int64_t x, int32_t p)
{
    while (q > 0 && v[q - 1] > x) {
        v[q] = v[q - 1];
        nodes[q] = nodes[q - 1];
        q--;
    }
    v[q] = x;
    nodes[q] = p;
}

int32_t fg__tree_smallest(const fg__type_t *t, int key, int32_t k, int32_t *nodes, int64_t *kth)
{
    const int64_t *leaf = &t->tree[(size_t)key * t->tspan + (size_t)t->tinner];
    int64_t v[FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS];
    int32_t got = 0;
    if (k > FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS)
        k = FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS;
    int32_t p = 0;
    for (; p < t->n && got < k; p++) { /* the first k finite values, sorted */
        const int64_t x = leaf[p];
        if (x == FG__INF)
            continue;
        kept_insert(v, nodes, got++, x, p);
    }
    for (; p < t->n && got == k && k > 0; p++) { /* then those below the k-th (not FG__INF) */
        const int64_t x = leaf[p];
        /* (positions come in order: an equal value already kept is before this one) */
        if (x >= v[k - 1])
            continue;
        kept_insert(v, nodes, k - 1, x, p);
    }
    for (int32_t c = 0; c < got; c++)
        nodes[c] = t->nodes[nodes[c]];
    *kth = got ? v[got - 1] : FG__INF;
    return got;
}

static void bucket_set(fg__type_t *t, int32_t f, int32_t pos, bool on)
{
    const uint64_t *b = &t->bm[(size_t)f * (size_t)t->words];
    uint64_t *w = &t->bm[(size_t)f * (size_t)t->words + (size_t)(pos / 64)];
    uint64_t bit = (uint64_t)1 << (pos % 64);
    if (on)
        *w |= bit;
    else
        *w &= ~bit;
    if (f < 1)
        return;
    bool full = false;
    for (int32_t k = 0; k < t->words && !full; k++)
        full = b[k] != 0;
    if (full)
        t->bfull |= (uint64_t)1 << (f - 1);
    else
        t->bfull &= ~((uint64_t)1 << (f - 1));
}

/* Recomputes the node's bucket, the type's counters and its tree leaf after its real
 * state (free mask, node state, jobs) changed. */
void fg__node_changed(fg_sched_t *s, int32_t n)
{
    fg__node_t *nd = &s->nodes[n];
    fg__type_t *t = &s->types[nd->type];
    assert(nd->nfree == __builtin_popcountll(nd->free_mask));
    s->plan_ver++;
    nd->rvalid = false;
    nd->ldiff = FG__LEAF_OTHER;
    if (t->dirty)
        return;
    if (nd->bucket >= 0) {
        bucket_set(t, nd->bucket, nd->type_pos, false);
        t->up_gpus -= nd->gpus;
        t->free_gpus -= nd->bucket;
    }
    nd->bucket = -1;
    if (nd->state == FG_NODE_UP) {
        nd->bucket = nd->nfree;
        bucket_set(t, nd->nfree, nd->type_pos, true);
        t->up_gpus += nd->gpus;
        t->free_gpus += nd->nfree;
    }
    fg__node_leaf_update(s, n);
}

/* Rebuilds type t's bitmaps, tree and counters from its nodes' real state. */
void fg__type_rebuild(fg_sched_t *s, int32_t ti)
{
    fg__type_t *t = &s->types[ti];
    t->maxgpus = 0;
    for (int32_t p = 0; p < t->n; p++)
        if (s->nodes[t->nodes[p]].gpus > t->maxgpus)
            t->maxgpus = s->nodes[t->nodes[p]].gpus;
    int32_t cap = t->cap > t->n ? t->cap : t->n;
    t->words = (cap + 63) / 64;
    if (t->words < 1)
        t->words = 1;
    free(t->bm);
    t->bm = fg__alloc(sizeof(uint64_t) * (size_t)(t->maxgpus + 1) * (size_t)t->words);
    memset(t->bm, 0, sizeof(uint64_t) * (size_t)(t->maxgpus + 1) * (size_t)t->words);
    t->bfull = 0;
    t->tsize = 1;
    t->tinner = 0;
    while (t->tsize < cap) {
        t->tinner += t->tsize;
        t->tsize *= FG__TREE_FAN;
    }
    free(t->tree);
    free(t->tdirty);
    const size_t span = (size_t)t->tinner + (size_t)t->tsize;
    t->tspan = span;
    size_t tn = span * FG__TREE_KEYS;
    t->tree = fg__alloc(sizeof(int64_t) * tn);
    for (size_t i = 0; i < tn; i++)
        t->tree[i] = FG__INF;
    t->tdirty = fg__alloc(sizeof(uint16_t) * span);
    memset(t->tdirty, 0, sizeof(uint16_t) * span);
    t->up_gpus = t->free_gpus = 0;
    t->dirty = false;
    for (int32_t p = 0; p < t->n; p++) {
        fg__node_t *nd = &s->nodes[t->nodes[p]];
        nd->type_pos = p;
        nd->bucket = -1;
        fg__node_changed(s, t->nodes[p]);
    }
}
