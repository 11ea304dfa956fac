#!/usr/bin/env bash
# test_idle.sh - idle GPUs (docs/idle.md) with a real server, a real agent with fake GPUs
# and real jobs that set their GPUs' load through the fake backend's knob
# ($FAIRGPU_FAKE_UTIL_FILE):
#
#   1. a job whose knob says 0 % is flagged idle after --idle-after 2s: an IDLE event,
#      idle/idle_since/gpu_util_pct in its JSON, the badge in `fairgpu jobs` and the
#      lines in `fairgpu show`; a job without a knob (100 %) is not;
#   2. the per-GPU metrics are what GET /v1/nodes shows; fairgpu_jobs_idle counts it;
#   3. raising the knob clears it (IDLE_CLEARED) and its idle_gpu_s stays counted;
#   4. account policy requeue: IDLE_WARNING, then after the grace IDLE_REQUEUED and the
#      job back to PENDING and running again (a second attempt);
#   5. account policy stop: IDLE_WARNING, then IDLE_STOPPED, and the job ends CANCELLED;
#   6. a bad policy is refused (400) and changes nothing; a user cannot set one (403).
#
# usage: bash test_idle.sh /path/to/fairgpu
FG_TEST_NAME=test_idle
SERVER_EXTRA=(--idle-after 2s --idle-util-pct 5)
source "$(dirname "$0")/lib_agent.sh"
start_h100_agent n1

AS=$ROOT api POST /v1/accounts '{"name":"idlers"}' >/dev/null
AS=$ROOT api POST /v1/accounts/idlers/members '{"user":"alice"}' >/dev/null
job() { api GET "/v1/jobs/$1"; }
field() { job "$1" | jq -r ".$2"; }
is_field() { [ "$(field "$1" "$2")" = "$3" ]; }
events() { api GET "/v1/jobs/$1/events" | jq -r '[.items[].to] | join(",")'; }
has_event() { events "$1" | tr ',' '\n' | grep -qx "$2"; }
submit() { api POST /v1/jobs "$1" | jq -r .id; }
# a job that sets its knob to $1, and to $2 once the file $TMP/$3 exists
knob_job() {
    local cmd="printf '$1\\n' >\"\$FAIRGPU_FAKE_UTIL_FILE\"; while [ ! -e $TMP/$3 ]; do sleep 0.2; done; printf '$2\\n' >\"\$FAIRGPU_FAKE_UTIL_FILE\"; sleep 300"
    submit "$(jq -cn --arg c "$cmd" --arg n "$3" '{name: $n, gpus: 2, account: "idlers", command: $c}')"
}

# ------------------------------------------------ 1. flagged idle --
J1=$(knob_job "0 512" "90 4096" raise1)
J0=$(submit '{"name":"busy","gpus":1,"account":"idlers","command":"sleep 300"}')
check "job 1 runs" wait_for 15 is_field "$J1" state RUNNING
check "job 1 is flagged idle" wait_for 15 is_field "$J1" idle true
R=$(job "$J1")
echo "  job 1: $(echo "$R" | jq -c '{gpu_util_pct, gpu_mem_used_mb, idle, idle_since, idle_gpu_s}')"
check "job 1 shows 0 % and 2 x 512 MiB" test "$(echo "$R" | jq -c '[.gpu_util_pct, .gpu_mem_used_mb]')" = "[0,1024]"
check "job 1 has idle_since" test "$(echo "$R" | jq '.idle_since > 0')" = true
check "job 1 has an IDLE event" has_event "$J1" IDLE
check "the busy job (no knob: 100 %) is not idle" is_field "$J0" idle false
check "the busy job shows 100 %" wait_for 5 is_field "$J0" gpu_util_pct 100
export FAIRGPU_URL=$URL FAIRGPU_TOKEN=$ALICE XDG_CONFIG_HOME=$TMP/cfg HOME=$TMP
"$FG" jobs >"$TMP/jobs.out" 2>&1
sed 's/^/  jobs: /' "$TMP/jobs.out"
check "fairgpu jobs shows the idle badge on job 1" grep -q "^$J1 .*\[idle " "$TMP/jobs.out"
check "fairgpu jobs shows no badge on the busy job" bash -c "! grep -q '^$J0 .*\[idle' '$TMP/jobs.out'"
"$FG" show "$J1" >"$TMP/show.out" 2>&1
check "fairgpu show says idle" grep -q "^idle: .*idle .*since" "$TMP/show.out"
check "fairgpu show gives its GPU use" grep -q "^gpu util: *0 % (mean over its GPUs), 1024 MiB" "$TMP/show.out"

# ------------------------------------------------ 2. metrics against the nodes --
AS=$ROOT api GET /metrics >"$TMP/metrics" 2>/dev/null || true
curl -s "$URL/metrics" >"$TMP/metrics"
NODES=$(api GET /v1/nodes | jq -r '.items[] | .name as $n | .gpus[] | "\($n) \(.index) \(.util_pct) \(.mem_used_mb)"')
bad=0
while read -r n g u m; do
    mu=$(sed -n "s/^fairgpu_gpu_utilization_percent{node=\"$n\",gpu=\"$g\"} //p" "$TMP/metrics")
    mm=$(sed -n "s/^fairgpu_gpu_memory_used_bytes{node=\"$n\",gpu=\"$g\"} //p" "$TMP/metrics")
    [ "$mu" = "$u" ] && [ "$mm" = "$((m * 1048576))" ] || { echo "  $n/$g: nodes $u/$m, metrics $mu/$mm"; bad=1; }
done <<<"$NODES"
check "per-GPU utilization and memory metrics match GET /v1/nodes ($(echo "$NODES" | wc -l) GPUs)" test $bad = 0
check "fairgpu_jobs_idle is 1" grep -qx 'fairgpu_jobs_idle 1' "$TMP/metrics"
check "fairgpu_idle_gpu_seconds_total is there" grep -q '^fairgpu_idle_gpu_seconds_total [0-9]' "$TMP/metrics"

# ------------------------------------------------ 3. cleared --
touch "$TMP/raise1"
check "job 1 is cleared once its knob says 90 %" wait_for 10 is_field "$J1" idle false
check "job 1 has an IDLE_CLEARED event" has_event "$J1" IDLE_CLEARED
check "job 1 shows 90 %" is_field "$J1" gpu_util_pct 90
IG=$(field "$J1" idle_gpu_s)
check "job 1 counted idle GPU-seconds ($IG >= 4)" test "$IG" -ge 4
check "job 1 still runs" is_field "$J1" state RUNNING
# durable: the store's row holds what the API shows (read-only, straight from the file)
if command -v python3 >/dev/null; then
    DB=$(ls "$TMP"/data/*.db 2>/dev/null | head -1)
    stored() { python3 -c 'import sqlite3, sys
c = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True, timeout=10)
print(c.execute("SELECT idle_gpu_s FROM jobs WHERE id = ?", (int(sys.argv[2]),)).fetchone()[0])' "$DB" "$J1"; }
    is_stored() { [ "$(stored)" = "$(field "$J1" idle_gpu_s)" ]; }
    check "job 1's idle_gpu_s is in the store ($(stored))" wait_for 5 is_stored
fi

# ------------------------------------------------ 6. bad policies --
R=$(AS=$ROOT api PATCH /v1/accounts/idlers '{"idle_action":"kill"}')
check "idle_action kill is refused" test "$(echo "$R" | jq -r .error.field)" = idle_action
R=$(AS=$ROOT api PATCH /v1/accounts/idlers '{"idle_action":"stop","idle_grace_s":-1}')
check "a negative grace is refused" test "$(echo "$R" | jq -r .error.field)" = idle_grace_s
check "a user cannot set a policy" test "$(api PATCH /v1/accounts/idlers '{"idle_action":"stop"}' | jq -r .error.code)" = forbidden
check "the policy is still none" test "$(api GET /v1/accounts/idlers | jq -c '[.idle_action, .idle_grace_s]')" = '["none",0]'

# ------------------------------------------------ 4. requeue --
R=$(AS=$ROOT api PATCH /v1/accounts/idlers '{"idle_action":"requeue","idle_grace_s":2}')
check "policy requeue set" test "$(echo "$R" | jq -c '[.idle_action, .idle_grace_s]')" = '["requeue",2]'
J2=$(knob_job 0 0 never2)
check "job 2 is requeued" wait_for 25 has_event "$J2" IDLE_REQUEUED
E2=$(events "$J2")
echo "  job 2 events: $E2"
check "job 2 was warned before it was requeued" bash -c "echo '$E2' | grep -q 'IDLE,IDLE_WARNING,IDLE_REQUEUED,PENDING'"
check "job 2 runs again (attempt 2)" wait_for 20 is_field "$J2" attempts 2
if [ -n "${DB:-}" ]; then # billed as it ran: no preemption's lost-work refund (refund_why 3)
    lost=$(python3 -c 'import sqlite3, sys
c = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True, timeout=10)
print(c.execute("SELECT COUNT(*), (SELECT COUNT(*) FROM ledger WHERE job_id = ? AND attempt = 1 AND kind = 0 AND interim = 0) FROM ledger WHERE job_id = ? AND attempt = 1 AND refund_why = 3", (int(sys.argv[2]), int(sys.argv[2]))).fetchone())' "$DB" "$J2")
    check "job 2's idle-requeued attempt is charged without a lost-work refund $lost" test "$lost" = "(0, 1)"
fi
api POST "/v1/jobs/$J2/cancel" >/dev/null
check "job 2 is cancelled" wait_for 15 is_field "$J2" state CANCELLED

# ------------------------------------------------ 5. stop --
AS=$ROOT api PATCH /v1/accounts/idlers '{"idle_action":"stop","idle_grace_s":1}' >/dev/null
J3=$(knob_job 0 0 never3)
check "job 3 ends CANCELLED" wait_for 25 is_field "$J3" state CANCELLED
E3=$(events "$J3")
echo "  job 3 events: $E3"
check "job 3 was warned, then stopped" bash -c "echo '$E3' | grep -q 'IDLE,IDLE_WARNING,IDLE_STOPPED,CANCELLED'"
R3=$(api GET "/v1/jobs/$J3/events" | jq -r '.items[] | select(.to=="IDLE_STOPPED") | .reason')
has_why() { grep -q 'stopped by the idle policy of account idlers' <<<"$R3"; }
check "the stop says why ($R3)" has_why
check "job 1 (busy again) survives the stop policy" is_field "$J1" state RUNNING
check "the busy job survives the stop policy" is_field "$J0" state RUNNING

echo "$CHECKS checks, $FAILS failures"
[ "$FAILS" = 0 ]
