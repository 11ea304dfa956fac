/*
 * fair.c - piecewise integration of fair share received and entitled (see fair.h). The
 * entitlements are the water fill of include/fairgpu/fairshare.h (worked example in
 * src/core/fairshare.c), kept sorted between demand changes (fg_fair_kept_t).
 */
#include "sim/fair.h"
#include <stdio.h>
#include <stdlib.h>

#include "common/xalloc.h"

#include <stdlib.h>
#include <string.h>

void fg_fair_init(fg_fair_t *f, int32_t n, const double *weights, double capacity, int64_t t0)
{
    memset(f, 0, sizeof *f);
    f->n = n;
    f->capacity = capacity;
    size_t m = n > 0 ? (size_t)n : 1;
    f->weight = fg_xmalloc(m * sizeof *f->weight);
    for (int32_t i = 0; i < n; i++)
        f->weight[i] = weights ? weights[i] : 1.0;
    f->demand = fg_xcalloc(m, sizeof *f->demand);
    f->running = fg_xcalloc(m, sizeof *f->running);
    f->ent = fg_xcalloc(m, sizeof *f->ent);
    f->entitled = fg_xcalloc(m, sizeof *f->entitled);
    f->received = fg_xcalloc(m, sizeof *f->received);
    fg_fair_kept_init(&f->split, (size_t)n);
    for (int32_t i = 0; i < n; i++)
        fg_fair_kept_set(&f->split, (size_t)i, 0, f->weight[i]);
    f->act = fg_xmalloc(m * sizeof *f->act);
    f->act_pos = fg_xmalloc(m * sizeof *f->act_pos);
    for (int32_t i = 0; i < n; i++)
        f->act_pos[i] = -1;
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
    fg_fair_kept_free(&f->split);
    free(f->act);
    free(f->act_pos);
    free(f->samples);
    memset(f, 0, sizeof *f);
}

void fg_fair_sample(fg_fair_t *f, int64_t interval, size_t max_samples)
{
    f->interval = interval > 0 ? interval : 0;
    f->max_samples = max_samples;
    f->next_sample = f->t_last;
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
        fg_fair_kept_fill(&f->split, f->capacity, f->ent);
        f->dirty = 0;
    }
    /* received_u <= max |R| x (t - t0): below 2^53 the lazy sums are exact; past it
     * (never in a replay: 2^53 GPU-seconds), every step is summed again */
    if (f->exact && (double)f->max_running * (double)(t - f->t0) >= 9007199254740992.0) {
        fg_fair_flush(f);
        f->exact = 0;
    }
    if (f->with_demand > 0) {
        /* the tenants with demand only: one without has no entitlement (ent 0) and nothing running
         * (its demand counts its running GPUs), so it would add +0.0 to sums that start at +0.0 and
         * never go below, which leaves their bits as they are; each sum is its own, so the order
         * does not matter */
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
    } else if (before > 0 && f->demand[u] == 0) {
        int32_t last = f->act[--f->with_demand];
        f->act[f->act_pos[u]] = last;
        f->act_pos[last] = f->act_pos[u];
        f->act_pos[u] = -1;
    }
    fg_fair_kept_set(&f->split, (size_t)u, (double)f->demand[u], f->weight[u]);
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
        if (getenv("FG_JAIN_DEBUG"))
            fprintf(stderr, "tenant %d entitled %.0f received %.0f x %.3f\n", u, entitled[u],
                    received[u], x);
        s += x;
        s2 += x * x;
        m++;
    }
    if (m == 0 || s2 <= 0)
        return 1.0;
    return s * s / ((double)m * s2);
}
