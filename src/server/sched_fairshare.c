/*
 * sched_fairshare.c - the fair-share view (GET /v1/fair-share) and the usage saved to
 * the store.
 *
 * The core keeps each account's and member's decayed usage U (GPU-seconds, half-life
 * h, see include/fairgpu/fairshare.h). The view shows, per account and per member of
 * an account, U, its normalized share (its weight over its siblings') and its
 * fair-share factor fg_fair_share_factor(U, ΣU of its siblings, share): 1 unused, 0.5
 * exactly at its share, towards 0 far over it. Usage is saved every 10 s and at
 * shutdown, and read back at start (sched_restore.c).
 * Each account also shows month_gpu_ms: the GPU time it held this UTC month, summed from
 * the ledger rows as they are made (sched_billing.c), the figure its invoice counts.
 * Example: accounts a (weight 3) and b (weight 1), usage 300 and 100 GPU-s: shares
 * 0.75 and 0.25, usage shares 0.75 and 0.25, so both factors are 2^-1 = 0.5; if b had
 * used nothing, a's factor would be 2^(-1/0.75) ≈ 0.40 and b's 1.
 *
 * The projection: each row also shows entitlement_gpus (its share of the GPUs up; a
 * member's, of its account's) and recovers_in_s / recovers_at, when its factor is back
 * at 0.5 if it runs nothing more and its siblings keep their usage
 * (fg_fair_recovers_in, fairshare.h): 0 at or under its share, null when never (nobody
 * else has usage). Example: half-life 1 day, a 300 GPU-h and b 100 GPU-h with shares
 * 0.25 and 0.75: a recovers in log2(300 * 0.75 / (0.25 * 100)) = log2(9) = 3.17 days.
 */
#include "server/sched_int.h"

#include "common/xalloc.h"

#include "fairgpu/fairshare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Adds entitlement_gpus, recovers_in_s and recovers_at (RFC 3339, UTC; both null when it
 * never recovers) to row o: usage U, its siblings' S, share s, at half-life h. */
static void add_projection(json_t *o, double ent, double usage, double siblings, double share,
                           int64_t half_life_s, int64_t now)
{
    json_object_set_new(o, "entitlement_gpus", json_real(ent));
    const double t = fg_fair_recovers_in(usage, siblings, share, half_life_s);
    if (t < 0 || !isfinite(t)) {
        json_object_set_new(o, "recovers_in_s", json_null());
        json_object_set_new(o, "recovers_at", json_null());
        return;
    }
    const int64_t secs = (int64_t)ceil(t);
    json_object_set_new(o, "recovers_in_s", json_integer(secs));
    time_t at = (time_t)(now + secs);
    struct tm tm;
    char b[32];
    gmtime_r(&at, &tm);
    strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_object_set_new(o, "recovers_at", json_string(b));
}

/* The members of account a, each with its usage, its factor among the account's
 * members and its projection (of the account's entitlement acct_ent). */
static json_t *member_rows(sctx_t *c, int a, double acct_ent)
{
    const int64_t h = fg_sched_config(c->core)->half_life_s;
    size_t nm = fg_sched_member_count(c->core);
    fg_member_info_t *mi = fg_xmalloc((nm ? nm : 1) * sizeof *mi);
    double *use = fg_xmalloc((nm ? nm : 1) * sizeof *use);
    size_t n = 0;
    for (size_t m = 0; m < nm; m++) {
        if (fg_sched_member_info(c->core, (int)m, &mi[n]) || mi[n].account != a)
            continue;
        use[n++] = fg_sched_member_usage(c->core, (int)m, c->now);
    }
    double siblings = 0;
    for (size_t k = 0; k < n; k++)
        siblings += use[k];
    json_t *rows = json_array();
    for (size_t k = 0; k < n; k++) {
        json_t *o = json_pack("{s:s,s:f,s:f,s:f,s:i,s:i,s:f}", "name", mi[k].user, "weight",
                              mi[k].weight, "normalized_share", mi[k].normalized_share,
                              "usage_gpu_seconds", use[k], "running_gpus", mi[k].running_gpus,
                              "pending_jobs", mi[k].pending_jobs, "fair_share_factor",
                              fg_fair_share_factor(use[k], siblings, mi[k].normalized_share));
        add_projection(o, mi[k].normalized_share * acct_ent, use[k], siblings - use[k],
                       mi[k].normalized_share, h, c->now);
        json_array_append_new(rows, o);
    }
    free(mi);
    free(use);
    return rows;
}

/* One account of the view, read before the accounts' total usage is known. */
typedef struct account_row {
    fg_account_info_t ai;
    double usage;
    json_t *users;
} account_row_t;

/* The accounts, each with its usage, its factor among all accounts, and its members. */
static json_t *account_rows(sctx_t *c)
{
    size_t na = fg_sched_account_count(c->core);
    account_row_t *row = fg_xmalloc((na ? na : 1) * sizeof *row);
    size_t n = 0;
    const double up = (double)fg_sched_gpus_up(c->core);
    const int64_t h = fg_sched_config(c->core)->half_life_s;
    for (size_t a = 0; a < na; a++) {
        if (fg_sched_account_info(c->core, (int)a, &row[n].ai))
            continue;
        row[n].usage = fg_sched_account_usage(c->core, (int)a, c->now);
        row[n].users = member_rows(c, (int)a, row[n].ai.normalized_share * up);
        n++;
    }
    double total = 0;
    for (size_t k = 0; k < n; k++)
        total += row[k].usage;
    json_t *rows = json_array();
    pthread_mutex_lock(&c->s->mu);
    for (size_t k = 0; k < n; k++) {
        const fg_account_info_t *ai = &row[k].ai;
        const srv_account_t *sa = srv_account_by_name(c->s, ai->name);
        json_t *o = json_pack(
            "{s:s,s:f,s:f,s:f,s:i,s:i,s:f,s:o,s:o}", "name", ai->name, "weight", ai->weight,
            "normalized_share", ai->normalized_share, "usage_gpu_seconds", row[k].usage,
            "running_gpus", ai->running_gpus, "pending_jobs", ai->pending_jobs, "fair_share_factor",
            fg_fair_share_factor(row[k].usage, total, ai->normalized_share), "gpu_quota",
            ai->gpu_quota < 0 ? json_null() : json_integer(ai->gpu_quota), "users", row[k].users);
        /* the GPU time its invoice counts this month, from the same ledger rows */
        int64_t held = sa ? sa->month_held_gpu_ms : 0;
        json_object_set_new(o, "month_gpu_ms", json_integer(held));
        json_object_set_new(o, "month_gpu_seconds", json_real((double)held / 1000.0));
        add_projection(o, ai->normalized_share * up, row[k].usage, total - row[k].usage,
                       ai->normalized_share, h, c->now);
        json_array_append_new(rows, o);
    }
    pthread_mutex_unlock(&c->s->mu);
    free(row);
    return rows;
}

/* Rebuilds the fair-share view from the core and swaps it in (mu taken here). */
void srv__refresh_fairshare(sctx_t *c)
{
    srv_t *s = c->s;
    const fg_config_t *cfg = fg_sched_config(c->core);
    json_t *accts = account_rows(c);
    json_t *o = json_pack("{s:s,s:I,s:f,s:i,s:i,s:o}", "policy", fg_policy_name(cfg->policy),
                          "half_life_s", (json_int_t)cfg->half_life_s, "tau_s",
                          fg_fair_tau(cfg->half_life_s), "gpus_up", fg_sched_gpus_up(c->core),
                          "gpus_free", fg_sched_gpus_free(c->core), "accounts", accts);
    json_object_set_new(o, "as_of", json_integer(c->now));
    json_object_set_new(o, "quantum_s", json_integer(cfg->quantum_s));
    pthread_mutex_lock(&s->mu);
    json_t *old = s->fairshare;
    s->fairshare = o;
    pthread_mutex_unlock(&s->mu);
    json_decref(old);
}

/* Queues one usage record (an account's when uid is 0, else a member's). */
static void queue_usage(sctx_t *c, const char *account, int64_t uid, double gpu_s)
{
    c->usage = fg_xgrow(c->usage, &c->usage_cap, c->nusage + 1, sizeof *c->usage);
    fg_store_usage_t *u = &c->usage[c->nusage++];
    memset(u, 0, sizeof *u);
    u->account = fg_xstrdup(account);
    u->user_id = uid;
    u->gpu_s = gpu_s;
    u->as_of = c->now;
}

/* Queues every account's and member's usage for the next commit. */
void srv__save_usage(sctx_t *c)
{
    size_t na = fg_sched_account_count(c->core), nm = fg_sched_member_count(c->core);
    for (size_t a = 0; a < na; a++) {
        fg_account_info_t ai;
        if (fg_sched_account_info(c->core, (int)a, &ai))
            continue;
        queue_usage(c, ai.name, 0, fg_sched_account_usage(c->core, (int)a, c->now));
    }
    for (size_t m = 0; m < nm; m++) {
        fg_member_info_t mi;
        if (fg_sched_member_info(c->core, (int)m, &mi))
            continue;
        fg_account_info_t ai;
        if (fg_sched_account_info(c->core, mi.account, &ai))
            continue;
        pthread_mutex_lock(&c->s->mu);
        srv_user_t *usr = srv_user_by_name(c->s, mi.user);
        int64_t uid = usr ? usr->r.id : 0;
        pthread_mutex_unlock(&c->s->mu);
        if (!uid)
            continue;
        queue_usage(c, ai.name, uid, fg_sched_member_usage(c->core, (int)m, c->now));
    }
    c->last_usage_save = c->now;
}
