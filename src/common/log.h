/* log.h - leveled logging to stderr. */
#ifndef FG_LOG_H
#define FG_LOG_H

enum { FG_LOG_DEBUG = 0, FG_LOG_INFO, FG_LOG_WARN, FG_LOG_ERROR };

void fg_log_set_level(int level);
void fg_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
