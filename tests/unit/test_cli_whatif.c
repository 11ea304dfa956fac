/*
 * test_cli_whatif.c - the what-if snapshot from API replies (src/cli/whatif_snap.c):
 * the banner's example, hostile replies refused, each change and its errors (a refused
 * change leaves the settings as they were).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cli/whatif_snap.h"

#include <string.h>

static const char FAIRSHARE[] =
    "{\"policy\":\"fair\",\"half_life_s\":604800,\"quantum_s\":3600,\"accounts\":["
    "{\"name\":\"ml\",\"weight\":2,\"usage_gpu_seconds\":7200,\"gpu_quota\":null},"
    "{\"name\":\"cv\",\"weight\":1,\"usage_gpu_seconds\":0,\"gpu_quota\":4}]}";
static const char NODES[] =
    "{\"items\":[{\"name\":\"a\",\"state\":\"up\",\"gpu_type\":\"H100\",\"gpus\":[1,2,3,4,5,6,7,8]}"
    ","
    "{\"name\":\"b\",\"state\":\"up\",\"gpu_type\":\"H100\",\"gpus\":[1,2,3,4,5,6,7,8]},"
    "{\"name\":\"c\",\"state\":\"down\",\"gpu_type\":\"H100\",\"gpus\":[1,2,3,4,5,6,7,8]}]}";
static const char JOBS[] =
    "[{\"state\":\"RUNNING\",\"account\":\"ml\",\"gpus\":4,\"time_limit_s\":3600,"
    "\"submit_time\":900,\"start_time\":1000},"
    "{\"state\":\"PENDING\",\"account\":\"cv\",\"gpus\":8,\"time_limit_s\":7200,"
    "\"submit_time\":1500},"
    "{\"state\":\"COMPLETED\",\"account\":\"cv\",\"gpus\":1,\"time_limit_s\":60,"
    "\"submit_time\":1}]";

static int build(const char *fs, const char *nodes, const char *jobs, fg_whatif_snapshot_t *snap,
                 char *err, size_t n)
{
    json_t *f = json_loads(fs, 0, NULL), *nd = json_loads(nodes, 0, NULL),
           *j = json_loads(jobs, 0, NULL);
    assert_non_null(f);
    assert_non_null(nd);
    assert_non_null(j);
    int rc = cli_whatif_snapshot(f, nd, j, NULL, 1600, snap, err, n);
    json_decref(f);
    json_decref(nd);
    json_decref(j);
    return rc;
}

static void the_banner_example(void **state)
{
    (void)state;
    fg_whatif_snapshot_t s;
    char err[256];
    assert_int_equal(build(FAIRSHARE, NODES, JOBS, &s, err, sizeof err), 0);
    assert_int_equal(s.naccounts, 2);
    assert_string_equal(s.accounts[0].name, "ml");
    assert_true(s.accounts[0].usage_gpu_s == 7200 && s.live.weights[0] == 2);
    assert_int_equal(s.live.quotas[0], -1);
    assert_int_equal(s.live.quotas[1], 4);
    assert_int_equal(s.live.ngroups, 1); /* the down node is left out */
    assert_int_equal(s.live.groups[0].count, 2);
    assert_int_equal(s.live.cfg.policy, FG_POLICY_FAIR);
    assert_int_equal(s.live.cfg.quantum_s, 3600);
    assert_int_equal(s.njobs, 2); /* the ended job is left out */
    assert_true(s.jobs[0].running && s.jobs[0].limit_s == 3000 && s.jobs[0].run_s == 3000);
    assert_true(!s.jobs[1].running && s.jobs[1].account == 1 && s.jobs[1].limit_s == 7200);

    fg_whatif_settings_t set;
    fg_whatif_settings_copy(&s.live, s.naccounts, &set);
    assert_int_equal(cli_whatif_change(&s, &set, "weight=cv:3", err, sizeof err), 0);
    assert_true(set.weights[1] == 3.0);
    assert_int_equal(cli_whatif_change(&s, &set, "add-nodes=1", err, sizeof err), 0);
    assert_int_equal(set.groups[0].count, 3);
    assert_int_equal(cli_whatif_change(&s, &set, "nodes=5", err, sizeof err), 0);
    assert_int_equal(set.groups[0].count, 5);
    assert_int_equal(cli_whatif_change(&s, &set, "quota=ml:2", err, sizeof err), 0);
    assert_int_equal(set.quotas[0], 2);
    assert_int_equal(cli_whatif_change(&s, &set, "quota=ml:none", err, sizeof err), 0);
    assert_int_equal(set.quotas[0], -1);
    assert_int_equal(cli_whatif_change(&s, &set, "policy=fifo", err, sizeof err), 0);
    assert_int_equal(set.cfg.policy, FG_POLICY_FIFO);
    assert_int_equal(cli_whatif_change(&s, &set, "half-life=1d", err, sizeof err), 0);
    assert_int_equal(set.cfg.half_life_s, 86400);
    fg_whatif_settings_free(&set);
    cli_whatif_snapshot_free(&s);
}

static void bad_changes_change_nothing(void **state)
{
    (void)state;
    fg_whatif_snapshot_t s;
    char err[256];
    assert_int_equal(build(FAIRSHARE, NODES, JOBS, &s, err, sizeof err), 0);
    fg_whatif_settings_t set;
    fg_whatif_settings_copy(&s.live, s.naccounts, &set);
    static const char *const bad[] = {
        "weight=nobody:2", "weight=ml:0", "weight=ml:x",  "weight=ml",    "quota=ml:-1",
        "quota=ml:1.5",    "nodes=0",     "add-nodes=-2", "add-nodes=x",  "policy=nope",
        "half-life=soon",  "quantum=-1",  "color=blue",   "=3",           "policy=",
        "noequals",        "weight=:3",   "quota=ml:",    "nodes=100001",
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        err[0] = '\0';
        assert_int_equal(cli_whatif_change(&s, &set, bad[k], err, sizeof err), -1);
        assert_true(strlen(err) > 0);
    }
    assert_true(set.weights[0] == 2.0 && set.weights[1] == 1.0);
    assert_int_equal(set.quotas[0], -1);
    assert_int_equal(set.groups[0].count, 2);
    assert_int_equal(set.cfg.policy, FG_POLICY_FAIR);
    fg_whatif_settings_free(&set);
    cli_whatif_snapshot_free(&s);
}

static void hostile_replies_are_refused(void **state)
{
    (void)state;
    fg_whatif_snapshot_t s;
    char err[256];
    /* no policy; a negative weight; a repeated account; no node up; a job of 12 GPUs;
     * a running job without its start; the job list not an array */
    assert_int_equal(build("{\"half_life_s\":1,\"accounts\":[]}", NODES, "[]", &s, err, sizeof err),
                     -1);
    assert_int_equal(build("{\"policy\":\"fair\",\"half_life_s\":1,\"accounts\":[{\"name\":\"a\","
                           "\"weight\":-1,\"usage_gpu_seconds\":0}]}",
                           NODES, "[]", &s, err, sizeof err),
                     -1);
    assert_int_equal(build("{\"policy\":\"fair\",\"half_life_s\":1,\"accounts\":[{\"name\":\"a\","
                           "\"weight\":1,\"usage_gpu_seconds\":0},{\"name\":\"a\",\"weight\":1,"
                           "\"usage_gpu_seconds\":0}]}",
                           NODES, "[]", &s, err, sizeof err),
                     -1);
    assert_int_equal(build(FAIRSHARE, "{\"items\":[]}", "[]", &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "no node"));
    assert_int_equal(build(FAIRSHARE, NODES,
                           "[{\"state\":\"PENDING\",\"account\":\"ml\",\"gpus\":12,"
                           "\"time_limit_s\":60,\"submit_time\":1}]",
                           &s, err, sizeof err),
                     -1);
    assert_int_equal(build(FAIRSHARE, NODES,
                           "[{\"state\":\"RUNNING\",\"account\":\"ml\",\"gpus\":1,"
                           "\"time_limit_s\":60,\"submit_time\":1}]",
                           &s, err, sizeof err),
                     -1);
    assert_int_equal(build(FAIRSHARE, NODES, "{}", &s, err, sizeof err), -1);
    /* a job of an account the fair share does not list gets one, weight 1 */
    assert_int_equal(build(FAIRSHARE, NODES,
                           "[{\"state\":\"PENDING\",\"account\":\"new\",\"gpus\":1,"
                           "\"time_limit_s\":60,\"submit_time\":1}]",
                           &s, err, sizeof err),
                     0);
    assert_int_equal(s.naccounts, 3);
    assert_true(s.live.weights[2] == 1.0);
    cli_whatif_snapshot_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_banner_example),
        cmocka_unit_test(bad_changes_change_nothing),
        cmocka_unit_test(hostile_replies_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
