/*
 * agent.h - the node agent's internal state, shared by agent_main.c (options, process
 * life), agent_proto.c (protocol threads: register/heartbeat, long-poll, reports) and
 * agent_attempts.c (attempt table, launching, stopping, the supervisor, state files).
 *
 * Lock model: one mutex, ag->mu, guards every node's attempt list and protocol state.
 * Nothing blocks while holding it except a fork (fg_launch_start is called without it)
 * and a waitpid of a monitor that has already exited. HTTP is always done without it.
 * An attempt is freed only by the reporter worker that holds it (`busy`), so a worker
 * may use its pointer without the lock; other threads change fields only under it.
 *
 * Threads: per node, `hb` (register + heartbeat), `poll` (long-poll assignments, starts
 * and stops attempts) and a few `report` workers (started / logs / exited; one worker
 * per attempt at a time keeps each attempt's reports in order, several workers keep
 * several reports in flight so the controller can commit them together); one
 * `supervisor` for all nodes (monitor exits, time limits, grace expiry).
 */
#ifndef FG_AGENT_AGENT_H
#define FG_AGENT_AGENT_H

#include "agent/ckptwatch.h"
#include "agent/gpu.h"
#include "agent/isolate.h"
#include "agent/launcher.h"

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

typedef struct fg_agent fg_agent_t;
typedef struct fg_node fg_node_t;

typedef struct fg_attempt {
    struct fg_attempt *next;
    fg_node_t *node;
    char job_id[72];
    int attempt;
    int64_t epoch;
    int rank;
    char key[128]; /* "<job_id>.<attempt>.<rank>" */
    char run_dir[600];
    char ckpt_dir[600];
    fg_proc_t proc;
    int launched;        /* proc is valid */
    int adopted;         /* found in a state file after an agent restart */
    int64_t start_ms;    /* when it was launched */
    int64_t deadline_ms; /* local time limit; 0: none */
    int64_t kill_at_ms;  /* SIGKILL due (grace over); 0: none */
    int grace_s;
    const char *stop_cause; /* end_cause forced by a stop ("cancelled", ...); NULL: none */
    int silent;             /* stale: killed without an exited report */
    int phantom;            /* a stop for an attempt we never had: exited only */
    int started_sent;
    int exited;
    fg_exit_t ex;
    int exit_sent;
    int64_t log_acked;    /* bytes the controller confirmed */
    int busy;             /* a reporter worker holds it */
    int64_t retry_at_ms;  /* reporting failed: not before this time */
    int64_t log_next_ms;  /* next look at the log of a running rank */
    int refused;          /* a report was refused once (see refusal_confirmed) */
    uint64_t refused_gen; /* the node's registration generation then */
    int log_done;         /* shipping finished or impossible */
    char error[200];      /* launch failure */
    int setup_failed;     /* the launch failed setting up its Unix identity */
    char unix_user[128];  /* the account it runs as ("" = the agent's) */
    char *gpu_uuids;      /* comma-separated uuids of its GPUs (owned; may be NULL) */
    fg_ckpt_watch_t ckpt; /* checkpoints noticed in ckpt_dir (ckptwatch.h; supervisor only
                             while it runs, read by the reporter once exited) */
} fg_attempt_t;

#define FG_ENDED_RING         4096
#define FG_REPORT_THREADS_MAX 32

struct fg_node {
    fg_agent_t *ag;
    int idx;
    char name[72];
    char work_dir[600];
    char instance[40];
    char token[512];     /* this node's own credential ("" until joined; g_token_mu) */
    char cred_file[640]; /* where it is kept: WORK_DIR/node.token (mode 0600) */
    fg_gpu_backend_t gpu;
    fg_gpu_info_t gpus[FG_GPU_MAX];
    int ngpus;
    char gpu_type[32];
    /* protocol state (under ag->mu) */
    int64_t epoch;     /* from the last register */
    int64_t max_epoch; /* highest seen */
    int64_t after;     /* long-poll position */
    int hb_interval_s;
    char state[16];
    int need_register;
    int batch_reports; /* the controller takes POST /v1/agent/reports (from register) */
    uint64_t reg_gen;
    pthread_cond_t reg_cond;    /* reg_gen changed / need_register set */
    pthread_cond_t report_cond; /* reporter has work */
    int report_kick;
    fg_attempt_t *attempts;
    char *ended[FG_ENDED_RING]; /* keys of recently finished attempts (start idempotency) */
    unsigned ended_pos;
    pthread_t hb_thr, poll_thr;
    pthread_t report_thr[FG_REPORT_THREADS_MAX];
};

typedef struct fg_agent_cfg {
    char server[512];
    char token[512];
    char token_file[512];
    char ca_file[512]; /* CA bundle to verify an https controller with ("": system store) */
    char name[64];
    int fake_gpus; /* -1: NVML (fall back to 0 with a warning) */
    char gpu_type[32];
    char work_dir[512];
    char checkpoint_root[512];
    int fake_nodes; /* 0: one real node named `name` */
    int heartbeat_s;
    int poll_wait_s;
    int grace_s;
    int64_t log_limit;
    char addr[128];
    int64_t cpus, memory_mb; /* 0: detect */
    int switch_user;         /* 1: run jobs as mapped Unix accounts (root only) */
    char user_prefix[32];
    char user_map[512]; /* "" or a file of "username account" lines ("*" = any) */
    char cgroup_root[256];
    int use_cgroups;
    int allow_unisolated;       /* start even where jobs cannot be isolated */
    int64_t job_pids_max;       /* per-job process limit (0: none) */
    char fake_gpu_dev_dir[256]; /* "" or where the fake GPUs' device nodes are made */
    fg_iso_t iso;               /* what isolation jobs get (found at start) */
    int stop_jobs_on_exit;
    int report_threads; /* reporter workers per node (concurrent reports) */
    int keep_logs;      /* keep node-local logs of reported attempts */
    char nvml_lib[256];
} fg_agent_cfg_t;

struct fg_agent {
    fg_agent_cfg_t cfg;
    pthread_mutex_t mu;
    volatile int stop;
    fg_node_t *nodes;
    int nnodes;
    int wake[2]; /* supervisor wake-up pipe */
    pthread_t sup_thr;
};

/* ---- gpubind.c (takes ag->mu itself): binds each GPU of n to the directory of the
 * running job that holds it (gpu.h, bind), before the heartbeat samples them. */
void fg_node_bind_gpus(fg_node_t *n);

/* ---- agent_attempts.c (callers hold ag->mu unless said otherwise) */

/* Handles a "start" message (called by the poll thread WITHOUT ag->mu). */
void fg_agent_start(fg_node_t *n, json_t *msg);
/* Handles a "stop" message (WITHOUT ag->mu). */
void fg_agent_stop_msg(fg_node_t *n, json_t *msg);
/* Begins stopping a: notice file for preemption, SIGTERM, SIGKILL after grace. */
void fg_attempt_begin_stop(fg_attempt_t *a, const char *why, int grace_s);
/* Finds an attempt of node n. */
fg_attempt_t *fg_attempt_find(fg_node_t *n, const char *job_id, int attempt, int rank);
/* 1 if key is in the node's recently-ended ring. */
int fg_node_recently_ended(fg_node_t *n, const char *key);
/* Deletes a's state file and, with drop_log, its node-local log and exit status (once
 * the controller has the whole log). No lock needed by the worker holding a. */
void fg_attempt_forget_files(fg_attempt_t *a, int drop_log);
/* Removes a (finished and reported) from its node, frees it (reporter thread). */
void fg_attempt_remove(fg_attempt_t *a);
/* Loads the node's state files (agent restart): adopts surviving attempts. No lock. */
void fg_node_load_state(fg_node_t *n);
/* The supervisor thread. */
void *fg_supervisor_main(void *arg);
/* Wakes the supervisor (safe from any thread). */
void fg_agent_wake(fg_agent_t *ag);
/* Kills every attempt of every node (agent shutdown with --stop-jobs-on-exit). */
void fg_agent_kill_all(fg_agent_t *ag);
/* "completed", "failed", ... for a finished attempt. */
const char *fg_attempt_end_cause(const fg_attempt_t *a);
/* Maps a stop's why to an end_cause; NULL if unknown. */
const char *fg_why_to_cause(const char *why);

/* ---- agent_proto.c */

void *fg_node_hb_main(void *arg);
void *fg_node_poll_main(void *arg);
void *fg_node_report_main(void *arg);
/* Reads the token file into cfg->token; 0 or -1 (message on stderr). */
int fg_agent_read_token(fg_agent_cfg_t *cfg);
/* 1 if tok is a node credential ("fgn_..."), not the cluster's join token. */
int fg_agent_is_node_credential(const char *tok);

#endif
