#!/usr/bin/env bash
# test_estimates_rules.sh - the controller's start estimates follow the core's
# preemption and no-backfill rules (fg_est_queue, docs/scheduler.md, "Estimates in the
# controller"), with a real server and a real agent with TWO fake GPUs:
#
#   1. under fair with a short quantum (2 s) and preemption wait (4 s): alice's 2-GPU job
#      runs; bob's 1-GPU job submitted behind it is estimated at about submission + 4 s
#      (it may stop alice's long runner then), not at the end of alice's 120 s limit;
#      and it does start by then (preemption);
#   2. under fifo: alice's 1-GPU job runs, a 2-GPU job waits, and a 1-GPU job of 10 s
#      behind it (which would fit the free GPU before the 2-GPU job starts) is estimated
#      no earlier than the 2-GPU job: fifo starts jobs in order.
#
# usage: bash test_estimates_rules.sh /path/to/fairgpu
FG_TEST_NAME=test_estimates_rules
SERVER_EXTRA=(--quantum 2s --preempt-wait 4s --min-run 1s)
source "$(dirname "$0")/lib_agent.sh"

start_h100_agent n1 2

curl -s -X POST "$URL/v1/users" -d '{"username":"bob","email":"b@example.org","password":"bob-password-1"}' >/dev/null
BOB=$(curl -s -X POST "$URL/v1/sessions" -d '{"username":"bob","password":"bob-password-1"}' | jq -r .token)
job() { api GET "/v1/jobs/$1"; }
field() { job "$1" | jq -r ".$2"; }
is_state() { [ "$(field "$1" state)" = "$2" ]; }
has_field() { [ "$(field "$1" "$2")" != null ]; }
submit() { api POST /v1/jobs "$1" | jq -r .id; }

# ------------------------------------------------ 1. the preemption rule (fair) --
A1=$(submit '{"name":"long","gpus":2,"time_limit_s":120,"command":"sleep 100"}')
check "alice's 2-GPU job runs" wait_for 15 is_state "$A1" RUNNING
sleep 3 # past the 2 s quantum: a long runner
B1=$(AS=$BOB submit '{"name":"b1","gpus":1,"time_limit_s":60,"command":"sleep 1"}')
check "bob's job gets an estimate at submission" wait_for 5 has_field "$B1" estimate_at_submit
P=$(AS=$BOB job "$B1")
echo "  bob's job: $(echo "$P" | jq -c '{state, submit_time, estimated_start, estimate_at_submit, estimate_limit_at_submit, estimate_source}')"
check "it is estimated within the preemption wait of its submission (4 s, +2 s of refresh)" \
    test "$(echo "$P" | jq -r '.estimate_at_submit - .submit_time | . >= 0 and . <= 6')" = true
check "bob's job starts by preempting alice's" wait_for 30 bash -c "$(declare -f api job field is_state); URL=$URL ALICE=$BOB; is_state $B1 RUNNING || is_state $B1 COMPLETED"
api POST "/v1/jobs/$A1/cancel" >/dev/null
cancelled() { [ "$(field "$A1" state)" = CANCELLED ] || [ "$(field "$A1" state)" = COMPLETED ]; }
wait_for 30 cancelled
[ "$FAILS" = 0 ] || { tail -30 "$TMP/server.log"; exit 1; }

# ------------------------------------------------ 2. the in-order rule (fifo) --
kill "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null
# the same port, so that the agent comes back to it
"$FG" server --data-dir "$TMP/data" --listen "127.0.0.1:$PORT" --rate-limit 0 --policy fifo \
    --heartbeat-interval 1s ${FAST_HASH[@]+"${FAST_HASH[@]}"} >>"$TMP/server.log" 2>&1 &
SERVER_PID=$!
healthy() { curl -fs "$URL/healthz" >/dev/null; }
check "the server restarts on its port under fifo" wait_for 15 healthy
check "agent n1 is back" wait_for 30 bash -c "$(declare -f api); URL=$URL ALICE=$ALICE; [ \"\$(api GET /v1/nodes | jq '[.items[] | select(.state==\"up\")] | length')\" = 1 ]"
idle() { [ "$(api GET /v1/jobs | jq '[.items[] | select(.state=="RUNNING" or .state=="PENDING")] | length')" = 0 ]; }
check "no job is left from part 1" wait_for 60 idle
F1=$(submit '{"name":"f1","gpus":1,"time_limit_s":60,"command":"sleep 30"}')
check "a 1-GPU job runs" wait_for 15 is_state "$F1" RUNNING
F2=$(submit '{"name":"f2","gpus":2,"time_limit_s":60,"command":"sleep 1"}')
F3=$(submit '{"name":"f3","gpus":1,"time_limit_s":10,"command":"sleep 1"}')
check "the 2-GPU job gets an estimate" wait_for 5 has_field "$F2" estimated_start
check "the short job behind it gets one" wait_for 5 has_field "$F3" estimated_start
E2=$(field "$F2" estimated_start)
E3=$(field "$F3" estimated_start)
echo "  fifo: 2-GPU job estimated at $E2, the short job behind it at $E3 (free GPU since $(field "$F1" start_time))"
check "the short job waits (fifo does not backfill)" is_state "$F3" PENDING
check "the short job is estimated no earlier than the 2-GPU job ahead of it" test "$E3" -ge "$E2"
api POST "/v1/jobs/$F1/cancel" >/dev/null

echo "$CHECKS checks, $FAILS failures"
[ "$FAILS" = 0 ] || { tail -30 "$TMP/server.log"; exit 1; }
