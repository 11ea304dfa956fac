/*
 * account.h - the Unix account a job runs as: mapping a controller username to an
 * account name (the user map file, else prefix + username, hashed when too long),
 * creating the account on first use, and the checks that refuse root and the agent's
 * own identity. See docs/agent.md ("Unix account").
 */
#ifndef FG_AGENT_ACCOUNT_H
#define FG_AGENT_ACCOUNT_H

#include <stddef.h>
#include <sys/types.h>

/* Longest Unix account name the agent creates or uses (useradd's limit). */
#define FG_ACCOUNT_MAX 32
/* Hex digits of SHA-256(username) in a hashed account name (64 bits). */
#define FG_ACCOUNT_HASH_HEX 16
/* Longest --user-prefix: a hashed name needs room for "-" and the hash. */
#define FG_ACCOUNT_PREFIX_MAX (FG_ACCOUNT_MAX - 1 - FG_ACCOUNT_HASH_HEX)

/* 1 if s is an account name the agent may create: [a-z0-9_.-], 1..FG_ACCOUNT_MAX
 * characters, starting with a letter or '_'. */
int fg_account_valid(const char *s);

/* 1 if prefix can be a --user-prefix: [a-z_][a-z0-9_.-]*, 1 to FG_ACCOUNT_PREFIX_MAX
 * characters. Never empty: a username would then be the name of any existing account
 * (`daemon`, `postgres`, ...); map such names explicitly with --user-map. */
int fg_account_prefix_valid(const char *prefix);

/*
 * The account name for controller user `user` (any [a-z0-9_.-]{1,64}) with `prefix`:
 * prefix+user when that is a valid name of at most FG_ACCOUNT_MAX characters that does
 * not look like a hashed name; otherwise prefix + the first characters of user + "-" +
 * the first FG_ACCOUNT_HASH_HEX hex digits of SHA-256(user), exactly FG_ACCOUNT_MAX
 * characters (so a plain name never equals a hashed one). Deterministic. 0, or -1 with
 * msg when the prefix is not valid.
 */
int fg_account_name(const char *prefix, const char *user, char *out, size_t outlen, char *msg,
                    size_t msglen);

/*
 * Maps `user` to its account: the user map file `map_path` ("" = none; lines "username
 * account", "*" = anyone; an exact match wins over "*"), else fg_account_name.
 * 0, or -1 with msg. Thread-safe (the map file is re-read only when it changed).
 */
int fg_account_map(const char *map_path, const char *prefix, const char *user, char *out,
                   size_t outlen, char *msg, size_t msglen);

/*
 * Makes sure account `name` exists (useradd -r at first use of a valid name) and is
 * one a job may run as: not uid 0, not primary gid 0, not the agent's own real or
 * effective uid. Fills uid and gid when not NULL. 0, or -1 with msg. Thread-safe.
 */
int fg_account_ensure(const char *name, uid_t *uid, gid_t *gid, char *msg, size_t msglen);

/* 0 if uid/gid may run a job (not root, not the agent's own uids), else -1 with msg
 * naming `name`. */
int fg_account_check_ids(const char *name, uid_t uid, gid_t gid, char *msg, size_t msglen);

#endif
