/*
 * cli_accounts.c - `fairgpu account`: accounts (teams, projects) with their fair-share
 * weight, GPU quota, budget and allowed priority classes, and their members.
 *
 * The options are read before the subcommand into the body of the request; each
 * subcommand then checks that those it takes were given. Example:
 * `fairgpu account set vision --quota 16 --priorities high,normal` sends
 * PATCH /v1/accounts/vision {"gpu_quota": 16, "allowed_priorities": ["high", "normal"]}.
 */
#include "cli/cli.h"

#include "common/xalloc.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char ACCOUNT_HELP[] =
    "usage: fairgpu account list [--json]\n"
    "       fairgpu account create NAME [--weight W] [--quota GPUS] [--budget MICROS]\n"
    "                                   [--priorities high,normal,low]\n"
    "       fairgpu account set NAME [same options]\n"
    "       fairgpu account add-member NAME USER [--weight W]\n"
    "       fairgpu account remove-member NAME USER\n"
    "       fairgpu account set-member NAME USER [--weight W] [--manager true|false]\n"
    "Accounts (teams, projects): fair-share weight, GPU quota, budget (micro-units),\n"
    "allowed priority classes. Changing them needs an admin. An account manager sees the\n"
    "account's usage and invoices.\n";

/* --------------------------------------------------------------- options -- */

/* --priorities high,normal,low as a JSON array, or NULL after a usage message. */
static json_t *parse_priorities(const char *s)
{
    json_t *arr = json_array();
    char *copy = fg_xstrdup(s), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (strcmp(tok, "high") && strcmp(tok, "normal") && strcmp(tok, "low")) {
            cli_usage("account", "--priorities: '%s' is not high, normal or low", tok);
            free(copy);
            json_decref(arr);
            return NULL;
        }
        json_array_append_new(arr, json_string(tok));
    }
    free(copy);
    return arr;
}

/* Puts the field that option c (argument optarg) sets into body. Returns -1 to go on,
 * else the exit status (help, or a usage error). */
static int account_field(int c, json_t *body)
{
    long long v;
    json_t *f;
    switch (c) {
    case 'w':
        if (!(f = cli_parse_weight("account", optarg)))
            return 2;
        json_object_set_new(body, "weight", f);
        return -1;
    case 'q':
        if (cli_parse_ll("account", "--quota", optarg, 0, 1000000, &v) < 0)
            return 2;
        json_object_set_new(body, "gpu_quota", json_integer(v));
        return -1;
    case 'b':
        if (cli_parse_ll("account", "--budget", optarg, 0, (long long)9e18, &v) < 0)
            return 2;
        json_object_set_new(body, "budget_micros", json_integer(v));
        return -1;
    case 'p':
        if (!(f = parse_priorities(optarg)))
            return 2;
        json_object_set_new(body, "allowed_priorities", f);
        return -1;
    case 'm': {
        int on;
        if (cli_parse_bool(optarg, &on) < 0)
            return cli_usage("account", "--manager: true or false, not '%s'", optarg);
        json_object_set_new(body, "manager", json_boolean(on));
        return -1;
    }
    case 'h':
        fputs(ACCOUNT_HELP, stdout);
        return 0;
    default:
        return cli_usage("account", "bad option");
    }
}

/* Parses the options of every subcommand into op->body and op->json, then the
 * operands. Returns -1 to go on, else the exit status. */
static int account_options(cli_op_t *op)
{
    static const struct option lo[] = {
        {"weight", required_argument, 0, 'w'},  {"quota", required_argument, 0, 'q'},
        {"budget", required_argument, 0, 'b'},  {"priorities", required_argument, 0, 'p'},
        {"manager", required_argument, 0, 'm'}, {"json", no_argument, 0, 'j'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    int c, r;
    cli_getopt_reset();
    while ((c = getopt_long(op->argc, op->argv, "h", lo, NULL)) != -1) {
        if (c == 'j')
            op->json = 1;
        else if ((r = account_field(c, op->body)) >= 0)
            return r;
    }
    cli_sub_operands(op);
    return -1;
}

/* ----------------------------------------------------------- subcommands -- */

/* The PRIORITIES cell of an account: "high,normal", or "all" when not limited. */
static void priorities_cell(json_t *a, char *pr, size_t n)
{
    json_t *ap = json_object_get(a, "allowed_priorities");
    size_t l = 0, i;
    json_t *v;
    snprintf(pr, n, "%s", json_is_array(ap) ? "" : "all");
    json_array_foreach(ap, i, v)
    {
        if (json_is_string(v) && l + 16 < n)
            l += (size_t)snprintf(pr + l, n - l, "%s%s", i ? "," : "", json_string_value(v));
    }
}

static void accounts_table(json_t *res)
{
    static const char *const keys[] = {"name", "weight", "gpu_quota", "budget_micros"};
    fg_table_t t;
    fg_table_init(&t, 5, "NAME", "WEIGHT", "GPU QUOTA", "BUDGET", "PRIORITIES");
    size_t k;
    json_t *a;
    json_array_foreach(cli_items_of(res), k, a)
    {
        char b[4][64], pr[64];
        priorities_cell(a, pr, sizeof pr);
        fg_table_row(&t, cli_jfmt(a, keys[0], b[0], 64), cli_jfmt(a, keys[1], b[1], 64),
                     cli_jfmt(a, keys[2], b[2], 64), cli_jfmt(a, keys[3], b[3], 64), pr);
    }
    fg_table_print(&t, stdout);
    fg_table_free(&t);
}

static int account_list(const cli_op_t *op)
{
    if (op->nargs || json_object_size(op->body))
        return cli_usage("account", "list takes no arguments");
    return cli_get_print("/v1/accounts", op->json, accounts_table);
}

/* Sends a change (body send, or NULL) and prints the reply's JSON with --json unless
 * it is empty. Returns the exit status; *say: the change went through and the caller
 * is to say what it was. */
static int account_change(const cli_op_t *op, const char *method, const char *path, json_t *send,
                          int *say)
{
    json_t *res;
    int rc = cli_fetch(method, path, send, &res);
    *say = !rc && !(op->json && !json_is_null(res));
    if (!rc && !*say)
        cli_print_json(res);
    json_decref(res);
    return rc;
}

static int account_create(const cli_op_t *op)
{
    if (op->nargs != 1)
        return cli_usage("account", "%s takes one account NAME", op->sub);
    if (json_object_get(op->body, "manager"))
        return cli_usage("account", "%s: --manager applies to set-member only", op->sub);
    json_object_set_new(op->body, "name", json_string(op->args[0]));
    int say, rc = account_change(op, "POST", "/v1/accounts", op->body, &say);
    if (say)
        printf("Created account %s\n", op->args[0]);
    return rc;
}

static int account_set(const cli_op_t *op)
{
    if (op->nargs != 1)
        return cli_usage("account", "%s takes one account NAME", op->sub);
    if (!json_object_size(op->body))
        return cli_usage("account", "set: nothing to change");
    if (json_object_get(op->body, "manager"))
        return cli_usage("account", "set: --manager applies to set-member only");
    char path[1024];
    cli_path(path, sizeof path, "/v1/accounts/", op->args[0], NULL);
    int say, rc = account_change(op, "PATCH", path, op->body, &say);
    if (say)
        printf("Updated account %s\n", op->args[0]);
    return rc;
}

/* The operands and options of add-member (add) and remove-member: an account NAME, a
 * USER, and only --weight, only to add. Returns -1 to go on, else 2 after a message. */
static int member_args(const cli_op_t *op, int add)
{
    if (op->nargs != 2)
        return cli_usage("account", "%s takes an account NAME and a USER", op->sub);
    json_t *b = op->body;
    if (json_object_get(b, "manager"))
        return cli_usage("account", "%s: --manager applies to set-member only", op->sub);
    if (json_object_get(b, "gpu_quota") || json_object_get(b, "budget_micros") ||
        json_object_get(b, "allowed_priorities") || (!add && json_object_get(b, "weight")))
        return cli_usage("account", "%s: only --weight applies (and only to add-member)", op->sub);
    return -1;
}

static int account_add_member(const cli_op_t *op)
{
    int rc = member_args(op, 1);
    if (rc >= 0)
        return rc;
    char path[1024];
    cli_path(path, sizeof path, "/v1/accounts/", op->args[0], "/members");
    json_object_set_new(op->body, "user", json_string(op->args[1]));
    int say;
    rc = account_change(op, "POST", path, op->body, &say);
    if (say)
        printf("Added %s to account %s\n", op->args[1], op->args[0]);
    return rc;
}

static int account_remove_member(const cli_op_t *op)
{
    int rc = member_args(op, 0);
    if (rc >= 0)
        return rc;
    char path[1024], member[1024];
    cli_path(member, sizeof member, "/members/", op->args[1], NULL);
    cli_path(path, sizeof path, "/v1/accounts/", op->args[0], member);
    int say;
    rc = account_change(op, "DELETE", path, NULL, &say);
    if (say)
        printf("Removed %s from account %s\n", op->args[1], op->args[0]);
    return rc;
}

/* set-member NAME USER: PATCH the membership's weight and manager flag. */
static int account_set_member(const cli_op_t *op)
{
    if (op->nargs != 2)
        return cli_usage("account", "%s takes an account NAME and a USER", op->sub);
    json_t *b = op->body;
    if (json_object_get(b, "gpu_quota") || json_object_get(b, "budget_micros") ||
        json_object_get(b, "allowed_priorities"))
        return cli_usage("account", "set-member: only --weight and --manager apply");
    if (!json_object_size(b))
        return cli_usage("account", "set-member: nothing to change (--weight, --manager)");
    char path[1024], member[1024];
    cli_path(member, sizeof member, "/members/", op->args[1], NULL);
    cli_path(path, sizeof path, "/v1/accounts/", op->args[0], member);
    int say, rc = account_change(op, "PATCH", path, b, &say);
    if (say)
        printf("Updated %s in account %s\n", op->args[1], op->args[0]);
    return rc;
}

static const cli_sub_t ACCOUNT_SUBS[] = {{"list", account_list},
                                         {"create", account_create},
                                         {"set", account_set},
                                         {"add-member", account_add_member},
                                         {"remove-member", account_remove_member},
                                         {"set-member", account_set_member}};

int cli_cmd_account(int argc, char **argv)
{
    cli_op_t op;
    int rc = cli_sub_start("account", argc, argv, ACCOUNT_HELP, &op);
    if (rc >= 0)
        return rc;
    op.body = json_object();
    rc = account_options(&op);
    if (rc < 0)
        rc = cli_sub_run(ACCOUNT_SUBS, sizeof ACCOUNT_SUBS / sizeof ACCOUNT_SUBS[0], &op);
    json_decref(op.body);
    return rc;
}
