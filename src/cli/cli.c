/*
 * cli.c - the fairgpu command-line client: dispatch, the connection to the controller,
 * usage errors and the option parsing every command shares.
 *
 * Every command talks to the controller's HTTP API (docs/cli.md). Output: tables for
 * people, --json for scripts (the server's JSON). Exit status: 0 success, 1 the server
 * refused or could not be reached (its message and error code on stderr), 2 a usage
 * error. The commands live by family in cli_*.c (see cli.h).
 *
 * Example: `fairgpu --ca-file ca.pem jobs --mine` → fg_cmd_client takes --ca-file out
 * of argv (an option of every command), finds "jobs" in COMMANDS and runs
 * cli_cmd_jobs(2, {"jobs", "--mine"}).
 */
#include "cli/cli.h"

#include "common/commands.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ------------------------------------------------------------ connection -- */

/* --ca-file FILE of this invocation (it overrides FAIRGPU_CA_FILE and "ca_file") */
static const char *g_ca_file;

int cli_open(cli_ctx_t *x, int use_token)
{
    memset(x, 0, sizeof *x);
    if (fg_cli_config_load(&x->cfg) < 0) {
        fg_cli_config_free(&x->cfg);
        return 1;
    }
    if (fg_client_init(&x->c, x->cfg.url, use_token ? x->cfg.token : NULL) < 0) {
        fg_cli_config_free(&x->cfg);
        return 1;
    }
    fg_client_set_ca(&x->c, cli_ca_file(&x->cfg));
    return 0;
}

const char *cli_ca_file(const fg_cli_config_t *cfg)
{
    return g_ca_file ? g_ca_file : cfg->ca_file;
}

void cli_close(cli_ctx_t *x)
{
    fg_client_free(&x->c);
    fg_cli_config_free(&x->cfg);
}

void cli_set_url(cli_ctx_t *x, const char *url)
{
    free(x->c.url);
    x->c.url = fg_cli_normalize_url(url);
}

int cli_call(cli_ctx_t *x, const char *method, const char *path, json_t *body,
             const char *const *headers, json_t **out)
{
    fg_resp_t r;
    if (out)
        *out = NULL;
    if (fg_client_request(&x->c, method, path, body, headers, &r) < 0)
        return 1;
    if (r.status < 200 || r.status >= 300) {
        int rc = fg_client_report(&x->c, &r);
        fg_resp_free(&r);
        return rc;
    }
    if (r.len && !r.json) {
        fprintf(stderr, "fairgpu: the server's reply to %s %s is not JSON\n", method, path);
        fg_resp_free(&r);
        return 1;
    }
    if (out)
        *out = r.json ? json_incref(r.json) : json_null();
    fg_resp_free(&r);
    return 0;
}

int cli_fetch(const char *method, const char *path, json_t *body, json_t **out)
{
    cli_ctx_t x;
    if (out)
        *out = NULL;
    int rc = cli_open(&x, 1);
    if (rc)
        return rc;
    rc = cli_call(&x, method, path, body, NULL, out);
    cli_close(&x);
    return rc;
}

const char *cli_path(char *buf, size_t n, const char *prefix, const char *id, const char *suffix)
{
    char *e = fg_client_escape(id);
    snprintf(buf, n, "%s%s%s", prefix, e, suffix ? suffix : "");
    free(e);
    return buf;
}

void cli_query_add(char *buf, size_t n, const char *k, const char *v)
{
    if (!v)
        return;
    char *e = fg_client_escape(v);
    size_t l = strlen(buf);
    snprintf(buf + l, n - l, "%c%s=%s", strchr(buf, '?') ? '&' : '?', k, e);
    free(e);
}

/* -------------------------------------------------------- options, usage -- */

int cli_usage(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "fairgpu %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'fairgpu %s --help'.\n", cmd);
    return 2;
}

int cli_is_help(const char *a)
{
    return !strcmp(a, "-h") || !strcmp(a, "--help");
}

void cli_getopt_reset(void)
{
    optind = 0;
    opterr = 1;
}

int cli_json_flag(const char *cmd, int argc, char **argv, int *json, const char *help)
{
    static const struct option lo[] = {
        {"json", no_argument, 0, 'j'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        if (c == 'j')
            *json = 1;
        else if (c == 'h') {
            fputs(help, stdout);
            return 0;
        } else
            return cli_usage(cmd, "bad option");
    }
    return -1;
}

int cli_parse_ll(const char *cmd, const char *opt, const char *s, long long min, long long max,
                 long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < min || v > max) {
        cli_usage(cmd, "%s: invalid value '%s' (expected a whole number from %lld to %lld)", opt, s,
                  min, max);
        return -1;
    }
    *out = v;
    return 0;
}

json_t *cli_parse_weight(const char *cmd, const char *s)
{
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    if (!*s || *end || errno || !(d >= 0) || d > 1e9) {
        cli_usage(cmd, "--weight: invalid value '%s' (expected a number >= 0)", s);
        return NULL;
    }
    if (d == (double)(long long)d)
        return json_integer((json_int_t)d);
    return json_real(d);
}

int cli_parse_bool(const char *s, int *out)
{
    if (!strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcmp(s, "1")) {
        *out = 1;
        return 0;
    }
    if (!strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcmp(s, "0")) {
        *out = 0;
        return 0;
    }
    return -1;
}

/* ------------------------------------------------------------ subcommands -- */

int cli_sub_start(const char *cmd, int argc, char **argv, const char *help, cli_op_t *op)
{
    if (argc < 2 || cli_is_help(argv[1])) {
        fputs(help, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    *op = (cli_op_t){.cmd = cmd, .sub = argv[1], .argc = argc - 1, .argv = argv + 1};
    return -1;
}

void cli_sub_operands(cli_op_t *op)
{
    op->nargs = op->argc - optind;
    op->args = op->argv + optind;
}

int cli_sub_run(const cli_sub_t *subs, size_t n, const cli_op_t *op)
{
    char names[256] = "";
    for (size_t k = 0; k < n; k++) {
        if (!strcmp(op->sub, subs[k].name))
            return subs[k].run(op);
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s%s", k ? ", " : "", subs[k].name);
    }
    return cli_usage(op->cmd, "unknown subcommand '%s' (%s)", op->sub, names);
}

int cli_sub_json_run(const char *cmd, int argc, char **argv, const char *help,
                     const cli_sub_t *subs, size_t n)
{
    cli_op_t op;
    int r = cli_sub_start(cmd, argc, argv, help, &op);
    if (r < 0)
        r = cli_json_flag(cmd, op.argc, op.argv, &op.json, help);
    if (r >= 0)
        return r;
    cli_sub_operands(&op);
    return cli_sub_run(subs, n, &op);
}

/* --------------------------------------------------------------- dispatch -- */

typedef struct {
    const char *name;
    int (*fn)(int, char **);
} command_t;

static const command_t COMMANDS[] = {
    {"login", cli_cmd_login},     {"logout", cli_cmd_logout},
    {"whoami", cli_cmd_whoami},   {"register", cli_cmd_register},
    {"submit", cli_cmd_submit},   {"jobs", cli_cmd_jobs},
    {"show", cli_cmd_show},       {"cancel", cli_cmd_cancel},
    {"events", cli_cmd_events},   {"logs", cli_cmd_logs},
    {"nodes", cli_cmd_nodes},     {"share", cli_cmd_share},
    {"token", cli_cmd_token},     {"user", cli_cmd_user},
    {"account", cli_cmd_account}, {"node-token", cli_cmd_node_token},
    {"usage", cli_cmd_usage},     {"invoice", cli_cmd_invoice},
    {"credit", cli_cmd_credit},   {"whatif", cli_cmd_whatif},
    {"why", cli_cmd_why},         {"report", cli_cmd_report},
};

/* Takes every "--ca-file FILE" / "--ca-file=FILE" before a "--" out of argv (a client
 * option of every command); returns the new argc, or -1 when FILE is missing. */
static int take_ca_file(int argc, char **argv)
{
    int out = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--")) {
            while (i < argc)
                argv[out++] = argv[i++];
            break;
        }
        if (!strncmp(argv[i], "--ca-file=", 10)) {
            g_ca_file = argv[i] + 10;
        } else if (!strcmp(argv[i], "--ca-file")) {
            if (i + 1 >= argc)
                return -1;
            g_ca_file = argv[++i];
        } else {
            argv[out++] = argv[i];
        }
    }
    argv[out] = NULL;
    return out;
}

/* The client command named name, or NULL. */
static const command_t *find_command(const char *name)
{
    for (size_t k = 0; k < sizeof COMMANDS / sizeof COMMANDS[0]; k++)
        if (!strcmp(name, COMMANDS[k].name))
            return &COMMANDS[k];
    return NULL;
}

int fg_cmd_client(int argc, char **argv)
{
    if (argc < 1 || !argv[0])
        return -1;
    const command_t *cmd = find_command(argv[0]);
    if (!cmd)
        return -1;
    argc = take_ca_file(argc, argv);
    if (argc < 0) {
        fprintf(stderr, "fairgpu %s: --ca-file needs a FILE\n", argv[0]);
        return 2;
    }
    if (g_ca_file && access(g_ca_file, R_OK) != 0) {
        fprintf(stderr, "fairgpu %s: --ca-file %s: %s\n", argv[0], g_ca_file, strerror(errno));
        return 2;
    }
    int rc = cmd->fn(argc, argv);
    fflush(stdout);
    return rc;
}
