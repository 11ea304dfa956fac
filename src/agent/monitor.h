/*
 * monitor.h - the code that runs outside the agent process: the zygote (starts one
 * monitor per launch on request, as a process sharing its memory: see monitor.c) and
 * the monitor (vforks the job, copies its output into the log, records its exit). Only
 * libc and async-signal-safe calls after a fork, no allocation in the monitor: this
 * file is linked both into the agent (in-process zygote, the fallback) and into the
 * small static `fairgpu-monitor` helper that the agent runs as its zygote, so that the
 * zygote is a tiny address space instead of the agent's (38 shared libraries: most of
 * the CPU of a trivial job was page-table copies and teardowns).
 */
#ifndef FG_AGENT_MONITOR_H
#define FG_AGENT_MONITOR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Fixed descriptor numbers inside the monitor. */
enum {
    FG_MON_LIFE = 3,
    FG_MON_LOG = 4,
    FG_MON_NULL = 5,
    FG_MON_CG = 6, /* FG_MON_CG .. FG_MON_CG + FG_MON_CG_MAX - 1: the cgroups' cgroup.procs */
    FG_MON_CG_MAX = 4,
    FG_MON_FIRST_FREE = 10
};

/* The log's extended attribute that holds the exit status ("kind num end_ms\n"); the
 * status file when the file system refuses it. */
#define FG_MON_EXIT_XATTR "user.fairgpu.exit"

/* Everything the monitor and the job need, prepared before fork. */
typedef struct fg_mon_prep {
    const char *exec_path; /* resolved program */
    char **argv;
    char **envp;
    const char *job_dir;
    const char *status_path;
    int switch_user;
    uid_t uid;
    gid_t gid;
    gid_t groups[64];
    int ngroups;
    const char *unix_user;
    const char *shell; /* when the command string runs without sh (argv = its words): run
                          /bin/sh -c SHELL if that exec fails; "" or NULL: none */
    int64_t log_limit;
    char marker[200];
    int life_w, log_fd, null_fd;
    int cg_fds[FG_MON_CG_MAX]; /* the job's cgroups (cgroup.procs, open for writing) */
    int ncg;
    int isolate;          /* 1: PID + mount namespaces, private /tmp, /proc and /dev */
    const char *devs;     /* with isolate: the job's /dev, "MAJOR MINOR NAME\n" lines */
    const char *ckpt_dir; /* the job's checkpoint directory (kept visible under /tmp) */
} fg_mon_prep_t;

/* The request: fixed header, then the strings, NUL-separated. */
typedef struct fg_mon_req {
    uint32_t len; /* bytes of strings that follow */
    int32_t switch_user, uid, gid, ngroups, argc, envc, ncg, isolate;
    gid_t groups[64];
    int64_t log_limit;
} fg_mon_req_t;

/* The life record: what a monitor writes into its life pipe (one 8-byte write) once the
 * job runs: its own pid and the job's (0: the job could not be started). A zygote that
 * could not start the monitor writes {0, -errno}. */
typedef struct fg_mon_life {
    int32_t monitor, job;
} fg_mon_life_t;

/* The monitor of one launch: never returns. Called in a fresh child (of the zygote, or
 * of the agent when there is no zygote) with pp's descriptors open; touches no memory
 * but pp and its own stack. */
void fg_mon_monitor_main(const fg_mon_prep_t *pp);

/* The zygote's loop on socket `sock`: one request (fg_mon_req_t + strings; the log,
 * /dev/null, the life pipe's write end and the cgroups by SCM_RIGHTS) -> start a monitor.
 * No reply: the agent does not wait (the monitor's life record tells it the pids).
 * Reaps finished monitors. Exits when the socket closes. Never returns. */
void fg_mon_zygote_main(int sock);

/* Descriptors per request: log, /dev/null, life pipe, cgroups. */
#define FG_MON_MAXFDS (3 + FG_MON_CG_MAX)

/* Closes every descriptor >= first. */
void fg_mon_close_from(int first);
/* Reads/writes exactly n bytes (EINTR retried); 0 or -1. */
int fg_mon_read_full(int fd, void *buf, size_t n);
int fg_mon_write_full(int fd, const void *buf, size_t n);
/* Sends n bytes with up to FG_MON_MAXFDS descriptors attached; 0 or -1. */
int fg_mon_send_fds(int sock, const void *buf, size_t n, const int *fds, int nfds);
/* Receives exactly n bytes; descriptors that came with them go to fds (-1 if none). */
int fg_mon_recv_fds(int sock, void *buf, size_t n, int *fds, int maxfds);

#endif
