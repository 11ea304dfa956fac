/*
 * pricebook.h - the price book (docs/billing.md): prices per GPU type and priority
 * class, in integer micro-units of one currency per GPU-hour, each from an effective
 * time on. Pure functions, no I/O and no locks: the HTTP handlers (h_billing.c) and
 * later the ledger build a book from the store's rows and ask it for prices.
 *
 * RULES
 *   - A change adds rows; no row is ever rewritten. The price in force at time t for
 *     (type, class) is the row with the latest effective_ms <= t (equal times: the one
 *     added last, the larger seq).
 *   - A row of the exact GPU type comes before a row of type "*" (any type): "*" is
 *     used only when the exact type has no row in force at t.
 *   - No row in force: not found (the caller decides; nothing is priced at 0 silently).
 *
 * EXAMPLE
 *   rows: {"*", normal, 1000000, eff 0}, {"H100", normal, 3000000, eff 5000}
 *   srv_price_at(b, "H100", NORMAL, 4999, &m) -> 0, m = 1000000 (only "*" in force)
 *   srv_price_at(b, "H100", NORMAL, 5000, &m) -> 0, m = 3000000 (exact type wins)
 *   srv_price_at(b, "A100", NORMAL, 9000, &m) -> 0, m = 1000000
 *   srv_price_at(b, "H100", HIGH, 9000, &m)   -> -1 (no row for class high)
 */
#ifndef FG_SERVER_PRICEBOOK_H
#define FG_SERVER_PRICEBOOK_H

#include "fairgpu/core.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define SRV_PRICE_TYPE_MAX   64            /* bytes of a GPU type name */
#define SRV_PRICES_MAX_ROWS  256           /* rows in one change (PUT) */
#define SRV_PRICE_MAX_MICROS 1000000000000 /* 10^6 currency units per GPU-hour */

/* One row: the price of (gpu_type, prio) from effective_ms on. */
typedef struct srv_price {
    char gpu_type[SRV_PRICE_TYPE_MAX + 1]; /* "*" = any type */
    int prio;                              /* fg_prio_t */
    int64_t micros;                        /* per GPU-hour, >= 0 */
    int64_t effective_ms;
    int64_t seq; /* order of adding (the store's row id): breaks equal times */
} srv_price_t;

/* Every row ever set, in any order. */
typedef struct srv_pricebook {
    char currency[4]; /* "" while the book is empty */
    srv_price_t *items;
    size_t n, cap;
} srv_pricebook_t;

/* Appends a copy of *p to the book. */
void srv_pricebook_add(srv_pricebook_t *b, const srv_price_t *p);
/* Releases the rows and zeroes the book. */
void srv_pricebook_free(srv_pricebook_t *b);

/* The price in force at t for (gpu_type, prio), by the rules above: 0 and *micros
 * (and *row, may be NULL, the row used), or -1 when none is in force. */
int srv_price_at(const srv_pricebook_t *b, const char *gpu_type, int prio, int64_t t,
                 int64_t *micros, const srv_price_t **row);

/* srv_price_at in the shape of the charging rules' price lookup (fg_price_fn of
 * fairgpu/billing.h), with the book as ctx: FG_OK and *micros, or FG_ENOENT.
 * Example: fg_bill_accrue(&attempt, srv_pricebook_price_fn, &book, ...). */
int srv_pricebook_price_fn(void *book, const char *gpu_type, fg_prio_t prio, int64_t at_ms,
                           int64_t *micros);

/* The book as of t: the row in force for every (gpu_type, prio) that has one, written to
 * out (allocated, caller frees; NULL when none), sorted by gpu_type then prio. Returns
 * how many. */
size_t srv_pricebook_view(const srv_pricebook_t *b, int64_t t, srv_price_t **out);

/* A validated price change (the body of PUT /v1/billing/prices). */
typedef struct srv_prices_in {
    char currency[4];
    int64_t effective_ms;
    srv_price_t rows[SRV_PRICES_MAX_ROWS]; /* seq 0 */
    size_t n;
} srv_prices_in_t;

/* A 400 answer: code, field (may be NULL) and message. */
typedef struct srv_prices_err {
    const char *code;
    const char *field; /* a static name, or field_name (a copy: the body may be freed) */
    char field_name[64];
    char msg[200];
} srv_prices_err_t;

/* Validates the body object `o` of a price change: {currency, prices:[{gpu_type,
 * priority, micros_per_gpu_hour}], effective_ms?}. effective_ms defaults to now_ms and
 * may not be earlier (a change never reaches back into time already charged). 0 and
 * *out filled, or -1 and *err filled (nothing else happens). Untrusted input: covered
 * by tests/fuzz/fuzz_prices_body.c. */
int srv_prices_parse(json_t *o, int64_t now_ms, srv_prices_in_t *out, srv_prices_err_t *err);

#endif
