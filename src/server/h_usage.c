/*
 * h_usage.c - GET /v1/billing/usage: the ledger's line items in a time range.
 *
 *   ?from=&to=        [from, to): ms since the epoch or RFC 3339 (billfmt.h); either
 *                     may be left out (unbounded)
 *   ?user=&account=&gpu_type=&job=   filters
 *   ?format=csv       the same lines as CSV (text/csv), a "total" line last
 *
 * One line per job attempt (its charge, refund rows summed, each clipped to the range
 * on the attempt's curve, so a range that is a month gives the invoice's numbers), and
 * one line per credit or correction row. Totals are the sums of the lines. Who sees
 * what: billview.h; asking for rows one may not see is 403, never an empty answer.
 *
 * Example: GET /v1/billing/usage?from=2026-11-01&to=2026-12-01&account=vision ->
 *   {"from_ms":..., "items":[{"kind":"attempt","job_id":"7","attempt":1,
 *    "gpu_seconds":5400.0,"charge_micros":3750000,"cost_micros":3750000,...}],
 *    "totals":{"cost_micros":3750000,...}}
 */
#include "server/billfmt.h"
#include "server/billview.h"
#include "server/valid.h"

#include "common/log.h"
#include "common/xalloc.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The validated query. */
typedef struct usage_q {
    int64_t from, to; /* 0: unbounded */
    const char *user, *account, *gpu_type;
    uint64_t job;
    bool csv;
} usage_q_t;

/* One line: an attempt's rows, or one credit / correction row. */
typedef struct uline {
    fg_row_kind_t kind; /* FG_ROW_CHARGE: an attempt line */
    uint64_t job_id, row_id, refers_to;
    int32_t attempt, gpus;
    char account[FG_NAME_MAX], user[FG_NAME_MAX], node[FG_NAME_MAX], gpu_type[FG_NAME_MAX];
    fg_prio_t prio;
    int64_t rate, start_ms, end_ms; /* the extent of its parts in the range */
    int64_t held_ms, billed_ms;     /* GPU-ms held (billing.h) and charged less refunded */
    int64_t charge, refund, credit;
    bool ended; /* its final charge row was seen */
    fg_end_cause_t cause;
    char note[FG_BILL_NOTE_MAX];
} uline_t;

/* The lines being summed, with an index of attempt lines by (job, attempt). */
typedef struct usage_acc {
    const usage_q_t *q;
    const srv_viewer_t *v;
    uline_t *lines;
    size_t n, cap;
    int32_t *slots; /* open addressing: line index + 1, 0 empty */
    size_t nslots;
    int err;
} usage_acc_t;

/* A GPU type name: 1-63 of A-Z a-z 0-9 . _ -. */
static bool type_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n >= FG_NAME_MAX)
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '.' || *p == '-'))
            return false;
    return true;
}

/* Parses and checks the query into *q; false after a 400 answer. */
static bool parse_query(srv_req_t *r, usage_q_t *q)
{
    memset(q, 0, sizeof *q);
    const char *f = srv_query(r, "from"), *t = srv_query(r, "to"), *j = srv_query(r, "job");
    static const char time_msg[] = "must be a time: ms since the epoch or RFC 3339 (2026-11-01, "
                                   "2026-11-01T12:00:00Z)";
    if (f && !srv_bill_parse_time(f, &q->from)) {
        srv_reply_error(r, 400, "invalid_argument", "from", "from %s", time_msg);
        return false;
    }
    if (t && !srv_bill_parse_time(t, &q->to)) {
        srv_reply_error(r, 400, "invalid_argument", "to", "to %s", time_msg);
        return false;
    }
    if (t && (q->to <= 0 || (f && q->to <= q->from))) {
        srv_reply_error(r, 400, "invalid_argument", "to", "to must be later than from");
        return false;
    }
    q->user = srv_query(r, "user");
    q->account = srv_query(r, "account");
    q->gpu_type = srv_query(r, "gpu_type");
    if (q->user && !v_name_ok(q->user)) {
        srv_reply_error(r, 400, "invalid_argument", "user", "user must be a username");
        return false;
    }
    if (q->account && !v_name_ok(q->account)) {
        srv_reply_error(r, 400, "invalid_argument", "account", "account must be an account name");
        return false;
    }
    if (q->gpu_type && !type_ok(q->gpu_type)) {
        srv_reply_error(r, 400, "invalid_argument", "gpu_type", "gpu_type must be a GPU type name");
        return false;
    }
    if (j && !srv_parse_job_id(j, &q->job)) {
        srv_reply_error(r, 400, "invalid_argument", "job", "job must be a job id");
        return false;
    }
    return srv_bill_format(r, &q->csv);
}

/* Whether the viewer may ask for q: false after a 403 answer. A manager may name a
 * user who is a member of an account they manage (and, with account=, that account). */
static bool may_ask(srv_req_t *r, const srv_viewer_t *v, const usage_q_t *q)
{
    if (v->admin || !q->user || !strcmp(q->user, v->user))
        return true;
    bool ok = false;
    if (q->account) {
        ok = srv_viewer_manages(v, q->account);
    } else {
        srv_t *s = r->srv;
        pthread_mutex_lock(&s->mu);
        srv_user_t *u = srv_user_by_name(s, q->user);
        for (size_t i = 0; u && i < s->nmembers && !ok; i++) {
            const srv_member_t *m = s->members[i];
            ok = !m->deleted && m->r.user_id == u->r.id && srv_viewer_manages(v, m->r.account);
        }
        pthread_mutex_unlock(&s->mu);
    }
    if (!ok)
        srv_reply_error(r, 403, "forbidden", "user",
                        "only an admin, or a manager of their account, sees another user's usage");
    return ok;
}

/* The hash slot of (job, attempt). */
static size_t slot_of(const usage_acc_t *a, uint64_t job, int32_t attempt)
{
    uint64_t h =
        (job * 0x9E3779B97F4A7C15ULL) ^ ((uint64_t)(uint32_t)attempt * 0xC2B2AE3D27D4EB4FULL);
    return (size_t)(h >> 17) & (a->nslots - 1);
}

/* Rebuilds the index with twice the slots. */
static void grow_index(usage_acc_t *a)
{
    free(a->slots);
    a->nslots = a->nslots ? a->nslots * 2 : 1024;
    a->slots = fg_xcalloc(a->nslots, sizeof *a->slots);
    for (size_t i = 0; i < a->n; i++) {
        const uline_t *l = &a->lines[i];
        if (l->kind != FG_ROW_CHARGE)
            continue;
        size_t k = slot_of(a, l->job_id, l->attempt);
        while (a->slots[k])
            k = (k + 1) & (a->nslots - 1);
        a->slots[k] = (int32_t)i + 1;
    }
}

/* A new line for row r (its descriptive fields copied). */
static uline_t *line_new(usage_acc_t *a, const fg_ledger_row_t *r, fg_row_kind_t kind)
{
    a->lines = fg_xgrow(a->lines, &a->cap, a->n + 1, sizeof *a->lines);
    uline_t *l = &a->lines[a->n++];
    memset(l, 0, sizeof *l);
    l->kind = kind;
    l->job_id = (uint64_t)r->job_id;
    l->attempt = r->attempt;
    l->row_id = kind == FG_ROW_CHARGE ? 0 : r->id;
    l->refers_to = kind == FG_ROW_CHARGE ? 0 : r->refers_to;
    l->gpus = r->gpus;
    l->prio = r->priority;
    l->rate = r->rate;
    memcpy(l->account, r->account, FG_NAME_MAX);
    memcpy(l->user, r->user, FG_NAME_MAX);
    memcpy(l->node, r->node, FG_NAME_MAX);
    memcpy(l->gpu_type, r->gpu_type, FG_NAME_MAX);
    l->account[FG_NAME_MAX - 1] = l->user[FG_NAME_MAX - 1] = '\0';
    l->node[FG_NAME_MAX - 1] = l->gpu_type[FG_NAME_MAX - 1] = '\0';
    if (kind != FG_ROW_CHARGE) {
        memcpy(l->note, r->note, sizeof l->note);
        l->note[sizeof l->note - 1] = '\0';
        l->start_ms = l->end_ms = r->start_ms;
    } else {
        l->start_ms = INT64_MAX;
        l->end_ms = INT64_MIN;
    }
    return l;
}

/* The attempt line of row r, made if new. */
static uline_t *attempt_line(usage_acc_t *a, const fg_ledger_row_t *r)
{
    if ((a->n + 1) * 2 > a->nslots)
        grow_index(a);
    size_t k = slot_of(a, (uint64_t)r->job_id, r->attempt);
    while (a->slots[k]) {
        uline_t *l = &a->lines[a->slots[k] - 1];
        if (l->job_id == (uint64_t)r->job_id && l->attempt == r->attempt)
            return l;
        k = (k + 1) & (a->nslots - 1);
    }
    uline_t *l = line_new(a, r, FG_ROW_CHARGE);
    a->slots[k] = (int32_t)a->n;
    return l;
}

/* Adds one row's part in the range to its line (fg_store_ledger_foreach callback). */
static int add_row(const fg_ledger_row_t *r, void *arg)
{
    usage_acc_t *a = arg;
    const usage_q_t *q = a->q;
    if (!srv_viewer_sees(a->v, r) || (q->user && strncmp(r->user, q->user, FG_NAME_MAX)))
        return 0;
    int64_t gms, amt;
    if (srv_bill_part_in(r, q->from, q->to, &gms, &amt)) {
        fg_log(FG_LOG_ERROR, "ledger row %llu is not a row of the charging rules",
               (unsigned long long)r->id);
        a->err = FG_EINVAL;
        return 1;
    }
    bool adjust = r->kind == FG_ROW_CREDIT || r->kind == FG_ROW_CORRECTION;
    if (adjust) {
        if (amt || ((!q->from || r->start_ms >= q->from) && (!q->to || r->start_ms < q->to)))
            line_new(a, r, r->kind)->credit = amt;
        return 0;
    }
    uline_t *l = attempt_line(a, r);
    int64_t s = q->from && q->from > r->start_ms ? q->from : r->start_ms;
    int64_t e = q->to && q->to < r->end_ms ? q->to : r->end_ms;
    if (s < l->start_ms)
        l->start_ms = s;
    if ((e > s ? e : s) > l->end_ms)
        l->end_ms = e > s ? e : s;
    if (r->kind == FG_ROW_CHARGE) {
        l->charge += amt;
        l->held_ms += gms;
        l->billed_ms += gms;
        if (!r->interim) {
            l->ended = true;
            l->cause = r->cause;
        }
    } else {
        l->refund += amt;
        l->billed_ms -= gms;
        if (r->refund_why != FG_REFUND_LOST_WORK)
            l->held_ms -= gms;
    }
    return 0;
}

/* The sums of every line. */
typedef struct usage_tot {
    int64_t held_ms, billed_ms, charge, refund, credit, cost;
} usage_tot_t;

static usage_tot_t totals(const usage_acc_t *a)
{
    usage_tot_t t = {0};
    for (size_t i = 0; i < a->n; i++) {
        const uline_t *l = &a->lines[i];
        t.held_ms += l->held_ms;
        t.billed_ms += l->billed_ms;
        t.charge += l->charge;
        t.refund += l->refund;
        t.credit += l->credit;
        t.cost += l->charge + l->refund + l->credit;
    }
    return t;
}

/* The job's name, if the controller still knows the job (mu held). */
static const char *job_name(srv_t *s, uint64_t id)
{
    srv_job_t *j = id ? srv_job_get(s, id) : NULL;
    return j ? j->r.name : NULL;
}

/* One line as JSON (mu held for the job's name). */
static json_t *line_json(srv_t *s, const uline_t *l)
{
    char id[24], st[32], en[32], sec[32];
    snprintf(id, sizeof id, "%llu", (unsigned long long)l->job_id);
    srv_bill_fmt_time(l->start_ms, st);
    srv_bill_fmt_time(l->end_ms, en);
    srv_bill_fmt_seconds(l->held_ms, sec);
    json_t *o = json_pack(
        "{s:s,s:s?,s:s?,s:s,s:s,s:s,s:I,s:I,s:s,s:s,s:f,s:I,s:I,s:I,s:I,s:I,s:I}", "kind",
        l->kind == FG_ROW_CHARGE ? "attempt" : fg_row_kind_name(l->kind), "job_id",
        l->job_id ? id : NULL, "job_name", job_name(s, l->job_id), "account", l->account, "user",
        l->user, "gpu_type", l->gpu_type, "start_ms", (json_int_t)l->start_ms, "end_ms",
        (json_int_t)l->end_ms, "start", st, "end", en, "gpu_seconds", strtod(sec, NULL), "gpu_ms",
        (json_int_t)l->held_ms, "billed_gpu_ms", (json_int_t)l->billed_ms, "charge_micros",
        (json_int_t)l->charge, "refund_micros", (json_int_t)l->refund, "credit_micros",
        (json_int_t)l->credit, "cost_micros", (json_int_t)(l->charge + l->refund + l->credit));
    if (l->kind == FG_ROW_CHARGE) {
        json_object_set_new(o, "attempt", json_integer(l->attempt));
        json_object_set_new(o, "node", json_string(l->node));
        json_object_set_new(o, "priority", json_string(fg_prio_name(l->prio)));
        json_object_set_new(o, "gpus", json_integer(l->gpus));
        json_object_set_new(o, "rate_micros_per_gpu_hour", json_integer(l->rate));
        json_object_set_new(o, "end_cause",
                            l->ended ? json_string(fg_end_cause_name(l->cause)) : json_null());
        json_object_set_new(o, "running", json_boolean(!l->ended));
    } else {
        json_object_set_new(o, "row_id", json_integer((json_int_t)l->row_id));
        json_object_set_new(o, "refers_to",
                            l->refers_to ? json_integer((json_int_t)l->refers_to) : json_null());
        json_object_set_new(o, "note", json_string(l->note));
    }
    return o;
}

static json_t *totals_json(const usage_tot_t *t)
{
    char sec[32];
    srv_bill_fmt_seconds(t->held_ms, sec);
    return json_pack("{s:f,s:I,s:I,s:I,s:I,s:I,s:I}", "gpu_seconds", strtod(sec, NULL), "gpu_ms",
                     (json_int_t)t->held_ms, "billed_gpu_ms", (json_int_t)t->billed_ms,
                     "charge_micros", (json_int_t)t->charge, "refund_micros", (json_int_t)t->refund,
                     "credit_micros", (json_int_t)t->credit, "cost_micros", (json_int_t)t->cost);
}

static const char *const CSV_HEAD[] = {
    "kind",          "job_id",      "job_name",      "attempt",       "account",
    "user",          "node",        "gpu_type",      "priority",      "gpus",
    "start",         "end",         "start_ms",      "end_ms",        "rate_micros_per_gpu_hour",
    "gpu_seconds",   "gpu_ms",      "billed_gpu_ms", "charge_micros", "refund_micros",
    "credit_micros", "cost_micros", "end_cause",     "row_id",        "refers_to",
    "note",          "currency"};

/* The CSV of every line, then a total line (mu held for job names). */
static void usage_csv(srv_t *s, const usage_acc_t *a, const char *currency, srv_buf_t *b)
{
    for (size_t i = 0; i < sizeof CSV_HEAD / sizeof CSV_HEAD[0]; i++)
        srv_csv_text(b, i == 0, CSV_HEAD[i]);
    srv_csv_end(b);
    char st[32], en[32], sec[32], id[24];
    for (size_t i = 0; i < a->n; i++) {
        const uline_t *l = &a->lines[i];
        bool att = l->kind == FG_ROW_CHARGE;
        snprintf(id, sizeof id, "%llu", (unsigned long long)l->job_id);
        srv_bill_fmt_time(l->start_ms, st);
        srv_bill_fmt_time(l->end_ms, en);
        srv_bill_fmt_seconds(l->held_ms, sec);
        srv_csv_text(b, true, att ? "attempt" : fg_row_kind_name(l->kind));
        srv_csv_text(b, false, l->job_id ? id : "");
        srv_csv_text(b, false, job_name(s, l->job_id));
        if (att)
            srv_csv_int(b, false, l->attempt);
        else
            srv_csv_text(b, false, "");
        srv_csv_text(b, false, l->account);
        srv_csv_text(b, false, l->user);
        srv_csv_text(b, false, att ? l->node : "");
        srv_csv_text(b, false, l->gpu_type);
        srv_csv_text(b, false, att ? fg_prio_name(l->prio) : "");
        srv_csv_int(b, false, att ? l->gpus : 0);
        srv_csv_text(b, false, st);
        srv_csv_text(b, false, en);
        srv_csv_int(b, false, l->start_ms);
        srv_csv_int(b, false, l->end_ms);
        srv_csv_int(b, false, att ? l->rate : 0);
        srv_csv_text(b, false, sec);
        srv_csv_int(b, false, l->held_ms);
        srv_csv_int(b, false, l->billed_ms);
        srv_csv_int(b, false, l->charge);
        srv_csv_int(b, false, l->refund);
        srv_csv_int(b, false, l->credit);
        srv_csv_int(b, false, l->charge + l->refund + l->credit);
        srv_csv_text(b, false, att && l->ended ? fg_end_cause_name(l->cause) : "");
        if (att) {
            srv_csv_text(b, false, "");
            srv_csv_text(b, false, "");
        } else {
            srv_csv_int(b, false, (int64_t)l->row_id);
            if (l->refers_to)
                srv_csv_int(b, false, (int64_t)l->refers_to);
            else
                srv_csv_text(b, false, "");
        }
        srv_csv_text(b, false, att ? "" : l->note);
        srv_csv_text(b, false, currency);
        srv_csv_end(b);
    }
    usage_tot_t t = totals(a);
    srv_bill_fmt_seconds(t.held_ms, sec);
    srv_csv_text(b, true, "total");
    for (int k = 0; k < 14; k++)
        srv_csv_text(b, false, "");
    srv_csv_text(b, false, sec);
    srv_csv_int(b, false, t.held_ms);
    srv_csv_int(b, false, t.billed_ms);
    srv_csv_int(b, false, t.charge);
    srv_csv_int(b, false, t.refund);
    srv_csv_int(b, false, t.credit);
    srv_csv_int(b, false, t.cost);
    for (int k = 0; k < 4; k++)
        srv_csv_text(b, false, "");
    srv_csv_text(b, false, currency);
    srv_csv_end(b);
}

int h_billing_usage(srv_req_t *r)
{
    srv_t *s = r->srv;
    usage_q_t q;
    if (!parse_query(r, &q))
        return SRV_YES;
    srv_viewer_t *v = fg_xmalloc(sizeof *v);
    srv_viewer_init(r, v);
    if (!may_ask(r, v, &q)) {
        free(v);
        return SRV_YES;
    }
    usage_acc_t a = {.q = &q, .v = v};
    fg_store_ledger_filter_t f = {.account = q.account,
                                  .user = q.user,
                                  .gpu_type = q.gpu_type,
                                  .job_id = (int64_t)q.job,
                                  .from_ms = q.from,
                                  .to_ms = q.to};
    char currency[4] = "";
    fg_store_tx_t *tx = NULL;
    int rc = fg_store_read_begin(s->store, &tx);
    if (!rc) {
        rc = srv_bill_currency(tx, currency);
        if (!rc)
            rc = fg_store_ledger_foreach(tx, &f, add_row, &a);
        fg_store_read_end(tx);
    }
    int ret;
    if (rc || a.err) {
        ret = a.err ? srv_reply_error(r, 500, "internal", NULL, "the ledger holds a malformed row")
                    : srv_reply_error(r, 503, "unavailable", NULL, "store: %s",
                                      fg_store_strerror(rc));
    } else if (q.csv) {
        srv_buf_t b = {0};
        pthread_mutex_lock(&s->mu);
        usage_csv(s, &a, currency, &b);
        pthread_mutex_unlock(&s->mu);
        ret = srv_reply_csv(r, &b);
    } else {
        json_t *items = json_array();
        pthread_mutex_lock(&s->mu);
        for (size_t i = 0; i < a.n; i++)
            json_array_append_new(items, line_json(s, &a.lines[i]));
        pthread_mutex_unlock(&s->mu);
        usage_tot_t t = totals(&a);
        json_t *o = json_pack("{s:o,s:o,s:s?,s:o,s:o,s:n}", "from_ms",
                              q.from ? json_integer(q.from) : json_null(), "to_ms",
                              q.to ? json_integer(q.to) : json_null(), "currency",
                              currency[0] ? currency : NULL, "items", items, "totals",
                              totals_json(&t), "next_cursor");
        ret = srv_reply_json(r, 200, o);
    }
    free(a.lines);
    free(a.slots);
    free(v);
    return ret;
}
