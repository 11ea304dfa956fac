/*
 * test_submit_body.c - the body of POST /v1/jobs: the tree-free parser against the
 * jansson reference (src/server/submit_body.h). For every body the fast parser must
 * either give exactly the reference's fields or defer (return false, body untouched);
 * it must never accept what the reference refuses. Hand-written cases, then many
 * generated bodies (valid ones of every field combination, and malformed ones:
 * truncated, bytes changed, keys repeated, wrong types, escapes, out-of-range values).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka after the standard headers it needs */
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fairgpu/core.h"
#include "splitmix.h"
#include "submit_body_check.h"

static const srv_submit_limits_t LIM = {.default_time_limit_s = 86400,
                                        .max_time_limit_s = 7 * 86400};

static sb_outcome_t check(const char *body)
{
    return sb_check(body, strlen(body), NULL, &LIM);
}

static void test_plain_bodies_take_the_fast_path(void **state)
{
    (void)state;
    const char *fast[] = {
        "{\"name\":\"bench\",\"command\":[\"python3\",\"train.py\",\"--lr\",\"3e-4\"],\"gpus\":1,"
        "\"time_limit_s\":3600,\"model\":\"m\",\"dataset\":\"d\"}",
        "{\"command\":\"sleep 10\",\"gpus\":8}",
        " {\n\t\"gpus\" : 16 ,\r\n \"command\" : [ \"a\" , \"\" ] } \n",
        "{\"command\":[\"x\"],\"gpus\":2,\"gpu_type\":\"a100-80g\",\"priority\":\"high\","
        "\"max_retries\":0,\"account\":\"ml\",\"cpus\":4,\"memory_mb\":1024,"
        "\"checkpoint_interval_s\":0,\"name\":\"\"}",
        "{\"command\":[\"x\"],\"gpus\":1,\"priority\":\"low\",\"time_limit_s\":604800}",
        "{\"command\":[\"x\"],\"gpus\":1024,\"memory_mb\":1099511627776}",
    };
    for (size_t i = 0; i < sizeof fast / sizeof fast[0]; i++) {
        sb_outcome_t o = check(fast[i]);
        if (o != SB_FAST)
            fail_msg("case %zu: outcome %d, expected the fast path", i, (int)o);
    }
    /* the fields themselves, for the benchmark's body */
    char body[] = "{\"name\":\"bench\",\"command\":[\"python3\",\"train.py\"],\"gpus\":1,"
                  "\"time_limit_s\":3600,\"model\":\"m\",\"dataset\":\"d\",\"priority\":\"high\"}";
    srv_submit_in_t in;
    assert_true(srv_submit_parse_fast(body, strlen(body), "key-1", &LIM, &in));
    assert_string_equal(in.name, "bench");
    assert_string_equal(in.cmd, "[\"python3\",\"train.py\"]");
    assert_null(in.env);
    assert_null(in.gpu_type);
    assert_null(in.account);
    assert_string_equal(in.model, "m");
    assert_string_equal(in.dataset, "d");
    assert_int_equal(in.gpus, 1);
    assert_int_equal(in.time_limit_s, 3600);
    assert_int_equal(in.prio, FG_PRIO_HIGH);
    srv_submit_in_clear(&in);
    char body2[] = "{\"command\":\"run it\",\"gpus\":3}";
    assert_true(srv_submit_parse_fast(body2, strlen(body2), NULL, &LIM, &in));
    assert_string_equal(in.cmd, "\"run it\"");
    assert_int_equal(in.time_limit_s, LIM.default_time_limit_s);
    assert_int_equal(in.prio, FG_PRIO_NORMAL);
    srv_submit_in_clear(&in);
}

static void test_everything_else_defers_to_the_reference(void **state)
{
    (void)state;
    struct {
        const char *body;
        sb_outcome_t want;
        const char *field; /* the reference's error field (SB_REF_ERROR) */
    } cases[] = {
        {"", SB_REF_ERROR, NULL},
        {"   ", SB_REF_ERROR, NULL},
        {"[]", SB_REF_ERROR, NULL},
        {"{}", SB_REF_ERROR, "command"},
        {"{\"command\":[\"x\"],\"gpus\":1,\"gpus\":2}", SB_REF_ERROR, NULL}, /* duplicate */
        {"{\"command\":[\"x\"],\"gpus\":1}x", SB_REF_ERROR, NULL},
        {"{\"command\":[\"x\"],\"gpus\":1,}", SB_REF_ERROR, NULL},
        {"{\"command\":[\"x\"],\"gpus\":01}", SB_REF_ERROR, NULL},
        {"{\"command\":[\"x\"],\"gpus\":1.0}", SB_REF_ERROR, "gpus"},
        {"{\"command\":[\"x\"],\"gpus\":1e0}", SB_REF_ERROR, "gpus"},
        {"{\"command\":[\"x\"],\"gpus\":0}", SB_REF_ERROR, "gpus"},
        {"{\"command\":[\"x\"],\"gpus\":12}", SB_REF_ERROR, "gpus"},
        {"{\"command\":[\"x\"],\"gpus\":99999999999999999999}", SB_REF_ERROR, NULL},
        {"{\"command\":[],\"gpus\":1}", SB_REF_ERROR, "command"},
        {"{\"command\":[\"\"],\"gpus\":1}", SB_REF_ERROR, "command"},
        {"{\"command\":\"\",\"gpus\":1}", SB_REF_ERROR, "command"},
        {"{\"command\":[1],\"gpus\":1}", SB_REF_ERROR, "command"},
        {"{\"command\":null,\"gpus\":1}", SB_REF_ERROR, "command"},
        {"{\"command\":[\"x\"],\"gpus\":1,\"gpu_type\":\"A100\"}", SB_REF_ERROR, "gpu_type"},
        {"{\"command\":[\"x\"],\"gpus\":1,\"gpu_type\":\"\"}", SB_REF_ERROR, "gpu_type"},
        {"{\"command\":[\"x\"],\"gpus\":1,\"priority\":\"urgent\"}", SB_REF_ERROR, "priority"},
        {"{\"command\":[\"x\"],\"gpus\":1,\"time_limit_s\":0}", SB_REF_ERROR, "time_limit_s"},
        {"{\"command\":[\"x\"],\"gpus\":1,\"name\":\"a\\u0000b\"}", SB_REF_ERROR, NULL},
        {"{\"command\":[\"x\"],\"gpus\":1,\"env\":{\"1A\":\"x\"}}", SB_REF_ERROR, "env"},
        /* valid, but not of the plain shape: the reference answers */
        {"{\"command\":[\"x\"],\"gpus\":1,\"extra\":{\"a\":[1,2]}}", SB_REF_OK, NULL},
        {"{\"command\":[\"x\"],\"gpus\":1,\"name\":null}", SB_REF_OK, NULL},
        {"{\"command\":[\"x\\\"y\"],\"gpus\":1}", SB_REF_OK, NULL},
        {"{\"command\":[\"caf\xc3\xa9\"],\"gpus\":1}", SB_REF_OK, NULL},
        {"{\"command\":[\"x\"],\"gpus\":1,\"env\":{\"A\":\"1\"}}", SB_REF_OK, NULL},
        {"{\"command\":[\"x\"],\"gpus\":1,\"\\u006eame\":\"n\"}", SB_REF_OK, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sb_outcome_t o = check(cases[i].body);
        if (o != cases[i].want)
            fail_msg("case %zu (%s): outcome %d, expected %d", i, cases[i].body, (int)o,
                     (int)cases[i].want);
        if (o == SB_REF_ERROR) {
            srv_submit_in_t in;
            srv_submit_err_t err;
            assert_false(
                srv_submit_parse_json(cases[i].body, strlen(cases[i].body), NULL, &LIM, &in, &err));
            assert_int_equal(err.status, 400);
            if (cases[i].field) {
                assert_string_equal(err.code, "invalid_argument");
                assert_non_null(err.field);
                assert_string_equal(err.field, cases[i].field);
            } else {
                assert_string_equal(err.code, "invalid_json");
            }
        }
    }
    /* a bad Idempotency-Key is the reference's answer, with a valid body too */
    const char *b = "{\"command\":[\"x\"],\"gpus\":1}";
    assert_int_equal(sb_check(b, strlen(b), "", &LIM), SB_REF_ERROR);
    assert_int_equal(sb_check(b, strlen(b), "k", &LIM), SB_FAST);
    /* the reference's message for bad JSON names the position */
    srv_submit_in_t in;
    srv_submit_err_t err;
    assert_false(srv_submit_parse_json("{\"a\":", 5, NULL, &LIM, &in, &err));
    assert_non_null(strstr(err.msg, "invalid JSON at line 1"));
}

/* ------------------------------------------------------------------ generated bodies */

typedef struct {
    char *p;
    size_t n, cap;
} gbuf_t;

static void put(gbuf_t *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void puts_(gbuf_t *b, const char *s)
{
    put(b, s, strlen(s));
}

static void ws(gbuf_t *b, uint64_t *r)
{
    static const char *W[] = {"", "", "", " ", "\n", "\t", "\r\n  "};
    puts_(b, W[rnd(r, 0, 6)]);
}

/* `"key":` with random white space, after a comma unless it is the object's first */
static void put_key(gbuf_t *b, uint64_t *r, const char *key, int *nf)
{
    if ((*nf)++) {
        puts_(b, ",");
        ws(b, r);
    }
    puts_(b, "\"");
    puts_(b, key);
    puts_(b, "\"");
    ws(b, r);
    puts_(b, ":");
    ws(b, r);
}

/* A string literal: mostly plain, sometimes escapes, UTF-8, control bytes, or long. */
static void gen_string(gbuf_t *b, uint64_t *r, int maxlen)
{
    puts_(b, "\"");
    int kind = (int)rnd(r, 0, 19);
    int n = kind == 0 ? (int)rnd(r, 0, 300) : (int)rnd(r, 0, maxlen);
    static const char *pool[] = {"a", "z", "0", "9", "_",    "-",   ".",
                                 " ", "A", "/", "~", "high", "low", "normal"};
    for (int i = 0; i < n; i++) {
        if (kind == 1 && rnd(r, 0, 7) == 0) {
            static const char *esc[] = {"\\\"", "\\\\",           "\\n", "\\u00e9", "\\u0000",
                                        "\\/",  "\\ud83d\\ude00", "\\x"};
            puts_(b, esc[rnd(r, 0, 7)]);
        } else if (kind == 2 && rnd(r, 0, 7) == 0) {
            static const char *odd[] = {"\xc3\xa9", "\x7f", "\x01", "\xff", "\t"};
            puts_(b, odd[rnd(r, 0, 4)]);
        } else {
            puts_(b, pool[rnd(r, 0, 13)]);
        }
    }
    puts_(b, "\"");
}

static void gen_int(gbuf_t *b, uint64_t *r)
{
    static const char *edge[] = {"0",
                                 "1",
                                 "-1",
                                 "8",
                                 "9",
                                 "16",
                                 "100",
                                 "101",
                                 "1024",
                                 "1025",
                                 "1000000",
                                 "1000001",
                                 "-0",
                                 "01",
                                 "1.0",
                                 "1e3",
                                 "2E1",
                                 "604800",
                                 "604801",
                                 "3600",
                                 "86400",
                                 "1099511627776",
                                 "1099511627777",
                                 "999999999999999",
                                 "9999999999999999",
                                 "-",
                                 "+1",
                                 "0x10"};
    char t[32];
    if (rnd(r, 0, 1)) {
        puts_(b, edge[rnd(r, 0, (int64_t)(sizeof edge / sizeof edge[0]) - 1)]);
    } else {
        snprintf(t, sizeof t, "%lld", (long long)rnd(r, -5, 2000));
        puts_(b, t);
    }
}

static void gen_value(gbuf_t *b, uint64_t *r, const char *key);

static void gen_command(gbuf_t *b, uint64_t *r)
{
    int kind = (int)rnd(r, 0, 9);
    if (kind == 0) {
        gen_string(b, r, 20);
        return;
    }
    if (kind == 1) {
        gen_value(b, r, NULL);
        return;
    }
    puts_(b, "[");
    ws(b, r);
    int n = kind == 2 ? 0 : (int)rnd(r, 1, 6);
    for (int i = 0; i < n; i++) {
        if (i) {
            puts_(b, ",");
            ws(b, r);
        }
        if (rnd(r, 0, 15) == 0)
            gen_int(b, r);
        else
            gen_string(b, r, 12);
        ws(b, r);
    }
    puts_(b, "]");
}

/* Any value (for unknown keys and wrong types). */
static void gen_value(gbuf_t *b, uint64_t *r, const char *key)
{
    (void)key;
    switch (rnd(r, 0, 7)) {
    case 0:
        puts_(b, "null");
        break;
    case 1:
        puts_(b, rnd(r, 0, 1) ? "true" : "false");
        break;
    case 2:
        gen_int(b, r);
        break;
    case 3:
        gen_string(b, r, 10);
        break;
    case 4:
        puts_(b, "[1,\"a\",{\"b\":null}]");
        break;
    case 5:
        puts_(b, "{\"A\":\"1\",\"B_2\":\"x\"}");
        break;
    case 6:
        puts_(b, "{\"A\":\"1\",\"A\":\"2\"}");
        break;
    default:
        puts_(b, "{}");
        break;
    }
}

static const char *KEYS[] = {"name",
                             "command",
                             "gpus",
                             "gpu_type",
                             "model",
                             "dataset",
                             "time_limit_s",
                             "priority",
                             "max_retries",
                             "account",
                             "cpus",
                             "memory_mb",
                             "checkpoint_interval_s",
                             "env",
                             "extra",
                             "Name"};
#define NKEYS ((int)(sizeof KEYS / sizeof KEYS[0]))

static bool is_int_key(const char *k)
{
    return !strcmp(k, "gpus") || !strcmp(k, "time_limit_s") || !strcmp(k, "max_retries") ||
           !strcmp(k, "cpus") || !strcmp(k, "memory_mb") || !strcmp(k, "checkpoint_interval_s");
}

/* A valid value for an integer field (clean bodies). */
static void gen_good_int(gbuf_t *b, uint64_t *r, const char *key)
{
    char t[32];
    long long v = !strcmp(key, "gpus") ? (rnd(r, 0, 1) ? rnd(r, 1, 8) : 8 * rnd(r, 1, 128))
                  : !strcmp(key, "time_limit_s") ? rnd(r, 1, 7 * 86400)
                  : !strcmp(key, "max_retries")  ? rnd(r, 0, 100)
                  : !strcmp(key, "cpus")         ? rnd(r, 1, 1000000)
                  : !strcmp(key, "memory_mb")    ? rnd(r, 1, (int64_t)1 << 40)
                                                 : rnd(r, 0, (int64_t)1 << 40);
    snprintf(t, sizeof t, "%lld", v);
    puts_(b, t);
}

/* A plain string of 0..n bytes of [a-z0-9_.-] and, if `spaces`, other printable ASCII. */
static void gen_plain(gbuf_t *b, uint64_t *r, int lo, int hi, bool spaces)
{
    static const char name[] = "abcxyz019_.-";
    static const char other[] = " /~!#$%&'()*+,:;<=>?@[]^`{|}ABZ";
    int n = (int)rnd(r, lo, hi);
    puts_(b, "\"");
    for (int i = 0; i < n; i++) {
        char c = spaces && rnd(r, 0, 3) == 0 ? other[rnd(r, 0, (int64_t)sizeof other - 2)]
                                             : name[rnd(r, 0, (int64_t)sizeof name - 2)];
        put(b, &c, 1);
    }
    puts_(b, "\"");
}

/* A valid body of the plain shape, with random fields, order and whitespace. */
static void gen_clean_body(gbuf_t *b, uint64_t *r)
{
    b->n = 0;
    puts_(b, "");
    ws(b, r);
    puts_(b, "{");
    ws(b, r);
    int nf = 0, start = (int)rnd(r, 0, 12);
    for (int k = 0; k < 13; k++) {
        const char *key = KEYS[(k + start) % 13]; /* the 13 fields, from a random one on */
        bool core = !strcmp(key, "command") || !strcmp(key, "gpus");
        if (!core && rnd(r, 0, 2))
            continue;
        put_key(b, r, key, &nf);
        if (!strcmp(key, "command")) {
            if (rnd(r, 0, 3) == 0) {
                gen_plain(b, r, 1, 30, true);
            } else {
                puts_(b, "[");
                int n = (int)rnd(r, 1, 8);
                for (int i = 0; i < n; i++) {
                    if (i)
                        puts_(b, ",");
                    ws(b, r);
                    gen_plain(b, r, i ? 0 : 1, 12, true);
                    ws(b, r);
                }
                puts_(b, "]");
            }
        } else if (is_int_key(key)) {
            gen_good_int(b, r, key);
        } else if (!strcmp(key, "priority")) {
            puts_(b, (const char *[]){"\"high\"", "\"normal\"", "\"low\""}[rnd(r, 0, 2)]);
        } else if (!strcmp(key, "gpu_type")) {
            gen_plain(b, r, 1, 64, false);
        } else {
            gen_plain(b, r, 0, !strcmp(key, "account") ? 64 : 128, !strcmp(key, "name"));
        }
        ws(b, r);
    }
    if (rnd(r, 0, 4) == 0) /* valid, but not of the plain shape: the reference's */
        puts_(b, (const char *[]){",\"env\":{\"A_1\":\"x\",\"B\":\"\"}",
                                  ",\"extra\":[1,null,{\"a\":true}]", ",\"labels\":\"caf\\u00e9\"",
                                  ",\"env\":null"}[rnd(r, 0, 3)]);
    puts_(b, "}");
    ws(b, r);
}

/* One body: mostly well-formed objects of plausible fields, some broken afterwards. */
static void gen_body(gbuf_t *b, uint64_t *r)
{
    b->n = 0;
    puts_(b, "");
    ws(b, r);
    puts_(b, "{");
    ws(b, r);
    /* command and gpus usually, then a random subset, in a random order */
    int order[NKEYS];
    for (int i = 0; i < NKEYS; i++)
        order[i] = i;
    for (int i = NKEYS - 1; i > 0; i--) {
        int j = (int)rnd(r, 0, i);
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    int nf = 0;
    for (int oi = 0; oi < NKEYS; oi++) {
        int k = order[oi];
        const char *key = KEYS[k];
        bool core = !strcmp(key, "command") || !strcmp(key, "gpus");
        bool rare = !strcmp(key, "env") || !strcmp(key, "extra") || !strcmp(key, "Name");
        if (!(core ? rnd(r, 0, 19) != 0 : rnd(r, 0, rare ? 15 : 2) == 0))
            continue;
        int reps = rnd(r, 0, 40) == 0 ? 2 : 1; /* a repeated key now and then */
        for (int rep = 0; rep < reps; rep++) {
            put_key(b, r, key, &nf);
            int wrong = rnd(r, 0, 24) == 0; /* a value of another type */
            if (wrong)
                gen_value(b, r, key);
            else if (!strcmp(key, "command"))
                gen_command(b, r);
            else if (is_int_key(key))
                gen_int(b, r);
            else if (!strcmp(key, "priority"))
                puts_(b, rnd(r, 0, 5) ? (const char *[]){"\"high\"", "\"normal\"", "\"low\"",
                                                         "\"HIGH\"", "\"\""}[rnd(r, 0, 4)]
                                      : "null");
            else if (!strcmp(key, "gpu_type"))
                puts_(b,
                      (const char *[]){
                          "\"a100\"", "\"h100-80g\"", "\"A100\"", "\"\"", "\"a b\"", "null",
                          "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\""}
                          [rnd(r, 0, 6)]);
            else
                gen_string(b, r, 20);
            ws(b, r);
        }
    }
    puts_(b, "}");
    ws(b, r);
    /* mutations */
    switch (rnd(r, 0, 9)) {
    case 0: /* truncated */
        b->n = (size_t)rnd(r, 0, (int64_t)b->n);
        b->p[b->n] = 0;
        break;
    case 1: { /* one byte changed */
        if (b->n) {
            static const char bytes[] = "{}[]\",:0-.e \\\x01\xff";
            b->p[rnd(r, 0, (int64_t)b->n - 1)] = bytes[rnd(r, 0, (int64_t)sizeof bytes - 2)];
        }
        break;
    }
    case 2: /* trailing garbage */
        puts_(b, rnd(r, 0, 1) ? "x" : "{}");
        break;
    default:
        break;
    }
}

/* Text shown to others: controls and bidi marks are refused, other text (UTF-8 of any
 * script, punctuation) is not; usernames are names that are not all digits. */
static void test_shown_text_and_usernames(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "a\r\nb",       "\x1b[31m",     "x\x7f",        "c1\xc2\x85", "\xe2\x80\xae",
        "\xe2\x81\xa6", "\xe2\x81\xa9", "\xe2\x80\x8f", "\xd8\x9c",   "tab\t"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_false(v_text_ok(bad[i]));
    static const char *const good[] = {"",      "Zo\xc3\xab O'Neil", "\xe5\xb1\xb1\xe7\x94\xb0",
                                       "a@b.c", "\xe2\x80\x94 dash", "\xe2\x82\xac 5"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        assert_true(v_text_ok(good[i]));
    assert_false(v_username_ok("3"));
    assert_false(v_username_ok("0123456789"));
    assert_false(v_username_ok(""));
    assert_false(v_username_ok("Bad"));
    assert_true(v_username_ok("3d"));
    assert_true(v_username_ok("alice"));
    /* a refused name in a submission is a 400 naming the field */
    const srv_submit_limits_t lim = {.default_time_limit_s = 60, .max_time_limit_s = 3600};
    srv_submit_in_t in;
    srv_submit_err_t err;
    const char *body = "{\"name\":\"evil\\u202e\",\"command\":[\"true\"],\"gpus\":1}";
    assert_false(srv_submit_parse_json(body, strlen(body), NULL, &lim, &in, &err));
    assert_int_equal(err.status, 400);
    assert_string_equal(err.field, "name");
}

static void test_generated_bodies_agree(void **state)
{
    (void)state;
    uint64_t r = 0x5eed5b0d1e5ull;
    gbuf_t b = {0};
    const char *n_env = getenv("FG_SUBMIT_BODY_N");
    long n = n_env ? strtol(n_env, NULL, 10) : 60000;
    long count[4] = {0};
    for (long i = 0; i < n; i++) {
        if (rnd(&r, 0, 2) == 0)
            gen_clean_body(&b, &r);
        else
            gen_body(&b, &r);
        sb_outcome_t o = sb_check(b.p, b.n, rnd(&r, 0, 30) ? NULL : "", &LIM);
        if (o == SB_MISMATCH)
            fail_msg("body %ld disagrees: %s", i, b.p);
        count[o]++;
    }
    /* the comparison means something only if all three outcomes are common */
    print_message("%ld bodies: fast %ld, reference only %ld, errors %ld\n", n, count[SB_FAST],
                  count[SB_REF_OK], count[SB_REF_ERROR]);
    assert_true(count[SB_FAST] > n / 5);
    assert_true(count[SB_REF_OK] > n / 50);
    assert_true(count[SB_REF_ERROR] > n / 5);
    free(b.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_bodies_take_the_fast_path),
        cmocka_unit_test(test_everything_else_defers_to_the_reference),
        cmocka_unit_test(test_generated_bodies_agree),
        cmocka_unit_test(test_shown_text_and_usernames),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
