/*
 * script.c - job specs from submit flags, #FAIRGPU lines and #SBATCH lines.
 *
 * One option table serves the three sources; a dialect mask says where each option is
 * accepted. Example script, read by fg_script_parse:
 *
 *   #!/bin/bash
 *   #SBATCH --job-name=llama-ft      -> name "llama-ft"
 *   #SBATCH --nodes=2                \  gpus = 2 x 8 = 16 (Slurm's --gres is per node)
 *   #SBATCH --gres=gpu:h100:8        /  gpu_type "h100"
 *   #SBATCH --time=1-12:00:00        -> time_limit_s 129600
 *   #SBATCH --partition=big          -> ignored, with a note
 *   #FAIRGPU --model llama-3-8b --priority low   (overrides #SBATCH, e.g. --qos)
 *   srun python train.py             <- first command: directives end here
 *
 * gives command ["/bin/bash", "-c", <the whole text>].
 */
#include "cli/script.h"
#include "cli/errbuf.h"
#include "cli/timespec.h"
#include "common/xalloc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { D_CLI = 1, D_FG = 2, D_SB = 4, D_ALL = 7, D_OURS = D_CLI | D_FG };

typedef enum {
    O_NAME,
    O_GPUS,
    O_GPU_TYPE,
    O_MODEL,
    O_DATASET,
    O_TIME,
    O_PRIORITY,
    O_QOS,
    O_RETRIES,
    O_ENV,
    O_ACCOUNT,
    O_GRES,
    O_NODES,
    O_GPUS_PER_NODE
} opt_id_t;

typedef struct {
    const char *name; /* long name, without "--" */
    char shortc;      /* 0: none */
    opt_id_t id;
    unsigned dialects;
} opt_t;

static const opt_t OPTS[] = {
    {"name", 0, O_NAME, D_OURS},
    {"job-name", 'J', O_NAME, D_ALL},
    {"gpus", 'G', O_GPUS, D_ALL},
    {"gpu-type", 0, O_GPU_TYPE, D_OURS},
    {"model", 0, O_MODEL, D_OURS},
    {"dataset", 0, O_DATASET, D_OURS},
    {"time", 't', O_TIME, D_ALL},
    {"priority", 0, O_PRIORITY, D_OURS},
    {"qos", 'q', O_QOS, D_ALL},
    {"max-retries", 0, O_RETRIES, D_OURS},
    {"env", 0, O_ENV, D_OURS},
    {"account", 'A', O_ACCOUNT, D_ALL},
    {"gres", 0, O_GRES, D_ALL},
    {"nodes", 'N', O_NODES, D_ALL},
    {"gpus-per-node", 0, O_GPUS_PER_NODE, D_ALL},
};

static void add_note(fg_jobspec_t *js, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add_note(fg_jobspec_t *js, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (js->nnotes >= 100)
        return; /* bounded: a hostile script cannot grow it without limit */
    js->notes = fg_xgrow(js->notes, &js->notes_cap, js->nnotes + 1, sizeof *js->notes);
    js->notes[js->nnotes++] = fg_xstrdup(buf);
}

void fg_jobspec_init(fg_jobspec_t *js)
{
    memset(js, 0, sizeof *js);
}

static void free_command(fg_jobspec_t *js)
{
    for (size_t i = 0; i < js->ncommand; i++)
        free(js->command[i]);
    free(js->command);
    js->command = NULL;
    js->ncommand = 0;
}

void fg_jobspec_free(fg_jobspec_t *js)
{
    free(js->name);
    free(js->gpu_type);
    free(js->model);
    free(js->dataset);
    free(js->account);
    for (size_t i = 0; i < js->nenv; i++) {
        free(js->env[i].key);
        free(js->env[i].val);
    }
    free(js->env);
    free_command(js);
    for (size_t i = 0; i < js->nnotes; i++)
        free(js->notes[i]);
    free(js->notes);
    memset(js, 0, sizeof *js);
}

/* ---------------------------------------------------------------- value parsers -- */

/* A whole decimal number in [min, max]. */
static int parse_long(const char *s, long min, long max, long *out)
{
    if (!s || !*s || *s == '+' || *s == ' ')
        return -1;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* A label: 1..max bytes, no control characters. */
static int check_label(const char *opt, const char *v, size_t max, char *err, size_t errlen)
{
    size_t n = strlen(v);
    if (n == 0)
        return fg_cli_errf(err, errlen, "--%s: the value is empty", opt);
    if (n > max)
        return fg_cli_errf(err, errlen, "--%s: the value is too long (%zu bytes; at most %zu)", opt,
                           n, max);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
            return fg_cli_errf(err, errlen, "--%s: the value contains a control character", opt);
    return 0;
}

static void set_str(char **dst, const char *v)
{
    free(*dst);
    *dst = fg_xstrdup(v);
}

static const char *priority_class(const char *v)
{
    static const char *classes[] = {"high", "normal", "low"};
    for (int i = 0; i < 3; i++)
        if (!strcasecmp(v, classes[i]))
            return classes[i];
    return NULL;
}

static int valid_env_key(const char *k, size_t n)
{
    if (n == 0 || n > 256 || (k[0] >= '0' && k[0] <= '9'))
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = k[i];
        if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9')))
            return 0;
    }
    return 1;
}

static void env_put(fg_jobspec_t *js, const char *k, size_t klen, const char *v)
{
    for (size_t i = 0; i < js->nenv; i++) {
        if (strlen(js->env[i].key) == klen && !memcmp(js->env[i].key, k, klen)) {
            set_str(&js->env[i].val, v);
            return;
        }
    }
    js->env = fg_xgrow(js->env, &js->env_cap, js->nenv + 1, sizeof *js->env);
    char *key = fg_xmalloc(klen + 1);
    memcpy(key, k, klen);
    key[klen] = '\0';
    js->env[js->nenv].key = key;
    js->env[js->nenv].val = fg_xstrdup(v);
    js->nenv++;
}

/* "[type:]N" as in Slurm's --gpus and the tail of --gres=gpu:...; N absent means 1
 * when allow_bare. Returns N (the type, if any, in *type), or -1 with the message in
 * err. */
static long parse_typed_count(const char *opt, const char *v, int allow_bare, char **type,
                              char *err, size_t errlen)
{
    const char *colon = strrchr(v, ':');
    const char *num = colon ? colon + 1 : v;
    long count;
    int numeric = *num != '\0' && strspn(num, "0123456789+-") == strlen(num);
    if (parse_long(num, 1, 100000, &count) < 0) {
        if (!allow_bare || colon || numeric)
            return fg_cli_errf(err, errlen,
                               "--%s: invalid GPU count '%s' (expected a whole number, optionally "
                               "after a type as in h100:8)",
                               opt, v);
        /* "gpu:h100" in --gres: a type, one GPU. */
        num = NULL;
        count = 1;
        colon = v + strlen(v);
    }
    if (colon && colon > v) {
        size_t tl = (size_t)(colon - v);
        if (tl > FG_JOB_MAX_STR || memchr(v, ':', tl))
            return fg_cli_errf(err, errlen, "--%s: invalid GPU type in '%s'", opt, v);
        free(*type);
        *type = fg_xmalloc(tl + 1);
        memcpy(*type, v, tl);
        (*type)[tl] = '\0';
        if (check_label(opt, *type, FG_JOB_MAX_STR, err, errlen) < 0)
            return -1;
    }
    return count;
}

/* parse_typed_count, the type (when one is given) becoming the job's GPU type.
 * Returns the count, or -1 with the message in err. */
static long take_typed_count(fg_jobspec_t *js, const char *opt, const char *v, int allow_bare,
                             char *err, size_t errlen)
{
    char *type = NULL;
    long n = parse_typed_count(opt, v, allow_bare, &type, err, errlen);
    if (n < 0) {
        free(type);
        return -1;
    }
    if (type) {
        free(js->gpu_type);
        js->gpu_type = type;
        js->set |= FG_JS_GPU_TYPE;
    }
    return n;
}

/* --gres=gpu[:type][:N][,other...]: finds the gpu entry. */
static int parse_gres(fg_jobspec_t *js, const char *v, char *err, size_t errlen)
{
    const char *p = v;
    int found = 0;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n >= 3 && !strncmp(p, "gpu", 3) && (n == 3 || p[3] == ':')) {
            if (found)
                return fg_cli_errf(err, errlen, "--gres: 'gpu' is given twice in '%s'", v);
            found = 1;
            long count = 1;
            if (n > 4) {
                char tmp[FG_JOB_MAX_STR + 32];
                if (n - 4 >= sizeof tmp)
                    return fg_cli_errf(err, errlen, "--gres: the value is too long");
                memcpy(tmp, p + 4, n - 4);
                tmp[n - 4] = '\0';
                if ((count = take_typed_count(js, "gres", tmp, 1, err, errlen)) < 0)
                    return -1;
            }
            js->gpus_per_node = count;
            js->set |= FG_JS_GPUS_PER_NODE;
        } else {
            add_note(js, "ignoring --gres entry '%.*s' (only gpu is scheduled)", (int)n, p);
        }
        p = e ? e + 1 : p + n;
    }
    if (!found)
        return fg_cli_errf(err, errlen, "--gres: no 'gpu' entry in '%s' (expected e.g. gpu:8)", v);
    return 0;
}

/* The field of a label option (name, gpu type, model, dataset, account) and, in
 * *flag, the bit that says it is set. */
static char **label_field(fg_jobspec_t *js, opt_id_t id, unsigned *flag)
{
    switch (id) {
    case O_NAME:
        *flag = FG_JS_NAME;
        return &js->name;
    case O_GPU_TYPE:
        *flag = FG_JS_GPU_TYPE;
        return &js->gpu_type;
    case O_MODEL:
        *flag = FG_JS_MODEL;
        return &js->model;
    case O_DATASET:
        *flag = FG_JS_DATASET;
        return &js->dataset;
    case O_ACCOUNT:
    default: /* only the label options come here (set_label) */
        *flag = FG_JS_ACCOUNT;
        return &js->account;
    }
}

/* A label option's value v: checked (a name is at most FG_JOB_MAX_NAME bytes, other
 * labels FG_JOB_MAX_STR), then set. 0 or -1 with the message in err. */
static int set_label(fg_jobspec_t *js, const opt_t *o, const char *v, char *err, size_t errlen)
{
    size_t max = o->id == O_NAME ? FG_JOB_MAX_NAME : FG_JOB_MAX_STR;
    if (check_label(o->name, v, max, err, errlen) < 0)
        return -1;
    unsigned flag;
    set_str(label_field(js, o->id, &flag), v);
    js->set |= flag;
    return 0;
}

static int apply(fg_jobspec_t *js, const opt_t *o, const char *v, char *err, size_t errlen)
{
    long n;
    switch (o->id) {
    case O_NAME:
    case O_GPU_TYPE:
    case O_MODEL:
    case O_DATASET:
    case O_ACCOUNT:
        return set_label(js, o, v, err, errlen);
    case O_GPUS:
        if ((n = take_typed_count(js, o->name, v, 0, err, errlen)) < 0)
            return -1;
        js->gpus = n;
        js->set |= FG_JS_GPUS;
        return 0;
    case O_GPUS_PER_NODE:
        if (parse_long(v, 1, 8, &n) < 0)
            return fg_cli_errf(err, errlen, "--%s: invalid value '%s' (expected 1 to 8)", o->name,
                               v);
        js->gpus_per_node = n;
        js->set |= FG_JS_GPUS_PER_NODE;
        return 0;
    case O_NODES:
        if (parse_long(v, 1, 10000, &n) < 0)
            return fg_cli_errf(err, errlen,
                               "--%s: invalid value '%s' (expected a whole number of nodes; "
                               "ranges such as 2-4 are not supported)",
                               o->name, v);
        js->nodes = n;
        js->set |= FG_JS_NODES;
        return 0;
    case O_GRES:
        return parse_gres(js, v, err, errlen);
    case O_TIME: {
        char terr[200];
        long long t;
        if (fg_parse_time(v, &t, terr, sizeof terr) < 0)
            return fg_cli_errf(err, errlen, "--%s: %s", o->name, terr);
        js->time_limit_s = t;
        js->set |= FG_JS_TIME;
        return 0;
    }
    case O_PRIORITY:
    case O_QOS: {
        const char *c = priority_class(v);
        if (!c)
            return fg_cli_errf(err, errlen,
                               "--%s: unknown priority class '%s' (expected high, normal or low)",
                               o->name, v);
        js->priority = c;
        js->set |= FG_JS_PRIORITY;
        return 0;
    }
    case O_RETRIES:
        if (parse_long(v, 0, 1000, &n) < 0)
            return fg_cli_errf(err, errlen, "--%s: invalid value '%s' (expected 0 to 1000)",
                               o->name, v);
        js->max_retries = n;
        js->set |= FG_JS_MAX_RETRIES;
        return 0;
    case O_ENV: {
        const char *eq = strchr(v, '=');
        if (!eq || !valid_env_key(v, (size_t)(eq - v)))
            return fg_cli_errf(err, errlen,
                               "--env: expected KEY=VALUE with KEY made of letters, digits and _ "
                               "(not starting with a digit), got '%s'",
                               v);
        if (strlen(eq + 1) > 65536)
            return fg_cli_errf(err, errlen, "--env: the value is too long");
        if (js->nenv >= FG_JOB_MAX_ENV)
            return fg_cli_errf(err, errlen, "--env: too many entries (at most %d)", FG_JOB_MAX_ENV);
        env_put(js, v, (size_t)(eq - v), eq + 1);
        return 0;
    }
    }
    return fg_cli_errf(err, errlen, "internal error: unhandled option");
}

static unsigned dialect_bit(fg_dialect_t d)
{
    return d == FG_DIALECT_CLI ? D_CLI : d == FG_DIALECT_FAIRGPU ? D_FG : D_SB;
}

int fg_jobspec_option(fg_jobspec_t *js, fg_dialect_t dialect, int argc, char *const *argv, int *i,
                      char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (*i >= argc)
        return 0;
    const char *a = argv[*i];
    if (a[0] != '-' || a[1] == '\0' || !strcmp(a, "--")) {
        if (dialect == FG_DIALECT_SBATCH && strcmp(a, "--")) {
            add_note(js, "ignoring #SBATCH word '%s'", a);
            (*i)++;
            return 1;
        }
        return 0;
    }
    unsigned bit = dialect_bit(dialect);
    const opt_t *o = NULL;
    const char *inline_val = NULL;
    char shown[80];
    if (a[1] == '-') {
        const char *nm = a + 2;
        const char *eq = strchr(nm, '=');
        size_t nl = eq ? (size_t)(eq - nm) : strlen(nm);
        for (size_t k = 0; k < sizeof OPTS / sizeof OPTS[0]; k++)
            if ((OPTS[k].dialects & bit) && strlen(OPTS[k].name) == nl &&
                !strncmp(OPTS[k].name, nm, nl))
                o = &OPTS[k];
        if (eq)
            inline_val = eq + 1;
        snprintf(shown, sizeof shown, "--%.*s", (int)(nl > 60 ? 60 : nl), nm);
    } else {
        for (size_t k = 0; k < sizeof OPTS / sizeof OPTS[0]; k++)
            if ((OPTS[k].dialects & bit) && OPTS[k].shortc && OPTS[k].shortc == a[1])
                o = &OPTS[k];
        if (a[2])
            inline_val = a + 2;
        snprintf(shown, sizeof shown, "-%c", a[1]);
    }
    if (!o) {
        if (dialect != FG_DIALECT_SBATCH)
            return 0;
        /* Ignoring these would silently change what the script means (one job instead of
         * an array, no ordering): refuse them. */
        static const char *const refused[] = {"--array", "-a", "--dependency", "-d"};
        for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
            if (!strcmp(shown, refused[k]))
                return fg_cli_errf(
                    err, errlen,
                    "%s: Slurm job arrays and dependencies are not supported; submit "
                    "the jobs one by one",
                    refused[k]);
        }
        /* Slurm options take a value unless they are flags; a separate next word that is
         * not an option is taken to be this one's value. */
        int skip = 1;
        if (!inline_val && *i + 1 < argc && argv[*i + 1][0] != '-')
            skip = 2;
        if (skip == 2)
            add_note(js, "ignoring #SBATCH %s %s", a, argv[*i + 1]);
        else
            add_note(js, "ignoring #SBATCH %s", a);
        *i += skip;
        return 1;
    }
    const char *v = inline_val;
    int used = 1;
    if (!v) {
        if (*i + 1 >= argc)
            return fg_cli_errf(err, errlen, "%s needs a value", shown);
        v = argv[*i + 1];
        used = 2;
    }
    if (apply(js, o, v, err, errlen) < 0)
        return -1;
    *i += used;
    return 1;
}

/* ------------------------------------------------------------------ word split -- */

int fg_split_words(const char *line, size_t len, char **words, int max_words, char *err,
                   size_t errlen)
{
    if (len > FG_SCRIPT_MAX_LINE)
        return fg_cli_errf(err, errlen, "line too long (%zu bytes; at most %d)", len,
                           FG_SCRIPT_MAX_LINE);
    int n = 0;
    char *buf = fg_xmalloc(len + 1);
    size_t p = 0;
    while (p < len) {
        while (p < len && (line[p] == ' ' || line[p] == '\t'))
            p++;
        if (p >= len || line[p] == '#')
            break;
        if (n >= max_words) {
            for (int k = 0; k < n; k++)
                free(words[k]);
            free(buf);
            return fg_cli_errf(err, errlen, "too many words on one line (at most %d)", max_words);
        }
        size_t bl = 0;
        while (p < len && line[p] != ' ' && line[p] != '\t') {
            char c = line[p];
            if (c == '\'' || c == '"') {
                char q = c;
                p++;
                while (p < len && line[p] != q) {
                    if (q == '"' && line[p] == '\\' && p + 1 < len &&
                        (line[p + 1] == '"' || line[p + 1] == '\\'))
                        p++;
                    buf[bl++] = line[p++];
                }
                if (p >= len) {
                    for (int k = 0; k < n; k++)
                        free(words[k]);
                    free(buf);
                    return fg_cli_errf(err, errlen, "unterminated %c quote", q);
                }
                p++; /* closing quote */
            } else {
                buf[bl++] = c;
                p++;
            }
        }
        buf[bl] = '\0';
        words[n++] = fg_xstrdup(buf);
    }
    free(buf);
    return n;
}

/* ------------------------------------------------------------------- overlay -- */

void fg_jobspec_set_command(fg_jobspec_t *js, int argc, char *const *argv)
{
    free_command(js);
    if (argc <= 0)
        return;
    js->command = fg_xcalloc((size_t)argc, sizeof *js->command);
    for (int k = 0; k < argc; k++)
        js->command[k] = fg_xstrdup(argv[k]);
    js->ncommand = (size_t)argc;
}

void fg_jobspec_append_command(fg_jobspec_t *js, int argc, char *const *argv)
{
    if (argc <= 0)
        return;
    js->command = fg_xrealloc(js->command, (js->ncommand + (size_t)argc) * sizeof *js->command);
    for (int k = 0; k < argc; k++)
        js->command[js->ncommand++] = fg_xstrdup(argv[k]);
}

void fg_jobspec_overlay(fg_jobspec_t *dst, const fg_jobspec_t *src)
{
    unsigned s = src->set;
    if (s & FG_JS_NAME)
        set_str(&dst->name, src->name);
    if (s & FG_JS_GPU_TYPE)
        set_str(&dst->gpu_type, src->gpu_type);
    if (s & FG_JS_MODEL)
        set_str(&dst->model, src->model);
    if (s & FG_JS_DATASET)
        set_str(&dst->dataset, src->dataset);
    if (s & FG_JS_ACCOUNT)
        set_str(&dst->account, src->account);
    if (s & FG_JS_TIME)
        dst->time_limit_s = src->time_limit_s;
    if (s & FG_JS_PRIORITY)
        dst->priority = src->priority;
    if (s & FG_JS_MAX_RETRIES)
        dst->max_retries = src->max_retries;
    /* The later layer's statement of GPU count wins as a whole: a total (--gpus)
     * replaces per-node counts and the reverse. */
    if (s & FG_JS_GPUS) {
        dst->gpus = src->gpus;
        dst->set &= ~(unsigned)(FG_JS_NODES | FG_JS_GPUS_PER_NODE);
    } else if (s & (FG_JS_NODES | FG_JS_GPUS_PER_NODE)) {
        dst->set &= ~(unsigned)FG_JS_GPUS;
    }
    if (s & FG_JS_NODES)
        dst->nodes = src->nodes;
    if (s & FG_JS_GPUS_PER_NODE)
        dst->gpus_per_node = src->gpus_per_node;
    dst->set |= s;
    for (size_t i = 0; i < src->nenv; i++)
        env_put(dst, src->env[i].key, strlen(src->env[i].key), src->env[i].val);
    if (src->command)
        fg_jobspec_set_command(dst, (int)src->ncommand, src->command);
    for (size_t i = 0; i < src->nnotes; i++)
        add_note(dst, "%s", src->notes[i]);
}

int fg_jobspec_finalize(fg_jobspec_t *js, char *err, size_t errlen)
{
    if (!(js->set & FG_JS_GPUS)) {
        long per = (js->set & FG_JS_GPUS_PER_NODE) ? js->gpus_per_node : 0;
        long nodes = (js->set & FG_JS_NODES) ? js->nodes : 1;
        if (per == 0 && nodes > 1)
            return fg_cli_errf(
                err, errlen, "%ld nodes but no GPU count: add --gres=gpu:8 (per node) or --gpus N",
                nodes);
        js->gpus = per ? per * nodes : 1;
        js->set |= FG_JS_GPUS;
    }
    if (js->gpus < 1 || (js->gpus > 8 && js->gpus % 8))
        return fg_cli_errf(
            err, errlen,
            "cannot run %ld GPUs: a job takes 1 to 8 GPUs on one node, or a multiple "
            "of 8 (whole nodes)",
            js->gpus);
    if (js->ncommand == 0 || !js->command[0][0])
        return fg_cli_errf(err, errlen,
                           "nothing to run: give a command (after --) or a job script");
    return 0;
}

json_t *fg_jobspec_to_json(const fg_jobspec_t *js)
{
    json_t *o = json_object();
    json_t *cmd = json_array();
    for (size_t i = 0; i < js->ncommand; i++)
        json_array_append_new(cmd, json_string(js->command[i]));
    json_object_set_new(o, "command", cmd);
    json_object_set_new(o, "gpus", json_integer(js->gpus));
    if (js->set & FG_JS_NAME)
        json_object_set_new(o, "name", json_string(js->name));
    if (js->set & FG_JS_GPU_TYPE)
        json_object_set_new(o, "gpu_type", json_string(js->gpu_type));
    if (js->set & FG_JS_MODEL)
        json_object_set_new(o, "model", json_string(js->model));
    if (js->set & FG_JS_DATASET)
        json_object_set_new(o, "dataset", json_string(js->dataset));
    if (js->set & FG_JS_ACCOUNT)
        json_object_set_new(o, "account", json_string(js->account));
    if (js->set & FG_JS_TIME)
        json_object_set_new(o, "time_limit_s", json_integer(js->time_limit_s));
    if (js->set & FG_JS_PRIORITY)
        json_object_set_new(o, "priority", json_string(js->priority));
    if (js->set & FG_JS_MAX_RETRIES)
        json_object_set_new(o, "max_retries", json_integer(js->max_retries));
    if (js->nenv) {
        json_t *env = json_object();
        for (size_t i = 0; i < js->nenv; i++)
            json_object_set_new(env, js->env[i].key, json_string(js->env[i].val));
        json_object_set_new(o, "env", env);
    }
    return o;
}

/* ------------------------------------------------------------------- scripts -- */

static int starts_directive(const char *l, size_t n, const char *tag)
{
    size_t t = strlen(tag);
    return n >= t && !memcmp(l, tag, t) && (n == t || l[t] == ' ' || l[t] == '\t');
}

int fg_script_looks_like(const char *text, size_t len)
{
    if (len >= 2 && text[0] == '#' && text[1] == '!')
        return 1;
    size_t p = 0;
    while (p < len) {
        const char *l = text + p;
        const char *nl = memchr(l, '\n', len - p);
        size_t n = nl ? (size_t)(nl - l) : len - p;
        if (starts_directive(l, n, "#FAIRGPU") || starts_directive(l, n, "#SBATCH"))
            return 1;
        p += n + 1;
    }
    return 0;
}

/* Parses one directive line's words into layer. */
static int directive(fg_jobspec_t *layer, fg_dialect_t d, const char *l, size_t n, char *err,
                     size_t errlen)
{
    char *words[FG_SCRIPT_MAX_TOKENS];
    int nw = fg_split_words(l, n, words, FG_SCRIPT_MAX_TOKENS, err, errlen);
    if (nw < 0)
        return -1;
    int rc = 0;
    int i = 0;
    while (i < nw) {
        int r = fg_jobspec_option(layer, d, nw, words, &i, err, errlen);
        if (r < 0) {
            rc = -1;
            break;
        }
        if (r == 0) {
            if (words[i][0] == '-')
                fg_cli_errf(err, errlen, "unknown option '%.60s' in a #FAIRGPU line", words[i]);
            else
                fg_cli_errf(err, errlen,
                            "unexpected word '%.60s' in a #FAIRGPU line (options only)", words[i]);
            rc = -1;
            break;
        }
    }
    for (int k = 0; k < nw; k++)
        free(words[k]);
    return rc;
}

/* The interpreter of a "#!" first line: program and at most one argument. Returns the
 * word count (0: none) and fills w[0..1] (malloc'd). */
static int shebang(const char *text, size_t len, char *w[2])
{
    if (len < 2 || text[0] != '#' || text[1] != '!')
        return 0;
    const char *nl = memchr(text, '\n', len);
    size_t n = nl ? (size_t)(nl - text) : len;
    size_t p = 2;
    while (p < n && (text[p] == ' ' || text[p] == '\t'))
        p++;
    size_t s = p;
    while (p < n && text[p] != ' ' && text[p] != '\t' && text[p] != '\r')
        p++;
    if (p == s)
        return 0;
    w[0] = fg_xmalloc(p - s + 1);
    memcpy(w[0], text + s, p - s);
    w[0][p - s] = '\0';
    while (p < n && (text[p] == ' ' || text[p] == '\t'))
        p++;
    size_t e = n;
    while (e > p && (text[e - 1] == ' ' || text[e - 1] == '\t' || text[e - 1] == '\r'))
        e--;
    if (e == p)
        return 1;
    w[1] = fg_xmalloc(e - p + 1);
    memcpy(w[1], text + p, e - p);
    w[1][e - p] = '\0';
    return 2;
}

int fg_script_parse(const char *text, size_t len, fg_jobspec_t *js, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (len > FG_SCRIPT_MAX_BYTES)
        return fg_cli_errf(err, errlen, "script too large (%zu bytes; at most %d)", len,
                           FG_SCRIPT_MAX_BYTES);
    if (memchr(text, '\0', len))
        return fg_cli_errf(err, errlen, "script contains NUL bytes (is it a binary?)");
    fg_jobspec_t sb, fg;
    fg_jobspec_init(&sb);
    fg_jobspec_init(&fg);
    size_t p = 0;
    int lineno = 0;
    int rc = 0;
    while (p < len) {
        const char *l = text + p;
        const char *nl = memchr(l, '\n', len - p);
        size_t n = nl ? (size_t)(nl - l) : len - p;
        p += n + 1;
        lineno++;
        if (n && l[n - 1] == '\r')
            n--;
        fg_jobspec_t *layer = NULL;
        fg_dialect_t d = FG_DIALECT_FAIRGPU;
        size_t skip = 0;
        if (starts_directive(l, n, "#FAIRGPU")) {
            layer = &fg;
            skip = 8;
        } else if (starts_directive(l, n, "#SBATCH")) {
            layer = &sb;
            d = FG_DIALECT_SBATCH;
            skip = 7;
        }
        if (!layer) {
            size_t k = 0;
            while (k < n && (l[k] == ' ' || l[k] == '\t'))
                k++;
            if (k == n || l[k] == '#')
                continue;
            break; /* the first command: no directives after it (Slurm's rule) */
        }
        char e2[400];
        if (directive(layer, d, l + skip, n - skip, e2, sizeof e2) < 0) {
            fg_cli_errf(err, errlen, "line %d: %s", lineno, e2);
            rc = -1;
            break;
        }
    }
    if (rc == 0) {
        fg_jobspec_overlay(js, &sb);
        fg_jobspec_overlay(js, &fg);
        char *w[2] = {NULL, NULL};
        int nw = shebang(text, len, w);
        char *argv[4];
        int ac = 0;
        if (nw == 0)
            argv[ac++] = "/bin/sh";
        for (int k = 0; k < nw; k++)
            argv[ac++] = w[k];
        argv[ac++] = "-c";
        char *body = fg_xmalloc(len + 1);
        memcpy(body, text, len);
        body[len] = '\0';
        argv[ac++] = body;
        fg_jobspec_set_command(js, ac, argv);
        free(body);
        free(w[0]);
        free(w[1]);
    }
    fg_jobspec_free(&sb);
    fg_jobspec_free(&fg);
    return rc;
}
