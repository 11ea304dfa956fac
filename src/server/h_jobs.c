/*
 * h_jobs.c - jobs: submit, list, get, cancel, per-job events and attempts, logs, and
 * the global event feed (immediate, long-poll, or a text/event-stream).
 *
 * Submit is the hot path: validate, reserve a place under the user's pending cap,
 * commit (job + its creation event) as one store unit that the store group-commits
 * with concurrent ones, then insert into memory, hand the job to the scheduler thread
 * (a queue push, never a wait) and answer 201. A 201 is only sent after the fsync.
 */
#include "server/server.h"
#include "server/submit_body.h"
#include "server/valid.h"

#include "common/log.h"
#include "common/xalloc.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ submit */

static srv_job_t *job_from_rec(const fg_store_job_t *rec, int64_t id)
{
    srv_job_t *j = fg_xcalloc(1, sizeof *j);
    fg_store_job_t *x = &j->r;
    *x = *rec;
    x->id = id;
    x->name = srv_strdup0(rec->name);
    x->username = NULL;
    x->account = srv_strdup0(rec->account);
    x->command_json = srv_strdup0(rec->command_json);
    x->env_json = srv_strdup0(rec->env_json);
    x->gpu_type = srv_strdup0(rec->gpu_type);
    x->model = srv_strdup0(rec->model);
    x->dataset = srv_strdup0(rec->dataset);
    x->reason = srv_strdup0(rec->reason);
    x->idem_key = srv_strdup0(rec->idem_key);
    x->nodes_json = NULL;
    x->gpu_indices_json = NULL;
    j->state = FG_JOB_PENDING;
    return j;
}

/* Replies with the existing job `id` (idempotent replay): 200. The original request
 * may be between its commit and its insert into memory: then this one parks (no
 * thread waits) until the insert wakes it (WAIT_EVENTS) or *deadline_ms passes (set
 * at the first call), and answers 503 if the job is still not there. */
static int reply_existing(srv_req_t *r, int64_t id, int64_t *deadline_ms)
{
    srv_t *s = r->srv;
    pthread_mutex_lock(&s->mu);
    srv_job_t *j = srv_job_get(s, (uint64_t)id);
    bool shown = j && srv_job_published(s, j);
    json_t *o = shown ? srv_job_json(s, j, true) : NULL;
    pthread_mutex_unlock(&s->mu);
    if (o)
        return srv_reply_json(r, 200, o);
    if (j) /* in memory, its last change not committed yet */
        return srv_park_unpublished(r);
    int64_t now = srv_now_ms();
    if (!*deadline_ms)
        *deadline_ms = now + 2000;
    if (now >= *deadline_ms || atomic_load(&s->stopping))
        return srv_reply_error(r, 503, "unavailable", NULL, "the original job is not visible yet");
    return srv_park(r, WAIT_EVENTS, *deadline_ms);
}

/* A submission between its validation and its durable commit: the connection is
 * parked while the store group-commits it (no thread waits), and resumed by the
 * store's completion callback. */
typedef struct submit_ctx {
    srv_t *s;
    hd_conn_t *conn;
    char *cmd, *env, *idem;
    char acct[80];
    fg_store_job_t rec;
    fg_store_event_t ev;
    srv_batch_t bt;
    srv_op_t *io, *jo, *eo; /* indexes into bt.ops are stable: no op added later */
    size_t io_i, jo_i, eo_i;
    int rc;
    bool reserved;
    int64_t existing_deadline_ms; /* reply_existing's */
    char strs[];                  /* name, gpu_type, model, dataset: what rec points to */
} submit_ctx_t;

/* Copies s (may be NULL) to *p and advances it; returns the copy or NULL. */
static char *ctx_str(char **p, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = memcpy(*p, s, n);
    *p += n;
    return d;
}

static void submit_ctx_free(void *p)
{
    submit_ctx_t *x = p;
    if (x->reserved) {
        pthread_mutex_lock(&x->s->mu);
        srv_user_t *u = srv_user_by_id(x->s, x->rec.user_id);
        if (u)
            u->inflight--;
        pthread_mutex_unlock(&x->s->mu);
    }
    srv_batch_free(&x->bt);
    free(x->cmd);
    free(x->env);
    free(x->idem);
    free(x);
}

static void submit_done(int rc, void *arg)
{
    submit_ctx_t *x = arg;
    srv_t *s = x->s;
    x->rc = rc;
    hd_resume(x->conn);
    atomic_fetch_sub(&s->async_inflight, 1); /* x may be gone now */
}

/* Second half: the commit is durable (or failed). */
static int submit_finish(srv_req_t *r)
{
    srv_t *s = r->srv;
    submit_ctx_t *x = r->ctx;
    int rc = x->rc;
    if (rc) {
        return rc == FG_STORE_EEXIST && x->idem
                   ? srv_reply_error(r, 409, "conflict", "Idempotency-Key",
                                     "a job with this Idempotency-Key is being created; retry")
                   : srv_reply_error(r, 503, "unavailable", NULL, "the job could not be stored: %s",
                                     fg_store_strerror(rc));
    }
    if (x->idem && x->bt.ops[x->io_i].out) {
        if (x->reserved) { /* this runs again after each wake-up of reply_existing */
            pthread_mutex_lock(&s->mu);
            srv_user_by_id(s, r->user_id)->inflight--;
            x->reserved = false;
            pthread_mutex_unlock(&s->mu);
        }
        return reply_existing(r, x->bt.ops[x->io_i].out, &x->existing_deadline_ms);
    }
    int64_t id = x->bt.ops[x->jo_i].out;
    x->ev.seq = x->bt.ops[x->eo_i].out;
    x->ev.job_id = id;
    srv_job_t *j = job_from_rec(&x->rec, id);
    /* rendered before j is shared: no lock needed for it */
    srv_buf_t reply = {0};
    srv_job_render(s, j, true, r->username, &reply);
    pthread_mutex_lock(&s->mu);
    srv_user_by_id(s, r->user_id)->inflight--;
    x->reserved = false;
    srv_job_insert_mem(s, j);
    srv_event_mem(s, &x->ev);
    pthread_mutex_unlock(&s->mu);
    atomic_fetch_add_explicit(&s->m.submissions, 1, memory_order_relaxed);
    srv_msg_t *m = srv_msg_new(MSG_SUBMIT);
    m->job = (uint64_t)id;
    srv_sched_post(s, m);
    srv_wake_kind(s, WAIT_EVENTS);
    srv_wake_kind(s, WAIT_STREAM);
    return srv_reply_buf(r, 201, &reply);
}

int h_jobs_create(srv_req_t *r)
{
    srv_t *s = r->srv;
    if (r->ctx)
        return submit_finish(r);
    /* The body: the tree-free parser for the plain bodies clients send, else jansson,
     * which gives every error answer (submit_body.h: both give the same fields). */
    srv_submit_in_t in;
    srv_submit_err_t perr;
    const srv_submit_limits_t lim = {.default_time_limit_s = s->cfg.default_time_limit_s,
                                     .max_time_limit_s = s->cfg.max_time_limit_s};
    const char *idem = srv_header(r, "Idempotency-Key");
    if (!srv_submit_parse_fast(r->body, r->len, idem, &lim, &in) &&
        !srv_submit_parse_json(r->body, r->len, idem, &lim, &in, &perr)) {
        srv_reply_error(r, perr.status, perr.code, perr.field, "%s", perr.msg);
        return SRV_YES;
    }
    int ret = SRV_YES;
    const char *name = in.name, *gpu_type = in.gpu_type, *model = in.model, *dataset = in.dataset,
               *account = in.account;
    long long gpus = in.gpus, tl = in.time_limit_s, retries = in.max_retries, cpus = in.cpus,
              mem = in.memory_mb, ckpt = in.checkpoint_interval_s;
    int prio = in.prio;
    bool reserved = false;
    /* account, membership, allowed classes, caps: under the lock */
    char acct[80];
    pthread_mutex_lock(&s->mu);
    const char *a = account;
    if (!a)
        a = srv_user_default_account(s, r->user_id);
    srv_account_t *ac = a ? srv_account_by_name(s, a) : NULL;
    bool member = ac && srv_member_find(s, a, r->user_id);
    int allowed = ac ? ac->r.allowed_priorities : 0;
    bool broke = ac && ac->budget_blocked;
    srv_user_t *u = srv_user_by_id(s, r->user_id);
    int cap = s->cfg.max_pending_per_user;
    int queued = u->pending_jobs + u->inflight;
    bool full = cap > 0 && queued >= cap;
    int64_t pending_all = s->njobs_by_state[FG_JOB_PENDING];
    bool shed = prio == FG_PRIO_LOW && s->cfg.core.shed_pending > 0 &&
                pending_all >= s->cfg.core.shed_pending;
    if (member && (allowed & (1 << prio)) && !full && !shed && !broke) {
        u->inflight++;
        reserved = true;
    }
    snprintf(acct, sizeof acct, "%s", a ? a : "");
    pthread_mutex_unlock(&s->mu);
    if (!ac || !member) {
        ret = account ? srv_reply_error(r, 403, "forbidden", "account",
                                        "you are not a member of account '%s'", account)
                      : srv_reply_error(r, 403, "forbidden", "account",
                                        "you belong to no account; ask an admin");
        goto out;
    }
    if (!(allowed & (1 << prio))) {
        ret = srv_reply_error(r, 403, "forbidden", "priority",
                              "account '%s' may not submit '%s' jobs", acct,
                              fg_prio_name((fg_prio_t)prio));
        goto out;
    }
    if (broke) {
        atomic_fetch_add(&s->m.submissions_refused, 1);
        ret = srv_reply_error(r, 402, "budget_exhausted", "account",
                              "account '%s' has spent its budget (hard limit); ask an admin", acct);
        goto out;
    }
    if (full) {
        atomic_fetch_add(&s->m.submissions_refused, 1);
        ret = srv_reply_error(r, 429, "queue_full", NULL,
                              "you have %d jobs pending or being submitted; the limit is %d",
                              queued, cap);
        goto out;
    }
    if (shed) {
        atomic_fetch_add(&s->m.submissions_refused, 1);
        ret = srv_reply_error(r, 429, "queue_full", "priority",
                              "the queue holds %lld pending jobs; low-priority jobs are refused "
                              "until it shrinks below %d",
                              (long long)pending_all, s->cfg.core.shed_pending);
        goto out;
    }
    if (srv_dry_run_flag(r)) { /* checked as a submission; nothing is stored */
        ret = srv_dry_run_call(r, acct, &in);
        goto out;
    }
    int64_t now = srv_now();
    /* The request's JSON tree (if the reference parser made one) is freed now, not after
     * the commit: the strings the job record needs are copied into the context. Freed at once, its
     * many small blocks are what the next request's parse allocates again (glibc's per-thread
     * cache), instead of dozens of trees waiting out their commit together. */
    size_t sn = (name ? strlen(name) + 1 : 0) + (gpu_type ? strlen(gpu_type) + 1 : 0) +
                (model ? strlen(model) + 1 : 0) + (dataset ? strlen(dataset) + 1 : 0);
    submit_ctx_t *x = fg_xcalloc(1, sizeof *x + sn);
    char *sp = x->strs;
    name = ctx_str(&sp, name);
    gpu_type = ctx_str(&sp, gpu_type);
    model = ctx_str(&sp, model);
    dataset = ctx_str(&sp, dataset);
    x->s = s;
    x->conn = r->conn;
    x->cmd = in.cmd;
    x->env = in.env;
    in.cmd = in.env = NULL;
    srv_submit_in_clear(&in);
    x->idem = idem ? fg_xstrdup(idem) : NULL;
    x->reserved = true;
    reserved = false;
    snprintf(x->acct, sizeof x->acct, "%s", acct);
    x->rec = (fg_store_job_t){.name = (char *)(name ? name : ""),
                              .user_id = r->user_id,
                              .account = x->acct,
                              .command_json = x->cmd,
                              .env_json = x->env,
                              .gpus = (int32_t)gpus,
                              .gpu_type = (char *)gpu_type,
                              .model = (char *)model,
                              .dataset = (char *)dataset,
                              .priority = prio,
                              .state = FG_JOB_PENDING,
                              .submit_time = now,
                              .time_limit_s = tl,
                              .max_retries = (int32_t)retries,
                              .checkpoint_interval_s = ckpt,
                              .cpus = (int32_t)cpus,
                              .memory_mb = mem,
                              .idem_key = x->idem};
    x->ev = (fg_store_event_t){
        .time = now, .kind = "job", .job_id = -1, .to_state = "PENDING", .reason = "submitted"};
    if (x->idem) {
        srv_op_t *io = srv_batch_add(&x->bt, OP_JOB_IDEM, NULL);
        io->i1 = r->user_id;
        io->s1 = x->idem;
        x->io_i = x->bt.n - 1;
    }
    srv_batch_add(&x->bt, OP_JOB_INSERT, &x->rec);
    x->jo_i = x->bt.n - 1;
    srv_batch_add(&x->bt, OP_EVENT, &x->ev);
    x->eo_i = x->bt.n - 1;
    r->ctx = x;
    r->ctx_free = submit_ctx_free;
    /* park first: the completion may run before srv_batch_commit_async returns */
    atomic_fetch_add(&s->async_inflight, 1);
    if (atomic_load(&s->stopping)) {
        /* shutting down: the engine must not be left with a parked connection */
        atomic_fetch_sub(&s->async_inflight, 1);
        return srv_reply_error(r, 503, "unavailable", NULL, "the server is shutting down");
    }
    srv_park_request(r);
    int rc = srv_batch_commit_async(s, &x->bt, submit_done, x);
    if (rc) {
        atomic_fetch_sub(&s->async_inflight, 1);
        x->rc = rc;
        hd_resume(r->conn);
    }
    return SRV_YES;
out:
    if (reserved) {
        pthread_mutex_lock(&s->mu);
        srv_user_by_id(s, r->user_id)->inflight--;
        pthread_mutex_unlock(&s->mu);
    }
    srv_submit_in_clear(&in);
    return ret;
}

/* ------------------------------------------------------------------ list, get */

static int parse_limit(srv_req_t *r, long long *limit)
{
    *limit = 100;
    const char *ls = srv_query(r, "limit");
    if (!ls)
        return 0;
    char *end;
    errno = 0;
    long long v = strtoll(ls, &end, 10);
    if (errno || !*ls || *end || v < 1 || v > 1000) {
        srv_reply_error(r, 400, "invalid_argument", "limit", "limit must be 1..1000");
        return -1;
    }
    *limit = v;
    return 0;
}

static int parse_states(srv_req_t *r, unsigned *mask)
{
    *mask = 0;
    const char *st = srv_query(r, "state");
    if (!st || !*st)
        return 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", st);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int found = -1;
        for (int k = FG_JOB_PENDING; k <= FG_JOB_TIMEOUT; k++)
            if (!strcasecmp(t, fg_job_state_name((fg_job_state_t)k)))
                found = k;
        if (found < 0) {
            srv_reply_error(r, 400, "invalid_argument", "state",
                            "unknown state '%.32s' (PENDING, RUNNING, COMPLETED, FAILED, "
                            "CANCELLED, TIMEOUT)",
                            t);
            return -1;
        }
        *mask |= 1u << found;
    }
    return 0;
}

static bool eq0(const char *a, const char *b)
{
    if (!b)
        return true;
    return a && !strcmp(a, b);
}

int h_jobs_list(srv_req_t *r)
{
    srv_t *s = r->srv;
    long long limit;
    unsigned mask;
    if (parse_limit(r, &limit) || parse_states(r, &mask))
        return SRV_YES;
    const char *user = srv_query(r, "user");
    const char *account = srv_query(r, "account");
    const char *model = srv_query(r, "model");
    const char *dataset = srv_query(r, "dataset");
    const char *order = srv_query(r, "order");
    bool desc = order && !strcmp(order, "desc");
    if (order && !desc && strcmp(order, "asc"))
        return srv_reply_error(r, 400, "invalid_argument", "order", "order must be asc or desc");
    int64_t cur = 0;
    const char *cs = srv_query(r, "cursor");
    if (cs && *cs && fg_store_cursor_decode(cs, &cur))
        return srv_reply_error(r, 400, "invalid_argument", "cursor", "malformed cursor");
    json_t *items = json_array();
    int64_t last = 0;
    bool more = false;
    pthread_mutex_lock(&s->mu);
    if (!srv_all_published(s)) {
        pthread_mutex_unlock(&s->mu);
        json_decref(items);
        return srv_park_unpublished(r);
    }
    int64_t uid = -1;
    if (user) {
        srv_user_t *u = srv_user_by_name(s, user);
        uid = u ? u->r.id : 0;
    }
    if (uid != 0) {
        /* the cursor is the client's: any id >= 0, so the walk is clamped to the jobs
         * that exist (1..max_job_id) before the array is read */
        uint64_t top = s->max_job_id;
        assert(top <= s->jobs_cap);
        uint64_t c = (uint64_t)cur; /* 0..INT64_MAX (fg_store_cursor_decode) */
        uint64_t i = desc ? (c == 0 || c > top ? top : c - 1) : c + 1;
        for (; desc ? i >= 1 : i <= top; desc ? i-- : i++) {
            srv_job_t *j = srv_job_get(s, i);
            if (!j)
                continue;
            if (mask && !(mask & (1u << j->state)))
                continue;
            if (uid > 0 && j->r.user_id != uid)
                continue;
            if (!eq0(j->r.account, account) || !eq0(j->r.model, model) ||
                !eq0(j->r.dataset, dataset))
                continue;
            if ((long long)json_array_size(items) == limit) {
                more = true;
                break;
            }
            json_array_append_new(items,
                                  srv_job_json(s, j, r->admin || j->r.user_id == r->user_id));
            last = (int64_t)i;
        }
    }
    pthread_mutex_unlock(&s->mu);
    char *nc = more ? fg_store_cursor_encode(last) : NULL;
    json_t *o = json_pack("{s:o,s:s?}", "items", items, "next_cursor", nc);
    free(nc);
    return srv_reply_json(r, 200, o);
}

int h_jobs_get(srv_req_t *r)
{
    srv_t *s = r->srv;
    uint64_t id;
    if (!srv_parse_job_id(r->seg[2], &id))
        return srv_reply_error(r, 404, "not_found", NULL, "no job '%.32s'", r->seg[2]);
    const char *wq = srv_query(r, "why"); /* ?why=0: a pending job without its "why" */
    const bool want_why = !wq || strcmp(wq, "0");
    srv_buf_t b = {0};
    pthread_mutex_lock(&s->mu);
    srv_job_t *j = srv_job_get(s, id);
    bool shown = j && srv_job_published(s, j);
    bool why = shown && want_why && j->state == FG_JOB_PENDING;
    if (shown && !why)
        srv_job_render(s, j, r->admin || j->r.user_id == r->user_id, NULL, &b);
    pthread_mutex_unlock(&s->mu);
    if (j && !shown)
        return srv_park_unpublished(r);
    if (!j)
        return srv_reply_error(r, 404, "not_found", NULL, "no job %llu", (unsigned long long)id);
    if (why) /* rendered with "why" once the scheduler thread answers (sched_why.c) */
        return srv_why_get(r, id);
    return srv_reply_buf(r, 200, &b);
}

/* Looks up job seg[2] for an owner-or-admin route. Replies 404/403 and returns 0 on
 * failure; returns the id otherwise. *state gets its state. */
static uint64_t owned_job(srv_req_t *r, fg_job_state_t *state)
{
    srv_t *s = r->srv;
    uint64_t id;
    if (!srv_parse_job_id(r->seg[2], &id)) {
        srv_reply_error(r, 404, "not_found", NULL, "no job '%.32s'", r->seg[2]);
        return 0;
    }
    pthread_mutex_lock(&s->mu);
    srv_job_t *j = srv_job_get(s, id);
    bool found = j != NULL;
    bool shown = j && srv_job_published(s, j);
    bool mine = j && (r->admin || j->r.user_id == r->user_id);
    if (j && state)
        *state = j->state;
    pthread_mutex_unlock(&s->mu);
    if (!found) {
        srv_reply_error(r, 404, "not_found", NULL, "no job %llu", (unsigned long long)id);
        return 0;
    }
    if (!mine) {
        srv_reply_error(r, 403, "forbidden", NULL, "job %llu belongs to another user",
                        (unsigned long long)id);
        return 0;
    }
    if (!shown) { /* answered when its last change is committed */
        srv_park_unpublished(r);
        return 0;
    }
    return id;
}

int h_jobs_cancel(srv_req_t *r)
{
    fg_job_state_t st;
    uint64_t id = owned_job(r, &st);
    if (!id)
        return SRV_YES;
    if (st != FG_JOB_PENDING && st != FG_JOB_RUNNING)
        return srv_reply_error(r, 409, "conflict", NULL, "job %llu has already ended (%s)",
                               (unsigned long long)id, fg_job_state_name(st));
    srv_msg_t *m = srv_msg_new(MSG_CANCEL);
    m->job = id;
    return srv_sched_call_job(r, m, id);
}

int h_jobs_events(srv_req_t *r)
{
    srv_t *s = r->srv;
    uint64_t id = owned_job(r, NULL);
    if (!id)
        return SRV_YES;
    fg_store_tx_t *tx;
    int rc = fg_store_read_begin(s->store, &tx);
    if (rc)
        return srv_reply_error(r, 503, "unavailable", NULL, "store: %s", fg_store_strerror(rc));
    fg_store_event_list_t l = {0};
    rc = fg_store_event_list_job(tx, (int64_t)id, &l);
    fg_store_read_end(tx);
    if (rc)
        return srv_reply_error(r, 503, "unavailable", NULL, "store: %s", fg_store_strerror(rc));
    json_t *items = json_array();
    for (size_t i = 0; i < l.n; i++) {
        fg_store_event_t *e = &l.items[i];
        json_array_append_new(items,
                              json_pack("{s:I,s:I,s:s?,s:s?,s:s?,s:s?}", "seq", (json_int_t)e->seq,
                                        "time", (json_int_t)e->time, "from", e->from_state, "to",
                                        e->to_state, "reason", e->reason, "node", e->node));
    }
    fg_store_event_list_free(&l);
    return srv_reply_json(r, 200, json_pack("{s:o,s:n}", "items", items, "next_cursor"));
}

int h_jobs_attempts(srv_req_t *r)
{
    srv_t *s = r->srv;
    uint64_t id = owned_job(r, NULL);
    if (!id)
        return SRV_YES;
    fg_store_tx_t *tx;
    int rc = fg_store_read_begin(s->store, &tx);
    if (rc)
        return srv_reply_error(r, 503, "unavailable", NULL, "store: %s", fg_store_strerror(rc));
    fg_store_attempt_list_t l = {0};
    rc = fg_store_attempt_list(tx, (int64_t)id, &l);
    fg_store_read_end(tx);
    if (rc)
        return srv_reply_error(r, 503, "unavailable", NULL, "store: %s", fg_store_strerror(rc));
    json_t *items = json_array();
    for (size_t i = 0; i < l.n; i++) {
        fg_store_attempt_t *a = &l.items[i];
        json_t *nodes = a->nodes_json ? json_loads(a->nodes_json, 0, NULL) : NULL;
        json_t *uu = a->gpu_uuids_json ? json_loads(a->gpu_uuids_json, 0, NULL) : NULL;
        json_t *o = json_object();
        json_object_set_new(o, "attempt", json_integer(a->attempt));
        json_object_set_new(o, "nodes", nodes ? nodes : json_array());
        json_object_set_new(o, "gpu_uuids", uu ? uu : json_array());
        json_object_set_new(o, "start_time_ms", json_integer(a->start_time_ms));
        json_object_set_new(o, "end_time_ms",
                            a->end_time_ms ? json_integer(a->end_time_ms) : json_null());
        json_object_set_new(o, "end_cause",
                            a->end_cause >= 0
                                ? json_string(fg_end_cause_name((fg_end_cause_t)a->end_cause))
                                : json_null());
        json_object_set_new(o, "exit_code",
                            a->has_exit_code ? json_integer(a->exit_code) : json_null());
        json_object_set_new(o, "signal", a->signal ? json_integer(a->signal) : json_null());
        json_array_append_new(items, o);
    }
    fg_store_attempt_list_free(&l);
    return srv_reply_json(r, 200, json_pack("{s:o,s:n}", "items", items, "next_cursor"));
}

/* ------------------------------------------------------------------ global events */

typedef struct ev_stream {
    srv_t *s;
    hd_conn_t *conn;
    int64_t since;
    int64_t viewer;
    bool admin;
    char *buf;
    size_t len, off;
    int64_t last_write_ms;
    bool parked;
} ev_stream_t;

/* Whether the job an event embeds (its current state) may be shown (mu held). */
static bool event_job_published(srv_t *s, const srv_event_t *e)
{
    const srv_job_t *j = e->kind == SRV_EVENT_JOB ? srv_job_get(s, e->job_id) : NULL;
    return !j || srv_job_published(s, j);
}

/* The first sequence to read after `since` (a client's value, >= 0): one past the end
 * when since is at or past the last published event (since + 1 would overflow for
 * INT64_MAX), else since + 1 but no earlier than the first event held (mu held). */
static int64_t first_after(const srv_t *s, int64_t since)
{
    assert(since >= 0);
    if (since >= s->pub_seq)
        return s->pub_seq + 1;
    return since + 1 < s->first_seq ? s->first_seq : since + 1;
}

/* Renders events after st->since (at most 200) into st->buf as SSE records. */
static void ev_fill(ev_stream_t *st)
{
    srv_t *s = st->s;
    size_t cap = 0;
    st->len = st->off = 0;
    pthread_mutex_lock(&s->mu);
    int n = 0;
    for (int64_t q = first_after(s, st->since); q <= s->pub_seq && n < 200; q++, n++) {
        srv_event_t *e = srv_event_at(s, q);
        if (!event_job_published(s, e))
            break; /* sent once its job's last change is committed (that wakes the stream) */
        json_t *o = srv_event_json(s, e, st->viewer, st->admin);
        char *txt = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        size_t need = strlen(txt) + 64;
        st->buf = fg_xgrow(st->buf, &cap, st->len + need, 1);
        st->len += (size_t)snprintf(st->buf + st->len, need, "id: %lld\nevent: %s\ndata: %s\n\n",
                                    (long long)q, srv_event_type(e), txt);
        free(txt);
        st->since = q;
    }
    pthread_mutex_unlock(&s->mu);
}

static ssize_t ev_read(void *cls, char *out, size_t max)
{
    ev_stream_t *st = cls;
    srv_t *s = st->s;
    if (st->parked) {
        st->parked = false;
        atomic_fetch_sub(&s->suspended, 1);
    }
    if (atomic_load(&s->stopping))
        return HD_STREAM_END;
    unsigned long gen = atomic_load(&s->wake_gen);
    if (st->off >= st->len)
        ev_fill(st);
    int64_t now = srv_now_ms();
    if (st->off >= st->len) {
        if (now - st->last_write_ms >= 15000) {
            static const char ka[] = ": keep-alive\n\n";
            size_t n = sizeof ka - 1 < max ? sizeof ka - 1 : max;
            memcpy(out, ka, n);
            st->last_write_ms = now;
            return (ssize_t)n;
        }
        st->parked = true;
        srv_park_conn(s, st->conn, WAIT_STREAM, now + 15000, gen);
        return 0;
    }
    size_t n = st->len - st->off;
    if (n > max)
        n = max;
    memcpy(out, st->buf + st->off, n);
    st->off += n;
    st->last_write_ms = now;
    return (ssize_t)n;
}

static void ev_free(void *cls)
{
    ev_stream_t *st = cls;
    if (st->parked) /* closed while parked (its peer went away, or shutdown) */
        atomic_fetch_sub(&st->s->suspended, 1);
    free(st->buf);
    free(st);
}

int h_events(srv_req_t *r)
{
    srv_t *s = r->srv;
    const char *ss = srv_query(r, "since");
    const char *lei = srv_header(r, "Last-Event-ID");
    if (!ss)
        ss = lei;
    int64_t since = 0;
    if (ss) {
        char *end;
        errno = 0;
        long long v = strtoll(ss, &end, 10);
        if (errno || !*ss || *end || v < 0)
            return srv_reply_error(r, 400, "invalid_argument", "since",
                                   "since must be a sequence number >= 0");
        since = v;
    }
    long long limit;
    if (parse_limit(r, &limit))
        return SRV_YES;
    const char *follow = srv_query(r, "follow");
    if (follow && (!strcmp(follow, "1") || !strcmp(follow, "true"))) {
        ev_stream_t *st = fg_xcalloc(1, sizeof *st);
        st->s = s;
        st->conn = r->conn;
        st->since = since;
        st->viewer = r->user_id;
        st->admin = r->admin;
        st->last_write_ms = srv_now_ms();
        return srv_reply_stream(r, 200, "text/event-stream", "X-Accel-Buffering: no\r\n", ev_read,
                                st, ev_free);
    }
    long long wait = 0;
    const char *ws = srv_query(r, "wait");
    if (ws) {
        char *end;
        wait = strtoll(ws, &end, 10);
        if (!*ws || *end || wait < 0 || wait > s->cfg.longpoll_max_s)
            return srv_reply_error(r, 400, "invalid_argument", "wait",
                                   "wait must be 0..%lld seconds",
                                   (long long)s->cfg.longpoll_max_s);
    }
    if (r->resume_count == 0)
        r->park_deadline_ms = srv_now_ms() + wait * 1000;
    json_t *items = json_array();
    int64_t last = since;
    bool held = false; /* an event waits for its job's last change to be committed */
    pthread_mutex_lock(&s->mu);
    for (int64_t q = first_after(s, since);
         q <= s->pub_seq && (long long)json_array_size(items) < limit; q++) {
        const srv_event_t *e = srv_event_at(s, q);
        if (!event_job_published(s, e)) {
            held = true;
            break;
        }
        json_array_append_new(items, srv_event_json(s, e, r->user_id, r->admin));
        last = q;
    }
    int64_t top = s->pub_seq;
    pthread_mutex_unlock(&s->mu);
    if (held && json_array_size(items) == 0) {
        json_decref(items);
        return srv_park_unpublished(r);
    }
    if (json_array_size(items) == 0 && srv_now_ms() < r->park_deadline_ms &&
        !atomic_load(&s->stopping)) {
        json_decref(items);
        return srv_park(r, WAIT_EVENTS, r->park_deadline_ms);
    }
    return srv_reply_json(r, 200,
                          json_pack("{s:o,s:I,s:I,s:n}", "items", items, "last_seq",
                                    (json_int_t)last, "head_seq", (json_int_t)top, "next_cursor"));
}
