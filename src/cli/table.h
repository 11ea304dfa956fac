/*
 * table.h - aligned text tables for the CLI's human-readable output.
 *
 *   fg_table_t t; fg_table_init(&t, 3, "ID", "STATE", "REASON");
 *   fg_table_row(&t, "j1", "PENDING", "waiting for 8 GPUs");
 *   fg_table_print(&t, stdout); fg_table_free(&t);
 *
 * prints
 *
 *   ID  STATE    REASON
 *   j1  PENDING  waiting for 8 GPUs
 *
 * Columns are separated by two spaces; the last column is not padded; cells longer
 * than FG_TABLE_MAX_CELL characters are cut with "...". Control characters in cells are
 * shown as '?', so a hostile job name cannot move the cursor.
 */
#ifndef FG_CLI_TABLE_H
#define FG_CLI_TABLE_H

#include <stddef.h>
#include <stdio.h>

#define FG_TABLE_MAX_COLS 16
#define FG_TABLE_MAX_CELL 80

typedef struct {
    int ncols;
    char **cells; /* (nrows + 1) * ncols, row 0 the header; owned */
    size_t nrows, cap;
} fg_table_t;

/* Starts a table with ncols (<= FG_TABLE_MAX_COLS) header strings. */
void fg_table_init(fg_table_t *t, int ncols, ...);
/* Starts a table with ncols (<= FG_TABLE_MAX_COLS) headers from an array. */
void fg_table_initv(fg_table_t *t, int ncols, const char *const *heads);
/* Appends a row of ncols strings (copied; NULL prints as "-"). */
void fg_table_row(fg_table_t *t, ...);
/* Appends a row from an array of ncols strings (copied; NULL prints as "-"). */
void fg_table_rowv(fg_table_t *t, const char *const *cells);
void fg_table_print(const fg_table_t *t, FILE *f);
void fg_table_free(fg_table_t *t);

#endif
