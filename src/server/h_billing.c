/*
 * h_billing.c - the billing routes that exist so far: the price book.
 *
 *   GET /v1/billing/prices[?at=MS]  any user: the prices in force at MS (default now)
 *   PUT /v1/billing/prices          admin: adds rows effective from effective_ms
 *
 * The book lives in the store's append-only `prices` table and is read whole on each
 * request (it is small). A change is one write unit: it checks the currency against the
 * stored rows, appends the rows and the audit entry, and commits them together, so a
 * refused or failed change leaves nothing behind. Example:
 *   PUT {"currency":"EUR","prices":[{"gpu_type":"*","priority":"normal",
 *        "micros_per_gpu_hour":2000000}]}  -> 200, and GET shows that row.
 */
#include "server/pricebook.h"
#include "server/server.h"

#include "common/xalloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fills *b with every stored row (read or write handle). 0 or a store error. */
static int book_load(fg_store_tx_t *tx, srv_pricebook_t *b)
{
    fg_store_price_list_t l = {0};
    int rc = fg_store_price_list(tx, &l);
    if (rc)
        return rc;
    for (size_t i = 0; i < l.n; i++) {
        const fg_store_price_t *sp = &l.items[i];
        srv_price_t p = {.prio = sp->priority,
                         .micros = sp->micros_per_gpu_hour,
                         .effective_ms = sp->effective_ms,
                         .seq = sp->id};
        snprintf(p.gpu_type, sizeof p.gpu_type, "%s", sp->gpu_type);
        srv_pricebook_add(b, &p);
        snprintf(b->currency, sizeof b->currency, "%s", sp->currency);
    }
    fg_store_price_list_free(&l);
    return 0;
}

/* The JSON array of n rows. */
static json_t *rows_json(const srv_price_t *rows, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_pack("{s:s,s:s,s:I,s:I}", "gpu_type", rows[i].gpu_type,
                                           "priority", fg_prio_name((fg_prio_t)rows[i].prio),
                                           "micros_per_gpu_hour", (json_int_t)rows[i].micros,
                                           "effective_ms", (json_int_t)rows[i].effective_ms));
    return a;
}

/* Parses ?at= (ms since the epoch, >= 0) into *t; false if malformed. */
static bool parse_at(const char *s, int64_t *t)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end)
        return false;
    *t = v;
    return true;
}

int h_billing_prices_get(srv_req_t *r)
{
    int64_t t = srv_now_ms();
    const char *at = srv_query(r, "at");
    if (at && !parse_at(at, &t))
        return srv_reply_error(r, 400, "invalid_argument", "at",
                               "at must be a time in ms since the epoch (a non-negative integer)");
    fg_store_tx_t *tx = NULL;
    int rc = fg_store_read_begin(r->srv->store, &tx);
    srv_pricebook_t b = {0};
    if (!rc) {
        rc = book_load(tx, &b);
        fg_store_read_end(tx);
    }
    if (rc) {
        srv_pricebook_free(&b);
        return srv_reply_error(r, 503, "unavailable", NULL, "store: %s", fg_store_strerror(rc));
    }
    srv_price_t *view = NULL;
    size_t n = srv_pricebook_view(&b, t, &view);
    json_t *o = json_pack("{s:s?,s:I,s:o}", "currency", b.currency[0] ? b.currency : NULL, "at_ms",
                          (json_int_t)t, "prices", rows_json(view, n));
    free(view);
    srv_pricebook_free(&b);
    return srv_reply_json(r, 200, o);
}

/* One price change as a write unit. */
typedef struct price_change {
    const srv_prices_in_t *in;
    int64_t admin_id, now;
    const char *details; /* the audit entry's JSON */
    char stored_currency[4];
} price_change_t;

#define PRICE_ECURRENCY 1 /* the unit's refusal: the book has another currency */

/* Appends the rows and the audit entry, unless the book has another currency. */
static int price_change_unit(fg_store_tx_t *tx, void *arg)
{
    price_change_t *c = arg;
    srv_pricebook_t b = {0};
    int rc = book_load(tx, &b);
    snprintf(c->stored_currency, sizeof c->stored_currency, "%s", b.currency);
    srv_pricebook_free(&b);
    if (rc)
        return rc;
    if (c->stored_currency[0] && strcmp(c->stored_currency, c->in->currency))
        return PRICE_ECURRENCY;
    for (size_t i = 0; i < c->in->n && !rc; i++) {
        const srv_price_t *p = &c->in->rows[i];
        fg_store_price_t sp = {.gpu_type = (char *)p->gpu_type,
                               .priority = p->prio,
                               .micros_per_gpu_hour = p->micros,
                               .currency = (char *)c->in->currency,
                               .effective_ms = p->effective_ms,
                               .created_at = c->now,
                               .admin_user_id = c->admin_id};
        rc = fg_store_price_append(tx, &sp, NULL);
    }
    if (rc)
        return rc;
    fg_store_audit_t a = {.time = c->now,
                          .admin_user_id = c->admin_id,
                          .action = (char *)"billing.prices.set",
                          .target = (char *)c->in->currency,
                          .details_json = (char *)c->details};
    return fg_store_audit_append(tx, &a, NULL);
}

int h_billing_prices_put(srv_req_t *r)
{
    json_t *body = srv_body_object(r);
    if (!body)
        return SRV_YES;
    srv_prices_in_t *in = fg_xmalloc(sizeof *in);
    srv_prices_err_t err = {0};
    int ret;
    if (srv_prices_parse(body, srv_now_ms(), in, &err)) {
        ret = srv_reply_error(r, 400, err.code, err.field, "%s", err.msg);
        goto out;
    }
    json_t *rows = rows_json(in->rows, in->n);
    json_t *o = json_pack("{s:s,s:I,s:O}", "currency", in->currency, "effective_ms",
                          (json_int_t)in->effective_ms, "prices", rows);
    json_decref(rows);
    char *details = json_dumps(o, JSON_COMPACT);
    price_change_t c = {.in = in, .admin_id = r->user_id, .now = srv_now(), .details = details};
    int rc = fg_store_write(r->srv->store, price_change_unit, &c);
    free(details);
    if (rc == PRICE_ECURRENCY) {
        json_decref(o);
        ret = srv_reply_error(r, 400, "invalid_argument", "currency",
                              "the price book is in %s; one book has one currency",
                              c.stored_currency);
    } else if (rc) {
        json_decref(o);
        ret = srv_reply_error(r, (unsigned)srv_store_err_status(rc), "unavailable", NULL,
                              "store: %s", fg_store_strerror(rc));
    } else {
        atomic_fetch_add(&r->srv->prices_gen, 1); /* the scheduler reads the book again */
        ret = srv_reply_json(r, 200, o);
    }
out:
    free(in);
    json_decref(body);
    return ret;
}
