/*
 * test_agent_devfilter.c - the cgroup v2 eBPF device filter: the emitted program, and
 * (as root, on a kernel that loads device programs) a real cgroup v2 directory where a
 * process admitted only some devices opens those and gets EPERM for the others, even
 * for a node made elsewhere on disk.
 */
#include "agent/devfilter.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

/* The banner's worked example: {1:3, 136:*} is 16 instructions in that order. */
static void test_emit_example(void **state)
{
    (void)state;
    const fg_dev_t devs[] = {{1, 3, "null"}, {136, FG_DEVFILTER_ANY, "pts"}};
    struct bpf_insn p[64];
    assert_int_equal(fg_devfilter_emit(devs, 2, p, 64), 16);
    assert_int_equal(p[0].code, BPF_LDX | BPF_W | BPF_MEM);
    assert_int_equal(p[0].off, offsetof(struct bpf_cgroup_dev_ctx, access_type));
    assert_int_equal(p[2].code, BPF_JMP | BPF_JEQ | BPF_K);
    assert_int_equal(p[2].imm, BPF_DEVCG_DEV_CHAR);
    assert_int_equal(p[5].off, offsetof(struct bpf_cgroup_dev_ctx, major));
    assert_int_equal(p[6].off, offsetof(struct bpf_cgroup_dev_ctx, minor));
    /* 1:3: major test skips 3 to the next block, minor test 2, then admit. */
    assert_int_equal(p[7].code, BPF_JMP | BPF_JNE | BPF_K);
    assert_int_equal(p[7].dst_reg, BPF_REG_3);
    assert_int_equal(p[7].imm, 1);
    assert_int_equal(p[7].off, 3);
    assert_int_equal(p[8].dst_reg, BPF_REG_4);
    assert_int_equal(p[8].imm, 3);
    assert_int_equal(p[8].off, 2);
    assert_int_equal(p[9].imm, 1);
    assert_int_equal(p[10].code, BPF_JMP | BPF_EXIT);
    /* 136:*: only the major. */
    assert_int_equal(p[11].imm, 136);
    assert_int_equal(p[11].off, 2);
    assert_int_equal(p[12].imm, 1);
    /* deny at the end */
    assert_int_equal(p[14].code, BPF_ALU64 | BPF_MOV | BPF_K);
    assert_int_equal(p[14].imm, 0);
    assert_int_equal(p[15].code, BPF_JMP | BPF_EXIT);
    /* too little room: refused */
    assert_int_equal(fg_devfilter_emit(devs, 2, p, 15), -1);
}

/* A cgroup v2 mount point from /proc/self/mountinfo into out; 0 or -1. */
static int v2_mount(char *out, size_t len)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -1;
    char line[1024];
    int rc = -1;
    while (rc != 0 && fgets(line, sizeof line, f)) {
        char mnt[512];
        const char *sep = strstr(line, " - cgroup2 ");
        if (sep && sscanf(line, "%*s %*s %*s %*s %511s", mnt) == 1) {
            snprintf(out, len, "%s", mnt);
            rc = 0;
        }
    }
    fclose(f);
    return rc;
}

static char g_cg[600];  /* the test's cgroup v2 directory */
static char g_tmp[256]; /* a temporary directory for device nodes */
static char g_skip[300];

/* Makes the test cgroup when root can load device programs; else says why not. */
static int setup(void **state)
{
    (void)state;
    char mnt[512], err[300];
    g_skip[0] = g_cg[0] = '\0';
    snprintf(g_tmp, sizeof g_tmp, "/tmp/fg-test-devfilter-XXXXXX");
    if (!mkdtemp(g_tmp))
        return -1;
    if (geteuid() != 0)
        snprintf(g_skip, sizeof g_skip, "not root");
    else if (v2_mount(mnt, sizeof mnt) != 0)
        snprintf(g_skip, sizeof g_skip, "no cgroup v2 mount");
    else if (fg_devfilter_probe(err, sizeof err) != 0) {
        if (errno != EPERM && errno != ENOSYS) { /* a program the kernel rejects: ours */
            print_message("%s\n", err);
            return -1;
        }
        snprintf(g_skip, sizeof g_skip, "%s", err);
    }
    if (g_skip[0])
        return 0;
    snprintf(g_cg, sizeof g_cg, "%s/fg-test-devfilter-%ld", mnt, (long)getpid());
    return mkdir(g_cg, 0755);
}

static int teardown(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    int rc = system(cmd) == 0 ? 0 : -1;
    /* the child has been reaped, but its cgroup may count it for a moment longer */
    int busy = g_cg[0] && rmdir(g_cg) != 0;
    for (int i = 0; busy && errno == EBUSY && i < 100; i++) {
        usleep(20000);
        busy = rmdir(g_cg) != 0;
    }
    g_cg[0] = '\0';
    return busy ? -1 : rc;
}

/* Skips the test (saying why) when setup found no way to run it. */
#define NEED_BPF()                                                                                 \
    do {                                                                                           \
        if (g_skip[0]) {                                                                           \
            print_message("skipped: %s\n", g_skip);                                                \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/*
 * A child joins the test cgroup and opens paths[0..n) for reading; err[i] gets 0 when
 * path i opened, else its errno. 0, or -1 when the child could not join.
 */
static int open_in_cgroup(const char *const *paths, int n, int *errs)
{
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        char procs[620];
        snprintf(procs, sizeof procs, "%s/cgroup.procs", g_cg);
        int fd = open(procs, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0", 1) != 1)
            _exit(2);
        close(fd);
        for (int i = 0; i < n; i++) {
            int e = 0, o = open(paths[i], O_RDONLY | O_CLOEXEC | O_NONBLOCK);
            if (o < 0)
                e = errno;
            else
                close(o);
            if (write(pfd[1], &e, sizeof e) != (ssize_t)sizeof e)
                _exit(3);
        }
        _exit(0);
    }
    close(pfd[1]);
    int got = 0;
    for (int i = 0; i < n; i++)
        got += read(pfd[0], &errs[i], sizeof errs[i]) == (ssize_t)sizeof errs[i];
    close(pfd[0]);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 && got == n ? 0 : -1;
}

/* Admitted /dev/null (1:3) opens; /dev/zero (1:5), not in the list, gives EPERM. */
static void test_null_not_zero(void **state)
{
    (void)state;
    NEED_BPF();
    const fg_dev_t devs[] = {{1, 3, "null"}};
    char err[300] = "";
    int rc = fg_devfilter_attach(g_cg, devs, 1, err, sizeof err);
    if (rc != 0)
        print_message("%s\n", err);
    assert_int_equal(rc, 0);
    const char *const paths[] = {"/dev/null", "/dev/zero"};
    int errs[2];
    assert_int_equal(open_in_cgroup(paths, 2, errs), 0);
    assert_int_equal(errs[0], 0);
    assert_int_equal(errs[1], EPERM);
    /* outside the cgroup both still open */
    int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    close(fd);
}

/* 1 when a character driver has major in /proc/devices. */
static int char_major_registered(unsigned major)
{
    FILE *f = fopen("/proc/devices", "re");
    if (!f)
        return 0;
    char line[128];
    int in_char = 0, found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, "Character", 9) == 0)
            in_char = 1;
        else if (strncmp(line, "Block", 5) == 0)
            in_char = 0;
        else if (in_char && strtoul(line, NULL, 10) == major)
            found = 1;
    }
    fclose(f);
    return found;
}

/* A GPU node made with mknod outside /dev: another GPU's (195:1) gives EPERM, the job's
 * own (195:0) reaches the kernel's open (ENXIO when no driver is loaded). */
static void test_gpu_nodes(void **state)
{
    (void)state;
    NEED_BPF();
    char own[300], other[300];
    snprintf(own, sizeof own, "%s/nvidia0", g_tmp);
    snprintf(other, sizeof other, "%s/nvidia1", g_tmp);
    assert_int_equal(mknod(own, S_IFCHR | 0666, makedev(195, 0)), 0);
    assert_int_equal(mknod(other, S_IFCHR | 0666, makedev(195, 1)), 0);
    const fg_dev_t devs[] = {{1, 3, "null"}, {195, 0, "nvidia0"}};
    char err[300] = "";
    int rc = fg_devfilter_attach(g_cg, devs, 2, err, sizeof err);
    if (rc != 0)
        print_message("%s\n", err);
    assert_int_equal(rc, 0);
    const char *const paths[] = {own, other};
    int errs[2];
    assert_int_equal(open_in_cgroup(paths, 2, errs), 0);
    assert_int_not_equal(errs[0], EPERM);
    if (!char_major_registered(195))
        assert_int_equal(errs[0], ENXIO);
    assert_int_equal(errs[1], EPERM);
}

/* A wildcard minor admits every minor of its major; block devices stay denied. */
static void test_any_minor(void **state)
{
    (void)state;
    NEED_BPF();
    char blk[300];
    snprintf(blk, sizeof blk, "%s/blk", g_tmp);
    assert_int_equal(mknod(blk, S_IFBLK | 0600, makedev(1, 3)), 0); /* block 1:3 (ram) */
    const fg_dev_t devs[] = {{1, FG_DEVFILTER_ANY, "mem"}};
    char err[300] = "";
    assert_int_equal(fg_devfilter_attach(g_cg, devs, 1, err, sizeof err), 0);
    const char *const paths[] = {"/dev/null", "/dev/zero", blk, "/dev/tty"};
    int errs[4];
    assert_int_equal(open_in_cgroup(paths, 4, errs), 0);
    assert_int_equal(errs[0], 0);
    assert_int_equal(errs[1], 0);
    assert_int_equal(errs[2], EPERM);
    assert_int_equal(errs[3], EPERM);
}

/* Attaching to a directory that is not a cgroup fails with a clear error. */
static void test_attach_not_cgroup(void **state)
{
    (void)state;
    NEED_BPF();
    const fg_dev_t devs[] = {{1, 3, "null"}};
    char err[300] = "";
    assert_int_equal(fg_devfilter_attach(g_tmp, devs, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot attach the eBPF program"));
    assert_int_equal(fg_devfilter_attach("/nonexistent-dir", devs, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot open /nonexistent-dir"));
}

int main(void)
{
    /* Each test gets its own cgroup: programs attached with BPF_F_ALLOW_MULTI add up. */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_emit_example),
        cmocka_unit_test_setup_teardown(test_null_not_zero, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gpu_nodes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_any_minor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_attach_not_cgroup, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
