/*
 * preempt.c - preemption: which blocked job may stop running ones, which running jobs
 * it may stop (its victims) and on which nodes, and, before the next walk, starting
 * the job those victims were stopped for (fg__serve_claims).
 *
 * A search for blocked job j (fg__try_preempt) reads, in order:
 *   1. may j search (search_why)? A high job always may (it stops low jobs); under
 *      wfq and round-robin (fair share) and las, a job that waited preempt_wait_s; under
 *      fair share only while its account, or its member, would stay within its
 *      entitlement with j's GPUs (the water fill of fairshare.c). Under fair
 *      (fair_search_why) a job within its entitlement searches by fair share, at once
 *      when its estimate is more than preempt_wait_s away; one beyond it searches by
 *      las after preempt_wait_s, taking victims only of its own account or of accounts
 *      over their entitlement.
 *   2. the legal victims (victim_ok): running, not already stopping, not started at
 *      this very time; for a high job, low jobs; else no high job, none of a class
 *      above j's, and only long runners (ran_enough): under fair share those of an
 *      account over its entitlement (or, in j's account, of a member over its part),
 *      under las those past j's las queue. They are marked, and the nodes they run on
 *      that could hold j are the candidates.
 *   3. on each candidate, the cheapest victims (the least work lost since their last
 *      checkpoint; under fair those of the latest LAS queue first) until j fits; the
 *      cheapest node (or the need_nodes cheapest for a whole-node job) wins, and its
 *      victims are stopped: j claims their GPUs.
 *
 * Worked example: one 8-GPU node, accounts A and B of weight 1. B runs two 4-GPU jobs,
 * b1 (1 h since its last checkpoint) and b2 (10 min); A's 4-GPU job a waited
 * preempt_wait_s. Demands A 4, B 8 on 8 GPUs: entitlements A 4, B 4. A holds 0 + 4 <= 4:
 * a may search. B runs 8 > 4: b1 and b2 are legal victims (if they ran min_run_s and
 * quantum_s). The node has 0 free and 8 held by victims; the cheapest first, b2 (4 GPUs
 * x 10 min lost), frees room enough: b2 is stopped, and a starts on its GPUs when they
 * are free.
 *
 * The same under fair, with b1 and b2 running since t=0 and a submitted at t=5000 with
 * both ending at t=100000: A is within its entitlement and a's estimate is 95000 s
 * away, more than preempt_wait_s, so a searches at once at t=5000. Had b1 been a job of
 * LAS queue 2 and b2 of queue 1, b1 would be stopped whatever their checkpoints.
 */
#include "plan.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ entitlements */

/* Does an account (member) holding `held` GPUs stay within its entitlement `ent`? GPU
 * counts are integers but entitlements are parts of a split (10 GPUs over three: 10/3),
 * and the split's roundings may leave an entitlement a few ulps under the count that
 * exactly meets it (3 x 10/3 adds up to 10 only within rounding): the tolerance, far
 * below one GPU, takes such a count as within. */
#define FG__ENT_TOLERANCE 1e-9
static bool within_entitlement(double held, double ent)
{
    return held <= ent + FG__ENT_TOLERANCE;
}

/* The accounts' entitlements, once per preemption search; the members' are made per
 * account when one of them is first read (ent_member): a search reads those of the
 * waiting job's account and of the victims' in that account only. One block
 * (s->ent_blk, kept from one search to the next) holds them and the scratch arrays. */
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
    if (fg__sc(s, FG__SC_WATERFILL_KEPT)) {
        /* the split stays sorted from the last search: only the accounts whose demand or
         * weight changed since move */
        fg_fair_kept_t *f = &s->ent_wf;
        if (f->n != na) /* (a new account: start again) */
            fg_fair_kept_init(f, na);
        for (size_t i = 0; i < na; i++) {
            const double d = (double)s->accounts[i].running + (double)s->accounts[i].pending_gpus;
            if (d != f->d[i] || s->accounts[i].weight != f->w[i]) /* (most have not: no call) */
                fg_fair_kept_set(f, i, d, s->accounts[i].weight);
        }
        fg_fair_kept_fill(f, cap, e->ent_a);
    } else {
        for (size_t i = 0; i < na; i++) {
            e->d[i] = (double)s->accounts[i].running + (double)s->accounts[i].pending_gpus;
            e->w[i] = s->accounts[i].weight;
        }
        fg_fair_water_fill(na, e->d, e->w, cap, e->ent_a, e->idx);
    }
#ifndef NDEBUG
    double sum = 0;
    for (size_t i = 0; i < na; i++)
        sum += e->ent_a[i];
    assert(within_entitlement(sum, cap)); /* the split gives out at most the GPUs up */
#endif
}

/* Member m's entitlement (entitlements made): its account's entitlement split among the
 * account's members in ascending index order, made for all of them at the first read. */
static double ent_member(fg_sched_t *s, ent_calc_t *e, int32_t m)
{
    const int32_t a = s->members[m].account;
    if (!e->m_done[a]) {
        e->m_done[a] = true;
        size_t c = 0;
        for (size_t i = 0; i < s->nmembers; i++) {
            const fg__member_t *mb = &s->members[i];
            if (mb->account != a)
                continue;
            e->d[c] = (double)mb->running + (double)mb->pending_gpus;
            e->w[c] = mb->weight;
            e->ms[c++] = (int32_t)i;
        }
        fg_fair_water_fill(c, e->d, e->w, e->ent_a[a], e->om, e->idx);
        for (size_t k = 0; k < c; k++)
            e->ent_m[e->ms[k]] = e->om[k];
    }
    return e->ent_m[m];
}

/* Does account a, with `extra` GPUs more, stay within its entitlement (entitlements
 * made)? */
static bool account_within(const fg_sched_t *s, const ent_calc_t *e, int32_t a, int32_t extra)
{
    return within_entitlement((double)s->accounts[a].running + extra, e->ent_a[a]);
}

/* The same for member m (its entitlement made at the first read). */
static bool member_within(fg_sched_t *s, ent_calc_t *e, int32_t m, int32_t extra)
{
    return within_entitlement((double)s->members[m].running + extra, ent_member(s, e, m));
}

/* ------------------------------------------------------------------ who may search */

/* May blocked job j search for victims now, and why (step 1 of the banner)? Lowers
 * *wake to when j will have waited preempt_wait_s. */
/* Has blocked job j waited preempt_wait_s since it was queued? If not, lowers *wake to
 * when it will have. */
static bool waited_enough(const fg_sched_t *s, const fg__job_t *j, fg_time_t now, fg_time_t *wake)
{
    const fg_time_t ready = j->queued_since + s->cfg.preempt_wait_s;
    if (ready > now) {
        if (ready < *wake)
            *wake = ready;
        return false;
    }
    return true;
}

/* Under fair: a job whose account (or member inside it) stays within its entitlement
 * with j's GPUs searches over-share long runners (fair share) at once when its estimate
 * says it would otherwise wait more than preempt_wait_s, else once it has waited that
 * long; a job beyond its entitlement, once it has waited preempt_wait_s, searches jobs
 * past its LAS queue, of its own account or an over-share one (las). j is a preemption
 * candidate: its estimate is made and in the future. */
static bool fair_search_why(fg_sched_t *s, const fg__job_t *j, fg_time_t now, ent_calc_t *e,
                            fg_time_t *wake, fg_preempt_why_t *why)
{
    entitlements(s, e);
    if (account_within(s, e, j->account, j->gpus) || member_within(s, e, j->member, j->gpus)) {
        *why = FG_PREEMPT_FAIR_SHARE;
        return j->est - now > s->cfg.preempt_wait_s || waited_enough(s, j, now, wake);
    }
    *why = FG_PREEMPT_LAS;
    /* (in the last LAS queue no running job can be past it) */
    return fg__band_las(s, j->band) + 1 < s->cfg.las_levels && waited_enough(s, j, now, wake);
}

static bool search_why(fg_sched_t *s, const fg__job_t *j, fg_time_t now, ent_calc_t *e,
                       fg_time_t *wake, fg_preempt_why_t *why)
{
    assert(j->claim >= 0);
    /* Victims already stopping for j: their GPUs go to j first (serve_claims), so it
     * never frees a second set, even when the walk's plan lends those GPUs to a
     * reservation ahead of j and its estimate stays in the future. */
    if (j->claim > 0)
        return false;
    if (j->prio == FG_PRIO_HIGH) {
        *why = FG_PREEMPT_PRIORITY;
        return true;
    }
    const fg_policy_t p = s->cfg.policy;
    if (p == FG_POLICY_FAIR)
        return fair_search_why(s, j, now, e, wake, why);
    if (p != FG_POLICY_WFQ && p != FG_POLICY_RR && p != FG_POLICY_LAS)
        return false;
    if (!waited_enough(s, j, now, wake))
        return false;
    if (p == FG_POLICY_LAS) {
        *why = FG_PREEMPT_LAS;
        return true;
    }
    *why = FG_PREEMPT_FAIR_SHARE;
    entitlements(s, e);
    return account_within(s, e, j->account, j->gpus) || member_within(s, e, j->member, j->gpus);
}

/* Could try_preempt search for victims for blocked job j? Its first tests, which read
 * neither the plan nor the nodes (search_why). */
bool fg__preempt_may_search(fg_sched_t *s, const fg__job_t *j, fg_time_t now, ent_calc_t *e)
{
    fg_time_t wake = FG_TIME_NEVER;
    fg_preempt_why_t why;
    return search_why(s, j, now, e, &wake, &why);
}

/* ------------------------------------------------------------------ legal victims */

/* One search for blocked job j: what its steps share. */
typedef struct search {
    fg_sched_t *s;
    fg__job_t *j;
    fg_time_t now;
    fg_preempt_why_t why;
    ent_calc_t *e;
    fg_time_t wake;     /* lowered to when a job would become a victim by running longer */
    bool whole;         /* j takes whole nodes */
    int32_t need_nodes; /* nodes j needs */
    int32_t *cand;      /* candidate nodes (room for every node: each is one at most once) */
    size_t ncand;
} search_t;

/* When has (or will have) running job v run long enough to be stopped under fair share
 * or las: quantum_s of run time over all attempts, and in this attempt min_run_s and,
 * when the job declares one, a checkpoint interval (so every attempt keeps some
 * progress)? */
static fg_time_t ran_enough_at(const fg_sched_t *s, const fg__job_t *v)
{
    const fg_time_t min_run = s->cfg.min_run_s;
    fg_time_t ok_at = v->start_time + (min_run > v->ckpt ? min_run : v->ckpt);
    const fg_time_t q = v->start_time + s->cfg.quantum_s - v->run_s;
    return q > ok_at ? q : ok_at;
}

/* Is `at` (when a job becomes a victim) past? If not, lowers *wake to it. */
static bool reached(fg_time_t at, fg_time_t now, fg_time_t *wake)
{
    if (at <= now)
        return true;
    if (at < *wake)
        *wake = at;
    return false;
}

/* When has (or will have) running job v, its attained service growing while it runs,
 * passed j's las queue? FG__INF: never (j is in the last queue). */
static fg_time_t las_passed_at(const fg_sched_t *s, const fg__job_t *j, const fg__job_t *v,
                               fg_time_t now)
{
    const int32_t jq = fg__band_las(s, j->band);
    if (jq + 1 >= s->cfg.las_levels)
        return FG__INF;
    /* (past queue jq: at least the threshold that ends it, the thresholds ascending) */
    const int64_t att = v->attained_gpu_s + (int64_t)v->gpus * (now - v->start_time);
    const int64_t need = s->cfg.las_thresholds_gpu_s[jq] - att;
    assert(v->gpus > 0);
    return need <= 0 ? now : now + (need + v->gpus - 1) / v->gpus;
}

/* Under fair share: does v's account (v of another account than j's) or v's member (in
 * j's account, not j's member) run more than its entitlement? */
static bool over_entitlement(search_t *q, const fg__job_t *v)
{
    fg_sched_t *s = q->s;
    entitlements(s, q->e);
    if (v->account != q->j->account)
        return !account_within(s, q->e, v->account, 0);
    return v->member != q->j->member && !member_within(s, q->e, v->member, 0);
}

/* Is running job v a legal victim for this search (step 2 of the banner)? Lowers
 * q->wake when v would become one later. `over`: under fair share (and las under fair),
 * for v of another account than j's, whether v's account runs more than its entitlement
 * (the caller's answer for the whole account), else -1. */
static bool victim_ok(search_t *q, const fg__job_t *v, int over)
{
    const fg__job_t *j = q->j;
    if (v->preempting || v->state != FG_JOB_RUNNING || v->id == j->id)
        return false;
    /* Never start and stop a job at the same time (in one pass, or in a second pass at
     * that time: passes at one time decide what one pass would)... */
    if (v->start_time >= q->now) {
        if (q->now + 1 < q->wake)
            q->wake = q->now + 1; /* ...but it may be a victim a second later */
        return false;
    }
    if (q->why == FG_PREEMPT_PRIORITY)
        return v->prio == FG_PRIO_LOW;
    if (v->prio == FG_PRIO_HIGH || v->prio > j->prio)
        return false;
    if (q->why == FG_PREEMPT_LAS) {
        /* fair: an over-share job takes only from its own account or an over-share one
         * (tested first: an account within its entitlement lowers no wake, victim-skip) */
        if (q->s->cfg.policy == FG_POLICY_FAIR && v->account != j->account &&
            !(over >= 0 ? over : over_entitlement(q, v)))
            return false;
        const fg_time_t las_at = las_passed_at(q->s, j, v, q->now);
        if (q->s->cfg.policy == FG_POLICY_FAIR) { /* (the wake: when both hold) */
            const fg_time_t ran_at = ran_enough_at(q->s, v);
            return reached(las_at > ran_at ? las_at : ran_at, q->now, &q->wake);
        }
        if (!reached(las_at, q->now, &q->wake))
            return false;
    } else if (!(over >= 0 ? over : over_entitlement(q, v))) {
        return false;
    }
    /* Fair share and las stop only long runners */
    return reached(ran_enough_at(q->s, v), q->now, &q->wake);
}

/* ------------------------------------------------------------------ candidate nodes */

/* Could node nd hold j (up, of j's type, large enough)? */
static bool node_fits(const search_t *q, const fg__node_t *nd)
{
    return nd->state == FG_NODE_UP && fg__type_matches(q->j, nd->type) &&
           (q->whole ? nd->gpus >= FG_WHOLE_NODE_GPUS : nd->gpus >= q->j->gpus);
}

/* Marks legal victim v, counts its GPUs on each of its nodes (cand_vict), and makes
 * those nodes that could hold j candidates. */
static void mark_victim(search_t *q, fg__job_t *v)
{
    v->victim_pass = q->s->stamp;
    const fg_alloc_t *al = fg__job_allocs(v);
    for (int32_t k = 0; k < v->nallocs; k++) {
        fg__node_t *nd = &q->s->nodes[al[k].node];
        /* (a job on one node holds all its GPUs there: fg__job_start,
         * fg_sched_restore_running) */
        const int32_t g = v->nallocs == 1 ? v->gpus : __builtin_popcountll(al[k].gpu_mask);
        if (nd->cand_pass == q->s->stamp) {
            nd->cand_vict += g;
        } else if (node_fits(q, nd)) {
            nd->cand_pass = q->s->stamp;
            nd->cand_vict = g;
            q->cand[q->ncand++] = al[k].node;
        }
    }
}

/* Does this search take victims of other accounts only from those over their
 * entitlement (fair share, and las under fair)? */
static bool account_rule(const search_t *q)
{
    return q->why == FG_PREEMPT_FAIR_SHARE ||
           (q->why == FG_PREEMPT_LAS && q->s->cfg.policy == FG_POLICY_FAIR);
}

/* Shortcut "victim-skip", under fair share (and las under fair): can account a have no
 * legal victim? Not one of an account within its entitlement (not j's), nor, under fair
 * share, of j's account when j's member holds all its running GPUs (victim_ok); only
 * when none of its jobs may have started at `now` (last_start), which would lower the
 * wake. */
static bool account_skipped(const search_t *q, int32_t a)
{
    const fg_sched_t *s = q->s;
    if (!account_rule(q) || !fg__sc(s, FG__SC_VICTIM_SKIP) || s->accounts[a].last_start >= q->now)
        return false;
    if (a != q->j->account)
        return account_within(s, q->e, a, 0);
    return q->why == FG_PREEMPT_FAIR_SHARE &&
           s->members[q->j->member].running == s->accounts[a].running;
}

/* Marks every legal victim, from the running lists of the accounts and classes that
 * may lose GPUs (the cost is the number of possible victims, not the cluster size),
 * and gathers the candidate nodes. */
static void mark_victims(search_t *q)
{
    fg_sched_t *s = q->s;
    for (size_t a = 0; a < s->naccounts; a++) {
        if (account_skipped(q, (int32_t)a))
            continue;
        /* (victim-skip: the account's answer once for all its jobs) */
        const int over =
            account_rule(q) && (int32_t)a != q->j->account && fg__sc(s, FG__SC_VICTIM_SKIP)
                ? !account_within(s, q->e, (int32_t)a, 0)
                : -1;
        for (int c = FG_PRIO_LOW; c <= FG_PRIO_NORMAL; c++) {
            if (q->why == FG_PREEMPT_PRIORITY && c != FG_PRIO_LOW)
                continue;
            for (int32_t v = s->accounts[a].run_head[c]; v >= 0; v = s->jobs[v].rnext)
                if (victim_ok(q, &s->jobs[v], over))
                    mark_victim(q, &s->jobs[v]);
        }
    }
}

/* Whole-node jobs may also use nodes that are already entirely free. */
static void add_free_whole_nodes(search_t *q)
{
    fg_sched_t *s = q->s;
    for (size_t n = 0; n < s->nnodes; n++) {
        fg__node_t *nd = &s->nodes[n];
        if (nd->cand_pass != s->stamp && node_fits(q, nd) && nd->nfree == nd->gpus) {
            nd->cand_pass = s->stamp;
            nd->cand_vict = 0;
            q->cand[q->ncand++] = (int32_t)n;
        }
    }
}

/* Shortcut "candidate-bound": node_room's have + vict counts GPUs that are free
 * (nfree), held by a job being preempted or held by a legal victim (cand_vict), less
 * those held for another: with no job being preempted, nfree + cand_vict bounds it, and
 * a node under the target by that bound has no room (most candidates: their other GPUs
 * run other jobs). Such nodes are no candidates (unmarked: sort_candidates reads the
 * marks). */
static void drop_bounded(search_t *q)
{
    fg_sched_t *s = q->s;
    if (s->npreempting != 0 || !fg__sc(s, FG__SC_CANDIDATE_BOUND))
        return;
    size_t k = 0;
    for (size_t c = 0; c < q->ncand; c++) {
        fg__node_t *nd = &s->nodes[q->cand[c]];
        if (nd->nfree + nd->cand_vict >= (q->whole ? nd->gpus : q->j->gpus))
            q->cand[k++] = q->cand[c];
        else
            nd->cand_pass = 0;
    }
    q->ncand = k;
}

static int int32_cmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* The candidates in ascending node index: the marked nodes read in order when they are
 * many for the cluster, else sorted (distinct indices: the same order either way). */
static void sort_candidates(search_t *q)
{
    const fg_sched_t *s = q->s;
    if (q->ncand > 1 && s->nnodes <= 16 * q->ncand) {
        size_t k = 0;
        for (size_t n = 0; n < s->nnodes; n++)
            if (s->nodes[n].cand_pass == s->stamp)
                q->cand[k++] = (int32_t)n;
    } else {
        qsort(q->cand, q->ncand, sizeof *q->cand, int32_cmp);
    }
}

/* ------------------------------------------------------------------ choosing victims */

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

/* GPU-seconds that stopping v now loses: its run since its last checkpoint. */
static int64_t lost_gpu_s(const fg__job_t *v, fg_time_t now)
{
    fg_time_t ran = now - v->start_time;
    return (int64_t)v->gpus * (v->ckpt > 0 ? ran % v->ckpt : ran);
}

typedef struct victim {
    int32_t slot;
    fg_job_id_t id;
    int32_t queue; /* fair: its LAS queue (attained service, this run included); else 0 */
    int64_t lost;
} victim_t;

/* Cheaper first: under fair the later LAS queue first (the longest runners, as LAS would
 * stop them), then by (lost, id); not the slot, which restores lay out anew. */
static bool victim_before(const victim_t *x, const victim_t *y)
{
    if (x->queue != y->queue)
        return x->queue > y->queue;
    return x->lost < y->lost || (x->lost == y->lost && x->id < y->id);
}

/* Running job v's LAS queue under fair, its attained service counting this run; else 0. */
static int32_t victim_queue(const fg_sched_t *s, const fg__job_t *v, fg_time_t now)
{
    if (s->cfg.policy != FG_POLICY_FAIR)
        return 0;
    return (int32_t)fg__las_level(s, v->attained_gpu_s + (int64_t)v->gpus * (now - v->start_time));
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
        if (seen)
            continue;
        /* insertion by cost (at most FG_MAX_NODE_GPUS victims) */
        const fg__job_t *v = &s->jobs[slot];
        const victim_t x = {slot, v->id, victim_queue(s, v, now), lost_gpu_s(v, now)};
        int32_t b = nv++;
        for (; b > 0 && victim_before(&x, &vs[b - 1]); b--)
            vs[b] = vs[b - 1];
        vs[b] = x;
    }
    return nv;
}

/* What stopping victim x costs: the work it loses; under fair first its LAS queue, so
 * that a node whose victims are in later queues is the cheaper (one queue earlier
 * weighs more than any work lost: 2^40 GPU-seconds). */
static int64_t victim_cost(const fg_sched_t *s, const victim_t *x)
{
    if (s->cfg.policy != FG_POLICY_FAIR)
        return x->lost;
    const int64_t earlier = s->cfg.las_levels - 1 - x->queue;
    return earlier * ((int64_t)1 << 40) + x->lost;
}

/* Can stopping victims on candidate nd make room for j? If so, *cost is what the
 * cheapest victims that do lose. */
static bool node_cost(const search_t *q, const fg__node_t *nd, int64_t *cost)
{
    int32_t have, vict;
    node_room(q->s, nd, q->j, &have, &vict);
    const int32_t target = q->whole ? nd->gpus : q->j->gpus;
    if (have + vict < target)
        return false;
    victim_t vs[FG_MAX_NODE_GPUS];
    const int32_t nv = node_victims(q->s, nd, q->now, vs);
    *cost = 0;
    for (int32_t k = 0; k < nv && have < target; k++) {
        have += gpus_of_on(q->s, nd, q->j, vs[k].slot);
        *cost += victim_cost(q->s, &vs[k]);
    }
    return have >= target;
}

/* The need_nodes cheapest candidates into best[] by (cost, node index); returns how
 * many have room (fewer than need_nodes: no room for j). */
static int32_t choose_nodes(const search_t *q, int32_t *best)
{
    int64_t best_cost[FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS];
    int32_t nbest = 0;
    for (size_t c = 0; c < q->ncand; c++) {
        int64_t cost;
        if (!node_cost(q, &q->s->nodes[q->cand[c]], &cost))
            continue;
        int32_t p = nbest; /* insertion by (cost, node index): nodes come ascending */
        while (p > 0 && best_cost[p - 1] > cost)
            p--;
        if (p >= q->need_nodes)
            continue;
        int32_t last = nbest < q->need_nodes ? nbest : q->need_nodes - 1;
        for (int32_t k = last; k > p; k--) {
            best[k] = best[k - 1];
            best_cost[k] = best_cost[k - 1];
        }
        best[p] = q->cand[c];
        best_cost[p] = cost;
        if (nbest < q->need_nodes)
            nbest++;
    }
    return nbest;
}

/* Stops victim v for j (a decision in out), and makes j claim its GPUs. */
static void stop_victim(search_t *q, fg__job_t *v, fg_decisions_t *out)
{
    fg_sched_t *s = q->s;
    fg__job_t *j = q->j;
    assert(v->state == FG_JOB_RUNNING && !v->preempting);
    assert(v->id != j->id); /* never preempted for itself */
    v->preempting = true;
    s->npreempting++;
    v->preempt_for = j->id;
    fg__push_preempt(out, v, q->why, j->id);
    j->claim++;
    if (!j->claimed) {
        j->claimed = true;
        s->claims = fg__grow(s->claims, &s->claims_cap, s->nclaims + 1, sizeof *s->claims);
        s->claims[s->nclaims++] = (int32_t)(j - s->jobs);
    }
    fg__plan_settle(s); /* queued estimates see the plan before this preemption */
    const fg_alloc_t *al = fg__job_allocs(v);
    for (int32_t k = 0; k < v->nallocs; k++)
        fg__node_changed(s, al[k].node); /* its GPUs are now "free soon" */
}

/* On each chosen node, stops the cheapest victims until j has room there. */
static void issue(search_t *q, const int32_t *best, int32_t nbest, fg_decisions_t *out)
{
    const size_t before = out->npreempts;
    for (int32_t b = 0; b < nbest; b++) {
        const fg__node_t *nd = &q->s->nodes[best[b]];
        int32_t have, vict;
        node_room(q->s, nd, q->j, &have, &vict);
        victim_t vs[FG_MAX_NODE_GPUS];
        const int32_t nv = node_victims(q->s, nd, q->now, vs);
        const int32_t target = q->whole ? nd->gpus : q->j->gpus;
        for (int32_t k = 0; k < nv && have < target; k++) {
            have += gpus_of_on(q->s, nd, q->j, vs[k].slot);
            stop_victim(q, &q->s->jobs[vs[k].slot], out);
        }
    }
    if (out->npreempts > before)
        q->j->why.room.victim = out->preempts[out->npreempts - 1].job;
}

/* Tries to free room for blocked job j by preemption (the banner's steps); pushes the
 * victims to out and lowers *wake to when a search could find more. */
void fg__try_preempt(fg_sched_t *s, fg__job_t *j, fg_time_t now, ent_calc_t *e, fg_decisions_t *out,
                     fg_time_t *wake)
{
    search_t q = {.s = s, .j = j, .now = now, .e = e};
    if (!search_why(s, j, now, e, wake, &q.why))
        return;
    q.whole = j->gpus > FG_WHOLE_NODE_GPUS;
    q.need_nodes = q.whole ? j->gpus / FG_WHOLE_NODE_GPUS : 1;
    if (s->cand_cap < s->nnodes)
        s->cand = fg__grow(s->cand, &s->cand_cap, s->nnodes, sizeof *s->cand);
    q.cand = s->cand;
    q.wake = FG_TIME_NEVER;
    s->stamp++; /* (this search's marks: victim_pass, cand_pass) */
    mark_victims(&q);
    if (q.wake < *wake)
        *wake = q.wake;
    if (!q.ncand)
        return;
    if (q.whole)
        add_free_whole_nodes(&q);
    drop_bounded(&q);
    if (!q.ncand)
        return;
    sort_candidates(&q);
    int32_t best[FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS];
    const int32_t nbest = choose_nodes(&q, best);
    if (nbest == q.need_nodes)
        issue(&q, best, nbest, out);
}

/* ------------------------------------------------------------------ claims */

/* Can claiming job j start now (eligible, budget and quota, a feasible size), and
 * where? Writes its allocations to al and their number to *n. */
static bool claim_fits(fg_sched_t *s, const fg__job_t *j, fg_time_t now, fg_alloc_t *al, int32_t *n)
{
    const fg__account_t *a = &s->accounts[j->account];
    fg_reason_t why;
    if (j->eligible_time > now || fg__budget_blocks(a, j) ||
        (a->quota >= 0 && a->running + j->gpus > a->quota) || !fg__feasible(s, j, &why))
        return false;
    const bool single = j->gpus <= FG_WHOLE_NODE_GPUS;
    *n = single ? 1 : j->gpus / FG_WHOLE_NODE_GPUS;
    return single ? fg__place_single(s, j, now, al) : fg__place_whole(s, j, now, al);
}

/* Starts, before the walk, the jobs that preemptions were issued for, so the GPUs
 * freed for them do not go to the jobs that were stopped (under fifo those come
 * first again). A claim ends when the job starts or no victim is left stopping. */
void fg__serve_claims(fg_sched_t *s, fg_time_t now, fg_decisions_t *out)
{
    if (!s->nclaims)
        return;
    /* by (submit time, id), whatever the order they were made in (a few: by insertion) */
    for (size_t a = 1; a < s->nclaims; a++) {
        const int32_t v = s->claims[a];
        size_t b = a;
        for (; b > 0 && fg__job_before(&s->jobs[v], &s->jobs[s->claims[b - 1]]); b--)
            s->claims[b] = s->claims[b - 1];
        s->claims[b] = v;
    }
    fg_alloc_t al[FG_MAX_JOB_GPUS / FG_WHOLE_NODE_GPUS];
    size_t keep = 0;
    for (size_t k = 0; k < s->nclaims; k++) {
        int32_t slot = s->claims[k];
        fg__job_t *j = &s->jobs[slot];
        if (j->state != FG_JOB_PENDING || !j->claimed)
            continue; /* started by a walk meanwhile */
        assert(j->claim >= 0);
        int32_t n;
        if (claim_fits(s, j, now, al, &n)) {
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
