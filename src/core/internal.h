/*
 * internal.h - the scheduler core's private structures, shared by the files of
 * src/core/ only. Names with fg__ are internal to the core.
 *
 * Base records (what rebuild starts from): jobs (state, member, allocation, counters),
 * nodes (state, which job holds each GPU), accounts and members (weights, quotas, usage).
 * Derived structures (kept in step by every event, rebuilt by fg_sched_rebuild):
 * per member and band a sorted queue of pending jobs; per node its free mask and count;
 * per GPU type a bitmap of nodes for each free count and min trees of "when are g
 * GPUs available" keys; per account and member running GPUs and pending counts.
 */
#ifndef FG_CORE_INTERNAL_H
#define FG_CORE_INTERNAL_H

#include "fairgpu/core.h"
#include "fairgpu/fairshare.h"
#include "order.h"
#include "shortcuts.h"

#include <assert.h>
#include <math.h>

#define FG__NBANDS       (3 * FG_LAS_MAX_LEVELS) /* fair: 3 classes x LAS queues */
#define FG__PAST         (INT64_MIN / 4)         /* "available since forever" */
#define FG__INF          INT64_MAX
#define FG__SIZE_CLASSES 10 /* pending jobs by size: g = 1..8, and 9 for whole nodes */
#define FG__SIZE_WHOLE   9
#define FG__TREE_KEYS    9  /* g = 1..8 on one node, then "whole node" */
#define FG__MAX_WALKS    64 /* walks per pass (see fg_sched_pass); usually 1 or 2 */
/* fg__why_t.code of a job whose blocked reason a walk did not make (without reasons,
 * fg_sched_set_no_reasons, or in a walk that another follows): it reads as not reached */
#define FG__REASON_LAZY FG_REASON_COUNT

/* Why a pending job waits, with the numbers its text shows (fg_sched_explain): `code`
 * names the member of the union that holds them; the other codes have none. Example:
 * {.code = FG_REASON_RESERVATION, .reservation = {.holder = 7, .from = 50}} reads "the
 * free GPUs it fits are reserved for job 7 from t=50". */
typedef struct fg__why {
    fg_reason_t code; /* an FG_REASON_*, or FG__REASON_LAZY */
    union {
        struct {
            fg_job_id_t head; /* the first blocked job (no backfill behind it) */
        } priority;
        struct {                /* FG_REASON_RESOURCES and FG_REASON_FRAGMENTATION */
            int32_t free;       /* GPUs of its type free now */
            fg_job_id_t victim; /* the last job preempted for it by this pass, or 0 */
        } room;
        struct {
            fg_job_id_t holder; /* the job the free GPUs it fits are held for */
            fg_time_t from;     /* the start of that reservation */
        } reservation;
        struct {
            int32_t running, quota; /* the account's GPUs in use, its quota */
        } quota;
    };
} fg__why_t;

typedef struct fg__job {
    /* What a walk of the plan reads or writes for every job it looks at comes first
     * (order.c, walk.c), in as few cache lines as the fields allow. */
    fg_job_id_t id; /* 0: free slot */
    int32_t account, member;
    int32_t gpus;
    int32_t type; /* GPU type index, -1 = any */
    fg_prio_t prio;
    fg_job_state_t state;
    fg_time_t time_limit;
    fg_time_t eligible_time;
    /* what the last walk that looked at it said (that walk's s->walk_no): shown only when
     * it is the last walk of the last pass */
    int64_t reason_walk;
    fg_time_t est;
    int32_t est_node; /* with est: the first node of the claim it came from (place.c) */
    fg__why_t why;
    fg_time_t submit_time, ckpt;
    fg_time_t queued_since; /* submit, or the last requeue */
    fg_time_t start_time;   /* current attempt */
    int32_t attempt, retries_used, max_retries;
    int64_t attained_gpu_s;
    int64_t limit_cost; /* micros its time limit costs at its rate (safe budgets), 0 = free */
    int64_t run_s;      /* seconds run by ended attempts */
    int32_t band;       /* queue band while pending */
    bool preempting;
    fg_job_id_t preempt_for; /* with preempting: the job its GPUs go to */
    int32_t live_pos;        /* position in s->live */
    /* while RUNNING: in its account's list of running jobs of its class */
    int32_t rprev, rnext;
    int64_t victim_pass; /* == s->stamp: a legal victim in this search */
    int32_t claim;       /* PENDING: victims still stopping for it (see serve_claims) */
    bool claimed;        /* PENDING: a preemption was issued for it, not yet served */
    /* allocation while RUNNING */
    int32_t nallocs;
    fg_alloc_t alloc1;
    fg_alloc_t *allocm; /* when nallocs > 1 */
} fg__job_t;

/* Job a comes before job b in a queue: by (submit time, id), fg__head_before. */
static inline fg__head_t fg__job_head(const fg__job_t *j)
{
    return (fg__head_t){j->submit_time, j->id};
}
static inline bool fg__job_before(const fg__job_t *a, const fg__job_t *b)
{
    return fg__head_before(fg__job_head(a), fg__job_head(b));
}

typedef struct fg__account {
    char name[FG_NAME_MAX];
    double weight;
    int32_t quota;
    bool budget_exhausted;
    int64_t budget_left; /* safe budget: micros its jobs may still reserve; -1 = unlimited */
    double usage;
    fg_time_t usage_at;
    int32_t running; /* GPUs held (preempting included) */
    int32_t pending; /* jobs */
    int64_t pending_gpus;
    int32_t run_head[FG_PRIO_HIGH + 1]; /* running jobs by class: slot or -1 */
    fg_time_t last_start; /* latest start of any of its jobs (>= every running one's) */
} fg__account_t;

/* Does a's budget keep job j from starting: exhausted, or a safe budget that its time
 * limit at its rate does not fit? */
static inline bool fg__budget_blocks(const fg__account_t *a, const fg__job_t *j)
{
    return a->budget_exhausted || (a->budget_left >= 0 && j->limit_cost > a->budget_left);
}

typedef struct fg__member {
    char user[FG_NAME_MAX];
    int32_t account;
    double weight;
    double usage;
    fg_time_t usage_at;
    int32_t running;
    int32_t pending;
    int64_t pending_gpus;
    fg__queue_t q[FG__NBANDS];
} fg__member_t;

typedef struct fg__node {
    char name[FG_NAME_MAX];
    int32_t gpus;
    int32_t type, type_pos;
    fg_node_state_t state;
    uint64_t free_mask;
    int32_t nfree;
    int32_t bucket;                    /* free-count bucket it sits in, -1 if in none (not up) */
    int32_t gpu_job[FG_MAX_NODE_GPUS]; /* job slot, -1 free */
    /* cache of the real per-GPU availability and its tree keys (index.c); valid until
     * fg__node_changed */
    bool rvalid;
    fg_time_t ravail[FG_MAX_NODE_GPUS];
    int64_t rkey[FG__TREE_KEYS];
    /* bit k: its tree leaf's key k may differ from rkey[k], by the pass's claims only;
     * 0xffff: the leaf is not known to be rkey changed by claims (index.c) */
    uint16_t ldiff;
    /* walk-local (place.c, touch), valid while touched == s->walk_no */
    int64_t touched;
    bool excluded; /* temporarily out of the tree while picking whole nodes */
    fg_time_t avail[FG_MAX_NODE_GPUS];
    fg_time_t res_from[FG_MAX_NODE_GPUS];
    int64_t cand_pass; /* == s->stamp: a candidate node in this search */
    int32_t cand_vict; /* with cand_pass: GPUs of the search's legal victims on it */
    fg_job_id_t res_job[FG_MAX_NODE_GPUS];
} fg__node_t;

/* A node as it was before a start of the walk whose queued estimates were not yet made
 * (ondemand.c, deferred_replay): what fg__job_take_gpus changes. */
typedef struct fg__node_snap {
    int32_t node, nfree;
    uint64_t free_mask;
    int32_t gpu_job[FG_MAX_NODE_GPUS];
    fg_time_t avail[FG_MAX_NODE_GPUS];
} fg__node_snap_t;

/* Walk-local memo of placements that failed (place.c, fg__place_now): within one walk the
 * GPUs a job may take now only shrink (starts take GPUs, reservations only move
 * earlier), so a job of g GPUs ending at E that did not fit means no job of >= g GPUs
 * ending at >= E fits until the walk ends. One per GPU type, plus one for "any". */
#define FG__FAIL_WHOLE 8
typedef struct fg__fail {
    int64_t walk;                             /* valid while == s->walk_no */
    fg_time_t single[FG_WHOLE_NODE_GPUS + 1]; /* [g]: least end a job of <= g failed at */
    int32_t nwhole;                           /* whole-node failures kept */
    int32_t whole_k[FG__FAIL_WHOLE];          /* nodes asked */
    fg_time_t whole_end[FG__FAIL_WHOLE];      /* and the end */
} fg__fail_t;

/* Walk-local memo of blocked_reason (reasons.c, plan.h): its answer depends only on the job's GPU
 * count and type and on the plan's state, which plan_ver numbers. */
typedef struct fg__why_memo {
    int64_t walk, ver;
    int32_t gpus, type;
    fg__why_t why;
} fg__why_memo_t;

/* Memo of feasible (place.c, plan.h) for one job size and type: its answer depends only on the
 * nodes' sizes, types and states, which node_gen numbers. */
typedef struct fg__feas_memo {
    int64_t gen; /* valid while == s->node_gen (0: empty) */
    int32_t gpus, type;
    bool ok;
    fg_reason_t why;
} fg__feas_memo_t;

typedef struct fg__type {
    char name[FG_NAME_MAX];
    int32_t *nodes; /* node indices, ascending */
    int32_t n, cap;
    int32_t maxgpus;
    bool dirty;        /* bitmaps/tree need a rebuild (a node was added) */
    int32_t words;     /* bitmap words */
    uint64_t *bm;      /* (maxgpus+1) x words: bucket f = nodes with f free GPUs */
    uint64_t bfull;    /* bit f - 1: bucket f (1..64) is not empty */
    int32_t tsize;     /* leaves (power of eight) */
    int32_t tinner;    /* inner nodes: (tsize - 1) / 7, before the leaves */
    size_t tspan;      /* tinner + tsize: one key's tree */
    int64_t *tree;     /* FG__TREE_KEYS x (tinner + tsize): one 8-ary tree per key */
    uint16_t *tdirty;  /* per tree node: keys whose minimum is stale (index.c) */
    int32_t up_gpus;   /* GPUs on up nodes */
    int32_t free_gpus; /* free GPUs on up nodes */
    /* nodes with >= g GPUs (g = 1..8): up, and in any state; valid while fit_gen ==
     * s->node_gen */
    int32_t up_ge[FG_WHOLE_NODE_GPUS + 1], any_ge[FG_WHOLE_NODE_GPUS + 1];
    int64_t fit_gen;
} fg__type_t;

/* A set of small indices (accounts, members): bit i of word i / 64, and the same
 * indices as a list in ascending order (jobs.c, fg__set_put). */
typedef struct fg__set {
    uint64_t *bits;
    size_t words;
    int32_t *list;
    size_t n, cap;
} fg__set_t;

/* An entry of the id hash: the id is kept beside its slot, so a probe, a miss and a
 * rehash read the table alone, not the job array at random. */
typedef struct fg__hent {
    fg_job_id_t id;
    int32_t slot;
} fg__hent_t;

struct fg_sched {
    fg_config_t cfg;
    double tau; /* half_life / ln 2; 0 when no memory */

    fg__job_t *jobs;
    size_t njobs_slots, jobs_cap;
    int32_t *free_slots;
    size_t nfree_slots, free_slots_cap;
    int32_t *live; /* slots of live jobs */
    size_t nlive, live_cap;
    fg__hent_t *hash; /* open addressing by id; slot -1: empty */
    size_t hash_cap;
    size_t npending;

    fg__account_t *accounts;
    size_t naccounts, accounts_cap;
    fg__member_t *members;
    size_t nmembers, members_cap;
    /* open addressing on a hash of the name (a member's: of its user and account) to an
     * account or member index, -1: empty (tenants.c, name lookups) */
    int32_t *acct_ix, *mem_ix;
    size_t acct_ix_cap, mem_ix_cap;
    fg__node_t *nodes;
    size_t nnodes, nodes_cap;
    fg__type_t *types;
    size_t ntypes, types_cap;

    int64_t pass_no;
    int64_t node_gen; /* bumped when a node is added or changes state */
    int64_t stamp;    /* bumped per preemption search: victim_pass, cand_pass marks */
    int64_t walk_no;  /* bumped per walk: node->touched marks */
    int32_t rr_next;  /* round-robin: the member whose turn comes first */
    int32_t *claims;  /* jobs with claimed set */
    size_t nclaims, claims_cap;
    fg_time_t last_now;
    fg__order_t it;
    int32_t *touched_nodes;
    size_t ntouched, touched_cap;
    int32_t reserved_free; /* pass-local: free GPUs under a reservation */
    fg_time_t window_max;  /* pass-local: longest time until such a reservation */
    /* pending jobs by floor(log2(time limit)): lets a pass stop backfilling when no
     * pending job could end before the reservations */
    int32_t limit_hist[64];
    /* pending jobs by size (g = 1..8; FG__SIZE_WHOLE: more than one node) and quarter
     * octave of time limit (limit_qbucket), with a bitmap of the buckets in use: lets a
     * walk with estimates on demand see that no pending job can start in its plan
     * (fg__pending_none_fits) */
    int32_t size_limit_hist[FG__SIZE_CLASSES][256];
    uint64_t size_limit_mask[FG__SIZE_CLASSES][4];
    int64_t band_pending[FG__NBANDS]; /* pending jobs per band (all members' queues) */
    /* accounts and members with pending jobs (fg__set_t): the wfq order reads only those
     * (order.c) */
    fg__set_t act_a, act_m;
    int32_t *blocked; /* job slots blocked this pass, in plan order */
    size_t nblocked, blocked_cap;
    /* walk-local memos (pass.c): placements known to fail, blocked reasons */
    fg__fail_t *fail; /* [0] any type, [1 + t] type t */
    size_t fail_cap;
    int64_t plan_ver;         /* bumped whenever what blocked_reason reads may have changed */
    int32_t touched_free_max; /* most free GPUs of a node when it was touched */
    fg__why_memo_t why_memo[16];
    fg__feas_memo_t feas_memo[16];
    /* bit g (g = 1..8): a job of g GPUs of any type is feasible on the nodes as they are
     * (pass.c, feasible; emptied where node_gen is bumped) */
    uint32_t feas_any;
    /* estimates on demand (ondemand.c): the last walk's
     * estimate-only claims, in plan order, still to be made on deferred[dhead..ndeferred)
     * of the plan that stays in the trees (plan_alive) until the next event or pass */
    bool est_on_demand, plan_alive;
    /* (fg_sched_set_no_reasons) blocked reasons are not made: FG__REASON_LAZY stays on
     * the job and reads as not reached */
    bool no_reasons;
    /* the walk running is the last one its pass may make (FG__MAX_WALKS): what it leaves
     * is shown even after it started jobs (walk.c) */
    bool walk_last;
    fg_time_t plan_now;
    int32_t *deferred; /* a job slot, or -1 - slot: that job started (deferred_run) */
    size_t ndeferred, dhead, deferred_cap;
    /* the last walk of the pass, stopped once nothing it left could change a decision
     * (ondemand.c, walk_tail): no GPU free, or none of the rest of its backfill window can
     * start (tail_window), or no backfill behind a blocked job (tail_head: its id); its
     * order, where it stopped, its time; wout: the pass's decisions while it runs (NULL
     * outside fg_sched_pass) */
    bool tail_on, tail_window;
    fg_job_id_t tail_head;
    fg__order_t *tail_o;
    int64_t tail_left; /* jobs it still looks at */
    fg_time_t tail_now;
    fg_decisions_t *wout;
    fg_time_t max_eligible; /* latest eligible_time ever set by a backoff or a restore */
    int32_t *peek_buf;      /* fg__order_peek's skipped jobs */
    size_t peek_cap;
    int32_t peek_hint; /* the member of the last job fg__order_peek's reading found */
    /* nodes as they were before the starts in deferred[], in start order */
    fg__node_snap_t *dsnap;
    size_t ndsnap, dsnap_cap;
    void *ent_blk; /* preempt.c, entitlements: the last preemption search's */
    size_t ent_cap;
    fg_fair_kept_t ent_wf; /* preempt.c, entitlements: the accounts' water fill, kept */
    int32_t *cand;         /* preempt.c, try_preempt: candidate nodes (room for every node) */
    size_t cand_cap;
    int32_t npreempting; /* running jobs with preempting set (preempt.c) */
    uint32_t sc_off;     /* bit k: shortcut k (shortcuts.h) is off; tests only */
    int32_t max_walks;   /* tests only (fg__sched_set_max_walks): 0 is FG__MAX_WALKS */
    int64_t walks_cut;   /* walks a shortcut ended early (walk.c: they look at fewer jobs; tests) */
};

/* shortcuts (shortcuts.h): turns shortcut `name` ("all": every one) on or off, for the
 * randomized tests; FG_EINVAL for an unknown name */
int fg__shortcut_set(fg_sched_t *s, const char *name, bool on);
static inline bool fg__sc(const fg_sched_t *s, fg__shortcut_t k)
{
    return !(s->sc_off >> k & 1);
}
/* walk.c: at most n walks per pass instead of FG__MAX_WALKS (0: the default); for tests
 * of a pass whose last walk still starts jobs */
void fg__sched_set_max_walks(fg_sched_t *s, int32_t n);

/* ------------------------------------------------------------------ memory, invariants (sched.c)
 */

/* The core's one out-of-memory path: these abort rather than return NULL. */
void *fg__alloc(size_t n);
void *fg__realloc(void *p, size_t n);
/* p (of *cap elements of `size` bytes) grown to hold `need`, doubling; *cap updated */
void *fg__grow(void *p, size_t *cap, size_t need, size_t size);
/* asserts that every derived count is in step with the base records (full scan; debug
 * builds and tests) */
void fg__sched_check(const fg_sched_t *s);

/* ------------------------------------------------------------------ jobs (jobs.c) */

int32_t fg__hash_get(const fg_sched_t *s, fg_job_id_t id);     /* job slot, or -1 */
fg__job_t *fg__job_by_id(const fg_sched_t *s, fg_job_id_t id); /* NULL if none */
int32_t fg__job_band(const fg_sched_t *s, const fg__job_t *j); /* its queue band */
int64_t fg__las_level(const fg_sched_t *s, int64_t attained);  /* las: its queue */

/* Does the policy order a band by fair-share keys (wfq, fair)? */
static inline bool fg__keyed(const fg_sched_t *s)
{
    return s->cfg.policy == FG_POLICY_WFQ || s->cfg.policy == FG_POLICY_FAIR;
}

/* The LAS queue of band b (las: the band; fair: the band inside its class). */
static inline int32_t fg__band_las(const fg_sched_t *s, int32_t b)
{
    return s->cfg.policy == FG_POLICY_FAIR ? b % s->cfg.las_levels : b;
}
const fg_alloc_t *fg__job_allocs(const fg__job_t *j); /* its nallocs allocations */
/* a start decided by a pass: job `slot` takes allocs[0..n) and runs from `now` */
void fg__job_start(fg_sched_t *s, int32_t slot, const fg_alloc_t *allocs, int32_t n, fg_time_t now);
/* what a start changes on the nodes (and in the walk's plan): the GPUs of allocs are
 * held by job `slot` until `end` at the latest */
void fg__job_take_gpus(fg_sched_t *s, int32_t slot, const fg_alloc_t *allocs, int32_t n,
                       fg_time_t end);
void fg__run_list_add(fg_sched_t *s, int32_t slot); /* on its account's running list */
/* into (out of) its member's queue and the pending counts */
void fg__pending_add(fg_sched_t *s, int32_t slot);
void fg__pending_del(fg_sched_t *s, int32_t slot);
bool fg__pending_limit_at_most(const fg_sched_t *s, fg_time_t w); /* may one end within w? */
/* fit_end[g] (g = 1..8): the latest end of a job of g GPUs that may fit now, whole_end
 * that of a job of whole nodes (FG__INF: any end; INT64_MIN: none). Conservative: true
 * only if no pending job of g <= 8 GPUs would end by fit_end[g], nor a larger one by
 * whole_end (a job ends at now + its time limit). */
bool fg__pending_none_fits(const fg_sched_t *s, const fg_time_t *fit_end, fg_time_t whole_end,
                           fg_time_t now);
/* jobs.c: puts i in set v (on) or takes it out; fg__set_clear empties it */
void fg__set_put(fg__set_t *v, size_t i, bool on);
void fg__set_clear(fg__set_t *v);
void fg__set_free(fg__set_t *v);

/* ------------------------------------------------------------------ accounts, members (tenants.c)
 */

/* May account a run `gpus` more GPUs within its quota? */
static inline bool fg__quota_allows(const fg__account_t *a, int32_t gpus)
{
    return a->quota < 0 || a->running + gpus <= a->quota;
}

/* Brings a decayed usage forward to `now`, accruing `running` GPUs meanwhile:
 * U(now) = U·2^(-Δ/h) + R·τ·(1 - 2^(-Δ/h)), τ = h / ln 2. No memory when h = 0.
 * Inline: the plan order calls it for every account and member with pending jobs at
 * each new time (the same operations as a call, so the same bits). */
static inline void fg__usage_advance(const fg_sched_t *s, double *usage, fg_time_t *at,
                                     int32_t running, fg_time_t now)
{
    if (now <= *at)
        return;
    if (*at == INT64_MIN) { /* never used before */
        *at = now;
        return;
    }
    *usage = fg_fair_decayed(*usage, now - *at, running, s->tau);
    *at = now;
}
/* brings the usage of an account and its member forward to `now` */
void fg__usage_touch(fg_sched_t *s, int32_t account, int32_t member, fg_time_t now);
/* takes back what j's GPUs added to its account's and member's usage over `ran` s */
void fg__usage_refund(fg_sched_t *s, const fg__job_t *j, fg_time_t ran);
bool fg__name_ok(const char *name);    /* not NULL, not empty, short enough */
uint64_t fg__name_hash(const char *p); /* of a name, for the name indexes */
/* account `name` of name hash h, or FG_ENOENT */
int fg__account_of(const fg_sched_t *s, const char *name, uint64_t h);
/* member `user` (of name hash hu) of account a, or FG_ENOENT */
int fg__member_of_h(const fg_sched_t *s, int a, const char *user, uint64_t hu);

/* ------------------------------------------------------------------ the plan's life (ondemand.c)
 */

/* before an event changes jobs or nodes, ends the last pass's plan (estimates on demand
 * not asked for stay unknown); fg__plan_ask makes job `slot`'s estimate if it is still
 * to be made. Both are no-ops unless estimates are on demand. */
void fg__plan_close(fg_sched_t *s);
void fg__plan_ask(fg_sched_t *s, int32_t slot); /* out of its queue and counts */
void fg__plan_finish_walk(fg_sched_t *s);       /* before account changes: walk_tail now */

/* ------------------------------------------------------------------ availability (index.c) */

void fg__type_rebuild(fg_sched_t *s, int32_t t);
void fg__node_changed(fg_sched_t *s, int32_t n); /* real state changed */
void fg__node_leaf_update(fg_sched_t *s, int32_t n);
void fg__node_leaf_claim(fg_sched_t *s, int32_t n, int g, fg_time_t x);
void fg__node_leaf_restore(fg_sched_t *s, int32_t n); /* no longer touched */
fg_time_t fg__gpu_real_avail(const fg_sched_t *s, const fg__node_t *nd, int i);
const fg_time_t *fg__node_real_avail(const fg_sched_t *s, fg__node_t *nd); /* all GPUs */
int32_t fg__tree_argmin(fg__type_t *t, int key); /* bring key's minima up to date */
int64_t fg__tree_min(fg__type_t *t, int key);
/* The (at most k) nodes with the smallest finite value of `key`, by (value, position in
 * the type), as k calls of fg__tree_argmin would pick them with each picked node taken
 * out of the tree; *kth: the value of the last one. Reads the leaves only (always up to
 * date), so it costs the type's node count, not k descents. */
int32_t fg__tree_smallest(const fg__type_t *t, int key, int32_t k, int32_t *nodes, int64_t *kth);
int32_t fg__type_find(const fg_sched_t *s, const char *name); /* GPU type index, or -1 */
int32_t fg__type_get(fg_sched_t *s, const char *name);        /* the same, made if new */

/* queue.c */
void fg__queue_insert(fg_sched_t *s, fg__queue_t *q, int32_t slot);
void fg__queue_remove(fg_sched_t *s, fg__queue_t *q, int32_t slot);
void fg__queue_free(fg__queue_t *q);
/* queue.c: the first position in q's live part whose job is not before j */
int32_t fg__queue_lower_bound(const fg_sched_t *s, const fg__queue_t *q, const fg__job_t *j);
/* queue.c: makes q->blk[b] from its entries (all of them live) */
void fg__queue_blk_fill(const fg_sched_t *s, fg__queue_t *q, int32_t b);

/* fg__order_next (order.c): the next pending job's slot in plan order, -1 when none is
 * left. The common wfq step is inline (measured: without it the Philly replay under wfq
 * takes 5 % more instructions): a sorted account order whose smallest-key account has
 * one member, whose counts are its account's (the same steps as fg__order_next_any's). */
static inline int32_t fg__order_next(fg_sched_t *s, fg__order_t *o)
{
    if (o->nfast && o->ah[o->nfast - 1].one >= 0) {
        const fg__hk_t top = o->ah[o->nfast - 1];
        assert(o->a_left[top.id] > 0 && o->cursor[top.one] < s->members[top.one].q[o->band].len);
        const int32_t slot = o->qv[top.one][o->cursor[top.one]++];
        o->a_picked[top.id] += s->jobs[slot].gpus;
        fg__acct_sorted_after_pick(o, top.id);
        return slot;
    }
    return fg__order_next_any(s, o);
}

#endif
