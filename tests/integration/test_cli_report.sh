#!/usr/bin/env bash
# test_cli_report.sh - `fairgpu report` with a real server, a real agent with 8 fake
# GPUs and a few jobs of two accounts and two users (docs/cli.md, "report").
#
#   1. the Markdown's numbers are the API's: wait by job size (nearest-rank median, p90
#      and max of start - submit of the jobs started, pending counts), GPU-hours per
#      bucket and in all, utilization against the GPUs up, Jain's index per bucket and
#      over the period (x = GPU-s / normalized share), top users by GPU-hours, idle
#      GPU-hours "not reported" or the jobs' idle_gpu_s sum, estimate accuracy from
#      GET /v1/estimates/accuracy or "not available";
#   2. --out DIR writes report.md (what stdout printed) and PNGs that are PNGs;
#      without gnuplot on PATH the report still prints, with a note;
#   3. a non-admin is refused (exit 1, a clear message), and a bad --period (exit 2).
# usage: bash test_cli_report.sh /path/to/fairgpu
FG_TEST_NAME=test_cli_report
SERVER_EXTRA=(--charge-interval 1s --idle-after 1s)
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }
source "$(dirname "$0")/lib_agent.sh"
start_h100_agent n1
export FAIRGPU_URL=$URL
HAS_GNUPLOT=1
command -v gnuplot >/dev/null || HAS_GNUPLOT=0

state() { AS=$ROOT api GET "/v1/jobs/$1" | jq -r .state; }
is_state() { [ "$(state "$1")" = "$2" ]; }
submit() { api POST /v1/jobs "$1" | jq -r .id; }

curl -s -X POST "$URL/v1/users" -d '{"username":"bob","email":"b@example.org","password":"bob-password-1"}' >/dev/null
BOB=$(curl -s -X POST "$URL/v1/sessions" -d '{"username":"bob","password":"bob-password-1"}' | jq -r .token)
for a in vision:3 nlp:1; do
    AS=$ROOT api POST /v1/accounts "{\"name\":\"${a%:*}\",\"weight\":${a#*:}}" >/dev/null
done
AS=$ROOT api POST /v1/accounts/vision/members '{"user":"alice"}' >/dev/null
AS=$ROOT api POST /v1/accounts/nlp/members '{"user":"bob"}' >/dev/null

# alice (vision): two 2-GPU jobs and an 8-GPU one that waits for them; bob (nlp): 1 GPU
A1=$(submit '{"name":"a1","account":"vision","gpus":2,"command":"sleep 2"}')
A2=$(submit '{"name":"a2","account":"vision","gpus":2,"command":"sleep 3"}')
# (b1's GPU idles: its fake GPU's knob says 0 %)
B1=$(AS=$BOB submit '{"name":"b1","account":"nlp","gpus":1,"command":"echo 0 >\"$FAIRGPU_FAKE_UTIL_FILE\"; sleep 5"}')
A8=$(submit '{"name":"a8","account":"vision","gpus":8,"command":"sleep 1"}')
P16=$(AS=$BOB submit '{"name":"p16","account":"nlp","gpus":16,"command":"true"}')
for j in "$A1" "$A2" "$B1" "$A8"; do check "job $j completes" wait_for 40 is_state "$j" COMPLETED; done
check "a 16-GPU job waits" is_state "$P16" PENDING
sleep 1.5 # the last charge rows are committed

# ------------------------------------------------ 3. refusals --
FAIRGPU_TOKEN=$ALICE "$FG" report --period 1h >"$TMP/na.out" 2>"$TMP/na.err"
check "a non-admin is refused (exit 1)" test $? = 1
check "with a clear message" grep -q "only an admin may make the cluster report" "$TMP/na.err"
check "and no report" test ! -s "$TMP/na.out"
for p in 0d 7x -1d 400d 30m "" 7; do
    FAIRGPU_TOKEN=$ROOT "$FG" report --period "$p" >/dev/null 2>"$TMP/bad.err"
    check "--period '$p' refused (exit 2)" test $? = 2
done
check "a bad period says why" grep -q "period" "$TMP/bad.err"

# ------------------------------------------------ 1-2. the report --
FAIRGPU_TOKEN=$ROOT "$FG" report --period 2h --out "$TMP/rep" >"$TMP/rep.out" 2>"$TMP/rep.err"
check "the report runs (exit 0)" test $? = 0
cat "$TMP/rep.err" >&2
sed 's/^/  | /' "$TMP/rep.out" | head -60
check "report.md is what stdout printed" cmp -s "$TMP/rep.out" "$TMP/rep/report.md"
if [ "$HAS_GNUPLOT" = 1 ]; then
    for png in wait_by_size utilization jain top_users; do
        check "$png.png is a PNG" python3 -c 'import sys; sys.exit(open(sys.argv[1], "rb").read(8) != b"\x89PNG\r\n\x1a\n")' "$TMP/rep/$png.png"
        check "the report shows $png.png" grep -q "($png.png)" "$TMP/rep.out"
    done
fi
read -r FROM TO BUCKET < <(sed -n 's/.*fairgpu-report from=\([0-9]*\) to=\([0-9]*\) bucket=\([0-9]*\).*/\1 \2 \3/p' "$TMP/rep.out")
check "the report says its period" test -n "$TO"
# the API's view of the same period, for the checks
{
    AS=$ROOT api GET '/v1/jobs?limit=1000'; echo
    AS=$ROOT api GET /v1/fairshare; echo
    b=$FROM
    while [ "$b" -lt "$TO" ]; do
        e=$((b + BUCKET)); [ "$e" -gt "$TO" ] && e=$TO
        AS=$ROOT api GET "/v1/billing/usage?from=$((b * 1000))&to=$((e * 1000))"; echo
        b=$((b + BUCKET))
    done
} >"$TMP/api.json"
ACC_STATUS=$(curl -s -o "$TMP/acc.json" -w '%{http_code}' -H "Authorization: Bearer $ROOT" \
    "$URL/v1/estimates/accuracy?from=$(date -u -d "@$FROM" +%Y-%m-%dT%H:%M:%SZ)&to=$(date -u -d "@$TO" +%Y-%m-%dT%H:%M:%SZ)")
python3 - "$TMP/rep.out" "$TMP/api.json" "$FROM" "$TO" "$BUCKET" "$ACC_STATUS" "$TMP/acc.json" <<'EOF' || fail "the report's numbers are the API's"
import json, math, re, sys
md = open(sys.argv[1]).read()
api = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
frm, to, bucket, acc_status = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
jobs, fs, usage = api[0]["items"], api[1], api[2:]
fails = []
def check(ok, what):
    if not ok:
        fails.append(what)
def section(title):
    m = re.search(r"^## " + re.escape(title) + r"\n(.*?)(?=^## |\Z)", md, re.S | re.M)
    check(m is not None, "section " + title)
    return m.group(1) if m else ""
def rows(text):
    out = []
    for ln in text.splitlines():
        if ln.startswith("|") and not ln.startswith("|---"):
            out.append([c.strip() for c in ln.strip("|").split("|")])
    return out[1:]  # without the header
def pct(v, p):
    v = sorted(v)
    return v[max(1, math.ceil(p / 100 * len(v))) - 1] if v else None
size = lambda g: "1" if g <= 1 else "2-7" if g < 8 else "8" if g == 8 else ">8"

# wait by size
want = {}
for c in ("1", "2-7", "8", ">8"):
    w = [max(0, j["start_time"] - j["submit_time"]) for j in jobs
         if size(j["gpus"]) == c and j["state"] != "PENDING" and j.get("start_time") and frm <= j["start_time"] <= to]
    pend = [j for j in jobs if size(j["gpus"]) == c and j["state"] == "PENDING"]
    f = lambda x: "-" if x is None else str(x)
    want[c] = [c, str(len(w)), f(pct(w, 50)), f(pct(w, 90)), f(pct(w, 100)), str(len(pend)),
               str(max([to - j["submit_time"] for j in pend], default=0))]
got = {r[0]: r for r in rows(section("Wait by job size"))}
check(got == want, "wait by size %s == %s" % (got, want))
check(want["2-7"][1] == "2" and want["8"][1] == "1" and want[">8"][5] == "1", "the test's jobs are there")

# usage per bucket, utilization, Jain
share = {a["name"]: a["normalized_share"] for a in fs["accounts"]}
up = fs["gpus_up"]
util = rows(section("Utilization"))
fair_sec = section("Fairness among accounts (Jain's index)")
fair = rows(fair_sec)
tot_acct, tot_user, used_all, cap_all = {}, {}, 0.0, 0.0
def jain(x):
    s, q = sum(x), sum(v * v for v in x)
    return "-" if not x or q <= 0 else "%.3f" % (s * s / (len(x) * q))
check(len(util) == len(usage) + 1 and len(fair) == len(usage), "a row per bucket")
for b, u in enumerate(usage):
    b0 = frm + b * bucket
    by_acct = {}
    used = 0.0
    for l in u["items"]:
        s = l["gpu_ms"] / 1000.0
        if s <= 0:
            continue
        by_acct[l["account"]] = by_acct.get(l["account"], 0) + s
        tot_acct[l["account"]] = tot_acct.get(l["account"], 0) + s
        tot_user[l["user"]] = tot_user.get(l["user"], 0) + s
        used += s
    cap = up * (min(b0 + bucket, to) - b0) / 3600.0
    used_all += used / 3600.0
    cap_all += cap
    if b < len(util):
        check(util[b][1] == "%.3f" % (used / 3600.0), "bucket %d GPU-hours %s == %.3f" % (b, util[b][1], used / 3600.0))
        check(util[b][2] == "%.3f" % cap, "bucket %d capacity %s == %.3f" % (b, util[b][2], cap))
        check(util[b][3] == ("%.1f" % (100 * used / 3600.0 / cap) if cap > 0 else "-"), "bucket %d utilization %s" % (b, util[b][3]))
    active = set(by_acct)
    for j in jobs:
        e = j.get("end_time") or to
        if j["submit_time"] < b0 + bucket and max(e, j["submit_time"] + 1) > b0:
            active.add(j["account"])
    x = [by_acct.get(a, 0) / share[a] for a in sorted(active) if share.get(a, 0) > 0]
    if b < len(fair):
        check(fair[b][1] == str(len(x)), "bucket %d active accounts %s == %d" % (b, fair[b][1], len(x)))
        check(fair[b][2] == "%.3f" % (used / 3600.0), "bucket %d GPU-hours (fairness)" % b)
        check(fair[b][3] == jain(x), "bucket %d Jain %s == %s" % (b, fair[b][3], jain(x)))
check(util and util[-1][1] == "%.3f" % used_all and util[-1][2] == "%.3f" % cap_all, "utilization totals")
xall = [tot_acct[a] / share[a] for a in sorted(tot_acct) if share.get(a, 0) > 0]
m = re.search(r"Over the whole period: \*\*([-0-9.]+)\*\* \((\d+) accounts\)", fair_sec)
check(m and m.group(1) == jain(xall) and m.group(2) == str(len(xall)), "period Jain %s == %s" % (m and m.groups(), jain(xall)))
check(used_all > 0, "GPU time in the period")

# top users
users = rows(section("Top users by GPU-hours"))
want = sorted(tot_user.items(), key=lambda kv: -kv[1])[:10]
allu = sum(tot_user.values())
check([r[1] for r in users] == [u for u, _ in want], "top users %s == %s" % (users, want))
for r, (u, v) in zip(users, want):
    check(r[2] == "%.3f" % (v / 3600) and r[3] == "%.1f" % (100 * v / allu), "user %s GPU-hours %s" % (u, r))
check([r[1] for r in users][:2] == ["alice", "bob"], "alice used most")

# idle, accuracy
idle = section("Idle allocated GPU-hours")
idl = [j["idle_gpu_s"] for j in jobs if isinstance(j.get("idle_gpu_s"), (int, float))]
if idl:
    check("%.3f GPU-hours** (idle_gpu_s of %d jobs)" % (sum(idl) / 3600, len(idl)) in idle, "idle GPU-hours")
    check(sum(idl) > 0, "the idle job's GPU-seconds (%s)" % idl)
else:
    check("Not reported" in idle, "idle: not reported")
acc = section("Start-estimate accuracy")
if acc_status == "200":
    a = json.load(open(sys.argv[7]))
    check("| all | %d |" % a["jobs"] in acc, "accuracy: jobs")
else:
    check("Not available" in acc, "accuracy: not available (%s)" % acc_status)
for f in fails:
    print("FAIL: " + f, file=sys.stderr)
print("report numbers: %d buckets, %d users, %d failed" % (len(usage), len(tot_user), len(fails)))
sys.exit(1 if fails else 0)
EOF
ok

# ------------------------------------------------ 2. without gnuplot --
mkdir -p "$TMP/nobin"
PATH="$TMP/nobin" FAIRGPU_TOKEN=$ROOT "$FG" report --period 1h --out "$TMP/rep2" >"$TMP/rep2.out" 2>"$TMP/rep2.err"
check "without gnuplot the report still runs (exit 0)" test $? = 0
check "it says why there are no plots" grep -q "No plots: gnuplot is not installed" "$TMP/rep2.out"
check "and writes report.md" test -s "$TMP/rep2/report.md"
check "and no PNG" test -z "$(ls "$TMP/rep2" | grep '\.png$')"
check "the sections are there" test "$(grep -c '^## ' "$TMP/rep2.out")" -ge 6

echo "$FG_TEST_NAME: $CHECKS checks, $FAILS failed"
[ "$FAILS" = 0 ]
