/*
 * fairgpu/core.h - the scheduling core: pure C, no I/O, no clock reads, no globals.
 *
 * A scheduler (fg_sched_t) holds the state: accounts, users (members of accounts),
 * nodes with their GPUs, and the live jobs (PENDING or RUNNING). The caller feeds it
 * events (submit, cancel, attempt ended, node state) and asks it for a pass at a given
 * time; the pass returns decisions (starts with node/GPU placements, preemptions) and
 * leaves, on every pending job it looked at, a reason and an estimated start.
 *
 * Time is an int64 count of seconds (fg_time_t) given by the caller. The same inputs
 * give the same decisions, bit for bit.
 *
 * Ownership: strings passed in are copied. Pointers returned (names) stay valid until
 * the scheduler is freed. Decisions are written into a caller-owned fg_decisions_t.
 *
 * Errors are negative fg_err values; fg_strerror() names them.
 */
#ifndef FAIRGPU_CORE_H
#define FAIRGPU_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int64_t fg_time_t;    /* seconds */
typedef uint64_t fg_job_id_t; /* caller-chosen, unique among live jobs, never 0 */

#define FG_TIME_NEVER      INT64_MAX
#define FG_WHOLE_NODE_GPUS 8    /* jobs of 8k GPUs take k whole nodes */
#define FG_MAX_NODE_GPUS   64   /* GPUs of one node are a uint64_t mask */
#define FG_MAX_JOB_GPUS    1024 /* at most 128 whole nodes per job */
#define FG_LAS_MAX_LEVELS  8
#define FG_NAME_MAX        64  /* account, user, node and GPU type names */
#define FG_REASON_MAX      512 /* fg_sched_explain() text, NUL included */

/* ------------------------------------------------------------------ errors */

typedef enum fg_err {
    FG_OK = 0,
    FG_EINVAL = -1,      /* bad argument */
    FG_ENOMEM = -2,      /* out of memory (only from _new; elsewhere we abort) */
    FG_ENOENT = -3,      /* no such job/node/account/user */
    FG_EEXIST = -4,      /* already exists (duplicate job id) */
    FG_ESTATE = -5,      /* not allowed in the object's current state */
    FG_EQUEUE_FULL = -6, /* the user's pending cap is reached */
    FG_ESHED = -7,       /* load shedding: queue over its size, low job refused */
    FG_ESTALE = -8,      /* report for an attempt that is not the current one */
    FG_EQUOTA = -9,      /* job can never fit the account's quota */
    FG_ENOFIT = -10,     /* job can never fit any node of the cluster (fg_sched_check_fit) */
} fg_err_t;

const char *fg_strerror(int err);

/* ------------------------------------------------------------------ enums */

typedef enum fg_policy {
    FG_POLICY_FAIR = 0, /* class, LAS queue, then account and user by fair share */
    FG_POLICY_WFQ,      /* weighted fair queuing: class, then account, then user */
    FG_POLICY_FIFO,     /* strict submit order, no backfill (head-of-line blocking) */
    FG_POLICY_PRIORITY, /* class, then submit order */
    FG_POLICY_RR,       /* users (members) in turn, class first */
    FG_POLICY_LAS,      /* least attained service, discretized queues (Tiresias) */
    FG_POLICY_COUNT
} fg_policy_t;

const char *fg_policy_name(fg_policy_t p);
/* Parses "wfq", "fifo", "priority", "round-robin" (or "rr"), "las", "fair". -1 if unknown. */
int fg_policy_parse(const char *s);

typedef enum fg_prio { FG_PRIO_LOW = 0, FG_PRIO_NORMAL = 1, FG_PRIO_HIGH = 2 } fg_prio_t;
const char *fg_prio_name(fg_prio_t p);
int fg_prio_parse(const char *s); /* "low" | "normal" | "high"; -1 if unknown */

typedef enum fg_node_state {
    FG_NODE_UP = 0,
    FG_NODE_DRAINING, /* no new jobs; running ones finish */
    FG_NODE_DOWN,     /* nothing starts; the caller ends its jobs (FG_END_NODE_LOST) */
} fg_node_state_t;
const char *fg_node_state_name(fg_node_state_t s);

typedef enum fg_job_state {
    FG_JOB_PENDING = 0,
    FG_JOB_RUNNING,
    FG_JOB_COMPLETED,
    FG_JOB_FAILED,
    FG_JOB_CANCELLED,
    FG_JOB_TIMEOUT,
} fg_job_state_t;
const char *fg_job_state_name(fg_job_state_t s); /* "PENDING", ... */

/* How an attempt ended (reported by the caller). */
typedef enum fg_end_cause {
    FG_END_COMPLETED = 0, /* exit 0 -> COMPLETED */
    FG_END_FAILED,        /* non-zero exit -> PENDING (retry) or FAILED */
    FG_END_CANCELLED,     /* -> CANCELLED */
    FG_END_TIMEOUT,       /* ran past its time limit -> TIMEOUT */
    FG_END_PREEMPTED,     /* stopped after a preemption decision -> PENDING */
    FG_END_NODE_LOST,     /* its node died -> PENDING (counts as a retry) or FAILED; not
                             charged (no usage), as billing refunds it */
    FG_END_SETUP_FAILED,  /* the node could not set up its Unix identity: it never ran and
                             is not charged (0 GPU-seconds, no usage) -> PENDING (counts as
                             a retry) or FAILED */
    FG_END_NOT_STARTED,   /* never reached its node -> PENDING, no retry used, no usage */
} fg_end_cause_t;
#define FG_END_CAUSE_MAX FG_END_NOT_STARTED
const char *fg_end_cause_name(fg_end_cause_t c);

/* Why a pending job waits: the reason_code enum of the API contract. */
typedef enum fg_reason {
    FG_REASON_NONE = 0,      /* started, or not yet looked at */
    FG_REASON_PRIORITY,      /* others ahead by fair share or class */
    FG_REASON_RESOURCES,     /* not enough free GPUs */
    FG_REASON_FRAGMENTATION, /* enough free GPUs, not on one node / not whole nodes */
    FG_REASON_RESERVATION,   /* the GPUs it could use are held for another job */
    FG_REASON_QUOTA,         /* account quota reached */
    FG_REASON_BUDGET,        /* account budget exhausted (set by the caller) */
    FG_REASON_RETRY_BACKOFF, /* waiting out the backoff after a failure */
    FG_REASON_GPU_TYPE,      /* no node has that GPU type (or enough GPUs) */
    FG_REASON_NODES_DOWN,    /* the nodes it could use are down or draining */
    FG_REASON_COUNT
} fg_reason_t;
const char *fg_reason_code(fg_reason_t r); /* "priority", "resources", ... */

typedef enum fg_preempt_why {
    FG_PREEMPT_FAIR_SHARE = 0, /* long runner of an over-share account, for a starved job */
    FG_PREEMPT_PRIORITY,       /* a high job takes a low job's GPUs */
    FG_PREEMPT_LAS,            /* long runner (more attained service) under las */
} fg_preempt_why_t;
const char *fg_preempt_why_name(fg_preempt_why_t w);

/* ------------------------------------------------------------------ config */

typedef struct fg_config {
    fg_policy_t policy;
    fg_time_t half_life_s;         /* usage decay half-life; 0 = no memory. default 7 days */
    bool backfill;                 /* EASY backfill (ignored by fifo). default true */
    int32_t backfill_depth;        /* pending jobs scanned past the first blocked one; 0 = all */
    int32_t reserve_depth;         /* blocked jobs that get a protected reservation. default 4 */
    int32_t estimate_depth;        /* first K pending jobs (plan order) get an estimate */
    bool preemption;               /* fair-share / LAS / class preemption. default true */
    fg_time_t quantum_s;           /* a job that has run this long is a "long runner" */
    fg_time_t preempt_wait_s;      /* a starved job must have waited this long */
    fg_time_t min_run_s;           /* no fair-share preemption within this run time */
    int32_t preempt_jobs_per_pass; /* starved jobs served by preemption per pass */
    fg_time_t retry_backoff_s;     /* first retry waits this long; doubles each time */
    fg_time_t retry_backoff_max_s;
    int32_t max_pending_per_user; /* 0 = no cap */
    int32_t shed_pending;         /* pending count at which new low jobs are refused; 0 = never */
    int32_t las_levels;           /* number of LAS queues (<= FG_LAS_MAX_LEVELS) */
    int64_t las_thresholds_gpu_s[FG_LAS_MAX_LEVELS - 1]; /* ascending */
} fg_config_t;

/* Fills *cfg with the documented defaults. */
void fg_config_default(fg_config_t *cfg);

/* Checks every field; on error returns FG_EINVAL and points *msg at a static sentence
 * naming the field. */
int fg_config_check(const fg_config_t *cfg, const char **msg);

/* ------------------------------------------------------------------ scheduler */

typedef struct fg_sched fg_sched_t;

/* Creates an empty scheduler with a copy of cfg (which must pass fg_config_check).
 * The account "default" exists from the start. Returns NULL on a bad config.
 * Running out of memory in any call of the core aborts the process. */
fg_sched_t *fg_sched_new(const fg_config_t *cfg);
void fg_sched_free(fg_sched_t *s);
const fg_config_t *fg_sched_config(const fg_sched_t *s);

/* Accounts: creates or updates. weight > 0; gpu_quota < 0 means unlimited.
 * Returns the account index (>= 0) or an error. */
int fg_sched_account_set(fg_sched_t *s, const char *name, double weight, int32_t gpu_quota);
int fg_sched_account_find(const fg_sched_t *s, const char *name); /* index or FG_ENOENT */
/* Budget flag set by the caller (billing lives outside the core): while exhausted,
 * the account's pending jobs wait with reason "budget". */
int fg_sched_account_set_budget_exhausted(fg_sched_t *s, int account, bool exhausted);
/* A "safe" budget (set by the caller; -1 = none, the default): what the account's jobs
 * may still reserve, in the caller's money units. A pending job whose limit_cost exceeds
 * it waits with reason "budget"; each job the core starts reserves its limit_cost from
 * it until the caller sets it again (before the next pass: budget less spent less what
 * its running jobs still reserve). Example: 100 left, jobs costing 60 and 50: the first
 * starts, the second waits (40 left) until the caller says more is left. */
int fg_sched_account_set_budget_left(fg_sched_t *s, int account, int64_t micros);

/* Members: a user inside an account, with its weight in that account (> 0).
 * Creates or updates; returns the member index (>= 0) or an error. */
int fg_sched_member_set(fg_sched_t *s, const char *account, const char *user, double weight);
int fg_sched_member_find(const fg_sched_t *s, const char *account, const char *user);

/* Decayed usage (GPU-seconds), for persistence: get returns the value as of `now`
 * (decay applied, running jobs accrued); set replaces it as of `now`. */
double fg_sched_account_usage(fg_sched_t *s, int account, fg_time_t now);
double fg_sched_member_usage(fg_sched_t *s, int member, fg_time_t now);
int fg_sched_account_set_usage(fg_sched_t *s, int account, double gpu_s, fg_time_t now);
int fg_sched_member_set_usage(fg_sched_t *s, int member, double gpu_s, fg_time_t now);

/* Nodes: adds a node with `gpus` GPUs (1..FG_MAX_NODE_GPUS) of type gpu_type.
 * Returns the node index (>= 0) or an error (FG_EEXIST for a taken name). */
int fg_sched_node_add(fg_sched_t *s, const char *name, int32_t gpus, const char *gpu_type,
                      fg_node_state_t state);
int fg_sched_node_find(const fg_sched_t *s, const char *name);
/* Changes a node's state. Going DOWN does not end its jobs: the caller reports each
 * of them with FG_END_NODE_LOST (fg_sched_node_info lists them). */
int fg_sched_node_set_state(fg_sched_t *s, int node, fg_node_state_t state, fg_time_t now);

/* ------------------------------------------------------------------ jobs */

typedef struct fg_job_spec {
    fg_job_id_t id;
    const char *account;    /* must exist */
    const char *user;       /* must be a member of account */
    int32_t gpus;           /* 1..8, or a multiple of 8 up to FG_MAX_JOB_GPUS */
    const char *gpu_type;   /* NULL or "" = any */
    fg_time_t time_limit_s; /* > 0 */
    fg_prio_t prio;
    int32_t max_retries;             /* >= 0 */
    fg_time_t checkpoint_interval_s; /* 0 = none declared */
    fg_time_t submit_time;           /* usually now; older when restoring */
    int64_t limit_cost;              /* its time limit at its rate, for safe budgets; 0 = free */
} fg_job_spec_t;

/* Adds a PENDING job. Refuses with FG_EQUEUE_FULL (user's pending cap),
 * FG_ESHED (low job while the queue is over its shedding size), FG_EQUOTA (more GPUs
 * than its account's quota: can never run), FG_EINVAL/FG_ENOENT/FG_EEXIST. A refusal
 * changes nothing. A job that no current node could hold is accepted and waits with
 * reason gpu_type or nodes_down, since nodes may join later; callers that want to
 * refuse it ask fg_sched_check_fit() first. */
int fg_sched_submit(fg_sched_t *s, const fg_job_spec_t *spec, fg_time_t now);

/* Like fg_sched_submit without the admission limits (pending cap, shedding): for a
 * controller restoring the jobs it had already accepted; then fg_sched_restore_pending
 * restores their counters. */
int fg_sched_submit_restored(fg_sched_t *s, const fg_job_spec_t *spec, fg_time_t now);

/* FG_OK if the cluster's nodes (in any state) could ever hold a job of `gpus` GPUs
 * of `gpu_type` (NULL or "" = any), FG_ENOFIT if not, FG_EINVAL for a bad size. */
int fg_sched_check_fit(const fg_sched_t *s, int32_t gpus, const char *gpu_type);

/* One node's share of an allocation. */
typedef struct fg_alloc {
    int32_t node;
    uint64_t gpu_mask; /* bit i = GPU index i on that node */
} fg_alloc_t;

/* Restores a RUNNING job (controller restart): submits it and places attempt
 * `attempt` started at `start_time` on the given GPUs, which must be free. */
int fg_sched_restore_running(fg_sched_t *s, const fg_job_spec_t *spec, int32_t attempt,
                             int32_t retries_used, int64_t attained_gpu_s, fg_time_t start_time,
                             const fg_alloc_t *allocs, int32_t nallocs, fg_time_t now);
/* Restores the counters of a PENDING job already submitted (controller restart).
 * Its preemption wait counts from max(submit time, eligible_time), as it did before. */
int fg_sched_restore_pending(fg_sched_t *s, fg_job_id_t id, int32_t attempts, int32_t retries_used,
                             int64_t attained_gpu_s, fg_time_t eligible_time);

/* Restores pass-to-pass state a controller persists across a restart: the claim of a
 * PENDING job that preemptions were issued for (served first until it starts; victims =
 * how many of them are still stopping), and the round-robin turn (fg_sched_rr_turn). */
int fg_sched_restore_claim(fg_sched_t *s, fg_job_id_t id, int32_t victims_stopping);
int32_t fg_sched_rr_turn(const fg_sched_t *s);
int fg_sched_set_rr_turn(fg_sched_t *s, int32_t member);

/* Cancels a PENDING job (it leaves the core: CANCELLED). A RUNNING job returns
 * FG_ESTATE: the caller stops it and reports FG_END_CANCELLED. */
int fg_sched_cancel(fg_sched_t *s, fg_job_id_t id, fg_time_t now);

/* The record of one finished attempt, for billing and history. */
typedef struct fg_attempt {
    fg_job_id_t job;
    int32_t attempt; /* 1, 2, ... */
    fg_time_t start_time, end_time;
    fg_end_cause_t cause;
    int32_t gpus;
    int64_t gpu_seconds;      /* gpus * (end - start) */
    int64_t lost_gpu_seconds; /* for preemption: work since the last checkpoint */
    fg_job_state_t new_state; /* PENDING if requeued, else the terminal state */
    fg_time_t eligible_time;  /* when requeued: not before this (retry backoff) */
} fg_attempt_t;

/* Reports that attempt `attempt` of job `id` ended at `now` with `cause`.
 * Frees its GPUs, accrues usage, and either requeues the job (preempted; not started,
 * which uses no retry and accrues no usage; failed or node lost with retries left) or
 * ends it (the job then leaves the core).
 * FG_ESTALE if `attempt` is not the running attempt. *out (may be NULL) gets the record. */
int fg_sched_attempt_ended(fg_sched_t *s, fg_job_id_t id, int32_t attempt, fg_end_cause_t cause,
                           fg_time_t now, fg_attempt_t *out);

/* ------------------------------------------------------------------ a pass */

typedef struct fg_start {
    fg_job_id_t job;
    int32_t attempt;
    int32_t gpus;
    int32_t alloc_off, alloc_n; /* its placements: decisions->allocs[alloc_off ...] */
} fg_start_t;

typedef struct fg_preempt {
    fg_job_id_t job;
    int32_t attempt;
    fg_preempt_why_t why;
    fg_job_id_t for_job; /* the waiting job it makes room for */
} fg_preempt_t;

typedef struct fg_decisions {
    fg_start_t *starts;
    size_t nstarts, starts_cap;
    fg_alloc_t *allocs;
    size_t nallocs, allocs_cap;
    fg_preempt_t *preempts;
    size_t npreempts, preempts_cap;
    /* statistics of the pass */
    /* Pending jobs looked at. With estimates on demand (fg_sched_set_estimates_on_demand)
     * only those the pass itself looked at: not the jobs it left to be looked at when
     * asked for (at most as many as in the default mode, never more). */
    int64_t scanned;
    int64_t pass_no; /* increasing pass number */
    /* The earliest future time at which a pass could decide something new even if no
     * event arrives (a retry backoff ends, a starved job reaches the preemption wait,
     * a long runner reaches the quantum or its minimum run time). FG_TIME_NEVER if
     * none. Event-driven callers (the simulator) run a pass then. */
    fg_time_t next_wake;
} fg_decisions_t;

void fg_decisions_init(fg_decisions_t *d);
void fg_decisions_free(fg_decisions_t *d);

/* Runs one scheduling pass at time `now` (never earlier than a previous call).
 * Clears *out, then fills it. Started jobs are RUNNING when it returns (the caller
 * launches them). Preempted jobs keep their GPUs until the caller reports
 * FG_END_PREEMPTED. Returns FG_OK or an error. */
int fg_sched_pass(fg_sched_t *s, fg_time_t now, fg_decisions_t *out);

/* Estimates on demand (off by default). When on, the estimates that only the API shows
 * (pending jobs in the first estimate_depth of plan order beyond the reserved and the
 * preemption-candidate ones) are not computed by the pass that reached them but when
 * asked for (fg_sched_job_info, fg_sched_job_at, fg_sched_explain) before the next event
 * or pass; an estimate asked for then is exactly the one the pass would have computed,
 * and one not asked for by then stays unknown (FG_TIME_NEVER). The same holds for the
 * reasons of the jobs a walk looks at once no decision depends on them (past the claims
 * of its first blocked jobs, jobs that cannot start): a pass may leave them, and the rest
 * of such a walk, to be made when asked for; a reason asked for before the next event or
 * pass is exactly the one the pass would have left, and a job whose reason was not asked
 * for by then shows as not reached by the last pass (reason priority, no estimate).
 * Decisions and next_wake never depend on it; `scanned` counts only the jobs the pass
 * itself looked at. For callers that read few estimates, such as the simulator
 * (arrivals only). While it is on, those inspection calls may make estimates and
 * reasons, so they change the scheduler's internal plan: do not call them concurrently.
 * Changing an account, a member or the round-robin turn first makes what a pass left. */
void fg_sched_set_estimates_on_demand(fg_sched_t *s, bool on);

/* No reasons (off by default). For callers that read no reasons at all, only estimates
 * (the simulator): the reasons that depend on the plan and that no decision depends on
 * are never made (those a pass may leave to be made when asked for, see above, and the
 * blocked reason of a job that is not a preemption candidate), so such a job shows
 * reason priority, as if not reached, even when asked for in time; its estimate is still
 * exactly the one the pass would have made. Reasons that do not depend on the plan
 * (budget, quota, GPU type, nodes down, backoff) are still given. Decisions, next_wake
 * and estimates never depend on it. */
void fg_sched_set_no_reasons(fg_sched_t *s, bool on);

/* Drops every derived structure (queues, free-GPU indexes, running totals) and
 * rebuilds it from the base records. Decisions after a rebuild are exactly those
 * an incrementally maintained scheduler makes. */
void fg_sched_rebuild(fg_sched_t *s);

/* ------------------------------------------------------------------ inspection */

typedef struct fg_job_info {
    fg_job_id_t id;
    fg_job_state_t state; /* PENDING or RUNNING (ended jobs leave the core) */
    int32_t account, member;
    int32_t gpus;
    fg_prio_t prio;
    fg_time_t submit_time;
    fg_time_t time_limit_s;
    int32_t attempt; /* attempts started so far (the running one included) */
    int32_t retries_used;
    int32_t max_retries;
    int64_t attained_gpu_s;  /* GPU-seconds of ended attempts */
    fg_time_t start_time;    /* RUNNING: start of the current attempt */
    fg_time_t eligible_time; /* PENDING: not before this (retry backoff) */
    bool preempting;         /* RUNNING: a preemption was decided, stop pending */
    bool claimed;            /* PENDING: preemptions were issued for it (served first) */
    int32_t claim_victims;   /* PENDING: of those, victims still stopping */
    /* PENDING: from the last pass, when its last walk looked at the job (a pass walks
     * again after starts; a job only an earlier walk reached shows priority, not reached) */
    fg_reason_t reason;
    fg_time_t estimated_start; /* PENDING: FG_TIME_NEVER when unknown */
    int32_t nallocs;
    fg_alloc_t allocs[FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS]; /* the first nallocs are set */
} fg_job_info_t;

/* Fills *out with job `id`'s state. Not const: with estimates on demand (see
 * fg_sched_set_estimates_on_demand) it may first make the job's estimate and reason,
 * which changes the scheduler's plan; otherwise it changes nothing. */
int fg_sched_job_info(fg_sched_t *s, fg_job_id_t id, fg_job_info_t *out);

/* Writes the reason a pending job waits, in plain words with its numbers, into buf.
 * For a job the last pass did not reach, computes its place in the plan order.
 * Returns its reason code, or an error. */
int fg_sched_explain(fg_sched_t *s, fg_job_id_t id, fg_time_t now, char *buf, size_t n);

/* The first (at most) `max` pending jobs in plan order as of `now`: the order the next
 * pass would look at them in, before it starts any (for projections of the queue, such
 * as fairgpu/estimate.h). Writes their ids into ids[] and returns how many. Changes
 * nothing. Example: accounts A and B of equal weight and usage, A's jobs a1 a2, B's b1:
 * a1, b1, a2 (each pick adds its GPUs to its account's key). */
size_t fg_sched_plan_order(fg_sched_t *s, fg_time_t now, fg_job_id_t *ids, size_t max);

/* Live jobs in a stable order (by internal slot): i = 0 .. fg_sched_job_count()-1. */
size_t fg_sched_job_count(const fg_sched_t *s);
size_t fg_sched_pending_count(const fg_sched_t *s);
/* fg_sched_job_info of the i-th live job (not const for the same reason). */
int fg_sched_job_at(fg_sched_t *s, size_t i, fg_job_info_t *out);

typedef struct fg_node_info {
    const char *name;
    const char *gpu_type;
    fg_node_state_t state;
    int32_t gpus;
    int32_t free_gpus;
    fg_job_id_t gpu_job[FG_MAX_NODE_GPUS]; /* 0 = free */
} fg_node_info_t;
size_t fg_sched_node_count(const fg_sched_t *s);
int fg_sched_node_info(const fg_sched_t *s, int node, fg_node_info_t *out);

typedef struct fg_account_info {
    const char *name;
    double weight;
    int32_t gpu_quota; /* < 0: unlimited */
    bool budget_exhausted;
    int32_t running_gpus;
    int32_t pending_jobs;
    double normalized_share; /* weight / sum of weights of all accounts */
} fg_account_info_t;
size_t fg_sched_account_count(const fg_sched_t *s);
int fg_sched_account_info(const fg_sched_t *s, int account, fg_account_info_t *out);

typedef struct fg_member_info {
    const char *user;
    int32_t account;
    double weight;
    int32_t running_gpus;
    int32_t pending_jobs;
    double normalized_share; /* of its account: weight / sum of members' weights */
} fg_member_info_t;
size_t fg_sched_member_count(const fg_sched_t *s);
int fg_sched_member_info(const fg_sched_t *s, int member, fg_member_info_t *out);

/* Total GPUs on UP nodes, and of those, free ones. */
int32_t fg_sched_gpus_up(const fg_sched_t *s);
int32_t fg_sched_gpus_free(const fg_sched_t *s);

#ifdef __cplusplus
}
#endif
#endif /* FAIRGPU_CORE_H */
