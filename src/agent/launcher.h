/*
 * launcher.h - runs one rank of one job attempt as a process tree the agent can watch,
 * stop and, after an agent restart, find again.
 *
 * Shape: the agent forks a small *monitor* process (no exec; async-signal-safe code only)
 * in its own session. The monitor forks the job, which becomes the leader of a new
 * session and process group (so one kill(-pgid) reaches all of its processes), joins the
 * job's cgroups when there are some, switches to the job's Unix user when asked, and execs
 * the command. Isolated (fg_launch_t.iso->ns), that first process is instead pid 1 of
 * the job's own PID and mount namespaces, which runs the command as its child (see
 * monitor.c). The monitor copies the job's stdout+stderr (one pipe, so in order) into the
 * rank's log file, up to the log limit followed by a truncation marker; when the job's
 * main process ends it kills what is left of the group, records the exit status (the
 * log's attribute FG_MON_EXIT_XATTR, else the status file) and exits. The agent learns
 * the end through the "life" pipe (EOF when the monitor exits), then reads the status. The monitor
 * survives an agent restart, which keeps jobs running across agent upgrades; the restarted agent
 * adopts them from its state files.
 *
 * Thread safety: fg_launch_start may be called from any thread; launches are serialised
 * internally (one fork at a time).
 */
#ifndef FG_AGENT_LAUNCHER_H
#define FG_AGENT_LAUNCHER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fg_iso;

/* The PATH every job starts with (its own env may set another). */
#define FG_JOB_PATH "/usr/local/bin:/usr/bin:/bin"

typedef struct fg_launch {
    const char *job_id; /* [A-Za-z0-9_.-]{1,64} */
    int attempt;
    int rank;
    int num_nodes;
    const char *master_addr;
    int master_port;
    char *const *argv;                /* NULL-terminated argv, executed directly (PATH lookup) */
    const char *shell;                /* used when argv is NULL: /bin/sh -c SHELL (its
                                         words run directly when that is the same) */
    char *const *env;                 /* extra "KEY=VALUE" strings, NULL-terminated; may be NULL */
    const char *cuda_visible_devices; /* value of CUDA_VISIBLE_DEVICES ("" = none) */
    const char *gpu_indices;          /* FAIRGPU_GPU_INDICES, e.g. "0,1" */
    const char *model;                /* NULL: FAIRGPU_MODEL not set */
    const char *dataset;
    const char *fake_util_file; /* NULL: FAIRGPU_FAKE_UTIL_FILE not set (real GPUs) */
    const char *run_dir;        /* agent-private dir (log, status); made 0700 */
    const char *run_name;       /* NULL: run_dir is this rank's own (output.log, exit);
                                   else the files are run_dir/NAME.log and NAME.exit */
    const char *job_dir;        /* the job's working directory; made 0700, owned by the user */
    const char *checkpoint_dir; /* FAIRGPU_CHECKPOINT_DIR; made 0700, owned by the user */
    const char *unix_user;      /* the job's account (never root nor the agent's own: refused);
                                   NULL: the agent's own user, only with run_as_agent */
    int run_as_agent;           /* 1: no unix_user is fine (agent not root, or switching off) */
    const struct fg_iso *iso;   /* how to isolate the job (isolate.h); NULL: not at all */
    const char *cgroup_name;    /* NULL: no cgroup; else the job's cgroup name (cgroup.h) */
    int64_t cpus;               /* CPU quota in CPUs; <= 0: no limit */
    int64_t memory_mb;          /* memory limit; <= 0: no limit */
    const int *gpu_minors;      /* device minors of the job's GPUs (its /dev/nvidiaN) */
    int ngpu_minors;
    int64_t log_limit_bytes; /* <= 0: default 64 MiB */
    int async_pgid;          /* 1: return before the job's pid is known (see below) */
    const char *spare_dir;   /* with run_name: recycled logs come from here (see
                                fg_file_recycle); NULL: a new file per rank */
} fg_launch_t;

typedef struct fg_proc {
    pid_t monitor;  /* the monitor process */
    pid_t pgid;     /* the job's process group (= its main pid); 0 if it never started */
    int pgid_known; /* 0 until the monitor said the job's pid (async_pgid launches) */
    int life_fd;    /* read end of the life pipe; -1 when adopted after a restart */
    int child;      /* 1: the monitor is our child (waitpid it) */
    char log_path[512];
    char status_path[512];
    char cgroup[1024];  /* the job's cgroup directories, ':'-separated; "" if none */
    char warnings[512]; /* what could not be applied, "; "-separated; "" if none */
    int launch_err;     /* errno: the zygote could not start the monitor; 0: none */
    int setup_failed;   /* fg_launch_start failed: the job's Unix identity was refused */
} fg_proc_t;

typedef struct fg_exit {
    int code;   /* exit status 0..255, or -1 */
    int signal; /* terminating signal, or 0 */
    int64_t end_ms;
    char error[160];  /* "" or why the job could not run at all, or that it ran out of
                         memory (killed by the OOM killer: the status says how it ended) */
    int setup_failed; /* 1: its Unix identity could not be set up (it never ran) */
} fg_exit_t;

#define FG_LOG_LIMIT_DEFAULT (64LL * 1024 * 1024)

/*
 * Starts the launcher's zygote, a single-threaded helper that forks the monitors (cheaper
 * and safer than forking a multi-threaded agent). Call it early, before creating
 * threads; fg_launch_start calls it lazily otherwise. 0 or -1 (then monitors are forked
 * from the caller).
 */
int fg_launcher_init(void);
/* Stops the zygote (running monitors and jobs are not affected). */
void fg_launcher_shutdown(void);
/* Looks up Unix account `name`: uid, primary gid and up to *ngroups supplementary groups
 * (groups/ngroups may be NULL). Answers are reused for 2 s (bursts of launches of one
 * user). 0, or -1 when there is no such account. Thread-safe. */
int fg_user_lookup(const char *name, uid_t *uid, gid_t *gid, gid_t *groups, int *ngroups);

/*
 * Recycling of a rank's files (its log, its state file): fg_file_recycle(path) empties
 * the file and moves it to spare_dir (as KIND.PID.N), remembering it;
 * fg_file_reuse(path) moves such a file of the same kind back as path (0), or finds
 * none (-1): no inode is freed or allocated per rank (see launcher.c). spare_dir must be
 * on the file system of path; NULL: plain unlink / nothing to reuse.
 * fg_file_pool_scan(spare_dir) takes in the files a previous agent process left there.
 * The pool is bounded (files beyond it are deleted). Thread-safe.
 */
void fg_file_recycle(const char *path, const char *spare_dir, const char *kind);
int fg_file_reuse(const char *path, const char *spare_dir, const char *kind);
void fg_file_pool_scan(const char *spare_dir);

/* 1 when the command string `cmd` (fg_launch_t.shell) runs as its blank-separated words
 * without /bin/sh (no shell syntax, no sh built-in first: see launcher.c), 0 when sh
 * runs it. Either way the job behaves as under /bin/sh -c: a direct exec that fails runs
 * sh after all. */
int fg_shell_is_plain(const char *cmd);

/*
 * Starts the rank described by l. On success returns 0 with *p filled (the caller owns
 * p->life_fd and closes it through fg_proc_reap). On failure returns -1 with err set and
 * nothing left running (p->setup_failed says when the job's Unix identity was refused).
 * Warnings (a chown refused, or on an unisolated node a cgroup refused) go to
 * p->warnings and to the agent log; the job still runs. On an isolated node
 * (iso->required) a job whose cgroups cannot be made does not start. A user switch that
 * fails in the job's process ends the rank with fg_exit_t.setup_failed before the job's
 * command runs.
 */
int fg_launch_start(const fg_launch_t *l, fg_proc_t *p, char *err, size_t errlen);

/*
 * With async_pgid, fg_launch_start returns as soon as the launch is handed over (to the
 * zygote, or a forked monitor); the monitor's and the job's pids then arrive on life_fd
 * (readable). Reads them, waiting at most timeout_ms (0: do not wait). Returns 1 when
 * pgid is known (pgid 0: the job could not start), 0 if not yet.
 */
int fg_proc_poll_pgid(fg_proc_t *p, int timeout_ms);

/* Sends sig to the job's whole process group; with SIGKILL also kills its cgroup. */
void fg_proc_signal(const fg_proc_t *p, int sig);

/* 1 while any process of the job's group still exists. */
int fg_proc_group_alive(const fg_proc_t *p);

/* 1 while the monitor has not finished (no exit status recorded yet). */
int fg_proc_running(const fg_proc_t *p);

/*
 * Collects the end of a rank whose monitor finished (life pipe at EOF, or exit status
 * recorded): reaps the monitor when it is our child, reads the exit status into *ex,
 * closes life_fd and removes the cgroup. Returns 0, or -1 if the status is unknown
 * (monitor vanished: *ex says so in error).
 */
int fg_proc_reap(fg_proc_t *p, fg_exit_t *ex);

/* Writes the FAIRGPU_PREEMPT notice file into dir (before a preemption signal). */
int fg_write_preempt_notice(const char *dir, const char *why);

/* Creates dir and its parents (mode for the last component, 0711 for parents). */
int fg_mkdir_p(const char *dir, mode_t mode);

/* snprintf that reports truncation: 0, or -1 if out was too small (out is still
 * NUL-terminated). */
int fg_fmt(char *out, size_t outlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Milliseconds since the Unix epoch. */
int64_t fg_now_ms(void);

#endif
