/*
 * main.c - `fairgpu server`: settings, the store, the scheduler thread, the HTTP
 * server, and a clean shutdown on SIGINT/SIGTERM.
 *
 * Start order: parse and check every setting; open the store (new epoch, agent
 * token); load the model; rebuild the core; block SIGINT/SIGTERM in this thread (so
 * every thread started after inherits the mask); start the scheduler thread and the
 * HTTP engine; print where it listens; sigwait. Stop order: HTTP first (no new
 * requests, parked ones answered), then the scheduler (its last iteration saves
 * fair-share usage), then the store (queued units commit first).
 */
#include "common/commands.h"
#include "common/log.h"
#include "server/server.h"

#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fg_cmd_server(int argc, char **argv)
{
    srv_t *s = calloc(1, sizeof *s);
    if (!s)
        return 1;
    int rc = srv_config_parse(&s->cfg, argc, argv);
    if (rc) {
        free(s);
        return rc > 0 ? 0 : 2;
    }
    fg_log_set_level(s->cfg.log_level);
    /* Requests allocate and free many small objects from several threads: keep freed
     * memory instead of returning it to the kernel and faulting it back (measured: page
     * faults were ~4% of a worker's time under load). */
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    mallopt(M_TOP_PAD, 16 << 20);
    mallopt(M_MMAP_THRESHOLD, 4 << 20);
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->sched_mu, NULL);
    pthread_cond_init(&s->sched_cv, NULL);
    pthread_mutex_init(&s->wait_mu, NULL);
    if (srv_auth_init(s))
        return 1;
    if (srv_persist_open(s))
        return 1;
    if ((rc = srv_persist_load(s)) != 0) {
        fprintf(stderr, "fairgpu server: cannot load the database: %s\n", fg_store_strerror(rc));
        return 1;
    }
    if (!srv_core_build(s)) {
        fprintf(stderr, "fairgpu server: the scheduler core refused the configuration\n");
        return 1;
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (srv_sched_start(s)) {
        fprintf(stderr, "fairgpu server: cannot start the scheduler thread\n");
        return 1;
    }
    if (srv_http_start(s)) {
        srv_sched_stop(s);
        srv_persist_close(s);
        return 1;
    }
    pthread_mutex_lock(&s->mu);
    size_t nusers = s->nusers, njobs = (size_t)s->max_job_id;
    pthread_mutex_unlock(&s->mu);
    printf("fairgpu server listening on http://%s:%d (epoch %lld, %zu users, %zu jobs)\n",
           s->cfg.listen_host, s->cfg.listen_port, (long long)s->epoch, nusers, njobs);
    printf("data dir: %s; agent token: %s/agent.token\n", s->cfg.data_dir, s->cfg.data_dir);
    if (nusers == 0)
        printf("no users yet: the first to register becomes admin, e.g.\n"
               "  curl -X POST http://%s:%d/v1/users -H 'Content-Type: application/json' \\\n"
               "       -d '{\"username\":\"admin\",\"email\":\"admin@example.com\","
               "\"password\":\"change-me-please\"}'\n"
               "  (or: FAIRGPU_URL=http://%s:%d fairgpu user create ...)\n",
               s->cfg.listen_host, s->cfg.listen_port, s->cfg.listen_host, s->cfg.listen_port);
    if (s->cfg.fast_password_hash)
        printf("WARNING: --insecure-fast-password-hash is on: passwords are hashed with minimal "
               "cost (tests only)\n");
    fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    fg_log(FG_LOG_INFO, "signal %d: shutting down", sig);
    srv_http_stop(s);
    srv_sched_stop(s);
    srv_persist_close(s);
    fg_log(FG_LOG_INFO, "stopped cleanly");
    return 0;
}
