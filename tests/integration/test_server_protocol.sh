#!/usr/bin/env bash
# The agent protocol driven by hand (docs/agent-protocol.md), against a real server:
# registration and its validation, heartbeat fencing (unknown node 404, wrong instance or
# epoch 409), the assignments long-poll (held, woken by a start within milliseconds,
# acknowledged by `after`), started/exited fencing (wrong epoch, wrong attempt, wrong node,
# twice: 409; unknown job: 404), offset-idempotent logs (append, duplicate, gap -> 409 with
# the stored length), a reconcile that stops a rank the controller does not know, and
# batched reports (one stale entry refused alone, the others applied, a retry not applied
# twice, malformed entries answered per entry, a malformed batch refused whole).
set -euo pipefail
BIN=${1:?usage: test_server_protocol.sh /path/to/fairgpu}
source "$(dirname "$0")/lib_server.sh"
server_start test_server_protocol "$BIN" --insecure-fast-password-hash \
    --rate-limit 0 --heartbeat-interval 2 --heartbeat-misses 3
python3 - "$port" "$tmp/data/agent.token" <<'PY'
import base64, json, os, sys, threading, time, http.client
PORT = int(sys.argv[1])
AGENT = open(sys.argv[2]).read().strip()
fails = []
def check(c, what):
    if not c:
        fails.append(what); print("FAIL:", what, file=sys.stderr)
def req(method, path, body=None, token="AGENT"):
    if token == "AGENT":
        token = AGENT  # the node credential (once t1 has joined)
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    h = {"Content-Type": "application/json"}
    if token: h["Authorization"] = "Bearer " + token
    c.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
    r = c.getresponse()
    d = r.read()
    c.close()
    return r.status, (json.loads(d) if d else None)
req("POST", "/v1/users", {"username": "alice", "email": "a@x", "password": "alice-password",
                          "setup_token": open(os.environ["FG_SETUP_TOKEN_FILE"]).read().strip()}, None)
TA = req("POST", "/v1/sessions", {"username": "alice", "password": "alice-password"}, None)[1]["token"]
# the cluster token only joins a new node; t1 acts with the credential it gets
CLUSTER = AGENT
st, b = req("POST", "/v1/agent/join", {"node": "t1"}, CLUSTER)
check(st == 201 and b["token"].startswith("fgn_"), "t1 joins with the cluster token: %s" % st)
AGENT = b["token"]
check(req("POST", "/v1/agent/join", {"node": "t1"}, CLUSTER)[0] == 409, "t1 cannot join twice: 409")
gpus = [{"index": i, "uuid": "GPU-t-%d" % i, "type": "h100", "memory_mb": 81559} for i in range(4)]
reg = {"node": "t1", "instance": "aaaa", "addr": "127.0.0.1", "cpus": 16, "memory_mb": 64000,
       "gpu_type": "h100", "gpus": gpus, "running": []}
# registration validation
st, b = req("POST", "/v1/agent/register", dict(reg, gpus=[]))
check(st == 400 and b["error"]["field"] == "gpus", "register without GPUs: %s %s" % (st, b))
st, b = req("POST", "/v1/agent/register", dict(reg, node="bad name"))
check(st == 400 and b["error"]["field"] == "node", "bad node name")
st, b = req("POST", "/v1/agent/register", reg, token=TA)
check(st == 401, "user token refused on agent routes")
st, r = req("POST", "/v1/agent/register", reg)
check(st == 200 and r["node_state"] == "up" and r["epoch"] >= 1 and r["stop"] == [] and "after" in r, "register: %s" % r)
epoch, after = r["epoch"], r["after"]
# heartbeat fencing
hb = {"node": "t1", "instance": "aaaa", "epoch": epoch, "time_ms": int(time.time() * 1000),
      "gpus": [{"index": 0, "util_pct": 97, "mem_used_mb": 1234, "memory_mb": 81559}], "running": []}
st, b = req("POST", "/v1/agent/heartbeat", hb)
check(st == 200 and b["epoch"] == epoch, "heartbeat")
check(req("POST", "/v1/agent/heartbeat", dict(hb, node="zz"))[0] == 403, "heartbeat as another node: 403")
check(req("POST", "/v1/agent/heartbeat", hb, CLUSTER)[0] == 401, "heartbeat with the cluster token: 401")
check(req("POST", "/v1/agent/heartbeat", dict(hb, instance="bbbb"))[0] == 409, "heartbeat of another instance: 409")
check(req("POST", "/v1/agent/heartbeat", dict(hb, epoch=epoch + 7))[0] == 409, "heartbeat with another epoch: 409")
st, nodes = req("GET", "/v1/nodes", token=TA)
g0 = nodes["items"][0]["gpus"][0]
check(g0["util_pct"] == 97 and g0["mem_used_mb"] == 1234 and g0["uuid"] == "GPU-t-0", "samples shown: %s" % g0)
# the long-poll: held, then woken by a start
res = {}
def poll():
    t = time.time()
    res["r"] = req("GET", "/v1/agent/assignments?node=t1&instance=aaaa&after=%d&wait=20" % after)
    res["dt"] = time.time() - t
th = threading.Thread(target=poll)
th.start()
time.sleep(0.5)
st, job = req("POST", "/v1/jobs", {"name": "p", "command": ["echo", "hi"], "gpus": 2, "env": {"X": "1"}, "model": "m"}, TA)
t_submit = time.time()
th.join(25)
st, msgs = res["r"]
check(st == 200 and len(msgs["messages"]) == 1, "long-poll answered with the start: %s" % msgs)
check(res["dt"] < 5, "woken at once (%.2fs held)" % res["dt"])
m = msgs["messages"][0]
check(m["type"] == "start" and m["job_id"] == job["id"] and m["attempt"] == 1 and m["epoch"] == epoch and m["rank"] == 0
      and m["num_nodes"] == 1 and m["gpus"] == [0, 1] and m["gpu_uuids"] == ["GPU-t-0", "GPU-t-1"]
      and m["command"] == ["echo", "hi"] and m["env"] == {"X": "1"} and m["user"] == "alice" and m["model"] == "m"
      and 29500 <= m["master_port"] <= 29999, "start message: %s" % m)
st, again = req("GET", "/v1/agent/assignments?node=t1&instance=aaaa&after=%d&wait=0" % after)
check([x["seq"] for x in again["messages"]] == [m["seq"]], "unacknowledged message delivered again")
st, acked = req("GET", "/v1/agent/assignments?node=t1&instance=aaaa&after=%d&wait=1" % m["seq"])
check(st == 200 and acked["messages"] == [], "acknowledged by after")
check(req("GET", "/v1/agent/assignments?node=t1&instance=zzzz&after=0&wait=0")[0] == 409, "long-poll of another instance: 409")
ids = {"node": "t1", "job_id": job["id"], "attempt": 1, "epoch": epoch, "rank": 0}
# started: fencing
check(req("POST", "/v1/agent/started", dict(ids, epoch=epoch + 1))[0] == 409, "started with a wrong epoch: 409")
check(req("POST", "/v1/agent/started", dict(ids, attempt=2))[0] == 409, "started of another attempt: 409")
check(req("POST", "/v1/agent/started", dict(ids, node="t9"))[0] == 403, "started as another node: 403")
check(req("POST", "/v1/agent/started", dict(ids, job_id="999999"))[0] == 404, "started of an unknown job: 404")
st, b = req("POST", "/v1/agent/started", dict(ids, pid=123, start_time_ms=int(time.time() * 1000)))
check(st == 200, "started accepted: %s %s" % (st, b))
st, j = req("GET", "/v1/jobs/" + job["id"], token=TA)
check(j["state"] == "RUNNING" and j["nodes"] == ["t1"] and j["gpu_indices"] == [0, 1], "running on t1: %s" % j["state"])
# logs: offset-idempotent
def chunk(off, data):
    return req("POST", "/v1/agent/logs", dict(ids, offset=off, data_b64=base64.b64encode(data).decode()))
st, b = chunk(0, b"hello\n")
check(st == 200 and b["length"] == 6, "first chunk: %s" % b)
st, b = chunk(0, b"hello\n")
check(st == 200 and b["length"] == 6, "duplicate chunk appends nothing")
st, b = chunk(10, b"gap\n")
check(st == 409 and b["length"] == 6 and b["error"]["code"] == "conflict", "gap refused with the length: %s" % b)
st, b = chunk(6, b"world\n")
check(st == 200 and b["length"] == 12, "next chunk")
st, b = req("POST", "/v1/agent/logs", dict(ids, offset=12, data_b64="***"))
check(st == 400 and b["error"]["field"] == "data_b64", "bad base64")
c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
c.request("GET", "/v1/jobs/%s/logs" % job["id"], headers={"Authorization": "Bearer " + TA})
r = c.getresponse()
check(r.read() == b"hello\nworld\n", "log assembled")
# exited: fencing, then accepted once
ex = dict(ids, exit_code=0, signal=None, end_cause="completed", start_time_ms=0, end_time_ms=int(time.time() * 1000), log_bytes=12)
check(req("POST", "/v1/agent/exited", dict(ex, epoch=epoch - 1))[0] == 409, "exited with an old epoch: 409")
check(req("POST", "/v1/agent/exited", dict(ex, end_cause="exploded"))[0] == 400, "unknown end_cause: 400")
st, b = req("POST", "/v1/agent/exited", ex)
check(st == 200, "exited accepted: %s %s" % (st, b))
check(req("POST", "/v1/agent/exited", ex)[0] == 409, "exited twice: 409")
st, j = req("GET", "/v1/jobs/" + job["id"], token=TA)
check(j["state"] == "COMPLETED" and j["exit_code"] == 0, "completed: %s" % j["state"])
check(req("POST", "/v1/agent/started", ids)[0] == 409, "started after the end: 409")
# a cancel reaches the agent as a stop
st, j2 = req("POST", "/v1/jobs", {"name": "q", "command": "sleep 100", "gpus": 1}, TA)
st, msgs = req("GET", "/v1/agent/assignments?node=t1&instance=aaaa&after=%d&wait=10" % m["seq"])
start2 = [x for x in msgs["messages"] if x["type"] == "start"][0]
req("POST", "/v1/jobs/%s/cancel" % j2["id"], token=TA)
st, msgs = req("GET", "/v1/agent/assignments?node=t1&instance=aaaa&after=%d&wait=10" % start2["seq"])
stop = msgs["messages"][0] if msgs["messages"] else {}
check(stop.get("type") == "stop" and stop.get("why") == "cancel" and stop.get("job_id") == j2["id"], "cancel sends stop: %s" % msgs)
# re-register (agent restart): the cancelled rank is stopped, a rank the controller never
# assigned is stale, and nothing is adopted that should not be
running = [{"job_id": j2["id"], "attempt": 1, "epoch": epoch, "rank": 0, "exited": False},
           {"job_id": "424242", "attempt": 3, "epoch": epoch, "rank": 0, "exited": False}]
st, r2 = req("POST", "/v1/agent/register", dict(reg, instance="cccc", running=running))
whys = {(x["job_id"], x["why"]) for x in r2["stop"]}
check(whys == {(j2["id"], "cancel"), ("424242", "stale")}, "reconcile stops: %s" % r2["stop"])
ex2 = {"node": "t1", "job_id": j2["id"], "attempt": 1, "epoch": epoch, "rank": 0, "exit_code": None, "signal": 15,
       "end_cause": "cancelled", "end_time_ms": int(time.time() * 1000), "log_bytes": 0}
st, b = req("POST", "/v1/agent/exited", ex2)
check(st == 200, "cancelled exit accepted: %s" % b)
st, j = req("GET", "/v1/jobs/" + j2["id"], token=TA)
check(j["state"] == "CANCELLED", "CANCELLED after the agent confirmed: %s" % j["state"])
st, at = req("GET", "/v1/jobs/%s/attempts" % j2["id"], token=TA)
check(at["items"][0]["signal"] == 15 and at["items"][0]["end_cause"] == "cancelled", "attempt keeps the signal: %s" % at)
# a re-registration that omits a running rank (one the agent acknowledged with
# started) loses it (node_lost, requeued or failed)
st, j3 = req("POST", "/v1/jobs", {"name": "r", "command": "sleep 100", "gpus": 1, "max_retries": 1}, TA)
for _ in range(100):
    if req("GET", "/v1/jobs/" + j3["id"], token=TA)[1]["state"] == "RUNNING": break
    time.sleep(0.05)
st, b = req("POST", "/v1/agent/started", {"node": "t1", "job_id": j3["id"], "attempt": 1, "epoch": epoch, "rank": 0})
check(st == 200, "started of the rank to lose: %s %s" % (st, b))
st, r3 = req("POST", "/v1/agent/register", dict(reg, instance="dddd", running=[]))
st, j = req("GET", "/v1/jobs/%s/events" % j3["id"], token=TA)
check(("RUNNING", "PENDING", "node_lost") in [(e["from"], e["to"], e["reason"]) for e in j["items"]], "omitted rank lost: %s" % j)
# several reports in one request (POST /v1/agent/reports): each entry fenced alone
check(r3.get("batch_reports") is True, "register advertises batch_reports: %s" % r3)
st, j4 = req("POST", "/v1/jobs", {"name": "b4", "command": "sleep 100", "gpus": 1}, TA)
st, j5 = req("POST", "/v1/jobs", {"name": "b5", "command": "sleep 100", "gpus": 1}, TA)
starts, pos = {}, r3["after"]
for _ in range(50):
    st, msgs = req("GET", "/v1/agent/assignments?node=t1&instance=dddd&after=%d&wait=2" % pos)
    for x in msgs["messages"]:
        pos = max(pos, x["seq"])
        if x["type"] == "start":
            starts[x["job_id"]] = x
    if j4["id"] in starts and j5["id"] in starts: break
check(j4["id"] in starts and j5["id"] in starts, "both batch jobs started: %s" % list(starts))
def ident(j):
    s_ = starts[j["id"]]
    return {"node": "t1", "job_id": j["id"], "attempt": s_["attempt"], "epoch": s_["epoch"], "rank": 0}
now = int(time.time() * 1000)
ex4 = dict(ident(j4), type="exited", exit_code=3, signal=None, end_cause="failed", start_time_ms=now - 5, end_time_ms=now, log_bytes=0)
stale5 = dict(ident(j5), type="exited", exit_code=0, signal=None, end_cause="completed", end_time_ms=now, log_bytes=0)
stale5["epoch"] -= 1
# (earlier than the placement, so it becomes the attempt's start)
st5 = dict(ident(j5), type="started", pid=77, start_time_ms=now - 60000)
batch = [ex4, stale5, st5, dict(ex4, job_id="999999"), dict(ex4, end_cause="exploded"), {"type": "other"}, 5]
st, b = req("POST", "/v1/agent/reports", {"node": "t1", "reports": batch})
codes = [x["status"] for x in b["results"]] if st == 200 else []
check(codes == [200, 409, 200, 404, 400, 400, 400], "batch results: %s %s" % (st, b))
check(st == 200 and b["results"][1]["error"]["code"] == "conflict" and "stale" in b["results"][1]["error"]["message"], "stale entry refused: %s" % b)
check(st == 200 and b["results"][4]["error"]["field"] == "end_cause" and b["results"][5]["error"]["field"] == "type", "bad entries name their field: %s" % b)
st, j = req("GET", "/v1/jobs/" + j4["id"], token=TA)
check(j["state"] == "FAILED" and j["exit_code"] == 3, "batch exit applied: %s" % j["state"])
st, j = req("GET", "/v1/jobs/" + j5["id"], token=TA)
check(j["state"] == "RUNNING", "stale entry changed nothing: %s" % j["state"])
st, at = req("GET", "/v1/jobs/%s/attempts" % j5["id"], token=TA)
check(at["items"][0]["start_time_ms"] == now - 60000, "batch started applied: %s" % at)
# a retried batch: the recorded exit is refused as already recorded, not applied twice
st, b = req("POST", "/v1/agent/reports", {"node": "t1", "reports": [ex4, dict(ident(j5), type="exited", exit_code=0, signal=None, end_cause="completed", end_time_ms=now, log_bytes=0)]})
check(st == 200 and [x["status"] for x in b["results"]] == [409, 200], "retried batch: %s" % b)
st, j = req("GET", "/v1/jobs/" + j5["id"], token=TA)
check(j["state"] == "COMPLETED", "second batch completed j5: %s" % j["state"])
st, ev = req("GET", "/v1/jobs/%s/events" % j4["id"], token=TA)
check(sum(1 for e in ev["items"] if e["to"] == "FAILED") == 1, "one end event for j4: %s" % ev)
for bad in ({"node": "t1"}, {"node": "t1", "reports": []}, {"node": "t1", "reports": [ex4] * 257}, {"node": "t1", "reports": {}}):
    st, b = req("POST", "/v1/agent/reports", bad)
    check(st == 400 and b["error"]["field"] == "reports", "bad batch refused whole: %s %s" % (st, b))
check(req("POST", "/v1/agent/reports", {"reports": [ex4]}, token=TA)[0] == 401, "user token refused on reports")
if fails:
    sys.exit("%d failures" % len(fails))
print("test_server_protocol: all checks passed")
PY
# SIGTERM: the server stops cleanly (exit 0; under ASan this includes no leaks).
server_stop test_server_protocol 20
echo "test_server_protocol: OK"
