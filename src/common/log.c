/*
 * log.c - one line per message on stderr, with a level and a UTC timestamp.
 */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

static int g_level = FG_LOG_INFO;

void fg_log_set_level(int level)
{
    g_level = level;
}

void fg_log(int level, const char *fmt, ...)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    if (level < g_level)
        return;
    char ts[32];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s %s %s\n", ts, names[level < 0 ? 0 : level > 3 ? 3 : level], msg);
}
