/*
 * h_users.c - users, sessions, API tokens, accounts, memberships and the audit log.
 *
 * Each mutating handler validates everything first, then commits one store batch,
 * then updates the in-memory model: a rejected request changes nothing.
 */
#include "server/server.h"
#include "server/valid.h"

#include "common/log.h"
#include "common/xalloc.h"

#include <assert.h>
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------ helpers */

static void user_add_mem(srv_t *s, const fg_store_user_t *rec, int64_t id)
{
    srv_user_t *u = fg_xcalloc(1, sizeof *u);
    u->r = *rec;
    u->r.id = id;
    u->r.username = srv_strdup0(rec->username);
    u->r.email = srv_strdup0(rec->email);
    u->r.display_name = srv_strdup0(rec->display_name);
    u->r.password_hash = srv_strdup0(rec->password_hash);
    u->r.default_account = NULL;
    s->users = fg_xgrow(s->users, &s->users_cap, s->nusers + 1, sizeof *s->users);
    s->users[s->nusers++] = u;
}

static int64_t next_position(srv_t *s)
{
    int64_t p = 0;
    for (size_t i = 0; i < s->nmembers; i++)
        if (s->members[i]->r.position > p)
            p = s->members[i]->r.position;
    return p + 1;
}

static void member_add_mem(srv_t *s, int64_t user_id, const char *account, double weight)
{
    srv_member_t *m = fg_xcalloc(1, sizeof *m);
    m->r.user_id = user_id;
    m->r.account = fg_xstrdup(account);
    m->r.weight = weight;
    m->r.position = next_position(s);
    m->r.is_default = srv_user_default_account(s, user_id) == NULL;
    srv_user_t *u = srv_user_by_id(s, user_id);
    m->r.username = u ? fg_xstrdup(u->r.username) : NULL;
    s->members = fg_xgrow(s->members, &s->members_cap, s->nmembers + 1, sizeof *s->members);
    s->members[s->nmembers++] = m;
}

static bool valid_email(const char *e)
{
    const char *at = strchr(e, '@');
    return at && at != e && at[1] != 0;
}

/* Text another user or an admin will see (v_text_ok); replies 400 naming key if not. */
static bool check_shown(srv_req_t *r, const char *key, const char *v)
{
    if (!v || v_text_ok(v))
        return true;
    srv_reply_error(r, 400, "invalid_argument", key,
                    "'%s' must not hold control characters (CR, LF, ...) or bidirectional "
                    "overrides",
                    key);
    return false;
}

/* The number of enabled admins other than uid (mu held). */
static size_t other_admins(srv_t *s, int64_t uid)
{
    size_t n = 0;
    for (size_t i = 0; i < s->nusers; i++) {
        const srv_user_t *u = s->users[i];
        if (u->r.id != uid && u->r.role == FG_STORE_ROLE_ADMIN && !u->r.disabled)
            n++;
    }
    return n;
}

/* Removes DATA_DIR/setup-token (the setup token was used, or an admin exists). */
static void setup_file_remove(srv_t *s)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/setup-token", s->cfg.data_dir);
    if (unlink(path) != 0 && errno != ENOENT)
        fg_log(FG_LOG_WARN, "cannot remove '%s': %s", path, strerror(errno));
}

/* Role and disabled changes (PATCH /v1/users/{id}) run one at a time, so that the
 * check that an enabled admin remains and the change it allows are one step. */
static pthread_mutex_t role_mu = PTHREAD_MUTEX_INITIALIZER;

static bool check_password(srv_req_t *r, const char *pw, const char *field)
{
    if (strlen(pw) < 10) {
        srv_reply_error(r, 400, "invalid_argument", field,
                        "the password must be at least 10 characters");
        return false;
    }
    return true;
}

static void notify_accounts(srv_t *s)
{
    srv_sched_post(s, srv_msg_new(MSG_ACCOUNT));
}

/* ------------------------------------------------------------------ users */

int h_users_create(srv_req_t *r)
{
    srv_t *s = r->srv;
    json_t *b = srv_body_object(r);
    if (!b)
        return SRV_YES;
    const char *username, *email, *password, *account, *display, *setup;
    int ret = SRV_YES;
    if (!v_string(r, b, "setup_token", false, 256, &setup))
        goto out;
    /* closed registration: only admins, or the holder of the setup token (the first
     * admin) */
    if (!s->cfg.registration_open && !r->admin && !setup) {
        ret = r->user_id ? srv_reply_error(r, 403, "forbidden", NULL,
                                           "registration is closed; only an admin creates users")
                         : srv_reply_error(r, 401, "unauthenticated", NULL,
                                           "registration is closed; log in as an admin");
        goto out;
    }
    if (!v_string(r, b, "username", true, 64, &username) ||
        !v_string(r, b, "email", true, 254, &email) ||
        !v_string(r, b, "password", true, 1024, &password) ||
        !v_string(r, b, "account", false, 64, &account) ||
        !v_string(r, b, "display_name", false, 128, &display))
        goto out;
    if (!v_username_ok(username)) {
        ret = srv_reply_error(r, 400, "invalid_argument", "username",
                              "username must match [a-z0-9_.-]{1,63} and not be all digits");
        goto out;
    }
    if (!valid_email(email)) {
        ret = srv_reply_error(r, 400, "invalid_argument", "email", "email must contain '@'");
        goto out;
    }
    if (!check_shown(r, "email", email) || !check_shown(r, "display_name", display))
        goto out;
    if (!check_password(r, password, "password"))
        goto out;
    if (!r->admin)
        account = NULL; /* honoured only when an admin creates the user */
    if (!account)
        account = "default";
    pthread_mutex_lock(&s->mu);
    bool exists = srv_user_by_name(s, username) != NULL;
    bool acct_ok = srv_account_by_name(s, account) != NULL;
    pthread_mutex_unlock(&s->mu);
    if (exists) {
        ret = srv_reply_error(r, 409, "conflict", "username", "username '%s' is taken", username);
        goto out;
    }
    if (!acct_ok) {
        ret = srv_reply_error(r, 400, "invalid_argument", "account", "no account '%s'", account);
        goto out;
    }
    char *hash = NULL;
    int pr = srv_pw_hash(r, password, &hash); /* on the password pool: may park (0) */
    if (pr <= 0) {
        if (pr < 0)
            ret = srv_reply_error(r, 503, "unavailable", NULL, "password hashing failed");
        goto out;
    }
    /* The setup token makes the first admin: its claim and the insert are one unit. */
    char setup_hex[2 * SRV_TOKEN_HASH + 1] = {0};
    if (setup) {
        unsigned char h[SRV_TOKEN_HASH];
        srv_token_hash(setup, h);
        srv_token_hex(h, setup_hex);
    }
    fg_store_user_t u = {.username = (char *)username,
                         .email = (char *)email,
                         .display_name = (char *)display,
                         .password_hash = hash,
                         .role = setup ? FG_STORE_ROLE_ADMIN : FG_STORE_ROLE_USER,
                         .created_at = srv_now()};
    fg_store_member_t m = {.user_id = -1, .account = (char *)account, .weight = 1.0};
    srv_batch_t bt = {0};
    size_t claim_i = (size_t)-1;
    if (setup) {
        srv_batch_add(&bt, OP_SETUP_CLAIM, NULL)->s1 = setup_hex;
        claim_i = bt.n - 1;
    }
    srv_batch_add(&bt, OP_USER_INSERT, &u);
    size_t ui_i = bt.n - 1;
    srv_batch_add(&bt, OP_MEMBER_ADD, &m);
    int rc = srv_batch_commit(s, &bt);
    srv_op_t *ui = &bt.ops[ui_i];
    if (rc == FG_STORE_ENOENT && bt.failed_op == (int)claim_i) {
        ret = srv_reply_error(r, 403, "forbidden", "setup_token",
                              "the setup token is wrong or was already used");
    } else if (rc == FG_STORE_EEXIST) {
        ret = srv_reply_error(r, 409, "conflict", "username", "username '%s' is taken", username);
    } else if (rc) {
        ret = srv_reply_error(r, (unsigned)srv_store_err_status(rc), "unavailable", NULL,
                              "the user could not be stored: %s", fg_store_strerror(rc));
    } else {
        pthread_mutex_lock(&s->mu);
        user_add_mem(s, &u, ui->out);
        member_add_mem(s, ui->out, account, 1.0);
        json_t *uj = srv_user_json(s, s->users[s->nusers - 1]);
        pthread_mutex_unlock(&s->mu);
        if (r->admin)
            srv_audit(s, r->user_id, "user.create", username,
                      json_pack("{s:s}", "account", account));
        if (setup) {
            setup_file_remove(s);
            fg_log(FG_LOG_INFO, "the setup token was used: '%s' is the first admin", username);
        }
        notify_accounts(s);
        ret = srv_reply_json(r, 201, uj);
    }
    srv_batch_free(&bt);
    sodium_memzero(hash, strlen(hash));
    free(hash);
out:
    json_decref(b);
    return ret;
}

int h_users_list(srv_req_t *r)
{
    srv_t *s = r->srv;
    long long limit = 100;
    const char *ls = srv_query(r, "limit");
    if (ls) {
        char *end;
        limit = strtoll(ls, &end, 10);
        if (*end || limit < 1 || limit > 1000)
            return srv_reply_error(r, 400, "invalid_argument", "limit", "limit must be 1..1000");
    }
    int64_t after = 0;
    const char *cur = srv_query(r, "cursor");
    if (cur && *cur && fg_store_cursor_decode(cur, &after))
        return srv_reply_error(r, 400, "invalid_argument", "cursor", "malformed cursor");
    json_t *items = json_array();
    int64_t last = 0;
    bool more = false;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->nusers; i++) {
        srv_user_t *u = s->users[i];
        if (u->r.id <= after)
            continue;
        if ((long long)json_array_size(items) == limit) {
            more = true;
            break;
        }
        json_array_append_new(items, srv_user_json(s, u));
        last = u->r.id;
    }
    pthread_mutex_unlock(&s->mu);
    char *nc = more ? fg_store_cursor_encode(last) : NULL;
    json_t *o = json_pack("{s:o,s:s?}", "items", items, "next_cursor", nc);
    free(nc);
    return srv_reply_json(r, 200, o);
}

/* A user named on an admin route: all digits is a user id, anything else a username
 * (usernames are never all digits, so the two never meet). */
static bool parse_user_ref(srv_t *s, const char *ref, int64_t *id)
{
    bool digits = *ref != 0 && strlen(ref) <= 18;
    for (const char *p = ref; digits && *p; p++)
        digits = *p >= '0' && *p <= '9';
    pthread_mutex_lock(&s->mu);
    srv_user_t *u = digits ? srv_user_by_id(s, strtoll(ref, NULL, 10)) : srv_user_by_name(s, ref);
    *id = u ? u->r.id : 0;
    pthread_mutex_unlock(&s->mu);
    return u != NULL;
}

int h_users_patch(srv_req_t *r)
{
    srv_t *s = r->srv;
    int64_t uid;
    if (!parse_user_ref(s, r->seg[2], &uid))
        return srv_reply_error(r, 404, "not_found", NULL, "no such user");
    json_t *b = srv_body_object(r);
    if (!b)
        return SRV_YES;
    int ret = SRV_YES;
    const char *role, *account;
    double weight = 1;
    bool has_weight, disabled = false, has_disabled;
    if (!v_string(r, b, "role", false, 16, &role) ||
        !v_string(r, b, "account", false, 64, &account) ||
        !v_number(r, b, "weight", 1e-6, 1e9, &weight, &has_weight) ||
        !v_bool(r, b, "disabled", &disabled, &has_disabled))
        goto out;
    if (role && strcmp(role, "admin") && strcmp(role, "user")) {
        ret = srv_reply_error(r, 400, "invalid_argument", "role", "role must be admin or user");
        goto out;
    }
    pthread_mutex_lock(&role_mu);
    pthread_mutex_lock(&s->mu);
    srv_user_t *u = srv_user_by_id(s, uid);
    assert(u); /* users are never removed */
    /* only the fields this route changes: the others are re-read in the unit */
    srv_user_change_t ch = {.id = uid, .role = -1, .disabled = -1};
    if (role)
        ch.role = !strcmp(role, "admin") ? FG_STORE_ROLE_ADMIN : FG_STORE_ROLE_USER;
    if (has_disabled)
        ch.disabled = disabled;
    bool was_admin = u->r.role == FG_STORE_ROLE_ADMIN && !u->r.disabled;
    bool stays_admin =
        (ch.role < 0 ? u->r.role == FG_STORE_ROLE_ADMIN : ch.role == FG_STORE_ROLE_ADMIN) &&
        !(ch.disabled < 0 ? u->r.disabled : ch.disabled);
    bool last_admin = was_admin && !stays_admin && other_admins(s, uid) == 0;
    bool revoke = ch.disabled == 1 && !u->r.disabled;
    bool acct_exists = !account || srv_account_by_name(s, account);
    bool is_member = account && srv_member_find(s, account, uid);
    const char *cur_acct = srv_user_default_account(s, uid);
    char cur_copy[80] = {0};
    if (cur_acct)
        snprintf(cur_copy, sizeof cur_copy, "%s", cur_acct);
    pthread_mutex_unlock(&s->mu);
    if (last_admin) {
        pthread_mutex_unlock(&role_mu);
        ret = srv_reply_error(r, 409, "conflict", has_disabled && disabled ? "disabled" : "role",
                              "this is the last enabled admin: make another admin first");
        goto out;
    }
    if (!acct_exists) {
        pthread_mutex_unlock(&role_mu);
        ret = srv_reply_error(r, 400, "invalid_argument", "account", "no account '%s'", account);
        goto out;
    }
    srv_batch_t bt = {0};
    srv_batch_add(&bt, OP_USER_MODIFY, &ch);
    if (revoke) { /* a disabled user's credentials end now, and stay ended if re-enabled */
        srv_batch_add(&bt, OP_SESSIONS_DELETE_USER, NULL)->i1 = uid;
        srv_batch_add(&bt, OP_TOKENS_DELETE_USER, NULL)->i1 = uid;
    }
    fg_store_member_t m = {.user_id = uid, .account = (char *)account, .weight = 1.0};
    if (account && !is_member)
        srv_batch_add(&bt, OP_MEMBER_ADD, &m)->i1 = uid;
    if (account) {
        srv_op_t *o = srv_batch_add(&bt, OP_MEMBER_DEFAULT, NULL);
        o->i1 = uid;
        o->s1 = account;
    }
    const char *wacct = account ? account : (cur_copy[0] ? cur_copy : NULL);
    if (has_weight && wacct) {
        srv_op_t *o = srv_batch_add(&bt, OP_MEMBER_WEIGHT, NULL);
        o->i1 = uid;
        o->s1 = wacct;
        o->d1 = weight;
    }
    int rc = srv_batch_commit(s, &bt);
    srv_batch_free(&bt);
    if (rc) {
        pthread_mutex_unlock(&role_mu);
        ret = srv_reply_error(r, (unsigned)srv_store_err_status(rc),
                              rc == FG_STORE_ENOENT ? "not_found" : "unavailable", NULL,
                              "the change could not be stored: %s", fg_store_strerror(rc));
        goto out;
    }
    pthread_mutex_lock(&s->mu);
    u = srv_user_by_id(s, uid);
    if (ch.role >= 0)
        u->r.role = ch.role;
    if (ch.disabled >= 0)
        u->r.disabled = ch.disabled;
    if (revoke)
        srv_token_drop_user(s, uid, true, NULL);
    if (account && !is_member)
        member_add_mem(s, uid, account, 1.0);
    if (account)
        for (size_t i = 0; i < s->nmembers; i++) {
            srv_member_t *mm = s->members[i];
            if (!mm->deleted && mm->r.user_id == uid)
                mm->r.is_default = !strcmp(mm->r.account, account);
        }
    if (has_weight && wacct) {
        srv_member_t *mm = srv_member_find(s, wacct, uid);
        if (mm)
            mm->r.weight = weight;
    }
    json_t *uj = srv_user_json(s, u);
    char uname[72];
    snprintf(uname, sizeof uname, "%s", u->r.username);
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&role_mu);
    srv_audit(s, r->user_id, "user.update", uname, json_incref(b));
    notify_accounts(s);
    ret = srv_reply_json(r, 200, uj);
out:
    json_decref(b);
    return ret;
}

/* POST /v1/users/{id}/revoke: ends every login session and API token of the user. */
int h_users_revoke(srv_req_t *r)
{
    srv_t *s = r->srv;
    int64_t uid;
    if (!parse_user_ref(s, r->seg[2], &uid))
        return srv_reply_error(r, 404, "not_found", NULL, "no such user");
    srv_batch_t bt = {0};
    srv_batch_add(&bt, OP_SESSIONS_DELETE_USER, NULL)->i1 = uid;
    srv_batch_add(&bt, OP_TOKENS_DELETE_USER, NULL)->i1 = uid;
    int rc = srv_batch_commit(s, &bt);
    int64_t nsess = bt.ops[0].out, ntok = bt.ops[1].out;
    srv_batch_free(&bt);
    if (rc)
        return srv_reply_error(r, 503, "unavailable", NULL,
                               "the revocation could not be stored: %s", fg_store_strerror(rc));
    pthread_mutex_lock(&s->mu);
    srv_token_drop_user(s, uid, true, NULL);
    char uname[72];
    snprintf(uname, sizeof uname, "%s", srv_user_by_id(s, uid)->r.username);
    pthread_mutex_unlock(&s->mu);
    srv_audit(s, r->user_id, "user.revoke", uname,
              json_pack("{s:I,s:I}", "sessions", (json_int_t)nsess, "tokens", (json_int_t)ntok));
    return srv_reply_json(r, 200,
                          json_pack("{s:s,s:I,s:I}", "user", uname, "sessions_revoked",
                                    (json_int_t)nsess, "tokens_revoked", (json_int_t)ntok));
}

/* ------------------------------------------------------------------ sessions */

int h_sessions_create(srv_req_t *r)
{
    srv_t *s = r->srv;
    json_t *b = srv_body_object(r);
    if (!b)
        return SRV_YES;
    int ret = SRV_YES;
    const char *username, *password;
    if (!v_string(r, b, "username", true, 256, &username) ||
        !v_string(r, b, "password", true, 1024, &password))
        goto out;
    pthread_mutex_lock(&s->mu);
    srv_user_t *u = srv_user_by_name(s, username);
    char *hash = u ? srv_strdup0(u->r.password_hash) : NULL;
    bool disabled = u && u->r.disabled;
    int64_t uid = u ? u->r.id : 0;
    pthread_mutex_unlock(&s->mu);
    bool ok = false; /* dummy hash when no user; on the password pool: may park (0) */
    int pr = srv_pw_login(r, username, hash, password, &ok);
    free(hash);
    if (pr == 0)
        goto out;
    if (!uid || !ok || disabled) {
        ret = srv_reply_error(r, 401, "unauthenticated", NULL, "wrong username or password");
        goto out;
    }
    char tok[96];
    srv_token_new(tok, sizeof tok, "fgs");
    unsigned char h[SRV_TOKEN_HASH];
    srv_token_hash(tok, h);
    char hex[2 * SRV_TOKEN_HASH + 1];
    srv_token_hex(h, hex);
    int64_t now = srv_now();
    fg_store_session_t se = {.token_hash = hex,
                             .user_id = uid,
                             .created_at = now,
                             .expires_at = now + s->cfg.session_ttl_s};
    srv_batch_t bt = {0};
    srv_batch_add(&bt, OP_SESSION_INSERT, &se);
    int rc = srv_batch_commit(s, &bt);
    srv_batch_free(&bt);
    if (rc) {
        ret = srv_reply_error(r, 503, "unavailable", NULL, "the session could not be stored: %s",
                              fg_store_strerror(rc));
        goto out;
    }
    pthread_mutex_lock(&s->mu);
    srv_token_add(s, 0, uid, true, NULL, h, now, se.expires_at);
    json_t *uj = srv_user_json(s, srv_user_by_id(s, uid));
    pthread_mutex_unlock(&s->mu);
    ret = srv_reply_json(r, 201,
                         json_pack("{s:s,s:I,s:o}", "token", tok, "expires_at",
                                   (json_int_t)se.expires_at, "user", uj));
    sodium_memzero(tok, sizeof tok);
out:
    json_decref(b);
    return ret;
}

int h_sessions_delete(srv_req_t *r)
{
    srv_t *s = r->srv;
    if (strcmp(r->seg[2], "current"))
        return srv_reply_error(r, 404, "not_found", NULL, "only /v1/sessions/current exists");
    assert(r->has_cred); /* a user route */
    char hex[2 * SRV_TOKEN_HASH + 1];
    srv_token_hex(r->cred_hash, hex);
    srv_batch_t bt = {0};
    srv_op_t *o = srv_batch_add(&bt, r->cred_session ? OP_SESSION_DELETE : OP_TOKEN_DELETE, NULL);
    o->s1 = hex;
    o->i1 = r->cred_id;
    int rc = srv_batch_commit(s, &bt);
    srv_batch_free(&bt);
    if (rc && rc != FG_STORE_ENOENT)
        return srv_reply_error(r, 503, "unavailable", NULL, "logout could not be stored: %s",
                               fg_store_strerror(rc));
    pthread_mutex_lock(&s->mu);
    s->cred_gen++;
    srv_token_t *t = srv_req_token(s, r);
    if (t)
        srv_token_drop(s, t);
    pthread_mutex_unlock(&s->mu);
    return srv_reply_empty(r, 204);
}

/* ------------------------------------------------------------------ me */

int h_me_get(srv_req_t *r)
{
    srv_t *s = r->srv;
    pthread_mutex_lock(&s->mu);
    json_t *uj = srv_user_json(s, srv_user_by_id(s, r->user_id));
    pthread_mutex_unlock(&s->mu);
    return srv_reply_json(r, 200, uj);
}

int h_me_patch(srv_req_t *r)
{
    srv_t *s = r->srv;
    json_t *b = srv_body_object(r);
    if (!b)
        return SRV_YES;
    int ret = SRV_YES;
    const char *email, *password, *current, *display;
    char *newhash = NULL;
    if (!v_string(r, b, "email", false, 254, &email) ||
        !v_string(r, b, "password", false, 1024, &password) ||
        !v_string(r, b, "current_password", false, 1024, &current) ||
        !v_string(r, b, "display_name", false, 128, &display))
        goto out;
    if (email && !valid_email(email)) {
        ret = srv_reply_error(r, 400, "invalid_argument", "email", "email must contain '@'");
        goto out;
    }
    if (!check_shown(r, "email", email) || !check_shown(r, "display_name", display))
        goto out;
    if (password) {
        if (!check_password(r, password, "password"))
            goto out;
        if (!current) {
            ret = srv_reply_error(r, 400, "invalid_argument", "current_password",
                                  "changing the password needs current_password");
            goto out;
        }
        pthread_mutex_lock(&s->mu);
        char *hash = srv_strdup0(srv_user_by_id(s, r->user_id)->r.password_hash);
        pthread_mutex_unlock(&s->mu);
        bool ok = false; /* on the password pool: may park (0) */
        int pr = srv_pw_verify(r, hash, current, &ok);
        free(hash);
        if (pr == 0)
            goto out;
        if (!ok) {
            ret = srv_reply_error(r, 403, "forbidden", "current_password",
                                  "current_password is wrong");
            goto out;
        }
        int ph = srv_pw_hash(r, password, &newhash);
        if (ph <= 0) {
            if (ph < 0)
                ret = srv_reply_error(r, 503, "unavailable", NULL, "password hashing failed");
            goto out;
        }
    }
    /* Only the fields given are written (re-read in the unit: a concurrent admin change
     * of the role or disabled flag is not undone). A new password ends the user's other
     * login sessions: all are deleted and the current one, if it is a session, is
     * stored again in the same unit. */
    srv_user_change_t ch = {.id = r->user_id,
                            .email = email,
                            .display_name = display,
                            .password_hash = newhash,
                            .role = -1,
                            .disabled = -1};
    char hex[2 * SRV_TOKEN_HASH + 1];
    fg_store_session_t keep = {0};
    bool keep_session = false;
    if (newhash && r->cred_session) {
        pthread_mutex_lock(&s->mu);
        srv_token_t *t = srv_req_token(s, r);
        if (t) {
            srv_token_hex(t->hash, hex);
            keep = (fg_store_session_t){.token_hash = hex,
                                        .user_id = r->user_id,
                                        .created_at = t->created_at,
                                        .expires_at = t->expires_at};
            keep_session = true;
        }
        pthread_mutex_unlock(&s->mu);
    }
    srv_batch_t bt = {0};
    srv_batch_add(&bt, OP_USER_MODIFY, &ch);
    if (newhash) {
        srv_batch_add(&bt, OP_SESSIONS_DELETE_USER, NULL)->i1 = r->user_id;
        if (keep_session)
            srv_batch_add(&bt, OP_SESSION_INSERT, &keep);
    }
    int rc = srv_batch_commit(s, &bt);
    srv_batch_free(&bt);
    if (rc) {
        ret = srv_reply_error(r, 503, "unavailable", NULL, "the change could not be stored: %s",
                              fg_store_strerror(rc));
    } else {
        pthread_mutex_lock(&s->mu);
        srv_user_t *u = srv_user_by_id(s, r->user_id);
        if (email) {
            free(u->r.email);
            u->r.email = fg_xstrdup(email);
        }
        if (display) {
            free(u->r.display_name);
            u->r.display_name = fg_xstrdup(display);
        }
        if (newhash) {
            free(u->r.password_hash);
            u->r.password_hash = fg_xstrdup(newhash);
            srv_token_drop_user(s, r->user_id, false, keep_session ? r->cred_hash : NULL);
        }
        json_t *uj = srv_user_json(s, u);
        pthread_mutex_unlock(&s->mu);
        ret = srv_reply_json(r, 200, uj);
    }
out:
    if (newhash) {
        sodium_memzero(newhash, strlen(newhash));
        free(newhash);
    }
    json_decref(b);
    return ret;
}

/* ------------------------------------------------------------------ API tokens */

int h_tokens_create(srv_req_t *r)
{
    srv_t *s = r->srv;
    json_t *b = srv_body_object(r);
    if (!b)
        return SRV_YES;
    int ret = SRV_YES;
    const char *name;
    if (!v_string(r, b, "name", true, 128, &name) || !check_shown(r, "name", name))
        goto out;
    char tok[96];
    srv_token_new(tok, sizeof tok, "fgt");
    unsigned char h[SRV_TOKEN_HASH];
    srv_token_hash(tok, h);
    char hex[2 * SRV_TOKEN_HASH + 1];
    srv_token_hex(h, hex);
    int64_t now = srv_now();
    fg_store_token_t t = {
        .name = (char *)name, .token_hash = hex, .user_id = r->user_id, .created_at = now};
    srv_batch_t bt = {0};
    srv_op_t *o = srv_batch_add(&bt, OP_TOKEN_INSERT, &t);
    int rc = srv_batch_commit(s, &bt);
    int64_t id = o->out;
    srv_batch_free(&bt);
    if (rc) {
        ret = srv_reply_error(r, 503, "unavailable", NULL, "the token could not be stored: %s",
                              fg_store_strerror(rc));
        goto out;
    }
    pthread_mutex_lock(&s->mu);
    srv_token_add(s, id, r->user_id, false, name, h, now, 0);
    pthread_mutex_unlock(&s->mu);
    char ids[24];
    snprintf(ids, sizeof ids, "%lld", (long long)id);
    ret = srv_reply_json(r, 201,
                         json_pack("{s:s,s:s,s:s,s:I}", "id", ids, "name", name, "token", tok,
                                   "created_at", (json_int_t)now));
    sodium_memzero(tok, sizeof tok);
out:
    json_decref(b);
    return ret;
}

int h_tokens_list(srv_req_t *r)
{
    srv_t *s = r->srv;
    fg_store_tx_t *tx;
    int rc = fg_store_read_begin(s->store, &tx);
    if (rc)
        return srv_reply_error(r, 503, "unavailable", NULL, "store: %s", fg_store_strerror(rc));
    fg_store_token_list_t l = {0};
    rc = fg_store_token_list(tx, r->user_id, &l);
    fg_store_read_end(tx);
    if (rc)
        return srv_reply_error(r, 503, "unavailable", NULL, "store: %s", fg_store_strerror(rc));
    json_t *items = json_array();
    for (size_t i = 0; i < l.n; i++) {
        char ids[24];
        snprintf(ids, sizeof ids, "%lld", (long long)l.items[i].id);
        json_array_append_new(items, json_pack("{s:s,s:s,s:I}", "id", ids, "name",
                                               l.items[i].name ? l.items[i].name : "", "created_at",
                                               (json_int_t)l.items[i].created_at));
    }
    fg_store_token_list_free(&l);
    return srv_reply_json(r, 200, json_pack("{s:o,s:n}", "items", items, "next_cursor"));
}

int h_tokens_delete(srv_req_t *r)
{
    srv_t *s = r->srv;
    char *end;
    long long id = strtoll(r->seg[2], &end, 10);
    if (!*r->seg[2] || *end || id <= 0)
        return srv_reply_error(r, 404, "not_found", NULL, "no such token");
    fg_store_tx_t *tx;
    int rc = fg_store_read_begin(s->store, &tx);
    if (rc)
        return srv_reply_error(r, 503, "unavailable", NULL, "store: %s", fg_store_strerror(rc));
    fg_store_token_list_t l = {0};
    rc = fg_store_token_list(tx, r->user_id, &l);
    fg_store_read_end(tx);
    bool mine = false;
    for (size_t i = 0; i < l.n; i++)
        if (l.items[i].id == id)
            mine = true;
    fg_store_token_list_free(&l);
    if (!mine) /* tokens are personal: admins too delete only their own */
        return srv_reply_error(r, 404, "not_found", NULL, "no such token");
    srv_batch_t bt = {0};
    srv_batch_add(&bt, OP_TOKEN_DELETE, NULL)->i1 = id;
    rc = srv_batch_commit(s, &bt);
    srv_batch_free(&bt);
    if (rc == FG_STORE_ENOENT)
        return srv_reply_error(r, 404, "not_found", NULL, "no such token");
    if (rc)
        return srv_reply_error(r, 503, "unavailable", NULL, "store: %s", fg_store_strerror(rc));
    pthread_mutex_lock(&s->mu);
    s->cred_gen++;
    for (size_t i = 0; i < s->ntokens; i++)
        if (!s->tokens[i]->session && s->tokens[i]->id == id) {
            srv_token_drop(s, s->tokens[i]);
            break;
        }
    pthread_mutex_unlock(&s->mu);
    return srv_reply_empty(r, 204);
}

/* ------------------------------------------------------------------ accounts */

static json_t *prios_json(int mask)
{
    json_t *a = json_array();
    for (int p = FG_PRIO_HIGH; p >= FG_PRIO_LOW; p--)
        if (mask & (1 << p))
            json_array_append_new(a, json_string(fg_prio_name((fg_prio_t)p)));
    return a;
}

static json_t *account_json(srv_t *s, const srv_account_t *a);

static const char *const BUDGET_MODES[] = {"hard", "safe", "warn"};
static const char *const BUDGET_PERIODS[] = {"monthly", "grant"};

/* An account's budget and its spend in the period (null without a budget); mu held. */
static json_t *budget_json(const srv_account_t *a)
{
    if (a->r.budget_micros < 0)
        return json_null();
    json_t *o = json_pack(
        "{s:I,s:s,s:s,s:I,s:I,s:i}", "budget_micros", (json_int_t)a->r.budget_micros, "mode",
        BUDGET_MODES[a->r.budget_mode], "period", BUDGET_PERIODS[a->r.budget_period],
        "period_start_ms", (json_int_t)a->bud.from_ms, "spent_micros",
        (json_int_t)a->bud.spent_micros, "spent_pct", fg_bill_budget_pct(&a->bud));
    json_object_set_new(o, "remaining_micros",
                        json_integer(a->r.budget_micros - a->bud.spent_micros > 0
                                         ? a->r.budget_micros - a->bud.spent_micros
                                         : 0));
    json_object_set_new(o, "exhausted", json_boolean(a->bud.spent_micros >= a->r.budget_micros));
    return o;
}

/* The index of s in names[n], or -1. */
static int name_index(const char *const *names, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], s))
            return i;
    return -1;
}

/* budget_mode and budget_period of an account body into *a; a grant (re)starts now when
 * its figure or period is set. */
static bool budget_fields(srv_req_t *r, json_t *b, fg_store_account_t *a, bool budget_set)
{
    const char *mode = NULL, *period = NULL;
    if (!v_string(r, b, "budget_mode", false, 16, &mode) ||
        !v_string(r, b, "budget_period", false, 16, &period))
        return false;
    int m = mode ? name_index(BUDGET_MODES, 3, mode) : a->budget_mode;
    int p = period ? name_index(BUDGET_PERIODS, 2, period) : a->budget_period;
    if (m < 0) {
        srv_reply_error(r, 400, "invalid_argument", "budget_mode",
                        "budget_mode must be hard, safe or warn");
        return false;
    }
    if (p < 0) {
        srv_reply_error(r, 400, "invalid_argument", "budget_period",
                        "budget_period must be monthly or grant");
        return false;
    }
    if (p == FG_BUDGET_GRANT && (budget_set || period))
        a->budget_since_ms = srv_now_ms();
    a->budget_mode = m;
    a->budget_period = p;
    return true;
}

/* Account a as viewer r sees it: its spend only for admins and its members. mu held. */
static json_t *account_json_for(srv_req_t *r, const srv_account_t *a)
{
    json_t *o = account_json(r->srv, a);
    if (!r->admin && !srv_member_find(r->srv, a->r.name, r->user_id))
        json_object_del(o, "budget");
    return o;
}

static json_t *account_json(srv_t *s, const srv_account_t *a)
{
    json_t *members = json_array();
    for (size_t i = 0; i < s->nmembers; i++) {
        srv_member_t *m = s->members[i];
        if (m->deleted || strcmp(m->r.account, a->r.name))
            continue;
        srv_user_t *u = srv_user_by_id(s, m->r.user_id);
        json_array_append_new(members,
                              json_pack("{s:s,s:f,s:b}", "user", u ? u->r.username : "?", "weight",
                                        m->r.weight, "manager", m->r.is_manager));
    }
    json_t *o = json_pack(
        "{s:s,s:f,s:o,s:o,s:o,s:o,s:I}", "name", a->r.name, "weight", a->r.weight, "gpu_quota",
        a->r.gpu_quota < 0 ? json_null() : json_integer(a->r.gpu_quota), "budget_micros",
        a->r.budget_micros < 0 ? json_null() : json_integer(a->r.budget_micros),
        "allowed_priorities", prios_json(a->r.allowed_priorities), "members", members, "created_at",
        (json_int_t)a->r.created_at);
    json_object_set_new(o, "budget", budget_json(a));
    srv_idle_account_json(&a->r, o);
    return o;
}

/* Parses the optional account fields into *a (which holds current values). */
static bool account_fields(srv_req_t *r, json_t *b, fg_store_account_t *a)
{
    bool has;
    double w = a->weight;
    long long q = 0, bud = 0;
    if (!v_number(r, b, "weight", 1e-6, 1e9, &w, &has))
        return false;
    a->weight = w;
    json_t *qv = json_object_get(b, "gpu_quota");
    if (qv && json_is_null(qv))
        a->gpu_quota = -1;
    else if (!v_int(r, b, "gpu_quota", false, 0, 1000000, &q, &has))
        return false;
    else if (has)
        a->gpu_quota = (int32_t)q;
    json_t *bv = json_object_get(b, "budget_micros");
    if (bv && json_is_null(bv))
        a->budget_micros = -1;
    else if (!v_int(r, b, "budget_micros", false, 0, INT64_MAX, &bud, &has))
        return false;
    else if (has)
        a->budget_micros = bud;
    if (!budget_fields(r, b, a, bv != NULL) || !srv_idle_account_fields(r, b, a))
        return false;
    json_t *pv = json_object_get(b, "allowed_priorities");
    if (pv && !json_is_null(pv)) {
        if (!json_is_array(pv) || json_array_size(pv) == 0) {
            srv_reply_error(r, 400, "invalid_argument", "allowed_priorities",
                            "allowed_priorities must be a non-empty array of high, normal, low");
            return false;
        }
        int mask = 0;
        size_t i;
        json_t *e;
        json_array_foreach(pv, i, e)
        {
            int p = json_is_string(e) ? fg_prio_parse(json_string_value(e)) : -1;
            if (p < 0) {
                srv_reply_error(r, 400, "invalid_argument", "allowed_priorities",
                                "allowed_priorities must hold only high, normal, low");
                return false;
            }
            mask |= 1 << p;
        }
        a->allowed_priorities = mask;
    }
    return true;
}

int h_accounts_create(srv_req_t *r)
{
    srv_t *s = r->srv;
    json_t *b = srv_body_object(r);
    if (!b)
        return SRV_YES;
    int ret = SRV_YES;
    const char *name;
    if (!v_string(r, b, "name", true, 64, &name))
        goto out;
    if (!v_name_ok(name)) {
        ret = srv_reply_error(r, 400, "invalid_argument", "name",
                              "account name must match [a-z0-9_.-]{1,63}");
        goto out;
    }
    fg_store_account_t a = {.name = (char *)name,
                            .weight = 1.0,
                            .gpu_quota = -1,
                            .budget_micros = -1,
                            .allowed_priorities = FG_STORE_PRIO_ALL,
                            .created_at = srv_now()};
    if (!account_fields(r, b, &a))
        goto out;
    srv_batch_t bt = {0};
    srv_batch_add(&bt, OP_ACCOUNT_INSERT, &a);
    int rc = srv_batch_commit(s, &bt);
    srv_batch_free(&bt);
    if (rc == FG_STORE_EEXIST) {
        ret = srv_reply_error(r, 409, "conflict", "name", "account '%s' exists", name);
        goto out;
    }
    if (rc) {
        ret = srv_reply_error(r, 503, "unavailable", NULL, "store: %s", fg_store_strerror(rc));
        goto out;
    }
    pthread_mutex_lock(&s->mu);
    srv_account_t *na = fg_xcalloc(1, sizeof *na);
    na->r = a;
    na->r.name = fg_xstrdup(name);
    s->accounts = fg_xgrow(s->accounts, &s->accounts_cap, s->naccounts + 1, sizeof *s->accounts);
    s->accounts[s->naccounts++] = na;
    json_t *aj = account_json(s, na);
    pthread_mutex_unlock(&s->mu);
    srv_audit(s, r->user_id, "account.create", name, json_incref(b));
    notify_accounts(s);
    ret = srv_reply_json(r, 201, aj);
out:
    json_decref(b);
    return ret;
}

int h_accounts_list(srv_req_t *r)
{
    srv_t *s = r->srv;
    json_t *items = json_array();
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->naccounts; i++)
        json_array_append_new(items, account_json_for(r, s->accounts[i]));
    pthread_mutex_unlock(&s->mu);
    return srv_reply_json(r, 200, json_pack("{s:o,s:n}", "items", items, "next_cursor"));
}

int h_accounts_get(srv_req_t *r)
{
    srv_t *s = r->srv;
    pthread_mutex_lock(&s->mu);
    srv_account_t *a = srv_account_by_name(s, r->seg[2]);
    json_t *aj = a ? account_json_for(r, a) : NULL;
    pthread_mutex_unlock(&s->mu);
    if (!aj)
        return srv_reply_error(r, 404, "not_found", NULL, "no account '%s'", r->seg[2]);
    return srv_reply_json(r, 200, aj);
}

int h_accounts_patch(srv_req_t *r)
{
    srv_t *s = r->srv;
    pthread_mutex_lock(&s->mu);
    srv_account_t *a = srv_account_by_name(s, r->seg[2]);
    fg_store_account_t na = {0};
    if (a) {
        na = a->r;
        na.name = fg_xstrdup(a->r.name);
    }
    pthread_mutex_unlock(&s->mu);
    if (!a)
        return srv_reply_error(r, 404, "not_found", NULL, "no account '%s'", r->seg[2]);
    json_t *b = srv_body_object(r);
    int ret = SRV_YES;
    if (!b)
        goto out;
    if (!account_fields(r, b, &na))
        goto out;
    srv_batch_t bt = {0};
    srv_batch_add(&bt, OP_ACCOUNT_UPDATE, &na);
    int rc = srv_batch_commit(s, &bt);
    srv_batch_free(&bt);
    if (rc) {
        ret = srv_reply_error(r, (unsigned)srv_store_err_status(rc), "unavailable", NULL,
                              "store: %s", fg_store_strerror(rc));
        goto out;
    }
    pthread_mutex_lock(&s->mu);
    a = srv_account_by_name(s, na.name);
    a->r.weight = na.weight;
    a->r.gpu_quota = na.gpu_quota;
    a->r.budget_micros = na.budget_micros;
    a->r.budget_mode = na.budget_mode;
    a->r.budget_period = na.budget_period;
    a->r.budget_since_ms = na.budget_since_ms;
    a->r.allowed_priorities = na.allowed_priorities;
    a->r.idle_action = na.idle_action;
    a->r.idle_grace_s = na.idle_grace_s;
    json_t *aj = account_json(s, a);
    pthread_mutex_unlock(&s->mu);
    srv_audit(s, r->user_id, "account.update", na.name, json_incref(b));
    notify_accounts(s);
    ret = srv_reply_json(r, 200, aj);
out:
    free(na.name);
    json_decref(b);
    return ret;
}

int h_members_add(srv_req_t *r)
{
    srv_t *s = r->srv;
    json_t *b = srv_body_object(r);
    if (!b)
        return SRV_YES;
    int ret = SRV_YES;
    const char *user;
    double weight = 1.0;
    bool has;
    char acct[80];
    snprintf(acct, sizeof acct, "%s", r->seg[2]);
    if (!v_string(r, b, "user", true, 64, &user) ||
        !v_number(r, b, "weight", 1e-6, 1e9, &weight, &has))
        goto out;
    pthread_mutex_lock(&s->mu);
    bool acct_ok = srv_account_by_name(s, acct) != NULL;
    pthread_mutex_unlock(&s->mu);
    if (!acct_ok) {
        ret = srv_reply_error(r, 404, "not_found", NULL, "no account '%s'", acct);
        goto out;
    }
    int64_t uid;
    if (!parse_user_ref(s, user, &uid)) {
        ret = srv_reply_error(r, 400, "invalid_argument", "user", "no user '%s'", user);
        goto out;
    }
    pthread_mutex_lock(&s->mu);
    bool member = srv_member_find(s, acct, uid) != NULL;
    pthread_mutex_unlock(&s->mu);
    if (member) {
        ret = srv_reply_error(r, 409, "conflict", "user", "'%s' is already a member of '%s'", user,
                              acct);
        goto out;
    }
    fg_store_member_t m = {.user_id = uid, .account = acct, .weight = weight};
    srv_batch_t bt = {0};
    srv_batch_add(&bt, OP_MEMBER_ADD, &m)->i1 = uid;
    int rc = srv_batch_commit(s, &bt);
    srv_batch_free(&bt);
    if (rc) {
        ret = srv_reply_error(r, (unsigned)srv_store_err_status(rc),
                              rc == FG_STORE_EEXIST ? "conflict" : "unavailable", NULL, "store: %s",
                              fg_store_strerror(rc));
        goto out;
    }
    pthread_mutex_lock(&s->mu);
    member_add_mem(s, uid, acct, weight);
    json_t *aj = account_json(s, srv_account_by_name(s, acct));
    pthread_mutex_unlock(&s->mu);
    srv_audit(s, r->user_id, "member.add", acct, json_incref(b));
    notify_accounts(s);
    ret = srv_reply_json(r, 201, aj);
out:
    json_decref(b);
    return ret;
}

int h_members_del(srv_req_t *r)
{
    srv_t *s = r->srv;
    char acct[80];
    snprintf(acct, sizeof acct, "%s", r->seg[2]);
    int64_t uid;
    if (!parse_user_ref(s, r->seg[4], &uid))
        return srv_reply_error(r, 404, "not_found", NULL, "no user '%s'", r->seg[4]);
    pthread_mutex_lock(&s->mu);
    bool member = srv_member_find(s, acct, uid) != NULL;
    pthread_mutex_unlock(&s->mu);
    if (!member)
        return srv_reply_error(r, 404, "not_found", NULL, "'%s' is not a member of '%s'", r->seg[4],
                               acct);
    srv_batch_t bt = {0};
    srv_op_t *o = srv_batch_add(&bt, OP_MEMBER_REMOVE, NULL);
    o->i1 = uid;
    o->s1 = acct;
    int rc = srv_batch_commit(s, &bt);
    srv_batch_free(&bt);
    if (rc)
        return srv_reply_error(r, (unsigned)srv_store_err_status(rc), "unavailable", NULL,
                               "store: %s", fg_store_strerror(rc));
    pthread_mutex_lock(&s->mu);
    srv_member_t *m = srv_member_find(s, acct, uid);
    bool was_default = false;
    if (m) {
        m->deleted = true;
        was_default = m->r.is_default;
        m->r.is_default = false;
    }
    if (was_default) {
        srv_member_t *best = NULL;
        for (size_t i = 0; i < s->nmembers; i++) {
            srv_member_t *x = s->members[i];
            if (!x->deleted && x->r.user_id == uid && (!best || x->r.position < best->r.position))
                best = x;
        }
        if (best)
            best->r.is_default = true;
    }
    pthread_mutex_unlock(&s->mu);
    srv_audit(s, r->user_id, "member.remove", acct, json_pack("{s:s}", "user", r->seg[4]));
    notify_accounts(s);
    return srv_reply_empty(r, 204);
}

/* PATCH /v1/accounts/{name}/members/{user} {weight?, manager?} (admin): the user's share
 * inside the account, and whether they manage it (see its usage and invoices). */
int h_members_patch(srv_req_t *r)
{
    srv_t *s = r->srv;
    json_t *b = srv_body_object(r);
    if (!b)
        return SRV_YES;
    static const char *const known[] = {"weight", "manager", NULL};
    int ret = SRV_YES;
    double weight = 0;
    bool manager = false, has_w = false, has_m = false;
    char acct[80];
    snprintf(acct, sizeof acct, "%s", r->seg[2]);
    if (!v_known(r, b, known) || !v_number(r, b, "weight", 1e-6, 1e9, &weight, &has_w) ||
        !v_bool(r, b, "manager", &manager, &has_m))
        goto out;
    if (!has_w && !has_m) {
        ret = srv_reply_error(r, 400, "invalid_argument", NULL,
                              "nothing to change: give weight or manager");
        goto out;
    }
    int64_t uid;
    if (!parse_user_ref(s, r->seg[4], &uid)) {
        ret = srv_reply_error(r, 404, "not_found", NULL, "no user '%s'", r->seg[4]);
        goto out;
    }
    pthread_mutex_lock(&s->mu);
    bool member = srv_member_find(s, acct, uid) != NULL;
    pthread_mutex_unlock(&s->mu);
    if (!member) {
        ret = srv_reply_error(r, 404, "not_found", NULL, "'%s' is not a member of '%s'", r->seg[4],
                              acct);
        goto out;
    }
    srv_batch_t bt = {0};
    srv_op_t *o;
    if (has_w) {
        o = srv_batch_add(&bt, OP_MEMBER_WEIGHT, NULL);
        o->i1 = uid;
        o->s1 = acct;
        o->d1 = weight;
    }
    if (has_m) {
        o = srv_batch_add(&bt, OP_MEMBER_MANAGER, NULL);
        o->i1 = uid;
        o->s1 = acct;
        o->d1 = manager ? 1 : 0;
    }
    int rc = srv_batch_commit(s, &bt);
    srv_batch_free(&bt);
    if (rc) {
        ret = srv_reply_error(r, (unsigned)srv_store_err_status(rc), "unavailable", NULL,
                              "store: %s", fg_store_strerror(rc));
        goto out;
    }
    pthread_mutex_lock(&s->mu);
    srv_member_t *m = srv_member_find(s, acct, uid);
    if (m && has_w)
        m->r.weight = weight;
    if (m && has_m)
        m->r.is_manager = manager;
    json_t *aj = account_json(s, srv_account_by_name(s, acct));
    pthread_mutex_unlock(&s->mu);
    json_t *d = json_deep_copy(b);
    json_object_set_new(d, "user", json_string(r->seg[4]));
    srv_audit(s, r->user_id, "member.update", acct, d);
    if (has_w)
        notify_accounts(s);
    ret = srv_reply_json(r, 200, aj);
out:
    json_decref(b);
    return ret;
}

int h_audit_list(srv_req_t *r)
{
    srv_t *s = r->srv;
    fg_store_tx_t *tx;
    int rc = fg_store_read_begin(s->store, &tx);
    if (rc)
        return srv_reply_error(r, 503, "unavailable", NULL, "store: %s", fg_store_strerror(rc));
    fg_store_audit_list_t l = {0};
    long long limit = 100;
    const char *ls = srv_query(r, "limit");
    if (ls) {
        char *end;
        limit = strtoll(ls, &end, 10);
        if (*end || limit < 1 || limit > 1000) {
            fg_store_read_end(tx);
            return srv_reply_error(r, 400, "invalid_argument", "limit", "limit must be 1..1000");
        }
    }
    rc = fg_store_audit_list(tx, srv_query(r, "cursor"), (int)limit, &l);
    fg_store_read_end(tx);
    if (rc == FG_STORE_EINVAL)
        return srv_reply_error(r, 400, "invalid_argument", "cursor", "malformed cursor");
    if (rc)
        return srv_reply_error(r, 503, "unavailable", NULL, "store: %s", fg_store_strerror(rc));
    json_t *items = json_array();
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < l.n; i++) {
        fg_store_audit_t *a = &l.items[i];
        srv_user_t *u = srv_user_by_id(s, a->admin_user_id);
        json_t *d = a->details_json ? json_loads(a->details_json, 0, NULL) : NULL;
        if (d)
            json_object_del(d, "password");
        json_array_append_new(
            items, json_pack("{s:I,s:I,s:s?,s:s,s:s?,s:o}", "id", (json_int_t)a->id, "time",
                             (json_int_t)a->time, "admin", u ? u->r.username : NULL, "action",
                             a->action, "target", a->target, "details", d ? d : json_null()));
    }
    pthread_mutex_unlock(&s->mu);
    json_t *o = json_pack("{s:o,s:s?}", "items", items, "next_cursor", l.next_cursor);
    fg_store_audit_list_free(&l);
    return srv_reply_json(r, 200, o);
}
