/*
 * fairgpu/why.h - why one pending job waits, with the numbers behind it (the evidence
 * that GET /v1/jobs/{id} and `fairgpu why` show): its reason code, its account's and
 * user's fair share against their entitlement, its place in the plan order and the
 * first jobs that go before it (and why they do), the reservation, quota, budget or
 * backoff that holds it, the GPUs of its type, and the free GPUs per node
 * (fragmentation) with the nodes that could hold it once their running jobs end.
 *
 * Computed on demand for the one job asked (src/core/why.c); the walk of the plan order
 * is bounded by the caller. Pure: no I/O, time is an argument. Names returned point
 * into the scheduler and stay valid until it is freed.
 *
 * Example: 2 nodes x 8 GPUs, 3 GPUs busy on each, an 8-GPU job: code fragmentation,
 * free_gpus 10, largest_free 5 (on the first node), and holders: both nodes, each once
 * its running job ends (start + time limit).
 */
#ifndef FAIRGPU_WHY_H
#define FAIRGPU_WHY_H

#include "fairgpu/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FG_WHY_AHEAD_MAX 5 /* jobs ahead listed */
#define FG_WHY_NODES_MAX 8 /* nodes listed (largest free, holders) */

/* Why a job ahead in plan order goes first. */
typedef enum fg_why_first {
    FG_FIRST_CLASS = 0, /* a higher class (priority) */
    FG_FIRST_LAS,       /* a lower LAS queue: less attained service */
    FG_FIRST_SHARE,     /* its account (or user) has lower usage for its share */
    FG_FIRST_SUBMIT,    /* submitted earlier (same account and user, or an oldest-first
                           policy) */
    FG_FIRST_TURN,      /* round-robin: its user's turn comes first */
} fg_why_first_t;
const char *fg_why_first_name(fg_why_first_t f); /* "class", "las", "share", ... */

typedef struct fg_why_ahead {
    fg_job_id_t id;
    const char *account;
    int32_t gpus;
    fg_prio_t prio;
    fg_why_first_t first;
} fg_why_ahead_t;

/* A node that could hold the job once (some of) its running jobs end. */
typedef struct fg_why_node {
    const char *name;
    int32_t gpus, free_gpus;
    fg_time_t at;     /* when enough of its GPUs are free by running jobs' time limits
                         (start + limit), not before now */
    fg_job_id_t last; /* the running job whose end makes room (0: none, free now) */
} fg_why_node_t;

/* Fair share of an account (among all accounts) or of a user (among its account's). */
typedef struct fg_why_share {
    const char *name;
    double usage;            /* decayed GPU-seconds, as of now */
    double siblings_usage;   /* of the others (accounts, or its account's users) */
    double share;            /* normalized share */
    double usage_share;      /* usage / (usage + siblings_usage); 0 when both are 0 */
    double factor;           /* fg_fair_share_factor */
    double entitlement_gpus; /* share x GPUs up (a user: of its account's) */
    int32_t running_gpus;
} fg_why_share_t;

typedef struct fg_why {
    fg_job_id_t id;
    fg_reason_t code; /* as fg_sched_job_info's reason */
    int32_t gpus;
    const char *gpu_type; /* NULL: any */
    fg_prio_t prio;
    fg_time_t estimated_start; /* FG_TIME_NEVER: unknown */
    fg_policy_t policy;
    fg_why_share_t account, user;
    /* its place in plan order (1 = next); 0 when not within the bound walked, then
     * ahead_jobs is the bound */
    int64_t position;
    int64_t ahead_jobs, ahead_gpus;
    size_t nahead;
    fg_why_ahead_t ahead[FG_WHY_AHEAD_MAX]; /* the first jobs of the plan order */
    /* reservation */
    fg_job_id_t res_holder;
    fg_time_t res_from;
    /* quota (< 0: none) and budget (budget_left < 0: no safe budget) */
    int32_t quota, quota_running;
    bool budget_exhausted;
    int64_t budget_left, limit_cost;
    /* retry backoff */
    fg_time_t eligible_time;
    int32_t retries_used, max_retries;
    /* GPUs of its type (any type: all) on up nodes, free of those, and every node's */
    int32_t type_up, type_free, type_total;
    int32_t type_nodes_up;
    /* fragmentation: the largest free block per node, biggest first */
    int32_t largest_free;
    size_t nlargest;
    fg_why_node_t largest[FG_WHY_NODES_MAX];
    /* nodes that could hold it (for more than 8 GPUs: whole nodes), earliest first */
    int32_t holders_total; /* such nodes in all (at most the first FG_WHY_NODES_MAX listed) */
    size_t nholders;
    fg_why_node_t holders[FG_WHY_NODES_MAX];
} fg_why_t;

/* Fills *out with why pending job `id` waits as of `now`, walking at most order_max
 * jobs of the plan order (0: none). FG_ENOENT if no such live job, FG_ESTATE if it is
 * not pending. Changes nothing (but, with estimates on demand, may make the job's
 * estimate and reason, as fg_sched_job_info does). */
int fg_sched_why(fg_sched_t *s, fg_job_id_t id, fg_time_t now, size_t order_max, fg_why_t *out);

/* fg_sched_why of the n jobs ids[] (repeats allowed) in ONE walk of the plan order (up
 * to the last of them, at most order_max jobs): out[k] and rcs[k] (FG_OK, FG_ENOENT,
 * FG_ESTATE) for ids[k]. Returns FG_EINVAL for a NULL array, else FG_OK. For a caller
 * answering several requests at once. */
int fg_sched_why_many(fg_sched_t *s, const fg_job_id_t *ids, size_t n, fg_time_t now,
                      size_t order_max, fg_why_t *out, int *rcs);

#ifdef __cplusplus
}
#endif
#endif /* FAIRGPU_WHY_H */
