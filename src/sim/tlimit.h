/*
 * tlimit.h - how the simulated users set their jobs' time limits (--time-limit-model).
 */
#ifndef FG_SIM_TLIMIT_H
#define FG_SIM_TLIMIT_H

#include <stdint.h>

typedef enum fg_tlimit_model {
    FG_TLIMIT_FACTOR = 0, /* limit = duration x factor (the default) */
    FG_TLIMIT_ROUNDED,    /* a per-user factor with noise, rounded up to a usual value */
} fg_tlimit_model_t;

/* Parses "factor" or "rounded"; -1 if unknown. */
int fg_tlimit_parse(const char *s);
const char *fg_tlimit_name(fg_tlimit_model_t m);

/* The rounded model's limit of a job of `duration` seconds (>= 1) of tenant `user` (its
 * index in the trace) and trace index `job`, under `seed`: never less than the duration,
 * one of 30m 1h 2h 4h 8h 12h 24h 48h 72h 7d, or whole weeks above that (tlimit.c). */
int64_t fg_tlimit_rounded(uint64_t seed, int32_t user, uint64_t job, int64_t duration);

/* The rounded model's factor of user `user` under `seed` (the median of its jobs'
 * limit/duration before rounding). */
double fg_tlimit_user_factor(uint64_t seed, int32_t user);

#endif
