#!/usr/bin/env bash
# test_server_body_auth.sh - a request is authenticated on its head, before its body:
# 200 connections (from ten loopback addresses) each declare a 1 MiB body with a bad
# token and send all of it but the last byte. Each is answered 401 without its body
# being held, so the server's resident memory grows by far less than the 200 MiB the
# bodies would take; and a valid request is still served afterwards.
#
# usage: bash test_server_body_auth.sh /path/to/fairgpu      (needs python3, curl, jq)
set -euo pipefail
BIN=${1:?usage: test_server_body_auth.sh /path/to/fairgpu}
here=$(dirname "$0")
source "$here/lib_server.sh"
server_start body_auth "$BIN" --insecure-fast-password-hash
fails=0
check() { if eval "$2"; then :; else echo "FAIL: $1" >&2; fails=$((fails + 1)); fi; }

out=$(python3 "$here/http_abuse.py" bigbody "$port" 200 "$server_pid")
echo "bigbody: $out"
growth=$(jq -r '.growth_mb | floor' <<<"$out")
n401=$(jq -r '.answers["401"] // 0' <<<"$out")
check "server memory grew by ${growth} MiB for 200 unauthenticated 1 MiB bodies (< 60)" \
    '[ "$growth" -lt 60 ]'
check "most of them were answered 401 ($n401 of 200)" '[ "$n401" -ge 150 ]'
check "the server still answers" 'curl -fsS --max-time 10 "$url/healthz" >/dev/null'

server_stop body_auth
if [ "$fails" != 0 ]; then
    echo "test_server_body_auth: $fails checks FAILED" >&2
    exit 1
fi
echo "test_server_body_auth: all checks passed"
