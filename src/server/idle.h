/*
 * idle.h - the idle-GPU decision for one running job: pure, no I/O, no clock reads, so
 * that tests drive it with made-up samples and times (tests/unit/test_server_idle.c).
 * The scheduler thread feeds it once a second (sched_idle.c) and turns what it returns
 * into events, stops and requeues. docs/idle.md says what operators see.
 */
#ifndef FG_SERVER_IDLE_H
#define FG_SERVER_IDLE_H

#include <stdbool.h>
#include <stdint.h>

/* The controller's settings: --idle-util-pct, --idle-after. */
typedef struct srv_idle_cfg {
    int util_pct;     /* a GPU below this utilization is idle (0..100) */
    int64_t after_ms; /* all of a job's GPUs idle this long: the job is idle (> 0) */
} srv_idle_cfg_t;

/* An account's policy (PATCH /v1/accounts/{name}: idle_action, idle_grace_s). */
typedef struct srv_idle_policy {
    int action;       /* fg_store_idle_action_t: none, warn, requeue, stop */
    int64_t grace_ms; /* requeue/stop this long after the warning (>= 0) */
} srv_idle_policy_t;

/* One job's idle state, for its current attempt. Zeroed: not idle, nothing seen. */
typedef struct srv_idle {
    int32_t attempt;       /* the attempt it belongs to (the wiring resets it on a new one) */
    int64_t low_since_ms;  /* since when every GPU is below the threshold; 0: not */
    int64_t idle_since_ms; /* flagged idle (== low_since_ms then); 0: not idle */
    int64_t warned_ms;     /* IDLE_WARNING given at; 0: not */
    bool acted;            /* requeue or stop asked (once per attempt) */
    int64_t last_ms;       /* the previous step */
    int64_t idle_gpu_ms;   /* GPU-milliseconds idle while allocated, not yet moved out */
    /* what the job's GPUs showed at the last sample (the API's fields) */
    int util_pct;        /* mean over its GPUs; -1 unknown */
    int64_t mem_used_mb; /* sum over its GPUs; -1 unknown */
    int64_t saved_ms;    /* the wiring's: when idle_gpu_s was last made durable */
    bool requeued;       /* the wiring's: this attempt was stopped to requeue it */
} srv_idle_t;

/* What a step decided (a bit set; several may come at once, e.g. IDLE | WARNING). */
enum {
    SRV_IDLE_EV_IDLE = 1,     /* it became idle */
    SRV_IDLE_EV_WARNING = 2,  /* warn its owner (policy warn, requeue or stop) */
    SRV_IDLE_EV_REQUEUE = 4,  /* requeue it now (grace over) */
    SRV_IDLE_EV_STOP = 8,     /* stop it now (grace over) */
    SRV_IDLE_EV_CLEARED = 16, /* it was idle and is busy again */
};

/*
 * One sample of a job of `gpus` GPUs at now_ms: max_util is the highest utilization
 * among its GPUs (so "max_util < cfg->util_pct" means all of them are below), or -1 when
 * none of them has a sample (nothing changes then). Updates *st and returns the events.
 * Idle GPU time counts from low_since_ms once the job is flagged (the detection window
 * is idle time too) and is added to st->idle_gpu_ms.
 */
unsigned srv_idle_step(srv_idle_t *st, const srv_idle_cfg_t *cfg, const srv_idle_policy_t *pol,
                       int max_util, int gpus, int64_t now_ms);

/* The name of fg_store_idle_action_t a ("none", "warn", "requeue", "stop"), and back
 * (-1 if s names none). */
const char *srv_idle_action_name(int a);
int srv_idle_action_parse(const char *s);

#endif
