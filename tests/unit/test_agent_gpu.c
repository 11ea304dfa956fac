/*
 * test_agent_gpu.c - the agent's GPU backends: the fake one is deterministic and bounded;
 * the NVML one fails cleanly ("NVML not available") when the library is absent.
 */
#include "agent/gpu.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* Eight fake GPUs: uuids name the node and index, all share the given type. */
static void fake_backend_reports_n_deterministic_gpus(void **state)
{
    (void)state;
    fg_gpu_backend_t b;
    assert_int_equal(fg_gpu_fake_open("n3", 8, "h100", &b), 0);
    assert_string_equal(b.name, "fake");
    assert_int_equal(b.count(b.ctx), 8);
    for (int i = 0; i < 8; i++) {
        fg_gpu_info_t g;
        char want[64];
        assert_int_equal(b.info(b.ctx, i, &g), 0);
        snprintf(want, sizeof want, "GPU-fake-n3-%d", i);
        assert_string_equal(g.uuid, want);
        assert_string_equal(g.type, "h100");
        assert_int_equal(g.index, i);
        assert_true(g.memory_mb > 0);
        fg_gpu_sample_t s;
        assert_int_equal(b.sample(b.ctx, i, &s), 0);
        assert_int_equal(s.ok, 1);
        assert_in_range(s.util_pct, 0, 100);
    }
    fg_gpu_info_t g;
    assert_int_equal(b.info(b.ctx, 8, &g), -1);
    assert_int_equal(b.info(b.ctx, -1, &g), -1);
    b.close(b.ctx);

    /* Same inputs, same uuids (a restarted agent reports the same GPUs). */
    fg_gpu_backend_t b2;
    assert_int_equal(fg_gpu_fake_open("n3", 8, NULL, &b2), 0);
    assert_int_equal(b2.info(b2.ctx, 5, &g), 0);
    assert_string_equal(g.uuid, "GPU-fake-n3-5");
    assert_string_equal(g.type, "fake");
    b2.close(b2.ctx);
}

static void fake_backend_rejects_out_of_range_counts(void **state)
{
    (void)state;
    fg_gpu_backend_t b;
    assert_int_equal(fg_gpu_fake_open("n", -1, NULL, &b), -1);
    assert_int_equal(fg_gpu_fake_open("n", FG_GPU_MAX + 1, NULL, &b), -1);
    assert_int_equal(fg_gpu_fake_open("n", 0, NULL, &b), 0);
    assert_int_equal(b.count(b.ctx), 0);
    b.close(b.ctx);
}

/* A library that does not exist: -1, a clear sentence, nothing filled. */
static void nvml_absent_is_reported_cleanly(void **state)
{
    (void)state;
    fg_gpu_backend_t b;
    memset(&b, 0, sizeof b);
    char err[256] = "";
    assert_int_equal(fg_gpu_nvml_open("libnvidia-ml-fairgpu-absent.so.1", &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "NVML not available"));
    assert_non_null(strstr(err, "libnvidia-ml-fairgpu-absent.so.1"));
    assert_null(b.ctx);

    /* The real name: absent on machines without the driver (then the same clean error),
     * present on GPU machines (then a usable backend). */
    err[0] = '\0';
    if (fg_gpu_nvml_open(NULL, &b, err, sizeof err) == 0) {
        assert_string_equal(b.name, "nvml");
        int n = b.count(b.ctx);
        assert_in_range(n, 0, FG_GPU_MAX);
        for (int i = 0; i < n; i++) {
            fg_gpu_info_t g;
            assert_int_equal(b.info(b.ctx, i, &g), 0);
            assert_memory_equal(g.uuid, "GPU-", 4);
        }
        b.close(b.ctx);
    } else {
        assert_non_null(strstr(err, "NVML not"));
    }
}

/* A stand-in for libnvidia-ml.so.1 with two H100s, built at test time (skipped when no
 * C compiler is around): exercises the NVML backend's dlopen/dlsym and every call. */
static const char fake_nvml_src[] =
    "#include <string.h>\n"
    "typedef struct { unsigned long long total, free, used; } mem_t;\n"
    "typedef struct { unsigned int gpu, memory; } util_t;\n"
    "static int inited;\n"
    "int nvmlInit_v2(void) { if (INIT_FAILS) return 9; inited = 1; return 0; }\n"
    "int nvmlShutdown(void) { inited = 0; return 0; }\n"
    "int nvmlDeviceGetCount_v2(unsigned *c) { if (!inited) return 1; *c = 2; return 0; }\n"
    "int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **d) {\n"
    "  if (i > 1) return 2; *d = (void *)(unsigned long)(i + 1); return 0; }\n"
    "int nvmlDeviceGetName(void *d, char *n, unsigned l) {\n"
    "  strncpy(n, \"NVIDIA H100 80GB HBM3\", l); return 0; }\n"
    "#if HAS_UUID\n"
    "int nvmlDeviceGetUUID(void *d, char *u, unsigned l) {\n"
    "  strncpy(u, (unsigned long)d == 1 ? \"GPU-aaaa\" : \"GPU-bbbb\", l); return 0; }\n"
    "#endif\n"
    "int nvmlDeviceGetMemoryInfo(void *d, mem_t *m) {\n"
    "  m->total = 80ull << 30; m->used = (unsigned long)d << 30; m->free = m->total - m->used;\n"
    "  return 0; }\n"
    "int nvmlDeviceGetUtilizationRates(void *d, util_t *u) {\n"
    "  u->gpu = (unsigned long)d == 1 ? 37 : 99; u->memory = 5; return 0; }\n"
    "const char *nvmlErrorString(int r) { return r == 9 ? \"Driver Not Loaded\" : \"?\"; }\n";

/* Builds the stand-in with the given macros into dir/name; 0 or -1 (no compiler). */
static int build_fake_nvml(const char *dir, const char *name, const char *defs)
{
    char src[512], cmd[2048];
    snprintf(src, sizeof src, "%s/fake_nvml.c", dir);
    FILE *f = fopen(src, "w");
    if (!f)
        return -1;
    fputs(fake_nvml_src, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "cc -shared -fPIC %s -o '%s/%s' '%s' 2>/dev/null", defs, dir, name,
             src);
    return system(cmd) == 0 ? 0 : -1;
}

static void nvml_backend_with_a_stand_in_library(void **state)
{
    (void)state;
    char dir[] = "/tmp/fg-test-nvml-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char lib[600], err[256];
    if (build_fake_nvml(dir, "libok.so", "-DINIT_FAILS=0 -DHAS_UUID=1") != 0) {
        char rm[600];
        snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
        assert_int_equal(system(rm), 0);
        skip();
        return;
    }
    snprintf(lib, sizeof lib, "%s/libok.so", dir);
    fg_gpu_backend_t b;
    assert_int_equal(fg_gpu_nvml_open(lib, &b, err, sizeof err), 0);
    assert_string_equal(b.name, "nvml");
    assert_int_equal(b.count(b.ctx), 2);
    fg_gpu_info_t g;
    assert_int_equal(b.info(b.ctx, 1, &g), 0);
    assert_int_equal(g.index, 1);
    assert_string_equal(g.uuid, "GPU-bbbb");
    assert_string_equal(g.name, "NVIDIA H100 80GB HBM3");
    assert_string_equal(g.type, "h100");
    assert_int_equal(g.memory_mb, 80 * 1024);
    fg_gpu_sample_t sm;
    assert_int_equal(b.sample(b.ctx, 0, &sm), 0);
    assert_int_equal(sm.ok, 1);
    assert_int_equal(sm.util_pct, 37);
    assert_int_equal(sm.mem_used_mb, 1024);
    assert_int_equal(b.info(b.ctx, 2, &g), -1); /* no such device */
    b.close(b.ctx);

    /* A library without one of the functions: refused, naming it. */
    assert_int_equal(build_fake_nvml(dir, "libnouuid.so", "-DINIT_FAILS=0 -DHAS_UUID=0"), 0);
    snprintf(lib, sizeof lib, "%s/libnouuid.so", dir);
    assert_int_equal(fg_gpu_nvml_open(lib, &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "nvmlDeviceGetUUID"));

    /* nvmlInit fails (no driver): "not available", with NVML's own words. */
    assert_int_equal(build_fake_nvml(dir, "libnodrv.so", "-DINIT_FAILS=1 -DHAS_UUID=1"), 0);
    snprintf(lib, sizeof lib, "%s/libnodrv.so", dir);
    assert_int_equal(fg_gpu_nvml_open(lib, &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "NVML not available"));
    assert_non_null(strstr(err, "Driver Not Loaded"));

    char rm[600];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    assert_int_equal(system(rm), 0);
}

static void gpu_type_is_derived_from_the_nvml_name(void **state)
{
    (void)state;
    char t[32];
    fg_gpu_type_from_name("NVIDIA H100 80GB HBM3", t, sizeof t);
    assert_string_equal(t, "h100");
    fg_gpu_type_from_name("NVIDIA H200", t, sizeof t);
    assert_string_equal(t, "h200");
    fg_gpu_type_from_name("Tesla V100-SXM2-16GB", t, sizeof t);
    assert_string_equal(t, "v100");
    fg_gpu_type_from_name("NVIDIA A100-SXM4-80GB", t, sizeof t);
    assert_string_equal(t, "a100");
    fg_gpu_type_from_name("", t, sizeof t);
    assert_string_equal(t, "gpu");
}

/* The knob's text: "UTIL" or "UTIL MEM_MB"; anything else is refused and changes nothing. */
static void fake_knob_text_is_parsed_strictly(void **state)
{
    (void)state;
    int u = -1;
    int64_t m = -1;
    assert_int_equal(fg_gpu_fake_parse("0\n", 81920, &u, &m), 0);
    assert_int_equal(u, 0);
    assert_int_equal(m, FG_GPU_FAKE_BUSY_MB);
    assert_int_equal(fg_gpu_fake_parse(" 35 2048 \n", 81920, &u, &m), 0);
    assert_int_equal(u, 35);
    assert_int_equal(m, 2048);
    static const char *const bad[] = {
        "", "x", "101", "-1", "50 -3", "50 90000", "5 5 5", "1e2", "99999999999999999999", "50abc"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        u = 7;
        m = 7;
        assert_int_equal(fg_gpu_fake_parse(bad[i], 81920, &u, &m), -1);
        assert_int_equal(u, 7);
        assert_int_equal(m, 7);
    }
}

/* A free GPU samples 0 %; bound to a job without a knob 100 %; the knob wins; a symbolic
 * link in its place is not followed (the default again). */
static void fake_backend_follows_the_bound_jobs_knob(void **state)
{
    (void)state;
    char dir[] = "/tmp/fg-knob-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char knob[128], target[128];
    snprintf(knob, sizeof knob, "%s/%s", dir, FG_GPU_FAKE_UTIL_FILE);
    snprintf(target, sizeof target, "%s/target", dir);
    fg_gpu_backend_t b;
    assert_int_equal(fg_gpu_fake_open("n", 2, NULL, &b), 0);
    assert_non_null(b.bind);
    fg_gpu_sample_t s;
    assert_int_equal(b.sample(b.ctx, 0, &s), 0);
    assert_int_equal(s.util_pct, 0);
    assert_int_equal(s.mem_used_mb, 0);
    b.bind(b.ctx, 0, dir);
    assert_int_equal(b.sample(b.ctx, 0, &s), 0);
    assert_int_equal(s.util_pct, FG_GPU_FAKE_BUSY_PCT);
    assert_int_equal(s.mem_used_mb, FG_GPU_FAKE_BUSY_MB);
    FILE *f = fopen(knob, "w");
    assert_non_null(f);
    fputs("3 512\n", f);
    fclose(f);
    assert_int_equal(b.sample(b.ctx, 0, &s), 0);
    assert_int_equal(s.util_pct, 3);
    assert_int_equal(s.mem_used_mb, 512);
    assert_int_equal(b.sample(b.ctx, 1, &s), 0); /* the other GPU is free */
    assert_int_equal(s.util_pct, 0);
    assert_int_equal(unlink(knob), 0);
    f = fopen(target, "w");
    assert_non_null(f);
    fputs("0\n", f);
    fclose(f);
    assert_int_equal(symlink(target, knob), 0);
    assert_int_equal(b.sample(b.ctx, 0, &s), 0);
    assert_int_equal(s.util_pct, FG_GPU_FAKE_BUSY_PCT);
    b.bind(b.ctx, 0, NULL);
    assert_int_equal(b.sample(b.ctx, 0, &s), 0);
    assert_int_equal(s.util_pct, 0);
    b.close(b.ctx);
    unlink(knob);
    unlink(target);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fake_backend_reports_n_deterministic_gpus),
        cmocka_unit_test(fake_backend_rejects_out_of_range_counts),
        cmocka_unit_test(fake_knob_text_is_parsed_strictly),
        cmocka_unit_test(fake_backend_follows_the_bound_jobs_knob),
        cmocka_unit_test(nvml_absent_is_reported_cleanly),
        cmocka_unit_test(nvml_backend_with_a_stand_in_library),
        cmocka_unit_test(gpu_type_is_derived_from_the_nvml_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
