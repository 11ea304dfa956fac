/*
 * devfilter.h - the cgroup v2 device filter: an eBPF program of type
 * BPF_PROG_TYPE_CGROUP_DEVICE attached to a job's cgroup that admits only the job's
 * character devices (any access: read, write, mknod) and denies every other device.
 */
#ifndef FG_AGENT_DEVFILTER_H
#define FG_AGENT_DEVFILTER_H

#include "agent/cgroup.h"

#include <limits.h>
#include <stddef.h>

/* A minor of FG_DEVFILTER_ANY admits every minor of that major (e.g. the ptys, 136). */
#define FG_DEVFILTER_ANY UINT_MAX

/* At most this many devices in one filter. */
#define FG_DEVFILTER_MAXDEVS 256

/*
 * Writes the program admitting the character devices devs[0..n) into insns (room for
 * cap instructions, void * to keep <linux/bpf.h> out of this header). Returns the number
 * of instructions, or -1 when they do not fit.
 */
int fg_devfilter_emit(const fg_dev_t *devs, int n, void *insns, int cap);

/*
 * Loads the program for devs[0..n) and attaches it to the cgroup v2 directory dir
 * (BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI); the program's descriptor is closed, the
 * attachment keeps it alive with the cgroup. 0, or -1 with err set (the verifier's
 * first complaint when the load fails).
 */
int fg_devfilter_attach(const char *dir, const fg_dev_t *devs, int n, char *err, size_t errlen);

/* 0 when this kernel loads device programs for us, else -1 with err saying why (errno
 * EPERM or ENOSYS: not allowed here or not built in). */
int fg_devfilter_probe(char *err, size_t errlen);

#endif
