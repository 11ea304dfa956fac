/*
 * report_calc.h - the figures of `fairgpu report` (cli_report.c), computed from what
 * the API gave: the report period, its time buckets, job size classes, nearest-rank
 * percentiles, Jain's fairness index and interval overlap.
 *
 * Pure: no I/O, no globals, no clock; safe on untrusted input (argv, server replies).
 *
 * Jain's index of allocations x_1..x_n is (sum x)^2 / (n * sum x^2): 1 when all are
 * equal, 1/n when one holds everything. The report weighs each account by its share:
 * x_i = GPU-seconds_i / normalized_share_i, so an account that gets exactly its share
 * of what was used scores like an equal one. Example: shares 0.75 and 0.25, GPU-s 300
 * and 100 -> x = 400, 400 -> J = 1; GPU-s 400 and 0 -> x = 533, 0 -> J = 0.5.
 */
#ifndef FG_CLI_REPORT_CALC_H
#define FG_CLI_REPORT_CALC_H

#include <stddef.h>

#define FG_REP_PERIOD_MIN_S 3600LL            /* 1 h */
#define FG_REP_PERIOD_MAX_S (366LL * 86400LL) /* 366 d */

/*
 * Parses a report period: a positive whole number and a unit, s m h d or w, as in
 * "7d", "36h", "90m", "2w", between 1 h and 366 d. Returns 0 and the seconds in *out,
 * or -1 with a sentence in err (*out untouched).
 */
int fg_rep_parse_period(const char *s, long long *out, char *err, size_t errlen);

/* The bucket length for a period: 1 day above 2 days, 1 hour above 6 hours, else
 * 10 minutes (so 1 h..366 d gives 6..366 buckets, at most 48 under 2 days). */
long long fg_rep_bucket_s(long long period_s);

/* A job size class: 0 "1", 1 "2-7", 2 "8", 3 ">8" GPUs. */
#define FG_REP_SIZES 4
int fg_rep_size_class(long long gpus);
const char *fg_rep_size_name(int cls);

/*
 * The nearest-rank p-th percentile (0 < p <= 100) of v[0..n): the smallest value with
 * at least p % of them at or below it. Sorts v in place. n == 0: returns -1.
 * Example: {5, 1, 3, 2, 4}, p 50 -> 3; p 90 -> 5; p 20 -> 1.
 */
long long fg_rep_percentile(long long *v, size_t n, double p);

/* Jain's index of x[0..n) (each >= 0); -1 when n == 0 or every x is 0. */
double fg_rep_jain(const double *x, size_t n);

/* The length of [a0, a1) ∩ [b0, b1) (0 when they do not meet). */
long long fg_rep_overlap(long long a0, long long a1, long long b0, long long b1);

/* UTC "YYYY-MM-DDTHH:MM:SSZ" of Unix time t into buf (n >= 21); returns buf. */
const char *fg_rep_rfc3339(long long t, char *buf, size_t n);

#endif
