/*
 * estacc.h - how good the replay's start estimates made at submission were: the core's
 * limit-based one and the history-based one (--estimates history), by job size and by
 * how long the job waited.
 */
#ifndef FG_SIM_ESTACC_H
#define FG_SIM_ESTACC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define FG_EST_SIZES    4 /* "1", "2-7", "8", ">8" GPUs */
#define FG_EST_HORIZONS 4 /* actual wait "<10m", "10m-1h", "1h-6h", ">6h" */
extern const char *const fg_est_size_names[FG_EST_SIZES];
extern const char *const fg_est_horizon_names[FG_EST_HORIZONS];

/* Absolute errors |start - estimate| of `jobs` jobs: median and p90 (nearest rank). */
typedef struct fg_est_err {
    int64_t jobs;
    int64_t p50, p90; /* 0 when jobs == 0 (shown as null) */
} fg_est_err_t;

/* One group of jobs that waited after submission and have both estimates. */
typedef struct fg_est_group {
    int64_t jobs;
    fg_est_err_t limit, history;
    int64_t covered; /* of them, started within the history range [p10, p90] */
} fg_est_group_t;

typedef struct fg_estacc {
    int64_t jobs;          /* replayed jobs that started */
    int64_t at_once;       /* of them, started at submission (both estimates exact) */
    int64_t waited;        /* the others */
    int64_t no_limit;      /* of those, without a core estimate (beyond estimate_depth) */
    fg_est_err_t hist_all; /* history error over every job that waited */
    fg_est_group_t all, by_size[FG_EST_SIZES], by_horizon[FG_EST_HORIZONS];
} fg_estacc_t;

/* Per job: what estacc reads (filled by the replay). */
typedef struct fg_est_rec {
    int64_t submit, start; /* start < 0: never started */
    int32_t gpus;
    bool waited;       /* still pending after the passes at its submission */
    int64_t limit_est; /* the core's estimate at submission; < 0: none */
    int64_t hist[3];   /* history p10, p50, p90; hist[1] < 0: none */
} fg_est_rec_t;

int fg_est_size_class(int32_t gpus);
int fg_est_horizon(int64_t wait_s);

/* Computes the figures of recs[0..n). */
void fg_estacc_compute(const fg_est_rec_t *recs, size_t n, fg_estacc_t *out);

/* The figures as a JSON object (new reference). */
json_t *fg_estacc_json(const fg_estacc_t *a);

/* The figures as a table (plain text or Markdown), headed by `title`. */
void fg_estacc_print(FILE *out, const fg_estacc_t *a, const char *title, bool markdown);

#endif
