/*
 * idle.c - the idle-GPU decision for one running job (idle.h).
 *
 * A job is idle when every one of its GPUs stays below the utilization threshold for
 * the idle-after time; one GPU at or above it, and it is busy again. Its account's
 * policy then says what follows: none (flag only), warn (a warning), requeue or stop
 * (a warning, then after the grace the action, once per attempt).
 *
 * Example (threshold 5 %, after 30 s, policy requeue with a 60 s grace, 2 GPUs):
 *   t=0    max 3 %   low since 0
 *   t=30   max 2 %   IDLE | WARNING (idle since 0; 2 x 30 s = 60 GPU-s idle so far)
 *   t=60   max 4 %   nothing (grace runs until 90); 120 GPU-s idle
 *   t=90   max 1 %   REQUEUE
 * Had a GPU reached 5 % at t=60, the step would have said CLEARED, and a later idle
 * spell would warn again from the start.
 */
#include "server/idle.h"

#include "store/store.h"

#include <assert.h>
#include <string.h>

static const char *const ACTIONS[] = {"none", "warn", "requeue", "stop"};

const char *srv_idle_action_name(int a)
{
    return a >= 0 && a < 4 ? ACTIONS[a] : "none";
}

int srv_idle_action_parse(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (s && !strcmp(s, ACTIONS[i]))
            return i;
    return -1;
}

/* The policy's step once the job is idle: warn, then act after the grace. */
static unsigned police(srv_idle_t *st, const srv_idle_policy_t *pol, int64_t now_ms)
{
    if (pol->action == FG_IDLE_NONE || st->acted)
        return 0;
    if (!st->warned_ms) {
        st->warned_ms = now_ms;
        return SRV_IDLE_EV_WARNING;
    }
    if (pol->action == FG_IDLE_WARN || now_ms - st->warned_ms < pol->grace_ms)
        return 0;
    st->acted = true;
    return pol->action == FG_IDLE_REQUEUE ? SRV_IDLE_EV_REQUEUE : SRV_IDLE_EV_STOP;
}

unsigned srv_idle_step(srv_idle_t *st, const srv_idle_cfg_t *cfg, const srv_idle_policy_t *pol,
                       int max_util, int gpus, int64_t now_ms)
{
    assert(cfg->after_ms > 0 && gpus >= 0 && pol->grace_ms >= 0);
    int64_t last = st->last_ms && st->last_ms <= now_ms ? st->last_ms : now_ms;
    st->last_ms = now_ms;
    if (max_util < 0)
        return 0; /* no sample: nothing known, nothing changes */
    unsigned ev = 0;
    if (max_util >= cfg->util_pct) {
        if (st->idle_since_ms)
            ev |= SRV_IDLE_EV_CLEARED;
        st->low_since_ms = st->idle_since_ms = st->warned_ms = 0;
        return ev;
    }
    if (!st->low_since_ms)
        st->low_since_ms = now_ms;
    if (st->idle_since_ms) {
        st->idle_gpu_ms += (now_ms - last) * gpus;
    } else if (now_ms - st->low_since_ms >= cfg->after_ms) {
        st->idle_since_ms = st->low_since_ms;
        st->idle_gpu_ms += (now_ms - st->low_since_ms) * gpus;
        ev |= SRV_IDLE_EV_IDLE;
    }
    if (st->idle_since_ms)
        ev |= police(st, pol, now_ms);
    return ev;
}
