/*
 * cli_why.c - `fairgpu why JOB`: why a job waits, as a person would read it, from the
 * "why" object of GET /v1/jobs/{id} (docs/api.md, "Why a job waits"). --json prints
 * that object (or, for a job that is not pending, the job).
 *
 * Example:
 *   job 42 (8 GPUs) is waiting: 10 GPUs are free, but no node has 8 free (largest: 5 on
 *   sim-0).
 *     nodes that could hold it: sim-1 once job 17 ends (~12 min), sim-0 once job 16 ends
 *     its account ml: 62% of the recent usage against a share of 25% (factor 0.18);
 *     entitled to 4.0 GPUs, runs 6
 *     ahead of it: 3 jobs, 10 GPUs (job 40 account cv 4 GPUs: lower usage; ...)
 * A job that is not pending says its state (for a running one, since when).
 */
#include "cli/cli.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char WHY_HELP[] = "usage: fairgpu why JOB [--json]\n"
                               "Says why a pending job waits, with the numbers: fair share "
                               "against entitlement, the jobs\n"
                               "that go before it and why, the quota, budget, reservation or "
                               "backoff that holds it,\n"
                               "the GPUs of its type and the free GPUs per node.\n";

/* A duration in words: "45 s", "12 min", "3.5 h", "2.1 days". */
static void span(char *b, size_t n, long long s)
{
    if (s < 0)
        s = 0;
    if (s < 120)
        snprintf(b, n, "%lld s", s);
    else if (s < 7200)
        snprintf(b, n, "%lld min", (s + 30) / 60);
    else if (s < 172800)
        snprintf(b, n, "%.1f h", (double)s / 3600.0);
    else
        snprintf(b, n, "%.1f days", (double)s / 86400.0);
}

static double num(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : 0.0;
}

/* The words for a job ahead's "because". */
static const char *because_words(const char *b)
{
    if (!b)
        return "?";
    if (!strcmp(b, "class"))
        return "higher class";
    if (!strcmp(b, "las"))
        return "less service so far";
    if (!strcmp(b, "share"))
        return "lower usage";
    if (!strcmp(b, "submit"))
        return "earlier submit";
    if (!strcmp(b, "turn"))
        return "its user's turn";
    return b;
}

/* "  nodes that could hold it: ..." */
static void print_holders(json_t *frag)
{
    json_t *h = json_object_get(frag, "holders");
    if (!json_is_array(h) || !json_array_size(h))
        return;
    printf("  nodes that could hold it:");
    size_t k;
    json_t *v;
    json_array_foreach(h, k, v)
    {
        long long in = 0;
        cli_jint(v, "in_s", &in);
        const char *node = cli_jstr(v, "node"), *after = cli_jstr(v, "after_job");
        char d[32];
        span(d, sizeof d, in);
        if (after)
            printf("%s %s once job %s ends (~%s)", k ? "," : "", node ? node : "?", after, d);
        else
            printf("%s %s now", k ? "," : "", node ? node : "?");
    }
    long long total = 0;
    if (cli_jint(frag, "holders_total", &total) && total > (long long)json_array_size(h))
        printf(" (%lld in all)", total);
    printf("\n");
}

/* "  its account ml: ..." for a fair_share entry (of the cluster, or of its account). */
static void print_share(const char *what, const char *of, json_t *sh)
{
    if (!json_is_object(sh))
        return;
    const char *name = cli_jstr(sh, "name");
    printf("  its %s %s: %.0f%% of %s recent usage against a share of %.0f%% (factor %.2f); "
           "entitled to %.1f GPUs, runs %.0f",
           what, name ? name : "?", 100 * num(sh, "usage_share"), of,
           100 * num(sh, "normalized_share"), num(sh, "fair_share_factor"),
           num(sh, "entitlement_gpus"), num(sh, "running_gpus"));
    long long rec = 0;
    if (cli_jint(sh, "recovers_in_s", &rec) && rec > 0) {
        char d[32];
        span(d, sizeof d, rec);
        printf("; back at its share in %s", d);
    }
    printf("\n");
}

/* "  ahead of it: 3 jobs, 10 GPUs (job 40 account cv 4 GPUs: lower usage; ...)" */
static void print_position(json_t *pos)
{
    if (!json_is_object(pos))
        return;
    long long jobs = 0, gpus = 0;
    cli_jint(pos, "ahead_jobs", &jobs);
    cli_jint(pos, "ahead_gpus", &gpus);
    const char *order = cli_jstr(pos, "order");
    if (jobs == 0) {
        printf("  it is first in %s order\n", order ? order : "plan");
        return;
    }
    printf("  ahead of it: %s%lld job%s, %lld GPUs",
           json_is_null(json_object_get(pos, "place")) ? "more than " : "", jobs,
           jobs == 1 ? "" : "s", gpus);
    json_t *first = json_object_get(pos, "first");
    size_t k;
    json_t *v;
    json_array_foreach(first, k, v)
    {
        long long g = 0;
        cli_jint(v, "gpus", &g);
        const char *id = cli_jstr(v, "id"), *acct = cli_jstr(v, "account");
        printf("%sjob %s account %s %lld GPU%s: %s", k ? "; " : " (", id ? id : "?",
               acct ? acct : "?", g, g == 1 ? "" : "s", because_words(cli_jstr(v, "because")));
    }
    if (json_array_size(first))
        printf("%s)", (long long)json_array_size(first) < jobs ? "; ..." : "");
    printf("\n");
}

/* The evidence lines of a pending job's why. */
static void print_evidence(json_t *ev)
{
    json_t *frag = json_object_get(ev, "fragmentation");
    if (json_is_object(frag))
        print_holders(frag);
    json_t *fs = json_object_get(ev, "fair_share");
    if (json_is_object(fs)) {
        print_share("account", "the cluster's", json_object_get(fs, "account"));
        print_share("user", "its account's", json_object_get(fs, "user"));
    }
    print_position(json_object_get(ev, "position"));
    json_t *g = json_object_get(ev, "gpus");
    if (json_is_object(g)) {
        const char *ty = cli_jstr(g, "type");
        printf("  GPUs of %s%s: %.0f up, %.0f free (%.0f in all)\n", ty ? "type " : "any type",
               ty ? ty : "", num(g, "up"), num(g, "free"), num(g, "total"));
    }
}

static void print_why(json_t *job)
{
    const char *id = cli_jstr(job, "id"), *st = cli_jstr(job, "state");
    long long gpus = 0;
    cli_jint(job, "gpus", &gpus);
    if (!st || strcmp(st, "PENDING")) {
        char t[32], d[32];
        long long since = cli_since(job, "start_time");
        if (st && !strcmp(st, "RUNNING") && since >= 0) {
            span(d, sizeof d, since);
            printf("job %s (%lld GPUs) is running, since %s (%s)\n", id ? id : "?", gpus,
                   cli_jtime(job, "start_time", t, sizeof t), d);
        } else
            printf("job %s is %s, not waiting\n", id ? id : "?", st ? st : "?");
        return;
    }
    json_t *w = json_object_get(job, "why");
    const char *text = cli_jstr(w, "text");
    if (!text)
        text = cli_jstr(job, "reason");
    printf("job %s (%lld GPUs) is waiting: %s.\n", id ? id : "?", gpus, text ? text : "?");
    print_evidence(json_object_get(w, "evidence"));
    long long est = 0;
    if (cli_jint(job, "estimated_start", &est) && est > 0) {
        char d[32];
        long long ahead = est - (long long)time(NULL);
        span(d, sizeof d, ahead);
        printf("  expected to start %s%s\n", ahead > 0 ? "in " : "", ahead > 0 ? d : "now");
    }
}

int cli_cmd_why(int argc, char **argv)
{
    int json = 0;
    int r = cli_json_flag("why", argc, argv, &json, WHY_HELP);
    if (r >= 0)
        return r;
    if (argc - optind != 1)
        return cli_usage("why", "give one job id");
    char path[1024];
    json_t *res = NULL;
    int rc =
        cli_fetch("GET", cli_path(path, sizeof path, "/v1/jobs/", argv[optind], NULL), NULL, &res);
    if (!rc) {
        json_t *w = json_object_get(res, "why");
        if (json)
            cli_print_json(json_is_object(w) ? w : res);
        else
            print_why(res);
    }
    json_decref(res);
    return rc;
}
