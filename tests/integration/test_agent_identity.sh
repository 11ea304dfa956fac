#!/usr/bin/env bash
# test_agent_identity.sh - a job never runs as root or as the agent's user, with the real
# server and a real agent running as root (8 fake GPUs), without a catch-all user map:
#
#   1. a self-registered user with a 52-character name (longer than a Unix account name
#      may be): `id -u` is not 0, and the job ran as the mapped account, which is
#      `fg-` + the name's first 12 characters + `-` + 16 hex digits of its SHA-256
#      (created by the agent);
#   2. a user mapped (--user-map) to an account name that cannot be created, and one
#      mapped to root: the job never runs (no `0` in its log), each attempt ends with
#      end cause user_setup_failed (attempts, events), it is requeued per max_retries and
#      ends FAILED, and it is not charged (gpu_seconds 0, fair-share usage 0).
#
# usage: bash test_agent_identity.sh /path/to/fairgpu      (root, curl, jq, useradd)
FG_TEST_NAME=test_agent_identity
SERVER_EXTRA=(--retry-backoff 1s)
source "$(dirname "$0")/lib_agent.sh"
if [ "$(id -u)" != 0 ] || ! command -v useradd >/dev/null || ! command -v sha256sum >/dev/null; then
    echo "SKIP: needs root, useradd and sha256sum"
    exit 77
fi
ACCOUNTS=() # accounts this test made the agent create: deleted at the end
trap 'cleanup_all' EXIT
cleanup_all() {
    cleanup
    for a in "${ACCOUNTS[@]}"; do userdel "$a" 2>/dev/null; done
}

# register NAME -> token (self-registration, then a session)
register() {
    curl -s -X POST "$URL/v1/users" -d "{\"username\":\"$1\",\"email\":\"$1@example.org\",\"password\":\"pw-$1-long-enough\"}" >/dev/null
    curl -s -X POST "$URL/v1/sessions" -d "{\"username\":\"$1\",\"password\":\"pw-$1-long-enough\"}" | jq -r .token
}
R=$(printf '%05d' $((RANDOM % 100000)))
LONGU="lu$R-research-group-member-with-a-long-user-names" # 52 characters
BADU="bad$R"
ROOTU="rt$R"
check "the long username has 52 characters" test "${#LONGU}" = 52
LONG_TOK=$(register "$LONGU")
BAD_TOK=$(register "$BADU")
ROOT_TOK=$(register "$ROOTU")
check "the users registered" test -n "$LONG_TOK" -a "$LONG_TOK" != null -a "$BAD_TOK" != null -a "$ROOT_TOK" != null

# The mapped account of LONGU, as docs/agent.md describes it.
WANT="fg-${LONGU:0:12}-$(printf %s "$LONGU" | sha256sum | cut -c1-16)"
check "the expected account name has 32 characters" test "${#WANT}" = 32
getent passwd "$WANT" >/dev/null && { echo "FAIL: account $WANT exists already" >&2; exit 1; }
ACCOUNTS+=("$WANT")

printf '%s BAD-Account\n%s root\n' "$BADU" "$ROOTU" >"$TMP/usermap-id"
"$FG" agent --server "$URL" --token-file "$TMP/data/agent.token" --name idn \
    --fake-gpus 8 --gpu-type h100 --work-dir "$TMP/w" --heartbeat 1 \
    --user-map "$TMP/usermap-id" --stop-jobs-on-exit >>"$TMP/agent.log" 2>&1 &
AGENT_PIDS+=($!)
node_up() { [ "$(api GET /v1/nodes | jq '[.items[] | select(.state=="up")] | length')" = 1 ]; }
check "the agent registers" wait_for 15 node_up

state() { AS=$2 api GET "/v1/jobs/$1" | jq -r .state; }
is_state() { [ "$(state "$1" "$3")" = "$2" ]; }
ended() { local s; s=$(state "$1" "$2"); [ "$s" = COMPLETED ] || [ "$s" = FAILED ] || [ "$s" = CANCELLED ]; }

# ------------------------------------------------------- 1. a long username --
J=$(AS=$LONG_TOK api POST /v1/jobs '{"name":"who","gpus":1,"command":"echo UID=$(id -u); echo USER=$(id -un)"}' | jq -r .id)
check "the long user's job completes" wait_for 30 is_state "$J" COMPLETED "$LONG_TOK"
LOG=$(AS=$LONG_TOK api GET "/v1/jobs/$J/logs")
UIDL=$(printf '%s\n' "$LOG" | sed -n 's/^UID=//p')
check "the job printed its uid" test -n "$UIDL"
check "the job did not run as root (uid $UIDL)" test -n "$UIDL" -a "$UIDL" != 0
check "the job ran as the mapped account $WANT" grep -qx "USER=$WANT" <<<"$LOG"
check "the agent created the account with that uid" test "$(getent passwd "$WANT" | cut -d: -f3)" = "$UIDL"

# ------------------------------ 2. an account that cannot be set up; root ---
# sleep first: a job that ran (as root) would hold its GPUs long enough to be charged
for who in bad root; do
    if [ $who = bad ]; then TOK=$BAD_TOK U=$BADU; else TOK=$ROOT_TOK U=$ROOTU; fi
    J=$(AS=$TOK api POST /v1/jobs '{"name":"nouser","gpus":2,"max_retries":1,"command":"sleep 2; echo UID=$(id -u)"}' | jq -r .id)
    check "$who: the job ends" wait_for 40 ended "$J" "$TOK"
    check "$who: the job is FAILED" is_state "$J" FAILED "$TOK"
    LOG=$(AS=$TOK api GET "/v1/jobs/$J/logs")
    no_uid() { ! grep -q '^UID=' <<<"$LOG"; }
    check "$who: the job never ran (no uid in its log)" no_uid
    ATT=$(AS=$TOK api GET "/v1/jobs/$J/attempts")
    check "$who: two attempts (requeued once per max_retries)" test "$(jq '.items | length' <<<"$ATT")" = 2
    check "$who: every attempt ended with user_setup_failed" \
        test "$(jq '[.items[] | select(.end_cause=="user_setup_failed")] | length' <<<"$ATT")" = 2
    EV=$(AS=$TOK api GET "/v1/jobs/$J/events")
    check "$who: the events say user_setup_failed (requeue, then FAILED)" \
        test "$(jq '[.items[] | select(.reason=="user_setup_failed")] | length' <<<"$EV")" = 2
    check "$who: the last event is RUNNING -> FAILED" \
        test "$(jq -r '.items[-1] | "\(.from)>\(.to)"' <<<"$EV")" = "RUNNING>FAILED"
    check "$who: not charged (gpu_seconds 0)" test "$(AS=$TOK api GET "/v1/jobs/$J" | jq .gpu_seconds)" = 0
    no_usage() {
        AS=$TOK api GET /v1/fairshare |
            jq -e --arg u "$U" '[.items[] | select(.kind=="user" and .name==$u) | .usage_gpu_seconds] | length == 1 and .[0] < 0.01' >/dev/null
    }
    check "$who: no fair-share usage" wait_for 10 no_usage
done
check "the agent says why" grep -q "cannot set up Unix account 'BAD-Account'" "$TMP/agent.log"
check "the agent refused root" grep -q "refusing to run a job as root" "$TMP/agent.log"
check "the agent is still up" kill -0 "${AGENT_PIDS[0]}"

if [ $FAILS -ne 0 ]; then
    echo "--- agent log (tail)" >&2
    tail -20 "$TMP/agent.log" >&2
    echo "test_agent_identity: $FAILS of $((CHECKS + FAILS)) checks FAILED" >&2
    exit 1
fi
echo "test_agent_identity: all $CHECKS checks passed"
