/*
 * sched_billing.c - charging on the scheduler thread: the ledger rows of every attempt,
 * live accrual of the running ones, and budgets (docs/billing.md).
 *
 * The scheduler thread knows when an attempt starts and ends, so it makes the rows: the
 * charging rules of src/billing/ turn the attempt record into rows, and the rows go
 * into the SAME store batch as the attempt's record and the job's cost (sched_commit.c).
 * A crash therefore loses an attempt's end together with its rows, or keeps both; the
 * store's unique index refuses a second final charge of one attempt whatever happens.
 *
 *   - At the end of an attempt: fg_bill_attempt_rows from how far accrual charged it.
 *   - Every charge interval (60 s): an interim row per running attempt, [charged_to,
 *     now), so spend shows and budgets act during a run.
 *   - Budgets: each account's spend in its period (the UTC month, or since its grant)
 *     is kept here, from the rows as they are made (read back from the store at start).
 *     At 80 % and 100 % an event says so once per period. `hard` stops the account's
 *     running jobs and holds its pending ones (submits answer 402); `safe` tells the
 *     core what the account may still reserve, so a job starts only if its time limit
 *     at its rate fits; `warn` only warns.
 *
 * Example: a 2-GPU job at 3,600,000 micros/GPU-h (1 micro per GPU-ms) starts at t0 and
 * completes at t0 + 150 s with a 60 s interval: interim rows of 120,000 (t0..t0+60 s) and
 * 120,000 (..t0+120 s), then the final row of 60,000: the job's cost_micros is 300,000.
 */
#include "server/sched_int.h"

#include "common/log.h"
#include "common/xalloc.h"

#include "fairgpu/billing.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ prices */

/* The book from the store when a change was committed since it was last read. */
static void refresh_book(sctx_t *c)
{
    srv_t *s = c->s;
    uint64_t gen = atomic_load(&s->prices_gen);
    if (c->book_loaded && gen == c->book_gen)
        return;
    fg_store_tx_t *tx = NULL;
    if (fg_store_read_begin(s->store, &tx))
        return; /* the old book stays; tried again at the next row */
    fg_store_price_list_t l = {0};
    int rc = fg_store_price_list(tx, &l);
    fg_store_read_end(tx);
    if (rc)
        return;
    srv_pricebook_free(&c->book);
    for (size_t i = 0; i < l.n; i++) {
        const fg_store_price_t *sp = &l.items[i];
        srv_price_t p = {.prio = sp->priority,
                         .micros = sp->micros_per_gpu_hour,
                         .effective_ms = sp->effective_ms,
                         .seq = sp->id};
        snprintf(p.gpu_type, sizeof p.gpu_type, "%s", sp->gpu_type);
        snprintf(c->book.currency, sizeof c->book.currency, "%s", sp->currency);
        srv_pricebook_add(&c->book, &p);
    }
    fg_store_price_list_free(&l);
    c->book_gen = gen;
    c->book_loaded = true;
}

/* The rate in force at at_ms, or 0 when the book has none: the rows still record the
 * GPU time (fair share, reports); nothing is refused for a missing price. */
static int rate_at(void *ctx, const char *gpu_type, fg_prio_t prio, int64_t at_ms, int64_t *micros)
{
    sctx_t *c = ctx;
    if (srv_price_at(&c->book, gpu_type, (int)prio, at_ms, micros, NULL) == 0)
        return FG_OK;
    *micros = 0;
    return FG_OK;
}

/* The dearest rate now, per class, of the GPU types of the known nodes (the "*" row
 * when there is none), kept until the book or the node count changes (or a minute
 * passes: prices take effect at their time). mu held. */
static int64_t dearest_any(sctx_t *c, fg_prio_t prio)
{
    int64_t now_ms = srv_now_ms();
    if (c->dearest_gen != c->book_gen + 1 || c->dearest_nodes != c->s->nnodes ||
        now_ms - c->dearest_at_ms > 60000) {
        for (int p = 0; p <= FG_PRIO_HIGH; p++) {
            int64_t best = 0, m;
            for (size_t i = 0; i < c->s->nnodes; i++) {
                rate_at(c, c->s->nodes[i]->gpu_type, (fg_prio_t)p, now_ms, &m);
                best = m > best ? m : best;
            }
            if (!c->s->nnodes)
                rate_at(c, "*", (fg_prio_t)p, now_ms, &best);
            c->dearest[p] = best;
        }
        c->dearest_gen = c->book_gen + 1;
        c->dearest_nodes = c->s->nnodes;
        c->dearest_at_ms = now_ms;
    }
    return c->dearest[prio];
}

/* The dearest rate (now) of the GPU types job j could run on: its own type's, else
 * dearest_any. mu held. */
static int64_t dearest_rate(sctx_t *c, const srv_job_t *j)
{
    int64_t rate = 0;
    if (j->r.gpu_type) {
        rate_at(c, j->r.gpu_type, (fg_prio_t)j->r.priority, srv_now_ms(), &rate);
        return rate;
    }
    return dearest_any(c, (fg_prio_t)j->r.priority);
}

int64_t srv__limit_cost(sctx_t *c, const srv_job_t *j)
{
    refresh_book(c);
    int64_t rate = dearest_rate(c, j), cost = 0;
    int64_t gpu_ms = (int64_t)j->r.gpus * j->r.time_limit_s * 1000;
    if (gpu_ms > FG_BILL_MAX_GPU_MS || fg_bill_charge(gpu_ms, rate, &cost) != FG_OK)
        return INT64_MAX / 4; /* beyond any budget */
    return cost;
}

/* ------------------------------------------------------------------ budgets: spend */

/* Account a's budget period at now_ms: [this UTC month), or [its grant, forever). */
static void period_of(const srv_account_t *a, int64_t now_ms, int64_t *from, int64_t *to)
{
    if (a->r.budget_period == FG_BUDGET_GRANT) {
        *from = a->r.budget_since_ms;
        *to = INT64_MAX;
        return;
    }
    int y, m;
    fg_bill_month_of(now_ms, &y, &m);
    *from = fg_bill_month_start_ms(y, m);
    *to = m == 12 ? fg_bill_month_start_ms(y + 1, 1) : fg_bill_month_start_ms(y, m + 1);
}

static int spend_row(const fg_ledger_row_t *r, void *arg)
{
    fg_bill_budget_add(arg, r);
    return 0;
}

/* Reads account a's spend in its period from the store (at start, at a new month, when
 * the budget or its period is set), plus this iteration's rows, which the store has not
 * yet. At start, what it had reached counts as already warned (the events were stored
 * with the rows that crossed); otherwise a spend already over a mark is a crossing. mu
 * held; the read takes a store snapshot. */
static void spend_reload(sctx_t *c, srv_account_t *a, int64_t now_ms)
{
    srv_t *s = c->s;
    fg_budget_t *b = &a->bud;
    *b = (fg_budget_t){.budget_micros = a->r.budget_micros};
    period_of(a, now_ms, &b->from_ms, &b->to_ms);
    a->bud_period = a->r.budget_period;
    a->bud_since = a->r.budget_since_ms;
    a->bud_loaded = true;
    fg_store_tx_t *tx = NULL;
    fg_store_ledger_filter_t f = {.account = a->r.name, .from_ms = b->from_ms, .to_ms = b->to_ms};
    if (fg_store_read_begin(s->store, &tx) == 0) {
        if (fg_store_ledger_foreach(tx, &f, spend_row, b))
            fg_log(FG_LOG_ERROR, "billing: reading the spend of account %s failed", a->r.name);
        fg_store_read_end(tx);
    }
    for (size_t i = 0; i < c->nrows; i++)
        if (!strcmp(c->rows[i].account, a->r.name))
            fg_bill_budget_add(b, &c->rows[i]);
    if (!c->budgets_ready)
        fg_bill_budget_settle(b);
}

/* ------------------------------------------------------------------ GPU time held */

/* The GPU-ms row r adds to the time held: charges add theirs, refunds of time not held
 * (accrued past the end, not charged) take theirs back; lost work stays held. */
static int64_t held_sign(const fg_ledger_row_t *r)
{
    if (r->kind == FG_ROW_CHARGE)
        return 1;
    if (r->kind == FG_ROW_REFUND &&
        (r->refund_why == FG_REFUND_PAST_END || r->refund_why == FG_REFUND_NOT_CHARGED))
        return -1;
    return 0;
}

/* Adds row r's part in a's month to the GPU time it held this month. mu held. */
static void held_add(srv_account_t *a, const fg_ledger_row_t *r)
{
    int y, m;
    fg_bill_month_of(a->month_start_ms, &y, &m);
    int64_t end = m == 12 ? fg_bill_month_start_ms(y + 1, 1) : fg_bill_month_start_ms(y, m + 1);
    int64_t gpu_ms, amount;
    if (held_sign(r) && fg_bill_part_in(r, a->month_start_ms, end, &gpu_ms, &amount) == FG_OK)
        a->month_held_gpu_ms += held_sign(r) * gpu_ms;
}

static int held_row(const fg_ledger_row_t *r, void *arg)
{
    srv_account_t *a = srv_account_by_name(arg, r->account);
    if (a)
        held_add(a, r);
    return 0;
}

/* Every account's GPU time held this month, read from the store's rows (at start and
 * at each new month) and this iteration's rows, not yet stored. mu held. */
static void held_reload(sctx_t *c, int64_t now_ms)
{
    srv_t *s = c->s;
    int y, m;
    fg_bill_month_of(now_ms, &y, &m);
    int64_t m0 = fg_bill_month_start_ms(y, m);
    for (size_t i = 0; i < s->naccounts; i++) {
        s->accounts[i]->month_start_ms = m0;
        s->accounts[i]->month_held_gpu_ms = 0;
    }
    fg_store_tx_t *tx = NULL;
    fg_store_ledger_filter_t f = {.from_ms = m0};
    if (fg_store_read_begin(s->store, &tx) == 0) {
        if (fg_store_ledger_foreach(tx, &f, held_row, s))
            fg_log(FG_LOG_ERROR, "billing: reading this month's ledger rows failed");
        fg_store_read_end(tx);
    }
    for (size_t i = 0; i < c->nrows; i++)
        held_row(&c->rows[i], s);
}

/* ------------------------------------------------------------------ rows */

/* The attempt record of running job j for the charging rules (mu held); the strings
 * point into j and its node. */
static void attempt_of(sctx_t *c, const srv_job_t *j, fg_bill_attempt_t *a)
{
    srv_user_t *u = srv_user_by_id(c->s, j->r.user_id);
    const char *node = j->nranks ? j->ranks[0].node : "";
    srv_node_t *n = node[0] ? srv_node_by_name(c->s, node) : NULL;
    const char *type = n && n->gpu_type[0] ? n->gpu_type : j->r.gpu_type ? j->r.gpu_type : "*";
    *a = (fg_bill_attempt_t){.job_id = (fg_job_id_t)j->r.id,
                             .attempt = j->cur.attempt,
                             .account = j->r.account,
                             .user = u ? u->r.username : "?",
                             .node = node,
                             .gpu_type = type,
                             .priority = (fg_prio_t)j->r.priority,
                             .gpus = j->r.gpus,
                             .start_ms = j->cur.start_time_ms,
                             .end_ms = j->cur.end_time_ms,
                             .cause = (fg_end_cause_t)j->cur.end_cause,
                             .checkpoint_interval_ms = j->r.checkpoint_interval_s * 1000};
    for (int k = 0; k < j->nranks; k++) /* the gang's checkpoint: the earliest rank's */
        if (j->ranks[k].last_checkpoint_ms > 0 &&
            (!a->last_checkpoint_ms || j->ranks[k].last_checkpoint_ms < a->last_checkpoint_ms))
            a->last_checkpoint_ms = j->ranks[k].last_checkpoint_ms;
    if (a->last_checkpoint_ms &&
        (a->last_checkpoint_ms < a->start_ms || (a->end_ms && a->last_checkpoint_ms > a->end_ms)))
        a->last_checkpoint_ms = 0; /* not of this attempt */
    if (a->cause == FG_END_PREEMPTED && a->end_ms && srv_idle_requeued(j))
        a->last_checkpoint_ms = a->end_ms; /* requeued for idling: no lost work refunded */
}

/* Gives rows (made with local ids 1..n) their ledger ids, queues them for the commit,
 * and adds them to j's cost and its account's spend. mu held. */
static void queue_rows(sctx_t *c, srv_job_t *j, fg_ledger_row_t *rows, int n)
{
    if (n <= 0)
        return;
    uint64_t base = srv_ledger_ids(c->s, n);
    srv_account_t *acct = srv_account_by_name(c->s, j->r.account);
    c->rows = fg_xgrow(c->rows, &c->rows_cap, c->nrows + (size_t)n, sizeof *c->rows);
    for (int i = 0; i < n; i++) {
        fg_ledger_row_t *r = &c->rows[c->nrows++];
        *r = rows[i];
        r->id = base + (rows[i].id - 1);
        if (r->refers_to)
            r->refers_to = base + (rows[i].refers_to - 1);
        j->r.cost_micros += r->amount_micros;
        j->att_charged_micros += r->amount_micros;
        if (acct && acct->r.budget_micros >= 0 && acct->bud_loaded)
            fg_bill_budget_add(&acct->bud, r);
        if (acct)
            held_add(acct, r);
    }
    srv__mark_dirty(c, j);
}

void srv__bill_attempt_end(sctx_t *c, srv_job_t *j)
{
    refresh_book(c);
    fg_bill_attempt_t a;
    attempt_of(c, j, &a);
    int64_t charged_to = j->charged_to_ms > a.start_ms ? j->charged_to_ms : a.start_ms;
    fg_ledger_row_t rows[FG_BILL_ATTEMPT_ROWS_MAX];
    uint64_t local = 1;
    int n = 0;
    int rc = fg_bill_attempt_rows(&a, rate_at, c, charged_to, &local, rows, &n);
    if (rc)
        fg_log(FG_LOG_ERROR, "billing: attempt %d of job %lld not charged: %s", a.attempt,
               (long long)j->r.id, fg_strerror(rc));
    else
        queue_rows(c, j, rows, n);
    j->charged_to_ms = 0;
    j->att_charged_micros = 0;
}

void srv__bill_restore(sctx_t *c, srv_job_t *j)
{
    j->att_charged_micros = 0;
    if (j->charged_to_ms <= j->cur.start_time_ms)
        return;
    refresh_book(c);
    fg_bill_attempt_t a;
    attempt_of(c, j, &a);
    int64_t rate = 0, charged = 0;
    rate_at(c, a.gpu_type, a.priority, a.start_ms, &rate);
    if (fg_bill_charge((int64_t)a.gpus * (j->charged_to_ms - a.start_ms), rate, &charged) == FG_OK)
        j->att_charged_micros = charged; /* C(charged_to): the curve needs no sum */
}

/* Whether running job j's attempt can accrue: every rank has started (so its start,
 * the origin of its charge curve, no longer moves). */
static bool accruing(const srv_job_t *j)
{
    if (!j->nranks || j->cur.start_time_ms <= 0 || j->cur.end_time_ms)
        return false;
    for (int k = 0; k < j->nranks; k++)
        if (!j->ranks[k].started || j->ranks[k].ended)
            return false;
    return true;
}

/* One interim row for each running attempt, up to now_ms. mu held. */
static void accrue_all(sctx_t *c, int64_t now_ms)
{
    size_t n;
    srv_job_t **run = srv__running_jobs(c->s, NULL, &n);
    for (size_t i = 0; i < n; i++) {
        srv_job_t *j = run[i];
        if (!accruing(j))
            continue;
        fg_bill_attempt_t a;
        attempt_of(c, j, &a);
        int64_t from = j->charged_to_ms > a.start_ms ? j->charged_to_ms : a.start_ms;
        fg_ledger_row_t row;
        uint64_t local = 1;
        int nr = 0;
        if (fg_bill_accrue(&a, rate_at, c, from, now_ms, &local, &row, &nr) == FG_OK && nr) {
            queue_rows(c, j, &row, nr);
            j->charged_to_ms = now_ms;
        }
    }
    free(run);
}

void srv__bill_accrue(sctx_t *c, bool stop)
{
    int64_t now_ms = srv_now_ms();
    if (!stop && now_ms - c->last_charge_ms < (int64_t)c->s->cfg.charge_interval_s * 1000)
        return;
    c->last_charge_ms = now_ms;
    refresh_book(c);
    pthread_mutex_lock(&c->s->mu);
    accrue_all(c, now_ms);
    pthread_mutex_unlock(&c->s->mu);
}

/* ------------------------------------------------------------------ budgets: acting */

/* Queues an account event: its budget crossed pct percent. */
static void budget_event(sctx_t *c, const srv_account_t *a, int pct)
{
    char why[200];
    snprintf(why, sizeof why, "account %s: %d %% of its %s budget spent (%s)", a->r.name, pct,
             a->r.budget_period == FG_BUDGET_GRANT ? "granted" : "monthly",
             a->r.budget_mode == FG_BUDGET_HARD   ? "hard: its jobs are stopped and held"
             : a->r.budget_mode == FG_BUDGET_SAFE ? "safe: jobs start only if their limit fits"
                                                  : "warn: charges continue");
    srv__add_event(c, "account", 0, NULL, pct >= 100 ? "BUDGET_EXHAUSTED" : "BUDGET_WARNING", why,
                   a->r.name);
}

/* Stops the running jobs of account a (hard budget crossed), with a notice. mu held. */
static void stop_account_jobs(sctx_t *c, const srv_account_t *a)
{
    size_t n;
    srv_job_t **run = srv__running_jobs(c->s, NULL, &n);
    for (size_t i = 0; i < n; i++) {
        srv_job_t *j = run[i];
        if (strcmp(j->r.account, a->r.name) || j->r.cancel_requested)
            continue;
        j->r.cancel_requested = true;
        srv__mark_dirty(c, j);
        srv__stop_ranks(c, j, "cancel", -1); /* the agents end it as cancelled */
        srv__add_event(c, "job", (uint64_t)j->r.id, "RUNNING", "RUNNING", "budget_exhausted", NULL);
    }
    free(run);
}

/* What a's running jobs still reserve against a safe budget: each one's limit cost less
 * what its attempt has been charged. mu held. */
static int64_t running_reserve(sctx_t *c, const srv_account_t *a)
{
    size_t n;
    srv_job_t **run = srv__running_jobs(c->s, NULL, &n);
    int64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        srv_job_t *j = run[i];
        if (strcmp(j->r.account, a->r.name))
            continue;
        int64_t left = j->limit_cost - j->att_charged_micros;
        if (left > 0)
            sum += left;
    }
    free(run);
    return sum;
}

/* Brings account a's budget state up to date: period, warnings, and what the core and
 * the submit path are told. mu held. */
static void budget_check(sctx_t *c, srv_account_t *a, int64_t now_ms)
{
    int ci = fg_sched_account_find(c->core, a->r.name);
    if (a->r.budget_micros < 0) {
        a->budget_blocked = false;
        a->bud_loaded = false;
        if (ci >= 0) {
            fg_sched_account_set_budget_exhausted(c->core, ci, false);
            fg_sched_account_set_budget_left(c->core, ci, -1);
        }
        return;
    }
    fg_budget_t *b = &a->bud;
    int64_t from, to;
    period_of(a, now_ms, &from, &to);
    if (!a->bud_loaded || from != b->from_ms || a->bud_period != a->r.budget_period ||
        a->bud_since != a->r.budget_since_ms)
        spend_reload(c, a, now_ms);
    b->budget_micros = a->r.budget_micros; /* (a new figure: the marks say what it crossed) */
    int marks = fg_bill_budget_marks(b);
    if (marks & FG_BUDGET_MARK_80)
        budget_event(c, a, 80);
    if (marks & FG_BUDGET_MARK_100) {
        budget_event(c, a, 100);
        if (a->r.budget_mode == FG_BUDGET_HARD)
            stop_account_jobs(c, a);
    }
    bool exhausted = b->spent_micros >= b->budget_micros;
    a->budget_blocked = exhausted && a->r.budget_mode == FG_BUDGET_HARD;
    if (ci < 0)
        return;
    fg_sched_account_set_budget_exhausted(c->core, ci,
                                          exhausted && a->r.budget_mode != FG_BUDGET_WARN);
    int64_t left = -1;
    if (a->r.budget_mode == FG_BUDGET_SAFE) {
        left = b->budget_micros - b->spent_micros - running_reserve(c, a);
        left = left < 0 ? 0 : left;
    }
    fg_sched_account_set_budget_left(c->core, ci, left);
}

void srv__budget_tick(sctx_t *c)
{
    srv_t *s = c->s;
    int64_t now_ms = srv_now_ms();
    pthread_mutex_lock(&s->mu);
    int y, m;
    fg_bill_month_of(now_ms, &y, &m);
    if (s->naccounts && (s->accounts[0]->month_start_ms != fg_bill_month_start_ms(y, m) ||
                         s->naccounts != c->held_accounts)) {
        held_reload(c, now_ms); /* a new month, or a new account */
        c->held_accounts = s->naccounts;
    }
    for (size_t i = 0; i < s->naccounts; i++)
        budget_check(c, s->accounts[i], now_ms);
    c->budgets_ready = true;
    pthread_mutex_unlock(&s->mu);
}
