/*
 * fuzz_adjust_body.c - libFuzzer target for the untrusted text the billing reports
 * parse: the body of POST /v1/billing/adjustments (src/server/adjust_body.c, after
 * jansson as the server parses it), and the same bytes as a ?from=/?to= time, an
 * invoice month and a CSV cell (src/server/billfmt.c). An accepted adjustment must obey
 * the sign rules (a credit negative, a correction non-zero with refers_to, bounded), a
 * name and a note that fit their fields; a refused one must name a code and a message.
 * A time must print and parse back to itself; a CSV cell must read back to its text.
 * Example seed: {"kind":"credit","account":"a","amount_micros":-5,"note":"n"}.
 */
#include "server/adjust_body.h"
#include "server/billfmt.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts unless an accepted adjustment follows the rules of adjust_body.h. */
static void check_accepted(const srv_adjust_t *a)
{
    if (a->amount_micros == 0 || a->amount_micros > SRV_ADJUST_MAX_MICROS ||
        a->amount_micros < -SRV_ADJUST_MAX_MICROS)
        abort();
    if (a->kind == FG_ROW_CREDIT ? a->amount_micros > 0
                                 : a->kind != FG_ROW_CORRECTION || a->refers_to == 0)
        abort();
    size_t n = strnlen(a->note, sizeof a->note);
    if (n == 0 || n >= sizeof a->note || !a->account[0] ||
        strnlen(a->account, FG_NAME_MAX) >= FG_NAME_MAX ||
        strnlen(a->user, FG_NAME_MAX) >= FG_NAME_MAX)
        abort();
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)a->note[i] < 0x20)
            abort();
}

/* Reads a CSV cell back (RFC 4180): the text it holds, less a formula guard's quote. */
static void check_cell(const char *s)
{
    size_t need = srv_csv_cell(s, NULL, 0);
    char *out = malloc(need + 1), *back = malloc(need + 1);
    if (srv_csv_cell(s, out, need + 1) != need || strlen(out) != need)
        abort();
    size_t k = 0, i = 0;
    bool quoted = out[0] == '"';
    for (i = quoted ? 1 : 0; i < need - (quoted ? 1 : 0); i++) {
        if (quoted && out[i] == '"') {
            if (out[i + 1] != '"')
                abort(); /* a lone quote inside a quoted cell */
            i++;
        } else if (!quoted && strchr(",\"\r\n", out[i])) {
            abort(); /* unquoted special character */
        }
        back[k++] = out[i];
    }
    back[k] = '\0';
    const char *b = back;
    if (s[0] && strchr("=+-@\t\r", s[0]) && *b++ != '\'')
        abort();
    if (strcmp(b, s))
        abort();
    free(out);
    free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t je;
    json_t *o = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
    if (o) {
        srv_adjust_t a;
        srv_adjust_err_t err;
        if (srv_adjust_parse(o, &a, &err) == 0)
            check_accepted(&a);
        else if (!err.code || !err.msg[0])
            abort();
        json_decref(o);
    }
    if (size > 4096)
        return 0;
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    int64_t t, t2;
    if (srv_bill_parse_time(s, &t)) {
        char txt[32];
        if (t < 0)
            abort();
        srv_bill_fmt_time(t, txt);
        if (!srv_bill_parse_time(txt, &t2) || t2 != t)
            abort();
    }
    int y, m;
    if (srv_bill_parse_month(s, &y, &m) && (m < 1 || m > 12 || y < 1970 || strlen(s) != 7))
        abort();
    check_cell(s);
    free(s);
    return 0;
}
