#!/usr/bin/env bash
# test_why.sh - why a pending job waits, with the evidence (GET /v1/jobs/{id} "why",
# `fairgpu why`), and the fair-share projection (GET /v1/fairshare recovers_in_s), on a
# real server and one agent hosting two fake 8-GPU nodes (sim-0, sim-1):
#
#   1. fragmentation: 3 GPUs busy on each node; an 8-GPU job is told 10 free, largest 5,
#      and both nodes could hold it once the job on it ends;
#   2. fair share: account ml (alice) has usage, cv (bob) none; bob's later 8-GPU job goes
#      before alice's: place 1, and alice's job shows it ahead "because share", with ml's
#      usage share over its share; bob's command and job name are not in alice's view;
#   3. quota: account qa (quota 2) running 2 GPUs: the next job says quota 2, running 2;
#   4. GPU type: a job of a type no node has: 0 GPUs of it up;
#   5. a running job has no "why" and `fairgpu why` says since when; an unknown job 404;
#   6. the projection: ml's recovers_in_s > 0 and equal to h*log2(U(1-s)/(sS)) of its
#      own numbers at --half-life 1h; `fairgpu share` shows it;
#   7. retry backoff: a failed job says until when; a stream of GETs of it (answered
#      from the last pass) does not hold back the pass that retries it.
#
# usage: bash test_why.sh /path/to/fairgpu      (needs curl, jq and python3)
FG_TEST_NAME=test_why
SERVER_EXTRA=(--preemption off --half-life 1h --retry-backoff 4s)
source "$(dirname "$0")/lib_agent.sh"

"$FG" agent --server "$URL" --token "$(cat "$TMP/data/agent.token")" --name sim --fake-nodes 2 \
    --gpu-type h100 --work-dir "$TMP/w" --heartbeat 1 --user-map "$TMP/usermap" \
    --stop-jobs-on-exit ${AGENT_ISO[@]+"${AGENT_ISO[@]}"} >>"$TMP/agent.log" 2>&1 &
AGENT_PIDS+=($!)
nodes_up() { [ "$(api GET /v1/nodes | jq '[.items[] | select(.state=="up")] | length')" = 2 ]; }
check "two fake nodes register" wait_for 15 nodes_up

# accounts ml (alice) and cv (bob), qa (alice, quota 2)
curl -s -X POST "$URL/v1/users" -d '{"username":"bob","email":"b@example.org","password":"bob-password-1"}' >/dev/null
BOB=$(curl -s -X POST "$URL/v1/sessions" -d '{"username":"bob","password":"bob-password-1"}' | jq -r .token)
AS=$ROOT api POST /v1/accounts '{"name":"ml","weight":1}' >/dev/null
AS=$ROOT api POST /v1/accounts '{"name":"cv","weight":1}' >/dev/null
AS=$ROOT api POST /v1/accounts '{"name":"qa","weight":1,"gpu_quota":2}' >/dev/null
AS=$ROOT api POST /v1/accounts/ml/members '{"user":"alice"}' >/dev/null
AS=$ROOT api POST /v1/accounts/qa/members '{"user":"alice"}' >/dev/null
AS=$ROOT api POST /v1/accounts/cv/members '{"user":"bob"}' >/dev/null

submit() { api POST /v1/jobs "$1" | jq -r .id; } # as $AS (alice by default)
state() { api GET "/v1/jobs/$1" | jq -r .state; }
is_state() { [ "$(state "$1")" = "$2" ]; }
hold() { echo "while [ ! -e $TMP/go-$1 ]; do sleep 0.2; done"; } # a job that waits for go-NAME
job() { # job NAME ACCOUNT GPUS [EXTRA JSON] -> id
    submit "$(jq -cn --arg n "$1" --arg a "$2" --argjson g "$3" --arg c "$(hold "$1")" \
        --argjson x "${4:-{\}}" '{name: $n, account: $a, gpus: $g, command: $c, time_limit_s: 3600} + $x')"
}
why() { api GET "/v1/jobs/$1" | jq -c .why; }

# ------------------------------------------------------------ 1. fragmentation --

# ml's usage first: all 16 GPUs for about 3 s
U1=$(job u1 ml 8)
U2=$(job u2 ml 8)
check "ml's two 8-GPU jobs run" wait_for 15 bash -c "$(declare -f api state is_state); URL=$URL ALICE=$ALICE; is_state $U1 RUNNING && is_state $U2 RUNNING"
sleep 3
touch "$TMP/go-u1" "$TMP/go-u2"
check "and end" wait_for 15 bash -c "$(declare -f api state is_state); URL=$URL ALICE=$ALICE; is_state $U1 COMPLETED && is_state $U2 COMPLETED"

# 3 GPUs busy on each node: one node drained while the other takes a 3-GPU job
AS=$ROOT api POST /v1/nodes/sim-1/drain >/dev/null
A=$(job a ml 3)
check "job a runs (on sim-0)" wait_for 15 is_state "$A" RUNNING
AS=$ROOT api POST /v1/nodes/sim-1/resume >/dev/null
AS=$ROOT api POST /v1/nodes/sim-0/drain >/dev/null
B=$(job b ml 3)
check "job b runs (on sim-1)" wait_for 15 is_state "$B" RUNNING
AS=$ROOT api POST /v1/nodes/sim-0/resume >/dev/null
check "a and b are on different nodes" test "$(api GET "/v1/jobs/$A" | jq -r .node)" != "$(api GET "/v1/jobs/$B" | jq -r .node)"

J8=$(job j8 ml 8)
frag() { [ "$(why "$J8" | jq -r .code)" = fragmentation ]; }
check "the 8-GPU job waits for fragmentation" wait_for 10 frag
W=$(why "$J8")
check "10 GPUs free" test "$(echo "$W" | jq .evidence.fragmentation.free_gpus)" = 10
check "the largest block is 5" test "$(echo "$W" | jq .evidence.fragmentation.largest_free)" = 5
check "the text says it" bash -c "echo '$W' | jq -r .text | grep -q '^10 GPUs are free, but no node has 8 free (largest: 5 on sim-[01])$'"
check "both nodes could hold it, each once a or b ends" \
    test "$(echo "$W" | jq -c "[.evidence.fragmentation.holders[].after_job] | sort")" = "$(jq -cn --arg a "$A" --arg b "$B" '[$a, $b] | sort')"
check "in about an hour (their time limits)" test "$(echo "$W" | jq '[.evidence.fragmentation.holders[].in_s | select(. > 3000 and . <= 3600)] | length')" = 2
check "GPUs of its type: 16 up, 10 free" test "$(echo "$W" | jq -c '[.evidence.gpus.up, .evidence.gpus.free]')" = "[16,10]"
check "?why=0 leaves it out" test "$(api GET "/v1/jobs/$J8?why=0" | jq -c '[.state, has("why")]')" = '["PENDING",false]'
check "the list of jobs does not carry it" test "$(api GET '/v1/jobs?state=PENDING' | jq '[.items[] | select(has("why"))] | length')" = 0

FAIRGPU_URL=$URL FAIRGPU_TOKEN=$ALICE "$FG" why "$J8" >"$TMP/why.out" 2>&1
check "fairgpu why: the blocker" grep -q "^job $J8 (8 GPUs) is waiting: 10 GPUs are free, but no node has 8 free (largest: 5 on sim-" "$TMP/why.out"
check "fairgpu why: the nodes that could hold it" grep -q "^  nodes that could hold it: sim-[01] once job [0-9]* ends (~[0-9]* min), sim-" "$TMP/why.out"
check "fairgpu why: its account" grep -q "^  its account ml: [0-9]*% of the cluster's recent usage against a share of 25% (factor 0\.[0-9]*); entitled to 4\.0 GPUs, runs 6" "$TMP/why.out"
check "fairgpu why --json prints the object" test "$(FAIRGPU_URL=$URL FAIRGPU_TOKEN=$ALICE "$FG" why "$J8" --json | jq -r .code)" = fragmentation

# ------------------------------------------------------------- 2. fair share --

K8=$(AS=$BOB job bob-secret-name cv 8 '{"command":"echo bob-secret-cmd; sleep 100"}')
behind() { [ "$(why "$J8" | jq -r '.evidence.position.first[0].id')" = "$K8" ]; }
check "bob's later job goes before alice's" wait_for 10 behind
W=$(why "$J8")
check "alice's job is second in plan order" test "$(echo "$W" | jq .evidence.position.place)" = 2
check "one job, 8 GPUs ahead" test "$(echo "$W" | jq -c '[.evidence.position.ahead_jobs, .evidence.position.ahead_gpus]')" = "[1,8]"
check "ahead because of share (account cv)" test "$(echo "$W" | jq -c '.evidence.position.first[0] | [.account, .gpus, .because]')" = '["cv",8,"share"]'
check "ml's usage share is over its share" test "$(echo "$W" | jq '.evidence.fair_share.account | .usage_share > .normalized_share and .fair_share_factor < 0.5 and .name == "ml"')" = true
check "ml, alone with usage so far, never recovers (null)" test "$(echo "$W" | jq '.evidence.fair_share.account | has("recovers_in_s") and .recovers_in_s == null')" = true
check "ml's entitlement is its share of the 16 GPUs" test "$(echo "$W" | jq '.evidence.fair_share.account | (.entitlement_gpus - 16 * .normalized_share) | fabs < 1e-9')" = true
check "bob's job is first" test "$(AS=$BOB why "$K8" | jq .evidence.position.place)" = 1
A_VIEW=$(api GET "/v1/jobs/$J8")
check "alice's view holds neither bob's command nor his job's name" bash -c "! echo '$A_VIEW' | grep -q -e bob-secret-cmd -e bob-secret-name"
check "an entry ahead has only id, account, gpus, priority, because" \
    test "$(echo "$A_VIEW" | jq -c '.why.evidence.position.first[0] | keys')" = '["account","because","gpus","id","priority"]'
B_VIEW=$(AS=$BOB api GET "/v1/jobs/$J8")
check "bob sees alice's job without its command" test "$(echo "$B_VIEW" | jq 'has("command")')" = false
check "... and with its why" test "$(echo "$B_VIEW" | jq -r .why.code)" != null
FAIRGPU_URL=$URL FAIRGPU_TOKEN=$ALICE "$FG" why "$J8" >"$TMP/why2.out" 2>&1
check "fairgpu why: ahead of it" grep -q "^  ahead of it: 1 job, 8 GPUs (job $K8 account cv 8 GPUs: lower usage)" "$TMP/why2.out"
AS=$BOB api POST "/v1/jobs/$K8/cancel" >/dev/null
api POST "/v1/jobs/$J8/cancel" >/dev/null
touch "$TMP/go-a" "$TMP/go-b"
check "a and b end" wait_for 15 bash -c "$(declare -f api state is_state); URL=$URL ALICE=$ALICE; is_state $A COMPLETED && is_state $B COMPLETED"

# ------------------------------------------------------------------ 3. quota --

Q1=$(job q1 qa 2)
check "q1 runs" wait_for 15 is_state "$Q1" RUNNING
Q2=$(job q2 qa 1)
quota() { [ "$(why "$Q2" | jq -r .code)" = quota ]; }
check "q2 waits for the quota" wait_for 10 quota
check "quota 2, running 2, needs 1" test "$(why "$Q2" | jq -c '.evidence.quota | [.account, .gpu_quota, .running_gpus, .needs]')" = '["qa",2,2,1]'
check "the text says it" bash -c "$(declare -f api why); URL=$URL ALICE=$ALICE; why $Q2 | jq -r .text | grep -q 'account qa runs 2 GPUs of its quota of 2'"

# --------------------------------------------------------------- 4. GPU type --

T=$(job t ml 1 '{"gpu_type":"a100"}')
gtype() { [ "$(why "$T" | jq -r .code)" = gpu_type ]; }
check "a job of a type no node has waits for its GPU type" wait_for 10 gtype
check "0 GPUs of type a100 up" test "$(why "$T" | jq -c '.evidence.gpus | [.type, .up, .total]')" = '["a100",0,0]'
api POST "/v1/jobs/$T/cancel" >/dev/null

# ----------------------------------------------- 5. running, unknown, the CLI --

check "a running job has no why" test "$(api GET "/v1/jobs/$Q1" | jq 'has("why")')" = false
FAIRGPU_URL=$URL FAIRGPU_TOKEN=$ALICE "$FG" why "$Q1" >"$TMP/why3.out" 2>&1
check "fairgpu why: a running job says since when" grep -q "^job $Q1 (2 GPUs) is running, since " "$TMP/why3.out"
check "an unknown job is 404" test "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/jobs/999999" -H "Authorization: Bearer $ALICE")" = 404
check "fairgpu why of an unknown job fails" bash -c "! FAIRGPU_URL=$URL FAIRGPU_TOKEN=$ALICE '$FG' why 999999 >/dev/null 2>&1"

# ---------------------------------------------------------- 6. the projection --

# ml has usage, qa too (q1 runs): ml is over its share of 1/4 (default, ml, cv, qa). The
# fair-share view is refreshed about every second: until it has counted qa's first
# usage, ml is the only one with usage and recovers never (null).
ml_recovers() {
    FS=$(api GET /v1/fairshare)
    ML=$(echo "$FS" | jq -c '.accounts[] | select(.name=="ml")')
    [ "$(echo "$ML" | jq '.recovers_in_s != null and .recovers_in_s > 0')" = true ]
}
check "ml recovers in more than 0 s" wait_for 10 ml_recovers
check "recovers_at is RFC 3339" bash -c "echo '$ML' | jq -r .recovers_at | grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$'"
check "recovers_in_s is h*log2(U(1-s)/(sS)) at the half-life of 1 h" python3 -c '
import json, math, sys
fs = json.loads(sys.argv[1]); h = fs["half_life_s"]
assert h == 3600, h
tot = sum(a["usage_gpu_seconds"] for a in fs["accounts"])
a = [a for a in fs["accounts"] if a["name"] == "ml"][0]
U, s = a["usage_gpu_seconds"], a["normalized_share"]
t = h * math.log2(U * (1 - s) / (s * (tot - U)))
assert abs(a["recovers_in_s"] - t) <= 1, (a["recovers_in_s"], t)
assert abs(a["entitlement_gpus"] - 16 * s) < 1e-9
' "$FS"
check "an account without usage recovers now" test "$(echo "$FS" | jq '.accounts[] | select(.name=="cv") | .recovers_in_s')" = 0
check "users have an entitlement of their account's" test "$(echo "$FS" | jq '.accounts[] | select(.name=="ml") | .users[0] | has("entitlement_gpus") and has("recovers_in_s")')" = true
curl -s "$URL/metrics" >"$TMP/metrics"
check "/metrics: ml's entitlement" grep -qx -e 'fairgpu_account_entitlement_gpus{account="ml"} 4' "$TMP/metrics"
check "/metrics: qa's running GPUs" grep -qx -e 'fairgpu_account_running_gpus{account="qa"} 2' "$TMP/metrics"
MREC=$(sed -n 's/^fairgpu_account_recovers_in_seconds{account="ml"} //p' "$TMP/metrics")
# (later than the API's figure: ml's usage only decays and qa's only grows, so it is sooner)
check "/metrics: ml recovers, no later than the API said" python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); assert 0 < a <= b, (a, b)' "${MREC:-0}" "$(echo "$ML" | jq .recovers_in_s)"
FAIRGPU_URL=$URL FAIRGPU_TOKEN=$ALICE "$FG" share >"$TMP/share.out" 2>&1
check "fairgpu share shows when ml recovers" grep -Eq "^ml +account .* in [0-9.]+ (s|min|h|days)$" "$TMP/share.out"
touch "$TMP/go-q1" "$TMP/go-q2"

# ------------------------------------------------------------- 7. backoff --

R=$(submit '{"name":"r","account":"ml","gpus":1,"command":"exit 1","max_retries":1,"time_limit_s":60}')
backoff() { [ "$(why "$R" | jq -r .code)" = retry_backoff ]; }
check "a failed job waits out its backoff" wait_for 10 backoff
check "until when, after retry 1 of 1" test "$(why "$R" | jq -c '.evidence.backoff | [.retries_used, .max_retries, (.in_s <= 4), (.until > 0)]')" = '[1,1,true,true]'
(while :; do api GET "/v1/jobs/$R" >/dev/null; done) &
BG_PIDS+=($!)
check "a stream of GETs of it does not hold its retry back" wait_for 20 is_state "$R" FAILED
check "it ran twice" test "$(api GET "/v1/jobs/$R" | jq .attempts)" = 2

# --------------------------------------------------------------------- done --

if [ "$FAILS" != 0 ]; then
    echo "--- server log (tail)" >&2
    tail -20 "$TMP/server.log" >&2
    echo "--- outputs" >&2
    cat "$TMP/why.out" "$TMP/why2.out" "$TMP/why3.out" "$TMP/share.out" >&2 2>/dev/null
    echo "test_why: $FAILS of $((CHECKS + FAILS)) checks FAILED" >&2
    exit 1
fi
echo "test_why: all $CHECKS checks passed"
if [ -n "${FG_WHY_SHOW:-}" ]; then # (the outputs, for a person to read)
    cat "$TMP/why.out" "$TMP/why2.out" "$TMP/why3.out" "$TMP/share.out"
fi
exit 0
