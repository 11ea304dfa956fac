/*
 * histest.c - the replay's history-based start estimate (--estimates history): the
 * controller's estimate (fg_est_queue, src/estimate/queue.c) made for the arrivals.
 *
 * The replay records every job that ends (its run time against its limit) in a
 * run-time model (src/estimate/runtime.c). After the passes at an arrival time, for the
 * arrivals that still wait, it reads the core's plan order up to the last of them and
 * estimates that prefix with fg_est_queue: the running jobs end at their predicted ends
 * (a resumed job: given what it kept from its checkpoints, plus this attempt), the
 * pending ones run their predicted runs, with the core's preemption and no-backfill
 * rules. Each arrival's p50 start is its estimate, the p10 and p90 its range. It only
 * reads the core's state: no decision depends on it.
 *
 * Example: arrivals 7 and 9 wait; the plan order is 3, 9, 5, 7, 8: the prefix 3, 9, 5, 7
 * is estimated (the jobs ahead of an arrival take GPUs before it), and 7 and 9 keep
 * theirs.
 *
 * Cost: the plan order is read in growing prefixes (256, 512, ...) until it holds every
 * arrival, so a job near the head costs little; the estimate is O(prefix x nodes)
 * (src/estimate/queue.c).
 */
#include "sim/histest.h"

#include "common/xalloc.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define ORDER_FIRST 256

void fg_histest_init(fg_histest_t *h)
{
    memset(h, 0, sizeof *h);
    h->model = fg_rt_new();
    h->scratch = fg_est_scratch_new();
}

void fg_histest_free(fg_histest_t *h)
{
    fg_rt_free(h->model);
    fg_est_scratch_free(h->scratch);
    free(h->order);
    free(h->start);
    memset(h, 0, sizeof *h);
}

void fg_histest_record(fg_histest_t *h, const char *account, const char *user, int64_t limit_s,
                       int64_t ran_s)
{
    fg_rt_record(h->model, account, user, limit_s, ran_s);
}

/* The plan order up to the last of ids[0..n): its length, or 0 if some is not in it. */
static size_t order_prefix(fg_histest_t *h, fg_sched_t *s, int64_t now, const fg_job_id_t *ids,
                           size_t n)
{
    const size_t pending = fg_sched_pending_count(s);
    for (size_t want = ORDER_FIRST;; want *= 2) {
        if (want > pending)
            want = pending;
        h->order = fg_xgrow(h->order, &h->order_cap, want + 1, sizeof *h->order);
        const size_t got = fg_sched_plan_order(s, now, h->order, want);
        size_t last = 0, found = 0;
        for (size_t i = 0; i < got && found < n; i++)
            for (size_t k = 0; k < n; k++)
                if (h->order[i] == ids[k]) {
                    found++;
                    last = i + 1;
                }
        if (found == n)
            return last;
        if (got < want || want == pending)
            return 0;
    }
}

void fg_histest_estimate(fg_histest_t *h, fg_sched_t *s, int64_t now, const fg_job_id_t *ids,
                         size_t n, fg_est_job_fn fn, void *ctx, int64_t (*out)[3])
{
    for (size_t k = 0; k < n; k++)
        out[k][0] = out[k][1] = out[k][2] = FG_TIME_NEVER;
    const size_t len = order_prefix(h, s, now, ids, n);
    if (len == 0)
        return;
    h->start = fg_xgrow(h->start, &h->start_cap, len, sizeof *h->start);
    fg_est_queue(h->scratch, s, h->model, now, h->order, len, fn, ctx, h->start);
    for (size_t i = 0; i < len; i++)
        for (size_t k = 0; k < n; k++)
            if (h->order[i] == ids[k]) {
                out[k][0] = h->start[i].p10;
                out[k][1] = h->start[i].p50;
                out[k][2] = h->start[i].p90;
            }
    h->projections++;
    h->projected_jobs += (int64_t)len;
}
