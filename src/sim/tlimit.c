/*
 * tlimit.c - the simulated users' time limits.
 *
 * Traces give each job's run time, not the limit its user asked for. The default
 * (factor) sets limit = duration x F for every job: every job then runs exactly 1/F of
 * its limit, which makes any history of run time against limit trivially exact. The
 * rounded model is what people do instead (Slurm and Philly studies: users ask for a
 * few times what their jobs need, and type round values):
 *   - each user has a factor f_u, drawn once: lognormal with median 2.5 and sigma 0.5
 *     (two users in three between 1.5x and 4.1x), at least 1;
 *   - each job's own guess varies around it: x exp(0.3 z), z standard normal (a user
 *     does not know the next run time exactly);
 *   - the limit is that guess, at least the duration (the sim does not model jobs
 *     killed at their limit), rounded up to the first of 30m 1h 2h 4h 8h 12h 24h 48h
 *     72h 7d that holds it, or to whole weeks above 7 days.
 * So a user's jobs run a fraction of their limits that varies from job to job (the
 * noise, and rounding up by as much as 2x) around a centre of their own: a history
 * helps, but is not exact. The constants are round values from the
 * ranges that literature reports, not fitted to a trace. Draws come from splitmix64 of
 * the seed, the user and the job (Box-Muller): the same inputs give the same limits.
 *
 * Worked example: a user with f_u = 2.5 submits a 50-minute job whose draw is z = 0:
 * guess 125 min, limit 4h (ran/limit 0.21); with z = -1 the guess is 0.74 x 125 = 93
 * min: limit 2h (0.42). A 10-day job with f_u = 1.2: 12 days, limit 14 days.
 */
#include "sim/tlimit.h"

#include <math.h>
#include <string.h>

#define TL_MEDIAN     2.5
#define TL_USER_SIGMA 0.5
#define TL_JOB_SIGMA  0.3
#define TL_WEEK       (7 * 86400)

static const int64_t steps[] = {1800,  3600,  7200,   14400,  28800,
                                43200, 86400, 172800, 259200, TL_WEEK};

int fg_tlimit_parse(const char *s)
{
    if (!strcmp(s, "factor"))
        return FG_TLIMIT_FACTOR;
    if (!strcmp(s, "rounded"))
        return FG_TLIMIT_ROUNDED;
    return -1;
}

const char *fg_tlimit_name(fg_tlimit_model_t m)
{
    return m == FG_TLIMIT_ROUNDED ? "rounded" : "factor";
}

static uint64_t mix(uint64_t z) /* splitmix64's finalizer */
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A standard normal draw from key (Box-Muller on two uniforms in (0, 1)). */
static double normal(uint64_t key)
{
    const double u1 = ((double)(mix(key) >> 11) + 0.5) / 9007199254740992.0;
    const double u2 = ((double)(mix(key ^ 0x5851f42d4c957f2dull) >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

double fg_tlimit_user_factor(uint64_t seed, int32_t user)
{
    const double f = TL_MEDIAN * exp(TL_USER_SIGMA * normal(mix(seed) ^ (uint64_t)user));
    return f < 1.0 ? 1.0 : f;
}

int64_t fg_tlimit_rounded(uint64_t seed, int32_t user, uint64_t job, int64_t duration)
{
    const uint64_t key = mix(mix(seed ^ 0x243f6a8885a308d3ull) ^ job);
    double guess =
        (double)duration * fg_tlimit_user_factor(seed, user) * exp(TL_JOB_SIGMA * normal(key));
    if (guess < (double)duration)
        guess = (double)duration;
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        if (guess <= (double)steps[i])
            return steps[i];
    const double weeks = ceil(guess / TL_WEEK);
    return weeks > 1e6 ? (int64_t)1e6 * TL_WEEK : (int64_t)weeks * TL_WEEK;
}
