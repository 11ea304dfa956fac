/* submit_body_check.h - the differential check of the two parsers of POST /v1/jobs
 * (src/server/submit_body.h), shared by tests/unit/test_submit_body.c and
 * tests/fuzz/fuzz_submit_body.c. */
#ifndef FG_TEST_SUBMIT_BODY_CHECK_H
#define FG_TEST_SUBMIT_BODY_CHECK_H

#include "server/submit_body.h"

#include <stdlib.h>
#include <string.h>

static inline bool sb_str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

/* What one body gave. */
typedef enum {
    SB_FAST,      /* the fast parser accepted it (and the reference gave the same fields) */
    SB_REF_OK,    /* only the reference accepted it */
    SB_REF_ERROR, /* the reference answered an error (the fast parser deferred) */
    SB_MISMATCH,  /* a bug: the fast parser accepted what the reference did not, gave other
                     fields, or wrote into a body it deferred */
} sb_outcome_t;

/* Runs both parsers on copies of body[0..len) and compares. */
static inline sb_outcome_t sb_check(const char *body, size_t len, const char *idem,
                                    const srv_submit_limits_t *lim)
{
    char *ref_copy = malloc(len + 1), *fast_copy = malloc(len + 1);
    memcpy(ref_copy, body, len);
    memcpy(fast_copy, body, len);
    ref_copy[len] = fast_copy[len] = 0;
    srv_submit_in_t ref, fast;
    srv_submit_err_t err;
    bool ref_ok = srv_submit_parse_json(ref_copy, len, idem, lim, &ref, &err);
    bool fast_ok = srv_submit_parse_fast(fast_copy, len, idem, lim, &fast);
    sb_outcome_t out;
    if (!fast_ok) {
        /* deferred: the body must be untouched */
        out = memcmp(fast_copy, body, len) ? SB_MISMATCH : ref_ok ? SB_REF_OK : SB_REF_ERROR;
    } else if (!ref_ok) {
        out = SB_MISMATCH;
    } else {
        bool same = sb_str_eq(ref.name, fast.name) && sb_str_eq(ref.gpu_type, fast.gpu_type) &&
                    sb_str_eq(ref.model, fast.model) && sb_str_eq(ref.dataset, fast.dataset) &&
                    sb_str_eq(ref.account, fast.account) && sb_str_eq(ref.cmd, fast.cmd) &&
                    sb_str_eq(ref.env, fast.env) && ref.gpus == fast.gpus &&
                    ref.time_limit_s == fast.time_limit_s && ref.max_retries == fast.max_retries &&
                    ref.cpus == fast.cpus && ref.memory_mb == fast.memory_mb &&
                    ref.checkpoint_interval_s == fast.checkpoint_interval_s &&
                    ref.prio == fast.prio && fast.tree == NULL;
        out = same ? SB_FAST : SB_MISMATCH;
    }
    if (ref_ok)
        srv_submit_in_clear(&ref);
    if (fast_ok)
        srv_submit_in_clear(&fast);
    free(ref_copy);
    free(fast_copy);
    return out;
}

#endif
