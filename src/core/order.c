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
 *   round-robin          members take turns, one job each, in index order;
 *   wfq                  the account with the smallest key, then inside it the member
 *                        with the smallest key, then that member's oldest job.
 * A key is (U/τ + αR + P) / w: decayed usage over τ (the recent average GPU count),
 * α times the GPUs running at the start of the pass, and the GPUs of jobs already
 * walked in this pass, over the weight. With memory (half-life > 0) α = 1/2: running
 * GPUs count at once, so a burst of starts moves the key, but the memory term carries
 * the long-run error, so GPU-time converges to the weights even when the GPU count
 * does not divide by them (8 GPUs at 2:1 alternate 6:2 and 5:3 instead of locking at
 * 5:3, which α = 1 would do since U/τ tends to R). Without memory α = 1: the key is
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
    free(o->m_picked);
    free(o->a_picked);
    free(o->m_left);
    free(o->a_left);
    free(o->m_run0);
    free(o->a_run0);
    free(o->m_base);
    free(o->a_base);
    memset(o, 0, sizeof *o);
}

/* Usage as of `now` without changing the stored value (so that looking never changes
 * what a later pass computes). */
static double usage_at(const fg_sched_t *s, double u, fg_time_t at, int32_t running, fg_time_t now)
{
    fg__usage_advance(s, &u, &at, running, now);
    return u;
}

/* Prepares o for a walk at time `now`; o's arrays are sized for the current members
 * and accounts (o must be zeroed the first time). */
void fg__order_prepare(fg_sched_t *s, fg__order_t *o, fg_time_t now)
{
    size_t nm = s->nmembers ? s->nmembers : 1, na = s->naccounts ? s->naccounts : 1;
    o->cursor = realloc(o->cursor, nm * sizeof *o->cursor);
    o->m_picked = realloc(o->m_picked, nm * sizeof *o->m_picked);
    o->m_left = realloc(o->m_left, nm * sizeof *o->m_left);
    o->m_run0 = realloc(o->m_run0, nm * sizeof *o->m_run0);
    o->m_base = realloc(o->m_base, nm * sizeof *o->m_base);
    o->a_picked = realloc(o->a_picked, na * sizeof *o->a_picked);
    o->a_left = realloc(o->a_left, na * sizeof *o->a_left);
    o->a_run0 = realloc(o->a_run0, na * sizeof *o->a_run0);
    o->a_base = realloc(o->a_base, na * sizeof *o->a_base);
    if (!o->cursor || !o->m_picked || !o->m_left || !o->m_run0 || !o->m_base || !o->a_picked ||
        !o->a_left || !o->a_run0 || !o->a_base)
        abort();
    for (size_t i = 0; i < s->nmembers; i++) {
        const fg__member_t *m = &s->members[i];
        o->m_picked[i] = 0;
        o->m_run0[i] = m->running;
        o->m_base[i] =
            s->tau > 0 ? usage_at(s, m->usage, m->usage_at, m->running, now) / s->tau : 0.0;
    }
    for (size_t i = 0; i < s->naccounts; i++) {
        const fg__account_t *a = &s->accounts[i];
        o->a_picked[i] = 0;
        o->a_run0[i] = a->running;
        o->a_base[i] =
            s->tau > 0 ? usage_at(s, a->usage, a->usage_at, a->running, now) / s->tau : 0.0;
    }
    o->run_w = s->tau > 0 ? 0.5 : 1.0;
    o->band = -1;
    o->rr_pos = 0;
}

/* Sets up band b; returns the number of jobs in it. */
static int64_t band_begin(fg_sched_t *s, fg__order_t *o, int b)
{
    int64_t total = 0;
    for (size_t i = 0; i < s->naccounts; i++)
        o->a_left[i] = 0;
    for (size_t i = 0; i < s->nmembers; i++) {
        const fg__queue_t *q = &s->members[i].q[b];
        o->cursor[i] = q->head;
        o->m_left[i] = q->len - q->head;
        o->a_left[s->members[i].account] += o->m_left[i];
        total += o->m_left[i];
    }
    o->rr_pos = 0;
    return total;
}

static bool job_before(const fg__job_t *a, const fg__job_t *b)
{
    if (a->submit_time != b->submit_time)
        return a->submit_time < b->submit_time;
    return a->id < b->id;
}

static int32_t pick_oldest(const fg_sched_t *s, const fg__order_t *o)
{
    int32_t best = -1;
    const fg__job_t *bj = NULL;
    for (size_t i = 0; i < s->nmembers; i++) {
        if (!o->m_left[i])
            continue;
        const fg__job_t *j = &s->jobs[s->members[i].q[o->band].v[o->cursor[i]]];
        if (!bj || job_before(j, bj)) {
            bj = j;
            best = (int32_t)i;
        }
    }
    return best;
}

static int32_t pick_wfq(const fg_sched_t *s, const fg__order_t *o)
{
    int32_t ba = -1;
    double bk = 0;
    for (size_t i = 0; i < s->naccounts; i++) {
        if (!o->a_left[i])
            continue;
        double k =
            (o->a_base[i] + (double)o->a_run0[i] + (double)o->a_picked[i]) / s->accounts[i].weight;
        if (ba < 0 || k < bk) {
            ba = (int32_t)i;
            bk = k;
        }
    }
    if (ba < 0)
        return -1;
    int32_t bm = -1;
    for (size_t i = 0; i < s->nmembers; i++) {
        if (!o->m_left[i] || s->members[i].account != ba)
            continue;
        double k =
            (o->m_base[i] + (double)o->m_run0[i] + (double)o->m_picked[i]) / s->members[i].weight;
        if (bm < 0 || k < bk) {
            bm = (int32_t)i;
            bk = k;
        }
    }
    return bm;
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

/* Returns the slot of the next pending job in plan order, or -1 when none is left. */
int32_t fg__order_next(fg_sched_t *s, fg__order_t *o)
{
    for (;;) {
        int32_t m = -1;
        if (o->band >= 0) {
            switch (s->cfg.policy) {
            case FG_POLICY_WFQ:
                m = pick_wfq(s, o);
                break;
            case FG_POLICY_RR:
                m = pick_rr(s, o);
                break;
            default:
                m = pick_oldest(s, o);
                break;
            }
        }
        if (m >= 0) {
            int32_t slot = s->members[m].q[o->band].v[o->cursor[m]++];
            int32_t g = s->jobs[slot].gpus;
            o->m_left[m]--;
            o->a_left[s->members[m].account]--;
            o->m_picked[m] += g;
            o->a_picked[s->members[m].account] += g;
            return slot;
        }
        do {
            if (++o->band >= FG__NBANDS)
                return -1;
        } while (band_begin(s, o, o->band) == 0);
    }
}
