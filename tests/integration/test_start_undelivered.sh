#!/usr/bin/env bash
# test_start_undelivered.sh - a start the controller committed but never delivered to
# the agent is not a lost job: the rank never ran, so it is requeued without using a
# retry (max_retries 0 jobs must not end FAILED/node_lost) and completes.
#
#   1. the agent is killed (kill -9) while its node is still up; jobs are started there
#      (committed, queued for the agent, never fetched); the agent comes back with the
#      same work dir and registers holding none of them;
#   2. the same, and the controller is killed (kill -9) after committing the starts and
#      before any delivery; it restarts, the agent registers with the new epoch.
#
# In both, every job must complete, with retries_used 0 and a first attempt ended
# "not_started".
#
# usage: bash test_start_undelivered.sh /path/to/fairgpu      (needs curl and jq)
FG_TEST_NAME=test_start_undelivered
# The killed agent's node must stay up while the starts are committed.
SERVER_EXTRA=(--heartbeat-misses 120 --retry-backoff 1s)
source "$(dirname "$0")/lib_agent.sh"

AGENT_PID=
start_agent() {
    "$FG" agent --server "$URL" --token-file "$TMP/data/agent.token" --name n1 \
        --fake-gpus 8 --gpu-type h100 --work-dir "$TMP/w-n1" --heartbeat 1 \
        --user-map "$TMP/usermap" --stop-jobs-on-exit >>"$TMP/agent.log" 2>&1 &
    AGENT_PID=$!
    AGENT_PIDS+=($!)
}
state() { api GET "/v1/jobs/$1" | jq -r .state; }
all_state() { # all_state STATE ID...
    local want=$1
    shift
    for j in "$@"; do [ "$(state "$j")" = "$want" ] || return 1; done
}
all_ended() {
    for j in "$@"; do
        case "$(state "$j")" in PENDING | RUNNING) return 1 ;; esac
    done
}
node_up() { [ "$(api GET /v1/nodes | jq -r '.items[] | select(.name=="n1") | .state')" = up ]; }
submit_batch() { # submit_batch TAG N -> ids on stdout
    for i in $(seq 1 "$2"); do
        api POST /v1/jobs "{\"name\":\"$1-$i\",\"gpus\":1,\"max_retries\":0,\"command\":\"echo ran-$1-$i\"}" | jq -r .id
    done
}
check_batch() { # check_batch WHAT ID...
    local what=$1
    shift
    check "$what: every job ends" wait_for 60 all_ended "$@"
    for j in "$@"; do
        local jj
        jj=$(api GET "/v1/jobs/$j")
        check "$what: job $j COMPLETED (not FAILED/node_lost): $(jq -c '{state,retries_used,attempts}' <<<"$jj")" \
            test "$(jq -r .state <<<"$jj")" = COMPLETED
        check "$what: job $j used no retry" test "$(jq -r .retries_used <<<"$jj")" = 0
        check "$what: job $j has no node_lost event" \
            test "$(api GET "/v1/jobs/$j/events" | jq '[.items[] | select(.reason=="node_lost")] | length')" = 0
        check "$what: job $j's first attempt never started" \
            test "$(api GET "/v1/jobs/$j/attempts" | jq -r '.items[0].end_cause')" = not_started
        check "$what: job $j ran once it reached the node" \
            test "$(api GET "/v1/jobs/$j/logs")" = "ran-$(jq -r .name <<<"$jj")"
    done
}

start_agent
check "the agent registers" wait_for 15 node_up

# --------------------------------------------- 1. agent gone, starts queued, agent back --
kill -9 "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null
mapfile -t A < <(submit_batch a 4)
check "the starts are committed while the agent is gone" wait_for 20 all_state RUNNING "${A[@]}"
start_agent
check_batch "agent restart" "${A[@]}"

# ------------------------------ 2. controller killed between start commit and delivery --
kill -9 "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null
mapfile -t B < <(submit_batch b 6)
check "the starts are committed" wait_for 20 all_state RUNNING "${B[@]}"
kill -9 "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null
SERVER_PID=
start_server
URL="http://127.0.0.1:$PORT"
ALICE=$(curl -s -X POST "$URL/v1/sessions" -d '{"username":"alice","password":"alice-password-1"}' | jq -r .token)
start_agent
check "the agent registers with the restarted controller" wait_for 20 node_up
check_batch "controller kill -9" "${B[@]}"

if [ "$FAILS" != 0 ]; then
    echo "--- server log (tail)" >&2
    tail -20 "$TMP/server.log" >&2
    echo "--- agent log (tail)" >&2
    tail -20 "$TMP/agent.log" >&2
fi
echo "$CHECKS checks passed, $FAILS failed"
[ "$FAILS" = 0 ]
