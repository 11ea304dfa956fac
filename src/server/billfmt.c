/*
 * billfmt.c - the text forms of the billing reports (billfmt.h): query times and
 * months, RFC 3339 output and CSV cells.
 *
 * Example: srv_bill_parse_time("2026-12-01T00:00:00Z", &t) gives t = 1796083200000, the
 * same as srv_bill_parse_time("1796083200000", &t); srv_bill_fmt_time(t) writes
 * "2026-12-01T00:00:00.000Z".
 */
#include "server/billfmt.h"

#include "fairgpu/billing.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#define MS_PER_DAY 86400000LL
#define TIME_END   253402300800000LL /* 10000-01-01T00:00:00Z: times stay before it */

/* n decimal digits at s into *v; false unless all n are digits. */
static bool digits(const char *s, int n, int *v)
{
    int x = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        x = x * 10 + (s[i] - '0');
    }
    *v = x;
    return true;
}

/* Days in month m of year y. */
static int month_days(int y, int m)
{
    static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : d[m - 1];
}

bool srv_bill_parse_month(const char *s, int *year, int *month)
{
    int y, m;
    if (!s || strlen(s) != 7 || s[4] != '-' || !digits(s, 4, &y) || !digits(s + 5, 2, &m) ||
        y < 1970 || m < 1 || m > 12)
        return false;
    *year = y;
    *month = m;
    return true;
}

/* Digits only, at most 15 of them, before the year 10000: ms since the epoch. */
static bool parse_ms(const char *s, int64_t *ms)
{
    size_t n = strlen(s);
    if (n == 0 || n > 15)
        return false;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v >= TIME_END)
        return false;
    *ms = v;
    return true;
}

/* "HH:MM:SS[.fff...]" then "Z" or "+HH:MM" / "-HH:MM" at s: the ms after midnight,
 * less the offset, into *ms. */
static bool parse_clock(const char *s, int64_t *ms)
{
    int h, mi, se, frac = 0;
    if (!digits(s, 2, &h) || s[2] != ':' || !digits(s + 3, 2, &mi) || s[5] != ':' ||
        !digits(s + 6, 2, &se) || h > 23 || mi > 59 || se > 59)
        return false;
    s += 8;
    if (*s == '.') {
        int nd = 0;
        for (s++; *s >= '0' && *s <= '9'; s++, nd++)
            if (nd < 3)
                frac = frac * 10 + (*s - '0');
        if (nd == 0 || nd > 9)
            return false;
        for (; nd < 3; nd++)
            frac *= 10;
    }
    int64_t off = 0;
    if (*s == 'Z' || *s == 'z') {
        s++;
    } else if (*s == '+' || *s == '-') {
        int oh, om;
        if (!digits(s + 1, 2, &oh) || s[3] != ':' || !digits(s + 4, 2, &om) || oh > 23 || om > 59)
            return false;
        off = (oh * 60LL + om) * 60000LL * (*s == '-' ? -1 : 1);
        s += 6;
    } else {
        return false;
    }
    if (*s)
        return false;
    *ms = ((h * 60LL + mi) * 60 + se) * 1000 + frac - off;
    return true;
}

bool srv_bill_parse_time(const char *s, int64_t *ms)
{
    if (!s)
        return false;
    if (parse_ms(s, ms))
        return true;
    int y, m, d;
    if (strlen(s) < 10 || s[4] != '-' || s[7] != '-' || !digits(s, 4, &y) ||
        !digits(s + 5, 2, &m) || !digits(s + 8, 2, &d) || y < 1970 || m < 1 || m > 12 || d < 1 ||
        d > month_days(y, m))
        return false;
    int64_t day = fg_bill_month_start_ms(y, m) + (d - 1) * MS_PER_DAY, clock = 0;
    if (s[10] && !((s[10] == 'T' || s[10] == 't' || s[10] == ' ') && parse_clock(s + 11, &clock)))
        return false;
    if (day + clock < 0 || day + clock >= TIME_END)
        return false;
    *ms = day + clock;
    return true;
}

void srv_bill_fmt_time(int64_t ms, char out[32])
{
    int y, m;
    int64_t t = ms < 0 ? 0 : ms;
    fg_bill_month_of(t, &y, &m);
    int64_t in = t - fg_bill_month_start_ms(y, m);
    assert(in >= 0 && in < 31 * MS_PER_DAY);
    unsigned d = (unsigned)(in / MS_PER_DAY), r = (unsigned)(in % MS_PER_DAY);
    snprintf(out, 32, "%04u-%02u-%02uT%02u:%02u:%02u.%03uZ", (unsigned)y % 10000u,
             (unsigned)m % 100u, (d + 1) % 100u, r / 3600000u % 100u, r / 60000u % 60u,
             r / 1000u % 60u, r % 1000u);
}

/* Appends c to out at *n when it fits (keeping room for the NUL); counts it anyway. */
static void put(char *out, size_t cap, size_t *n, char c)
{
    if (*n + 1 < cap)
        out[*n] = c;
    (*n)++;
}

size_t srv_csv_cell(const char *s, char *out, size_t cap)
{
    if (!s)
        s = "";
    bool formula = strchr("=+-@\t\r", s[0]) != NULL && s[0];
    bool quote = strpbrk(s, ",\"\r\n") != NULL;
    size_t n = 0;
    if (quote)
        put(out, cap, &n, '"');
    if (formula)
        put(out, cap, &n, '\'');
    for (const char *p = s; *p; p++) {
        if (*p == '"')
            put(out, cap, &n, '"');
        put(out, cap, &n, *p);
    }
    if (quote)
        put(out, cap, &n, '"');
    if (cap > 0)
        out[n < cap ? n : cap - 1] = '\0';
    return n;
}
