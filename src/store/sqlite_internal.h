/*
 * sqlite_internal.h - pieces of the SQLite backend that tests reach into.
 * Not for the server: it uses store.h only.
 */
#ifndef FG_STORE_SQLITE_INTERNAL_H
#define FG_STORE_SQLITE_INTERNAL_H

#include <sqlite3.h>

#include "store/store.h"

/* The schema version this binary migrates to. */
int fg_store_sqlite_latest_version(void);

/* Migrates the open database `db` up to version `target` (1..latest), each step in its
 * own transaction that also sets PRAGMA user_version. Returns 0, FG_STORE_EVERSION if
 * the file is newer than `target`'s binary knows, or FG_STORE_EIO (*errmsg, if not
 * NULL, gets an allocated sentence). */
int fg_store_sqlite_migrate(sqlite3 *db, int target, char **errmsg);

/* The SQLite connection behind a handle (tests inject faults through it; only from the
 * thread that owns the handle, e.g. inside a write unit). */
sqlite3 *fg_store_sqlite_db(fg_store_tx_t *tx);

#endif
