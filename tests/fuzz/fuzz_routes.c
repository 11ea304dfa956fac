/*
 * fuzz_routes.c - libFuzzer target for the controller's routes: the real server (store,
 * scheduler thread, HTTP engine, routing, authentication, handlers) runs in this
 * process on a loopback port, with users alice and bob, an admin and jobs made once at
 * start. Each input is one GET or HEAD request: its first byte picks the caller
 * (anonymous, alice, bob, the admin, the agent token), the second the method, the rest
 * is the path and query string, percent-encoded where a request line needs it. Every
 * request must be answered with a well-formed status line and never a 500 (a handler
 * that gave no reply) or another 5xx but 501 (billing) and 503 (the store is busy); a
 * crash, a hang or a memory error in any server thread ends the run. GET and HEAD only:
 * the state the inputs see stays what the start made (a logout or a cancel would make
 * runs irreproducible).
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include "common/log.h"
#include "server/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static srv_t *g_srv;
static char g_dir[64]; /* the server's temporary directory, removed at exit */
static int g_port;
static char g_tokens[5][256]; /* anonymous (empty), alice, bob, admin, agent */

/* Sends one request (Connection: close) and reads the answer (stops after 300 ms of
 * silence: a stream); returns its status, 0 if there was no well-formed status line. */
static int http(const char *method, const char *target, const char *token, const char *body,
                char *out, size_t outn)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        abort();
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        abort(); /* the server is gone */
    /* the answer's head may take a while on a loaded machine (a commit, a store read
     * behind a busy disk): 30 s; after it, 300 ms of silence ends the read (a stream
     * that waits) */
    struct timeval tv = {30, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    size_t blen = body ? strlen(body) : 0;
    size_t need = strlen(target) + blen + 512;
    char *req = malloc(need);
    int n = snprintf(req, need,
                     "%s %s HTTP/1.1\r\nHost: f\r\nConnection: close\r\n%s%s%s"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     method, target, *token ? "Authorization: Bearer " : "", token,
                     *token ? "\r\n" : "", blen, body ? body : "");
    for (ssize_t off = 0, w; off < n; off += w)
        if ((w = send(fd, req + off, (size_t)(n - off), MSG_NOSIGNAL)) <= 0)
            break;
    free(req);
    size_t len = 0;
    for (;;) {
        char buf[4096];
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r <= 0)
            break; /* closed, or silent (a stream that waits) */
        size_t k = (size_t)r < outn - 1 - len ? (size_t)r : outn - 1 - len;
        memcpy(out + len, buf, k);
        if (len == 0) {
            tv = (struct timeval){0, 300000};
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        }
        len += k;
    }
    out[len] = 0;
    close(fd);
    int status = 0;
    if (len >= 12 && !memcmp(out, "HTTP/1.1 ", 9) && sscanf(out + 9, "%3d", &status) != 1)
        status = 0;
    return status;
}

/* The value of "key":"..." in a JSON answer (fixtures only), into v. */
static void json_field(const char *ans, const char *key, char *v, size_t n)
{
    const char *b = strstr(ans, "\r\n\r\n");
    json_t *o = b ? json_loads(b + 4, 0, NULL) : NULL;
    const char *s = json_string_value(json_object_get(o, key));
    snprintf(v, n, "%s", s ? s : "");
    json_decref(o);
}

static void slurp(const char *path, char *v, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f || !fgets(v, (int)n, f))
        abort();
    fclose(f);
    v[strcspn(v, "\r\n")] = 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path); /* best effort */
    return 0;
}

static void rm_dir(void)
{
    nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The server as `fairgpu server` starts it (main.c), with test settings. */
static void start_server(void)
{
    srv_t *s = calloc(1, sizeof *s);
    srv_config_default(&s->cfg);
    char tmpl[] = "/tmp/fg_fuzz_routes.XXXXXX";
    if (!mkdtemp(tmpl))
        abort();
    snprintf(g_dir, sizeof g_dir, "%s", tmpl);
    atexit(rm_dir);
    snprintf(s->cfg.data_dir, sizeof s->cfg.data_dir, "%s/data", tmpl);
    s->cfg.listen_port = 0; /* any free port */
    s->cfg.threads = 2;
    s->cfg.fast_password_hash = true;
    s->cfg.rate_limit_rps = 0;
    s->cfg.longpoll_max_s = 1;
    s->cfg.log_level = FG_LOG_ERROR;
    fg_log_set_level(s->cfg.log_level);
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->sched_mu, NULL);
    pthread_cond_init(&s->sched_cv, NULL);
    pthread_mutex_init(&s->wait_mu, NULL);
    signal(SIGPIPE, SIG_IGN);
    char setup[1200];
    if (srv_auth_init(s) || srv_persist_open(s) || srv_persist_load(s) ||
        srv_setup_token_init(s, setup, sizeof setup) != 1 || !srv_core_build(s) ||
        srv_sched_start(s) || srv_http_start(s))
        abort();
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    if (getsockname(s->listen_fd, (struct sockaddr *)&sa, &sl) != 0)
        abort();
    g_port = ntohs(sa.sin_port);
    g_srv = s;
    fprintf(stderr, "fuzz_routes: server on 127.0.0.1:%d, data in %s\n", g_port, tmpl);
    /* fixtures: an admin (setup token), alice and bob, their sessions, jobs of alice */
    char tok[256], ans[8192], body[1024], path[1400];
    slurp(setup, tok, sizeof tok);
    snprintf(body, sizeof body,
             "{\"username\":\"root\",\"email\":\"r@x\",\"password\":\"root-password\","
             "\"setup_token\":\"%s\"}",
             tok);
    if (http("POST", "/v1/users", "", body, ans, sizeof ans) != 201)
        abort();
    static const char *const users[] = {"alice", "bob", "root"};
    for (int i = 0; i < 3; i++) {
        if (i < 2) {
            snprintf(body, sizeof body,
                     "{\"username\":\"%s\",\"email\":\"u@x\",\"password\":\"%s-password\"}",
                     users[i], users[i]);
            http("POST", "/v1/users", "", body, ans, sizeof ans);
        }
        snprintf(body, sizeof body, "{\"username\":\"%s\",\"password\":\"%s-password\"}", users[i],
                 users[i]);
        if (http("POST", "/v1/sessions", "", body, ans, sizeof ans) != 201)
            abort();
        json_field(ans, "token", g_tokens[1 + i], sizeof g_tokens[1 + i]);
    }
    for (int i = 0; i < 3; i++)
        http("POST", "/v1/jobs", g_tokens[1],
             "{\"name\":\"f\",\"command\":[\"true\"],\"gpus\":1,\"model\":\"m\",\"dataset\":\"d\"}",
             ans, sizeof ans);
    http("POST", "/v1/jobs/1/cancel", g_tokens[1], NULL, ans, sizeof ans);
    http("POST", "/v1/tokens", g_tokens[1], "{\"name\":\"ci\"}", ans, sizeof ans);
    http("POST", "/v1/accounts", g_tokens[3], "{\"name\":\"acct\"}", ans, sizeof ans);
    snprintf(path, sizeof path, "%s/agent.token", s->cfg.data_dir);
    slurp(path, g_tokens[4], sizeof g_tokens[4]);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    start_server();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size > 2000)
        return 0;
    const char *token = g_tokens[data[0] % 5];
    const char *method = data[1] % 4 == 3 ? "HEAD" : "GET";
    /* the target: printable bytes as they are, others (and '%' itself when it does not
     * start an escape, so that the engine sees the bytes) percent-encoded */
    char target[3 * 2000 + 2];
    size_t t = 0;
    if (size == 2 || data[2] != '/')
        target[t++] = '/';
    for (size_t i = 2; i < size; i++) {
        uint8_t c = data[i];
        if (c > 0x20 && c < 0x7f && c != '#')
            target[t++] = (char)c;
        else
            t += (size_t)snprintf(target + t, 4, "%%%02X", c);
    }
    target[t] = 0;
    static char ans[1 << 16];
    int st = http(method, target, token, NULL, ans, sizeof ans);
    if (st < 100 || st > 599) { /* a dropped connection, a broken status line, a hang */
        fprintf(stderr, "fuzz_routes: %s %s: no answer in 30 s or a bad one: %.200s\n", method,
                target, ans);
        abort();
    }
    if (st >= 500 && st != 501 && st != 503 && st != 505) {
        fprintf(stderr, "fuzz_routes: %s %s answered %d:\n%.500s\n", method, target, st, ans);
        abort();
    }
    return 0;
}
