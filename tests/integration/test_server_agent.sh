#!/usr/bin/env bash
# The server side of the agent protocol, end to end with two real fake-GPU agents:
# a job runs and its log is served (plain and followed as SSE); a 16-GPU job gang-starts
# on both nodes; cancelling a running job ends it only when the agent confirms; a high
# job preempts a low one (requeued with reason "preempted"); drain and resume; a node
# killed with -9 is declared down and its job requeued with reason "node_lost" and run
# on the other node; the restarted agent's stale rank is stopped by the reconcile.
set -euo pipefail
BIN=${1:?usage: test_server_agent.sh /path/to/fairgpu}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fg_test_server_agent.XXXXXX")
export FG_SETUP_TOKEN_FILE=$tmp/data/setup-token
server_pid=
declare -A agent_pid=()
cleanup() {
    for n in "${!agent_pid[@]}"; do kill "${agent_pid[$n]}" 2>/dev/null || true; done
    for n in "${!agent_pid[@]}"; do wait "${agent_pid[$n]}" 2>/dev/null || true; done
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port
"$BIN" server --data-dir "$tmp/data" --listen "127.0.0.1:$port" --insecure-fast-password-hash \
    --rate-limit 0 --heartbeat-interval 1 --heartbeat-misses 3 --retry-backoff 0 \
    >"$tmp/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 200); do
    curl -fsS "$url/healthz" >/dev/null 2>&1 && break
    sleep 0.05
done

# --no-cgroups (and --no-switch-user) leave jobs unisolated: these tests check the
# protocol, so they say --allow-unisolated (test_agent_isolation.sh checks isolation).
start_agent() { # name
    "$BIN" agent --server "$url" --token-file "$tmp/data/agent.token" --name "$1" --fake-gpus 8 \
        --gpu-type h100 --work-dir "$tmp/agent-$1" --no-switch-user --no-cgroups --allow-unisolated --grace 1 \
        --heartbeat 1 --poll-wait 5 >>"$tmp/agent-$1.log" 2>&1 &
    agent_pid[$1]=$!
}
start_agent n1
start_agent n2

python3 - "$url" "$tmp/ctl" >"$tmp/py.out" 2>&1 <<'PY' &
import json, sys, time, http.client, os
URL, CTL = sys.argv[1], sys.argv[2]
host, port = URL.split("//")[1].split(":")
def req(method, path, body=None, token=None):
    c = http.client.HTTPConnection(host, int(port), timeout=30)
    h = {"Content-Type": "application/json"}
    if token: h["Authorization"] = "Bearer " + token
    c.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    try:
        return r.status, json.loads(data)
    except ValueError:
        return r.status, data.decode()
fails = []
def check(c, what):
    if not c:
        fails.append(what); print("FAIL:", what, file=sys.stderr)
req("POST", "/v1/users", {"username": "root", "email": "r@x", "password": "root-password",
                          "setup_token": open(os.environ["FG_SETUP_TOKEN_FILE"]).read().strip()})
req("POST", "/v1/users", {"username": "alice", "email": "a@x", "password": "alice-password"})
TR = req("POST", "/v1/sessions", {"username": "root", "password": "root-password"})[1]["token"]
TA = req("POST", "/v1/sessions", {"username": "alice", "password": "alice-password"})[1]["token"]
def wait_for(pred, what, timeout=30):
    t = time.time() + timeout
    while time.time() < t:
        v = pred()
        if v: return v
        time.sleep(0.1)
    check(False, "timeout: " + what)
def job(i): return req("GET", "/v1/jobs/" + i, token=TA)[1]
def submit(**kw):
    st, j = req("POST", "/v1/jobs", kw, TA)
    check(st == 201, "submit %s: %s %s" % (kw.get("name"), st, j))
    return j["id"]
def ended(i):
    j = job(i)
    return j if j["state"] not in ("PENDING", "RUNNING") else None
wait_for(lambda: [n for n in req("GET", "/v1/nodes", token=TA)[1]["items"] if n["state"] == "up"].__len__() == 2, "two nodes up")
st, nodes = req("GET", "/v1/nodes", token=TA)
check(all(len(n["gpus"]) == 8 and n["gpus"][0]["uuid"] for n in nodes["items"]), "nodes list GPUs with UUIDs")

# 1. a job runs; its log is served
a = submit(name="hello", command="echo line1; echo line2 >&2; echo $CUDA_VISIBLE_DEVICES", gpus=2)
ja = wait_for(lambda: ended(a), "hello ends")
check(ja["state"] == "COMPLETED" and ja["exit_code"] == 0 and ja["attempts"] == 1, "hello completed: %s" % ja)
st, log = req("GET", "/v1/jobs/%s/logs" % a, token=TA)
lines = log.splitlines()
check(st == 200 and lines[:2] == ["line1", "line2"] and lines[2].count("GPU-") == 2, "log served: %r" % log)
st, tail = req("GET", "/v1/jobs/%s/logs?offset=6" % a, token=TA)
check(tail == log[6:], "log offset")
st, at = req("GET", "/v1/jobs/%s/attempts" % a, token=TA)
check(len(at["items"]) == 1 and len(at["items"][0]["gpu_uuids"]) == 2 and at["items"][0]["end_cause"] == "completed"
      and at["items"][0]["end_time_ms"] >= at["items"][0]["start_time_ms"], "attempt record: %s" % at)
# follow a running job's log
f = submit(name="follow", command="for i in 1 2 3; do echo tick$i; sleep 0.3; done", gpus=1)
c = http.client.HTTPConnection(host, int(port), timeout=30)
c.request("GET", "/v1/jobs/%s/logs?follow=1" % f, headers={"Authorization": "Bearer " + TA})
r = c.getresponse()
check(r.status == 200 and r.getheader("Content-Type") == "text/event-stream", "log follow is SSE")
got, ids, t_end = [], [], time.time() + 20
while time.time() < t_end:
    line = r.readline().decode()
    if not line: break
    if line.startswith("data: tick"): got.append(line[6:].strip())
    if line.startswith("id: "): ids.append(int(line[4:]))
    if line.startswith("event: end"): break
c.close()
check(got == ["tick1", "tick2", "tick3"], "followed log lines: %s" % got)
check(ids and ids == sorted(ids) and ids[-1] == len("tick1\ntick2\ntick3\n"), "SSE ids are byte offsets: %s" % ids)

# 2. a 16-GPU job gang-starts on both nodes
g = submit(name="gang", command="echo rank $FAIRGPU_NODE_RANK of $FAIRGPU_NUM_NODES", gpus=16)
jg = wait_for(lambda: ended(g), "gang ends")
check(jg["state"] == "COMPLETED" and sorted(jg["nodes"]) == ["n1", "n2"], "gang on two nodes: %s" % jg["nodes"])
st, glog = req("GET", "/v1/jobs/%s/logs" % g, token=TA)
check(sorted(glog.splitlines()) == ["[0] rank 0 of 2", "[1] rank 1 of 2"], "per-rank prefixed log: %r" % glog)

# 3. cancel a running job: CANCELLED only when the agent confirms
k = submit(name="cancel-me", command="sleep 60", gpus=1)
wait_for(lambda: job(k)["state"] == "RUNNING", "cancel-me runs")
st, jk = req("POST", "/v1/jobs/%s/cancel" % k, token=TA)
check(st == 200 and jk["cancel_requested"] is True, "cancel accepted: %s" % jk.get("state"))
jk = wait_for(lambda: ended(k), "cancel-me ends")
check(jk["state"] == "CANCELLED", "running job cancelled after confirmation: %s" % jk["state"])
# a job shows a state only once the change is committed, with its event (docs/api.md):
# the events read right after the state is seen must list it
def events(i): return req("GET", "/v1/jobs/%s/events" % i, token=TA)[1]["items"]
ev = events(k)
check([(e["from"], e["to"]) for e in ev] == [(None, "PENDING"), ("PENDING", "RUNNING"), ("RUNNING", "CANCELLED")], "cancel events: %s" % ev)
# the same, polled without a pause through a start and a cancel, ten times
def poll_until(i, want, secs=20):
    t_end = time.time() + secs
    while time.time() < t_end:
        j = job(i)
        if j["state"] == want:
            return j
    return None
unseen = []
for n in range(10):
    p = submit(name="poll-%d" % n, command="sleep 60", gpus=1)
    if not poll_until(p, "RUNNING"):
        unseen.append((p, "RUNNING never shown")); continue
    tos = [e["to"] for e in events(p)]
    if "RUNNING" not in tos: unseen.append((p, "RUNNING shown before its event: %s" % tos))
    req("POST", "/v1/jobs/%s/cancel" % p, token=TA)
    if not poll_until(p, "CANCELLED"):
        unseen.append((p, "CANCELLED never shown")); continue
    tos = [e["to"] for e in events(p)]
    if "CANCELLED" not in tos: unseen.append((p, "CANCELLED shown before its event: %s" % tos))
check(not unseen, "every state shown had its event committed: %s" % unseen)

# 4. a high job preempts a low one
low = submit(name="low", command="sleep 60", gpus=16, priority="low")
wait_for(lambda: job(low)["state"] == "RUNNING", "low runs")
high = submit(name="high", command="sleep 1", gpus=8, priority="high")
wait_for(lambda: job(high)["state"] == "RUNNING", "high runs", 20)
ev = events(low)
check(("RUNNING", "PENDING", "preempted") in [(e["from"], e["to"], e["reason"]) for e in ev], "low requeued as preempted: %s" % ev)
jl = job(low)
check(jl["state"] in ("PENDING", "RUNNING") and jl["attempts"] >= 1, "low back in the queue")
req("POST", "/v1/jobs/%s/cancel" % low, token=TA)
wait_for(lambda: ended(high), "high ends")
wait_for(lambda: ended(low), "low cancelled")

# 5. drain and resume
st, d = req("POST", "/v1/nodes/n2/drain", token=TA)
check(st == 403, "users cannot drain")
st, d = req("POST", "/v1/nodes/n2/drain", token=TR)
check(st == 200 and d["state"] in ("drained", "draining"), "drain: %s" % d)
x1 = submit(name="x1", command="sleep 2", gpus=8)
x2 = submit(name="x2", command="sleep 2", gpus=8)
wait_for(lambda: job(x1)["state"] == "RUNNING", "x1 runs")
time.sleep(1.5)
j2 = job(x2)
check(j2["state"] == "PENDING" and job(x1)["nodes"] == ["n1"], "drained node takes no job: %s" % j2["state"])
req("POST", "/v1/nodes/n2/resume", token=TR)
wait_for(lambda: job(x2)["state"] != "PENDING", "x2 starts after resume")
check(job(x2)["nodes"] == ["n2"], "x2 on the resumed node")
wait_for(lambda: ended(x1) and ended(x2), "x1 x2 end")

# 6. node loss: requeued with node_lost, runs on the other node
n = submit(name="survivor", command="sleep 3", gpus=8, max_retries=1)
jn = wait_for(lambda: job(n)["state"] == "RUNNING" and job(n), "survivor runs")
victim = jn["node"]
open(CTL, "w").write(victim)
# the shell kills that agent with -9 once this file exists
for _ in range(100):
    if not os.path.exists(CTL): break
    time.sleep(0.1)
wait_for(lambda: [x for x in req("GET", "/v1/nodes", token=TA)[1]["items"] if x["name"] == victim and x["state"] == "down"], "victim declared down", 20)
ev = wait_for(lambda: [e for e in req("GET", "/v1/jobs/%s/events" % n, token=TA)[1]["items"] if e["reason"] == "node_lost"], "node_lost event")
check(ev and ev[0]["from"] == "RUNNING" and ev[0]["to"] == "PENDING", "requeued as node_lost: %s" % ev)
jn = wait_for(lambda: ended(n), "survivor ends", 30)
check(jn["state"] == "COMPLETED" and jn["attempts"] == 2 and jn["node"] != victim and jn["retries_used"] == 1,
      "survivor completed on the other node: %s" % {k: jn[k] for k in ("state", "attempts", "node", "retries_used")})
open(CTL + ".done", "w").write(victim)
st, m = req("GET", "/metrics")
check("fairgpu_nodes{state=\"down\"} 1" in m, "metrics count the down node")
if fails:
    sys.exit("%d failures" % len(fails))
print("test_server_agent: python checks passed")
PY
py=$!
# The scenario asks for a node to die: kill -9 its agent (its job's monitor survives).
victim=
for _ in $(seq 1200); do
    if [ -s "$tmp/ctl" ]; then
        victim=$(cat "$tmp/ctl")
        kill -9 "${agent_pid[$victim]}"
        wait "${agent_pid[$victim]}" 2>/dev/null || true
        unset "agent_pid[$victim]"
        rm -f "$tmp/ctl"
        break
    fi
    kill -0 "$py" 2>/dev/null || break
    sleep 0.1
done
status=0
wait "$py" || status=$?
cat "$tmp/py.out"
if [ "$status" != 0 ]; then
    echo "--- server log" >&2; tail -30 "$tmp/server.log" >&2
    exit 1
fi
[ -n "$victim" ] || { echo "no node was killed" >&2; exit 1; }
# The agent comes back with the same work dir: it registers, and the reconcile stops the
# rank the controller no longer wants (its attempt was requeued); the node is up again.
start_agent "$victim"
for _ in $(seq 100); do
    st=$(curl -fsS -H "Authorization: Bearer $(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["token"])' <(curl -fsS -X POST "$url/v1/sessions" -d '{"username":"root","password":"root-password"}'))" "$url/v1/nodes" |
        python3 -c 'import json,sys; v=sys.argv[1]; print([n["state"] for n in json.load(sys.stdin)["items"] if n["name"]==v][0])' "$victim")
    [ "$st" = up ] && break
    sleep 0.2
done
[ "$st" = up ] || { echo "restarted node $victim is $st" >&2; exit 1; }
# SIGTERM: the server stops cleanly (exit 0; under ASan this includes no leaks).
kill -TERM "$server_pid"
wait "$server_pid" || { echo "server exited with $?" >&2; tail -20 "$tmp/server.log" >&2; exit 1; }
server_pid=
echo "test_server_agent: OK"
