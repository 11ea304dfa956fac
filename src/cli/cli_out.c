/*
 * cli_out.c - reading the controller's JSON replies and printing them: members as
 * text, times, list items, the --json output and list tables.
 *
 * Replies are hostile input: every accessor accepts a missing member or one of the
 * wrong type and gives "" (or 0 / NULL), so a table cell is empty rather than wrong.
 * Example: for {"id": 7, "name": null}, cli_jfmt(o, "id") is "7" and
 * cli_jfmt(o, "name") is "".
 */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *cli_jstr(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

const char *cli_jfmt(json_t *o, const char *k, char *buf, size_t n)
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

int cli_jint(json_t *o, const char *k, long long *v)
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

const char *cli_jtime(json_t *o, const char *k, char *buf, size_t n)
{
    long long t;
    buf[0] = '\0';
    if (!cli_jint(o, k, &t) || t <= 0)
        return buf;
    time_t tt = (time_t)t;
    struct tm tm;
    if (localtime_r(&tt, &tm))
        strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
    return buf;
}

long long cli_since(json_t *o, const char *k)
{
    long long t;
    if (!cli_jint(o, k, &t) || t <= 0)
        return -1;
    long long d = (long long)time(NULL) - t;
    return d < 0 ? 0 : d;
}

json_t *cli_items_of(json_t *j)
{
    if (json_is_array(j))
        return j;
    json_t *it = json_object_get(j, "items");
    return json_is_array(it) ? it : NULL;
}

int cli_is_terminal_state(const char *s)
{
    return s && (!strcmp(s, "COMPLETED") || !strcmp(s, "FAILED") || !strcmp(s, "CANCELLED") ||
                 !strcmp(s, "TIMEOUT"));
}

void cli_print_json(json_t *j)
{
    json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', stdout);
}

void cli_print(json_t *res, int json, void (*human)(json_t *res))
{
    if (json)
        cli_print_json(res);
    else
        human(res);
}

int cli_get_print(const char *path, int json, void (*human)(json_t *res))
{
    json_t *res;
    int rc = cli_fetch("GET", path, NULL, &res);
    if (!rc)
        cli_print(res, json, human);
    json_decref(res);
    return rc;
}

void cli_list_table(json_t *res, const char *const *keys, const char *const *heads, int n,
                    int times_from)
{
    fg_table_t t;
    fg_table_initv(&t, n, heads);
    size_t k;
    json_t *r;
    json_array_foreach(cli_items_of(res), k, r)
    {
        char buf[FG_TABLE_MAX_COLS][256];
        const char *cells[FG_TABLE_MAX_COLS];
        for (int c = 0; c < n; c++) {
            if (c >= times_from)
                cli_jtime(r, keys[c], buf[c], sizeof buf[c]);
            else
                cli_jfmt(r, keys[c], buf[c], sizeof buf[c]);
            cells[c] = buf[c];
        }
        fg_table_rowv(&t, cells);
    }
    fg_table_print(&t, stdout);
    fg_table_free(&t);
}
