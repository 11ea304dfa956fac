/*
 * fuzz_http_engine.c - libFuzzer target for the HTTP engine's connection state machine
 * (src/server/httpd.c): the input is written, in pieces whose sizes the first byte
 * picks, into one end of a socket pair whose other end the engine serves; then the
 * writer shuts its side down and reads every answer until the engine closes. The
 * handler echoes the body's length, and on some paths parks and resumes itself (once
 * or twice) or streams three parked pieces, so that bodies, pipelining, parking,
 * streams and closes run under ASan with arbitrary bytes. The engine must close every
 * connection (no hang) and answer only with well-formed status lines.
 */
#include "server/httpd.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct req {
    int resumes;
} req_t;

typedef struct stream {
    hd_conn_t *c;
    int left;
    bool parked;
} stream_t;

static ssize_t stream_read(void *ctx, char *out, size_t max)
{
    stream_t *st = ctx;
    if (st->left == 0)
        return HD_STREAM_END;
    if (!st->parked) { /* park before every piece; resumed at once */
        st->parked = true;
        hd_park(st->c);
        hd_resume(st->c);
        return 0;
    }
    st->parked = false;
    st->left--;
    size_t n = max < 5 ? max : 5;
    memcpy(out, "piece", n);
    return (ssize_t)n;
}

static void on_request(void *arg, hd_conn_t *c)
{
    req_t *r = hd_req_data(c);
    if (!r) {
        r = calloc(1, sizeof *r);
        hd_set_req_data(c, r);
    }
    const char *path = hd_path(c);
    if (hd_body_too_large(c)) {
        hd_respond(c, 413, NULL, NULL, NULL, 0, false);
        return;
    }
    if (!strncmp(path, "/park", 5) && r->resumes < 2) {
        r->resumes++;
        hd_park(c);
        hd_resume(c);
        return;
    }
    if (!strncmp(path, "/stream", 7)) {
        stream_t *st = calloc(1, sizeof *st);
        st->c = c;
        st->left = 3;
        hd_respond_stream(c, 200, "text/event-stream", "X-A: b\r\n", stream_read, st, free);
        return;
    }
    size_t n;
    const char *b = hd_body(c, &n);
    if (b && b[n] != 0)
        abort(); /* bodies are NUL-terminated */
    const char *q = hd_query(c, "a");
    const char *h = hd_header(c, "x-h");
    char *txt = malloc(128);
    int k = snprintf(txt, 128, "%zu %d %d\n", n, q ? (int)strlen(q) : -1, h ? (int)strlen(h) : -1);
    hd_respond(c, 200, "text/plain", NULL, txt, (size_t)k, true);
}

static void on_done(void *arg, hd_conn_t *c, void *d)
{
    free(d);
}

static void on_close(void *arg, hd_conn_t *c, void *d)
{
    free(d);
}

static hd_server_t *g_h;

static bool errno_is_fatal(void)
{
    return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_h) {
        hd_config_t cfg = {.threads = 1,
                           .max_connections = 16,
                           .idle_timeout_s = 5,
                           .head_max = 1024,
                           .max_body = 512,
                           .discard_max = 2048,
                           .on_request = on_request,
                           .on_request_done = on_done,
                           .on_conn_close = on_close};
        g_h = hd_start(&cfg);
        if (!g_h)
            abort();
    }
    if (size < 1)
        return 0;
    size_t piece = data[0] % 64 + 1;
    data++;
    size--;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        abort();
    hd_add_connection(g_h, sv[0]);
    size_t off = 0;
    char buf[65536];
    size_t got = 0;
    bool wr_done = false, closed = false;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (closed || t.tv_sec - t0.tv_sec > 10)
            break;
        if (!wr_done && off < size) {
            size_t n = size - off < piece ? size - off : piece;
            ssize_t w = send(sv[1], data + off, n, MSG_NOSIGNAL);
            if (w > 0)
                off += (size_t)w;
            else if (w < 0 && errno_is_fatal())
                wr_done = true;
        }
        if (!wr_done && off >= size) {
            shutdown(sv[1], SHUT_WR);
            wr_done = true;
        }
        struct pollfd p = {.fd = sv[1], .events = POLLIN | (wr_done ? 0 : POLLOUT)};
        poll(&p, 1, 10);
        ssize_t r = recv(sv[1], buf + (got < sizeof buf ? got : 0),
                         got < sizeof buf ? sizeof buf - got : sizeof buf, 0);
        if (r == 0 || (r < 0 && errno_is_fatal()))
            closed = true; /* the engine closed: done */
        if (r > 0 && got < sizeof buf)
            got += (size_t)r;
    }
    close(sv[1]);
    if (!closed) { /* the engine kept a connection whose peer had sent all it would */
        fprintf(stderr, "fuzz_http_engine: not closed (%zu of %zu bytes written)\n", off, size);
        abort();
    }
    /* every answer starts with a status line */
    if (got >= 5 && memcmp(buf, "HTTP/", 5) != 0) {
        fprintf(stderr, "fuzz_http_engine: answer %.40s\n", buf);
        abort();
    }
    return 0;
}
