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
 * The same rule gives a row's part in any range [t0, t1) (fg_bill_part_in: budget
 * periods, usage reports). An invoice is, for one account and month, the parts of its
 * rows in that month summed per user and GPU type (lines found by a hash); its total is
 * the sum of the lines, hence of the month parts. Lines also count the GPU time held:
 * charges less refunds of time past the end or not charged (lost work was held).
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

/* Checks that a charge or refund row is one these rules made (its amount is its span on
 * its curve, its gpu_ms its GPUs times its span); *c0, *c1 get C(start), C(end). */
static int curve_row(const fg_ledger_row_t *r, int64_t *c0, int64_t *c1)
{
    assert(r->kind == FG_ROW_CHARGE || r->kind == FG_ROW_REFUND);
    int sign = r->kind == FG_ROW_CHARGE ? 1 : -1;
    if (r->gpus < 1 || r->gpus > FG_BILL_MAX_GPUS || r->start_ms > r->end_ms ||
        row_curve(r, r->start_ms, c0) || row_curve(r, r->end_ms, c1) ||
        sign * r->amount_micros != *c1 - *c0 ||
        r->gpu_ms != (int64_t)r->gpus * (r->end_ms - r->start_ms))
        return FG_EINVAL;
    return FG_OK;
}

static bool has_curve(const fg_ledger_row_t *r)
{
    return r->kind == FG_ROW_CHARGE || r->kind == FG_ROW_REFUND;
}

/* The part of row r in [t0, t1) (fg_bill_part_in), and whether r counts in that range
 * at all (*touches: a zero-length row or a credit counts where it starts, so its zero
 * or whole part lands in exactly one range of a partition). */
static int part_in(const fg_ledger_row_t *r, int64_t t0, int64_t t1, int64_t *gpu_ms,
                   int64_t *amount, bool *touches)
{
    *gpu_ms = *amount = 0;
    *touches = false;
    if (t0 > t1)
        return FG_EINVAL;
    bool at_start = t0 <= r->start_ms && r->start_ms < t1;
    if (r->kind == FG_ROW_CREDIT || r->kind == FG_ROW_CORRECTION) {
        *touches = at_start;
        *amount = at_start ? r->amount_micros : 0;
        return FG_OK;
    }
    if (!has_curve(r))
        return FG_EINVAL;
    int64_t c0, c1;
    if (curve_row(r, &c0, &c1) != FG_OK)
        return FG_EINVAL; /* not a row of these rules */
    int64_t a = r->start_ms > t0 ? r->start_ms : t0;
    int64_t b = r->end_ms < t1 ? r->end_ms : t1;
    *touches = a < b || (r->start_ms == r->end_ms && at_start);
    if (a >= b)
        return FG_OK;
    int64_t ca = c0, cb = c1;
    if ((a != r->start_ms && row_curve(r, a, &ca)) || (b != r->end_ms && row_curve(r, b, &cb)))
        return FG_EINVAL; /* cannot happen: [a, b] lies inside the row's checked span */
    *gpu_ms = (int64_t)r->gpus * (b - a);
    *amount = r->kind == FG_ROW_CHARGE ? cb - ca : ca - cb;
    return FG_OK;
}

int fg_bill_part_in(const fg_ledger_row_t *r, int64_t t0, int64_t t1, int64_t *gpu_ms,
                    int64_t *amount_micros)
{
    if (!r || !gpu_ms || !amount_micros)
        return FG_EINVAL;
    bool touches;
    return part_in(r, t0, t1, gpu_ms, amount_micros, &touches);
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
    int64_t c0, c1;
    if (!has_curve(r) || curve_row(r, &c0, &c1) != FG_OK)
        return FG_EINVAL; /* not a row of these rules */
    if (r->start_ms == r->end_ms) {
        put_part(parts, cap, 0, r->start_ms, 0, 0);
        return 1;
    }
    int n = 0;
    int64_t sum = 0;
    for (int64_t a = r->start_ms; a < r->end_ms;) {
        int64_t b = next_month_ms(a), gpu_ms, amount;
        bool touches;
        int rc = part_in(r, a, b, &gpu_ms, &amount, &touches);
        assert(rc == FG_OK && touches);
        (void)rc;
        put_part(parts, cap, n++, a, gpu_ms, amount);
        sum += amount;
        a = b;
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

/* The (user, GPU type) -> line index of one invoice being summed: open addressing,
 * slots hold index + 1 (0 = empty), at most half full, so a row finds its line in O(1)
 * whatever the number of lines. Names compare on their first FG_NAME_MAX - 1 bytes,
 * what a line keeps of them. */
typedef struct line_index {
    int *slots;
    size_t mask; /* slots - 1, a power of two minus one */
} line_index_t;

#define NAME_CMP_MAX (FG_NAME_MAX - 1)

/* FNV-1a of a row's user and GPU type. */
static size_t line_hash(const char *user, const char *gpu_type)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < NAME_CMP_MAX && user[i]; i++)
        h = (h ^ (unsigned char)user[i]) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull; /* separator: ("ab", "c") != ("a", "bc") */
    for (size_t i = 0; i < NAME_CMP_MAX && gpu_type[i]; i++)
        h = (h ^ (unsigned char)gpu_type[i]) * 1099511628211ull;
    return (size_t)(h ^ (h >> 29));
}

static bool line_is(const fg_invoice_line_t *l, const fg_ledger_row_t *r)
{
    return !strncmp(l->user, r->user, NAME_CMP_MAX) &&
           !strncmp(l->gpu_type, r->gpu_type, NAME_CMP_MAX);
}

/* Doubles the table and places every line again; false when out of memory. */
static bool index_grow(line_index_t *x, const fg_invoice_t *inv)
{
    size_t size = x->slots ? 2 * (x->mask + 1) : 64;
    int *slots = calloc(size, sizeof *slots);
    if (!slots)
        return false;
    for (int i = 0; i < inv->n; i++) {
        size_t j = line_hash(inv->lines[i].user, inv->lines[i].gpu_type) & (size - 1);
        while (slots[j])
            j = (j + 1) & (size - 1);
        slots[j] = i + 1;
    }
    free(x->slots);
    x->slots = slots;
    x->mask = size - 1;
    return true;
}

/* The line of (user, gpu_type), added if new; NULL when the invoice is full (or out of
 * memory: *rc says which). */
static fg_invoice_line_t *line_for(fg_invoice_t *inv, line_index_t *x, const fg_ledger_row_t *r,
                                   int *rc)
{
    *rc = FG_ENOMEM;
    if ((!x->slots || 2 * (size_t)(inv->n + 1) > x->mask + 1) && !index_grow(x, inv))
        return NULL;
    size_t j = line_hash(r->user, r->gpu_type) & x->mask;
    for (; x->slots[j]; j = (j + 1) & x->mask)
        if (line_is(&inv->lines[x->slots[j] - 1], r))
            return &inv->lines[x->slots[j] - 1];
    if (inv->n >= inv->cap)
        return NULL;
    fg_invoice_line_t *l = &inv->lines[inv->n++];
    x->slots[j] = inv->n;
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

/* GPU-ms of a row's part that were held: charges count, refunds of time that was not
 * held (past the end, not charged) take theirs back, lost work stays held. */
static int64_t held_of(const fg_ledger_row_t *r, int64_t gpu_ms)
{
    if (r->kind == FG_ROW_CHARGE)
        return gpu_ms;
    if (r->kind == FG_ROW_REFUND &&
        (r->refund_why == FG_REFUND_PAST_END || r->refund_why == FG_REFUND_NOT_CHARGED))
        return -gpu_ms;
    return 0;
}

/* Adds one part (gpu_ms, amount) of row r to its line. */
static int add_part(fg_invoice_t *inv, line_index_t *x, const fg_ledger_row_t *r, int64_t gpu_ms,
                    int64_t amount)
{
    int rc;
    fg_invoice_line_t *l = line_for(inv, x, r, &rc);
    if (!l)
        return rc;
    int64_t *bucket = r->kind == FG_ROW_CHARGE   ? &l->charge_micros
                      : r->kind == FG_ROW_REFUND ? &l->refund_micros
                                                 : &l->credit_micros;
    int64_t held = held_of(r, gpu_ms);
    if (r->kind == FG_ROW_REFUND)
        gpu_ms = -gpu_ms;
    if (!add(bucket, amount) || !add(&l->total_micros, amount) || !add(&l->gpu_ms, gpu_ms) ||
        !add(&l->held_gpu_ms, held) || !add(&inv->total_micros, amount) ||
        !add(&inv->held_gpu_ms, held))
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
    inv->held_gpu_ms = 0;
    int64_t m0 = fg_bill_month_start_ms(year, month);
    int64_t m1 =
        month == 12 ? fg_bill_month_start_ms(year + 1, 1) : fg_bill_month_start_ms(year, month + 1);
    line_index_t x = {0};
    int rc = FG_OK;
    for (size_t i = 0; i < n && rc == FG_OK; i++) {
        const fg_ledger_row_t *r = &rows[i];
        if (strncmp(r->account, account, FG_NAME_MAX) != 0)
            continue;
        int64_t gpu_ms, amount;
        bool touches;
        rc = part_in(r, m0, m1, &gpu_ms, &amount, &touches);
        if (rc == FG_OK && touches)
            rc = add_part(inv, &x, r, gpu_ms, amount);
    }
    free(x.slots);
    if (rc != FG_OK)
        return rc;
    qsort(inv->lines, (size_t)inv->n, sizeof *inv->lines, line_cmp);
    return FG_OK;
}
