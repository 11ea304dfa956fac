#!/usr/bin/env bash
# test_agent_isolation.sh - jobs on one node are isolated from each other and limited,
# with real jobs of two users on a root agent with 4 fake GPUs that have device nodes:
#
#   1. job B does not see job A's command (ps ax, /proc) nor a file A wrote to /tmp;
#   2. a job opens its own GPU's device node (ENXIO: allowed, no driver) but not another
#      GPU's (ENOENT in its private /dev; EPERM through the device cgroup elsewhere:
#      v1 devices controller or v2 eBPF device filter);
#   3. no_new_privs is set and PATH is the fixed one, not the agent's;
#   4. the CPU quota, memory limit and pids limit are written (read back from the
#      agent's side) and the job's cgroups are removed when it ends;
#   5. a job over its memory limit is killed and the log says it ran out of memory;
#   6. a burst of 200 processes stops at the pids limit (64 here);
#   7. an agent that cannot isolate (no cgroup hierarchy at --cgroup-root) refuses to
#      start; with --allow-unisolated it registers and GET /v1/nodes says isolated false.
#
# usage: bash test_agent_isolation.sh /path/to/fairgpu      (needs curl, jq; root)
FG_TEST_NAME=test_agent_isolation
[ "$(id -u)" = 0 ] || { echo "SKIP: jobs are isolated by root agents only"; exit 77; }
source "$(dirname "$0")/lib_agent.sh"

curl -s -X POST "$URL/v1/users" -d '{"username":"bob","email":"b@example.org","password":"bob-password-1"}' >/dev/null
BOB=$(curl -s -X POST "$URL/v1/sessions" -d '{"username":"bob","password":"bob-password-1"}' | jq -r .token)

# The agent runs with a PATH that starts with a directory jobs must not inherit.
DEVDIR=$TMP/gpudev
AGENT_FLAGS=(--fake-gpu-dev-dir "$DEVDIR" --job-pids-max 64)
if ! "$FG" agent --help 2>&1 | grep -q -- --fake-gpu-dev-dir; then
    # An agent without these options (an older build): the same checks, with the fake
    # GPUs' nodes made here, show what it lacks.
    AGENT_FLAGS=()
    mkdir -p "$DEVDIR"
    for i in 0 1 2 3; do mknod -m 666 "$DEVDIR/nvidia$i" c 195 "$i"; done
fi
PATH="$TMP/agent-only-bin:$PATH" "$FG" agent --server "$URL" --token-file "$TMP/data/agent.token" \
    --name iso1 --fake-gpus 4 --gpu-type h100 --cpus 8 --memory-mb 4096 \
    --work-dir "$TMP/w-iso1" --heartbeat 1 \
    --user-map "$TMP/usermap" --stop-jobs-on-exit ${AGENT_FLAGS[@]+"${AGENT_FLAGS[@]}"} \
    >>"$TMP/agent-iso1.log" 2>&1 &
AGENT_PIDS+=($!)
node_up() { api GET /v1/nodes | jq -e '.items[] | select(.name=="iso1" and .state=="up")' >/dev/null; }
check "the agent registers" wait_for 15 node_up
check "GET /v1/nodes says the node is isolated" \
    test "$(api GET /v1/nodes | jq -r '.items[] | select(.name=="iso1") | .isolated')" = true

submit() { api POST /v1/jobs "$1" | jq -r .id; }
state() { api GET "/v1/jobs/$1" | jq -r .state; }
is_state() { [ "$(state "$1")" = "$2" ]; }
logs() { api GET "/v1/jobs/$1/logs"; }
log_has() { logs "$1" | grep -q -- "$2"; }

# ---------------------------------------------- 1-3. what job B can see of job A --

A_CMD="echo a-secret-marker >/tmp/iso-a-file; echo A-READY; while [ ! -e $TMP/go ]; do sleep 0.2; done"
A=$(submit "{\"name\":\"a\",\"gpus\":1,\"command\":\"$A_CMD\"}")
check "job A runs and wrote its /tmp file" wait_for 20 log_has "$A" A-READY
A_GPU=$(api GET "/v1/jobs/$A" | jq -r '.gpu_indices[0]')

# B prints what it sees; every probe is one line "NAME=value".
B_CMD=$(
    cat <<'EOF'
echo PS_START; ps ax -o args 2>&1; echo PS_END
echo PROC_START; for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' <$f; echo; done; echo PROC_END
echo NPROC=$(ls -d /proc/[0-9]* | wc -l)
if [ -e /tmp/iso-a-file ]; then echo A_FILE=visible; else echo A_FILE=absent; fi
grep NoNewPrivs /proc/self/status | tr -d ' \t' | sed 's/:/=/'
echo JOB_PATH=$PATH
g=$FAIRGPU_GPU_INDICES
echo OWN_DEV=$(head -c1 /dev/nvidia$g 2>&1 | sed 's/.*: //')
echo CTL_DEV=$(head -c1 /dev/nvidiactl 2>&1 | sed 's/.*: //')
echo OTHER_DEV=$(head -c1 /dev/nvidia$OTHER 2>&1 | sed 's/.*: //')
echo OTHER_HOSTDEV=$(head -c1 $DEVDIR/nvidia$OTHER 2>&1 | sed 's/.*: //')
echo B-DONE
EOF
)
B_JSON=$(jq -n --arg c "$B_CMD" --arg o "$A_GPU" --arg d "$DEVDIR" \
    '{name:"b", gpus:1, command:$c, env:{OTHER:$o, DEVDIR:$d}}')
B=$(AS=$BOB submit "$B_JSON")
check "job B completes" wait_for 20 bash -c "$(declare -f api state is_state); URL=$URL ALICE=$BOB is_state $B COMPLETED"
AS=$BOB logs "$B" >"$TMP/b.log"
touch "$TMP/go"
check "B's output is there" grep -q B-DONE "$TMP/b.log"
check "B saw its own ps (sanity)" grep -q 'ps ax' "$TMP/b.log"
check "job B's ps ax does not show job A's command" \
    bash -c "! sed -n '/^PS_START/,/^PS_END/p' '$TMP/b.log' | grep -q a-secret-marker"
check "job B's /proc does not show job A's command" \
    bash -c "! sed -n '/^PROC_START/,/^PROC_END/p' '$TMP/b.log' | grep -q a-secret-marker"
nproc=$(sed -n 's/^NPROC=//p' "$TMP/b.log")
check "job B's /proc shows only its own few processes (saw ${nproc:-none})" \
    bash -c "[ -n '$nproc' ] && [ '$nproc' -le 6 ]"
check "the file A wrote to /tmp is not visible to B" grep -qx 'A_FILE=absent' "$TMP/b.log"
check "no_new_privs is set in the job" grep -qx 'NoNewPrivs=1' "$TMP/b.log"
check "the job's PATH is the fixed one, not the agent's" \
    grep -qx 'JOB_PATH=/usr/local/bin:/usr/bin:/bin' "$TMP/b.log"
check "the job can open its own GPU node (ENXIO: no driver behind it)" \
    grep -qx 'OWN_DEV=No such device or address' "$TMP/b.log"
check "the job can open the shared control node /dev/nvidiactl" \
    grep -qx 'CTL_DEV=No such device or address' "$TMP/b.log"
check "another job's GPU node is not in the job's /dev" \
    grep -qxE 'OTHER_DEV=(No such file or directory|Operation not permitted)' "$TMP/b.log"
if [ -d /sys/fs/cgroup/devices ] || [ -e /sys/fs/cgroup/cgroup.controllers ]; then
    # v1 devices controller, or v2 eBPF device program
    check "the device cgroup denies another GPU's node outside /dev (EPERM)" \
        grep -qx 'OTHER_HOSTDEV=Operation not permitted' "$TMP/b.log"
fi
check "job A completes" wait_for 20 is_state "$A" COMPLETED
logs "$A" >"$TMP/a.log"
check "A could write to its own /tmp" bash -c "! grep -q 'cannot create' '$TMP/a.log'"

# ---------------------------------------------------- 4. limits, read back --

# cgroup file NAME-of-the-job FILE: the limit as the agent wrote it (v1 or v2 layout).
cg_file() {
    local f
    for f in /sys/fs/cgroup/fairgpu/"iso1-$1.1.0-"*/"$2" /sys/fs/cgroup/*/fairgpu/"iso1-$1.1.0-"*/"$2"; do
        [ -r "$f" ] && { cat "$f"; return 0; }
    done
    return 1
}
cg_dirs() { ls -d /sys/fs/cgroup/fairgpu/"iso1-$1".* /sys/fs/cgroup/*/fairgpu/"iso1-$1".* 2>/dev/null; }
L=$(submit "{\"name\":\"limits\",\"gpus\":1,\"cpus\":2,\"memory_mb\":300,\"command\":\"echo L-UP; while [ ! -e $TMP/go-l ]; do sleep 0.2; done\"}")
check "the limited job runs" wait_for 20 log_has "$L" L-UP
quota=$(cg_file "$L" cpu.max || cg_file "$L" cpu.cfs_quota_us)
check "CPU quota of 2 CPUs written (got '$quota')" bash -c "[ '$quota' = '200000 100000' ] || [ '$quota' = 200000 ]"
mem=$(cg_file "$L" memory.max || cg_file "$L" memory.limit_in_bytes)
check "memory limit of 300 MiB written (got '$mem')" test "$mem" = $((300 * 1024 * 1024))
pids=$(cg_file "$L" pids.max)
check "pids limit written (got '$pids')" test "$pids" = 64
touch "$TMP/go-l"
check "the limited job completes" wait_for 20 is_state "$L" COMPLETED
gone() { [ -z "$(cg_dirs "$1")" ]; }
check "its cgroups are removed when it ends" wait_for 10 gone "$L"
# A job that asks for no CPUs or memory gets its GPUs' share of the node (8 CPUs and
# 4096 MiB over 4 GPUs): it is limited all the same.
D=$(submit "{\"name\":\"defaults\",\"gpus\":2,\"command\":\"echo D-UP; while [ ! -e $TMP/go-d ]; do sleep 0.2; done\"}")
check "the job without requests runs" wait_for 20 log_has "$D" D-UP
quota=$(cg_file "$D" cpu.max || cg_file "$D" cpu.cfs_quota_us)
check "its CPU quota is its GPUs' share, 4 CPUs (got '$quota')" bash -c "[ '$quota' = '400000 100000' ] || [ '$quota' = 400000 ]"
mem=$(cg_file "$D" memory.max || cg_file "$D" memory.limit_in_bytes)
check "its memory limit is its GPUs' share, 2048 MiB (got '$mem')" test "$mem" = $((2048 * 1024 * 1024))
touch "$TMP/go-d"
check "the job without requests completes" wait_for 20 is_state "$D" COMPLETED

# ------------------------------------------------------ 5. out of memory --

M=$(submit '{"name":"hog","gpus":1,"memory_mb":64,"command":"x=$(head -c 400000000 /dev/zero | tr \"\\\\0\" a); echo survived ${#x}"}')
check "the job over its memory limit fails" wait_for 60 is_state "$M" FAILED
check "its log says it ran out of memory" wait_for 10 log_has "$M" 'out of memory'
logs "$M" >"$TMP/m.log"
check "it did not get its memory" bash -c "! grep -q survived '$TMP/m.log'"

# ------------------------------------------------------------ 6. pids limit --

# Only shell built-ins after the burst: with the limit reached, nothing can fork.
P_CMD='( i=0; while [ $i -lt 200 ]; do sleep 30 & echo $! >>/tmp/pids; i=$((i+1)); done ) 2>/dev/null; n=0; while read p; do n=$((n+1)); kill $p; done </tmp/pids; echo STARTED=$n'
P=$(submit "$(jq -n --arg c "$P_CMD" '{name:"burst", gpus:1, command:$c}')")
check "the burst job completes" wait_for 60 is_state "$P" COMPLETED
started=$(logs "$P" | sed -n 's/^STARTED=//p')
check "a burst of 200 processes stops below the pids limit of 64 (started ${started:-none})" \
    bash -c "[ -n '$started' ] && [ '$started' -gt 0 ] && [ '$started' -lt 64 ]"
check "the agent is still up after the burst" kill -0 "${AGENT_PIDS[0]}"

# ---------------------------------------------- 7. refusing to run unisolated --

"$FG" agent --server "$URL" --token-file "$TMP/data/agent.token" --name iso2 --fake-gpus 2 \
    --gpu-type h100 --work-dir "$TMP/w-iso2" --cgroup-root "$TMP/no-cgroups" \
    --user-map "$TMP/usermap" >"$TMP/agent-iso2.log" 2>&1 &
REF=$!
AGENT_PIDS+=($REF)
exited() { ! kill -0 "$1" 2>/dev/null; }
check "an agent that cannot isolate refuses to start" wait_for 10 exited "$REF"
rc=0
if exited "$REF"; then
    wait "$REF" 2>/dev/null
    rc=$?
else
    kill "$REF" 2>/dev/null # it runs: started without isolation
fi
check "... with a non-zero status" test "$rc" -ne 0
check "... saying why and what to do" grep -q 'cannot isolate jobs.*--allow-unisolated\|--allow-unisolated' "$TMP/agent-iso2.log"
check "... naming what is missing" grep -q 'no cgroup hierarchy' "$TMP/agent-iso2.log"
"$FG" agent --server "$URL" --token-file "$TMP/data/agent.token" --name iso2 --fake-gpus 2 \
    --gpu-type h100 --work-dir "$TMP/w-iso2" --cgroup-root "$TMP/no-cgroups" --allow-unisolated \
    --user-map "$TMP/usermap" --stop-jobs-on-exit >>"$TMP/agent-iso2.log" 2>&1 &
AGENT_PIDS+=($!)
iso2_up() { api GET /v1/nodes | jq -e '.items[] | select(.name=="iso2" and .state=="up")' >/dev/null; }
check "with --allow-unisolated it registers" wait_for 15 iso2_up
check "and GET /v1/nodes shows it as isolated: false" \
    test "$(api GET /v1/nodes | jq -r '.items[] | select(.name=="iso2") | .isolated')" = false
check "the isolated node still shows isolated: true" \
    test "$(api GET /v1/nodes | jq -r '.items[] | select(.name=="iso1") | .isolated')" = true

# A cgroup v2 hierarchy without the memory controller (the hugetlb-only v2 mount of a
# hybrid host) is not enough either.
U=/sys/fs/cgroup/unified
if [ -r "$U/cgroup.controllers" ] && ! grep -qw memory "$U/cgroup.controllers"; then
    "$FG" agent --server "$URL" --token-file "$TMP/data/agent.token" --name iso3 --fake-gpus 2 \
        --gpu-type h100 --work-dir "$TMP/w-iso3" --cgroup-root "$U" \
        --user-map "$TMP/usermap" >"$TMP/agent-iso3.log" 2>&1 &
    REF3=$!
    AGENT_PIDS+=($REF3)
    check "an agent on a cgroup v2 without cpu/memory/pids refuses to start" wait_for 10 exited "$REF3"
    check "... naming the missing v2 controllers" grep -q 'cgroup v2 controller memory' "$TMP/agent-iso3.log"
fi

if [ "$FAILS" -gt 0 ]; then
    echo "--- agent iso1 log (tail)" >&2
    tail -20 "$TMP/agent-iso1.log" >&2
    echo "--- job B log" >&2
    cat "$TMP/b.log" >&2
    echo "$FAILS of $((CHECKS + FAILS)) checks failed" >&2
    exit 1
fi
echo "PASS: $CHECKS checks"
