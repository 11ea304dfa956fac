/*
 * bench_invoice.c - an invoice over a month of 1,000,000 ledger rows, from the store.
 *
 * Builds a temporary SQLite store and appends one month (2026-12) of a cluster's ledger
 * in time order, as the controller would: ~200 users in 5 accounts (one big account of
 * most users and rows), 3 GPU types, attempts of 1-8 GPUs from 10 minutes to 2 days,
 * live accrual every 15 minutes (interim charge rows), then each attempt's final rows
 * (preemptions with checkpoints, node losses and cancels give refunds). Rows go in
 * group commits of BATCH rows. Then, median of 5, the invoice of the biggest account:
 * fg_store_ledger_foreach(account, month range) into an array, plus fg_bill_invoice.
 * Printed, one `name value unit` a line:
 *   ledger_rows                rows appended (1,000,000)
 *   ledger_append_rows_per_s   append rate, durable commits included
 *   invoice_rows               rows of the big account read for its invoice
 *   invoice_lines              its (user, GPU type) lines
 *   ledger_scan_s              the store read alone (median)
 *   invoice_compute_s          fg_bill_invoice alone (median)
 *   invoice_1m_rows_s          both (median of the sums); goal under 1 s
 *   invoice_1m_rows_cpu_s      the same in this thread's CPU time (not counting waits
 *                              for a core on a busy machine)
 *
 * Usage: bench_invoice [rows]   (default 1000000; the store lives under $TMPDIR and is
 *                               removed, kept with FG_BENCH_KEEP=1 for the sqlite3 shell)
 * Example: build/release/bench/bench_invoice 200000
 */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fairgpu/billing.h"
#include "store/store.h"

#define USERS     200
#define ACCOUNTS  5   /* acct0 is the big one */
#define BIG_USERS 160 /* users 0..159 are in acct0, the others 10 per small account */
#define TICK_MS   (15 * 60 * 1000LL)
#define BATCH     20000 /* rows per group commit */
#define REPS      5
#define MAX_LINES 4096
#define ATT_ROOM  200000

static const char *const gpu_types[3] = {"h100", "a100", "l40s"};
static const int64_t rates[3] = {2500000, 1500000, 800000}; /* micros per GPU-hour */

static uint64_t rng_next(uint64_t *x) /* splitmix64 */
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A uniform integer in [lo, hi]. */
static int64_t rnd(uint64_t *x, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rng_next(x) % (uint64_t)(hi - lo + 1));
}

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now_s(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

/* The price book: one flat rate per GPU type. */
static int price(void *ctx, const char *gpu_type, fg_prio_t prio, int64_t at_ms, int64_t *rate)
{
    (void)ctx, (void)prio, (void)at_ms;
    for (int i = 0; i < 3; i++)
        if (!strcmp(gpu_type, gpu_types[i])) {
            *rate = rates[i];
            return FG_OK;
        }
    return FG_ENOENT;
}

typedef struct att {
    fg_bill_attempt_t a;
    char account[16], user[16], node[16];
    int64_t charged_to;
    bool done;
} att_t;

static int cmp_start(const void *x, const void *y)
{
    const att_t *a = x, *b = y;
    return (a->a.start_ms > b->a.start_ms) - (a->a.start_ms < b->a.start_ms);
}

/* Random attempts starting in [m0, m1), sorted by start. */
static size_t make_attempts(att_t *att, size_t room, int64_t m0, int64_t m1, uint64_t *x)
{
    for (size_t i = 0; i < room; i++) {
        att_t *t = &att[i];
        memset(t, 0, sizeof *t);
        int u = (int)rnd(x, 0, USERS - 1);
        int acct = u < BIG_USERS ? 0 : 1 + (u - BIG_USERS) / 10;
        int g = (int)rnd(x, 0, 2);
        snprintf(t->account, sizeof t->account, "acct%d", acct);
        snprintf(t->user, sizeof t->user, "user%03d", u);
        snprintf(t->node, sizeof t->node, "node%03d", (int)rnd(x, 0, 249));
        static const int32_t gpus[4] = {1, 2, 4, 8};
        int64_t start = rnd(x, m0, m1 - 1);
        int64_t len = rnd(x, 10, 60) * 60000LL; /* mostly short, some long */
        if (rnd(x, 0, 3) == 0)
            len = rnd(x, 1, 48) * 3600000LL;
        int64_t c = rnd(x, 0, 99);
        fg_end_cause_t cause = c < 80   ? FG_END_COMPLETED
                               : c < 90 ? FG_END_PREEMPTED
                               : c < 95 ? FG_END_NODE_LOST
                                        : FG_END_CANCELLED;
        t->a = (fg_bill_attempt_t){.job_id = (fg_job_id_t)i + 1,
                                   .attempt = 1,
                                   .account = t->account,
                                   .user = t->user,
                                   .node = t->node,
                                   .gpu_type = gpu_types[g],
                                   .priority = FG_PRIO_NORMAL,
                                   .gpus = gpus[rnd(x, 0, 3)],
                                   .start_ms = start,
                                   .end_ms = start + len,
                                   .cause = cause,
                                   .checkpoint_interval_ms = 30 * 60000LL};
        t->charged_to = start;
    }
    qsort(att, room, sizeof *att, cmp_start);
    return room;
}

typedef struct batch {
    fg_ledger_row_t *rows;
    size_t n;
} batch_t;

static int unit_append(fg_store_tx_t *tx, void *arg)
{
    const batch_t *b = arg;
    for (size_t i = 0; i < b->n; i++) {
        int rc = fg_store_ledger_append(tx, &b->rows[i]);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Appends the buffered rows in one durable commit; adds its time to *append_s. */
static void flush(fg_store_t *st, batch_t *b, double *append_s)
{
    if (b->n == 0)
        return;
    double t0 = now_s();
    int rc = fg_store_write(st, unit_append, b);
    *append_s += now_s() - t0;
    if (rc != 0) {
        fprintf(stderr, "bench_invoice: append: %s\n", fg_store_strerror(rc));
        exit(1);
    }
    b->n = 0;
}

/* Walks time in ticks: running attempts accrue, ended ones get their final rows, until
 * `want` rows are in the store. Returns the number appended. */
static size_t fill_ledger(fg_store_t *st, att_t *att, size_t natt, int64_t m0, size_t want,
                          double *append_s)
{
    batch_t b = {.rows = calloc(BATCH + 64, sizeof(fg_ledger_row_t))};
    assert(b.rows);
    uint64_t next_id = 1;
    size_t total = 0, first_open = 0;
    for (int64_t t = m0 + TICK_MS; total < want && first_open < natt; t += TICK_MS) {
        for (size_t i = first_open; i < natt && att[i].a.start_ms < t && total < want; i++) {
            att_t *a = &att[i];
            if (a->done)
                continue;
            int n = 0;
            int rc;
            if (a->a.end_ms <= t) {
                if (a->a.cause == FG_END_PREEMPTED)
                    a->a.last_checkpoint_ms = a->a.start_ms + (a->a.end_ms - a->a.start_ms) / 2;
                rc = fg_bill_attempt_rows(&a->a, price, NULL, a->charged_to, &next_id, &b.rows[b.n],
                                          &n);
                a->done = true;
            } else {
                rc = fg_bill_accrue(&a->a, price, NULL, a->charged_to, t, &next_id, &b.rows[b.n],
                                    &n);
                a->charged_to = t;
            }
            assert(rc == FG_OK);
            (void)rc;
            b.n += (size_t)n;
            total += (size_t)n;
            if (b.n >= BATCH)
                flush(st, &b, append_s);
        }
        while (first_open < natt && att[first_open].done)
            first_open++;
    }
    flush(st, &b, append_s);
    free(b.rows);
    return total;
}

typedef struct rowbuf {
    fg_ledger_row_t *rows;
    size_t n, cap;
} rowbuf_t;

static int collect(const fg_ledger_row_t *r, void *arg)
{
    rowbuf_t *b = arg;
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 65536;
        b->rows = realloc(b->rows, b->cap * sizeof *b->rows);
        assert(b->rows);
    }
    b->rows[b->n++] = *r;
    return 0;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

int main(int argc, char **argv)
{
    size_t want = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 1000000;
    const char *tmp = getenv("TMPDIR");
    char dir[256], path[300];
    snprintf(dir, sizeof dir, "%s/fg_bench_invoice_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("bench_invoice: mkdtemp");
        return 1;
    }
    snprintf(path, sizeof path, "%s/fairgpu.db", dir);
    fg_store_t *st = NULL;
    char *err = NULL;
    if (fg_store_open_sqlite(path, NULL, &st, &err) != 0) {
        fprintf(stderr, "bench_invoice: %s\n", err ? err : "open failed");
        return 1;
    }
    int64_t m0 = fg_bill_month_start_ms(2026, 12), m1 = fg_bill_month_start_ms(2027, 1);
    uint64_t x = 20261202;
    att_t *att = calloc(ATT_ROOM, sizeof *att);
    assert(att);
    size_t natt = make_attempts(att, ATT_ROOM, m0, m1, &x);
    double append_s = 0;
    size_t rows = fill_ledger(st, att, natt, m0, want, &append_s);
    printf("ledger_rows %zu rows\n", rows);
    printf("ledger_append_rows_per_s %.0f rows/s\n", (double)rows / append_s);

    rowbuf_t buf = {0};
    static fg_invoice_line_t lines[MAX_LINES];
    double scan[REPS], calc[REPS], both[REPS], cpu[REPS];
    fg_invoice_t inv = {.lines = lines, .cap = MAX_LINES};
    for (int r = 0; r < REPS; r++) {
        buf.n = 0;
        double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID), t0 = now_s();
        fg_store_tx_t *tx = NULL;
        int rc = fg_store_read_begin(st, &tx);
        fg_store_ledger_filter_t f = {.account = "acct0", .from_ms = m0, .to_ms = m1};
        if (rc == 0)
            rc = fg_store_ledger_foreach(tx, &f, collect, &buf);
        fg_store_read_end(tx);
        double t1 = now_s();
        if (rc == 0)
            rc = fg_bill_invoice(buf.rows, buf.n, "acct0", 2026, 12, &inv);
        double t2 = now_s(), c2 = clock_s(CLOCK_THREAD_CPUTIME_ID);
        if (rc != 0) {
            fprintf(stderr, "bench_invoice: invoice: %d\n", rc);
            return 1;
        }
        scan[r] = t1 - t0;
        calc[r] = t2 - t1;
        both[r] = t2 - t0;
        cpu[r] = c2 - c0;
    }
    printf("invoice_rows %zu rows\n", buf.n);
    printf("invoice_lines %d lines\n", inv.n);
    printf("ledger_scan_s %.3f s\n", median(scan, REPS));
    printf("invoice_compute_s %.3f s\n", median(calc, REPS));
    printf("invoice_1m_rows_s %.3f s\n", median(both, REPS));
    printf("invoice_1m_rows_cpu_s %.3f s\n", median(cpu, REPS));

    free(buf.rows);
    free(att);
    fg_store_close(st);
    if (getenv("FG_BENCH_KEEP")) {
        fprintf(stderr, "kept %s\n", path);
        return 0;
    }
    const char *suffixes[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        char p[320];
        snprintf(p, sizeof p, "%s%s", path, suffixes[i]);
        unlink(p);
    }
    rmdir(dir);
    return 0;
}
