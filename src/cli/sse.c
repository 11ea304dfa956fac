/*
 * sse.c - Server-Sent Events parser (see sse.h).
 *
 *   "id: 12\ndata: hello\ndata: world\n\n"  -> one event: data "hello\nworld", id "12"
 *   ": ping\n\n"                            -> nothing (a comment, then an empty event)
 */
#include "cli/sse.h"
#include "common/xalloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void fg_sse_init(fg_sse_t *p, fg_sse_cb_t cb, void *ud)
{
    memset(p, 0, sizeof *p);
    p->cb = cb;
    p->ud = ud;
}

void fg_sse_free(fg_sse_t *p)
{
    free(p->line);
    free(p->data);
    p->line = p->data = NULL;
    p->llen = p->lcap = p->dlen = p->dcap = 0;
}

/* Dispatches the pending event (on a blank line). */
static int dispatch(fg_sse_t *p)
{
    int rc = 0;
    if (p->has_data) {
        /* drop the "\n" after the last data line */
        if (p->dlen && p->data[p->dlen - 1] == '\n')
            p->dlen--;
        p->data[p->dlen] = '\0';
        rc = p->cb(p->ud, p->type[0] ? p->type : "message", p->data, p->dlen, p->id);
    }
    p->dlen = 0;
    p->has_data = 0;
    p->type[0] = '\0';
    return rc ? 1 : 0;
}

/* Processes one complete line (without its terminator). */
static int line(fg_sse_t *p, const char *l, size_t n)
{
    if (n == 0)
        return dispatch(p);
    if (l[0] == ':')
        return 0;
    const char *colon = memchr(l, ':', n);
    size_t fl = colon ? (size_t)(colon - l) : n;
    const char *v = colon ? colon + 1 : l + n;
    size_t vl = colon ? n - fl - 1 : 0;
    if (vl && v[0] == ' ') {
        v++;
        vl--;
    }
    if (fl == 4 && !memcmp(l, "data", 4)) {
        if (p->dlen + vl + 2 > FG_SSE_MAX_EVENT)
            return -1;
        p->data = fg_xgrow(p->data, &p->dcap, p->dlen + vl + 2, 1);
        memcpy(p->data + p->dlen, v, vl);
        p->dlen += vl;
        p->data[p->dlen++] = '\n';
        p->has_data = 1;
    } else if (fl == 5 && !memcmp(l, "event", 5)) {
        size_t k = vl < sizeof p->type - 1 ? vl : sizeof p->type - 1;
        memcpy(p->type, v, k);
        p->type[k] = '\0';
    } else if (fl == 2 && !memcmp(l, "id", 2)) {
        if (!memchr(v, '\0', vl) && vl < sizeof p->id) {
            memcpy(p->id, v, vl);
            p->id[vl] = '\0';
        }
    }
    /* "retry" and unknown fields are ignored */
    return 0;
}

int fg_sse_feed(fg_sse_t *p, const char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = buf[i];
        if (c == '\n' && p->last_cr) {
            p->last_cr = 0;
            continue;
        }
        p->last_cr = (c == '\r');
        if (c == '\n' || c == '\r') {
            int rc = line(p, p->line ? p->line : "", p->llen);
            p->llen = 0;
            if (rc)
                return rc;
            continue;
        }
        if (p->llen + 1 > FG_SSE_MAX_LINE)
            return -1;
        p->line = fg_xgrow(p->line, &p->lcap, p->llen + 1, 1);
        p->line[p->llen++] = c;
    }
    return 0;
}

int fg_sse_log_newline(long long prev, const char *id, const char *data, size_t len,
                       long long *next)
{
    long long off = -1;
    if (id && *id >= '0' && *id <= '9') {
        char *end;
        errno = 0;
        long long v = strtoll(id, &end, 10);
        if (!*end && !errno)
            off = v;
    }
    *next = off;
    if (off >= 0 && prev >= 0 && off - prev == (long long)len + 1)
        return 1;
    if (off >= 0 && prev >= 0 && off - prev == (long long)len)
        return 0;
    return len == 0 || data[len - 1] != '\n';
}
