/*
 * estimate.h - start estimates from what the platform knows: how long jobs really run
 * against their time limits (a run-time model learnt from history) and a projection of
 * the queue with those run times (pure C, no I/O; src/estimate/).
 *
 * Why: the core's estimate assumes every running job uses its whole time limit, so a
 * 10 s job with a 60 s limit makes the job behind it "start in 59 s". Users ask for
 * limits far above what their jobs run (Helios, Lucid: a user's past ratio of run time
 * to limit predicts the next one well), so the estimate here predicts each job's run
 * time from its user's history and replays the plan order with it.
 *
 * Worked example: alice's last six jobs ran 0.4, 0.4, 0.5, 0.5, 0.6 and 0.6 of their
 * limits (a prediction needs at least 5 entries that ran longer than the job has so far,
 * src/estimate/runtime.c). Her running 1-GPU job started 10 min ago with a 2 h limit:
 * its remaining run is predicted as 0.5 x 2 h - 10 min = 50 min (p50), 0.4 x 2 h - 10 min = 38 min
 * (p10), 62 min (p90). On a one-GPU cluster, a pending job behind it is projected to start in 50
 * min, with the range 38..62 min; the limit-based estimate said 110 min.
 *
 * The caller (controller, simulator) owns a model, records each job that ends
 * (fg_rt_record), and before answering reads a prefix of the plan order
 * (fg_sched_plan_order) and calls fg_est_queue: it reads the core's nodes and running
 * jobs, asks the caller what the core does not know of each job (its account, user,
 * how long it has run) and projects the prefix once per quantile (p10, p50, p90,
 * fg_proj_run) with the core's preemption and no-backfill rules: the three starts of a
 * job are its range. The controller and the simulator make the same estimate.
 */
#ifndef FAIRGPU_ESTIMATE_H
#define FAIRGPU_ESTIMATE_H

#include "fairgpu/core.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ run-time model */

typedef struct fg_rt_model fg_rt_model_t;

/* A model with empty histories: the last 50 jobs of each user, 200 of each account and
 * 1,000 of everyone; a level answers with at least 5 entries. */
fg_rt_model_t *fg_rt_new(void);
void fg_rt_free(fg_rt_model_t *m);

/* Records a job that ended on its own (completed, failed or timed out; not cancelled,
 * not lost): it ran `ran_s` seconds of run time in all (its attempts summed, work lost
 * to preemption excluded) against a limit of `limit_s` (> 0). account or user may be
 * NULL. The model keeps a bounded recent history per user and account and for all. */
void fg_rt_record(fg_rt_model_t *m, const char *account, const char *user, fg_time_t limit_s,
                  fg_time_t ran_s);

/* Where a prediction came from: the user's own history, the account's, everyone's, or
 * none (the time limit itself). */
typedef enum fg_rt_source { FG_RT_USER, FG_RT_ACCOUNT, FG_RT_ALL, FG_RT_LIMIT } fg_rt_source_t;
const char *fg_rt_source_name(fg_rt_source_t s); /* "user", "account", "all", "limit" */

/* A predicted remaining run time, in seconds: p10 <= p50 <= p90, each at least 1 and at
 * most what is left of the limit. */
typedef struct fg_rt_pred {
    fg_time_t p10, p50, p90;
    fg_rt_source_t source;
    int32_t samples; /* history entries the prediction used */
} fg_rt_pred_t;

/* Predicts the remaining run time of a job of `limit_s` that has already run `ran_s`
 * (0 when pending; a requeued job: what it keeps from its checkpoints), conditioned on
 * having run that long: only history entries that ran longer than ran_s count. */
void fg_rt_predict(const fg_rt_model_t *m, const char *account, const char *user, fg_time_t limit_s,
                   fg_time_t ran_s, fg_rt_pred_t *out);

/* ------------------------------------------------------------------ projection */

/* A node of the projection: its GPUs, a small integer GPU type (the caller's mapping),
 * whether jobs may start on it, and when each GPU is free (<= now: free now). */
typedef struct fg_proj_node {
    int32_t gpus; /* 1..FG_MAX_NODE_GPUS */
    int32_t type;
    bool up;
    fg_time_t free_at[FG_MAX_NODE_GPUS];
} fg_proj_node_t;

/* A pending job of the projection, in plan order: GPUs (1..8 on one node, or a multiple
 * of 8 on whole nodes), type (-1: any), predicted run time, and not before (backoff). */
typedef struct fg_proj_job {
    int32_t gpus;
    int32_t type;
    fg_time_t run_s;
    fg_time_t not_before;
} fg_proj_job_t;

/* Projects when each job starts if the jobs start in order as GPUs free up, each on the
 * place that lets it start earliest (a later job may start before an earlier one where
 * it fits in what that one leaves: backfill), and writes start[i] (FG_TIME_NEVER: no
 * node could ever hold it). nodes[].free_at is updated as the jobs are placed. */
void fg_proj_run(fg_proj_node_t *nodes, int32_t nnodes, const fg_proj_job_t *jobs, int32_t njobs,
                 fg_time_t now, fg_time_t *start);

/* ------------------------------------------------------------------ the queue */

/* What the queue estimate needs of a live job that the core does not tell (the
 * simulator's replay records, the controller's jobs). */
typedef struct fg_est_job {
    const char *account, *user; /* NULL: unknown */
    const char *gpu_type;       /* pending: the type it asks for (NULL or "": any) */
    int32_t gpus;
    fg_time_t limit_s;      /* its time limit (<= 0: none known: predicted 1 s) */
    fg_time_t ran_s;        /* the run time its prediction is given (what it keeps) */
    fg_time_t served_s;     /* running: run time over all its attempts (quantum_s) */
    fg_time_t attempt_s;    /* running: this attempt's run time so far */
    fg_time_t checkpoint_s; /* running: its checkpoint interval (0: none) */
    fg_time_t not_before;   /* pending: not before this (backoff) */
} fg_est_job_t;

/* Fills *out (zeroed, gpus 1) for live job id at now. Its strings need to live only
 * until fn is called again. */
typedef void (*fg_est_job_fn)(void *ctx, fg_job_id_t id, fg_time_t now, fg_est_job_t *out);

/* A job's projected starts, p10 <= p50 <= p90 (FG_TIME_NEVER: none), and where its run
 * time prediction came from. */
typedef struct fg_est_start {
    fg_time_t p10, p50, p90;
    fg_rt_source_t source;
} fg_est_start_t;

/* Memory fg_est_queue keeps from call to call (a caller that estimates often keeps
 * one, used by one thread at a time; NULL: a call allocates its own). */
typedef struct fg_est_scratch fg_est_scratch_t;
fg_est_scratch_t *fg_est_scratch_new(void);
void fg_est_scratch_free(fg_est_scratch_t *w); /* NULL: nothing */

/* The start estimates at now of the pending jobs ids[0..n), a prefix of the plan order
 * in its order, into out[0..n) (src/estimate/queue.c). Running jobs end at their
 * predicted ends (model m, given fn's ran_s); the pending ones run their predicted
 * runs, in order as GPUs free up with backfill (fifo or backfill off: each no earlier
 * than the one before); under fair, wfq, rr and las with preemption, a job projected
 * after now + preempt_wait_s starts then if long runners and free GPUs leave it room.
 * Calls fn once per running job and once per ids[i]; changes nothing in the core or m. */
void fg_est_queue(fg_est_scratch_t *w, const fg_sched_t *s, const fg_rt_model_t *m, fg_time_t now,
                  const fg_job_id_t *ids, size_t n, fg_est_job_fn fn, void *ctx,
                  fg_est_start_t *out);

#ifdef __cplusplus
}
#endif
#endif /* FAIRGPU_ESTIMATE_H */
