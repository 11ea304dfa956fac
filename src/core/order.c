/*
 * order.c - the plan order: which pending job the pass looks at next.
 *
 * The order depends on the policy and on the state at the start of the pass only,
 * never on what fits, so "behind N jobs" means the same thing in every pass and in
 * fg_sched_explain.
 *
 * Jobs sit in bands (wfq, priority, round-robin: the class, high first; las: the LAS
 * queue; fifo: one band). Bands are walked in order. Inside a band:
 *   fifo, priority, las  the oldest head job over all members (submit time, then id);
 *   round-robin          members take turns, one job each, in index order, starting
 *                        after the member whose job started last (kept across passes);
 *   wfq                  the account with the smallest key, then inside it the member
 *                        with the smallest key, then that member's oldest job.
 * A key is (U/τ + αR + P) / w: decayed usage over τ (the recent average GPU count),
 * α times the GPUs running at the start of the pass, and the GPUs of jobs already
 * walked in this pass, over the weight. With memory (half-life > 0) α = 1/4: running
 * GPUs count at once, so a burst of starts moves the key, but the memory term carries
 * the long-run error, so GPU-time converges to the weights even when the GPU count
 * does not divide by them (8 GPUs at 2:1 alternate 6:2 and 5:3 instead of locking at
 * 5:3, which α = 1 would do since U/τ tends to R; the residual error on 8 GPUs is
 * (16 - α)/(8 + α) vs 2, under 5% for α = 1/4). Without memory α = 1: the key is
 * the instantaneous weighted max-min share.
 *
 * Worked example (wfq, half-life 0): accounts A (w=2) and B (w=1), nothing running,
 * each with many 1-GPU jobs. Keys start 0/2 = 0 and 0/1 = 0: A first (lower index),
 * then A's key is 1/2, B's 0: B; then A 1/2 vs B 1: A; A 2/2=1 vs B 1: A (tie, lower
 * index); then B ... The walk gives A, B, A, A, B, A, A, B: two of A's for each of B's.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

void fg__order_free(fg__order_t *o)
{
    free(o->cursor);
    free(o->qv);
    free(o->m_picked);
    free(o->a_picked);
    free(o->m_left);
    free(o->a_left);
    free(o->m_base);
    free(o->a_base);
    free(o->m_w);
    free(o->a_w);
    free(o->ah ? o->ah - 1 : NULL); /* (its sentinel) */
    free(o->mh);
    free(o->mhk);
    free(o->mh_off);
    free(o->mh_n);
    free(o->mh_cnt);
    free(o->members_by_acct);
    free(o->a_memo);
    free(o->m_memo);
    free(o->m_head);
    free(o->act_a);
    free(o->act_m);
    memset(o, 0, sizeof *o);
}

/* Usage over tau as of `now` without changing the stored value (so that looking never
 * changes what a later pass computes); memoized on its inputs, so the same inputs give
 * the same bits. A member's memo may also take its account's (`alt`, or NULL) when the
 * inputs are the same: a member alone in its account has the account's usage, usage
 * time and running GPUs. */
static double base_at(const fg_sched_t *s, fg__base_memo_t *m, const fg__base_memo_t *alt, double u,
                      fg_time_t at, int32_t running, fg_time_t now)
{
    if (s->tau <= 0)
        return 0.0;
    if (m->now == now && m->at == at && m->running == running && m->usage == u)
        return m->base;
    if (alt && alt->now == now && alt->at == at && alt->running == running && alt->usage == u) {
        *m = *alt;
        return m->base;
    }
    m->now = now;
    m->at = at;
    m->running = running;
    m->usage = u;
    fg__usage_advance(s, &u, &at, running, now);
    m->base = u / s->tau;
    return m->base;
}

static void *re(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        abort();
    return q;
}

/* Grows o's arrays to nm members and na accounts (contents are set by the callers). */
static void order_grow(fg__order_t *o, size_t nm, size_t na)
{
    if (nm > o->cap_m) {
        o->cursor = re(o->cursor, nm * sizeof *o->cursor);
        o->qv = re(o->qv, nm * sizeof *o->qv);
        o->m_picked = re(o->m_picked, nm * sizeof *o->m_picked);
        o->m_left = re(o->m_left, nm * sizeof *o->m_left);
        o->m_base = re(o->m_base, nm * sizeof *o->m_base);
        o->m_w = re(o->m_w, nm * sizeof *o->m_w);
        o->mh = re(o->mh, nm * sizeof *o->mh);
        o->mhk = re(o->mhk, nm * sizeof *o->mhk);
        o->members_by_acct = re(o->members_by_acct, nm * sizeof *o->members_by_acct);
        o->m_memo = re(o->m_memo, nm * sizeof *o->m_memo);
        o->m_head = re(o->m_head, nm * sizeof *o->m_head);
        o->act_m = re(o->act_m, nm * sizeof *o->act_m);
        for (size_t i = o->cap_m; i < nm; i++) {
            o->m_memo[i].now = INT64_MIN; /* no memo yet */
            o->m_picked[i] = 0;           /* (not always set: fg__order_prepare) */
        }
        o->cap_m = nm;
    }
    if (na > o->cap_a) {
        o->a_picked = re(o->a_picked, na * sizeof *o->a_picked);
        o->a_left = re(o->a_left, na * sizeof *o->a_left);
        o->a_base = re(o->a_base, na * sizeof *o->a_base);
        o->a_w = re(o->a_w, na * sizeof *o->a_w);
        o->ah = (fg__hk_t *)re(o->ah ? o->ah - 1 : NULL, (na + 1) * sizeof *o->ah) + 1;
        o->ah[-1] = FG__HK_SENTINEL;
        o->mh_off = re(o->mh_off, (na + 1) * sizeof *o->mh_off);
        o->mh_n = re(o->mh_n, na * sizeof *o->mh_n);
        o->mh_cnt = re(o->mh_cnt, na * sizeof *o->mh_cnt);
        o->a_memo = re(o->a_memo, na * sizeof *o->a_memo);
        o->act_a = re(o->act_a, na * sizeof *o->act_a);
        for (size_t i = o->cap_a; i < na; i++)
            o->a_memo[i].now = INT64_MIN;
        o->cap_a = na;
    }
}

/* order_grow when they are too small (each walk asks; they seldom are) */
static inline void order_size(fg__order_t *o, size_t nm, size_t na)
{
    if (nm > o->cap_m || na > o->cap_a)
        order_grow(o, nm, na);
}

static bool bit_in(const uint64_t *v, size_t cap, size_t i)
{
    return i / 64 < cap && (v[i / 64] >> (i % 64) & 1);
}

static void group_members(const fg_sched_t *s, fg__order_t *o);

/* Prepares o for a walk at time `now`; o's arrays are sized for the current members
 * and accounts (o must be zeroed the first time). Under wfq, the per-account and
 * per-member entries are set only for those with pending jobs (act_a, act_m): no other
 * is ever read (a key, a heap or a cursor is only for one with jobs in the band). */
void fg__order_prepare(fg_sched_t *s, fg__order_t *o, fg_time_t now)
{
    size_t nm = s->nmembers ? s->nmembers : 1, na = s->naccounts ? s->naccounts : 1;
    order_size(o, nm, na);
    o->run_w = s->tau > 0 ? 0.25 : 1.0;
    o->band = -1;
    o->nah = o->nfast = 0;
    /* the keys (decayed usage, running GPUs, weights) and the members grouped by
     * account order only wfq; the other policies never read them */
    if (s->cfg.policy != FG_POLICY_WFQ) {
        /* (the round-robin position: read by round-robin only, a division) */
        o->rr_pos = s->nmembers ? (int32_t)((size_t)s->rr_next % s->nmembers) : 0;
        for (size_t i = 0; i < s->naccounts; i++)
            o->a_picked[i] = 0;
        for (size_t i = 0; i < s->nmembers; i++)
            o->m_picked[i] = 0;
        return;
    }
    o->nact_a = (int32_t)s->act_a.n;
    o->nact_m = (int32_t)s->act_m.n;
    /* members grouped by account (counting sort), ascending inside each account; kept
     * while the numbers of accounts and members are (a member never changes account,
     * and neither is ever removed) */
    if (!(o->grp_ok && o->grp_na == s->naccounts && o->grp_nm == s->nmembers))
        group_members(s, o);
    /* the members with pending jobs are read only with an account of two members or
     * more (below and band_begin; the tests' plain hook reads them all) */
    if (s->act_m.n && (!o->grp_alone || !fg__sc(s, FG__SC_ONE_MEMBER)))
        memcpy(o->act_m, s->act_m.list, sizeof *o->act_m * s->act_m.n);
    if (!fg__sc(s, FG__SC_ACTIVE_SETS)) { /* (tests: every entry, as if all had pending jobs) */
        for (size_t i = 0; i < s->naccounts; i++)
            o->act_a[i] = (int32_t)i;
        for (size_t i = 0; i < s->nmembers; i++)
            o->act_m[i] = (int32_t)i;
        o->nact_a = (int32_t)s->naccounts;
        o->nact_m = (int32_t)s->nmembers;
    }
    /* one memo of the usage terms for every order of s (they all compute the same
     * terms, a walk's and plan_next_walk's at the same time) */
    fg__order_t *mo = &s->it;
    if (mo != o)
        order_size(mo, nm, na);
    /* the accounts with pending jobs copied as they are read (their list may change
     * during the walk; no list when the set never had a member, and none is read) */
    const int32_t nact = o->nact_a; /* (a local: the memo's stores might alias it) */
    const int32_t *const act = !fg__sc(s, FG__SC_ACTIVE_SETS) ? o->act_a : s->act_a.list;
    for (int32_t k = 0; k < nact; k++) {
        const int32_t i = act[k];
        o->act_a[k] = i;
        const fg__account_t *a = &s->accounts[i];
        o->a_picked[i] = 0;
        o->a_base[i] = base_at(s, &mo->a_memo[i], NULL, a->usage, a->usage_at, a->running, now) +
                       o->run_w * (double)a->running;
        o->a_w[i] = a->weight;
    }
    /* a member's key is compared only in a heap of two or more members: never for the
     * only member of its account (its usage term, weight and GPUs walked are left unset;
     * with no account of two members or more, no member's is read) */
    for (int32_t k = 0; k < o->nact_m && (!o->grp_alone || !fg__sc(s, FG__SC_ONE_MEMBER)); k++) {
        const int32_t i = o->act_m[k];
        const fg__member_t *m = &s->members[i];
        if (o->mh_n[m->account] == 1 && fg__sc(s, FG__SC_ONE_MEMBER))
            continue;
        o->m_picked[i] = 0;
        o->m_base[i] = base_at(s, &mo->m_memo[i], &mo->a_memo[m->account], m->usage, m->usage_at,
                               m->running, now) +
                       o->run_w * (double)m->running;
        o->m_w[i] = m->weight;
    }
}

/* fg__order_prepare: the members grouped by account in o (members_by_acct, mh_off,
 * mh_n) */
static void group_members(const fg_sched_t *s, fg__order_t *o)
{
    for (size_t i = 0; i <= s->naccounts; i++)
        o->mh_off[i] = 0;
    for (size_t i = 0; i < s->nmembers; i++)
        o->mh_off[s->members[i].account + 1]++;
    for (size_t i = 1; i <= s->naccounts; i++)
        o->mh_off[i] += o->mh_off[i - 1];
    for (size_t i = 0; i < s->naccounts; i++)
        o->mh_n[i] = 0;
    for (size_t i = 0; i < s->nmembers; i++) {
        int32_t a = s->members[i].account;
        o->members_by_acct[o->mh_off[a] + o->mh_n[a]++] = (int32_t)i;
    }
    o->grp_alone = true;
    for (size_t i = 0; i < s->naccounts; i++)
        o->grp_alone &= o->mh_n[i] <= 1;
    o->grp_ok = true;
    o->grp_na = s->naccounts;
    o->grp_nm = s->nmembers;
}

/* ------------------------------------------------------------------ heaps */

/* Member m's head job in the band (m has jobs left in it). */
static fg__head_t head_of(const fg_sched_t *s, const fg__order_t *o, int32_t m)
{
    const fg__job_t *j = &s->jobs[o->qv[m][o->cursor[m]]];
    return (fg__head_t){j->submit_time, j->id};
}

static bool head_before(fg__head_t a, fg__head_t b)
{
    if (a.submit_time != b.submit_time)
        return a.submit_time < b.submit_time;
    return a.id < b.id;
}

/* sift_down for the oldest-first heap: by head job (submit time, then id; distinct). */
static void sift_oldest(const fg__head_t *head, int32_t *h, int32_t n, int32_t i)
{
    int32_t v = h[i];
    const fg__head_t hv = head[v];
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, m = -1;
        fg__head_t hm = hv;
        if (l < n && head_before(head[h[l]], hm)) {
            m = l;
            hm = head[h[l]];
        }
        if (r < n && head_before(head[h[r]], hm))
            m = r;
        if (m < 0)
            break;
        h[i] = h[m];
        i = m;
    }
    h[i] = v;
}

static inline bool hk_before(fg__hk_t a, fg__hk_t b)
{
    return a.key < b.key || (a.key == b.key && a.id < b.id);
}

/* sift_down for the wfq key heaps (accounts, members of an account): by key, then
 * index; each entry carries its key, so a comparison reads the heap only. */
void fg__sift_key(fg__hk_t *h, int32_t n, int32_t i)
{
    const fg__hk_t v = h[i];
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && hk_before(h[c + 1], h[c]))
            c++;
        if (!hk_before(h[c], v))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
}

/* Orders h[0..n) as a heap of keys (by key, then index). */
static void heapify_keys(fg__hk_t *h, int32_t n)
{
    for (int32_t i = n / 2 - 1; i >= 0; i--)
        fg__sift_key(h, n, i);
}

/* Sorts ah[0..n) by key, then index, the smallest last (insertion: n is small), each
 * entry in turn moved down past those it comes after by fg__acct_sink, which needs the
 * sentinel at ah[-1] (the order's array and the look ahead's copy have it) instead of a
 * bound. */
void fg__acct_sort(fg__hk_t *ah, int32_t n)
{
    for (int32_t i = 2; i <= n; i++)
        fg__acct_sink(ah, i, ah[i - 1].key);
}

/* Begins the account order over ah[0..n), with their keys: sorted when few, else a heap
 * (fg__order_t.ah). */
void fg__acct_order_begin(fg__order_t *o, int32_t n)
{
    o->nah = n;
    o->a_sorted = n <= FG__ACCT_SORTED;
    if (o->a_sorted)
        fg__acct_sort(o->ah, n);
    else
        heapify_keys(o->ah, n);
    o->nfast = o->a_sorted ? n : 0;
}

/* (U/τ + αR) + P over w, as documented; x / 1.0 is x exactly, so weight 1 (the common
 * case) skips the division. */
double fg__acct_key(const fg_sched_t *s, const fg__order_t *o, int32_t a)
{
    (void)s;
    return fg_fair_key(o->a_base[a], o->a_picked[a], o->a_w[a]);
}

static double member_key(const fg_sched_t *s, const fg__order_t *o, int32_t m)
{
    (void)s;
    return fg_fair_key(o->m_base[m], o->m_picked[m], o->m_w[m]);
}

/* The account order's `one` for account a with member m (jobs left in the band): m when
 * it is the account's only member, so that the inline step (fg__order_next) keeps the
 * account's counts alone; else -1, and under the tests' plain hook always (every step
 * through fg__order_next_any, which keeps every member's counts too). */
int32_t fg__acct_one(const fg_sched_t *s, const fg__order_t *o, int32_t a, int32_t m)
{
    return o->mh_n[a] == 1 && fg__sc(s, FG__SC_ONE_MEMBER) ? m : -1;
}

/* band_begin: member i's cursor on its queue of band b, counted into its account's jobs
 * left; returns its jobs in the band. */
static inline int32_t member_begin(const fg_sched_t *s, fg__order_t *o, int b, int32_t i)
{
    const fg__queue_t *q = &s->members[i].q[b];
    o->qv[i] = q->v;
    o->cursor[i] = q->head;
    o->m_left[i] = q->len - q->head;
    o->a_left[s->members[i].account] += o->m_left[i];
    return o->m_left[i];
}

/* Sets up band b and its heaps; returns the number of jobs in it. */
static int64_t band_begin(fg_sched_t *s, fg__order_t *o, int b)
{
    int64_t total = 0;
    const bool wfq = s->cfg.policy == FG_POLICY_WFQ;
    if (s->cfg.policy == FG_POLICY_RR)
        o->rr_pos = s->nmembers ? (int32_t)((size_t)s->rr_next % s->nmembers) : 0;
    if (wfq && o->grp_alone && fg__sc(s, FG__SC_ONE_MEMBER)) {
        /* every account of one member at most: the loops below in one, each account
         * with pending jobs through its member (who has them all) */
        int32_t nah = 0; /* (a local: the stores below might alias o->nah) */
        for (int32_t ka = 0; ka < o->nact_a; ka++) {
            const int32_t a = o->act_a[ka];
            if (o->mh_n[a] == 0) { /* (no member: only with "active-sets" off) */
                o->a_left[a] = 0;
                continue;
            }
            const int32_t m = o->members_by_acct[o->mh_off[a]];
            /* (member_begin, without the member's own count and heap: `one` below) */
            const fg__queue_t *q = &s->members[m].q[b];
            const int32_t n = q->len - q->head;
            o->qv[m] = q->v;
            o->cursor[m] = q->head;
            o->a_left[a] = n;
            total += n;
            if (n)
                o->ah[nah++] = (fg__hk_t){fg__acct_key(s, o, a), a, m}; /* (acct_one) */
        }
        fg__acct_order_begin(o, nah);
        return total;
    }
    if (wfq) { /* (those with pending jobs only: fg__order_prepare) */
        for (int32_t k = 0; k < o->nact_a; k++)
            o->a_left[o->act_a[k]] = 0;
        for (int32_t k = 0; k < o->nact_m; k++)
            total += member_begin(s, o, b, o->act_m[k]);
    } else {
        for (size_t i = 0; i < s->naccounts; i++)
            o->a_left[i] = 0;
        for (size_t i = 0; i < s->nmembers; i++)
            total += member_begin(s, o, b, (int32_t)i);
    }
    o->nah = o->nfast = 0;
    if (!total)
        return 0;
    if (wfq) {
        const uint64_t *act_m = s->act_m.bits;
        const size_t act_m_cap = s->act_m.words;
        const bool all =
            !fg__sc(s, FG__SC_ACTIVE_SETS); /* (tests: as if every member had pending jobs) */
        for (int32_t ka = 0; ka < o->nact_a; ka++) {
            const int32_t a = o->act_a[ka];
            if (!o->a_left[a]) { /* (none of its members has a job in the band) */
                o->mh_cnt[a] = 0;
                continue;
            }
            fg__hk_t *h = &o->mhk[o->mh_off[a]];
            if (o->mh_n[a] == 1) { /* (its one member has the account's jobs in the band) */
                h[0] = (fg__hk_t){0.0, o->members_by_acct[o->mh_off[a]], -1};
                o->mh_cnt[a] = 1;
                o->ah[o->nah++] =
                    (fg__hk_t){fg__acct_key(s, o, a), a, fg__acct_one(s, o, a, h[0].id)};
                continue;
            }
            int32_t n = 0;
            for (int32_t k = 0; k < o->mh_n[a]; k++) {
                int32_t m = o->members_by_acct[o->mh_off[a] + k];
                if ((all || bit_in(act_m, act_m_cap, (size_t)m)) && o->m_left[m])
                    h[n++] = (fg__hk_t){0.0, m, -1};
            }
            o->mh_cnt[a] = n;
            if (n > 1) { /* (the key of a heap of one is never compared: it only shrinks) */
                for (int32_t k = 0; k < n; k++)
                    h[k].key = member_key(s, o, h[k].id);
                heapify_keys(h, n);
            }
            o->ah[o->nah++] = (fg__hk_t){fg__acct_key(s, o, a), a, -1}; /* (acct_one) */
        }
        fg__acct_order_begin(o, o->nah);
    } else if (s->cfg.policy != FG_POLICY_RR) {
        for (size_t i = 0; i < s->nmembers; i++)
            if (o->m_left[i]) {
                o->m_head[i] = head_of(s, o, (int32_t)i);
                o->mh[o->nah++] = (int32_t)i;
            }
        for (int32_t i = o->nah / 2 - 1; i >= 0; i--)
            sift_oldest(o->m_head, o->mh, o->nah, i);
    }
    return total;
}

static int32_t pick_rr(const fg_sched_t *s, fg__order_t *o)
{
    size_t n = s->nmembers;
    for (size_t k = 0; k < n; k++) {
        size_t i = ((size_t)o->rr_pos + k) % n;
        if (o->m_left[i]) {
            o->rr_pos = (int32_t)((i + 1) % n);
            return (int32_t)i;
        }
    }
    return -1;
}

/* Returns the slot of the next pending job in plan order, or -1 when none is left
 * (fg__order_next: its common wfq step inline, in internal.h). */
int32_t fg__order_next_any(fg_sched_t *s, fg__order_t *o)
{
    for (;;) {
        if (s->cfg.policy == FG_POLICY_WFQ && o->band >= 0 && o->nah) {
            /* wfq: the oldest job of the smallest-key member of the smallest-key
             * account (the last when sorted, else the heap's root); a key is compared
             * only inside a heap or order of two or more (they only shrink during a
             * band). An account's one member (`one`) is taken from its entry, and its
             * counts are its account's: its heap of one and its own counts are not
             * kept (as in the inline step, fg__order_next) */
            const fg__hk_t *top = &o->ah[o->a_sorted ? o->nah - 1 : 0];
            const int32_t a = top->id, one = top->one;
            fg__hk_t *mh = &o->mhk[o->mh_off[a]];
            const int32_t m = one >= 0 ? one : mh[0].id;
            const int32_t slot = o->qv[m][o->cursor[m]++];
            const int32_t g = s->jobs[slot].gpus;
            o->a_picked[a] += g;
            if (one < 0) {
                o->m_picked[m] += g;
                if (--o->m_left[m] == 0) {
                    mh[0] = mh[--o->mh_cnt[a]];
                    if (o->mh_cnt[a] > 1)
                        fg__sift_key(mh, o->mh_cnt[a], 0);
                } else if (o->mh_cnt[a] > 1) {
                    mh[0].key = member_key(s, o, m);
                    fg__sift_key(mh, o->mh_cnt[a], 0);
                }
            }
            if (--o->a_left[a] == 0) {
                if (o->a_sorted) {
                    o->nah = --o->nfast;
                } else {
                    o->ah[0] = o->ah[--o->nah];
                    if (o->nah > 1)
                        fg__sift_key(o->ah, o->nah, 0);
                }
            } else if (o->nah > 1) { /* (the key of an order of one is never compared) */
                if (o->a_sorted) {
                    fg__acct_sink(o->ah, o->nah, fg__acct_key(s, o, a));
                } else {
                    o->ah[0].key = fg__acct_key(s, o, a);
                    fg__sift_key(o->ah, o->nah, 0);
                }
            }
            return slot;
        }
        if (o->band >= 0 && s->cfg.policy != FG_POLICY_WFQ) {
            int32_t m = -1;
            if (s->cfg.policy == FG_POLICY_RR)
                m = pick_rr(s, o);
            else if (o->nah)
                m = o->mh[0];
            if (m >= 0) {
                int32_t slot = o->qv[m][o->cursor[m]++];
                int32_t g = s->jobs[slot].gpus;
                int32_t acc = s->members[m].account;
                o->m_left[m]--;
                o->a_left[acc]--;
                o->m_picked[m] += g;
                o->a_picked[acc] += g;
                if (s->cfg.policy != FG_POLICY_RR) {
                    /* the root's head job moved on (or it has none left) */
                    if (o->m_left[m] == 0)
                        o->mh[0] = o->mh[--o->nah];
                    else
                        o->m_head[m] = head_of(s, o, m);
                    sift_oldest(o->m_head, o->mh, o->nah, 0);
                }
                return slot;
            }
        }
        do { /* (a band with no pending job at all is skipped without a look) */
            if (++o->band >= FG__NBANDS)
                return -1;
        } while (s->band_pending[o->band] == 0 || band_begin(s, o, o->band) == 0);
    }
}
