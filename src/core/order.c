/*
 * order.c - the plan order: which pending job the pass looks at next.
 *
 * The order depends on the policy and on the state at the start of the pass only,
 * never on what fits, so "behind N jobs" means the same thing in every pass and in
 * fg_sched_explain.
 *
 * Jobs sit in bands (fair: the class, high first, then the LAS queue, fewest attained
 * GPU-seconds first; wfq, priority, round-robin: the class; las: the LAS queue; fifo:
 * one band; fg__job_band). Bands are walked in order. Inside a band:
 *   fifo, priority, las  the oldest head job over all members (submit time, then id);
 *   round-robin          members take turns, one job each, in index order, starting
 *                        after the member whose job started last (kept across passes);
 *   wfq, fair            the account with the smallest key, then inside it the member
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
 *
 * Worked example (fair, the LAS thresholds 3600, 36000, 360000 GPU-s): account A ran
 * least recently (key 0.1), B more (key 0.5). A's job a1 was stopped after 2 h on 1 GPU
 * (attained 7200: queue 1); B's b1 is new (queue 0), and so is A's a2. The walk gives
 * a2 (band normal/0, A's key lower), b1 (same band), then a1 (band normal/1): new work
 * of every tenant before the long runner, and between tenants the fair-share order.
 *
 * The code follows those steps: fg__order_prepare makes the keys' terms once per walk
 * (wfq only); band_begin sets up a band (plain_band_begin, wfq_band_begin); each step
 * (fg__order_next_any: plain_next, wfq_next) gives one job and moves the heaps on. The
 * common wfq step, an account order of few accounts whose smallest-key account has one
 * member, is fg__order_next, inline in internal.h.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ arrays */

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
    free(o->ah);
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

/* Grows o's arrays to nm members and na accounts (contents are set by the callers). */
static void order_grow(fg__order_t *o, size_t nm, size_t na)
{
    if (nm > o->cap_m) {
        o->cursor = fg__realloc(o->cursor, nm * sizeof *o->cursor);
        o->qv = fg__realloc(o->qv, nm * sizeof *o->qv);
        o->m_picked = fg__realloc(o->m_picked, nm * sizeof *o->m_picked);
        o->m_left = fg__realloc(o->m_left, nm * sizeof *o->m_left);
        o->m_base = fg__realloc(o->m_base, nm * sizeof *o->m_base);
        o->m_w = fg__realloc(o->m_w, nm * sizeof *o->m_w);
        o->mh = fg__realloc(o->mh, nm * sizeof *o->mh);
        o->mhk = fg__realloc(o->mhk, nm * sizeof *o->mhk);
        o->members_by_acct = fg__realloc(o->members_by_acct, nm * sizeof *o->members_by_acct);
        o->m_memo = fg__realloc(o->m_memo, nm * sizeof *o->m_memo);
        o->m_head = fg__realloc(o->m_head, nm * sizeof *o->m_head);
        o->act_m = fg__realloc(o->act_m, nm * sizeof *o->act_m);
        for (size_t i = o->cap_m; i < nm; i++) {
            o->m_memo[i].now = INT64_MIN; /* no memo yet */
            o->m_picked[i] = 0;           /* (not always set: fg__order_prepare) */
        }
        o->cap_m = nm;
    }
    if (na > o->cap_a) {
        o->a_picked = fg__realloc(o->a_picked, na * sizeof *o->a_picked);
        o->a_left = fg__realloc(o->a_left, na * sizeof *o->a_left);
        o->a_base = fg__realloc(o->a_base, na * sizeof *o->a_base);
        o->a_w = fg__realloc(o->a_w, na * sizeof *o->a_w);
        o->ah = fg__realloc(o->ah, na * sizeof *o->ah);
        o->mh_off = fg__realloc(o->mh_off, (na + 1) * sizeof *o->mh_off);
        o->mh_n = fg__realloc(o->mh_n, na * sizeof *o->mh_n);
        o->mh_cnt = fg__realloc(o->mh_cnt, na * sizeof *o->mh_cnt);
        o->a_memo = fg__realloc(o->a_memo, na * sizeof *o->a_memo);
        o->act_a = fg__realloc(o->act_a, na * sizeof *o->act_a);
        for (size_t i = o->cap_a; i < na; i++)
            o->a_memo[i].now = INT64_MIN;
        o->cap_a = na;
    }
}

/* ------------------------------------------------------------------ prepare */

/* Does memo m hold the result for the inputs `in` (its usage, usage time, running
 * GPUs and now)? */
static bool memo_holds(const fg__base_memo_t *m, const fg__base_memo_t *in)
{
    return m->now == in->now && m->at == in->at && m->running == in->running &&
           m->usage == in->usage;
}

/* Usage over tau as of in.now from the usage in.usage at in.at with in.running GPUs,
 * without changing the stored value (so that looking never changes what a later pass
 * computes); memoized in m on its inputs, so the same inputs give the same bits. A
 * member's memo may also take its account's (`alt`, or NULL) when the inputs are the
 * same: a member alone in its account has the account's usage, usage time and running
 * GPUs. */
static double base_at(const fg_sched_t *s, fg__base_memo_t *m, const fg__base_memo_t *alt,
                      fg__base_memo_t in)
{
    if (s->tau <= 0)
        return 0.0;
    if (memo_holds(m, &in))
        return m->base;
    if (alt && memo_holds(alt, &in)) {
        *m = *alt;
        return m->base;
    }
    double u = in.usage;
    fg_time_t at = in.at;
    fg__usage_advance(s, &u, &at, in.running, in.now);
    in.base = u / s->tau;
    *m = in;
    return m->base;
}

/* fg__order_prepare: the members grouped by account in o (members_by_acct, mh_off,
 * mh_n), by a counting sort, ascending inside each account. Kept while the numbers of
 * accounts and members are (a member never changes account, and neither is ever
 * removed). */
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

/* Under wfq, does o keep the members' own entries (usage terms, counts, heaps)? Only
 * when some account has two members or more ("one-member": a member alone in its
 * account goes through its account's entries). */
static bool members_kept(const fg_sched_t *s, const fg__order_t *o)
{
    return !o->grp_alone || !fg__sc(s, FG__SC_ONE_MEMBER);
}

/* fg__order_prepare, wfq: the accounts and members whose entries are set up (act_a,
 * act_m, copied: the sets may change during the walk). "active-sets": only those with
 * pending jobs, as no other is ever read (a key, a heap or a cursor is only for one
 * with jobs in the band); off, every one, as if all had pending jobs. */
static void wfq_active_sets(const fg_sched_t *s, fg__order_t *o)
{
    if (!fg__sc(s, FG__SC_ACTIVE_SETS)) {
        for (size_t i = 0; i < s->naccounts; i++)
            o->act_a[i] = (int32_t)i;
        for (size_t i = 0; i < s->nmembers; i++)
            o->act_m[i] = (int32_t)i;
        o->nact_a = (int32_t)s->naccounts;
        o->nact_m = (int32_t)s->nmembers;
        return;
    }
    o->nact_a = (int32_t)s->act_a.n;
    o->nact_m = (int32_t)s->act_m.n;
    if (s->act_a.n) /* (no list when the set never had a member) */
        memcpy(o->act_a, s->act_a.list, sizeof *o->act_a * s->act_a.n);
    if (s->act_m.n && members_kept(s, o))
        memcpy(o->act_m, s->act_m.list, sizeof *o->act_m * s->act_m.n);
}

/* fg__order_prepare, wfq: each account's usage term (U/τ + αR, memoized in mo), weight
 * and GPUs walked (none yet). */
static void wfq_account_terms(const fg_sched_t *s, fg__order_t *o, fg__order_t *mo, fg_time_t now)
{
    for (int32_t k = 0; k < o->nact_a; k++) {
        const int32_t i = o->act_a[k];
        const fg__account_t *a = &s->accounts[i];
        const fg__base_memo_t in = {
            .usage = a->usage, .at = a->usage_at, .now = now, .running = a->running};
        o->a_picked[i] = 0;
        o->a_base[i] = base_at(s, &mo->a_memo[i], NULL, in) + o->run_w * (double)a->running;
        o->a_w[i] = a->weight;
    }
}

/* fg__order_prepare, wfq: the same for the members, when kept. A member's key is
 * compared only in a heap of two or more members: never for the only member of its
 * account, whose entries are left unset ("one-member"). */
static void wfq_member_terms(const fg_sched_t *s, fg__order_t *o, fg__order_t *mo, fg_time_t now)
{
    if (!members_kept(s, o))
        return;
    for (int32_t k = 0; k < o->nact_m; k++) {
        const int32_t i = o->act_m[k];
        const fg__member_t *m = &s->members[i];
        if (o->mh_n[m->account] == 1 && fg__sc(s, FG__SC_ONE_MEMBER))
            continue;
        const fg__base_memo_t in = {
            .usage = m->usage, .at = m->usage_at, .now = now, .running = m->running};
        o->m_picked[i] = 0;
        o->m_base[i] =
            base_at(s, &mo->m_memo[i], &mo->a_memo[m->account], in) + o->run_w * (double)m->running;
        o->m_w[i] = m->weight;
    }
}

/* round-robin: the member whose turn comes first */
static int32_t rr_start(const fg_sched_t *s)
{
    return s->nmembers ? (int32_t)((size_t)s->rr_next % s->nmembers) : 0;
}

/* Prepares o for a walk at time `now`; o's arrays are sized for the current members
 * and accounts (o must be zeroed the first time). The keys (decayed usage, running
 * GPUs, weights) and the members grouped by account order only wfq; the other
 * policies start with no GPUs walked. */
void fg__order_prepare(fg_sched_t *s, fg__order_t *o, fg_time_t now)
{
    const size_t nm = s->nmembers ? s->nmembers : 1, na = s->naccounts ? s->naccounts : 1;
    if (nm > o->cap_m || na > o->cap_a)
        order_grow(o, nm, na);
    o->run_w = s->tau > 0 ? 0.25 : 1.0;
    o->band = -1;
    o->nah = o->nfast = 0;
    if (!fg__keyed(s)) {
        o->rr_pos = rr_start(s);
        for (size_t i = 0; i < s->naccounts; i++)
            o->a_picked[i] = 0;
        for (size_t i = 0; i < s->nmembers; i++)
            o->m_picked[i] = 0;
        return;
    }
    if (!(o->grp_ok && o->grp_na == s->naccounts && o->grp_nm == s->nmembers))
        group_members(s, o);
    wfq_active_sets(s, o);
    /* one memo of the usage terms for every order of s (they all compute the same
     * terms, a walk's and plan_next_walk's at the same time) */
    fg__order_t *mo = &s->it;
    if (mo != o && (nm > mo->cap_m || na > mo->cap_a))
        order_grow(mo, nm, na);
    wfq_account_terms(s, o, mo, now);
    wfq_member_terms(s, o, mo, now);
}

/* ------------------------------------------------------------------ heaps */

/* Member m's head job in the band (m has jobs left in it). */
static fg__head_t head_of(const fg_sched_t *s, const fg__order_t *o, int32_t m)
{
    return fg__job_head(&s->jobs[o->qv[m][o->cursor[m]]]);
}

/* sift_down of the oldest-first heap h[0..n) of members from i, by their head jobs
 * (fg__head_before: distinct, so the heap is the same whatever the ties rule). */
static void sift_oldest(const fg__head_t *head, int32_t *h, int32_t n, int32_t i)
{
    assert(0 <= i && i < n);
    const int32_t v = h[i];
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && fg__head_before(head[h[c + 1]], head[h[c]]))
            c++;
        if (!fg__head_before(head[h[c]], head[v]))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
}

/* sift_down for the wfq key heaps (accounts, members of an account): by key, then
 * index; each entry carries its key, so a comparison reads the heap only. */
void fg__sift_key(fg__hk_t *h, int32_t n, int32_t i)
{
    assert(0 <= i && i < n);
    const fg__hk_t v = h[i];
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && fg__hk_before(h[c + 1], h[c]))
            c++;
        if (!fg__hk_before(h[c], v))
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

void fg__hk_sort_last(fg__hk_t *h, int32_t n)
{
    for (int32_t i = 1; i < n; i++)
        fg__hk_insert(h, i, h[i], fg__hk_after);
}

void fg__acct_order_begin(const fg_sched_t *s, fg__order_t *o, int32_t n)
{
    assert(0 <= n && (size_t)n <= o->cap_a);
    o->nah = n;
    o->a_sorted = n <= FG__ACCT_SORTED && fg__sc(s, FG__SC_SORTED_ACCOUNTS);
    if (o->a_sorted)
        fg__hk_sort_last(o->ah, n);
    else
        heapify_keys(o->ah, n);
    o->nfast = o->a_sorted ? n : 0;
}

static double member_key(const fg__order_t *o, int32_t m)
{
    return fg_fair_key(o->m_base[m], o->m_picked[m], o->m_w[m]);
}

int32_t fg__acct_one(const fg_sched_t *s, const fg__order_t *o, int32_t a, int32_t m)
{
    return o->mh_n[a] == 1 && fg__sc(s, FG__SC_ONE_MEMBER) ? m : -1;
}

/* ------------------------------------------------------------------ bands */

/* Member i's cursor on its queue of band b, counted into its account's jobs left;
 * returns its jobs in the band. */
static int32_t member_begin(const fg_sched_t *s, fg__order_t *o, int b, int32_t i)
{
    const fg__queue_t *q = &s->members[i].q[b];
    o->qv[i] = q->v;
    o->cursor[i] = q->head;
    o->m_left[i] = q->len - q->head;
    o->a_left[s->members[i].account] += o->m_left[i];
    return o->m_left[i];
}

/* band_begin for fifo, priority, round-robin, las: every member's cursor and counts;
 * but for round-robin, the heap of the members with jobs in the band by head job. */
static int64_t plain_band_begin(const fg_sched_t *s, fg__order_t *o, int b)
{
    int64_t total = 0;
    for (size_t i = 0; i < s->naccounts; i++)
        o->a_left[i] = 0;
    for (size_t i = 0; i < s->nmembers; i++)
        total += member_begin(s, o, b, (int32_t)i);
    if (!total || s->cfg.policy == FG_POLICY_RR)
        return total;
    for (size_t i = 0; i < s->nmembers; i++)
        if (o->m_left[i]) {
            o->m_head[i] = head_of(s, o, (int32_t)i);
            o->mh[o->nah++] = (int32_t)i;
        }
    for (int32_t i = o->nah / 2 - 1; i >= 0; i--)
        sift_oldest(o->m_head, o->mh, o->nah, i);
    return total;
}

/* wfq_band_begin when no member is kept ("one-member", every account of one member at
 * most): each account with pending jobs enters through its member, who has them all. */
static int64_t wfq_band_alone(const fg_sched_t *s, fg__order_t *o, int b)
{
    int64_t total = 0;
    int32_t n = 0;
    for (int32_t k = 0; k < o->nact_a; k++) {
        const int32_t a = o->act_a[k];
        if (o->mh_n[a] == 0) { /* (no member: only with "active-sets" off) */
            o->a_left[a] = 0;
            continue;
        }
        const int32_t m = o->members_by_acct[o->mh_off[a]];
        const fg__queue_t *q = &s->members[m].q[b];
        o->qv[m] = q->v;
        o->cursor[m] = q->head;
        o->a_left[a] = q->len - q->head;
        total += o->a_left[a];
        if (o->a_left[a])
            o->ah[n++] = (fg__hk_t){fg__acct_key(o, a), a, m};
    }
    fg__acct_order_begin(s, o, n);
    return total;
}

static bool bit_in(const uint64_t *v, size_t cap, size_t i)
{
    return i / 64 < cap && (v[i / 64] >> (i % 64) & 1);
}

/* Account a's heap h of its members with jobs in the band, by key (the key of a heap
 * of one is never compared: it only shrinks). */
static void member_heap(const fg_sched_t *s, fg__order_t *o, int32_t a, fg__hk_t *h)
{
    const bool all = !fg__sc(s, FG__SC_ACTIVE_SETS); /* (as if all had pending jobs) */
    int32_t n = 0;
    for (int32_t k = 0; k < o->mh_n[a]; k++) {
        const int32_t m = o->members_by_acct[o->mh_off[a] + k];
        if ((all || bit_in(s->act_m.bits, s->act_m.words, (size_t)m)) && o->m_left[m])
            h[n++] = (fg__hk_t){0.0, m, -1};
    }
    o->mh_cnt[a] = n;
    if (n > 1) {
        for (int32_t k = 0; k < n; k++)
            h[k].key = member_key(o, h[k].id);
        heapify_keys(h, n);
    }
}

/* wfq_band_begin: account a enters the account order with its key when it has jobs in
 * the band, with its heap of members (one member alone in it: `one`, fg__acct_one). */
static void account_enter(const fg_sched_t *s, fg__order_t *o, int32_t a)
{
    if (!o->a_left[a]) {
        o->mh_cnt[a] = 0;
        return;
    }
    fg__hk_t *h = &o->mhk[o->mh_off[a]];
    int32_t one = -1;
    if (o->mh_n[a] == 1) { /* its one member has the account's jobs in the band */
        h[0] = (fg__hk_t){0.0, o->members_by_acct[o->mh_off[a]], -1};
        o->mh_cnt[a] = 1;
        one = fg__acct_one(s, o, a, h[0].id);
    } else {
        member_heap(s, o, a, h);
    }
    o->ah[o->nah++] = (fg__hk_t){fg__acct_key(o, a), a, one};
}

/* band_begin for wfq: the cursors and counts of the members with pending jobs, then
 * the account order of the accounts with jobs in the band. */
static int64_t wfq_band_begin(const fg_sched_t *s, fg__order_t *o, int b)
{
    if (!members_kept(s, o))
        return wfq_band_alone(s, o, b);
    int64_t total = 0;
    for (int32_t k = 0; k < o->nact_a; k++)
        o->a_left[o->act_a[k]] = 0;
    for (int32_t k = 0; k < o->nact_m; k++)
        total += member_begin(s, o, b, o->act_m[k]);
    if (!total)
        return 0;
    for (int32_t k = 0; k < o->nact_a; k++)
        account_enter(s, o, o->act_a[k]);
    fg__acct_order_begin(s, o, o->nah);
    return total;
}

/* Sets up band b and its heaps; returns the number of jobs in it. */
static int64_t band_begin(const fg_sched_t *s, fg__order_t *o, int b)
{
    o->nah = o->nfast = 0;
    if (s->cfg.policy == FG_POLICY_RR)
        o->rr_pos = rr_start(s);
    return fg__keyed(s) ? wfq_band_begin(s, o, b) : plain_band_begin(s, o, b);
}

/* ------------------------------------------------------------------ steps */

/* round-robin: the next member with jobs left in the band from rr_pos on, whose turn
 * then passes to the next; -1 when none has any. */
static int32_t pick_rr(const fg_sched_t *s, fg__order_t *o)
{
    const size_t n = s->nmembers;
    for (size_t k = 0; k < n; k++) {
        const size_t i = ((size_t)o->rr_pos + k) % n;
        if (o->m_left[i]) {
            o->rr_pos = (int32_t)((i + 1) % n);
            return (int32_t)i;
        }
    }
    return -1;
}

/* The oldest-first heap after a pick of its root, member m: m out of it when it has no
 * job left in the band, else moved by its new head job. */
static void oldest_after_pick(const fg_sched_t *s, fg__order_t *o, int32_t m)
{
    if (o->m_left[m] == 0)
        o->mh[0] = o->mh[--o->nah];
    else
        o->m_head[m] = head_of(s, o, m);
    if (o->nah > 1)
        sift_oldest(o->m_head, o->mh, o->nah, 0);
}

/* The next job of the band under fifo, priority, round-robin, las, -1 when none is
 * left: round-robin's member in turn, else the member whose head job is the oldest. */
static int32_t plain_next(const fg_sched_t *s, fg__order_t *o)
{
    const bool rr = s->cfg.policy == FG_POLICY_RR;
    const int32_t m = rr ? pick_rr(s, o) : o->nah ? o->mh[0] : -1;
    if (m < 0)
        return -1;
    const int32_t acc = s->members[m].account;
    assert(o->m_left[m] > 0 && o->m_left[m] <= o->a_left[acc]);
    assert(o->cursor[m] < s->members[m].q[o->band].len);
    const int32_t slot = o->qv[m][o->cursor[m]++];
    const int32_t g = s->jobs[slot].gpus;
    o->m_left[m]--;
    o->a_left[acc]--;
    o->m_picked[m] += g;
    o->a_picked[acc] += g;
    if (!rr)
        oldest_after_pick(s, o, m);
    return slot;
}

/* Account a's heap of members after a pick of its root, member m, of g GPUs: m out of
 * it when it has no job left in the band, else moved by its new key. */
static void member_after_pick(fg__order_t *o, int32_t a, int32_t m, int32_t g)
{
    fg__hk_t *mh = &o->mhk[o->mh_off[a]];
    assert(o->m_left[m] > 0 && o->m_left[m] <= o->a_left[a]);
    assert(1 <= o->mh_cnt[a] && o->mh_cnt[a] <= o->mh_n[a]);
    o->m_picked[m] += g;
    if (--o->m_left[m] == 0) {
        mh[0] = mh[--o->mh_cnt[a]];
        if (o->mh_cnt[a] > 1)
            fg__sift_key(mh, o->mh_cnt[a], 0);
    } else if (o->mh_cnt[a] > 1) {
        mh[0].key = member_key(o, m);
        fg__sift_key(mh, o->mh_cnt[a], 0);
    }
}

/* The account order after a pick of its smallest-key account a: out of it when a has
 * no job left in the band, else moved by its new key (sorted or a heap). */
static void acct_after_pick(fg__order_t *o, int32_t a)
{
    if (o->a_sorted) {
        fg__acct_sorted_after_pick(o, a);
    } else if (--o->a_left[a] == 0) {
        o->ah[0] = o->ah[--o->nah];
        if (o->nah > 1)
            fg__sift_key(o->ah, o->nah, 0);
    } else if (o->nah > 1) { /* (the key of an order of one is never compared) */
        o->ah[0].key = fg__acct_key(o, a);
        fg__sift_key(o->ah, o->nah, 0);
    }
}

/* The next job of the band under wfq (o->nah > 0): the oldest job of the smallest-key
 * member of the smallest-key account (the last when sorted, else the heap's root). An
 * account's one member (`one`) is taken from its entry, and its counts are its
 * account's: its heap of one and its own counts are not kept. */
static int32_t wfq_next(const fg_sched_t *s, fg__order_t *o)
{
    const fg__hk_t top = o->ah[o->a_sorted ? o->nah - 1 : 0];
    const int32_t a = top.id;
    const int32_t m = top.one >= 0 ? top.one : o->mhk[o->mh_off[a]].id;
    assert(o->a_left[a] > 0 && o->cursor[m] < s->members[m].q[o->band].len);
    const int32_t slot = o->qv[m][o->cursor[m]++];
    const int32_t g = s->jobs[slot].gpus;
    o->a_picked[a] += g;
    if (top.one < 0)
        member_after_pick(o, a, m, g);
    acct_after_pick(o, a);
    return slot;
}

#ifndef NDEBUG
/* Has band o->band given all its jobs (every count of the band at 0)? For asserts. */
static bool band_spent(const fg_sched_t *s, const fg__order_t *o)
{
    if (fg__keyed(s)) {
        for (int32_t k = 0; k < o->nact_a; k++)
            if (o->a_left[o->act_a[k]] != 0)
                return false;
        return o->nah == 0;
    }
    for (size_t i = 0; i < s->naccounts; i++)
        if (o->a_left[i] != 0)
            return false;
    for (size_t i = 0; i < s->nmembers; i++)
        if (o->m_left[i] != 0)
            return false;
    return true;
}
#endif

/* Moves o to the next band with jobs and sets it up; false past the last. (A band with
 * no pending job at all is skipped without a look.) */
static bool next_band(fg_sched_t *s, fg__order_t *o)
{
    do {
        if (++o->band >= FG__NBANDS)
            return false;
    } while (s->band_pending[o->band] == 0 || band_begin(s, o, o->band) == 0);
    return true;
}

/* Returns the slot of the next pending job in plan order, or -1 when none is left
 * (fg__order_next: its common wfq step inline, in internal.h). */
int32_t fg__order_next_any(fg_sched_t *s, fg__order_t *o)
{
    for (;;) {
        if (o->band >= 0 && o->band < FG__NBANDS) {
            const int32_t slot = !fg__keyed(s) ? plain_next(s, o) : o->nah ? wfq_next(s, o) : -1;
            if (slot >= 0)
                return slot;
            assert(band_spent(s, o));
        }
        if (!next_band(s, o))
            return -1;
    }
}
