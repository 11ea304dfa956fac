/*
 * order.h - the structures of the plan order (order.c, lookahead.c) and of the queues
 * of pending jobs it reads (queue.c), shared by the files of src/core/ through
 * internal.h.
 *
 * Each member has one queue per band, sorted by (submit time, id): fg__head_before is
 * that rule, written once. The plan order (fg__order_t) walks the queues of one band
 * at a time; under wfq it keeps the accounts with jobs left in the band in an account
 * order by key (fg__hk_t entries: sorted with the smallest last when few, else a heap)
 * and, inside an account of several members, a heap of its members by key.
 *
 * Example: queue v = [7, 3, 9], head 1, len 3 holds slots 3 and 9 (slot 7 started
 * from the head); a job submitted before slot 3's goes to v[0] (head 0), a later one
 * after slot 9 (len 4).
 */
#ifndef FG_CORE_ORDER_H
#define FG_CORE_ORDER_H

#include "fairgpu/core.h"
#include "fairgpu/fairshare.h"

#include <stdbool.h>
#include <stdint.h>

/* A summary of the FG__QBLK queue entries v[b * FG__QBLK ..] (queue.c, for the look
 * ahead's reading, lookahead.c): valid (`ok`) while none of those entries was written
 * since it was made. (Their jobs do not change meanwhile: a job that starts leaves its
 * queue at the end of the walk, and the reading runs only in walks that started
 * nothing.) */
#define FG__QBLK 16
typedef struct fg__qblk {
    /* [g], g = 1..8: the least time limit of its jobs of g GPUs of any type (bit g of
     * `sizes`: there is one); [0]: of its jobs of whole nodes (kmin > 0: there is one,
     * kmin the fewest nodes one asks for) */
    fg_time_t tl[FG_WHOLE_NODE_GPUS + 1];
    fg_time_t elig; /* the latest eligible_time */
    int32_t gpus;   /* the GPUs of its jobs, summed */
    int32_t kmin;
    uint32_t sizes;
    bool ok;
    bool other; /* a job not pending, or of one GPU type on one node */
} fg__qblk_t;

/* A queue of pending job slots sorted by (submit_time, id); live part v[head..len). */
typedef struct fg__queue {
    int32_t *v;
    int32_t head, len, cap;
    fg__qblk_t *blk; /* nblk summaries, blk[b] of v[b * FG__QBLK ..] */
    int32_t nblk;
} fg__queue_t;

/* A job's place in its queue: (submit time, id); ids are distinct, so two jobs are
 * never equal. */
typedef struct fg__head {
    fg_time_t submit_time;
    fg_job_id_t id;
} fg__head_t;

/* The order of pending jobs inside a queue (and of the oldest-first policies): the
 * earlier submit time first, then the smaller id. */
static inline bool fg__head_before(fg__head_t a, fg__head_t b)
{
    return a.submit_time < b.submit_time || (a.submit_time == b.submit_time && a.id < b.id);
}

/* An entry of a wfq key heap: an account or member and its current key; in the account
 * order, `one` is the account's member when it has no other (else -1; unused in the
 * member heaps). */
typedef struct fg__hk {
    double key;
    int32_t id, one;
} fg__hk_t;

/* The wfq order of two entries: the smaller key first, then the smaller index. */
static inline bool fg__hk_before(fg__hk_t a, fg__hk_t b)
{
    return a.key < b.key || (a.key == b.key && a.id < b.id);
}

/* a comes after b in the wfq order: the order of a sorted account order read from its
 * end (the smallest last) */
static inline bool fg__hk_after(fg__hk_t a, fg__hk_t b)
{
    return fg__hk_before(b, a);
}

/* One insertion step: h[0..k) is sorted by `first` (which says whether its first
 * argument goes first), and v goes in among them, those it goes before each moved up
 * one, so that h[0..k] is sorted. */
static inline void fg__hk_insert(fg__hk_t *h, int32_t k, fg__hk_t v,
                                 bool (*first)(fg__hk_t, fg__hk_t))
{
    while (k > 0 && first(v, h[k - 1])) {
        h[k] = h[k - 1];
        k--;
    }
    h[k] = v;
}

/* The sorted account order's step after its last entry's key grew to `key`: that entry
 * moves down past those it now comes after, so that ah[0..n) stays sorted with the
 * smallest last. A pick moves it a few places (the keys stay close), fewer comparisons
 * than a heap's sift of a few levels; with many accounts a pick might move it past many
 * (many equal keys), so many are kept as a heap. Measured on the Philly replay under
 * wfq: always a heap takes 10 % more instructions. */
#define FG__ACCT_SORTED 32
static inline void fg__acct_sink(fg__hk_t *ah, int32_t n, double key)
{
    fg__hk_insert(ah, n - 1, (fg__hk_t){key, ah[n - 1].id, ah[n - 1].one}, fg__hk_after);
}

/* Per account or member: the last inputs of its usage term and the result (order.c,
 * base_at: the term is recomputed only when one changed). */
typedef struct fg__base_memo {
    double usage;
    fg_time_t at, now;
    int32_t running;
    double base;
} fg__base_memo_t;

/* The walk of pending jobs in plan order (see order.c). */
typedef struct fg__order {
    int band;
    int32_t *cursor;    /* per member: next index in q[band] */
    const int32_t **qv; /* per member: q[band].v, set as the band begins (the queues
                         * do not change while an order is in use) */
    /* per member: GPUs walked this pass, jobs left in the band; not kept for a member
     * alone in its account (`one` in the account order) by the wfq steps, nor its heap
     * of one (mhk, mh_cnt), nor its GPUs walked set up by fg__order_prepare: its
     * account's are the same (a member's are read only in a heap of two or more) */
    int64_t *m_picked;
    int64_t *a_picked; /* per account */
    int32_t *m_left;
    int64_t *a_left;         /* per account: jobs left in band */
    double *m_base, *a_base; /* usage / tau + α x running GPUs, at the start */
    double *m_w, *a_w;       /* weights */
    int32_t rr_pos;
    double run_w; /* α: weight of the running GPUs in a key */
    /* wfq: the accounts with jobs left in the band, with their keys, by key, then index:
     * sorted with the smallest last when a_sorted (at most FG__ACCT_SORTED of them as the
     * band began: the inline step, fg__order_next), else a heap */
    fg__hk_t *ah;
    int32_t nah;   /* its size; also the size of the member heap (other policies) */
    int32_t nfast; /* nah when the accounts are sorted; else 0 (also outside wfq bands) */
    bool a_sorted;
    fg__hk_t *mhk; /* wfq: per-account heaps of members at mh_off[a], with their keys */
    int32_t *mh;   /* fifo, priority, las: one heap of members */
    int32_t *mh_off, *mh_n, *mh_cnt; /* per account: offset, members, heap size */
    int32_t *members_by_acct;
    fg__head_t *m_head;     /* fifo, priority, las: per member in the heap, its head job */
    int32_t *act_a, *act_m; /* wfq: the accounts and members with pending jobs, ascending */
    int32_t nact_a, nact_m;
    /* sizes the arrays above were made for, and per account / member the memo of its
     * usage term (every order of a scheduler uses the memo of s->it) */
    size_t cap_m, cap_a;
    fg__base_memo_t *a_memo, *m_memo;
    bool grp_ok;           /* members_by_acct, mh_off, mh_n hold the grouping of */
    size_t grp_na, grp_nm; /* that many accounts and members */
    bool grp_alone;        /* (and no account has two members or more) */
} fg__order_t;

/* Account a's wfq key in o: fg_fair_key of its usage term, GPUs walked and weight. */
static inline double fg__acct_key(const fg__order_t *o, int32_t a)
{
    return fg_fair_key(o->a_base[a], o->a_picked[a], o->a_w[a]);
}

/* The sorted account order (a_sorted) after a pick of its last entry, account a: out of
 * it when a has no job left in the band, else moved down by its new key (the key of an
 * order of one is never compared). */
static inline void fg__acct_sorted_after_pick(fg__order_t *o, int32_t a)
{
    if (--o->a_left[a] == 0)
        o->nah = --o->nfast;
    else if (o->nah > 1)
        fg__acct_sink(o->ah, o->nah, fg__acct_key(o, a));
}

/* order.c: sets o up for a walk at `now` (o zeroed the first time); fg__order_next
 * (internal.h) gives its jobs; fg__order_free frees its arrays */
void fg__order_prepare(fg_sched_t *s, fg__order_t *o, fg_time_t now);
int32_t fg__order_next_any(fg_sched_t *s, fg__order_t *o);
void fg__order_free(fg__order_t *o);
/* order.c: sift_down of a wfq key heap h[0..n) from i (by fg__hk_before) */
void fg__sift_key(fg__hk_t *h, int32_t n, int32_t i);
/* order.c: begins the account order over ah[0..n), with their keys: sorted with the
 * smallest last when at most FG__ACCT_SORTED, else a heap */
void fg__acct_order_begin(const fg_sched_t *s, fg__order_t *o, int32_t n);
/* order.c: the account order's `one` for account a with member m: m when it is the
 * account's only member (and "one-member" is on), else -1 */
int32_t fg__acct_one(const fg_sched_t *s, const fg__order_t *o, int32_t a, int32_t m);
/* order.c: sorts h[0..n) by fg__hk_before, the smallest last (insertion: n is small) */
void fg__hk_sort_last(fg__hk_t *h, int32_t n);

/* lookahead.c: see there; -1 when it cannot tell cheaply */
int64_t fg__order_peek(fg_sched_t *s, fg__order_t *o, int64_t limit, const fg_time_t *fit_end,
                       const fg_time_t *whole_end, int32_t nwhole, fg_time_t now,
                       bool (*accept)(fg_sched_t *, int32_t, void *), void *ctx, int32_t *skipped,
                       bool move_all);
/* lookahead.c: the least p >= p0 at which an account's key (base + p) / w comes after
 * (bk, and on a tie when `tie`); INT64_MAX if none within 2^40 of p0 */
int64_t fg__key_stop(double base, double w, double bk, bool tie, int64_t p0);

#endif
