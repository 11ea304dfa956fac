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
 *
 * The cost of a preemption. A preempted job loses its work since the last checkpoint,
 * and every later attempt (a resume) first spends restart_overhead_s (S) with its GPUs
 * held and no progress (relaunch, reload the checkpoint, warm up) before it runs from
 * its last checkpoint: a resume started at t completes at t + S + (duration - progress).
 * Checkpoints are taken every checkpoint_interval_s (K) of productive time, counted
 * from the end of the overhead. So a resumed attempt preempted after `ran` seconds has
 * spent over = min(ran, S) in the overhead and productive = ran - over seconds working;
 * it keeps productive - productive mod K (K = 0: nothing) and loses the rest. The core
 * does not know about the overhead: its lost_gpu_seconds is the attempt's whole run
 * time mod K, so the replay computes kept and lost itself from the productive time
 * (the same figures as the core's when S = 0, or on a first attempt). The overhead
 * counts as GPU-time run (the core charges it as such, and utilization counts it, as
 * it counts lost work) and is reported as restart_gpu_seconds, the part of an overhead
 * cut short by another preemption included. The core's time limit of the job is not
 * extended by S (it is the user's request): a resume of a job shorter than S may run
 * past it, which the core tolerates (the plan takes such GPUs as free at once).
 *
 * Worked example (1 node of 8 GPUs, wfq, K = 1000, S = 120): A's job a (8 GPUs,
 * 10000 s) runs from 0; B's job b (1 GPU, 50 s) arrives at 100 and preempts a at the
 * quantum, 3600. a keeps 3000 s and loses 600 (8 x 600 GPU-seconds); b runs 3600-3650;
 * a resumes at 3650: 120 s of overhead (8 x 120 = 960 restart GPU-seconds), then 7000 s
 * of work: it completes at 3650 + 120 + 7000 = 10770 (10650 with S = 0). GPU-time run:
 * 8 x 3600 + 50 + 8 x 7120 = 85810; preempt_cost_frac = (4800 + 960) / 85810 = 0.0671.
 */
#include "sim/sim.h"

#include "common/clock.h"
#include "common/xalloc.h"
#include "sim/fair.h"
#include "sim/histest.h"
#include "sim/tlimit.h"

#include <assert.h>
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
    o->time_limit_model = FG_TLIMIT_FACTOR;
    o->time_limit_seed = 1;
    o->checkpoint_interval_s = 900;
    o->restart_overhead_s = 120;
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
    int64_t run_start; /* start of the running attempt (its overhead included) */
    int64_t i_submit;  /* tenants-with-demand integral at submit */
    int32_t attempt;   /* running attempt number */
    int32_t state;
} jstate_t;

static double now_s(void)
{
    return (double)fg_clock_mono_us() / 1e6;
}

static int write_series(const char *path, const fg_trace_t *t, const fg_fair_t *f, int64_t interval,
                        char *err, size_t errlen);

/* One replay: the trace, the core it drives, and what it keeps per job. */
typedef struct replay {
    const fg_trace_t *t;
    const fg_sim_opts_t *o;
    fg_sched_t *s;
    size_t n;          /* trace jobs */
    fg_jobrec_t *recs; /* per job: what the metrics read */
    jstate_t *js;      /* per job: the replay's own state */
    heap_t heap;       /* completions */
    fg_decisions_t d;
    fg_fair_t fair;
    int64_t gpus, nodes, t0;
    bool quotas_done; /* opts.quotas set */
    int32_t uniform;  /* GPUs per node when all nodes have as many, else 0 */
    size_t next_arr, done, skipped;
    int64_t preemptions, lost, restart, passes; /* lost, restart: GPU-seconds */
    /* --estimates history: the estimate, and per job its limit and estimates */
    fg_histest_t hist;
    int64_t *limit;
    fg_est_rec_t *est;
    char *err;
    size_t errlen;
} replay_t;

/* Checks the options; 0 or -1 with err set. */
static int options_check(const fg_sim_opts_t *o, char *err, size_t errlen)
{
    const char *msg = NULL;
    if (fg_config_check(&o->cfg, &msg) != FG_OK) {
        snprintf(err, errlen, "bad scheduler configuration: %s", msg ? msg : "?");
        return -1;
    }
    if (o->ngroups == 0) {
        snprintf(err, errlen, "no nodes in the cluster");
        return -1;
    }
    if (!(o->time_limit_factor >= 1.0) || o->checkpoint_interval_s < 0 ||
        o->restart_overhead_s < 0) {
        snprintf(err, errlen,
                 "time limit factor must be >= 1, checkpoint interval and restart overhead >= 0");
        return -1;
    }
    return 0;
}

/* Adds the cluster's nodes (n<group>-<k>) and the tenants (one account of one member
 * each) to the core. */
static int cluster_add(replay_t *p)
{
    const fg_sim_opts_t *o = p->o;
    p->uniform = o->groups[0].gpus;
    for (size_t g = 0; g < o->ngroups; g++) {
        for (int32_t k = 0; k < o->groups[g].count; k++) {
            char name[FG_NAME_MAX];
            snprintf(name, sizeof name, "n%zu-%d", g, k);
            int e = fg_sched_node_add(p->s, name, o->groups[g].gpus,
                                      o->groups[g].gpu_type[0] ? o->groups[g].gpu_type : "gpu",
                                      FG_NODE_UP);
            if (e < 0) {
                snprintf(p->err, p->errlen, "node %s: %s", name, fg_strerror(e));
                return -1;
            }
            p->gpus += o->groups[g].gpus;
            p->nodes++;
        }
        if (o->groups[g].gpus != p->uniform)
            p->uniform = 0;
    }
    if (p->gpus <= 0) {
        snprintf(p->err, p->errlen, "no GPUs in the cluster");
        return -1;
    }
    for (size_t u = 0; u < p->t->ntenants; u++) {
        const char *name = p->t->tenants[u];
        int e = fg_sched_account_set(p->s, name, o->weights ? o->weights[u] : 1.0, -1);
        if (e >= 0)
            e = fg_sched_member_set(p->s, name, name, 1.0);
        if (e >= 0 && o->usage)
            e = fg_sched_account_set_usage(p->s, fg_sched_account_find(p->s, name), o->usage[u],
                                           p->t0);
        if (e < 0) {
            snprintf(p->err, p->errlen, "tenant %s: %s", name, fg_strerror(e));
            return -1;
        }
    }
    return 0;
}

/* The fair-share tracker, weighted as the accounts, on the cluster's GPUs. */
static void fair_setup(replay_t *p)
{
    const int32_t ntenants = (int32_t)p->t->ntenants;
    double *w = fg_xmalloc((ntenants ? (size_t)ntenants : 1) * sizeof *w);
    for (int32_t u = 0; u < ntenants; u++)
        w[u] = p->o->weights ? p->o->weights[u] : 1.0;
    fg_fair_init(&p->fair, ntenants, w, (double)p->gpus, p->t0);
    free(w);
    if (p->o->share_series) /* at most ~64M floats of samples in memory */
        fg_fair_sample(&p->fair, p->o->share_interval_s > 0 ? p->o->share_interval_s : 3600,
                       ((size_t)1 << 26) / (ntenants ? (size_t)ntenants : 1));
}

/* The next event time: the next arrival, the next live completion, or the core's wake;
 * FG_TIME_NEVER when none is left. Drops the completions of preempted attempts. */
static int64_t next_event(replay_t *p, int64_t wake)
{
    int64_t tn = p->next_arr < p->n ? p->t->jobs[p->next_arr].submit : FG_TIME_NEVER;
    while (p->heap.n) {
        const event_t *top = &p->heap.v[0];
        const jstate_t *j = &p->js[top->job];
        if (j->state == J_RUNNING && j->attempt == top->attempt)
            break;
        heap_pop(&p->heap); /* a preempted attempt's completion */
    }
    if (p->heap.n && p->heap.v[0].time < tn)
        tn = p->heap.v[0].time;
    return wake < tn ? wake : tn;
}

/* The restart overhead of job i's running attempt: S for a resume (an attempt after
 * the first: the replay starts a job again only after a preemption), else 0. */
static inline int64_t attempt_overhead(const replay_t *p, size_t i)
{
    return p->recs[i].attempts > 1 ? p->o->restart_overhead_s : 0;
}

/* Reports every completion at `now` to the core; a resume's overhead is counted. */
static int complete_at(replay_t *p, int64_t now)
{
    while (p->heap.n && p->heap.v[0].time == now) {
        event_t e = heap_pop(&p->heap);
        jstate_t *j = &p->js[e.job];
        if (j->state != J_RUNNING || j->attempt != e.attempt)
            continue;
        fg_attempt_t a;
        int er = fg_sched_attempt_ended(p->s, (fg_job_id_t)e.job + 1, e.attempt, FG_END_COMPLETED,
                                        now, &a);
        if (er != FG_OK) {
            snprintf(p->err, p->errlen, "job %u completion at %lld: %s", e.job + 1, (long long)now,
                     fg_strerror(er));
            return -1;
        }
        fg_jobrec_t *rec = &p->recs[e.job];
        assert(now - j->run_start >= attempt_overhead(p, e.job));
        p->restart += (int64_t)rec->gpus * attempt_overhead(p, e.job); /* all of it ran */
        rec->gpu_seconds += a.gpu_seconds;
        rec->end = now;
        rec->ends++;
        int64_t span = now - rec->submit;
        rec->n_avg = span > 0 ? (double)(p->fair.n_integral - j->i_submit) / (double)span
                              : (double)p->fair.with_demand;
        fg_fair_running(&p->fair, rec->tenant, -rec->gpus);
        fg_fair_demand(&p->fair, rec->tenant, -rec->gpus);
        if (p->est) { /* its whole work ran: duration of limit */
            const char *name = p->t->tenants[rec->tenant];
            fg_histest_record(&p->hist, name, name, p->limit[e.job], rec->duration);
        }
        j->state = J_DONE;
        p->done++;
    }
    return 0;
}

/* The time limit of trace job i: its own, or duration x factor, or the rounded model's. */
static int64_t job_limit(const replay_t *p, size_t i)
{
    const fg_trace_job_t *tj = &p->t->jobs[i];
    if (tj->limit_s > 0) /* the job's own (what-if snapshots) */
        return tj->limit_s;
    if (p->o->time_limit_model == FG_TLIMIT_ROUNDED)
        return fg_tlimit_rounded(p->o->time_limit_seed, tj->tenant, (uint64_t)i, tj->duration);
    const double lim = (double)tj->duration * p->o->time_limit_factor;
    return lim < 1.0 ? 1 : lim > 4e18 ? (int64_t)4e18 : (int64_t)lim;
}

/* The core's spec of trace job i: its time limit (job_limit), checkpoints as set. */
static fg_job_spec_t job_spec(const replay_t *p, size_t i)
{
    const fg_trace_job_t *tj = &p->t->jobs[i];
    return (fg_job_spec_t){
        .id = (fg_job_id_t)i + 1,
        .account = p->t->tenants[tj->tenant],
        .user = p->t->tenants[tj->tenant],
        .gpus = tj->gpus,
        .gpu_type = NULL,
        .time_limit_s = job_limit(p, i),
        .prio = FG_PRIO_NORMAL,
        .max_retries = 0,
        .checkpoint_interval_s = p->o->checkpoint_interval_s,
        .submit_time = tj->submit,
    };
}

/* Submits every arrival at `now`. A job no node of the cluster could ever hold is
 * skipped and counted (the core would accept it and let it wait forever, as nodes may
 * join later). */
static int arrive_at(replay_t *p, int64_t now)
{
    while (p->next_arr < p->n && p->t->jobs[p->next_arr].submit == now) {
        size_t i = p->next_arr++;
        const fg_trace_job_t *tj = &p->t->jobs[i];
        fg_jobrec_t *rec = &p->recs[i];
        rec->submit = tj->submit;
        rec->start = rec->end = rec->estimate = -1;
        rec->duration = tj->duration;
        rec->gpus = tj->gpus;
        rec->tenant = tj->tenant;
        fg_job_spec_t spec = job_spec(p, i);
        if (p->est) {
            p->limit[i] = spec.time_limit_s;
            p->est[i] = (fg_est_rec_t){.submit = tj->submit,
                                       .start = -1,
                                       .gpus = tj->gpus,
                                       .limit_est = -1,
                                       .hist = {-1, -1, -1}};
        }
        bool fits = fg_sched_check_fit(p->s, tj->gpus, NULL) == FG_OK;
        int er = fits ? fg_sched_submit(p->s, &spec, now) : FG_ENOFIT;
        if (er == FG_ENOFIT || er == FG_EQUOTA) {
            p->js[i].state = J_SKIPPED;
            p->skipped++;
            continue;
        }
        if (er != FG_OK) {
            snprintf(p->err, p->errlen, "%s:%lld: submit refused: %s", p->t->name,
                     (long long)tj->line, fg_strerror(er));
            return -1;
        }
        p->js[i].state = J_PENDING;
        p->js[i].i_submit = p->fair.n_integral;
        fg_fair_demand(&p->fair, tj->tenant, tj->gpus);
    }
    return 0;
}

/* Applies a pass's start: the job runs its restart overhead (a resume), then until its
 * remaining work is done. */
static int apply_start(replay_t *p, const fg_start_t *st, int64_t now)
{
    size_t i = (size_t)(st->job - 1);
    if (st->job == 0 || i >= p->n || p->js[i].state != J_PENDING) {
        snprintf(p->err, p->errlen, "pass at %lld started job %llu that is not pending",
                 (long long)now, (unsigned long long)st->job);
        return -1;
    }
    jstate_t *j = &p->js[i];
    fg_jobrec_t *rec = &p->recs[i];
    j->state = J_RUNNING;
    j->attempt = st->attempt;
    j->run_start = now;
    if (++rec->attempts > FG_SIM_MAX_ATTEMPTS) {
        snprintf(p->err, p->errlen,
                 "replay aborted at t=%lld: job %zu (%s:%lld) started %d times "
                 "without finishing (preemption livelock in the core?)",
                 (long long)now, i + 1, p->t->name, (long long)p->t->jobs[i].line,
                 FG_SIM_MAX_ATTEMPTS);
        return -1;
    }
    if (rec->start < 0)
        rec->start = now;
    fg_fair_running(&p->fair, rec->tenant, rec->gpus);
    assert(j->progress >= 0 && j->progress < rec->duration);
    heap_push(&p->heap, (event_t){now + attempt_overhead(p, i) + (rec->duration - j->progress),
                                  (uint32_t)i, st->attempt});
    return 0;
}

/* Applies a pass's preemption at once: the job keeps its productive time (past a
 * resume's overhead) up to its last checkpoint, and waits again (see the banner). */
static int apply_preempt(replay_t *p, const fg_preempt_t *pr, int64_t now)
{
    size_t i = (size_t)(pr->job - 1);
    if (pr->job == 0 || i >= p->n || p->js[i].state != J_RUNNING) {
        snprintf(p->err, p->errlen, "pass at %lld preempted job %llu that is not running",
                 (long long)now, (unsigned long long)pr->job);
        return -1;
    }
    fg_attempt_t a;
    int er = fg_sched_attempt_ended(p->s, pr->job, pr->attempt, FG_END_PREEMPTED, now, &a);
    if (er != FG_OK) {
        snprintf(p->err, p->errlen, "job %llu preemption at %lld: %s", (unsigned long long)pr->job,
                 (long long)now, fg_strerror(er));
        return -1;
    }
    jstate_t *j = &p->js[i];
    fg_jobrec_t *rec = &p->recs[i];
    const int64_t ran = now - j->run_start;
    int64_t over = attempt_overhead(p, i);
    if (over > ran)
        over = ran; /* preempted during its overhead */
    const int64_t productive = ran - over, k = p->o->checkpoint_interval_s;
    const int64_t lost_s = k > 0 ? productive % k : productive;
    /* the core's lost work is this without an overhead (its run time mod K) */
    assert(over > 0 || (int64_t)rec->gpus * lost_s == a.lost_gpu_seconds);
    j->progress += productive - lost_s;
    assert(j->progress < rec->duration);
    rec->gpu_seconds += a.gpu_seconds;
    p->lost += (int64_t)rec->gpus * lost_s;
    p->restart += (int64_t)rec->gpus * over;
    p->preemptions++;
    j->state = J_PENDING;
    fg_fair_running(&p->fair, rec->tenant, -rec->gpus);
    return 0;
}

/* Passes at `now` until one decides no preemption and does not ask to run again at
 * `now` (next_wake == now: it stopped walking with work left); *wake: the core's next. */
static int passes_at(replay_t *p, int64_t now, int64_t *wake)
{
    fg_decisions_t *d = &p->d;
    for (int round = 0;; round++) {
        int er = fg_sched_pass(p->s, now, d);
        p->passes++;
        if (er != FG_OK) {
            snprintf(p->err, p->errlen, "pass at %lld: %s", (long long)now, fg_strerror(er));
            return -1;
        }
        for (size_t k = 0; k < d->nstarts; k++)
            if (apply_start(p, &d->starts[k], now) < 0)
                return -1;
        for (size_t k = 0; k < d->npreempts; k++)
            if (apply_preempt(p, &d->preempts[k], now) < 0)
                return -1;
        if ((d->npreempts == 0 && d->next_wake > now) || round >= 1000)
            break;
    }
    *wake = d->next_wake > now ? d->next_wake : FG_TIME_NEVER;
    return 0;
}

/* What the history estimate reads of live job id (histest.h): a resumed job has kept
 * its checkpointed progress, a running one also this attempt's productive time. */
static void history_job(void *ctx, fg_job_id_t id, fg_time_t now, fg_est_job_t *out)
{
    const replay_t *p = ctx;
    const size_t i = (size_t)(id - 1);
    assert(id >= 1 && i < p->n);
    const jstate_t *j = &p->js[i];
    const char *name = p->t->tenants[p->recs[i].tenant];
    int64_t ran = j->progress, attempt = 0;
    if (j->state == J_RUNNING) {
        const int64_t productive = now - j->run_start - attempt_overhead(p, i);
        ran += productive > 0 ? productive : 0;
        attempt = now - j->run_start;
    }
    *out = (fg_est_job_t){.account = name,
                          .user = name,
                          .gpus = p->recs[i].gpus,
                          .limit_s = p->limit[i],
                          .ran_s = ran,
                          .served_s = ran,
                          .not_before = 0,
                          .attempt_s = attempt,
                          .checkpoint_s = p->o->checkpoint_interval_s};
}

/* The history estimates of the arrivals of [from, to) that wait, and the core's. */
static void record_history_estimates(replay_t *p, size_t from, size_t to, int64_t now)
{
    fg_job_id_t ids[64];
    int64_t out[64][3];
    size_t n = 0;
    for (size_t i = from; i <= to; i++) {
        if (n == 64 || (i == to && n > 0)) { /* a batch of waiting arrivals */
            fg_histest_estimate(&p->hist, p->s, now, ids, n, history_job, p, out);
            for (size_t k = 0; k < n; k++)
                if (out[k][1] != FG_TIME_NEVER)
                    memcpy(p->est[ids[k] - 1].hist, out[k], sizeof out[k]);
            n = 0;
        }
        if (i == to || p->js[i].state != J_PENDING)
            continue;
        p->est[i].waited = true;
        p->est[i].limit_est = p->recs[i].estimate;
        ids[n++] = (fg_job_id_t)i + 1;
    }
}

/* The estimate each arrival of [from, to) got at its submission: now if it started,
 * else what the passes left (on demand: the core makes only these). */
static void record_estimates(replay_t *p, size_t from, size_t to, int64_t now)
{
    fg_job_info_t info;
    for (size_t i = from; i < to; i++) {
        if (p->js[i].state == J_RUNNING)
            p->recs[i].estimate = now;
        else if (p->js[i].state == J_PENDING &&
                 fg_sched_job_info(p->s, (fg_job_id_t)i + 1, &info) == FG_OK &&
                 info.estimated_start != FG_TIME_NEVER)
            p->recs[i].estimate = info.estimated_start;
    }
    if (p->est)
        record_history_estimates(p, from, to, now);
}

/* Puts the tenants' quotas (opts.quotas) in force. */
static int quotas_set(replay_t *p)
{
    for (size_t u = 0; p->o->quotas && u < p->t->ntenants; u++) {
        const char *name = p->t->tenants[u];
        double w = p->o->weights ? p->o->weights[u] : 1.0;
        int e = fg_sched_account_set(p->s, name, w, p->o->quotas[u] < 0 ? -1 : p->o->quotas[u]);
        if (e < 0) {
            snprintf(p->err, p->errlen, "tenant %s quota: %s", name, fg_strerror(e));
            return -1;
        }
    }
    return 0;
}

/* The event loop (see the banner): until every job is done or skipped. */
static int replay_events(replay_t *p, double t_begin)
{
    int64_t wake = FG_TIME_NEVER;
    double last_progress = t_begin;
    uint64_t iter = 0;
    while (p->done + p->skipped < p->n) {
        const int64_t now = next_event(p, wake);
        if (now == FG_TIME_NEVER && p->o->stuck_ends)
            break; /* the jobs left keep ends == 0: never completed */
        if (now == FG_TIME_NEVER) {
            snprintf(p->err, p->errlen, "replay stuck: %zu jobs never started (core bug?)",
                     p->n - p->done - p->skipped);
            return -1;
        }
        fg_fair_advance(&p->fair, now);
        if (complete_at(p, now) < 0)
            return -1;
        if (!p->quotas_done && now >= p->o->quotas_from) {
            p->quotas_done = true;
            if (quotas_set(p) < 0)
                return -1;
        }
        const size_t arr_begin = p->next_arr;
        if (arrive_at(p, now) < 0 || passes_at(p, now, &wake) < 0)
            return -1;
        record_estimates(p, arr_begin, p->next_arr, now);
        if (p->o->progress && (++iter & 4095) == 0 && now_s() - last_progress >= 0.5) {
            last_progress = now_s();
            fprintf(stderr, "\rsim %s: %zu/%zu jobs done, t=%.1f days ",
                    fg_policy_name(p->o->cfg.policy), p->done, p->n,
                    (double)(now - p->t0) / 86400.0);
            fflush(stderr);
        }
    }
    return 0;
}

/* The figures of a finished replay. */
static void result_fill(replay_t *p, fg_sim_result_t *r, double t_begin)
{
    const fg_sim_opts_t *o = p->o;
    fg_fair_flush(&p->fair);
    fg_metrics_compute(p->recs, p->n, p->gpus, (int32_t)p->t->ntenants, p->fair.entitled,
                       p->fair.received, r);
    r->replay_seconds = now_s() - t_begin;
    snprintf(r->policy, sizeof r->policy, "%s", fg_policy_name(o->cfg.policy));
    r->trace = p->t->name;
    r->nodes = p->nodes;
    r->gpus_per_node = p->uniform;
    r->rounded_up = p->t->rounded_up;
    r->skipped_bad = p->t->skipped_bad;
    r->skipped_too_big = (int64_t)p->skipped;
    r->preemptions = p->preemptions;
    r->lost_gpu_seconds = p->lost;
    r->restart_gpu_seconds = p->restart;
    r->preempt_cost_frac = fg_preempt_cost_frac(p->lost, p->restart, r->gpu_seconds);
    r->restart_overhead_s = o->restart_overhead_s;
    r->half_life_s = o->cfg.half_life_s;
    r->backfill = o->cfg.backfill && o->cfg.policy != FG_POLICY_FIFO;
    r->preemption = o->cfg.preemption;
    r->backfill_depth = o->cfg.backfill_depth;
    r->reserve_depth = o->cfg.reserve_depth;
    r->quantum_s = o->cfg.quantum_s;
    r->preempt_wait_s = o->cfg.preempt_wait_s;
    r->min_run_s = o->cfg.min_run_s;
    r->las_levels = o->cfg.las_levels;
    memcpy(r->las_thresholds_gpu_s, o->cfg.las_thresholds_gpu_s, sizeof r->las_thresholds_gpu_s);
    r->checkpoint_interval_s = o->checkpoint_interval_s;
    r->time_limit_factor = o->time_limit_factor;
    r->passes = p->passes;
    r->time_limit_model = o->time_limit_model;
    if (p->est) {
        for (size_t i = 0; i < p->n; i++)
            p->est[i].start = p->recs[i].end >= 0 ? p->recs[i].start : -1;
        fg_estacc_compute(p->est, p->n, &r->estacc);
        r->has_estacc = true;
    }
}

int fg_sim_run_recs(const fg_trace_t *t, const fg_sim_opts_t *o, fg_sim_result_t *r,
                    fg_jobrec_t **recs_out, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    if (recs_out)
        *recs_out = NULL;
    if (options_check(o, err, errlen) < 0)
        return -1;
    const double t_begin = now_s();
    replay_t p = {.t = t, .o = o, .n = t->njobs, .err = err, .errlen = errlen};
    p.s = fg_sched_new(&o->cfg);
    if (!p.s) {
        snprintf(err, errlen, "fg_sched_new failed");
        return -1;
    }
    /* only the arrivals' estimates are read (right after the passes at their submit
     * time): the core makes those and skips the others */
    fg_sched_set_estimates_on_demand(p.s, true);
    fg_sched_set_no_reasons(p.s, true); /* the replay reads no reasons */
    p.t0 = p.n ? t->jobs[0].submit : 0;
    if (cluster_add(&p) < 0) {
        fg_sched_free(p.s);
        return -1;
    }
    /* (huge pages where the kernel has them: xalloc.h) */
    p.recs = fg_xcalloc_big(p.n, sizeof *p.recs);
    p.js = fg_xcalloc_big(p.n, sizeof *p.js);
    fg_decisions_init(&p.d);
    fair_setup(&p);
    if (o->estimates_history) {
        fg_histest_init(&p.hist);
        p.limit = fg_xcalloc(p.n + 1, sizeof *p.limit);
        p.est = fg_xcalloc(p.n + 1, sizeof *p.est);
    }
    int rc = replay_events(&p, t_begin);
    if (rc == 0) {
        result_fill(&p, r, t_begin);
        if (o->progress)
            fprintf(stderr, "\rsim %s: %zu/%zu jobs done in %.2f s%20s\n",
                    fg_policy_name(o->cfg.policy), p.done, p.n, r->replay_seconds, "");
        if (o->share_series &&
            write_series(o->share_series, t, &p.fair,
                         o->share_interval_s > 0 ? o->share_interval_s : 3600, err, errlen) < 0)
            rc = -1;
    }
    fg_decisions_free(&p.d);
    if (p.est) {
        fg_histest_free(&p.hist);
        free(p.limit);
        free(p.est);
    }
    fg_sched_free(p.s);
    fg_fair_free(&p.fair);
    free(p.heap.v);
    fg_xfree_big(p.js, p.n, sizeof *p.js);
    if (recs_out && rc == 0)
        *recs_out = p.recs;
    else
        fg_sim_recs_free(p.recs, t);
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
