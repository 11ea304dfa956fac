/*
 * h_dry_run.c - POST /v1/jobs?dry_run=true: when would this job start if it were
 * submitted now? Nothing is stored, started or shown to anyone else.
 *
 * The request is checked exactly as a submission (body, account, membership, allowed
 * classes, budget, caps: h_jobs.c). The scheduler thread then hands the job to the core
 * under an id no real job has (DRY_ID_BASE + n), asks the core why it would wait
 * (fg_sched_explain), projects the queue with it (sched_project.c) and takes it out of
 * the core again (fg_sched_cancel), all within one message: no pass runs in between,
 * so no decision ever sees it, and nothing reaches the store (no commit holds it).
 * Example: on a cluster whose one GPU runs a 60 s-limit job of alice's for 1 s, her
 * history saying her jobs run 3 s, the answer is
 *   {"estimated_start": now + 2, "estimated_start_p10": now + 2, "estimated_start_p90":
 *    now + 2, "reason_code": "resources", "reason": "...", "estimate_source": "user"}
 * A job beyond the first estimate_depth of plan order gets no estimate (null), as a
 * pending one would not; one no node can hold gets null and reason gpu_type.
 */
#include "server/sched_int.h"
#include "server/submit_body.h"

#include <stdio.h>
#include <string.h>

#define DRY_ID_BASE (UINT64_C(1) << 62) /* far above any stored job's id */

int srv_dry_run_flag(srv_req_t *r)
{
    const char *v = srv_query(r, "dry_run");
    return v && strcmp(v, "false") && strcmp(v, "0");
}

int srv_dry_run_call(srv_req_t *r, const char *account, const srv_submit_in_t *in)
{
    const char *v = srv_query(r, "dry_run");
    if (!v || (strcmp(v, "true") && strcmp(v, "1")))
        return srv_reply_error(r, 400, "invalid_argument", "dry_run",
                               "dry_run must be true or false");
    srv_msg_t *m = srv_msg_new(MSG_DRY_RUN);
    m->json = json_pack("{s:s,s:I,s:s*,s:I,s:i,s:I,s:I,s:I}", "account", account, "user_id",
                        (json_int_t)r->user_id, "gpu_type", in->gpu_type, "gpus",
                        (json_int_t)in->gpus, "priority", in->prio, "time_limit_s",
                        (json_int_t)in->time_limit_s, "max_retries", (json_int_t)in->max_retries,
                        "checkpoint_interval_s", (json_int_t)in->checkpoint_interval_s);
    return srv_sched_call(r, m);
}

/* ------------------------------------------------------------------ scheduler thread */

/* The answer: the projection p (NULL: none) and the reason (code <= 0: none). */
static json_t *answer(const srv_proj_t *p, int code, const char *why)
{
    json_t *o = json_object();
    bool has = p && p->p50;
    json_object_set_new(o, "estimated_start", has ? json_integer(p->p50) : json_null());
    json_object_set_new(o, "estimated_start_p10", has ? json_integer(p->p10) : json_null());
    json_object_set_new(o, "estimated_start_p90", has ? json_integer(p->p90) : json_null());
    json_object_set_new(o, "reason_code",
                        code > 0 ? json_string(fg_reason_code((fg_reason_t)code)) : json_null());
    json_object_set_new(o, "reason", code > 0 && why && *why ? json_string(why) : json_null());
    const char *src = has ? srv_est_source_name(p->source) : NULL;
    json_object_set_new(o, "estimate_source", src ? json_string(src) : json_null());
    return o;
}

/* Places the job of spec sp in the core, reads its reason and projection, takes it out. */
static json_t *try_in_core(sctx_t *c, const fg_job_spec_t *sp, int rc)
{
    if (rc == FG_EQUOTA)
        return answer(NULL, FG_REASON_QUOTA, "its GPUs exceed its account's quota");
    if (rc == FG_ENOFIT)
        return answer(NULL, FG_REASON_GPU_TYPE, "no node can hold that many GPUs of that type yet");
    char why[FG_REASON_MAX] = "";
    int code = fg_sched_explain(c->core, sp->id, c->now, why, sizeof why);
    srv_dry_job_t extra = {.id = sp->id, .gpu_type = sp->gpu_type};
    srv_proj_t *pr;
    size_t np = srv__est_project(c, &extra, &pr);
    const srv_proj_t *mine = NULL;
    for (size_t i = 0; i < np; i++)
        if (pr[i].id == sp->id)
            mine = &pr[i];
    json_t *o = answer(mine, code, why);
    free(pr);
    fg_sched_cancel(c->core, sp->id, c->now);
    return o;
}

void srv__do_dry_run(sctx_t *c, srv_msg_t *m)
{
    srv_t *s = c->s;
    json_int_t uid = 0, gpus = 0, tl = 0, retries = 0, ckpt = 0;
    int prio = 0;
    const char *account = NULL, *gpu_type = NULL;
    if (json_unpack(m->json, "{s:s,s:I,s?s,s:I,s:i,s:I,s:I,s:I}", "account", &account, "user_id",
                    &uid, "gpu_type", &gpu_type, "gpus", &gpus, "priority", &prio, "time_limit_s",
                    &tl, "max_retries", &retries, "checkpoint_interval_s", &ckpt))
        account = NULL; /* (made by srv_dry_run_call: cannot happen) */
    srv_job_t tmp = {.r = {.account = (char *)account,
                           .user_id = uid,
                           .gpus = (int32_t)gpus,
                           .gpu_type = (char *)gpu_type,
                           .priority = prio,
                           .time_limit_s = tl,
                           .max_retries = (int32_t)retries,
                           .checkpoint_interval_s = ckpt,
                           .submit_time = c->now}};
    fg_job_spec_t sp;
    char user[80];
    pthread_mutex_lock(&s->mu);
    srv__fill_spec(s, &tmp, &sp, user, sizeof user);
    sp.limit_cost = srv__limit_cost(c, &tmp);
    pthread_mutex_unlock(&s->mu);
    sp.id = DRY_ID_BASE + ++c->dry_runs;
    int rc = !account ? FG_EINVAL : fg_sched_check_fit(c->core, sp.gpus, sp.gpu_type);
    if (rc == 0)
        rc = fg_sched_submit(c->core, &sp, c->now);
    if (rc == FG_ENOENT) { /* an account or member the core does not know yet */
        srv__sync_accounts(c);
        rc = fg_sched_submit(c->core, &sp, c->now);
    }
    if (rc == 0 || rc == FG_EQUOTA || rc == FG_ENOFIT)
        srv__sync_ok(m->sync, 200, try_in_core(c, &sp, rc));
    else
        srv__sync_error(m->sync, 409, "conflict", "the scheduler would not take it: %s",
                        fg_strerror(rc));
    srv__add_sync(c, m->sync);
}
