/*
 * money.h - amounts of money as people read and type them: integer micro-units (the
 * API's) shown as currency units with all 6 decimals, so a table is exact to the
 * micro-unit, and currency units typed on the command line read back exactly.
 *
 * Pure: no I/O, no globals; safe on untrusted input (argv).
 * Example: fg_fmt_micros(-1500000) -> "-1.500000"; fg_parse_units("1.5") -> 1500000.
 */
#ifndef FG_CLI_MONEY_H
#define FG_CLI_MONEY_H

#include <stddef.h>
#include <stdint.h>

/* micros as "[-]U.DDDDDD" into buf (n >= 24 always fits); returns buf. */
const char *fg_fmt_micros(int64_t micros, char *buf, size_t n);

/* "U", "U.D" .. "U.DDDDDD" (no sign, at most 10^9 units) into *micros: 0, or -1. */
int fg_parse_units(const char *s, int64_t *micros);

#endif
