/*
 * cli_session.c - the session commands: login (a password for a session token saved in
 * the config file), logout (the session ended on the server and its token removed) and
 * whoami (the logged-in user).
 *
 * Example: `fairgpu login alice` asks for the password, POSTs /v1/sessions, and saves
 * {url, token, username} in $XDG_CONFIG_HOME/fairgpu/config.json (mode 0600); every
 * later command sends that token, unless FAIRGPU_TOKEN is set.
 */
#include "cli/cli.h"

#include "common/xalloc.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ----------------------------------------------------------------- login -- */

static const char LOGIN_HELP[] =
    "usage: fairgpu login [USERNAME] [--url URL] [--password-stdin]\n"
    "Logs in and saves the session token in $XDG_CONFIG_HOME/fairgpu/config.json\n"
    "(or ~/.config/fairgpu/config.json), mode 0600. The password is read from the\n"
    "terminal without echo, or from standard input when it is not a terminal.\n";

typedef struct {
    const char *url; /* --url, or NULL */
    int pw_stdin;    /* --password-stdin */
} login_opts_t;

/* Parses login's options into *o. Returns -1 to go on (the user name, if any, at
 * optind), else the exit status. */
static int login_options(int argc, char **argv, login_opts_t *o)
{
    static const struct option lo[] = {{"url", required_argument, 0, 'u'},
                                       {"password-stdin", no_argument, 0, 'P'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    int c;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        if (c == 'u')
            o->url = optarg;
        else if (c == 'P')
            o->pw_stdin = 1;
        else if (c == 'h') {
            fputs(LOGIN_HELP, stdout);
            return 0;
        } else
            return cli_usage("login", "bad option");
    }
    if (argc - optind > 1)
        return cli_usage("login", "too many arguments");
    return -1;
}

/* The user name to log in as (malloc'd, or NULL): the operand, else asked on a
 * terminal, else the one saved at the last login. */
static char *login_user(int argc, char **argv, const login_opts_t *o, const cli_ctx_t *x)
{
    if (optind < argc)
        return fg_xstrdup(argv[optind]);
    if (!o->pw_stdin && isatty(STDIN_FILENO))
        return cli_read_line("Username: ");
    if (x->cfg.username)
        return fg_xstrdup(x->cfg.username);
    return NULL;
}

/* POST /v1/sessions for user with password pw (wiped and freed here). */
static int login_post(cli_ctx_t *x, const char *user, char *pw, json_t **res)
{
    json_t *body = json_pack("{s:s, s:s}", "username", user, "password", pw);
    int rc = cli_call(x, "POST", "/v1/sessions", body, NULL, res);
    json_object_set_new(body, "password", json_string(""));
    json_decref(body);
    cli_wipe_free(pw);
    return rc;
}

/* Saves the token of the login reply res in the config file and says so. Returns the
 * exit status. */
static int login_save(const cli_ctx_t *x, json_t *res, const char *user)
{
    const char *token = cli_jstr(res, "token");
    if (!token) {
        fprintf(stderr, "fairgpu: the server's login reply has no token\n");
        return 1;
    }
    if (fg_cli_config_save(x->c.url, token, user) < 0)
        return 1;
    char exp[64];
    char *path = fg_cli_config_path();
    printf("Logged in to %s as %s", x->c.url, user);
    if (*cli_jtime(res, "expires_at", exp, sizeof exp))
        printf(" (session expires %s)", exp);
    printf(".\nToken saved in %s.\n", path ? path : "the config file");
    free(path);
    if (x->cfg.token_from_env)
        fprintf(stderr, "fairgpu: note: FAIRGPU_TOKEN is set and takes precedence over "
                        "the saved login\n");
    return 0;
}

int cli_cmd_login(int argc, char **argv)
{
    login_opts_t o = {0};
    int rc = login_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    cli_ctx_t x;
    if ((rc = cli_open(&x, 0)))
        return rc;
    if (o.url)
        cli_set_url(&x, o.url);
    char *user = login_user(argc, argv, &o, &x);
    if (!user || !*user) {
        free(user);
        cli_close(&x);
        return cli_usage("login", "give a user name");
    }
    char *pw = cli_read_secret("Password: ", o.pw_stdin);
    json_t *res = NULL;
    rc = pw ? login_post(&x, user, pw, &res) : 1;
    if (!rc)
        rc = login_save(&x, res, user);
    json_decref(res);
    free(user);
    cli_close(&x);
    return rc;
}

/* ---------------------------------------------------------------- logout -- */

/* The token saved in the config file, not FAIRGPU_TOKEN (malloc'd, or NULL). */
static char *saved_token(const fg_cli_config_t *cfg)
{
    if (!cfg->token_from_env)
        return cfg->token ? fg_xstrdup(cfg->token) : NULL;
    /* reload the file's value with the environment's out of the way */
    char *saved = NULL;
    char *copy = fg_xstrdup(getenv("FAIRGPU_TOKEN"));
    unsetenv("FAIRGPU_TOKEN");
    fg_cli_config_t file;
    if (fg_cli_config_load(&file) == 0 && file.token)
        saved = fg_xstrdup(file.token);
    fg_cli_config_free(&file);
    setenv("FAIRGPU_TOKEN", copy, 1);
    free(copy);
    return saved;
}

/* Ends the session of token on the server at url (401: it had ended already).
 * Returns 0, or 1 after a message. */
static int end_session(const fg_cli_config_t *cfg, const char *token)
{
    fg_client_t c;
    if (fg_client_init(&c, cfg->url, token) < 0)
        return 1;
    fg_client_set_ca(&c, cli_ca_file(cfg));
    int rc = 0;
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
    return rc;
}

int cli_cmd_logout(int argc, char **argv)
{
    if (argc > 1 && cli_is_help(argv[1])) {
        puts("usage: fairgpu logout\nEnds the saved session on the server and removes its "
             "token from the config file.");
        return 0;
    }
    if (argc > 1)
        return cli_usage("logout", "takes no arguments");
    fg_cli_config_t cfg;
    if (fg_cli_config_load(&cfg) < 0) {
        fg_cli_config_free(&cfg);
        return 1;
    }
    char *saved = saved_token(&cfg);
    if (!saved) {
        printf("Not logged in%s.\n",
               cfg.token_from_env ? " (FAIRGPU_TOKEN is set; unset it yourself)" : "");
        fg_cli_config_free(&cfg);
        return 0;
    }
    int rc = end_session(&cfg, saved);
    cli_wipe_free(saved);
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

/* ---------------------------------------------------------------- whoami -- */

/* The lines of whoami: the user me, on the server at url. */
static void show_me(json_t *me, const char *url)
{
    char b[256];
    printf("user:     %s\n", cli_jfmt(me, "username", b, sizeof b));
    printf("id:       %s\n", cli_jfmt(me, "id", b, sizeof b));
    printf("role:     %s\n", cli_jfmt(me, "role", b, sizeof b));
    printf("account:  %s\n", cli_jfmt(me, "account", b, sizeof b));
    printf("email:    %s\n", cli_jfmt(me, "email", b, sizeof b));
    printf("server:   %s\n", url);
}

int cli_cmd_whoami(int argc, char **argv)
{
    int json = 0;
    int r = cli_json_flag("whoami", argc, argv, &json,
                          "usage: fairgpu whoami [--json]\nShows the logged-in user and the "
                          "server.\n");
    if (r >= 0)
        return r;
    if (optind < argc)
        return cli_usage("whoami", "takes no arguments");
    cli_ctx_t x;
    int rc = cli_open(&x, 1);
    if (rc)
        return rc;
    json_t *me;
    rc = cli_call(&x, "GET", "/v1/me", NULL, NULL, &me);
    if (!rc && json)
        cli_print_json(me);
    else if (!rc)
        show_me(me, x.c.url);
    json_decref(me);
    cli_close(&x);
    return rc;
}
