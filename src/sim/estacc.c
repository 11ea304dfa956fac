/*
 * estacc.c - the accuracy of the replay's submission-time start estimates.
 *
 * Only jobs that waited after their submission count: a job that started at once got
 * the estimate "now" from both, which is exact, and would only dilute the figures
 * (they are counted, as at_once). Of those that waited, the groups hold the jobs that
 * have both estimates: the core gives one only to the first estimate_depth jobs in
 * plan order (the others are counted as no_limit; hist_all is the history estimate's
 * error over all that waited). Per group: the median and p90 (nearest rank) of
 * |start - estimate| for each estimate, and the coverage of the history range, the
 * jobs with p10 <= start <= p90. Groups: every job, by size class (1, 2-7, 8, >8 GPUs)
 * and by horizon, the actual wait (< 10 min, 10 min - 1 h, 1 h - 6 h, > 6 h).
 *
 * Worked example: three jobs waited 300, 1200 and 30000 s; the core estimated waits
 * of 1000, 3600 and 20000 (errors 700, 2400, 10000), the history 400, 1000 and 25000
 * (errors 100, 200, 5000), with ranges holding the first two. All: limit median 2400,
 * p90 10000; history median 200, p90 5000; coverage 2/3. Horizons <10m, 10m-1h and
 * >6h hold one job each.
 */
#include "sim/estacc.h"

#include "common/xalloc.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const fg_est_size_names[FG_EST_SIZES] = {"1", "2-7", "8", ">8"};
const char *const fg_est_horizon_names[FG_EST_HORIZONS] = {"<10m", "10m-1h", "1h-6h", ">6h"};

int fg_est_size_class(int32_t gpus)
{
    return gpus <= 1 ? 0 : gpus < 8 ? 1 : gpus == 8 ? 2 : 3;
}

int fg_est_horizon(int64_t wait_s)
{
    return wait_s < 600 ? 0 : wait_s < 3600 ? 1 : wait_s < 6 * 3600 ? 2 : 3;
}

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t abs64(int64_t v)
{
    return v < 0 ? -v : v;
}

/* Median and p90 of the m errors v[0..m) (sorts v). */
static fg_est_err_t err_of(int64_t *v, size_t m)
{
    fg_est_err_t e = {.jobs = (int64_t)m};
    if (m == 0)
        return e;
    qsort(v, m, sizeof *v, cmp_i64);
    e.p50 = v[(50 * m + 99) / 100 - 1];
    e.p90 = v[(90 * m + 99) / 100 - 1];
    return e;
}

/* Whether job r belongs to the group (kind 0: all, 1: size class c, 2: horizon c). */
static bool in_group(const fg_est_rec_t *r, int kind, int c)
{
    return kind == 0 || (kind == 1 && fg_est_size_class(r->gpus) == c) ||
           (kind == 2 && fg_est_horizon(r->start - r->submit) == c);
}

static bool compared(const fg_est_rec_t *r)
{
    return r->start >= 0 && r->waited && r->limit_est >= 0 && r->hist[1] >= 0;
}

static fg_est_group_t group_of(const fg_est_rec_t *recs, size_t n, int kind, int c, int64_t *l,
                               int64_t *h)
{
    fg_est_group_t g = {0};
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const fg_est_rec_t *r = &recs[i];
        if (!compared(r) || !in_group(r, kind, c))
            continue;
        l[m] = abs64(r->start - r->limit_est);
        h[m] = abs64(r->start - r->hist[1]);
        g.covered += r->hist[0] <= r->start && r->start <= r->hist[2];
        m++;
    }
    g.jobs = (int64_t)m;
    g.limit = err_of(l, m);
    g.history = err_of(h, m);
    return g;
}

void fg_estacc_compute(const fg_est_rec_t *recs, size_t n, fg_estacc_t *out)
{
    memset(out, 0, sizeof *out);
    int64_t *l = fg_xmalloc((n + 1) * sizeof *l), *h = fg_xmalloc((n + 1) * sizeof *h);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const fg_est_rec_t *r = &recs[i];
        if (r->start < 0)
            continue;
        out->jobs++;
        if (!r->waited) {
            out->at_once++;
            continue;
        }
        out->waited++;
        out->no_limit += r->limit_est < 0;
        if (r->hist[1] >= 0)
            h[m++] = abs64(r->start - r->hist[1]);
    }
    out->hist_all = err_of(h, m);
    out->all = group_of(recs, n, 0, 0, l, h);
    for (int c = 0; c < FG_EST_SIZES; c++)
        out->by_size[c] = group_of(recs, n, 1, c, l, h);
    for (int c = 0; c < FG_EST_HORIZONS; c++)
        out->by_horizon[c] = group_of(recs, n, 2, c, l, h);
    free(l);
    free(h);
}

static json_t *err_json(const fg_est_err_t *e)
{
    json_t *o = json_object();
    json_object_set_new(o, "median_abs_error_s", e->jobs ? json_integer(e->p50) : json_null());
    json_object_set_new(o, "p90_abs_error_s", e->jobs ? json_integer(e->p90) : json_null());
    return o;
}

static json_t *group_json(const fg_est_group_t *g, const char *key, const char *name)
{
    json_t *o = json_object();
    if (key)
        json_object_set_new(o, key, json_string(name));
    json_object_set_new(o, "jobs", json_integer(g->jobs));
    json_object_set_new(o, "limit", err_json(&g->limit));
    json_object_set_new(o, "history", err_json(&g->history));
    json_object_set_new(o, "coverage",
                        g->jobs ? json_real(round(1e4 * (double)g->covered / (double)g->jobs) / 1e4)
                                : json_null());
    return o;
}

json_t *fg_estacc_json(const fg_estacc_t *a)
{
    json_t *o = json_object();
    json_object_set_new(o, "jobs", json_integer(a->jobs));
    json_object_set_new(o, "started_at_once", json_integer(a->at_once));
    json_object_set_new(o, "waited", json_integer(a->waited));
    json_object_set_new(o, "waited_without_limit_estimate", json_integer(a->no_limit));
    json_t *ha = err_json(&a->hist_all);
    json_object_set_new(ha, "jobs", json_integer(a->hist_all.jobs));
    json_object_set_new(o, "history_all_waited", ha);
    json_object_set_new(o, "all", group_json(&a->all, NULL, NULL));
    json_t *bs = json_array(), *bh = json_array();
    for (int c = 0; c < FG_EST_SIZES; c++)
        json_array_append_new(bs, group_json(&a->by_size[c], "class", fg_est_size_names[c]));
    for (int c = 0; c < FG_EST_HORIZONS; c++)
        json_array_append_new(bh,
                              group_json(&a->by_horizon[c], "horizon", fg_est_horizon_names[c]));
    json_object_set_new(o, "by_size", bs);
    json_object_set_new(o, "by_horizon", bh);
    return o;
}

static void cell_err(char *b, size_t n, const fg_est_err_t *e, bool p90)
{
    if (!e->jobs)
        snprintf(b, n, "-");
    else
        snprintf(b, n, "%lld", (long long)(p90 ? e->p90 : e->p50));
}

static void print_row(FILE *out, const char *name, const fg_est_group_t *g, bool md)
{
    char c[4][32], cov[16];
    cell_err(c[0], sizeof c[0], &g->limit, false);
    cell_err(c[1], sizeof c[1], &g->history, false);
    cell_err(c[2], sizeof c[2], &g->limit, true);
    cell_err(c[3], sizeof c[3], &g->history, true);
    if (g->jobs)
        snprintf(cov, sizeof cov, "%.2f", (double)g->covered / (double)g->jobs);
    else
        snprintf(cov, sizeof cov, "-");
    if (md)
        fprintf(out, "| %s | %lld | %s | %s | %s | %s | %s |\n", name, (long long)g->jobs, c[0],
                c[1], c[2], c[3], cov);
    else
        fprintf(out, "%-14s %8lld %12s %12s %12s %12s %8s\n", name, (long long)g->jobs, c[0], c[1],
                c[2], c[3], cov);
}

void fg_estacc_print(FILE *out, const fg_estacc_t *a, const char *title, bool md)
{
    fprintf(out,
            "%s%s: %lld jobs started, %lld at once (estimates exact), %lld waited (%lld of them "
            "without a core estimate; history over all that waited: median %lld, p90 %lld)\n",
            md ? "\n" : "", title, (long long)a->jobs, (long long)a->at_once, (long long)a->waited,
            (long long)a->no_limit, (long long)a->hist_all.p50, (long long)a->hist_all.p90);
    if (md)
        fprintf(out, "\n| group | jobs | limit p50 | history p50 | limit p90 | history p90 | "
                     "coverage |\n|---|---:|---:|---:|---:|---:|---:|\n");
    else
        fprintf(out, "%-14s %8s %12s %12s %12s %12s %8s\n", "group", "jobs", "limit_p50",
                "history_p50", "limit_p90", "history_p90", "coverage");
    print_row(out, "all", &a->all, md);
    char name[32];
    for (int c = 0; c < FG_EST_SIZES; c++) {
        snprintf(name, sizeof name, "size %s", fg_est_size_names[c]);
        print_row(out, name, &a->by_size[c], md);
    }
    for (int c = 0; c < FG_EST_HORIZONS; c++) {
        snprintf(name, sizeof name, "wait %s", fg_est_horizon_names[c]);
        print_row(out, name, &a->by_horizon[c], md);
    }
}
