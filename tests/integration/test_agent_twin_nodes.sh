#!/usr/bin/env bash
# test_agent_twin_nodes.sh - two agents on one host whose nodes and jobs have the same
# names (two clusters, each with a node `twin` running its job 1) keep their jobs apart:
# each rank has a cgroup of its own, both jobs run at once and both complete. (When
# the cgroup was named by node and job only, the two ranks shared one, and the first
# to end took the other's processes with it.)
#
# usage: bash test_agent_twin_nodes.sh /path/to/fairgpu      (as root; needs curl, jq)
FG_TEST_NAME=test_agent_twin_nodes
source "$(dirname "$0")/lib_agent.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: job cgroups are made by root agents only"; exit 77; }

# The second cluster: its own server, admin and user.
URL_A=$URL ALICE_A=$ALICE
PORT_B=
for _ in 1 2 3 4 5 6 7 8; do
    PORT_B=$((20000 + RANDOM % 40000))
    port_free "$PORT_B" && break
done
"$FG" server --data-dir "$TMP/data-b" --listen "127.0.0.1:$PORT_B" --rate-limit 0 \
    --heartbeat-interval 1s --insecure-fast-password-hash >"$TMP/server-b.log" 2>&1 &
BG_PIDS+=($!)
URL_B="http://127.0.0.1:$PORT_B"
check "the second server starts" wait_for 15 curl -fs "$URL_B/healthz" -o /dev/null
curl -s -X POST "$URL_B/v1/users" -d "$(jq -cn --arg t "$(cat "$TMP/data-b/setup-token")" \
    '{username: "root", email: "r@example.org", password: "root-password-1", setup_token: $t}')" >/dev/null
curl -s -X POST "$URL_B/v1/users" -d '{"username":"alice","email":"a@example.org","password":"alice-password-1"}' >/dev/null
ALICE_B=$(curl -s -X POST "$URL_B/v1/sessions" -d '{"username":"alice","password":"alice-password-1"}' | jq -r .token)

start_twin() { # start_twin URL TOKEN_FILE WORK_DIR
    "$FG" agent --server "$1" --token-file "$2" --name twin --fake-gpus 1 --gpu-type h100 \
        --work-dir "$3" --heartbeat 1 --user-map "$TMP/usermap" --stop-jobs-on-exit \
        ${AGENT_ISO[@]+"${AGENT_ISO[@]}"} >>"$3.log" 2>&1 &
    AGENT_PIDS+=($!)
}
start_twin "$URL_A" "$TMP/data/agent.token" "$TMP/w-a"
start_twin "$URL_B" "$TMP/data-b/agent.token" "$TMP/w-b"
up() { [ "$(curl -s "$1/v1/nodes" -H "Authorization: Bearer $2" | jq -r '.items[0].state')" = up ]; }
check "node twin of cluster A is up" wait_for 20 up "$URL_A" "$ALICE_A"
check "node twin of cluster B is up" wait_for 20 up "$URL_B" "$ALICE_B"

job='{"name":"twin","gpus":1,"command":"echo CG=$(cut -d: -f3 /proc/self/cgroup | sort -u | tail -1); sleep 4; echo DONE"}'
JA=$(curl -s -X POST "$URL_A/v1/jobs" -H "Authorization: Bearer $ALICE_A" -d "$job" | jq -r .id)
JB=$(curl -s -X POST "$URL_B/v1/jobs" -H "Authorization: Bearer $ALICE_B" -d "$job" | jq -r .id)
check "both clusters number their job alike ($JA, $JB)" test "$JA" = "$JB"
st() { curl -s "$1/v1/jobs/$3" -H "Authorization: Bearer $2" | jq -r .state; }
both_running() { [ "$(st "$URL_A" "$ALICE_A" "$JA")" = RUNNING ] && [ "$(st "$URL_B" "$ALICE_B" "$JB")" = RUNNING ]; }
check "both jobs run at once" wait_for 20 both_running
done_ok() { [ "$(st "$1" "$2" "$3")" = COMPLETED ]; }
check "cluster A's job completes" wait_for 30 done_ok "$URL_A" "$ALICE_A" "$JA"
check "cluster B's job completes" wait_for 30 done_ok "$URL_B" "$ALICE_B" "$JB"
LA=$(curl -s "$URL_A/v1/jobs/$JA/logs" -H "Authorization: Bearer $ALICE_A")
LB=$(curl -s "$URL_B/v1/jobs/$JB/logs" -H "Authorization: Bearer $ALICE_B")
check "each ran to its end (A: $(echo $LA), B: $(echo $LB))" bash -c "grep -q DONE <<<'$LA' && grep -q DONE <<<'$LB'"
CA=$(sed -n 's/^CG=//p' <<<"$LA") CB=$(sed -n 's/^CG=//p' <<<"$LB")
check "in cgroups of their own ($CA, $CB)" bash -c "[ -n '$CA' ] && [ '$CA' != '$CB' ]"

if [ "$FAILS" != 0 ]; then
    tail -5 "$TMP/w-a.log" "$TMP/w-b.log" >&2
    echo "$FG_TEST_NAME: $FAILS of $((CHECKS + FAILS)) checks FAILED" >&2
    exit 1
fi
echo "$FG_TEST_NAME: all $CHECKS checks passed"
