/*
 * test_sim_trace.c - the simulator's CSV reader: good input, every kind of malformed
 * input (the error names the file and the line), --skip-bad counting, size rounding.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sim/trace.h"

#include <stdio.h>
#include <string.h>

#define HDR "job_id,user,submit_time_s,num_gpus,duration_s\n"

static int parse(const char *text, int skip_bad, fg_trace_t *t, char *err, size_t errlen)
{
    fg_trace_opts_t o = {skip_bad, 0};
    return fg_trace_parse("t.csv", text, strlen(text), &o, t, err, errlen);
}

/* A well-formed trace: rows out of order get sorted, extra columns are ignored, the
 * tenant is the account column where it has one, sizes > 8 round up to whole nodes. */
static void test_good(void **state)
{
    (void)state;
    const char *text = "job_id,user,submit_time_s,num_gpus,duration_s,account,extra\r\n"
                       "a,u1,50,1,10,,x\r\n"
                       "b,u2,20,12,100,acct9,\"quoted, with comma\"\r\n"
                       "\r\n"
                       "c,u1,20,8,5,,\"\"\"q\"\"\"\r\n"
                       "d,u3,70,16,7,,y"; /* no final newline */
    fg_trace_t t;
    char err[256] = "";
    assert_int_equal(parse(text, 0, &t, err, sizeof err), 0);
    assert_int_equal(t.njobs, 4);
    /* sorted by submit, then line: b (line 3) before c (line 5) */
    assert_int_equal(t.jobs[0].submit, 20);
    assert_int_equal(t.jobs[0].gpus, 16); /* 12 rounded up */
    assert_int_equal(t.jobs[0].line, 3);
    assert_string_equal(t.tenants[t.jobs[0].tenant], "acct9");
    assert_int_equal(t.jobs[1].line, 5);
    assert_int_equal(t.jobs[1].gpus, 8);
    assert_string_equal(t.tenants[t.jobs[1].tenant], "u1");
    assert_int_equal(t.jobs[2].submit, 50);
    assert_int_equal(t.jobs[2].duration, 10);
    assert_int_equal(t.jobs[3].gpus, 16); /* a multiple of 8 is not rounded */
    assert_int_equal(t.rounded_up, 1);
    assert_int_equal(t.ntenants, 3); /* u1, acct9, u3 */
    assert_int_equal(t.skipped_bad, 0);
    fg_trace_free(&t);
}

/* Each bad row gives an error that names the file and the line, and the reason. */
static void test_bad_rows(void **state)
{
    (void)state;
    static const struct {
        const char *row;
        const char *want;
    } cases[] = {
        {"a,u,1x,1,10", "t.csv:2: submit_time_s"},
        {"a,u,-1,1,10", "t.csv:2: submit_time_s"},
        {"a,u,,1,10", "t.csv:2: submit_time_s"},
        {"a,u, 5,1,10", "t.csv:2: submit_time_s"},
        {"a,u,99999999999999999999999,1,10", "t.csv:2: submit_time_s"},
        {"a,u,1,0,10", "t.csv:2: num_gpus"},
        {"a,u,1,1025,10", "t.csv:2: num_gpus"},
        {"a,u,1,1.5,10", "t.csv:2: num_gpus"},
        {"a,u,1,1,0", "t.csv:2: duration_s"},
        {"a,u,1,1,+5", "t.csv:2: duration_s"},
        {"a,,1,1,5", "t.csv:2: user is empty"},
        {"a,u v,1,1,5", "t.csv:2: user contains"},
        {"a,u\x01,1,1,5", "t.csv:2: user contains"},
        {"a,u,1,1", "t.csv:2: expected 5 fields, got 4"},
        {"a,u,1,1,5,6", "t.csv:2: expected 5 fields, got 6"},
        {"a,\"u,1,1,5", "t.csv:2: unterminated quoted field"},
        {"a,\"u\"x,1,1,5", "t.csv:2: text after a closing quote"},
        {"a,u\"x,1,1,5", "t.csv:2: quote inside an unquoted field"},
        {"a,uuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuu,1,1,5",
         "t.csv:2: user is longer than 63 bytes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, HDR "%s\n", cases[i].row);
        fg_trace_t t;
        char err[256] = "";
        assert_int_equal(parse(text, 0, &t, err, sizeof err), -1);
        if (strstr(err, cases[i].want) == NULL)
            fail_msg("row %zu '%s': error '%s' lacks '%s'", i, cases[i].row, err, cases[i].want);
        assert_null(t.jobs);
    }
}

/* The error names the right line when the bad row comes later. */
static void test_line_numbers(void **state)
{
    (void)state;
    const char *text = HDR "a,u,1,1,5\n\nb,u,2,1,5\nc,u,3,x,5\n";
    fg_trace_t t;
    char err[256] = "";
    assert_int_equal(parse(text, 0, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "t.csv:5: num_gpus"));
}

/* Header problems: missing column, duplicated column, no header at all. */
static void test_header(void **state)
{
    (void)state;
    fg_trace_t t;
    char err[256] = "";
    assert_int_equal(parse("job_id,user,submit_time_s,num_gpus\n", 0, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "t.csv:1: header: missing column duration_s"));
    assert_int_equal(
        parse("job_id,user,user,submit_time_s,num_gpus,duration_s\n", 0, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "column user appears twice"));
    assert_int_equal(parse("", 0, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "no header line"));
    /* a header alone is an empty trace */
    assert_int_equal(parse(HDR, 0, &t, err, sizeof err), 0);
    assert_int_equal(t.njobs, 0);
    fg_trace_free(&t);
}

/* Lines are bounded; NUL bytes are refused. */
static void test_limits(void **state)
{
    (void)state;
    size_t n = strlen(HDR) + FG_TRACE_LINE_MAX + 10;
    char *text = test_malloc(n + 1);
    memcpy(text, HDR, strlen(HDR));
    memset(text + strlen(HDR), 'a', n - strlen(HDR));
    text[n] = '\0';
    fg_trace_t t;
    char err[256] = "";
    assert_int_equal(fg_trace_parse("t.csv", text, n, NULL, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "t.csv:2: line longer than"));
    test_free(text);

    const char nul[] = HDR "a,u,1,1,5\nb,u\0x,2,1,5\n";
    assert_int_equal(fg_trace_parse("t.csv", nul, sizeof nul - 1, NULL, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "t.csv:3: NUL byte"));
}

/* --skip-bad: bad rows are counted and skipped, the first is remembered. */
static void test_skip_bad(void **state)
{
    (void)state;
    const char *text = HDR "a,u,1,1,5\nb,u,2,zz,5\nc,u,3,2,5\nd,u,4,1\ne,w,5,24,5\n";
    fg_trace_t t;
    char err[256] = "";
    assert_int_equal(parse(text, 1, &t, err, sizeof err), 0);
    assert_int_equal(t.njobs, 3);
    assert_int_equal(t.skipped_bad, 2);
    assert_non_null(strstr(t.first_bad, "t.csv:3: num_gpus"));
    assert_int_equal(t.rounded_up, 0); /* 24 is a multiple of 8 */
    fg_trace_free(&t);
}

static void test_max_jobs(void **state)
{
    (void)state;
    const char *text = HDR "a,u,1,1,5\nb,u,2,1,5\nc,u,3,2,5\n";
    fg_trace_opts_t o = {0, 2};
    fg_trace_t t;
    char err[256];
    assert_int_equal(fg_trace_parse("t.csv", text, strlen(text), &o, &t, err, sizeof err), 0);
    assert_int_equal(t.njobs, 2);
    fg_trace_free(&t);
}

static void test_parse_int(void **state)
{
    (void)state;
    int64_t v = 0;
    assert_int_equal(fg_parse_int64("42", 2, 0, 100, &v), 0);
    assert_int_equal(v, 42);
    assert_int_equal(fg_parse_int64("-3", 2, -5, 5, &v), 0);
    assert_int_equal(v, -3);
    assert_int_equal(fg_parse_int64("101", 3, 0, 100, &v), -1);
    assert_int_equal(fg_parse_int64("", 0, 0, 100, &v), -1);
    assert_int_equal(fg_parse_int64("-", 1, -5, 100, &v), -1);
    assert_int_equal(fg_parse_int64("1e3", 3, 0, 10000, &v), -1);
    assert_int_equal(fg_parse_int64("9223372036854775808", 19, 0, INT64_MAX, &v), -1);
    assert_int_equal(fg_parse_int64("9223372036854775807", 19, 0, INT64_MAX, &v), 0);
    assert_true(v == INT64_MAX);
}

/* A missing file is an error naming it. */
static void test_load_missing(void **state)
{
    (void)state;
    fg_trace_t t;
    char err[256] = "";
    assert_int_equal(fg_trace_load("/nonexistent/x.csv", NULL, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/x.csv"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),         cmocka_unit_test(test_bad_rows),
        cmocka_unit_test(test_line_numbers), cmocka_unit_test(test_header),
        cmocka_unit_test(test_limits),       cmocka_unit_test(test_skip_bad),
        cmocka_unit_test(test_max_jobs),     cmocka_unit_test(test_parse_int),
        cmocka_unit_test(test_load_missing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
