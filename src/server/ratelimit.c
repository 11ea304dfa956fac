/*
 * ratelimit.c - token buckets keyed by a string: a client address, a username.
 *
 * A bucket holds up to `burst` tokens and gains `rate` tokens a second; a request
 * takes one. The buckets live in a table of fixed size (memory does not grow with
 * the number of keys an attacker invents): a key's bucket is one of PROBE slots after
 * its hash; a key not present takes an empty slot or the least recently used one of
 * them, starting full. Example (rate 5/s, burst 30): a client sends 40 logins at once;
 * 30 pass, 10 are refused with Retry-After: 1; a second later 5 more pass.
 *
 * One mutex per table; only the login and registration routes use these tables, never
 * the submission path.
 */
#include "server/server.h"

#include "common/clock.h"
#include "common/xalloc.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define PROBE 8

typedef struct slot {
    uint64_t key; /* 0: empty */
    double tokens;
    int64_t last_ms;
    uint64_t used; /* the table's use counter at its last use: least recently used */
} slot_t;

struct srv_limiter {
    pthread_mutex_t mu;
    double rate, burst;
    size_t n; /* a power of two */
    slot_t *slots;
    uint64_t uses;
};

srv_limiter_t *srv_limiter_new(double rate, double burst, size_t slots)
{
    assert(rate > 0 && burst >= 1);
    srv_limiter_t *l = fg_xcalloc(1, sizeof *l);
    pthread_mutex_init(&l->mu, NULL);
    l->rate = rate;
    l->burst = burst;
    l->n = 64;
    while (l->n < slots)
        l->n *= 2;
    l->slots = fg_xcalloc(l->n, sizeof *l->slots);
    return l;
}

void srv_limiter_free(srv_limiter_t *l)
{
    if (!l)
        return;
    pthread_mutex_destroy(&l->mu);
    free(l->slots);
    free(l);
}

/* key's bucket, refilled to now (l->mu held). */
static slot_t *bucket(srv_limiter_t *l, const char *key, int64_t now)
{
    uint64_t k = srv_hash_bytes(key, strlen(key));
    if (k == 0)
        k = 1;
    slot_t *victim = NULL;
    for (size_t i = 0; i < PROBE; i++) {
        slot_t *e = &l->slots[(k + i) & (l->n - 1)];
        if (e->key == k) {
            e->tokens += (double)(now - e->last_ms) / 1000.0 * l->rate;
            if (e->tokens > l->burst)
                e->tokens = l->burst;
            e->last_ms = now;
            e->used = ++l->uses;
            return e;
        }
        if (e->key == 0) { /* an empty slot is taken first */
            if (!victim || victim->key != 0)
                victim = e;
        } else if (!victim || (victim->key != 0 && e->used < victim->used)) {
            victim = e;
        }
    }
    victim->key = k;
    victim->tokens = l->burst;
    victim->last_ms = now;
    victim->used = ++l->uses;
    return victim;
}

static double wait_s(const srv_limiter_t *l, const slot_t *e)
{
    return (1.0 - e->tokens) / l->rate;
}

bool srv_limiter_take(srv_limiter_t *l, const char *key, double *retry_s)
{
    pthread_mutex_lock(&l->mu);
    slot_t *e = bucket(l, key, fg_clock_mono_ms());
    bool ok = e->tokens >= 1.0;
    if (ok)
        e->tokens -= 1.0;
    else
        *retry_s = wait_s(l, e);
    pthread_mutex_unlock(&l->mu);
    return ok;
}

bool srv_limiter_peek(srv_limiter_t *l, const char *key, double *retry_s)
{
    pthread_mutex_lock(&l->mu);
    slot_t *e = bucket(l, key, fg_clock_mono_ms());
    bool ok = e->tokens >= 1.0;
    if (!ok)
        *retry_s = wait_s(l, e);
    pthread_mutex_unlock(&l->mu);
    return ok;
}

void srv_limiter_charge(srv_limiter_t *l, const char *key)
{
    pthread_mutex_lock(&l->mu);
    slot_t *e = bucket(l, key, fg_clock_mono_ms());
    e->tokens = e->tokens >= 1.0 ? e->tokens - 1.0 : 0.0;
    pthread_mutex_unlock(&l->mu);
}
