/*
 * test_agent_account.c - the Unix account names of controller users (plain when short,
 * prefix + head + SHA-256 when long: deterministic, distinct, never equal to a plain
 * name), prefix checks, the identity checks, and the symlink-safe directory and file
 * operations of safefs.c (a planted symbolic link is moved aside, never followed).
 */
#include "agent/account.h"
#include "agent/launcher.h"
#include "agent/safefs.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <sodium.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static char g_root[256];

static int setup(void **state)
{
    (void)state;
    if (sodium_init() < 0)
        return -1;
    snprintf(g_root, sizeof g_root, "/tmp/fg-test-account-XXXXXX");
    return mkdtemp(g_root) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *name_of(const char *prefix, const char *user, char *out)
{
    char msg[200];
    assert_int_equal(fg_account_name(prefix, user, out, FG_ACCOUNT_MAX + 1, msg, sizeof msg), 0);
    return out;
}

/* Short names stay prefix + user, as before. */
static void short_names_are_plain(void **state)
{
    (void)state;
    char out[FG_ACCOUNT_MAX + 1];
    assert_string_equal(name_of("fg-", "alice", out), "fg-alice");
    assert_string_equal(name_of("fg-", "a.b-c_d", out), "fg-a.b-c_d");
    /* 29 characters: fg- + 29 = 32, the longest plain name */
    assert_string_equal(name_of("fg-", "abcdefghijklmnopqrstuvwxyz012", out),
                        "fg-abcdefghijklmnopqrstuvwxyz012");
}

/* Every name the controller accepts ([a-z0-9_.-]{1,64}) maps to a valid account name of
 * at most 32 characters; long ones to prefix + 12 characters + "-" + 16 hex. */
static void long_names_are_hashed(void **state)
{
    (void)state;
    char user[65], out[FG_ACCOUNT_MAX + 1], again[FG_ACCOUNT_MAX + 1];
    for (int len = 1; len <= 64; len++) {
        memset(user, 'a' + len % 26, (size_t)len);
        user[len] = '\0';
        name_of("fg-", user, out);
        assert_true(fg_account_valid(out));
        assert_true(strlen(out) <= FG_ACCOUNT_MAX);
        assert_string_equal(name_of("fg-", user, again), out); /* deterministic */
    }
    const char *u = "a-very-long-user-name-that-the-controller-accepts-up-to-64-chars";
    name_of("fg-", u, out);
    assert_int_equal(strlen(out), FG_ACCOUNT_MAX);
    assert_memory_equal(out, "fg-a-very-long-", 15);
    /* the hash is SHA-256 of the username: its first 16 hex digits */
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, (const unsigned char *)u, strlen(u));
    char hex[2 * crypto_hash_sha256_BYTES + 1];
    sodium_bin2hex(hex, sizeof hex, h, sizeof h);
    assert_memory_equal(out + 16, hex, 16);
}

/* Names that share their first characters get different accounts; a plain name shaped
 * like a hashed one is hashed itself, so no user can claim another's hashed account by
 * registering its text as a username. */
static void no_collisions(void **state)
{
    (void)state;
    char a[FG_ACCOUNT_MAX + 1], b[FG_ACCOUNT_MAX + 1], c[FG_ACCOUNT_MAX + 1];
    name_of("fg-", "research-team-member-0000000000001", a);
    name_of("fg-", "research-team-member-0000000000002", b);
    assert_string_not_equal(a, b);
    /* a user registers the victim's hashed account minus the prefix */
    const char *victim = "victim-with-a-long-name-of-forty-characters";
    name_of("fg-", victim, a);
    name_of("fg-", a + 3, b); /* 29 characters: would be plain "fg-" + it */
    assert_string_not_equal(a, b);
    name_of("fg-", b + 3, c);
    assert_string_not_equal(a, c);
}

/* Prefix checks, and names no prefix can form. */
static void prefixes(void **state)
{
    (void)state;
    assert_true(fg_account_prefix_valid("fg-"));
    assert_false(fg_account_prefix_valid("")); /* usernames would be any account */
    assert_false(fg_account_prefix_valid("-x"));
    assert_false(fg_account_prefix_valid("Fg"));
    assert_false(fg_account_prefix_valid("a-prefix-too-long"));
    char out[FG_ACCOUNT_MAX + 1], msg[200];
    /* no prefix: no name at all (not even for a valid username) */
    assert_int_equal(fg_account_name("", "daemon", out, sizeof out, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "daemon"));
    assert_int_equal(fg_account_name("fg-", "1abc", out, sizeof out, msg, sizeof msg), 0);
    assert_string_equal(out, "fg-1abc");
}

/* root, gid 0 and the agent's own uid are refused. */
static void identity_checks(void **state)
{
    (void)state;
    char msg[200];
    assert_int_equal(fg_account_check_ids("x", 0, 1000, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "root"));
    assert_int_equal(fg_account_check_ids("x", 1000, 0, msg, sizeof msg), -1);
    assert_int_equal(fg_account_check_ids("x", geteuid(), 1000, msg, sizeof msg), -1);
    uid_t other = geteuid() == 12345 ? 12346 : 12345;
    assert_int_equal(fg_account_check_ids("x", other, 12345, msg, sizeof msg), 0);
    /* an account mapped to root through the user map */
    char path[400], out[64];
    snprintf(path, sizeof path, "%s/usermap", g_root);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("# comment\nbob root\n* nobody\n", f);
    fclose(f);
    assert_int_equal(fg_account_map(path, "fg-", "bob", out, sizeof out, msg, sizeof msg), 0);
    assert_string_equal(out, "root");
    assert_int_equal(fg_account_ensure(out, NULL, NULL, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "root"));
    assert_int_equal(fg_account_map(path, "fg-", "carol", out, sizeof out, msg, sizeof msg), 0);
    assert_string_equal(out, "nobody");
}

/* A symbolic link where a job or checkpoint dir goes is moved aside, not followed: the
 * directory it points to keeps its mode, and a fresh directory of mode 0700 is made. */
static void own_dir_moves_links_aside(void **state)
{
    (void)state;
    char target[300], link[300], err[300], warn[300] = "";
    snprintf(target, sizeof target, "%s/precious", g_root);
    snprintf(link, sizeof link, "%s/ckpt/42", g_root);
    assert_int_equal(mkdir(target, 0755), 0);
    assert_int_equal(chmod(target, 0755), 0);
    assert_int_equal(fg_mkdir_p(link, 0700) == 0 && rmdir(link) == 0, 1);
    assert_int_equal(symlink(target, link), 0);
    assert_int_equal(fg_sfs_own_dir(link, 0, 0, 0, err, sizeof err, warn, sizeof warn), 0);
    struct stat sb;
    assert_int_equal(stat(target, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0755);
    assert_int_equal(lstat(link, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_equal(sb.st_mode & 07777, 0700);
    /* a link on the way (a parent) is refused */
    char via[300], deep[400];
    snprintf(via, sizeof via, "%s/via", g_root);
    assert_int_equal(symlink(target, via), 0);
    snprintf(deep, sizeof deep, "%s/sub", via);
    assert_int_equal(fg_sfs_own_dir(deep, 0, 0, 0, err, sizeof err, warn, sizeof warn), -1);
    assert_int_equal(lstat(target, &sb), 0);
    snprintf(deep, sizeof deep, "%s/sub", target);
    assert_int_equal(access(deep, F_OK), -1);
}

/* The notice replaces a planted link instead of writing through it. */
static void replace_file_never_follows(void **state)
{
    (void)state;
    char dir[300], victim[300], planted[400], tmp[400];
    snprintf(dir, sizeof dir, "%s/notice", g_root);
    snprintf(victim, sizeof victim, "%s/victim", g_root);
    assert_int_equal(mkdir(dir, 0700), 0);
    FILE *f = fopen(victim, "w");
    assert_non_null(f);
    fputs("keep me\n", f);
    fclose(f);
    snprintf(planted, sizeof planted, "%s/FAIRGPU_PREEMPT", dir);
    snprintf(tmp, sizeof tmp, "%s/.FAIRGPU_PREEMPT.fairgpu-tmp", dir);
    assert_int_equal(symlink(victim, planted), 0);
    assert_int_equal(symlink(victim, tmp), 0);
    assert_int_equal(fg_write_preempt_notice(dir, "preempt"), 0);
    char buf[64] = "";
    f = fopen(victim, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof buf, f));
    fclose(f);
    assert_string_equal(buf, "keep me\n");
    struct stat sb;
    assert_int_equal(lstat(planted, &sb), 0);
    assert_true(S_ISREG(sb.st_mode));
    /* a dir that is itself a link gets no notice */
    char ldir[300];
    snprintf(ldir, sizeof ldir, "%s/notice-link", g_root);
    assert_int_equal(symlink(dir, ldir), 0);
    assert_int_equal(fg_write_preempt_notice(ldir, "preempt"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(short_names_are_plain),
        cmocka_unit_test(long_names_are_hashed),
        cmocka_unit_test(no_collisions),
        cmocka_unit_test(prefixes),
        cmocka_unit_test(identity_checks),
        cmocka_unit_test(own_dir_moves_links_aside),
        cmocka_unit_test(replace_file_never_follows),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
