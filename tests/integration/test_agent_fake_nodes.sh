#!/usr/bin/env bash
# test_agent_fake_nodes.sh - one agent process hosting 4 fake nodes (--fake-nodes 4,
# names sim-0..sim-3), with the agent token given by --token:
#
#   1. the four nodes register with 8 GPUs each and distinct uuids;
#   2. 32 one-GPU jobs run at once, each on a distinct GPU, and complete;
#   3. a 16-GPU job gang-starts on two of the process's nodes;
#   4. once reported, node-local logs are deleted (the controller has them).
#
# usage: bash test_agent_fake_nodes.sh /path/to/fairgpu      (needs curl and jq)
FG_TEST_NAME=test_agent_fake_nodes
SERVER_EXTRA=(--retry-backoff 1s)
source "$(dirname "$0")/lib_agent.sh"
"$FG" agent --server "$URL" --token "$(cat "$TMP/data/agent.token")" --name sim --fake-nodes 4 \
    --gpu-type h100 --work-dir "$TMP/w" --heartbeat 1 --user-map "$TMP/usermap" \
    --stop-jobs-on-exit ${AGENT_ISO[@]+"${AGENT_ISO[@]}"} >>"$TMP/agent.log" 2>&1 &
AGENT_PIDS+=($!)

nodes_up() { [ "$(api GET /v1/nodes | jq '[.items[] | select(.state=="up")] | length')" = 4 ]; }
check "one process registers four nodes" wait_for 15 nodes_up
check "they are sim-0..sim-3" test "$(api GET /v1/nodes | jq -r '[.items[].name] | sort | join(",")')" = sim-0,sim-1,sim-2,sim-3
check "32 GPUs with distinct fake uuids" \
    test "$(api GET /v1/nodes | jq '[.items[].gpus[].uuid | select(startswith("GPU-fake-sim-"))] | unique | length')" = 32

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

# ----------------------------------------------------------- 32 one-GPU jobs --

# Each job holds its GPU until the test says go, so all 32 surely overlap.
J=()
for _ in $(seq 1 32); do
    J+=("$(submit "{\"name\":\"one\",\"gpus\":1,\"command\":\"echo CVD=\$CUDA_VISIBLE_DEVICES; while [ ! -e $TMP/go ]; do sleep 0.5; done\"}")")
done
check "32 one-GPU jobs run at the same time" wait_for 30 all_state RUNNING "${J[@]}"
touch "$TMP/go"
check "... and complete" wait_for 20 all_state COMPLETED "${J[@]}"
: >"$TMP/uuids"
for j in "${J[@]}"; do api GET "/v1/jobs/$j/logs" | sed -n 's/^CVD=//p' >>"$TMP/uuids"; done
check "each saw one GPU" test "$(grep -c '^GPU-fake-sim-[0-3]-[0-7]$' "$TMP/uuids")" = 32
check "no GPU was given twice" test "$(sort -u "$TMP/uuids" | wc -l)" = 32

# ------------------------------------------------------------- 16-GPU gang --

G=$(submit '{"name":"gang","gpus":16,"command":"echo RANK=$FAIRGPU_NODE_RANK/$FAIRGPU_NUM_NODES"}')
check "the 16-GPU job completes" wait_for 20 is_state "$G" COMPLETED
check "on two nodes" test "$(api GET "/v1/jobs/$G" | jq '.nodes | unique | length')" = 2
check "rank 1 of 2 ran" bash -c "$(declare -f api); URL=$URL ALICE=$ALICE api GET '/v1/jobs/$G/logs?rank=1' | grep -q '^RANK=1/2'"

# ------------------------------------------------------- node-local cleanup --

no_local_logs() { [ -z "$(find "$TMP/w" -path '*/runs/*' -type f 2>/dev/null)" ]; }
check "node-local logs and exit statuses are deleted once the controller has them" wait_for 5 no_local_logs
check "no state files are left" test -z "$(find "$TMP/w" -path '*/state/*' -name '*.json')"

# --------------------------------------------------------------------- done --

if [ "$FAILS" != 0 ]; then
    echo "--- server log (tail)" >&2
    tail -20 "$TMP/server.log" >&2
    echo "--- agent log (tail)" >&2
    tail -30 "$TMP/agent.log" >&2
    echo "test_agent_fake_nodes: $FAILS of $((CHECKS + FAILS)) checks FAILED" >&2
    exit 1
fi
echo "test_agent_fake_nodes: all $CHECKS checks passed"
