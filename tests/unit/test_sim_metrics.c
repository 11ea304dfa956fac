/*
 * test_sim_metrics.c - METRICS.md's figures from synthetic per-job records (no
 * scheduler involved): water-filling, Jain, nearest-rank percentiles, size classes,
 * Themis rho, and the JSON keys.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sim/fair.h"
#include "sim/metrics.h"
#include "splitmix.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define assert_near(a, b) assert_true(fabs((double)(a) - (double)(b)) < 1e-9)

/* The worked example of fair.c: C=10, equal weights, demands 2, 5, 20 -> 2, 4, 4. */
static void test_waterfill_equal(void **state)
{
    (void)state;
    double w[3] = {1, 1, 1}, e[3];
    double d[3] = {2, 5, 20};
    int32_t order[3];
    fg_fair_water_fill(3, d, w, 10, e, order);
    assert_near(e[0], 2);
    assert_near(e[1], 4);
    assert_near(e[2], 4);
}

/* Weights 3:1 on 8 GPUs, both wanting everything: 6 and 2. A tenant without demand gets
 * nothing; total demand below capacity: each gets its demand. */
static void test_waterfill_weighted(void **state)
{
    (void)state;
    double w[3] = {3, 1, 5}, e[3];
    double d[3] = {100, 100, 0};
    int32_t order[3];
    fg_fair_water_fill(3, d, w, 8, e, order);
    assert_near(e[0], 6);
    assert_near(e[1], 2);
    assert_near(e[2], 0);
    double small[3] = {1, 2, 3};
    fg_fair_water_fill(3, small, w, 8, e, order);
    assert_near(e[0], 1);
    assert_near(e[1], 2);
    assert_near(e[2], 3);
    /* weight 3 wants 1: its slice 6 is more than enough; the rest (7) goes to the
     * weight-1 tenant up to its demand 100 */
    double d2[3] = {1, 100, 0};
    fg_fair_water_fill(3, d2, w, 8, e, order);
    assert_near(e[0], 1);
    assert_near(e[1], 7);
}

static void test_jain(void **state)
{
    (void)state;
    double ent[3] = {10, 10, 0}, rec[3] = {10, 10, 5};
    assert_near(fg_fair_jain(3, ent, rec), 1.0); /* the tenant without entitlement is out */
    double rec2[3] = {20, 0, 0};
    assert_near(fg_fair_jain(3, ent, rec2), 0.5); /* one of two got everything: 1/n */
    double rec3[3] = {5, 15, 0};                  /* x = 0.5, 1.5: 4 / (2 * 2.5) */
    assert_near(fg_fair_jain(3, ent, rec3), 0.8);
}

static void test_percentile(void **state)
{
    (void)state;
    int64_t v[4] = {0, 80, 90, 100};
    assert_int_equal(fg_percentile(v, 4, 50), 80);  /* rank ceil(2) = 2 */
    assert_int_equal(fg_percentile(v, 4, 95), 100); /* rank ceil(3.8) = 4 */
    assert_int_equal(fg_percentile(v, 4, 25), 0);   /* rank 1 */
    assert_int_equal(fg_percentile(v, 4, 26), 80);  /* rank ceil(1.04) = 2 */
    int64_t one[1] = {7};
    assert_int_equal(fg_percentile(one, 1, 99), 7);
    int64_t hundred[100];
    for (int i = 0; i < 100; i++)
        hundred[i] = i + 1;
    assert_int_equal(fg_percentile(hundred, 100, 99), 99);
    assert_int_equal(fg_percentile(hundred, 100, 50), 50);
}

static void test_size_class(void **state)
{
    (void)state;
    assert_int_equal(fg_size_class(1), 0);
    assert_int_equal(fg_size_class(2), 1);
    assert_int_equal(fg_size_class(4), 1);
    assert_int_equal(fg_size_class(5), 2);
    assert_int_equal(fg_size_class(8), 2);
    assert_int_equal(fg_size_class(16), 3);
}

/*
 * The hand-computed schedule (the same one test_sim.c replays through the core): one
 * node of 8 GPUs, fifo; tenants A (0) and B (1), weight 1.
 *   j1 A submit 0,  8 GPUs, 100 s: runs 0-100
 *   j2 B submit 10, 4 GPUs,  50 s: runs 100-150
 *   j3 A submit 20, 4 GPUs,  30 s: runs 100-130
 *   j4 B submit 30, 1 GPU,   10 s: runs 130-140
 * The tracker is fed the events by hand here.
 */
static void feed_example(fg_fair_t *f, fg_jobrec_t *r)
{
    int64_t nint[4][2];
    fg_fair_init(f, 2, NULL, 8, 0);
    /* t=0: j1 submitted and started */
    fg_fair_advance(f, 0);
    nint[0][0] = f->n_integral;
    fg_fair_demand(f, 0, 8);
    fg_fair_running(f, 0, 8);
    fg_fair_advance(f, 10);
    nint[1][0] = f->n_integral;
    fg_fair_demand(f, 1, 4);
    fg_fair_advance(f, 20);
    nint[2][0] = f->n_integral;
    fg_fair_demand(f, 0, 4);
    fg_fair_advance(f, 30);
    nint[3][0] = f->n_integral;
    fg_fair_demand(f, 1, 1);
    fg_fair_advance(f, 100); /* j1 ends; j2, j3 start */
    nint[0][1] = f->n_integral;
    fg_fair_demand(f, 0, -8);
    fg_fair_running(f, 0, -8);
    fg_fair_running(f, 1, 4);
    fg_fair_running(f, 0, 4);
    fg_fair_advance(f, 130); /* j3 ends, j4 starts */
    nint[2][1] = f->n_integral;
    fg_fair_demand(f, 0, -4);
    fg_fair_running(f, 0, -4);
    fg_fair_running(f, 1, 1);
    fg_fair_advance(f, 140); /* j4 ends */
    nint[3][1] = f->n_integral;
    fg_fair_demand(f, 1, -1);
    fg_fair_running(f, 1, -1);
    fg_fair_advance(f, 150); /* j2 ends */
    nint[1][1] = f->n_integral;
    fg_fair_demand(f, 1, -4);
    fg_fair_running(f, 1, -4);
    fg_fair_flush(f);
    static const int64_t sub[4] = {0, 10, 20, 30}, st[4] = {0, 100, 100, 130},
                         en[4] = {100, 150, 130, 140}, dur[4] = {100, 50, 30, 10};
    static const int32_t g[4] = {8, 4, 4, 1}, ten[4] = {0, 1, 0, 1};
    for (int i = 0; i < 4; i++) {
        r[i] = (fg_jobrec_t){.submit = sub[i],
                             .start = st[i],
                             .end = en[i],
                             .duration = dur[i],
                             .gpus = g[i],
                             .tenant = ten[i],
                             .gpu_seconds = g[i] * dur[i],
                             .n_avg = (double)(nint[i][1] - nint[i][0]) / (double)(en[i] - sub[i]),
                             .estimate = -1,
                             .attempts = 1,
                             .ends = 1};
    }
}

static void test_example_integrals(void **state)
{
    (void)state;
    fg_fair_t f;
    fg_jobrec_t r[4];
    feed_example(&f, r);
    /* entitled A: 8*10 + 4*10 + 4*10 + 4*70 + 4*30 = 560; B: 4*10 + 4*10 + 4*70 + 4*30 + 5*10 +
     * 4*10 = 570. received A: 8*100 + 4*30 = 920; B: 4*30 + 5*10 + 4*10 = 210. */
    assert_near(f.entitled[0], 560);
    assert_near(f.entitled[1], 570);
    assert_near(f.received[0], 920);
    assert_near(f.received[1], 210);
    /* tenants with demand: 1 on [0,10), 2 on [10,130), 1 on [130,150) */
    assert_int_equal(f.n_integral, 10 + 240 + 20);
    assert_near(r[0].n_avg, 1.9);
    assert_near(r[2].n_avg, 2.0);
    fg_fair_free(&f);
}

static void test_example_metrics(void **state)
{
    (void)state;
    fg_fair_t f;
    fg_jobrec_t r[4];
    feed_example(&f, r);
    fg_sim_result_t m;
    memset(&m, 0, sizeof m);
    fg_metrics_compute(r, 4, 8, 2, f.entitled, f.received, &m);
    assert_int_equal(m.jobs, 4);
    assert_int_equal(m.makespan_s, 150);
    assert_int_equal(m.gpu_seconds, 1130);
    assert_near(m.utilization, 1130.0 / 1200.0);
    assert_near(m.jct_avg_s, 115); /* (100 + 140 + 110 + 110) / 4 */
    assert_int_equal(m.jct_p50_s, 110);
    assert_int_equal(m.jct_p95_s, 140);
    assert_int_equal(m.jct_p99_s, 140);
    assert_near(m.wait_avg_s, 67.5); /* (0 + 90 + 80 + 100) / 4 */
    assert_int_equal(m.wait_p50_s, 80);
    assert_int_equal(m.wait_max_s, 100);
    assert_true(m.has_size[0] && m.has_size[1] && m.has_size[2] && !m.has_size[3]);
    assert_int_equal(m.wait_p50_by_size[0], 100);
    assert_int_equal(m.wait_p50_by_size[1], 80);
    assert_int_equal(m.wait_p50_by_size[2], 0);
    assert_int_equal(m.waits_over_24h, 0);
    double xa = 920.0 / 560.0, xb = 210.0 / 570.0;
    assert_near(m.jain, (xa + xb) * (xa + xb) / (2 * (xa * xa + xb * xb)));
    /* rho: j1 100/(100*1.9); j2 140/50; j3 110/30; j4 110/10 */
    double rho = (100.0 / 190.0 + 140.0 / 50.0 + 110.0 / 30.0 + 11.0) / 4;
    assert_near(m.ftf_rho_avg, rho);
    assert_near(m.ftf_rho_max, 11.0);
    fg_fair_free(&f);
}

/* The JSON object has every key the issue lists, integral where the metric is, and null
 * for an empty size class. */
static void test_json_keys(void **state)
{
    (void)state;
    fg_fair_t f;
    fg_jobrec_t r[4];
    feed_example(&f, r);
    fg_sim_result_t m;
    memset(&m, 0, sizeof m);
    snprintf(m.policy, sizeof m.policy, "fifo");
    m.trace = "x.csv";
    m.nodes = 1;
    m.gpus_per_node = 8;
    fg_metrics_compute(r, 4, 8, 2, f.entitled, f.received, &m);
    m.lost_gpu_seconds = 100;
    m.restart_gpu_seconds = 30;
    m.restart_overhead_s = 120;
    m.preempt_cost_frac = fg_preempt_cost_frac(100, 30, m.gpu_seconds);
    char *s = fg_sim_result_json(&m);
    json_error_t e;
    json_t *o = json_loads(s, 0, &e);
    assert_non_null(o);
    static const char *keys[] = {"policy",
                                 "trace",
                                 "nodes",
                                 "gpus_per_node",
                                 "jobs",
                                 "rounded_up",
                                 "makespan_s",
                                 "utilization",
                                 "jct_avg_s",
                                 "jct_p50_s",
                                 "jct_p95_s",
                                 "jct_p99_s",
                                 "wait_avg_s",
                                 "wait_p50_s",
                                 "wait_p50_by_size",
                                 "wait_max_s",
                                 "preemptions",
                                 "jain",
                                 "lost_gpu_seconds",
                                 "ftf_rho_avg",
                                 "ftf_rho_max",
                                 "waits_over_24h",
                                 "replay_seconds",
                                 "restart_gpu_seconds",
                                 "preempt_cost_frac",
                                 "restart_overhead_s"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!json_object_get(o, keys[i]))
            fail_msg("key %s missing in %s", keys[i], s);
    assert_true(json_is_integer(json_object_get(o, "makespan_s")));
    assert_true(json_is_integer(json_object_get(o, "jct_p50_s")));
    assert_true(json_is_integer(json_object_get(o, "waits_over_24h")));
    assert_string_equal(json_string_value(json_object_get(o, "policy")), "fifo");
    json_t *by = json_object_get(o, "wait_p50_by_size");
    assert_int_equal(json_integer_value(json_object_get(by, "1")), 100);
    assert_int_equal(json_integer_value(json_object_get(by, "2-4")), 80);
    assert_int_equal(json_integer_value(json_object_get(by, "8")), 0);
    assert_true(json_is_null(json_object_get(by, ">8")));
    /* 130 of the example's 1130 GPU-seconds, rounded to 6 places */
    assert_int_equal(json_integer_value(json_object_get(o, "restart_gpu_seconds")), 30);
    assert_int_equal(json_integer_value(json_object_get(o, "restart_overhead_s")), 120);
    assert_true(fabs(json_real_value(json_object_get(o, "preempt_cost_frac")) - 0.115044) < 1e-12);
    json_decref(o);
    free(s);
    fg_fair_free(&f);
}

/* preempt_cost_frac = (lost + restart) / GPU-seconds run; 0 when nothing ran. */
static void test_preempt_cost_frac(void **state)
{
    (void)state;
    assert_true(fg_preempt_cost_frac(0, 0, 0) == 0.0);
    assert_true(fg_preempt_cost_frac(0, 0, 1000) == 0.0);
    assert_true(fg_preempt_cost_frac(4800, 960, 85810) == 5760.0 / 85810.0);
    assert_true(fg_preempt_cost_frac(10, 0, 10) == 1.0);
}

/* The table has the cost rows next to lost_gpu_s, and the overhead echoed. */
static void test_table_rows(void **state)
{
    (void)state;
    fg_sim_result_t m;
    memset(&m, 0, sizeof m);
    snprintf(m.policy, sizeof m.policy, "wfq");
    m.lost_gpu_seconds = 4800;
    m.restart_gpu_seconds = 960;
    m.gpu_seconds = 85810;
    m.preempt_cost_frac = fg_preempt_cost_frac(4800, 960, 85810);
    m.restart_overhead_s = 120;
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    assert_non_null(fp);
    fg_sim_print_table(fp, &m, 1, true);
    fclose(fp);
    const char *lost = strstr(buf, "| lost_gpu_s | 4800 |\n");
    assert_non_null(lost);
    const char *next = strchr(lost, '\n') + 1;
    const char *want = "| restart_gpu_s | 960 |\n| preempt_cost_frac | 0.0671 |\n";
    assert_true(!strncmp(next, want, strlen(want)));
    assert_non_null(strstr(buf, "| restart_overhead_s | 120 |\n"));
    free(buf);
}

/* The share series samples R_u / C at the sampling times. */
static void test_samples(void **state)
{
    (void)state;
    fg_fair_t f;
    fg_fair_init(&f, 2, NULL, 8, 0);
    fg_fair_sample(&f, 10, 100);
    fg_fair_demand(&f, 0, 8);
    fg_fair_running(&f, 0, 8);
    fg_fair_advance(&f, 25); /* samples at 0, 10, 20 */
    fg_fair_running(&f, 0, -4);
    fg_fair_running(&f, 1, 2);
    fg_fair_demand(&f, 1, 2);
    fg_fair_advance(&f, 31); /* sample at 30 */
    assert_int_equal(f.nsamples, 4);
    assert_near(f.samples[0], 1.0);
    assert_near(f.samples[2 * 2], 1.0);
    assert_near(f.samples[3 * 2], 0.5);
    assert_near(f.samples[3 * 2 + 1], 0.25);
    fg_fair_free(&f);
}

/* The tracker keeps its tenants sorted between two water-fillings: random demand
 * changes (some tenants going to and from no demand, weights 1 and not), and after
 * each advance its entitlements are fg_fair_water_fill's, bit for bit. */
static void test_waterfill_kept(void **state)
{
    (void)state;
    uint64_t x = 42;
    for (int round = 0; round < 50; round++) {
        int32_t n = (int32_t)rnd(&x, 1, 40);
        double *w = malloc((size_t)n * sizeof *w), *e = malloc((size_t)n * sizeof *e);
        double *d = malloc((size_t)n * sizeof *d);
        int32_t *order = malloc((size_t)n * sizeof *order);
        for (int32_t u = 0; u < n; u++)
            w[u] = rnd(&x, 0, 2) ? 1.0 : (double)rnd(&x, 1, 7) / 3.0;
        fg_fair_t f;
        fg_fair_init(&f, n, w, (double)rnd(&x, 1, 500), 0);
        for (int64_t t = 1; t <= 200; t++) {
            for (int64_t c = rnd(&x, 0, 3); c > 0; c--) {
                int32_t u = (int32_t)rnd(&x, 0, n - 1);
                int64_t dg = rnd(&x, -8, 8);
                if (f.demand[u] + dg < 0)
                    dg = -f.demand[u];
                fg_fair_demand(&f, u, dg);
            }
            fg_fair_advance(&f, t);
            for (int32_t u = 0; u < n; u++)
                d[u] = (double)f.demand[u];
            fg_fair_water_fill((size_t)n, d, w, f.capacity, e, order);
            assert_memory_equal(e, f.ent, (size_t)n * sizeof *e);
        }
        fg_fair_free(&f);
        free(w);
        free(d);
        free(e);
        free(order);
    }
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The qsort reference of one nearest-rank percentile over the values kept in v[0..n) */
static int64_t ref_pct(int64_t *v, size_t n, int p)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, cmp_i64);
    return fg_percentile(v, n, p);
}

/* The percentiles of random records (spread over many magnitudes, so that most bytes of
 * the values differ) are those of a qsort: over all jobs, by size class, and of the
 * estimate errors. Records of jobs that did not end (ends == 0) are left out: put between
 * the others with wild values, they change nothing. */
static void test_percentiles_random(void **state)
{
    (void)state;
    uint64_t x = 7;
    for (int round = 0; round < 20; round++) {
        size_t n = (size_t)rnd(&x, 1, 3000), m = 0;
        fg_jobrec_t *r = calloc(n, sizeof *r);
        int64_t *jct = malloc(n * sizeof *jct), *wait = malloc(n * sizeof *wait);
        int64_t *cls[FG_SIZE_CLASSES], *ecls[FG_SIZE_CLASSES], *eall = malloc(n * sizeof *eall);
        size_t ncls[FG_SIZE_CLASSES] = {0}, necls[FG_SIZE_CLASSES] = {0}, neall = 0;
        for (int c = 0; c < FG_SIZE_CLASSES; c++) {
            cls[c] = malloc(n * sizeof *cls[c]);
            ecls[c] = malloc(n * sizeof *ecls[c]);
        }
        for (size_t i = 0; i < n; i++) {
            int sh = (int)rnd(&x, 0, round % 2 ? 8 : 40);
            r[i].submit = rnd(&x, 0, 1000);
            r[i].start = r[i].submit + (rnd(&x, 0, 1000) << sh);
            r[i].end = r[i].start + rnd(&x, 1, 1000);
            r[i].duration = r[i].end - r[i].start;
            r[i].gpus = (int32_t)rnd(&x, 1, 16);
            r[i].estimate = rnd(&x, 0, 2) ? r[i].submit + (rnd(&x, 0, 1000) << sh) : -1;
            r[i].ends = round % 3 == 0 || rnd(&x, 0, 3) ? 1 : 0;
            if (!r[i].ends) { /* (as if it never started: the values must not count) */
                r[i].start = r[i].end = -1;
                r[i].duration = INT64_MAX / 4;
                continue;
            }
            m++;
            jct[m - 1] = r[i].end - r[i].submit;
            wait[m - 1] = r[i].start - r[i].submit;
            int c = fg_size_class(r[i].gpus);
            cls[c][ncls[c]++] = wait[m - 1];
            if (r[i].estimate >= 0) {
                int64_t e = r[i].start - r[i].estimate;
                ecls[c][necls[c]++] = eall[neall++] = e < 0 ? -e : e;
            }
        }
        double ent = 1, rec = 1;
        fg_sim_result_t res;
        memset(&res, 0, sizeof res);
        fg_metrics_compute(r, n, 8, 1, &ent, &rec, &res);
        assert_int_equal(res.jobs, m);
        assert_int_equal(res.jct_p50_s, ref_pct(jct, m, 50));
        assert_int_equal(res.jct_p95_s, ref_pct(jct, m, 95));
        assert_int_equal(res.jct_p99_s, ref_pct(jct, m, 99));
        assert_int_equal(res.wait_p50_s, ref_pct(wait, m, 50));
        assert_int_equal(res.wait_max_s, m ? wait[m - 1] : 0);
        for (int c = 0; c < FG_SIZE_CLASSES; c++) {
            assert_int_equal(res.has_size[c], ncls[c] > 0);
            assert_int_equal(res.wait_p50_by_size[c], ref_pct(cls[c], ncls[c], 50));
            assert_int_equal(res.has_est[c], necls[c] > 0);
            assert_int_equal(res.est_err_p50_by_size[c], ref_pct(ecls[c], necls[c], 50));
            assert_int_equal(res.est_err_p90_by_size[c], ref_pct(ecls[c], necls[c], 90));
            free(cls[c]);
            free(ecls[c]);
        }
        assert_int_equal(res.estimate_jobs, neall);
        assert_int_equal(res.est_err_p50_s, ref_pct(eall, neall, 50));
        assert_int_equal(res.est_err_p90_s, ref_pct(eall, neall, 90));
        free(r);
        free(jct);
        free(wait);
        free(eall);
    }
}

/* The worked example's figures are the same with records of jobs that never ended (ends
 * == 0, with wild values) put before, between and after its four. */
static void test_example_not_ended(void **state)
{
    (void)state;
    fg_fair_t f;
    fg_jobrec_t ex[4], r[9];
    feed_example(&f, ex);
    const fg_jobrec_t junk = {.submit = -5000,
                              .start = -1,
                              .end = -1,
                              .duration = 1,
                              .gpus = 64,
                              .gpu_seconds = 1000000,
                              .n_avg = 1e9,
                              .estimate = 7,
                              .attempts = 3,
                              .ends = 0};
    for (int i = 0; i < 9; i++)
        r[i] = i % 2 ? ex[i / 2] : junk;
    fg_sim_result_t a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    fg_metrics_compute(ex, 4, 8, 2, f.entitled, f.received, &a);
    fg_metrics_compute(r, 9, 8, 2, f.entitled, f.received, &b);
    assert_int_equal(b.jobs, 4);
    assert_memory_equal(&a, &b, sizeof a);
    fg_fair_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_waterfill_equal),
        cmocka_unit_test(test_waterfill_weighted),
        cmocka_unit_test(test_waterfill_kept),
        cmocka_unit_test(test_percentiles_random),
        cmocka_unit_test(test_jain),
        cmocka_unit_test(test_percentile),
        cmocka_unit_test(test_size_class),
        cmocka_unit_test(test_example_integrals),
        cmocka_unit_test(test_example_metrics),
        cmocka_unit_test(test_example_not_ended),
        cmocka_unit_test(test_json_keys),
        cmocka_unit_test(test_preempt_cost_frac),
        cmocka_unit_test(test_table_rows),
        cmocka_unit_test(test_samples),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
