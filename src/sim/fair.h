/*
 * fair.h - the fair-share bookkeeping of a replay (METRICS.md, "Fair share received" and
 * "Finish-time fairness").
 *
 * The replay tells the tracker, at each event time, how each tenant's demand (GPUs of its
 * pending or running jobs) and running GPUs change. Between events everything is
 * constant, so the tracker integrates piecewise: received_u += R_u*dt,
 * entitled_u += E_u*dt, and the number of tenants with demand, for Themis' N_j. The
 * entitlement E (the water fill of include/fairgpu/fairshare.h) is recomputed only when
 * a demand changed since the last interval, in O(n) for n tenants: the tenants stay
 * sorted between intervals and only those whose demand changed move. Each interval
 * adds E_u*dt for the tenants with demand; received_u is brought up to date when R_u
 * changes (fg_fair_flush at the end), with the same bits while the sums stay below 2^53
 * (integers, exact).
 *
 * Order of calls at time t: fg_fair_advance(t) first (closes [last, t) with the old
 * state), then the changes at t.
 */
#ifndef FG_SIM_FAIR_H
#define FG_SIM_FAIR_H

#include "fairgpu/fairshare.h"

#include <stddef.h>
#include <stdint.h>

typedef struct fg_fair {
    int32_t n;            /* tenants */
    double capacity;      /* C, GPUs */
    double *weight;       /* per tenant, > 0 */
    int64_t *demand;      /* GPUs pending or running */
    int64_t *running;     /* GPUs running */
    double *ent;          /* current entitlement E_u */
    double *entitled;     /* integral of E_u */
    double *received;     /* integral of R_u (GPU-seconds); see fg_fair_flush */
    int64_t *since;       /* received_u holds the integral up to since_u (while exact) */
    int64_t max_running;  /* the largest |R_u| so far */
    int exact;            /* R_u x dt sums are exact integers: received is caught up lazily */
    int64_t t0;           /* the start */
    fg_fair_kept_t split; /* the water fill of the demands, kept sorted between changes */
    int32_t *act;         /* the tenants with demand (any order) */
    int32_t *act_pos;     /* index of each tenant in act, -1 without demand */
    int32_t with_demand;
    int64_t n_integral; /* integral of the number of tenants with demand */
    int64_t t_last;
    int dirty;
    /* Optional share series: every `interval` s from `t0`, each tenant's R_u / C. */
    int64_t interval, next_sample;
    float *samples; /* nsamples rows of n */
    size_t nsamples, samples_cap, max_samples;
} fg_fair_t;

/* Sets up a tracker for n tenants with the given weights (copied) on capacity GPUs,
 * starting at time t0. */
void fg_fair_init(fg_fair_t *f, int32_t n, const double *weights, double capacity, int64_t t0);
void fg_fair_free(fg_fair_t *f);

/* Asks for the share series: one sample every `interval` seconds (> 0), at most
 * max_samples of them (later samples are dropped). */
void fg_fair_sample(fg_fair_t *f, int64_t interval, size_t max_samples);

/* Integrates the current state over [t_last, t) and moves to t (t >= t_last). */
void fg_fair_advance(fg_fair_t *f, int64_t t);

/* Brings received up to date (it is caught up for a tenant when its running GPUs change,
 * so a tenant with none running is always up to date): call before reading it. */
void fg_fair_flush(fg_fair_t *f);

/* Changes at the current time: demand (submit +g, end -g) and running (start +g,
 * end or preemption -g) of tenant u. */
void fg_fair_demand(fg_fair_t *f, int32_t u, int64_t dg);
void fg_fair_running(fg_fair_t *f, int32_t u, int64_t dg);

/* Jain's index over tenants with entitled > 0 of x_u = received_u / entitled_u;
 * 1.0 when there is no such tenant. */
double fg_fair_jain(int32_t n, const double *entitled, const double *received);

#endif
