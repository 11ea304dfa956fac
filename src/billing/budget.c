/*
 * budget.c - a budget's spend in its period and its 80 % / 100 % marks (docs/billing.md,
 * "Budgets"). Pure: the controller adds each ledger row as it makes it and acts on the
 * marks (events, holding or stopping jobs); nothing here reads a clock.
 *
 * The spend is the rows' parts in the period, on their curves (fg_bill_part_in), so a
 * monthly budget's spend is exactly what the month's invoice adds up for the account.
 *
 * Example: budget 1,000 micros for December. A running attempt accrues 500 (50 %), then
 * 400 (90 %): fg_bill_budget_marks says 80 %. Its final row of 200 (110 %) says 100 %.
 * An admin's credit of -500 (60 %) forgets both marks: the next crossing warns again.
 */
#include "fairgpu/billing.h"

#include <assert.h>

int fg_bill_budget_pct(const fg_budget_t *b)
{
    assert(b->budget_micros >= 0);
    if (b->budget_micros == 0)
        return b->spent_micros > 0 ? 100 : 0;
    __int128 p = (__int128)b->spent_micros * 100 / b->budget_micros;
    return p > 1000 ? 1000 : p < 0 ? 0 : (int)p;
}

int fg_bill_budget_add(fg_budget_t *b, const fg_ledger_row_t *r)
{
    int64_t gpu_ms, amount;
    int rc = fg_bill_part_in(r, b->from_ms, b->to_ms, &gpu_ms, &amount);
    if (rc == FG_OK)
        b->spent_micros += amount;
    return rc;
}

/* The mark the spend has reached: 0, 80 or 100. */
static int level(const fg_budget_t *b)
{
    int pct = fg_bill_budget_pct(b);
    return pct >= 100 ? 100 : pct >= 80 ? 80 : 0;
}

int fg_bill_budget_marks(fg_budget_t *b)
{
    int now = level(b), marks = 0;
    if (now > b->warned) {
        if (b->warned < 80)
            marks |= FG_BUDGET_MARK_80;
        if (now >= 100)
            marks |= FG_BUDGET_MARK_100;
    }
    b->warned = now; /* (lower: a credit or a raised figure; the marks may come again) */
    return marks;
}

void fg_bill_budget_settle(fg_budget_t *b)
{
    b->warned = level(b);
}
