/*
 * sched_estimates.c - what each job's start estimates were and how far off they came
 * out: the record the accuracy figures (GET /v1/estimates/accuracy, /metrics) are made
 * of (docs/scheduler.md, "Estimates").
 *
 * Every refresh of the pending reasons (sched_reasons.c) hands each pending job its
 * estimate: a start time with a range (p10..p90), where it came from (the job's user's
 * history, its account's, everyone's, or the time limits alone) and, to compare, the
 * core's limit-based estimate. The estimate of the first refresh that sees a job
 * pending is kept as its "estimate at submission" (none when that refresh had none: it
 * was beyond the first estimate_depth of the queue), beside the limit-based one of that
 * moment, and made durable at once; when its first attempt starts, the start time is
 * kept too, and the errors are start - estimate. Jobs read back at a restart count as
 * seen: one without an estimate at submission gets none later.
 * Example: job 7 is submitted at 1000 behind a 60 s-limit job that runs 3 s; the first
 * refresh gives it estimate 1003 (user history, range 1002..1005) and limit-based 1059;
 * it starts at 1004: estimate_error_s = 1, and the limit-based error is -55.
 *
 * Every function here runs on the scheduler thread with srv->mu held.
 */
#include "server/sched_int.h"

#include <assert.h>

void srv__est_set(sctx_t *c, srv_job_t *j, const srv_est_t *e)
{
    assert(j->state == FG_JOB_PENDING);
    assert(e->p50 == 0 || (e->p10 <= e->p50 && e->p50 <= e->p90));
    fg_store_job_t *r = &j->r;
    r->estimated_start = e->p50;
    r->est_p10 = e->p50 ? e->p10 : 0;
    r->est_p90 = e->p50 ? e->p90 : 0;
    r->est_source = e->p50 ? e->source : 0;
    j->est_limit = e->limit;
    /* the estimate at submission: the first refresh's, if it had one (a job deep in the
     * queue gets none: the one it gets when it nears the head says little of what was
     * known when it was submitted) */
    bool first = !j->est_seen;
    j->est_seen = true;
    if (!first || e->p50 <= 0 || r->est_submit || r->attempts || r->est_first_start)
        return;
    r->est_submit = e->p50;
    r->est_submit_p10 = e->p10;
    r->est_submit_p90 = e->p90;
    r->est_submit_source = e->source;
    r->est_limit_submit = e->limit;
    srv__mark_dirty(c, j); /* durable with the refresh's own commit (sched.c) */
}

void srv__est_started(sctx_t *c, srv_job_t *j)
{
    if (!j->r.est_first_start) {
        j->r.est_first_start = c->now;
        srv_est_window_add(c->s, j);
    }
    j->r.est_p10 = j->r.est_p90 = 0;
    j->r.est_source = 0;
    j->est_limit = 0;
}

const char *srv_est_source_name(int source)
{
    static const char *const names[] = {NULL, "user", "account", "all", "limit"};
    return source >= 1 && source <= 4 ? names[source] : NULL;
}
