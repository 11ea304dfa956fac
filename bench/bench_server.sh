#!/usr/bin/env bash
# Controller benchmark: durable job submissions per second and latency, GET job
# requests per second (from memory, ?why=0), and GETs of a pending job with its "why",
# over loopback with bench/loadgen.c (64 connections kept alive, one request in flight
# on each; one load generator thread: FG_BENCH_LG_THREADS).
#
#   bench/bench_server.sh [seconds]      (default 10 s per phase)
#
# Builds the release preset (build/release), starts its own server on a free port with
# a temporary data dir (rate limit and pending cap off, SQLite WAL synchronous=FULL as
# always), registers its own user, then runs the load generator. Only 201 answers count
# as durable submissions (fg_loadgen counts answers by status code): every one was
# committed and fsync'd before it was sent. Prints `name value unit` lines;
# server_cpu_per_submission is the server's CPU time (user + system, procfs) over the
# submission phase divided by its 201s: a figure other load on the machine inflates less
# than the rate.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
conns=${FG_BENCH_CONNS:-64}
lg_threads=${FG_BENCH_LG_THREADS:-1}
cmake --preset release >/dev/null
cmake --build --preset release --target fairgpu fg_loadgen >/dev/null
BIN=build/release/fairgpu
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fg_bench_server.XXXXXX")
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BIN" server --data-dir "$tmp/data" --listen "127.0.0.1:$port" --rate-limit 0 \
    --max-pending-per-user 0 --log-level warn ${FG_BENCH_SERVER_ARGS:---threads 2} >"$tmp/server.log" 2>&1 &
pid=$!
for _ in $(seq 200); do
    curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    sleep 0.05
done
url=http://127.0.0.1:$port
curl -fsS -X POST "$url/v1/users" -d '{"username":"bench","email":"b@x.org","password":"bench-password"}' >/dev/null
token=$(curl -fsS -X POST "$url/v1/sessions" -d '{"username":"bench","password":"bench-password"}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')

body='{"name":"bench","command":["python3","train.py","--lr","3e-4"],"gpus":1,"time_limit_s":3600,"model":"m","dataset":"d"}'
LG=build/release/bench/fg_loadgen
# lg_field FILE NAME: a value printed by fg_loadgen (0 when absent)
lg_field() { awk -v k="$2" '$1 == k { v = $2 } END { print v ? v : 0 }' "$1"; }

# server_cpu: the server's user + system CPU time so far, in clock ticks (procfs)
server_cpu() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
cpu0=$(server_cpu)
"$LG" -c "$conns" -t "$lg_threads" -d "$secs" -m POST -H "Content-Type: application/json" \
    -H "Authorization: Bearer $token" -b "$body" "127.0.0.1:$port" /v1/jobs >"$tmp/post.out"
cpu1=$(server_cpu)
cat "$tmp/post.out" >&2
created=$(lg_field "$tmp/post.out" status_201)
other=$(awk '$1 == "requests" { r = $2 } $1 == "status_201" { c = $2 } $1 == "errors" { e = $2 }
    END { print r - c + e }' "$tmp/post.out")
psecs=$(lg_field "$tmp/post.out" seconds)
p50=$(lg_field "$tmp/post.out" p50_ms)
p99=$(lg_field "$tmp/post.out" p99_ms)
pmax=$(lg_field "$tmp/post.out" max_ms)
# check: every 201 is a job the server has (count them through the API)
stored=$(curl -fsS "$url/metrics" | awk '/^fairgpu_submissions_total/ {print $2}')
# job 1 is pending (no agent): ?why=0 reads it from memory, as GET of a job in another
# state does; without it, its "why" is asked of the scheduler thread (a third phase)
"$LG" -c "$conns" -t "$lg_threads" -d "$secs" -H "Authorization: Bearer $token" \
    "127.0.0.1:$port" "/v1/jobs/1?why=0" >"$tmp/get.out"
cat "$tmp/get.out" >&2
gok=$(lg_field "$tmp/get.out" status_200)
gother=$(awk '$1 == "requests" { r = $2 } $1 == "status_200" { c = $2 } $1 == "errors" { e = $2 }
    END { print r - c + e }' "$tmp/get.out")
gsecs=$(lg_field "$tmp/get.out" seconds)
gp50=$(lg_field "$tmp/get.out" p50_ms)
gp99=$(lg_field "$tmp/get.out" p99_ms)
"$LG" -c "$conns" -t "$lg_threads" -d "$secs" -H "Authorization: Bearer $token" \
    "127.0.0.1:$port" /v1/jobs/1 >"$tmp/why.out"
cat "$tmp/why.out" >&2
wok=$(lg_field "$tmp/why.out" status_200)
wsecs=$(lg_field "$tmp/why.out" seconds)
wp50=$(lg_field "$tmp/why.out" p50_ms)
wp99=$(lg_field "$tmp/why.out" p99_ms)
commits=$(curl -fsS "$url/metrics" | awk '/^fairgpu_store_commits_total/ {print $2}')
maxbatch=$(curl -fsS "$url/metrics" | awk '/^fairgpu_store_max_batch/ {print $2}')
commit_s=$(curl -fsS "$url/metrics" | awk '/^fairgpu_store_commit_seconds_total/ {print $2}')
maxckpt=$(curl -fsS "$url/metrics" | awk '/^fairgpu_store_max_checkpoint_seconds/ {print $2}')
awk -v c="$created" -v s="$psecs" 'BEGIN { printf "server_durable_submissions_per_s %.0f jobs/s\n", c / s }'
echo "server_submit_latency_p50 $p50 ms"
echo "server_submit_latency_p99 $p99 ms"
echo "server_submit_latency_max $pmax ms"
echo "server_submit_non_201 $other responses"
awk -v c="$created" -v t="$((cpu1 - cpu0))" -v hz="$(getconf CLK_TCK)" \
    'BEGIN { if (c > 0) printf "server_cpu_per_submission %.1f us\n", 1e6 * t / hz / c }'
echo "server_submissions_acknowledged $created jobs"
echo "server_submissions_counted_by_server $stored jobs"
echo "server_store_commits $commits commits"
echo "server_store_max_batch $maxbatch units"
awk -v c="$commits" -v t="$commit_s" 'BEGIN { if (c > 0) printf "server_store_mean_commit_fsync %.3f ms\n", 1000 * t / c }'
awk -v t="$maxckpt" 'BEGIN { printf "server_store_max_checkpoint_pause %.3f ms\n", 1000 * t }'
echo "server_load_average $(cut -d' ' -f1 /proc/loadavg) (1 min, at the end)"
awk -v c="$gok" -v s="$gsecs" 'BEGIN { printf "server_get_job_per_s %.0f requests/s\n", c / s }'
echo "server_get_job_latency_p50 $gp50 ms"
echo "server_get_job_latency_p99 $gp99 ms"
echo "server_get_job_non_200 $gother responses"
awk -v c="$wok" -v s="$wsecs" 'BEGIN { if (s > 0) printf "server_get_pending_job_why_per_s %.0f requests/s\n", c / s }'
echo "server_get_pending_job_why_latency_p50 $wp50 ms"
echo "server_get_pending_job_why_latency_p99 $wp99 ms"
echo "server_connections $conns connections"
echo "server_load_generator_threads $lg_threads threads"
