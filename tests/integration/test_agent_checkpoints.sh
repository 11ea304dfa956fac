#!/usr/bin/env bash
# test_agent_checkpoints.sh - the agent notices checkpoints and the controller gets the
# time, with the real server and a real agent (8 fake GPUs):
#
#   1. a low job writes a checkpoint into $FAIRGPU_CHECKPOINT_DIR a few seconds in,
#      backdates its mtime to 2000-01-01, and is preempted by a high job: the `exited`
#      report carries last_checkpoint_ms (the controller logs it), at or after the write
#      as the job's clock saw it, at most one scan period (+ slack) later, within the
#      attempt's start and end (the backdated mtime did not move it earlier), and the
#      attempt's lost-work refund row in the ledger runs from it to the attempt's end;
#   2. its second attempt finds the first attempt's checkpoint in the same directory and
#      writes none: no checkpoint is reported for it (what was there is the baseline);
#   3. a job that never checkpoints, cancelled: none reported either;
#   4. a job that writes its checkpoint in its SIGTERM handler when preempted: the
#      agent's last look at the rank's end sees it (noticed at about the end).
#
# The controller logs "exited JOB.ATTEMPT.RANK (cause): last checkpoint noticed at MS ms"
# for each exited report that carries one (src/server/agent.c); billing's refund rows
# use the same value.
#
# usage: bash test_agent_checkpoints.sh /path/to/fairgpu      (needs curl and jq)
FG_TEST_NAME=test_agent_checkpoints
source "$(dirname "$0")/lib_agent.sh"
"$FG" agent --server "$URL" --token-file "$TMP/data/agent.token" --name ck \
    --fake-gpus 8 --gpu-type H100 --work-dir "$TMP/w" --checkpoint-root "$TMP/ckpt" \
    --heartbeat 1 --grace 5 --user-map "$TMP/usermap" --stop-jobs-on-exit \
    ${AGENT_ISO[@]+"${AGENT_ISO[@]}"} >>"$TMP/agent.log" 2>&1 &
AGENT_PIDS+=($!)
node_up() { [ "$(api GET /v1/nodes | jq '[.items[] | select(.state=="up")] | length')" = 1 ]; }
check "the agent registers" wait_for 15 node_up

# 3,600,000 micros per GPU-hour for H100 low = 1 micro per GPU-ms (a refund row needs a rate)
AS=$ROOT api PUT /v1/billing/prices \
    '{"currency":"EUR","prices":[{"gpu_type":"H100","priority":"low","micros_per_gpu_hour":3600000},
      {"gpu_type":"*","priority":"normal","micros_per_gpu_hour":3600000}]}' >/dev/null
DB=$(ls "$TMP"/data/*.db 2>/dev/null | head -1)
# sql QUERY: rows of the store, '|'-separated, read-only ("" without python3)
sql() {
    command -v python3 >/dev/null || return 0
    python3 - "$DB" "$1" <<'PY'
import sqlite3, sys
c = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True, timeout=10)
for row in c.execute(sys.argv[2]):
    print("|".join("" if v is None else str(v) for v in row))
PY
}

state() { api GET "/v1/jobs/$1" | jq -r .state; }
is_state() { [ "$(state "$1")" = "$2" ]; }
log_has() { api GET "/v1/jobs/$1/logs" | grep -q "$2"; }
# noticed JOB ATTEMPT: the last_checkpoint_ms the controller got for rank 0 ("" if none)
noticed() {
    sed -n "s/.*exited $1\\.$2\\.0 ([a-z_]*): last checkpoint noticed at \\([0-9]*\\) ms.*/\\1/p" \
        "$TMP/server.log" | tail -1
}

# ------------------------------------------- 1. a checkpoint, then a preemption --
D='$FAIRGPU_CHECKPOINT_DIR'
CMD="trap 'exit 0' TERM; if [ \$FAIRGPU_ATTEMPT = 1 ]; then sleep 3; echo weights >$D/step_100.pt; touch -d 2000-01-01 $D/step_100.pt; echo WROTE=\$(date +%s%3N); else ls $D | sed 's/^/has:/'; echo second; sleep 3; fi; while [ \$FAIRGPU_ATTEMPT = 1 ]; do sleep 0.2; done"
LOW=$(api POST /v1/jobs "$(jq -nc --arg c "$CMD" '{name:"ck-low",gpus:8,priority:"low",command:$c}')" | jq -r .id)
check "the low job runs and writes its checkpoint" wait_for 25 log_has "$LOW" '^WROTE='
sleep 3 # more than a scan period: the agent has seen it
HIGH=$(api POST /v1/jobs '{"name":"urgent","gpus":8,"priority":"high","command":"echo urgent"}' | jq -r .id)
preempted() { [ "$(api GET "/v1/jobs/$LOW/attempts" | jq -r '.items[0].end_cause')" = preempted ]; }
check "the low job is preempted" wait_for 30 preempted
check "the high job completes" wait_for 20 is_state "$HIGH" COMPLETED
has_notice() { [ -n "$(noticed "$LOW" 1)" ]; }
check "the controller got last_checkpoint_ms for the preempted attempt" wait_for 10 has_notice
WROTE=$(api GET "/v1/jobs/$LOW/logs?attempt=1" | sed -n 's/^WROTE=//p' | head -1)
CK=$(noticed "$LOW" 1)
api GET "/v1/jobs/$LOW/attempts" >"$TMP/att.json"
S=$(jq -r '.items[0].start_time_ms' "$TMP/att.json")
E=$(jq -r '.items[0].end_time_ms' "$TMP/att.json")
echo "note: attempt 1 ran [$S, $E], wrote its checkpoint at $WROTE, noticed at $CK"
if [ -n "$CK" ] && [ -n "$WROTE" ] && [ "$S" != null ] && [ "$E" != null ]; then
    check "noticed at or after the write (not the backdated mtime)" test "$CK" -ge "$WROTE"
    check "noticed within a scan period of the write ($((CK - WROTE)) ms)" \
        test $((CK - WROTE)) -le 3500
    check "within the attempt ($S <= $CK <= $E)" test "$CK" -ge "$S" -a "$CK" -le "$E"
    check "well before the preemption ($((E - CK)) ms)" test $((E - CK)) -ge 1500
    if command -v python3 >/dev/null && [ -n "$DB" ]; then
        refunded() { [ -n "$(sql "SELECT id FROM ledger WHERE job_id = $LOW AND attempt = 1 AND kind = 1 AND refund_why = 3")" ]; }
        check "the preempted attempt gets a lost-work refund row" wait_for 20 refunded
        R=$(sql "SELECT start_ms, end_ms, amount_micros FROM ledger WHERE job_id = $LOW AND attempt = 1 AND kind = 1 AND refund_why = 3 LIMIT 1")
        check "the refund is the work since the noticed checkpoint ([$CK, $E) vs $R)" \
            test "${R%|*}" = "$CK|$E"
    fi
else
    fail "missing figures: wrote '$WROTE', noticed '$CK', attempt [$S, $E]"
fi

# ----------------------------- 2. the next attempt: the old checkpoint is the baseline --
check "the low job's second attempt completes" wait_for 40 is_state "$LOW" COMPLETED
check "it found the first attempt's checkpoint" log_has "$LOW" '^has:step_100.pt'
check "no checkpoint reported for the second attempt" test -z "$(noticed "$LOW" 2)"

# ------------------------------------------------- 3. no checkpoint at all --
N=$(api POST /v1/jobs '{"name":"nock","gpus":1,"command":"echo up; sleep 300"}' | jq -r .id)
check "the job without checkpoints runs" wait_for 20 log_has "$N" '^up'
sleep 2.5
api POST "/v1/jobs/$N/cancel" >/dev/null
check "it is cancelled" wait_for 20 is_state "$N" CANCELLED
check "no checkpoint reported for it" test -z "$(noticed "$N" 1)"

# ------------------------- 4. a checkpoint written on SIGTERM, when preempted --
TCMD="trap 'echo final >$D/final.pt; exit 0' TERM; echo up; while :; do sleep 0.2; done"
LOW2=$(api POST /v1/jobs "$(jq -nc --arg c "$TCMD" '{name:"ck-term",gpus:8,priority:"low",command:$c,max_retries:0}')" | jq -r .id)
check "the second low job runs" wait_for 25 log_has "$LOW2" '^up'
HIGH2=$(api POST /v1/jobs '{"name":"urgent2","gpus":8,"priority":"high","command":"echo urgent"}' | jq -r .id)
preempted2() { [ "$(api GET "/v1/jobs/$LOW2/attempts" | jq -r '.items[0].end_cause')" = preempted ]; }
check "it is preempted" wait_for 30 preempted2
check "the second high job completes" wait_for 20 is_state "$HIGH2" COMPLETED
has_notice2() { [ -n "$(noticed "$LOW2" 1)" ]; }
check "the checkpoint of its TERM handler is reported" wait_for 10 has_notice2
CK2=$(noticed "$LOW2" 1)
E2=$(api GET "/v1/jobs/$LOW2/attempts" | jq -r '.items[0].end_time_ms')
echo "note: the TERM handler's checkpoint noticed at $CK2, the attempt ended at $E2"
if [ -n "$CK2" ] && [ "$E2" != null ]; then
    check "noticed at the end ($((E2 - CK2)) ms before it)" test "$CK2" -le "$E2" -a $((E2 - CK2)) -le 1000
else
    fail "missing figures: noticed '$CK2', end '$E2'"
fi
api POST "/v1/jobs/$LOW2/cancel" >/dev/null

# --------------------------------------------------------------------- done --
if [ "$FAILS" != 0 ]; then
    echo "--- server log (tail)" >&2
    tail -20 "$TMP/server.log" >&2
    echo "--- agent log (tail)" >&2
    tail -20 "$TMP/agent.log" >&2
    echo "test_agent_checkpoints: $FAILS of $((CHECKS + FAILS)) checks FAILED" >&2
    exit 1
fi
echo "test_agent_checkpoints: all $CHECKS checks passed"
