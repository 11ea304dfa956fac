#!/usr/bin/env bash
# What users send and others see is checked, and admin changes stay safe:
#   - usernames may not be all digits (a user id reads as digits), so /v1/users/3 is
#     always user id 3;
#   - text shown to others (email, display_name, token, job name, model, dataset) with
#     a control character (CR, LF, ESC, DEL, C1) or a bidirectional override or
#     isolate is refused with 400 invalid_argument naming the field, and nothing
#     changes;
#   - the last enabled admin cannot be demoted or disabled (409), by itself or anyone;
#   - an admin's PATCH /v1/users/{id} and the user's own PATCH /v1/me, racing, each
#     change only their fields: after a restart (the store's values) the role the
#     admin set last and the display name the user set last are both there;
#   - /metrics follows metrics-access: local (default: loopback peers only), token
#     (Bearer DATA_DIR/metrics.token, made mode 0600) or open.
set -euo pipefail
BIN=${1:?usage: test_api_input.sh /path/to/fairgpu}
source "$(dirname "$0")/lib_server.sh"
server_start test_api_input "$BIN" --insecure-fast-password-hash --rate-limit 0 \
    --login-rate 0 # many logins from one address; the login limits have tests of their own
server_admin root r@x root-password >/dev/null
fail() { echo "FAIL: $*" >&2; exit 1; }
restart() {
    kill -TERM "$server_pid"; wait "$server_pid" || fail "server exit $?"
    "$BIN" server --data-dir "$tmp/data" --listen "127.0.0.1:$port" --insecure-fast-password-hash \
        --rate-limit 0 "$@" >>"$tmp/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 200); do curl -fsS "$url/healthz" >/dev/null 2>&1 && return 0; sleep 0.05; done
    fail "no restart"
}
python3 - "$port" "$tmp/last.json" <<'PY'
import json, sys, threading, time, http.client
PORT = int(sys.argv[1])
fails = []
def check(c, what):
    if not c:
        fails.append(what); print("FAIL:", what, file=sys.stderr)
def req(method, path, body=None, token=None, raw=None):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    h = {"Content-Type": "application/json"}
    if token: h["Authorization"] = "Bearer " + token
    c.request(method, path, body=raw if raw is not None else (json.dumps(body) if body is not None else None), headers=h)
    r = c.getresponse()
    d = r.read()
    c.close()
    return r.status, json.loads(d) if d else None
def login(u, p): return req("POST", "/v1/sessions", {"username": u, "password": p})[1]["token"]
def refused(st, b, field): return st == 400 and b["error"]["code"] == "invalid_argument" and b["error"].get("field") == field
TR = login("root", "root-password")
for i in range(3):
    req("POST", "/v1/users", {"username": "u%d" % i, "email": "u@x", "password": "user-password"})
# ---- numeric usernames
for name in ("3", "007", "1234567890"):
    st, b = req("POST", "/v1/users", {"username": name, "email": "n@x", "password": "digit-password"})
    check(refused(st, b, "username"), "an all-digit username '%s' is refused: %s %s" % (name, st, b))
st, b = req("POST", "/v1/users", {"username": "3d", "email": "n@x", "password": "digit-password"})
check(st == 201, "a username with digits and letters is fine: %s" % st)
st, b = req("PATCH", "/v1/users/3", {"weight": 2}, TR)
check(st == 200 and b["id"] == "3", "/v1/users/3 is user id 3: %s %s" % (st, b))
st, b = req("PATCH", "/v1/users/u1", {"weight": 3}, TR)
check(st == 200 and b["username"] == "u1", "a username names its user: %s %s" % (st, b))
# ---- control and bidi characters
TA = login("u0", "user-password")
bad = ["a@x\r\nBcc: m@x", "x\ny", "a\x1b[31mred", "del\x7f", "c1\u0085", "rlo\u202eevil", "iso\u2067x", "lrm\u200e", "alm\u061c"]
for v in bad:
    st, b = req("POST", "/v1/users", {"username": "cc", "email": "c@x", "password": "cc-password-1", "display_name": v})
    check(refused(st, b, "display_name"), "display_name %r refused: %s %s" % (v, st, b))
    st, b = req("POST", "/v1/users", {"username": "cc", "email": v + "@x", "password": "cc-password-1"})
    check(refused(st, b, "email"), "email %r refused: %s %s" % (v, st, b))
    st, b = req("PATCH", "/v1/me", {"email": "me@x" + v}, TA)
    check(refused(st, b, "email"), "PATCH /v1/me email %r refused: %s %s" % (v, st, b))
    st, b = req("PATCH", "/v1/me", {"display_name": v}, TA)
    check(refused(st, b, "display_name"), "PATCH /v1/me display_name %r refused: %s %s" % (v, st, b))
    st, b = req("POST", "/v1/tokens", {"name": v}, TA)
    check(refused(st, b, "name"), "token name %r refused: %s %s" % (v, st, b))
    for f in ("name", "model", "dataset"):
        st, b = req("POST", "/v1/jobs", {f: v, "command": ["true"], "gpus": 1}, TA)
        check(refused(st, b, f), "job %s %r refused: %s %s" % (f, v, st, b))
st, b = req("GET", "/v1/users?limit=1000", token=TR)
check(not any(u["username"] == "cc" for u in b["items"]), "no user was created by a refused request")
st, me = req("GET", "/v1/me", token=TA)
check(me["email"] == "u@x" and me["display_name"] is None, "refused changes changed nothing: %s" % me)
st, b = req("POST", "/v1/users", {"username": "ok", "email": "o@x", "password": "ok-password-1", "display_name": "Zoë 山田 O'Neil"})
check(st == 201, "plain international text is fine: %s %s" % (st, b))
# ---- the last admin
st, b = req("PATCH", "/v1/users/root", {"role": "user"}, TR)
check(st == 409 and b["error"]["code"] == "conflict", "the last admin cannot demote itself: %s %s" % (st, b))
st, b = req("PATCH", "/v1/users/root", {"disabled": True}, TR)
check(st == 409, "the last admin cannot be disabled: %s %s" % (st, b))
st, b = req("PATCH", "/v1/users/u2", {"role": "admin"}, TR)
check(st == 200 and b["role"] == "admin", "make a second admin: %s" % st)
T2 = login("u2", "user-password")
st, b = req("PATCH", "/v1/users/u2", {"disabled": True}, TR)
check(st == 200, "with two admins one may be disabled: %s %s" % (st, b))
st, b = req("PATCH", "/v1/users/root", {"role": "user"}, TR)
check(st == 409, "a disabled admin does not count: %s %s" % (st, b))
st, b = req("PATCH", "/v1/users/u2", {"disabled": False}, TR)
st, b = req("PATCH", "/v1/users/root", {"role": "user"}, TR)
check(st == 200 and b["role"] == "user", "with another enabled admin root may step down: %s %s" % (st, b))
T2 = login("u2", "user-password")
st, b = req("PATCH", "/v1/users/u2", {"role": "user"}, T2)
check(st == 409, "and then u2 is the last: %s %s" % (st, b))
st, b = req("PATCH", "/v1/users/root", {"role": "admin"}, T2)
check(st == 200, "root admin again: %s" % st)
# ---- racing PATCH /v1/users/{id} (role) and PATCH /v1/me (display_name)
TU = login("u1", "user-password")
stop = time.time() + 4
last = {}
def admin_side():
    i = 0
    while time.time() < stop:
        role = ("admin", "user")[i % 2]
        st, b = req("PATCH", "/v1/users/u1", {"role": role}, TR)
        if st == 200: last["role"] = role
        i += 1
def user_side():
    i = 0
    while time.time() < stop:
        st, b = req("PATCH", "/v1/me", {"display_name": "name %d" % i, "email": "u1-%d@x" % i}, TU)
        if st == 200: last["display"] = "name %d" % i
        i += 1
ts = [threading.Thread(target=admin_side), threading.Thread(target=user_side)]
for t in ts: t.start()
for t in ts: t.join()
json.dump(last, open(sys.argv[2], "w"))
st, b = req("GET", "/v1/users?limit=1000", token=TR)
u1 = [u for u in b["items"] if u["username"] == "u1"][0]
check(u1["role"] == last.get("role") and u1["display_name"] == last.get("display"),
      "after the race, memory holds both last changes: %s %s" % (u1, last))
if fails:
    print("%d FAILURES" % len(fails), file=sys.stderr)
    sys.exit(1)
PY
# the store holds both last changes too (a restart reloads them)
restart
python3 - "$port" "$tmp/last.json" <<'PY'
import json, sys, http.client
PORT = int(sys.argv[1])
last = json.load(open(sys.argv[2]))
def req(method, path, body=None, token=None):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    h = {"Content-Type": "application/json"}
    if token: h["Authorization"] = "Bearer " + token
    c.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
    r = c.getresponse(); d = r.read(); c.close()
    return r.status, json.loads(d) if d else None
TR = req("POST", "/v1/sessions", {"username": "root", "password": "root-password"})[1]["token"]
st, b = req("GET", "/v1/users?limit=1000", token=TR)
u1 = [u for u in b["items"] if u["username"] == "u1"][0]
if u1["role"] != last.get("role") or u1["display_name"] != last.get("display"):
    print("FAIL: after a restart the store lost a racing change: %s, last set %s" % (u1, last), file=sys.stderr)
    sys.exit(1)
PY
# ---- metrics-access
code=$(curl -s -o /dev/null -w '%{http_code}' "$url/metrics")
[ "$code" = 200 ] || fail "metrics-access local: a loopback peer gets $code"
ip=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+\.' | grep -v '^127\.' | head -1 || true)
if [ -n "$ip" ]; then
    kill -TERM "$server_pid"; wait "$server_pid" || fail "server exit $?"
    "$BIN" server --data-dir "$tmp/data" --listen "0.0.0.0:$port" --insecure-fast-password-hash \
        >>"$tmp/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 200); do curl -fsS "$url/healthz" >/dev/null 2>&1 && break; sleep 0.05; done
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://$ip:$port/metrics")
    [ "$code" = 403 ] || fail "metrics-access local: a peer from $ip gets $code"
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://$ip:$port/healthz")
    [ "$code" = 200 ] || fail "/healthz from $ip: $code"
else
    echo "test_api_input: no address but loopback here: the non-loopback peer check is skipped"
fi
restart --metrics-access token
[ "$(stat -c %a "$tmp/data/metrics.token")" = 600 ] || fail "metrics.token mode"
code=$(curl -s -o /dev/null -w '%{http_code}' "$url/metrics")
[ "$code" = 401 ] || fail "metrics-access token: no token gets $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer wrong-token-123456" "$url/metrics")
[ "$code" = 401 ] || fail "metrics-access token: a wrong token gets $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$tmp/data/metrics.token")" "$url/metrics")
[ "$code" = 200 ] || fail "metrics-access token: the scrape token gets $code"
restart --metrics-access open
code=$(curl -s -o /dev/null -w '%{http_code}' "$url/metrics")
[ "$code" = 200 ] || fail "metrics-access open: $code"
if "$BIN" server --data-dir "$tmp/bad" --metrics-access everyone >"$tmp/bad.log" 2>&1; then
    fail "a bad metrics-access was accepted"
fi
grep -q "metrics-access" "$tmp/bad.log" || fail "no clear error for a bad metrics-access"
server_stop test_api_input
echo "test_api_input: OK"
