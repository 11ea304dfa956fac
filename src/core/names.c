/*
 * names.c - the names of the core's enums and errors, and their parsers.
 */
#include "fairgpu/core.h"

#include <string.h>

const char *fg_strerror(int err)
{
    switch (err) {
    case FG_OK:
        return "ok";
    case FG_EINVAL:
        return "invalid argument";
    case FG_ENOMEM:
        return "out of memory";
    case FG_ENOENT:
        return "no such object";
    case FG_EEXIST:
        return "already exists";
    case FG_ESTATE:
        return "not allowed in the current state";
    case FG_EQUEUE_FULL:
        return "the user's pending queue is full";
    case FG_ESHED:
        return "queue over its shedding size: low-priority jobs are refused";
    case FG_ESTALE:
        return "stale report: not the current attempt";
    case FG_EQUOTA:
        return "the job can never fit the account's GPU quota";
    case FG_ENOFIT:
        return "the job can never fit any node of the cluster";
    }
    return "unknown error";
}

static const char *const policy_names[FG_POLICY_COUNT] = {"fair",     "wfq",         "fifo",
                                                          "priority", "round-robin", "las"};

const char *fg_policy_name(fg_policy_t p)
{
    return (unsigned)p < FG_POLICY_COUNT ? policy_names[p] : "?";
}

int fg_policy_parse(const char *s)
{
    if (!s)
        return -1;
    for (int i = 0; i < FG_POLICY_COUNT; i++)
        if (!strcmp(s, policy_names[i]))
            return i;
    if (!strcmp(s, "rr"))
        return FG_POLICY_RR;
    return -1;
}

static const char *const prio_names[] = {"low", "normal", "high"};

const char *fg_prio_name(fg_prio_t p)
{
    return (unsigned)p <= FG_PRIO_HIGH ? prio_names[p] : "?";
}

int fg_prio_parse(const char *s)
{
    for (int i = 0; s && i <= FG_PRIO_HIGH; i++)
        if (!strcmp(s, prio_names[i]))
            return i;
    return -1;
}

const char *fg_node_state_name(fg_node_state_t s)
{
    switch (s) {
    case FG_NODE_UP:
        return "up";
    case FG_NODE_DRAINING:
        return "draining";
    case FG_NODE_DOWN:
        return "down";
    }
    return "?";
}

const char *fg_job_state_name(fg_job_state_t s)
{
    static const char *const n[] = {"PENDING", "RUNNING",   "COMPLETED",
                                    "FAILED",  "CANCELLED", "TIMEOUT"};
    return (unsigned)s <= FG_JOB_TIMEOUT ? n[s] : "?";
}

const char *fg_end_cause_name(fg_end_cause_t c)
{
    static const char *const n[] = {"completed", "failed",    "cancelled",         "timeout",
                                    "preempted", "node_lost", "user_setup_failed", "not_started"};
    return (unsigned)c <= FG_END_CAUSE_MAX ? n[c] : "?";
}

const char *fg_reason_code(fg_reason_t r)
{
    static const char *const n[FG_REASON_COUNT] = {
        "none",  "priority", "resources",     "fragmentation", "reservation",
        "quota", "budget",   "retry_backoff", "gpu_type",      "nodes_down"};
    return (unsigned)r < FG_REASON_COUNT ? n[r] : "?";
}

const char *fg_preempt_why_name(fg_preempt_why_t w)
{
    static const char *const n[] = {"fair_share", "priority", "las"};
    return (unsigned)w <= FG_PREEMPT_LAS ? n[w] : "?";
}
