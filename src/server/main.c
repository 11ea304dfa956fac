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
#define _GNU_SOURCE /* program_invocation_name */
#include "common/commands.h"
#include "common/log.h"
#include "server/server.h"

#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The controller keeps every job, event and database page it touches, so its heap only
 * grows, and each new 4 KiB page costs a page fault (~5% of a request worker's time
 * under load, measured). With glibc.malloc.hugetlb=1 glibc asks for transparent huge
 * pages (madvise) on the heap it grows: one fault per 2 MiB instead of 512. glibc
 * reads its tunables only when a process starts, so `fairgpu server` runs itself again
 * once with the tunable added, before anything is opened or started. An environment
 * that already names glibc.malloc.hugetlb is the operator's choice and is kept. If the
 * re-execution fails the server runs on with 4 KiB pages. */
static void exec_with_huge_pages(int argc, char **argv)
{
    const char *t = getenv("GLIBC_TUNABLES");
    if (t && strstr(t, "glibc.malloc.hugetlb"))
        return;
    char val[1024];
    int n = snprintf(val, sizeof val, "%s%sglibc.malloc.hugetlb=1", t ? t : "", t && *t ? ":" : "");
    if (n < 0 || (size_t)n >= sizeof val || setenv("GLIBC_TUNABLES", val, 1))
        return;
    char **av = calloc((size_t)argc + 2, sizeof *av);
    if (!av)
        return;
    av[0] = program_invocation_name; /* argv[0] of the process: this argv starts at "server" */
    memcpy(av + 1, argv, (size_t)argc * sizeof *av);
    execv("/proc/self/exe", av);
    fg_log(FG_LOG_DEBUG, "cannot run again with huge pages: %s", strerror(errno));
    free(av);
    if (t)
        setenv("GLIBC_TUNABLES", t, 1);
    else
        unsetenv("GLIBC_TUNABLES");
}

int fg_cmd_server(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--list-routes")) { /* hidden: for the route matrix test */
        srv_routes_print(stdout);
        return 0;
    }
    exec_with_huge_pages(argc, argv);
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
    char setup_path[1200];
    int setup = srv_setup_token_init(s, setup_path, sizeof setup_path);
    if (setup < 0)
        return 1;
    if (s->cfg.metrics_access == SRV_METRICS_TOKEN && srv_metrics_token_init(s))
        return 1;
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
    if (setup > 0)
        printf("no admin yet: the setup token in %s makes the first one, e.g.\n"
               "  fairgpu register --setup-token-file %s\n"
               "  (or POST /v1/users with \"setup_token\": the file's content)\n",
               setup_path, setup_path);
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
