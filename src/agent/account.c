/*
 * account.c - the Unix account a job runs as (see account.h): name mapping with a hash
 * for long usernames, the user map file, account creation, and the identity checks that
 * keep jobs off root and off the agent's own account.
 */
#include "agent/account.h"
#include "agent/launcher.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <pwd.h>
#include <sodium.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static pthread_mutex_t g_acct_mu = PTHREAD_MUTEX_INITIALIZER;

/* 1 for the characters of account names: [a-z0-9_.-]. */
static int name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

int fg_account_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > FG_ACCOUNT_MAX || !((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!name_char(s[i]))
            return 0;
    return 1;
}

int fg_account_prefix_valid(const char *prefix)
{
    size_t n = strlen(prefix);
    if (n == 0 || n > FG_ACCOUNT_PREFIX_MAX)
        return 0;
    char probe[FG_ACCOUNT_MAX + 1];
    snprintf(probe, sizeof probe, "%sx", prefix); /* its first character must start a name */
    return fg_account_valid(probe);
}

/* 1 if name has the shape of a hashed name: exactly FG_ACCOUNT_MAX characters ending
 * in "-" and FG_ACCOUNT_HASH_HEX lowercase hex digits. */
static int hashed_shape(const char *name)
{
    if (strlen(name) != FG_ACCOUNT_MAX)
        return 0;
    const char *tail = name + FG_ACCOUNT_MAX - FG_ACCOUNT_HASH_HEX;
    if (tail[-1] != '-')
        return 0;
    for (int i = 0; i < FG_ACCOUNT_HASH_HEX; i++)
        if (!((tail[i] >= '0' && tail[i] <= '9') || (tail[i] >= 'a' && tail[i] <= 'f')))
            return 0;
    return 1;
}

int fg_account_name(const char *prefix, const char *user, char *out, size_t outlen, char *msg,
                    size_t msglen)
{
    assert(outlen > FG_ACCOUNT_MAX);
    out[0] = '\0';
    if (fg_account_prefix_valid(prefix) && fg_fmt(out, outlen, "%s%s", prefix, user) == 0 &&
        fg_account_valid(out) && !hashed_shape(out))
        return 0;
    /* Too long, or of the hashed shape: PREFIX + first K characters + "-" + hash. */
    size_t pl = strlen(prefix);
    if (!fg_account_prefix_valid(prefix)) {
        snprintf(msg, msglen, "cannot form a Unix account name for user '%s' with prefix '%s'",
                 user, prefix);
        out[0] = '\0';
        return -1;
    }
    size_t keep = FG_ACCOUNT_MAX - 1 - FG_ACCOUNT_HASH_HEX - pl;
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, (const unsigned char *)user, strlen(user));
    char hex[2 * crypto_hash_sha256_BYTES + 1];
    sodium_bin2hex(hex, sizeof hex, h, sizeof h);
    size_t ul = strlen(user);
    char head[FG_ACCOUNT_MAX + 1] = "";
    size_t k = 0;
    for (size_t i = 0; i < ul && k < keep; i++)
        if (name_char(user[i]))
            head[k++] = user[i];
    head[k] = '\0';
    /* Short heads are padded with the hash itself: every hashed name is FG_ACCOUNT_MAX
     * characters long. */
    snprintf(out, outlen, "%s%s%.*s-%.*s", prefix, head, (int)(keep - k), hex + FG_ACCOUNT_HASH_HEX,
             FG_ACCOUNT_HASH_HEX, hex);
    assert(strlen(out) == FG_ACCOUNT_MAX && fg_account_valid(out) && hashed_shape(out));
    return 0;
}

/* ------------------------------------------------------------ the user map */

/* The user map file as last read, and what identified that version (under g_acct_mu). */
static char *g_map_text;
static struct stat g_map_st;

/* Returns a copy of the user map file's text (caller frees), re-read only when the file
 * changed (inode, size or modification time); NULL if it cannot be read. */
static char *user_map_text(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return NULL;
    pthread_mutex_lock(&g_acct_mu);
    if (!g_map_text || sb.st_ino != g_map_st.st_ino || sb.st_dev != g_map_st.st_dev ||
        sb.st_size != g_map_st.st_size || sb.st_mtim.tv_sec != g_map_st.st_mtim.tv_sec ||
        sb.st_mtim.tv_nsec != g_map_st.st_mtim.tv_nsec) {
        free(g_map_text);
        g_map_text = NULL;
        FILE *f = fopen(path, "re");
        if (f) {
            size_t cap = 0, len = 0;
            char chunk[4096];
            size_t got;
            while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
                g_map_text = fg_xgrow(g_map_text, &cap, len + got + 1, 1);
                memcpy(g_map_text + len, chunk, got);
                len += got;
            }
            fclose(f);
            if (!g_map_text)
                g_map_text = fg_xstrdup("");
            else
                g_map_text[len] = '\0';
            g_map_st = sb;
        }
    }
    char *copy = g_map_text ? fg_xstrdup(g_map_text) : NULL;
    pthread_mutex_unlock(&g_acct_mu);
    return copy;
}

/* Copies a mapped account name to out: 0, or -1 with msg when it does not fit. */
static int copy_name(const char *name, char *out, size_t outlen, char *msg, size_t msglen)
{
    if (fg_fmt(out, outlen, "%s", name) == 0)
        return 0;
    snprintf(msg, msglen, "the mapped account name is too long");
    return -1;
}

int fg_account_map(const char *map_path, const char *prefix, const char *user, char *out,
                   size_t outlen, char *msg, size_t msglen)
{
    if (!map_path[0])
        return fg_account_name(prefix, user, out, outlen, msg, msglen);
    char *text = user_map_text(map_path);
    if (!text) {
        snprintf(msg, msglen, "cannot read the user map %s", map_path);
        return -1;
    }
    char a[128], b[128], star[128] = "";
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (line[0] == '#' || sscanf(line, "%127s %127s", a, b) != 2)
            continue;
        if (!strcmp(a, user)) {
            free(text);
            return copy_name(b, out, outlen, msg, msglen);
        }
        if (!strcmp(a, "*"))
            snprintf(star, sizeof star, "%s", b);
    }
    free(text);
    if (star[0])
        return copy_name(star, out, outlen, msg, msglen);
    return fg_account_name(prefix, user, out, outlen, msg, msglen);
}

/* ------------------------------------------------------------ accounts */

int fg_account_check_ids(const char *name, uid_t uid, gid_t gid, char *msg, size_t msglen)
{
    if (uid == 0) {
        snprintf(msg, msglen, "refusing to run a job as root (account %s has uid 0)", name);
        return -1;
    }
    if (gid == 0) {
        snprintf(msg, msglen, "refusing to run a job in group root (account %s has gid 0)", name);
        return -1;
    }
    if (uid == getuid() || uid == geteuid()) {
        snprintf(msg, msglen, "refusing to run a job as the agent's own user (account %s, uid %d)",
                 name, (int)uid);
        return -1;
    }
    return 0;
}

/* Runs useradd for name (a valid name): 0 or -1 with msg. Under g_acct_mu. */
static int useradd(const char *name, char *msg, size_t msglen)
{
    char *argv[] = {"useradd",           "-r",         "-M", "-d", "/nonexistent", "-s",
                    "/usr/sbin/nologin", (char *)name, NULL};
    pid_t pid;
    int err = posix_spawnp(&pid, "useradd", NULL, NULL, argv, environ);
    if (err != 0) {
        snprintf(msg, msglen, "cannot run useradd for %s: %s", name, strerror(err));
        return -1;
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        snprintf(msg, msglen, "useradd %s failed (status %d)", name,
                 WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return -1;
    }
    fg_log(FG_LOG_INFO, "created Unix account %s for jobs", name);
    return 0;
}

int fg_account_ensure(const char *name, uid_t *uid, gid_t *gid, char *msg, size_t msglen)
{
    uid_t u;
    gid_t g;
    if (fg_user_lookup(name, &u, &g, NULL, NULL) != 0) {
        pthread_mutex_lock(&g_acct_mu);
        char buf[4096];
        struct passwd pw, *r = NULL;
        int rc = 0;
        if (getpwnam_r(name, &pw, buf, sizeof buf, &r) != 0 || !r) {
            /* not there (nor created meanwhile by another thread) */
            if (!fg_account_valid(name)) {
                snprintf(msg, msglen, "invalid Unix account name '%s'", name);
                rc = -1;
            } else {
                rc = useradd(name, msg, msglen);
            }
        }
        pthread_mutex_unlock(&g_acct_mu);
        if (rc != 0)
            return -1;
        if (fg_user_lookup(name, &u, &g, NULL, NULL) != 0) {
            snprintf(msg, msglen, "no Unix account %s after creating it", name);
            return -1;
        }
    }
    if (fg_account_check_ids(name, u, g, msg, msglen) != 0)
        return -1;
    if (uid)
        *uid = u;
    if (gid)
        *gid = g;
    return 0;
}
