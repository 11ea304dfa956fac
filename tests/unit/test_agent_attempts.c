/*
 * test_agent_attempts.c - the agent's attempt handling without a controller: "start"
 * messages become processes with exactly their GPUs, the local time limit stops a job
 * (SIGTERM, then SIGKILL after the job's grace), a preemption writes the notice first,
 * duplicate starts are ignored, and stops for unknown attempts are answered.
 */
#include "agent/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

static fg_agent_t g_ag;
static char g_root[256];

static int setup(void **state)
{
    (void)state;
    snprintf(g_root, sizeof g_root, "/tmp/fg-test-attempts-XXXXXX");
    assert_non_null(mkdtemp(g_root));
    chmod(g_root, 0711);
    memset(&g_ag, 0, sizeof g_ag);
    fg_agent_cfg_t *cfg = &g_ag.cfg;
    cfg->grace_s = 30;
    cfg->log_limit = FG_LOG_LIMIT_DEFAULT;
    snprintf(cfg->checkpoint_root, sizeof cfg->checkpoint_root, "%s/ckpt", g_root);
    snprintf(cfg->addr, sizeof cfg->addr, "127.0.0.1");
    pthread_mutex_init(&g_ag.mu, NULL);
    assert_int_equal(pipe(g_ag.wake), 0);
    fcntl(g_ag.wake[0], F_SETFL, O_NONBLOCK);
    fcntl(g_ag.wake[1], F_SETFL, O_NONBLOCK);
    g_ag.nnodes = 1;
    g_ag.nodes = calloc(1, sizeof *g_ag.nodes);
    fg_node_t *n = &g_ag.nodes[0];
    n->ag = &g_ag;
    snprintf(n->name, sizeof n->name, "n0");
    snprintf(n->work_dir, sizeof n->work_dir, "%s/n0", g_root);
    assert_int_equal(fg_mkdir_p(n->work_dir, 0711), 0);
    pthread_cond_init(&n->reg_cond, NULL);
    pthread_cond_init(&n->report_cond, NULL);
    assert_int_equal(fg_gpu_fake_open("n0", 8, "h100", &n->gpu), 0);
    n->ngpus = 8;
    for (int i = 0; i < 8; i++)
        assert_int_equal(n->gpu.info(n->gpu.ctx, i, &n->gpus[i]), 0);
    fg_node_load_state(n);
    assert_int_equal(pthread_create(&g_ag.sup_thr, NULL, fg_supervisor_main, &g_ag), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pthread_mutex_lock(&g_ag.mu);
    g_ag.stop = 1;
    pthread_mutex_unlock(&g_ag.mu);
    fg_agent_wake(&g_ag);
    pthread_join(g_ag.sup_thr, NULL);
    fg_agent_kill_all(&g_ag);
    fg_node_t *n = &g_ag.nodes[0];
    while (n->attempts)
        fg_attempt_remove(n->attempts);
    for (unsigned k = 0; k < FG_ENDED_RING; k++)
        free(n->ended[k]);
    n->gpu.close(n->gpu.ctx);
    free(g_ag.nodes);
    close(g_ag.wake[0]);
    close(g_ag.wake[1]);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    return system(cmd) == 0 ? 0 : -1;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until attempt (job, 1, 0) has exited; returns it (NULL on timeout). */
static fg_attempt_t *wait_exited(const char *job, int ms)
{
    int64_t end = mono_ms() + ms;
    while (mono_ms() < end) {
        pthread_mutex_lock(&g_ag.mu);
        fg_attempt_t *a = fg_attempt_find(&g_ag.nodes[0], job, 1, 0);
        int done = a && a->exited;
        pthread_mutex_unlock(&g_ag.mu);
        if (done)
            return a;
        usleep(20000);
    }
    return NULL;
}

static const char *slurp(const char *path)
{
    static char buf[65536];
    FILE *f = fopen(path, "r");
    buf[0] = '\0';
    if (!f)
        return buf;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void start(const char *json)
{
    json_error_t e;
    json_t *m = json_loads(json, 0, &e);
    assert_non_null(m);
    fg_agent_start(&g_ag.nodes[0], m);
    json_decref(m);
}

/* Two jobs on one node get disjoint CUDA_VISIBLE_DEVICES, made of their GPUs' uuids. */
static void start_messages_get_exactly_their_gpus(void **state)
{
    (void)state;
    start("{\"seq\":1,\"type\":\"start\",\"job_id\":\"j1\",\"attempt\":1,\"epoch\":1,"
          "\"rank\":0,\"command\":\"echo CVD=$CUDA_VISIBLE_DEVICES "
          "IDX=$FAIRGPU_GPU_INDICES\",\"gpus\":[0],\"user\":\"alice\"}");
    start("{\"seq\":2,\"type\":\"start\",\"job_id\":\"j8\",\"attempt\":1,\"epoch\":1,"
          "\"rank\":0,\"command\":[\"sh\",\"-c\",\"echo CVD=$CUDA_VISIBLE_DEVICES\"],"
          "\"gpus\":[1,2,3,4,5,6,7],\"user\":\"bob\"}");
    fg_attempt_t *a = wait_exited("j1", 10000);
    fg_attempt_t *b = wait_exited("j8", 10000);
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(fg_attempt_end_cause(a), "completed");
    assert_string_equal(slurp(a->proc.log_path), "CVD=GPU-fake-n0-0 IDX=0\n");
    assert_string_equal(slurp(b->proc.log_path),
                        "CVD=GPU-fake-n0-1,GPU-fake-n0-2,GPU-fake-n0-3,GPU-fake-n0-4,"
                        "GPU-fake-n0-5,GPU-fake-n0-6,GPU-fake-n0-7\n");
    /* A duplicate delivery of the same start is ignored (no second process). */
    pthread_mutex_lock(&g_ag.mu);
    pid_t first = a->proc.pgid;
    pthread_mutex_unlock(&g_ag.mu);
    start("{\"seq\":1,\"type\":\"start\",\"job_id\":\"j1\",\"attempt\":1,\"epoch\":1,"
          "\"rank\":0,\"command\":\"echo again\",\"gpus\":[0],\"user\":\"alice\"}");
    pthread_mutex_lock(&g_ag.mu);
    assert_ptr_equal(fg_attempt_find(&g_ag.nodes[0], "j1", 1, 0), a);
    assert_int_equal(a->proc.pgid, first);
    pthread_mutex_unlock(&g_ag.mu);
    /* A GPU index the node does not have: not started, reported as failed. */
    start("{\"type\":\"start\",\"job_id\":\"jbad\",\"attempt\":1,\"epoch\":1,"
          "\"command\":\"true\",\"gpus\":[8],\"user\":\"alice\"}");
    fg_attempt_t *c = wait_exited("jbad", 10000);
    assert_non_null(c);
    assert_false(c->launched);
    assert_string_equal(fg_attempt_end_cause(c), "failed");
    assert_non_null(strstr(c->error, "gpus[0]"));
}

/* time_limit_s 1 with grace_s 1 on a job that ignores SIGTERM: SIGTERM at ~1 s, SIGKILL
 * at ~2 s, end cause "timeout". */
static void local_time_limit_then_grace_then_sigkill(void **state)
{
    (void)state;
    int64_t t0 = mono_ms();
    start("{\"type\":\"start\",\"job_id\":\"tl\",\"attempt\":1,\"epoch\":1,"
          "\"command\":\"trap 'echo got-term' TERM; sleep 100 & wait; sleep 100 & wait\","
          "\"gpus\":[],\"time_limit_s\":1,\"grace_s\":1,\"user\":\"alice\"}");
    fg_attempt_t *a = wait_exited("tl", 8000);
    int64_t took = mono_ms() - t0;
    assert_non_null(a);
    assert_string_equal(fg_attempt_end_cause(a), "timeout");
    assert_int_equal(a->ex.signal, SIGKILL);
    assert_in_range(took, 1800, 5000);
    assert_non_null(strstr(slurp(a->proc.log_path), "got-term"));
    assert_false(fg_proc_group_alive(&a->proc));
}

/* A preemption stop: the notice file exists in the checkpoint dir before SIGTERM, so the
 * job can see it in its TERM handler; end cause "preempted". */
static void preempt_writes_notice_then_terminates(void **state)
{
    (void)state;
    start("{\"type\":\"start\",\"job_id\":\"pre\",\"attempt\":1,\"epoch\":1,"
          "\"command\":\"trap 'cat $FAIRGPU_CHECKPOINT_DIR/FAIRGPU_PREEMPT; exit 0' TERM; "
          "echo ready; while :; do sleep 0.05; done\",\"gpus\":[2],\"grace_s\":5,"
          "\"user\":\"alice\"}");
    char path[600];
    pthread_mutex_lock(&g_ag.mu);
    fg_attempt_t *a = fg_attempt_find(&g_ag.nodes[0], "pre", 1, 0);
    assert_non_null(a);
    snprintf(path, sizeof path, "%s", a->proc.log_path);
    pthread_mutex_unlock(&g_ag.mu);
    int64_t end = mono_ms() + 5000;
    while (!strstr(slurp(path), "ready") && mono_ms() < end)
        usleep(20000);
    json_t *stop = json_pack("{s:s, s:s, s:i, s:I, s:i, s:s}", "type", "stop", "job_id", "pre",
                             "attempt", 1, "epoch", (json_int_t)1, "rank", 0, "why", "preempt");
    fg_agent_stop_msg(&g_ag.nodes[0], stop);
    json_decref(stop);
    a = wait_exited("pre", 4000); /* well before the 5 s grace */
    assert_non_null(a);
    assert_string_equal(fg_attempt_end_cause(a), "preempted");
    assert_int_equal(a->ex.code, 0);
    assert_non_null(strstr(slurp(path), "preempt "));
}

/* A cancel that arrives right after the start, before the agent has even learned the
 * job's pid (launches do not wait for it), still stops the job. */
static void stop_right_after_start(void **state)
{
    (void)state;
    int64_t t0 = mono_ms();
    start("{\"type\":\"start\",\"job_id\":\"quick\",\"attempt\":1,\"epoch\":1,"
          "\"command\":\"sleep 100 & wait\",\"gpus\":[4],\"grace_s\":5,\"user\":\"alice\"}");
    json_t *stop = json_pack("{s:s, s:s, s:i, s:I, s:i, s:s}", "type", "stop", "job_id", "quick",
                             "attempt", 1, "epoch", (json_int_t)1, "rank", 0, "why", "cancel");
    fg_agent_stop_msg(&g_ag.nodes[0], stop);
    json_decref(stop);
    fg_attempt_t *a = wait_exited("quick", 4000); /* SIGTERM, not the 5 s grace */
    assert_non_null(a);
    assert_true(mono_ms() - t0 < 4000);
    assert_string_equal(fg_attempt_end_cause(a), "cancelled");
    assert_int_equal(a->ex.signal, SIGTERM);
    assert_false(fg_proc_group_alive(&a->proc));
}

/* A stop for an attempt this node never had is answered (exited, "not running"); a stale
 * stop for it is not. */
static void stop_for_unknown_attempt(void **state)
{
    (void)state;
    json_t *stop = json_pack("{s:s, s:s, s:i, s:I, s:s}", "type", "stop", "job_id", "ghost",
                             "attempt", 1, "epoch", (json_int_t)1, "why", "cancel");
    fg_agent_stop_msg(&g_ag.nodes[0], stop);
    json_decref(stop);
    pthread_mutex_lock(&g_ag.mu);
    fg_attempt_t *a = fg_attempt_find(&g_ag.nodes[0], "ghost", 1, 0);
    assert_non_null(a);
    assert_true(a->phantom && a->exited);
    assert_string_equal(fg_attempt_end_cause(a), "cancelled");
    assert_string_equal(a->error, "not running on this node");
    pthread_mutex_unlock(&g_ag.mu);
    stop = json_pack("{s:s, s:s, s:i, s:I, s:s}", "type", "stop", "job_id", "ghost2", "attempt", 1,
                     "epoch", (json_int_t)1, "why", "stale");
    fg_agent_stop_msg(&g_ag.nodes[0], stop);
    json_decref(stop);
    pthread_mutex_lock(&g_ag.mu);
    assert_null(fg_attempt_find(&g_ag.nodes[0], "ghost2", 1, 0));
    pthread_mutex_unlock(&g_ag.mu);
}

/* Ids that could escape the work dir are refused; starts from an older epoch too. */
static void refuses_bad_ids_and_old_epochs(void **state)
{
    (void)state;
    start("{\"type\":\"start\",\"job_id\":\"../x\",\"attempt\":1,\"epoch\":1,"
          "\"command\":\"true\",\"user\":\"alice\"}");
    pthread_mutex_lock(&g_ag.mu);
    assert_null(fg_attempt_find(&g_ag.nodes[0], "../x", 1, 0));
    g_ag.nodes[0].max_epoch = 5;
    pthread_mutex_unlock(&g_ag.mu);
    start("{\"type\":\"start\",\"job_id\":\"old\",\"attempt\":1,\"epoch\":4,"
          "\"command\":\"true\",\"user\":\"alice\"}");
    pthread_mutex_lock(&g_ag.mu);
    assert_null(fg_attempt_find(&g_ag.nodes[0], "old", 1, 0));
    g_ag.nodes[0].max_epoch = 0;
    pthread_mutex_unlock(&g_ag.mu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(start_messages_get_exactly_their_gpus),
        cmocka_unit_test(local_time_limit_then_grace_then_sigkill),
        cmocka_unit_test(preempt_writes_notice_then_terminates),
        cmocka_unit_test(stop_right_after_start),
        cmocka_unit_test(stop_for_unknown_attempt),
        cmocka_unit_test(refuses_bad_ids_and_old_epochs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
