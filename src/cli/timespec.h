/*
 * timespec.h - job time limits as people write them: Slurm's forms and unit suffixes.
 *
 * Pure: no I/O, no globals; safe on untrusted input (script lines, argv).
 */
#ifndef FG_CLI_TIMESPEC_H
#define FG_CLI_TIMESPEC_H

#include <stddef.h>

/* The largest time limit accepted, in seconds (2^31 - 1, about 68 years). */
#define FG_TIME_MAX_S 2147483647LL

/*
 * Parses a time limit into seconds. Accepted forms (whole string, no spaces):
 *
 *   Slurm:  M  M:S  H:M:S  D-H  D-H:M  D-H:M:S     (e.g. 90, 5:30, 1:00:00, 2-12:00:00)
 *   units:  90s  30m  2h  1d, and decreasing combinations such as 1h30m or 1d12h
 *
 * In the Slurm forms the leading field is unbounded (90:00 is 90 minutes); the fields
 * after it must be below 60 (minutes, seconds) or 24 (hours after "D-"). The result
 * must be positive and at most FG_TIME_MAX_S.
 *
 * Returns 0 and stores the seconds in *out, or -1 with a sentence in err (always
 * NUL-terminated when errlen > 0); *out is untouched on error.
 */
int fg_parse_time(const char *s, long long *out, char *err, size_t errlen);

/*
 * Formats a duration compactly for tables: "45s", "12m05s", "2h05m", "3d04h".
 * Negative values print as "-". Writes at most buflen bytes (NUL included); returns buf.
 */
char *fg_format_duration(long long s, char *buf, size_t buflen);

#endif
