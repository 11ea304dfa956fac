/*
 * httpd.h - the controller's HTTP/1.1 server engine (connections, request parser,
 * response writer, parking). docs/http-engine.md describes its threads, lock model and
 * limits.
 *
 * The engine owns sockets and bytes; the application (http.c) owns requests. For every
 * complete request the engine calls cfg.on_request on the connection's worker thread.
 * The callback answers (hd_respond, hd_respond_stream), or parks the connection
 * (hd_park: a flag, no system call) and returns; later any thread may call hd_resume,
 * and the worker calls on_request again for the same request (or, for a streaming
 * response, its reader). A connection belongs to one worker thread for its whole life:
 * only that thread reads or writes its fields, except for hd_resume, which only
 * touches the worker's resume queue under the worker's mutex.
 */
#ifndef FG_HTTPD_H
#define FG_HTTPD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct hd_server hd_server_t;
typedef struct hd_conn hd_conn_t;

#define HD_MAX_HEADERS 64 /* more header lines: 431 */
#define HD_MAX_ARGS    32 /* query arguments kept (later ones are ignored) */
#define HD_STREAM_END  ((ssize_t)-1)

typedef struct hd_config {
    int threads;         /* worker threads (connections go to fd mod threads) */
    int max_connections; /* beyond, new connections are closed at once */
    int idle_timeout_s;  /* a connection with no progress for this long is closed */
    size_t head_max;     /* request line + headers; also the input buffer's size */
    size_t max_body;     /* larger bodies are read and dropped: hd_body_too_large */
    size_t discard_max;  /* declared (or chunked) bodies beyond this: answer and close */
    /* A request is complete (its body read), or a parked request was resumed: answer
     * or park. Runs on the connection's worker. */
    void (*on_request)(void *arg, hd_conn_t *c);
    /* The request's application data (hd_set_req_data) is done with: the answer was
     * sent or the connection closed. Runs on the worker. */
    void (*on_request_done)(void *arg, hd_conn_t *c, void *req_data);
    /* The connection closes: release hd_conn_data. */
    void (*on_conn_close)(void *arg, hd_conn_t *c, void *conn_data);
    void *arg;
    /* ---- defences against slow and greedy clients (0: off) */
    int head_timeout_s;     /* a request head must be complete this long after it began */
    int body_timeout_s;     /* a body must be complete this long after its head */
    int max_per_addr;       /* connections open at once from one peer address */
    uint32_t exempt_addr;   /* a peer (network order) not counted by max_per_addr */
    int reserved;           /* the last `reserved` of max_connections: for authenticated */
    size_t body_memory_max; /* bytes of request bodies held at once, all connections */
    /* The head is parsed, its body not read yet (worker thread): the application may
     * answer now (hd_respond), and the body is then not read (the connection closes
     * unless the body is already in the buffer). Returns true when the request carries
     * valid credentials: a connection accepted into the reserved room must show them
     * in its first request, or it is answered 503 and closed. NULL: every request. */
    bool (*on_head)(void *arg, hd_conn_t *c);
} hd_config_t;

/* A parsed request head. Every pointer points into the connection's input buffer and
 * is valid until the request is done. */
typedef struct hd_head {
    char *method;
    char *path; /* percent-decoded, without the query */
    int minor;  /* HTTP/1.minor */
    int nheaders;
    char *hname[HD_MAX_HEADERS], *hvalue[HD_MAX_HEADERS];
    int nargs;
    char *akey[HD_MAX_ARGS], *avalue[HD_MAX_ARGS]; /* decoded; value NULL: "key" alone */
    /* framing, from the headers */
    bool chunked;
    bool has_length;
    uint64_t content_length;
    bool keep_alive;      /* the client wants the connection kept */
    bool expect_continue; /* Expect: 100-continue */
} hd_head_t;

/* Starts the worker threads. NULL on failure (errno set). */
hd_server_t *hd_start(const hd_config_t *cfg);
/* Hands an accepted, non-blocking socket to its worker (any thread); the engine closes
 * it when over the connection limit. */
void hd_add_connection(hd_server_t *h, int fd);
/* As hd_add_connection, for a TCP peer of IPv4 address addr (network order; 0: none),
 * counted against max_per_addr. */
void hd_add_connection_from(hd_server_t *h, int fd, uint32_t addr);
/* The longest a worker has now been busy in one round of its loop (ms; 0: all idle or
 * quick): how far behind the engine is. Any thread. */
int64_t hd_lag_ms(hd_server_t *h);
/* Stops the workers and closes every connection (on_request_done, on_conn_close). */
void hd_stop(hd_server_t *h);
/* Connections open now. */
long hd_connections(hd_server_t *h);

/* ---- the request (worker thread, inside on_request or a stream reader) */
const char *hd_method(hd_conn_t *c);
char *hd_path(hd_conn_t *c); /* writable: the application may split it in place */
const char *hd_query(hd_conn_t *c, const char *key);
const char *hd_header(hd_conn_t *c, const char *name);
const char *hd_body(hd_conn_t *c, size_t *len); /* NUL-terminated; NULL when empty */
bool hd_body_too_large(hd_conn_t *c);
/* The connection's peer address (IPv4, network order; 0: not a TCP peer). */
uint32_t hd_peer_addr(hd_conn_t *c);
/* Milliseconds since the request's first bytes arrived (or its connection opened). */
int64_t hd_request_age_ms(hd_conn_t *c);
void *hd_req_data(hd_conn_t *c);
void hd_set_req_data(hd_conn_t *c, void *p);
void *hd_conn_data(hd_conn_t *c);
void hd_set_conn_data(hd_conn_t *c, void *p);

/* ---- answers (worker thread, inside on_request) */
/* A complete answer. body (len bytes) is freed by the engine when must_free, else
 * copied; extra: more header lines, each ending "\r\n", or NULL. HEAD gets no body. */
void hd_respond(hd_conn_t *c, unsigned status, const char *ctype, const char *extra, char *body,
                size_t len, bool must_free);
/* A streaming answer of unknown length (chunked; HTTP/1.0: until close). The engine
 * calls read(ctx, out, max) whenever the socket can take more: > 0 bytes written to
 * out; 0: nothing now, and the reader parked the connection (hd_park) and will have
 * it resumed; HD_STREAM_END: the end. ctx_free(ctx) when the stream is done. */
typedef ssize_t (*hd_reader_t)(void *ctx, char *out, size_t max);
void hd_respond_stream(hd_conn_t *c, unsigned status, const char *ctype, const char *extra,
                       hd_reader_t read, void *ctx, void (*ctx_free)(void *ctx));
bool hd_responded(hd_conn_t *c);
/* The connection's socket (getpeername: who is asking); not to be read or written. */
int hd_conn_fd(hd_conn_t *c);

/* ---- parking */
/* Marks the connection parked (its worker thread only): no answer now. */
void hd_park(hd_conn_t *c);
/* From any thread: the parked connection's worker runs its request again (or its
 * stream's reader). The connection stays valid while parked: it is never closed
 * before its resumption. */
void hd_resume(hd_conn_t *c);

/* ---- the parser, pure (also what tests/fuzz/fuzz_http_request.c drives) */
/* Parses a request head in buf[0..len) in place. Returns the head's length (up to and
 * including its empty line) and fills *h; 0 when incomplete (more bytes needed); or
 * -status for a bad head (400, 431 over head_max or HD_MAX_HEADERS, 501 an unknown
 * transfer coding, 505 not HTTP/1.x). */
long hd_parse_head(char *buf, size_t len, size_t head_max, hd_head_t *h);

/* A header's value (first of that name, case-insensitive) or a query argument's
 * decoded value (first of that key; NULL also for a key without '=') of a parsed head. */
const char *hd_head_header(const hd_head_t *h, const char *name);
const char *hd_head_query(const hd_head_t *h, const char *key);

/* A chunked body decoder: state kept between pieces of input. */
typedef struct hd_chunked {
    int st;
    uint64_t left; /* data bytes left in the current chunk */
    size_t line;   /* bytes of the current size or trailer line seen */
    bool done;
} hd_chunked_t;
/* Decodes buf[0..n): moves the data bytes to the front of buf (*out bytes) and returns
 * the bytes consumed: all of them (a line cut in two is carried in *d), except after
 * the last chunk and its trailers (d->done), where the rest of buf is the next request;
 * or -1 when the encoding is bad (or a size or trailer line is over 4 KiB). */
long hd_chunked_decode(hd_chunked_t *d, char *buf, size_t n, size_t *out);

#endif
