/*
 * config.c - the core's tunables: defaults and checks. docs/scheduler.md lists them.
 */
#include "fairgpu/core.h"

#include <string.h>

void fg_config_default(fg_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->policy = FG_POLICY_FAIR;
    cfg->half_life_s = 7 * 24 * 3600;
    cfg->backfill = true;
    cfg->backfill_depth = 256;
    cfg->reserve_depth = 4;
    cfg->estimate_depth = 32;
    cfg->preemption = true;
    cfg->quantum_s = 3600;
    cfg->preempt_wait_s = 600;
    cfg->min_run_s = 600;
    cfg->preempt_jobs_per_pass = 1;
    cfg->retry_backoff_s = 30;
    cfg->retry_backoff_max_s = 3600;
    cfg->max_pending_per_user = 0;
    cfg->shed_pending = 0;
    cfg->las_levels = 4;
    cfg->las_thresholds_gpu_s[0] = 3600;
    cfg->las_thresholds_gpu_s[1] = 36000;
    cfg->las_thresholds_gpu_s[2] = 360000;
}

int fg_config_check(const fg_config_t *cfg, const char **msg)
{
    const char *m = NULL;
    if ((unsigned)cfg->policy >= FG_POLICY_COUNT)
        m = "policy: must be one of fair, wfq, fifo, priority, round-robin, las";
    else if (cfg->half_life_s < 0)
        m = "half_life_s: must be >= 0 (0 = no memory)";
    else if (cfg->backfill_depth < 0)
        m = "backfill_depth: must be >= 0 (0 = unbounded)";
    else if (cfg->reserve_depth < 0 || cfg->reserve_depth > 1024)
        m = "reserve_depth: must be between 0 and 1024";
    else if (cfg->estimate_depth < 0 || cfg->estimate_depth > 100000)
        m = "estimate_depth: must be between 0 and 100000";
    else if (cfg->quantum_s < 0)
        m = "quantum_s: must be >= 0";
    else if (cfg->preempt_wait_s < 0)
        m = "preempt_wait_s: must be >= 0";
    else if (cfg->min_run_s < 0)
        m = "min_run_s: must be >= 0";
    else if (cfg->preempt_jobs_per_pass < 0 || cfg->preempt_jobs_per_pass > 1024)
        m = "preempt_jobs_per_pass: must be between 0 and 1024";
    else if (cfg->retry_backoff_s < 0 || cfg->retry_backoff_max_s < cfg->retry_backoff_s)
        m = "retry_backoff_s: must be >= 0 and <= retry_backoff_max_s";
    else if (cfg->max_pending_per_user < 0)
        m = "max_pending_per_user: must be >= 0 (0 = no cap)";
    else if (cfg->shed_pending < 0)
        m = "shed_pending: must be >= 0 (0 = never shed)";
    else if (cfg->las_levels < 1 || cfg->las_levels > FG_LAS_MAX_LEVELS)
        m = "las_levels: must be between 1 and 8";
    else {
        for (int i = 0; i + 1 < cfg->las_levels; i++) {
            if (cfg->las_thresholds_gpu_s[i] <= 0 ||
                (i > 0 && cfg->las_thresholds_gpu_s[i] <= cfg->las_thresholds_gpu_s[i - 1])) {
                m = "las_thresholds_gpu_s: must be positive and ascending";
                break;
            }
        }
    }
    if (msg)
        *msg = m;
    return m ? FG_EINVAL : FG_OK;
}
