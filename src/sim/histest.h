/*
 * histest.h - the history-based start estimate of the replay (--estimates history): a
 * run-time model learnt from the jobs that ended and the queue estimate of
 * fairgpu/estimate.h (fg_est_queue, the controller's too), made for each arrival that
 * waits.
 */
#ifndef FG_SIM_HISTEST_H
#define FG_SIM_HISTEST_H

#include "fairgpu/core.h"
#include "fairgpu/estimate.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct fg_histest {
    fg_rt_model_t *model;
    fg_est_scratch_t *scratch; /* fg_est_queue's memory, kept between calls */
    fg_job_id_t *order;        /* plan order */
    size_t order_cap;
    fg_est_start_t *start; /* the estimates of the prefix of plan order */
    size_t start_cap;
    int64_t projections, projected_jobs; /* statistics: calls, jobs projected */
} fg_histest_t;

/* An empty model. */
void fg_histest_init(fg_histest_t *h);
void fg_histest_free(fg_histest_t *h);

/* A job that ended after running ran_s (its work, lost work excluded) of limit_s. */
void fg_histest_record(fg_histest_t *h, const char *account, const char *user, int64_t limit_s,
                       int64_t ran_s);

/* The projected starts (p10, p50, p90; FG_TIME_NEVER: none) at `now` of the pending jobs
 * ids[0..n), into out[0..n): fg_est_queue over the plan order up to the last of them,
 * fn telling what the replay knows of each job. Changes nothing in the core. */
void fg_histest_estimate(fg_histest_t *h, fg_sched_t *s, int64_t now, const fg_job_id_t *ids,
                         size_t n, fg_est_job_fn fn, void *ctx, int64_t (*out)[3]);

#endif
