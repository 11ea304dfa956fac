/*
 * test_cli_estimate.c - how the CLI writes a start estimate (cli_estimate.c): a span
 * from now in the unit its size calls for, the range in the unit of its upper end, and
 * no range where both ends round to the same figure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cli/cli.h"

static const char *fmt(long long p50, long long p10, long long p90)
{
    static char buf[128];
    cli_fmt_estimate(1000, p50, p10, p90, buf, sizeof buf);
    return buf;
}

/* The banner's example: 3 min away, 1 to 6 min. */
static void minutes_with_a_range(void **st)
{
    (void)st;
    assert_string_equal(fmt(1180, 1060, 1360), "in ~3 min (1-6 min)");
}

/* Under 2 minutes: seconds, the range too when its upper end is under 2 minutes. */
static void seconds(void **st)
{
    (void)st;
    assert_string_equal(fmt(1045, 1030, 1090), "in ~45 s (30-90 s)");
    assert_string_equal(fmt(1002, 1002, 1002), "in ~2 s");
}

/* At or before now: "now", whatever the range. */
static void now_or_past(void **st)
{
    (void)st;
    assert_string_equal(fmt(1000, 990, 1100), "now");
    assert_string_equal(fmt(900, 0, 0), "now");
}

/* Ends that round alike give no range; no range without both ends. */
static void no_range(void **st)
{
    (void)st;
    assert_string_equal(fmt(1180, 1170, 1190), "in ~3 min");
    assert_string_equal(fmt(1000 + 3 * 3600, 0, 0), "in ~3 h");
    assert_string_equal(fmt(1000 + 3 * 86400, 1000 + 86400, 0), "in ~3 d");
}

/* Hours; a lower end that would be 0 in the upper end's unit keeps its own; one not
 * in the future is "now". */
static void hours_and_days(void **st)
{
    (void)st;
    assert_string_equal(fmt(1000 + 5 * 3600, 1000 + 2 * 3600, 1000 + 3 * 86400),
                        "in ~5 h (2 h-3 d)");
    assert_string_equal(fmt(1180, 1000, 1360), "in ~3 min (now-6 min)");
    assert_string_equal(fmt(1180, 1020, 1360), "in ~3 min (20 s-6 min)");
}

/* A buffer too small is cut, never overrun. */
static void small_buffer(void **st)
{
    (void)st;
    char b[6];
    cli_fmt_estimate(1000, 1180, 1060, 1360, b, sizeof b);
    assert_string_equal(b, "in ~3");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(minutes_with_a_range), cmocka_unit_test(seconds),
        cmocka_unit_test(now_or_past),          cmocka_unit_test(no_range),
        cmocka_unit_test(hours_and_days),       cmocka_unit_test(small_buffer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
