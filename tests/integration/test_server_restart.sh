#!/usr/bin/env bash
# The controller's state survives restarts exactly:
#  1. a clean restart (SIGTERM) with a fake-GPU agent: jobs keep their ids, states,
#     attempts, exit codes and submit times; fair-share usage comes back exactly (the
#     stored value decayed by the half-life for the time in between); a job running
#     across the restart is adopted by the re-registering agent and completes without a
#     second start;
#  2. kill -9 under load (concurrent submitters): after the restart every acknowledged
#     (201) job is there with its content and its creation event, and nothing is
#     half-written.
set -euo pipefail
BIN=${1:?usage: test_server_restart.sh /path/to/fairgpu}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fg_test_server_restart.XXXXXX")
export FG_SETUP_TOKEN_FILE=$tmp/data/setup-token
server_pid=
agent_pid=
cleanup() {
    [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
    [ -n "$agent_pid" ] && wait "$agent_pid" 2>/dev/null
    [ -n "$server_pid" ] && wait "$server_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port

start_server() {
    "$BIN" server --data-dir "$tmp/data" --listen "127.0.0.1:$port" --insecure-fast-password-hash \
        --rate-limit 0 --max-pending-per-user 0 --half-life 600 --heartbeat-interval 1 \
        >>"$tmp/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 200); do
        curl -fsS "$url/healthz" >/dev/null 2>&1 && return 0
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.05
    done
    echo "server did not start" >&2
    cat "$tmp/server.log" >&2
    return 1
}

start_server
# --no-cgroups leaves jobs unisolated: this test checks restarts, so --allow-unisolated.
"$BIN" agent --server "$url" --token-file "$tmp/data/agent.token" --name n1 --fake-gpus 8 \
    --gpu-type h100 --work-dir "$tmp/agent" --no-switch-user --no-cgroups --allow-unisolated --grace 1 \
    --heartbeat 1 --poll-wait 5 >"$tmp/agent.log" 2>&1 &
agent_pid=$!

# Phase 1: some history, then a clean restart.
python3 - "$url" "$tmp/before.json" <<'PY'
import json, os, sys, time, urllib.request
URL, OUT = sys.argv[1], sys.argv[2]
def req(method, path, body=None, token=None):
    h = {"Content-Type": "application/json"}
    if token: h["Authorization"] = "Bearer " + token
    r = urllib.request.Request(URL + path, data=json.dumps(body).encode() if body is not None else None, headers=h, method=method)
    try:
        with urllib.request.urlopen(r, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")
for u in ("root", "alice", "bob"):
    setup = {"setup_token": open(os.environ["FG_SETUP_TOKEN_FILE"]).read().strip()} if u == "root" else {}
    req("POST", "/v1/users", dict({"username": u, "email": u + "@x.org", "password": u + "-password"}, **setup))
tok = {u: req("POST", "/v1/sessions", {"username": u, "password": u + "-password"})[1]["token"] for u in ("root", "alice", "bob")}
req("POST", "/v1/accounts", {"name": "nlp", "weight": 2}, tok["root"])
req("POST", "/v1/accounts/nlp/members", {"user": "alice"}, tok["root"])
for _ in range(100):
    st, n = req("GET", "/v1/nodes", token=tok["root"])
    if n["items"] and n["items"][0]["state"] == "up": break
    time.sleep(0.1)
else:
    sys.exit("agent did not register")
jobs = {}
st, jobs["a"] = req("POST", "/v1/jobs", {"name": "a", "command": "sleep 1", "gpus": 4, "account": "nlp"}, tok["alice"])
st, jobs["b"] = req("POST", "/v1/jobs", {"name": "b", "command": "sleep 1; exit 3", "gpus": 2}, tok["bob"])
st, jobs["big"] = req("POST", "/v1/jobs", {"name": "big", "command": "true", "gpus": 16}, tok["bob"])
st, jobs["c"] = req("POST", "/v1/jobs", {"name": "c", "command": "true", "gpus": 1, "gpu_type": "a100"}, tok["alice"])
req("POST", "/v1/jobs/%s/cancel" % jobs["c"]["id"], token=tok["alice"])
deadline = time.time() + 30
while time.time() < deadline:
    sa = req("GET", "/v1/jobs/" + jobs["a"]["id"], token=tok["alice"])[1]["state"]
    sb = req("GET", "/v1/jobs/" + jobs["b"]["id"], token=tok["bob"])[1]["state"]
    if sa == "COMPLETED" and sb == "FAILED": break
    time.sleep(0.2)
else:
    sys.exit("jobs did not end: %s %s" % (sa, sb))
# a job that runs across the restart
st, jobs["long"] = req("POST", "/v1/jobs", {"name": "long", "command": "sleep 4", "gpus": 1}, tok["alice"])
for _ in range(100):
    if req("GET", "/v1/jobs/" + jobs["long"]["id"], token=tok["alice"])[1]["state"] == "RUNNING": break
    time.sleep(0.1)
time.sleep(1.2)  # the fair-share view refreshes every second
st, fs = req("GET", "/v1/fairshare", token=tok["root"])
st, lst = req("GET", "/v1/jobs?limit=1000", token=tok["root"])
json.dump({"tok": tok, "jobs": jobs, "fs": fs, "list": lst["items"]}, open(OUT, "w"))
a_usage = [x for x in fs["accounts"] if x["name"] == "nlp"][0]["usage_gpu_seconds"]
if a_usage <= 0:
    sys.exit("no usage accrued for nlp: %s" % fs)
print("phase 1: %d jobs, nlp usage %.3f GPU-s" % (len(lst["items"]), a_usage))
PY

kill -TERM "$server_pid"
wait "$server_pid"
server_pid=
start_server

python3 - "$url" "$tmp/before.json" <<'PY'
import json, math, sys, time, urllib.request
URL = sys.argv[1]
before = json.load(open(sys.argv[2]))
tok = before["tok"]
def req(method, path, body=None, token=None):
    h = {"Content-Type": "application/json"}
    if token: h["Authorization"] = "Bearer " + token
    r = urllib.request.Request(URL + path, data=json.dumps(body).encode() if body is not None else None, headers=h, method=method)
    try:
        with urllib.request.urlopen(r, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")
fails = []
def check(c, what):
    if not c:
        fails.append(what); print("FAIL:", what, file=sys.stderr)
# sessions survive (they are in the store)
st, me = req("GET", "/v1/me", token=tok["alice"])
check(st == 200 and me["username"] == "alice" and "nlp" in me["accounts"], "session and membership survive: %s" % me)
st, lst = req("GET", "/v1/jobs?limit=1000", token=tok["root"])
after = {j["id"]: j for j in lst["items"]}
keys = ["name", "user", "account", "command", "gpus", "priority", "submit_time", "time_limit_s", "max_retries"]
for j in before["list"]:
    a = after.get(j["id"])
    check(a is not None, "job %s survives" % j["id"])
    if not a: continue
    for k in keys:
        check(a[k] == j[k], "job %s field %s: %r vs %r" % (j["id"], k, a[k], j[k]))
    if j["name"] != "long":
        for k in ("state", "attempts", "exit_code", "start_time", "end_time", "nodes", "gpu_indices"):
            check(a[k] == j[k], "job %s %s: %r vs %r" % (j["name"], k, a[k], j[k]))
jobs = before["jobs"]
check(after[jobs["b"]["id"]]["exit_code"] == 3, "exit code kept")
check(after[jobs["big"]["id"]]["state"] == "PENDING", "pending job still pending")
# fair share: the stored usage, decayed by the half-life (600 s) over the time in between
time.sleep(1.2)
st, fs = req("GET", "/v1/fairshare", token=tok["root"])
def usage(f, acct, user=None):
    a = [x for x in f["accounts"] if x["name"] == acct][0]
    if user is None: return a["usage_gpu_seconds"]
    return [u for u in a["users"] if u["name"] == user][0]["usage_gpu_seconds"]
dt = fs["as_of"] - before["fs"]["as_of"]
# the long job ran 1 GPU in between (it was adopted, so it kept accruing)
for acct, user in (("default", None), ("default", "bob")):
    u0, u1 = usage(before["fs"], acct, user), usage(fs, acct, user)
    want = u0 * math.pow(2, -dt / 600.0)
    if user == "bob":
        check(abs(u1 - want) <= 1e-9 * max(1.0, want), "usage %s/%s restored exactly: %r vs %r (dt %d)" % (acct, user, u1, want, dt))
u0, u1 = usage(before["fs"], "nlp"), usage(fs, "nlp")
want = u0 * math.pow(2, -dt / 600.0)
check(abs(u1 - want) <= 1e-9 * max(1.0, want), "nlp usage restored exactly: %r vs %r (dt %d)" % (u1, want, dt))
# the job that ran across the restart completes, once
deadline = time.time() + 30
while time.time() < deadline:
    st, lj = req("GET", "/v1/jobs/" + jobs["long"]["id"], token=tok["alice"])
    if lj["state"] not in ("PENDING", "RUNNING"): break
    time.sleep(0.2)
check(lj["state"] == "COMPLETED" and lj["attempts"] == 1, "adopted job completes without a second start: %s" % {k: lj[k] for k in ("state", "attempts", "reason")})
# the attempt's end is written by the same durable batch; a read may see the job's new
# state a moment before that batch is on disk, so give it a few seconds
deadline = time.time() + 10
while True:
    st, att = req("GET", "/v1/jobs/%s/attempts" % jobs["long"]["id"], token=tok["alice"])
    if time.time() > deadline or (att["items"] and att["items"][-1]["end_cause"] is not None):
        break
    time.sleep(0.2)
check(len(att["items"]) == 1 and att["items"][0]["end_cause"] == "completed", "one attempt: %s" % att)
# new ids continue after the old ones
st, nj = req("POST", "/v1/jobs", {"name": "new", "command": "true", "gpus": 1}, tok["bob"])
check(st == 201 and int(nj["id"]) > max(int(i) for i in after), "ids continue")
st, ev = req("GET", "/v1/events?since=0&limit=1000", token=tok["root"])
seqs = [e["seq"] for e in ev["items"]]
check(seqs == sorted(set(seqs)), "event seqs stay unique and increasing")
if fails:
    sys.exit("%d failures" % len(fails))
print("phase 1: restart kept jobs and fair share exactly")
PY

# Phase 2: kill -9 under load.
kill "$agent_pid" 2>/dev/null
wait "$agent_pid" 2>/dev/null || true
agent_pid=
load_and_signal() { # signal: submit from 16 threads, send the signal mid-load, then verify after a restart
python3 - "$url" "$tmp/acked.json" "$server_pid" "$1" <<'PY'
import json, os, signal, sys, threading, time, http.client
URL, OUT, PID, SIG = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
host, port = URL.split("//")[1].split(":")
port = int(port)
def req(c, method, path, body=None, token=None):
    h = {"Content-Type": "application/json"}
    if token: h["Authorization"] = "Bearer " + token
    c.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
    r = c.getresponse()
    return r.status, json.loads(r.read() or b"null")
c = http.client.HTTPConnection(host, port, timeout=10)
tok = req(c, "POST", "/v1/sessions", {"username": "bob", "password": "bob-password"})[1]["token"]
acked, lock, stop = [], threading.Lock(), threading.Event()
def worker(w):
    n = 0
    conn = http.client.HTTPConnection(host, port, timeout=10)
    while not stop.is_set():
        name = "load-%s-%d-%d" % (SIG, w, n)
        n += 1
        try:
            st, j = req(conn, "POST", "/v1/jobs", {"name": name, "command": ["echo", name], "gpus": 1, "env": {"K": name}}, tok)
        except Exception:
            break
        if st == 201:
            with lock:
                acked.append((j["id"], name))
threads = [threading.Thread(target=worker, args=(w,)) for w in range(16)]
for t in threads: t.start()
time.sleep(1.5)
os.kill(PID, getattr(signal, SIG))
time.sleep(0.3)
stop.set()
for t in threads: t.join(15)
json.dump({"tok": tok, "acked": acked, "sig": SIG}, open(OUT, "w"))
print("phase 2: %d submissions acknowledged before %s" % (len(acked), SIG))
if len(acked) < 50:
    sys.exit("too few submissions under load")
PY
server_status=0
wait "$server_pid" 2>/dev/null || server_status=$?
server_pid=
if [ "$1" = SIGTERM ] && [ "$server_status" != 0 ]; then
    echo "SIGTERM under load: the server exited with $server_status" >&2
    tail -20 "$tmp/server.log" >&2
    exit 1
fi
start_server
python3 - "$url" "$tmp/acked.json" <<'PY'
import json, sys, urllib.request
URL = sys.argv[1]
d = json.load(open(sys.argv[2]))
tok = d["tok"]
def get(path):
    r = urllib.request.Request(URL + path, headers={"Authorization": "Bearer " + tok})
    with urllib.request.urlopen(r, timeout=30) as resp:
        return json.loads(resp.read())
jobs, cursor = [], None
while True:
    page = get("/v1/jobs?user=bob&limit=1000" + ("&cursor=" + cursor if cursor else ""))
    jobs += page["items"]
    cursor = page["next_cursor"]
    if not cursor: break
by_id = {j["id"]: j for j in jobs}
missing = [i for i, name in d["acked"] if i not in by_id]
wrong = [i for i, name in d["acked"] if i in by_id and (by_id[i]["name"] != name or by_id[i]["command"] != ["echo", name] or by_id[i]["env"] != {"K": name})]
load = [j for j in jobs if j["name"].startswith("load-%s-" % d["sig"])]
names = [j["name"] for j in load]
dups = len(names) - len(set(names))
# (the first ones may have started on the node left from phase 1 before it was declared down)
states = ("PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")
half = [j["id"] for j in load if j["state"] not in states or j["command"] != ["echo", j["name"]] or j["env"] != {"K": j["name"]} or j["gpus"] != 1]
# every stored job has its creation event
noev = [j["id"] for j in load[:100] + load[-100:] if not get("/v1/jobs/%s/events" % j["id"])["items"]]
print("after the signal: %d acknowledged, %d stored load jobs, missing %d, wrong %d, duplicated %d, half-written %d, without event %d"
      % (len(d["acked"]), len(load), len(missing), len(wrong), dups, len(half), len(noev)))
if missing or wrong or dups or half or noev:
    sys.exit("durability violated: missing %s wrong %s half %s noev %s" % (missing[:5], wrong[:5], half[:5], noev[:5]))
if len(load) < len(d["acked"]):
    sys.exit("fewer stored jobs than acknowledged")
PY
}
load_and_signal SIGKILL
# SIGTERM under load: a clean stop (exit 0) that keeps every acknowledged job.
load_and_signal SIGTERM
curl -fsS "$url/healthz" >/dev/null
echo "test_server_restart: OK"
