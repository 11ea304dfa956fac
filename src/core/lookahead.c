/*
 * lookahead.c - the look ahead: how many jobs the wfq order gives before the first one
 * a walk could start, found without walking the order job by job.
 *
 * Why: past its claims, a walk with GPUs free looks at every job of its backfill
 * window only to find that most of them cannot start (too long for the free GPUs
 * before their reservations). fg__order_peek answers for many jobs at once: a pending,
 * eligible job that cannot fit is refused without asking (of g GPUs of any type: it
 * ends after fit_end[g]; of k whole nodes: unless k <= nwhole and it ends by
 * whole_end[k - 1]), any other is asked about (accept). The order then moves past the
 * jobs refused, which get their reasons lazily.
 *
 * How: in a band where each account's jobs left are one member's, the wfq order gives
 * the band's jobs sorted by (key at their pick, account index), and an account's keys
 * only grow along its queue (a pick adds its GPUs). So the first job taken is, of each
 * account's first job taken, the one with the smallest (key, index), and its place in
 * the order is the number of jobs of every account before it. peek_find reads each
 * account's queue from its cursor only while its keys may still come before the best
 * job found so far (fg__key_stop), and passes a run of FG__QBLK queue entries at once
 * when the run's summary refuses them all ("queue-runs"). With move_all the merge
 * itself runs instead, on a copy of the account order (peek_merge).
 *
 * Worked example: accounts A and B (weight 1, one member each), keys 1 and 1.5; A's
 * queue a1 (2 GPUs), a2 (1); B's b1 (1), b2 (1); only a2 may start. The order gives
 * a1 (A's key becomes 3), b1 (B: 2.5), b2 (B: 3.5), a2: three jobs before a2. peek_find
 * reads A: a1 refused, a2 taken at key 3, the best. Then B, whose keys come after 3
 * from 2 GPUs walked on (1.5 + 2 > 3, and B's index is after A's on a tie): it reads
 * b1 and b2 (0 and 1 GPUs walked before them) and stops. a2's place: A's 1 job before
 * it and B's 2, so r = 3, and the order moves past a1, b1, b2.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

enum { PEEK_MAX = 64 }; /* most accounts fg__order_peek takes */

/* An account of the band in the look ahead, as the order has it: its member with the
 * band's jobs, that member's queue and cursor, its jobs left and GPUs walked, its key
 * in the order; and peek_find's answer: the jobs before the one taken, and the GPUs
 * walked past them. */
typedef struct peek_acct {
    int32_t acct, mem, cur, left;
    const int32_t *qv;
    int64_t picked;
    double key;
    int64_t cnt, pkc;
} peek_acct_t;

/* One look ahead: its inputs, and the accounts of the band by local index i (accounts
 * ascending, so that local indices compare as account indices). */
typedef struct peek {
    fg_sched_t *s;
    fg__order_t *o;
    int64_t limit;
    fg_time_t now;
    /* what is refused without asking: lim[g] = fit_end[g] - now (a job of g GPUs ends
     * after fit_end[g] iff its time limit is above it; time limits are at least 1, so
     * "none fits" is 0 and "any end" INT64_MAX); whole nodes as fg__order_peek's
     * whole_end and nwhole; whether every pending job is eligible (no backoff ends after
     * now: s->max_eligible), so that eligibility is not read */
    fg_time_t lim[FG_WHOLE_NODE_GPUS + 1];
    const fg_time_t *whole_end;
    int32_t nwhole;
    bool all_eligible;
    bool (*accept)(fg_sched_t *, int32_t, void *);
    void *ctx;
    int32_t n;      /* accounts */
    peek_acct_t *a; /* a[0..n) */
} peek_t;

/* ------------------------------------------------------------------ setting up */

/* an entry of the account order by account index (for fg__hk_insert) */
static bool by_account(fg__hk_t a, fg__hk_t b)
{
    return a.id < b.id;
}

/* p's accounts from o's account order. With two or more, each entry's key is its
 * account's now (every pick since the band began had another entry to compare with).
 * False when an account has jobs of two or more members left in the band. */
static bool peek_accounts(peek_t *p)
{
    const fg__order_t *o = p->o;
    fg__hk_t e[PEEK_MAX];
    p->n = o->nah;
    for (int32_t i = 0; i < p->n; i++)
        fg__hk_insert(e, i, o->ah[i], by_account);
    for (int32_t i = 0; i < p->n; i++) {
        const int32_t a = e[i].id;
        int32_t m = e[i].one; /* (else alone in its account's heap, if at all) */
        if (m < 0) {
            if (o->mh_cnt[a] != 1)
                return false;
            m = o->mhk[o->mh_off[a]].id;
        }
        p->a[i].acct = a;
        p->a[i].mem = m;
        p->a[i].qv = o->qv[m];
        p->a[i].cur = o->cursor[m];
        p->a[i].left = (int32_t)o->a_left[a]; /* (m_left: not kept for `one`) */
        p->a[i].picked = o->a_picked[a];
        p->a[i].key = p->n > 1 ? e[i].key : 0.0;
    }
    return true;
}

/* The jobs left in the band. */
static int64_t peek_total(const peek_t *p)
{
    int64_t total = 0;
    for (int32_t i = 0; i < p->n; i++)
        total += p->a[i].left;
    return total;
}

/* p's bounds for refusing without asking (peek_t.lim, all_eligible). */
static void peek_limits(peek_t *p, const fg_time_t *fit_end)
{
    p->lim[0] = 0;
    for (int g = 1; g <= FG_WHOLE_NODE_GPUS; g++)
        p->lim[g] = fit_end[g] == FG__INF     ? INT64_MAX
                    : fit_end[g] == INT64_MIN ? 0
                                              : fit_end[g] - p->now;
    p->all_eligible = p->s->max_eligible <= p->now;
}

/* o as after the picks of the look ahead: the same cursors, counts and keys; its
 * account order begun again (the order of picks depends only on the keys and account
 * indices). */
static void peek_move(const peek_t *p)
{
    fg__order_t *o = p->o;
    int32_t nah = 0;
    for (int32_t k = 0; k < p->n; k++) {
        const int32_t a = p->a[k].acct, m = p->a[k].mem;
        o->cursor[m] = p->a[k].cur;
        o->m_picked[m] += p->a[k].picked - o->a_picked[a];
        o->a_picked[a] = p->a[k].picked;
        o->m_left[m] = p->a[k].left;
        o->a_left[a] = p->a[k].left;
        if (p->a[k].left == 0)
            o->mh_cnt[a] = 0;
        else
            o->ah[nah++] = (fg__hk_t){fg__acct_key(o, a), a, fg__acct_one(p->s, o, a, m)};
    }
    fg__acct_order_begin(p->s, o, nah);
}

/* ------------------------------------------------------------------ refusing */

/* Job j is refused without asking: pending, eligible and cannot fit (of any type on
 * one node: it ends after its size's bound; of k whole nodes, with nwhole >= 0: unless
 * k <= nwhole and it ends by whole_end[k - 1]). */
static bool peek_rejects(const peek_t *p, const fg__job_t *j)
{
    if (j->state != FG_JOB_PENDING || !(p->all_eligible || j->eligible_time <= p->now))
        return false;
    if (j->gpus <= FG_WHOLE_NODE_GPUS)
        return j->type < 0 && j->time_limit > p->lim[j->gpus];
    const int32_t k = j->gpus / FG_WHOLE_NODE_GPUS;
    return p->nwhole >= 0 && !(k <= p->nwhole && p->now + j->time_limit <= p->whole_end[k - 1]);
}

/* peek_rejects for every job of a run's summary b (conservatively: when it cannot
 * tell, no): each size's least time limit ends after its bound, the jobs of whole
 * nodes (whole_end only decreases along k) ask for more than nwhole or end after
 * whole_end at their fewest nodes; none is of one type on one node, not pending or not
 * eligible. */
static bool blk_rejects(const peek_t *p, const fg__qblk_t *b)
{
    if (b->other || (!p->all_eligible && b->elig > p->now))
        return false;
    for (uint32_t m = b->sizes; m; m &= m - 1) {
        const int g = __builtin_ctz(m);
        if (b->tl[g] <= p->lim[g])
            return false;
    }
    return !b->kmin || (p->nwhole >= 0 &&
                        !(b->kmin <= p->nwhole && p->now + b->tl[0] <= p->whole_end[b->kmin - 1]));
}

/* A reading of account i's queue: q jobs read from its cursor, pk GPUs walked before
 * the next (the account's and those of the jobs read). */
typedef struct peek_pos {
    int64_t q, pk;
} peek_pos_t;

/* The summary of run bn of account i's queue, made if stale. */
static const fg__qblk_t *run_summary(const peek_t *p, int32_t i, int32_t bn)
{
    const peek_acct_t *ac = &p->a[i];
    fg__queue_t *q = &p->s->members[ac->mem].q[p->o->band];
    assert(bn < q->nblk);
    if (!q->blk[bn].ok)
        fg__queue_blk_fill(p->s, q, bn);
    return &q->blk[bn];
}

/* "queue-runs": passes the rest of the run of FG__QBLK entries that holds r's next
 * entry when the run's summary refuses all its entries and the stop lies past them
 * (each job has a GPU at least); true when it did. Else *qe is where r reads job by
 * job to: the run's end, or cap. A run begun at the cursor is read so only when it
 * ends by the queue's end (every entry in it a job's slot): the entries from the
 * cursor on are live, and live since the summary was made (an entry joins the live
 * part only by a write, which leaves it stale), so it holds for them as for a whole
 * run; the entries before the head may have moved on, which errs only towards reading
 * job by job. Only their GPUs are added, no more than the run's. A whole run is read
 * so only within cap. */
static bool run_pass(const peek_t *p, int32_t i, int64_t cap, int64_t stop, peek_pos_t *r,
                     int64_t *qe)
{
    const peek_acct_t *ac = &p->a[i];
    /* (unsigned: the cursor and q are never negative) */
    const uint64_t at = (uint64_t)ac->cur + (uint64_t)r->q, off = at % FG__QBLK;
    const int64_t run_end = r->q + FG__QBLK - (int64_t)off; /* (in r's jobs read) */
    const bool whole = off == 0;
    const bool usable =
        whole ? run_end <= cap : (int64_t)(at - off) + FG__QBLK <= (int64_t)ac->cur + ac->left;
    *qe = whole ? (usable ? run_end : cap) : (run_end < cap ? run_end : cap);
    if (!usable)
        return false;
    const fg__qblk_t *b = run_summary(p, i, (int32_t)(at / FG__QBLK));
    if (r->pk + b->gpus > stop || !blk_rejects(p, b))
        return false;
    if (whole) {
        r->q += FG__QBLK;
        r->pk += b->gpus;
    } else {
        const int32_t *v = ac->qv + ac->cur;
        for (; r->q < *qe; r->q++)
            r->pk += p->s->jobs[v[r->q]].gpus;
    }
    return true;
}

/* Moves r past the jobs of account i refused without asking, up to cap jobs and until
 * stop GPUs walked; true when it stopped at a job to ask about. */
static bool skip_refused(const peek_t *p, int32_t i, int64_t cap, int64_t stop, peek_pos_t *r)
{
    const peek_acct_t *ac = &p->a[i];
    const int32_t *v = ac->qv + ac->cur;
    const bool runs = fg__sc(p->s, FG__SC_QUEUE_RUNS);
    while (r->q < cap && r->pk < stop) {
        int64_t qe = cap;
        if (runs && run_pass(p, i, cap, stop, r, &qe))
            continue;
        for (; r->q < qe; r->q++) {
            if (r->pk >= stop)
                return false;
            const fg__job_t *j = &p->s->jobs[v[r->q]];
            if (!peek_rejects(p, j))
                return true;
            r->pk += j->gpus;
        }
    }
    return false;
}

/* ------------------------------------------------------------------ finding */

/* Does an account's job read with p GPUs walked before it come after the best job
 * found (key bk): its key (fg_fair_key, as the order computes it) larger, or equal
 * with an index after the best's (`tie`)? */
static bool key_after(double base, double w, double bk, bool tie, int64_t p)
{
    const double key = fg_fair_key(base, p, w);
    return key > bk || (key == bk && tie);
}

/* The least p >= p0 for which key_after holds: the key only grows with p (base + p and
 * the division by w > 0 are monotone), so every job read with at least that many GPUs
 * walked before it comes after the best, and none with fewer. From a guess (the
 * inverse of the key), checked and moved by exact key_after answers: a step back while
 * it still holds, else doubling and bisection. */
int64_t fg__key_stop(double base, double w, double bk, bool tie, int64_t p0)
{
    if (key_after(base, w, bk, tie, p0))
        return p0;
    const int64_t far = (int64_t)1 << 40;
    const double g = bk * w - base;
    int64_t lo = p0, hi;
    if (!(g < (double)(p0 + far)))
        hi = p0 + far;
    else if (g < (double)p0 + 1.0)
        hi = p0 + 1;
    else
        hi = (int64_t)g + 1;
    while (!key_after(base, w, bk, tie, hi)) { /* (not after at hi: past it) */
        lo = hi;
        if (hi - p0 > far)
            return INT64_MAX; /* (no job of the band is that far) */
        hi += hi - p0 + 1;
    }
    /* !key_after at lo, key_after at hi */
    for (int k = 0; k < 2 && hi - lo > 1; k++) { /* the guess is mostly a step or two off */
        if (!key_after(base, w, bk, tie, hi - 1))
            return hi;
        hi--;
    }
    while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (key_after(base, w, bk, tie, mid))
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

/* The best job found so far by peek_find: its account (local index, -1: none yet), its
 * place in that account's queue and its key, and where its account is in the reading
 * order. */
typedef struct peek_best {
    int32_t i;
    int64_t q;
    double key;
    int32_t at;
} peek_best_t;

/* peek_find's reading of account i, k-th in the reading order: from its cursor, at
 * most `limit` jobs deep (a job's place in the merge is at least its place in its
 * account's queue), while its keys may still come before the best job found; the first
 * job it would take becomes the best. cnt[i], pkc[i]: the jobs read before its stop,
 * and the GPUs walked past them. */
static void account_read(peek_t *p, peek_best_t *best, int32_t i, int32_t k)
{
    peek_acct_t *ac = &p->a[i];
    const double w = p->o->a_w[ac->acct], base = p->o->a_base[ac->acct];
    const int64_t cap = ac->left < p->limit ? ac->left : p->limit;
    const int64_t stop =
        best->i >= 0 ? fg__key_stop(base, w, best->key, i > best->i, ac->picked) : INT64_MAX;
    peek_pos_t r = {0, ac->picked};
    while (skip_refused(p, i, cap, stop, &r)) {
        const int32_t slot = ac->qv[ac->cur + r.q];
        if (p->accept(p->s, slot, p->ctx)) {
            *best = (peek_best_t){i, r.q, p->n > 1 ? fg_fair_key(base, r.pk, w) : 0.0, k};
            break;
        }
        r.pk += p->s->jobs[slot].gpus;
        r.q++;
    }
    ac->cnt = r.q;
    ac->pkc = r.pk;
}

/* merge_place: account i (read before the best's) read again from its cursor up to its
 * first job not before the best (it may have read past it); returns its jobs before
 * the best. */
static int64_t recount(peek_t *p, const peek_best_t *b, int32_t i)
{
    peek_acct_t *ac = &p->a[i];
    const double w = p->o->a_w[ac->acct], base = p->o->a_base[ac->acct];
    const int32_t *v = ac->qv + ac->cur;
    int64_t pk = ac->picked, q = 0;
    for (; q < ac->cnt && !key_after(base, w, b->key, i > b->i, pk); q++)
        pk += p->s->jobs[v[q]].gpus;
    ac->cnt = q;
    ac->pkc = pk;
    return q;
}

/* The best job's place in the merge, at most limit: its account's jobs before it, and
 * those of every other account (the accounts read after it stopped at their first job
 * not before it; those read before are counted again). cnt[] ends as each account's
 * jobs before it unless the place reaches limit. */
static int64_t merge_place(peek_t *p, const peek_best_t *b, const int32_t *ord)
{
    p->a[b->i].cnt = b->q;
    int64_t rank = b->q;
    for (int32_t k = b->at + 1; k < p->n; k++)
        rank += p->a[ord[k]].cnt;
    for (int32_t k = 0; k < b->at && rank < p->limit; k++)
        rank += recount(p, b, ord[k]);
    return rank < p->limit ? rank : p->limit;
}

/* fg__order_peek without its merge: the place r in the merge of the first job it would
 * take, when r < limit, with cnt[i] the jobs of account i before it; else `limit`. The
 * accounts are read the account of the last job found first, then by index (the
 * answer does not depend on the order: a good first guess only bounds the others'
 * reading sooner; after it, this order reads about as many jobs as by key, without
 * ordering them). */
static int64_t peek_find(peek_t *p)
{
    int32_t ord[PEEK_MAX], no = 0;
    for (int32_t i = 0; i < p->n; i++)
        if (p->a[i].mem == p->s->peek_hint)
            ord[no++] = i;
    for (int32_t i = 0; i < p->n; i++)
        if (p->a[i].mem != p->s->peek_hint)
            ord[no++] = i;
    peek_best_t best = {.i = -1};
    for (int32_t k = 0; k < p->n; k++)
        account_read(p, &best, ord[k], k);
    if (best.i < 0)
        return p->limit; /* (the band holds more than `limit`) */
    p->s->peek_hint = p->a[best.i].mem;
    return merge_place(p, &best, ord);
}

/* After peek_find: the jobs before the one taken to skipped[], account by account,
 * and p's accounts past them. */
static void peek_pass_found(peek_t *p, int32_t *skipped)
{
    int64_t c = 0;
    for (int32_t i = 0; i < p->n; i++) {
        memcpy(skipped + c, p->a[i].qv + p->a[i].cur, sizeof *skipped * (size_t)p->a[i].cnt);
        c += p->a[i].cnt;
        p->a[i].cur += (int32_t)p->a[i].cnt;
        p->a[i].left -= (int32_t)p->a[i].cnt;
        p->a[i].picked = p->a[i].pkc;
    }
}

/* ------------------------------------------------------------------ merging */

/* fg__order_peek with move_all: the merge itself, job by job, on a copy of the account
 * order (sorted, the smallest last, as the order's few accounts), p's accounts moved
 * along; the jobs passed go to skipped[]. Returns the jobs before the first taken,
 * `limit` when none of the first `limit` is. */
static int64_t peek_merge(peek_t *p, int32_t *skipped)
{
    fg__hk_t h[PEEK_MAX];
    int32_t n = p->n;
    for (int32_t i = 0; i < n; i++)
        h[i] = (fg__hk_t){p->a[i].key, i, -1}; /* (ties compare local, so account, indices) */
    fg__hk_sort_last(h, n);
    for (int64_t count = 0; count < p->limit; count++) {
        assert(n > 0); /* (the band holds more than `limit`) */
        const int32_t i = h[n - 1].id;
        const int32_t slot = p->a[i].qv[p->a[i].cur];
        const fg__job_t *j = &p->s->jobs[slot];
        if (!peek_rejects(p, j) && p->accept(p->s, slot, p->ctx))
            return count;
        skipped[count] = slot;
        p->a[i].cur++;
        p->a[i].picked += j->gpus;
        if (--p->a[i].left == 0)
            n--;
        else if (n > 1)
            fg__acct_sink(
                h, n,
                fg_fair_key(p->o->a_base[p->a[i].acct], p->a[i].picked, p->o->a_w[p->a[i].acct]));
    }
    return p->limit;
}

/* wfq: the number r of jobs order o gives before the first one that accept() takes,
 * looking at most `limit` jobs ahead; `limit` when none of the next `limit` is taken;
 * -1 when it cannot tell cheaply (not wfq, an account with jobs of two or more members
 * left in the band, the band ending within reach, more than PEEK_MAX accounts). A
 * pending, eligible job that cannot fit is not taken without asking: of any type on
 * one node, when it would end after fit_end[g]; of k whole nodes, with nwhole >= 0,
 * unless k <= nwhole and it ends by whole_end[k - 1] (accept answers the same,
 * exactly). The jobs not taken go to skipped[0..r) (room for `limit`). When one is
 * taken, o moves past the r others (as r calls of fg__order_next would), so that it
 * gives that job next; else o moves past the `limit` jobs with `move_all`, and stays
 * without (skipped[] then left unset). */
int64_t fg__order_peek(fg_sched_t *s, fg__order_t *o, int64_t limit, const fg_time_t *fit_end,
                       const fg_time_t *whole_end, int32_t nwhole, fg_time_t now,
                       bool (*accept)(fg_sched_t *, int32_t, void *), void *ctx, int32_t *skipped,
                       bool move_all)
{
    if (!fg__keyed(s) || o->band < 0 || o->nah <= 0 || o->nah > PEEK_MAX)
        return -1;
    peek_acct_t acc[PEEK_MAX]; /* (filled by peek_accounts) */
    peek_t p = {.s = s,
                .o = o,
                .limit = limit,
                .now = now,
                .whole_end = whole_end,
                .nwhole = nwhole,
                .accept = accept,
                .ctx = ctx,
                .a = acc};
    if (!peek_accounts(&p) || peek_total(&p) <= limit)
        return -1; /* (an account of two members, or the band may end within reach) */
    peek_limits(&p, fit_end);
    if (move_all) {
        const int64_t r = peek_merge(&p, skipped);
        peek_move(&p);
        return r;
    }
    const int64_t r = peek_find(&p);
    if (r == limit)
        return limit;
    peek_pass_found(&p, skipped);
    peek_move(&p);
    return r;
}
