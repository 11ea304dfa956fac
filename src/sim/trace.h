/*
 * trace.h - the job-trace CSV reader of the simulator.
 *
 * Format (see ../shared/traces/README.md): a header line naming the columns, then one job
 * per line. Required columns: job_id, user, submit_time_s, num_gpus, duration_s; an
 * optional `account` column gives the tenant (else `user` does). Other columns are
 * ignored. Fields may be double-quoted ("" is a quote inside). The input is untrusted:
 * lines are bounded (FG_TRACE_LINE_MAX), integers are parsed strictly with range checks,
 * names are bounded and printable. A bad row is an error naming the file and line, or,
 * with skip_bad, is counted and skipped.
 */
#ifndef FG_SIM_TRACE_H
#define FG_SIM_TRACE_H

#include <stddef.h>
#include <stdint.h>

#define FG_TRACE_LINE_MAX   8192                     /* bytes per line, newline excluded */
#define FG_TRACE_FILE_MAX   ((size_t)1 << 31)        /* 2 GiB */
#define FG_TRACE_TIME_MAX   ((int64_t)1000000000000) /* submit time and duration bound */
#define FG_TRACE_TENANT_MAX 63                       /* bytes of a tenant name */

/* One job of the trace (after rounding its size). */
typedef struct fg_trace_job {
    int64_t submit;   /* seconds */
    int64_t duration; /* seconds of run time, >= 1 */
    int32_t gpus;     /* after rounding sizes > 8 up to whole nodes */
    int32_t tenant;   /* index into fg_trace_t.tenants */
    int64_t line;     /* line number in the file (1 = header) */
    int64_t limit_s;  /* its time limit; 0: duration x the replay's time limit factor */
} fg_trace_job_t;

typedef struct fg_trace {
    char *name;           /* the path given to the loader (copied) */
    fg_trace_job_t *jobs; /* sorted by (submit, line) */
    size_t njobs;
    char **tenants; /* in order of first appearance */
    size_t ntenants;
    int64_t rounded_up;  /* sizes > 8 rounded up to a multiple of 8 */
    int64_t skipped_bad; /* bad rows skipped (skip_bad) */
    char first_bad[256]; /* message of the first skipped row, "" if none */
} fg_trace_t;

typedef struct fg_trace_opts {
    int skip_bad;    /* count and skip bad rows instead of failing */
    size_t max_jobs; /* keep only the first N rows read (0 = all) */
} fg_trace_opts_t;

/* Parses a trace held in memory (len bytes, not NUL-terminated); `name` is used in
 * messages. On success fills *out (free with fg_trace_free) and returns 0. On error
 * returns -1, writes "NAME:LINE: what" into err and leaves *out empty. */
int fg_trace_parse(const char *name, const char *data, size_t len, const fg_trace_opts_t *opts,
                   fg_trace_t *out, char *err, size_t errlen);

/* Reads the file at `path` (at most FG_TRACE_FILE_MAX bytes) and parses it. */
int fg_trace_load(const char *path, const fg_trace_opts_t *opts, fg_trace_t *out, char *err,
                  size_t errlen);

void fg_trace_free(fg_trace_t *t);

/* Strict integer parse of s[0..n): optional '-', decimal digits only, within [lo, hi].
 * Returns 0 and sets *v, or -1. */
int fg_parse_int64(const char *s, size_t n, int64_t lo, int64_t hi, int64_t *v);

#endif
