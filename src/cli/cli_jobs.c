/*
 * cli_jobs.c - the job commands: jobs (the queue as a table, page by page), show (one
 * job, with why it waits and when it should start) and cancel.
 *
 * Example: `fairgpu jobs --state pending --mine` asks GET /v1/me for the user name, then
 * GET /v1/jobs?state=PENDING&user=alice, and prints one row per job; WHERE holds the
 * reason code of a pending job ("QUOTA", "RESOURCES"...), else its node(s) and exit
 * code. Without --all only the first page is shown, with a hint on stderr.
 */
#include "cli/cli.h"
#include "cli/timespec.h"

#include "common/xalloc.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ jobs -- */

static const char JOBS_HELP[] =
    "usage: fairgpu jobs [--state S] [--user U] [--account A] [--model M] [--dataset D]\n"
    "                    [--mine] [--limit N] [--all] [--json]\n"
    "Lists jobs (the queue is public; others' commands are not shown). --all follows\n"
    "every page. STATE '*' means a cancel was requested; AGE is time since submission;\n"
    "TIME is elapsed/limit for running jobs; WHERE is the reason code of pending jobs,\n"
    "else the node(s) and exit code.\n";

typedef struct {
    const char *user, *account, *model, *dataset; /* filters, NULL when not given */
    char state[64];                               /* upper case; "" when not given */
    long long limit;                              /* 0: the server's page size */
    int all, json, mine;
} jobs_opts_t;

/* --state S, upper-cased, into o->state. Returns -1 to go on, else 2 after a message. */
static int jobs_state(jobs_opts_t *o, const char *s)
{
    if (strlen(s) >= sizeof o->state)
        return cli_usage("jobs", "--state: too long");
    for (size_t k = 0; s[k]; k++)
        o->state[k] = (char)((s[k] >= 'a' && s[k] <= 'z') ? s[k] - 32 : s[k]);
    o->state[strlen(s)] = '\0';
    return -1;
}

/* Takes jobs' option c (argument optarg) into o. Returns -1 to go on, else the exit
 * status (help, or a usage error). */
static int jobs_option(int c, jobs_opts_t *o)
{
    switch (c) {
    case 's':
        return jobs_state(o, optarg);
    case 'u':
        o->user = optarg;
        return -1;
    case 'a':
        o->account = optarg;
        return -1;
    case 'm':
        o->model = optarg;
        return -1;
    case 'd':
        o->dataset = optarg;
        return -1;
    case 'n':
        return cli_parse_ll("jobs", "--limit", optarg, 1, 1000, &o->limit) < 0 ? 2 : -1;
    case 'A':
        o->all = 1;
        return -1;
    case 'M':
        o->mine = 1;
        return -1;
    case 'j':
        o->json = 1;
        return -1;
    case 'h':
        fputs(JOBS_HELP, stdout);
        return 0;
    default:
        return cli_usage("jobs", "bad option");
    }
}

/* Parses jobs' options into o. Returns -1 to go on, else the exit status. */
static int jobs_options(int argc, char **argv, jobs_opts_t *o)
{
    static const struct option lo[] = {{"state", required_argument, 0, 's'},
                                       {"user", required_argument, 0, 'u'},
                                       {"account", required_argument, 0, 'a'},
                                       {"model", required_argument, 0, 'm'},
                                       {"dataset", required_argument, 0, 'd'},
                                       {"limit", required_argument, 0, 'n'},
                                       {"all", no_argument, 0, 'A'},
                                       {"json", no_argument, 0, 'j'},
                                       {"mine", no_argument, 0, 'M'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    int c, r;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, "hs:u:n:", lo, NULL)) != -1)
        if ((r = jobs_option(c, o)) >= 0)
            return r;
    if (optind < argc)
        return cli_usage("jobs", "unexpected argument '%s'", argv[optind]);
    return -1;
}

/* --mine: the logged-in user's name into me (n bytes), as the --user filter. Returns 0
 * or the exit status. */
static int jobs_mine(cli_ctx_t *x, jobs_opts_t *o, char *me, size_t n)
{
    if (o->user)
        return cli_usage("jobs", "--mine and --user exclude each other");
    json_t *res;
    int rc = cli_call(x, "GET", "/v1/me", NULL, NULL, &res);
    if (rc)
        return rc;
    cli_jfmt(res, "username", me, n);
    json_decref(res);
    o->user = me;
    return 0;
}

/* "/v1/jobs" with the filters of o as its query, into base. */
static void jobs_query(const jobs_opts_t *o, char *base, size_t n)
{
    snprintf(base, n, "/v1/jobs");
    cli_query_add(base, n, "state", o->state[0] ? o->state : NULL);
    cli_query_add(base, n, "user", o->user);
    cli_query_add(base, n, "account", o->account);
    cli_query_add(base, n, "model", o->model);
    cli_query_add(base, n, "dataset", o->dataset);
    if (o->limit) {
        char l[32];
        snprintf(l, sizeof l, "%lld", o->limit);
        cli_query_add(base, n, "limit", l);
    }
}

/* Appends the page of the list at base from cursor (NULL: the first) to merged; *next
 * is the next page's cursor (malloc'd) or NULL. Returns the exit status. */
static int jobs_page(cli_ctx_t *x, const char *base, const char *cursor, json_t *merged,
                     char **next)
{
    char path[4096];
    snprintf(path, sizeof path, "%s", base);
    cli_query_add(path, sizeof path, "cursor", cursor);
    json_t *res;
    int rc = cli_call(x, "GET", path, NULL, NULL, &res);
    if (rc)
        return rc;
    json_t *items = cli_items_of(res);
    if (!items) {
        fprintf(stderr, "fairgpu: the server's job list has no items\n");
        json_decref(res);
        return 1;
    }
    json_array_extend(merged, items);
    const char *nc = cli_jstr(res, "next_cursor");
    *next = nc && *nc ? fg_xstrdup(nc) : NULL;
    json_decref(res);
    return 0;
}

int cli_jobs_fetch(cli_ctx_t *x, const char *base, int all, json_t *merged, char **cursor,
                   int *more)
{
    for (int pages = 1;; pages++) {
        char *next = NULL;
        int rc = jobs_page(x, base, *cursor, merged, &next);
        if (rc)
            return rc;
        free(*cursor);
        *cursor = next;
        if (pages > 100000) {
            fprintf(stderr, "fairgpu: the server keeps returning cursors; stopping\n");
            return 1;
        }
        if (!*cursor)
            return 0;
        if (!all) {
            *more = 1;
            return 0;
        }
    }
}

/* The GPUS cell: "2", or "2:h100" with a type. */
static void job_gpus(json_t *j, char *gpus, size_t n)
{
    cli_jfmt(j, "gpus", gpus, n);
    const char *gt = cli_jstr(j, "gpu_type");
    if (gt && *gt) {
        size_t l = strlen(gpus);
        snprintf(gpus + l, n - l, ":%s", gt);
    }
}

/* The TIME cell of a job in state st: elapsed / limit for running jobs, the limit
 * otherwise. */
static void job_time(json_t *j, const char *st, char *tm, size_t n)
{
    long long lim = -1, start = cli_since(j, "start_time");
    cli_jint(j, "time_limit_s", &lim);
    char a[24], b[24];
    fg_format_duration(lim > 0 ? lim : -1, b, sizeof b);
    if (!strcmp(st, "RUNNING") && start >= 0)
        snprintf(tm, n, "%s/%s", fg_format_duration(start, a, sizeof a), b);
    else
        snprintf(tm, n, "%s", b);
}

/* The nodes of a job, comma-separated, into where. */
static void job_nodes(json_t *j, char *where, size_t n)
{
    json_t *nodes = json_object_get(j, "nodes");
    if (!json_is_array(nodes) || json_array_size(nodes) <= 1) {
        cli_jfmt(j, "node", where, n);
        return;
    }
    size_t l = 0, k;
    json_t *v;
    where[0] = '\0';
    json_array_foreach(nodes, k, v)
    {
        if (json_is_string(v) && l < n)
            l += (size_t)snprintf(where + l, n - l, "%s%s", k ? "," : "", json_string_value(v));
    }
}

/* The WHERE cell of a job in state st: the reason code of a pending job, the node(s)
 * of one that runs or ran, with the exit code of an ended one. */
static void job_where(json_t *j, const char *st, char *where, size_t n)
{
    where[0] = '\0';
    if (!strcmp(st, "PENDING")) {
        cli_jfmt(j, "reason_code", where, n);
        return;
    }
    if (strcmp(st, "RUNNING") && !cli_is_terminal_state(st))
        return;
    job_nodes(j, where, n);
    long long ec;
    if (cli_is_terminal_state(st) && cli_jint(j, "exit_code", &ec)) {
        size_t l = strlen(where);
        if (l < n)
            snprintf(where + l, n - l, "%sexit %lld", l ? " " : "", ec);
    }
    long long since = json_is_true(json_object_get(j, "idle")) ? cli_since(j, "idle_since") : -1;
    if (since >= 0) { /* its GPUs idle: the badge (docs/idle.md) */
        char d[24];
        size_t l = strlen(where);
        if (l < n)
            snprintf(where + l, n - l, "%s[idle %s]", l ? " " : "",
                     fg_format_duration(since, d, sizeof d));
    }
}

/* One job's row of the jobs table. */
static void job_row(fg_table_t *t, json_t *j)
{
    char id[64], name[160], user[80], acct[80], st[32], gpus[48], prio[16], age[32], tm[48],
        where[200];
    cli_jfmt(j, "id", id, sizeof id);
    cli_jfmt(j, "name", name, sizeof name);
    cli_jfmt(j, "user", user, sizeof user);
    cli_jfmt(j, "account", acct, sizeof acct);
    cli_jfmt(j, "state", st, sizeof st);
    cli_jfmt(j, "priority", prio, sizeof prio);
    job_gpus(j, gpus, sizeof gpus);
    fg_format_duration(cli_since(j, "submit_time"), age, sizeof age);
    job_time(j, st, tm, sizeof tm);
    job_where(j, st, where, sizeof where);
    if (json_is_true(json_object_get(j, "cancel_requested")) && !cli_is_terminal_state(st)) {
        size_t l = strlen(st);
        snprintf(st + l, sizeof st - l, "*");
    }
    fg_table_row(t, id, name, user, acct, st, gpus, prio, age, tm, where);
}

/* Prints the jobs fetched: JSON (with the next cursor unless all), or a table. */
static void jobs_print(const jobs_opts_t *o, json_t *merged, const char *cursor, int more)
{
    if (o->json) {
        json_t *out =
            json_pack("{s:O, s:s?}", "items", merged, "next_cursor", o->all ? NULL : cursor);
        if (!json_object_get(out, "next_cursor"))
            json_object_set_new(out, "next_cursor", json_null());
        cli_print_json(out);
        json_decref(out);
        return;
    }
    fg_table_t t;
    fg_table_init(&t, 10, "ID", "NAME", "USER", "ACCOUNT", "STATE", "GPUS", "PRIO", "AGE", "TIME",
                  "WHERE");
    size_t k;
    json_t *j;
    json_array_foreach(merged, k, j) job_row(&t, j);
    fg_table_print(&t, stdout);
    fg_table_free(&t);
    if (more)
        fprintf(stderr, "(more jobs: use --all, or --limit N)\n");
}

int cli_cmd_jobs(int argc, char **argv)
{
    jobs_opts_t o = {0};
    int rc = jobs_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    cli_ctx_t x;
    if ((rc = cli_open(&x, 1)))
        return rc;
    char me[160] = "";
    if (o.mine && (rc = jobs_mine(&x, &o, me, sizeof me))) {
        cli_close(&x);
        return rc;
    }
    char base[2048];
    jobs_query(&o, base, sizeof base);
    json_t *merged = json_array();
    char *cursor = NULL;
    int more = 0;
    rc = cli_jobs_fetch(&x, base, o.all, merged, &cursor, &more);
    if (!rc)
        jobs_print(&o, merged, cursor, more);
    free(cursor);
    json_decref(merged);
    cli_close(&x);
    return rc;
}

/* ------------------------------------------------------------------ show -- */

/* A "key: value" line of show, when the value is not empty. */
static void kv(const char *k, const char *v)
{
    if (v && *v)
        printf("%-16s %s\n", k, v);
}

/* show's lines on the job's state: the state, why it waits, when it should start. */
static void show_state(json_t *j, const char *st)
{
    char b[512];
    snprintf(b, sizeof b, "%s%s", st ? st : "?",
             json_is_true(json_object_get(j, "cancel_requested")) && !cli_is_terminal_state(st)
                 ? " (cancel requested)"
                 : "");
    kv("state:", b);
    const char *rc = cli_jstr(j, "reason_code"), *reason = cli_jstr(j, "reason");
    if ((rc && *rc) || (reason && *reason)) {
        snprintf(b, sizeof b, "%s%s%s", rc ? rc : "", rc && reason ? ": " : "",
                 reason ? reason : "");
        kv("reason:", b);
    }
    cli_show_estimate(j, st, kv); /* the range, its source; once started, the error */
}

/* show's lines on what the job asked for: GPUs, priority, model, data, time limit. */
static void show_request(json_t *j)
{
    char b[512], b2[128];
    cli_jfmt(j, "gpus", b, sizeof b);
    const char *gt = cli_jstr(j, "gpu_type");
    if (gt && *gt) {
        size_t l = strlen(b);
        snprintf(b + l, sizeof b - l, " x %s", gt);
    }
    kv("gpus:", b);
    kv("priority:", cli_jfmt(j, "priority", b, sizeof b));
    kv("model:", cli_jfmt(j, "model", b, sizeof b));
    kv("dataset:", cli_jfmt(j, "dataset", b, sizeof b));
    long long lim;
    if (cli_jint(j, "time_limit_s", &lim) && lim > 0) {
        snprintf(b, sizeof b, "%s (%llds)", fg_format_duration(lim, b2, sizeof b2), lim);
        kv("time limit:", b);
    }
}

/* A JSON array member as compact JSON under the key k (nothing when empty). */
static void kv_array(const char *k, json_t *j, const char *member)
{
    json_t *a = json_object_get(j, member);
    if (json_is_array(a) && json_array_size(a)) {
        char *s = json_dumps(a, JSON_COMPACT);
        kv(k, s);
        free(s);
    }
}

/* show's lines on the job's run: times, exit code, attempts, nodes and GPUs. */
static void show_run(json_t *j, const char *st)
{
    char b[512];
    kv("submitted:", cli_jtime(j, "submit_time", b, sizeof b));
    kv("started:", cli_jtime(j, "start_time", b, sizeof b));
    kv("ended:", cli_jtime(j, "end_time", b, sizeof b));
    if (cli_is_terminal_state(st))
        kv("exit code:", cli_jfmt(j, "exit_code", b, sizeof b));
    long long at, mr;
    if (cli_jint(j, "attempts", &at)) {
        if (!cli_jint(j, "max_retries", &mr))
            mr = 0;
        snprintf(b, sizeof b, "%lld (max retries %lld)", at, mr);
        kv("attempts:", b);
    }
    json_t *nodes = json_object_get(j, "nodes");
    if (json_is_array(nodes) && json_array_size(nodes))
        kv_array("nodes:", j, "nodes");
    else
        kv("node:", cli_jfmt(j, "node", b, sizeof b));
    kv_array("gpu indices:", j, "gpu_indices");
}

/* show's lines on the job's GPU use: utilization and memory now, idleness. */
static void show_gpu_use(json_t *j)
{
    char b[512], b2[128], b3[64];
    long long u, m, idle_s;
    if (cli_jint(j, "gpu_util_pct", &u)) {
        if (cli_jint(j, "gpu_mem_used_mb", &m))
            snprintf(b, sizeof b, "%lld %% (mean over its GPUs), %lld MiB in use", u, m);
        else
            snprintf(b, sizeof b, "%lld %% (mean over its GPUs)", u);
        kv("gpu util:", b);
    }
    long long since = cli_since(j, "idle_since");
    if (json_is_true(json_object_get(j, "idle")) && since >= 0) {
        snprintf(b, sizeof b, "idle %s, since %s", fg_format_duration(since, b3, sizeof b3),
                 cli_jtime(j, "idle_since", b2, sizeof b2));
        kv("idle:", b);
    }
    if (cli_jint(j, "idle_gpu_s", &idle_s) && idle_s > 0) {
        snprintf(b, sizeof b, "%lld", idle_s);
        kv("idle gpu secs:", b);
    }
}

/* show's last lines: GPU seconds, cost, the command (cut at 400 bytes), the env. */
static void show_cost_command(json_t *j)
{
    char b[512];
    show_gpu_use(j);
    kv("gpu seconds:", cli_jfmt(j, "gpu_seconds", b, sizeof b));
    long long cost;
    if (cli_jint(j, "cost_micros", &cost)) {
        snprintf(b, sizeof b, "%lld.%06lld", cost / 1000000, (cost < 0 ? -cost : cost) % 1000000);
        kv("cost:", b);
    }
    json_t *cmd = json_object_get(j, "command");
    if (cmd) {
        char *s = json_is_string(cmd) ? fg_xstrdup(json_string_value(cmd))
                                      : json_dumps(cmd, JSON_COMPACT);
        if (s && strlen(s) > 400)
            memcpy(s + 397, "...", 4);
        kv("command:", s);
        free(s);
    }
    json_t *env = json_object_get(j, "env");
    if (json_is_object(env) && json_object_size(env)) {
        const char *k;
        json_t *v;
        int first = 1;
        json_object_foreach(env, k, v)
        {
            snprintf(b, sizeof b, "%s=%s", k, json_is_string(v) ? json_string_value(v) : "?");
            kv(first ? "env:" : "", b);
            first = 0;
        }
    }
}

/* One job, a "key: value" line per known member. */
static void show_job(json_t *j)
{
    char b[512];
    kv("id:", cli_jfmt(j, "id", b, sizeof b));
    kv("name:", cli_jfmt(j, "name", b, sizeof b));
    kv("user:", cli_jfmt(j, "user", b, sizeof b));
    kv("account:", cli_jfmt(j, "account", b, sizeof b));
    const char *st = cli_jstr(j, "state");
    show_state(j, st);
    show_request(j);
    show_run(j, st);
    show_cost_command(j);
}

int cli_cmd_show(int argc, char **argv)
{
    int json = 0;
    int r = cli_json_flag("show", argc, argv, &json,
                          "usage: fairgpu show JOB [--json]\nShows one job, with the reason it "
                          "waits and its estimated start.\n");
    if (r >= 0)
        return r;
    if (argc - optind != 1)
        return cli_usage("show", "give one job id");
    char path[1024];
    return cli_get_print(cli_path(path, sizeof path, "/v1/jobs/", argv[optind], NULL), json,
                         show_job);
}

/* ---------------------------------------------------------------- cancel -- */

/* Says what became of the cancelled job id (the server's reply res). */
static void cancelled(json_t *res, const char *id, int json)
{
    const char *st = cli_jstr(res, "state");
    if (json)
        cli_print_json(res);
    else if (st && !strcmp(st, "CANCELLED"))
        printf("Cancelled job %s\n", id);
    else
        printf("Cancel requested for job %s (%s until its processes end)\n", id,
               st ? st : "running");
}

int cli_cmd_cancel(int argc, char **argv)
{
    int json = 0;
    int r = cli_json_flag("cancel", argc, argv, &json,
                          "usage: fairgpu cancel JOB... [--json]\nCancels jobs. A running job "
                          "stays RUNNING (cancel requested) until its processes are dead.\n");
    if (r >= 0)
        return r;
    if (optind >= argc)
        return cli_usage("cancel", "give at least one job id");
    cli_ctx_t x;
    int rc = cli_open(&x, 1);
    if (rc)
        return rc;
    for (int k = optind; k < argc; k++) {
        char path[1024];
        json_t *res;
        cli_path(path, sizeof path, "/v1/jobs/", argv[k], "/cancel");
        if (cli_call(&x, "POST", path, NULL, NULL, &res)) {
            fprintf(stderr, "fairgpu: job %s not cancelled\n", argv[k]);
            rc = 1;
            continue;
        }
        cancelled(res, argv[k], json);
        json_decref(res);
    }
    cli_close(&x);
    return rc;
}
