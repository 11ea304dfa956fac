/*
 * h_estimates.c - how good the start estimates were: GET /v1/estimates/accuracy, the
 * estimate fields of a job's JSON, and the fairgpu_estimate_abs_error_seconds metric.
 *
 * A job counts when its first attempt started and it had an estimate at submission
 * (it was still pending after the pass that followed its submission; sched_estimates.c).
 * Its submission error is |first start - estimate at submission|, its limit-based error
 * |first start - the limit-based estimate of that moment|. Figures are medians and 90th
 * percentiles (nearest rank: the value at rank ceil(q n) of the n sorted errors), by
 * size class (GPUs: 1, 2-7, 8, >8) and by horizon (how long the job actually waited:
 * <10m, 10m-1h, 1h-6h, >6h), over the jobs whose first start lies in [from, to).
 * Example: three jobs of 1 GPU started with errors 2, 5 and 40 s against limit-based
 * errors 55, 57 and 58 s: submit median 5, p90 40; limit median 57, p90 58.
 *
 * Only aggregates leave here (any signed-in user may ask); the jobs are read from memory
 * under srv->mu into a small array, and the figures are made after the lock. The metric
 * does not walk the jobs: each job's errors go, when it first starts, into a window of
 * the last SRV_EST_WINDOW jobs per series (srv_est_window_t), copied at each scrape.
 */
#include "server/billfmt.h"
#include "server/server.h"

#include "common/xalloc.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One started job's errors, copied out of the lock. */
typedef struct est_row {
    int32_t gpus;
    int32_t source; /* of the estimate at submission, 1..4 */
    int64_t wait;   /* first start - submit */
    int64_t err, err_limit;
} est_row_t;

static const char *const SIZE_NAMES[] = {"1", "2-7", "8", ">8"};
static const char *const HORIZON_NAMES[] = {"<10m", "10m-1h", "1h-6h", ">6h"};

static int size_class(int32_t gpus)
{
    return gpus <= 1 ? 0 : gpus < 8 ? 1 : gpus == 8 ? 2 : 3;
}

static int horizon_class(int64_t wait)
{
    return wait < 600 ? 0 : wait < 3600 ? 1 : wait < 6 * 3600 ? 2 : 3;
}

static int64_t iabs(int64_t v)
{
    return v < 0 ? -v : v;
}

/* The started jobs with an estimate at submission whose first start is in [from, to)
 * (seconds); *n gets how many; the caller frees. */
static est_row_t *collect(srv_t *s, int64_t from, int64_t to, size_t *n)
{
    est_row_t *rows = NULL;
    size_t nr = 0, cap = 0;
    pthread_mutex_lock(&s->mu);
    for (uint64_t id = 1; id <= s->max_job_id && id <= s->jobs_cap; id++) {
        const srv_job_t *j = s->jobs[id - 1];
        if (!j || !j->r.est_first_start || !j->r.est_submit || !j->r.est_limit_submit)
            continue;
        const fg_store_job_t *r = &j->r;
        if (r->est_first_start < from || r->est_first_start >= to)
            continue;
        rows = fg_xgrow(rows, &cap, nr + 1, sizeof *rows);
        rows[nr++] = (est_row_t){.gpus = r->gpus,
                                 .source = r->est_submit_source,
                                 .wait = r->est_first_start - r->submit_time,
                                 .err = r->est_first_start - r->est_submit,
                                 .err_limit = r->est_first_start - r->est_limit_submit};
    }
    pthread_mutex_unlock(&s->mu);
    *n = nr;
    return rows;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The value at nearest rank ceil(q n) of v[0..n) sorted (n > 0). */
static int64_t rank_of(const int64_t *v, size_t n, int q_pct)
{
    size_t k = (n * (size_t)q_pct + 99) / 100;
    return v[k ? k - 1 : 0];
}

/* Absolute errors of the rows that `keep` selects (NULL: all); limit: the limit-based
 * ones. Sorted; *m gets how many; the caller frees. */
typedef bool keep_fn(const est_row_t *r, int arg);
static int64_t *errors(const est_row_t *rows, size_t n, keep_fn *keep, int arg, bool limit,
                       size_t *m)
{
    int64_t *v = fg_xmalloc((n ? n : 1) * sizeof *v);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!keep || keep(&rows[i], arg))
            v[k++] = iabs(limit ? rows[i].err_limit : rows[i].err);
    qsort(v, k, sizeof *v, cmp_i64);
    *m = k;
    return v;
}

/* {"median_abs_error_s":..,"p90_abs_error_s":..} of the selected rows (nulls: none). */
static json_t *stats(const est_row_t *rows, size_t n, keep_fn *keep, int arg, bool limit)
{
    size_t m;
    int64_t *v = errors(rows, n, keep, arg, limit, &m);
    json_t *o = m ? json_pack("{s:I,s:I}", "median_abs_error_s", (json_int_t)rank_of(v, m, 50),
                              "p90_abs_error_s", (json_int_t)rank_of(v, m, 90))
                  : json_pack("{s:n,s:n}", "median_abs_error_s", "p90_abs_error_s");
    free(v);
    return o;
}

static bool keep_size(const est_row_t *r, int cls)
{
    return size_class(r->gpus) == cls;
}

static bool keep_horizon(const est_row_t *r, int cls)
{
    return horizon_class(r->wait) == cls;
}

static size_t count(const est_row_t *rows, size_t n, keep_fn *keep, int arg)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += keep(&rows[i], arg);
    return k;
}

/* One class's entry: {name_key: name, "jobs", "submit", "limit"}. */
static json_t *class_entry(const char *name_key, const char *name, const est_row_t *rows, size_t n,
                           keep_fn *keep, int cls)
{
    return json_pack("{s:s,s:I,s:o,s:o}", name_key, name, "jobs",
                     (json_int_t)count(rows, n, keep, cls), "submit",
                     stats(rows, n, keep, cls, false), "limit", stats(rows, n, keep, cls, true));
}

static void fmt_rfc3339(int64_t t, char out[32])
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Reads ?from= and ?to= (RFC 3339 or ms, as the billing reports) into seconds; the
 * window defaults to the last 7 days. False after a 400 answer. */
static bool parse_window(srv_req_t *r, int64_t *from, int64_t *to)
{
    const char *f = srv_query(r, "from"), *t = srv_query(r, "to");
    int64_t fms = 0, tms = 0;
    static const char msg[] = "must be a time: RFC 3339 (2026-12-01T12:00:00Z) or ms since the "
                              "epoch";
    if (f && !srv_bill_parse_time(f, &fms))
        return srv_reply_error(r, 400, "invalid_argument", "from", "from %s", msg), false;
    if (t && !srv_bill_parse_time(t, &tms))
        return srv_reply_error(r, 400, "invalid_argument", "to", "to %s", msg), false;
    *to = t ? tms / 1000 : srv_now() + 1;
    *from = f ? fms / 1000 : *to - 7 * 86400;
    if (*to <= *from)
        return srv_reply_error(r, 400, "invalid_argument", "to", "to must be later than from"),
               false;
    return true;
}

int h_estimates_accuracy(srv_req_t *r)
{
    int64_t from, to;
    if (!parse_window(r, &from, &to))
        return SRV_YES;
    size_t n;
    est_row_t *rows = collect(r->srv, from, to, &n);
    char fb[32], tb[32];
    fmt_rfc3339(from, fb);
    fmt_rfc3339(to, tb);
    json_t *by_size = json_array(), *by_h = json_array();
    for (int k = 0; k < 4; k++) {
        json_array_append_new(by_size, class_entry("class", SIZE_NAMES[k], rows, n, keep_size, k));
        json_array_append_new(by_h,
                              class_entry("horizon", HORIZON_NAMES[k], rows, n, keep_horizon, k));
    }
    json_t *o = json_pack("{s:{s:s,s:s},s:I,s:o,s:o,s:o,s:o}", "window", "from", fb, "to", tb,
                          "jobs", (json_int_t)n, "submit", stats(rows, n, NULL, 0, false), "limit",
                          stats(rows, n, NULL, 0, true), "by_size", by_size, "by_horizon", by_h);
    free(rows);
    return srv_reply_json(r, 200, o);
}

/* ------------------------------------------------------------------ metrics */

/* The window's series of the estimate at submission from source (1..4), size class sz;
 * the limit-based one's of sz. */
static int series_submit(int source, int sz)
{
    return (source - 1) * 4 + sz;
}

static int series_limit(int sz)
{
    return 16 + sz;
}

static void window_put(srv_est_window_t *w, int k, int64_t err)
{
    assert(k >= 0 && k < SRV_EST_SERIES && err >= 0);
    w->err[k][w->head[k]] = err;
    w->head[k] = (w->head[k] + 1) % SRV_EST_WINDOW;
    if (w->n[k] < SRV_EST_WINDOW)
        w->n[k]++;
    w->count[k]++;
    w->sum[k] += err;
}

void srv_est_window_add(srv_t *s, const srv_job_t *j)
{
    const fg_store_job_t *r = &j->r;
    if (!r->est_first_start || !r->est_submit || !r->est_limit_submit || r->est_submit_source < 1 ||
        r->est_submit_source > 4)
        return;
    int sz = size_class(r->gpus);
    window_put(&s->est_window, series_submit(r->est_submit_source, sz),
               iabs(r->est_first_start - r->est_submit));
    window_put(&s->est_window, series_limit(sz), iabs(r->est_first_start - r->est_limit_submit));
}

/* One summary (quantiles 0.5 and 0.9 of the window, _sum and _count of all) of series
 * k of the copy w. */
static void put_summary(srv_buf_t *b, const char *labels, srv_est_window_t *w, int k)
{
    int32_t m = w->n[k];
    qsort(w->err[k], (size_t)m, sizeof w->err[k][0], cmp_i64);
    char line[1024];
    int len = snprintf(line, sizeof line,
                       "fairgpu_estimate_abs_error_seconds{%s,quantile=\"0.5\"} %lld\n"
                       "fairgpu_estimate_abs_error_seconds{%s,quantile=\"0.9\"} %lld\n"
                       "fairgpu_estimate_abs_error_seconds_sum{%s} %lld\n"
                       "fairgpu_estimate_abs_error_seconds_count{%s} %lld\n",
                       labels, (long long)rank_of(w->err[k], (size_t)m, 50), labels,
                       (long long)rank_of(w->err[k], (size_t)m, 90), labels, (long long)w->sum[k],
                       labels, (long long)w->count[k]);
    srv_buf_put(b, line, len > 0 && (size_t)len < sizeof line ? (size_t)len : 0);
}

/* The quantiles are of the last SRV_EST_WINDOW jobs of each series (a bounded copy per
 * scrape, whatever the number of jobs); _sum and _count of every job since start. */
void srv_est_metrics(srv_t *s, srv_buf_t *b)
{
    srv_est_window_t *w = fg_xmalloc(sizeof *w);
    pthread_mutex_lock(&s->mu);
    memcpy(w, &s->est_window, sizeof *w);
    pthread_mutex_unlock(&s->mu);
    srv_buf_puts(b, "# HELP fairgpu_estimate_abs_error_seconds |first start - estimate| of jobs "
                    "that waited: estimate=\"submit\" (by its source) and the limit-based one; "
                    "quantiles over the last 512 jobs of each series.\n"
                    "# TYPE fairgpu_estimate_abs_error_seconds summary\n");
    char labels[96];
    for (int src = 1; src <= 4; src++)
        for (int sz = 0; sz < 4; sz++) {
            snprintf(labels, sizeof labels, "estimate=\"submit\",source=\"%s\",size=\"%s\"",
                     srv_est_source_name(src), SIZE_NAMES[sz]);
            if (w->n[series_submit(src, sz)])
                put_summary(b, labels, w, series_submit(src, sz));
        }
    for (int sz = 0; sz < 4; sz++) {
        snprintf(labels, sizeof labels, "estimate=\"limit_based\",source=\"limit\",size=\"%s\"",
                 SIZE_NAMES[sz]);
        if (w->n[series_limit(sz)])
            put_summary(b, labels, w, series_limit(sz));
    }
    free(w);
}

/* ------------------------------------------------------------------ a job's fields */

static void put_key(srv_buf_t *b, const char *k)
{
    srv_buf_put(b, ",\"", 2);
    srv_buf_puts(b, k);
    srv_buf_put(b, "\":", 2);
}

static void put_or_null(srv_buf_t *b, bool has, int64_t v)
{
    if (has)
        srv_buf_i64(b, v);
    else
        srv_buf_put(b, "null", 4);
}

void srv_job_render_estimates(const srv_job_t *j, srv_buf_t *b)
{
    const fg_store_job_t *r = &j->r;
    bool live = j->state == FG_JOB_PENDING && r->estimated_start > 0;
    bool started = r->est_first_start > 0 && r->est_submit > 0;
    put_key(b, "estimated_start_p10");
    put_or_null(b, live && r->est_p10, r->est_p10);
    put_key(b, "estimated_start_p90");
    put_or_null(b, live && r->est_p90, r->est_p90);
    put_key(b, "estimate_source");
    srv_buf_jstr(b, live ? srv_est_source_name(r->est_source) : NULL);
    put_key(b, "estimate_at_submit");
    put_or_null(b, r->est_submit > 0, r->est_submit);
    put_key(b, "estimate_at_submit_p10");
    put_or_null(b, r->est_submit_p10 > 0, r->est_submit_p10);
    put_key(b, "estimate_at_submit_p90");
    put_or_null(b, r->est_submit_p90 > 0, r->est_submit_p90);
    put_key(b, "estimate_at_submit_source");
    srv_buf_jstr(b, srv_est_source_name(r->est_submit_source));
    put_key(b, "estimate_limit_at_submit");
    put_or_null(b, r->est_limit_submit > 0, r->est_limit_submit);
    put_key(b, "estimate_error_s");
    put_or_null(b, started, r->est_first_start - r->est_submit);
    put_key(b, "estimate_limit_error_s");
    put_or_null(b, started && r->est_limit_submit > 0, r->est_first_start - r->est_limit_submit);
}
