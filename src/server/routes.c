/*
 * routes.c - the route table, authentication/authorisation per route, rate limits,
 * and the small cluster-wide handlers (fair share, health, the billing stub for what
 * is not built yet). GET /metrics is h_metrics.c.
 *
 * A route is a path pattern ("*" = one segment, "**" = the rest), a method and who may
 * call it. Unknown path: 404. Known path, other method: 405 with Allow. Then: anonymous
 * on a user route 401; a user on an admin route 403; a node credential is only accepted
 * on /v1/agent/... (and acts for its own node only), the cluster's agent token only on
 * POST /v1/agent/join, and user tokens never on either.
 */
#include "server/server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
