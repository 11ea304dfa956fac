/*
 * test_walbuf.c - the store's VFS that writes a commit's WAL frames in one call
 * (src/store/walbuf.h), on real SQLite files.
 *
 * What must hold: a commit reaches the log file in one write; a transaction that
 * spills frames to the log before its commit reads them back correctly (the buffer is
 * written before any read), also when it rewrites them or rolls back; and the files as
 * they are right after a commit, copied while the connection is still open (what a
 * kill -9 leaves), recover to exactly the committed rows with the default VFS.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/walbuf.h"

typedef struct fx {
    char dir[256];
    char path[300];
} fx_t;

static int setup(void **state)
{
    fx_t *f = calloc(1, sizeof *f);
    const char *tmp = getenv("TMPDIR");
    snprintf(f->dir, sizeof f->dir, "%s/fg_walbuf_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->path, sizeof f->path, "%s/t.db", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx_t *f = *state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    if (system(cmd) != 0)
        return -1;
    free(f);
    return 0;
}

static void exec_ok(sqlite3 *db, const char *sql)
{
    char *err = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
    if (rc != SQLITE_OK)
        fprintf(stderr, "%s: %s\n", sql, err ? err : "?");
    sqlite3_free(err);
    assert_int_equal(rc, SQLITE_OK);
}

static int64_t query_i64(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *s = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

static void query_text(sqlite3 *db, const char *sql, char *out, size_t cap)
{
    sqlite3_stmt *s = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    snprintf(out, cap, "%s", (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
}

/* A connection through the VFS, in WAL mode with synchronous=FULL, as the store's
 * writer; `cache_pages` small makes big transactions spill frames before the commit. */
static sqlite3 *open_wrapped(const char *path, int cache_pages)
{
    assert_int_equal(fg_walbuf_register(), SQLITE_OK);
    sqlite3 *db = NULL;
    assert_int_equal(
        sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, FG_WALBUF_VFS),
        SQLITE_OK);
    exec_ok(db, "PRAGMA journal_mode = WAL");
    exec_ok(db, "PRAGMA synchronous = FULL");
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA cache_size = %d", cache_pages);
    exec_ok(db, sql);
    return db;
}

/* Inserts `n` rows of `bytes`-byte blobs with ids from `first`, in the current
 * transaction. */
static void insert_rows(sqlite3 *db, int first, int n, int bytes)
{
    sqlite3_stmt *s = NULL;
    assert_int_equal(
        sqlite3_prepare_v2(db, "INSERT INTO t (id, v) VALUES (?, randomblob(?))", -1, &s, NULL),
        SQLITE_OK);
    for (int i = 0; i < n; i++) {
        sqlite3_bind_int(s, 1, first + i);
        sqlite3_bind_int(s, 2, bytes);
        assert_int_equal(sqlite3_step(s), SQLITE_DONE);
        sqlite3_reset(s);
    }
    sqlite3_finalize(s);
}

/* Copies a file byte for byte (a missing source gives no copy). */
static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb");
    if (!in)
        return;
    FILE *out = fopen(to, "wb");
    assert_non_null(out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    assert_int_equal(fclose(out), 0);
}

/* Copies the database and its log as they are now (the connection stays open, so
 * the log is not checkpointed away), opens the copy with the default VFS (SQLite
 * recovers from the log) and checks it is intact with `rows` rows. */
static void check_crash_image(fx_t *f, int64_t rows)
{
    char img[320], src[320], dst[330];
    snprintf(img, sizeof img, "%s/img.db", f->dir);
    unlink(img);
    snprintf(dst, sizeof dst, "%s-wal", img);
    unlink(dst);
    copy_file(f->path, img);
    snprintf(src, sizeof src, "%s-wal", f->path);
    copy_file(src, dst);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(img, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    char ok[64];
    query_text(db, "PRAGMA integrity_check", ok, sizeof ok);
    assert_string_equal(ok, "ok");
    assert_int_equal(query_i64(db, "SELECT count(*) FROM t"), rows);
    sqlite3_close(db);
}

/* A commit of ~12 changed pages reaches the log in one write() (two SQLite calls per
 * frame before), and the crash image of every commit recovers. */
static void test_one_write_per_commit(void **state)
{
    fx_t *f = *state;
    sqlite3 *db = open_wrapped(f->path, 2000);
    exec_ok(db, "CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB NOT NULL)");
    int64_t rows = 0;
    for (int c = 0; c < 20; c++) {
        uint64_t before = fg_walbuf_writes(db);
        exec_ok(db, "BEGIN IMMEDIATE");
        insert_rows(db, (int)rows, 30, 1500);
        exec_ok(db, "COMMIT");
        rows += 30;
        assert_int_equal(fg_walbuf_writes(db) - before, 1);
        check_crash_image(f, rows);
    }
    sqlite3_close(db);
}

/* A transaction larger than the page cache writes frames before its commit and reads
 * them back (and may write a frame again): the buffer must reach the file first.
 * Rolled-back frames must not leak into later commits. */
static void test_spill_read_back_rollback(void **state)
{
    fx_t *f = *state;
    sqlite3 *db = open_wrapped(f->path, 10);
    exec_ok(db, "CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB NOT NULL, n INTEGER)");
    exec_ok(db, "CREATE INDEX t_n ON t (n)");
    exec_ok(db, "BEGIN IMMEDIATE");
    insert_rows(db, 0, 3000, 700);
    /* reads every spilled page back, and rewrites most of them */
    exec_ok(db, "UPDATE t SET n = id % 97");
    assert_int_equal(query_i64(db, "SELECT count(*) FROM t WHERE n = id % 97"), 3000);
    exec_ok(db, "COMMIT");
    check_crash_image(f, 3000);

    exec_ok(db, "BEGIN IMMEDIATE");
    insert_rows(db, 10000, 3000, 700);
    assert_int_equal(query_i64(db, "SELECT count(*) FROM t"), 6000);
    exec_ok(db, "ROLLBACK");
    assert_int_equal(query_i64(db, "SELECT count(*) FROM t"), 3000);

    exec_ok(db, "BEGIN IMMEDIATE");
    insert_rows(db, 20000, 5, 700);
    exec_ok(db, "COMMIT");
    check_crash_image(f, 3005);
    char ok[64];
    query_text(db, "PRAGMA integrity_check", ok, sizeof ok);
    assert_string_equal(ok, "ok");

    /* a second connection with the default VFS sees the same rows */
    sqlite3 *other = NULL;
    assert_int_equal(sqlite3_open_v2(f->path, &other, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    assert_int_equal(query_i64(other, "SELECT count(*) FROM t"), 3005);
    assert_int_equal(query_i64(other, "SELECT sum(n) FROM t WHERE id < 3000"),
                     query_i64(db, "SELECT sum(id % 97) FROM t WHERE id < 3000"));
    sqlite3_close(other);
    sqlite3_close(db);
}

/* After a checkpoint restarts the log, commits are written over the old frames from
 * the log's start (its header first, synced on its own): the first commit after a
 * restart makes two writes, the others one, the log does not grow, and every commit's
 * crash image recovers. */
static void test_log_restart(void **state)
{
    fx_t *f = *state;
    sqlite3 *db = open_wrapped(f->path, 2000);
    exec_ok(db, "CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB NOT NULL)");
    char wal[320];
    snprintf(wal, sizeof wal, "%s-wal", f->path);
    int64_t rows = 0;
    long first_size = -1;
    for (int round = 0; round < 3; round++) {
        for (int c = 0; c < 5; c++) {
            uint64_t before = fg_walbuf_writes(db);
            exec_ok(db, "BEGIN IMMEDIATE");
            insert_rows(db, (int)rows, 10, 2000);
            exec_ok(db, "COMMIT");
            rows += 10;
            assert_int_equal(fg_walbuf_writes(db) - before, round > 0 && c == 0 ? 2 : 1);
            check_crash_image(f, rows);
        }
        FILE *w = fopen(wal, "rb");
        assert_non_null(w);
        fseek(w, 0, SEEK_END);
        long size = ftell(w);
        fclose(w);
        if (round == 0)
            first_size = size;
        else
            assert_true(size <= first_size + 65536);
        int log = -1, copied = -1;
        assert_int_equal(
            sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_RESTART, &log, &copied),
            SQLITE_OK);
        assert_int_equal(log, copied);
        check_crash_image(f, rows);
    }
    sqlite3_close(db);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_one_write_per_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spill_read_back_rollback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_restart, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
