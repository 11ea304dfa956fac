/*
 * whatif_snap.c - the live cluster as a what-if snapshot, and the changes a what-if
 * applies to its settings (see whatif_snap.h).
 *
 * Example: a fair-share reply with accounts ml (weight 2, usage 7200 GPU-s) and cv
 * (weight 1), two nodes of 8 GPUs up, a running 4-GPU job of ml started 600 s ago with
 * a 3600 s limit and a pending 8-GPU job of cv with a 7200 s limit become: accounts
 * [ml 2 7200, cv 1 0], one group of 2 x 8 GPUs, and jobs [ml 4 GPUs running, 3000 s
 * left; cv 8 GPUs pending, 7200 s]. The change "weight=cv:3" then sets cv's weight to
 * 3 in the settings replayed, and "add-nodes=1" makes the group 3 nodes.
 */
#include "cli/whatif_snap.h"

#include "cli/errbuf.h"
#include "cli/timespec.h"
#include "common/xalloc.h"
#include "fairgpu/estimate.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* An integer field of o in [lo, hi]: 0 and *v, or -1. */
static int int_field(json_t *o, const char *k, int64_t lo, int64_t hi, int64_t *v)
{
    json_t *f = json_object_get(o, k);
    if (!json_is_integer(f) || json_integer_value(f) < lo || json_integer_value(f) > hi)
        return -1;
    *v = json_integer_value(f);
    return 0;
}

/* A number field of o in [lo, hi]. */
static int num_field(json_t *o, const char *k, double lo, double hi, double *v)
{
    json_t *f = json_object_get(o, k);
    if (!json_is_number(f) || !(json_number_value(f) >= lo) || !(json_number_value(f) <= hi))
        return -1;
    *v = json_number_value(f);
    return 0;
}

/* The index of account `name` in snap, or -1. */
static int account_index(const fg_whatif_snapshot_t *snap, const char *name)
{
    for (size_t a = 0; a < snap->naccounts; a++)
        if (!strcmp(snap->accounts[a].name, name))
            return (int)a;
    return -1;
}

/* Adds account `name` (weight 1, no quota, no usage) and returns its index. */
static int account_add(fg_whatif_snapshot_t *snap, size_t *cap, const char *name)
{
    snap->accounts = fg_xgrow(snap->accounts, cap, snap->naccounts + 1, sizeof *snap->accounts);
    fg_whatif_account_t *a = &snap->accounts[snap->naccounts];
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", name);
    a->weight = 1.0;
    a->quota = -1;
    return (int)snap->naccounts++;
}

/* The accounts of the fair-share reply, with the live policy and half-life. */
static int read_accounts(json_t *fs, fg_whatif_snapshot_t *snap, size_t *cap, char *err,
                         size_t errlen)
{
    fg_config_default(&snap->live.cfg);
    const char *pol = json_string_value(json_object_get(fs, "policy"));
    int p = pol ? fg_policy_parse(pol) : -1;
    int64_t hl, q;
    if (p < 0 || int_field(fs, "half_life_s", 0, FG_TIME_MAX_S, &hl) < 0)
        return fg_cli_errf(err, errlen, "the fair-share reply has no policy or half_life_s");
    snap->live.cfg.policy = (fg_policy_t)p;
    snap->live.cfg.half_life_s = hl;
    if (int_field(fs, "quantum_s", 1, FG_TIME_MAX_S, &q) == 0)
        snap->live.cfg.quantum_s = q;
    json_t *accts = json_object_get(fs, "accounts"), *a;
    size_t i;
    if (!json_is_array(accts))
        return fg_cli_errf(err, errlen, "the fair-share reply has no accounts");
    json_array_foreach(accts, i, a)
    {
        const char *name = json_string_value(json_object_get(a, "name"));
        if (!name || !*name || strlen(name) > FG_NAME_MAX || account_index(snap, name) >= 0)
            return fg_cli_errf(err, errlen, "fair-share account %zu: bad or repeated name", i);
        int k = account_add(snap, cap, name);
        fg_whatif_account_t *wa = &snap->accounts[k];
        int64_t quota = -1;
        json_t *qv = json_object_get(a, "gpu_quota");
        if (num_field(a, "weight", 1e-9, 1e12, &wa->weight) < 0 ||
            num_field(a, "usage_gpu_seconds", 0, 1e18, &wa->usage_gpu_s) < 0 ||
            (!json_is_null(qv) && qv && int_field(a, "gpu_quota", 0, 1000000000, &quota) < 0))
            return fg_cli_errf(err, errlen, "fair-share account %s: bad weight, usage or quota",
                               name);
        wa->quota = (int32_t)quota;
    }
    return 0;
}

/* The nodes up or draining, grouped by GPU count and type (first-seen order). */
static int read_nodes(json_t *nodes, fg_whatif_snapshot_t *snap, char *err, size_t errlen)
{
    json_t *items = json_is_array(nodes) ? nodes : json_object_get(nodes, "items"), *n;
    size_t i, cap = 0;
    if (!json_is_array(items))
        return fg_cli_errf(err, errlen, "the node list has no items");
    json_array_foreach(items, i, n)
    {
        const char *st = json_string_value(json_object_get(n, "state"));
        size_t g = json_array_size(json_object_get(n, "gpus"));
        if (!st || (strcmp(st, "up") && strcmp(st, "draining")) || g == 0)
            continue;
        if (g > FG_MAX_NODE_GPUS)
            return fg_cli_errf(err, errlen, "node %zu: more than %d GPUs", i, FG_MAX_NODE_GPUS);
        const char *type = json_string_value(json_object_get(n, "gpu_type"));
        size_t k = 0;
        for (; k < snap->live.ngroups; k++)
            if (snap->live.groups[k].gpus == (int32_t)g &&
                !strncmp(snap->live.groups[k].gpu_type, type ? type : "",
                         sizeof snap->live.groups[k].gpu_type - 1))
                break;
        if (k == snap->live.ngroups) {
            snap->live.groups = fg_xgrow(snap->live.groups, &cap, k + 1, sizeof *snap->live.groups);
            fg_sim_nodes_t *ng = &snap->live.groups[snap->live.ngroups++];
            memset(ng, 0, sizeof *ng);
            ng->gpus = (int32_t)g;
            snprintf(ng->gpu_type, sizeof ng->gpu_type, "%s", type && *type ? type : "gpu");
        }
        snap->live.groups[k].count++;
    }
    if (snap->live.ngroups == 0)
        return fg_cli_errf(err, errlen, "no node is up");
    return 0;
}

/* One job of the list as a snapshot job (running or pending; others: 1, skipped). */
static int read_job(json_t *j, fg_whatif_snapshot_t *snap, size_t *acap, int64_t now,
                    const fg_rt_model_t *model, fg_whatif_job_t *out, char *err, size_t errlen)
{
    const char *st = json_string_value(json_object_get(j, "state"));
    const char *acct = json_string_value(json_object_get(j, "account"));
    if (!st || (strcmp(st, "RUNNING") && strcmp(st, "PENDING")))
        return 1;
    int64_t gpus, limit, submit, start = 0;
    if (!acct || !*acct || strlen(acct) > FG_NAME_MAX ||
        int_field(j, "gpus", 1, FG_MAX_JOB_GPUS, &gpus) < 0 || (gpus > 8 && gpus % 8) ||
        int_field(j, "time_limit_s", 1, FG_TIME_MAX_S, &limit) < 0 ||
        int_field(j, "submit_time", 0, INT64_MAX / 4, &submit) < 0)
        return fg_cli_errf(err, errlen, "a job of the list has a bad account, size or limit");
    memset(out, 0, sizeof *out);
    out->running = !strcmp(st, "RUNNING");
    if (out->running && int_field(j, "start_time", 0, INT64_MAX / 4, &start) < 0)
        return fg_cli_errf(err, errlen, "a running job of the list has no start_time");
    int a = account_index(snap, acct);
    out->account = a >= 0 ? a : account_add(snap, acap, acct);
    out->gpus = (int32_t)gpus;
    out->submit = submit;
    int64_t ran = out->running && now > start ? now - start : 0;
    out->limit_s = limit - ran < 1 ? 1 : limit - ran;
    out->run_s = out->limit_s;
    if (model) {
        fg_rt_pred_t pred;
        fg_rt_predict(model, acct, json_string_value(json_object_get(j, "user")), limit,
                      ran < limit ? ran : limit - 1, &pred);
        out->run_s = pred.p50 < 1 ? 1 : pred.p50 > out->limit_s ? out->limit_s : pred.p50;
    }
    return 0;
}

/* The run-time model of the ended jobs (completed, failed, timed out; newest first):
 * each one's run time (its GPU-seconds over its GPUs: every attempt) against its
 * limit. */
static fg_rt_model_t *history_model(json_t *ended)
{
    fg_rt_model_t *m = fg_rt_new();
    for (size_t i = json_array_size(ended); i-- > 0;) { /* oldest first: the newest stay */
        json_t *j = json_array_get(ended, i);
        int64_t gpus, limit, gs;
        if (int_field(j, "gpus", 1, FG_MAX_JOB_GPUS, &gpus) < 0 ||
            int_field(j, "time_limit_s", 1, FG_TIME_MAX_S, &limit) < 0 ||
            int_field(j, "gpu_seconds", 0, INT64_MAX / 4, &gs) < 0 || gs / gpus < 1)
            continue; /* a job that did not run says nothing about run times */
        fg_rt_record(m, json_string_value(json_object_get(j, "account")),
                     json_string_value(json_object_get(j, "user")), limit, gs / gpus);
    }
    return m;
}

int cli_whatif_snapshot(json_t *fairshare, json_t *nodes, json_t *jobs, json_t *ended, int64_t now,
                        fg_whatif_snapshot_t *snap, char *err, size_t errlen)
{
    memset(snap, 0, sizeof *snap);
    size_t acap = 0, jcap = 0, i;
    json_t *j;
    if (read_accounts(fairshare, snap, &acap, err, errlen) < 0 ||
        read_nodes(nodes, snap, err, errlen) < 0 || !json_is_array(jobs)) {
        if (!json_is_array(jobs))
            fg_cli_errf(err, errlen, "the job list is not an array");
        cli_whatif_snapshot_free(snap);
        return -1;
    }
    fg_rt_model_t *model = json_is_array(ended) ? history_model(ended) : NULL;
    json_array_foreach(jobs, i, j)
    {
        fg_whatif_job_t wj;
        int r = read_job(j, snap, &acap, now, model, &wj, err, errlen);
        if (r < 0) {
            fg_rt_free(model);
            cli_whatif_snapshot_free(snap);
            return -1;
        }
        if (r > 0)
            continue;
        snap->jobs = fg_xgrow(snap->jobs, &jcap, snap->njobs + 1, sizeof *snap->jobs);
        snap->jobs[snap->njobs++] = wj;
    }
    fg_rt_free(model);
    size_t na = snap->naccounts ? snap->naccounts : 1;
    snap->live.weights = fg_xmalloc(na * sizeof *snap->live.weights);
    snap->live.quotas = fg_xmalloc(na * sizeof *snap->live.quotas);
    for (size_t a = 0; a < snap->naccounts; a++) {
        snap->live.weights[a] = snap->accounts[a].weight;
        snap->live.quotas[a] = snap->accounts[a].quota;
    }
    return 0;
}

void cli_whatif_snapshot_free(fg_whatif_snapshot_t *snap)
{
    free(snap->accounts);
    free(snap->jobs);
    fg_whatif_settings_free(&snap->live);
    memset(snap, 0, sizeof *snap);
}

/* ------------------------------------------------------------------ changes */

/* "NAME:VALUE" of a weight or quota change: the account index and the value text. */
static int account_value(const fg_whatif_snapshot_t *snap, const char *v, int *a, const char **val,
                         char *err, size_t errlen)
{
    const char *colon = strrchr(v, ':');
    if (!colon || colon == v || !colon[1])
        return fg_cli_errf(err, errlen, "'%s': want ACCOUNT:VALUE", v);
    char name[FG_NAME_MAX + 1];
    size_t n = (size_t)(colon - v);
    if (n > FG_NAME_MAX)
        return fg_cli_errf(err, errlen, "'%s': account name too long", v);
    memcpy(name, v, n);
    name[n] = '\0';
    if ((*a = account_index(snap, name)) < 0)
        return fg_cli_errf(err, errlen, "no account '%s' in the snapshot", name);
    *val = colon + 1;
    return 0;
}

/* A whole decimal number in [lo, hi]. */
static int parse_count(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* The group the node-count changes resize: the one with the most GPUs in all. */
static size_t largest_group(const fg_whatif_settings_t *set)
{
    size_t best = 0;
    for (size_t k = 1; k < set->ngroups; k++)
        if ((int64_t)set->groups[k].count * set->groups[k].gpus >
            (int64_t)set->groups[best].count * set->groups[best].gpus)
            best = k;
    return best;
}

/* Resizes the largest group by delta nodes (the total stays >= 1). */
static int add_nodes(fg_whatif_settings_t *set, long long delta, char *err, size_t errlen)
{
    size_t g = largest_group(set);
    long long total = 0;
    for (size_t k = 0; k < set->ngroups; k++)
        total += set->groups[k].count;
    if (set->groups[g].count + delta < 0 || total + delta < 1)
        return fg_cli_errf(err, errlen, "the cluster would have no nodes left");
    set->groups[g].count += (int32_t)delta;
    return 0;
}

/* Applies "key=value" for the cluster's settings (policy, half-life, quantum, nodes). */
static int cluster_change(fg_whatif_settings_t *set, const char *key, const char *v, char *err,
                          size_t errlen)
{
    long long n;
    if (!strcmp(key, "policy")) {
        int p = fg_policy_parse(v);
        if (p < 0)
            return fg_cli_errf(err, errlen, "unknown policy '%s'", v);
        set->cfg.policy = (fg_policy_t)p;
    } else if (!strcmp(key, "half-life") || !strcmp(key, "quantum")) {
        char why[128];
        if (fg_parse_time(v, &n, why, sizeof why) < 0)
            return fg_cli_errf(err, errlen, "--%s: %s", key, why);
        if (key[0] == 'h')
            set->cfg.half_life_s = n;
        else
            set->cfg.quantum_s = n;
    } else if (!strcmp(key, "nodes") || !strcmp(key, "add-nodes")) {
        int add = key[0] == 'a';
        if (parse_count(v, add ? -100000 : 1, 100000, &n) < 0)
            return fg_cli_errf(err, errlen, "--%s: '%s' is not a node count", key, v);
        long long total = 0;
        for (size_t k = 0; k < set->ngroups; k++)
            total += set->groups[k].count;
        return add_nodes(set, add ? n : n - total, err, errlen);
    } else {
        return fg_cli_errf(err, errlen, "unknown change '%s'", key);
    }
    return 0;
}

int cli_whatif_change(const fg_whatif_snapshot_t *snap, fg_whatif_settings_t *set,
                      const char *change, char *err, size_t errlen)
{
    const char *eq = strchr(change, '=');
    if (!eq || eq == change || !eq[1] || (size_t)(eq - change) >= 16)
        return fg_cli_errf(err, errlen, "'%s': want KEY=VALUE", change);
    char key[16];
    memcpy(key, change, (size_t)(eq - change));
    key[eq - change] = '\0';
    const char *v = eq + 1, *val = NULL;
    int a = -1;
    if (strcmp(key, "weight") && strcmp(key, "quota")) {
        fg_whatif_settings_t tmp;
        fg_whatif_settings_copy(set, snap->naccounts, &tmp);
        if (cluster_change(&tmp, key, v, err, errlen) < 0) {
            fg_whatif_settings_free(&tmp);
            return -1;
        }
        const char *msg = NULL;
        if (fg_config_check(&tmp.cfg, &msg) != FG_OK) {
            fg_whatif_settings_free(&tmp);
            return fg_cli_errf(err, errlen, "--%s: %s", key, msg ? msg : "bad value");
        }
        fg_whatif_settings_free(set);
        *set = tmp;
        return 0;
    }
    if (account_value(snap, v, &a, &val, err, errlen) < 0)
        return -1;
    if (!strcmp(key, "weight")) {
        char *end;
        errno = 0;
        double w = strtod(val, &end);
        if (errno || end == val || *end || !(w >= 1e-6) || !(w <= 1e9))
            return fg_cli_errf(err, errlen, "--weight: '%s' is not a weight in [1e-6, 1e9]", val);
        set->weights[a] = w;
        return 0;
    }
    long long q = -1;
    if (strcmp(val, "none") && parse_count(val, 0, 1000000, &q) < 0)
        return fg_cli_errf(err, errlen, "--quota: '%s' is not a GPU count or none", val);
    set->quotas[a] = (int32_t)q;
    return 0;
}
