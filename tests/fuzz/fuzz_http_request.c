/*
 * fuzz_http_request.c - libFuzzer target for the controller's HTTP request parser
 * (src/server/httpd.h, untrusted input): hd_parse_head on any bytes, then, for a head
 * that declares a chunked body, the chunked decoder on the rest, once whole and once
 * cut in two at a point the first byte picks: both must give the same bytes, the same
 * end and the same verdict. Every string the parser hands out must lie inside the head.
 */
#include "server/httpd.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void inside(const char *p, const char *lo, const char *hi)
{
    if (!p)
        return;
    if (p < lo || p >= hi)
        abort();
    if (!memchr(p, 0, (size_t)(hi - p))) /* NUL-terminated within the head */
        abort();
}

/* Decodes buf[0..n) in pieces [0, cut) and [cut, n); fills out (n bytes) and returns
 * the bytes consumed, -1 on a bad encoding; *done as the decoder's. */
static long decode(const char *src, size_t n, size_t cut, char *out, size_t *outn, bool *done)
{
    hd_chunked_t d;
    memset(&d, 0, sizeof d);
    char *buf = malloc(n ? n : 1);
    memcpy(buf, src, n);
    size_t total = 0, o = 0;
    size_t piece[2] = {cut, n - cut};
    for (int i = 0; i < 2 && !d.done; i++) {
        size_t got = 0;
        long k = hd_chunked_decode(&d, buf + total, piece[i], &got);
        if (k < 0) {
            free(buf);
            return -1;
        }
        if ((size_t)k > piece[i] || got > (size_t)k)
            abort();
        if (!d.done && (size_t)k != piece[i])
            abort(); /* all input is consumed until the end */
        memcpy(out + o, buf + total, got);
        o += got;
        total += (size_t)k;
    }
    free(buf);
    *outn = o;
    *done = d.done;
    return (long)total;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned sel = data[0];
    data++;
    size--;
    char *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    hd_head_t h;
    size_t head_max = sel & 1 ? 64 : 16384;
    long r = hd_parse_head(buf, size, head_max, &h);
    if (r > 0) {
        if ((size_t)r > size || (size_t)r > head_max)
            abort();
        const char *lo = buf, *hi = buf + r;
        if (!h.method || !h.path || h.minor < 0 || h.minor > 9)
            abort();
        inside(h.method, lo, hi);
        inside(h.path, lo, hi);
        if (h.nheaders < 0 || h.nheaders > HD_MAX_HEADERS || h.nargs < 0 || h.nargs > HD_MAX_ARGS)
            abort();
        for (int i = 0; i < h.nheaders; i++) {
            inside(h.hname[i], lo, hi);
            inside(h.hvalue[i], lo, hi);
        }
        for (int i = 0; i < h.nargs; i++) {
            inside(h.akey[i], lo, hi);
            inside(h.avalue[i], lo, hi);
        }
        inside(hd_head_header(&h, "content-type"), lo, hi);
        inside(hd_head_query(&h, "since"), lo, hi);
        if (h.chunked && h.has_length)
            abort();
        if (h.chunked) {
            size_t n = size - (size_t)r;
            size_t cut = n ? (sel >> 1) % (n + 1) : 0;
            char *o1 = malloc(n ? n : 1), *o2 = malloc(n ? n : 1);
            size_t n1 = 0, n2 = 0;
            bool d1 = false, d2 = false;
            long k1 = decode((const char *)data + r, n, n, o1, &n1, &d1);
            long k2 = decode((const char *)data + r, n, cut, o2, &n2, &d2);
            if ((k1 < 0) != (k2 < 0))
                abort();
            if (k1 >= 0 && (k1 != k2 || n1 != n2 || d1 != d2 || memcmp(o1, o2, n1) != 0))
                abort();
            free(o1);
            free(o2);
        }
    } else if (r < 0) {
        if (r != -400 && r != -431 && r != -501 && r != -505)
            abort();
    } else if (size >= head_max) {
        abort(); /* a full buffer is never "incomplete" */
    }
    free(buf);
    return 0;
}
