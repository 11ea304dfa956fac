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
#include <string.h>

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fake_backend_reports_n_deterministic_gpus),
        cmocka_unit_test(fake_backend_rejects_out_of_range_counts),
        cmocka_unit_test(nvml_absent_is_reported_cleanly),
        cmocka_unit_test(gpu_type_is_derived_from_the_nvml_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
