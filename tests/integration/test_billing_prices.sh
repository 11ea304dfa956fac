#!/usr/bin/env bash
# The price book (docs/billing.md) against a real server: an admin sets prices (PUT
# /v1/billing/prices), a user reads them (GET); a change effective later leaves reads
# ?at= an earlier time as they were; bad bodies get 400 and a non-admin PUT 403, none of
# which changes the book or the audit log; every change has its audit entry; and the
# book is the same after a restart.
set -euo pipefail
BIN=${1:?usage: test_billing_prices.sh /path/to/fairgpu}
source "$(dirname "$0")/lib_server.sh"
server_start billing_prices "$BIN" --insecure-fast-password-hash --rate-limit 0
server_admin root root@example.org admin-password >/dev/null

# phase: the book and its checks; "after" re-reads it after a restart.
check_book() {
    python3 - "$url" "$1" "$tmp/state.json" <<'PY'
import json, sys, time, urllib.request, urllib.error
URL, PHASE, STATE = sys.argv[1], sys.argv[2], sys.argv[3]
fails = []

def req(method, path, body=None, token=None, raw=None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    r = urllib.request.Request(URL + path, data=data, method=method,
                               headers={"Content-Type": "application/json"})
    if token:
        r.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(r, timeout=30) as resp:
            txt = resp.read()
            return resp.status, json.loads(txt) if txt else None
    except urllib.error.HTTPError as e:
        txt = e.read()
        return e.code, json.loads(txt) if txt else None

def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what, file=sys.stderr)

def login(u, p):
    st, b = req("POST", "/v1/sessions", {"username": u, "password": p})
    assert st == 201, (st, b)
    return b["token"]

def rows(book):
    return sorted((p["gpu_type"], p["priority"], p["micros_per_gpu_hour"]) for p in book["prices"])

def audits(tr):
    st, a = req("GET", "/v1/audit?limit=1000", token=tr)
    assert st == 200, (st, a)
    return [x for x in a["items"] if x["action"] == "billing.prices.set"]

TR = login("root", "admin-password")
if PHASE == "before":
    st, u = req("POST", "/v1/users", {"username": "alice", "email": "a@example.org",
                                      "password": "alice-password"}, token=TR)
    check(st == 201, "admin creates alice: %s %s" % (st, u))
TA = login("alice", "alice-password")

if PHASE == "before":
    st, b = req("GET", "/v1/billing/prices", token=TA)
    check(st == 200 and b["prices"] == [] and b["currency"] is None, "empty book: %s %s" % (st, b))
    first = {"currency": "EUR", "prices": [
        {"gpu_type": "*", "priority": "low", "micros_per_gpu_hour": 1000000},
        {"gpu_type": "*", "priority": "normal", "micros_per_gpu_hour": 2000000},
        {"gpu_type": "*", "priority": "high", "micros_per_gpu_hour": 4000000},
        {"gpu_type": "H100", "priority": "normal", "micros_per_gpu_hour": 3500000}]}
    st, b = req("PUT", "/v1/billing/prices", first, token=TR)
    check(st == 200 and b["currency"] == "EUR" and len(b["prices"]) == 4, "admin PUT: %s %s" % (st, b))
    t1 = b["effective_ms"]
    check(abs(t1 - time.time() * 1000) < 60000, "effective_ms defaults to now: %s" % t1)
    st, b = req("GET", "/v1/billing/prices", token=TA)
    check(st == 200 and b["currency"] == "EUR" and rows(b) == [
        ("*", "high", 4000000), ("*", "low", 1000000), ("*", "normal", 2000000),
        ("H100", "normal", 3500000)], "user GET sees the book: %s" % b)
    # a change effective in an hour: reads before it are unchanged
    t2 = int(time.time() * 1000) + 3600 * 1000
    st, b = req("PUT", "/v1/billing/prices", {"currency": "EUR", "effective_ms": t2, "prices": [
        {"gpu_type": "H100", "priority": "normal", "micros_per_gpu_hour": 5000000}]}, token=TR)
    check(st == 200 and b["effective_ms"] == t2, "a later change: %s %s" % (st, b))
    for at, want in [(t1, 3500000), (t2 - 1, 3500000), (t2, 5000000), (t2 + 10**9, 5000000)]:
        st, b = req("GET", "/v1/billing/prices?at=%d" % at, token=TA)
        h = [p for p in b["prices"] if p["gpu_type"] == "H100"]
        check(st == 200 and b["at_ms"] == at and [p["micros_per_gpu_hour"] for p in h] == [want],
              "H100 normal at %d is %d: %s" % (at, want, b))
    st, b = req("GET", "/v1/billing/prices?at=%d" % (t1 - 1), token=TA)
    check(st == 200 and b["prices"] == [], "before the first change there is no price: %s" % b)
    st, b = req("GET", "/v1/billing/prices", token=TA)
    check([p["micros_per_gpu_hour"] for p in b["prices"] if p["gpu_type"] == "H100"] == [3500000],
          "now still the first H100 price: %s" % b)
    n_audit = len(audits(TR))
    check(n_audit == 2, "one audit entry per change: %d" % n_audit)
    a = audits(TR)[0]
    check(a["target"] == "EUR" and a["details"]["effective_ms"] == t2, "the audit entry says what: %s" % a)

    # refusals change nothing
    before = {at: req("GET", "/v1/billing/prices?at=%d" % at, token=TA)[1]["prices"] for at in (t1, t2)}
    good_row = {"gpu_type": "A100", "priority": "low", "micros_per_gpu_hour": 7}
    bad = [
        ({"currency": "EUR", "prices": [dict(good_row, micros_per_gpu_hour=-1)]}, "micros_per_gpu_hour"),
        ({"currency": "EUR", "prices": [dict(good_row, micros_per_gpu_hour=1.5)]}, "micros_per_gpu_hour"),
        ({"currency": "EUR", "prices": [dict(good_row, micros_per_gpu_hour="7")]}, "micros_per_gpu_hour"),
        ({"currency": "EUR", "prices": [dict(good_row, priority="urgent")]}, "priority"),
        ({"currency": "eur", "prices": [good_row]}, "currency"),
        ({"currency": "EURO", "prices": [good_row]}, "currency"),
        ({"currency": "USD", "prices": [good_row]}, "currency"),  # the book is in EUR
        ({"currency": "EUR", "prices": [dict(good_row, gpu_type="T%d" % i) for i in range(257)]}, "prices"),
        ({"currency": "EUR", "prices": [good_row, good_row]}, "prices"),
        ({"currency": "EUR", "prices": []}, "prices"),
        ({"currency": "EUR", "effective_ms": 1000, "prices": [good_row]}, "effective_ms"),
        ({"currency": "EUR", "prices": [dict(good_row, gpu_type="a b")]}, "gpu_type"),
        ({"currency": "EUR", "prices": [good_row], "note": "x"}, "note"),
    ]
    for body, field in bad:
        st, b = req("PUT", "/v1/billing/prices", body, token=TR)
        check(st == 400 and b["error"]["code"] == "invalid_argument" and b["error"]["field"] == field
              and b["error"]["message"], "400 naming %s: %s %s" % (field, st, b))
    st, b = req("PUT", "/v1/billing/prices", raw=b'{"currency": "EUR", "prices": [', token=TR)
    check(st == 400 and b["error"]["code"] == "invalid_json", "invalid JSON: %s %s" % (st, b))
    st, b = req("PUT", "/v1/billing/prices", {"currency": "EUR", "prices": [good_row]}, token=TA)
    check(st == 403 and b["error"]["code"] == "forbidden", "non-admin PUT is 403: %s %s" % (st, b))
    st, b = req("PUT", "/v1/billing/prices", {"currency": "EUR", "prices": [good_row]})
    check(st == 401, "anonymous PUT is 401: %s" % st)
    st, b = req("POST", "/v1/billing/prices", {"currency": "EUR", "prices": [good_row]}, token=TR)
    check(st == 405, "POST is 405: %s" % st)
    st, b = req("GET", "/v1/billing/prices?at=-5", token=TA)
    check(st == 400 and b["error"]["field"] == "at", "bad ?at= is 400: %s %s" % (st, b))
    st, b = req("GET", "/v1/billing/budgets", token=TA)
    check(st == 501, "the rest of billing is still 501: %s" % st)
    after = {at: req("GET", "/v1/billing/prices?at=%d" % at, token=TA)[1]["prices"] for at in (t1, t2)}
    check(after == before, "refused changes left the book as it was")
    check(len(audits(TR)) == n_audit, "refused changes wrote no audit entry")
    json.dump({"t1": t1, "t2": t2, "book": before, "audit": n_audit}, open(STATE, "w"))
else:
    s = json.load(open(STATE))
    now = {at: req("GET", "/v1/billing/prices?at=%d" % at, token=TA)[1]["prices"] for at in (s["t1"], s["t2"])}
    check(now == {int(k): v for k, v in s["book"].items()}, "the book survives a restart: %s" % now)
    check(len(audits(TR)) == s["audit"], "the audit entries survive a restart")
if fails:
    print("test_billing_prices: %d failures (%s)" % (len(fails), PHASE), file=sys.stderr)
    sys.exit(1)
print("test_billing_prices: %s OK" % PHASE)
PY
}

check_book before
server_stop billing_prices
# the same data directory, a fresh process
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port
"$BIN" server --data-dir "$tmp/data" --listen "127.0.0.1:$port" --insecure-fast-password-hash \
    --rate-limit 0 >>"$tmp/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 200); do
    curl -fsS "$url/healthz" >/dev/null 2>&1 && break
    sleep 0.05
done
check_book after
server_stop billing_prices
echo "test_billing_prices: OK"
