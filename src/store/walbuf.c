/*
 * walbuf.c - a SQLite VFS over the default one that gathers the write-ahead log's
 * writes of one commit into one write() (see walbuf.h).
 *
 * WHY
 *   SQLite writes each WAL frame with two calls (its 24-byte header, then the page),
 *   so a group commit of 20 submissions (7-8 changed pages) made ~15 pwrite() calls
 *   before its fsync. On virtual machines a system call is not cheap (measured on the
 *   benchmark machine: ~1.2 us for an empty one, more for a 4 KiB write into the page
 *   cache), and the writer thread paid them for every commit. Frames of one commit are
 *   written back to back, so they are kept here and written with one call when SQLite
 *   syncs the log: the same bytes at the same offsets, in the same order relative to
 *   the fsync, so the durability of a commit is unchanged.
 *
 * WHEN THE BUFFER IS WRITTEN
 *   Before the log is synced, read, truncated, sized, closed, or given a file
 *   control; before a write that does not append to the buffer (SQLite rewriting a
 *   frame, or the log header after a restart); and when it is full. So a reader of
 *   this same file handle never misses a byte, and another connection cannot see a
 *   frame before it is written: SQLite makes frames visible to other connections (in
 *   the WAL index) only after the commit's sync (PRAGMA synchronous=FULL, which the
 *   store always uses for its writer). A write error surfaces from the call that
 *   flushed, and fails the commit there.
 *
 * Only files SQLite opens as a write-ahead log are wrapped; the database file, journals
 * and temporary files get the underlying VFS's methods untouched.
 */
#include "store/walbuf.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* One wrapped log file. The underlying VFS's file follows this struct in the same
 * allocation (szOsFile is the sum), so no separate allocation is made. */
typedef struct wb_file {
    sqlite3_file base;  /* pMethods = &wb_methods */
    sqlite3_file *real; /* the underlying file, right after this struct */
    char *buf;          /* pending bytes, written at offset `at` */
    size_t len;         /* bytes pending */
    sqlite3_int64 at;   /* file offset of buf[0] */
    uint64_t writes;    /* write() calls made to the underlying file (for tests) */
} wb_file_t;

/* 96 KiB: 23 frames of 4 KiB pages, a group commit of ~60 jobs; more is written in
 * several calls. It must stay under 128 KiB: the unix VFS writes at most 128 KiB - 1
 * bytes per call (it masks the length), and SQLite's own writes never come near. */
#define WB_CAP (96 * 1024)

static sqlite3_vfs wb_vfs;
static sqlite3_vfs *wb_under;

static size_t wb_header_size(void)
{
    return (sizeof(wb_file_t) + 15) & ~(size_t)15;
}

/* Writes what is pending. SQLITE_OK, or the underlying error (the bytes are dropped
 * then: the commit that wrote them fails). */
static int wb_flush(wb_file_t *f)
{
    if (f->len == 0)
        return SQLITE_OK;
    int rc = f->real->pMethods->xWrite(f->real, f->buf, (int)f->len, f->at);
    f->writes++;
    f->len = 0;
    return rc;
}

static int wb_close(sqlite3_file *file)
{
    wb_file_t *f = (wb_file_t *)file;
    int rc = wb_flush(f);
    int rc2 = f->real->pMethods ? f->real->pMethods->xClose(f->real) : SQLITE_OK;
    free(f->buf);
    f->buf = NULL;
    return rc != SQLITE_OK ? rc : rc2;
}

static int wb_read(sqlite3_file *file, void *out, int amt, sqlite3_int64 off)
{
    wb_file_t *f = (wb_file_t *)file;
    int rc = wb_flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xRead(f->real, out, amt, off);
}

static int wb_write(sqlite3_file *file, const void *data, int amt, sqlite3_int64 off)
{
    wb_file_t *f = (wb_file_t *)file;
    if (amt <= 0)
        return f->real->pMethods->xWrite(f->real, data, amt, off);
    if (f->len > 0 && (off != f->at + (sqlite3_int64)f->len || f->len + (size_t)amt > WB_CAP)) {
        int rc = wb_flush(f);
        if (rc != SQLITE_OK)
            return rc;
    }
    if (!f->buf) /* on the first write: most connections only read the log */
        f->buf = malloc(WB_CAP);
    if ((size_t)amt > WB_CAP || !f->buf) {
        f->writes++;
        return f->real->pMethods->xWrite(f->real, data, amt, off);
    }
    if (f->len == 0)
        f->at = off;
    memcpy(f->buf + f->len, data, (size_t)amt);
    f->len += (size_t)amt;
    return SQLITE_OK;
}

static int wb_truncate(sqlite3_file *file, sqlite3_int64 size)
{
    wb_file_t *f = (wb_file_t *)file;
    int rc = wb_flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xTruncate(f->real, size);
}

static int wb_sync(sqlite3_file *file, int flags)
{
    wb_file_t *f = (wb_file_t *)file;
    int rc = wb_flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xSync(f->real, flags);
}

static int wb_file_size(sqlite3_file *file, sqlite3_int64 *size)
{
    wb_file_t *f = (wb_file_t *)file;
    int rc = wb_flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xFileSize(f->real, size);
}

static int wb_lock(sqlite3_file *file, int level)
{
    wb_file_t *f = (wb_file_t *)file;
    return f->real->pMethods->xLock(f->real, level);
}

static int wb_unlock(sqlite3_file *file, int level)
{
    wb_file_t *f = (wb_file_t *)file;
    return f->real->pMethods->xUnlock(f->real, level);
}

static int wb_check_reserved(sqlite3_file *file, int *out)
{
    wb_file_t *f = (wb_file_t *)file;
    return f->real->pMethods->xCheckReservedLock(f->real, out);
}

static int wb_file_control(sqlite3_file *file, int op, void *arg)
{
    wb_file_t *f = (wb_file_t *)file;
    int rc = wb_flush(f);
    if (rc != SQLITE_OK)
        return rc;
    if (op == SQLITE_FCNTL_VFSNAME) {
        /* SQLite's convention: prefix the underlying name with ours. */
        rc = f->real->pMethods->xFileControl(f->real, op, arg);
        if (rc == SQLITE_OK) {
            char *under = *(char **)arg;
            *(char **)arg = sqlite3_mprintf("%s/%z", wb_vfs.zName, under);
        }
        return rc;
    }
    return f->real->pMethods->xFileControl(f->real, op, arg);
}

static int wb_sector_size(sqlite3_file *file)
{
    wb_file_t *f = (wb_file_t *)file;
    return f->real->pMethods->xSectorSize(f->real);
}

static int wb_device_characteristics(sqlite3_file *file)
{
    wb_file_t *f = (wb_file_t *)file;
    return f->real->pMethods->xDeviceCharacteristics(f->real);
}

/* A log file has no shared memory and no memory map of its own (those are the
 * database file's): SQLite never calls these on it; they are passed on for form. */
static int wb_shm_map(sqlite3_file *file, int pg, int pgsz, int extend, void volatile **pp)
{
    wb_file_t *f = (wb_file_t *)file;
    return f->real->pMethods->xShmMap(f->real, pg, pgsz, extend, pp);
}

static int wb_shm_lock(sqlite3_file *file, int offset, int n, int flags)
{
    wb_file_t *f = (wb_file_t *)file;
    return f->real->pMethods->xShmLock(f->real, offset, n, flags);
}

static void wb_shm_barrier(sqlite3_file *file)
{
    wb_file_t *f = (wb_file_t *)file;
    f->real->pMethods->xShmBarrier(f->real);
}

static int wb_shm_unmap(sqlite3_file *file, int del)
{
    wb_file_t *f = (wb_file_t *)file;
    return f->real->pMethods->xShmUnmap(f->real, del);
}

static int wb_fetch(sqlite3_file *file, sqlite3_int64 off, int amt, void **pp)
{
    wb_file_t *f = (wb_file_t *)file;
    int rc = wb_flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xFetch(f->real, off, amt, pp);
}

static int wb_unfetch(sqlite3_file *file, sqlite3_int64 off, void *p)
{
    wb_file_t *f = (wb_file_t *)file;
    return f->real->pMethods->xUnfetch(f->real, off, p);
}

static const sqlite3_io_methods wb_methods = {
    .iVersion = 3,
    .xClose = wb_close,
    .xRead = wb_read,
    .xWrite = wb_write,
    .xTruncate = wb_truncate,
    .xSync = wb_sync,
    .xFileSize = wb_file_size,
    .xLock = wb_lock,
    .xUnlock = wb_unlock,
    .xCheckReservedLock = wb_check_reserved,
    .xFileControl = wb_file_control,
    .xSectorSize = wb_sector_size,
    .xDeviceCharacteristics = wb_device_characteristics,
    .xShmMap = wb_shm_map,
    .xShmLock = wb_shm_lock,
    .xShmBarrier = wb_shm_barrier,
    .xShmUnmap = wb_shm_unmap,
    .xFetch = wb_fetch,
    .xUnfetch = wb_unfetch,
};

/* Opens a file: a log gets the wrapper (the underlying file right after it); any other
 * file is opened by the underlying VFS in the whole space, with its own methods. */
static int wb_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *file, int flags,
                   int *out_flags)
{
    (void)vfs;
    if (!(flags & SQLITE_OPEN_WAL))
        return wb_under->xOpen(wb_under, name, file, flags, out_flags);
    wb_file_t *f = (wb_file_t *)file;
    memset(f, 0, sizeof *f);
    f->real = (sqlite3_file *)((char *)file + wb_header_size());
    /* (on failure the underlying xOpen closes what it opened, and SQLite calls no
     * xClose: pMethods stays unset) */
    int rc = wb_under->xOpen(wb_under, name, f->real, flags, out_flags);
    if (rc != SQLITE_OK)
        return rc;
    f->base.pMethods = &wb_methods;
    return SQLITE_OK;
}

/* Everything but xOpen and the file size goes straight to the underlying VFS. */
static int wb_delete(sqlite3_vfs *v, const char *name, int sync_dir)
{
    (void)v;
    return wb_under->xDelete(wb_under, name, sync_dir);
}
static int wb_access(sqlite3_vfs *v, const char *name, int flags, int *out)
{
    (void)v;
    return wb_under->xAccess(wb_under, name, flags, out);
}
static int wb_full_pathname(sqlite3_vfs *v, const char *name, int n, char *out)
{
    (void)v;
    return wb_under->xFullPathname(wb_under, name, n, out);
}
static void *wb_dlopen(sqlite3_vfs *v, const char *name)
{
    (void)v;
    return wb_under->xDlOpen(wb_under, name);
}
static void wb_dlerror(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    wb_under->xDlError(wb_under, n, out);
}
static void (*wb_dlsym(sqlite3_vfs *v, void *h, const char *sym))(void)
{
    (void)v;
    return wb_under->xDlSym(wb_under, h, sym);
}
static void wb_dlclose(sqlite3_vfs *v, void *h)
{
    (void)v;
    wb_under->xDlClose(wb_under, h);
}
static int wb_randomness(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    return wb_under->xRandomness(wb_under, n, out);
}
static int wb_sleep(sqlite3_vfs *v, int us)
{
    (void)v;
    return wb_under->xSleep(wb_under, us);
}
static int wb_current_time(sqlite3_vfs *v, double *out)
{
    (void)v;
    return wb_under->xCurrentTime(wb_under, out);
}
static int wb_get_last_error(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    return wb_under->xGetLastError(wb_under, n, out);
}
static int wb_current_time_int64(sqlite3_vfs *v, sqlite3_int64 *out)
{
    (void)v;
    return wb_under->xCurrentTimeInt64(wb_under, out);
}

static int wb_register_rc = SQLITE_ERROR;

static void wb_register_once(void)
{
    wb_under = sqlite3_vfs_find(NULL);
    if (!wb_under || wb_under->iVersion < 2)
        return;
    size_t header = wb_header_size();
    wb_vfs = (sqlite3_vfs){
        .iVersion = 2,
        .szOsFile = (int)(header + (size_t)wb_under->szOsFile),
        .mxPathname = wb_under->mxPathname,
        .zName = FG_WALBUF_VFS,
        .xOpen = wb_open,
        .xDelete = wb_delete,
        .xAccess = wb_access,
        .xFullPathname = wb_full_pathname,
        .xDlOpen = wb_dlopen,
        .xDlError = wb_dlerror,
        .xDlSym = wb_dlsym,
        .xDlClose = wb_dlclose,
        .xRandomness = wb_randomness,
        .xSleep = wb_sleep,
        .xCurrentTime = wb_current_time,
        .xGetLastError = wb_get_last_error,
        .xCurrentTimeInt64 = wb_current_time_int64,
    };
    wb_register_rc = sqlite3_vfs_register(&wb_vfs, 0);
}

int fg_walbuf_register(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, wb_register_once);
    return wb_register_rc;
}

uint64_t fg_walbuf_writes(sqlite3 *db)
{
    sqlite3_file *file = NULL;
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &file) != SQLITE_OK ||
        !file || file->pMethods != &wb_methods)
        return 0;
    return ((wb_file_t *)file)->writes;
}
