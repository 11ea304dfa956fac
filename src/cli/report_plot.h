/*
 * report_plot.h - the files of `fairgpu report --out DIR`: report.md, the plots' data
 * and script, and gnuplot run on them (no shell) to make the PNGs.
 *
 * Every file has a fixed name inside DIR, opened relative to DIR without following a
 * link; gnuplot runs with DIR as its working directory, so its script names no path
 * from the command line (a DIR with quotes or spaces is fine).
 */
#ifndef FG_CLI_REPORT_PLOT_H
#define FG_CLI_REPORT_PLOT_H

#include <stddef.h>

/* Creates dir (0755) unless it exists as a directory. 0, or -1 with a message on
 * stderr. */
int fg_rep_mkdir(const char *dir);

/* Writes n bytes of data as file `name` (no '/') in dir, replacing it. 0, or -1 with a
 * message on stderr. */
int fg_rep_write(const char *dir, const char *name, const char *data, size_t n);

/*
 * Runs `gnuplot SCRIPT` (found on PATH) in dir, its output into dir/gnuplot.log, for at
 * most timeout_s seconds. Returns 0 when it exited 0, 1 when there is no gnuplot, -1
 * when it failed (why in msg).
 */
int fg_rep_gnuplot(const char *dir, const char *script, int timeout_s, char *msg, size_t n);

/* Whether file `name` in dir starts with the PNG signature. */
int fg_rep_is_png(const char *dir, const char *name);

#endif
