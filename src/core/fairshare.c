/*
 * fairshare.c - entitlements: the weighted max-min split of the GPUs (the water fill),
 * one for the whole tree. The core splits the cluster among accounts, and an account's
 * part among its members, to decide who may preempt and who may lose GPUs (preempt.c);
 * the simulator splits the cluster among tenants to measure the fair share received
 * (src/sim/fair.c). Both read it here, so both read the same bits.
 *
 * The split: the entities with demand, in order of demand over weight (d/w, ties by
 * index), each take their demand while it fits in their weight's part of what is left;
 * from the first one it does not fit, the rest split what is left by weight (they all
 * want more: their d/w is larger still).
 *
 * Worked example: C = 10 GPUs, A, B, C with weight 1 each and demands 2, 5, 20. In
 * order of d/w: A (2), B (5), C (20). A's part is 10 * 1/3 = 3.33 >= 2: A gets 2; 8 are
 * left for B and C, 4 each; B asks 5 > 4, so B and C get 4 each: E = (2, 4, 4). With
 * weights 3 and 1 on 8 GPUs, both wanting 100: 6 and 2.
 *
 * The operations, in this order, are the bits that the decisions and the simulator's
 * figures read: the weights of those with demand summed by index, each part as
 * left * w / wsum, left and wsum lowered by each demand that fits.
 */
#include "internal.h" /* (fg__alloc) */

#include <assert.h>
#include <stdbool.h>
#include <stdlib.h>

/* Does entity a come before b in the order by (key, index)? A total order: whatever
 * way the entities are sorted, the order is the same. */
static bool before(const double *key, int32_t a, int32_t b)
{
    return key[a] < key[b] || (key[a] == key[b] && a < b);
}

/* Moves the entity at place p of order[0..n) to its place by (key, index), the others
 * being in order: one step of an insertion sort, or one entity whose key changed. pos
 * (when not NULL) keeps each entity's place. */
static void settle(int32_t *order, int32_t *pos, size_t n, const double *key, size_t p)
{
    const int32_t v = order[p];
    for (; p > 0 && before(key, v, order[p - 1]); p--) {
        order[p] = order[p - 1];
        if (pos)
            pos[order[p]] = (int32_t)p;
    }
    for (; p + 1 < n && before(key, order[p + 1], v); p++) {
        order[p] = order[p + 1];
        if (pos)
            pos[order[p]] = (int32_t)p;
    }
    order[p] = v;
    if (pos)
        pos[v] = (int32_t)p;
}

/* The split of cap among the m entities of fill[], in order of (d/w, index), whose
 * weights sum to wsum (summed by index): see the banner. */
static void fill_sorted(const int32_t *fill, size_t m, const double *d, const double *w,
                        double wsum, double cap, double *out)
{
    size_t a = 0;
    for (; a < m; a++) { /* those whose demand fits in their part get it */
        const int32_t i = fill[a];
        if (d[i] > cap * w[i] / wsum)
            break;
        out[i] = d[i];
        cap -= d[i];
        wsum -= w[i];
    }
    for (; a < m; a++) /* the rest want more: they split what is left by weight */
        out[fill[a]] = cap * w[fill[a]] / wsum;
}

void fg_fair_water_fill(size_t n, const double *d, const double *w, double cap, double *out,
                        int32_t *scratch)
{
    size_t m = 0;
    double wsum = 0;
    for (size_t i = 0; i < n; i++) {
        assert(w[i] > 0);
        out[i] = 0;
        if (d[i] > 0) {
            scratch[m++] = (int32_t)i;
            wsum += w[i];
            out[i] = d[i] / w[i]; /* its key, until its part replaces it */
        }
    }
    for (size_t a = 1; a < m; a++) /* (n is the number of accounts, members or tenants) */
        settle(scratch, NULL, a + 1, out, a);
    fill_sorted(scratch, m, d, w, wsum, cap, out);
}

/* ------------------------------------------------------------------ kept sorted */

/* Every entity stays in order[] by (key, index), key d/w or -1 without demand (w > 0:
 * a key with demand is >= 0), so those without demand come first and those with demand
 * follow in fg_fair_water_fill's order. fg_fair_kept_set moves one entity to its new
 * place; the sum of the weights is made again only when it may have changed. */
void fg_fair_kept_init(fg_fair_kept_t *k, size_t n)
{
    fg_fair_kept_free(k);
    const size_t m = n ? n : 1;
    k->key = fg__alloc((sizeof(double) * 3 + sizeof(int32_t) * 2) * m);
    k->d = k->key + m;
    k->w = k->d + m;
    k->order = (int32_t *)(k->w + m);
    k->pos = k->order + m;
    k->n = k->none = n;
    for (size_t i = 0; i < n; i++) {
        k->key[i] = -1.0;
        k->d[i] = 0;
        k->w[i] = 1.0;
        k->order[i] = k->pos[i] = (int32_t)i;
    }
    k->wsum = 0;
    k->wsum_ok = 1;
}

void fg_fair_kept_free(fg_fair_kept_t *k)
{
    free(k->key);
    *k = (fg_fair_kept_t){0};
}

void fg_fair_kept_set(fg_fair_kept_t *k, size_t i, double d, double w)
{
    assert(i < k->n && w > 0);
    if (d == k->d[i] && w == k->w[i])
        return;
    const bool had = k->d[i] > 0, has = d > 0;
    if (had != has || (has && w != k->w[i]))
        k->wsum_ok = 0;
    k->none = k->none + had - has;
    k->d[i] = d;
    k->w[i] = w;
    k->key[i] = has ? d / w : -1.0;
    settle(k->order, k->pos, k->n, k->key, (size_t)k->pos[i]);
}

void fg_fair_kept_fill(fg_fair_kept_t *k, double cap, double *out)
{
    if (!k->wsum_ok) {
        double wsum = 0;
        for (size_t i = 0; i < k->n; i++)
            if (k->d[i] > 0)
                wsum += k->w[i];
        k->wsum = wsum;
        k->wsum_ok = 1;
    }
    for (size_t p = 0; p < k->none; p++)
        out[k->order[p]] = 0;
    fill_sorted(k->order + k->none, k->n - k->none, k->d, k->w, k->wsum, cap, out);
}
