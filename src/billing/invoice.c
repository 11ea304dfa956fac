/*
 * invoice.c - UTC months, exact month splits of ledger rows, and monthly invoices.
 *
 * A charge or refund row covers [start, end) of its attempt's curve C (charge.c); its
 * part in a month [m0, m1) is C(min(end, m1)) - C(max(start, m0)), with the row's sign.
 * The parts telescope to the row's amount, to the micro-unit, and the parts of all the
 * rows of one attempt in one month do not depend on when the controller accrued.
 * Credits and corrections have no curve: they fall whole in the month of their start.
 *
 * Example: 1 GPU from 2026-11-30 23:00 to 2026-12-01 01:00 UTC at 1,000,001 micros/GPU-h
 * is one row of 2,000,002 micros: 1,000,001 in 2026-11 and 1,000,001 in 2026-12.
 *
 * An invoice is, for one account and month, the month parts of its rows summed per user
 * and GPU type; its total is the sum of the lines, hence of the month parts.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "fairgpu/billing.h"

#define MS_PER_DAY 86400000LL

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

int64_t fg_bill_month_start_ms(int year, int month)
{
    assert(month >= 1 && month <= 12);
    return days_from_civil(year, month, 1) * MS_PER_DAY;
}

void fg_bill_month_of(int64_t t_ms, int *year, int *month)
{
    int64_t z = (t_ms >= 0 ? t_ms / MS_PER_DAY : (t_ms - MS_PER_DAY + 1) / MS_PER_DAY);
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *year = (int)(yoe + era * 400 + (m <= 2));
    *month = m;
}

/* The first instant of the month after the one holding t_ms. */
static int64_t next_month_ms(int64_t t_ms)
{
    int y, m;
    fg_bill_month_of(t_ms, &y, &m);
    return m == 12 ? fg_bill_month_start_ms(y + 1, 1) : fg_bill_month_start_ms(y, m + 1);
}

/* C(t) of a row's attempt curve. */
static int row_curve(const fg_ledger_row_t *r, int64_t t, int64_t *out)
{
    if (t < r->origin_ms || t - r->origin_ms > FG_BILL_MAX_SPAN_MS)
        return FG_EINVAL;
    return fg_bill_charge((int64_t)r->gpus * (t - r->origin_ms), r->rate, out);
}

/* Writes part i if there is room. */
static void put_part(fg_month_part_t *parts, int cap, int i, int64_t t, int64_t gpu_ms,
                     int64_t amount)
{
    if (i >= cap)
        return;
    fg_bill_month_of(t, &parts[i].year, &parts[i].month);
    parts[i].gpu_ms = gpu_ms;
    parts[i].amount_micros = amount;
}

int fg_bill_split_months(const fg_ledger_row_t *r, fg_month_part_t *parts, int cap)
{
    if (!r || (cap > 0 && !parts))
        return FG_EINVAL;
    if (r->kind == FG_ROW_CREDIT || r->kind == FG_ROW_CORRECTION) {
        put_part(parts, cap, 0, r->start_ms, 0, r->amount_micros);
        return 1;
    }
    if (r->kind != FG_ROW_CHARGE && r->kind != FG_ROW_REFUND)
        return FG_EINVAL;
    int sign = r->kind == FG_ROW_CHARGE ? 1 : -1;
    int64_t c0, c1;
    if (r->gpus < 1 || r->gpus > FG_BILL_MAX_GPUS || r->start_ms > r->end_ms ||
        row_curve(r, r->start_ms, &c0) || row_curve(r, r->end_ms, &c1) ||
        sign * r->amount_micros != c1 - c0 ||
        r->gpu_ms != (int64_t)r->gpus * (r->end_ms - r->start_ms))
        return FG_EINVAL; /* not a row of these rules */
    if (r->start_ms == r->end_ms) {
        put_part(parts, cap, 0, r->start_ms, 0, 0);
        return 1;
    }
    int n = 0;
    int64_t a = r->start_ms, ca = c0, sum = 0;
    while (a < r->end_ms) {
        int64_t b = next_month_ms(a), cb;
        if (b > r->end_ms)
            b = r->end_ms;
        int rc = row_curve(r, b, &cb);
        assert(rc == FG_OK);
        (void)rc;
        put_part(parts, cap, n++, a, (int64_t)r->gpus * (b - a), sign * (cb - ca));
        sum += sign * (cb - ca);
        a = b;
        ca = cb;
    }
    assert(sum == r->amount_micros);
    return n;
}

/* Orders lines by user, then GPU type. */
static int line_cmp(const void *x, const void *y)
{
    const fg_invoice_line_t *a = x, *b = y;
    int c = strcmp(a->user, b->user);
    return c ? c : strcmp(a->gpu_type, b->gpu_type);
}

/* The line of (user, gpu_type), added if new; NULL when the invoice is full. */
static fg_invoice_line_t *line_for(fg_invoice_t *inv, const fg_ledger_row_t *r)
{
    for (int i = 0; i < inv->n; i++)
        if (!strcmp(inv->lines[i].user, r->user) && !strcmp(inv->lines[i].gpu_type, r->gpu_type))
            return &inv->lines[i];
    if (inv->n >= inv->cap)
        return NULL;
    fg_invoice_line_t *l = &inv->lines[inv->n++];
    memset(l, 0, sizeof *l);
    memcpy(l->user, r->user, sizeof l->user);
    memcpy(l->gpu_type, r->gpu_type, sizeof l->gpu_type);
    l->user[FG_NAME_MAX - 1] = l->gpu_type[FG_NAME_MAX - 1] = '\0';
    return l;
}

/* *acc += v; false on overflow. */
static bool add(int64_t *acc, int64_t v)
{
    return !__builtin_add_overflow(*acc, v, acc);
}

/* Adds one month part of row r to its line. */
static int add_part(fg_invoice_t *inv, const fg_ledger_row_t *r, const fg_month_part_t *p)
{
    fg_invoice_line_t *l = line_for(inv, r);
    if (!l)
        return FG_ENOMEM;
    int64_t *bucket = r->kind == FG_ROW_CHARGE   ? &l->charge_micros
                      : r->kind == FG_ROW_REFUND ? &l->refund_micros
                                                 : &l->credit_micros;
    int64_t gpu_ms = r->kind == FG_ROW_REFUND ? -p->gpu_ms : p->gpu_ms;
    if (!add(bucket, p->amount_micros) || !add(&l->total_micros, p->amount_micros) ||
        !add(&l->gpu_ms, gpu_ms) || !add(&inv->total_micros, p->amount_micros))
        return FG_EINVAL;
    return FG_OK;
}

int fg_bill_invoice(const fg_ledger_row_t *rows, size_t n, const char *account, int year, int month,
                    fg_invoice_t *inv)
{
    if (!inv || !account || (n > 0 && !rows) || month < 1 || month > 12 || year < 1970 ||
        year > 9999 || inv->cap < 0 || (inv->cap > 0 && !inv->lines))
        return FG_EINVAL;
    inv->n = 0;
    inv->total_micros = 0;
    enum { PARTS = 16 }; /* a row spans at most 366 days: 14 months */
    fg_month_part_t parts[PARTS];
    for (size_t i = 0; i < n; i++) {
        const fg_ledger_row_t *r = &rows[i];
        if (strncmp(r->account, account, FG_NAME_MAX) != 0)
            continue;
        int k = fg_bill_split_months(r, parts, PARTS);
        if (k < 0 || k > PARTS)
            return FG_EINVAL;
        for (int j = 0; j < k; j++) {
            if (parts[j].year != year || parts[j].month != month)
                continue;
            int rc = add_part(inv, r, &parts[j]);
            if (rc != FG_OK)
                return rc;
        }
    }
    qsort(inv->lines, (size_t)inv->n, sizeof *inv->lines, line_cmp);
    return FG_OK;
}
