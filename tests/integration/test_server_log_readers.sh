#!/usr/bin/env bash
# test_server_log_readers.sh - a job's log is streamed from its file in bounded pieces:
# a job writes a 34 MB log through a real agent; 12 clients ask for it and never read.
# The server's resident memory stays within a few MiB per reader (it held the whole log,
# twice, per reader before), and a reader that does read gets the whole log.
#
# usage: bash test_server_log_readers.sh /path/to/fairgpu      (needs curl, jq, python3)
FG_TEST_NAME=test_server_log_readers
source "$(dirname "$0")/lib_agent.sh"
here=$(dirname "$0")
"$FG" agent --server "$URL" --token-file "$TMP/data/agent.token" --name n1 --fake-gpus 1 \
    --gpu-type h100 --work-dir "$TMP/w-n1" --heartbeat 1 --user-map "$TMP/usermap" \
    --stop-jobs-on-exit >>"$TMP/agent-n1.log" 2>&1 &
AGENT_PIDS+=($!)
node_up() { [ "$(api GET /v1/nodes | jq '[.items[] | select(.state=="up")] | length')" = 1 ]; }
check "the agent registers" wait_for 20 node_up

SIZE=34000000
J=$(api POST /v1/jobs "{\"name\":\"biglog\",\"gpus\":1,\"command\":\"yes 0123456789abcdef | head -c $SIZE\"}" | jq -r .id)
done_() { [ "$(api GET "/v1/jobs/$J" | jq -r .state)" = COMPLETED ]; }
check "the job completes" wait_for 60 done_
logsize() { stat -c %s "$TMP/data/logs/$J/1.0.log" 2>/dev/null || echo 0; }
shipped() { [ "$(logsize)" -ge "$SIZE" ]; }
check "its 34 MB log is shipped" wait_for 60 shipped

out=$(python3 "$here/http_abuse.py" logreaders "$PORT" "$ALICE" "$J" 12 "$SERVER_PID")
echo "logreaders: $out"
growth=$(jq -r '.growth_mb | floor' <<<"$out")
got=$(jq -r .first_reader_bytes <<<"$out")
check "server memory grew by $growth MiB for 12 readers that do not read a 34 MB log (< 64)" \
    test "$growth" -lt 64
check "a reader that reads gets the whole log ($got bytes)" test "$got" -ge "$SIZE"
check "the plain log read by curl is complete" \
    test "$(curl -s "$URL/v1/jobs/$J/logs" -H "Authorization: Bearer $ALICE" | wc -c)" = "$(logsize)"
check "offset= skips into it" \
    test "$(curl -s "$URL/v1/jobs/$J/logs?offset=$((SIZE - 7))" -H "Authorization: Bearer $ALICE" | od -c)" = "$(tail -c 7 "$TMP/data/logs/$J/1.0.log" | od -c)"

if [ "$FAILS" != 0 ]; then
    tail -20 "$TMP/server.log" >&2
    tail -10 "$TMP/agent-n1.log" >&2
    echo "$FG_TEST_NAME: $FAILS of $((CHECKS + FAILS)) checks FAILED" >&2
    exit 1
fi
echo "$FG_TEST_NAME: all $CHECKS checks passed"
