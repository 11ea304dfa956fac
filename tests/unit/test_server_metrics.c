/*
 * test_server_metrics.c - what GET /metrics keeps between scrapes (src/server/metrics.c):
 * a duration lands in the first bucket whose bound it does not pass (bounds are
 * inclusive, as Prometheus' le); the job tally follows state changes by account,
 * priority and size class; committed ledger rows are counted by kind, skipped ones not;
 * Prometheus label values are escaped.
 */
#include "server/server.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static long bucket(const srv_hist_t *h, int k)
{
    return atomic_load(&h->n[k]);
}

/* 700 us -> le=0.001 (4th bound); exactly 1000 us too; 1001 us the next; 20 s +Inf. */
static void hist_buckets(void **state)
{
    (void)state;
    srv_hist_t h;
    memset(&h, 0, sizeof h);
    srv_hist_observe(&h, srv_pass_bounds_us, 700);
    srv_hist_observe(&h, srv_pass_bounds_us, 1000);
    srv_hist_observe(&h, srv_pass_bounds_us, 1001);
    srv_hist_observe(&h, srv_pass_bounds_us, 20000000);
    srv_hist_observe(&h, srv_pass_bounds_us, -5); /* a clock step: counted as 0 */
    assert_int_equal(srv_pass_bounds_us[3], 1000);
    assert_int_equal(bucket(&h, 0), 1); /* the -5 */
    assert_int_equal(bucket(&h, 3), 2);
    assert_int_equal(bucket(&h, 4), 1);
    assert_int_equal(bucket(&h, SRV_HIST_BUCKETS), 1);
    assert_int_equal(atomic_load(&h.sum_us), 700 + 1000 + 1001 + 20000000);
    for (int k = 1; k < SRV_HIST_BUCKETS; k++) { /* bounds increase */
        assert_true(srv_pass_bounds_us[k] > srv_pass_bounds_us[k - 1]);
        assert_true(srv_http_bounds_us[k] > srv_http_bounds_us[k - 1]);
    }
}

/* A job of account a, priority p, state st, g GPUs. */
static srv_job_t job(char *account, int prio, fg_job_state_t st, int gpus)
{
    srv_job_t j;
    memset(&j, 0, sizeof j);
    j.r.account = account;
    j.r.priority = prio;
    j.r.gpus = gpus;
    j.state = st;
    return j;
}

/* Moves j to state st as srv__set_state does: out of the tally, in again. */
static void move(srv_t *s, srv_job_t *j, fg_job_state_t st)
{
    srv_jobtally_count(s, j, -1);
    j->state = st;
    srv_jobtally_count(s, j, +1);
}

static const int64_t *row_of(srv_t *s, const char *account, int prio, int64_t n[3][6])
{
    for (size_t i = 0; i < srv_jobtally_accounts(s); i++)
        if (!strcmp(srv_jobtally_get(s, i, n), account))
            return n[prio];
    return NULL;
}

/* Two accounts: counts by state and priority, pending GPUs by size, priorities seen. */
static void tally_follows_states(void **state)
{
    (void)state;
    srv_t *s = calloc(1, sizeof *s);
    char vision[] = "vision", nlp[] = "nlp";
    srv_job_t a = job(vision, FG_PRIO_NORMAL, FG_JOB_PENDING, 8);
    srv_job_t b = job(vision, FG_PRIO_HIGH, FG_JOB_PENDING, 2);
    srv_job_t c = job(nlp, FG_PRIO_LOW, FG_JOB_PENDING, 16);
    srv_jobtally_count(s, &a, +1);
    srv_jobtally_count(s, &b, +1);
    srv_jobtally_count(s, &c, +1);
    int64_t pend[4];
    srv_jobtally_pending_gpus(s, pend);
    assert_int_equal(pend[0], 0);
    assert_int_equal(pend[1], 2);
    assert_int_equal(pend[2], 8);
    assert_int_equal(pend[3], 16);
    move(s, &a, FG_JOB_RUNNING);
    move(s, &a, FG_JOB_COMPLETED);
    move(s, &b, FG_JOB_RUNNING);
    srv_jobtally_pending_gpus(s, pend);
    assert_int_equal(pend[1] + pend[2], 0);
    assert_int_equal(pend[3], 16);
    int64_t n[3][6];
    assert_int_equal(srv_jobtally_accounts(s), 2);
    const int64_t *vn = row_of(s, "vision", FG_PRIO_NORMAL, n);
    assert_non_null(vn);
    assert_int_equal(vn[FG_JOB_COMPLETED], 1);
    assert_int_equal(vn[FG_JOB_PENDING] + vn[FG_JOB_RUNNING], 0);
    assert_int_equal(row_of(s, "vision", FG_PRIO_HIGH, n)[FG_JOB_RUNNING], 1);
    assert_int_equal(row_of(s, "nlp", FG_PRIO_LOW, n)[FG_JOB_PENDING], 1);
    /* vision had normal and high jobs, never low */
    size_t vi = !strcmp(srv_jobtally_get(s, 0, n), "vision") ? 0 : 1;
    assert_true(srv_jobtally_prio_seen(s, vi, FG_PRIO_NORMAL));
    assert_true(srv_jobtally_prio_seen(s, vi, FG_PRIO_HIGH));
    assert_false(srv_jobtally_prio_seen(s, vi, FG_PRIO_LOW));
    srv_jobtally_free(s);
    free(s);
}

/* Rows of a committed batch by kind and amount; a skipped op is not counted. */
static void ledger_counted(void **state)
{
    (void)state;
    srv_t *s = calloc(1, sizeof *s);
    fg_ledger_row_t rows[3];
    memset(rows, 0, sizeof rows);
    rows[0].kind = FG_ROW_CHARGE;
    rows[0].amount_micros = 5000;
    rows[1].kind = FG_ROW_REFUND;
    rows[1].amount_micros = -1200;
    rows[2].kind = FG_ROW_CHARGE;
    rows[2].amount_micros = 999; /* skipped */
    srv_batch_t b = {0};
    for (int i = 0; i < 3; i++)
        srv_batch_add(&b, OP_LEDGER, &rows[i]);
    srv_batch_add(&b, OP_AUDIT, NULL);
    b.ops[2].skipped = true;
    srv_metrics_ledger_committed(s, &b);
    assert_int_equal(atomic_load(&s->m.ledger_rows[FG_ROW_CHARGE]), 1);
    assert_int_equal(atomic_load(&s->m.ledger_rows[FG_ROW_REFUND]), 1);
    assert_int_equal(atomic_load(&s->m.ledger_micros[FG_ROW_CHARGE]), 5000);
    assert_int_equal(atomic_load(&s->m.ledger_micros[FG_ROW_REFUND]), -1200);
    srv_batch_free(&b);
    free(s);
}

static void label_escaped(void **state)
{
    (void)state;
    srv_buf_t b = {0};
    srv_prom_label(&b, "a\"b\\c\nd");
    srv_buf_put(&b, "", 1);
    assert_string_equal(b.p, "a\\\"b\\\\c\\nd");
    free(b.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hist_buckets),
        cmocka_unit_test(tally_follows_states),
        cmocka_unit_test(ledger_counted),
        cmocka_unit_test(label_escaped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
