/*
 * model.c - the in-memory model: jobs by id, the global event log, rendering of users,
 * jobs and events as the API's JSON. Callers hold srv->mu.
 */
#include "server/server.h"

#include "common/xalloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *srv_jstr(const json_t *o, const char *key, const char *def)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : def;
}

bool srv_parse_job_id(const char *str, uint64_t *id)
{
    if (!str || !*str || strlen(str) > 19)
        return false;
    for (const char *p = str; *p; p++)
        if (*p < '0' || *p > '9')
            return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(str, &end, 10);
    if (errno || *end || v == 0)
        return false;
    *id = v;
    return true;
}

srv_node_t *srv_node_by_name(srv_t *s, const char *name)
{
    for (size_t i = 0; i < s->nnodes; i++)
        if (!strcmp(s->nodes[i]->name, name))
            return s->nodes[i];
    return NULL;
}

/* ------------------------------------------------------------------ users */

json_t *srv_user_json(srv_t *s, const srv_user_t *u)
{
    const char *acct = srv_user_default_account(s, u->r.id);
    srv_member_t *m = acct ? srv_member_find(s, acct, u->r.id) : NULL;
    json_t *accts = json_array();
    for (size_t i = 0; i < s->nmembers; i++)
        if (!s->members[i]->deleted && s->members[i]->r.user_id == u->r.id)
            json_array_append_new(accts, json_string(s->members[i]->r.account));
    char id[24];
    snprintf(id, sizeof id, "%lld", (long long)u->r.id);
    return json_pack("{s:s,s:s,s:s,s:s?,s:s,s:s?,s:o,s:f,s:b,s:I}", "id", id, "username",
                     u->r.username, "email", u->r.email, "display_name", u->r.display_name, "role",
                     u->r.role == FG_STORE_ROLE_ADMIN ? "admin" : "user", "account", acct,
                     "accounts", accts, "weight", m ? m->r.weight : 1.0, "disabled", u->r.disabled,
                     "created_at", (json_int_t)u->r.created_at);
}

/* ------------------------------------------------------------------ jobs */

srv_job_t *srv_job_get(srv_t *s, uint64_t id)
{
    if (id == 0 || id > s->jobs_cap)
        return NULL;
    return s->jobs[id - 1];
}

uint64_t *srv_running_snapshot(srv_t *s, size_t *n)
{
    *n = s->nrunning;
    uint64_t *a = fg_xmalloc((s->nrunning ? s->nrunning : 1) * sizeof *a);
    if (s->nrunning)
        memcpy(a, s->running, s->nrunning * sizeof *a);
    return a;
}

void srv_job_count_state(srv_t *s, const srv_job_t *j, int delta)
{
    if ((int)j->state >= 0 && (int)j->state < 6)
        s->njobs_by_state[j->state] += delta;
    srv_jobtally_count(s, j, delta);
    if (j->state == FG_JOB_RUNNING) {
        uint64_t id = (uint64_t)j->r.id;
        if (delta > 0) {
            s->running = fg_xgrow(s->running, &s->running_cap, s->nrunning + 1, sizeof *s->running);
            s->running[s->nrunning++] = id;
        } else {
            for (size_t i = 0; i < s->nrunning; i++)
                if (s->running[i] == id) {
                    s->running[i] = s->running[--s->nrunning];
                    break;
                }
        }
    }
    if (j->state == FG_JOB_PENDING) {
        srv_user_t *u = srv_user_by_id(s, j->r.user_id);
        if (u)
            u->pending_jobs += delta;
    }
}

void srv_job_insert_mem(srv_t *s, srv_job_t *j)
{
    uint64_t id = (uint64_t)j->r.id;
    if (id > s->jobs_cap) {
        size_t old = s->jobs_cap;
        size_t cap = old ? old : 1024;
        while (cap < id)
            cap *= 2;
        s->jobs = fg_xrealloc(s->jobs, cap * sizeof *s->jobs);
        memset(s->jobs + old, 0, (cap - old) * sizeof *s->jobs);
        s->jobs_cap = cap;
    }
    s->jobs[id - 1] = j;
    if (id > s->max_job_id)
        s->max_job_id = id;
    srv_job_count_state(s, j, +1);
}

void srv_job_free(srv_job_t *j)
{
    if (!j)
        return;
    fg_store_job_clear(&j->r);
    fg_store_attempt_clear(&j->cur);
    free(j->ranks);
    for (size_t i = 0; i < j->nlogs; i++)
        free(j->logs[i].data);
    free(j->logs);
    free(j);
}

static json_t *json_or_null(const char *txt)
{
    if (!txt)
        return json_null();
    json_t *v = json_loads(txt, JSON_DECODE_ANY, NULL);
    return v ? v : json_null();
}

/* Appends `"key":` (key is a literal: no escaping needed). */
static void key(srv_buf_t *b, const char *k)
{
    srv_buf_put(b, ",\"", 2);
    srv_buf_puts(b, k);
    srv_buf_put(b, "\":", 2);
}

/* Appends v compactly (as json_dumps does) and drops the reference. */
static void put_json(srv_buf_t *b, json_t *v)
{
    char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    srv_buf_puts(b, t ? t : "null");
    free(t);
    json_decref(v);
}

/* Appends stored JSON text (command, env): verbatim when it starts as the server
 * writes it (`want`: '[', '"' or '{'; the text was validated and dumped compactly by
 * the server, so it is what parsing and dumping again would give); otherwise through
 * jansson, so a bad stored value renders as null (`absent` when there is none). */
static void put_stored(srv_buf_t *b, const char *txt, const char *want, const char *absent)
{
    if (!txt)
        srv_buf_puts(b, absent);
    else if (strchr(want, txt[0]))
        srv_buf_puts(b, txt);
    else
        put_json(b, json_or_null(txt));
}

/* Appends t, or null when it is 0 (unset times, absent cpus/memory). */
static void put_or_null(srv_buf_t *b, int64_t t)
{
    if (t)
        srv_buf_i64(b, t);
    else
        srv_buf_put(b, "null", 4);
}

/*
 * Appends the API's JSON object of job j to b, the same fields in the same order as
 * docs/api.md shows. full: with command and env (the owner and admins). username: the
 * owner's name, or NULL to look it up (then mu must be held; otherwise j must not be
 * shared yet, as in submit). Written directly as text: building a jansson tree of ~35
 * fields and dumping it cost ~60 allocations per reply on the submit and get paths.
 */
void srv_job_render(srv_t *s, const srv_job_t *j, bool full, const char *username, srv_buf_t *b)
{
    const fg_store_job_t *r = &j->r;
    if (!username) {
        srv_user_t *u = srv_user_by_id(s, r->user_id);
        username = u ? u->r.username : NULL;
    }
    srv_buf_put(b, "{\"id\":\"", 7);
    srv_buf_i64(b, r->id);
    srv_buf_put(b, "\"", 1);
    key(b, "name");
    srv_buf_jstr(b, r->name ? r->name : "");
    key(b, "user");
    srv_buf_jstr(b, username);
    key(b, "account");
    srv_buf_jstr(b, r->account);
    if (full) {
        key(b, "command");
        put_stored(b, r->command_json, "[\"", "null");
        key(b, "env");
        put_stored(b, r->env_json, "{", "{}");
    }
    key(b, "gpus");
    srv_buf_i64(b, r->gpus);
    key(b, "gpu_type");
    srv_buf_jstr(b, r->gpu_type);
    key(b, "model");
    srv_buf_jstr(b, r->model);
    key(b, "dataset");
    srv_buf_jstr(b, r->dataset);
    key(b, "priority");
    srv_buf_jstr(b, fg_prio_name((fg_prio_t)r->priority));
    key(b, "state");
    srv_buf_jstr(b, fg_job_state_name(j->state));
    bool pending = j->state == FG_JOB_PENDING;
    key(b, "reason_code");
    srv_buf_jstr(b, pending && r->reason_code > 0 ? fg_reason_code((fg_reason_t)r->reason_code)
                                                  : NULL);
    key(b, "reason");
    srv_buf_jstr(b, r->reason);
    /* nodes and GPU indices: absent for pending jobs; parsed when present */
    json_t *nodes = r->nodes_json ? json_or_null(r->nodes_json) : NULL;
    key(b, "node");
    if (json_is_array(nodes) && json_array_size(nodes))
        put_json(b, json_incref(json_array_get(nodes, 0)));
    else
        srv_buf_put(b, "null", 4);
    key(b, "nodes");
    if (json_is_array(nodes))
        put_json(b, nodes);
    else {
        json_decref(nodes);
        srv_buf_put(b, "[]", 2);
    }
    json_t *gi = r->gpu_indices_json ? json_or_null(r->gpu_indices_json) : NULL;
    if (json_is_array(gi) && json_array_size(gi) > 0) {
        key(b, "gpu_indices");
        put_json(b, json_incref(json_array_get(gi, 0)));
        key(b, "gpu_indices_by_node");
        put_json(b, gi);
    } else {
        json_decref(gi);
        key(b, "gpu_indices");
        srv_buf_put(b, "[]", 2);
        key(b, "gpu_indices_by_node");
        srv_buf_put(b, "[]", 2);
    }
    key(b, "submit_time");
    srv_buf_i64(b, r->submit_time);
    key(b, "start_time");
    put_or_null(b, r->start_time);
    key(b, "end_time");
    put_or_null(b, r->end_time);
    key(b, "time_limit_s");
    srv_buf_i64(b, r->time_limit_s);
    key(b, "exit_code");
    if (r->has_exit_code)
        srv_buf_i64(b, r->exit_code);
    else
        srv_buf_put(b, "null", 4);
    key(b, "attempts");
    srv_buf_i64(b, r->attempts);
    key(b, "max_retries");
    srv_buf_i64(b, r->max_retries);
    key(b, "retries_used");
    srv_buf_i64(b, r->retries_used);
    key(b, "cancel_requested");
    srv_buf_puts(b, r->cancel_requested ? "true" : "false");
    key(b, "estimated_start");
    put_or_null(b, pending ? r->estimated_start : 0);
    srv_job_render_estimates(j, b);
    /* the sum of its ledger rows so far, live accruals included (docs/billing.md) */
    key(b, "cost_micros");
    srv_buf_i64(b, r->cost_micros);
    int64_t gs = r->attained_gpu_s;
    if (j->state == FG_JOB_RUNNING && r->start_time) {
        int64_t run = srv_now() - r->start_time;
        if (run > 0)
            gs += run * r->gpus;
    }
    key(b, "gpu_seconds");
    srv_buf_i64(b, gs);
    key(b, "cpus");
    put_or_null(b, r->cpus);
    key(b, "memory_mb");
    put_or_null(b, r->memory_mb);
    srv_idle_render(j, b); /* gpu_util_pct .. idle_gpu_s (sched_idle.c) */
    srv_buf_put(b, "}", 1);
}

/* The job as a jansson object (for replies that embed jobs: lists, events), parsed
 * from srv_job_render's text so that there is one rendering of a job. mu held. */
json_t *srv_job_json(srv_t *s, const srv_job_t *j, bool full)
{
    srv_buf_t b = {0};
    srv_job_render(s, j, full, NULL, &b);
    json_t *o = json_loadb(b.p, b.n, 0, NULL);
    free(b.p);
    return o ? o : json_object();
}

/* ------------------------------------------------------------------ events */

static void track_gap(srv_t *s);

void srv_event_mem(srv_t *s, const fg_store_event_t *e)
{
    if (e->seq <= 0)
        return;
    if (s->first_seq == 0)
        s->first_seq = e->seq < s->pub_seq + 1 ? e->seq : s->pub_seq + 1;
    if (e->seq < s->first_seq)
        return;
    size_t blk = (size_t)(e->seq - s->first_seq) / SRV_EVENT_BLOCK;
    if (blk >= s->nevent_blocks) {
        s->event_blocks = fg_xrealloc(s->event_blocks, (blk + 1) * sizeof *s->event_blocks);
        while (s->nevent_blocks <= blk)
            s->event_blocks[s->nevent_blocks++] =
                fg_xcalloc(SRV_EVENT_BLOCK, sizeof **s->event_blocks);
    }
    srv_event_t *v = srv_event_at(s, e->seq);
    if (v->seq)
        return; /* already there */
    v->seq = e->seq;
    v->time = e->time;
    v->kind = !e->kind                      ? SRV_EVENT_JOB
              : !strcmp(e->kind, "node")    ? SRV_EVENT_NODE
              : !strcmp(e->kind, "account") ? SRV_EVENT_ACCOUNT
                                            : SRV_EVENT_JOB;
    v->job_id = (uint64_t)(e->job_id > 0 ? e->job_id : 0);
    snprintf(v->from, sizeof v->from, "%s", e->from_state ? e->from_state : "");
    snprintf(v->to, sizeof v->to, "%s", e->to_state ? e->to_state : "");
    v->reason = srv_strdup0(e->reason);
    v->node = srv_strdup0(e->node);
    if (e->seq > s->top_seq)
        s->top_seq = e->seq;
    /* publish the contiguous prefix */
    while (s->pub_seq < s->top_seq) {
        int64_t nx = s->pub_seq + 1;
        if (nx < s->first_seq) {
            s->pub_seq = nx;
            continue;
        }
        if (!srv_event_at(s, nx)->seq)
            break;
        s->pub_seq = nx;
    }
    track_gap(s);
}

static bool seq_present(const srv_t *s, int64_t q)
{
    if (q < s->first_seq)
        return true;
    const srv_event_t *v = srv_event_at(s, q);
    return v && v->seq != 0;
}

/* Remembers since when the feed waits for the event right after pub_seq. */
static void track_gap(srv_t *s)
{
    if (s->pub_seq >= s->top_seq) {
        s->gap_seq = 0;
        s->gap_since_ms = 0;
    } else if (s->gap_seq != s->pub_seq + 1) {
        s->gap_seq = s->pub_seq + 1;
        s->gap_since_ms = srv_now_ms();
    }
}

/* A sequence number that stays missing (a backend whose sequences leave gaps on
 * rollback, e.g. PostgreSQL's) must not hold the feed back forever: one missing for 2 s
 * (an event in flight between its commit and memory takes microseconds) is skipped.
 * mu held; called by the scheduler thread. */
void srv_event_gap_check(srv_t *s)
{
    if (!s->gap_seq || s->gap_seq != s->pub_seq + 1 || srv_now_ms() - s->gap_since_ms < 2000)
        return;
    s->pub_seq++;
    while (s->pub_seq < s->top_seq && seq_present(s, s->pub_seq + 1))
        s->pub_seq++;
    track_gap(s);
}

const char *srv_event_type(const srv_event_t *e)
{
    return e->kind == SRV_EVENT_NODE ? "node" : e->kind == SRV_EVENT_ACCOUNT ? "account" : "job";
}

json_t *srv_event_json(srv_t *s, const srv_event_t *e, int64_t viewer, bool admin)
{
    json_t *o = json_object();
    json_object_set_new(o, "seq", json_integer(e->seq));
    json_object_set_new(o, "time", json_integer(e->time));
    json_object_set_new(o, "type", json_string(srv_event_type(e)));
    json_object_set_new(o, "from", e->from[0] ? json_string(e->from) : json_null());
    json_object_set_new(o, "to", json_string(e->to));
    json_object_set_new(o, "reason", e->reason ? json_string(e->reason) : json_null());
    bool acct = e->kind == SRV_EVENT_ACCOUNT; /* (its subject is in the node field) */
    json_object_set_new(o, "node", e->node && !acct ? json_string(e->node) : json_null());
    if (acct)
        json_object_set_new(o, "account", e->node ? json_string(e->node) : json_null());
    if (e->kind == SRV_EVENT_JOB) {
        char id[24];
        snprintf(id, sizeof id, "%llu", (unsigned long long)e->job_id);
        json_object_set_new(o, "job_id", json_string(id));
        srv_job_t *j = srv_job_get(s, e->job_id);
        if (j)
            json_object_set_new(o, "job", srv_job_json(s, j, admin || j->r.user_id == viewer));
    }
    return o;
}
