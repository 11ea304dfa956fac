#!/usr/bin/env bash
# test_billing_reports_jobs.sh - the billing reports over real charges: a real server, an
# agent with fake GPUs, real jobs (docs/billing.md, "Reports").
#
#   1. a job's usage line has its attempt's charge (cost_micros of the job), its GPU time
#      held (2 GPUs x the attempt's length), rate, node, GPU type, priority, end cause;
#   2. usage over [start, mid) plus [mid, end) is the whole charge, to the micro-unit
#      (each row clipped on its curve), and so are their GPU-ms;
#   3. the month's invoice total is the sum of its lines and of the month's usage lines;
#   4. a job named like a formula is guarded in the CSV; another user asking for alice's
#      usage is 403; alice sees her own line.
# usage: bash test_billing_reports_jobs.sh /path/to/fairgpu
FG_TEST_NAME=test_billing_reports_jobs
SERVER_EXTRA=(--charge-interval 1s)
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }
source "$(dirname "$0")/lib_agent.sh"
"$FG" agent --server "$URL" --token-file "$TMP/data/agent.token" --name n1 \
    --fake-gpus 4 --gpu-type H100 --work-dir "$TMP/w-n1" \
    --heartbeat 1 --user-map "$TMP/usermap" --stop-jobs-on-exit ${AGENT_ISO[@]+"${AGENT_ISO[@]}"} \
    >>"$TMP/agent-n1.log" 2>&1 &
AGENT_PIDS+=($!)
up() { [ "$(api GET /v1/nodes | jq '[.items[] | select(.state=="up")] | length')" = 1 ]; }
check "the agent registers" wait_for 15 up
state() { api GET "/v1/jobs/$1" | jq -r .state; }
is_state() { [ "$(state "$1")" = "$2" ]; }

# 1,000,001 micros per GPU-hour: amounts that do not divide evenly, so clipping shows
AS=$ROOT api PUT /v1/billing/prices \
    '{"currency":"EUR","prices":[{"gpu_type":"*","priority":"normal","micros_per_gpu_hour":1000001}]}' >/dev/null
J=$(api POST /v1/jobs '{"name":"=cmd|calc","gpus":2,"command":"sleep 3"}' | jq -r .id)
check "the job runs" wait_for 15 is_state "$J" RUNNING
check "the job completes" wait_for 25 is_state "$J" COMPLETED
sleep 1
COST=$(api GET "/v1/jobs/$J" | jq -r .cost_micros)
read -r S E <<<"$(api GET "/v1/jobs/$J/attempts" | jq -r '.items[0] | "\(.start_time_ms) \(.end_time_ms)"')"
U=$(api GET "/v1/billing/usage?job=$J")
echo "$U" | jq -c '.items[0]' | sed 's/^/  line: /'
line() { echo "$U" | jq -r ".items[0].$1"; }
check "one line for the job ($(echo "$U" | jq '.items | length'))" test "$(echo "$U" | jq '.items | length')" = 1
check "its cost is the job's cost_micros ($COST)" test "$(line cost_micros)" = "$COST"
check "its charge is positive, no refund" test "$(line charge_micros),$(line refund_micros)" = "$COST,0"
check "its GPU time held is 2 GPUs x the attempt ($(line gpu_ms))" test "$(line gpu_ms)" = $((2 * (E - S)))
check "rate, node, GPU type, priority, end cause" \
    test "$(line rate_micros_per_gpu_hour),$(line node),$(line gpu_type),$(line priority),$(line end_cause),$(line running)" \
    = "1000001,n1,H100,normal,completed,false"
check "start and end are the attempt's" test "$(line start_ms),$(line end_ms)" = "$S,$E"
M=$(((S + E) / 2 + 1))
A=$(api GET "/v1/billing/usage?job=$J&from=$S&to=$M")
B=$(api GET "/v1/billing/usage?job=$J&from=$M")
SUM=$(($(echo "$A" | jq .totals.cost_micros) + $(echo "$B" | jq .totals.cost_micros)))
check "usage before and after a cut adds up to the charge ($SUM = $COST)" test "$SUM" = "$COST"
GMS=$(($(echo "$A" | jq .totals.gpu_ms) + $(echo "$B" | jq .totals.gpu_ms)))
check "and so do the GPU-ms ($GMS)" test "$GMS" = $((2 * (E - S)))
check "the part before the cut is C(cut) - C(start)" \
    test "$(echo "$A" | jq .totals.cost_micros)" = "$(python3 -c "g=2*($M-$S); print((g*1000001*2+3600000)//7200000)")"
MONTH=$(date -u -d "@$((S / 1000))" +%Y-%m)
INV=$(AS=$ROOT api GET "/v1/billing/invoices/$MONTH")
MS0=$(echo "$INV" | jq .from_ms)
MS1=$(echo "$INV" | jq .to_ms)
UT=$(AS=$ROOT api GET "/v1/billing/usage?from=$MS0&to=$MS1" | jq .totals.cost_micros)
check "the invoice total is the sum of its lines" \
    test "$(echo "$INV" | jq '[.accounts[].lines[].total_micros] | add')" = "$(echo "$INV" | jq .total_micros)"
check "the invoice total is the month's usage total ($UT)" test "$(echo "$INV" | jq .total_micros)" = "$UT"
check "held GPU-ms on the invoice ($(echo "$INV" | jq .held_gpu_ms))" test "$(echo "$INV" | jq .held_gpu_ms)" = $((2 * (E - S)))
CSV=$(api GET "/v1/billing/usage?job=$J&format=csv")
check "the CSV guards the job's name" grep -q ",'=cmd|calc," <<<"$CSV"
curl -s -X POST "$URL/v1/users" -d '{"username":"bert","email":"b@example.org","password":"bert-password-1"}' >/dev/null
BERT=$(curl -s -X POST "$URL/v1/sessions" -d '{"username":"bert","password":"bert-password-1"}' | jq -r .token)
CODE=$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/billing/usage?user=alice" -H "Authorization: Bearer $BERT")
check "another user asking for alice's usage is 403 ($CODE)" test "$CODE" = 403
check "bert has no lines of his own" test "$(AS=$BERT api GET /v1/billing/usage | jq '.items | length')" = 0

if [ "$FAILS" -gt 0 ]; then
    echo "--- server log (tail)" >&2
    tail -30 "$TMP/server.log" >&2
    echo "$FAILS of $CHECKS checks FAILED"
    exit 1
fi
echo "all $CHECKS checks passed"
