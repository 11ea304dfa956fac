/*
 * agent_main.c - `fairgpu agent`: options, GPU discovery, node setup (one real node, or
 * N fake ones in one process), threads, and a clean stop on SIGINT/SIGTERM.
 *
 * On stop the agent leaves its jobs running by default (their monitors survive it, and
 * the next agent started with the same --work-dir adopts them and reconciles with the
 * controller); with --stop-jobs-on-exit it kills them.
 */
#include "agent/account.h"
#include "agent/agent.h"
#include "common/commands.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fputs("usage: fairgpu agent --server URL (--token-file FILE | --token T) --name NODE\n"
          "                     [options]\n"
          "\n"
          "  --server URL            controller URL, e.g. http://127.0.0.1:8080\n"
          "  --token-file FILE       the cluster's join token (the server's\n"
          "                          DATA_DIR/agent.token: a new node joins with it and keeps\n"
          "                          its own credential in WORK_DIR/node.token), or this\n"
          "                          node's credential from 'fairgpu node-token create'\n"
          "  --token T               the same given directly (tests only: visible in ps)\n"
          "  --ca-file FILE          CA certificates to verify an https controller with\n"
          "                          (default: the system's store)\n"
          "  --name NODE             node name (with --fake-nodes: prefix, NODE-0..N-1)\n"
          "  --fake-gpus N           N (1..64) fake GPUs instead of NVML\n"
          "  --gpu-type T            GPU type to report (default: from NVML, or 'fake')\n"
          "  --fake-nodes N          host N fake nodes in this process (default 8 GPUs each)\n"
          "  --work-dir DIR          job, log and state directories (default\n"
          "                          /var/lib/fairgpu/agent as root, else ./fairgpu-agent)\n"
          "  --checkpoint-root DIR   FAIRGPU_CHECKPOINT_DIR parent (default WORK_DIR/checkpoints)\n"
          "  --addr HOST             address other nodes reach this one at (master_addr)\n"
          "  --heartbeat S           heartbeat interval until the controller says (default 2)\n"
          "  --poll-wait S           long-poll hold time (default 25)\n"
          "  --grace S               default SIGTERM-to-SIGKILL grace (default 30)\n"
          "  --log-limit BYTES       per-rank log cap, suffix K/M/G allowed (default 64M)\n"
          "  --cpus N --memory-mb M  resources to report (default: this machine's)\n"
          "  --user-prefix P         Unix account for user U is P+U (default 'fg-'); over\n"
          "                          32 characters: P + head + '-' + 16 hex of SHA-256(U)\n"
          "  --user-map FILE         lines 'username account' ('*' matches anyone)\n"
          "  --no-switch-user        as root, still run jobs as root (development only)\n"
          "  --cgroup-root DIR       cgroup v2 mount, or the parent of the cgroup v1\n"
          "                          controllers (default /sys/fs/cgroup)\n"
          "  --no-cgroups            do not apply cpu/memory/pids limits (unisolated)\n"
          "  --job-pids-max N        processes and threads per job (default 4096; 0: none)\n"
          "  --allow-unisolated      start even where jobs cannot be isolated (no cgroups,\n"
          "                          no namespaces, not root); the node shows isolated: false\n"
          "  --fake-gpu-dev-dir DIR  make device nodes DIR/nvidiaN for the fake GPUs (root)\n"
          "  --stop-jobs-on-exit     kill running jobs when the agent stops\n"
          "  --nvml-lib PATH         NVML library (default libnvidia-ml.so.1)\n"
          "  --report-threads N      concurrent report senders per node (default 4)\n"
          "  --keep-logs             keep node-local logs after the controller has them\n"
          "  --log-level L           debug, info, warn, error (default info)\n",
          f);
}

/* Parses a non-negative integer with an optional K/M/G suffix; -1 if invalid. */
static int64_t parse_size(const char *s, int allow_suffix)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0)
        return -1;
    if (allow_suffix && *end) {
        int64_t mul = *end == 'K' || *end == 'k'   ? 1024
                      : *end == 'M' || *end == 'm' ? 1024 * 1024
                      : *end == 'G' || *end == 'g' ? 1024LL * 1024 * 1024
                                                   : 0;
        if (!mul || end[1] || v > INT64_MAX / mul)
            return -1;
        return v * mul;
    }
    return *end ? -1 : v;
}

static int opt_int(const char *name, const char *s, int64_t lo, int64_t hi, int64_t *out,
                   int suffix)
{
    int64_t v = parse_size(s, suffix);
    if (v < lo || v > hi) {
        fprintf(stderr, "fairgpu agent: --%s: expected a number in %lld..%lld, got '%s'\n", name,
                (long long)lo, (long long)hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int valid_node_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 60)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return 0;
    }
    return 1;
}

static void random_hex(char *out, size_t nbytes)
{
    unsigned char b[32];
    if (nbytes > sizeof b)
        nbytes = sizeof b;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, b, nbytes) : -1;
    if (fd >= 0)
        close(fd);
    if (got != (ssize_t)nbytes) {
        unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
        for (size_t i = 0; i < nbytes; i++)
            b[i] = (unsigned char)rand_r(&seed);
    }
    for (size_t i = 0; i < nbytes; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/* Appends what to the list of what is missing for isolation. */
static void iso_missing(char *buf, size_t len, const char *what)
{
    size_t n = strlen(buf);
    snprintf(buf + n, len - n, "%s%s", n ? "; " : "", what);
}

/*
 * Finds how jobs can be isolated here (cgroups for cpu, memory and pids; PID and mount
 * namespaces; device nodes of the GPUs) into cfg->iso. A host that cannot isolate fully
 * is refused unless --allow-unisolated; then jobs get what is available. 0 or -1.
 */
static int setup_isolation(fg_agent_cfg_t *cfg, int root, int no_cg)
{
    fg_iso_t *iso = &cfg->iso;
    char miss[600] = "", err[300];
    iso->pids_max = cfg->job_pids_max;
    if (!root) {
        iso_missing(miss, sizeof miss, "not running as root");
    } else {
        /* Root in a job could undo its mounts and make device nodes. */
        if (!cfg->switch_user)
            iso_missing(miss, sizeof miss, "jobs run as root (--no-switch-user)");
        if (no_cg)
            iso_missing(miss, sizeof miss, "cgroups disabled (--no-cgroups)");
        else if (fg_cg_probe(cfg->cgroup_root, &iso->cg) != 0) {
            fg_fmt(err, sizeof err, "%s at %s", iso->cg.missing, cfg->cgroup_root);
            iso_missing(miss, sizeof miss, err);
        }
        if (fg_iso_probe_ns(err, sizeof err) == 0)
            iso->ns = 1;
        else
            iso_missing(miss, sizeof miss, err);
    }
    cfg->use_cgroups = iso->cg.version != FG_CG_NONE;
    if (cfg->fake_gpus >= 0 && cfg->fake_gpu_dev_dir[0]) {
        if (fg_iso_make_fake_devs(cfg->fake_gpu_dev_dir, cfg->fake_gpus, err, sizeof err) != 0) {
            fprintf(stderr, "fairgpu agent: --fake-gpu-dev-dir: %s\n", err);
            return -1;
        }
        iso->gpu_nodes = 1;
        snprintf(iso->ctl_dir, sizeof iso->ctl_dir, "%s", cfg->fake_gpu_dev_dir);
    } else if (cfg->fake_gpus < 0) {
        iso->gpu_nodes = 1; /* NVML: /dev/nvidiaN, /dev/nvidiactl, /dev/nvidia-uvm, ... */
        snprintf(iso->ctl_dir, sizeof iso->ctl_dir, "/dev");
    }
    iso->required = !miss[0];
    if (iso->required) {
        fg_fmt(iso->summary, sizeof iso->summary,
               "cgroup v%d (cpu, memory, pids%s), PID and mount namespaces, private /tmp "
               "and /dev",
               iso->cg.version, iso->cg.devices ? ", devices" : "");
        fg_log(FG_LOG_INFO, "jobs are isolated: %s", iso->summary);
        return 0;
    }
    fg_fmt(iso->summary, sizeof iso->summary, "unisolated: %s", miss);
    if (!cfg->allow_unisolated) {
        fprintf(stderr,
                "fairgpu agent: cannot isolate jobs on this host: %s.\n"
                "fairgpu agent: jobs would see each other's processes and files and run "
                "without limits;\n"
                "fairgpu agent: pass --allow-unisolated to run them anyway (the node then "
                "shows \"isolated\": false)\n",
                miss);
        return -1;
    }
    fg_log(FG_LOG_WARN, "--allow-unisolated: jobs are NOT isolated (%s)", miss);
    return 0;
}

/* Parses argv into cfg; returns 0, 1 (help shown) or -1 (error shown). */
static int parse_args(int argc, char **argv, fg_agent_cfg_t *cfg)
{
    enum {
        O_SERVER = 256,
        O_TOKEN_FILE,
        O_TOKEN,
        O_NAME,
        O_FAKE_GPUS,
        O_GPU_TYPE,
        O_FAKE_NODES,
        O_WORK_DIR,
        O_CKPT,
        O_ADDR,
        O_HB,
        O_POLL_WAIT,
        O_GRACE,
        O_LOG_LIMIT,
        O_CPUS,
        O_MEM,
        O_USER_PREFIX,
        O_USER_MAP,
        O_NO_SWITCH,
        O_CG_ROOT,
        O_NO_CG,
        O_STOP_JOBS,
        O_NVML,
        O_LOG_LEVEL,
        O_REPORT_THREADS,
        O_KEEP_LOGS,
        O_CA_FILE,
        O_PIDS_MAX,
        O_ALLOW_UNISO,
        O_FAKE_DEV_DIR,
        O_HELP,
    };
    static const struct option opts[] = {
        {"server", required_argument, 0, O_SERVER},
        {"token-file", required_argument, 0, O_TOKEN_FILE},
        {"token", required_argument, 0, O_TOKEN},
        {"ca-file", required_argument, 0, O_CA_FILE},
        {"name", required_argument, 0, O_NAME},
        {"fake-gpus", required_argument, 0, O_FAKE_GPUS},
        {"gpu-type", required_argument, 0, O_GPU_TYPE},
        {"fake-nodes", required_argument, 0, O_FAKE_NODES},
        {"work-dir", required_argument, 0, O_WORK_DIR},
        {"checkpoint-root", required_argument, 0, O_CKPT},
        {"addr", required_argument, 0, O_ADDR},
        {"heartbeat", required_argument, 0, O_HB},
        {"poll-wait", required_argument, 0, O_POLL_WAIT},
        {"grace", required_argument, 0, O_GRACE},
        {"log-limit", required_argument, 0, O_LOG_LIMIT},
        {"cpus", required_argument, 0, O_CPUS},
        {"memory-mb", required_argument, 0, O_MEM},
        {"user-prefix", required_argument, 0, O_USER_PREFIX},
        {"user-map", required_argument, 0, O_USER_MAP},
        {"no-switch-user", no_argument, 0, O_NO_SWITCH},
        {"cgroup-root", required_argument, 0, O_CG_ROOT},
        {"no-cgroups", no_argument, 0, O_NO_CG},
        {"stop-jobs-on-exit", no_argument, 0, O_STOP_JOBS},
        {"nvml-lib", required_argument, 0, O_NVML},
        {"log-level", required_argument, 0, O_LOG_LEVEL},
        {"report-threads", required_argument, 0, O_REPORT_THREADS},
        {"keep-logs", no_argument, 0, O_KEEP_LOGS},
        {"job-pids-max", required_argument, 0, O_PIDS_MAX},
        {"allow-unisolated", no_argument, 0, O_ALLOW_UNISO},
        {"fake-gpu-dev-dir", required_argument, 0, O_FAKE_DEV_DIR},
        {"help", no_argument, 0, O_HELP},
        {0, 0, 0, 0},
    };
    int no_switch = 0, no_cg = 0;
    int64_t v;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case O_SERVER:
            snprintf(cfg->server, sizeof cfg->server, "%s", optarg);
            break;
        case O_TOKEN_FILE:
            snprintf(cfg->token_file, sizeof cfg->token_file, "%s", optarg);
            break;
        case O_TOKEN:
            snprintf(cfg->token, sizeof cfg->token, "%s", optarg);
            break;
        case O_CA_FILE:
            if (access(optarg, R_OK) != 0) {
                fprintf(stderr, "fairgpu agent: --ca-file %s: %s\n", optarg, strerror(errno));
                return -1;
            }
            snprintf(cfg->ca_file, sizeof cfg->ca_file, "%s", optarg);
            break;
        case O_NAME:
            snprintf(cfg->name, sizeof cfg->name, "%s", optarg);
            break;
        case O_FAKE_GPUS:
            if (opt_int("fake-gpus", optarg, 1, FG_GPU_MAX, &v, 0))
                return -1;
            cfg->fake_gpus = (int)v;
            break;
        case O_GPU_TYPE:
            snprintf(cfg->gpu_type, sizeof cfg->gpu_type, "%s", optarg);
            break;
        case O_FAKE_NODES:
            if (opt_int("fake-nodes", optarg, 1, 4096, &v, 0))
                return -1;
            cfg->fake_nodes = (int)v;
            break;
        case O_WORK_DIR:
            snprintf(cfg->work_dir, sizeof cfg->work_dir, "%s", optarg);
            break;
        case O_CKPT:
            snprintf(cfg->checkpoint_root, sizeof cfg->checkpoint_root, "%s", optarg);
            break;
        case O_ADDR:
            snprintf(cfg->addr, sizeof cfg->addr, "%s", optarg);
            break;
        case O_HB:
            if (opt_int("heartbeat", optarg, 1, 60, &v, 0))
                return -1;
            cfg->heartbeat_s = (int)v;
            break;
        case O_POLL_WAIT:
            if (opt_int("poll-wait", optarg, 1, 30, &v, 0))
                return -1;
            cfg->poll_wait_s = (int)v;
            break;
        case O_GRACE:
            if (opt_int("grace", optarg, 0, 86400, &v, 0))
                return -1;
            cfg->grace_s = (int)v;
            break;
        case O_LOG_LIMIT:
            if (opt_int("log-limit", optarg, 1024, INT64_MAX / 2, &v, 1))
                return -1;
            cfg->log_limit = v;
            break;
        case O_CPUS:
            if (opt_int("cpus", optarg, 1, 1 << 20, &v, 0))
                return -1;
            cfg->cpus = v;
            break;
        case O_MEM:
            if (opt_int("memory-mb", optarg, 1, INT64_MAX / (1 << 20), &v, 0))
                return -1;
            cfg->memory_mb = v;
            break;
        case O_USER_PREFIX:
            if (!fg_account_prefix_valid(optarg)) {
                fprintf(stderr,
                        "fairgpu agent: --user-prefix: use [a-z_][a-z0-9_.-]*, 1 to %d characters "
                        "(map names explicitly with --user-map)\n",
                        FG_ACCOUNT_PREFIX_MAX);
                return -1;
            }
            snprintf(cfg->user_prefix, sizeof cfg->user_prefix, "%s", optarg);
            break;
        case O_USER_MAP:
            snprintf(cfg->user_map, sizeof cfg->user_map, "%s", optarg);
            break;
        case O_NO_SWITCH:
            no_switch = 1;
            break;
        case O_CG_ROOT:
            snprintf(cfg->cgroup_root, sizeof cfg->cgroup_root, "%s", optarg);
            break;
        case O_NO_CG:
            no_cg = 1;
            break;
        case O_STOP_JOBS:
            cfg->stop_jobs_on_exit = 1;
            break;
        case O_NVML:
            snprintf(cfg->nvml_lib, sizeof cfg->nvml_lib, "%s", optarg);
            break;
        case O_LOG_LEVEL:
            if (!strcmp(optarg, "debug"))
                fg_log_set_level(FG_LOG_DEBUG);
            else if (!strcmp(optarg, "info"))
                fg_log_set_level(FG_LOG_INFO);
            else if (!strcmp(optarg, "warn"))
                fg_log_set_level(FG_LOG_WARN);
            else if (!strcmp(optarg, "error"))
                fg_log_set_level(FG_LOG_ERROR);
            else {
                fprintf(stderr, "fairgpu agent: --log-level: debug, info, warn or error\n");
                return -1;
            }
            break;
        case O_REPORT_THREADS:
            if (opt_int("report-threads", optarg, 1, FG_REPORT_THREADS_MAX, &v, 0))
                return -1;
            cfg->report_threads = (int)v;
            break;
        case O_KEEP_LOGS:
            cfg->keep_logs = 1;
            break;
        case O_PIDS_MAX:
            if (opt_int("job-pids-max", optarg, 0, 1 << 22, &v, 0))
                return -1;
            cfg->job_pids_max = v;
            break;
        case O_ALLOW_UNISO:
            cfg->allow_unisolated = 1;
            break;
        case O_FAKE_DEV_DIR:
            snprintf(cfg->fake_gpu_dev_dir, sizeof cfg->fake_gpu_dev_dir, "%s", optarg);
            break;
        case O_HELP:
        case 'h':
            usage(stdout);
            return 1;
        default:
            usage(stderr);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "fairgpu agent: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (!cfg->server[0]) {
        fprintf(stderr, "fairgpu agent: --server URL is required\n");
        return -1;
    }
    if (strncmp(cfg->server, "http://", 7) && strncmp(cfg->server, "https://", 8)) {
        fprintf(stderr, "fairgpu agent: --server must start with http:// or https://\n");
        return -1;
    }
    if (!cfg->name[0] && gethostname(cfg->name, sizeof cfg->name - 1) != 0) {
        fprintf(stderr, "fairgpu agent: --name NODE is required\n");
        return -1;
    }
    if (!valid_node_name(cfg->name)) {
        fprintf(stderr, "fairgpu agent: --name: use [A-Za-z0-9_.-], at most 60 characters\n");
        return -1;
    }
    if (!cfg->token_file[0] && !cfg->token[0]) {
        fprintf(stderr, "fairgpu agent: --token-file FILE is required (the server's "
                        "DATA_DIR/agent.token)\n");
        return -1;
    }
    if (cfg->fake_nodes && cfg->fake_gpus < 0)
        cfg->fake_gpus = 8;
    int root = geteuid() == 0;
    cfg->switch_user = root && !no_switch;
    if (!cfg->work_dir[0])
        snprintf(cfg->work_dir, sizeof cfg->work_dir, "%s",
                 root ? "/var/lib/fairgpu/agent" : "fairgpu-agent");
    if (fg_mkdir_p(cfg->work_dir, 0711) != 0) {
        fprintf(stderr, "fairgpu agent: cannot create --work-dir %s: %s\n", cfg->work_dir,
                strerror(errno));
        return -1;
    }
    char abs[PATH_MAX];
    if (realpath(cfg->work_dir, abs))
        fg_fmt(cfg->work_dir, sizeof cfg->work_dir, "%s", abs);
    struct stat wsb;
    if (stat(cfg->work_dir, &wsb) == 0 && (wsb.st_mode & 022))
        fg_log(FG_LOG_WARN,
               "--work-dir %s is writable by others: they can replace the agent's files "
               "there (chmod 711 it)",
               cfg->work_dir);
    if (!cfg->checkpoint_root[0])
        fg_fmt(cfg->checkpoint_root, sizeof cfg->checkpoint_root, "%s/checkpoints", cfg->work_dir);
    if (fg_mkdir_p(cfg->checkpoint_root, 0711) != 0) {
        fprintf(stderr, "fairgpu agent: cannot create --checkpoint-root %s: %s\n",
                cfg->checkpoint_root, strerror(errno));
        return -1;
    }
    if (realpath(cfg->checkpoint_root, abs))
        fg_fmt(cfg->checkpoint_root, sizeof cfg->checkpoint_root, "%s", abs);
    struct stat csb;
    if (stat(cfg->checkpoint_root, &csb) == 0 && (csb.st_mode & 022) && !(csb.st_mode & S_ISVTX))
        fg_log(FG_LOG_WARN,
               "--checkpoint-root %s is writable by others without the sticky bit: users can "
               "rename each other's checkpoint directories (chmod +t it)",
               cfg->checkpoint_root);
    if (!cfg->addr[0]) {
        if (cfg->fake_nodes || strstr(cfg->server, "://127.") ||
            strstr(cfg->server, "://localhost"))
            snprintf(cfg->addr, sizeof cfg->addr, "127.0.0.1");
        else if (gethostname(cfg->addr, sizeof cfg->addr - 1) != 0)
            snprintf(cfg->addr, sizeof cfg->addr, "127.0.0.1");
    }
    if (!cfg->cpus)
        cfg->cpus = sysconf(_SC_NPROCESSORS_ONLN) > 0 ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
    if (!cfg->memory_mb) {
        long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        cfg->memory_mb = pages > 0 && psz > 0 ? (int64_t)pages * psz / (1024 * 1024) : 1024;
    }
    if (setup_isolation(cfg, root, no_cg) != 0)
        return -1;
    if (root && !cfg->switch_user)
        fg_log(FG_LOG_WARN, "--no-switch-user: jobs run as root and can read the node's credential "
                            "(development only)");
    else if (!root)
        fg_log(FG_LOG_WARN, "not running as root: jobs run as this agent's user and can read "
                            "the node's credential (development only)");
    return 0;
}

/* Sets up node i (name, work dir, GPUs). Returns 0 or -1. */
static int node_init(fg_agent_t *ag, int i)
{
    fg_agent_cfg_t *cfg = &ag->cfg;
    fg_node_t *n = &ag->nodes[i];
    n->ag = ag;
    n->idx = i;
    if (cfg->fake_nodes)
        fg_fmt(n->name, sizeof n->name, "%s-%d", cfg->name, i);
    else
        snprintf(n->name, sizeof n->name, "%s", cfg->name);
    if (cfg->fake_nodes)
        snprintf(n->work_dir, sizeof n->work_dir, "%s/%s", cfg->work_dir, n->name);
    else
        snprintf(n->work_dir, sizeof n->work_dir, "%s", cfg->work_dir);
    if (fg_mkdir_p(n->work_dir, 0711) != 0) {
        fprintf(stderr, "fairgpu agent: cannot create %s: %s\n", n->work_dir, strerror(errno));
        return -1;
    }
    fg_fmt(n->cred_file, sizeof n->cred_file, "%s/node.token", n->work_dir);
    random_hex(n->instance, 8);
    n->hb_interval_s = cfg->heartbeat_s;
    n->need_register = 1;
    snprintf(n->state, sizeof n->state, "unknown");
    pthread_cond_init(&n->reg_cond, NULL);
    pthread_cond_init(&n->report_cond, NULL);
    if (cfg->fake_gpus >= 0) {
        fg_gpu_fake_open(n->name, cfg->fake_gpus, cfg->gpu_type[0] ? cfg->gpu_type : NULL, &n->gpu);
    } else {
        char err[300];
        if (fg_gpu_nvml_open(cfg->nvml_lib[0] ? cfg->nvml_lib : NULL, &n->gpu, err, sizeof err) !=
            0) {
            fprintf(stderr,
                    "fairgpu agent: %s\n"
                    "fairgpu agent: no GPUs to offer; on a machine without NVIDIA GPUs use "
                    "--fake-gpus N\n",
                    err);
            return -1;
        }
    }
    n->ngpus = n->gpu.count(n->gpu.ctx);
    if (n->ngpus == 0) {
        fprintf(stderr, "fairgpu agent: the %s backend found no GPUs for node %s\n", n->gpu.name,
                n->name);
        return -1;
    }
    for (int g = 0; g < n->ngpus; g++) {
        if (n->gpu.info(n->gpu.ctx, g, &n->gpus[g]) != 0) {
            fprintf(stderr, "fairgpu agent: cannot read GPU %d of %s\n", g, n->name);
            return -1;
        }
    }
    if (cfg->gpu_type[0])
        snprintf(n->gpu_type, sizeof n->gpu_type, "%s", cfg->gpu_type);
    else
        snprintf(n->gpu_type, sizeof n->gpu_type, "%s", n->ngpus ? n->gpus[0].type : "none");
    for (int g = 0; g < n->ngpus; g++)
        snprintf(n->gpus[g].type, sizeof n->gpus[g].type, "%s", n->gpu_type);
    if (!cfg->fake_nodes || i == 0)
        fg_log(FG_LOG_INFO, "node %s: %d GPU(s) from %s backend%s%s%s", n->name, n->ngpus,
               n->gpu.name, n->ngpus ? " (" : "", n->ngpus ? n->gpus[0].name : "",
               n->ngpus ? ")" : "");
    fg_node_load_state(n);
    return 0;
}

int fg_cmd_agent(int argc, char **argv)
{
    fg_agent_t *ag = fg_xcalloc(1, sizeof *ag);
    fg_agent_cfg_t *cfg = &ag->cfg;
    cfg->fake_gpus = -1;
    cfg->heartbeat_s = 2;
    cfg->poll_wait_s = 25;
    cfg->grace_s = 30;
    cfg->log_limit = FG_LOG_LIMIT_DEFAULT;
    cfg->report_threads = 4;
    cfg->job_pids_max = 4096;
    snprintf(cfg->user_prefix, sizeof cfg->user_prefix, "fg-");
    if (sodium_init() < 0) { /* SHA-256 of long usernames (account.c) */
        fprintf(stderr, "fairgpu agent: cannot initialise libsodium\n");
        free(ag);
        return 1;
    }
    snprintf(cfg->cgroup_root, sizeof cfg->cgroup_root, "/sys/fs/cgroup");
    int rc = parse_args(argc, argv, cfg);
    if (rc != 0) {
        free(ag);
        return rc > 0 ? 0 : 2;
    }
    if (fg_agent_read_token(cfg) != 0) {
        free(ag);
        return 2;
    }
    if (cfg->fake_nodes && fg_agent_is_node_credential(cfg->token)) {
        fprintf(stderr, "fairgpu agent: a node credential serves one node; with --fake-nodes "
                        "give the cluster's join token (each node joins with its own)\n");
        free(ag);
        return 2;
    }
    /* Before any thread exists: the single-threaded helper that forks job monitors. */
    if (fg_launcher_init() != 0)
        fg_log(FG_LOG_WARN, "cannot start the launcher helper; forking monitors directly");
    /* Signals: handled by sigwait in this thread; blocked everywhere else. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    srand((unsigned)getpid() ^ (unsigned)time(NULL));

    pthread_mutex_init(&ag->mu, NULL);
    if (pipe(ag->wake) != 0) {
        perror("fairgpu agent: pipe");
        return 1;
    }
    for (int k = 0; k < 2; k++) {
        fcntl(ag->wake[k], F_SETFL, O_NONBLOCK);
        fcntl(ag->wake[k], F_SETFD, FD_CLOEXEC);
    }
    ag->nnodes = cfg->fake_nodes ? cfg->fake_nodes : 1;
    ag->nodes = fg_xcalloc((size_t)ag->nnodes, sizeof *ag->nodes);
    for (int i = 0; i < ag->nnodes; i++) {
        if (node_init(ag, i) != 0)
            return 1;
    }
    fg_log(FG_LOG_INFO, "agent: %d node(s) %s%s, server %s, work dir %s", ag->nnodes, cfg->name,
           cfg->fake_nodes ? "-0.." : "", cfg->server, cfg->work_dir);
    pthread_create(&ag->sup_thr, NULL, fg_supervisor_main, ag);
    for (int i = 0; i < ag->nnodes; i++) {
        fg_node_t *n = &ag->nodes[i];
        pthread_create(&n->hb_thr, NULL, fg_node_hb_main, n);
        pthread_create(&n->poll_thr, NULL, fg_node_poll_main, n);
        for (int k = 0; k < cfg->report_threads; k++)
            pthread_create(&n->report_thr[k], NULL, fg_node_report_main, n);
    }
    int sig = 0;
    sigwait(&set, &sig);
    fg_log(FG_LOG_INFO, "agent: %s received, stopping%s", sig == SIGINT ? "SIGINT" : "SIGTERM",
           cfg->stop_jobs_on_exit ? " (and killing its jobs)" : " (jobs keep running)");
    if (cfg->stop_jobs_on_exit)
        fg_agent_kill_all(ag);
    pthread_mutex_lock(&ag->mu);
    ag->stop = 1;
    for (int i = 0; i < ag->nnodes; i++) {
        pthread_cond_broadcast(&ag->nodes[i].reg_cond);
        pthread_cond_broadcast(&ag->nodes[i].report_cond);
    }
    pthread_mutex_unlock(&ag->mu);
    fg_agent_wake(ag);
    for (int i = 0; i < ag->nnodes; i++) {
        fg_node_t *n = &ag->nodes[i];
        pthread_join(n->hb_thr, NULL);
        pthread_join(n->poll_thr, NULL);
        for (int k = 0; k < cfg->report_threads; k++)
            pthread_join(n->report_thr[k], NULL);
    }
    pthread_join(ag->sup_thr, NULL);
    for (int i = 0; i < ag->nnodes; i++) {
        fg_node_t *n = &ag->nodes[i];
        while (n->attempts) {
            fg_attempt_t *a = n->attempts;
            n->attempts = a->next;
            if (a->proc.life_fd >= 0)
                close(a->proc.life_fd);
            free(a->gpu_uuids);
            free(a);
        }
        for (unsigned k = 0; k < FG_ENDED_RING; k++)
            free(n->ended[k]);
        n->gpu.close(n->gpu.ctx);
        pthread_cond_destroy(&n->reg_cond);
        pthread_cond_destroy(&n->report_cond);
    }
    close(ag->wake[0]);
    close(ag->wake[1]);
    fg_launcher_shutdown();
    free(ag->nodes);
    pthread_mutex_destroy(&ag->mu);
    free(ag);
    curl_global_cleanup();
    return 0;
}
