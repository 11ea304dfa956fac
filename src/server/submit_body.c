/* submit_body.c - the body of POST /v1/jobs: the reference (jansson) and the fast parser
 * (see submit_body.h). */
#include "server/submit_body.h"

#include "common/xalloc.h"
#include "fairgpu/core.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool v_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n >= FG_NAME_MAX) /* (the core's names hold FG_NAME_MAX - 1 bytes) */
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' ||
              *p == '-'))
            return false;
    return true;
}

bool v_username_ok(const char *s)
{
    if (!v_name_ok(s))
        return false;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            return true;
    return false; /* all digits: it would read as a user id */
}

/* The length of the code point that starts at p (valid UTF-8, as jansson gives), and
 * whether it is one that must not be shown: C0 and C1 controls, DEL, and the bidi
 * marks, embeddings, overrides and isolates (U+061C, U+200E-F, U+202A-E, U+2066-9). */
static bool bad_code_point(const unsigned char *p)
{
    if (p[0] < 0x20 || p[0] == 0x7f)
        return true;
    if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
        return true;
    if (p[0] == 0xd8 && p[1] == 0x9c)
        return true;
    if (p[0] == 0xe2 && p[1] == 0x80 &&
        (p[2] == 0x8e || p[2] == 0x8f || (p[2] >= 0xaa && p[2] <= 0xae)))
        return true;
    if (p[0] == 0xe2 && p[1] == 0x81 && p[2] >= 0xa6 && p[2] <= 0xa9)
        return true;
    return false;
}

bool v_text_ok(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        /* a multi-byte sequence's continuation bytes are >= 0x80 and so never read as
         * an ASCII control; bad_code_point looks at most 3 bytes, all before the NUL */
        if (bad_code_point(p))
            return false;
    }
    return true;
}

/* json_dumps fails only when out of memory: abort, as fg_xmalloc does */
static char *dumped(char *txt)
{
    if (!txt) {
        fprintf(stderr, "fairgpu: out of memory (rendering a request's JSON)\n");
        abort();
    }
    return txt;
}

void srv_submit_in_clear(srv_submit_in_t *in)
{
    free(in->cmd);
    free(in->env);
    if (in->tree)
        json_decref(in->tree);
    memset(in, 0, sizeof *in);
}

/* ------------------------------------------------------------------ the reference */

static bool fail(srv_submit_err_t *err, const char *code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static bool fail(srv_submit_err_t *err, const char *code, const char *field, const char *fmt, ...)
{
    err->status = 400;
    err->code = code;
    err->field = field;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return false;
}

/* As valid.c's v_string, answering into err. */
static bool ref_string(json_t *o, const char *key, bool required, size_t maxlen, const char **out,
                       srv_submit_err_t *err)
{
    json_t *v = json_object_get(o, key);
    *out = NULL;
    if (!v || json_is_null(v)) {
        if (required)
            return fail(err, "invalid_argument", key, "'%s' is required", key);
        return true;
    }
    if (!json_is_string(v))
        return fail(err, "invalid_argument", key, "'%s' must be a string", key);
    size_t n = json_string_length(v);
    if (n > maxlen || (required && n == 0) || strlen(json_string_value(v)) != n)
        return fail(err, "invalid_argument", key, "'%s' must be 1 to %zu bytes of text without NUL",
                    key, maxlen);
    if (!v_text_ok(json_string_value(v)))
        return fail(err, "invalid_argument", key,
                    "'%s' must not hold control or bidirectional-override characters", key);
    *out = json_string_value(v);
    return true;
}

/* As valid.c's v_int, answering into err. */
static bool ref_int(json_t *o, const char *key, bool required, long long lo, long long hi,
                    long long *out, srv_submit_err_t *err)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        if (required)
            return fail(err, "invalid_argument", key, "'%s' is required", key);
        return true;
    }
    if (!json_is_integer(v))
        return fail(err, "invalid_argument", key, "'%s' must be an integer", key);
    long long x = json_integer_value(v);
    if (x < lo || x > hi)
        return fail(err, "invalid_argument", key, "'%s' must be between %lld and %lld", key, lo,
                    hi);
    *out = x;
    return true;
}

static bool env_name_ok(const char *k)
{
    if (!*k || strlen(k) > 256 || isdigit((unsigned char)*k))
        return false;
    for (const char *p = k; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_'))
            return false;
    return true;
}

/* Validates `command`; returns its compact JSON text (caller frees) or NULL (err set). */
static char *ref_command(json_t *b, srv_submit_err_t *err)
{
    json_t *c = json_object_get(b, "command");
    if (!c || json_is_null(c)) {
        fail(err, "invalid_argument", "command", "'command' is required");
        return NULL;
    }
    if (json_is_string(c)) {
        size_t n = json_string_length(c);
        if (n == 0 || n > 65536 || strlen(json_string_value(c)) != n) {
            fail(err, "invalid_argument", "command",
                 "'command' must be a non-empty string of at most 65536 bytes");
            return NULL;
        }
    } else if (json_is_array(c)) {
        size_t n = json_array_size(c), total = 0;
        if (n == 0 || n > 4096) {
            fail(err, "invalid_argument", "command",
                 "'command' must be a non-empty array of at most 4096 strings");
            return NULL;
        }
        size_t i;
        json_t *e;
        json_array_foreach(c, i, e)
        {
            if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e)) {
                fail(err, "invalid_argument", "command", "'command' array items must be strings");
                return NULL;
            }
            total += json_string_length(e);
        }
        if (json_string_length(json_array_get(c, 0)) == 0 || total > 262144) {
            fail(err, "invalid_argument", "command",
                 "'command' needs a program name and at most 256 KiB of arguments");
            return NULL;
        }
    } else {
        fail(err, "invalid_argument", "command",
             "'command' must be an array of strings or a string");
        return NULL;
    }
    return dumped(json_dumps(c, JSON_COMPACT | JSON_ENCODE_ANY));
}

/* Validates `env`; *out gets its JSON text or NULL when absent. false: err set. */
static bool ref_env(json_t *b, char **out, srv_submit_err_t *err)
{
    *out = NULL;
    json_t *e = json_object_get(b, "env");
    if (!e || json_is_null(e))
        return true;
    if (!json_is_object(e) || json_object_size(e) > 256)
        return fail(err, "invalid_argument", "env",
                    "'env' must be an object of at most 256 string values");
    const char *k;
    json_t *v;
    size_t total = 0;
    json_object_foreach(e, k, v)
    {
        if (!env_name_ok(k))
            return fail(err, "invalid_argument", "env",
                        "env name '%.64s' must be letters, digits and _", k);
        if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
            return fail(err, "invalid_argument", "env", "env value of '%.64s' must be a string", k);
        total += strlen(k) + json_string_length(v);
    }
    if (total > 262144)
        return fail(err, "invalid_argument", "env", "'env' is over 256 KiB");
    *out = dumped(json_dumps(e, JSON_COMPACT));
    return true;
}

bool srv_submit_parse_json(const char *body, size_t len, const char *idem,
                           const srv_submit_limits_t *lim, srv_submit_in_t *in,
                           srv_submit_err_t *err)
{
    memset(in, 0, sizeof *in);
    if (len == 0)
        return fail(err, "invalid_json", NULL,
                    "the request body is empty; a JSON object is expected");
    json_error_t je;
    json_t *b = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!b)
        return fail(err, "invalid_json", NULL, "invalid JSON at line %d, column %d (byte %d): %s",
                    je.line, je.column, je.position, je.text);
    if (!json_is_object(b)) {
        json_decref(b);
        return fail(err, "invalid_json", NULL, "the request body must be a JSON object");
    }
    in->tree = b;
    in->time_limit_s = lim->default_time_limit_s;
    const char *prio_s;
    if (idem && (strlen(idem) == 0 || strlen(idem) > 256)) {
        fail(err, "invalid_argument", "Idempotency-Key", "Idempotency-Key must be 1..256 bytes");
        goto bad;
    }
    if (!ref_string(b, "name", false, 128, &in->name, err))
        goto bad;
    if (!(in->cmd = ref_command(b, err)))
        goto bad;
    if (!ref_int(b, "gpus", true, 1, FG_MAX_JOB_GPUS, &in->gpus, err))
        goto bad;
    if (in->gpus > FG_WHOLE_NODE_GPUS && in->gpus % FG_WHOLE_NODE_GPUS) {
        fail(err, "invalid_argument", "gpus",
             "'gpus' must be 1..8, or a multiple of 8 (whole nodes); got %lld", in->gpus);
        goto bad;
    }
    if (!ref_string(b, "gpu_type", false, FG_NAME_MAX, &in->gpu_type, err) ||
        !ref_string(b, "model", false, 256, &in->model, err) ||
        !ref_string(b, "dataset", false, 256, &in->dataset, err) ||
        !ref_int(b, "time_limit_s", false, 1, lim->max_time_limit_s, &in->time_limit_s, err) ||
        !ref_string(b, "priority", false, 16, &prio_s, err) ||
        !ref_int(b, "max_retries", false, 0, 100, &in->max_retries, err) ||
        !ref_env(b, &in->env, err) || !ref_string(b, "account", false, 64, &in->account, err) ||
        !ref_int(b, "cpus", false, 1, 1000000, &in->cpus, err) ||
        !ref_int(b, "memory_mb", false, 1, (long long)1 << 40, &in->memory_mb, err) ||
        !ref_int(b, "checkpoint_interval_s", false, 0, (long long)1 << 40,
                 &in->checkpoint_interval_s, err))
        goto bad;
    if (in->gpu_type && (!*in->gpu_type || !v_name_ok(in->gpu_type))) {
        fail(err, "invalid_argument", "gpu_type", "'gpu_type' must match [a-z0-9_.-]{1,63}");
        goto bad;
    }
    in->prio = FG_PRIO_NORMAL;
    if (prio_s && (in->prio = fg_prio_parse(prio_s)) < 0) {
        fail(err, "invalid_argument", "priority", "'priority' must be high, normal or low");
        goto bad;
    }
    return true;
bad:
    srv_submit_in_clear(in);
    return false;
}

/* ------------------------------------------------------------------ the fast path */

typedef struct {
    const char *p, *end;
} cur_t;

static void skip_ws(cur_t *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

/* A string of printable ASCII without '"' or '\\' (so its JSON text is its bytes, and
 * jansson would give exactly them). *s: its first byte, *n: its length. */
static bool fast_str(cur_t *c, const char **s, size_t *n)
{
    if (c->p >= c->end || *c->p != '"')
        return false;
    const char *q = ++c->p;
    while (q < c->end && *q != '"') {
        unsigned char ch = (unsigned char)*q;
        if (ch < 0x20 || ch > 0x7e || ch == '\\')
            return false;
        q++;
    }
    if (q >= c->end)
        return false;
    *s = c->p;
    *n = (size_t)(q - c->p);
    c->p = q + 1;
    return true;
}

/* An integer as JSON writes it (-?(0|[1-9][0-9]*)), at most 15 digits, followed by no
 * digit, '.', 'e' or 'E' (a real or a bad token: the reference decides). */
static bool fast_int(cur_t *c, long long *v)
{
    const char *q = c->p;
    bool neg = q < c->end && *q == '-';
    if (neg)
        q++;
    if (q >= c->end || *q < '0' || *q > '9')
        return false;
    long long x = 0;
    int digits = 0;
    if (*q == '0') {
        q++;
        digits = 1;
    } else {
        while (q < c->end && *q >= '0' && *q <= '9') {
            if (++digits > 15)
                return false;
            x = x * 10 + (*q - '0');
            q++;
        }
    }
    if (q < c->end && ((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' || *q == 'E'))
        return false;
    *v = neg ? -x : x;
    c->p = q;
    return true;
}

enum {
    F_NAME,
    F_COMMAND,
    F_GPUS,
    F_GPU_TYPE,
    F_MODEL,
    F_DATASET,
    F_TL,
    F_PRIO,
    F_RETRIES,
    F_ACCOUNT,
    F_CPUS,
    F_MEM,
    F_CKPT,
    F_N
};

static const struct {
    const char *key;
    size_t len;
    bool is_int;
} FIELDS[F_N] = {
    [F_NAME] = {"name", 4, false},
    [F_COMMAND] = {"command", 7, false},
    [F_GPUS] = {"gpus", 4, true},
    [F_GPU_TYPE] = {"gpu_type", 8, false},
    [F_MODEL] = {"model", 5, false},
    [F_DATASET] = {"dataset", 7, false},
    [F_TL] = {"time_limit_s", 12, true},
    [F_PRIO] = {"priority", 8, false},
    [F_RETRIES] = {"max_retries", 11, true},
    [F_ACCOUNT] = {"account", 7, false},
    [F_CPUS] = {"cpus", 4, true},
    [F_MEM] = {"memory_mb", 9, true},
    [F_CKPT] = {"checkpoint_interval_s", 21, true},
};

static int field_of(const char *k, size_t n)
{
    for (int i = 0; i < F_N; i++)
        if (FIELDS[i].len == n && !memcmp(FIELDS[i].key, k, n))
            return i;
    return -1;
}

/* `command`: a string or a non-empty array of strings. *arr, *items, *total, *first:
 * what the reference checks. */
static bool fast_command(cur_t *c, bool *arr, size_t *items, size_t *total, size_t *first)
{
    const char *s;
    size_t n;
    *items = *total = *first = 0;
    if (c->p < c->end && *c->p == '"') {
        *arr = false;
        if (!fast_str(c, &s, &n))
            return false;
        *total = *first = n;
        return true;
    }
    if (c->p >= c->end || *c->p != '[')
        return false;
    *arr = true;
    c->p++;
    skip_ws(c);
    for (;;) {
        if (!fast_str(c, &s, &n))
            return false; /* also an empty array: the reference answers it */
        if (*items == 0)
            *first = n;
        (*items)++;
        *total += n;
        skip_ws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            skip_ws(c);
            continue;
        }
        if (c->p < c->end && *c->p == ']') {
            c->p++;
            return true;
        }
        return false;
    }
}

/* The compact JSON of the (checked) command at src: what json_dumps gives for strings
 * without escapes. NULL if the text at src is not such a command after all (it was
 * checked by fast_command: the caller then leaves the body to the reference parser). */
static char *fast_command_text(const char *src, const char *end, bool arr, size_t items,
                               size_t total)
{
    if (!arr) {
        cur_t c = {src, end};
        const char *s;
        size_t n;
        if (!fast_str(&c, &s, &n))
            return NULL;
        char *t = fg_xmalloc(n + 3);
        t[0] = '"';
        memcpy(t + 1, s, n);
        t[n + 1] = '"';
        t[n + 2] = 0;
        return t;
    }
    char *t = fg_xmalloc(total + 3 * items + 2);
    char *w = t;
    *w++ = '[';
    cur_t c = {src + 1, end};
    for (size_t i = 0; i < items; i++) {
        skip_ws(&c);
        const char *s;
        size_t n;
        if (!fast_str(&c, &s, &n)) {
            free(t);
            return NULL;
        }
        if (i)
            *w++ = ',';
        *w++ = '"';
        memcpy(w, s, n);
        w += n;
        *w++ = '"';
        skip_ws(&c);
        c.p++; /* ',' or ']' */
    }
    *w++ = ']';
    *w = 0;
    return t;
}

bool srv_submit_parse_fast(char *body, size_t len, const char *idem, const srv_submit_limits_t *lim,
                           srv_submit_in_t *in)
{
    if (!body || len == 0)
        return false;
    if (idem && (strlen(idem) == 0 || strlen(idem) > 256))
        return false;
    cur_t c = {body, body + len};
    const char *sv[F_N] = {0};
    size_t sn[F_N] = {0};
    long long iv[F_N] = {0};
    unsigned seen = 0;
    const char *cmd_at = NULL;
    bool cmd_arr = false;
    size_t cmd_items = 0, cmd_total = 0, cmd_first = 0;
    skip_ws(&c);
    if (c.p >= c.end || *c.p != '{')
        return false;
    c.p++;
    skip_ws(&c);
    for (;;) {
        const char *k;
        size_t kn;
        if (!fast_str(&c, &k, &kn))
            return false; /* also {}: 'command' is required, the reference says so */
        int f = field_of(k, kn);
        if (f < 0 || (seen & (1u << f)))
            return false;
        seen |= 1u << f;
        skip_ws(&c);
        if (c.p >= c.end || *c.p != ':')
            return false;
        c.p++;
        skip_ws(&c);
        if (f == F_COMMAND) {
            cmd_at = c.p;
            if (!fast_command(&c, &cmd_arr, &cmd_items, &cmd_total, &cmd_first))
                return false;
        } else if (FIELDS[f].is_int) {
            if (!fast_int(&c, &iv[f]))
                return false;
        } else if (!fast_str(&c, &sv[f], &sn[f])) {
            return false;
        }
        skip_ws(&c);
        if (c.p < c.end && *c.p == ',') {
            c.p++;
            skip_ws(&c);
            continue;
        }
        if (c.p < c.end && *c.p == '}') {
            c.p++;
            break;
        }
        return false;
    }
    skip_ws(&c);
    if (c.p != c.end)
        return false;
        /* the reference's checks, all of which must pass */
#define HAS(f) ((seen & (1u << (f))) != 0)
    if (!HAS(F_COMMAND) || !HAS(F_GPUS))
        return false;
    if (cmd_arr ? (cmd_items > 4096 || cmd_first == 0 || cmd_total > 262144)
                : (cmd_total == 0 || cmd_total > 65536))
        return false;
    if (iv[F_GPUS] < 1 || iv[F_GPUS] > FG_MAX_JOB_GPUS ||
        (iv[F_GPUS] > FG_WHOLE_NODE_GPUS && iv[F_GPUS] % FG_WHOLE_NODE_GPUS))
        return false;
    if (sn[F_NAME] > 128 || sn[F_GPU_TYPE] > FG_NAME_MAX || sn[F_MODEL] > 256 ||
        sn[F_DATASET] > 256 || sn[F_PRIO] > 16 || sn[F_ACCOUNT] > 64)
        return false;
    if (HAS(F_TL) && (iv[F_TL] < 1 || iv[F_TL] > lim->max_time_limit_s))
        return false;
    if (HAS(F_RETRIES) && (iv[F_RETRIES] < 0 || iv[F_RETRIES] > 100))
        return false;
    if (HAS(F_CPUS) && (iv[F_CPUS] < 1 || iv[F_CPUS] > 1000000))
        return false;
    if (HAS(F_MEM) && (iv[F_MEM] < 1 || iv[F_MEM] > (long long)1 << 40))
        return false;
    if (HAS(F_CKPT) && (iv[F_CKPT] < 0 || iv[F_CKPT] > (long long)1 << 40))
        return false;
    /* gpu_type and priority are checked on their text: NUL-terminate a copy */
    if (HAS(F_GPU_TYPE)) {
        char t[FG_NAME_MAX + 1];
        memcpy(t, sv[F_GPU_TYPE], sn[F_GPU_TYPE]);
        t[sn[F_GPU_TYPE]] = 0;
        if (!t[0] || !v_name_ok(t))
            return false;
    }
    int prio = FG_PRIO_NORMAL;
    if (HAS(F_PRIO)) {
        char t[17];
        memcpy(t, sv[F_PRIO], sn[F_PRIO]);
        t[sn[F_PRIO]] = 0;
        if ((prio = fg_prio_parse(t)) < 0)
            return false;
    }
    char *cmd = fast_command_text(cmd_at, c.end, cmd_arr, cmd_items, cmd_total);
    if (!cmd)
        return false;
    /* accepted: the same fields as the reference */
    memset(in, 0, sizeof *in);
    in->cmd = cmd;
    for (int f = 0; f < F_N; f++)
        if (HAS(f) && !FIELDS[f].is_int && f != F_COMMAND)
            body[sv[f] - body + (ptrdiff_t)sn[f]] = 0; /* the closing quote */
    in->name = HAS(F_NAME) ? sv[F_NAME] : NULL;
    in->gpu_type = HAS(F_GPU_TYPE) ? sv[F_GPU_TYPE] : NULL;
    in->model = HAS(F_MODEL) ? sv[F_MODEL] : NULL;
    in->dataset = HAS(F_DATASET) ? sv[F_DATASET] : NULL;
    in->account = HAS(F_ACCOUNT) ? sv[F_ACCOUNT] : NULL;
    in->gpus = iv[F_GPUS];
    in->time_limit_s = HAS(F_TL) ? iv[F_TL] : lim->default_time_limit_s;
    in->max_retries = iv[F_RETRIES];
    in->cpus = iv[F_CPUS];
    in->memory_mb = iv[F_MEM];
    in->checkpoint_interval_s = iv[F_CKPT];
    in->prio = prio;
#undef HAS
    return true;
}
