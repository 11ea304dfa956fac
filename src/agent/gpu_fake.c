/*
 * gpu_fake.c - N fake GPUs for machines without GPUs, tests and benchmarks. Everything is
 * deterministic: uuid "GPU-fake-<node>-<i>", 80 GiB each, utilization that follows a
 * fixed pattern per GPU and sample number.
 */
#include "agent/gpu.h"
#include "common/xalloc.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct fake {
    char node[72];
    char type[32];
    int n;
    unsigned samples;
} fake_t;

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
    out->memory_mb = 81920;
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
    return 0;
}

static void fake_close(void *ctx)
{
    free(ctx);
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
