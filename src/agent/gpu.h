/*
 * gpu.h - GPU discovery and sampling behind a small function table.
 *
 * Two backends: NVML (gpu_nvml.c, libnvidia-ml.so.1 loaded with dlopen, nothing needed at
 * build time) and a fake one (gpu_fake.c, N deterministic GPUs for machines without GPUs,
 * tests and benchmarks). The agent opens one backend per node and asks it for the GPU
 * list at registration and for samples before every heartbeat.
 */
#ifndef FG_AGENT_GPU_H
#define FG_AGENT_GPU_H

#include <stddef.h>
#include <stdint.h>

#define FG_GPU_MAX 64

typedef struct fg_gpu_info {
    int index;         /* NVML index, 0..count-1 */
    int minor;         /* minor number of its device node /dev/nvidiaMINOR */
    char uuid[96];     /* "GPU-..." */
    char name[96];     /* marketing name, e.g. "NVIDIA H100 80GB HBM3" */
    char type[32];     /* short lower-case type, e.g. "h100" */
    int64_t memory_mb; /* total memory */
} fg_gpu_info_t;

typedef struct fg_gpu_sample {
    int ok;              /* 0: the sample failed (reported as null) */
    int util_pct;        /* 0..100 */
    int64_t mem_used_mb; /* memory in use */
} fg_gpu_sample_t;

typedef struct fg_gpu_backend {
    const char *name; /* "nvml" or "fake" */
    int (*count)(void *ctx);
    /* Fills *out for GPU i (0 <= i < count). 0 on success, -1 on error. */
    int (*info)(void *ctx, int i, fg_gpu_info_t *out);
    /* Samples GPU i now. 0 on success, -1 on error (out->ok = 0). */
    int (*sample)(void *ctx, int i, fg_gpu_sample_t *out);
    /* Optional (NULL for NVML, which samples the hardware): tells the backend which job
     * directory GPU i serves now (NULL: none), before it is sampled. The fake backend
     * reads the job's load knob there (FG_GPU_FAKE_UTIL_FILE). */
    void (*bind)(void *ctx, int i, const char *job_dir);
    /* Releases ctx. */
    void (*close)(void *ctx);
    void *ctx;
} fg_gpu_backend_t;

/*
 * Loads NVML from `libname` (NULL: "libnvidia-ml.so.1"), initialises it and fills *out.
 * Returns 0, or -1 with a human sentence in err (e.g. "NVML not available:
 * libnvidia-ml.so.1: cannot open shared object file") and *out untouched.
 */
int fg_gpu_nvml_open(const char *libname, fg_gpu_backend_t *out, char *err, size_t errlen);

/* The fake backend's per-job load knob: a file of this name in the job's directory
 * holding "UTIL" or "UTIL MEM_MB" (e.g. "0" or "35 2048"); its path is given to the job
 * as $FAIRGPU_FAKE_UTIL_FILE. Without it (or unreadable, or malformed) a GPU of a
 * running job samples FG_GPU_FAKE_BUSY_PCT and FG_GPU_FAKE_BUSY_MB; a free GPU 0 and 0. */
#define FG_GPU_FAKE_UTIL_FILE "FAIRGPU_FAKE_UTIL"
#define FG_GPU_FAKE_BUSY_PCT  100
#define FG_GPU_FAKE_BUSY_MB   1024

/* Parses a knob's text ("UTIL" or "UTIL MEM_MB", spaces and a newline allowed) into
 * *util (0..100) and *mem_mb (0..max_mb; FG_GPU_FAKE_BUSY_MB when absent). 0, or -1
 * (nothing changed) when it is not that. */
int fg_gpu_fake_parse(const char *text, int64_t max_mb, int *util, int64_t *mem_mb);

/*
 * A fake backend of n GPUs (0 <= n <= FG_GPU_MAX) for node `node`: uuids
 * "GPU-fake-<node>-<i>", type `type` (NULL: "fake"), 81920 MiB each. Samples follow
 * the bound job's knob (see FG_GPU_FAKE_UTIL_FILE). Returns 0, or -1 if n is out of
 * range.
 */
int fg_gpu_fake_open(const char *node, int n, const char *type, fg_gpu_backend_t *out);

/* Derives the short type from an NVML name: "NVIDIA H100 80GB HBM3" -> "h100". */
void fg_gpu_type_from_name(const char *name, char *out, size_t outlen);

#endif
