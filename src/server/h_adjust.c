/*
 * h_adjust.c - POST /v1/billing/adjustments (admin): one credit or correction row in
 * the ledger, with its audit entry `billing.adjustment` in the same commit.
 *
 * The body (adjust_body.h states the sign rules) is checked whole first; then the
 * account (and the user, if named) must exist, and a row named by refers_to must exist
 * in the same account (a correction takes the job, attempt, GPU type, node and priority
 * of the row it corrects, and its user unless one is named). Rows are never deleted, so
 * what was checked still holds at the commit. The row's time is now: a credit counts in
 * the month it is made.
 *
 * Example: POST {"kind":"credit","account":"vision","amount_micros":-5000000,
 *   "note":"outage"} -> 201 {"id":"42","kind":"credit","amount_micros":-5000000,...}
 */
#include "server/adjust_body.h"
#include "server/billview.h"

#include "common/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A row as JSON (the answer and the audit entry's details). */
static json_t *row_json(const fg_ledger_row_t *r)
{
    char id[24], job[24];
    snprintf(id, sizeof id, "%llu", (unsigned long long)r->id);
    snprintf(job, sizeof job, "%llu", (unsigned long long)r->job_id);
    return json_pack(
        "{s:s,s:s,s:s?,s:i,s:s,s:s,s:s,s:I,s:I,s:o,s:s}", "id", id, "kind",
        fg_row_kind_name(r->kind), "job_id", r->job_id ? job : NULL, "attempt", r->attempt,
        "account", r->account, "user", r->user, "gpu_type", r->gpu_type, "start_ms",
        (json_int_t)r->start_ms, "amount_micros", (json_int_t)r->amount_micros, "refers_to",
        r->refers_to ? json_integer((json_int_t)r->refers_to) : json_null(), "note", r->note);
}

/* The row looked for by refers_to, once found. */
typedef struct find_row {
    uint64_t id;
    bool found;
    fg_ledger_row_t row;
} find_row_t;

static int find_cb(const fg_ledger_row_t *r, void *arg)
{
    find_row_t *f = arg;
    if (r->id != f->id)
        return 0;
    f->row = *r;
    f->found = true;
    return 1;
}

/* Looks row id up in the ledger: 0 (f->found says whether) or a store error. */
static int find_row(srv_t *s, const char *account, find_row_t *f)
{
    fg_store_tx_t *tx = NULL;
    int rc = fg_store_read_begin(s->store, &tx);
    if (rc)
        return rc;
    fg_store_ledger_filter_t flt = {.account = account};
    rc = fg_store_ledger_foreach(tx, &flt, find_cb, f);
    fg_store_read_end(tx);
    return rc == 1 ? 0 : rc;
}

/* The names in the body exist: false after a 400 answer. */
static bool names_exist(srv_req_t *r, const srv_adjust_t *in)
{
    srv_t *s = r->srv;
    pthread_mutex_lock(&s->mu);
    bool acct = srv_account_by_name(s, in->account) != NULL;
    bool user = !in->user[0] || srv_user_by_name(s, in->user) != NULL;
    pthread_mutex_unlock(&s->mu);
    if (!acct)
        srv_reply_error(r, 400, "invalid_argument", "account", "no account '%s'", in->account);
    else if (!user)
        srv_reply_error(r, 400, "invalid_argument", "user", "no user '%s'", in->user);
    return acct && user;
}

/* The new row of adjustment in (ref: the row it refers to, or NULL). */
static void make_row(const srv_adjust_t *in, const fg_ledger_row_t *ref, int64_t now,
                     fg_ledger_row_t *row)
{
    memset(row, 0, sizeof *row);
    row->kind = in->kind;
    if (ref) {
        row->job_id = ref->job_id;
        row->attempt = ref->attempt;
        memcpy(row->node, ref->node, FG_NAME_MAX);
        memcpy(row->gpu_type, ref->gpu_type, FG_NAME_MAX);
        memcpy(row->user, ref->user, FG_NAME_MAX);
        row->priority = ref->priority;
    }
    memcpy(row->account, in->account, FG_NAME_MAX);
    if (in->user[0])
        memcpy(row->user, in->user, FG_NAME_MAX);
    row->origin_ms = row->start_ms = row->end_ms = now;
    row->amount_micros = in->amount_micros;
    row->refers_to = in->refers_to;
    memcpy(row->note, in->note, sizeof row->note);
}

int h_billing_adjust(srv_req_t *r)
{
    srv_t *s = r->srv;
    json_t *body = srv_body_object(r);
    if (!body)
        return SRV_YES;
    srv_adjust_t in;
    srv_adjust_err_t err;
    int ret = SRV_YES;
    if (srv_adjust_parse(body, &in, &err)) {
        ret = srv_reply_error(r, 400, err.code, err.field, "%s", err.msg);
        goto out;
    }
    if (!names_exist(r, &in))
        goto out;
    find_row_t *f = fg_xcalloc(1, sizeof *f);
    f->id = in.refers_to;
    int rc = in.refers_to ? find_row(s, in.account, f) : 0;
    if (rc) {
        free(f);
        ret = srv_reply_error(r, 503, "unavailable", NULL, "store: %s", fg_store_strerror(rc));
        goto out;
    }
    if (in.refers_to && !f->found) {
        free(f);
        ret = srv_reply_error(r, 400, "invalid_argument", "refers_to",
                              "no ledger row %llu in account '%s'",
                              (unsigned long long)in.refers_to, in.account);
        goto out;
    }
    fg_ledger_row_t row;
    make_row(&in, f->found ? &f->row : NULL, srv_now_ms(), &row);
    free(f);
    row.id = srv_ledger_ids(s, 1);
    json_t *rj = row_json(&row);
    char *details = json_dumps(rj, JSON_COMPACT);
    fg_store_audit_t a = {.time = srv_now(),
                          .admin_user_id = r->user_id,
                          .action = (char *)"billing.adjustment",
                          .target = row.account,
                          .details_json = details};
    srv_batch_t bt = {0};
    srv_batch_add(&bt, OP_LEDGER, &row);
    srv_batch_add(&bt, OP_AUDIT, &a);
    rc = srv_batch_commit(s, &bt);
    srv_batch_free(&bt);
    free(details);
    if (rc) {
        json_decref(rj);
        ret = srv_reply_error(r, (unsigned)srv_store_err_status(rc), "unavailable", NULL,
                              "store: %s", fg_store_strerror(rc));
    } else {
        ret = srv_reply_json(r, 201, rj);
    }
out:
    json_decref(body);
    return ret;
}
