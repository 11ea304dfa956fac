/*
 * queue.c - sorted queues of pending jobs, one per member and band.
 *
 * A queue is an array of job slots sorted by (submit_time, id), live in v[head..len).
 * New jobs usually arrive last (append), jobs usually start first (head++), so both
 * common cases are O(1); a requeued job with an old submit time is a binary search and
 * one memmove, and so is a job that starts from inside its queue (backfill), which is
 * searched for from the head (it is near it) and moves the shorter side of the queue by
 * one.
 *
 * Each run of FG__QBLK entries from the array's start has a summary (fg__qblk_t) that the
 * look ahead reads instead of its jobs; any write to an entry marks it stale, and the look
 * ahead makes it again when it needs it.
 *
 * Worked example (jobs by (submit time, id)): v = [a(10, 1), b(20, 2), c(30, 3)], head 0,
 * len 3. b starts by backfill: it is found from the head (a, then b) and the shorter side
 * moves, here the front: v = [-, a, c], head 1. A requeued d(5, 4) goes before a: the
 * search finds the head, and there is room before it: v = [d, a, c], head 0. A new e(40, 5)
 * is appended: len 4. Each write (b's removal moved a; d's slot) leaves the summary of
 * its run stale.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* First position in [lo, hi) of the sorted v whose job is not before `j` (hi if none). */
static int32_t lower_bound_in(const fg_sched_t *s, const int32_t *v, int32_t lo, int32_t hi,
                              const fg__job_t *j)
{
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (fg__job_before(&s->jobs[v[mid]], j))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* First position in [head, len) whose job is not before `j`. */
int32_t fg__queue_lower_bound(const fg_sched_t *s, const fg__queue_t *q, const fg__job_t *j)
{
    return lower_bound_in(s, q->v, q->head, q->len, j);
}

/* Entries v[from..to] were written: their summaries are stale. */
static void blk_stale(fg__queue_t *q, int32_t from, int32_t to)
{
    const int32_t last = to / FG__QBLK < q->nblk ? to / FG__QBLK : q->nblk - 1;
    for (int32_t b = from / FG__QBLK; b <= last; b++)
        q->blk[b].ok = false;
}

/* Room for the summaries of every full run of FG__QBLK entries of v. */
static void blk_room(fg__queue_t *q)
{
    const int32_t n = q->cap / FG__QBLK;
    if (n <= q->nblk)
        return;
    size_t cap = (size_t)q->nblk;
    q->blk = fg__grow(q->blk, &cap, (size_t)n, sizeof *q->blk);
    for (size_t b = (size_t)q->nblk; b < cap; b++)
        q->blk[b].ok = false;
    q->nblk = (int32_t)cap;
}

void fg__queue_blk_fill(const fg_sched_t *s, fg__queue_t *q, int32_t b)
{
    assert(0 <= b && b < q->nblk && (b + 1) * FG__QBLK <= q->len);
    fg__qblk_t *k = &q->blk[b];
    *k = (fg__qblk_t){.elig = INT64_MIN};
    for (int g = 0; g <= FG_WHOLE_NODE_GPUS; g++)
        k->tl[g] = INT64_MAX;
    const int32_t *v = q->v + (size_t)b * FG__QBLK;
    for (int i = 0; i < FG__QBLK; i++) {
        const fg__job_t *j = &s->jobs[v[i]];
        const int32_t g = j->gpus;
        k->gpus += g;
        if (j->eligible_time > k->elig)
            k->elig = j->eligible_time;
        if (j->state != FG_JOB_PENDING || (g <= FG_WHOLE_NODE_GPUS && j->type >= 0)) {
            k->other = true;
        } else if (g <= FG_WHOLE_NODE_GPUS) {
            k->sizes |= 1u << g;
            if (j->time_limit < k->tl[g])
                k->tl[g] = j->time_limit;
        } else {
            const int32_t n = g / FG_WHOLE_NODE_GPUS;
            if (!k->kmin || n < k->kmin)
                k->kmin = n;
            if (j->time_limit < k->tl[0])
                k->tl[0] = j->time_limit;
        }
    }
    k->ok = true;
}

#ifndef NDEBUG
/* Is the entry at pos in order with its live neighbours (fg__job_before)? For asserts
 * after an insert. */
static bool in_order_at(const fg_sched_t *s, const fg__queue_t *q, int32_t pos)
{
    const fg__job_t *j = &s->jobs[q->v[pos]];
    return (pos == q->head || fg__job_before(&s->jobs[q->v[pos - 1]], j)) &&
           (pos + 1 >= q->len || fg__job_before(j, &s->jobs[q->v[pos + 1]]));
}
#endif

void fg__queue_insert(fg_sched_t *s, fg__queue_t *q, int32_t slot)
{
    const fg__job_t *j = &s->jobs[slot];
    if (q->len > q->head && !fg__job_before(&s->jobs[q->v[q->len - 1]], j)) {
        int32_t pos = fg__queue_lower_bound(s, q, j);
        if (pos == q->head && q->head > 0) {
            q->v[--q->head] = slot;
            blk_stale(q, q->head, q->head);
            assert(in_order_at(s, q, q->head));
            return;
        }
        if (q->len == q->cap) {
            size_t cap = (size_t)q->cap;
            q->v = fg__grow(q->v, &cap, (size_t)q->len + 1, sizeof *q->v);
            q->cap = (int32_t)cap;
            blk_room(q);
        }
        memmove(&q->v[pos + 1], &q->v[pos], (size_t)(q->len - pos) * sizeof *q->v);
        q->v[pos] = slot;
        blk_stale(q, pos, q->len);
        q->len++;
        assert(in_order_at(s, q, pos));
        return;
    }
    if (q->len == q->cap) {
        if (q->head > 0 && q->head >= q->cap / 2) { /* compact instead of growing */
            memmove(q->v, &q->v[q->head], (size_t)(q->len - q->head) * sizeof *q->v);
            blk_stale(q, 0, q->len - q->head - 1);
            q->len -= q->head;
            q->head = 0;
        } else {
            size_t cap = (size_t)q->cap;
            q->v = fg__grow(q->v, &cap, (size_t)q->len + 1, sizeof *q->v);
            q->cap = (int32_t)cap;
            blk_room(q);
        }
    }
    /* A summary is made only of a run of entries all before the end (the look ahead
     * reads runs that end by the queue's end), and whatever brings the end inside a run
     * (an append, a removal from the back, a compaction) writes an entry of that run and
     * leaves it stale: so the run of the end is stale already, unless the end begins it,
     * and its summary is not written for every append (its line not touched). */
    if (q->len % FG__QBLK == 0)
        blk_stale(q, q->len, q->len);
    q->v[q->len++] = slot;
    assert(in_order_at(s, q, q->len - 1));
}

void fg__queue_remove(fg_sched_t *s, fg__queue_t *q, int32_t slot)
{
    /* Most removals are of the head (a job starts first in its queue): a slot is in its
     * queue once, so finding it at v[head] is finding its place, with no search through
     * the jobs of the queue (each probe of which reads another job's line). No entry is
     * written, so the summary of the head's run stays: it holds for the entries from the
     * new head on, and the look ahead relies on nothing more (entries before the head
     * may have moved on: fg__order_peek), so it is not made again for this. */
    if (q->head < q->len && q->v[q->head] == slot) {
        if (++q->head == q->len)
            q->head = q->len = 0;
        return;
    }
    /* Else it is usually a few dozen entries in (a backfill start, from a queue of
     * hundreds): a search by doubling steps from the head, then halving, reads the jobs
     * near the head, which the walk has just read, where a search of the whole queue
     * would read jobs far from it first. Both find the first position not before it. */
    const fg__job_t *j = &s->jobs[slot];
    int32_t lo = q->head, hi = q->head + 1;
    for (int32_t step = 1; hi < q->len && fg__job_before(&s->jobs[q->v[hi]], j); step *= 2) {
        lo = hi + 1;
        /* (hi + step <= 2 len: no overflow, a queue being far from 2^30 jobs long) */
        hi = hi + step < q->len ? hi + step : q->len;
    }
    int32_t pos = lower_bound_in(s, q->v, lo, hi < q->len ? hi : q->len, j);
    if (pos >= q->len || q->v[pos] != slot)
        abort();                             /* invariant: a pending job is in its queue */
    if (pos - q->head <= q->len - pos - 1) { /* move the shorter side: here the front */
        memmove(&q->v[q->head + 1], &q->v[q->head], (size_t)(pos - q->head) * sizeof *q->v);
        blk_stale(q, q->head, pos);
        q->head++;
    } else {
        memmove(&q->v[pos], &q->v[pos + 1], (size_t)(q->len - pos - 1) * sizeof *q->v);
        blk_stale(q, pos, q->len - 1);
        q->len--;
    }
    if (q->head == q->len)
        q->head = q->len = 0;
}

void fg__queue_free(fg__queue_t *q)
{
    free(q->v);
    free(q->blk);
    memset(q, 0, sizeof *q);
}
