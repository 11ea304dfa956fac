/*
 * isolate.c - the agent's start-time isolation checks and the device list of a job (see
 * isolate.h). The namespaces themselves are set up by the monitor (monitor.c).
 */
#define _GNU_SOURCE /* unshare */
#include "agent/isolate.h"
#include "agent/launcher.h"

#include <assert.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* Waits for child pid; its exit status, or -1. */
static int wait_status(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* In the probe's grandchild (pid 1 of the new namespace): the mounts a job gets. Exits
 * with 0, or 10 + the step that failed. */
static void probe_mounts(void)
{
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
        _exit(10);
    if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
        _exit(11);
    if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755") != 0)
        _exit(12);
    if (mknod("/dev/null", S_IFCHR | 0666, makedev(1, 3)) != 0)
        _exit(13);
    _exit(0);
}

int fg_iso_probe_ns(char *err, size_t errlen)
{
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        if (unshare(CLONE_NEWNS | CLONE_NEWPID) != 0)
            _exit(errno == EPERM ? 2 : 3);
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
            _exit(4);
        pid_t g = fork();
        if (g == 0)
            probe_mounts();
        int r = g < 0 ? 5 : wait_status(g);
        _exit(r < 0 ? 6 : r);
    }
    int rc = wait_status(pid);
    static const char *const why[] = {
        [2] = "unshare(CLONE_NEWPID|CLONE_NEWNS) not permitted",
        [3] = "unshare(CLONE_NEWPID|CLONE_NEWNS) failed",
        [4] = "cannot make the mount namespace private",
        [5] = "fork in a new PID namespace failed",
        [6] = "the namespace probe failed",
        [10] = "cannot mount /proc in a new PID namespace",
        [11] = "cannot mount a private /tmp",
        [12] = "cannot mount a private /dev",
        [13] = "cannot create device nodes in a private /dev",
    };
    if (rc == 0)
        return 0;
    snprintf(err, errlen, "%s",
             rc > 0 && rc < (int)(sizeof why / sizeof why[0]) && why[rc]
                 ? why[rc]
                 : "namespace probe failed");
    return -1;
}

/* Makes dir/name a character device major:minor (0666), replacing what is there. */
static int make_node(const char *dir, const char *name, unsigned major, unsigned minor)
{
    char path[600];
    if (fg_fmt(path, sizeof path, "%s/%s", dir, name) != 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(major, minor))
            return chmod(path, 0666);
        if (unlink(path) != 0)
            return -1;
    }
    if (mknod(path, S_IFCHR | 0666, makedev(major, minor)) != 0)
        return -1;
    return chmod(path, 0666); /* mknod's mode went through the umask */
}

int fg_iso_make_fake_devs(const char *dir, int n, char *err, size_t errlen)
{
    if (fg_mkdir_p(dir, 0755) != 0) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    for (int i = 0; i <= n; i++) {
        char name[32];
        snprintf(name, sizeof name, i < n ? "nvidia%d" : "nvidiactl", i);
        if (make_node(dir, name, FG_NVIDIA_MAJOR, i < n ? (unsigned)i : FG_NVIDIA_CTL_MIN) != 0) {
            snprintf(err, errlen, "cannot create the device node %s/%s: %s", dir, name,
                     strerror(errno));
            return -1;
        }
    }
    return 0;
}

/* Appends the control nodes found in dir to out[*k..max). */
static void scan_ctl(const char *dir, fg_dev_t *out, int *k, int max)
{
    static const char *const names[] = {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools",
                                        "nvidia-modeset"};
    for (size_t i = 0; dir[0] && i < sizeof names / sizeof names[0] && *k < max; i++) {
        char path[600];
        struct stat st;
        if (fg_fmt(path, sizeof path, "%s/%s", dir, names[i]) != 0 || stat(path, &st) != 0 ||
            !S_ISCHR(st.st_mode))
            continue;
        fg_dev_t *d = &out[(*k)++];
        d->major = major(st.st_rdev);
        d->minor = minor(st.st_rdev);
        snprintf(d->name, sizeof d->name, "%s", names[i]);
    }
}

int fg_iso_job_devs(const fg_iso_t *iso, const int *minors, int n, fg_dev_t *out, int max)
{
    static const fg_dev_t std_devs[] = {
        {1, 3, "null"},    {1, 5, "zero"}, {1, 7, "full"}, {1, 8, "random"},
        {1, 9, "urandom"}, {5, 0, "tty"},  {5, 2, "ptmx"},
    };
    assert(max >= (int)(sizeof std_devs / sizeof std_devs[0]));
    int k = 0;
    for (size_t i = 0; i < sizeof std_devs / sizeof std_devs[0]; i++)
        out[k++] = std_devs[i];
    scan_ctl(iso->ctl_dir, out, &k, max);
    for (int i = 0; iso->gpu_nodes && i < n && k < max; i++) {
        out[k].major = FG_NVIDIA_MAJOR;
        out[k].minor = (unsigned)minors[i];
        snprintf(out[k].name, sizeof out[k].name, "nvidia%d", minors[i]);
        k++;
    }
    return k;
}
