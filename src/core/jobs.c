/*
 * jobs.c - the job table and a job's life: submission, start, end, retry, cancel and
 * restore after a restart.
 *
 * Jobs live in slots of one array (freed slots are reused), found by id through an
 * open-addressing hash (ids kept beside their slots, deletion by backward shift). A job
 * is PENDING (in its member's queue of its band: the class, or the LAS level) or
 * RUNNING (on its account's running list of its class, holding the GPUs of its
 * allocation); an ended job leaves the core unless it is requeued.
 *
 * An attempt's end decides what follows: completed, cancelled and timeout end the job;
 * preempted and not_started requeue it at once; failed and node_lost retry it while
 * max_retries allows, after a backoff doubling from retry_backoff_s up to
 * retry_backoff_max_s. An attempt that never ran (user_setup_failed, not_started) or
 * lost its node is not charged: its usage is taken back, as billing refunds it
 * (docs/billing.md), so fair share and invoices count the same GPU time.
 *
 * Example: job 7 (2 GPUs, max_retries 1, backoff 30 s) starts at t=0 and fails at
 * t=100: 200 GPU-seconds charged, retries_used 1, pending again, eligible at 130. Its
 * second attempt starts at 130 and fails at 150: no retry left, the job ends FAILED.
 *
 * The pending-job histograms (time limits, and size x time limit) let a pass see
 * cheaply that no pending job could end within a window (fg__pending_limit_at_most,
 * fg__pending_none_fits).
 */
#include "internal.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ id hash */

static size_t hash_id(fg_job_id_t id, size_t cap)
{
    uint64_t x = id * 0x9E3779B97F4A7C15ull;
    return (size_t)(x ^ (x >> 29)) & (cap - 1);
}

static void hash_put(fg_sched_t *s, fg_job_id_t id, int32_t slot);

static void hash_resize(fg_sched_t *s, size_t cap)
{
    fg__hent_t *old = s->hash;
    size_t oldcap = s->hash_cap;
    s->hash = fg__alloc(cap * sizeof *s->hash);
    for (size_t i = 0; i < cap; i++)
        s->hash[i].slot = -1;
    s->hash_cap = cap;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].slot >= 0)
            hash_put(s, old[i].id, old[i].slot);
    free(old);
}

static void hash_put(fg_sched_t *s, fg_job_id_t id, int32_t slot)
{
    if ((s->nlive + 1) * 2 > s->hash_cap)
        hash_resize(s, s->hash_cap ? s->hash_cap * 2 : 1024);
    size_t i = hash_id(id, s->hash_cap);
    while (s->hash[i].slot >= 0)
        i = (i + 1) & (s->hash_cap - 1);
    s->hash[i] = (fg__hent_t){.id = id, .slot = slot};
}

/* The slot of id, or -1 with *at the empty entry that ended the probe (where a put of
 * id goes while the table is not resized); *at is not set for a table not yet made. */
static int32_t hash_find(const fg_sched_t *s, fg_job_id_t id, size_t *at)
{
    if (!s->hash_cap)
        return -1;
    size_t i = hash_id(id, s->hash_cap);
    while (s->hash[i].slot >= 0) {
        if (s->hash[i].id == id)
            return s->hash[i].slot;
        i = (i + 1) & (s->hash_cap - 1);
    }
    *at = i;
    return -1;
}

int32_t fg__hash_get(const fg_sched_t *s, fg_job_id_t id)
{
    size_t at;
    return hash_find(s, id, &at);
}

/* hash_put of an id that hash_find did not find, ending at entry `at`, with no change
 * to the table since: the put goes to `at` unless the table grows first (a submission
 * probes once, not once to check the id is new and again to put it). */
static void hash_put_at(fg_sched_t *s, fg_job_id_t id, int32_t slot, size_t at)
{
    if ((s->nlive + 1) * 2 > s->hash_cap)
        hash_put(s, id, slot);
    else
        s->hash[at] = (fg__hent_t){.id = id, .slot = slot};
}

/* Linear-probing delete by backward shift: no tombstones. */
static void hash_del(fg_sched_t *s, fg_job_id_t id)
{
    size_t m = s->hash_cap - 1, i = hash_id(id, s->hash_cap);
    while (s->hash[i].slot >= 0 && s->hash[i].id != id)
        i = (i + 1) & m;
    if (s->hash[i].slot < 0)
        return;
    size_t j = i;
    for (;;) {
        s->hash[i].slot = -1;
        for (;;) {
            j = (j + 1) & m;
            if (s->hash[j].slot < 0)
                return;
            size_t k = hash_id(s->hash[j].id, s->hash_cap);
            /* move j back to i unless its home k lies cyclically in (i, j] */
            if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
                continue;
            break;
        }
        s->hash[i] = s->hash[j];
        i = j;
    }
}

fg__job_t *fg__job_by_id(const fg_sched_t *s, fg_job_id_t id)
{
    int32_t slot = fg__hash_get(s, id);
    return slot < 0 ? NULL : &s->jobs[slot];
}

/* ------------------------------------------------------------------ jobs */

int32_t fg__job_band(const fg_sched_t *s, const fg__job_t *j)
{
    switch (s->cfg.policy) {
    case FG_POLICY_FIFO:
        return 0;
    case FG_POLICY_LAS:
        return (int32_t)fg__las_level(s, j->attained_gpu_s);
    case FG_POLICY_FAIR:
        return (FG_PRIO_HIGH - (int32_t)j->prio) * s->cfg.las_levels +
               (int32_t)fg__las_level(s, j->attained_gpu_s);
    default:
        return FG_PRIO_HIGH - (int32_t)j->prio;
    }
}

int64_t fg__las_level(const fg_sched_t *s, int64_t attained)
{
    int64_t q = 0;
    while (q + 1 < s->cfg.las_levels && attained >= s->cfg.las_thresholds_gpu_s[q])
        q++;
    return q;
}

const fg_alloc_t *fg__job_allocs(const fg__job_t *j)
{
    return j->nallocs > 1 ? j->allocm : &j->alloc1;
}

static int limit_bucket(fg_time_t limit)
{
    return 63 - __builtin_clzll((unsigned long long)(limit > 0 ? limit : 1));
}

/* Conservative: false only if no pending job has a time limit <= w. */
bool fg__pending_limit_at_most(const fg_sched_t *s, fg_time_t w)
{
    if (w <= 0)
        return false;
    int top = limit_bucket(w); /* buckets above hold only limits > w */
    for (int b = 0; b <= top; b++)
        if (s->limit_hist[b])
            return true;
    return false;
}

/* Quarter octaves: 4 floor(log2 L) + the two bits below the leading one (0..255; a
 * larger limit never has a smaller bucket). */
static int limit_qbucket(fg_time_t limit)
{
    uint64_t x = (uint64_t)(limit > 0 ? limit : 1);
    int e = 63 - __builtin_clzll(x);
    int m = e >= 2 ? (int)((x >> (e - 2)) & 3) : (int)((x << (2 - e)) & 3);
    return 4 * e + m;
}

/* Counts job j in (d = 1) or out of (d = -1) the histograms of pending jobs' time
 * limits: limit_hist by limit_bucket, which is the quarter-octave bucket over 4 (the same
 * floor(log2 L)), and size_limit_hist. */
static void limit_count(fg_sched_t *s, const fg__job_t *j, int d)
{
    const int c = j->gpus <= FG_WHOLE_NODE_GPUS ? j->gpus : FG__SIZE_WHOLE;
    const int b = limit_qbucket(j->time_limit);
    s->limit_hist[b / 4] += d;
    int32_t *n = &s->size_limit_hist[c][b];
    uint64_t *w = &s->size_limit_mask[c][b / 64], bit = (uint64_t)1 << (b % 64);
    *n += d;
    if (*n)
        *w |= bit;
    else
        *w &= ~bit;
}

/* Might a pending job of size class c end by `end` (at now + its time limit)? */
static bool size_may_end_by(const fg_sched_t *s, int c, fg_time_t end, fg_time_t now)
{
    const uint64_t *mask = s->size_limit_mask[c];
    if (end == FG__INF)
        return (mask[0] | mask[1] | mask[2] | mask[3]) != 0;
    if (end < now) /* (time limits are at least 1; the test holds for 0 as well) */
        return false;
    const int top = limit_qbucket(end - now); /* buckets above hold only longer limits */
    for (int w = 0; w <= top / 64; w++) {
        uint64_t m = mask[w];
        if (w == top / 64 && top % 64 < 63)
            m &= ((uint64_t)1 << (top % 64 + 1)) - 1;
        if (m)
            return true;
    }
    return false;
}

bool fg__pending_none_fits(const fg_sched_t *s, const fg_time_t *fit_end, fg_time_t whole_end,
                           fg_time_t now)
{
    for (int g = 1; g <= FG_WHOLE_NODE_GPUS; g++)
        if (fit_end[g] != INT64_MIN && size_may_end_by(s, g, fit_end[g], now))
            return false;
    return whole_end == INT64_MIN || !size_may_end_by(s, FG__SIZE_WHOLE, whole_end, now);
}

void fg__set_put(fg__set_t *v, size_t i, bool on)
{
    if (i / 64 >= v->words) {
        size_t old = v->words;
        v->bits = fg__grow(v->bits, &v->words, i / 64 + 1, sizeof *v->bits);
        memset(v->bits + old, 0, sizeof *v->bits * (v->words - old));
    }
    const uint64_t bit = (uint64_t)1 << (i % 64);
    if (!(v->bits[i / 64] & bit) == !on)
        return; /* (already so) */
    /* the list's place of i is after every smaller index; the larger ones move by one,
     * in the same pass as the search for it (a few entries: no call to memmove) */
    if (on) {
        v->bits[i / 64] |= bit;
        v->list = fg__grow(v->list, &v->cap, v->n + 1, sizeof *v->list);
        size_t p = v->n;
        for (; p > 0 && v->list[p - 1] > (int32_t)i; p--)
            v->list[p] = v->list[p - 1];
        v->list[p] = (int32_t)i;
        v->n++;
    } else {
        v->bits[i / 64] &= ~bit;
        /* from the end, each entry after i moves down by one (i is in the list) */
        int32_t carry = v->list[--v->n];
        for (size_t k = v->n; carry != (int32_t)i; k--) {
            const int32_t t = v->list[k - 1];
            v->list[k - 1] = carry;
            carry = t;
        }
    }
}

void fg__set_clear(fg__set_t *v)
{
    if (v->words)
        memset(v->bits, 0, sizeof *v->bits * v->words);
    v->n = 0;
}

void fg__set_free(fg__set_t *v)
{
    free(v->bits);
    free(v->list);
    memset(v, 0, sizeof *v);
}

void fg__pending_add(fg_sched_t *s, int32_t slot)
{
    fg__job_t *j = &s->jobs[slot];
    j->state = FG_JOB_PENDING;
    j->band = fg__job_band(s, j);
    fg__member_t *m = &s->members[j->member];
    fg__queue_insert(s, &m->q[j->band], slot);
    if (m->pending++ == 0)
        fg__set_put(&s->act_m, (size_t)j->member, true);
    m->pending_gpus += j->gpus;
    if (s->accounts[j->account].pending++ == 0)
        fg__set_put(&s->act_a, (size_t)j->account, true);
    s->accounts[j->account].pending_gpus += j->gpus;
    s->npending++;
    limit_count(s, j, 1);
    s->band_pending[j->band]++;
    j->reason_walk = -1;
    j->est = FG_TIME_NEVER;
}

void fg__pending_del(fg_sched_t *s, int32_t slot)
{
    fg__job_t *j = &s->jobs[slot];
    fg__member_t *m = &s->members[j->member];
    assert(m->pending > 0 && s->npending > 0); /* (a job a walk started leaves after it) */
    fg__queue_remove(s, &m->q[j->band], slot);
    if (--m->pending == 0)
        fg__set_put(&s->act_m, (size_t)j->member, false);
    m->pending_gpus -= j->gpus;
    if (--s->accounts[j->account].pending == 0)
        fg__set_put(&s->act_a, (size_t)j->account, false);
    s->accounts[j->account].pending_gpus -= j->gpus;
    s->npending--;
    limit_count(s, j, -1);
    s->band_pending[j->band]--;
}

static bool gpus_valid(int32_t g)
{
    if (g >= 1 && g <= FG_WHOLE_NODE_GPUS)
        return true;
    return g > FG_WHOLE_NODE_GPUS && g <= FG_MAX_JOB_GPUS && g % FG_WHOLE_NODE_GPUS == 0;
}

/* What spec_check found for a spec, for job_create: its account, member, GPU type
 * (-1: any, or not known yet) and the id hash entry its id goes to (hash_put_at). */
typedef struct spec_ok {
    int acc, mem;
    int32_t type;
    size_t hat;
} spec_ok_t;

/* Validates a spec and resolves its account, member and type. */
static int spec_check(fg_sched_t *s, const fg_job_spec_t *sp, spec_ok_t *ok)
{
    if (!sp || sp->id == 0 || !gpus_valid(sp->gpus) || sp->time_limit_s <= 0 ||
        (unsigned)sp->prio > FG_PRIO_HIGH || sp->max_retries < 0 || sp->checkpoint_interval_s < 0)
        return FG_EINVAL;
    if (sp->gpu_type && sp->gpu_type[0] && !fg__name_ok(sp->gpu_type))
        return FG_EINVAL;
    if (hash_find(s, sp->id, &ok->hat) >= 0)
        return FG_EEXIST;
    if (!sp->account)
        return FG_ENOENT;
    const uint64_t ha = fg__name_hash(sp->account);
    ok->acc = fg__account_of(s, sp->account, ha);
    if (ok->acc < 0 || !sp->user)
        return FG_ENOENT;
    /* (a user named as its account, by the same string, has the account name's hash) */
    ok->mem = fg__member_of_h(s, ok->acc, sp->user,
                              sp->user == sp->account ? ha : fg__name_hash(sp->user));
    if (ok->mem < 0)
        return FG_ENOENT;
    if (s->accounts[ok->acc].quota >= 0 && sp->gpus > s->accounts[ok->acc].quota)
        return FG_EQUOTA;
    ok->type = -1;
    if (sp->gpu_type && sp->gpu_type[0])
        ok->type = fg__type_find(s, sp->gpu_type);
    return FG_OK;
}

static int32_t slot_new(fg_sched_t *s)
{
    int32_t slot;
    if (s->nfree_slots) {
        slot = s->free_slots[--s->nfree_slots];
    } else {
        s->jobs = fg__grow(s->jobs, &s->jobs_cap, s->njobs_slots + 1, sizeof *s->jobs);
        slot = (int32_t)s->njobs_slots++;
    }
    memset(&s->jobs[slot], 0, sizeof s->jobs[slot]);
    return slot;
}

static int32_t job_create(fg_sched_t *s, const fg_job_spec_t *sp, const spec_ok_t *ok)
{
    const int acc = ok->acc, mem = ok->mem;
    int32_t type = ok->type;
    if (type < 0 && sp->gpu_type && sp->gpu_type[0])
        type = fg__type_get(s, sp->gpu_type); /* unknown type: waits with gpu_type */
    int32_t slot = slot_new(s);
    fg__job_t *j = &s->jobs[slot];
    j->id = sp->id;
    j->account = acc;
    j->member = mem;
    j->gpus = sp->gpus;
    j->type = type;
    j->prio = sp->prio;
    j->submit_time = sp->submit_time;
    j->queued_since = sp->submit_time;
    j->time_limit = sp->time_limit_s;
    j->ckpt = sp->checkpoint_interval_s;
    j->limit_cost = sp->limit_cost > 0 ? sp->limit_cost : 0;
    j->max_retries = sp->max_retries;
    j->eligible_time = INT64_MIN;
    j->est = FG_TIME_NEVER;
    j->reason_walk = -1;
    s->live = fg__grow(s->live, &s->live_cap, s->nlive + 1, sizeof *s->live);
    j->live_pos = (int32_t)s->nlive;
    hash_put_at(s, j->id, slot, ok->hat);
    s->live[s->nlive++] = slot;
    return slot;
}

static void job_destroy(fg_sched_t *s, int32_t slot)
{
    fg__job_t *j = &s->jobs[slot];
    for (size_t k = 0; j->claimed && k < s->nclaims; k++)
        if (s->claims[k] == slot) {
            s->claims[k] = s->claims[--s->nclaims];
            break;
        }
    hash_del(s, j->id);
    int32_t last = s->live[--s->nlive];
    s->live[j->live_pos] = last;
    s->jobs[last].live_pos = j->live_pos;
    if (j->allocm) /* (none once job_release ran) */
        free(j->allocm);
    /* a free slot is one of id 0 (fg_sched_rebuild, fg_sched_free) with no allocation
     * array; nothing else reads it (no list, queue, node or hash entry holds the slot
     * now) and slot_new clears it all when it is taken again */
    j->id = 0;
    j->allocm = NULL;
    j->nallocs = 0;
    s->free_slots =
        fg__grow(s->free_slots, &s->free_slots_cap, s->nfree_slots + 1, sizeof *s->free_slots);
    s->free_slots[s->nfree_slots++] = slot;
}

/* A submission: checks the spec and, with `capped`, the member's pending cap and the
 * load shedding (a restored job passes them: it was accepted before); then the job is
 * pending. */
static int submit(fg_sched_t *s, const fg_job_spec_t *spec, bool capped)
{
    spec_ok_t ok;
    int rc = spec_check(s, spec, &ok);
    if (rc != FG_OK)
        return rc;
    if (capped && s->cfg.max_pending_per_user > 0 &&
        s->members[ok.mem].pending >= s->cfg.max_pending_per_user)
        return FG_EQUEUE_FULL;
    if (capped && s->cfg.shed_pending > 0 && spec->prio == FG_PRIO_LOW &&
        s->npending >= (size_t)s->cfg.shed_pending)
        return FG_ESHED;
    fg__pending_add(s, job_create(s, spec, &ok));
    return FG_OK;
}

int fg_sched_submit_restored(fg_sched_t *s, const fg_job_spec_t *spec, fg_time_t now)
{
    (void)now;
    return submit(s, spec, false);
}

int fg_sched_submit(fg_sched_t *s, const fg_job_spec_t *spec, fg_time_t now)
{
    (void)now;
    return submit(s, spec, true);
}

void fg__run_list_add(fg_sched_t *s, int32_t slot)
{
    fg__job_t *j = &s->jobs[slot];
    int32_t *head = &s->accounts[j->account].run_head[j->prio];
    j->rprev = -1;
    j->rnext = *head;
    if (*head >= 0)
        s->jobs[*head].rprev = slot;
    *head = slot;
}

static void run_list_del(fg_sched_t *s, int32_t slot)
{
    fg__job_t *j = &s->jobs[slot];
    if (j->rprev >= 0)
        s->jobs[j->rprev].rnext = j->rnext;
    else
        s->accounts[j->account].run_head[j->prio] = j->rnext;
    if (j->rnext >= 0)
        s->jobs[j->rnext].rprev = j->rprev;
    j->rprev = j->rnext = -1;
}

/* What a start changes on the nodes (and in the pass's plan): job `slot` holds the GPUs
 * of allocs until `end` at the latest. Also used by pass.c to make a start again after
 * its queued estimates (deferred_run). */
void fg__job_take_gpus(fg_sched_t *s, int32_t slot, const fg_alloc_t *allocs, int32_t n,
                       fg_time_t end)
{
    for (int32_t k = 0; k < n; k++) {
        fg__node_t *nd = &s->nodes[allocs[k].node];
        assert((allocs[k].gpu_mask & ~nd->free_mask) == 0);
        nd->free_mask &= ~allocs[k].gpu_mask;
        /* the GPUs of the mask in ascending order, as a scan of the node would visit
         * them (a mask holds no GPU past the node's) */
        for (uint64_t mask = allocs[k].gpu_mask; mask; mask &= mask - 1) {
            const int i = __builtin_ctzll(mask);
            assert(i < nd->gpus && nd->gpu_job[i] < 0); /* a GPU is never given twice */
            nd->gpu_job[i] = slot;
            nd->nfree--;
            if (nd->touched == s->walk_no && nd->avail[i] < end)
                nd->avail[i] = end;
        }
        fg__node_changed(s, allocs[k].node);
    }
}

/* Gives job `slot` the GPUs of allocs and makes it RUNNING from `now` (a start, or a
 * restored running job, which its account's quota may no longer allow). */
static void job_run(fg_sched_t *s, int32_t slot, const fg_alloc_t *allocs, int32_t n, fg_time_t now)
{
    fg__job_t *j = &s->jobs[slot];
    fg__usage_touch(s, j->account, j->member, now);
    j->state = FG_JOB_RUNNING;
    j->start_time = now;
    if (now > s->accounts[j->account].last_start)
        s->accounts[j->account].last_start = now;
    if (s->cfg.policy == FG_POLICY_RR && s->nmembers)
        s->rr_next = (int32_t)(((size_t)j->member + 1) % s->nmembers);
    j->claim = 0;
    j->claimed = false;
    j->attempt++;
    fg__run_list_add(s, slot);
    j->preempting = false;
    j->nallocs = n;
    if (j->allocm) { /* (a pending job has none: job_release freed it) */
        free(j->allocm);
        j->allocm = NULL;
    }
    if (n > 1) {
        j->allocm = fg__alloc(sizeof *allocs * (size_t)n);
        memcpy(j->allocm, allocs, sizeof *allocs * (size_t)n);
    } else {
        j->alloc1 = allocs[0];
    }
    fg__job_take_gpus(s, slot, allocs, n, now + j->time_limit);
    fg__account_t *a = &s->accounts[j->account];
    if (a->budget_left >= 0) /* a safe budget: the start reserves its limit's cost */
        a->budget_left = a->budget_left > j->limit_cost ? a->budget_left - j->limit_cost : 0;
    s->accounts[j->account].running += j->gpus;
    s->members[j->member].running += j->gpus;
    j->why.code = FG_REASON_NONE;
    j->est = now;
}

/* A start decided by a pass: job_run, within the account's quota. */
void fg__job_start(fg_sched_t *s, int32_t slot, const fg_alloc_t *allocs, int32_t n, fg_time_t now)
{
    assert(s->jobs[slot].state == FG_JOB_PENDING);
    assert(fg__quota_allows(&s->accounts[s->jobs[slot].account], s->jobs[slot].gpus));
    job_run(s, slot, allocs, n, now);
}

static void job_release(fg_sched_t *s, int32_t slot, fg_time_t now)
{
    fg__job_t *j = &s->jobs[slot];
    fg__usage_touch(s, j->account, j->member, now);
    run_list_del(s, slot);
    const fg_alloc_t *al = fg__job_allocs(j);
    for (int32_t k = 0; k < j->nallocs; k++) {
        fg__node_t *nd = &s->nodes[al[k].node];
        for (uint64_t mask = al[k].gpu_mask; mask; mask &= mask - 1) {
            const int i = __builtin_ctzll(mask);
            assert(nd->gpu_job[i] == slot); /* a freed GPU belonged to the job */
            if (nd->gpu_job[i] == slot) {
                nd->gpu_job[i] = -1;
                nd->nfree++;
            }
        }
        nd->free_mask |= al[k].gpu_mask;
        fg__node_changed(s, al[k].node);
    }
    s->accounts[j->account].running -= j->gpus;
    s->members[j->member].running -= j->gpus;
    j->nallocs = 0;
    if (j->allocm) { /* (only a job on more than one node has one: a call saved) */
        free(j->allocm);
        j->allocm = NULL;
    }
    s->npreempting -= j->preempting;
    j->preempting = false;
}

int fg_sched_restore_running(fg_sched_t *s, const fg_job_spec_t *spec, int32_t attempt,
                             int32_t retries_used, int64_t attained_gpu_s, fg_time_t start_time,
                             const fg_alloc_t *allocs, int32_t nallocs, fg_time_t now)
{
    fg__plan_close(s);
    spec_ok_t ok;
    int rc = spec_check(s, spec, &ok);
    if (rc != FG_OK)
        return rc;
    if (attempt < 1 || retries_used < 0 || attained_gpu_s < 0 || !allocs || nallocs < 1 ||
        start_time > now)
        return FG_EINVAL;
    int32_t total = 0;
    for (int32_t k = 0; k < nallocs; k++) {
        if (allocs[k].node < 0 || (size_t)allocs[k].node >= s->nnodes)
            return FG_ENOENT;
        const fg__node_t *nd = &s->nodes[allocs[k].node];
        uint64_t all = nd->gpus == 64 ? ~(uint64_t)0 : (((uint64_t)1 << nd->gpus) - 1);
        if ((allocs[k].gpu_mask & ~all) || (allocs[k].gpu_mask & ~nd->free_mask))
            return FG_ESTATE; /* GPU missing or taken */
        for (int32_t m = 0; m < k; m++)
            if (allocs[m].node == allocs[k].node)
                return FG_EINVAL;
        total += __builtin_popcountll(allocs[k].gpu_mask);
    }
    if (total != spec->gpus)
        return FG_EINVAL;
    int32_t slot = job_create(s, spec, &ok);
    fg__job_t *j = &s->jobs[slot];
    j->retries_used = retries_used;
    j->attained_gpu_s = attained_gpu_s;
    j->run_s = attained_gpu_s / j->gpus; /* GPUs never change: exact */
    job_run(s, slot, allocs, nallocs, start_time);
    j->attempt = attempt;
    return FG_OK;
}

/* The slot of pending job `id` into *slot: FG_OK, FG_ENOENT or FG_ESTATE. */
static int pending_slot(const fg_sched_t *s, fg_job_id_t id, int32_t *slot)
{
    *slot = fg__hash_get(s, id);
    if (*slot < 0)
        return FG_ENOENT;
    return s->jobs[*slot].state == FG_JOB_PENDING ? FG_OK : FG_ESTATE;
}

int fg_sched_restore_pending(fg_sched_t *s, fg_job_id_t id, int32_t attempts, int32_t retries_used,
                             int64_t attained_gpu_s, fg_time_t eligible_time)
{
    fg__plan_close(s);
    int32_t slot;
    const int rc = pending_slot(s, id, &slot);
    if (rc != FG_OK)
        return rc;
    fg__job_t *j = &s->jobs[slot];
    if (attempts < 0 || retries_used < 0 || attained_gpu_s < 0)
        return FG_EINVAL;
    fg__pending_del(s, slot);
    j->attempt = attempts;
    j->retries_used = retries_used;
    j->attained_gpu_s = attained_gpu_s;
    j->run_s = attained_gpu_s / j->gpus;
    j->eligible_time = eligible_time;
    if (eligible_time > s->max_eligible)
        s->max_eligible = eligible_time;
    /* the preemption wait counts from when the job could run again */
    j->queued_since = eligible_time > j->submit_time ? eligible_time : j->submit_time;
    fg__pending_add(s, slot);
    return FG_OK;
}

int fg_sched_restore_claim(fg_sched_t *s, fg_job_id_t id, int32_t victims_stopping)
{
    int32_t slot;
    const int rc = pending_slot(s, id, &slot);
    if (rc != FG_OK)
        return rc;
    fg__job_t *j = &s->jobs[slot];
    if (victims_stopping < 0)
        return FG_EINVAL;
    j->claim = victims_stopping;
    if (!j->claimed) {
        j->claimed = true;
        s->claims = fg__grow(s->claims, &s->claims_cap, s->nclaims + 1, sizeof *s->claims);
        s->claims[s->nclaims++] = slot;
    }
    return FG_OK;
}

int32_t fg_sched_rr_turn(const fg_sched_t *s)
{
    return s->rr_next;
}

int fg_sched_set_rr_turn(fg_sched_t *s, int32_t member)
{
    if (member < 0 || (member > 0 && (size_t)member >= s->nmembers))
        return FG_EINVAL;
    fg__plan_finish_walk(s);
    s->rr_next = member;
    return FG_OK;
}

int fg_sched_cancel(fg_sched_t *s, fg_job_id_t id, fg_time_t now)
{
    fg__plan_close(s);
    (void)now;
    int32_t slot = fg__hash_get(s, id);
    if (slot < 0)
        return FG_ENOENT;
    if (s->jobs[slot].state != FG_JOB_PENDING)
        return FG_ESTATE;
    fg__pending_del(s, slot);
    job_destroy(s, slot);
    return FG_OK;
}

/* Is an attempt that ended for `cause` charged? Not one that never ran: a Unix
 * identity that could not be set up, or a start that never reached its node. */
static bool attempt_charged(fg_end_cause_t cause)
{
    return cause != FG_END_SETUP_FAILED && cause != FG_END_NOT_STARTED && cause != FG_END_NODE_LOST;
}

/* The record of job j's attempt that ends at `now` for `cause` after `run` charged
 * seconds, but its new state and eligible time. */
static fg_attempt_t attempt_record(const fg__job_t *j, fg_end_cause_t cause, fg_time_t now,
                                   fg_time_t run)
{
    fg_attempt_t rec;
    memset(&rec, 0, sizeof rec);
    rec.job = j->id;
    rec.attempt = j->attempt;
    rec.start_time = j->start_time;
    rec.end_time = now;
    rec.cause = cause;
    rec.gpus = j->gpus;
    rec.gpu_seconds = (int64_t)j->gpus * run;
    const fg_time_t lost = j->ckpt > 0 ? run % j->ckpt : run;
    if (cause == FG_END_PREEMPTED)
        rec.lost_gpu_seconds = (int64_t)j->gpus * lost;
    return rec;
}

/* The backoff before retry number j->retries_used: retry_backoff_s doubling per retry,
 * at most retry_backoff_max_s. */
static fg_time_t retry_backoff(const fg_sched_t *s, const fg__job_t *j)
{
    fg_time_t b = s->cfg.retry_backoff_s;
    for (int32_t k = 1; k < j->retries_used && b < s->cfg.retry_backoff_max_s; k++)
        b *= 2;
    return b > s->cfg.retry_backoff_max_s ? s->cfg.retry_backoff_max_s : b;
}

/* What follows an attempt of j that ended at `now` for `cause`: an end state, or
 * PENDING (a failure with retries left: one more used, eligible after a backoff). */
static fg_job_state_t state_after(fg_sched_t *s, fg__job_t *j, fg_end_cause_t cause, fg_time_t now)
{
    switch (cause) {
    case FG_END_COMPLETED:
        return FG_JOB_COMPLETED;
    case FG_END_CANCELLED:
        return FG_JOB_CANCELLED;
    case FG_END_TIMEOUT:
        return FG_JOB_TIMEOUT;
    case FG_END_PREEMPTED:
    case FG_END_NOT_STARTED:
        return FG_JOB_PENDING;
    default: /* failed, node lost: retry while allowed */
        if (j->retries_used >= j->max_retries)
            return FG_JOB_FAILED;
        j->retries_used++;
        j->eligible_time = now + retry_backoff(s, j);
        if (j->eligible_time > s->max_eligible)
            s->max_eligible = j->eligible_time;
        return FG_JOB_PENDING;
    }
}

int fg_sched_attempt_ended(fg_sched_t *s, fg_job_id_t id, int32_t attempt, fg_end_cause_t cause,
                           fg_time_t now, fg_attempt_t *out)
{
    fg__plan_close(s);
    int32_t slot = fg__hash_get(s, id);
    if (slot < 0)
        return FG_ENOENT;
    if ((unsigned)cause > FG_END_CAUSE_MAX)
        return FG_EINVAL;
    fg__job_t *j = &s->jobs[slot];
    if (j->state != FG_JOB_RUNNING || j->attempt != attempt)
        return FG_ESTALE;
    if (now < j->start_time)
        now = j->start_time;
    const fg_time_t run = attempt_charged(cause) ? now - j->start_time : 0;
    fg_attempt_t rec = attempt_record(j, cause, now, run);
    if (j->preempting && j->preempt_for) { /* one victim fewer stopping for its job */
        fg__job_t *f = fg__job_by_id(s, j->preempt_for);
        if (f && f->state == FG_JOB_PENDING && f->claim > 0)
            f->claim--;
    }
    job_release(s, slot, now);
    if (!attempt_charged(cause))
        fg__usage_refund(s, j, now - j->start_time);
    j->attained_gpu_s += rec.gpu_seconds;
    j->run_s += run;
    rec.new_state = state_after(s, j, cause, now);
    if (rec.new_state == FG_JOB_PENDING) {
        if (cause == FG_END_PREEMPTED || cause == FG_END_NOT_STARTED)
            j->eligible_time = now;
        rec.eligible_time = j->eligible_time;
        j->queued_since = j->eligible_time; /* the wait counts from eligibility */
        fg__pending_add(s, slot);
    } else {
        rec.eligible_time = FG_TIME_NEVER;
        job_destroy(s, slot);
    }
    if (out)
        *out = rec;
    return FG_OK;
}

int fg_sched_check_fit(const fg_sched_t *s, int32_t gpus, const char *gpu_type)
{
    if (!gpus_valid(gpus))
        return FG_EINVAL;
    int32_t need = gpus <= FG_WHOLE_NODE_GPUS ? 1 : gpus / FG_WHOLE_NODE_GPUS;
    int32_t per = gpus <= FG_WHOLE_NODE_GPUS ? gpus : FG_WHOLE_NODE_GPUS;
    int32_t have = 0;
    for (size_t n = 0; n < s->nnodes; n++) {
        const fg__node_t *nd = &s->nodes[n];
        if (gpu_type && gpu_type[0] && strcmp(s->types[nd->type].name, gpu_type))
            continue;
        have += nd->gpus >= per;
        if (have >= need)
            return FG_OK;
    }
    return FG_ENOFIT;
}
