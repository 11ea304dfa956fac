/*
 * store.h - the controller's durable store, behind a function table.
 *
 * One interface, several backends: SQLite (sqlite.c, embedded, the default) and later
 * PostgreSQL. Both pass tests/unit/test_store.c. docs/store.md describes the model.
 *
 * HANDLES
 *   fg_store_t     one open store; thread-safe; shared by every thread of the server.
 *   fg_store_tx_t  a transaction handle; used by ONE thread at a time. Every data
 *                  function below takes one. There are two kinds:
 *     - read handles: fg_store_read_begin() .. fg_store_read_end(). A consistent
 *       snapshot on a pooled read connection; write functions on it return
 *       FG_STORE_EREADONLY. Keep them short (never across a long-poll wait): an open
 *       snapshot pins the WAL, which cannot restart until it ends.
 *     - write handles: handed to a write unit (fg_store_write_fn) that the store's
 *       writer thread runs inside a group-committed transaction. Reads on it see the
 *       unit's own (and earlier units') uncommitted changes.
 *
 * WRITES AND GROUP COMMIT
 *   fg_store_write(st, fn, arg) enqueues the unit `fn(tx, arg)` and blocks until the
 *   transaction holding it is committed and fsync'd (SQLite: WAL, synchronous=FULL).
 *   The writer thread takes every queued unit (up to opts.max_batch) into one
 *   transaction, runs each, then commits once. A unit that returns non-zero is rolled
 *   back alone (the others commit) and fg_store_write returns its code: the batch is
 *   then rolled back and run again with each unit in its own savepoint, so a unit may
 *   run twice. It must be deterministic: derive its writes and outputs only from the
 *   store and arg, and overwrite (never accumulate into) what it leaves in arg. If the
 *   commit fails, every unit of the batch gets FG_STORE_EIO and none of their changes
 *   exist. A unit runs on the writer thread: it must only call fg_store_* functions on
 *   its tx and touch memory reachable from arg; it must not block, take locks the
 *   caller holds, or call fg_store_write/read_begin.
 *
 * RECORDS AND OWNERSHIP
 *   Records are plain structs. Input records (insert/update) are read, never kept:
 *   strings are copied. Output records are filled into a caller-provided struct; their
 *   strings are allocated by the store and released by the matching _clear() function
 *   (which also zeroes the struct; clearing a zeroed struct is a no-op). Lists are
 *   caller-provided *_list_t structs released with *_list_free().
 *   JSON columns (command, env, nodes, gpus, payload, details) are JSON text, stored
 *   verbatim; the store does not parse them. NULL JSON text on input stores SQL NULL
 *   and reads back as NULL.
 *   Times: *_time / *_at / as_of are Unix seconds, *_ms milliseconds; 0 = unset.
 *
 * ERRORS
 *   0 (FG_STORE_OK) or a negative fg_store_err_t; fg_store_strerror() names them.
 *   FG_STORE_EINVAL, _ENOENT and _EEXIST share their values with core.h's fg_err_t.
 */
#ifndef FG_STORE_H
#define FG_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ errors */

typedef enum fg_store_err {
    FG_STORE_OK = 0,
    FG_STORE_EINVAL = -1,      /* bad argument (NULL required field, malformed cursor) */
    FG_STORE_ENOENT = -3,      /* no such row */
    FG_STORE_EEXIST = -4,      /* unique key taken (username, account, idempotency key) */
    FG_STORE_EIO = -100,       /* the database failed (I/O, corruption, full disk) */
    FG_STORE_ECLOSED = -101,   /* the store is closing; nothing was written */
    FG_STORE_EREADONLY = -102, /* a write function on a read handle */
    FG_STORE_EVERSION = -103,  /* the file's schema is newer than this binary */
} fg_store_err_t;

/* A static English name of a store error code. */
const char *fg_store_strerror(int err);

/* ------------------------------------------------------------------ handles */

typedef struct fg_store fg_store_t;
typedef struct fg_store_tx fg_store_tx_t;
typedef struct fg_store_ops fg_store_ops_t;

/* A backend allocates a struct that starts with this one. */
struct fg_store {
    const fg_store_ops_t *ops;
};

/* A backend's transaction handle starts with this one. */
struct fg_store_tx {
    fg_store_t *store;
    bool writable;
};

typedef struct fg_store_opts {
    int read_conns;           /* read connections in the pool (opened lazily); 0 = 16 */
    int max_batch;            /* write units per group commit; 0 = 1024 */
    int busy_timeout_ms;      /* waiting on another process's lock; 0 = 5000 */
    int wal_checkpoint_pages; /* WAL size (pages) at which the writer completes a checkpoint
                                 so the WAL restarts from its beginning; 0 = 4000 */
    int commit_delay_us;      /* group commit delay: under load the writer starts a batch
                                 when its oldest unit is this old; 0 = none */
    int commit_siblings;      /* "under load": the previous batch held at least this many
                                 units; 0 = 1 */
} fg_store_opts_t;

/* Opens (creating if needed) the SQLite store at `path`, runs pending schema
 * migrations, and starts its writer thread. opts may be NULL (defaults). On error
 * returns a negative code, sets *out to NULL, and if errmsg is not NULL sets *errmsg to
 * an allocated sentence (caller frees with free()). */
int fg_store_open_sqlite(const char *path, const fg_store_opts_t *opts, fg_store_t **out,
                         char **errmsg);

/* Opens a store by URI: "sqlite:PATH" or a plain PATH opens the SQLite backend;
 * "postgres://..." / "postgresql://..." answer FG_STORE_EINVAL with a message until that
 * backend exists. Otherwise as fg_store_open_sqlite. */
int fg_store_open(const char *uri, const fg_store_opts_t *opts, fg_store_t **out, char **errmsg);

/* Stops the writer (queued units still run and commit first), closes every
 * connection and frees the store. Handles must all have been ended. NULL is a no-op. */
void fg_store_close(fg_store_t *st);

/* "sqlite" or "postgres". Static string. */
const char *fg_store_backend(const fg_store_t *st);

/* The schema version of the open database (PRAGMA user_version for SQLite). */
int fg_store_schema_version(fg_store_t *st);

/* Cheap liveness check (a read on a pooled connection). 0 if healthy. */
int fg_store_ping(fg_store_t *st);

typedef struct fg_store_stats {
    uint64_t commits;           /* transactions committed (each one fsync) */
    uint64_t units;             /* write units run */
    uint64_t units_failed;      /* units rolled back (their fn returned non-zero) */
    uint64_t reruns;            /* batches run again with savepoints (a unit failed) */
    uint64_t max_batch;         /* largest number of units in one commit so far */
    uint64_t queue_len;         /* units waiting right now */
    uint64_t batch_us;          /* total microseconds spent running batches (units + commit) */
    uint64_t commit_us;         /* of which in COMMIT (the fsync) */
    uint64_t checkpoints;       /* complete WAL checkpoints (the WAL then restarts) */
    uint64_t wal_pages;         /* WAL frames after the last commit */
    uint64_t checkpoint_us;     /* total time the writer spent completing checkpoints */
    uint64_t max_checkpoint_us; /* the longest of them (a pause of the commit pipeline) */
} fg_store_stats_t;

/* Copies the store's counters (for /metrics and benchmarks). */
void fg_store_get_stats(fg_store_t *st, fg_store_stats_t *out);

/* Starts a read transaction on a pooled connection (blocks while all are busy).
 * On success *tx is a read handle the caller must end with fg_store_read_end(). */
int fg_store_read_begin(fg_store_t *st, fg_store_tx_t **tx);

/* Ends a read transaction and returns its connection to the pool. NULL is a no-op. */
void fg_store_read_end(fg_store_tx_t *tx);

/* A write unit. Runs on the writer thread with a write handle; returns 0 to commit
 * its changes or any non-zero value to roll back its changes only. It may run twice
 * (see WRITES AND GROUP COMMIT): same store state and arg, same result. */
typedef int (*fg_store_write_fn)(fg_store_tx_t *tx, void *arg);

/* Runs `fn(tx, arg)` in the next group commit and waits until that commit is durable.
 * Returns 0 (committed and fsync'd), fn's non-zero return (rolled back), FG_STORE_EIO
 * (the batch failed to commit: nothing of it is stored) or FG_STORE_ECLOSED. */
int fg_store_write(fg_store_t *st, fg_store_write_fn fn, void *arg);

/* Completion of an asynchronous write unit: rc is what fg_store_write would return.
 * Runs on the store's completion thread after the batch is durable (or failed), in
 * commit order: it should be quick and must not call fg_store_write or fg_store_close
 * (e.g. it resumes a suspended HTTP connection, or signals the caller's own condition
 * variable). It may call fg_store_write_async. */
typedef void (*fg_store_done_fn)(int rc, void *done_arg);

/* Like fg_store_write, but returns at once: the unit joins the next group commit and
 * done(rc, done_arg) is called exactly once when its batch is durable (or failed). Lets
 * a server with few threads keep many requests in one commit (suspend the request,
 * resume it in done). fn, arg must stay valid until done runs. Returns 0 if queued, or
 * FG_STORE_ECLOSED / FG_STORE_EINVAL (then done is never called). */
int fg_store_write_async(fg_store_t *st, fg_store_write_fn fn, void *arg, fg_store_done_fn done,
                         void *done_arg);

/* ------------------------------------------------------------------ settings */

/* Key/value settings (controller epoch, agent token hash, ...).
 * get: *value gets an allocated copy (free()); FG_STORE_ENOENT if absent. */
int fg_store_setting_get(fg_store_tx_t *tx, const char *key, char **value);
/* Creates or replaces a setting. */
int fg_store_setting_set(fg_store_tx_t *tx, const char *key, const char *value);
/* Deletes a setting; FG_STORE_ENOENT if absent. */
int fg_store_setting_delete(fg_store_tx_t *tx, const char *key);

/* ------------------------------------------------------------------ users */

typedef enum fg_store_role { FG_STORE_ROLE_USER = 0, FG_STORE_ROLE_ADMIN = 1 } fg_store_role_t;

typedef struct fg_store_user {
    int64_t id; /* assigned by insert, > 0 */
    char *username;
    char *email;
    char *display_name;  /* may be NULL */
    char *password_hash; /* Argon2id string from libsodium */
    int32_t role;        /* fg_store_role_t */
    bool disabled;
    int64_t created_at;
    char *default_account; /* output only: the user's default membership, or NULL */
} fg_store_user_t;

typedef struct fg_store_user_list {
    fg_store_user_t *items;
    size_t n;
    char *next_cursor; /* allocated; NULL at the end */
} fg_store_user_list_t;

/* Releases the strings of *u and zeroes it. */
void fg_store_user_clear(fg_store_user_t *u);
/* Releases a list and its items and zeroes it. */
void fg_store_user_list_free(fg_store_user_list_t *l);

/* Inserts a user (default_account and id are ignored); *id (may be NULL) gets the new
 * id. FG_STORE_EEXIST if the username is taken. Memberships are separate. */
int fg_store_user_insert(fg_store_tx_t *tx, const fg_store_user_t *u, int64_t *id);
/* Fetches a user by id / by username into *out. FG_STORE_ENOENT if none. */
int fg_store_user_get(fg_store_tx_t *tx, int64_t id, fg_store_user_t *out);
int fg_store_user_get_by_name(fg_store_tx_t *tx, const char *username, fg_store_user_t *out);
/* Writes email, display_name, password_hash, role and disabled of user u->id
 * (username, created_at are immutable). FG_STORE_ENOENT if none. */
int fg_store_user_update(fg_store_tx_t *tx, const fg_store_user_t *u);
/* Number of users (the first registered user becomes admin). */
int fg_store_user_count(fg_store_tx_t *tx, int64_t *n);
/* Users by increasing id, `limit` (1..1000; 0 = 100) after `cursor` (NULL = start). */
int fg_store_user_list(fg_store_tx_t *tx, const char *cursor, int limit, fg_store_user_list_t *out);

/* ------------------------------------------------------------------ sessions, tokens */

/* Token hashes are text (lower-case hex of crypto_generichash), never raw tokens. */

typedef struct fg_store_session {
    char *token_hash;
    int64_t user_id;
    int64_t created_at;
    int64_t expires_at;
} fg_store_session_t;

void fg_store_session_clear(fg_store_session_t *s);
/* Inserts a login session. FG_STORE_EEXIST if the hash exists. */
int fg_store_session_insert(fg_store_tx_t *tx, const fg_store_session_t *s);
/* Fetches a session by token hash (expired ones too: the caller checks expires_at). */
int fg_store_session_get(fg_store_tx_t *tx, const char *token_hash, fg_store_session_t *out);
/* Deletes a session (logout). FG_STORE_ENOENT if none. */
int fg_store_session_delete(fg_store_tx_t *tx, const char *token_hash);
/* Deletes every session of a user (password change, user disabled); *n (may be NULL)
 * gets how many. */
int fg_store_session_delete_user(fg_store_tx_t *tx, int64_t user_id, int64_t *n);
/* Deletes sessions with expires_at <= now; *n (may be NULL) gets how many. */
int fg_store_session_delete_expired(fg_store_tx_t *tx, int64_t now, int64_t *n);

typedef struct fg_store_token {
    int64_t id; /* assigned by insert */
    char *name;
    char *token_hash;
    int64_t user_id;
    int64_t created_at;
} fg_store_token_t;

typedef struct fg_store_token_list {
    fg_store_token_t *items;
    size_t n;
} fg_store_token_list_t;

void fg_store_token_clear(fg_store_token_t *t);
void fg_store_token_list_free(fg_store_token_list_t *l);
/* Inserts an API token; *id (may be NULL) gets its id. FG_STORE_EEXIST on a hash clash. */
int fg_store_token_insert(fg_store_tx_t *tx, const fg_store_token_t *t, int64_t *id);
/* Fetches an API token by hash. FG_STORE_ENOENT if none. */
int fg_store_token_get_by_hash(fg_store_tx_t *tx, const char *token_hash, fg_store_token_t *out);
/* The user's tokens by increasing id. */
int fg_store_token_list(fg_store_tx_t *tx, int64_t user_id, fg_store_token_list_t *out);
/* Deletes token `id` if it belongs to user_id (user_id 0: any owner, for admins).
 * FG_STORE_ENOENT if there is no such token of that user. */
int fg_store_token_delete(fg_store_tx_t *tx, int64_t id, int64_t user_id);

typedef enum fg_store_auth_kind {
    FG_STORE_AUTH_SESSION = 1,
    FG_STORE_AUTH_TOKEN = 2,
} fg_store_auth_kind_t;

/* One lookup per request: finds the session (not expired at `now`) or API token with
 * this hash and fills *user with its user. *kind (may be NULL) says which matched;
 * *cred_id (may be NULL) gets the token id (0 for sessions).
 * FG_STORE_ENOENT if none matches (or the session expired). Disabled users are
 * returned; the caller refuses them. */
int fg_store_auth_lookup(fg_store_tx_t *tx, const char *token_hash, int64_t now,
                         fg_store_user_t *user, int *kind, int64_t *cred_id);

/* ------------------------------------------------------------------ accounts */

/* allowed_priorities bit (1 << fg_prio_t): low = 1, normal = 2, high = 4; all = 7. */
#define FG_STORE_PRIO_ALL 7

typedef struct fg_store_account {
    char *name;
    double weight;              /* > 0 */
    int32_t gpu_quota;          /* < 0: unlimited */
    int64_t budget_micros;      /* < 0: no budget */
    int32_t allowed_priorities; /* bitmask, see FG_STORE_PRIO_ALL */
    int64_t created_at;
    /* budget rules (docs/billing.md, "Budgets"); schema version 5 */
    int32_t budget_mode;     /* fg_store_budget_mode_t */
    int32_t budget_period;   /* fg_store_budget_period_t */
    int64_t budget_since_ms; /* a grant counts what was charged from this time on */
    /* idle policy (docs/idle.md); schema version 7 */
    int32_t idle_action;  /* fg_store_idle_action_t */
    int64_t idle_grace_s; /* requeue/stop this long after the warning */
} fg_store_account_t;

typedef enum fg_store_idle_action {
    FG_IDLE_NONE = 0,    /* idle jobs are flagged only */
    FG_IDLE_WARN = 1,    /* ... and warned (IDLE_WARNING) */
    FG_IDLE_REQUEUE = 2, /* ... and requeued after the grace (IDLE_REQUEUED) */
    FG_IDLE_STOP = 3,    /* ... and stopped after the grace (IDLE_STOPPED) */
} fg_store_idle_action_t;

typedef enum fg_store_budget_mode {
    FG_BUDGET_HARD = 0, /* submits refused (402), running jobs stopped when crossed */
    FG_BUDGET_SAFE = 1, /* a job starts only if its time limit at its rate fits */
    FG_BUDGET_WARN = 2, /* warnings only */
} fg_store_budget_mode_t;

typedef enum fg_store_budget_period {
    FG_BUDGET_MONTHLY = 0, /* the charges of the current UTC month */
    FG_BUDGET_GRANT = 1,   /* a fixed grant: the charges from budget_since_ms on */
} fg_store_budget_period_t;

typedef struct fg_store_account_list {
    fg_store_account_t *items;
    size_t n;
} fg_store_account_list_t;

void fg_store_account_clear(fg_store_account_t *a);
void fg_store_account_list_free(fg_store_account_list_t *l);
/* Creates an account. FG_STORE_EEXIST if the name is taken. The account "default"
 * (weight 1, unlimited, all priorities) is created by the first migration. */
int fg_store_account_insert(fg_store_tx_t *tx, const fg_store_account_t *a);
int fg_store_account_get(fg_store_tx_t *tx, const char *name, fg_store_account_t *out);
/* Writes weight, gpu_quota, budget_micros, allowed_priorities, budget_mode,
 * budget_period, budget_since_ms, idle_action and idle_grace_s of account a->name. */
int fg_store_account_update(fg_store_tx_t *tx, const fg_store_account_t *a);
/* Every account, by name. */
int fg_store_account_list(fg_store_tx_t *tx, fg_store_account_list_t *out);

/* ------------------------------------------------------------------ memberships */

typedef struct fg_store_member {
    int64_t user_id;
    char *account;
    double weight; /* the user's share inside the account, > 0 (API default 1) */
    bool is_default;
    bool is_manager;  /* an account manager: sees the account's usage and invoices (v5) */
    int64_t position; /* output: increasing in order of joining */
    char *username;   /* output only */
} fg_store_member_t;

typedef struct fg_store_member_list {
    fg_store_member_t *items;
    size_t n;
} fg_store_member_list_t;

void fg_store_member_clear(fg_store_member_t *m);
void fg_store_member_list_free(fg_store_member_list_t *l);
/* Adds user m->user_id to account m->account with m->weight (<= 0 means 1). The user's first
 * membership becomes the default (m->is_default is otherwise ignored).
 * FG_STORE_EEXIST if already a member; FG_STORE_ENOENT if user or account is missing. */
int fg_store_member_add(fg_store_tx_t *tx, const fg_store_member_t *m);
/* Changes the weight of an existing membership. */
int fg_store_member_set_weight(fg_store_tx_t *tx, int64_t user_id, const char *account,
                               double weight);
/* Makes the member an account manager of `account`, or not (v5). */
int fg_store_member_set_manager(fg_store_tx_t *tx, int64_t user_id, const char *account,
                                bool is_manager);
/* Makes `account` the user's default (it must be a membership). */
int fg_store_member_set_default(fg_store_tx_t *tx, int64_t user_id, const char *account);
/* Removes a membership. When it was the default, the earliest remaining membership
 * becomes the default. FG_STORE_ENOENT if not a member. */
int fg_store_member_remove(fg_store_tx_t *tx, int64_t user_id, const char *account);
int fg_store_member_get(fg_store_tx_t *tx, int64_t user_id, const char *account,
                        fg_store_member_t *out);
/* A user's memberships in order of joining (default first is NOT implied: check
 * is_default). */
int fg_store_member_list_by_user(fg_store_tx_t *tx, int64_t user_id, fg_store_member_list_t *out);
/* An account's members in order of joining. */
int fg_store_member_list_by_account(fg_store_tx_t *tx, const char *account,
                                    fg_store_member_list_t *out);
/* Every membership (restoring the scheduler), by account then position. */
int fg_store_member_list_all(fg_store_tx_t *tx, fg_store_member_list_t *out);

/* ------------------------------------------------------------------ audit log */

typedef struct fg_store_audit {
    int64_t id; /* assigned */
    int64_t time;
    int64_t admin_user_id;
    char *action;       /* e.g. "user.update", "account.create" */
    char *target;       /* e.g. a username or account name */
    char *details_json; /* JSON text or NULL */
} fg_store_audit_t;

typedef struct fg_store_audit_list {
    fg_store_audit_t *items;
    size_t n;
    char *next_cursor;
} fg_store_audit_list_t;

void fg_store_audit_clear(fg_store_audit_t *a);
void fg_store_audit_list_free(fg_store_audit_list_t *l);
/* Appends an audit record; *id (may be NULL) gets its id. */
int fg_store_audit_append(fg_store_tx_t *tx, const fg_store_audit_t *a, int64_t *id);
/* Newest first, `limit` (0 = 100, max 1000) after `cursor` (NULL = newest). */
int fg_store_audit_list(fg_store_tx_t *tx, const char *cursor, int limit,
                        fg_store_audit_list_t *out);

/* ------------------------------------------------------------------ jobs */

typedef struct fg_store_job {
    int64_t id; /* assigned by insert, > 0; the API shows it as a decimal string */
    char *name;
    int64_t user_id;
    char *username; /* output only (joined) */
    char *account;
    char *command_json; /* JSON array of strings or JSON string */
    char *env_json;     /* JSON object or NULL */
    int32_t gpus;
    char *gpu_type;      /* NULL = any */
    char *model;         /* NULL if not given */
    char *dataset;       /* NULL if not given */
    int32_t priority;    /* fg_prio_t */
    int32_t state;       /* fg_job_state_t */
    int32_t reason_code; /* fg_reason_t */
    char *reason;        /* NULL or plain words */
    int64_t submit_time, start_time, end_time;
    int64_t time_limit_s;
    bool has_exit_code;
    int32_t exit_code;
    int32_t attempts; /* attempts started */
    int32_t max_retries;
    int32_t retries_used;
    int64_t attained_gpu_s;
    bool cancel_requested;
    int64_t eligible_time;
    int64_t checkpoint_interval_s;
    int32_t cpus;      /* 0 = default */
    int64_t memory_mb; /* 0 = default */
    char *idem_key;    /* NULL = none; unique per user */
    /* Of the current or last attempt (for GET without reading attempts): */
    char *nodes_json;        /* JSON array of node names or NULL */
    char *gpu_indices_json;  /* JSON array or NULL */
    int64_t estimated_start; /* 0 = unknown */
    int64_t cost_micros;
    int64_t idle_gpu_s; /* GPU-seconds spent idle while allocated (docs/idle.md; v7) */
    /* Start estimates and how good they were (docs/scheduler.md, "Estimates"); times in
     * Unix seconds, 0 = unknown; sources 0 none, 1 user, 2 account, 3 all, 4 limit. */
    int64_t est_p10, est_p90;                           /* the range of estimated_start (latest) */
    int32_t est_source;                                 /* of the latest estimate */
    int64_t est_submit, est_submit_p10, est_submit_p90; /* the first after submission */
    int32_t est_submit_source;
    int64_t est_limit_submit; /* the limit-based estimate at that moment */
    int64_t est_first_start;  /* when its first attempt started (the errors' reference) */
} fg_store_job_t;

typedef struct fg_store_job_list {
    fg_store_job_t *items;
    size_t n;
    char *next_cursor; /* allocated; NULL when there is nothing more */
} fg_store_job_list_t;

/* Filters of a job listing; zero means "any" for every field. */
typedef struct fg_store_job_filter {
    uint32_t state_mask; /* bit (1 << fg_job_state_t); 0 = any state */
    int64_t user_id;
    const char *account;
    const char *model;
    const char *dataset;
    bool newest_first; /* order by decreasing id (else increasing) */
} fg_store_job_filter_t;

#define FG_STORE_JOB_LIVE_MASK 3u /* PENDING | RUNNING */

void fg_store_job_clear(fg_store_job_t *j);
void fg_store_job_list_free(fg_store_job_list_t *l);
/* Inserts a job (every field but id and username); *id (may be NULL) gets its id.
 * FG_STORE_EEXIST if (user_id, idem_key) exists: look it up with
 * fg_store_job_get_by_idem in the same unit first to return the original. */
int fg_store_job_insert(fg_store_tx_t *tx, const fg_store_job_t *j, int64_t *id);
/* Fetches job `id`. FG_STORE_ENOENT if none. */
int fg_store_job_get(fg_store_tx_t *tx, int64_t id, fg_store_job_t *out);
/* Fetches the job that user_id submitted with idempotency key `key`. */
int fg_store_job_get_by_idem(fg_store_tx_t *tx, int64_t user_id, const char *key,
                             fg_store_job_t *out);
/* Writes every mutable field of job j->id (all but id, user_id, account, command_json,
 * env_json, submit_time, idem_key, name; those are fixed at submit). */
int fg_store_job_update(fg_store_tx_t *tx, const fg_store_job_t *j);
/* Writes only reason_code, reason and estimated_start (after a scheduler pass). */
int fg_store_job_set_reason(fg_store_tx_t *tx, int64_t id, int32_t reason_code, const char *reason,
                            int64_t estimated_start);
/* Matching jobs ordered by id; `limit` 1..1000 (0 = 100) after the opaque cursor of a
 * previous page (NULL = first page; a cursor only fits the same filter and order).
 * FG_STORE_EINVAL for a malformed cursor. */
int fg_store_job_list(fg_store_tx_t *tx, const fg_store_job_filter_t *f, const char *cursor,
                      int limit, fg_store_job_list_t *out);
/* Number of matching jobs (newest_first ignored). */
int fg_store_job_count(fg_store_tx_t *tx, const fg_store_job_filter_t *f, int64_t *n);
/* Calls fn for every matching job in increasing id order, without a limit (restoring
 * live jobs after a restart). The record is valid during the call only. Stops and
 * returns fn's value when it returns non-zero. */
int fg_store_job_foreach(fg_store_tx_t *tx, const fg_store_job_filter_t *f,
                         int (*fn)(const fg_store_job_t *j, void *arg), void *arg);
/* The largest job id ever assigned (0 if none). */
int fg_store_job_max_id(fg_store_tx_t *tx, int64_t *id);

/* ------------------------------------------------------------------ attempts */

typedef struct fg_store_attempt {
    int64_t job_id;
    int32_t attempt;      /* 1, 2, ... */
    char *nodes_json;     /* JSON array of node names */
    char *gpu_uuids_json; /* JSON array of GPU UUIDs */
    int64_t start_time_ms;
    int64_t end_time_ms; /* 0 while running */
    int32_t end_cause;   /* fg_end_cause_t, or -1 while running */
    bool has_exit_code;
    int32_t exit_code;
    int32_t signal; /* 0 = none */
} fg_store_attempt_t;

typedef struct fg_store_attempt_list {
    fg_store_attempt_t *items;
    size_t n;
} fg_store_attempt_list_t;

void fg_store_attempt_clear(fg_store_attempt_t *a);
void fg_store_attempt_list_free(fg_store_attempt_list_t *l);
/* Inserts attempt (job_id, attempt). FG_STORE_EEXIST if it exists. */
int fg_store_attempt_insert(fg_store_tx_t *tx, const fg_store_attempt_t *a);
/* Writes end_time_ms, end_cause, exit code and signal (and the JSON fields) of
 * attempt (a->job_id, a->attempt). */
int fg_store_attempt_update(fg_store_tx_t *tx, const fg_store_attempt_t *a);
int fg_store_attempt_get(fg_store_tx_t *tx, int64_t job_id, int32_t attempt,
                         fg_store_attempt_t *out);
/* A job's attempts by increasing attempt number. */
int fg_store_attempt_list(fg_store_tx_t *tx, int64_t job_id, fg_store_attempt_list_t *out);
/* Attempts that have not ended (end_time_ms == 0), by job id then attempt: restoring
 * running jobs after a restart. */
int fg_store_attempt_list_open(fg_store_tx_t *tx, fg_store_attempt_list_t *out);

/* ------------------------------------------------------------------ events */

typedef struct fg_store_event {
    int64_t seq; /* assigned: one global increasing sequence */
    int64_t time;
    char *kind;       /* "job" or "node" */
    int64_t job_id;   /* 0 for node events */
    char *node;       /* NULL if none */
    char *from_state; /* e.g. "PENDING"; NULL for a creation */
    char *to_state;
    char *reason;       /* NULL or e.g. "preempted" */
    char *payload_json; /* NULL or JSON object */
} fg_store_event_t;

typedef struct fg_store_event_list {
    fg_store_event_t *items;
    size_t n;
} fg_store_event_list_t;

void fg_store_event_clear(fg_store_event_t *e);
void fg_store_event_list_free(fg_store_event_list_t *l);
/* Appends an event; *seq (may be NULL) gets its sequence number. Sequence numbers
 * increase in commit order, so a reader that saw seq S never later sees a new
 * event with a smaller seq. */
int fg_store_event_append(fg_store_tx_t *tx, const fg_store_event_t *e, int64_t *seq);
/* Events with seq > since, increasing, at most `limit` (0 = 100, max 10000). */
int fg_store_event_list_since(fg_store_tx_t *tx, int64_t since, int limit,
                              fg_store_event_list_t *out);
/* Events of one job, increasing seq. */
int fg_store_event_list_job(fg_store_tx_t *tx, int64_t job_id, fg_store_event_list_t *out);
/* The largest seq (0 if none). */
int fg_store_event_max_seq(fg_store_tx_t *tx, int64_t *seq);

/* ------------------------------------------------------------------ nodes */

typedef struct fg_store_node {
    char *name;
    char *state; /* "up", "draining", "drained", "down" */
    int32_t cpus;
    int64_t memory_mb;
    char *gpus_json; /* JSON array of {index, uuid, type, memory_mb, ...} */
    int64_t last_heartbeat;
    int64_t created_at;
} fg_store_node_t;

typedef struct fg_store_node_list {
    fg_store_node_t *items;
    size_t n;
} fg_store_node_list_t;

void fg_store_node_clear(fg_store_node_t *n);
void fg_store_node_list_free(fg_store_node_list_t *l);
/* Creates or replaces node n->name (agent registration). created_at is kept from the
 * first registration. */
int fg_store_node_upsert(fg_store_tx_t *tx, const fg_store_node_t *n);
int fg_store_node_get(fg_store_tx_t *tx, const char *name, fg_store_node_t *out);
/* Changes a node's state (drain, resume, down). FG_STORE_ENOENT if none. */
int fg_store_node_set_state(fg_store_tx_t *tx, const char *name, const char *state);
/* Records a heartbeat time. FG_STORE_ENOENT if none. */
int fg_store_node_heartbeat(fg_store_tx_t *tx, const char *name, int64_t time);
int fg_store_node_delete(fg_store_tx_t *tx, const char *name);
/* Every node, by name. */
int fg_store_node_list(fg_store_tx_t *tx, fg_store_node_list_t *out);

/* ------------------------------------------------------------------ fair-share usage */

/* Decayed GPU-seconds as of a time, per account (user_id 0) and per member
 * (account, user_id). Doubles are stored exactly (8-byte IEEE). */
typedef struct fg_store_usage {
    char *account;
    int64_t user_id; /* 0 = the account's own row */
    double gpu_s;
    int64_t as_of;
} fg_store_usage_t;

typedef struct fg_store_usage_list {
    fg_store_usage_t *items;
    size_t n;
} fg_store_usage_list_t;

void fg_store_usage_clear(fg_store_usage_t *u);
void fg_store_usage_list_free(fg_store_usage_list_t *l);
/* Creates or replaces the usage row (account, user_id). */
int fg_store_usage_set(fg_store_tx_t *tx, const fg_store_usage_t *u);
int fg_store_usage_get(fg_store_tx_t *tx, const char *account, int64_t user_id,
                       fg_store_usage_t *out);
/* Every usage row, by account then user_id. */
int fg_store_usage_list(fg_store_tx_t *tx, fg_store_usage_list_t *out);

/* ------------------------------------------------------------------ price book */

/* One row of the price book (docs/billing.md): the price of one GPU type ("*" = any
 * type without a row of its own) and priority class from effective_ms on. Rows are
 * only appended, never updated or deleted: a change is a new row. */
typedef struct fg_store_price {
    int64_t id; /* assigned, increasing in commit order */
    char *gpu_type;
    int32_t priority;            /* fg_prio_t */
    int64_t micros_per_gpu_hour; /* >= 0 */
    char *currency;              /* 3 upper-case letters, e.g. "EUR" */
    int64_t effective_ms;
    int64_t created_at;
    int64_t admin_user_id; /* who set it */
} fg_store_price_t;

typedef struct fg_store_price_list {
    fg_store_price_t *items;
    size_t n;
} fg_store_price_list_t;

void fg_store_price_clear(fg_store_price_t *p);
void fg_store_price_list_free(fg_store_price_list_t *l);
/* Appends a price row (id ignored); *id (may be NULL) gets its id. */
int fg_store_price_append(fg_store_tx_t *tx, const fg_store_price_t *p, int64_t *id);
/* Every price row, by increasing id (the book is small: a few rows per change). */
int fg_store_price_list(fg_store_tx_t *tx, fg_store_price_list_t *out);

/* ------------------------------------------------------------------ ledger */

/* The billing ledger (docs/billing.md): rows of fairgpu/billing.h's fg_ledger_row_t,
 * only appended, never updated or deleted. The caller assigns row ids (> 0, increasing:
 * fg_store_ledger_max_id + 1 at start). Strings are the row's fixed arrays. A unique
 * index allows ONE final charge row (kind charge, not interim) per (job_id, attempt)
 * when job_id > 0: a second one fails with FG_STORE_EEXIST, so no attempt is charged
 * twice, whatever the caller does. A row id taken is FG_STORE_EEXIST too. */
struct fg_ledger_row;
int fg_store_ledger_append(fg_store_tx_t *tx, const struct fg_ledger_row *r);
/* The largest row id (0 if none). */
int fg_store_ledger_max_id(fg_store_tx_t *tx, uint64_t *id);
/* How far attempt (job_id, attempt) has been charged: the largest end_ms of its charge
 * rows (interim or final), 0 if none (restoring live accrual after a restart). */
int fg_store_ledger_charged_to(fg_store_tx_t *tx, int64_t job_id, int32_t attempt, int64_t *end_ms);

/* Filters of a ledger scan; zero / NULL means "any" for every field. */
typedef struct fg_store_ledger_filter {
    const char *account;
    const char *user; /* a username */
    const char *gpu_type;
    int64_t job_id;
    /* rows touching [from_ms, to_ms) (0 = unbounded): start_ms < to_ms and either
     * end_ms > from_ms or start_ms >= from_ms (so zero-length rows and credits count
     * where they start). The caller clips amounts to the range on the row's curve. */
    int64_t from_ms, to_ms;
} fg_store_ledger_filter_t;

/* Calls fn for every matching row in increasing id order. The row is valid during the
 * call only. Stops and returns fn's value when it returns non-zero. */
int fg_store_ledger_foreach(fg_store_tx_t *tx, const fg_store_ledger_filter_t *f,
                            int (*fn)(const struct fg_ledger_row *r, void *arg), void *arg);

/* ------------------------------------------------------------------ the function table */

/* What a backend implements. The fg_store_* functions above check their arguments
 * (NULL handles, read-only handles for writes) and dispatch here. */
struct fg_store_ops {
    const char *name;
    void (*close)(fg_store_t *st);
    int (*schema_version)(fg_store_t *st);
    int (*ping)(fg_store_t *st);
    void (*get_stats)(fg_store_t *st, fg_store_stats_t *out);
    int (*read_begin)(fg_store_t *st, fg_store_tx_t **tx);
    void (*read_end)(fg_store_tx_t *tx);
    int (*write)(fg_store_t *st, fg_store_write_fn fn, void *arg);

    int (*setting_get)(fg_store_tx_t *tx, const char *key, char **value);
    int (*setting_set)(fg_store_tx_t *tx, const char *key, const char *value);
    int (*setting_delete)(fg_store_tx_t *tx, const char *key);

    int (*user_insert)(fg_store_tx_t *tx, const fg_store_user_t *u, int64_t *id);
    int (*user_get)(fg_store_tx_t *tx, int64_t id, fg_store_user_t *out);
    int (*user_get_by_name)(fg_store_tx_t *tx, const char *username, fg_store_user_t *out);
    int (*user_update)(fg_store_tx_t *tx, const fg_store_user_t *u);
    int (*user_count)(fg_store_tx_t *tx, int64_t *n);
    int (*user_list)(fg_store_tx_t *tx, const char *cursor, int limit, fg_store_user_list_t *out);

    int (*session_insert)(fg_store_tx_t *tx, const fg_store_session_t *s);
    int (*session_get)(fg_store_tx_t *tx, const char *token_hash, fg_store_session_t *out);
    int (*session_delete)(fg_store_tx_t *tx, const char *token_hash);
    int (*session_delete_expired)(fg_store_tx_t *tx, int64_t now, int64_t *n);
    int (*token_insert)(fg_store_tx_t *tx, const fg_store_token_t *t, int64_t *id);
    int (*token_get_by_hash)(fg_store_tx_t *tx, const char *token_hash, fg_store_token_t *out);
    int (*token_list)(fg_store_tx_t *tx, int64_t user_id, fg_store_token_list_t *out);
    int (*token_delete)(fg_store_tx_t *tx, int64_t id, int64_t user_id);
    int (*auth_lookup)(fg_store_tx_t *tx, const char *token_hash, int64_t now,
                       fg_store_user_t *user, int *kind, int64_t *cred_id);

    int (*account_insert)(fg_store_tx_t *tx, const fg_store_account_t *a);
    int (*account_get)(fg_store_tx_t *tx, const char *name, fg_store_account_t *out);
    int (*account_update)(fg_store_tx_t *tx, const fg_store_account_t *a);
    int (*account_list)(fg_store_tx_t *tx, fg_store_account_list_t *out);

    int (*member_add)(fg_store_tx_t *tx, const fg_store_member_t *m);
    int (*member_set_weight)(fg_store_tx_t *tx, int64_t user_id, const char *account,
                             double weight);
    int (*member_set_default)(fg_store_tx_t *tx, int64_t user_id, const char *account);
    int (*member_remove)(fg_store_tx_t *tx, int64_t user_id, const char *account);
    int (*member_get)(fg_store_tx_t *tx, int64_t user_id, const char *account,
                      fg_store_member_t *out);
    int (*member_list_by_user)(fg_store_tx_t *tx, int64_t user_id, fg_store_member_list_t *out);
    int (*member_list_by_account)(fg_store_tx_t *tx, const char *account,
                                  fg_store_member_list_t *out);
    int (*member_list_all)(fg_store_tx_t *tx, fg_store_member_list_t *out);

    int (*audit_append)(fg_store_tx_t *tx, const fg_store_audit_t *a, int64_t *id);
    int (*audit_list)(fg_store_tx_t *tx, const char *cursor, int limit, fg_store_audit_list_t *out);

    int (*job_insert)(fg_store_tx_t *tx, const fg_store_job_t *j, int64_t *id);
    int (*job_get)(fg_store_tx_t *tx, int64_t id, fg_store_job_t *out);
    int (*job_get_by_idem)(fg_store_tx_t *tx, int64_t user_id, const char *key,
                           fg_store_job_t *out);
    int (*job_update)(fg_store_tx_t *tx, const fg_store_job_t *j);
    int (*job_set_reason)(fg_store_tx_t *tx, int64_t id, int32_t reason_code, const char *reason,
                          int64_t estimated_start);
    int (*job_list)(fg_store_tx_t *tx, const fg_store_job_filter_t *f, const char *cursor,
                    int limit, fg_store_job_list_t *out);
    int (*job_count)(fg_store_tx_t *tx, const fg_store_job_filter_t *f, int64_t *n);
    int (*job_foreach)(fg_store_tx_t *tx, const fg_store_job_filter_t *f,
                       int (*fn)(const fg_store_job_t *j, void *arg), void *arg);
    int (*job_max_id)(fg_store_tx_t *tx, int64_t *id);

    int (*attempt_insert)(fg_store_tx_t *tx, const fg_store_attempt_t *a);
    int (*attempt_update)(fg_store_tx_t *tx, const fg_store_attempt_t *a);
    int (*attempt_get)(fg_store_tx_t *tx, int64_t job_id, int32_t attempt, fg_store_attempt_t *out);
    int (*attempt_list)(fg_store_tx_t *tx, int64_t job_id, fg_store_attempt_list_t *out);
    int (*attempt_list_open)(fg_store_tx_t *tx, fg_store_attempt_list_t *out);

    int (*event_append)(fg_store_tx_t *tx, const fg_store_event_t *e, int64_t *seq);
    int (*event_list_since)(fg_store_tx_t *tx, int64_t since, int limit,
                            fg_store_event_list_t *out);
    int (*event_list_job)(fg_store_tx_t *tx, int64_t job_id, fg_store_event_list_t *out);
    int (*event_max_seq)(fg_store_tx_t *tx, int64_t *seq);

    int (*node_upsert)(fg_store_tx_t *tx, const fg_store_node_t *n);
    int (*node_get)(fg_store_tx_t *tx, const char *name, fg_store_node_t *out);
    int (*node_set_state)(fg_store_tx_t *tx, const char *name, const char *state);
    int (*node_heartbeat)(fg_store_tx_t *tx, const char *name, int64_t time);
    int (*node_delete)(fg_store_tx_t *tx, const char *name);
    int (*node_list)(fg_store_tx_t *tx, fg_store_node_list_t *out);

    int (*usage_set)(fg_store_tx_t *tx, const fg_store_usage_t *u);
    int (*usage_get)(fg_store_tx_t *tx, const char *account, int64_t user_id,
                     fg_store_usage_t *out);
    int (*usage_list)(fg_store_tx_t *tx, fg_store_usage_list_t *out);

    /* added after the first version (kept last) */
    int (*write_async)(fg_store_t *st, fg_store_write_fn fn, void *arg, fg_store_done_fn done,
                       void *done_arg);
    int (*session_delete_user)(fg_store_tx_t *tx, int64_t user_id, int64_t *n);
    int (*price_append)(fg_store_tx_t *tx, const fg_store_price_t *p, int64_t *id);
    int (*price_list)(fg_store_tx_t *tx, fg_store_price_list_t *out);
    int (*member_set_manager)(fg_store_tx_t *tx, int64_t user_id, const char *account,
                              bool is_manager);
    int (*ledger_append)(fg_store_tx_t *tx, const struct fg_ledger_row *r);
    int (*ledger_max_id)(fg_store_tx_t *tx, uint64_t *id);
    int (*ledger_charged_to)(fg_store_tx_t *tx, int64_t job_id, int32_t attempt, int64_t *end_ms);
    int (*ledger_foreach)(fg_store_tx_t *tx, const fg_store_ledger_filter_t *f,
                          int (*fn)(const struct fg_ledger_row *r, void *arg), void *arg);
};

/* ------------------------------------------------------------------ cursors */

/* Opaque cursors are the last key of a page: "c" followed by 16 lower-case hex
 * digits. Shared by the backends so that cursors survive a backend change.
 * encode: returns an allocated string (free()). decode: FG_STORE_EINVAL if malformed. */
char *fg_store_cursor_encode(int64_t last_id);
int fg_store_cursor_decode(const char *cursor, int64_t *last_id);

#ifdef __cplusplus
}
#endif
#endif /* FG_STORE_H */
