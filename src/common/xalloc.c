#include "common/xalloc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static void oom(size_t n)
{
    fprintf(stderr, "fairgpu: out of memory (%zu bytes)\n", n);
    abort();
}

void *fg_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom(n);
    return p;
}

void *fg_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        oom(n * size);
    return p;
}

#define HUGE_PAGE ((size_t)2 << 20)

/* n * size rounded up to whole huge pages, or 0 under HUGE_PAGE (a plain allocation) */
static size_t big_bytes(size_t n, size_t size)
{
    size_t bytes;
    if (__builtin_mul_overflow(n ? n : 1, size ? size : 1, &bytes) || bytes > SIZE_MAX / 2)
        oom(SIZE_MAX);
    return bytes < HUGE_PAGE ? 0 : (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
}

void *fg_xcalloc_big(size_t n, size_t size)
{
    const size_t bytes = big_bytes(n, size);
    if (!bytes)
        return fg_xcalloc(n, size);
    /* one huge page more than needed, so that an aligned start is inside; the rest is
     * unmapped at once (anonymous memory comes zeroed) */
    char *m =
        mmap(NULL, bytes + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        oom(bytes);
    char *p = (char *)(((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (p > m)
        munmap(m, (size_t)(p - m));
    munmap(p + bytes, (size_t)(m + HUGE_PAGE - p));
#ifdef MADV_HUGEPAGE
    (void)madvise(p, bytes, MADV_HUGEPAGE); /* a hint: where it is refused, 4 KiB pages */
#endif
    return p;
}

void fg_xfree_big(void *p, size_t n, size_t size)
{
    const size_t bytes = big_bytes(n, size);
    if (!bytes)
        free(p);
    else if (p)
        munmap(p, bytes);
}

void *fg_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        oom(n);
    return q;
}

void *fg_xgrow(void *p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return p;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    p = fg_xrealloc(p, c * size);
    *cap = c;
    return p;
}

char *fg_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = fg_xmalloc(n);
    memcpy(d, s, n);
    return d;
}
