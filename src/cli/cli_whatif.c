/*
 * cli_whatif.c - `fairgpu whatif` (admins): the live queue replayed through the
 * simulator under changed settings, compared per account with the live settings.
 *
 * It reads the cluster through the API alone (GET /v1/fairshare for the accounts, their
 * weights, quotas and decayed usage and the live policy; /v1/nodes; the running and
 * pending jobs of /v1/jobs and, for --runtime history, the ended ones), builds a
 * snapshot (whatif_snap.c) and replays it twice (src/sim/whatif.c): under the live
 * settings and under the changes asked for. The table shows, per account, the mean
 * wait and completion time of its pending jobs and its share of the GPU time under
 * both, and the change.
 *
 * Example: `fairgpu whatif --policy fifo --weight cv=3` prints
 *
 *   what-if on 4 running and 30 pending jobs, 2 nodes (16 GPUs); run times: time limits
 *   changes: policy=fifo weight=cv:3
 *   ACCOUNT  PENDING  WAIT LIVE  WAIT WHAT-IF  CHANGE  JCT LIVE  JCT WHAT-IF  ...
 *   cv       12       1h05m      22m           -66%    2h10m     1h27m        ...
 */
#include "cli/cli.h"
#include "cli/timespec.h"
#include "cli/whatif_snap.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char WHATIF_HELP[] =
    "usage: fairgpu whatif [--policy P] [--half-life DUR] [--quantum DUR]\n"
    "                      [--weight ACCOUNT=W]... [--quota ACCOUNT=N|none]...\n"
    "                      [--nodes N | --add-nodes N] [--runtime limit|history] [--json]\n"
    "Replays the running and pending jobs through the simulator under the live\n"
    "settings and under the changed ones, and prints per account the mean wait and\n"
    "completion time of its pending jobs and its GPU share under both (admins only).\n"
    "Run times: each job's time limit (what is left of it), or with --runtime history\n"
    "what its user's ended jobs predict. No new job arrives in the replay: it shows how\n"
    "today's queue drains. --nodes and --add-nodes resize the largest group of nodes.\n";

#define MAX_CHANGES 64

typedef struct whatif_opts {
    char *changes[MAX_CHANGES]; /* "key=value", allocated */
    int nchanges;
    int history;
    int json;
} whatif_opts_t;

static void opts_free(whatif_opts_t *o)
{
    for (int k = 0; k < o->nchanges; k++)
        free(o->changes[k]);
}

/* Records "key=value" (the account's "=" of --weight/--quota becomes ':'). */
static int add_change(whatif_opts_t *o, const char *key, const char *v)
{
    if (o->nchanges >= MAX_CHANGES)
        return cli_usage("whatif", "at most %d changes", MAX_CHANGES);
    size_t n = strlen(key) + strlen(v) + 2;
    char *c = malloc(n);
    if (!c)
        return cli_usage("whatif", "out of memory");
    snprintf(c, n, "%s=%s", key, v);
    if (!strcmp(key, "weight") || !strcmp(key, "quota")) {
        char *eq = strrchr(c + strlen(key) + 1, '=');
        if (!eq)
            return free(c), cli_usage("whatif", "--%s wants ACCOUNT=VALUE", key);
        *eq = ':';
    }
    o->changes[o->nchanges++] = c;
    return -1;
}

/* Parses argv into *o; returns -1 to go on, or the exit status. */
static int parse(int argc, char **argv, whatif_opts_t *o)
{
    static const struct option longs[] = {
        {"policy", required_argument, 0, 'p'},
        {"half-life", required_argument, 0, 'h'},
        {"quantum", required_argument, 0, 'q'},
        {"weight", required_argument, 0, 'w'},
        {"quota", required_argument, 0, 'Q'},
        {"nodes", required_argument, 0, 'n'},
        {"add-nodes", required_argument, 0, 'a'},
        {"runtime", required_argument, 0, 'r'},
        {"json", no_argument, 0, 'j'},
        {"help", no_argument, 0, 'H'},
        {0, 0, 0, 0},
    };
    memset(o, 0, sizeof *o);
    cli_getopt_reset();
    int c, r;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        for (size_t k = 0; longs[k].name; k++)
            if (longs[k].val == c && c != 'j' && c != 'H' && c != 'r' &&
                (r = add_change(o, longs[k].name, optarg)) >= 0)
                return r;
        if (c == 'j')
            o->json = 1;
        else if (c == 'H')
            return fputs(WHATIF_HELP, stdout), 0;
        else if (c == 'r' && (!strcmp(optarg, "limit") || !strcmp(optarg, "history")))
            o->history = !strcmp(optarg, "history");
        else if (c == 'r')
            return cli_usage("whatif", "--runtime is limit or history, not '%s'", optarg);
        else if (c == '?')
            return cli_usage("whatif", "unknown option");
    }
    if (optind < argc)
        return cli_usage("whatif", "unexpected argument '%s'", argv[optind]);
    return -1;
}

/* The replies the snapshot is built from. */
typedef struct replies {
    json_t *fairshare, *nodes, *jobs, *ended;
} replies_t;

static void replies_free(replies_t *r)
{
    json_decref(r->fairshare);
    json_decref(r->nodes);
    json_decref(r->jobs);
    json_decref(r->ended);
}

/* Fetches what the snapshot needs; the caller must be an admin. Returns the status. */
static int fetch(cli_ctx_t *x, int history, replies_t *r)
{
    json_t *me;
    int rc = cli_call(x, "GET", "/v1/me", NULL, NULL, &me);
    if (rc)
        return rc;
    const char *role = cli_jstr(me, "role");
    int admin = role && !strcmp(role, "admin");
    json_decref(me);
    if (!admin) {
        fprintf(stderr, "fairgpu whatif: admins only (the replay needs every user's jobs)\n");
        return 1;
    }
    if ((rc = cli_call(x, "GET", "/v1/fairshare", NULL, NULL, &r->fairshare)) ||
        (rc = cli_call(x, "GET", "/v1/nodes", NULL, NULL, &r->nodes)))
        return rc;
    char *cursor = NULL;
    int more = 0;
    r->jobs = json_array();
    rc = cli_jobs_fetch(x, "/v1/jobs?state=RUNNING,PENDING&limit=1000", 1, r->jobs, &cursor, &more);
    free(cursor);
    if (rc || !history)
        return rc;
    /* the newest ended jobs: enough history per user without reading every job */
    r->ended = json_array();
    cursor = NULL;
    rc = cli_jobs_fetch(x, "/v1/jobs?state=COMPLETED,FAILED,TIMEOUT&limit=1000&order=desc", 0,
                        r->ended, &cursor, &more);
    free(cursor);
    return rc;
}

/* ------------------------------------------------------------------ output */

/* "+12%" / "-66%" / "=" / "new" for a change from a to b. */
static const char *change_pct(double a, double b, char *buf, size_t n)
{
    if (a <= 0 && b <= 0)
        snprintf(buf, n, "=");
    else if (a <= 0)
        snprintf(buf, n, "new");
    else
        snprintf(buf, n, "%+.0f%%", (b - a) / a * 100.0);
    return buf;
}

static const char *dur(double s, char *buf, size_t n)
{
    return fg_format_duration((long long)(s + 0.5), buf, n);
}

/* One table row: name and both replays' figures of one account (or all). */
static void row(fg_table_t *t, const char *name, const fg_whatif_figures_t *a,
                const fg_whatif_figures_t *b)
{
    char pend[24], w1[24], w2[24], wc[16], j1[24], j2[24], jc[16], u1[16], u2[16];
    snprintf(pend, sizeof pend, "%lld", (long long)a->pending_jobs);
    snprintf(u1, sizeof u1, "%.0f%%", a->utilization * 100.0);
    snprintf(u2, sizeof u2, "%.0f%%", b->utilization * 100.0);
    fg_table_row(t, name, pend, dur(a->wait_avg_s, w1, sizeof w1),
                 dur(b->wait_avg_s, w2, sizeof w2),
                 change_pct(a->wait_avg_s, b->wait_avg_s, wc, sizeof wc),
                 dur(a->jct_avg_s, j1, sizeof j1), dur(b->jct_avg_s, j2, sizeof j2),
                 change_pct(a->jct_avg_s, b->jct_avg_s, jc, sizeof jc), u1, u2);
}

static void print_table(const fg_whatif_snapshot_t *snap, const whatif_opts_t *o,
                        const fg_whatif_result_t *live, const fg_whatif_result_t *what)
{
    size_t running = 0;
    for (size_t i = 0; i < snap->njobs; i++)
        running += snap->jobs[i].running;
    long long nodes = 0;
    for (size_t k = 0; k < snap->live.ngroups; k++)
        nodes += snap->live.groups[k].count;
    printf("what-if on %zu running and %zu pending jobs, %lld node%s (%lld GPUs); run times: %s\n",
           running, snap->njobs - running, nodes, nodes == 1 ? "" : "s", (long long)live->gpus,
           o->history ? "user history" : "time limits");
    printf("changes:");
    for (int k = 0; k < o->nchanges; k++)
        printf(" %s", o->changes[k]);
    printf("%s\n", o->nchanges ? "" : " none (both replays use the live settings)");
    fg_table_t t;
    fg_table_init(&t, 10, "ACCOUNT", "PENDING", "WAIT LIVE", "WAIT WHAT-IF", "CHANGE", "JCT LIVE",
                  "JCT WHAT-IF", "CHANGE", "GPU LIVE", "GPU WHAT-IF");
    for (size_t a = 0; a < snap->naccounts; a++)
        if (live->accounts[a].pending_jobs || live->accounts[a].gpu_s > 0)
            row(&t, snap->accounts[a].name, &live->accounts[a], &what->accounts[a]);
    row(&t, "(all)", &live->all, &what->all);
    fg_table_print(&t, stdout);
    fg_table_free(&t);
    char m1[24], m2[24];
    printf("queue drained in %s live, %s what-if; preemptions %lld -> %lld\n",
           dur((double)live->makespan_s, m1, sizeof m1),
           dur((double)what->makespan_s, m2, sizeof m2), (long long)live->preemptions,
           (long long)what->preemptions);
    if (what->all.skipped_jobs > live->all.skipped_jobs)
        printf("note: %lld jobs could never start under the changes (size or quota)\n",
               (long long)(what->all.skipped_jobs - live->all.skipped_jobs));
}

static json_t *figures_json(const fg_whatif_figures_t *f)
{
    return json_pack("{s:I,s:I,s:f,s:I,s:f,s:f,s:f}", "pending_jobs", (json_int_t)f->pending_jobs,
                     "skipped_jobs", (json_int_t)f->skipped_jobs, "wait_avg_s", f->wait_avg_s,
                     "wait_max_s", (json_int_t)f->wait_max_s, "jct_avg_s", f->jct_avg_s,
                     "gpu_seconds", f->gpu_s, "utilization", f->utilization);
}

static void print_json(const fg_whatif_snapshot_t *snap, const whatif_opts_t *o,
                       const fg_whatif_result_t *live, const fg_whatif_result_t *what)
{
    json_t *changes = json_array(), *accts = json_array();
    for (int k = 0; k < o->nchanges; k++)
        json_array_append_new(changes, json_string(o->changes[k]));
    for (size_t a = 0; a < snap->naccounts; a++)
        json_array_append_new(accts, json_pack("{s:s,s:o,s:o}", "account", snap->accounts[a].name,
                                               "live", figures_json(&live->accounts[a]), "whatif",
                                               figures_json(&what->accounts[a])));
    json_t *out =
        json_pack("{s:o,s:s,s:I,s:I,s:I,s:I,s:o,s:o,s:o}", "changes", changes, "runtime",
                  o->history ? "history" : "limit", "jobs", (json_int_t)snap->njobs, "gpus",
                  (json_int_t)live->gpus, "live_makespan_s", (json_int_t)live->makespan_s,
                  "whatif_makespan_s", (json_int_t)what->makespan_s, "accounts", accts, "live_all",
                  figures_json(&live->all), "whatif_all", figures_json(&what->all));
    cli_print_json(out);
    json_decref(out);
}

/* ------------------------------------------------------------------ the command */

/* Replays snap under the live and the changed settings and prints the comparison. */
static int compare(const fg_whatif_snapshot_t *snap, const whatif_opts_t *o)
{
    char err[512];
    fg_whatif_settings_t set;
    fg_whatif_settings_copy(&snap->live, snap->naccounts, &set);
    for (int k = 0; k < o->nchanges; k++)
        if (cli_whatif_change(snap, &set, o->changes[k], err, sizeof err) < 0) {
            fg_whatif_settings_free(&set);
            return cli_usage("whatif", "%s", err);
        }
    fg_whatif_result_t live, what;
    int rc = 1;
    if (fg_whatif_run(snap, &snap->live, &live, err, sizeof err) < 0) {
        fprintf(stderr, "fairgpu whatif: live replay: %s\n", err);
    } else {
        if (fg_whatif_run(snap, &set, &what, err, sizeof err) < 0) {
            fprintf(stderr, "fairgpu whatif: what-if replay: %s\n", err);
        } else {
            rc = 0;
            if (o->json)
                print_json(snap, o, &live, &what);
            else
                print_table(snap, o, &live, &what);
            fg_whatif_result_free(&what);
        }
        fg_whatif_result_free(&live);
    }
    fg_whatif_settings_free(&set);
    return rc;
}

int cli_cmd_whatif(int argc, char **argv)
{
    whatif_opts_t o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0) {
        opts_free(&o);
        return rc;
    }
    cli_ctx_t x;
    if ((rc = cli_open(&x, 1))) {
        opts_free(&o);
        return rc;
    }
    replies_t r = {0};
    rc = fetch(&x, o.history, &r);
    cli_close(&x);
    if (!rc) {
        fg_whatif_snapshot_t snap;
        char err[512];
        if (cli_whatif_snapshot(r.fairshare, r.nodes, r.jobs, r.ended, (int64_t)time(NULL), &snap,
                                err, sizeof err) < 0) {
            fprintf(stderr, "fairgpu whatif: %s\n", err);
            rc = 1;
        } else {
            rc = compare(&snap, &o);
            cli_whatif_snapshot_free(&snap);
        }
    }
    replies_free(&r);
    opts_free(&o);
    return rc;
}
