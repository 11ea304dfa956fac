/*
 * preempt.c - TODO banner
 */
#include "plan.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ preemption */

/* The accounts' entitlements, once per preemption search; the members' are made per
 * account when one of them is first read (ent_member): a search reads those of the
 * waiting job's account and of the victims' in that account only. One block
 * (s->ent_blk, kept from one search to the next) holds them and the scratch arrays.
 * The accounts' split is kept sorted from the last search (s->ent_wf): only the accounts
 * whose demand or weight changed since move. */
static void entitlements(fg_sched_t *s, ent_calc_t *e)
{
    if (e->done)
        return;
    e->done = true;
    size_t na = s->naccounts, nm = s->nmembers, n = na + nm + 1;
    s->ent_blk = fg__grow(s->ent_blk, &s->ent_cap,
                          sizeof(double) * (na + nm + 1 + 3 * n) + sizeof(int32_t) * (2 * n) +
                              sizeof(bool) * (na + 1),
                          1);
    double *blk = s->ent_blk;
    e->ent_a = blk;
    e->ent_m = blk + na;
    e->d = e->ent_m + nm + 1;
    e->w = e->d + n;
    e->om = e->w + n;
    e->idx = (int32_t *)(e->om + n);
    e->ms = e->idx + n;
    e->m_done = (bool *)(e->ms + n);
    memset(e->m_done, 0, sizeof(bool) * (na + 1));
    const double cap = (double)fg_sched_gpus_up(s);
    if (!fg__sc(s, FG__SC_WATERFILL_KEPT)) {
        double *d = e->d, *w = e->w;
        for (size_t i = 0; i < na; i++) {
            d[i] = (double)s->accounts[i].running + (double)s->accounts[i].pending_gpus;
            w[i] = s->accounts[i].weight;
        }
        fg__water_fill(na, d, w, cap, e->ent_a, e->idx);
        return;
    }
    fg__wf_t *f = &s->ent_wf;
    if (f->n != na) /* (a new account: start again) */
        fg__wf_init(f, na);
    for (size_t i = 0; i < na; i++) {
        const double d = (double)s->accounts[i].running + (double)s->accounts[i].pending_gpus;
        if (d != f->d[i] || s->accounts[i].weight != f->w[i])
            fg__wf_set(f, (int32_t)i, d, s->accounts[i].weight);
    }
    fg__wf_fill(f, cap, e->ent_a);
}

/* Member m's entitlement (entitlements made): its account's entitlement split among the
 * account's members in ascending index order, made for all of them at the first read. */
static double ent_member(fg_sched_t *s, ent_calc_t *e, int32_t m)
{
    const int32_t a = s->members[m].account;
    if (!e->m_done[a]) {
        e->m_done[a] = true;
        /* The members of each account in ascending index (s->ent_mem: from first[a] to
         * first[a + 1] in the list after first[]), made again when a member or an account
         * was added (a member never leaves nor changes account); under
         * fg__sched_set_plain, every member is read. */
        const size_t na = s->naccounts, nm = s->nmembers;
        if (fg__sc(s, FG__SC_MEMBER_LISTS) && (s->ent_mem_na != na || s->ent_mem_nm != nm)) {
            free(s->ent_mem);
            s->ent_mem = fg__alloc(sizeof(int32_t) * (na + 1 + nm));
            int32_t *first = s->ent_mem, *list = first + na + 1;
            memset(first, 0, sizeof(int32_t) * (na + 1));
            for (size_t i = 0; i < nm; i++)
                first[s->members[i].account + 1]++;
            for (size_t b = 0; b < na; b++)
                first[b + 1] += first[b];
            for (size_t i = 0; i < nm; i++) /* (first[b] ends at b's end, then moves back) */
                list[first[s->members[i].account]++] = (int32_t)i;
            for (size_t b = na; b > 0; b--)
                first[b] = first[b - 1];
            first[0] = 0;
            s->ent_mem_na = na;
            s->ent_mem_nm = nm;
        }
        const int32_t *list = s->ent_mem + na + 1;
        const size_t from = !fg__sc(s, FG__SC_MEMBER_LISTS) ? 0 : (size_t)s->ent_mem[a];
        const size_t to = !fg__sc(s, FG__SC_MEMBER_LISTS) ? nm : (size_t)s->ent_mem[a + 1];
        size_t c = 0;
        for (size_t k = from; k < to; k++) {
            const size_t i = !fg__sc(s, FG__SC_MEMBER_LISTS) ? k : (size_t)list[k];
            const fg__member_t *mb = &s->members[i];
            if (mb->account != a)
                continue;
            e->d[c] = (double)mb->running + (double)mb->pending_gpus;
            e->w[c] = mb->weight;
            e->ms[c++] = (int32_t)i;
        }
        fg__water_fill(c, e->d, e->w, e->ent_a[a], e->om, e->idx);
        for (size_t k = 0; k < c; k++)
            e->ent_m[e->ms[k]] = e->om[k];
    }
    return e->ent_m[m];
}

/* Has running job v run long enough to be stopped under fair share or las: quantum_s of
 * run time over all attempts, and in this attempt min_run_s and, when the job declares
 * one, a checkpoint interval (so every attempt keeps some progress)? If not, lowers
 * *wake to when it will have. */
static inline bool ran_enough(const fg__job_t *v, fg_time_t now, fg_time_t min_run,
                              fg_time_t quantum, fg_time_t *wake)
{
    fg_time_t ok_at = v->start_time + (min_run > v->ckpt ? min_run : v->ckpt);
    fg_time_t q = v->start_time + quantum - v->run_s;
    if (q > ok_at)
        ok_at = q;
    if (ok_at > now) {
        if (ok_at < *wake)
            *wake = ok_at;
        return false;
    }
    return true;
}

/* Is running job v a legal victim for waiting job j in this mode? Sets *wake when v
 * would become one later by running longer. `over`: under fair share, for v of another
 * account than j's, whether v's account runs more than its entitlement (the caller's
 * answer for the whole list: the same test), else -1. */
static bool victim_ok(fg_sched_t *s, const fg__job_t *j, const fg__job_t *v, fg_preempt_why_t why,
                      ent_calc_t *e, fg_time_t now, fg_time_t *wake, int over)
{
    if (v->preempting || v->state != FG_JOB_RUNNING || v->id == j->id)
        return false;
    /* Never start and stop a job at the same time (in one pass, or in a second pass at
     * that time: passes at one time decide what one pass would)... */
    if (v->start_time >= now) {
        if (now + 1 < *wake)
            *wake = now + 1; /* ...but it may be a victim a second later */
        return false;
    }
    if (why == FG_PREEMPT_PRIORITY)
        return v->prio == FG_PRIO_LOW;
    if (v->prio == FG_PRIO_HIGH || v->prio > j->prio)
        return false;
    fg_time_t ran = now - v->start_time;
    if (why == FG_PREEMPT_LAS) {
        int64_t att = v->attained_gpu_s + (int64_t)v->gpus * ran;
        if (fg__las_level(s, att) <= j->band) {
            /* its attained service grows while it runs: it may pass j's queue later */
            if (j->band + 1 < s->cfg.las_levels && v->gpus > 0) {
                int64_t need = s->cfg.las_thresholds_gpu_s[j->band] - att;
                fg_time_t at = now + (need + v->gpus - 1) / v->gpus;
                if (at > now && at < *wake)
                    *wake = at;
            }
            return false;
        }
    } else if (over >= 0) {
        if (!over)
            return false;
    } else {
        entitlements(s, e);
        if (v->account != j->account) {
            if ((double)s->accounts[v->account].running <= e->ent_a[v->account] + 1e-9)
                return false;
        } else if (v->member == j->member ||
                   (double)s->members[v->member].running <= ent_member(s, e, v->member) + 1e-9) {
            return false;
        }
    }
    /* Fair share and las stop only long runners (ran_enough) */
    return ran_enough(v, now, s->cfg.min_run_s, s->cfg.quantum_s, wake);
}

/* victim_ok under fair share for v of another account than j's, one that runs more
 * than its entitlement (over == 1), with the configuration's min_run_s and quantum_s
 * read once per search, and its class test made once per running list (`cls`: the
 * list's class is neither high nor above j's; a job's class never changes): the same
 * tests in the same order. */
static inline bool over_victim_ok(const fg__job_t *j, const fg__job_t *v, fg_time_t now,
                                  fg_time_t min_run, fg_time_t quantum, bool cls, fg_time_t *wake)
{
    if (v->preempting || v->state != FG_JOB_RUNNING || v->id == j->id)
        return false;
    if (v->start_time >= now) {
        if (now + 1 < *wake)
            *wake = now + 1;
        return false;
    }
    if (!cls)
        return false;
    return ran_enough(v, now, min_run, quantum, wake);
}

static int64_t lost_gpu_s(const fg__job_t *v, fg_time_t now)
{
    fg_time_t ran = now - v->start_time;
    return (int64_t)v->gpus * (v->ckpt > 0 ? ran % v->ckpt : ran);
}

typedef struct victim {
    int32_t slot;
    fg_job_id_t id;
    int64_t lost;
} victim_t;

static int victim_cmp(const void *a, const void *b)
{
    const victim_t *x = a, *y = b;
    if (x->lost != y->lost)
        return x->lost < y->lost ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id; /* not the slot: restores lay them out anew */
}

/* GPUs of node n that are free or held by a job already being preempted, and the
 * GPUs held by this pass's legal victims; *cost is what those victims lose. */
/* Is GPU i of node nd, in this walk's plan, held for another job of j's class or
 * higher (ahead of j)? Preempting cannot give j such a GPU. */
static bool held_for_other(const fg_sched_t *s, const fg__node_t *nd, int i, const fg__job_t *j)
{
    if (nd->touched != s->walk_no || !nd->res_job[i] || nd->res_job[i] == j->id)
        return false;
    const fg__job_t *r = fg__job_by_id(s, nd->res_job[i]);
    return r && r->prio >= j->prio;
}

/* GPUs of node nd that j could have: free or held by a job already being preempted,
 * and the GPUs held by this search's legal victims (not those held for another). */
static void node_room(const fg_sched_t *s, const fg__node_t *nd, const fg__job_t *j, int32_t *have,
                      int32_t *vict)
{
    *have = *vict = 0;
    for (int i = 0; i < nd->gpus; i++) {
        int32_t slot = nd->gpu_job[i];
        if (held_for_other(s, nd, i, j))
            continue;
        if (slot < 0 || s->jobs[slot].preempting)
            (*have)++;
        else if (s->jobs[slot].victim_pass == s->stamp)
            (*vict)++;
    }
}

/* GPUs of node nd held by job `slot` that job j could use once they are freed. */
static int32_t gpus_of_on(const fg_sched_t *s, const fg__node_t *nd, const fg__job_t *j,
                          int32_t slot)
{
    int32_t n = 0;
    for (int i = 0; i < nd->gpus; i++)
        n += nd->gpu_job[i] == slot && !held_for_other(s, nd, i, j);
    return n;
}

/* The distinct legal victims (this search's marks) running on node nd, cheapest
 * first; returns how many were written to vs (room for FG_MAX_NODE_GPUS). */
static int32_t node_victims(const fg_sched_t *s, const fg__node_t *nd, fg_time_t now, victim_t *vs)
{
    int32_t nv = 0;
    for (int i = 0; i < nd->gpus; i++) {
        int32_t slot = nd->gpu_job[i];
        if (slot < 0 || s->jobs[slot].victim_pass != s->stamp || s->jobs[slot].preempting)
            continue;
        bool seen = false;
        for (int32_t k = 0; k < nv; k++)
            seen |= vs[k].slot == slot;
        if (!seen) {
            vs[nv].slot = slot;
            vs[nv].id = s->jobs[slot].id;
            vs[nv].lost = lost_gpu_s(&s->jobs[slot], now);
            nv++;
        }
    }
    for (int32_t a = 1; a < nv; a++) { /* (at most FG_MAX_NODE_GPUS: by insertion) */
        victim_t x = vs[a];
        int32_t b = a;
        for (; b > 0 && victim_cmp(&vs[b - 1], &x) > 0; b--)
            vs[b] = vs[b - 1];
        vs[b] = x;
    }
    return nv;
}

static int int32_cmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* Tries to free room for blocked job j by preemption; pushes the victims.
 * Candidates come from the running lists of the accounts and classes that may lose
 * GPUs, so the cost is the number of possible victims, not the cluster size. */
void fg__try_preempt(fg_sched_t *s, fg__job_t *j, fg_time_t now, ent_calc_t *e, fg_decisions_t *out,
                     fg_time_t *wake)
{
    /* Victims already stopping for j: their GPUs go to j first (serve_claims), so it
     * never frees a second set, even when the walk's plan lends those GPUs to a
     * reservation ahead of j and its estimate stays in the future. */
    if (j->claim > 0)
        return;
    fg_preempt_why_t why;
    if (j->prio == FG_PRIO_HIGH) {
        why = FG_PREEMPT_PRIORITY;
    } else if (s->cfg.policy == FG_POLICY_WFQ || s->cfg.policy == FG_POLICY_RR ||
               s->cfg.policy == FG_POLICY_LAS) {
        fg_time_t ready = j->queued_since + s->cfg.preempt_wait_s;
        if (ready > now) {
            if (ready < *wake)
                *wake = ready;
            return;
        }
        why = s->cfg.policy == FG_POLICY_LAS ? FG_PREEMPT_LAS : FG_PREEMPT_FAIR_SHARE;
        if (why == FG_PREEMPT_FAIR_SHARE) {
            entitlements(s, e);
            bool acct_under =
                (double)s->accounts[j->account].running + j->gpus <= e->ent_a[j->account] + 1e-9;
            if (!acct_under && !((double)s->members[j->member].running + j->gpus <=
                                 ent_member(s, e, j->member) + 1e-9))
                return;
        }
    } else {
        return;
    }

    /* 1. legal victims, marked with victim_pass; their nodes become candidates */
    s->stamp++;
    const bool whole = j->gpus > FG_WHOLE_NODE_GPUS;
    const int32_t need_nodes = whole ? j->gpus / FG_WHOLE_NODE_GPUS : 1;
    /* (each node is a candidate at most once: room for all of them) */
    if (s->cand_cap < s->nnodes)
        s->cand = fg__grow(s->cand, &s->cand_cap, s->nnodes, sizeof *s->cand);
    int32_t *cand = s->cand;
    size_t ncand = 0;
    /* (in locals: the marks written below could alias them) */
    fg__job_t *const jobs = s->jobs;
    fg__node_t *const nodes = s->nodes;
    const int64_t stamp = s->stamp;
    const fg_time_t min_run = s->cfg.min_run_s, quantum = s->cfg.quantum_s;
    fg_time_t wk = *wake;
    for (size_t a = 0; a < s->naccounts; a++) {
        /* Under fair share no job of an account at or under its entitlement (not j's), nor
         * of j's account when j's member holds all its running GPUs, is a legal victim
         * (victim_ok); their lists are read only when one of their jobs may have started
         * at `now` (last_start), which lowers *wake. */
        if (why == FG_PREEMPT_FAIR_SHARE && s->accounts[a].last_start < now &&
            ((int32_t)a != j->account ? (double)s->accounts[a].running <= e->ent_a[a] + 1e-9
                                      : s->members[j->member].running == s->accounts[a].running) &&
            fg__sc(s, FG__SC_VICTIM_SKIP))
            continue;
        const int over = why == FG_PREEMPT_FAIR_SHARE && (int32_t)a != j->account &&
                                 fg__sc(s, FG__SC_VICTIM_SKIP)
                             ? !((double)s->accounts[a].running <= e->ent_a[a] + 1e-9)
                             : -1;
        for (int c = FG_PRIO_LOW; c <= FG_PRIO_NORMAL; c++) {
            if (why == FG_PREEMPT_PRIORITY && c != FG_PRIO_LOW)
                continue;
            const bool cls = c != FG_PRIO_HIGH && c <= (int)j->prio;
            for (int32_t v = s->accounts[a].run_head[c]; v >= 0; v = jobs[v].rnext) {
                fg__job_t *vj = &jobs[v];
                if (!(over == 1 ? over_victim_ok(j, vj, now, min_run, quantum, cls, &wk)
                                : victim_ok(s, j, vj, why, e, now, &wk, over)))
                    continue;
                vj->victim_pass = stamp;
                const int32_t nal = vj->nallocs;
                const fg_alloc_t *al = nal > 1 ? vj->allocm : &vj->alloc1;
                for (int32_t k = 0; k < nal; k++) {
                    fg__node_t *nd = &nodes[al[k].node];
                    /* (a job on one node holds all its GPUs there: fg__job_start,
                     * fg_sched_restore_running) */
                    const int32_t g = nal == 1 ? vj->gpus : __builtin_popcountll(al[k].gpu_mask);
                    if (nd->cand_pass == stamp) {
                        nd->cand_vict += g;
                        continue;
                    }
                    if (nd->state != FG_NODE_UP || !fg__type_matches(j, nd->type) ||
                        (whole ? nd->gpus < FG_WHOLE_NODE_GPUS : nd->gpus < j->gpus))
                        continue;
                    nd->cand_pass = stamp;
                    nd->cand_vict = g;
                    cand[ncand++] = al[k].node;
                }
            }
        }
    }
    *wake = wk;
    if (!ncand)
        return;
    /* whole-node jobs may also use nodes that are already entirely free */
    if (whole) {
        for (size_t n = 0; n < s->nnodes; n++) {
            fg__node_t *nd = &s->nodes[n];
            if (nd->cand_pass != s->stamp && nd->state == FG_NODE_UP &&
                fg__type_matches(j, nd->type) && nd->gpus >= FG_WHOLE_NODE_GPUS &&
                nd->nfree == nd->gpus) {
                nd->cand_pass = s->stamp;
                nd->cand_vict = 0;
                cand[ncand++] = (int32_t)n;
            }
        }
    }
    /* node_room's have + vict counts GPUs that are free (nfree), held by a job being
     * preempted or held by a legal victim (cand_vict), less those held for another: with
     * no job being preempted, nfree + cand_vict bounds it, and a node under the target
     * by that bound has no room (most candidates: their other GPUs run other jobs). Such
     * nodes are no candidates (unmarked: the order below reads the marks). */
    if (s->npreempting == 0 && fg__sc(s, FG__SC_CANDIDATE_BOUND)) {
        size_t k = 0;
        for (size_t ci = 0; ci < ncand; ci++) {
            fg__node_t *nd = &s->nodes[cand[ci]];
            if (nd->nfree + nd->cand_vict >= (whole ? nd->gpus : j->gpus))
                cand[k++] = cand[ci];
            else
                nd->cand_pass = 0;
        }
        ncand = k;
        if (!ncand)
            return;
    }
    /* ascending node index: the marked nodes read in order when they are many for the
     * cluster, else sorted (distinct indices: the same order either way) */
    if (ncand > 1 && s->nnodes <= 16 * ncand) {
        size_t k = 0;
        for (size_t n = 0; n < s->nnodes; n++)
            if (s->nodes[n].cand_pass == s->stamp)
                cand[k++] = (int32_t)n;
    } else if (ncand > 1 && ncand <= 16) {
        for (size_t a = 1; a < ncand; a++) {
            int32_t v = cand[a];
            size_t b = a;
            for (; b > 0 && cand[b - 1] > v; b--)
                cand[b] = cand[b - 1];
            cand[b] = v;
        }
    } else {
        qsort(cand, ncand, sizeof *cand, int32_cmp);
    }

    /* 2. cost of making room on each candidate node; keep the cheapest need_nodes */
    int32_t best_nodes[FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS];
    int64_t best_cost[FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS];
    int32_t nbest = 0;
    victim_t vs[FG_MAX_NODE_GPUS];
    for (size_t ci = 0; ci < ncand; ci++) {
        const fg__node_t *nd = &s->nodes[cand[ci]];
        int32_t have, vict;
        node_room(s, nd, j, &have, &vict);
        int32_t target = whole ? nd->gpus : j->gpus;
        if (have + vict < target)
            continue;
        int32_t nv = node_victims(s, nd, now, vs);
        int64_t cost = 0;
        for (int32_t k = 0; k < nv && have < target; k++) {
            have += gpus_of_on(s, nd, j, vs[k].slot);
            cost += vs[k].lost;
        }
        if (have < target)
            continue;
        int32_t p = nbest; /* insertion by (cost, node index): nodes come ascending */
        while (p > 0 && best_cost[p - 1] > cost)
            p--;
        if (p >= need_nodes)
            continue;
        int32_t last = nbest < need_nodes ? nbest : need_nodes - 1;
        for (int32_t q = last; q > p; q--) {
            best_nodes[q] = best_nodes[q - 1];
            best_cost[q] = best_cost[q - 1];
        }
        best_nodes[p] = cand[ci];
        best_cost[p] = cost;
        if (nbest < need_nodes)
            nbest++;
    }
    if (nbest < need_nodes)
        return;

    /* 3. preempt: on each chosen node, the cheapest victims until it has room */
    const size_t before = out->npreempts;
    for (int32_t b = 0; b < nbest; b++) {
        const fg__node_t *nd = &s->nodes[best_nodes[b]];
        int32_t have, vict;
        node_room(s, nd, j, &have, &vict);
        int32_t nv = node_victims(s, nd, now, vs);
        int32_t target = whole ? nd->gpus : j->gpus;
        for (int32_t k = 0; k < nv && have < target; k++) {
            fg__job_t *v = &s->jobs[vs[k].slot];
            have += gpus_of_on(s, nd, j, vs[k].slot);
            v->preempting = true;
            s->npreempting++;
            v->preempt_for = j->id;
            fg__push_preempt(out, v, why, j->id);
            j->claim++;
            if (!j->claimed) {
                j->claimed = true;
                s->claims = fg__grow(s->claims, &s->claims_cap, s->nclaims + 1, sizeof *s->claims);
                s->claims[s->nclaims++] = (int32_t)(j - s->jobs);
            }
            fg__plan_settle(s); /* queued estimates see the plan before this preemption */
            const fg_alloc_t *al = fg__job_allocs(v);
            for (int32_t k2 = 0; k2 < v->nallocs; k2++)
                fg__node_changed(s, al[k2].node); /* its GPUs are now "free soon" */
        }
    }
    if (out->npreempts > before)
        j->why.room.victim = out->preempts[out->npreempts - 1].job;
}

/* Starts, before the walk, the jobs that preemptions were issued for, so the GPUs
 * freed for them do not go to the jobs that were stopped (under fifo those come
 * first again). A claim ends when the job starts or no victim is left stopping. */
void fg__serve_claims(fg_sched_t *s, fg_time_t now, fg_decisions_t *out)
{
    if (!s->nclaims)
        return;
    /* deterministic whatever the insertion order: by (submit, id) */
    for (size_t a = 1; a < s->nclaims; a++) {
        int32_t v = s->claims[a];
        size_t b = a;
        while (b > 0 && fg__job_before(&s->jobs[v], &s->jobs[s->claims[b - 1]])) {
            s->claims[b] = s->claims[b - 1];
            b--;
        }
        s->claims[b] = v;
    }
    fg_alloc_t al[FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS];
    size_t keep = 0;
    for (size_t k = 0; k < s->nclaims; k++) {
        int32_t slot = s->claims[k];
        fg__job_t *j = &s->jobs[slot];
        if (j->state != FG_JOB_PENDING || !j->claimed)
            continue; /* started by a walk meanwhile */
        const fg__account_t *a = &s->accounts[j->account];
        fg_reason_t why;
        bool ok = j->eligible_time <= now && !a->budget_exhausted &&
                  (a->quota < 0 || a->running + j->gpus <= a->quota) && fg__feasible(s, j, &why);
        if (ok && (j->gpus <= FG_WHOLE_NODE_GPUS ? fg__place_single(s, j, now, al)
                                                 : fg__place_whole(s, j, now, al))) {
            int32_t n = j->gpus <= FG_WHOLE_NODE_GPUS ? 1 : j->gpus / FG_WHOLE_NODE_GPUS;
            fg__job_start(s, slot, al, n, now);
            fg__push_start(out, j, al, n);
            continue;
        }
        if (j->claim > 0) /* victims still stopping: keep waiting for their GPUs */
            s->claims[keep++] = slot;
        else
            j->claimed = false; /* they stopped and it still does not fit: plain order */
    }
    s->nclaims = keep;
}

/* Could try_preempt search for victims for blocked job j? Its first tests, which read
 * neither the plan nor the nodes: no while victims stop for j, yes for a high job, and
 * under wfq, round-robin and las only once j waited preempt_wait_s, and under fair share
 * only when j's account or member would stay within its entitlement. */
bool fg__preempt_may_search(fg_sched_t *s, const fg__job_t *j, fg_time_t now, ent_calc_t *e)
{
    if (j->claim > 0)
        return false;
    if (j->prio == FG_PRIO_HIGH)
        return true;
    const fg_policy_t p = s->cfg.policy;
    if (p != FG_POLICY_WFQ && p != FG_POLICY_RR && p != FG_POLICY_LAS)
        return false;
    if (j->queued_since + s->cfg.preempt_wait_s > now)
        return false;
    if (p == FG_POLICY_LAS)
        return true;
    entitlements(s, e);
    return (double)s->accounts[j->account].running + j->gpus <= e->ent_a[j->account] + 1e-9 ||
           (double)s->members[j->member].running + j->gpus <= ent_member(s, e, j->member) + 1e-9;
}
