/*
 * cli_estimate.c - start estimates as a person reads them: a duration from now with
 * its range, and where the estimate came from. Used by `fairgpu submit --dry-run
 * --estimate` (POST /v1/jobs?dry_run=true) and `fairgpu show JOB`.
 *
 * A span is whole seconds under 2 minutes, minutes under 2 hours, hours under 2 days,
 * else days (rounded to the nearest); a range is written in the unit of its upper end
 * ("1-6 min"), its lower end in its own where it would round to 0 there ("2 h-3 d"),
 * or "now" when it is not in the future ("now-6 min").
 * Example: now = 1000, estimate 1180, p10 1060, p90 1360, source "user":
 *   would start in ~3 min (1-6 min), source: user history
 */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* The unit for a span of d seconds: its size and its name. */
static void unit_of(long long d, long long *size, const char **name)
{
    if (d < 120)
        *size = 1, *name = "s";
    else if (d < 7200)
        *size = 60, *name = "min";
    else if (d < 2 * 86400)
        *size = 3600, *name = "h";
    else
        *size = 86400, *name = "d";
}

static long long in_unit(long long d, long long size)
{
    return d <= 0 ? 0 : (d + size / 2) / size;
}

static const char *source_words(const char *src)
{
    if (!src)
        return "unknown";
    if (!strcmp(src, "user"))
        return "user history";
    if (!strcmp(src, "account"))
        return "account history";
    if (!strcmp(src, "all"))
        return "everyone's history";
    if (!strcmp(src, "limit"))
        return "time limits";
    return src;
}

void cli_fmt_estimate(long long now, long long p50, long long p10, long long p90, char *buf,
                      size_t n)
{
    long long d = p50 - now, size, hsize;
    const char *u, *hu;
    if (d <= 0) {
        snprintf(buf, n, "now");
        return;
    }
    unit_of(d, &size, &u);
    int len = snprintf(buf, n, "in ~%lld %s", in_unit(d, size) ? in_unit(d, size) : 1, u);
    if (p10 <= 0 || p90 <= 0 || len < 0 || (size_t)len >= n)
        return;
    unit_of(p90 - now, &hsize, &hu);
    long long lo = in_unit(p10 - now, hsize), hi = in_unit(p90 - now, hsize), lsize;
    const char *lu;
    if (lo == hi)
        return;
    if (lo > 0) {
        snprintf(buf + len, n - (size_t)len, " (%lld-%lld %s)", lo, hi, hu);
    } else if (p10 <= now) {
        snprintf(buf + len, n - (size_t)len, " (now-%lld %s)", hi, hu);
    } else { /* the lower end in its own unit: "2 h-3 d" */
        unit_of(p10 - now, &lsize, &lu);
        snprintf(buf + len, n - (size_t)len, " (%lld %s-%lld %s)", in_unit(p10 - now, lsize), lu,
                 hi, hu);
    }
}

int cli_submit_estimate(json_t *body, int json)
{
    cli_ctx_t x;
    int rc = cli_open(&x, 1);
    if (rc)
        return rc;
    json_t *res;
    rc = cli_call(&x, "POST", "/v1/jobs?dry_run=true", body, NULL, &res);
    if (!rc && json) {
        cli_print_json(res);
    } else if (!rc) {
        long long p50, p10 = 0, p90 = 0;
        char b[128];
        if (cli_jint(res, "estimated_start", &p50)) {
            cli_jint(res, "estimated_start_p10", &p10);
            cli_jint(res, "estimated_start_p90", &p90);
            cli_fmt_estimate((long long)time(NULL), p50, p10, p90, b, sizeof b);
            printf("would start %s, source: %s\n", b,
                   source_words(cli_jstr(res, "estimate_source")));
        } else {
            printf("no estimate: it is not among the first jobs the scheduler projects, or no "
                   "node can hold it\n");
        }
        const char *code = cli_jstr(res, "reason_code"), *why = cli_jstr(res, "reason");
        if (code)
            printf("it would wait for: %s%s%s\n", code, why ? ": " : "", why ? why : "");
    }
    json_decref(res);
    cli_close(&x);
    return rc;
}

void cli_show_estimate(json_t *j, const char *st, void (*kv)(const char *, const char *))
{
    char b[256], r[128], t[64];
    long long es, p10 = 0, p90 = 0, at, err, lerr;
    if (st && !strcmp(st, "PENDING") && cli_jint(j, "estimated_start", &es) && es > 0) {
        cli_jint(j, "estimated_start_p10", &p10);
        cli_jint(j, "estimated_start_p90", &p90);
        cli_fmt_estimate((long long)time(NULL), es, p10, p90, r, sizeof r);
        snprintf(b, sizeof b, "%s (%s; from %s)", cli_jtime(j, "estimated_start", t, sizeof t), r,
                 source_words(cli_jstr(j, "estimate_source")));
        kv("estimated start:", b);
    }
    if (cli_jint(j, "estimate_at_submit", &at) && cli_jint(j, "estimate_error_s", &err)) {
        int has_l = cli_jint(j, "estimate_limit_error_s", &lerr);
        char off[48];
        if (err)
            snprintf(off, sizeof off, "%lld s %s", err < 0 ? -err : err,
                     err < 0 ? "before" : "after");
        else
            snprintf(off, sizeof off, "on");
        snprintf(b, sizeof b, "started %s its estimate at submission (%s)%s", off,
                 source_words(cli_jstr(j, "estimate_at_submit_source")),
                 has_l ? "; limits alone: " : "");
        if (has_l) {
            size_t l = strlen(b);
            snprintf(b + l, sizeof b - l, "%lld s %s", lerr < 0 ? -lerr : lerr,
                     lerr < 0 ? "before" : "after");
        }
        kv("estimate error:", b);
    }
}
