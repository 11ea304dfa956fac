/*
 * sched_project.c - history-based start estimates in the controller: the run-time model
 * it owns (fairgpu/estimate.h) and the projection of the queue made at each refresh of
 * the pending reasons (docs/scheduler.md, "Estimates").
 *
 * The model learns from every job that ends on its own (completed, failed, timed out):
 * its run time (GPU-seconds of its attempts / GPUs) against its limit. At start-up it
 * is rebuilt from the newest ended jobs in memory (at most RT_REBUILD_MAX of them), and
 * every job read back counts as seen by a refresh (sched_estimates.c).
 *
 * A projection is the queue estimate the simulator makes too (fg_est_queue,
 * src/estimate/queue.c): of the first estimate_depth pending jobs in plan order
 * (fg_sched_plan_order), with the core's preemption rule (fair, wfq, rr, las: a job may
 * start at now + preempt_wait_s in room held by long runners) and its no-backfill rule
 * (fifo or backfill off: in plan order). What the core does not tell, est_job gives
 * from the controller's jobs: account and user names, a pending job's GPU type, a
 * running job's checkpoint interval; a running job's prediction is given this attempt's
 * run. A job's three starts are its estimate (p50) and its range.
 * Example: one GPU, alice's job running 1 s of a 60 s limit, and her last five jobs
 * ran 3 s of 60 s: its remaining run is 2 s (p10 = p50 = p90), so the job behind it is
 * estimated to start in 2 s, source "user"; the core's limit-based estimate says 59 s.
 *
 * Cost: O(nodes x GPUs) to read the nodes, one prediction per running job (O(log 50)),
 * then three projections of estimate_depth jobs; independent of the queue's length
 * beyond what fg_sched_plan_order costs (docs/perf/2026-12-estimates-controller.md).
 *
 * Every function here runs on the scheduler thread.
 */
#include "server/sched_int.h"

#include "common/xalloc.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RT_REBUILD_MAX 20000 /* ended jobs read back into the model at start-up */

/* ------------------------------------------------------------------ the model */

/* How long j ran in all (its attempts), in seconds. */
static int64_t ran_s(const srv_job_t *j)
{
    if (j->r.gpus > 0 && j->r.attained_gpu_s > 0)
        return j->r.attained_gpu_s / j->r.gpus;
    return j->r.end_time > j->r.start_time ? j->r.end_time - j->r.start_time : 0;
}

static bool ended_on_its_own(fg_job_state_t st)
{
    return st == FG_JOB_COMPLETED || st == FG_JOB_FAILED || st == FG_JOB_TIMEOUT;
}

/* Gives the model ended job j (one that ended on its own). mu held. */
static void record(sctx_t *c, const srv_job_t *j)
{
    if (!ended_on_its_own(j->state) || j->r.time_limit_s <= 0 || !j->r.attempts)
        return;
    srv_user_t *u = srv_user_by_id(c->s, j->r.user_id);
    fg_rt_record(c->rt, j->r.account, u ? u->r.username : NULL, j->r.time_limit_s, ran_s(j));
}

void srv__est_job_ended(sctx_t *c, const srv_job_t *j)
{
    if (c->rt)
        record(c, j);
}

void srv__est_model_build(sctx_t *c)
{
    srv_t *s = c->s;
    fg_rt_free(c->rt);
    c->rt = fg_rt_new();
    /* the newest ended jobs, recorded oldest first (the model keeps the last ones) */
    uint64_t first = s->max_job_id + 1;
    size_t n = 0;
    while (first > 1 && n < RT_REBUILD_MAX) {
        const srv_job_t *j = s->jobs[first - 2];
        first--;
        if (j && ended_on_its_own(j->state))
            n++;
    }
    for (uint64_t id = first; id <= s->max_job_id; id++)
        if (s->jobs[id - 1])
            record(c, s->jobs[id - 1]);
    /* jobs from before the restart: their estimate at submission is settled */
    for (uint64_t id = 1; id <= s->max_job_id; id++)
        if (s->jobs[id - 1])
            s->jobs[id - 1]->est_seen = true;
}

/* ------------------------------------------------------------------ the jobs */

/* The core's account and user names by index, looked up once per projection
 * (fg_sched_*_info are O(accounts), O(members) a call: 4,000 running jobs of 1,000
 * members made member lookups a fifth of a projection). */
typedef struct names {
    const char **acct, **user;
    size_t nacct, nuser;
} names_t;

static void names_init(names_t *nm, const fg_sched_t *core)
{
    nm->nacct = fg_sched_account_count(core);
    nm->nuser = fg_sched_member_count(core);
    nm->acct = fg_xcalloc(nm->nacct ? nm->nacct : 1, sizeof *nm->acct);
    nm->user = fg_xcalloc(nm->nuser ? nm->nuser : 1, sizeof *nm->user);
}

static void names_free(names_t *nm)
{
    free(nm->acct);
    free(nm->user);
}

/* The account and user names of job info ji (NULL where unknown). */
static void names_of(names_t *nm, const fg_sched_t *core, const fg_job_info_t *ji,
                     const char **acct, const char **user)
{
    *acct = *user = NULL;
    if (ji->account >= 0 && (size_t)ji->account < nm->nacct) {
        fg_account_info_t ai;
        if (!nm->acct[ji->account] && fg_sched_account_info(core, ji->account, &ai) == 0)
            nm->acct[ji->account] = ai.name;
        *acct = nm->acct[ji->account];
    }
    if (ji->member >= 0 && (size_t)ji->member < nm->nuser) {
        fg_member_info_t mi;
        if (!nm->user[ji->member] && fg_sched_member_info(core, ji->member, &mi) == 0)
            nm->user[ji->member] = mi.user;
        *user = nm->user[ji->member];
    }
}

/* What a projection asks of the controller's jobs (fg_est_job_fn). */
typedef struct est_ctx {
    sctx_t *c;
    names_t nm;
    const srv_dry_job_t *extra;
    char gpu_type[FG_NAME_MAX + 1]; /* the last pending job's, copied under mu */
} est_ctx_t;

/* Copies into x->gpu_type the GPU type pending job id asks for, and for a running one
 * its checkpoint interval into *ckpt; into *kept the run time its checkpoints kept over
 * its earlier attempts (mu taken). */
static void job_extras(est_ctx_t *x, fg_job_id_t id, bool running, fg_time_t *ckpt, fg_time_t *kept)
{
    x->gpu_type[0] = '\0';
    if (!running && x->extra && id == x->extra->id) {
        if (x->extra->gpu_type)
            snprintf(x->gpu_type, sizeof x->gpu_type, "%s", x->extra->gpu_type);
        return;
    }
    pthread_mutex_lock(&x->c->s->mu);
    const srv_job_t *j = srv__job(x->c, id);
    if (j)
        *kept = j->kept_s;
    if (j && running)
        *ckpt = j->r.checkpoint_interval_s;
    else if (j && j->r.gpu_type)
        snprintf(x->gpu_type, sizeof x->gpu_type, "%s", j->r.gpu_type);
    pthread_mutex_unlock(&x->c->s->mu);
}

/* The controller's view of live job id for fg_est_queue: a job's prediction is given
 * what its checkpoints kept over its earlier attempts (a job that does not checkpoint
 * restarts from nothing), plus this attempt's run when running. */
static void est_job(void *ctx, fg_job_id_t id, fg_time_t now, fg_est_job_t *out)
{
    est_ctx_t *x = ctx;
    fg_job_info_t ji;
    if (fg_sched_job_info(x->c->core, id, &ji))
        return; /* (the core just named it: cannot happen) */
    const bool running = ji.state == FG_JOB_RUNNING;
    names_of(&x->nm, x->c->core, &ji, &out->account, &out->user);
    fg_time_t kept = 0;
    job_extras(x, id, running, &out->checkpoint_s, &kept);
    if (ji.time_limit_s > 0 && kept >= ji.time_limit_s)
        kept = ji.time_limit_s - 1;
    out->gpu_type = x->gpu_type;
    out->gpus = ji.gpus;
    out->limit_s = ji.time_limit_s;
    if (running) {
        const fg_time_t attempt = now > ji.start_time ? now - ji.start_time : 0;
        out->ran_s = kept + attempt;
        out->attempt_s = attempt;
        out->served_s = attempt + (ji.gpus > 0 ? ji.attained_gpu_s / ji.gpus : 0);
    } else {
        out->ran_s = kept;
        out->not_before = ji.eligible_time;
    }
}

/* ------------------------------------------------------------------ projection */

size_t srv__est_project(sctx_t *c, const srv_dry_job_t *extra, srv_proj_t **out)
{
    *out = NULL;
    int32_t depth = fg_sched_config(c->core)->estimate_depth;
    size_t max = depth > 0 ? (size_t)depth : 0;
    if (!c->rt || !max || fg_sched_pending_count(c->core) == 0)
        return 0;
    fg_job_id_t *ids = fg_xmalloc(max * sizeof *ids);
    size_t n = fg_sched_plan_order(c->core, c->now, ids, max);
    fg_est_start_t *st = fg_xmalloc((n ? n : 1) * sizeof *st);
    est_ctx_t x = {.c = c, .extra = extra};
    names_init(&x.nm, c->core);
    if (!c->est_ws)
        c->est_ws = fg_est_scratch_new(); /* (freed with the model, sched.c) */
    fg_est_queue(c->est_ws, c->core, c->rt, c->now, ids, n, est_job, &x, st);
    names_free(&x.nm);
    srv_proj_t *res = fg_xcalloc(n ? n : 1, sizeof *res);
    for (size_t i = 0; i < n; i++) {
        res[i].id = ids[i];
        res[i].source = (int)st[i].source + 1;
        if (st[i].p90 != FG_TIME_NEVER) { /* (sorted: none never, or no estimate) */
            res[i].p10 = st[i].p10;
            res[i].p50 = st[i].p50;
            res[i].p90 = st[i].p90;
        }
    }
    free(ids);
    free(st);
    *out = res;
    return n;
}
