/*
 * lookahead.c - TODO banner
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* o as after the picks of fg__order_peek: the same cursors, counts and keys; its account
 * order begun again (the order of picks depends only on the keys and account indices). */
static void peek_move(fg_sched_t *s, fg__order_t *o, int32_t n0, const int32_t *acct,
                      const int32_t *mem, const int32_t *cur, const int32_t *left,
                      const int64_t *picked)
{
    int32_t nah = 0;
    for (int32_t k = 0; k < n0; k++) {
        const int32_t ak = acct[k], m = mem[k];
        o->cursor[m] = cur[k];
        o->m_picked[m] += picked[k] - o->a_picked[ak];
        o->a_picked[ak] = picked[k];
        o->m_left[m] = left[k];
        o->a_left[ak] = left[k];
        if (left[k] == 0)
            o->mh_cnt[ak] = 0;
        else
            o->ah[nah++] = (fg__hk_t){fg__acct_key(s, o, ak), ak, fg__acct_one(s, o, ak, m)};
    }
    fg__acct_order_begin(o, nah);
}

enum { FG__PEEK_MAX = 64 }; /* most accounts fg__order_peek merges */

/* peek_rejects' bounds, made once per look: lim[g] = fit_end[g] - now (a job of g GPUs
 * ends after fit_end[g] iff its time limit is above it; time limits are at least 1, so
 * "none fits" is 0 and "any end" INT64_MAX), and whether every pending job is eligible
 * (no backoff ends after now: s->max_eligible), so that eligibility is not read. */
typedef struct peek_test {
    fg_time_t lim[FG_WHOLE_NODE_GPUS + 1];
    bool all_eligible;
} peek_test_t;

static void peek_test_fill(const fg_sched_t *s, const fg_time_t *fit_end, fg_time_t now,
                           peek_test_t *pt)
{
    pt->lim[0] = 0;
    for (int g = 1; g <= FG_WHOLE_NODE_GPUS; g++)
        pt->lim[g] = fit_end[g] == FG__INF     ? INT64_MAX
                     : fit_end[g] == INT64_MIN ? 0
                                               : fit_end[g] - now;
    pt->all_eligible = s->max_eligible <= now;
}

/* fg__order_peek's test without asking: job j is pending, eligible and cannot fit (of any
 * type on one node: it ends after fit_end[g]; of k whole nodes, with nwhole >= 0: unless
 * k <= nwhole and it ends by whole_end[k - 1]). Any other job is asked about. */
static inline bool peek_rejects(const fg__job_t *j, const peek_test_t *pt,
                                const fg_time_t *whole_end, int32_t nwhole, fg_time_t now)
{
    return j->state == FG_JOB_PENDING && (pt->all_eligible || j->eligible_time <= now) &&
           (j->gpus <= FG_WHOLE_NODE_GPUS
                ? j->type < 0 && j->time_limit > pt->lim[j->gpus]
                : nwhole >= 0 &&
                      !(j->gpus / FG_WHOLE_NODE_GPUS <= nwhole &&
                        now + j->time_limit <= whole_end[j->gpus / FG_WHOLE_NODE_GPUS - 1]));
}

/* peek_rejects for every job of a queue's summary b (conservatively: when it cannot
 * tell, no): each size's least time limit ends after fit_end, the jobs of whole nodes
 * (whole_end only decreases along k) ask for more than nwhole or end after whole_end at
 * their fewest nodes; none is of one type on one node, not pending or not eligible. */
static inline bool blk_rejects(const fg__qblk_t *b, const peek_test_t *pt,
                               const fg_time_t *whole_end, int32_t nwhole, fg_time_t now)
{
    if (b->other || (!pt->all_eligible && b->elig > now))
        return false;
    for (uint32_t m = b->sizes; m; m &= m - 1) {
        const int g = __builtin_ctz(m);
        if (b->tl[g] <= pt->lim[g])
            return false;
    }
    return !b->kmin ||
           (nwhole >= 0 && !(b->kmin <= nwhole && now + b->tl[0] <= whole_end[b->kmin - 1]));
}

/* For fg__order_peek without its merge: the place r in the merge of the first job it
 * would take (peek_rejects refuses it and accept takes it), when r < limit, with cnt[i]
 * the jobs of local account i before it (cnt[i] of them first in its queue); else
 * `limit` (none of the first `limit` is taken). The merge gives the jobs sorted by (key
 * at their pick, account index), an account's keys growing along its queue; so its
 * first job taken is, of each account's first job taken, the one with the smallest
 * (key at its pick, account index), and its place in the merge is the number of jobs of
 * every account before it in that order. Each account's queue is read from its cursor
 * only while its keys may still come before the best such job found so far, and at most
 * `limit` jobs deep (a job's place in the merge is at least its place in its account's
 * queue); with none found, none of the first `limit` is taken (the band holds more than
 * `limit`). The keys are computed as the merge computes them. */
/* Does an account's job read with p GPUs picked before it come after the best job found
 * (key bk, local index bi): its key (base + p over w, as acct_key computes it) larger, or
 * equal with an index after bi (`tie`)? */
static inline bool key_after(double base, double w, double bk, bool tie, int64_t p)
{
    const double x = base + (double)p;
    const double key = w == 1.0 ? x : x / w;
    return key > bk || (key == bk && tie);
}

/* The least p >= p0 for which key_after holds: the key only grows with p (base + p and the
 * division by w > 0 are monotone), so every job read with at least that many GPUs picked
 * before it comes after the best, and none with fewer. From a guess (the inverse of the
 * key), checked and moved by exact key_after answers: a step back while it still holds,
 * else doubling and bisection. */
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

static int64_t peek_find(fg_sched_t *s, const fg__order_t *o, int64_t limit, const peek_test_t *pt,
                         const fg_time_t *whole_end, int32_t nwhole, fg_time_t now, int32_t n0,
                         const int32_t *acct, const int32_t *mem, const int32_t *const *qv,
                         const int32_t *cur, const int32_t *left, const int64_t *picked,
                         bool (*accept)(fg_sched_t *, int32_t, void *), void *ctx, int64_t *cnt,
                         int64_t *pkc)
{
    int32_t bi = -1, bk_at = 0;
    int64_t bp = 0;
    double bk = 0.0;
    /* the account of the last job found first, then by account index (the answer does not
     * depend on the order: a good first guess only bounds the others' reading sooner;
     * after it, this order reads about as many jobs as by key, without ordering them) */
    int32_t ord[FG__PEEK_MAX], no = 0;
    for (int32_t k = 0; k < n0; k++)
        if (mem[k] == s->peek_hint)
            ord[no++] = k;
    for (int32_t k = 0; k < n0; k++)
        if (mem[k] != s->peek_hint)
            ord[no++] = k;
    for (int32_t k = 0; k < n0; k++) {
        const int32_t i = ord[k], a = acct[i];
        const int64_t cap = left[i] < limit ? left[i] : limit;
        const double w = o->a_w[a], base = o->a_base[a];
        const int32_t *v = qv[i] + cur[i];
        int64_t pk = picked[i], q = 0;
        /* from `stop` GPUs picked on, this job and the rest of the account come after the
         * best (fg__key_stop) */
        const int64_t stop = bi >= 0 ? fg__key_stop(base, w, bk, i > bi, pk) : INT64_MAX;
        const fg__job_t *const jobs = s->jobs;
        fg__queue_t *qq = &s->members[mem[i]].q[o->band];
        /* (read once: the summaries' fill writes only their contents) */
        fg__qblk_t *const blk = qq->blk;
        const bool plain = !fg__sc(s, FG__SC_QUEUE_RUNS);
        for (; q < cap && pk < stop; q++) {
            /* the jobs it refuses without asking: a loop with no call, its bounds kept;
             * a run of FG__QBLK entries at once when its summary refuses them all and the
             * stop lies past them (each job has a GPU at least) */
            while (q < cap && pk < stop) {
                /* job by job up to the next run (or through a run not skipped) */
                int64_t qe = cap;
                if (!plain) {
                    /* (unsigned: the cursor and q are never negative) */
                    const uint64_t at = (uint64_t)cur[i] + (uint64_t)q, off = at % FG__QBLK;
                    if (off) {
                        qe = q + FG__QBLK - (int64_t)off < cap ? q + FG__QBLK - (int64_t)off : cap;
                        /* begun inside a run (at the cursor): when the run's summary
                         * refuses all its entries and the stop lies past them, the ones
                         * from here on are refused too, and only their GPUs are added
                         * (they are no more than the run's). The run must end by the
                         * queue's end (cursor + left: every entry in it written, a job's
                         * slot). Those from here on are live, and live since the summary
                         * was made (an entry joins the live part only by a write, which
                         * leaves it stale), so it holds for them as for a whole run read;
                         * the entries before the head may have moved on, which errs only
                         * towards reading job by job. */
                        const int32_t bn = (int32_t)(at / FG__QBLK);
                        if ((int64_t)(at - off) + FG__QBLK <= (int64_t)cur[i] + left[i]) {
                            if (!blk[bn].ok)
                                fg__queue_blk_fill(s, qq, bn);
                            const fg__qblk_t *b = &blk[bn];
                            if (pk + b->gpus <= stop &&
                                blk_rejects(b, pt, whole_end, nwhole, now)) {
                                for (; q < qe; q++)
                                    pk += jobs[v[q]].gpus;
                                continue;
                            }
                        }
                    } else if (q + FG__QBLK <= cap) {
                        const int32_t bn = (int32_t)(at / FG__QBLK);
                        if (!blk[bn].ok)
                            fg__queue_blk_fill(s, qq, bn);
                        const fg__qblk_t *b = &blk[bn];
                        if (pk + b->gpus <= stop && blk_rejects(b, pt, whole_end, nwhole, now)) {
                            q += FG__QBLK;
                            pk += b->gpus;
                            continue;
                        }
                        qe = q + FG__QBLK;
                    }
                }
                /* (each exit says why, so that the loop's tests are not made again) */
                for (; q < qe; q++) {
                    if (pk >= stop)
                        goto stopped;
                    const fg__job_t *jq = &jobs[v[q]];
                    if (!peek_rejects(jq, pt, whole_end, nwhole, now))
                        goto ask;
                    pk += jq->gpus;
                }
            }
            break; /* (q reached cap or pk reached stop) */
        ask:;
            const fg__job_t *j = &jobs[v[q]];
            if (accept(s, v[q], ctx)) {
                const double x = base + (double)pk;
                bi = i;
                bp = q;
                bk = n0 > 1 ? (w == 1.0 ? x : x / w) : 0.0;
                bk_at = k;
                break;
            }
            pk += j->gpus;
        }
    stopped:
        cnt[i] = q; /* (jobs read before its stop) */
        pkc[i] = pk;
    }
    if (bi < 0)
        return limit;
    s->peek_hint = mem[bi];
    /* the best job's place in the merge: the accounts read after it stopped at the first
     * job not before it; those read before may have read past it */
    cnt[bi] = bp;
    int64_t rank = bp;
    for (int32_t k = bk_at + 1; k < n0; k++)
        rank += cnt[ord[k]];
    for (int32_t k = 0; k < bk_at && rank < limit; k++) {
        const int32_t i = ord[k], a = acct[i];
        const double w = o->a_w[a], base = o->a_base[a];
        const int32_t *v = qv[i] + cur[i];
        int64_t pk = picked[i], q = 0;
        for (; q < cnt[i]; q++) {
            const double x = base + (double)pk;
            const double key = w == 1.0 ? x : x / w;
            if (!(key < bk || (key == bk && i < bi)))
                break;
            pk += s->jobs[v[q]].gpus;
        }
        cnt[i] = q;
        pkc[i] = pk;
        rank += q;
    }
    return rank < limit ? rank : limit;
}

/* wfq: the number r of jobs order o gives before the first one that accept() takes,
 * looking at most `limit` jobs ahead; `limit` when none of the next `limit` is taken; -1
 * when it cannot tell cheaply (not wfq, an account with jobs of two or more members left
 * in the band, the band ending within reach, many accounts). The jobs not taken go to
 * skipped[0..r) (room for `limit`). When one is taken, o moves past the r others (as r
 * calls of fg__order_next would), so that it gives that job next; else o moves past the
 * `limit` jobs with `move_all`, and stays without. A pending, eligible job that cannot
 * fit is not taken without asking: of any type on one node, when it would end after
 * fit_end[g]; of k whole nodes, with nwhole >= 0, unless k <= nwhole and it ends by
 * whole_end[k - 1] (accept answers the same, exactly). Each
 * account's keys only grow along its jobs (a pick adds its GPUs), so o gives the jobs of
 * the band sorted by (key at their pick, account index): the same merge, on a copy of
 * the account order (sorted: at most FG__PEEK_MAX accounts) and with the account's one member's
 * queue read in place. Without move_all, the answer comes from peek_find instead (the same r and
 * moves; skipped[] account by account, and left unset when r is `limit`). */
int64_t fg__order_peek(fg_sched_t *s, fg__order_t *o, int64_t limit, const fg_time_t *fit_end,
                       const fg_time_t *whole_end, int32_t nwhole, fg_time_t now,
                       bool (*accept)(fg_sched_t *, int32_t, void *), void *ctx, int32_t *skipped,
                       bool move_all)
{
    enum { PEEK_MAX = FG__PEEK_MAX };
    if (s->cfg.policy != FG_POLICY_WFQ || o->band < 0 || o->nah <= 0 || o->nah > PEEK_MAX)
        return -1;
    fg__hk_t hs[PEEK_MAX + 1], *const h = hs + 1; /* (h[-1]: a sentinel, fg__acct_sink) */
    h[-1] = FG__HK_SENTINEL;
    int32_t cur[PEEK_MAX], left[PEEK_MAX], mem[PEEK_MAX], acct[PEEK_MAX];
    const int32_t *qv[PEEK_MAX]; /* each account's one member's queue in the band */
    int64_t picked[PEEK_MAX];
    const int32_t n0 = o->nah;
    int64_t total = 0;
    /* the order's entries by account ascending, so that local indices compare as account
     * indices (with two or more, each entry's key is its account's now: every pick since
     * the band began had another entry to compare with) */
    fg__hk_t e[PEEK_MAX];
    for (int32_t i = 0; i < n0; i++) {
        const fg__hk_t x = o->ah[i];
        int32_t q = i;
        while (q > 0 && e[q - 1].id > x.id) {
            e[q] = e[q - 1];
            q--;
        }
        e[q] = x;
    }
    for (int32_t i = 0; i < n0; i++) {
        const int32_t a = e[i].id;
        int32_t m = e[i].one; /* (alone in its account: its heap holds it) */
        if (m < 0) {
            if (o->mh_cnt[a] != 1)
                return -1;
            m = o->mhk[o->mh_off[a]].id;
        }
        acct[i] = a;
        mem[i] = m;
        qv[i] = o->qv[m];
        cur[i] = o->cursor[m];
        left[i] = (int32_t)o->a_left[a]; /* (m_left: fg__order_t) */
        picked[i] = o->a_picked[a];
        total += left[i];
    }
    if (total <= limit)
        return -1; /* the band may end within reach */
    peek_test_t pt;
    peek_test_fill(s, fit_end, now, &pt);
    if (!move_all) { /* without merging: the jobs before the one taken, account by account */
        int64_t cnt[PEEK_MAX], pkc[PEEK_MAX];
        const int64_t r = peek_find(s, o, limit, &pt, whole_end, nwhole, now, n0, acct, mem, qv,
                                    cur, left, picked, accept, ctx, cnt, pkc);
        if (r == limit)
            return limit;
        int64_t c = 0;
        for (int32_t i = 0; i < n0; i++) { /* (pkc: picked past its cnt[i] jobs) */
            memcpy(skipped + c, qv[i] + cur[i], sizeof *skipped * (size_t)cnt[i]);
            c += cnt[i];
            cur[i] += (int32_t)cnt[i];
            left[i] -= (int32_t)cnt[i];
            picked[i] = pkc[i];
        }
        peek_move(s, o, n0, acct, mem, cur, left, picked);
        return r;
    }
    double base[PEEK_MAX], wt[PEEK_MAX]; /* (the merge's keys, per local index) */
    for (int32_t i = 0; i < n0; i++) {
        base[i] = o->a_base[acct[i]];
        wt[i] = o->a_w[acct[i]];
        /* (the entry's id is the local index; ties compare account indices) */
        h[i] = (fg__hk_t){n0 > 1 ? e[i].key : 0.0, i, -1};
    }
    /* sorted by (key, account index), the smallest last, as the order's few accounts */
    int32_t n = n0;
    fg__acct_sort(h, n);
    for (int64_t count = 0; count < limit; count++) {
        const int32_t i = h[n - 1].id;
        const int32_t slot = qv[i][cur[i]];
        const fg__job_t *j = &s->jobs[slot];
        if (!peek_rejects(j, &pt, whole_end, nwhole, now) && accept(s, slot, ctx)) {
            peek_move(s, o, n0, acct, mem, cur, left, picked);
            return count;
        }
        skipped[count] = slot;
        cur[i]++;
        picked[i] += j->gpus;
        if (--left[i] == 0) {
            n--;
        } else if (n > 1) {
            const double x = base[i] + (double)picked[i];
            fg__acct_sink(h, n, wt[i] == 1.0 ? x : x / wt[i]); /* acct_key */
        }
    }
    if (move_all)
        peek_move(s, o, n0, acct, mem, cur, left, picked);
    return limit;
}
