/*
 * clock.h - the clock reads of the controller and the agent, in one place.
 *
 * Two clocks, two uses:
 *   - fg_clock_real_ms(): wall-clock time (CLOCK_REALTIME) in milliseconds since the
 *     epoch; what is stored, shown and sent (heartbeats, attempt start and end times).
 *   - fg_clock_mono_ms() / fg_clock_mono_us(): CLOCK_MONOTONIC, for intervals and
 *     deadlines that must not jump when the wall clock is set (rate limits, timeouts,
 *     how long a pass took).
 * Example: `int64_t t0 = fg_clock_mono_us(); work(); long us = fg_clock_mono_us() - t0;`
 *
 * Header-only and libc-only: clock_gettime is async-signal-safe, so the agent's job
 * monitor (which runs after fork and builds as a static helper) uses these too. The
 * HTTP engine keeps its own *_COARSE reads (src/server/httpd.c): it reads the clock per
 * event and needs only a tick's precision.
 */
#ifndef FG_CLOCK_H
#define FG_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Milliseconds of clock `id`. */
static inline int64_t fg_clock_ms_of(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wall-clock milliseconds since the epoch. */
static inline int64_t fg_clock_real_ms(void)
{
    return fg_clock_ms_of(CLOCK_REALTIME);
}

/* Monotonic milliseconds (from an arbitrary origin). */
static inline int64_t fg_clock_mono_ms(void)
{
    return fg_clock_ms_of(CLOCK_MONOTONIC);
}

/* Monotonic microseconds (from an arbitrary origin). */
static inline int64_t fg_clock_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

#endif
