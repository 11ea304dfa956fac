/*
 * whatif.h - what-if replays of a live queue: a snapshot of the cluster (its nodes, the
 * jobs running and pending now, each account's weight, quota and decayed usage) is
 * replayed through the simulator twice, under the live settings and under changed
 * ones, and the two are compared per account (wait, JCT, GPU time, utilization).
 *
 * The replay starts at the snapshot (t = 0): the running jobs are placed first (on the
 * nodes the core picks, which may differ from the live placement), then every pending
 * job is submitted at t = 1 in its live submit order, and the replay runs until all of
 * them end. Each job runs its predicted run time (what is left of it for a running
 * job): the caller predicts it (its time limit, or its user's history,
 * fairgpu/estimate.h). No job arrives after the snapshot, so the figures describe how
 * today's queue drains, not a steady state. Pure: no I/O.
 */
#ifndef FG_SIM_WHATIF_H
#define FG_SIM_WHATIF_H

#include "fairgpu/core.h"
#include "sim/sim.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct fg_whatif_account {
    char name[FG_NAME_MAX + 1];
    double weight;      /* > 0 */
    int32_t quota;      /* GPUs; < 0: none */
    double usage_gpu_s; /* decayed usage now */
} fg_whatif_account_t;

typedef struct fg_whatif_job {
    int32_t account; /* index into the snapshot's accounts */
    int32_t gpus;    /* 1..8 or a multiple of 8 */
    bool running;    /* running now (else pending) */
    int64_t submit;  /* when submitted: orders the pending jobs */
    int64_t limit_s; /* its time limit (for a running job, what is left of it), >= 1 */
    int64_t run_s;   /* its predicted (remaining) run time, 1..limit_s */
} fg_whatif_job_t;

/* The settings a replay runs under: the core's configuration, the nodes and each
 * account's weight and quota (arrays of the snapshot's naccounts). */
typedef struct fg_whatif_settings {
    fg_config_t cfg;
    fg_sim_nodes_t *groups;
    size_t ngroups;
    double *weights;
    int32_t *quotas;
} fg_whatif_settings_t;

typedef struct fg_whatif_snapshot {
    fg_whatif_account_t *accounts;
    size_t naccounts;
    fg_whatif_job_t *jobs;
    size_t njobs;
    fg_whatif_settings_t live; /* the settings in force */
} fg_whatif_snapshot_t;

/* The figures of one replay for one account (or, as fg_whatif_result_t.all, for
 * every account). Waits and JCTs are of the pending jobs, from the snapshot. */
typedef struct fg_whatif_figures {
    int64_t pending_jobs; /* pending jobs replayed */
    int64_t skipped_jobs; /* jobs the nodes could never hold */
    double wait_avg_s;    /* mean wait of its pending jobs (0 when none) */
    int64_t wait_max_s;
    double jct_avg_s;   /* mean completion time of its pending jobs, from now */
    double gpu_s;       /* GPU-seconds run in the replay, every job */
    double utilization; /* gpu_s / (GPUs x makespan) */
} fg_whatif_figures_t;

typedef struct fg_whatif_result {
    fg_whatif_figures_t *accounts; /* naccounts of the snapshot */
    fg_whatif_figures_t all;
    int64_t makespan_s; /* until the last job ended */
    int64_t gpus;       /* of the replayed cluster */
    int64_t preemptions;
} fg_whatif_result_t;

/* Copies settings (deeply) into *out; free with fg_whatif_settings_free. */
void fg_whatif_settings_copy(const fg_whatif_settings_t *in, size_t naccounts,
                             fg_whatif_settings_t *out);
void fg_whatif_settings_free(fg_whatif_settings_t *s);

/* Replays the snapshot under settings `set`. Fills *res (free with
 * fg_whatif_result_free) and returns 0, or returns -1 with a message in err. */
int fg_whatif_run(const fg_whatif_snapshot_t *snap, const fg_whatif_settings_t *set,
                  fg_whatif_result_t *res, char *err, size_t errlen);
void fg_whatif_result_free(fg_whatif_result_t *res);

#endif
