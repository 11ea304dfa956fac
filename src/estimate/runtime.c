/*
 * runtime.c - the run-time model: how long a job will still run, from the history of
 * how long jobs ran against their time limits (fairgpu/estimate.h; pure C, no I/O).
 *
 * The model keeps, for each user, each account and for everyone, the ratios ran/limit
 * of the last jobs that ended (a ring of RT_WIN_USER, RT_WIN_ACCOUNT and RT_WIN_ALL
 * entries), each ring with a sorted copy of itself. A prediction for a job of limit L
 * that has run a seconds looks at the user's entries x with x * L > a (only jobs that
 * ran longer than this one has so far say anything about it): with at least
 * RT_MIN_SAMPLES of them, the remaining run time at quantile q is x_q * L - a, with x_q
 * the nearest-rank quantile (the ceil(q * m)-th of those m entries, ascending). With
 * fewer it asks the account's history, then everyone's, and without enough anywhere it
 * answers the rest of the limit (source "limit"). Every answer lies in 1 .. L - a.
 *
 * Worked example: alice's last six jobs ran 0.4, 0.4, 0.5, 0.5, 0.6 and 0.6 of their
 * limits. Her job with a 2 h limit that has run 10 min: every entry has x * 7200 > 600,
 * so m = 6; p10 is the 1st (0.4: 2880 - 600 = 2280 s, 38 min), p50 the 3rd (0.5: 50
 * min), p90 the 6th (0.6: 62 min); source user, 6 samples. Once it has run 50 min
 * (3000 s), only the entries 0.5 and 0.6 (x * 7200 > 3000) remain: 4 < 5 samples, so
 * the answer comes from her account's history, or if that is short too, from
 * everyone's, or it is the 70 min left of the limit.
 *
 * Why these sizes: 50 jobs per user is a few weeks of an active user's work (habits and
 * projects change; older jobs say less), yet enough for a p10 and a p90 that are not
 * the extremes; accounts and everyone are fallbacks for users new or rare, so they
 * keep more (200, 1000) to be stable. Five samples is the fewest for which p10 < p50 <
 * p90 can be three different entries. None of them was fitted to a trace.
 *
 * Cost: a record is O(window) (one insertion into, one removal from a sorted array of
 * doubles); a prediction is O(log window) per level (a binary search for the first
 * entry above a/L, then three indexed reads), plus one hash lookup per level.
 */
#include "fairgpu/estimate.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

#define RT_WIN_USER    50
#define RT_WIN_ACCOUNT 200
#define RT_WIN_ALL     1000
#define RT_MIN_SAMPLES 5

/* ------------------------------------------------------------------ one history */

/* The last `cap` ratios: ring[] in arrival order (the oldest at head once full), and
 * the same values ascending in sorted[]. */
typedef struct hist {
    int32_t cap, n, head;
    double *ring;
    double *sorted;
} hist_t;

static void hist_init(hist_t *h, int32_t cap)
{
    assert(cap > 0);
    h->cap = cap;
    h->n = h->head = 0;
    h->ring = fg_xmalloc((size_t)cap * sizeof *h->ring);
    h->sorted = fg_xmalloc((size_t)cap * sizeof *h->sorted);
}

static void hist_free(hist_t *h)
{
    free(h->ring);
    free(h->sorted);
}

/* The index of the first sorted entry > x (n if none). */
static int32_t hist_upper(const hist_t *h, double x)
{
    int32_t lo = 0, hi = h->n;
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo) / 2;
        if (h->sorted[mid] > x)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static void sorted_remove(hist_t *h, double x)
{
    int32_t i = hist_upper(h, x) - 1; /* the last entry <= x: an equal one */
    assert(i >= 0 && h->sorted[i] == x);
    memmove(&h->sorted[i], &h->sorted[i + 1], (size_t)(h->n - 1 - i) * sizeof *h->sorted);
    h->n--;
}

static void sorted_insert(hist_t *h, double x)
{
    const int32_t i = hist_upper(h, x);
    memmove(&h->sorted[i + 1], &h->sorted[i], (size_t)(h->n - i) * sizeof *h->sorted);
    h->sorted[i] = x;
    h->n++;
}

/* Adds x, dropping the oldest entry when the ring is full. */
static void hist_add(hist_t *h, double x)
{
    if (h->n == h->cap) {
        sorted_remove(h, h->ring[h->head]);
        h->ring[h->head] = x;
        h->head = (h->head + 1) % h->cap;
    } else {
        h->ring[(h->head + h->n) % h->cap] = x;
    }
    sorted_insert(h, x);
    assert(h->n <= h->cap);
}

/* ------------------------------------------------------------------ histories by name */

typedef struct entry {
    char *key; /* NULL: empty slot */
    hist_t h;
} entry_t;

/* Open addressing with linear probing; never more than 1/2 full. */
typedef struct table {
    entry_t *slots;
    size_t cap, n;
    int32_t win;
} table_t;

static uint64_t hash_str(const char *s) /* FNV-1a */
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static entry_t *table_find(const table_t *t, const char *key)
{
    if (!t->cap)
        return NULL;
    for (size_t i = hash_str(key) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        entry_t *e = &t->slots[i];
        if (!e->key)
            return NULL;
        if (!strcmp(e->key, key))
            return e;
    }
}

static void table_grow(table_t *t)
{
    const size_t oldcap = t->cap;
    entry_t *old = t->slots;
    t->cap = oldcap ? oldcap * 2 : 16;
    t->slots = fg_xcalloc(t->cap, sizeof *t->slots);
    for (size_t i = 0; i < oldcap; i++) {
        if (!old[i].key)
            continue;
        size_t j = hash_str(old[i].key) & (t->cap - 1);
        while (t->slots[j].key)
            j = (j + 1) & (t->cap - 1);
        t->slots[j] = old[i];
    }
    free(old);
}

/* The history of `key`, created empty if new. */
static hist_t *table_get(table_t *t, const char *key)
{
    entry_t *e = table_find(t, key);
    if (e)
        return &e->h;
    if (2 * (t->n + 1) > t->cap)
        table_grow(t);
    size_t i = hash_str(key) & (t->cap - 1);
    while (t->slots[i].key)
        i = (i + 1) & (t->cap - 1);
    e = &t->slots[i];
    e->key = fg_xstrdup(key);
    hist_init(&e->h, t->win);
    t->n++;
    return &e->h;
}

static void table_free(table_t *t)
{
    for (size_t i = 0; i < t->cap; i++) {
        if (t->slots[i].key) {
            free(t->slots[i].key);
            hist_free(&t->slots[i].h);
        }
    }
    free(t->slots);
}

/* ------------------------------------------------------------------ the model */

struct fg_rt_model {
    table_t users, accounts;
    hist_t all;
};

fg_rt_model_t *fg_rt_new(void)
{
    fg_rt_model_t *m = fg_xcalloc(1, sizeof *m);
    m->users.win = RT_WIN_USER;
    m->accounts.win = RT_WIN_ACCOUNT;
    hist_init(&m->all, RT_WIN_ALL);
    return m;
}

void fg_rt_free(fg_rt_model_t *m)
{
    if (!m)
        return;
    table_free(&m->users);
    table_free(&m->accounts);
    hist_free(&m->all);
    free(m);
}

void fg_rt_record(fg_rt_model_t *m, const char *account, const char *user, fg_time_t limit_s,
                  fg_time_t ran_s)
{
    if (limit_s <= 0) /* no ratio: changes nothing */
        return;
    double x = ran_s <= 0 ? 0.0 : (double)ran_s / (double)limit_s;
    if (x > 1.0) /* a job stopped a little past its limit */
        x = 1.0;
    if (user)
        hist_add(table_get(&m->users, user), x);
    if (account)
        hist_add(table_get(&m->accounts, account), x);
    hist_add(&m->all, x);
}

const char *fg_rt_source_name(fg_rt_source_t s)
{
    switch (s) {
    case FG_RT_USER:
        return "user";
    case FG_RT_ACCOUNT:
        return "account";
    case FG_RT_ALL:
        return "all";
    case FG_RT_LIMIT:
        return "limit";
    }
    return "?";
}

/* The remaining run time of ratio x for a job of limit L that ran a, within 1..left. */
static fg_time_t remaining(double x, fg_time_t limit_s, fg_time_t ran_s, fg_time_t left)
{
    const fg_time_t r = llround(x * (double)limit_s) - ran_s;
    return r < 1 ? 1 : r > left ? left : r;
}

/* The nearest-rank quantile q (percent) of the m entries sorted[j .. j + m). */
static double quantile(const hist_t *h, int32_t j, int32_t m, int32_t q)
{
    assert(m > 0 && q > 0 && q <= 100);
    const int32_t k = (int32_t)(((int64_t)q * m + 99) / 100); /* ceil(q * m / 100) */
    return h->sorted[j + k - 1];
}

/* Fills *out from h if at least RT_MIN_SAMPLES of its entries ran longer than ran_s;
 * returns whether it did. */
static bool predict_from(const hist_t *h, fg_rt_source_t src, fg_time_t limit_s, fg_time_t ran_s,
                         fg_time_t left, fg_rt_pred_t *out)
{
    if (!h || h->n < RT_MIN_SAMPLES)
        return false;
    /* x * L > a  <=>  x > a / L (doubles; a/L < 1 exactly when a < L) */
    const int32_t j = hist_upper(h, (double)ran_s / (double)limit_s);
    const int32_t m = h->n - j;
    if (m < RT_MIN_SAMPLES)
        return false;
    out->p10 = remaining(quantile(h, j, m, 10), limit_s, ran_s, left);
    out->p50 = remaining(quantile(h, j, m, 50), limit_s, ran_s, left);
    out->p90 = remaining(quantile(h, j, m, 90), limit_s, ran_s, left);
    out->source = src;
    out->samples = m;
    assert(out->p10 <= out->p50 && out->p50 <= out->p90);
    return true;
}

void fg_rt_predict(const fg_rt_model_t *m, const char *account, const char *user, fg_time_t limit_s,
                   fg_time_t ran_s, fg_rt_pred_t *out)
{
    if (ran_s < 0)
        ran_s = 0;
    const fg_time_t left = limit_s - ran_s < 1 ? 1 : limit_s - ran_s;
    if (limit_s > 0) {
        const entry_t *u = user ? table_find(&m->users, user) : NULL;
        const entry_t *a = account ? table_find(&m->accounts, account) : NULL;
        if (predict_from(u ? &u->h : NULL, FG_RT_USER, limit_s, ran_s, left, out) ||
            predict_from(a ? &a->h : NULL, FG_RT_ACCOUNT, limit_s, ran_s, left, out) ||
            predict_from(&m->all, FG_RT_ALL, limit_s, ran_s, left, out))
            return;
    }
    out->p10 = out->p50 = out->p90 = left;
    out->source = FG_RT_LIMIT;
    out->samples = 0;
}
