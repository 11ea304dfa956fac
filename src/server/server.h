/*
 * server.h - internals of `fairgpu server`, the controller.
 *
 * Lock model (one rule each, no nesting except where stated):
 *   - srv->mu guards the in-memory model: users, tokens, accounts, members, jobs, the
 *     event log, nodes. HTTP threads hold it for microseconds (lookups, rendering one
 *     object, inserting a committed record). It is never held across a store call that
 *     syncs to disk, nor across an Argon2 hash.
 *   - srv->sched_mu guards only the scheduler inbox (a queue of events) and its condvar.
 *     HTTP threads push and signal; the scheduler thread drains. The core (fg_sched_t)
 *     is owned by the scheduler thread alone and needs no lock.
 *   - srv->wait_mu guards the list of parked HTTP connections (long-polls,
 *     event streams, agent assignment polls). Order, when both are needed: mu, then
 *     wait_mu. Resuming a connection under wait_mu takes its HTTP worker's queue mutex
 *     (httpd.c) last: wait_mu, then the worker's.
 *   - A connection, its request and its answer belong to one HTTP worker thread; a
 *     parked request is touched only by the party that will resume it, and not after
 *     it called hd_resume (docs/http-engine.md).
 *   - Metrics are relaxed atomics.
 *
 * The in-memory model is the runtime authority; the store (src/store) makes every
 * change durable before it is acknowledged and rebuilds the model at start.
 */
#ifndef FG_SERVER_H
#define FG_SERVER_H

#include "fairgpu/billing.h"
#include "fairgpu/core.h"
#include "server/httpd.h"
#include "server/idle.h"
#include "store/store.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SRV_MAX_BODY (1024 * 1024)
/* A connection's input buffer (httpd.c): the request line and headers must fit in it,
 * less 1 KiB (else 431); a body that arrives with them is used in place, a larger one is read into
 * its own allocation of the declared size. */
#ifndef SRV_CONN_MEMORY
#define SRV_CONN_MEMORY (16 * 1024)
#endif
/* Handlers return SRV_YES (SRV_NO only where an answer could not be queued). */
#define SRV_YES           1
#define SRV_NO            0
#define SRV_TOKEN_HASH    32
#define SRV_MAX_ACCOUNTS  4096
#define SRV_EVENT_NODE    1
#define SRV_EVENT_JOB     0
#define SRV_EVENT_ACCOUNT 2 /* a budget warning; its node field names the account */

/* ------------------------------------------------------------------ config */

typedef struct srv_config {
    char data_dir[1024];
    char listen_host[256];
    int listen_port;
    bool registration_open;
    int metrics_access;           /* SRV_METRICS_*: who may read /metrics */
    int threads;                  /* HTTP worker threads */
    int64_t session_ttl_s;        /* login session lifetime */
    int64_t default_time_limit_s; /* when a job gives none */
    int64_t max_time_limit_s;
    double rate_limit_rps; /* per token; 0 = off */
    double rate_limit_burst;
    int max_pending_per_user; /* 0 = off */
    int commit_delay_us;      /* the store's group commit delay under load; 0 = none */
    int max_connections;
    bool fast_password_hash; /* INSECURE, tests only: minimal Argon2id cost */
    int heartbeat_interval_s;
    int heartbeat_misses;
    int charge_interval_s; /* live accrual of running attempts (docs/billing.md) */
    int64_t longpoll_max_s;
    int log_level;
    fg_config_t core;
    /* ---- HTTP engine defences (docs/http-engine.md, "Limits") */
    int head_timeout_s;          /* a request head must be complete in this long */
    int body_timeout_s;          /* a request body must be complete in this long */
    int max_conns_per_addr;      /* connections from one client address; 0 = no cap */
    int reserved_connections;    /* of max-connections, kept for authenticated clients */
    int64_t max_body_memory;     /* bytes of request bodies held at once */
    char trusted_proxy[64];      /* address whose X-Forwarded-For is believed; "" = none */
    uint32_t trusted_proxy_addr; /* the same, IPv4 in network order (0: none) */
    int password_threads;        /* Argon2id threads (pwpool.c) */
    int password_queue;          /* password jobs waiting at most; beyond, 429 */
    double login_rate;           /* POST /v1/sessions, /v1/users per client address, per s */
    double login_burst;
    int login_user_failures; /* failed logins per username per minute */
    /* ---- idle GPUs (docs/idle.md) */
    int idle_util_pct;    /* a GPU below this is idle (default 5) */
    int64_t idle_after_s; /* a job whose GPUs all stay below it this long is idle (30m) */
} srv_config_t;

enum {
    SRV_METRICS_LOCAL = 0, /* loopback peers only (the default) */
    SRV_METRICS_TOKEN,     /* Bearer DATA_DIR/metrics.token */
    SRV_METRICS_OPEN,      /* anyone who reaches the port */
};

void srv_config_default(srv_config_t *c);
/* Parses argv (after "server") and the optional config file into *c. On error prints a
 * clear sentence to stderr and returns -1; returns 1 if --help was printed, else 0. */
int srv_config_parse(srv_config_t *c, int argc, char **argv);

/* ------------------------------------------------------------------ model */

typedef struct srv_user {
    fg_store_user_t r; /* r.default_account unused: see srv_user_default_account */
    int pending_jobs;  /* PENDING jobs now (cap) */
    int inflight;      /* submissions being committed (counted against the cap) */
} srv_user_t;

typedef struct srv_token {
    int64_t id; /* API tokens: the store's id; sessions: 0 */
    int64_t user_id;
    bool session;
    char *name;
    unsigned char hash[SRV_TOKEN_HASH];
    int64_t created_at, expires_at; /* expires_at 0: never */
    double bucket, last_ms;         /* rate limit */
    bool deleted;
} srv_token_t;

typedef struct srv_account {
    fg_store_account_t r;
    /* budget state, kept by the scheduler thread (sched_billing.c), mu held */
    fg_budget_t bud;    /* spend in the period and marks given (fairgpu/billing.h) */
    int32_t bud_period; /* the r.budget_period and r.budget_since_ms the spend was read */
    int64_t bud_since;  /* for (a change reads it again) */
    bool bud_loaded;
    bool budget_blocked; /* hard budget exhausted: submits answer 402 */
    /* GPU time held this UTC month, from the ledger rows (fair share shows it) */
    int64_t month_start_ms;
    int64_t month_held_gpu_ms;
} srv_account_t;
/* "job", "node" or "account": an event's type in the API. */
struct srv_event;
const char *srv_event_type(const struct srv_event *e);

typedef struct srv_member {
    fg_store_member_t r; /* r.position orders them: the first is the default */
    bool deleted;
} srv_member_t;

/* Per (attempt, rank) log stream: bytes kept in memory (capped). */
typedef struct srv_log {
    int32_t attempt, rank;
    char *data;
    size_t len, cap;
    int64_t total;     /* bytes the agent has shipped (== len unless capped) */
    int64_t final_len; /* from exited: log_bytes, -1 unknown */
} srv_log_t;

/* Per rank of the running attempt. */
typedef struct srv_rank {
    char node[FG_NAME_MAX + 1];
    uint64_t gpu_mask;
    bool started, ended;
    int end_cause; /* fg_end_cause_t */
    int32_t exit_code, signal;
    bool has_exit, has_signal;
    int64_t start_ms, end_ms;
    int64_t last_checkpoint_ms; /* the last checkpoint its agent noticed, 0 if none */
} srv_rank_t;

typedef struct srv_job {
    fg_store_job_t r;
    fg_job_state_t state;
    int64_t epoch; /* epoch of the current attempt's assignment */
    int nranks;
    srv_rank_t *ranks; /* of the current attempt (RUNNING) */
    bool in_core;      /* known to the scheduler core (else parked or ended) */
    int64_t gpu_seconds;
    fg_store_attempt_t cur;     /* the current (or last) attempt; cur.attempt 0: none */
    bool stop_sent;             /* a stop for the current attempt was queued */
    int not_started;            /* attempts requeued as never started (this process) */
    int64_t charged_to_ms;      /* how far live accrual charged the current attempt (0: not yet) */
    int64_t att_charged_micros; /* what the current attempt has been charged so far */
    int64_t limit_cost;         /* its time limit at its dearest rate (safe budgets) */
    srv_log_t *logs;
    size_t nlogs;
    uint64_t dirty_iter; /* the scheduler iteration of its last change (srv_t.pub_iter) */
    srv_idle_t idle;     /* idle GPUs of the running attempt (sched_idle.c) */
    int64_t est_limit;   /* the latest limit-based estimate (0: none; sched_estimates.c) */
    int64_t kept_s;      /* run time its checkpoints kept over its ended attempts (this
                            process only: estimates of a resume, sched_project.c) */
    bool est_seen;       /* a refresh saw it pending (its estimate at submission is settled) */
} srv_job_t;

typedef struct srv_event {
    int64_t seq;
    int64_t time;
    int kind; /* SRV_EVENT_JOB | SRV_EVENT_NODE */
    uint64_t job_id;
    char from[16], to[16];
    char *reason; /* may be NULL */
    char *node;   /* may be NULL */
} srv_event_t;

typedef struct srv_gpu {
    int index;
    char uuid[96];
    char type[FG_NAME_MAX + 1];
    int64_t memory_mb;
    int64_t mem_used_mb; /* -1 unknown */
    int util_pct;        /* -1 unknown */
} srv_gpu_t;

typedef struct srv_node {
    char name[FG_NAME_MAX + 1];
    char instance[72];
    char addr[256];
    char gpu_type[FG_NAME_MAX + 1];
    fg_node_state_t state; /* UP, DRAINING (drain requested), DOWN */
    bool registered;       /* registered with this epoch */
    int cpus;
    int64_t memory_mb;
    bool isolated;       /* the agent isolates its jobs (register's "isolated") */
    char isolation[160]; /* the agent's words on it ("" if it said nothing) */
    int ngpus;
    srv_gpu_t gpus[FG_MAX_NODE_GPUS];
    int64_t last_heartbeat_ms;
    int64_t created_at;
    int core_index; /* in the scheduler core; -1 if not added yet */
    /* messages for the agent, in seq order: a JSON array of objects with "seq" */
    json_t *outbox;
    int64_t next_msg_seq;
    int master_port_next;
} srv_node_t;

/* A node's own credential (nodecred.c): only its hash is kept. */
typedef struct srv_nodecred {
    char name[FG_NAME_MAX + 1];
    unsigned char hash[SRV_TOKEN_HASH]; /* zero when revoked */
    bool revoked;                       /* refused; the name may not join again */
} srv_nodecred_t;

/* A simple open-addressing map from 64-bit keys to pointers. */
typedef struct srv_map {
    uint64_t *keys;
    void **vals;
    size_t cap, n;
} srv_map_t;
void *srv_map_get(const srv_map_t *m, uint64_t key);
void srv_map_put(srv_map_t *m, uint64_t key, void *val);
void srv_map_del(srv_map_t *m, uint64_t key);
void srv_map_free(srv_map_t *m);
uint64_t srv_hash_bytes(const void *p, size_t n);

/* util.c: a growing text buffer (malloc'd; the owner frees p, or hands it to the answer). */
typedef struct srv_buf {
    char *p;
    size_t n, cap;
} srv_buf_t;
void srv_buf_put(srv_buf_t *b, const char *s, size_t n);
void srv_buf_puts(srv_buf_t *b, const char *s);
void srv_buf_i64(srv_buf_t *b, int64_t v);
void srv_buf_jstr(srv_buf_t *b, const char *s); /* a JSON string with quotes; NULL: null */
/* h_metrics.c: printf into b; a Prometheus family's HELP and TYPE lines; a label
 * value, escaped (\\, \", \n), without its quotes. */
void srv_buf_printf(srv_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void srv_prom_family(srv_buf_t *b, const char *name, const char *type, const char *help);
void srv_prom_label(srv_buf_t *b, const char *v);

/* ------------------------------------------------------------------ scheduler inbox */

enum srv_msg_kind {
    MSG_SUBMIT = 1, /* job committed: add it to the core */
    MSG_CANCEL,     /* cancel: pending -> CANCELLED, running -> stop the agent */
    MSG_EXITED,     /* an agent reported a rank's exit (fields below) */
    MSG_STARTED,    /* an agent reported a rank's start */
    MSG_REGISTER,   /* an agent (re)registered: body in json */
    MSG_NODE_STATE, /* admin drain / resume of node `node` (cause: 1 drain, 0 resume) */
    MSG_ACCOUNT,    /* account or membership changed: refresh the core's view */
    MSG_KICK,       /* just run a pass */
    MSG_REPORTS,    /* several started/exited reports of one request (slots below) */
    MSG_WHY,        /* why pending job `job` waits: answered after the pass (sched_why.c) */
    MSG_DRY_RUN,    /* where would this job go (json: the spec; h_dry_run.c) */
};

#define SRV_REPORTS_MAX     256 /* entries of one POST /v1/agent/reports */
#define SRV_NOT_STARTED_MAX 3   /* free requeues of a job's never-started attempts */

/* One entry of a MSG_REPORTS batch: the parsed report (NULL when the entry was refused
 * at parsing), and the answer to it (status 0: not answered yet; error: {code, message,
 * field} of a refusal). */
typedef struct srv_report_slot {
    struct srv_msg *m;
    int status;
    json_t *error;
} srv_report_slot_t;

/* A caller waiting for its message to be processed and persisted. */
typedef struct srv_sync {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int status; /* HTTP status to answer */
    char code[32];
    char msg[256];
    json_t *reply; /* owned by the waiter once done */
    /* asynchronous callers: the parked connection to resume when done */
    struct srv *srv;
    hd_conn_t *conn;
    uint64_t render_job; /* on success, answer with this job (cancel) */
} srv_sync_t;

typedef struct srv_msg {
    int kind;
    uint64_t job;
    int32_t attempt, rank;
    int64_t epoch;
    int cause; /* fg_end_cause_t for MSG_EXITED; 1/0 for MSG_NODE_STATE */
    bool has_exit, has_signal;
    int32_t exit_code, signal;
    int64_t start_ms, end_ms, log_bytes;
    int64_t last_checkpoint_ms; /* MSG_EXITED: the last checkpoint its agent noticed, 0: none */
    char node[FG_NAME_MAX + 1];
    json_t *json;
    srv_sync_t *sync;
    bool batched;             /* an entry of a MSG_REPORTS: answered through its slot */
    srv_report_slot_t *slots; /* MSG_REPORTS: nslots entries, in request order */
    size_t nslots;
    struct srv_msg *next;
} srv_msg_t;

void srv_sync_init(srv_sync_t *y);
void srv_sync_wait(srv_sync_t *y);
void srv_sync_destroy(srv_sync_t *y);

/* ------------------------------------------------------------------ parked connections */

enum { WAIT_EVENTS = 1, WAIT_AGENT = 2, WAIT_STREAM = 3, WAIT_PUBLISH = 4 };

typedef struct srv_waiter {
    hd_conn_t *conn;
    struct srv_req *req;
    int64_t deadline_ms;
    int kind;
    struct srv_waiter *prev, *next;
} srv_waiter_t;

/* ------------------------------------------------------------------ server */

/* A histogram of durations (metrics.c): counts per bucket, not cumulative (the scrape
 * sums them), so an observation is one relaxed increment and an addition. */
#define SRV_HIST_BUCKETS 16 /* finite bounds; one more bucket counts the rest (+Inf) */
typedef struct srv_hist {
    atomic_long n[SRV_HIST_BUCKETS + 1];
    atomic_long sum_us;
} srv_hist_t;
/* The HTTP latency histograms: by method (GET, POST, PUT, PATCH, DELETE, other) and
 * class (api, agent, longpoll). */
#define SRV_HTTP_METHODS 6
#define SRV_HTTP_CLASSES 3

typedef struct srv_metrics {
    atomic_long http_by_code[600];
    atomic_long submissions;
    atomic_long submissions_refused;
    atomic_long passes;
    atomic_long pass_us_total;
    atomic_long last_pass_us;
    atomic_long max_pass_us;
    atomic_long starts;
    atomic_long preemptions;
    atomic_long ended;
    /* metrics.c, h_metrics.c */
    srv_hist_t pass_hist;
    srv_hist_t http_hist[SRV_HTTP_METHODS][SRV_HTTP_CLASSES];
    atomic_long requeues[FG_END_CAUSE_MAX + 1]; /* by the cause of the attempt's end */
    atomic_long node_losses;                    /* nodes declared down */
    atomic_long ledger_rows[4];                 /* committed rows by fg_row_kind_t */
    atomic_long ledger_micros[4];               /* and the sum of their amounts */
} srv_metrics_t;

/* The start-estimate errors of /metrics (h_estimates.c): per series (the estimate at
 * submission by its source 1..4 and size class, then the limit-based one by size class),
 * the last SRV_EST_WINDOW errors and the running count and sum; under srv->mu. */
#define SRV_EST_SERIES 20
#define SRV_EST_WINDOW 512
typedef struct srv_est_window {
    int64_t err[SRV_EST_SERIES][SRV_EST_WINDOW];
    int32_t n[SRV_EST_SERIES], head[SRV_EST_SERIES];
    int64_t count[SRV_EST_SERIES], sum[SRV_EST_SERIES];
} srv_est_window_t;

typedef struct srv {
    srv_config_t cfg;
    fg_store_t *store;
    hd_server_t *httpd; /* the HTTP engine (httpd.h) */
    int64_t epoch;
    unsigned char agent_token_hash[SRV_TOKEN_HASH]; /* the cluster's join token */
    /* node credentials (nodecred.c), under its own lock */
    srv_nodecred_t **nodecreds;
    size_t nnodecreds, nodecreds_cap;
    srv_map_t nodecred_by_hash;
    unsigned char metrics_token_hash[SRV_TOKEN_HASH]; /* metrics-access token */
    unsigned long long pw_ops;
    size_t pw_mem;
    char *dummy_pwhash;

    pthread_mutex_t mu;
    /* users, credentials, accounts, members */
    srv_user_t **users;
    size_t nusers, users_cap;
    srv_token_t **tokens;
    size_t ntokens, tokens_cap;
    srv_map_t token_by_hash;
    uint64_t cred_gen; /* bumped by every revocation (mu): a credential read from the store
                          before it is not cached (auth.c) */
    srv_account_t **accounts;
    size_t naccounts, accounts_cap;
    srv_member_t **members;
    size_t nmembers, members_cap;
    /* jobs: slot id-1; NULL until committed */
    srv_job_t **jobs;
    size_t jobs_cap;
    uint64_t max_job_id;
    int64_t njobs_by_state[6];
    uint64_t *running; /* ids of RUNNING jobs (small: at most one per GPU) */
    size_t nrunning, running_cap;
    /* global event log in memory, published up to pub_seq: the event of sequence q is
     * srv_event_at(s, q), in blocks of SRV_EVENT_BLOCK that never move (the log grows
     * without copying what it holds while s->mu is held) */
    srv_event_t **event_blocks;
    size_t nevent_blocks;
    int64_t first_seq;
    int64_t top_seq;      /* highest seq stored */
    int64_t pub_seq;      /* every seq <= pub_seq is present (or was skipped as a gap) */
    int64_t gap_seq;      /* the missing seq right after pub_seq being waited for, or 0 */
    int64_t gap_since_ms; /* since when */
    /* nodes */
    srv_node_t **nodes;
    size_t nnodes, nodes_cap;
    /* Publication of the scheduler thread's changes to jobs and nodes (sched.c): they are
     * made in memory under mu during an iteration and committed at its end; readers show
     * a job or node only once the iteration that changed it is durable (mu); a request
     * that would show one earlier parks (WAIT_PUBLISH) until the commit wakes it. */
    uint64_t pub_iter;   /* every iteration <= pub_iter is committed */
    uint64_t dirty_iter; /* the newest iteration that changed a job or a node */
    /* the fair-share view, refreshed by the scheduler thread */
    json_t *fairshare;
    /* jobs by account, priority and state, pending GPUs by size (metrics.c), mu held */
    struct srv_jobtally *jobtally;

    /* the scheduler core, owned by the scheduler thread */
    fg_sched_t *core;
    pthread_mutex_t sched_mu;
    pthread_cond_t sched_cv;
    srv_msg_t *inbox_head, *inbox_tail;
    bool sched_stop;
    pthread_t sched_thread;
    bool sched_running;

    /* parked connections */
    pthread_mutex_t wait_mu;
    srv_waiter_t *waiters;
    pthread_t timer_thread;
    pthread_t accept_thread; /* accepts and hands connections to the engine (http.c) */
    int listen_fd;
    atomic_bool stopping;
    atomic_ulong wake_gen;      /* incremented by every srv_wake_kind */
    atomic_long async_inflight; /* parked submissions waiting for their commit */
    atomic_long suspended;      /* connections suspended now (all kinds) */

    srv_metrics_t m;
    srv_est_window_t est_window; /* under mu */

    /* ---- billing: ledger row ids (srv_ledger_ids), taken by any thread; restored as
     * the store's largest id + 1 at start */
    _Atomic uint64_t ledger_next_id;
    _Atomic uint64_t prices_gen; /* bumped by each committed price change */

    /* ---- HTTP engine defences: the password pool, login limits (pwpool.c, ratelimit.c) */
    struct srv_pwpool *pwpool;
    struct srv_limiter *login_addr_lim; /* every login or registration, by client address */
    struct srv_limiter *login_user_lim; /* failed logins, by username */
    _Atomic int64_t behind_ms;          /* when the HTTP engine was last seen behind */
} srv_t;

/* ------------------------------------------------------------------ requests */

enum { M_GET = 1, M_POST = 2, M_PUT = 4, M_PATCH = 8, M_DELETE = 16, M_HEAD = 32 };

typedef struct srv_req {
    srv_t *srv;
    hd_conn_t *conn;
    int method;
    char *path;
    char *seg[8];
    int nseg;
    char *body; /* NUL-terminated; owned by the engine (valid until the request is done) */
    size_t len;
    bool responded;
    int status;
    /* auth */
    int64_t user_id; /* 0: anonymous */
    bool admin;
    bool agent;                       /* a node credential: agent_node is its node */
    bool agent_join;                  /* the cluster's join token (POST /v1/agent/join) */
    char agent_node[FG_NAME_MAX + 1]; /* the node a node credential belongs to */
    /* the credential presented (user requests): its hash, kind and store id. The
     * in-memory entry may be revoked and freed while the request runs: look it up
     * again with srv_req_token (mu held) instead of keeping a pointer. */
    bool has_cred;
    bool cred_session;
    int64_t cred_id;
    unsigned char cred_hash[SRV_TOKEN_HASH];
    char username[72];
    /* parking */
    bool parked;
    int resume_count;
    int64_t park_deadline_ms;
    int64_t pub_deadline_ms; /* srv_park_unpublished: 503 after this */
    unsigned long wake_gen;  /* read before the handler looks for data */
    void *ctx;               /* a handler's state across a suspension */
    void (*ctx_free)(void *ctx);
    int (*resume)(struct srv_req *r); /* when set, runs instead of the route on resumption */
    srv_waiter_t *waiter;
    /* capture: replies are not sent but kept here (one entry of a batched request is
     * validated by the same code as a request of its own) */
    bool capture;
    unsigned captured_status;
    json_t *captured;
    /* ---- HTTP engine defences (http.c, routes.c, pwpool.c) */
    const void *route;      /* the matched route, once checked on the head (routes.c) */
    bool started;           /* its body was taken from the engine (http.c) */
    int pw_call;            /* password pool calls in this run of the handler */
    int64_t t0_us;          /* when it was complete (latency histogram; 0: not yet) */
    bool long_wait;         /* parked on a long-poll or a stream (latency class) */
    struct srv_pwstate *pw; /* their results, kept across the suspension (pwpool.c) */
} srv_req_t;

/* http.c */
int srv_http_start(srv_t *s);
void srv_http_stop(srv_t *s);
int srv_reply_json(srv_req_t *r, unsigned status, json_t *obj); /* steals obj */
/* Replies with b's JSON text (and a newline); takes b's memory and empties it. */
int srv_reply_buf(srv_req_t *r, unsigned status, srv_buf_t *b);
int srv_reply_text(srv_req_t *r, unsigned status, const char *ctype, char *buf, size_t n,
                   bool must_free);
int srv_reply_error(srv_req_t *r, unsigned status, const char *code, const char *field,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
int srv_reply_empty(srv_req_t *r, unsigned status);
/* As srv_reply_text, with more header lines (each ending "\r\n", e.g. "Allow: GET\r\n"). */
int srv_reply_full(srv_req_t *r, unsigned status, const char *ctype, const char *extra, char *buf,
                   size_t n, bool must_free);
/* A streaming answer (server-sent events): see hd_respond_stream. */
int srv_reply_stream(srv_req_t *r, unsigned status, const char *ctype, const char *extra,
                     hd_reader_t read, void *ctx, void (*ctx_free)(void *ctx));
const char *srv_query(srv_req_t *r, const char *key);
const char *srv_header(srv_req_t *r, const char *key);
json_t *srv_body_object(srv_req_t *r);
/* Parks r's connection with no waiter: its owner (a commit's or the scheduler's
 * completion) resumes it with hd_resume. */
void srv_park_request(srv_req_t *r);
int srv_park(srv_req_t *r, int kind, int64_t deadline_ms);
/* Parks the request until the scheduler thread's next commit, when its handler runs
 * again; 503 if the store has not committed for 10 s. */
int srv_park_unpublished(srv_req_t *r);
/* Parks from inside a stream's reader (SSE): conn only. */
void srv_park_conn(srv_t *s, hd_conn_t *conn, int kind, int64_t deadline_ms, unsigned long gen);
void srv_wake_kind(srv_t *s, int kind);
int64_t srv_now_ms(void);
int64_t srv_now(void);

/* ---- HTTP engine defences: client address, password pool, login limits */
/* The client's address as text: the connection's peer, or, on a connection from
 * trusted-proxy, the last X-Forwarded-For hop (http.c). */
void srv_client_addr(srv_req_t *r, char *out, size_t n);
/* Whether the HTTP engine is behind (a worker busy in one round for over a second),
 * or was within the last `window_ms` (http.c): missed heartbeats are not judged then. */
bool srv_http_behind(srv_t *s, int64_t window_ms);
/* pwpool.c. Each returns 1 with the result ready; 0 when the request was parked (its
 * handler returns SRV_YES, runs again from its start when the pool is done, and the
 * same call then returns the result) or answered (429 queue full, 503 stopping); -1
 * when hashing failed. hash NULL verifies against a dummy hash. */
int srv_pw_verify(srv_req_t *r, const char *hash, const char *pw, bool *ok);
int srv_pw_hash(srv_req_t *r, const char *pw, char **out); /* *out: the caller frees */
/* srv_pw_verify for a login of `username`: 429 before hashing when the username's
 * failed logins are over login-user-failures; a failure is counted. */
int srv_pw_login(srv_req_t *r, const char *username, const char *hash, const char *pw, bool *ok);
int srv_pwpool_start(srv_t *s);
void srv_pwpool_stop(srv_t *s);     /* queued jobs fail (503); running ones finish */
void srv_pw_req_free(srv_req_t *r); /* the request's kept results (wiped) */
/* ratelimit.c: token buckets keyed by a string (an address, a username), in a table of
 * fixed size (the least recently used of a few slots is reused). */
typedef struct srv_limiter srv_limiter_t;
srv_limiter_t *srv_limiter_new(double rate, double burst, size_t slots);
void srv_limiter_free(srv_limiter_t *l);
/* Takes a token from key's bucket: true; or false and *retry_s, the seconds to wait. */
bool srv_limiter_take(srv_limiter_t *l, const char *key, double *retry_s);
/* Whether key's bucket holds a token (nothing taken); else *retry_s. */
bool srv_limiter_peek(srv_limiter_t *l, const char *key, double *retry_s);
/* Takes a token if there is one (a failure's cost). */
void srv_limiter_charge(srv_limiter_t *l, const char *key);
/* Answers r 429 rate_limited with Retry-After of retry_s (at least 1) and msg. */
int srv_reply_rate_limited(srv_req_t *r, double retry_s, const char *msg);

/* auth.c */
int srv_auth_init(srv_t *s);
void srv_authenticate(srv_req_t *r);
int srv_password_hash(srv_t *s, const char *pw, char **out);
bool srv_password_verify(srv_t *s, const char *hash, const char *pw);
void srv_token_new(char *out, size_t n, const char *prefix);
void srv_token_hash(const char *tok, unsigned char out[SRV_TOKEN_HASH]);
/* srv_token_hash of the n-byte token tok presented on conn; reuses the hash when the
 * connection's previous request presented the same token (http.c). */
void srv_conn_token_hash(hd_conn_t *conn, const char *tok, size_t n,
                         unsigned char out[SRV_TOKEN_HASH]);
void srv_token_hex(const unsigned char h[SRV_TOKEN_HASH], char out[2 * SRV_TOKEN_HASH + 1]);
srv_token_t *srv_token_add(srv_t *s, int64_t id, int64_t user_id, bool session, const char *name,
                           const unsigned char hash[SRV_TOKEN_HASH], int64_t created_at,
                           int64_t expires_at);
/* The live in-memory credential r presented, or NULL (mu held). */
srv_token_t *srv_req_token(srv_t *s, const srv_req_t *r);
/* Removes credential t from memory and frees it (mu held; the store's copy is the
 * caller's). */
void srv_token_drop(srv_t *s, srv_token_t *t);
/* Drops from memory the user's sessions (except the one hashed `keep`, may be NULL),
 * and with tokens also its API tokens (mu held); bumps cred_gen. Returns how many. */
size_t srv_token_drop_user(srv_t *s, int64_t user_id, bool tokens, const unsigned char *keep);
/* Drops expired sessions from memory (mu held); returns how many. */
size_t srv_token_sweep(srv_t *s, int64_t now);
srv_user_t *srv_user_by_id(srv_t *s, int64_t id);
srv_user_t *srv_user_by_name(srv_t *s, const char *name);
srv_account_t *srv_account_by_name(srv_t *s, const char *name);
srv_member_t *srv_member_find(srv_t *s, const char *account, int64_t user_id);
const char *srv_user_default_account(srv_t *s, int64_t user_id);
bool srv_rate_check(srv_t *s, srv_req_t *r, double *retry_after);

/* routes.c and handlers */
int srv_route(srv_req_t *r);
/* Prints every route, one "METHOD PATTERN AUTH" line each (fairgpu server --list-routes:
 * the route matrix test checks that each has its rows). */
void srv_routes_print(FILE *f);
/* Finds r's route and checks who may call it, on the head alone: false when refused
 * (404, 405, 401, 403 answered on r). srv_route uses the route found. */
bool srv_route_check(srv_req_t *r);
int h_users_create(srv_req_t *r);
int h_users_list(srv_req_t *r);
int h_users_patch(srv_req_t *r);
int h_users_revoke(srv_req_t *r);
int h_sessions_create(srv_req_t *r);
int h_sessions_delete(srv_req_t *r);
int h_me_get(srv_req_t *r);
int h_me_patch(srv_req_t *r);
int h_tokens_create(srv_req_t *r);
int h_tokens_list(srv_req_t *r);
int h_tokens_delete(srv_req_t *r);
int h_accounts_create(srv_req_t *r);
int h_accounts_list(srv_req_t *r);
int h_accounts_get(srv_req_t *r);
int h_accounts_patch(srv_req_t *r);
int h_members_add(srv_req_t *r);
int h_members_del(srv_req_t *r);
int h_members_patch(srv_req_t *r); /* weight, manager (admin) */
int h_audit_list(srv_req_t *r);
int h_jobs_create(srv_req_t *r);
int h_jobs_list(srv_req_t *r);
int h_jobs_get(srv_req_t *r);
int h_jobs_cancel(srv_req_t *r);
int h_jobs_events(srv_req_t *r);
int h_jobs_attempts(srv_req_t *r);
int h_jobs_logs(srv_req_t *r);
int h_events(srv_req_t *r);
int h_nodes_list(srv_req_t *r);
int h_nodes_drain(srv_req_t *r);
int h_nodes_resume(srv_req_t *r);
/* nodecred.c: POST /v1/agent/join, POST and DELETE /v1/nodes/{name}/credentials */
int h_agent_join(srv_req_t *r);
int h_nodes_cred_create(srv_req_t *r);
int h_nodes_cred_revoke(srv_req_t *r);
/* Loads the stored node credentials (at start, before any request); 0 or -1. */
int srv_nodecred_load(srv_t *s);
/* true if `hash` is a live node credential's; name gets its node. Takes its own lock. */
bool srv_nodecred_lookup(srv_t *s, const unsigned char hash[SRV_TOKEN_HASH],
                         char name[FG_NAME_MAX + 1]);
/* true if name is a valid node name ([A-Za-z0-9_.-]{1,63}). */
bool srv_node_name_ok(const char *name);
int h_fairshare(srv_req_t *r);
int h_estimates_accuracy(srv_req_t *r);       /* h_estimates.c */
const char *srv_est_source_name(int source);  /* "user".."limit", NULL: none (sched_estimates.c) */
void srv_est_metrics(srv_t *s, srv_buf_t *b); /* h_estimates.c */
/* A job whose first attempt starts now: its estimate errors into the metrics' window
 * (h_estimates.c). mu held. */
void srv_est_window_add(srv_t *s, const srv_job_t *j);
/* h_dry_run.c: whether ?dry_run= asks for one (any value but false, 0); then the answer
 * (400 for a value other than true, 1) for the checked submission in */
int srv_dry_run_flag(srv_req_t *r);
struct srv_submit_in;
int srv_dry_run_call(srv_req_t *r, const char *account, const struct srv_submit_in *in);
int h_healthz(srv_req_t *r);
int h_metrics(srv_req_t *r); /* h_metrics.c */
/* metrics.c: what the metrics keep between scrapes */
void srv_hist_observe(srv_hist_t *h, const int64_t *bounds_us, int64_t us);
extern const int64_t srv_pass_bounds_us[SRV_HIST_BUCKETS];
extern const int64_t srv_http_bounds_us[SRV_HIST_BUCKETS];
/* Counts a reply to r in the latency histogram (once, when r's request was complete). */
void srv_metrics_http_observe(srv_req_t *r);
/* Adds (delta +1) or removes (-1) job j, in its state, to the tally (mu held). */
void srv_jobtally_count(srv_t *s, const srv_job_t *j, int delta);
/* The size class of a job of `gpus` GPUs: 0 "1", 1 "2-7", 2 "8", 3 ">8". */
int srv_size_class(int32_t gpus);
/* The tally's accounts (mu held): how many, and the i-th's name and counts
 * n[fg_prio_t][fg_job_state_t]; pending GPUs by size class. */
size_t srv_jobtally_accounts(const srv_t *s);
const char *srv_jobtally_get(const srv_t *s, size_t i, int64_t n[3][6]);
bool srv_jobtally_prio_seen(const srv_t *s, size_t i, int prio);
void srv_jobtally_free(srv_t *s); /* (tests; the server keeps it to the end) */
void srv_jobtally_pending_gpus(const srv_t *s, int64_t out[4]);
struct srv_batch;
/* Counts the ledger rows of b, just committed (any thread). */
void srv_metrics_ledger_committed(srv_t *s, const struct srv_batch *b);
/* Counts every stored ledger row (at start, before any request). */
int srv_metrics_ledger_restore(srv_t *s, fg_store_tx_t *tx);
int h_billing(srv_req_t *r);
/* h_billing.c: the price book */
int h_billing_prices_get(srv_req_t *r);
int h_billing_prices_put(srv_req_t *r);
/* the reports (h_usage.c, h_invoice.c) and admin adjustments (h_adjust.c) */
int h_billing_usage(srv_req_t *r);
int h_billing_invoice(srv_req_t *r);
int h_billing_adjust(srv_req_t *r);
int h_agent_register(srv_req_t *r);
int h_agent_heartbeat(srv_req_t *r);
int h_agent_assignments(srv_req_t *r);
int h_agent_started(srv_req_t *r);
int h_agent_logs(srv_req_t *r);
int h_agent_exited(srv_req_t *r);
int h_agent_reports(srv_req_t *r);
/* Parses the body of POST /v1/agent/reports into a MSG_REPORTS message; NULL when the
 * request as a whole is refused (replied on r). Entries refused alone are answered in
 * their slots. */
srv_msg_t *srv_agent_parse_reports(srv_req_t *r, json_t *body);

/* sched_idle.c (mu held): the job's idle fields (docs/idle.md), appended to its JSON
 * after a comma; the account's idle policy fields into o; a body's idle_action and
 * idle_grace_s into *a (false: answered 400 on r); the idle metrics (takes mu). */
void srv_idle_render(const srv_job_t *j, srv_buf_t *b);
void srv_idle_account_json(const fg_store_account_t *a, json_t *o);
bool srv_idle_account_fields(srv_req_t *r, json_t *body, fg_store_account_t *a);
void srv_idle_metrics(srv_t *s, srv_buf_t *b);
/* Whether j's current attempt was stopped to requeue it for idling (its account's
 * policy): billing charges it as it ran, without a preemption's lost-work refund. */
bool srv_idle_requeued(const srv_job_t *j);

/* model.c (mu held unless stated) */
json_t *srv_user_json(srv_t *s, const srv_user_t *u);
json_t *srv_job_json(srv_t *s, const srv_job_t *j, bool full);
void srv_job_render(srv_t *s, const srv_job_t *j, bool full, const char *username, srv_buf_t *b);
/* Its estimate fields (",\"estimated_start_p10\":...": after another key; h_estimates.c) */
void srv_job_render_estimates(const srv_job_t *j, srv_buf_t *b);
srv_job_t *srv_job_get(srv_t *s, uint64_t id);
/* Whether a job's last change (srv_all_published: every change of the scheduler thread
 * so far) is committed, so that it may be shown (mu held). A handler that finds it is not
 * answers srv_park_unpublished(r) after releasing mu. */
static inline bool srv_job_published(const srv_t *s, const srv_job_t *j)
{
    return j->dirty_iter <= s->pub_iter;
}
static inline bool srv_all_published(const srv_t *s)
{
    return s->dirty_iter <= s->pub_iter;
}
void srv_job_insert_mem(srv_t *s, srv_job_t *j);
void srv_job_free(srv_job_t *j);
void srv_job_count_state(srv_t *s, const srv_job_t *j, int delta);
/* A copy of the RUNNING job ids (caller frees), safe to walk while ending jobs. */
uint64_t *srv_running_snapshot(srv_t *s, size_t *n);
/* Adds a committed event to the in-memory log and advances the published mark. */
void srv_event_mem(srv_t *s, const fg_store_event_t *e);
#define SRV_EVENT_BLOCK 4096
/* The event of sequence q >= first_seq, if its block exists (zeroed until it is added). */
static inline srv_event_t *srv_event_at(const srv_t *s, int64_t q)
{
    size_t i = (size_t)(q - s->first_seq);
    return i / SRV_EVENT_BLOCK < s->nevent_blocks
               ? &s->event_blocks[i / SRV_EVENT_BLOCK][i % SRV_EVENT_BLOCK]
               : NULL;
}
void srv_event_gap_check(srv_t *s);
json_t *srv_event_json(srv_t *s, const srv_event_t *e, int64_t viewer, bool admin);
srv_node_t *srv_node_by_name(srv_t *s, const char *name);
bool srv_parse_job_id(const char *str, uint64_t *id);
char *srv_strdup0(const char *p); /* NULL-safe strdup */
/* The string member `key` of object o, or def if absent or not a string. */
const char *srv_jstr(const json_t *o, const char *key, const char *def);
int srv_store_err_status(int rc);

/* persist.c */
int srv_persist_open(srv_t *s);
int srv_persist_load(srv_t *s);
void srv_persist_close(srv_t *s);
/* The one-time setup token of the first admin (after srv_persist_load): while no admin
 * exists, DATA_DIR/setup-token (mode 0600) holds it and the store its hash (kept
 * across restarts while the file matches); once an admin exists both are removed.
 * path gets the file's name. Returns 1 if a token is live, 0 if not, -1 on error. */
int srv_setup_token_init(srv_t *s, char *path, size_t pn);
/* metrics-access token: reads DATA_DIR/metrics.token (made, 0600, if absent). 0 or -1. */
int srv_metrics_token_init(srv_t *s);
void srv_audit(srv_t *s, int64_t admin_id, const char *action, const char *target, json_t *details);
/* A small batch of store operations run as one write unit (one durable commit). */
typedef struct srv_op srv_op_t;
typedef struct srv_batch {
    srv_op_t *ops;
    size_t n, cap;
    int failed_op;
} srv_batch_t;
enum srv_op_kind {
    OP_USER_INSERT = 1,
    OP_USER_UPDATE,
    OP_MEMBER_ADD,
    OP_MEMBER_REMOVE,
    OP_MEMBER_WEIGHT,
    OP_MEMBER_DEFAULT,
    OP_SESSION_INSERT,
    OP_SESSION_DELETE,
    OP_TOKEN_INSERT,
    OP_TOKEN_DELETE,
    OP_ACCOUNT_INSERT,
    OP_ACCOUNT_UPDATE,
    OP_AUDIT,
    OP_JOB_IDEM, /* if (user, key) exists: out = its id, and the rest of the batch is skipped */
    OP_JOB_INSERT,
    OP_JOB_UPDATE,
    OP_ATTEMPT_INSERT,
    OP_ATTEMPT_UPDATE,
    OP_EVENT, /* job_id < 0: the id of the batch's last OP_JOB_INSERT */
    OP_NODE_UPSERT,
    OP_NODE_STATE,
    OP_USAGE_SET,
    OP_SETTING_SET,
    OP_USER_COUNT,     /* out = number of users, before the next op */
    OP_SESSION_EXPIRE, /* delete sessions expired at i1 */
    OP_USER_MODIFY,    /* rec: srv_user_change_t, applied to the stored row (read in the unit) */
    OP_SESSIONS_DELETE_USER, /* delete every session of user i1; out = how many */
    OP_TOKENS_DELETE_USER,   /* delete every API token of user i1; out = how many */
    OP_SETUP_CLAIM,          /* the setup token's hash s1 is the live one: burn it; else ENOENT */
    OP_LEDGER,               /* rec: fg_ledger_row_t, appended (ids from srv_ledger_ids) */
    OP_MEMBER_MANAGER,       /* user i1 in account s1 is a manager iff d1 != 0 */
};
/* The fields an OP_USER_MODIFY changes; the others keep their stored values, so that
 * concurrent changes of different fields (PATCH /v1/me, PATCH /v1/users/{id}) do not
 * write each other's old values back. NULL / -1: unchanged. */
typedef struct srv_user_change {
    int64_t id;
    const char *email, *display_name, *password_hash;
    int role;     /* FG_STORE_ROLE_*, -1 */
    int disabled; /* 0, 1, -1 */
} srv_user_change_t;
#define SRV_SETUP_SETTING "setup_token_hash" /* the store setting holding it (hex) */
struct srv_op {
    int kind;
    const void *rec; /* borrowed record of the kind's type */
    int64_t i1;
    const char *s1, *s2;
    double d1;
    int64_t out; /* assigned id / seq */
    bool skipped;
};
srv_op_t *srv_batch_add(srv_batch_t *b, int kind, const void *rec);
/* Reserves n consecutive ledger row ids (any thread); returns the first. */
uint64_t srv_ledger_ids(srv_t *s, int n);
int srv_batch_commit(srv_t *s, srv_batch_t *b);
/* Queues the batch for the next group commit and returns at once; done(rc, arg) runs
 * on the store's writer thread when it is durable (or failed). */
int srv_batch_commit_async(srv_t *s, srv_batch_t *b, void (*done)(int rc, void *arg), void *arg);
void srv_batch_free(srv_batch_t *b);

/* sched.c */
int srv_sched_start(srv_t *s);
void srv_sched_stop(srv_t *s);
void srv_sched_post(srv_t *s, srv_msg_t *m); /* takes m */
srv_msg_t *srv_msg_new(int kind);
void srv_msg_free(srv_msg_t *m);
/* Posts m and waits until the scheduler thread processed and persisted it; replies
 * from y (status, code, msg or reply JSON). */
/* Posts m and parks the connection (no thread waits); the scheduler thread resumes
 * it once the outcome is durable, and the answer is the sync's status/reply, or job
 * `render_job` (0: none) on success. */
int srv_sched_call_job(srv_req_t *r, srv_msg_t *m, uint64_t render_job);
int srv_sched_call(srv_req_t *r, srv_msg_t *m);
/* sched_why.c: answers GET /v1/jobs/{id} of pending job id with its "why" (after the
 * scheduler thread's next pass) */
int srv_why_get(srv_req_t *r, uint64_t id);
/* fairshare_metrics.c: the per-account fair-share gauges of /metrics, appended to b */
void srv_fairshare_metrics(srv_t *s, srv_buf_t *b);
/* Posts m and waits; the caller reads *y and calls srv_sync_destroy(y). */
void srv_sched_wait(srv_t *s, srv_msg_t *m, srv_sync_t *y);
/* Destroys and frees a heap srv_sync_t: the ctx_free of a parked request. */
void srv_sync_free(void *p);
fg_sched_t *srv_core_build(srv_t *s);

/* agent.c helpers used by the scheduler thread (mu held) */
void srv_node_send(srv_t *s, srv_node_t *n, json_t *msg); /* steals msg, adds seq */
json_t *srv_node_json(srv_t *s, srv_node_t *n);           /* mu held */

#endif
