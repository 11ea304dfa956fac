/*
 * test_server_idle.c - the idle-GPU decision (src/server/idle.c): when a job becomes
 * idle, when it is busy again, what each account policy does and when, and how much
 * idle GPU time it counts. Times are made up: the decision reads no clock.
 */
#include "server/idle.h"
#include "store/store.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

static const srv_idle_cfg_t CFG = {.util_pct = 5, .after_ms = 30000};

/* Times are milliseconds since the epoch (0 means "not set" in the state): from T0. */
#define T0   1767225600000LL /* 2026-01-01 */
#define T(x) (T0 + (x))

/* Threshold 5 %, after 30 s, no policy: flagged at 30 s with the window counted as
 * idle (2 GPUs x 30 s), never warned nor acted on. */
static void idle_after_the_window_and_counted_from_its_start(void **state)
{
    (void)state;
    srv_idle_t st = {0};
    srv_idle_policy_t none = {FG_IDLE_NONE, 0};
    assert_int_equal(srv_idle_step(&st, &CFG, &none, 3, 2, T(1000)), 0);
    assert_int_equal(st.low_since_ms, T(1000));
    assert_int_equal(srv_idle_step(&st, &CFG, &none, 4, 2, T(30999)), 0); /* 29.999 s */
    assert_int_equal(srv_idle_step(&st, &CFG, &none, 0, 2, T(31000)), SRV_IDLE_EV_IDLE);
    assert_int_equal(st.idle_since_ms, T(1000));
    assert_int_equal(st.idle_gpu_ms, 60000);
    assert_int_equal(srv_idle_step(&st, &CFG, &none, 0, 2, T(41000)), 0);
    assert_int_equal(st.idle_gpu_ms, 80000);
    assert_int_equal(st.warned_ms, 0);
}

/* One GPU at the threshold is busy: the window starts again; a busy sample while
 * idle clears it, and idle time stops counting. */
static void one_busy_gpu_clears_and_restarts_the_window(void **state)
{
    (void)state;
    srv_idle_t st = {0};
    srv_idle_policy_t none = {FG_IDLE_NONE, 0};
    srv_idle_step(&st, &CFG, &none, 0, 1, T(0));
    assert_int_equal(srv_idle_step(&st, &CFG, &none, 5, 1, T(20000)), 0); /* 5 is not below 5 */
    assert_int_equal(st.low_since_ms, 0);
    srv_idle_step(&st, &CFG, &none, 0, 1, T(21000));
    assert_int_equal(srv_idle_step(&st, &CFG, &none, 0, 1, T(50000)), 0); /* 29 s only */
    assert_int_equal(srv_idle_step(&st, &CFG, &none, 0, 1, T(51000)), SRV_IDLE_EV_IDLE);
    assert_int_equal(srv_idle_step(&st, &CFG, &none, 90, 1, T(52000)), SRV_IDLE_EV_CLEARED);
    assert_int_equal(st.idle_since_ms, 0);
    assert_int_equal(st.idle_gpu_ms, 30000);
    assert_int_equal(srv_idle_step(&st, &CFG, &none, 90, 1, T(99000)), 0);
    assert_int_equal(st.idle_gpu_ms, 30000);
}

/* No sample (-1) changes nothing: neither starts, clears nor counts. */
static void no_sample_changes_nothing(void **state)
{
    (void)state;
    srv_idle_t st = {0};
    srv_idle_policy_t none = {FG_IDLE_NONE, 0};
    assert_int_equal(srv_idle_step(&st, &CFG, &none, -1, 1, T(0)), 0);
    assert_int_equal(st.low_since_ms, 0);
    srv_idle_step(&st, &CFG, &none, 0, 1, T(1000));
    srv_idle_step(&st, &CFG, &none, 0, 1, T(31000));
    assert_int_not_equal(st.idle_since_ms, 0);
    assert_int_equal(srv_idle_step(&st, &CFG, &none, -1, 1, T(60000)), 0);
    assert_int_not_equal(st.idle_since_ms, 0);
}

/* warn: one warning with the flag, nothing more however long it stays idle. */
static void warn_warns_once(void **state)
{
    (void)state;
    srv_idle_t st = {0};
    srv_idle_policy_t warn = {FG_IDLE_WARN, 0};
    srv_idle_step(&st, &CFG, &warn, 0, 1, T(0));
    assert_int_equal(srv_idle_step(&st, &CFG, &warn, 0, 1, T(30000)),
                     SRV_IDLE_EV_IDLE | SRV_IDLE_EV_WARNING);
    for (int64_t t = 31000; t < 600000; t += 10000)
        assert_int_equal(srv_idle_step(&st, &CFG, &warn, 0, 1, T(t)), 0);
}

/* requeue with a 60 s grace: warned at 30 s, requeued at 90 s, once. */
static void requeue_after_the_grace_once(void **state)
{
    (void)state;
    srv_idle_t st = {0};
    srv_idle_policy_t rq = {FG_IDLE_REQUEUE, 60000};
    srv_idle_step(&st, &CFG, &rq, 3, 2, T(0));
    assert_int_equal(srv_idle_step(&st, &CFG, &rq, 2, 2, T(30000)),
                     SRV_IDLE_EV_IDLE | SRV_IDLE_EV_WARNING);
    assert_int_equal(srv_idle_step(&st, &CFG, &rq, 4, 2, T(60000)), 0);
    assert_int_equal(srv_idle_step(&st, &CFG, &rq, 1, 2, T(89999)), 0);
    assert_int_equal(srv_idle_step(&st, &CFG, &rq, 1, 2, T(90000)), SRV_IDLE_EV_REQUEUE);
    assert_int_equal(srv_idle_step(&st, &CFG, &rq, 1, 2, T(120000)), 0);
    assert_int_equal(st.idle_gpu_ms, 2 * 120000);
}

/* stop: busy during the grace clears it, and the next idle spell warns again from
 * the start before the stop. */
static void stop_is_called_off_by_a_busy_spell(void **state)
{
    (void)state;
    srv_idle_t st = {0};
    srv_idle_policy_t stop = {FG_IDLE_STOP, 10000};
    srv_idle_step(&st, &CFG, &stop, 0, 1, T(0));
    assert_int_equal(srv_idle_step(&st, &CFG, &stop, 0, 1, T(30000)),
                     SRV_IDLE_EV_IDLE | SRV_IDLE_EV_WARNING);
    assert_int_equal(srv_idle_step(&st, &CFG, &stop, 60, 1, T(35000)), SRV_IDLE_EV_CLEARED);
    assert_int_equal(srv_idle_step(&st, &CFG, &stop, 0, 1, T(41000)), 0); /* long past 40 s */
    assert_int_equal(srv_idle_step(&st, &CFG, &stop, 0, 1, T(71000)),
                     SRV_IDLE_EV_IDLE | SRV_IDLE_EV_WARNING);
    assert_int_equal(srv_idle_step(&st, &CFG, &stop, 0, 1, T(81000)), SRV_IDLE_EV_STOP);
}

/* A policy set while the job is already idle warns at the next step. */
static void policy_set_later_applies_to_an_idle_job(void **state)
{
    (void)state;
    srv_idle_t st = {0};
    srv_idle_policy_t none = {FG_IDLE_NONE, 0}, stop = {FG_IDLE_STOP, 0};
    srv_idle_step(&st, &CFG, &none, 0, 1, T(0));
    assert_int_equal(srv_idle_step(&st, &CFG, &none, 0, 1, T(30000)), SRV_IDLE_EV_IDLE);
    assert_int_equal(srv_idle_step(&st, &CFG, &stop, 0, 1, T(31000)), SRV_IDLE_EV_WARNING);
    assert_int_equal(srv_idle_step(&st, &CFG, &stop, 0, 1, T(32000)), SRV_IDLE_EV_STOP);
}

static void action_names_round_trip(void **state)
{
    (void)state;
    static const char *const names[] = {"none", "warn", "requeue", "stop"};
    for (int i = 0; i < 4; i++) {
        assert_string_equal(srv_idle_action_name(i), names[i]);
        assert_int_equal(srv_idle_action_parse(names[i]), i);
    }
    assert_int_equal(srv_idle_action_parse("kill"), -1);
    assert_int_equal(srv_idle_action_parse(""), -1);
    assert_int_equal(srv_idle_action_parse(NULL), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(idle_after_the_window_and_counted_from_its_start),
        cmocka_unit_test(one_busy_gpu_clears_and_restarts_the_window),
        cmocka_unit_test(no_sample_changes_nothing),
        cmocka_unit_test(warn_warns_once),
        cmocka_unit_test(requeue_after_the_grace_once),
        cmocka_unit_test(stop_is_called_off_by_a_busy_spell),
        cmocka_unit_test(policy_set_later_applies_to_an_idle_job),
        cmocka_unit_test(action_names_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
