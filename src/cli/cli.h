/*
 * cli.h - what the client commands share: the connection to the controller, usage
 * errors, option parsing, reading JSON replies and printing them.
 *
 * Each command family has its file: cli_session.c (login, logout, whoami), cli_users.c
 * (register, user, token), cli_submit.c, cli_jobs.c (jobs, show, cancel),
 * cli_stream.c (events, logs), cli_cluster.c (nodes, share, node-token),
 * cli_accounts.c (account), cli_billing.c (usage, invoice, credit), cli_report.c (report).
 * cli.c dispatches argv[0] to
 * them; cli_out.c reads and prints replies. A command returns the exit status: 0 success, 1 the
 * server refused or could not be reached (its message on stderr), 2 a usage error.
 *
 * Example, a command that prints one reply:
 *     json_t *res;
 *     int rc = cli_fetch("GET", "/v1/me", NULL, &res);
 *     if (!rc)
 *         cli_print(res, json, show_me);
 *     json_decref(res);
 */
#ifndef FG_CLI_CLI_H
#define FG_CLI_CLI_H

#include "cli/client.h"
#include "cli/config.h"
#include "cli/table.h"

#include <jansson.h>
#include <stddef.h>

/* ----------------------------------------------------------- connection -- */

/* The config of this invocation and a client opened with it. */
typedef struct {
    fg_cli_config_t cfg;
    fg_client_t c;
} cli_ctx_t;

/* Loads the config and opens a client (with the token when use_token). Returns 0 or
 * the exit status to return (cli_close is then not needed). */
int cli_open(cli_ctx_t *x, int use_token);
/* The CA file to trust: --ca-file of this invocation, else the config's (NULL: none) */
const char *cli_ca_file(const fg_cli_config_t *cfg);
void cli_close(cli_ctx_t *x);

/* Points the client at url instead of the configured server (--url). */
void cli_set_url(cli_ctx_t *x, const char *url);

/*
 * Sends a request and expects a 2xx JSON reply (or an empty one for 204). On success
 * returns 0 and *out (when out is not NULL) is a new reference to the JSON (json null
 * for an empty body). Otherwise prints why and returns 1 (*out is NULL).
 */
int cli_call(cli_ctx_t *x, const char *method, const char *path, json_t *body,
             const char *const *headers, json_t **out);

/* cli_call on a client opened with the saved token for this one request. */
int cli_fetch(const char *method, const char *path, json_t *body, json_t **out);

/* "prefix<id escaped for a URL path><suffix>" into buf (suffix may be NULL); returns buf.
 * E.g. ("/v1/jobs/", "a b", "/cancel") -> "/v1/jobs/a%20b/cancel". */
const char *cli_path(char *buf, size_t n, const char *prefix, const char *id, const char *suffix);

/* Appends "&k=<escaped v>" (or "?k=..." for the first) to the query in buf; nothing
 * when v is NULL. */
void cli_query_add(char *buf, size_t n, const char *k, const char *v);

/* Fetches the first page of the job list at `base` (a GET /v1/jobs path with its
 * query), or every page with all, into the array merged. *cursor: the cursor of the
 * page after them (malloc'd) or NULL (pass it in NULL); *more: pages were left. Returns
 * the exit status. */
int cli_jobs_fetch(cli_ctx_t *x, const char *base, int all, json_t *merged, char **cursor,
                   int *more);

/* ------------------------------------------------------ options, usage -- */

/* Prints "fairgpu CMD: <message>" and a hint to stderr; returns 2. */
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Is a "-h" or "--help"? */
int cli_is_help(const char *a);

/* Resets getopt_long before a parse (the CLI may run several in one process). */
void cli_getopt_reset(void);

/* Parses a command whose only options are --json and --help (help printed as is).
 * Returns -1 to go on (operands from optind), else the exit status to return. */
int cli_json_flag(const char *cmd, int argc, char **argv, int *json, const char *help);

/* A whole number in [min, max] of option opt, or -1 after a usage message. */
int cli_parse_ll(const char *cmd, const char *opt, const char *s, long long min, long long max,
                 long long *out);

/* --weight: a number >= 0 as JSON (integral values as integers), or NULL after a usage
 * message. */
json_t *cli_parse_weight(const char *cmd, const char *s);

/* true/yes/1 or false/no/0 (any case) into *out; -1 otherwise. */
int cli_parse_bool(const char *s, int *out);

/* ---------------------------------------------------------- subcommands -- */

/* A subcommand once its command parsed the options common to all of them. */
typedef struct {
    const char *cmd; /* "token", for messages */
    const char *sub; /* "create" */
    int argc;        /* the subcommand's own arguments, argv[0] being sub */
    char **argv;
    int json;     /* --json */
    int nargs;    /* the operands after the options */
    char **args;  /* borrowed */
    json_t *body; /* the fields the options set, or NULL; borrowed */
} cli_op_t;

typedef struct {
    const char *name;
    int (*run)(const cli_op_t *op);
} cli_sub_t;

/* Starts op for the subcommand argv[1] of cmd. Returns -1 to go on; with no subcommand
 * (help on stderr, 2) or --help (help on stdout, 0) the status to exit with. */
int cli_sub_start(const char *cmd, int argc, char **argv, const char *help, cli_op_t *op);

/* After getopt parsed op->argc, op->argv: the operands into op->nargs, op->args. */
void cli_sub_operands(cli_op_t *op);

/* Runs op->sub from subs[0..n), or gives a usage error that lists their names. */
int cli_sub_run(const cli_sub_t *subs, size_t n, const cli_op_t *op);

/* A command made of subcommands whose only options are --json and --help (parsed
 * before the subcommand is looked up): runs argv[1] from subs[0..n). */
int cli_sub_json_run(const char *cmd, int argc, char **argv, const char *help,
                     const cli_sub_t *subs, size_t n);

/* -------------------------------------------------------------- estimates -- */

/* "now", "in ~3 min" or "in ~3 min (1-6 min)" for an estimate p50 with range p10..p90
 * (0: none) seen at now (cli_estimate.c). */
void cli_fmt_estimate(long long now, long long p50, long long p10, long long p90, char *buf,
                      size_t n);
/* POSTs body as a dry run and prints when it would start (json: the reply). Returns the
 * exit status. */
int cli_submit_estimate(json_t *body, int json);
/* show's estimate lines of job j in state st, through kv(key, value). */
void cli_show_estimate(json_t *j, const char *st, void (*kv)(const char *, const char *));

/* -------------------------------------------------------------- replies -- */

/* A member as a string (NULL when absent or not a string). */
const char *cli_jstr(json_t *o, const char *k);

/* Any scalar member formatted into buf ("" when absent or null); returns buf. */
const char *cli_jfmt(json_t *o, const char *k, char *buf, size_t n);

/* A number member as a whole number into *v: 1, or 0 when absent or not a number. */
int cli_jint(json_t *o, const char *k, long long *v);

/* A Unix time member as local "YYYY-MM-DD HH:MM:SS" ("" when absent, null or 0). */
const char *cli_jtime(json_t *o, const char *k, char *buf, size_t n);

/* Seconds since the Unix time member k (0 for a future one), or -1 without one. */
long long cli_since(json_t *o, const char *k);

/* A list reply's items (borrowed), accepting a bare array too; NULL when neither. */
json_t *cli_items_of(json_t *j);

/* Is s a state a job does not leave? */
int cli_is_terminal_state(const char *s);

/* The server's JSON, indented, on stdout. */
void cli_print_json(json_t *j);

/* A reply on stdout: its JSON with json, else human(res). */
void cli_print(json_t *res, int json, void (*human)(json_t *res));

/* GETs path with the saved token and prints the reply (cli_print). Returns the exit
 * status. */
int cli_get_print(const char *path, int json, void (*human)(json_t *res));

/* A table of a list reply: column c holds member keys[c] under heads[c]; columns from
 * times_from on are Unix times. */
void cli_list_table(json_t *res, const char *const *keys, const char *const *heads, int n,
                    int times_from);

/* ------------------------------------------------------------- commands -- */

int cli_cmd_login(int argc, char **argv);
int cli_cmd_logout(int argc, char **argv);
int cli_cmd_whoami(int argc, char **argv);
int cli_cmd_register(int argc, char **argv);
int cli_cmd_user(int argc, char **argv);
int cli_cmd_token(int argc, char **argv);
int cli_cmd_submit(int argc, char **argv);
int cli_cmd_jobs(int argc, char **argv);
int cli_cmd_show(int argc, char **argv);
int cli_cmd_cancel(int argc, char **argv);
int cli_cmd_events(int argc, char **argv);
int cli_cmd_logs(int argc, char **argv);
int cli_cmd_nodes(int argc, char **argv);
int cli_cmd_share(int argc, char **argv);
int cli_cmd_node_token(int argc, char **argv);
int cli_cmd_account(int argc, char **argv);
int cli_cmd_usage(int argc, char **argv); /* cli_billing.c */
int cli_cmd_invoice(int argc, char **argv);
int cli_cmd_credit(int argc, char **argv);
int cli_cmd_whatif(int argc, char **argv); /* cli_whatif.c */
int cli_cmd_why(int argc, char **argv);    /* cli_why.c */
int cli_cmd_report(int argc, char **argv); /* cli_report.c */

/* Terminal prompts (cli_prompt.c). A secret line, from the terminal without echo or
 * from standard input (always with force_stdin): malloc'd without its line end, or
 * NULL after a message. */
char *cli_read_secret(const char *prompt, int force_stdin);

/* A plain line after prompt (for a user name); NULL at the end of input. */
char *cli_read_line(const char *prompt);

/* Overwrites s with zeros and frees it (NULL is fine). */
void cli_wipe_free(char *s);

#endif
