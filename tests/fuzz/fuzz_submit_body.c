/*
 * fuzz_submit_body.c - libFuzzer target for the body of POST /v1/jobs (untrusted
 * input): the tree-free parser against the jansson reference (src/server/submit_body.h).
 * For any byte string the fast parser must give exactly the reference's fields or defer
 * to it without touching the body; it must never accept what the reference refuses.
 * The first byte picks the Idempotency-Key case (none, empty, valid).
 */
#include "submit_body_check.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const srv_submit_limits_t lim = {.default_time_limit_s = 86400,
                                            .max_time_limit_s = 7 * 86400};
    const char *idem = NULL;
    if (size > 0) {
        idem = data[0] % 3 == 0 ? NULL : data[0] % 3 == 1 ? "" : "key-1";
        data++;
        size--;
    }
    if (sb_check((const char *)data, size, idem, &lim) == SB_MISMATCH)
        abort();
    return 0;
}
