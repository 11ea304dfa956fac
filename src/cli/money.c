/*
 * money.c - micro-units to text and back (money.h), in integers only.
 *
 * Example: fg_fmt_micros(30000000) -> "30.000000"; fg_parse_units("0.000001") -> 1;
 * fg_parse_units("1.0000001") fails (finer than a micro-unit).
 */
#include "cli/money.h"

#include <inttypes.h>
#include <stdio.h>

const char *fg_fmt_micros(int64_t micros, char *buf, size_t n)
{
    uint64_t a = micros < 0 ? 0 - (uint64_t)micros : (uint64_t)micros;
    snprintf(buf, n, "%s%" PRIu64 ".%06" PRIu64, micros < 0 ? "-" : "", a / 1000000, a % 1000000);
    return buf;
}

int fg_parse_units(const char *s, int64_t *micros)
{
    int64_t units = 0, frac = 0;
    int nu = 0, nf = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++, nu++) {
        units = units * 10 + (*p - '0');
        if (units > 1000000000)
            return -1;
    }
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++, nf++) {
            if (nf == 6)
                return -1;
            frac = frac * 10 + (*p - '0');
        }
        if (nf == 0)
            return -1;
    }
    if (*p || nu == 0)
        return -1;
    for (int i = nf; i < 6; i++)
        frac *= 10;
    *micros = units * 1000000 + frac;
    return 0;
}
