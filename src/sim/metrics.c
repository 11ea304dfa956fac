/*
 * metrics.c - METRICS.md's figures from per-job records, and their output.
 */
#include "sim/metrics.h"

#include "common/xalloc.h"
#include "sim/fair.h"
#include "sim/tlimit.h"

#include <assert.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const fg_size_class_names[FG_SIZE_CLASSES] = {"1", "2-4", "8", ">8"};

int fg_size_class(int32_t g)
{
    if (g <= 1)
        return 0;
    if (g <= 4)
        return 1;
    if (g <= 8)
        return 2;
    return 3;
}

/* nearest rank: the smallest value with at least p% of the values <= it; 1..n */
static size_t pct_rank(size_t n, int p)
{
    size_t rank = ((size_t)p * n + 99) / 100;
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return rank;
}

int64_t fg_percentile(const int64_t *v, size_t n, int p)
{
    if (n == 0)
        return 0;
    return v[pct_rank(n, p) - 1];
}

#define SIGN ((uint64_t)1 << 63)

/* The percentiles p[0..np) of v[0..n), each the value fg_percentile would read in v
 * sorted ascending, without sorting: MSD radix selection on the bytes of the value with
 * its sign bit flipped (so unsigned order is signed order). Only the bytes that are not
 * the same in every value are looked at (the high bytes of times in seconds mostly
 * are), from the highest: the values are counted per byte value, and those in the
 * bucket that holds the rank are kept (in tmp, room for n), the rank made relative to
 * the bucket; once every such byte is decided, the values left are all equal, the one
 * at the rank. The counts of the first byte serve every percentile. */
static void percentiles(const int64_t *v, size_t n, const int *p, int np, int64_t *out,
                        int64_t *tmp)
{
    if (n == 0) {
        for (int q = 0; q < np; q++)
            out[q] = 0;
        return;
    }
    const uint64_t x0 = (uint64_t)v[0];
    uint64_t diff = 0; /* the bits that differ from v[0] in some value */
    for (size_t i = 1; i < n; i++)
        diff |= (uint64_t)v[i] ^ x0;
    int top = 7;
    while (top >= 0 && !((diff >> (8 * top)) & 0xff))
        top--;
    if (top < 0) { /* all equal */
        for (int q = 0; q < np; q++)
            out[q] = v[0];
        return;
    }
    size_t cnt0[256] = {0};
    for (size_t i = 0; i < n; i++)
        cnt0[(((uint64_t)v[i] ^ SIGN) >> (8 * top)) & 0xff]++;
    for (int q = 0; q < np; q++) {
        size_t r = pct_rank(n, p[q]) - 1;
        const size_t *cnt = cnt0;
        size_t cnt_b[256];
        const int64_t *src = v;
        size_t m = n;
        for (int b = top; b >= 0; b--) {
            const int sh = 8 * b;
            if (!((diff >> sh) & 0xff))
                continue;
            if (b != top) {
                memset(cnt_b, 0, sizeof cnt_b);
                for (size_t i = 0; i < m; i++)
                    cnt_b[(((uint64_t)src[i] ^ SIGN) >> sh) & 0xff]++;
                cnt = cnt_b;
            }
            uint64_t d = 0;
            while (r >= cnt[d]) {
                r -= cnt[d];
                d++;
            }
            size_t k = 0; /* (in place from the second byte on: k <= i) */
            for (size_t i = 0; i < m; i++)
                if (((((uint64_t)src[i] ^ SIGN) >> sh) & 0xff) == d)
                    tmp[k++] = src[i];
            src = tmp;
            m = k;
        }
        out[q] = src[0];
    }
}

void fg_metrics_compute(const fg_jobrec_t *recs, size_t n, int64_t gpus, int32_t ntenants,
                        const double *entitled, const double *received, fg_sim_result_t *r)
{
    /* The jobs counted (m), by size class: their waits and estimate errors are kept by
     * class, each class one run of the same array, so that the whole array holds them
     * all (percentiles do not depend on the order). One scratch block for every array:
     * a replay's figures touch no more fresh memory than they need (xalloc.h). */
    size_t m = 0, ncls[FG_SIZE_CLASSES] = {0}, necls[FG_SIZE_CLASSES] = {0};
    for (size_t i = 0; i < n; i++) {
        if (!recs[i].ends)
            continue;
        int c = fg_size_class(recs[i].gpus);
        m++;
        ncls[c]++;
        necls[c] += recs[i].estimate >= 0;
    }
    r->gpus = gpus;
    r->jobs = (int64_t)m;
    const size_t w = m ? m : 1;
    int64_t *scratch = fg_xcalloc_big(4 * w, sizeof *scratch);
    int64_t *jct = scratch, *wait = scratch + w, *eall = scratch + 2 * w, *tmp = scratch + 3 * w;
    int64_t *cls[FG_SIZE_CLASSES], *ecls[FG_SIZE_CLASSES];
    size_t at = 0, neall = 0;
    for (int c = 0; c < FG_SIZE_CLASSES; c++) {
        cls[c] = wait + at;
        ecls[c] = eall + neall;
        at += ncls[c];
        neall += necls[c];
        ncls[c] = necls[c] = 0; /* (counted again as they are filled) */
    }
    int64_t smin = INT64_MAX, emax = INT64_MIN;
    double jct_sum = 0, wait_sum = 0, rho_sum = 0, rho_max = 0;
    int64_t gpu_s = 0, over24 = 0, wmax = 0;
    for (size_t i = 0, k = 0; i < n; i++) {
        const fg_jobrec_t *j = &recs[i];
        if (!j->ends)
            continue;
        if (j->submit < smin)
            smin = j->submit;
        if (j->end > emax)
            emax = j->end;
        const int64_t jk = jct[k++] = j->end - j->submit, wk = j->start - j->submit;
        jct_sum += (double)jk;
        wait_sum += (double)wk;
        if (wk > wmax)
            wmax = wk;
        if (wk > 86400)
            over24++;
        int c = fg_size_class(j->gpus);
        cls[c][ncls[c]++] = wk;
        if (j->estimate >= 0) {
            int64_t e = j->start - j->estimate;
            ecls[c][necls[c]++] = e < 0 ? -e : e;
        }
        gpu_s += j->gpu_seconds;
        double nj = j->n_avg > 0 ? j->n_avg : 1.0;
        double scale = (double)j->gpus * nj / (double)gpus;
        double alone = (double)j->duration * (scale > 1.0 ? scale : 1.0);
        double rho = (double)jk / alone;
        rho_sum += rho;
        if (rho > rho_max)
            rho_max = rho;
    }
    r->makespan_s = m ? emax - smin : 0;
    r->gpu_seconds = gpu_s;
    r->utilization =
        (m && r->makespan_s > 0) ? (double)gpu_s / ((double)gpus * (double)r->makespan_s) : 0.0;
    int64_t out[3];
    percentiles(jct, m, (const int[]){50, 95, 99}, 3, out, tmp);
    r->jct_avg_s = m ? jct_sum / (double)m : 0;
    r->jct_p50_s = out[0];
    r->jct_p95_s = out[1];
    r->jct_p99_s = out[2];
    percentiles(wait, m, (const int[]){50}, 1, out, tmp);
    r->wait_avg_s = m ? wait_sum / (double)m : 0;
    r->wait_p50_s = out[0];
    r->wait_max_s = wmax;
    r->waits_over_24h = over24;
    for (int c = 0; c < FG_SIZE_CLASSES; c++) {
        percentiles(cls[c], ncls[c], (const int[]){50}, 1, out, tmp);
        r->has_size[c] = ncls[c] > 0;
        r->wait_p50_by_size[c] = out[0];
        percentiles(ecls[c], necls[c], (const int[]){50, 90}, 2, out, tmp);
        r->has_est[c] = necls[c] > 0;
        r->est_err_p50_by_size[c] = out[0];
        r->est_err_p90_by_size[c] = out[1];
    }
    percentiles(eall, neall, (const int[]){50, 90}, 2, out, tmp);
    r->estimate_jobs = (int64_t)neall;
    r->est_err_p50_s = out[0];
    r->est_err_p90_s = out[1];
    fg_xfree_big(scratch, 4 * w, sizeof *scratch);
    r->ftf_rho_avg = m ? rho_sum / (double)m : 0;
    r->ftf_rho_max = rho_max;
    r->jain = fg_fair_jain(ntenants, entitled, received);
}

double fg_preempt_cost_frac(int64_t lost_gpu_seconds, int64_t restart_gpu_seconds,
                            int64_t gpu_seconds)
{
    assert(lost_gpu_seconds >= 0 && restart_gpu_seconds >= 0);
    assert(gpu_seconds <= 0 || lost_gpu_seconds + restart_gpu_seconds <= gpu_seconds);
    if (gpu_seconds <= 0)
        return 0.0;
    return (double)(lost_gpu_seconds + restart_gpu_seconds) / (double)gpu_seconds;
}

/* ------------------------------------------------------------------ output */

/* A real rounded to `decimals` places, so the printed form is short and stable. */
static json_t *real(double x, int decimals)
{
    double m = pow(10.0, decimals);
    return json_real(round(x * m) / m);
}

char *fg_sim_result_json(const fg_sim_result_t *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "policy", json_string(r->policy));
    json_object_set_new(o, "trace", json_string(r->trace ? r->trace : ""));
    json_object_set_new(o, "nodes", json_integer(r->nodes));
    json_object_set_new(o, "gpus_per_node",
                        r->gpus_per_node ? json_integer(r->gpus_per_node) : json_null());
    json_object_set_new(o, "gpus", json_integer(r->gpus));
    json_object_set_new(o, "jobs", json_integer(r->jobs));
    json_object_set_new(o, "rounded_up", json_integer(r->rounded_up));
    json_object_set_new(o, "skipped_bad", json_integer(r->skipped_bad));
    json_object_set_new(o, "skipped_too_big", json_integer(r->skipped_too_big));
    json_object_set_new(o, "makespan_s", json_integer(r->makespan_s));
    json_object_set_new(o, "utilization", real(r->utilization, 4));
    json_object_set_new(o, "jct_avg_s", real(r->jct_avg_s, 1));
    json_object_set_new(o, "jct_p50_s", json_integer(r->jct_p50_s));
    json_object_set_new(o, "jct_p95_s", json_integer(r->jct_p95_s));
    json_object_set_new(o, "jct_p99_s", json_integer(r->jct_p99_s));
    json_object_set_new(o, "wait_avg_s", real(r->wait_avg_s, 1));
    json_object_set_new(o, "wait_p50_s", json_integer(r->wait_p50_s));
    json_t *by = json_object();
    for (int c = 0; c < FG_SIZE_CLASSES; c++)
        json_object_set_new(by, fg_size_class_names[c],
                            r->has_size[c] ? json_integer(r->wait_p50_by_size[c]) : json_null());
    json_object_set_new(o, "wait_p50_by_size", by);
    json_object_set_new(o, "wait_max_s", json_integer(r->wait_max_s));
    json_object_set_new(o, "preemptions", json_integer(r->preemptions));
    json_object_set_new(o, "lost_gpu_seconds", json_integer(r->lost_gpu_seconds));
    json_object_set_new(o, "restart_gpu_seconds", json_integer(r->restart_gpu_seconds));
    json_object_set_new(o, "preempt_cost_frac", real(r->preempt_cost_frac, 6));
    json_object_set_new(o, "gpu_seconds", json_integer(r->gpu_seconds));
    json_object_set_new(o, "jain", real(r->jain, 4));
    json_object_set_new(o, "ftf_rho_avg", real(r->ftf_rho_avg, 3));
    json_object_set_new(o, "ftf_rho_max", real(r->ftf_rho_max, 3));
    json_object_set_new(o, "waits_over_24h", json_integer(r->waits_over_24h));
    json_object_set_new(o, "estimate_jobs", json_integer(r->estimate_jobs));
    json_t *e50 = json_object(), *e90 = json_object();
    for (int c = 0; c < FG_SIZE_CLASSES; c++) {
        json_object_set_new(e50, fg_size_class_names[c],
                            r->has_est[c] ? json_integer(r->est_err_p50_by_size[c]) : json_null());
        json_object_set_new(e90, fg_size_class_names[c],
                            r->has_est[c] ? json_integer(r->est_err_p90_by_size[c]) : json_null());
    }
    json_object_set_new(o, "est_err_p50_by_size", e50);
    json_object_set_new(o, "est_err_p90_by_size", e90);
    json_object_set_new(o, "half_life_s", json_integer(r->half_life_s));
    json_object_set_new(o, "backfill", json_boolean(r->backfill));
    json_object_set_new(o, "backfill_depth", json_integer(r->backfill_depth));
    json_object_set_new(o, "reserve_depth", json_integer(r->reserve_depth));
    json_object_set_new(o, "preemption", json_boolean(r->preemption));
    json_object_set_new(o, "quantum_s", json_integer(r->quantum_s));
    json_object_set_new(o, "preempt_wait_s", json_integer(r->preempt_wait_s));
    json_object_set_new(o, "min_run_s", json_integer(r->min_run_s));
    json_t *th = json_array();
    for (int32_t i = 0; i + 1 < r->las_levels; i++)
        json_array_append_new(th, json_integer(r->las_thresholds_gpu_s[i]));
    json_object_set_new(o, "las_thresholds_gpu_s", th);
    json_object_set_new(o, "checkpoint_interval_s", json_integer(r->checkpoint_interval_s));
    json_object_set_new(o, "restart_overhead_s", json_integer(r->restart_overhead_s));
    json_object_set_new(o, "time_limit_factor", real(r->time_limit_factor, 3));
    json_object_set_new(o, "passes", json_integer(r->passes));
    if (r->time_limit_model != FG_TLIMIT_FACTOR) /* the default's output stays as it was */
        json_object_set_new(o, "time_limit_model",
                            json_string(fg_tlimit_name((fg_tlimit_model_t)r->time_limit_model)));
    if (r->has_estacc)
        json_object_set_new(o, "estimates", fg_estacc_json(&r->estacc));
    json_object_set_new(o, "replay_seconds", real(r->replay_seconds, 4));
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(15));
    json_decref(o);
    if (!s) {
        fprintf(stderr, "fairgpu sim: out of memory\n");
        abort();
    }
    return s;
}

static void cell_int(char *b, size_t n, int64_t v)
{
    snprintf(b, n, "%lld", (long long)v);
}

static void cell_real(char *b, size_t n, double v, int decimals)
{
    snprintf(b, n, "%.*f", decimals, v);
}

/* The rows of the table: a label and a function writing the cell of one result. */
#define NROWS 30

static void row_cell(int row, const fg_sim_result_t *r, char *b, size_t n)
{
    switch (row) {
    case 0:
        snprintf(b, n, "%s", r->policy);
        return;
    case 1:
        cell_int(b, n, r->jobs);
        return;
    case 2:
        cell_int(b, n, r->gpus);
        return;
    case 3:
        cell_int(b, n, r->makespan_s);
        return;
    case 4:
        cell_real(b, n, r->utilization, 4);
        return;
    case 5:
        cell_real(b, n, r->jct_avg_s, 0);
        return;
    case 6:
        cell_int(b, n, r->jct_p50_s);
        return;
    case 7:
        cell_int(b, n, r->jct_p95_s);
        return;
    case 8:
        cell_int(b, n, r->jct_p99_s);
        return;
    case 9:
        cell_real(b, n, r->wait_avg_s, 0);
        return;
    case 10:
        cell_int(b, n, r->wait_p50_s);
        return;
    case 11:
    case 12:
    case 13:
    case 14: {
        int c = row - 11;
        if (r->has_size[c])
            cell_int(b, n, r->wait_p50_by_size[c]);
        else
            snprintf(b, n, "-");
        return;
    }
    case 15:
        cell_int(b, n, r->wait_max_s);
        return;
    case 16:
        cell_int(b, n, r->waits_over_24h);
        return;
    case 17:
        cell_int(b, n, r->preemptions);
        return;
    case 18:
        cell_int(b, n, r->lost_gpu_seconds);
        return;
    case 19:
        cell_int(b, n, r->restart_gpu_seconds);
        return;
    case 20:
        cell_real(b, n, r->preempt_cost_frac, 4);
        return;
    case 21:
        cell_real(b, n, r->jain, 4);
        return;
    case 22:
        cell_real(b, n, r->ftf_rho_avg, 3);
        return;
    case 23:
        cell_real(b, n, r->ftf_rho_max, 3);
        return;
    case 24:
        cell_int(b, n, r->estimate_jobs);
        return;
    case 25:
        cell_int(b, n, r->est_err_p50_s);
        return;
    case 26:
        cell_int(b, n, r->est_err_p90_s);
        return;
    case 27:
        cell_int(b, n, r->rounded_up);
        return;
    case 28:
        cell_int(b, n, r->restart_overhead_s);
        return;
    case 29:
        cell_real(b, n, r->replay_seconds, 3);
        return;
    }
}

static const char *const row_names[NROWS] = {
    "policy",
    "jobs",
    "gpus",
    "makespan_s",
    "utilization",
    "jct_avg_s",
    "jct_p50_s",
    "jct_p95_s",
    "jct_p99_s",
    "wait_avg_s",
    "wait_p50_s",
    "wait_p50_s[1]",
    "wait_p50_s[2-4]",
    "wait_p50_s[8]",
    "wait_p50_s[>8]",
    "wait_max_s",
    "waits_over_24h",
    "preemptions",
    "lost_gpu_s",
    "restart_gpu_s",
    "preempt_cost_frac",
    "jain",
    "ftf_rho_avg",
    "ftf_rho_max",
    "estimated_jobs",
    "est_err_p50_s",
    "est_err_p90_s",
    "rounded_up",
    "restart_overhead_s",
    "replay_seconds",
};

void fg_sim_print_table(FILE *out, const fg_sim_result_t *results, size_t n, bool markdown)
{
    char cell[64];
    for (int row = 0; row < NROWS; row++) {
        if (markdown)
            fprintf(out, "| %s |", row_names[row]);
        else
            fprintf(out, "%-18s", row_names[row]);
        for (size_t i = 0; i < n; i++) {
            row_cell(row, &results[i], cell, sizeof cell);
            if (markdown)
                fprintf(out, " %s |", cell);
            else
                fprintf(out, " %14s", cell);
        }
        fputc('\n', out);
        if (markdown && row == 0) {
            fprintf(out, "|---|");
            for (size_t i = 0; i < n; i++)
                fprintf(out, "---:|");
            fputc('\n', out);
        }
    }
}
