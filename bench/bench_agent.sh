#!/usr/bin/env bash
# bench_agent.sh - end-to-end throughput of the platform: trivial jobs (`true`, 1 GPU)
# submitted to a real `fairgpu server` with 4 real agent processes (8 fake GPUs each) on
# this machine; jobs per second from the first submission to the last recorded exit, and
# the server's peak RSS (VmHWM from /proc/PID/status).
#
# usage: bash bench/bench_agent.sh [/path/to/fairgpu] [JOBS]
#   default binary: build/release/fairgpu (cmake --preset release && cmake --build
#   --preset release); default JOBS: 2000. Needs curl and jq.
# Output: `name value unit` lines. CPU per job: the server, the agent processes, and
# `launch`: the agents' zygotes with the monitors and jobs (`true` itself) they reaped.
# FG_BENCH_AGENT_ARGS: extra agent options (e.g. "--no-cgroups --allow-unisolated").
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
FG=${1:-$ROOT/build/release/fairgpu}
N=${2:-2000}
case "$FG" in /*) ;; *) FG="$PWD/$FG" ;; esac
[ -x "$FG" ] || { echo "bench_agent: no binary at $FG (build the release preset)" >&2; exit 2; }
for tool in curl jq; do
    command -v $tool >/dev/null || { echo "bench_agent: $tool is needed" >&2; exit 2; }
done
TMP=$(mktemp -d "${TMPDIR:-/tmp}/fg_bench_agent.XXXXXX")
chmod 711 "$TMP"
SERVER_PID=
AGENT_PIDS=()
cleanup() {
    for p in "${AGENT_PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${AGENT_PIDS[@]}"; do wait "$p" 2>/dev/null; done
    if [ -n "$SERVER_PID" ]; then
        kill "$SERVER_PID" 2>/dev/null
        wait "$SERVER_PID" 2>/dev/null
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
mkdir -p "$TMP/data"
for _ in 1 2 3 4 5 6 7 8; do
    PORT=$((20000 + RANDOM % 40000))
    port_free "$PORT" || continue
    "$FG" server --data-dir "$TMP/data" --listen "127.0.0.1:$PORT" --rate-limit 0 \
        --max-pending-per-user 0 --insecure-fast-password-hash --log-level warn \
        >"$TMP/server.log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 1 100); do
        kill -0 "$SERVER_PID" 2>/dev/null || break
        port_free "$PORT" || break 2
        sleep 0.1
    done
    kill "$SERVER_PID" 2>/dev/null
    wait "$SERVER_PID" 2>/dev/null
    SERVER_PID=
done
[ -n "$SERVER_PID" ] || { echo "bench_agent: the server did not start" >&2; cat "$TMP/server.log" >&2; exit 1; }
URL="http://127.0.0.1:$PORT"
curl -s -X POST "$URL/v1/users" -d '{"username":"bench","email":"b@example.org","password":"bench-password-1"}' >/dev/null
TOKEN=$(curl -s -X POST "$URL/v1/sessions" -d '{"username":"bench","password":"bench-password-1"}' | jq -r .token)

echo "* nobody" >"$TMP/usermap" # as root, jobs run as nobody (no accounts are created)
ISO=() # jobs are isolated only by a root agent; otherwise it must be told
[ "$(id -u)" = 0 ] || { ISO=(--allow-unisolated); echo "note: not root: jobs not isolated"; }
for i in 0 1 2 3; do
    "$FG" agent --server "$URL" --token-file "$TMP/data/agent.token" --name "bench$i" \
        --fake-gpus 8 --gpu-type h100 --work-dir "$TMP/w$i" --user-map "$TMP/usermap" \
        --stop-jobs-on-exit --log-level warn ${ISO[@]+"${ISO[@]}"} ${FG_BENCH_AGENT_ARGS:-} \
        >"$TMP/agent$i.log" 2>&1 &
    AGENT_PIDS+=($!)
done
api() { curl -s "$URL$1" -H "Authorization: Bearer $TOKEN"; }
for _ in $(seq 1 100); do
    [ "$(api /v1/nodes | jq '[.items[] | select(.state=="up")] | length')" = 4 ] && break
    sleep 0.1
done

# One curl process, 16 parallel keep-alive connections, N submissions.
for i in $(seq 1 "$N"); do
    [ "$i" -gt 1 ] && echo next
    printf 'url = "%s/v1/jobs"\nrequest = "POST"\nsilent\n' "$URL"
    printf 'header = "Authorization: Bearer %s"\nheader = "Content-Type: application/json"\n' "$TOKEN"
    printf 'data = "{\\"name\\":\\"b%d\\",\\"gpus\\":1,\\"command\\":[\\"true\\"]}"\n' "$i"
    printf 'output = "/dev/null"\nwrite-out = "%%{http_code}\\n"\n'
done >"$TMP/curl.cfg"

now_ms() { date +%s%3N; }
cpu_ticks() { # utime + stime of the given pids, in clock ticks
    local t=0 p
    for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
    echo $t
}
# The agents' launchers: their zygotes (fairgpu-monitor), with the CPU of the monitors
# they reaped, which includes the jobs the monitors reaped (cutime + cstime).
LAUNCHERS=()
for p in "${AGENT_PIDS[@]}"; do
    for c in $(cat "/proc/$p/task/"*/children 2>/dev/null); do LAUNCHERS+=("$c"); done
done
launch_ticks() {
    local t=0 p
    for p in "${LAUNCHERS[@]}"; do
        t=$((t + $(awk '{print $14 + $15 + $16 + $17}' "/proc/$p/stat" 2>/dev/null || echo 0)))
    done
    echo $t
}
CPU_S0=$(cpu_ticks "$SERVER_PID")
CPU_A0=$(cpu_ticks "${AGENT_PIDS[@]}")
CPU_L0=$(launch_ticks)
T0=$(now_ms)
curl -s --no-progress-meter --parallel --parallel-max 16 -K "$TMP/curl.cfg" >"$TMP/codes"
T_SUB=$(now_ms)
CREATED=$(grep -c '^201$' "$TMP/codes")
# Done when nothing is pending or running (polled every 50 ms by one curl: the harness
# must not eat the CPU it measures).
while :; do
    if curl -s "$URL/v1/jobs?state=PENDING&limit=1" -H "Authorization: Bearer $TOKEN" | grep -q '"items":\[\]' &&
        curl -s "$URL/v1/jobs?state=RUNNING&limit=1" -H "Authorization: Bearer $TOKEN" | grep -q '"items":\[\]'; then
        break
    fi
    [ $(($(now_ms) - T0)) -gt 600000 ] && { echo "bench_agent: timed out" >&2; break; }
    sleep 0.05
done
T1=$(now_ms)
CPU_S1=$(cpu_ticks "$SERVER_PID")
CPU_A1=$(cpu_ticks "${AGENT_PIDS[@]}")
sleep 1.5 # the zygotes reap finished monitors at least once a second
CPU_L1=$(launch_ticks)
DONE=0
CURSOR=
while :; do
    page=$(api "/v1/jobs?state=COMPLETED&limit=1000${CURSOR:+&cursor=$CURSOR}")
    DONE=$((DONE + $(echo "$page" | jq '.items | length')))
    CURSOR=$(echo "$page" | jq -r '.next_cursor // empty')
    [ -n "$CURSOR" ] || break
done
HWM=$(awk '/^VmHWM/ {print $2}' "/proc/$SERVER_PID/status")
AHWM=0
for p in "${AGENT_PIDS[@]}"; do
    a=$(awk '/^VmHWM/ {print $2}' "/proc/$p/status")
    [ "${a:-0}" -gt "$AHWM" ] && AHWM=$a
done
ELAPSED=$((T1 - T0))
echo "agent_e2e_jobs_submitted $CREATED jobs"
echo "agent_e2e_jobs_completed $DONE jobs"
echo "agent_e2e_submit_s $(awk -v a=$((T_SUB - T0)) 'BEGIN {printf "%.3f", a / 1000}') s"
echo "agent_e2e_elapsed_s $(awk -v a=$ELAPSED 'BEGIN {printf "%.3f", a / 1000}') s"
echo "agent_e2e_jobs_per_s $(awk -v n="$DONE" -v a=$ELAPSED 'BEGIN {printf "%.1f", n * 1000 / a}') jobs/s"
echo "agent_e2e_server_peak_rss ${HWM:-0} kB"
HZ=$(getconf CLK_TCK)
echo "agent_e2e_server_cpu_per_job $(awk -v t=$((CPU_S1 - CPU_S0)) -v n="$DONE" -v hz="$HZ" 'BEGIN {printf "%.2f", n ? t * 1000 / hz / n : 0}') ms"
echo "agent_e2e_agents_cpu_per_job $(awk -v t=$((CPU_A1 - CPU_A0)) -v n="$DONE" -v hz="$HZ" 'BEGIN {printf "%.2f", n ? t * 1000 / hz / n : 0}') ms"
echo "agent_e2e_launch_cpu_per_job $(awk -v t=$((CPU_L1 - CPU_L0)) -v n="$DONE" -v hz="$HZ" 'BEGIN {printf "%.2f", n ? t * 1000 / hz / n : 0}') ms"
echo "machine_loadavg_1m $(cut -d' ' -f1 /proc/loadavg) runnable"
echo "agent_e2e_agent_peak_rss ${AHWM:-0} kB"
[ "$DONE" = "$N" ] || { echo "bench_agent: only $DONE of $N jobs completed" >&2; exit 1; }
