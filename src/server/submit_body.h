/*
 * submit_body.h - the body of POST /v1/jobs: parsed and validated into the fields of a
 * submission, without the HTTP engine (the unit test and the fuzz target call it alone).
 *
 * Two parsers give the same answer:
 *   - srv_submit_parse_json, the reference: jansson (duplicate keys rejected), then
 *     every field check in the order the API has always applied them; on an error it
 *     fills the 400 answer (code, field, message) instead of replying itself.
 *   - srv_submit_parse_fast, no tree and no allocation but the command's text: it
 *     accepts only a body of the plain shape clients send (an object of known keys,
 *     each once, whose values are plain strings of printable ASCII without escapes,
 *     integers, and for `command` an array of such strings) and only when every check
 *     passes. Anything else (any syntax error, escape, null, unknown or repeated key,
 *     `env`, a value out of range) returns false and the caller runs the reference,
 *     which then gives the answer it always gave. So the fast parser never answers an
 *     error itself: for every body it either gives exactly the reference's fields or
 *     defers to it (tests/unit/test_submit_body.c and tests/fuzz/fuzz_submit_body.c
 *     compare the two).
 */
#ifndef FG_SERVER_SUBMIT_BODY_H
#define FG_SERVER_SUBMIT_BODY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The fields of a valid submission. Strings point into the request body (fast) or into
 * `tree` (reference); cmd and env are malloc'd compact JSON. */
typedef struct srv_submit_in {
    const char *name, *gpu_type, *model, *dataset, *account; /* NULL: absent */
    char *cmd;                                               /* compact JSON, never NULL */
    char *env;                                               /* compact JSON or NULL */
    long long gpus, time_limit_s, max_retries, cpus, memory_mb, checkpoint_interval_s;
    int prio;     /* fg_prio_t */
    json_t *tree; /* the reference's parse, owning its strings; NULL on the fast path */
} srv_submit_in_t;

/* A 400 answer of the reference. */
typedef struct srv_submit_err {
    unsigned status;
    const char *code;
    const char *field; /* NULL or the field named in the answer */
    char msg[512];
} srv_submit_err_t;

typedef struct srv_submit_limits {
    long long default_time_limit_s, max_time_limit_s;
} srv_submit_limits_t;

/* The reference. true: *in filled (free with srv_submit_in_clear); false: *err filled,
 * *in empty. idem is the Idempotency-Key header or NULL (checked after the JSON, before
 * the fields, as always). body needs no terminating NUL. */
bool srv_submit_parse_json(const char *body, size_t len, const char *idem,
                           const srv_submit_limits_t *lim, srv_submit_in_t *in,
                           srv_submit_err_t *err);

/* The fast path. true: *in filled exactly as the reference would fill it, and string
 * values were NUL-terminated in place inside body[0..len); false: nothing was written,
 * run the reference. */
bool srv_submit_parse_fast(char *body, size_t len, const char *idem, const srv_submit_limits_t *lim,
                           srv_submit_in_t *in);

void srv_submit_in_clear(srv_submit_in_t *in);

/* [a-z0-9_.-]{1,63}; usernames: not all digits; shown text: no control or bidi
 * override characters (also in valid.h, which says more) */
bool v_name_ok(const char *s);
bool v_username_ok(const char *s);
bool v_text_ok(const char *s);

#endif
