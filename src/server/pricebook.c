/*
 * pricebook.c - the price book's lookups and the validation of a price change (see
 * pricebook.h for the rules and a worked example).
 *
 * The book is small (a few rows per change), so lookups scan it: srv_price_at is one
 * pass over the rows, srv_pricebook_view one pass per row. Example of a view: rows
 * {"*",low,5,eff 0,seq 1}, {"*",low,7,eff 10,seq 2}; view at 9 -> [{"*",low,5}], view
 * at 10 -> [{"*",low,7}].
 */
#include "server/pricebook.h"

#include "common/xalloc.h"
#include "fairgpu/billing.h"
#include "fairgpu/core.h"

#include <assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void srv_pricebook_add(srv_pricebook_t *b, const srv_price_t *p)
{
    assert(b && p);
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 16;
        b->items = fg_xrealloc(b->items, b->cap * sizeof *b->items);
    }
    b->items[b->n++] = *p;
}

void srv_pricebook_free(srv_pricebook_t *b)
{
    if (!b)
        return;
    free(b->items);
    memset(b, 0, sizeof *b);
}

/* Whether row a is later than row b (effective time, then order of adding). */
static bool later(const srv_price_t *a, const srv_price_t *b)
{
    return a->effective_ms != b->effective_ms ? a->effective_ms > b->effective_ms : a->seq > b->seq;
}

/* The row of exactly (gpu_type, prio) in force at t, or NULL. */
static const srv_price_t *in_force(const srv_pricebook_t *b, const char *gpu_type, int prio,
                                   int64_t t)
{
    const srv_price_t *best = NULL;
    for (size_t i = 0; i < b->n; i++) {
        const srv_price_t *p = &b->items[i];
        if (p->prio != prio || p->effective_ms > t || strcmp(p->gpu_type, gpu_type))
            continue;
        if (!best || later(p, best))
            best = p;
    }
    return best;
}

int srv_price_at(const srv_pricebook_t *b, const char *gpu_type, int prio, int64_t t,
                 int64_t *micros, const srv_price_t **row)
{
    assert(b && micros);
    const srv_price_t *p = gpu_type ? in_force(b, gpu_type, prio, t) : NULL;
    if (!p)
        p = in_force(b, "*", prio, t);
    if (!p)
        return -1;
    *micros = p->micros;
    if (row)
        *row = p;
    return 0;
}

int srv_pricebook_price_fn(void *book, const char *gpu_type, fg_prio_t prio, int64_t at_ms,
                           int64_t *micros)
{
    assert(book && micros);
    return srv_price_at(book, gpu_type, (int)prio, at_ms, micros, NULL) ? FG_ENOENT : FG_OK;
}
/* It is an fg_price_fn: the compiler checks the shape. */
_Static_assert(_Generic(&srv_pricebook_price_fn, fg_price_fn : 1, default : 0),
               "srv_pricebook_price_fn has the shape of fg_price_fn");

/* qsort order of a view: gpu_type, then prio. */
static int view_cmp(const void *a, const void *b)
{
    const srv_price_t *x = a, *y = b;
    int c = strcmp(x->gpu_type, y->gpu_type);
    return c ? c : (x->prio > y->prio) - (x->prio < y->prio);
}

size_t srv_pricebook_view(const srv_pricebook_t *b, int64_t t, srv_price_t **out)
{
    assert(b && out);
    *out = NULL;
    size_t n = 0;
    for (size_t i = 0; i < b->n; i++) {
        const srv_price_t *p = &b->items[i];
        if (p->effective_ms <= t && in_force(b, p->gpu_type, p->prio, t) == p) {
            *out = fg_xrealloc(*out, (n + 1) * sizeof **out);
            (*out)[n++] = *p;
        }
    }
    if (n > 1)
        qsort(*out, n, sizeof **out, view_cmp);
    return n;
}

/* ------------------------------------------------------------------ validation */

/* Fills *err and returns -1. */
static int fail(srv_prices_err_t *err, const char *code, const char *field, const char *msg)
{
    err->code = code;
    err->field = field;
    snprintf(err->msg, sizeof err->msg, "%s", msg);
    return -1;
}

/* Whether s is a GPU type name: "*", or 1..64 of [A-Za-z0-9._-]. */
static bool type_ok(const char *s)
{
    size_t n = strlen(s);
    if (!strcmp(s, "*"))
        return true;
    if (n == 0 || n >= FG_NAME_MAX) /* (a ledger row holds FG_NAME_MAX - 1 bytes) */
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* Whether s is a currency code: exactly 3 upper-case letters (ISO 4217 shape). */
static bool currency_ok(const char *s)
{
    return strlen(s) == 3 && s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'A' && s[1] <= 'Z' &&
           s[2] >= 'A' && s[2] <= 'Z';
}

/* Validates one element of "prices" into *p: -1 and *err on a bad one. */
static int parse_row(json_t *e, srv_price_t *p, srv_prices_err_t *err)
{
    if (!json_is_object(e))
        return fail(err, "invalid_argument", "prices", "each price must be an object");
    const char *k;
    json_t *v;
    json_object_foreach(e, k, v)
    {
        if (strcmp(k, "gpu_type") && strcmp(k, "priority") && strcmp(k, "micros_per_gpu_hour"))
            return fail(err, "invalid_argument", "prices",
                        "a price has only gpu_type, priority and micros_per_gpu_hour");
    }
    json_t *t = json_object_get(e, "gpu_type");
    if (!json_is_string(t) || !type_ok(json_string_value(t)))
        return fail(err, "invalid_argument", "gpu_type",
                    "gpu_type must be \"*\" or a GPU type name (1-63 of A-Z a-z 0-9 . _ -)");
    json_t *pr = json_object_get(e, "priority");
    int prio = json_is_string(pr) ? fg_prio_parse(json_string_value(pr)) : -1;
    if (prio < 0)
        return fail(err, "invalid_argument", "priority",
                    "priority must be \"low\", \"normal\" or \"high\"");
    json_t *m = json_object_get(e, "micros_per_gpu_hour");
    if (!json_is_integer(m) || json_integer_value(m) < 0 ||
        json_integer_value(m) > SRV_PRICE_MAX_MICROS)
        return fail(err, "invalid_argument", "micros_per_gpu_hour",
                    "micros_per_gpu_hour must be an integer from 0 to 1000000000000");
    memset(p, 0, sizeof *p);
    snprintf(p->gpu_type, sizeof p->gpu_type, "%s", json_string_value(t));
    p->prio = prio;
    p->micros = (int64_t)json_integer_value(m);
    return 0;
}

int srv_prices_parse(json_t *o, int64_t now_ms, srv_prices_in_t *out, srv_prices_err_t *err)
{
    assert(out && err);
    memset(out, 0, sizeof *out);
    if (!json_is_object(o))
        return fail(err, "invalid_json", NULL, "the request body must be a JSON object");
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        if (strcmp(k, "currency") && strcmp(k, "prices") && strcmp(k, "effective_ms")) {
            snprintf(err->field_name, sizeof err->field_name, "%s", k);
            return fail(err, "invalid_argument", err->field_name,
                        "a price change has only currency, prices and effective_ms");
        }
    }
    json_t *c = json_object_get(o, "currency");
    if (!json_is_string(c) || !currency_ok(json_string_value(c)))
        return fail(err, "invalid_argument", "currency",
                    "currency must be a code of 3 upper-case letters, e.g. \"EUR\"");
    snprintf(out->currency, sizeof out->currency, "%s", json_string_value(c));
    out->effective_ms = now_ms;
    json_t *eff = json_object_get(o, "effective_ms");
    if (eff) {
        if (!json_is_integer(eff) || json_integer_value(eff) < 0)
            return fail(err, "invalid_argument", "effective_ms",
                        "effective_ms must be an integer time in ms since the epoch");
        if (json_integer_value(eff) < now_ms)
            return fail(err, "invalid_argument", "effective_ms",
                        "effective_ms is in the past: a price change takes effect now or later "
                        "(omit it for now)");
        out->effective_ms = (int64_t)json_integer_value(eff);
    }
    json_t *ps = json_object_get(o, "prices");
    if (!json_is_array(ps) || json_array_size(ps) == 0)
        return fail(err, "invalid_argument", "prices", "prices must be a non-empty array");
    if (json_array_size(ps) > SRV_PRICES_MAX_ROWS)
        return fail(err, "invalid_argument", "prices", "at most 256 prices in one change");
    size_t i;
    json_array_foreach(ps, i, v)
    {
        srv_price_t *p = &out->rows[out->n];
        if (parse_row(v, p, err))
            return -1;
        for (size_t j = 0; j < out->n; j++)
            if (out->rows[j].prio == p->prio && !strcmp(out->rows[j].gpu_type, p->gpu_type))
                return fail(err, "invalid_argument", "prices",
                            "a (gpu_type, priority) pair appears twice in one change");
        p->effective_ms = out->effective_ms;
        out->n++;
    }
    assert(out->n >= 1 && out->n <= SRV_PRICES_MAX_ROWS);
    return 0;
}
