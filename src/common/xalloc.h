/*
 * xalloc.h - allocation that aborts on out-of-memory (the one place we abort; never on
 * bad input).
 */
#ifndef FG_XALLOC_H
#define FG_XALLOC_H

#include <stddef.h>

void *fg_xmalloc(size_t n);
void *fg_xcalloc(size_t n, size_t size);
void *fg_xrealloc(void *p, size_t n);
/* Grows an array of elements of `size` bytes so that it holds at least `need`. */
void *fg_xgrow(void *p, size_t *cap, size_t need, size_t size);
char *fg_xstrdup(const char *s);

#endif
