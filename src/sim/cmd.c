/*
 * cmd.c - `fairgpu sim TRACE.csv [options]`: option parsing, the --weights and --cluster
 * files, and the output of one run or of --compare (see docs/sim.md).
 */
#include "common/commands.h"
#include "common/xalloc.h"
#include "sim/sim.h"
#include "sim/tlimit.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CONF_LINE_MAX 1024
#define MAX_GROUPS    256
#define MAX_NODES     100000

static const char usage[] =
    "usage: fairgpu sim TRACE.csv [options]\n"
    "\n"
    "Replays a job trace (CSV: job_id,user,submit_time_s,num_gpus,duration_s[,account,...])\n"
    "through the scheduler core and prints its metrics (see docs/sim.md).\n"
    "\n"
    "cluster:\n"
    "  --nodes N               nodes (default: auto, the fewest nodes whose GPUs cover the\n"
    "                          trace's offered load: sum(g*d) / submit span)\n"
    "  --gpus-per-node G       GPUs per node (default 8)\n"
    "  --cluster FILE          mixed nodes: lines 'COUNT GPUS [GPU_TYPE]' ('#' comments)\n"
    "policy (defaults are the core's, see docs/scheduler.md):\n"
    "  --policy P              fair (default), wfq, fifo, priority, round-robin, las\n"
    "  --compare               run every policy and print one table (one JSON line each)\n"
    "  --half-life T           usage half-life (0 = no memory)\n"
    "  --quantum T             run time after which a job is a long runner\n"
    "  --preempt-wait T        wait before a starved job may preempt\n"
    "  --min-run T             no fair-share preemption within this run time\n"
    "  --no-backfill           turn EASY backfill off\n"
    "  --no-preemption         turn preemption off\n"
    "  --backfill-depth N      pending jobs scanned past the first blocked one (0 = all)\n"
    "  --reserve-depth N       blocked jobs with a reservation\n"
    "  --estimate-depth N      pending jobs that get a start estimate\n"
    "  --las-thresholds LIST   las, fair: attained GPU-seconds that end each LAS queue,\n"
    "                          ascending, comma-separated (default 1h,10h,100h)\n"
    "jobs:\n"
    "  --weights FILE          tenant weights: lines 'TENANT WEIGHT' (default weight 1)\n"
    "  --time-limit-factor F   time limit = duration x F (F >= 1, default 2)\n"
    "  --time-limit-model M    factor (default: the line above) or rounded: a per-user\n"
    "                          factor with noise, rounded up to 30m 1h 2h 4h 8h 12h 24h\n"
    "                          48h 72h 7d (docs/sim.md)\n"
    "  --time-limit-seed N     the rounded model's draws (default 1)\n"
    "estimates:\n"
    "  --estimates E           limit (default: the core's estimate) or history: also the\n"
    "                          history-based estimate and both accuracies (docs/sim.md)\n"
    "  --checkpoint-interval T checkpoint every T of run time (default 900 s; 0 = never)\n"
    "  --restart-overhead T    a job resumed after a preemption first runs T without\n"
    "                          progress on its GPUs (default 120 s; 0 = free restarts)\n"
    "  --skip-bad              skip and count bad trace rows instead of failing\n"
    "  --max-jobs N            replay only the first N rows of the trace\n"
    "output:\n"
    "  --json                  one JSON object per line per policy\n"
    "  --json-out FILE         also write the JSON lines to FILE\n"
    "  --markdown              the table in Markdown\n"
    "  --share-series FILE     write each tenant's GPU share over time (from the run of\n"
    "                          the --policy policy, also under --compare)\n"
    "  --share-interval T      its sampling interval (default 3600 s)\n"
    "  --jobs-out FILE         write one line per replayed job (tenant, size, submit,\n"
    "                          first start, end, attempts), from the run of the --policy\n"
    "                          policy (also under --compare)\n"
    "  --progress              progress on stderr (default: when stderr is a terminal)\n"
    "Times T are seconds, or a number with a suffix s, m, h, d, w (e.g. 7d).\n";

/* Parses a duration: digits with an optional unit suffix. */
static int parse_time(const char *s, int64_t *out)
{
    size_t n = strlen(s);
    int64_t mul = 1;
    if (n > 0) {
        switch (s[n - 1]) {
        case 's':
            mul = 1, n--;
            break;
        case 'm':
            mul = 60, n--;
            break;
        case 'h':
            mul = 3600, n--;
            break;
        case 'd':
            mul = 86400, n--;
            break;
        case 'w':
            mul = 604800, n--;
            break;
        }
    }
    int64_t v;
    if (fg_parse_int64(s, n, 0, INT64_MAX / 604800 / 1000, &v))
        return -1;
    *out = v * mul;
    return 0;
}

static int parse_count(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    return fg_parse_int64(s, strlen(s), lo, hi, out);
}

static int parse_double(const char *s, double *out)
{
    errno = 0;
    char *end = NULL;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

/* Reads a small config file line by line; calls fn for each non-blank, non-comment line
 * split into up to 4 whitespace-separated words. */
typedef int (*line_fn)(void *ctx, char **w, int nw, const char *path, int line);

static int read_conf(const char *path, line_fn fn, void *ctx)
{
    FILE *fp = fopen(path, "r");
    if (!fp) {
        fprintf(stderr, "fairgpu sim: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char buf[CONF_LINE_MAX + 2];
    int line = 0, rc = 0;
    while (fgets(buf, sizeof buf, fp)) {
        line++;
        size_t n = strlen(buf);
        if (n == sizeof buf - 1 && buf[n - 1] != '\n') {
            fprintf(stderr, "fairgpu sim: %s:%d: line longer than %d bytes\n", path, line,
                    CONF_LINE_MAX);
            rc = -1;
            break;
        }
        char *hash = strchr(buf, '#');
        if (hash)
            *hash = '\0';
        char *w[5];
        int nw = 0;
        char *save = NULL;
        for (char *tok = strtok_r(buf, " \t\r\n", &save); tok && nw < 5;
             tok = strtok_r(NULL, " \t\r\n", &save))
            w[nw++] = tok;
        if (nw == 0)
            continue;
        if (fn(ctx, w, nw, path, line) < 0) {
            rc = -1;
            break;
        }
    }
    fclose(fp);
    return rc;
}

typedef struct weights_ctx {
    const fg_trace_t *t;
    double *w;
    int unknown;
} weights_ctx_t;

static int weight_line(void *ctx, char **w, int nw, const char *path, int line)
{
    weights_ctx_t *c = ctx;
    double v;
    if (nw != 2 || parse_double(w[1], &v) || !(v > 0) || v > 1e9) {
        fprintf(stderr, "fairgpu sim: %s:%d: expected 'TENANT WEIGHT' with 0 < WEIGHT <= 1e9\n",
                path, line);
        return -1;
    }
    for (size_t u = 0; u < c->t->ntenants; u++)
        if (!strcmp(c->t->tenants[u], w[0])) {
            c->w[u] = v;
            return 0;
        }
    c->unknown++;
    return 0;
}

typedef struct cluster_ctx {
    fg_sim_nodes_t *g;
    size_t n;
    int64_t nodes;
} cluster_ctx_t;

static int cluster_line(void *ctx, char **w, int nw, const char *path, int line)
{
    cluster_ctx_t *c = ctx;
    int64_t count, gpus;
    if (nw < 2 || nw > 3 || parse_count(w[0], 1, MAX_NODES, &count) ||
        parse_count(w[1], 1, FG_MAX_NODE_GPUS, &gpus) || (nw == 3 && strlen(w[2]) >= FG_NAME_MAX)) {
        fprintf(stderr,
                "fairgpu sim: %s:%d: expected 'COUNT GPUS [GPU_TYPE]' with 1 <= COUNT <= %d, "
                "1 <= GPUS <= %d\n",
                path, line, MAX_NODES, FG_MAX_NODE_GPUS);
        return -1;
    }
    if (c->n == MAX_GROUPS || c->nodes + count > MAX_NODES) {
        fprintf(stderr, "fairgpu sim: %s:%d: too many nodes\n", path, line);
        return -1;
    }
    fg_sim_nodes_t *g = &c->g[c->n++];
    g->count = (int32_t)count;
    g->gpus = (int32_t)gpus;
    snprintf(g->gpu_type, sizeof g->gpu_type, "%s", nw == 3 ? w[2] : "gpu");
    c->nodes += count;
    return 0;
}

enum {
    O_NODES = 256,
    O_GPN,
    O_CLUSTER,
    O_POLICY,
    O_COMPARE,
    O_HALF,
    O_QUANTUM,
    O_PWAIT,
    O_MINRUN,
    O_NOBF,
    O_NOPRE,
    O_BFD,
    O_RSD,
    O_ESD,
    O_WEIGHTS,
    O_TLF,
    O_TLM,
    O_TLSEED,
    O_EST,
    O_CKPT,
    O_RESTART,
    O_LAS,
    O_SKIP,
    O_MAXJOBS,
    O_JSON,
    O_JSON_OUT,
    O_MD,
    O_SERIES,
    O_SERIES_INT,
    O_JOBS_OUT,
    O_PROGRESS,
    O_HELP,
};

static const struct option longopts[] = {
    {"nodes", required_argument, 0, O_NODES},
    {"gpus-per-node", required_argument, 0, O_GPN},
    {"cluster", required_argument, 0, O_CLUSTER},
    {"policy", required_argument, 0, O_POLICY},
    {"compare", no_argument, 0, O_COMPARE},
    {"half-life", required_argument, 0, O_HALF},
    {"quantum", required_argument, 0, O_QUANTUM},
    {"preempt-wait", required_argument, 0, O_PWAIT},
    {"min-run", required_argument, 0, O_MINRUN},
    {"no-backfill", no_argument, 0, O_NOBF},
    {"no-preemption", no_argument, 0, O_NOPRE},
    {"backfill-depth", required_argument, 0, O_BFD},
    {"reserve-depth", required_argument, 0, O_RSD},
    {"estimate-depth", required_argument, 0, O_ESD},
    {"weights", required_argument, 0, O_WEIGHTS},
    {"time-limit-factor", required_argument, 0, O_TLF},
    {"time-limit-model", required_argument, 0, O_TLM},
    {"time-limit-seed", required_argument, 0, O_TLSEED},
    {"estimates", required_argument, 0, O_EST},
    {"checkpoint-interval", required_argument, 0, O_CKPT},
    {"restart-overhead", required_argument, 0, O_RESTART},
    {"las-thresholds", required_argument, 0, O_LAS},
    {"skip-bad", no_argument, 0, O_SKIP},
    {"max-jobs", required_argument, 0, O_MAXJOBS},
    {"json", no_argument, 0, O_JSON},
    {"json-out", required_argument, 0, O_JSON_OUT},
    {"markdown", no_argument, 0, O_MD},
    {"share-series", required_argument, 0, O_SERIES},
    {"share-interval", required_argument, 0, O_SERIES_INT},
    {"jobs-out", required_argument, 0, O_JOBS_OUT},
    {"progress", no_argument, 0, O_PROGRESS},
    {"help", no_argument, 0, O_HELP},
    {0, 0, 0, 0},
};

/* Writes the per-job records of one run (recs indexed like t->jobs) to `path`: a comment,
 * a header, then one line per replayed job in replay order (jobs skipped as too big are
 * left out): trace line, tenant, GPUs (after rounding), submit, first start, end,
 * duration, wait, attempts. Returns 0, or -1 after a message on stderr. */
static int write_jobs(const char *path, const fg_trace_t *t, const fg_jobrec_t *recs,
                      const char *policy)
{
    FILE *fp = fopen(path, "w");
    if (!fp) {
        fprintf(stderr, "fairgpu sim: %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(fp, "# fairgpu sim job records: policy %s, trace %s; times in seconds\n", policy,
            t->name);
    fprintf(fp, "line tenant gpus submit start end duration wait attempts\n");
    for (size_t i = 0; i < t->njobs; i++) {
        const fg_jobrec_t *r = &recs[i];
        if (r->start < 0 || r->end < 0)
            continue;
        fprintf(fp, "%lld %s %d %lld %lld %lld %lld %lld %d\n", (long long)t->jobs[i].line,
                t->tenants[r->tenant], r->gpus, (long long)r->submit, (long long)r->start,
                (long long)r->end, (long long)r->duration, (long long)(r->start - r->submit),
                r->attempts);
    }
    if (fclose(fp) != 0) {
        fprintf(stderr, "fairgpu sim: %s: write error\n", path);
        return -1;
    }
    return 0;
}

static int bad_opt(const char *opt, const char *val, const char *want)
{
    fprintf(stderr, "fairgpu sim: --%s '%s': expected %s\n", opt, val, want);
    return 2;
}

/* The command line of `fairgpu sim`, parsed. */
typedef struct sim_args {
    fg_sim_opts_t o;
    int64_t nodes, gpn;
    const char *cluster_file, *weights_file, *json_out, *jobs_out, *path;
    bool compare, json, markdown, progress;
    fg_trace_opts_t topts;
} sim_args_t;

/* A time option's value into its setting; 0, or the exit status of a bad value. */
static int time_option(sim_args_t *a, int c, const char *name, const char *arg)
{
    int64_t v;
    if (parse_time(arg, &v))
        return bad_opt(name, arg, "a time: seconds, or with a suffix s/m/h/d/w");
    if (c == O_SERIES_INT && v < 1)
        return bad_opt(name, arg, "a time of at least 1 s");
    int64_t *to = c == O_HALF      ? &a->o.cfg.half_life_s
                  : c == O_QUANTUM ? &a->o.cfg.quantum_s
                  : c == O_PWAIT   ? &a->o.cfg.preempt_wait_s
                  : c == O_MINRUN  ? &a->o.cfg.min_run_s
                  : c == O_CKPT    ? &a->o.checkpoint_interval_s
                  : c == O_RESTART ? &a->o.restart_overhead_s
                                   : &a->o.share_interval_s;
    *to = v;
    return 0;
}

/* --las-thresholds: a comma-separated list of GPU-second thresholds (times, ascending),
 * one fewer than the LAS queues; 0, or the exit status of a bad value. */
static int las_option(sim_args_t *a, const char *name, const char *arg)
{
    char buf[256];
    if (strlen(arg) >= sizeof buf)
        return bad_opt(name, arg, "a short list");
    snprintf(buf, sizeof buf, "%s", arg);
    int32_t n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        int64_t v;
        if (n + 1 >= FG_LAS_MAX_LEVELS || parse_time(tok, &v) || v <= 0 ||
            (n > 0 && v <= a->o.cfg.las_thresholds_gpu_s[n - 1]))
            return bad_opt(name, arg,
                           "1 to 7 ascending positive GPU-second thresholds, comma-separated");
        a->o.cfg.las_thresholds_gpu_s[n++] = v;
    }
    if (n == 0)
        return bad_opt(name, arg,
                       "1 to 7 ascending positive GPU-second thresholds, comma-separated");
    a->o.cfg.las_levels = n + 1;
    return 0;
}

/* A depth option's value into its setting; 0, or the exit status of a bad value. */
static int depth_option(sim_args_t *a, int c, const char *name, const char *arg)
{
    int64_t v;
    if (parse_count(arg, 0, INT32_MAX, &v))
        return bad_opt(name, arg, "an integer >= 0");
    int32_t *to = c == O_BFD   ? &a->o.cfg.backfill_depth
                  : c == O_RSD ? &a->o.cfg.reserve_depth
                               : &a->o.cfg.estimate_depth;
    *to = (int32_t)v;
    return 0;
}

/* One option into *a; 0, or the exit status of a bad value. */
static int sim_option(sim_args_t *a, int c, const char *name, const char *arg)
{
    int64_t v;
    switch (c) {
    case O_NODES:
        return parse_count(arg, 1, MAX_NODES, &a->nodes)
                   ? bad_opt(name, arg, "an integer in [1, 100000]")
                   : 0;
    case O_GPN:
        return parse_count(arg, 1, FG_MAX_NODE_GPUS, &a->gpn)
                   ? bad_opt(name, arg, "an integer in [1, 64]")
                   : 0;
    case O_POLICY: {
        int p = fg_policy_parse(arg);
        if (p < 0)
            return bad_opt(name, arg, "fair, wfq, fifo, priority, round-robin or las");
        a->o.cfg.policy = (fg_policy_t)p;
        return 0;
    }
    case O_HALF:
    case O_QUANTUM:
    case O_PWAIT:
    case O_MINRUN:
    case O_CKPT:
    case O_RESTART:
    case O_SERIES_INT:
        return time_option(a, c, name, arg);
    case O_LAS:
        return las_option(a, name, arg);
    case O_BFD:
    case O_RSD:
    case O_ESD:
        return depth_option(a, c, name, arg);
    case O_TLF:
        if (parse_double(arg, &a->o.time_limit_factor) || !(a->o.time_limit_factor >= 1.0) ||
            a->o.time_limit_factor > 1000)
            return bad_opt(name, arg, "a number in [1, 1000]");
        return 0;
    case O_TLM:
        if ((a->o.time_limit_model = fg_tlimit_parse(arg)) < 0)
            return bad_opt(name, arg, "factor or rounded");
        return 0;
    case O_TLSEED:
        if (parse_count(arg, 0, INT64_MAX, &v))
            return bad_opt(name, arg, "an integer >= 0");
        a->o.time_limit_seed = (uint64_t)v;
        return 0;
    case O_EST:
        if (strcmp(arg, "limit") && strcmp(arg, "history"))
            return bad_opt(name, arg, "limit or history");
        a->o.estimates_history = !strcmp(arg, "history");
        return 0;
    case O_MAXJOBS:
        if (parse_count(arg, 1, INT64_MAX, &v))
            return bad_opt(name, arg, "an integer >= 1");
        a->topts.max_jobs = (size_t)v;
        return 0;
    case O_CLUSTER:
        a->cluster_file = arg;
        return 0;
    case O_WEIGHTS:
        a->weights_file = arg;
        return 0;
    case O_JSON_OUT:
        a->json_out = arg;
        return 0;
    case O_SERIES:
        a->o.share_series = arg;
        return 0;
    case O_JOBS_OUT:
        a->jobs_out = arg;
        return 0;
    case O_COMPARE:
        a->compare = true;
        return 0;
    case O_NOBF:
        a->o.cfg.backfill = false;
        return 0;
    case O_NOPRE:
        a->o.cfg.preemption = false;
        return 0;
    case O_SKIP:
        a->topts.skip_bad = 1;
        return 0;
    case O_JSON:
        a->json = true;
        return 0;
    case O_MD:
        a->markdown = true;
        return 0;
    case O_PROGRESS:
        a->progress = true;
        return 0;
    default:
        return 2;
    }
}

/* Parses the command line into *a: -1 to go on, else the exit status (0 after --help). */
static int sim_args_parse(int argc, char **argv, sim_args_t *a)
{
    memset(a, 0, sizeof *a);
    fg_sim_opts_default(&a->o);
    a->gpn = 8;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        const char *name = NULL;
        for (const struct option *lo = longopts; lo->name; lo++)
            if (lo->val == c)
                name = lo->name;
        if (c == O_HELP || c == 'h') {
            fputs(usage, stdout);
            return 0;
        }
        if (c == ':') {
            fprintf(stderr, "fairgpu sim: %s needs a value\n", argv[optind - 1]);
            return 2;
        }
        if (!name) {
            fprintf(stderr, "fairgpu sim: unknown option %s (see fairgpu sim --help)\n",
                    argv[optind - 1]);
            return 2;
        }
        int rc = sim_option(a, c, name, optarg);
        if (rc)
            return rc;
    }
    if (optind != argc - 1) {
        fputs(usage, stderr);
        return 2;
    }
    a->path = argv[optind];
    const char *cmsg = NULL;
    if (fg_config_check(&a->o.cfg, &cmsg) != FG_OK) {
        fprintf(stderr, "fairgpu sim: bad option: %s\n", cmsg ? cmsg : "configuration");
        return 2;
    }
    return -1;
}

/* The tenants' weights (1, or from --weights) and the cluster's node groups (from
 * --cluster, or --nodes x --gpus-per-node, auto-sized by default) into a->o. */
static int sim_inputs(sim_args_t *a, const fg_trace_t *t, double *weights, fg_sim_nodes_t *groups)
{
    for (size_t u = 0; u < t->ntenants; u++)
        weights[u] = 1.0;
    if (a->weights_file) {
        weights_ctx_t wc = {t, weights, 0};
        if (read_conf(a->weights_file, weight_line, &wc) < 0)
            return -1;
        if (wc.unknown)
            fprintf(stderr, "fairgpu sim: %s: %d tenants not in the trace (ignored)\n",
                    a->weights_file, wc.unknown);
    }
    a->o.weights = weights;
    if (a->cluster_file) {
        cluster_ctx_t cc = {groups, 0, 0};
        if (read_conf(a->cluster_file, cluster_line, &cc) < 0)
            return -1;
        if (cc.n == 0) {
            fprintf(stderr, "fairgpu sim: %s: no nodes\n", a->cluster_file);
            return -1;
        }
        a->o.ngroups = cc.n;
    } else {
        groups[0].count = (int32_t)(a->nodes ? a->nodes : fg_sim_auto_nodes(t, (int32_t)a->gpn));
        groups[0].gpus = (int32_t)a->gpn;
        snprintf(groups[0].gpu_type, sizeof groups[0].gpu_type, "gpu");
        a->o.ngroups = 1;
    }
    a->o.groups = groups;
    a->o.progress = a->progress || isatty(STDERR_FILENO);
    return 0;
}

/* Prints a result as a JSON line on stdout (--json) and into jout (--json-out). */
static void sim_json(const sim_args_t *a, const fg_sim_result_t *r, FILE *jout)
{
    if (!a->json && !jout)
        return;
    char *s = fg_sim_result_json(r);
    if (a->json) {
        printf("%s\n", s);
        fflush(stdout);
    }
    if (jout) {
        fprintf(jout, "%s\n", s);
        fflush(jout);
    }
    free(s);
}

/* Runs the --policy policy, or every policy under --compare, into res[]; the share
 * series and the job records come from the run of the --policy policy. Returns the
 * number of runs that failed; *nres: the results made. */
static int sim_runs(sim_args_t *a, const fg_trace_t *t, fg_sim_result_t *res, size_t *nres,
                    FILE *jout)
{
    fg_sim_opts_t *o = &a->o;
    const char *series = o->share_series;
    const fg_policy_t series_policy = o->cfg.policy;
    char err[512];
    int failed = 0;
    for (int p = 0; p < FG_POLICY_COUNT; p++) {
        if (a->compare)
            o->cfg.policy = (fg_policy_t)p;
        else if (p > 0)
            break;
        const bool own = o->cfg.policy == series_policy;
        o->share_series = own ? series : NULL;
        fg_jobrec_t *recs = NULL;
        if (fg_sim_run_recs(t, o, &res[*nres], a->jobs_out && own ? &recs : NULL, err, sizeof err) <
            0) {
            /* under --compare the other policies still run; the exit status says it */
            fprintf(stderr, "fairgpu sim: %s: %s\n", fg_policy_name(o->cfg.policy), err);
            failed++;
            continue;
        }
        if (recs && write_jobs(a->jobs_out, t, recs, fg_policy_name(o->cfg.policy)) < 0)
            failed++;
        fg_sim_recs_free(recs, t);
        if (res[*nres].skipped_too_big && *nres == 0)
            fprintf(stderr, "fairgpu sim: skipped %lld jobs that can never fit the cluster\n",
                    (long long)res[*nres].skipped_too_big);
        sim_json(a, &res[*nres], jout);
        (*nres)++;
    }
    return failed;
}

/* The table of results (not under --json): a summary line, then one row per policy. */
static void sim_table(const sim_args_t *a, const fg_trace_t *t, const fg_sim_result_t *res,
                      size_t nres)
{
    if (a->json || nres == 0)
        return;
    if (!a->markdown)
        printf("trace %s: %lld jobs, %lld nodes, %lld GPUs, %lld sizes rounded up to whole "
               "nodes, %lld skipped (never fit); restart overhead %lld s\n",
               t->name, (long long)res[0].jobs, (long long)res[0].nodes, (long long)res[0].gpus,
               (long long)res[0].rounded_up, (long long)res[0].skipped_too_big,
               (long long)res[0].restart_overhead_s);
    fg_sim_print_table(stdout, res, nres, a->markdown);
    for (size_t i = 0; i < nres; i++) {
        if (!res[i].has_estacc)
            continue;
        char title[96];
        snprintf(title, sizeof title, "start estimates at submission (%s), absolute errors in s",
                 res[i].policy);
        fg_estacc_print(stdout, &res[i].estacc, title, a->markdown);
    }
}

int fg_cmd_sim(int argc, char **argv)
{
    sim_args_t a;
    int rc = sim_args_parse(argc, argv, &a);
    if (rc >= 0)
        return rc;
    fg_trace_t t;
    char err[512];
    if (fg_trace_load(a.path, &a.topts, &t, err, sizeof err) < 0) {
        fprintf(stderr, "fairgpu sim: %s\n", err);
        return 1;
    }
    if (t.skipped_bad)
        fprintf(stderr, "fairgpu sim: skipped %lld bad rows (first: %s)\n",
                (long long)t.skipped_bad, t.first_bad);
    rc = 1;
    fg_sim_nodes_t *groups = fg_xcalloc(MAX_GROUPS, sizeof *groups);
    double *weights = fg_xmalloc((t.ntenants ? t.ntenants : 1) * sizeof *weights);
    fg_sim_result_t *res = fg_xcalloc(FG_POLICY_COUNT, sizeof *res);
    FILE *jout = NULL;
    if (sim_inputs(&a, &t, weights, groups) < 0)
        goto out;
    if (a.json_out && !(jout = fopen(a.json_out, "w"))) {
        fprintf(stderr, "fairgpu sim: %s: %s\n", a.json_out, strerror(errno));
        goto out;
    }
    size_t nres = 0;
    int failed = sim_runs(&a, &t, res, &nres, jout);
    if (jout && fclose(jout) != 0) {
        fprintf(stderr, "fairgpu sim: %s: write error\n", a.json_out);
        failed++;
    }
    sim_table(&a, &t, res, nres);
    rc = failed ? 1 : 0;
out:
    free(res);
    free(weights);
    free(groups);
    fg_trace_free(&t);
    return rc;
}
