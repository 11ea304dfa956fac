#!/usr/bin/env bash
# test_agent_devfilter_v2.sh - on cgroup v2 a job's cgroup carries an eBPF device filter:
# a root agent with 2 fake GPUs that have device nodes, on the host's cgroup v2 hierarchy
# (the hybrid host's cgroup2 mount when /sys/fs/cgroup is v1: run --allow-unisolated
# there, as it lacks cpu/memory/pids), runs a job of another user that
#   1. sits in its v2 cgroup ROOT/fairgpu/...;
#   2. opens /dev/null, and its own GPU's node made outside /dev (ENXIO: allowed, no
#      driver);
#   3. gets EPERM for the other GPU's node outside /dev (the private /dev hides it only
#      inside /dev), and the agent warned about nothing.
#
# usage: bash test_agent_devfilter_v2.sh /path/to/fairgpu      (needs curl, jq; root)
FG_TEST_NAME=test_agent_devfilter_v2
[ "$(id -u)" = 0 ] || { echo "SKIP: jobs are isolated by root agents only"; exit 77; }
U=
for d in /sys/fs/cgroup /sys/fs/cgroup/unified; do
    if [ -r "$d/cgroup.controllers" ]; then U=$d; break; fi
done
[ -n "$U" ] || { echo "SKIP: no cgroup v2 hierarchy"; exit 77; }
source "$(dirname "$0")/lib_agent.sh"

V2_FLAGS=()
if ! grep -qw memory "$U/cgroup.controllers" || ! grep -qw pids "$U/cgroup.controllers"; then
    V2_FLAGS=(--allow-unisolated) # there only the device filter applies
fi
DEVDIR=$TMP/gpudev
"$FG" agent --server "$URL" --token-file "$TMP/data/agent.token" \
    --name dv2 --fake-gpus 2 --gpu-type h100 --work-dir "$TMP/w-dv2" --heartbeat 1 \
    --cgroup-root "$U" --fake-gpu-dev-dir "$DEVDIR" --user-map "$TMP/usermap" \
    --stop-jobs-on-exit ${V2_FLAGS[@]+"${V2_FLAGS[@]}"} >>"$TMP/agent-dv2.log" 2>&1 &
AGENT_PIDS+=($!)
node_up() { api GET /v1/nodes | jq -e '.items[] | select(.name=="dv2" and .state=="up")' >/dev/null; }
check "the agent registers" wait_for 15 node_up

CMD=$(
    cat <<'EOF'
echo CGROUP=$(sed -n 's/^0:://p' /proc/self/cgroup)
echo NULL_DEV=$(head -c1 /dev/null 2>&1 | sed 's/.*: //')ok
g=$FAIRGPU_GPU_INDICES
echo OWN_HOSTDEV=$(head -c1 $DEVDIR/nvidia$g 2>&1 | sed 's/.*: //')
echo OTHER_HOSTDEV=$(head -c1 $DEVDIR/nvidia$((1 - g)) 2>&1 | sed 's/.*: //')
echo J-DONE
EOF
)
J=$(api POST /v1/jobs "$(jq -n --arg c "$CMD" --arg d "$DEVDIR" '{name:"dv", gpus:1, command:$c, env:{DEVDIR:$d}}')" | jq -r .id)
done_() { [ "$(api GET "/v1/jobs/$J" | jq -r .state)" = COMPLETED ]; }
check "the job completes" wait_for 30 done_
api GET "/v1/jobs/$J/logs" >"$TMP/j.log"
check "its output is there" grep -q J-DONE "$TMP/j.log"
check "the job runs in its cgroup v2 directory" grep -qE '^CGROUP=.*/fairgpu/dv2-' "$TMP/j.log"
check "the job opens /dev/null" grep -qx 'NULL_DEV=ok' "$TMP/j.log"
check "the job opens its own GPU's node outside /dev (ENXIO: no driver)" \
    grep -qx 'OWN_HOSTDEV=No such device or address' "$TMP/j.log"
check "the eBPF filter denies the other GPU's node outside /dev (EPERM)" \
    grep -qx 'OTHER_HOSTDEV=Operation not permitted' "$TMP/j.log"
check "the agent applied the cgroup without a warning" \
    bash -c "! grep -qi 'limits not applied' '$TMP/agent-dv2.log' '$TMP/j.log'"

if [ "$FAILS" -gt 0 ]; then
    echo "--- agent log (tail)" >&2
    tail -20 "$TMP/agent-dv2.log" >&2
    echo "--- job log" >&2
    cat "$TMP/j.log" >&2
    echo "$FAILS of $((CHECKS + FAILS)) checks failed" >&2
    exit 1
fi
echo "PASS: $CHECKS checks"
