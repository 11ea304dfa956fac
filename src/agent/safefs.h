/*
 * safefs.h - file operations of the (root) agent in directories a job can write (its
 * job directory, its checkpoint directory, a shared checkpoint root): no symbolic link
 * is ever followed, and what is changed is checked through a descriptor first (openat
 * with O_NOFOLLOW, mkdirat, fstat/fchmod/fchown on the descriptor, O_CREAT|O_EXCL
 * files, renameat). See docs/agent.md ("Directories").
 */
#ifndef FG_AGENT_SAFEFS_H
#define FG_AGENT_SAFEFS_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Opens the parent directory of `path` (an O_PATH descriptor), walking every component
 * from "/" (or the working directory for a relative path) with O_NOFOLLOW, so a
 * symbolic link anywhere on the way is refused (ENOTDIR/ELOOP); ".." is refused
 * (EINVAL). With create, missing components are made (mode 0711). The last component
 * goes to leaf. Returns the descriptor, or -1 with errno set.
 */
int fg_sfs_open_parent(const char *path, int create, char *leaf, size_t leaflen);

/*
 * Makes `path` a real directory of mode 0700 that belongs to uid/gid (switch_user) or
 * to the agent (otherwise), creating it and its missing parents. An existing entry is
 * kept when it is a directory owned by the agent or by uid; anything else there (a
 * symbolic link, a file, a directory of another user) is renamed aside to
 * ".fairgpu-rejected.NAME.MS" in the same directory (logged) and a fresh directory is
 * made. Mode and owner are changed through a descriptor of the checked directory.
 * 0, or -1 with err. A chown that fails (a file system that refuses it) is a warning in
 * warn (may be NULL), not an error.
 */
int fg_sfs_own_dir(const char *path, int switch_user, uid_t uid, gid_t gid, char *err,
                   size_t errlen, char *warn, size_t warnlen);

/*
 * Replaces file `name` in directory `dir` by one holding body[0..len) (mode 0644; owned
 * by the directory's owner when the agent is root): written to a new file made with
 * O_CREAT|O_EXCL|O_NOFOLLOW and renamed over name with renameat, so whatever the
 * directory's owner planted there (a symbolic or hard link, a FIFO) is replaced, never
 * written through. `dir` itself must not be a symbolic link. 0 or -1 (errno set).
 */
int fg_sfs_replace_file(const char *dir, const char *name, const char *body, size_t len);

#endif
