/*
 * loadgen.c - a small HTTP/1.1 load generator for the controller benchmark
 * (bench/bench_server.sh): C connections kept alive, one request in flight on each, for
 * D seconds; counts every answer by status code and records each latency.
 *
 *   fg_loadgen -c 64 -t 1 -d 10 [-m POST] [-b BODY] [-H 'Name: value']... HOST:PORT PATH
 *
 * Prints `name value` lines: requests, per-status counts (`status_201 N`), seconds,
 * latency percentiles in ms (p50, p90, p99, p99.9, max) and errors (connections lost).
 *
 * Why not wrk: wrk changes its epoll registration twice per request (two epoll_ctl
 * calls next to one write and one read), and its Lua response() hook, needed to count
 * 201s exactly, costs more again; on a 2-core machine that CPU is taken from the
 * server being measured. Here each connection is registered once (EPOLLIN): a request
 * is written as soon as the previous answer is complete, so a request costs one write,
 * one read and a share of one epoll_wait.
 *
 * Answers are parsed just enough: the status line, Content-Length (the controller
 * always sends it for these requests; a chunked answer is an error) and the end of the
 * headers. Latencies go into a log-linear histogram (128 steps per power of two of
 * microseconds: under 1% error), merged over threads at the end.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SUB_BITS 7 /* 128 histogram steps per power of two */
#define HBUCKETS (40 << SUB_BITS)
#define RBUF     65536

typedef struct conn {
    int fd;
    size_t have;      /* bytes of the current answer read so far */
    uint64_t sent_ns; /* when the current request was written */
    char buf[RBUF];   /* the current answer (headers + body) */
} conn_t;

typedef struct worker {
    pthread_t th;
    int nconns;
    conn_t *conns;
    uint64_t hist[HBUCKETS];
    uint64_t status[600];
    uint64_t requests, errors, max_us;
} worker_t;

static struct sockaddr_in g_addr;
static char *g_req;
static size_t g_req_len;
static uint64_t g_end_ns;

/* A whole number of at most `max` from s, or exit with the usage line. */
static long arg_num(const char *s, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > max) {
        fprintf(stderr, "fg_loadgen: '%s' is not a number from 0 to %ld\n", s, max);
        exit(2);
    }
    return v;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The histogram bucket of a latency in microseconds: exact below 128 us, then 128
 * steps per power of two. */
static size_t bucket_of(uint64_t us)
{
    if (us < (1u << SUB_BITS))
        return (size_t)us;
    int msb = 63 - __builtin_clzll(us);
    int shift = msb - SUB_BITS;
    size_t b = ((size_t)(shift + 1) << SUB_BITS) + (size_t)((us >> shift) - (1u << SUB_BITS));
    return b < HBUCKETS ? b : HBUCKETS - 1;
}

/* The upper bound in microseconds of bucket b (the inverse of bucket_of). */
static uint64_t bucket_top(size_t b)
{
    if (b < (1u << SUB_BITS))
        return b;
    size_t shift = (b >> SUB_BITS) - 1;
    uint64_t base = ((uint64_t)(b & ((1u << SUB_BITS) - 1)) + (1u << SUB_BITS)) << shift;
    return base + (((uint64_t)1 << shift) - 1);
}

/* Opens a connection and writes its first request. -1 on failure. */
static int conn_open(conn_t *c, int ep)
{
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (c->fd < 0)
        return -1;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(c->fd, (struct sockaddr *)&g_addr, sizeof g_addr) != 0) {
        close(c->fd);
        c->fd = -1;
        return -1;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) != 0)
        return -1;
    c->have = 0;
    c->sent_ns = now_ns();
    return write(c->fd, g_req, g_req_len) == (ssize_t)g_req_len ? 0 : -1;
}

/* Length of a complete answer in c->buf (headers + Content-Length body), 0 if more
 * is needed, -1 if it cannot be parsed. *status gets the status code. */
static long answer_len(const conn_t *c, int *status)
{
    const char *end = NULL;
    for (size_t i = 3; i < c->have && !end; i++)
        if (c->buf[i] == '\n' && c->buf[i - 1] == '\r' && c->buf[i - 2] == '\n' &&
            c->buf[i - 3] == '\r')
            end = c->buf + i - 3;
    if (!end)
        return c->have >= RBUF ? -1 : 0;
    if (c->have < 12 || memcmp(c->buf, "HTTP/1.", 7) != 0)
        return -1;
    *status = (int)strtol(c->buf + 9, NULL, 10);
    size_t hlen = (size_t)(end - c->buf) + 4;
    long body = -1;
    const char *p = c->buf;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            break;
        p = nl + 1;
        if (end - p >= 15 && !strncasecmp(p, "content-length:", 15))
            body = strtol(p + 15, NULL, 10);
    }
    if (body < 0 || hlen + (size_t)body > RBUF)
        return -1;
    return c->have >= hlen + (size_t)body ? (long)(hlen + (size_t)body) : 0;
}

static void record(worker_t *w, int status, uint64_t us)
{
    w->requests++;
    if (status > 0 && status < 600)
        w->status[status]++;
    w->hist[bucket_of(us)]++;
    if (us > w->max_us)
        w->max_us = us;
}

/* Reads what arrived on c; for each complete answer records it and writes the next
 * request. -1 when the connection is lost (the caller reopens it). */
static int on_readable(worker_t *w, conn_t *c)
{
    ssize_t n = read(c->fd, c->buf + c->have, RBUF - c->have);
    if (n <= 0)
        return n < 0 && errno == EAGAIN ? 0 : -1;
    c->have += (size_t)n;
    int status = 0;
    long len = answer_len(c, &status);
    if (len < 0)
        return -1;
    if (len == 0)
        return 0;
    uint64_t t = now_ns();
    record(w, status, (t - c->sent_ns) / 1000);
    if ((size_t)len != c->have)
        return -1; /* bytes beyond the answer: nothing was pipelined, so an error */
    c->have = 0;
    if (t >= g_end_ns)
        return 0;
    c->sent_ns = t;
    return write(c->fd, g_req, g_req_len) == (ssize_t)g_req_len ? 0 : -1;
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    int ep = epoll_create1(0);
    for (int i = 0; i < w->nconns; i++)
        if (conn_open(&w->conns[i], ep) != 0)
            w->errors++;
    struct epoll_event evs[256];
    while (now_ns() < g_end_ns) {
        int n = epoll_wait(ep, evs, 256, 100);
        for (int i = 0; i < n; i++) {
            conn_t *c = evs[i].data.ptr;
            if (on_readable(w, c) != 0) {
                w->errors++;
                close(c->fd);
                if (now_ns() < g_end_ns && conn_open(c, ep) != 0)
                    w->errors++;
            }
        }
    }
    for (int i = 0; i < w->nconns; i++)
        if (w->conns[i].fd >= 0)
            close(w->conns[i].fd);
    close(ep);
    return NULL;
}

static void usage(void)
{
    fprintf(stderr, "usage: fg_loadgen [-c conns] [-t threads] [-d seconds] [-m method] "
                    "[-b body] [-H 'Name: value']... HOST:PORT PATH\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int conns = 64, threads = 1;
    double secs = 10;
    const char *method = "GET", *body = NULL;
    char headers[8192] = "";
    size_t hl = 0;
    int opt;
    while ((opt = getopt(argc, argv, "c:t:d:m:b:H:")) != -1) {
        switch (opt) {
        case 'c':
            conns = (int)arg_num(optarg, 100000);
            break;
        case 't':
            threads = (int)arg_num(optarg, 1024);
            break;
        case 'd':
            secs = atof(optarg);
            break;
        case 'm':
            method = optarg;
            break;
        case 'b':
            body = optarg;
            break;
        case 'H':
            hl += (size_t)snprintf(headers + hl, sizeof headers - hl, "%s\r\n", optarg);
            if (hl >= sizeof headers)
                usage();
            break;
        default:
            usage();
        }
    }
    if (argc - optind != 2 || conns < 1 || threads < 1 || threads > conns || secs <= 0)
        usage();
    char host[256];
    snprintf(host, sizeof host, "%s", argv[optind]);
    char *colon = strrchr(host, ':');
    if (!colon)
        usage();
    *colon = 0;
    g_addr.sin_family = AF_INET;
    g_addr.sin_port = htons((uint16_t)arg_num(colon + 1, 65535));
    if (inet_pton(AF_INET, host, &g_addr.sin_addr) != 1)
        usage();
    size_t blen = body ? strlen(body) : 0;
    size_t cap = 1024 + hl + blen;
    g_req = malloc(cap);
    int n = snprintf(g_req, cap, "%s %s HTTP/1.1\r\nHost: %s\r\n%s", method, argv[optind + 1],
                     argv[optind], headers);
    if (body)
        n += snprintf(g_req + n, cap - (size_t)n, "Content-Length: %zu\r\n", blen);
    n += snprintf(g_req + n, cap - (size_t)n, "\r\n");
    if (body)
        memcpy(g_req + n, body, blen);
    g_req_len = (size_t)n + blen;

    worker_t *ws = calloc((size_t)threads, sizeof *ws);
    uint64_t t0 = now_ns();
    g_end_ns = t0 + (uint64_t)(secs * 1e9);
    for (int i = 0; i < threads; i++) {
        ws[i].nconns = conns / threads + (i < conns % threads);
        ws[i].conns = calloc((size_t)ws[i].nconns, sizeof *ws[i].conns);
        pthread_create(&ws[i].th, NULL, worker_main, &ws[i]);
    }
    worker_t all = {0};
    for (int i = 0; i < threads; i++) {
        pthread_join(ws[i].th, NULL);
        all.requests += ws[i].requests;
        all.errors += ws[i].errors;
        if (ws[i].max_us > all.max_us)
            all.max_us = ws[i].max_us;
        for (size_t b = 0; b < HBUCKETS; b++)
            all.hist[b] += ws[i].hist[b];
        for (int s = 0; s < 600; s++)
            all.status[s] += ws[i].status[s];
    }
    double el = (double)(now_ns() - t0) / 1e9;
    printf("requests %llu\n", (unsigned long long)all.requests);
    for (int s = 0; s < 600; s++)
        if (all.status[s])
            printf("status_%d %llu\n", s, (unsigned long long)all.status[s]);
    printf("errors %llu\nseconds %.3f\n", (unsigned long long)all.errors, el);
    static const double qs[] = {50, 90, 99, 99.9};
    static const char *const qn[] = {"p50", "p90", "p99", "p99.9"};
    for (int q = 0; q < 4; q++) {
        uint64_t want = (uint64_t)((double)all.requests * qs[q] / 100.0 + 0.5), seen = 0;
        size_t b = 0;
        for (; b < HBUCKETS; b++) {
            seen += all.hist[b];
            if (seen >= want && seen > 0)
                break;
        }
        printf("%s_ms %.3f\n", qn[q], (double)bucket_top(b < HBUCKETS ? b : HBUCKETS - 1) / 1000);
    }
    printf("max_ms %.3f\n", (double)all.max_us / 1000);
    return 0;
}
