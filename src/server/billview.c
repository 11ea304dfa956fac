/*
 * billview.c - the shared parts of the billing report routes (billview.h): the
 * viewer's rights, the currency, a row's part in a time range and CSV output.
 *
 * Example: a charge row of 1 GPU over [10:00, 12:00) at 1,000,001 micros/GPU-h, asked
 * for [11:00, 13:00), has the part C(12:00) - C(11:00) = 2,000,002 - 1,000,001 =
 * 1,000,001 micros and 3,600,000 GPU-ms (fg_bill_part_in, the rule of the month split).
 */
#include "server/billview.h"
#include "server/billfmt.h"

#include "common/xalloc.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void srv_viewer_init(srv_req_t *r, srv_viewer_t *v)
{
    srv_t *s = r->srv;
    memset(v, 0, sizeof *v);
    v->admin = r->admin;
    pthread_mutex_lock(&s->mu);
    srv_user_t *u = srv_user_by_id(s, r->user_id);
    snprintf(v->user, sizeof v->user, "%s", u && u->r.username ? u->r.username : "");
    for (size_t i = 0; i < s->nmembers && v->nmember < SRV_VIEW_ACCOUNTS; i++) {
        const srv_member_t *m = s->members[i];
        if (m->deleted || m->r.user_id != r->user_id || !m->r.account)
            continue;
        snprintf(v->member[v->nmember], FG_NAME_MAX, "%s", m->r.account);
        v->manager[v->nmember++] = m->r.is_manager;
    }
    pthread_mutex_unlock(&s->mu);
}

/* The index of account a in v's memberships, or -1. */
static int member_index(const srv_viewer_t *v, const char *a)
{
    for (size_t i = 0; i < v->nmember; i++)
        if (!strncmp(v->member[i], a, FG_NAME_MAX))
            return (int)i;
    return -1;
}

bool srv_viewer_manages(const srv_viewer_t *v, const char *a)
{
    int i = member_index(v, a);
    return v->admin || (i >= 0 && v->manager[i]);
}

bool srv_viewer_member(const srv_viewer_t *v, const char *a)
{
    return member_index(v, a) >= 0;
}

bool srv_viewer_sees(const srv_viewer_t *v, const fg_ledger_row_t *r)
{
    return v->admin || (v->user[0] && !strncmp(r->user, v->user, FG_NAME_MAX)) ||
           srv_viewer_manages(v, r->account);
}

int srv_bill_currency(fg_store_tx_t *tx, char out[4])
{
    fg_store_price_list_t l = {0};
    out[0] = '\0';
    int rc = fg_store_price_list(tx, &l);
    if (rc)
        return rc;
    if (l.n && l.items[l.n - 1].currency)
        snprintf(out, 4, "%s", l.items[l.n - 1].currency);
    fg_store_price_list_free(&l);
    return 0;
}

int srv_bill_part_in(const fg_ledger_row_t *r, int64_t t0, int64_t t1, int64_t *gpu_ms,
                     int64_t *amount)
{
    *gpu_ms = *amount = 0;
    return fg_bill_part_in(r, t0 ? t0 : INT64_MIN, t1 ? t1 : INT64_MAX, gpu_ms, amount);
}

void srv_csv_text(srv_buf_t *b, bool first, const char *s)
{
    char cell[2 * FG_BILL_NOTE_MAX + 8], *p = cell;
    if (!first)
        srv_buf_put(b, ",", 1);
    size_t n = srv_csv_cell(s, cell, sizeof cell);
    if (n >= sizeof cell) { /* a long text: its own room */
        p = fg_xmalloc(n + 1);
        srv_csv_cell(s, p, n + 1);
    }
    srv_buf_put(b, p, n);
    if (p != cell)
        free(p);
}

void srv_csv_int(srv_buf_t *b, bool first, int64_t v)
{
    if (!first)
        srv_buf_put(b, ",", 1);
    srv_buf_i64(b, v);
}

void srv_csv_end(srv_buf_t *b)
{
    srv_buf_put(b, "\r\n", 2);
}

void srv_bill_fmt_seconds(int64_t gpu_ms, char out[32])
{
    int64_t a = gpu_ms < 0 ? -gpu_ms : gpu_ms;
    snprintf(out, 32, "%s%" PRId64 ".%03d", gpu_ms < 0 ? "-" : "", a / 1000, (int)(a % 1000));
}

int srv_reply_csv(srv_req_t *r, srv_buf_t *b)
{
    char *p = b->p;
    size_t n = b->n;
    *b = (srv_buf_t){0};
    if (!p)
        return srv_reply_text(r, 200, "text/csv; charset=utf-8", (char *)"", 0, false);
    return srv_reply_text(r, 200, "text/csv; charset=utf-8", p, n, true);
}

bool srv_bill_format(srv_req_t *r, bool *csv)
{
    const char *f = srv_query(r, "format");
    *csv = f && !strcmp(f, "csv");
    if (f && !*csv && strcmp(f, "json")) {
        srv_reply_error(r, 400, "invalid_argument", "format", "format must be json or csv");
        return false;
    }
    return true;
}
