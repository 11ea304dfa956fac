/*
 * fuzz_trace.c - libFuzzer target for the simulator's trace CSV reader (untrusted
 * input). Any byte string must parse or fail with a message naming a line, without a
 * crash, a leak or an out-of-bounds access; a parsed trace must satisfy the reader's
 * invariants (sorted, sizes valid, tenants in range).
 */
#include "fairgpu/core.h"
#include "sim/trace.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    fg_trace_t t;
    fg_trace_opts_t o = {size > 0 && (data[0] & 1), 0};
    if (fg_trace_parse("fuzz.csv", (const char *)data, size, &o, &t, err, sizeof err) != 0) {
        if (strncmp(err, "fuzz.csv:", 9) != 0)
            abort();
        return 0;
    }
    for (size_t i = 0; i < t.njobs; i++) {
        const fg_trace_job_t *j = &t.jobs[i];
        if (j->gpus < 1 || j->gpus > FG_MAX_JOB_GPUS ||
            (j->gpus > FG_WHOLE_NODE_GPUS && j->gpus % FG_WHOLE_NODE_GPUS))
            abort();
        if (j->duration < 1 || j->submit < 0 || j->tenant < 0 || (size_t)j->tenant >= t.ntenants)
            abort();
        if (i > 0 && t.jobs[i - 1].submit > j->submit)
            abort();
    }
    for (size_t u = 0; u < t.ntenants; u++)
        if (strlen(t.tenants[u]) == 0 || strlen(t.tenants[u]) > FG_TRACE_TENANT_MAX)
            abort();
    fg_trace_free(&t);
    return 0;
}
