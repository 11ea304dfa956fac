/*
 * cgroup.h - per-job control groups: CPU quota, memory limit, process count limit and a
 * device allow list (v1 devices controller, v2 eBPF device program), on either a pure cgroup v2
 * host (one hierarchy) or a cgroup v1 / hybrid host (one hierarchy per controller). A job's cgroups
 * are named ROOT/fairgpu/NAME (v2) or ROOT/CONTROLLER/fairgpu/NAME (v1), and remembered as one
 * string, the directories separated by ':' (so the cgroup root may not contain ':').
 */
#ifndef FG_AGENT_CGROUP_H
#define FG_AGENT_CGROUP_H

#include <stddef.h>
#include <stdint.h>

enum { FG_CG_NONE = 0, FG_CG_V1 = 1, FG_CG_V2 = 2 };

/* At most this many cgroup directories per job (v1: cpu, memory, pids, devices). */
#define FG_CG_MAXDIRS 4

/* A character device a job may use, and its name in the job's private /dev. */
typedef struct fg_dev {
    unsigned major, minor;
    char name[48]; /* e.g. "null", "nvidia0"; no '/' */
} fg_dev_t;

/* What the host offers, found once at agent start (fg_cg_probe). */
typedef struct fg_cg_host {
    int version; /* FG_CG_NONE, FG_CG_V1, FG_CG_V2 */
    /* v2: [0] is ROOT/fairgpu; v1: the fairgpu parents of cpu, memory, pids, devices in
     * that order ("" where the controller is missing). */
    char parent[FG_CG_MAXDIRS][300];
    int devices;       /* 1: a device allow list is applied (v1 devices, v2 eBPF) */
    int memsw;         /* v1: memory.memsw.limit_in_bytes exists (swap counted) */
    char missing[200]; /* "" when cpu, memory and pids limits all work; else what not */
} fg_cg_host_t;

/* One job's limits (<= 0: none). */
typedef struct fg_cg_limits {
    int64_t cpus;      /* CPU quota in whole CPUs */
    int64_t memory_mb; /* memory (and swap) limit */
    int64_t pids_max;  /* processes and threads */
    const fg_dev_t *devs;
    int ndevs; /* the allowed character devices (all others denied; ptys always allowed) */
} fg_cg_limits_t;

/*
 * Finds the cgroup hierarchy under root (v2 when root/cgroup.controllers exists, else
 * v1 controllers in root/cpu, root/memory, root/pids, root/devices), creates the fairgpu
 * parents and enables the controllers. Returns 0 when cpu, memory and pids limits (and on
 * v2 the eBPF device filter) can be applied, else -1 with h->missing saying what is
 * missing (h->version may still be set: partial limits).
 */
int fg_cg_probe(const char *root, fg_cg_host_t *h);

/*
 * Creates the job's cgroups h/.../name with the limits lim and opens each cgroup.procs
 * for writing ("0" written to one moves the writer in). On success returns the number of
 * descriptors put in fds[0..FG_CG_MAXDIRS) and the directories in list (':'-separated);
 * on failure -1 with err set and nothing left behind.
 */
int fg_cg_create(const fg_cg_host_t *h, const char *name, const fg_cg_limits_t *lim, int *fds,
                 char *list, size_t listlen, char *err, size_t errlen);

/* Kills every process in the cgroups of list (v2 cgroup.kill, else each pid listed). */
void fg_cg_kill(const char *list);

/* 1 when the kernel's OOM killer killed a process in the cgroups of list, else 0. */
int fg_cg_oom_killed(const char *list);

/* Removes the (empty) cgroups of list, in the background (a worker thread): returns at
 * once. */
void fg_cg_remove(const char *list);

/* Reads dir/file into buf (NUL-terminated, trailing newline removed); 0 or -1. */
int fg_cg_read(const char *dir, const char *file, char *buf, size_t len);

#endif
