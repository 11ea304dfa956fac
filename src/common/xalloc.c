#include "common/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
