/*
 * sched.c - the scheduler thread: the only owner of the core (fg_sched_t), and its loop.
 *
 * HTTP threads push messages (submit, cancel, agent reports, registrations, drains,
 * account changes) into an inbox and signal (sched_call.c). The thread wakes, takes
 * EVERY queued message (events that arrive together are coalesced into one pass),
 * applies them to the core, runs one pass, and makes the outcome durable in ONE store
 * batch (sched_commit.c): job updates, attempt records, events, node states. Only
 * after that commit does it queue start/stop messages for the agents and answer
 * waiting callers, so no job starts that the store does not know is running. It also
 * wakes on a timer (1 s, or sooner for the core's next_wake) to check heartbeats,
 * controller-side time limits, save fair-share usage (every 10 s and at shutdown) and
 * refresh pending reasons. The files it uses are listed in sched_int.h.
 *
 * Example: three submissions arrive within a millisecond; the thread wakes on the
 * first, naps 1 ms so the others gather, submits all three to the core, runs one
 * pass that starts two of them, and commits the three jobs' changes in one batch.
 *
 * In-memory job records are changed by this thread only (under srv->mu), so the store
 * writer may read them during the commit while this thread waits for it.
 */
#include "server/sched_int.h"

#include "common/clock.h"
#include "common/log.h"

#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

static sctx_t g_ctx; /* the one scheduler thread's state */

sctx_t *srv__sched_ctx(void)
{
    return &g_ctx;
}

/* ------------------------------------------------------------------ wake-ups */

/* Waits until a message arrives, the stop is asked, or the timer fires: in 1 s, or at
 * the core's next_wake (seconds) if sooner. */
static void wait_for_work(srv_t *s, int64_t next_wake)
{
    pthread_mutex_lock(&s->sched_mu);
    if (!s->inbox_head && !s->sched_stop) {
        int64_t wake_ms = fg_clock_real_ms() + 1000;
        if (next_wake != FG_TIME_NEVER && next_wake * 1000 < wake_ms)
            wake_ms = next_wake * 1000;
        struct timespec dl = {.tv_sec = wake_ms / 1000, .tv_nsec = (wake_ms % 1000) * 1000000L};
        pthread_cond_timedwait(&s->sched_cv, &s->sched_mu, &dl);
    }
    bool busy = s->inbox_head != NULL;
    pthread_mutex_unlock(&s->sched_mu);
    if (busy && !s->sched_stop) {
        /* let events that arrive together gather: one pass for all of them */
        struct timespec nap = {0, 1000000L};
        nanosleep(&nap, NULL);
    }
}

/* Takes every queued message (a list, oldest first); *stop: whether to stop after this
 * iteration. */
static srv_msg_t *take_inbox(srv_t *s, bool *stop)
{
    pthread_mutex_lock(&s->sched_mu);
    srv_msg_t *batch = s->inbox_head;
    s->inbox_head = s->inbox_tail = NULL;
    *stop = s->sched_stop;
    pthread_mutex_unlock(&s->sched_mu);
    return batch;
}

/* ------------------------------------------------------------------ one iteration */

/* Applies the batch of messages in order (account changes first, once). */
static void apply_messages(sctx_t *c, srv_msg_t *batch)
{
    for (srv_msg_t *m = batch; m; m = m->next)
        if (m->kind == MSG_ACCOUNT) {
            srv__sync_accounts(c);
            break;
        }
    for (srv_msg_t *m = batch; m; m = m->next) {
        switch (m->kind) {
        case MSG_SUBMIT:
            srv__do_submit(c, m);
            break;
        case MSG_CANCEL:
            srv__do_cancel(c, m);
            break;
        case MSG_STARTED:
            srv__do_started(c, m);
            break;
        case MSG_EXITED:
            srv__do_exited(c, m);
            break;
        case MSG_REPORTS:
            srv__do_reports(c, m);
            break;
        case MSG_DRY_RUN:
            srv__do_dry_run(c, m);
            break;

        case MSG_REGISTER:
            srv__do_register(c, m);
            break;
        case MSG_NODE_STATE:
            srv__do_node_state(c, m);
            break;
        default:
            break;
        }
    }
}

/* Heartbeats and controller-side time limits (mu taken here). A controller too busy
 * to read heartbeats does not judge them missed. */
static void check_timers(sctx_t *c)
{
    srv_t *s = c->s;
    int64_t now_ms = srv_now_ms();
    int64_t limit_ms = (int64_t)s->cfg.heartbeat_interval_s * s->cfg.heartbeat_misses * 1000;
    bool behind = srv_http_behind(s, limit_ms);
    pthread_mutex_lock(&s->mu);
    srv_event_gap_check(s);
    if (!behind)
        srv__check_heartbeats(c, now_ms, limit_ms);
    /* a job past its time limit (plus a grace) whose agent did not stop it */
    size_t nrun;
    srv_job_t **run = srv__running_jobs(s, NULL, &nrun);
    for (size_t ri = 0; ri < nrun; ri++) {
        srv_job_t *j = run[ri];
        if (j->stop_sent)
            continue;
        if (c->now > j->r.start_time + j->r.time_limit_s + 30) {
            j->stop_sent = true;
            srv__stop_ranks(c, j, "timeout", -1);
        }
    }
    free(run);
    pthread_mutex_unlock(&s->mu);
}

/* Runs one pass and applies its decisions; returns the core's next wake-up (seconds),
 * FG_TIME_NEVER if the pass failed. The pass's time goes to the metrics. */
static int64_t run_pass(sctx_t *c)
{
    srv_t *s = c->s;
    int64_t t0 = fg_clock_mono_us();
    int rc = fg_sched_pass(c->core, c->now, &c->d);
    long us = (long)(fg_clock_mono_us() - t0);
    atomic_fetch_add(&s->m.passes, 1);
    atomic_fetch_add(&s->m.pass_us_total, us);
    atomic_store(&s->m.last_pass_us, us);
    srv_hist_observe(&s->m.pass_hist, srv_pass_bounds_us, us);
    if (us > atomic_load(&s->m.max_pass_us))
        atomic_store(&s->m.max_pass_us, us);
    if (rc) {
        fg_log(FG_LOG_ERROR, "scheduler: pass failed: %s", fg_strerror(rc));
        return FG_TIME_NEVER;
    }
    srv__apply_decisions(c);
    return c->d.next_wake;
}

/* Expired login sessions leave the store (and memory) every 10 minutes. */
static void expire_sessions(sctx_t *c)
{
    srv_t *s = c->s;
    if (c->now - c->last_session_gc < 600)
        return;
    c->last_session_gc = c->now;
    srv_batch_t gc = {0};
    srv_batch_add(&gc, OP_SESSION_EXPIRE, NULL)->i1 = c->now;
    srv_batch_commit(s, &gc);
    srv_batch_free(&gc);
    pthread_mutex_lock(&s->mu);
    srv_token_sweep(s, c->now);
    pthread_mutex_unlock(&s->mu);
}

/* Refreshes reasons and the fair-share view: every second while things change, every
 * 10 s when idle (estimates and usage still move with time), and at the stop. A
 * refresh reads every live job, so beyond 100,000 of them it comes every n / 100,000
 * seconds instead: the thread reads at most ~100,000 jobs a second for it (300,000
 * pending jobs were a third of its time under the submission benchmark). */
static void refresh_views(sctx_t *c, bool stop)
{
    int64_t nms = srv_now_ms();
    size_t nlive = fg_sched_job_count(c->core);
    int64_t every_ms = nlive > 100000 ? (int64_t)(nlive / 100) : 1000;
    if ((nms - c->last_refresh_ms >= every_ms && c->changed) ||
        nms - c->last_refresh_ms >= (every_ms > 10000 ? every_ms : 10000) || stop) {
        c->last_refresh_ms = nms;
        c->changed = false;
        srv__refresh_reasons(c);
        srv__refresh_fairshare(c);
        if (c->ndirty)
            srv__commit(c); /* the estimates at submission it recorded (sched_estimates.c) */
    }
}

/* One iteration on a batch of messages: apply, pass, commit, refresh. */
static int64_t iterate(sctx_t *c, srv_msg_t *batch, bool stop)
{
    int64_t now = srv_now();
    c->now = now < c->now ? c->now : now; /* never backwards */
    c->last_iter_ms = srv_now_ms();
    apply_messages(c, batch);
    srv__retry_parked(c);
    check_timers(c);
    srv__idle_tick(c);
    srv__bill_accrue(c, stop);
    srv__budget_tick(c);
    int64_t next_wake = run_pass(c);
    if (stop || c->now - c->last_usage_save >= 10)
        srv__save_usage(c);
    if ((batch && !srv__only_whys(batch)) || c->d.nstarts || c->d.npreempts)
        c->changed = true;
    expire_sessions(c);
    srv__commit(c);
    srv__answer_whys(c, batch); /* (after the pass, as the store has it) */
    refresh_views(c, stop);
    return next_wake;
}

/* Is the batch only questions of why jobs wait (MSG_WHY), answered from the last
 * pass without a new one? While that pass is under a second old and no wake-up of the
 * core is due: GETs of pending jobs in a stream then cost no pass each, and a pass still
 * runs at least every second. */
static bool why_only(sctx_t *c, srv_msg_t *batch, bool stop, int64_t next_wake)
{
    if (stop || !srv__only_whys(batch))
        return false;
    if (srv_now_ms() - c->last_iter_ms >= 1000)
        return false;
    return next_wake == FG_TIME_NEVER || next_wake > srv_now();
}

static void *sched_main(void *arg)
{
    prctl(PR_SET_NAME, "fg-scheduler"); /* as top -H and ps -L show it */
    srv_t *s = arg;
    sctx_t *c = &g_ctx;
    int64_t next_wake = FG_TIME_NEVER;
    for (;;) {
        wait_for_work(s, next_wake);
        bool stop;
        srv_msg_t *batch = take_inbox(s, &stop);
        if (why_only(c, batch, stop, next_wake))
            srv__answer_whys(c, batch); /* from the last pass: nothing changed since */
        else
            next_wake = iterate(c, batch, stop);
        while (batch) {
            srv_msg_t *nx = batch->next;
            srv_msg_free(batch);
            batch = nx;
        }
        if (stop)
            break;
    }
    return NULL;
}

/* ------------------------------------------------------------------ start and stop */

int srv_sched_start(srv_t *s)
{
    if (pthread_create(&s->sched_thread, NULL, sched_main, s) != 0)
        return -1;
    s->sched_running = true;
    return 0;
}

void srv_sched_stop(srv_t *s)
{
    if (!s->sched_running)
        return;
    pthread_mutex_lock(&s->sched_mu);
    s->sched_stop = true;
    pthread_cond_signal(&s->sched_cv);
    pthread_mutex_unlock(&s->sched_mu);
    pthread_join(s->sched_thread, NULL);
    s->sched_running = false;
    sctx_t *c = &g_ctx;
    fg_decisions_free(&c->d);
    fg_sched_free(c->core);
    c->core = NULL;
    fg_rt_free(c->rt);
    c->rt = NULL;
    fg_est_scratch_free(c->est_ws);
    c->est_ws = NULL;
    s->core = NULL;
    free(c->parked);
    free(c->dirty);
    free(c->evs);
    free(c->atts);
    free(c->att_kind);
    free(c->usage);
    free(c->node_states);
    free(c->node_upserts);
    free(c->outs);
    free(c->syncs);
    free(c->rows);
    srv_pricebook_free(&c->book);
}
