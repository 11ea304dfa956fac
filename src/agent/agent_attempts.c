/*
 * agent_attempts.c - the attempt table: starting ranks from "start" messages, stopping
 * them (cancel, preemption, time limit, stale), noticing their end (the supervisor), and
 * the state files that let a restarted agent find ranks whose monitors still run.
 *
 * Stopping, step by step: for a preemption the FAIRGPU_PREEMPT file is written into the
 * checkpoint dir first; then SIGTERM goes to the job's whole process group and a SIGKILL
 * is scheduled `grace_s` later (group and cgroup). When the main process ends, its
 * monitor SIGKILLs whatever is left of the group, so no process of the attempt survives.
 */
#include "agent/agent.h"
#include "agent/account.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <sodium.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void fg_agent_wake(fg_agent_t *ag)
{
    char c = 1;
    if (write(ag->wake[1], &c, 1) < 0) {
        /* full pipe: the supervisor is already due to wake */
    }
}

/* Wakes one reporter worker (it wakes another if it leaves work behind: a broadcast
 * woke every worker of the node twice per rank, most of them for nothing). */
static void kick(fg_node_t *n)
{
    n->report_kick = 1;
    pthread_cond_signal(&n->report_cond);
}

const char *fg_why_to_cause(const char *why)
{
    if (!strcmp(why, "cancel"))
        return "cancelled";
    if (!strcmp(why, "preempt"))
        return "preempted";
    if (!strcmp(why, "timeout"))
        return "timeout";
    if (!strcmp(why, "peer_failed"))
        return "failed";
    if (!strcmp(why, "stale"))
        return "failed";
    return NULL;
}

const char *fg_attempt_end_cause(const fg_attempt_t *a)
{
    if (a->setup_failed || a->ex.setup_failed)
        return "user_setup_failed"; /* it never ran (a stop changes nothing) */
    if (a->stop_cause)
        return a->stop_cause;
    if (a->error[0] || a->ex.error[0])
        return "failed";
    return a->ex.code == 0 && a->ex.signal == 0 ? "completed" : "failed";
}

/* Job ids become path components: [A-Za-z0-9_.-]{1,64}, not "." or "..". */
static int valid_id(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64 || !strcmp(s, ".") || !strcmp(s, ".."))
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return 0;
    }
    return 1;
}

fg_attempt_t *fg_attempt_find(fg_node_t *n, const char *job_id, int attempt, int rank)
{
    for (fg_attempt_t *a = n->attempts; a; a = a->next)
        if (a->attempt == attempt && a->rank == rank && !strcmp(a->job_id, job_id))
            return a;
    return NULL;
}

int fg_node_recently_ended(fg_node_t *n, const char *key)
{
    for (unsigned i = 0; i < FG_ENDED_RING; i++)
        if (n->ended[i] && !strcmp(n->ended[i], key))
            return 1;
    return 0;
}

static void state_path(const fg_attempt_t *a, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/state/%s.json", a->node->work_dir, a->key);
}

/* WORK_DIR/spare: emptied logs and state files kept for reuse (fg_file_recycle). */
static void spare_path(const fg_node_t *n, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/spare", n->work_dir);
}

/* Writes the attempt's state file (in place: a torn file is ignored at load, which only
 * loses the adoption of that rank after an agent crash); called under ag->mu. */
static void state_save(const fg_attempt_t *a)
{
    char path[800];
    state_path(a, path, sizeof path);
    json_t *o =
        json_pack("{s:s, s:i, s:I, s:i, s:i, s:i, s:I, s:I, s:i, s:s, s:s, s:s, s:s, "
                  "s:s}",
                  "job_id", a->job_id, "attempt", a->attempt, "epoch", (json_int_t)a->epoch, "rank",
                  a->rank, "monitor", (int)a->proc.monitor, "pgid", (int)a->proc.pgid, "start_ms",
                  (json_int_t)a->start_ms, "deadline_ms", (json_int_t)a->deadline_ms, "grace_s",
                  a->grace_s, "run_dir", a->run_dir, "ckpt_dir", a->ckpt_dir, "log_path",
                  a->proc.log_path, "status_path", a->proc.status_path, "cgroup", a->proc.cgroup);
    if (!o)
        return;
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!text)
        return;
    char spare[700];
    spare_path(a->node, spare, sizeof spare);
    /* A recycled file (empty: no inode to allocate) is written without O_TRUNC: ext4
     * writes a file truncated to 0 back at its close (auto_da_alloc), a block I/O per
     * rank. A new file is not truncated either (O_TRUNC does nothing on creation). */
    int fd = -1;
    if (fg_file_reuse(path, spare, "state") == 0)
        fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        size_t len = strlen(text);
        if (write(fd, text, len) != (ssize_t)len)
            fg_log(FG_LOG_WARN, "node %s: cannot write %s", a->node->name, path);
        close(fd);
    }
    free(text);
}

void fg_attempt_forget_files(fg_attempt_t *a, int drop_log)
{
    char path[800];
    char spare[700];
    state_path(a, path, sizeof path);
    spare_path(a->node, spare, sizeof spare);
    fg_file_recycle(path, spare, "state");
    if (!drop_log || !a->launched)
        return;
    if (a->proc.log_path[0])
        fg_file_recycle(a->proc.log_path, spare, "log");
    if (a->proc.status_path[0])
        unlink(a->proc.status_path);
    if (a->run_dir[0])
        rmdir(a->run_dir); /* a rank's own directory (state files of older agents) */
}

void fg_attempt_remove(fg_attempt_t *a)
{
    fg_node_t *n = a->node;
    if (a->proc.life_fd >= 0)
        close(a->proc.life_fd);
    free(n->ended[n->ended_pos]);
    n->ended[n->ended_pos] = fg_xstrdup(a->key);
    n->ended_pos = (n->ended_pos + 1) % FG_ENDED_RING;
    for (fg_attempt_t **pp = &n->attempts; *pp; pp = &(*pp)->next) {
        if (*pp == a) {
            *pp = a->next;
            break;
        }
    }
    free(a->gpu_uuids);
    free(a);
}

void fg_attempt_begin_stop(fg_attempt_t *a, const char *why, int grace_s)
{
    if (a->exited)
        return;
    if (!strcmp(why, "stale"))
        a->silent = 1;
    if (!a->stop_cause)
        a->stop_cause = fg_why_to_cause(why);
    if (!a->launched)
        return; /* the launching thread applies the stop right after the launch */
    if (!strcmp(why, "preempt") && fg_write_preempt_notice(a->ckpt_dir, "preempt") != 0)
        fg_log(FG_LOG_WARN, "%s: cannot write the FAIRGPU_PREEMPT notice in %s", a->key,
               a->ckpt_dir);
    if (grace_s < 0)
        grace_s = a->grace_s;
    fg_log(FG_LOG_INFO, "node %s: stopping %s (%s, grace %ds)", a->node->name, a->key, why,
           grace_s);
    fg_proc_signal(&a->proc, SIGTERM);
    int64_t at = fg_now_ms() + (int64_t)grace_s * 1000;
    if (!a->kill_at_ms || at < a->kill_at_ms)
        a->kill_at_ms = at;
    fg_agent_wake(a->node->ag);
}

/* ------------------------------------------------------------ starting */

static const char *jstr(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int64_t jint(json_t *o, const char *k, int64_t dflt)
{
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

/* 8 hex digits that tell this node's work dir from any other's on the host: two agents
 * (of two clusters, or tests) whose nodes and jobs share names never share a cgroup,
 * while a restarted agent keeps its names. */
static void work_dir_tag(const char *work_dir, char tag[9])
{
    unsigned char h[crypto_generichash_BYTES_MIN];
    crypto_generichash(h, sizeof h, (const unsigned char *)work_dir, strlen(work_dir), NULL, 0);
    sodium_bin2hex(tag, 9, h, 4);
}

/* A job's default CPUs or memory when it asks for none (the API's rule): the node's
 * total divided by its GPUs, times the job's GPUs (at least 1), so that a job without
 * a request is still limited by its cgroup. 0 (no limit) when the total is unknown. */
static int64_t node_share(int64_t total, const json_t *gpus, int node_gpus)
{
    int64_t g = json_is_array(gpus) ? (int64_t)json_array_size(gpus) : 0;
    if (total <= 0 || node_gpus <= 0 || g <= 0)
        return 0;
    int64_t v = total * g / node_gpus;
    return v > 0 ? v : 1;
}

/* Marks a as ended without running (launch failure). Under ag->mu. */
static void fail_attempt(fg_attempt_t *a, const char *why)
{
    snprintf(a->error, sizeof a->error, "%s", why);
    a->exited = 1;
    a->ex.code = -1;
    a->ex.end_ms = fg_now_ms();
    a->log_done = 1;
    fg_log(FG_LOG_WARN, "node %s: %s not started: %s", a->node->name, a->key, why);
    kick(a->node);
}

typedef struct strlist {
    char **v;
    size_t n, cap;
} strlist_t;

static void sl_push(strlist_t *s, char *owned)
{
    s->v = fg_xgrow(s->v, &s->cap, s->n + 2, sizeof *s->v);
    s->v[s->n++] = owned;
    s->v[s->n] = NULL;
}

static void sl_free(strlist_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
}

void fg_agent_start(fg_node_t *n, json_t *msg)
{
    fg_agent_t *ag = n->ag;
    const fg_agent_cfg_t *cfg = &ag->cfg;
    const char *job_id = jstr(msg, "job_id");
    int attempt = (int)jint(msg, "attempt", -1);
    int64_t epoch = jint(msg, "epoch", 0);
    int rank = (int)jint(msg, "rank", 0);
    if (!job_id || !valid_id(job_id) || attempt < 1 || rank < 0 || rank > 100000) {
        fg_log(FG_LOG_ERROR, "node %s: start message without a valid job_id/attempt/rank", n->name);
        return;
    }
    char key[128];
    snprintf(key, sizeof key, "%s.%d.%d", job_id, attempt, rank);

    pthread_mutex_lock(&ag->mu);
    if (epoch < n->max_epoch) {
        pthread_mutex_unlock(&ag->mu);
        fg_log(FG_LOG_WARN, "node %s: ignoring start of %s from old epoch %lld (< %lld)", n->name,
               key, (long long)epoch, (long long)n->max_epoch);
        return;
    }
    if (fg_attempt_find(n, job_id, attempt, rank) || fg_node_recently_ended(n, key)) {
        pthread_mutex_unlock(&ag->mu);
        fg_log(FG_LOG_DEBUG, "node %s: duplicate start of %s ignored", n->name, key);
        return;
    }
    fg_attempt_t *a = fg_xcalloc(1, sizeof *a);
    a->node = n;
    snprintf(a->job_id, sizeof a->job_id, "%s", job_id);
    a->attempt = attempt;
    a->epoch = epoch;
    a->rank = rank;
    a->proc.life_fd = -1;
    snprintf(a->key, sizeof a->key, "%s", key);
    int64_t grace = jint(msg, "grace_s", cfg->grace_s);
    a->grace_s = grace < 0 ? 0 : grace > 86400 ? 86400 : (int)grace;
    a->run_dir[0] = '\0'; /* its files are WORK_DIR/runs/KEY.log and KEY.exit */
    snprintf(a->ckpt_dir, sizeof a->ckpt_dir, "%s/%s", cfg->checkpoint_root, job_id);
    a->next = n->attempts;
    n->attempts = a;
    pthread_mutex_unlock(&ag->mu);

    /* Everything below runs without the lock: parse, prepare, fork. */
    char err[sizeof a->error] = ""; /* why it cannot start, as fail_attempt keeps it */
    strlist_t argv = {0}, env = {0};
    char cvd[FG_GPU_MAX * 100] = "", idx[FG_GPU_MAX * 4] = "";
    int minors[FG_GPU_MAX], nminors = 0; /* device minors of its GPUs (isolate.h) */
    char job_dir[700], unix_user[128] = "", cg[700] = "", runs[700];
    snprintf(runs, sizeof runs, "%s/runs", n->work_dir);
    char spare[700];
    spare_path(n, spare, sizeof spare);
    json_t *cmd = json_object_get(msg, "command");
    json_t *gpus = json_object_get(msg, "gpus");
    const char *shell = NULL;
    if (json_is_string(cmd) && json_string_length(cmd) > 0) {
        shell = json_string_value(cmd);
    } else if (json_is_array(cmd) && json_array_size(cmd) > 0) {
        size_t i;
        json_t *v;
        json_array_foreach(cmd, i, v)
        {
            if (!json_is_string(v)) {
                snprintf(err, sizeof err, "command[%zu] is not a string", i);
                break;
            }
            sl_push(&argv, fg_xstrdup(json_string_value(v)));
        }
    } else {
        snprintf(err, sizeof err, "missing command");
    }
    if (!err[0] && gpus && !json_is_array(gpus))
        snprintf(err, sizeof err, "gpus is not an array");
    if (!err[0] && gpus) {
        size_t i;
        json_t *v;
        size_t ci = 0, ii = 0;
        json_array_foreach(gpus, i, v)
        {
            json_int_t g = json_is_integer(v) ? json_integer_value(v) : -1;
            if (g < 0 || g >= n->ngpus) {
                snprintf(err, sizeof err, "gpus[%zu] is not a GPU index of this node", i);
                break;
            }
            ci +=
                (size_t)snprintf(cvd + ci, sizeof cvd - ci, "%s%s", i ? "," : "", n->gpus[g].uuid);
            ii += (size_t)snprintf(idx + ii, sizeof idx - ii, "%s%d", i ? "," : "", (int)g);
            if (nminors < FG_GPU_MAX)
                minors[nminors++] = n->gpus[g].minor;
            if (ci >= sizeof cvd || ii >= sizeof idx) {
                snprintf(err, sizeof err, "too many gpus");
                break;
            }
        }
    }
    const char *cvd_override = jstr(msg, "cuda_visible_devices");
    json_t *envo = json_object_get(msg, "env");
    if (!err[0] && envo && json_is_object(envo)) {
        const char *k;
        json_t *v;
        json_object_foreach(envo, k, v)
        {
            if (!json_is_string(v) || !k[0] || strchr(k, '='))
                continue;
            size_t len = strlen(k) + json_string_length(v) + 2;
            char *s = fg_xmalloc(len);
            snprintf(s, len, "%s=%s", k, json_string_value(v));
            sl_push(&env, s);
        }
    }
    const char *user = jstr(msg, "user");
    snprintf(job_dir, sizeof job_dir, "%s/jobs/%s", n->work_dir, job_id);
    char knob[sizeof job_dir + sizeof FG_GPU_FAKE_UTIL_FILE + 1];
    snprintf(knob, sizeof knob, "%s/%s", job_dir, FG_GPU_FAKE_UTIL_FILE);
    /* The job's Unix account (account.c). Fail closed: an attempt whose account cannot
     * be set up ends with user_setup_failed and never runs (not as root, not as the
     * agent's user). */
    int setup_failed = 0;
    if (!err[0] && cfg->switch_user) {
        char msgbuf[256] = "";
        if (!user || !user[0]) {
            snprintf(err, sizeof err, "no user in the assignment; refusing to run the job");
            setup_failed = 1;
        } else if (fg_account_map(cfg->user_map, cfg->user_prefix, user, unix_user,
                                  sizeof unix_user, msgbuf, sizeof msgbuf) != 0 ||
                   fg_account_ensure(unix_user, NULL, NULL, msgbuf, sizeof msgbuf) != 0) {
            fg_fmt(err, sizeof err, "cannot set up Unix account '%s' for user %s: %s", unix_user,
                   user, msgbuf[0] ? msgbuf : "unknown error");
            setup_failed = 1;
        }
    }
    if (cfg->use_cgroups) { /* ROOT[/CONTROLLER]/fairgpu/NODE-KEY-TAG (cgroup.h) */
        char tag[9];
        work_dir_tag(n->work_dir, tag);
        snprintf(cg, sizeof cg, "%s-%s-%s", n->name, key, tag);
    }
    int64_t limit = jint(msg, "time_limit_s", 0);

    fg_proc_t proc;
    int ok = 0;
    if (!err[0]) {
        fg_launch_t l = {
            .job_id = job_id,
            .attempt = attempt,
            .rank = rank,
            .num_nodes = (int)jint(msg, "num_nodes", 1),
            .master_addr = jstr(msg, "master_addr") ? jstr(msg, "master_addr") : cfg->addr,
            .master_port = (int)jint(msg, "master_port", 29500),
            .argv = argv.n ? argv.v : NULL,
            .shell = shell,
            .env = env.v,
            .cuda_visible_devices = cvd_override ? cvd_override : cvd,
            .gpu_indices = idx,
            .model = jstr(msg, "model"),
            .dataset = jstr(msg, "dataset"),
            .fake_util_file = n->gpu.bind ? knob : NULL,
            .run_dir = runs,
            .run_name = key,
            .job_dir = job_dir,
            .checkpoint_dir = a->ckpt_dir,
            .unix_user = unix_user[0] ? unix_user : NULL,
            .run_as_agent = !cfg->switch_user,
            .iso = &cfg->iso,
            .cgroup_name = cg[0] ? cg : NULL,
            .gpu_minors = minors,
            .ngpu_minors = nminors,
            .cpus = jint(msg, "cpus", node_share(cfg->cpus, gpus, n->ngpus)),
            .memory_mb = jint(msg, "memory_mb", node_share(cfg->memory_mb, gpus, n->ngpus)),
            .log_limit_bytes = jint(msg, "log_limit_bytes", cfg->log_limit),
            .async_pgid = 1, /* the supervisor learns the pid: launches do not wait */
            .spare_dir = spare,
        };
        ok = fg_launch_start(&l, &proc, err, sizeof err) == 0;
        if (!ok && proc.setup_failed)
            setup_failed = 1;
        if (ok) /* the baseline, before `launched` lets the supervisor scan it */
            fg_ckpt_watch_begin(&a->ckpt, a->ckpt_dir, fg_now_ms());
    }
    sl_free(&argv);
    sl_free(&env);

    pthread_mutex_lock(&ag->mu);
    if (!ok) {
        a->setup_failed = setup_failed;
        fail_attempt(a, err);
    } else {
        a->proc = proc;
        snprintf(a->unix_user, sizeof a->unix_user, "%s", unix_user);
        a->gpu_uuids = fg_xstrdup(cvd);
        a->launched = 1;
        a->start_ms = fg_now_ms();
        a->deadline_ms = limit > 0 ? a->start_ms + limit * 1000 : 0;
        /* The state file is written once the job's pid is known (pgid_learned). */
        fg_log(FG_LOG_INFO, "node %s: started %s gpus [%s]", n->name, key, idx);
        if (a->stop_cause) /* a stop arrived while launching */
            fg_attempt_begin_stop(a, a->silent ? "stale" : "cancel", -1);
    }
    pthread_mutex_unlock(&ag->mu);
    fg_agent_wake(ag);
}

void fg_agent_stop_msg(fg_node_t *n, json_t *msg)
{
    fg_agent_t *ag = n->ag;
    const char *job_id = jstr(msg, "job_id");
    const char *why = jstr(msg, "why");
    int attempt = (int)jint(msg, "attempt", -1);
    int rank = (int)jint(msg, "rank", -1);
    int grace = (int)jint(msg, "grace_s", -1);
    if (!job_id || !why || attempt < 1 || !fg_why_to_cause(why)) {
        fg_log(FG_LOG_ERROR, "node %s: stop message without job_id/attempt/why", n->name);
        return;
    }
    pthread_mutex_lock(&ag->mu);
    int found = 0;
    for (fg_attempt_t *a = n->attempts; a; a = a->next) {
        if (a->attempt != attempt || strcmp(a->job_id, job_id) || (rank >= 0 && a->rank != rank))
            continue;
        found = 1;
        if (a->stop_cause && strcmp(why, "stale"))
            continue; /* already stopping */
        fg_attempt_begin_stop(a, why, grace);
    }
    char key[128];
    snprintf(key, sizeof key, "%s.%d.%d", job_id, attempt, rank < 0 ? 0 : rank);
    if (!found && strcmp(why, "stale") && valid_id(job_id) && !fg_node_recently_ended(n, key)) {
        /* Not ours: say so, so the controller does not wait for a confirmation. */
        fg_attempt_t *a = fg_xcalloc(1, sizeof *a);
        a->node = n;
        snprintf(a->job_id, sizeof a->job_id, "%s", job_id);
        a->attempt = attempt;
        a->epoch = jint(msg, "epoch", 0);
        a->rank = rank < 0 ? 0 : rank;
        a->proc.life_fd = -1;
        snprintf(a->key, sizeof a->key, "%s", key);
        a->phantom = 1;
        a->stop_cause = fg_why_to_cause(why);
        snprintf(a->error, sizeof a->error, "not running on this node");
        a->exited = 1;
        a->ex.code = -1;
        a->ex.end_ms = fg_now_ms();
        a->log_done = 1;
        a->next = n->attempts;
        n->attempts = a;
        kick(n);
    }
    pthread_mutex_unlock(&ag->mu);
}

/* ------------------------------------------------------------ supervisor */

/* Collects the end of a; under ag->mu. */
static void reap(fg_attempt_t *a)
{
    fg_proc_reap(&a->proc, &a->ex);
    /* A preempted rank's last look (bounded): a checkpoint written on SIGTERM, just before
     * the end, counts. Only there: the time matters to billing only for a preemption,
     * and a scan costs tens of microseconds of agent CPU per short rank. */
    if (a->ckpt.started && a->stop_cause && !strcmp(a->stop_cause, "preempted"))
        fg_ckpt_watch_tick(&a->ckpt, a->ckpt_dir, fg_now_ms());
    a->exited = 1;
    a->kill_at_ms = 0;
    if (a->proc.pgid > 0 && fg_proc_group_alive(&a->proc))
        fg_proc_signal(&a->proc, SIGKILL); /* belt and braces: nothing may survive */
    fg_log(FG_LOG_INFO, "node %s: %s ended: %s %d (%s)", a->node->name, a->key,
           a->ex.signal ? "signal" : "exit", a->ex.signal ? a->ex.signal : a->ex.code,
           fg_attempt_end_cause(a));
    kick(a->node);
}

/* The job's pid arrived (async launch): record it, apply a stop that came before it,
 * and let the reporter send `started`. Under ag->mu. */
static void pgid_learned(fg_attempt_t *a)
{
    if (fg_proc_poll_pgid(&a->proc, 0) != 1)
        return;
    state_save(a);
    fg_log(FG_LOG_DEBUG, "node %s: %s has pid %d", a->node->name, a->key, (int)a->proc.pgid);
    if (a->stop_cause && a->proc.pgid > 0)
        fg_proc_signal(&a->proc, SIGTERM);
    kick(a->node);
}

void *fg_supervisor_main(void *arg)
{
    fg_agent_t *ag = arg;
    struct pollfd *pfds = NULL;
    fg_attempt_t **who = NULL, **scan = NULL;
    size_t cap = 0, cap2 = 0, cap3 = 0;
    while (!ag->stop) {
        pthread_mutex_lock(&ag->mu);
        size_t np = 1, ns = 0;
        int64_t now = fg_now_ms(), next = now + 500;
        for (int i = 0; i < ag->nnodes; i++) {
            for (fg_attempt_t *a = ag->nodes[i].attempts; a; a = a->next) {
                if (!a->launched || a->exited)
                    continue;
                if (a->ckpt.started && now >= a->ckpt.next_scan_ms) {
                    scan = fg_xgrow(scan, &cap3, ns + 1, sizeof *scan);
                    scan[ns++] = a;
                }
                if (a->kill_at_ms && a->kill_at_ms < next)
                    next = a->kill_at_ms;
                if (a->deadline_ms && !a->stop_cause && a->deadline_ms < next)
                    next = a->deadline_ms;
                if (a->proc.life_fd < 0)
                    continue;
                pfds = fg_xgrow(pfds, &cap, np + 1, sizeof *pfds);
                who = fg_xgrow(who, &cap2, np + 1, sizeof *who);
                pfds[np].fd = a->proc.life_fd;
                pfds[np].events = POLLIN;
                pfds[np].revents = 0;
                who[np] = a;
                np++;
            }
        }
        pfds = fg_xgrow(pfds, &cap, np + 1, sizeof *pfds);
        pfds[0].fd = ag->wake[0];
        pfds[0].events = POLLIN;
        pfds[0].revents = 0;
        pthread_mutex_unlock(&ag->mu);

        /* Checkpoint scans without the lock: only this thread touches a->ckpt while the
         * rank runs, and only this thread ends it (reap), so each pointer stays valid. */
        for (size_t k = 0; k < ns; k++)
            if (fg_ckpt_watch_tick(&scan[k]->ckpt, scan[k]->ckpt_dir, fg_now_ms()))
                fg_log(FG_LOG_DEBUG, "%s: checkpoint noticed in %s", scan[k]->key,
                       scan[k]->ckpt_dir);
        now = fg_now_ms();
        int timeout = next > now ? (int)(next - now) : 0;
        int pr = poll(pfds, np, timeout);
        if (pr > 0 && pfds[0].revents) {
            char drain[256];
            while (read(ag->wake[0], drain, sizeof drain) > 0)
                ;
        }

        pthread_mutex_lock(&ag->mu);
        /* Finished monitors (attempts are freed only by reporters after exited=1, so
         * the pointers collected above are still valid while not exited). */
        for (size_t k = 1; pr > 0 && k < np; k++) {
            fg_attempt_t *a = who[k];
            if (!pfds[k].revents || a->exited || a->proc.life_fd != pfds[k].fd)
                continue;
            if (!a->proc.pgid_known) {
                pgid_learned(a);
                if (!(pfds[k].revents & POLLHUP))
                    continue; /* still running: EOF comes later */
            }
            reap(a);
        }
        now = fg_now_ms();
        for (int i = 0; i < ag->nnodes; i++) {
            for (fg_attempt_t *a = ag->nodes[i].attempts; a; a = a->next) {
                if (!a->launched || a->exited)
                    continue;
                if (a->proc.life_fd < 0 && !fg_proc_running(&a->proc)) {
                    reap(a); /* adopted: its status file appeared */
                    continue;
                }
                if (a->proc.life_fd < 0 && a->proc.monitor > 0 && kill(a->proc.monitor, 0) != 0 &&
                    errno == ESRCH && fg_proc_running(&a->proc)) {
                    reap(a); /* adopted monitor vanished without a status */
                    continue;
                }
                if (a->deadline_ms && !a->stop_cause && now >= a->deadline_ms) {
                    fg_log(FG_LOG_INFO, "node %s: %s reached its time limit", a->node->name,
                           a->key);
                    fg_attempt_begin_stop(a, "timeout", -1);
                }
                if (a->kill_at_ms && now >= a->kill_at_ms) {
                    fg_log(FG_LOG_INFO, "node %s: %s grace over: SIGKILL", a->node->name, a->key);
                    fg_proc_signal(&a->proc, SIGKILL);
                    a->kill_at_ms = now + 1000; /* repeat until the monitor is done */
                }
            }
        }
        pthread_mutex_unlock(&ag->mu);
    }
    free(pfds);
    free(who);
    free(scan);
    return NULL;
}

void fg_agent_kill_all(fg_agent_t *ag)
{
    pthread_mutex_lock(&ag->mu);
    for (int i = 0; i < ag->nnodes; i++)
        for (fg_attempt_t *a = ag->nodes[i].attempts; a; a = a->next)
            if (a->launched && !a->exited)
                fg_proc_signal(&a->proc, SIGKILL);
    pthread_mutex_unlock(&ag->mu);
}

/* ------------------------------------------------------------ state files */

void fg_node_load_state(fg_node_t *n)
{
    char dir[700];
    spare_path(n, dir, sizeof dir);
    fg_mkdir_p(dir, 0700);
    fg_file_pool_scan(dir); /* recycled files of a previous run (fg_file_recycle) */
    snprintf(dir, sizeof dir, "%s/state", n->work_dir);
    fg_mkdir_p(dir, 0700);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 6 || strcmp(de->d_name + len - 5, ".json"))
            continue;
        char path[1000];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        json_t *o = json_load_file(path, 0, NULL);
        const char *job_id = o ? jstr(o, "job_id") : NULL;
        if (!job_id || !valid_id(job_id) || !jstr(o, "status_path") || !jstr(o, "log_path")) {
            fg_log(FG_LOG_WARN, "node %s: ignoring bad state file %s", n->name, path);
            json_decref(o);
            unlink(path);
            continue;
        }
        fg_attempt_t *a = fg_xcalloc(1, sizeof *a);
        a->node = n;
        snprintf(a->job_id, sizeof a->job_id, "%s", job_id);
        a->attempt = (int)jint(o, "attempt", 0);
        a->epoch = jint(o, "epoch", 0);
        a->rank = (int)jint(o, "rank", 0);
        snprintf(a->key, sizeof a->key, "%s.%d.%d", a->job_id, a->attempt, a->rank);
        snprintf(a->run_dir, sizeof a->run_dir, "%s", jstr(o, "run_dir") ? jstr(o, "run_dir") : "");
        snprintf(a->ckpt_dir, sizeof a->ckpt_dir, "%s",
                 jstr(o, "ckpt_dir") ? jstr(o, "ckpt_dir") : "");
        a->proc.monitor = (pid_t)jint(o, "monitor", 0);
        a->proc.pgid = (pid_t)jint(o, "pgid", 0);
        a->proc.pgid_known = 1;
        a->proc.life_fd = -1;
        a->proc.child = 0;
        snprintf(a->proc.log_path, sizeof a->proc.log_path, "%s", jstr(o, "log_path"));
        snprintf(a->proc.status_path, sizeof a->proc.status_path, "%s", jstr(o, "status_path"));
        snprintf(a->proc.cgroup, sizeof a->proc.cgroup, "%s",
                 jstr(o, "cgroup") ? jstr(o, "cgroup") : "");
        a->start_ms = jint(o, "start_ms", 0);
        a->deadline_ms = jint(o, "deadline_ms", 0);
        a->grace_s = (int)jint(o, "grace_s", n->ag->cfg.grace_s);
        a->launched = 1;
        a->adopted = 1;
        a->started_sent = 1;
        /* a new baseline: what an agent that ran before noticed is not kept */
        fg_ckpt_watch_begin(&a->ckpt, a->ckpt_dir, fg_now_ms());
        json_decref(o);
        fg_log(FG_LOG_INFO, "node %s: found %s from a previous agent run (%s)", n->name, a->key,
               fg_proc_running(&a->proc) ? "still running" : "ended");
        a->next = n->attempts;
        n->attempts = a;
    }
    closedir(d);
}
