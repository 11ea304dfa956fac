/*
 * test_agent_ckptwatch.c - the agent's checkpoint notices (src/agent/ckptwatch.c) on a
 * real temporary directory: what is there at the start is the baseline; a new file is
 * noticed at the observation time given to the tick (not its mtime); a backdated mtime
 * neither hides a new file nor moves the notice earlier; symbolic links are never
 * followed (the directory itself as a link, or a link inside it to a changing target);
 * the agent's own FAIRGPU_PREEMPT notice is no checkpoint; a removal alone is none; the
 * scan stops at FG_CKPT_MAX_ENTRIES.
 *
 * Example: baseline with "old.pt"; write "step_200.pt"; tick at t = 5000: noticed,
 * last_checkpoint_ms = 5000.
 */
#include "agent/ckptwatch.h"

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

static char g_root[256], g_dir[300], g_other[300];

static int setup(void **state)
{
    (void)state;
    snprintf(g_root, sizeof g_root, "/tmp/fg-test-ckpt-XXXXXX");
    assert_non_null(mkdtemp(g_root));
    snprintf(g_dir, sizeof g_dir, "%s/job1", g_root);
    snprintf(g_other, sizeof g_other, "%s/other", g_root);
    assert_int_equal(mkdir(g_dir, 0700), 0);
    assert_int_equal(mkdir(g_other, 0700), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    assert_int_equal(system(cmd), 0);
    return 0;
}

/* Writes dir/name with a few bytes. */
static void put(const char *dir, const char *name)
{
    char p[400];
    assert_true((size_t)snprintf(p, sizeof p, "%s/%s", dir, name) < sizeof p);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "ckpt", 4), 4);
    close(fd);
}

/* Sets dir/name's atime and mtime to `sec` (what `touch -d` lets any owner do). */
static void backdate(const char *dir, const char *name, time_t sec)
{
    char p[400];
    assert_true((size_t)snprintf(p, sizeof p, "%s/%s", dir, name) < sizeof p);
    struct timespec ts[2] = {{.tv_sec = sec}, {.tv_sec = sec}};
    assert_int_equal(utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW), 0);
}

/* A little wait, so that kernel timestamps (coarse on some file systems) move. */
static void tick_wait(void)
{
    struct timespec ts = {.tv_nsec = 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* Empties g_dir and g_other. */
static void reset(void)
{
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s' && mkdir '%s' '%s'", g_dir, g_other, g_dir,
             g_other);
    assert_int_equal(system(cmd), 0);
}

/* An earlier attempt's checkpoint is the baseline; a new file is noticed at the tick's
 * time; nothing new: no notice, the time stays. */
static void test_baseline_then_new_file(void **state)
{
    (void)state;
    reset();
    put(g_dir, "old.pt");
    fg_ckpt_watch_t w;
    fg_ckpt_watch_begin(&w, g_dir, 1000);
    assert_true(w.started);
    assert_int_equal(w.last.count, 1);
    assert_int_equal(fg_ckpt_watch_tick(&w, g_dir, 3000), 0);
    assert_int_equal(w.last_checkpoint_ms, 0);
    tick_wait();
    put(g_dir, "step_200.pt");
    assert_int_equal(fg_ckpt_watch_tick(&w, g_dir, 5000), 1);
    assert_int_equal(w.last_checkpoint_ms, 5000);
    assert_int_equal(fg_ckpt_watch_tick(&w, g_dir, 7000), 0);
    assert_int_equal(w.last_checkpoint_ms, 5000);
    /* an entry rewritten in place is a new checkpoint too */
    tick_wait();
    put(g_dir, "step_200.pt");
    assert_int_equal(fg_ckpt_watch_tick(&w, g_dir, 9000), 1);
    assert_int_equal(w.last_checkpoint_ms, 9000);
    assert_true(w.next_scan_ms == 9000 + FG_CKPT_SCAN_MS);
}

/* A new file whose mtime the user set far into the past is still noticed (its ctime is
 * the kernel's), and at the observation time, never at the forged mtime. */
static void test_backdated_mtime(void **state)
{
    (void)state;
    reset();
    put(g_dir, "a.pt");
    fg_ckpt_watch_t w;
    fg_ckpt_watch_begin(&w, g_dir, 1000);
    tick_wait();
    put(g_dir, "b.pt");
    backdate(g_dir, "b.pt", 86400); /* 1970-01-02 */
    assert_int_equal(fg_ckpt_watch_tick(&w, g_dir, 60000), 1);
    assert_int_equal(w.last_checkpoint_ms, 60000);
    /* backdating an existing entry later changes its ctime: noticed, but at the
     * observation time, which only moves forward (a smaller refund, never larger) */
    tick_wait();
    backdate(g_dir, "a.pt", 1);
    assert_int_equal(fg_ckpt_watch_tick(&w, g_dir, 62000), 1);
    assert_int_equal(w.last_checkpoint_ms, 62000);
    assert_true(w.last_checkpoint_ms >= 60000);
}

/* The directory replaced by a symbolic link to a full directory: not followed (nothing
 * seen, no notice); a link inside it counts as itself, a change behind it is not seen. */
static void test_symlinks_not_followed(void **state)
{
    (void)state;
    reset();
    put(g_other, "x.pt");
    char link[400];
    snprintf(link, sizeof link, "%s/job2", g_root);
    unlink(link);
    assert_int_equal(symlink(g_other, link), 0);
    fg_ckpt_sig_t sig;
    fg_ckpt_scan(link, &sig);
    assert_int_equal(sig.readable, 0);
    assert_int_equal(sig.count, 0);
    fg_ckpt_watch_t w;
    fg_ckpt_watch_begin(&w, link, 1000);
    tick_wait();
    put(g_other, "y.pt");
    assert_int_equal(fg_ckpt_watch_tick(&w, link, 3000), 0);
    assert_int_equal(w.last_checkpoint_ms, 0);
    unlink(link);

    /* a link inside the directory: a new link is a new entry, its target is not looked at */
    snprintf(link, sizeof link, "%s/ln", g_dir);
    assert_int_equal(symlink(g_other, link), 0);
    fg_ckpt_watch_begin(&w, g_dir, 1000);
    assert_int_equal(w.last.count, 1);
    tick_wait();
    put(g_other, "z.pt");
    backdate(g_other, ".", 4000000000); /* the target directory's mtime in the future */
    assert_int_equal(fg_ckpt_watch_tick(&w, g_dir, 3000), 0);
    /* a path with a link on the way is refused as well */
    char via[400];
    snprintf(via, sizeof via, "%s/ln/x.pt", g_dir);
    fg_ckpt_scan(via, &sig);
    assert_int_equal(sig.readable, 0);
}

/* The agent's FAIRGPU_PREEMPT notice is not a checkpoint; a removal alone is none; a
 * directory that appears with entries is one; a missing directory is empty. */
static void test_own_notice_and_removal(void **state)
{
    (void)state;
    reset();
    put(g_dir, "a.pt");
    put(g_dir, "b.pt");
    fg_ckpt_watch_t w;
    fg_ckpt_watch_begin(&w, g_dir, 1000);
    tick_wait();
    put(g_dir, "FAIRGPU_PREEMPT");
    assert_int_equal(fg_ckpt_watch_tick(&w, g_dir, 2000), 0);
    char p[400];
    snprintf(p, sizeof p, "%s/a.pt", g_dir);
    assert_int_equal(unlink(p), 0);
    assert_int_equal(fg_ckpt_watch_tick(&w, g_dir, 3000), 0);
    assert_int_equal(w.last_checkpoint_ms, 0);

    char missing[400];
    snprintf(missing, sizeof missing, "%s/later", g_root);
    fg_ckpt_watch_begin(&w, missing, 1000);
    assert_int_equal(w.last.readable, 0);
    assert_int_equal(fg_ckpt_watch_tick(&w, missing, 2000), 0);
    assert_int_equal(mkdir(missing, 0700), 0);
    assert_int_equal(fg_ckpt_watch_tick(&w, missing, 3000), 0); /* empty: nothing yet */
    put(missing, "c.pt");
    assert_int_equal(fg_ckpt_watch_tick(&w, missing, 4000), 1);
    assert_int_equal(w.last_checkpoint_ms, 4000);
}

/* More entries than the bound: the scan stops (truncated) at FG_CKPT_MAX_ENTRIES, and a
 * change of the directory is still noticed through its own ctime. */
static void test_bounded(void **state)
{
    (void)state;
    reset();
    for (int i = 0; i < FG_CKPT_MAX_ENTRIES + 50; i++) {
        char name[32];
        snprintf(name, sizeof name, "f%04d", i);
        put(g_dir, name);
    }
    fg_ckpt_watch_t w;
    fg_ckpt_watch_begin(&w, g_dir, 1000);
    assert_int_equal(w.last.truncated, 1);
    assert_true(w.last.count <= FG_CKPT_MAX_ENTRIES);
    assert_int_equal(fg_ckpt_watch_tick(&w, g_dir, 2000), 0);
    tick_wait();
    put(g_dir, "zz-new");
    assert_int_equal(fg_ckpt_watch_tick(&w, g_dir, 3000), 1);
    assert_int_equal(w.last_checkpoint_ms, 3000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_baseline_then_new_file),
        cmocka_unit_test(test_backdated_mtime),
        cmocka_unit_test(test_symlinks_not_followed),
        cmocka_unit_test(test_own_notice_and_removal),
        cmocka_unit_test(test_bounded),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
