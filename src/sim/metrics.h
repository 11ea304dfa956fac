/*
 * metrics.h - the figures of a replay, computed exactly as ../shared/spec/METRICS.md
 * defines them, from per-job records and the fair-share integrals; and their output
 * (one JSON object per line, a plain table, or a Markdown table).
 */
#ifndef FG_SIM_METRICS_H
#define FG_SIM_METRICS_H

#include "fairgpu/core.h"
#include "sim/estacc.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define FG_SIZE_CLASSES 4 /* "1", "2-4", "8", ">8" */

/* What the replay records for each job. */
typedef struct fg_jobrec {
    int64_t submit;      /* s_j */
    int64_t start;       /* a_j, first start; -1 if it never started */
    int64_t end;         /* e_j; -1 if it never ended */
    int64_t duration;    /* d_j from the trace */
    int32_t gpus;        /* g_j (after rounding) */
    int32_t tenant;      /* u(j) */
    int64_t gpu_seconds; /* GPU-seconds run, every attempt included */
    double n_avg;        /* N_j: time-average tenants with demand over [s_j, e_j] */
    int64_t estimate;    /* start estimated by the core at submission; -1 if none */
    int32_t attempts;    /* starts */
    int32_t ends;        /* completions reported (1 for every replayed job) */
} fg_jobrec_t;

typedef struct fg_sim_result {
    char policy[32];
    const char *trace; /* not owned */
    int64_t nodes;
    int32_t gpus_per_node; /* 0 when the nodes differ (--cluster) */
    int64_t gpus;          /* C */
    int64_t jobs;
    int64_t rounded_up;
    int64_t skipped_bad;
    int64_t skipped_too_big;
    int64_t makespan_s;
    double utilization;
    double jct_avg_s;
    int64_t jct_p50_s, jct_p95_s, jct_p99_s;
    double wait_avg_s;
    int64_t wait_p50_s;
    bool has_size[FG_SIZE_CLASSES];
    int64_t wait_p50_by_size[FG_SIZE_CLASSES];
    int64_t wait_max_s;
    int64_t preemptions;
    int64_t lost_gpu_seconds;    /* work since the last checkpoint, at preemptions */
    int64_t restart_gpu_seconds; /* GPU-seconds of restart overheads (sim.c) */
    int64_t gpu_seconds;         /* total run, lost work and overheads included */
    double preempt_cost_frac;    /* (lost + restart) / gpu_seconds; 0 when nothing ran */
    double jain;
    double ftf_rho_avg, ftf_rho_max;
    int64_t waits_over_24h;
    /* estimated start accuracy: |a_j - E| of the estimate made at submission */
    int64_t estimate_jobs; /* jobs that had one */
    bool has_est[FG_SIZE_CLASSES];
    int64_t est_err_p50_by_size[FG_SIZE_CLASSES], est_err_p90_by_size[FG_SIZE_CLASSES];
    int64_t est_err_p50_s, est_err_p90_s; /* all sizes (0 without estimates) */
    double replay_seconds;
    int64_t half_life_s; /* configuration echoed in the output */
    bool backfill, preemption;
    int32_t backfill_depth, reserve_depth;
    int64_t quantum_s, checkpoint_interval_s, restart_overhead_s;
    int64_t preempt_wait_s, min_run_s;
    int32_t las_levels;
    int64_t las_thresholds_gpu_s[FG_LAS_MAX_LEVELS - 1];
    double time_limit_factor;
    int64_t passes;       /* scheduling passes run */
    int time_limit_model; /* fg_tlimit_model_t; echoed when not the default */
    bool has_estacc;      /* --estimates history: the figures below */
    fg_estacc_t estacc;
} fg_sim_result_t;

/* Size class of a job of g GPUs: 0 "1", 1 "2-4", 2 "8" (5..8), 3 ">8". */
int fg_size_class(int32_t g);
extern const char *const fg_size_class_names[FG_SIZE_CLASSES];

/* Nearest-rank percentile p (1..100) of v[0..n), which must be sorted ascending. */
int64_t fg_percentile(const int64_t *v, size_t n, int p);

/* Fills the job-level figures of *r (jobs, makespan, utilization, JCT, wait, size classes,
 * rho, waits over 24 h, gpu_seconds, estimate accuracy) from the records in recs[0..n) of
 * jobs that ended (ends > 0: the others are left out), on a cluster of `gpus` GPUs; and jain
 * from the fair-share integrals of ntenants tenants. Leaves the other fields as they are. */
void fg_metrics_compute(const fg_jobrec_t *recs, size_t n, int64_t gpus, int32_t ntenants,
                        const double *entitled, const double *received, fg_sim_result_t *r);

/* The share of the GPU-time run that preemption cost: (lost + restart) / total
 * GPU-seconds run; 0 when nothing ran. */
double fg_preempt_cost_frac(int64_t lost_gpu_seconds, int64_t restart_gpu_seconds,
                            int64_t gpu_seconds);

/* One JSON object (no newline), caller frees. */
char *fg_sim_result_json(const fg_sim_result_t *r);

/* Prints results[0..n) as a table, one column per run: plain text, or Markdown. */
void fg_sim_print_table(FILE *out, const fg_sim_result_t *results, size_t n, bool markdown);

#endif
