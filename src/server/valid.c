/* valid.c - request field validation (see valid.h). */
#include "server/valid.h"

#include <string.h>

/* v_name_ok is in submit_body.c (the fast parser of submissions uses it too). */

bool v_string(srv_req_t *r, json_t *o, const char *key, bool required, size_t maxlen,
              const char **out)
{
    json_t *v = json_object_get(o, key);
    *out = NULL;
    if (!v || json_is_null(v)) {
        if (required) {
            srv_reply_error(r, 400, "invalid_argument", key, "'%s' is required", key);
            return false;
        }
        return true;
    }
    if (!json_is_string(v)) {
        srv_reply_error(r, 400, "invalid_argument", key, "'%s' must be a string", key);
        return false;
    }
    size_t n = json_string_length(v);
    if (n > maxlen || (required && n == 0) || strlen(json_string_value(v)) != n) {
        srv_reply_error(r, 400, "invalid_argument", key,
                        "'%s' must be 1 to %zu bytes of text without NUL", key, maxlen);
        return false;
    }
    *out = json_string_value(v);
    return true;
}

bool v_int(srv_req_t *r, json_t *o, const char *key, bool required, long long lo, long long hi,
           long long *out, bool *present)
{
    json_t *v = json_object_get(o, key);
    if (present)
        *present = false;
    if (!v || json_is_null(v)) {
        if (required) {
            srv_reply_error(r, 400, "invalid_argument", key, "'%s' is required", key);
            return false;
        }
        return true;
    }
    if (!json_is_integer(v)) {
        srv_reply_error(r, 400, "invalid_argument", key, "'%s' must be an integer", key);
        return false;
    }
    long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        srv_reply_error(r, 400, "invalid_argument", key, "'%s' must be between %lld and %lld", key,
                        lo, hi);
        return false;
    }
    *out = x;
    if (present)
        *present = true;
    return true;
}

bool v_number(srv_req_t *r, json_t *o, const char *key, double lo, double hi, double *out,
              bool *present)
{
    json_t *v = json_object_get(o, key);
    if (present)
        *present = false;
    if (!v || json_is_null(v))
        return true;
    if (!json_is_number(v)) {
        srv_reply_error(r, 400, "invalid_argument", key, "'%s' must be a number", key);
        return false;
    }
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi)) {
        srv_reply_error(r, 400, "invalid_argument", key, "'%s' must be between %g and %g", key, lo,
                        hi);
        return false;
    }
    *out = x;
    if (present)
        *present = true;
    return true;
}

bool v_bool(srv_req_t *r, json_t *o, const char *key, bool *out, bool *present)
{
    json_t *v = json_object_get(o, key);
    if (present)
        *present = false;
    if (!v || json_is_null(v))
        return true;
    if (!json_is_boolean(v)) {
        srv_reply_error(r, 400, "invalid_argument", key, "'%s' must be true or false", key);
        return false;
    }
    *out = json_is_true(v);
    if (present)
        *present = true;
    return true;
}

bool v_known(srv_req_t *r, json_t *o, const char *const *keys)
{
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        bool ok = false;
        for (const char *const *p = keys; *p; p++)
            if (!strcmp(*p, k)) {
                ok = true;
                break;
            }
        if (!ok) {
            srv_reply_error(r, 400, "invalid_argument", k, "unknown field '%s'", k);
            return false;
        }
    }
    return true;
}
