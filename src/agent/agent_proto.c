/*
 * agent_proto.c - the agent's side of docs/agent-protocol.md: per node, a heartbeat
 * thread that also (re)registers and applies the reconcile, a long-poll thread that
 * receives start/stop messages, and a reporter thread that sends started, log chunks
 * (by offset, so retries neither lose nor duplicate) and exited.
 *
 * Credentials: every request carries the node's own credential (n->token). A node
 * without one joins first (POST /v1/agent/join with the cluster token) and keeps what it
 * gets in WORK_DIR/node.token; a node credential given with --token-file is used as is.
 *
 * Retries: transport errors, 429 and 5xx are retried with exponential backoff (100 ms
 * doubling to 5 s, with jitter); 401 re-reads the token file and the node's credential
 * file and backs off.
 */
#include "agent/agent.h"
#include "agent/http.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOG_CHUNK        (256 * 1024)
#define STARTED_DELAY_MS 100

static pthread_mutex_t g_token_mu = PTHREAD_MUTEX_INITIALIZER;

int fg_agent_read_token(fg_agent_cfg_t *cfg)
{
    if (!cfg->token_file[0])
        return cfg->token[0] ? 0 : -1;
    FILE *f = fopen(cfg->token_file, "re");
    if (!f) {
        fprintf(stderr, "fairgpu agent: cannot read token file %s: %s\n", cfg->token_file,
                strerror(errno));
        return -1;
    }
    char buf[512];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *s = buf;
    while (*s == ' ' || *s == '\n' || *s == '\r' || *s == '\t')
        s++;
    size_t len = strlen(s);
    while (len &&
           (s[len - 1] == ' ' || s[len - 1] == '\n' || s[len - 1] == '\r' || s[len - 1] == '\t'))
        s[--len] = '\0';
    if (!len) {
        fprintf(stderr, "fairgpu agent: token file %s is empty\n", cfg->token_file);
        return -1;
    }
    pthread_mutex_lock(&g_token_mu);
    snprintf(cfg->token, sizeof cfg->token, "%s", s);
    pthread_mutex_unlock(&g_token_mu);
    return 0;
}

/* Sleeps ms milliseconds unless the agent is stopping. */
static void nap(fg_agent_t *ag, int64_t ms)
{
    while (ms > 0 && !ag->stop) {
        int64_t step = ms > 100 ? 100 : ms;
        struct timespec ts = {(time_t)(step / 1000), (long)(step % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        ms -= step;
    }
}

typedef struct backoff {
    int64_t ms;
} backoff_t;

static void backoff_wait(fg_agent_t *ag, backoff_t *b)
{
    b->ms = b->ms ? b->ms * 2 : 100;
    if (b->ms > 5000)
        b->ms = 5000;
    nap(ag, b->ms / 2 + rand() % (b->ms / 2 + 1));
}

/* Waits on cond until deadline (absolute CLOCK_REALTIME ms). Under ag->mu. */
static void timed_wait(pthread_cond_t *c, pthread_mutex_t *m, int64_t until_ms)
{
    struct timespec ts = {(time_t)(until_ms / 1000), (long)(until_ms % 1000) * 1000000L};
    pthread_cond_timedwait(c, m, &ts);
}

int fg_agent_is_node_credential(const char *tok)
{
    return !strncmp(tok, "fgn_", 4);
}

/* Reads the first line-ish secret of path into out (trimmed); 0, or -1 if absent/empty. */
static int read_secret(const char *path, char *out, size_t n)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char buf[512];
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[k] = '\0';
    char *p = buf;
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
        p++;
    size_t len = strcspn(p, " \n\r\t");
    p[len] = '\0';
    if (!len || len >= n)
        return -1;
    snprintf(out, n, "%s", p);
    return 0;
}

/*
 * (Re)loads node n's credential (at start and after a 401): the --token/--token-file
 * value when that is a node credential (an admin issued it for this node), else the one
 * the node got when it joined (n->cred_file). Leaves n->token "" when there is none:
 * the heartbeat thread then joins.
 */
static void node_refresh(fg_node_t *n)
{
    fg_agent_t *ag = n->ag;
    fg_agent_read_token(&ag->cfg);
    char tok[512] = "";
    pthread_mutex_lock(&g_token_mu);
    if (fg_agent_is_node_credential(ag->cfg.token))
        snprintf(tok, sizeof tok, "%s", ag->cfg.token);
    pthread_mutex_unlock(&g_token_mu);
    if (!tok[0] && read_secret(n->cred_file, tok, sizeof tok) != 0)
        tok[0] = '\0';
    pthread_mutex_lock(&g_token_mu);
    snprintf(n->token, sizeof n->token, "%s", tok);
    pthread_mutex_unlock(&g_token_mu);
}

/* fg_http_json with node n's current credential. */
static long node_http(fg_node_t *n, fg_http_t *h, const char *method, const char *path,
                      json_t *body, long timeout_ms, json_t **resp, char *err, size_t errlen)
{
    pthread_mutex_lock(&g_token_mu);
    fg_http_set_token(h, n->token);
    pthread_mutex_unlock(&g_token_mu);
    return fg_http_json(h, method, path, body, timeout_ms, resp, err, errlen);
}

/* Writes node n's new credential to n->cred_file (0600, atomically); 0 or -1. */
static int save_credential(fg_node_t *n, const char *tok)
{
    char tmp[700];
    fg_fmt(tmp, sizeof tmp, "%s.tmp", n->cred_file);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -1;
    size_t len = strlen(tok);
    int ok = write(fd, tok, len) == (ssize_t)len && write(fd, "\n", 1) == 1 && fsync(fd) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, n->cred_file) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/*
 * Makes sure node n has a credential (heartbeat thread, before registering): when it
 * has none, joins with the cluster token (POST /v1/agent/join) and keeps the credential
 * the controller gives, retrying until it succeeds or the agent stops.
 */
static void ensure_credential(fg_node_t *n, fg_http_t *h)
{
    fg_agent_t *ag = n->ag;
    backoff_t bo = {0};
    int warned = 0;
    for (;;) {
        node_refresh(n);
        pthread_mutex_lock(&g_token_mu);
        int have = n->token[0] != '\0';
        fg_http_set_token(h, ag->cfg.token);
        pthread_mutex_unlock(&g_token_mu);
        if (have || ag->stop)
            return;
        json_t *body = json_pack("{s:s}", "node", n->name), *resp = NULL;
        char err[256];
        long st = fg_http_json(h, "POST", "/v1/agent/join", body, 10000, &resp, err, sizeof err);
        json_decref(body);
        const char *tok = json_string_value(json_object_get(resp, "token"));
        if (st == 201 && tok && fg_agent_is_node_credential(tok)) {
            if (save_credential(n, tok) != 0)
                fg_log(FG_LOG_ERROR, "node %s: cannot save its credential in %s: %s", n->name,
                       n->cred_file, strerror(errno));
            else
                fg_log(FG_LOG_INFO, "node %s joined; its credential is in %s", n->name,
                       n->cred_file);
            pthread_mutex_lock(&g_token_mu);
            snprintf(n->token, sizeof n->token, "%s", tok);
            pthread_mutex_unlock(&g_token_mu);
            json_decref(resp);
            return;
        }
        json_decref(resp);
        if (st == 409 && !warned++)
            fg_log(FG_LOG_ERROR,
                   "node %s: the controller already knows this node and %s holds no "
                   "credential: an admin issues one (fairgpu node-token create %s) to give "
                   "with --token-file",
                   n->name, n->cred_file, n->name);
        else if (st != 409)
            fg_log(FG_LOG_WARN, "node %s: join: %s (retrying)", n->name, err);
        backoff_wait(ag, &bo);
    }
}

static json_t *running_list(fg_node_t *n, int with_start)
{
    json_t *arr = json_array();
    for (fg_attempt_t *a = n->attempts; a; a = a->next) {
        if (a->phantom || a->exit_sent || a->silent || (!a->launched && !a->exited))
            continue;
        if (a->error[0] && !a->launched)
            continue; /* never ran: its exited report says so */
        json_t *o =
            json_pack("{s:s, s:i, s:I, s:i, s:b}", "job_id", a->job_id, "attempt", a->attempt,
                      "epoch", (json_int_t)a->epoch, "rank", a->rank, "exited", a->exited);
        if (with_start)
            json_object_set_new(o, "start_time_ms", json_integer(a->start_ms));
        json_array_append_new(arr, o);
    }
    return arr;
}

/* ------------------------------------------------------------ register + heartbeat */

/* Registers node n (retrying until it succeeds or the agent stops). */
static void do_register(fg_node_t *n, fg_http_t *h)
{
    fg_agent_t *ag = n->ag;
    backoff_t bo = {0};
    while (!ag->stop) {
        ensure_credential(n, h);
        json_t *gpus = json_array();
        for (int i = 0; i < n->ngpus; i++)
            json_array_append_new(gpus, json_pack("{s:i, s:s, s:s, s:s, s:I}", "index",
                                                  n->gpus[i].index, "uuid", n->gpus[i].uuid, "name",
                                                  n->gpus[i].name, "type", n->gpus[i].type,
                                                  "memory_mb", (json_int_t)n->gpus[i].memory_mb));
        pthread_mutex_lock(&ag->mu);
        json_t *running = running_list(n, 1);
        pthread_mutex_unlock(&ag->mu);
        json_t *body =
            json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:o, s:o}", "node", n->name, "instance",
                      n->instance, "addr", ag->cfg.addr, "version", "fairgpu-agent 1", "cpus",
                      (json_int_t)ag->cfg.cpus, "memory_mb", (json_int_t)ag->cfg.memory_mb,
                      "gpu_type", n->gpu_type, "gpus", gpus, "running", running);
        json_object_set_new(body, "isolated", json_boolean(ag->cfg.iso.required));
        /* the controller keeps 159 characters of it */
        json_object_set_new(body, "isolation",
                            json_stringn(ag->cfg.iso.summary, strnlen(ag->cfg.iso.summary, 159)));
        json_t *resp = NULL;
        char err[256];
        long st =
            node_http(n, h, "POST", "/v1/agent/register", body, 10000, &resp, err, sizeof err);
        json_decref(body);
        if (st == 200 && json_is_object(resp)) {
            pthread_mutex_lock(&ag->mu);
            n->epoch = json_integer_value(json_object_get(resp, "epoch"));
            if (n->epoch > n->max_epoch)
                n->max_epoch = n->epoch;
            n->after = json_integer_value(json_object_get(resp, "after"));
            int hb = (int)json_integer_value(json_object_get(resp, "heartbeat_interval_s"));
            if (hb > 0 && hb <= 60)
                n->hb_interval_s = hb;
            const char *state = json_string_value(json_object_get(resp, "node_state"));
            snprintf(n->state, sizeof n->state, "%s", state ? state : "up");
            n->batch_reports = json_is_true(json_object_get(resp, "batch_reports"));
            json_t *stop = json_object_get(resp, "stop");
            size_t i;
            json_t *s;
            int nstop = 0;
            json_array_foreach(stop, i, s)
            {
                const char *job = json_string_value(json_object_get(s, "job_id"));
                const char *why = json_string_value(json_object_get(s, "why"));
                int att = (int)json_integer_value(json_object_get(s, "attempt"));
                json_t *r = json_object_get(s, "rank");
                if (!job || !why || !fg_why_to_cause(why))
                    continue;
                for (fg_attempt_t *a = n->attempts; a; a = a->next) {
                    if (a->attempt != att || strcmp(a->job_id, job) ||
                        (json_is_integer(r) && a->rank != (int)json_integer_value(r)))
                        continue;
                    if (!strcmp(why, "stale"))
                        a->silent = 1;
                    if (a->exited) {
                        a->stop_cause = a->stop_cause ? a->stop_cause : fg_why_to_cause(why);
                    } else {
                        fg_attempt_begin_stop(a, why, -1);
                    }
                    nstop++;
                }
            }
            n->need_register = 0;
            n->reg_gen++;
            pthread_cond_broadcast(&n->reg_cond);
            n->report_kick = 1;
            pthread_cond_broadcast(&n->report_cond);
            pthread_mutex_unlock(&ag->mu);
            fg_log(FG_LOG_INFO,
                   "node %s registered: %d GPUs, epoch %lld, state %s, %d to stop after "
                   "reconcile",
                   n->name, n->ngpus, (long long)n->epoch, n->state, nstop);
            json_decref(resp);
            return;
        }
        json_decref(resp);
        if (st == 401)
            node_refresh(n);
        if (st >= 0)
            fg_log(FG_LOG_WARN, "node %s: register refused: %s", n->name, err);
        else
            fg_log(FG_LOG_WARN, "node %s: register: %s (retrying)", n->name, err);
        backoff_wait(ag, &bo);
    }
}

void *fg_node_hb_main(void *arg)
{
    fg_node_t *n = arg;
    fg_agent_t *ag = n->ag;
    fg_http_t h;
    pthread_mutex_lock(&g_token_mu);
    fg_http_init(&h, ag->cfg.server, n->token, &ag->stop);
    pthread_mutex_unlock(&g_token_mu);
    fg_http_set_ca(&h, ag->cfg.ca_file);
    int64_t next = 0;
    while (!ag->stop) {
        pthread_mutex_lock(&ag->mu);
        while (!ag->stop && !n->need_register && fg_now_ms() < next)
            timed_wait(&n->reg_cond, &ag->mu, next);
        int need = n->need_register;
        int interval = n->hb_interval_s;
        pthread_mutex_unlock(&ag->mu);
        if (ag->stop)
            break;
        if (need) {
            do_register(n, &h);
            next = 0; /* first heartbeat (GPU samples) right away */
            continue;
        }
        next = fg_now_ms() + interval * 1000;
        fg_node_bind_gpus(n);
        json_t *gpus = json_array();
        for (int i = 0; i < n->ngpus; i++) {
            fg_gpu_sample_t s;
            if (n->gpu.sample(n->gpu.ctx, i, &s) == 0 && s.ok)
                json_array_append_new(gpus, json_pack("{s:i, s:i, s:I, s:I}", "index", i,
                                                      "util_pct", s.util_pct, "mem_used_mb",
                                                      (json_int_t)s.mem_used_mb, "memory_mb",
                                                      (json_int_t)n->gpus[i].memory_mb));
            else
                json_array_append_new(gpus, json_pack("{s:i, s:n, s:n, s:I}", "index", i,
                                                      "util_pct", "mem_used_mb", "memory_mb",
                                                      (json_int_t)n->gpus[i].memory_mb));
        }
        pthread_mutex_lock(&ag->mu);
        json_t *running = running_list(n, 0);
        int64_t epoch = n->epoch;
        pthread_mutex_unlock(&ag->mu);
        json_t *body = json_pack("{s:s, s:s, s:I, s:I, s:o, s:o}", "node", n->name, "instance",
                                 n->instance, "epoch", (json_int_t)epoch, "time_ms",
                                 (json_int_t)fg_now_ms(), "gpus", gpus, "running", running);
        json_t *resp = NULL;
        char err[256];
        long st =
            node_http(n, &h, "POST", "/v1/agent/heartbeat", body, 5000, &resp, err, sizeof err);
        json_decref(body);
        if (st == 200 && json_is_object(resp)) {
            pthread_mutex_lock(&ag->mu);
            int hb = (int)json_integer_value(json_object_get(resp, "heartbeat_interval_s"));
            if (hb > 0 && hb <= 60)
                n->hb_interval_s = hb;
            const char *state = json_string_value(json_object_get(resp, "node_state"));
            if (state)
                snprintf(n->state, sizeof n->state, "%s", state);
            pthread_mutex_unlock(&ag->mu);
        } else if (st == 404 || st == 409) {
            fg_log(FG_LOG_WARN, "node %s: heartbeat refused (%ld): re-registering", n->name, st);
            pthread_mutex_lock(&ag->mu);
            n->need_register = 1;
            pthread_mutex_unlock(&ag->mu);
        } else if (st == 401) {
            node_refresh(n);
            fg_log(FG_LOG_ERROR, "node %s: heartbeat: its credential was refused (revoked?)",
                   n->name);
        } else if (st < 0) {
            fg_log(FG_LOG_WARN, "node %s: heartbeat: %s", n->name, err);
            next = fg_now_ms() + 500; /* retry soon; the controller counts missed beats */
        }
        json_decref(resp);
    }
    fg_http_cleanup(&h);
    return NULL;
}

/* ------------------------------------------------------------ long-poll */

void *fg_node_poll_main(void *arg)
{
    fg_node_t *n = arg;
    fg_agent_t *ag = n->ag;
    fg_http_t h;
    pthread_mutex_lock(&g_token_mu);
    fg_http_init(&h, ag->cfg.server, n->token, &ag->stop);
    pthread_mutex_unlock(&g_token_mu);
    fg_http_set_ca(&h, ag->cfg.ca_file);
    backoff_t bo = {0};
    char node_q[200], inst_q[100];
    fg_url_escape(n->name, node_q, sizeof node_q);
    fg_url_escape(n->instance, inst_q, sizeof inst_q);
    while (!ag->stop) {
        pthread_mutex_lock(&ag->mu);
        while (!ag->stop && n->need_register)
            timed_wait(&n->reg_cond, &ag->mu, fg_now_ms() + 500);
        int64_t after = n->after;
        uint64_t gen = n->reg_gen;
        pthread_mutex_unlock(&ag->mu);
        if (ag->stop)
            break;
        char path[512];
        snprintf(path, sizeof path, "/v1/agent/assignments?node=%s&instance=%s&after=%lld&wait=%d",
                 node_q, inst_q, (long long)after, ag->cfg.poll_wait_s);
        json_t *resp = NULL;
        char err[256];
        long st = node_http(n, &h, "GET", path, NULL, (ag->cfg.poll_wait_s + 15) * 1000L, &resp,
                            err, sizeof err);
        if (st == 200 && json_is_object(resp)) {
            bo.ms = 0;
            pthread_mutex_lock(&ag->mu);
            int stale = gen != n->reg_gen || n->need_register;
            int64_t ep = json_integer_value(json_object_get(resp, "epoch"));
            if (ep > n->max_epoch)
                n->max_epoch = ep;
            pthread_mutex_unlock(&ag->mu);
            json_t *msgs = json_object_get(resp, "messages");
            size_t i;
            json_t *m;
            int64_t last = after;
            if (!stale) {
                json_array_foreach(msgs, i, m)
                {
                    int64_t seq = json_integer_value(json_object_get(m, "seq"));
                    if (seq <= last)
                        continue;
                    const char *type = json_string_value(json_object_get(m, "type"));
                    if (type && !strcmp(type, "start"))
                        fg_agent_start(n, m);
                    else if (type && !strcmp(type, "stop"))
                        fg_agent_stop_msg(n, m);
                    else
                        fg_log(FG_LOG_WARN, "node %s: unknown message type %s", n->name,
                               type ? type : "(none)");
                    last = seq;
                }
                pthread_mutex_lock(&ag->mu);
                if (gen == n->reg_gen && last > n->after)
                    n->after = last;
                pthread_mutex_unlock(&ag->mu);
            }
        } else if (st == 404 || st == 409) {
            fg_log(FG_LOG_WARN, "node %s: long-poll refused (%ld): re-registering", n->name, st);
            pthread_mutex_lock(&ag->mu);
            if (gen == n->reg_gen)
                n->need_register = 1;
            pthread_cond_broadcast(&n->reg_cond);
            pthread_mutex_unlock(&ag->mu);
        } else if (!ag->stop) {
            if (st == 401)
                node_refresh(n);
            fg_log(FG_LOG_WARN, "node %s: long-poll: %s", n->name, err);
            backoff_wait(ag, &bo);
        }
        json_decref(resp);
    }
    fg_http_cleanup(&h);
    return NULL;
}

/* ------------------------------------------------------------ reports */

/* Classifies a report response: 1 delivered/final, 0 retry later. */
static int final_status(long st)
{
    return st == 200 || st == 201 || st == 204 || st == 400 || st == 404 || st == 409 || st == 413;
}

/*
 * A report about a was refused (404/409). That is final only if it is refused again
 * after a fresh registration: a controller that restarted (new epoch) may refuse reports
 * until the node has registered and the reconcile has adopted its ranks. So the first
 * refusal makes the node register again and the report is retried; 1 = confirmed.
 */
static int refusal_confirmed(fg_node_t *n, fg_attempt_t *a)
{
    pthread_mutex_lock(&n->ag->mu);
    int confirmed = a->refused && a->refused_gen != n->reg_gen;
    if (!a->refused) {
        a->refused = 1;
        a->refused_gen = n->reg_gen;
        n->need_register = 1;
        pthread_cond_broadcast(&n->reg_cond);
    }
    pthread_mutex_unlock(&n->ag->mu);
    return confirmed;
}

/* The body of a's `started` report. */
static json_t *started_body(fg_node_t *n, fg_attempt_t *a)
{
    pthread_mutex_lock(&n->ag->mu);
    json_t *warnings = json_array();
    if (a->proc.warnings[0])
        json_array_append_new(warnings, json_string(a->proc.warnings));
    json_t *uuids = json_array();
    for (const char *u = a->gpu_uuids; u && *u;) {
        const char *c = strchr(u, ',');
        size_t len = c ? (size_t)(c - u) : strlen(u);
        json_array_append_new(uuids, json_stringn(u, len));
        u = c ? c + 1 : u + len;
    }
    json_t *body = json_pack("{s:s, s:s, s:i, s:I, s:i, s:i, s:I, s:o}", "node", n->name, "job_id",
                             a->job_id, "attempt", a->attempt, "epoch", (json_int_t)a->epoch,
                             "rank", a->rank, "pid", (int)a->proc.pgid, "start_time_ms",
                             (json_int_t)a->start_ms, "warnings", warnings);
    json_object_set_new(body, "gpu_uuids", uuids);
    if (a->unix_user[0])
        json_object_set_new(body, "unix_user", json_string(a->unix_user));
    pthread_mutex_unlock(&n->ag->mu);
    return body;
}

/* What the controller's answer st (err: its text) to a's `started` means: 1 done
 * (delivered or refused for good), 0 retry. */
static int started_result(fg_node_t *n, fg_http_t *h, fg_attempt_t *a, long st, const char *err)
{
    if ((st == 409 || st == 404) && !refusal_confirmed(n, a)) {
        fg_log(FG_LOG_INFO, "node %s: start of %s refused (%ld): registering again to check",
               n->name, a->key, st);
        return 0;
    }
    if (st == 409 || st == 404) {
        fg_log(FG_LOG_WARN, "node %s: controller refused the start of %s (%ld): killing it",
               n->name, a->key, st);
        pthread_mutex_lock(&n->ag->mu);
        a->silent = 1;
        fg_attempt_begin_stop(a, "stale", 0);
        pthread_mutex_unlock(&n->ag->mu);
    } else if (st == 401) {
        node_refresh(n);
    } else if (st < 0) {
        fg_log(FG_LOG_WARN, "node %s: started %s: %s", n->name, a->key, err);
    }
    return final_status(st);
}

/* Sends `started` for a. Returns 1 if done (delivered or refused), 0 to retry. */
static int send_started(fg_node_t *n, fg_http_t *h, fg_attempt_t *a)
{
    json_t *body = started_body(n, a);
    char err[256];
    long st = node_http(n, h, "POST", "/v1/agent/started", body, 10000, NULL, err, sizeof err);
    json_decref(body);
    return started_result(n, h, a, st, err);
}

/*
 * Ships what a's log file holds beyond the acknowledged length (up to `size`), in chunks
 * of at most 256 KiB, one request in flight. Returns 1 when everything was shipped (or
 * shipping is impossible), 0 on a transport/server error (retry later).
 */
static int ship_log(fg_node_t *n, fg_http_t *h, fg_attempt_t *a, int64_t size,
                    unsigned char *buf /* LOG_CHUNK bytes */)
{
    int fd = open(a->proc.log_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 1;
    int done = 0;
    for (;;) {
        int64_t off = a->log_acked;
        if (off >= size) {
            done = 1;
            break;
        }
        size_t want = (size_t)(size - off > LOG_CHUNK ? LOG_CHUNK : size - off);
        ssize_t got = pread(fd, buf, want, off);
        if (got <= 0) {
            done = 1;
            break;
        }
        char *b64 = fg_base64(buf, (size_t)got);
        json_t *body = json_pack("{s:s, s:s, s:i, s:I, s:i, s:I, s:s}", "node", n->name, "job_id",
                                 a->job_id, "attempt", a->attempt, "epoch", (json_int_t)a->epoch,
                                 "rank", a->rank, "offset", (json_int_t)off, "data_b64", b64);
        free(b64);
        json_t *resp = NULL;
        char err[256];
        long st = node_http(n, h, "POST", "/v1/agent/logs", body, 10000, &resp, err, sizeof err);
        json_decref(body);
        json_t *len = resp ? json_object_get(resp, "length") : NULL;
        if ((st == 200 || st == 409) && json_is_integer(len)) {
            int64_t l = json_integer_value(len);
            a->log_acked = l > size ? size : l;
            if (l > size)
                fg_log(FG_LOG_WARN, "node %s: controller has more log of %s than the node", n->name,
                       a->key);
        } else if (st == 200) {
            a->log_acked = off + got;
        } else if (st == 404 && !refusal_confirmed(n, a)) {
            json_decref(resp);
            break; /* retried after registering again */
        } else if (st == 404 || st == 400 || st == 413) {
            fg_log(FG_LOG_WARN, "node %s: log of %s refused (%ld); not shipping it", n->name,
                   a->key, st);
            a->log_done = 1;
            done = 1;
            json_decref(resp);
            break;
        } else {
            if (st == 401)
                node_refresh(n);
            fg_log(FG_LOG_WARN, "node %s: logs %s: %s", n->name, a->key, err);
            json_decref(resp);
            break;
        }
        json_decref(resp);
    }
    close(fd);
    return done;
}

/* The body of a's `exited` report. */
static json_t *exited_body(fg_node_t *n, fg_attempt_t *a, int64_t log_bytes)
{
    pthread_mutex_lock(&n->ag->mu);
    json_t *body =
        json_pack("{s:s, s:s, s:i, s:I, s:i, s:s, s:I, s:I, s:I}", "node", n->name, "job_id",
                  a->job_id, "attempt", a->attempt, "epoch", (json_int_t)a->epoch, "rank", a->rank,
                  "end_cause", fg_attempt_end_cause(a), "start_time_ms",
                  (json_int_t)(a->start_ms ? a->start_ms : a->ex.end_ms), "end_time_ms",
                  (json_int_t)a->ex.end_ms, "log_bytes", (json_int_t)log_bytes);
    json_object_set_new(body, "exit_code",
                        a->ex.code >= 0 && !a->error[0] ? json_integer(a->ex.code) : json_null());
    json_object_set_new(body, "signal", a->ex.signal ? json_integer(a->ex.signal) : json_null());
    if (a->error[0] || a->ex.error[0])
        json_object_set_new(body, "error", json_string(a->error[0] ? a->error : a->ex.error));
    if (a->ckpt.last_checkpoint_ms > 0) /* when the agent saw it (ckptwatch.h); absent: none */
        json_object_set_new(body, "last_checkpoint_ms",
                            json_integer((json_int_t)a->ckpt.last_checkpoint_ms));
    pthread_mutex_unlock(&n->ag->mu);
    return body;
}

/* What the controller's answer st to a's `exited` means: 1 done, 0 retry. */
static int exited_result(fg_node_t *n, fg_http_t *h, fg_attempt_t *a, long st, const char *err)
{
    if (st == 401)
        node_refresh(n);
    else if (st < 0 || st >= 500)
        fg_log(FG_LOG_WARN, "node %s: exited %s: %s", n->name, a->key, err);
    else if ((st == 409 || st == 404) && !refusal_confirmed(n, a))
        return 0; /* retried after registering again */
    else if (st == 409 || st == 404)
        fg_log(FG_LOG_INFO, "node %s: exit of %s not needed by the controller (%ld)", n->name,
               a->key, st);
    return final_status(st);
}

/* Sends `exited` for a. Returns 1 if done, 0 to retry. */
static int send_exited(fg_node_t *n, fg_http_t *h, fg_attempt_t *a, int64_t log_bytes)
{
    json_t *body = exited_body(n, a, log_bytes);
    char err[256];
    long st = node_http(n, h, "POST", "/v1/agent/exited", body, 10000, NULL, err, sizeof err);
    json_decref(body);
    return exited_result(n, h, a, st, err);
}

static int64_t file_size(const char *path)
{
    struct stat sb;
    return path[0] && stat(path, &sb) == 0 ? (int64_t)sb.st_size : 0;
}

/*
 * Picks the next attempt with reporting work that no other worker holds, and marks it
 * busy. Under ag->mu. NULL if there is nothing to do now; *wait_ms says when to look
 * again at the latest.
 */
static fg_attempt_t *claim(fg_node_t *n, int64_t now, int64_t *wait_ms)
{
    *wait_ms = 250;
    for (fg_attempt_t *a = n->attempts; a; a = a->next) {
        if (a->busy)
            continue;
        if (a->retry_at_ms > now) {
            if (a->retry_at_ms - now < *wait_ms)
                *wait_ms = a->retry_at_ms - now;
            continue;
        }
        int work = 0;
        if (a->silent)
            work = a->exited; /* only to be removed */
        else if (a->exited)
            work = !a->exit_sent;
        else if (a->launched && !a->started_sent && a->proc.pgid_known) {
            /* `started` waits a moment: a rank that ends within it is reported by its
             * `exited` alone (which implies the start), one durable write less on the
             * controller per short job. */
            int64_t due = a->start_ms + STARTED_DELAY_MS;
            if (due <= now)
                work = 1;
            else if (due - now < *wait_ms)
                *wait_ms = due - now;
        } else if (a->launched && !a->log_done) {
            if (a->log_next_ms <= now)
                work = 1;
            else if (a->log_next_ms - now < *wait_ms)
                *wait_ms = a->log_next_ms - now;
        }
        if (work) {
            a->busy = 1;
            return a;
        }
    }
    return NULL;
}

/* An attempt's reporting flags, read together under ag->mu. */
typedef struct report_state {
    int launched, exited, silent, started, log_done, pgid_known;
} report_state_t;

/*
 * Reads a's reporting flags into *st. A silent attempt (nothing to report) is settled
 * here: its files are forgotten once it exited, *rc gets report_one's answer (1 exited,
 * 0 not yet) and false is returned; otherwise true.
 */
static bool report_state(fg_agent_t *ag, fg_attempt_t *a, report_state_t *st, int *rc)
{
    pthread_mutex_lock(&ag->mu);
    st->launched = a->launched;
    st->exited = a->exited;
    st->silent = a->silent;
    st->started = a->started_sent;
    st->log_done = a->log_done;
    st->pgid_known = a->proc.pgid_known;
    pthread_mutex_unlock(&ag->mu);
    if (!st->silent)
        return true;
    if (st->exited)
        fg_attempt_forget_files(a, !ag->cfg.keep_logs);
    *rc = st->exited ? 1 : 0;
    return false;
}

/* The controller has a's exit (and, unless refused, the whole log of `size` bytes): marks
 * it sent, and the node-local copies are no longer needed. */
static void exit_delivered(fg_agent_t *ag, fg_attempt_t *a, int64_t size)
{
    pthread_mutex_lock(&ag->mu);
    a->exit_sent = 1;
    pthread_mutex_unlock(&ag->mu);
    fg_attempt_forget_files(a, !ag->cfg.keep_logs && (a->log_done || a->log_acked >= size));
}

/*
 * Does the reporting work of one claimed attempt, in protocol order: started, the log up
 * to its current end, and once it ended (log complete) exited. Returns 1 if the attempt
 * is finished with (remove it), 0 if not, -1 on a retryable error.
 */
static int report_one(fg_node_t *n, fg_http_t *h, fg_attempt_t *a, unsigned char *buf)
{
    fg_agent_t *ag = n->ag;
    report_state_t st;
    int rc;
    if (!report_state(ag, a, &st, &rc))
        return rc;
    if (st.launched && !st.started && !st.exited && st.pgid_known) {
        if (!send_started(n, h, a))
            return -1;
        pthread_mutex_lock(&ag->mu);
        a->started_sent = 1;
        pthread_mutex_unlock(&ag->mu);
    }
    int64_t size = st.launched ? file_size(a->proc.log_path) : 0;
    if (!st.log_done && size > a->log_acked && !ship_log(n, h, a, size, buf))
        return -1;
    if (!st.exited)
        return 0;
    if (!send_exited(n, h, a, size))
        return -1;
    exit_delivered(ag, a, size);
    return 1;
}

/*
 * Batched reporting (a controller that answered register with batch_reports): the
 * attempts a worker holds are reported together, their `started` and `exited` reports in
 * one POST /v1/agent/reports, each entry with its own job id, attempt and epoch and its
 * own result (a stale entry is refused alone; the others apply). Per attempt the order
 * is the same as report_one's: started, then the log, then (log complete) exited.
 * rcs[i] gets report_one's answer for claimed[i].
 */
#define REPORT_BATCH 64

enum { R_NONE, R_STARTED, R_EXITED };

static void report_many(fg_node_t *n, fg_http_t *h, fg_attempt_t **as, int k, int *rcs,
                        unsigned char *buf)
{
    fg_agent_t *ag = n->ag;
    int kind[REPORT_BATCH];
    int64_t size[REPORT_BATCH];
    json_t *reports = json_array();
    for (int i = 0; i < k; i++) {
        fg_attempt_t *a = as[i];
        kind[i] = R_NONE;
        size[i] = 0;
        report_state_t st;
        if (!report_state(ag, a, &st, &rcs[i]))
            continue;
        if (st.launched && !st.started && !st.exited && st.pgid_known) {
            kind[i] = R_STARTED;
            json_t *b = started_body(n, a);
            json_object_set_new(b, "type", json_string("started"));
            json_array_append_new(reports, b);
            continue;
        }
        size[i] = st.launched ? file_size(a->proc.log_path) : 0;
        if (!st.log_done && size[i] > a->log_acked && !ship_log(n, h, a, size[i], buf)) {
            rcs[i] = -1;
            continue;
        }
        if (!st.exited) {
            rcs[i] = 0;
            continue;
        }
        kind[i] = R_EXITED;
        json_t *b = exited_body(n, a, size[i]);
        json_object_set_new(b, "type", json_string("exited"));
        json_array_append_new(reports, b);
    }
    size_t nrep = json_array_size(reports);
    if (!nrep) {
        json_decref(reports);
        return;
    }
    json_t *body = json_pack("{s:s, s:o}", "node", n->name, "reports", reports);
    json_t *resp = NULL;
    char err[256];
    long st = node_http(n, h, "POST", "/v1/agent/reports", body, 10000, &resp, err, sizeof err);
    json_decref(body);
    json_t *results = st == 200 ? json_object_get(resp, "results") : NULL;
    if (!json_is_array(results) || json_array_size(results) != nrep) {
        if (st == 401)
            node_refresh(n);
        else if (st < 0 || st >= 500 || st == 429)
            fg_log(FG_LOG_WARN, "node %s: reports: %s", n->name, err);
        else {
            /* refused as a whole (an old or confused controller): report one by one */
            fg_log(FG_LOG_WARN, "node %s: batched reports refused (%ld): sending them singly",
                   n->name, st);
            pthread_mutex_lock(&ag->mu);
            n->batch_reports = 0;
            pthread_mutex_unlock(&ag->mu);
        }
        for (int i = 0; i < k; i++)
            if (kind[i] != R_NONE)
                rcs[i] = -1;
        json_decref(resp);
        return;
    }
    size_t e = 0;
    for (int i = 0; i < k; i++) {
        if (kind[i] == R_NONE)
            continue;
        fg_attempt_t *a = as[i];
        json_t *res = json_array_get(results, e++);
        long ist = json_is_integer(json_object_get(res, "status"))
                       ? (long)json_integer_value(json_object_get(res, "status"))
                       : 500;
        const char *msg =
            json_string_value(json_object_get(json_object_get(res, "error"), "message"));
        if (kind[i] == R_STARTED) {
            if (!started_result(n, h, a, ist, msg ? msg : "")) {
                rcs[i] = -1;
                continue;
            }
            pthread_mutex_lock(&ag->mu);
            a->started_sent = 1;
            int log_done = a->log_done;
            pthread_mutex_unlock(&ag->mu);
            int64_t sz = file_size(a->proc.log_path);
            rcs[i] = !log_done && sz > a->log_acked && !ship_log(n, h, a, sz, buf) ? -1 : 0;
        } else {
            if (!exited_result(n, h, a, ist, msg ? msg : "")) {
                rcs[i] = -1;
                continue;
            }
            exit_delivered(ag, a, size[i]);
            rcs[i] = 1;
        }
    }
    json_decref(resp);
}

/* Claims, besides the first, attempts whose work is a `started` or an `exited` report,
 * for the same batch. Under ag->mu. */
static int claim_more(fg_node_t *n, int64_t now, fg_attempt_t **as, int k)
{
    for (fg_attempt_t *a = n->attempts; a && k < REPORT_BATCH; a = a->next) {
        if (a->busy || a->silent || a->retry_at_ms > now)
            continue;
        int work = a->exited ? !a->exit_sent
                             : a->launched && !a->started_sent && a->proc.pgid_known &&
                                   a->start_ms + STARTED_DELAY_MS <= now;
        if (work) {
            a->busy = 1;
            as[k++] = a;
        }
    }
    return k;
}

void *fg_node_report_main(void *arg)
{
    fg_node_t *n = arg;
    fg_agent_t *ag = n->ag;
    fg_http_t h;
    pthread_mutex_lock(&g_token_mu);
    fg_http_init(&h, ag->cfg.server, n->token, &ag->stop);
    pthread_mutex_unlock(&g_token_mu);
    fg_http_set_ca(&h, ag->cfg.ca_file);
    backoff_t bo = {0};
    unsigned char *buf = fg_xmalloc(LOG_CHUNK);
    pthread_mutex_lock(&ag->mu);
    while (!ag->stop) {
        int64_t now = fg_now_ms(), wait_ms;
        fg_attempt_t *a = NULL;
        if (!n->need_register && n->reg_gen > 0)
            a = claim(n, now, &wait_ms);
        else
            wait_ms = 250;
        if (!a) {
            timed_wait(&n->report_cond, &ag->mu, now + wait_ms);
            continue;
        }
        fg_attempt_t *as[REPORT_BATCH];
        int rcs[REPORT_BATCH];
        int k = 1;
        as[0] = a;
        int batch = n->batch_reports;
        if (batch)
            k = claim_more(n, now, as, 1);
        int64_t w2;
        fg_attempt_t *more = claim(n, now, &w2);
        if (more) { /* work left for another worker */
            more->busy = 0;
            pthread_cond_signal(&n->report_cond);
        }
        pthread_mutex_unlock(&ag->mu);
        if (batch)
            report_many(n, &h, as, k, rcs, buf);
        else
            rcs[0] = report_one(n, &h, a, buf);
        pthread_mutex_lock(&ag->mu);
        int failed = 0;
        for (int i = 0; i < k; i++) {
            a = as[i];
            a->busy = 0;
            if (rcs[i] < 0) {
                failed = 1;
                continue;
            }
            if (rcs[i] == 1)
                fg_attempt_remove(a);
            else
                a->log_next_ms = fg_now_ms() + 250; /* a live log: look again soon */
        }
        if (failed) {
            bo.ms = bo.ms ? bo.ms * 2 : 100;
            if (bo.ms > 5000)
                bo.ms = 5000;
            int64_t at = fg_now_ms() + bo.ms / 2 + rand() % (bo.ms / 2 + 1);
            for (int i = 0; i < k; i++)
                if (rcs[i] < 0)
                    as[i]->retry_at_ms = at;
        } else {
            bo.ms = 0;
        }
    }
    pthread_mutex_unlock(&ag->mu);
    free(buf);
    fg_http_cleanup(&h);
    return NULL;
}
