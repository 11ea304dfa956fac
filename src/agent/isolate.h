/*
 * isolate.h - what the agent knows about isolating jobs on this host, found once at
 * start: whether jobs can get their own PID and mount namespaces (private /tmp, /proc
 * and /dev: see monitor.c), which cgroups limit them (cgroup.h), and which device nodes
 * a job may see (the standard ones, the GPU driver's shared control nodes, and its own
 * GPUs only).
 */
#ifndef FG_AGENT_ISOLATE_H
#define FG_AGENT_ISOLATE_H

#include "agent/cgroup.h"

#include <stddef.h>
#include <stdint.h>

/* The NVIDIA character device major of /dev/nvidiaN (minor N) and /dev/nvidiactl. */
#define FG_NVIDIA_MAJOR   195
#define FG_NVIDIA_CTL_MIN 255
/* At most this many devices in a job's /dev (standard + control + its GPUs). */
#define FG_ISO_MAXDEVS 96

typedef struct fg_iso {
    int ns;            /* 1: jobs run in their own PID + mount namespaces */
    int required;      /* 1: fully isolated node; a job that cannot be isolated fails */
    fg_cg_host_t cg;   /* cg.version FG_CG_NONE: no cgroups */
    int64_t pids_max;  /* per-job process limit (<= 0: none) */
    int gpu_nodes;     /* 1: each GPU has a device node (major 195, minor from the backend) */
    char ctl_dir[256]; /* where the driver's shared control nodes are ("" if none) */
    char summary[300]; /* what is applied, or what is missing (register's "isolation") */
} fg_iso_t;

/* Checks that this process may give a child new PID and mount namespaces and mount
 * /proc, /tmp and /dev there (in a throw-away child). 0, or -1 with err set. */
int fg_iso_probe_ns(char *err, size_t errlen);

/* Creates the fake GPUs' device nodes in dir: nvidia0..nvidia(n-1) (major 195, minor =
 * index) and nvidiactl (195:255); opening one gives ENXIO (no driver). 0 or -1. */
int fg_iso_make_fake_devs(const char *dir, int n, char *err, size_t errlen);

/* The devices of a job with GPUs of the given minors: the standard ones, the control
 * nodes that exist in iso->ctl_dir now (nvidiactl, nvidia-uvm, nvidia-uvm-tools,
 * nvidia-modeset: the driver may make some only when first used) and "nvidiaN" per GPU
 * (when the GPUs have nodes). Returns how many (<= max). */
int fg_iso_job_devs(const fg_iso_t *iso, const int *minors, int n, fg_dev_t *out, int max);

#endif
