/*
 * config.c - settings of `fairgpu server`: defaults, a config file, then flags.
 *
 * The config file holds `key = value` lines (`#` starts a comment); every key is the
 * name of a long flag without its dashes (`listen = 127.0.0.1:8080`). Flags given on
 * the command line override the file. Every value is checked here, at start, and a bad
 * one stops the server with a sentence naming the setting.
 */
#include "server/server.h"

#include "common/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void srv_config_default(srv_config_t *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->listen_host, sizeof c->listen_host, "127.0.0.1");
    c->listen_port = 8080;
    c->registration_open = true;
    c->threads = 8;
    c->session_ttl_s = 7 * 86400;
    c->default_time_limit_s = 86400;
    c->max_time_limit_s = 30 * 86400;
    c->rate_limit_rps = 50;
    c->rate_limit_burst = 200;
    c->max_pending_per_user = 10000;
    c->commit_delay_us = 0;
    c->max_connections = 4096;
    c->heartbeat_interval_s = 2;
    c->charge_interval_s = 60;
    c->idle_util_pct = 5;
    c->idle_after_s = 1800;
    c->heartbeat_misses = 3;
    c->longpoll_max_s = 60;
    c->log_level = FG_LOG_INFO;
    fg_config_default(&c->core);
    /* ---- HTTP engine defences */
    c->head_timeout_s = 10;
    c->body_timeout_s = 60;
    c->max_conns_per_addr = 64;
    c->reserved_connections = -1; /* min(64, max-connections / 4), resolved after parsing */
    c->max_body_memory = 64 << 20;
    c->password_threads = 2;
    c->password_queue = 64;
    c->login_rate = 5;
    c->login_burst = 30;
    c->login_user_failures = 10;
}

/* Parses a duration: an integer of seconds, optionally followed by s, m, h or d. */
static int parse_duration(const char *v, int64_t *out)
{
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || end == v || n < 0)
        return -1;
    long long mul = 1;
    if (*end == 's')
        end++;
    else if (*end == 'm')
        mul = 60, end++;
    else if (*end == 'h')
        mul = 3600, end++;
    else if (*end == 'd')
        mul = 86400, end++;
    if (*end || n > LLONG_MAX / mul)
        return -1;
    *out = n * mul;
    return 0;
}

#define BAD(fmt, ...)                                                                              \
    do {                                                                                           \
        fprintf(stderr, "fairgpu server: %s: " fmt "\n", where, __VA_ARGS__);                      \
        return -1;                                                                                 \
    } while (0)

static int parse_int(const char *v, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || end == v || *end || n < lo || n > hi)
        return -1;
    *out = n;
    return 0;
}

static int parse_bool(const char *v, bool *out)
{
    if (!strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "1"))
        *out = true;
    else if (!strcmp(v, "off") || !strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "0"))
        *out = false;
    else
        return -1;
    return 0;
}

/* Parses the LAS queue thresholds: ascending positive GPU-seconds separated by commas
 * ("3600,36000,360000": four queues), at most FG_LAS_MAX_LEVELS - 1 of them. */
static int parse_las_thresholds(fg_config_t *core, const char *v)
{
    int64_t t[FG_LAS_MAX_LEVELS - 1];
    int n = 0;
    const char *p = v;
    for (;;) {
        char *end;
        errno = 0;
        long long x = strtoll(p, &end, 10);
        if (errno || end == p || x <= 0 || n == FG_LAS_MAX_LEVELS - 1 || (n > 0 && x <= t[n - 1]))
            return -1;
        t[n++] = x;
        if (!*end)
            break;
        if (*end != ',')
            return -1;
        p = end + 1;
    }
    core->las_levels = n + 1;
    memcpy(core->las_thresholds_gpu_s, t, sizeof t[0] * (size_t)n);
    return 0;
}

static int parse_listen(srv_config_t *c, const char *v)
{
    const char *colon = strrchr(v, ':');
    if (!colon || colon == v || (size_t)(colon - v) >= sizeof c->listen_host)
        return -1;
    long long port;
    if (parse_int(colon + 1, 1, 65535, &port))
        return -1;
    memcpy(c->listen_host, v, (size_t)(colon - v));
    c->listen_host[colon - v] = 0;
    c->listen_port = (int)port;
    return 0;
}

/* Applies one HTTP engine defence setting; 1 when `key` is not one of them, -1 bad. */
static int set_defence_opt(srv_config_t *c, const char *key, const char *v, const char *where)
{
    long long n;
    int64_t d;
    if (!strcmp(key, "head-timeout")) {
        if (parse_duration(v, &d) || d < 1 || d > 3600)
            BAD("head-timeout '%s' must be 1s..1h", v);
        c->head_timeout_s = (int)d;
    } else if (!strcmp(key, "body-timeout")) {
        if (parse_duration(v, &d) || d < 1 || d > 86400)
            BAD("body-timeout '%s' must be 1s..1d", v);
        c->body_timeout_s = (int)d;
    } else if (!strcmp(key, "max-connections-per-address")) {
        if (parse_int(v, 0, 1000000, &n))
            BAD("max-connections-per-address '%s' must be an integer, 0 = no cap", v);
        c->max_conns_per_addr = (int)n;
    } else if (!strcmp(key, "reserved-connections")) {
        if (parse_int(v, 0, 1000000, &n))
            BAD("reserved-connections '%s' must be an integer >= 0", v);
        c->reserved_connections = (int)n;
    } else if (!strcmp(key, "max-body-memory")) {
        if (parse_int(v, 1, 1 << 20, &n))
            BAD("max-body-memory '%s' must be MiB 1..1048576", v);
        c->max_body_memory = (int64_t)n << 20;
    } else if (!strcmp(key, "trusted-proxy")) {
        struct in_addr a;
        if (strlen(v) >= sizeof c->trusted_proxy || inet_pton(AF_INET, v, &a) != 1 || a.s_addr == 0)
            BAD("trusted-proxy '%s' must be an IPv4 address (e.g. 127.0.0.1)", v);
        snprintf(c->trusted_proxy, sizeof c->trusted_proxy, "%s", v);
        c->trusted_proxy_addr = a.s_addr;
    } else if (!strcmp(key, "password-threads")) {
        if (parse_int(v, 1, 64, &n))
            BAD("password-threads '%s' must be an integer 1..64", v);
        c->password_threads = (int)n;
    } else if (!strcmp(key, "password-queue")) {
        if (parse_int(v, 1, 100000, &n))
            BAD("password-queue '%s' must be an integer 1..100000", v);
        c->password_queue = (int)n;
    } else if (!strcmp(key, "login-rate")) {
        if (parse_int(v, 0, 1000000, &n))
            BAD("login-rate '%s' must be logins/s per client address, 0 (off) .. 1000000", v);
        c->login_rate = (double)n;
    } else if (!strcmp(key, "login-burst")) {
        if (parse_int(v, 1, 1000000, &n))
            BAD("login-burst '%s' must be an integer 1..1000000", v);
        c->login_burst = (double)n;
    } else if (!strcmp(key, "login-user-failures")) {
        if (parse_int(v, 0, 1000000, &n))
            BAD("login-user-failures '%s' must be failed logins per minute, 0 = off", v);
        c->login_user_failures = (int)n;
    } else {
        return 1;
    }
    return 0;
}

/* Applies one setting `key` = `v`; `where` names its origin for messages. */
static int set_opt(srv_config_t *c, const char *key, const char *v, const char *where)
{
    long long n;
    int64_t d;
    if (!strcmp(key, "data-dir")) {
        if (!*v || strlen(v) >= sizeof c->data_dir)
            BAD("data-dir '%s' is empty or too long", v);
        snprintf(c->data_dir, sizeof c->data_dir, "%s", v);
    } else if (!strcmp(key, "listen")) {
        if (parse_listen(c, v))
            BAD("listen '%s' must be HOST:PORT with an IPv4 host and a port 1..65535", v);
    } else if (!strcmp(key, "registration")) {
        if (!strcmp(v, "open"))
            c->registration_open = true;
        else if (!strcmp(v, "closed"))
            c->registration_open = false;
        else
            BAD("registration '%s' must be 'open' or 'closed'", v);
    } else if (!strcmp(key, "metrics-access")) {
        if (!strcmp(v, "local"))
            c->metrics_access = SRV_METRICS_LOCAL;
        else if (!strcmp(v, "token"))
            c->metrics_access = SRV_METRICS_TOKEN;
        else if (!strcmp(v, "open"))
            c->metrics_access = SRV_METRICS_OPEN;
        else
            BAD("metrics-access '%s' must be 'local', 'token' or 'open'", v);
    } else if (!strcmp(key, "threads")) {
        if (parse_int(v, 1, 1024, &n))
            BAD("threads '%s' must be an integer 1..1024", v);
        c->threads = (int)n;
    } else if (!strcmp(key, "max-connections")) {
        if (parse_int(v, 16, 1000000, &n))
            BAD("max-connections '%s' must be an integer 16..1000000", v);
        c->max_connections = (int)n;
    } else if (!strcmp(key, "session-ttl")) {
        if (parse_duration(v, &d) || d < 60)
            BAD("session-ttl '%s' must be a duration of at least 60s (e.g. 7d)", v);
        c->session_ttl_s = d;
    } else if (!strcmp(key, "default-time-limit")) {
        if (parse_duration(v, &d) || d < 1)
            BAD("default-time-limit '%s' must be a positive duration (e.g. 24h)", v);
        c->default_time_limit_s = d;
    } else if (!strcmp(key, "max-time-limit")) {
        if (parse_duration(v, &d) || d < 1)
            BAD("max-time-limit '%s' must be a positive duration (e.g. 30d)", v);
        c->max_time_limit_s = d;
    } else if (!strcmp(key, "rate-limit")) {
        if (parse_int(v, 0, 10000000, &n))
            BAD("rate-limit '%s' must be requests per second per token, 0 (off) .. 10000000", v);
        c->rate_limit_rps = (double)n;
    } else if (!strcmp(key, "rate-burst")) {
        if (parse_int(v, 1, 10000000, &n))
            BAD("rate-burst '%s' must be an integer 1..10000000", v);
        c->rate_limit_burst = (double)n;
    } else if (!strcmp(key, "max-pending-per-user")) {
        if (parse_int(v, 0, 100000000, &n))
            BAD("max-pending-per-user '%s' must be an integer, 0 = no cap", v);
        c->max_pending_per_user = (int)n;
    } else if (!strcmp(key, "commit-delay-us")) {
        if (parse_int(v, 0, 100000, &n))
            BAD("commit-delay-us '%s' must be microseconds 0..100000, 0 = none", v);
        c->commit_delay_us = (int)n;
    } else if (!strcmp(key, "shed-pending")) {
        if (parse_int(v, 0, 100000000, &n))
            BAD("shed-pending '%s' must be an integer, 0 = never", v);
        c->core.shed_pending = (int32_t)n;
    } else if (!strcmp(key, "heartbeat-interval")) {
        if (parse_duration(v, &d) || d < 1 || d > 3600)
            BAD("heartbeat-interval '%s' must be 1s..1h", v);
        c->heartbeat_interval_s = (int)d;
    } else if (!strcmp(key, "charge-interval")) {
        if (parse_duration(v, &d) || d < 1 || d > 3600)
            BAD("charge-interval '%s' must be 1s..1h", v);
        c->charge_interval_s = (int)d;
    } else if (!strcmp(key, "idle-util-pct")) {
        if (parse_int(v, 1, 100, &n))
            BAD("idle-util-pct '%s' must be an integer 1..100", v);
        c->idle_util_pct = (int)n;
    } else if (!strcmp(key, "idle-after")) {
        if (parse_duration(v, &d) || d < 1 || d > 30 * 86400)
            BAD("idle-after '%s' must be a duration 1s..30d (e.g. 30m)", v);
        c->idle_after_s = d;
    } else if (!strcmp(key, "heartbeat-misses")) {
        if (parse_int(v, 1, 1000, &n))
            BAD("heartbeat-misses '%s' must be an integer 1..1000", v);
        c->heartbeat_misses = (int)n;
    } else if (!strcmp(key, "longpoll-max")) {
        if (parse_duration(v, &d) || d < 1 || d > 3600)
            BAD("longpoll-max '%s' must be 1s..1h", v);
        c->longpoll_max_s = d;
    } else if (!strcmp(key, "log-level")) {
        if (!strcmp(v, "debug"))
            c->log_level = FG_LOG_DEBUG;
        else if (!strcmp(v, "info"))
            c->log_level = FG_LOG_INFO;
        else if (!strcmp(v, "warn"))
            c->log_level = FG_LOG_WARN;
        else if (!strcmp(v, "error"))
            c->log_level = FG_LOG_ERROR;
        else
            BAD("log-level '%s' must be debug, info, warn or error", v);
    } else if (!strcmp(key, "insecure-fast-password-hash")) {
        bool b;
        if (parse_bool(v, &b))
            BAD("insecure-fast-password-hash '%s' must be on or off", v);
        c->fast_password_hash = b;
    } else if (!strcmp(key, "policy")) {
        int p = fg_policy_parse(v);
        if (p < 0)
            BAD("policy '%s' must be fair, wfq, fifo, priority, round-robin or las", v);
        c->core.policy = (fg_policy_t)p;
    } else if (!strcmp(key, "half-life")) {
        if (parse_duration(v, &d))
            BAD("half-life '%s' must be a duration (0 = no memory)", v);
        c->core.half_life_s = d;
    } else if (!strcmp(key, "backfill")) {
        if (parse_bool(v, &c->core.backfill))
            BAD("backfill '%s' must be on or off", v);
    } else if (!strcmp(key, "preemption")) {
        if (parse_bool(v, &c->core.preemption))
            BAD("preemption '%s' must be on or off", v);
    } else if (!strcmp(key, "quantum")) {
        if (parse_duration(v, &d))
            BAD("quantum '%s' must be a duration", v);
        c->core.quantum_s = d;
    } else if (!strcmp(key, "preempt-wait")) {
        if (parse_duration(v, &d))
            BAD("preempt-wait '%s' must be a duration", v);
        c->core.preempt_wait_s = d;
    } else if (!strcmp(key, "min-run")) {
        if (parse_duration(v, &d))
            BAD("min-run '%s' must be a duration", v);
        c->core.min_run_s = d;
    } else if (!strcmp(key, "las-thresholds")) {
        if (parse_las_thresholds(&c->core, v))
            BAD("las-thresholds '%s' must be 1..7 ascending positive GPU-seconds, "
                "comma-separated (e.g. 3600,36000,360000)",
                v);
    } else if (!strcmp(key, "retry-backoff")) {
        if (parse_duration(v, &d))
            BAD("retry-backoff '%s' must be a duration", v);
        c->core.retry_backoff_s = d;
    } else if (!strcmp(key, "retry-backoff-max")) {
        if (parse_duration(v, &d))
            BAD("retry-backoff-max '%s' must be a duration", v);
        c->core.retry_backoff_max_s = d;
    } else if (!strcmp(key, "backfill-depth")) {
        if (parse_int(v, 0, 100000000, &n))
            BAD("backfill-depth '%s' must be an integer >= 0", v);
        c->core.backfill_depth = (int32_t)n;
    } else if (!strcmp(key, "reserve-depth")) {
        if (parse_int(v, 0, 100000, &n))
            BAD("reserve-depth '%s' must be an integer >= 0", v);
        c->core.reserve_depth = (int32_t)n;
    } else if (!strcmp(key, "estimate-depth")) {
        if (parse_int(v, 0, 100000, &n))
            BAD("estimate-depth '%s' must be an integer >= 0", v);
        c->core.estimate_depth = (int32_t)n;
    } else {
        int rc = set_defence_opt(c, key, v, where);
        if (rc < 0)
            return -1;
        if (rc > 0)
            BAD("unknown setting '%s'", key);
    }
    return 0;
}

static int load_file(srv_config_t *c, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "fairgpu server: cannot read config file '%s': %s\n", path,
                strerror(errno));
        return -1;
    }
    char line[2048];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        size_t n = strlen(p);
        while (n && (p[n - 1] == '\n' || p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t'))
            p[--n] = 0;
        if (!*p)
            continue;
        char *eq = strchr(p, '=');
        char where[1200];
        snprintf(where, sizeof where, "%s:%d", path, lineno);
        if (!eq) {
            fprintf(stderr, "fairgpu server: %s: expected 'key = value'\n", where);
            rc = -1;
            break;
        }
        char *k = p, *v = eq + 1;
        char *ke = eq;
        while (ke > k && (ke[-1] == ' ' || ke[-1] == '\t'))
            ke--;
        *ke = 0;
        while (*v == ' ' || *v == '\t')
            v++;
        for (char *q = k; *q; q++)
            if (*q == '_')
                *q = '-';
        if (!strcmp(k, "config")) {
            fprintf(stderr, "fairgpu server: %s: 'config' cannot be set in a config file\n", where);
            rc = -1;
            break;
        }
        if (set_opt(c, k, v, where)) {
            rc = -1;
            break;
        }
    }
    fclose(f);
    return rc;
}

static void usage(FILE *f)
{
    fputs("usage: fairgpu server --data-dir DIR [--listen HOST:PORT] [--config FILE] [options]\n"
          "\n"
          "  --data-dir DIR             database, agent token (required)\n"
          "  --listen HOST:PORT         default 127.0.0.1:8080\n"
          "  --config FILE              key = value lines; flags override them\n"
          "  --registration open|closed anyone may register, or only admins (default open)\n"
          "  --metrics-access local|token|open  who reads /metrics: loopback peers,\n"
          "                             Bearer DATA_DIR/metrics.token, or anyone (default local)\n"
          "  --threads N                HTTP worker threads (default 8)\n"
          "  --max-connections N        (default 4096)\n"
          "  --session-ttl DUR          login session lifetime (default 7d)\n"
          "  --default-time-limit DUR   job time limit when none is given (default 24h)\n"
          "  --max-time-limit DUR       longest time limit accepted (default 30d)\n"
          "  --rate-limit N             requests/s per token, 0 = off (default 50)\n"
          "  --rate-burst N             token bucket size (default 200)\n"
          "  --max-pending-per-user N   pending job cap per user, 0 = none (default 10000)\n"
          "  --shed-pending N           refuse new low jobs at this many pending (0 = never)\n"
          "  --commit-delay-us N        group commit delay under load (default 0 = none)\n"
          "  --heartbeat-interval DUR   agent heartbeat period (default 2s)\n"
          "  --charge-interval DUR      live charging of running jobs (default 60s)\n"
          "  --heartbeat-misses N       node down after N missed heartbeats (default 3)\n"
          "  --idle-util-pct N          a GPU below N % is idle (default 5)\n"
          "  --idle-after DUR           a job whose GPUs all stay idle this long is flagged\n"
          "                             idle (default 30m; docs/idle.md)\n"
          "  --longpoll-max DUR         longest long-poll wait (default 60s)\n"
          "  --policy P                 fair|wfq|fifo|priority|round-robin|las (default fair)\n"
          "  --half-life DUR --backfill on|off --preemption on|off --quantum DUR\n"
          "  --preempt-wait DUR --min-run DUR --retry-backoff DUR --retry-backoff-max DUR\n"
          "  --backfill-depth N --reserve-depth N --estimate-depth N   scheduler tunables\n"
          "  --las-thresholds G1,G2,..  LAS queue limits in GPU-seconds, ascending\n"
          "                             (default 3600,36000,360000: four queues)\n"
          "  --log-level debug|info|warn|error\n"
          "  --insecure-fast-password-hash   minimal Argon2id cost; FOR TESTS ONLY\n"
          "HTTP engine defences:\n"
          "  --head-timeout DUR         a request head must arrive in this long (default 10s)\n"
          "  --body-timeout DUR         a request body must arrive in this long (default 60s)\n"
          "  --max-connections-per-address N   0 = no cap (default 64)\n"
          "  --reserved-connections N   of max-connections, for authenticated clients\n"
          "                             (default min(64, max-connections/4))\n"
          "  --max-body-memory MIB      request bodies held at once (default 64)\n"
          "  --trusted-proxy ADDR       believe X-Forwarded-For from this IPv4 peer\n"
          "  --password-threads N       Argon2id threads (default 2)\n"
          "  --password-queue N         password checks waiting at most (default 64)\n"
          "  --login-rate N             logins+registrations/s per client address, 0 = off\n"
          "                             (default 5)\n"
          "  --login-burst N            (default 30)\n"
          "  --login-user-failures N    failed logins per username per minute, 0 = off\n"
          "                             (default 10)\n"
          "\n"
          "Durations: seconds, or a number with s, m, h or d.\n",
          f);
}

int srv_config_parse(srv_config_t *c, int argc, char **argv)
{
    static const struct option opts[] = {
        {"data-dir", required_argument, 0, 0},
        {"listen", required_argument, 0, 0},
        {"config", required_argument, 0, 0},
        {"registration", required_argument, 0, 0},
        {"metrics-access", required_argument, 0, 0},
        {"threads", required_argument, 0, 0},
        {"max-connections", required_argument, 0, 0},
        {"session-ttl", required_argument, 0, 0},
        {"default-time-limit", required_argument, 0, 0},
        {"max-time-limit", required_argument, 0, 0},
        {"rate-limit", required_argument, 0, 0},
        {"rate-burst", required_argument, 0, 0},
        {"max-pending-per-user", required_argument, 0, 0},
        {"shed-pending", required_argument, 0, 0},
        {"commit-delay-us", required_argument, 0, 0},
        {"heartbeat-interval", required_argument, 0, 0},
        {"charge-interval", required_argument, 0, 0},
        {"heartbeat-misses", required_argument, 0, 0},
        {"idle-util-pct", required_argument, 0, 0},
        {"idle-after", required_argument, 0, 0},
        {"longpoll-max", required_argument, 0, 0},
        {"log-level", required_argument, 0, 0},
        {"insecure-fast-password-hash", no_argument, 0, 0},
        {"policy", required_argument, 0, 0},
        {"half-life", required_argument, 0, 0},
        {"backfill", required_argument, 0, 0},
        {"preemption", required_argument, 0, 0},
        {"quantum", required_argument, 0, 0},
        {"preempt-wait", required_argument, 0, 0},
        {"min-run", required_argument, 0, 0},
        {"las-thresholds", required_argument, 0, 0},
        {"retry-backoff", required_argument, 0, 0},
        {"retry-backoff-max", required_argument, 0, 0},
        {"backfill-depth", required_argument, 0, 0},
        {"reserve-depth", required_argument, 0, 0},
        {"estimate-depth", required_argument, 0, 0},
        /* ---- HTTP engine defences */
        {"head-timeout", required_argument, 0, 0},
        {"body-timeout", required_argument, 0, 0},
        {"max-connections-per-address", required_argument, 0, 0},
        {"reserved-connections", required_argument, 0, 0},
        {"max-body-memory", required_argument, 0, 0},
        {"trusted-proxy", required_argument, 0, 0},
        {"password-threads", required_argument, 0, 0},
        {"password-queue", required_argument, 0, 0},
        {"login-rate", required_argument, 0, 0},
        {"login-burst", required_argument, 0, 0},
        {"login-user-failures", required_argument, 0, 0},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    srv_config_default(c);
    /* The config file first, so that flags override it. */
    for (int i = 1; i < argc; i++) {
        const char *path = NULL;
        if (!strcmp(argv[i], "--config") && i + 1 < argc)
            path = argv[i + 1];
        else if (!strncmp(argv[i], "--config=", 9))
            path = argv[i] + 9;
        if (path && load_file(c, path))
            return -1;
    }
    optind = 1;
    opterr = 0;
    int idx;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
        if (ch == 'h') {
            usage(stdout);
            return 1;
        }
        if (ch == '?') {
            fprintf(stderr, "fairgpu server: unknown or incomplete option '%s'\n",
                    argv[optind - 1]);
            usage(stderr);
            return -1;
        }
        const char *name = opts[idx].name;
        if (!strcmp(name, "config"))
            continue;
        char where[128];
        snprintf(where, sizeof where, "--%s", name);
        if (set_opt(c, name, optarg ? optarg : "on", where))
            return -1;
    }
    if (optind < argc) {
        fprintf(stderr, "fairgpu server: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (!c->data_dir[0]) {
        fprintf(stderr, "fairgpu server: --data-dir DIR is required (where the database and "
                        "the agent token live)\n");
        return -1;
    }
    if (c->default_time_limit_s > c->max_time_limit_s) {
        fprintf(stderr,
                "fairgpu server: default-time-limit (%lld s) is over max-time-limit "
                "(%lld s)\n",
                (long long)c->default_time_limit_s, (long long)c->max_time_limit_s);
        return -1;
    }
    if (c->reserved_connections < 0)
        c->reserved_connections = c->max_connections / 4 < 64 ? c->max_connections / 4 : 64;
    if (c->reserved_connections >= c->max_connections) {
        fprintf(stderr,
                "fairgpu server: reserved-connections (%d) must be below max-connections (%d)\n",
                c->reserved_connections, c->max_connections);
        return -1;
    }
    const char *msg = NULL;
    if (fg_config_check(&c->core, &msg)) {
        fprintf(stderr, "fairgpu server: scheduler setting: %s\n", msg ? msg : "invalid");
        return -1;
    }
    return 0;
}
