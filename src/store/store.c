/*
 * store.c - the backend-independent half of the store: argument checks and dispatch
 * through the function table, the _clear/_list_free functions, opaque cursors and
 * error names. Backends (sqlite.c, later postgres.c) implement fg_store_ops_t.
 */
#include "store/store.h"

#include "fairgpu/billing.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

/* ------------------------------------------------------------------ errors */

const char *fg_store_strerror(int err)
{
    switch (err) {
    case FG_STORE_OK:
        return "ok";
    case FG_STORE_EINVAL:
        return "invalid argument";
    case FG_STORE_ENOENT:
        return "not found";
    case FG_STORE_EEXIST:
        return "already exists";
    case FG_STORE_EIO:
        return "database error";
    case FG_STORE_ECLOSED:
        return "store is closing";
    case FG_STORE_EREADONLY:
        return "write on a read-only transaction";
    case FG_STORE_EVERSION:
        return "database schema is newer than this program";
    default:
        return "unknown store error";
    }
}

/* ------------------------------------------------------------------ cursors */

char *fg_store_cursor_encode(int64_t last_id)
{
    char buf[24];
    snprintf(buf, sizeof buf, "c%016" PRIx64, (uint64_t)last_id);
    return fg_xstrdup(buf);
}

int fg_store_cursor_decode(const char *cursor, int64_t *last_id)
{
    if (!cursor || !last_id || strlen(cursor) != 17 || cursor[0] != 'c')
        return FG_STORE_EINVAL;
    uint64_t v = 0;
    for (int i = 1; i < 17; i++) {
        char ch = cursor[i];
        int d;
        if (ch >= '0' && ch <= '9')
            d = ch - '0';
        else if (ch >= 'a' && ch <= 'f')
            d = ch - 'a' + 10;
        else
            return FG_STORE_EINVAL;
        v = (v << 4) | (uint64_t)d;
    }
    if (v > (uint64_t)INT64_MAX)
        return FG_STORE_EINVAL;
    *last_id = (int64_t)v;
    return FG_STORE_OK;
}

/* ------------------------------------------------------------------ handles */

int fg_store_open(const char *uri, const fg_store_opts_t *opts, fg_store_t **out, char **errmsg)
{
    if (errmsg)
        *errmsg = NULL;
    if (out)
        *out = NULL;
    if (!uri || !out)
        return FG_STORE_EINVAL;
    if (strncmp(uri, "postgres://", 11) == 0 || strncmp(uri, "postgresql://", 13) == 0) {
        if (errmsg)
            *errmsg = fg_xstrdup("store: the PostgreSQL backend is not built into this fairgpu");
        return FG_STORE_EINVAL;
    }
    if (strncmp(uri, "sqlite:", 7) == 0)
        uri += 7;
    return fg_store_open_sqlite(uri, opts, out, errmsg);
}

void fg_store_close(fg_store_t *st)
{
    if (st)
        st->ops->close(st);
}

const char *fg_store_backend(const fg_store_t *st)
{
    return st ? st->ops->name : "none";
}

int fg_store_schema_version(fg_store_t *st)
{
    return st ? st->ops->schema_version(st) : FG_STORE_EINVAL;
}

int fg_store_ping(fg_store_t *st)
{
    return st ? st->ops->ping(st) : FG_STORE_EINVAL;
}

void fg_store_get_stats(fg_store_t *st, fg_store_stats_t *out)
{
    memset(out, 0, sizeof *out);
    if (st)
        st->ops->get_stats(st, out);
}

int fg_store_read_begin(fg_store_t *st, fg_store_tx_t **tx)
{
    if (!st || !tx)
        return FG_STORE_EINVAL;
    *tx = NULL;
    return st->ops->read_begin(st, tx);
}

void fg_store_read_end(fg_store_tx_t *tx)
{
    if (tx)
        tx->store->ops->read_end(tx);
}

int fg_store_write(fg_store_t *st, fg_store_write_fn fn, void *arg)
{
    if (!st || !fn)
        return FG_STORE_EINVAL;
    return st->ops->write(st, fn, arg);
}

int fg_store_write_async(fg_store_t *st, fg_store_write_fn fn, void *arg, fg_store_done_fn done,
                         void *done_arg)
{
    if (!st || !fn || !done)
        return FG_STORE_EINVAL;
    return st->ops->write_async(st, fn, arg, done, done_arg);
}

/* ------------------------------------------------------------------ dispatch */

#define OPS(tx) ((tx)->store->ops)
#define RD(tx)                                                                                     \
    do {                                                                                           \
        if (!(tx))                                                                                 \
            return FG_STORE_EINVAL;                                                                \
    } while (0)
#define WR(tx)                                                                                     \
    do {                                                                                           \
        if (!(tx))                                                                                 \
            return FG_STORE_EINVAL;                                                                \
        if (!(tx)->writable)                                                                       \
            return FG_STORE_EREADONLY;                                                             \
    } while (0)
#define NEED(x)                                                                                    \
    do {                                                                                           \
        if (!(x))                                                                                  \
            return FG_STORE_EINVAL;                                                                \
    } while (0)
#define ZERO(p) memset((p), 0, sizeof *(p))

static int clamp_limit(int limit, int max)
{
    if (limit <= 0)
        return 100;
    return limit > max ? max : limit;
}

int fg_store_setting_get(fg_store_tx_t *tx, const char *key, char **value)
{
    RD(tx);
    NEED(key && value);
    *value = NULL;
    return OPS(tx)->setting_get(tx, key, value);
}

int fg_store_setting_set(fg_store_tx_t *tx, const char *key, const char *value)
{
    WR(tx);
    NEED(key && value);
    return OPS(tx)->setting_set(tx, key, value);
}

int fg_store_setting_delete(fg_store_tx_t *tx, const char *key)
{
    WR(tx);
    NEED(key);
    return OPS(tx)->setting_delete(tx, key);
}

int fg_store_user_insert(fg_store_tx_t *tx, const fg_store_user_t *u, int64_t *id)
{
    WR(tx);
    NEED(u && u->username && u->email && u->password_hash);
    return OPS(tx)->user_insert(tx, u, id);
}

int fg_store_user_get(fg_store_tx_t *tx, int64_t id, fg_store_user_t *out)
{
    RD(tx);
    NEED(out);
    ZERO(out);
    return OPS(tx)->user_get(tx, id, out);
}

int fg_store_user_get_by_name(fg_store_tx_t *tx, const char *username, fg_store_user_t *out)
{
    RD(tx);
    NEED(username && out);
    ZERO(out);
    return OPS(tx)->user_get_by_name(tx, username, out);
}

int fg_store_user_update(fg_store_tx_t *tx, const fg_store_user_t *u)
{
    WR(tx);
    NEED(u && u->email && u->password_hash);
    return OPS(tx)->user_update(tx, u);
}

int fg_store_user_count(fg_store_tx_t *tx, int64_t *n)
{
    RD(tx);
    NEED(n);
    return OPS(tx)->user_count(tx, n);
}

int fg_store_user_list(fg_store_tx_t *tx, const char *cursor, int limit, fg_store_user_list_t *out)
{
    RD(tx);
    NEED(out);
    ZERO(out);
    return OPS(tx)->user_list(tx, cursor, clamp_limit(limit, 1000), out);
}

int fg_store_session_insert(fg_store_tx_t *tx, const fg_store_session_t *s)
{
    WR(tx);
    NEED(s && s->token_hash);
    return OPS(tx)->session_insert(tx, s);
}

int fg_store_session_get(fg_store_tx_t *tx, const char *token_hash, fg_store_session_t *out)
{
    RD(tx);
    NEED(token_hash && out);
    ZERO(out);
    return OPS(tx)->session_get(tx, token_hash, out);
}

int fg_store_session_delete(fg_store_tx_t *tx, const char *token_hash)
{
    WR(tx);
    NEED(token_hash);
    return OPS(tx)->session_delete(tx, token_hash);
}

int fg_store_session_delete_user(fg_store_tx_t *tx, int64_t user_id, int64_t *n)
{
    WR(tx);
    return OPS(tx)->session_delete_user(tx, user_id, n);
}

int fg_store_session_delete_expired(fg_store_tx_t *tx, int64_t now, int64_t *n)
{
    WR(tx);
    return OPS(tx)->session_delete_expired(tx, now, n);
}

int fg_store_token_insert(fg_store_tx_t *tx, const fg_store_token_t *t, int64_t *id)
{
    WR(tx);
    NEED(t && t->name && t->token_hash);
    return OPS(tx)->token_insert(tx, t, id);
}

int fg_store_token_get_by_hash(fg_store_tx_t *tx, const char *token_hash, fg_store_token_t *out)
{
    RD(tx);
    NEED(token_hash && out);
    ZERO(out);
    return OPS(tx)->token_get_by_hash(tx, token_hash, out);
}

int fg_store_token_list(fg_store_tx_t *tx, int64_t user_id, fg_store_token_list_t *out)
{
    RD(tx);
    NEED(out);
    ZERO(out);
    return OPS(tx)->token_list(tx, user_id, out);
}

int fg_store_token_delete(fg_store_tx_t *tx, int64_t id, int64_t user_id)
{
    WR(tx);
    return OPS(tx)->token_delete(tx, id, user_id);
}

int fg_store_auth_lookup(fg_store_tx_t *tx, const char *token_hash, int64_t now,
                         fg_store_user_t *user, int *kind, int64_t *cred_id)
{
    RD(tx);
    NEED(token_hash && user);
    ZERO(user);
    return OPS(tx)->auth_lookup(tx, token_hash, now, user, kind, cred_id);
}

int fg_store_account_insert(fg_store_tx_t *tx, const fg_store_account_t *a)
{
    WR(tx);
    NEED(a && a->name);
    return OPS(tx)->account_insert(tx, a);
}

int fg_store_account_get(fg_store_tx_t *tx, const char *name, fg_store_account_t *out)
{
    RD(tx);
    NEED(name && out);
    ZERO(out);
    return OPS(tx)->account_get(tx, name, out);
}

int fg_store_account_update(fg_store_tx_t *tx, const fg_store_account_t *a)
{
    WR(tx);
    NEED(a && a->name);
    return OPS(tx)->account_update(tx, a);
}

int fg_store_account_list(fg_store_tx_t *tx, fg_store_account_list_t *out)
{
    RD(tx);
    NEED(out);
    ZERO(out);
    return OPS(tx)->account_list(tx, out);
}

int fg_store_member_add(fg_store_tx_t *tx, const fg_store_member_t *m)
{
    WR(tx);
    NEED(m && m->account);
    return OPS(tx)->member_add(tx, m);
}

int fg_store_member_set_weight(fg_store_tx_t *tx, int64_t user_id, const char *account,
                               double weight)
{
    WR(tx);
    NEED(account);
    return OPS(tx)->member_set_weight(tx, user_id, account, weight);
}

int fg_store_member_set_default(fg_store_tx_t *tx, int64_t user_id, const char *account)
{
    WR(tx);
    NEED(account);
    return OPS(tx)->member_set_default(tx, user_id, account);
}

int fg_store_member_remove(fg_store_tx_t *tx, int64_t user_id, const char *account)
{
    WR(tx);
    NEED(account);
    return OPS(tx)->member_remove(tx, user_id, account);
}

int fg_store_member_get(fg_store_tx_t *tx, int64_t user_id, const char *account,
                        fg_store_member_t *out)
{
    RD(tx);
    NEED(account && out);
    ZERO(out);
    return OPS(tx)->member_get(tx, user_id, account, out);
}

int fg_store_member_list_by_user(fg_store_tx_t *tx, int64_t user_id, fg_store_member_list_t *out)
{
    RD(tx);
    NEED(out);
    ZERO(out);
    return OPS(tx)->member_list_by_user(tx, user_id, out);
}

int fg_store_member_list_by_account(fg_store_tx_t *tx, const char *account,
                                    fg_store_member_list_t *out)
{
    RD(tx);
    NEED(account && out);
    ZERO(out);
    return OPS(tx)->member_list_by_account(tx, account, out);
}

int fg_store_member_list_all(fg_store_tx_t *tx, fg_store_member_list_t *out)
{
    RD(tx);
    NEED(out);
    ZERO(out);
    return OPS(tx)->member_list_all(tx, out);
}

int fg_store_audit_append(fg_store_tx_t *tx, const fg_store_audit_t *a, int64_t *id)
{
    WR(tx);
    NEED(a && a->action);
    return OPS(tx)->audit_append(tx, a, id);
}

int fg_store_audit_list(fg_store_tx_t *tx, const char *cursor, int limit,
                        fg_store_audit_list_t *out)
{
    RD(tx);
    NEED(out);
    ZERO(out);
    return OPS(tx)->audit_list(tx, cursor, clamp_limit(limit, 1000), out);
}

int fg_store_job_insert(fg_store_tx_t *tx, const fg_store_job_t *j, int64_t *id)
{
    WR(tx);
    NEED(j && j->account && j->command_json);
    return OPS(tx)->job_insert(tx, j, id);
}

int fg_store_job_get(fg_store_tx_t *tx, int64_t id, fg_store_job_t *out)
{
    RD(tx);
    NEED(out);
    ZERO(out);
    return OPS(tx)->job_get(tx, id, out);
}

int fg_store_job_get_by_idem(fg_store_tx_t *tx, int64_t user_id, const char *key,
                             fg_store_job_t *out)
{
    RD(tx);
    NEED(key && out);
    ZERO(out);
    return OPS(tx)->job_get_by_idem(tx, user_id, key, out);
}

int fg_store_job_update(fg_store_tx_t *tx, const fg_store_job_t *j)
{
    WR(tx);
    NEED(j);
    return OPS(tx)->job_update(tx, j);
}

int fg_store_job_set_reason(fg_store_tx_t *tx, int64_t id, int32_t reason_code, const char *reason,
                            int64_t estimated_start)
{
    WR(tx);
    return OPS(tx)->job_set_reason(tx, id, reason_code, reason, estimated_start);
}

static const fg_store_job_filter_t no_filter;

int fg_store_job_list(fg_store_tx_t *tx, const fg_store_job_filter_t *f, const char *cursor,
                      int limit, fg_store_job_list_t *out)
{
    RD(tx);
    NEED(out);
    ZERO(out);
    return OPS(tx)->job_list(tx, f ? f : &no_filter, cursor, clamp_limit(limit, 1000), out);
}

int fg_store_job_count(fg_store_tx_t *tx, const fg_store_job_filter_t *f, int64_t *n)
{
    RD(tx);
    NEED(n);
    return OPS(tx)->job_count(tx, f ? f : &no_filter, n);
}

int fg_store_job_foreach(fg_store_tx_t *tx, const fg_store_job_filter_t *f,
                         int (*fn)(const fg_store_job_t *j, void *arg), void *arg)
{
    RD(tx);
    NEED(fn);
    return OPS(tx)->job_foreach(tx, f ? f : &no_filter, fn, arg);
}

int fg_store_job_max_id(fg_store_tx_t *tx, int64_t *id)
{
    RD(tx);
    NEED(id);
    return OPS(tx)->job_max_id(tx, id);
}

int fg_store_attempt_insert(fg_store_tx_t *tx, const fg_store_attempt_t *a)
{
    WR(tx);
    NEED(a);
    return OPS(tx)->attempt_insert(tx, a);
}

int fg_store_attempt_update(fg_store_tx_t *tx, const fg_store_attempt_t *a)
{
    WR(tx);
    NEED(a);
    return OPS(tx)->attempt_update(tx, a);
}

int fg_store_attempt_get(fg_store_tx_t *tx, int64_t job_id, int32_t attempt,
                         fg_store_attempt_t *out)
{
    RD(tx);
    NEED(out);
    ZERO(out);
    return OPS(tx)->attempt_get(tx, job_id, attempt, out);
}

int fg_store_attempt_list(fg_store_tx_t *tx, int64_t job_id, fg_store_attempt_list_t *out)
{
    RD(tx);
    NEED(out);
    ZERO(out);
    return OPS(tx)->attempt_list(tx, job_id, out);
}

int fg_store_attempt_list_open(fg_store_tx_t *tx, fg_store_attempt_list_t *out)
{
    RD(tx);
    NEED(out);
    ZERO(out);
    return OPS(tx)->attempt_list_open(tx, out);
}

int fg_store_event_append(fg_store_tx_t *tx, const fg_store_event_t *e, int64_t *seq)
{
    WR(tx);
    NEED(e && e->kind && e->to_state);
    return OPS(tx)->event_append(tx, e, seq);
}

int fg_store_event_list_since(fg_store_tx_t *tx, int64_t since, int limit,
                              fg_store_event_list_t *out)
{
    RD(tx);
    NEED(out);
    ZERO(out);
    return OPS(tx)->event_list_since(tx, since, clamp_limit(limit, 10000), out);
}

int fg_store_event_list_job(fg_store_tx_t *tx, int64_t job_id, fg_store_event_list_t *out)
{
    RD(tx);
    NEED(out);
    ZERO(out);
    return OPS(tx)->event_list_job(tx, job_id, out);
}

int fg_store_event_max_seq(fg_store_tx_t *tx, int64_t *seq)
{
    RD(tx);
    NEED(seq);
    return OPS(tx)->event_max_seq(tx, seq);
}

int fg_store_node_upsert(fg_store_tx_t *tx, const fg_store_node_t *n)
{
    WR(tx);
    NEED(n && n->name && n->state);
    return OPS(tx)->node_upsert(tx, n);
}

int fg_store_node_get(fg_store_tx_t *tx, const char *name, fg_store_node_t *out)
{
    RD(tx);
    NEED(name && out);
    ZERO(out);
    return OPS(tx)->node_get(tx, name, out);
}

int fg_store_node_set_state(fg_store_tx_t *tx, const char *name, const char *state)
{
    WR(tx);
    NEED(name && state);
    return OPS(tx)->node_set_state(tx, name, state);
}

int fg_store_node_heartbeat(fg_store_tx_t *tx, const char *name, int64_t time)
{
    WR(tx);
    NEED(name);
    return OPS(tx)->node_heartbeat(tx, name, time);
}

int fg_store_node_delete(fg_store_tx_t *tx, const char *name)
{
    WR(tx);
    NEED(name);
    return OPS(tx)->node_delete(tx, name);
}

int fg_store_node_list(fg_store_tx_t *tx, fg_store_node_list_t *out)
{
    RD(tx);
    NEED(out);
    ZERO(out);
    return OPS(tx)->node_list(tx, out);
}

int fg_store_usage_set(fg_store_tx_t *tx, const fg_store_usage_t *u)
{
    WR(tx);
    NEED(u && u->account);
    return OPS(tx)->usage_set(tx, u);
}

int fg_store_usage_get(fg_store_tx_t *tx, const char *account, int64_t user_id,
                       fg_store_usage_t *out)
{
    RD(tx);
    NEED(account && out);
    ZERO(out);
    return OPS(tx)->usage_get(tx, account, user_id, out);
}

int fg_store_usage_list(fg_store_tx_t *tx, fg_store_usage_list_t *out)
{
    RD(tx);
    NEED(out);
    ZERO(out);
    return OPS(tx)->usage_list(tx, out);
}

int fg_store_price_append(fg_store_tx_t *tx, const fg_store_price_t *p, int64_t *id)
{
    WR(tx);
    NEED(p && p->gpu_type && p->currency && p->micros_per_gpu_hour >= 0);
    return OPS(tx)->price_append(tx, p, id);
}

int fg_store_price_list(fg_store_tx_t *tx, fg_store_price_list_t *out)
{
    RD(tx);
    NEED(out);
    ZERO(out);
    return OPS(tx)->price_list(tx, out);
}

int fg_store_member_set_manager(fg_store_tx_t *tx, int64_t user_id, const char *account,
                                bool is_manager)
{
    WR(tx);
    NEED(account);
    return OPS(tx)->member_set_manager(tx, user_id, account, is_manager);
}

int fg_store_ledger_append(fg_store_tx_t *tx, const struct fg_ledger_row *r)
{
    WR(tx);
    NEED(r && r->id > 0);
    return OPS(tx)->ledger_append(tx, r);
}

int fg_store_ledger_max_id(fg_store_tx_t *tx, uint64_t *id)
{
    RD(tx);
    NEED(id);
    return OPS(tx)->ledger_max_id(tx, id);
}

int fg_store_ledger_charged_to(fg_store_tx_t *tx, int64_t job_id, int32_t attempt, int64_t *end_ms)
{
    RD(tx);
    NEED(end_ms);
    return OPS(tx)->ledger_charged_to(tx, job_id, attempt, end_ms);
}

int fg_store_ledger_foreach(fg_store_tx_t *tx, const fg_store_ledger_filter_t *f,
                            int (*fn)(const struct fg_ledger_row *r, void *arg), void *arg)
{
    RD(tx);
    NEED(fn);
    static const fg_store_ledger_filter_t any;
    return OPS(tx)->ledger_foreach(tx, f ? f : &any, fn, arg);
}

/* ------------------------------------------------------------------ freeing */

#define LIST_FREE(fname, ltype, clearfn)                                                           \
    void fname(ltype *l)                                                                           \
    {                                                                                              \
        if (!l)                                                                                    \
            return;                                                                                \
        for (size_t i = 0; i < l->n; i++)                                                          \
            clearfn(&l->items[i]);                                                                 \
        free(l->items);                                                                            \
        ZERO(l);                                                                                   \
    }
#define LIST_FREE_CURSOR(fname, ltype, clearfn)                                                    \
    void fname(ltype *l)                                                                           \
    {                                                                                              \
        if (!l)                                                                                    \
            return;                                                                                \
        for (size_t i = 0; i < l->n; i++)                                                          \
            clearfn(&l->items[i]);                                                                 \
        free(l->items);                                                                            \
        free(l->next_cursor);                                                                      \
        ZERO(l);                                                                                   \
    }

void fg_store_user_clear(fg_store_user_t *u)
{
    if (!u)
        return;
    free(u->username);
    free(u->email);
    free(u->display_name);
    free(u->password_hash);
    free(u->default_account);
    ZERO(u);
}
LIST_FREE_CURSOR(fg_store_user_list_free, fg_store_user_list_t, fg_store_user_clear)

void fg_store_session_clear(fg_store_session_t *s)
{
    if (!s)
        return;
    free(s->token_hash);
    ZERO(s);
}

void fg_store_token_clear(fg_store_token_t *t)
{
    if (!t)
        return;
    free(t->name);
    free(t->token_hash);
    ZERO(t);
}
LIST_FREE(fg_store_token_list_free, fg_store_token_list_t, fg_store_token_clear)

void fg_store_account_clear(fg_store_account_t *a)
{
    if (!a)
        return;
    free(a->name);
    ZERO(a);
}
LIST_FREE(fg_store_account_list_free, fg_store_account_list_t, fg_store_account_clear)

void fg_store_member_clear(fg_store_member_t *m)
{
    if (!m)
        return;
    free(m->account);
    free(m->username);
    ZERO(m);
}
LIST_FREE(fg_store_member_list_free, fg_store_member_list_t, fg_store_member_clear)

void fg_store_audit_clear(fg_store_audit_t *a)
{
    if (!a)
        return;
    free(a->action);
    free(a->target);
    free(a->details_json);
    ZERO(a);
}
LIST_FREE_CURSOR(fg_store_audit_list_free, fg_store_audit_list_t, fg_store_audit_clear)

void fg_store_job_clear(fg_store_job_t *j)
{
    if (!j)
        return;
    free(j->name);
    free(j->username);
    free(j->account);
    free(j->command_json);
    free(j->env_json);
    free(j->gpu_type);
    free(j->model);
    free(j->dataset);
    free(j->reason);
    free(j->idem_key);
    free(j->nodes_json);
    free(j->gpu_indices_json);
    ZERO(j);
}
LIST_FREE_CURSOR(fg_store_job_list_free, fg_store_job_list_t, fg_store_job_clear)

void fg_store_attempt_clear(fg_store_attempt_t *a)
{
    if (!a)
        return;
    free(a->nodes_json);
    free(a->gpu_uuids_json);
    ZERO(a);
}
LIST_FREE(fg_store_attempt_list_free, fg_store_attempt_list_t, fg_store_attempt_clear)

void fg_store_event_clear(fg_store_event_t *e)
{
    if (!e)
        return;
    free(e->kind);
    free(e->node);
    free(e->from_state);
    free(e->to_state);
    free(e->reason);
    free(e->payload_json);
    ZERO(e);
}
LIST_FREE(fg_store_event_list_free, fg_store_event_list_t, fg_store_event_clear)

void fg_store_node_clear(fg_store_node_t *n)
{
    if (!n)
        return;
    free(n->name);
    free(n->state);
    free(n->gpus_json);
    ZERO(n);
}
LIST_FREE(fg_store_node_list_free, fg_store_node_list_t, fg_store_node_clear)

void fg_store_usage_clear(fg_store_usage_t *u)
{
    if (!u)
        return;
    free(u->account);
    ZERO(u);
}
LIST_FREE(fg_store_usage_list_free, fg_store_usage_list_t, fg_store_usage_clear)

void fg_store_price_clear(fg_store_price_t *p)
{
    if (!p)
        return;
    free(p->gpu_type);
    free(p->currency);
    ZERO(p);
}
LIST_FREE(fg_store_price_list_free, fg_store_price_list_t, fg_store_price_clear)
