/*
 * queue.c - sorted queues of pending jobs, one per member and band.
 *
 * A queue is an array of job slots sorted by (submit_time, id), live in v[head..len).
 * New jobs usually arrive last (append), jobs usually start first (head++), so both
 * common cases are O(1); a requeued job with an old submit time is a binary search and
 * one memmove, and so is a job that starts from inside its queue (backfill), which
 * moves the shorter side of the queue by one.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static bool before(const fg__job_t *a, const fg__job_t *b)
{
    if (a->submit_time != b->submit_time)
        return a->submit_time < b->submit_time;
    return a->id < b->id;
}

/* First position in [head, len) whose job is not before `j`. */
static int32_t lower_bound(const fg_sched_t *s, const fg__queue_t *q, const fg__job_t *j)
{
    int32_t lo = q->head, hi = q->len;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (before(&s->jobs[q->v[mid]], j))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void fg__queue_insert(fg_sched_t *s, fg__queue_t *q, int32_t slot)
{
    const fg__job_t *j = &s->jobs[slot];
    if (q->len > q->head && !before(&s->jobs[q->v[q->len - 1]], j)) {
        int32_t pos = lower_bound(s, q, j);
        if (pos == q->head && q->head > 0) {
            q->v[--q->head] = slot;
            return;
        }
        if (q->len == q->cap) {
            size_t cap = (size_t)q->cap;
            q->v = fg__grow(q->v, &cap, (size_t)q->len + 1, sizeof *q->v);
            q->cap = (int32_t)cap;
        }
        memmove(&q->v[pos + 1], &q->v[pos], (size_t)(q->len - pos) * sizeof *q->v);
        q->v[pos] = slot;
        q->len++;
        return;
    }
    if (q->len == q->cap) {
        if (q->head > 0 && q->head >= q->cap / 2) { /* compact instead of growing */
            memmove(q->v, &q->v[q->head], (size_t)(q->len - q->head) * sizeof *q->v);
            q->len -= q->head;
            q->head = 0;
        } else {
            size_t cap = (size_t)q->cap;
            q->v = fg__grow(q->v, &cap, (size_t)q->len + 1, sizeof *q->v);
            q->cap = (int32_t)cap;
        }
    }
    q->v[q->len++] = slot;
}

void fg__queue_remove(fg_sched_t *s, fg__queue_t *q, int32_t slot)
{
    int32_t pos = lower_bound(s, q, &s->jobs[slot]);
    if (pos >= q->len || q->v[pos] != slot)
        abort();                             /* invariant: a pending job is in its queue */
    if (pos - q->head <= q->len - pos - 1) { /* move the shorter side: here the front */
        memmove(&q->v[q->head + 1], &q->v[q->head], (size_t)(pos - q->head) * sizeof *q->v);
        q->head++;
    } else {
        memmove(&q->v[pos], &q->v[pos + 1], (size_t)(q->len - pos - 1) * sizeof *q->v);
        q->len--;
    }
    if (q->head == q->len)
        q->head = q->len = 0;
}

void fg__queue_free(fg__queue_t *q)
{
    free(q->v);
    memset(q, 0, sizeof *q);
}
