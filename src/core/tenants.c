/*
 * tenants.c - accounts and their members: weights, quotas, budgets, decayed usage,
 * and the name indexes that find them.
 *
 * An account (a team) has a weight, an optional GPU quota and a budget flag; a member
 * (a user in an account) has a weight within it. Both carry a usage in GPU-seconds
 * that decays with half-life h (fairgpu/fairshare.h): brought forward to `now` on each
 * start and end of one of their jobs, and when read. Names are found through one hash
 * table per kind (entries never removed; doubled when half full), so a submission
 * resolves its account and user without a scan.
 *
 * Example: h = 3600 s. Account a has usage 7200 at t=0 and runs 4 GPUs until t=3600:
 * at t=3600 its usage is 7200/2 + 4 x τ x (1 - 1/2) = 3600 + 2 x 3600/ln 2 ≈ 13988.
 * An attempt that never ran (its setup failed) gives back what its GPUs added.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ usage */

/* fg__usage_advance is in internal.h (inline: the plan order brings the usage of every
 * account and member with pending jobs forward at each new time). */

void fg__usage_touch(fg_sched_t *s, int32_t account, int32_t member, fg_time_t now)
{
    fg__account_t *a = &s->accounts[account];
    fg__member_t *m = &s->members[member];
    /* a member alone in its account has the account's inputs (both are touched together,
     * with the same running GPUs): the same inputs give the same bits, so it takes the
     * account's result instead of a second exp (the usage is compared bit for bit) */
    const bool same = m->usage_at == a->usage_at && m->running == a->running &&
                      memcmp(&m->usage, &a->usage, sizeof m->usage) == 0;
    fg__usage_advance(s, &a->usage, &a->usage_at, a->running, now);
    if (same) {
        m->usage = a->usage;
        m->usage_at = a->usage_at;
    } else {
        fg__usage_advance(s, &m->usage, &m->usage_at, m->running, now);
    }
}

/* Takes back from j's account and member the decayed usage that j's GPUs added over the
 * last `ran` seconds (an attempt that is not charged). Usage is linear in the running
 * GPUs: j's share of it now is gpus * tau * (1 - exp(-ran / tau)). Both were just
 * brought to now (job_release). */
void fg__usage_refund(fg_sched_t *s, const fg__job_t *j, fg_time_t ran)
{
    if (ran <= 0 || s->tau <= 0.0)
        return;
    const double share = (double)j->gpus * s->tau * (1.0 - exp(-(double)ran / s->tau));
    double *u[2] = {&s->accounts[j->account].usage, &s->members[j->member].usage};
    for (int i = 0; i < 2; i++)
        *u[i] = *u[i] > share ? *u[i] - share : 0.0;
}

double fg_sched_account_usage(fg_sched_t *s, int account, fg_time_t now)
{
    if (account < 0 || (size_t)account >= s->naccounts)
        return 0.0;
    fg__account_t *a = &s->accounts[account];
    fg__usage_advance(s, &a->usage, &a->usage_at, a->running, now);
    return a->usage;
}

double fg_sched_member_usage(fg_sched_t *s, int member, fg_time_t now)
{
    if (member < 0 || (size_t)member >= s->nmembers)
        return 0.0;
    fg__member_t *m = &s->members[member];
    fg__usage_advance(s, &m->usage, &m->usage_at, m->running, now);
    return m->usage;
}

int fg_sched_account_set_usage(fg_sched_t *s, int account, double gpu_s, fg_time_t now)
{
    if (account < 0 || (size_t)account >= s->naccounts || !(gpu_s >= 0.0))
        return FG_EINVAL;
    s->accounts[account].usage = s->tau > 0 ? gpu_s : 0.0;
    s->accounts[account].usage_at = now;
    return FG_OK;
}

int fg_sched_member_set_usage(fg_sched_t *s, int member, double gpu_s, fg_time_t now)
{
    if (member < 0 || (size_t)member >= s->nmembers || !(gpu_s >= 0.0))
        return FG_EINVAL;
    s->members[member].usage = s->tau > 0 ? gpu_s : 0.0;
    s->members[member].usage_at = now;
    return FG_OK;
}

/* ------------------------------------------------------------------ accounts, members */

bool fg__name_ok(const char *name)
{
    return name && name[0] && strlen(name) < FG_NAME_MAX;
}

/* Name lookups (every submission resolves its account and user) go through a hash table
 * per kind instead of a scan with a string comparison per entry. An entry found is
 * checked with strcmp, and names are unique (an account per name, a member per user in
 * an account), so a lookup returns what the scan in index order returned. Entries are
 * never removed; a table is made again, twice as large, when it is half full. */
uint64_t fg__name_hash(const char *p)
{
    /* the length and the first and last eight bytes (names mostly differ at one end):
     * a few instructions where a byte-by-byte hash took as long as the scan it saves */
    const size_t n = strlen(p);
    uint64_t a = 0, b = 0;
    if (n >= 8) {
        memcpy(&a, p, 8);
        memcpy(&b, p + n - 8, 8);
    } else {
        memcpy(&a, p, n);
    }
    uint64_t h = (a ^ (uint64_t)n) * 0x9E3779B97F4A7C15ull ^ b * 0xC2B2AE3D27D4EB4Full;
    return h ^ (h >> 29);
}

/* The hash of member `user` of account a, from hu, the name hash of `user`. */
static uint64_t member_hash_h(int a, uint64_t hu)
{
    return hu ^ ((uint64_t)(uint32_t)a * 0x9E3779B97F4A7C15ull);
}

static uint64_t member_hash(int a, const char *user)
{
    return member_hash_h(a, fg__name_hash(user));
}

/* Puts index i at hash h in a table of cap entries (a power of two, with room). */
static void ix_put(int32_t *tab, size_t cap, uint64_t h, int32_t i)
{
    size_t k = (size_t)h & (cap - 1);
    while (tab[k] >= 0)
        k = (k + 1) & (cap - 1);
    tab[k] = i;
}

/* Makes a table of cap entries for the n entries hashed by hash_of. */
static int32_t *ix_make(const fg_sched_t *s, size_t cap, size_t n,
                        uint64_t (*hash_of)(const fg_sched_t *, size_t))
{
    int32_t *tab = fg__alloc(cap * sizeof *tab);
    for (size_t k = 0; k < cap; k++)
        tab[k] = -1;
    for (size_t i = 0; i < n; i++)
        ix_put(tab, cap, hash_of(s, i), (int32_t)i);
    return tab;
}

static uint64_t account_hash_of(const fg_sched_t *s, size_t i)
{
    return fg__name_hash(s->accounts[i].name);
}

static uint64_t member_hash_of(const fg_sched_t *s, size_t i)
{
    return member_hash(s->members[i].account, s->members[i].user);
}

/* After entity n - 1 (an account or a member) was added to the index *tab of *cap slots:
 * made again twice as large when it would be more than half full, else the entity put. */
static void ix_added(fg_sched_t *s, int32_t **tab, size_t *cap, size_t n,
                     uint64_t (*hash_of)(const fg_sched_t *, size_t))
{
    if (2 * n > *cap) {
        free(*tab);
        *cap = *cap ? 2 * *cap : 64;
        *tab = ix_make(s, *cap, n, hash_of);
    } else {
        ix_put(*tab, *cap, hash_of(s, n - 1), (int32_t)n - 1);
    }
}

static void account_indexed(fg_sched_t *s)
{
    ix_added(s, &s->acct_ix, &s->acct_ix_cap, s->naccounts, account_hash_of);
}

static void member_indexed(fg_sched_t *s)
{
    ix_added(s, &s->mem_ix, &s->mem_ix_cap, s->nmembers, member_hash_of);
}

/* The account `name` (not NULL) of name hash h, or FG_ENOENT. */
int fg__account_of(const fg_sched_t *s, const char *name, uint64_t h)
{
    if (!s->acct_ix_cap)
        return FG_ENOENT;
    const size_t mask = s->acct_ix_cap - 1;
    for (size_t k = (size_t)h & mask; s->acct_ix[k] >= 0; k = (k + 1) & mask)
        if (!strcmp(s->accounts[s->acct_ix[k]].name, name))
            return s->acct_ix[k];
    return FG_ENOENT;
}

int fg_sched_account_find(const fg_sched_t *s, const char *name)
{
    return name ? fg__account_of(s, name, fg__name_hash(name)) : FG_ENOENT;
}

int fg_sched_account_set(fg_sched_t *s, const char *name, double weight, int32_t gpu_quota)
{
    if (!fg__name_ok(name) || !(weight > 0.0) || !isfinite(weight))
        return FG_EINVAL;
    fg__plan_finish_walk(s); /* (what a walk left to be walked, on the old quota) */
    int i = fg_sched_account_find(s, name);
    if (i < 0) {
        s->accounts =
            fg__grow(s->accounts, &s->accounts_cap, s->naccounts + 1, sizeof *s->accounts);
        i = (int)s->naccounts++;
        fg__account_t *a = &s->accounts[i];
        memset(a, 0, sizeof *a);
        snprintf(a->name, sizeof a->name, "%s", name);
        a->usage_at = INT64_MIN;
        a->last_start = INT64_MIN;
        a->budget_left = -1;
        for (int c = 0; c <= FG_PRIO_HIGH; c++)
            a->run_head[c] = -1;
        account_indexed(s);
    }
    s->accounts[i].weight = weight;
    s->accounts[i].quota = gpu_quota < 0 ? -1 : gpu_quota;
    return i;
}

int fg_sched_account_set_budget_exhausted(fg_sched_t *s, int account, bool exhausted)
{
    if (account < 0 || (size_t)account >= s->naccounts)
        return FG_ENOENT;
    if (s->accounts[account].budget_exhausted == exhausted)
        return FG_OK; /* (the caller says it every iteration: keep the plan) */
    fg__plan_finish_walk(s);
    s->accounts[account].budget_exhausted = exhausted;
    return FG_OK;
}

int fg_sched_account_set_budget_left(fg_sched_t *s, int account, int64_t micros)
{
    if (account < 0 || (size_t)account >= s->naccounts)
        return FG_ENOENT;
    if (micros < -1)
        return FG_EINVAL;
    if (s->accounts[account].budget_left == micros)
        return FG_OK;
    fg__plan_finish_walk(s);
    s->accounts[account].budget_left = micros;
    return FG_OK;
}

/* The member `user` (not NULL, of name hash hu) of account index a >= 0, or FG_ENOENT. */
int fg__member_of_h(const fg_sched_t *s, int a, const char *user, uint64_t hu)
{
    if (!s->mem_ix_cap)
        return FG_ENOENT;
    const size_t mask = s->mem_ix_cap - 1;
    for (size_t k = (size_t)member_hash_h(a, hu) & mask; s->mem_ix[k] >= 0; k = (k + 1) & mask) {
        const fg__member_t *m = &s->members[s->mem_ix[k]];
        if (m->account == a && !strcmp(m->user, user))
            return s->mem_ix[k];
    }
    return FG_ENOENT;
}

/* The member `user` of account index a, or FG_ENOENT. */
static int member_of(const fg_sched_t *s, int a, const char *user)
{
    if (a < 0 || !user)
        return FG_ENOENT;
    return fg__member_of_h(s, a, user, fg__name_hash(user));
}

int fg_sched_member_find(const fg_sched_t *s, const char *account, const char *user)
{
    return member_of(s, fg_sched_account_find(s, account), user);
}

int fg_sched_member_set(fg_sched_t *s, const char *account, const char *user, double weight)
{
    if (!fg__name_ok(user) || !(weight > 0.0) || !isfinite(weight))
        return FG_EINVAL;
    int a = fg_sched_account_find(s, account);
    if (a < 0)
        return FG_ENOENT;
    fg__plan_finish_walk(s); /* (its order is sized for the members it began with) */
    int i = fg_sched_member_find(s, account, user);
    if (i < 0) {
        s->members = fg__grow(s->members, &s->members_cap, s->nmembers + 1, sizeof *s->members);
        i = (int)s->nmembers++;
        fg__member_t *m = &s->members[i];
        memset(m, 0, sizeof *m);
        snprintf(m->user, sizeof m->user, "%s", user);
        m->account = a;
        m->usage_at = INT64_MIN;
        member_indexed(s);
    }
    s->members[i].weight = weight;
    return i;
}
