#!/usr/bin/env bash
# test_agent_nvml.sh - the agent's NVML path end to end, without a GPU: a stand-in
# libnvidia-ml (two "NVIDIA H100 80GB HBM3", uuids GPU-aaaa/GPU-bbbb, utilization 37 and
# 99 %) is compiled here and loaded with --nvml-lib, in place of libnvidia-ml.so.1.
#
#   1. the node registers the NVML GPUs: uuids, type h100 derived from the name, memory;
#   2. heartbeats carry NVML's utilization and memory samples to GET /v1/nodes;
#   3. a job's CUDA_VISIBLE_DEVICES is the NVML uuid of the GPU it was given.
#
# usage: bash test_agent_nvml.sh /path/to/fairgpu      (needs curl, jq and a C compiler)
FG_TEST_NAME=test_agent_nvml
SERVER_EXTRA=(--retry-backoff 1s)
source "$(dirname "$0")/lib_agent.sh"
cat >"$TMP/fake_nvml.c" <<'C'
#include <string.h>
typedef struct { unsigned long long total, free, used; } mem_t;
typedef struct { unsigned int gpu, memory; } util_t;
static int inited;
int nvmlInit_v2(void) { inited = 1; return 0; }
int nvmlShutdown(void) { inited = 0; return 0; }
int nvmlDeviceGetCount_v2(unsigned *c) { if (!inited) return 1; *c = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **d) { if (i > 1) return 2; *d = (void *)(unsigned long)(i + 1); return 0; }
int nvmlDeviceGetName(void *d, char *n, unsigned l) { (void)d; strncpy(n, "NVIDIA H100 80GB HBM3", l); return 0; }
int nvmlDeviceGetUUID(void *d, char *u, unsigned l) { strncpy(u, (unsigned long)d == 1 ? "GPU-aaaa" : "GPU-bbbb", l); return 0; }
int nvmlDeviceGetMemoryInfo(void *d, mem_t *m) { m->total = 80ull << 30; m->used = (unsigned long)d << 30; m->free = m->total - m->used; return 0; }
int nvmlDeviceGetUtilizationRates(void *d, util_t *u) { u->gpu = (unsigned long)d == 1 ? 37 : 99; u->memory = 5; return 0; }
const char *nvmlErrorString(int r) { (void)r; return "?"; }
C
CC=${CC:-cc}
if ! command -v "$CC" >/dev/null || ! "$CC" -shared -fPIC -o "$TMP/libnvidia-ml-standin.so" "$TMP/fake_nvml.c"; then
    echo "SKIP: no C compiler to build the stand-in NVML library"
    exit 77
fi
"$FG" agent --server "$URL" --token-file "$TMP/data/agent.token" --name gpu0 \
    --nvml-lib "$TMP/libnvidia-ml-standin.so" --work-dir "$TMP/w" --heartbeat 1 \
    --user-map "$TMP/usermap" --stop-jobs-on-exit ${AGENT_ISO[@]+"${AGENT_ISO[@]}"} >>"$TMP/agent.log" 2>&1 &
AGENT_PIDS+=($!)

nodes_up() { [ "$(api GET /v1/nodes | jq '[.items[] | select(.state=="up")] | length')" = 1 ]; }
check "the node registers" wait_for 15 nodes_up
api GET /v1/nodes >"$TMP/nodes.json"
check "its GPUs are NVML's" test "$(jq -r '[.items[0].gpus[].uuid] | join(",")' "$TMP/nodes.json")" = GPU-aaaa,GPU-bbbb
check "type h100 from the NVML name" test "$(jq -r '.items[0].gpu_type' "$TMP/nodes.json")" = h100
check "memory from NVML (80 GiB)" test "$(jq -r '.items[0].gpus[1].memory_mb' "$TMP/nodes.json")" = 81920
util() { [ "$(api GET /v1/nodes | jq -r '[.items[0].gpus[] | "\(.util_pct)/\(.mem_used_mb)"] | join(",")')" = 37/1024,99/2048 ]; }
check "NVML utilization and memory samples reach GET /v1/nodes" wait_for 10 util
check "the agent said which backend it used" grep -q 'GPU(s) from nvml backend (NVIDIA H100 80GB HBM3)' "$TMP/agent.log"


submit() { # submit JSON -> job id
    api POST /v1/jobs "$1" | jq -r .id
}
state() { api GET "/v1/jobs/$1" | jq -r .state; }
is_state() { [ "$(state "$1")" = "$2" ]; }
all_state() { # all_state STATE ID...
    local want=$1
    shift
    for j in "$@"; do is_state "$j" "$want" || return 1; done
}
# The process with this pid is gone (a zombie waiting for init counts as gone).
pid_gone() {
    [ ! -e "/proc/$1" ] && return 0
    local st
    st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
    [ -z "$st" ] || [ "$st" = Z ] || [ "$st" = X ]
}


# ------------------------------------------------------------ a job on NVML GPUs --

J=$(submit '{"name":"cvd","gpus":1,"command":"echo CVD=$CUDA_VISIBLE_DEVICES IDX=$FAIRGPU_GPU_INDICES"}')
check "a job completes" wait_for 15 is_state "$J" COMPLETED
IDX=$(api GET "/v1/jobs/$J" | jq -r '.gpu_indices[0]')
WANT=$([ "$IDX" = 0 ] && echo GPU-aaaa || echo GPU-bbbb)
check "its CUDA_VISIBLE_DEVICES is the NVML uuid of its GPU" \
    test "$(api GET "/v1/jobs/$J/logs")" = "CVD=$WANT IDX=$IDX"

# --------------------------------------------------------------------- done --

if [ "$FAILS" != 0 ]; then
    echo "--- server log (tail)" >&2
    tail -20 "$TMP/server.log" >&2
    echo "--- agent log (tail)" >&2
    tail -30 "$TMP/agent.log" >&2
    echo "test_agent_nvml: $FAILS of $((CHECKS + FAILS)) checks FAILED" >&2
    exit 1
fi
echo "test_agent_nvml: all $CHECKS checks passed"
