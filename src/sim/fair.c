/*
 * fair.c - piecewise integration of fair share received and entitled (see fair.h).
 *
 * Water-filling, worked example: C = 10 GPUs, tenants A, B, C with weight 1 each and
 * demands 2, 5, 20. Sorted by demand/weight: A (2), B (5), C (20). A's equal slice is
 * 10/3 = 3.33 >= 2, so A gets 2; 8 GPUs left for B and C: 4 each, B asks 5 > 4, and so
 * does everyone after B (sorted), so B and C get 4 each. E = (2, 4, 4).
 */
#include "sim/fair.h"

#include "common/xalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void fg_fair_init(fg_fair_t *f, int32_t n, const double *weights, double capacity, int64_t t0)
{
    memset(f, 0, sizeof *f);
    f->n = n;
    f->capacity = capacity;
    size_t m = n > 0 ? (size_t)n : 1;
    f->weight = fg_xmalloc(m * sizeof *f->weight);
    f->finite = 1;
    for (int32_t i = 0; i < n; i++) {
        f->weight[i] = weights ? weights[i] : 1.0;
        if (!(isfinite(f->weight[i]) && f->weight[i] > 0))
            f->finite = 0;
    }
    f->demand = fg_xcalloc(m, sizeof *f->demand);
    f->running = fg_xcalloc(m, sizeof *f->running);
    f->ent = fg_xcalloc(m, sizeof *f->ent);
    f->entitled = fg_xcalloc(m, sizeof *f->entitled);
    f->received = fg_xcalloc(m, sizeof *f->received);
    f->order = fg_xcalloc(m, sizeof *f->order);
    f->sorted = fg_xmalloc(m * sizeof *f->sorted);
    f->pos = fg_xmalloc(m * sizeof *f->pos);
    f->key = fg_xcalloc(m, sizeof *f->key); /* +0.0: 0 / weight */
    f->act = fg_xmalloc(m * sizeof *f->act);
    f->act_pos = fg_xmalloc(m * sizeof *f->act_pos);
    f->moved = fg_xmalloc(m * sizeof *f->moved);
    f->is_moved = fg_xcalloc(m, sizeof *f->is_moved);
    for (int32_t i = 0; i < n; i++) {
        f->sorted[i] = i;
        f->pos[i] = i;
        f->act_pos[i] = -1;
    }
    f->since = fg_xcalloc(m, sizeof *f->since);
    for (int32_t i = 0; i < n; i++)
        f->since[i] = t0;
    f->exact = 1;
    f->t0 = t0;
    f->t_last = t0;
    f->next_sample = t0;
}

void fg_fair_free(fg_fair_t *f)
{
    free(f->weight);
    free(f->demand);
    free(f->running);
    free(f->since);
    free(f->ent);
    free(f->entitled);
    free(f->received);
    free(f->order);
    free(f->sorted);
    free(f->pos);
    free(f->key);
    free(f->act);
    free(f->act_pos);
    free(f->moved);
    free(f->is_moved);
    free(f->samples);
    memset(f, 0, sizeof *f);
}

void fg_fair_sample(fg_fair_t *f, int64_t interval, size_t max_samples)
{
    f->interval = interval > 0 ? interval : 0;
    f->max_samples = max_samples;
    f->next_sample = f->t_last;
}

/* Sort key context: qsort has no user pointer, so the keys are computed first. */
typedef struct keyed {
    double key;
    int32_t u;
} keyed_t;

static int cmp_keyed(const void *a, const void *b)
{
    const keyed_t *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return (x->u > y->u) - (x->u < y->u);
}

void fg_fair_waterfill(int32_t n, const double *weight, const int64_t *demand, double capacity,
                       int32_t *order, double *ent)
{
    int32_t m = 0;
    double wsum = 0;
    for (int32_t u = 0; u < n; u++) {
        ent[u] = 0;
        if (demand[u] > 0) {
            order[m++] = u;
            wsum += weight[u];
        }
    }
    if (m == 0)
        return;
    /* Sort by demand/weight (ties by index, so the result is deterministic). */
    keyed_t stackbuf[64];
    keyed_t *k = m <= 64 ? stackbuf : fg_xmalloc((size_t)m * sizeof *k);
    for (int32_t i = 0; i < m; i++) {
        k[i].u = order[i];
        k[i].key = (double)demand[order[i]] / weight[order[i]];
    }
    if (m <= 32) { /* insertion sort: the order is total, so the same as qsort's */
        for (int32_t i = 1; i < m; i++) {
            keyed_t v = k[i];
            int32_t j = i;
            for (; j > 0 && cmp_keyed(&v, &k[j - 1]) < 0; j--)
                k[j] = k[j - 1];
            k[j] = v;
        }
    } else {
        qsort(k, (size_t)m, sizeof *k, cmp_keyed);
    }
    double left = capacity;
    int32_t i = 0;
    for (; i < m; i++) {
        int32_t u = k[i].u;
        double slice = left * weight[u] / wsum;
        if ((double)demand[u] > slice)
            break;
        ent[u] = (double)demand[u];
        left -= (double)demand[u];
        wsum -= weight[u];
    }
    for (; i < m; i++) {
        int32_t u = k[i].u;
        ent[u] = left * weight[u] / wsum;
    }
    if (k != stackbuf)
        free(k);
}

/* (key, index) order of f->sorted */
static inline int kept_less(const fg_fair_t *f, int32_t a, int32_t b)
{
    return f->key[a] < f->key[b] || (f->key[a] == f->key[b] && a < b);
}

/* fg_fair_waterfill for the tracker, with the same result bit for bit: every tenant
 * stays in f->sorted, ordered by (demand / weight, index), a total order, so its sorted
 * order is unique and any way of sorting gives the same one. Between two calls usually
 * one demand changed (f->moved): the others are still in order, so that tenant alone
 * moves to its place; with more, the array is sorted again by insertion from the last
 * call's order (close to one pass). Tenants without demand are skipped when filling,
 * which leaves those with demand in fg_fair_waterfill's order, and wsum is summed in
 * index order as there (again only when the set with demand changed: it depends on
 * nothing else). */
static void waterfill_kept(fg_fair_t *f)
{
    const int32_t n = f->n;
    int32_t *k = f->sorted;
    if (f->nmoved == 1) {
        int32_t v = f->moved[0];
        int32_t j = f->pos[v];
        for (; j > 0 && kept_less(f, v, k[j - 1]); j--) {
            k[j] = k[j - 1];
            f->pos[k[j]] = j;
        }
        for (; j + 1 < n && kept_less(f, k[j + 1], v); j++) {
            k[j] = k[j + 1];
            f->pos[k[j]] = j;
        }
        k[j] = v;
        f->pos[v] = j;
    } else if (f->nmoved > 1) {
        for (int32_t i = 1; i < n; i++) {
            int32_t v = k[i];
            int32_t j = i;
            for (; j > 0 && kept_less(f, v, k[j - 1]); j--)
                k[j] = k[j - 1];
            k[j] = v;
        }
        for (int32_t i = 0; i < n; i++)
            f->pos[k[i]] = i;
    }
    for (int32_t i = 0; i < f->nmoved; i++) {
        const int32_t u = f->moved[i];
        f->is_moved[u] = 0;
        if (f->demand[u] <= 0)
            f->ent[u] = 0; /* (the others without demand had none before either) */
    }
    f->nmoved = 0;
    if (!f->wsum_ok) {
        double wsum = 0;
        for (int32_t u = 0; u < n; u++)
            if (f->demand[u] > 0)
                wsum += f->weight[u];
        f->wsum = wsum;
        f->wsum_ok = 1;
    }
    double wsum = f->wsum;
    double left = f->capacity;
    /* with finite weights > 0 a tenant with demand has a key > 0 (demand >= 1), one without
     * has +0.0, so those without come first and the fill starts past them */
    int32_t i = f->finite ? n - f->with_demand : 0;
    for (; i < n; i++) {
        int32_t u = k[i];
        if (f->demand[u] <= 0)
            continue;
        double slice = left * f->weight[u] / wsum;
        if ((double)f->demand[u] > slice)
            break;
        f->ent[u] = (double)f->demand[u];
        left -= (double)f->demand[u];
        wsum -= f->weight[u];
    }
    for (; i < n; i++) {
        int32_t u = k[i];
        if (f->demand[u] > 0)
            f->ent[u] = left * f->weight[u] / wsum;
    }
}

static void take_samples(fg_fair_t *f, int64_t t)
{
    while (f->next_sample < t) {
        if (f->nsamples >= f->max_samples) {
            f->interval = 0;
            return;
        }
        f->samples = fg_xgrow(f->samples, &f->samples_cap, (f->nsamples + 1) * (size_t)f->n,
                              sizeof *f->samples);
        float *row = f->samples + f->nsamples * (size_t)f->n;
        for (int32_t u = 0; u < f->n; u++)
            row[u] = (float)((double)f->running[u] / f->capacity);
        f->nsamples++;
        f->next_sample += f->interval;
    }
}

/* received_u += R_u x (t_last - since_u): what the steps since R_u last changed added.
 * While f->exact, every R_u x dt and every partial sum of received_u is an integer
 * below 2^53, so each double operation is exact and one product for the whole span
 * gives the bits of one product per step. */
static void received_catch_up(fg_fair_t *f, int32_t u)
{
    f->received[u] += (double)f->running[u] * (double)(f->t_last - f->since[u]);
    f->since[u] = f->t_last;
}

void fg_fair_flush(fg_fair_t *f)
{
    if (!f->exact)
        return;
    for (int32_t u = 0; u < f->n; u++)
        received_catch_up(f, u);
}

void fg_fair_advance(fg_fair_t *f, int64_t t)
{
    if (t <= f->t_last)
        return;
    if (f->interval)
        take_samples(f, t);
    int64_t dt = t - f->t_last;
    if (f->dirty) {
        waterfill_kept(f);
        f->dirty = 0;
    }
    /* received_u <= max |R| x (t - t0): below 2^53 the lazy sums are exact; past it
     * (never in a replay: 2^53 GPU-seconds), every step is summed again */
    if (f->exact && (double)f->max_running * (double)(t - f->t0) >= 9007199254740992.0) {
        fg_fair_flush(f);
        f->exact = 0;
    }
    if (f->with_demand > 0) {
        /* the tenants with demand only: one without has no entitlement (ent 0,
         * waterfill_kept) and nothing running (its demand counts its running GPUs), so
         * it would add +0.0 to sums that start at +0.0 and never go below, which leaves
         * their bits as they are; each sum is its own, so the order does not matter */
        double ddt = (double)dt;
        if (f->exact) { /* (received: when R_u changes, received_catch_up) */
            for (int32_t a = 0; a < f->with_demand; a++) {
                int32_t u = f->act[a];
                f->entitled[u] += f->ent[u] * ddt;
            }
        } else {
            for (int32_t a = 0; a < f->with_demand; a++) {
                int32_t u = f->act[a];
                f->entitled[u] += f->ent[u] * ddt;
                f->received[u] += (double)f->running[u] * ddt;
            }
        }
    }
    f->n_integral += (int64_t)f->with_demand * dt;
    f->t_last = t;
}

void fg_fair_demand(fg_fair_t *f, int32_t u, int64_t dg)
{
    int64_t before = f->demand[u];
    f->demand[u] += dg;
    if (before == 0 && f->demand[u] > 0) {
        f->act_pos[u] = f->with_demand;
        f->act[f->with_demand++] = u;
        f->wsum_ok = 0;
    } else if (before > 0 && f->demand[u] == 0) {
        int32_t last = f->act[--f->with_demand];
        f->act[f->act_pos[u]] = last;
        f->act_pos[last] = f->act_pos[u];
        f->act_pos[u] = -1;
        f->wsum_ok = 0;
    }
    f->key[u] = (double)f->demand[u] / f->weight[u];
    if (!f->is_moved[u]) {
        f->is_moved[u] = 1;
        f->moved[f->nmoved++] = u;
    }
    f->dirty = 1;
}

void fg_fair_running(fg_fair_t *f, int32_t u, int64_t dg)
{
    if (f->exact)
        received_catch_up(f, u);
    f->running[u] += dg;
    int64_t r = f->running[u] < 0 ? -f->running[u] : f->running[u];
    if (r > f->max_running)
        f->max_running = r;
}

double fg_fair_jain(int32_t n, const double *entitled, const double *received)
{
    double s = 0, s2 = 0;
    int32_t m = 0;
    for (int32_t u = 0; u < n; u++) {
        if (entitled[u] <= 0)
            continue;
        double x = received[u] / entitled[u];
        s += x;
        s2 += x * x;
        m++;
    }
    if (m == 0 || s2 <= 0)
        return 1.0;
    return s * s / ((double)m * s2);
}
