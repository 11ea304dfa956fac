/*
 * http.c - the HTTP layer of the controller over its own engine (httpd.h).
 *
 * The engine's worker threads read and parse each request (bodies over 1 MiB are read
 * and dropped, and answered 413 here) and call on_request: we authenticate, route and
 * answer through the srv_reply_* functions.
 *
 * Parking: a handler that must wait (long-poll of /v1/events, an agent waiting for
 * assignments, a submission while its commit runs) parks its connection (a flag) and
 * registers a waiter or a completion; srv_wake_kind(), the deadline (checked by the
 * timer thread every 100 ms) or the completion resumes it, and the connection's worker
 * calls on_request again, which re-runs the handler (or its resume step). A parked
 * request holds no thread. docs/http-engine.md has the lock model.
 */
#define _GNU_SOURCE /* accept4 */
#include "server/server.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <sodium.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

int64_t srv_now_ms(void)
{
    return fg_clock_real_ms();
}

int64_t srv_now(void)
{
    return (int64_t)time(NULL);
}

/* ------------------------------------------------------------------ replies */

static void count_status(srv_t *s, unsigned status)
{
    if (status < 600)
        atomic_fetch_add_explicit(&s->m.http_by_code[status], 1, memory_order_relaxed);
}

static void mark(srv_req_t *r, unsigned status)
{
    r->responded = true;
    r->status = (int)status;
    count_status(r->srv, status);
    srv_metrics_http_observe(r);
}

int srv_reply_full(srv_req_t *r, unsigned status, const char *ctype, const char *extra, char *buf,
                   size_t n, bool must_free)
{
    if (r->responded) {
        if (must_free)
            free(buf);
        return SRV_NO;
    }
    hd_respond(r->conn, status, ctype, extra, buf, n, must_free);
    mark(r, status);
    return SRV_YES;
}

int srv_reply_text(srv_req_t *r, unsigned status, const char *ctype, char *buf, size_t n,
                   bool must_free)
{
    return srv_reply_full(r, status, ctype, NULL, buf, n, must_free);
}

int srv_reply_stream(srv_req_t *r, unsigned status, const char *ctype, const char *extra,
                     hd_reader_t read, void *ctx, void (*ctx_free)(void *ctx))
{
    if (r->responded) {
        ctx_free(ctx);
        return SRV_NO;
    }
    hd_respond_stream(r->conn, status, ctype, extra, read, ctx, ctx_free);
    mark(r, status);
    return SRV_YES;
}

int srv_reply_json(srv_req_t *r, unsigned status, json_t *obj)
{
    if (r->capture) {
        json_decref(r->captured);
        r->captured = obj;
        r->captured_status = status;
        return SRV_YES;
    }
    char *txt = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    if (!txt)
        return srv_reply_error(r, 500, "internal", NULL, "could not render the reply");
    size_t n = strlen(txt);
    /* jansson allocates with malloc: the engine may free it. A trailing newline helps curl. */
    char *buf = fg_xrealloc(txt, n + 2);
    buf[n] = '\n';
    buf[n + 1] = 0;
    return srv_reply_text(r, status, "application/json; charset=utf-8", buf, n + 1, true);
}

int srv_reply_buf(srv_req_t *r, unsigned status, srv_buf_t *b)
{
    srv_buf_put(b, "\n", 1); /* as srv_reply_json: a trailing newline helps curl */
    char *p = b->p;
    size_t n = b->n;
    memset(b, 0, sizeof *b);
    return srv_reply_text(r, status, "application/json; charset=utf-8", p, n, true);
}

/* The length of the valid UTF-8 sequence at p (RFC 3629: no overlong forms, no
 * surrogates, at most U+10FFFF), 0 if the bytes there are not one. */
static size_t utf8_len(const unsigned char *p)
{
    unsigned char c = p[0];
    if (c < 0x80)
        return 1;
    size_t n = c >= 0xc2 && c <= 0xdf   ? 2
               : c >= 0xe0 && c <= 0xef ? 3
               : c >= 0xf0 && c <= 0xf4 ? 4
                                        : 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] > 0x9f) || (c == 0xf0 && p[1] < 0x90) ||
        (c == 0xf4 && p[1] > 0x8f))
        return 0;
    return n;
}

/* Replaces every byte of msg that is not part of valid UTF-8 (a client's path or value
 * quoted in a message) by '?', so that the message is a JSON string. */
static void utf8_clean(char *msg)
{
    unsigned char *p = (unsigned char *)msg;
    while (*p) {
        size_t n = utf8_len(p);
        if (n == 0)
            *p++ = '?';
        else
            p += n;
    }
}

int srv_reply_error(srv_req_t *r, unsigned status, const char *code, const char *field,
                    const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    utf8_clean(msg); /* (vsnprintf may also have cut a sequence in two) */
    json_t *e = json_pack("{s:s,s:s}", "code", code, "message", msg);
    if (field)
        json_object_set_new(e, "field", json_string(field));
    return srv_reply_json(r, status, json_pack("{s:o}", "error", e));
}

int srv_reply_empty(srv_req_t *r, unsigned status)
{
    return srv_reply_full(r, status, NULL, NULL, NULL, 0, false);
}

const char *srv_query(srv_req_t *r, const char *key)
{
    return hd_query(r->conn, key);
}

const char *srv_header(srv_req_t *r, const char *key)
{
    return hd_header(r->conn, key);
}

json_t *srv_body_object(srv_req_t *r)
{
    json_error_t err;
    if (r->len == 0) {
        srv_reply_error(r, 400, "invalid_json", NULL,
                        "the request body is empty; a JSON object is expected");
        return NULL;
    }
    json_t *j = json_loadb(r->body, r->len, JSON_REJECT_DUPLICATES, &err);
    if (!j) {
        srv_reply_error(r, 400, "invalid_json", NULL,
                        "invalid JSON at line %d, column %d (byte %d): %s", err.line, err.column,
                        err.position, err.text);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        srv_reply_error(r, 400, "invalid_json", NULL, "the request body must be a JSON object");
        return NULL;
    }
    return j;
}

/* ------------------------------------------------------------------ parking */

static void unpark(srv_t *s, srv_waiter_t *w);

/* Adds w to the list; if a wake-up happened since `gen` was read (the handler's data
 * check), resumes it at once so that no wake-up is lost. */
static void add_waiter(srv_t *s, srv_waiter_t *w, unsigned long gen)
{
    pthread_mutex_lock(&s->wait_mu);
    w->next = s->waiters;
    if (s->waiters)
        s->waiters->prev = w;
    s->waiters = w;
    if (atomic_load(&s->wake_gen) != gen || atomic_load(&s->stopping))
        unpark(s, w);
    pthread_mutex_unlock(&s->wait_mu);
}

void srv_park_request(srv_req_t *r)
{
    r->parked = true;
    atomic_fetch_add(&r->srv->suspended, 1);
    hd_park(r->conn);
}

int srv_park(srv_req_t *r, int kind, int64_t deadline_ms)
{
    srv_t *s = r->srv;
    srv_waiter_t *w = fg_xcalloc(1, sizeof *w);
    w->conn = r->conn;
    w->req = r;
    w->deadline_ms = deadline_ms;
    w->kind = kind;
    r->waiter = w;
    if (kind == WAIT_EVENTS || kind == WAIT_AGENT || kind == WAIT_STREAM)
        r->long_wait = true;
    srv_park_request(r);
    add_waiter(s, w, r->wake_gen);
    return SRV_YES;
}

int srv_park_unpublished(srv_req_t *r)
{
    int64_t now = srv_now_ms();
    if (!r->pub_deadline_ms)
        r->pub_deadline_ms = now + 10000;
    if (now >= r->pub_deadline_ms || atomic_load(&r->srv->stopping))
        return srv_reply_error(r, 503, "unavailable", NULL,
                               "the last change is not committed yet: the store is not committing");
    return srv_park(r, WAIT_PUBLISH, r->pub_deadline_ms);
}

void srv_park_conn(srv_t *s, hd_conn_t *conn, int kind, int64_t deadline_ms, unsigned long gen)
{
    srv_waiter_t *w = fg_xcalloc(1, sizeof *w);
    w->conn = conn;
    w->deadline_ms = deadline_ms;
    w->kind = kind;
    atomic_fetch_add(&s->suspended, 1);
    hd_park(conn);
    add_waiter(s, w, gen);
}

/* Removes w from the list (wait_mu held) and resumes its connection. */
static void unpark(srv_t *s, srv_waiter_t *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        s->waiters = w->next;
    if (w->next)
        w->next->prev = w->prev;
    hd_conn_t *c = w->conn;
    if (w->req)
        w->req->waiter = NULL;
    free(w);
    hd_resume(c);
}

void srv_wake_kind(srv_t *s, int kind)
{
    atomic_fetch_add(&s->wake_gen, 1);
    pthread_mutex_lock(&s->wait_mu);
    srv_waiter_t *w = s->waiters;
    while (w) {
        srv_waiter_t *next = w->next;
        if (kind == 0 || w->kind == kind)
            unpark(s, w);
        w = next;
    }
    pthread_mutex_unlock(&s->wait_mu);
}

static void *timer_main(void *arg)
{
    prctl(PR_SET_NAME, "fg-timer"); /* as top -H and ps -L show it */
    srv_t *s = arg;
    while (!atomic_load(&s->stopping)) {
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
        int64_t now = srv_now_ms();
        pthread_mutex_lock(&s->wait_mu);
        srv_waiter_t *w = s->waiters;
        while (w) {
            srv_waiter_t *next = w->next;
            if (w->deadline_ms <= now)
                unpark(s, w);
            w = next;
        }
        pthread_mutex_unlock(&s->wait_mu);
    }
    return NULL;
}

/* ------------------------------------------------------------------ engine callbacks */

static int method_bit(const char *m)
{
    if (!strcmp(m, "GET"))
        return M_GET;
    if (!strcmp(m, "POST"))
        return M_POST;
    if (!strcmp(m, "PUT"))
        return M_PUT;
    if (!strcmp(m, "PATCH"))
        return M_PATCH;
    if (!strcmp(m, "DELETE"))
        return M_DELETE;
    if (!strcmp(m, "HEAD"))
        return M_HEAD;
    return 0;
}

static void split_path(srv_req_t *r)
{
    r->nseg = 0;
    char *p = r->path;
    while (*p == '/')
        p++;
    while (*p && r->nseg < (int)(sizeof r->seg / sizeof r->seg[0])) {
        r->seg[r->nseg++] = p;
        char *sl = strchr(p, '/');
        if (!sl)
            break;
        *sl = 0;
        p = sl + 1;
    }
    if (*p && r->nseg == (int)(sizeof r->seg / sizeof r->seg[0])) {
        /* too deep: make it unroutable */
        r->nseg = 0;
        r->seg[0] = NULL;
    }
}

/* A new request of conn, its path split and its credentials checked (on its head). */
static srv_req_t *req_new(srv_t *s, hd_conn_t *conn)
{
    srv_req_t *r = fg_xcalloc(1, sizeof *r);
    r->srv = s;
    r->conn = conn;
    r->method = method_bit(hd_method(conn));
    r->path = hd_path(conn);
    hd_set_req_data(conn, r);
    split_path(r);
    srv_authenticate(r);
    return r;
}

/* A request's head is parsed, its body not read yet (engine worker thread): it is
 * authenticated and its route checked on the head alone, and refused now (404, 405,
 * 401, 403) without its body being read or held. Returns whether it carries valid
 * credentials (the agent's or a user's): the engine serves a connection accepted into
 * its reserved room only then. */
static bool on_head(void *arg, hd_conn_t *conn)
{
    srv_t *s = arg;
    srv_req_t *r = req_new(s, conn);
    srv_route_check(r);
    return r->agent || r->user_id;
}

/* A request is complete, or a parked one was resumed (engine worker thread): route it,
 * or run its resume step. */
static void on_request(void *arg, hd_conn_t *conn)
{
    srv_t *s = arg;
    srv_req_t *r = hd_req_data(conn);
    if (!r)
        r = req_new(s, conn);
    if (!r->started) {
        r->started = true;
        r->t0_us = fg_clock_mono_us();
        r->body = (char *)hd_body(conn, &r->len);
        /* Up to 16 MiB the engine read and dropped the body, so that the client gets the
         * 413 cleanly; beyond, it answers at once and closes. */
        if (hd_body_too_large(conn)) {
            srv_reply_error(r, 413, "payload_too_large", NULL,
                            "the request body is over the limit of %d bytes", SRV_MAX_BODY);
            return;
        }
    }
    if (r->parked) {
        r->parked = false;
        atomic_fetch_sub(&s->suspended, 1);
        r->resume_count++;
    }
    r->pw_call = 0;
    r->wake_gen = atomic_load(&s->wake_gen);
    if (r->resume_count > 0 && r->resume)
        r->resume(r);
    else
        srv_route(r);
    if (!r->responded && !r->parked)
        srv_reply_error(r, 500, "internal", NULL, "the handler gave no reply");
}

/* The request is done with (answered, or its connection closed). */
static void on_request_done(void *arg, hd_conn_t *conn, void *data)
{
    srv_t *s = arg;
    srv_req_t *r = data;
    if (r->parked) /* closed while parked: only at shutdown */
        atomic_fetch_sub(&s->suspended, 1);
    if (r->ctx && r->ctx_free)
        r->ctx_free(r->ctx);
    srv_pw_req_free(r);
    free(r);
}

/* ------------------------------------------------------------------ client address */

/* Whether v (n bytes) reads as an IPv4 or IPv6 address's characters. */
static bool addr_chars(const char *v, size_t n)
{
    if (n == 0 || n > 45)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)v[i]) && v[i] != '.' && v[i] != ':')
            return false;
    return true;
}

void srv_client_addr(srv_req_t *r, char *out, size_t n)
{
    srv_t *s = r->srv;
    uint32_t peer = hd_peer_addr(r->conn);
    const char *xff = NULL;
    if (peer && peer == s->cfg.trusted_proxy_addr)
        xff = srv_header(r, "X-Forwarded-For");
    if (xff) { /* the last hop: what the proxy itself saw */
        const char *v = strrchr(xff, ',');
        v = v ? v + 1 : xff;
        while (*v == ' ' || *v == '\t')
            v++;
        size_t k = strlen(v);
        while (k && (v[k - 1] == ' ' || v[k - 1] == '\t'))
            k--;
        if (addr_chars(v, k)) {
            snprintf(out, n, "%.*s", (int)k, v);
            return;
        }
    }
    struct in_addr a = {.s_addr = peer};
    if (!inet_ntop(AF_INET, &a, out, (socklen_t)n))
        snprintf(out, n, "?");
}

bool srv_http_behind(srv_t *s, int64_t window_ms)
{
    int64_t now = srv_now_ms();
    if (s->httpd && hd_lag_ms(s->httpd) > 1000)
        atomic_store(&s->behind_ms, now);
    int64_t b = atomic_load(&s->behind_ms);
    return b && now - b <= window_ms;
}

/*
 * The token hash of a connection's last request. A client on a keep-alive connection
 * presents the same bearer token on every request, and hashing it (BLAKE2b, ~1.2 us
 * here) was ~6% of an HTTP worker's time under bench/bench_server.sh. Only the hash is
 * reused: the credential is still looked up, and checked for revocation, expiry and a
 * disabled user, on every request. The token is compared in constant time, and the
 * copy lives as long as the connection (allocated at its first token, as hd_conn_data)
 * and is wiped when it closes.
 */
typedef struct conn_auth {
    size_t n;
    char tok[256];
    unsigned char hash[SRV_TOKEN_HASH];
} conn_auth_t;

void srv_conn_token_hash(hd_conn_t *conn, const char *tok, size_t n,
                         unsigned char out[SRV_TOKEN_HASH])
{
    conn_auth_t *a = conn ? hd_conn_data(conn) : NULL;
    if (a && a->n == n && sodium_memcmp(a->tok, tok, n) == 0) {
        memcpy(out, a->hash, SRV_TOKEN_HASH);
        return;
    }
    srv_token_hash(tok, out);
    if (conn && n <= sizeof a->tok) {
        if (!a) {
            a = fg_xcalloc(1, sizeof *a);
            hd_set_conn_data(conn, a);
        }
        a->n = n;
        memcpy(a->tok, tok, n);
        memcpy(a->hash, out, SRV_TOKEN_HASH);
    }
}

static void on_conn_close(void *arg, hd_conn_t *conn, void *data)
{
    sodium_memzero(data, sizeof(conn_auth_t));
    free(data);
}

/*
 * This thread accepts and hands each connection to the engine (hd_add_connection),
 * which gives it to worker (socket number mod pool size), so the keep-alive
 * connections of a client spread evenly over the worker threads. When the workers
 * accepted themselves (libmicrohttpd's own listening socket, before), the one awake
 * when a burst of connections arrived took most of them (measured with 64 connections
 * and 2 workers: splits of 50/50, 86/14 and 100/0 in three runs), and one thread then
 * parsed and answered for everyone while the other idled.
 */
static void *accept_main(void *arg)
{
    prctl(PR_SET_NAME, "fg-accept"); /* as top -H and ps -L show it */
    srv_t *s = arg;
    for (;;) {
        struct sockaddr_in peer;
        socklen_t plen = sizeof peer;
        int fd =
            accept4(s->listen_fd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (atomic_load(&s->stopping))
                return NULL;
            if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN)
                continue;
            /* out of descriptors or memory: let some connections close first */
            fg_log(FG_LOG_WARN, "http: accept: %s", strerror(errno));
            struct timespec ts = {0, 10 * 1000000L};
            nanosleep(&ts, NULL);
            continue;
        }
        if (atomic_load(&s->stopping)) {
            close(fd);
            return NULL;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        /* closes fd itself when over a connection limit */
        hd_add_connection_from(s->httpd, fd, peer.sin_family == AF_INET ? peer.sin_addr.s_addr : 0);
    }
}

static int listen_socket(srv_t *s, const struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (const struct sockaddr *)sa, sizeof *sa) != 0 || listen(fd, 1024) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    s->listen_fd = fd;
    return 0;
}

int srv_http_start(srv_t *s)
{
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)s->cfg.listen_port);
    if (inet_pton(AF_INET, s->cfg.listen_host, &sa.sin_addr) != 1) {
        fg_log(FG_LOG_ERROR, "listen address '%s' is not an IPv4 address", s->cfg.listen_host);
        return -1;
    }
    s->listen_fd = -1;
    if (listen_socket(s, &sa) != 0) {
        fg_log(FG_LOG_ERROR, "cannot listen on %s:%d: %s", s->cfg.listen_host, s->cfg.listen_port,
               strerror(errno));
        return -1;
    }
    hd_config_t hc = {.threads = s->cfg.threads,
                      .max_connections = s->cfg.max_connections,
                      .idle_timeout_s = 120,
                      .head_max = SRV_CONN_MEMORY,
                      .max_body = SRV_MAX_BODY,
                      .discard_max = 16 * (size_t)SRV_MAX_BODY,
                      .on_request = on_request,
                      .on_request_done = on_request_done,
                      .on_conn_close = on_conn_close,
                      .arg = s,
                      .head_timeout_s = s->cfg.head_timeout_s,
                      .body_timeout_s = s->cfg.body_timeout_s,
                      .max_per_addr = s->cfg.max_conns_per_addr,
                      .exempt_addr = s->cfg.trusted_proxy_addr,
                      .reserved = s->cfg.reserved_connections,
                      .body_memory_max = (size_t)s->cfg.max_body_memory,
                      .on_head = on_head};
    if (s->cfg.login_rate > 0)
        s->login_addr_lim = srv_limiter_new(s->cfg.login_rate, s->cfg.login_burst, 8192);
    if (s->cfg.login_user_failures > 0)
        s->login_user_lim =
            srv_limiter_new(s->cfg.login_user_failures / 60.0, s->cfg.login_user_failures, 8192);
    if (srv_pwpool_start(s)) {
        fg_log(FG_LOG_ERROR, "cannot start the password threads");
        close(s->listen_fd);
        s->listen_fd = -1;
        return -1;
    }
    s->httpd = hd_start(&hc);
    if (!s->httpd) {
        fg_log(FG_LOG_ERROR, "cannot start the HTTP server on %s:%d: %s", s->cfg.listen_host,
               s->cfg.listen_port, strerror(errno));
        close(s->listen_fd);
        s->listen_fd = -1;
        return -1;
    }
    if (pthread_create(&s->timer_thread, NULL, timer_main, s) != 0) {
        hd_stop(s->httpd);
        s->httpd = NULL;
        close(s->listen_fd);
        s->listen_fd = -1;
        return -1;
    }
    if (pthread_create(&s->accept_thread, NULL, accept_main, s) != 0) {
        atomic_store(&s->stopping, true);
        pthread_join(s->timer_thread, NULL);
        hd_stop(s->httpd);
        s->httpd = NULL;
        close(s->listen_fd);
        s->listen_fd = -1;
        return -1;
    }
    return 0;
}

void srv_http_stop(srv_t *s)
{
    if (!s->httpd)
        return;
    atomic_store(&s->stopping, true);
    pthread_join(s->timer_thread, NULL);
    /* No new connections: shutdown() wakes the acceptor's accept() (EINVAL). */
    shutdown(s->listen_fd, SHUT_RDWR);
    pthread_join(s->accept_thread, NULL);
    close(s->listen_fd);
    s->listen_fd = -1;
    /* Submissions parked while their commit runs are resumed by the store's writer:
     * wait for those callbacks before the engine (and its connections) goes away. */
    for (int i = 0; i < 500 && atomic_load(&s->async_inflight) > 0; i++) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    /* Password jobs still queued fail (503), running ones finish: each resumes its
     * request. */
    srv_pwpool_stop(s);
    /* Resume every parked request (each answers at once, or ends its stream, now that
     * stopping is set) until none is, then stop the engine's workers. */
    for (int i = 0; i < 500 && atomic_load(&s->suspended) > 0; i++) {
        srv_wake_kind(s, 0);
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (atomic_load(&s->suspended) > 0)
        fg_log(FG_LOG_WARN, "%ld connections still parked at shutdown", atomic_load(&s->suspended));
    hd_stop(s->httpd);
    s->httpd = NULL;
    srv_limiter_free(s->login_addr_lim);
    srv_limiter_free(s->login_user_lim);
    s->login_addr_lim = s->login_user_lim = NULL;
}
