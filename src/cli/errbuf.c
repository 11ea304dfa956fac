/*
 * errbuf.c - fg_cli_errf: an error message into the caller's buffer (errbuf.h).
 */
#include "cli/errbuf.h"

#include <stdarg.h>
#include <stdio.h>

int fg_cli_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}
