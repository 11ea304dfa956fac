/*
 * cli_stream.c - the commands that can follow a server-sent event stream: events (the
 * cluster's changes) and logs (a job's output).
 *
 * Following survives a dropped connection: it reconnects where it left off (the last
 * event id it saw) and gives up only after 30 reconnects in a row that brought nothing
 * new. Example: `fairgpu events -f` asks GET /v1/events?limit=1 for the head sequence
 * number H, then streams GET /v1/events?follow=1&since=H; after a drop at sequence
 * H+5 it reconnects with since=H+5 and Last-Event-ID: H+5.
 */
#include "cli/cli.h"
#include "cli/sse.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------- following -- */

/* How many reconnects in a row without progress make a follower give up. */
#define MAX_FAILED_RECONNECTS 30

/*
 * One connection of a followed stream at path, resuming after event id lei ("" at
 * the start), each event given to cb. quiet: do not report a transport failure (a
 * reconnect). Returns fg_client_stream's result; -2 (the server refused) after
 * reporting, with *rc the exit status.
 */
static int stream_once(cli_ctx_t *x, const char *path, const char *lei, fg_sse_cb_t cb, void *ud,
                       int quiet, int *rc)
{
    fg_sse_t p;
    fg_sse_init(&p, cb, ud);
    fg_resp_t r;
    int sr = fg_client_stream(&x->c, path, lei, &p, quiet, &r);
    fg_sse_free(&p);
    if (sr == -2) {
        *rc = fg_client_report(&x->c, &r);
        fg_resp_free(&r);
    }
    return sr;
}

/* After a connection ended without the stream's end: counts the failed reconnects in
 * *failures (progress resets it) and says once that it reconnects (`what` happened).
 * Returns 0 to reconnect, or 1 (giving up, after a message). */
static int reconnect_or_give_up(int *failures, int progressed, const char *what)
{
    *failures = progressed ? 0 : *failures + 1;
    if (*failures > MAX_FAILED_RECONNECTS) {
        fprintf(stderr, "fairgpu: giving up after %d failed reconnects\n", *failures - 1);
        return 1;
    }
    if (*failures == 1)
        fprintf(stderr, "fairgpu: %s; reconnecting...\n", what);
    return 0;
}

/* Did an SSE event of this type end the stream? */
static int is_end_event(const char *type)
{
    return !strcmp(type, "end") || !strcmp(type, "eof");
}

/* ---------------------------------------------------------------- events -- */

/* The id of the job an event is about, into id. */
static void event_job(json_t *e, char *id, size_t n)
{
    if (*cli_jfmt(e, "job_id", id, n))
        return;
    json_t *job = json_object_get(e, "job");
    if (json_is_object(job))
        cli_jfmt(job, "id", id, n);
    else
        cli_jfmt(e, "job", id, n);
}

/* One event: a compact JSON line with json, else "SEQ TIME  job J: FROM -> TO (WHY)". */
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
    cli_jfmt(e, "seq", seq, sizeof seq);
    cli_jtime(e, "time", t, sizeof t);
    if (!*cli_jfmt(e, "kind", kind, sizeof kind))
        cli_jfmt(e, "type", kind, sizeof kind);
    event_job(e, id, sizeof id);
    cli_jfmt(e, "node", node, sizeof node);
    cli_jfmt(e, "from", from, sizeof from);
    cli_jfmt(e, "to", to, sizeof to);
    cli_jfmt(e, "reason", reason, sizeof reason);
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
    long long last_seq; /* the highest sequence number seen, -1 none */
    int ended;          /* an "end"-type event arrived */
} events_state_t;

/* Prints event e and keeps its sequence number. */
static void take_event(events_state_t *st, json_t *e)
{
    long long s;
    if (cli_jint(e, "seq", &s) && s > st->last_seq)
        st->last_seq = s;
    print_event(e, st->json);
}

/* The SSE callback of events -f: one event, or a batch of them as a list. */
static int on_event(void *ud, const char *type, const char *data, size_t len, const char *id)
{
    events_state_t *st = ud;
    (void)id;
    if (is_end_event(type)) {
        st->ended = 1;
        return 1;
    }
    json_t *e = json_loadb(data, len, 0, NULL);
    if (!e) {
        if (len)
            printf("%s\n", data);
        return 0;
    }
    json_t *items = cli_items_of(e);
    size_t k;
    json_t *v;
    if (items) {
        json_array_foreach(items, k, v) take_event(st, v);
    } else {
        take_event(st, e);
    }
    json_decref(e);
    return 0;
}

/* Prints the events after since_seq (-1: from the start) once. */
static int events_list(cli_ctx_t *x, long long since_seq, int json)
{
    char path[256] = "/v1/events";
    if (since_seq >= 0) {
        char s[32];
        snprintf(s, sizeof s, "%lld", since_seq);
        cli_query_add(path, sizeof path, "since", s);
    }
    json_t *res;
    int rc = cli_call(x, "GET", path, NULL, NULL, &res);
    if (!rc && json)
        cli_print_json(res);
    else if (!rc) {
        size_t k;
        json_t *v;
        json_array_foreach(cli_items_of(res), k, v) print_event(v, 0);
    }
    json_decref(res);
    return rc;
}

/* The sequence number of the newest event into *head (unchanged when the server
 * gives none): where following starts without --since. Returns the exit status. */
static int events_head(cli_ctx_t *x, long long *head)
{
    json_t *res;
    int rc = cli_call(x, "GET", "/v1/events?limit=1", NULL, NULL, &res);
    if (rc)
        return rc;
    long long h;
    if (cli_jint(res, "head_seq", &h) && h >= 0)
        *head = h;
    json_decref(res);
    return 0;
}

/* Streams the events after since_seq until the server ends the stream. */
static int events_follow(cli_ctx_t *x, long long since_seq, int json)
{
    events_state_t st = {.json = json, .last_seq = since_seq};
    int failures = 0, rc = 0;
    for (;;) {
        char path[256] = "/v1/events?follow=1";
        char s[32], lei[32] = "";
        if (st.last_seq >= 0) {
            snprintf(s, sizeof s, "%lld", st.last_seq);
            cli_query_add(path, sizeof path, "since", s);
            snprintf(lei, sizeof lei, "%lld", st.last_seq);
        }
        long long before = st.last_seq;
        int sr = stream_once(x, path, lei, on_event, &st, failures > 0, &rc);
        if (sr == -2 || sr == 1 || st.ended)
            break;
        if (reconnect_or_give_up(&failures, st.last_seq > before, "event stream ended"))
            return 1;
        sleep(failures ? 1 : 0);
    }
    return rc;
}

static const char EVENTS_HELP[] =
    "usage: fairgpu events [--since SEQ] [-f|--follow] [--json]\n"
    "Shows cluster-wide changes after sequence number SEQ; -f keeps streaming\n"
    "them (from now on unless --since; reconnecting where it left off).\n"
    "--json: one JSON event per line when following, else the server's reply.\n";

/* Parses events' options. Returns -1 to go on, else the exit status. */
static int events_options(int argc, char **argv, long long *since_seq, int *follow, int *json)
{
    static const struct option lo[] = {{"since", required_argument, 0, 's'},
                                       {"follow", no_argument, 0, 'f'},
                                       {"json", no_argument, 0, 'j'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    int c;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, "hfs:", lo, NULL)) != -1) {
        if (c == 's') {
            if (cli_parse_ll("events", "--since", optarg, 0, (long long)9e18, since_seq) < 0)
                return 2;
        } else if (c == 'f')
            *follow = 1;
        else if (c == 'j')
            *json = 1;
        else if (c == 'h') {
            fputs(EVENTS_HELP, stdout);
            return 0;
        } else
            return cli_usage("events", "bad option");
    }
    if (optind < argc)
        return cli_usage("events", "unexpected argument '%s'", argv[optind]);
    return -1;
}

int cli_cmd_events(int argc, char **argv)
{
    long long since_seq = -1;
    int follow = 0, json = 0;
    int rc = events_options(argc, argv, &since_seq, &follow, &json);
    if (rc >= 0)
        return rc;
    cli_ctx_t x;
    if ((rc = cli_open(&x, 1)))
        return rc;
    if (!follow)
        rc = events_list(&x, since_seq, json);
    else if (since_seq >= 0 || !(rc = events_head(&x, &since_seq)))
        rc = events_follow(&x, since_seq, json);
    cli_close(&x);
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
    if (is_end_event(type)) {
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

/* Prints the log at path once, as it is now. */
static int logs_print(cli_ctx_t *x, const char *path)
{
    int rc = 0;
    fg_resp_t r;
    if (fg_client_request(&x->c, "GET", path, NULL, NULL, &r) < 0)
        rc = 1;
    else if (r.status < 200 || r.status >= 300)
        rc = fg_client_report(&x->c, &r);
    else
        fwrite(r.body, 1, r.len, stdout);
    fg_resp_free(&r);
    return rc;
}

/* Has job ended? (No when the server cannot say.) */
static int job_ended(cli_ctx_t *x, const char *job)
{
    char jp[1024];
    json_t *j;
    if (cli_call(x, "GET", cli_path(jp, sizeof jp, "/v1/jobs/", job, NULL), NULL, NULL, &j))
        return 0;
    int done = cli_is_terminal_state(cli_jstr(j, "state"));
    json_decref(j);
    return done;
}

/* Streams job's log at path until the job ends. */
static int logs_follow(cli_ctx_t *x, const char *path, const char *job)
{
    logs_state_t st = {.offset = 0};
    int failures = 0, rc = 0;
    for (;;) {
        char before[256];
        snprintf(before, sizeof before, "%s", st.last_id);
        int sr = stream_once(x, path, st.last_id, on_log, &st, failures > 0, &rc);
        if (sr == -2 || sr == 1 || st.ended)
            break;
        /* The server closed the stream: done if the job has ended. */
        if (sr == 0 && job_ended(x, job))
            break;
        if (reconnect_or_give_up(&failures, strcmp(before, st.last_id) != 0,
                                 "log stream interrupted"))
            return 1;
        sleep(1);
    }
    return rc;
}

static const char LOGS_HELP[] =
    "usage: fairgpu logs [-f|--follow] [--rank R] JOB\n"
    "Prints a job's combined stdout and stderr (every rank, each line prefixed\n"
    "with its rank, unless --rank). -f follows it live until the job ends,\n"
    "resuming where it left off if the connection drops.\n";

/* Parses logs' options. Returns -1 to go on (the job at optind), else the exit
 * status. */
static int logs_options(int argc, char **argv, int *follow, const char **rank)
{
    static const struct option lo[] = {{"follow", no_argument, 0, 'f'},
                                       {"rank", required_argument, 0, 'r'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    int c;
    long long rv;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, "hfr:", lo, NULL)) != -1) {
        if (c == 'f')
            *follow = 1;
        else if (c == 'r') {
            if (cli_parse_ll("logs", "--rank", optarg, 0, 100000, &rv) < 0)
                return 2;
            *rank = optarg;
        } else if (c == 'h') {
            fputs(LOGS_HELP, stdout);
            return 0;
        } else
            return cli_usage("logs", "bad option");
    }
    if (argc - optind != 1)
        return cli_usage("logs", "give one job id");
    return -1;
}

int cli_cmd_logs(int argc, char **argv)
{
    int follow = 0;
    const char *rank = NULL;
    int rc = logs_options(argc, argv, &follow, &rank);
    if (rc >= 0)
        return rc;
    const char *job = argv[optind];
    cli_ctx_t x;
    if ((rc = cli_open(&x, 1)))
        return rc;
    char path[1200];
    cli_path(path, sizeof path, "/v1/jobs/", job, "/logs");
    if (follow)
        cli_query_add(path, sizeof path, "follow", "1");
    cli_query_add(path, sizeof path, "rank", rank);
    rc = follow ? logs_follow(&x, path, job) : logs_print(&x, path);
    cli_close(&x);
    return rc;
}
