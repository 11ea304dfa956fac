/*
 * routes.c - the route table, authentication/authorisation per route, rate limits,
 * and the small cluster-wide handlers (fair share, health, metrics, the billing
 * stub for what is not built yet).
 *
 * A route is a path pattern ("*" = one segment, "**" = the rest), a method and who may
 * call it. Unknown path: 404. Known path, other method: 405 with Allow. Then: anonymous
 * on a user route 401; a user on an admin route 403; a node credential is only accepted
 * on /v1/agent/... (and acts for its own node only), the cluster's agent token only on
 * POST /v1/agent/join, and user tokens never on either.
 */
#include "server/server.h"

#include "common/xalloc.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

enum { A_ANON = 0, A_USER, A_ADMIN, A_AGENT, A_JOIN };

typedef struct route {
    int method;
    const char *pat;
    int auth;
    int (*h)(srv_req_t *r);
} route_t;

static const route_t routes[] = {
    {M_GET, "healthz", A_ANON, h_healthz},
    {M_GET, "metrics", A_ANON, h_metrics},
    {M_POST, "v1/users", A_ANON, h_users_create},
    {M_GET, "v1/users", A_ADMIN, h_users_list},
    {M_PATCH, "v1/users/*", A_ADMIN, h_users_patch},
    {M_POST, "v1/users/*/revoke", A_ADMIN, h_users_revoke},
    {M_POST, "v1/sessions", A_ANON, h_sessions_create},
    {M_DELETE, "v1/sessions/*", A_USER, h_sessions_delete},
    {M_GET, "v1/me", A_USER, h_me_get},
    {M_PATCH, "v1/me", A_USER, h_me_patch},
    {M_POST, "v1/tokens", A_USER, h_tokens_create},
    {M_GET, "v1/tokens", A_USER, h_tokens_list},
    {M_DELETE, "v1/tokens/*", A_USER, h_tokens_delete},
    {M_POST, "v1/accounts", A_ADMIN, h_accounts_create},
    {M_GET, "v1/accounts", A_USER, h_accounts_list},
    {M_GET, "v1/accounts/*", A_USER, h_accounts_get},
    {M_PATCH, "v1/accounts/*", A_ADMIN, h_accounts_patch},
    {M_POST, "v1/accounts/*/members", A_ADMIN, h_members_add},
    {M_PATCH, "v1/accounts/*/members/*", A_ADMIN, h_members_patch},
    {M_DELETE, "v1/accounts/*/members/*", A_ADMIN, h_members_del},
    {M_GET, "v1/audit", A_ADMIN, h_audit_list},
    {M_POST, "v1/jobs", A_USER, h_jobs_create},
    {M_GET, "v1/jobs", A_USER, h_jobs_list},
    {M_GET, "v1/jobs/*", A_USER, h_jobs_get},
    {M_POST, "v1/jobs/*/cancel", A_USER, h_jobs_cancel},
    {M_GET, "v1/jobs/*/events", A_USER, h_jobs_events},
    {M_GET, "v1/jobs/*/attempts", A_USER, h_jobs_attempts},
    {M_GET, "v1/jobs/*/logs", A_USER, h_jobs_logs},
    {M_GET, "v1/events", A_USER, h_events},
    {M_GET, "v1/nodes", A_USER, h_nodes_list},
    {M_POST, "v1/nodes/*/drain", A_ADMIN, h_nodes_drain},
    {M_POST, "v1/nodes/*/resume", A_ADMIN, h_nodes_resume},
    {M_POST, "v1/nodes/*/credentials", A_ADMIN, h_nodes_cred_create},
    {M_DELETE, "v1/nodes/*/credentials", A_ADMIN, h_nodes_cred_revoke},
    {M_GET, "v1/fairshare", A_USER, h_fairshare},
    {M_GET, "v1/estimates/accuracy", A_USER, h_estimates_accuracy},
    {M_GET, "v1/billing/prices", A_USER, h_billing_prices_get},
    {M_PUT, "v1/billing/prices", A_ADMIN, h_billing_prices_put},
    {M_GET, "v1/billing/usage", A_USER, h_billing_usage},
    {M_GET, "v1/billing/invoices/*", A_USER, h_billing_invoice},
    {M_POST, "v1/billing/adjustments", A_ADMIN, h_billing_adjust},
    {M_GET | M_PUT | M_POST | M_PATCH | M_DELETE, "v1/billing/**", A_USER, h_billing},
    {M_POST, "v1/agent/join", A_JOIN, h_agent_join},
    {M_POST, "v1/agent/register", A_AGENT, h_agent_register},
    {M_POST, "v1/agent/heartbeat", A_AGENT, h_agent_heartbeat},
    {M_GET, "v1/agent/assignments", A_AGENT, h_agent_assignments},
    {M_POST, "v1/agent/started", A_AGENT, h_agent_started},
    {M_POST, "v1/agent/logs", A_AGENT, h_agent_logs},
    {M_POST, "v1/agent/exited", A_AGENT, h_agent_exited},
    {M_POST, "v1/agent/reports", A_AGENT, h_agent_reports},
};

void srv_routes_print(FILE *f)
{
    static const char *const auth_names[] = {"anon", "user", "admin", "agent", "join"};
    _Static_assert(sizeof auth_names / sizeof auth_names[0] == A_JOIN + 1,
                   "a name for every kind of route access");
    static const struct {
        int bit;
        const char *name;
    } ms[] = {
        {M_GET, "GET"}, {M_POST, "POST"}, {M_PUT, "PUT"}, {M_PATCH, "PATCH"}, {M_DELETE, "DELETE"}};
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        for (size_t k = 0; k < sizeof ms / sizeof ms[0]; k++)
            if (routes[i].method & ms[k].bit)
                fprintf(f, "%s /%s %s\n", ms[k].name, routes[i].pat, auth_names[routes[i].auth]);
}

static bool match(const char *pat, srv_req_t *r)
{
    int i = 0;
    const char *p = pat;
    while (*p) {
        const char *sl = strchr(p, '/');
        size_t n = sl ? (size_t)(sl - p) : strlen(p);
        if (n == 2 && !strncmp(p, "**", 2))
            return i < r->nseg;
        if (i >= r->nseg)
            return false;
        if (!(n == 1 && *p == '*')) {
            if (strlen(r->seg[i]) != n || strncmp(p, r->seg[i], n))
                return false;
        } else if (!*r->seg[i]) {
            return false;
        }
        i++;
        p += n;
        if (*p == '/')
            p++;
    }
    return i == r->nseg;
}

static const char *method_names(int mask, char *buf, size_t n)
{
    static const struct {
        int bit;
        const char *name;
    } ms[] = {
        {M_GET, "GET"}, {M_POST, "POST"}, {M_PUT, "PUT"}, {M_PATCH, "PATCH"}, {M_DELETE, "DELETE"}};
    buf[0] = 0;
    size_t len = 0;
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        if (mask & ms[i].bit)
            len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? ", " : "", ms[i].name);
    return buf;
}

bool srv_route_check(srv_req_t *r)
{
    const route_t *hit = NULL;
    int allowed = 0;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (!match(routes[i].pat, r))
            continue;
        allowed |= routes[i].method;
        if (routes[i].method & r->method) {
            hit = &routes[i];
            break;
        }
    }
    if (!hit && !allowed) { /* the path was split in place: its segments, joined again */
        char p[256] = "";
        size_t n = 0;
        for (int i = 0; i < r->nseg && n < sizeof p; i++)
            n += (size_t)snprintf(p + n, sizeof p - n, "/%s", r->seg[i]);
        srv_reply_error(r, 404, "not_found", NULL, "no such route: %.200s", r->nseg ? p : r->path);
        return false;
    }
    if (!hit) {
        char buf[64];
        method_names(allowed, buf, sizeof buf);
        json_t *e = json_pack("{s:{s:s,s:s}}", "error", "code", "method_not_allowed", "message",
                              "this route does not accept that method");
        char *txt = json_dumps(e, JSON_COMPACT);
        json_decref(e);
        char allow[96];
        snprintf(allow, sizeof allow, "Allow: %s\r\n", buf);
        srv_reply_full(r, 405, "application/json; charset=utf-8", allow, txt, strlen(txt), true);
        return false;
    }
    const char *refusal = NULL;
    unsigned status = 401;
    switch (hit->auth) {
    case A_AGENT:
        if (!r->agent)
            refusal = "agent routes need this node's own credential (the cluster token only "
                      "joins new nodes: POST /v1/agent/join)";
        break;
    case A_JOIN:
        if (!r->agent_join)
            refusal = "joining needs the cluster's agent token (DATA_DIR/agent.token)";
        break;
    case A_USER:
    case A_ADMIN:
        if (!r->user_id)
            refusal = "a valid bearer token is required";
        else if (hit->auth == A_ADMIN && !r->admin)
            refusal = "only an admin may do this", status = 403;
        break;
    default:
        break;
    }
    if (refusal) {
        srv_reply_error(r, status, status == 403 ? "forbidden" : "unauthenticated", NULL, "%s",
                        refusal);
        return false;
    }
    r->route = hit;
    return true;
}

int srv_reply_rate_limited(srv_req_t *r, double retry_s, const char *msg)
{
    int secs = (int)(retry_s + 0.999) < 1 ? 1 : (int)(retry_s + 0.999);
    json_t *e = json_pack("{s:{s:s,s:s}}", "error", "code", "rate_limited", "message", msg);
    char *txt = json_dumps(e, JSON_COMPACT);
    json_decref(e);
    char hdr[64];
    snprintf(hdr, sizeof hdr, "Retry-After: %d\r\n", secs);
    return srv_reply_full(r, 429, "application/json; charset=utf-8", hdr, txt, strlen(txt), true);
}

/* Whether r is a login or a registration (an admin creating users is not): limited by
 * client address (login-rate, login-burst). */
static bool login_like(const srv_req_t *r, const route_t *hit)
{
    return hit->h == h_sessions_create || (hit->h == h_users_create && !r->admin);
}

int srv_route(srv_req_t *r)
{
    srv_t *s = r->srv;
    if (!r->route && !srv_route_check(r))
        return SRV_YES; /* refused (answered) */
    const route_t *hit = r->route;
    if (r->resume_count == 0 && r->user_id) {
        double retry = 0;
        if (!srv_rate_check(s, r, &retry))
            return srv_reply_rate_limited(r, retry,
                                          "too many requests for this token; retry later");
    }
    if (r->resume_count == 0 && s->login_addr_lim && login_like(r, hit)) {
        char addr[64];
        double retry = 1;
        srv_client_addr(r, addr, sizeof addr);
        if (!srv_limiter_take(s->login_addr_lim, addr, &retry))
            return srv_reply_rate_limited(r, retry,
                                          "too many logins or registrations from this address; "
                                          "retry later");
    }
    return hit->h(r);
}

/* ------------------------------------------------------------------ small handlers */

int h_fairshare(srv_req_t *r)
{
    srv_t *s = r->srv;
    pthread_mutex_lock(&s->mu);
    json_t *o = s->fairshare ? json_deep_copy(s->fairshare) : json_object();
    pthread_mutex_unlock(&s->mu);
    /* the contract's list shape as well */
    json_t *items = json_array();
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(o, "accounts"), i, a)
    {
        json_t *it = json_deep_copy(a);
        json_object_set_new(it, "kind", json_string("account"));
        json_object_del(it, "users");
        json_array_append_new(items, it);
        size_t k;
        json_t *u;
        json_array_foreach(json_object_get(a, "users"), k, u)
        {
            json_t *ut = json_deep_copy(u);
            json_object_set_new(ut, "kind", json_string("user"));
            json_object_set(ut, "account", json_object_get(a, "name"));
            json_array_append_new(items, ut);
        }
    }
    json_object_set_new(o, "items", items);
    return srv_reply_json(r, 200, o);
}

int h_healthz(srv_req_t *r)
{
    srv_t *s = r->srv;
    int rc = fg_store_ping(s->store);
    double ms = (double)atomic_load(&s->m.last_pass_us) / 1000.0;
    json_t *o = json_pack("{s:s,s:s,s:f,s:I,s:s}", "status", rc ? "degraded" : "ok", "store",
                          rc ? fg_store_strerror(rc) : "ok", "scheduler_pass_ms", ms, "epoch",
                          (json_int_t)s->epoch, "store_backend", fg_store_backend(s->store));
    return srv_reply_json(r, rc ? 503 : 200, o);
}

int h_billing(srv_req_t *r)
{
    /* the built billing routes, asked with another method: 405 with their methods */
    static const struct {
        int nseg;
        const char *name, *allow;
    } built[] = {{3, "prices", "Allow: GET, PUT\r\n"},
                 {3, "usage", "Allow: GET\r\n"},
                 {4, "invoices", "Allow: GET\r\n"},
                 {3, "adjustments", "Allow: POST\r\n"}};
    for (size_t i = 0; i < sizeof built / sizeof built[0]; i++) {
        if (r->nseg != built[i].nseg || strcmp(r->seg[2], built[i].name))
            continue;
        static const char body[] = "{\"error\":{\"code\":\"method_not_allowed\",\"message\":"
                                   "\"this route does not accept that method\"}}";
        return srv_reply_full(r, 405, "application/json; charset=utf-8", built[i].allow,
                              (char *)body, sizeof body - 1, false);
    }
    return srv_reply_error(r, 501, "not_implemented", NULL,
                           "this part of billing is not implemented yet (a later issue); the "
                           "price book, usage, invoices and adjustments are: /v1/billing/prices, "
                           "/v1/billing/usage, /v1/billing/invoices/{YYYY-MM}, "
                           "/v1/billing/adjustments");
}

/* Whether r may read /metrics (metrics-access): a loopback peer, the scrape token, or
 * anyone. Replies 403/401 and returns false if not. */
static bool metrics_allowed(srv_req_t *r)
{
    srv_t *s = r->srv;
    if (s->cfg.metrics_access == SRV_METRICS_OPEN)
        return true;
    if (s->cfg.metrics_access == SRV_METRICS_LOCAL) {
        /* a loopback peer, but not a request the trusted proxy passes on (it says so
         * with X-Forwarded-For): the proxy's clients are not local, even when the
         * proxy runs on this host */
        uint32_t peer = r->conn ? hd_peer_addr(r->conn) : 0;
        bool proxied =
            peer && peer == s->cfg.trusted_proxy_addr && srv_header(r, "X-Forwarded-For") != NULL;
        bool local = (ntohl(peer) >> 24) == 127 && !proxied;
        if (!local)
            srv_reply_error(r, 403, "forbidden", NULL,
                            "/metrics answers loopback peers only (metrics-access local)");
        return local;
    }
    const char *h = srv_header(r, "Authorization");
    if (h && strncasecmp(h, "Bearer ", 7) == 0) {
        unsigned char hash[SRV_TOKEN_HASH];
        const char *tok = h + 7;
        while (*tok == ' ')
            tok++;
        srv_token_hash(tok, hash);
        if (sodium_memcmp(hash, s->metrics_token_hash, SRV_TOKEN_HASH) == 0)
            return true;
    }
    srv_reply_error(r, 401, "unauthenticated", NULL,
                    "/metrics needs the scrape token of DATA_DIR/metrics.token (Bearer)");
    return false;
}

int h_metrics(srv_req_t *r)
{
    srv_t *s = r->srv;
    if (!metrics_allowed(r))
        return SRV_YES;
    char *buf = NULL;
    size_t len = 0, cap = 0;
#define OUT(...)                                                                                   \
    do {                                                                                           \
        int n_ = snprintf(NULL, 0, __VA_ARGS__);                                                   \
        buf = fg_xgrow(buf, &cap, len + (size_t)n_ + 1, 1);                                        \
        snprintf(buf + len, (size_t)n_ + 1, __VA_ARGS__);                                          \
        len += (size_t)n_;                                                                         \
    } while (0)
    int64_t states[6];
    int64_t top_seq, nnodes, nusers, ncreds;
    int64_t nodes_up = 0, nodes_down = 0;
    pthread_mutex_lock(&s->mu);
    memcpy(states, s->njobs_by_state, sizeof states);
    top_seq = s->pub_seq;
    nnodes = (int64_t)s->nnodes;
    nusers = (int64_t)s->nusers;
    ncreds = (int64_t)s->ntokens;
    for (size_t i = 0; i < s->nnodes; i++) {
        if (s->nodes[i]->state == FG_NODE_DOWN)
            nodes_down++;
        else
            nodes_up++;
    }
    pthread_mutex_unlock(&s->mu);
    OUT("# HELP fairgpu_jobs Jobs by state.\n# TYPE fairgpu_jobs gauge\n");
    for (int k = 0; k < 6; k++)
        OUT("fairgpu_jobs{state=\"%s\"} %lld\n", fg_job_state_name((fg_job_state_t)k),
            (long long)states[k]);
    OUT("# HELP fairgpu_submissions_total Jobs accepted (201).\n"
        "# TYPE fairgpu_submissions_total counter\nfairgpu_submissions_total %ld\n",
        atomic_load(&s->m.submissions));
    OUT("# HELP fairgpu_submissions_refused_total Submissions refused by a cap (429).\n"
        "# TYPE fairgpu_submissions_refused_total counter\nfairgpu_submissions_refused_total "
        "%ld\n",
        atomic_load(&s->m.submissions_refused));
    long passes = atomic_load(&s->m.passes);
    OUT("# HELP fairgpu_scheduler_passes_total Scheduling passes.\n"
        "# TYPE fairgpu_scheduler_passes_total counter\nfairgpu_scheduler_passes_total %ld\n",
        passes);
    OUT("# HELP fairgpu_scheduler_pass_seconds Duration of scheduling passes.\n"
        "# TYPE fairgpu_scheduler_pass_seconds summary\n"
        "fairgpu_scheduler_pass_seconds_sum %.6f\nfairgpu_scheduler_pass_seconds_count %ld\n",
        (double)atomic_load(&s->m.pass_us_total) / 1e6, passes);
    OUT("# HELP fairgpu_scheduler_last_pass_seconds Duration of the last pass.\n"
        "# TYPE fairgpu_scheduler_last_pass_seconds gauge\n"
        "fairgpu_scheduler_last_pass_seconds %.6f\n"
        "# HELP fairgpu_scheduler_max_pass_seconds Longest pass since start.\n"
        "# TYPE fairgpu_scheduler_max_pass_seconds gauge\n"
        "fairgpu_scheduler_max_pass_seconds %.6f\n",
        (double)atomic_load(&s->m.last_pass_us) / 1e6,
        (double)atomic_load(&s->m.max_pass_us) / 1e6);
    OUT("# TYPE fairgpu_job_starts_total counter\nfairgpu_job_starts_total %ld\n"
        "# TYPE fairgpu_preemptions_total counter\nfairgpu_preemptions_total %ld\n"
        "# TYPE fairgpu_attempts_ended_total counter\nfairgpu_attempts_ended_total %ld\n",
        atomic_load(&s->m.starts), atomic_load(&s->m.preemptions), atomic_load(&s->m.ended));
    OUT("# HELP fairgpu_http_requests_total HTTP replies by status code.\n"
        "# TYPE fairgpu_http_requests_total counter\n");
    for (int c = 100; c < 600; c++) {
        long v = atomic_load(&s->m.http_by_code[c]);
        if (v)
            OUT("fairgpu_http_requests_total{code=\"%d\"} %ld\n", c, v);
    }
    fg_store_stats_t st;
    fg_store_get_stats(s->store, &st);
    OUT("# TYPE fairgpu_store_commits_total counter\nfairgpu_store_commits_total %llu\n"
        "# TYPE fairgpu_store_units_total counter\nfairgpu_store_units_total %llu\n"
        "# TYPE fairgpu_store_max_batch gauge\nfairgpu_store_max_batch %llu\n"
        "# TYPE fairgpu_store_queue_length gauge\nfairgpu_store_queue_length %llu\n",
        (unsigned long long)st.commits, (unsigned long long)st.units,
        (unsigned long long)st.max_batch, (unsigned long long)st.queue_len);
    OUT("# HELP fairgpu_store_batch_seconds_total Writer time running batches (units + commit).\n"
        "# TYPE fairgpu_store_batch_seconds_total counter\nfairgpu_store_batch_seconds_total %.6f\n"
        "# HELP fairgpu_store_commit_seconds_total Of which in COMMIT (the fsync).\n"
        "# TYPE fairgpu_store_commit_seconds_total counter\nfairgpu_store_commit_seconds_total "
        "%.6f\n"
        "# TYPE fairgpu_store_checkpoints_total counter\nfairgpu_store_checkpoints_total %llu\n"
        "# HELP fairgpu_store_batch_reruns_total Batches run again with savepoints after a unit "
        "failed.\n"
        "# TYPE fairgpu_store_batch_reruns_total counter\nfairgpu_store_batch_reruns_total %llu\n"
        "# HELP fairgpu_store_max_checkpoint_seconds Longest pause of the commit pipeline.\n"
        "# TYPE fairgpu_store_max_checkpoint_seconds gauge\nfairgpu_store_max_checkpoint_seconds "
        "%.6f\n",
        (double)st.batch_us / 1e6, (double)st.commit_us / 1e6, (unsigned long long)st.checkpoints,
        (unsigned long long)st.reruns, (double)st.max_checkpoint_us / 1e6);
    OUT("# TYPE fairgpu_event_seq gauge\nfairgpu_event_seq %lld\n"
        "# TYPE fairgpu_nodes gauge\nfairgpu_nodes{state=\"up\"} %lld\n"
        "fairgpu_nodes{state=\"down\"} %lld\n"
        "# TYPE fairgpu_users gauge\nfairgpu_users %lld\n"
        "# HELP fairgpu_credentials_cached Sessions and API tokens held in memory.\n"
        "# TYPE fairgpu_credentials_cached gauge\nfairgpu_credentials_cached %lld\n",
        (long long)top_seq, (long long)nodes_up, (long long)nodes_down, (long long)nusers,
        (long long)ncreds);
    (void)nnodes;
    srv_buf_t eb = {0};
    srv_est_metrics(s, &eb);
    OUT("%.*s", (int)eb.n, eb.p ? eb.p : "");
    free(eb.p);
#undef OUT
    return srv_reply_text(r, 200, "text/plain; version=0.0.4; charset=utf-8", buf, len, true);
}
