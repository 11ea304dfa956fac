/*
 * fairshare.h - fair share as one set of formulas, used by the scheduler core (plan
 * order, preemption), the simulator (fair share received) and the controller (the
 * fair-share view): decayed usage, the wfq key, the share factor shown to users, and
 * the entitlements (the water fill, src/core/fairshare.c).
 *
 * Decayed usage, half-life h, τ = h / ln 2, R GPUs running over Δ seconds:
 *   U(t + Δ) = U(t)·e^(-Δ/τ) + R·τ·(1 - e^(-Δ/τ))
 * U/τ tends to R: it is the recent average GPU count. Without memory (h = 0) U = 0.
 *
 * The wfq key of an account or member: (U/τ + α·R + P) / w, with P the GPUs of its
 * jobs already walked in this pass and w its weight; the smallest key goes first.
 * Worked example, half-life 0 (α = 1): A (w = 2) runs 2 GPUs, B (w = 1) runs 1: keys
 * 2/2 = 1 and 1/1 = 1, a tie, broken by index; after A's next 1-GPU job, A's key is
 * 3/2 and B goes next.
 */
#ifndef FAIRGPU_FAIRSHARE_H
#define FAIRGPU_FAIRSHARE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* τ for a half-life of h seconds (0: no memory) */
static inline double fg_fair_tau(int64_t half_life_s)
{
    return half_life_s > 0 ? (double)half_life_s / log(2.0) : 0.0;
}

/* usage U brought forward dt > 0 seconds with `running` GPUs meanwhile (the formula
 * above); 0 without memory (tau <= 0) */
static inline double fg_fair_decayed(double usage, int64_t dt, int32_t running, double tau)
{
    if (tau <= 0.0)
        return 0.0;
    const double d = exp(-(double)dt / tau);
    return usage * d + (double)running * tau * (1.0 - d);
}

/* the wfq key: (base + picked) / weight, base = U/τ + α·R (x / 1.0 is x: the test only
 * saves a division) */
static inline double fg_fair_key(double base, int64_t picked, double weight)
{
    const double x = base + (double)picked;
    return weight == 1.0 ? x : x / weight;
}

/* The fair-share factor shown to users (Slurm's classic form): 2^(-u/s) of a usage
 * share u (its part of its siblings' usage, 0..1) and a normalized share s (its weight
 * over its siblings'): 1 unused, 0.5 exactly at its share, towards 0 far over it; 1
 * when nobody used anything or s is 0. */
static inline double fg_fair_share_factor(double usage, double siblings_usage, double share)
{
    return siblings_usage > 0 && share > 0 ? pow(2.0, -(usage / siblings_usage) / share) : 1.0;
}

/* When a fair-share factor recovers: the seconds until an entity with decayed usage U
 * (GPU-seconds) and normalized share s, whose siblings hold usage S (theirs, not its
 * own), sees its usage share fall back to s (its factor back to 0.5), if it runs
 * nothing more and its siblings' usage S stays as it is (they keep running at the rate
 * that holds it: a steady usage is one that running R GPUs keeps at R·τ). Its usage
 * decays as U·2^(-t/h), so solving U·2^(-t/h) / (U·2^(-t/h) + S) = s gives
 *   t = h·log2(U·(1 - s) / (s·S))
 * 0 when already at or below its share (or no memory, h = 0, or s >= 1); -1 (never)
 * when S = 0 < U and s < 1: with nobody else's usage its usage share stays 1. (Had the
 * siblings' usage decayed too, every usage share would stay as it is and nobody would
 * recover without the others running: holding S is the model that answers.)
 * Worked example: h = 1 day, U = 300 GPU-h, s = 0.25, S = 100 GPU-h: usage share 0.75;
 * t = 1 day·log2(300·0.75 / (0.25·100)) = log2(9) days = 3.17 days. */
static inline double fg_fair_recovers_in(double usage, double siblings_usage, double share,
                                         int64_t half_life_s)
{
    if (half_life_s <= 0 || usage <= 0.0 || share >= 1.0)
        return 0.0;
    if (siblings_usage <= 0.0 || share <= 0.0)
        return -1.0;
    const double ratio = usage * (1.0 - share) / (share * siblings_usage);
    return ratio <= 1.0 ? 0.0 : (double)half_life_s * log2(ratio);
}

/* Entitlements: the weighted max-min split (water fill) of cap GPUs among n entities
 * with demand d[i] >= 0 and weight w[i] > 0 into out[i] (0 without demand): each gets
 * min(d[i], its weight's part of what the others leave). Worked example in fairshare.c.
 * `scratch` holds n ints. */
void fg_fair_water_fill(size_t n, const double *d, const double *w, double cap, double *out,
                        int32_t *scratch);

/* The same split for entities whose demands change a few at a time (the accounts
 * between two preemption searches, the tenants of a replay): they stay sorted from one
 * fill to the next, and fg_fair_kept_fill gives fg_fair_water_fill's bits on the same
 * inputs. fg_fair_kept_init starts k (zeroed, or initialized before) over with n
 * entities without demand (weight 1), in one allocation (aborting when out of memory);
 * fg_fair_kept_free frees it and zeroes k. */
typedef struct fg_fair_kept {
    size_t n, none;       /* entities; those without demand (first in order) */
    double *key, *d, *w;  /* key[p]: order[p]'s d/w (-1 without demand); d[i], w[i] */
    int32_t *order, *pos; /* order[p]: the entity at place p; pos[i]: i's place */
    double wsum;          /* the weights of those with demand, summed by index... */
    int wsum_ok;          /* ...while this is set */
} fg_fair_kept_t;

void fg_fair_kept_init(fg_fair_kept_t *k, size_t n);
void fg_fair_kept_free(fg_fair_kept_t *k);
/* entity i's demand and weight are now d and w */
void fg_fair_kept_set(fg_fair_kept_t *k, size_t i, double d, double w);
/* the split of cap into out[0..n) */
void fg_fair_kept_fill(fg_fair_kept_t *k, double cap, double *out);

#endif
