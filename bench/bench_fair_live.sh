#!/usr/bin/env bash
# bench_fair_live.sh - the scheduling policy live: a real `fairgpu server` (SQLite store in
# a temporary directory, loopback only) with two real agent processes of 8 fake GPUs each
# (2 nodes x 8 GPUs), real jobs (`sleep N`), and the waits the controller's own job records
# show (start time minus submit time, seconds). Four scenarios, each on a fresh server and
# fresh agents:
#
#   (a) light_user_wait_p50_s: user heavy (account a) queues 150 one-GPU jobs of 3-9 s;
#       10 s later user light (account b, the same weight) submits 4 one-GPU jobs of 5 s:
#       the median of their waits.
#   (b) gang8_behind_1gpu_wait_s: heavy queues 116 one-GPU jobs of 3-9 s (16 run, ~100
#       wait); then light submits an 8-GPU job: its wait.
#   (c) high8_start_latency_s: heavy's 24 `low` one-GPU jobs of 120 s fill the cluster;
#       heavy submits a `high` 8-GPU job: its wait (class preemption).
#   (d) short_behind_long_runners_wait_s: heavy's 24 one-GPU jobs of 90 s (16 run) have
#       run past the quantum; light submits one 5 s job: its wait.
#
# The scheduler's tunables are the defaults scaled down 180x so that it all takes minutes
# (quantum 20 s for 1 h, preempt-wait and min-run 3 s for 10 min, LAS thresholds 20, 200,
# 2000 GPU-s, half-life 1 h for 7 days); they are printed on stderr with the policy.
#
# usage: bash bench/bench_fair_live.sh [/path/to/fairgpu]     (needs curl and jq)
#   default binary: build/release/fairgpu (cmake --preset release && cmake --build
#   --preset release --target fairgpu). About 1-3 minutes by policy (fifo, which never
#   preempts: 5).
#   FG_BENCH_POLICY=wfq (las, fifo, ...): the policy (default: the controller's default)
#   FG_BENCH_SERVER_ARGS: more server flags, after the tunables (e.g. "--quantum 30s")
#   FG_BENCH_AGENT_ARGS: more agent flags; FG_BENCH_CAP: longest wait watched (120 s)
#   FG_BENCH_SCENARIOS: which to run (default "a b c d")
# Output: `name value unit` lines on stdout, e.g. `light_user_wait_p50_s 1 s`; a wait not
# over when the cap ran out is printed as the cap, with a note on stderr.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
FG=${1:-$ROOT/build/release/fairgpu}
case "$FG" in /*) ;; *) FG="$PWD/$FG" ;; esac
[ -x "$FG" ] || { echo "bench_fair_live: no binary at $FG (build the release preset)" >&2; exit 2; }
for tool in curl jq; do
    command -v $tool >/dev/null || { echo "bench_fair_live: $tool is needed" >&2; exit 2; }
done
CAP=${FG_BENCH_CAP:-120}
TUNABLES=(--quantum 20s --preempt-wait 3s --min-run 3s --las-thresholds "20,200,2000"
    --half-life 1h)
POLICY_ARGS=()
[ -n "${FG_BENCH_POLICY:-}" ] && POLICY_ARGS=(--policy "$FG_BENCH_POLICY")
echo "tunables ${TUNABLES[*]} ${FG_BENCH_SERVER_ARGS:-}" >&2

TMP=
POLICY_SHOWN=
SERVER_PID=
AGENT_PIDS=()
# stop_cluster: the agents (which stop their jobs), then the server, each by its PID.
stop_cluster() {
    local p
    for p in ${AGENT_PIDS[@]+"${AGENT_PIDS[@]}"}; do kill "$p" 2>/dev/null; done
    for p in ${AGENT_PIDS[@]+"${AGENT_PIDS[@]}"}; do wait "$p" 2>/dev/null; done
    AGENT_PIDS=()
    if [ -n "$SERVER_PID" ]; then
        kill "$SERVER_PID" 2>/dev/null
        wait "$SERVER_PID" 2>/dev/null
        SERVER_PID=
    fi
    [ -n "$TMP" ] && rm -rf "$TMP"
    TMP=
}
trap stop_cluster EXIT
trap "exit 143" INT TERM

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# start_server: a server on a free loopback port with its data in $TMP/data; sets URL.
start_server() {
    local _i
    for _i in 1 2 3 4 5 6 7 8; do
        PORT=$((20000 + RANDOM % 40000))
        port_free "$PORT" || continue
        "$FG" server --data-dir "$TMP/data" --listen "127.0.0.1:$PORT" --rate-limit 0 \
            --max-pending-per-user 0 --insecure-fast-password-hash --heartbeat-interval 1s \
            --log-level warn ${POLICY_ARGS[@]+"${POLICY_ARGS[@]}"} "${TUNABLES[@]}" \
            ${FG_BENCH_SERVER_ARGS:-} >"$TMP/server.log" 2>&1 &
        SERVER_PID=$!
        for _ in $(seq 1 100); do
            kill -0 "$SERVER_PID" 2>/dev/null || break
            port_free "$PORT" || { URL="http://127.0.0.1:$PORT"; return 0; }
            sleep 0.1
        done
        kill "$SERVER_PID" 2>/dev/null
        wait "$SERVER_PID" 2>/dev/null
        SERVER_PID=
    done
    echo "bench_fair_live: the server did not start" >&2
    cat "$TMP/server.log" >&2
    exit 1
}

# post PATH TOKEN BODY: the reply's body on stdout.
post() {
    curl -s -X POST "$URL$1" ${2:+-H "Authorization: Bearer $2"} \
        -H 'Content-Type: application/json' -d "$3"
}
get() { curl -s "$URL$1" -H "Authorization: Bearer $2"; }
login() { post /v1/sessions "" "{\"username\":\"$1\",\"password\":\"$1-password-1\"}" | jq -r .token; }

# start_cluster: a fresh server with admin root, accounts a and b (weight 1 each), users
# heavy (in a) and light (in b) logged in (HEAVY, LIGHT), and two agents of 8 fake GPUs.
start_cluster() {
    TMP=$(mktemp -d "${TMPDIR:-/tmp}/fg_bench_fair_live.XXXXXX")
    chmod 711 "$TMP"
    mkdir -p "$TMP/data"
    start_server
    post /v1/users "" "$(jq -cn --arg t "$(cat "$TMP/data/setup-token" 2>/dev/null)" \
        '{username: "root", email: "r@example.org", password: "root-password-1"} +
         (if $t == "" then {} else {setup_token: $t} end)')" >/dev/null
    ADMIN=$(login root)
    local a u
    for a in a b; do post /v1/accounts "$ADMIN" "{\"name\":\"$a\",\"weight\":1}" >/dev/null; done
    for u in heavy:a light:b; do
        post /v1/users "$ADMIN" "{\"username\":\"${u%:*}\",\"email\":\"${u%:*}@example.org\",\
\"password\":\"${u%:*}-password-1\",\"account\":\"${u#*:}\"}" >/dev/null
    done
    HEAVY=$(login heavy)
    LIGHT=$(login light)
    [ -n "$HEAVY" ] && [ "$HEAVY" != null ] && [ -n "$LIGHT" ] && [ "$LIGHT" != null ] ||
        { echo "bench_fair_live: cannot create the users" >&2; cat "$TMP/server.log" >&2; exit 1; }
    [ "$(get /v1/me "$LIGHT" | jq -r .account)" = b ] ||
        { echo "bench_fair_live: user light is not in account b" >&2; exit 1; }
    [ -n "$POLICY_SHOWN" ] || echo "policy $(get /v1/fairshare "$ADMIN" | jq -r .policy)" >&2
    POLICY_SHOWN=1
    echo "* nobody" >"$TMP/usermap" # as root, jobs run as nobody
    local iso=() i
    [ "$(id -u)" = 0 ] || iso=(--allow-unisolated)
    for i in 0 1; do
        "$FG" agent --server "$URL" --token-file "$TMP/data/agent.token" --name "node$i" \
            --fake-gpus 8 --gpu-type h100 --work-dir "$TMP/w$i" --user-map "$TMP/usermap" \
            --heartbeat 1 --grace 5 --stop-jobs-on-exit --log-level warn \
            ${iso[@]+"${iso[@]}"} ${FG_BENCH_AGENT_ARGS:-} >"$TMP/agent$i.log" 2>&1 &
        AGENT_PIDS+=($!)
    done
    for _ in $(seq 1 200); do
        [ "$(get /v1/nodes "$ADMIN" | jq '[.items[] | select(.state=="up")] | length')" = 2 ] &&
            return 0
        sleep 0.1
    done
    echo "bench_fair_live: the agents did not come up" >&2
    tail -5 "$TMP"/agent*.log >&2
    exit 1
}

# submit TOKEN GPUS SECONDS [PRIORITY]: one job running `sleep SECONDS`; its id on stdout.
submit() {
    post /v1/jobs "$1" "{\"name\":\"bench\",\"gpus\":$2,\"command\":[\"sleep\",\"$3\"],\
\"time_limit_s\":$(($3 + 60)),\"priority\":\"${4:-normal}\"}" | jq -r .id
}

# submit_many TOKEN N PRIORITY SECONDS...: N one-GPU jobs, job i sleeping the
# (i mod count)-th of SECONDS; one curl process, 8 parallel connections.
submit_many() {
    local tok=$1 n=$2 prio=$3 i d
    shift 3
    local durs=("$@")
    for i in $(seq 0 $((n - 1))); do
        d=${durs[$((i % ${#durs[@]}))]}
        [ "$i" -gt 0 ] && echo next
        printf 'url = "%s/v1/jobs"\nrequest = "POST"\nsilent\n' "$URL"
        printf 'header = "Authorization: Bearer %s"\nheader = "Content-Type: application/json"\n' "$tok"
        printf 'data = "{\\"name\\":\\"fill\\",\\"gpus\\":1,\\"command\\":[\\"sleep\\",\\"%s\\"],\\"time_limit_s\\":%d,\\"priority\\":\\"%s\\"}"\n' \
            "$d" $((d + 60)) "$prio"
        printf 'output = "/dev/null"\nwrite-out = "%%{http_code}\\n"\n'
    done >"$TMP/curl.cfg"
    curl -s --no-progress-meter --parallel --parallel-max 8 -K "$TMP/curl.cfg" >"$TMP/codes"
    local ok
    ok=$(grep -c '^201$' "$TMP/codes")
    [ "$ok" = "$n" ] || { echo "bench_fair_live: only $ok of $n submissions accepted" >&2; exit 1; }
}

# running_gpus: GPUs held by running jobs (all users).
running_gpus() {
    get "/v1/jobs?state=RUNNING&limit=1000" "$ADMIN" | jq '[.items[].gpus] | add // 0'
}
# wait_full SECONDS: until all 16 GPUs run jobs.
wait_full() {
    local end=$((SECONDS + $1))
    while [ $SECONDS -le $end ]; do
        [ "$(running_gpus)" = 16 ] && return 0
        sleep 0.2
    done
    echo "bench_fair_live: the cluster did not fill" >&2
    exit 1
}

# job_wait ID: once job ID has started, its wait in seconds (its first RUNNING event's
# time minus its submit time, both from the controller); empty while it has not.
job_wait() {
    local sub st
    sub=$(get "/v1/jobs/$1" "$ADMIN" | jq -r .submit_time)
    st=$(get "/v1/jobs/$1/events" "$ADMIN" | jq -r '[.items[] | select(.to=="RUNNING")][0].time // empty')
    [ -n "$st" ] && echo $((st - sub))
}

# watch_waits ID...: waits (at most CAP s) until every job has started; prints each one's
# wait, one a line (the cap for one that has not started, with a note and its reason on
# stderr).
watch_waits() {
    local end=$((SECONDS + CAP)) j w all
    declare -A got=()
    while :; do
        all=1
        for j in "$@"; do
            [ -n "${got[$j]:-}" ] && continue
            w=$(job_wait "$j")
            if [ -n "$w" ]; then got[$j]=$w; else all=0; fi
        done
        [ $all = 1 ] || [ $SECONDS -gt $end ] && break
        sleep 0.2
    done
    for j in "$@"; do
        if [ -n "${got[$j]:-}" ]; then
            echo "${got[$j]}"
        else
            echo "note: job $j did not start in $CAP s ($(get "/v1/jobs/$j" "$ADMIN" |
                jq -r '.reason_code + ": " + .reason')); counted as $CAP s" >&2
            echo "$CAP"
        fi
    done
}

# median: of the numbers on stdin
median() { sort -n | awk '{ v[NR] = $1 } END { m = int((NR + 1) / 2);
    printf "%g", NR % 2 ? v[m] : (v[m] + v[m + 1]) / 2 }'; }

# note_reason ID: the job's state and reason, on stderr (what held it, while it waits).
note_reason() {
    echo "  job $1: $(get "/v1/jobs/$1" "$ADMIN" | jq -r '.state + " " + (.reason_code // "") + ": " + (.reason // "")')" >&2
}

# note_pending WHAT: the number of pending jobs, on stderr.
note_pending() {
    echo "  $1: $(get "/v1/jobs?state=PENDING&limit=1000" "$ADMIN" | jq '.items | length') jobs pending" >&2
}

# ---------------------------------------------------------------- scenarios --

scenario_a() {
    start_cluster
    submit_many "$HEAVY" 150 normal 3 4 5 6 7 8 9
    wait_full 30
    sleep 10
    note_pending "(a) the light user arrives"
    local ids=() i
    for i in 1 2 3 4; do ids+=("$(submit "$LIGHT" 1 5)"); done
    sleep 1
    note_reason "${ids[0]}"
    local waits
    waits=$(watch_waits "${ids[@]}")
    echo "  (a) light user's waits: $(echo $waits)" >&2
    echo "light_user_wait_p50_s $(echo "$waits" | median) s"
    stop_cluster
}

scenario_b() {
    start_cluster
    submit_many "$HEAVY" 116 normal 3 4 5 6 7 8 9
    wait_full 30
    sleep 2
    note_pending "(b) the 8-GPU job arrives"
    local g
    g=$(submit "$LIGHT" 8 5)
    sleep 2
    note_reason "$g"
    echo "gang8_behind_1gpu_wait_s $(watch_waits "$g") s"
    stop_cluster
}

scenario_c() {
    start_cluster
    submit_many "$HEAVY" 24 low 120
    wait_full 30
    sleep 2
    local h
    h=$(submit "$HEAVY" 8 5 high)
    sleep 1
    note_reason "$h"
    echo "high8_start_latency_s $(watch_waits "$h") s"
    stop_cluster
}

scenario_d() {
    start_cluster
    submit_many "$HEAVY" 24 normal 90
    wait_full 30
    sleep 22 # past the quantum (20 s)
    local j
    j=$(submit "$LIGHT" 1 5)
    sleep 1
    note_reason "$j"
    echo "short_behind_long_runners_wait_s $(watch_waits "$j") s"
    stop_cluster
}

T0=$SECONDS
for sc in ${FG_BENCH_SCENARIOS:-a b c d}; do
    case $sc in
    a | b | c | d) "scenario_$sc" ;;
    *) echo "bench_fair_live: no scenario '$sc' (a, b, c, d)" >&2; exit 2 ;;
    esac
done
echo "bench_fair_live: $((SECONDS - T0)) s in all" >&2
