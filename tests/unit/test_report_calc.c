/*
 * test_report_calc.c - the figures of `fairgpu report` (src/cli/report_calc.c): the
 * period's forms and bounds, bucket lengths, size classes, nearest-rank percentiles,
 * Jain's index (plain and weighted by share, as the report uses it) and overlaps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cli/report_calc.h"

#include <math.h>
#include <string.h>

static long long period_ok(const char *s)
{
    long long v = -1;
    char err[160];
    if (fg_rep_parse_period(s, &v, err, sizeof err))
        fail_msg("'%s' refused: %s", s, err);
    return v;
}

static void period_bad(const char *s, const char *want)
{
    long long v = 42;
    char err[160] = "";
    if (!fg_rep_parse_period(s, &v, err, sizeof err))
        fail_msg("'%s' accepted as %lld", s, v);
    assert_int_equal(v, 42); /* untouched */
    if (!strstr(err, want))
        fail_msg("'%s': '%s' lacks '%s'", s, err, want);
}

/* A period is a whole number and one unit, 1 h to 366 d. */
static void test_period(void **st)
{
    (void)st;
    assert_int_equal(period_ok("7d"), 7 * 86400);
    assert_int_equal(period_ok("36h"), 36 * 3600);
    assert_int_equal(period_ok("90m"), 5400);
    assert_int_equal(period_ok("2w"), 14 * 86400);
    assert_int_equal(period_ok("3600s"), 3600);
    assert_int_equal(period_ok("366d"), 366 * 86400);
    period_bad("", "whole number and a unit");
    period_bad("7", "whole number and a unit");
    period_bad("7x", "whole number and a unit");
    period_bad("d", "whole number and a unit");
    period_bad("-1d", "whole number and a unit");
    period_bad("0d", "whole number and a unit");
    period_bad("7dd", "whole number and a unit");
    period_bad(" 7d", "whole number and a unit");
    period_bad("59m", "between 1h and 366d");
    period_bad("367d", "between 1h and 366d");
    period_bad("99999999999999999999d", "whole number and a unit"); /* overflows strtoll */
    period_bad("9999999999999999w", "between 1h and 366d");         /* overflows n * 604800 */
    period_bad(NULL, "whole number");
}

/* Buckets: days above 2 days, hours above 6 hours, else 10 minutes. */
static void test_buckets(void **st)
{
    (void)st;
    assert_int_equal(fg_rep_bucket_s(7 * 86400), 86400);
    assert_int_equal(fg_rep_bucket_s(2 * 86400), 3600); /* 48 hourly buckets */
    assert_int_equal(fg_rep_bucket_s(6 * 3600 + 1), 3600);
    assert_int_equal(fg_rep_bucket_s(6 * 3600), 600);
    assert_int_equal(fg_rep_bucket_s(3600), 600);
}

static void test_sizes(void **st)
{
    (void)st;
    long long g[] = {0, 1, 2, 7, 8, 9, 64};
    const char *want[] = {"1", "1", "2-7", "2-7", "8", ">8", ">8"};
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++)
        assert_string_equal(fg_rep_size_name(fg_rep_size_class(g[i])), want[i]);
}

/* Nearest rank: the smallest value with at least p % at or below it. */
static void test_percentile(void **st)
{
    (void)st;
    long long v[] = {5, 1, 3, 2, 4};
    assert_int_equal(fg_rep_percentile(v, 5, 50), 3);
    assert_int_equal(fg_rep_percentile(v, 5, 90), 5);
    assert_int_equal(fg_rep_percentile(v, 5, 20), 1);
    assert_int_equal(fg_rep_percentile(v, 5, 21), 2);
    assert_int_equal(fg_rep_percentile(v, 5, 100), 5);
    long long ten[] = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
    assert_int_equal(fg_rep_percentile(ten, 10, 90), 9); /* rank 9 exactly, not 10 */
    assert_int_equal(fg_rep_percentile(ten, 10, 50), 5);
    long long one[] = {7};
    assert_int_equal(fg_rep_percentile(one, 1, 50), 7);
    assert_int_equal(fg_rep_percentile(NULL, 0, 50), -1);
}

/* Jain: 1 when equal, 1/n when one holds all; weighted by share as the report does. */
static void test_jain(void **st)
{
    (void)st;
    double eq[] = {3, 3, 3};
    assert_true(fabs(fg_rep_jain(eq, 3) - 1.0) < 1e-12);
    double one[] = {9, 0, 0};
    assert_true(fabs(fg_rep_jain(one, 3) - 1.0 / 3) < 1e-12);
    double half[] = {1, 3}; /* 16 / (2 * 10) */
    assert_true(fabs(fg_rep_jain(half, 2) - 0.8) < 1e-12);
    /* the banner's example: shares 0.75 / 0.25 */
    double w1[] = {300 / 0.75, 100 / 0.25};
    assert_true(fabs(fg_rep_jain(w1, 2) - 1.0) < 1e-12);
    double w2[] = {400 / 0.75, 0 / 0.25};
    assert_true(fabs(fg_rep_jain(w2, 2) - 0.5) < 1e-12);
    double zero[] = {0, 0};
    assert_true(fg_rep_jain(zero, 2) < 0);
    assert_true(fg_rep_jain(NULL, 0) < 0);
}

static void test_overlap_time(void **st)
{
    (void)st;
    assert_int_equal(fg_rep_overlap(0, 10, 5, 20), 5);
    assert_int_equal(fg_rep_overlap(5, 20, 0, 10), 5);
    assert_int_equal(fg_rep_overlap(0, 10, 10, 20), 0); /* half-open */
    assert_int_equal(fg_rep_overlap(0, 100, 10, 20), 10);
    assert_int_equal(fg_rep_overlap(30, 40, 10, 20), 0);
    char b[32];
    assert_string_equal(fg_rep_rfc3339(0, b, sizeof b), "1970-01-01T00:00:00Z");
    assert_string_equal(fg_rep_rfc3339(1796223218, b, sizeof b), "2026-12-02T14:53:38Z");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_period), cmocka_unit_test(test_buckets),
        cmocka_unit_test(test_sizes),  cmocka_unit_test(test_percentile),
        cmocka_unit_test(test_jain),   cmocka_unit_test(test_overlap_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
