#!/usr/bin/env bash
# Cursors, offsets and indexes from clients never read out of bounds: every list route
# is asked, as a user and as an admin, for pages from cursors and positions before,
# inside and far past what exists (the largest cursor, one past the last job, ids
# 2^20 and 2^63-1, negative and non-numeric values, both orders). Each request gets a
# 200 or a 400 naming the parameter, never a 5xx or a dropped connection; the pages
# hold what they should (a descending walk from past the end starts at the newest job,
# one from the first job is empty); paths of bytes that are not UTF-8 get a JSON
# error; and the server stays up and stops cleanly.
set -euo pipefail
BIN=${1:?usage: test_api_cursors.sh /path/to/fairgpu}
source "$(dirname "$0")/lib_server.sh"
server_start test_api_cursors "$BIN" --insecure-fast-password-hash --rate-limit 0
server_admin root r@x root-password >/dev/null
python3 - "$port" <<'PY'
import json, sys, http.client
PORT = int(sys.argv[1])
fails = []
def check(c, what):
    if not c:
        fails.append(what); print("FAIL:", what, file=sys.stderr)
def req(method, path, body=None, token=None):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    h = {"Content-Type": "application/json"}
    if token: h["Authorization"] = "Bearer " + token
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
        r = c.getresponse()
        d = r.read()
    except (ConnectionError, http.client.HTTPException) as e:
        return 0, {"dropped": str(e)}
    finally:
        c.close()
    try:
        return r.status, json.loads(d) if d else None
    except ValueError:
        return r.status, d.decode(errors="replace")
req("POST", "/v1/users", {"username": "alice", "email": "a@x", "password": "alice-password"})
TR = req("POST", "/v1/sessions", {"username": "root", "password": "root-password"})[1]["token"]
TA = req("POST", "/v1/sessions", {"username": "alice", "password": "alice-password"})[1]["token"]
jobs = [req("POST", "/v1/jobs", {"name": "j%d" % i, "command": ["true"], "gpus": 1}, TA)[1]["id"] for i in range(3)]
req("POST", "/v1/tokens", {"name": "t"}, TA)
req("POST", "/v1/accounts", {"name": "acct"}, TR)
top = max(int(j) for j in jobs)
def cur(n): return "c%016x" % n
# the reported crash: a descending walk from a cursor past the end
st, b = req("GET", "/v1/jobs?order=desc&cursor=c0000000000100000", token=TA)
check(st == 200, "desc from cursor 2^20: %s %s" % (st, b))
check(st == 200 and [j["id"] for j in b["items"]] == sorted(jobs, key=int, reverse=True),
      "desc from past the end starts at the newest job: %s" % (b,))
st, b = req("GET", "/v1/jobs?order=desc&cursor=" + cur(1), token=TA)
check(st == 200 and b["items"] == [], "desc from the first job is empty: %s %s" % (st, b))
st, b = req("GET", "/v1/jobs?order=desc&limit=1&cursor=" + cur(top), token=TA)
check(st == 200 and [j["id"] for j in b["items"]] == [str(top - 1)], "desc from the last: %s %s" % (st, b))
cursors = ["", cur(0), cur(1), cur(top), cur(top + 1), cur(1 << 20), cur((1 << 63) - 1), "c" + "f" * 16,
           "c" + "0" * 15, "c" + "0" * 17, "x" * 17, "-1", "%00", "c-000000000000001"]
ints = ["0", "1", "-1", str(top), str(top + 1), "1048576", "9223372036854775807", "9223372036854775808",
        "99999999999999999999", "-9223372036854775808", "x", "", "1e3", "%201", "%2B1"]
job = jobs[0]
paths = []
for c in cursors:
    for order in ("asc", "desc"):
        paths.append("/v1/jobs?order=%s&cursor=%s" % (order, c))
        paths.append("/v1/jobs?order=%s&limit=1&user=alice&cursor=%s" % (order, c))
    paths += ["/v1/users?cursor=" + c, "/v1/audit?cursor=" + c, "/v1/tokens?cursor=" + c,
              "/v1/accounts?cursor=" + c, "/v1/nodes?cursor=" + c, "/v1/jobs/%s/events?cursor=%s" % (job, c),
              "/v1/jobs/%s/attempts?cursor=%s" % (job, c)]
for n in ints:
    paths += ["/v1/events?since=" + n, "/v1/events?since=%s&limit=%s" % (n, n), "/v1/jobs?limit=" + n,
              "/v1/users?limit=" + n, "/v1/audit?limit=" + n, "/v1/jobs/%s/logs?offset=%s" % (job, n),
              "/v1/jobs/%s/logs?rank=%s" % (job, n), "/v1/jobs/%s/logs?attempt=%s" % (job, n),
              "/v1/jobs/%s/logs?offset=%s&rank=0&attempt=1" % (job, n), "/v1/jobs/" + n, "/v1/jobs/%s/events" % n,
              "/v1/jobs/%s/attempts" % n, "/v1/jobs/%s/logs" % n, "/v1/events?wait=0&since=" + n]
for p in paths:
    for tok in (TA, TR):
        st, b = req("GET", p, token=tok)
        check(st in (200, 400, 403, 404), "GET %s: %s %s" % (p, st, str(b)[:200]))
        if st == 400:
            check(isinstance(b, dict) and b["error"]["code"] == "invalid_argument" and b["error"].get("field"),
                  "GET %s: 400 names the parameter: %s" % (p, b))
# a client's bytes quoted in an error message (found by fuzz_routes: invalid UTF-8 in
# the path made the error unrenderable, a 500)
for p in ("/%81%CE/jobs", "/v1/%FF", "/v1/jobs/%C0%80", "/v1/accounts/%ED%A0%80", "/v1/nodes/%F4%90%80%80/drain"):
    st, b = req("GET", p, token=TA)
    check(st in (404, 405) and isinstance(b, dict) and b["error"]["code"] in ("not_found", "method_not_allowed"),
          "GET %s: a JSON error, not %s %s" % (p, st, b))
st, b = req("GET", "/healthz")
check(st == 200, "healthy after %d requests: %s" % (2 * len(paths), st))
if fails:
    print("%d FAILURES" % len(fails), file=sys.stderr)
    sys.exit(1)
print("test_api_cursors: %d requests, all answered" % (2 * len(paths)))
PY
server_stop test_api_cursors
echo "test_api_cursors: OK"
