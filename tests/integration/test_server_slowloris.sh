#!/usr/bin/env bash
# test_server_slowloris.sh - slow clients cannot lock others out: 200 connections from
# one address (127.0.0.5) trickle a request head one byte a second at a server with
# --max-connections 128. At most max-connections-per-address (64) of them are taken,
# the rest closed at once; those taken are closed by the head deadline (10 s) however
# they trickle. Meanwhile other clients are answered and an agent that starts during
# the attack registers and stays up. Then the reserved room: with 110 idle connections
# open (from three addresses), an anonymous request is refused 503 while a request with
# a valid token is served.
#
# usage: bash test_server_slowloris.sh /path/to/fairgpu      (needs curl, jq, python3)
FG_TEST_NAME=test_server_slowloris
SERVER_EXTRA=(--max-connections 128) # (reserved-connections: 128 / 4 = 32)
source "$(dirname "$0")/lib_agent.sh"
here=$(dirname "$0")

python3 "$here/http_abuse.py" slowloris "$PORT" 25 200 127.0.0.5 >"$TMP/slow.json" &
SLOW=$!
BG_PIDS+=($SLOW)
sleep 3
check "another client gets /healthz during the attack" \
    curl -fsS --max-time 10 "$URL/healthz" -o /dev/null
check "an authenticated GET is answered during the attack" \
    test "$(curl -s --max-time 10 "$URL/v1/me" -H "Authorization: Bearer $ALICE" | jq -r .username)" = alice
"$FG" agent --server "$URL" --token-file "$TMP/data/agent.token" --name n1 --fake-gpus 1 \
    --gpu-type h100 --work-dir "$TMP/w-n1" --heartbeat 1 --user-map "$TMP/usermap" \
    --stop-jobs-on-exit >>"$TMP/agent-n1.log" 2>&1 &
AGENT_PIDS+=($!)
node_up() { [ "$(api GET /v1/nodes | jq -r '.items[0].state')" = up ]; }
check "an agent started during the attack registers" wait_for 15 node_up
wait "$SLOW"
out=$(cat "$TMP/slow.json")
echo "slowloris: $out"
check "over 64 from one address are closed at once ($(jq -r .closed_within_3s <<<"$out") of 200)" \
    test "$(jq -r .closed_within_3s <<<"$out")" -ge 100
check "every trickling connection was closed within the 25 s attack" \
    test "$(jq -r .still_open <<<"$out")" = 0
check "none lived much past the 10 s head deadline (max $(jq -r .max_life_s <<<"$out") s)" \
    test "$(jq -r '.max_life_s // 99 | floor' <<<"$out")" -le 15
check "the node stayed up" node_up

# the reserved room: the last 32 of 128 connections are for authenticated clients
# (held 20 s; the 110 connections may take a while to be accepted on a loaded machine)
for a in 6 7; do python3 "$here/http_abuse.py" hold "$PORT" 20 50 127.0.0.$a & BG_PIDS+=($!); done
python3 "$here/http_abuse.py" hold "$PORT" 20 10 127.0.0.8 & BG_PIDS+=($!)
anon_refused() { [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$URL/healthz")" = 503 ]; }
check "an anonymous request in the reserved room is refused 503" wait_for 15 anon_refused
check "an authenticated request in the reserved room is served" \
    test "$(curl -s --max-time 10 "$URL/v1/me" -H "Authorization: Bearer $ALICE" | jq -r .username)" = alice
check "the node is still up" node_up

if [ "$FAILS" != 0 ]; then
    tail -20 "$TMP/server.log" >&2
    tail -10 "$TMP/agent-n1.log" >&2
    echo "$FG_TEST_NAME: $FAILS of $((CHECKS + FAILS)) checks FAILED" >&2
    exit 1
fi
echo "$FG_TEST_NAME: all $CHECKS checks passed"
