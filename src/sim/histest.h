/*
 * histest.h - the history-based start estimate of the replay (--estimates history): a
 * run-time model learnt from the jobs that ended and a projection of the queue
 * (fairgpu/estimate.h), made for each arrival that waits.
 */
#ifndef FG_SIM_HISTEST_H
#define FG_SIM_HISTEST_H

#include "fairgpu/core.h"
#include "fairgpu/estimate.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the estimate needs to know of a live job: the replay's own records of it. */
typedef struct fg_histest_job {
    const char *account, *user;
    int32_t gpus;
    int64_t limit_s;
    int64_t ran_s;        /* run time it keeps: checkpointed progress (+ the running attempt) */
    int64_t not_before;   /* pending: not before this */
    int64_t attempt_s;    /* running: this attempt's run time so far */
    int64_t checkpoint_s; /* its checkpoint interval (0: none) */
} fg_histest_job_t;

/* Fills *out for live job `id` at `now`. */
typedef void (*fg_histest_job_fn)(void *ctx, fg_job_id_t id, int64_t now, fg_histest_job_t *out);

typedef struct fg_histest {
    fg_rt_model_t *model;
    size_t njobs;        /* job ids are 1..njobs */
    uint32_t call;       /* the current estimate call, for stamp[] */
    uint32_t *stamp;     /* per job id: the call that predicted end[] */
    int64_t (*end)[3];   /* per job id: predicted end of a running job (p10, p50, p90) */
    bool *longrun;       /* per job id: a running job is a long runner by now + wait */
    bool *victim;        /* per node GPU (node x FG_MAX_NODE_GPUS): its job is a long runner */
    bool *usable;        /* per quantile, node GPU: room for preemption (histest.c) */
    int32_t *room_nodes; /* scratch: nodes found for one job */
    bool preempts;       /* the policy lets a waiting job preempt long runners */
    bool in_order;       /* no backfill: jobs start in plan order */
    int64_t wait_s, quantum_s, min_run_s; /* the core's preemption tunables */
    fg_job_id_t *order;                   /* plan order */
    size_t order_cap;
    fg_proj_node_t *nodes; /* per quantile: nnodes nodes */
    int32_t nnodes;
    fg_proj_job_t *pj; /* the projected jobs (one quantile at a time) */
    fg_time_t *start;
    size_t pj_cap;
    int64_t projections, projected_jobs; /* statistics: calls, jobs projected */
} fg_histest_t;

/* An empty model for the jobs 1..njobs of scheduler s (whose nodes it reads). */
void fg_histest_init(fg_histest_t *h, const fg_sched_t *s, size_t njobs);
void fg_histest_free(fg_histest_t *h);

/* A job that ended after running ran_s (its work, lost work excluded) of limit_s. */
void fg_histest_record(fg_histest_t *h, const char *account, const char *user, int64_t limit_s,
                       int64_t ran_s);

/* The projected starts (p10, p50, p90; FG_TIME_NEVER: none) at `now` of the pending jobs
 * ids[0..n), into out[0..n). Reads the core's plan order and nodes; changes nothing in
 * the core. */
void fg_histest_estimate(fg_histest_t *h, fg_sched_t *s, int64_t now, const fg_job_id_t *ids,
                         size_t n, fg_histest_job_fn fn, void *ctx, int64_t (*out)[3]);

#endif
