/* splitmix.h - the small deterministic PRNG (splitmix64) of the randomized core tests,
 * so that every sequence replays from its seed. */
#ifndef FG_TEST_SPLITMIX_H
#define FG_TEST_SPLITMIX_H

#include <stdint.h>

static inline uint64_t rng_next(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static inline int64_t rnd(uint64_t *x, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rng_next(x) % (uint64_t)(hi - lo + 1));
}

#endif
