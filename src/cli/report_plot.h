/*
 * report_plot.h - the files of `fairgpu report --out DIR`: report.md, the plots'
 * gnuplot scripts, and gnuplot run on each (no shell) to make its PNG.
 *
 * Every file has a fixed name inside DIR and is opened without following a symbolic
 * link, gnuplot's too: it reads its script on standard input and writes the PNG on
 * standard output, both opened for it (O_NOFOLLOW) in DIR, its working directory; the
 * scripts hold their data (datablocks) and name no file, so no path from the command
 * line reaches gnuplot (a DIR with quotes or spaces is fine), and a link planted in
 * DIR is refused, not written through.
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
 * Runs gnuplot (found on PATH) in dir: `gnuplot < script > png`, its messages appended
 * to dir/gnuplot.log, for at most timeout_s seconds. Returns 0 when it exited 0, 1
 * when there is no gnuplot, -1 when it failed (why in msg).
 */
int fg_rep_gnuplot(const char *dir, const char *script, const char *png, int timeout_s, char *msg,
                   size_t n);

#endif
