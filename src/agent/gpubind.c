/*
 * gpubind.c - tells the node's GPU backend which job each GPU serves, before the
 * heartbeat samples them: the fake backend reads the job's load knob from that job's
 * directory (gpu_fake.c); NVML needs no hint (its bind is NULL and nothing is done).
 *
 * Example: attempt 7.1.0 runs on GPUs "GPU-fake-n1-2,GPU-fake-n1-3": GPUs 2 and 3 are
 * bound to WORK_DIR/jobs/7, the others to nothing, so they sample 0 %.
 */
#include "agent/agent.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The index of the GPU of node n whose uuid is u[0..len), or -1. */
static int gpu_by_uuid(const fg_node_t *n, const char *u, size_t len)
{
    for (int i = 0; i < n->ngpus; i++)
        if (strlen(n->gpus[i].uuid) == len && !strncmp(n->gpus[i].uuid, u, len))
            return i;
    return -1;
}

void fg_node_bind_gpus(fg_node_t *n)
{
    if (!n->gpu.bind)
        return;
    static __thread char job[FG_GPU_MAX][72]; /* the heartbeat thread's; "" = free */
    int ng = n->ngpus < FG_GPU_MAX ? n->ngpus : FG_GPU_MAX;
    for (int i = 0; i < ng; i++)
        job[i][0] = '\0';
    pthread_mutex_lock(&n->ag->mu);
    for (const fg_attempt_t *a = n->attempts; a; a = a->next) {
        if (!a->launched || a->exited || a->phantom)
            continue;
        for (const char *u = a->gpu_uuids; u && *u;) {
            const char *c = strchr(u, ',');
            size_t len = c ? (size_t)(c - u) : strlen(u);
            int g = gpu_by_uuid(n, u, len);
            if (g >= 0 && g < ng)
                snprintf(job[g], sizeof job[g], "%s", a->job_id);
            u = c ? c + 1 : u + len;
        }
    }
    pthread_mutex_unlock(&n->ag->mu);
    for (int i = 0; i < ng; i++) {
        char dir[sizeof n->work_dir + 80];
        int w = snprintf(dir, sizeof dir, "%s/jobs/%s", n->work_dir, job[i]);
        bool fits = w > 0 && (size_t)w < sizeof dir; /* (it always does: 600 + 6 + 71) */
        n->gpu.bind(n->gpu.ctx, i, job[i][0] && fits ? dir : NULL);
    }
}
