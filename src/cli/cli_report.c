/*
 * cli_report.c - `fairgpu report --period 7d [--out DIR]`: the cluster report, in
 * Markdown, from the API alone (an admin's token): wait by job size, Jain's fairness
 * index among accounts over time, utilization, idle-allocated GPU-hours, top users by
 * GPU-hours and start-estimate accuracy (docs/cli.md, "report"). With --out, DIR gets
 * report.md and PNG plots made by gnuplot (report_plot.c); the figures are
 * report_calc.c's.
 *
 * What it reads: GET /v1/me (admin or refused), /v1/fairshare (shares, GPUs up),
 * /v1/jobs (pages, newest first, down to the period's start, and every live job),
 * /v1/billing/usage once per time bucket (GPU time clipped to the bucket, so buckets
 * add up exactly), /v1/estimates/accuracy (when the server has it).
 *
 * Example: `fairgpu report --period 7d --out r/` on a cluster of 8 GPUs, with 7 daily
 * buckets: "| 2026-11-30T14:00:00Z | 2 | 96.000 | 50.0 | 0.980 |" says two accounts
 * were active that day, used 96 of the 192 GPU-hours, and got GPU time close to their
 * shares (Jain 0.98).
 */
#include "cli/cli.h"
#include "cli/report_calc.h"
#include "cli/report_plot.h"

#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char REPORT_HELP[] =
    "usage: fairgpu report [--period P] [--out DIR]\n"
    "Admins: the cluster report for the last P (default 7d; 1h..366d, e.g. 36h, 2w), in\n"
    "Markdown on stdout: wait by job size, Jain's fairness index among accounts over time,\n"
    "utilization, idle-allocated GPU-hours, top users by GPU-hours, start-estimate\n"
    "accuracy. --out DIR also writes DIR/report.md and PNG plots (with gnuplot).\n";

/* ------------------------------------------------------------ tallies -- */

/* Sums by name (accounts, users): few names, a linear search. */
typedef struct {
    char **names;
    double *v;
    size_t n, cap;
} tally_t;

static double *tally_at(tally_t *t, const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->names[i], name))
            return &t->v[i];
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 16;
        t->names = realloc(t->names, t->cap * sizeof *t->names);
        t->v = realloc(t->v, t->cap * sizeof *t->v);
        if (!t->names || !t->v)
            abort();
    }
    t->names[t->n] = strdup(name);
    if (!t->names[t->n])
        abort();
    t->v[t->n] = 0;
    return &t->v[t->n++];
}

static void tally_free(tally_t *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->names[i]);
    free(t->names);
    free(t->v);
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------- the report -- */

typedef struct {
    cli_ctx_t x;
    long long from, to, period, bucket;
    int nb;
    json_t *jobs; /* the period's jobs and every live one */
    json_t *fs;   /* GET /v1/fairshare */
    long long gpus_up;
    tally_t *use;     /* [nb]: GPU-seconds by account */
    tally_t *active;  /* [nb]: accounts with a job live in the bucket */
    tally_t users;    /* GPU-seconds by user over the period */
    tally_t total;    /* GPU-seconds by account over the period */
    double *used;     /* [nb]: GPU-seconds */
    double *jain;     /* [nb]: -1 undefined */
    json_t *accuracy; /* GET /v1/estimates/accuracy, or NULL */
    long accuracy_status;
    FILE *md;
} rep_t;

static long long jint(json_t *o, const char *k, long long dflt)
{
    long long v;
    return cli_jint(o, k, &v) ? v : dflt;
}

static const char *jstr(json_t *o, const char *k)
{
    const char *s = cli_jstr(o, k);
    return s ? s : "";
}

/* GETs one page of path into the object by_id (id -> job); stops (returns 1) when a
 * job was submitted before r->from and stop_early. *cursor gets the next cursor. */
static int jobs_page(rep_t *r, const char *path, json_t *by_id, bool stop_early, char **cursor)
{
    json_t *res;
    if (cli_call(&r->x, "GET", path, NULL, NULL, &res))
        return -1;
    int stop = 0;
    size_t i;
    json_t *j;
    json_array_foreach(cli_items_of(res), i, j)
    {
        if (stop_early && jint(j, "submit_time", 0) < r->from) {
            stop = 1;
            break;
        }
        json_object_set(by_id, jstr(j, "id"), j);
    }
    const char *next = cli_jstr(res, "next_cursor");
    free(*cursor);
    *cursor = next && *next && !stop ? strdup(next) : NULL;
    json_decref(res);
    return *cursor ? 0 : 1;
}

/* Every job of one listing (base: "/v1/jobs?..."), page by page. */
static int jobs_list(rep_t *r, const char *base, json_t *by_id, bool stop_early)
{
    char *cursor = NULL;
    for (;;) {
        char path[4096];
        snprintf(path, sizeof path, "%s", base);
        cli_query_add(path, sizeof path, "cursor", cursor);
        int rc = jobs_page(r, path, by_id, stop_early, &cursor);
        if (rc) {
            free(cursor);
            return rc < 0 ? 1 : 0;
        }
    }
}

static int fetch_jobs(rep_t *r)
{
    json_t *by_id = json_object();
    int rc = jobs_list(r, "/v1/jobs?limit=1000&order=desc", by_id, true);
    if (!rc)
        rc = jobs_list(r, "/v1/jobs?limit=1000&state=PENDING,RUNNING", by_id, false);
    r->jobs = json_array();
    const char *k;
    json_t *j;
    json_object_foreach(by_id, k, j) json_array_append(r->jobs, j);
    json_decref(by_id);
    return rc;
}

/* The normalized share of account name (0 when unknown). */
static double share_of(rep_t *r, const char *name)
{
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(r->fs, "accounts"), i, a)
    {
        if (!strcmp(jstr(a, "name"), name))
            return json_number_value(json_object_get(a, "normalized_share"));
    }
    return 0;
}

/* Bucket b's usage: GPU-seconds by account and user, from the ledger lines. */
static int fetch_bucket(rep_t *r, int b)
{
    long long b0 = r->from + b * r->bucket, b1 = b0 + r->bucket < r->to ? b0 + r->bucket : r->to;
    char path[256];
    snprintf(path, sizeof path, "/v1/billing/usage?from=%lld&to=%lld", b0 * 1000, b1 * 1000);
    json_t *res;
    if (cli_call(&r->x, "GET", path, NULL, NULL, &res))
        return 1;
    size_t i;
    json_t *l;
    json_array_foreach(cli_items_of(res), i, l)
    {
        double s = (double)jint(l, "gpu_ms", 0) / 1000.0;
        if (s <= 0)
            continue;
        *tally_at(&r->use[b], jstr(l, "account")) += s;
        *tally_at(&r->total, jstr(l, "account")) += s;
        *tally_at(&r->users, jstr(l, "user")) += s;
        r->used[b] += s;
    }
    json_decref(res);
    return 0;
}

/* Accounts with a job live (submitted, not ended) in each bucket, or GPU time there. */
static void mark_active(rep_t *r)
{
    size_t i;
    json_t *j;
    json_array_foreach(r->jobs, i, j)
    {
        long long s = jint(j, "submit_time", 0), e = jint(j, "end_time", 0);
        if (e <= 0)
            e = r->to;
        for (int b = 0; b < r->nb; b++) {
            long long b0 = r->from + b * r->bucket, b1 = b0 + r->bucket;
            if (fg_rep_overlap(s, e > s ? e : s + 1, b0, b1) > 0)
                *tally_at(&r->active[b], jstr(j, "account")) = 1;
        }
    }
    for (int b = 0; b < r->nb; b++)
        for (size_t k = 0; k < r->use[b].n; k++)
            *tally_at(&r->active[b], r->use[b].names[k]) = 1;
}

/* Jain's index of the accounts in `who` (with a share), x = GPU-s / share from use. */
static double jain_of(rep_t *r, const tally_t *who, tally_t *use, int *nactive)
{
    double *x = malloc((who->n ? who->n : 1) * sizeof *x);
    if (!x)
        abort();
    size_t n = 0;
    for (size_t k = 0; k < who->n; k++) {
        double sh = share_of(r, who->names[k]);
        if (sh > 0)
            x[n++] = *tally_at(use, who->names[k]) / sh;
    }
    double jn = fg_rep_jain(x, n);
    free(x);
    *nactive = (int)n;
    return jn;
}

static int gather(rep_t *r)
{
    if (cli_call(&r->x, "GET", "/v1/fairshare", NULL, NULL, &r->fs))
        return 1;
    r->gpus_up = jint(r->fs, "gpus_up", 0);
    if (fetch_jobs(r))
        return 1;
    for (int b = 0; b < r->nb; b++)
        if (fetch_bucket(r, b))
            return 1;
    mark_active(r);
    for (int b = 0; b < r->nb; b++) {
        int n;
        r->jain[b] = jain_of(r, &r->active[b], &r->use[b], &n);
    }
    char path[256], f[32], t[32];
    snprintf(path, sizeof path, "/v1/estimates/accuracy?from=%s&to=%s",
             fg_rep_rfc3339(r->from, f, sizeof f), fg_rep_rfc3339(r->to, t, sizeof t));
    fg_resp_t resp;
    if (fg_client_request(&r->x.c, "GET", path, NULL, NULL, &resp) == 0) {
        r->accuracy_status = resp.status;
        if (resp.status == 200 && json_is_object(resp.json))
            r->accuracy = json_incref(resp.json);
        fg_resp_free(&resp);
    }
    return 0;
}

/* ----------------------------------------------------------- sections -- */

static const char *fmt_jain(double j, char *buf, size_t n)
{
    if (j < 0)
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%.3f", j);
    return buf;
}

/* Waits (s) of the jobs that started in the period, by size; pending ones apart. */
typedef struct {
    long long *w[FG_REP_SIZES];
    size_t n[FG_REP_SIZES];
    long long pending[FG_REP_SIZES], oldest[FG_REP_SIZES];
} waits_t;

static void waits_of(rep_t *r, waits_t *w)
{
    memset(w, 0, sizeof *w);
    size_t nj = json_array_size(r->jobs);
    for (int c = 0; c < FG_REP_SIZES; c++) {
        w->w[c] = malloc((nj ? nj : 1) * sizeof *w->w[c]);
        if (!w->w[c])
            abort();
    }
    size_t i;
    json_t *j;
    json_array_foreach(r->jobs, i, j)
    {
        int c = fg_rep_size_class(jint(j, "gpus", 1));
        long long sub = jint(j, "submit_time", 0), st = jint(j, "start_time", 0);
        if (!strcmp(jstr(j, "state"), "PENDING")) {
            w->pending[c]++;
            if (r->to - sub > w->oldest[c])
                w->oldest[c] = r->to - sub;
        } else if (st >= r->from && st <= r->to) {
            w->w[c][w->n[c]++] = st > sub ? st - sub : 0;
        }
    }
}

static void sec_wait(rep_t *r, waits_t *w, FILE *dat)
{
    fprintf(r->md, "## Wait by job size\n\n"
                   "Jobs that started in the period, from submission to their (last) start;\n"
                   "nearest-rank percentiles. Pending: jobs waiting at the report's end.\n\n"
                   "| size (GPUs) | jobs started | median wait (s) | p90 wait (s) | max wait (s) "
                   "| pending | longest pending (s) |\n|---|---|---|---|---|---|---|\n");
    for (int c = 0; c < FG_REP_SIZES; c++) {
        long long med = fg_rep_percentile(w->w[c], w->n[c], 50),
                  p90 = fg_rep_percentile(w->w[c], w->n[c], 90),
                  mx = fg_rep_percentile(w->w[c], w->n[c], 100);
        char a[24] = "-", b[24] = "-", m[24] = "-";
        if (w->n[c]) {
            snprintf(a, sizeof a, "%lld", med);
            snprintf(b, sizeof b, "%lld", p90);
            snprintf(m, sizeof m, "%lld", mx);
        }
        fprintf(r->md, "| %s | %zu | %s | %s | %s | %lld | %lld |\n", fg_rep_size_name(c), w->n[c],
                a, b, m, w->pending[c], w->oldest[c]);
        fprintf(dat, "\"%s\" %lld %lld\n", fg_rep_size_name(c), w->n[c] ? med : 0,
                w->n[c] ? p90 : 0);
    }
    fprintf(r->md, "\n");
}

static void sec_fairness(rep_t *r, FILE *dat)
{
    int n;
    double all = jain_of(r, &r->total, &r->total, &n);
    char jb[16];
    fprintf(r->md,
            "## Fairness among accounts (Jain's index)\n\n"
            "J = (sum x)^2 / (n sum x^2) over the accounts active in a bucket (a job of theirs\n"
            "was queued or running, or they used GPUs), x = GPU-seconds / normalized share\n"
            "(shares as they are now): 1 when every account got GPU time in proportion to its\n"
            "share, 1/n when one got all. Over the whole period: **%s** (%d accounts).\n\n"
            "| bucket start (UTC) | active accounts | GPU-hours | Jain |\n|---|---|---|---|\n",
            fmt_jain(all, jb, sizeof jb), n);
    for (int b = 0; b < r->nb; b++) {
        char t[32];
        int na = 0;
        for (size_t k = 0; k < r->active[b].n; k++)
            na += share_of(r, r->active[b].names[k]) > 0;
        fprintf(r->md, "| %s | %d | %.3f | %s |\n",
                fg_rep_rfc3339(r->from + b * r->bucket, t, sizeof t), na, r->used[b] / 3600.0,
                fmt_jain(r->jain[b], jb, sizeof jb));
        if (r->jain[b] >= 0)
            fprintf(dat, "%lld %.4f\n", r->from + b * r->bucket, r->jain[b]);
    }
    fprintf(r->md, "\n");
}

static void sec_utilization(rep_t *r, FILE *dat)
{
    fprintf(r->md,
            "## Utilization\n\n"
            "GPU time held (the ledger, GET /v1/billing/usage; a running attempt counts up to\n"
            "its last accrual) over the capacity of the %lld GPUs up now.\n\n"
            "| bucket start (UTC) | GPU-hours used | capacity GPU-hours | utilization %% |\n"
            "|---|---|---|---|\n",
            r->gpus_up);
    double used = 0, cap = 0;
    for (int b = 0; b < r->nb; b++) {
        long long b0 = r->from + b * r->bucket;
        long long len = fg_rep_overlap(b0, b0 + r->bucket, r->from, r->to);
        double c = (double)r->gpus_up * (double)len / 3600.0;
        double u = r->used[b] / 3600.0;
        char t[32], pct[16] = "-";
        if (c > 0)
            snprintf(pct, sizeof pct, "%.1f", 100.0 * u / c);
        fprintf(r->md, "| %s | %.3f | %.3f | %s |\n", fg_rep_rfc3339(b0, t, sizeof t), u, c, pct);
        fprintf(dat, "%lld %.3f\n", b0, c > 0 ? 100.0 * u / c : 0.0);
        used += u;
        cap += c;
    }
    char pct[16] = "-";
    if (cap > 0)
        snprintf(pct, sizeof pct, "%.1f", 100.0 * used / cap);
    fprintf(r->md, "| **total** | %.3f | %.3f | %s |\n\n", used, cap, pct);
}

static void sec_idle(rep_t *r)
{
    fprintf(r->md, "## Idle allocated GPU-hours\n\n");
    double idle = 0;
    size_t reported = 0, i;
    json_t *j;
    json_array_foreach(r->jobs, i, j)
    {
        json_t *v = json_object_get(j, "idle_gpu_s");
        if (json_is_number(v)) {
            idle += json_number_value(v);
            reported++;
        }
    }
    if (!reported)
        fprintf(r->md, "Not reported: the jobs carry no idle_gpu_s (this controller does not "
                       "measure idle GPUs).\n\n");
    else
        fprintf(r->md,
                "GPUs allocated to jobs but idle: **%.3f GPU-hours** (idle_gpu_s of %zu jobs).\n\n",
                idle / 3600.0, reported);
}

/* Index order of t by decreasing value. */
static size_t *by_value(const tally_t *t)
{
    size_t *ix = malloc((t->n ? t->n : 1) * sizeof *ix);
    if (!ix)
        abort();
    for (size_t i = 0; i < t->n; i++)
        ix[i] = i;
    for (size_t i = 1; i < t->n; i++) /* insertion sort: few users, stable by name order */
        for (size_t k = i; k > 0 && t->v[ix[k]] > t->v[ix[k - 1]]; k--) {
            size_t s = ix[k];
            ix[k] = ix[k - 1];
            ix[k - 1] = s;
        }
    return ix;
}

static void sec_users(rep_t *r, FILE *dat)
{
    double all = 0;
    for (size_t i = 0; i < r->users.n; i++)
        all += r->users.v[i];
    fprintf(r->md, "## Top users by GPU-hours\n\n| rank | user | GPU-hours | share %% |\n"
                   "|---|---|---|---|\n");
    size_t *ix = by_value(&r->users);
    for (size_t k = 0; k < r->users.n && k < 10; k++) {
        const char *u = r->users.names[ix[k]];
        double v = r->users.v[ix[k]];
        fprintf(r->md, "| %zu | %s | %.3f | %.1f |\n", k + 1, u, v / 3600.0,
                all > 0 ? 100.0 * v / all : 0.0);
        fputc('"', dat);
        for (const char *p = u; *p; p++) /* a safe label for the plot */
            fputc((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                          (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'
                      ? *p
                      : '_',
                  dat);
        fprintf(dat, "\" %.4f\n", v / 3600.0);
    }
    if (!r->users.n)
        fprintf(r->md, "| - | (no GPU time in the period) | 0.000 | - |\n");
    free(ix);
    fprintf(r->md, "\n");
}

/* "median / p90" of an accuracy part ({median_abs_error_s, p90_abs_error_s}). */
static const char *acc_pair(json_t *o, char *buf, size_t n)
{
    json_t *m = json_object_get(o, "median_abs_error_s"),
           *p = json_object_get(o, "p90_abs_error_s");
    if (!json_is_number(m) || !json_is_number(p))
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%.0f / %.0f", json_number_value(m), json_number_value(p));
    return buf;
}

static void acc_rows(rep_t *r, const char *list, const char *key)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(r->accuracy, list), i, e)
    {
        char a[48], b[48];
        fprintf(r->md, "| %s %s | %lld | %s | %s |\n", list[3] == 's' ? "size" : "horizon",
                jstr(e, key), jint(e, "jobs", 0),
                acc_pair(json_object_get(e, "submit"), a, sizeof a),
                acc_pair(json_object_get(e, "limit"), b, sizeof b));
    }
}

static void sec_accuracy(rep_t *r)
{
    fprintf(r->md, "## Start-estimate accuracy\n\n");
    if (!r->accuracy) {
        fprintf(r->md, "Not available: GET /v1/estimates/accuracy answered %s.\n\n",
                r->accuracy_status ? (r->accuracy_status == 404 ? "404 (not built)" : "an error")
                                   : "nothing");
        return;
    }
    char a[48], b[48];
    fprintf(r->md,
            "Absolute error of the start estimate, median / p90 in seconds: made at submission\n"
            "(submit) and the time-limit-based one (limit).\n\n"
            "| jobs of | jobs | submit | limit |\n|---|---|---|---|\n| all | %lld | %s | %s |\n",
            jint(r->accuracy, "jobs", 0),
            acc_pair(json_object_get(r->accuracy, "submit"), a, sizeof a),
            acc_pair(json_object_get(r->accuracy, "limit"), b, sizeof b));
    acc_rows(r, "by_size", "class");
    acc_rows(r, "by_horizon", "horizon");
    fprintf(r->md, "\n");
}

/* ------------------------------------------------------------- plots -- */

/* The gnuplot script of the plots whose data is there (has_*). */
static char *plot_script(rep_t *r, bool has_jain, bool has_users)
{
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    if (!f)
        abort();
    const char *tfmt = r->bucket >= 86400 ? "%m-%d" : r->period > 86400 ? "%m-%d\\n%H:%M" : "%H:%M";
    fprintf(f, "set terminal png size 900,480\nset grid\nset key outside bottom center horizontal\n"
               "set style fill solid 0.8 border -1\n");
    fprintf(f, "set output 'wait_by_size.png'\nset title 'Wait by job size (s)'\n"
               "set style data histograms\nset style histogram clustered gap 1\n"
               "set xlabel 'GPUs'\nset yrange [0:*]\n"
               "plot 'wait.dat' using 2:xtic(1) title 'median', '' using 3 title 'p90'\n");
    fprintf(f,
            "set style data linespoints\nset xlabel 'UTC'\nset xdata time\nset timefmt '%%s'\n"
            "set format x \"%s\"\nset xrange ['%lld':'%lld']\n",
            tfmt, r->from, r->to);
    fprintf(f, "set output 'utilization.png'\nset title 'GPU utilization (%%)'\n"
               "set yrange [0:100]\nplot 'utilization.dat' using 1:2 title 'utilization' lw 2\n");
    if (has_jain)
        fprintf(f, "set output 'jain.png'\nset title \"Jain's fairness index among accounts\"\n"
                   "set yrange [0:1.05]\nplot 'jain.dat' using 1:2 title 'Jain' lw 2\n");
    if (has_users)
        fprintf(f, "set xdata\nset xrange [*:*]\nset xlabel ''\nset format x '%%g'\n"
                   "set output 'top_users.png'\n"
                   "set title 'Top users (GPU-hours)'\nset style data histograms\n"
                   "set yrange [0:*]\nset xtics rotate by -30\n"
                   "plot 'users.dat' using 2:xtic(1) title 'GPU-hours'\n");
    fclose(f);
    return s;
}

/* A memory stream for a data file. */
typedef struct {
    char *p;
    size_t n;
    FILE *f;
} mem_t;

static FILE *mem_open(mem_t *m)
{
    m->p = NULL;
    m->n = 0;
    m->f = open_memstream(&m->p, &m->n);
    if (!m->f)
        abort();
    return m->f;
}

/* Writes the data files and the script into dir, runs gnuplot, and says what came of it
 * in the report. */
static void make_plots(rep_t *r, const char *dir, mem_t *d, int nd)
{
    static const char *const names[] = {"wait.dat", "jain.dat", "utilization.dat", "users.dat"};
    bool has_jain = d[1].n > 0, has_users = d[3].n > 0;
    int rc = 0;
    for (int i = 0; i < nd && !rc; i++)
        rc = fg_rep_write(dir, names[i], d[i].p ? d[i].p : "", d[i].n);
    char *script = plot_script(r, has_jain, has_users);
    if (!rc)
        rc = fg_rep_write(dir, "plots.gp", script, strlen(script));
    free(script);
    char msg[256] = "could not write the plot data";
    if (!rc)
        rc = fg_rep_gnuplot(dir, "plots.gp", 60, msg, sizeof msg);
    fprintf(r->md, "## Plots\n\n");
    if (rc) {
        fprintf(r->md, "No plots: %s.\n", msg);
        fprintf(stderr, "fairgpu report: no plots: %s\n", msg);
        return;
    }
    fprintf(r->md, "![Wait by job size](wait_by_size.png)\n\n![Utilization](utilization.png)\n\n");
    if (has_jain)
        fprintf(r->md, "![Jain's index](jain.png)\n\n");
    if (has_users)
        fprintf(r->md, "![Top users](top_users.png)\n\n");
}

/* --------------------------------------------------------------- command -- */

static int check_admin(rep_t *r)
{
    json_t *me;
    if (cli_call(&r->x, "GET", "/v1/me", NULL, NULL, &me))
        return 1;
    int ok = !strcmp(jstr(me, "role"), "admin");
    if (!ok)
        fprintf(stderr,
                "fairgpu report: only an admin may make the cluster report (it reads every "
                "user's jobs and usage); '%s' is not one\n",
                jstr(me, "username"));
    json_decref(me);
    return ok ? 0 : 1;
}

static void rep_free(rep_t *r)
{
    for (int b = 0; b < r->nb; b++) {
        tally_free(&r->use[b]);
        tally_free(&r->active[b]);
    }
    free(r->use);
    free(r->active);
    free(r->used);
    free(r->jain);
    tally_free(&r->users);
    tally_free(&r->total);
    json_decref(r->jobs);
    json_decref(r->fs);
    json_decref(r->accuracy);
}

/* Writes the report's Markdown into r->md (and the plots into dir when not NULL). */
static void write_report(rep_t *r, const char *dir)
{
    char f[32], t[32];
    fprintf(r->md,
            "# fairgpu cluster report\n\n"
            "<!-- fairgpu-report from=%lld to=%lld bucket=%lld gpus_up=%lld -->\n\n"
            "Period: %s to %s (%lld h), buckets of %lld min; %s; %lld GPUs up now; %zu "
            "jobs in the period or live.\n\n",
            r->from, r->to, r->bucket, r->gpus_up, fg_rep_rfc3339(r->from, f, sizeof f),
            fg_rep_rfc3339(r->to, t, sizeof t), r->period / 3600, r->bucket / 60, r->x.c.url,
            r->gpus_up, json_array_size(r->jobs));
    mem_t d[4];
    for (int i = 0; i < 4; i++)
        mem_open(&d[i]);
    waits_t w;
    waits_of(r, &w);
    sec_wait(r, &w, d[0].f);
    for (int c = 0; c < FG_REP_SIZES; c++)
        free(w.w[c]);
    sec_fairness(r, d[1].f);
    sec_utilization(r, d[2].f);
    sec_idle(r);
    sec_users(r, d[3].f);
    sec_accuracy(r);
    for (int i = 0; i < 4; i++)
        fclose(d[i].f);
    if (dir)
        make_plots(r, dir, d, 4);
    for (int i = 0; i < 4; i++)
        free(d[i].p);
}

static int run_report(rep_t *r, const char *dir)
{
    int rc = check_admin(r);
    if (!rc)
        rc = gather(r);
    if (rc)
        return rc;
    char *md = NULL;
    size_t n = 0;
    r->md = open_memstream(&md, &n);
    if (!r->md)
        abort();
    write_report(r, dir);
    fclose(r->md);
    fwrite(md, 1, n, stdout);
    if (dir && fg_rep_write(dir, "report.md", md, n))
        rc = 1;
    free(md);
    return rc;
}

int cli_cmd_report(int argc, char **argv)
{
    static const struct option lo[] = {{"period", required_argument, 0, 'p'},
                                       {"out", required_argument, 0, 'o'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    const char *period = "7d", *dir = NULL;
    int c;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        if (c == 'h') {
            fputs(REPORT_HELP, stdout);
            return 0;
        } else if (c == 'p') {
            period = optarg;
        } else if (c == 'o') {
            dir = optarg;
        } else {
            return cli_usage("report", "bad option");
        }
    }
    if (optind < argc)
        return cli_usage("report", "no operands expected ('%s')", argv[optind]);
    rep_t r = {0};
    char err[160];
    if (fg_rep_parse_period(period, &r.period, err, sizeof err))
        return cli_usage("report", "--period: %s", err);
    if (dir && !*dir)
        return cli_usage("report", "--out needs a directory");
    if (dir && fg_rep_mkdir(dir))
        return 1;
    r.to = (long long)time(NULL);
    r.from = r.to - r.period;
    r.bucket = fg_rep_bucket_s(r.period);
    r.nb = (int)((r.period + r.bucket - 1) / r.bucket);
    r.use = calloc((size_t)r.nb, sizeof *r.use);
    r.active = calloc((size_t)r.nb, sizeof *r.active);
    r.used = calloc((size_t)r.nb, sizeof *r.used);
    r.jain = calloc((size_t)r.nb, sizeof *r.jain);
    if (!r.use || !r.active || !r.used || !r.jain)
        abort();
    int rc = cli_open(&r.x, 1);
    if (rc) {
        rep_free(&r);
        return rc;
    }
    rc = run_report(&r, dir);
    cli_close(&r.x);
    rep_free(&r);
    return rc;
}
