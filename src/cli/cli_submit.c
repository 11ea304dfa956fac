/*
 * cli_submit.c - `fairgpu submit`: a job from a command line, or from a job script with
 * #FAIRGPU and #SBATCH lines, sent as POST /v1/jobs.
 *
 * Options are layered: those of the command line override the script's #FAIRGPU
 * lines, which override its #SBATCH lines (script.c); the result is checked and sent.
 * Example: `fairgpu submit --gpus 2 train.sh --lr 0.1` reads train.sh (a script: it
 * ends in ".sh"), takes its directives, sets 2 GPUs over them, names the job
 * "train.sh" and runs [interpreter, -c, text, train.sh, --lr, 0.1].
 */
#include "cli/cli.h"
#include "cli/script.h"

#include "common/xalloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char SUBMIT_HELP[] =
    "usage: fairgpu submit [OPTIONS] [--] COMMAND [ARG...]\n"
    "       fairgpu submit [OPTIONS] SCRIPT [ARG...]     (SCRIPT '-' reads standard input)\n"
    "\n"
    "  --gpus N | --gpus TYPE:N    GPUs: 1-8 on one node, or a multiple of 8 (whole nodes)\n"
    "  --gpu-type T                 e.g. h100 (default: any)\n"
    "  --time T                     limit: minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]], or\n"
    "                               90s / 30m / 2h / 1d / 1h30m\n"
    "  --priority high|normal|low   (also --qos); low is preemptible and cheaper\n"
    "  --name N (-J, --job-name)    --model M   --dataset D   --account A (-A)\n"
    "  --max-retries N              --env KEY=VALUE (repeatable)\n"
    "  --nodes N, --gres=gpu[:TYPE]:N, --gpus-per-node N   Slurm's per-node GPU counts\n"
    "  --idempotency-key K          the same key twice returns the first job\n"
    "  --dry-run                    print the request body instead of sending it\n"
    "  --dry-run --estimate         ask when it would start now (nothing is submitted):\n"
    "                               \"would start in ~3 min (1-6 min), source: user history\"\n"
    "  --json                       print the server's JSON\n"
    "\n"
    "A SCRIPT's '#FAIRGPU' lines hold the same options; its '#SBATCH' lines are read too\n"
    "(--gres=gpu:N, --gpus, --time/-t, --job-name/-J, --qos, --nodes/-N, --account/-A;\n"
    "others are ignored with a note). Command-line options override #FAIRGPU lines,\n"
    "which override #SBATCH lines. The script runs as [interpreter, -c, text], the\n"
    "interpreter coming from its #! line (default /bin/sh).\n";

/* One submission as its command line is read. */
typedef struct {
    fg_jobspec_t cli; /* the command line's options */
    fg_jobspec_t job; /* the script's, then the whole job */
    const char *idem; /* --idempotency-key, or NULL */
    int json, dry;    /* --json, --dry-run */
    int estimate;     /* --estimate (with --dry-run) */
    int explicit_cmd; /* a "--" came: what follows is a command, never a script */
    int i;            /* the argument being read */
    char err[512];
} submit_t;

/* Reads a whole file (or stdin for "-") up to FG_SCRIPT_MAX_BYTES + 1 bytes. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f)
        return NULL;
    size_t cap = 8192, n = 0;
    char *buf = fg_xmalloc(cap + 1);
    for (;;) {
        if (n == cap) {
            if (cap > FG_SCRIPT_MAX_BYTES)
                break;
            cap *= 2;
            buf = fg_xrealloc(buf, cap + 1);
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
    }
    int err = ferror(f);
    if (f != stdin)
        fclose(f);
    if (err) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Is path a job script rather than a program to run? A regular file that starts with
 * "#!", holds a directive, or ends in ".sh". */
static int is_script_path(const char *path)
{
    if (!strcmp(path, "-"))
        return 1;
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
        return 0;
    size_t pl = strlen(path);
    if (pl > 3 && !strcmp(path + pl - 3, ".sh"))
        return 1;
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (memchr(buf, '\0', n))
        return 0;
    return fg_script_looks_like(buf, n);
}

/* "--idempotency-key K" or "--idempotency-key=K" at argv[s->i] into s->idem. Returns -1
 * to go on, else 2 after a usage message. */
static int idempotency_key(submit_t *s, int argc, char **argv)
{
    const char *a = argv[s->i];
    if (a[17] == '=')
        s->idem = a + 18;
    else if (s->i + 1 < argc)
        s->idem = argv[++s->i];
    else
        return cli_usage("submit", "--idempotency-key needs a value");
    if (!*s->idem || strlen(s->idem) > 255 || strpbrk(s->idem, "\r\n"))
        return cli_usage("submit", "--idempotency-key: 1 to 255 characters on one line");
    return -1;
}

/* Reads submit's options, up to the command or the script, into s. Returns -1 to go on
 * (s->i at the first operand), else the exit status. */
static int submit_options(submit_t *s, int argc, char **argv)
{
    while (s->i < argc) {
        const char *a = argv[s->i];
        if (!strcmp(a, "--")) {
            s->explicit_cmd = 1;
            s->i++;
            break;
        }
        if (a[0] != '-' || !a[1])
            break;
        int r =
            fg_jobspec_option(&s->cli, FG_DIALECT_CLI, argc, argv, &s->i, s->err, sizeof s->err);
        if (r < 0)
            return cli_usage("submit", "%s", s->err);
        if (r == 1)
            continue;
        if (!strcmp(a, "--json"))
            s->json = 1;
        else if (!strcmp(a, "--dry-run"))
            s->dry = 1;
        else if (!strcmp(a, "--estimate"))
            s->estimate = 1;
        else if (cli_is_help(a)) {
            fputs(SUBMIT_HELP, stdout);
            return 0;
        } else if (!strcmp(a, "--idempotency-key") || !strncmp(a, "--idempotency-key=", 18)) {
            if ((r = idempotency_key(s, argc, argv)) >= 0)
                return r;
        } else
            return cli_usage("submit", "unknown option '%s'", a);
        s->i++;
    }
    return -1;
}

/* Names the job after its script file, when that name fits. */
static void name_after_script(fg_jobspec_t *job, const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (*base && strlen(base) <= FG_JOB_MAX_NAME) {
        job->name = fg_xstrdup(base);
        job->set |= FG_JS_NAME;
    }
}

/* Reads the script at argv[s->i] into s->job; the arguments after it become $1...
 * Returns -1 to go on, else the exit status. */
static int submit_script(submit_t *s, int argc, char **argv)
{
    const char *path = argv[s->i];
    size_t len = 0;
    char *text = slurp(path, &len);
    if (!text) {
        fprintf(stderr, "fairgpu submit: cannot read %s: %s\n", path, strerror(errno));
        return 1;
    }
    int bad = fg_script_parse(text, len, &s->job, s->err, sizeof s->err) < 0;
    free(text);
    if (bad) {
        fprintf(stderr, "fairgpu submit: %s: %s\n", strcmp(path, "-") ? path : "stdin", s->err);
        return 2;
    }
    /* Script arguments become $1...: [interp..., -c, text, $0, args...]. */
    if (s->i + 1 < argc)
        fg_jobspec_append_command(&s->job, argc - s->i, argv + s->i);
    if (!(s->job.set & FG_JS_NAME) && strcmp(path, "-"))
        name_after_script(&s->job, path);
    return -1;
}

/* The whole job: the script or the command, the command line's options over it,
 * checked. Returns -1 to go on, else the exit status. */
static int submit_job(submit_t *s, int argc, char **argv)
{
    if (!s->explicit_cmd && s->i < argc && is_script_path(argv[s->i])) {
        int r = submit_script(s, argc, argv);
        if (r >= 0)
            return r;
    } else if (s->i < argc) {
        fg_jobspec_set_command(&s->cli, argc - s->i, argv + s->i);
    }
    fg_jobspec_overlay(&s->job, &s->cli);
    for (size_t k = 0; k < s->job.nnotes; k++)
        fprintf(stderr, "fairgpu submit: note: %s\n", s->job.notes[k]);
    if (fg_jobspec_finalize(&s->job, s->err, sizeof s->err) < 0)
        return cli_usage("submit", "%s", s->err);
    return -1;
}

/* POSTs the job's body and says what the server made of it. */
static int submit_send(const submit_t *s, json_t *body)
{
    cli_ctx_t x;
    int rc = cli_open(&x, 1);
    if (rc)
        return rc;
    char hdr[300];
    const char *headers[2] = {NULL, NULL};
    if (s->idem) {
        snprintf(hdr, sizeof hdr, "Idempotency-Key: %s", s->idem);
        headers[0] = hdr;
    }
    json_t *res;
    rc = cli_call(&x, "POST", "/v1/jobs", body, headers, &res);
    if (!rc && s->json)
        cli_print_json(res);
    else if (!rc) {
        char id[128], st[32];
        printf("Submitted job %s (%s)\n", cli_jfmt(res, "id", id, sizeof id),
               *cli_jfmt(res, "state", st, sizeof st) ? st : "PENDING");
    }
    json_decref(res);
    cli_close(&x);
    return rc;
}

int cli_cmd_submit(int argc, char **argv)
{
    submit_t s = {.i = 1};
    fg_jobspec_init(&s.cli);
    fg_jobspec_init(&s.job);
    int rc = submit_options(&s, argc, argv);
    if (rc < 0)
        rc = submit_job(&s, argc, argv);
    if (rc < 0) {
        json_t *body = fg_jobspec_to_json(&s.job);
        if (s.estimate && !s.dry)
            rc = cli_usage("submit", "--estimate goes with --dry-run");
        else if (s.estimate)
            rc = cli_submit_estimate(body, s.json);
        else if (s.dry)
            cli_print_json(body);
        if (!s.estimate)
            rc = s.dry ? 0 : submit_send(&s, body);
        json_decref(body);
    }
    fg_jobspec_free(&s.cli);
    fg_jobspec_free(&s.job);
    return rc;
}
