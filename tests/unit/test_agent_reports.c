/*
 * test_agent_reports.c - the parser of POST /v1/agent/reports (several started/exited
 * reports in one request): each entry is validated exactly as its own route would
 * validate it, a refused entry is answered in its slot without touching the others, and
 * a malformed batch (no array, empty, too long) is refused as a whole; an exited
 * report's last_checkpoint_ms is kept, clamped or refused.
 */
#include "server/server.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* A request of node n1's credential that keeps its replies instead of sending them. */
static srv_req_t capture_req(void)
{
    srv_req_t r;
    memset(&r, 0, sizeof r);
    r.capture = true;
    r.agent = true;
    snprintf(r.agent_node, sizeof r.agent_node, "n1");
    return r;
}

static json_t *exited(const char *job, int attempt, long long epoch, const char *cause)
{
    return json_pack("{s:s, s:s, s:s, s:i, s:I, s:i, s:i, s:n, s:s, s:I, s:I}", "type", "exited",
                     "node", "n1", "job_id", job, "attempt", attempt, "epoch", (json_int_t)epoch,
                     "rank", 0, "exit_code", 3, "signal", "end_cause", cause, "end_time_ms",
                     (json_int_t)1790000000123LL, "log_bytes", (json_int_t)17);
}

static const char *slot_field(const srv_report_slot_t *sl)
{
    return json_string_value(json_object_get(sl->error, "field"));
}

static void test_entries_parsed_and_refused_alone(void **state)
{
    (void)state;
    json_t *reps = json_array();
    json_array_append_new(reps, exited("12", 2, 5, "failed"));
    json_array_append_new(reps, json_pack("{s:s, s:s, s:s, s:i, s:I, s:I}", "type", "started",
                                          "node", "n1", "job_id", "13", "attempt", 1, "epoch",
                                          (json_int_t)5, "start_time_ms", (json_int_t)42));
    json_array_append_new(reps, exited("14", 1, 5, "exploded"));
    json_array_append_new(reps, exited("not-a-job", 1, 5, "completed"));
    json_array_append_new(reps, json_pack("{s:s}", "type", "logs"));
    json_array_append_new(reps, json_integer(7));
    json_t *o = exited("15", 1, 5, "completed");
    json_object_del(o, "epoch");
    json_array_append_new(reps, o);
    o = exited("16", 1, 5, "failed"); /* another node's report, under n1's credential */
    json_object_set_new(o, "node", json_string("n2"));
    json_array_append_new(reps, o);
    json_t *body = json_pack("{s:s, s:o}", "node", "n1", "reports", reps);
    srv_req_t r = capture_req();
    srv_msg_t *m = srv_agent_parse_reports(&r, body);
    assert_non_null(m);
    assert_null(r.captured); /* the request as a whole was not refused */
    assert_int_equal(m->kind, MSG_REPORTS);
    assert_int_equal(m->nslots, 8);
    srv_report_slot_t *sl = m->slots;
    /* 0: an exited report with every field */
    assert_non_null(sl[0].m);
    assert_int_equal(sl[0].m->kind, MSG_EXITED);
    assert_int_equal(sl[0].m->job, 12);
    assert_int_equal(sl[0].m->attempt, 2);
    assert_int_equal(sl[0].m->epoch, 5);
    assert_int_equal(sl[0].m->cause, FG_END_FAILED);
    assert_true(sl[0].m->has_exit);
    assert_int_equal(sl[0].m->exit_code, 3);
    assert_false(sl[0].m->has_signal);
    assert_int_equal(sl[0].m->end_ms, 1790000000123LL);
    assert_int_equal(sl[0].m->log_bytes, 17);
    assert_string_equal(sl[0].m->node, "n1");
    /* 1: a started report */
    assert_non_null(sl[1].m);
    assert_int_equal(sl[1].m->kind, MSG_STARTED);
    assert_int_equal(sl[1].m->job, 13);
    assert_int_equal(sl[1].m->start_ms, 42);
    /* 2..6: refused alone, with the answer their own route would give */
    assert_null(sl[2].m);
    assert_int_equal(sl[2].status, 400);
    assert_string_equal(slot_field(&sl[2]), "end_cause");
    assert_null(sl[3].m);
    assert_int_equal(sl[3].status, 404);
    assert_string_equal(slot_field(&sl[3]), "job_id");
    assert_null(sl[4].m);
    assert_int_equal(sl[4].status, 400);
    assert_string_equal(slot_field(&sl[4]), "type");
    assert_null(sl[5].m);
    assert_int_equal(sl[5].status, 400);
    assert_string_equal(slot_field(&sl[5]), "reports");
    assert_null(sl[6].m);
    assert_int_equal(sl[6].status, 400);
    assert_string_equal(slot_field(&sl[6]), "epoch");
    /* 7: a node reports only as itself */
    assert_null(sl[7].m);
    assert_int_equal(sl[7].status, 403);
    assert_string_equal(slot_field(&sl[7]), "node");
    srv_msg_free(m);
    json_decref(body);
}

/* last_checkpoint_ms: kept when within the rank's end, absent = 0, clamped to the
 * end_time_ms when after it (and to the controller's clock + 5 s when far ahead),
 * refused (400, its field) when negative or not an integer. */
static void test_last_checkpoint_ms(void **state)
{
    (void)state;
    const long long end = 1790000000123LL;
    json_t *reps = json_array();
    json_t *o = exited("20", 1, 5, "preempted");
    json_object_set_new(o, "last_checkpoint_ms", json_integer(end - 60000));
    json_array_append_new(reps, o);
    json_array_append_new(reps, exited("21", 1, 5, "preempted"));
    o = exited("22", 1, 5, "preempted");
    json_object_set_new(o, "last_checkpoint_ms", json_integer(end + 5000));
    json_array_append_new(reps, o);
    o = exited("23", 1, 5, "preempted");
    json_object_set_new(o, "last_checkpoint_ms", json_integer(-1));
    json_array_append_new(reps, o);
    o = exited("24", 1, 5, "preempted");
    json_object_set_new(o, "last_checkpoint_ms", json_string("1790000000000"));
    json_array_append_new(reps, o);
    o = exited("25", 1, 5, "preempted"); /* no end_time_ms: far future -> now + 5 s */
    json_object_del(o, "end_time_ms");
    json_object_set_new(o, "last_checkpoint_ms", json_integer(INT64_MAX));
    json_array_append_new(reps, o);
    json_t *body = json_pack("{s:s, s:o}", "node", "n1", "reports", reps);
    srv_req_t r = capture_req();
    int64_t before = srv_now_ms();
    srv_msg_t *m = srv_agent_parse_reports(&r, body);
    int64_t after = srv_now_ms();
    assert_non_null(m);
    assert_int_equal(m->nslots, 6);
    srv_report_slot_t *sl = m->slots;
    assert_non_null(sl[0].m);
    assert_int_equal(sl[0].m->last_checkpoint_ms, end - 60000);
    assert_non_null(sl[1].m);
    assert_int_equal(sl[1].m->last_checkpoint_ms, 0);
    assert_non_null(sl[2].m);
    assert_int_equal(sl[2].m->last_checkpoint_ms, end);
    for (int i = 3; i <= 4; i++) {
        assert_null(sl[i].m);
        assert_int_equal(sl[i].status, 400);
        assert_string_equal(slot_field(&sl[i]), "last_checkpoint_ms");
    }
    assert_non_null(sl[5].m);
    assert_true(sl[5].m->last_checkpoint_ms >= before + 5000);
    assert_true(sl[5].m->last_checkpoint_ms <= after + 5000);
    srv_msg_free(m);
    json_decref(body);
}

static void expect_refused_whole(json_t *body)
{
    srv_req_t r = capture_req();
    srv_msg_t *m = srv_agent_parse_reports(&r, body);
    assert_null(m);
    assert_int_equal(r.captured_status, 400);
    json_t *e = json_object_get(r.captured, "error");
    assert_string_equal(json_string_value(json_object_get(e, "field")), "reports");
    json_decref(r.captured);
    json_decref(body);
}

static void test_malformed_batch_refused_whole(void **state)
{
    (void)state;
    expect_refused_whole(json_pack("{s:s}", "node", "n1"));
    expect_refused_whole(json_pack("{s:[]}", "reports"));
    expect_refused_whole(json_pack("{s:{}}", "reports"));
    json_t *many = json_array();
    for (int i = 0; i <= SRV_REPORTS_MAX; i++)
        json_array_append_new(many, exited("12", 1, 1, "completed"));
    expect_refused_whole(json_pack("{s:o}", "reports", many));
    /* exactly the maximum is accepted */
    json_t *max = json_array();
    for (int i = 0; i < SRV_REPORTS_MAX; i++)
        json_array_append_new(max, exited("12", 1, 1, "completed"));
    json_t *body = json_pack("{s:o}", "reports", max);
    srv_req_t r = capture_req();
    srv_msg_t *m = srv_agent_parse_reports(&r, body);
    assert_non_null(m);
    assert_int_equal(m->nslots, SRV_REPORTS_MAX);
    for (size_t i = 0; i < m->nslots; i++)
        assert_non_null(m->slots[i].m);
    srv_msg_free(m);
    json_decref(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entries_parsed_and_refused_alone),
        cmocka_unit_test(test_last_checkpoint_ms),
        cmocka_unit_test(test_malformed_batch_refused_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
