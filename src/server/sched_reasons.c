/*
 * sched_reasons.c - why each pending job waits, and when it is expected to start:
 * copied from the core into the jobs that GET /v1/jobs shows.
 *
 * The core keeps a reason code and an estimated start per pending job (from its last
 * pass). A refresh (every second while things change, sched.c) copies them into the
 * in-memory jobs. Jobs the last pass reached (those with an estimate) get the core's
 * full explanation (fg_sched_explain); the others, the plain meaning of their code,
 * since explaining them would walk the plan order, O(queue) each.
 * Example: a 4-GPU job behind a reservation shows reason 4 with the text
 * "the GPUs it could use are held for another job" (or the core's longer explanation
 * naming that job) and its estimated start. The estimate is the history-based one of
 * the projection (sched_project.c) for the first estimate_depth jobs of plan order,
 * else the core's limit-based one (kept beside it for comparison, sched_estimates.c).
 */
#include "server/sched_int.h"

#include "common/xalloc.h"

#include <stdlib.h>

/* The plain meaning of "priority" under policy p: what orders the jobs ahead of it. */
static const char *order_reason(fg_policy_t p)
{
    switch (p) {
    case FG_POLICY_FAIR:
        return "other jobs are ahead of it: by class, then LAS queue (least service first), "
               "then fair share";
    case FG_POLICY_WFQ:
        return "other jobs are ahead of it: by class, then fair share";
    case FG_POLICY_FIFO:
        return "an earlier job that cannot start yet blocks the queue";
    case FG_POLICY_PRIORITY:
        return "other jobs are ahead of it: by class, then submit order";
    case FG_POLICY_RR:
        return "other jobs are ahead of it: by class, then users in turn";
    case FG_POLICY_LAS:
        return "other jobs are ahead of it: by LAS queue (least service first), then submit order";
    default:
        return "other jobs are ahead of it";
    }
}

/* The plain meaning of reason code r under policy p (NULL for none). */
static const char *generic_reason(fg_reason_t r, fg_policy_t p)
{
    switch (r) {
    case FG_REASON_PRIORITY:
        return order_reason(p);
    case FG_REASON_RESOURCES:
        return "not enough free GPUs";
    case FG_REASON_FRAGMENTATION:
        return "enough free GPUs, but not on one node (or not whole nodes)";
    case FG_REASON_RESERVATION:
        return "the GPUs it could use are held for another job";
    case FG_REASON_QUOTA:
        return "its account is at its GPU quota";
    case FG_REASON_BUDGET:
        return "its account's budget is exhausted";
    case FG_REASON_RETRY_BACKOFF:
        return "waiting out the retry backoff";
    case FG_REASON_GPU_TYPE:
        return "no node has that GPU type or enough GPUs";
    case FG_REASON_NODES_DOWN:
        return "the nodes it could use are down or draining";
    default:
        return NULL;
    }
}

/* One pending job's reason and estimate, read from the core. */
typedef struct reason_upd {
    uint64_t id;
    int code;
    int64_t est;
    char *text; /* allocated, or NULL for the generic text */
} reason_upd_t;

/* Reads the reason and estimate of every pending job in the core into u (room for
 * all the core's jobs); returns how many. */
static size_t read_reasons(sctx_t *c, reason_upd_t *u)
{
    size_t n = fg_sched_job_count(c->core), nu = 0;
    char buf[FG_REASON_MAX];
    for (size_t k = 0; k < n; k++) {
        fg_job_info_t info;
        if (fg_sched_job_at(c->core, k, &info) || info.state != FG_JOB_PENDING)
            continue;
        reason_upd_t *x = &u[nu++];
        x->id = info.id;
        x->est = info.estimated_start == FG_TIME_NEVER ? 0 : info.estimated_start;
        x->code = (int)info.reason;
        x->text = NULL;
        /* (a budget's text has its figures, estimate or not) */
        if (info.reason != FG_REASON_NONE &&
            (info.estimated_start != FG_TIME_NEVER || info.reason == FG_REASON_BUDGET)) {
            int code = fg_sched_explain(c->core, info.id, c->now, buf, sizeof buf);
            if (code > 0)
                x->code = code;
            x->text = fg_xstrdup(buf);
        }
    }
    return nu;
}

static int cmp_proj(const void *a, const void *b)
{
    uint64_t x = ((const srv_proj_t *)a)->id, y = ((const srv_proj_t *)b)->id;
    return (x > y) - (x < y);
}

/* The projection of job id among pr[0..np) sorted by id, or NULL. */
static const srv_proj_t *find_proj(const srv_proj_t *pr, size_t np, uint64_t id)
{
    srv_proj_t key = {.id = id};
    return np ? bsearch(&key, pr, np, sizeof *pr, cmp_proj) : NULL;
}

/* Sets u[from..to) on the jobs still pending: the projection's estimate where it has
 * one (pr, sorted by id), else the core's; the core's is the limit-based one. mu held. */
static void apply_reasons(sctx_t *c, const reason_upd_t *u, size_t from, size_t to,
                          const srv_proj_t *pr, size_t np)
{
    for (size_t k = from; k < to; k++) {
        const reason_upd_t *x = &u[k];
        srv_job_t *j = srv__job(c, x->id);
        if (!j || j->state != FG_JOB_PENDING)
            continue;
        const srv_proj_t *p = find_proj(pr, np, x->id);
        srv_est_t e = {.p10 = x->est, .p50 = x->est, .p90 = x->est, .source = 4, .limit = x->est};
        if (p && p->p50 && x->est) /* (no estimate where the core sees none: budget, quota) */
            e = (srv_est_t){
                .p10 = p->p10, .p50 = p->p50, .p90 = p->p90, .source = p->source, .limit = x->est};
        srv__est_set(c, j, &e);
        if (x->code != FG_REASON_NONE)
            srv__set_reason(
                j, x->code,
                x->text ? x->text
                        : generic_reason((fg_reason_t)x->code, fg_sched_config(c->core)->policy));
    }
}

/* Copies pending reasons and estimates from the core into memory. The core is read
 * without srv->mu (this thread owns it); the results are applied under the lock in
 * chunks of 1,024 jobs, so HTTP threads are not held up long. */
void srv__refresh_reasons(sctx_t *c)
{
    srv_t *s = c->s;
    size_t n = fg_sched_job_count(c->core);
    if (n == 0)
        return;
    reason_upd_t *u = fg_xmalloc(n * sizeof *u);
    size_t nu = read_reasons(c, u);
    srv_proj_t *pr;
    size_t np = srv__est_project(c, NULL, &pr);
    if (np)
        qsort(pr, np, sizeof *pr, cmp_proj);
    for (size_t i = 0; i < nu; i += 1024) {
        pthread_mutex_lock(&s->mu);
        apply_reasons(c, u, i, nu < i + 1024 ? nu : i + 1024, pr, np);
        pthread_mutex_unlock(&s->mu);
    }
    free(pr);
    for (size_t k = 0; k < nu; k++)
        free(u[k].text);
    free(u);
}
