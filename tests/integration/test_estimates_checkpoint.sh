#!/usr/bin/env bash
# test_estimates_checkpoint.sh - the controller's start estimates count what a job's
# checkpoints kept (src/server/sched_project.c), with a real server and a real agent with
# two fake GPUs:
#
#   1. a low job (2 GPUs, 60 s limit) writes a checkpoint 12 s in and is preempted by a
#      high job a few seconds later; it resumes (attempt 2);
#   2. a 2-GPU job submitted behind the resumed one is estimated to start when what is
#      left of the resumed job's limit after the work its checkpoint kept (~60 - 12 s)
#      has run, not after its whole limit again (~60 s).
#
# usage: bash test_estimates_checkpoint.sh /path/to/fairgpu
FG_TEST_NAME=test_estimates_checkpoint
source "$(dirname "$0")/lib_agent.sh"
"$FG" agent --server "$URL" --token-file "$TMP/data/agent.token" --name ck \
    --fake-gpus 2 --gpu-type H100 --work-dir "$TMP/w" --checkpoint-root "$TMP/ckpt" \
    --heartbeat 1 --grace 5 --user-map "$TMP/usermap" --stop-jobs-on-exit \
    ${AGENT_ISO[@]+"${AGENT_ISO[@]}"} >>"$TMP/agent.log" 2>&1 &
AGENT_PIDS+=($!)
node_up() { [ "$(api GET /v1/nodes | jq '[.items[] | select(.state=="up")] | length')" = 1 ]; }
check "the agent registers" wait_for 15 node_up
job() { api GET "/v1/jobs/$1"; }
field() { job "$1" | jq -r ".$2"; }
is_state() { [ "$(field "$1" state)" = "$2" ]; }
log_has() { api GET "/v1/jobs/$1/logs" | grep -q "$2"; }
submit() { api POST /v1/jobs "$1" | jq -r .id; }

# ------------------------------------------- 1. a checkpoint, a preemption, a resume --
D='$FAIRGPU_CHECKPOINT_DIR'
CMD="trap 'exit 0' TERM; if [ \$FAIRGPU_ATTEMPT = 1 ]; then sleep 12; echo w >$D/step.pt; echo WROTE; while :; do sleep 0.2; done; else echo second; sleep 100; fi"
LOW=$(submit "$(jq -nc --arg c "$CMD" '{name:"ck",gpus:2,priority:"low",time_limit_s:60,checkpoint_interval_s:10,command:$c}')")
check "the low job runs and writes its checkpoint" wait_for 30 log_has "$LOW" '^WROTE'
sleep 3 # more than a scan period: the agent has seen it
HIGH=$(submit '{"name":"urgent","gpus":2,"priority":"high","command":"sleep 1"}')
check "the high job completes" wait_for 30 is_state "$HIGH" COMPLETED
resumed() { [ "$(field "$LOW" attempts)" = 2 ] && is_state "$LOW" RUNNING; }
check "the low job resumes (attempt 2)" wait_for 30 resumed

# ------------------------------------------- 2. the job behind the resume --
BEHIND=$(submit '{"name":"behind","gpus":2,"priority":"low","time_limit_s":60,"command":"true"}')
has_est() { [ "$(field "$BEHIND" estimate_at_submit)" != null ]; }
check "the job behind gets an estimate at submission" wait_for 10 has_est
J=$(job "$BEHIND")
R=$(job "$LOW")
echo "  resumed job: $(echo "$R" | jq -c '{attempts, start_time, time_limit_s}')"
echo "  job behind:  $(echo "$J" | jq -c '{submit_time, estimate_at_submit, estimate_limit_at_submit, estimate_source}')"
LEFT=$(jq -n --argjson j "$J" --argjson r "$R" '$j.estimate_at_submit - $r.start_time')
check "estimated after what is left of the resumed job's limit ($LEFT s after its start; 48 expected, 60 without the checkpoint)" \
    test "$LEFT" -ge 44 -a "$LEFT" -le 53

api POST "/v1/jobs/$LOW/cancel" >/dev/null
if [ "$FAILS" -gt 0 ]; then
    tail -30 "$TMP/server.log" >&2
    echo "$FAILS of $CHECKS checks FAILED"
    exit 1
fi
echo "all $CHECKS checks passed"
