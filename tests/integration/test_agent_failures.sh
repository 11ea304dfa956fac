#!/usr/bin/env bash
# test_agent_failures.sh - node failures and maintenance with the real server and three
# real agent processes (8 fake GPUs each):
#
#   1. drain: the running job on the drained node finishes normally, nothing new starts
#      there (a job waits instead), resume lets it start there;
#   2. kill -9 of an agent: after the missed heartbeats its node is down, its job is
#      requeued (event node_lost) and completes on another node; the killed agent's job
#      processes survive it (their monitors do), and when the agent is started again with
#      the same work dir it reconciles with the controller, which calls them stale, and
#      kills them;
#   3. a gang job loses one of its nodes: the other rank is stopped (peer_failed) and
#      the job is requeued;
#   4. preemption: a high job takes a low job's node; the victim finds FAIRGPU_PREEMPT in
#      its checkpoint dir before SIGTERM, is requeued, and its next attempt resumes from
#      the checkpoint it left in the same FAIRGPU_CHECKPOINT_DIR;
#   5. the controller restarts while a job runs: the agents register again (new epoch),
#      the job is adopted and completes with its whole log.
#
# usage: bash test_agent_failures.sh /path/to/fairgpu      (needs curl and jq)
FG_TEST_NAME=test_agent_failures
# Five missed 1 s heartbeats make a node down: a loaded test machine can stall a live
# agent for three.
SERVER_EXTRA=(--retry-backoff 1s --heartbeat-misses 5)
source "$(dirname "$0")/lib_agent.sh"
declare -A AGENT_OF
start_agent() { # start_agent NAME
    "$FG" agent --server "$URL" --token-file "$TMP/data/agent.token" --name "$1" \
        --fake-gpus 8 --gpu-type h100 --work-dir "$TMP/w-$1" --checkpoint-root "$TMP/ckpt" \
        --heartbeat 1 --user-map "$TMP/usermap" --stop-jobs-on-exit ${AGENT_ISO[@]+"${AGENT_ISO[@]}"} \
        >>"$TMP/agent-$1.log" 2>&1 &
    AGENT_PIDS+=($!)
    AGENT_OF[$1]=$!
}
for n in n1 n2 n3; do start_agent $n; done

nodes_up() { [ "$(api GET /v1/nodes | jq '[.items[] | select(.state=="up")] | length')" = 3 ]; }
check "three agents register with 8 GPUs each" wait_for 15 nodes_up
check "each node reports 8 GPUs with fake uuids" \
    test "$(api GET /v1/nodes | jq '[.items[].gpus[] | select(.uuid | startswith("GPU-fake-"))] | length')" = 24

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

# ------------------------------------------------------------------- 1. drain --

S='sleep 8' # long enough that all three run at once on a loaded machine
D=()
for _ in 1 2 3; do D+=("$(submit "{\"name\":\"fill\",\"gpus\":8,\"command\":\"$S\"}")"); done
check "three 8-GPU jobs fill the three nodes" wait_for 15 all_state RUNNING "${D[@]}"
ON_N1=
for j in "${D[@]}"; do [ "$(api GET "/v1/jobs/$j" | jq -r .node)" = n1 ] && ON_N1=$j; done
check "one of them runs on n1" test -n "$ON_N1"
AS=$ROOT api POST /v1/nodes/n1/drain >/dev/null
node_state() { AS=$ROOT api GET /v1/nodes | jq -r --arg n "$1" '.items[] | select(.name==$n) | .state'; }
check "n1 is draining while its job runs (state $(node_state n1))" \
    bash -c "[ \"\$1\" = draining ] || [ \"\$1\" = drained ]" _ "$(node_state n1)"
check "the job on the draining node completes normally" wait_for 30 is_state "$ON_N1" COMPLETED
check "every fill job completes" wait_for 30 all_state COMPLETED "${D[@]}"
check "n1 is drained once idle" wait_for 10 bash -c "[ \"\$($(declare -f api node_state); URL=$URL ROOT=$ROOT node_state n1)\" = drained ]"
E=()
# The jobs hold their nodes until the test says go, so the waiting one can only start on
# n1 once it is resumed, however slow the machine is.
for _ in 1 2 3; do E+=("$(submit "{\"name\":\"after-drain\",\"gpus\":8,\"command\":\"while [ ! -e $TMP/go2 ]; do sleep 0.2; done\"}")"); done
sleep 2
ran_n1=0
pending=0
for j in "${E[@]}"; do
    api GET "/v1/jobs/$j" >"$TMP/e.json"
    [ "$(jq -r .node "$TMP/e.json")" = n1 ] && ran_n1=1
    [ "$(jq -r .state "$TMP/e.json")" = PENDING ] && pending=$((pending + 1))
done
check "nothing starts on the drained node" test $ran_n1 = 0
check "one 8-GPU job waits while n1 is drained" test $pending -ge 1
AS=$ROOT api POST /v1/nodes/n1/resume >/dev/null
check "n1 is up after resume" wait_for 5 bash -c "[ \"\$($(declare -f api node_state); URL=$URL ROOT=$ROOT node_state n1)\" = up ]"
check "after resume every job runs" wait_for 30 all_state RUNNING "${E[@]}"
touch "$TMP/go2"
check "after resume every job completes" wait_for 30 all_state COMPLETED "${E[@]}"
on_n1=0
for j in "${E[@]}"; do [ "$(api GET "/v1/jobs/$j" | jq -r .node)" = n1 ] && on_n1=1; done
check "the waiting job started on n1 once it was resumed" test $on_n1 = 1

# ---------------------------------------------------------------- 2. kill -9 --

KCMD='if [ $FAIRGPU_ATTEMPT = 1 ]; then sleep 300 & echo KID=$!; wait; else echo second-attempt on $(hostname); sleep 1; fi'
K=$(submit "{\"name\":\"survivor\",\"gpus\":8,\"max_retries\":1,\"command\":\"$KCMD\"}")
first_kid() { api GET "/v1/jobs/$K/logs?attempt=1" | grep -q '^KID='; }
check "the job runs its first attempt" wait_for 15 first_kid
KID=$(host_pid "$(api GET "/v1/jobs/$K/logs?attempt=1" | sed -n 's/^KID=//p')" "sleep 300")
VICTIM=$(api GET "/v1/jobs/$K" | jq -r .node)
VPID=${AGENT_OF[$VICTIM]:-}
check "the job's node ($VICTIM) is one of ours" test -n "$VPID"
kill -9 "$VPID"
wait "$VPID" 2>/dev/null
check "the node of the killed agent goes down" wait_for 15 bash -c "[ \"\$($(declare -f api node_state); URL=$URL ROOT=$ROOT node_state $VICTIM)\" = down ]"
node_lost_event() { api GET "/v1/jobs/$K/events" | jq -e '[.items[] | select(.reason=="node_lost")] | length >= 1' >/dev/null; }
check "the job is requeued with reason node_lost" wait_for 10 node_lost_event
check "the requeued job completes on another node" wait_for 20 is_state "$K" COMPLETED
api GET "/v1/jobs/$K" >"$TMP/k.json"
check "second attempt ran elsewhere ($(jq -r .node "$TMP/k.json") != $VICTIM)" \
    test "$(jq -r .node "$TMP/k.json")" != "$VICTIM"
check "two attempts" test "$(jq -r .attempts "$TMP/k.json")" = 2
check "the second attempt's log" bash -c "$(declare -f api); URL=$URL ALICE=$ALICE api GET '/v1/jobs/$K/logs' | grep -q second-attempt"
check "the lost attempt's process outlived its agent (monitor kept it)" bash -c "$(declare -f pid_gone); ! pid_gone $KID"
# Restart the killed agent with the same work dir: reconcile kills the stale attempt.
start_agent "$VICTIM"
check "the restarted agent's node is up again" wait_for 15 bash -c "[ \"\$($(declare -f api node_state); URL=$URL ROOT=$ROOT node_state $VICTIM)\" = up ]"
check "the stale attempt's process is killed after reconcile" wait_for 10 pid_gone "$KID"
check "the agent logged the reconcile" grep -q '1 to stop after reconcile' "$TMP/agent-$VICTIM.log"
check "the completed job stays COMPLETED" is_state "$K" COMPLETED

# ------------------------------------------------ 3. a gang job loses a node --

GG='sleep 31$FAIRGPU_NODE_RANK & echo KID=$!; wait'
G=$(submit "{\"name\":\"gang-lost\",\"gpus\":16,\"max_retries\":0,\"command\":\"$GG\"}")
both_kids() { [ "$(api GET "/v1/jobs/$G/logs" | grep -c 'KID=')" = 2 ]; }
check "the 16-GPU job runs on two nodes" wait_for 15 both_kids
api GET "/v1/jobs/$G" >"$TMP/g.json"
R0=$(jq -r '.nodes[0]' "$TMP/g.json")
R1=$(jq -r '.nodes[1]' "$TMP/g.json")
K1=$(host_pid "$(api GET "/v1/jobs/$G/logs?rank=1" | sed -n 's/^KID=//p')" "sleep 311")
K0=$(host_pid "$(api GET "/v1/jobs/$G/logs?rank=0" | sed -n 's/^KID=//p')" "sleep 310")
kill -9 "${AGENT_OF[$R0]}"
wait "${AGENT_OF[$R0]}" 2>/dev/null
gang_ended() { local s; s=$(state "$G"); [ "$s" = FAILED ] || [ "$s" = PENDING ]; }
check "losing rank 0's node ends the gang attempt ($(state "$G"))" wait_for 20 gang_ended
check "the surviving rank on $R1 is stopped (peer_failed)" wait_for 10 pid_gone "$K1"
api POST "/v1/jobs/$G/cancel" >/dev/null
start_agent "$R0" # reconcile kills rank 0's stale process
check "rank 0's stale process is killed after the agent restarts" wait_for 15 pid_gone "${K0:-1}"

# ------------------------------------------------ 4. preemption with notice --

# Low jobs fill the cluster; each checkpoints, and on SIGTERM prints the preemption
# notice it finds in its checkpoint dir. A high job then takes one node's GPUs: the
# victim is told first (FAIRGPU_PREEMPT), stopped, requeued, and its next attempt finds
# its checkpoint in the same FAIRGPU_CHECKPOINT_DIR.
PCMD='if [ -e $FAIRGPU_CHECKPOINT_DIR/ckpt ]; then echo resumed-from-$(cat $FAIRGPU_CHECKPOINT_DIR/ckpt); exit 0; fi; echo attempt-$FAIRGPU_ATTEMPT > $FAIRGPU_CHECKPOINT_DIR/ckpt; trap \"echo notice: \\$(cat \\$FAIRGPU_CHECKPOINT_DIR/FAIRGPU_PREEMPT); exit 0\" TERM; echo working; while :; do sleep 0.2; done'
P=()
for _ in 1 2 3; do P+=("$(submit "{\"name\":\"low\",\"gpus\":8,\"priority\":\"low\",\"command\":\"$PCMD\"}")"); done
check "three low jobs fill the cluster" wait_for 20 all_state RUNNING "${P[@]}"
H=$(submit '{"name":"urgent","gpus":8,"priority":"high","command":"echo urgent; sleep 1"}')
check "the high job starts by preempting a low one" wait_for 20 bash -c "$(declare -f api state is_state); URL=$URL ALICE=$ALICE; is_state $H RUNNING || is_state $H COMPLETED"
VICTIM_JOB=
for j in "${P[@]}"; do
    api GET "/v1/jobs/$j/events" | jq -e '[.items[] | select(.reason=="preempted")] | length >= 1' >/dev/null && VICTIM_JOB=$j
done
check "one low job was preempted (event reason preempted)" test -n "$VICTIM_JOB"
if [ -n "$VICTIM_JOB" ]; then
    check "the victim saw the FAIRGPU_PREEMPT notice before SIGTERM ended it" \
        bash -c "$(declare -f api); URL=$URL ALICE=$ALICE api GET '/v1/jobs/$VICTIM_JOB/logs?attempt=1' | grep -q '^notice: preempt '"
    check "the preempted attempt ended with cause preempted" \
        test "$(api GET "/v1/jobs/$VICTIM_JOB/attempts" | jq -r '.items[0].end_cause')" = preempted
fi
check "the high job completes" wait_for 20 is_state "$H" COMPLETED
if [ -n "$VICTIM_JOB" ]; then
    check "the requeued victim runs again and completes" wait_for 20 is_state "$VICTIM_JOB" COMPLETED
    check "its next attempt found its checkpoint in the same dir" \
        bash -c "$(declare -f api); URL=$URL ALICE=$ALICE api GET '/v1/jobs/$VICTIM_JOB/logs' | grep -q '^resumed-from-attempt-1'"
fi
for j in "${P[@]}"; do [ "$j" != "$VICTIM_JOB" ] && api POST "/v1/jobs/$j/cancel" >/dev/null; done
ended() { for j in "${P[@]}"; do s=$(state "$j"); [ "$s" = CANCELLED ] || [ "$s" = COMPLETED ] || return 1; done; }
check "the low jobs end after the cancel" wait_for 20 ended

# ------------------------------------------------------- 5. controller restart --

# The controller restarts (new epoch) while a job runs: the agents keep it running, get
# 404/409, register again, the reconcile adopts the job, and it completes with its whole
# log.
R=$(submit '{"name":"across-restart","gpus":1,"command":"for i in 1 2 3 4 5 6; do echo r$i; sleep 0.5; done"}')
check "a job runs before the controller restart" wait_for 15 is_state "$R" RUNNING
# This one ends while the controller is down: its exit is reported to the new one.
R2=$(submit '{"name":"ends-while-down","gpus":1,"command":"echo short; sleep 1"}')
check "a short job runs before the controller restart" wait_for 15 is_state "$R2" RUNNING
kill "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null
sleep 2
"$FG" server --data-dir "$TMP/data" --listen "127.0.0.1:$PORT" --rate-limit 0 \
    --heartbeat-interval 1s --heartbeat-misses 5 --retry-backoff 1s --insecure-fast-password-hash >>"$TMP/server.log" 2>&1 &
SERVER_PID=$!
check "the controller is back" wait_for 10 bash -c "curl -sf $URL/healthz >/dev/null"
ALICE=$(curl -s -X POST "$URL/v1/sessions" -d '{"username":"alice","password":"alice-password-1"}' | jq -r .token)
check "the job survives the restart and completes" wait_for 20 is_state "$R" COMPLETED
check "one attempt only (adopted, not requeued)" test "$(api GET "/v1/jobs/$R" | jq -r .attempts)" = 1
check "its log is complete, no line lost or doubled" \
    test "$(api GET "/v1/jobs/$R/logs" | tr '\n' ' ')" = "r1 r2 r3 r4 r5 r6 "
check "the agents registered again under the new epoch" grep -q 'registered: 8 GPUs, epoch 2' "$TMP/agent-n1.log"
check "the job that ended while the controller was down is COMPLETED" wait_for 10 is_state "$R2" COMPLETED
check "... with its log" test "$(api GET "/v1/jobs/$R2/logs")" = short

# --------------------------------------------------------------------- done --

if [ "$FAILS" != 0 ]; then
    echo "--- server log (tail)" >&2
    tail -20 "$TMP/server.log" >&2
    for n in n1 n2 n3; do
        echo "--- agent $n log (tail)" >&2
        tail -15 "$TMP/agent-$n.log" >&2
    done
    echo "test_agent_failures: $FAILS of $((CHECKS + FAILS)) checks FAILED" >&2
    exit 1
fi
echo "test_agent_failures: all $CHECKS checks passed"
