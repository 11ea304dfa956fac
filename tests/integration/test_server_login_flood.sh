#!/usr/bin/env bash
# test_server_login_flood.sh - a login flood does not take the controller down: 80
# connections from 80 loopback addresses send POST /v1/sessions (unknown users, real
# Argon2id cost) as fast as they are answered, for 20 s, while an agent heartbeats every
# second (down after 3 missed). Passwords are checked on the password pool, off the
# HTTP workers, with a bounded queue, and logins are limited per client address: the
# flood gets 429s, the node stays up, an authenticated GET is answered within a bound
# generous for a loaded machine, and after the flood the real user logs in.
#
# usage: bash test_server_login_flood.sh /path/to/fairgpu      (needs curl, jq, python3)
FG_TEST_NAME=test_server_login_flood
FG_REAL_PASSWORD_HASH=1
source "$(dirname "$0")/lib_agent.sh"
here=$(dirname "$0")
"$FG" agent --server "$URL" --token-file "$TMP/data/agent.token" --name n1 --fake-gpus 1 \
    --gpu-type h100 --work-dir "$TMP/w-n1" --heartbeat 1 --user-map "$TMP/usermap" \
    --stop-jobs-on-exit >>"$TMP/agent-n1.log" 2>&1 &
AGENT_PIDS+=($!)
node_state() { curl -s --max-time 20 "$URL/v1/nodes" -H "Authorization: Bearer $ALICE" | jq -r '.items[0].state'; }
node_up() { [ "$(node_state)" = up ]; }
check "the agent registers" wait_for 20 node_up

python3 "$here/http_abuse.py" flood "$PORT" 20 80 >"$TMP/flood.json" &
FLOOD=$!
BG_PIDS+=($FLOOD)
sleep 2
max_ms=0
states=""
while kill -0 "$FLOOD" 2>/dev/null; do
    t=$(curl -s -o /dev/null -w '%{time_total}' --max-time 30 "$URL/v1/me" -H "Authorization: Bearer $ALICE")
    ms=$(awk -v t="$t" 'BEGIN { printf "%d", t * 1000 }')
    [ "$ms" -gt "$max_ms" ] && max_ms=$ms
    states="$states $(node_state)"
    sleep 1
done
wait "$FLOOD"
out=$(cat "$TMP/flood.json")
echo "flood: $out; slowest GET /v1/me: $max_ms ms; node states:$states"
check "the flood got 429s ($(jq -r '.["429"] // 0' <<<"$out"))" test "$(jq -r '.["429"] // 0' <<<"$out")" -gt 0
check "the flood's passwords were checked too ($(jq -r '.["401"] // 0' <<<"$out") 401s)" \
    test "$(jq -r '.["401"] // 0' <<<"$out")" -gt 0
check "an authenticated GET took at most 2.5 s during the flood ($max_ms ms)" test "$max_ms" -le 2500
check "the node stayed up during the flood" test -z "$(tr ' ' '\n' <<<"$states" | grep -v '^up$' | grep -v '^$')"
check "the node is up after it" node_up
sleep 2
check "the real user logs in after the flood" \
    test "$(curl -s -X POST "$URL/v1/sessions" -d '{"username":"alice","password":"alice-password-1"}' | jq -r '.token | startswith("fgs_")')" = true

if [ "$FAILS" != 0 ]; then
    tail -20 "$TMP/server.log" >&2
    tail -10 "$TMP/agent-n1.log" >&2
    echo "$FG_TEST_NAME: $FAILS of $((CHECKS + FAILS)) checks FAILED" >&2
    exit 1
fi
echo "$FG_TEST_NAME: all $CHECKS checks passed"
