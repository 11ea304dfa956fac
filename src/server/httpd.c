/*
 * httpd.c - a small HTTP/1.1 server engine for the controller (httpd.h; threads, lock
 * model, parking and limits in docs/http-engine.md).
 *
 * Each worker thread has one epoll set. A connection is registered once, edge
 * triggered (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET), and stays registered while its
 * request is parked: an event on a parked connection only sets a flag. Reading: one
 * recv per request; a read shorter than the space offered means the socket is drained
 * (edge triggering reports the next arrival), so no second recv waits for EAGAIN.
 * Writing: one sendmsg of status line, headers and body; the rest of a partial write
 * is kept and sent on the next EPOLLOUT edge.
 *
 * Parking is a flag: the handler returns without an answer. Resuming (any thread) puts
 * the connection on its worker's resume queue and writes the worker's eventfd only if
 * the worker sleeps in epoll_wait (or is about to): the completion of a group commit
 * of 20 submissions wakes each worker once, not 20 times.
 *
 * Example, a request "POST /v1/jobs" of 180 bytes on a kept-alive connection:
 * epoll_wait reports EPOLLIN; recv returns 180 of 16384 bytes (drained); the head is
 * parsed in place (NULs written into the buffer; the body, entirely in the buffer, is
 * not copied); the handler queues the job for the store's group commit and parks. The
 * store's completion thread resumes it: the worker drains its resume queue, runs the
 * handler again, and one sendmsg sends the 201.
 */
#define _GNU_SOURCE /* accept4, MSG_NOSIGNAL, prctl names */
#include "server/httpd.h"

#include "common/xalloc.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ the parser */

static bool is_tchar(unsigned char ch)
{
    return isalnum(ch) || (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static int hexval(unsigned char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Percent-decodes s in place (and '+' to a space when plus); an invalid escape stays
 * as it is. */
static void pct_decode(char *s, bool plus)
{
    char *o = s;
    for (char *p = s; *p; p++) {
        int a, b;
        if (*p == '%' && (a = hexval((unsigned char)p[1])) >= 0 &&
            (b = hexval((unsigned char)p[2])) >= 0) {
            *o++ = (char)(a * 16 + b);
            p += 2;
        } else if (plus && *p == '+') {
            *o++ = ' ';
        } else {
            *o++ = *p;
        }
    }
    *o = 0;
}

static void parse_query(char *q, hd_head_t *h)
{
    while (*q) {
        char *amp = strchr(q, '&');
        if (amp)
            *amp = 0;
        if (*q && h->nargs < HD_MAX_ARGS) {
            char *eq = strchr(q, '=');
            if (eq)
                *eq = 0;
            pct_decode(q, true);
            if (eq)
                pct_decode(eq + 1, true);
            h->akey[h->nargs] = q;
            h->avalue[h->nargs] = eq ? eq + 1 : NULL;
            h->nargs++;
        }
        if (!amp)
            break;
        q = amp + 1;
    }
}

/* Whether the comma-separated list v holds token tok (case-insensitive). */
static bool has_token(const char *v, const char *tok)
{
    size_t n = strlen(tok);
    while (*v) {
        while (*v == ' ' || *v == '\t' || *v == ',')
            v++;
        const char *e = v;
        while (*e && *e != ',')
            e++;
        const char *t = e;
        while (t > v && (t[-1] == ' ' || t[-1] == '\t'))
            t--;
        if ((size_t)(t - v) == n && strncasecmp(v, tok, n) == 0)
            return true;
        v = e;
    }
    return false;
}

const char *hd_head_header(const hd_head_t *h, const char *name)
{
    for (int i = 0; i < h->nheaders; i++)
        if (strcasecmp(h->hname[i], name) == 0)
            return h->hvalue[i];
    return NULL;
}

const char *hd_head_query(const hd_head_t *h, const char *key)
{
    for (int i = 0; i < h->nargs; i++)
        if (strcmp(h->akey[i], key) == 0)
            return h->avalue[i];
    return NULL;
}

/* The end of the line starting at p (its '\n'), within end. */
static char *line_end(char *p, char *end)
{
    return memchr(p, '\n', (size_t)(end - p));
}

long hd_parse_head(char *buf, size_t len, size_t head_max, hd_head_t *h)
{
    memset(h, 0, sizeof *h);
    size_t skip = 0; /* empty lines before the request line are ignored (RFC 9112 2.2) */
    while (skip < len && (buf[skip] == '\r' || buf[skip] == '\n')) {
        if (buf[skip] == '\r' && (skip + 1 >= len || buf[skip + 1] != '\n'))
            break;
        skip += buf[skip] == '\r' ? 2 : 1;
        if (skip > 64)
            return -400;
    }
    /* the end of the head: an empty line */
    size_t end = 0;
    for (size_t i = skip; i < len; i++) {
        if (buf[i] != '\n')
            continue;
        if (i + 1 < len && buf[i + 1] == '\n') {
            end = i + 2;
            break;
        }
        if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n') {
            end = i + 3;
            break;
        }
    }
    if (!end)
        return len >= head_max ? -431 : 0;
    if (end > head_max)
        return -431;
    char *p = buf + skip, *e = buf + end;
    if (memchr(p, 0, (size_t)(e - p)))
        return -400;
    /* request line: method SP target SP HTTP/1.x */
    char *nl = line_end(p, e);
    char *le = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
    *le = 0;
    char *sp1 = strchr(p, ' ');
    if (!sp1 || sp1 == p || sp1 - p > 32)
        return -400;
    *sp1 = 0;
    for (char *m = p; *m; m++)
        if (!is_tchar((unsigned char)*m))
            return -400;
    h->method = p;
    char *target = sp1 + 1;
    char *sp2 = strchr(target, ' ');
    if (!sp2 || sp2 == target)
        return -400;
    *sp2 = 0;
    char *ver = sp2 + 1;
    if (strncmp(ver, "HTTP/", 5) != 0 || !isdigit((unsigned char)ver[5]) || ver[6] != '.' ||
        !isdigit((unsigned char)ver[7]) || ver[8])
        return -400;
    if (ver[5] != '1')
        return -505;
    h->minor = ver[7] - '0';
    for (char *t = target; *t; t++)
        if ((unsigned char)*t <= 0x20 || (unsigned char)*t == 0x7f)
            return -400;
    if (!strncasecmp(target, "http://", 7) || !strncasecmp(target, "https://", 8)) {
        /* absolute form: the path starts after the authority */
        char *a = strstr(target, "://") + 3;
        char *slash = strchr(a, '/');
        char *qm = strchr(a, '?');
        if (!slash || (qm && qm < slash))
            return -400;
        target = slash;
    } else if (target[0] != '/' && strcmp(target, "*") != 0) {
        return -400;
    }
    char *qm = strchr(target, '?');
    if (qm) {
        *qm = 0;
        parse_query(qm + 1, h);
    }
    pct_decode(target, false);
    h->path = target;
    /* header fields */
    p = nl + 1;
    bool keep = h->minor >= 1, close = false, ka = false, te = false;
    while (p < e) {
        nl = line_end(p, e);
        le = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
        if (le == p)
            break; /* the empty line */
        *le = 0;
        if (*p == ' ' || *p == '\t')
            return -400; /* obsolete line folding */
        char *colon = strchr(p, ':');
        if (!colon || colon == p)
            return -400;
        for (char *n = p; n < colon; n++)
            if (!is_tchar((unsigned char)*n))
                return -400;
        *colon = 0;
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        char *ve = v + strlen(v);
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            *--ve = 0;
        for (char *c = v; *c; c++)
            if (((unsigned char)*c < 0x20 && *c != '\t') || (unsigned char)*c == 0x7f)
                return -400;
        if (h->nheaders >= HD_MAX_HEADERS)
            return -431;
        h->hname[h->nheaders] = p;
        h->hvalue[h->nheaders] = v;
        h->nheaders++;
        if (!strcasecmp(p, "Content-Length")) {
            if (!*v || strlen(v) > 18)
                return -400;
            uint64_t n = 0;
            for (char *d = v; *d; d++) {
                if (!isdigit((unsigned char)*d))
                    return -400;
                n = n * 10 + (uint64_t)(*d - '0');
            }
            if (h->has_length && n != h->content_length)
                return -400;
            h->has_length = true;
            h->content_length = n;
        } else if (!strcasecmp(p, "Transfer-Encoding")) {
            if (te || strcasecmp(v, "chunked") != 0)
                return -501; /* only chunked, once */
            te = true;
        } else if (!strcasecmp(p, "Connection")) {
            close |= has_token(v, "close");
            ka |= has_token(v, "keep-alive");
        } else if (!strcasecmp(p, "Expect")) {
            if (!strcasecmp(v, "100-continue"))
                h->expect_continue = true;
        }
        p = nl + 1;
    }
    if (te && h->has_length)
        return -400; /* both framings: refuse (request smuggling) */
    h->chunked = te;
    h->keep_alive = close ? false : h->minor >= 1 ? keep : ka;
    return (long)end;
}

enum { CK_SIZE, CK_EXT, CK_SIZE_LF, CK_DATA, CK_DATA_CR, CK_DATA_LF, CK_TRAILER, CK_TLINE, CK_END };

#define CK_LINE_MAX 4096

long hd_chunked_decode(hd_chunked_t *d, char *buf, size_t n, size_t *out)
{
    size_t o = 0, i = 0;
    while (i < n && !d->done) {
        unsigned char ch = (unsigned char)buf[i];
        switch (d->st) {
        case CK_SIZE: {
            int v = hexval(ch);
            if (v >= 0) {
                if (d->left >> 40)
                    return -1; /* absurd chunk size */
                d->left = d->left * 16 + (uint64_t)v;
                d->line++;
                i++;
                break;
            }
            if (d->line == 0)
                return -1; /* no digits */
            if (ch == ';' || ch == ' ' || ch == '\t')
                d->st = CK_EXT;
            else if (ch == '\r')
                d->st = CK_SIZE_LF;
            else if (ch == '\n')
                d->st = d->left ? CK_DATA : CK_TRAILER, d->line = 0;
            else
                return -1;
            i++;
            break;
        }
        case CK_EXT:
            if (++d->line > CK_LINE_MAX)
                return -1;
            if (ch == '\r')
                d->st = CK_SIZE_LF;
            else if (ch == '\n')
                d->st = d->left ? CK_DATA : CK_TRAILER, d->line = 0;
            i++;
            break;
        case CK_SIZE_LF:
            if (ch != '\n')
                return -1;
            d->st = d->left ? CK_DATA : CK_TRAILER;
            d->line = 0;
            i++;
            break;
        case CK_DATA: {
            size_t k = n - i;
            if (k > d->left)
                k = (size_t)d->left;
            memmove(buf + o, buf + i, k);
            o += k;
            i += k;
            d->left -= k;
            if (!d->left)
                d->st = CK_DATA_CR;
            break;
        }
        case CK_DATA_CR:
            if (ch == '\r')
                d->st = CK_DATA_LF;
            else if (ch == '\n')
                d->st = CK_SIZE, d->line = 0;
            else
                return -1;
            i++;
            break;
        case CK_DATA_LF:
            if (ch != '\n')
                return -1;
            d->st = CK_SIZE;
            d->line = 0;
            i++;
            break;
        case CK_TRAILER: /* at the start of a trailer line, or of the final empty line */
            if (ch == '\r')
                d->st = CK_END;
            else if (ch == '\n')
                d->done = true;
            else
                d->st = CK_TLINE, d->line = 1;
            i++;
            break;
        case CK_TLINE:
            if (++d->line > CK_LINE_MAX)
                return -1;
            if (ch == '\n')
                d->st = CK_TRAILER;
            i++;
            break;
        case CK_END:
            if (ch != '\n')
                return -1;
            d->done = true;
            i++;
            break;
        default:
            return -1;
        }
    }
    *out = o;
    return (long)i;
}

/* ------------------------------------------------------------------ engine */

/* ST_LINGER: answered before the body was read, the write side shut: what the peer
 * still sends is read and dropped for a moment, so that its unread body does not turn
 * the close into a reset that loses the answer. */
enum { ST_HEAD, ST_BODY, ST_HANDLE, ST_WRITE, ST_LINGER };

#define LINGER_MS 2000

#define HDR_CAP   2048
#define SBUF_SIZE 16384

typedef struct hd_worker {
    hd_server_t *h;
    int idx;
    int ep, efd;
    pthread_t th;
    pthread_mutex_t mu;
    hd_conn_t *rq_head, *rq_tail; /* resume queue (mu) */
    hd_conn_t *incoming;          /* new connections (mu) */
    atomic_int sleeping;          /* 1: in (or entering) epoll_wait; the waker clears it */
    hd_conn_t *conns;             /* every connection of the worker (worker only) */
    hd_conn_t *dead;              /* closed in this round, freed at its end (worker only) */
    time_t date_s;
    char date[64];            /* "Date: ...\r\n" of date_s */
    _Atomic int64_t round_ms; /* when the current round began; 0: waiting in epoll */
} hd_worker_t;

/* Connections open per peer address (max_per_addr): a chained table under one mutex,
 * touched when a connection opens and closes, never per request. */
#define ADDR_BUCKETS 1024
typedef struct addr_count {
    uint32_t addr;
    int n;
    struct addr_count *next;
} addr_count_t;

struct hd_server {
    hd_config_t cfg;
    size_t head_limit; /* of a head: the input buffer less room for reading its body */
    int n;
    hd_worker_t *w;
    atomic_bool stop;
    atomic_long nconns;
    pthread_mutex_t addr_mu;
    addr_count_t *addrs[ADDR_BUCKETS]; /* (addr_mu) */
    atomic_size_t body_mem;            /* bytes of bodies allocated now (body_memory_max) */
};

struct hd_conn {
    hd_worker_t *w;
    int fd;
    int st;
    bool parked;        /* waiting for hd_resume */
    atomic_bool queued; /* on the resume queue (set under w->mu) */
    bool rd_ready;      /* the socket may hold unread bytes */
    bool rdhup;         /* the peer shut down its side */
    bool eof;           /* nothing more will be read */
    bool broken;        /* error or hang-up: close when not parked */
    bool wr_blocked;    /* the last send hit a full buffer: wait for EPOLLOUT */
    bool close_after;   /* close once the answer is sent */
    bool dead;          /* closed: freed at the end of the worker's round */
    hd_conn_t *rq_next;
    hd_conn_t *dead_next;
    hd_conn_t *prev, *next;
    int64_t last_ms;
    /* defences: the head's and the body's deadlines, the peer, the reserved room */
    int64_t head_ms;   /* when the current head began (0: between requests) */
    int64_t body_ms;   /* when the body began to be read */
    uint32_t addr;     /* peer IPv4 address, network order (0: none) */
    bool addr_counted; /* counted in the server's per-address table */
    bool provisional;  /* accepted into the reserved room: must authenticate */
    bool linger;       /* answered before its body: ST_LINGER after the answer */
    size_t body_acct;  /* bytes of body counted in the server's body_mem */
    /* input: the current request starts at in[0] */
    char *in;
    size_t in_len, cap; /* in has cap + 1 bytes (room for a NUL after a body) */
    size_t head_len;
    hd_head_t q;
    /* body */
    char *body;
    size_t body_len, body_cap;
    bool body_alloc, too_large;
    uint64_t need;      /* Content-Length bytes still to read */
    uint64_t discarded; /* body bytes read and dropped */
    size_t req_end;     /* where the next request starts in in[] once the body is read */
    size_t saved_at;    /* in[saved_at] was replaced by the body's NUL (0: none) */
    char saved;
    hd_chunked_t ck;
    /* answer */
    bool responded, head_only;
    char hdr[HDR_CAP];
    size_t hdr_len, hdr_off;
    char *out;
    size_t out_len, out_off;
    bool out_free;
    char tail[8];
    size_t tail_len, tail_off;
    /* streaming answer */
    hd_reader_t reader;
    void *rctx;
    void (*rfree)(void *);
    bool chunked_out, stream_end;
    char *sbuf;
    void *req_data, *conn_data;
};

static void addr_put(hd_server_t *h, uint32_t addr);

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void wake(hd_worker_t *w)
{
    if (atomic_exchange(&w->sleeping, 0)) {
        uint64_t one = 1;
        ssize_t k = write(w->efd, &one, sizeof one);
        (void)k;
    }
}

void hd_resume(hd_conn_t *c)
{
    hd_worker_t *w = c->w;
    pthread_mutex_lock(&w->mu);
    if (!atomic_load(&c->queued)) {
        atomic_store(&c->queued, true);
        c->rq_next = NULL;
        if (w->rq_tail)
            w->rq_tail->rq_next = c;
        else
            w->rq_head = c;
        w->rq_tail = c;
    }
    pthread_mutex_unlock(&w->mu);
    /* (c may be gone from here on: its worker may have answered and closed it) */
    wake(w);
}

void hd_park(hd_conn_t *c)
{
    c->parked = true;
}

/* ---- request accessors */

const char *hd_method(hd_conn_t *c)
{
    return c->q.method;
}
char *hd_path(hd_conn_t *c)
{
    return c->q.path;
}
const char *hd_query(hd_conn_t *c, const char *key)
{
    return hd_head_query(&c->q, key);
}
const char *hd_header(hd_conn_t *c, const char *name)
{
    return hd_head_header(&c->q, name);
}
const char *hd_body(hd_conn_t *c, size_t *len)
{
    *len = c->too_large ? 0 : c->body_len;
    return c->too_large ? NULL : c->body;
}
bool hd_body_too_large(hd_conn_t *c)
{
    return c->too_large;
}
uint32_t hd_peer_addr(hd_conn_t *c)
{
    return c->addr;
}
int64_t hd_request_age_ms(hd_conn_t *c)
{
    int64_t age = c->head_ms ? mono_ms() - c->head_ms : 0;
    return age > 0 ? age : 0;
}
void *hd_req_data(hd_conn_t *c)
{
    return c->req_data;
}
void hd_set_req_data(hd_conn_t *c, void *p)
{
    c->req_data = p;
}
void *hd_conn_data(hd_conn_t *c)
{
    return c->conn_data;
}
void hd_set_conn_data(hd_conn_t *c, void *p)
{
    c->conn_data = p;
}
bool hd_responded(hd_conn_t *c)
{
    return c->responded;
}
int hd_conn_fd(hd_conn_t *c)
{
    return c->fd;
}
long hd_connections(hd_server_t *h)
{
    return atomic_load(&h->nconns);
}

/* ---- answers */

static const char *reason(unsigned st)
{
    switch (st) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 413:
        return "Content Too Large";
    case 415:
        return "Unsupported Media Type";
    case 422:
        return "Unprocessable Content";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Status";
    }
}

static const char *date_line(hd_worker_t *w)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    if (ts.tv_sec != w->date_s) {
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        strftime(w->date, sizeof w->date, "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
        w->date_s = ts.tv_sec;
    }
    return w->date;
}

/* Appends len bytes of t to the head being built in h; *n passes cap when they do not fit
 * (the head is built with plain copies: snprintf was ~2% of a worker's time). */
static void head_put(char *h, size_t *n, size_t cap, const char *t, size_t len)
{
    if (*n <= cap && len <= cap - *n)
        memcpy(h + *n, t, len);
    *n += len;
}

static void head_puts(char *h, size_t *n, size_t cap, const char *t)
{
    head_put(h, n, cap, t, strlen(t));
}

/* Writes the status line and headers into c->hdr. len < 0: a stream. */
static void build_head(hd_conn_t *c, unsigned status, const char *ctype, const char *extra,
                       long long len)
{
    if (!c->q.keep_alive || atomic_load(&c->w->h->stop))
        c->close_after = true;
    char *h = c->hdr;
    size_t n = 0, cap = sizeof c->hdr;
    char num[24];
    head_put(h, &n, cap, "HTTP/1.1 ", 9);
    const char code[4] = {(char)('0' + status / 100 % 10), (char)('0' + status / 10 % 10),
                          (char)('0' + status % 10), ' '};
    head_put(h, &n, cap, code, 4);
    head_puts(h, &n, cap, reason(status));
    head_put(h, &n, cap, "\r\n", 2);
    head_puts(h, &n, cap, date_line(c->w));
    if (ctype) {
        head_put(h, &n, cap, "Content-Type: ", 14);
        head_puts(h, &n, cap, ctype);
        head_put(h, &n, cap, "\r\n", 2);
    }
    if (len >= 0 && status != 204 && status != 304) {
        /* the digits of len, from the end of num */
        char *d = num + sizeof num;
        unsigned long long v = (unsigned long long)len;
        do
            *--d = (char)('0' + v % 10);
        while ((v /= 10) != 0);
        head_put(h, &n, cap, "Content-Length: ", 16);
        head_put(h, &n, cap, d, (size_t)(num + sizeof num - d));
        head_put(h, &n, cap, "\r\n", 2);
    } else if (len < 0 && c->chunked_out) {
        head_puts(h, &n, cap, "Transfer-Encoding: chunked\r\n");
    }
    head_puts(h, &n, cap, "Cache-Control: no-store\r\n");
    if (extra)
        head_puts(h, &n, cap, extra);
    if (c->close_after)
        head_puts(h, &n, cap, "Connection: close\r\n");
    else if (c->q.minor == 0)
        head_puts(h, &n, cap, "Connection: keep-alive\r\n");
    head_put(h, &n, cap, "\r\n", 2);
    if (n > cap) { /* extra headers too long: a bare 500 instead */
        c->close_after = true;
        n = (size_t)snprintf(c->hdr, cap,
                             "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n"
                             "Connection: close\r\n\r\n");
        c->head_only = true;
    }
    c->hdr_len = n;
    c->hdr_off = 0;
}

void hd_respond(hd_conn_t *c, unsigned status, const char *ctype, const char *extra, char *body,
                size_t len, bool must_free)
{
    if (c->responded) {
        if (must_free)
            free(body);
        return;
    }
    c->responded = true;
    c->head_only = c->q.method && !strcmp(c->q.method, "HEAD");
    build_head(c, status, ctype, extra, (long long)len);
    if (c->head_only || status == 204 || status == 304 || len == 0) {
        if (must_free)
            free(body);
        return;
    }
    if (must_free) {
        c->out = body;
        c->out_free = true;
    } else if (len <= sizeof c->hdr - c->hdr_len) {
        memcpy(c->hdr + c->hdr_len, body, len); /* one piece to send */
        c->hdr_len += len;
        return;
    } else {
        c->out = fg_xmalloc(len);
        memcpy(c->out, body, len);
        c->out_free = true;
    }
    c->out_len = len;
    c->out_off = 0;
}

void hd_respond_stream(hd_conn_t *c, unsigned status, const char *ctype, const char *extra,
                       hd_reader_t read, void *ctx, void (*ctx_free)(void *ctx))
{
    if (c->responded) {
        if (ctx_free)
            ctx_free(ctx);
        return;
    }
    c->responded = true;
    c->head_only = c->q.method && !strcmp(c->q.method, "HEAD");
    c->chunked_out = c->q.minor >= 1;
    if (!c->chunked_out) /* HTTP/1.0: the end of the stream is the end of the connection */
        c->close_after = true;
    build_head(c, status, ctype, extra, -1);
    c->reader = read;
    c->rctx = ctx;
    c->rfree = ctx_free;
    c->stream_end = c->head_only;
    if (!c->head_only)
        c->sbuf = fg_xmalloc(SBUF_SIZE);
}

/* An answer of the engine's own with the API's error body and extra header lines; the
 * connection closes after it. */
static void respond_refusal(hd_conn_t *c, unsigned status, const char *code, const char *msg,
                            const char *extra)
{
    char body[256];
    int n = snprintf(body, sizeof body, "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}\n", code,
                     msg);
    c->close_after = true;
    c->q.keep_alive = false;
    if (!c->q.method)
        c->q.method = (char *)"";
    hd_respond(c, status, "application/json; charset=utf-8", extra, body, (size_t)n, false);
    c->st = ST_WRITE;
}

/* An answer of the engine's own (bad request line, head too large, ...); the
 * connection closes after it. */
static void respond_error(hd_conn_t *c, unsigned status)
{
    const char *code = status == 431   ? "header_too_large"
                       : status == 413 ? "payload_too_large"
                       : status == 505 ? "http_version_not_supported"
                       : status == 501 ? "not_implemented"
                                       : "bad_request";
    const char *msg = status == 431   ? "the request line and headers are over the limit"
                      : status == 413 ? "the request body is over the limit"
                      : status == 505 ? "only HTTP/1.0 and HTTP/1.1 are served"
                      : status == 501 ? "only the chunked transfer coding is supported"
                                      : "malformed HTTP request";
    respond_refusal(c, status, code, msg, NULL);
}

/* ---- connections */

static void request_reset(hd_conn_t *c, bool compact)
{
    hd_server_t *h = c->w->h;
    if (c->rfree && c->rctx)
        c->rfree(c->rctx);
    c->reader = NULL;
    c->rctx = NULL;
    c->rfree = NULL;
    free(c->sbuf);
    c->sbuf = NULL;
    if (c->req_data) {
        void *d = c->req_data;
        c->req_data = NULL;
        if (h->cfg.on_request_done)
            h->cfg.on_request_done(h->cfg.arg, c, d);
    }
    if (c->out_free)
        free(c->out);
    c->out = NULL;
    c->out_free = false;
    c->out_len = c->out_off = 0;
    c->hdr_len = c->hdr_off = 0;
    c->tail_len = c->tail_off = 0;
    if (c->body_alloc)
        free(c->body);
    if (c->body_acct) {
        atomic_fetch_sub(&h->body_mem, c->body_acct);
        c->body_acct = 0;
    }
    c->body = NULL;
    c->body_len = c->body_cap = 0;
    c->body_alloc = c->too_large = false;
    if (c->saved_at)
        c->in[c->saved_at] = c->saved;
    c->saved_at = 0;
    c->need = c->discarded = 0;
    c->responded = c->head_only = c->chunked_out = c->stream_end = false;
    memset(&c->ck, 0, sizeof c->ck);
    if (compact) {
        size_t rest = c->in_len - c->req_end;
        memmove(c->in, c->in + c->req_end, rest);
        c->in_len = rest;
    }
    c->req_end = 0;
    c->head_len = 0;
    memset(&c->q, 0, sizeof c->q);
    c->st = ST_HEAD;
    /* the next head's deadline runs from its first byte (here when pipelined) */
    c->head_ms = c->in_len ? c->last_ms : 0;
}

static void conn_close(hd_conn_t *c)
{
    hd_worker_t *w = c->w;
    hd_server_t *h = w->h;
    request_reset(c, false);
    if (c->conn_data && h->cfg.on_conn_close)
        h->cfg.on_conn_close(h->cfg.arg, c, c->conn_data);
    c->conn_data = NULL;
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    if (c->addr_counted)
        addr_put(h, c->addr);
    close(c->fd); /* (also leaves the epoll set: the descriptor is not shared) */
    c->fd = -1;
    free(c->in);
    c->in = NULL;
    /* freed at the end of the round: an event of this round's epoll_wait may still
     * name it */
    c->dead = true;
    c->dead_next = w->dead;
    w->dead = c;
    atomic_fetch_sub(&h->nconns, 1);
}

static void free_dead(hd_worker_t *w)
{
    while (w->dead) {
        hd_conn_t *c = w->dead;
        w->dead = c->dead_next;
        free(c);
    }
}

/* Reads into dst (space bytes). Returns the bytes read; 0 when nothing now (c->eof or
 * c->broken say whether anything will come). */
static size_t do_read(hd_conn_t *c, char *dst, size_t space)
{
    if (!c->rd_ready || c->eof || space == 0)
        return 0;
    ssize_t n;
    do
        n = recv(c->fd, dst, space, 0);
    while (n < 0 && errno == EINTR);
    if (n > 0) {
        c->last_ms = mono_ms();
        if ((size_t)n < space) { /* drained: edge triggering reports the next arrival */
            c->rd_ready = false;
            if (c->rdhup)
                c->eof = true;
        }
        return (size_t)n;
    }
    c->rd_ready = false;
    if (n == 0)
        c->eof = true;
    else if (errno != EAGAIN && errno != EWOULDBLOCK)
        c->broken = true;
    else if (c->rdhup)
        c->eof = true;
    return 0;
}

/* Sends what is pending. 1: all sent; 0: wait for EPOLLOUT or the connection broke. */
static int flush(hd_conn_t *c)
{
    while (c->hdr_off < c->hdr_len || c->out_off < c->out_len || c->tail_off < c->tail_len) {
        if (c->broken || c->wr_blocked)
            return 0;
        struct iovec iov[3];
        int k = 0;
        if (c->hdr_off < c->hdr_len)
            iov[k++] = (struct iovec){c->hdr + c->hdr_off, c->hdr_len - c->hdr_off};
        if (c->out_off < c->out_len)
            iov[k++] = (struct iovec){c->out + c->out_off, c->out_len - c->out_off};
        if (c->tail_off < c->tail_len)
            iov[k++] = (struct iovec){c->tail + c->tail_off, c->tail_len - c->tail_off};
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)k};
        ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                c->wr_blocked = true;
            else
                c->broken = true;
            return 0;
        }
        c->last_ms = mono_ms();
        size_t m = (size_t)n, a;
        a = c->hdr_len - c->hdr_off < m ? c->hdr_len - c->hdr_off : m;
        c->hdr_off += a;
        m -= a;
        a = c->out_len - c->out_off < m ? c->out_len - c->out_off : m;
        c->out_off += a;
        m -= a;
        c->tail_off += m;
    }
    return 1;
}

static void handle(hd_conn_t *c)
{
    hd_server_t *h = c->w->h;
    c->st = ST_HANDLE;
    h->cfg.on_request(h->cfg.arg, c);
    if (c->parked)
        return;
    if (!c->responded)
        hd_respond(c, 500, NULL, NULL, NULL, 0, false);
    c->st = ST_WRITE;
}

static void send_continue(hd_conn_t *c)
{
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    if (c->q.expect_continue && c->q.minor >= 1) {
        ssize_t n = send(c->fd, cont, sizeof cont - 1, MSG_NOSIGNAL);
        if (n != (ssize_t)(sizeof cont - 1))
            c->broken = true; /* 25 bytes on an idle connection: never partial in practice */
    }
}

/* Counts n more bytes of request bodies held by c against the server's limit; false
 * (nothing counted) when they would pass it. */
static bool body_reserve(hd_conn_t *c, size_t n)
{
    hd_server_t *h = c->w->h;
    if (!h->cfg.body_memory_max)
        return true;
    size_t was = atomic_fetch_add(&h->body_mem, n);
    if (was + n > h->cfg.body_memory_max) {
        atomic_fetch_sub(&h->body_mem, n);
        return false;
    }
    c->body_acct += n;
    return true;
}

/* Refuses a body that would pass the server's body memory limit: 503, closed. */
static void refuse_body_memory(hd_conn_t *c)
{
    request_reset(c, false);
    respond_refusal(c, 503, "unavailable", "the server holds too many request bodies; retry later",
                    "Retry-After: 1\r\n");
}

/* The head is parsed: runs on_head before any body is read. Returns true when the
 * body is to be read. When the request is answered now (by the application, or
 * refused from the reserved room), a body already in the buffer is skipped and the
 * connection kept; otherwise the body is not read and the connection closes after the
 * answer (lingering: what the peer still sends is dropped). */
static bool before_body(hd_conn_t *c)
{
    hd_server_t *h = c->w->h;
    size_t avail = c->in_len - c->head_len;
    uint64_t n = c->q.has_length ? c->q.content_length : 0;
    bool pending = c->q.chunked || avail < n;
    bool ka = c->q.keep_alive;
    if (pending)
        c->q.keep_alive = false; /* an answer now closes: its body is not read */
    bool authed = h->cfg.on_head ? h->cfg.on_head(h->cfg.arg, c) : true;
    if (!c->responded && c->provisional) {
        if (authed)
            c->provisional = false;
        else
            respond_refusal(c, 503, "unavailable",
                            "the server is at its connection limit; only authenticated "
                            "clients are served now",
                            "Retry-After: 5\r\n");
    }
    if (!c->responded) {
        c->q.keep_alive = ka;
        return true;
    }
    if (!pending) {
        c->req_end = c->head_len + (size_t)n;
    } else {
        c->close_after = true;
        c->linger = true;
        c->req_end = c->in_len;
    }
    c->st = ST_WRITE;
    return false;
}

/* The head is parsed: prepares reading the body (or handles the request). */
static void start_body(hd_conn_t *c)
{
    hd_server_t *h = c->w->h;
    size_t avail = c->in_len - c->head_len;
    c->req_end = c->head_len;
    c->body_ms = c->last_ms;
    if (!before_body(c))
        return;
    if (c->q.chunked) {
        if (avail == 0)
            send_continue(c);
        c->st = ST_BODY;
        return;
    }
    uint64_t n = c->q.has_length ? c->q.content_length : 0;
    if (n == 0) {
        handle(c);
        return;
    }
    if (n > h->cfg.discard_max) { /* answered at once; the connection closes */
        c->too_large = true;
        c->close_after = true;
        c->req_end = c->in_len;
        handle(c);
        return;
    }
    if (n > h->cfg.max_body) { /* read and dropped */
        c->too_large = true;
        if (avail >= n) {
            c->req_end = c->head_len + (size_t)n;
            handle(c);
            return;
        }
        c->need = n - avail;
        c->discarded = avail;
        c->in_len = c->head_len;
        send_continue(c);
        c->st = ST_BODY;
        return;
    }
    if (avail >= n) { /* in the buffer already: used in place */
        c->body = c->in + c->head_len;
        c->body_len = (size_t)n;
        c->req_end = c->head_len + (size_t)n;
        c->saved_at = c->req_end;
        c->saved = c->in[c->req_end];
        c->in[c->req_end] = 0;
        handle(c);
        return;
    }
    if (!body_reserve(c, (size_t)n + 1)) {
        refuse_body_memory(c);
        return;
    }
    c->body = fg_xmalloc((size_t)n + 1);
    c->body_alloc = true;
    memcpy(c->body, c->in + c->head_len, avail);
    c->body_len = avail;
    c->body[avail] = 0;
    c->need = n - avail;
    c->in_len = c->head_len;
    send_continue(c);
    c->st = ST_BODY;
}

/* Reads the body. Returns false when no progress is possible now. */
static bool read_body(hd_conn_t *c)
{
    hd_server_t *h = c->w->h;
    if (!c->q.chunked) {
        size_t got;
        if (c->too_large) {
            size_t space = c->cap - c->head_len;
            if (space > c->need)
                space = (size_t)c->need;
            got = do_read(c, c->in + c->head_len, space);
            c->discarded += got;
        } else {
            got = do_read(c, c->body + c->body_len, (size_t)c->need);
            c->body_len += got;
            c->body[c->body_len] = 0;
        }
        c->need -= got;
        if (c->need == 0)
            handle(c);
        return got > 0;
    }
    /* chunked: decode what the buffer holds after the head, then read more */
    size_t n = c->in_len - c->head_len;
    if (n == 0) {
        n = do_read(c, c->in + c->head_len, c->cap - c->head_len);
        if (n == 0)
            return false;
        c->in_len += n;
    }
    size_t out = 0;
    long k = hd_chunked_decode(&c->ck, c->in + c->head_len, n, &out);
    if (k < 0) {
        request_reset(c, false);
        respond_error(c, 400);
        return true;
    }
    if (!c->too_large && c->body_len + out > h->cfg.max_body) {
        c->too_large = true;
        c->discarded = c->body_len;
        free(c->body);
        c->body = NULL;
        c->body_alloc = false;
        c->body_len = c->body_cap = 0;
        atomic_fetch_sub(&h->body_mem, c->body_acct);
        c->body_acct = 0;
    }
    if (c->too_large) {
        c->discarded += out;
    } else if (out) {
        /* the capacity fg_xgrow will take (doubling from 16), counted before it grows */
        size_t need = c->body_len + out + 1, cap = c->body_cap ? c->body_cap : 16;
        while (cap < need)
            cap *= 2;
        if (cap > c->body_acct && !body_reserve(c, cap - c->body_acct)) {
            refuse_body_memory(c);
            return true;
        }
        c->body = fg_xgrow(c->body, &c->body_cap, need, 1);
        c->body_alloc = true;
        memcpy(c->body + c->body_len, c->in + c->head_len, out);
        c->body_len += out;
        c->body[c->body_len] = 0;
    }
    size_t rest = n - (size_t)k; /* the next request, when the body ended */
    memmove(c->in + c->head_len, c->in + c->head_len + k, rest);
    c->in_len = c->head_len + rest;
    if (c->ck.done) {
        c->req_end = c->head_len;
        handle(c);
    } else if (c->too_large && c->discarded > h->cfg.discard_max) {
        c->close_after = true;
        handle(c);
    }
    return true;
}

/* Runs the connection as far as it goes: parse, read, handle, write. May close (free)
 * c. Worker thread only; c is not parked. */
static void run(hd_conn_t *c)
{
    hd_server_t *h = c->w->h;
    for (;;) {
        if (c->parked)
            return;
        if (c->st == ST_HANDLE) {
            /* resumed: the handler runs even when the peer is gone (a committed
             * submission must still reach memory and the scheduler) */
            handle(c);
            continue;
        }
        if (c->broken) {
            conn_close(c);
            return;
        }
        switch (c->st) {
        case ST_HEAD: {
            if (c->in_len) {
                long r = hd_parse_head(c->in, c->in_len, h->head_limit, &c->q);
                if (r < 0) {
                    request_reset(c, false);
                    respond_error(c, (unsigned)-r);
                    continue;
                }
                if (r > 0) {
                    c->head_len = (size_t)r;
                    start_body(c);
                    continue;
                }
            }
            size_t n = do_read(c, c->in + c->in_len, c->cap - c->in_len);
            if (n == 0) {
                if (c->eof || c->broken)
                    conn_close(c);
                return;
            }
            if (!c->head_ms)
                c->head_ms = c->last_ms; /* the head's deadline runs from its first byte */
            c->in_len += n;
            continue;
        }
        case ST_BODY:
            if (!read_body(c)) {
                if (c->eof || c->broken)
                    conn_close(c);
                return;
            }
            continue;
        case ST_HANDLE:
            continue; /* (above) */
        case ST_LINGER:
            c->in_len = 0;
            if (do_read(c, c->in, c->cap) == 0) {
                if (c->eof || c->broken)
                    conn_close(c);
                return;
            }
            continue;
        case ST_WRITE:
            if (!flush(c)) {
                if (c->broken)
                    conn_close(c);
                return;
            }
            if (c->reader && !c->stream_end) {
                ssize_t n = c->reader(c->rctx, c->sbuf, SBUF_SIZE);
                if (n > 0) {
                    if (c->chunked_out) {
                        c->hdr_len = (size_t)snprintf(c->hdr, sizeof c->hdr, "%zx\r\n", (size_t)n);
                        c->hdr_off = 0;
                        memcpy(c->tail, "\r\n", 2);
                        c->tail_len = 2;
                        c->tail_off = 0;
                    }
                    c->out = c->sbuf;
                    c->out_len = (size_t)n;
                    c->out_off = 0;
                    continue;
                }
                if (n == 0 && c->parked)
                    return; /* resumed when there is more */
                c->stream_end = true;
                c->out_len = c->out_off = 0;
                if (c->chunked_out) {
                    memcpy(c->tail, "0\r\n\r\n", 5);
                    c->tail_len = 5;
                    c->tail_off = 0;
                }
                continue;
            }
            /* the answer is sent */
            if (c->close_after && c->linger && !c->eof) {
                shutdown(c->fd, SHUT_WR);
                c->st = ST_LINGER;
                c->body_ms = mono_ms(); /* (the linger's start) */
                continue;
            }
            if (c->close_after) {
                conn_close(c);
                return;
            }
            request_reset(c, true);
            continue;
        }
    }
}

/* ---- workers */

static void take(hd_worker_t *w, hd_conn_t **rq, hd_conn_t **inc)
{
    pthread_mutex_lock(&w->mu);
    *rq = w->rq_head;
    *inc = w->incoming;
    w->rq_head = w->rq_tail = NULL;
    w->incoming = NULL;
    pthread_mutex_unlock(&w->mu);
}

/* Whether c is past a deadline: no progress for the idle timeout, a head or a body
 * not complete by its absolute deadline (a byte now and then does not extend these),
 * or a linger over. */
static bool conn_late(const hd_conn_t *c, int64_t now)
{
    const hd_config_t *cf = &c->w->h->cfg;
    if (now - c->last_ms > (int64_t)cf->idle_timeout_s * 1000)
        return true;
    if (c->st == ST_HEAD && c->head_ms && cf->head_timeout_s > 0)
        return now - c->head_ms > (int64_t)cf->head_timeout_s * 1000;
    if (c->st == ST_BODY && cf->body_timeout_s > 0)
        return now - c->body_ms > (int64_t)cf->body_timeout_s * 1000;
    if (c->st == ST_LINGER)
        return now - c->body_ms > LINGER_MS;
    return false;
}

static void sweep(hd_worker_t *w, int64_t now)
{
    hd_conn_t *c = w->conns;
    while (c) {
        hd_conn_t *next = c->next;
        if (!c->parked && conn_late(c, now))
            conn_close(c);
        c = next;
    }
}

static void *worker_main(void *arg)
{
    hd_worker_t *w = arg;
    hd_server_t *h = w->h;
    char name[16];
    snprintf(name, sizeof name, "fg-http-%d", w->idx);
    prctl(PR_SET_NAME, name); /* as top -H and ps -L show it */
    struct epoll_event evs[64];
    int64_t last_sweep = mono_ms();
    while (!atomic_load(&h->stop)) {
        hd_conn_t *rq, *inc;
        take(w, &rq, &inc);
        if (!rq && !inc) {
            atomic_store(&w->sleeping, 1);
            take(w, &rq, &inc); /* a resume pushed before the flag was seen */
            if (rq || inc)
                atomic_store(&w->sleeping, 0);
        }
        bool idle = !rq && !inc;
        if (idle)
            atomic_store_explicit(&w->round_ms, 0, memory_order_relaxed);
        int n = epoll_wait(w->ep, evs, 64, idle ? 1000 : 0);
        atomic_store(&w->sleeping, 0);
        if (n > 0 || !idle)
            atomic_store_explicit(&w->round_ms, mono_ms(), memory_order_relaxed);
        while (inc) {
            hd_conn_t *c = inc;
            inc = c->rq_next;
            c->rq_next = NULL;
            c->next = w->conns;
            if (w->conns)
                w->conns->prev = c;
            w->conns = c;
            struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                                     .data.ptr = c};
            if (epoll_ctl(w->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0)
                conn_close(c);
        }
        for (int i = 0; i < n; i++) {
            hd_conn_t *c = evs[i].data.ptr;
            if (!c || c->dead)
                continue; /* the eventfd (edge triggered: never read), or closed */
            uint32_t e = evs[i].events;
            if (e & (EPOLLERR | EPOLLHUP))
                c->broken = true;
            if (e & EPOLLIN)
                c->rd_ready = true;
            if (e & EPOLLRDHUP) {
                c->rdhup = true;
                c->rd_ready = true;
                if (c->st == ST_WRITE && c->reader)
                    c->broken = true; /* a stream's reader went away */
            }
            if (e & EPOLLOUT)
                c->wr_blocked = false;
            if (!c->parked)
                run(c);
        }
        /* then the resumed: parked until now, so no event above closed one */
        while (rq) {
            hd_conn_t *c = rq;
            rq = c->rq_next;
            /* cleared after reading the link: until then a resume of c is coalesced
             * with this one (hd_resume relinks only a connection not queued) */
            atomic_store(&c->queued, false);
            if (c->dead || !c->parked)
                continue;
            c->parked = false;
            run(c);
        }
        int64_t now = mono_ms();
        /* (a round that did nothing waits again with round_ms 0 unless work is queued) */
        if (now - last_sweep >= 1000) {
            last_sweep = now;
            sweep(w, now);
        }
        free_dead(w);
    }
    /* stopping: close every connection (parked ones too: nothing resumes them now) */
    hd_conn_t *rq, *inc;
    take(w, &rq, &inc);
    while (inc) {
        hd_conn_t *c = inc;
        inc = c->rq_next;
        c->next = w->conns;
        c->prev = NULL;
        if (w->conns)
            w->conns->prev = c;
        w->conns = c;
    }
    while (w->conns) {
        w->conns->parked = false;
        conn_close(w->conns);
    }
    free_dead(w);
    return NULL;
}

/* Counts one more connection from addr; false (nothing counted) at max_per_addr. */
static bool addr_take(hd_server_t *h, uint32_t addr)
{
    addr_count_t **b = &h->addrs[addr % ADDR_BUCKETS], *e;
    bool ok = true;
    pthread_mutex_lock(&h->addr_mu);
    for (e = *b; e && e->addr != addr; e = e->next)
        ;
    if (!e) {
        e = fg_xcalloc(1, sizeof *e);
        e->addr = addr;
        e->next = *b;
        *b = e;
    }
    if (e->n >= h->cfg.max_per_addr)
        ok = false;
    else
        e->n++;
    pthread_mutex_unlock(&h->addr_mu);
    return ok;
}

/* One connection from addr closed (it was counted by addr_take). */
static void addr_put(hd_server_t *h, uint32_t addr)
{
    addr_count_t **p = &h->addrs[addr % ADDR_BUCKETS];
    pthread_mutex_lock(&h->addr_mu);
    while (*p && (*p)->addr != addr)
        p = &(*p)->next;
    assert(*p && (*p)->n > 0);
    if (--(*p)->n == 0) {
        addr_count_t *e = *p;
        *p = e->next;
        free(e);
    }
    pthread_mutex_unlock(&h->addr_mu);
}

void hd_add_connection(hd_server_t *h, int fd)
{
    hd_add_connection_from(h, fd, 0);
}

void hd_add_connection_from(hd_server_t *h, int fd, uint32_t addr)
{
    bool counted = false;
    if (addr && h->cfg.max_per_addr > 0 && addr != h->cfg.exempt_addr) {
        if (!addr_take(h, addr)) {
            close(fd);
            return;
        }
        counted = true;
    }
    long was = atomic_fetch_add(&h->nconns, 1);
    if (was >= h->cfg.max_connections || atomic_load(&h->stop)) {
        atomic_fetch_sub(&h->nconns, 1);
        if (counted)
            addr_put(h, addr);
        close(fd);
        return;
    }
    hd_worker_t *w = &h->w[(unsigned)fd % (unsigned)h->n];
    hd_conn_t *c = fg_xcalloc(1, sizeof *c);
    c->w = w;
    c->fd = fd;
    c->addr = addr;
    c->addr_counted = counted;
    c->provisional = h->cfg.reserved > 0 && was >= h->cfg.max_connections - h->cfg.reserved;
    c->cap = h->cfg.head_max;
    c->in = fg_xmalloc(c->cap + 1);
    c->last_ms = mono_ms();
    c->head_ms = c->last_ms; /* the first head's deadline runs from the connection's start */
    pthread_mutex_lock(&w->mu);
    c->rq_next = w->incoming;
    w->incoming = c;
    pthread_mutex_unlock(&w->mu);
    wake(w);
}

hd_server_t *hd_start(const hd_config_t *cfg)
{
    hd_server_t *h = fg_xcalloc(1, sizeof *h);
    h->cfg = *cfg;
    if (h->cfg.threads < 1)
        h->cfg.threads = 1;
    if (h->cfg.head_max < 1024)
        h->cfg.head_max = 1024;
    /* a body is read (or dropped, or decoded) in the buffer's room after its head */
    size_t room = h->cfg.head_max / 4 < 1024 ? h->cfg.head_max / 4 : 1024;
    h->head_limit = h->cfg.head_max - room;
    h->n = h->cfg.threads;
    pthread_mutex_init(&h->addr_mu, NULL);
    h->w = fg_xcalloc((size_t)h->n, sizeof *h->w);
    for (int i = 0; i < h->n; i++)
        h->w[i].ep = h->w[i].efd = -1;
    int started = 0;
    for (int i = 0; i < h->n; i++) {
        hd_worker_t *w = &h->w[i];
        w->h = h;
        w->idx = i;
        pthread_mutex_init(&w->mu, NULL);
        w->ep = epoll_create1(EPOLL_CLOEXEC);
        w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.ptr = NULL};
        if (w->ep < 0 || w->efd < 0 || epoll_ctl(w->ep, EPOLL_CTL_ADD, w->efd, &ev) != 0 ||
            pthread_create(&w->th, NULL, worker_main, w) != 0)
            break;
        started++;
    }
    if (started == h->n)
        return h;
    int e = errno;
    atomic_store(&h->stop, true);
    for (int i = 0; i < h->n; i++) {
        if (i < started) {
            uint64_t one = 1;
            ssize_t k = write(h->w[i].efd, &one, sizeof one);
            (void)k;
            pthread_join(h->w[i].th, NULL);
        }
        if (h->w[i].ep >= 0)
            close(h->w[i].ep);
        if (h->w[i].efd >= 0)
            close(h->w[i].efd);
        if (i <= started)
            pthread_mutex_destroy(&h->w[i].mu);
    }
    free(h->w);
    pthread_mutex_destroy(&h->addr_mu);
    free(h);
    errno = e;
    return NULL;
}

void hd_stop(hd_server_t *h)
{
    if (!h)
        return;
    atomic_store(&h->stop, true);
    for (int i = 0; i < h->n; i++) {
        uint64_t one = 1;
        ssize_t k = write(h->w[i].efd, &one, sizeof one);
        (void)k;
    }
    for (int i = 0; i < h->n; i++) {
        pthread_join(h->w[i].th, NULL);
        close(h->w[i].ep);
        close(h->w[i].efd);
        pthread_mutex_destroy(&h->w[i].mu);
    }
    free(h->w);
    for (int i = 0; i < ADDR_BUCKETS; i++) /* (every connection closed: all counts 0) */
        assert(!h->addrs[i]);
    pthread_mutex_destroy(&h->addr_mu);
    free(h);
}

int64_t hd_lag_ms(hd_server_t *h)
{
    int64_t now = mono_ms(), lag = 0;
    for (int i = 0; i < h->n; i++) {
        int64_t t = atomic_load_explicit(&h->w[i].round_ms, memory_order_relaxed);
        if (t && now - t > lag)
            lag = now - t;
    }
    return lag;
}
