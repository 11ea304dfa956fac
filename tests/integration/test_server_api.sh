#!/usr/bin/env bash
# The controller's HTTP API against a real `fairgpu server` on a free loopback port with
# a temporary data dir: registration and login, tokens, accounts and allowed classes,
# job validation (413, invalid_json with position, gpus 0/9/12, unknown priority, 404,
# 405: none of them changes state), idempotency, cancel, visibility of others' jobs,
# list filters and cursors, the event feed (immediate, long-poll, SSE), the pending cap,
# the per-token rate limit (429 + Retry-After), billing (prices and usage 200, the rest 501), and the authorization
# matrix: every route x {anonymous, user A, user B, admin} with the exact status code.
set -euo pipefail
BIN=${1:?usage: test_server_api.sh /path/to/fairgpu}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fg_test_server_api.XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_server NAME [flags...]: starts a server, waits for /healthz, sets $port.
start_server() {
    local name=$1
    shift
    for _ in 1 2 3; do
        port=$(free_port)
        "$BIN" server --data-dir "$tmp/$name" --listen "127.0.0.1:$port" \
            --insecure-fast-password-hash "$@" >"$tmp/$name.log" 2>&1 &
        local pid=$!
        pids+=("$pid")
        for _ in $(seq 100); do
            if curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then return 0; fi
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
        kill "$pid" 2>/dev/null || true
    done
    echo "server $name did not start" >&2
    cat "$tmp/$name.log" >&2
    return 1
}

start_server main --rate-limit 0 --max-pending-per-user 12
main_port=$port
start_server limited --rate-limit 5 --rate-burst 5
limited_port=$port

python3 - "$main_port" "$limited_port" "$tmp/main/setup-token" <<'PY'
import json, sys, threading, time, urllib.request, urllib.error, http.client
SETUP = open(sys.argv[3]).read().strip()

MAIN, LIMITED = int(sys.argv[1]), int(sys.argv[2])
failures = []

def req(method, path, body=None, token=None, headers=None, raw=None, port=MAIN):
    h = {"Content-Type": "application/json"}
    if token:
        h["Authorization"] = "Bearer " + token
    if headers:
        h.update(headers)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    txt = r.read()
    hdrs = dict(r.getheaders())
    c.close()
    try:
        j = json.loads(txt) if txt else None
    except ValueError:
        j = txt.decode(errors="replace")
    return r.status, j, hdrs

def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)

def expect(st, want, what, body=None):
    check(st == want, "%s: got %s want %s %s" % (what, st, want, json.dumps(body)[:300] if body is not None else ""))

def err_shape(body, code, field=None):
    if not isinstance(body, dict) or set(body) != {"error"}:
        return False
    e = body["error"]
    keys = {"code", "message"} | ({"field"} if field else set())
    return set(e) == keys and e["code"] == code and (field is None or e["field"] == field) and e["message"]

# ---------------------------------------------------------------- users, sessions
st, admin, _ = req("POST", "/v1/users", {"username": "root", "email": "r@x.org", "password": "admin-password",
                                        "setup_token": SETUP})
expect(st, 201, "first admin (setup token)", admin)
check(admin["role"] == "admin", "the setup token makes an admin")
st, ua, _ = req("POST", "/v1/users", {"username": "alice", "email": "a@x.org", "password": "alice-password"})
expect(st, 201, "register alice", ua)
check(ua["role"] == "user" and ua["account"] == "default", "second user is a plain user in default")
st, ub, _ = req("POST", "/v1/users", {"username": "bob", "email": "b@x.org", "password": "bobby-password", "account": "x"})
expect(st, 201, "register bob (account ignored for non-admins)", ub)
check(ub["account"] == "default", "account honoured only for admins")
st, b, _ = req("POST", "/v1/users", {"username": "alice", "email": "a2@x.org", "password": "alice-password"})
expect(st, 409, "duplicate username", b)
check(err_shape(b, "conflict", "username"), "409 error shape")
for body, field in [({"username": "Bad Name", "email": "a@x", "password": "0123456789"}, "username"),
                    ({"username": "c", "email": "nomail", "password": "0123456789"}, "email"),
                    ({"username": "c", "email": "c@x", "password": "short"}, "password"),
                    ({"username": 5, "email": "c@x", "password": "0123456789"}, "username"),
                    ({"email": "c@x", "password": "0123456789"}, "username")]:
    st, b, _ = req("POST", "/v1/users", body)
    expect(st, 400, "register invalid %s" % field, b)
    check(err_shape(b, "invalid_argument", field), "register invalid %s names the field: %s" % (field, b))

def login(u, p):
    st, b, _ = req("POST", "/v1/sessions", {"username": u, "password": p})
    expect(st, 201, "login " + u, b)
    check(set(b) == {"token", "expires_at", "user"} and b["user"]["username"] == u, "session shape")
    return b["token"]

TR, TA, TB = login("root", "admin-password"), login("alice", "alice-password"), login("bob", "bobby-password")
st1, b1, _ = req("POST", "/v1/sessions", {"username": "alice", "password": "wrong-password"})
st2, b2, _ = req("POST", "/v1/sessions", {"username": "nobody", "password": "wrong-password"})
expect(st1, 401, "wrong password")
expect(st2, 401, "unknown user")
check(b1 == b2, "same 401 whether or not the user exists: %s vs %s" % (b1, b2))
st, b, _ = req("GET", "/v1/me", token="fgs_not-a-real-token")
expect(st, 401, "bad token")
check(err_shape(b, "unauthenticated"), "401 shape")
st, me, _ = req("GET", "/v1/me", token=TA)
expect(st, 200, "me")
check({"id", "username", "email", "role", "account", "weight", "created_at"} <= set(me), "profile fields")
st, b, _ = req("PATCH", "/v1/me", {"password": "new-alice-password"}, token=TA)
expect(st, 400, "password change without current_password", b)
st, b, _ = req("PATCH", "/v1/me", {"password": "new-alice-password", "current_password": "nope-nope-nope"}, token=TA)
expect(st, 403, "password change with a wrong current_password", b)
st, b, _ = req("PATCH", "/v1/me", {"email": "alice@new.org", "display_name": "Alice", "password": "new-alice-password", "current_password": "alice-password"}, token=TA)
expect(st, 200, "patch me", b)
check(b["email"] == "alice@new.org" and b["display_name"] == "Alice", "patch applied")
TA = login("alice", "new-alice-password")

# logout
tmp_tok = login("bob", "bobby-password")
st, _, _ = req("DELETE", "/v1/sessions/current", token=tmp_tok)
expect(st, 204, "logout")
st, _, _ = req("GET", "/v1/me", token=tmp_tok)
expect(st, 401, "token dead after logout")

# API tokens
st, t, _ = req("POST", "/v1/tokens", {"name": "ci"}, token=TA)
expect(st, 201, "create token", t)
check(set(t) >= {"id", "name", "token"}, "token shape")
st, me2, _ = req("GET", "/v1/me", token=t["token"])
expect(st, 200, "api token works")
st, l, _ = req("GET", "/v1/tokens", token=TA)
check(st == 200 and any(x["id"] == t["id"] for x in l["items"]) and all("token" not in x for x in l["items"]),
      "token listed, secret never shown again")
st, _, _ = req("DELETE", "/v1/tokens/" + t["id"], token=TB)
expect(st, 404, "another user's token")
st, _, _ = req("DELETE", "/v1/tokens/" + t["id"], token=TA)
expect(st, 204, "delete token")
st, _, _ = req("GET", "/v1/me", token=t["token"])
expect(st, 401, "deleted token refused")

# ---------------------------------------------------------------- accounts
st, acct, _ = req("POST", "/v1/accounts", {"name": "nlp", "weight": 2, "gpu_quota": 16, "allowed_priorities": ["normal", "low"]}, token=TR)
expect(st, 201, "create account", acct)
st, b, _ = req("POST", "/v1/accounts", {"name": "nlp"}, token=TR)
expect(st, 409, "duplicate account")
st, b, _ = req("POST", "/v1/accounts", {"name": "cv", "weight": -1}, token=TR)
expect(st, 400, "negative weight", b)
check(err_shape(b, "invalid_argument", "weight"), "weight field named")
st, b, _ = req("POST", "/v1/accounts/nlp/members", {"user": "alice", "weight": 3}, token=TR)
expect(st, 201, "add member", b)
st, b, _ = req("POST", "/v1/accounts/nlp/members", {"user": "alice"}, token=TR)
expect(st, 409, "member twice")
st, l, _ = req("GET", "/v1/accounts", token=TB)
check(st == 200 and {a["name"] for a in l["items"]} >= {"default", "nlp"}, "accounts listed to users")
st, me, _ = req("GET", "/v1/me", token=TA)
check(me["account"] == "default" and "nlp" in me["accounts"], "first membership stays the default")
job = {"name": "train", "command": ["python3", "train.py"], "gpus": 1, "priority": "high", "account": "nlp"}
st, b, _ = req("POST", "/v1/jobs", job, token=TA)
expect(st, 403, "priority not allowed in account", b)
check(err_shape(b, "forbidden", "priority"), "forbidden names priority")
job["priority"] = "normal"
st, jn, _ = req("POST", "/v1/jobs", job, token=TA)
expect(st, 201, "submit to nlp", jn)
check(jn["account"] == "nlp", "charged to nlp")
st, b, _ = req("POST", "/v1/jobs", job, token=TB)
expect(st, 403, "bob is not in nlp", b)
st, a, _ = req("GET", "/v1/audit", token=TR)
check(st == 200 and {"account.create", "member.add"} <= {x["action"] for x in a["items"]}, "audit log records admin changes")

# ---------------------------------------------------------------- bad input changes nothing
def snapshot():
    st, l, _ = req("GET", "/v1/jobs?limit=1000", token=TR)
    st2, ev, _ = req("GET", "/v1/events?since=0&limit=1000", token=TR)
    return (len(l["items"]), ev["head_seq"])

before = snapshot()
base = {"name": "x", "command": ["true"], "gpus": 1}
big = b'{"name":"' + b"a" * (1024 * 1024 + 10) + b'","command":["true"],"gpus":1}'
st, b, _ = req("POST", "/v1/jobs", raw=big, token=TA)
expect(st, 413, "body over 1 MiB", b)
check(err_shape(b, "payload_too_large"), "413 shape")
st, b, _ = req("POST", "/v1/jobs", raw=b'{"name": "x",\n "gpus": 1,, }', token=TA)
expect(st, 400, "invalid json", b)
check(err_shape(b, "invalid_json") and "line 2" in b["error"]["message"], "invalid_json gives the position: %s" % b)
st, b, _ = req("POST", "/v1/jobs", raw=b'{"gpus": 1, "gpus": 2, "command": ["true"]}', token=TA)
expect(st, 400, "duplicate keys", b)
check(err_shape(b, "invalid_json"), "duplicate keys are invalid_json")
st, b, _ = req("POST", "/v1/jobs", raw=b'[1,2]', token=TA)
expect(st, 400, "not an object", b)
for g in (0, 9, 12, -1, 2000):
    st, b, _ = req("POST", "/v1/jobs", dict(base, gpus=g), token=TA)
    expect(st, 400, "gpus %d" % g, b)
    check(err_shape(b, "invalid_argument", "gpus"), "gpus %d names the field" % g)
for field, value in [("gpus", "2"), ("gpus", 1.5), ("priority", "urgent"), ("command", []), ("command", [1]),
                     ("command", 5), ("name", "n" * 129), ("time_limit_s", 0), ("max_retries", -1),
                     ("env", {"A": 1}), ("env", {"1BAD": "x"}), ("env", []), ("gpu_type", "H 100"),
                     ("model", 3), ("cpus", 0), ("memory_mb", "big")]:
    st, b, _ = req("POST", "/v1/jobs", dict(base, **{field: value}), token=TA)
    expect(st, 400, "%s=%r" % (field, value), b)
    check(err_shape(b, "invalid_argument", field), "%s=%r names the field: %s" % (field, value, b))
st, b, _ = req("POST", "/v1/jobs", {"name": "x", "gpus": 1}, token=TA)
check(st == 400 and err_shape(b, "invalid_argument", "command"), "missing command")
st, b, _ = req("GET", "/v1/nope", token=TA)
expect(st, 404, "unknown route")
check(err_shape(b, "not_found"), "404 shape")
st, b, h = req("DELETE", "/v1/jobs", token=TA)
expect(st, 405, "wrong method")
check("Allow" in h and "GET" in h["Allow"] and "POST" in h["Allow"], "405 says what is allowed")
st, b, _ = req("GET", "/v1/jobs/abc", token=TA)
expect(st, 404, "non-numeric job id")
st, b, _ = req("GET", "/v1/jobs/999999", token=TA)
expect(st, 404, "unknown job id")
st, b, _ = req("GET", "/v1/jobs?state=SLEEPING", token=TA)
expect(st, 400, "unknown state filter")
st, b, _ = req("GET", "/v1/jobs?limit=0", token=TA)
expect(st, 400, "limit 0")
st, b, _ = req("GET", "/v1/jobs?cursor=zzz", token=TA)
expect(st, 400, "bad cursor")
check(snapshot() == before, "rejected requests changed nothing: %s vs %s" % (snapshot(), before))

# ---------------------------------------------------------------- jobs
full = {"name": "llama", "command": "echo hi", "gpus": 8, "gpu_type": "h100", "model": "llama-3-8b",
        "dataset": "alpaca", "time_limit_s": 3600, "priority": "low", "max_retries": 2,
        "env": {"WANDB_MODE": "offline"}, "cpus": 8, "memory_mb": 64000}
st, j1, _ = req("POST", "/v1/jobs", full, token=TA)
expect(st, 201, "full submit", j1)
for k, v in full.items():
    check(j1.get(k) == v, "job field %s round-trips: %r" % (k, j1.get(k)))
check(j1["state"] == "PENDING" and j1["user"] == "alice" and j1["account"] == "default", "job state/user/account")
check(set(j1) >= {"id", "reason_code", "reason", "nodes", "node", "gpu_indices", "submit_time", "start_time",
                  "end_time", "exit_code", "attempts", "cancel_requested", "estimated_start", "cost_micros",
                  "gpu_seconds"}, "job has every contract field")
st, d, _ = req("POST", "/v1/jobs", dict(base, gpus=16), token=TA)
expect(st, 201, "16 GPUs (two whole nodes)", d)
st, d, _ = req("POST", "/v1/jobs", dict(base, name="default-tl"), token=TA)
check(st == 201 and d["time_limit_s"] == 86400, "default time limit 24 h")

# idempotency
st, i1, _ = req("POST", "/v1/jobs", dict(base, name="idem"), token=TB, headers={"Idempotency-Key": "k-1"})
expect(st, 201, "idempotent first", i1)
st, i2, _ = req("POST", "/v1/jobs", dict(base, name="idem"), token=TB, headers={"Idempotency-Key": "k-1"})
expect(st, 200, "idempotent replay", i2)
check(i1["id"] == i2["id"], "same job returned")
st, i3, _ = req("POST", "/v1/jobs", dict(base, name="idem"), token=TA, headers={"Idempotency-Key": "k-1"})
check(st == 201 and i3["id"] != i1["id"], "another user's key is another job")

# others' jobs: public queue, private content
st, o, _ = req("GET", "/v1/jobs/" + j1["id"], token=TB)
expect(st, 200, "bob sees alice's job")
check("command" not in o and "env" not in o and o["name"] == "llama", "command/env keys absent for others: %s" % list(o))
st, o, _ = req("GET", "/v1/jobs/" + j1["id"], token=TR)
check("command" in o and "env" in o, "admin sees content")
st, l, _ = req("GET", "/v1/jobs?user=alice", token=TB)
check(st == 200 and l["items"] and all("command" not in x and "env" not in x for x in l["items"]), "list hides content")
st, l, _ = req("GET", "/v1/jobs?model=llama-3-8b", token=TA)
check([x["id"] for x in l["items"]] == [j1["id"]], "model filter")
st, l, _ = req("GET", "/v1/jobs?dataset=alpaca&account=default&state=PENDING", token=TA)
check([x["id"] for x in l["items"]] == [j1["id"]], "dataset+account+state filter")
st, l, _ = req("GET", "/v1/jobs?account=nlp", token=TA)
check([x["id"] for x in l["items"]] == [jn["id"]], "account filter")
# pagination
ids, cursor = [], None
while True:
    st, l, _ = req("GET", "/v1/jobs?limit=2" + ("&cursor=" + cursor if cursor else ""), token=TA)
    expect(st, 200, "page")
    check(len(l["items"]) <= 2, "page size")
    ids += [x["id"] for x in l["items"]]
    cursor = l["next_cursor"]
    if not cursor:
        break
st, l, _ = req("GET", "/v1/jobs?limit=1000", token=TA)
check(ids == [x["id"] for x in l["items"]] and len(ids) == len(set(ids)) >= 6, "cursor pages cover the list once")

# cancel
st, c, _ = req("POST", "/v1/jobs/%s/cancel" % j1["id"], token=TB)
expect(st, 403, "bob cannot cancel alice's job")
st, c, _ = req("POST", "/v1/jobs/%s/cancel" % j1["id"], token=TA)
expect(st, 200, "cancel pending", c)
check(c["state"] == "CANCELLED" and c["end_time"], "pending cancel is immediate")
st, c, _ = req("POST", "/v1/jobs/%s/cancel" % j1["id"], token=TA)
expect(st, 409, "cancel ended job", c)
check(err_shape(c, "conflict"), "409 shape")
st, ev, _ = req("GET", "/v1/jobs/%s/events" % j1["id"], token=TA)
check([(e["from"], e["to"]) for e in ev["items"]] == [(None, "PENDING"), ("PENDING", "CANCELLED")], "job events: %s" % ev)
check(all(set(e) == {"seq", "time", "from", "to", "reason", "node"} for e in ev["items"]), "event shape")
st, ev, _ = req("GET", "/v1/jobs/%s/events" % j1["id"], token=TB)
expect(st, 403, "bob cannot read alice's events")
st, at, _ = req("GET", "/v1/jobs/%s/attempts" % j1["id"], token=TA)
check(st == 200 and at["items"] == [], "no attempts for a job that never ran")

# pending cap (12 per user)
carol = req("POST", "/v1/users", {"username": "carol", "email": "c@x.org", "password": "carol-password"})[1]
TC = login("carol", "carol-password")
codes = [req("POST", "/v1/jobs", base, token=TC)[0] for _ in range(13)]
check(codes == [201] * 12 + [429], "pending cap: %s" % codes)
st, b, _ = req("POST", "/v1/jobs", base, token=TC)
check(st == 429 and err_shape(b, "queue_full"), "queue_full shape: %s" % b)
st, l, _ = req("GET", "/v1/jobs?user=carol&state=PENDING", token=TC)
req("POST", "/v1/jobs/%s/cancel" % l["items"][0]["id"], token=TC)
st, _, _ = req("POST", "/v1/jobs", base, token=TC)
expect(st, 201, "room again after a cancel")

# ---------------------------------------------------------------- global events
st, ev, _ = req("GET", "/v1/events?since=0&limit=1000", token=TB)
seqs = [e["seq"] for e in ev["items"]]
check(seqs == sorted(seqs) and len(set(seqs)) == len(seqs) and seqs[0] == 1, "global seq increasing from 1")
mine = [e for e in ev["items"] if e["job"]["user"] == "bob"]
others = [e for e in ev["items"] if e["job"]["user"] != "bob"]
check(mine and all("command" in e["job"] for e in mine), "own jobs in full in the feed")
check(others and all("command" not in e["job"] and "env" not in e["job"] for e in others), "others' jobs redacted in the feed")
head = ev["head_seq"]
t0 = time.time()
st, ev, _ = req("GET", "/v1/events?since=%d&wait=1" % head, token=TB)
check(st == 200 and ev["items"] == [] and time.time() - t0 >= 0.9, "long-poll times out empty")
res = {}
def poll():
    res["t"] = time.time()
    res["r"] = req("GET", "/v1/events?since=%d&wait=20" % head, token=TB)
    res["dt"] = time.time() - res["t"]
th = threading.Thread(target=poll)
th.start()
time.sleep(0.4)
st, jj, _ = req("POST", "/v1/jobs", dict(base, name="wake"), token=TA)
th.join(25)
st, ev, _ = res["r"]
check(st == 200 and ev["items"] and ev["items"][0]["job_id"] == jj["id"] and res["dt"] < 5,
      "long-poll wakes on a new event (%.2fs)" % res.get("dt", -1))
# SSE
c = http.client.HTTPConnection("127.0.0.1", MAIN, timeout=10)
c.request("GET", "/v1/events?since=%d&follow=1" % head, headers={"Authorization": "Bearer " + TB})
r = c.getresponse()
check(r.status == 200 and r.getheader("Content-Type").startswith("text/event-stream"), "SSE content type")
lines = []
while len([l for l in lines if l.startswith("data:")]) < 1:
    lines.append(r.readline().decode().rstrip("\n"))
check(lines[0] == "id: %d" % (head + 1), "SSE id is the seq: %s" % lines[:3])
def later():
    time.sleep(0.3)
    req("POST", "/v1/jobs", dict(base, name="live"), token=TB)
threading.Thread(target=later).start()
got = []
while len(got) < 1:
    line = r.readline().decode()
    if line.startswith("data:"):
        got.append(json.loads(line[5:]))
check(got[0]["job"]["name"] == "live" and "command" in got[0]["job"], "SSE streams new events live")
c.close()

# ---------------------------------------------------------------- misc
st, h, _ = req("GET", "/healthz")
check(st == 200 and h["status"] == "ok" and h["store"] == "ok" and "scheduler_pass_ms" in h, "healthz")
st, m, _ = req("GET", "/metrics")
check(st == 200 and "fairgpu_jobs_by_state{state=\"PENDING\"}" in m and "fairgpu_http_requests_total{code=\"201\"}" in m
      and "fairgpu_scheduler_pass_seconds_count" in m, "metrics")
st, f, _ = req("GET", "/v1/fairshare", token=TB)
check(st == 200 and {a["name"] for a in f["accounts"]} >= {"default", "nlp"}, "fairshare lists accounts")
nlp = [a for a in f["accounts"] if a["name"] == "nlp"][0]
check(abs(nlp["normalized_share"] - 2 / 3) < 1e-9 and nlp["weight"] == 2, "nlp share 2/3: %s" % nlp)
st, b, _ = req("GET", "/v1/billing/prices", token=TB)
check(st == 200 and b["prices"] == [] and b["currency"] is None, "an empty price book: %s" % (b,))
st, b, _ = req("GET", "/v1/billing/usage", token=TB)
check(st == 200 and b["items"] == [] and b["totals"]["cost_micros"] == 0, "billing usage, empty: %s" % (b,))
st, b, _ = req("GET", "/v1/billing/budgets", token=TB)
check(st == 501 and err_shape(b, "not_implemented"), "the rest of billing answers 501")

# rate limit on the second server: burst 5, 5/s
req("POST", "/v1/users", {"username": "rl", "email": "r@x", "password": "0123456789"}, port=LIMITED)
st, s, _ = req("POST", "/v1/sessions", {"username": "rl", "password": "0123456789"}, port=LIMITED)
codes, retry = [], None
for _ in range(12):
    st, b, h = req("GET", "/v1/me", token=s["token"], port=LIMITED)
    codes.append(st)
    if st == 429:
        retry = h.get("Retry-After")
        check(err_shape(b, "rate_limited"), "rate_limited shape")
check(codes[:5] == [200] * 5 and 429 in codes, "token bucket: %s" % codes)
check(retry is not None and int(retry) >= 1, "429 carries Retry-After")
time.sleep(1.1)
st, _, _ = req("GET", "/v1/me", token=s["token"], port=LIMITED)
expect(st, 200, "tokens refill")

# ---------------------------------------------------------------- authorization matrix
# Fresh objects for the matrix.
st, ja, _ = req("POST", "/v1/jobs", dict(base, name="matrix"), token=TA)
st, jc1, _ = req("POST", "/v1/jobs", dict(base, name="c1"), token=TA)
st, jc2, _ = req("POST", "/v1/jobs", dict(base, name="c2"), token=TA)
st, tk, _ = req("POST", "/v1/tokens", {"name": "m"}, token=TA)
ROLES = ["anon", "A", "B", "admin"]
tok = {"anon": None, "A": TA, "B": TB, "admin": TR}
J = ja["id"]
matrix = [
    # method, path, body, {role: status}, order (optional)
    ("GET", "/healthz", None, [200, 200, 200, 200]),
    ("GET", "/metrics", None, [200, 200, 200, 200]),
    ("POST", "/v1/users", {}, [400, 400, 400, 400]),
    ("GET", "/v1/users", None, [401, 403, 403, 200]),
    ("PATCH", "/v1/users/" + ub["id"], {}, [401, 403, 403, 200]),
    ("POST", "/v1/sessions", {"username": "nobody", "password": "0123456789"}, [401, 401, 401, 401]),
    ("GET", "/v1/me", None, [401, 200, 200, 200]),
    ("PATCH", "/v1/me", {}, [401, 200, 200, 200]),
    ("POST", "/v1/tokens", {"name": "x"}, [401, 201, 201, 201]),
    ("GET", "/v1/tokens", None, [401, 200, 200, 200]),
    ("DELETE", "/v1/tokens/" + tk["id"], None, [401, 204, 404, 404], ["anon", "B", "admin", "A"]),
    ("POST", "/v1/accounts", {"name": "acct-x"}, [401, 403, 403, 201]),
    ("GET", "/v1/accounts", None, [401, 200, 200, 200]),
    ("GET", "/v1/accounts/default", None, [401, 200, 200, 200]),
    ("PATCH", "/v1/accounts/default", {}, [401, 403, 403, 200]),
    ("POST", "/v1/accounts/acct-x/members", {"user": "bob"}, [401, 403, 403, 201]),
    ("DELETE", "/v1/accounts/acct-x/members/bob", None, [401, 403, 403, 204]),
    ("GET", "/v1/audit", None, [401, 403, 403, 200]),
    ("POST", "/v1/jobs", base, [401, 201, 201, 201]),
    ("GET", "/v1/jobs", None, [401, 200, 200, 200]),
    ("GET", "/v1/jobs/" + J, None, [401, 200, 200, 200]),
    ("POST", "/v1/jobs/%s/cancel" % jc1["id"], None, [401, 200, 403, 409], ["anon", "B", "A", "admin"]),
    ("POST", "/v1/jobs/%s/cancel" % jc2["id"], None, [401, 409, 403, 200], ["anon", "B", "admin", "A"]),
    ("GET", "/v1/jobs/%s/events" % J, None, [401, 200, 403, 200]),
    ("GET", "/v1/jobs/%s/attempts" % J, None, [401, 200, 403, 200]),
    ("GET", "/v1/jobs/%s/logs" % J, None, [401, 200, 403, 200]),
    ("GET", "/v1/events?since=0", None, [401, 200, 200, 200]),
    ("GET", "/v1/nodes", None, [401, 200, 200, 200]),
    ("POST", "/v1/nodes/nosuch/drain", None, [401, 403, 403, 404]),
    ("POST", "/v1/nodes/nosuch/resume", None, [401, 403, 403, 404]),
    ("GET", "/v1/fairshare", None, [401, 200, 200, 200]),
    ("GET", "/v1/billing/prices", None, [401, 200, 200, 200]),
    ("PUT", "/v1/billing/prices", {}, [401, 403, 403, 400]),
    ("GET", "/v1/billing/usage", None, [401, 200, 200, 200]),
    ("GET", "/v1/billing/invoices/2026-11", None, [401, 200, 200, 200]),
    ("POST", "/v1/agent/register", {}, [401, 401, 401, 401]),
    ("POST", "/v1/agent/heartbeat", {}, [401, 401, 401, 401]),
    ("GET", "/v1/agent/assignments?node=n&instance=i", None, [401, 401, 401, 401]),
    ("POST", "/v1/agent/started", {}, [401, 401, 401, 401]),
    ("POST", "/v1/agent/logs", {}, [401, 401, 401, 401]),
    ("POST", "/v1/agent/exited", {}, [401, 401, 401, 401]),
    ("GET", "/v1/nope", None, [404, 404, 404, 404]),
    ("DELETE", "/v1/jobs", None, [405, 405, 405, 405]),
]
rows = 0
for row in matrix:
    method, path, body, want = row[:4]
    order = row[4] if len(row) > 4 else ROLES
    for role in order:
        st, b, _ = req(method, path, body, token=tok[role])
        expect(st, want[ROLES.index(role)], "matrix %s %s as %s" % (method, path, role), b)
        rows += 1
# the logout route, with throwaway sessions
for role, user, pw in [("A", "alice", "new-alice-password"), ("B", "bob", "bobby-password"), ("admin", "root", "admin-password")]:
    st, _, _ = req("DELETE", "/v1/sessions/current", token=login(user, pw))
    expect(st, 204, "matrix DELETE /v1/sessions/current as " + role)
st, _, _ = req("DELETE", "/v1/sessions/current")
expect(st, 401, "matrix DELETE /v1/sessions/current as anon")
print("authorization matrix: %d checks" % (rows + 4))

if failures:
    print("%d FAILURES" % len(failures), file=sys.stderr)
    sys.exit(1)
print("test_server_api: all checks passed")
PY

# The agent token: accepted on /v1/agent/join only, refused elsewhere.
atok=$(tr -d '\n' <"$tmp/main/agent.token")
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $atok" "http://127.0.0.1:$main_port/v1/me")
[ "$code" = 401 ] || { echo "agent token accepted on /v1/me ($code)" >&2; exit 1; }
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $atok" -X POST -d '{}' "http://127.0.0.1:$main_port/v1/agent/register")
[ "$code" = 401 ] || { echo "the cluster token (join only) accepted on register ($code)" >&2; exit 1; }
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $atok" -X POST -d '{}' "http://127.0.0.1:$main_port/v1/agent/join")
[ "$code" = 400 ] || { echo "the cluster token refused on join ($code)" >&2; exit 1; }
mode=$(stat -c %a "$tmp/main/agent.token")
[ "$mode" = 600 ] || { echo "agent.token mode $mode" >&2; exit 1; }

# Bad settings stop the server at start with a clear sentence.
for args in "--listen nope" "--registration maybe" "--threads 0" "--policy lottery" "--default-time-limit 2d --max-time-limit 1d" "--bogus 1"; do
    # shellcheck disable=SC2086
    if "$BIN" server --data-dir "$tmp/bad" $args >"$tmp/bad.log" 2>&1; then
        echo "server started with bad settings: $args" >&2
        exit 1
    fi
    grep -q "fairgpu server:" "$tmp/bad.log" || { echo "no clear error for $args" >&2; cat "$tmp/bad.log" >&2; exit 1; }
done
printf 'listen = 127.0.0.1:1\nthreads = lots\n' >"$tmp/bad.conf"
if "$BIN" server --data-dir "$tmp/bad" --config "$tmp/bad.conf" >"$tmp/bad.log" 2>&1; then
    echo "server started with a bad config file" >&2
    exit 1
fi
grep -q "bad.conf:2" "$tmp/bad.log" || { echo "config error does not name file:line" >&2; cat "$tmp/bad.log" >&2; exit 1; }

# Closed registration: the holder of the setup token makes the first admin, after that
# only an admin creates users (anonymous: 401, even the very first).
printf '# a config file: key = value, flags override it\nregistration = closed\nrate_limit = 0\nlisten = 127.0.0.1:1\n' >"$tmp/closed.conf"
start_server closed --config "$tmp/closed.conf"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{"username":"z","email":"z@x","password":"0123456789"}' "http://127.0.0.1:$port/v1/users")
[ "$code" = 401 ] || { echo "closed registration answered $code to the first anonymous user" >&2; exit 1; }
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d "{\"username\":\"y\",\"email\":\"y@x\",\"password\":\"0123456789\",\"setup_token\":\"$(cat "$tmp/closed/setup-token")\"}" "http://127.0.0.1:$port/v1/users")
[ "$code" = 201 ] || { echo "closed registration refused the setup token ($code)" >&2; exit 1; }
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{"username":"z","email":"z@x","password":"0123456789"}' "http://127.0.0.1:$port/v1/users")
[ "$code" = 401 ] || { echo "closed registration answered $code" >&2; exit 1; }

# SIGTERM: clean shutdown.
kill -TERM "${pids[0]}"
wait "${pids[0]}"
grep -q "stopped cleanly" "$tmp/main.log" || { echo "no clean shutdown" >&2; cat "$tmp/main.log" >&2; exit 1; }
echo "test_server_api: OK"
