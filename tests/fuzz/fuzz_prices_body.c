/*
 * fuzz_prices_body.c - libFuzzer target for the body of PUT /v1/billing/prices
 * (untrusted input, src/server/pricebook.c): jansson as the server parses it, then
 * srv_prices_parse. An accepted change must hold only valid rows (a currency of 3
 * upper-case letters, 1..256 rows, prices in range, no (type, class) twice, every row
 * effective at the change's time, not before "now"); a refused one must name a code and
 * a message. The accepted rows then form a book whose lookups must agree with its view.
 * Example seed: {"currency":"EUR","prices":[{"gpu_type":"*","priority":"low",
 * "micros_per_gpu_hour":1}]}.
 */
#include "server/pricebook.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts unless an accepted change is well formed. */
static void check_accepted(const srv_prices_in_t *in, int64_t now)
{
    if (strlen(in->currency) != 3 || in->n < 1 || in->n > SRV_PRICES_MAX_ROWS ||
        in->effective_ms < now)
        abort();
    for (size_t i = 0; i < 3; i++)
        if (in->currency[i] < 'A' || in->currency[i] > 'Z')
            abort();
    for (size_t i = 0; i < in->n; i++) {
        const srv_price_t *p = &in->rows[i];
        if (p->micros < 0 || p->micros > SRV_PRICE_MAX_MICROS || p->prio < 0 || p->prio > 2 ||
            !p->gpu_type[0] || p->effective_ms != in->effective_ms)
            abort();
        for (size_t j = 0; j < i; j++)
            if (in->rows[j].prio == p->prio && !strcmp(in->rows[j].gpu_type, p->gpu_type))
                abort();
    }
}

/* Aborts unless every row of the view is what srv_price_at finds for its key. */
static void check_book(const srv_prices_in_t *in)
{
    srv_pricebook_t b = {0};
    for (size_t i = 0; i < in->n; i++) {
        srv_price_t p = in->rows[i];
        p.seq = (int64_t)i + 1;
        srv_pricebook_add(&b, &p);
    }
    srv_price_t *v = NULL;
    size_t n = srv_pricebook_view(&b, in->effective_ms, &v);
    if (n != in->n)
        abort();
    for (size_t i = 0; i < n; i++) {
        int64_t m = -1;
        if (srv_price_at(&b, v[i].gpu_type, v[i].prio, in->effective_ms, &m, NULL) ||
            m != v[i].micros)
            abort();
    }
    free(v);
    if (srv_pricebook_view(&b, in->effective_ms - 1, &v) != 0)
        abort();
    srv_pricebook_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static srv_prices_in_t in;
    const int64_t now = 1000;
    json_error_t je;
    json_t *o = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
    if (!o)
        return 0;
    srv_prices_err_t err = {0};
    if (srv_prices_parse(o, now, &in, &err) == 0) {
        check_accepted(&in, now);
        check_book(&in);
    } else if (!err.code || !err.msg[0]) {
        abort();
    }
    json_decref(o);
    return 0;
}
