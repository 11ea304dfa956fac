/*
 * metrics.c - what GET /metrics reports that is kept between scrapes, so that a scrape
 * costs O(accounts), never O(jobs) (h_metrics.c writes it out):
 *
 *   - duration histograms (scheduler passes, HTTP replies): one relaxed atomic per
 *     bucket, not cumulative; the scrape adds them up, so +Inf always equals the count;
 *   - the job tally: jobs by (account, priority, state) and pending GPUs by size class,
 *     moved with every state change (srv_job_count_state, mu held);
 *   - ledger totals: rows and amounts by kind, counted once their batch is committed,
 *     and read back from the store at start.
 *
 * Example: a pass of 700 us goes to the bucket le=0.001 (bounds 100, 250, 500, 1000 us,
 * ...); a scrape then shows le="0.0005" 0, le="0.001" 1, ... le="+Inf" 1, count 1,
 * sum 0.0007.
 */
#include "server/server.h"

#include "common/clock.h"
#include "common/xalloc.h"

#include "fairgpu/billing.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ histograms */

const int64_t srv_pass_bounds_us[SRV_HIST_BUCKETS] = {
    100,   250,    500,    1000,   2500,    5000,    10000,   25000,
    50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000};
const int64_t srv_http_bounds_us[SRV_HIST_BUCKETS] = {
    250,    500,    1000,   2500,    5000,    10000,   25000,    50000,
    100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000, 30000000};

void srv_hist_observe(srv_hist_t *h, const int64_t *bounds_us, int64_t us)
{
    if (us < 0)
        us = 0;
    int k = 0;
    while (k < SRV_HIST_BUCKETS && us > bounds_us[k])
        k++;
    atomic_fetch_add_explicit(&h->n[k], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_us, (long)us, memory_order_relaxed);
}

/* The histogram row of a method bit (M_*). */
static int method_row(int method)
{
    switch (method) {
    case M_GET:
        return 0;
    case M_POST:
        return 1;
    case M_PUT:
        return 2;
    case M_PATCH:
        return 3;
    case M_DELETE:
        return 4;
    default:
        return 5;
    }
}

void srv_metrics_http_observe(srv_req_t *r)
{
    if (!r->t0_us)
        return; /* refused on its head (before its body was read): not timed */
    int64_t us = fg_clock_mono_us() - r->t0_us;
    r->t0_us = 0;
    int cls = r->long_wait ? 2 : r->agent || r->agent_join ? 1 : 0;
    srv_hist_observe(&r->srv->m.http_hist[method_row(r->method)][cls], srv_http_bounds_us, us);
}

/* ------------------------------------------------------------------ job tally */

/* Jobs of one account, by priority and state. */
typedef struct tally_row {
    char account[FG_NAME_MAX + 1];
    int64_t n[3][6]; /* [fg_prio_t][fg_job_state_t] */
    bool seen[3];    /* the account has had a job of this priority */
} tally_row_t;

struct srv_jobtally {
    tally_row_t **rows; /* in the order accounts were first seen */
    size_t n, cap;
    srv_map_t by_hash;       /* hash of the name (+ probe) -> row */
    int64_t pending_gpus[4]; /* by size class: 1, 2-7, 8, >8 */
};

/* The size class of a job of `gpus` GPUs: 0 "1", 1 "2-7", 2 "8", 3 ">8". */
int srv_size_class(int32_t gpus)
{
    return gpus <= 1 ? 0 : gpus < 8 ? 1 : gpus == 8 ? 2 : 3;
}

/* The row of account `name`, made if new. mu held. */
static tally_row_t *tally_row(struct srv_jobtally *t, const char *name)
{
    uint64_t key = srv_hash_bytes(name, strlen(name));
    for (;; key++) { /* a colliding hash probes the next key */
        if (!key)
            continue; /* (the map's keys are never 0) */
        tally_row_t *row = srv_map_get(&t->by_hash, key);
        if (!row)
            break;
        if (!strcmp(row->account, name))
            return row;
    }
    tally_row_t *row = fg_xcalloc(1, sizeof *row);
    snprintf(row->account, sizeof row->account, "%s", name);
    t->rows = fg_xgrow(t->rows, &t->cap, t->n + 1, sizeof *t->rows);
    t->rows[t->n++] = row;
    srv_map_put(&t->by_hash, key, row);
    return row;
}

void srv_jobtally_count(srv_t *s, const srv_job_t *j, int delta)
{
    if (!s->jobtally)
        s->jobtally = fg_xcalloc(1, sizeof *s->jobtally);
    struct srv_jobtally *t = s->jobtally;
    int st = (int)j->state, pr = (int)j->r.priority;
    if (st < 0 || st >= 6 || pr < 0 || pr > 2)
        return;
    tally_row_t *row = tally_row(t, j->r.account ? j->r.account : "");
    row->n[pr][st] += delta;
    row->seen[pr] |= delta > 0;
    assert(row->n[pr][st] >= 0);
    if (j->state == FG_JOB_PENDING)
        t->pending_gpus[srv_size_class(j->r.gpus)] += delta * (int64_t)j->r.gpus;
}

size_t srv_jobtally_accounts(const srv_t *s)
{
    return s->jobtally ? s->jobtally->n : 0;
}

const char *srv_jobtally_get(const srv_t *s, size_t i, int64_t n[3][6])
{
    assert(s->jobtally && i < s->jobtally->n);
    memcpy(n, s->jobtally->rows[i]->n, sizeof s->jobtally->rows[i]->n);
    return s->jobtally->rows[i]->account;
}

bool srv_jobtally_prio_seen(const srv_t *s, size_t i, int prio)
{
    assert(s->jobtally && i < s->jobtally->n && prio >= 0 && prio < 3);
    return s->jobtally->rows[i]->seen[prio];
}

void srv_jobtally_pending_gpus(const srv_t *s, int64_t out[4])
{
    if (s->jobtally)
        memcpy(out, s->jobtally->pending_gpus, sizeof s->jobtally->pending_gpus);
    else
        memset(out, 0, 4 * sizeof *out);
}

void srv_jobtally_free(srv_t *s)
{
    struct srv_jobtally *t = s->jobtally;
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++)
        free(t->rows[i]);
    free(t->rows);
    srv_map_free(&t->by_hash);
    free(t);
    s->jobtally = NULL;
}

/* ------------------------------------------------------------------ ledger totals */

static void count_row(srv_t *s, const fg_ledger_row_t *r)
{
    int k = (int)r->kind;
    if (k < 0 || k > 3)
        return;
    atomic_fetch_add_explicit(&s->m.ledger_rows[k], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->m.ledger_micros[k], (long)r->amount_micros, memory_order_relaxed);
}

void srv_metrics_ledger_committed(srv_t *s, const srv_batch_t *b)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->ops[i].kind == OP_LEDGER && !b->ops[i].skipped)
            count_row(s, b->ops[i].rec);
}

static int restore_row(const fg_ledger_row_t *r, void *arg)
{
    count_row(arg, r);
    return 0;
}

int srv_metrics_ledger_restore(srv_t *s, fg_store_tx_t *tx)
{
    fg_store_ledger_filter_t f = {0};
    return fg_store_ledger_foreach(tx, &f, restore_row, s);
}
