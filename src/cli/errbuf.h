/*
 * errbuf.h - an error message into the caller's buffer, for the pure parsers (script.c,
 * timespec.c) that say why they refused an input without printing it.
 *
 * Example: `return fg_cli_errf(err, errlen, "--%s: the value is empty", opt);` writes
 * the message into err (when err is not NULL) and returns -1.
 */
#ifndef FG_CLI_ERRBUF_H
#define FG_CLI_ERRBUF_H

#include <stddef.h>

/* Formats the message into err[0..errlen) (nothing when err is NULL or errlen 0);
 * returns -1. */
int fg_cli_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
