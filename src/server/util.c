/*
 * util.c - a small open-addressing hash map from 64-bit keys to pointers (the token
 * index, the idempotency index) and a byte hash.
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
