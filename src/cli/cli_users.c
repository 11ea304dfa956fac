/*
 * cli_users.c - the user commands: register (a new user, or the first admin with the
 * server's setup token), user list / create / set (admins) and the user's own
 * long-lived API tokens (token create / list / delete).
 *
 * register and "user create" send the same request (POST /v1/users); register does it
 * without a session token. Example: `fairgpu register root --email r@example.org
 * --setup-token-file DATA_DIR/setup-token` makes root the first admin and uses the
 * token up; `fairgpu user set 7 --weight 2` PATCHes /v1/users/7 with {"weight": 2}.
 */
#include "cli/cli.h"

#include "common/xalloc.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------- register, create -- */

static const char REGISTER_HELP[] =
    "usage: fairgpu register USERNAME --email EMAIL [--account A] [--password-stdin]\n"
    "       [--setup-token-file FILE] [--url URL] [--json]\n"
    "Creates a user (POST /v1/users). With --setup-token-file (the server's\n"
    "DATA_DIR/setup-token, readable once it started with no admin) the user is the\n"
    "first admin, and the token is used up. --account is honoured only when an admin\n"
    "(logged in) creates the user.\n";

/* The options of register and "user create". */
typedef struct {
    const char *email, *account, *url, *setup_file; /* NULL when not given */
    int pw_stdin, json;
} create_opts_t;

/* Parses the options of cmd (register or "user create") into *o. Returns -1 to go on
 * (the user name at optind), else the exit status. */
static int create_options(const char *cmd, int argc, char **argv, create_opts_t *o)
{
    static const struct option lo[] = {
        {"email", required_argument, 0, 'e'},    {"account", required_argument, 0, 'a'},
        {"password-stdin", no_argument, 0, 'P'}, {"setup-token-file", required_argument, 0, 'S'},
        {"url", required_argument, 0, 'u'},      {"json", no_argument, 0, 'j'},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
    int c;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 'e':
            o->email = optarg;
            break;
        case 'a':
            o->account = optarg;
            break;
        case 'P':
            o->pw_stdin = 1;
            break;
        case 'S':
            o->setup_file = optarg;
            break;
        case 'u':
            o->url = optarg;
            break;
        case 'j':
            o->json = 1;
            break;
        case 'h':
            fputs(REGISTER_HELP, stdout);
            return 0;
        default:
            return cli_usage(cmd, "bad option");
        }
    }
    if (argc - optind != 1)
        return cli_usage(cmd, "give exactly one user name");
    if (!o->email)
        return cli_usage(cmd, "--email is required");
    return -1;
}

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

/* The new user's password, asked twice on a terminal: malloc'd, or NULL after a
 * message. */
static char *new_password(int pw_stdin)
{
    char *pw = cli_read_secret("New password: ", pw_stdin);
    if (!pw || pw_stdin || !isatty(STDIN_FILENO))
        return pw;
    char *again = cli_read_secret("Repeat password: ", 0);
    int same = again && !strcmp(again, pw);
    cli_wipe_free(again);
    if (same)
        return pw;
    cli_wipe_free(pw);
    fprintf(stderr, "fairgpu: the passwords differ\n");
    return NULL;
}

/* POST /v1/users for user with o's fields, the password pw and the setup token setup
 * (NULL: none); both secrets are wiped and freed here. */
static int create_post(cli_ctx_t *x, const char *user, const create_opts_t *o, char *pw,
                       char *setup, json_t **res)
{
    json_t *body =
        json_pack("{s:s, s:s, s:s}", "username", user, "email", o->email, "password", pw);
    if (o->account)
        json_object_set_new(body, "account", json_string(o->account));
    if (setup)
        json_object_set_new(body, "setup_token", json_string(setup));
    int rc = cli_call(x, "POST", "/v1/users", body, NULL, res);
    json_object_set_new(body, "password", json_string(""));
    if (setup)
        json_object_set_new(body, "setup_token", json_string(""));
    json_decref(body);
    cli_wipe_free(pw);
    cli_wipe_free(setup);
    return rc;
}

/* register and "user create": the same request, with or without the saved token. */
static int create_user(const char *cmd, int argc, char **argv, int with_token)
{
    create_opts_t o = {0};
    int rc = create_options(cmd, argc, argv, &o);
    if (rc >= 0)
        return rc;
    const char *user = argv[optind];
    char *setup = NULL;
    if (o.setup_file && !(setup = read_setup_token(o.setup_file)))
        return 1;
    cli_ctx_t x;
    if ((rc = cli_open(&x, with_token))) {
        cli_wipe_free(setup);
        return rc;
    }
    if (o.url)
        cli_set_url(&x, o.url);
    char *pw = new_password(o.pw_stdin);
    json_t *res = NULL;
    if (pw)
        rc = create_post(&x, user, &o, pw, setup, &res);
    else {
        cli_wipe_free(setup);
        rc = 1;
    }
    if (!rc && o.json)
        cli_print_json(res);
    else if (!rc) {
        char r[64], id[128];
        printf("Created user %s (id %s, role %s).\n", user, cli_jfmt(res, "id", id, sizeof id),
               *cli_jfmt(res, "role", r, sizeof r) ? r : "user");
        if (!with_token)
            printf("Log in with: fairgpu login %s\n", user);
    }
    json_decref(res);
    cli_close(&x);
    return rc;
}

int cli_cmd_register(int argc, char **argv)
{
    return create_user("register", argc, argv, 0);
}

/* ------------------------------------------------------------------ user -- */

static const char USER_HELP[] =
    "usage: fairgpu user list [--json]\n"
    "       fairgpu user create USERNAME --email E [--account A] [--password-stdin]\n"
    "       fairgpu user set ID [--role admin|user] [--account A] [--weight W]\n"
    "                           [--disabled true|false] [--json]\n"
    "Administers users (admins only).\n";

/* A table of the users in a list reply. */
static void users_table(json_t *res)
{
    static const char *const keys[] = {"id",      "username", "email",    "role",
                                       "account", "weight",   "disabled", "created_at"};
    static const char *const heads[] = {"ID",      "USERNAME", "EMAIL",    "ROLE",
                                        "ACCOUNT", "WEIGHT",   "DISABLED", "CREATED"};
    cli_list_table(res, keys, heads, 8, 7);
}

static int user_list(const cli_op_t *op)
{
    int json = 0;
    int r = cli_json_flag("user", op->argc, op->argv, &json, USER_HELP);
    if (r >= 0)
        return r;
    if (optind < op->argc)
        return cli_usage("user", "list takes no arguments");
    return cli_get_print("/v1/users", json, users_table);
}

static int user_create(const cli_op_t *op)
{
    return create_user("user create", op->argc, op->argv, 1);
}

/* Puts the field that user set's option c (argument optarg) sets into body. Returns -1
 * to go on, else the exit status (help, or a usage error). */
static int user_set_field(int c, json_t *body)
{
    int b = 1;
    switch (c) {
    case 'r':
        if (strcmp(optarg, "admin") && strcmp(optarg, "user"))
            return cli_usage("user", "--role: expected admin or user");
        json_object_set_new(body, "role", json_string(optarg));
        return -1;
    case 'a':
        json_object_set_new(body, "account", json_string(optarg));
        return -1;
    case 'w': {
        json_t *w = cli_parse_weight("user", optarg);
        if (!w)
            return 2;
        json_object_set_new(body, "weight", w);
        return -1;
    }
    case 'd':
        if (optarg && cli_parse_bool(optarg, &b) < 0)
            return cli_usage("user", "--disabled: expected true or false");
        json_object_set_new(body, "disabled", json_boolean(b));
        return -1;
    case 'e':
        json_object_set_new(body, "disabled", json_false());
        return -1;
    case 'h':
        fputs(USER_HELP, stdout);
        return 0;
    default:
        return cli_usage("user", "bad option");
    }
}

/* Parses user set's options into body and *json. Returns -1 to go on, else the exit
 * status. */
static int user_set_options(const cli_op_t *op, json_t *body, int *json)
{
    static const struct option lo[] = {
        {"role", required_argument, 0, 'r'},   {"account", required_argument, 0, 'a'},
        {"weight", required_argument, 0, 'w'}, {"disabled", optional_argument, 0, 'd'},
        {"enabled", no_argument, 0, 'e'},      {"json", no_argument, 0, 'j'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    int c, r;
    cli_getopt_reset();
    while ((c = getopt_long(op->argc, op->argv, "h", lo, NULL)) != -1) {
        if (c == 'j')
            *json = 1;
        else if ((r = user_set_field(c, body)) >= 0)
            return r;
    }
    if (op->argc - optind != 1)
        return cli_usage("user", "set takes one user ID");
    if (!json_object_size(body))
        return cli_usage("user", "set: nothing to change (--role, --account, --weight, "
                                 "--disabled)");
    return -1;
}

static int user_set(const cli_op_t *op)
{
    json_t *body = json_object();
    int json = 0;
    int rc = user_set_options(op, body, &json);
    if (rc >= 0) {
        json_decref(body);
        return rc;
    }
    const char *id = op->argv[optind];
    char path[512];
    json_t *res;
    rc = cli_fetch("PATCH", cli_path(path, sizeof path, "/v1/users/", id, NULL), body, &res);
    json_decref(body);
    if (!rc && json)
        cli_print_json(res);
    else if (!rc)
        printf("Updated user %s\n", id);
    json_decref(res);
    return rc;
}

static const cli_sub_t USER_SUBS[] = {
    {"list", user_list}, {"create", user_create}, {"set", user_set}};

int cli_cmd_user(int argc, char **argv)
{
    cli_op_t op;
    int r = cli_sub_start("user", argc, argv, USER_HELP, &op);
    if (r >= 0)
        return r;
    return cli_sub_run(USER_SUBS, sizeof USER_SUBS / sizeof USER_SUBS[0], &op);
}

/* ----------------------------------------------------------------- token -- */

static const char TOKEN_HELP[] = "usage: fairgpu token create NAME [--json]\n"
                                 "       fairgpu token list [--json]\n"
                                 "       fairgpu token delete ID\n"
                                 "Long-lived API tokens (use one as FAIRGPU_TOKEN). A new "
                                 "token is shown once.\n";

static int token_create(const cli_op_t *op)
{
    if (op->nargs != 1)
        return cli_usage("token", "create takes one NAME");
    json_t *body = json_pack("{s:s}", "name", op->args[0]), *res;
    int rc = cli_fetch("POST", "/v1/tokens", body, &res);
    json_decref(body);
    if (!rc && op->json)
        cli_print_json(res);
    else if (!rc) {
        char id[128];
        printf("Created token %s (id %s). It is shown only now:\n%s\n", op->args[0],
               cli_jfmt(res, "id", id, sizeof id),
               cli_jstr(res, "token") ? cli_jstr(res, "token") : "?");
    }
    json_decref(res);
    return rc;
}

/* A table of the tokens in a list reply. */
static void tokens_table(json_t *res)
{
    static const char *const keys[] = {"id", "name", "created_at", "last_used_at", "expires_at"};
    static const char *const heads[] = {"ID", "NAME", "CREATED", "LAST USED", "EXPIRES"};
    cli_list_table(res, keys, heads, 5, 2);
}

static int token_list(const cli_op_t *op)
{
    if (op->nargs != 0)
        return cli_usage("token", "list takes no arguments");
    return cli_get_print("/v1/tokens", op->json, tokens_table);
}

static int token_delete(const cli_op_t *op)
{
    if (op->nargs != 1)
        return cli_usage("token", "delete takes one ID");
    char path[512];
    int rc = cli_fetch("DELETE", cli_path(path, sizeof path, "/v1/tokens/", op->args[0], NULL),
                       NULL, NULL);
    if (!rc)
        printf("Deleted token %s\n", op->args[0]);
    return rc;
}

static const cli_sub_t TOKEN_SUBS[] = {
    {"create", token_create}, {"list", token_list}, {"delete", token_delete}};

int cli_cmd_token(int argc, char **argv)
{
    return cli_sub_json_run("token", argc, argv, TOKEN_HELP, TOKEN_SUBS,
                            sizeof TOKEN_SUBS / sizeof TOKEN_SUBS[0]);
}
