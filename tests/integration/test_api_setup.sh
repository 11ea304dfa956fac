#!/usr/bin/env bash
# The first admin comes from the one-time setup token, not from being first:
#   - on a first start the server writes DATA_DIR/setup-token (mode 0600) and says where;
#   - a registrant without it is a plain user, even the first; a wrong token is 403;
#   - of two racing claims of the token exactly one makes an admin;
#   - the token is used up: its file is removed and it is refused afterwards, also
#     after a restart, which writes no new one (an admin exists);
#   - a restart before it is used keeps the same token;
#   - with --registration closed only the token's holder (then admins) creates users.
set -euo pipefail
BIN=${1:?usage: test_api_setup.sh /path/to/fairgpu}
source "$(dirname "$0")/lib_server.sh"
server_start test_api_setup "$BIN" --insecure-fast-password-hash --rate-limit 0
data=$tmp/data
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -s "$data/setup-token" ] || fail "no setup token file on the first start"
[ "$(stat -c %a "$data/setup-token")" = 600 ] || fail "setup-token mode $(stat -c %a "$data/setup-token")"
grep -q "setup-token" "$tmp/server.log" || fail "the server does not say where the setup token is"
first=$(cat "$data/setup-token")
# a restart before it is used keeps it
restart() {
    kill -TERM "$server_pid"; wait "$server_pid" || fail "server exit $?"
    "$BIN" server --data-dir "$data" --listen "127.0.0.1:$port" --insecure-fast-password-hash \
        --rate-limit 0 "$@" >>"$tmp/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 200); do curl -fsS "$url/healthz" >/dev/null 2>&1 && return 0; sleep 0.05; done
    fail "no restart"
}
restart
[ "$(cat "$data/setup-token")" = "$first" ] || fail "a restart before use changed the setup token"
python3 - "$port" "$data/setup-token" <<'PY'
import json, os, sys, threading, http.client
PORT, SETUP_FILE = int(sys.argv[1]), sys.argv[2]
SETUP = open(SETUP_FILE).read().strip()
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
    return r.status, json.loads(d) if d else None
def user(name, **kw):
    return req("POST", "/v1/users", dict({"username": name, "email": name + "@x", "password": name + "-password"}, **kw))
st, b = user("mallory")
check(st == 201 and b["role"] == "user", "the first registrant without the token is a plain user: %s %s" % (st, b))
st, b = user("eve", setup_token="fgsetup_" + "A" * 43)
check(st == 403 and b["error"]["field"] == "setup_token", "a wrong setup token: %s %s" % (st, b))
check(os.path.exists(SETUP_FILE), "a wrong token does not use the file up")
# two racing claims: exactly one admin
res = {}
def claim(n): res[n] = user(n, setup_token=SETUP)
ts = [threading.Thread(target=claim, args=(n,)) for n in ("root", "toor")]
for t in ts: t.start()
for t in ts: t.join()
won = [n for n, (st, b) in res.items() if st == 201 and b["role"] == "admin"]
lost = [n for n, (st, b) in res.items() if st == 403]
check(len(won) == 1 and len(lost) == 1, "one of two racing claims wins: %s" % res)
check(not os.path.exists(SETUP_FILE), "the setup token file is removed once used")
st, b = user("trudy", setup_token=SETUP)
check(st == 403, "a used setup token is refused: %s %s" % (st, b))
st, b = user("carol")
check(st == 201 and b["role"] == "user", "later registrants are plain users: %s" % st)
if fails:
    print("%d FAILURES" % len(fails), file=sys.stderr)
    sys.exit(1)
PY
# after a restart: no new token (an admin exists) and the old one is still refused
restart
[ ! -e "$data/setup-token" ] || fail "a restart with an admin wrote a setup token again"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$url/v1/users" \
    -d "{\"username\":\"oscar\",\"email\":\"o@x\",\"password\":\"oscar-password\",\"setup_token\":\"$first\"}")
[ "$code" = 403 ] || fail "the used token after a restart: $code"
# closed registration: anonymous refused; an admin creates users
restart --registration closed
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$url/v1/users" -d '{"username":"peggy","email":"p@x","password":"peggy-password"}')
[ "$code" = 401 ] || fail "closed registration, anonymous: $code"
server_stop test_api_setup
rm -rf "$tmp"
# closed registration on a new cluster: the token's holder creates the first admin
server_start test_api_setup_closed "$BIN" --insecure-fast-password-hash --rate-limit 0 --registration closed
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$url/v1/users" -d '{"username":"first","email":"f@x","password":"first-password"}')
[ "$code" = 401 ] || fail "closed registration let the first anonymous registrant in: $code"
role=$(server_admin root r@x root-password | python3 -c 'import json,sys; print(json.load(sys.stdin).get("role"))')
[ "$role" = admin ] || fail "closed registration: the setup token made '$role'"
server_stop test_api_setup_closed
echo "test_api_setup: OK"
