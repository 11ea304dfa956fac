/*
 * sched_idle.c - idle GPUs on the scheduler thread: once a second each running job's
 * GPU samples (the agents' heartbeats, srv_gpu_t) go through the pure decision of
 * idle.c, and what it decides becomes events (IDLE, IDLE_WARNING, IDLE_REQUEUED,
 * IDLE_STOPPED, IDLE_CLEARED), a requeue (stopped as a preemption is: the agents end
 * it "preempted" and the core puts it back to PENDING) or a stop (as a cancel: it ends
 * CANCELLED). Also the job's idle fields in its JSON, the account's policy fields, and
 * the metrics. docs/idle.md.
 *
 * Example: --idle-after 2s, account policy stop with idle_grace_s 3; a 1-GPU job's
 * knob says 0 %: about 2 s after its start it gets IDLE and IDLE_WARNING events, 3 s
 * later IDLE_STOPPED and a stop, and its agent's report ends it CANCELLED; its
 * idle_gpu_s is then about 5.
 *
 * A sample counts for a rank only when its node's last heartbeat came after the rank
 * started (an earlier one sampled the GPU while it was free).
 */
#include "server/sched_int.h"

#include "common/clock.h"
#include "server/valid.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IDLE_TICK_MS 1000
#define IDLE_SAVE_MS 60000 /* an idle job's idle_gpu_s is made durable this often */

static int64_t g_last_tick_ms;              /* scheduler thread only */
static _Atomic int64_t g_idle_gpu_ms_total; /* since this controller started (metrics) */
static _Atomic int64_t g_jobs_idle;         /* running jobs flagged idle, at the last tick */

/* The nodes by name for one tick (a hash of the name; a collision falls back to the
 * list). mu held. */
static srv_node_t *node_of(srv_t *s, const srv_map_t *by_name, const char *name)
{
    srv_node_t *n = srv_map_get(by_name, srv_hash_bytes(name, strlen(name)));
    return n && !strcmp(n->name, name) ? n : srv_node_by_name(s, name);
}

/* What j's GPUs show now: the highest and mean utilization and the memory in use over
 * the GPUs with a fresh sample (-1 each when none has one). mu held. */
static void job_sample(srv_t *s, const srv_map_t *nodes, const srv_job_t *j, int *max_util,
                       int *mean_util, int64_t *mem)
{
    int n = 0, mx = -1;
    int64_t sum = 0, msum = 0;
    bool has_mem = false;
    for (int k = 0; k < j->nranks; k++) {
        const srv_rank_t *rk = &j->ranks[k];
        srv_node_t *nd = rk->ended || !rk->started ? NULL : node_of(s, nodes, rk->node);
        if (!nd || nd->last_heartbeat_ms <= rk->start_ms)
            continue;
        for (int g = 0; g < nd->ngpus && g < 64; g++) {
            const srv_gpu_t *G = &nd->gpus[g];
            if (!(rk->gpu_mask >> g & 1) || G->util_pct < 0)
                continue;
            int u = G->util_pct > 100 ? 100 : G->util_pct;
            mx = u > mx ? u : mx;
            sum += u;
            n++;
            if (G->mem_used_mb >= 0) {
                msum += G->mem_used_mb;
                has_mem = true;
            }
        }
    }
    *max_util = mx;
    *mean_util = n ? (int)((sum + n / 2) / n) : -1;
    *mem = has_mem ? msum : -1;
}

/* Queues j's event `to` with a sentence of why. mu held. */
static void idle_event(sctx_t *c, const srv_job_t *j, const char *to, const char *why)
{
    srv__add_event(c, "job", (uint64_t)j->r.id, "RUNNING", to, why,
                   j->nranks ? j->ranks[0].node : NULL);
}

/* Turns the decision's events for j into events and actions. mu held. */
static void apply(sctx_t *c, srv_job_t *j, unsigned ev, const srv_idle_policy_t *pol, int max_util)
{
    int thr = c->s->cfg.idle_util_pct;
    char why[240];
    int64_t idle_s = (srv_now_ms() - j->idle.idle_since_ms) / 1000;
    if (ev & SRV_IDLE_EV_CLEARED) {
        snprintf(why, sizeof why, "GPU utilization back to %d %% (threshold %d %%)", max_util, thr);
        idle_event(c, j, "IDLE_CLEARED", why);
    }
    if (ev & SRV_IDLE_EV_IDLE) {
        snprintf(why, sizeof why, "every GPU below %d %% for %llds (highest %d %%)", thr,
                 (long long)idle_s, max_util);
        idle_event(c, j, "IDLE", why);
    }
    if (ev & SRV_IDLE_EV_WARNING) {
        if (pol->action == FG_IDLE_WARN)
            snprintf(why, sizeof why, "idle for %llds; account %s warns about idle jobs",
                     (long long)idle_s, j->r.account);
        else
            snprintf(why, sizeof why,
                     "idle for %llds; account %s policy: %s in %llds unless its GPUs get busy",
                     (long long)idle_s, j->r.account,
                     pol->action == FG_IDLE_STOP ? "stop" : "requeue",
                     (long long)(pol->grace_ms / 1000));
        idle_event(c, j, "IDLE_WARNING", why);
    }
    if (ev & (SRV_IDLE_EV_REQUEUE | SRV_IDLE_EV_STOP)) {
        bool stop = ev & SRV_IDLE_EV_STOP;
        snprintf(why, sizeof why, "idle for %llds: %s by the idle policy of account %s",
                 (long long)idle_s, stop ? "stopped" : "requeued", j->r.account);
        idle_event(c, j, stop ? "IDLE_STOPPED" : "IDLE_REQUEUED", why);
        j->stop_sent = true;
        if (stop) {
            j->r.cancel_requested = true;
            srv__stop_ranks(c, j, "cancel", -1); /* ends CANCELLED */
        } else {
            j->idle.requeued = true;
            srv__stop_ranks(c, j, "preempt", -1); /* back to PENDING, as a preemption */
        }
    }
    if (ev)
        srv__mark_dirty(c, j);
}

/* Moves j's whole idle GPU-seconds into its record; durable at the next change, or
 * now when IDLE_SAVE_MS passed. mu held. */
static void account_idle(sctx_t *c, srv_job_t *j, int64_t now_ms)
{
    int64_t whole = j->idle.idle_gpu_ms / 1000;
    if (whole <= 0)
        return;
    j->idle.idle_gpu_ms -= whole * 1000;
    j->r.idle_gpu_s += whole;
    atomic_fetch_add(&g_idle_gpu_ms_total, whole * 1000);
    if (now_ms - j->idle.saved_ms >= IDLE_SAVE_MS) {
        j->idle.saved_ms = now_ms;
        srv__mark_dirty(c, j);
    }
}

void srv__idle_tick(sctx_t *c)
{
    srv_t *s = c->s;
    int64_t now_ms = srv_now_ms();
    if (now_ms - g_last_tick_ms < IDLE_TICK_MS)
        return;
    g_last_tick_ms = now_ms;
    srv_idle_cfg_t cfg = {s->cfg.idle_util_pct, s->cfg.idle_after_s * 1000};
    int64_t nidle = 0;
    pthread_mutex_lock(&s->mu);
    srv_map_t nodes = {0};
    for (size_t i = 0; i < s->nnodes; i++)
        srv_map_put(&nodes, srv_hash_bytes(s->nodes[i]->name, strlen(s->nodes[i]->name)),
                    s->nodes[i]);
    bool policies = false; /* any account with one (else no account lookups per job) */
    for (size_t i = 0; i < s->naccounts && !policies; i++)
        policies = s->accounts[i]->r.idle_action != FG_IDLE_NONE;
    size_t n;
    srv_job_t **run = srv__running_jobs(s, NULL, &n);
    for (size_t i = 0; i < n; i++) {
        srv_job_t *j = run[i];
        if (j->idle.attempt != j->r.attempts)
            j->idle = (srv_idle_t){.attempt = j->r.attempts, .saved_ms = now_ms};
        int max_util, mean_util;
        job_sample(s, &nodes, j, &max_util, &mean_util, &j->idle.mem_used_mb);
        j->idle.util_pct = mean_util;
        srv_account_t *a = policies ? srv_account_by_name(s, j->r.account) : NULL;
        srv_idle_policy_t pol = {a ? a->r.idle_action : FG_IDLE_NONE,
                                 a && a->r.idle_grace_s > 0 ? a->r.idle_grace_s * 1000 : 0};
        if (j->stop_sent || j->r.cancel_requested) /* stopping: flags stay, no action */
            pol.action = FG_IDLE_NONE;
        unsigned ev = srv_idle_step(&j->idle, &cfg, &pol, max_util, j->r.gpus, now_ms);
        apply(c, j, ev, &pol, max_util);
        account_idle(c, j, now_ms);
        nidle += j->idle.idle_since_ms != 0;
    }
    free(run);
    srv_map_free(&nodes);
    pthread_mutex_unlock(&s->mu);
    atomic_store(&g_jobs_idle, nidle);
}

bool srv_idle_requeued(const srv_job_t *j)
{
    return j->idle.requeued && j->idle.attempt == j->cur.attempt;
}

/* ------------------------------------------------------------------ what it shows */

void srv_idle_render(const srv_job_t *j, srv_buf_t *b)
{
    bool running = j->state == FG_JOB_RUNNING && j->idle.attempt == j->r.attempts;
    const srv_idle_t *st = &j->idle;
    srv_buf_puts(b, ",\"gpu_util_pct\":");
    if (running && st->util_pct >= 0)
        srv_buf_i64(b, st->util_pct);
    else
        srv_buf_puts(b, "null");
    srv_buf_puts(b, ",\"gpu_mem_used_mb\":");
    if (running && st->mem_used_mb >= 0)
        srv_buf_i64(b, st->mem_used_mb);
    else
        srv_buf_puts(b, "null");
    bool idle = running && st->idle_since_ms;
    srv_buf_puts(b, idle ? ",\"idle\":true,\"idle_since\":" : ",\"idle\":false,\"idle_since\":");
    if (idle)
        srv_buf_i64(b, st->idle_since_ms / 1000);
    else
        srv_buf_puts(b, "null");
    srv_buf_puts(b, ",\"idle_gpu_s\":");
    srv_buf_i64(b, j->r.idle_gpu_s);
}

void srv_idle_account_json(const fg_store_account_t *a, json_t *o)
{
    json_object_set_new(o, "idle_action", json_string(srv_idle_action_name(a->idle_action)));
    json_object_set_new(o, "idle_grace_s", json_integer(a->idle_grace_s));
}

bool srv_idle_account_fields(srv_req_t *r, json_t *body, fg_store_account_t *a)
{
    const char *act = NULL;
    long long grace = 0;
    bool has;
    if (!v_string(r, body, "idle_action", false, 16, &act) ||
        !v_int(r, body, "idle_grace_s", false, 0, 30LL * 86400, &grace, &has))
        return false;
    int ai = act ? srv_idle_action_parse(act) : a->idle_action;
    if (ai < 0) {
        srv_reply_error(r, 400, "invalid_argument", "idle_action",
                        "idle_action must be none, warn, requeue or stop");
        return false;
    }
    a->idle_action = ai;
    if (has)
        a->idle_grace_s = grace;
    return true;
}

void srv_idle_metrics(srv_t *s, srv_buf_t *b)
{
    char line[256];
    srv_buf_puts(b,
                 "# HELP fairgpu_gpu_utilization_percent GPU utilization at the last heartbeat.\n"
                 "# TYPE fairgpu_gpu_utilization_percent gauge\n");
    srv_buf_t mem = {0};
    srv_buf_puts(&mem, "# HELP fairgpu_gpu_memory_used_bytes GPU memory in use at the last "
                       "heartbeat.\n# TYPE fairgpu_gpu_memory_used_bytes gauge\n");
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->nnodes; i++) {
        const srv_node_t *n = s->nodes[i];
        for (int g = 0; g < n->ngpus; g++) {
            const srv_gpu_t *G = &n->gpus[g];
            if (G->util_pct >= 0) {
                snprintf(line, sizeof line,
                         "fairgpu_gpu_utilization_percent{node=\"%s\",gpu=\"%d\"} %d\n", n->name,
                         G->index, G->util_pct);
                srv_buf_puts(b, line);
            }
            if (G->mem_used_mb >= 0) {
                snprintf(line, sizeof line,
                         "fairgpu_gpu_memory_used_bytes{node=\"%s\",gpu=\"%d\"} %lld\n", n->name,
                         G->index, (long long)G->mem_used_mb * 1048576);
                srv_buf_puts(&mem, line);
            }
        }
    }
    pthread_mutex_unlock(&s->mu);
    srv_buf_put(b, mem.p ? mem.p : "", mem.n);
    free(mem.p);
    snprintf(line, sizeof line,
             "# HELP fairgpu_jobs_idle Running jobs flagged idle.\n# TYPE fairgpu_jobs_idle "
             "gauge\nfairgpu_jobs_idle %lld\n",
             (long long)atomic_load(&g_jobs_idle));
    srv_buf_puts(b, line);
    snprintf(line, sizeof line,
             "# HELP fairgpu_idle_gpu_seconds_total GPU-seconds spent idle while allocated "
             "(since this controller started).\n# TYPE fairgpu_idle_gpu_seconds_total "
             "counter\nfairgpu_idle_gpu_seconds_total %lld\n",
             (long long)(atomic_load(&g_idle_gpu_ms_total) / 1000));
    srv_buf_puts(b, line);
}
