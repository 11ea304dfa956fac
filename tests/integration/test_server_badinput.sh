#!/usr/bin/env bash
# Bad input never crashes the server and never gets a 5xx: a few thousand random and
# mutated requests (random JSON of every type for the known fields, deep nesting,
# invalid UTF-8, NUL bytes, huge numbers, random paths, methods and query strings) to
# every route, as admin, as a user, anonymous and with the agent token. The server must
# answer each with a 2xx/4xx, stay healthy, and stop cleanly (exit 0; under ASan that
# includes no leak and no memory error).
set -euo pipefail
BIN=${1:?usage: test_server_badinput.sh /path/to/fairgpu}
source "$(dirname "$0")/lib_server.sh"
server_start test_server_badinput "$BIN" --insecure-fast-password-hash --rate-limit 0
python3 - "$port" "$tmp/data/agent.token" "${FG_BADINPUT_N:-1500}" <<'PY'
import json, os, random, sys, http.client
PORT, AGENT, N = int(sys.argv[1]), open(sys.argv[2]).read().strip(), int(sys.argv[3])
rnd = random.Random(20261129)
def req(method, path, body=None, token=None, raw=None):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    h = {"Content-Type": "application/json"}
    if token: h["Authorization"] = "Bearer " + token
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    d = r.read()
    c.close()
    return r.status, d
st, _ = req("POST", "/v1/users", {"username": "root", "email": "r@x", "password": "root-password",
                                  "setup_token": open(os.environ["FG_SETUP_TOKEN_FILE"]).read().strip()})
st, _ = req("POST", "/v1/users", {"username": "alice", "email": "a@x", "password": "alice-password"})
TR = json.loads(req("POST", "/v1/sessions", {"username": "root", "password": "root-password"})[1])["token"]
TA = json.loads(req("POST", "/v1/sessions", {"username": "alice", "password": "alice-password"})[1])["token"]
# the cluster token joins node t1; t1's own credential drives the agent routes
AGENT = json.loads(req("POST", "/v1/agent/join", {"node": "t1"}, AGENT)[1])["token"]
st, j = req("POST", "/v1/jobs", {"name": "x", "command": ["true"], "gpus": 1}, TA)
JOB = json.loads(j)["id"]

FIELDS = ["name", "command", "gpus", "gpu_type", "model", "dataset", "time_limit_s", "priority", "max_retries",
          "env", "account", "cpus", "memory_mb", "username", "email", "password", "current_password", "display_name",
          "role", "weight", "disabled", "gpu_quota", "budget_micros", "allowed_priorities", "user", "node", "instance",
          "gpus", "running", "job_id", "attempt", "epoch", "rank", "offset", "data_b64", "end_cause", "exit_code",
          "signal", "start_time_ms", "end_time_ms", "log_bytes", "time_ms", "addr", "cpus"]
def rvalue(depth=0):
    k = rnd.randrange(12 if depth < 3 else 7)
    if k == 0: return None
    if k == 1: return rnd.choice([True, False])
    if k == 2: return rnd.choice([0, -1, 1, 8, 9, 12, 16, 2**31, -2**31, 2**63 - 1, -2**63, 10**30])
    if k == 3: return rnd.choice([0.5, -1e308, 1e308, 3.0])
    if k == 4: return rnd.choice(["", "a", "normal", "high", "low", "h100", "x" * 300, "é\u2603", "\ud7ff", "default", "completed"])
    if k == 5: return "".join(rnd.choice("abc-_./\\\"'{}[]%\n\t ") for _ in range(rnd.randrange(20)))
    if k == 6: return str(rnd.randrange(-5, 10**6))
    if k in (7, 8): return [rvalue(depth + 1) for _ in range(rnd.randrange(5))]
    return {rnd.choice(FIELDS): rvalue(depth + 1) for _ in range(rnd.randrange(6))}
def rbody():
    k = rnd.randrange(10)
    if k == 0:
        return None, bytes(rnd.randrange(256) for _ in range(rnd.randrange(200)))
    if k == 1:
        return None, b"[" * rnd.randrange(1, 5000) + b"]" * rnd.randrange(5000)
    if k == 2:
        return None, b'{"name": "\xff\xfe", "gpus": 1, "command": ["true"]}'
    if k == 3:
        return None, b'{"command": ["a\\u0000b"], "gpus": 1}'
    if k == 4:
        return None, json.dumps({f: rvalue() for f in rnd.sample(FIELDS, 5)}).encode()[: rnd.randrange(1, 200)]
    return {f: rvalue() for f in rnd.sample(FIELDS, rnd.randrange(1, 12))}, None
ROUTES = [("POST", "/v1/jobs"), ("POST", "/v1/users"), ("POST", "/v1/sessions"), ("PATCH", "/v1/me"),
          ("PATCH", "/v1/users/2"), ("POST", "/v1/accounts"), ("PATCH", "/v1/accounts/default"),
          ("POST", "/v1/accounts/default/members"), ("POST", "/v1/tokens"), ("POST", "/v1/jobs/%s/cancel" % JOB),
          ("POST", "/v1/agent/register"), ("POST", "/v1/agent/heartbeat"), ("POST", "/v1/agent/started"),
          ("POST", "/v1/agent/logs"), ("POST", "/v1/agent/exited"), ("PUT", "/v1/billing/prices"),
          ("POST", "/v1/nodes/x/drain")]
GETS = ["/v1/jobs?limit=%s", "/v1/jobs?cursor=%s", "/v1/jobs?state=%s", "/v1/jobs/%s", "/v1/jobs/%s/logs?offset=-1",
        "/v1/events?since=%s", "/v1/events?wait=%s&since=999999999", "/v1/agent/assignments?node=%s&after=x",
        "/v1/users?cursor=%s", "/v1/audit?limit=%s", "/v1/jobs/%s/events", "/v1/accounts/%s", "/%s", "/v1/%s/%s"]
bad = []
for i in range(N):
    tok = rnd.choice([TR, TA, None, AGENT, "garbage"])
    if rnd.random() < 0.75:
        method, path = rnd.choice(ROUTES)
        body, raw = rbody()
        st, d = req(method, path, body, tok, raw)
    else:
        g = rnd.choice(GETS)
        args = tuple(rnd.choice(["0", "-1", "abc", "99999999999999999999", "%00", "c0000000000000001", "..%2f", "1,2", "PENDING", "x" * 300])
                     for _ in range(g.count("%s")))
        path = g % args
        st, d = req(rnd.choice(["GET", "GET", "DELETE", "HEAD", "OPTIONS"]), path, None, tok)
    if st >= 500 and not (st == 501 and "billing" in path) and not (st == 503 and b"shutting" in d):
        bad.append((st, path, d[:200]))
    if 400 <= st < 500 and st not in (405,) and d:
        try:
            e = json.loads(d)["error"]
            assert set(e) <= {"code", "message", "field"} and e["code"] and e["message"]
        except Exception:
            if not path.startswith("/v1/jobs/%s/logs" % JOB):
                bad.append(("bad error body", st, path, d[:200]))
st, d = req("GET", "/healthz")
if st != 200:
    bad.append(("unhealthy", st, d))
if bad:
    for b in bad[:10]:
        print("BAD:", b, file=sys.stderr)
    sys.exit("%d bad answers out of %d" % (len(bad), N))
print("test_server_badinput: %d random requests, every answer 2xx/4xx" % N)
PY
server_stop test_server_badinput 30
echo "test_server_badinput: OK"
