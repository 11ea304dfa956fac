/*
 * xalloc.h - allocation that aborts on out-of-memory (the one place we abort; never on
 * bad input).
 */
#ifndef FG_XALLOC_H
#define FG_XALLOC_H

#include <stddef.h>

void *fg_xmalloc(size_t n);
void *fg_xcalloc(size_t n, size_t size);
/* fg_xcalloc for large arrays (a replay's per-job records): from 2 MiB on, a mapping of
 * its own in whole 2 MiB pages, advised for transparent huge pages where the kernel has
 * them. The first touch of each fresh 4 KiB page is a page fault, and on some virtual
 * machines a slow one (docs/sim.md, "Speed"); a huge page is one fault per 2 MiB. Freed
 * with fg_xfree_big and the same n and size. */
void *fg_xcalloc_big(size_t n, size_t size);
void fg_xfree_big(void *p, size_t n, size_t size);
void *fg_xrealloc(void *p, size_t n);
/* Grows an array of elements of `size` bytes so that it holds at least `need`. */
void *fg_xgrow(void *p, size_t *cap, size_t need, size_t size);
char *fg_xstrdup(const char *s);

#endif
