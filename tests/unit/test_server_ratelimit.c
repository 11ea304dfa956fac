/*
 * test_server_ratelimit.c - the keyed token buckets of the login limits (ratelimit.c):
 * a burst passes and the next is refused with a wait; keys are independent; a charge
 * takes a token without refusing; a table far smaller than the keys seen still limits
 * a key that stays active.
 */
#include "server/server.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

/* Burst 3 at 1/s: three pass, the fourth waits about a second. */
static void burst_then_refused(void **state)
{
    (void)state;
    srv_limiter_t *l = srv_limiter_new(1, 3, 64);
    double retry = 0;
    for (int i = 0; i < 3; i++)
        assert_true(srv_limiter_take(l, "10.0.0.1", &retry));
    assert_false(srv_limiter_take(l, "10.0.0.1", &retry));
    assert_true(retry > 0.5 && retry <= 1.0);
    assert_false(srv_limiter_peek(l, "10.0.0.1", &retry));
    /* another key has its own bucket */
    assert_true(srv_limiter_take(l, "10.0.0.2", &retry));
    srv_limiter_free(l);
}

/* A charge (a failed login) takes a token when there is one, and never refuses. */
static void charge_counts(void **state)
{
    (void)state;
    srv_limiter_t *l = srv_limiter_new(0.01, 2, 64);
    double retry = 0;
    assert_true(srv_limiter_peek(l, "alice", &retry));
    srv_limiter_charge(l, "alice");
    assert_true(srv_limiter_peek(l, "alice", &retry));
    srv_limiter_charge(l, "alice");
    assert_false(srv_limiter_peek(l, "alice", &retry));
    srv_limiter_charge(l, "alice"); /* empty: stays empty */
    assert_false(srv_limiter_peek(l, "alice", &retry));
    assert_true(retry > 50);
    srv_limiter_free(l);
}

/* 10,000 other keys through a 64-slot table: memory stays fixed, and a key used
 * between them keeps its (empty) bucket, as the least recently used slot is reused. */
static void many_keys_fixed_table(void **state)
{
    (void)state;
    srv_limiter_t *l = srv_limiter_new(0.001, 1, 64);
    double retry = 0;
    assert_true(srv_limiter_take(l, "victim", &retry));
    for (int i = 0; i < 10000; i++) {
        char k[32];
        snprintf(k, sizeof k, "k%d", i);
        srv_limiter_take(l, k, &retry);
        if (i % 4 == 0) /* the victim stays active */
            assert_false(srv_limiter_peek(l, "victim", &retry));
    }
    srv_limiter_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(burst_then_refused),
        cmocka_unit_test(charge_counts),
        cmocka_unit_test(many_keys_fixed_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
