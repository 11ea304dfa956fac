/*
 * h_invoice.c - GET /v1/billing/invoices/{YYYY-MM}[?account=A][&format=csv]: the
 * month's invoice of each account, lines per user and GPU type (fg_bill_invoice), each
 * row split exactly at the month's UTC boundaries. An account's total is the sum of
 * its lines, to the micro-unit; the answer's total the sum of the accounts'.
 *
 * Each line has gpu_ms (charged less refunded, fg_bill_invoice's), held_gpu_ms (the GPU
 * time held) and gpu_seconds (held, in seconds, as the usage route's).
 *
 * Who sees what: an admin every account; an account manager the whole invoice of the
 * accounts they manage ("scope":"account"); a plain member the invoice of their
 * accounts restricted to their own lines ("scope":"own", totals of those lines).
 * Naming an account one is not a member of (not an admin) is 403.
 *
 * The rows of one account and month are read in chunks of INV_CHUNK and each chunk's
 * invoice added line by line, so memory does not grow with the ledger.
 *
 * Example: GET /v1/billing/invoices/2026-11?account=vision ->
 *   {"month":"2026-11","currency":"EUR","accounts":[{"account":"vision",
 *    "scope":"account","lines":[{"user":"ann","gpu_type":"H100","gpu_ms":...,
 *    "total_micros":3750000}],"total_micros":3750000}],"total_micros":3750000}
 */
#include "server/billfmt.h"
#include "server/billview.h"
#include "server/valid.h"

#include "common/xalloc.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INV_CHUNK 4096

/* One account's invoice being summed. */
typedef struct inv_acc {
    const char *account;
    const char *only_user; /* scope "own": this user's rows only; NULL: all */
    int year, month;
    fg_ledger_row_t *chunk; /* INV_CHUNK rows */
    size_t nchunk;
    fg_invoice_line_t *tmp; /* INV_CHUNK lines: one chunk's invoice */
    fg_invoice_line_t *lines;
    size_t n, cap;
    int err;
} inv_acc_t;

/* *acc += v; false on overflow. */
static bool add(int64_t *acc, int64_t v)
{
    return !__builtin_add_overflow(*acc, v, acc);
}

/* Adds line l to the account's line of the same user and GPU type. */
static bool merge_line(inv_acc_t *a, const fg_invoice_line_t *l)
{
    fg_invoice_line_t *d = NULL;
    for (size_t i = 0; i < a->n && !d; i++)
        if (!strcmp(a->lines[i].user, l->user) && !strcmp(a->lines[i].gpu_type, l->gpu_type))
            d = &a->lines[i];
    if (!d) {
        a->lines = fg_xgrow(a->lines, &a->cap, a->n + 1, sizeof *a->lines);
        d = &a->lines[a->n++];
        *d = *l;
        return true;
    }
    return add(&d->gpu_ms, l->gpu_ms) && add(&d->held_gpu_ms, l->held_gpu_ms) &&
           add(&d->charge_micros, l->charge_micros) && add(&d->refund_micros, l->refund_micros) &&
           add(&d->credit_micros, l->credit_micros) && add(&d->total_micros, l->total_micros);
}

/* Invoices the rows of the chunk and adds them to the lines; empties the chunk. */
static int flush(inv_acc_t *a)
{
    if (!a->nchunk)
        return FG_OK;
    fg_invoice_t inv = {.lines = a->tmp, .cap = INV_CHUNK};
    int rc = fg_bill_invoice(a->chunk, a->nchunk, a->account, a->year, a->month, &inv);
    a->nchunk = 0;
    if (rc)
        return rc;
    for (int i = 0; i < inv.n; i++)
        if (!merge_line(a, &inv.lines[i]))
            return FG_EINVAL;
    return FG_OK;
}

/* Collects one row (fg_store_ledger_foreach callback). */
static int take_row(const fg_ledger_row_t *r, void *arg)
{
    inv_acc_t *a = arg;
    if (a->only_user && strncmp(r->user, a->only_user, FG_NAME_MAX))
        return 0;
    a->chunk[a->nchunk++] = *r;
    if (a->nchunk == INV_CHUNK && (a->err = flush(a)))
        return 1;
    return 0;
}

/* Orders lines by user, then GPU type (as fg_bill_invoice). */
static int line_cmp(const void *x, const void *y)
{
    const fg_invoice_line_t *a = x, *b = y;
    int c = strcmp(a->user, b->user);
    return c ? c : strcmp(a->gpu_type, b->gpu_type);
}

/* The invoice of a->account: 0, or a store / billing error. */
static int invoice_account(fg_store_tx_t *tx, inv_acc_t *a)
{
    int64_t m0 = fg_bill_month_start_ms(a->year, a->month);
    int64_t m1 = a->month == 12 ? fg_bill_month_start_ms(a->year + 1, 1)
                                : fg_bill_month_start_ms(a->year, a->month + 1);
    fg_store_ledger_filter_t f = {.account = a->account, .from_ms = m0, .to_ms = m1};
    a->n = 0;
    a->err = 0;
    int rc = fg_store_ledger_foreach(tx, &f, take_row, a);
    if (a->err)
        return a->err;
    if (rc)
        return rc;
    if ((rc = flush(a)))
        return rc;
    if (a->n)
        qsort(a->lines, a->n, sizeof *a->lines, line_cmp);
    return 0;
}

/* Which accounts the answer holds, and in which scope: names[i], own[i]. */
typedef struct inv_plan {
    size_t n;
    char (*names)[FG_NAME_MAX];
    bool *own;
} inv_plan_t;

/* Plans the accounts for viewer v (and ?account=, may be NULL); false after a 403. */
static bool plan(srv_req_t *r, const srv_viewer_t *v, const char *account, inv_plan_t *p)
{
    srv_t *s = r->srv;
    if (account) {
        if (!v->admin && !srv_viewer_member(v, account)) {
            srv_reply_error(r, 403, "forbidden", "account",
                            "only an admin or a member of '%s' sees its invoice", account);
            return false;
        }
        p->names = fg_xcalloc(1, sizeof *p->names);
        p->own = fg_xcalloc(1, sizeof *p->own);
        snprintf(p->names[0], FG_NAME_MAX, "%s", account);
        p->own[0] = !srv_viewer_manages(v, account);
        p->n = 1;
        return true;
    }
    if (!v->admin) {
        p->names = fg_xcalloc(v->nmember + 1, sizeof *p->names);
        p->own = fg_xcalloc(v->nmember + 1, sizeof *p->own);
        for (size_t i = 0; i < v->nmember; i++) {
            memcpy(p->names[i], v->member[i], FG_NAME_MAX);
            p->own[i] = !v->manager[i];
        }
        p->n = v->nmember;
        return true;
    }
    pthread_mutex_lock(&s->mu);
    p->names = fg_xcalloc(s->naccounts + 1, sizeof *p->names);
    p->own = fg_xcalloc(s->naccounts + 1, sizeof *p->own);
    for (size_t i = 0; i < s->naccounts; i++)
        snprintf(p->names[p->n++], FG_NAME_MAX, "%s", s->accounts[i]->r.name);
    pthread_mutex_unlock(&s->mu);
    return true;
}

/* One line as JSON. */
static json_t *line_json(const fg_invoice_line_t *l)
{
    char sec[32];
    srv_bill_fmt_seconds(l->held_gpu_ms, sec);
    return json_pack("{s:s,s:s,s:I,s:I,s:f,s:I,s:I,s:I,s:I}", "user", l->user, "gpu_type",
                     l->gpu_type, "gpu_ms", (json_int_t)l->gpu_ms, "held_gpu_ms",
                     (json_int_t)l->held_gpu_ms, "gpu_seconds", strtod(sec, NULL), "charge_micros",
                     (json_int_t)l->charge_micros, "refund_micros", (json_int_t)l->refund_micros,
                     "credit_micros", (json_int_t)l->credit_micros, "total_micros",
                     (json_int_t)l->total_micros);
}

/* One CSV line: kind, account, scope, then a line's numbers (l NULL: empty user, type). */
static void csv_line(srv_buf_t *b, const char *kind, const char *account, const char *scope,
                     const fg_invoice_line_t *l, const char *currency)
{
    char sec[32];
    srv_bill_fmt_seconds(l->held_gpu_ms, sec);
    srv_csv_text(b, true, kind);
    srv_csv_text(b, false, account);
    srv_csv_text(b, false, scope);
    srv_csv_text(b, false, l->user);
    srv_csv_text(b, false, l->gpu_type);
    srv_csv_text(b, false, sec);
    srv_csv_int(b, false, l->gpu_ms);
    srv_csv_int(b, false, l->held_gpu_ms);
    srv_csv_int(b, false, l->charge_micros);
    srv_csv_int(b, false, l->refund_micros);
    srv_csv_int(b, false, l->credit_micros);
    srv_csv_int(b, false, l->total_micros);
    srv_csv_text(b, false, currency);
    srv_csv_end(b);
}

/* The sum of n lines (user and GPU type empty); false on overflow. */
static bool sum_lines(const fg_invoice_line_t *lines, size_t n, fg_invoice_line_t *t)
{
    memset(t, 0, sizeof *t);
    for (size_t i = 0; i < n; i++)
        if (!add(&t->gpu_ms, lines[i].gpu_ms) || !add(&t->held_gpu_ms, lines[i].held_gpu_ms) ||
            !add(&t->charge_micros, lines[i].charge_micros) ||
            !add(&t->refund_micros, lines[i].refund_micros) ||
            !add(&t->credit_micros, lines[i].credit_micros) ||
            !add(&t->total_micros, lines[i].total_micros))
            return false;
    return true;
}

/* The answer, JSON or CSV, for the planned accounts: 0 or an error (nothing sent). */
static int render(fg_store_tx_t *tx, inv_acc_t *a, const inv_plan_t *p, const srv_viewer_t *v,
                  const char *currency, bool csv, json_t *accounts, srv_buf_t *b,
                  fg_invoice_line_t *grand)
{
    if (csv) {
        static const char *const head[] = {
            "kind",          "account",      "scope",       "user",          "gpu_type",
            "gpu_seconds",   "gpu_ms",       "held_gpu_ms", "charge_micros", "refund_micros",
            "credit_micros", "total_micros", "currency"};
        for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
            srv_csv_text(b, i == 0, head[i]);
        srv_csv_end(b);
    }
    fg_invoice_line_t all[1];
    fg_invoice_line_t *tots = NULL;
    size_t ntots = 0, tcap = 0;
    for (size_t k = 0; k < p->n; k++) {
        a->account = p->names[k];
        a->only_user = p->own[k] ? v->user : NULL;
        int rc = invoice_account(tx, a);
        if (rc) {
            free(tots);
            return rc;
        }
        if (!a->n && v->admin && !p->own[k] && p->n > 1)
            continue; /* an admin's overview lists the accounts that have rows */
        fg_invoice_line_t t;
        if (!sum_lines(a->lines, a->n, &t)) {
            free(tots);
            return FG_EINVAL;
        }
        tots = fg_xgrow(tots, &tcap, ntots + 1, sizeof *tots);
        tots[ntots++] = t;
        const char *scope = p->own[k] ? "own" : "account";
        if (csv) {
            for (size_t i = 0; i < a->n; i++)
                csv_line(b, "line", a->account, scope, &a->lines[i], currency);
            csv_line(b, "account_total", a->account, scope, &t, currency);
        } else {
            json_t *lines = json_array();
            for (size_t i = 0; i < a->n; i++)
                json_array_append_new(lines, line_json(&a->lines[i]));
            json_t *o = line_json(&t);
            json_object_del(o, "user");
            json_object_del(o, "gpu_type");
            json_object_set_new(o, "account", json_string(a->account));
            json_object_set_new(o, "scope", json_string(scope));
            json_object_set_new(o, "lines", lines);
            json_array_append_new(accounts, o);
        }
    }
    bool ok = sum_lines(tots, ntots, all);
    free(tots);
    if (!ok)
        return FG_EINVAL;
    *grand = all[0];
    if (csv)
        csv_line(b, "total", "", "", grand, currency);
    return 0;
}

int h_billing_invoice(srv_req_t *r)
{
    srv_t *s = r->srv;
    assert(r->nseg == 4);
    char month[8];
    snprintf(month, sizeof month, "%s", r->seg[3]);
    int y, m;
    bool csv;
    if (strlen(r->seg[3]) != 7 || !srv_bill_parse_month(r->seg[3], &y, &m))
        return srv_reply_error(r, 400, "invalid_argument", "month",
                               "the month must be YYYY-MM, e.g. 2026-11");
    const char *account = srv_query(r, "account");
    if (account && !v_name_ok(account))
        return srv_reply_error(r, 400, "invalid_argument", "account",
                               "account must be an account name");
    if (!srv_bill_format(r, &csv))
        return SRV_YES;
    srv_viewer_t *v = fg_xmalloc(sizeof *v);
    srv_viewer_init(r, v);
    inv_plan_t p = {0};
    if (!plan(r, v, account, &p)) {
        free(v);
        return SRV_YES;
    }
    inv_acc_t a = {.year = y,
                   .month = m,
                   .chunk = fg_xmalloc(INV_CHUNK * sizeof *a.chunk),
                   .tmp = fg_xmalloc(INV_CHUNK * sizeof *a.tmp)};
    char currency[4] = "";
    json_t *accounts = json_array();
    srv_buf_t b = {0};
    fg_invoice_line_t grand;
    memset(&grand, 0, sizeof grand);
    fg_store_tx_t *tx = NULL;
    int rc = fg_store_read_begin(s->store, &tx);
    if (!rc) {
        rc = srv_bill_currency(tx, currency);
        if (!rc)
            rc = render(tx, &a, &p, v, currency, csv, accounts, &b, &grand);
        fg_store_read_end(tx);
    }
    int ret;
    if (rc == FG_EINVAL || rc == FG_ENOMEM) {
        ret = srv_reply_error(r, 500, "internal", NULL, "the ledger holds a malformed row");
    } else if (rc) {
        ret = srv_reply_error(r, 503, "unavailable", NULL, "store: %s", fg_store_strerror(rc));
    } else if (csv) {
        ret = srv_reply_csv(r, &b);
    } else {
        char sec[32];
        srv_bill_fmt_seconds(grand.held_gpu_ms, sec);
        json_t *o = json_pack("{s:s,s:I,s:I,s:s?,s:O,s:I,s:I,s:f,s:I}", "month", month, "from_ms",
                              (json_int_t)fg_bill_month_start_ms(y, m), "to_ms",
                              (json_int_t)(m == 12 ? fg_bill_month_start_ms(y + 1, 1)
                                                   : fg_bill_month_start_ms(y, m + 1)),
                              "currency", currency[0] ? currency : NULL, "accounts", accounts,
                              "gpu_ms", (json_int_t)grand.gpu_ms, "held_gpu_ms",
                              (json_int_t)grand.held_gpu_ms, "gpu_seconds", strtod(sec, NULL),
                              "total_micros", (json_int_t)grand.total_micros);
        ret = srv_reply_json(r, 200, o);
    }
    json_decref(accounts);
    free(b.p);
    free(a.chunk);
    free(a.tmp);
    free(a.lines);
    free(p.names);
    free(p.own);
    free(v);
    return ret;
}
