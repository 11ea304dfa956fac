/*
 * persist.c - the controller's adapter over the store (src/store/store.h).
 *
 * Every change is a batch of store operations run as ONE write unit: the store puts
 * concurrent units into one group commit and fg_store_write returns once it is
 * fsync'd. A unit that fails rolls back alone, so a rejected request changes nothing.
 * At start, srv_persist_load() rebuilds the in-memory model from the store.
 */
#include "server/server.h"

#include "common/log.h"
#include "common/xalloc.h"

#include "fairgpu/billing.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *srv_strdup0(const char *p)
{
    return p ? fg_xstrdup(p) : NULL;
}

/* ------------------------------------------------------------------ batches */

srv_op_t *srv_batch_add(srv_batch_t *b, int kind, const void *rec)
{
    if (!b->cap) { /* most batches hold a few ops: start small (fg_xgrow starts at 16) */
        b->cap = 4;
        b->ops = fg_xmalloc(b->cap * sizeof *b->ops);
    }
    b->ops = fg_xgrow(b->ops, &b->cap, b->n + 1, sizeof *b->ops);
    srv_op_t *o = &b->ops[b->n++];
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->rec = rec;
    return o;
}

void srv_batch_free(srv_batch_t *b)
{
    free(b->ops);
    memset(b, 0, sizeof *b);
}

/* Reads user c->id inside the unit and stores it with c's fields changed. */
static int user_modify(fg_store_tx_t *tx, const srv_user_change_t *c)
{
    fg_store_user_t u = {0};
    int rc = fg_store_user_get(tx, c->id, &u);
    if (rc)
        return rc;
    fg_store_user_t nu = u;
    if (c->email)
        nu.email = (char *)c->email;
    if (c->display_name)
        nu.display_name = (char *)c->display_name;
    if (c->password_hash)
        nu.password_hash = (char *)c->password_hash;
    if (c->role >= 0)
        nu.role = c->role;
    if (c->disabled >= 0)
        nu.disabled = c->disabled != 0;
    rc = fg_store_user_update(tx, &nu);
    fg_store_user_clear(&u);
    return rc;
}

/* Deletes every API token of user uid; *n gets how many. */
static int tokens_delete_user(fg_store_tx_t *tx, int64_t uid, int64_t *n)
{
    fg_store_token_list_t l = {0};
    int rc = fg_store_token_list(tx, uid, &l);
    *n = 0;
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        rc = fg_store_token_delete(tx, l.items[i].id, uid);
        if (rc == 0)
            (*n)++;
    }
    fg_store_token_list_free(&l);
    return rc;
}

/* Burns the setup token whose hash (hex) is hex if it is the live one; ENOENT if not
 * (none is live, or another one is). Decided inside the unit: of two racing claims
 * only one finds it. */
static int setup_claim(fg_store_tx_t *tx, const char *hex)
{
    char *v = NULL;
    int rc = fg_store_setting_get(tx, SRV_SETUP_SETTING, &v);
    if (rc == 0 &&
        !(v && *v && strlen(v) == strlen(hex) && sodium_memcmp(v, hex, strlen(hex)) == 0))
        rc = FG_STORE_ENOENT;
    free(v);
    if (rc)
        return rc;
    return fg_store_setting_delete(tx, SRV_SETUP_SETTING);
}

static int run_op(fg_store_tx_t *tx, srv_op_t *o, int64_t last_job)
{
    switch (o->kind) {
    case OP_USER_INSERT:
        return fg_store_user_insert(tx, o->rec, &o->out);
    case OP_USER_UPDATE:
        return fg_store_user_update(tx, o->rec);
    case OP_MEMBER_ADD: {
        fg_store_member_t m = *(const fg_store_member_t *)o->rec;
        if (m.user_id < 0)
            m.user_id = o->i1; /* patched by the caller after a user insert */
        return fg_store_member_add(tx, &m);
    }
    case OP_MEMBER_REMOVE:
        return fg_store_member_remove(tx, o->i1, o->s1);
    case OP_MEMBER_WEIGHT:
        return fg_store_member_set_weight(tx, o->i1, o->s1, o->d1);
    case OP_MEMBER_DEFAULT:
        return fg_store_member_set_default(tx, o->i1, o->s1);
    case OP_SESSION_INSERT:
        return fg_store_session_insert(tx, o->rec);
    case OP_SESSION_DELETE:
        return fg_store_session_delete(tx, o->s1);
    case OP_TOKEN_INSERT:
        return fg_store_token_insert(tx, o->rec, &o->out);
    case OP_TOKEN_DELETE:
        return fg_store_token_delete(tx, o->i1, 0);
    case OP_ACCOUNT_INSERT:
        return fg_store_account_insert(tx, o->rec);
    case OP_ACCOUNT_UPDATE:
        return fg_store_account_update(tx, o->rec);
    case OP_AUDIT:
        return fg_store_audit_append(tx, o->rec, &o->out);
    case OP_JOB_INSERT:
        return fg_store_job_insert(tx, o->rec, &o->out);
    case OP_JOB_UPDATE:
        return fg_store_job_update(tx, o->rec);
    case OP_ATTEMPT_INSERT:
        return fg_store_attempt_insert(tx, o->rec);
    case OP_ATTEMPT_UPDATE:
        return fg_store_attempt_update(tx, o->rec);
    case OP_EVENT: {
        fg_store_event_t e = *(const fg_store_event_t *)o->rec;
        if (e.job_id < 0)
            e.job_id = last_job;
        return fg_store_event_append(tx, &e, &o->out);
    }
    case OP_NODE_UPSERT:
        return fg_store_node_upsert(tx, o->rec);
    case OP_NODE_STATE:
        return fg_store_node_set_state(tx, o->s1, o->s2);
    case OP_USAGE_SET:
        return fg_store_usage_set(tx, o->rec);
    case OP_SETTING_SET:
        return fg_store_setting_set(tx, o->s1, o->s2);
    case OP_SESSION_EXPIRE:
        return fg_store_session_delete_expired(tx, o->i1, &o->out);
    case OP_USER_MODIFY:
        return user_modify(tx, o->rec);
    case OP_SESSIONS_DELETE_USER:
        return fg_store_session_delete_user(tx, o->i1, &o->out);
    case OP_TOKENS_DELETE_USER:
        return tokens_delete_user(tx, o->i1, &o->out);
    case OP_SETUP_CLAIM:
        return setup_claim(tx, o->s1);
    case OP_LEDGER:
        return fg_store_ledger_append(tx, o->rec);
    case OP_MEMBER_MANAGER:
        return fg_store_member_set_manager(tx, o->i1, o->s1, o->d1 != 0);
    default:
        return FG_STORE_EINVAL;
    }
}

uint64_t srv_ledger_ids(srv_t *s, int n)
{
    assert(n > 0);
    return atomic_fetch_add(&s->ledger_next_id, (uint64_t)n);
}

static int batch_unit(fg_store_tx_t *tx, void *arg)
{
    srv_batch_t *b = arg;
    int64_t last_job = 0, last_user = 0;
    for (size_t i = 0; i < b->n; i++) {
        srv_op_t *o = &b->ops[i];
        if (o->kind == OP_JOB_IDEM) {
            fg_store_job_t j = {0};
            int rc = fg_store_job_get_by_idem(tx, o->i1, o->s1, &j);
            if (rc == 0) {
                o->out = j.id;
                fg_store_job_clear(&j);
                for (size_t k = i + 1; k < b->n; k++)
                    b->ops[k].skipped = true;
                return 0;
            }
            if (rc != FG_STORE_ENOENT) {
                b->failed_op = (int)i;
                return rc;
            }
            continue;
        }
        if (o->kind == OP_USER_COUNT) {
            int rc = fg_store_user_count(tx, &o->out);
            if (rc) {
                b->failed_op = (int)i;
                return rc;
            }
            continue;
        }
        if (o->kind == OP_MEMBER_ADD && o->i1 == 0)
            o->i1 = last_user;
        int rc = run_op(tx, o, last_job);
        if (rc) {
            b->failed_op = (int)i;
            return rc;
        }
        if (o->kind == OP_JOB_INSERT)
            last_job = o->out;
        if (o->kind == OP_USER_INSERT)
            last_user = o->out;
    }
    return 0;
}

/* Runs the batch as one durable unit. 0 when committed and fsync'd; else a store error
 * (nothing of the batch is stored); b->failed_op names the op that failed. */
int srv_batch_commit(srv_t *s, srv_batch_t *b)
{
    if (b->n == 0)
        return 0;
    b->failed_op = -1;
    int rc = fg_store_write(s->store, batch_unit, b);
    if (rc == 0)
        srv_metrics_ledger_committed(s, b);
    return rc;
}

int srv_batch_commit_async(srv_t *s, srv_batch_t *b, void (*done)(int rc, void *arg), void *arg)
{
    b->failed_op = -1;
    return fg_store_write_async(s->store, batch_unit, b, done, arg);
}

int srv_store_err_status(int rc)
{
    switch (rc) {
    case FG_STORE_ENOENT:
        return 404;
    case FG_STORE_EEXIST:
        return 409;
    case FG_STORE_EINVAL:
        return 400;
    default:
        return 503;
    }
}

void srv_audit(srv_t *s, int64_t admin_id, const char *action, const char *target, json_t *details)
{
    char *dj = details ? json_dumps(details, JSON_COMPACT) : NULL;
    fg_store_audit_t a = {.time = srv_now(),
                          .admin_user_id = admin_id,
                          .action = (char *)action,
                          .target = (char *)target,
                          .details_json = dj};
    srv_batch_t b = {0};
    srv_batch_add(&b, OP_AUDIT, &a);
    int rc = srv_batch_commit(s, &b);
    if (rc)
        fg_log(FG_LOG_ERROR, "audit record %s %s not stored: %s", action, target,
               fg_store_strerror(rc));
    srv_batch_free(&b);
    free(dj);
    if (details)
        json_decref(details);
}

/* ------------------------------------------------------------------ open */

static int make_dir(const char *path)
{
    if (mkdir(path, 0700) == 0 || errno == EEXIST) {
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
            return 0;
        fprintf(stderr, "fairgpu server: data dir '%s' exists and is not a directory\n", path);
        return -1;
    }
    fprintf(stderr, "fairgpu server: cannot create data dir '%s': %s\n", path, strerror(errno));
    return -1;
}

/* Reads DATA_DIR/agent.token, creating it (mode 0600) with a fresh token if absent. */
static int agent_token(srv_t *s, char *path, size_t pn)
{
    snprintf(path, pn, "%s/agent.token", s->cfg.data_dir);
    char tok[128] = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, tok, sizeof tok - 1);
        close(fd);
        if (n <= 0) {
            fprintf(stderr, "fairgpu server: agent token file '%s' is empty\n", path);
            return -1;
        }
        tok[n] = 0;
        size_t len = strlen(tok);
        while (len && (tok[len - 1] == '\n' || tok[len - 1] == ' ' || tok[len - 1] == '\r' ||
                       tok[len - 1] == '\t'))
            tok[--len] = 0;
        if (len < 16) {
            fprintf(stderr, "fairgpu server: agent token in '%s' is too short\n", path);
            return -1;
        }
    } else {
        srv_token_new(tok, sizeof tok, "fga");
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
            fprintf(stderr, "fairgpu server: cannot create '%s': %s\n", path, strerror(errno));
            return -1;
        }
        size_t len = strlen(tok);
        tok[len] = '\n';
        ssize_t w = write(fd, tok, len + 1);
        tok[len] = 0;
        if (w != (ssize_t)(len + 1) || fsync(fd) != 0) {
            close(fd);
            fprintf(stderr, "fairgpu server: cannot write '%s'\n", path);
            return -1;
        }
        close(fd);
    }
    srv_token_hash(tok, s->agent_token_hash);
    sodium_memzero(tok, sizeof tok);
    return 0;
}

/* Writes tok and a newline to path, mode 0600, replacing any file there (a temporary
 * file renamed over it, so that a reader never sees half a token). */
static int write_secret_file(const char *path, const char *tok)
{
    char tmpp[1300];
    snprintf(tmpp, sizeof tmpp, "%s.tmp", path);
    unlink(tmpp);
    int fd = open(tmpp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -1;
    size_t len = strlen(tok);
    bool ok = write(fd, tok, len) == (ssize_t)len && write(fd, "\n", 1) == 1 && fsync(fd) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmpp, path) != 0) {
        unlink(tmpp);
        return -1;
    }
    return 0;
}

/* Reads the first line of a small secret file into buf; 0 on success. */
static int read_secret_file(const char *path, char *buf, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    ssize_t got = read(fd, buf, n - 1);
    close(fd);
    if (got <= 0)
        return -1;
    buf[got] = 0;
    buf[strcspn(buf, "\r\n")] = 0;
    return buf[0] ? 0 : -1;
}

int srv_metrics_token_init(srv_t *s)
{
    char path[1200], tok[128];
    snprintf(path, sizeof path, "%s/metrics.token", s->cfg.data_dir);
    if (read_secret_file(path, tok, sizeof tok) != 0) {
        if (access(path, F_OK) == 0) {
            fprintf(stderr, "fairgpu server: the scrape token file '%s' is empty or unreadable\n",
                    path);
            return -1;
        }
        srv_token_new(tok, sizeof tok, "fgm");
        if (write_secret_file(path, tok) != 0) {
            fprintf(stderr, "fairgpu server: cannot write '%s': %s\n", path, strerror(errno));
            return -1;
        }
    }
    if (strlen(tok) < 16) {
        fprintf(stderr, "fairgpu server: the scrape token in '%s' is too short\n", path);
        sodium_memzero(tok, sizeof tok);
        return -1;
    }
    srv_token_hash(tok, s->metrics_token_hash);
    sodium_memzero(tok, sizeof tok);
    return 0;
}

int srv_setup_token_init(srv_t *s, char *path, size_t pn)
{
    snprintf(path, pn, "%s/setup-token", s->cfg.data_dir);
    bool admin = false;
    for (size_t i = 0; i < s->nusers; i++)
        admin = admin || s->users[i]->r.role == FG_STORE_ROLE_ADMIN;
    fg_store_tx_t *tx;
    char *live = NULL;
    if (fg_store_read_begin(s->store, &tx) == 0) {
        if (fg_store_setting_get(tx, SRV_SETUP_SETTING, &live) != 0) {
            free(live);
            live = NULL;
        }
        fg_store_read_end(tx);
    }
    srv_batch_t b = {0};
    int rc = 0;
    if (admin) { /* nothing to set up: no setup token is accepted */
        if (unlink(path) != 0 && errno != ENOENT)
            fprintf(stderr, "fairgpu server: cannot remove '%s': %s\n", path, strerror(errno));
        if (live && *live) { /* a token left live by an older binary or a crash */
            srv_op_t *o = srv_batch_add(&b, OP_SETTING_SET, NULL);
            o->s1 = SRV_SETUP_SETTING;
            o->s2 = "";
            rc = srv_batch_commit(s, &b);
        }
        srv_batch_free(&b);
        free(live);
        return rc ? -1 : 0;
    }
    /* no admin: keep the token of an earlier start if its file still matches */
    char tok[128];
    unsigned char h[SRV_TOKEN_HASH];
    char hex[2 * SRV_TOKEN_HASH + 1];
    if (live && *live && read_secret_file(path, tok, sizeof tok) == 0) {
        srv_token_hash(tok, h);
        srv_token_hex(h, hex);
        bool same = strlen(live) == strlen(hex) && sodium_memcmp(live, hex, strlen(hex)) == 0;
        sodium_memzero(tok, sizeof tok);
        if (same) {
            free(live);
            return 1;
        }
    }
    free(live);
    srv_token_new(tok, sizeof tok, "fgsetup");
    srv_token_hash(tok, h);
    srv_token_hex(h, hex);
    srv_op_t *o = srv_batch_add(&b, OP_SETTING_SET, NULL);
    o->s1 = SRV_SETUP_SETTING;
    o->s2 = hex;
    rc = srv_batch_commit(s, &b);
    srv_batch_free(&b);
    if (rc == 0 && write_secret_file(path, tok) != 0) {
        fprintf(stderr, "fairgpu server: cannot write the setup token to '%s': %s\n", path,
                strerror(errno));
        rc = -1;
    } else if (rc) {
        fprintf(stderr, "fairgpu server: cannot store the setup token: %s\n",
                fg_store_strerror(rc));
    }
    sodium_memzero(tok, sizeof tok);
    return rc ? -1 : 1;
}

int srv_persist_open(srv_t *s)
{
    if (make_dir(s->cfg.data_dir))
        return -1;
    char path[1200];
    snprintf(path, sizeof path, "%s/fairgpu.db", s->cfg.data_dir);
    char *err = NULL;
    /* The commit delay applies once batches hold 4 units or more (the server is busy):
     * a lone client's submission is committed at once. */
    fg_store_opts_t opts = {.read_conns = 8,
                            .max_batch = 1024,
                            .busy_timeout_ms = 5000,
                            .commit_delay_us = s->cfg.commit_delay_us,
                            .commit_siblings = 4};
    int rc = fg_store_open_sqlite(path, &opts, &s->store, &err);
    if (rc) {
        fprintf(stderr, "fairgpu server: cannot open the database '%s': %s\n", path,
                err ? err : fg_store_strerror(rc));
        free(err);
        return -1;
    }
    char tpath[1200];
    if (agent_token(s, tpath, sizeof tpath))
        return -1;
    if (srv_nodecred_load(s)) {
        fprintf(stderr, "fairgpu server: cannot load the node credentials\n");
        return -1;
    }
    /* A new epoch for this run. */
    fg_store_tx_t *tx;
    int64_t epoch = 0;
    if (fg_store_read_begin(s->store, &tx) == 0) {
        char *v = NULL;
        if (fg_store_setting_get(tx, "epoch", &v) == 0 && v)
            epoch = strtoll(v, NULL, 10);
        free(v);
        fg_store_read_end(tx);
    }
    s->epoch = epoch + 1;
    char ebuf[32];
    snprintf(ebuf, sizeof ebuf, "%lld", (long long)s->epoch);
    srv_batch_t b = {0};
    srv_op_t *o = srv_batch_add(&b, OP_SETTING_SET, NULL);
    o->s1 = "epoch";
    o->s2 = ebuf;
    rc = srv_batch_commit(s, &b);
    srv_batch_free(&b);
    if (rc) {
        fprintf(stderr, "fairgpu server: cannot write to the database: %s\n",
                fg_store_strerror(rc));
        return -1;
    }
    return 0;
}

void srv_persist_close(srv_t *s)
{
    fg_store_close(s->store);
    s->store = NULL;
}

/* ------------------------------------------------------------------ load */

static int load_job(const fg_store_job_t *rec, void *arg)
{
    srv_t *s = arg;
    srv_job_t *j = fg_xcalloc(1, sizeof *j);
    fg_store_job_t *r = &j->r;
    *r = *rec;
    r->name = srv_strdup0(rec->name);
    r->username = srv_strdup0(rec->username);
    r->account = srv_strdup0(rec->account);
    r->command_json = srv_strdup0(rec->command_json);
    r->env_json = srv_strdup0(rec->env_json);
    r->gpu_type = srv_strdup0(rec->gpu_type);
    r->model = srv_strdup0(rec->model);
    r->dataset = srv_strdup0(rec->dataset);
    r->reason = srv_strdup0(rec->reason);
    r->idem_key = srv_strdup0(rec->idem_key);
    r->nodes_json = srv_strdup0(rec->nodes_json);
    r->gpu_indices_json = srv_strdup0(rec->gpu_indices_json);
    j->state = (fg_job_state_t)rec->state;
    srv_job_insert_mem(s, j);
    return 0;
}

int srv_persist_load(srv_t *s)
{
    fg_store_tx_t *tx;
    int rc = fg_store_read_begin(s->store, &tx);
    if (rc)
        return rc;
    /* users */
    char *cursor = NULL;
    for (;;) {
        fg_store_user_list_t l = {0};
        rc = fg_store_user_list(tx, cursor, 1000, &l);
        free(cursor);
        cursor = NULL;
        if (rc)
            goto out;
        for (size_t i = 0; i < l.n; i++) {
            srv_user_t *u = fg_xcalloc(1, sizeof *u);
            u->r = l.items[i];
            memset(&l.items[i], 0, sizeof l.items[i]);
            s->users = fg_xgrow(s->users, &s->users_cap, s->nusers + 1, sizeof *s->users);
            s->users[s->nusers++] = u;
        }
        cursor = srv_strdup0(l.next_cursor);
        fg_store_user_list_free(&l);
        if (!cursor)
            break;
    }
    /* accounts */
    fg_store_account_list_t al = {0};
    if ((rc = fg_store_account_list(tx, &al)))
        goto out;
    for (size_t i = 0; i < al.n; i++) {
        srv_account_t *a = fg_xcalloc(1, sizeof *a);
        a->r = al.items[i];
        memset(&al.items[i], 0, sizeof al.items[i]);
        s->accounts =
            fg_xgrow(s->accounts, &s->accounts_cap, s->naccounts + 1, sizeof *s->accounts);
        s->accounts[s->naccounts++] = a;
    }
    fg_store_account_list_free(&al);
    /* members */
    fg_store_member_list_t ml = {0};
    if ((rc = fg_store_member_list_all(tx, &ml)))
        goto out;
    for (size_t i = 0; i < ml.n; i++) {
        srv_member_t *m = fg_xcalloc(1, sizeof *m);
        m->r = ml.items[i];
        memset(&ml.items[i], 0, sizeof ml.items[i]);
        s->members = fg_xgrow(s->members, &s->members_cap, s->nmembers + 1, sizeof *s->members);
        s->members[s->nmembers++] = m;
    }
    fg_store_member_list_free(&ml);
    /* jobs */
    fg_store_job_filter_t f = {0};
    if ((rc = fg_store_job_foreach(tx, &f, load_job, s)))
        goto out;
    int64_t maxid = 0;
    if ((rc = fg_store_job_max_id(tx, &maxid)))
        goto out;
    /* current attempts of running jobs */
    fg_store_attempt_list_t open_att = {0};
    if ((rc = fg_store_attempt_list_open(tx, &open_att)))
        goto out;
    for (size_t i = 0; i < open_att.n; i++) {
        srv_job_t *j = srv_job_get(s, (uint64_t)open_att.items[i].job_id);
        if (!j || j->state != FG_JOB_RUNNING || open_att.items[i].attempt != j->r.attempts)
            continue;
        fg_store_attempt_clear(&j->cur);
        j->cur = open_att.items[i];
        memset(&open_att.items[i], 0, sizeof open_att.items[i]);
        if ((rc = fg_store_ledger_charged_to(tx, j->r.id, j->cur.attempt, &j->charged_to_ms)))
            break;
    }
    fg_store_attempt_list_free(&open_att);
    if (rc)
        goto out;
    /* ledger row ids go on after the largest one stored */
    uint64_t max_row = 0;
    if ((rc = fg_store_ledger_max_id(tx, &max_row)))
        goto out;
    atomic_store(&s->ledger_next_id, max_row + 1);
    if ((rc = srv_metrics_ledger_restore(s, tx)))
        goto out;
    /* events: all of them, in pages */
    int64_t since = 0;
    for (;;) {
        fg_store_event_list_t el = {0};
        if ((rc = fg_store_event_list_since(tx, since, 10000, &el)))
            goto out;
        for (size_t i = 0; i < el.n; i++) {
            srv_event_mem(s, &el.items[i]);
            since = el.items[i].seq;
        }
        size_t n = el.n;
        fg_store_event_list_free(&el);
        if (n < 10000)
            break;
    }
    /* nodes */
    fg_store_node_list_t nl = {0};
    if ((rc = fg_store_node_list(tx, &nl)))
        goto out;
    for (size_t i = 0; i < nl.n; i++) {
        fg_store_node_t *sn = &nl.items[i];
        srv_node_t *n = fg_xcalloc(1, sizeof *n);
        snprintf(n->name, sizeof n->name, "%s", sn->name);
        n->state = !strcmp(sn->state, "down") ? FG_NODE_DOWN
                   : !strcmp(sn->state, "up") ? FG_NODE_UP
                                              : FG_NODE_DRAINING;
        n->cpus = sn->cpus;
        n->memory_mb = sn->memory_mb;
        n->created_at = sn->created_at;
        n->last_heartbeat_ms = srv_now_ms(); /* a grace period to re-register */
        n->core_index = -1;
        n->outbox = json_array();
        n->next_msg_seq = 1;
        json_t *gj = sn->gpus_json ? json_loads(sn->gpus_json, 0, NULL) : NULL;
        size_t k;
        json_t *g;
        json_array_foreach(gj, k, g)
        {
            if (n->ngpus >= FG_MAX_NODE_GPUS)
                break;
            srv_gpu_t *G = &n->gpus[n->ngpus++];
            G->index = (int)json_integer_value(json_object_get(g, "index"));
            snprintf(G->uuid, sizeof G->uuid, "%s", srv_jstr(g, "uuid", ""));
            snprintf(G->type, sizeof G->type, "%s", srv_jstr(g, "type", ""));
            G->memory_mb = json_integer_value(json_object_get(g, "memory_mb"));
            G->mem_used_mb = -1;
            G->util_pct = -1;
        }
        if (n->ngpus)
            snprintf(n->gpu_type, sizeof n->gpu_type, "%s", n->gpus[0].type);
        json_decref(gj);
        s->nodes = fg_xgrow(s->nodes, &s->nodes_cap, s->nnodes + 1, sizeof *s->nodes);
        s->nodes[s->nnodes++] = n;
    }
    fg_store_node_list_free(&nl);
    rc = 0;
out:
    free(cursor);
    fg_store_read_end(tx);
    return rc;
}
