#!/usr/bin/env bash
# bench_agent_gpu_check.sh - the real-GPU check of the node agent, as one prepared run:
# a controller and one agent using NVML (no --fake-gpus) on this machine, a short
# PyTorch training job submitted through the CLI, GPU utilization sampled from
# `fairgpu nodes` while it trains, then the job's state, attempts and log.
#
# usage: bash bench/bench_agent_gpu_check.sh /path/to/fairgpu [SECONDS_OF_TRAINING]
#   FG_CHECK_AGENT_ARGS="..." adds agent options (e.g. --no-switch-user).
# Needs: an NVIDIA GPU with libnvidia-ml.so.1, python3 with torch (CUDA) for the job,
# curl. Uses only the fairgpu CLI for JSON (no jq). Prints `name value unit` lines for
# the figures and the raw outputs around them. Exit status 0 when the job completed on a
# GPU that NVML found and utilization above 0 was reported while it trained.
set -uo pipefail

FG=${1:?usage: bench_agent_gpu_check.sh /path/to/fairgpu [SECONDS]}
SECS=${2:-30}
case "$FG" in /*) ;; *) FG="$PWD/$FG" ;; esac
# Not under /tmp: the job gets a private /tmp and reads its script from here.
TMP=$(mktemp -d "${FG_CHECK_TMPDIR:-/var/tmp}/fg_gpu_check.XXXXXX")
chmod 755 "$TMP" # the job's Unix account must read train.py
SERVER_PID=
AGENT_PID=
cleanup() {
    [ -n "$AGENT_PID" ] && kill "$AGENT_PID" 2>/dev/null && wait "$AGENT_PID" 2>/dev/null
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
say() { echo "== $*"; }

PORT=$((20000 + RANDOM % 40000))
URL="http://127.0.0.1:$PORT"
mkdir -p "$TMP/data"
"$FG" server --data-dir "$TMP/data" --listen "127.0.0.1:$PORT" --rate-limit 0 \
    --insecure-fast-password-hash >"$TMP/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do curl -sf "$URL/healthz" >/dev/null && break; sleep 0.1; done
curl -sf "$URL/healthz" >/dev/null || { say "server did not start"; cat "$TMP/server.log"; exit 1; }

export FAIRGPU_URL=$URL XDG_CONFIG_HOME=$TMP/cfg HOME=$TMP/home
mkdir -p "$HOME"
"$FG" register gpucheck --email gpucheck@example.org --password-stdin <<<'gpucheck-password-1' >/dev/null
"$FG" login gpucheck --password-stdin <<<'gpucheck-password-1' >/dev/null

say "agent (NVML)"
# As root the job runs as the mapped account fg-gpucheck; a python3 that lives under
# /root is out of its reach, so then the job keeps the agent's user (said here).
EXTRA=${FG_CHECK_AGENT_ARGS:-}
PY=$(command -v python3 || true)
if [ "$(id -u)" = 0 ] && [ -z "$EXTRA" ] && case "$(readlink -f "${PY:-/}")$PY" in /root/*) true ;; *) false ;; esac; then
    echo "note: python3 ($PY) is under /root: running the job as root (--no-switch-user)"
    EXTRA="--no-switch-user --allow-unisolated" # jobs run as root are not isolated
fi
# Where jobs cannot be isolated (no cgroups or namespaces in a container) the agent
# refuses to start; FG_ALLOW_UNISOLATED=1 runs the check anyway.
[ -n "${FG_ALLOW_UNISOLATED:-}" ] && EXTRA="$EXTRA --allow-unisolated"
# shellcheck disable=SC2086
"$FG" agent --server "$URL" --token-file "$TMP/data/agent.token" --name gpu0 \
    --work-dir "$TMP/work" --heartbeat 2 --stop-jobs-on-exit $EXTRA >"$TMP/agent.log" 2>&1 &
AGENT_PID=$!
for _ in $(seq 1 100); do
    "$FG" nodes --json 2>/dev/null | grep -q '"state": *"up"' && break
    kill -0 "$AGENT_PID" 2>/dev/null || break
    sleep 0.2
done
cat "$TMP/agent.log"
"$FG" nodes || { say "no node registered"; exit 1; }
NGPU=$("$FG" nodes --json | grep -c '"uuid": *"GPU-')
echo "agent_nvml_gpus $NGPU gpus"
[ "$NGPU" -ge 1 ] || { say "NVML found no GPU"; exit 1; }

cat >"$TMP/train.py" <<'PY'
import os, sys, time
print("CUDA_VISIBLE_DEVICES=" + os.environ.get("CUDA_VISIBLE_DEVICES", ""), flush=True)
print("FAIRGPU_JOB_ID=%s attempt=%s ckpt=%s" % (os.environ.get("FAIRGPU_JOB_ID"),
      os.environ.get("FAIRGPU_ATTEMPT"), os.environ.get("FAIRGPU_CHECKPOINT_DIR")), flush=True)
import torch
assert torch.cuda.is_available(), "torch sees no CUDA device"
dev = torch.device("cuda:0")
print("device:", torch.cuda.get_device_name(0), "count:", torch.cuda.device_count(), flush=True)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
                            torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
                            torch.nn.Linear(4096, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(2048, 4096, device=dev)
y = torch.randint(0, 10, (2048,), device=dev)
end = time.time() + float(sys.argv[1])
step = 0
while time.time() < end:
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    step += 1
    if step % 200 == 0:
        torch.cuda.synchronize()
        print("step %d loss %.4f" % (step, loss.item()), flush=True)
torch.cuda.synchronize()
ckpt = os.path.join(os.environ["FAIRGPU_CHECKPOINT_DIR"], "model.pt")
torch.save(model.state_dict(), ckpt)
print("done: %d steps, final loss %.4f, checkpoint %s" % (step, loss.item(), ckpt), flush=True)
PY
chmod 644 "$TMP/train.py"

say "submit"
# The job's PATH is fixed (/usr/local/bin:/usr/bin:/bin): name this python3 by its path.
JOB=$("$FG" submit --json --gpus 1 --time 10m --name gpu-check --model mlp --dataset random \
    -- "${PY:-python3}" "$TMP/train.py" "$SECS" | sed -n 's/^ *"id": *"\([^"]*\)".*/\1/p' | head -1)
echo "job $JOB"
state() { "$FG" show "$JOB" --json | sed -n 's/^ *"state": *"\([A-Z]*\)".*/\1/p' | head -1; }
MAXUTIL=0
T0=$(date +%s)
while :; do
    s=$(state)
    u=$("$FG" nodes --json | sed -n 's/^ *"util_pct": *\([0-9][0-9]*\).*/\1/p' | sort -n | tail -1)
    [ -n "$u" ] && [ "$u" -gt "$MAXUTIL" ] && MAXUTIL=$u
    echo "t=$(($(date +%s) - T0))s state=$s max_util_pct_now=${u:-null}"
    case "$s" in COMPLETED | FAILED | CANCELLED | TIMEOUT) break ;; esac
    [ $(($(date +%s) - T0)) -gt $((SECS + 300)) ] && { say "timed out"; break; }
    sleep 2
done
say "job"
"$FG" show "$JOB"
say "log"
"$FG" logs "$JOB"
say "nodes"
"$FG" nodes
say "agent log (tail)"
tail -20 "$TMP/agent.log"
echo "agent_gpu_check_job_state $(state) state"
echo "agent_gpu_check_max_util $MAXUTIL pct"
[ "$(state)" = COMPLETED ] && [ "$MAXUTIL" -gt 0 ]
