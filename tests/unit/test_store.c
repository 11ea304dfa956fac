/*
 * test_store.c - the store interface (src/store/store.h) on real SQLite files.
 *
 * Every test opens a fresh database in its own mkdtemp directory. The same tests are
 * meant to run against every backend: they use store.h only, except the migration
 * test, which builds an old-version file with the SQLite backend's internals.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fairgpu/billing.h"
#include "store/sqlite_internal.h"
#include "store/store.h"

/* ------------------------------------------------------------------ fixture */

typedef struct fx {
    char dir[256];
    char path[300];
    fg_store_t *st;
} fx_t;

static void fx_open(fx_t *f)
{
    char *err = NULL;
    int rc = fg_store_open_sqlite(f->path, NULL, &f->st, &err);
    if (rc != 0)
        fprintf(stderr, "open: %s\n", err ? err : "?");
    free(err);
    assert_int_equal(rc, 0);
    assert_non_null(f->st);
}

static void fx_reopen(fx_t *f)
{
    fg_store_close(f->st);
    f->st = NULL;
    fx_open(f);
}

static int setup(void **state)
{
    fx_t *f = calloc(1, sizeof *f);
    const char *tmp = getenv("TMPDIR");
    snprintf(f->dir, sizeof f->dir, "%s/fg_store_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->path, sizeof f->path, "%s/fairgpu.db", f->dir);
    fx_open(f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx_t *f = *state;
    fg_store_close(f->st);
    const char *suffixes[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < 4; i++) {
        char p[320];
        snprintf(p, sizeof p, "%s%s", f->path, suffixes[i]);
        unlink(p);
    }
    rmdir(f->dir);
    free(f);
    return 0;
}

/* Runs a write unit and asserts its result. */
#define WRITE_OK(st, fn, arg) assert_int_equal(fg_store_write((st), (fn), (arg)), 0)

static fg_store_tx_t *rd(fg_store_t *st)
{
    fg_store_tx_t *tx = NULL;
    assert_int_equal(fg_store_read_begin(st, &tx), 0);
    assert_non_null(tx);
    return tx;
}

/* Records and helpers shared by the write units below. */
static int64_t mk_user(fg_store_tx_t *tx, const char *name)
{
    fg_store_user_t u = {.username = (char *)name,
                         .email = (char *)"x@example.org",
                         .password_hash = (char *)"$argon2id$fake",
                         .created_at = 1000};
    int64_t id = 0;
    assert_int_equal(fg_store_user_insert(tx, &u, &id), 0);
    assert_true(id > 0);
    return id;
}

static fg_store_job_t job_template(int64_t user_id, const char *account)
{
    fg_store_job_t j = {0};
    j.name = (char *)"train";
    j.user_id = user_id;
    j.account = (char *)account;
    j.command_json = (char *)"[\"python\",\"train.py\"]";
    j.gpus = 8;
    j.priority = 1;
    j.submit_time = 5000;
    j.time_limit_s = 3600;
    return j;
}

/* ------------------------------------------------------------------ open, settings */

static void test_open_creates_schema(void **state)
{
    fx_t *f = *state;
    assert_string_equal(fg_store_backend(f->st), "sqlite");
    assert_int_equal(fg_store_schema_version(f->st), fg_store_sqlite_latest_version());
    assert_int_equal(fg_store_ping(f->st), 0);
    fg_store_tx_t *tx = rd(f->st);
    fg_store_account_t a = {0};
    assert_int_equal(fg_store_account_get(tx, "default", &a), 0);
    assert_true(a.weight == 1.0);
    assert_int_equal(a.gpu_quota, -1);
    assert_int_equal(a.allowed_priorities, FG_STORE_PRIO_ALL);
    fg_store_account_clear(&a);
    int64_t n = -1;
    assert_int_equal(fg_store_user_count(tx, &n), 0);
    assert_int_equal(n, 0);
    fg_store_read_end(tx);
    /* WAL mode: the -wal file exists while the store is open */
    char wal[320];
    snprintf(wal, sizeof wal, "%s-wal", f->path);
    struct stat sb;
    assert_int_equal(stat(wal, &sb), 0);
    /* password and token hashes live here: owner-only files */
    assert_int_equal(sb.st_mode & 077, 0);
    assert_int_equal(stat(f->path, &sb), 0);
    assert_int_equal(sb.st_mode & 077, 0);
}

static void test_open_bad_path(void **state)
{
    (void)state;
    fg_store_t *st = (fg_store_t *)1;
    char *err = NULL;
    int rc = fg_store_open_sqlite("/nonexistent-dir-fg/x/y.db", NULL, &st, &err);
    assert_int_not_equal(rc, 0);
    assert_null(st);
    assert_non_null(err);
    free(err);
}

static int unit_settings(fg_store_tx_t *tx, void *arg)
{
    char *v = NULL;
    assert_int_equal(fg_store_setting_get(tx, "epoch", &v), FG_STORE_ENOENT);
    assert_int_equal(fg_store_setting_set(tx, "epoch", "1"), 0);
    assert_int_equal(fg_store_setting_set(tx, "epoch", "2"), 0);
    assert_int_equal(fg_store_setting_set(tx, "agent_token_hash", "abc"), 0);
    assert_int_equal(fg_store_setting_set(tx, "gone", "x"), 0);
    assert_int_equal(fg_store_setting_delete(tx, "gone"), 0);
    assert_int_equal(fg_store_setting_delete(tx, "gone"), FG_STORE_ENOENT);
    assert_int_equal(fg_store_setting_get(tx, "epoch", &v), 0);
    assert_string_equal(v, "2");
    free(v);
    return 0;
}

static void test_settings(void **state)
{
    fx_t *f = *state;
    WRITE_OK(f->st, unit_settings, NULL);
    fx_reopen(f);
    fg_store_tx_t *tx = rd(f->st);
    char *v = NULL;
    assert_int_equal(fg_store_setting_get(tx, "epoch", &v), 0);
    assert_string_equal(v, "2");
    free(v);
    assert_int_equal(fg_store_setting_get(tx, "gone", &v), FG_STORE_ENOENT);
    assert_null(v);
    /* writes on a read handle are refused */
    assert_int_equal(fg_store_setting_set(tx, "epoch", "3"), FG_STORE_EREADONLY);
    fg_store_read_end(tx);
}

/* ------------------------------------------------------------------ users */

static int unit_users(fg_store_tx_t *tx, void *arg)
{
    int64_t *ids = arg;
    for (int i = 0; i < 7; i++) {
        char name[16];
        snprintf(name, sizeof name, "user%d", i);
        ids[i] = mk_user(tx, name);
    }
    fg_store_user_t dup = {
        .username = (char *)"user3", .email = (char *)"d@x", .password_hash = (char *)"h"};
    assert_int_equal(fg_store_user_insert(tx, &dup, NULL), FG_STORE_EEXIST);
    fg_store_user_t u = {0};
    assert_int_equal(fg_store_user_get(tx, ids[2], &u), 0);
    free(u.email);
    u.email = fg_store_strerror(0) ? strdup("new@example.org") : NULL;
    free(u.display_name);
    u.display_name = strdup("User Two");
    u.role = FG_STORE_ROLE_ADMIN;
    u.disabled = true;
    assert_int_equal(fg_store_user_update(tx, &u), 0);
    u.id = 999999;
    assert_int_equal(fg_store_user_update(tx, &u), FG_STORE_ENOENT);
    fg_store_user_clear(&u);
    return 0;
}

static void test_users(void **state)
{
    fx_t *f = *state;
    int64_t ids[7];
    WRITE_OK(f->st, unit_users, ids);
    fg_store_tx_t *tx = rd(f->st);
    int64_t n = 0;
    assert_int_equal(fg_store_user_count(tx, &n), 0);
    assert_int_equal(n, 7);
    fg_store_user_t u = {0};
    assert_int_equal(fg_store_user_get_by_name(tx, "user2", &u), 0);
    assert_int_equal(u.id, ids[2]);
    assert_string_equal(u.email, "new@example.org");
    assert_string_equal(u.display_name, "User Two");
    assert_string_equal(u.password_hash, "$argon2id$fake");
    assert_int_equal(u.role, FG_STORE_ROLE_ADMIN);
    assert_true(u.disabled);
    assert_int_equal(u.created_at, 1000);
    assert_null(u.default_account); /* no membership yet */
    fg_store_user_clear(&u);
    assert_int_equal(fg_store_user_get(tx, ids[0], &u), 0);
    assert_string_equal(u.username, "user0");
    assert_null(u.display_name);
    assert_false(u.disabled);
    fg_store_user_clear(&u);
    assert_int_equal(fg_store_user_get(tx, 424242, &u), FG_STORE_ENOENT);
    assert_int_equal(fg_store_user_get_by_name(tx, "nobody", &u), FG_STORE_ENOENT);

    /* pagination: 3 + 3 + 1, in id order, cursor NULL at the end */
    fg_store_user_list_t l = {0};
    char *cursor = NULL;
    int seen = 0, pages = 0;
    do {
        assert_int_equal(fg_store_user_list(tx, cursor, 3, &l), 0);
        for (size_t i = 0; i < l.n; i++)
            assert_int_equal(l.items[i].id, ids[seen++]);
        free(cursor);
        cursor = l.next_cursor ? strdup(l.next_cursor) : NULL;
        pages++;
        fg_store_user_list_free(&l);
    } while (cursor);
    assert_int_equal(seen, 7);
    assert_int_equal(pages, 3);
    assert_int_equal(fg_store_user_list(tx, "garbage", 3, &l), FG_STORE_EINVAL);
    fg_store_read_end(tx);
}

/* ------------------------------------------------------------------ sessions, tokens */

typedef struct {
    int64_t uid, tid;
} auth_ctx_t;

static int unit_auth(fg_store_tx_t *tx, void *arg)
{
    auth_ctx_t *c = arg;
    c->uid = mk_user(tx, "alice");
    fg_store_session_t s1 = {.token_hash = (char *)"aa01", .user_id = c->uid, .expires_at = 2000};
    fg_store_session_t s2 = {.token_hash = (char *)"aa02", .user_id = c->uid, .expires_at = 9000};
    fg_store_session_t s3 = {.token_hash = (char *)"aa03", .user_id = c->uid, .expires_at = 9000};
    assert_int_equal(fg_store_session_insert(tx, &s1), 0);
    assert_int_equal(fg_store_session_insert(tx, &s2), 0);
    assert_int_equal(fg_store_session_insert(tx, &s3), 0);
    assert_int_equal(fg_store_session_insert(tx, &s3), FG_STORE_EEXIST);
    fg_store_session_t bad = {.token_hash = (char *)"aa04", .user_id = 777, .expires_at = 1};
    assert_int_equal(fg_store_session_insert(tx, &bad), FG_STORE_ENOENT); /* no such user */
    fg_store_token_t t = {.name = (char *)"laptop",
                          .token_hash = (char *)"bb01",
                          .user_id = c->uid,
                          .created_at = 1500};
    assert_int_equal(fg_store_token_insert(tx, &t, &c->tid), 0);
    t.name = (char *)"ci";
    t.token_hash = (char *)"bb02";
    assert_int_equal(fg_store_token_insert(tx, &t, NULL), 0);
    assert_int_equal(fg_store_token_insert(tx, &t, NULL), FG_STORE_EEXIST);
    return 0;
}

static int unit_auth_cleanup(fg_store_tx_t *tx, void *arg)
{
    auth_ctx_t *c = arg;
    int64_t n = 0;
    assert_int_equal(fg_store_session_delete_expired(tx, 5000, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(fg_store_session_delete(tx, "aa03"), 0);
    assert_int_equal(fg_store_session_delete(tx, "aa03"), FG_STORE_ENOENT);
    fg_store_session_t s4 = {.token_hash = (char *)"aa05", .user_id = c->uid, .expires_at = 9000};
    assert_int_equal(fg_store_session_insert(tx, &s4), 0);
    s4.token_hash = (char *)"aa06";
    assert_int_equal(fg_store_session_insert(tx, &s4), 0);
    assert_int_equal(fg_store_session_delete_user(tx, c->uid + 1000, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(fg_store_session_delete_user(tx, c->uid, &n), 0);
    assert_int_equal(n, 3); /* aa02, aa05, aa06 */
    assert_int_equal(fg_store_token_delete(tx, c->tid, c->uid + 1), FG_STORE_ENOENT);
    assert_int_equal(fg_store_token_delete(tx, c->tid, c->uid), 0);
    assert_int_equal(fg_store_token_delete(tx, c->tid, 0), FG_STORE_ENOENT);
    return 0;
}

static void test_sessions_tokens(void **state)
{
    fx_t *f = *state;
    auth_ctx_t c = {0};
    WRITE_OK(f->st, unit_auth, &c);
    fg_store_tx_t *tx = rd(f->st);
    fg_store_user_t u = {0};
    int kind = 0;
    int64_t cred = -1;
    assert_int_equal(fg_store_auth_lookup(tx, "aa02", 3000, &u, &kind, &cred), 0);
    assert_int_equal(kind, FG_STORE_AUTH_SESSION);
    assert_int_equal(cred, 0);
    assert_string_equal(u.username, "alice");
    fg_store_user_clear(&u);
    /* expired session: not found, same answer as an unknown hash */
    assert_int_equal(fg_store_auth_lookup(tx, "aa01", 3000, &u, &kind, &cred), FG_STORE_ENOENT);
    assert_int_equal(fg_store_auth_lookup(tx, "ffff", 3000, &u, &kind, &cred), FG_STORE_ENOENT);
    assert_int_equal(fg_store_auth_lookup(tx, "bb01", 3000, &u, &kind, &cred), 0);
    assert_int_equal(kind, FG_STORE_AUTH_TOKEN);
    assert_int_equal(cred, c.tid);
    assert_int_equal(u.id, c.uid);
    fg_store_user_clear(&u);
    fg_store_session_t s = {0};
    assert_int_equal(fg_store_session_get(tx, "aa01", &s), 0);
    assert_int_equal(s.expires_at, 2000);
    assert_int_equal(s.user_id, c.uid);
    fg_store_session_clear(&s);
    fg_store_token_t t = {0};
    assert_int_equal(fg_store_token_get_by_hash(tx, "bb02", &t), 0);
    assert_string_equal(t.name, "ci");
    assert_int_equal(t.created_at, 1500);
    fg_store_token_clear(&t);
    fg_store_token_list_t tl = {0};
    assert_int_equal(fg_store_token_list(tx, c.uid, &tl), 0);
    assert_int_equal(tl.n, 2);
    assert_string_equal(tl.items[0].name, "laptop");
    assert_string_equal(tl.items[1].name, "ci");
    fg_store_token_list_free(&tl);
    fg_store_read_end(tx);

    WRITE_OK(f->st, unit_auth_cleanup, &c);
    tx = rd(f->st);
    assert_int_equal(fg_store_session_get(tx, "aa01", &s), FG_STORE_ENOENT);
    assert_int_equal(fg_store_session_get(tx, "aa02", &s), FG_STORE_ENOENT);
    assert_int_equal(fg_store_session_get(tx, "aa03", &s), FG_STORE_ENOENT);
    assert_int_equal(fg_store_auth_lookup(tx, "bb01", 3000, &u, NULL, NULL), FG_STORE_ENOENT);
    assert_int_equal(fg_store_token_list(tx, c.uid, &tl), 0);
    assert_int_equal(tl.n, 1);
    fg_store_token_list_free(&tl);
    fg_store_read_end(tx);
}

/* ------------------------------------------------------------------ accounts, members */

typedef struct {
    int64_t alice, bob;
} acct_ctx_t;

static int unit_accounts(fg_store_tx_t *tx, void *arg)
{
    acct_ctx_t *c = arg;
    fg_store_account_t a = {.name = (char *)"vision",
                            .weight = 2.5,
                            .gpu_quota = 64,
                            .budget_micros = 1000000000,
                            .allowed_priorities = 3,
                            .created_at = 77};
    assert_int_equal(fg_store_account_insert(tx, &a), 0);
    assert_int_equal(fg_store_account_insert(tx, &a), FG_STORE_EEXIST);
    a.name = (char *)"nlp";
    a.weight = 1;
    assert_int_equal(fg_store_account_insert(tx, &a), 0);
    a.gpu_quota = -1;
    a.weight = 4;
    assert_int_equal(fg_store_account_update(tx, &a), 0);
    a.name = (char *)"nope";
    assert_int_equal(fg_store_account_update(tx, &a), FG_STORE_ENOENT);

    c->alice = mk_user(tx, "alice");
    c->bob = mk_user(tx, "bob");
    fg_store_member_t m = {.user_id = c->alice, .account = (char *)"vision", .weight = 2};
    assert_int_equal(fg_store_member_add(tx, &m), 0);
    assert_int_equal(fg_store_member_add(tx, &m), FG_STORE_EEXIST);
    m.account = (char *)"nlp";
    m.weight = 0;        /* default 1 */
    m.is_default = true; /* ignored: not the first */
    assert_int_equal(fg_store_member_add(tx, &m), 0);
    m.account = (char *)"default";
    assert_int_equal(fg_store_member_add(tx, &m), 0);
    m.account = (char *)"nosuch";
    assert_int_equal(fg_store_member_add(tx, &m), FG_STORE_ENOENT);
    m.user_id = 9999;
    m.account = (char *)"nlp";
    assert_int_equal(fg_store_member_add(tx, &m), FG_STORE_ENOENT);
    m.user_id = c->bob;
    assert_int_equal(fg_store_member_add(tx, &m), 0);
    assert_int_equal(fg_store_member_set_weight(tx, c->bob, "nlp", 3.0), 0);
    assert_int_equal(fg_store_member_set_weight(tx, c->bob, "vision", 3.0), FG_STORE_ENOENT);
    return 0;
}

static int unit_members_change(fg_store_tx_t *tx, void *arg)
{
    acct_ctx_t *c = arg;
    /* alice: vision (default), nlp, default. Make nlp the default, then remove it:
     * the earliest remaining membership (vision) becomes the default again. */
    assert_int_equal(fg_store_member_set_default(tx, c->alice, "nlp"), 0);
    fg_store_user_t u = {0};
    assert_int_equal(fg_store_user_get(tx, c->alice, &u), 0);
    assert_string_equal(u.default_account, "nlp");
    fg_store_user_clear(&u);
    assert_int_equal(fg_store_member_set_default(tx, c->alice, "nosuch"), FG_STORE_ENOENT);
    assert_int_equal(fg_store_member_remove(tx, c->alice, "nlp"), 0);
    assert_int_equal(fg_store_member_remove(tx, c->alice, "nlp"), FG_STORE_ENOENT);
    return 0;
}

static void test_accounts_members(void **state)
{
    fx_t *f = *state;
    acct_ctx_t c = {0};
    WRITE_OK(f->st, unit_accounts, &c);
    fg_store_tx_t *tx = rd(f->st);
    fg_store_account_list_t al = {0};
    assert_int_equal(fg_store_account_list(tx, &al), 0);
    assert_int_equal(al.n, 3);
    assert_string_equal(al.items[0].name, "default");
    assert_string_equal(al.items[1].name, "nlp");
    assert_string_equal(al.items[2].name, "vision");
    assert_true(al.items[1].weight == 4.0);
    assert_int_equal(al.items[1].gpu_quota, -1);
    assert_true(al.items[2].weight == 2.5);
    assert_int_equal(al.items[2].gpu_quota, 64);
    assert_int_equal(al.items[2].budget_micros, 1000000000);
    assert_int_equal(al.items[2].allowed_priorities, 3);
    assert_int_equal(al.items[2].created_at, 77);
    fg_store_account_list_free(&al);

    fg_store_member_list_t ml = {0};
    assert_int_equal(fg_store_member_list_by_user(tx, c.alice, &ml), 0);
    assert_int_equal(ml.n, 3);
    assert_string_equal(ml.items[0].account, "vision");
    assert_true(ml.items[0].is_default);
    assert_true(ml.items[0].weight == 2.0);
    assert_string_equal(ml.items[1].account, "nlp");
    assert_false(ml.items[1].is_default);
    assert_true(ml.items[1].weight == 1.0);
    assert_true(ml.items[0].position < ml.items[1].position);
    assert_string_equal(ml.items[2].username, "alice");
    fg_store_member_list_free(&ml);
    assert_int_equal(fg_store_member_list_by_account(tx, "nlp", &ml), 0);
    assert_int_equal(ml.n, 2);
    assert_string_equal(ml.items[0].username, "alice");
    assert_string_equal(ml.items[1].username, "bob");
    assert_true(ml.items[1].weight == 3.0);
    assert_true(ml.items[1].is_default); /* bob's first membership */
    fg_store_member_list_free(&ml);
    assert_int_equal(fg_store_member_list_all(tx, &ml), 0);
    assert_int_equal(ml.n, 4);
    fg_store_member_list_free(&ml);
    fg_store_user_t u = {0};
    assert_int_equal(fg_store_user_get(tx, c.alice, &u), 0);
    assert_string_equal(u.default_account, "vision");
    fg_store_user_clear(&u);
    fg_store_read_end(tx);

    WRITE_OK(f->st, unit_members_change, &c);
    tx = rd(f->st);
    fg_store_member_t m = {0};
    assert_int_equal(fg_store_member_get(tx, c.alice, "vision", &m), 0);
    assert_true(m.is_default);
    fg_store_member_clear(&m);
    assert_int_equal(fg_store_member_get(tx, c.alice, "nlp", &m), FG_STORE_ENOENT);
    assert_int_equal(fg_store_member_list_by_user(tx, c.alice, &ml), 0);
    assert_int_equal(ml.n, 2);
    int ndefault = 0;
    for (size_t i = 0; i < ml.n; i++)
        ndefault += ml.items[i].is_default;
    assert_int_equal(ndefault, 1);
    fg_store_member_list_free(&ml);
    fg_store_read_end(tx);
}

/* ------------------------------------------------------------------ audit */

static int unit_audit(fg_store_tx_t *tx, void *arg)
{
    int64_t admin = mk_user(tx, "root");
    for (int i = 0; i < 5; i++) {
        char target[16];
        snprintf(target, sizeof target, "t%d", i);
        fg_store_audit_t a = {.time = 100 + i,
                              .admin_user_id = admin,
                              .action = (char *)"account.update",
                              .target = target,
                              .details_json = i == 0 ? NULL : (char *)"{\"weight\":2}"};
        assert_int_equal(fg_store_audit_append(tx, &a, NULL), 0);
    }
    return 0;
}

static void test_audit(void **state)
{
    fx_t *f = *state;
    WRITE_OK(f->st, unit_audit, NULL);
    fg_store_tx_t *tx = rd(f->st);
    fg_store_audit_list_t l = {0};
    assert_int_equal(fg_store_audit_list(tx, NULL, 2, &l), 0);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.items[0].target, "t4"); /* newest first */
    assert_string_equal(l.items[1].target, "t3");
    assert_string_equal(l.items[0].details_json, "{\"weight\":2}");
    assert_non_null(l.next_cursor);
    char *cur = strdup(l.next_cursor);
    fg_store_audit_list_free(&l);
    assert_int_equal(fg_store_audit_list(tx, cur, 2, &l), 0);
    free(cur);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.items[0].target, "t2");
    cur = strdup(l.next_cursor);
    fg_store_audit_list_free(&l);
    assert_int_equal(fg_store_audit_list(tx, cur, 2, &l), 0);
    free(cur);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.items[0].target, "t0");
    assert_null(l.items[0].details_json);
    assert_int_equal(l.items[0].time, 100);
    assert_null(l.next_cursor);
    fg_store_audit_list_free(&l);
    fg_store_read_end(tx);
}

/* ------------------------------------------------------------------ prices */

static int unit_prices(fg_store_tx_t *tx, void *arg)
{
    (void)arg;
    fg_store_price_t p = {.gpu_type = (char *)"H100",
                          .priority = 1,
                          .micros_per_gpu_hour = 2500000,
                          .currency = (char *)"EUR",
                          .effective_ms = 1000,
                          .created_at = 1,
                          .admin_user_id = 7};
    int64_t id1 = 0, id2 = 0;
    assert_int_equal(fg_store_price_append(tx, &p, &id1), 0);
    p.gpu_type = (char *)"*";
    p.micros_per_gpu_hour = 0;
    assert_int_equal(fg_store_price_append(tx, &p, &id2), 0);
    assert_true(id2 > id1);
    p.micros_per_gpu_hour = -1; /* refused: prices are never negative */
    assert_int_equal(fg_store_price_append(tx, &p, NULL), FG_STORE_EINVAL);
    return 0;
}

static void test_prices(void **state)
{
    fx_t *f = *state;
    WRITE_OK(f->st, unit_prices, NULL);
    fg_store_tx_t *tx = rd(f->st);
    fg_store_price_list_t l = {0};
    assert_int_equal(fg_store_price_list(tx, &l), 0);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.items[0].gpu_type, "H100");
    assert_int_equal(l.items[0].micros_per_gpu_hour, 2500000);
    assert_string_equal(l.items[0].currency, "EUR");
    assert_int_equal(l.items[0].effective_ms, 1000);
    assert_int_equal(l.items[0].admin_user_id, 7);
    assert_int_equal(l.items[0].priority, 1);
    assert_string_equal(l.items[1].gpu_type, "*");
    assert_int_equal(l.items[1].micros_per_gpu_hour, 0);
    fg_store_price_list_free(&l);
    fg_store_read_end(tx);
}

/* ------------------------------------------------------------------ jobs */

typedef struct {
    int64_t alice, bob, j1, j2;
} job_ctx_t;

static int unit_jobs(fg_store_tx_t *tx, void *arg)
{
    job_ctx_t *c = arg;
    c->alice = mk_user(tx, "alice");
    c->bob = mk_user(tx, "bob");
    fg_store_job_t j = job_template(c->alice, "default");
    j.env_json = (char *)"{\"A\":\"1\"}";
    j.gpu_type = (char *)"h100";
    j.model = (char *)"llama";
    j.dataset = (char *)"c4";
    j.priority = 2;
    j.reason_code = 3;
    j.reason = (char *)"waiting";
    j.max_retries = 2;
    j.checkpoint_interval_s = 600;
    j.cpus = 32;
    j.memory_mb = 256000;
    j.idem_key = (char *)"k1";
    j.estimated_start = 6000;
    assert_int_equal(fg_store_job_insert(tx, &j, &c->j1), 0);
    /* same key, same user: refused; other user: fine; no key: any number */
    assert_int_equal(fg_store_job_insert(tx, &j, NULL), FG_STORE_EEXIST);
    fg_store_job_t k = job_template(c->bob, "default");
    k.idem_key = (char *)"k1";
    assert_int_equal(fg_store_job_insert(tx, &k, &c->j2), 0);
    k.idem_key = NULL;
    assert_int_equal(fg_store_job_insert(tx, &k, NULL), 0);
    assert_int_equal(fg_store_job_insert(tx, &k, NULL), 0);
    k.account = (char *)"nosuch";
    assert_int_equal(fg_store_job_insert(tx, &k, NULL), FG_STORE_ENOENT);
    return 0;
}

static int unit_job_update(fg_store_tx_t *tx, void *arg)
{
    job_ctx_t *c = arg;
    fg_store_job_t j = {0};
    assert_int_equal(fg_store_job_get(tx, c->j1, &j), 0);
    j.state = 1;
    j.start_time = 5100;
    j.attempts = 1;
    j.reason_code = 0;
    free(j.reason);
    j.reason = NULL;
    free(j.nodes_json);
    j.nodes_json = strdup("[\"n1\"]");
    j.gpu_indices_json = strdup("[0,1,2,3,4,5,6,7]");
    assert_int_equal(fg_store_job_update(tx, &j), 0);
    j.state = 2;
    j.end_time = 5200;
    j.has_exit_code = true;
    j.exit_code = 0;
    j.attained_gpu_s = 800;
    j.cancel_requested = true;
    j.retries_used = 1;
    j.eligible_time = 5150;
    j.cost_micros = 12345;
    j.idle_gpu_s = 678;
    assert_int_equal(fg_store_job_update(tx, &j), 0);
    j.id = 987654;
    assert_int_equal(fg_store_job_update(tx, &j), FG_STORE_ENOENT);
    fg_store_job_clear(&j);
    assert_int_equal(fg_store_job_set_reason(tx, c->j2, 2, "need 8 GPUs", 7000), 0);
    assert_int_equal(fg_store_job_set_reason(tx, 987654, 2, "x", 0), FG_STORE_ENOENT);
    return 0;
}

static void test_jobs(void **state)
{
    fx_t *f = *state;
    job_ctx_t c = {0};
    WRITE_OK(f->st, unit_jobs, &c);
    fg_store_tx_t *tx = rd(f->st);
    fg_store_job_t j = {0};
    assert_int_equal(fg_store_job_get(tx, c.j1, &j), 0);
    assert_int_equal(j.id, c.j1);
    assert_string_equal(j.name, "train");
    assert_int_equal(j.user_id, c.alice);
    assert_string_equal(j.username, "alice");
    assert_string_equal(j.account, "default");
    assert_string_equal(j.command_json, "[\"python\",\"train.py\"]");
    assert_string_equal(j.env_json, "{\"A\":\"1\"}");
    assert_int_equal(j.gpus, 8);
    assert_string_equal(j.gpu_type, "h100");
    assert_string_equal(j.model, "llama");
    assert_string_equal(j.dataset, "c4");
    assert_int_equal(j.priority, 2);
    assert_int_equal(j.state, 0);
    assert_int_equal(j.reason_code, 3);
    assert_string_equal(j.reason, "waiting");
    assert_int_equal(j.submit_time, 5000);
    assert_int_equal(j.start_time, 0);
    assert_int_equal(j.time_limit_s, 3600);
    assert_false(j.has_exit_code);
    assert_int_equal(j.max_retries, 2);
    assert_int_equal(j.checkpoint_interval_s, 600);
    assert_int_equal(j.cpus, 32);
    assert_int_equal(j.memory_mb, 256000);
    assert_string_equal(j.idem_key, "k1");
    assert_null(j.nodes_json);
    assert_int_equal(j.estimated_start, 6000);
    fg_store_job_clear(&j);
    assert_int_equal(fg_store_job_get_by_idem(tx, c.bob, "k1", &j), 0);
    assert_int_equal(j.id, c.j2);
    assert_null(j.env_json);
    assert_null(j.gpu_type);
    assert_null(j.model);
    fg_store_job_clear(&j);
    assert_int_equal(fg_store_job_get_by_idem(tx, c.bob, "k2", &j), FG_STORE_ENOENT);
    assert_int_equal(fg_store_job_get(tx, 987654, &j), FG_STORE_ENOENT);
    int64_t max = 0;
    assert_int_equal(fg_store_job_max_id(tx, &max), 0);
    assert_int_equal(max, c.j2 + 2);
    fg_store_read_end(tx);

    WRITE_OK(f->st, unit_job_update, &c);
    fx_reopen(f);
    tx = rd(f->st);
    assert_int_equal(fg_store_job_get(tx, c.j1, &j), 0);
    assert_int_equal(j.state, 2);
    assert_int_equal(j.start_time, 5100);
    assert_int_equal(j.end_time, 5200);
    assert_true(j.has_exit_code);
    assert_int_equal(j.exit_code, 0);
    assert_int_equal(j.attempts, 1);
    assert_int_equal(j.attained_gpu_s, 800);
    assert_true(j.cancel_requested);
    assert_int_equal(j.retries_used, 1);
    assert_int_equal(j.eligible_time, 5150);
    assert_int_equal(j.cost_micros, 12345);
    assert_int_equal(j.idle_gpu_s, 678);
    assert_null(j.reason);
    assert_string_equal(j.nodes_json, "[\"n1\"]");
    assert_string_equal(j.gpu_indices_json, "[0,1,2,3,4,5,6,7]");
    assert_string_equal(j.command_json, "[\"python\",\"train.py\"]"); /* immutable */
    fg_store_job_clear(&j);
    assert_int_equal(fg_store_job_get(tx, c.j2, &j), 0);
    assert_int_equal(j.reason_code, 2);
    assert_string_equal(j.reason, "need 8 GPUs");
    assert_int_equal(j.estimated_start, 7000);
    fg_store_job_clear(&j);
    fg_store_read_end(tx);
}

/* The server's submit unit: return the original job for a known key, else insert
 * the job and its creation event. */
typedef struct {
    int64_t user;
    const char *key;
    int64_t id;
    bool existed;
} submit_t;

static int unit_submit(fg_store_tx_t *tx, void *arg)
{
    submit_t *s = arg;
    if (s->key) {
        fg_store_job_t old = {0};
        int r = fg_store_job_get_by_idem(tx, s->user, s->key, &old);
        if (r == 0) {
            s->id = old.id;
            s->existed = true;
            fg_store_job_clear(&old);
            return 0;
        }
        if (r != FG_STORE_ENOENT)
            return r;
    }
    fg_store_job_t j = job_template(s->user, "default");
    j.idem_key = (char *)s->key;
    int r = fg_store_job_insert(tx, &j, &s->id);
    if (r != 0)
        return r;
    fg_store_event_t e = {
        .time = 1, .kind = (char *)"job", .job_id = s->id, .to_state = (char *)"PENDING"};
    return fg_store_event_append(tx, &e, NULL);
}

static int unit_one_user(fg_store_tx_t *tx, void *arg)
{
    *(int64_t *)arg = mk_user(tx, "alice");
    return 0;
}

static void test_idempotency_unit(void **state)
{
    fx_t *f = *state;
    int64_t uid = 0;
    WRITE_OK(f->st, unit_one_user, &uid);
    submit_t a = {.user = uid, .key = "abc"}, b = {.user = uid, .key = "abc"};
    WRITE_OK(f->st, unit_submit, &a);
    assert_false(a.existed);
    WRITE_OK(f->st, unit_submit, &b);
    assert_true(b.existed);
    assert_int_equal(a.id, b.id);
    fg_store_tx_t *tx = rd(f->st);
    int64_t n = 0;
    assert_int_equal(fg_store_job_count(tx, NULL, &n), 0);
    assert_int_equal(n, 1);
    fg_store_read_end(tx);
}

/* ------------------------------------------------------------------ listing */

typedef struct {
    int64_t users[3];
    int64_t ids[30];
} list_ctx_t;

static int unit_list_setup(fg_store_tx_t *tx, void *arg)
{
    list_ctx_t *c = arg;
    fg_store_account_t a = {.name = (char *)"vision",
                            .weight = 1,
                            .gpu_quota = -1,
                            .budget_micros = -1,
                            .allowed_priorities = 7};
    assert_int_equal(fg_store_account_insert(tx, &a), 0);
    c->users[0] = mk_user(tx, "u0");
    c->users[1] = mk_user(tx, "u1");
    c->users[2] = mk_user(tx, "u2");
    /* job i: user i % 3, state i % 4 (P,R,C,F), account vision when i % 5 == 0,
     * model "m<i%2>" when i % 3 != 2, dataset "d" when i < 10 */
    for (int i = 0; i < 30; i++) {
        fg_store_job_t j = job_template(c->users[i % 3], i % 5 == 0 ? "vision" : "default");
        j.state = i % 4;
        char model[8];
        snprintf(model, sizeof model, "m%d", i % 2);
        j.model = i % 3 != 2 ? model : NULL;
        j.dataset = i < 10 ? (char *)"d" : NULL;
        assert_int_equal(fg_store_job_insert(tx, &j, &c->ids[i]), 0);
    }
    return 0;
}

static bool list_pred(const list_ctx_t *c, int i, const fg_store_job_filter_t *flt)
{
    if (flt->state_mask && !(flt->state_mask & (1u << (i % 4))))
        return false;
    if (flt->user_id && flt->user_id != c->users[i % 3])
        return false;
    if (flt->account && strcmp(flt->account, i % 5 == 0 ? "vision" : "default") != 0)
        return false;
    if (flt->model) {
        if (i % 3 == 2)
            return false;
        char model[8];
        snprintf(model, sizeof model, "m%d", i % 2);
        if (strcmp(model, flt->model) != 0)
            return false;
    }
    if (flt->dataset && !(i < 10 && strcmp(flt->dataset, "d") == 0))
        return false;
    return true;
}

/* Pages through a filter with `limit` and checks the result equals the predicate's. */
static void check_listing(fg_store_t *st, const list_ctx_t *c, const fg_store_job_filter_t *flt,
                          int limit)
{
    int64_t expect[30];
    int ne = 0;
    for (int k = 0; k < 30; k++) {
        int i = flt->newest_first ? 29 - k : k;
        if (list_pred(c, i, flt))
            expect[ne++] = c->ids[i];
    }
    fg_store_tx_t *tx = rd(st);
    char *cursor = NULL;
    int got = 0, pages = 0;
    for (;;) {
        fg_store_job_list_t l = {0};
        assert_int_equal(fg_store_job_list(tx, flt, cursor, limit, &l), 0);
        free(cursor);
        cursor = NULL;
        pages++;
        for (size_t k = 0; k < l.n; k++) {
            assert_true(got < ne);
            assert_int_equal(l.items[k].id, expect[got]);
            got++;
        }
        assert_true(l.n <= (size_t)limit);
        if (l.next_cursor) {
            assert_int_equal(l.n, limit); /* only full pages have a next page */
            cursor = strdup(l.next_cursor);
        }
        fg_store_job_list_free(&l);
        if (!cursor)
            break;
    }
    assert_int_equal(got, ne);
    /* no empty trailing page: a full last page has no cursor */
    assert_int_equal(pages, ne == 0 ? 1 : (ne + limit - 1) / limit);
    int64_t n = -1;
    assert_int_equal(fg_store_job_count(tx, flt, &n), 0);
    assert_int_equal(n, ne);
    fg_store_read_end(tx);
}

static int count_cb(const fg_store_job_t *j, void *arg)
{
    int *n = arg;
    assert_non_null(j->username);
    return ++*n == 4 ? 42 : 0;
}

static void test_job_list_pagination(void **state)
{
    fx_t *f = *state;
    list_ctx_t c = {0};
    WRITE_OK(f->st, unit_list_setup, &c);
    fg_store_job_filter_t flt = {0};
    check_listing(f->st, &c, &flt, 7);
    check_listing(f->st, &c, &flt, 10); /* exact multiple: last page is empty */
    check_listing(f->st, &c, &flt, 100);
    flt.newest_first = true;
    check_listing(f->st, &c, &flt, 4);
    flt = (fg_store_job_filter_t){.state_mask = FG_STORE_JOB_LIVE_MASK};
    check_listing(f->st, &c, &flt, 4);
    flt = (fg_store_job_filter_t){.state_mask = 1u << 2, .user_id = c.users[1]};
    check_listing(f->st, &c, &flt, 2);
    flt = (fg_store_job_filter_t){.account = "vision", .newest_first = true};
    check_listing(f->st, &c, &flt, 2);
    flt = (fg_store_job_filter_t){.model = "m1", .dataset = "d"};
    check_listing(f->st, &c, &flt, 1);
    flt = (fg_store_job_filter_t){.model = "m0", .user_id = c.users[0], .state_mask = 5};
    check_listing(f->st, &c, &flt, 3);
    flt = (fg_store_job_filter_t){.model = "none"};
    check_listing(f->st, &c, &flt, 3);

    fg_store_tx_t *tx = rd(f->st);
    fg_store_job_list_t l = {0};
    assert_int_equal(fg_store_job_list(tx, NULL, "c12", 5, &l), FG_STORE_EINVAL);
    assert_int_equal(fg_store_job_list(tx, NULL, "cZZZZZZZZZZZZZZZZ", 5, &l), FG_STORE_EINVAL);
    assert_int_equal(fg_store_job_list(tx, NULL, "", 5, &l), FG_STORE_EINVAL);
    /* limit 0 means 100, over 1000 is capped */
    assert_int_equal(fg_store_job_list(tx, NULL, NULL, 0, &l), 0);
    assert_int_equal(l.n, 30);
    assert_null(l.next_cursor);
    fg_store_job_list_free(&l);
    int n = 0;
    flt = (fg_store_job_filter_t){.state_mask = FG_STORE_JOB_LIVE_MASK};
    assert_int_equal(fg_store_job_foreach(tx, &flt, count_cb, &n), 42);
    assert_int_equal(n, 4);
    fg_store_read_end(tx);

    /* cursors round-trip */
    char *cur = fg_store_cursor_encode(123456789);
    int64_t back = 0;
    assert_int_equal(fg_store_cursor_decode(cur, &back), 0);
    assert_int_equal(back, 123456789);
    free(cur);
}

/* ------------------------------------------------------------------ attempts, events */

static int unit_attempts_events(fg_store_tx_t *tx, void *arg)
{
    int64_t *job = arg;
    int64_t uid = mk_user(tx, "alice");
    fg_store_job_t j = job_template(uid, "default");
    assert_int_equal(fg_store_job_insert(tx, &j, job), 0);
    fg_store_attempt_t a = {.job_id = *job,
                            .attempt = 1,
                            .nodes_json = (char *)"[\"n1\"]",
                            .gpu_uuids_json = (char *)"[\"GPU-1\"]",
                            .start_time_ms = 1000,
                            .end_cause = -1};
    assert_int_equal(fg_store_attempt_insert(tx, &a), 0);
    assert_int_equal(fg_store_attempt_insert(tx, &a), FG_STORE_EEXIST);
    a.end_time_ms = 5000;
    a.end_cause = 4; /* preempted */
    a.has_exit_code = true;
    a.exit_code = 143;
    a.signal = 15;
    assert_int_equal(fg_store_attempt_update(tx, &a), 0);
    a.attempt = 2;
    a.start_time_ms = 6000;
    a.end_time_ms = 0;
    a.end_cause = -1;
    a.has_exit_code = false;
    a.signal = 0;
    assert_int_equal(fg_store_attempt_insert(tx, &a), 0);
    a.attempt = 3;
    assert_int_equal(fg_store_attempt_update(tx, &a), FG_STORE_ENOENT);
    a.job_id = 55555;
    a.attempt = 1;
    assert_int_equal(fg_store_attempt_insert(tx, &a), FG_STORE_ENOENT); /* no such job */

    int64_t prev = 0;
    for (int i = 0; i < 10; i++) {
        fg_store_event_t e = {.time = 100 + i,
                              .kind = (char *)(i % 3 == 2 ? "node" : "job"),
                              .job_id = i % 3 == 2 ? 0 : *job,
                              .node = i % 3 == 2 ? (char *)"n1" : NULL,
                              .from_state = i ? (char *)"PENDING" : NULL,
                              .to_state = (char *)"RUNNING",
                              .reason = i == 4 ? (char *)"preempted" : NULL,
                              .payload_json = i == 5 ? (char *)"{\"x\":1}" : NULL};
        int64_t seq = 0;
        assert_int_equal(fg_store_event_append(tx, &e, &seq), 0);
        assert_true(seq > prev);
        prev = seq;
    }
    return 0;
}

static void test_attempts_events(void **state)
{
    fx_t *f = *state;
    int64_t job = 0;
    WRITE_OK(f->st, unit_attempts_events, &job);
    fg_store_tx_t *tx = rd(f->st);
    fg_store_attempt_t a = {0};
    assert_int_equal(fg_store_attempt_get(tx, job, 1, &a), 0);
    assert_string_equal(a.nodes_json, "[\"n1\"]");
    assert_string_equal(a.gpu_uuids_json, "[\"GPU-1\"]");
    assert_int_equal(a.start_time_ms, 1000);
    assert_int_equal(a.end_time_ms, 5000);
    assert_int_equal(a.end_cause, 4);
    assert_true(a.has_exit_code);
    assert_int_equal(a.exit_code, 143);
    assert_int_equal(a.signal, 15);
    fg_store_attempt_clear(&a);
    assert_int_equal(fg_store_attempt_get(tx, job, 9, &a), FG_STORE_ENOENT);
    fg_store_attempt_list_t al = {0};
    assert_int_equal(fg_store_attempt_list(tx, job, &al), 0);
    assert_int_equal(al.n, 2);
    assert_int_equal(al.items[0].attempt, 1);
    assert_int_equal(al.items[1].attempt, 2);
    assert_false(al.items[1].has_exit_code);
    fg_store_attempt_list_free(&al);
    assert_int_equal(fg_store_attempt_list_open(tx, &al), 0);
    assert_int_equal(al.n, 1);
    assert_int_equal(al.items[0].attempt, 2);
    assert_int_equal(al.items[0].end_cause, -1);
    fg_store_attempt_list_free(&al);

    fg_store_event_list_t el = {0};
    assert_int_equal(fg_store_event_list_since(tx, 0, 4, &el), 0);
    assert_int_equal(el.n, 4);
    assert_null(el.items[0].from_state);
    assert_string_equal(el.items[1].from_state, "PENDING");
    assert_string_equal(el.items[2].kind, "node");
    assert_string_equal(el.items[2].node, "n1");
    int64_t s3 = el.items[3].seq;
    fg_store_event_list_free(&el);
    assert_int_equal(fg_store_event_list_since(tx, s3, 100, &el), 0);
    assert_int_equal(el.n, 6);
    assert_true(el.items[0].seq > s3);
    assert_string_equal(el.items[0].reason, "preempted");
    assert_string_equal(el.items[1].payload_json, "{\"x\":1}");
    assert_int_equal(el.items[1].time, 105);
    int64_t last = el.items[5].seq;
    fg_store_event_list_free(&el);
    int64_t max = 0;
    assert_int_equal(fg_store_event_max_seq(tx, &max), 0);
    assert_int_equal(max, last);
    assert_int_equal(fg_store_event_list_since(tx, max, 100, &el), 0);
    assert_int_equal(el.n, 0);
    fg_store_event_list_free(&el);
    assert_int_equal(fg_store_event_list_job(tx, job, &el), 0);
    assert_int_equal(el.n, 7);
    for (size_t i = 1; i < el.n; i++)
        assert_true(el.items[i].seq > el.items[i - 1].seq);
    fg_store_event_list_free(&el);
    fg_store_read_end(tx);
}

/* ------------------------------------------------------------------ nodes, usage */

static int unit_nodes(fg_store_tx_t *tx, void *arg)
{
    fg_store_node_t n = {.name = (char *)"n2",
                         .state = (char *)"up",
                         .cpus = 96,
                         .memory_mb = 1000000,
                         .gpus_json = (char *)"[{\"index\":0}]",
                         .last_heartbeat = 10,
                         .created_at = 10};
    assert_int_equal(fg_store_node_upsert(tx, &n), 0);
    n.name = (char *)"n1";
    assert_int_equal(fg_store_node_upsert(tx, &n), 0);
    n.name = (char *)"n3";
    assert_int_equal(fg_store_node_upsert(tx, &n), 0);
    /* re-registration: replaces all but created_at */
    n.name = (char *)"n2";
    n.cpus = 48;
    n.created_at = 99;
    n.last_heartbeat = 20;
    assert_int_equal(fg_store_node_upsert(tx, &n), 0);
    assert_int_equal(fg_store_node_set_state(tx, "n1", "draining"), 0);
    assert_int_equal(fg_store_node_set_state(tx, "zz", "down"), FG_STORE_ENOENT);
    assert_int_equal(fg_store_node_heartbeat(tx, "n1", 30), 0);
    assert_int_equal(fg_store_node_heartbeat(tx, "zz", 30), FG_STORE_ENOENT);
    assert_int_equal(fg_store_node_delete(tx, "n3"), 0);
    assert_int_equal(fg_store_node_delete(tx, "n3"), FG_STORE_ENOENT);
    return 0;
}

static void test_nodes(void **state)
{
    fx_t *f = *state;
    WRITE_OK(f->st, unit_nodes, NULL);
    fg_store_tx_t *tx = rd(f->st);
    fg_store_node_list_t l = {0};
    assert_int_equal(fg_store_node_list(tx, &l), 0);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.items[0].name, "n1");
    assert_string_equal(l.items[0].state, "draining");
    assert_int_equal(l.items[0].last_heartbeat, 30);
    assert_string_equal(l.items[1].name, "n2");
    assert_int_equal(l.items[1].cpus, 48);
    assert_int_equal(l.items[1].created_at, 10);
    assert_int_equal(l.items[1].last_heartbeat, 20);
    assert_int_equal(l.items[1].memory_mb, 1000000);
    assert_string_equal(l.items[1].gpus_json, "[{\"index\":0}]");
    fg_store_node_list_free(&l);
    fg_store_node_t n = {0};
    assert_int_equal(fg_store_node_get(tx, "n3", &n), FG_STORE_ENOENT);
    assert_int_equal(fg_store_node_get(tx, "n2", &n), 0);
    fg_store_node_clear(&n);
    fg_store_read_end(tx);
}

static const double USAGE_VALUES[] = {1234.5678901234567, 1e-300, 0.1 + 0.2, 86400.0 * 365 * 8};

static int unit_usage(fg_store_tx_t *tx, void *arg)
{
    int64_t uid = mk_user(tx, "alice");
    *(int64_t *)arg = uid;
    fg_store_usage_t u = {.account = (char *)"default", .user_id = 0, .gpu_s = 1, .as_of = 5};
    assert_int_equal(fg_store_usage_set(tx, &u), 0);
    u.gpu_s = USAGE_VALUES[0];
    u.as_of = 6;
    assert_int_equal(fg_store_usage_set(tx, &u), 0); /* replaces */
    for (int i = 1; i < 4; i++) {
        fg_store_usage_t m = {.account = (char *)"default",
                              .user_id = uid + i - 1,
                              .gpu_s = USAGE_VALUES[i],
                              .as_of = 7};
        assert_int_equal(fg_store_usage_set(tx, &m), 0);
    }
    return 0;
}

static void test_usage_exact_after_restart(void **state)
{
    fx_t *f = *state;
    int64_t uid = 0;
    WRITE_OK(f->st, unit_usage, &uid);
    fx_reopen(f);
    fg_store_tx_t *tx = rd(f->st);
    fg_store_usage_list_t l = {0};
    assert_int_equal(fg_store_usage_list(tx, &l), 0);
    assert_int_equal(l.n, 4);
    for (size_t i = 0; i < 4; i++) {
        assert_string_equal(l.items[i].account, "default");
        assert_int_equal(l.items[i].user_id, i == 0 ? 0 : uid + (int64_t)i - 1);
        assert_memory_equal(&l.items[i].gpu_s, &USAGE_VALUES[i], sizeof(double));
    }
    assert_int_equal(l.items[0].as_of, 6);
    fg_store_usage_list_free(&l);
    fg_store_usage_t u = {0};
    assert_int_equal(fg_store_usage_get(tx, "default", 0, &u), 0);
    assert_memory_equal(&u.gpu_s, &USAGE_VALUES[0], sizeof(double));
    fg_store_usage_clear(&u);
    assert_int_equal(fg_store_usage_get(tx, "nlp", 0, &u), FG_STORE_ENOENT);
    fg_store_read_end(tx);
}

/* ------------------------------------------------------------------ write units */

static int unit_fail_after_insert(fg_store_tx_t *tx, void *arg)
{
    mk_user(tx, (const char *)arg);
    return 7; /* the caller's own error: roll this unit back */
}

static int unit_nested_write(fg_store_tx_t *tx, void *arg)
{
    return fg_store_write(tx->store, unit_one_user, arg);
}

static void test_unit_rollback_and_snapshots(void **state)
{
    fx_t *f = *state;
    assert_int_equal(fg_store_write(f->st, unit_fail_after_insert, "ghost"), 7);
    int64_t uid = 0;
    WRITE_OK(f->st, unit_one_user, &uid);
    /* a unit calling fg_store_write would deadlock: refused */
    assert_int_equal(fg_store_write(f->st, unit_nested_write, &uid), FG_STORE_EINVAL);

    /* a read snapshot does not see later commits; a new one does */
    fg_store_tx_t *old = rd(f->st);
    int64_t n = 0;
    assert_int_equal(fg_store_user_count(old, &n), 0);
    assert_int_equal(n, 1);
    submit_t s = {.user = uid};
    WRITE_OK(f->st, unit_submit, &s);
    fg_store_job_t j = {0};
    assert_int_equal(fg_store_job_get(old, s.id, &j), FG_STORE_ENOENT);
    fg_store_tx_t *fresh = rd(f->st);
    assert_int_equal(fg_store_job_get(fresh, s.id, &j), 0);
    fg_store_job_clear(&j);
    fg_store_user_t u = {0};
    assert_int_equal(fg_store_user_get_by_name(fresh, "ghost", &u), FG_STORE_ENOENT);
    fg_store_read_end(fresh);
    fg_store_read_end(old);

    fg_store_stats_t stats;
    fg_store_get_stats(f->st, &stats);
    assert_true(stats.units >= 4);
    assert_true(stats.units_failed >= 2);
    assert_int_equal(stats.queue_len, 0);
}

/* ------------------------------------------------------------------ group commit */

#define GC_THREADS        64
#define GC_MAX_PER_THREAD 100000

/* Submissions per thread: 150, or FG_STORE_BENCH_N from the environment to use this
 * test as a benchmark (e.g. FG_STORE_BENCH_N=2000 build/.../test_store). */
static int gc_per_thread(void)
{
    const char *e = getenv("FG_STORE_BENCH_N");
    if (e) {
        char *end;
        long n = strtol(e, &end, 10);
        if (*e && !*end && n > 0 && n <= GC_MAX_PER_THREAD)
            return (int)n;
    }
    return 150;
}

typedef struct {
    fg_store_t *st;
    int64_t user;
    int per_thread;
    int64_t *ids;
    int failures;
} gc_arg_t;

static void *gc_thread(void *p)
{
    gc_arg_t *a = p;
    for (int i = 0; i < a->per_thread; i++) {
        submit_t s = {.user = a->user};
        if (fg_store_write(a->st, unit_submit, &s) != 0)
            a->failures++;
        a->ids[i] = s.id;
        if (i % 16 == 0) { /* readers run alongside the writer */
            fg_store_tx_t *tx = NULL;
            if (fg_store_read_begin(a->st, &tx) != 0) {
                a->failures++;
                continue;
            }
            fg_store_job_t j = {0};
            if (fg_store_job_get(tx, s.id, &j) != 0) /* acknowledged: visible */
                a->failures++;
            fg_store_job_clear(&j);
            fg_store_read_end(tx);
        }
    }
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void test_group_commit_many_threads(void **state)
{
    fx_t *f = *state;
    int64_t uid = 0;
    WRITE_OK(f->st, unit_one_user, &uid);
    fg_store_stats_t before;
    fg_store_get_stats(f->st, &before);
    static gc_arg_t args[GC_THREADS];
    pthread_t th[GC_THREADS];
    double t0 = now_s();
    int per = gc_per_thread();
    for (int i = 0; i < GC_THREADS; i++) {
        args[i] = (gc_arg_t){.st = f->st,
                             .user = uid,
                             .per_thread = per,
                             .ids = calloc((size_t)per, sizeof(int64_t))};
        assert_int_equal(pthread_create(&th[i], NULL, gc_thread, &args[i]), 0);
    }
    for (int i = 0; i < GC_THREADS; i++)
        pthread_join(th[i], NULL);
    double dt = now_s() - t0;
    fg_store_stats_t after;
    fg_store_get_stats(f->st, &after);
    uint64_t units = after.units - before.units, commits = after.commits - before.commits;
    fprintf(stderr,
            "group commit: %d threads x %d durable submissions (job + event) in %.3f s ="
            " %.0f/s; %llu commits, %.1f units per commit, largest batch %llu;"
            " writer busy %.3f s of which commit (fsync) %.3f s\n",
            GC_THREADS, per, dt, GC_THREADS * per / dt, (unsigned long long)commits,
            (double)units / (double)commits, (unsigned long long)after.max_batch,
            (after.batch_us - before.batch_us) / 1e6, (after.commit_us - before.commit_us) / 1e6);
    assert_int_equal(units, GC_THREADS * per);
    /* concurrent units share commits (loosely: a disk with a free fsync, e.g. tmpfs,
     * gives smaller batches) */
    assert_true(commits < units);
    assert_true(after.max_batch >= 2);
    for (int i = 0; i < GC_THREADS; i++)
        assert_int_equal(args[i].failures, 0);

    fx_reopen(f);
    fg_store_tx_t *tx = rd(f->st);
    int64_t n = 0;
    assert_int_equal(fg_store_job_count(tx, NULL, &n), 0);
    assert_int_equal(n, GC_THREADS * per);
    for (int i = 0; i < GC_THREADS; i++)
        for (int k = 0; k < per; k++) {
            fg_store_job_t j = {0};
            assert_int_equal(fg_store_job_get(tx, args[i].ids[k], &j), 0);
            fg_store_job_clear(&j);
        }
    int64_t seq = 0;
    assert_int_equal(fg_store_event_max_seq(tx, &seq), 0);
    assert_int_equal(seq, GC_THREADS * per);
    fg_store_read_end(tx);
    for (int i = 0; i < GC_THREADS; i++)
        free(args[i].ids);
}

/* Reopens the fixture's store with opts.wal_checkpoint_pages = pages; returns the id of
 * a new user. */
static int64_t reopen_with_wal_limit(fx_t *f, int pages)
{
    fg_store_close(f->st);
    fg_store_opts_t opts = {.wal_checkpoint_pages = pages};
    assert_int_equal(fg_store_open_sqlite(f->path, &opts, &f->st, NULL), 0);
    int64_t uid = 0;
    WRITE_OK(f->st, unit_one_user, &uid);
    return uid;
}

/* With a small checkpoint size the WAL keeps restarting under a steady stream of
 * commits from many threads, instead of growing with every commit. */
static void test_wal_stays_bounded(void **state)
{
    fx_t *f = *state;
    int64_t uid = reopen_with_wal_limit(f, 200);
    static gc_arg_t args[16];
    pthread_t th[16];
    for (int i = 0; i < 16; i++) {
        args[i] = (gc_arg_t){
            .st = f->st, .user = uid, .per_thread = 150, .ids = calloc(150, sizeof(int64_t))};
        assert_int_equal(pthread_create(&th[i], NULL, gc_thread, &args[i]), 0);
    }
    for (int i = 0; i < 16; i++)
        pthread_join(th[i], NULL);
    fg_store_stats_t stats;
    fg_store_get_stats(f->st, &stats);
    char wal[320];
    snprintf(wal, sizeof wal, "%s-wal", f->path);
    struct stat sb;
    assert_int_equal(stat(wal, &sb), 0);
    fprintf(stderr,
            "wal: %llu complete checkpoints, %llu pages after the last commit, file %lld KiB;"
            " writer paused %.1f ms for them in all, %.1f ms at most\n",
            (unsigned long long)stats.checkpoints, (unsigned long long)stats.wal_pages,
            (long long)sb.st_size / 1024, stats.checkpoint_us / 1e3, stats.max_checkpoint_us / 1e3);
    assert_true(stats.checkpoints >= 2);
    assert_true(stats.max_checkpoint_us > 0 && stats.checkpoint_us >= stats.max_checkpoint_us);
    /* it restarted: far below what 2400 submissions append (several MB) */
    assert_true(sb.st_size < 4 * 200 * 4096 + 1024 * 1024);
    for (int i = 0; i < 16; i++) {
        assert_int_equal(args[i].failures, 0);
        free(args[i].ids);
    }
}

/* The checkpointer thread copies the WAL into the database in the background once the
 * WAL passes a quarter of wal_checkpoint_pages, before the writer's own checkpoint at
 * the whole: the database file grows while the WAL is still below the whole. (Its
 * connection must have read once, or SQLite's checkpoint call copies nothing.) */
static void test_checkpointer_copies_in_background(void **state)
{
    fx_t *f = *state;
    int64_t uid = reopen_with_wal_limit(f, 4000);
    struct stat sb;
    assert_int_equal(stat(f->path, &sb), 0);
    off_t db0 = sb.st_size;
    fg_store_stats_t stats;
    int n = 0;
    do { /* past a quarter (1000 pages), well below the whole */
        submit_t sub = {.user = uid};
        WRITE_OK(f->st, unit_submit, &sub);
        fg_store_get_stats(f->st, &stats);
        n++;
    } while (stats.wal_pages < 1500 && n < 100000);
    assert_true(stats.wal_pages >= 1500 && stats.wal_pages < 4000);
    off_t db1 = db0;
    for (int i = 0; i < 300 && db1 <= db0; i++) { /* up to 3 s */
        usleep(10000);
        assert_int_equal(stat(f->path, &sb), 0);
        db1 = sb.st_size;
    }
    fprintf(stderr, "checkpointer: %d submissions, WAL %llu pages, database %lld -> %lld KiB\n", n,
            (unsigned long long)stats.wal_pages, (long long)db0 / 1024, (long long)db1 / 1024);
    assert_true(db1 > db0);
    assert_int_equal(stats.checkpoints, 0); /* the writer did not complete one itself */
}

/* ------------------------------------------------------------------ async writes */

#define ASYNC_N 2000

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, ok, failed_with_7;
} async_ctx_t;

static void async_done(int rc, void *arg)
{
    async_ctx_t *c = arg;
    pthread_mutex_lock(&c->mu);
    c->done++;
    c->ok += rc == 0;
    c->failed_with_7 += rc == 7;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void test_write_async(void **state)
{
    fx_t *f = *state;
    int64_t uid = 0;
    WRITE_OK(f->st, unit_one_user, &uid);
    static submit_t subs[ASYNC_N];
    async_ctx_t c = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    fg_store_stats_t before, after;
    fg_store_get_stats(f->st, &before);
    double t0 = now_s();
    /* one thread keeps many units in flight: they share commits */
    for (int i = 0; i < ASYNC_N; i++) {
        subs[i] = (submit_t){.user = uid};
        assert_int_equal(fg_store_write_async(f->st, unit_submit, &subs[i], async_done, &c), 0);
    }
    assert_int_equal(fg_store_write_async(f->st, unit_fail_after_insert, "ghost", async_done, &c),
                     0);
    assert_int_equal(fg_store_write_async(f->st, unit_submit, &subs[0], NULL, &c), FG_STORE_EINVAL);
    pthread_mutex_lock(&c.mu);
    while (c.done < ASYNC_N + 1)
        pthread_cond_wait(&c.cv, &c.mu);
    pthread_mutex_unlock(&c.mu);
    double dt = now_s() - t0;
    fg_store_get_stats(f->st, &after);
    fprintf(stderr,
            "async: %d durable submissions (job + event) queued at once in %.3f s = %.0f/s;"
            " %llu commits; unit CPU %.1f us\n",
            ASYNC_N, dt, ASYNC_N / dt, (unsigned long long)(after.commits - before.commits),
            (double)((after.batch_us - before.batch_us) - (after.commit_us - before.commit_us)) /
                (double)(after.units - before.units));
    assert_int_equal(c.ok, ASYNC_N);
    assert_int_equal(c.failed_with_7, 1);
    assert_true(after.commits - before.commits < ASYNC_N / 2);
    /* closing runs what is queued and calls every completion before it returns */
    static submit_t late[50];
    async_ctx_t c2 = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    for (int i = 0; i < 50; i++) {
        late[i] = (submit_t){.user = uid};
        assert_int_equal(fg_store_write_async(f->st, unit_submit, &late[i], async_done, &c2), 0);
    }
    fx_reopen(f);
    assert_int_equal(c2.done, 50);
    assert_int_equal(c2.ok, 50);
    fg_store_tx_t *tx = rd(f->st);
    int64_t n = 0;
    assert_int_equal(fg_store_job_count(tx, NULL, &n), 0);
    assert_int_equal(n, ASYNC_N + 50);
    fg_store_job_t j = {0};
    assert_int_equal(fg_store_job_get(tx, subs[ASYNC_N - 1].id, &j), 0);
    fg_store_job_clear(&j);
    fg_store_user_t u = {0};
    assert_int_equal(fg_store_user_get_by_name(tx, "ghost", &u), FG_STORE_ENOENT);
    fg_store_read_end(tx);
}

/* A unit that holds the writer until released, so that the units queued meanwhile
 * form the next batch together. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool entered, open;
} gate_t;

static int unit_gate(fg_store_tx_t *tx, void *arg)
{
    (void)tx;
    gate_t *g = arg;
    pthread_mutex_lock(&g->mu);
    g->entered = true;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    return 0;
}

/* Waits until c->done reaches n. */
static void async_wait(async_ctx_t *c, int n)
{
    pthread_mutex_lock(&c->mu);
    while (c->done < n)
        pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

/* Scenario: a store with a commit delay of 1 s that applies after batches of 2 units or
 * more, and batches of at most 4. Expected: a lone write after an idle store commits at
 * once; once a batch held 3 units, a unit waits for company (units queued 50 ms apart
 * share one commit, started no earlier than the delay); a full queue starts its batch
 * without waiting; a lone write after a batch of one commits at once again; closing
 * ends a wait at once, and every unit is durable. */
static void test_commit_delay(void **state)
{
    fx_t *f = *state;
    fg_store_close(f->st);
    fg_store_opts_t opts = {.max_batch = 4, .commit_delay_us = 1000000, .commit_siblings = 2};
    assert_int_equal(fg_store_open_sqlite(f->path, &opts, &f->st, NULL), 0);
    int64_t uid = 0;
    double t0 = now_s();
    WRITE_OK(f->st, unit_one_user, &uid);
    assert_true(now_s() - t0 < 0.9); /* the previous batch (none) held fewer than 2 */
    /* a batch of 3: the gate holds the writer while three units queue behind it */
    gate_t g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    async_ctx_t c = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    assert_int_equal(fg_store_write_async(f->st, unit_gate, &g, async_done, &c), 0);
    pthread_mutex_lock(&g.mu);
    while (!g.entered)
        pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    static submit_t sub[17];
    for (int i = 0; i < 3; i++) {
        sub[i] = (submit_t){.user = uid};
        assert_int_equal(fg_store_write_async(f->st, unit_submit, &sub[i], async_done, &c), 0);
    }
    pthread_mutex_lock(&g.mu);
    g.open = true;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    async_wait(&c, 4);
    /* under load: three units 50 ms apart share one commit after the delay */
    fg_store_stats_t before, after;
    fg_store_get_stats(f->st, &before);
    t0 = now_s();
    for (int i = 3; i < 6; i++) {
        sub[i] = (submit_t){.user = uid};
        assert_int_equal(fg_store_write_async(f->st, unit_submit, &sub[i], async_done, &c), 0);
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    async_wait(&c, 7);
    double waited = now_s() - t0;
    fg_store_get_stats(f->st, &after);
    assert_int_equal(after.commits - before.commits, 1);
    assert_true(waited >= 0.99);
    /* a full queue (4 units) does not wait */
    fg_store_get_stats(f->st, &before);
    t0 = now_s();
    for (int i = 6; i < 10; i++) {
        sub[i] = (submit_t){.user = uid};
        assert_int_equal(fg_store_write_async(f->st, unit_submit, &sub[i], async_done, &c), 0);
    }
    async_wait(&c, 11);
    assert_true(now_s() - t0 < 0.9);
    fg_store_get_stats(f->st, &after);
    assert_int_equal(after.commits - before.commits, 1);
    assert_int_equal(after.max_batch, 4);
    /* a lone unit after a batch of 4 waits; the next, after a batch of 1, does not */
    sub[10] = (submit_t){.user = uid};
    t0 = now_s();
    WRITE_OK(f->st, unit_submit, &sub[10]);
    assert_true(now_s() - t0 >= 0.99);
    sub[11] = (submit_t){.user = uid};
    t0 = now_s();
    WRITE_OK(f->st, unit_submit, &sub[11]);
    assert_true(now_s() - t0 < 0.9);
    /* after another full batch a unit waits; closing the store ends the wait at once
     * and commits it */
    for (int i = 12; i < 16; i++) {
        sub[i] = (submit_t){.user = uid};
        assert_int_equal(fg_store_write_async(f->st, unit_submit, &sub[i], async_done, &c), 0);
    }
    async_wait(&c, 15);
    sub[16] = (submit_t){.user = uid};
    assert_int_equal(fg_store_write_async(f->st, unit_submit, &sub[16], async_done, &c), 0);
    t0 = now_s();
    fx_reopen(f);
    assert_true(now_s() - t0 < 0.9);
    assert_int_equal(c.done, 16);
    assert_int_equal(c.ok, 16);
    fg_store_tx_t *tx = rd(f->st);
    int64_t n = 0;
    assert_int_equal(fg_store_job_count(tx, NULL, &n), 0);
    assert_int_equal(n, 17);
    fg_store_read_end(tx);
}

/* Scenario: one batch holds [submit, failing unit, submit]. Expected: the batch runs
 * again with savepoints (one rerun); both submissions commit with the ids the second
 * pass gave them, the failing unit's user does not exist, and it gets its own code. */
static void test_failing_unit_in_batch(void **state)
{
    fx_t *f = *state;
    int64_t uid = 0;
    WRITE_OK(f->st, unit_one_user, &uid);
    gate_t g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    async_ctx_t c = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    fg_store_stats_t before, after;
    fg_store_get_stats(f->st, &before);
    assert_int_equal(fg_store_write_async(f->st, unit_gate, &g, async_done, &c), 0);
    pthread_mutex_lock(&g.mu);
    while (!g.entered)
        pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    submit_t a = {.user = uid}, b = {.user = uid};
    assert_int_equal(fg_store_write_async(f->st, unit_submit, &a, async_done, &c), 0);
    assert_int_equal(fg_store_write_async(f->st, unit_fail_after_insert, "ghost", async_done, &c),
                     0);
    assert_int_equal(fg_store_write_async(f->st, unit_submit, &b, async_done, &c), 0);
    pthread_mutex_lock(&g.mu);
    g.open = true;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    pthread_mutex_lock(&c.mu);
    while (c.done < 4)
        pthread_cond_wait(&c.cv, &c.mu);
    pthread_mutex_unlock(&c.mu);
    fg_store_get_stats(f->st, &after);
    assert_int_equal(c.ok, 3);
    assert_int_equal(c.failed_with_7, 1);
    assert_int_equal(after.commits - before.commits, 2);
    assert_int_equal(after.reruns - before.reruns, 1);
    assert_int_equal(after.units_failed - before.units_failed, 1);
    assert_true(a.id > 0 && b.id == a.id + 1);
    fg_store_tx_t *tx = rd(f->st);
    fg_store_job_t j = {0};
    assert_int_equal(fg_store_job_get(tx, a.id, &j), 0);
    fg_store_job_clear(&j);
    assert_int_equal(fg_store_job_get(tx, b.id, &j), 0);
    fg_store_job_clear(&j);
    fg_store_user_t u = {0};
    assert_int_equal(fg_store_user_get_by_name(tx, "ghost", &u), FG_STORE_ENOENT);
    fg_store_read_end(tx);
}

/* ------------------------------------------------------------------ crash */

/* A child process submits from 8 threads and writes each acknowledged job id to a pipe
 * only after fg_store_write returned 0. The parent kills it with SIGKILL mid-stream,
 * reopens the file and checks that every acknowledged job is there, and that every
 * job has its creation event (no unit is half-written). */
typedef struct {
    fg_store_t *st;
    int64_t user;
    int fd;
} crash_arg_t;

static void *crash_writer(void *p)
{
    crash_arg_t *a = p;
    for (;;) {
        submit_t s = {.user = a->user};
        if (fg_store_write(a->st, unit_submit, &s) != 0)
            _exit(3);
        if (write(a->fd, &s.id, sizeof s.id) != (ssize_t)sizeof s.id)
            _exit(4);
    }
    return NULL;
}

/* Runs one child until `want` acknowledgements arrived, kills it with SIGKILL, and
 * appends every id it acknowledged to acked[*n]. */
static void crash_round(const char *path, int64_t uid, int64_t *acked, size_t cap, size_t *n,
                        size_t want)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        /* a small WAL limit: kills also land inside checkpoints and WAL restarts */
        fg_store_opts_t opts = {.wal_checkpoint_pages = 64};
        fg_store_t *st = NULL;
        if (fg_store_open_sqlite(path, &opts, &st, NULL) != 0)
            _exit(2);
        crash_arg_t a = {.st = st, .user = uid, .fd = fds[1]};
        pthread_t th[8];
        for (int i = 0; i < 8; i++)
            pthread_create(&th[i], NULL, crash_writer, &a);
        for (;;)
            pause();
    }
    close(fds[1]);
    size_t target = *n + want;
    while (*n < target) {
        ssize_t r = read(fds[0], &acked[*n], sizeof acked[0]);
        assert_int_equal(r, (ssize_t)sizeof acked[0]);
        (*n)++;
    }
    kill(pid, SIGKILL);
    /* drain what the child acknowledged before it died */
    while (*n < cap) {
        ssize_t r = read(fds[0], &acked[*n], sizeof acked[0]);
        if (r != (ssize_t)sizeof acked[0])
            break;
        (*n)++;
    }
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

static void test_crash_kill9(void **state)
{
    fx_t *f = *state;
    int64_t uid = 0;
    WRITE_OK(f->st, unit_one_user, &uid);
    fg_store_close(f->st);
    f->st = NULL;
    static int64_t acked[1 << 16];
    size_t nacked = 0;
    const size_t wants[] = {900, 500, 700};
    for (int round = 0; round < 3; round++) {
        crash_round(f->path, uid, acked, sizeof acked / sizeof acked[0], &nacked, wants[round]);
        fx_open(f);
        fg_store_tx_t *tx = rd(f->st);
        for (size_t i = 0; i < nacked; i++) {
            fg_store_job_t j = {0};
            assert_int_equal(fg_store_job_get(tx, acked[i], &j), 0);
            fg_store_job_clear(&j);
        }
        int64_t jobs = 0, seq = 0;
        assert_int_equal(fg_store_job_count(tx, NULL, &jobs), 0);
        assert_int_equal(fg_store_event_max_seq(tx, &seq), 0);
        assert_true(jobs >= (int64_t)nacked);
        /* each job with its one event, seqs without a hole: nothing half-written */
        assert_int_equal(seq, jobs);
        int64_t since = 0, nev = 0;
        for (;;) {
            fg_store_event_list_t el = {0};
            assert_int_equal(fg_store_event_list_since(tx, since, 5000, &el), 0);
            for (size_t i = 0; i < el.n; i++) {
                assert_int_equal(el.items[i].seq, ++nev);
                fg_store_job_t j = {0};
                assert_int_equal(fg_store_job_get(tx, el.items[i].job_id, &j), 0);
                fg_store_job_clear(&j);
            }
            size_t got = el.n;
            if (got)
                since = el.items[got - 1].seq;
            fg_store_event_list_free(&el);
            if (!got)
                break;
        }
        assert_int_equal(nev, jobs);
        fg_store_read_end(tx);
        fprintf(stderr,
                "crash round %d: %zu acknowledged in all before kill -9, %lld jobs on disk\n",
                round + 1, nacked, (long long)jobs);
        fg_store_close(f->st);
        f->st = NULL;
    }
    fx_open(f);
}

/* ------------------------------------------------------------------ migrations */

static void test_migration_from_v1(void **state)
{
    fx_t *f = *state;
    fg_store_close(f->st);
    f->st = NULL;
    char p[320];
    snprintf(p, sizeof p, "%s.v1", f->path);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    char *err = NULL;
    assert_int_equal(fg_store_sqlite_migrate(db, 1, &err), 0);
    assert_int_equal(sqlite3_exec(db,
                                  "INSERT INTO users (id, username, email, password_hash, role,"
                                  " disabled, created_at) VALUES (1, 'old', 'o@x', 'h', 1, 0, 5);"
                                  "INSERT INTO jobs (name, user_id, account, command, gpus,"
                                  " priority, state, reason_code, submit_time, start_time,"
                                  " end_time, time_limit_s, attempts, max_retries, retries_used,"
                                  " attained_gpu_s, cancel_requested, eligible_time,"
                                  " checkpoint_interval_s, cpus, memory_mb, model,"
                                  " estimated_start, cost_micros) VALUES ('legacy', 1, 'default',"
                                  " '\"true\"', 2, 1, 0, 0, 9, 0, 0, 60, 0, 0, 0, 0, 0, 0, 0, 0,"
                                  " 0, 'bert', 0, 0);",
                                  NULL, NULL, &err),
                     SQLITE_OK);
    sqlite3_close(db);

    fg_store_t *st = NULL;
    assert_int_equal(fg_store_open_sqlite(p, NULL, &st, &err), 0);
    assert_int_equal(fg_store_schema_version(st), fg_store_sqlite_latest_version());
    fg_store_tx_t *tx = rd(st);
    fg_store_job_filter_t flt = {.model = "bert"};
    fg_store_job_list_t l = {0};
    assert_int_equal(fg_store_job_list(tx, &flt, NULL, 10, &l), 0);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.items[0].name, "legacy");
    assert_string_equal(l.items[0].username, "old");
    fg_store_job_list_free(&l);
    fg_store_read_end(tx);
    fg_store_close(st);

    /* version 2 created jobs_model and version 3 dropped it with the other job indexes
     * that no query of the controller needs; the idempotency key's and the per-job
     * events' indexes remain (the listing above ran without jobs_model) */
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    sqlite3_stmt *s = NULL;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT group_concat(name, ' ') FROM (SELECT name FROM"
                                        " sqlite_master WHERE type = 'index' AND name IN"
                                        " ('jobs_model', 'jobs_dataset', 'jobs_state', 'jobs_user',"
                                        " 'jobs_account', 'jobs_idem', 'events_job', 'audit_admin')"
                                        " ORDER BY name)",
                                        -1, &s, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(s, 0),
                        "audit_admin events_job jobs_idem");
    sqlite3_finalize(s);
    /* a file from a newer fairgpu is refused with a clear message */
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    st = (fg_store_t *)1;
    assert_int_equal(fg_store_open_sqlite(p, NULL, &st, &err), FG_STORE_EVERSION);
    assert_null(st);
    assert_non_null(err);
    assert_non_null(strstr(err, "99"));
    free(err);
    const char *suffixes[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        char q[340];
        snprintf(q, sizeof q, "%s%s", p, suffixes[i]);
        unlink(q);
    }
    fx_open(f);
}

/* ------------------------------------------------------------------ ledger */

/* A ledger row of job 7 attempt 1 with every field set to something distinct. */
static fg_ledger_row_t ledger_row(uint64_t id, fg_row_kind_t kind, bool interim, int64_t start,
                                  int64_t end)
{
    fg_ledger_row_t r = {0};
    r.id = id;
    r.kind = kind;
    r.interim = interim;
    r.job_id = 7;
    r.attempt = 1;
    snprintf(r.account, sizeof r.account, "vision");
    snprintf(r.user, sizeof r.user, "alice");
    snprintf(r.node, sizeof r.node, "gpu-01");
    snprintf(r.gpu_type, sizeof r.gpu_type, "h100");
    r.priority = FG_PRIO_HIGH;
    r.origin_ms = 1000;
    r.start_ms = start;
    r.end_ms = end;
    r.gpus = 8;
    r.cause = kind == FG_ROW_CHARGE && interim ? FG_END_COMPLETED : FG_END_PREEMPTED;
    r.rate = 2500000;
    r.gpu_ms = 8 * (end - start);
    r.amount_micros = kind == FG_ROW_CHARGE ? 1234 : -567;
    r.refers_to = kind == FG_ROW_REFUND ? 2 : 0;
    r.refund_why = kind == FG_ROW_REFUND ? FG_REFUND_LOST_WORK : FG_REFUND_NONE;
    snprintf(r.note, sizeof r.note, "row %llu", (unsigned long long)id);
    return r;
}

static int unit_ledger(fg_store_tx_t *tx, void *arg)
{
    (void)arg;
    uint64_t max = 99;
    assert_int_equal(fg_store_ledger_max_id(tx, &max), 0);
    assert_int_equal(max, 0);
    /* attempt (7, 1): an interim accrual, the final charge, a refund */
    fg_ledger_row_t r = ledger_row(1, FG_ROW_CHARGE, true, 1000, 5000);
    assert_int_equal(fg_store_ledger_append(tx, &r), 0);
    r = ledger_row(2, FG_ROW_CHARGE, false, 5000, 9000);
    assert_int_equal(fg_store_ledger_append(tx, &r), 0);
    r = ledger_row(3, FG_ROW_REFUND, false, 7000, 9000);
    assert_int_equal(fg_store_ledger_append(tx, &r), 0);
    /* a second final charge of the attempt is refused; so is a taken id */
    r = ledger_row(4, FG_ROW_CHARGE, false, 9000, 9500);
    assert_int_equal(fg_store_ledger_append(tx, &r), FG_STORE_EEXIST);
    r = ledger_row(2, FG_ROW_CHARGE, true, 9000, 9500);
    assert_int_equal(fg_store_ledger_append(tx, &r), FG_STORE_EEXIST);
    /* more interim rows and refunds of the same attempt are fine */
    r = ledger_row(4, FG_ROW_CHARGE, true, 9000, 9000);
    assert_int_equal(fg_store_ledger_append(tx, &r), 0);
    r = ledger_row(5, FG_ROW_REFUND, false, 8000, 9000);
    assert_int_equal(fg_store_ledger_append(tx, &r), 0);
    /* attempt 2 of the same job gets its own final charge, by bob on an a100 */
    r = ledger_row(6, FG_ROW_CHARGE, false, 20000, 30000);
    r.attempt = 2;
    snprintf(r.user, sizeof r.user, "bob");
    snprintf(r.gpu_type, sizeof r.gpu_type, "a100");
    assert_int_equal(fg_store_ledger_append(tx, &r), 0);
    /* credits (job 0): many, none unique; one at 30000, zero length */
    for (uint64_t id = 7; id <= 8; id++) {
        r = ledger_row(id, FG_ROW_CREDIT, false, 30000, 30000);
        r.job_id = 0;
        r.attempt = 0;
        r.gpus = 0;
        r.gpu_ms = 0;
        snprintf(r.node, sizeof r.node, "%s", "");
        assert_int_equal(fg_store_ledger_append(tx, &r), 0);
    }
    /* another account */
    r = ledger_row(9, FG_ROW_CHARGE, false, 10000, 40000);
    r.job_id = 8;
    snprintf(r.account, sizeof r.account, "nlp");
    assert_int_equal(fg_store_ledger_append(tx, &r), 0);
    /* a final charge of job 0 is not unique: admin rows carry no job */
    r = ledger_row(10, FG_ROW_CHARGE, false, 40000, 40000);
    r.job_id = 0;
    assert_int_equal(fg_store_ledger_append(tx, &r), 0);
    r.id = 11;
    assert_int_equal(fg_store_ledger_append(tx, &r), 0);
    return 0;
}

typedef struct collect {
    uint64_t ids[32];
    int n;
    int stop_after; /* 0: never */
} collect_t;

static int collect_row(const fg_ledger_row_t *r, void *arg)
{
    collect_t *c = arg;
    assert_true(c->n < 32);
    if (c->n > 0)
        assert_true(r->id > c->ids[c->n - 1]);
    c->ids[c->n++] = r->id;
    return c->stop_after && c->n >= c->stop_after ? 42 : 0;
}

/* The ids a filter gives, as "1 2 3". */
static const char *scan_ids(fg_store_tx_t *tx, const fg_store_ledger_filter_t *f, char *buf,
                            size_t cap)
{
    collect_t c = {0};
    assert_int_equal(fg_store_ledger_foreach(tx, f, collect_row, &c), 0);
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < c.n; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%llu", i ? " " : "",
                              (unsigned long long)c.ids[i]);
    return buf;
}

/* Asserts that the row read back with w's id equals w, field by field; other rows pass.
 * Returns 1 (stops the scan) once it has checked it. */
static int check_row(const fg_ledger_row_t *r, void *arg)
{
    const fg_ledger_row_t *w = arg;
    if (r->id != w->id)
        return 0;
    assert_int_equal(r->kind, w->kind);
    assert_int_equal(r->interim, w->interim);
    assert_int_equal(r->job_id, w->job_id);
    assert_int_equal(r->attempt, w->attempt);
    assert_string_equal(r->account, w->account);
    assert_string_equal(r->user, w->user);
    assert_string_equal(r->node, w->node);
    assert_string_equal(r->gpu_type, w->gpu_type);
    assert_int_equal(r->priority, w->priority);
    assert_int_equal(r->origin_ms, w->origin_ms);
    assert_int_equal(r->start_ms, w->start_ms);
    assert_int_equal(r->end_ms, w->end_ms);
    assert_int_equal(r->gpus, w->gpus);
    assert_int_equal(r->cause, w->cause);
    assert_int_equal(r->rate, w->rate);
    assert_int_equal(r->gpu_ms, w->gpu_ms);
    assert_int_equal(r->amount_micros, w->amount_micros);
    assert_int_equal(r->refers_to, w->refers_to);
    assert_int_equal(r->refund_why, w->refund_why);
    assert_string_equal(r->note, w->note);
    return 1;
}

static void test_ledger(void **state)
{
    fx_t *f = *state;
    WRITE_OK(f->st, unit_ledger, NULL);
    fx_reopen(f);
    fg_store_tx_t *tx = rd(f->st);
    uint64_t max = 0;
    assert_int_equal(fg_store_ledger_max_id(tx, &max), 0);
    assert_int_equal(max, 11);
    int64_t to = -1;
    assert_int_equal(fg_store_ledger_charged_to(tx, 7, 1, &to), 0);
    assert_int_equal(to, 9000); /* charge rows only: the refund ends at 9000 too */
    assert_int_equal(fg_store_ledger_charged_to(tx, 7, 2, &to), 0);
    assert_int_equal(to, 30000);
    assert_int_equal(fg_store_ledger_charged_to(tx, 7, 3, &to), 0);
    assert_int_equal(to, 0);

    /* every field reads back as written */
    fg_ledger_row_t want = ledger_row(2, FG_ROW_CHARGE, false, 5000, 9000);
    collect_t one = {.stop_after = 1};
    fg_store_ledger_filter_t fl = {.job_id = 7, .from_ms = 5000, .to_ms = 6000};
    /* rows of job 7 touching [5000, 6000): only 2 (1 ends at 5000, 3 starts at 7000) */
    char buf[256];
    assert_string_equal(scan_ids(tx, &fl, buf, sizeof buf), "2");
    assert_int_equal(fg_store_ledger_foreach(tx, &fl, check_row, &want), 1);
    fg_ledger_row_t ref = ledger_row(3, FG_ROW_REFUND, false, 7000, 9000);
    fl = (fg_store_ledger_filter_t){.job_id = 7, .from_ms = 7000, .to_ms = 7001};
    assert_string_equal(scan_ids(tx, &fl, buf, sizeof buf), "2 3");
    assert_int_equal(fg_store_ledger_foreach(tx, &fl, check_row, &ref), 1);

    /* no filter: everything by id; fn's non-zero value stops the scan */
    assert_string_equal(scan_ids(tx, NULL, buf, sizeof buf), "1 2 3 4 5 6 7 8 9 10 11");
    assert_int_equal(fg_store_ledger_foreach(tx, NULL, collect_row, &one), 42);
    assert_int_equal(one.n, 1);
    fl = (fg_store_ledger_filter_t){.account = "vision"};
    assert_string_equal(scan_ids(tx, &fl, buf, sizeof buf), "1 2 3 4 5 6 7 8 10 11");
    fl = (fg_store_ledger_filter_t){.account = "vision", .user = "bob"};
    assert_string_equal(scan_ids(tx, &fl, buf, sizeof buf), "6");
    fl = (fg_store_ledger_filter_t){.gpu_type = "h100", .job_id = 8};
    assert_string_equal(scan_ids(tx, &fl, buf, sizeof buf), "9");
    fl = (fg_store_ledger_filter_t){.gpu_type = "a100"};
    assert_string_equal(scan_ids(tx, &fl, buf, sizeof buf), "6");
    fl = (fg_store_ledger_filter_t){.user = "nobody"};
    assert_string_equal(scan_ids(tx, &fl, buf, sizeof buf), "");

    /* the range rule: start < to and (end > from or start >= from) */
    fl = (fg_store_ledger_filter_t){.account = "vision", .from_ms = 9000, .to_ms = 30000};
    /* 4 is [9000, 9000): zero length, counts where it starts; 1..3, 5 end at or before
     * 9000; 6 starts at 20000; the credits at 30000 start at the range's end */
    assert_string_equal(scan_ids(tx, &fl, buf, sizeof buf), "4 6");
    fl.to_ms = 30001;
    assert_string_equal(scan_ids(tx, &fl, buf, sizeof buf), "4 6 7 8");
    fl = (fg_store_ledger_filter_t){.account = "vision", .from_ms = 30000, .to_ms = 40000};
    assert_string_equal(scan_ids(tx, &fl, buf, sizeof buf), "7 8");
    fl = (fg_store_ledger_filter_t){.account = "vision", .from_ms = 30001};
    assert_string_equal(scan_ids(tx, &fl, buf, sizeof buf), "10 11");
    fl = (fg_store_ledger_filter_t){.account = "vision", .to_ms = 5000};
    assert_string_equal(scan_ids(tx, &fl, buf, sizeof buf), "1");
    fl = (fg_store_ledger_filter_t){.from_ms = 4999, .to_ms = 5001};
    assert_string_equal(scan_ids(tx, &fl, buf, sizeof buf), "1 2");
    fl = (fg_store_ledger_filter_t){.from_ms = 39999};
    assert_string_equal(scan_ids(tx, &fl, buf, sizeof buf), "9 10 11");
    fg_store_read_end(tx);
}

/* ------------------------------------------------------------------ budgets, managers */

static int unit_budgets(fg_store_tx_t *tx, void *arg)
{
    int64_t *uid = arg;
    fg_store_account_t a = {.name = (char *)"grant",
                            .weight = 1,
                            .gpu_quota = -1,
                            .budget_micros = 5000000,
                            .allowed_priorities = 7,
                            .budget_mode = FG_BUDGET_SAFE,
                            .budget_period = FG_BUDGET_GRANT,
                            .budget_since_ms = 1700000000000};
    assert_int_equal(fg_store_account_insert(tx, &a), 0);
    a.name = (char *)"plain";
    a.budget_mode = FG_BUDGET_HARD;
    a.budget_period = FG_BUDGET_MONTHLY;
    a.budget_since_ms = 0;
    assert_int_equal(fg_store_account_insert(tx, &a), 0);
    a.budget_mode = FG_BUDGET_WARN;
    a.budget_period = FG_BUDGET_GRANT;
    a.budget_since_ms = 42;
    a.idle_action = FG_IDLE_REQUEUE;
    a.idle_grace_s = 600;
    assert_int_equal(fg_store_account_update(tx, &a), 0);
    *uid = mk_user(tx, "carol");
    fg_store_member_t m = {.user_id = *uid, .account = (char *)"grant", .is_manager = true};
    assert_int_equal(fg_store_member_add(tx, &m), 0);
    m.account = (char *)"plain";
    m.is_manager = false;
    assert_int_equal(fg_store_member_add(tx, &m), 0);
    assert_int_equal(fg_store_member_set_manager(tx, *uid, "plain", true), 0);
    assert_int_equal(fg_store_member_set_manager(tx, *uid, "grant", false), 0);
    assert_int_equal(fg_store_member_set_manager(tx, *uid, "default", true), FG_STORE_ENOENT);
    assert_int_equal(fg_store_member_set_manager(tx, *uid + 1, "plain", true), FG_STORE_ENOENT);
    return 0;
}

static void test_budgets_managers(void **state)
{
    fx_t *f = *state;
    int64_t uid = 0;
    WRITE_OK(f->st, unit_budgets, &uid);
    fx_reopen(f);
    fg_store_tx_t *tx = rd(f->st);
    fg_store_account_t a = {0};
    assert_int_equal(fg_store_account_get(tx, "grant", &a), 0);
    assert_int_equal(a.budget_mode, FG_BUDGET_SAFE);
    assert_int_equal(a.budget_period, FG_BUDGET_GRANT);
    assert_int_equal(a.budget_since_ms, 1700000000000);
    fg_store_account_clear(&a);
    fg_store_account_list_t al = {0};
    assert_int_equal(fg_store_account_list(tx, &al), 0);
    assert_int_equal(al.n, 3);
    assert_string_equal(al.items[0].name, "default");
    assert_int_equal(al.items[0].budget_mode, FG_BUDGET_HARD);
    assert_int_equal(al.items[0].budget_period, FG_BUDGET_MONTHLY);
    assert_int_equal(al.items[0].budget_since_ms, 0);
    assert_string_equal(al.items[2].name, "plain");
    assert_int_equal(al.items[2].budget_mode, FG_BUDGET_WARN);
    assert_int_equal(al.items[2].budget_period, FG_BUDGET_GRANT);
    assert_int_equal(al.items[2].budget_since_ms, 42);
    assert_int_equal(al.items[2].idle_action, FG_IDLE_REQUEUE);
    assert_int_equal(al.items[2].idle_grace_s, 600);
    assert_int_equal(al.items[0].idle_action, FG_IDLE_NONE);
    assert_int_equal(al.items[0].idle_grace_s, 0);
    fg_store_account_list_free(&al);

    fg_store_member_t m = {0};
    assert_int_equal(fg_store_member_get(tx, uid, "plain", &m), 0);
    assert_true(m.is_manager);
    fg_store_member_clear(&m);
    fg_store_member_list_t ml = {0};
    assert_int_equal(fg_store_member_list_by_user(tx, uid, &ml), 0);
    assert_int_equal(ml.n, 2);
    assert_string_equal(ml.items[0].account, "grant");
    assert_false(ml.items[0].is_manager);
    assert_true(ml.items[1].is_manager);
    fg_store_member_list_free(&ml);
    assert_int_equal(fg_store_member_list_by_account(tx, "plain", &ml), 0);
    assert_int_equal(ml.n, 1);
    assert_true(ml.items[0].is_manager);
    fg_store_member_list_free(&ml);
    assert_int_equal(fg_store_member_list_all(tx, &ml), 0);
    assert_int_equal(ml.n, 2);
    fg_store_member_list_free(&ml);
    fg_store_read_end(tx);
}

/* A version 4 file (before the ledger) keeps its accounts and memberships; they get
 * the defaults (hard, monthly, not a manager) and the ledger starts empty. */
static void test_migration_from_v4(void **state)
{
    fx_t *f = *state;
    fg_store_close(f->st);
    f->st = NULL;
    char p[320];
    snprintf(p, sizeof p, "%s.v4", f->path);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    char *err = NULL;
    assert_int_equal(fg_store_sqlite_migrate(db, 4, &err), 0);
    assert_int_equal(sqlite3_exec(db,
                                  "INSERT INTO users (id, username, email, password_hash, role,"
                                  " disabled, created_at) VALUES (1, 'old', 'o@x', 'h', 1, 0, 5);"
                                  "INSERT INTO accounts (name, weight, gpu_quota, budget_micros,"
                                  " allowed_priorities, created_at) VALUES ('lab', 2.0, 16,"
                                  " 900, 3, 8);"
                                  "INSERT INTO memberships (user_id, account, weight, is_default,"
                                  " position) VALUES (1, 'lab', 1.5, 1, 1);"
                                  "INSERT INTO prices (gpu_type, priority, micros_per_gpu_hour,"
                                  " currency, effective_ms, created_at, admin_user_id) VALUES"
                                  " ('h100', 1, 2500000, 'EUR', 0, 5, 1);",
                                  NULL, NULL, &err),
                     SQLITE_OK);
    sqlite3_close(db);

    fg_store_t *st = NULL;
    assert_int_equal(fg_store_open_sqlite(p, NULL, &st, &err), 0);
    assert_int_equal(fg_store_schema_version(st), fg_store_sqlite_latest_version());
    fg_store_tx_t *tx = rd(st);
    fg_store_account_t a = {0};
    assert_int_equal(fg_store_account_get(tx, "lab", &a), 0);
    assert_true(a.weight == 2.0);
    assert_int_equal(a.gpu_quota, 16);
    assert_int_equal(a.budget_micros, 900);
    assert_int_equal(a.allowed_priorities, 3);
    assert_int_equal(a.created_at, 8);
    assert_int_equal(a.budget_mode, FG_BUDGET_HARD);
    assert_int_equal(a.budget_period, FG_BUDGET_MONTHLY);
    assert_int_equal(a.budget_since_ms, 0);
    assert_int_equal(a.idle_action, FG_IDLE_NONE); /* version 7 defaults */
    assert_int_equal(a.idle_grace_s, 0);
    fg_store_account_clear(&a);
    fg_store_member_t m = {0};
    assert_int_equal(fg_store_member_get(tx, 1, "lab", &m), 0);
    assert_true(m.weight == 1.5);
    assert_true(m.is_default);
    assert_false(m.is_manager);
    assert_string_equal(m.username, "old");
    fg_store_member_clear(&m);
    fg_store_price_list_t pl = {0};
    assert_int_equal(fg_store_price_list(tx, &pl), 0);
    assert_int_equal(pl.n, 1);
    fg_store_price_list_free(&pl);
    uint64_t max = 9;
    assert_int_equal(fg_store_ledger_max_id(tx, &max), 0);
    assert_int_equal(max, 0);
    fg_store_read_end(tx);
    fg_store_close(st);
    /* the ledger's indexes: version 6 replaced (account, start_ms, end_ms) */
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    sqlite3_stmt *s = NULL;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT group_concat(name, ' ') FROM (SELECT name FROM"
                                        " sqlite_master WHERE type = 'index' AND"
                                        " tbl_name = 'ledger' ORDER BY name)",
                                        -1, &s, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(s, 0),
                        "ledger_account ledger_attempt ledger_final");
    sqlite3_finalize(s);
    sqlite3_close(db);
    const char *suffixes[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        char q[340];
        snprintf(q, sizeof q, "%s%s", p, suffixes[i]);
        unlink(q);
    }
    fx_open(f);
}

/* ------------------------------------------------------------------ faults */

/* Fills the database up to a page limit inside a unit: the insert fails (SQLITE_FULL)
 * and the unit reports it; the store keeps working and loses nothing committed. */
static int unit_disk_full(fg_store_tx_t *tx, void *arg)
{
    int64_t uid = *(int64_t *)arg;
    sqlite3 *db = fg_store_sqlite_db(tx);
    assert_non_null(db);
    assert_int_equal(sqlite3_exec(db, "PRAGMA max_page_count = 40", NULL, NULL, NULL), SQLITE_OK);
    static char big[3000];
    memset(big, 'x', sizeof big - 1);
    int rc = 0;
    for (int i = 0; i < 1000 && rc == 0; i++) {
        fg_store_job_t j = job_template(uid, "default");
        j.env_json = big;
        rc = fg_store_job_insert(tx, &j, NULL);
    }
    assert_int_equal(sqlite3_exec(db, "PRAGMA max_page_count = 1073741823", NULL, NULL, NULL),
                     SQLITE_OK);
    return rc;
}

static void test_disk_full_fault(void **state)
{
    fx_t *f = *state;
    int64_t uid = 0;
    WRITE_OK(f->st, unit_one_user, &uid);
    submit_t before = {.user = uid};
    WRITE_OK(f->st, unit_submit, &before);
    int rc = fg_store_write(f->st, unit_disk_full, &uid);
    assert_int_equal(rc, FG_STORE_EIO);
    submit_t after = {.user = uid};
    WRITE_OK(f->st, unit_submit, &after); /* the store still works */
    fx_reopen(f);
    fg_store_tx_t *tx = rd(f->st);
    int64_t n = 0;
    assert_int_equal(fg_store_job_count(tx, NULL, &n), 0);
    assert_int_equal(n, 2); /* none of the failed unit's rows */
    fg_store_read_end(tx);
    fg_store_t *st = (fg_store_t *)1;
    char *err = NULL;
    assert_int_equal(fg_store_open("postgres://db/x", NULL, &st, &err), FG_STORE_EINVAL);
    assert_null(st);
    assert_non_null(err);
    free(err);
}

static void test_open_by_uri(void **state)
{
    fx_t *f = *state;
    fg_store_close(f->st);
    f->st = NULL;
    char uri[320];
    snprintf(uri, sizeof uri, "sqlite:%s", f->path);
    assert_int_equal(fg_store_open(uri, NULL, &f->st, NULL), 0);
    assert_int_equal(fg_store_ping(f->st), 0);
}

static void test_strerror(void **state)
{
    (void)state;
    assert_string_equal(fg_store_strerror(FG_STORE_EEXIST), "already exists");
    assert_string_equal(fg_store_strerror(FG_STORE_ENOENT), "not found");
    assert_string_equal(fg_store_strerror(12345), "unknown store error");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_creates_schema, setup, teardown),
        cmocka_unit_test(test_open_bad_path),
        cmocka_unit_test_setup_teardown(test_settings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prices, setup, teardown),
        cmocka_unit_test_setup_teardown(test_users, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sessions_tokens, setup, teardown),
        cmocka_unit_test_setup_teardown(test_accounts_members, setup, teardown),
        cmocka_unit_test_setup_teardown(test_audit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_jobs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idempotency_unit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_job_list_pagination, setup, teardown),
        cmocka_unit_test_setup_teardown(test_attempts_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nodes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_usage_exact_after_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unit_rollback_and_snapshots, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_commit_many_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wal_stays_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpointer_copies_in_background, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_async, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failing_unit_in_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_delay, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash_kill9, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migration_from_v1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ledger, setup, teardown),
        cmocka_unit_test_setup_teardown(test_budgets_managers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migration_from_v4, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disk_full_fault, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_by_uri, setup, teardown),
        cmocka_unit_test(test_strerror),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
