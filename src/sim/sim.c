/*
 * sim.c - the discrete-event replay of a trace through the scheduler core.
 *
 * Events are trace arrivals (the trace is sorted by submit time, so they are read in
 * order from the array) and attempt completions (a binary min-heap keyed by time, then
 * job). At each event time t, in this order:
 *   1. the fair-share tracker integrates [previous t, t);
 *   2. every completion at t is reported (FG_END_COMPLETED);
 *   3. every arrival at t is submitted;
 *   4. passes run at t: starts are applied (completion pushed at t + remaining work),
 *      preemptions are reported at once (FG_END_PREEMPTED; the job rolls back to its last
 *      checkpoint: it loses lost_gpu_seconds / gpus seconds of progress), and the pass
 *      is repeated while it decides a preemption or sets next_wake to t itself;
 *   5. the next event time is the earliest of the next arrival, the next completion and
 *      the last pass's next_wake.
 * A preempted attempt's completion stays in the heap and is dropped when popped (its
 * attempt number is no longer the running one).
 *
 * Worked example (1 node of 8 GPUs, fifo): A(8 GPUs, 100 s) at 0, B(1 GPU, 10 s) at 5.
 * t=0: A starts, completion at 100. t=5: B submitted, pass: no room. t=100: A completes,
 * pass starts B, completion at 110. t=110: B completes. JCT A=100, B=105; wait B=95.
 */
#include "sim/sim.h"

#include "common/xalloc.h"
#include "sim/fair.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void fg_sim_opts_default(fg_sim_opts_t *o)
{
    memset(o, 0, sizeof *o);
    fg_config_default(&o->cfg);
    o->time_limit_factor = 2.0;
    o->checkpoint_interval_s = 900;
    o->share_interval_s = 3600;
}

int64_t fg_sim_auto_nodes(const fg_trace_t *t, int32_t gpus_per_node)
{
    if (t->njobs == 0 || gpus_per_node < 1)
        return 1;
    double work = 0;
    int32_t gmax = 1;
    for (size_t i = 0; i < t->njobs; i++) {
        work += (double)t->jobs[i].gpus * (double)t->jobs[i].duration;
        if (t->jobs[i].gpus > gmax)
            gmax = t->jobs[i].gpus;
    }
    double span = (double)(t->jobs[t->njobs - 1].submit - t->jobs[0].submit);
    if (span < 86400)
        span = 86400;
    double nodes = ceil(work / span / gpus_per_node);
    double need = ceil((double)gmax / gpus_per_node);
    if (nodes < need)
        nodes = need;
    if (nodes < 1)
        nodes = 1;
    if (nodes > 100000)
        nodes = 100000;
    return (int64_t)nodes;
}

/* ------------------------------------------------------------------ event heap */

typedef struct event {
    int64_t time;
    uint32_t job; /* trace index */
    int32_t attempt;
} event_t;

typedef struct heap {
    event_t *v;
    size_t n, cap;
} heap_t;

static inline int ev_less(const event_t *a, const event_t *b)
{
    return a->time < b->time || (a->time == b->time && a->job < b->job);
}

static void heap_push(heap_t *h, event_t e)
{
    h->v = fg_xgrow(h->v, &h->cap, h->n + 1, sizeof *h->v);
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!ev_less(&e, &h->v[p]))
            break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = e;
}

static event_t heap_pop(heap_t *h)
{
    event_t top = h->v[0];
    event_t last = h->v[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && ev_less(&h->v[c + 1], &h->v[c]))
            c++;
        if (!ev_less(&h->v[c], &last))
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (n)
        h->v[i] = last;
    return top;
}

/* ------------------------------------------------------------------ replay */

/* A job started this many times is taken as a livelock: the replay stops with an error
 * instead of running forever. */
#define FG_SIM_MAX_ATTEMPTS 10000

enum { J_FUTURE = 0, J_PENDING, J_RUNNING, J_DONE, J_SKIPPED };

typedef struct jstate {
    int64_t progress;  /* seconds of work kept (checkpointed) */
    int64_t run_start; /* start of the running attempt */
    int64_t i_submit;  /* tenants-with-demand integral at submit */
    int32_t attempt;   /* running attempt number */
    int32_t state;
} jstate_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int write_series(const char *path, const fg_trace_t *t, const fg_fair_t *f, int64_t interval,
                        char *err, size_t errlen);

int fg_sim_run_recs(const fg_trace_t *t, const fg_sim_opts_t *o, fg_sim_result_t *r,
                    fg_jobrec_t **recs_out, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    if (recs_out)
        *recs_out = NULL;
    const char *msg = NULL;
    if (fg_config_check(&o->cfg, &msg) != FG_OK) {
        snprintf(err, errlen, "bad scheduler configuration: %s", msg ? msg : "?");
        return -1;
    }
    if (o->ngroups == 0) {
        snprintf(err, errlen, "no nodes in the cluster");
        return -1;
    }
    if (!(o->time_limit_factor >= 1.0) || o->checkpoint_interval_s < 0) {
        snprintf(err, errlen, "time limit factor must be >= 1, checkpoint interval >= 0");
        return -1;
    }
    double t_begin = now_s();
    fg_sched_t *s = fg_sched_new(&o->cfg);
    if (!s) {
        snprintf(err, errlen, "fg_sched_new failed");
        return -1;
    }
    /* only the arrivals' estimates are read (right after the passes at their submit
     * time): the core makes those and skips the others */
    fg_sched_set_estimates_on_demand(s, true);
    fg_sched_set_no_reasons(s, true); /* the replay reads no reasons */
    int rc = -1;
    int64_t gpus = 0, nodes = 0;
    int32_t uniform = o->groups[0].gpus;
    for (size_t g = 0; g < o->ngroups; g++) {
        for (int32_t k = 0; k < o->groups[g].count; k++) {
            char name[FG_NAME_MAX];
            snprintf(name, sizeof name, "n%zu-%d", g, k);
            int e = fg_sched_node_add(s, name, o->groups[g].gpus,
                                      o->groups[g].gpu_type[0] ? o->groups[g].gpu_type : "gpu",
                                      FG_NODE_UP);
            if (e < 0) {
                snprintf(err, errlen, "node %s: %s", name, fg_strerror(e));
                fg_sched_free(s);
                return -1;
            }
            gpus += o->groups[g].gpus;
            nodes++;
        }
        if (o->groups[g].gpus != uniform)
            uniform = 0;
    }
    if (gpus <= 0) {
        snprintf(err, errlen, "no GPUs in the cluster");
        fg_sched_free(s);
        return -1;
    }
    int32_t ntenants = (int32_t)t->ntenants;
    for (int32_t u = 0; u < ntenants; u++) {
        double w = o->weights ? o->weights[u] : 1.0;
        int e = fg_sched_account_set(s, t->tenants[u], w, -1);
        if (e >= 0)
            e = fg_sched_member_set(s, t->tenants[u], t->tenants[u], 1.0);
        if (e < 0) {
            snprintf(err, errlen, "tenant %s: %s", t->tenants[u], fg_strerror(e));
            fg_sched_free(s);
            return -1;
        }
    }

    size_t n = t->njobs;
    /* (huge pages where the kernel has them: xalloc.h) */
    fg_jobrec_t *recs = fg_xcalloc_big(n, sizeof *recs);
    jstate_t *js = fg_xcalloc_big(n, sizeof *js);
    heap_t heap = {NULL, 0, 0};
    fg_job_info_t info;
    fg_decisions_t d;
    fg_decisions_init(&d);
    fg_fair_t fair;
    int64_t t0 = n ? t->jobs[0].submit : 0;
    {
        double *w = fg_xmalloc((ntenants ? (size_t)ntenants : 1) * sizeof *w);
        for (int32_t u = 0; u < ntenants; u++)
            w[u] = o->weights ? o->weights[u] : 1.0;
        fg_fair_init(&fair, ntenants, w, (double)gpus, t0);
        free(w);
    }
    if (o->share_series) /* at most ~64M floats of samples in memory */
        fg_fair_sample(&fair, o->share_interval_s > 0 ? o->share_interval_s : 3600,
                       ((size_t)1 << 26) / (ntenants ? (size_t)ntenants : 1));

    size_t next_arr = 0, done = 0, skipped = 0;
    int64_t wake = FG_TIME_NEVER;
    int64_t preemptions = 0, lost = 0, passes = 0;
    double last_progress = t_begin;
    uint64_t iter = 0;
    bool show = o->progress;

    while (done + skipped < n) {
        int64_t tn = FG_TIME_NEVER;
        if (next_arr < n)
            tn = t->jobs[next_arr].submit;
        while (heap.n) {
            const event_t *top = &heap.v[0];
            const jstate_t *j = &js[top->job];
            if (j->state == J_RUNNING && j->attempt == top->attempt)
                break;
            heap_pop(&heap); /* a preempted attempt's completion */
        }
        if (heap.n && heap.v[0].time < tn)
            tn = heap.v[0].time;
        if (wake < tn)
            tn = wake;
        if (tn == FG_TIME_NEVER) {
            snprintf(err, errlen, "replay stuck: %zu jobs never started (core bug?)",
                     n - done - skipped);
            goto out;
        }
        const int64_t now = tn;
        fg_fair_advance(&fair, now);

        /* completions */
        while (heap.n && heap.v[0].time == now) {
            event_t e = heap_pop(&heap);
            jstate_t *j = &js[e.job];
            if (j->state != J_RUNNING || j->attempt != e.attempt)
                continue;
            fg_attempt_t a;
            int er = fg_sched_attempt_ended(s, (fg_job_id_t)e.job + 1, e.attempt, FG_END_COMPLETED,
                                            now, &a);
            if (er != FG_OK) {
                snprintf(err, errlen, "job %u completion at %lld: %s", e.job + 1, (long long)now,
                         fg_strerror(er));
                goto out;
            }
            fg_jobrec_t *rec = &recs[e.job];
            rec->gpu_seconds += a.gpu_seconds;
            rec->end = now;
            rec->ends++;
            int64_t span = now - rec->submit;
            rec->n_avg = span > 0 ? (double)(fair.n_integral - j->i_submit) / (double)span
                                  : (double)fair.with_demand;
            fg_fair_running(&fair, rec->tenant, -rec->gpus);
            fg_fair_demand(&fair, rec->tenant, -rec->gpus);
            j->state = J_DONE;
            done++;
        }

        /* arrivals */
        size_t arr_begin = next_arr;
        while (next_arr < n && t->jobs[next_arr].submit == now) {
            size_t i = next_arr++;
            const fg_trace_job_t *tj = &t->jobs[i];
            fg_jobrec_t *rec = &recs[i];
            rec->submit = tj->submit;
            rec->start = rec->end = rec->estimate = -1;
            rec->duration = tj->duration;
            rec->gpus = tj->gpus;
            rec->tenant = tj->tenant;
            double lim = (double)tj->duration * o->time_limit_factor;
            fg_job_spec_t spec = {
                .id = (fg_job_id_t)i + 1,
                .account = t->tenants[tj->tenant],
                .user = t->tenants[tj->tenant],
                .gpus = tj->gpus,
                .gpu_type = NULL,
                .time_limit_s = lim < 1.0    ? 1
                                : lim > 4e18 ? (int64_t)4e18
                                             : (int64_t)lim,
                .prio = FG_PRIO_NORMAL,
                .max_retries = 0,
                .checkpoint_interval_s = o->checkpoint_interval_s,
                .submit_time = tj->submit,
            };
            /* a job no node of the cluster could ever hold is skipped and counted (the
             * core would accept it and let it wait forever, as nodes may join later) */
            bool fits = fg_sched_check_fit(s, tj->gpus, NULL) == FG_OK;
            int er = fits ? fg_sched_submit(s, &spec, now) : FG_ENOFIT;
            if (er == FG_ENOFIT || er == FG_EQUOTA) {
                js[i].state = J_SKIPPED;
                skipped++;
                continue;
            }
            if (er != FG_OK) {
                snprintf(err, errlen, "%s:%lld: submit refused: %s", t->name, (long long)tj->line,
                         fg_strerror(er));
                goto out;
            }
            js[i].state = J_PENDING;
            js[i].i_submit = fair.n_integral;
            fg_fair_demand(&fair, tj->tenant, tj->gpus);
        }

        /* passes until no preemption */
        for (int round = 0;; round++) {
            int er = fg_sched_pass(s, now, &d);
            passes++;
            if (er != FG_OK) {
                snprintf(err, errlen, "pass at %lld: %s", (long long)now, fg_strerror(er));
                goto out;
            }
            for (size_t k = 0; k < d.nstarts; k++) {
                const fg_start_t *st = &d.starts[k];
                size_t i = (size_t)(st->job - 1);
                if (st->job == 0 || i >= n || js[i].state != J_PENDING) {
                    snprintf(err, errlen, "pass at %lld started job %llu that is not pending",
                             (long long)now, (unsigned long long)st->job);
                    goto out;
                }
                jstate_t *j = &js[i];
                fg_jobrec_t *rec = &recs[i];
                j->state = J_RUNNING;
                j->attempt = st->attempt;
                j->run_start = now;
                if (++rec->attempts > FG_SIM_MAX_ATTEMPTS) {
                    snprintf(err, errlen,
                             "replay aborted at t=%lld: job %zu (%s:%lld) started %d times "
                             "without finishing (preemption livelock in the core?)",
                             (long long)now, i + 1, t->name, (long long)t->jobs[i].line,
                             FG_SIM_MAX_ATTEMPTS);
                    goto out;
                }
                if (rec->start < 0)
                    rec->start = now;
                fg_fair_running(&fair, rec->tenant, rec->gpus);
                heap_push(&heap,
                          (event_t){now + (rec->duration - j->progress), (uint32_t)i, st->attempt});
            }
            for (size_t k = 0; k < d.npreempts; k++) {
                const fg_preempt_t *p = &d.preempts[k];
                size_t i = (size_t)(p->job - 1);
                if (p->job == 0 || i >= n || js[i].state != J_RUNNING) {
                    snprintf(err, errlen, "pass at %lld preempted job %llu that is not running",
                             (long long)now, (unsigned long long)p->job);
                    goto out;
                }
                fg_attempt_t a;
                er = fg_sched_attempt_ended(s, p->job, p->attempt, FG_END_PREEMPTED, now, &a);
                if (er != FG_OK) {
                    snprintf(err, errlen, "job %llu preemption at %lld: %s",
                             (unsigned long long)p->job, (long long)now, fg_strerror(er));
                    goto out;
                }
                jstate_t *j = &js[i];
                fg_jobrec_t *rec = &recs[i];
                int64_t ran = now - j->run_start;
                int64_t lost_s = rec->gpus ? a.lost_gpu_seconds / rec->gpus : 0;
                if (lost_s < 0)
                    lost_s = 0;
                if (lost_s > ran)
                    lost_s = ran;
                j->progress += ran - lost_s;
                rec->gpu_seconds += a.gpu_seconds;
                lost += (int64_t)rec->gpus * lost_s;
                preemptions++;
                j->state = J_PENDING;
                fg_fair_running(&fair, rec->tenant, -rec->gpus);
            }
            /* again at the same time while it preempted (the freed GPUs) or asks for it
             * (next_wake == now: it stopped walking with work left) */
            if ((d.npreempts == 0 && d.next_wake > now) || round >= 1000)
                break;
        }
        wake = d.next_wake > now ? d.next_wake : FG_TIME_NEVER;

        /* the estimate made at submission: started now, or what the passes left */
        for (size_t i = arr_begin; i < next_arr; i++) {
            if (js[i].state == J_RUNNING) {
                recs[i].estimate = now;
            } else if (js[i].state == J_PENDING &&
                       fg_sched_job_info(s, (fg_job_id_t)i + 1, &info) == FG_OK &&
                       info.estimated_start != FG_TIME_NEVER) {
                recs[i].estimate = info.estimated_start;
            }
        }

        if (show && (++iter & 4095) == 0) {
            double w = now_s();
            if (w - last_progress >= 0.5) {
                last_progress = w;
                fprintf(stderr, "\rsim %s: %zu/%zu jobs done, t=%.1f days ",
                        fg_policy_name(o->cfg.policy), done, n, (double)(now - t0) / 86400.0);
                fflush(stderr);
            }
        }
    }

    /* figures */
    fg_fair_flush(&fair);
    /* (it counts the jobs that ended: no copy of their records) */
    fg_metrics_compute(recs, n, gpus, ntenants, fair.entitled, fair.received, r);
    r->replay_seconds = now_s() - t_begin;
    snprintf(r->policy, sizeof r->policy, "%s", fg_policy_name(o->cfg.policy));
    r->trace = t->name;
    r->nodes = nodes;
    r->gpus_per_node = uniform;
    r->rounded_up = t->rounded_up;
    r->skipped_bad = t->skipped_bad;
    r->skipped_too_big = (int64_t)skipped;
    r->preemptions = preemptions;
    r->lost_gpu_seconds = lost;
    r->half_life_s = o->cfg.half_life_s;
    r->backfill = o->cfg.backfill && o->cfg.policy != FG_POLICY_FIFO;
    r->preemption = o->cfg.preemption;
    r->backfill_depth = o->cfg.backfill_depth;
    r->reserve_depth = o->cfg.reserve_depth;
    r->quantum_s = o->cfg.quantum_s;
    r->checkpoint_interval_s = o->checkpoint_interval_s;
    r->time_limit_factor = o->time_limit_factor;
    r->passes = passes;
    if (show)
        fprintf(stderr, "\rsim %s: %zu/%zu jobs done in %.2f s%20s\n",
                fg_policy_name(o->cfg.policy), done, n, r->replay_seconds, "");
    rc = 0;
    if (o->share_series &&
        write_series(o->share_series, t, &fair,
                     o->share_interval_s > 0 ? o->share_interval_s : 3600, err, errlen) < 0)
        rc = -1;
out:
    fg_decisions_free(&d);
    fg_sched_free(s);
    fg_fair_free(&fair);
    free(heap.v);
    fg_xfree_big(js, n, sizeof *js);
    if (recs_out && rc == 0)
        *recs_out = recs;
    else
        fg_sim_recs_free(recs, t);
    return rc;
}

void fg_sim_recs_free(fg_jobrec_t *recs, const fg_trace_t *t)
{
    fg_xfree_big(recs, t->njobs, sizeof *recs);
}

int fg_sim_run(const fg_trace_t *t, const fg_sim_opts_t *o, fg_sim_result_t *r, char *err,
               size_t errlen)
{
    return fg_sim_run_recs(t, o, r, NULL, err, errlen);
}

/* ------------------------------------------------------------------ share series */

#define SERIES_TOP 10

typedef struct tot {
    double v;
    int32_t u;
} tot_t;

static int cmp_tot(const void *a, const void *b)
{
    const tot_t *x = a, *y = b;
    if (x->v != y->v)
        return x->v > y->v ? -1 : 1;
    return (x->u > y->u) - (x->u < y->u);
}

/* Writes the share series: a comment header, a column-name line, then one line per
 * sample: time in days since the first submit, then the GPU share (running GPUs / C) of
 * the SERIES_TOP tenants with the most GPU-time, then "other" (the rest summed). */
static int write_series(const char *path, const fg_trace_t *t, const fg_fair_t *f, int64_t interval,
                        char *err, size_t errlen)
{
    FILE *fp = fopen(path, "w");
    if (!fp) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    int32_t n = f->n;
    tot_t *tot = fg_xmalloc((n ? (size_t)n : 1) * sizeof *tot);
    for (int32_t u = 0; u < n; u++) {
        tot[u].u = u;
        tot[u].v = f->received[u];
    }
    qsort(tot, (size_t)n, sizeof *tot, cmp_tot);
    int32_t top = n < SERIES_TOP ? n : SERIES_TOP;
    fprintf(fp,
            "# GPU share (running GPUs / %.0f) per tenant, every %lld s; top %d tenants by "
            "GPU-time, then the rest\n",
            f->capacity, (long long)interval, top);
    fprintf(fp, "day");
    for (int32_t k = 0; k < top; k++)
        fprintf(fp, " %s", t->tenants[tot[k].u]);
    fprintf(fp, " other\n");
    for (size_t i = 0; i < f->nsamples; i++) {
        const float *row = f->samples + i * (size_t)n;
        fprintf(fp, "%.4f", (double)(int64_t)(i * (size_t)interval) / 86400.0);
        double rest = 0;
        for (int32_t k = 0; k < n; k++) {
            if (k < top)
                fprintf(fp, " %.5f", (double)row[tot[k].u]);
            else
                rest += row[tot[k].u];
        }
        fprintf(fp, " %.5f\n", rest);
    }
    free(tot);
    if (fclose(fp) != 0) {
        snprintf(err, errlen, "%s: write error", path);
        return -1;
    }
    return 0;
}
