#!/usr/bin/env bash
# test_sim_cli.sh - `fairgpu sim` end to end: determinism (same input, same output bytes
# apart from the wall-clock replay_seconds), the JSON keys, malformed CSV (error names
# file and line; --skip-bad counts), the restart overhead and its rows, weights/cluster
# files, share series, the start estimates (--estimates history), exit codes.
# usage: bash test_sim_cli.sh /path/to/fairgpu   (env FG_SOURCE_DIR: the repository root)
set -euo pipefail
FG=${1:?usage: test_sim_cli.sh FAIRGPU}
SRC=${FG_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }

# A synthetic trace: 1500 jobs of 5 tenants, sizes 1..16 (12 gets rounded up).
awk 'BEGIN { srand(7); print "job_id,user,submit_time_s,num_gpus,duration_s,account";
  split("1 1 1 2 4 8 16 12", sz, " "); t = 0;
  for (i = 0; i < 1500; i++) { t += int(rand() * 90); g = sz[1 + int(rand() * 8)];
    d = 1 + int(rand() * 7200); u = "u" int(rand() * 9); a = (rand() < 0.5) ? "" : "acct" int(rand() * 3);
    printf "j%d,%s,%d,%d,%d,%s\n", i, u, t, g, d, a } }' > "$TMP/syn.csv"

# 1. determinism, every policy
"$FG" sim "$TMP/syn.csv" --nodes 8 --compare --json > "$TMP/a.json"
"$FG" sim "$TMP/syn.csv" --nodes 8 --compare --json > "$TMP/b.json"
[ "$(wc -l < "$TMP/a.json")" = 6 ] || fail "--compare --json should print 6 lines"
sed -E 's/"replay_seconds":[0-9.e+-]+//' "$TMP/a.json" > "$TMP/a.norm"
sed -E 's/"replay_seconds":[0-9.e+-]+//' "$TMP/b.json" > "$TMP/b.norm"
cmp "$TMP/a.norm" "$TMP/b.norm" || fail "two runs differ"
pass "determinism"

# 2. every key the issue lists, on every line; the policy names
for k in policy trace nodes gpus_per_node jobs rounded_up makespan_s utilization jct_avg_s \
         jct_p50_s jct_p95_s jct_p99_s wait_avg_s wait_p50_s wait_p50_by_size wait_max_s \
         preemptions lost_gpu_seconds restart_gpu_seconds preempt_cost_frac restart_overhead_s \
         jain ftf_rho_avg ftf_rho_max waits_over_24h replay_seconds; do
  [ "$(grep -c "\"$k\":" "$TMP/a.json")" = 6 ] || fail "key $k missing"
done
for p in fair wfq fifo priority round-robin las; do
  grep -q "\"policy\":\"$p\"" "$TMP/a.json" || fail "policy $p missing"
done
grep -q '"wait_p50_by_size":{"1":[0-9]*,"2-4":[0-9]*,"8":[0-9]*,">8":[0-9]*}' "$TMP/a.json" \
  || fail "wait_p50_by_size shape"
grep -q '"rounded_up":[1-9]' "$TMP/a.json" || fail "12-GPU jobs should be counted as rounded up"
grep -q '"jobs":1500' "$TMP/a.json" || fail "all 1500 jobs replayed"
grep -q '"restart_overhead_s":120' "$TMP/a.json" || fail "default restart overhead 120 s"
pass "json keys"

# 2b. the restart overhead: 0 charges nothing; the cost fraction is (lost + restart) / run
"$FG" sim "$TMP/syn.csv" --nodes 8 --policy wfq --restart-overhead 0 --json > "$TMP/r0.json"
grep -q '"restart_gpu_seconds":0,' "$TMP/r0.json" || fail "overhead 0: restart_gpu_seconds 0"
grep -q '"restart_overhead_s":0,' "$TMP/r0.json" || fail "overhead 0 echoed"
"$FG" sim "$TMP/syn.csv" --nodes 8 --policy wfq --restart-overhead 2m --json > "$TMP/r2.json"
grep -q '"restart_overhead_s":120,' "$TMP/r2.json" || fail "--restart-overhead 2m is 120 s"
python3 - "$TMP/r2.json" <<'PY' || fail "preempt_cost_frac = (lost + restart) / gpu_seconds"
import json, sys
r = json.loads(open(sys.argv[1]).readline())
assert r["preemptions"] > 0 and r["restart_gpu_seconds"] > 0, r
want = (r["lost_gpu_seconds"] + r["restart_gpu_seconds"]) / r["gpu_seconds"]
assert abs(r["preempt_cost_frac"] - want) < 1e-6, (r["preempt_cost_frac"], want)
PY
pass "restart overhead"

# 3. the human table and Markdown
"$FG" sim "$TMP/syn.csv" --nodes 8 --policy fifo > "$TMP/t.txt"
grep -qE '^policy +fifo' "$TMP/t.txt" || fail "table"
grep -qE '^jain +[0-9]' "$TMP/t.txt" || fail "table jain row"
grep -A2 -E '^lost_gpu_s ' "$TMP/t.txt" | tr '\n' ' ' |
  grep -qE '^lost_gpu_s +[0-9]+ +restart_gpu_s +[0-9]+ +preempt_cost_frac +[0-9.]+ $' ||
  fail "table: restart_gpu_s and preempt_cost_frac after lost_gpu_s"
grep -qE '^restart_overhead_s +120$' "$TMP/t.txt" || fail "table: restart overhead echoed"
grep -q 'restart overhead 120 s' "$TMP/t.txt" || fail "summary line: restart overhead"
"$FG" sim "$TMP/syn.csv" --nodes 8 --max-jobs 200 --markdown > "$TMP/t.md"
grep -q '^| policy | fair |' "$TMP/t.md" || fail "markdown"
pass "tables"

# 4. malformed CSV: the error names the file and the line; --skip-bad counts
{ sed -n "1,5p" "$TMP/syn.csv"; echo "bad,u1,100,x,5,"; sed -n "6,25p" "$TMP/syn.csv"; } > "$TMP/bad.csv"
set +e
"$FG" sim "$TMP/bad.csv" --nodes 8 > /dev/null 2> "$TMP/err.txt"
rc=$?
set -e
[ $rc = 1 ] || fail "bad row: exit $rc, expected 1"
grep -q "bad.csv:6: num_gpus" "$TMP/err.txt" || fail "error should name bad.csv:6: $(cat "$TMP/err.txt")"
"$FG" sim "$TMP/bad.csv" --nodes 8 --skip-bad --json > "$TMP/skip.json" 2> "$TMP/skip.err"
grep -q '"skipped_bad":1' "$TMP/skip.json" || fail "--skip-bad count"
grep -q '"jobs":24' "$TMP/skip.json" || fail "--skip-bad keeps the good rows"
grep -q "skipped 1 bad rows" "$TMP/skip.err" || fail "--skip-bad message"
pass "malformed csv"

# 5. weights and cluster files; a bad line names file:line
printf '# tenant weight\nu1 3\nacct0 2.5\nnobody 1\n' > "$TMP/w.txt"
"$FG" sim "$TMP/syn.csv" --nodes 8 --weights "$TMP/w.txt" --json > "$TMP/w.json" 2> "$TMP/w.err"
grep -q '"jain":' "$TMP/w.json" || fail "weights run"
grep -q "1 tenants not in the trace" "$TMP/w.err" || fail "unknown tenant note"
printf 'u1 -2\n' > "$TMP/wbad.txt"
if "$FG" sim "$TMP/syn.csv" --nodes 8 --weights "$TMP/wbad.txt" 2> "$TMP/wbad.err" >/dev/null; then
  fail "negative weight accepted"
fi
grep -q "wbad.txt:1:" "$TMP/wbad.err" || fail "weights error names the line"
printf '1 8 a100\n# comment\n3 4 t4\n' > "$TMP/c.txt"
"$FG" sim "$TMP/syn.csv" --cluster "$TMP/c.txt" --json > "$TMP/c.json"
grep -q '"nodes":4,"gpus_per_node":null,"gpus":20' "$TMP/c.json" || fail "cluster file: $(cut -c1-200 "$TMP/c.json")"
grep -q '"skipped_too_big":[1-9]' "$TMP/c.json" || fail "16-GPU jobs cannot fit 1 whole node"
pass "weights and cluster"

# 6. share series
"$FG" sim "$TMP/syn.csv" --nodes 8 --share-series "$TMP/share.dat" --share-interval 600 > /dev/null
[ "$(sed -n 2p "$TMP/share.dat" | cut -d' ' -f1)" = day ] || fail "share series header"
[ "$(wc -l < "$TMP/share.dat")" -gt 20 ] || fail "share series rows"
pass "share series"

# 6b. job records: one line per replayed job, wait = start - submit, sizes as in the JSON
"$FG" sim "$TMP/syn.csv" --nodes 8 --compare --json --jobs-out "$TMP/jobs.txt" > "$TMP/j.json"
[ "$(sed -n 2p "$TMP/jobs.txt")" = "line tenant gpus submit start end duration wait attempts" ] ||
  fail "job records header"
grep -q '^# fairgpu sim job records: policy fair' "$TMP/jobs.txt" || fail "job records: the --policy run"
njobs=$(grep '"policy":"fair"' "$TMP/j.json" | grep -o '"jobs":[0-9]*' | cut -d: -f2)
[ "$(($(wc -l < "$TMP/jobs.txt") - 2))" = "$njobs" ] || fail "job records: one line per job"
awk 'NR > 2 && ($8 != $5 - $4 || $5 < $4 || $6 < $5 + $7 || $9 < 1) { bad = 1 } END { exit bad }' \
  "$TMP/jobs.txt" || fail "job records: wait = start - submit, end >= start + duration"
ng=$(awk 'NR > 2 && $3 == 16' "$TMP/jobs.txt" | wc -l)
[ "$ng" -gt 0 ] || fail "job records: sizes after rounding (12 -> 16)"
pass "job records"

# 6c. start estimates: --estimates history adds the comparison and changes no decision;
# --time-limit-model rounded is echoed; the default output has neither key
for m in factor rounded; do
  "$FG" sim "$TMP/syn.csv" --nodes 8 --time-limit-model "$m" --json --jobs-out "$TMP/e0.$m" > "$TMP/e0.json"
  "$FG" sim "$TMP/syn.csv" --nodes 8 --time-limit-model "$m" --estimates history --json \
    --jobs-out "$TMP/e1.$m" > "$TMP/e1.json"
  cmp -s "$TMP/e0.$m" "$TMP/e1.$m" || fail "--estimates history changed decisions ($m limits)"
  python3 - "$TMP/e0.json" "$TMP/e1.json" "$m" <<'PY' || fail "estimates JSON ($m limits)"
import json, sys
a, b = (json.loads(open(f).readline()) for f in sys.argv[1:3])
assert "estimates" not in a, a.keys()
assert ("time_limit_model" in a) == (sys.argv[3] == "rounded")
e = b["estimates"]
assert e["jobs"] == e["started_at_once"] + e["waited"] and e["waited"] > 0, e
assert e["all"]["jobs"] > 0 and e["all"]["coverage"] is not None, e["all"]
assert [g["class"] for g in e["by_size"]] == ["1", "2-7", "8", ">8"]
assert [g["horizon"] for g in e["by_horizon"]] == ["<10m", "10m-1h", "1h-6h", ">6h"]
assert sum(g["jobs"] for g in e["by_size"]) == e["all"]["jobs"]
assert sum(g["jobs"] for g in e["by_horizon"]) == e["all"]["jobs"]
for k in ("limit", "history"):
    assert e["all"][k]["median_abs_error_s"] <= e["all"][k]["p90_abs_error_s"]
PY
done
"$FG" sim "$TMP/syn.csv" --nodes 8 --estimates history --markdown > "$TMP/e.md"
grep -q '^| all | [0-9]' "$TMP/e.md" || fail "estimates table (markdown)"
grep -q '^start estimates at submission (fair)' <("$FG" sim "$TMP/syn.csv" --nodes 8 --estimates history) ||
  fail "estimates table (text)"
pass "start estimates"

# 7. exit codes of bad usage
"$FG" sim --help > "$TMP/help.txt"
grep -q 'usage: fairgpu sim' "$TMP/help.txt" || fail "--help"
set +e
"$FG" sim "$TMP/syn.csv" --policy nope 2>/dev/null; [ $? = 2 ] || fail "bad policy exit"
"$FG" sim "$TMP/syn.csv" --nodes 0 2>/dev/null; [ $? = 2 ] || fail "bad --nodes exit"
"$FG" sim "$TMP/syn.csv" --time-limit-factor 0.5 2>/dev/null; [ $? = 2 ] || fail "factor < 1"
"$FG" sim "$TMP/syn.csv" --restart-overhead -5 2>"$TMP/ro.err"; [ $? = 2 ] || fail "overhead < 0"
"$FG" sim "$TMP/syn.csv" --restart-overhead abc 2>>"$TMP/ro.err"; [ $? = 2 ] || fail "bad overhead"
"$FG" sim "$TMP/syn.csv" --estimates exact 2>/dev/null; [ $? = 2 ] || fail "bad --estimates"
"$FG" sim "$TMP/syn.csv" --time-limit-model guess 2>/dev/null; [ $? = 2 ] || fail "bad model"
"$FG" sim "$TMP/syn.csv" --time-limit-seed -1 2>/dev/null; [ $? = 2 ] || fail "bad seed"
"$FG" sim "$TMP/missing.csv" 2>"$TMP/m.err"; [ $? = 1 ] || fail "missing file exit"
set -e
grep -q "missing.csv" "$TMP/m.err" || fail "missing file named"
[ "$(grep -c -- "--restart-overhead '.*': expected a time" "$TMP/ro.err")" = 2 ] ||
  fail "bad --restart-overhead message: $(cat "$TMP/ro.err")"
pass "usage errors"

# 8. a slice of a real trace, if the shared traces are there
TR="$SRC/../shared/traces/philly_2017_sep_nov/trace.csv"
if [ -f "$TR" ]; then
  "$FG" sim "$TR" --max-jobs 2000 --compare --json > "$TMP/p.json"
  [ "$(wc -l < "$TMP/p.json")" = 6 ] || fail "philly slice"
  pass "philly slice"
fi
echo "all sim cli checks passed"
