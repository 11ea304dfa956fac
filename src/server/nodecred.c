/*
 * nodecred.c - node credentials: each node's own bearer token, bound to its name.
 *
 * The cluster's agent token (DATA_DIR/agent.token) is only a join token: with it,
 * POST /v1/agent/join lets a node name the controller has never seen get its own
 * credential ("fgn_" + 43 base64url characters), shown once; the agent keeps it. An
 * admin issues (or rotates) a credential for any name with POST /v1/nodes/NAME/
 * credentials and revokes it with DELETE; a revoked credential is refused (401) at
 * once, and a revoked name cannot join again until an admin issues it a new one.
 *
 * Only crypto_generichash(credential) is kept: in memory, indexed by its first 8 bytes
 * (a request is one hash and one map lookup, as for user tokens), and in the store as
 * the setting "node_credentials", a JSON object {name: hex hash | "revoked"}. Changes
 * are serialised by cred_mu, committed, and only then applied in memory (under
 * cred_lock, a read-write lock of its own: lookups never wait for the big lock mu).
 */
#include "server/server.h"

#include "common/log.h"
#include "common/xalloc.h"

#include <assert.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SETTING   "node_credentials"
#define CREDS_MAX 16384 /* node names with a credential record (a bound on joins) */

/* serialises credential changes (held across their commit; never with mu taken first) */
static pthread_mutex_t cred_mu = PTHREAD_MUTEX_INITIALIZER;
/* guards s->nodecreds and s->nodecred_by_hash: read by every agent request (so not the
 * big lock mu, which the scheduler holds through its passes), written by changes */
static pthread_rwlock_t cred_lock = PTHREAD_RWLOCK_INITIALIZER;

static uint64_t cred_key(const unsigned char h[SRV_TOKEN_HASH])
{
    uint64_t k;
    memcpy(&k, h, sizeof k);
    return k ? k : 1;
}

/* The record of node `name`, or NULL (cred_lock held). */
static srv_nodecred_t *cred_by_name(srv_t *s, const char *name)
{
    for (size_t i = 0; i < s->nnodecreds; i++)
        if (!strcmp(s->nodecreds[i]->name, name))
            return s->nodecreds[i];
    return NULL;
}

/* Sets name's record in memory (cred_lock held for writing): a live credential with
 * hash h, or revoked (h NULL). The old hash leaves the index. */
static void cred_apply(srv_t *s, const char *name, const unsigned char *h)
{
    srv_nodecred_t *c = cred_by_name(s, name);
    if (!c) {
        c = fg_xcalloc(1, sizeof *c);
        snprintf(c->name, sizeof c->name, "%s", name);
        c->revoked = true;
        s->nodecreds =
            fg_xgrow(s->nodecreds, &s->nodecreds_cap, s->nnodecreds + 1, sizeof *s->nodecreds);
        s->nodecreds[s->nnodecreds++] = c;
    }
    if (!c->revoked && srv_map_get(&s->nodecred_by_hash, cred_key(c->hash)) == c)
        srv_map_del(&s->nodecred_by_hash, cred_key(c->hash));
    if (h) {
        memcpy(c->hash, h, SRV_TOKEN_HASH);
        c->revoked = false;
        srv_map_put(&s->nodecred_by_hash, cred_key(c->hash), c);
    } else {
        sodium_memzero(c->hash, sizeof c->hash);
        c->revoked = true;
    }
}

int srv_nodecred_load(srv_t *s)
{
    fg_store_tx_t *tx;
    if (fg_store_read_begin(s->store, &tx) != 0)
        return -1;
    char *v = NULL;
    int rc = fg_store_setting_get(tx, SETTING, &v);
    fg_store_read_end(tx);
    if (rc == FG_STORE_ENOENT || (rc == 0 && !v))
        return 0;
    if (rc)
        return -1;
    json_t *o = json_loads(v, 0, NULL);
    free(v);
    if (!json_is_object(o)) {
        json_decref(o);
        fprintf(stderr, "fairgpu server: the stored node credentials are not a JSON object\n");
        return -1;
    }
    const char *name;
    json_t *val;
    pthread_rwlock_wrlock(&cred_lock);
    json_object_foreach(o, name, val)
    {
        unsigned char h[SRV_TOKEN_HASH];
        const char *hex = json_string_value(val);
        size_t n = 0;
        bool live = hex && strcmp(hex, "revoked") &&
                    sodium_hex2bin(h, sizeof h, hex, strlen(hex), NULL, &n, NULL) == 0 &&
                    n == sizeof h;
        if (strlen(name) <= FG_NAME_MAX)
            cred_apply(s, name, live ? h : NULL);
    }
    pthread_rwlock_unlock(&cred_lock);
    json_decref(o);
    return 0;
}

bool srv_nodecred_lookup(srv_t *s, const unsigned char hash[SRV_TOKEN_HASH],
                         char name[FG_NAME_MAX + 1])
{
    pthread_rwlock_rdlock(&cred_lock);
    const srv_nodecred_t *c = srv_map_get(&s->nodecred_by_hash, cred_key(hash));
    bool ok = c && !c->revoked && sodium_memcmp(c->hash, hash, SRV_TOKEN_HASH) == 0;
    if (ok)
        snprintf(name, FG_NAME_MAX + 1, "%s", c->name);
    pthread_rwlock_unlock(&cred_lock);
    return ok;
}

/* The stored object with name's record replaced by hex (cred_lock held); caller frees. */
static char *cred_json(srv_t *s, const char *name, const char *hex)
{
    json_t *o = json_object();
    for (size_t i = 0; i < s->nnodecreds; i++) {
        const srv_nodecred_t *c = s->nodecreds[i];
        char h[2 * SRV_TOKEN_HASH + 1];
        if (!c->revoked)
            srv_token_hex(c->hash, h);
        json_object_set_new(o, c->name, json_string(c->revoked ? "revoked" : h));
    }
    json_object_set_new(o, name, json_string(hex));
    char *txt = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return txt;
}

enum { CRED_NEW_ONLY = 1 };

/*
 * Gives node `name` a fresh credential (tok, shown once; tn >= 64) or, with tok NULL,
 * revokes it. With CRED_NEW_ONLY the name must be new to the controller (no node, no
 * credential record; at most CREDS_MAX records). Returns 0, 409 (not new), 507 (too
 * many nodes: answered 409) or 503 (not stored); nothing changes unless 0.
 */
static int cred_change(srv_t *s, const char *name, int flags, char *tok, size_t tn)
{
    unsigned char h[SRV_TOKEN_HASH];
    char hex[2 * SRV_TOKEN_HASH + 1];
    if (tok) {
        assert(tn >= 64);
        srv_token_new(tok, tn, "fgn");
        srv_token_hash(tok, h);
        srv_token_hex(h, hex);
    }
    pthread_mutex_lock(&cred_mu);
    if (flags & CRED_NEW_ONLY) {
        pthread_mutex_lock(&s->mu);
        bool known = srv_node_by_name(s, name) != NULL;
        pthread_mutex_unlock(&s->mu);
        pthread_rwlock_rdlock(&cred_lock);
        known = known || cred_by_name(s, name);
        bool full = s->nnodecreds >= CREDS_MAX;
        pthread_rwlock_unlock(&cred_lock);
        if (known || full) {
            pthread_mutex_unlock(&cred_mu);
            return known ? 409 : 507;
        }
    }
    pthread_rwlock_rdlock(&cred_lock);
    char *txt = cred_json(s, name, tok ? hex : "revoked");
    pthread_rwlock_unlock(&cred_lock);
    srv_batch_t b = {0};
    srv_op_t *o = srv_batch_add(&b, OP_SETTING_SET, NULL);
    o->s1 = SETTING;
    o->s2 = txt;
    int rc = srv_batch_commit(s, &b);
    srv_batch_free(&b);
    free(txt);
    if (rc == 0) {
        pthread_rwlock_wrlock(&cred_lock);
        cred_apply(s, name, tok ? h : NULL);
        pthread_rwlock_unlock(&cred_lock);
    }
    pthread_mutex_unlock(&cred_mu);
    if (rc)
        fg_log(FG_LOG_ERROR, "node %s: the credential change could not be stored: %s", name,
               fg_store_strerror(rc));
    return rc ? 503 : 0;
}

/* Replies 201 {node, token} for a fresh credential. */
static int reply_cred(srv_req_t *r, const char *name, char *tok)
{
    int ret = srv_reply_json(r, 201, json_pack("{s:s,s:s}", "node", name, "token", tok));
    sodium_memzero(tok, strlen(tok));
    return ret;
}

int h_agent_join(srv_req_t *r)
{
    json_t *b = srv_body_object(r);
    if (!b)
        return SRV_YES;
    const char *node = json_string_value(json_object_get(b, "node"));
    int ret;
    char tok[96];
    if (!node || !srv_node_name_ok(node)) {
        ret = srv_reply_error(r, 400, "invalid_argument", "node",
                              "node must match [A-Za-z0-9_.-]{1,63}");
    } else {
        int rc = cred_change(r->srv, node, CRED_NEW_ONLY, tok, sizeof tok);
        if (rc == 409)
            ret = srv_reply_error(r, 409, "conflict", "node",
                                  "node '%s' is already known to this controller: the join token "
                                  "only admits new nodes; an admin issues its credential "
                                  "(fairgpu node-token create %s)",
                                  node, node);
        else if (rc == 507)
            ret = srv_reply_error(r, 409, "conflict", "node",
                                  "this controller holds %d node credentials, its most; an admin "
                                  "issues further ones",
                                  CREDS_MAX);
        else if (rc)
            ret =
                srv_reply_error(r, 503, "unavailable", NULL, "the credential could not be stored");
        else {
            fg_log(FG_LOG_INFO, "node %s joined with the cluster join token", node);
            ret = reply_cred(r, node, tok);
        }
    }
    json_decref(b);
    return ret;
}

int h_nodes_cred_create(srv_req_t *r)
{
    const char *node = r->seg[2];
    if (!srv_node_name_ok(node))
        return srv_reply_error(r, 400, "invalid_argument", "node",
                               "node must match [A-Za-z0-9_.-]{1,63}");
    char tok[96];
    if (cred_change(r->srv, node, 0, tok, sizeof tok))
        return srv_reply_error(r, 503, "unavailable", NULL, "the credential could not be stored");
    srv_audit(r->srv, r->user_id, "node.credential.create", node, NULL);
    return reply_cred(r, node, tok);
}

int h_nodes_cred_revoke(srv_req_t *r)
{
    const char *node = r->seg[2];
    if (!srv_node_name_ok(node))
        return srv_reply_error(r, 400, "invalid_argument", "node",
                               "node must match [A-Za-z0-9_.-]{1,63}");
    if (cred_change(r->srv, node, 0, NULL, 0))
        return srv_reply_error(r, 503, "unavailable", NULL, "the revocation could not be stored");
    srv_audit(r->srv, r->user_id, "node.credential.revoke", node, NULL);
    return srv_reply_json(r, 200, json_pack("{s:s,s:b}", "node", node, "revoked", 1));
}
