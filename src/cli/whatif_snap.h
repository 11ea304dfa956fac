/*
 * whatif_snap.h - the snapshot of a live cluster for `fairgpu whatif`, built from the
 * API's replies (GET /v1/fairshare, /v1/nodes and the running and pending jobs of
 * /v1/jobs), and the changes a what-if asks for. Pure: no I/O; the replies are
 * untrusted, so every field is checked.
 */
#ifndef FG_CLI_WHATIF_SNAP_H
#define FG_CLI_WHATIF_SNAP_H

#include "sim/whatif.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* How each job's run time is predicted. */
typedef enum cli_runtime { CLI_RUNTIME_LIMIT, CLI_RUNTIME_HISTORY } cli_runtime_t;

/* Builds *snap from the replies, as of `now` (unix seconds): the accounts of the fair
 * share (weight, quota, decayed usage), the nodes up or draining grouped by size and
 * GPU type, the live policy and half-life, and the running and pending jobs (jobs is
 * an array of job objects). Each job runs its time limit (what is left of it), or, when
 * ended is not NULL (an array of ended jobs), what its user's history predicts
 * (fairgpu/estimate.h). Returns 0, or -1 with a message in err. Free with
 * cli_whatif_snapshot_free. */
int cli_whatif_snapshot(json_t *fairshare, json_t *nodes, json_t *jobs, json_t *ended, int64_t now,
                        fg_whatif_snapshot_t *snap, char *err, size_t errlen);
void cli_whatif_snapshot_free(fg_whatif_snapshot_t *snap);

/* Applies one change, as given on the command line, to *set: "policy=P",
 * "half-life=DUR", "quantum=DUR", "weight=ACCOUNT:W", "quota=ACCOUNT:N|none",
 * "nodes=N" (the cluster's node count, the largest group resized), "add-nodes=N".
 * Returns 0, or -1 with a message in err (and *set unchanged). */
int cli_whatif_change(const fg_whatif_snapshot_t *snap, fg_whatif_settings_t *set,
                      const char *change, char *err, size_t errlen);

#endif
