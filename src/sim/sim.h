/*
 * sim.h - the trace replay: a discrete-event simulation that drives the scheduler core
 * (include/fairgpu/core.h) through its public API only.
 */
#ifndef FG_SIM_SIM_H
#define FG_SIM_SIM_H

#include "fairgpu/core.h"
#include "sim/metrics.h"
#include "sim/trace.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A group of identical nodes (--cluster FILE lines). */
typedef struct fg_sim_nodes {
    int32_t count;
    int32_t gpus;
    char gpu_type[FG_NAME_MAX];
} fg_sim_nodes_t;

typedef struct fg_sim_opts {
    fg_config_t cfg;              /* policy and tunables, passed to the core as is */
    const fg_sim_nodes_t *groups; /* the cluster */
    size_t ngroups;
    const double *weights;         /* per trace tenant (NULL: all 1) */
    const double *usage;           /* per trace tenant: decayed usage (GPU-seconds) at the
                                      first submit time, as the fair share saw it (NULL: 0) */
    const int32_t *quotas;         /* per trace tenant: GPU quota (< 0: none), in force for
                                      the arrivals from quotas_from on (NULL: none) */
    int64_t quotas_from;           /* (a quota lowered on a live cluster does not stop
                                      the jobs running: what-if replays place those first) */
    bool stuck_ends;               /* when jobs wait and nothing is left that could start
                                      them (a quota below their size), end the replay with
                                      them never completed (ends == 0), not an error */
    double time_limit_factor;      /* >= 1 */
    int time_limit_model;          /* fg_tlimit_model_t (tlimit.h): factor (default), rounded */
    uint64_t time_limit_seed;      /* the rounded model's draws */
    bool estimates_history;        /* also the history-based start estimate (histest.h) */
    int64_t checkpoint_interval_s; /* >= 0, 0 = none */
    int64_t restart_overhead_s;    /* >= 0: a resumed attempt's GPUs run this long before
                                      the job makes progress again (sim.c) */
    bool progress;                 /* progress lines on stderr */
    const char *share_series;      /* file for each tenant's GPU share over time, or NULL */
    int64_t share_interval_s;      /* its sampling interval (> 0) */
} fg_sim_opts_t;

/* Fills *o with the defaults: fg_config_default, time limit factor 2 (the factor model,
 * seed 1), checkpoint interval 900 s, restart overhead 120 s, share interval 3600 s, the
 * core's estimate only; no cluster. */
void fg_sim_opts_default(fg_sim_opts_t *o);

/* The default cluster size: the fewest nodes of gpus_per_node GPUs that cover the
 * trace's offered load (sum of g*d over the submit span, at least a day) and its
 * biggest job. */
int64_t fg_sim_auto_nodes(const fg_trace_t *t, int32_t gpus_per_node);

/* Replays trace t under o. Fills *r (every field) and returns 0, or returns -1 with a
 * message in err. Jobs that can never fit the cluster are skipped and counted
 * (r->skipped_too_big). */
int fg_sim_run(const fg_trace_t *t, const fg_sim_opts_t *o, fg_sim_result_t *r, char *err,
               size_t errlen);

/* Per-job records (for tests and --jobs-out): fg_sim_run_recs does what
 * fg_sim_run does and also returns the records (indexed like t->jobs; a skipped job has
 * start = end = -1), which the caller frees with fg_sim_recs_free. */
int fg_sim_run_recs(const fg_trace_t *t, const fg_sim_opts_t *o, fg_sim_result_t *r,
                    fg_jobrec_t **recs, char *err, size_t errlen);
void fg_sim_recs_free(fg_jobrec_t *recs, const fg_trace_t *t);

#endif
