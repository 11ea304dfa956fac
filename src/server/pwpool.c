/*
 * pwpool.c - password hashing and verification (Argon2id) on a small bounded pool of
 * threads, off the HTTP workers.
 *
 * One Argon2id at the interactive cost takes ~0.1 s of a core and 64 MiB; run on the
 * HTTP workers, a flood of logins held every worker and delayed every other request,
 * the agents' heartbeats included. Here a handler calls srv_pw_verify, srv_pw_login or
 * srv_pw_hash: the first time, the work is queued and the request parked (the engine's
 * parking: a flag, no thread waits); a pool thread does the work and resumes the
 * request; its handler runs again from its start, and reaching the same call (the
 * n-th call of the run gets the n-th result) gets the kept result. The queue is
 * bounded (password-queue): when it is full the request is answered 429 rate_limited
 * with Retry-After, and so is a job that waited over 10 s. The pool's threads
 * (password-threads) run at nice 10, below the HTTP workers, so that hashing only uses
 * the CPU the workers leave.
 *
 * Example: POST /v1/sessions arrives on worker 3; the handler reads the user's hash
 * and calls srv_pw_login, which queues a verify and parks. Thread fg-password-0
 * verifies (0.1 s) and resumes the connection; worker 3 runs the handler again, which
 * reaches srv_pw_login, gets "wrong password", and answers 401.
 *
 * Lock model: pool->mu guards the queue. A queued job belongs to the pool until the
 * pool resumes its request (it writes the result first and touches nothing after);
 * then to the request, which frees it (srv_pw_req_free).
 */
#define _GNU_SOURCE /* gettid */
#include "server/server.h"

#include "common/log.h"
#include "common/xalloc.h"

#include <assert.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#define SRV_PW_CALLS 2 /* password calls of one handler run (PATCH /v1/me: verify, hash) */

enum { PW_VERIFY = 1, PW_HASH };

#define PW_STALE_MS 10000 /* a job that waited longer is answered 429, not done */

typedef struct pw_job {
    int kind;
    char *pw;   /* a copy, wiped when freed */
    char *hash; /* PW_VERIFY: the stored hash (NULL: the dummy); PW_HASH: the result */
    int rc;     /* 0: done; -1: failed or cancelled; -2: waited too long, not done */
    int64_t queued_ms;
    bool ok; /* PW_VERIFY: the password matches */
    bool charged;
    hd_conn_t *conn;
    struct pw_job *next;
} pw_job_t;

typedef struct srv_pwpool srv_pwpool_t;

struct srv_pwstate {
    int n;
    pw_job_t *res[SRV_PW_CALLS];
};

struct srv_pwpool {
    srv_t *s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pw_job_t *head, *tail; /* (mu) */
    int queued;            /* (mu) */
    bool stop;             /* (mu) */
    int nth;
    pthread_t *th;
};

/* Does one job (a pool thread, no lock held). */
static void pw_work(srv_t *s, pw_job_t *j)
{
    if (j->kind == PW_VERIFY) {
        j->ok = srv_password_verify(s, j->hash, j->pw);
        j->rc = 0;
    } else {
        char *h = NULL;
        j->rc = srv_password_hash(s, j->pw, &h);
        j->hash = h;
    }
}

static void *pw_main(void *arg)
{
    srv_pwpool_t *p = arg;
    prctl(PR_SET_NAME, "fg-password"); /* as top -H and ps -L show it */
    /* below the HTTP workers: a thread's nice value is its own on Linux */
    if (setpriority(PRIO_PROCESS, (id_t)gettid(), 10) != 0)
        fg_log(FG_LOG_DEBUG, "password pool: cannot lower its priority");
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->head && !p->stop)
            pthread_cond_wait(&p->cv, &p->mu);
        pw_job_t *j = p->head;
        if (!j) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        p->head = j->next;
        if (!p->head)
            p->tail = NULL;
        p->queued--;
        bool cancel = p->stop;
        pthread_mutex_unlock(&p->mu);
        if (cancel)
            j->rc = -1;
        else if (srv_now_ms() - j->queued_ms > PW_STALE_MS)
            j->rc = -2; /* its client has likely given up: not worth 0.1 s of a core */
        else
            pw_work(p->s, j);
        hd_conn_t *c = j->conn;
        hd_resume(c); /* (j is the request's from here on) */
    }
}

int srv_pwpool_start(srv_t *s)
{
    srv_pwpool_t *p = fg_xcalloc(1, sizeof *p);
    p->s = s;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->th = fg_xcalloc((size_t)s->cfg.password_threads, sizeof *p->th);
    for (int i = 0; i < s->cfg.password_threads; i++) {
        if (pthread_create(&p->th[i], NULL, pw_main, p) != 0)
            break;
        p->nth++;
    }
    s->pwpool = p;
    if (p->nth == 0) {
        srv_pwpool_stop(s);
        return -1;
    }
    return 0;
}

void srv_pwpool_stop(srv_t *s)
{
    srv_pwpool_t *p = s->pwpool;
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->nth; i++)
        pthread_join(p->th[i], NULL);
    assert(!p->head);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->th);
    free(p);
    s->pwpool = NULL;
}

static void job_free(pw_job_t *j)
{
    if (j->pw) {
        sodium_memzero(j->pw, strlen(j->pw));
        free(j->pw);
    }
    free(j->hash);
    free(j);
}

void srv_pw_req_free(srv_req_t *r)
{
    if (!r->pw)
        return;
    for (int i = 0; i < r->pw->n; i++)
        job_free(r->pw->res[i]);
    free(r->pw);
    r->pw = NULL;
}

/* The handler's next password call: its kept result (1, *out), or queues it and parks
 * the request (0), or answers 429/503 (0). */
static int pw_call(srv_req_t *r, int kind, const char *hash, const char *pw, pw_job_t **out)
{
    srv_t *s = r->srv;
    if (!r->pw)
        r->pw = fg_xcalloc(1, sizeof *r->pw);
    int i = r->pw_call++;
    assert(i < SRV_PW_CALLS);
    if (i < r->pw->n) {
        *out = r->pw->res[i];
        if ((*out)->rc == -2) {
            srv_reply_rate_limited(r, 1, "too many password checks are waiting; retry later");
            return 0;
        }
        return 1;
    }
    srv_pwpool_t *p = s->pwpool;
    if (!p || atomic_load(&s->stopping)) {
        srv_reply_error(r, 503, "unavailable", NULL, "the server is stopping");
        return 0;
    }
    pw_job_t *j = fg_xcalloc(1, sizeof *j);
    j->kind = kind;
    j->pw = fg_xstrdup(pw);
    j->hash = hash ? fg_xstrdup(hash) : NULL;
    j->conn = r->conn;
    j->queued_ms = srv_now_ms();
    pthread_mutex_lock(&p->mu);
    if (p->queued >= s->cfg.password_queue || p->stop) {
        pthread_mutex_unlock(&p->mu);
        job_free(j);
        srv_reply_rate_limited(r, 1, "too many password checks are waiting; retry later");
        return 0;
    }
    r->pw->res[r->pw->n++] = j;
    srv_park_request(r); /* before the job can be done and resume it */
    if (p->tail)
        p->tail->next = j;
    else
        p->head = j;
    p->tail = j;
    p->queued++;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return 0;
}

int srv_pw_verify(srv_req_t *r, const char *hash, const char *pw, bool *ok)
{
    pw_job_t *j;
    int rc = pw_call(r, PW_VERIFY, hash, pw, &j);
    if (rc <= 0)
        return rc;
    *ok = j->rc == 0 && j->ok;
    return j->rc == 0 ? 1 : -1;
}

int srv_pw_hash(srv_req_t *r, const char *pw, char **out)
{
    pw_job_t *j;
    int rc = pw_call(r, PW_HASH, NULL, pw, &j);
    if (rc <= 0)
        return rc;
    if (j->rc != 0 || !j->hash)
        return -1;
    *out = fg_xstrdup(j->hash);
    return 1;
}

int srv_pw_login(srv_req_t *r, const char *username, const char *hash, const char *pw, bool *ok)
{
    srv_t *s = r->srv;
    double retry = 1;
    bool first = !r->pw || r->pw_call >= r->pw->n; /* not verified yet */
    if (first && s->login_user_lim && !srv_limiter_peek(s->login_user_lim, username, &retry)) {
        srv_reply_rate_limited(r, retry, "too many failed logins for this user; retry later");
        return 0;
    }
    pw_job_t *j;
    int rc = pw_call(r, PW_VERIFY, hash, pw, &j);
    if (rc <= 0)
        return rc;
    *ok = j->rc == 0 && j->ok;
    if (!*ok && !j->charged) { /* a failed login costs its username and its address */
        j->charged = true;
        if (s->login_user_lim)
            srv_limiter_charge(s->login_user_lim, username);
        if (s->login_addr_lim) {
            char addr[64];
            srv_client_addr(r, addr, sizeof addr);
            srv_limiter_charge(s->login_addr_lim, addr);
        }
    }
    return j->rc == 0 ? 1 : -1;
}
