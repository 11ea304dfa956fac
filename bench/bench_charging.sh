#!/usr/bin/env bash
# bench_charging.sh - what live charging costs the controller: one real `fairgpu server`
# (SQLite store in a temporary directory, loopback only) and ONE real agent process that
# hosts many fake nodes (`--fake-nodes`, 8 fake H100s each), with N running one-GPU jobs
# (`sleep`, real processes). The set of running attempts stays the same throughout; the
# server is restarted on the same data dir for each measuring window (the interval cannot
# change live; the agent reconnects and the jobs go on running), alternately with
#
#   A: --charge-interval 1h   charging effectively off (one round at start, before the window)
#   B: --charge-interval 1s   every running attempt charged every second: N rows/s
#
# in the order A B A B A B (FG_BENCH_ROUNDS pairs). In each window of W seconds the server's
# CPU time (user + system of all its threads, /proc/PID/stat) and the ledger rows written
# (counted in the SQLite file, read-only) are taken. Per pair, the CPU cost of one accrued
# attempt is (CPU_B - CPU_A) / rows_B; the figure is the median over the pairs.
#
# Example: N = 1000, W = 30 s: a B window writes ~30,000 rows; if the server used 2.10 s
# of CPU in it and 0.60 s in the A window before it, one accrual costs 1.5 s / 30,000 =
# 50 us, and 10,000 attempts charged once a minute cost 10,000 x 50 us / 60 s = 0.83 % of
# one core.
#
# usage: bash bench/bench_charging.sh [/path/to/fairgpu]       (needs curl, jq, python3)
#   default binary: build/release/fairgpu, built here with the release preset. About 5
#   minutes with the defaults.
#   FG_BENCH_JOBS: running attempts (default 1000; 10,000 processes are too many for a
#     small machine: the cost is measured per attempt and scaled)
#   FG_BENCH_WINDOW: seconds per window (default 30); FG_BENCH_ROUNDS: A/B pairs (3)
#   FG_BENCH_SETTLE: seconds after the restart before a window opens (default 8)
#   FG_BENCH_AGENT_ARGS: agent flags (default "--no-cgroups --allow-unisolated": the
#     jobs are `sleep`; the agent's own costs are not what is measured)
#   FG_BENCH_SERVER_ARGS: more server flags
#   FG_BENCH_PERF=1: then a profile (perf) of the 1 s server for W seconds, on stderr
# Output: `name value unit` lines on stdout (charging_cpu_per_attempt_us,
# charging_cpu_10k_per_min_pct, charging_rows_per_s, charging_running_attempts); the
# windows, one a line, on stderr.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -ge 1 ]; then
    FG=$1
    case "$FG" in /*) ;; *) FG="$PWD/$FG" ;; esac
else
    (cd "$ROOT" && cmake --preset release >/dev/null &&
        cmake --build --preset release --target fairgpu >/dev/null) ||
        { echo "bench_charging: the release build failed" >&2; exit 2; }
    FG=$ROOT/build/release/fairgpu
fi
[ -x "$FG" ] || { echo "bench_charging: no binary at $FG" >&2; exit 2; }
for tool in curl jq python3; do
    command -v $tool >/dev/null || { echo "bench_charging: $tool is needed" >&2; exit 2; }
done
N=${FG_BENCH_JOBS:-1000}
W=${FG_BENCH_WINDOW:-30}
ROUNDS=${FG_BENCH_ROUNDS:-3}
SETTLE=${FG_BENCH_SETTLE:-8}
NODES=$(((N + 7) / 8))
HZ=$(getconf CLK_TCK)

TMP=$(mktemp -d "${TMPDIR:-/tmp}/fg_bench_charging.XXXXXX")
chmod 711 "$TMP"
mkdir -p "$TMP/data"
SERVER_PID=
AGENT_PID=
# cleanup: the agent (which stops its jobs), then the server, each by its PID.
cleanup() {
    if [ -n "$AGENT_PID" ]; then
        kill "$AGENT_PID" 2>/dev/null
        wait "$AGENT_PID" 2>/dev/null
    fi
    stop_server
    rm -rf "$TMP"
}
trap cleanup EXIT
trap "exit 143" INT TERM

# stop_server: SIGTERM to the server we started, and wait for it.
stop_server() {
    if [ -n "$SERVER_PID" ]; then
        kill "$SERVER_PID" 2>/dev/null
        wait "$SERVER_PID" 2>/dev/null
        SERVER_PID=
    fi
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# start_server INTERVAL: a server on $PORT (picked once, then kept: the agent reconnects
# to it) charging every INTERVAL; returns once it answers /healthz. No cap on connections
# per address: every fake node's connections come from 127.0.0.1.
start_server() {
    "$FG" server --data-dir "$TMP/data" --listen "127.0.0.1:$PORT" --rate-limit 0 \
        --max-pending-per-user 0 --max-connections-per-address 0 \
        --insecure-fast-password-hash --log-level warn --charge-interval "$1" ${FG_BENCH_SERVER_ARGS:-} >>"$TMP/server.log" 2>&1 &
    SERVER_PID=$!
    local _
    for _ in $(seq 1 200); do
        kill -0 "$SERVER_PID" 2>/dev/null || return 1
        curl -fs -o /dev/null "$URL/healthz" && return 0
        sleep 0.1
    done
    return 1
}
for _ in 1 2 3 4 5 6 7 8; do
    PORT=$((20000 + RANDOM % 40000))
    port_free "$PORT" || continue
    URL="http://127.0.0.1:$PORT"
    start_server 1h && break
    stop_server
done
[ -n "$SERVER_PID" ] ||
    { echo "bench_charging: the server did not start" >&2; tail -5 "$TMP/server.log" >&2; exit 1; }

post() {
    curl -s -X "${4:-POST}" "$URL$1" ${2:+-H "Authorization: Bearer $2"} \
        -H 'Content-Type: application/json' -d "$3"
}
post /v1/users "" "$(jq -cn --arg t "$(cat "$TMP/data/setup-token" 2>/dev/null)" \
    '{username: "root", email: "r@example.org", password: "root-password-1"} +
     (if $t == "" then {} else {setup_token: $t} end)')" >/dev/null
TOKEN=$(post /v1/sessions "" '{"username":"root","password":"root-password-1"}' | jq -r .token)
[ -n "$TOKEN" ] && [ "$TOKEN" != null ] ||
    { echo "bench_charging: cannot log in" >&2; tail -5 "$TMP/server.log" >&2; exit 1; }
# 1 micro per GPU-ms: every row carries a non-zero amount, as in production
post /v1/billing/prices "$TOKEN" '{"currency":"EUR","prices":[{"gpu_type":"H100",
    "priority":"normal","micros_per_gpu_hour":3600000}]}' PUT >/dev/null

# metric NAME: a value from /metrics (0 when absent)
metric() { curl -s "$URL/metrics" | awk -v k="$1" '$1 == k { v = $2 } END { print v ? v : 0 }'; }
# wait_until SECONDS CMD...: polls CMD every 0.5 s; fails when the time runs out.
wait_until() {
    local end=$((SECONDS + $1))
    shift
    while [ $SECONDS -le $end ]; do
        "$@" && return 0
        sleep 0.5
    done
    return 1
}
nodes_up() { [ "$(metric 'fairgpu_nodes{state="up"}')" = "$NODES" ]; }
all_running() { [ "$(metric 'fairgpu_jobs_by_state{state="RUNNING"}')" = "$N" ]; }

echo "* nobody" >"$TMP/usermap" # as root, jobs run as nobody
# shellcheck disable=SC2086
"$FG" agent --server "$URL" --token-file "$TMP/data/agent.token" --name bench \
    --fake-nodes "$NODES" --fake-gpus 8 --gpu-type H100 --work-dir "$TMP/w" \
    --user-map "$TMP/usermap" --stop-jobs-on-exit --log-level warn \
    ${FG_BENCH_AGENT_ARGS:---no-cgroups --allow-unisolated} >"$TMP/agent.log" 2>&1 &
AGENT_PID=$!
wait_until 60 nodes_up ||
    { echo "bench_charging: $NODES nodes did not come up" >&2; tail -5 "$TMP/agent.log" >&2; exit 1; }

# N one-GPU jobs that sleep for a day: one curl process, 8 parallel connections
for i in $(seq 1 "$N"); do
    [ "$i" -gt 1 ] && echo next
    printf 'url = "%s/v1/jobs"\nrequest = "POST"\nsilent\n' "$URL"
    printf 'header = "Authorization: Bearer %s"\nheader = "Content-Type: application/json"\n' "$TOKEN"
    printf 'data = "{\\"name\\":\\"run\\",\\"gpus\\":1,\\"command\\":[\\"sleep\\",\\"86401\\"],\\"time_limit_s\\":90000}"\n'
    printf 'output = "/dev/null"\nwrite-out = "%%{http_code}\\n"\n'
done >"$TMP/curl.cfg"
curl -s --no-progress-meter --parallel --parallel-max 8 -K "$TMP/curl.cfg" >"$TMP/codes"
ok=$(grep -c '^201$' "$TMP/codes")
[ "$ok" = "$N" ] || { echo "bench_charging: only $ok of $N submissions accepted" >&2; exit 1; }
T0=$SECONDS
# jobs_alive: the job processes (`sleep 86401`, a figure nothing else uses) alive now
jobs_alive() { pgrep -c -x -f 'sleep 86401'; }
all_alive() { [ "$(jobs_alive)" -ge "$N" ]; }
# (RUNNING is the controller's decision; the processes are the agent's start)
wait_until 300 all_running && wait_until 300 all_alive ||
    { echo "bench_charging: only $(metric 'fairgpu_jobs_by_state{state="RUNNING"}') of $N jobs run," \
        "$(jobs_alive) processes" >&2; exit 1; }
echo "bench_charging: $N jobs running on $NODES fake nodes after $((SECONDS - T0)) s" >&2

DB=$(ls "$TMP"/data/*.db | head -1)
# snap: "seconds cpu_ticks sched_ticks rows" now, taken together: the wall clock, the
# server's user + system CPU time (all threads), that of its scheduler thread (named
# fg-scheduler), and the ledger's rows (a read-only snapshot of the WAL database).
snap() {
    python3 - "$SERVER_PID" "$DB" <<'EOF'
import glob, sqlite3, sys, time
pid, db = sys.argv[1], sys.argv[2]
def ticks(stat):
    with open(stat) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return int(v[11]) + int(v[12])  # utime, stime (fields 14 and 15)
sched = 0
for t in glob.glob("/proc/%s/task/*" % pid):
    try:
        if open(t + "/comm").read().strip() == "fg-scheduler":
            sched = ticks(t + "/stat")
    except OSError:
        pass
cpu = ticks("/proc/%s/stat" % pid)
now = time.time()
c = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=10)
print("%.3f %d %d %d" % (now, cpu, sched, c.execute("SELECT COUNT(*) FROM ledger").fetchone()[0]))
EOF
}

# window NAME INTERVAL: restarts the server charging every INTERVAL, waits until the
# agent is back and the jobs run, then measures W seconds; appends
# "NAME cpu_ticks sched_ticks rows seconds" to $TMP/windows.
window() {
    stop_server
    start_server "$2" || { echo "bench_charging: the server did not restart" >&2; exit 1; }
    wait_until 60 nodes_up || { echo "bench_charging: the agent did not come back" >&2; exit 1; }
    wait_until 60 all_running || { echo "bench_charging: the jobs did not run again" >&2; exit 1; }
    sleep "$SETTLE"
    local t0 c0 s0 r0 t1 c1 s1 r1
    read -r t0 c0 s0 r0 < <(snap)
    sleep "$W"
    read -r t1 c1 s1 r1 < <(snap)
    local running
    running=$(metric 'fairgpu_jobs_by_state{state="RUNNING"}')
    [ "$running" = "$N" ] || { echo "bench_charging: $running of $N jobs run after window $1" >&2; exit 1; }
    local secs
    secs=$(awk -v a="$t1" -v b="$t0" 'BEGIN { printf "%.3f", a - b }')
    echo "$1 $((c1 - c0)) $((s1 - s0)) $((r1 - r0)) $secs" >>"$TMP/windows"
    awk -v hz="$HZ" -v n="$1" -v iv="$2" -v c=$((c1 - c0)) -v s=$((s1 - s0)) \
        -v r=$((r1 - r0)) -v t="$secs" 'BEGIN {
        printf "  window %s (interval %s): server CPU %.2f s (scheduler thread %.2f s) in %.1f s, %d ledger rows (%.0f/s)\n",
            n, iv, c / hz, s / hz, t, r, r / t }' >&2
}

: >"$TMP/windows"
for r in $(seq 1 "$ROUNDS"); do
    window "A$r" 1h
    window "B$r" 1s
done
echo "bench_charging: $(jobs_alive) sleep processes alive at the end" >&2
# a profile of the last B server (not counted in the figures), on stderr
if [ -n "${FG_BENCH_PERF:-}" ] && command -v perf >/dev/null; then
    perf record -q -F 499 -g -p "$SERVER_PID" -o "$TMP/perf.data" -- sleep "$W" >/dev/null 2>&1
    echo "profile of the server, interval 1s, $W s (perf): by thread, then by function" >&2
    perf report -q -i "$TMP/perf.data" --stdio --no-children --sort comm -g none 2>/dev/null |
        grep -v '^$' | head -8 >&2
    perf report -q -i "$TMP/perf.data" --stdio --no-children --sort sym -g none 2>/dev/null |
        grep -v '^$' | head -20 >&2
fi

# the figures: per pair (A_r, B_r), (cpu_B/t_B - cpu_A/t_A) * t_B / rows_B; medians
awk -v hz="$HZ" -v n="$N" '
    { k = substr($1, 2); kind = substr($1, 1, 1); cpu[kind, k] = $2 / hz; sch[kind, k] = $3 / hz
      rows[kind, k] = $4; secs[kind, k] = $5; if (k > nk) nk = k }
    function median(a, m,   i, j, t) {
        for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
    END {
        for (k = 1; k <= nk; k++) {
            extra = cpu["B", k] - cpu["A", k] / secs["A", k] * secs["B", k]
            sextra = sch["B", k] - sch["A", k] / secs["A", k] * secs["B", k]
            per[k] = rows["B", k] ? 1e6 * extra / rows["B", k] : 0
            sper[k] = rows["B", k] ? 1e6 * sextra / rows["B", k] : 0
            rps[k] = rows["B", k] / secs["B", k]
            arows += rows["A", k]
        }
        us = median(per, nk)
        printf "charging_cpu_per_attempt_us %.1f us\n", us
        printf "charging_cpu_10k_per_min_pct %.2f %%\n", us * 10000 / 60 / 1e6 * 100
        printf "charging_rows_per_s %.0f rows/s\n", median(rps, nk)
        printf "charging_running_attempts %d attempts\n", n
        printf "note: of which on the scheduler thread: %.1f us per attempt (median); rows in the A windows: %d\n",
            median(sper, nk), arows > "/dev/stderr"
    }' "$TMP/windows"
