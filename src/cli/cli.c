/*
 * cli.c - the fairgpu command-line client: login, submit, jobs, show, cancel, events,
 * logs, nodes, share, token, user, account, register.
 *
 * Every command talks to the controller's HTTP API (docs: shared API contract and
 * docs/cli.md). Output: tables for people, --json for scripts (the server's JSON).
 * Exit status: 0 success, 1 the server refused or could not be reached (its message and
 * error code on stderr), 2 a usage error.
 */
#include "cli/client.h"
#include "cli/config.h"
#include "cli/script.h"
#include "cli/table.h"
#include "cli/timespec.h"
#include "common/commands.h"
#include "common/xalloc.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- helpers -- */

typedef struct {
    fg_cli_config_t cfg;
    fg_client_t c;
    int json;
} ctx_t;

static int usage_err(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints a usage error for cmd; returns 2. */
static int usage_err(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "fairgpu %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'fairgpu %s --help'.\n", cmd);
    return 2;
}

/* --ca-file FILE of this invocation (it overrides FAIRGPU_CA_FILE and "ca_file") */
static const char *g_ca_file;

/* Loads the config and opens a client (with the token when use_token). Returns 0 or
 * the exit status to return. */
static int ctx_open(ctx_t *x, int use_token)
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
    fg_client_set_ca(&x->c, g_ca_file ? g_ca_file : x->cfg.ca_file);
    return 0;
}

static void ctx_close(ctx_t *x)
{
    fg_client_free(&x->c);
    fg_cli_config_free(&x->cfg);
}

/*
 * Sends a request and expects a 2xx JSON reply (or an empty one for 204). On success
 * returns 0 and *out (when out is not NULL) is a new reference to the JSON (json null
 * for an empty body). Otherwise prints why and returns 1.
 */
static int call(ctx_t *x, const char *method, const char *path, json_t *body,
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

static void print_json(json_t *j)
{
    json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', stdout);
}

/* A member as a string (NULL when absent or not a string). */
static const char *jstr(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/* Any scalar member formatted into buf ("" when absent or null). */
static const char *jfmt(json_t *o, const char *k, char *buf, size_t n)
{
    json_t *v = json_object_get(o, k);
    buf[0] = '\0';
    if (json_is_string(v))
        snprintf(buf, n, "%s", json_string_value(v));
    else if (json_is_integer(v))
        snprintf(buf, n, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, n, "%.4g", json_real_value(v));
    else if (json_is_true(v))
        snprintf(buf, n, "yes");
    else if (json_is_false(v))
        snprintf(buf, n, "no");
    return buf;
}

static int jint(json_t *o, const char *k, long long *v)
{
    json_t *j = json_object_get(o, k);
    if (json_is_integer(j)) {
        *v = (long long)json_integer_value(j);
        return 1;
    }
    if (json_is_real(j)) {
        *v = (long long)json_real_value(j);
        return 1;
    }
    return 0;
}

/* A Unix time member as local "YYYY-MM-DD HH:MM:SS" ("" when absent, null or 0). */
static const char *jtime(json_t *o, const char *k, char *buf, size_t n)
{
    long long t;
    buf[0] = '\0';
    if (!jint(o, k, &t) || t <= 0)
        return buf;
    time_t tt = (time_t)t;
    struct tm tm;
    if (localtime_r(&tt, &tm))
        strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
    return buf;
}

/* A list reply's items (borrowed), accepting a bare array too. */
static json_t *items_of(json_t *j)
{
    if (json_is_array(j))
        return j;
    json_t *it = json_object_get(j, "items");
    return json_is_array(it) ? it : NULL;
}

/* The terminal settings to restore if the user interrupts a password prompt. */
static struct termios saved_tty;
static volatile sig_atomic_t tty_saved;

static void restore_tty_and_die(int sig)
{
    if (tty_saved)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tty);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Reads a secret line: from the terminal without echo, or from stdin. Returns a
 * malloc'd string without the line end, or NULL (message on stderr). */
static char *read_secret(const char *prompt, int force_stdin)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int tty = !force_stdin && isatty(STDIN_FILENO);
    if (tty) {
        struct termios old, quiet;
        if (tcgetattr(STDIN_FILENO, &old) < 0) {
            fprintf(stderr, "fairgpu: cannot read the terminal: %s\n", strerror(errno));
            return NULL;
        }
        quiet = old;
        quiet.c_lflag &= ~(tcflag_t)ECHO;
        quiet.c_lflag |= ECHONL;
        fputs(prompt, stderr);
        fflush(stderr);
        saved_tty = old;
        tty_saved = 1;
        void (*oint)(int) = signal(SIGINT, restore_tty_and_die);
        void (*oterm)(int) = signal(SIGTERM, restore_tty_and_die);
        void (*ohup)(int) = signal(SIGHUP, restore_tty_and_die);
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
        n = getline(&line, &cap, stdin);
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
        tty_saved = 0;
        signal(SIGINT, oint);
        signal(SIGTERM, oterm);
        signal(SIGHUP, ohup);
    } else {
        n = getline(&line, &cap, stdin);
    }
    if (n < 0) {
        free(line);
        fprintf(stderr, "fairgpu: no password given%s\n",
                tty ? "" : " on standard input (give it on one line)");
        return NULL;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    return line;
}

/* Reads a plain line from the terminal (for a user name); NULL on end of input. */
static char *read_line(const char *prompt)
{
    char *line = NULL;
    size_t cap = 0;
    fputs(prompt, stderr);
    fflush(stderr);
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        return NULL;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    return line;
}

static void wipe_free(char *s)
{
    if (!s)
        return;
    volatile char *p = s;
    while (*p)
        *p++ = '\0';
    free(s);
}

/* A whole number in [min, max], or -1 with a usage message. */
static int parse_ll(const char *cmd, const char *opt, const char *s, long long min, long long max,
                    long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < min || v > max) {
        usage_err(cmd, "%s: invalid value '%s' (expected a whole number from %lld to %lld)", opt, s,
                  min, max);
        return -1;
    }
    *out = v;
    return 0;
}

/* A non-negative weight: integral values go out as JSON integers, others as reals. */
static json_t *parse_weight(const char *cmd, const char *s)
{
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    if (!*s || *end || errno || !(d >= 0) || d > 1e9) {
        usage_err(cmd, "--weight: invalid value '%s' (expected a number >= 0)", s);
        return NULL;
    }
    if (d == (double)(long long)d)
        return json_integer((json_int_t)d);
    return json_real(d);
}

static int parse_bool(const char *s, int *out)
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

/* "/v1/jobs/<escaped id><suffix>" into buf. */
static const char *job_path(char *buf, size_t n, const char *id, const char *suffix)
{
    char *e = fg_client_escape(id);
    snprintf(buf, n, "/v1/jobs/%s%s", e, suffix ? suffix : "");
    free(e);
    return buf;
}

/* Appends "&k=<escaped v>" (or "?k=..." for the first) to a query in buf. */
static void query_add(char *buf, size_t n, const char *k, const char *v)
{
    if (!v)
        return;
    char *e = fg_client_escape(v);
    size_t l = strlen(buf);
    snprintf(buf + l, n - l, "%c%s=%s", strchr(buf, '?') ? '&' : '?', k, e);
    free(e);
}

static int is_help(const char *a)
{
    return !strcmp(a, "-h") || !strcmp(a, "--help");
}

/* getopt_long state must be reset before each parse (the CLI may run several in one
 * process, e.g. in tests). */
static void getopt_reset(void)
{
    optind = 0;
    opterr = 1;
}

/* Parses a command whose only options are --json and --help (help text printed
 * as is). Returns -1 to go on, else the exit status to return. */
static int sub_json_flag(const char *cmd, int argc, char **argv, int *json, const char *help)
{
    static const struct option lo[] = {
        {"json", no_argument, 0, 'j'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    getopt_reset();
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        if (c == 'j')
            *json = 1;
        else if (c == 'h') {
            fputs(help, stdout);
            return 0;
        } else
            return usage_err(cmd, "bad option");
    }
    return -1;
}

/* --------------------------------------------------------- login, logout -- */

static const char LOGIN_HELP[] =
    "usage: fairgpu login [USERNAME] [--url URL] [--password-stdin]\n"
    "Logs in and saves the session token in $XDG_CONFIG_HOME/fairgpu/config.json\n"
    "(or ~/.config/fairgpu/config.json), mode 0600. The password is read from the\n"
    "terminal without echo, or from standard input when it is not a terminal.\n";

static int cmd_login(int argc, char **argv)
{
    static const struct option lo[] = {{"url", required_argument, 0, 'u'},
                                       {"password-stdin", no_argument, 0, 'P'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    const char *url = NULL;
    int pw_stdin = 0, c;
    getopt_reset();
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 'u':
            url = optarg;
            break;
        case 'P':
            pw_stdin = 1;
            break;
        case 'h':
            fputs(LOGIN_HELP, stdout);
            return 0;
        default:
            return usage_err("login", "bad option");
        }
    }
    if (argc - optind > 1)
        return usage_err("login", "too many arguments");
    ctx_t x;
    int rc = ctx_open(&x, 0);
    if (rc)
        return rc;
    if (url) {
        free(x.c.url);
        x.c.url = fg_cli_normalize_url(url);
    }
    char *user = NULL;
    if (optind < argc)
        user = fg_xstrdup(argv[optind]);
    else if (!pw_stdin && isatty(STDIN_FILENO))
        user = read_line("Username: ");
    else if (x.cfg.username)
        user = fg_xstrdup(x.cfg.username);
    if (!user || !*user) {
        free(user);
        ctx_close(&x);
        return usage_err("login", "give a user name");
    }
    char *pw = read_secret("Password: ", pw_stdin);
    if (!pw) {
        free(user);
        ctx_close(&x);
        return 1;
    }
    json_t *body = json_pack("{s:s, s:s}", "username", user, "password", pw);
    json_t *res = NULL;
    rc = call(&x, "POST", "/v1/sessions", body, NULL, &res);
    json_object_set_new(body, "password", json_string(""));
    json_decref(body);
    wipe_free(pw);
    const char *token = jstr(res, "token");
    if (!rc && !token) {
        fprintf(stderr, "fairgpu: the server's login reply has no token\n");
        rc = 1;
    }
    if (!rc) {
        rc = fg_cli_config_save(x.c.url, token, user) < 0 ? 1 : 0;
        if (!rc) {
            char exp[64];
            char *path = fg_cli_config_path();
            printf("Logged in to %s as %s", x.c.url, user);
            if (*jtime(res, "expires_at", exp, sizeof exp))
                printf(" (session expires %s)", exp);
            printf(".\nToken saved in %s.\n", path ? path : "the config file");
            free(path);
            if (x.cfg.token_from_env)
                fprintf(stderr, "fairgpu: note: FAIRGPU_TOKEN is set and takes precedence over "
                                "the saved login\n");
        }
    }
    json_decref(res);
    free(user);
    ctx_close(&x);
    return rc;
}

static int cmd_logout(int argc, char **argv)
{
    if (argc > 1 && is_help(argv[1])) {
        puts("usage: fairgpu logout\nEnds the saved session on the server and removes its "
             "token from the config file.");
        return 0;
    }
    if (argc > 1)
        return usage_err("logout", "takes no arguments");
    fg_cli_config_t cfg;
    if (fg_cli_config_load(&cfg) < 0) {
        fg_cli_config_free(&cfg);
        return 1;
    }
    /* The saved token, not FAIRGPU_TOKEN: reload the file's value. */
    char *saved = NULL;
    {
        const char *et = getenv("FAIRGPU_TOKEN");
        if (cfg.token_from_env) {
            char *copy = fg_xstrdup(et);
            unsetenv("FAIRGPU_TOKEN");
            fg_cli_config_t f2;
            if (fg_cli_config_load(&f2) == 0 && f2.token)
                saved = fg_xstrdup(f2.token);
            fg_cli_config_free(&f2);
            setenv("FAIRGPU_TOKEN", copy, 1);
            free(copy);
        } else if (cfg.token) {
            saved = fg_xstrdup(cfg.token);
        }
    }
    if (!saved) {
        printf("Not logged in%s.\n",
               cfg.token_from_env ? " (FAIRGPU_TOKEN is set; unset it yourself)" : "");
        fg_cli_config_free(&cfg);
        return 0;
    }
    int rc = 0;
    fg_client_t c;
    if (fg_client_init(&c, cfg.url, saved) == 0) {
        fg_resp_t r;
        if (fg_client_request(&c, "DELETE", "/v1/sessions/current", NULL, NULL, &r) < 0) {
            rc = 1;
        } else {
            if (r.status >= 300 && r.status != 401) {
                fg_client_report(&c, &r);
                rc = 1;
            }
            fg_resp_free(&r);
        }
        fg_client_free(&c);
    } else {
        rc = 1;
    }
    wipe_free(saved);
    if (fg_cli_config_save(cfg.url, NULL, cfg.username) < 0)
        rc = 1;
    else if (rc)
        fprintf(stderr, "fairgpu: the token was removed from the config file, but the server "
                        "could not end the session\n");
    else
        printf("Logged out of %s.\n", cfg.url);
    fg_cli_config_free(&cfg);
    return rc;
}

/* ------------------------------------------------------- whoami, register -- */

static int cmd_whoami(int argc, char **argv)
{
    int json = 0;
    int r =
        sub_json_flag("whoami", argc, argv, &json,
                      "usage: fairgpu whoami [--json]\nShows the logged-in user and the server.\n");
    if (r >= 0)
        return r;
    if (optind < argc)
        return usage_err("whoami", "takes no arguments");
    ctx_t x;
    int rc = ctx_open(&x, 1);
    if (rc)
        return rc;
    json_t *me;
    rc = call(&x, "GET", "/v1/me", NULL, NULL, &me);
    if (!rc) {
        if (json)
            print_json(me);
        else {
            char b[256];
            printf("user:     %s\n", jfmt(me, "username", b, sizeof b));
            printf("id:       %s\n", jfmt(me, "id", b, sizeof b));
            printf("role:     %s\n", jfmt(me, "role", b, sizeof b));
            printf("account:  %s\n", jfmt(me, "account", b, sizeof b));
            printf("email:    %s\n", jfmt(me, "email", b, sizeof b));
            printf("server:   %s\n", x.c.url);
        }
    }
    json_decref(me);
    ctx_close(&x);
    return rc;
}

static const char REGISTER_HELP[] =
    "usage: fairgpu register USERNAME --email EMAIL [--account A] [--password-stdin]\n"
    "       [--setup-token-file FILE] [--url URL] [--json]\n"
    "Creates a user (POST /v1/users). With --setup-token-file (the server's\n"
    "DATA_DIR/setup-token, readable once it started with no admin) the user is the\n"
    "first admin, and the token is used up. --account is honoured only when an admin\n"
    "(logged in) creates the user.\n";

/* Reads the one-time setup token from path (its first line) into a malloc'd string;
 * NULL with a message on stderr if it cannot. */
static char *read_setup_token(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "fairgpu: cannot read the setup token file '%s': %s\n", path,
                strerror(errno));
        return NULL;
    }
    char buf[256];
    char *line = fgets(buf, sizeof buf, f);
    fclose(f);
    if (line)
        buf[strcspn(buf, "\r\n")] = 0;
    if (!line || !buf[0]) {
        fprintf(stderr, "fairgpu: the setup token file '%s' is empty\n", path);
        return NULL;
    }
    char *tok = fg_xstrdup(buf);
    memset(buf, 0, sizeof buf);
    return tok;
}

/* register and "user create": the same request, with or without a token. */
static int create_user(const char *cmd, int argc, char **argv, int with_token)
{
    static const struct option lo[] = {
        {"email", required_argument, 0, 'e'},    {"account", required_argument, 0, 'a'},
        {"password-stdin", no_argument, 0, 'P'}, {"setup-token-file", required_argument, 0, 'S'},
        {"url", required_argument, 0, 'u'},      {"json", no_argument, 0, 'j'},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
    const char *email = NULL, *account = NULL, *url = NULL, *setup_file = NULL;
    int pw_stdin = 0, json = 0, c;
    getopt_reset();
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 'e':
            email = optarg;
            break;
        case 'a':
            account = optarg;
            break;
        case 'P':
            pw_stdin = 1;
            break;
        case 'S':
            setup_file = optarg;
            break;
        case 'u':
            url = optarg;
            break;
        case 'j':
            json = 1;
            break;
        case 'h':
            fputs(REGISTER_HELP, stdout);
            return 0;
        default:
            return usage_err(cmd, "bad option");
        }
    }
    if (argc - optind != 1)
        return usage_err(cmd, "give exactly one user name");
    if (!email)
        return usage_err(cmd, "--email is required");
    const char *user = argv[optind];
    char *setup = NULL;
    if (setup_file && !(setup = read_setup_token(setup_file)))
        return 1;
    ctx_t x;
    int rc = ctx_open(&x, with_token);
    if (rc) {
        wipe_free(setup);
        return rc;
    }
    if (url) {
        free(x.c.url);
        x.c.url = fg_cli_normalize_url(url);
    }
    char *pw = read_secret("New password: ", pw_stdin);
    if (!pw) {
        wipe_free(setup);
        ctx_close(&x);
        return 1;
    }
    if (!pw_stdin && isatty(STDIN_FILENO)) {
        char *again = read_secret("Repeat password: ", 0);
        int same = again && !strcmp(again, pw);
        wipe_free(again);
        if (!same) {
            wipe_free(pw);
            wipe_free(setup);
            ctx_close(&x);
            fprintf(stderr, "fairgpu: the passwords differ\n");
            return 1;
        }
    }
    json_t *body = json_pack("{s:s, s:s, s:s}", "username", user, "email", email, "password", pw);
    if (account)
        json_object_set_new(body, "account", json_string(account));
    if (setup)
        json_object_set_new(body, "setup_token", json_string(setup));
    json_t *res;
    rc = call(&x, "POST", "/v1/users", body, NULL, &res);
    json_object_set_new(body, "password", json_string(""));
    if (setup)
        json_object_set_new(body, "setup_token", json_string(""));
    json_decref(body);
    wipe_free(pw);
    wipe_free(setup);
    if (!rc) {
        if (json)
            print_json(res);
        else {
            char r[64], id[128];
            printf("Created user %s (id %s, role %s).\n", user, jfmt(res, "id", id, sizeof id),
                   *jfmt(res, "role", r, sizeof r) ? r : "user");
            if (!with_token)
                printf("Log in with: fairgpu login %s\n", user);
        }
    }
    json_decref(res);
    ctx_close(&x);
    return rc;
}

static int cmd_register(int argc, char **argv)
{
    return create_user("register", argc, argv, 0);
}

/* ---------------------------------------------------------------- submit -- */

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
    "  --json                       print the server's JSON\n"
    "\n"
    "A SCRIPT's '#FAIRGPU' lines hold the same options; its '#SBATCH' lines are read too\n"
    "(--gres=gpu:N, --gpus, --time/-t, --job-name/-J, --qos, --nodes/-N, --account/-A;\n"
    "others are ignored with a note). Command-line options override #FAIRGPU lines,\n"
    "which override #SBATCH lines. The script runs as [interpreter, -c, text], the\n"
    "interpreter coming from its #! line (default /bin/sh).\n";

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

static int cmd_submit(int argc, char **argv)
{
    fg_jobspec_t cli, job;
    fg_jobspec_init(&cli);
    fg_jobspec_init(&job);
    const char *idem = NULL;
    int json = 0, dry = 0, explicit_cmd = 0, rc = 0;
    char err[512];
    int i = 1;
    while (i < argc) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            explicit_cmd = 1;
            i++;
            break;
        }
        if (a[0] != '-' || !a[1])
            break;
        int r = fg_jobspec_option(&cli, FG_DIALECT_CLI, argc, argv, &i, err, sizeof err);
        if (r < 0) {
            rc = usage_err("submit", "%s", err);
            goto out;
        }
        if (r == 1)
            continue;
        if (!strcmp(a, "--json"))
            json = 1;
        else if (!strcmp(a, "--dry-run"))
            dry = 1;
        else if (is_help(a)) {
            fputs(SUBMIT_HELP, stdout);
            goto out;
        } else if (!strcmp(a, "--idempotency-key") || !strncmp(a, "--idempotency-key=", 18)) {
            if (a[17] == '=')
                idem = a + 18;
            else if (i + 1 < argc)
                idem = argv[++i];
            else {
                rc = usage_err("submit", "--idempotency-key needs a value");
                goto out;
            }
            if (!*idem || strlen(idem) > 255 || strpbrk(idem, "\r\n")) {
                rc = usage_err("submit", "--idempotency-key: 1 to 255 characters on one line");
                goto out;
            }
        } else {
            rc = usage_err("submit", "unknown option '%s'", a);
            goto out;
        }
        i++;
    }
    if (!explicit_cmd && i < argc && is_script_path(argv[i])) {
        const char *path = argv[i];
        size_t len = 0;
        char *text = slurp(path, &len);
        if (!text) {
            fprintf(stderr, "fairgpu submit: cannot read %s: %s\n", path, strerror(errno));
            rc = 1;
            goto out;
        }
        if (fg_script_parse(text, len, &job, err, sizeof err) < 0) {
            fprintf(stderr, "fairgpu submit: %s: %s\n", strcmp(path, "-") ? path : "stdin", err);
            free(text);
            rc = 2;
            goto out;
        }
        free(text);
        /* Script arguments become $1...: [interp..., -c, text, $0, args...]. */
        if (i + 1 < argc)
            fg_jobspec_append_command(&job, argc - i, argv + i);
        if (!(job.set & FG_JS_NAME) && strcmp(path, "-")) {
            const char *base = strrchr(path, '/');
            base = base ? base + 1 : path;
            if (*base && strlen(base) <= FG_JOB_MAX_NAME) {
                job.name = fg_xstrdup(base);
                job.set |= FG_JS_NAME;
            }
        }
    } else if (i < argc) {
        fg_jobspec_set_command(&cli, argc - i, argv + i);
    }
    fg_jobspec_overlay(&job, &cli);
    for (size_t k = 0; k < job.nnotes; k++)
        fprintf(stderr, "fairgpu submit: note: %s\n", job.notes[k]);
    if (fg_jobspec_finalize(&job, err, sizeof err) < 0) {
        rc = usage_err("submit", "%s", err);
        goto out;
    }
    json_t *body = fg_jobspec_to_json(&job);
    if (dry) {
        print_json(body);
        json_decref(body);
        goto out;
    }
    ctx_t x;
    rc = ctx_open(&x, 1);
    if (rc) {
        json_decref(body);
        goto out;
    }
    char hdr[300];
    const char *headers[2] = {NULL, NULL};
    if (idem) {
        snprintf(hdr, sizeof hdr, "Idempotency-Key: %s", idem);
        headers[0] = hdr;
    }
    json_t *res;
    rc = call(&x, "POST", "/v1/jobs", body, headers, &res);
    json_decref(body);
    if (!rc) {
        if (json)
            print_json(res);
        else {
            char id[128], st[32];
            printf("Submitted job %s (%s)\n", jfmt(res, "id", id, sizeof id),
                   *jfmt(res, "state", st, sizeof st) ? st : "PENDING");
        }
    }
    json_decref(res);
    ctx_close(&x);
out:
    fg_jobspec_free(&cli);
    fg_jobspec_free(&job);
    return rc;
}

/* ------------------------------------------------------------ jobs, show -- */

static int is_terminal_state(const char *s)
{
    return s && (!strcmp(s, "COMPLETED") || !strcmp(s, "FAILED") || !strcmp(s, "CANCELLED") ||
                 !strcmp(s, "TIMEOUT"));
}

/* Seconds since t, or -1. */
static long long since(json_t *o, const char *k)
{
    long long t;
    if (!jint(o, k, &t) || t <= 0)
        return -1;
    long long d = (long long)time(NULL) - t;
    return d < 0 ? 0 : d;
}

static void job_row(fg_table_t *t, json_t *j)
{
    char id[64], name[160], user[80], acct[80], st[32], gpus[48], prio[16], age[32], tm[48],
        where[200];
    jfmt(j, "id", id, sizeof id);
    jfmt(j, "name", name, sizeof name);
    jfmt(j, "user", user, sizeof user);
    jfmt(j, "account", acct, sizeof acct);
    jfmt(j, "state", st, sizeof st);
    jfmt(j, "priority", prio, sizeof prio);
    jfmt(j, "gpus", gpus, sizeof gpus);
    const char *gt = jstr(j, "gpu_type");
    if (gt && *gt) {
        size_t l = strlen(gpus);
        snprintf(gpus + l, sizeof gpus - l, ":%s", gt);
    }
    fg_format_duration(since(j, "submit_time"), age, sizeof age);
    /* TIME: elapsed / limit for running jobs, the limit otherwise. */
    long long lim = -1, start = since(j, "start_time");
    jint(j, "time_limit_s", &lim);
    char a[24], b[24];
    fg_format_duration(lim > 0 ? lim : -1, b, sizeof b);
    if (!strcmp(st, "RUNNING") && start >= 0)
        snprintf(tm, sizeof tm, "%s/%s", fg_format_duration(start, a, sizeof a), b);
    else
        snprintf(tm, sizeof tm, "%s", b);
    if (!strcmp(st, "PENDING")) {
        jfmt(j, "reason_code", where, sizeof where);
    } else if (!strcmp(st, "RUNNING") || is_terminal_state(st)) {
        json_t *nodes = json_object_get(j, "nodes");
        if (json_is_array(nodes) && json_array_size(nodes) > 1) {
            size_t l = 0;
            where[0] = '\0';
            size_t k;
            json_t *v;
            json_array_foreach(nodes, k, v)
            {
                if (json_is_string(v) && l < sizeof where)
                    l += (size_t)snprintf(where + l, sizeof where - l, "%s%s", k ? "," : "",
                                          json_string_value(v));
            }
        } else {
            jfmt(j, "node", where, sizeof where);
        }
        long long ec;
        if (is_terminal_state(st) && jint(j, "exit_code", &ec)) {
            size_t l = strlen(where);
            if (l < sizeof where)
                snprintf(where + l, sizeof where - l, "%sexit %lld", l ? " " : "", ec);
        }
    } else {
        where[0] = '\0';
    }
    if (json_is_true(json_object_get(j, "cancel_requested")) && !is_terminal_state(st)) {
        size_t l = strlen(st);
        snprintf(st + l, sizeof st - l, "*");
    }
    fg_table_row(t, id, name, user, acct, st, gpus, prio, age, tm, where);
}

static const char JOBS_HELP[] =
    "usage: fairgpu jobs [--state S] [--user U] [--account A] [--model M] [--dataset D]\n"
    "                    [--mine] [--limit N] [--all] [--json]\n"
    "Lists jobs (the queue is public; others' commands are not shown). --all follows\n"
    "every page. STATE '*' means a cancel was requested; AGE is time since submission;\n"
    "TIME is elapsed/limit for running jobs; WHERE is the reason code of pending jobs,\n"
    "else the node(s) and exit code.\n";

static int cmd_jobs(int argc, char **argv)
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
    const char *user = NULL, *account = NULL, *model = NULL, *dataset = NULL;
    char state[64] = "";
    long long limit = 0;
    int all = 0, json = 0, mine = 0, c;
    getopt_reset();
    while ((c = getopt_long(argc, argv, "hs:u:n:", lo, NULL)) != -1) {
        switch (c) {
        case 's':
            if (strlen(optarg) >= sizeof state)
                return usage_err("jobs", "--state: too long");
            for (size_t k = 0; optarg[k]; k++)
                state[k] =
                    (char)((optarg[k] >= 'a' && optarg[k] <= 'z') ? optarg[k] - 32 : optarg[k]);
            state[strlen(optarg)] = '\0';
            break;
        case 'u':
            user = optarg;
            break;
        case 'a':
            account = optarg;
            break;
        case 'm':
            model = optarg;
            break;
        case 'd':
            dataset = optarg;
            break;
        case 'n':
            if (parse_ll("jobs", "--limit", optarg, 1, 1000, &limit) < 0)
                return 2;
            break;
        case 'A':
            all = 1;
            break;
        case 'M':
            mine = 1;
            break;
        case 'j':
            json = 1;
            break;
        case 'h':
            fputs(JOBS_HELP, stdout);
            return 0;
        default:
            return usage_err("jobs", "bad option");
        }
    }
    if (optind < argc)
        return usage_err("jobs", "unexpected argument '%s'", argv[optind]);
    ctx_t x;
    int rc = ctx_open(&x, 1);
    if (rc)
        return rc;
    char me[160] = "";
    if (mine) {
        if (user) {
            ctx_close(&x);
            return usage_err("jobs", "--mine and --user exclude each other");
        }
        json_t *res;
        if ((rc = call(&x, "GET", "/v1/me", NULL, NULL, &res))) {
            ctx_close(&x);
            return rc;
        }
        jfmt(res, "username", me, sizeof me);
        json_decref(res);
        user = me;
    }
    char base[2048] = "/v1/jobs";
    query_add(base, sizeof base, "state", state[0] ? state : NULL);
    query_add(base, sizeof base, "user", user);
    query_add(base, sizeof base, "account", account);
    query_add(base, sizeof base, "model", model);
    query_add(base, sizeof base, "dataset", dataset);
    if (limit) {
        char l[32];
        snprintf(l, sizeof l, "%lld", limit);
        query_add(base, sizeof base, "limit", l);
    }
    json_t *merged = json_array();
    char *cursor = NULL;
    int pages = 0, more = 0;
    for (;;) {
        char path[4096];
        snprintf(path, sizeof path, "%s", base);
        query_add(path, sizeof path, "cursor", cursor);
        json_t *res;
        rc = call(&x, "GET", path, NULL, NULL, &res);
        if (rc)
            break;
        json_t *items = items_of(res);
        if (!items) {
            fprintf(stderr, "fairgpu: the server's job list has no items\n");
            json_decref(res);
            rc = 1;
            break;
        }
        json_array_extend(merged, items);
        const char *next = jstr(res, "next_cursor");
        free(cursor);
        cursor = next && *next ? fg_xstrdup(next) : NULL;
        json_decref(res);
        if (++pages > 100000) {
            fprintf(stderr, "fairgpu: the server keeps returning cursors; stopping\n");
            rc = 1;
            break;
        }
        if (!cursor)
            break;
        if (!all) {
            more = 1;
            break;
        }
    }
    if (!rc) {
        if (json) {
            json_t *out =
                json_pack("{s:O, s:s?}", "items", merged, "next_cursor", all ? NULL : cursor);
            if (!json_object_get(out, "next_cursor"))
                json_object_set_new(out, "next_cursor", json_null());
            print_json(out);
            json_decref(out);
        } else {
            fg_table_t t;
            fg_table_init(&t, 10, "ID", "NAME", "USER", "ACCOUNT", "STATE", "GPUS", "PRIO", "AGE",
                          "TIME", "WHERE");
            size_t k;
            json_t *j;
            json_array_foreach(merged, k, j) job_row(&t, j);
            fg_table_print(&t, stdout);
            fg_table_free(&t);
            if (more)
                fprintf(stderr, "(more jobs: use --all, or --limit N)\n");
        }
    }
    free(cursor);
    json_decref(merged);
    ctx_close(&x);
    return rc;
}

static void kv(const char *k, const char *v)
{
    if (v && *v)
        printf("%-16s %s\n", k, v);
}

static void show_job(json_t *j)
{
    char b[512], b2[128], b3[64];
    kv("id:", jfmt(j, "id", b, sizeof b));
    kv("name:", jfmt(j, "name", b, sizeof b));
    kv("user:", jfmt(j, "user", b, sizeof b));
    kv("account:", jfmt(j, "account", b, sizeof b));
    const char *st = jstr(j, "state");
    snprintf(b, sizeof b, "%s%s", st ? st : "?",
             json_is_true(json_object_get(j, "cancel_requested")) && !is_terminal_state(st)
                 ? " (cancel requested)"
                 : "");
    kv("state:", b);
    const char *rc = jstr(j, "reason_code"), *reason = jstr(j, "reason");
    if ((rc && *rc) || (reason && *reason)) {
        snprintf(b, sizeof b, "%s%s%s", rc ? rc : "", rc && reason ? ": " : "",
                 reason ? reason : "");
        kv("reason:", b);
    }
    long long es;
    if (st && !strcmp(st, "PENDING") && jint(j, "estimated_start", &es) && es > 0) {
        long long d = es - (long long)time(NULL);
        snprintf(b, sizeof b, "%s (%s%s)", jtime(j, "estimated_start", b2, sizeof b2),
                 d > 0 ? "in " : "", d > 0 ? fg_format_duration(d, b3, sizeof b3) : "now");
        kv("estimated start:", b);
    }
    jfmt(j, "gpus", b, sizeof b);
    const char *gt = jstr(j, "gpu_type");
    if (gt && *gt) {
        size_t l = strlen(b);
        snprintf(b + l, sizeof b - l, " x %s", gt);
    }
    kv("gpus:", b);
    kv("priority:", jfmt(j, "priority", b, sizeof b));
    kv("model:", jfmt(j, "model", b, sizeof b));
    kv("dataset:", jfmt(j, "dataset", b, sizeof b));
    long long lim;
    if (jint(j, "time_limit_s", &lim) && lim > 0) {
        snprintf(b, sizeof b, "%s (%llds)", fg_format_duration(lim, b2, sizeof b2), lim);
        kv("time limit:", b);
    }
    kv("submitted:", jtime(j, "submit_time", b, sizeof b));
    kv("started:", jtime(j, "start_time", b, sizeof b));
    kv("ended:", jtime(j, "end_time", b, sizeof b));
    if (is_terminal_state(st))
        kv("exit code:", jfmt(j, "exit_code", b, sizeof b));
    long long at, mr;
    if (jint(j, "attempts", &at)) {
        if (!jint(j, "max_retries", &mr))
            mr = 0;
        snprintf(b, sizeof b, "%lld (max retries %lld)", at, mr);
        kv("attempts:", b);
    }
    json_t *nodes = json_object_get(j, "nodes");
    if (json_is_array(nodes) && json_array_size(nodes)) {
        char *s = json_dumps(nodes, JSON_COMPACT);
        kv("nodes:", s);
        free(s);
    } else {
        kv("node:", jfmt(j, "node", b, sizeof b));
    }
    json_t *gi = json_object_get(j, "gpu_indices");
    if (json_is_array(gi) && json_array_size(gi)) {
        char *s = json_dumps(gi, JSON_COMPACT);
        kv("gpu indices:", s);
        free(s);
    }
    kv("gpu seconds:", jfmt(j, "gpu_seconds", b, sizeof b));
    long long cost;
    if (jint(j, "cost_micros", &cost)) {
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

static int cmd_show(int argc, char **argv)
{
    int json = 0;
    int r =
        sub_json_flag("show", argc, argv, &json,
                      "usage: fairgpu show JOB [--json]\nShows one job, with the reason it waits "
                      "and its estimated start.\n");
    if (r >= 0)
        return r;
    if (argc - optind != 1)
        return usage_err("show", "give one job id");
    ctx_t x;
    int rc = ctx_open(&x, 1);
    if (rc)
        return rc;
    char path[1024];
    json_t *res;
    rc = call(&x, "GET", job_path(path, sizeof path, argv[optind], NULL), NULL, NULL, &res);
    if (!rc) {
        if (json)
            print_json(res);
        else
            show_job(res);
    }
    json_decref(res);
    ctx_close(&x);
    return rc;
}

static int cmd_cancel(int argc, char **argv)
{
    int json = 0;
    int r =
        sub_json_flag("cancel", argc, argv, &json,
                      "usage: fairgpu cancel JOB... [--json]\nCancels jobs. A running job stays "
                      "RUNNING (cancel requested) until its processes are dead.\n");
    if (r >= 0)
        return r;
    if (optind >= argc)
        return usage_err("cancel", "give at least one job id");
    ctx_t x;
    int rc = ctx_open(&x, 1);
    if (rc)
        return rc;
    for (int k = optind; k < argc; k++) {
        char path[1024];
        json_t *res;
        if (call(&x, "POST", job_path(path, sizeof path, argv[k], "/cancel"), NULL, NULL, &res)) {
            fprintf(stderr, "fairgpu: job %s not cancelled\n", argv[k]);
            rc = 1;
            continue;
        }
        if (json)
            print_json(res);
        else {
            const char *st = jstr(res, "state");
            if (st && !strcmp(st, "CANCELLED"))
                printf("Cancelled job %s\n", argv[k]);
            else
                printf("Cancel requested for job %s (%s until its processes end)\n", argv[k],
                       st ? st : "running");
        }
        json_decref(res);
    }
    ctx_close(&x);
    return rc;
}

/* ---------------------------------------------------------------- events -- */

static void print_event(json_t *e, int json)
{
    if (json) {
        char *s = json_dumps(e, JSON_COMPACT | JSON_PRESERVE_ORDER);
        puts(s ? s : "null");
        free(s);
        fflush(stdout);
        return;
    }
    char seq[32], t[64], kind[32], id[128], node[128], from[32], to[32], reason[256];
    jfmt(e, "seq", seq, sizeof seq);
    jtime(e, "time", t, sizeof t);
    if (!*jfmt(e, "kind", kind, sizeof kind))
        jfmt(e, "type", kind, sizeof kind);
    if (!*jfmt(e, "job_id", id, sizeof id)) {
        json_t *job = json_object_get(e, "job");
        if (json_is_object(job))
            jfmt(job, "id", id, sizeof id);
        else
            jfmt(e, "job", id, sizeof id);
    }
    jfmt(e, "node", node, sizeof node);
    jfmt(e, "from", from, sizeof from);
    jfmt(e, "to", to, sizeof to);
    jfmt(e, "reason", reason, sizeof reason);
    printf("%-6s %s  ", seq, t);
    if (*id)
        printf("job %s", id);
    else if (*node)
        printf("node %s", node);
    else
        printf("%s", *kind ? kind : "event");
    if (*from || *to)
        printf(": %s -> %s", *from ? from : "(new)", *to ? to : "?");
    if (*reason)
        printf(" (%s)", reason);
    if (*id && *node)
        printf(" on %s", node);
    putchar('\n');
    fflush(stdout);
}

typedef struct {
    int json;
    long long last_seq;
    int ended; /* an "end"-type event arrived */
} events_state_t;

static int on_event(void *ud, const char *type, const char *data, size_t len, const char *id)
{
    events_state_t *st = ud;
    (void)id;
    if (!strcmp(type, "end") || !strcmp(type, "eof")) {
        st->ended = 1;
        return 1;
    }
    json_t *e = json_loadb(data, len, 0, NULL);
    if (!e) {
        if (len)
            printf("%s\n", data);
        return 0;
    }
    json_t *items = items_of(e);
    size_t k;
    json_t *v;
    if (items) {
        json_array_foreach(items, k, v)
        {
            long long s;
            if (jint(v, "seq", &s) && s > st->last_seq)
                st->last_seq = s;
            print_event(v, st->json);
        }
    } else {
        long long s;
        if (jint(e, "seq", &s) && s > st->last_seq)
            st->last_seq = s;
        print_event(e, st->json);
    }
    json_decref(e);
    return 0;
}

static int cmd_events(int argc, char **argv)
{
    static const struct option lo[] = {{"since", required_argument, 0, 's'},
                                       {"follow", no_argument, 0, 'f'},
                                       {"json", no_argument, 0, 'j'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    long long since_seq = -1;
    int follow = 0, json = 0, c;
    getopt_reset();
    while ((c = getopt_long(argc, argv, "hfs:", lo, NULL)) != -1) {
        switch (c) {
        case 's':
            if (parse_ll("events", "--since", optarg, 0, (long long)9e18, &since_seq) < 0)
                return 2;
            break;
        case 'f':
            follow = 1;
            break;
        case 'j':
            json = 1;
            break;
        case 'h':
            puts("usage: fairgpu events [--since SEQ] [-f|--follow] [--json]\n"
                 "Shows cluster-wide changes after sequence number SEQ; -f keeps streaming\n"
                 "them (from now on unless --since; reconnecting where it left off).\n"
                 "--json: one JSON event per line when following, else the server's reply.");
            return 0;
        default:
            return usage_err("events", "bad option");
        }
    }
    if (optind < argc)
        return usage_err("events", "unexpected argument '%s'", argv[optind]);
    ctx_t x;
    int rc = ctx_open(&x, 1);
    if (rc)
        return rc;
    if (!follow) {
        char path[256] = "/v1/events";
        if (since_seq >= 0) {
            char s[32];
            snprintf(s, sizeof s, "%lld", since_seq);
            query_add(path, sizeof path, "since", s);
        }
        json_t *res;
        rc = call(&x, "GET", path, NULL, NULL, &res);
        if (!rc) {
            if (json)
                print_json(res);
            else {
                json_t *items = items_of(res);
                size_t k;
                json_t *v;
                json_array_foreach(items, k, v) print_event(v, 0);
            }
        }
        json_decref(res);
        ctx_close(&x);
        return rc;
    }
    if (since_seq < 0) {
        /* Follow from now on, not from the beginning of history: ask where the head is. */
        json_t *res;
        rc = call(&x, "GET", "/v1/events?limit=1", NULL, NULL, &res);
        if (rc) {
            ctx_close(&x);
            return rc;
        }
        long long head;
        if (jint(res, "head_seq", &head) && head >= 0)
            since_seq = head;
        json_decref(res);
    }
    events_state_t st = {.json = json, .last_seq = since_seq};
    int failures = 0;
    for (;;) {
        char path[256] = "/v1/events?follow=1";
        char s[32], lei[32] = "";
        if (st.last_seq >= 0) {
            snprintf(s, sizeof s, "%lld", st.last_seq);
            query_add(path, sizeof path, "since", s);
            snprintf(lei, sizeof lei, "%lld", st.last_seq);
        }
        fg_sse_t p;
        fg_sse_init(&p, on_event, &st);
        fg_resp_t r;
        long long before = st.last_seq;
        int sr = fg_client_stream(&x.c, path, lei, &p, failures > 0, &r);
        fg_sse_free(&p);
        if (sr == -2) {
            rc = fg_client_report(&x.c, &r);
            fg_resp_free(&r);
            break;
        }
        if (sr == 1 || st.ended)
            break;
        failures = st.last_seq > before ? 0 : failures + 1;
        if (failures > 30) {
            fprintf(stderr, "fairgpu: giving up after %d failed reconnects\n", failures - 1);
            rc = 1;
            break;
        }
        if (failures == 1)
            fprintf(stderr, "fairgpu: event stream ended; reconnecting...\n");
        sleep(failures ? 1 : 0);
    }
    ctx_close(&x);
    return rc;
}

/* ------------------------------------------------------------------ logs -- */

typedef struct {
    long long offset; /* byte offset after the data printed so far, -1 unknown */
    int ended;
    char last_id[256];
} logs_state_t;

/* Prints one log event, restoring a final newline where the offsets say it was there
 * (fg_sse_log_newline). */
static int on_log(void *ud, const char *type, const char *data, size_t len, const char *id)
{
    logs_state_t *st = ud;
    if (!strcmp(type, "end") || !strcmp(type, "eof")) {
        st->ended = 1;
        return 1;
    }
    fwrite(data, 1, len, stdout);
    if (fg_sse_log_newline(st->offset, id, data, len, &st->offset))
        fputc('\n', stdout);
    fflush(stdout);
    snprintf(st->last_id, sizeof st->last_id, "%s", id ? id : "");
    return 0;
}

static int cmd_logs(int argc, char **argv)
{
    static const struct option lo[] = {{"follow", no_argument, 0, 'f'},
                                       {"rank", required_argument, 0, 'r'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    int follow = 0, c;
    const char *rank = NULL;
    long long rv;
    getopt_reset();
    while ((c = getopt_long(argc, argv, "hfr:", lo, NULL)) != -1) {
        switch (c) {
        case 'f':
            follow = 1;
            break;
        case 'r':
            if (parse_ll("logs", "--rank", optarg, 0, 100000, &rv) < 0)
                return 2;
            rank = optarg;
            break;
        case 'h':
            puts("usage: fairgpu logs [-f|--follow] [--rank R] JOB\n"
                 "Prints a job's combined stdout and stderr (every rank, each line prefixed\n"
                 "with its rank, unless --rank). -f follows it live until the job ends,\n"
                 "resuming where it left off if the connection drops.");
            return 0;
        default:
            return usage_err("logs", "bad option");
        }
    }
    if (argc - optind != 1)
        return usage_err("logs", "give one job id");
    const char *job = argv[optind];
    ctx_t x;
    int rc = ctx_open(&x, 1);
    if (rc)
        return rc;
    char path[1200];
    job_path(path, sizeof path, job, "/logs");
    if (follow)
        query_add(path, sizeof path, "follow", "1");
    query_add(path, sizeof path, "rank", rank);
    if (!follow) {
        fg_resp_t r;
        if (fg_client_request(&x.c, "GET", path, NULL, NULL, &r) < 0)
            rc = 1;
        else if (r.status < 200 || r.status >= 300)
            rc = fg_client_report(&x.c, &r);
        else
            fwrite(r.body, 1, r.len, stdout);
        fg_resp_free(&r);
        ctx_close(&x);
        return rc;
    }
    logs_state_t st = {.offset = 0};
    int failures = 0;
    for (;;) {
        fg_sse_t p;
        fg_sse_init(&p, on_log, &st);
        fg_resp_t r;
        char before[256];
        snprintf(before, sizeof before, "%s", st.last_id);
        int sr = fg_client_stream(&x.c, path, st.last_id, &p, failures > 0, &r);
        fg_sse_free(&p);
        if (sr == -2) {
            rc = fg_client_report(&x.c, &r);
            fg_resp_free(&r);
            break;
        }
        if (sr == 1 || st.ended)
            break;
        if (sr == 0) {
            /* The server closed the stream: done if the job has ended. */
            char jp[1024];
            json_t *j;
            if (call(&x, "GET", job_path(jp, sizeof jp, job, NULL), NULL, NULL, &j) == 0) {
                int done = is_terminal_state(jstr(j, "state"));
                json_decref(j);
                if (done)
                    break;
            }
        }
        failures = strcmp(before, st.last_id) ? 0 : failures + 1;
        if (failures > 30) {
            fprintf(stderr, "fairgpu: giving up after %d failed reconnects\n", failures - 1);
            rc = 1;
            break;
        }
        if (failures == 1)
            fprintf(stderr, "fairgpu: log stream interrupted; reconnecting...\n");
        sleep(1);
    }
    ctx_close(&x);
    return rc;
}

/* ----------------------------------------------------------- nodes, share -- */

static int simple_get(const char *cmd, int argc, char **argv, const char *path, const char *help,
                      void (*human)(json_t *))
{
    int json = 0;
    int r = sub_json_flag(cmd, argc, argv, &json, help);
    if (r >= 0)
        return r;
    if (optind < argc)
        return usage_err(cmd, "unexpected argument '%s'", argv[optind]);
    ctx_t x;
    int rc = ctx_open(&x, 1);
    if (rc)
        return rc;
    json_t *res;
    rc = call(&x, "GET", path, NULL, NULL, &res);
    if (!rc) {
        if (json)
            print_json(res);
        else
            human(res);
    }
    json_decref(res);
    ctx_close(&x);
    return rc;
}

static void nodes_human(json_t *res)
{
    fg_table_t t;
    fg_table_init(&t, 8, "NAME", "STATE", "GPUS(USED/ALL)", "TYPE", "UTIL%", "CPUS", "MEMORY",
                  "HEARTBEAT");
    size_t k;
    json_t *n;
    json_array_foreach(items_of(res), k, n)
    {
        char name[128], st[32], gpus[32], type[64] = "", util[16] = "", cpus[32], mem[32], hb[32];
        jfmt(n, "name", name, sizeof name);
        jfmt(n, "state", st, sizeof st);
        json_t *g = json_object_get(n, "gpus");
        size_t used = 0, all = 0, i;
        long long usum = 0, ucount = 0;
        json_t *gv;
        json_array_foreach(g, i, gv)
        {
            all++;
            json_t *jid = json_object_get(gv, "job_id");
            if (jid && !json_is_null(jid) && !(json_is_string(jid) && !*json_string_value(jid)))
                used++;
            if (!type[0])
                jfmt(gv, "type", type, sizeof type);
            long long u;
            if (jint(gv, "util_pct", &u)) {
                usum += u;
                ucount++;
            }
        }
        snprintf(gpus, sizeof gpus, "%zu/%zu", used, all);
        if (ucount)
            snprintf(util, sizeof util, "%lld", usum / ucount);
        jfmt(n, "cpus", cpus, sizeof cpus);
        long long mb;
        if (jint(n, "memory_mb", &mb))
            snprintf(mem, sizeof mem, "%lld GiB", mb / 1024);
        else
            mem[0] = '\0';
        long long age = since(n, "last_heartbeat");
        if (age >= 0) {
            char d[24];
            snprintf(hb, sizeof hb, "%s ago", fg_format_duration(age, d, sizeof d));
        } else
            hb[0] = '\0';
        fg_table_row(&t, name, st, gpus, type, util, cpus, mem, hb);
    }
    fg_table_print(&t, stdout);
    fg_table_free(&t);
}

static int cmd_nodes(int argc, char **argv)
{
    return simple_get("nodes", argc, argv, "/v1/nodes",
                      "usage: fairgpu nodes [--json]\nLists the cluster's nodes and GPUs.\n",
                      nodes_human);
}

static void share_rows(fg_table_t *t, json_t *arr, const char *kind_hint, int depth)
{
    size_t k;
    json_t *r;
    json_array_foreach(arr, k, r)
    {
        char name[160], kind[32], w[32], ns[32], use[48], run[32], pend[32], f[32];
        const char *nm = jstr(r, "name");
        if (!nm)
            nm = jstr(r, "user") ? jstr(r, "user") : jstr(r, "account");
        snprintf(name, sizeof name, "%s%s", depth ? "  " : "", nm ? nm : "?");
        if (!*jfmt(r, "kind", kind, sizeof kind) && !*jfmt(r, "type", kind, sizeof kind))
            snprintf(kind, sizeof kind, "%s", kind_hint);
        jfmt(r, "weight", w, sizeof w);
        jfmt(r, "normalized_share", ns, sizeof ns);
        json_t *u = json_object_get(r, "usage_gpu_seconds");
        if (json_is_number(u))
            snprintf(use, sizeof use, "%.1f", json_number_value(u) / 3600.0);
        else
            use[0] = '\0';
        jfmt(r, "running_gpus", run, sizeof run);
        jfmt(r, "pending_jobs", pend, sizeof pend);
        jfmt(r, "fair_share_factor", f, sizeof f);
        fg_table_row(t, name, kind, w, ns, use, run, pend, f);
        json_t *users = json_object_get(r, "users");
        if (json_is_array(users) && depth < 2)
            share_rows(t, users, "user", depth + 1);
    }
}

static void share_human(json_t *res)
{
    fg_table_t t;
    fg_table_init(&t, 8, "NAME", "KIND", "WEIGHT", "SHARE", "USAGE(GPU-H)", "RUNNING", "PENDING",
                  "FACTOR");
    /* Accounts with their users nested when the server gives them; else a flat list. */
    json_t *a = json_object_get(res, "accounts");
    json_t *items = items_of(res);
    if (json_is_array(a))
        share_rows(&t, a, "account", 0);
    else if (items)
        share_rows(&t, items, "", 0);
    else if (json_is_array(json_object_get(res, "users")))
        share_rows(&t, json_object_get(res, "users"), "user", 0);
    char pol[32], up[32], fr[32];
    if (*jfmt(res, "policy", pol, sizeof pol) || *jfmt(res, "gpus_up", up, sizeof up)) {
        jfmt(res, "gpus_up", up, sizeof up);
        jfmt(res, "gpus_free", fr, sizeof fr);
        printf("policy %s, %s GPUs up, %s free\n", *pol ? pol : "?", *up ? up : "?",
               *fr ? fr : "?");
    }
    fg_table_print(&t, stdout);
    fg_table_free(&t);
}

static int cmd_share(int argc, char **argv)
{
    return simple_get("share", argc, argv, "/v1/fairshare",
                      "usage: fairgpu share [--json]\nShows fair share per account and user: "
                      "weight, normalized share,\ndecayed usage (GPU hours), running GPUs, "
                      "pending jobs, fair-share factor.\n",
                      share_human);
}

/* ----------------------------------------------------------------- token -- */

static const char TOKEN_HELP[] = "usage: fairgpu token create NAME [--json]\n"
                                 "       fairgpu token list [--json]\n"
                                 "       fairgpu token delete ID\n"
                                 "Long-lived API tokens (use one as FAIRGPU_TOKEN). A new "
                                 "token is shown once.\n";

static void list_table(json_t *res, const char *const *keys, const char *const *heads, int n,
                       int times_from)
{
    fg_table_t t;
    fg_table_initv(&t, n, heads);
    size_t k;
    json_t *r;
    json_array_foreach(items_of(res), k, r)
    {
        char buf[FG_TABLE_MAX_COLS][256];
        const char *cells[FG_TABLE_MAX_COLS];
        for (int c = 0; c < n; c++) {
            if (c >= times_from)
                jtime(r, keys[c], buf[c], sizeof buf[c]);
            else
                jfmt(r, keys[c], buf[c], sizeof buf[c]);
            cells[c] = buf[c];
        }
        fg_table_rowv(&t, cells);
    }
    fg_table_print(&t, stdout);
    fg_table_free(&t);
}

static int cmd_token(int argc, char **argv)
{
    if (argc < 2 || is_help(argv[1])) {
        fputs(TOKEN_HELP, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1];
    int json = 0;
    int r = sub_json_flag("token", argc - 1, argv + 1, &json, TOKEN_HELP);
    if (r >= 0)
        return r;
    int nargs = argc - 1 - optind;
    char **args = argv + 1 + optind;
    ctx_t x;
    int rc;
    if (!strcmp(sub, "create")) {
        if (nargs != 1)
            return usage_err("token", "create takes one NAME");
        if ((rc = ctx_open(&x, 1)))
            return rc;
        json_t *body = json_pack("{s:s}", "name", args[0]), *res;
        rc = call(&x, "POST", "/v1/tokens", body, NULL, &res);
        json_decref(body);
        if (!rc) {
            if (json)
                print_json(res);
            else {
                char id[128];
                printf("Created token %s (id %s). It is shown only now:\n%s\n", args[0],
                       jfmt(res, "id", id, sizeof id),
                       jstr(res, "token") ? jstr(res, "token") : "?");
            }
        }
        json_decref(res);
    } else if (!strcmp(sub, "list")) {
        if (nargs != 0)
            return usage_err("token", "list takes no arguments");
        if ((rc = ctx_open(&x, 1)))
            return rc;
        json_t *res;
        rc = call(&x, "GET", "/v1/tokens", NULL, NULL, &res);
        if (!rc) {
            if (json)
                print_json(res);
            else {
                static const char *const keys[] = {"id", "name", "created_at", "last_used_at",
                                                   "expires_at"};
                static const char *const heads[] = {"ID", "NAME", "CREATED", "LAST USED",
                                                    "EXPIRES"};
                list_table(res, keys, heads, 5, 2);
            }
        }
        json_decref(res);
    } else if (!strcmp(sub, "delete")) {
        if (nargs != 1)
            return usage_err("token", "delete takes one ID");
        if ((rc = ctx_open(&x, 1)))
            return rc;
        char *e = fg_client_escape(args[0]);
        char path[512];
        snprintf(path, sizeof path, "/v1/tokens/%s", e);
        free(e);
        rc = call(&x, "DELETE", path, NULL, NULL, NULL);
        if (!rc)
            printf("Deleted token %s\n", args[0]);
    } else {
        return usage_err("token", "unknown subcommand '%s' (create, list, delete)", sub);
    }
    ctx_close(&x);
    return rc;
}

/* ------------------------------------------------------------- node-token -- */

static const char NODE_TOKEN_HELP[] =
    "usage: fairgpu node-token create NODE [--json]\n"
    "       fairgpu node-token revoke NODE\n"
    "Node credentials (admins only). create issues NODE a new credential (replacing any\n"
    "old one) and shows it once: give it to that node's agent with --token-file. revoke\n"
    "refuses NODE's credential at once; the name cannot join again until create.\n";

static int cmd_node_token(int argc, char **argv)
{
    if (argc < 2 || is_help(argv[1])) {
        fputs(NODE_TOKEN_HELP, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1];
    int json = 0;
    int r = sub_json_flag("node-token", argc - 1, argv + 1, &json, NODE_TOKEN_HELP);
    if (r >= 0)
        return r;
    int nargs = argc - 1 - optind;
    char **args = argv + 1 + optind;
    int create = !strcmp(sub, "create");
    if (!create && strcmp(sub, "revoke"))
        return usage_err("node-token", "unknown subcommand '%s' (create, revoke)", sub);
    if (nargs != 1)
        return usage_err("node-token", "%s takes one NODE", sub);
    ctx_t x;
    int rc;
    if ((rc = ctx_open(&x, 1)))
        return rc;
    char *e = fg_client_escape(args[0]);
    char path[512];
    snprintf(path, sizeof path, "/v1/nodes/%s/credentials", e);
    free(e);
    json_t *res = NULL;
    rc = call(&x, create ? "POST" : "DELETE", path, NULL, NULL, &res);
    if (!rc && json)
        print_json(res);
    else if (!rc && create)
        printf("Issued a credential for node %s. It is shown only now; put it in a file "
               "(mode 0600)\nand start that node's agent with --token-file FILE:\n%s\n",
               args[0], jstr(res, "token") ? jstr(res, "token") : "?");
    else if (!rc)
        printf("Revoked the credential of node %s\n", args[0]);
    json_decref(res);
    ctx_close(&x);
    return rc;
}

/* ------------------------------------------------------------------ user -- */

static const char USER_HELP[] =
    "usage: fairgpu user list [--json]\n"
    "       fairgpu user create USERNAME --email E [--account A] [--password-stdin]\n"
    "       fairgpu user set ID [--role admin|user] [--account A] [--weight W]\n"
    "                           [--disabled true|false] [--json]\n"
    "Administers users (admins only).\n";

static int cmd_user(int argc, char **argv)
{
    if (argc < 2 || is_help(argv[1])) {
        fputs(USER_HELP, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "create"))
        return create_user("user create", argc - 1, argv + 1, 1);
    ctx_t x;
    int rc, json = 0;
    if (!strcmp(sub, "list")) {
        int r = sub_json_flag("user", argc - 1, argv + 1, &json, USER_HELP);
        if (r >= 0)
            return r;
        if (optind < argc - 1)
            return usage_err("user", "list takes no arguments");
        if ((rc = ctx_open(&x, 1)))
            return rc;
        json_t *res;
        rc = call(&x, "GET", "/v1/users", NULL, NULL, &res);
        if (!rc) {
            if (json)
                print_json(res);
            else {
                static const char *const keys[] = {"id",      "username", "email",    "role",
                                                   "account", "weight",   "disabled", "created_at"};
                static const char *const heads[] = {"ID",      "USERNAME", "EMAIL",    "ROLE",
                                                    "ACCOUNT", "WEIGHT",   "DISABLED", "CREATED"};
                list_table(res, keys, heads, 8, 7);
            }
        }
        json_decref(res);
        ctx_close(&x);
        return rc;
    }
    if (strcmp(sub, "set"))
        return usage_err("user", "unknown subcommand '%s' (list, create, set)", sub);
    static const struct option lo[] = {
        {"role", required_argument, 0, 'r'},   {"account", required_argument, 0, 'a'},
        {"weight", required_argument, 0, 'w'}, {"disabled", optional_argument, 0, 'd'},
        {"enabled", no_argument, 0, 'e'},      {"json", no_argument, 0, 'j'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    json_t *body = json_object();
    int c;
    getopt_reset();
    while ((c = getopt_long(argc - 1, argv + 1, "h", lo, NULL)) != -1) {
        switch (c) {
        case 'r':
            if (strcmp(optarg, "admin") && strcmp(optarg, "user")) {
                json_decref(body);
                return usage_err("user", "--role: expected admin or user");
            }
            json_object_set_new(body, "role", json_string(optarg));
            break;
        case 'a':
            json_object_set_new(body, "account", json_string(optarg));
            break;
        case 'w': {
            json_t *w = parse_weight("user", optarg);
            if (!w) {
                json_decref(body);
                return 2;
            }
            json_object_set_new(body, "weight", w);
            break;
        }
        case 'd': {
            int b = 1;
            if (optarg && parse_bool(optarg, &b) < 0) {
                json_decref(body);
                return usage_err("user", "--disabled: expected true or false");
            }
            json_object_set_new(body, "disabled", json_boolean(b));
            break;
        }
        case 'e':
            json_object_set_new(body, "disabled", json_false());
            break;
        case 'j':
            json = 1;
            break;
        case 'h':
            json_decref(body);
            fputs(USER_HELP, stdout);
            return 0;
        default:
            json_decref(body);
            return usage_err("user", "bad option");
        }
    }
    if (argc - 1 - optind != 1) {
        json_decref(body);
        return usage_err("user", "set takes one user ID");
    }
    if (!json_object_size(body)) {
        json_decref(body);
        return usage_err("user", "set: nothing to change (--role, --account, --weight, "
                                 "--disabled)");
    }
    if ((rc = ctx_open(&x, 1))) {
        json_decref(body);
        return rc;
    }
    char *e = fg_client_escape(argv[1 + optind]);
    char path[512];
    snprintf(path, sizeof path, "/v1/users/%s", e);
    free(e);
    json_t *res;
    rc = call(&x, "PATCH", path, body, NULL, &res);
    json_decref(body);
    if (!rc) {
        if (json)
            print_json(res);
        else
            printf("Updated user %s\n", argv[1 + optind]);
    }
    json_decref(res);
    ctx_close(&x);
    return rc;
}

/* --------------------------------------------------------------- account -- */

static const char ACCOUNT_HELP[] =
    "usage: fairgpu account list [--json]\n"
    "       fairgpu account create NAME [--weight W] [--quota GPUS] [--budget MICROS]\n"
    "                                   [--priorities high,normal,low]\n"
    "       fairgpu account set NAME [same options]\n"
    "       fairgpu account add-member NAME USER [--weight W]\n"
    "       fairgpu account remove-member NAME USER\n"
    "Accounts (teams, projects): fair-share weight, GPU quota, budget (micro-units),\n"
    "allowed priority classes. Changing them needs an admin.\n";

static int cmd_account(int argc, char **argv)
{
    if (argc < 2 || is_help(argv[1])) {
        fputs(ACCOUNT_HELP, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1];
    static const struct option lo[] = {{"weight", required_argument, 0, 'w'},
                                       {"quota", required_argument, 0, 'q'},
                                       {"budget", required_argument, 0, 'b'},
                                       {"priorities", required_argument, 0, 'p'},
                                       {"json", no_argument, 0, 'j'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    json_t *body = json_object();
    int json = 0, c, rc = 0, opts = 0;
    getopt_reset();
    while ((c = getopt_long(argc - 1, argv + 1, "h", lo, NULL)) != -1) {
        long long v;
        switch (c) {
        case 'w': {
            json_t *w = parse_weight("account", optarg);
            if (!w) {
                rc = 2;
                goto out;
            }
            json_object_set_new(body, "weight", w);
            opts++;
            break;
        }
        case 'q':
            if (parse_ll("account", "--quota", optarg, 0, 1000000, &v) < 0) {
                rc = 2;
                goto out;
            }
            json_object_set_new(body, "gpu_quota", json_integer(v));
            opts++;
            break;
        case 'b':
            if (parse_ll("account", "--budget", optarg, 0, (long long)9e18, &v) < 0) {
                rc = 2;
                goto out;
            }
            json_object_set_new(body, "budget_micros", json_integer(v));
            opts++;
            break;
        case 'p': {
            json_t *arr = json_array();
            char *copy = fg_xstrdup(optarg), *save = NULL;
            for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (strcmp(tok, "high") && strcmp(tok, "normal") && strcmp(tok, "low")) {
                    free(copy);
                    json_decref(arr);
                    rc = usage_err("account", "--priorities: '%s' is not high, normal or low", tok);
                    goto out;
                }
                json_array_append_new(arr, json_string(tok));
            }
            free(copy);
            json_object_set_new(body, "allowed_priorities", arr);
            opts++;
            break;
        }
        case 'j':
            json = 1;
            break;
        case 'h':
            fputs(ACCOUNT_HELP, stdout);
            goto out;
        default:
            rc = usage_err("account", "bad option");
            goto out;
        }
    }
    int nargs = argc - 1 - optind;
    char **args = argv + 1 + optind;
    ctx_t x;
    const char *method = NULL;
    char path[1024];
    json_t *send = NULL;
    if (!strcmp(sub, "list")) {
        if (nargs || opts) {
            rc = usage_err("account", "list takes no arguments");
            goto out;
        }
        method = "GET";
        snprintf(path, sizeof path, "/v1/accounts");
    } else if (!strcmp(sub, "create") || !strcmp(sub, "set")) {
        if (nargs != 1) {
            rc = usage_err("account", "%s takes one account NAME", sub);
            goto out;
        }
        if (!strcmp(sub, "set") && !opts) {
            rc = usage_err("account", "set: nothing to change");
            goto out;
        }
        char *e = fg_client_escape(args[0]);
        if (!strcmp(sub, "create")) {
            method = "POST";
            snprintf(path, sizeof path, "/v1/accounts");
            json_object_set_new(body, "name", json_string(args[0]));
        } else {
            method = "PATCH";
            snprintf(path, sizeof path, "/v1/accounts/%s", e);
        }
        free(e);
        send = body;
    } else if (!strcmp(sub, "add-member") || !strcmp(sub, "remove-member")) {
        int add = !strcmp(sub, "add-member");
        if (nargs != 2) {
            rc = usage_err("account", "%s takes an account NAME and a USER", sub);
            goto out;
        }
        if (json_object_get(body, "gpu_quota") || json_object_get(body, "budget_micros") ||
            json_object_get(body, "allowed_priorities") ||
            (!add && json_object_get(body, "weight"))) {
            rc = usage_err("account", "%s: only --weight applies (and only to add-member)", sub);
            goto out;
        }
        char *e = fg_client_escape(args[0]);
        if (add) {
            method = "POST";
            snprintf(path, sizeof path, "/v1/accounts/%s/members", e);
            json_object_set_new(body, "user", json_string(args[1]));
            send = body;
        } else {
            char *u = fg_client_escape(args[1]);
            method = "DELETE";
            snprintf(path, sizeof path, "/v1/accounts/%s/members/%s", e, u);
            free(u);
        }
        free(e);
    } else {
        rc = usage_err("account",
                       "unknown subcommand '%s' (list, create, set, add-member, remove-member)",
                       sub);
        goto out;
    }
    if ((rc = ctx_open(&x, 1)))
        goto out;
    json_t *res;
    rc = call(&x, method, path, send, NULL, &res);
    if (!rc) {
        if (json && !json_is_null(res))
            print_json(res);
        else if (!strcmp(sub, "list")) {
            if (json)
                print_json(res);
            else {
                static const char *const keys[] = {"name", "weight", "gpu_quota", "budget_micros",
                                                   "allowed_priorities"};
                static const char *const heads[] = {"NAME", "WEIGHT", "GPU QUOTA", "BUDGET",
                                                    "PRIORITIES"};
                fg_table_t t;
                fg_table_init(&t, 5, heads[0], heads[1], heads[2], heads[3], heads[4]);
                size_t k;
                json_t *a;
                json_array_foreach(items_of(res), k, a)
                {
                    char b[4][64];
                    char *pr = NULL;
                    json_t *ap = json_object_get(a, "allowed_priorities");
                    if (json_is_array(ap)) {
                        size_t cap = 64, l = 0, i;
                        json_t *v;
                        pr = fg_xcalloc(cap, 1);
                        json_array_foreach(ap, i, v)
                        {
                            if (json_is_string(v) && l + 16 < cap)
                                l += (size_t)snprintf(pr + l, cap - l, "%s%s", i ? "," : "",
                                                      json_string_value(v));
                        }
                    }
                    fg_table_row(&t, jfmt(a, keys[0], b[0], 64), jfmt(a, keys[1], b[1], 64),
                                 jfmt(a, keys[2], b[2], 64), jfmt(a, keys[3], b[3], 64),
                                 pr ? pr : "all");
                    free(pr);
                }
                fg_table_print(&t, stdout);
                fg_table_free(&t);
            }
        } else if (!strcmp(sub, "create"))
            printf("Created account %s\n", args[0]);
        else if (!strcmp(sub, "set"))
            printf("Updated account %s\n", args[0]);
        else if (!strcmp(sub, "add-member"))
            printf("Added %s to account %s\n", args[1], args[0]);
        else
            printf("Removed %s from account %s\n", args[1], args[0]);
    }
    json_decref(res);
    ctx_close(&x);
out:
    json_decref(body);
    return rc;
}

/* -------------------------------------------------------------- dispatch -- */

typedef struct {
    const char *name;
    int (*fn)(int, char **);
} command_t;

static const command_t COMMANDS[] = {
    {"login", cmd_login},     {"logout", cmd_logout},
    {"whoami", cmd_whoami},   {"register", cmd_register},
    {"submit", cmd_submit},   {"jobs", cmd_jobs},
    {"show", cmd_show},       {"cancel", cmd_cancel},
    {"events", cmd_events},   {"logs", cmd_logs},
    {"nodes", cmd_nodes},     {"share", cmd_share},
    {"token", cmd_token},     {"user", cmd_user},
    {"account", cmd_account}, {"node-token", cmd_node_token},
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

int fg_cmd_client(int argc, char **argv)
{
    if (argc < 1 || !argv[0])
        return -1;
    int known = 0;
    for (size_t k = 0; k < sizeof COMMANDS / sizeof COMMANDS[0]; k++)
        known = known || !strcmp(argv[0], COMMANDS[k].name);
    if (!known)
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
    for (size_t k = 0; k < sizeof COMMANDS / sizeof COMMANDS[0]; k++)
        if (!strcmp(argv[0], COMMANDS[k].name)) {
            int rc = COMMANDS[k].fn(argc, argv);
            fflush(stdout);
            return rc;
        }
    return -1;
}
