#!/usr/bin/env bash
# test_estimates.sh - start estimates that are checked (docs/scheduler.md, "Estimates"),
# with a real server, a real agent with ONE fake GPU and real jobs:
#
#   1. a job with a 60 s limit that runs 3 s holds the GPU; a job submitted behind it
#      gets an estimate at submission (with its range, source and the limit-based one);
#      when it starts, its error is recorded (start - estimate at submission);
#   2. GET /v1/estimates/accuracy counts it (by size and horizon), and rejects a bad
#      window with 400; /metrics shows fairgpu_estimate_abs_error_seconds;
#   3. POST /v1/jobs?dry_run=true answers an estimate and stores nothing (job count and
#      events unchanged), and bad input is refused as a submission would be;
#   4. a restart keeps the recorded fields;
#   5. with a history of 3 s runs of a 60 s limit, a job behind one of them is estimated
#      from its user's history (source "user") within a few seconds of its actual start,
#      and the accuracy endpoint's submission median error is below the limit-based one.
#
# usage: bash test_estimates.sh /path/to/fairgpu
FG_TEST_NAME=test_estimates
source "$(dirname "$0")/lib_agent.sh"

start_h100_agent n1 1

job() { api GET "/v1/jobs/$1"; }
field() { job "$1" | jq -r ".$2"; }
is_state() { [ "$(field "$1" state)" = "$2" ]; }
has_field() { [ "$(field "$1" "$2")" != null ]; }
submit() { api POST /v1/jobs "$1" | jq -r .id; }
metrics() { curl -s "$URL/metrics"; }

# ------------------------------------------------ 1. recorded at submission and start --
J1=$(submit '{"name":"e1","gpus":1,"time_limit_s":60,"command":"sleep 3"}')
check "job 1 runs" wait_for 15 is_state "$J1" RUNNING
J2=$(submit '{"name":"e2","gpus":1,"time_limit_s":60,"command":"sleep 1"}')
check "job 2 waits behind job 1 with an estimate at submission" wait_for 5 has_field "$J2" estimate_at_submit
P=$(job "$J2")
echo "  pending job 2: $(echo "$P" | jq -c '{state, estimated_start, estimated_start_p10, estimated_start_p90, estimate_source, estimate_at_submit, estimate_limit_at_submit}')"
S1=$(field "$J1" start_time)
check "job 2 is pending with a range around its estimate" \
    test "$(echo "$P" | jq -r '.state == "PENDING" and .estimated_start_p10 <= .estimated_start and .estimated_start <= .estimated_start_p90')" = true
check "job 2's limit-based estimate is job 1's start + its 60 s limit" \
    test "$(echo "$P" | jq -r .estimate_limit_at_submit)" = $((S1 + 60))
check "job 2 has no error before it starts" test "$(echo "$P" | jq -r .estimate_error_s)" = null
SHOW=$(FAIRGPU_URL=$URL FAIRGPU_TOKEN=$ALICE "$FG" show "$J2" 2>&1)
echo "$SHOW" | grep '^estimate' | sed 's/^/  cli show: /'
check "fairgpu show prints a pending job's estimate with its source" \
    grep -Eq '^estimated start: +[0-9-]+ [0-9:]+ \((now|in ~[0-9]+ (s|min))[^;]*; from time limits\)$' <<<"$SHOW"
check "job 2 starts" wait_for 20 is_state "$J2" RUNNING
R=$(job "$J2")
echo "  started job 2: $(echo "$R" | jq -c '{start_time, estimate_at_submit, estimate_error_s, estimate_limit_error_s, estimate_at_submit_source}')"
check "job 2's error is start - estimate at submission" \
    test "$(echo "$R" | jq -r '.estimate_error_s == .start_time - .estimate_at_submit')" = true
check "job 2's limit-based error is start - (job 1's start + 60)" \
    test "$(echo "$R" | jq -r .estimate_limit_error_s)" = $(($(echo "$R" | jq -r .start_time) - S1 - 60))
check "a running job shows no live estimate" \
    test "$(echo "$R" | jq -r '[.estimated_start, .estimated_start_p10, .estimate_source] | map(. == null) | all')" = true
check "job 1 had no estimate at submission (it started at once)" \
    test "$(field "$J1" estimate_at_submit)" = null
check "job 2 completes" wait_for 20 is_state "$J2" COMPLETED

# ------------------------------------------------ 2. accuracy, metrics --
A=$(api GET /v1/estimates/accuracy)
echo "  accuracy: $(echo "$A" | jq -c '{jobs, submit, limit, window}')"
check "the accuracy endpoint counts job 2" test "$(echo "$A" | jq -r .jobs)" = 1
check "its submit median is job 2's |error|" \
    test "$(echo "$A" | jq -r .submit.median_abs_error_s)" = "$(echo "$R" | jq -r '.estimate_error_s | fabs')"
check "its limit median is job 2's |limit-based error|" \
    test "$(echo "$A" | jq -r .limit.median_abs_error_s)" = "$(echo "$R" | jq -r '.estimate_limit_error_s | fabs')"
check "by size: one job of class 1, none of 2-7, 8, >8 (null figures)" \
    test "$(echo "$A" | jq -c '[.by_size[] | [.class, .jobs]]'),$(echo "$A" | jq -r '.by_size[1].submit.median_abs_error_s')" = '[["1",1],["2-7",0],["8",0],[">8",0]],null'
check "by horizon: it waited under 10 minutes" \
    test "$(echo "$A" | jq -c '[.by_horizon[] | .jobs]')" = '[1,0,0,0]'
FROM=$(date -u -d '-1 hour' +%Y-%m-%dT%H:%M:%SZ)
TO=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
check "a window that holds its start counts it" \
    test "$(api GET "/v1/estimates/accuracy?from=$FROM&to=$TO" | jq -r '.jobs, .window.from' | tr '\n' ,)" = "1,$FROM,"
check "a window before it counts nothing" \
    test "$(api GET "/v1/estimates/accuracy?from=2020-01-01T00:00:00Z&to=2020-01-02T00:00:00Z" | jq -r '.jobs, .submit.median_abs_error_s' | tr '\n' ,)" = "0,null,"
code() { curl -s -o /dev/null -w '%{http_code}' "$URL$1" -H "Authorization: Bearer ${AS:-$ALICE}"; }
check "a bad from is 400" test "$(code '/v1/estimates/accuracy?from=yesterday')" = 400
check "a to before from is 400" test "$(code "/v1/estimates/accuracy?from=$TO&to=$FROM")" = 400
check "anonymous callers get 401" test "$(AS=x code /v1/estimates/accuracy)" = 401
M=$(metrics | grep '^fairgpu_estimate_abs_error_seconds')
echo "$M" | sed 's/^/  metric: /'
check "metrics count one submit estimate of size 1" \
    grep -q '^fairgpu_estimate_abs_error_seconds_count{estimate="submit",source="[a-z]*",size="1"} 1$' <<<"$M"
check "metrics give the limit-based error of size 1" \
    grep -q "^fairgpu_estimate_abs_error_seconds{estimate=\"limit_based\",source=\"limit\",size=\"1\",quantile=\"0.5\"} $(echo "$A" | jq -r .limit.median_abs_error_s)$" <<<"$M"

# ------------------------------------------------ 3. dry run --
J3=$(submit '{"name":"e3","gpus":1,"time_limit_s":60,"command":"sleep 3"}')
check "job 3 runs" wait_for 15 is_state "$J3" RUNNING
NJOBS=$(api GET '/v1/jobs?limit=1000' | jq '.items | length')
SEQ=$(api GET '/v1/events?since=0&limit=1000' | jq '[.items[].seq] | max')
D=$(api POST '/v1/jobs?dry_run=true' '{"name":"dry","gpus":1,"time_limit_s":60,"command":"sleep 1"}')
echo "  dry run: $D"
check "a dry run answers an estimate behind job 3, with its range and reason" \
    test "$(echo "$D" | jq -r '.estimated_start > 0 and .estimated_start_p10 <= .estimated_start and .estimated_start <= .estimated_start_p90 and (.reason_code | type) == "string" and (.estimate_source | type) == "string"')" = true
sleep 1.5
check "a dry run stores no job" test "$(api GET '/v1/jobs?limit=1000' | jq '.items | length')" = "$NJOBS"
NEWEV=$(api GET "/v1/events?since=$SEQ&limit=1000" | jq -c --arg j "$J3" '[.items[] | select(.job_id != $j)]')
check "a dry run makes no event (new ones are job 3's: $NEWEV)" test "$NEWEV" = '[]'
dcode() { curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/v1/jobs?dry_run=true" -H "Authorization: Bearer $ALICE" -d "$1"; }
check "a dry run with bad input is 400 (gpus 0)" test "$(dcode '{"gpus":0,"command":"x"}')" = 400
check "a dry run on an account it is not in is 403" test "$(dcode '{"gpus":1,"account":"nope","command":"x"}')" = 403
echo "  dry run of 16: $(api POST "/v1/jobs?dry_run=true" "{\"gpus\":16,\"command\":\"x\"}")"
check "a dry run of 16 GPUs on a 1-GPU cluster says it cannot start" \
    test "$(api POST '/v1/jobs?dry_run=true' '{"gpus":16,"command":"x"}' | jq -r '.estimated_start, .reason_code' | tr '\n' ,)" = "null,gpu_type,"
OUT=$(FAIRGPU_URL=$URL FAIRGPU_TOKEN=$ALICE "$FG" submit --dry-run --estimate --gpus 1 --time 60s -- sleep 1 2>&1)
echo "  cli: $OUT"
check "fairgpu submit --dry-run --estimate prints a range and a source" \
    grep -Eq '^would start (now|in ~[0-9]+ (s|min|h|d)( \([^)]+\))?), source: [a-z]' <<<"$OUT"
check "job 3 completes" wait_for 20 is_state "$J3" COMPLETED

# ------------------------------------------------ 5. history-based --
# the user's history: jobs that run 3 s of a 60 s limit (5 entries make a prediction)
for k in 1 2 3 4; do
    H=$(submit "{\"name\":\"h$k\",\"gpus\":1,\"time_limit_s\":60,\"command\":\"sleep 3\"}")
    check "history job $k completes" wait_for 30 is_state "$H" COMPLETED
done
J5=$(submit '{"name":"e5","gpus":1,"time_limit_s":60,"command":"sleep 3"}')
check "job 5 runs" wait_for 15 is_state "$J5" RUNNING
J6=$(submit '{"name":"e6","gpus":1,"time_limit_s":60,"command":"sleep 1"}')
check "job 6 waits behind job 5 with an estimate at submission" wait_for 5 has_field "$J6" estimate_at_submit
P6=$(job "$J6")
echo "  pending job 6: $(echo "$P6" | jq -c '{estimated_start, estimated_start_p10, estimated_start_p90, estimate_source, estimate_at_submit, estimate_limit_at_submit}')"
check "job 6's estimate comes from its user's history" test "$(echo "$P6" | jq -r .estimate_source)" = user
check "job 6 starts" wait_for 20 is_state "$J6" RUNNING
R6=$(job "$J6")
echo "  started job 6: $(echo "$R6" | jq -c '{start_time, estimate_at_submit, estimate_error_s, estimate_limit_error_s, estimate_at_submit_source}')"
check "job 6's estimate at submission is within 3 s of its start" \
    test "$(echo "$R6" | jq -r '.estimate_error_s | fabs <= 3')" = true
SHOW=$(FAIRGPU_URL=$URL FAIRGPU_TOKEN=$ALICE "$FG" show "$J6" 2>&1)
echo "$SHOW" | grep '^estimate' | sed 's/^/  cli show: /'
check "fairgpu show prints the error of the estimate at submission and of the limits alone" \
    grep -Eq '^estimate error: +started ([0-9]+ s (before|after)|on) its estimate at submission \(user history\); limits alone: [0-9]+ s before$' <<<"$SHOW"
check "job 6's limit-based error is over 50 s" \
    test "$(echo "$R6" | jq -r '.estimate_limit_error_s | fabs > 50')" = true
A2=$(api GET /v1/estimates/accuracy)
echo "  accuracy after history: $(echo "$A2" | jq -c '{jobs, submit, limit}')"
check "the submission median error is below the limit-based one" \
    test "$(echo "$A2" | jq -r '.submit.median_abs_error_s < .limit.median_abs_error_s')" = true
check "job 6 completes" wait_for 20 is_state "$J6" COMPLETED
D2=$(api POST '/v1/jobs?dry_run=true' '{"gpus":1,"time_limit_s":60,"command":"sleep 1"}')
check "a dry run on the idle GPU would start now, from the user's history" \
    test "$(echo "$D2" | jq -r '(.estimated_start - now | fabs < 3) and .estimate_source == "user"')" = true

# ------------------------------------------------ 4. restart --
BEFORE=$(job "$J2" | jq -c '{estimate_at_submit, estimate_at_submit_p10, estimate_at_submit_p90, estimate_at_submit_source, estimate_limit_at_submit, estimate_error_s, estimate_limit_error_s}')
kill "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null
# the same port, so that the agent comes back to it
"$FG" server --data-dir "$TMP/data" --listen "127.0.0.1:$PORT" --rate-limit 0 \
    --heartbeat-interval 1s ${FAST_HASH[@]+"${FAST_HASH[@]}"} >>"$TMP/server.log" 2>&1 &
SERVER_PID=$!
healthy() { curl -fs "$URL/healthz" >/dev/null; }
check "the server restarts on its port" wait_for 15 healthy
AFTER=$(job "$J2" | jq -c '{estimate_at_submit, estimate_at_submit_p10, estimate_at_submit_p90, estimate_at_submit_source, estimate_limit_at_submit, estimate_error_s, estimate_limit_error_s}')
echo "  after restart: $AFTER"
check "a restart keeps job 2's recorded estimates and errors" test "$AFTER" = "$BEFORE"
check "the accuracy endpoint still counts the started jobs" \
    test "$(api GET /v1/estimates/accuracy | jq -r .jobs)" = 2
node_back() { [ "$(api GET /v1/nodes | jq '[.items[] | select(.state=="up")] | length')" = 1 ]; }
check "the agent comes back" wait_for 20 node_back
J7=$(submit '{"name":"e7","gpus":1,"time_limit_s":60,"command":"sleep 3"}')
check "job 7 runs after the restart" wait_for 15 is_state "$J7" RUNNING
D3=$(api POST '/v1/jobs?dry_run=true' '{"gpus":1,"time_limit_s":60,"command":"sleep 1"}')
echo "  dry run after restart: $(echo "$D3" | jq -c .)"
check "the run-time model is rebuilt from the store: a dry run behind job 7 is from user history, within 5 s" \
    test "$(echo "$D3" | jq -r '.estimate_source == "user" and (.estimated_start - now) < 5')" = true
check "job 7 completes" wait_for 20 is_state "$J7" COMPLETED

echo "$FG_TEST_NAME: $CHECKS checks passed, $FAILS failed"
[ "$FAILS" = 0 ] || { tail -30 "$TMP/server.log"; exit 1; }
