/*
 * nodes.c - the cluster's nodes: adding one and changing its state.
 *
 * A node has a name, 1..64 GPUs of one type and a state (up, draining, down). Only up
 * nodes take new jobs; a draining or down node keeps its running jobs until they end.
 * Every change bumps node_gen (the feasibility memos depend on it) and brings the
 * node's bucket, tree leaf and its type's counts up to date (index.c). A node of a new
 * type creates the type; a type whose arrays must grow is rebuilt.
 *
 * Example: fg_sched_node_add(s, "n0", 8, "a100", FG_NODE_UP) makes node 0 with free
 * mask 0xff in bucket 8 of type a100; setting it down takes it out of every bucket and
 * tree, so a pass neither places on it nor plans on it.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ nodes */

int fg_sched_node_find(const fg_sched_t *s, const char *name)
{
    for (size_t i = 0; name && i < s->nnodes; i++)
        if (!strcmp(s->nodes[i].name, name))
            return (int)i;
    return FG_ENOENT;
}

int fg_sched_node_add(fg_sched_t *s, const char *name, int32_t gpus, const char *gpu_type,
                      fg_node_state_t state)
{
    fg__plan_close(s);
    if (!fg__name_ok(name) || gpus < 1 || gpus > FG_MAX_NODE_GPUS || !fg__name_ok(gpu_type) ||
        (unsigned)state > FG_NODE_DOWN)
        return FG_EINVAL;
    if (fg_sched_node_find(s, name) >= 0)
        return FG_EEXIST;
    int32_t ti = fg__type_get(s, gpu_type);
    s->node_gen++;
    s->feas_any = 0; /* (found for the nodes before) */
    s->nodes = fg__grow(s->nodes, &s->nodes_cap, s->nnodes + 1, sizeof *s->nodes);
    int32_t n = (int32_t)s->nnodes++;
    fg__node_t *nd = &s->nodes[n];
    memset(nd, 0, sizeof *nd);
    snprintf(nd->name, sizeof nd->name, "%s", name);
    nd->gpus = gpus;
    nd->type = ti;
    nd->state = state;
    nd->free_mask = gpus == 64 ? ~(uint64_t)0 : (((uint64_t)1 << gpus) - 1);
    nd->nfree = gpus;
    nd->bucket = -1;
    nd->touched = -1;
    for (int i = 0; i < FG_MAX_NODE_GPUS; i++)
        nd->gpu_job[i] = -1;
    fg__type_t *t = &s->types[ti];
    size_t cap = (size_t)t->cap;
    t->nodes = fg__grow(t->nodes, &cap, (size_t)t->n + 1, sizeof *t->nodes);
    bool resized = (int32_t)cap != t->cap;
    t->cap = (int32_t)cap;
    nd->type_pos = t->n;
    t->nodes[t->n++] = n;
    if (resized || gpus > t->maxgpus || t->tree == NULL)
        fg__type_rebuild(s, ti);
    else
        fg__node_changed(s, n);
    return n;
}

int fg_sched_node_set_state(fg_sched_t *s, int node, fg_node_state_t state, fg_time_t now)
{
    fg__plan_close(s);
    (void)now;
    if (node < 0 || (size_t)node >= s->nnodes)
        return FG_ENOENT;
    if ((unsigned)state > FG_NODE_DOWN)
        return FG_EINVAL;
    s->nodes[node].state = state;
    s->node_gen++;
    s->feas_any = 0;
    fg__node_changed(s, node);
    return FG_OK;
}
