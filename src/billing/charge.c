/*
 * charge.c - what one attempt is charged: the rounding rule, live accrual, final rows.
 *
 * Every amount is taken on the attempt's charge curve
 *     C(t) = round_half_up(gpus * (t - start) * rate / 3,600,000)
 * with the rate in force at the attempt's start (a price change never touches a running
 * attempt, nor a past charge). A row for [a, b) of the attempt is C(b) - C(a): interim
 * accruals, the final charge and refunds telescope, so however often the controller
 * accrues, the attempt's charge rows add up to C(end) exactly, the single-row charge.
 * Rounding each row on its own gpu_ms would not: three 20-minute rows of 1 GPU at
 * 1 micro/GPU-h round to 0 each, the hour to 1.
 *
 * Example: 2 GPUs from 10:00:00 at 3,600,000 micros/GPU-h (1 micro per GPU-ms), accrued
 * at 10:01 (120,000 micros), 10:02 (120,000), preempted at 10:02:30 (60,000) with its
 * last checkpoint at 10:01:30: refund C(10:02:30) - C(10:01:30) = 120,000 micros; the
 * attempt pays 180,000 for the 90 s it kept.
 *
 * An attempt ended by node_lost, user_setup_failed or not_started gets its final charge
 * row as any other (so accruals are closed the same way) and a refund of the whole
 * charge: it costs nothing, and the ledger still shows what the GPUs were held for.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "fairgpu/billing.h"

const char *fg_row_kind_name(fg_row_kind_t k)
{
    static const char *const n[] = {"charge", "refund", "credit", "correction"};
    return (unsigned)k <= FG_ROW_CORRECTION ? n[k] : "?";
}

const char *fg_refund_why_name(fg_refund_why_t w)
{
    static const char *const n[] = {"", "past_end", "not_charged", "lost_work"};
    return (unsigned)w <= FG_REFUND_LOST_WORK ? n[w] : "?";
}

/* The rounding rule, exact: the product fits in 128 bits (< 3.3e13 * 1e12) and the
 * quotient in int64 (< 9.0e18) within the stated bounds. */
int fg_bill_charge(int64_t gpu_ms, int64_t rate, int64_t *out)
{
    if (gpu_ms < 0 || gpu_ms > FG_BILL_MAX_GPU_MS || rate < 0 || rate > FG_BILL_MAX_RATE)
        return FG_EINVAL;
    unsigned __int128 p = (unsigned __int128)(uint64_t)gpu_ms * (uint64_t)rate;
    unsigned __int128 q = (p + FG_BILL_MS_PER_HOUR / 2) / FG_BILL_MS_PER_HOUR;
    assert(q <= (unsigned __int128)INT64_MAX);
    *out = (int64_t)q;
    return FG_OK;
}

bool fg_bill_cause_free(fg_end_cause_t c)
{
    return c == FG_END_NODE_LOST || c == FG_END_SETUP_FAILED || c == FG_END_NOT_STARTED;
}

/* C(t) of an attempt's curve, t in [start, start + FG_BILL_MAX_SPAN_MS]. */
static int curve(int32_t gpus, int64_t origin_ms, int64_t rate, int64_t t_ms, int64_t *out)
{
    if (t_ms < origin_ms || t_ms - origin_ms > FG_BILL_MAX_SPAN_MS)
        return FG_EINVAL;
    return fg_bill_charge((int64_t)gpus * (t_ms - origin_ms), rate, out);
}

/* Copies a name into a row field; FG_EINVAL when missing or too long. */
static int copy_name(char *dst, const char *src)
{
    if (!src || strlen(src) >= FG_NAME_MAX)
        return FG_EINVAL;
    memcpy(dst, src, strlen(src) + 1);
    return FG_OK;
}

/* Checks what every attempt needs, looks its rate up and fills the common row fields. */
static int row_init(const fg_bill_attempt_t *a, fg_price_fn price, void *ctx, fg_ledger_row_t *r)
{
    if (!a || !price || !r || a->job_id == 0 || a->gpus < 1 || a->gpus > FG_BILL_MAX_GPUS ||
        a->start_ms < 0 || (unsigned)a->priority > FG_PRIO_HIGH)
        return FG_EINVAL;
    memset(r, 0, sizeof *r);
    if (copy_name(r->account, a->account) || copy_name(r->user, a->user) ||
        copy_name(r->node, a->node ? a->node : "") || copy_name(r->gpu_type, a->gpu_type))
        return FG_EINVAL;
    int64_t rate = 0;
    int rc = price(ctx, a->gpu_type, a->priority, a->start_ms, &rate);
    if (rc != FG_OK)
        return rc < 0 ? rc : FG_ENOENT;
    if (rate < 0 || rate > FG_BILL_MAX_RATE)
        return FG_EINVAL;
    r->kind = FG_ROW_CHARGE;
    r->job_id = a->job_id;
    r->attempt = a->attempt;
    r->priority = a->priority;
    r->origin_ms = a->start_ms;
    r->gpus = a->gpus;
    r->cause = a->cause;
    r->rate = rate;
    return FG_OK;
}

/* Sets r to cover [from, to) of its curve with sign +1 (charge) or -1 (refund). */
static int row_span(fg_ledger_row_t *r, int64_t from, int64_t to, int sign)
{
    int64_t cf, ct;
    if (from > to || curve(r->gpus, r->origin_ms, r->rate, from, &cf) ||
        curve(r->gpus, r->origin_ms, r->rate, to, &ct))
        return FG_EINVAL;
    assert(ct >= cf);
    r->start_ms = from;
    r->end_ms = to;
    r->gpu_ms = (int64_t)r->gpus * (to - from);
    r->amount_micros = sign * (ct - cf);
    return FG_OK;
}

int fg_bill_accrue(const fg_bill_attempt_t *a, fg_price_fn price, void *ctx, int64_t charged_to_ms,
                   int64_t now_ms, uint64_t *next_id, fg_ledger_row_t *out, int *n_out)
{
    if (!n_out || !next_id)
        return FG_EINVAL;
    *n_out = 0;
    if (!a || charged_to_ms < a->start_ms)
        return FG_EINVAL;
    if (now_ms <= charged_to_ms)
        return FG_OK;
    int rc = row_init(a, price, ctx, out);
    if (rc != FG_OK)
        return rc;
    out->interim = true;
    out->cause = FG_END_COMPLETED; /* not ended: the field is meaningless on interim rows */
    if ((rc = row_span(out, charged_to_ms, now_ms, 1)) != FG_OK)
        return rc;
    snprintf(out->note, sizeof out->note, "accrual");
    out->id = (*next_id)++;
    *n_out = 1;
    return FG_OK;
}

/* Where a preempted attempt's kept work ends: its last checkpoint noticed, else the last
 * multiple of its declared interval, else its start (no checkpoint: all of it is lost). */
static int64_t kept_until(const fg_bill_attempt_t *a)
{
    if (a->last_checkpoint_ms > 0) {
        int64_t k = a->last_checkpoint_ms;
        return k < a->start_ms ? a->start_ms : k > a->end_ms ? a->end_ms : k;
    }
    if (a->checkpoint_interval_ms > 0) {
        int64_t ran = a->end_ms - a->start_ms;
        return a->start_ms + ran / a->checkpoint_interval_ms * a->checkpoint_interval_ms;
    }
    return a->start_ms;
}

/* Appends to out[*n] a refund of [from, to) on the curve of the final row out[0]. */
static int add_refund(fg_ledger_row_t *out, int *n, int64_t from, int64_t to, fg_refund_why_t why,
                      const char *note)
{
    assert(*n >= 1 && *n < FG_BILL_ATTEMPT_ROWS_MAX);
    fg_ledger_row_t *r = &out[*n];
    *r = out[0];
    r->kind = FG_ROW_REFUND;
    r->refund_why = why;
    int rc = row_span(r, from, to, -1);
    if (rc != FG_OK)
        return rc;
    snprintf(r->note, sizeof r->note, "%s", note);
    (*n)++;
    return FG_OK;
}

int fg_bill_attempt_rows(const fg_bill_attempt_t *a, fg_price_fn price, void *ctx,
                         int64_t charged_to_ms, uint64_t *next_id, fg_ledger_row_t *out, int *n_out)
{
    if (!n_out || !next_id || !out)
        return FG_EINVAL;
    *n_out = 0;
    if (!a || (unsigned)a->cause > FG_END_CAUSE_MAX || a->end_ms < a->start_ms ||
        charged_to_ms < a->start_ms || a->checkpoint_interval_ms < 0 || a->last_checkpoint_ms < 0)
        return FG_EINVAL;
    /* the final charge closes the accruals: [charged_to, end), empty if they went past it */
    int64_t close = charged_to_ms > a->end_ms ? charged_to_ms : a->end_ms;
    int rc = row_init(a, price, ctx, &out[0]);
    if (rc == FG_OK)
        rc = row_span(&out[0], charged_to_ms, close, 1);
    if (rc != FG_OK)
        return rc;
    snprintf(out[0].note, sizeof out[0].note, "%s", fg_end_cause_name(a->cause));
    int n = 1;
    char note[FG_BILL_NOTE_MAX];
    if (close > a->end_ms) {
        snprintf(note, sizeof note, "accrued past the end at %lld ms", (long long)a->end_ms);
        rc = add_refund(out, &n, a->end_ms, close, FG_REFUND_PAST_END, note);
    }
    int64_t lost_from = a->end_ms; /* refund [lost_from, end) */
    fg_refund_why_t why = FG_REFUND_NONE;
    if (fg_bill_cause_free(a->cause)) {
        lost_from = a->start_ms;
        why = FG_REFUND_NOT_CHARGED;
        snprintf(note, sizeof note, "%s: not charged", fg_end_cause_name(a->cause));
    } else if (a->cause == FG_END_PREEMPTED) {
        lost_from = kept_until(a);
        why = FG_REFUND_LOST_WORK;
        snprintf(note, sizeof note, "preempted: work lost since checkpoint at %lld ms",
                 (long long)lost_from);
    }
    if (rc == FG_OK && lost_from < a->end_ms)
        rc = add_refund(out, &n, lost_from, a->end_ms, why, note);
    if (rc != FG_OK)
        return rc;
    /* ids only once every row is made: a failure consumes none */
    for (int i = 0; i < n; i++) {
        out[i].id = *next_id + (uint64_t)i;
        out[i].refers_to = i ? out[0].id : 0;
    }
    *next_id += (uint64_t)n;
    *n_out = n;
    return FG_OK;
}
