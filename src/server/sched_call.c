/*
 * sched_call.c - how HTTP threads talk to the scheduler thread: messages posted to its
 * inbox, and the answers they wait for.
 *
 * The scheduler thread is the only owner of the core, so every change that needs a
 * decision (submit, cancel, agent reports, registrations, drains) is a message. A
 * caller either waits on a srv_sync_t (srv_sched_wait: tests, start-up) or parks its
 * connection (srv_sched_call: no worker thread is held); the scheduler answers after
 * the iteration's commit, so an answer never shows a change the store lacks.
 * Example: POST /v1/jobs/7/cancel posts MSG_CANCEL with srv_sched_call_job(r, m, 7);
 * after the commit the request resumes in sched_resume and renders job 7 as CANCELLED.
 */
#include "server/sched_int.h"

#include "common/xalloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void srv_sync_init(srv_sync_t *y)
{
    memset(y, 0, sizeof *y);
    pthread_mutex_init(&y->mu, NULL);
    pthread_cond_init(&y->cv, NULL);
}

void srv_sync_wait(srv_sync_t *y)
{
    pthread_mutex_lock(&y->mu);
    while (!y->done)
        pthread_cond_wait(&y->cv, &y->mu);
    pthread_mutex_unlock(&y->mu);
}

void srv_sync_destroy(srv_sync_t *y)
{
    pthread_mutex_destroy(&y->mu);
    pthread_cond_destroy(&y->cv);
    if (y->reply)
        json_decref(y->reply);
}

/* Wakes y's caller: resumes its parked connection, or signals its waiting thread. */
void srv__sync_done(srv_sync_t *y)
{
    if (y->conn) {
        /* an asynchronous caller: y belongs to its request, which may run (and finish)
         * as soon as it is resumed; touch nothing of y after that */
        srv_t *s = y->srv;
        y->done = true;
        hd_resume(y->conn);
        atomic_fetch_sub(&s->async_inflight, 1);
        return;
    }
    pthread_mutex_lock(&y->mu);
    y->done = true;
    pthread_cond_signal(&y->cv);
    pthread_mutex_unlock(&y->mu);
}

/* Records an error answer for y's caller (sent at the commit). */
void srv__sync_error(srv_sync_t *y, int status, const char *code, const char *fmt, ...)
{
    if (!y)
        return;
    y->status = status;
    snprintf(y->code, sizeof y->code, "%s", code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(y->msg, sizeof y->msg, fmt, ap);
    va_end(ap);
}

/* Records a success answer for y's caller; takes reply. */
void srv__sync_ok(srv_sync_t *y, int status, json_t *reply)
{
    if (!y) {
        json_decref(reply);
        return;
    }
    y->status = status;
    if (y->reply)
        json_decref(y->reply);
    y->reply = reply;
}

srv_msg_t *srv_msg_new(int kind)
{
    srv_msg_t *m = fg_xcalloc(1, sizeof *m);
    m->kind = kind;
    return m;
}

void srv_msg_free(srv_msg_t *m)
{
    if (!m)
        return;
    if (m->json)
        json_decref(m->json);
    for (size_t i = 0; i < m->nslots; i++) {
        srv_msg_free(m->slots[i].m);
        json_decref(m->slots[i].error);
    }
    free(m->slots);
    free(m);
}

void srv_sched_post(srv_t *s, srv_msg_t *m)
{
    pthread_mutex_lock(&s->sched_mu);
    m->next = NULL;
    bool was_empty = s->inbox_head == NULL;
    if (s->inbox_tail)
        s->inbox_tail->next = m;
    else
        s->inbox_head = m;
    s->inbox_tail = m;
    /* one wake-up per batch: whoever made the inbox non-empty signalled already */
    if (was_empty)
        pthread_cond_signal(&s->sched_cv);
    pthread_mutex_unlock(&s->sched_mu);
}

void srv_sched_wait(srv_t *s, srv_msg_t *m, srv_sync_t *y)
{
    srv_sync_init(y);
    m->sync = y;
    srv_sched_post(s, m);
    srv_sync_wait(y);
}

void srv_sync_free(void *p)
{
    srv_sync_t *y = p;
    srv_sync_destroy(y);
    free(y);
}

/* Second half of an asynchronous call: the scheduler has answered. */
static int sched_resume(srv_req_t *r)
{
    srv_t *s = r->srv;
    srv_sync_t *y = r->ctx;
    if (y->status < 400 && y->render_job) {
        pthread_mutex_lock(&s->mu);
        srv_job_t *j = srv_job_get(s, y->render_job);
        if (j && !srv_job_published(s, j)) { /* changed again since the call's commit */
            pthread_mutex_unlock(&s->mu);
            return srv_park_unpublished(r); /* (runs this again after the next commit) */
        }
        json_t *o = j ? srv_job_json(s, j, true) : json_object();
        pthread_mutex_unlock(&s->mu);
        return srv_reply_json(r, 200, o);
    }
    if (y->reply) {
        json_t *o = y->reply;
        y->reply = NULL;
        return srv_reply_json(r, (unsigned)(y->status ? y->status : 200), o);
    }
    if (y->status >= 400)
        return srv_reply_error(r, (unsigned)y->status, y->code, NULL, "%s", y->msg);
    return srv_reply_json(r, 200, json_object());
}

int srv_sched_call_job(srv_req_t *r, srv_msg_t *m, uint64_t render_job)
{
    srv_t *s = r->srv;
    atomic_fetch_add(&s->async_inflight, 1);
    if (atomic_load(&s->stopping)) {
        atomic_fetch_sub(&s->async_inflight, 1);
        srv_msg_free(m);
        return srv_reply_error(r, 503, "unavailable", NULL, "the server is shutting down");
    }
    srv_sync_t *y = fg_xmalloc(sizeof *y);
    srv_sync_init(y);
    y->srv = s;
    y->conn = r->conn;
    y->render_job = render_job;
    m->sync = y;
    r->ctx = y;
    r->ctx_free = srv_sync_free;
    r->resume = sched_resume;
    srv_park_request(r);
    srv_sched_post(s, m);
    return SRV_YES;
}

int srv_sched_call(srv_req_t *r, srv_msg_t *m)
{
    return srv_sched_call_job(r, m, 0);
}
