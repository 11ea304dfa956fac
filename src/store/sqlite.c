/*
 * sqlite.c - the SQLite backend of the store (store.h).
 *
 * CONNECTIONS AND THREADS
 *   writer      one connection, used only by the writer thread. It runs every write
 *               unit and commits them in groups (below).
 *   readers     a pool of up to opts.read_conns connections, opened lazily. A read
 *               handle owns one connection from fg_store_read_begin to read_end; WAL
 *               gives each a consistent snapshot while the writer commits.
 *   checkpointer one connection and thread that copies the WAL back into the database
 *               (PASSIVE checkpoints) when it grows, so commits never pay for it.
 *   Connections are opened SQLITE_OPEN_NOMUTEX: each is used by one thread at a time,
 *   guaranteed by the pool (pool_mu) and by the writer owning its own.
 *
 * GROUP COMMIT
 *   fg_store_write() links a unit (on the caller's stack) to the queue (queue_mu),
 *   wakes the writer and waits on the unit's own condition variable until unit.done
 *   (one wake-up per finished unit, not a broadcast to every waiter). The writer takes the whole
 *   queue (at most max_batch units), runs BEGIN IMMEDIATE, every fn() in turn, COMMIT.
 *   If a unit fails, that pass is rolled back and the batch runs again with each unit
 *   in a SAVEPOINT (ROLLBACK TO + RELEASE for the failing one): see run_batch. With
 *   WAL and synchronous=FULL the COMMIT fsyncs the WAL, so when the writer marks the batch
 *   done every unit of it is durable. While it commits, new units queue up and form
 *   the next batch: the more concurrent writers, the bigger the batches.
 *   Example: 64 HTTP threads each submit a job; the first batch holds 1 unit, while it
 *   fsyncs (~0.25 ms) the other 63 queue and commit together in the second.
 *
 * LOCK ORDER: queue_mu and pool_mu are never held together, and never while SQL runs
 * (except the writer's own statements, which hold no mutex at all).
 */
#include "store/sqlite_internal.h"
#include "store/store.h"
#include "store/walbuf.h"

#include "fairgpu/billing.h"

#include "common/clock.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/xalloc.h"

/* ------------------------------------------------------------------ schema */

/* Portable SQL: the same DDL runs on PostgreSQL but for INTEGER PRIMARY KEY (an
 * auto-assigned rowid here, BIGSERIAL/identity there). Each entry is one version. */
static const char *const MIGRATIONS[] = {
    /* 1: the initial schema */
    "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE accounts (name TEXT PRIMARY KEY, weight DOUBLE PRECISION NOT NULL,"
    " gpu_quota INTEGER NOT NULL, budget_micros BIGINT NOT NULL,"
    " allowed_priorities INTEGER NOT NULL, created_at BIGINT NOT NULL);"
    "INSERT INTO accounts (name, weight, gpu_quota, budget_micros, allowed_priorities,"
    " created_at) VALUES ('default', 1.0, -1, -1, 7, 0);"
    "CREATE TABLE users (id INTEGER PRIMARY KEY, username TEXT NOT NULL UNIQUE,"
    " email TEXT NOT NULL, display_name TEXT, password_hash TEXT NOT NULL,"
    " role INTEGER NOT NULL, disabled INTEGER NOT NULL, created_at BIGINT NOT NULL);"
    "CREATE TABLE memberships (user_id BIGINT NOT NULL REFERENCES users(id),"
    " account TEXT NOT NULL REFERENCES accounts(name), weight DOUBLE PRECISION NOT NULL,"
    " is_default INTEGER NOT NULL, position BIGINT NOT NULL, PRIMARY KEY (user_id, account));"
    "CREATE INDEX memberships_account ON memberships (account, position);"
    "CREATE TABLE sessions (token_hash TEXT PRIMARY KEY,"
    " user_id BIGINT NOT NULL REFERENCES users(id), created_at BIGINT NOT NULL,"
    " expires_at BIGINT NOT NULL);"
    "CREATE INDEX sessions_expires ON sessions (expires_at);"
    "CREATE TABLE api_tokens (id INTEGER PRIMARY KEY, name TEXT NOT NULL,"
    " token_hash TEXT NOT NULL UNIQUE, user_id BIGINT NOT NULL REFERENCES users(id),"
    " created_at BIGINT NOT NULL);"
    "CREATE INDEX api_tokens_user ON api_tokens (user_id, id);"
    "CREATE TABLE audit_log (id INTEGER PRIMARY KEY, time BIGINT NOT NULL,"
    " admin_user_id BIGINT NOT NULL, action TEXT NOT NULL, target TEXT, details TEXT);"
    "CREATE TABLE jobs (id INTEGER PRIMARY KEY, name TEXT,"
    " user_id BIGINT NOT NULL REFERENCES users(id),"
    " account TEXT NOT NULL REFERENCES accounts(name), command TEXT NOT NULL, env TEXT,"
    " gpus INTEGER NOT NULL, gpu_type TEXT, model TEXT, dataset TEXT,"
    " priority INTEGER NOT NULL, state INTEGER NOT NULL, reason_code INTEGER NOT NULL,"
    " reason TEXT, submit_time BIGINT NOT NULL, start_time BIGINT NOT NULL,"
    " end_time BIGINT NOT NULL, time_limit_s BIGINT NOT NULL, exit_code INTEGER,"
    " attempts INTEGER NOT NULL, max_retries INTEGER NOT NULL,"
    " retries_used INTEGER NOT NULL, attained_gpu_s BIGINT NOT NULL,"
    " cancel_requested INTEGER NOT NULL, eligible_time BIGINT NOT NULL,"
    " checkpoint_interval_s BIGINT NOT NULL, cpus INTEGER NOT NULL,"
    " memory_mb BIGINT NOT NULL, idem_key TEXT, nodes TEXT, gpu_indices TEXT,"
    " estimated_start BIGINT NOT NULL, cost_micros BIGINT NOT NULL);"
    "CREATE UNIQUE INDEX jobs_idem ON jobs (user_id, idem_key) WHERE idem_key IS NOT NULL;"
    "CREATE INDEX jobs_state ON jobs (state, id);"
    "CREATE INDEX jobs_user ON jobs (user_id, id);"
    "CREATE INDEX jobs_account ON jobs (account, id);"
    "CREATE TABLE attempts (job_id BIGINT NOT NULL REFERENCES jobs(id),"
    " attempt INTEGER NOT NULL, nodes TEXT, gpu_uuids TEXT, start_time_ms BIGINT NOT NULL,"
    " end_time_ms BIGINT NOT NULL, end_cause INTEGER NOT NULL, exit_code INTEGER,"
    " signal INTEGER NOT NULL, PRIMARY KEY (job_id, attempt));"
    "CREATE INDEX attempts_open ON attempts (job_id, attempt) WHERE end_time_ms = 0;"
    "CREATE TABLE events (seq INTEGER PRIMARY KEY, time BIGINT NOT NULL, kind TEXT NOT NULL,"
    " job_id BIGINT NOT NULL, node TEXT, from_state TEXT, to_state TEXT NOT NULL,"
    " reason TEXT, payload TEXT);"
    "CREATE INDEX events_job ON events (job_id, seq);"
    "CREATE TABLE nodes (name TEXT PRIMARY KEY, state TEXT NOT NULL, cpus INTEGER NOT NULL,"
    " memory_mb BIGINT NOT NULL, gpus TEXT, last_heartbeat BIGINT NOT NULL,"
    " created_at BIGINT NOT NULL);"
    "CREATE TABLE fairshare_usage (account TEXT NOT NULL, user_id BIGINT NOT NULL,"
    " gpu_s DOUBLE PRECISION NOT NULL, as_of BIGINT NOT NULL,"
    " PRIMARY KEY (account, user_id));",
    /* 2: filter indexes for ?model= and ?dataset= (partial: jobs without them cost
     * nothing at insert) and the audit log by admin */
    "CREATE INDEX jobs_model ON jobs (model, id) WHERE model IS NOT NULL;"
    "CREATE INDEX jobs_dataset ON jobs (dataset, id) WHERE dataset IS NOT NULL;"
    "CREATE INDEX audit_admin ON audit_log (admin_user_id, id);",
    /* 3: no job indexes but the idempotency key's. The controller keeps every job in
     * memory and answers listings and filters from there; it reads jobs from the store
     * only at start (all of them, in id order) and by idempotency key. Each of these
     * indexes cost a B-tree insert and a dirty page per commit on every submission;
     * store-side listings still work, by a scan in id order. */
    "DROP INDEX jobs_state;"
    "DROP INDEX jobs_user;"
    "DROP INDEX jobs_account;"
    "DROP INDEX jobs_model;"
    "DROP INDEX jobs_dataset;",
    /* 4: the price book (docs/billing.md): append-only rows, one per (GPU type,
     * priority class) change; the price in force at t is the latest effective_ms <= t */
    "CREATE TABLE prices (id INTEGER PRIMARY KEY, gpu_type TEXT NOT NULL,"
    " priority INTEGER NOT NULL, micros_per_gpu_hour BIGINT NOT NULL,"
    " currency TEXT NOT NULL, effective_ms BIGINT NOT NULL, created_at BIGINT NOT NULL,"
    " admin_user_id BIGINT NOT NULL);",
    /* 5: the billing ledger (docs/billing.md), budget rules and account managers. The
     * ledger's ids are the caller's; one final charge row per (job, attempt) at most;
     * (account, start_ms, end_ms) answers "rows of an account touching a month" from
     * the index alone until a row matches */
    "ALTER TABLE accounts ADD COLUMN budget_mode INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE accounts ADD COLUMN budget_period INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE accounts ADD COLUMN budget_since_ms BIGINT NOT NULL DEFAULT 0;"
    "ALTER TABLE memberships ADD COLUMN is_manager INTEGER NOT NULL DEFAULT 0;"
    "CREATE TABLE ledger (id INTEGER PRIMARY KEY, kind INTEGER NOT NULL,"
    " interim INTEGER NOT NULL, job_id BIGINT NOT NULL, attempt INTEGER NOT NULL,"
    " account TEXT NOT NULL, username TEXT NOT NULL, node TEXT NOT NULL,"
    " gpu_type TEXT NOT NULL, priority INTEGER NOT NULL, origin_ms BIGINT NOT NULL,"
    " start_ms BIGINT NOT NULL, end_ms BIGINT NOT NULL, gpus INTEGER NOT NULL,"
    " cause INTEGER NOT NULL, rate BIGINT NOT NULL, gpu_ms BIGINT NOT NULL,"
    " amount_micros BIGINT NOT NULL, refers_to BIGINT NOT NULL,"
    " refund_why INTEGER NOT NULL, note TEXT NOT NULL);"
    "CREATE UNIQUE INDEX ledger_final ON ledger (job_id, attempt)"
    " WHERE kind = 0 AND interim = 0 AND job_id > 0;"
    "CREATE INDEX ledger_attempt ON ledger (job_id, attempt);"
    "CREATE INDEX ledger_account_time ON ledger (account, start_ms, end_ms);",
    /* 6: an account's ledger scan in id order (the order fg_store_ledger_foreach
     * promises) from the index, no sort: (account, id) with the times for the range
     * test. With (account, start_ms) SQLite sorted every matching row: 2.4x the CPU,
     * 5x the wall time on a month of 800,000 rows (docs/perf/2026-12-ledger-invoice.md) */
    ("DROP INDEX ledger_account_time;"
     "CREATE INDEX ledger_account ON ledger (account, id, start_ms, end_ms);"),
    /* 7: idle GPUs (docs/idle.md): a job's GPU-seconds spent idle while allocated, and
     * an account's idle policy (0 none, 1 warn, 2 requeue, 3 stop) with its grace */
    ("ALTER TABLE jobs ADD COLUMN idle_gpu_s BIGINT NOT NULL DEFAULT 0;"
     "ALTER TABLE accounts ADD COLUMN idle_action INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE accounts ADD COLUMN idle_grace_s BIGINT NOT NULL DEFAULT 0;"),
    /* 8: start estimates per job: the latest range and source, the first estimate after
     * submission with its range, source and the limit-based one, and the first start
     * (docs/scheduler.md, "Estimates") */
    ("ALTER TABLE jobs ADD COLUMN est_p10 BIGINT NOT NULL DEFAULT 0;"
     "ALTER TABLE jobs ADD COLUMN est_p90 BIGINT NOT NULL DEFAULT 0;"
     "ALTER TABLE jobs ADD COLUMN est_source INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE jobs ADD COLUMN est_submit BIGINT NOT NULL DEFAULT 0;"
     "ALTER TABLE jobs ADD COLUMN est_submit_p10 BIGINT NOT NULL DEFAULT 0;"
     "ALTER TABLE jobs ADD COLUMN est_submit_p90 BIGINT NOT NULL DEFAULT 0;"
     "ALTER TABLE jobs ADD COLUMN est_submit_source INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE jobs ADD COLUMN est_limit_submit BIGINT NOT NULL DEFAULT 0;"
     "ALTER TABLE jobs ADD COLUMN est_first_start BIGINT NOT NULL DEFAULT 0;"),
};
#define NMIGRATIONS ((int)(sizeof MIGRATIONS / sizeof MIGRATIONS[0]))

int fg_store_sqlite_latest_version(void)
{
    return NMIGRATIONS;
}

static char *dupmsg(const char *prefix, const char *detail)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s: %s", prefix, detail ? detail : "unknown error");
    return fg_xstrdup(buf);
}

static int user_version(sqlite3 *db, int *v)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL) != SQLITE_OK)
        return FG_STORE_EIO;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *v = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    return rc == SQLITE_ROW ? FG_STORE_OK : FG_STORE_EIO;
}

int fg_store_sqlite_migrate(sqlite3 *db, int target, char **errmsg)
{
    if (target < 1 || target > NMIGRATIONS)
        return FG_STORE_EINVAL;
    int v = 0;
    if (user_version(db, &v) != FG_STORE_OK) {
        if (errmsg)
            *errmsg = dupmsg("reading the schema version", sqlite3_errmsg(db));
        return FG_STORE_EIO;
    }
    if (v > NMIGRATIONS) {
        if (errmsg) {
            char buf[160];
            snprintf(buf, sizeof buf,
                     "the database has schema version %d; this fairgpu knows up to %d", v,
                     NMIGRATIONS);
            *errmsg = fg_xstrdup(buf);
        }
        return FG_STORE_EVERSION;
    }
    for (; v < target; v++) {
        char pragma[64];
        snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", v + 1);
        char *err = NULL;
        if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, &err) != SQLITE_OK ||
            sqlite3_exec(db, MIGRATIONS[v], NULL, NULL, &err) != SQLITE_OK ||
            sqlite3_exec(db, pragma, NULL, NULL, &err) != SQLITE_OK ||
            sqlite3_exec(db, "COMMIT", NULL, NULL, &err) != SQLITE_OK) {
            char what[64];
            snprintf(what, sizeof what, "schema migration to version %d", v + 1);
            if (errmsg)
                *errmsg = dupmsg(what, err ? err : sqlite3_errmsg(db));
            sqlite3_free(err);
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            return FG_STORE_EIO;
        }
    }
    return FG_STORE_OK;
}

/* ------------------------------------------------------------------ statements */

#define USER_COLS                                                                                  \
    "u.id, u.username, u.email, u.display_name, u.password_hash, u.role, u.disabled,"              \
    " u.created_at, (SELECT m.account FROM memberships m WHERE m.user_id = u.id AND"               \
    " m.is_default = 1)"
#define JOB_COLS                                                                                   \
    "j.id, j.name, j.user_id, u.username, j.account, j.command, j.env, j.gpus, j.gpu_type,"        \
    " j.model, j.dataset, j.priority, j.state, j.reason_code, j.reason, j.submit_time,"            \
    " j.start_time, j.end_time, j.time_limit_s, j.exit_code, j.attempts, j.max_retries,"           \
    " j.retries_used, j.attained_gpu_s, j.cancel_requested, j.eligible_time,"                      \
    " j.checkpoint_interval_s, j.cpus, j.memory_mb, j.idem_key, j.nodes, j.gpu_indices,"           \
    " j.estimated_start, j.cost_micros, j.idle_gpu_s, j.est_p10, j.est_p90, j.est_source,"         \
    " j.est_submit, j.est_submit_p10, j.est_submit_p90, j.est_submit_source,"                      \
    " j.est_limit_submit, j.est_first_start"
#define JOB_FROM " FROM jobs j JOIN users u ON u.id = j.user_id"
#define MEMBER_COLS                                                                                \
    "m.user_id, m.account, m.weight, m.is_default, m.position, u.username, m.is_manager"
#define MEMBER_FROM " FROM memberships m JOIN users u ON u.id = m.user_id"
#define ATTEMPT_COLS                                                                               \
    "job_id, attempt, nodes, gpu_uuids, start_time_ms, end_time_ms, end_cause, exit_code, signal"
#define EVENT_COLS "seq, time, kind, job_id, node, from_state, to_state, reason, payload"
#define NODE_COLS  "name, state, cpus, memory_mb, gpus, last_heartbeat, created_at"
#define ACCOUNT_COLS                                                                               \
    "name, weight, gpu_quota, budget_micros, allowed_priorities, created_at, budget_mode,"         \
    " budget_period, budget_since_ms, idle_action, idle_grace_s"
#define LEDGER_COLS                                                                                \
    "id, kind, interim, job_id, attempt, account, username, node, gpu_type, priority,"             \
    " origin_ms, start_ms, end_ms, gpus, cause, rate, gpu_ms, amount_micros, refers_to,"           \
    " refund_why, note"

enum {
    S_BEGIN,
    S_BEGIN_IMMEDIATE,
    S_COMMIT,
    S_ROLLBACK,
    S_SAVEPOINT,
    S_RELEASE,
    S_ROLLBACK_TO,
    S_PING,
    S_SETTING_GET,
    S_SETTING_SET,
    S_SETTING_DELETE,
    S_USER_INSERT,
    S_USER_GET,
    S_USER_GET_BY_NAME,
    S_USER_UPDATE,
    S_USER_COUNT,
    S_USER_LIST,
    S_SESSION_INSERT,
    S_SESSION_GET,
    S_SESSION_DELETE,
    S_SESSION_DELETE_EXPIRED,
    S_SESSION_DELETE_USER,
    S_TOKEN_INSERT,
    S_TOKEN_GET_BY_HASH,
    S_TOKEN_LIST,
    S_TOKEN_DELETE,
    S_TOKEN_DELETE_ANY,
    S_ACCOUNT_INSERT,
    S_ACCOUNT_GET,
    S_ACCOUNT_UPDATE,
    S_ACCOUNT_LIST,
    S_MEMBER_COUNT_USER,
    S_MEMBER_NEXT_POS,
    S_MEMBER_INSERT,
    S_MEMBER_SET_WEIGHT,
    S_MEMBER_CLEAR_DEFAULT,
    S_MEMBER_SET_DEFAULT,
    S_MEMBER_DELETE,
    S_MEMBER_GET,
    S_MEMBER_LIST_USER,
    S_MEMBER_LIST_ACCOUNT,
    S_MEMBER_LIST_ALL,
    S_MEMBER_PROMOTE,
    S_AUDIT_APPEND,
    S_AUDIT_LIST,
    S_JOB_INSERT,
    S_JOB_GET,
    S_JOB_GET_BY_IDEM,
    S_JOB_UPDATE,
    S_JOB_SET_REASON,
    S_JOB_MAX_ID,
    S_ATTEMPT_INSERT,
    S_ATTEMPT_UPDATE,
    S_ATTEMPT_GET,
    S_ATTEMPT_LIST,
    S_ATTEMPT_LIST_OPEN,
    S_EVENT_APPEND,
    S_EVENT_LIST_SINCE,
    S_EVENT_LIST_JOB,
    S_EVENT_MAX_SEQ,
    S_NODE_UPSERT,
    S_NODE_GET,
    S_NODE_SET_STATE,
    S_NODE_HEARTBEAT,
    S_NODE_DELETE,
    S_NODE_LIST,
    S_USAGE_SET,
    S_USAGE_GET,
    S_USAGE_LIST,
    S_PRICE_APPEND,
    S_PRICE_LIST,
    S_MEMBER_SET_MANAGER,
    S_LEDGER_APPEND,
    S_LEDGER_MAX_ID,
    S_LEDGER_CHARGED_TO,
    S_COUNT
};

static const char *const SQL[S_COUNT] = {
    [S_BEGIN] = "BEGIN",
    [S_BEGIN_IMMEDIATE] = "BEGIN IMMEDIATE",
    [S_COMMIT] = "COMMIT",
    [S_ROLLBACK] = "ROLLBACK",
    [S_SAVEPOINT] = "SAVEPOINT fg_unit",
    [S_RELEASE] = "RELEASE SAVEPOINT fg_unit",
    [S_ROLLBACK_TO] = "ROLLBACK TO SAVEPOINT fg_unit",
    [S_PING] = "SELECT COUNT(*) FROM settings",
    [S_SETTING_GET] = "SELECT value FROM settings WHERE key = ?1",
    [S_SETTING_SET] = "INSERT INTO settings (key, value) VALUES (?1, ?2)"
                      " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    [S_SETTING_DELETE] = "DELETE FROM settings WHERE key = ?1",
    [S_USER_INSERT] = "INSERT INTO users (username, email, display_name, password_hash, role,"
                      " disabled, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [S_USER_GET] = "SELECT " USER_COLS " FROM users u WHERE u.id = ?1",
    [S_USER_GET_BY_NAME] = "SELECT " USER_COLS " FROM users u WHERE u.username = ?1",
    [S_USER_UPDATE] = "UPDATE users SET email = ?2, display_name = ?3, password_hash = ?4,"
                      " role = ?5, disabled = ?6 WHERE id = ?1",
    [S_USER_COUNT] = "SELECT COUNT(*) FROM users",
    [S_USER_LIST] = "SELECT " USER_COLS " FROM users u WHERE u.id > ?1 ORDER BY u.id LIMIT ?2",
    [S_SESSION_INSERT] = "INSERT INTO sessions (token_hash, user_id, created_at, expires_at)"
                         " VALUES (?1, ?2, ?3, ?4)",
    [S_SESSION_GET] = "SELECT token_hash, user_id, created_at, expires_at FROM sessions"
                      " WHERE token_hash = ?1",
    [S_SESSION_DELETE] = "DELETE FROM sessions WHERE token_hash = ?1",
    [S_SESSION_DELETE_EXPIRED] = "DELETE FROM sessions WHERE expires_at <= ?1",
    [S_SESSION_DELETE_USER] = "DELETE FROM sessions WHERE user_id = ?1",
    [S_TOKEN_INSERT] = "INSERT INTO api_tokens (name, token_hash, user_id, created_at)"
                       " VALUES (?1, ?2, ?3, ?4)",
    [S_TOKEN_GET_BY_HASH] = "SELECT id, name, token_hash, user_id, created_at FROM api_tokens"
                            " WHERE token_hash = ?1",
    [S_TOKEN_LIST] = "SELECT id, name, token_hash, user_id, created_at FROM api_tokens"
                     " WHERE user_id = ?1 ORDER BY id",
    [S_TOKEN_DELETE] = "DELETE FROM api_tokens WHERE id = ?1 AND user_id = ?2",
    [S_TOKEN_DELETE_ANY] = "DELETE FROM api_tokens WHERE id = ?1",
    [S_ACCOUNT_INSERT] = "INSERT INTO accounts (" ACCOUNT_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6,"
                         " ?7, ?8, ?9, ?10, ?11)",
    [S_ACCOUNT_GET] = "SELECT " ACCOUNT_COLS " FROM accounts WHERE name = ?1",
    [S_ACCOUNT_UPDATE] = "UPDATE accounts SET weight = ?2, gpu_quota = ?3, budget_micros = ?4,"
                         " allowed_priorities = ?5, budget_mode = ?7, budget_period = ?8,"
                         " budget_since_ms = ?9, idle_action = ?10, idle_grace_s = ?11"
                         " WHERE name = ?1",
    [S_ACCOUNT_LIST] = "SELECT " ACCOUNT_COLS " FROM accounts ORDER BY name",
    [S_MEMBER_COUNT_USER] = "SELECT COUNT(*) FROM memberships WHERE user_id = ?1",
    [S_MEMBER_NEXT_POS] = "SELECT COALESCE(MAX(position), 0) + 1 FROM memberships",
    [S_MEMBER_INSERT] = "INSERT INTO memberships (user_id, account, weight, is_default, position,"
                        " is_manager) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [S_MEMBER_SET_WEIGHT] = "UPDATE memberships SET weight = ?3 WHERE user_id = ?1 AND"
                            " account = ?2",
    [S_MEMBER_CLEAR_DEFAULT] = "UPDATE memberships SET is_default = 0 WHERE user_id = ?1 AND"
                               " is_default <> 0",
    [S_MEMBER_SET_DEFAULT] = "UPDATE memberships SET is_default = 1 WHERE user_id = ?1 AND"
                             " account = ?2",
    [S_MEMBER_DELETE] = "DELETE FROM memberships WHERE user_id = ?1 AND account = ?2",
    [S_MEMBER_GET] = "SELECT " MEMBER_COLS MEMBER_FROM " WHERE m.user_id = ?1 AND m.account = ?2",
    [S_MEMBER_LIST_USER] = "SELECT " MEMBER_COLS MEMBER_FROM " WHERE m.user_id = ?1"
                           " ORDER BY m.position",
    [S_MEMBER_LIST_ACCOUNT] = "SELECT " MEMBER_COLS MEMBER_FROM " WHERE m.account = ?1"
                              " ORDER BY m.position",
    [S_MEMBER_LIST_ALL] = "SELECT " MEMBER_COLS MEMBER_FROM " ORDER BY m.account, m.position",
    [S_MEMBER_PROMOTE] = "UPDATE memberships SET is_default = 1 WHERE user_id = ?1 AND"
                         " position = (SELECT MIN(position) FROM memberships WHERE user_id = ?1)",
    [S_AUDIT_APPEND] = "INSERT INTO audit_log (time, admin_user_id, action, target, details)"
                       " VALUES (?1, ?2, ?3, ?4, ?5)",
    [S_AUDIT_LIST] = "SELECT id, time, admin_user_id, action, target, details FROM audit_log"
                     " WHERE id < ?1 ORDER BY id DESC LIMIT ?2",
    [S_JOB_INSERT] =
        "INSERT INTO jobs (name, user_id, account, command, env, gpus, gpu_type, model, dataset,"
        " priority, state, reason_code, reason, submit_time, start_time, end_time, time_limit_s,"
        " exit_code, attempts, max_retries, retries_used, attained_gpu_s, cancel_requested,"
        " eligible_time, checkpoint_interval_s, cpus, memory_mb, idem_key, nodes, gpu_indices,"
        " estimated_start, cost_micros, idle_gpu_s, est_p10, est_p90, est_source, est_submit,"
        " est_submit_p10, est_submit_p90, est_submit_source, est_limit_submit, est_first_start)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,"
        " ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?34, ?35,"
        " ?36, ?37, ?38, ?39, ?40, ?41, ?42, ?43)",
    [S_JOB_GET] = "SELECT " JOB_COLS JOB_FROM " WHERE j.id = ?33",
    [S_JOB_GET_BY_IDEM] = "SELECT " JOB_COLS JOB_FROM " WHERE j.user_id = ?1 AND j.idem_key = ?2",
    [S_JOB_UPDATE] =
        "UPDATE jobs SET gpus = ?6, gpu_type = ?7, model = ?8, dataset = ?9, priority = ?10,"
        " state = ?11, reason_code = ?12, reason = ?13, start_time = ?15, end_time = ?16,"
        " time_limit_s = ?17, exit_code = ?18, attempts = ?19, max_retries = ?20,"
        " retries_used = ?21, attained_gpu_s = ?22, cancel_requested = ?23,"
        " eligible_time = ?24, checkpoint_interval_s = ?25, cpus = ?26, memory_mb = ?27,"
        " nodes = ?29, gpu_indices = ?30, estimated_start = ?31, cost_micros = ?32,"
        " idle_gpu_s = ?34, est_p10 = ?35, est_p90 = ?36, est_source = ?37, est_submit = ?38,"
        " est_submit_p10 = ?39, est_submit_p90 = ?40, est_submit_source = ?41,"
        " est_limit_submit = ?42, est_first_start = ?43 WHERE id = ?33",
    [S_JOB_SET_REASON] = "UPDATE jobs SET reason_code = ?2, reason = ?3, estimated_start = ?4"
                         " WHERE id = ?1",
    [S_JOB_MAX_ID] = "SELECT COALESCE(MAX(id), 0) FROM jobs",
    [S_ATTEMPT_INSERT] = "INSERT INTO attempts (" ATTEMPT_COLS ") VALUES (?1, ?2, ?3, ?4, ?5,"
                         " ?6, ?7, ?8, ?9)",
    [S_ATTEMPT_UPDATE] = "UPDATE attempts SET nodes = ?3, gpu_uuids = ?4, start_time_ms = ?5,"
                         " end_time_ms = ?6, end_cause = ?7, exit_code = ?8, signal = ?9"
                         " WHERE job_id = ?1 AND attempt = ?2",
    [S_ATTEMPT_GET] = "SELECT " ATTEMPT_COLS " FROM attempts WHERE job_id = ?1 AND attempt = ?2",
    [S_ATTEMPT_LIST] = "SELECT " ATTEMPT_COLS " FROM attempts WHERE job_id = ?1 ORDER BY attempt",
    [S_ATTEMPT_LIST_OPEN] = "SELECT " ATTEMPT_COLS " FROM attempts WHERE end_time_ms = 0"
                            " ORDER BY job_id, attempt",
    [S_EVENT_APPEND] = "INSERT INTO events (time, kind, job_id, node, from_state, to_state,"
                       " reason, payload) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [S_EVENT_LIST_SINCE] = "SELECT " EVENT_COLS " FROM events WHERE seq > ?1 ORDER BY seq"
                           " LIMIT ?2",
    [S_EVENT_LIST_JOB] = "SELECT " EVENT_COLS " FROM events WHERE job_id = ?1 ORDER BY seq",
    [S_EVENT_MAX_SEQ] = "SELECT COALESCE(MAX(seq), 0) FROM events",
    [S_NODE_UPSERT] = "INSERT INTO nodes (" NODE_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
                      " ON CONFLICT (name) DO UPDATE SET state = excluded.state,"
                      " cpus = excluded.cpus, memory_mb = excluded.memory_mb,"
                      " gpus = excluded.gpus, last_heartbeat = excluded.last_heartbeat",
    [S_NODE_GET] = "SELECT " NODE_COLS " FROM nodes WHERE name = ?1",
    [S_NODE_SET_STATE] = "UPDATE nodes SET state = ?2 WHERE name = ?1",
    [S_NODE_HEARTBEAT] = "UPDATE nodes SET last_heartbeat = ?2 WHERE name = ?1",
    [S_NODE_DELETE] = "DELETE FROM nodes WHERE name = ?1",
    [S_NODE_LIST] = "SELECT " NODE_COLS " FROM nodes ORDER BY name",
    [S_USAGE_SET] = "INSERT INTO fairshare_usage (account, user_id, gpu_s, as_of)"
                    " VALUES (?1, ?2, ?3, ?4) ON CONFLICT (account, user_id) DO UPDATE SET"
                    " gpu_s = excluded.gpu_s, as_of = excluded.as_of",
    [S_USAGE_GET] = "SELECT account, user_id, gpu_s, as_of FROM fairshare_usage"
                    " WHERE account = ?1 AND user_id = ?2",
    [S_USAGE_LIST] = "SELECT account, user_id, gpu_s, as_of FROM fairshare_usage"
                     " ORDER BY account, user_id",
    [S_PRICE_APPEND] = "INSERT INTO prices (gpu_type, priority, micros_per_gpu_hour, currency,"
                       " effective_ms, created_at, admin_user_id) VALUES (?1, ?2, ?3, ?4, ?5,"
                       " ?6, ?7)",
    [S_PRICE_LIST] = "SELECT id, gpu_type, priority, micros_per_gpu_hour, currency, effective_ms,"
                     " created_at, admin_user_id FROM prices ORDER BY id",
    [S_MEMBER_SET_MANAGER] = "UPDATE memberships SET is_manager = ?3 WHERE user_id = ?1 AND"
                             " account = ?2",
    [S_LEDGER_APPEND] = "INSERT INTO ledger (" LEDGER_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7,"
                        " ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)",
    [S_LEDGER_MAX_ID] = "SELECT COALESCE(MAX(id), 0) FROM ledger",
    [S_LEDGER_CHARGED_TO] = "SELECT COALESCE(MAX(end_ms), 0) FROM ledger WHERE job_id = ?1 AND"
                            " attempt = ?2 AND kind = 0",
};

/* Job listings are built from their filter: bits of a variant number. */
enum {
    JL_STATE = 1,
    JL_USER = 2,
    JL_ACCOUNT = 4,
    JL_MODEL = 8,
    JL_DATASET = 16,
    JL_DESC = 32,
    JL_CURSOR = 64,
    JL_STATE_EQ = 128, /* exactly one state: "state = ?" keeps the index's id order */
    JL_MODES = 256,    /* mode = variant / JL_MODES: 0 list, 1 count, 2 foreach */
    JL_VARIANTS = 3 * JL_MODES,
};

/* Ledger scans likewise: which filter fields are set. */
enum {
    LL_ACCOUNT = 1,
    LL_USER = 2,
    LL_GPU_TYPE = 4,
    LL_JOB = 8,
    LL_FROM = 16,
    LL_TO = 32,
    LL_VARIANTS = 64,
};

/* ------------------------------------------------------------------ connections */

typedef struct sq_conn sq_conn_t;
typedef struct sq_store sq_store_t;

typedef struct sq_tx {
    fg_store_tx_t base;
    sq_conn_t *c;
} sq_tx_t;

struct sq_conn {
    sqlite3 *db;
    sqlite3_stmt *st[S_COUNT];
    sqlite3_stmt *jl[JL_VARIANTS];
    sqlite3_stmt *ll[LL_VARIANTS];
    sq_tx_t tx;
    sq_conn_t *next_free;
};

/* A queued write unit: on the caller's stack for fg_store_write (the caller waits for
 * `done`), on the heap for fg_store_write_async (`cb` is called, then it is freed). */
typedef struct unit {
    fg_store_write_fn fn;
    void *arg;
    int rc;
    int done;
    pthread_cond_t cv; /* fg_store_write: its caller waits here (no thundering herd) */
    fg_store_done_fn cb;
    void *cb_arg;
    uint64_t t_enqueued; /* mono_us() when queued (the commit delay counts from it) */
    struct unit *next;
} unit_t;

struct sq_store {
    fg_store_t base;
    char *path;
    fg_store_opts_t opts;

    sq_conn_t *writer;
    pthread_t writer_thread;
    bool writer_started;

    pthread_mutex_t queue_mu;
    pthread_cond_t work_cv; /* the writer waits for units */
    unit_t *head, *tail;
    size_t queue_len;
    bool closing;
    bool delaying;          /* the writer waits out the commit delay: wake it only when full */
    size_t last_batch;      /* units in the writer's previous batch */
    fg_store_stats_t stats; /* under queue_mu */

    pthread_mutex_t pool_mu;
    pthread_cond_t pool_cv;
    sq_conn_t **readers; /* every reader opened so far */
    int nreaders;
    sq_conn_t *free_readers;

    int wal_pages; /* writer thread only: WAL frames after its last commit */
    int ckpt_step; /* writer thread only: quarters of wal_checkpoint_pages last signalled */
    int ckpt_next; /* writer thread only: WAL size at which it completes a checkpoint */

    sq_conn_t *ckpt;
    pthread_t ckpt_thread;
    bool ckpt_started;
    pthread_mutex_t ckpt_mu;
    pthread_cond_t ckpt_cv;
    bool ckpt_wanted, ckpt_stop;

    /* Completions of asynchronous units run on their own thread, in commit order, so
     * the writer starts the next batch at once instead of resuming 64 requests first. */
    pthread_t done_thread;
    bool done_started;
    pthread_mutex_t done_mu;
    pthread_cond_t done_cv;
    unit_t *done_head, *done_tail;
    bool done_stop;
};

static const fg_store_ops_t sqlite_ops;

#define CONN(tx) (((sq_tx_t *)(tx))->c)

static int map_err(sq_conn_t *c, int rc)
{
    int ext = sqlite3_extended_errcode(c->db);
    switch (ext) {
    case SQLITE_CONSTRAINT_UNIQUE:
    case SQLITE_CONSTRAINT_PRIMARYKEY:
        return FG_STORE_EEXIST;
    case SQLITE_CONSTRAINT_FOREIGNKEY:
        return FG_STORE_ENOENT;
    case SQLITE_CONSTRAINT_NOTNULL:
    case SQLITE_CONSTRAINT_CHECK:
        return FG_STORE_EINVAL;
    default:
        break;
    }
    fg_log(FG_LOG_ERROR, "store: sqlite error %d (%d): %s", rc, ext, sqlite3_errmsg(c->db));
    return FG_STORE_EIO;
}

static sqlite3_stmt *prep_sql(sq_conn_t *c, sqlite3_stmt **slot, const char *sql)
{
    if (!*slot &&
        sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, slot, NULL) != SQLITE_OK) {
        fg_log(FG_LOG_ERROR, "store: preparing \"%s\": %s", sql, sqlite3_errmsg(c->db));
        *slot = NULL;
    }
    return *slot;
}

static sqlite3_stmt *prep(sq_conn_t *c, int id)
{
    return prep_sql(c, &c->st[id], SQL[id]);
}

static void done(sqlite3_stmt *s)
{
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
}

/* Runs a statement that returns no row; resets it. */
static int step_done(sq_conn_t *c, sqlite3_stmt *s)
{
    int rc = sqlite3_step(s);
    int r = rc == SQLITE_DONE ? FG_STORE_OK : map_err(c, rc);
    done(s);
    return r;
}

/* Steps once: 1 for a row, 0 at the end, or an error (the statement is then reset). */
static int step_row(sq_conn_t *c, sqlite3_stmt *s)
{
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE)
        return 0;
    int r = map_err(c, rc);
    done(s);
    return r;
}

static int exec_id(sq_conn_t *c, int id)
{
    sqlite3_stmt *s = prep(c, id);
    return s ? step_done(c, s) : FG_STORE_EIO;
}

/* Runs a statement that returns one integer (COUNT, MAX). */
static int scalar_i64(sq_conn_t *c, sqlite3_stmt *s, int64_t *out)
{
    int r = step_row(c, s);
    if (r == 1) {
        *out = sqlite3_column_int64(s, 0);
        r = FG_STORE_OK;
    } else if (r == 0) {
        r = FG_STORE_ENOENT;
    }
    if (r >= 0)
        done(s);
    return r;
}

static void bind_str(sqlite3_stmt *s, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, i);
}

static char *col_str(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? fg_xstrdup((const char *)t) : NULL;
}

static int changed_or_enoent(sq_conn_t *c, int r)
{
    if (r == FG_STORE_OK && sqlite3_changes(c->db) == 0)
        return FG_STORE_ENOENT;
    return r;
}

static void conn_close(sq_conn_t *c)
{
    if (!c)
        return;
    for (int i = 0; i < S_COUNT; i++)
        sqlite3_finalize(c->st[i]);
    for (int i = 0; i < JL_VARIANTS; i++)
        sqlite3_finalize(c->jl[i]);
    for (int i = 0; i < LL_VARIANTS; i++)
        sqlite3_finalize(c->ll[i]);
    sqlite3_close(c->db);
    free(c);
}

static int pragma(sq_conn_t *c, const char *sql, char **errmsg)
{
    char *err = NULL;
    if (sqlite3_exec(c->db, sql, NULL, NULL, &err) != SQLITE_OK) {
        if (errmsg)
            *errmsg = dupmsg(sql, err ? err : sqlite3_errmsg(c->db));
        sqlite3_free(err);
        return FG_STORE_EIO;
    }
    return FG_STORE_OK;
}

static sq_conn_t *conn_open(sq_store_t *st, bool writable, char **errmsg)
{
    sq_conn_t *c = fg_xcalloc(1, sizeof *c);
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (writable ? SQLITE_OPEN_CREATE : 0);
    /* The log's writes of a commit go out in one call (walbuf.h); if that VFS cannot
     * be set up, the default one does the same work in more calls. */
    const char *vfs = fg_walbuf_register() == SQLITE_OK ? FG_WALBUF_VFS : NULL;
    if (sqlite3_open_v2(st->path, &c->db, flags, vfs) != SQLITE_OK) {
        if (errmsg)
            *errmsg = dupmsg(st->path, c->db ? sqlite3_errmsg(c->db) : "cannot open");
        conn_close(c);
        return NULL;
    }
    sqlite3_extended_result_codes(c->db, 1);
    sqlite3_busy_timeout(c->db, st->opts.busy_timeout_ms);
    if (pragma(c, "PRAGMA foreign_keys = ON", errmsg) != FG_STORE_OK ||
        pragma(c, "PRAGMA temp_store = MEMORY", errmsg) != FG_STORE_OK) {
        conn_close(c);
        return NULL;
    }
    c->tx.base.store = &st->base;
    c->tx.base.writable = false;
    c->tx.c = c;
    return c;
}

/* ------------------------------------------------------------------ checkpoints */

/*
 * The WAL grows with every commit; it restarts from its beginning only after a
 * checkpoint has copied ALL of it into the database. A checkpointer running beside a
 * busy writer never gets there (new frames arrive while it copies) and the WAL grows
 * without bound (measured: 560 MB after 96,000 submissions), making every fsync slower.
 * So: the checkpointer thread copies in the background once the WAL passes a quarter
 * of opts.wal_checkpoint_pages, and when it passes the whole, the writer itself runs
 * a PASSIVE checkpoint between two batches. Little is left to copy by then, nothing is
 * appended meanwhile, so it completes and the next commit restarts the WAL. If readers
 * still pin old frames, the writer tries again a quarter later.
 */

/* Called by SQLite on the writer thread after each commit with the WAL's size. The
 * checkpointer is woken each time the WAL passes one more quarter of
 * opts.wal_checkpoint_pages, not after every commit: each of its runs syncs the WAL and
 * the database, and a run per commit would double the flushes the disk serves. */
static int wal_hook(void *arg, sqlite3 *db, const char *name, int pages)
{
    sq_store_t *st = arg;
    st->wal_pages = pages;
    int quarter = st->opts.wal_checkpoint_pages / 4 > 0 ? st->opts.wal_checkpoint_pages / 4 : 1;
    int step = pages / quarter;
    if (step < st->ckpt_step)
        st->ckpt_step = step; /* the WAL restarted */
    if (step > st->ckpt_step) {
        st->ckpt_step = step;
        pthread_mutex_lock(&st->ckpt_mu);
        st->ckpt_wanted = true;
        pthread_cond_signal(&st->ckpt_cv);
        pthread_mutex_unlock(&st->ckpt_mu);
    }
    return SQLITE_OK;
}

static void *ckpt_main(void *arg)
{
    prctl(PR_SET_NAME, "fg-checkpoint"); /* as top -H and ps -L show it */
    sq_store_t *st = arg;
    /* A connection that has not read yet has not opened the WAL, and SQLite's checkpoint
     * call then returns at once having copied nothing: read once first. */
    if (sqlite3_exec(st->ckpt->db, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL) !=
        SQLITE_OK)
        fg_log(FG_LOG_WARN, "store: checkpointer: %s", sqlite3_errmsg(st->ckpt->db));
    pthread_mutex_lock(&st->ckpt_mu);
    for (;;) {
        while (!st->ckpt_wanted && !st->ckpt_stop)
            pthread_cond_wait(&st->ckpt_cv, &st->ckpt_mu);
        if (st->ckpt_stop)
            break;
        st->ckpt_wanted = false;
        pthread_mutex_unlock(&st->ckpt_mu);
        int log = 0, done_pages = 0;
        int rc = sqlite3_wal_checkpoint_v2(st->ckpt->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log,
                                           &done_pages);
        if (rc != SQLITE_OK && rc != SQLITE_BUSY)
            fg_log(FG_LOG_WARN, "store: checkpoint: %s", sqlite3_errmsg(st->ckpt->db));
        pthread_mutex_lock(&st->ckpt_mu);
    }
    pthread_mutex_unlock(&st->ckpt_mu);
    return NULL;
}

/* ------------------------------------------------------------------ the writer */

static uint64_t mono_us(void)
{
    return (uint64_t)fg_clock_mono_us();
}

static void finish_batch(sq_store_t *st, unit_t *batch, size_t n, uint64_t failed, uint64_t t_begin,
                         uint64_t t_commit)
{
    uint64_t t_end = mono_us();
    unit_t *async = NULL, *next;
    pthread_mutex_lock(&st->queue_mu);
    st->stats.batch_us += t_end - t_begin;
    st->stats.commit_us += t_commit ? t_end - t_commit : 0;
    st->stats.wal_pages = (uint64_t)st->wal_pages;
    for (unit_t *u = batch; u; u = next) {
        next = u->next; /* a waiting caller's unit may vanish once done is set */
        if (u->cb) {
            u->next = async;
            async = u;
        } else {
            u->done = 1;
            pthread_cond_signal(&u->cv); /* under queue_mu: the waiter cannot be gone */
        }
    }
    st->stats.commits++;
    st->stats.units += n;
    st->stats.units_failed += failed;
    if (n > st->stats.max_batch)
        st->stats.max_batch = n;
    pthread_mutex_unlock(&st->queue_mu);
    if (!async)
        return;
    /* async was built in reverse: restore commit order, then hand it over */
    unit_t *fwd = NULL, *tail = async;
    for (unit_t *u = async; u; u = next) {
        next = u->next;
        u->next = fwd;
        fwd = u;
    }
    pthread_mutex_lock(&st->done_mu);
    if (st->done_tail)
        st->done_tail->next = fwd;
    else
        st->done_head = fwd;
    st->done_tail = tail;
    pthread_cond_signal(&st->done_cv);
    pthread_mutex_unlock(&st->done_mu);
}

/* The completion thread: calls the done callbacks of asynchronous units. */
static void *done_main(void *arg)
{
    prctl(PR_SET_NAME, "fg-store-done"); /* as top -H and ps -L show it */
    sq_store_t *st = arg;
    pthread_mutex_lock(&st->done_mu);
    for (;;) {
        while (!st->done_head && !st->done_stop)
            pthread_cond_wait(&st->done_cv, &st->done_mu);
        if (!st->done_head)
            break; /* stopping and drained */
        unit_t *list = st->done_head;
        st->done_head = st->done_tail = NULL;
        pthread_mutex_unlock(&st->done_mu);
        for (unit_t *u = list, *next; u; u = next) {
            next = u->next;
            u->cb(u->rc, u->cb_arg);
            free(u);
        }
        pthread_mutex_lock(&st->done_mu);
    }
    pthread_mutex_unlock(&st->done_mu);
    return NULL;
}

/* Runs every unit of the batch inside the open transaction. Without savepoints (the
 * fast pass) it stops at the first unit that fails and returns false: the caller then
 * rolls the transaction back and runs the batch again with savepoints. With savepoints
 * a failing unit is rolled back alone. Sets u->rc of each unit run; *aborted when SQLite
 * rolled the whole transaction back (I/O error, full disk) or a savepoint statement
 * failed; *failed counts the units that returned non-zero (savepoint pass only). */
static bool run_units(sq_conn_t *c, unit_t *batch, bool savepoints, bool *aborted, uint64_t *failed)
{
    for (unit_t *u = batch; u; u = u->next) {
        if (*aborted || (savepoints && exec_id(c, S_SAVEPOINT) != FG_STORE_OK)) {
            *aborted = true;
            u->rc = FG_STORE_EIO;
            continue;
        }
        int r = u->fn(&c->tx.base, u->arg);
        if (sqlite3_get_autocommit(c->db)) {
            /* SQLite rolled the whole transaction back (I/O error, full disk). */
            *aborted = true;
            u->rc = FG_STORE_EIO;
            continue;
        }
        if (!savepoints) {
            u->rc = r;
            if (r != 0)
                return false;
            continue;
        }
        if (r != 0) {
            (*failed)++;
            if (exec_id(c, S_ROLLBACK_TO) != FG_STORE_OK)
                *aborted = true;
        }
        if (exec_id(c, S_RELEASE) != FG_STORE_OK)
            *aborted = true;
        u->rc = *aborted ? FG_STORE_EIO : r;
    }
    return true;
}

/*
 * One batch, one transaction, one fsync. The units first run without savepoints: a
 * savepoint makes SQLite copy every page a unit touches that earlier units of the
 * transaction already changed (the tails of the job and event tables and their
 * indexes: ~10 pages of 4 KiB per submission) into a statement journal, which was
 * most of the writer's CPU per submission. Units almost never fail; when one does, the
 * transaction is rolled back and the batch runs again, each unit in its own savepoint,
 * so the failing unit (the same one: units are deterministic) is rolled back alone.
 * A batch of one unit needs no second pass: its rollback is the transaction's.
 */
static void run_batch(sq_store_t *st, unit_t *batch, size_t n)
{
    sq_conn_t *c = st->writer;
    uint64_t failed = 0, t_begin = mono_us(), t_commit = 0;
    bool aborted = false;
    bool savepoints = false;
    for (;;) {
        if (exec_id(c, S_BEGIN_IMMEDIATE) != FG_STORE_OK) {
            for (unit_t *u = batch; u; u = u->next)
                u->rc = FG_STORE_EIO;
            finish_batch(st, batch, n, n, t_begin, 0);
            return;
        }
        if (run_units(c, batch, savepoints, &aborted, &failed) || aborted)
            break;
        /* the fast pass met a failing unit: nothing of this pass is kept */
        exec_id(c, S_ROLLBACK);
        if (n == 1) {
            finish_batch(st, batch, n, 1, t_begin, 0);
            return;
        }
        pthread_mutex_lock(&st->queue_mu);
        st->stats.reruns++;
        pthread_mutex_unlock(&st->queue_mu);
        savepoints = true;
    }
    if (!aborted) {
        t_commit = mono_us();
        if (exec_id(c, S_COMMIT) != FG_STORE_OK)
            aborted = true;
    }
    if (aborted) {
        if (!sqlite3_get_autocommit(c->db))
            exec_id(c, S_ROLLBACK);
        for (unit_t *u = batch; u; u = u->next)
            if (u->rc == 0)
                u->rc = FG_STORE_EIO;
        failed = n;
    }
    finish_batch(st, batch, n, failed, t_begin, t_commit);
}

/* Between batches, on the writer thread: completes a checkpoint when the WAL is big. */
static void writer_checkpoint(sq_store_t *st)
{
    if (st->wal_pages < st->ckpt_next)
        return;
    uint64_t t0 = mono_us();
    int log = -1, copied = -1;
    int rc =
        sqlite3_wal_checkpoint_v2(st->writer->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
    bool complete = rc == SQLITE_OK && log >= 0 && copied >= log;
    st->ckpt_next = complete ? st->opts.wal_checkpoint_pages
                             : st->wal_pages + st->opts.wal_checkpoint_pages / 4 + 1;
    uint64_t dt = mono_us() - t0;
    pthread_mutex_lock(&st->queue_mu);
    st->stats.checkpoints += complete;
    st->stats.checkpoint_us += dt;
    if (dt > st->stats.max_checkpoint_us)
        st->stats.max_checkpoint_us = dt;
    pthread_mutex_unlock(&st->queue_mu);
}

/*
 * The commit delay (queue_mu held, a unit queued). Under load, when the previous batch
 * held at least opts.commit_siblings units, the writer waits until the oldest queued
 * unit is opts.commit_delay_us old (or the queue holds max units, or the store
 * closes) before it starts the batch: more units share one transaction and its fsync,
 * whose cost is mostly per commit (measured: ~19 us of CPU per job+event unit in
 * batches of 20, ~8 us in batches of 60). Nothing is acknowledged earlier than before;
 * a unit waits at most the delay longer. Meanwhile enqueues do not wake the writer
 * (no wake-up per request) unless the queue is full.
 */
static void writer_delay(sq_store_t *st, size_t max)
{
    if (st->opts.commit_delay_us <= 0 || st->last_batch < (size_t)st->opts.commit_siblings)
        return;
    uint64_t deadline = st->head->t_enqueued + (uint64_t)st->opts.commit_delay_us;
    st->delaying = true;
    while (!st->closing && st->queue_len < max) {
        uint64_t now = mono_us();
        if (now >= deadline)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + (deadline - now) * 1000u;
        ts.tv_sec += (time_t)(ns / 1000000000u);
        ts.tv_nsec = (long)(ns % 1000000000u);
        pthread_cond_timedwait(&st->work_cv, &st->queue_mu, &ts);
    }
    st->delaying = false;
}

static void *writer_main(void *arg)
{
    prctl(PR_SET_NAME, "fg-store-writer"); /* as top -H and ps -L show it */
    sq_store_t *st = arg;
    size_t max = (size_t)st->opts.max_batch;
    pthread_mutex_lock(&st->queue_mu);
    for (;;) {
        while (!st->head && !st->closing)
            pthread_cond_wait(&st->work_cv, &st->queue_mu);
        if (!st->head)
            break; /* closing and drained */
        writer_delay(st, max);
        unit_t *batch = st->head, *last = batch;
        size_t n = 1;
        while (last->next && n < max) {
            last = last->next;
            n++;
        }
        st->head = last->next;
        if (!st->head)
            st->tail = NULL;
        last->next = NULL;
        st->queue_len -= n;
        st->last_batch = n;
        pthread_mutex_unlock(&st->queue_mu);
        run_batch(st, batch, n);
        writer_checkpoint(st);
        pthread_mutex_lock(&st->queue_mu);
    }
    pthread_mutex_unlock(&st->queue_mu);
    return NULL;
}

/* Links u to the queue and wakes the writer. Called with queue_mu held. */
static int enqueue_locked(sq_store_t *st, unit_t *u)
{
    if (st->closing)
        return FG_STORE_ECLOSED;
    if (st->tail)
        st->tail->next = u;
    else
        st->head = u;
    st->tail = u;
    st->queue_len++;
    u->t_enqueued = mono_us();
    if (!st->delaying || st->queue_len >= (size_t)st->opts.max_batch)
        pthread_cond_signal(&st->work_cv);
    return FG_STORE_OK;
}

static int sq_write_async(fg_store_t *base, fg_store_write_fn fn, void *arg, fg_store_done_fn cb,
                          void *cb_arg)
{
    sq_store_t *st = (sq_store_t *)base;
    unit_t *u = fg_xcalloc(1, sizeof *u);
    u->fn = fn;
    u->arg = arg;
    u->cb = cb;
    u->cb_arg = cb_arg;
    pthread_mutex_lock(&st->queue_mu);
    int rc = enqueue_locked(st, u);
    pthread_mutex_unlock(&st->queue_mu);
    if (rc != FG_STORE_OK)
        free(u);
    return rc;
}

static int sq_write(fg_store_t *base, fg_store_write_fn fn, void *arg)
{
    sq_store_t *st = (sq_store_t *)base;
    if (pthread_equal(pthread_self(), st->writer_thread))
        return FG_STORE_EINVAL; /* a unit called fg_store_write: it would wait forever */
    unit_t u = {.fn = fn, .arg = arg};
    pthread_cond_init(&u.cv, NULL);
    pthread_mutex_lock(&st->queue_mu);
    int rc = enqueue_locked(st, &u);
    if (rc == FG_STORE_OK) {
        while (!u.done)
            pthread_cond_wait(&u.cv, &st->queue_mu);
        rc = u.rc;
    }
    pthread_mutex_unlock(&st->queue_mu);
    pthread_cond_destroy(&u.cv);
    return rc;
}

/* ------------------------------------------------------------------ open, close */

static void sq_close(fg_store_t *base)
{
    sq_store_t *st = (sq_store_t *)base;
    if (st->writer_started) {
        pthread_mutex_lock(&st->queue_mu);
        st->closing = true;
        pthread_cond_signal(&st->work_cv);
        pthread_mutex_unlock(&st->queue_mu);
        pthread_join(st->writer_thread, NULL);
    }
    if (st->done_started) { /* after the writer: its last completions are queued */
        pthread_mutex_lock(&st->done_mu);
        st->done_stop = true;
        pthread_cond_signal(&st->done_cv);
        pthread_mutex_unlock(&st->done_mu);
        pthread_join(st->done_thread, NULL);
    }
    if (st->ckpt_started) {
        pthread_mutex_lock(&st->ckpt_mu);
        st->ckpt_stop = true;
        pthread_cond_signal(&st->ckpt_cv);
        pthread_mutex_unlock(&st->ckpt_mu);
        pthread_join(st->ckpt_thread, NULL);
    }
    for (int i = 0; i < st->nreaders; i++)
        conn_close(st->readers[i]);
    free(st->readers);
    conn_close(st->ckpt);
    conn_close(st->writer); /* the last connection: SQLite checkpoints and drops the WAL */
    pthread_mutex_destroy(&st->queue_mu);
    pthread_cond_destroy(&st->work_cv);
    pthread_mutex_destroy(&st->pool_mu);
    pthread_cond_destroy(&st->pool_cv);
    pthread_mutex_destroy(&st->ckpt_mu);
    pthread_cond_destroy(&st->ckpt_cv);
    pthread_mutex_destroy(&st->done_mu);
    pthread_cond_destroy(&st->done_cv);
    free(st->path);
    free(st);
}

/* SQLite's memory statistics take a global mutex on every allocation; the store does
 * not read them. Only possible before SQLite initializes: later it is a no-op. */
static pthread_once_t sqlite_once = PTHREAD_ONCE_INIT;
static void sqlite_global_config(void)
{
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

int fg_store_open_sqlite(const char *path, const fg_store_opts_t *opts, fg_store_t **out,
                         char **errmsg)
{
    pthread_once(&sqlite_once, sqlite_global_config);
    if (errmsg)
        *errmsg = NULL;
    if (!out)
        return FG_STORE_EINVAL;
    *out = NULL;
    if (!path || !*path) {
        if (errmsg)
            *errmsg = fg_xstrdup("store: empty database path");
        return FG_STORE_EINVAL;
    }
    sq_store_t *st = fg_xcalloc(1, sizeof *st);
    st->base.ops = &sqlite_ops;
    st->path = fg_xstrdup(path);
    if (opts)
        st->opts = *opts;
    if (st->opts.read_conns <= 0)
        st->opts.read_conns = 16;
    if (st->opts.max_batch <= 0)
        st->opts.max_batch = 1024;
    if (st->opts.busy_timeout_ms <= 0)
        st->opts.busy_timeout_ms = 5000;
    if (st->opts.wal_checkpoint_pages <= 0)
        st->opts.wal_checkpoint_pages = 4000;
    if (st->opts.commit_delay_us < 0)
        st->opts.commit_delay_us = 0;
    if (st->opts.commit_siblings <= 0)
        st->opts.commit_siblings = 1;
    st->ckpt_next = st->opts.wal_checkpoint_pages;
    pthread_mutex_init(&st->queue_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the commit delay's deadline */
    pthread_cond_init(&st->work_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&st->pool_mu, NULL);
    pthread_cond_init(&st->pool_cv, NULL);
    pthread_mutex_init(&st->ckpt_mu, NULL);
    pthread_cond_init(&st->ckpt_cv, NULL);
    pthread_mutex_init(&st->done_mu, NULL);
    pthread_cond_init(&st->done_cv, NULL);
    st->readers = fg_xcalloc((size_t)st->opts.read_conns, sizeof *st->readers);

    int rc = FG_STORE_EIO;
    /* The file holds password and token hashes: create it 0600. SQLite gives the -wal
     * and -shm files the database file's mode. An existing file keeps its mode. */
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (errmsg)
            *errmsg = dupmsg(path, strerror(errno));
        goto fail;
    }
    close(fd);
    st->writer = conn_open(st, true, errmsg);
    if (!st->writer)
        goto fail;
    st->writer->tx.base.writable = true;
    /* journal_mode answers with the mode in force: it must be "wal". */
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->writer->db, "PRAGMA journal_mode = WAL", -1, &s, NULL) !=
            SQLITE_OK ||
        sqlite3_step(s) != SQLITE_ROW ||
        strcmp((const char *)sqlite3_column_text(s, 0), "wal") != 0) {
        if (errmsg)
            *errmsg = dupmsg("store: cannot switch the database to WAL mode",
                             sqlite3_errmsg(st->writer->db));
        sqlite3_finalize(s);
        goto fail;
    }
    sqlite3_finalize(s);
    /* Never weakened: a commit returns only after the WAL is fsync'd. The writer's page
     * cache (64 MiB) keeps the tail pages of the tables and indexes it appends to. */
    if (pragma(st->writer, "PRAGMA synchronous = FULL", errmsg) != FG_STORE_OK ||
        pragma(st->writer, "PRAGMA cache_size = -65536", errmsg) != FG_STORE_OK)
        goto fail;
    rc = fg_store_sqlite_migrate(st->writer->db, NMIGRATIONS, errmsg);
    if (rc != FG_STORE_OK)
        goto fail;
    rc = FG_STORE_EIO;
    /* Checkpoints run on their own thread (wal_hook replaces auto-checkpointing). */
    st->ckpt = conn_open(st, false, errmsg);
    if (!st->ckpt)
        goto fail;
    /* (said, not left to the build's default: a checkpoint that copied all of the WAL
     * syncs the database before the WAL may restart over the frames it copied) */
    if (pragma(st->ckpt, "PRAGMA synchronous = FULL", errmsg) != FG_STORE_OK)
        goto fail;
    sqlite3_wal_hook(st->writer->db, wal_hook, st);
    if (pthread_create(&st->ckpt_thread, NULL, ckpt_main, st) != 0) {
        if (errmsg)
            *errmsg = fg_xstrdup("store: cannot start the checkpoint thread");
        goto fail;
    }
    st->ckpt_started = true;
    if (pthread_create(&st->done_thread, NULL, done_main, st) != 0) {
        if (errmsg)
            *errmsg = fg_xstrdup("store: cannot start the completion thread");
        goto fail;
    }
    st->done_started = true;
    if (pthread_create(&st->writer_thread, NULL, writer_main, st) != 0) {
        if (errmsg)
            *errmsg = fg_xstrdup("store: cannot start the writer thread");
        goto fail;
    }
    st->writer_started = true;
    *out = &st->base;
    return FG_STORE_OK;
fail:
    sq_close(&st->base);
    return rc;
}

sqlite3 *fg_store_sqlite_db(fg_store_tx_t *tx)
{
    return tx && tx->store->ops == &sqlite_ops ? CONN(tx)->db : NULL;
}

static int sq_schema_version(fg_store_t *base)
{
    fg_store_tx_t *tx;
    int rc = fg_store_read_begin(base, &tx);
    if (rc != FG_STORE_OK)
        return rc;
    int v = 0;
    rc = user_version(CONN(tx)->db, &v);
    fg_store_read_end(tx);
    return rc == FG_STORE_OK ? v : rc;
}

static void sq_get_stats(fg_store_t *base, fg_store_stats_t *out)
{
    sq_store_t *st = (sq_store_t *)base;
    pthread_mutex_lock(&st->queue_mu);
    *out = st->stats;
    out->queue_len = st->queue_len;
    pthread_mutex_unlock(&st->queue_mu);
}

/* ------------------------------------------------------------------ reads */

static int sq_read_begin(fg_store_t *base, fg_store_tx_t **tx)
{
    sq_store_t *st = (sq_store_t *)base;
    sq_conn_t *c = NULL;
    pthread_mutex_lock(&st->pool_mu);
    for (;;) {
        if (st->free_readers) {
            c = st->free_readers;
            st->free_readers = c->next_free;
            break;
        }
        if (st->nreaders < st->opts.read_conns) {
            st->nreaders++; /* reserve the slot, open outside the lock */
            pthread_mutex_unlock(&st->pool_mu);
            c = conn_open(st, false, NULL);
            pthread_mutex_lock(&st->pool_mu);
            if (!c) {
                st->nreaders--;
                pthread_mutex_unlock(&st->pool_mu);
                return FG_STORE_EIO;
            }
            /* readers[] holds every open one; fill the first empty slot */
            for (int i = 0; i < st->opts.read_conns; i++)
                if (!st->readers[i]) {
                    st->readers[i] = c;
                    break;
                }
            break;
        }
        pthread_cond_wait(&st->pool_cv, &st->pool_mu);
    }
    pthread_mutex_unlock(&st->pool_mu);
    if (exec_id(c, S_BEGIN) != FG_STORE_OK) {
        *tx = &c->tx.base;
        fg_store_read_end(*tx);
        *tx = NULL;
        return FG_STORE_EIO;
    }
    *tx = &c->tx.base;
    return FG_STORE_OK;
}

static void sq_read_end(fg_store_tx_t *tx)
{
    sq_store_t *st = (sq_store_t *)tx->store;
    sq_conn_t *c = CONN(tx);
    if (!sqlite3_get_autocommit(c->db))
        exec_id(c, S_COMMIT);
    pthread_mutex_lock(&st->pool_mu);
    c->next_free = st->free_readers;
    st->free_readers = c;
    pthread_cond_signal(&st->pool_cv);
    pthread_mutex_unlock(&st->pool_mu);
}

static int sq_ping(fg_store_t *base)
{
    fg_store_tx_t *tx;
    int rc = fg_store_read_begin(base, &tx);
    if (rc != FG_STORE_OK)
        return rc;
    int64_t n;
    sqlite3_stmt *s = prep(CONN(tx), S_PING);
    rc = s ? scalar_i64(CONN(tx), s, &n) : FG_STORE_EIO;
    fg_store_read_end(tx);
    return rc;
}

/* ------------------------------------------------------------------ generic fetch */

/* Fetches rows of a bound statement into a growing array of records of `size`
 * bytes with `fill`. Resets the statement. */
typedef void (*fill_fn)(sqlite3_stmt *s, void *rec);

static int fetch_all(sq_conn_t *c, sqlite3_stmt *s, fill_fn fill, size_t size, void **items,
                     size_t *n, size_t max)
{
    size_t cap = 0;
    char *arr = NULL;
    *n = 0;
    for (;;) {
        if (max && *n >= max)
            break;
        int r = step_row(c, s);
        if (r < 0) {
            *items = arr;
            return r;
        }
        if (r == 0)
            break;
        arr = fg_xgrow(arr, &cap, *n + 1, size);
        memset(arr + *n * size, 0, size);
        fill(s, arr + *n * size);
        (*n)++;
    }
    done(s);
    *items = arr;
    return FG_STORE_OK;
}

static int fetch_one(sq_conn_t *c, sqlite3_stmt *s, fill_fn fill, void *rec)
{
    int r = step_row(c, s);
    if (r < 0)
        return r;
    if (r == 1)
        fill(s, rec);
    done(s);
    return r == 1 ? FG_STORE_OK : FG_STORE_ENOENT;
}

/* ------------------------------------------------------------------ settings */

static int sq_setting_get(fg_store_tx_t *tx, const char *key, char **value)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_SETTING_GET);
    if (!s)
        return FG_STORE_EIO;
    bind_str(s, 1, key);
    int r = step_row(c, s);
    if (r < 0)
        return r;
    if (r == 1)
        *value = col_str(s, 0);
    done(s);
    return r == 1 ? FG_STORE_OK : FG_STORE_ENOENT;
}

static int sq_setting_set(fg_store_tx_t *tx, const char *key, const char *value)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_SETTING_SET);
    if (!s)
        return FG_STORE_EIO;
    bind_str(s, 1, key);
    bind_str(s, 2, value);
    return step_done(c, s);
}

static int sq_setting_delete(fg_store_tx_t *tx, const char *key)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_SETTING_DELETE);
    if (!s)
        return FG_STORE_EIO;
    bind_str(s, 1, key);
    return changed_or_enoent(c, step_done(c, s));
}

/* ------------------------------------------------------------------ users */

static void fill_user(sqlite3_stmt *s, void *rec)
{
    fg_store_user_t *u = rec;
    u->id = sqlite3_column_int64(s, 0);
    u->username = col_str(s, 1);
    u->email = col_str(s, 2);
    u->display_name = col_str(s, 3);
    u->password_hash = col_str(s, 4);
    u->role = sqlite3_column_int(s, 5);
    u->disabled = sqlite3_column_int(s, 6) != 0;
    u->created_at = sqlite3_column_int64(s, 7);
    u->default_account = col_str(s, 8);
}

static int sq_user_insert(fg_store_tx_t *tx, const fg_store_user_t *u, int64_t *id)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_USER_INSERT);
    if (!s)
        return FG_STORE_EIO;
    bind_str(s, 1, u->username);
    bind_str(s, 2, u->email);
    bind_str(s, 3, u->display_name);
    bind_str(s, 4, u->password_hash);
    sqlite3_bind_int(s, 5, u->role);
    sqlite3_bind_int(s, 6, u->disabled ? 1 : 0);
    sqlite3_bind_int64(s, 7, u->created_at);
    int r = step_done(c, s);
    if (r == FG_STORE_OK && id)
        *id = sqlite3_last_insert_rowid(c->db);
    return r;
}

static int sq_user_get(fg_store_tx_t *tx, int64_t id, fg_store_user_t *out)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_USER_GET);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, id);
    return fetch_one(c, s, fill_user, out);
}

static int sq_user_get_by_name(fg_store_tx_t *tx, const char *username, fg_store_user_t *out)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_USER_GET_BY_NAME);
    if (!s)
        return FG_STORE_EIO;
    bind_str(s, 1, username);
    return fetch_one(c, s, fill_user, out);
}

static int sq_user_update(fg_store_tx_t *tx, const fg_store_user_t *u)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_USER_UPDATE);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, u->id);
    bind_str(s, 2, u->email);
    bind_str(s, 3, u->display_name);
    bind_str(s, 4, u->password_hash);
    sqlite3_bind_int(s, 5, u->role);
    sqlite3_bind_int(s, 6, u->disabled ? 1 : 0);
    return changed_or_enoent(c, step_done(c, s));
}

static int sq_user_count(fg_store_tx_t *tx, int64_t *n)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_USER_COUNT);
    return s ? scalar_i64(c, s, n) : FG_STORE_EIO;
}

/* One page: fetches limit + 1 rows; if the extra one exists, the cursor is the id of
 * the last row kept. id_of reads a record's id. */
static int page(sq_conn_t *c, sqlite3_stmt *s, fill_fn fill, size_t size, int limit, void **items,
                size_t *n, char **next_cursor, void (*clear)(void *),
                int64_t (*id_of)(const void *))
{
    int r = fetch_all(c, s, fill, size, items, n, (size_t)limit + 1);
    if (r != FG_STORE_OK)
        return r;
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (*n > (size_t)limit) {
        clear((char *)*items + (size_t)limit * size);
        *n = (size_t)limit;
        *next_cursor = fg_store_cursor_encode(id_of((char *)*items + (*n - 1) * size));
    }
    return FG_STORE_OK;
}

static void clear_user(void *p)
{
    fg_store_user_clear(p);
}
static int64_t id_user(const void *p)
{
    return ((const fg_store_user_t *)p)->id;
}

static int sq_user_list(fg_store_tx_t *tx, const char *cursor, int limit, fg_store_user_list_t *out)
{
    sq_conn_t *c = CONN(tx);
    int64_t after = 0;
    if (cursor && fg_store_cursor_decode(cursor, &after) != FG_STORE_OK)
        return FG_STORE_EINVAL;
    sqlite3_stmt *s = prep(c, S_USER_LIST);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, after);
    sqlite3_bind_int(s, 2, limit + 1);
    void *items = NULL;
    int r = page(c, s, fill_user, sizeof(fg_store_user_t), limit, &items, &out->n,
                 &out->next_cursor, clear_user, id_user);
    out->items = items;
    if (r != FG_STORE_OK)
        fg_store_user_list_free(out);
    return r;
}

/* ------------------------------------------------------------------ sessions, tokens */

static void fill_session(sqlite3_stmt *s, void *rec)
{
    fg_store_session_t *x = rec;
    x->token_hash = col_str(s, 0);
    x->user_id = sqlite3_column_int64(s, 1);
    x->created_at = sqlite3_column_int64(s, 2);
    x->expires_at = sqlite3_column_int64(s, 3);
}

static int sq_session_insert(fg_store_tx_t *tx, const fg_store_session_t *x)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_SESSION_INSERT);
    if (!s)
        return FG_STORE_EIO;
    bind_str(s, 1, x->token_hash);
    sqlite3_bind_int64(s, 2, x->user_id);
    sqlite3_bind_int64(s, 3, x->created_at);
    sqlite3_bind_int64(s, 4, x->expires_at);
    return step_done(c, s);
}

static int sq_session_get(fg_store_tx_t *tx, const char *token_hash, fg_store_session_t *out)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_SESSION_GET);
    if (!s)
        return FG_STORE_EIO;
    bind_str(s, 1, token_hash);
    return fetch_one(c, s, fill_session, out);
}

static int sq_session_delete(fg_store_tx_t *tx, const char *token_hash)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_SESSION_DELETE);
    if (!s)
        return FG_STORE_EIO;
    bind_str(s, 1, token_hash);
    return changed_or_enoent(c, step_done(c, s));
}

static int session_delete_where(fg_store_tx_t *tx, int id, int64_t v, int64_t *n)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, id);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, v);
    int r = step_done(c, s);
    if (r == FG_STORE_OK && n)
        *n = sqlite3_changes(c->db);
    return r;
}

static int sq_session_delete_expired(fg_store_tx_t *tx, int64_t now, int64_t *n)
{
    return session_delete_where(tx, S_SESSION_DELETE_EXPIRED, now, n);
}

static int sq_session_delete_user(fg_store_tx_t *tx, int64_t user_id, int64_t *n)
{
    return session_delete_where(tx, S_SESSION_DELETE_USER, user_id, n);
}

static void fill_token(sqlite3_stmt *s, void *rec)
{
    fg_store_token_t *t = rec;
    t->id = sqlite3_column_int64(s, 0);
    t->name = col_str(s, 1);
    t->token_hash = col_str(s, 2);
    t->user_id = sqlite3_column_int64(s, 3);
    t->created_at = sqlite3_column_int64(s, 4);
}

static int sq_token_insert(fg_store_tx_t *tx, const fg_store_token_t *t, int64_t *id)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_TOKEN_INSERT);
    if (!s)
        return FG_STORE_EIO;
    bind_str(s, 1, t->name);
    bind_str(s, 2, t->token_hash);
    sqlite3_bind_int64(s, 3, t->user_id);
    sqlite3_bind_int64(s, 4, t->created_at);
    int r = step_done(c, s);
    if (r == FG_STORE_OK && id)
        *id = sqlite3_last_insert_rowid(c->db);
    return r;
}

static int sq_token_get_by_hash(fg_store_tx_t *tx, const char *token_hash, fg_store_token_t *out)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_TOKEN_GET_BY_HASH);
    if (!s)
        return FG_STORE_EIO;
    bind_str(s, 1, token_hash);
    return fetch_one(c, s, fill_token, out);
}

static int sq_token_list(fg_store_tx_t *tx, int64_t user_id, fg_store_token_list_t *out)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_TOKEN_LIST);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, user_id);
    void *items = NULL;
    int r = fetch_all(c, s, fill_token, sizeof(fg_store_token_t), &items, &out->n, 0);
    out->items = items;
    if (r != FG_STORE_OK)
        fg_store_token_list_free(out);
    return r;
}

static int sq_token_delete(fg_store_tx_t *tx, int64_t id, int64_t user_id)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, user_id ? S_TOKEN_DELETE : S_TOKEN_DELETE_ANY);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, id);
    if (user_id)
        sqlite3_bind_int64(s, 2, user_id);
    return changed_or_enoent(c, step_done(c, s));
}

static int sq_auth_lookup(fg_store_tx_t *tx, const char *token_hash, int64_t now,
                          fg_store_user_t *user, int *kind, int64_t *cred_id)
{
    fg_store_session_t ses = {0};
    int r = sq_session_get(tx, token_hash, &ses);
    if (r == FG_STORE_OK) {
        int64_t uid = ses.user_id, exp = ses.expires_at;
        fg_store_session_clear(&ses);
        if (exp <= now)
            return FG_STORE_ENOENT;
        r = sq_user_get(tx, uid, user);
        if (r == FG_STORE_OK) {
            if (kind)
                *kind = FG_STORE_AUTH_SESSION;
            if (cred_id)
                *cred_id = 0;
        }
        return r;
    }
    if (r != FG_STORE_ENOENT)
        return r;
    fg_store_token_t tok = {0};
    r = sq_token_get_by_hash(tx, token_hash, &tok);
    if (r != FG_STORE_OK)
        return r;
    int64_t uid = tok.user_id, tid = tok.id;
    fg_store_token_clear(&tok);
    r = sq_user_get(tx, uid, user);
    if (r == FG_STORE_OK) {
        if (kind)
            *kind = FG_STORE_AUTH_TOKEN;
        if (cred_id)
            *cred_id = tid;
    }
    return r;
}

/* ------------------------------------------------------------------ accounts */

static void fill_account(sqlite3_stmt *s, void *rec)
{
    fg_store_account_t *a = rec;
    a->name = col_str(s, 0);
    a->weight = sqlite3_column_double(s, 1);
    a->gpu_quota = sqlite3_column_int(s, 2);
    a->budget_micros = sqlite3_column_int64(s, 3);
    a->allowed_priorities = sqlite3_column_int(s, 4);
    a->created_at = sqlite3_column_int64(s, 5);
    a->budget_mode = sqlite3_column_int(s, 6);
    a->budget_period = sqlite3_column_int(s, 7);
    a->budget_since_ms = sqlite3_column_int64(s, 8);
    a->idle_action = sqlite3_column_int(s, 9);
    a->idle_grace_s = sqlite3_column_int64(s, 10);
}

static void bind_account(sqlite3_stmt *s, const fg_store_account_t *a)
{
    bind_str(s, 1, a->name);
    sqlite3_bind_double(s, 2, a->weight);
    sqlite3_bind_int(s, 3, a->gpu_quota);
    sqlite3_bind_int64(s, 4, a->budget_micros);
    sqlite3_bind_int(s, 5, a->allowed_priorities);
    sqlite3_bind_int(s, 7, a->budget_mode);
    sqlite3_bind_int(s, 8, a->budget_period);
    sqlite3_bind_int64(s, 9, a->budget_since_ms);
    sqlite3_bind_int(s, 10, a->idle_action);
    sqlite3_bind_int64(s, 11, a->idle_grace_s);
}

static int sq_account_insert(fg_store_tx_t *tx, const fg_store_account_t *a)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_ACCOUNT_INSERT);
    if (!s)
        return FG_STORE_EIO;
    bind_account(s, a);
    sqlite3_bind_int64(s, 6, a->created_at);
    return step_done(c, s);
}

static int sq_account_get(fg_store_tx_t *tx, const char *name, fg_store_account_t *out)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_ACCOUNT_GET);
    if (!s)
        return FG_STORE_EIO;
    bind_str(s, 1, name);
    return fetch_one(c, s, fill_account, out);
}

static int sq_account_update(fg_store_tx_t *tx, const fg_store_account_t *a)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_ACCOUNT_UPDATE);
    if (!s)
        return FG_STORE_EIO;
    bind_account(s, a);
    return changed_or_enoent(c, step_done(c, s));
}

static int sq_account_list(fg_store_tx_t *tx, fg_store_account_list_t *out)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_ACCOUNT_LIST);
    if (!s)
        return FG_STORE_EIO;
    void *items = NULL;
    int r = fetch_all(c, s, fill_account, sizeof(fg_store_account_t), &items, &out->n, 0);
    out->items = items;
    if (r != FG_STORE_OK)
        fg_store_account_list_free(out);
    return r;
}

/* ------------------------------------------------------------------ memberships */

static void fill_member(sqlite3_stmt *s, void *rec)
{
    fg_store_member_t *m = rec;
    m->user_id = sqlite3_column_int64(s, 0);
    m->account = col_str(s, 1);
    m->weight = sqlite3_column_double(s, 2);
    m->is_default = sqlite3_column_int(s, 3) != 0;
    m->position = sqlite3_column_int64(s, 4);
    m->username = col_str(s, 5);
    m->is_manager = sqlite3_column_int(s, 6) != 0;
}

static int sq_member_add(fg_store_tx_t *tx, const fg_store_member_t *m)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_MEMBER_COUNT_USER);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, m->user_id);
    int64_t count = 0, pos = 0;
    int r = scalar_i64(c, s, &count);
    if (r != FG_STORE_OK)
        return r;
    if (!(s = prep(c, S_MEMBER_NEXT_POS)))
        return FG_STORE_EIO;
    if ((r = scalar_i64(c, s, &pos)) != FG_STORE_OK)
        return r;
    if (!(s = prep(c, S_MEMBER_INSERT)))
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, m->user_id);
    bind_str(s, 2, m->account);
    sqlite3_bind_double(s, 3, m->weight > 0 ? m->weight : 1.0);
    sqlite3_bind_int(s, 4, count == 0 ? 1 : 0);
    sqlite3_bind_int64(s, 5, pos);
    sqlite3_bind_int(s, 6, m->is_manager ? 1 : 0);
    return step_done(c, s);
}

/* Sets or clears the manager flag of an existing membership. */
static int sq_member_set_manager(fg_store_tx_t *tx, int64_t user_id, const char *account,
                                 bool is_manager)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_MEMBER_SET_MANAGER);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, user_id);
    bind_str(s, 2, account);
    sqlite3_bind_int(s, 3, is_manager ? 1 : 0);
    return changed_or_enoent(c, step_done(c, s));
}

static int sq_member_set_weight(fg_store_tx_t *tx, int64_t user_id, const char *account,
                                double weight)
{
    sq_conn_t *c = CONN(tx);
    if (!(weight > 0))
        return FG_STORE_EINVAL;
    sqlite3_stmt *s = prep(c, S_MEMBER_SET_WEIGHT);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, user_id);
    bind_str(s, 2, account);
    sqlite3_bind_double(s, 3, weight);
    return changed_or_enoent(c, step_done(c, s));
}

static int sq_member_get(fg_store_tx_t *tx, int64_t user_id, const char *account,
                         fg_store_member_t *out)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_MEMBER_GET);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, user_id);
    bind_str(s, 2, account);
    return fetch_one(c, s, fill_member, out);
}

static int sq_member_set_default(fg_store_tx_t *tx, int64_t user_id, const char *account)
{
    sq_conn_t *c = CONN(tx);
    fg_store_member_t m = {0};
    int r = sq_member_get(tx, user_id, account, &m);
    fg_store_member_clear(&m);
    if (r != FG_STORE_OK)
        return r;
    sqlite3_stmt *s = prep(c, S_MEMBER_CLEAR_DEFAULT);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, user_id);
    if ((r = step_done(c, s)) != FG_STORE_OK)
        return r;
    if (!(s = prep(c, S_MEMBER_SET_DEFAULT)))
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, user_id);
    bind_str(s, 2, account);
    return changed_or_enoent(c, step_done(c, s));
}

static int sq_member_remove(fg_store_tx_t *tx, int64_t user_id, const char *account)
{
    sq_conn_t *c = CONN(tx);
    fg_store_member_t m = {0};
    int r = sq_member_get(tx, user_id, account, &m);
    bool was_default = m.is_default;
    fg_store_member_clear(&m);
    if (r != FG_STORE_OK)
        return r;
    sqlite3_stmt *s = prep(c, S_MEMBER_DELETE);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, user_id);
    bind_str(s, 2, account);
    if ((r = step_done(c, s)) != FG_STORE_OK || !was_default)
        return r;
    if (!(s = prep(c, S_MEMBER_PROMOTE)))
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, user_id);
    return step_done(c, s);
}

static int member_list(sq_conn_t *c, sqlite3_stmt *s, fg_store_member_list_t *out)
{
    void *items = NULL;
    int r = fetch_all(c, s, fill_member, sizeof(fg_store_member_t), &items, &out->n, 0);
    out->items = items;
    if (r != FG_STORE_OK)
        fg_store_member_list_free(out);
    return r;
}

static int sq_member_list_by_user(fg_store_tx_t *tx, int64_t user_id, fg_store_member_list_t *out)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_MEMBER_LIST_USER);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, user_id);
    return member_list(c, s, out);
}

static int sq_member_list_by_account(fg_store_tx_t *tx, const char *account,
                                     fg_store_member_list_t *out)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_MEMBER_LIST_ACCOUNT);
    if (!s)
        return FG_STORE_EIO;
    bind_str(s, 1, account);
    return member_list(c, s, out);
}

static int sq_member_list_all(fg_store_tx_t *tx, fg_store_member_list_t *out)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_MEMBER_LIST_ALL);
    return s ? member_list(c, s, out) : FG_STORE_EIO;
}

/* ------------------------------------------------------------------ audit */

static void fill_audit(sqlite3_stmt *s, void *rec)
{
    fg_store_audit_t *a = rec;
    a->id = sqlite3_column_int64(s, 0);
    a->time = sqlite3_column_int64(s, 1);
    a->admin_user_id = sqlite3_column_int64(s, 2);
    a->action = col_str(s, 3);
    a->target = col_str(s, 4);
    a->details_json = col_str(s, 5);
}

static int sq_audit_append(fg_store_tx_t *tx, const fg_store_audit_t *a, int64_t *id)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_AUDIT_APPEND);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, a->time);
    sqlite3_bind_int64(s, 2, a->admin_user_id);
    bind_str(s, 3, a->action);
    bind_str(s, 4, a->target);
    bind_str(s, 5, a->details_json);
    int r = step_done(c, s);
    if (r == FG_STORE_OK && id)
        *id = sqlite3_last_insert_rowid(c->db);
    return r;
}

static void clear_audit(void *p)
{
    fg_store_audit_clear(p);
}
static int64_t id_audit(const void *p)
{
    return ((const fg_store_audit_t *)p)->id;
}

static int sq_audit_list(fg_store_tx_t *tx, const char *cursor, int limit,
                         fg_store_audit_list_t *out)
{
    sq_conn_t *c = CONN(tx);
    int64_t before = INT64_MAX;
    if (cursor && fg_store_cursor_decode(cursor, &before) != FG_STORE_OK)
        return FG_STORE_EINVAL;
    sqlite3_stmt *s = prep(c, S_AUDIT_LIST);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, before);
    sqlite3_bind_int(s, 2, limit + 1);
    void *items = NULL;
    int r = page(c, s, fill_audit, sizeof(fg_store_audit_t), limit, &items, &out->n,
                 &out->next_cursor, clear_audit, id_audit);
    out->items = items;
    if (r != FG_STORE_OK)
        fg_store_audit_list_free(out);
    return r;
}

/* ------------------------------------------------------------------ jobs */

static void fill_job(sqlite3_stmt *s, void *rec)
{
    fg_store_job_t *j = rec;
    j->id = sqlite3_column_int64(s, 0);
    j->name = col_str(s, 1);
    j->user_id = sqlite3_column_int64(s, 2);
    j->username = col_str(s, 3);
    j->account = col_str(s, 4);
    j->command_json = col_str(s, 5);
    j->env_json = col_str(s, 6);
    j->gpus = sqlite3_column_int(s, 7);
    j->gpu_type = col_str(s, 8);
    j->model = col_str(s, 9);
    j->dataset = col_str(s, 10);
    j->priority = sqlite3_column_int(s, 11);
    j->state = sqlite3_column_int(s, 12);
    j->reason_code = sqlite3_column_int(s, 13);
    j->reason = col_str(s, 14);
    j->submit_time = sqlite3_column_int64(s, 15);
    j->start_time = sqlite3_column_int64(s, 16);
    j->end_time = sqlite3_column_int64(s, 17);
    j->time_limit_s = sqlite3_column_int64(s, 18);
    j->has_exit_code = sqlite3_column_type(s, 19) != SQLITE_NULL;
    j->exit_code = sqlite3_column_int(s, 19);
    j->attempts = sqlite3_column_int(s, 20);
    j->max_retries = sqlite3_column_int(s, 21);
    j->retries_used = sqlite3_column_int(s, 22);
    j->attained_gpu_s = sqlite3_column_int64(s, 23);
    j->cancel_requested = sqlite3_column_int(s, 24) != 0;
    j->eligible_time = sqlite3_column_int64(s, 25);
    j->checkpoint_interval_s = sqlite3_column_int64(s, 26);
    j->cpus = sqlite3_column_int(s, 27);
    j->memory_mb = sqlite3_column_int64(s, 28);
    j->idem_key = col_str(s, 29);
    j->nodes_json = col_str(s, 30);
    j->gpu_indices_json = col_str(s, 31);
    j->estimated_start = sqlite3_column_int64(s, 32);
    j->cost_micros = sqlite3_column_int64(s, 33);
    j->idle_gpu_s = sqlite3_column_int64(s, 34);
    j->est_p10 = sqlite3_column_int64(s, 35);
    j->est_p90 = sqlite3_column_int64(s, 36);
    j->est_source = sqlite3_column_int(s, 37);
    j->est_submit = sqlite3_column_int64(s, 38);
    j->est_submit_p10 = sqlite3_column_int64(s, 39);
    j->est_submit_p90 = sqlite3_column_int64(s, 40);
    j->est_submit_source = sqlite3_column_int(s, 41);
    j->est_limit_submit = sqlite3_column_int64(s, 42);
    j->est_first_start = sqlite3_column_int64(s, 43);
}

/* Binds ?1..?32 and ?34..?43 of S_JOB_INSERT / S_JOB_UPDATE (the update uses a subset)
 * and ?33 (the id). */
static void bind_job(sqlite3_stmt *s, const fg_store_job_t *j, bool with_id)
{
    bind_str(s, 1, j->name);
    sqlite3_bind_int64(s, 2, j->user_id);
    bind_str(s, 3, j->account);
    bind_str(s, 4, j->command_json);
    bind_str(s, 5, j->env_json);
    sqlite3_bind_int(s, 6, j->gpus);
    bind_str(s, 7, j->gpu_type);
    bind_str(s, 8, j->model);
    bind_str(s, 9, j->dataset);
    sqlite3_bind_int(s, 10, j->priority);
    sqlite3_bind_int(s, 11, j->state);
    sqlite3_bind_int(s, 12, j->reason_code);
    bind_str(s, 13, j->reason);
    sqlite3_bind_int64(s, 14, j->submit_time);
    sqlite3_bind_int64(s, 15, j->start_time);
    sqlite3_bind_int64(s, 16, j->end_time);
    sqlite3_bind_int64(s, 17, j->time_limit_s);
    if (j->has_exit_code)
        sqlite3_bind_int(s, 18, j->exit_code);
    else
        sqlite3_bind_null(s, 18);
    sqlite3_bind_int(s, 19, j->attempts);
    sqlite3_bind_int(s, 20, j->max_retries);
    sqlite3_bind_int(s, 21, j->retries_used);
    sqlite3_bind_int64(s, 22, j->attained_gpu_s);
    sqlite3_bind_int(s, 23, j->cancel_requested ? 1 : 0);
    sqlite3_bind_int64(s, 24, j->eligible_time);
    sqlite3_bind_int64(s, 25, j->checkpoint_interval_s);
    sqlite3_bind_int(s, 26, j->cpus);
    sqlite3_bind_int64(s, 27, j->memory_mb);
    bind_str(s, 28, j->idem_key);
    bind_str(s, 29, j->nodes_json);
    bind_str(s, 30, j->gpu_indices_json);
    sqlite3_bind_int64(s, 31, j->estimated_start);
    sqlite3_bind_int64(s, 32, j->cost_micros);
    sqlite3_bind_int64(s, 34, j->idle_gpu_s);
    sqlite3_bind_int64(s, 35, j->est_p10);
    sqlite3_bind_int64(s, 36, j->est_p90);
    sqlite3_bind_int(s, 37, j->est_source);
    sqlite3_bind_int64(s, 38, j->est_submit);
    sqlite3_bind_int64(s, 39, j->est_submit_p10);
    sqlite3_bind_int64(s, 40, j->est_submit_p90);
    sqlite3_bind_int(s, 41, j->est_submit_source);
    sqlite3_bind_int64(s, 42, j->est_limit_submit);
    sqlite3_bind_int64(s, 43, j->est_first_start);
    if (with_id)
        sqlite3_bind_int64(s, 33, j->id);
}

static int sq_job_insert(fg_store_tx_t *tx, const fg_store_job_t *j, int64_t *id)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_JOB_INSERT);
    if (!s)
        return FG_STORE_EIO;
    bind_job(s, j, false);
    int r = step_done(c, s);
    if (r == FG_STORE_OK && id)
        *id = sqlite3_last_insert_rowid(c->db);
    return r;
}

static int sq_job_get(fg_store_tx_t *tx, int64_t id, fg_store_job_t *out)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_JOB_GET);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 33, id);
    return fetch_one(c, s, fill_job, out);
}

static int sq_job_get_by_idem(fg_store_tx_t *tx, int64_t user_id, const char *key,
                              fg_store_job_t *out)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_JOB_GET_BY_IDEM);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, user_id);
    bind_str(s, 2, key);
    return fetch_one(c, s, fill_job, out);
}

static int sq_job_update(fg_store_tx_t *tx, const fg_store_job_t *j)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_JOB_UPDATE);
    if (!s)
        return FG_STORE_EIO;
    bind_job(s, j, true);
    return changed_or_enoent(c, step_done(c, s));
}

static int sq_job_set_reason(fg_store_tx_t *tx, int64_t id, int32_t reason_code, const char *reason,
                             int64_t estimated_start)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_JOB_SET_REASON);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int(s, 2, reason_code);
    bind_str(s, 3, reason);
    sqlite3_bind_int64(s, 4, estimated_start);
    return changed_or_enoent(c, step_done(c, s));
}

/* The statement of a job listing variant: filters are ANDed; parameters ?1..?6 are the
 * states (unused ones bound to -1; ?1 alone for one state), ?7 user, ?8 account, ?9 model, ?10
 * dataset, ?11 the cursor's id, ?12 the limit. */
static sqlite3_stmt *job_list_stmt(sq_conn_t *c, unsigned v)
{
    if (c->jl[v])
        return c->jl[v];
    unsigned mode = v / JL_MODES;
    char sql[2048];
    size_t n = 0;
#define ADD(str) n += (size_t)snprintf(sql + n, sizeof sql - n, "%s", (str))
    if (mode == 1)
        ADD("SELECT COUNT(*) FROM jobs j WHERE 1 = 1");
    else
        ADD("SELECT " JOB_COLS JOB_FROM " WHERE 1 = 1");
    if (v & JL_STATE_EQ)
        ADD(" AND j.state = ?1");
    else if (v & JL_STATE)
        ADD(" AND j.state IN (?1, ?2, ?3, ?4, ?5, ?6)");
    if (v & JL_USER)
        ADD(" AND j.user_id = ?7");
    if (v & JL_ACCOUNT)
        ADD(" AND j.account = ?8");
    if (v & JL_MODEL)
        ADD(" AND j.model = ?9");
    if (v & JL_DATASET)
        ADD(" AND j.dataset = ?10");
    if (mode == 0) {
        if (v & JL_CURSOR)
            ADD((v & JL_DESC) ? " AND j.id < ?11" : " AND j.id > ?11");
        ADD((v & JL_DESC) ? " ORDER BY j.id DESC LIMIT ?12" : " ORDER BY j.id LIMIT ?12");
    } else if (mode == 2) {
        ADD(" ORDER BY j.id");
    }
#undef ADD
    return prep_sql(c, &c->jl[v], sql);
}

static unsigned job_filter_bits(const fg_store_job_filter_t *f)
{
    unsigned v = 0;
    uint32_t m = f->state_mask & 63u;
    if (m)
        v |= (m & (m - 1)) == 0 ? JL_STATE_EQ : JL_STATE;
    if (f->user_id)
        v |= JL_USER;
    if (f->account)
        v |= JL_ACCOUNT;
    if (f->model)
        v |= JL_MODEL;
    if (f->dataset)
        v |= JL_DATASET;
    return v;
}

static void bind_job_filter(sqlite3_stmt *s, const fg_store_job_filter_t *f)
{
    int k = 1;
    for (int st = 0; st < 6; st++)
        if (f->state_mask & (1u << st))
            sqlite3_bind_int(s, k++, st);
    while (k <= 6)
        sqlite3_bind_int(s, k++, -1);
    if (f->user_id)
        sqlite3_bind_int64(s, 7, f->user_id);
    if (f->account)
        bind_str(s, 8, f->account);
    if (f->model)
        bind_str(s, 9, f->model);
    if (f->dataset)
        bind_str(s, 10, f->dataset);
}

static void clear_job(void *p)
{
    fg_store_job_clear(p);
}
static int64_t id_job(const void *p)
{
    return ((const fg_store_job_t *)p)->id;
}

static int sq_job_list(fg_store_tx_t *tx, const fg_store_job_filter_t *f, const char *cursor,
                       int limit, fg_store_job_list_t *out)
{
    sq_conn_t *c = CONN(tx);
    int64_t last = 0;
    unsigned v = job_filter_bits(f);
    if (f->newest_first)
        v |= JL_DESC;
    if (cursor) {
        if (fg_store_cursor_decode(cursor, &last) != FG_STORE_OK)
            return FG_STORE_EINVAL;
        v |= JL_CURSOR;
    }
    sqlite3_stmt *s = job_list_stmt(c, v);
    if (!s)
        return FG_STORE_EIO;
    bind_job_filter(s, f);
    if (cursor)
        sqlite3_bind_int64(s, 11, last);
    sqlite3_bind_int(s, 12, limit + 1);
    void *items = NULL;
    int r = page(c, s, fill_job, sizeof(fg_store_job_t), limit, &items, &out->n, &out->next_cursor,
                 clear_job, id_job);
    out->items = items;
    if (r != FG_STORE_OK)
        fg_store_job_list_free(out);
    return r;
}

static int sq_job_count(fg_store_tx_t *tx, const fg_store_job_filter_t *f, int64_t *n)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = job_list_stmt(c, job_filter_bits(f) + JL_MODES);
    if (!s)
        return FG_STORE_EIO;
    bind_job_filter(s, f);
    return scalar_i64(c, s, n);
}

static int sq_job_foreach(fg_store_tx_t *tx, const fg_store_job_filter_t *f,
                          int (*fn)(const fg_store_job_t *j, void *arg), void *arg)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = job_list_stmt(c, job_filter_bits(f) + 2 * JL_MODES);
    if (!s)
        return FG_STORE_EIO;
    bind_job_filter(s, f);
    for (;;) {
        int r = step_row(c, s);
        if (r <= 0) {
            if (r == 0)
                done(s);
            return r;
        }
        fg_store_job_t j = {0};
        fill_job(s, &j);
        int u = fn(&j, arg);
        fg_store_job_clear(&j);
        if (u != 0) {
            done(s);
            return u;
        }
    }
}

static int sq_job_max_id(fg_store_tx_t *tx, int64_t *id)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_JOB_MAX_ID);
    return s ? scalar_i64(c, s, id) : FG_STORE_EIO;
}

/* ------------------------------------------------------------------ attempts */

static void fill_attempt(sqlite3_stmt *s, void *rec)
{
    fg_store_attempt_t *a = rec;
    a->job_id = sqlite3_column_int64(s, 0);
    a->attempt = sqlite3_column_int(s, 1);
    a->nodes_json = col_str(s, 2);
    a->gpu_uuids_json = col_str(s, 3);
    a->start_time_ms = sqlite3_column_int64(s, 4);
    a->end_time_ms = sqlite3_column_int64(s, 5);
    a->end_cause = sqlite3_column_int(s, 6);
    a->has_exit_code = sqlite3_column_type(s, 7) != SQLITE_NULL;
    a->exit_code = sqlite3_column_int(s, 7);
    a->signal = sqlite3_column_int(s, 8);
}

static void bind_attempt(sqlite3_stmt *s, const fg_store_attempt_t *a)
{
    sqlite3_bind_int64(s, 1, a->job_id);
    sqlite3_bind_int(s, 2, a->attempt);
    bind_str(s, 3, a->nodes_json);
    bind_str(s, 4, a->gpu_uuids_json);
    sqlite3_bind_int64(s, 5, a->start_time_ms);
    sqlite3_bind_int64(s, 6, a->end_time_ms);
    sqlite3_bind_int(s, 7, a->end_cause);
    if (a->has_exit_code)
        sqlite3_bind_int(s, 8, a->exit_code);
    else
        sqlite3_bind_null(s, 8);
    sqlite3_bind_int(s, 9, a->signal);
}

static int sq_attempt_insert(fg_store_tx_t *tx, const fg_store_attempt_t *a)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_ATTEMPT_INSERT);
    if (!s)
        return FG_STORE_EIO;
    bind_attempt(s, a);
    return step_done(c, s);
}

static int sq_attempt_update(fg_store_tx_t *tx, const fg_store_attempt_t *a)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_ATTEMPT_UPDATE);
    if (!s)
        return FG_STORE_EIO;
    bind_attempt(s, a);
    return changed_or_enoent(c, step_done(c, s));
}

static int sq_attempt_get(fg_store_tx_t *tx, int64_t job_id, int32_t attempt,
                          fg_store_attempt_t *out)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_ATTEMPT_GET);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, job_id);
    sqlite3_bind_int(s, 2, attempt);
    return fetch_one(c, s, fill_attempt, out);
}

static int attempt_list(sq_conn_t *c, sqlite3_stmt *s, fg_store_attempt_list_t *out)
{
    void *items = NULL;
    int r = fetch_all(c, s, fill_attempt, sizeof(fg_store_attempt_t), &items, &out->n, 0);
    out->items = items;
    if (r != FG_STORE_OK)
        fg_store_attempt_list_free(out);
    return r;
}

static int sq_attempt_list(fg_store_tx_t *tx, int64_t job_id, fg_store_attempt_list_t *out)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_ATTEMPT_LIST);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, job_id);
    return attempt_list(c, s, out);
}

static int sq_attempt_list_open(fg_store_tx_t *tx, fg_store_attempt_list_t *out)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_ATTEMPT_LIST_OPEN);
    return s ? attempt_list(c, s, out) : FG_STORE_EIO;
}

/* ------------------------------------------------------------------ events */

static void fill_event(sqlite3_stmt *s, void *rec)
{
    fg_store_event_t *e = rec;
    e->seq = sqlite3_column_int64(s, 0);
    e->time = sqlite3_column_int64(s, 1);
    e->kind = col_str(s, 2);
    e->job_id = sqlite3_column_int64(s, 3);
    e->node = col_str(s, 4);
    e->from_state = col_str(s, 5);
    e->to_state = col_str(s, 6);
    e->reason = col_str(s, 7);
    e->payload_json = col_str(s, 8);
}

static int sq_event_append(fg_store_tx_t *tx, const fg_store_event_t *e, int64_t *seq)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_EVENT_APPEND);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, e->time);
    bind_str(s, 2, e->kind);
    sqlite3_bind_int64(s, 3, e->job_id);
    bind_str(s, 4, e->node);
    bind_str(s, 5, e->from_state);
    bind_str(s, 6, e->to_state);
    bind_str(s, 7, e->reason);
    bind_str(s, 8, e->payload_json);
    int r = step_done(c, s);
    if (r == FG_STORE_OK && seq)
        *seq = sqlite3_last_insert_rowid(c->db);
    return r;
}

static int event_list(sq_conn_t *c, sqlite3_stmt *s, fg_store_event_list_t *out)
{
    void *items = NULL;
    int r = fetch_all(c, s, fill_event, sizeof(fg_store_event_t), &items, &out->n, 0);
    out->items = items;
    if (r != FG_STORE_OK)
        fg_store_event_list_free(out);
    return r;
}

static int sq_event_list_since(fg_store_tx_t *tx, int64_t since, int limit,
                               fg_store_event_list_t *out)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_EVENT_LIST_SINCE);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, since);
    sqlite3_bind_int(s, 2, limit);
    return event_list(c, s, out);
}

static int sq_event_list_job(fg_store_tx_t *tx, int64_t job_id, fg_store_event_list_t *out)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_EVENT_LIST_JOB);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, job_id);
    return event_list(c, s, out);
}

static int sq_event_max_seq(fg_store_tx_t *tx, int64_t *seq)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_EVENT_MAX_SEQ);
    return s ? scalar_i64(c, s, seq) : FG_STORE_EIO;
}

/* ------------------------------------------------------------------ nodes */

static void fill_node(sqlite3_stmt *s, void *rec)
{
    fg_store_node_t *n = rec;
    n->name = col_str(s, 0);
    n->state = col_str(s, 1);
    n->cpus = sqlite3_column_int(s, 2);
    n->memory_mb = sqlite3_column_int64(s, 3);
    n->gpus_json = col_str(s, 4);
    n->last_heartbeat = sqlite3_column_int64(s, 5);
    n->created_at = sqlite3_column_int64(s, 6);
}

static int sq_node_upsert(fg_store_tx_t *tx, const fg_store_node_t *n)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_NODE_UPSERT);
    if (!s)
        return FG_STORE_EIO;
    bind_str(s, 1, n->name);
    bind_str(s, 2, n->state);
    sqlite3_bind_int(s, 3, n->cpus);
    sqlite3_bind_int64(s, 4, n->memory_mb);
    bind_str(s, 5, n->gpus_json);
    sqlite3_bind_int64(s, 6, n->last_heartbeat);
    sqlite3_bind_int64(s, 7, n->created_at);
    return step_done(c, s);
}

static int sq_node_get(fg_store_tx_t *tx, const char *name, fg_store_node_t *out)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_NODE_GET);
    if (!s)
        return FG_STORE_EIO;
    bind_str(s, 1, name);
    return fetch_one(c, s, fill_node, out);
}

static int sq_node_set_state(fg_store_tx_t *tx, const char *name, const char *state)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_NODE_SET_STATE);
    if (!s)
        return FG_STORE_EIO;
    bind_str(s, 1, name);
    bind_str(s, 2, state);
    return changed_or_enoent(c, step_done(c, s));
}

static int sq_node_heartbeat(fg_store_tx_t *tx, const char *name, int64_t time)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_NODE_HEARTBEAT);
    if (!s)
        return FG_STORE_EIO;
    bind_str(s, 1, name);
    sqlite3_bind_int64(s, 2, time);
    return changed_or_enoent(c, step_done(c, s));
}

static int sq_node_delete(fg_store_tx_t *tx, const char *name)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_NODE_DELETE);
    if (!s)
        return FG_STORE_EIO;
    bind_str(s, 1, name);
    return changed_or_enoent(c, step_done(c, s));
}

static int sq_node_list(fg_store_tx_t *tx, fg_store_node_list_t *out)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_NODE_LIST);
    if (!s)
        return FG_STORE_EIO;
    void *items = NULL;
    int r = fetch_all(c, s, fill_node, sizeof(fg_store_node_t), &items, &out->n, 0);
    out->items = items;
    if (r != FG_STORE_OK)
        fg_store_node_list_free(out);
    return r;
}

/* ------------------------------------------------------------------ usage */

static void fill_usage(sqlite3_stmt *s, void *rec)
{
    fg_store_usage_t *u = rec;
    u->account = col_str(s, 0);
    u->user_id = sqlite3_column_int64(s, 1);
    u->gpu_s = sqlite3_column_double(s, 2);
    u->as_of = sqlite3_column_int64(s, 3);
}

static int sq_usage_set(fg_store_tx_t *tx, const fg_store_usage_t *u)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_USAGE_SET);
    if (!s)
        return FG_STORE_EIO;
    bind_str(s, 1, u->account);
    sqlite3_bind_int64(s, 2, u->user_id);
    sqlite3_bind_double(s, 3, u->gpu_s);
    sqlite3_bind_int64(s, 4, u->as_of);
    return step_done(c, s);
}

static int sq_usage_get(fg_store_tx_t *tx, const char *account, int64_t user_id,
                        fg_store_usage_t *out)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_USAGE_GET);
    if (!s)
        return FG_STORE_EIO;
    bind_str(s, 1, account);
    sqlite3_bind_int64(s, 2, user_id);
    return fetch_one(c, s, fill_usage, out);
}

static int sq_usage_list(fg_store_tx_t *tx, fg_store_usage_list_t *out)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_USAGE_LIST);
    if (!s)
        return FG_STORE_EIO;
    void *items = NULL;
    int r = fetch_all(c, s, fill_usage, sizeof(fg_store_usage_t), &items, &out->n, 0);
    out->items = items;
    if (r != FG_STORE_OK)
        fg_store_usage_list_free(out);
    return r;
}

/* ------------------------------------------------------------------ prices */

static void fill_price(sqlite3_stmt *s, void *rec)
{
    fg_store_price_t *p = rec;
    p->id = sqlite3_column_int64(s, 0);
    p->gpu_type = col_str(s, 1);
    p->priority = sqlite3_column_int(s, 2);
    p->micros_per_gpu_hour = sqlite3_column_int64(s, 3);
    p->currency = col_str(s, 4);
    p->effective_ms = sqlite3_column_int64(s, 5);
    p->created_at = sqlite3_column_int64(s, 6);
    p->admin_user_id = sqlite3_column_int64(s, 7);
}

static int sq_price_append(fg_store_tx_t *tx, const fg_store_price_t *p, int64_t *id)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_PRICE_APPEND);
    if (!s)
        return FG_STORE_EIO;
    bind_str(s, 1, p->gpu_type);
    sqlite3_bind_int(s, 2, p->priority);
    sqlite3_bind_int64(s, 3, p->micros_per_gpu_hour);
    bind_str(s, 4, p->currency);
    sqlite3_bind_int64(s, 5, p->effective_ms);
    sqlite3_bind_int64(s, 6, p->created_at);
    sqlite3_bind_int64(s, 7, p->admin_user_id);
    int r = step_done(c, s);
    if (r == FG_STORE_OK && id)
        *id = sqlite3_last_insert_rowid(c->db);
    return r;
}

static int sq_price_list(fg_store_tx_t *tx, fg_store_price_list_t *out)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_PRICE_LIST);
    if (!s)
        return FG_STORE_EIO;
    void *items = NULL;
    int r = fetch_all(c, s, fill_price, sizeof(fg_store_price_t), &items, &out->n, 0);
    out->items = items;
    if (r != FG_STORE_OK)
        fg_store_price_list_free(out);
    return r;
}

/* ------------------------------------------------------------------ ledger */

/* Copies text column i into a fixed array of cap bytes (truncating, always ended). */
static void col_copy(sqlite3_stmt *s, int i, char *dst, size_t cap)
{
    assert(cap > 0);
    const unsigned char *t = sqlite3_column_text(s, i);
    size_t n = t ? (size_t)sqlite3_column_bytes(s, i) : 0;
    if (n >= cap)
        n = cap - 1;
    if (n)
        memcpy(dst, t, n);
    dst[n] = '\0';
}

static void fill_ledger(sqlite3_stmt *s, fg_ledger_row_t *r)
{
    memset(r, 0, sizeof *r);
    r->id = (uint64_t)sqlite3_column_int64(s, 0);
    r->kind = (fg_row_kind_t)sqlite3_column_int(s, 1);
    r->interim = sqlite3_column_int(s, 2) != 0;
    r->job_id = sqlite3_column_int64(s, 3);
    r->attempt = sqlite3_column_int(s, 4);
    col_copy(s, 5, r->account, sizeof r->account);
    col_copy(s, 6, r->user, sizeof r->user);
    col_copy(s, 7, r->node, sizeof r->node);
    col_copy(s, 8, r->gpu_type, sizeof r->gpu_type);
    r->priority = (fg_prio_t)sqlite3_column_int(s, 9);
    r->origin_ms = sqlite3_column_int64(s, 10);
    r->start_ms = sqlite3_column_int64(s, 11);
    r->end_ms = sqlite3_column_int64(s, 12);
    r->gpus = sqlite3_column_int(s, 13);
    r->cause = (fg_end_cause_t)sqlite3_column_int(s, 14);
    r->rate = sqlite3_column_int64(s, 15);
    r->gpu_ms = sqlite3_column_int64(s, 16);
    r->amount_micros = sqlite3_column_int64(s, 17);
    r->refers_to = (uint64_t)sqlite3_column_int64(s, 18);
    r->refund_why = (fg_refund_why_t)sqlite3_column_int(s, 19);
    col_copy(s, 20, r->note, sizeof r->note);
}

/* Binds a fixed array that may lack its terminator (stops at cap bytes). */
static void bind_fixed(sqlite3_stmt *s, int i, const char *v, size_t cap)
{
    sqlite3_bind_text(s, i, v, (int)strnlen(v, cap), SQLITE_STATIC);
}

static int sq_ledger_append(fg_store_tx_t *tx, const fg_ledger_row_t *r)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_LEDGER_APPEND);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, (int64_t)r->id);
    sqlite3_bind_int(s, 2, (int)r->kind);
    sqlite3_bind_int(s, 3, r->interim ? 1 : 0);
    sqlite3_bind_int64(s, 4, r->job_id);
    sqlite3_bind_int(s, 5, r->attempt);
    bind_fixed(s, 6, r->account, sizeof r->account);
    bind_fixed(s, 7, r->user, sizeof r->user);
    bind_fixed(s, 8, r->node, sizeof r->node);
    bind_fixed(s, 9, r->gpu_type, sizeof r->gpu_type);
    sqlite3_bind_int(s, 10, (int)r->priority);
    sqlite3_bind_int64(s, 11, r->origin_ms);
    sqlite3_bind_int64(s, 12, r->start_ms);
    sqlite3_bind_int64(s, 13, r->end_ms);
    sqlite3_bind_int(s, 14, r->gpus);
    sqlite3_bind_int(s, 15, (int)r->cause);
    sqlite3_bind_int64(s, 16, r->rate);
    sqlite3_bind_int64(s, 17, r->gpu_ms);
    sqlite3_bind_int64(s, 18, r->amount_micros);
    sqlite3_bind_int64(s, 19, (int64_t)r->refers_to);
    sqlite3_bind_int(s, 20, (int)r->refund_why);
    bind_fixed(s, 21, r->note, sizeof r->note);
    return step_done(c, s);
}

static int sq_ledger_max_id(fg_store_tx_t *tx, uint64_t *id)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_LEDGER_MAX_ID);
    if (!s)
        return FG_STORE_EIO;
    int64_t v = 0;
    int r = scalar_i64(c, s, &v);
    if (r == FG_STORE_OK)
        *id = (uint64_t)v;
    return r;
}

static int sq_ledger_charged_to(fg_store_tx_t *tx, int64_t job_id, int32_t attempt, int64_t *end_ms)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = prep(c, S_LEDGER_CHARGED_TO);
    if (!s)
        return FG_STORE_EIO;
    sqlite3_bind_int64(s, 1, job_id);
    sqlite3_bind_int(s, 2, attempt);
    return scalar_i64(c, s, end_ms);
}

static unsigned ledger_filter_bits(const fg_store_ledger_filter_t *f)
{
    return (f->account ? LL_ACCOUNT : 0) | (f->user ? LL_USER : 0) |
           (f->gpu_type ? LL_GPU_TYPE : 0) | (f->job_id ? LL_JOB : 0) | (f->from_ms ? LL_FROM : 0) |
           (f->to_ms ? LL_TO : 0);
}

/* The scan of one filter variant, prepared on first use. Parameters are numbered by
 * field (?1 account .. ?6 to_ms) whichever are used. */
static sqlite3_stmt *ledger_scan_stmt(sq_conn_t *c, unsigned v)
{
    assert(v < LL_VARIANTS);
    if (c->ll[v])
        return c->ll[v];
    char sql[1024];
    size_t n = (size_t)snprintf(sql, sizeof sql, "SELECT " LEDGER_COLS " FROM ledger WHERE 1 = 1");
    static const char *const conds[] = {
        " AND account = ?1",
        " AND username = ?2",
        " AND gpu_type = ?3",
        " AND job_id = ?4",
        " AND (end_ms > ?5 OR start_ms >= ?5)",
        " AND start_ms < ?6",
    };
    for (unsigned b = 0; b < 6; b++)
        if (v & (1u << b))
            n += (size_t)snprintf(sql + n, sizeof sql - n, "%s", conds[b]);
    snprintf(sql + n, sizeof sql - n, " ORDER BY id");
    return prep_sql(c, &c->ll[v], sql);
}

static int sq_ledger_foreach(fg_store_tx_t *tx, const fg_store_ledger_filter_t *f,
                             int (*fn)(const fg_ledger_row_t *r, void *arg), void *arg)
{
    sq_conn_t *c = CONN(tx);
    sqlite3_stmt *s = ledger_scan_stmt(c, ledger_filter_bits(f));
    if (!s)
        return FG_STORE_EIO;
    if (f->account)
        bind_str(s, 1, f->account);
    if (f->user)
        bind_str(s, 2, f->user);
    if (f->gpu_type)
        bind_str(s, 3, f->gpu_type);
    if (f->job_id)
        sqlite3_bind_int64(s, 4, f->job_id);
    if (f->from_ms)
        sqlite3_bind_int64(s, 5, f->from_ms);
    if (f->to_ms)
        sqlite3_bind_int64(s, 6, f->to_ms);
    fg_ledger_row_t row;
    for (;;) {
        int r = step_row(c, s);
        if (r <= 0) {
            if (r == 0)
                done(s);
            return r;
        }
        fill_ledger(s, &row);
        int u = fn(&row, arg);
        if (u != 0) {
            done(s);
            return u;
        }
    }
}

/* ------------------------------------------------------------------ the table */

static const fg_store_ops_t sqlite_ops = {
    .name = "sqlite",
    .close = sq_close,
    .schema_version = sq_schema_version,
    .ping = sq_ping,
    .get_stats = sq_get_stats,
    .read_begin = sq_read_begin,
    .read_end = sq_read_end,
    .write = sq_write,
    .setting_get = sq_setting_get,
    .setting_set = sq_setting_set,
    .setting_delete = sq_setting_delete,
    .user_insert = sq_user_insert,
    .user_get = sq_user_get,
    .user_get_by_name = sq_user_get_by_name,
    .user_update = sq_user_update,
    .user_count = sq_user_count,
    .user_list = sq_user_list,
    .session_insert = sq_session_insert,
    .session_get = sq_session_get,
    .session_delete = sq_session_delete,
    .session_delete_expired = sq_session_delete_expired,
    .token_insert = sq_token_insert,
    .token_get_by_hash = sq_token_get_by_hash,
    .token_list = sq_token_list,
    .token_delete = sq_token_delete,
    .auth_lookup = sq_auth_lookup,
    .account_insert = sq_account_insert,
    .account_get = sq_account_get,
    .account_update = sq_account_update,
    .account_list = sq_account_list,
    .member_add = sq_member_add,
    .member_set_weight = sq_member_set_weight,
    .member_set_default = sq_member_set_default,
    .member_remove = sq_member_remove,
    .member_get = sq_member_get,
    .member_list_by_user = sq_member_list_by_user,
    .member_list_by_account = sq_member_list_by_account,
    .member_list_all = sq_member_list_all,
    .audit_append = sq_audit_append,
    .audit_list = sq_audit_list,
    .job_insert = sq_job_insert,
    .job_get = sq_job_get,
    .job_get_by_idem = sq_job_get_by_idem,
    .job_update = sq_job_update,
    .job_set_reason = sq_job_set_reason,
    .job_list = sq_job_list,
    .job_count = sq_job_count,
    .job_foreach = sq_job_foreach,
    .job_max_id = sq_job_max_id,
    .attempt_insert = sq_attempt_insert,
    .attempt_update = sq_attempt_update,
    .attempt_get = sq_attempt_get,
    .attempt_list = sq_attempt_list,
    .attempt_list_open = sq_attempt_list_open,
    .event_append = sq_event_append,
    .event_list_since = sq_event_list_since,
    .event_list_job = sq_event_list_job,
    .event_max_seq = sq_event_max_seq,
    .node_upsert = sq_node_upsert,
    .node_get = sq_node_get,
    .node_set_state = sq_node_set_state,
    .node_heartbeat = sq_node_heartbeat,
    .node_delete = sq_node_delete,
    .node_list = sq_node_list,
    .usage_set = sq_usage_set,
    .usage_get = sq_usage_get,
    .usage_list = sq_usage_list,
    .write_async = sq_write_async,
    .session_delete_user = sq_session_delete_user,
    .price_append = sq_price_append,
    .price_list = sq_price_list,
    .member_set_manager = sq_member_set_manager,
    .ledger_append = sq_ledger_append,
    .ledger_max_id = sq_ledger_max_id,
    .ledger_charged_to = sq_ledger_charged_to,
    .ledger_foreach = sq_ledger_foreach,
};
