/*
 * test_billfmt.c - the pure parts of the billing reports: CSV cells (RFC 4180 quoting
 * and the formula guard, src/server/billfmt.c), query times and months, a row's part in
 * a time range on its curve (src/server/billview.c: the parts of a row add up to it and
 * agree with fg_bill_split_months), the adjustments body (src/server/adjust_body.c), and
 * the CLI's money text (src/cli/money.c).
 */
#include "cli/money.h"
#include "server/adjust_body.h"
#include "server/billfmt.h"
#include "server/billview.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* The CSV cell of s. */
static const char *cell(const char *s)
{
    static char buf[512];
    size_t n = srv_csv_cell(s, buf, sizeof buf);
    assert_true(n < sizeof buf);
    assert_int_equal(strlen(buf), n);
    return buf;
}

static void csv_cells(void **state)
{
    (void)state;
    assert_string_equal(cell("plain"), "plain");
    assert_string_equal(cell(""), "");
    assert_string_equal(cell(NULL), "");
    assert_string_equal(cell("a,b"), "\"a,b\"");
    assert_string_equal(cell("say \"hi\""), "\"say \"\"hi\"\"\"");
    assert_string_equal(cell("two\nlines"), "\"two\nlines\"");
    assert_string_equal(cell("cr\r"), "\"cr\r\"");
    assert_string_equal(cell("=1+2"), "'=1+2");
    assert_string_equal(cell("+1"), "'+1");
    assert_string_equal(cell("-1"), "'-1");
    assert_string_equal(cell("@SUM(A1)"), "'@SUM(A1)");
    assert_string_equal(cell("\tx"), "'\tx");
    assert_string_equal(cell("=HYPERLINK(\"u\",\"x\")"), "\"'=HYPERLINK(\"\"u\"\",\"\"x\"\")\"");
    assert_string_equal(cell("a=b"), "a=b"); /* only a first character is guarded */
    /* truncation: the needed length, a NUL-terminated prefix */
    char small[4];
    assert_int_equal(srv_csv_cell("a,b", small, sizeof small), 5);
    assert_string_equal(small, "\"a,");
    assert_int_equal(srv_csv_cell("abc", NULL, 0), 3);
}

static void months(void **state)
{
    (void)state;
    int y, m;
    assert_true(srv_bill_parse_month("2026-11", &y, &m));
    assert_int_equal(y, 2026);
    assert_int_equal(m, 11);
    assert_true(srv_bill_parse_month("1970-01", &y, &m));
    const char *bad[] = {"2026-13", "2026-1", "2026-00", "26-11",   "2026-11x", "2026/11",
                         "1969-12", "",       "2026-",   "+026-11", "2026-1a",  NULL};
    for (int i = 0; bad[i]; i++)
        assert_false(srv_bill_parse_month(bad[i], &y, &m));
    assert_false(srv_bill_parse_month(NULL, &y, &m));
}

static void times(void **state)
{
    (void)state;
    int64_t t;
    const int64_t dec1 = 1796083200000LL; /* 2026-12-01T00:00:00Z */
    assert_true(srv_bill_parse_time("1796083200000", &t));
    assert_int_equal(t, dec1);
    assert_true(srv_bill_parse_time("2026-12-01", &t));
    assert_int_equal(t, dec1);
    assert_true(srv_bill_parse_time("2026-12-01T00:00:00Z", &t));
    assert_int_equal(t, dec1);
    assert_true(srv_bill_parse_time("2026-12-01T01:30:00+01:30", &t));
    assert_int_equal(t, dec1);
    assert_true(srv_bill_parse_time("2026-11-30T23:00:00.5-01:00", &t));
    assert_int_equal(t, dec1 + 500);
    assert_true(srv_bill_parse_time("2026-12-01T00:00:00.123456789Z", &t));
    assert_int_equal(t, dec1 + 123);
    assert_true(srv_bill_parse_time("2024-02-29", &t));
    assert_true(srv_bill_parse_time("253402300799999", &t));
    assert_true(srv_bill_parse_time("9999-12-31T23:59:59.999Z", &t));
    assert_int_equal(t, 253402300799999LL);
    assert_true(srv_bill_parse_time("0", &t));
    assert_int_equal(t, 0);
    const char *bad[] = {"",
                         "-1",
                         "+5",
                         "1e9",
                         "12a",
                         "2026-12-01T00:00:00",
                         "2026-12-01T24:00:00Z",
                         "2026-12-01T00:60:00Z",
                         "2026-12-01T00:00:00.Z",
                         "2026-12-01T00:00:00+1:00",
                         "2026-12-01T00:00:00Zjunk",
                         "2026-02-29",
                         "2026-13-01",
                         "2026-12-32",
                         "1969-12-31",
                         "1970-01-01T00:00:00+01:00",
                         "9999999999999999",
                         "253402300800000",
                         "9999-12-31T23:59:59-01:00",
                         NULL};
    for (int i = 0; bad[i]; i++)
        assert_false(srv_bill_parse_time(bad[i], &t));
    char out[32];
    srv_bill_fmt_time(dec1 + 1234, out);
    assert_string_equal(out, "2026-12-01T00:00:01.234Z");
    srv_bill_fmt_time(0, out);
    assert_string_equal(out, "1970-01-01T00:00:00.000Z");
    assert_true(srv_bill_parse_time(out, &t));
    assert_int_equal(t, 0);
    char sec[32];
    srv_bill_fmt_seconds(5400123, sec);
    assert_string_equal(sec, "5400.123");
    srv_bill_fmt_seconds(-5, sec);
    assert_string_equal(sec, "-0.005");
}

/* A charge row of 1 GPU from 2026-11-30 23:00 to 2026-12-01 01:00 at 1,000,001/GPU-h
 * (invoice.c's worked example). */
static fg_ledger_row_t example_row(void)
{
    fg_ledger_row_t r = {.id = 1, .kind = FG_ROW_CHARGE, .gpus = 1, .rate = 1000001};
    r.origin_ms = r.start_ms = 1796083200000LL - 3600000;
    r.end_ms = r.start_ms + 2 * 3600000;
    r.gpu_ms = r.end_ms - r.start_ms;
    r.amount_micros = 2000002;
    return r;
}

static void parts_in_ranges(void **state)
{
    (void)state;
    fg_ledger_row_t r = example_row();
    const int64_t dec1 = 1796083200000LL;
    int64_t g, a, g2, a2;
    assert_int_equal(srv_bill_part_in(&r, 0, 0, &g, &a), FG_OK);
    assert_int_equal(a, 2000002);
    assert_int_equal(g, 7200000);
    assert_int_equal(srv_bill_part_in(&r, 0, dec1, &g, &a), FG_OK);
    assert_int_equal(srv_bill_part_in(&r, dec1, 0, &g2, &a2), FG_OK);
    assert_int_equal(a, 1000001);
    assert_int_equal(a + a2, r.amount_micros);
    assert_int_equal(g + g2, r.gpu_ms);
    fg_month_part_t parts[4];
    assert_int_equal(fg_bill_split_months(&r, parts, 4), 2);
    assert_int_equal(parts[0].amount_micros, a);
    assert_int_equal(parts[1].amount_micros, a2);
    /* any cut adds up, to the micro-unit */
    for (int64_t cut = r.start_ms; cut <= r.end_ms; cut += 777777) {
        assert_int_equal(srv_bill_part_in(&r, 0, cut, &g, &a), FG_OK);
        assert_int_equal(srv_bill_part_in(&r, cut, 0, &g2, &a2), FG_OK);
        assert_int_equal(a + a2, r.amount_micros);
    }
    /* outside the range: nothing */
    assert_int_equal(srv_bill_part_in(&r, r.end_ms, 0, &g, &a), FG_OK);
    assert_int_equal(a, 0);
    assert_int_equal(g, 0);
    /* a refund is negative along the same curve */
    r.kind = FG_ROW_REFUND;
    r.amount_micros = -2000002;
    assert_int_equal(srv_bill_part_in(&r, dec1, 0, &g, &a), FG_OK);
    assert_int_equal(a, -1000001);
    /* a credit counts whole where it starts */
    fg_ledger_row_t c = {.id = 2, .kind = FG_ROW_CREDIT, .start_ms = dec1, .amount_micros = -5};
    assert_int_equal(srv_bill_part_in(&c, dec1, dec1 + 1, &g, &a), FG_OK);
    assert_int_equal(a, -5);
    assert_int_equal(srv_bill_part_in(&c, 0, dec1, &g, &a), FG_OK);
    assert_int_equal(a, 0);
    /* not a row of the rules */
    r.gpus = 0;
    assert_int_equal(srv_bill_part_in(&r, 0, 0, &g, &a), FG_EINVAL);
}

/* Parses JSON text s as an adjustment: 0 or -1, err->field checked against field. */
static int adjust(const char *s, const char *field, srv_adjust_t *out)
{
    json_t *o = json_loads(s, 0, NULL);
    assert_non_null(o);
    srv_adjust_err_t err;
    int rc = srv_adjust_parse(o, out, &err);
    json_decref(o);
    if (rc) {
        assert_non_null(err.code);
        assert_true(err.msg[0] != '\0');
        if (field)
            assert_string_equal(err.field, field);
    }
    return rc;
}

static void adjust_bodies(void **state)
{
    (void)state;
    srv_adjust_t a;
    assert_int_equal(adjust("{\"kind\":\"credit\",\"account\":\"vision\",\"amount_micros\":-5,"
                            "\"note\":\"outage\"}",
                            NULL, &a),
                     0);
    assert_int_equal(a.kind, FG_ROW_CREDIT);
    assert_int_equal(a.amount_micros, -5);
    assert_string_equal(a.account, "vision");
    assert_string_equal(a.user, "");
    assert_int_equal(adjust("{\"kind\":\"correction\",\"account\":\"a\",\"user\":\"u\","
                            "\"amount_micros\":7,\"refers_to\":3,\"note\":\"n\"}",
                            NULL, &a),
                     0);
    assert_int_equal(a.refers_to, 3);
    assert_string_equal(a.user, "u");
    static const struct {
        const char *body, *field;
    } bad[] = {
        {"{\"kind\":\"credit\",\"account\":\"a\",\"amount_micros\":5,\"note\":\"n\"}",
         "amount_micros"},
        {"{\"kind\":\"credit\",\"account\":\"a\",\"amount_micros\":0,\"note\":\"n\"}",
         "amount_micros"},
        {"{\"kind\":\"credit\",\"account\":\"a\",\"amount_micros\":-1000000000000001,\"note\":"
         "\"n\"}",
         "amount_micros"},
        {"{\"kind\":\"correction\",\"account\":\"a\",\"amount_micros\":5,\"note\":\"n\"}",
         "refers_to"},
        {"{\"kind\":\"correction\",\"account\":\"a\",\"amount_micros\":5,\"refers_to\":0,"
         "\"note\":\"n\"}",
         "refers_to"},
        {"{\"kind\":\"charge\",\"account\":\"a\",\"amount_micros\":5,\"note\":\"n\"}", "kind"},
        {"{\"kind\":\"credit\",\"account\":\"A\",\"amount_micros\":-5,\"note\":\"n\"}", "account"},
        {"{\"kind\":\"credit\",\"account\":\"a\",\"user\":7,\"amount_micros\":-5,\"note\":\"n\"}",
         "user"},
        {"{\"kind\":\"credit\",\"account\":\"a\",\"amount_micros\":-5}", "note"},
        {"{\"kind\":\"credit\",\"account\":\"a\",\"amount_micros\":-5,\"note\":\"a\\u0001b\"}",
         "note"},
        {"{\"kind\":\"credit\",\"account\":\"a\",\"amount_micros\":-5,\"note\":\"n\",\"x\":1}",
         "x"},
        {"[]", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(adjust(bad[i].body, bad[i].field, &a), -1);
    char note[200];
    memset(note, 'x', sizeof note);
    for (int n = 126; n <= 128; n++) {
        char body[400];
        snprintf(body, sizeof body,
                 "{\"kind\":\"credit\",\"account\":\"a\",\"amount_micros\":-5,\"note\":\"%.*s\"}",
                 n, note);
        assert_int_equal(adjust(body, "note", &a), n < 128 ? 0 : -1);
    }
}

static void money_text(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(fg_fmt_micros(-1500000, b, sizeof b), "-1.500000");
    assert_string_equal(fg_fmt_micros(1, b, sizeof b), "0.000001");
    assert_string_equal(fg_fmt_micros(INT64_MIN, b, sizeof b), "-9223372036854.775808");
    int64_t m;
    assert_int_equal(fg_parse_units("25", &m), 0);
    assert_int_equal(m, 25000000);
    assert_int_equal(fg_parse_units("12.50", &m), 0);
    assert_int_equal(m, 12500000);
    assert_int_equal(fg_parse_units("0.000001", &m), 0);
    assert_int_equal(m, 1);
    const char *bad[] = {"", "-1", "1.", ".5", "1.0000001", "1e3", "1,5", "10000000000", NULL};
    for (int i = 0; bad[i]; i++)
        assert_int_equal(fg_parse_units(bad[i], &m), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(csv_cells),     cmocka_unit_test(months),
        cmocka_unit_test(times),         cmocka_unit_test(parts_in_ranges),
        cmocka_unit_test(adjust_bodies), cmocka_unit_test(money_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
