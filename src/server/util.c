/*
 * util.c - a small open-addressing hash map from 64-bit keys to pointers (the token
 * index, the idempotency index), a byte hash, and a growing text buffer for replies
 * rendered without building a JSON tree first.
 *
 * Keys are never 0 (0 marks an empty slot; callers map a zero hash to 1). Deletion uses
 * backward-shift, so no tombstones accumulate.
 */
#include "server/server.h"

#include "common/xalloc.h"

#include <stdlib.h>
#include <string.h>

uint64_t srv_hash_bytes(const void *p, size_t n)
{
    /* FNV-1a then a final mix (splitmix64). */
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ULL;
    }
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 31;
    return h ? h : 1;
}

static size_t slot_of(uint64_t key, size_t cap)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ULL;
    return (size_t)(h >> 17) & (cap - 1);
}

static void grow(srv_map_t *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 64;
    uint64_t *ok = m->keys;
    void **ov = m->vals;
    size_t ocap = m->cap;
    m->keys = fg_xcalloc(ncap, sizeof *m->keys);
    m->vals = fg_xcalloc(ncap, sizeof *m->vals);
    m->cap = ncap;
    m->n = 0;
    for (size_t i = 0; i < ocap; i++)
        if (ok[i])
            srv_map_put(m, ok[i], ov[i]);
    free(ok);
    free(ov);
}

void *srv_map_get(const srv_map_t *m, uint64_t key)
{
    if (!m->cap)
        return NULL;
    size_t i = slot_of(key, m->cap);
    while (m->keys[i]) {
        if (m->keys[i] == key)
            return m->vals[i];
        i = (i + 1) & (m->cap - 1);
    }
    return NULL;
}

void srv_map_put(srv_map_t *m, uint64_t key, void *val)
{
    if ((m->n + 1) * 4 >= m->cap * 3)
        grow(m);
    size_t i = slot_of(key, m->cap);
    while (m->keys[i]) {
        if (m->keys[i] == key) {
            m->vals[i] = val;
            return;
        }
        i = (i + 1) & (m->cap - 1);
    }
    m->keys[i] = key;
    m->vals[i] = val;
    m->n++;
}

void srv_map_del(srv_map_t *m, uint64_t key)
{
    if (!m->cap)
        return;
    size_t mask = m->cap - 1;
    size_t i = slot_of(key, m->cap);
    while (m->keys[i] && m->keys[i] != key)
        i = (i + 1) & mask;
    if (!m->keys[i])
        return;
    m->keys[i] = 0;
    m->vals[i] = NULL;
    m->n--;
    /* backward-shift the cluster that follows */
    size_t j = (i + 1) & mask;
    while (m->keys[j]) {
        size_t home = slot_of(m->keys[j], m->cap);
        /* can the entry at j move to i? yes if home is not in (i, j] cyclically */
        bool move = (j > i) ? (home <= i || home > j) : (home <= i && home > j);
        if (move) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            m->keys[j] = 0;
            m->vals[j] = NULL;
            i = j;
        }
        j = (j + 1) & mask;
    }
}

void srv_map_free(srv_map_t *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------------ text buffer */

/* Makes room for n more bytes plus a terminating NUL. The first allocation is 960
 * bytes: a job's JSON fits, and it stays below glibc's large-chunk size (1024), whose
 * allocation consolidates the fast bins. */
static void buf_reserve(srv_buf_t *b, size_t n)
{
    if (b->n + n + 1 <= b->cap)
        return;
    size_t c = b->cap ? b->cap : 960;
    while (c < b->n + n + 1)
        c *= 2;
    b->p = fg_xrealloc(b->p, c);
    b->cap = c;
}

/* Appends n bytes of s; the buffer stays NUL-terminated. */
void srv_buf_put(srv_buf_t *b, const char *s, size_t n)
{
    buf_reserve(b, n);
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

/* Appends the string s. */
void srv_buf_puts(srv_buf_t *b, const char *s)
{
    srv_buf_put(b, s, strlen(s));
}

/* Appends v in decimal. */
void srv_buf_i64(srv_buf_t *b, int64_t v)
{
    char tmp[24];
    size_t i = sizeof tmp;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        tmp[--i] = '-';
    srv_buf_put(b, tmp + i, sizeof tmp - i);
}

/* Appends s as a JSON string, escaped as jansson's json_dumps does by default (", \\,
 * and control characters; UTF-8 is copied as is: every string here passed jansson's
 * UTF-8 check or is the server's own). NULL appends null. */
void srv_buf_jstr(srv_buf_t *b, const char *s)
{
    if (!s) {
        srv_buf_put(b, "null", 4);
        return;
    }
    static const char hex[] = "0123456789ABCDEF"; /* jansson writes \u001F */
    size_t n = strlen(s);
    buf_reserve(b, n + 2);
    b->p[b->n++] = '"';
    const char *run = s;
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        srv_buf_put(b, run, (size_t)(p - run));
        run = p + 1;
        char e[6] = {'\\', 0};
        size_t en = 2;
        switch (c) {
        case '"':
            e[1] = '"';
            break;
        case '\\':
            e[1] = '\\';
            break;
        case '\b':
            e[1] = 'b';
            break;
        case '\f':
            e[1] = 'f';
            break;
        case '\n':
            e[1] = 'n';
            break;
        case '\r':
            e[1] = 'r';
            break;
        case '\t':
            e[1] = 't';
            break;
        default:
            e[1] = 'u';
            e[2] = '0';
            e[3] = '0';
            e[4] = hex[c >> 4];
            e[5] = hex[c & 15];
            en = 6;
            break;
        }
        srv_buf_put(b, e, en);
    }
    srv_buf_put(b, run, strlen(run));
    srv_buf_put(b, "\"", 1);
}
