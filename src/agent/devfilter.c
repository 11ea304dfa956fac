/*
 * devfilter.c - the cgroup v2 device filter (see devfilter.h), a hand-assembled eBPF
 * program loaded and attached with the raw bpf(2) system call.
 *
 * The kernel runs the program on every open or mknod of a device node by a process of
 * the cgroup (or of a cgroup below it), with r1 pointing at a struct bpf_cgroup_dev_ctx:
 *   access_type  low 16 bits the type (BPF_DEVCG_DEV_CHAR or _BLOCK), high 16 bits the
 *                access (BPF_DEVCG_ACC_READ | _WRITE | _MKNOD)
 *   major, minor the device numbers
 * It returns 1 to admit the access, 0 to deny it (the caller gets EPERM). Every access
 * to a listed character device is admitted; block devices and unlisted ones are denied.
 *
 * Worked example, devices {1:3 (null), 136:* (ptys)}:
 *    0  r2 = *(u32 *)(r1 + 0)       access_type
 *    1  r2 &= 0xffff                its device type
 *    2  if r2 == CHAR goto 5
 *    3  r0 = 0                      not a character device: deny
 *    4  exit
 *    5  r3 = *(u32 *)(r1 + 4)       major
 *    6  r4 = *(u32 *)(r1 + 8)       minor
 *    7  if r3 != 1 goto 11          device 1:3
 *    8  if r4 != 3 goto 11
 *    9  r0 = 1                      admit
 *   10  exit
 *   11  if r3 != 136 goto 14        device 136:* (no minor test)
 *   12  r0 = 1
 *   13  exit
 *   14  r0 = 0                      nothing matched: deny
 *   15  exit
 * Each device is a self-contained block whose jumps only skip to the next block, so no
 * jump offset depends on the rest of the list.
 */
#include "agent/devfilter.h"
#include "common/xalloc.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Instructions before the first device block, and after the last. */
enum { HEAD = 7, TAIL = 2 };

/* Most instructions a filter of FG_DEVFILTER_MAXDEVS devices takes. */
#define MAX_INSNS (HEAD + 4 * FG_DEVFILTER_MAXDEVS + TAIL)

/* One instruction. */
static struct bpf_insn ins(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm)
{
    struct bpf_insn i = {.code = code, .dst_reg = dst, .src_reg = src, .off = off, .imm = imm};
    return i;
}

/* dst = *(u32 *)(r1 + off) */
static struct bpf_insn ld_ctx(uint8_t dst, size_t off)
{
    return ins(BPF_LDX | BPF_W | BPF_MEM, dst, BPF_REG_1, (int16_t)off, 0);
}

/* r0 = v */
static struct bpf_insn ret_val(int32_t v)
{
    return ins(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, v);
}

/* if reg != v goto +skip */
static struct bpf_insn jne(uint8_t reg, unsigned v, int16_t skip)
{
    return ins(BPF_JMP | BPF_JNE | BPF_K, reg, 0, skip, (int32_t)v);
}

static struct bpf_insn exit_insn(void)
{
    return ins(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
}

int fg_devfilter_emit(const fg_dev_t *devs, int n, void *out, int cap)
{
    assert(n >= 0 && (n == 0 || devs));
    struct bpf_insn *p = out;
    int need = HEAD + TAIL;
    for (int d = 0; d < n; d++)
        need += devs[d].minor == FG_DEVFILTER_ANY ? 3 : 4;
    if (need > cap)
        return -1;
    int k = 0;
    p[k++] = ld_ctx(BPF_REG_2, offsetof(struct bpf_cgroup_dev_ctx, access_type));
    p[k++] = ins(BPF_ALU64 | BPF_AND | BPF_K, BPF_REG_2, 0, 0, 0xffff);
    p[k++] = ins(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_2, 0, 2, BPF_DEVCG_DEV_CHAR);
    p[k++] = ret_val(0);
    p[k++] = exit_insn();
    p[k++] = ld_ctx(BPF_REG_3, offsetof(struct bpf_cgroup_dev_ctx, major));
    p[k++] = ld_ctx(BPF_REG_4, offsetof(struct bpf_cgroup_dev_ctx, minor));
    assert(k == HEAD);
    for (int d = 0; d < n; d++) {
        /* Device numbers fit in 32 bits and the kernel compares the immediate
         * sign-extended: keep them below 2^31 (majors are 12 bits, minors 20). */
        assert(devs[d].major < 0x80000000u);
        if (devs[d].minor == FG_DEVFILTER_ANY) {
            p[k++] = jne(BPF_REG_3, devs[d].major, 2);
        } else {
            assert(devs[d].minor < 0x80000000u);
            p[k++] = jne(BPF_REG_3, devs[d].major, 3);
            p[k++] = jne(BPF_REG_4, devs[d].minor, 2);
        }
        p[k++] = ret_val(1);
        p[k++] = exit_insn();
    }
    p[k++] = ret_val(0);
    p[k++] = exit_insn();
    assert(k == need);
    return k;
}

/* The raw system call (glibc has no wrapper). */
static long sys_bpf(int cmd, union bpf_attr *attr)
{
    return syscall(SYS_bpf, cmd, attr, sizeof *attr);
}

/* Copies the verifier's final complaint into out: the log's last line, before the
 * "processed N insns" statistics. */
static void last_line(const char *log, char *out, size_t len)
{
    size_t n = strlen(log);
    for (;;) {
        while (n > 0 && log[n - 1] == '\n')
            n--;
        size_t s = n;
        while (s > 0 && log[s - 1] != '\n')
            s--;
        if (s == 0 || strncmp(log + s, "processed ", 10) != 0) {
            snprintf(out, len, "%.*s", (int)(n - s), log + s);
            return;
        }
        n = s;
    }
}

/* Loads the filter for devs[0..n); its descriptor, or -1 with err and errno set. */
static int load(const fg_dev_t *devs, int n, char *err, size_t errlen)
{
    if (n < 0 || n > FG_DEVFILTER_MAXDEVS) {
        snprintf(err, errlen, "device filter: %d devices (at most %d)", n, FG_DEVFILTER_MAXDEVS);
        return -1;
    }
    struct bpf_insn *insns = fg_xmalloc(MAX_INSNS * sizeof *insns);
    int cnt = fg_devfilter_emit(devs, n, insns, MAX_INSNS);
    assert(cnt > 0);
    static const char license[] = "GPL";
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
    a.insns = (uint64_t)(uintptr_t)insns;
    a.insn_cnt = (uint32_t)cnt;
    a.license = (uint64_t)(uintptr_t)license;
    int fd = (int)sys_bpf(BPF_PROG_LOAD, &a);
    if (fd < 0) {
        int e = errno;
        char *log = fg_xmalloc(65536), line[200] = "";
        log[0] = '\0';
        a.log_buf = (uint64_t)(uintptr_t)log;
        a.log_size = 65536;
        a.log_level = 1;
        if (sys_bpf(BPF_PROG_LOAD, &a) < 0)
            last_line(log, line, sizeof line); /* the same failure, now explained */
        free(log);
        snprintf(err, errlen, "device filter: cannot load the eBPF program: %s%s%s", strerror(e),
                 line[0] ? ": " : "", line);
        errno = e;
    }
    free(insns);
    return fd;
}

int fg_devfilter_attach(const char *dir, const fg_dev_t *devs, int n, char *err, size_t errlen)
{
    int prog = load(devs, n, err, errlen);
    if (prog < 0)
        return -1;
    int cg = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = -1;
    if (cg < 0) {
        snprintf(err, errlen, "device filter: cannot open %s: %s", dir, strerror(errno));
    } else {
        union bpf_attr a;
        memset(&a, 0, sizeof a);
        a.target_fd = (uint32_t)cg;
        a.attach_bpf_fd = (uint32_t)prog;
        a.attach_type = BPF_CGROUP_DEVICE;
        a.attach_flags = BPF_F_ALLOW_MULTI; /* composes with a parent's program (systemd) */
        rc = (int)sys_bpf(BPF_PROG_ATTACH, &a);
        if (rc != 0)
            snprintf(err, errlen, "device filter: cannot attach the eBPF program to %s: %s", dir,
                     strerror(errno));
        close(cg);
    }
    close(prog); /* the attachment holds the program for as long as the cgroup lives */
    return rc == 0 ? 0 : -1;
}

int fg_devfilter_probe(char *err, size_t errlen)
{
    int fd = load(NULL, 0, err, errlen);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}
