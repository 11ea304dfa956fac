/*
 * cli_cluster.c - the cluster commands: nodes (each node's GPUs, use and heartbeat),
 * share (fair share per account and user) and node-token (a node's credential, for
 * admins).
 *
 * Example: `fairgpu nodes` prints GET /v1/nodes as a table; a node with 8 GPUs of
 * which 3 hold a job, at 40 % and 60 % utilisation on the two that report it, reads
 * "GPUS(USED/ALL) 3/8, UTIL% 50".
 */
#include "cli/cli.h"
#include "cli/timespec.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A command with only --json and --help that prints GET path: JSON, or human(res). */
static int simple_get(const char *cmd, int argc, char **argv, const char *path, const char *help,
                      void (*human)(json_t *))
{
    int json = 0;
    int r = cli_json_flag(cmd, argc, argv, &json, help);
    if (r >= 0)
        return r;
    if (optind < argc)
        return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    return cli_get_print(path, json, human);
}

/* ----------------------------------------------------------------- nodes -- */

/* Does a node's GPU hold a job? */
static int gpu_used(json_t *gpu)
{
    json_t *jid = json_object_get(gpu, "job_id");
    return jid && !json_is_null(jid) && !(json_is_string(jid) && !*json_string_value(jid));
}

/* The GPU cells of node n: "used/all", the first GPU's type and the mean utilisation
 * of the GPUs that report one ("" when none does). */
static void node_gpus(json_t *n, char *gpus, size_t gn, char *type, size_t tn, char *util,
                      size_t un)
{
    size_t used = 0, all = 0, i;
    long long usum = 0, ucount = 0;
    json_t *gv;
    json_array_foreach(json_object_get(n, "gpus"), i, gv)
    {
        all++;
        used += (size_t)gpu_used(gv);
        if (!type[0])
            cli_jfmt(gv, "type", type, tn);
        long long u;
        if (cli_jint(gv, "util_pct", &u)) {
            usum += u;
            ucount++;
        }
    }
    snprintf(gpus, gn, "%zu/%zu", used, all);
    if (ucount)
        snprintf(util, un, "%lld", usum / ucount);
}

/* One node's row of the nodes table. */
static void node_row(fg_table_t *t, json_t *n)
{
    char name[128], st[32], gpus[32], type[64] = "", util[16] = "", cpus[32], mem[32], hb[32];
    cli_jfmt(n, "name", name, sizeof name);
    cli_jfmt(n, "state", st, sizeof st);
    node_gpus(n, gpus, sizeof gpus, type, sizeof type, util, sizeof util);
    cli_jfmt(n, "cpus", cpus, sizeof cpus);
    long long mb;
    if (cli_jint(n, "memory_mb", &mb))
        snprintf(mem, sizeof mem, "%lld GiB", mb / 1024);
    else
        mem[0] = '\0';
    long long age = cli_since(n, "last_heartbeat");
    if (age >= 0) {
        char d[24];
        snprintf(hb, sizeof hb, "%s ago", fg_format_duration(age, d, sizeof d));
    } else
        hb[0] = '\0';
    fg_table_row(t, name, st, gpus, type, util, cpus, mem, hb);
}

static void nodes_human(json_t *res)
{
    fg_table_t t;
    fg_table_init(&t, 8, "NAME", "STATE", "GPUS(USED/ALL)", "TYPE", "UTIL%", "CPUS", "MEMORY",
                  "HEARTBEAT");
    size_t k;
    json_t *n;
    json_array_foreach(cli_items_of(res), k, n) node_row(&t, n);
    fg_table_print(&t, stdout);
    fg_table_free(&t);
}

int cli_cmd_nodes(int argc, char **argv)
{
    return simple_get("nodes", argc, argv, "/v1/nodes",
                      "usage: fairgpu nodes [--json]\nLists the cluster's nodes and GPUs.\n",
                      nodes_human);
}

/* ----------------------------------------------------------------- share -- */

/* When a share entry's factor is back at 0.5 (recovers_in_s): "in 6.0 h", "now" (at or
 * under its share), "never" (null: nobody else has usage), "" when not given. */
static void recovers_words(json_t *r, char *b, size_t n)
{
    json_t *v = json_object_get(r, "recovers_in_s");
    b[0] = '\0';
    if (!v)
        return;
    if (!json_is_number(v)) {
        snprintf(b, n, "never");
        return;
    }
    double s = json_number_value(v);
    if (s <= 0)
        snprintf(b, n, "now");
    else if (s < 120)
        snprintf(b, n, "in %.0f s", s);
    else if (s < 7200)
        snprintf(b, n, "in %.0f min", s / 60);
    else if (s < 172800)
        snprintf(b, n, "in %.1f h", s / 3600);
    else
        snprintf(b, n, "in %.1f days", s / 86400);
}

/* The rows of the share entries in arr (accounts, or users with kind_hint "user"),
 * each followed by its users, indented, down to depth 2. */
static void share_rows(fg_table_t *t, json_t *arr, const char *kind_hint, int depth)
{
    size_t k;
    json_t *r;
    json_array_foreach(arr, k, r)
    {
        char name[160], kind[32], w[32], ns[32], use[48], run[32], pend[32], f[32], ent[32],
            rec[32];
        const char *nm = cli_jstr(r, "name");
        if (!nm)
            nm = cli_jstr(r, "user") ? cli_jstr(r, "user") : cli_jstr(r, "account");
        snprintf(name, sizeof name, "%s%s", depth ? "  " : "", nm ? nm : "?");
        if (!*cli_jfmt(r, "kind", kind, sizeof kind) && !*cli_jfmt(r, "type", kind, sizeof kind))
            snprintf(kind, sizeof kind, "%s", kind_hint);
        cli_jfmt(r, "weight", w, sizeof w);
        cli_jfmt(r, "normalized_share", ns, sizeof ns);
        json_t *u = json_object_get(r, "usage_gpu_seconds");
        if (json_is_number(u))
            snprintf(use, sizeof use, "%.1f", json_number_value(u) / 3600.0);
        else
            use[0] = '\0';
        cli_jfmt(r, "running_gpus", run, sizeof run);
        cli_jfmt(r, "pending_jobs", pend, sizeof pend);
        cli_jfmt(r, "fair_share_factor", f, sizeof f);
        json_t *e = json_object_get(r, "entitlement_gpus");
        if (json_is_number(e))
            snprintf(ent, sizeof ent, "%.1f", json_number_value(e));
        else
            ent[0] = '\0';
        recovers_words(r, rec, sizeof rec);
        fg_table_row(t, name, kind, w, ns, use, run, ent, pend, f, rec);
        json_t *users = json_object_get(r, "users");
        if (json_is_array(users) && depth < 2)
            share_rows(t, users, "user", depth + 1);
    }
}

static void share_human(json_t *res)
{
    fg_table_t t;
    fg_table_init(&t, 10, "NAME", "KIND", "WEIGHT", "SHARE", "USAGE(GPU-H)", "RUNNING", "ENTITLED",
                  "PENDING", "FACTOR", "RECOVERS");
    /* Accounts with their users nested when the server gives them; else a flat list. */
    json_t *a = json_object_get(res, "accounts");
    json_t *items = cli_items_of(res);
    if (json_is_array(a))
        share_rows(&t, a, "account", 0);
    else if (items)
        share_rows(&t, items, "", 0);
    else if (json_is_array(json_object_get(res, "users")))
        share_rows(&t, json_object_get(res, "users"), "user", 0);
    char pol[32], up[32], fr[32];
    if (*cli_jfmt(res, "policy", pol, sizeof pol) || *cli_jfmt(res, "gpus_up", up, sizeof up)) {
        cli_jfmt(res, "gpus_up", up, sizeof up);
        cli_jfmt(res, "gpus_free", fr, sizeof fr);
        printf("policy %s, %s GPUs up, %s free\n", *pol ? pol : "?", *up ? up : "?",
               *fr ? fr : "?");
    }
    fg_table_print(&t, stdout);
    fg_table_free(&t);
}

int cli_cmd_share(int argc, char **argv)
{
    return simple_get("share", argc, argv, "/v1/fairshare",
                      "usage: fairgpu share [--json]\nShows fair share per account and user: "
                      "weight, normalized share,\ndecayed usage (GPU hours), running GPUs, "
                      "entitled GPUs (share x GPUs up),\npending jobs, fair-share factor, and "
                      "when the factor recovers to 0.5 if it runs\nnothing more (RECOVERS).\n",
                      share_human);
}

/* ------------------------------------------------------------ node-token -- */

static const char NODE_TOKEN_HELP[] =
    "usage: fairgpu node-token create NODE [--json]\n"
    "       fairgpu node-token revoke NODE\n"
    "Node credentials (admins only). create issues NODE a new credential (replacing any\n"
    "old one) and shows it once: give it to that node's agent with --token-file. revoke\n"
    "refuses NODE's credential at once; the name cannot join again until create.\n";

/* node-token create and revoke: POST or DELETE /v1/nodes/NODE/credentials. */
static int node_token_call(const cli_op_t *op)
{
    int create = !strcmp(op->sub, "create");
    if (op->nargs != 1)
        return cli_usage("node-token", "%s takes one NODE", op->sub);
    const char *node = op->args[0];
    char path[512];
    json_t *res;
    int rc = cli_fetch(create ? "POST" : "DELETE",
                       cli_path(path, sizeof path, "/v1/nodes/", node, "/credentials"), NULL, &res);
    if (!rc && op->json)
        cli_print_json(res);
    else if (!rc && create)
        printf("Issued a credential for node %s. It is shown only now; put it in a file "
               "(mode 0600)\nand start that node's agent with --token-file FILE:\n%s\n",
               node, cli_jstr(res, "token") ? cli_jstr(res, "token") : "?");
    else if (!rc)
        printf("Revoked the credential of node %s\n", node);
    json_decref(res);
    return rc;
}

static const cli_sub_t NODE_TOKEN_SUBS[] = {{"create", node_token_call},
                                            {"revoke", node_token_call}};

int cli_cmd_node_token(int argc, char **argv)
{
    return cli_sub_json_run("node-token", argc, argv, NODE_TOKEN_HELP, NODE_TOKEN_SUBS,
                            sizeof NODE_TOKEN_SUBS / sizeof NODE_TOKEN_SUBS[0]);
}
