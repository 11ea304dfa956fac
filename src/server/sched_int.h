/*
 * sched_int.h - what the scheduler thread's files (src/server/sched*.c) share: the
 * iteration context and the helpers that fill its durable batch.
 *
 * One iteration of the scheduler thread (sched.c) takes every queued message, applies
 * it to the core and to the in-memory jobs and nodes, runs one pass, applies its
 * decisions, and commits everything in ONE store batch (sched_commit.c). Until that
 * commit nothing is shown: changes are collected in sctx_t (jobs made dirty, events,
 * attempt records, node states, messages for agents, callers to answer). Example: a
 * start decided by the pass becomes one OP_ATTEMPT_INSERT, one OP_JOB_UPDATE, one
 * "PENDING -> RUNNING" event and one start message per rank, and the messages reach the
 * agents' outboxes only after the store has the job as RUNNING.
 *
 * Where each concept lives:
 *   sched.c          the thread: its loop, wake-ups, timers, start and stop
 *   sched_call.c     how HTTP threads post messages and wait for (or park on) answers
 *   sched_commit.c   the iteration's batch and its commit and publication
 *   sched_submit.c   handing pending jobs to the core, parking refused ones, cancels
 *   sched_starts.c   applying the pass's starts and preemptions
 *   sched_attempts.c agent reports (started, exited) and the end of an attempt
 *   sched_register.c node registration and the reconcile with what the agent holds
 *   sched_nodes.c    node down, drain and resume, heartbeats, node rendering
 *   sched_reasons.c  pending reasons and estimates copied from the core
 *   sched_why.c      one pending job's "why" with its evidence (GET /v1/jobs/{id})
 *   sched_estimates.c each job's estimate at submission, latest one, and its error
 *   sched_fairshare.c the fair-share view (GET /v1/fair-share) and saved usage
 *   sched_restore.c  building the core from the store at start
 *   sched_billing.c  ledger rows of attempts, live accrual, budgets
 *   sched_idle.c     idle GPUs: samples per job, flags, warnings, requeues, stops
 *
 * Every function here runs on the scheduler thread. "mu held" means srv->mu is held by
 * the caller; the others take it themselves.
 */
#ifndef FG_SERVER_SCHED_INT_H
#define FG_SERVER_SCHED_INT_H

#include "server/pricebook.h"
#include "server/server.h"

#include "fairgpu/billing.h"
#include "fairgpu/estimate.h"

/* A message for an agent, queued until the commit. */
typedef struct out_msg {
    char node[FG_NAME_MAX + 1];
    json_t *msg;
} out_msg_t;

/* The scheduler thread's state: the core, the last pass's decisions, parked jobs, and
 * the durable batch of the iteration now open. */
typedef struct sctx {
    srv_t *s;
    fg_sched_t *core;
    fg_decisions_t d;
    uint64_t *parked; /* jobs the core refused for now (no fitting node, quota) */
    size_t nparked, parked_cap;
    bool retry_parked;
    /* the iteration's durable batch */
    uint64_t *dirty;
    size_t ndirty, dirty_cap;
    fg_store_event_t *evs;
    size_t nevs, evs_cap;
    fg_store_attempt_t *atts; /* copies */
    int *att_kind;            /* OP_ATTEMPT_INSERT / OP_ATTEMPT_UPDATE */
    size_t natts, atts_cap, att_kind_cap;
    fg_store_usage_t *usage;
    size_t nusage, usage_cap;
    char **node_states; /* pairs name, state */
    size_t nnode_states, node_states_cap;
    fg_store_node_t *node_upserts;
    size_t nnode_upserts, node_upserts_cap;
    out_msg_t *outs;
    size_t nouts, outs_cap;
    srv_sync_t **syncs;
    size_t nsyncs, syncs_cap;
    fg_ledger_row_t *rows; /* ledger rows of the iteration (sched_billing.c) */
    size_t nrows, rows_cap;
    /* billing: the price book (reloaded when srv_t.prices_gen moves), the last accrual */
    srv_pricebook_t book;
    uint64_t book_gen;
    bool book_loaded;
    int64_t last_charge_ms;
    int64_t dearest[FG_PRIO_HIGH + 1]; /* per class, of the nodes' GPU types (limit costs) */
    uint64_t dearest_gen;              /* book_gen + 1 when computed */
    size_t dearest_nodes;
    int64_t dearest_at_ms;
    size_t held_accounts; /* accounts when the month's GPU time held was read */
    bool budgets_ready;   /* the first budget check after the start is done */
    int64_t last_usage_save, last_refresh_ms, last_session_gc;
    int64_t last_iter_ms; /* the last full iteration (a pass and its commit) */
    bool changed;         /* something happened since the last refresh */
    int64_t now;
    fg_rt_model_t *rt; /* run times against limits of the jobs that ended (sched_project.c) */
    fg_est_scratch_t *est_ws; /* the projection's memory, kept between refreshes (idem) */
    uint64_t dry_runs;        /* dry runs so far (their ids in the core, h_dry_run.c) */
} sctx_t;

/* sched.c: the one scheduler thread's state */
sctx_t *srv__sched_ctx(void);

/* sched_call.c: answers to callers (y may be NULL: nobody waits) */
void srv__sync_done(srv_sync_t *y);
void srv__sync_error(srv_sync_t *y, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void srv__sync_ok(srv_sync_t *y, int status, json_t *reply); /* takes reply */

/* sched_commit.c: the iteration's batch (mu held where a job or node changes) */
srv_job_t *srv__job(sctx_t *c, uint64_t id);
srv_job_t **srv__running_jobs(srv_t *s, const char *node, size_t *n);
void srv__mark_changed(srv_t *s);
void srv__mark_dirty(sctx_t *c, srv_job_t *j);
void srv__add_event(sctx_t *c, const char *kind, uint64_t job_id, const char *from, const char *to,
                    const char *reason, const char *node);
void srv__add_attempt(sctx_t *c, const fg_store_attempt_t *a, int kind);
void srv__add_node_state(sctx_t *c, const char *name, const char *state);
void srv__send_to(sctx_t *c, const char *node, json_t *msg); /* takes msg */
void srv__add_sync(sctx_t *c, srv_sync_t *y);
void srv__set_state(srv_t *s, srv_job_t *j, fg_job_state_t st);
void srv__set_reason(srv_job_t *j, int code, const char *text);
void srv__commit(sctx_t *c);

/* sched_submit.c */
void srv__sync_accounts(sctx_t *c);
void srv__unpark(sctx_t *c, uint64_t id);
void srv__retry_parked(sctx_t *c);
void srv__fill_spec(srv_t *s, const srv_job_t *j, fg_job_spec_t *sp, char *user, size_t un);
void srv__core_submit(sctx_t *c, srv_job_t *j, bool restoring); /* mu held */
void srv__do_submit(sctx_t *c, srv_msg_t *m);
void srv__do_cancel(sctx_t *c, srv_msg_t *m);

/* sched_starts.c */
void srv__apply_decisions(sctx_t *c);

/* sched_attempts.c (mu held) */
json_t *srv__stop_msg(const srv_job_t *j, int rank, const char *why);
void srv__stop_ranks(sctx_t *c, srv_job_t *j, const char *why, int except_rank);
void srv__end_attempt(sctx_t *c, srv_job_t *j, fg_end_cause_t cause, bool has_exit,
                      int32_t exit_code, int32_t signal);
/* (these take mu) */
void srv__do_started(sctx_t *c, srv_msg_t *m);
void srv__do_exited(sctx_t *c, srv_msg_t *m);
void srv__do_reports(sctx_t *c, srv_msg_t *m);

/* sched_register.c */
void srv__do_register(sctx_t *c, srv_msg_t *m);

/* sched_nodes.c */
const char *srv__node_state_name(const srv_node_t *n, srv_t *s); /* mu held */
void srv__do_node_state(sctx_t *c, srv_msg_t *m);
void srv__check_heartbeats(sctx_t *c, int64_t now_ms, int64_t limit_ms); /* mu held */

/* sched_reasons.c */
void srv__refresh_reasons(sctx_t *c);

/* sched_estimates.c (mu held): a pending job's estimate (times in Unix seconds; p50 0:
 * none; source 1 user, 2 account, 3 all, 4 limit) and the limit-based one */
typedef struct srv_est {
    int64_t p10, p50, p90;
    int source;
    int64_t limit;
} srv_est_t;
void srv__est_set(sctx_t *c, srv_job_t *j, const srv_est_t *e); /* the first one is kept */
void srv__est_started(sctx_t *c, srv_job_t *j);                 /* its attempt starts now */

/* sched_project.c: the run-time model and the projection of the queue */
typedef struct srv_proj {
    uint64_t id;
    int64_t p10, p50, p90; /* projected starts; 0: none */
    int source;            /* of its run-time prediction, as srv_est_t */
} srv_proj_t;
/* A job of a dry run, in the core for the projection (its GPU type is not in memory). */
typedef struct srv_dry_job {
    uint64_t id;
    const char *gpu_type;
} srv_dry_job_t;
void srv__est_model_build(sctx_t *c);                   /* at start-up, from memory */
void srv__est_job_ended(sctx_t *c, const srv_job_t *j); /* mu held; j has its end state */
/* Projects the first estimate_depth pending jobs of plan order; *out (caller frees) gets
 * one entry per job in that order; returns how many. extra: a dry run's job, or NULL. */
size_t srv__est_project(sctx_t *c, const srv_dry_job_t *extra, srv_proj_t **out);

/* h_dry_run.c */
void srv__do_dry_run(sctx_t *c, srv_msg_t *m);

/* sched_billing.c */
int64_t srv__limit_cost(sctx_t *c, const srv_job_t *j); /* mu held */
void srv__bill_attempt_end(sctx_t *c, srv_job_t *j);    /* mu held; j->cur has ended */
void srv__bill_restore(sctx_t *c, srv_job_t *j);        /* a running job read back */
void srv__bill_accrue(sctx_t *c, bool stop);            /* every charge interval */
void srv__budget_tick(sctx_t *c);                       /* every iteration */

/* sched_why.c: is the batch only MSG_WHY (nothing changes)? answers its MSG_WHY */
bool srv__only_whys(const srv_msg_t *batch);
void srv__answer_whys(sctx_t *c, srv_msg_t *batch);
/* sched_idle.c: each running job's GPU samples through the idle decision (idle.h), at
 * most once a second; takes mu */
void srv__idle_tick(sctx_t *c);

/* sched_fairshare.c */
void srv__refresh_fairshare(sctx_t *c);
void srv__save_usage(sctx_t *c);

#endif
