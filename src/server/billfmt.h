/*
 * billfmt.h - the text forms of the billing reports: times and months in queries,
 * RFC 4180 CSV cells. Pure functions, no I/O, no locks, safe
 * on untrusted input (query strings): tests/unit/test_billfmt.c and the adjustments
 * fuzzer cover them.
 *
 * TIMES (?from=, ?to=) are either milliseconds since the Unix epoch (digits only) or
 * RFC 3339 / ISO 8601: "2026-11-01" (00:00 UTC), "2026-11-01T12:30:00Z",
 * "2026-11-01T12:30:00.250+02:00". Times from 1970 to the end of 9999; a time zone is required with
 * a clock time. MONTHS are exactly "YYYY-MM" (2026-11; not 2026-1 nor 2026-13).
 *
 * CSV: a cell holding a comma, a quote, CR or LF is quoted, quotes doubled (RFC 4180).
 * A cell starting with = + - @ (or TAB, CR) that a spreadsheet would run as a formula
 * gets a leading single quote first ("=cmd()" -> "'=cmd()"); numbers are written by the
 * caller unescaped, so a negative amount stays a number.
 *
 * Example: srv_csv_cell("a,\"b\"", buf, n) writes "\"a,\"\"b\"\"\"".
 */
#ifndef FG_SERVER_BILLFMT_H
#define FG_SERVER_BILLFMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A time of a query: ms since the epoch or RFC 3339 (above) into *ms; false if not. */
bool srv_bill_parse_time(const char *s, int64_t *ms);
/* "YYYY-MM" into *year, *month; false unless exactly that with month 01..12. */
bool srv_bill_parse_month(const char *s, int *year, int *month);
/* ms since the epoch as "YYYY-MM-DDTHH:MM:SS.mmmZ" (out has room for 32 bytes). */
void srv_bill_fmt_time(int64_t ms, char out[32]);
/* One CSV cell of text s (NULL: empty) into out (cap bytes, NUL-terminated when cap >
 * 0), quoted and formula-guarded as above. Returns the length it needs (as snprintf). */
size_t srv_csv_cell(const char *s, char *out, size_t cap);

#endif
