#!/usr/bin/env bash
# test_metrics.sh - GET /metrics against the API, with a real server, a real agent with
# 8 fake H100 GPUs and real jobs of two accounts (docs/api.md, "Metrics").
#
#   1. the scrape parses (Prometheus text 0.0.4): every sample belongs to a family with
#      HELP and TYPE lines, histograms have monotone buckets ending in +Inf == _count;
#   2. jobs by state, account and priority, jobs by state and pending GPUs by size equal
#      what GET /v1/jobs lists; nodes up and down what GET /v1/nodes says; running GPUs
#      and entitlement per account what GET /v1/fairshare says (share x GPUs up);
#      ledger totals what GET /v1/billing/usage totals (charges, and the signed sum of
#      every kind = cost); each compared on a quiet cluster (the API read before and
#      after the scrape agrees);
#   3. a high job preempts a low one: one preemption, one "preempted" requeue, as the
#      attempts say; the agent's loss: one node loss, node_lost requeues = the jobs
#      requeued, nodes down 1;
#   4. after a restart the same checks hold (the tally rebuilt from the stored jobs, the
#      ledger totals read back from the store);
#   5. docs/grafana-dashboard.json is valid JSON, has a Prometheus datasource variable,
#      and every fairgpu_ metric its panels query is in the scrape.
# usage: bash test_metrics.sh /path/to/fairgpu
FG_TEST_NAME=test_metrics
SERVER_EXTRA=(--charge-interval 1h --heartbeat-misses 2)
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }
source "$(dirname "$0")/lib_agent.sh"
SRC=${FG_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
start_h100_agent n1

state() { AS=$ROOT api GET "/v1/jobs/$1" | jq -r .state; }
is_state() { [ "$(state "$1")" = "$2" ]; }
submit() { api POST /v1/jobs "$1" | jq -r .id; }
scrape() { curl -s "$URL/metrics"; }

AS=$ROOT api PUT /v1/billing/prices \
    '{"currency":"EUR","prices":[{"gpu_type":"*","priority":"normal","micros_per_gpu_hour":3600000},
      {"gpu_type":"*","priority":"high","micros_per_gpu_hour":7200000}]}' >/dev/null
for a in vision:3 nlp:1; do
    AS=$ROOT api POST /v1/accounts "{\"name\":\"${a%:*}\",\"weight\":${a#*:}}" >/dev/null
    AS=$ROOT api PATCH "/v1/accounts/${a%:*}" '{"allowed_priorities":["high","normal","low"]}' >/dev/null
    AS=$ROOT api POST "/v1/accounts/${a%:*}/members" '{"user":"alice"}' >/dev/null
done

# ------------------------------------------------ jobs of two accounts --
J_DONE=$(submit '{"name":"short","account":"nlp","gpus":1,"command":"sleep 0.5"}')
check "a short nlp job completes" wait_for 20 is_state "$J_DONE" COMPLETED
J_CXL=$(submit '{"name":"cx","account":"nlp","gpus":1,"command":"sleep 60"}')
check "a job to cancel runs" wait_for 15 is_state "$J_CXL" RUNNING
api POST "/v1/jobs/$J_CXL/cancel" >/dev/null
check "it is cancelled" wait_for 15 is_state "$J_CXL" CANCELLED
V1=$(submit '{"name":"v1","account":"vision","gpus":2,"command":"sleep 300","max_retries":2}')
V2=$(submit '{"name":"v2","account":"vision","gpus":2,"priority":"high","command":"sleep 300","max_retries":2}')
N1=$(submit '{"name":"n1","account":"nlp","gpus":1,"command":"sleep 300"}')
for j in "$V1" "$V2" "$N1"; do check "job $j runs" wait_for 15 is_state "$j" RUNNING; done
# a low job fills the node; a high one preempts it (requeued "preempted")
L3=$(submit '{"name":"l3","account":"nlp","gpus":3,"priority":"low","command":"sleep 300"}')
check "a low job runs" wait_for 15 is_state "$L3" RUNNING
H3=$(submit '{"name":"h3","account":"vision","gpus":3,"priority":"high","command":"sleep 300","max_retries":2}')
check "a high job runs" wait_for 30 is_state "$H3" RUNNING
check "the low job was preempted, and waits" is_state "$L3" PENDING
# pending: 8 GPUs (3 free), 16 GPUs (more than the cluster has), 1 low GPU behind them
P8=$(submit '{"name":"p8","account":"vision","gpus":8,"command":"true"}')
P16=$(submit '{"name":"p16","account":"nlp","gpus":16,"priority":"low","command":"true"}')
check "an 8-GPU job waits" wait_for 10 is_state "$P8" PENDING
check "a 16-GPU job waits" wait_for 10 is_state "$P16" PENDING
sleep 2.5 # the fair-share view is refreshed every second while things change

# compare: API snapshot, scrape, API snapshot; the same before and after (else again)
snapshot() { # what the checks compare, and nothing that moves with time alone
    {
        AS=$ROOT api GET '/v1/jobs?limit=1000' | jq -c '{items: [.items[] | {id, state, account, priority, gpus, attempts}]}'
        AS=$ROOT api GET /v1/nodes | jq -c '{items: [.items[] | {name, state}]}'
        AS=$ROOT api GET /v1/fairshare | jq -c '{gpus_up, accounts: [.accounts[] | {name, running_gpus, normalized_share} + (if has("entitlement_gpus") then {entitlement_gpus} else {} end)]}'
        AS=$ROOT api GET /v1/billing/usage | jq -c '{currency, totals}'
    } 2>/dev/null
}
compare() { # compare LABEL: runs the checks of part 2 on $TMP/api.json and $TMP/m.txt
    python3 - "$TMP/api.json" "$TMP/m.txt" "$1" <<'EOF'
import json, re, sys
api = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
jobs, nodes, fs, usage = api[0]["items"], api[1]["items"], api[2], api[3]
text = open(sys.argv[2]).read()
fails = []
def check(ok, what):
    if not ok:
        fails.append(what)

# ---- 1. parse: families, HELP/TYPE, samples
fam_type, fam_help, samples = {}, {}, []
line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (-?[0-9.eE+-]+|\+Inf|-Inf|NaN)$')
lab_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')
for ln in text.splitlines():
    if ln.startswith("# HELP "):
        n, h = ln[7:].split(" ", 1)
        check(n not in fam_help, "HELP twice for " + n)
        fam_help[n] = h
    elif ln.startswith("# TYPE "):
        n, t = ln[7:].split(" ")
        check(t in ("counter", "gauge", "histogram", "summary", "untyped"), "type " + t)
        check(n not in fam_type, "TYPE twice for " + n)
        fam_type[n] = t
    elif ln.startswith("#") or not ln:
        continue
    else:
        m = line_re.match(ln)
        check(m is not None, "unparseable line: " + ln)
        if not m:
            continue
        labels = {}
        if m.group(3):
            rest = m.group(3)
            for lm in lab_re.finditer(rest):
                labels[lm.group(1)] = lm.group(2)
            check(lab_re.sub("", rest) == "", "bad labels: " + ln)
        samples.append((m.group(1), labels, float(m.group(4))))
def family(name):
    for suf in ("_bucket", "_sum", "_count"):
        if name.endswith(suf) and fam_type.get(name[: -len(suf)]) in ("histogram", "summary"):
            return name[: -len(suf)]
    return name
for n, l, v in samples:
    f = family(n)
    check(f in fam_type and f in fam_help, "no HELP/TYPE for " + n)
    if fam_type.get(f) == "counter":
        check(v >= 0, "negative counter " + n)
check(set(fam_type) == set(fam_help), "TYPE and HELP name the same families")
# histograms: per label set, buckets monotone, +Inf == _count
hist = {}
for n, l, v in samples:
    f = family(n)
    if fam_type.get(f) != "histogram":
        continue
    key = (f, tuple(sorted((k, x) for k, x in l.items() if k != "le")))
    h = hist.setdefault(key, {"b": [], "count": None, "sum": None})
    if n.endswith("_bucket"):
        h["b"].append((float("inf") if l["le"] == "+Inf" else float(l["le"]), v))
    elif n.endswith("_count"):
        h["count"] = v
    else:
        h["sum"] = v
check(any(k[0] == "fairgpu_scheduler_pass_seconds" for k in hist), "a pass histogram")
check(any(k[0] == "fairgpu_http_request_duration_seconds" for k in hist), "an HTTP histogram")
for k, h in hist.items():
    b = h["b"]
    check(b == sorted(b, key=lambda x: x[0]), "buckets in order %s" % (k,))
    check(all(b[i][1] <= b[i + 1][1] for i in range(len(b) - 1)), "buckets monotone %s" % (k,))
    check(b and b[-1][0] == float("inf") and b[-1][1] == h["count"], "+Inf == count %s" % (k,))
    check(h["sum"] is not None and h["sum"] >= 0, "a sum %s" % (k,))
passes = [v for n, l, v in samples if n == "fairgpu_scheduler_passes_total"]
pcount = [v for n, l, v in samples if n == "fairgpu_scheduler_pass_seconds_count"]
check(passes and pcount and pcount[0] <= passes[0] and pcount[0] > 0, "passes counted")

timed = sum(v for n, l, v in samples if n == "fairgpu_http_request_duration_seconds_count")
replies = sum(v for n, l, v in samples if n == "fairgpu_http_requests_total")
check(0 < timed <= replies, "HTTP replies timed %s of %s" % (timed, replies))
agent = sum(v for n, l, v in samples if n == "fairgpu_http_request_duration_seconds_count" and l.get("class") == "agent")
check(agent > 0 or sys.argv[3] == "restarted", "the agent's requests are timed as class agent")
def series(name):
    return [(l, v) for n, l, v in samples if n == name]

# ---- 2. against the API
states = ["PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"]
by = {}
for j in jobs:
    k = (j["state"], j["account"], j["priority"])
    by[k] = by.get(k, 0) + 1
got = {}
for l, v in series("fairgpu_jobs"):
    if v:
        got[(l["state"], l["account"], l["priority"])] = int(v)
check(got == by, "fairgpu_jobs %s == the job list %s" % (got, by))
for st in states:
    n = sum(1 for j in jobs if j["state"] == st)
    m = [v for l, v in series("fairgpu_jobs_by_state") if l["state"] == st]
    check(m == [n], "fairgpu_jobs_by_state %s %s == %d" % (st, m, n))
def size(g):
    return "1" if g <= 1 else "2-7" if g < 8 else "8" if g == 8 else ">8"
pend = {"1": 0, "2-7": 0, "8": 0, ">8": 0}
for j in jobs:
    if j["state"] == "PENDING":
        pend[size(j["gpus"])] += j["gpus"]
got = {l["size"]: int(v) for l, v in series("fairgpu_pending_gpus")}
check(got == pend, "pending GPUs by size %s == %s" % (got, pend))
up = sum(1 for n in nodes if n["state"] != "down")
down = sum(1 for n in nodes if n["state"] == "down")
got = {l["state"]: int(v) for l, v in series("fairgpu_nodes")}
check(got == {"up": up, "down": down}, "nodes %s == up %d down %d" % (got, up, down))
run = {a["name"]: a["running_gpus"] for a in fs["accounts"]}
got = {l["account"]: int(v) for l, v in series("fairgpu_account_running_gpus")}
check(got == run, "running GPUs per account %s == fair share %s" % (got, run))
ent = {a["name"]: a.get("entitlement_gpus", a["normalized_share"] * fs["gpus_up"]) for a in fs["accounts"]}
got = {l["account"]: v for l, v in series("fairgpu_account_entitlement_gpus")}
check(set(got) == set(ent) and all(abs(got[a] - ent[a]) < 1e-3 for a in ent),
      "entitlement per account %s == share x GPUs up %s" % (got, ent))
t = usage["totals"]
ch = series("fairgpu_ledger_charged_micros_total")
check(len(ch) == 1 and ch[0][0].get("currency") == usage.get("currency") and int(ch[0][1]) == t["charge_micros"],
      "ledger charges %s == usage %s %s" % (ch, usage.get("currency"), t["charge_micros"]))
net = sum(v for l, v in series("fairgpu_ledger_micros"))
check(int(net) == t["cost_micros"], "ledger signed sum %s == usage cost %s" % (net, t["cost_micros"]))
rows = sum(v for l, v in series("fairgpu_ledger_rows_total"))
check(rows >= 2, "ledger rows counted (%s)" % rows)
for f in fails:
    print("FAIL: %s: %s" % (sys.argv[3], f), file=sys.stderr)
print("%s: %d samples, %d families, %d histograms; %d failed" % (sys.argv[3], len(samples), len(fam_type), len(hist), len(fails)))
sys.exit(1 if fails else 0)
EOF
}
quiet_scrape() { # quiet_scrape: API, scrape, API until the two API reads agree
    local a b
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        a=$(snapshot)
        scrape >"$TMP/m.txt"
        b=$(snapshot)
        [ "$a" = "$b" ] && { echo "$a" >"$TMP/api.json"; return 0; }
        sleep 1
    done
    return 1
}
check "the cluster is quiet for a scrape" quiet_scrape
check "the scrape agrees with the API (2 accounts, 9 jobs)" compare "running"
grep -E '^fairgpu_(jobs\{|pending_gpus|account_|ledger_|nodes|preempt|requeues)' "$TMP/m.txt" | grep -v ' 0$' | sed 's/^/  /'
metric() { awk -v k="$1" '$1 == k {print $2}' "$TMP/m.txt"; }
ended_preempted() { AS=$ROOT api GET "/v1/jobs/$1/attempts" | jq '[.items[] | select(.end_cause == "preempted")] | length'; }
check "one preemption ($(metric fairgpu_preemptions_total)), as the low job's attempts say" \
    test "$(metric fairgpu_preemptions_total)" = "$(ended_preempted "$L3")" -a "$(ended_preempted "$L3")" = 1
check "one preempted requeue" test "$(metric 'fairgpu_requeues_total{cause="preempted"}')" = 1
ATTS=$(head -1 "$TMP/api.json" | jq '[.items[].attempts] | add')
check "starts counted: $(metric fairgpu_job_starts_total), the jobs' attempts $ATTS (7)" \
    test "$(metric fairgpu_job_starts_total)" = "$ATTS" -a "$ATTS" = 7

# ------------------------------------------------ 3. the node is lost --
# the agent freezes (SIGSTOP): its heartbeats stop, and it cannot stop its jobs and
# report them ended first (as a clean exit would); it is let go again at the end
AGENT=${AGENT_PIDS[0]}
trap 'kill -CONT "$AGENT" 2>/dev/null; cleanup' EXIT
kill -STOP "$AGENT"
node_down() { [ "$(AS=$ROOT api GET /v1/nodes | jq -r '.items[0].state')" = down ]; }
check "the node goes down (missed heartbeats)" wait_for 20 node_down
requeued() { [ "$(state "$V1")" = PENDING ] && [ "$(state "$V2")" = PENDING ] && [ "$(state "$H3")" = PENDING ]; }
check "the vision jobs (retries left) are requeued" wait_for 10 requeued
check "the nlp job (no retries) fails" wait_for 10 is_state "$N1" FAILED
sleep 1.5
check "the cluster is quiet for a scrape" quiet_scrape
check "the scrape agrees with the API (the node lost)" compare "node lost"
check "one node loss ($(metric fairgpu_node_losses_total))" test "$(metric fairgpu_node_losses_total)" = 1
check "node_lost requeues: the 3 vision jobs ($(metric 'fairgpu_requeues_total{cause="node_lost"}'))" \
    test "$(metric 'fairgpu_requeues_total{cause="node_lost"}')" = 3
check "no other requeues" test "$(awk '/^fairgpu_requeues_total/ && !/node_lost|preempted/ {s += $2} END {print s + 0}' "$TMP/m.txt")" = 0
kill -CONT "$AGENT"

# ------------------------------------------------ 4. after a restart --
# the tally is rebuilt from the stored jobs, the ledger totals read back from the store
cp "$TMP/m.txt" "$TMP/m_live.txt" # (with the agent's series, for the dashboard)
kill "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null
SERVER_PID=
start_server
URL="http://127.0.0.1:$PORT"
sleep 1.5
check "the cluster is quiet for a scrape (restarted)" quiet_scrape
check "the scrape agrees with the API after a restart" compare "restarted"
check "the ledger's rows are counted after the restart" \
    test "$(awk '/^fairgpu_ledger_rows_total/ {s += $2} END {print s + 0}' "$TMP/m.txt")" -ge 3

# ------------------------------------------------ 5. the Grafana dashboard --
python3 - "$SRC/docs/grafana-dashboard.json" "$TMP/m_live.txt" <<'EOF' || fail "the Grafana dashboard"
import json, re, sys
d = json.load(open(sys.argv[1]))
names = set()
for ln in open(sys.argv[2]):
    if not ln.startswith("#") and ln.strip():
        names.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", ln).group(0))
ok = True
tv = d.get("templating", {}).get("list", [])
if not any(v.get("type") == "datasource" and v.get("query") == "prometheus" for v in tv):
    print("FAIL: no Prometheus datasource variable", file=sys.stderr); ok = False
panels, queried = [], set()
def walk(ps):
    for p in ps:
        panels.append(p)
        walk(p.get("panels", []))
walk(d.get("panels", []))
for p in panels:
    for t in p.get("targets", []):
        for m in re.findall(r"\bfairgpu_[a-zA-Z0-9_]+", t.get("expr", "")):
            queried.add(m)
missing = sorted(m for m in queried if m not in names)
if missing:
    print("FAIL: the dashboard queries metrics the scrape lacks: %s" % missing, file=sys.stderr); ok = False
if len(queried) < 10:
    print("FAIL: the dashboard queries only %d metrics" % len(queried), file=sys.stderr); ok = False
print("dashboard: %d panels, %d metrics queried, all in the scrape" % (len(panels), len(queried)))
sys.exit(0 if ok else 1)
EOF
ok

echo "$FG_TEST_NAME: $CHECKS checks, $FAILS failed"
[ "$FAILS" = 0 ]
