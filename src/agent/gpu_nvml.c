/*
 * gpu_nvml.c - the NVML GPU backend: libnvidia-ml.so.1 loaded with dlopen at run time,
 * so the agent builds and runs on machines without NVIDIA's driver (it then reports
 * "NVML not available" and the caller falls back to the fake backend or fails).
 */
#include "agent/gpu.h"
#include "agent/nvml_min.h"
#include "common/xalloc.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct nvml {
    void *lib;
    fg_nvmlShutdown_fn shutdown;
    fg_nvmlDeviceGetCount_v2_fn get_count;
    fg_nvmlDeviceGetHandleByIndex_v2_fn get_handle;
    fg_nvmlDeviceGetName_fn get_name;
    fg_nvmlDeviceGetUUID_fn get_uuid;
    fg_nvmlDeviceGetMemoryInfo_fn get_memory;
    fg_nvmlDeviceGetUtilizationRates_fn get_util;
    fg_nvmlErrorString_fn error_string;
    fg_nvmlDeviceGetMinorNumber_fn get_minor; /* optional: else minor = index */
} nvml_t;

static int nvml_count(void *ctx)
{
    nvml_t *n = ctx;
    unsigned int c = 0;
    if (n->get_count(&c) != FG_NVML_SUCCESS)
        return 0;
    return c > FG_GPU_MAX ? FG_GPU_MAX : (int)c;
}

static int nvml_info(void *ctx, int i, fg_gpu_info_t *out)
{
    nvml_t *n = ctx;
    fg_nvmlDevice_t dev;
    memset(out, 0, sizeof *out);
    out->index = i;
    out->minor = i;
    if (n->get_handle((unsigned)i, &dev) != FG_NVML_SUCCESS)
        return -1;
    unsigned int minor;
    if (n->get_minor && n->get_minor(dev, &minor) == FG_NVML_SUCCESS && minor < 255)
        out->minor = (int)minor;
    if (n->get_name(dev, out->name, sizeof out->name) != FG_NVML_SUCCESS)
        snprintf(out->name, sizeof out->name, "unknown");
    if (n->get_uuid(dev, out->uuid, sizeof out->uuid) != FG_NVML_SUCCESS)
        return -1;
    fg_nvmlMemory_t mem;
    if (n->get_memory(dev, &mem) == FG_NVML_SUCCESS)
        out->memory_mb = (int64_t)(mem.total / (1024 * 1024));
    fg_gpu_type_from_name(out->name, out->type, sizeof out->type);
    return 0;
}

static int nvml_sample(void *ctx, int i, fg_gpu_sample_t *out)
{
    nvml_t *n = ctx;
    fg_nvmlDevice_t dev;
    fg_nvmlMemory_t mem;
    fg_nvmlUtilization_t util;
    memset(out, 0, sizeof *out);
    if (n->get_handle((unsigned)i, &dev) != FG_NVML_SUCCESS ||
        n->get_memory(dev, &mem) != FG_NVML_SUCCESS || n->get_util(dev, &util) != FG_NVML_SUCCESS)
        return -1;
    out->ok = 1;
    out->util_pct = util.gpu > 100 ? 100 : (int)util.gpu;
    out->mem_used_mb = (int64_t)(mem.used / (1024 * 1024));
    return 0;
}

static void nvml_close(void *ctx)
{
    nvml_t *n = ctx;
    n->shutdown();
    dlclose(n->lib);
    free(n);
}

/* Resolves one symbol into *slot; returns 0 or -1 with err set. */
static int sym(void *lib, const char *name, void **slot, char *err, size_t errlen)
{
    *slot = dlsym(lib, name);
    if (!*slot) {
        snprintf(err, errlen, "NVML not usable: symbol %s missing", name);
        return -1;
    }
    return 0;
}

int fg_gpu_nvml_open(const char *libname, fg_gpu_backend_t *out, char *err, size_t errlen)
{
    if (!libname)
        libname = "libnvidia-ml.so.1";
    void *lib = dlopen(libname, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(err, errlen, "NVML not available: %s", e ? e : libname);
        return -1;
    }
    nvml_t *n = fg_xcalloc(1, sizeof *n);
    n->lib = lib;
    void *init = NULL;
    if (sym(lib, "nvmlInit_v2", &init, err, errlen) ||
        sym(lib, "nvmlShutdown", (void **)&n->shutdown, err, errlen) ||
        sym(lib, "nvmlDeviceGetCount_v2", (void **)&n->get_count, err, errlen) ||
        sym(lib, "nvmlDeviceGetHandleByIndex_v2", (void **)&n->get_handle, err, errlen) ||
        sym(lib, "nvmlDeviceGetName", (void **)&n->get_name, err, errlen) ||
        sym(lib, "nvmlDeviceGetUUID", (void **)&n->get_uuid, err, errlen) ||
        sym(lib, "nvmlDeviceGetMemoryInfo", (void **)&n->get_memory, err, errlen) ||
        sym(lib, "nvmlDeviceGetUtilizationRates", (void **)&n->get_util, err, errlen) ||
        sym(lib, "nvmlErrorString", (void **)&n->error_string, err, errlen)) {
        dlclose(lib);
        free(n);
        return -1;
    }
    n->get_minor = (fg_nvmlDeviceGetMinorNumber_fn)dlsym(lib, "nvmlDeviceGetMinorNumber");
    fg_nvmlReturn_t rc = ((fg_nvmlInit_v2_fn)init)();
    if (rc != FG_NVML_SUCCESS) {
        snprintf(err, errlen, "NVML not available: nvmlInit_v2: %s", n->error_string(rc));
        dlclose(lib);
        free(n);
        return -1;
    }
    out->name = "nvml";
    out->count = nvml_count;
    out->info = nvml_info;
    out->sample = nvml_sample;
    out->bind = NULL; /* NVML samples the hardware: the job needs no hint */
    out->close = nvml_close;
    out->ctx = n;
    return 0;
}
