/*
 * adjust_body.c - validation of an adjustment's body (adjust_body.h): every field is
 * checked before anything is looked up, so a refused body changes nothing.
 *
 * Example: {"kind":"correction","account":"a","amount_micros":250,"refers_to":17,
 * "note":"rate typo"} is accepted; the same with "refers_to" left out is refused with
 * field "refers_to".
 */
#include "server/adjust_body.h"

#include <assert.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Fills *err and returns -1. */
static int fail(srv_adjust_err_t *err, const char *code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(srv_adjust_err_t *err, const char *code, const char *field, const char *fmt, ...)
{
    err->code = code;
    err->field = field;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

/* [a-z0-9_.-]{1,63}: a name that fits a ledger row's field. */
static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n >= FG_NAME_MAX)
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' ||
              *p == '-'))
            return false;
    return true;
}

/* A note: 1..127 bytes, no C0 control character nor DEL (jansson gave valid UTF-8). */
static bool note_ok(const char *s, size_t n)
{
    if (n < 1 || n >= FG_BILL_NOTE_MAX || strlen(s) != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return false;
    return true;
}

/* The optional name field key into out (size FG_NAME_MAX): 0, or -1 with *err. */
static int name_field(json_t *o, const char *key, bool required, char *out, srv_adjust_err_t *err)
{
    json_t *v = json_object_get(o, key);
    out[0] = '\0';
    if (!v || json_is_null(v)) {
        if (required)
            return fail(err, "invalid_argument", key, "'%s' is required", key);
        return 0;
    }
    if (!json_is_string(v) || !name_ok(json_string_value(v)))
        return fail(err, "invalid_argument", key, "%s must be a name of 1-63 of a-z 0-9 . _ -",
                    key);
    snprintf(out, FG_NAME_MAX, "%s", json_string_value(v));
    return 0;
}

/* kind, amount_micros and refers_to by the sign rules. */
static int amount_fields(json_t *o, srv_adjust_t *out, srv_adjust_err_t *err)
{
    json_t *k = json_object_get(o, "kind");
    const char *ks = json_is_string(k) ? json_string_value(k) : "";
    if (!strcmp(ks, "credit"))
        out->kind = FG_ROW_CREDIT;
    else if (!strcmp(ks, "correction"))
        out->kind = FG_ROW_CORRECTION;
    else
        return fail(err, "invalid_argument", "kind", "kind must be \"credit\" or \"correction\"");
    json_t *a = json_object_get(o, "amount_micros");
    if (!json_is_integer(a) || json_integer_value(a) < -SRV_ADJUST_MAX_MICROS ||
        json_integer_value(a) > SRV_ADJUST_MAX_MICROS || json_integer_value(a) == 0)
        return fail(err, "invalid_argument", "amount_micros",
                    "amount_micros must be a non-zero integer of at most 10^15 either way");
    out->amount_micros = (int64_t)json_integer_value(a);
    if (out->kind == FG_ROW_CREDIT && out->amount_micros > 0)
        return fail(err, "invalid_argument", "amount_micros",
                    "a credit gives money back: amount_micros must be negative (a charge is "
                    "positive, a credit negative)");
    json_t *ref = json_object_get(o, "refers_to");
    if (ref && !json_is_null(ref)) {
        if (!json_is_integer(ref) || json_integer_value(ref) < 1)
            return fail(err, "invalid_argument", "refers_to",
                        "refers_to must be the id of a ledger row (a positive integer)");
        out->refers_to = (uint64_t)json_integer_value(ref);
    }
    if (out->kind == FG_ROW_CORRECTION && !out->refers_to)
        return fail(err, "invalid_argument", "refers_to",
                    "a correction must refer to the row it corrects (refers_to)");
    return 0;
}

int srv_adjust_parse(json_t *o, srv_adjust_t *out, srv_adjust_err_t *err)
{
    assert(out && err);
    memset(out, 0, sizeof *out);
    memset(err, 0, sizeof *err);
    if (!json_is_object(o))
        return fail(err, "invalid_json", NULL, "the request body must be a JSON object");
    static const char *const known[] = {"kind",      "account", "user", "amount_micros",
                                        "refers_to", "note",    NULL};
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v)
    {
        size_t i = 0;
        while (known[i] && strcmp(known[i], key))
            i++;
        if (!known[i]) {
            snprintf(err->field_name, sizeof err->field_name, "%s", key);
            return fail(err, "invalid_argument", err->field_name,
                        "an adjustment has only kind, account, user, amount_micros, refers_to "
                        "and note");
        }
    }
    if (amount_fields(o, out, err) || name_field(o, "account", true, out->account, err) ||
        name_field(o, "user", false, out->user, err))
        return -1;
    json_t *n = json_object_get(o, "note");
    if (!json_is_string(n) || !note_ok(json_string_value(n), json_string_length(n)))
        return fail(err, "invalid_argument", "note",
                    "note is required: 1-127 bytes of text without control characters");
    memcpy(out->note, json_string_value(n), json_string_length(n) + 1);
    return 0;
}
