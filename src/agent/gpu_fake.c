/*
 * gpu_fake.c - N fake GPUs for machines without GPUs, tests and benchmarks: uuid
 * "GPU-fake-<node>-<i>", 80 GiB each. A free GPU samples 0 % and 0 MiB; a GPU bound to a
 * running job (bind) samples what the job's knob says, read at every sample from
 * JOB_DIR/FAIRGPU_FAKE_UTIL, and 100 % and 1 GiB without a knob.
 *
 * Example: a job writes "0" to $FAIRGPU_FAKE_UTIL_FILE: its GPUs sample 0 % and 1024 MiB
 * from the next heartbeat on, and the controller sees them idle; "80 4096" later makes
 * them 80 % and 4 GiB. The job owns the directory, so the file is read as hostile: no
 * symbolic link on the way or at the end (safefs.h), a regular file only (a FIFO would
 * block the heartbeat), at most 63 bytes.
 */
#include "agent/gpu.h"
#include "agent/safefs.h"
#include "common/xalloc.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct fake {
    char node[72];
    char type[32];
    int n;
    unsigned samples;
    char *job_dir[FG_GPU_MAX]; /* the directory of the job GPU i serves (owned), or NULL */
} fake_t;

#define FAKE_MEMORY_MB 81920

int fg_gpu_fake_parse(const char *text, int64_t max_mb, int *util, int64_t *mem_mb)
{
    const char *p = text;
    char *end;
    while (*p == ' ' || *p == '\t')
        p++;
    if (!isdigit((unsigned char)*p))
        return -1;
    errno = 0;
    long u = strtol(p, &end, 10);
    if (errno || u < 0 || u > 100)
        return -1;
    p = end;
    while (*p == ' ' || *p == '\t')
        p++;
    long long m = FG_GPU_FAKE_BUSY_MB;
    if (isdigit((unsigned char)*p)) {
        errno = 0;
        m = strtoll(p, &end, 10);
        if (errno || m < 0 || m > max_mb)
            return -1;
        p = end;
    }
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    if (*p)
        return -1;
    *util = (int)u;
    *mem_mb = m > max_mb ? max_mb : m;
    return 0;
}

/* Reads the knob of the job in dir into *util, *mem_mb: 0, or -1 when there is none
 * usable (absent, a link, not a regular file, malformed). */
static int read_knob(const char *dir, int *util, int64_t *mem_mb)
{
    char path[PATH_MAX], leaf[256], text[64];
    if (snprintf(path, sizeof path, "%s/%s", dir, FG_GPU_FAKE_UTIL_FILE) >= (int)sizeof path)
        return -1;
    int pfd = fg_sfs_open_parent(path, 0, leaf, sizeof leaf);
    if (pfd < 0)
        return -1;
    int fd = openat(pfd, leaf, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    close(pfd);
    if (fd < 0)
        return -1;
    struct stat st;
    ssize_t n = -1;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
        n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n < 0)
        return -1;
    text[n] = '\0';
    return fg_gpu_fake_parse(text, FAKE_MEMORY_MB, util, mem_mb);
}

static int fake_count(void *ctx)
{
    return ((fake_t *)ctx)->n;
}

static int fake_info(void *ctx, int i, fg_gpu_info_t *out)
{
    fake_t *f = ctx;
    memset(out, 0, sizeof *out);
    if (i < 0 || i >= f->n)
        return -1;
    out->index = i;
    out->minor = i;
    snprintf(out->uuid, sizeof out->uuid, "GPU-fake-%s-%d", f->node, i);
    snprintf(out->name, sizeof out->name, "Fake %s", f->type);
    snprintf(out->type, sizeof out->type, "%s", f->type);
    out->memory_mb = FAKE_MEMORY_MB;
    return 0;
}

static int fake_sample(void *ctx, int i, fg_gpu_sample_t *out)
{
    fake_t *f = ctx;
    memset(out, 0, sizeof *out);
    if (i < 0 || i >= f->n)
        return -1;
    f->samples++;
    out->ok = 1;
    out->util_pct = 0;
    out->mem_used_mb = 0;
    if (f->job_dir[i] && read_knob(f->job_dir[i], &out->util_pct, &out->mem_used_mb) != 0) {
        out->util_pct = FG_GPU_FAKE_BUSY_PCT;
        out->mem_used_mb = FG_GPU_FAKE_BUSY_MB;
    }
    return 0;
}

static void fake_bind(void *ctx, int i, const char *job_dir)
{
    fake_t *f = ctx;
    if (i < 0 || i >= f->n)
        return;
    if (job_dir && f->job_dir[i] && !strcmp(job_dir, f->job_dir[i]))
        return;
    free(f->job_dir[i]);
    f->job_dir[i] = job_dir ? fg_xstrdup(job_dir) : NULL;
}

static void fake_close(void *ctx)
{
    fake_t *f = ctx;
    for (int i = 0; i < f->n; i++)
        free(f->job_dir[i]);
    free(f);
}

int fg_gpu_fake_open(const char *node, int n, const char *type, fg_gpu_backend_t *out)
{
    if (n < 0 || n > FG_GPU_MAX)
        return -1;
    fake_t *f = fg_xcalloc(1, sizeof *f);
    snprintf(f->node, sizeof f->node, "%s", node);
    snprintf(f->type, sizeof f->type, "%s", type && *type ? type : "fake");
    f->n = n;
    out->name = "fake";
    out->count = fake_count;
    out->info = fake_info;
    out->sample = fake_sample;
    out->bind = fake_bind;
    out->close = fake_close;
    out->ctx = f;
    return 0;
}

void fg_gpu_type_from_name(const char *name, char *out, size_t outlen)
{
    static const char *const skip[] = {"nvidia", "tesla", "geforce", "quadro", NULL};
    if (!outlen)
        return;
    out[0] = '\0';
    const char *p = name;
    while (*p) {
        while (*p == ' ')
            p++;
        const char *w = p;
        while (*p && *p != ' ')
            p++;
        size_t len = (size_t)(p - w);
        if (!len)
            break;
        int skipped = 0;
        for (int k = 0; skip[k]; k++)
            if (len == strlen(skip[k]) && !strncasecmp(w, skip[k], len))
                skipped = 1;
        if (skipped)
            continue;
        size_t j = 0;
        for (size_t k = 0; k < len && w[k] != '-' && j + 1 < outlen; k++)
            if (isalnum((unsigned char)w[k]))
                out[j++] = (char)tolower((unsigned char)w[k]);
        out[j] = '\0';
        if (j)
            return;
    }
    snprintf(out, outlen, "gpu");
}
