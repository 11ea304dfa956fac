#!/usr/bin/env bash
# test_route_matrix.sh - every route of the controller, tried by every kind of caller:
# anonymous, user A (alice), user B (bob), an admin (root), the agent of node X and the
# agent of node Y (real agents, on a real server), each answer's status compared with
# the row's. The list of routes comes from the routing table itself (`fairgpu server
# --list-routes`): a route without a row fails the test, so a new route cannot be added
# without saying who may call it. Requests are made so that they change nothing that
# later rows need (bodies that fail validation after the access check, objects made for
# the purpose).
#
# usage: bash test_route_matrix.sh /path/to/fairgpu      (needs curl and jq)
FG_TEST_NAME=test_route_matrix
source "$(dirname "$0")/lib_agent.sh"
start_agent() { # start_agent NAME
    "$FG" agent --server "$URL" --token-file "$TMP/data/agent.token" --name "$1" \
        --fake-gpus 2 --gpu-type h100 --work-dir "$TMP/w-$1" --heartbeat 1 \
        --user-map "$TMP/usermap" --stop-jobs-on-exit >>"$TMP/agent-$1.log" 2>&1 &
    AGENT_PIDS+=($!)
}
start_agent nx
start_agent ny
nodes_up() { [ "$(api GET /v1/nodes | jq '[.items[] | select(.state=="up")] | length')" = 2 ]; }
check "agents of nodes X (nx) and Y (ny) register" wait_for 20 nodes_up

# The agents' credentials, in one place: each node joined with the cluster's join token
# and keeps its own credential in its work dir.
AGENT_X_TOKEN=$(tr -d '\n' <"$TMP/w-nx/node.token")
AGENT_Y_TOKEN=$(tr -d '\n' <"$TMP/w-ny/node.token")
[ -n "$AGENT_X_TOKEN" ] && [ "$AGENT_X_TOKEN" != "$AGENT_Y_TOKEN" ] ||
    fail "nodes X and Y have credentials of their own"
"$FG" server --list-routes >"$TMP/routes" || fail "fairgpu server --list-routes"
export ALICE ROOT AGENT_X_TOKEN AGENT_Y_TOKEN
python3 - "$URL" "$TMP/routes" <<'PY' || fail "the route matrix"
import json, os, sys, time, urllib.request, urllib.error
URL, ROUTES = sys.argv[1], sys.argv[2]
T = {"anon": None, "A": os.environ["ALICE"], "admin": os.environ["ROOT"],
     "X": os.environ["AGENT_X_TOKEN"], "Y": os.environ["AGENT_Y_TOKEN"]}
def req(method, path, body=None, token=None):
    h = {"Content-Type": "application/json"}
    if token: h["Authorization"] = "Bearer " + token
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request(URL + path, data=data, headers=h, method=method)
    try:
        with urllib.request.urlopen(r, timeout=30) as resp:
            raw = resp.read(); st = resp.status
    except urllib.error.HTTPError as e:
        raw = e.read(); st = e.code
    try:
        return st, json.loads(raw) if raw else None
    except ValueError:
        return st, raw.decode(errors="replace")
def mk(name):
    st, u = req("POST", "/v1/users", {"username": name, "email": name + "@example.org", "password": name + "-password-1"})
    assert st == 201, (st, u)
    return u
bob, victim = mk("bob"), mk("victim")
T["B"] = req("POST", "/v1/sessions", {"username": "bob", "password": "bob-password-1"})[1]["token"]
# what the rows work on: jobs of A that stay pending (more GPUs than the nodes hold),
# one of them to cancel, and an API token of A to delete
job = req("POST", "/v1/jobs", {"name": "held", "command": ["true"], "gpus": 64}, T["A"])[1]["id"]
job_c = req("POST", "/v1/jobs", {"name": "to-cancel", "command": ["true"], "gpus": 64}, T["A"])[1]["id"]
tok_a = req("POST", "/v1/tokens", {"name": "to-delete"}, T["A"])[1]["id"]
WHO = ["anon", "A", "B", "admin", "X", "Y"]
def row(anon, a, b, admin, x, y=None):
    return dict(zip(WHO, (anon, a, b, admin, x, x if y is None else y)))
PUBLIC = lambda st: row(st, st, st, st, st)
USER = lambda a, b=None, admin=None: row(401, a, a if b is None else b, a if admin is None else admin, 401)
ADMIN = lambda admin: row(401, 403, 403, admin, 401)
AGENT = lambda x, y=None: row(401, 401, 401, 401, x, y)
# Agent Y acting as node X: refused, whatever X's own agent would be answered.
Y_ON_X = 403
# (method, route pattern as --list-routes prints it, path, body, expected statuses)
MATRIX = [
    ("GET", "/healthz", "/healthz", None, PUBLIC(200)),
    ("GET", "/metrics", "/metrics", None, PUBLIC(200)),  # metrics-access local: loopback peers
    ("POST", "/v1/users", "/v1/users", {}, PUBLIC(400)),
    ("GET", "/v1/users", "/v1/users", None, ADMIN(200)),
    ("PATCH", "/v1/users/*", "/v1/users/" + bob["id"], {}, ADMIN(200)),
    ("POST", "/v1/users/*/revoke", "/v1/users/victim/revoke", None, ADMIN(200)),
    ("POST", "/v1/sessions", "/v1/sessions", {}, PUBLIC(400)),
    ("DELETE", "/v1/sessions/*", "/v1/sessions/other", None, USER(404)),
    ("GET", "/v1/me", "/v1/me", None, USER(200)),
    ("PATCH", "/v1/me", "/v1/me", {"email": "no-at-sign"}, USER(400)),
    ("POST", "/v1/tokens", "/v1/tokens", {}, USER(400)),
    ("GET", "/v1/tokens", "/v1/tokens", None, USER(200)),
    ("DELETE", "/v1/tokens/*", "/v1/tokens/" + tok_a, None, USER(204, 404, 404)),  # tokens are personal
    ("POST", "/v1/accounts", "/v1/accounts", {}, ADMIN(400)),
    ("GET", "/v1/accounts", "/v1/accounts", None, USER(200)),
    ("GET", "/v1/accounts/*", "/v1/accounts/default", None, USER(200)),
    ("PATCH", "/v1/accounts/*", "/v1/accounts/default", {}, ADMIN(200)),
    ("POST", "/v1/accounts/*/members", "/v1/accounts/default/members", {}, ADMIN(400)),
    ("PATCH", "/v1/accounts/*/members/*", "/v1/accounts/default/members/nobody", {}, ADMIN(400)),
    ("DELETE", "/v1/accounts/*/members/*", "/v1/accounts/default/members/nobody", None, ADMIN(404)),
    ("GET", "/v1/audit", "/v1/audit", None, ADMIN(200)),
    ("POST", "/v1/jobs", "/v1/jobs", {}, USER(400)),
    ("GET", "/v1/jobs", "/v1/jobs", None, USER(200)),
    ("GET", "/v1/jobs/*", "/v1/jobs/" + job, None, USER(200)),  # others see a job without its command
    ("POST", "/v1/jobs/*/cancel", "/v1/jobs/%s/cancel" % job_c, None, USER(200, 403, 409)),  # A cancels first
    ("GET", "/v1/jobs/*/events", "/v1/jobs/%s/events" % job, None, USER(200, 403, 200)),
    ("GET", "/v1/jobs/*/attempts", "/v1/jobs/%s/attempts" % job, None, USER(200, 403, 200)),
    ("GET", "/v1/jobs/*/logs", "/v1/jobs/%s/logs" % job, None, USER(200, 403, 200)),
    ("GET", "/v1/events", "/v1/events", None, USER(200)),
    ("GET", "/v1/nodes", "/v1/nodes", None, USER(200)),
    ("POST", "/v1/nodes/*/drain", "/v1/nodes/nosuch/drain", None, ADMIN(404)),
    ("POST", "/v1/nodes/*/resume", "/v1/nodes/nosuch/resume", None, ADMIN(404)),
    ("POST", "/v1/nodes/*/credentials", "/v1/nodes/nz/credentials", None, ADMIN(201)),  # issued ahead
    ("DELETE", "/v1/nodes/*/credentials", "/v1/nodes/nz/credentials", None, ADMIN(200)),
    ("POST", "/v1/agent/join", "/v1/agent/join", {"node": "nx"}, AGENT(401)),  # the join token only
    ("GET", "/v1/fairshare", "/v1/fairshare", None, USER(200)),
    ("GET", "/v1/estimates/accuracy", "/v1/estimates/accuracy", None, USER(200)),
    ("POST", "/v1/agent/register", "/v1/agent/register", {}, AGENT(400)),
    ("POST", "/v1/agent/heartbeat", "/v1/agent/heartbeat", {"node": "nx", "instance": "bogus", "epoch": 0}, AGENT(409, Y_ON_X)),
    ("GET", "/v1/agent/assignments", "/v1/agent/assignments?node=nx&instance=bogus&wait=0", None, AGENT(409, Y_ON_X)),
    ("POST", "/v1/agent/started", "/v1/agent/started", {}, AGENT(400)),
    ("POST", "/v1/agent/logs", "/v1/agent/logs", {}, AGENT(400)),
    ("POST", "/v1/agent/exited", "/v1/agent/exited", {}, AGENT(400)),
    ("POST", "/v1/agent/reports", "/v1/agent/reports", {}, AGENT(400)),
    ("GET", "/v1/billing/prices", "/v1/billing/prices", None, USER(200)),
    ("PUT", "/v1/billing/prices", "/v1/billing/prices", {}, ADMIN(400)),
    ("GET", "/v1/billing/usage", "/v1/billing/usage", None, USER(200)),
    ("GET", "/v1/billing/invoices/*", "/v1/billing/invoices/2026-11", None, USER(200)),
    ("POST", "/v1/billing/adjustments", "/v1/billing/adjustments", {}, ADMIN(400)),
] + [(m, "/v1/billing/**", "/v1/billing/budgets", {} if m != "GET" else None, USER(501))
     for m in ("GET", "PUT", "POST", "PATCH", "DELETE")]
fails = []
routes = set()
for line in open(ROUTES):
    parts = line.split()
    if len(parts) >= 2:
        routes.add((parts[0], parts[1]))
rows = {(m, p) for m, p, *_ in MATRIX}
for r in sorted(routes - rows):
    fails.append("route %s %s has no row in the matrix: add one" % r)
for r in sorted(rows - routes):
    fails.append("row %s %s names no route of --list-routes" % r)
if len(routes) < 30:
    fails.append("--list-routes printed only %d routes" % len(routes))
n = 0
for method, pat, path, body, want in MATRIX:
    for who in WHO:
        st, b = req(method, path, body, T[who])
        n += 1
        if st != want[who]:
            fails.append("%s %s as %s: %s, want %s (%s)" % (method, path, who, st, want[who], str(b)[:160]))
st, _ = req("GET", "/v1/me", token=T["A"])
if st != 200:
    fails.append("user A's session did not survive the matrix: %s" % st)
for f in fails:
    print("FAIL:", f, file=sys.stderr)
print("route matrix: %d routes, %d requests, %d failures" % (len(routes), n, len(fails)))
sys.exit(1 if fails else 0)
PY
ok
[ "$FAILS" = 0 ] || exit 1
echo "test_route_matrix: $CHECKS checks passed"
