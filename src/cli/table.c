/* table.c - aligned text tables (see table.h). */
#include "cli/table.h"
#include "common/xalloc.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* A printable copy of s: control bytes become '?', long values are cut. */
static char *cell(const char *s)
{
    if (!s || !*s)
        s = "-";
    size_t n = strlen(s);
    int cut = n > FG_TABLE_MAX_CELL;
    if (cut) {
        n = FG_TABLE_MAX_CELL - 3;
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--; /* do not split a UTF-8 character */
    }
    char *c = fg_xmalloc(n + 4);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        c[i] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
    }
    if (cut)
        memcpy(c + n, "...", 4);
    else
        c[n] = '\0';
    return c;
}

static void push(fg_table_t *t, const char *const *v)
{
    size_t need = (t->nrows + 1) * (size_t)t->ncols;
    t->cells = fg_xgrow(t->cells, &t->cap, need, sizeof *t->cells);
    for (int k = 0; k < t->ncols; k++)
        t->cells[t->nrows * (size_t)t->ncols + (size_t)k] = cell(v[k]);
    t->nrows++;
}

void fg_table_init(fg_table_t *t, int ncols, ...)
{
    memset(t, 0, sizeof *t);
    if (ncols > FG_TABLE_MAX_COLS)
        ncols = FG_TABLE_MAX_COLS;
    t->ncols = ncols;
    const char *v[FG_TABLE_MAX_COLS];
    va_list ap;
    va_start(ap, ncols);
    for (int k = 0; k < ncols; k++)
        v[k] = va_arg(ap, const char *);
    va_end(ap);
    push(t, v);
}

void fg_table_initv(fg_table_t *t, int ncols, const char *const *heads)
{
    memset(t, 0, sizeof *t);
    t->ncols = ncols > FG_TABLE_MAX_COLS ? FG_TABLE_MAX_COLS : ncols;
    push(t, heads);
}

void fg_table_row(fg_table_t *t, ...)
{
    const char *v[FG_TABLE_MAX_COLS];
    va_list ap;
    va_start(ap, t);
    for (int k = 0; k < t->ncols; k++)
        v[k] = va_arg(ap, const char *);
    va_end(ap);
    push(t, v);
}

void fg_table_rowv(fg_table_t *t, const char *const *cells)
{
    push(t, cells);
}

/* Display width, counting UTF-8 continuation bytes as nothing. */
static size_t width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xc0) != 0x80)
            w++;
    return w;
}

void fg_table_print(const fg_table_t *t, FILE *f)
{
    size_t w[FG_TABLE_MAX_COLS] = {0};
    for (size_t r = 0; r < t->nrows; r++)
        for (int k = 0; k < t->ncols; k++) {
            size_t x = width(t->cells[r * (size_t)t->ncols + (size_t)k]);
            if (x > w[k])
                w[k] = x;
        }
    for (size_t r = 0; r < t->nrows; r++) {
        for (int k = 0; k < t->ncols; k++) {
            const char *c = t->cells[r * (size_t)t->ncols + (size_t)k];
            fputs(c, f);
            if (k + 1 < t->ncols)
                fprintf(f, "%*s", (int)(w[k] - width(c) + 2), "");
        }
        fputc('\n', f);
    }
}

void fg_table_free(fg_table_t *t)
{
    for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof *t);
}
