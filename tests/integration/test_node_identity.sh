#!/usr/bin/env bash
# test_node_identity.sh - each node acts only under its own credential.
#
# Node nx joins with the cluster token (and keeps its own credential); node ny runs with
# a credential an admin issued. With ny's credential: a log chunk or an exit report for
# nx's running job is refused (403) and the job's log and state do not change;
# registering or heartbeating as nx is refused. The cluster token alone can only join a
# new node name: every other agent call is 401, and it cannot join a known name. A
# revoked credential is 401 at once, and its name cannot join again. Two fake nodes of
# one agent process each get their own credential.
#
# usage: bash test_node_identity.sh /path/to/fairgpu      (needs curl and jq)
FG_TEST_NAME=test_node_identity
source "$(dirname "$0")/lib_agent.sh"

CLUSTER=$(tr -d '\n' <"$TMP/data/agent.token")
# agent_call TOKEN METHOD PATH [BODY]: prints "STATUS BODY"
agent_call() {
    curl -s -o "$TMP/resp" -w '%{http_code}' -X "$2" "$URL$3" -H "Authorization: Bearer $1" \
        -H 'Content-Type: application/json' ${4:+-d "$4"}
    echo " $(cat "$TMP/resp")"
}
status_of() { agent_call "$@" | cut -d' ' -f1; }
start_agent() { # start_agent NAME EXTRA...
    local name=$1
    shift
    "$FG" agent --server "$URL" --name "$name" --fake-gpus 2 --gpu-type h100 \
        --work-dir "$TMP/w-$name" --heartbeat 1 --user-map "$TMP/usermap" --stop-jobs-on-exit \
        "$@" >>"$TMP/agent-$name.log" 2>&1 &
    AGENT_PIDS+=($!)
}
node_state() { api GET /v1/nodes | jq -r ".items[] | select(.name==\"$1\") | .state"; }
node_up() { [ "$(node_state "$1")" = up ]; }

# ----------------------------------------------------------- credentials, join --
start_agent nx --token-file "$TMP/data/agent.token"
check "nx joins with the cluster token and registers" wait_for 20 node_up nx
check "nx keeps its own credential, mode 0600" test "$(stat -c %a "$TMP/w-nx/node.token" 2>/dev/null)" = 600
XTOK=$(tr -d '\n' <"$TMP/w-nx/node.token" 2>/dev/null)
check "nx's credential is a node credential, not the cluster token" \
    bash -c "[[ '$XTOK' == fgn_* ]] && [ '$XTOK' != '$CLUSTER' ]"

# a job on nx (the only node yet)
J=$(api POST /v1/jobs '{"name":"victim","gpus":2,"gpu_type":"h100","command":"echo hello; sleep 12; echo bye"}' | jq -r .id)
running_on_nx() { [ "$(api GET "/v1/jobs/$J" | jq -r '.state + " " + .node')" = "RUNNING nx" ]; }
check "the job runs on nx" wait_for 20 running_on_nx

YTOK=$(AS=$ROOT api POST /v1/nodes/ny/credentials | jq -r .token)
check "an admin issues ny a credential" bash -c "[[ '$YTOK' == fgn_* ]]"
check "a user may not issue node credentials" test "$(curl -s -o /dev/null -w '%{http_code}' -X POST \
    "$URL/v1/nodes/nz/credentials" -H "Authorization: Bearer $ALICE")" = 403
echo "$YTOK" >"$TMP/ny.token"
chmod 600 "$TMP/ny.token"
start_agent ny --token-file "$TMP/ny.token"
check "ny registers with its issued credential" wait_for 20 node_up ny

check "its first line is shipped" wait_for 20 bash -c "[ \"\$(curl -s '$URL/v1/jobs/$J/logs' -H 'Authorization: Bearer $ALICE')\" = hello ]"
LOG0=$(api GET "/v1/jobs/$J/logs")
EPOCH=1
forged=$(printf 'forged line\n' | base64 -w0)
LEN=${#LOG0}
LEN=$((LEN + 1))

# ------------------------------------------------------- ny acting against nx --
for node in nx ny; do
    check "with ny's credential, a log chunk for nx's job (as $node) is 403" test "$(status_of "$YTOK" POST /v1/agent/logs \
        "{\"node\":\"$node\",\"job_id\":\"$J\",\"attempt\":1,\"epoch\":$EPOCH,\"rank\":0,\"offset\":$LEN,\"data_b64\":\"$forged\"}")" = 403
    check "with ny's credential, an exit report for nx's job (as $node) is 403" test "$(status_of "$YTOK" POST /v1/agent/exited \
        "{\"node\":\"$node\",\"job_id\":\"$J\",\"attempt\":1,\"epoch\":$EPOCH,\"rank\":0,\"end_cause\":\"failed\",\"exit_code\":1}")" = 403
    check "with ny's credential, a batched exit for nx's job (as $node) is refused 403" test "$(agent_call "$YTOK" POST /v1/agent/reports \
        "{\"reports\":[{\"type\":\"exited\",\"node\":\"$node\",\"job_id\":\"$J\",\"attempt\":1,\"epoch\":$EPOCH,\"rank\":0,\"end_cause\":\"failed\",\"exit_code\":1}]}" |
        cut -d' ' -f2- | jq -r '.results[0].status')" = 403
done
check "registering as nx with ny's credential is refused (403)" test "$(status_of "$YTOK" POST /v1/agent/register \
    '{"node":"nx","instance":"evil","gpu_type":"h100","gpus":[{"index":0,"type":"h100"}]}')" = 403
check "heartbeating as nx with ny's credential is refused (403)" test "$(status_of "$YTOK" POST /v1/agent/heartbeat \
    '{"node":"nx","instance":"evil","epoch":1}')" = 403
check "polling nx's assignments with ny's credential is refused (403)" \
    test "$(status_of "$YTOK" GET "/v1/agent/assignments?node=nx&instance=x&wait=0")" = 403

# ----------------------------------------------------- the cluster token alone --
check "the cluster token cannot ship a log chunk (401)" test "$(status_of "$CLUSTER" POST /v1/agent/logs \
    "{\"node\":\"nx\",\"job_id\":\"$J\",\"attempt\":1,\"epoch\":$EPOCH,\"rank\":0,\"offset\":$LEN,\"data_b64\":\"$forged\"}")" = 401
check "the cluster token cannot report an exit (401)" test "$(status_of "$CLUSTER" POST /v1/agent/exited \
    "{\"node\":\"nx\",\"job_id\":\"$J\",\"attempt\":1,\"epoch\":$EPOCH,\"rank\":0,\"end_cause\":\"failed\",\"exit_code\":1}")" = 401
check "the cluster token cannot register (401)" test "$(status_of "$CLUSTER" POST /v1/agent/register \
    '{"node":"nx","instance":"evil","gpu_type":"h100","gpus":[{"index":0,"type":"h100"}]}')" = 401
check "the cluster token cannot heartbeat (401)" test "$(status_of "$CLUSTER" POST /v1/agent/heartbeat \
    '{"node":"nx","instance":"evil","epoch":1}')" = 401
check "the cluster token cannot join a known node name (409)" \
    test "$(status_of "$CLUSTER" POST /v1/agent/join '{"node":"nx"}')" = 409
check "a node credential cannot join (401)" test "$(status_of "$YTOK" POST /v1/agent/join '{"node":"nq"}')" = 401

check "nx's job log is unchanged by all of it" test "$(api GET "/v1/jobs/$J/logs")" = "$LOG0"
check "nx's job is still RUNNING on nx" running_on_nx
check "nx's job completes normally" wait_for 30 bash -c "[ \"\$(curl -s '$URL/v1/jobs/$J' -H 'Authorization: Bearer $ALICE' | jq -r .state)\" = COMPLETED ]"
check "... with exactly its own log" test "$(api GET "/v1/jobs/$J/logs" | tr '\n' ' ')" = "hello bye "

# ------------------------------------------------------------------ revocation --
check "ny's credential works before revocation (heartbeat answered, not 401)" \
    test "$(status_of "$YTOK" POST /v1/agent/heartbeat '{"node":"ny","instance":"x","epoch":1}')" != 401
check "an admin revokes ny's credential" test "$(AS=$ROOT api DELETE /v1/nodes/ny/credentials | jq -r .revoked)" = true
check "the revoked credential is 401 at once" \
    test "$(status_of "$YTOK" POST /v1/agent/heartbeat '{"node":"ny","instance":"x","epoch":1}')" = 401
check "... on every agent route" test "$(status_of "$YTOK" GET "/v1/agent/assignments?node=ny&instance=x&wait=0")" = 401
check "a revoked name cannot join again with the cluster token (409)" \
    test "$(status_of "$CLUSTER" POST /v1/agent/join '{"node":"ny"}')" = 409
check "ny's agent is locked out: its node goes down" wait_for 30 bash -c \
    "[ \"\$(curl -s '$URL/v1/nodes' -H 'Authorization: Bearer $ALICE' | jq -r '.items[] | select(.name==\"ny\") | .state')\" = down ]"
check "the cluster token joins a new name (the one thing it can do)" \
    test "$(status_of "$CLUSTER" POST /v1/agent/join '{"node":"nz"}')" = 201

# ------------------------------------------------------------------ the CLI --
WTOK=$(FAIRGPU_URL=$URL FAIRGPU_TOKEN=$ROOT "$FG" node-token create nw --json | jq -r .token)
check "fairgpu node-token create issues a node credential" bash -c "[[ '$WTOK' == fgn_* ]]"
check "... that nw can use" test "$(status_of "$WTOK" POST /v1/agent/heartbeat '{"node":"nw","instance":"x","epoch":1}')" = 404
check "fairgpu node-token revoke revokes it" env FAIRGPU_URL="$URL" FAIRGPU_TOKEN="$ROOT" "$FG" node-token revoke nw
check "... at once" test "$(status_of "$WTOK" POST /v1/agent/heartbeat '{"node":"nw","instance":"x","epoch":1}')" = 401
check "a user cannot run fairgpu node-token" bash -c "! FAIRGPU_URL=$URL FAIRGPU_TOKEN=$ALICE '$FG' node-token create nv >/dev/null 2>&1"

# ------------------------------------------------- fake nodes: one credential each --
start_agent fk --fake-nodes 2 --token-file "$TMP/data/agent.token"
check "both fake nodes register" wait_for 20 bash -c "
    [ \"\$(curl -s '$URL/v1/nodes' -H 'Authorization: Bearer $ALICE' | jq '[.items[] | select((.name==\"fk-0\" or .name==\"fk-1\") and .state==\"up\")] | length')\" = 2 ]"
check "each fake node has its own credential" bash -c \
    "[ -s '$TMP/w-fk/fk-0/node.token' ] && [ -s '$TMP/w-fk/fk-1/node.token' ] && ! cmp -s '$TMP/w-fk/fk-0/node.token' '$TMP/w-fk/fk-1/node.token'"

if [ "$FAILS" != 0 ]; then
    echo "--- server log (tail)" >&2
    tail -20 "$TMP/server.log" >&2
    for n in nx ny fk; do
        echo "--- agent $n log (tail)" >&2
        tail -8 "$TMP/agent-$n.log" >&2
    done
fi
echo "$CHECKS checks passed, $FAILS failed"
[ "$FAILS" = 0 ]
