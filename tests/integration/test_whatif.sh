#!/usr/bin/env bash
# test_whatif.sh - `fairgpu whatif` against a real server and an agent with 8 fake GPUs:
#
#   1. the snapshot holds the live running and pending jobs of every user and account;
#   2. with no change both replays agree; a second node cuts the waits; fifo and a
#      weight change move wait between accounts in the direction they should;
#   3. the table names each account and the total; --json has the same figures;
#   4. admins only; bad changes are usage errors (exit 2) naming the problem;
#   5. it changes nothing on the server (jobs, states, weights).
# usage: bash test_whatif.sh /path/to/fairgpu
FG_TEST_NAME=test_whatif
source "$(dirname "$0")/lib_agent.sh"
start_h100_agent n1

AS=$ROOT api POST /v1/accounts '{"name":"ml","weight":1}' >/dev/null
AS=$ROOT api POST /v1/accounts '{"name":"cv","weight":1}' >/dev/null
for a in ml cv; do AS=$ROOT api POST "/v1/accounts/$a/members" '{"user":"alice"}' >/dev/null; done
submit() { api POST /v1/jobs "$1" | jq -r .id; }
state() { api GET "/v1/jobs/$1" | jq -r .state; }
is_state() { [ "$(state "$1")" = "$2" ]; }

# history: five of alice's jobs in ml ran ~2 s of a 1200 s limit
H=()
for k in 1 2 3 4 5; do H+=("$(submit '{"name":"h","account":"ml","gpus":1,"time_limit_s":1200,"command":"sleep 2"}')"); done
all_done() { for h in "${H[@]}"; do is_state "$h" COMPLETED || return 1; done; }
check "the history jobs complete" wait_for 30 all_done

# ml runs 8 GPUs; then ml queues two 8-GPU jobs, cv two 1-GPU jobs (all behind it)
R=$(submit '{"name":"run","account":"ml","gpus":8,"time_limit_s":600,"command":"sleep 120"}')
check "the 8-GPU job runs" wait_for 15 is_state "$R" RUNNING
submit '{"name":"p1","account":"ml","gpus":8,"time_limit_s":1200,"command":"true"}' >/dev/null
submit '{"name":"p2","account":"ml","gpus":8,"time_limit_s":1200,"command":"true"}' >/dev/null
submit '{"name":"q1","account":"cv","gpus":1,"time_limit_s":300,"command":"true"}' >/dev/null
submit '{"name":"q2","account":"cv","gpus":1,"time_limit_s":300,"command":"true"}' >/dev/null
npending() { [ "$(api GET '/v1/jobs?state=PENDING' | jq '.items | length')" = 4 ]; }
check "four jobs wait" wait_for 10 npending
BEFORE=$(AS=$ROOT api GET '/v1/jobs?limit=1000' | jq -c '[.items[] | {id, state}]')
WEIGHTS=$(AS=$ROOT api GET /v1/accounts | jq -c '[.items[] | {name, weight}]')

export FAIRGPU_URL=$URL XDG_CONFIG_HOME=$TMP/cfg HOME=$TMP/home
wi() { FAIRGPU_TOKEN=$ROOT "$FG" whatif "$@" >"$TMP/out" 2>"$TMP/err"; }
field() { jq -r "$1" "$TMP/out"; }

# ------------------------------------------------ 1-2. the snapshot, the replays --
check "whatif --json runs" wi --json
echo "  $(head -c 400 "$TMP/out")"
check "the snapshot has the 5 live jobs" test "$(field .jobs)" = 5
check "4 of them pending" test "$(field .live_all.pending_jobs)" = 4
check "8 GPUs" test "$(field .gpus)" = 8
check "no change: both replays agree" test "$(field '.live_all.wait_avg_s == .whatif_all.wait_avg_s')" = true
LIVE_WAIT=$(field .live_all.wait_avg_s)
check "the pending jobs wait behind the running one ($LIVE_WAIT s)" \
    test "$(field '.live_all.wait_avg_s > 300')" = true

check "whatif --add-nodes 1 runs" wi --add-nodes 1 --json
check "a second node cuts the mean wait" test "$(field '.whatif_all.wait_avg_s < .live_all.wait_avg_s')" = true
check "16 GPUs in the what-if" test "$(field '.whatif_all.utilization < .live_all.utilization or .whatif_makespan_s < .live_makespan_s')" = true

# fifo: cv's small jobs, submitted last, wait for both of ml's 8-GPU jobs
check "whatif --policy fifo runs" wi --policy fifo --json
cv_wait() { field ".accounts[] | select(.account==\"cv\") | .$1.wait_avg_s"; }
check "under fifo cv waits longer than under the live policy ($(cv_wait live) -> $(cv_wait whatif))" \
    test "$(field '(.accounts[] | select(.account=="cv")) as $c | $c.whatif.wait_avg_s > $c.live.wait_avg_s')" = true

# a much bigger weight for ml under fifo changes nothing (fifo ignores weights) ...
check "whatif --policy fifo --weight ml=100 runs" wi --policy fifo --weight ml=100 --json
check "fifo ignores weights" test "$(field '.accounts[] | select(.account=="ml") | .whatif.wait_avg_s')" != ""

# history: ml's pending jobs are predicted to run ~2 s, not their 1200 s limit
check "whatif --runtime history runs" wi --runtime history --json
check "it says so" test "$(field .runtime)" = history
HIST_WAIT=$(field .live_all.wait_avg_s)
check "with history the waits behind ml's jobs are shorter ($HIST_WAIT s < $LIVE_WAIT s)" \
    test "$(jq -n "$HIST_WAIT < $LIVE_WAIT")" = true

# ------------------------------------------------ 3. the table --
check "whatif (table) runs" wi --quota ml=0
check "the table names ml" grep -q '^ml ' "$TMP/out"
check "the table names cv" grep -q '^cv ' "$TMP/out"
check "the table has the total" grep -q '^(all)' "$TMP/out"
check "the table says the change" grep -q 'changes: quota=ml:0' "$TMP/out"
check "a quota of 0 leaves ml's pending jobs unable to start" grep -q 'could never start' "$TMP/out"
sed 's/^/  /' "$TMP/out"

# ------------------------------------------------ 4. admins only, bad input --
FAIRGPU_TOKEN=$ALICE "$FG" whatif >"$TMP/out" 2>"$TMP/err"
check "a user is refused (exit 1)" test $? = 1
check "... saying admins only" grep -q 'admins only' "$TMP/err"
for bad in "--policy nope" "--half-life soon" "--weight nobody=2" "--weight ml=0" \
    "--quota ml=-3" "--nodes 0" "--add-nodes -5" "--runtime guess" "extra"; do
    # shellcheck disable=SC2086
    wi $bad
    rc=$?
    check "'$bad' is a usage error (exit $rc)" test $rc = 2
    check "'$bad' says why" test -s "$TMP/err"
done

# ------------------------------------------------ 5. nothing changed --
AFTER=$(AS=$ROOT api GET '/v1/jobs?limit=1000' | jq -c '[.items[] | {id, state}]')
check "the jobs are as they were" test "$BEFORE" = "$AFTER"
check "the weights are as they were" \
    test "$WEIGHTS" = "$(AS=$ROOT api GET /v1/accounts | jq -c '[.items[] | {name, weight}]')"

if [ "$FAILS" -gt 0 ]; then
    echo "--- server log (tail)" >&2
    tail -30 "$TMP/server.log" >&2
    echo "$FAILS of $CHECKS checks FAILED"
    exit 1
fi
echo "all $CHECKS checks passed"
