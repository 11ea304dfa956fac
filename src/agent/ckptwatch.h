/*
 * ckptwatch.h - noticing checkpoints: while a rank runs, the agent looks at its
 * FAIRGPU_CHECKPOINT_DIR now and then and records WHEN IT SAW a new or changed top-level
 * entry there. The rank's `exited` report carries that time (`last_checkpoint_ms`), and
 * billing refunds a preempted attempt the work it lost since then (docs/billing.md).
 *
 * What is recorded is the agent's own clock at the scan that saw the change, never a
 * file's mtime: the directory belongs to the job's user, who can set any mtime (touch
 * -d) and would backdate a checkpoint to be refunded more. An observation is at most one
 * scan period later than the write, which only ever makes a refund smaller.
 *
 * A change is seen through a signature of the directory's top-level entries (count, a
 * hash of the names, the largest mtime and ctime, taken with fstatat and
 * AT_SYMLINK_NOFOLLOW). ctime is set by the kernel on every change of an inode and no
 * user can set it, so a new file whose mtime was backdated is still a change.
 *
 * Example: a rank starts at 10:00:00 with the checkpoint of an earlier attempt in its
 * directory (the baseline: not a checkpoint of this attempt); it writes step_200.pt at
 * 10:01:29.4; the scan of 10:01:30 sees it: last_checkpoint_ms = 10:01:30.
 *
 * The directory is writable by the job, so the scan is defensive: the path is walked
 * with O_NOFOLLOW (safefs.c), entries are never opened or followed, no recursion, at
 * most FG_CKPT_MAX_ENTRIES entries and about FG_CKPT_MAX_SCAN_MS of time per scan.
 */
#ifndef FG_AGENT_CKPTWATCH_H
#define FG_AGENT_CKPTWATCH_H

#include <stdint.h>

#define FG_CKPT_MAX_ENTRIES 1000 /* top-level entries looked at per scan */
#define FG_CKPT_MAX_SCAN_MS 50   /* a scan stops (truncated) after about this long */
#define FG_CKPT_SCAN_MS     2000 /* how often a running rank's directory is looked at */

/* What one scan saw. */
typedef struct fg_ckpt_sig {
    uint32_t count;       /* entries seen (the agent's own notice files not counted) */
    uint64_t names;       /* sum of the entries' name hashes (order does not matter) */
    int64_t max_mtime_ns; /* largest st_mtim of an entry */
    int64_t max_ctime_ns; /* largest st_ctim of an entry (the kernel's, not settable) */
    int64_t dir_ctime_ns; /* the directory's own st_ctim */
    int truncated;        /* the entry or time bound stopped the scan */
    int readable;         /* 0: missing, a symbolic link, not a directory, unreadable */
} fg_ckpt_sig_t;

/* One rank's watch. */
typedef struct fg_ckpt_watch {
    fg_ckpt_sig_t last;         /* the previous scan (the baseline at first) */
    int started;                /* a baseline was taken */
    int64_t last_checkpoint_ms; /* when the last change was observed (agent clock); 0: none */
    int64_t next_scan_ms;       /* the supervisor's next look */
} fg_ckpt_watch_t;

/* Scans dir into *out (never following a symbolic link, bounded). A missing or refused
 * directory gives readable = 0 and an empty signature. */
void fg_ckpt_scan(const char *dir, fg_ckpt_sig_t *out);

/* 1 if `cur` shows a new or modified entry since `prev`: the largest ctime or mtime
 * grew, or the names changed without fewer entries (a removal alone is no checkpoint),
 * or a truncated scan's directory changed. 0 otherwise (or when cur is unreadable). */
int fg_ckpt_changed(const fg_ckpt_sig_t *prev, const fg_ckpt_sig_t *cur);

/* Takes the baseline of w (at the rank's start): what is there now (a checkpoint of an
 * earlier attempt restored in the same directory) is not a checkpoint of this rank. */
void fg_ckpt_watch_begin(fg_ckpt_watch_t *w, const char *dir, int64_t now_ms);

/* Scans again; on a change records now_ms as the observation time. 1 if noticed. */
int fg_ckpt_watch_tick(fg_ckpt_watch_t *w, const char *dir, int64_t now_ms);

#endif
