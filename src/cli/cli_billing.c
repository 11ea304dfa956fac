/*
 * cli_billing.c - `fairgpu usage`, `fairgpu invoice` and `fairgpu credit`: the billing
 * reports and an admin's credit (docs/billing.md, "Reports").
 *
 * Money is shown in currency units with 6 decimals (the ledger's micro-units, exact);
 * --csv prints the server's CSV as it is, --json its JSON. Examples:
 *   fairgpu usage --from 2026-11-01 --to 2026-12-01 --account vision
 *     -> GET /v1/billing/usage?from=2026-11-01&to=2026-12-01&account=vision
 *   fairgpu invoice 2026-11 --csv   -> GET /v1/billing/invoices/2026-11?format=csv
 *   fairgpu credit vision 25 --note "outage"
 *     -> POST /v1/billing/adjustments {"kind":"credit","account":"vision",
 *        "amount_micros":-25000000,"note":"outage"}
 */
#include "cli/cli.h"
#include "cli/money.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const char USAGE_HELP[] =
    "usage: fairgpu usage [--from T] [--to T] [--account A] [--user U] [--gpu-type G]\n"
    "                     [--job ID] [--csv | --json]\n"
    "Billing line items (per job attempt, and each credit or correction) in [from, to).\n"
    "T: ms since the epoch or RFC 3339 (2026-11-01, 2026-11-01T12:00:00Z). Amounts in\n"
    "currency units, 6 decimals. You see your own usage; an account manager the account's;\n"
    "an admin everyone's.\n";

static const char INVOICE_HELP[] =
    "usage: fairgpu invoice YYYY-MM [--account A] [--csv | --json]\n"
    "The month's invoice per account: lines per user and GPU type, and totals. Account\n"
    "managers and admins see whole invoices; a member sees their own lines.\n";

static const char CREDIT_HELP[] =
    "usage: fairgpu credit ACCOUNT AMOUNT --note TEXT [--user U]\n"
    "Admins: gives AMOUNT currency units (e.g. 25 or 12.50) back to ACCOUNT as a credit\n"
    "row of the ledger, counted in this month's invoice.\n";

/* GETs path and prints the raw body (CSV) on success. Returns the exit status. */
static int print_raw(const char *path)
{
    cli_ctx_t x;
    int rc = cli_open(&x, 1);
    if (rc)
        return rc;
    fg_resp_t r;
    if (fg_client_request(&x.c, "GET", path, NULL, NULL, &r) < 0) {
        cli_close(&x);
        return 1;
    }
    if (r.status < 200 || r.status >= 300) {
        rc = fg_client_report(&x.c, &r);
    } else {
        fwrite(r.body, 1, r.len, stdout);
        rc = 0;
    }
    fg_resp_free(&r);
    cli_close(&x);
    return rc;
}

/* A money member of o as currency units into buf. */
static const char *money(json_t *o, const char *k, char *buf, size_t n)
{
    long long v = 0;
    if (!cli_jint(o, k, &v))
        return "";
    return fg_fmt_micros(v, buf, n);
}

static void usage_table(json_t *res)
{
    fg_table_t t;
    fg_table_init(&t, 9, "KIND", "JOB", "ATTEMPT", "ACCOUNT", "USER", "GPU TYPE", "GPU-SECONDS",
                  "COST", "NOTE");
    size_t i;
    json_t *l;
    json_array_foreach(cli_items_of(res), i, l)
    {
        char b[6][64];
        fg_table_row(&t, cli_jstr(l, "kind"), cli_jfmt(l, "job_id", b[0], 64),
                     cli_jfmt(l, "attempt", b[1], 64), cli_jstr(l, "account"), cli_jstr(l, "user"),
                     cli_jstr(l, "gpu_type"), cli_jfmt(l, "gpu_seconds", b[2], 64),
                     money(l, "cost_micros", b[3], 64), cli_jstr(l, "note"));
    }
    json_t *tot = json_object_get(res, "totals");
    char b[2][64];
    fg_table_row(&t, "TOTAL", "", "", "", "", "", cli_jfmt(tot, "gpu_seconds", b[0], 64),
                 money(tot, "cost_micros", b[1], 64), cli_jstr(res, "currency"));
    fg_table_print(&t, stdout);
    fg_table_free(&t);
}

int cli_cmd_usage(int argc, char **argv)
{
    static const struct option lo[] = {{"from", required_argument, 0, 'f'},
                                       {"to", required_argument, 0, 't'},
                                       {"account", required_argument, 0, 'a'},
                                       {"user", required_argument, 0, 'u'},
                                       {"gpu-type", required_argument, 0, 'g'},
                                       {"job", required_argument, 0, 'j'},
                                       {"csv", no_argument, 0, 'c'},
                                       {"json", no_argument, 0, 'J'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    static const char *const keys[] = {['f'] = "from", ['t'] = "to",       ['a'] = "account",
                                       ['u'] = "user", ['g'] = "gpu_type", ['j'] = "job"};
    char path[2048] = "/v1/billing/usage";
    int c, csv = 0, json = 0;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        if (c == 'h') {
            fputs(USAGE_HELP, stdout);
            return 0;
        } else if (c == 'c') {
            csv = 1;
        } else if (c == 'J') {
            json = 1;
        } else if (c > 0 && c < (int)(sizeof keys / sizeof keys[0]) && keys[c]) {
            cli_query_add(path, sizeof path, keys[c], optarg);
        } else {
            return cli_usage("usage", "bad option");
        }
    }
    if (optind < argc)
        return cli_usage("usage", "no operands expected ('%s')", argv[optind]);
    if (csv && json)
        return cli_usage("usage", "--csv or --json, not both");
    if (csv) {
        cli_query_add(path, sizeof path, "format", "csv");
        return print_raw(path);
    }
    return cli_get_print(path, json, usage_table);
}

static void invoice_table(json_t *res)
{
    printf("Invoice %s (%s)\n", cli_jstr(res, "month") ? cli_jstr(res, "month") : "",
           cli_jstr(res, "currency") ? cli_jstr(res, "currency") : "no currency yet");
    fg_table_t t;
    fg_table_init(&t, 8, "ACCOUNT", "USER", "GPU TYPE", "GPU-SECONDS", "CHARGE", "REFUND", "CREDIT",
                  "TOTAL");
    size_t i, k;
    json_t *a, *l;
    json_array_foreach(json_object_get(res, "accounts"), i, a)
    {
        char b[5][64];
        json_array_foreach(json_object_get(a, "lines"), k, l)
        {
            fg_table_row(&t, cli_jstr(a, "account"), cli_jstr(l, "user"), cli_jstr(l, "gpu_type"),
                         cli_jfmt(l, "gpu_seconds", b[0], 64), money(l, "charge_micros", b[1], 64),
                         money(l, "refund_micros", b[2], 64), money(l, "credit_micros", b[3], 64),
                         money(l, "total_micros", b[4], 64));
        }
        const char *own = cli_jstr(a, "scope");
        fg_table_row(&t, cli_jstr(a, "account"),
                     own && !strcmp(own, "own") ? "TOTAL (your lines)" : "TOTAL", "",
                     cli_jfmt(a, "gpu_seconds", b[0], 64), money(a, "charge_micros", b[1], 64),
                     money(a, "refund_micros", b[2], 64), money(a, "credit_micros", b[3], 64),
                     money(a, "total_micros", b[4], 64));
    }
    char b[2][64];
    fg_table_row(&t, "TOTAL", "", "", cli_jfmt(res, "gpu_seconds", b[0], 64), "", "", "",
                 money(res, "total_micros", b[1], 64));
    fg_table_print(&t, stdout);
    fg_table_free(&t);
}

int cli_cmd_invoice(int argc, char **argv)
{
    static const struct option lo[] = {{"account", required_argument, 0, 'a'},
                                       {"csv", no_argument, 0, 'c'},
                                       {"json", no_argument, 0, 'J'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    const char *account = NULL;
    int c, csv = 0, json = 0;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        if (c == 'h') {
            fputs(INVOICE_HELP, stdout);
            return 0;
        } else if (c == 'a') {
            account = optarg;
        } else if (c == 'c') {
            csv = 1;
        } else if (c == 'J') {
            json = 1;
        } else {
            return cli_usage("invoice", "bad option");
        }
    }
    if (optind + 1 != argc)
        return cli_usage("invoice", "takes one month, YYYY-MM (e.g. 2026-11)");
    if (csv && json)
        return cli_usage("invoice", "--csv or --json, not both");
    char path[1024];
    cli_path(path, sizeof path, "/v1/billing/invoices/", argv[optind], NULL);
    cli_query_add(path, sizeof path, "account", account);
    if (csv) {
        cli_query_add(path, sizeof path, "format", "csv");
        return print_raw(path);
    }
    return cli_get_print(path, json, invoice_table);
}

int cli_cmd_credit(int argc, char **argv)
{
    static const struct option lo[] = {{"note", required_argument, 0, 'n'},
                                       {"user", required_argument, 0, 'u'},
                                       {"json", no_argument, 0, 'J'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    const char *note = NULL, *user = NULL;
    int c, json = 0;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        if (c == 'h') {
            fputs(CREDIT_HELP, stdout);
            return 0;
        } else if (c == 'n') {
            note = optarg;
        } else if (c == 'u') {
            user = optarg;
        } else if (c == 'J') {
            json = 1;
        } else {
            return cli_usage("credit", "bad option");
        }
    }
    if (optind + 2 != argc)
        return cli_usage("credit", "takes an ACCOUNT and an AMOUNT");
    if (!note)
        return cli_usage("credit", "--note is required (what the credit is for)");
    int64_t micros;
    if (fg_parse_units(argv[optind + 1], &micros) || micros == 0)
        return cli_usage("credit", "AMOUNT: a positive number of currency units, at most 6 "
                                   "decimals (e.g. 25 or 12.50)");
    json_t *body = json_pack("{s:s,s:s,s:I,s:s}", "kind", "credit", "account", argv[optind],
                             "amount_micros", (json_int_t)-micros, "note", note);
    if (user)
        json_object_set_new(body, "user", json_string(user));
    json_t *res;
    int rc = cli_fetch("POST", "/v1/billing/adjustments", body, &res);
    json_decref(body);
    if (!rc) {
        if (json) {
            cli_print_json(res);
        } else {
            char b[64];
            printf("Credited %s %s (ledger row %s)\n", argv[optind], fg_fmt_micros(micros, b, 64),
                   cli_jstr(res, "id") ? cli_jstr(res, "id") : "?");
        }
    }
    json_decref(res);
    return rc;
}
