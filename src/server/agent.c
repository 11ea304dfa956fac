/*
 * agent.c - the server side of docs/agent-protocol.md, nodes, and job logs.
 *
 * register/started/exited go through the scheduler thread (they change the core and
 * must be durable before they are acknowledged); heartbeat and the assignments
 * long-poll are answered here from memory. Each node has an outbox of messages (start,
 * stop) numbered per node; a long-poll answers with those after its `after` and the
 * messages at or below `after` are dropped (acknowledged).
 *
 * Logs: one file per (job, attempt, rank) under DATA_DIR/logs/JOB/, appended at the
 * exact offset the agent gives (idempotent shipping); log_mu serialises appends.
 */
#include "server/server.h"
#include "server/valid.h"

#include "common/log.h"
#include "common/xalloc.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_CHUNK_MAX (256 * 1024)

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

void srv_node_send(srv_t *s, srv_node_t *n, json_t *msg)
{
    (void)s;
    json_object_set_new(msg, "seq", json_integer(n->next_msg_seq++));
    json_array_append_new(n->outbox, msg);
}

bool srv_node_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n >= FG_NAME_MAX) /* (the core's names hold FG_NAME_MAX - 1 bytes) */
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '.' || *p == '-'))
            return false;
    return true;
}

/* true if r's node credential belongs to `node`; else replies 403 and returns false.
 * A node acts only under its own name: it may not register, heartbeat, poll or report
 * as another. */
static bool own_node(srv_req_t *r, const char *node)
{
    if (r->agent && !strcmp(node, r->agent_node))
        return true;
    srv_reply_error(r, 403, "forbidden", "node",
                    "this credential belongs to node '%s'; it may not act for node '%.64s'",
                    r->agent_node, node);
    return false;
}

/* Common fields of started/exited/logs. false: replied. */
static bool report_ids(srv_req_t *r, json_t *b, srv_msg_t *m)
{
    const char *node, *jid;
    long long att, ep, rank = 0;
    bool has;
    if (!v_string(r, b, "node", true, 64, &node) || !v_string(r, b, "job_id", true, 24, &jid) ||
        !v_int(r, b, "attempt", true, 1, INT32_MAX, &att, &has) ||
        !v_int(r, b, "epoch", true, 0, INT64_MAX, &ep, &has) ||
        !v_int(r, b, "rank", false, 0, 1024, &rank, &has) || !own_node(r, node))
        return false;
    if (!srv_parse_job_id(jid, &m->job)) {
        srv_reply_error(r, 404, "not_found", "job_id", "no job '%s'", jid);
        return false;
    }
    snprintf(m->node, sizeof m->node, "%s", node);
    m->attempt = (int32_t)att;
    m->epoch = ep;
    m->rank = (int32_t)rank;
    return true;
}

/* ------------------------------------------------------------------ register, heartbeat */

int h_agent_register(srv_req_t *r)
{
    json_t *b = srv_body_object(r);
    if (!b)
        return SRV_YES;
    const char *node, *inst, *addr, *gtype, *iso;
    long long cpus = 0, mem = 0;
    bool has;
    if (!v_string(r, b, "node", true, 64, &node) || !v_string(r, b, "instance", true, 64, &inst) ||
        !v_string(r, b, "addr", false, 255, &addr) ||
        !v_string(r, b, "gpu_type", false, FG_NAME_MAX, &gtype) ||
        !v_int(r, b, "cpus", false, 0, 1 << 20, &cpus, &has) ||
        !v_int(r, b, "memory_mb", false, 0, (long long)1 << 40, &mem, &has) ||
        !v_string(r, b, "isolation", false, 1024, &iso))
        goto bad;
    json_t *isolated = json_object_get(b, "isolated");
    if (isolated && !json_is_boolean(isolated)) {
        srv_reply_error(r, 400, "invalid_argument", "isolated", "isolated must be a boolean");
        goto bad;
    }
    if (!srv_node_name_ok(node)) {
        srv_reply_error(r, 400, "invalid_argument", "node", "node must match [A-Za-z0-9_.-]{1,63}");
        goto bad;
    }
    if (!own_node(r, node))
        goto bad;
    json_t *gpus = json_object_get(b, "gpus");
    if (!json_is_array(gpus) || json_array_size(gpus) < 1 ||
        json_array_size(gpus) > FG_MAX_NODE_GPUS) {
        srv_reply_error(r, 400, "invalid_argument", "gpus", "gpus must be an array of 1..%d GPUs",
                        FG_MAX_NODE_GPUS);
        goto bad;
    }
    size_t i;
    json_t *g;
    json_array_foreach(gpus, i, g)
    {
        if (!json_is_object(g) || !json_is_integer(json_object_get(g, "index")) ||
            json_integer_value(json_object_get(g, "index")) != (json_int_t)i) {
            srv_reply_error(r, 400, "invalid_argument", "gpus",
                            "gpus[%zu] must be an object with index %zu", i, i);
            goto bad;
        }
    }
    if (!gtype && !json_is_string(json_object_get(json_array_get(gpus, 0), "type"))) {
        srv_reply_error(r, 400, "invalid_argument", "gpu_type", "gpu_type is required");
        goto bad;
    }
    json_t *running = json_object_get(b, "running");
    if (running && !json_is_array(running) && !json_is_null(running)) {
        srv_reply_error(r, 400, "invalid_argument", "running", "running must be an array");
        goto bad;
    }
    srv_msg_t *m = srv_msg_new(MSG_REGISTER);
    m->json = b;
    return srv_sched_call(r, m);
bad:
    json_decref(b);
    return SRV_YES;
}

/* Checks node, instance, epoch of a heartbeat or long-poll (mu held). Replies 404/409
 * and returns NULL when they do not match. */
static srv_node_t *agent_node(srv_req_t *r, const char *node, const char *inst, long long epoch)
{
    srv_t *s = r->srv;
    srv_node_t *n = node ? srv_node_by_name(s, node) : NULL;
    if (!n || !n->registered) {
        srv_reply_error(r, 404, "not_found", "node",
                        "node '%s' is not registered with this "
                        "controller; register",
                        node ? node : "");
        return NULL;
    }
    if (!inst || strcmp(inst, n->instance) || (epoch >= 0 && epoch != s->epoch) ||
        n->state == FG_NODE_DOWN) {
        srv_reply_error(r, 409, "conflict", NULL,
                        "instance, epoch or node state mismatch (controller epoch %lld); "
                        "register again",
                        (long long)s->epoch);
        return NULL;
    }
    return n;
}

int h_agent_heartbeat(srv_req_t *r)
{
    srv_t *s = r->srv;
    json_t *b = srv_body_object(r);
    if (!b)
        return SRV_YES;
    const char *node, *inst;
    long long epoch = 0;
    bool has;
    int ret = SRV_YES;
    if (!v_string(r, b, "node", true, 64, &node) || !v_string(r, b, "instance", true, 64, &inst) ||
        !v_int(r, b, "epoch", true, 0, INT64_MAX, &epoch, &has) || !own_node(r, node))
        goto out;
    pthread_mutex_lock(&s->mu);
    srv_node_t *n = agent_node(r, node, inst, epoch);
    if (n) {
        /* when it arrived, not when a busy controller got to it */
        n->last_heartbeat_ms = srv_now_ms() - hd_request_age_ms(r->conn);
        json_t *gpus = json_object_get(b, "gpus");
        size_t i;
        json_t *g;
        json_array_foreach(gpus, i, g)
        {
            json_int_t idx = json_integer_value(json_object_get(g, "index"));
            if (idx < 0 || idx >= n->ngpus)
                continue;
            json_t *u = json_object_get(g, "util_pct"), *mu = json_object_get(g, "mem_used_mb");
            n->gpus[idx].util_pct = json_is_integer(u) ? (int)json_integer_value(u) : -1;
            n->gpus[idx].mem_used_mb = json_is_integer(mu) ? json_integer_value(mu) : -1;
        }
        const char *st = n->state == FG_NODE_UP ? "up" : "draining";
        json_t *reply = json_pack("{s:I,s:s,s:i}", "epoch", (json_int_t)s->epoch, "node_state", st,
                                  "heartbeat_interval_s", s->cfg.heartbeat_interval_s);
        pthread_mutex_unlock(&s->mu);
        ret = srv_reply_json(r, 200, reply);
    } else {
        pthread_mutex_unlock(&s->mu);
    }
out:
    json_decref(b);
    return ret;
}

int h_agent_assignments(srv_req_t *r)
{
    srv_t *s = r->srv;
    const char *node = srv_query(r, "node"), *inst = srv_query(r, "instance");
    const char *as = srv_query(r, "after"), *ws = srv_query(r, "wait");
    long long after = 0, wait = 25;
    char *end;
    if (as) {
        after = strtoll(as, &end, 10);
        if (!*as || *end || after < 0)
            return srv_reply_error(r, 400, "invalid_argument", "after", "after must be >= 0");
    }
    if (ws) {
        wait = strtoll(ws, &end, 10);
        if (!*ws || *end || wait < 0 || wait > 60)
            return srv_reply_error(r, 400, "invalid_argument", "wait", "wait must be 0..60");
    }
    if (!own_node(r, node ? node : ""))
        return SRV_YES;
    if (r->resume_count == 0)
        r->park_deadline_ms = srv_now_ms() + wait * 1000;
    pthread_mutex_lock(&s->mu);
    srv_node_t *n = agent_node(r, node, inst, -1);
    if (!n) {
        pthread_mutex_unlock(&s->mu);
        return SRV_YES;
    }
    /* drop acknowledged messages */
    while (json_array_size(n->outbox) > 0 &&
           json_integer_value(json_object_get(json_array_get(n->outbox, 0), "seq")) <= after)
        json_array_remove(n->outbox, 0);
    json_t *msgs = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(n->outbox, i, m)
    {
        if (json_integer_value(json_object_get(m, "seq")) > after)
            json_array_append(msgs, m);
    }
    const char *st = n->state == FG_NODE_UP ? "up" : "draining";
    pthread_mutex_unlock(&s->mu);
    if (json_array_size(msgs) == 0 && srv_now_ms() < r->park_deadline_ms &&
        !atomic_load(&s->stopping)) {
        json_decref(msgs);
        return srv_park(r, WAIT_AGENT, r->park_deadline_ms);
    }
    return srv_reply_json(r, 200,
                          json_pack("{s:I,s:s,s:o}", "epoch", (json_int_t)s->epoch, "node_state",
                                    st, "messages", msgs));
}

/* Parses a started report (body b) into a message; NULL when refused (replied on r). */
static srv_msg_t *parse_started(srv_req_t *r, json_t *b)
{
    srv_msg_t *m = srv_msg_new(MSG_STARTED);
    long long st = 0;
    bool has;
    if (!report_ids(r, b, m) || !v_int(r, b, "start_time_ms", false, 0, INT64_MAX, &st, &has)) {
        free(m);
        return NULL;
    }
    m->start_ms = st;
    return m;
}

/* An exited report's last_checkpoint_ms (agent clock, 0: none) kept within what can be
 * true: not after the rank's reported end (when there is one), nor after the controller's
 * now plus SRV_CKPT_SKEW_MS (the clocks of agents and controller differ a little).
 * Clamped rather than refused, as end_time_ms is; billing clamps it into the attempt's
 * span too.
 * Example: ck = end + 5 s -> end; ck = 0 -> 0. */
#define SRV_CKPT_SKEW_MS 5000
static int64_t checkpoint_clamp(int64_t ck, int64_t end_ms, int64_t now_ms)
{
    assert(ck >= 0);
    if (ck > now_ms + SRV_CKPT_SKEW_MS)
        ck = now_ms + SRV_CKPT_SKEW_MS;
    if (end_ms > 0 && ck > end_ms)
        ck = end_ms;
    return ck;
}

/* Parses an exited report (body b) into a message; NULL when refused (replied on r). */
static srv_msg_t *parse_exited(srv_req_t *r, json_t *b)
{
    srv_msg_t *m = srv_msg_new(MSG_EXITED);
    const char *cause;
    long long st = 0, en = 0, lb = 0, code = 0, sig = 0, ck = 0;
    bool has;
    if (!report_ids(r, b, m) || !v_string(r, b, "end_cause", true, 32, &cause) ||
        !v_int(r, b, "exit_code", false, -1024, 1024, &code, &m->has_exit) ||
        !v_int(r, b, "signal", false, 0, 1024, &sig, &m->has_signal) ||
        !v_int(r, b, "start_time_ms", false, 0, INT64_MAX, &st, &has) ||
        !v_int(r, b, "end_time_ms", false, 0, INT64_MAX, &en, &has) ||
        !v_int(r, b, "log_bytes", false, 0, INT64_MAX, &lb, &has) ||
        !v_int(r, b, "last_checkpoint_ms", false, 0, INT64_MAX, &ck, &has)) {
        free(m);
        return NULL;
    }
    static const struct {
        const char *name;
        fg_end_cause_t c;
    } causes[] = {{"completed", FG_END_COMPLETED},           {"failed", FG_END_FAILED},
                  {"cancelled", FG_END_CANCELLED},           {"timeout", FG_END_TIMEOUT},
                  {"preempted", FG_END_PREEMPTED},           {"node_lost", FG_END_NODE_LOST},
                  {"user_setup_failed", FG_END_SETUP_FAILED}};
    int ci = -1;
    for (size_t i = 0; i < sizeof causes / sizeof causes[0]; i++)
        if (!strcmp(causes[i].name, cause))
            ci = (int)causes[i].c;
    if (ci < 0) {
        free(m);
        srv_reply_error(r, 400, "invalid_argument", "end_cause",
                        "end_cause must be completed, failed, cancelled, timeout, "
                        "preempted or user_setup_failed");
        return NULL;
    }
    m->cause = ci;
    m->exit_code = (int32_t)code;
    m->signal = (int32_t)sig;
    m->start_ms = st;
    m->end_ms = en;
    m->log_bytes = lb;
    m->last_checkpoint_ms = checkpoint_clamp(ck, en, srv_now_ms());
    if (m->last_checkpoint_ms > 0) /* rare (jobs that checkpoint) and what a refund rests on */
        fg_log(FG_LOG_INFO, "node %s: exited %s.%d.%d (%s): last checkpoint noticed at %lld ms",
               m->node, json_string_value(json_object_get(b, "job_id")), (int)m->attempt,
               (int)m->rank, cause, (long long)m->last_checkpoint_ms);
    return m;
}

/* A single report's route: the body parsed by `parse` (which replies when it refuses)
 * goes to the scheduler thread. */
static int single_report(srv_req_t *r, srv_msg_t *(*parse)(srv_req_t *, json_t *))
{
    json_t *b = srv_body_object(r);
    if (!b)
        return SRV_YES;
    srv_msg_t *m = parse(r, b);
    json_decref(b);
    return m ? srv_sched_call(r, m) : SRV_YES;
}

int h_agent_started(srv_req_t *r)
{
    return single_report(r, parse_started);
}

int h_agent_exited(srv_req_t *r)
{
    return single_report(r, parse_exited);
}

srv_msg_t *srv_agent_parse_reports(srv_req_t *r, json_t *body)
{
    json_t *reps = json_object_get(body, "reports");
    if (!json_is_array(reps) || json_array_size(reps) < 1 ||
        json_array_size(reps) > SRV_REPORTS_MAX) {
        srv_reply_error(r, 400, "invalid_argument", "reports",
                        "reports must be an array of 1..%d reports", SRV_REPORTS_MAX);
        return NULL;
    }
    srv_msg_t *m = srv_msg_new(MSG_REPORTS);
    m->nslots = json_array_size(reps);
    m->slots = fg_xcalloc(m->nslots, sizeof *m->slots);
    /* each entry is validated by the code of its own route; what that code would have
     * answered is kept as the entry's result */
    srv_req_t sub;
    memset(&sub, 0, sizeof sub);
    sub.srv = r->srv;
    sub.capture = true;
    sub.agent = r->agent; /* each entry acts for the request's node only */
    snprintf(sub.agent_node, sizeof sub.agent_node, "%s", r->agent_node);
    for (size_t i = 0; i < m->nslots; i++) {
        json_t *e = json_array_get(reps, i);
        const char *type = json_string_value(json_object_get(e, "type"));
        srv_msg_t *im = NULL;
        if (!json_is_object(e))
            srv_reply_error(&sub, 400, "invalid_argument", "reports",
                            "reports[%zu] must be an object", i);
        else if (type && !strcmp(type, "started"))
            im = parse_started(&sub, e);
        else if (type && !strcmp(type, "exited"))
            im = parse_exited(&sub, e);
        else
            srv_reply_error(&sub, 400, "invalid_argument", "type",
                            "reports[%zu].type must be \"started\" or \"exited\"", i);
        srv_report_slot_t *sl = &m->slots[i];
        if (im) {
            sl->m = im;
        } else {
            sl->status = (int)sub.captured_status;
            json_t *err = json_object_get(sub.captured, "error");
            sl->error = err ? json_incref(err) : json_pack("{s:s}", "code", "internal");
        }
        json_decref(sub.captured);
        sub.captured = NULL;
    }
    return m;
}

int h_agent_reports(srv_req_t *r)
{
    json_t *b = srv_body_object(r);
    if (!b)
        return SRV_YES;
    srv_msg_t *m = srv_agent_parse_reports(r, b);
    json_decref(b);
    if (!m)
        return SRV_YES;
    bool any = false;
    for (size_t i = 0; i < m->nslots; i++)
        any = any || m->slots[i].m;
    if (any)
        return srv_sched_call(r, m);
    /* every entry refused at parsing: nothing for the scheduler */
    json_t *results = json_array();
    for (size_t i = 0; i < m->nslots; i++)
        json_array_append_new(results, json_pack("{s:i,s:O}", "status", m->slots[i].status, "error",
                                                 m->slots[i].error));
    srv_msg_free(m);
    return srv_reply_json(r, 200, json_pack("{s:o}", "results", results));
}

/* ------------------------------------------------------------------ logs */

static void log_path(srv_t *s, uint64_t job, int attempt, int rank, char *out, size_t n)
{
    snprintf(out, n, "%s/logs/%llu/%d.%d.log", s->cfg.data_dir, (unsigned long long)job, attempt,
             rank);
}

static int64_t file_size(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (int64_t)st.st_size : 0;
}

/* true if rank `rank` is node's in the JSON array of node names `nodes_json`. */
static bool rank_in(const char *nodes_json, int rank, const char *node)
{
    json_t *a = nodes_json ? json_loads(nodes_json, 0, NULL) : NULL;
    const char *n = json_string_value(json_array_get(a, (size_t)rank));
    bool mine = n && !strcmp(n, node);
    json_decref(a);
    return mine;
}

/*
 * Whether rank `rank` of attempt `attempt` of job `id` was assigned to `node`: 0 yes,
 * 403 no, 404 no such job or attempt. The current attempt is checked in memory; an
 * earlier one (its logs may still be shipping) by its stored attempt record.
 */
static int rank_owner_check(srv_t *s, uint64_t id, int attempt, int rank, const char *node)
{
    pthread_mutex_lock(&s->mu);
    srv_job_t *j = srv_job_get(s, id);
    if (!j || attempt < 1 || attempt > j->r.attempts) {
        pthread_mutex_unlock(&s->mu);
        return 404;
    }
    int rc = -1;
    if (attempt == j->r.attempts) {
        if (j->state == FG_JOB_RUNNING && rank < j->nranks)
            rc = strcmp(j->ranks[rank].node, node) ? 403 : 0;
        else
            rc = rank_in(j->r.nodes_json, rank, node) ? 0 : 403;
    }
    pthread_mutex_unlock(&s->mu);
    if (rc >= 0)
        return rc;
    fg_store_tx_t *tx;
    if (fg_store_read_begin(s->store, &tx) != 0)
        return 403;
    fg_store_attempt_t a = {0};
    rc =
        fg_store_attempt_get(tx, (int64_t)id, attempt, &a) == 0 && rank_in(a.nodes_json, rank, node)
            ? 0
            : 403;
    fg_store_attempt_clear(&a);
    fg_store_read_end(tx);
    return rc;
}

int h_agent_logs(srv_req_t *r)
{
    srv_t *s = r->srv;
    json_t *b = srv_body_object(r);
    if (!b)
        return SRV_YES;
    int ret = SRV_YES;
    srv_msg_t m = {0};
    const char *data;
    long long off = 0;
    bool has;
    unsigned char *bin = NULL;
    if (!report_ids(r, b, &m) || !v_int(r, b, "offset", true, 0, INT64_MAX, &off, &has) ||
        !v_string(r, b, "data_b64", true, 4 * LOG_CHUNK_MAX / 3 + 8, &data))
        goto out;
    size_t dl = strlen(data);
    bin = fg_xmalloc(dl + 1);
    size_t bn = 0;
    if (sodium_base642bin(bin, dl + 1, data, dl, NULL, &bn, NULL, sodium_base64_VARIANT_ORIGINAL) ||
        bn < 1 || bn > LOG_CHUNK_MAX) {
        ret = srv_reply_error(r, 400, "invalid_argument", "data_b64",
                              "data_b64 must be standard base64 of 1..%d bytes", LOG_CHUNK_MAX);
        goto out;
    }
    int who = rank_owner_check(s, m.job, m.attempt, m.rank, m.node);
    if (who == 404) {
        ret = srv_reply_error(r, 404, "not_found", "job_id", "no such job attempt");
        goto out;
    }
    if (who) {
        ret = srv_reply_error(r, 403, "forbidden", "rank",
                              "rank %d of attempt %d of job %llu was not assigned to node %s",
                              (int)m.rank, (int)m.attempt, (unsigned long long)m.job, m.node);
        goto out;
    }
    char path[1400], dir[1300];
    snprintf(dir, sizeof dir, "%s/logs", s->cfg.data_dir);
    mkdir(dir, 0700);
    snprintf(dir, sizeof dir, "%s/logs/%llu", s->cfg.data_dir, (unsigned long long)m.job);
    mkdir(dir, 0700);
    log_path(s, m.job, m.attempt, m.rank, path, sizeof path);
    pthread_mutex_lock(&log_mu);
    int64_t len = file_size(path);
    if ((int64_t)off == len) {
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        ssize_t w = fd >= 0 ? write(fd, bin, bn) : -1;
        if (fd >= 0)
            close(fd);
        pthread_mutex_unlock(&log_mu);
        if (w != (ssize_t)bn) {
            ret = srv_reply_error(r, 503, "unavailable", NULL, "could not store the log chunk");
            goto out;
        }
        srv_wake_kind(s, WAIT_STREAM);
        ret = srv_reply_json(r, 200, json_pack("{s:I}", "length", (json_int_t)(len + (int64_t)bn)));
    } else if ((int64_t)off + (int64_t)bn <= len) {
        pthread_mutex_unlock(&log_mu);
        ret = srv_reply_json(r, 200, json_pack("{s:I}", "length", (json_int_t)len));
    } else {
        pthread_mutex_unlock(&log_mu);
        ret = srv_reply_json(r, 409,
                             json_pack("{s:{s:s,s:s},s:I}", "error", "code", "conflict", "message",
                                       "the chunk does not start at the stored length", "length",
                                       (json_int_t)len));
    }
out:
    free(bin);
    json_decref(b);
    return ret;
}

typedef struct log_stream {
    srv_t *s;
    hd_conn_t *conn;
    uint64_t job;
    int attempt, rank;
    int64_t off;
    int64_t last_write_ms;
    char *pending;
    size_t plen, poff;
    bool parked;
} log_stream_t;

static bool job_ended(srv_t *s, uint64_t id)
{
    pthread_mutex_lock(&s->mu);
    srv_job_t *j = srv_job_get(s, id);
    /* (an end not committed yet is not shown: the commit wakes the stream) */
    bool ended =
        !j || (srv_job_published(s, j) && j->state != FG_JOB_PENDING && j->state != FG_JOB_RUNNING);
    pthread_mutex_unlock(&s->mu);
    return ended;
}

static ssize_t log_read(void *cls, char *out, size_t max)
{
    log_stream_t *st = cls;
    srv_t *s = st->s;
    if (st->parked) {
        st->parked = false;
        atomic_fetch_sub(&s->suspended, 1);
    }
    if (st->poff < st->plen) {
        size_t n = st->plen - st->poff;
        if (n > max)
            n = max;
        memcpy(out, st->pending + st->poff, n);
        st->poff += n;
        return (ssize_t)n;
    }
    if (atomic_load(&s->stopping))
        return HD_STREAM_END;
    unsigned long gen = atomic_load(&s->wake_gen);
    char path[1400];
    log_path(s, st->job, st->attempt, st->rank, path, sizeof path);
    bool ended = job_ended(s, st->job);
    char buf[16384];
    ssize_t n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = pread(fd, buf, sizeof buf, st->off);
        close(fd);
    }
    if (n > 0) {
        /* one SSE record: every line as data:, the id is the offset after it */
        size_t cap = (size_t)n * 2 + 64;
        free(st->pending);
        st->pending = fg_xmalloc(cap);
        st->plen = st->poff = 0;
        const char *p = buf, *e = buf + n;
        while (p < e) {
            const char *nl = memchr(p, '\n', (size_t)(e - p));
            size_t ln = nl ? (size_t)(nl - p) : (size_t)(e - p);
            st->pending = fg_xgrow(st->pending, &cap, st->plen + ln + 16, 1);
            memcpy(st->pending + st->plen, "data: ", 6);
            memcpy(st->pending + st->plen + 6, p, ln);
            st->plen += 6 + ln;
            st->pending[st->plen++] = '\n';
            p += ln + (nl ? 1 : 0);
        }
        st->off += n;
        char idl[64];
        int il = snprintf(idl, sizeof idl, "id: %lld\n\n", (long long)st->off);
        st->pending = fg_xgrow(st->pending, &cap, st->plen + (size_t)il + 1, 1);
        memcpy(st->pending + st->plen, idl, (size_t)il);
        st->plen += (size_t)il;
        st->last_write_ms = srv_now_ms();
        return log_read(cls, out, max);
    }
    if (ended) {
        static const char bye[] = "event: end\ndata: \n\n";
        if (st->off >= 0) {
            st->off = -1;
            size_t k = sizeof bye - 1 < max ? sizeof bye - 1 : max;
            memcpy(out, bye, k);
            return (ssize_t)k;
        }
        return HD_STREAM_END;
    }
    int64_t now = srv_now_ms();
    if (now - st->last_write_ms >= 15000) {
        static const char ka[] = ": keep-alive\n\n";
        st->last_write_ms = now;
        size_t k = sizeof ka - 1 < max ? sizeof ka - 1 : max;
        memcpy(out, ka, k);
        return (ssize_t)k;
    }
    st->parked = true;
    srv_park_conn(s, st->conn, WAIT_STREAM, now + 1000, gen);
    return 0;
}

static void log_free(void *cls)
{
    log_stream_t *st = cls;
    if (st->parked) /* closed while parked (its peer went away, or shutdown) */
        atomic_fetch_sub(&st->s->suspended, 1);
    free(st->pending);
    free(st);
}

/*
 * A plain-text log answer, streamed from the files in bounded pieces (a log is never
 * held whole in memory): ranks rank..r1 of one attempt, every line prefixed "[k] "
 * when several ranks are shown. The engine calls the reader each time the socket took
 * the previous piece, so a client that does not read costs this struct and the
 * engine's chunk buffer, whatever the log's size.
 */
typedef struct log_text {
    srv_t *s;
    uint64_t job;
    int attempt, rank, r1; /* the rank being read, the last */
    bool prefix, bol;
    int fd;        /* the rank's file; -1: not open */
    int64_t pos;   /* read position in it */
    int64_t skip;  /* bytes of prefixed text still to leave out (offset=) */
    char in[8192]; /* a piece of the file */
} log_text_t;

/* Opens the next rank's file with output (rank advanced); false when none is left. */
static bool log_text_open(log_text_t *lt)
{
    while (lt->fd < 0) {
        if (lt->attempt < 1 || lt->rank > lt->r1)
            return false;
        char path[1400];
        log_path(lt->s, lt->job, lt->attempt, lt->rank, path, sizeof path);
        lt->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (lt->fd < 0) {
            lt->rank++;
            lt->pos = 0;
        }
    }
    return true;
}

static ssize_t log_text_read(void *cls, char *out, size_t max)
{
    log_text_t *lt = cls;
    size_t o = 0;
    while (o + 8 < max && log_text_open(lt)) {
        /* a piece small enough that its prefixed text fits in out (a prefix of a
         * rank < 10^7 and its byte take at most 12) */
        size_t want = lt->prefix ? (max - o) / 12 : max - o;
        if (want > sizeof lt->in)
            want = sizeof lt->in;
        if (want == 0)
            break;
        ssize_t n = pread(lt->fd, lt->in, want, lt->pos);
        if (n <= 0) { /* the end of this rank's log */
            close(lt->fd);
            lt->fd = -1;
            lt->rank++;
            lt->pos = 0;
            lt->bol = true;
            continue;
        }
        lt->pos += n;
        for (ssize_t i = 0; i < n; i++) {
            char pre[16];
            int pl = 0;
            if (lt->bol && lt->prefix)
                pl = snprintf(pre, sizeof pre, "[%d] ", lt->rank);
            for (int k = 0; k < pl; k++)
                if (lt->skip > 0)
                    lt->skip--;
                else
                    out[o++] = pre[k];
            if (lt->skip > 0)
                lt->skip--;
            else
                out[o++] = lt->in[i];
            lt->bol = lt->in[i] == '\n';
        }
        assert(o <= max);
    }
    return o ? (ssize_t)o : HD_STREAM_END;
}

static void log_text_free(void *cls)
{
    log_text_t *lt = cls;
    if (lt->fd >= 0)
        close(lt->fd);
    free(lt);
}

int h_jobs_logs(srv_req_t *r)
{
    srv_t *s = r->srv;
    uint64_t id;
    if (!srv_parse_job_id(r->seg[2], &id))
        return srv_reply_error(r, 404, "not_found", NULL, "no job '%.32s'", r->seg[2]);
    pthread_mutex_lock(&s->mu);
    srv_job_t *j = srv_job_get(s, id);
    bool mine = j && (r->admin || j->r.user_id == r->user_id);
    int attempts = j ? j->r.attempts : 0;
    int nranks = j ? (j->nranks ? j->nranks : j->r.gpus > 8 ? j->r.gpus / 8 : 1) : 1;
    pthread_mutex_unlock(&s->mu);
    if (!j)
        return srv_reply_error(r, 404, "not_found", NULL, "no job %llu", (unsigned long long)id);
    if (!mine)
        return srv_reply_error(r, 403, "forbidden", NULL, "job %llu belongs to another user",
                               (unsigned long long)id);
    long long off = 0, rank = -1, attempt = attempts;
    const char *q;
    char *end;
    if ((q = srv_query(r, "offset"))) {
        off = strtoll(q, &end, 10);
        if (!*q || *end || off < 0)
            return srv_reply_error(r, 400, "invalid_argument", "offset", "offset must be >= 0");
    }
    if ((q = srv_query(r, "rank"))) {
        rank = strtoll(q, &end, 10);
        if (!*q || *end || rank < 0 || rank >= nranks)
            return srv_reply_error(r, 400, "invalid_argument", "rank", "rank must be 0..%d",
                                   nranks - 1);
    }
    if ((q = srv_query(r, "attempt"))) {
        attempt = strtoll(q, &end, 10);
        if (!*q || *end || attempt < 1 || attempt > attempts)
            return srv_reply_error(r, 400, "invalid_argument", "attempt", "attempt must be 1..%d",
                                   attempts);
    }
    /* default: the latest attempt that has any output */
    char path[1400];
    if (!srv_query(r, "attempt"))
        for (long long a = attempts; a >= 1; a--) {
            log_path(s, id, (int)a, rank < 0 ? 0 : (int)rank, path, sizeof path);
            if (file_size(path) > 0) {
                attempt = a;
                break;
            }
        }
    const char *follow = srv_query(r, "follow");
    if (follow && (!strcmp(follow, "1") || !strcmp(follow, "true"))) {
        const char *lei = srv_header(r, "Last-Event-ID");
        if (lei) {
            long long v = strtoll(lei, &end, 10);
            if (*lei && !*end && v >= 0)
                off = v;
        }
        log_stream_t *st = fg_xcalloc(1, sizeof *st);
        st->s = s;
        st->conn = r->conn;
        st->job = id;
        st->attempt = attempt > 0 ? (int)attempt : 1;
        st->rank = rank < 0 ? 0 : (int)rank;
        st->off = off;
        st->last_write_ms = srv_now_ms();
        return srv_reply_stream(r, 200, "text/event-stream", NULL, log_read, st, log_free);
    }
    /* plain text: one rank, or all ranks with a rank prefix on every line, streamed */
    log_text_t *lt = fg_xcalloc(1, sizeof *lt);
    lt->s = s;
    lt->job = id;
    lt->attempt = (int)attempt;
    lt->rank = rank < 0 ? 0 : (int)rank;
    lt->r1 = rank < 0 ? nranks - 1 : (int)rank;
    lt->prefix = lt->rank != lt->r1;
    lt->fd = -1;
    lt->bol = true;
    if (lt->prefix)
        lt->skip = off; /* skipped through the prefixed text */
    else
        lt->pos = off; /* one rank: the offset is the file's */
    return srv_reply_stream(r, 200, "text/plain; charset=utf-8", NULL, log_text_read, lt,
                            log_text_free);
}

/* ------------------------------------------------------------------ nodes */

int h_nodes_list(srv_req_t *r)
{
    srv_t *s = r->srv;
    pthread_mutex_lock(&s->mu);
    if (!srv_all_published(s)) {
        pthread_mutex_unlock(&s->mu);
        return srv_park_unpublished(r);
    }
    json_t *items = json_array();
    for (size_t i = 0; i < s->nnodes; i++)
        json_array_append_new(items, srv_node_json(s, s->nodes[i]));
    pthread_mutex_unlock(&s->mu);
    return srv_reply_json(r, 200, json_pack("{s:o,s:n}", "items", items, "next_cursor"));
}

static int node_state_call(srv_req_t *r, int drain)
{
    srv_msg_t *m = srv_msg_new(MSG_NODE_STATE);
    snprintf(m->node, sizeof m->node, "%s", r->seg[2]);
    m->cause = drain;
    srv_t *s = r->srv;
    pthread_mutex_lock(&s->mu);
    bool known = srv_node_by_name(s, r->seg[2]) != NULL;
    pthread_mutex_unlock(&s->mu);
    if (!known) {
        free(m);
        return srv_reply_error(r, 404, "not_found", NULL, "no node '%.64s'", r->seg[2]);
    }
    int ret = srv_sched_call(r, m);
    srv_audit(s, r->user_id, drain ? "node.drain" : "node.resume", r->seg[2], NULL);
    return ret;
}

int h_nodes_drain(srv_req_t *r)
{
    return node_state_call(r, 1);
}

int h_nodes_resume(srv_req_t *r)
{
    return node_state_call(r, 0);
}
