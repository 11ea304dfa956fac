/*
 * walbuf.h - the VFS the SQLite backend opens its connections with: the default VFS,
 * except that a write-ahead log's writes of one commit reach the file in one write()
 * when SQLite syncs it (walbuf.c says why and when, and why durability is unchanged).
 */
#ifndef FG_STORE_WALBUF_H
#define FG_STORE_WALBUF_H

#include <sqlite3.h>
#include <stdint.h>

/* The VFS's name, for sqlite3_open_v2. */
#define FG_WALBUF_VFS "fg-walbuf"

/* Registers the VFS (not as the default) on the first call; thread-safe. Returns
 * SQLITE_OK, or an error if the default VFS could not be wrapped. */
int fg_walbuf_register(void);

/* How many write() calls the log of connection `db` has made through the VFS since it
 * was opened (0 if the connection's log is not wrapped). For tests. */
uint64_t fg_walbuf_writes(sqlite3 *db);

#endif
