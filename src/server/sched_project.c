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
 * A projection reads the core: each node's GPUs and the running job on each, whose
 * remaining run is predicted from its user's history given how long it has run; the
 * first estimate_depth pending jobs in plan order (fg_sched_plan_order), each with its
 * predicted run. fg_proj_run then starts them in that order as GPUs free up (with
 * backfill), once with every run at its p10, once at p50 and once at p90: a job's three
 * starts are its estimate (p50) and its range.
 * Example: one GPU, alice's job running 1 s of a 60 s limit, and her last five jobs
 * ran 3 s of 60 s: its remaining run is 2 s (p10 = p50 = p90), so the job behind it is
 * estimated to start in 2 s, source "user"; the core's limit-based estimate says 59 s.
 *
 * Cost: O(nodes x GPUs) to read the nodes, one prediction per running GPU (O(log 50)),
 * then 3 x fg_proj_run over estimate_depth jobs; independent of the queue's length
 * beyond what fg_sched_plan_order costs (docs/perf/2026-12-estimates-controller.md).
 *
 * Every function here runs on the scheduler thread.
 */
#include "server/sched_int.h"

#include "common/xalloc.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define RT_REBUILD_MAX 20000 /* ended jobs read back into the model at start-up */
#define PROJ_TYPES_MAX 64    /* distinct GPU types told apart (others: one more type) */

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

/* ------------------------------------------------------------------ projection input */

/* The small integer of GPU type t among types[] (a node's type is added when new and
 * room is left; a type no node has is PROJ_TYPES_MAX); -1 for any type. */
static int32_t type_id(const char *t, const char **types, int32_t *ntypes, bool add)
{
    if (!t || !*t)
        return -1;
    for (int32_t i = 0; i < *ntypes; i++)
        if (!strcmp(types[i], t))
            return i;
    if (!add || *ntypes == PROJ_TYPES_MAX)
        return PROJ_TYPES_MAX;
    types[*ntypes] = t;
    return (*ntypes)++;
}

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

/* The predicted remaining run of running job id at p10, p50 and p90 into rem[3]. */
static void remaining(sctx_t *c, names_t *nm, fg_job_id_t id, fg_time_t rem[3])
{
    rem[0] = rem[1] = rem[2] = 1;
    fg_job_info_t ji;
    if (fg_sched_job_info(c->core, id, &ji) || ji.state != FG_JOB_RUNNING)
        return;
    const char *acct, *user;
    names_of(nm, c->core, &ji, &acct, &user);
    fg_time_t ran = c->now > ji.start_time ? c->now - ji.start_time : 0;
    if (ran >= ji.time_limit_s)
        return;
    fg_rt_pred_t p;
    fg_rt_predict(c->rt, acct, user, ji.time_limit_s, ran, &p);
    rem[0] = p.p10;
    rem[1] = p.p50;
    rem[2] = p.p90;
}

/* The nodes as the projection sees them at p10, p50 and p90 (nodes[q], the returned
 * count each; the caller frees them): when each GPU is free. The nodes' GPU types go
 * into types[] (matched exactly, as the core does). Each running job is predicted once. */
static int32_t read_nodes(sctx_t *c, names_t *nm, const char **types, int32_t *ntypes,
                          fg_proj_node_t *nodes[3])
{
    size_t n = fg_sched_node_count(c->core);
    for (int q = 0; q < 3; q++)
        nodes[q] = fg_xcalloc(n ? n : 1, sizeof *nodes[q]);
    for (size_t k = 0; k < n; k++) {
        fg_node_info_t ni;
        if (fg_sched_node_info(c->core, (int)k, &ni))
            continue;
        fg_proj_node_t *p = &nodes[1][k];
        p->gpus = ni.gpus;
        p->type = type_id(ni.gpu_type, types, ntypes, true);
        p->up = ni.state == FG_NODE_UP;
        nodes[0][k] = nodes[2][k] = *p;
        fg_time_t rem[3] = {0, 0, 0};
        for (int32_t g = 0; g < ni.gpus; g++) {
            fg_job_id_t id = ni.gpu_job[g];
            /* a job on several GPUs: one prediction, reused */
            if (id && (g == 0 || id != ni.gpu_job[g - 1]))
                remaining(c, nm, id, rem);
            for (int q = 0; q < 3; q++)
                nodes[q][k].free_at[g] = c->now + (id ? rem[q] : 0);
        }
    }
    return (int32_t)n;
}

/* The pending jobs of the projection: the first `max` of plan order, with their three
 * predicted runs (run[3 * i + q]) and sources. mu taken for their GPU types. */
static size_t read_jobs(sctx_t *c, names_t *nm, size_t max, const char **types, int32_t *ntypes,
                        fg_job_id_t *ids, fg_proj_job_t *jobs, fg_time_t *runs, int *src,
                        const srv_dry_job_t *extra)
{
    size_t n = fg_sched_plan_order(c->core, c->now, ids, max);
    pthread_mutex_lock(&c->s->mu);
    for (size_t i = 0; i < n; i++) {
        fg_job_info_t ji;
        fg_rt_pred_t p = {.p10 = 1, .p50 = 1, .p90 = 1, .source = FG_RT_LIMIT};
        const srv_job_t *j = extra && ids[i] == extra->id ? NULL : srv__job(c, ids[i]);
        const char *gt = extra && ids[i] == extra->id ? extra->gpu_type : j ? j->r.gpu_type : NULL;
        jobs[i] = (fg_proj_job_t){.gpus = 1, .type = type_id(gt, types, ntypes, false)};
        if (fg_sched_job_info(c->core, ids[i], &ji) == 0) {
            const char *acct, *user;
            names_of(nm, c->core, &ji, &acct, &user);
            fg_rt_predict(c->rt, acct, user, ji.time_limit_s, 0, &p);
            jobs[i].gpus = ji.gpus;
            jobs[i].not_before = ji.eligible_time;
        }
        runs[3 * i] = p.p10;
        runs[3 * i + 1] = p.p50;
        runs[3 * i + 2] = p.p90;
        src[i] = (int)p.source + 1;
    }
    pthread_mutex_unlock(&c->s->mu);
    return n;
}

/* ------------------------------------------------------------------ projection */

size_t srv__est_project(sctx_t *c, const srv_dry_job_t *extra, srv_proj_t **out)
{
    *out = NULL;
    int32_t depth = fg_sched_config(c->core)->estimate_depth;
    size_t max = depth > 0 ? (size_t)depth : 0;
    if (!c->rt || !max || fg_sched_pending_count(c->core) == 0)
        return 0;
    const char *types[PROJ_TYPES_MAX];
    int32_t ntypes = 0;
    fg_job_id_t *ids = fg_xmalloc(max * sizeof *ids);
    fg_proj_job_t *jobs = fg_xmalloc(max * sizeof *jobs);
    fg_time_t *runs = fg_xmalloc(3 * max * sizeof *runs), *start = fg_xmalloc(max * sizeof *start);
    int *src = fg_xmalloc(max * sizeof *src);
    /* the node types first, so that a job's type is one of theirs when it exists */
    fg_proj_node_t *nodes[3];
    names_t nm;
    names_init(&nm, c->core);
    int32_t nn = read_nodes(c, &nm, types, &ntypes, nodes);
    size_t n = read_jobs(c, &nm, max, types, &ntypes, ids, jobs, runs, src, extra);
    names_free(&nm);
    srv_proj_t *res = fg_xcalloc(n ? n : 1, sizeof *res);
    for (int q = 0; q < 3; q++) {
        for (size_t i = 0; i < n; i++)
            jobs[i].run_s = runs[3 * i + q];
        if (n)
            fg_proj_run(nodes[q], nn, jobs, (int32_t)n, c->now, start);
        for (size_t i = 0; i < n; i++) {
            int64_t t = start[i] == FG_TIME_NEVER ? 0 : start[i];
            res[i].id = ids[i];
            res[i].source = src[i];
            *(q == 0 ? &res[i].p10 : q == 1 ? &res[i].p50 : &res[i].p90) = t;
        }
        free(nodes[q]);
    }
    for (size_t i = 0; i < n; i++) /* each run is placed alone: keep the range ordered */
        if (res[i].p50 && res[i].p10 && res[i].p90) {
            if (res[i].p10 > res[i].p50)
                res[i].p10 = res[i].p50;
            if (res[i].p90 < res[i].p50)
                res[i].p90 = res[i].p50;
        } else {
            res[i].p10 = res[i].p50 = res[i].p90 = 0;
        }
    free(ids);
    free(jobs);
    free(runs);
    free(start);
    free(src);
    *out = res;
    return n;
}
