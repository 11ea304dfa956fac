/*
 * test_billing.c - the charging rules of include/fairgpu/billing.h, as specifications.
 *
 * Hand-computed cases first (one per rule of docs/billing.md, "What is charged"), then a
 * property test: thousands of random attempt histories (seeded splitmix64) with starts,
 * preemptions with checkpoints, node losses, cancels, every other end cause, price
 * changes, month boundaries (a leap February included), random accrual times and admin
 * credits. For each it checks:
 *   - every (job, attempt) has exactly one final charge row, and its charge rows (the
 *     interim accruals and the final one) add up to the single-row charge of the whole
 *     attempt, computed independently, whatever the accrual times;
 *   - refunds refer to the attempt's final row and never exceed the attempt's charge; a
 *     free cause nets 0, a preempted attempt nets the charge of the work it kept;
 *   - per account and month, the invoice total equals the sum of the rows' month parts,
 *     the lines add up to it, the months add up to the rows' amounts, and an attempt's
 *     parts in a month equal its curve clipped to the month (independent computation);
 *   - the invoice's held GPU-ms equal the sum of the month parts' held ms (charges less
 *     refunds past the end or not charged), and its lines' sum;
 *   - fg_bill_part_in over a partition of time adds up to each row, and its part in a
 *     range that cuts a row is the curve clipped to the range.
 * A failure prints its seed; FG_BILLING_SEED=<seed> replays it, FG_BILLING_SEQUENCES=<n>
 * changes the number of histories (default 3000).
 *
 * Example: test_preempted_refunds_the_work_since_the_last_checkpoint: 2 GPUs at
 * 3,600,000 micros/GPU-h from 10:00, preempted at 10:02:30, checkpoint at 10:01:30:
 * charged 300,000, refunded 120,000.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fairgpu/billing.h"
#include "splitmix.h"

#define T0   1796205600000LL /* 2026-12-02 10:00:00 UTC */
#define MIN  60000LL
#define HOUR 3600000LL

/* ---------------------------------------------------------------- a price book */

#define MAX_PRICES 64
typedef struct price {
    char gpu_type[16];
    fg_prio_t prio;
    int64_t effective_ms;
    int64_t rate;
} price_t;

typedef struct book {
    price_t p[MAX_PRICES];
    int n;
} book_t;

/* The rate of the latest entry effective at or before at_ms. */
static int book_lookup(void *ctx, const char *gpu_type, fg_prio_t prio, int64_t at_ms,
                       int64_t *rate)
{
    const book_t *b = ctx;
    int64_t best = -1;
    for (int i = 0; i < b->n; i++)
        if (!strcmp(b->p[i].gpu_type, gpu_type) && b->p[i].prio == prio &&
            b->p[i].effective_ms <= at_ms && b->p[i].effective_ms >= best) {
            best = b->p[i].effective_ms;
            *rate = b->p[i].rate;
        }
    return best < 0 ? FG_ENOENT : FG_OK;
}

static void book_add(book_t *b, const char *type, fg_prio_t prio, int64_t eff, int64_t rate)
{
    assert_true(b->n < MAX_PRICES);
    price_t *p = &b->p[b->n++];
    snprintf(p->gpu_type, sizeof p->gpu_type, "%s", type);
    p->prio = prio;
    p->effective_ms = eff;
    p->rate = rate;
}

/* An attempt of job 7 by u of account a on n1, h100, normal. */
static fg_bill_attempt_t attempt(int32_t gpus, int64_t start, int64_t end, fg_end_cause_t c)
{
    return (fg_bill_attempt_t){.job_id = 7,
                               .attempt = 1,
                               .account = "a",
                               .user = "u",
                               .node = "n1",
                               .gpu_type = "h100",
                               .priority = FG_PRIO_NORMAL,
                               .gpus = gpus,
                               .start_ms = start,
                               .end_ms = end,
                               .cause = c};
}

static book_t flat_book(int64_t rate)
{
    book_t b = {.n = 0};
    book_add(&b, "h100", FG_PRIO_NORMAL, 0, rate);
    return b;
}

/* The rows of an ended attempt with nothing accrued. */
static int final_rows(const fg_bill_attempt_t *a, book_t *b, fg_ledger_row_t *out)
{
    uint64_t id = 1;
    int n = -1;
    assert_int_equal(fg_bill_attempt_rows(a, book_lookup, b, a->start_ms, &id, out, &n), FG_OK);
    return n;
}

/* ---------------------------------------------------------------- hand-computed cases */

/* The rounding rule: half a micro rounds up, just under half rounds down, bounds hold. */
static void test_rounding_is_half_up_once_and_exact(void **state)
{
    int64_t c = -1;
    assert_int_equal(fg_bill_charge(43200000, 2500000, &c), FG_OK);
    assert_int_equal(c, 30000000); /* 8 GPUs x 90 min at 2.5 units/GPU-h */
    assert_int_equal(fg_bill_charge(1, 1800000, &c), FG_OK);
    assert_int_equal(c, 1); /* 0.5 -> 1 */
    assert_int_equal(fg_bill_charge(1, 1799999, &c), FG_OK);
    assert_int_equal(c, 0); /* 0.4999 -> 0 */
    assert_int_equal(fg_bill_charge(3, 1800000, &c), FG_OK);
    assert_int_equal(c, 2); /* 1.5 -> 2 */
    assert_int_equal(fg_bill_charge(0, FG_BILL_MAX_RATE, &c), FG_OK);
    assert_int_equal(c, 0);
    /* the largest charge: 1024 GPUs x 366 days x 10^12 = 8,994,816 x 10^12 micros */
    assert_int_equal(fg_bill_charge(FG_BILL_MAX_GPU_MS, FG_BILL_MAX_RATE, &c), FG_OK);
    assert_true(c == 8994816LL * 1000000000000LL);
    assert_int_equal(fg_bill_charge(FG_BILL_MAX_GPU_MS + 1, 1, &c), FG_EINVAL);
    assert_int_equal(fg_bill_charge(1, FG_BILL_MAX_RATE + 1, &c), FG_EINVAL);
    assert_int_equal(fg_bill_charge(-1, 1, &c), FG_EINVAL);
    assert_int_equal(fg_bill_charge(1, -1, &c), FG_EINVAL);
}

/* A completed attempt pays the GPU time it held, one final row with every field. */
static void test_completed_pays_the_time_held(void **state)
{
    book_t b = flat_book(2500000);
    fg_bill_attempt_t a = attempt(8, T0, T0 + 90 * MIN, FG_END_COMPLETED);
    fg_ledger_row_t r[FG_BILL_ATTEMPT_ROWS_MAX];
    assert_int_equal(final_rows(&a, &b, r), 1);
    assert_int_equal(r[0].kind, FG_ROW_CHARGE);
    assert_false(r[0].interim);
    assert_int_equal(r[0].id, 1);
    assert_int_equal(r[0].job_id, 7);
    assert_string_equal(r[0].account, "a");
    assert_string_equal(r[0].node, "n1");
    assert_string_equal(r[0].gpu_type, "h100");
    assert_int_equal(r[0].gpu_ms, 43200000);
    assert_int_equal(r[0].rate, 2500000);
    assert_int_equal(r[0].amount_micros, 30000000);
    assert_int_equal(r[0].refers_to, 0);
    assert_string_equal(r[0].note, "completed");
}

/* Cancelled, timed out and failed attempts pay what ran (not the time limit). */
static void test_cancel_and_timeout_pay_what_ran(void **state)
{
    book_t b = flat_book(3600000); /* 1 micro per GPU-ms */
    fg_end_cause_t causes[] = {FG_END_CANCELLED, FG_END_TIMEOUT, FG_END_FAILED};
    for (size_t i = 0; i < sizeof causes / sizeof *causes; i++) {
        fg_bill_attempt_t a = attempt(4, T0, T0 + 12345, causes[i]);
        fg_ledger_row_t r[FG_BILL_ATTEMPT_ROWS_MAX];
        assert_int_equal(final_rows(&a, &b, r), 1);
        assert_int_equal(r[0].amount_micros, 4 * 12345);
    }
}

/* node_lost, user_setup_failed, not_started: a charge and an equal refund referring to
 * it (net 0); an attempt that held nothing has one zero charge row and no refund. */
static void test_free_causes_are_refunded_in_full(void **state)
{
    book_t b = flat_book(3600000);
    fg_end_cause_t causes[] = {FG_END_NODE_LOST, FG_END_SETUP_FAILED, FG_END_NOT_STARTED};
    for (size_t i = 0; i < 3; i++) {
        fg_bill_attempt_t a = attempt(2, T0, T0 + 10 * MIN, causes[i]);
        fg_ledger_row_t r[FG_BILL_ATTEMPT_ROWS_MAX];
        assert_int_equal(final_rows(&a, &b, r), 2);
        assert_int_equal(r[0].amount_micros, 2 * 10 * MIN);
        assert_int_equal(r[1].kind, FG_ROW_REFUND);
        assert_int_equal(r[1].amount_micros, -2 * 10 * MIN);
        assert_int_equal(r[1].refers_to, r[0].id);
        assert_int_equal(r[1].gpu_ms, r[0].gpu_ms);
        assert_non_null(strstr(r[1].note, "not charged"));
        a.end_ms = a.start_ms;
        assert_int_equal(final_rows(&a, &b, r), 1);
        assert_int_equal(r[0].amount_micros, 0);
    }
}

/* Preempted: pays what ran; the work since the last checkpoint comes back as a refund
 * row. The checkpoint noticed wins over the declared interval; with neither, all of the
 * run is lost and refunded. */
static void test_preempted_refunds_the_work_since_the_last_checkpoint(void **state)
{
    book_t b = flat_book(3600000);
    fg_bill_attempt_t a = attempt(2, T0, T0 + 150000, FG_END_PREEMPTED);
    fg_ledger_row_t r[FG_BILL_ATTEMPT_ROWS_MAX];
    a.last_checkpoint_ms = T0 + 90000;
    a.checkpoint_interval_ms = MIN;
    assert_int_equal(final_rows(&a, &b, r), 2);
    assert_int_equal(r[0].amount_micros, 300000);
    assert_int_equal(r[1].kind, FG_ROW_REFUND);
    assert_int_equal(r[1].amount_micros, -120000);
    assert_int_equal(r[1].start_ms, T0 + 90000);
    assert_int_equal(r[1].refers_to, r[0].id);
    assert_non_null(strstr(r[1].note, "preempted"));
    a.last_checkpoint_ms = 0; /* the interval: checkpoints at 10:01, 10:02 */
    assert_int_equal(final_rows(&a, &b, r), 2);
    assert_int_equal(r[1].amount_micros, -60000);
    a.checkpoint_interval_ms = 0; /* no checkpoint at all */
    assert_int_equal(final_rows(&a, &b, r), 2);
    assert_int_equal(r[1].amount_micros, -300000);
    a.last_checkpoint_ms = a.end_ms; /* checkpointed as it stopped: nothing lost */
    assert_int_equal(final_rows(&a, &b, r), 1);
}

/* The rate is the one in force at the attempt's start; a later change does not apply. */
static void test_the_rate_is_the_one_at_the_start(void **state)
{
    book_t b = flat_book(1000000);
    book_add(&b, "h100", FG_PRIO_NORMAL, T0 + 30 * MIN, 9000000);
    fg_bill_attempt_t a = attempt(1, T0, T0 + HOUR, FG_END_COMPLETED);
    fg_ledger_row_t r[FG_BILL_ATTEMPT_ROWS_MAX];
    assert_int_equal(final_rows(&a, &b, r), 1);
    assert_int_equal(r[0].rate, 1000000);
    assert_int_equal(r[0].amount_micros, 1000000);
    a.start_ms = T0 + 30 * MIN;
    a.end_ms = a.start_ms + HOUR;
    assert_int_equal(final_rows(&a, &b, r), 1);
    assert_int_equal(r[0].amount_micros, 9000000);
    a.gpu_type = "a100"; /* no price: the error comes back, no row */
    uint64_t id = 1;
    int n = -1;
    assert_int_equal(fg_bill_attempt_rows(&a, book_lookup, &b, a.start_ms, &id, r, &n), FG_ENOENT);
    assert_int_equal(n, 0);
    assert_int_equal(id, 1);
}

/* Accruing on the cumulative curve: three 20-minute rows of 1 GPU at 1 micro/GPU-h are
 * 0, 1, 0 (each rounded alone they would be 0, 0, 0), the hour is 1. */
static void test_accruals_add_up_to_the_single_row_charge(void **state)
{
    book_t b = flat_book(1);
    fg_bill_attempt_t a = attempt(1, T0, T0 + HOUR, FG_END_COMPLETED);
    fg_ledger_row_t r[FG_BILL_ATTEMPT_ROWS_MAX];
    uint64_t id = 1;
    int n;
    int64_t sum = 0, to = T0;
    for (int k = 1; k <= 2; k++) {
        assert_int_equal(fg_bill_accrue(&a, book_lookup, &b, to, T0 + k * 20 * MIN, &id, r, &n),
                         FG_OK);
        assert_int_equal(n, 1);
        assert_true(r[0].interim);
        assert_int_equal(r[0].amount_micros, k == 1 ? 0 : 1);
        sum += r[0].amount_micros;
        to = r[0].end_ms;
    }
    assert_int_equal(fg_bill_accrue(&a, book_lookup, &b, to, to, &id, r, &n), FG_OK);
    assert_int_equal(n, 0); /* nothing new */
    assert_int_equal(fg_bill_attempt_rows(&a, book_lookup, &b, to, &id, r, &n), FG_OK);
    assert_int_equal(n, 1);
    assert_false(r[0].interim);
    assert_int_equal(r[0].start_ms, T0 + 40 * MIN);
    assert_int_equal(r[0].amount_micros, 0);
    assert_int_equal(r[0].id, 3);
    assert_int_equal(sum + r[0].amount_micros, 1);
    assert_int_equal(fg_bill_accrue(&a, book_lookup, &b, T0 - 1, T0 + 1, &id, r, &n), FG_EINVAL);
}

/* An accrual past the end the agent reports (its report came in late): the final charge
 * is empty and the excess comes back first; a free cause then refunds the rest. */
static void test_accruals_past_the_end_come_back(void **state)
{
    book_t b = flat_book(3600000);
    fg_bill_attempt_t a = attempt(1, T0, T0 + 50000, FG_END_COMPLETED);
    fg_ledger_row_t r[FG_BILL_ATTEMPT_ROWS_MAX];
    uint64_t id = 10;
    int n;
    assert_int_equal(fg_bill_accrue(&a, book_lookup, &b, T0, T0 + MIN, &id, r, &n), FG_OK);
    assert_int_equal(r[0].amount_micros, 60000);
    assert_int_equal(fg_bill_attempt_rows(&a, book_lookup, &b, T0 + MIN, &id, r, &n), FG_OK);
    assert_int_equal(n, 2);
    assert_int_equal(r[0].amount_micros, 0);
    assert_int_equal(r[0].id, 11);
    assert_int_equal(r[1].kind, FG_ROW_REFUND);
    assert_int_equal(r[1].amount_micros, -10000); /* 60,000 - 10,000 = the 50 s held */
    assert_int_equal(r[1].start_ms, T0 + 50000);
    assert_int_equal(r[1].refers_to, 11);
    a.cause = FG_END_NODE_LOST;
    assert_int_equal(fg_bill_attempt_rows(&a, book_lookup, &b, T0 + MIN, &id, r, &n), FG_OK);
    assert_int_equal(n, 3);
    assert_int_equal(r[1].amount_micros + r[2].amount_micros, -60000);
    assert_string_equal(r[2].note, "node_lost: not charged");
    assert_int_equal(id, 16);
}

/* Out-of-bounds inputs are refused with FG_EINVAL, no row made, no id used. */
static void test_bad_attempts_are_refused(void **state)
{
    book_t b = flat_book(1000);
    fg_ledger_row_t r[FG_BILL_ATTEMPT_ROWS_MAX];
    char longname[FG_NAME_MAX + 1];
    memset(longname, 'x', FG_NAME_MAX);
    longname[FG_NAME_MAX] = '\0';
    for (int k = 0; k < 7; k++) {
        fg_bill_attempt_t a = attempt(1, T0, T0 + MIN, FG_END_COMPLETED);
        switch (k) {
        case 0:
            a.gpus = 0;
            break;
        case 1:
            a.gpus = FG_BILL_MAX_GPUS + 1;
            break;
        case 2:
            a.end_ms = a.start_ms - 1;
            break;
        case 3:
            a.user = longname;
            break;
        case 4:
            a.end_ms = a.start_ms + FG_BILL_MAX_SPAN_MS + 1;
            break;
        case 5:
            a.cause = (fg_end_cause_t)(FG_END_CAUSE_MAX + 1);
            break;
        case 6:
            a.job_id = 0;
            break;
        }
        uint64_t id = 1;
        int n = -1;
        assert_int_equal(fg_bill_attempt_rows(&a, book_lookup, &b, a.start_ms, &id, r, &n),
                         FG_EINVAL);
        assert_int_equal(n, 0);
        assert_int_equal(id, 1);
    }
    fg_bill_attempt_t a = attempt(FG_BILL_MAX_GPUS, T0, T0 + FG_BILL_MAX_SPAN_MS, FG_END_TIMEOUT);
    b = flat_book(FG_BILL_MAX_RATE); /* the largest attempt of all is fine */
    uint64_t id = 1;
    int n;
    assert_int_equal(fg_bill_attempt_rows(&a, book_lookup, &b, a.start_ms, &id, r, &n), FG_OK);
    assert_true(r[0].amount_micros == 8994816LL * 1000000000000LL);
    fg_month_part_t p[16];
    int np = fg_bill_split_months(&r[0], p, 16);
    assert_true(np >= 13 && np <= 14);
    int64_t sum = 0;
    for (int i = 0; i < np; i++)
        sum += p[i].amount_micros;
    assert_true(sum == r[0].amount_micros);
}

/* UTC months: first instants and the month of an instant, leap years included. */
static void test_utc_months(void **state)
{
    assert_int_equal(fg_bill_month_start_ms(1970, 1), 0);
    assert_int_equal(fg_bill_month_start_ms(2026, 12), 1796083200000LL);
    assert_int_equal(fg_bill_month_start_ms(2027, 1), 1798761600000LL);
    assert_int_equal(fg_bill_month_start_ms(2028, 3) - fg_bill_month_start_ms(2028, 2),
                     29 * 86400000LL);
    int y, m;
    fg_bill_month_of(1796083200000LL - 1, &y, &m);
    assert_int_equal(y * 100 + m, 202611);
    fg_bill_month_of(1796083200000LL, &y, &m);
    assert_int_equal(y * 100 + m, 202612);
    fg_bill_month_of(1835481600000LL - 1, &y, &m);
    assert_int_equal(y * 100 + m, 202802);
}

/* A row across a month boundary splits exactly; parts follow the attempt's curve. */
static void test_month_split_is_exact(void **state)
{
    book_t b = flat_book(1000001);
    int64_t dec = fg_bill_month_start_ms(2026, 12);
    fg_bill_attempt_t a = attempt(1, dec - HOUR, dec + HOUR, FG_END_COMPLETED);
    fg_ledger_row_t r[FG_BILL_ATTEMPT_ROWS_MAX];
    assert_int_equal(final_rows(&a, &b, r), 1);
    assert_int_equal(r[0].amount_micros, 2000002);
    fg_month_part_t p[4];
    assert_int_equal(fg_bill_split_months(&r[0], p, 4), 2);
    assert_int_equal(p[0].year * 100 + p[0].month, 202611);
    assert_int_equal(p[0].amount_micros, 1000001);
    assert_int_equal(p[0].gpu_ms, HOUR);
    assert_int_equal(p[1].year * 100 + p[1].month, 202612);
    assert_int_equal(p[1].amount_micros, 1000001);
    /* 3 GPUs, 1 micro/GPU-h, 1 h in Nov then 20 min in Dec: 3 + 1 = round(4) */
    b = flat_book(1);
    a = attempt(3, dec - HOUR, dec + 20 * MIN, FG_END_COMPLETED);
    assert_int_equal(final_rows(&a, &b, r), 1);
    assert_int_equal(r[0].amount_micros, 4);
    assert_int_equal(fg_bill_split_months(&r[0], p, 4), 2);
    assert_int_equal(p[0].amount_micros + p[1].amount_micros, 4);
    assert_int_equal(fg_bill_split_months(&r[0], p, 1), 2); /* needs more room */
    r[0].amount_micros += 1;                                /* not a row of these rules */
    assert_int_equal(fg_bill_split_months(&r[0], p, 4), FG_EINVAL);
}

/* An invoice: lines per user and GPU type for one account and month, credits included. */
static void test_invoice_lines_and_total(void **state)
{
    book_t b = flat_book(3600000);
    book_add(&b, "a100", FG_PRIO_NORMAL, 0, 1800000);
    int64_t dec = fg_bill_month_start_ms(2026, 12);
    fg_ledger_row_t rows[16];
    size_t n = 0;
    uint64_t id = 1;
    int k;
    fg_bill_attempt_t a = attempt(1, dec - 1000, dec + 3000, FG_END_COMPLETED);
    assert_int_equal(fg_bill_attempt_rows(&a, book_lookup, &b, a.start_ms, &id, &rows[n], &k),
                     FG_OK);
    n += (size_t)k;
    a = attempt(2, dec + 5000, dec + 6000, FG_END_NODE_LOST);
    a.user = "v";
    assert_int_equal(fg_bill_attempt_rows(&a, book_lookup, &b, a.start_ms, &id, &rows[n], &k),
                     FG_OK);
    n += (size_t)k;
    a = attempt(1, dec + 1000, dec + 2000, FG_END_COMPLETED);
    a.gpu_type = "a100";
    assert_int_equal(fg_bill_attempt_rows(&a, book_lookup, &b, a.start_ms, &id, &rows[n], &k),
                     FG_OK);
    n += (size_t)k;
    a.account = "other";
    assert_int_equal(fg_bill_attempt_rows(&a, book_lookup, &b, a.start_ms, &id, &rows[n], &k),
                     FG_OK);
    n += (size_t)k;
    fg_ledger_row_t credit = {
        .id = id++, .kind = FG_ROW_CREDIT, .start_ms = dec + 10, .amount_micros = -250};
    snprintf(credit.account, sizeof credit.account, "a");
    snprintf(credit.user, sizeof credit.user, "u");
    snprintf(credit.note, sizeof credit.note, "goodwill");
    rows[n++] = credit;

    fg_invoice_line_t lines[8];
    fg_invoice_t inv = {.lines = lines, .cap = 8};
    assert_int_equal(fg_bill_invoice(rows, n, "a", 2026, 12, &inv), FG_OK);
    assert_int_equal(inv.n, 4); /* u/"" (credit), u/a100, u/h100, v/h100 */
    assert_string_equal(lines[0].user, "u");
    assert_string_equal(lines[0].gpu_type, "");
    assert_int_equal(lines[0].credit_micros, -250);
    assert_string_equal(lines[1].gpu_type, "a100");
    assert_int_equal(lines[1].total_micros, 500);
    assert_string_equal(lines[2].gpu_type, "h100");
    assert_int_equal(lines[2].charge_micros, 3000);
    assert_int_equal(lines[2].gpu_ms, 3000);
    assert_string_equal(lines[3].user, "v");
    assert_int_equal(lines[3].charge_micros, 2000);
    assert_int_equal(lines[3].refund_micros, -2000);
    assert_int_equal(lines[3].total_micros, 0);
    assert_int_equal(lines[3].gpu_ms, 0);
    assert_int_equal(lines[3].held_gpu_ms, 0); /* node lost: not held */
    assert_int_equal(lines[2].held_gpu_ms, 3000);
    assert_int_equal(lines[0].held_gpu_ms, 0);
    assert_int_equal(inv.total_micros, -250 + 500 + 3000);
    assert_int_equal(inv.held_gpu_ms, 3000 + 1000);
    assert_int_equal(fg_bill_invoice(rows, n, "a", 2026, 11, &inv), FG_OK);
    assert_int_equal(inv.n, 1);
    assert_int_equal(inv.total_micros, 1000);
    inv.cap = 2;
    assert_int_equal(fg_bill_invoice(rows, n, "a", 2026, 12, &inv), FG_ENOMEM);
    inv.cap = 8;
    assert_int_equal(fg_bill_invoice(rows, n, "a", 2026, 13, &inv), FG_EINVAL);
}

/* A row's part in any range: on its curve for charges and refunds, whole where it
 * starts for credits. */
static void test_part_in_follows_the_curve(void **state)
{
    book_t b = flat_book(1000001);
    int64_t dec = fg_bill_month_start_ms(2026, 12);
    fg_bill_attempt_t a = attempt(1, dec - HOUR, dec + HOUR, FG_END_COMPLETED);
    fg_ledger_row_t r[FG_BILL_ATTEMPT_ROWS_MAX];
    assert_int_equal(final_rows(&a, &b, r), 1);
    int64_t g = -1, m = -1;
    assert_int_equal(fg_bill_part_in(&r[0], dec - HOUR, dec, &g, &m), FG_OK);
    assert_int_equal(m, 1000001);
    assert_int_equal(g, HOUR);
    /* C(90 min) - C(30 min) = round(1,500,001.5) - round(500,000.5) = 1,500,002 - 500,001 */
    assert_int_equal(fg_bill_part_in(&r[0], dec - 30 * MIN, dec + 30 * MIN, &g, &m), FG_OK);
    assert_int_equal(m, 1000001);
    assert_int_equal(g, HOUR);
    assert_int_equal(fg_bill_part_in(&r[0], dec - 2 * HOUR, dec - HOUR, &g, &m), FG_OK);
    assert_int_equal(m, 0);
    assert_int_equal(g, 0);
    assert_int_equal(fg_bill_part_in(&r[0], 0, INT64_MAX, &g, &m), FG_OK);
    assert_int_equal(m, 2000002);
    assert_int_equal(g, 2 * HOUR);
    assert_int_equal(fg_bill_part_in(&r[0], dec, dec - 1, &g, &m), FG_EINVAL);
    assert_int_equal(fg_bill_part_in(NULL, 0, 1, &g, &m), FG_EINVAL);
    /* 3 GPUs at 1 micro/GPU-h, 1 h then 20 min: C = round(3 t/h): 3 + 1 = 4, and the
     * 10 minutes from 70 to 80 min cost round(4.0) - round(3.5) = 0 */
    b = flat_book(1);
    a = attempt(3, dec - HOUR, dec + 20 * MIN, FG_END_COMPLETED);
    assert_int_equal(final_rows(&a, &b, r), 1);
    assert_int_equal(fg_bill_part_in(&r[0], INT64_MIN, dec, &g, &m), FG_OK);
    assert_int_equal(m, 3);
    assert_int_equal(g, 3 * HOUR);
    assert_int_equal(fg_bill_part_in(&r[0], dec, INT64_MAX, &g, &m), FG_OK);
    assert_int_equal(m, 1);
    assert_int_equal(g, 60 * MIN);
    assert_int_equal(fg_bill_part_in(&r[0], dec + 10 * MIN, dec + 20 * MIN, &g, &m), FG_OK);
    assert_int_equal(m, 0);
    assert_int_equal(g, 30 * MIN);
    /* a refund has the row's sign: the last 30 s of 60 s of lost work, 2 GPUs at 1/ms */
    b = flat_book(3600000);
    a = attempt(2, T0, T0 + 150000, FG_END_PREEMPTED);
    a.last_checkpoint_ms = T0 + 90000;
    assert_int_equal(final_rows(&a, &b, r), 2);
    assert_int_equal(fg_bill_part_in(&r[1], T0 + 120000, INT64_MAX, &g, &m), FG_OK);
    assert_int_equal(m, -60000);
    assert_int_equal(g, 60000);
    r[1].amount_micros += 1; /* not a row of these rules */
    assert_int_equal(fg_bill_part_in(&r[1], 0, INT64_MAX, &g, &m), FG_EINVAL);
    /* a credit: whole in the range holding its start, nothing elsewhere */
    fg_ledger_row_t credit = {.id = 9,
                              .kind = FG_ROW_CREDIT,
                              .start_ms = dec + 10,
                              .end_ms = dec + 10,
                              .amount_micros = -250};
    assert_int_equal(fg_bill_part_in(&credit, dec, dec + 11, &g, &m), FG_OK);
    assert_int_equal(m, -250);
    assert_int_equal(g, 0);
    assert_int_equal(fg_bill_part_in(&credit, dec + 10, dec + 11, &g, &m), FG_OK);
    assert_int_equal(m, -250);
    assert_int_equal(fg_bill_part_in(&credit, 0, dec + 10, &g, &m), FG_OK);
    assert_int_equal(m, 0);
    assert_int_equal(fg_bill_part_in(&credit, dec + 11, INT64_MAX, &g, &m), FG_OK);
    assert_int_equal(m, 0);
}

/* Held GPU-ms: the lost work of a preemption was held; time past the end and time not
 * charged were not. */
static void test_invoice_held_gpu_ms(void **state)
{
    book_t b = flat_book(3600000);
    fg_ledger_row_t rows[16];
    size_t n = 0;
    uint64_t id = 1;
    int k;
    /* u: 2 GPUs for 150 s, preempted, 60 s lost: 300,000 held, 180,000 net */
    fg_bill_attempt_t a = attempt(2, T0, T0 + 150000, FG_END_PREEMPTED);
    a.last_checkpoint_ms = T0 + 90000;
    assert_int_equal(fg_bill_attempt_rows(&a, book_lookup, &b, a.start_ms, &id, &rows[n], &k),
                     FG_OK);
    n += (size_t)k;
    /* w: 1 GPU for 50 s, accrued to 80 s: 30,000 ms come back, 50,000 held */
    a = attempt(1, T0, T0 + 50000, FG_END_COMPLETED);
    a.job_id = 8;
    a.user = "w";
    assert_int_equal(fg_bill_accrue(&a, book_lookup, &b, T0, T0 + 80000, &id, &rows[n], &k), FG_OK);
    n += (size_t)k;
    assert_int_equal(fg_bill_attempt_rows(&a, book_lookup, &b, T0 + 80000, &id, &rows[n], &k),
                     FG_OK);
    n += (size_t)k;
    assert_int_equal(rows[n - 1].refund_why, FG_REFUND_PAST_END);
    /* v: 1 GPU for 1 s, node lost: not charged, nothing held */
    a = attempt(1, T0, T0 + 1000, FG_END_NODE_LOST);
    a.job_id = 9;
    a.user = "v";
    assert_int_equal(fg_bill_attempt_rows(&a, book_lookup, &b, a.start_ms, &id, &rows[n], &k),
                     FG_OK);
    n += (size_t)k;
    fg_invoice_line_t lines[4];
    fg_invoice_t inv = {.lines = lines, .cap = 4};
    assert_int_equal(fg_bill_invoice(rows, n, "a", 2026, 12, &inv), FG_OK);
    assert_int_equal(inv.n, 3); /* u, v, w */
    assert_string_equal(lines[0].user, "u");
    assert_int_equal(lines[0].gpu_ms, 180000);
    assert_int_equal(lines[0].held_gpu_ms, 300000);
    assert_string_equal(lines[1].user, "v");
    assert_int_equal(lines[1].gpu_ms, 0);
    assert_int_equal(lines[1].held_gpu_ms, 0);
    assert_string_equal(lines[2].user, "w");
    assert_int_equal(lines[2].gpu_ms, 50000);
    assert_int_equal(lines[2].held_gpu_ms, 50000);
    assert_int_equal(inv.held_gpu_ms, 350000);
}

/* Many lines: every (user, GPU type) gets its own, found again for each of its rows. */
/* The example of budget.c: budget 1,000; rows of 500, 400 (80 %), 200 (100 %, 110 %);
 * a credit of -500 forgets both marks; 400 more (100 %) reports both again, at once. */
static void test_budget_marks(void **state)
{
    (void)state;
    fg_budget_t b = {.budget_micros = 1000, .from_ms = 0, .to_ms = INT64_MAX};
    fg_ledger_row_t r = {.kind = FG_ROW_CREDIT, .start_ms = 10, .end_ms = 10};
    const int64_t amounts[] = {500, 400, 200, -500, 400};
    const int want[] = {0, FG_BUDGET_MARK_80, FG_BUDGET_MARK_100, 0,
                        FG_BUDGET_MARK_80 | FG_BUDGET_MARK_100};
    const int pct[] = {50, 90, 110, 60, 100};
    for (int i = 0; i < 5; i++) {
        r.kind = amounts[i] < 0 ? FG_ROW_CREDIT : FG_ROW_CORRECTION;
        r.amount_micros = amounts[i];
        assert_int_equal(fg_bill_budget_add(&b, &r), FG_OK);
        assert_int_equal(fg_bill_budget_pct(&b), pct[i]);
        assert_int_equal(fg_bill_budget_marks(&b), want[i]);
    }
    /* a row before the period does not count; settle takes the level as reported */
    fg_budget_t g = {.budget_micros = 0, .from_ms = 100, .to_ms = INT64_MAX};
    assert_int_equal(fg_bill_budget_add(&g, &r), FG_OK);
    assert_int_equal(g.spent_micros, 0);
    assert_int_equal(fg_bill_budget_pct(&g), 0);
    r.start_ms = r.end_ms = 100;
    assert_int_equal(fg_bill_budget_add(&g, &r), FG_OK);
    assert_int_equal(fg_bill_budget_pct(&g), 100); /* a budget of 0: anything is all of it */
    fg_bill_budget_settle(&g);
    assert_int_equal(fg_bill_budget_marks(&g), 0);
}

static void test_invoice_many_lines(void **state)
{
    enum { USERS = 300, TYPES = 3, ROWS = 2 * USERS * TYPES };
    static fg_ledger_row_t rows[ROWS];
    static fg_invoice_line_t lines[USERS * TYPES];
    for (int i = 0; i < ROWS; i++) {
        fg_ledger_row_t *r = &rows[i];
        memset(r, 0, sizeof *r);
        r->id = (uint64_t)i + 1;
        r->kind = FG_ROW_CORRECTION;
        r->start_ms = r->end_ms = T0;
        r->amount_micros = i;
        snprintf(r->account, sizeof r->account, "a");
        snprintf(r->user, sizeof r->user, "user%03d", (i / TYPES) % USERS);
        snprintf(r->gpu_type, sizeof r->gpu_type, "t%d", i % TYPES);
    }
    fg_invoice_t inv = {.lines = lines, .cap = USERS * TYPES};
    assert_int_equal(fg_bill_invoice(rows, ROWS, "a", 2026, 12, &inv), FG_OK);
    assert_int_equal(inv.n, USERS * TYPES);
    for (int l = 0; l < inv.n; l++) {
        int u = l / TYPES, t = l % TYPES, i = u * TYPES + t; /* rows i and i + USERS * TYPES */
        char want[16];
        snprintf(want, sizeof want, "user%03d", u);
        assert_string_equal(lines[l].user, want);
        assert_int_equal(lines[l].credit_micros, 2 * i + USERS * TYPES);
    }
    assert_int_equal(inv.total_micros, (int64_t)ROWS * (ROWS - 1) / 2);
    inv.cap = USERS * TYPES - 1;
    assert_int_equal(fg_bill_invoice(rows, ROWS, "a", 2026, 12, &inv), FG_ENOMEM);
}

/* ---------------------------------------------------------------- property test */

#define P_ACCOUNTS 3
#define P_USERS    5
#define P_MAX_ROWS 4096
#define P_MAX_ATT  512

static const char *const p_accounts[P_ACCOUNTS] = {"acct0", "acct1", "acct2"};
static const char *const p_users[P_USERS] = {"u0", "u1", "u2", "u3", "u4"};
static const char *const p_types[2] = {"a100", "h100"};

/* One attempt of a history, as generated, and what the test expects of it. */
typedef struct p_attempt {
    fg_bill_attempt_t a;
    int64_t rate;  /* the rate at its start, from the book */
    int64_t whole; /* fg_bill_charge of the whole attempt */
    int64_t kept;  /* its expected net */
    int64_t close; /* how far it was charged: its end, or an accrual past it */
} p_attempt_t;

static fg_ledger_row_t g_rows[P_MAX_ROWS];
static p_attempt_t g_att[P_MAX_ATT];

/* Where a preempted attempt's kept work ends, computed again here. */
static int64_t p_kept_until(const fg_bill_attempt_t *a)
{
    if (a->last_checkpoint_ms > 0)
        return a->last_checkpoint_ms > a->end_ms ? a->end_ms : a->last_checkpoint_ms;
    if (a->checkpoint_interval_ms > 0)
        return a->end_ms - (a->end_ms - a->start_ms) % a->checkpoint_interval_ms;
    return a->start_ms;
}

/* A random rate: mostly ordinary, sometimes tiny (rounding at work), sometimes huge. */
static int64_t p_rate(uint64_t *x)
{
    switch (rnd(x, 0, 5)) {
    case 0:
        return rnd(x, 0, 10);
    case 1:
        return rnd(x, 1, FG_BILL_MAX_RATE);
    default:
        return rnd(x, 100000, 20000000);
    }
}

/* C(t) - C(u) of attempt p, computed from the rule directly. */
static int64_t p_curve(const p_attempt_t *p, int64_t from, int64_t to)
{
    int64_t cf, ct;
    assert_int_equal(fg_bill_charge(p->a.gpus * (from - p->a.start_ms), p->rate, &cf), FG_OK);
    assert_int_equal(fg_bill_charge(p->a.gpus * (to - p->a.start_ms), p->rate, &ct), FG_OK);
    return ct - cf;
}

/* Generates one history into g_att and g_rows; returns the number of rows. */
static size_t p_generate(uint64_t *x, int *natt, book_t *book)
{
    int64_t base = rnd(x, 0, 1) ? T0 - 20 * 86400000LL : fg_bill_month_start_ms(2028, 1);
    book->n = 0;
    for (int t = 0; t < 2; t++)
        for (int pr = 0; pr <= FG_PRIO_HIGH; pr++) {
            book_add(book, p_types[t], (fg_prio_t)pr, 0, p_rate(x));
            for (int c = (int)rnd(x, 0, 3); c > 0; c--)
                book_add(book, p_types[t], (fg_prio_t)pr, base + rnd(x, 0, 90 * 86400000LL),
                         p_rate(x));
        }
    size_t n = 0;
    int na = 0;
    uint64_t id = 1;
    int jobs = (int)rnd(x, 1, 24);
    for (int j = 1; j <= jobs && na < P_MAX_ATT - 8; j++) {
        int u = (int)rnd(x, 0, P_USERS - 1);
        int64_t t = base + rnd(x, 0, 60 * 86400000LL);
        int nattempts = (int)rnd(x, 1, 4);
        for (int k = 1; k <= nattempts; k++) {
            p_attempt_t *p = &g_att[na++];
            fg_bill_attempt_t *a = &p->a;
            int big = rnd(x, 0, 9) == 0;
            *a = (fg_bill_attempt_t){
                .job_id = (fg_job_id_t)j,
                .attempt = k,
                .account = p_accounts[u % P_ACCOUNTS],
                .user = p_users[u],
                .node = "n",
                .gpu_type = p_types[rnd(x, 0, 1)],
                .priority = (fg_prio_t)rnd(x, 0, FG_PRIO_HIGH),
                .gpus = (int32_t)(big ? rnd(x, 1, FG_BILL_MAX_GPUS) : rnd(x, 1, 16)),
                .start_ms = t,
                .cause = (fg_end_cause_t)rnd(x, 0, FG_END_CAUSE_MAX)};
            int64_t len = rnd(x, 0, 4) == 0   ? rnd(x, 0, 2000)
                          : rnd(x, 0, 7) == 0 ? rnd(x, 0, 70 * 86400000LL)
                                              : rnd(x, 0, 5 * 86400000LL);
            assert_int_equal(book_lookup(book, a->gpu_type, a->priority, t, &p->rate), FG_OK);
            if (p->rate > 1000000000) { /* keep an account's sums within int64 */
                a->gpus = a->gpus > 4 ? 4 : a->gpus;
                len = len > 5 * 86400000LL ? 5 * 86400000LL : len;
            }
            a->end_ms = t + len;
            if (a->cause == FG_END_PREEMPTED || rnd(x, 0, 3) == 0) {
                a->checkpoint_interval_ms = rnd(x, 0, 2) ? rnd(x, 1, 6 * HOUR) : 0;
                a->last_checkpoint_ms = rnd(x, 0, 1) && len > 0 ? t + rnd(x, 1, len) : 0;
            }
            assert_int_equal(fg_bill_charge(a->gpus * len, p->rate, &p->whole), FG_OK);
            p->kept = fg_bill_cause_free(a->cause)   ? 0
                      : a->cause == FG_END_PREEMPTED ? p_curve(p, a->start_ms, p_kept_until(a))
                                                     : p->whole;
            /* live accrual at random times, then the final rows */
            int64_t to = t;
            for (int c = (int)rnd(x, 0, 6); c > 0 && len > 0; c--) {
                int64_t now = to + rnd(x, 0, (a->end_ms - to) / 2 + 1);
                if (now > a->end_ms)
                    now = a->end_ms;
                int m;
                assert_true(n + 1 < P_MAX_ROWS);
                assert_int_equal(fg_bill_accrue(a, book_lookup, book, to, now, &id, &g_rows[n], &m),
                                 FG_OK);
                n += (size_t)m;
                to = now;
            }
            if (rnd(x, 0, 9) == 0) { /* an accrual after the end the agent reports later */
                int m;
                int64_t now = a->end_ms + rnd(x, 1, 2 * MIN);
                assert_int_equal(fg_bill_accrue(a, book_lookup, book, to, now, &id, &g_rows[n], &m),
                                 FG_OK);
                n += (size_t)m;
                to = now;
            }
            p->close = to > a->end_ms ? to : a->end_ms;
            int m;
            assert_true(n + FG_BILL_ATTEMPT_ROWS_MAX < P_MAX_ROWS);
            assert_int_equal(fg_bill_attempt_rows(a, book_lookup, book, to, &id, &g_rows[n], &m),
                             FG_OK);
            n += (size_t)m;
            t = a->end_ms + rnd(x, 0, HOUR);
        }
    }
    for (int c = (int)rnd(x, 0, 3); c > 0; c--) { /* admin credits */
        fg_ledger_row_t *r = &g_rows[n++];
        memset(r, 0, sizeof *r);
        int u = (int)rnd(x, 0, P_USERS - 1);
        r->id = id++;
        r->kind = rnd(x, 0, 1) ? FG_ROW_CREDIT : FG_ROW_CORRECTION;
        r->start_ms = r->end_ms = base + rnd(x, 0, 60 * 86400000LL);
        r->amount_micros = r->kind == FG_ROW_CREDIT ? -rnd(x, 0, 1000000) : rnd(x, -999, 999);
        snprintf(r->account, sizeof r->account, "%s", p_accounts[u % P_ACCOUNTS]);
        snprintf(r->user, sizeof r->user, "%s", p_users[u]);
    }
    *natt = na;
    return n;
}

/* Per attempt: one final charge, charges sum to the whole, refunds bounded, net right;
 * and, per month, its parts equal its curve clipped to the month. */
static void p_check_attempts(const p_attempt_t *att, int na, size_t n)
{
    fg_month_part_t parts[16];
    for (int i = 0; i < na; i++) {
        const p_attempt_t *p = &att[i];
        int finals = 0;
        uint64_t final_id = 0;
        int64_t charged = 0, refunded = 0;
        for (size_t k = 0; k < n; k++) {
            const fg_ledger_row_t *r = &g_rows[k];
            if (r->job_id != p->a.job_id || r->attempt != p->a.attempt ||
                r->kind == FG_ROW_CREDIT || r->kind == FG_ROW_CORRECTION)
                continue;
            assert_int_equal(r->rate, p->rate);
            if (r->kind == FG_ROW_CHARGE) {
                charged += r->amount_micros;
                if (!r->interim) {
                    finals++;
                    final_id = r->id;
                }
            } else {
                refunded -= r->amount_micros;
                assert_int_equal(r->refers_to, final_id); /* written right after it */
            }
            /* the parts of this row in each month, against the curve clipped to it */
            int np = fg_bill_split_months(r, parts, 16);
            assert_true(np >= 1 && np <= 16);
            int64_t sum = 0;
            for (int q = 0; q < np; q++) {
                int64_t m0 = fg_bill_month_start_ms(parts[q].year, parts[q].month);
                int64_t m1 = parts[q].month == 12
                                 ? fg_bill_month_start_ms(parts[q].year + 1, 1)
                                 : fg_bill_month_start_ms(parts[q].year, parts[q].month + 1);
                int64_t lo = r->start_ms > m0 ? r->start_ms : m0;
                int64_t hi = r->end_ms < m1 ? r->end_ms : m1;
                assert_true(lo <= hi);
                int64_t want = p_curve(p, lo, hi);
                assert_int_equal(parts[q].amount_micros, r->kind == FG_ROW_CHARGE ? want : -want);
                assert_int_equal(parts[q].gpu_ms, p->a.gpus * (hi - lo));
                sum += parts[q].amount_micros;
            }
            assert_int_equal(sum, r->amount_micros);
            /* its part in a range that cuts it: the curve clipped to the range */
            int64_t t0 = r->start_ms + (r->end_ms - r->start_ms) / 4, t1 = t0 + 3600001, g, m;
            assert_int_equal(fg_bill_part_in(r, t0, t1, &g, &m), FG_OK);
            int64_t hi = r->end_ms < t1 ? r->end_ms : t1;
            int64_t want = t0 < hi ? p_curve(p, t0, hi) : 0;
            assert_int_equal(m, r->kind == FG_ROW_CHARGE ? want : -want);
            assert_int_equal(g, t0 < hi ? p->a.gpus * (hi - t0) : 0);
        }
        assert_int_equal(finals, 1);
        assert_int_equal(charged, p_curve(p, p->a.start_ms, p->close));
        assert_true(p->close > p->a.end_ms || charged == p->whole);
        assert_true(refunded >= 0 && refunded <= charged);
        assert_int_equal(charged - refunded, p->kept);
    }
}

/* The held GPU-ms of a part of gpu_ms of row r, computed from the rule's words. */
static int64_t p_held(const fg_ledger_row_t *r, int64_t gpu_ms)
{
    if (r->kind == FG_ROW_CHARGE)
        return gpu_ms;
    bool not_held = r->refund_why == FG_REFUND_PAST_END || r->refund_why == FG_REFUND_NOT_CHARGED;
    return r->kind == FG_ROW_REFUND && not_held ? -gpu_ms : 0;
}

/* A row's parts over a partition of time (cut inside and around it) add up to it. */
static void p_check_partition(const fg_ledger_row_t *r)
{
    int64_t len = r->end_ms - r->start_ms;
    int64_t cuts[] = {
        INT64_MIN, r->start_ms - 1, r->start_ms + len / 3, r->start_ms + 2 * len / 3 + 7,
        r->end_ms, INT64_MAX};
    int64_t amount = 0, gpu_ms = 0;
    for (size_t i = 1; i < sizeof cuts / sizeof cuts[0]; i++)
        if (cuts[i] < cuts[i - 1]) /* short rows: keep the cuts in order */
            cuts[i] = cuts[i - 1];
    for (size_t i = 0; i + 1 < sizeof cuts / sizeof cuts[0]; i++) {
        int64_t t0 = cuts[i], t1 = cuts[i + 1], g, m;
        assert_int_equal(fg_bill_part_in(r, t0, t1, &g, &m), FG_OK);
        assert_true(g >= 0);
        amount += m;
        gpu_ms += g;
    }
    assert_int_equal(amount, r->amount_micros);
    bool curve = r->kind == FG_ROW_CHARGE || r->kind == FG_ROW_REFUND;
    assert_int_equal(gpu_ms, curve ? r->gpu_ms : 0);
}

/* Per account and month: invoice == sum of month parts; months add up to the rows. */
static void p_check_invoices(size_t n)
{
    for (size_t k = 0; k < n; k++)
        p_check_partition(&g_rows[k]);
    static fg_month_part_t parts[16];
    fg_invoice_line_t lines[32];
    for (int ac = 0; ac < P_ACCOUNTS; ac++) {
        int64_t lo = INT64_MAX, hi = INT64_MIN, rows_total = 0, gpu_ms_total = 0;
        for (size_t k = 0; k < n; k++)
            if (!strcmp(g_rows[k].account, p_accounts[ac])) {
                lo = g_rows[k].start_ms < lo ? g_rows[k].start_ms : lo;
                hi = g_rows[k].end_ms > hi ? g_rows[k].end_ms : hi;
                rows_total += g_rows[k].amount_micros;
                if (g_rows[k].kind == FG_ROW_CHARGE)
                    gpu_ms_total += g_rows[k].gpu_ms;
                else if (g_rows[k].kind == FG_ROW_REFUND)
                    gpu_ms_total -= g_rows[k].gpu_ms;
            }
        if (lo > hi)
            continue;
        int y, m, y1, m1;
        fg_bill_month_of(lo, &y, &m);
        fg_bill_month_of(hi, &y1, &m1);
        int64_t months_total = 0, months_gpu_ms = 0;
        for (; y * 12 + m <= y1 * 12 + m1; m == 12 ? (y++, m = 1) : m++) {
            fg_invoice_t inv = {.lines = lines, .cap = 32};
            assert_int_equal(fg_bill_invoice(g_rows, n, p_accounts[ac], y, m, &inv), FG_OK);
            int64_t want = 0, lines_total = 0, want_held = 0, lines_held = 0;
            for (size_t k = 0; k < n; k++) {
                if (strcmp(g_rows[k].account, p_accounts[ac]))
                    continue;
                int np = fg_bill_split_months(&g_rows[k], parts, 16);
                for (int q = 0; q < np; q++)
                    if (parts[q].year == y && parts[q].month == m) {
                        want += parts[q].amount_micros;
                        want_held += p_held(&g_rows[k], parts[q].gpu_ms);
                    }
            }
            for (int l = 0; l < inv.n; l++) {
                assert_int_equal(lines[l].total_micros, lines[l].charge_micros +
                                                            lines[l].refund_micros +
                                                            lines[l].credit_micros);
                assert_true(lines[l].charge_micros >= 0 && lines[l].refund_micros <= 0);
                assert_true(lines[l].gpu_ms >= 0);
                lines_total += lines[l].total_micros;
                lines_held += lines[l].held_gpu_ms;
                assert_true(lines[l].held_gpu_ms >= lines[l].gpu_ms); /* lost work was held */
                months_gpu_ms += lines[l].gpu_ms;
                if (l > 0)
                    assert_true(strcmp(lines[l - 1].user, lines[l].user) < 0 ||
                                (!strcmp(lines[l - 1].user, lines[l].user) &&
                                 strcmp(lines[l - 1].gpu_type, lines[l].gpu_type) < 0));
            }
            assert_int_equal(inv.total_micros, want);
            assert_int_equal(inv.total_micros, lines_total);
            assert_int_equal(inv.held_gpu_ms, want_held);
            assert_int_equal(inv.held_gpu_ms, lines_held);
            months_total += inv.total_micros;
        }
        assert_int_equal(months_total, rows_total);
        assert_int_equal(months_gpu_ms, gpu_ms_total);
    }
}

static size_t g_budgets_crossed; /* budgets that reached 100 % (the check is not vacuous) */

/* One mark's tally over a sequence of spends: reports, times reached, drops below. */
typedef struct p_mark {
    int reported, drops;
    bool ever, above;
} p_mark_t;

static void p_mark_step(p_mark_t *m, bool above, bool reported)
{
    if (reported)
        assert_true(above); /* a mark is reported only when the spend is at or past it */
    m->reported += reported;
    m->ever |= above;
    m->drops += m->above && !above;
    m->above = above;
}

/* Budget crossings: per account and month, a budget fed the rows in id order spends
 * exactly the month's invoice total, and reports each mark once per time the spend
 * reaches it (at least once if it ever does, never more than once per drop below). */
static void p_check_budgets(size_t n, uint64_t *x)
{
    fg_invoice_line_t lines[32];
    size_t crossed = 0;
    for (int ac = 0; ac < P_ACCOUNTS; ac++) {
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (size_t k = 0; k < n; k++)
            if (!strcmp(g_rows[k].account, p_accounts[ac])) {
                lo = g_rows[k].start_ms < lo ? g_rows[k].start_ms : lo;
                hi = g_rows[k].end_ms > hi ? g_rows[k].end_ms : hi;
            }
        if (lo > hi)
            continue;
        int y, m, y1, m1;
        fg_bill_month_of(lo, &y, &m);
        fg_bill_month_of(hi, &y1, &m1);
        for (; y * 12 + m <= y1 * 12 + m1; m == 12 ? (y++, m = 1) : m++) {
            fg_invoice_t inv = {.lines = lines, .cap = 32};
            assert_int_equal(fg_bill_invoice(g_rows, n, p_accounts[ac], y, m, &inv), FG_OK);
            int64_t t = inv.total_micros > 0 ? inv.total_micros : 1;
            fg_budget_t b = {.budget_micros = rnd(x, 0, 2 * t - 1),
                             .from_ms = fg_bill_month_start_ms(y, m),
                             .to_ms = m == 12 ? fg_bill_month_start_ms(y + 1, 1)
                                              : fg_bill_month_start_ms(y, m + 1)};
            p_mark_t m80 = {0}, m100 = {0};
            for (size_t k = 0; k < n; k++) {
                if (strcmp(g_rows[k].account, p_accounts[ac]))
                    continue;
                assert_int_equal(fg_bill_budget_add(&b, &g_rows[k]), FG_OK);
                int marks = fg_bill_budget_marks(&b), pct = fg_bill_budget_pct(&b);
                p_mark_step(&m80, pct >= 80, marks & FG_BUDGET_MARK_80);
                p_mark_step(&m100, pct >= 100, marks & FG_BUDGET_MARK_100);
            }
            assert_int_equal(b.spent_micros, inv.total_micros);
            for (p_mark_t *pm = &m80; pm; pm = pm == &m80 ? &m100 : NULL) {
                assert_true(pm->reported >= (pm->ever ? 1 : 0));
                assert_true(pm->reported <= 1 + pm->drops);
            }
            crossed += m100.reported > 0;
        }
    }
    g_budgets_crossed += crossed;
}

/* Environment integer or a default. */
static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *s = getenv(name);
    return s && *s ? strtoull(s, NULL, 10) : dflt;
}

static uint64_t g_seed; /* the history being checked, 0 when none */

static void test_random_histories_balance_exactly(void **state)
{
    static book_t book;
    const char *seed_env = getenv("FG_BILLING_SEED");
    uint64_t first = seed_env ? env_u64("FG_BILLING_SEED", 1) : 1;
    uint64_t count = seed_env ? 1 : env_u64("FG_BILLING_SEQUENCES", 3000);
    size_t rows_seen = 0;
    for (uint64_t seed = first; seed < first + count; seed++) {
        uint64_t x = seed * 0x2545f4914f6cdd1dull;
        int na = 0;
        g_seed = seed;
        size_t n = p_generate(&x, &na, &book);
        rows_seen += n;
        p_check_attempts(g_att, na, n);
        p_check_invoices(n);
        p_check_budgets(n, &x);
    }
    g_seed = 0;
    print_message("billing: %llu histories, %zu ledger rows, %zu budgets crossed\n",
                  (unsigned long long)count, rows_seen, g_budgets_crossed);
    assert_true(count < 100 || g_budgets_crossed > count / 10);
}

/* Names the history a failing check came from (the test's teardown runs after it). */
static int print_failing_seed(void **state)
{
    if (g_seed)
        print_error("billing: failing history: FG_BILLING_SEED=%llu\n", (unsigned long long)g_seed);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rounding_is_half_up_once_and_exact),
        cmocka_unit_test(test_completed_pays_the_time_held),
        cmocka_unit_test(test_cancel_and_timeout_pay_what_ran),
        cmocka_unit_test(test_free_causes_are_refunded_in_full),
        cmocka_unit_test(test_preempted_refunds_the_work_since_the_last_checkpoint),
        cmocka_unit_test(test_the_rate_is_the_one_at_the_start),
        cmocka_unit_test(test_accruals_add_up_to_the_single_row_charge),
        cmocka_unit_test(test_accruals_past_the_end_come_back),
        cmocka_unit_test(test_bad_attempts_are_refused),
        cmocka_unit_test(test_utc_months),
        cmocka_unit_test(test_month_split_is_exact),
        cmocka_unit_test(test_invoice_lines_and_total),
        cmocka_unit_test(test_part_in_follows_the_curve),
        cmocka_unit_test(test_invoice_held_gpu_ms),
        cmocka_unit_test(test_invoice_many_lines),
        cmocka_unit_test(test_budget_marks),
        cmocka_unit_test_teardown(test_random_histories_balance_exactly, print_failing_seed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
