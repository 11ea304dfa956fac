/*
 * timespec.c - time limits: Slurm's "[D-]H:M:S" family and "2h"-style suffixes.
 *
 * Slurm reads a bare number as minutes, so "--time 90" is an hour and a half; one colon
 * is minutes:seconds; two are hours:minutes:seconds; a "D-" prefix adds days and then
 * the next field is hours:
 *
 *   "90"        -> 5400       "5:30"     -> 330        "1:00:00"   -> 3600
 *   "2-0"       -> 172800     "1-12:30"  -> 131400     "1-0:0:1"   -> 86401
 *   "90s" -> 90   "30m" -> 1800   "2h" -> 7200   "1d" -> 86400   "1h30m" -> 5400
 */
#include "cli/timespec.h"
#include "cli/errbuf.h"

#include <stdio.h>
#include <string.h>

/* Reads the decimal digits in [p, end): at least one, no sign. Returns 0 and the value,
 * -1 when not digits, -2 when past FG_TIME_MAX_S. */
static int digits(const char *p, const char *end, long long *v)
{
    if (p >= end)
        return -1;
    long long x = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        x = x * 10 + (*p - '0');
        if (x > FG_TIME_MAX_S)
            return -2;
    }
    *v = x;
    return 0;
}

static const char FORMS[] = "use minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, or a "
                            "number with s/m/h/d such as 90s, 30m, 2h, 1d";

/* "1h30m", "2d", "45s": number+unit pairs, units strictly decreasing. */
static int parse_units(const char *s, long long *total, char *err, size_t errlen)
{
    static const char units[] = "dhms";
    static const long long mult[] = {86400, 3600, 60, 1};
    int last = -1;
    long long t = 0;
    const char *p = s;
    while (*p) {
        const char *q = p;
        while (*q >= '0' && *q <= '9')
            q++;
        long long v = 0;
        if (q == p)
            return fg_cli_errf(err, errlen, "invalid time '%s': expected a number before '%c'; %s",
                               s, *q, FORMS);
        if (digits(p, q, &v) == -2)
            return fg_cli_errf(err, errlen, "time '%s' is too long (at most %lld seconds)", s,
                               FG_TIME_MAX_S);
        if (!*q)
            return fg_cli_errf(err, errlen, "invalid time '%s': %s", s, FORMS);
        char u = *q;
        if (u >= 'A' && u <= 'Z')
            u = (char)(u - 'A' + 'a');
        const char *pos = strchr(units, u);
        if (!pos || !u)
            return fg_cli_errf(err, errlen, "invalid time '%s': unknown unit '%c'; %s", s, *q,
                               FORMS);
        int k = (int)(pos - units);
        if (k <= last)
            return fg_cli_errf(err, errlen,
                               "invalid time '%s': units must go from days to seconds, "
                               "each at most once",
                               s);
        last = k;
        if (v > (FG_TIME_MAX_S - t) / mult[k])
            return fg_cli_errf(err, errlen, "time '%s' is too long (at most %lld seconds)", s,
                               FG_TIME_MAX_S);
        t += v * mult[k];
        p = q + 1;
    }
    *total = t;
    return 0;
}

/* Splits [p, end) at ':' into at most 3 fields; returns the count or -1. */
static int split_colons(const char *p, const char *end, const char *f[3], const char *fe[3])
{
    int n = 0;
    const char *start = p;
    for (const char *q = p;; q++) {
        if (q == end || *q == ':') {
            if (n == 3)
                return -1;
            f[n] = start;
            fe[n] = q;
            n++;
            if (q == end)
                break;
            start = q + 1;
        }
    }
    return n;
}

/* Slurm's forms. */
static int parse_slurm(const char *s, long long *total, char *err, size_t errlen)
{
    const char *end = s + strlen(s);
    const char *dash = strchr(s, '-');
    long long days = 0;
    const char *rest = s;
    if (dash) {
        int d = digits(s, dash, &days);
        if (d == -2)
            return fg_cli_errf(err, errlen, "time '%s' is too long (at most %lld seconds)", s,
                               FG_TIME_MAX_S);
        if (d < 0)
            return fg_cli_errf(err, errlen, "invalid time '%s': %s", s, FORMS);
        rest = dash + 1;
    }
    const char *f[3], *fe[3];
    int n = split_colons(rest, end, f, fe);
    long long v[3] = {0, 0, 0};
    if (n < 0)
        return fg_cli_errf(err, errlen, "invalid time '%s': too many ':' fields; %s", s, FORMS);
    for (int i = 0; i < n; i++) {
        int d = digits(f[i], fe[i], &v[i]);
        if (d == -2)
            return fg_cli_errf(err, errlen, "time '%s' is too long (at most %lld seconds)", s,
                               FG_TIME_MAX_S);
        if (d < 0)
            return fg_cli_errf(err, errlen, "invalid time '%s': %s", s, FORMS);
    }
    long long h = 0, m = 0, sec = 0;
    if (dash) {
        /* D-H, D-H:M, D-H:M:S */
        h = v[0];
        m = n > 1 ? v[1] : 0;
        sec = n > 2 ? v[2] : 0;
        if (h >= 24)
            return fg_cli_errf(err, errlen, "invalid time '%s': hours after 'D-' must be below 24",
                               s);
        if (m >= 60 || sec >= 60)
            return fg_cli_errf(err, errlen,
                               "invalid time '%s': minutes and seconds must be below 60", s);
    } else if (n == 1) {
        m = v[0];
    } else if (n == 2) {
        m = v[0];
        sec = v[1];
        if (sec >= 60)
            return fg_cli_errf(err, errlen, "invalid time '%s': seconds must be below 60", s);
    } else {
        h = v[0];
        m = v[1];
        sec = v[2];
        if (m >= 60 || sec >= 60)
            return fg_cli_errf(err, errlen,
                               "invalid time '%s': minutes and seconds must be below 60", s);
    }
    /* Each term is bounded by FG_TIME_MAX_S * 86400 < 2^63, so this cannot overflow. */
    long long t = days * 86400 + h * 3600 + m * 60 + sec;
    if (t > FG_TIME_MAX_S)
        return fg_cli_errf(err, errlen, "time '%s' is too long (at most %lld seconds)", s,
                           FG_TIME_MAX_S);
    *total = t;
    return 0;
}

int fg_parse_time(const char *s, long long *out, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!s || !*s)
        return fg_cli_errf(err, errlen, "empty time: %s", FORMS);
    size_t n = strlen(s);
    if (n > 64)
        return fg_cli_errf(err, errlen, "invalid time (too long a string): %s", FORMS);
    char last = s[n - 1];
    long long t = 0;
    int rc;
    if ((last >= 'a' && last <= 'z') || (last >= 'A' && last <= 'Z'))
        rc = parse_units(s, &t, err, errlen);
    else
        rc = parse_slurm(s, &t, err, errlen);
    if (rc < 0)
        return -1;
    if (t <= 0)
        return fg_cli_errf(err, errlen, "invalid time '%s': must be more than zero", s);
    *out = t;
    return 0;
}

char *fg_format_duration(long long s, char *buf, size_t buflen)
{
    if (!buflen)
        return buf;
    if (s < 0)
        snprintf(buf, buflen, "-");
    else if (s < 60)
        snprintf(buf, buflen, "%llds", s);
    else if (s < 3600)
        snprintf(buf, buflen, "%lldm%02llds", s / 60, s % 60);
    else if (s < 86400)
        snprintf(buf, buflen, "%lldh%02lldm", s / 3600, s % 3600 / 60);
    else
        snprintf(buf, buflen, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
    return buf;
}
