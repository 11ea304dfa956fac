/*
 * why.c - why one pending job waits, with the numbers behind its reason (fairgpu/why.h).
 *
 * Made on demand for the one job asked: its reason code as fg_sched_job_info gives it,
 * then the evidence of every kind, each cheap to read (the caller shows the ones that
 * apply):
 *   fair share   its account's decayed usage against the other accounts', its share,
 *                usage share and factor, entitlement = share x GPUs up; the same for its
 *                user inside the account (entitlement: of the account's);
 *   position     one walk of the plan order (bounded): its place, the jobs and GPUs
 *                before it, the first few of them and why each goes first (a higher
 *                class, a lower LAS queue, lower usage for its share, an earlier submit,
 *                the round-robin turn);
 *   GPU type     GPUs of its type on up nodes, free, and on all nodes;
 *   fragmentation the largest free block per node, and the nodes that could hold it,
 *                each with the time its running jobs' time limits free enough GPUs.
 *
 * Worked example: nodes n0 and n1 of 8 GPUs; on n0 job 1 (2 GPUs, ends t=100) and job
 * 2 (1 GPU, ends t=300), on n1 job 3 (3 GPUs, ends t=200). An 8-GPU job: free 10,
 * largest 5 (n0), then 5 (n1); holders: n0 at t=300 after job 2, n1 at t=200 after job
 * 3, listed earliest first: n1 (t=200), n0 (t=300).
 */
#include "fairgpu/why.h"

#include "plan.h"

#include <stdlib.h>
#include <string.h>

const char *fg_why_first_name(fg_why_first_t f)
{
    switch (f) {
    case FG_FIRST_CLASS:
        return "class";
    case FG_FIRST_LAS:
        return "las";
    case FG_FIRST_SHARE:
        return "share";
    case FG_FIRST_SUBMIT:
        return "submit";
    case FG_FIRST_TURN:
        return "turn";
    }
    return "?";
}

/* ------------------------------------------------------------------ fair share */

/* usage_share and factor of sh from its usage, its siblings' and its share */
static void share_finish(fg_why_share_t *sh)
{
    const double total = sh->usage + sh->siblings_usage;
    sh->usage_share = total > 0 ? sh->usage / total : 0;
    sh->factor = fg_fair_share_factor(sh->usage, total, sh->share);
}

/* Account a's fair share among all accounts as of now. */
static void account_share(const fg_sched_t *s, int32_t a, fg_time_t now, fg_why_share_t *sh)
{
    double wsum = 0, others = 0;
    for (size_t i = 0; i < s->naccounts; i++) {
        const fg__account_t *x = &s->accounts[i];
        double u = x->usage;
        fg_time_t at = x->usage_at;
        fg__usage_advance(s, &u, &at, x->running, now);
        wsum += x->weight;
        if ((int32_t)i == a)
            sh->usage = u;
        else
            others += u;
    }
    const fg__account_t *x = &s->accounts[a];
    sh->name = x->name;
    sh->siblings_usage = others;
    sh->share = wsum > 0 ? x->weight / wsum : 0;
    sh->entitlement_gpus = sh->share * (double)fg_sched_gpus_up(s);
    sh->running_gpus = x->running;
    share_finish(sh);
}

/* Member m's fair share among its account's members; acct_ent: the account's. */
static void member_share(const fg_sched_t *s, int32_t m, fg_time_t now, double acct_ent,
                         fg_why_share_t *sh)
{
    const int32_t a = s->members[m].account;
    double wsum = 0, others = 0;
    for (size_t i = 0; i < s->nmembers; i++) {
        const fg__member_t *x = &s->members[i];
        if (x->account != a)
            continue;
        double u = x->usage;
        fg_time_t at = x->usage_at;
        fg__usage_advance(s, &u, &at, x->running, now);
        wsum += x->weight;
        if ((int32_t)i == m)
            sh->usage = u;
        else
            others += u;
    }
    const fg__member_t *x = &s->members[m];
    sh->name = x->user;
    sh->siblings_usage = others;
    sh->share = wsum > 0 ? x->weight / wsum : 0;
    sh->entitlement_gpus = sh->share * acct_ent;
    sh->running_gpus = x->running;
    share_finish(sh);
}

/* ------------------------------------------------------------------ position */

/* Why job x, met before j in the plan order, goes first. */
static fg_why_first_t first_because(const fg_sched_t *s, const fg__job_t *x, const fg__job_t *j)
{
    const fg_policy_t p = s->cfg.policy;
    if (x->band != j->band) {
        const bool classes = p != FG_POLICY_FIFO && p != FG_POLICY_LAS;
        return classes && x->prio != j->prio ? FG_FIRST_CLASS : FG_FIRST_LAS;
    }
    if (fg__keyed(s) && x->member != j->member)
        return FG_FIRST_SHARE;
    if (p == FG_POLICY_RR && x->member != j->member)
        return FG_FIRST_TURN;
    return FG_FIRST_SUBMIT;
}

/* An asked job's slot and its index in the caller's arrays, sorted by slot. */
typedef struct asked {
    int32_t slot;
    size_t idx;
} asked_t;

static int asked_cmp(const void *x, const void *y)
{
    const asked_t *a = x, *b = y;
    return a->slot < b->slot ? -1 : a->slot > b->slot;
}

/* The first entry of v[0..n) (sorted) with `slot`, or NULL. */
static const asked_t *asked_find(const asked_t *v, size_t n, int32_t slot)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (v[mid].slot < slot)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo].slot == slot ? &v[lo] : NULL;
}

/* What goes before the job of w (slot js) in the order: the jobs ahead[0..nahead) met
 * first (at most FG_WHY_AHEAD_MAX), each with why it goes first. */
static void ahead_fill(const fg_sched_t *s, const int32_t *ahead, size_t nahead, int32_t js,
                       fg_why_t *w)
{
    const fg__job_t *j = &s->jobs[js];
    for (size_t k = 0; k < nahead && w->nahead < FG_WHY_AHEAD_MAX; k++) {
        const fg__job_t *x = &s->jobs[ahead[k]];
        w->ahead[w->nahead++] = (fg_why_ahead_t){.id = x->id,
                                                 .account = s->accounts[x->account].name,
                                                 .gpus = x->gpus,
                                                 .prio = x->prio,
                                                 .first = first_because(s, x, j)};
    }
}

/* One walk of the plan order (at most max jobs) for the n asked jobs v[] (sorted by
 * slot; out[v[k].idx] is each one's): their places, and what goes before each. The walk
 * stops once it met them all. */
static void positions(fg_sched_t *s, const asked_t *v, size_t n, fg_time_t now, size_t max,
                      fg_why_t *out)
{
    fg__order_t o = {0};
    fg__order_prepare(s, &o, now);
    int32_t first[FG_WHY_AHEAD_MAX];
    size_t nfirst = 0, seen = 0, found = 0;
    int64_t gpus = 0;
    int32_t slot;
    while (found < n && seen < max && (slot = fg__order_next(s, &o)) >= 0) {
        assert(s->jobs[slot].state == FG_JOB_PENDING);
        seen++;
        for (const asked_t *a = asked_find(v, n, slot); a && a < v + n && a->slot == slot; a++) {
            fg_why_t *w = &out[a->idx];
            w->position = (int64_t)seen;
            w->ahead_jobs = (int64_t)seen - 1;
            w->ahead_gpus = gpus;
            ahead_fill(s, first, nfirst, slot, w);
            found++;
        }
        gpus += s->jobs[slot].gpus;
        if (nfirst < FG_WHY_AHEAD_MAX)
            first[nfirst++] = slot;
    }
    fg__order_free(&o);
    for (size_t k = 0; k < n; k++) { /* past the bound: the bound and the first jobs */
        fg_why_t *w = &out[v[k].idx];
        if (w->position)
            continue;
        w->ahead_jobs = (int64_t)seen;
        w->ahead_gpus = gpus;
        ahead_fill(s, first, nfirst, v[k].slot, w);
    }
}

/* ------------------------------------------------------------------ nodes */

/* The time node nd has `need` free GPUs if its running jobs end at their time limits
 * (start + limit), and the job whose end gives them (0: free now). */
static fg_time_t node_room_at(const fg_sched_t *s, const fg__node_t *nd, int32_t need,
                              fg_job_id_t *last)
{
    *last = 0;
    if (nd->nfree >= need)
        return FG__PAST;
    /* the distinct running jobs on it, with their GPUs here and their ends */
    int32_t slot[FG_MAX_NODE_GPUS], cnt[FG_MAX_NODE_GPUS];
    fg_time_t end[FG_MAX_NODE_GPUS];
    int32_t n = 0;
    for (int i = 0; i < nd->gpus; i++) {
        const int32_t js = nd->gpu_job[i];
        if (js < 0)
            continue;
        int32_t k = 0;
        while (k < n && slot[k] != js)
            k++;
        if (k == n) {
            const fg__job_t *r = &s->jobs[js];
            slot[n] = js;
            cnt[n] = 0;
            end[n++] = r->start_time + r->time_limit;
        }
        cnt[k]++;
    }
    int32_t have = nd->nfree;
    for (;;) { /* the earliest end left, n is at most 64 */
        int32_t best = -1;
        for (int32_t k = 0; k < n; k++)
            if (cnt[k] > 0 && (best < 0 || end[k] < end[best]))
                best = k;
        if (best < 0)
            return FG_TIME_NEVER;
        have += cnt[best];
        cnt[best] = 0;
        if (have >= need) {
            *last = s->jobs[slot[best]].id;
            return end[best];
        }
    }
}

/* insertion into a[0..*n) (at most FG_WHY_NODES_MAX) by `before` */
static void node_insert(fg_why_node_t *a, size_t *n, fg_why_node_t v,
                        bool (*before)(const fg_why_node_t *, const fg_why_node_t *))
{
    size_t k = *n < FG_WHY_NODES_MAX ? (*n)++ : FG_WHY_NODES_MAX;
    while (k > 0 && before(&v, &a[k - 1])) {
        if (k < FG_WHY_NODES_MAX)
            a[k] = a[k - 1];
        k--;
    }
    if (k < FG_WHY_NODES_MAX)
        a[k] = v;
}

static bool more_free(const fg_why_node_t *a, const fg_why_node_t *b)
{
    return a->free_gpus > b->free_gpus;
}

static bool sooner(const fg_why_node_t *a, const fg_why_node_t *b)
{
    return a->at < b->at;
}

/* GPUs of j's type, the largest free blocks, the nodes that could hold it (from now). */
static void nodes(const fg_sched_t *s, const fg__job_t *j, fg_time_t now, fg_why_t *w)
{
    const bool whole = j->gpus > FG_WHOLE_NODE_GPUS;
    for (size_t n = 0; n < s->nnodes; n++) {
        const fg__node_t *nd = &s->nodes[n];
        if (!fg__type_matches(j, nd->type))
            continue;
        w->type_total += nd->gpus;
        if (nd->state != FG_NODE_UP)
            continue;
        w->type_nodes_up++;
        w->type_up += nd->gpus;
        w->type_free += nd->nfree;
        if (nd->nfree > w->largest_free)
            w->largest_free = nd->nfree;
        fg_why_node_t v = {.name = nd->name, .gpus = nd->gpus, .free_gpus = nd->nfree};
        if (nd->nfree > 0)
            node_insert(w->largest, &w->nlargest, v, more_free);
        if (whole ? nd->gpus < FG_WHOLE_NODE_GPUS : nd->gpus < j->gpus)
            continue;
        v.at = node_room_at(s, nd, whole ? nd->gpus : j->gpus, &v.last);
        if (v.at == FG_TIME_NEVER)
            continue;
        if (v.at < now) /* free now, or a job past its limit that has not ended yet */
            v.at = now;
        w->holders_total++;
        node_insert(w->holders, &w->nholders, v, sooner);
    }
}

/* ------------------------------------------------------------------ the whole */

/* Everything but the position of pending job `slot` (rc FG_ESTATE if not pending). */
static int why_one(fg_sched_t *s, int32_t slot, fg_time_t now, fg_why_t *out)
{
    const fg__job_t *j = &s->jobs[slot];
    fg_job_info_t ji;
    int rc = fg_sched_job_info(s, j->id, &ji); /* (makes an estimate left on demand) */
    if (rc)
        return rc;
    if (ji.state != FG_JOB_PENDING)
        return FG_ESTATE;
    const fg__account_t *a = &s->accounts[j->account];
    memset(out, 0, sizeof *out);
    out->id = j->id;
    out->code = ji.reason;
    out->gpus = j->gpus;
    out->gpu_type = j->type >= 0 ? s->types[j->type].name : NULL;
    out->prio = j->prio;
    out->estimated_start = ji.estimated_start;
    out->policy = s->cfg.policy;
    account_share(s, j->account, now, &out->account);
    member_share(s, j->member, now, out->account.entitlement_gpus, &out->user);
    if (out->code == j->why.code && j->why.code == FG_REASON_RESERVATION) {
        out->res_holder = j->why.reservation.holder;
        out->res_from = j->why.reservation.from;
    }
    out->quota = a->quota;
    out->quota_running = a->running;
    out->budget_exhausted = a->budget_exhausted;
    out->budget_left = a->budget_left;
    out->limit_cost = j->limit_cost;
    out->eligible_time = j->eligible_time;
    out->retries_used = j->retries_used;
    out->max_retries = j->max_retries;
    nodes(s, j, now, out);
    return FG_OK;
}

int fg_sched_why_many(fg_sched_t *s, const fg_job_id_t *ids, size_t n, fg_time_t now,
                      size_t order_max, fg_why_t *out, int *rcs)
{
    if (!ids || !out || !rcs)
        return FG_EINVAL;
    asked_t *v = fg__alloc((n ? n : 1) * sizeof *v);
    size_t nv = 0;
    for (size_t k = 0; k < n; k++) {
        const int32_t slot = fg__hash_get(s, ids[k]);
        rcs[k] = slot < 0 ? FG_ENOENT : why_one(s, slot, now, &out[k]);
        if (rcs[k] == FG_OK)
            v[nv++] = (asked_t){slot, k};
    }
    qsort(v, nv, sizeof *v, asked_cmp);
    positions(s, v, nv, now, order_max, out);
    free(v);
    return FG_OK;
}

int fg_sched_why(fg_sched_t *s, fg_job_id_t id, fg_time_t now, size_t order_max, fg_why_t *out)
{
    if (!out)
        return FG_EINVAL;
    int rc;
    fg_sched_why_many(s, &id, 1, now, order_max, out, &rc);
    return rc;
}
