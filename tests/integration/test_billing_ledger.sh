#!/usr/bin/env bash
# test_billing_ledger.sh - the ledger the controller writes, with a real server, a real
# agent with fake GPUs and real jobs (docs/billing.md, "The ledger in the controller").
#
#   1. a job that runs ~3 s with a 1 s charge interval gets interim rows and one final
#      charge; its rows tile [start, end) of its attempt without gap or overlap; their
#      sum is the job's cost_micros and equals the single-row charge of the attempt;
#   2. the rate is the price in force at the attempt's start (H100, normal), and a price
#      change during a run does not touch it;
#   3. a cancelled job pays for what ran; a job that never started pays nothing;
#   4. budgets: hard (submits 402 once crossed, the running job stopped, events at 80 %
#      and 100 %), safe (a job whose limit does not fit waits with reason budget), warn
#      (a warning event, the job runs on);
#   5. fair share and billing agree: GET /v1/fairshare's month_gpu_ms per account is the
#      GPU time held in the ledger rows and the month's invoice's held_gpu_ms, and the
#      core's undecayed usage matches it (whole seconds, from the start decision: a
#      bound per attempt GPU).
#
# The ledger is read straight from the SQLite file (python3's sqlite3), read-only.
# usage: bash test_billing_ledger.sh /path/to/fairgpu
FG_TEST_NAME=test_billing_ledger
SERVER_EXTRA=(--charge-interval 1s --half-life 3650d)
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }
source "$(dirname "$0")/lib_agent.sh"
start_h100_agent n1

DB=$(ls "$TMP"/data/*.db 2>/dev/null | head -1)
# sql QUERY: rows of the ledger file, '|'-separated, read-only
sql() {
    python3 - "$DB" "$1" <<'EOF'
import sqlite3, sys
c = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True, timeout=10)
for row in c.execute(sys.argv[2]):
    print("|".join("" if v is None else str(v) for v in row))
EOF
}
state() { api GET "/v1/jobs/$1" | jq -r .state; }
is_state() { [ "$(state "$1")" = "$2" ]; }
submit() { api POST /v1/jobs "$1" | jq -r .id; }

# 3,600,000 micros per GPU-hour for H100 normal = 1 micro per GPU-ms: amounts are GPU-ms
AS=$ROOT api PUT /v1/billing/prices \
    '{"currency":"EUR","prices":[{"gpu_type":"H100","priority":"normal","micros_per_gpu_hour":3600000},
      {"gpu_type":"H100","priority":"low","micros_per_gpu_hour":1800000},
      {"gpu_type":"*","priority":"normal","micros_per_gpu_hour":7200000}]}' >/dev/null

# ------------------------------------------------ 1-2. a job's rows --
J1=$(submit '{"name":"b1","gpus":2,"command":"sleep 3.5"}')
check "job 1 runs" wait_for 15 is_state "$J1" RUNNING
sleep 1.5
# a price change during the run: the running attempt keeps its start rate
AS=$ROOT api PUT /v1/billing/prices \
    '{"currency":"EUR","prices":[{"gpu_type":"H100","priority":"normal","micros_per_gpu_hour":36000000}]}' >/dev/null
live_cost() { [ "$(api GET "/v1/jobs/$J1" | jq -r '.cost_micros // 0')" -gt 0 ]; }
check "a running job's cost_micros grows while it runs (live accrual)" wait_for 5 live_cost
check "job 1 completes" wait_for 20 is_state "$J1" COMPLETED
sleep 0.5
ROWS=$(sql "SELECT kind, interim, start_ms, end_ms, gpus, rate, gpu_ms, amount_micros, origin_ms FROM ledger WHERE job_id = $J1 ORDER BY start_ms, id")
echo "$ROWS" | sed 's/^/  row: /'
NINT=$(echo "$ROWS" | awk -F'|' '$1==0 && $2==1' | wc -l)
NFIN=$(echo "$ROWS" | awk -F'|' '$1==0 && $2==0' | wc -l)
check "job 1 has interim accrual rows ($NINT)" test "$NINT" -ge 1
check "job 1 has exactly one final charge ($NFIN)" test "$NFIN" = 1
check "every row applied the start rate 3600000" \
    test "$(echo "$ROWS" | awk -F'|' '$6 != 3600000' | wc -l)" = 0
tiles=$(echo "$ROWS" | awk -F'|' 'NR==1{o=$9; if ($3 != o) bad=1; e=$4; next} {if ($3 != e) bad=1; e=$4} END{print bad ? "gap" : "ok"}')
check "the rows tile the attempt from its start without gap or overlap" test "$tiles" = ok
read -r ORIGIN LAST SUM <<<"$(echo "$ROWS" | awk -F'|' '{o=$9; if ($4>l) l=$4; s+=$8} END{print o, l, s}')"
ATT=$(api GET "/v1/jobs/$J1/attempts" | jq -r '.items[0] | "\(.start_time_ms) \(.end_time_ms)"')
check "the rows end at the attempt's recorded end" test "$LAST" = "${ATT#* }"
check "the rows add up to the single-row charge, 2 x (end - start) GPU-ms x 1 micro" \
    test "$SUM" = $((2 * (LAST - ORIGIN)))
COST=$(api GET "/v1/jobs/$J1" | jq -r .cost_micros)
check "cost_micros ($COST) is the sum of the job's rows ($SUM)" test "$COST" = "$SUM"

# ------------------------------------------------ 3. cancelled, never started --
J2=$(submit '{"name":"b2","gpus":1,"command":"sleep 60"}')
check "job 2 runs" wait_for 15 is_state "$J2" RUNNING
sleep 1.2
api POST "/v1/jobs/$J2/cancel" >/dev/null
check "job 2 is cancelled" wait_for 15 is_state "$J2" CANCELLED
NET2=$(sql "SELECT SUM(amount_micros) FROM ledger WHERE job_id = $J2")
check "a cancelled job pays for what ran (${NET2:-0} > 0)" test "${NET2:-0}" -gt 0
check "the cancelled job has one final charge and no refund" \
    test "$(sql "SELECT COUNT(*) FROM ledger WHERE job_id = $J2 AND kind = 0 AND interim = 0"),$(sql "SELECT COUNT(*) FROM ledger WHERE job_id = $J2 AND kind = 1")" = "1,0"

# ------------------------------------------------ 3b. a preemption refunds lost work --
# a low job with a declared checkpoint interval of 1 s is preempted by a high 8-GPU job:
# it pays what ran and gets back the work since its last checkpoint, as a refund row
J7=$(submit '{"name":"b7","gpus":1,"priority":"low","checkpoint_interval_s":1,"command":"sleep 60"}')
check "job 7 (low) runs" wait_for 15 is_state "$J7" RUNNING
sleep 2.5
J8=$(submit '{"name":"b8","gpus":8,"priority":"high","command":"sleep 1"}')
refunded() { [ "$(sql "SELECT COUNT(*) FROM ledger WHERE job_id = $J7 AND kind = 1 AND refund_why = 3")" -ge 1 ]; }
check "the preempted attempt gets a lost-work refund row" wait_for 30 refunded
R7=$(sql "SELECT l.amount_micros, l.start_ms, l.end_ms, a.start_time_ms FROM ledger l JOIN attempts a ON a.job_id = l.job_id AND a.attempt = l.attempt WHERE l.job_id = $J7 AND l.kind = 1 AND l.refund_why = 3 LIMIT 1")
IFS='|' read -r AMT RS RE AS0 <<<"$R7"
check "the refund is the work since the last 1 s checkpoint ($AMT for [$RS, $RE), start $AS0)" \
    test $(((RS - AS0) % 1000)) = 0 -a $((RE - RS)) -lt 1000 -a "$AMT" -lt 0
check "the high job completes" wait_for 30 is_state "$J8" COMPLETED
api POST "/v1/jobs/$J7/cancel" >/dev/null
check "job 7 ends" wait_for 30 is_state "$J7" CANCELLED

# ------------------------------------------------ 4. budgets --
AS=$ROOT api POST /v1/accounts '{"name":"hardt","weight":1}' >/dev/null
AS=$ROOT api POST /v1/accounts '{"name":"safet","weight":1}' >/dev/null
AS=$ROOT api POST /v1/accounts '{"name":"warnt","weight":1}' >/dev/null
for a in hardt safet warnt; do
    AS=$ROOT api POST "/v1/accounts/$a/members" '{"user":"alice"}' >/dev/null
done
# hard: 4,000 micros = 4 GPU-s at 1 micro/GPU-ms; a 1-GPU job crosses it after ~4 s
R=$(AS=$ROOT api PATCH /v1/accounts/hardt '{"budget_micros":4000,"budget_mode":"hard"}')
check "a budget is set with its mode ($(echo "$R" | jq -c .budget))" \
    test "$(echo "$R" | jq -r '.budget.mode + "/" + .budget.period')" = hard/monthly
J3=$(submit '{"name":"b3","gpus":1,"account":"hardt","command":"sleep 60"}')
check "job 3 (hard budget) runs" wait_for 15 is_state "$J3" RUNNING
check "job 3 is stopped when its account crosses its hard budget" wait_for 20 is_state "$J3" CANCELLED
EVS=$(api GET "/v1/events?since=0&limit=1000")
check "events say 80 % and 100 % of the hard budget" \
    test "$(echo "$EVS" | jq '[.items[] | select(.type=="account" and .account=="hardt")] | length')" = 2
check "the running job got a budget_exhausted notice" \
    test "$(echo "$EVS" | jq --arg j "$J3" '[.items[] | select(.job_id==$j and .reason=="budget_exhausted")] | length')" = 1
CODE=$(curl -s -o "$TMP/r402" -w '%{http_code}' -X POST "$URL/v1/jobs" -H "Authorization: Bearer $ALICE" \
    -d '{"gpus":1,"account":"hardt","command":"true"}')
check "a submit to an exhausted hard budget answers 402 budget_exhausted ($CODE)" \
    test "$CODE,$(jq -r .error.code "$TMP/r402")" = "402,budget_exhausted"
# safe (the H100 price is now 10 micros per GPU-ms): 1,000,000 micros left; a 1-GPU job
# of limit 60 s costs 600,000 and fits, one of 600 s costs 6,000,000 and waits
AS=$ROOT api PATCH /v1/accounts/safet '{"budget_micros":1000000,"budget_mode":"safe"}' >/dev/null
J4=$(submit '{"name":"b4","gpus":1,"account":"safet","time_limit_s":600,"command":"sleep 30"}')
J5=$(submit '{"name":"b5","gpus":1,"account":"safet","time_limit_s":60,"command":"sleep 1"}')
reason_budget() { [ "$(api GET "/v1/jobs/$J4" | jq -r .reason_code)" = budget ]; }
check "a job whose limit does not fit a safe budget waits with reason budget" wait_for 10 reason_budget
WHY=$(api GET "/v1/jobs/$J4" | jq -r .reason)
check "its reason gives both figures ($WHY)" grep -qE "has [0-9]+ micros left.*costs 6000000$" <<<"$WHY"
check "a job whose limit fits starts and completes" wait_for 20 is_state "$J5" COMPLETED
check "the job that does not fit is still pending" is_state "$J4" PENDING
api POST "/v1/jobs/$J4/cancel" >/dev/null
# warn: crossing warns, the job runs on
AS=$ROOT api PATCH /v1/accounts/warnt '{"budget_micros":1000,"budget_mode":"warn"}' >/dev/null
J6=$(submit '{"name":"b6","gpus":1,"account":"warnt","command":"sleep 4"}')
check "job 6 (warn budget) completes" wait_for 25 is_state "$J6" COMPLETED
check "a warn budget gives its warnings" \
    test "$(api GET "/v1/events?since=0&limit=1000" | jq '[.items[] | select(.type=="account" and .account=="warnt")] | length')" = 2

# ------------------------------------------------ 5. fair share agrees with the ledger --
sleep 2 # the fair-share view refreshes every second while things change
FS=$(api GET /v1/fairshare)
for a in default hardt warnt; do
    HELD=$(sql "SELECT COALESCE(SUM(CASE WHEN kind=0 THEN gpu_ms WHEN kind=1 AND refund_why IN (1,2) THEN -gpu_ms ELSE 0 END),0) FROM ledger WHERE account='$a'")
    SHOWN=$(echo "$FS" | jq -r --arg a "$a" '.accounts[] | select(.name==$a) | .month_gpu_ms')
    CORE=$(echo "$FS" | jq -r --arg a "$a" '.accounts[] | select(.name==$a) | .usage_gpu_seconds')
    check "fair share shows account $a's GPU time held in the ledger ($SHOWN = $HELD ms)" test "$SHOWN" = "$HELD"
    INVH=$(AS=$ROOT api GET "/v1/billing/invoices/$(date -u +%Y-%m)?account=$a" | jq -r '.held_gpu_ms')
    check "the invoice of $a for this month reports the same GPU time ($INVH ms)" test "$INVH" = "$SHOWN"
    # The core holds an attempt's GPUs from its start decision to the end's processing,
    # in whole seconds; the ledger from the agent's start to its end, in ms. So the core
    # counts at least the ledger's time (less a second per attempt of rounding) and at
    # most the handoff more: 3 s per attempt GPU (the launch, the exit report).
    GSUM=$(sql "SELECT COALESCE(SUM(gpus),0) FROM ledger WHERE account='$a' AND kind=0 AND interim=0")
    check "the core's undecayed usage of $a ($CORE GPU-s) is the ledger's ($HELD GPU-ms, $GSUM attempt GPUs)" \
        python3 -c "import sys; d = $CORE - $HELD/1000.0; sys.exit(0 if -1.0*max(1,$GSUM) <= d <= 3.0*max(1,$GSUM) else 1)"
done

# ------------------------------------------------ invariants over the whole file --
check "no attempt has two final charges" \
    test "$(sql "SELECT COUNT(*) FROM (SELECT job_id, attempt FROM ledger WHERE kind=0 AND interim=0 GROUP BY job_id, attempt HAVING COUNT(*) > 1)")" = 0
check "every ended attempt has its final charge" \
    test "$(sql "SELECT COUNT(*) FROM attempts a WHERE a.end_time_ms > 0 AND NOT EXISTS (SELECT 1 FROM ledger l WHERE l.job_id=a.job_id AND l.attempt=a.attempt AND l.kind=0 AND l.interim=0)")" = 0
for j in $(sql "SELECT DISTINCT job_id FROM ledger WHERE job_id > 0"); do
    c=$(api GET "/v1/jobs/$j" | jq -r .cost_micros)
    s=$(sql "SELECT SUM(amount_micros) FROM ledger WHERE job_id=$j")
    check "job $j's cost_micros ($c) is the sum of its rows ($s)" test "$c" = "$s"
done

if [ "$FAILS" -gt 0 ]; then
    echo "--- server log (tail)" >&2
    tail -30 "$TMP/server.log" >&2
    echo "$FAILS of $CHECKS checks FAILED"
    exit 1
fi
echo "all $CHECKS checks passed"
