/*
 * sched.c - the scheduler's state as a whole: its memory, its creation and end, the
 * rebuild of every derived structure from the base records, and the check that they
 * are in step.
 *
 * State. The base records are the jobs (jobs.c), the accounts and members
 * (tenants.c) and the nodes (nodes.c). Everything else is derived from them and kept
 * in step by each event: per member and band a queue of pending jobs (queue.c), per
 * node its free mask and count, per GPU type the free-count buckets and availability
 * trees (index.c), per account and member the running GPUs and pending counts.
 *
 * Events change base records and derived structures together: a submission adds a
 * pending job to its member's queue and counts; a pass's start takes GPUs from nodes
 * and adds them to the account's and member's running GPUs; an attempt's end gives
 * them back and requeues or drops the job. fg_sched_rebuild throws every derived
 * structure away and makes it again; the decisions after it are the same.
 *
 * Example: account a (quota 8) with member u, one 8-GPU node. Submitting job 1 (4
 * GPUs) makes a.pending = u.pending = 1, npending = 1; a pass starts it on GPUs 0-3:
 * node free_mask 0xf0, nfree 4, a.running = u.running = 4, a.pending = 0. Its end
 * (completed) gives free_mask 0xff back and a.running = 0. fg__sched_check asserts all
 * of that from the jobs alone.
 */
#include "internal.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ memory */

/* The core's one out-of-memory path: it aborts (a scheduler missing a job or a node
 * would decide wrongly), so its callers never check for NULL. */
static void out_of_memory(void)
{
    fputs("fairgpu core: out of memory\n", stderr);
    abort();
}

/* n bytes (at least one), never NULL. */
void *fg__alloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        out_of_memory();
    return p;
}

/* p resized to n bytes (at least one), never NULL. */
void *fg__realloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        out_of_memory();
    return q;
}

/* Grows array p of *cap elements of `size` bytes to hold at least `need` (doubling,
 * from 8); returns it, maybe moved. */
void *fg__grow(void *p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return p;
    size_t c = *cap ? *cap : 8;
    while (c < need)
        c *= 2;
    *cap = c;
    return fg__realloc(p, c * size);
}

/* ------------------------------------------------------------------ lifecycle */

fg_sched_t *fg_sched_new(const fg_config_t *cfg)
{
    if (fg_config_check(cfg, NULL) != FG_OK)
        return NULL;
    fg_sched_t *s = fg__alloc(sizeof *s);
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    s->tau = fg_fair_tau(cfg->half_life_s);
    s->last_now = INT64_MIN;
    s->max_eligible = INT64_MIN;
    s->node_gen = 1;
    fg_sched_account_set(s, "default", 1.0, -1);
    return s;
}

void fg_sched_free(fg_sched_t *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->njobs_slots; i++)
        free(s->jobs[i].allocm);
    for (size_t i = 0; i < s->nmembers; i++)
        for (int b = 0; b < FG__NBANDS; b++)
            fg__queue_free(&s->members[i].q[b]);
    for (size_t i = 0; i < s->ntypes; i++) {
        free(s->types[i].nodes);
        free(s->types[i].bm);
        free(s->types[i].tree);
        free(s->types[i].tdirty);
    }
    fg__order_free(&s->it);
    free(s->jobs);
    free(s->free_slots);
    free(s->live);
    free(s->hash);
    free(s->accounts);
    free(s->members);
    free(s->acct_ix);
    free(s->mem_ix);
    free(s->nodes);
    free(s->types);
    free(s->touched_nodes);
    free(s->blocked);
    free(s->fail);
    free(s->deferred);
    free(s->dsnap);
    free(s->peek_buf);
    free(s->ent_blk);
    free(s->cand);
    fg__set_free(&s->act_a);
    fg__set_free(&s->act_m);
    fg_fair_kept_free(&s->ent_wf);
    free(s->claims);
    free(s);
}

const fg_config_t *fg_sched_config(const fg_sched_t *s)
{
    return &s->cfg;
}

/* ------------------------------------------------------------------ rebuild */

/* Empties every derived count, queue and node's GPU holders (the base records stay). */
static void derived_clear(fg_sched_t *s)
{
    for (size_t i = 0; i < s->naccounts; i++) {
        s->accounts[i].running = s->accounts[i].pending = 0;
        s->accounts[i].pending_gpus = 0;
        for (int c = 0; c <= FG_PRIO_HIGH; c++)
            s->accounts[i].run_head[c] = -1;
    }
    for (size_t i = 0; i < s->nmembers; i++) {
        fg__member_t *m = &s->members[i];
        m->running = m->pending = 0;
        m->pending_gpus = 0;
        for (int b = 0; b < FG__NBANDS; b++)
            fg__queue_free(&m->q[b]);
    }
    for (size_t n = 0; n < s->nnodes; n++) {
        fg__node_t *nd = &s->nodes[n];
        nd->free_mask = nd->gpus == 64 ? ~(uint64_t)0 : (((uint64_t)1 << nd->gpus) - 1);
        nd->nfree = nd->gpus;
        for (int i = 0; i < FG_MAX_NODE_GPUS; i++)
            nd->gpu_job[i] = -1;
    }
    s->npending = 0;
    s->npreempting = 0;
    fg__set_clear(&s->act_a);
    fg__set_clear(&s->act_m);
    memset(s->limit_hist, 0, sizeof s->limit_hist);
    memset(s->size_limit_hist, 0, sizeof s->size_limit_hist);
    memset(s->size_limit_mask, 0, sizeof s->size_limit_mask);
    memset(s->band_pending, 0, sizeof s->band_pending);
    s->nclaims = 0;
}

/* Counts running job `slot` again: its GPUs on their nodes, its account's and member's
 * running GPUs, its account's running list. */
static void running_add(fg_sched_t *s, int32_t slot)
{
    const fg__job_t *j = &s->jobs[slot];
    const fg_alloc_t *al = fg__job_allocs(j);
    for (int32_t k = 0; k < j->nallocs; k++) {
        fg__node_t *nd = &s->nodes[al[k].node];
        nd->free_mask &= ~al[k].gpu_mask;
        for (int i = 0; i < nd->gpus; i++)
            if (al[k].gpu_mask >> i & 1) {
                nd->gpu_job[i] = slot;
                nd->nfree--;
            }
    }
    s->accounts[j->account].running += j->gpus;
    s->members[j->member].running += j->gpus;
    s->npreempting += j->preempting;
    fg__run_list_add(s, slot);
}

void fg_sched_rebuild(fg_sched_t *s)
{
    fg__plan_close(s);
    derived_clear(s);
    /* Re-insert in slot order; queue order is (submit, id) whatever the insert order. */
    for (size_t slot = 0; slot < s->njobs_slots; slot++) {
        fg__job_t *j = &s->jobs[slot];
        if (!j->id)
            continue;
        if (j->state != FG_JOB_PENDING) {
            running_add(s, (int32_t)slot);
            continue;
        }
        const int64_t rp = j->reason_walk; /* (what the last pass said stays) */
        const fg_time_t est = j->est;
        fg__pending_add(s, (int32_t)slot);
        j->reason_walk = rp;
        j->est = est;
    }
    for (size_t slot = 0; slot < s->njobs_slots; slot++)
        if (s->jobs[slot].id && s->jobs[slot].state == FG_JOB_PENDING && s->jobs[slot].claimed) {
            s->claims = fg__grow(s->claims, &s->claims_cap, s->nclaims + 1, sizeof *s->claims);
            s->claims[s->nclaims++] = (int32_t)slot;
        }
    for (size_t t = 0; t < s->ntypes; t++)
        fg__type_rebuild(s, (int32_t)t);
#ifndef NDEBUG
    fg__sched_check(s);
#endif
}

/* ------------------------------------------------------------------ invariants */

#ifndef NDEBUG
/* Node n's GPUs: its free mask and count agree with which job holds each GPU, and each
 * holder is a running job whose allocation has that GPU. */
static void check_node(const fg_sched_t *s, int32_t n)
{
    const fg__node_t *nd = &s->nodes[n];
    int32_t nfree = 0;
    for (int i = 0; i < nd->gpus; i++) {
        const int32_t slot = nd->gpu_job[i];
        assert((slot < 0) == ((nd->free_mask >> i & 1) != 0));
        nfree += slot < 0;
        if (slot < 0)
            continue;
        const fg__job_t *j = &s->jobs[slot];
        assert(j->id && j->state == FG_JOB_RUNNING);
        bool held = false;
        for (int32_t k = 0; k < j->nallocs; k++)
            held |= fg__job_allocs(j)[k].node == n && (fg__job_allocs(j)[k].gpu_mask >> i & 1);
        assert(held);
    }
    assert(nfree == nd->nfree && nfree == __builtin_popcountll(nd->free_mask));
}
#endif

/* Checks, by a full scan, that the derived counts are in step with the base records:
 * every account's and member's running GPUs are the sum of their running jobs' GPUs,
 * their pending counts and GPUs those of their pending jobs, npending and npreempting
 * the totals, each member's queues hold its pending jobs, each running job holds its
 * GPUs and no GPU has two holders. O(jobs + nodes): called by fg_sched_rebuild in debug
 * builds and by tests, never per event. A no-op when NDEBUG is defined. */
void fg__sched_check(const fg_sched_t *s)
{
#ifndef NDEBUG
    int32_t *a_run = fg__alloc(sizeof *a_run * (s->naccounts + s->nmembers));
    int32_t *m_run = a_run + s->naccounts;
    int64_t *a_pend = fg__alloc(sizeof *a_pend * 2 * (s->naccounts + s->nmembers));
    int64_t *a_pgpu = a_pend + s->naccounts, *m_pend = a_pgpu + s->naccounts;
    int64_t *m_pgpu = m_pend + s->nmembers;
    memset(a_run, 0, sizeof *a_run * (s->naccounts + s->nmembers));
    memset(a_pend, 0, sizeof *a_pend * 2 * (s->naccounts + s->nmembers));
    size_t npending = 0, nlive = 0;
    int32_t npreempting = 0;
    for (size_t slot = 0; slot < s->njobs_slots; slot++) {
        const fg__job_t *j = &s->jobs[slot];
        if (!j->id)
            continue;
        nlive++;
        assert(s->live[j->live_pos] == (int32_t)slot);
        if (j->state == FG_JOB_RUNNING) {
            a_run[j->account] += j->gpus;
            m_run[j->member] += j->gpus;
            npreempting += j->preempting;
            int32_t gpus = 0;
            for (int32_t k = 0; k < j->nallocs; k++)
                gpus += __builtin_popcountll(fg__job_allocs(j)[k].gpu_mask);
            assert(gpus == j->gpus);
        } else {
            assert(j->state == FG_JOB_PENDING && !j->preempting);
            npending++;
            a_pend[j->account]++;
            a_pgpu[j->account] += j->gpus;
            m_pend[j->member]++;
            m_pgpu[j->member] += j->gpus;
        }
    }
    assert(nlive == s->nlive && npending == s->npending && npreempting == s->npreempting);
    for (size_t a = 0; a < s->naccounts; a++) {
        const fg__account_t *ac = &s->accounts[a];
        assert(ac->running == a_run[a] && ac->pending == a_pend[a]);
        assert(ac->pending_gpus == a_pgpu[a]);
    }
    for (size_t m = 0; m < s->nmembers; m++) {
        const fg__member_t *mb = &s->members[m];
        assert(mb->running == m_run[m] && mb->pending == m_pend[m]);
        assert(mb->pending_gpus == m_pgpu[m]);
        int64_t queued = 0;
        for (int b = 0; b < FG__NBANDS; b++)
            queued += mb->q[b].len - mb->q[b].head;
        assert(queued == mb->pending);
    }
    for (size_t n = 0; n < s->nnodes; n++)
        check_node(s, (int32_t)n);
    free(a_run);
    free(a_pend);
#else
    (void)s;
#endif
}
