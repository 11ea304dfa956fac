/*
 * fairgpu/billing.h - the charging rules: pure C, no I/O, no clock reads, no globals.
 *
 * Inputs in, ledger rows out. The caller (the controller) gives an attempt record (who,
 * where, when, how many GPUs, how it ended) and a price lookup; this module says which
 * rows the ledger gets, to the micro-unit. It also splits rows at UTC month boundaries
 * and sums them into an invoice. docs/billing.md, "What is charged", states the rules.
 *
 * The one rounding rule (fg_bill_charge):
 *   charge_micros = round_half_up(gpu_ms * micros_per_gpu_hour / 3,600,000)
 * computed exactly in integers. Every amount of this module is a difference of that
 * function taken along one attempt's curve C(t) = charge(gpus * (t - start), rate), so
 * interim accruals, month parts and refunds always add up to the single-row charge.
 *
 * Example: 8 GPUs for 90 minutes at 2,500,000 micros/GPU-h: gpu_ms = 43,200,000,
 * charge = 43,200,000 * 2,500,000 / 3,600,000 = 30,000,000 micros (30.00 units).
 *
 * Errors are negative fg_err values (FG_EINVAL for out-of-bounds inputs).
 */
#ifndef FAIRGPU_BILLING_H
#define FAIRGPU_BILLING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fairgpu/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FG_BILL_MS_PER_HOUR 3600000LL
/* Bounds of one charge: at most 1024 GPUs for one (leap) year at 10^12 micros/GPU-h.
 * Their product stays under 2^128 and the charge (< 9.0e18) under INT64_MAX. */
#define FG_BILL_MAX_GPUS    FG_MAX_JOB_GPUS
#define FG_BILL_MAX_SPAN_MS (366LL * 86400 * 1000)
#define FG_BILL_MAX_GPU_MS  (FG_BILL_MAX_GPUS * FG_BILL_MAX_SPAN_MS)
#define FG_BILL_MAX_RATE    1000000000000LL
#define FG_BILL_NOTE_MAX    128

typedef enum fg_row_kind {
    FG_ROW_CHARGE = 0, /* GPU-time held; amount >= 0 */
    FG_ROW_REFUND,     /* a rule gives back (part of) an attempt's charge; amount <= 0 */
    FG_ROW_CREDIT,     /* an admin grant; amount <= 0 */
    FG_ROW_CORRECTION, /* an admin fix of another row; any sign */
} fg_row_kind_t;
const char *fg_row_kind_name(fg_row_kind_t k); /* "charge", "refund", ... */

/* Why a refund row gives money back (FG_REFUND_NONE for every other kind). Only the
 * lost work of a preemption was GPU time held: the other two take back time that was
 * not held (or not charged), so "held" GPU-ms = charged less those two. */
typedef enum fg_refund_why {
    FG_REFUND_NONE = 0,
    FG_REFUND_PAST_END,    /* live accrual ran past the end the agent reported */
    FG_REFUND_NOT_CHARGED, /* node_lost, user_setup_failed, not_started */
    FG_REFUND_LOST_WORK,   /* a preempted attempt's work since its last checkpoint */
} fg_refund_why_t;
const char *fg_refund_why_name(fg_refund_why_t w); /* "", "past_end", "not_charged", "lost_work" */

/* One append-only ledger row. The caller assigns ids (never 0) and stores rows as they
 * are; a correction is a new row whose refers_to names the row it corrects. */
typedef struct fg_ledger_row {
    uint64_t id;
    fg_row_kind_t kind;
    bool interim;       /* a live accrual of a running attempt (charge rows only) */
    fg_job_id_t job_id; /* 0 for credits not tied to a job */
    int32_t attempt;
    char account[FG_NAME_MAX];
    char user[FG_NAME_MAX];
    char node[FG_NAME_MAX];
    char gpu_type[FG_NAME_MAX];
    fg_prio_t priority;
    int64_t origin_ms; /* the attempt's start: the origin of its charge curve */
    int64_t start_ms;  /* [start_ms, end_ms): the GPU time this row is for, UTC ms */
    int64_t end_ms;
    int32_t gpus;
    fg_end_cause_t cause;
    int64_t rate;          /* micros per GPU-hour applied */
    int64_t gpu_ms;        /* gpus * (end_ms - start_ms), >= 0 whatever the sign */
    int64_t amount_micros; /* signed: refunds and credits negative */
    uint64_t refers_to;    /* the row it refunds or corrects, 0 if none */
    fg_refund_why_t refund_why;
    char note[FG_BILL_NOTE_MAX];
} fg_ledger_row_t;

/* One attempt as the controller records it (GET /v1/jobs/{id}/attempts). */
typedef struct fg_bill_attempt {
    fg_job_id_t job_id;
    int32_t attempt;
    const char *account, *user, *node, *gpu_type; /* copied into the rows */
    fg_prio_t priority;
    int32_t gpus;
    int64_t start_ms;
    int64_t end_ms;                 /* ignored by fg_bill_accrue */
    fg_end_cause_t cause;           /* ignored by fg_bill_accrue */
    int64_t checkpoint_interval_ms; /* declared interval, 0 if none */
    int64_t last_checkpoint_ms;     /* last checkpoint noticed, 0 if none (wins) */
} fg_bill_attempt_t;

/* The price book, asked once per row for the rate in force at `at_ms` (always the
 * attempt's start). Returns FG_OK and *micros_per_gpu_hour, or an error (FG_ENOENT). */
typedef int (*fg_price_fn)(void *ctx, const char *gpu_type, fg_prio_t prio, int64_t at_ms,
                           int64_t *micros_per_gpu_hour);

/* The rounding rule. FG_OK and *out, or FG_EINVAL when gpu_ms or rate is negative or
 * beyond FG_BILL_MAX_GPU_MS / FG_BILL_MAX_RATE. */
int fg_bill_charge(int64_t gpu_ms, int64_t rate, int64_t *out);

/* True when an attempt ended this way is not charged (node_lost, user_setup_failed,
 * not_started): its charge is refunded in full. */
bool fg_bill_cause_free(fg_end_cause_t c);

/* Live accrual of a running attempt: the interim charge row for [charged_to_ms, now_ms),
 * equal to C(now) - C(charged_to) on the attempt's curve (charged_to_ms = start_ms when
 * nothing accrued yet). *n_out is 0 when now_ms <= charged_to_ms. Rows get ids *next_id,
 * *next_id + 1, ... (incremented). */
int fg_bill_accrue(const fg_bill_attempt_t *a, fg_price_fn price, void *ctx, int64_t charged_to_ms,
                   int64_t now_ms, uint64_t *next_id, fg_ledger_row_t *out, int *n_out);

#define FG_BILL_ATTEMPT_ROWS_MAX 3
/* The rows of an ended attempt, given how far live accrual charged it (charged_to_ms, the
 * start if it never accrued): exactly one final charge row for [charged_to_ms, end_ms)
 * (C(end) - C(charged_to), possibly 0), then refund rows that refer to it:
 *   - accruals past the reported end (charged_to_ms > end_ms, the agent's end came in
 *     after an accrual): the final row is empty and C(charged_to) - C(end) comes back;
 *   - the whole charge C(end) - C(start) if fg_bill_cause_free(cause);
 *   - the lost work C(end) - C(last checkpoint) of a preempted attempt.
 * So its charge rows less the refund of accruals past the end are C(end). out has room for
 * FG_BILL_ATTEMPT_ROWS_MAX rows. On an error no row is made and *next_id is unchanged. */
int fg_bill_attempt_rows(const fg_bill_attempt_t *a, fg_price_fn price, void *ctx,
                         int64_t charged_to_ms, uint64_t *next_id, fg_ledger_row_t *out,
                         int *n_out);

/* ---------------------------------------------------------------- months */

/* Milliseconds (UTC, since 1970) at 00:00 of the first day of year-month (1..12). */
int64_t fg_bill_month_start_ms(int year, int month);
/* The year and month (UTC) holding t_ms. */
void fg_bill_month_of(int64_t t_ms, int *year, int *month);

/* A row's part in one month: its amount and GPU-ms there. */
typedef struct fg_month_part {
    int year, month;
    int64_t gpu_ms;
    int64_t amount_micros;
} fg_month_part_t;

/* Splits a row at UTC month boundaries: charge and refund rows along their attempt's
 * curve (so the parts of all the rows of one attempt in a month are C(month end) -
 * C(month start) clipped to it), credits and corrections whole in the month of their
 * start_ms. Writes at most cap parts in time order; returns their number (> cap: need
 * more room, nothing useful written) or FG_EINVAL for a row these rules did not make. */
int fg_bill_split_months(const fg_ledger_row_t *r, fg_month_part_t *parts, int cap);

/* A row's part in [t0, t1) (t0 <= t1), by the same rules as the month split: a charge or
 * refund row gives C(min(end, t1)) - C(max(start, t0)) on its attempt's curve (with the
 * row's sign; 0 when it does not overlap) and *gpu_ms its GPUs times that overlap (>= 0
 * whatever the sign); a credit or correction gives its whole amount (and 0 GPU-ms) when
 * t0 <= start_ms < t1, else 0. Parts over a partition of time add up to the row. For
 * budget periods (charges since a time) and usage over any range. FG_OK, or FG_EINVAL
 * for t0 > t1 or a row these rules did not make. */
int fg_bill_part_in(const fg_ledger_row_t *r, int64_t t0, int64_t t1, int64_t *gpu_ms,
                    int64_t *amount_micros);

/* ---------------------------------------------------------------- budgets */

/* A budget's spend in its period and the warnings it gave (docs/billing.md, "Budgets").
 * The spend is the parts in [from_ms, to_ms) of the rows added (fg_bill_part_in), so it
 * is the same sum an invoice makes for those rows. A mark (80 %, 100 %) is reported once
 * when the spend reaches it, again only after the spend went back below it (a credit,
 * a raised figure). Example: budget 1000, rows of 500, 400, 200: the second reports 80 %,
 * the third 100 %; a credit of -500 then lowers the level to 60 %, so 80 % may come
 * again. */
typedef struct fg_budget {
    int64_t budget_micros;  /* >= 0 */
    int64_t from_ms, to_ms; /* the period; a grant's to_ms is INT64_MAX */
    int64_t spent_micros;
    int warned; /* the last mark reported: 0, 80 or 100 */
} fg_budget_t;

#define FG_BUDGET_MARK_80  1
#define FG_BUDGET_MARK_100 2
/* Percent spent, rounded down (budget 0: 100 once anything is spent); capped at 1000. */
int fg_bill_budget_pct(const fg_budget_t *b);
/* Adds row r's part in the period. FG_OK or FG_EINVAL (a row these rules did not make). */
int fg_bill_budget_add(fg_budget_t *b, const fg_ledger_row_t *r);
/* The marks newly reached since the last call (FG_BUDGET_MARK_* bits, both when one row
 * crossed both), remembered as reported; a spend back below a mark forgets it. */
int fg_bill_budget_marks(fg_budget_t *b);
/* Takes the level reached as already reported (after reading the spend back at a
 * restart, or a new figure already over a mark): no mark for what was already there. */
void fg_bill_budget_settle(fg_budget_t *b);

/* ---------------------------------------------------------------- invoices */

typedef struct fg_invoice_line {
    char user[FG_NAME_MAX];
    char gpu_type[FG_NAME_MAX];
    int64_t gpu_ms;        /* charged minus refunded GPU-ms in the month */
    int64_t held_gpu_ms;   /* GPU time held: charged GPU-ms less those refunded as past
                              the end or not charged (lost work was held) */
    int64_t charge_micros; /* >= 0 */
    int64_t refund_micros; /* <= 0 */
    int64_t credit_micros; /* credits and corrections */
    int64_t total_micros;  /* the sum of the three */
} fg_invoice_line_t;

typedef struct fg_invoice {
    fg_invoice_line_t *lines; /* caller-owned, room for cap lines */
    int cap;
    int n;                /* lines written, sorted by user then GPU type */
    int64_t total_micros; /* the sum of the lines */
    int64_t held_gpu_ms;  /* the sum of the lines' held GPU-ms */
} fg_invoice_t;

/* The invoice of `account` for year-month: each row's part in that month, summed per
 * user and GPU type (found by a hash: linear in the rows whatever the number of lines).
 * FG_OK, FG_EINVAL for a bad month or row, FG_ENOMEM when more than inv->cap lines are
 * needed (or memory runs out), FG_EINVAL also on an int64 overflow. */
int fg_bill_invoice(const fg_ledger_row_t *rows, size_t n, const char *account, int year, int month,
                    fg_invoice_t *inv);

#ifdef __cplusplus
}
#endif
#endif
