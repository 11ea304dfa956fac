#!/usr/bin/env bash
# test_agent_e2e.sh - the node agent end to end: the real server and three real agent
# processes with 8 fake GPUs each, jobs submitted over HTTP.
#
#   1. 1-, 4- and 8-GPU jobs running at the same time get disjoint CUDA_VISIBLE_DEVICES,
#      exactly the GPUs the controller assigned (the jobs print them, the test compares);
#   2. a 16-GPU job gang-starts on two nodes with ranks 0/1, one master, logs per rank;
#   3. live log follow (?follow=1) shows output while the job runs, and ends with it;
#   4. cancel kills a job that spawned children: no process of it survives;
#   5. the time limit stops a job (TIMEOUT) and its children.
#
# usage: bash test_agent_e2e.sh /path/to/fairgpu      (needs curl and jq)
FG_TEST_NAME=test_agent_e2e
source "$(dirname "$0")/lib_agent.sh"
start_agent() { # start_agent NAME
    "$FG" agent --server "$URL" --token-file "$TMP/data/agent.token" --name "$1" \
        --fake-gpus 8 --gpu-type h100 --work-dir "$TMP/w-$1" --checkpoint-root "$TMP/ckpt" \
        --heartbeat 1 --user-map "$TMP/usermap" --stop-jobs-on-exit ${AGENT_ISO[@]+"${AGENT_ISO[@]}"} \
        >>"$TMP/agent-$1.log" 2>&1 &
    AGENT_PIDS+=($!)
}
for n in n1 n2 n3; do start_agent $n; done

nodes_up() { [ "$(api GET /v1/nodes | jq '[.items[] | select(.state=="up")] | length')" = 3 ]; }
check "three agents register with 8 GPUs each" wait_for 15 nodes_up
check "each node reports 8 GPUs with fake uuids" \
    test "$(api GET /v1/nodes | jq '[.items[].gpus[] | select(.uuid | startswith("GPU-fake-"))] | length')" = 24
sampled() { [ "$(api GET /v1/nodes | jq '[.items[].gpus[] | select(.util_pct != null and .mem_used_mb != null)] | length')" = 24 ]; }
check "heartbeats carry GPU utilization and memory samples" wait_for 10 sampled

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

# ------------------------------------------------ 1. disjoint CUDA_VISIBLE_DEVICES --

# Each job holds its GPUs until the test says go, so all six surely overlap however slow
# the machine is.
CMD="echo CVD=\$CUDA_VISIBLE_DEVICES; echo USER=\$(id -un); while [ ! -e $TMP/go1 ]; do sleep 0.2; done"
J=()
for g in 1 1 1 4 8 1; do
    J+=("$(submit "{\"name\":\"cvd$g\",\"gpus\":$g,\"command\":\"$CMD\"}")")
done
check "six jobs (16 GPUs) run at the same time" wait_for 15 all_state RUNNING "${J[@]}"
touch "$TMP/go1"
check "the six jobs complete" wait_for 20 all_state COMPLETED "${J[@]}"
: >"$TMP/uuids"
for j in "${J[@]}"; do
    api GET "/v1/jobs/$j" >"$TMP/job.json"
    node=$(jq -r .node "$TMP/job.json")
    gpus=$(jq -r .gpus "$TMP/job.json")
    want=$(jq -r --arg n "$node" '[.gpu_indices[] | "GPU-fake-\($n)-\(.)"] | join(",")' "$TMP/job.json")
    got=$(api GET "/v1/jobs/$j/logs" | sed -n 's/^CVD=//p')
    if [ -n "$got" ] && [ "$got" = "$want" ]; then ok; else
        fail "job $j: CUDA_VISIBLE_DEVICES '$got', expected its GPUs '$want'"
    fi
    n=$(echo "$got" | tr ',' '\n' | grep -c .)
    check "job $j sees exactly its $gpus GPU(s) (saw $n)" test "$n" = "$gpus"
    echo "$got" | tr ',' '\n' >>"$TMP/uuids"
    if [ "$(id -u)" = 0 ]; then
        check "job $j ran as the mapped account, not root" \
            test "$(api GET "/v1/jobs/$j/logs" | sed -n 's/^USER=//p')" = nobody
    fi
done
check "concurrent jobs never share a GPU" test "$(sort "$TMP/uuids" | uniq -d | wc -l)" = 0
check "16 GPUs in use in total" test "$(grep -c . "$TMP/uuids")" = 16

# ------------------------------------------------------- 2. 16-GPU gang start --

GCMD='echo RANK=$FAIRGPU_NODE_RANK NUM=$FAIRGPU_NUM_NODES MASTER=$FAIRGPU_MASTER_ADDR:$FAIRGPU_MASTER_PORT T=$(date +%s%N); echo N=$(echo $CUDA_VISIBLE_DEVICES | tr , \"\\n\" | wc -l); sleep 1'
G=$(submit "{\"name\":\"gang\",\"gpus\":16,\"command\":\"$GCMD\"}")
check "the 16-GPU job completes" wait_for 20 is_state "$G" COMPLETED
api GET "/v1/jobs/$G" >"$TMP/gang.json"
check "it ran on two nodes" test "$(jq '.nodes | unique | length' "$TMP/gang.json")" = 2
api GET "/v1/jobs/$G/logs?rank=0" >"$TMP/r0"
api GET "/v1/jobs/$G/logs?rank=1" >"$TMP/r1"
check "rank 0 log says rank 0 of 2" grep -q '^RANK=0 NUM=2 ' "$TMP/r0"
check "rank 1 log says rank 1 of 2" grep -q '^RANK=1 NUM=2 ' "$TMP/r1"
check "each rank sees 8 GPUs" grep -q '^N=8' "$TMP/r0"
check "each rank sees 8 GPUs (rank 1)" grep -q '^N=8' "$TMP/r1"
m0=$(sed -n 's/.*MASTER=\([^ ]*\).*/\1/p' "$TMP/r0")
m1=$(sed -n 's/.*MASTER=\([^ ]*\).*/\1/p' "$TMP/r1")
check "both ranks agree on the master ($m0 / $m1)" test -n "$m0" -a "$m0" = "$m1"
t0=$(sed -n 's/.* T=\([0-9]*\).*/\1/p' "$TMP/r0")
t1=$(sed -n 's/.* T=\([0-9]*\).*/\1/p' "$TMP/r1")
if [ -n "$t0" ] && [ -n "$t1" ]; then
    d=$(((t0 > t1 ? t0 - t1 : t1 - t0) / 1000000))
    check "ranks started together (${d} ms apart)" test "$d" -lt 1500
else
    fail "ranks did not print their start times"
fi
api GET "/v1/jobs/$G/logs" >"$TMP/rall"
check "the combined log prefixes lines with ranks" grep -q '^\[1\] RANK=1' "$TMP/rall"

# -------------------------------------------------------------- 3. live follow --

L=$(submit '{"name":"ticker","gpus":1,"command":"for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.5; done"}')
wait_for 10 is_state "$L" RUNNING
curl -sN "$URL/v1/jobs/$L/logs?follow=1" -H "Authorization: Bearer $ALICE" >"$TMP/follow" &
FOLLOW=$!
BG_PIDS+=($FOLLOW)
FAIRGPU_URL=$URL FAIRGPU_TOKEN=$ALICE XDG_CONFIG_HOME=$TMP/cfg "$FG" logs -f "$L" >"$TMP/cli-follow" 2>&1 &
CLI_FOLLOW=$!
BG_PIDS+=($CLI_FOLLOW)
check "a follower sees 'tick 2' while the job still runs" \
    wait_for 10 grep -q 'tick 2' "$TMP/follow"
check "... and the job is still RUNNING then" test "$(state "$L")" = RUNNING
check "the follow stream ends when the job ends" wait_for 15 bash -c "! kill -0 $FOLLOW 2>/dev/null"
check "the follower got every line" grep -q 'tick 6' "$TMP/follow"
check "'fairgpu logs -f' ends with the job too" wait_for 10 bash -c "! kill -0 $CLI_FOLLOW 2>/dev/null"
check "'fairgpu logs -f' printed every line, in order" \
    test "$(grep '^tick' "$TMP/cli-follow" | tr '\n' ' ')" = "tick 1 tick 2 tick 3 tick 4 tick 5 tick 6 "
check "SSE framing with data: lines" grep -q '^data: tick 1' "$TMP/follow"
check "the ticker completed" is_state "$L" COMPLETED
check "logs with an offset" test "$(api GET "/v1/jobs/$L/logs?offset=7")" = "$(printf 'tick 2\ntick 3\ntick 4\ntick 5\ntick 6')"

# ------------------------------------------------- 4. cancel kills the children --

C=$(submit '{"name":"spawner","gpus":2,"command":"sleep 300 & echo KID=$!; sleep 300 & echo KID=$!; wait"}')
has_kids() { [ "$(api GET "/v1/jobs/$C/logs" | grep -c '^KID=')" = 2 ]; }
check "the spawner runs and reports its children" wait_for 15 has_kids
KIDS=$(for k in $(api GET "/v1/jobs/$C/logs" | sed -n 's/^KID=//p'); do host_pid "$k" "sleep 300"; done)
for k in $KIDS; do check "child $k is alive before the cancel" bash -c "! $(declare -f pid_gone); ! pid_gone $k"; done
api POST "/v1/jobs/$C/cancel" >/dev/null
check "the cancelled job becomes CANCELLED" wait_for 15 is_state "$C" CANCELLED
for k in $KIDS; do check "child $k is gone after the cancel" wait_for 5 pid_gone "$k"; done

# ------------------------------------------------------------- 5. time limit --

T=$(submit '{"name":"slow","gpus":1,"time_limit_s":5,"command":"sleep 299 & echo KID=$!; wait"}')
t_kid() { api GET "/v1/jobs/$T/logs" | grep -q '^KID='; }
check "the slow job reports its child" wait_for 15 t_kid
KID=$(host_pid "$(api GET "/v1/jobs/$T/logs" | sed -n 's/^KID=//p')" "sleep 299")
check "the job over its time limit ends as TIMEOUT" wait_for 20 is_state "$T" TIMEOUT
check "its child $KID is gone" wait_for 5 pid_gone "${KID:-1}"
api GET "/v1/jobs/$T/attempts" >"$TMP/att.json"
check "the attempt's end cause is timeout" \
    test "$(jq -r '.items[-1].end_cause' "$TMP/att.json")" = timeout

# --------------------------------------------------------------------- done --

if [ "$FAILS" != 0 ]; then
    echo "--- server log (tail)" >&2
    tail -20 "$TMP/server.log" >&2
    for n in n1 n2 n3; do
        echo "--- agent $n log (tail)" >&2
        tail -15 "$TMP/agent-$n.log" >&2
    done
    echo "test_agent_e2e: $FAILS of $((CHECKS + FAILS)) checks FAILED" >&2
    exit 1
fi
echo "test_agent_e2e: all $CHECKS checks passed"
