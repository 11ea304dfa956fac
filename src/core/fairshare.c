/*
 * fairshare.c - TODO banner
 */
#include "internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
