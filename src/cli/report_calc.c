/*
 * report_calc.c - the pure figures of `fairgpu report`: see report_calc.h for each
 * definition and its worked example.
 */
#include "cli/report_calc.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int fg_rep_parse_period(const char *s, long long *out, char *err, size_t errlen)
{
    static const struct {
        char unit;
        long long secs;
    } units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}, {'w', 7 * 86400}};
    const char *form = "a whole number and a unit (s, m, h, d, w), e.g. 7d or 36h";
    if (!s || !isdigit((unsigned char)s[0])) {
        snprintf(err, errlen, "period '%.32s' must be %s", s ? s : "", form);
        return -1;
    }
    char *end;
    errno = 0;
    long long n = strtoll(s, &end, 10);
    long long mul = 0;
    for (size_t i = 0; i < sizeof units / sizeof units[0] && end[0] && !end[1]; i++)
        if (end[0] == units[i].unit)
            mul = units[i].secs;
    if (errno || !mul || n <= 0) {
        snprintf(err, errlen, "period '%.32s' must be %s", s, form);
        return -1;
    }
    if (n > FG_REP_PERIOD_MAX_S / mul || n * mul < FG_REP_PERIOD_MIN_S ||
        n * mul > FG_REP_PERIOD_MAX_S) {
        snprintf(err, errlen, "period '%.32s' must be between 1h and 366d", s);
        return -1;
    }
    *out = n * mul;
    return 0;
}

long long fg_rep_bucket_s(long long period_s)
{
    if (period_s > 2 * 86400)
        return 86400;
    if (period_s > 6 * 3600)
        return 3600;
    return 600;
}

int fg_rep_size_class(long long gpus)
{
    return gpus <= 1 ? 0 : gpus < 8 ? 1 : gpus == 8 ? 2 : 3;
}

const char *fg_rep_size_name(int cls)
{
    static const char *const names[FG_REP_SIZES] = {"1", "2-7", "8", ">8"};
    assert(cls >= 0 && cls < FG_REP_SIZES);
    return names[cls];
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

long long fg_rep_percentile(long long *v, size_t n, double p)
{
    assert(p > 0 && p <= 100);
    if (!n)
        return -1;
    qsort(v, n, sizeof *v, cmp_ll);
    /* rank = ceil(p/100 * n), computed in integers of 1/1000 % to avoid 0.9 * 10 = 8.99 */
    long long milli = (long long)(p * 1000 + 0.5);
    size_t rank = (size_t)(((long long)n * milli + 100000 - 1) / 100000);
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return v[rank - 1];
}

double fg_rep_jain(const double *x, size_t n)
{
    double sum = 0, sq = 0;
    for (size_t i = 0; i < n; i++) {
        assert(x[i] >= 0);
        sum += x[i];
        sq += x[i] * x[i];
    }
    if (!n || sq <= 0)
        return -1;
    return sum * sum / ((double)n * sq);
}

long long fg_rep_overlap(long long a0, long long a1, long long b0, long long b1)
{
    long long lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
    return hi > lo ? hi - lo : 0;
}

const char *fg_rep_rfc3339(long long t, char *buf, size_t n)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (!gmtime_r(&tt, &tm) || !strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(buf, n, "?");
    return buf;
}
