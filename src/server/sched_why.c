/*
 * sched_why.c - why a pending job waits, with the evidence: the "why" object of
 * GET /v1/jobs/{id} for a pending job (docs/api.md, "Why a job waits").
 *
 * The core is the scheduler thread's alone, so GET of a pending job posts MSG_WHY
 * (srv_why_get) and parks. After the iteration's pass and commit (or at once, from the
 * last pass, when the batch is only MSG_WHY and that pass is under a second old:
 * sched.c, why_only), the thread asks the core for every MSG_WHY of the iteration at
 * once (fg_sched_why_many, fairgpu/why.h: ONE walk of the plan order, bounded, however
 * many ask) and answers each with {code, text, evidence}; the request resumes, renders
 * the job as always and adds "why" while the job is still pending. Other states answer
 * at once, without it.
 *
 * The evidence is that of the reason (whichever apply): fair_share and position for a
 * job that waits for others' GPUs (priority, resources, fragmentation, reservation);
 * reservation, quota, budget, backoff for those; gpus (of its type) always;
 * fragmentation (free per node, the nodes that could hold it and when) for resources,
 * fragmentation and reservation. Jobs ahead show id, account, GPUs, class and why they
 * go first: nothing that the queue list does not show to every user already.
 *
 * Example: two 8-GPU nodes with 3 GPUs busy on each; an 8-GPU job reads code
 * "fragmentation", text "10 GPUs are free, but no node has 8 free (largest: 5 on
 * node-a)", evidence.fragmentation {free_gpus 10, largest_free 5, ...}.
 */
#include "server/sched_int.h"

#include "common/xalloc.h"

#include "fairgpu/fairshare.h"
#include "fairgpu/why.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WHY_ORDER_MAX 100000 /* jobs of the plan order walked for one job's place */

/* ------------------------------------------------------------------ words */

/* A duration in words: "45 s", "12 min", "3.5 h", "2.1 days". */
static void span_words(char *b, size_t n, int64_t s)
{
    if (s < 0)
        s = 0;
    if (s < 120)
        snprintf(b, n, "%" PRId64 " s", s);
    else if (s < 7200)
        snprintf(b, n, "%" PRId64 " min", (s + 30) / 60);
    else if (s < 172800)
        snprintf(b, n, "%.1f h", (double)s / 3600.0);
    else
        snprintf(b, n, "%.1f days", (double)s / 86400.0);
}

/* Appends printf text to b (b[0..n) holds a string). */
static void add(char *b, size_t n, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void add(char *b, size_t n, const char *f, ...)
{
    size_t len = strlen(b);
    if (len + 1 >= n)
        return;
    va_list ap;
    va_start(ap, f);
    vsnprintf(b + len, n - len, f, ap);
    va_end(ap);
}

/* "free now" or "in 12 min" for time t */
static void when_words(char *b, size_t n, int64_t t, int64_t now)
{
    char d[32];
    span_words(d, sizeof d, t - now);
    if (t <= now)
        snprintf(b, n, "now");
    else
        snprintf(b, n, "in %s", d);
}

/* The one sentence of the main blocker, with its numbers. */
static void why_text(const fg_why_t *w, const srv_account_t *sa, int64_t now, char *b, size_t n)
{
    const char *ty = w->gpu_type ? w->gpu_type : "any";
    char t[48];
    b[0] = '\0';
    switch (w->code) {
    case FG_REASON_FRAGMENTATION:
        if (w->gpus > FG_WHOLE_NODE_GPUS)
            add(b, n, "%d GPUs are free, but not %d whole nodes (largest free block: %d GPUs)",
                w->type_free, w->gpus / FG_WHOLE_NODE_GPUS, w->largest_free);
        else
            add(b, n, "%d GPUs are free, but no node has %d free (largest: %d on %s)", w->type_free,
                w->gpus, w->largest_free, w->nlargest ? w->largest[0].name : "?");
        break;
    case FG_REASON_RESOURCES:
        add(b, n, "it needs %d GPUs (type %s) and %d of the %d up are free", w->gpus, ty,
            w->type_free, w->type_up);
        if (w->gpus > FG_WHOLE_NODE_GPUS) { /* k whole nodes: the k-th earliest */
            const size_t k = (size_t)(w->gpus / FG_WHOLE_NODE_GPUS);
            if (k <= w->nholders) {
                when_words(t, sizeof t, w->holders[k - 1].at, now);
                add(b, n, "; %zu whole nodes could be free %s", k, t);
            }
        } else if (w->nholders) {
            when_words(t, sizeof t, w->holders[0].at, now);
            add(b, n, "; %s could hold it %s", w->holders[0].name, t);
        }
        break;
    case FG_REASON_RESERVATION:
        when_words(t, sizeof t, w->res_from, now);
        add(b, n, "the free GPUs it fits are reserved for job %" PRIu64 ", which starts %s",
            w->res_holder, t);
        break;
    case FG_REASON_QUOTA:
        add(b, n, "account %s runs %d GPUs of its quota of %d; this job needs %d more",
            w->account.name, w->quota_running, w->quota, w->gpus);
        break;
    case FG_REASON_BUDGET:
        if (sa && sa->r.budget_micros >= 0 && sa->bud_loaded)
            add(b, n, "account %s has spent %" PRId64 " of its budget of %" PRId64 " micros",
                w->account.name, sa->bud.spent_micros, sa->r.budget_micros);
        else
            add(b, n, "account %s's budget is exhausted", w->account.name);
        if (w->budget_left >= 0 && !w->budget_exhausted)
            add(b, n, "; %" PRId64 " micros are left to reserve and its time limit costs %" PRId64,
                w->budget_left, w->limit_cost);
        break;
    case FG_REASON_RETRY_BACKOFF:
        when_words(t, sizeof t, w->eligible_time, now);
        add(b, n, "retry %d of %d after a failure: it may start again %s", w->retries_used,
            w->max_retries, t);
        break;
    case FG_REASON_GPU_TYPE:
        add(b, n,
            "it asks for %d GPUs of type %s; %d of that type are up on %d nodes, none "
            "of which can hold it",
            w->gpus, ty, w->type_up, w->type_nodes_up);
        break;
    case FG_REASON_NODES_DOWN:
        add(b, n,
            "every node that could hold its %d GPUs is down or draining (%d GPUs of "
            "type %s up)",
            w->gpus, w->type_up, ty);
        break;
    case FG_REASON_PRIORITY:
        if (w->position)
            add(b, n, "%" PRId64 " jobs (%" PRId64 " GPUs) go before it in %s order", w->ahead_jobs,
                w->ahead_gpus, fg_policy_name(w->policy));
        else
            add(b, n, "more than %" PRId64 " jobs go before it in %s order", w->ahead_jobs,
                fg_policy_name(w->policy));
        break;
    default:
        add(b, n, "waiting for the next scheduling pass");
        break;
    }
    if (w->code == FG_REASON_PRIORITY &&
        (w->policy == FG_POLICY_WFQ || w->policy == FG_POLICY_FAIR))
        add(b, n,
            "; its account %s has %.0f%% of the recent usage against a share of %.0f%% "
            "(factor %.2f)",
            w->account.name, 100 * w->account.usage_share, 100 * w->account.share,
            w->account.factor);
}

/* ------------------------------------------------------------------ evidence */

/* An account's or user's fair share, with when its factor recovers to 0.5 at half-life
 * h if it runs nothing more (fg_fair_recovers_in; null: never). */
static json_t *share_json(const fg_why_share_t *sh, int64_t h)
{
    const double t = fg_fair_recovers_in(sh->usage, sh->siblings_usage, sh->share, h);
    return json_pack("{s:s,s:f,s:f,s:f,s:f,s:f,s:f,s:i,s:o}", "name", sh->name, "usage_gpu_seconds",
                     sh->usage, "siblings_usage_gpu_seconds", sh->siblings_usage,
                     "normalized_share", sh->share, "usage_share", sh->usage_share,
                     "fair_share_factor", sh->factor, "entitlement_gpus", sh->entitlement_gpus,
                     "running_gpus", sh->running_gpus, "recovers_in_s",
                     t < 0 ? json_null() : json_integer((json_int_t)ceil(t)));
}

static json_t *time_or_null(int64_t t)
{
    return t == FG_TIME_NEVER ? json_null() : json_integer(t);
}

static json_t *position_json(const fg_why_t *w)
{
    json_t *first = json_array();
    for (size_t k = 0; k < w->nahead; k++) {
        const fg_why_ahead_t *x = &w->ahead[k];
        char id[24];
        snprintf(id, sizeof id, "%" PRIu64, x->id);
        json_array_append_new(first,
                              json_pack("{s:s,s:s,s:i,s:s,s:s}", "id", id, "account", x->account,
                                        "gpus", x->gpus, "priority", fg_prio_name(x->prio),
                                        "because", fg_why_first_name(x->first)));
    }
    return json_pack(
        "{s:o,s:I,s:I,s:I,s:s,s:o}", "place", w->position ? json_integer(w->position) : json_null(),
        "bound", (json_int_t)WHY_ORDER_MAX, "ahead_jobs", (json_int_t)w->ahead_jobs, "ahead_gpus",
        (json_int_t)w->ahead_gpus, "order", fg_policy_name(w->policy), "first", first);
}

static json_t *nodes_json(const fg_why_node_t *v, size_t n, int64_t now, bool holders)
{
    json_t *a = json_array();
    for (size_t k = 0; k < n; k++) {
        json_t *o = json_pack("{s:s,s:i,s:i}", "node", v[k].name, "gpus", v[k].gpus, "free_gpus",
                              v[k].free_gpus);
        if (holders) {
            json_object_set_new(o, "at", json_integer(v[k].at));
            json_object_set_new(o, "in_s", json_integer(v[k].at > now ? v[k].at - now : 0));
            char id[24];
            snprintf(id, sizeof id, "%" PRIu64, v[k].last);
            json_object_set_new(o, "after_job", v[k].last ? json_string(id) : json_null());
        }
        json_array_append_new(a, o);
    }
    return a;
}

/* Does a job with reason r wait for GPUs others hold or are given first? */
static bool waits_for_others(fg_reason_t r)
{
    return r == FG_REASON_PRIORITY || r == FG_REASON_RESOURCES || r == FG_REASON_FRAGMENTATION ||
           r == FG_REASON_RESERVATION;
}

/* The evidence object of w (sa: its account, mu held; may be NULL; h: the half-life). */
static json_t *evidence_json(const fg_why_t *w, const srv_account_t *sa, int64_t now, int64_t h)
{
    json_t *e = json_object();
    json_object_set_new(e, "gpus",
                        json_pack("{s:i,s:o,s:i,s:i,s:i,s:i}", "asked", w->gpus, "type",
                                  w->gpu_type ? json_string(w->gpu_type) : json_null(), "up",
                                  w->type_up, "free", w->type_free, "total", w->type_total,
                                  "nodes_up", w->type_nodes_up));
    if (waits_for_others(w->code)) {
        json_object_set_new(e, "fair_share",
                            json_pack("{s:o,s:o}", "account", share_json(&w->account, h), "user",
                                      share_json(&w->user, h)));
        json_object_set_new(e, "position", position_json(w));
    }
    if (w->code == FG_REASON_RESOURCES || w->code == FG_REASON_FRAGMENTATION ||
        w->code == FG_REASON_RESERVATION)
        json_object_set_new(e, "fragmentation",
                            json_pack("{s:i,s:i,s:o,s:i,s:o}", "free_gpus", w->type_free,
                                      "largest_free", w->largest_free, "largest",
                                      nodes_json(w->largest, w->nlargest, now, false),
                                      "holders_total", w->holders_total, "holders",
                                      nodes_json(w->holders, w->nholders, now, true)));
    if (w->code == FG_REASON_RESERVATION) {
        char id[24];
        snprintf(id, sizeof id, "%" PRIu64, w->res_holder);
        json_object_set_new(e, "reservation",
                            json_pack("{s:s,s:I}", "holder", id, "from", (json_int_t)w->res_from));
    }
    if (w->code == FG_REASON_QUOTA)
        json_object_set_new(e, "quota",
                            json_pack("{s:s,s:i,s:i,s:i}", "account", w->account.name, "gpu_quota",
                                      w->quota, "running_gpus", w->quota_running, "needs",
                                      w->gpus));
    if (w->code == FG_REASON_BUDGET) {
        json_t *o =
            json_pack("{s:s,s:b}", "account", w->account.name, "exhausted", w->budget_exhausted);
        bool has = sa && sa->r.budget_micros >= 0;
        json_object_set_new(o, "budget_micros",
                            has ? json_integer(sa->r.budget_micros) : json_null());
        json_object_set_new(o, "spent_micros",
                            has && sa->bud_loaded ? json_integer(sa->bud.spent_micros)
                                                  : json_null());
        json_object_set_new(o, "left_to_reserve_micros",
                            w->budget_left >= 0 ? json_integer(w->budget_left) : json_null());
        json_object_set_new(o, "limit_cost_micros", json_integer(w->limit_cost));
        json_object_set_new(e, "budget", o);
    }
    if (w->code == FG_REASON_RETRY_BACKOFF)
        json_object_set_new(
            e, "backoff",
            json_pack("{s:I,s:I,s:i,s:i}", "until", (json_int_t)w->eligible_time, "in_s",
                      (json_int_t)(w->eligible_time > now ? w->eligible_time - now : 0),
                      "retries_used", w->retries_used, "max_retries", w->max_retries));
    return e;
}

/* GPUs of type `type` (NULL: any) on the core's nodes: up, free, in all, nodes up. */
static json_t *type_gpus_json(sctx_t *c, int32_t gpus, const char *type)
{
    int32_t up = 0, fr = 0, total = 0, nup = 0;
    for (size_t k = 0; k < fg_sched_node_count(c->core); k++) {
        fg_node_info_t ni;
        if (fg_sched_node_info(c->core, (int)k, &ni) || (type && strcmp(type, ni.gpu_type)))
            continue;
        total += ni.gpus;
        if (ni.state != FG_NODE_UP)
            continue;
        nup++;
        up += ni.gpus;
        fr += ni.free_gpus;
    }
    return json_pack("{s:i,s:o,s:i,s:i,s:i,s:i}", "asked", gpus, "type",
                     type ? json_string(type) : json_null(), "up", up, "free", fr, "total", total,
                     "nodes_up", nup);
}

/* The "why" of a pending job the core does not hold (parked: no node could ever hold
 * it yet, or more GPUs than its account's quota): its reason and the GPUs of its type,
 * or its account's quota. mu held. */
static json_t *parked_json(sctx_t *c, const srv_job_t *j)
{
    const fg_store_job_t *r = &j->r;
    json_t *ev = json_object();
    json_object_set_new(ev, "gpus", type_gpus_json(c, r->gpus, r->gpu_type));
    json_object_set_new(ev, "parked", json_true());
    if (r->reason_code == FG_REASON_QUOTA) {
        const srv_account_t *sa = srv_account_by_name(c->s, r->account);
        json_object_set_new(
            ev, "quota",
            json_pack("{s:s,s:o,s:i}", "account", r->account, "gpu_quota",
                      sa && sa->r.gpu_quota >= 0 ? json_integer(sa->r.gpu_quota) : json_null(),
                      "needs", r->gpus));
    }
    const int code = r->reason_code > 0 ? r->reason_code : FG_REASON_NONE;
    return json_pack("{s:s,s:s,s:n,s:o}", "code",
                     code == FG_REASON_NONE ? "none" : fg_reason_code((fg_reason_t)code), "text",
                     r->reason ? r->reason : "waiting for the next scheduling pass",
                     "estimated_start", "evidence", ev);
}

/* The "why" object of pending job id from w (the core's answer rc), or NULL when it
 * is not pending. */
static json_t *why_json(sctx_t *c, uint64_t id, const fg_why_t *w, int rc)
{
    if (rc == FG_ENOENT) {
        pthread_mutex_lock(&c->s->mu);
        const srv_job_t *j = srv__job(c, id);
        json_t *o = j && j->state == FG_JOB_PENDING ? parked_json(c, j) : NULL;
        pthread_mutex_unlock(&c->s->mu);
        return o;
    }
    if (rc)
        return NULL;
    char text[FG_REASON_MAX];
    pthread_mutex_lock(&c->s->mu);
    const srv_account_t *sa = srv_account_by_name(c->s, w->account.name);
    why_text(w, sa, c->now, text, sizeof text);
    json_t *ev = evidence_json(w, sa, c->now, fg_sched_config(c->core)->half_life_s);
    pthread_mutex_unlock(&c->s->mu);
    return json_pack("{s:s,s:s,s:o,s:o}", "code",
                     w->code == FG_REASON_NONE ? "none" : fg_reason_code(w->code), "text", text,
                     "estimated_start", time_or_null(w->estimated_start), "evidence", ev);
}

/* ------------------------------------------------------------------ the scheduler side */

bool srv__only_whys(const srv_msg_t *batch)
{
    for (const srv_msg_t *m = batch; m; m = m->next)
        if (m->kind != MSG_WHY)
            return false;
    return batch != NULL;
}

void srv__answer_whys(sctx_t *c, srv_msg_t *batch)
{
    size_t n = 0;
    for (srv_msg_t *m = batch; m; m = m->next)
        n += m->kind == MSG_WHY;
    if (!n)
        return;
    /* one walk of the plan order for all of them */
    fg_job_id_t *ids = fg_xmalloc(n * sizeof *ids);
    fg_why_t *w = fg_xmalloc(n * sizeof *w);
    int *rc = fg_xmalloc(n * sizeof *rc);
    size_t k = 0;
    for (srv_msg_t *m = batch; m; m = m->next)
        if (m->kind == MSG_WHY)
            ids[k++] = m->job;
    fg_sched_why_many(c->core, ids, n, c->now, WHY_ORDER_MAX, w, rc);
    k = 0;
    for (srv_msg_t *m = batch; m; m = m->next) {
        if (m->kind != MSG_WHY)
            continue;
        json_t *o = why_json(c, m->job, &w[k], rc[k]);
        k++;
        srv__sync_ok(m->sync, 200, o ? o : json_null());
        if (m->sync)
            srv__sync_done(m->sync);
        m->sync = NULL;
    }
    free(ids);
    free(w);
    free(rc);
}

/* ------------------------------------------------------------------ the HTTP side */

/* Renders job id with "why" (when it is still pending and the scheduler gave one). */
static int why_resume(srv_req_t *r)
{
    srv_t *s = r->srv;
    srv_sync_t *y = r->ctx;
    uint64_t id = y->render_job;
    srv_buf_t b = {0};
    pthread_mutex_lock(&s->mu);
    srv_job_t *j = srv_job_get(s, id);
    if (j && !srv_job_published(s, j)) {
        pthread_mutex_unlock(&s->mu);
        return srv_park_unpublished(r);
    }
    if (j)
        srv_job_render(s, j, r->admin || j->r.user_id == r->user_id, NULL, &b);
    bool pending = j && j->state == FG_JOB_PENDING;
    pthread_mutex_unlock(&s->mu);
    if (!j)
        return srv_reply_error(r, 404, "not_found", NULL, "no job %llu", (unsigned long long)id);
    if (pending && json_is_object(y->reply) && b.n > 0 && b.p[b.n - 1] == '}') {
        char *t = json_dumps(y->reply, JSON_COMPACT);
        if (t) {
            b.n--; /* the closing brace, put back after "why" */
            srv_buf_puts(&b, ",\"why\":");
            srv_buf_puts(&b, t);
            srv_buf_put(&b, "}", 1);
            free(t);
        }
    }
    return srv_reply_buf(r, 200, &b);
}

int srv_why_get(srv_req_t *r, uint64_t id)
{
    srv_t *s = r->srv;
    atomic_fetch_add(&s->async_inflight, 1);
    if (atomic_load(&s->stopping)) {
        atomic_fetch_sub(&s->async_inflight, 1);
        return srv_reply_error(r, 503, "unavailable", NULL, "the server is shutting down");
    }
    srv_msg_t *m = srv_msg_new(MSG_WHY);
    m->job = id;
    srv_sync_t *y = fg_xmalloc(sizeof *y);
    srv_sync_init(y);
    y->srv = s;
    y->conn = r->conn;
    y->render_job = id;
    m->sync = y;
    r->ctx = y;
    r->ctx_free = srv_sync_free;
    r->resume = why_resume;
    srv_park_request(r);
    srv_sched_post(s, m);
    return SRV_YES;
}
