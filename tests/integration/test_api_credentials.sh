#!/usr/bin/env bash
# Credentials end when they should, and leave memory when they end:
#   - a password change (PATCH /v1/me) ends the user's other login sessions and keeps
#     the one it was made with (and the user's API tokens);
#   - POST /v1/users/{id}/revoke (admins only) ends every session and API token of the
#     user;
#   - disabling a user ends them too, and enabling it again brings none back;
#   - logged-out, deleted, revoked and expired credentials are freed from memory (the
#     fairgpu_credentials_cached gauge of /metrics comes back down).
set -euo pipefail
BIN=${1:?usage: test_api_credentials.sh /path/to/fairgpu}
source "$(dirname "$0")/lib_server.sh"
server_start test_api_credentials "$BIN" --insecure-fast-password-hash --rate-limit 0 \
    --session-ttl 60s --login-rate 0 # many logins from one address (limits: own tests)
server_admin root r@x root-password >/dev/null
python3 - "$port" <<'PY'
import json, re, sys, time, http.client
PORT = int(sys.argv[1])
fails = []
def check(c, what):
    if not c:
        fails.append(what); print("FAIL:", what, file=sys.stderr)
def req(method, path, body=None, token=None):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    h = {"Content-Type": "application/json"}
    if token: h["Authorization"] = "Bearer " + token
    c.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
    r = c.getresponse()
    d = r.read()
    c.close()
    try:
        return r.status, json.loads(d) if d else None
    except ValueError:
        return r.status, d.decode()
def login(u, p):
    st, b = req("POST", "/v1/sessions", {"username": u, "password": p})
    return b["token"] if st == 201 else None
def me(tok): return req("GET", "/v1/me", token=tok)[0]
def cached():
    st, b = req("GET", "/metrics")
    m = re.search(r"^fairgpu_credentials_cached (\d+)$", b if isinstance(b, str) else "", re.M)
    return int(m.group(1)) if m else -1
req("POST", "/v1/users", {"username": "alice", "email": "a@x", "password": "alice-password"})
req("POST", "/v1/users", {"username": "bob", "email": "b@x", "password": "bobby-password"})
TR = login("root", "root-password")
# expiry: a session made now ends after the 60 s lifetime (checked at the end)
EXP = login("bob", "bobby-password")
exp_at = time.time() + 60

# ---- a password change ends the other sessions, keeps the current one and the tokens
s1, s2, s3 = (login("alice", "alice-password") for _ in range(3))
st, t1 = req("POST", "/v1/tokens", {"name": "ci"}, s2)
t1 = t1["token"]
st, b = req("PATCH", "/v1/me", {"password": "alice-password-2", "current_password": "alice-password"}, s1)
check(st == 200, "password change: %s %s" % (st, b))
check(me(s1) == 200, "the session that changed the password still works")
check(me(s2) == 401 and me(s3) == 401, "the other sessions end with a password change: %s %s" % (me(s2), me(s3)))
check(me(t1) == 200, "API tokens survive a password change")
check(login("alice", "alice-password") is None, "the old password is refused")
s4 = login("alice", "alice-password-2")
check(s4 and me(s4) == 200, "the new password logs in")
# through an API token: every session ends, the token stays
st, b = req("PATCH", "/v1/me", {"password": "alice-password-3", "current_password": "alice-password-2"}, t1)
check(st == 200 and me(t1) == 200, "password change with an API token: %s" % st)
check(me(s1) == 401 and me(s4) == 401, "... ends every session: %s %s" % (me(s1), me(s4)))

# ---- admin revocation
sa = login("alice", "alice-password-3")
st, t2 = req("POST", "/v1/tokens", {"name": "second"}, sa)
t2 = t2["token"]
st, b = req("POST", "/v1/users/alice/revoke", token=sa)
check(st == 403, "a user cannot revoke: %s" % st)
st, b = req("POST", "/v1/users/nobody/revoke", token=TR)
check(st == 404, "revoke an unknown user: %s" % st)
st, b = req("POST", "/v1/users/alice/revoke", token=TR)
check(st == 200 and b.get("sessions_revoked") == 1 and b.get("tokens_revoked") == 2,
      "revoke answers what it ended: %s %s" % (st, b))
check(me(sa) == 401 and me(t1) == 401 and me(t2) == 401, "revoked credentials are refused")
check(me(TR) == 200, "the admin's own session is untouched")
sb = login("alice", "alice-password-3")
check(sb and me(sb) == 200, "the user can log in again after a revocation")

# ---- disabling revokes; enabling brings nothing back
st, t3 = req("POST", "/v1/tokens", {"name": "third"}, sb)
t3 = t3["token"]
st, u = req("GET", "/v1/me", token=sb)
uid = u["id"]
st, b = req("PATCH", "/v1/users/" + uid, {"disabled": True}, TR)
check(st == 200 and b["disabled"] is True, "disable alice: %s %s" % (st, b))
check(me(sb) == 401 and me(t3) == 401, "a disabled user's credentials are refused")
st, b = req("PATCH", "/v1/users/" + uid, {"disabled": False}, TR)
check(st == 200 and b["disabled"] is False, "enable alice again: %s" % st)
check(me(sb) == 401, "re-enabling does not bring the old session back: %s" % me(sb))
check(me(t3) == 401, "re-enabling does not bring the old API token back: %s" % me(t3))
check(login("alice", "alice-password-3") is not None, "an enabled user logs in again")

# ---- ended credentials leave memory
base = cached()
check(base > 0, "the gauge is there: %s" % base)
toks = [login("alice", "alice-password-3") for _ in range(20)]
check(cached() >= base + 20, "20 sessions are cached: %s -> %s" % (base, cached()))
for t in toks:
    st, _ = req("DELETE", "/v1/sessions/current", token=t)
    check(st == 204, "logout: %s" % st)
check(cached() <= base, "logged-out sessions leave memory: %s -> %s" % (base, cached()))
sc = login("alice", "alice-password-3")
base = cached()
ids = []
for i in range(10):
    st, t = req("POST", "/v1/tokens", {"name": "t%d" % i}, sc)
    ids.append(t["id"])
check(cached() >= base + 10, "10 tokens are cached: %s" % cached())
for i in ids:
    st, _ = req("DELETE", "/v1/tokens/" + i, token=sc)
    check(st == 204, "delete token: %s" % st)
check(cached() <= base, "deleted tokens leave memory: %s -> %s" % (base, cached()))
more = [login("alice", "alice-password-3") for _ in range(10)]
before = cached()
req("POST", "/v1/users/alice/revoke", token=TR)
check(cached() <= before - 11, "revoked credentials leave memory: %s -> %s" % (before, cached()))

# ---- expiry
check(me(EXP) == 200, "bob's session works before its end")
time.sleep(max(0, exp_at - time.time()) + 2)
before = cached()
check(me(EXP) == 401, "an expired session is refused")
check(cached() == before - 1, "an expired session leaves memory when met: %s -> %s" % (before, cached()))
if fails:
    print("%d FAILURES" % len(fails), file=sys.stderr)
    sys.exit(1)
PY
server_stop test_api_credentials
echo "test_api_credentials: OK"
