/*
 * fairshare_metrics.c - the fair-share projection in /metrics: per account its
 * fair-share factor and when it recovers its share (docs/api.md, GET /v1/fairshare),
 * read from the fair-share view that the scheduler thread refreshes
 * (sched_fairshare.c). Running GPUs and entitlement are h_metrics.c's (put_accounts).
 * Runs on an HTTP thread; takes mu.
 *
 * Example: account ml over its share, cv without usage:
 *   fairgpu_account_fair_share_factor{account="ml"} 0.31
 *   fairgpu_account_fair_share_factor{account="cv"} 1
 *   fairgpu_account_recovers_in_seconds{account="ml"} 5400
 *   fairgpu_account_recovers_in_seconds{account="cv"} 0
 * (an account that never recovers, nobody else having usage, has no recovers sample).
 */
#include "server/server.h"

#include <stdlib.h>

/* The samples of gauge `name` from member `key` of each account row of the view
 * (absent or null: no sample). mu held. */
static void gauge(srv_buf_t *b, json_t *accts, const char *name, const char *help, const char *key)
{
    srv_prom_family(b, name, "gauge", help);
    size_t i;
    json_t *a;
    json_array_foreach(accts, i, a)
    {
        const char *acct = json_string_value(json_object_get(a, "name"));
        json_t *v = json_object_get(a, key);
        if (!acct || !json_is_number(v))
            continue;
        srv_buf_printf(b, "%s{account=\"", name);
        srv_prom_label(b, acct);
        srv_buf_printf(b, "\"} %.6g\n", json_number_value(v));
    }
}

void srv_fairshare_metrics(srv_t *s, srv_buf_t *b)
{
    pthread_mutex_lock(&s->mu);
    json_t *accts = s->fairshare ? json_object_get(s->fairshare, "accounts") : NULL;
    gauge(b, accts, "fairgpu_account_fair_share_factor",
          "2^(-usage share / share) of each account: 1 unused, 0.5 at its share.",
          "fair_share_factor");
    gauge(b, accts, "fairgpu_account_recovers_in_seconds",
          "Seconds until an account's factor is back at 0.5 if it runs nothing more and the "
          "others keep their usage (absent: never).",
          "recovers_in_s");
    pthread_mutex_unlock(&s->mu);
}
