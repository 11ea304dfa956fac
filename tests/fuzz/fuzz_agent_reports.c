/*
 * fuzz_agent_reports.c - libFuzzer target for the parser of POST /v1/agent/reports
 * (untrusted input from the network). Any JSON object must either be refused as a whole
 * (with a 400 naming the field `reports`) or become one slot per entry, each holding a
 * parsed report or a refusal with a status and an error, without a crash, a leak or an
 * out-of-bounds access.
 */
#include "server/server.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(body)) {
        json_decref(body);
        return 0;
    }
    srv_req_t r;
    memset(&r, 0, sizeof r);
    r.capture = true;
    r.agent = true; /* as node gpu-07's credential: entries for other nodes are refused (403) */
    snprintf(r.agent_node, sizeof r.agent_node, "gpu-07");
    srv_msg_t *m = srv_agent_parse_reports(&r, body);
    json_t *reps = json_object_get(body, "reports");
    if (!m) {
        if (r.captured_status != 400 || !r.captured)
            abort();
    } else {
        if (r.captured || m->kind != MSG_REPORTS || m->nslots != json_array_size(reps) ||
            m->nslots < 1 || m->nslots > SRV_REPORTS_MAX)
            abort();
        for (size_t i = 0; i < m->nslots; i++) {
            const srv_report_slot_t *sl = &m->slots[i];
            if (sl->m ? (sl->m->kind != MSG_STARTED && sl->m->kind != MSG_EXITED) || sl->error
                      : sl->status < 400 || !json_is_object(sl->error))
                abort();
        }
        srv_msg_free(m);
    }
    json_decref(r.captured);
    json_decref(body);
    return 0;
}
