/*
 * fuzz_whatif_snap.c - libFuzzer target for the what-if snapshot (src/cli/whatif_snap.c),
 * built from server replies the CLI does not trust. The input is a JSON array
 * [fairshare, nodes, jobs, "change"]. An accepted snapshot must hold only replayable
 * jobs (a known account, a valid size, 1 <= run <= limit) and positive weights; a change
 * either applies or leaves the settings as they were. A small accepted snapshot is then
 * replayed (src/sim/whatif.c), which must succeed.
 * Example seed: [{"policy":"fair","half_life_s":60,"accounts":[{"name":"a","weight":1,
 * "usage_gpu_seconds":0}]},{"items":[{"state":"up","gpu_type":"g","gpus":[0]}]},
 * [{"state":"PENDING","account":"a","gpus":1,"time_limit_s":60,"submit_time":1}],
 * "weight=a:2"].
 */
#include "cli/whatif_snap.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts unless the snapshot is one the replay accepts. */
static void check_snapshot(const fg_whatif_snapshot_t *s)
{
    if (s->live.ngroups < 1)
        abort();
    for (size_t a = 0; a < s->naccounts; a++)
        if (!(s->live.weights[a] > 0) || !s->accounts[a].name[0])
            abort();
    for (size_t i = 0; i < s->njobs; i++) {
        const fg_whatif_job_t *j = &s->jobs[i];
        if (j->account < 0 || (size_t)j->account >= s->naccounts || j->gpus < 1 ||
            (j->gpus > 8 && j->gpus % 8) || j->run_s < 1 || j->run_s > j->limit_s)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *in = json_loadb((const char *)data, size, 0, NULL);
    if (!json_is_array(in) || json_array_size(in) != 4) {
        json_decref(in);
        return 0;
    }
    fg_whatif_snapshot_t s;
    char err[256];
    if (cli_whatif_snapshot(json_array_get(in, 0), json_array_get(in, 1), json_array_get(in, 2),
                            NULL, 1000000, &s, err, sizeof err) == 0) {
        check_snapshot(&s);
        fg_whatif_settings_t set;
        fg_whatif_settings_copy(&s.live, s.naccounts, &set);
        const char *change = json_string_value(json_array_get(in, 3));
        if (change && cli_whatif_change(&s, &set, change, err, sizeof err) < 0 &&
            memcmp(set.weights, s.live.weights, s.naccounts * sizeof *set.weights))
            abort();
        long long nodes = 0;
        for (size_t k = 0; k < set.ngroups; k++)
            nodes += set.groups[k].count;
        if (s.njobs <= 16 && nodes <= 16) {
            fg_whatif_result_t r;
            if (fg_whatif_run(&s, &set, &r, err, sizeof err) != 0) {
                fprintf(stderr, "replay refused: %s\n", err);
                abort();
            }
            fg_whatif_result_free(&r);
        }
        fg_whatif_settings_free(&set);
        cli_whatif_snapshot_free(&s);
    }
    json_decref(in);
    return 0;
}
