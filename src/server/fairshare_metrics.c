/*
 * fairshare_metrics.c - the fair-share figures of /metrics: per account its running
 * GPUs, its entitlement (share x GPUs up), its fair-share factor and when it recovers
 * its share (docs/api.md, GET /v1/fairshare), read from the fair-share view that the
 * scheduler thread refreshes (sched_fairshare.c). Runs on an HTTP thread; takes mu.
 *
 * Example: accounts ml (usage over its share) and cv on 16 GPUs, shares 1/2:
 *   fairgpu_account_entitlement_gpus{account="ml"} 8
 *   fairgpu_account_running_gpus{account="ml"} 6
 *   fairgpu_account_fair_share_factor{account="ml"} 0.31
 *   fairgpu_account_recovers_in_seconds{account="ml"} 5400
 * (an account that never recovers, nobody else having usage, has no recovers line).
 */
#include "server/server.h"

#include <stdio.h>
#include <string.h>

/* Appends one sample of gauge `name` for account `acct` (a checked account name:
 * [a-z0-9_.-], nothing to escape in a label). */
static void sample(srv_buf_t *b, const char *name, const char *acct, double v)
{
    char line[256];
    int n = snprintf(line, sizeof line, "%s{account=\"%s\"} %.6g\n", name, acct, v);
    if (n > 0 && (size_t)n < sizeof line)
        srv_buf_put(b, line, (size_t)n);
}

/* The gauges of one member of each account row of the view (field key; absent or null:
 * no sample). */
static void gauge(srv_buf_t *b, json_t *accts, const char *name, const char *help, const char *key)
{
    srv_buf_puts(b, "# HELP ");
    srv_buf_puts(b, name);
    srv_buf_puts(b, " ");
    srv_buf_puts(b, help);
    srv_buf_puts(b, "\n# TYPE ");
    srv_buf_puts(b, name);
    srv_buf_puts(b, " gauge\n");
    size_t i;
    json_t *a;
    json_array_foreach(accts, i, a)
    {
        const char *acct = json_string_value(json_object_get(a, "name"));
        json_t *v = json_object_get(a, key);
        if (acct && json_is_number(v) && strcspn(acct, "\"\\\n") == strlen(acct))
            sample(b, name, acct, json_number_value(v));
    }
}

void srv_fairshare_metrics(srv_t *s, srv_buf_t *b)
{
    pthread_mutex_lock(&s->mu);
    json_t *accts = s->fairshare ? json_deep_copy(json_object_get(s->fairshare, "accounts")) : NULL;
    pthread_mutex_unlock(&s->mu);
    if (!json_is_array(accts)) {
        json_decref(accts);
        return;
    }
    gauge(b, accts, "fairgpu_account_running_gpus", "GPUs an account's jobs hold.", "running_gpus");
    gauge(b, accts, "fairgpu_account_entitlement_gpus",
          "An account's share of the GPUs up (normalized share x GPUs up).", "entitlement_gpus");
    gauge(b, accts, "fairgpu_account_fair_share_factor",
          "2^(-usage share / share): 1 unused, 0.5 at its share.", "fair_share_factor");
    gauge(b, accts, "fairgpu_account_recovers_in_seconds",
          "Seconds until its factor is back at 0.5 if it runs nothing more (absent: never).",
          "recovers_in_s");
    json_decref(accts);
}
