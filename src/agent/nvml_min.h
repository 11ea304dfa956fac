/*
 * nvml_min.h - the few NVML declarations the agent uses, written from NVIDIA's public
 * NVML API reference (no Debian package ships nvml.h). Only types and function pointer
 * signatures: the library itself is loaded at run time with dlopen.
 */
#ifndef FG_AGENT_NVML_MIN_H
#define FG_AGENT_NVML_MIN_H

typedef int fg_nvmlReturn_t; /* nvmlReturn_t: 0 is NVML_SUCCESS */
#define FG_NVML_SUCCESS 0
typedef struct fg_nvmlDevice_st *fg_nvmlDevice_t;

typedef struct fg_nvmlMemory {
    unsigned long long total; /* bytes */
    unsigned long long free;
    unsigned long long used;
} fg_nvmlMemory_t;

typedef struct fg_nvmlUtilization {
    unsigned int gpu;    /* percent of time a kernel ran, last sample period */
    unsigned int memory; /* percent of time memory was read or written */
} fg_nvmlUtilization_t;

typedef fg_nvmlReturn_t (*fg_nvmlInit_v2_fn)(void);
typedef fg_nvmlReturn_t (*fg_nvmlShutdown_fn)(void);
typedef fg_nvmlReturn_t (*fg_nvmlDeviceGetCount_v2_fn)(unsigned int *count);
typedef fg_nvmlReturn_t (*fg_nvmlDeviceGetHandleByIndex_v2_fn)(unsigned int index,
                                                               fg_nvmlDevice_t *device);
typedef fg_nvmlReturn_t (*fg_nvmlDeviceGetName_fn)(fg_nvmlDevice_t device, char *name,
                                                   unsigned int length);
typedef fg_nvmlReturn_t (*fg_nvmlDeviceGetUUID_fn)(fg_nvmlDevice_t device, char *uuid,
                                                   unsigned int length);
typedef fg_nvmlReturn_t (*fg_nvmlDeviceGetMemoryInfo_fn)(fg_nvmlDevice_t device,
                                                         fg_nvmlMemory_t *memory);
typedef fg_nvmlReturn_t (*fg_nvmlDeviceGetUtilizationRates_fn)(fg_nvmlDevice_t device,
                                                               fg_nvmlUtilization_t *util);
typedef fg_nvmlReturn_t (*fg_nvmlDeviceGetMinorNumber_fn)(fg_nvmlDevice_t device,
                                                          unsigned int *minor);
typedef const char *(*fg_nvmlErrorString_fn)(fg_nvmlReturn_t result);

#endif
