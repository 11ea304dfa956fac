/*
 * h_metrics.c - GET /metrics: the controller's state in the Prometheus text format
 * (version 0.0.4), every family with its HELP and TYPE lines (docs/api.md lists them).
 *
 * A scrape reads counters kept as things happen (metrics.c, srv_metrics_t) and walks
 * the accounts (the job tally, the fair-share view), never the jobs: its cost is
 * O(accounts + nodes), whatever the number of jobs. Each part of the controller that
 * has metrics of its own writes them from its own file into the same buffer, with one
 * call at the end of h_metrics.
 *
 * Example (a scrape, abridged):
 *   # HELP fairgpu_jobs Jobs by state, account and priority.
 *   # TYPE fairgpu_jobs gauge
 *   fairgpu_jobs{state="RUNNING",account="vision",priority="normal"} 2
 *   fairgpu_pending_gpus{size="8"} 16
 *   fairgpu_scheduler_pass_seconds_bucket{le="0.001"} 41
 */
#include "server/billview.h"
#include "server/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void srv_buf_printf(srv_buf_t *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        srv_buf_put(b, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big)
        abort();
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    srv_buf_put(b, big, (size_t)n);
    free(big);
}

void srv_prom_family(srv_buf_t *b, const char *name, const char *type, const char *help)
{
    srv_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void srv_prom_label(srv_buf_t *b, const char *v)
{
    for (const char *p = v ? v : ""; *p; p++) {
        if (*p == '\\' || *p == '"')
            srv_buf_put(b, "\\", 1);
        if (*p == '\n')
            srv_buf_put(b, "\\n", 2);
        else
            srv_buf_put(b, p, 1);
    }
}

/* ------------------------------------------------------------------ access */

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

/* ------------------------------------------------------------------ writers */

/* Writes histogram h as family `name` (its HELP and TYPE written by the caller when
 * labels is not NULL: several label sets share one family). labels: "" or `k="v",`
 * pairs, each ending in a comma. */
static void put_hist(srv_buf_t *b, const char *name, const char *labels, const srv_hist_t *h,
                     const int64_t *bounds_us)
{
    long cum = 0;
    for (int k = 0; k <= SRV_HIST_BUCKETS; k++) {
        cum += atomic_load_explicit(&h->n[k], memory_order_relaxed);
        if (k < SRV_HIST_BUCKETS)
            srv_buf_printf(b, "%s_bucket{%sle=\"%g\"} %ld\n", name, labels,
                           (double)bounds_us[k] / 1e6, cum);
        else
            srv_buf_printf(b, "%s_bucket{%sle=\"+Inf\"} %ld\n", name, labels, cum);
    }
    /* the count is the buckets' sum as read: +Inf == count even during observations */
    size_t nl = strlen(labels);
    srv_buf_printf(b, "%s_sum%s%.*s%s %.6f\n%s_count%s%.*s%s %ld\n", name, nl ? "{" : "",
                   nl ? (int)nl - 1 : 0, labels, nl ? "}" : "",
                   (double)atomic_load_explicit(&h->sum_us, memory_order_relaxed) / 1e6, name,
                   nl ? "{" : "", nl ? (int)nl - 1 : 0, labels, nl ? "}" : "", cum);
}

/* Jobs by state, account and priority; jobs by state; pending GPUs by size. */
static void put_jobs(srv_t *s, srv_buf_t *b)
{
    static const char *const size_names[4] = {"1", "2-7", "8", ">8"};
    int64_t states[6], pend[4];
    pthread_mutex_lock(&s->mu);
    memcpy(states, s->njobs_by_state, sizeof states);
    srv_jobtally_pending_gpus(s, pend);
    srv_prom_family(b, "fairgpu_jobs", "gauge",
                    "Jobs by state, account and priority (a priority once the account had a "
                    "job of it).");
    size_t na = srv_jobtally_accounts(s);
    for (size_t i = 0; i < na; i++) {
        int64_t n[3][6];
        const char *acct = srv_jobtally_get(s, i, n);
        for (int p = 0; p < 3; p++) {
            bool used = false;
            for (int k = 0; k < 6; k++)
                used |= n[p][k] != 0;
            if (!used && !srv_jobtally_prio_seen(s, i, p))
                continue;
            for (int k = 0; k < 6; k++) {
                srv_buf_printf(b, "fairgpu_jobs{state=\"%s\",account=\"",
                               fg_job_state_name((fg_job_state_t)k));
                srv_prom_label(b, acct);
                srv_buf_printf(b, "\",priority=\"%s\"} %lld\n", fg_prio_name((fg_prio_t)p),
                               (long long)n[p][k]);
            }
        }
    }
    pthread_mutex_unlock(&s->mu);
    srv_prom_family(b, "fairgpu_jobs_by_state", "gauge", "Jobs by state (all accounts).");
    for (int k = 0; k < 6; k++)
        srv_buf_printf(b, "fairgpu_jobs_by_state{state=\"%s\"} %lld\n",
                       fg_job_state_name((fg_job_state_t)k), (long long)states[k]);
    srv_prom_family(b, "fairgpu_pending_gpus", "gauge",
                    "GPUs asked for by pending jobs, by job size class.");
    for (int k = 0; k < 4; k++)
        srv_buf_printf(b, "fairgpu_pending_gpus{size=\"%s\"} %lld\n", size_names[k],
                       (long long)pend[k]);
}

/* Running GPUs and entitlement per account, from the fair-share view (as
 * GET /v1/fairshare shows them). */
static void put_accounts(srv_t *s, srv_buf_t *b)
{
    srv_buf_t ent = {0};
    srv_prom_family(b, "fairgpu_account_running_gpus", "gauge",
                    "GPUs held by the running jobs of each account.");
    srv_prom_family(&ent, "fairgpu_account_entitlement_gpus", "gauge",
                    "Each account's entitlement: its normalized share x the GPUs up.");
    pthread_mutex_lock(&s->mu);
    json_t *fs = s->fairshare;
    double up = (double)json_integer_value(json_object_get(fs, "gpus_up"));
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(fs, "accounts"), i, a)
    {
        const char *name = json_string_value(json_object_get(a, "name"));
        json_t *e = json_object_get(a, "entitlement_gpus");
        double ent_gpus = json_is_number(e)
                              ? json_number_value(e)
                              : json_number_value(json_object_get(a, "normalized_share")) * up;
        srv_buf_puts(b, "fairgpu_account_running_gpus{account=\"");
        srv_prom_label(b, name);
        srv_buf_printf(b, "\"} %lld\n",
                       (long long)json_integer_value(json_object_get(a, "running_gpus")));
        srv_buf_puts(&ent, "fairgpu_account_entitlement_gpus{account=\"");
        srv_prom_label(&ent, name);
        srv_buf_printf(&ent, "\"} %.6g\n", ent_gpus);
    }
    pthread_mutex_unlock(&s->mu);
    srv_buf_put(b, ent.p ? ent.p : "", ent.n);
    free(ent.p);
}

/* Scheduling passes, starts, preemptions, requeues, node losses. */
static void put_scheduler(srv_t *s, srv_buf_t *b)
{
    srv_prom_family(b, "fairgpu_scheduler_passes_total", "counter", "Scheduling passes.");
    srv_buf_printf(b, "fairgpu_scheduler_passes_total %ld\n", atomic_load(&s->m.passes));
    srv_prom_family(b, "fairgpu_scheduler_pass_seconds", "histogram",
                    "Duration of scheduling passes.");
    put_hist(b, "fairgpu_scheduler_pass_seconds", "", &s->m.pass_hist, srv_pass_bounds_us);
    srv_prom_family(b, "fairgpu_scheduler_last_pass_seconds", "gauge",
                    "Duration of the last pass.");
    srv_buf_printf(b, "fairgpu_scheduler_last_pass_seconds %.6f\n",
                   (double)atomic_load(&s->m.last_pass_us) / 1e6);
    srv_prom_family(b, "fairgpu_scheduler_max_pass_seconds", "gauge", "Longest pass since start.");
    srv_buf_printf(b, "fairgpu_scheduler_max_pass_seconds %.6f\n",
                   (double)atomic_load(&s->m.max_pass_us) / 1e6);
    srv_prom_family(b, "fairgpu_job_starts_total", "counter", "Attempts started.");
    srv_buf_printf(b, "fairgpu_job_starts_total %ld\n", atomic_load(&s->m.starts));
    srv_prom_family(b, "fairgpu_preemptions_total", "counter",
                    "Running jobs asked to stop by a preemption decision.");
    srv_buf_printf(b, "fairgpu_preemptions_total %ld\n", atomic_load(&s->m.preemptions));
    srv_prom_family(b, "fairgpu_attempts_ended_total", "counter", "Attempts ended (any cause).");
    srv_buf_printf(b, "fairgpu_attempts_ended_total %ld\n", atomic_load(&s->m.ended));
    srv_prom_family(b, "fairgpu_requeues_total", "counter",
                    "Jobs put back in the queue after an attempt ended, by its end cause.");
    for (int c = 0; c <= FG_END_CAUSE_MAX; c++)
        srv_buf_printf(b, "fairgpu_requeues_total{cause=\"%s\"} %ld\n",
                       fg_end_cause_name((fg_end_cause_t)c), atomic_load(&s->m.requeues[c]));
    srv_prom_family(b, "fairgpu_node_losses_total", "counter",
                    "Nodes declared down (missed heartbeats); their attempts end node_lost.");
    srv_buf_printf(b, "fairgpu_node_losses_total %ld\n", atomic_load(&s->m.node_losses));
}

/* Replies by status code, and their latency by method and class. */
static void put_http(srv_t *s, srv_buf_t *b)
{
    static const char *const methods[SRV_HTTP_METHODS] = {"GET",   "POST",   "PUT",
                                                          "PATCH", "DELETE", "other"};
    static const char *const classes[SRV_HTTP_CLASSES] = {"api", "agent", "longpoll"};
    srv_prom_family(b, "fairgpu_http_requests_total", "counter", "HTTP replies by status code.");
    for (int c = 100; c < 600; c++) {
        long v = atomic_load(&s->m.http_by_code[c]);
        if (v)
            srv_buf_printf(b, "fairgpu_http_requests_total{code=\"%d\"} %ld\n", c, v);
    }
    srv_prom_family(b, "fairgpu_http_request_duration_seconds", "histogram",
                    "Time from a complete request to its reply, by method and class (api, "
                    "agent, longpoll: parked on events, assignments or a stream).");
    for (int m = 0; m < SRV_HTTP_METHODS; m++)
        for (int c = 0; c < SRV_HTTP_CLASSES; c++) {
            const srv_hist_t *h = &s->m.http_hist[m][c];
            bool any = (m == 0 && c == 0); /* GET api: always there (scrapes are) */
            for (int k = 0; k <= SRV_HIST_BUCKETS && !any; k++)
                any = atomic_load_explicit(&h->n[k], memory_order_relaxed) != 0;
            if (!any)
                continue;
            char labels[64];
            snprintf(labels, sizeof labels, "method=\"%s\",class=\"%s\",", methods[m], classes[c]);
            put_hist(b, "fairgpu_http_request_duration_seconds", labels, h, srv_http_bounds_us);
        }
}

/* The ledger's rows and amounts by kind, in the price book's currency. */
static void put_ledger(srv_t *s, srv_buf_t *b)
{
    char cur[4] = "";
    fg_store_tx_t *tx = NULL;
    if (fg_store_read_begin(s->store, &tx) == 0) {
        if (srv_bill_currency(tx, cur))
            cur[0] = 0;
        fg_store_read_end(tx);
    }
    srv_prom_family(b, "fairgpu_ledger_rows_total", "counter", "Ledger rows stored, by kind.");
    for (int k = 0; k < 4; k++)
        srv_buf_printf(b, "fairgpu_ledger_rows_total{kind=\"%s\"} %ld\n",
                       fg_row_kind_name((fg_row_kind_t)k), atomic_load(&s->m.ledger_rows[k]));
    srv_prom_family(b, "fairgpu_ledger_charged_micros_total", "counter",
                    "Sum of the ledger's charge rows (micro-units of the currency).");
    srv_buf_printf(b, "fairgpu_ledger_charged_micros_total{currency=\"%s\"} %ld\n", cur,
                   atomic_load(&s->m.ledger_micros[FG_ROW_CHARGE]));
    srv_prom_family(b, "fairgpu_ledger_micros", "gauge",
                    "Sum of the ledger's rows by kind (signed: refunds and credits are "
                    "negative; their sum is the usage report's cost).");
    for (int k = 0; k < 4; k++)
        srv_buf_printf(b, "fairgpu_ledger_micros{currency=\"%s\",kind=\"%s\"} %ld\n", cur,
                       fg_row_kind_name((fg_row_kind_t)k), atomic_load(&s->m.ledger_micros[k]));
}

/* The store's writer, the event log, nodes, users and credentials. */
static void put_store(srv_t *s, srv_buf_t *b)
{
    fg_store_stats_t st;
    fg_store_get_stats(s->store, &st);
    srv_prom_family(b, "fairgpu_store_commits_total", "counter", "Store commits.");
    srv_buf_printf(b, "fairgpu_store_commits_total %llu\n", (unsigned long long)st.commits);
    srv_prom_family(b, "fairgpu_store_units_total", "counter", "Store units of work committed.");
    srv_buf_printf(b, "fairgpu_store_units_total %llu\n", (unsigned long long)st.units);
    srv_prom_family(b, "fairgpu_store_max_batch", "gauge", "Most units in one commit.");
    srv_buf_printf(b, "fairgpu_store_max_batch %llu\n", (unsigned long long)st.max_batch);
    srv_prom_family(b, "fairgpu_store_queue_length", "gauge", "Units waiting for the writer.");
    srv_buf_printf(b, "fairgpu_store_queue_length %llu\n", (unsigned long long)st.queue_len);
    srv_prom_family(b, "fairgpu_store_batch_seconds_total", "counter",
                    "Writer time running batches (units + commit).");
    srv_buf_printf(b, "fairgpu_store_batch_seconds_total %.6f\n", (double)st.batch_us / 1e6);
    srv_prom_family(b, "fairgpu_store_commit_seconds_total", "counter",
                    "Of which in COMMIT (the fsync).");
    srv_buf_printf(b, "fairgpu_store_commit_seconds_total %.6f\n", (double)st.commit_us / 1e6);
    srv_prom_family(b, "fairgpu_store_checkpoints_total", "counter", "WAL checkpoints.");
    srv_buf_printf(b, "fairgpu_store_checkpoints_total %llu\n", (unsigned long long)st.checkpoints);
    srv_prom_family(b, "fairgpu_store_batch_reruns_total", "counter",
                    "Batches run again with savepoints after a unit failed.");
    srv_buf_printf(b, "fairgpu_store_batch_reruns_total %llu\n", (unsigned long long)st.reruns);
    srv_prom_family(b, "fairgpu_store_max_checkpoint_seconds", "gauge",
                    "Longest pause of the commit pipeline.");
    srv_buf_printf(b, "fairgpu_store_max_checkpoint_seconds %.6f\n",
                   (double)st.max_checkpoint_us / 1e6);
    int64_t seq, nusers, ncreds, up = 0, down = 0;
    pthread_mutex_lock(&s->mu);
    seq = s->pub_seq;
    nusers = (int64_t)s->nusers;
    ncreds = (int64_t)s->ntokens;
    for (size_t i = 0; i < s->nnodes; i++) {
        if (s->nodes[i]->state == FG_NODE_DOWN)
            down++;
        else
            up++;
    }
    pthread_mutex_unlock(&s->mu);
    srv_prom_family(b, "fairgpu_event_seq", "gauge", "Sequence number of the last event.");
    srv_buf_printf(b, "fairgpu_event_seq %lld\n", (long long)seq);
    srv_prom_family(b, "fairgpu_nodes", "gauge", "Nodes by state (draining counts as up).");
    srv_buf_printf(b, "fairgpu_nodes{state=\"up\"} %lld\nfairgpu_nodes{state=\"down\"} %lld\n",
                   (long long)up, (long long)down);
    srv_prom_family(b, "fairgpu_users", "gauge", "Users.");
    srv_buf_printf(b, "fairgpu_users %lld\n", (long long)nusers);
    srv_prom_family(b, "fairgpu_credentials_cached", "gauge",
                    "Sessions and API tokens held in memory.");
    srv_buf_printf(b, "fairgpu_credentials_cached %lld\n", (long long)ncreds);
}

int h_metrics(srv_req_t *r)
{
    srv_t *s = r->srv;
    if (!metrics_allowed(r))
        return SRV_YES;
    srv_buf_t b = {0};
    put_jobs(s, &b);
    put_accounts(s, &b);
    srv_prom_family(&b, "fairgpu_submissions_total", "counter", "Jobs accepted (201).");
    srv_buf_printf(&b, "fairgpu_submissions_total %ld\n", atomic_load(&s->m.submissions));
    srv_prom_family(&b, "fairgpu_submissions_refused_total", "counter",
                    "Submissions refused by a cap (429).");
    srv_buf_printf(&b, "fairgpu_submissions_refused_total %ld\n",
                   atomic_load(&s->m.submissions_refused));
    put_scheduler(s, &b);
    put_http(s, &b);
    put_ledger(s, &b);
    put_store(s, &b);
    /* each part's own metrics */
    srv_idle_metrics(s, &b);      /* per-GPU utilization and memory, idle jobs (sched_idle.c) */
    srv_fairshare_metrics(s, &b); /* fair-share factor and recovery (fairshare_metrics.c) */
    srv_est_metrics(s, &b);       /* start estimate errors (sched_estimates.c) */
    return srv_reply_text(r, 200, "text/plain; version=0.0.4; charset=utf-8",
                          b.p ? b.p : calloc(1, 1), b.n, true);
}
