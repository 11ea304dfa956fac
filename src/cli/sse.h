/*
 * sse.h - an incremental parser of text/event-stream (Server-Sent Events) bodies.
 *
 * Feed it the bytes as they arrive, in chunks of any size; it calls back once per
 * complete event. Follows the WHATWG rules that matter here: "data:" lines join with
 * "\n", "id:" sets the last event id (which persists across events), lines starting
 * with ":" are comments (keep-alives), one leading space after the colon is dropped,
 * CRLF, CR and LF all end lines. Pure: no I/O; bounded (FG_SSE_MAX_*).
 */
#ifndef FG_CLI_SSE_H
#define FG_CLI_SSE_H

#include <stddef.h>

#define FG_SSE_MAX_LINE  (1024 * 1024)     /* a longer line makes fg_sse_feed fail */
#define FG_SSE_MAX_EVENT (8 * 1024 * 1024) /* a larger event's data makes it fail */

/* Called per event: type ("message" unless an "event:" line said otherwise), data
 * (datalen bytes, NUL-terminated after them; a hostile stream may put NULs inside, so
 * use datalen), and the last event id ("" if none yet). Return nonzero to stop. */
typedef int (*fg_sse_cb_t)(void *ud, const char *type, const char *data, size_t datalen,
                           const char *id);

typedef struct {
    fg_sse_cb_t cb;
    void *ud;
    char *line;
    size_t llen, lcap;
    char *data;
    size_t dlen, dcap;
    int has_data;
    int last_cr; /* the previous byte was CR: a following LF belongs to it */
    char type[64];
    char id[256];
} fg_sse_t;

void fg_sse_init(fg_sse_t *p, fg_sse_cb_t cb, void *ud);
void fg_sse_free(fg_sse_t *p);

/* Feeds n bytes. Returns 0, 1 if the callback asked to stop, or -1 if a line or an
 * event exceeded its limit (the stream should then be dropped). */
int fg_sse_feed(fg_sse_t *p, const char *buf, size_t n);

/*
 * Log streams (GET /v1/jobs/{id}/logs?follow=1) send each chunk's lines as "data:" lines
 * with the byte offset after the chunk as the event id. SSE cannot end an event's data
 * with a newline (unless an empty last "data:" line is sent), so: given the previous
 * offset prev (-1: unknown), the event's id and its data length, says whether a newline
 * must follow the data to reproduce the log's bytes exactly: yes when the offset advanced
 * by len + 1, no when by len; without usable offsets, yes unless the data ends in one.
 * Stores the event's offset in *next (-1 when the id is not a number).
 */
int fg_sse_log_newline(long long prev, const char *id, const char *data, size_t len,
                       long long *next);

#endif
