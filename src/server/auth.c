/*
 * auth.c - passwords, bearer tokens, request authentication, per-token rate limits.
 *
 * Tokens are "fg_" + 43 base64url characters of 32 random bytes (randombytes_buf).
 * Only crypto_generichash(token) is kept, in the store (as hex) and in memory; a
 * request's token is hashed, its first 8 bytes index a map, and the full 32 bytes are
 * compared with sodium_memcmp. Login sessions and API tokens share the index; sessions
 * expire. Passwords are Argon2id strings (crypto_pwhash_str). Login for an unknown user
 * still verifies against a dummy hash, so both failures cost the same and read the same.
 */
#include "server/server.h"

#include "common/log.h"
#include "common/xalloc.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int srv_auth_init(srv_t *s)
{
    if (sodium_init() < 0) {
        fg_log(FG_LOG_ERROR, "libsodium failed to initialise");
        return -1;
    }
    if (s->cfg.fast_password_hash) {
        s->pw_ops = crypto_pwhash_OPSLIMIT_MIN;
        s->pw_mem = crypto_pwhash_MEMLIMIT_MIN;
    } else {
        s->pw_ops = crypto_pwhash_OPSLIMIT_INTERACTIVE;
        s->pw_mem = crypto_pwhash_MEMLIMIT_INTERACTIVE;
    }
    char pw[96];
    srv_token_new(pw, sizeof pw, "x");
    if (srv_password_hash(s, pw, &s->dummy_pwhash))
        return -1;
    return 0;
}

int srv_password_hash(srv_t *s, const char *pw, char **out)
{
    char *h = fg_xmalloc(crypto_pwhash_STRBYTES);
    if (crypto_pwhash_str(h, pw, strlen(pw), s->pw_ops, s->pw_mem) != 0) {
        free(h);
        return -1;
    }
    *out = h;
    return 0;
}

bool srv_password_verify(srv_t *s, const char *hash, const char *pw)
{
    if (!hash)
        hash = s->dummy_pwhash;
    return crypto_pwhash_str_verify(hash, pw, strlen(pw)) == 0;
}

void srv_token_new(char *out, size_t n, const char *prefix)
{
    unsigned char raw[32];
    randombytes_buf(raw, sizeof raw);
    char b64[sodium_base64_ENCODED_LEN(32, sodium_base64_VARIANT_URLSAFE_NO_PADDING)];
    sodium_bin2base64(b64, sizeof b64, raw, sizeof raw, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    snprintf(out, n, "%s_%s", prefix, b64);
    sodium_memzero(raw, sizeof raw);
}

void srv_token_hash(const char *tok, unsigned char out[SRV_TOKEN_HASH])
{
    crypto_generichash(out, SRV_TOKEN_HASH, (const unsigned char *)tok, strlen(tok), NULL, 0);
}

static uint64_t hash_key(const unsigned char h[SRV_TOKEN_HASH])
{
    uint64_t k;
    memcpy(&k, h, sizeof k);
    return k ? k : 1;
}

/* Adds t to the token index (mu held). */
void srv_token_index(srv_t *s, srv_token_t *t)
{
    srv_map_put(&s->token_by_hash, hash_key(t->hash), t);
}

void srv_token_hex(const unsigned char h[SRV_TOKEN_HASH], char out[2 * SRV_TOKEN_HASH + 1])
{
    sodium_bin2hex(out, 2 * SRV_TOKEN_HASH + 1, h, SRV_TOKEN_HASH);
}

/* Adds a credential to the in-memory index (mu held); returns it. */
srv_token_t *srv_token_add(srv_t *s, int64_t id, int64_t user_id, bool session, const char *name,
                           const unsigned char hash[SRV_TOKEN_HASH], int64_t created_at,
                           int64_t expires_at)
{
    srv_token_t *t = fg_xcalloc(1, sizeof *t);
    t->id = id;
    t->user_id = user_id;
    t->session = session;
    t->name = name ? fg_xstrdup(name) : NULL;
    memcpy(t->hash, hash, SRV_TOKEN_HASH);
    t->created_at = created_at;
    t->expires_at = expires_at;
    s->tokens = fg_xgrow(s->tokens, &s->tokens_cap, s->ntokens + 1, sizeof *s->tokens);
    s->tokens[s->ntokens++] = t;
    srv_token_index(s, t);
    return t;
}

srv_token_t *srv_req_token(srv_t *s, const srv_req_t *r)
{
    if (!r->has_cred)
        return NULL;
    srv_token_t *t = srv_map_get(&s->token_by_hash, hash_key(r->cred_hash));
    return t && sodium_memcmp(t->hash, r->cred_hash, SRV_TOKEN_HASH) == 0 ? t : NULL;
}

void srv_token_drop(srv_t *s, srv_token_t *t)
{
    if (srv_map_get(&s->token_by_hash, hash_key(t->hash)) == t)
        srv_map_del(&s->token_by_hash, hash_key(t->hash));
    for (size_t i = 0; i < s->ntokens; i++)
        if (s->tokens[i] == t) {
            s->tokens[i] = s->tokens[--s->ntokens];
            break;
        }
    free(t->name);
    sodium_memzero(t, sizeof *t);
    free(t);
}

size_t srv_token_drop_user(srv_t *s, int64_t user_id, bool tokens, const unsigned char *keep)
{
    size_t n = 0;
    s->cred_gen++;
    for (size_t i = 0; i < s->ntokens;) {
        srv_token_t *t = s->tokens[i];
        bool kept = keep && sodium_memcmp(t->hash, keep, SRV_TOKEN_HASH) == 0;
        if (t->user_id == user_id && (t->session || tokens) && !kept) {
            srv_token_drop(s, t); /* moves the last entry to i */
            n++;
        } else {
            i++;
        }
    }
    return n;
}

size_t srv_token_sweep(srv_t *s, int64_t now)
{
    size_t n = 0;
    for (size_t i = 0; i < s->ntokens;) {
        srv_token_t *t = s->tokens[i];
        if (t->deleted || (t->expires_at != 0 && t->expires_at <= now)) {
            srv_token_drop(s, t);
            n++;
        } else {
            i++;
        }
    }
    return n;
}

srv_user_t *srv_user_by_id(srv_t *s, int64_t id)
{
    for (size_t i = 0; i < s->nusers; i++)
        if (s->users[i]->r.id == id)
            return s->users[i];
    return NULL;
}

srv_user_t *srv_user_by_name(srv_t *s, const char *name)
{
    for (size_t i = 0; i < s->nusers; i++)
        if (!strcmp(s->users[i]->r.username, name))
            return s->users[i];
    return NULL;
}

srv_account_t *srv_account_by_name(srv_t *s, const char *name)
{
    for (size_t i = 0; i < s->naccounts; i++)
        if (!strcmp(s->accounts[i]->r.name, name))
            return s->accounts[i];
    return NULL;
}

srv_member_t *srv_member_find(srv_t *s, const char *account, int64_t user_id)
{
    for (size_t i = 0; i < s->nmembers; i++) {
        srv_member_t *m = s->members[i];
        if (!m->deleted && m->r.user_id == user_id && !strcmp(m->r.account, account))
            return m;
    }
    return NULL;
}

/* The user's default account (mu held): the membership flagged default, else the
 * earliest. NULL if none. */
const char *srv_user_default_account(srv_t *s, int64_t user_id)
{
    srv_member_t *best = NULL;
    for (size_t i = 0; i < s->nmembers; i++) {
        srv_member_t *m = s->members[i];
        if (m->deleted || m->r.user_id != user_id)
            continue;
        if (m->r.is_default)
            return m->r.account;
        if (!best || m->r.position < best->r.position)
            best = m;
    }
    return best ? best->r.account : NULL;
}

/* Makes r the request of t's user if t is live (not revoked, not expired) and the
 * user exists and is enabled; otherwise r stays anonymous. mu held. */
static void auth_accept(srv_req_t *r, srv_token_t *t, int64_t now)
{
    if (t->deleted || (t->expires_at != 0 && t->expires_at <= now)) {
        srv_token_drop(r->srv, t); /* expired: no longer kept in memory */
        return;
    }
    srv_user_t *u = srv_user_by_id(r->srv, t->user_id);
    if (u && !u->r.disabled) {
        r->user_id = u->r.id;
        r->admin = u->r.role == FG_STORE_ROLE_ADMIN;
        r->has_cred = true;
        r->cred_session = t->session;
        r->cred_id = t->id;
        memcpy(r->cred_hash, t->hash, SRV_TOKEN_HASH);
        snprintf(r->username, sizeof r->username, "%s", u->r.username);
    }
}

void srv_authenticate(srv_req_t *r)
{
    srv_t *s = r->srv;
    const char *h = srv_header(r, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return;
    const char *tok = h + 7;
    while (*tok == ' ')
        tok++;
    size_t n = strlen(tok);
    if (n == 0 || n > 256)
        return;
    unsigned char hash[SRV_TOKEN_HASH];
    srv_conn_token_hash(r->conn, tok, n, hash);
    if (sodium_memcmp(hash, s->agent_token_hash, SRV_TOKEN_HASH) == 0) {
        r->agent_join = true; /* the cluster token: it may only join new nodes */
        return;
    }
    if (!strncmp(tok, "fgn_", 4)) { /* a node credential: bound to its node's name */
        r->agent = srv_nodecred_lookup(s, hash, r->agent_node);
        return;
    }
    int64_t now = srv_now();
    pthread_mutex_lock(&s->mu);
    srv_token_t *t = srv_map_get(&s->token_by_hash, hash_key(hash));
    if (t && sodium_memcmp(t->hash, hash, SRV_TOKEN_HASH) != 0)
        t = NULL;
    if (t) { /* the usual case, known credential: one lock for lookup and checks */
        auth_accept(r, t, now);
        pthread_mutex_unlock(&s->mu);
        return;
    }
    uint64_t gen = s->cred_gen;
    pthread_mutex_unlock(&s->mu);
    if (!t) {
        /* Not cached: a credential created before this process started. A revocation
         * that commits while the store is read may or may not be seen by the read: if
         * one happened (cred_gen moved), the credential is refused this time rather
         * than cached alive. */
        char hex[2 * SRV_TOKEN_HASH + 1];
        srv_token_hex(hash, hex);
        fg_store_tx_t *tx;
        if (fg_store_read_begin(s->store, &tx) == 0) {
            fg_store_user_t u = {0};
            int kind = 0;
            int64_t cred = 0;
            int rc = fg_store_auth_lookup(tx, hex, now, &u, &kind, &cred);
            int64_t expires = 0, created = 0;
            char *name = NULL;
            if (rc == 0 && kind == FG_STORE_AUTH_SESSION) {
                fg_store_session_t se = {0};
                if (fg_store_session_get(tx, hex, &se) == 0) {
                    expires = se.expires_at;
                    created = se.created_at;
                }
                fg_store_session_clear(&se);
            } else if (rc == 0) {
                fg_store_token_t tk = {0};
                if (fg_store_token_get_by_hash(tx, hex, &tk) == 0) {
                    created = tk.created_at;
                    name = tk.name ? fg_xstrdup(tk.name) : NULL;
                }
                fg_store_token_clear(&tk);
            }
            fg_store_read_end(tx);
            if (rc == 0) {
                pthread_mutex_lock(&s->mu);
                t = srv_map_get(&s->token_by_hash, hash_key(hash));
                if (t && sodium_memcmp(t->hash, hash, SRV_TOKEN_HASH) != 0)
                    t = NULL;
                if (!t && s->cred_gen == gen)
                    t = srv_token_add(s, kind == FG_STORE_AUTH_SESSION ? 0 : cred, u.id,
                                      kind == FG_STORE_AUTH_SESSION, name, hash, created, expires);
                if (t)
                    auth_accept(r, t, now);
                pthread_mutex_unlock(&s->mu);
            }
            free(name);
            fg_store_user_clear(&u);
        }
    }
}

/* Token bucket per credential. Returns true if the request may proceed; otherwise
 * *retry_after gets the seconds until a token is available. */
bool srv_rate_check(srv_t *s, srv_req_t *r, double *retry_after)
{
    double rps = s->cfg.rate_limit_rps;
    if (rps <= 0 || !r->user_id || !r->has_cred)
        return true;
    double burst = s->cfg.rate_limit_burst;
    double now = (double)srv_now_ms();
    bool ok = true;
    pthread_mutex_lock(&s->mu);
    srv_token_t *t = srv_req_token(s, r);
    if (!t) { /* revoked since this request was authenticated */
        pthread_mutex_unlock(&s->mu);
        return true;
    }
    if (t->last_ms == 0) {
        t->bucket = burst;
        t->last_ms = now;
    }
    t->bucket += (now - t->last_ms) / 1000.0 * rps;
    if (t->bucket > burst)
        t->bucket = burst;
    t->last_ms = now;
    if (t->bucket >= 1.0) {
        t->bucket -= 1.0;
    } else {
        ok = false;
        *retry_after = (1.0 - t->bucket) / rps;
    }
    pthread_mutex_unlock(&s->mu);
    return ok;
}
