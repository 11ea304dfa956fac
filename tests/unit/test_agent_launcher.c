/*
 * test_agent_launcher.c - the agent runs real child processes: the right environment,
 * its own process group, a log with a cap and a marker, and stopping that leaves no
 * process behind (including children the job spawned).
 */
#include "agent/isolate.h"
#include "agent/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

static char g_root[256];

static int setup(void **state)
{
    (void)state;
    snprintf(g_root, sizeof g_root, "/tmp/fg-test-launcher-XXXXXX");
    assert_non_null(mkdtemp(g_root));
    chmod(g_root, 0711); /* as the agent's work dir: a job's user may pass through */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
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

/* Waits until the monitor finished (life pipe EOF); 1 if it did within ms. */
static int wait_end(fg_proc_t *p, int ms)
{
    struct pollfd pf = {.fd = p->life_fd, .events = POLLIN};
    return poll(&pf, 1, ms) == 1;
}

/* Reads a whole file into a static buffer. */
static const char *slurp(const char *path, size_t *len)
{
    static char buf[1 << 17];
    FILE *f = fopen(path, "r");
    if (!f) {
        buf[0] = '\0';
        if (len)
            *len = 0;
        return buf;
    }
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

/* Fills a launch description for job `id` under g_root. */
static void base_launch(fg_launch_t *l, const char *id, char *bufs /* 3 x 300 */)
{
    memset(l, 0, sizeof *l);
    snprintf(bufs, 300, "%s/runs/%s.1.0", g_root, id);
    snprintf(bufs + 300, 300, "%s/jobs/%s", g_root, id);
    snprintf(bufs + 600, 300, "%s/ckpt/%s", g_root, id);
    l->job_id = id;
    l->attempt = 1;
    l->num_nodes = 1;
    l->master_addr = "127.0.0.1";
    l->master_port = 29500;
    l->run_dir = bufs;
    l->job_dir = bufs + 300;
    l->checkpoint_dir = bufs + 600;
    l->run_as_agent = 1; /* no unix_user: the test's own user */
}

/* Polls until the log holds `lines` newline characters; returns the text. */
static const char *wait_log_lines(const fg_proc_t *p, int lines, int ms)
{
    int64_t end = mono_ms() + ms;
    const char *s;
    do {
        s = slurp(p->log_path, NULL);
        int n = 0;
        for (const char *c = s; *c; c++)
            n += *c == '\n';
        if (n >= lines)
            return s;
        usleep(10000);
    } while (mono_ms() < end);
    return s;
}

/* The job sees exactly its GPUs and the FAIRGPU_* variables; the job's env is added but
 * cannot override what the agent owns; it runs in its own directory and group. */
static void job_gets_its_environment_and_directory(void **state)
{
    (void)state;
    char bufs[900];
    fg_launch_t l;
    base_launch(&l, "env1", bufs);
    char *const argv[] = {"sh", "-c",
                          "echo CVD=$CUDA_VISIBLE_DEVICES; echo JOB=$FAIRGPU_JOB_ID; "
                          "echo ATT=$FAIRGPU_ATTEMPT; echo MODEL=$FAIRGPU_MODEL; "
                          "echo DATA=$FAIRGPU_DATASET; echo CKPT=$FAIRGPU_CHECKPOINT_DIR; "
                          "echo RANK=$FAIRGPU_NODE_RANK/$FAIRGPU_NUM_NODES; "
                          "echo MASTER=$FAIRGPU_MASTER_ADDR:$FAIRGPU_MASTER_PORT; "
                          "echo MINE=$MY_VAR; echo PWD=$(pwd); "
                          "echo PGID=$(ps -o pgid= -p $$ | tr -d ' '); echo PID=$$; "
                          "echo err >&2",
                          NULL};
    char *const env[] = {"MY_VAR=hello world", "FAIRGPU_JOB_ID=evil", "CUDA_VISIBLE_DEVICES=all",
                         NULL};
    l.argv = argv;
    l.env = env;
    l.attempt = 3;
    l.rank = 1;
    l.num_nodes = 2;
    l.master_addr = "10.1.2.3";
    l.master_port = 29517;
    l.cuda_visible_devices = "GPU-fake-n0-2,GPU-fake-n0-5";
    l.gpu_indices = "2,5";
    l.model = "llama";
    l.dataset = "alpaca";
    fg_proc_t p;
    char err[256] = "";
    assert_int_equal(fg_launch_start(&l, &p, err, sizeof err), 0);
    assert_true(p.pgid > 0);
    assert_true(wait_end(&p, 10000));
    fg_exit_t ex;
    assert_int_equal(fg_proc_reap(&p, &ex), 0);
    assert_int_equal(ex.code, 0);
    assert_int_equal(ex.signal, 0);
    const char *log = slurp(p.log_path, NULL);
    assert_non_null(strstr(log, "CVD=GPU-fake-n0-2,GPU-fake-n0-5\n"));
    assert_non_null(strstr(log, "JOB=env1\n"));
    assert_non_null(strstr(log, "ATT=3\n"));
    assert_non_null(strstr(log, "MODEL=llama\n"));
    assert_non_null(strstr(log, "DATA=alpaca\n"));
    char want[400];
    snprintf(want, sizeof want, "CKPT=%s/ckpt/env1\n", g_root);
    assert_non_null(strstr(log, want));
    assert_non_null(strstr(log, "RANK=1/2\n"));
    assert_non_null(strstr(log, "MASTER=10.1.2.3:29517\n"));
    assert_non_null(strstr(log, "MINE=hello world\n"));
    snprintf(want, sizeof want, "PWD=%s/jobs/env1\n", g_root);
    assert_non_null(strstr(log, want));
    assert_non_null(strstr(log, "err\n"));
    /* Its own process group: pgid == its pid == what the launcher reported. */
    char pg[64];
    snprintf(pg, sizeof pg, "PGID=%d\nPID=%d\n", (int)p.pgid, (int)p.pgid);
    assert_non_null(strstr(log, pg));
    struct stat sb;
    assert_int_equal(stat(l.checkpoint_dir, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0700);
    assert_int_equal(stat(l.job_dir, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0700);
}

/* Isolated (PID + mount namespaces, as root): exit codes and signals come back as
 * before, the command is pid 2 of its namespace (its init is 1), its directory under
 * /tmp stays reachable though /tmp is private, and a stop signal to the group ends it. */
static void isolated_job_keeps_exit_codes_signals_and_stops(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    static fg_iso_t iso = {.ns = 1};
    char bufs[900];
    fg_launch_t l;
    base_launch(&l, "iso1", bufs);
    l.iso = &iso;
    l.shell = "echo PID=$$; pwd; ls /tmp | wc -l; exit 3";
    fg_proc_t p;
    char err[256] = "";
    assert_int_equal(fg_launch_start(&l, &p, err, sizeof err), 0);
    assert_true(wait_end(&p, 10000));
    fg_exit_t ex;
    assert_int_equal(fg_proc_reap(&p, &ex), 0);
    assert_int_equal(ex.code, 3);
    char want[400];
    snprintf(want, sizeof want, "PID=2\n%s/jobs/iso1\n1\n", g_root);
    assert_string_equal(slurp(p.log_path, NULL), want);

    base_launch(&l, "iso2", bufs);
    l.iso = &iso;
    l.shell = "kill -USR1 $$";
    assert_int_equal(fg_launch_start(&l, &p, err, sizeof err), 0);
    assert_true(wait_end(&p, 10000));
    assert_int_equal(fg_proc_reap(&p, &ex), 0);
    assert_int_equal(ex.signal, SIGUSR1);

    base_launch(&l, "iso3", bufs);
    l.iso = &iso;
    l.shell = "sleep 30";
    assert_int_equal(fg_launch_start(&l, &p, err, sizeof err), 0);
    assert_true(p.pgid > 0);
    fg_proc_signal(&p, SIGTERM);
    assert_true(wait_end(&p, 10000));
    assert_int_equal(fg_proc_reap(&p, &ex), 0);
    assert_int_equal(ex.signal, SIGTERM);
}

/* A string command runs through /bin/sh -c; the exit code comes back. */
static void exit_code_and_missing_program(void **state)
{
    (void)state;
    char bufs[900];
    fg_launch_t l;
    base_launch(&l, "code3", bufs);
    l.shell = "echo out; exit 3";
    fg_proc_t p;
    char err[256];
    assert_int_equal(fg_launch_start(&l, &p, err, sizeof err), 0);
    assert_true(wait_end(&p, 10000));
    fg_exit_t ex;
    assert_int_equal(fg_proc_reap(&p, &ex), 0);
    assert_int_equal(ex.code, 3);
    assert_string_equal(slurp(p.log_path, NULL), "out\n");

    base_launch(&l, "noprog", bufs);
    char *const argv[] = {"fairgpu-no-such-program", NULL};
    l.argv = argv;
    assert_int_equal(fg_launch_start(&l, &p, err, sizeof err), 0);
    assert_true(wait_end(&p, 10000));
    assert_int_equal(fg_proc_reap(&p, &ex), 0);
    assert_int_equal(ex.code, 127);
    assert_non_null(strstr(slurp(p.log_path, NULL), "cannot execute fairgpu-no-such-program"));
}

/* 1 if pid exists and is not a zombie (init may reap reparented children late). */
static int pid_alive(pid_t pid)
{
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 0;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

/* Reads "pid\n" lines the job printed. */
static int read_pids(const char *log, pid_t *out, int max)
{
    int n = 0;
    const char *s = log;
    while (*s && n < max) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end != s && *end == '\n' && v > 0)
            out[n++] = (pid_t)v;
        const char *nl = strchr(s, '\n');
        if (!nl)
            break;
        s = nl + 1;
    }
    return n;
}

/* Cancel: SIGTERM to the group reaches the job and the children it spawned. */
static void stop_kills_job_and_its_children(void **state)
{
    (void)state;
    char bufs[900];
    fg_launch_t l;
    base_launch(&l, "kids", bufs);
    l.shell = "sleep 100 & echo $!; sleep 100 & echo $!; wait";
    fg_proc_t p;
    char err[256];
    assert_int_equal(fg_launch_start(&l, &p, err, sizeof err), 0);
    const char *log = wait_log_lines(&p, 2, 5000);
    pid_t kids[2];
    assert_int_equal(read_pids(log, kids, 2), 2);
    assert_true(pid_alive(kids[0]) && pid_alive(kids[1]));
    assert_true(fg_proc_group_alive(&p));
    int64_t t0 = mono_ms();
    fg_proc_signal(&p, SIGTERM);
    assert_true(wait_end(&p, 3000)); /* well within a 3 s grace */
    fg_exit_t ex;
    assert_int_equal(fg_proc_reap(&p, &ex), 0);
    assert_int_equal(ex.signal, SIGTERM);
    assert_true(mono_ms() - t0 < 3000);
    assert_false(pid_alive(kids[0]));
    assert_false(pid_alive(kids[1]));
    assert_false(fg_proc_group_alive(&p));
}

/* A job that ignores SIGTERM survives the grace, then SIGKILL ends every process. */
static void sigkill_after_grace_for_a_job_ignoring_sigterm(void **state)
{
    (void)state;
    char bufs[900];
    fg_launch_t l;
    base_launch(&l, "stubborn", bufs);
    l.shell = "trap '' TERM; sleep 100 & echo $!; sleep 100 & echo $!; wait; wait";
    fg_proc_t p;
    char err[256];
    assert_int_equal(fg_launch_start(&l, &p, err, sizeof err), 0);
    pid_t kids[2];
    assert_int_equal(read_pids(wait_log_lines(&p, 2, 5000), kids, 2), 2);
    fg_proc_signal(&p, SIGTERM);
    assert_false(wait_end(&p, 500)); /* ignored: still running after the "grace" */
    assert_true(pid_alive(kids[0]));
    fg_proc_signal(&p, SIGKILL);
    assert_true(wait_end(&p, 3000));
    fg_exit_t ex;
    assert_int_equal(fg_proc_reap(&p, &ex), 0);
    assert_int_equal(ex.signal, SIGKILL);
    assert_false(pid_alive(kids[0]));
    assert_false(pid_alive(kids[1]));
    assert_false(fg_proc_group_alive(&p));
}

/* When the main process exits, processes it left behind in its group are killed. */
static void no_orphan_survives_the_main_process(void **state)
{
    (void)state;
    char bufs[900];
    fg_launch_t l;
    base_launch(&l, "orphan", bufs);
    l.shell = "sleep 100 & echo $!; exit 0";
    fg_proc_t p;
    char err[256];
    assert_int_equal(fg_launch_start(&l, &p, err, sizeof err), 0);
    assert_true(wait_end(&p, 5000));
    fg_exit_t ex;
    assert_int_equal(fg_proc_reap(&p, &ex), 0);
    assert_int_equal(ex.code, 0);
    pid_t kid = 0;
    assert_int_equal(read_pids(slurp(p.log_path, NULL), &kid, 1), 1);
    assert_false(pid_alive(kid));
    assert_false(fg_proc_group_alive(&p));
}

/* The log keeps exactly the limit, then one clear marker; the job is not blocked. */
static void log_is_capped_with_a_marker(void **state)
{
    (void)state;
    char bufs[900];
    fg_launch_t l;
    base_launch(&l, "cap", bufs);
    l.shell = "head -c 100000 /dev/zero | tr '\\0' x; echo done-writing >&2";
    l.log_limit_bytes = 1024;
    fg_proc_t p;
    char err[256];
    assert_int_equal(fg_launch_start(&l, &p, err, sizeof err), 0);
    assert_true(wait_end(&p, 10000));
    fg_exit_t ex;
    assert_int_equal(fg_proc_reap(&p, &ex), 0);
    assert_int_equal(ex.code, 0);
    size_t len;
    const char *log = slurp(p.log_path, &len);
    const char *marker = "\n[fairgpu: log truncated: limit of 1024 bytes reached, further "
                         "output discarded]\n";
    assert_int_equal(len, 1024 + strlen(marker));
    for (size_t i = 0; i < 1024; i++)
        assert_int_equal(log[i], 'x');
    assert_string_equal(log + 1024, marker);
    assert_null(strstr(log, "done-writing"));
}

/* The preemption notice lands in the checkpoint dir, where the job can see it. */
static void preempt_notice_file(void **state)
{
    (void)state;
    char dir[300];
    snprintf(dir, sizeof dir, "%s/ckpt-notice", g_root);
    assert_int_equal(fg_mkdir_p(dir, 0700), 0);
    assert_int_equal(fg_write_preempt_notice(dir, "preempt"), 0);
    char path[400];
    snprintf(path, sizeof path, "%s/FAIRGPU_PREEMPT", dir);
    assert_memory_equal(slurp(path, NULL), "preempt ", 8);
}

/* As root, the job runs as the mapped account, in directories only it can read. */
static void runs_as_the_mapped_unix_account(void **state)
{
    (void)state;
    struct passwd *pw = getpwnam("nobody");
    if (geteuid() != 0 || !pw) {
        skip();
        return;
    }
    char bufs[900];
    fg_launch_t l;
    base_launch(&l, "asuser", bufs);
    l.shell = "echo UID=$(id -u); echo USER=$USER; touch mine && echo wrote";
    l.unix_user = "nobody";
    fg_proc_t p;
    char err[256];
    assert_int_equal(fg_launch_start(&l, &p, err, sizeof err), 0);
    assert_true(wait_end(&p, 10000));
    fg_exit_t ex;
    assert_int_equal(fg_proc_reap(&p, &ex), 0);
    const char *log = slurp(p.log_path, NULL);
    struct stat sb;
    assert_int_equal(stat(l.job_dir, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0700);
    if (strstr(log, "could not switch")) {
        /* A sandbox that refuses setuid: the job did not run at all (fail closed). */
        assert_true(ex.setup_failed);
        assert_null(strstr(log, "UID="));
        return;
    }
    assert_false(ex.setup_failed);
    char want[64];
    snprintf(want, sizeof want, "UID=%d\n", (int)pw->pw_uid);
    assert_non_null(strstr(log, want));
    assert_non_null(strstr(log, "USER=nobody\n"));
    assert_non_null(strstr(log, "wrote\n"));
    assert_int_equal(sb.st_uid, pw->pw_uid);
    assert_int_equal(stat(l.checkpoint_dir, &sb), 0);
    assert_int_equal(sb.st_uid, pw->pw_uid);
    assert_int_equal(sb.st_mode & 0777, 0700);
}

/* The child of refused_setuid_never_runs_the_job: drops CAP_SETUID and CAP_SETGID,
 * starts its own zygote without them and launches a job as nobody. 0 when the rank
 * ended with setup_failed and the command never ran, else a code saying what went
 * wrong. */
static int refused_setuid_child(int isolated)
{
    static fg_iso_t iso = {.ns = 1};
    fg_launcher_shutdown(); /* the parent's zygote still has the capabilities */
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) != 0)
        return 10;
    uint32_t drop = (1u << CAP_SETUID) | (1u << CAP_SETGID);
    d[0].effective &= ~drop;
    d[0].permitted &= ~drop;
    d[0].inheritable &= ~drop;
    if (syscall(SYS_capset, &h, d) != 0)
        return 11;
    char bufs[900];
    fg_launch_t l;
    base_launch(&l, "nosetuid", bufs);
    l.shell = "echo UID=$(id -u)";
    l.unix_user = "nobody";
    l.run_as_agent = 0;
    if (isolated)
        l.iso = &iso; /* the switch fails in the command's process under the namespace init */
    fg_proc_t p;
    char err[256];
    if (fg_launch_start(&l, &p, err, sizeof err) != 0)
        return 12;
    if (!wait_end(&p, 10000))
        return 13;
    fg_exit_t ex;
    fg_proc_reap(&p, &ex);
    if (!ex.setup_failed)
        return 14;
    if (strstr(slurp(p.log_path, NULL), "UID="))
        return 15; /* it ran */
    if (!strstr(slurp(p.log_path, NULL), "could not switch to user nobody"))
        return 16;
    return 0;
}

/* A user switch the kernel refuses ends the rank before its command runs, with
 * setup_failed: the job never runs as the agent's user (root) instead; isolated (in
 * its PID and mount namespaces) or not. */
static void refused_setuid_never_runs_the_job(void **state)
{
    (void)state;
    if (geteuid() != 0 || !getpwnam("nobody")) {
        skip();
        return;
    }
    for (int isolated = 0; isolated <= 1; isolated++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            _exit(refused_setuid_child(isolated));
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
}

/* Without a Unix account, the launcher refuses unless told the agent's user is fine. */
static void no_account_refused_without_run_as_agent(void **state)
{
    (void)state;
    char bufs[900];
    fg_launch_t l;
    base_launch(&l, "noacct", bufs);
    l.shell = "true";
    l.run_as_agent = 0;
    fg_proc_t p;
    char err[256] = "";
    assert_int_equal(fg_launch_start(&l, &p, err, sizeof err), -1);
    assert_true(p.setup_failed);
    assert_non_null(strstr(err, "agent's user"));
}

/* Refuses to run a job as root through the mapping. */
static void refuses_root_account(void **state)
{
    (void)state;
    char bufs[900];
    fg_launch_t l;
    base_launch(&l, "rootjob", bufs);
    l.shell = "true";
    l.unix_user = "root";
    fg_proc_t p;
    char err[256] = "";
    assert_int_equal(fg_launch_start(&l, &p, err, sizeof err), -1);
    assert_non_null(strstr(err, "root"));
}

/* A rank's log is recycled for the next rank of the directory: same inode, renamed,
 * empty, and the exit status of its previous rank (the log's attribute where the file
 * system has user attributes, else the status file) does not leak into the new one. */
static void recycled_log_is_reused_clean(void **state)
{
    (void)state;
    char dir[300], spare[300], bufs[900];
    snprintf(dir, sizeof dir, "%s/runs-shared", g_root);
    snprintf(spare, sizeof spare, "%s/spare", g_root);
    assert_int_equal(mkdir(spare, 0700), 0);
    fg_launch_t l;
    base_launch(&l, "rec1", bufs);
    l.run_dir = dir;
    l.run_name = "rec1.1.0";
    l.spare_dir = spare;
    char *const argv1[] = {"sh", "-c", "echo first; exit 7", NULL};
    l.argv = argv1;
    fg_proc_t p;
    char err[256] = "";
    assert_int_equal(fg_launch_start(&l, &p, err, sizeof err), 0);
    assert_true(wait_end(&p, 10000));
    fg_exit_t ex;
    assert_int_equal(fg_proc_reap(&p, &ex), 0);
    assert_int_equal(ex.code, 7);
    char attr[80];
    ssize_t an = getxattr(p.log_path, "user.fairgpu.exit", attr, sizeof attr - 1);
    struct stat sb;
    if (an >= 0) { /* no status file was created */
        attr[an] = '\0';
        assert_true(strncmp(attr, "exit 7 ", 7) == 0);
        assert_int_not_equal(stat(p.status_path, &sb), 0);
    } else {
        assert_int_equal(stat(p.status_path, &sb), 0);
    }
    assert_string_equal(slurp(p.log_path, NULL), "first\n");
    assert_int_equal(stat(p.log_path, &sb), 0);
    ino_t ino = sb.st_ino;
    unlink(p.status_path);
    fg_file_recycle(p.log_path, spare, "log");
    assert_int_not_equal(stat(p.log_path, &sb), 0); /* renamed away */

    fg_launch_t l2;
    char bufs2[900];
    base_launch(&l2, "rec2", bufs2);
    l2.run_dir = dir;
    l2.run_name = "rec2.1.0";
    l2.spare_dir = spare;
    char *const argv2[] = {"sh", "-c", "sleep 0.3; echo second", NULL};
    l2.argv = argv2;
    fg_proc_t p2;
    assert_int_equal(fg_launch_start(&l2, &p2, err, sizeof err), 0);
    assert_int_equal(stat(p2.log_path, &sb), 0);
    assert_true(sb.st_ino == ino);     /* the recycled file */
    assert_true(fg_proc_running(&p2)); /* the old exit status is gone */
    assert_true(wait_end(&p2, 10000));
    assert_false(fg_proc_running(&p2));
    assert_int_equal(fg_proc_reap(&p2, &ex), 0);
    assert_int_equal(ex.code, 0);
    assert_string_equal(slurp(p2.log_path, NULL), "second\n");
    /* Recycled again: emptied, moved out of the run directory, reusable once. */
    fg_file_recycle(p2.log_path, spare, "log");
    assert_int_not_equal(stat(p2.log_path, &sb), 0);
    assert_int_equal(fg_file_reuse(p.log_path, spare, "state"), -1); /* another kind */
    assert_int_equal(fg_file_reuse(p.log_path, spare, "log"), 0);
    assert_int_equal(stat(p.log_path, &sb), 0);
    assert_int_equal(sb.st_size, 0);
    assert_int_equal(fg_file_reuse(p2.log_path, spare, "log"), -1); /* the pool is empty */
}

/* Runs command string cmd as job `id` to its end; the exit and the log. */
static const char *run_shell(const char *id, const char *cmd, fg_exit_t *ex)
{
    char bufs[900];
    fg_launch_t l;
    base_launch(&l, id, bufs);
    l.shell = cmd;
    fg_proc_t p;
    char err[256] = "";
    assert_int_equal(fg_launch_start(&l, &p, err, sizeof err), 0);
    assert_true(wait_end(&p, 10000));
    assert_int_equal(fg_proc_reap(&p, ex), 0);
    return slurp(p.log_path, NULL);
}

/* A command string without shell syntax runs as its words, without sh (dash puts PWD in
 * the environment, the agent does not); anything else, and a plain command that cannot
 * be executed, behaves exactly as under /bin/sh -c. */
static void command_string_without_shell_syntax_runs_directly(void **state)
{
    (void)state;
    assert_true(fg_shell_is_plain("true"));
    assert_true(fg_shell_is_plain("python train.py --lr=3e-4 --out=/data/x,y"));
    assert_true(fg_shell_is_plain("  env  "));
    assert_false(fg_shell_is_plain("true --help")); /* built-in with arguments */
    assert_false(fg_shell_is_plain("exit 3"));
    assert_false(fg_shell_is_plain("echo hi"));
    assert_false(fg_shell_is_plain("cd /tmp"));
    assert_false(fg_shell_is_plain("A=1 prog"));
    assert_false(fg_shell_is_plain("ls *.txt"));
    assert_false(fg_shell_is_plain("a; b"));
    assert_false(fg_shell_is_plain("a | b"));
    assert_false(fg_shell_is_plain("prog > out"));
    assert_false(fg_shell_is_plain("prog $HOME"));
    assert_false(fg_shell_is_plain("prog 'a b'"));
    assert_false(fg_shell_is_plain("prog a\\ b"));
    assert_false(fg_shell_is_plain("prog # comment"));
    assert_false(fg_shell_is_plain("prog ~/x"));
    assert_false(fg_shell_is_plain("a\nb"));
    assert_false(fg_shell_is_plain(""));
    assert_false(fg_shell_is_plain("   "));

    fg_exit_t ex;
    const char *log = run_shell("sh1", "env", &ex);
    assert_int_equal(ex.code, 0);
    assert_non_null(strstr(log, "FAIRGPU_JOB_ID=sh1\n"));
    assert_null(strstr(log, "PWD=")); /* no shell in between */
    log = run_shell("sh2", "env | grep -c ^PWD=", &ex);
    assert_int_equal(ex.code, 0);
    assert_string_equal(log, "1\n"); /* a pipe: through sh */
    log = run_shell("sh3", "echo $FAIRGPU_JOB_ID", &ex);
    assert_string_equal(log, "sh3\n");
    run_shell("sh4", "exit 3", &ex);
    assert_int_equal(ex.code, 3);
    assert_int_equal(ex.signal, 0);
    run_shell("sh5", "true", &ex);
    assert_int_equal(ex.code, 0);
    run_shell("sh6", "false", &ex);
    assert_int_equal(ex.code, 1);
    /* Missing program: sh's message and status, as with /bin/sh -c. */
    log = run_shell("sh7", "no-such-program-fg arg", &ex);
    assert_int_equal(ex.code, 127);
    assert_non_null(strstr(log, "/bin/sh: 1: no-such-program-fg: not found"));
    /* Found but not executable: sh's message and status 126. */
    char path[400];
    snprintf(path, sizeof path, "%s/noexec-fg", g_root);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("echo hi\n", f);
    fclose(f);
    chmod(path, 0644);
    char cmd[500];
    snprintf(cmd, sizeof cmd, "%s", path);
    log = run_shell("sh8", cmd, &ex);
    assert_int_equal(ex.code, 126);
    char want[600];
    snprintf(want, sizeof want, "/bin/sh: 1: %s: Permission denied", path);
    assert_non_null(strstr(log, want)); /* exactly what /bin/sh -c says */
    /* A script without #! is run by sh, as sh -c would. */
    chmod(path, 0755);
    log = run_shell("sh9", cmd, &ex);
    assert_int_equal(ex.code, 0);
    assert_string_equal(log, "hi\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(job_gets_its_environment_and_directory),
        cmocka_unit_test(exit_code_and_missing_program),
        cmocka_unit_test(isolated_job_keeps_exit_codes_signals_and_stops),
        cmocka_unit_test(stop_kills_job_and_its_children),
        cmocka_unit_test(sigkill_after_grace_for_a_job_ignoring_sigterm),
        cmocka_unit_test(no_orphan_survives_the_main_process),
        cmocka_unit_test(log_is_capped_with_a_marker),
        cmocka_unit_test(preempt_notice_file),
        cmocka_unit_test(runs_as_the_mapped_unix_account),
        cmocka_unit_test(refuses_root_account),
        cmocka_unit_test(refused_setuid_never_runs_the_job),
        cmocka_unit_test(no_account_refused_without_run_as_agent),
        cmocka_unit_test(recycled_log_is_reused_clean),
        cmocka_unit_test(command_string_without_shell_syntax_runs_directly),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
