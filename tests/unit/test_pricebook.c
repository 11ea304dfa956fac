/*
 * test_pricebook.c - the price book's lookup rules (src/server/pricebook.c): the row in
 * force is the latest effective time <= t (equal times: the one added last); an exact
 * GPU type comes before "*"; no row in force is "not found"; a view lists one row per
 * (type, class); and a price change body is validated (bad ones refused with a field).
 */
#include "server/pricebook.h"

#include "fairgpu/core.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Adds row (type, prio, micros, eff) with the next seq. */
static void add(srv_pricebook_t *b, const char *type, int prio, int64_t micros, int64_t eff)
{
    srv_price_t p = {.prio = prio, .micros = micros, .effective_ms = eff, .seq = (int64_t)b->n + 1};
    snprintf(p.gpu_type, sizeof p.gpu_type, "%s", type);
    srv_pricebook_add(b, &p);
}

/* The worked example of pricebook.h. */
static void worked_example(void **state)
{
    (void)state;
    srv_pricebook_t b = {0};
    add(&b, "*", FG_PRIO_NORMAL, 1000000, 0);
    add(&b, "H100", FG_PRIO_NORMAL, 3000000, 5000);
    int64_t m = 0;
    assert_int_equal(srv_price_at(&b, "H100", FG_PRIO_NORMAL, 4999, &m, NULL), 0);
    assert_int_equal(m, 1000000);
    assert_int_equal(srv_price_at(&b, "H100", FG_PRIO_NORMAL, 5000, &m, NULL), 0);
    assert_int_equal(m, 3000000);
    assert_int_equal(srv_price_at(&b, "A100", FG_PRIO_NORMAL, 9000, &m, NULL), 0);
    assert_int_equal(m, 1000000);
    assert_int_equal(srv_price_at(&b, "H100", FG_PRIO_HIGH, 9000, &m, NULL), -1);
    /* the same through the charging rules' lookup shape */
    assert_int_equal(srv_pricebook_price_fn(&b, "H100", FG_PRIO_NORMAL, 5000, &m), FG_OK);
    assert_int_equal(m, 3000000);
    assert_int_equal(srv_pricebook_price_fn(&b, "H100", FG_PRIO_HIGH, 5000, &m), FG_ENOENT);
    srv_pricebook_free(&b);
}

/* Latest effective <= t wins, whatever the order of adding; equal times: added last. */
static void latest_effective(void **state)
{
    (void)state;
    srv_pricebook_t b = {0};
    add(&b, "A100", FG_PRIO_LOW, 30, 300); /* added first, effective last */
    add(&b, "A100", FG_PRIO_LOW, 10, 100);
    add(&b, "A100", FG_PRIO_LOW, 20, 200);
    add(&b, "A100", FG_PRIO_LOW, 21, 200); /* same time, added later: replaces 20 */
    int64_t m = -1;
    const srv_price_t *row = NULL;
    assert_int_equal(srv_price_at(&b, "A100", FG_PRIO_LOW, 99, &m, NULL), -1);
    assert_int_equal(m, -1); /* untouched when not found */
    assert_int_equal(srv_price_at(&b, "A100", FG_PRIO_LOW, 100, &m, NULL), 0);
    assert_int_equal(m, 10);
    assert_int_equal(srv_price_at(&b, "A100", FG_PRIO_LOW, 199, &m, NULL), 0);
    assert_int_equal(m, 10);
    assert_int_equal(srv_price_at(&b, "A100", FG_PRIO_LOW, 200, &m, &row), 0);
    assert_int_equal(m, 21);
    assert_int_equal(row->seq, 4);
    assert_int_equal(srv_price_at(&b, "A100", FG_PRIO_LOW, 1000, &m, NULL), 0);
    assert_int_equal(m, 30);
    srv_pricebook_free(&b);
}

/* The exact type comes before "*" once it has a row in force, even an older one. */
static void exact_before_any(void **state)
{
    (void)state;
    srv_pricebook_t b = {0};
    add(&b, "H100", FG_PRIO_HIGH, 500, 10);
    add(&b, "*", FG_PRIO_HIGH, 100, 0);
    add(&b, "*", FG_PRIO_HIGH, 200, 50); /* newer "*" does not override the exact row */
    int64_t m = 0;
    assert_int_equal(srv_price_at(&b, "H100", FG_PRIO_HIGH, 5, &m, NULL), 0);
    assert_int_equal(m, 100); /* exact not in force yet: "*" */
    assert_int_equal(srv_price_at(&b, "H100", FG_PRIO_HIGH, 60, &m, NULL), 0);
    assert_int_equal(m, 500);
    assert_int_equal(srv_price_at(&b, "L4", FG_PRIO_HIGH, 60, &m, NULL), 0);
    assert_int_equal(m, 200);
    assert_int_equal(srv_price_at(&b, NULL, FG_PRIO_HIGH, 60, &m, NULL), 0); /* any type */
    assert_int_equal(m, 200);
    assert_int_equal(srv_price_at(&b, "H100", FG_PRIO_NORMAL, 60, &m, NULL), -1);
    srv_pricebook_free(&b);
}

/* An empty book finds nothing and views nothing. */
static void empty_book(void **state)
{
    (void)state;
    srv_pricebook_t b = {0};
    int64_t m = 0;
    assert_int_equal(srv_price_at(&b, "H100", FG_PRIO_LOW, 0, &m, NULL), -1);
    srv_price_t *v = NULL;
    assert_int_equal(srv_pricebook_view(&b, 100, &v), 0);
    assert_null(v);
}

/* A view: one row per (type, class) in force at t, sorted by type then class. */
static void view_as_of(void **state)
{
    (void)state;
    srv_pricebook_t b = {0};
    add(&b, "*", FG_PRIO_LOW, 5, 0);
    add(&b, "*", FG_PRIO_LOW, 7, 10);
    add(&b, "H100", FG_PRIO_HIGH, 9, 0);
    add(&b, "H100", FG_PRIO_LOW, 8, 20);
    srv_price_t *v = NULL;
    assert_int_equal(srv_pricebook_view(&b, 9, &v), 2);
    assert_string_equal(v[0].gpu_type, "*");
    assert_int_equal(v[0].micros, 5);
    assert_string_equal(v[1].gpu_type, "H100");
    assert_int_equal(v[1].prio, FG_PRIO_HIGH);
    free(v);
    assert_int_equal(srv_pricebook_view(&b, 20, &v), 3);
    assert_int_equal(v[0].micros, 7);
    assert_int_equal(v[1].prio, FG_PRIO_LOW); /* H100 low before H100 high */
    assert_int_equal(v[1].micros, 8);
    assert_int_equal(v[2].prio, FG_PRIO_HIGH);
    free(v);
    srv_pricebook_free(&b);
}

/* Parses text into *in; returns srv_prices_parse's value and the error's field. */
static int parse(const char *text, srv_prices_in_t *in, srv_prices_err_t *err)
{
    json_error_t je;
    json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    assert_non_null(o);
    int rc = srv_prices_parse(o, 1000, in, err);
    json_decref(o);
    return rc;
}

/* A good body; defaults; every kind of bad body is refused with its field. */
static void body_validation(void **state)
{
    (void)state;
    srv_prices_in_t *in = malloc(sizeof *in);
    srv_prices_err_t err = {0};
    assert_int_equal(parse("{\"currency\":\"EUR\",\"prices\":[{\"gpu_type\":\"H100\","
                           "\"priority\":\"high\",\"micros_per_gpu_hour\":4000000},"
                           "{\"gpu_type\":\"*\",\"priority\":\"low\",\"micros_per_gpu_hour\":0}]}",
                           in, &err),
                     0);
    assert_string_equal(in->currency, "EUR");
    assert_int_equal(in->effective_ms, 1000); /* default: now */
    assert_int_equal(in->n, 2);
    assert_int_equal(in->rows[0].prio, FG_PRIO_HIGH);
    assert_int_equal(in->rows[0].micros, 4000000);
    assert_int_equal(in->rows[1].effective_ms, 1000);
    assert_int_equal(parse("{\"currency\":\"USD\",\"effective_ms\":5000,\"prices\":[{\"gpu_type\":"
                           "\"A100\",\"priority\":\"normal\",\"micros_per_gpu_hour\":1}]}",
                           in, &err),
                     0);
    assert_int_equal(in->rows[0].effective_ms, 5000);
    static const struct {
        const char *body, *field;
    } bad[] = {
        {"{\"currency\":\"eur\",\"prices\":[{\"gpu_type\":\"*\",\"priority\":\"low\","
         "\"micros_per_gpu_hour\":1}]}",
         "currency"},
        {"{\"currency\":\"EURO\",\"prices\":[]}", "currency"},
        {"{\"currency\":\"EUR\",\"prices\":[]}", "prices"},
        {"{\"currency\":\"EUR\",\"prices\":[{\"gpu_type\":\"*\",\"priority\":\"urgent\","
         "\"micros_per_gpu_hour\":1}]}",
         "priority"},
        {"{\"currency\":\"EUR\",\"prices\":[{\"gpu_type\":\"*\",\"priority\":\"low\","
         "\"micros_per_gpu_hour\":-1}]}",
         "micros_per_gpu_hour"},
        {"{\"currency\":\"EUR\",\"prices\":[{\"gpu_type\":\"*\",\"priority\":\"low\","
         "\"micros_per_gpu_hour\":1.5}]}",
         "micros_per_gpu_hour"},
        {"{\"currency\":\"EUR\",\"prices\":[{\"gpu_type\":\"*\",\"priority\":\"low\","
         "\"micros_per_gpu_hour\":\"7\"}]}",
         "micros_per_gpu_hour"},
        {"{\"currency\":\"EUR\",\"prices\":[{\"gpu_type\":\"a b\",\"priority\":\"low\","
         "\"micros_per_gpu_hour\":1}]}",
         "gpu_type"},
        {"{\"currency\":\"EUR\",\"prices\":[{\"gpu_type\":\"*\",\"priority\":\"low\","
         "\"micros_per_gpu_hour\":1},{\"gpu_type\":\"*\",\"priority\":\"low\","
         "\"micros_per_gpu_hour\":2}]}",
         "prices"},
        {"{\"currency\":\"EUR\",\"effective_ms\":999,\"prices\":[{\"gpu_type\":\"*\","
         "\"priority\":\"low\",\"micros_per_gpu_hour\":1}]}",
         "effective_ms"},
        {"{\"currency\":\"EUR\",\"rate\":1,\"prices\":[]}", "rate"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        assert_int_equal(parse(bad[i].body, in, &err), -1);
        assert_non_null(err.code);
        assert_true(err.msg[0] != 0);
        assert_non_null(err.field);
        assert_string_equal(err.field, bad[i].field);
    }
    /* too many rows */
    json_t *o = json_pack("{s:s,s:[]}", "currency", "EUR", "prices");
    for (int i = 0; i < SRV_PRICES_MAX_ROWS + 1; i++) {
        char t[16];
        snprintf(t, sizeof t, "T%d", i);
        json_array_append_new(
            json_object_get(o, "prices"),
            json_pack("{s:s,s:s,s:i}", "gpu_type", t, "priority", "low", "micros_per_gpu_hour", 1));
    }
    assert_int_equal(srv_prices_parse(o, 0, in, &err), -1);
    assert_string_equal(err.code, "invalid_argument");
    assert_string_equal(err.field, "prices");
    json_array_remove(json_object_get(o, "prices"), 0);
    assert_int_equal(srv_prices_parse(o, 0, in, &err), 0); /* exactly the limit passes */
    assert_int_equal(in->n, SRV_PRICES_MAX_ROWS);
    json_decref(o);
    free(in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(worked_example),   cmocka_unit_test(latest_effective),
        cmocka_unit_test(exact_before_any), cmocka_unit_test(empty_book),
        cmocka_unit_test(view_as_of),       cmocka_unit_test(body_validation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
