#!/usr/bin/env bash
# The billing reports (docs/billing.md, "Reports") against a real server: admin
# adjustments (credit and correction rows, each with its audit entry), who sees which
# usage lines (a member their own, an account manager their account, an admin all, and
# 403 rather than an empty answer for the rest), the filters, CSV quoting and its
# formula guard, invoices whose totals are the sums of their lines and of the month's
# usage lines, and bad input answered 400 naming the field with nothing changed. The
# CLI's `usage`, `invoice` and `credit` run against the same server at the end.
set -euo pipefail
BIN=${1:?usage: test_billing_reports.sh /path/to/fairgpu}
source "$(dirname "$0")/lib_server.sh"
server_start billing_reports "$BIN" --insecure-fast-password-hash --rate-limit 0
server_admin root root@example.org admin-password >/dev/null

python3 - "$url" <<'PY' || { tail -40 "$tmp/server.log" >&2; exit 1; }
import csv, io, json, sys, time, urllib.request, urllib.error
URL = sys.argv[1]
fails = []

def req(method, path, body=None, token=None, raw=False):
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request(URL + path, data=data, method=method,
                               headers={"Content-Type": "application/json"})
    if token:
        r.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(r, timeout=30) as resp:
            txt = resp.read()
            if raw:
                return resp.status, txt.decode(), resp.headers.get("Content-Type")
            return resp.status, json.loads(txt) if txt else None
    except urllib.error.HTTPError as e:
        txt = e.read()
        if raw:
            return e.code, txt.decode(), e.headers.get("Content-Type")
        return e.code, json.loads(txt) if txt else None

def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what, file=sys.stderr)

def login(u, p):
    st, b = req("POST", "/v1/sessions", {"username": u, "password": p})
    assert st == 201, (st, b)
    return b["token"]

TR = login("root", "admin-password")
for a in ("vision", "nlp"):
    st, b = req("POST", "/v1/accounts", {"name": a}, token=TR)
    assert st == 201, (st, b)
for u, a in (("ann", "vision"), ("bob", "vision"), ("carl", "nlp")):
    st, b = req("POST", "/v1/users", {"username": u, "email": u + "@example.org",
                                      "password": u + "-password", "account": a}, token=TR)
    assert st == 201, (st, b)
st, b = req("PUT", "/v1/billing/prices", {"currency": "EUR", "prices": [
    {"gpu_type": "*", "priority": "normal", "micros_per_gpu_hour": 2000000}]}, token=TR)
assert st == 200, (st, b)
TA, TB, TC = login("ann", "ann-password"), login("bob", "bob-password"), login("carl", "carl-password")

# ---- account managers
st, b = req("PATCH", "/v1/accounts/vision/members/bob", {"manager": True}, token=TB)
check(st == 403, "a non-admin may not make managers: %s" % st)
for body, field in (({"manager": "yes"}, "manager"), ({"boss": True}, "boss"), ({}, None)):
    st, b = req("PATCH", "/v1/accounts/vision/members/bob", body, token=TR)
    check(st == 400 and b["error"].get("field") == field, "PATCH member %s: %s %s" % (body, st, b))
st, b = req("PATCH", "/v1/accounts/nlp/members/bob", {"manager": True}, token=TR)
check(st == 404, "bob is not a member of nlp: %s" % st)
st, b = req("PATCH", "/v1/accounts/vision/members/bob", {"manager": True}, token=TR)
check(st == 200 and [m["manager"] for m in b["members"] if m["user"] == "bob"] == [True],
      "bob manages vision: %s %s" % (st, b))
st, b = req("GET", "/v1/accounts/vision", token=TA)
check({m["user"]: m["manager"] for m in b["members"]} == {"ann": False, "bob": True},
      "member listings show managers: %s" % b)

# ---- adjustments
def audits():
    st, a = req("GET", "/v1/audit?limit=1000", token=TR)
    assert st == 200
    return [x for x in a["items"] if x["action"] == "billing.adjustment"]

def usage(token, q=""):
    return req("GET", "/v1/billing/usage" + q, token=token)

good = [
    {"kind": "credit", "account": "vision", "user": "ann", "amount_micros": -5000000, "note": "outage 3 Nov"},
    {"kind": "credit", "account": "vision", "user": "bob", "amount_micros": -1000000, "note": "plain"},
    {"kind": "credit", "account": "nlp", "user": "carl", "amount_micros": -2000000, "note": 'a,"b"\u00e9'},
    {"kind": "credit", "account": "vision", "user": "ann", "amount_micros": -3, "note": "=HYPERLINK(\"x\")"},
]
t0 = int(time.time() * 1000)
ids = []
for body in good:
    st, b = req("POST", "/v1/billing/adjustments", body, token=TR)
    check(st == 201 and b["kind"] == "credit" and b["amount_micros"] == body["amount_micros"]
          and b["note"] == body["note"] and b["account"] == body["account"], "credit: %s %s" % (st, b))
    ids.append(int(b["id"]))
st, b = req("POST", "/v1/billing/adjustments", {"kind": "correction", "account": "vision",
            "amount_micros": 1000000, "refers_to": ids[0], "note": "half of it was not an outage"}, token=TR)
check(st == 201 and b["kind"] == "correction" and b["refers_to"] == ids[0] and b["user"] == "ann",
      "a correction takes the user of its row: %s %s" % (st, b))
ids.append(int(b["id"]))
t1 = int(time.time() * 1000) + 1
check(len(set(ids)) == 5 and ids == sorted(ids), "row ids increase: %s" % ids)
aud = audits()
check(len(aud) == 5 and sorted(int(a["details"]["id"]) for a in aud) == ids
      and all(a["admin"] == "root" for a in aud), "one audit entry per adjustment: %s" % aud)
before_rows = usage(TR)[1]
n_audit = len(aud)
bad = [
    ({"kind": "refund", "account": "vision", "amount_micros": -1, "note": "x"}, "kind"),
    ({"kind": "credit", "account": "vision", "amount_micros": 5, "note": "x"}, "amount_micros"),
    ({"kind": "credit", "account": "vision", "amount_micros": 0, "note": "x"}, "amount_micros"),
    ({"kind": "credit", "account": "vision", "amount_micros": -1.5, "note": "x"}, "amount_micros"),
    ({"kind": "credit", "account": "vision", "amount_micros": -10**16, "note": "x"}, "amount_micros"),
    ({"kind": "correction", "account": "vision", "amount_micros": 1, "note": "x"}, "refers_to"),
    ({"kind": "correction", "account": "vision", "amount_micros": 1, "refers_to": 999999, "note": "x"}, "refers_to"),
    ({"kind": "correction", "account": "vision", "amount_micros": 1, "refers_to": ids[2], "note": "x"}, "refers_to"),
    ({"kind": "credit", "account": "vision", "amount_micros": -1}, "note"),
    ({"kind": "credit", "account": "vision", "amount_micros": -1, "note": ""}, "note"),
    ({"kind": "credit", "account": "vision", "amount_micros": -1, "note": "x" * 128}, "note"),
    ({"kind": "credit", "account": "vision", "amount_micros": -1, "note": "two\nlines"}, "note"),
    ({"kind": "credit", "account": "vision", "amount_micros": -1, "note": "x", "why": 1}, "why"),
    ({"kind": "credit", "amount_micros": -1, "note": "x"}, "account"),
    ({"kind": "credit", "account": "nosuch", "amount_micros": -1, "note": "x"}, "account"),
    ({"kind": "credit", "account": "vision", "user": "nosuch", "amount_micros": -1, "note": "x"}, "user"),
]
for body, field in bad:
    st, b = req("POST", "/v1/billing/adjustments", body, token=TR)
    check(st == 400 and b["error"]["code"] == "invalid_argument" and b["error"].get("field") == field,
          "adjustment 400 naming %s: %s %s" % (field, st, b))
st, b = req("POST", "/v1/billing/adjustments", good[0], token=TB)
check(st == 403, "a manager may not add adjustments: %s" % st)
check(usage(TR)[1] == before_rows and len(audits()) == n_audit, "refused adjustments changed nothing")
st, b = req("POST", "/v1/billing/adjustments", good[1], token=TR)
check(st == 201 and b["note"] == "plain", "a 128-byte note limit leaves 127: %s" % st)
extra = int(b["id"])
st, b = req("POST", "/v1/billing/adjustments", dict(good[1], note="x" * 127, amount_micros=-7), token=TR)
check(st == 201, "a note of 127 bytes: %s %s" % (st, b))
extra2 = int(b["id"])

# ---- who sees what
def rowids(b):
    return sorted(i["row_id"] for i in b["items"])
all_ids = ids + [extra, extra2]
st, b = usage(TR)
check(st == 200 and rowids(b) == sorted(all_ids), "an admin sees every row: %s" % b)
check(b["currency"] == "EUR" and b["totals"]["cost_micros"] == sum(i["cost_micros"] for i in b["items"])
      == -5000000 - 1000000 - 2000000 - 3 + 1000000 - 1000000 - 7, "totals are the sums: %s" % b["totals"])
st, b = usage(TA)
check(st == 200 and {i["user"] for i in b["items"]} == {"ann"} and rowids(b) == [ids[0], ids[3], ids[4]],
      "ann sees her own rows: %s" % b)
st, b = usage(TA, "?account=vision")
check(st == 200 and {i["user"] for i in b["items"]} == {"ann"}, "a member's account filter still shows her own: %s" % b)
for q in ("?user=bob", "?user=carl", "?user=bob&account=vision", "?user=nosuch"):
    st, b = usage(TA, q)
    check(st == 403 and b["error"]["code"] == "forbidden", "ann %s is 403: %s %s" % (q, st, b))
st, b = usage(TB)
check(st == 200 and rowids(b) == sorted(set(all_ids) - {ids[2]}), "bob sees all of vision: %s" % b)
st, b = usage(TB, "?user=ann")
check(st == 200 and rowids(b) == [ids[0], ids[3], ids[4]], "a manager sees a member's rows: %s" % b)
for q in ("?user=carl", "?account=nlp&user=carl"):
    st, b = usage(TB, q)
    check(st == 403, "bob %s is 403: %s" % (q, st))
st, b = usage(TB, "?account=nlp")
check(st == 200 and b["items"] == [], "bob has no rows of his own in nlp: %s" % b)
st, b = usage(TC)
check(st == 200 and rowids(b) == [ids[2]], "carl sees his one row: %s" % b)
st, b = usage(TR, "?account=nlp")
check(rowids(b) == [ids[2]], "admin ?account=nlp: %s" % b)
st, b = usage(TR, "?user=ann&account=vision")
check(rowids(b) == [ids[0], ids[3], ids[4]], "admin ?user=ann: %s" % b)

# ---- filters and times
iso = lambda ms: time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".%03dZ" % (ms % 1000)
for q, want in (("?from=%d" % t0, all_ids), ("?from=%d&to=%d" % (t0, t1), ids),
                ("?to=%d" % t0, []), ("?from=%d" % (t1 + 3600000), []),
                ("?from=2020-01-01", all_ids), ("?from=2020-01-01T00:00:00Z&to=2020-02-01", []),
                ("?from=%s&to=%s" % (iso(t0), iso(t1)), ids),
                ("?from=2020-01-01T02:00:00%2B02:00", all_ids),
                ("?gpu_type=H100", []), ("?job=12345", [])):
    st, b = usage(TR, q)
    check(st == 200 and rowids(b) == sorted(want), "filter %s: %s" % (q, [st, b]))
for q, field in (("?from=abc", "from"), ("?from=2026-02-30", "from"), ("?to=2026-11-01T10:00:00", "to"),
                 ("?from=2000&to=1000", "to"), ("?from=%2B5", "from"), ("?user=A%21B", "user"),
                 ("?account=x%20y", "account"), ("?gpu_type=a%2Cb", "gpu_type"), ("?job=x", "job"),
                 ("?format=xml", "format")):
    st, b = usage(TR, q)
    check(st == 400 and b["error"]["code"] == "invalid_argument" and b["error"]["field"] == field,
          "usage %s is 400 naming %s: %s %s" % (q, field, st, b))

# ---- CSV
st, txt, ct = req("GET", "/v1/billing/usage?format=csv", token=TR, raw=True)
check(st == 200 and ct.startswith("text/csv"), "CSV content type: %s %s" % (st, ct))
check("\r\n" in txt, "CSV lines end in CRLF")
rows = list(csv.DictReader(io.StringIO(txt, newline="")))
lines = [r for r in rows if r["kind"] != "total"]
tot = [r for r in rows if r["kind"] == "total"]
check(len(lines) == len(all_ids) and len(tot) == 1, "one CSV line per row and a total: %s" % rows)
notes = {int(r["row_id"]): r["note"] for r in lines}
check(notes.get(ids[2]) == 'a,"b"\u00e9', "a comma and quotes survive CSV: %r" % notes.get(ids[2]))
check(notes.get(ids[3]) == "'=HYPERLINK(\"x\")", "a formula gets a quote first: %r" % notes.get(ids[3]))
check('"a,""b""\u00e9"' in txt, "RFC 4180 quoting in the text: %r" % txt[:400])
check(int(tot[0]["cost_micros"]) == sum(int(r["cost_micros"]) for r in lines) and tot[0]["currency"] == "EUR",
      "the CSV total is the sum: %s" % tot)
check(all(r["cost_micros"].lstrip("-").isdigit() for r in lines), "negative amounts stay numbers")

# ---- invoices
month = time.strftime("%Y-%m", time.gmtime(t0 / 1000))
def inv(token, q=""):
    return req("GET", "/v1/billing/invoices/" + month + q, token=token)
def sums_ok(o):
    for a in o["accounts"]:
        for k in ("charge_micros", "refund_micros", "credit_micros", "total_micros", "gpu_ms"):
            if a[k] != sum(l[k] for l in a["lines"]):
                return False
    return o["total_micros"] == sum(a["total_micros"] for a in o["accounts"])
st, b = inv(TR)
check(st == 200 and b["month"] == month and b["currency"] == "EUR" and sums_ok(b),
      "admin invoice balances: %s %s" % (st, b))
acc = {a["account"]: a for a in b["accounts"]}
check(set(acc) == {"vision", "nlp"}, "accounts with rows: %s" % list(acc))
ms0, ms1 = b["from_ms"], b["to_ms"]
for name in acc:
    st, u = usage(TR, "?account=%s&from=%d&to=%d" % (name, ms0, ms1))
    check(u["totals"]["cost_micros"] == acc[name]["total_micros"],
          "%s: invoice total = usage total: %s %s" % (name, acc[name], u["totals"]))
v = acc.get("vision", {"lines": []})
check({(l["user"], l["total_micros"]) for l in v["lines"]} == {("ann", -4000003), ("bob", -1000007 - 1000000)},
      "vision lines per user: %s" % v)
st, b = inv(TA)
check(st == 200 and [(a["account"], a["scope"]) for a in b["accounts"]] == [("vision", "own")]
      and {l["user"] for l in b["accounts"][0]["lines"]} == {"ann"} and sums_ok(b),
      "a member sees her own lines: %s" % b)
st, b = inv(TB, "?account=vision")
check(st == 200 and b["accounts"][0]["scope"] == "account" and b["accounts"][0]["total_micros"] == v.get("total_micros"),
      "a manager sees the whole invoice: %s" % b)
st, b = inv(TA, "?account=nlp")
check(st == 403, "ann may not see nlp's invoice: %s" % st)
for m in ("2026-13", "2026-1", "2026-00", "26-11", "2026-11x", "1969-12"):
    st, b = req("GET", "/v1/billing/invoices/" + m, token=TR)
    check(st == 400 and b["error"]["field"] == "month", "month %s is 400: %s %s" % (m, st, b))
st, b = req("GET", "/v1/billing/invoices/2020-01", token=TR)
check(st == 200 and b["accounts"] == [] and b["total_micros"] == 0, "an empty month: %s" % b)
st, txt, ct = req("GET", "/v1/billing/invoices/%s?format=csv" % month, token=TR, raw=True)
rows = list(csv.DictReader(io.StringIO(txt, newline="")))
check(st == 200 and ct.startswith("text/csv") and rows, "invoice CSV: %s %s" % (st, ct))
for name in ("vision", "nlp"):
    ls = [int(r["total_micros"]) for r in rows if r["kind"] == "line" and r["account"] == name]
    at = [int(r["total_micros"]) for r in rows if r["kind"] == "account_total" and r["account"] == name]
    check(at == [sum(ls)], "CSV %s total = sum of lines: %s %s" % (name, ls, at))
check([int(r["total_micros"]) for r in rows if r["kind"] == "total"] ==
      [sum(int(r["total_micros"]) for r in rows if r["kind"] == "account_total")], "CSV grand total")
for m in ("POST", "PUT", "DELETE"):
    st, b = req(m, "/v1/billing/usage", {} if m != "DELETE" else None, token=TR)
    check(st == 405, "%s usage is 405: %s" % (m, st))
if fails:
    print("test_billing_reports: %d failures" % len(fails), file=sys.stderr)
    sys.exit(1)
print("test_billing_reports: API OK")
PY

# ---- the CLI
export FAIRGPU_URL=$url XDG_CONFIG_HOME=$tmp/cfg HOME=$tmp/home
mkdir -p "$HOME"
"$BIN" login root --password-stdin <<<admin-password >/dev/null
"$BIN" usage | grep -q "credit" || { echo "fairgpu usage: no credit line" >&2; exit 1; }
"$BIN" usage --csv | head -1 | grep -q "^kind,job_id" || { echo "fairgpu usage --csv: no header" >&2; exit 1; }
"$BIN" usage --account nlp --csv | grep -q '"a,""b""' || { echo "fairgpu usage --csv: quoting" >&2; exit 1; }
month=$(date -u +%Y-%m)
"$BIN" invoice "$month" --account vision | grep -q "TOTAL" || { echo "fairgpu invoice: no total" >&2; exit 1; }
"$BIN" invoice "$month" --csv | head -1 | grep -q "^kind,account" || { echo "fairgpu invoice --csv" >&2; exit 1; }
"$BIN" account set-member nlp carl --manager true | grep -q "Updated carl" || { echo "fairgpu account set-member" >&2; exit 1; }
"$BIN" account list --json >/dev/null
curl -s "$url/v1/accounts/nlp" -H "Authorization: Bearer $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$XDG_CONFIG_HOME/fairgpu/config.json")" |
    python3 -c 'import json,sys; m={x["user"]: x["manager"] for x in json.load(sys.stdin)["members"]}; assert m["carl"] is True, m' ||
    { echo "set-member did not make carl a manager" >&2; exit 1; }
"$BIN" credit nlp 1.5 --user carl --note "from the CLI" | grep -q "Credited" || { echo "fairgpu credit" >&2; exit 1; }
"$BIN" usage --account nlp --json | python3 -c 'import json,sys; b=json.load(sys.stdin)
assert b["totals"]["credit_micros"] == -3500000, b["totals"]' || { echo "fairgpu credit: wrong amount" >&2; exit 1; }
if "$BIN" invoice 2026-13 >/dev/null 2>&1; then echo "fairgpu invoice 2026-13 succeeded" >&2; exit 1; fi
server_stop billing_reports
echo "test_billing_reports: OK"
