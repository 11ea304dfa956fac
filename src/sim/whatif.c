/*
 * whatif.c - a live queue replayed under other settings (see whatif.h).
 *
 * The snapshot becomes a trace: each account a tenant, each running job a job
 * submitted at t = 0 that runs what is predicted to be left of it, each pending job a
 * job submitted at t = 1 (in live submit order) that runs its predicted run time, and
 * each job's time limit its own (what is left of it when running). The accounts carry
 * their decayed usage into the replay (the core's fair share starts where the live one
 * is), and their quotas come in force after t = 0, once the running jobs are placed.
 *
 * Worked example: one node of 8 GPUs; account a runs an 8-GPU job with 1 h left and
 * has an 8-GPU job of 1 h pending (submitted first); account b has a 1-GPU job of 1 h
 * pending. Under fifo a's pending job starts at 1 h and b's at 2 h. Under wfq, with a's
 * usage far above b's, b's job goes first at 1 h and a's after it at 2 h: the
 * comparison shows b's mean wait falling by an hour and a's rising by one.
 */
#include "sim/whatif.h"

#include "common/xalloc.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fg_whatif_settings_copy(const fg_whatif_settings_t *in, size_t naccounts,
                             fg_whatif_settings_t *out)
{
    size_t na = naccounts ? naccounts : 1, ng = in->ngroups ? in->ngroups : 1;
    out->cfg = in->cfg;
    out->ngroups = in->ngroups;
    out->groups = fg_xmalloc(ng * sizeof *out->groups);
    out->weights = fg_xmalloc(na * sizeof *out->weights);
    out->quotas = fg_xmalloc(na * sizeof *out->quotas);
    if (in->ngroups)
        memcpy(out->groups, in->groups, in->ngroups * sizeof *out->groups);
    if (naccounts) {
        memcpy(out->weights, in->weights, naccounts * sizeof *out->weights);
        memcpy(out->quotas, in->quotas, naccounts * sizeof *out->quotas);
    }
}

void fg_whatif_settings_free(fg_whatif_settings_t *s)
{
    free(s->groups);
    free(s->weights);
    free(s->quotas);
    memset(s, 0, sizeof *s);
}

/* A job's place in the replay: running jobs first, then pending ones by submit time. */
typedef struct replay_key {
    bool running;
    int64_t submit;
    size_t index;
} replay_key_t;

static int cmp_replay_key(const void *a, const void *b)
{
    const replay_key_t *x = a, *y = b;
    if (x->running != y->running)
        return x->running ? -1 : 1;
    if (!x->running && x->submit != y->submit)
        return x->submit < y->submit ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* The trace of the snapshot; order[k] is the snapshot index of trace job k. */
static void build_trace(const fg_whatif_snapshot_t *snap, fg_trace_t *t, size_t *order)
{
    memset(t, 0, sizeof *t);
    t->name = "snapshot";
    t->ntenants = snap->naccounts;
    t->tenants = fg_xmalloc((snap->naccounts ? snap->naccounts : 1) * sizeof *t->tenants);
    for (size_t a = 0; a < snap->naccounts; a++)
        t->tenants[a] = (char *)snap->accounts[a].name;
    replay_key_t *keys = fg_xmalloc((snap->njobs ? snap->njobs : 1) * sizeof *keys);
    for (size_t i = 0; i < snap->njobs; i++)
        keys[i] = (replay_key_t){snap->jobs[i].running, snap->jobs[i].submit, i};
    qsort(keys, snap->njobs, sizeof *keys, cmp_replay_key);
    for (size_t i = 0; i < snap->njobs; i++)
        order[i] = keys[i].index;
    free(keys);
    t->njobs = snap->njobs;
    t->jobs = fg_xcalloc(snap->njobs ? snap->njobs : 1, sizeof *t->jobs);
    for (size_t k = 0; k < snap->njobs; k++) {
        const fg_whatif_job_t *j = &snap->jobs[order[k]];
        t->jobs[k] = (fg_trace_job_t){
            .submit = j->running ? 0 : 1,
            .duration = j->run_s,
            .gpus = j->gpus,
            .tenant = j->account,
            .line = (int64_t)order[k] + 1,
            .limit_s = j->limit_s,
        };
    }
}

/* Checks what the replay relies on; a message in err and -1 when it does not hold. */
static int snapshot_check(const fg_whatif_snapshot_t *snap, const fg_whatif_settings_t *set,
                          char *err, size_t errlen)
{
    for (size_t i = 0; i < snap->njobs; i++) {
        const fg_whatif_job_t *j = &snap->jobs[i];
        if (j->account < 0 || (size_t)j->account >= snap->naccounts || j->gpus < 1 ||
            (j->gpus > 8 && j->gpus % 8) || j->gpus > FG_MAX_JOB_GPUS || j->limit_s < 1 ||
            j->run_s < 1 || j->run_s > j->limit_s) {
            snprintf(err, errlen, "snapshot job %zu: bad account, size or run time", i);
            return -1;
        }
    }
    for (size_t a = 0; a < snap->naccounts; a++)
        if (!(set->weights[a] > 0) || !(snap->accounts[a].usage_gpu_s >= 0)) {
            snprintf(err, errlen, "account %s: weight must be > 0 and usage >= 0",
                     snap->accounts[a].name);
            return -1;
        }
    return 0;
}

/* Sums the records of the pending jobs into per-account and overall figures. */
static void figures_fill(const fg_whatif_snapshot_t *snap, const fg_jobrec_t *recs,
                         const size_t *order, fg_whatif_result_t *res)
{
    double *wait_sum = fg_xcalloc(snap->naccounts + 1, sizeof *wait_sum);
    double *jct_sum = fg_xcalloc(snap->naccounts + 1, sizeof *jct_sum);
    for (size_t k = 0; k < snap->njobs; k++) {
        const fg_whatif_job_t *j = &snap->jobs[order[k]];
        const fg_jobrec_t *r = &recs[k];
        fg_whatif_figures_t *f[2] = {&res->accounts[j->account], &res->all};
        size_t slot[2] = {(size_t)j->account, snap->naccounts};
        for (int w = 0; w < 2; w++) {
            if (!r->ends) {
                f[w]->skipped_jobs++;
                continue;
            }
            f[w]->gpu_s += (double)r->gpu_seconds;
            if (j->running)
                continue;
            int64_t wait = r->start - r->submit;
            f[w]->pending_jobs++;
            wait_sum[slot[w]] += (double)wait;
            jct_sum[slot[w]] += (double)(r->end - r->submit);
            if (wait > f[w]->wait_max_s)
                f[w]->wait_max_s = wait;
        }
    }
    const double cap = (double)res->gpus * (double)(res->makespan_s > 0 ? res->makespan_s : 1);
    for (size_t a = 0; a <= snap->naccounts; a++) {
        fg_whatif_figures_t *f = a < snap->naccounts ? &res->accounts[a] : &res->all;
        if (f->pending_jobs) {
            f->wait_avg_s = wait_sum[a] / (double)f->pending_jobs;
            f->jct_avg_s = jct_sum[a] / (double)f->pending_jobs;
        }
        f->utilization = f->gpu_s / cap;
    }
    free(wait_sum);
    free(jct_sum);
}

int fg_whatif_run(const fg_whatif_snapshot_t *snap, const fg_whatif_settings_t *set,
                  fg_whatif_result_t *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    if (snapshot_check(snap, set, err, errlen) < 0)
        return -1;
    fg_trace_t t;
    size_t *order = fg_xmalloc((snap->njobs ? snap->njobs : 1) * sizeof *order);
    build_trace(snap, &t, order);
    double *usage = fg_xmalloc((snap->naccounts ? snap->naccounts : 1) * sizeof *usage);
    for (size_t a = 0; a < snap->naccounts; a++)
        usage[a] = snap->accounts[a].usage_gpu_s;
    fg_sim_opts_t o;
    fg_sim_opts_default(&o);
    o.cfg = set->cfg;
    o.groups = set->groups;
    o.ngroups = set->ngroups;
    o.weights = set->weights;
    o.usage = usage;
    o.quotas = set->quotas;
    o.quotas_from = 1;         /* after the running jobs are placed */
    o.stuck_ends = true;       /* a requeued job above a lowered quota never runs again */
    o.time_limit_factor = 1.0; /* every job carries its own limit */
    fg_sim_result_t r;
    fg_jobrec_t *recs = NULL;
    int rc = fg_sim_run_recs(&t, &o, &r, &recs, err, errlen);
    if (rc == 0) {
        res->accounts = fg_xcalloc(snap->naccounts ? snap->naccounts : 1, sizeof *res->accounts);
        res->gpus = r.gpus;
        res->makespan_s = r.makespan_s;
        res->preemptions = r.preemptions;
        figures_fill(snap, recs, order, res);
        fg_sim_recs_free(recs, &t);
    }
    free(usage);
    free(t.jobs);
    free(t.tenants);
    free(order);
    return rc;
}

void fg_whatif_result_free(fg_whatif_result_t *res)
{
    free(res->accounts);
    memset(res, 0, sizeof *res);
}
