#!/usr/bin/env bash
# test_server_trusted_proxy.sh - login limits per client address, and the client
# address behind a trusted proxy: with --login-rate 1 --login-burst 4 (a failed login
# costs two), a third failed login from one address is 429 with Retry-After. Requests from --trusted-proxy (127.0.0.1)
# are counted by their last X-Forwarded-For hop, so another forwarded client is not
# limited; from any other address X-Forwarded-For is ignored. Failed logins of one
# username are limited too (--login-user-failures 3).
#
# usage: bash test_server_trusted_proxy.sh /path/to/fairgpu      (needs curl, python3)
set -euo pipefail
BIN=${1:?usage: test_server_trusted_proxy.sh /path/to/fairgpu}
source "$(dirname "$0")/lib_server.sh"
server_start trusted_proxy "$BIN" --insecure-fast-password-hash --trusted-proxy 127.0.0.1 \
    --login-rate 1 --login-burst 4 --login-user-failures 3
fails=0
check() { if eval "$2"; then :; else echo "FAIL: $1" >&2; fails=$((fails + 1)); fi; }
# login SRC XFF USER: the status of one login
login() {
    curl -s -o /dev/null -w '%{http_code}' --interface "$1" ${2:+-H "X-Forwarded-For: $2"} \
        -X POST "$url/v1/sessions" -d "{\"username\":\"$3\",\"password\":\"wrong-password-1\"}"
}
a=$(login 127.0.0.1 "6.6.6.6, 10.0.0.1" u1)
b=$(login 127.0.0.1 "10.0.0.1" u2)
c=$(login 127.0.0.1 "7.7.7.7,10.0.0.1" u3)
check "forwarded client 10.0.0.1: 401 401 429 (got $a $b $c)" '[ "$a $b $c" = "401 401 429" ]'
ra=$(curl -s -D - -o /dev/null --interface 127.0.0.1 -H "X-Forwarded-For: 10.0.0.1" \
    -X POST "$url/v1/sessions" -d '{"username":"u4","password":"wrong-password-1"}' | tr -d '\r' | grep -i '^retry-after:' || true)
check "the 429 says Retry-After ($ra)" '[ -n "$ra" ]'
d=$(login 127.0.0.1 "10.0.0.2" u5)
check "another forwarded client 10.0.0.2 is not limited ($d)" '[ "$d" = 401 ]'
e=$(login 127.0.0.9 "10.0.0.3" u6)
f=$(login 127.0.0.9 "10.0.0.4" u7)
g=$(login 127.0.0.9 "10.0.0.5" u8)
check "X-Forwarded-For from an untrusted peer is ignored: 401 401 429 (got $e $f $g)" \
    '[ "$e $f $g" = "401 401 429" ]'
m1=$(curl -s -o /dev/null -w '%{http_code}' -H "X-Forwarded-For: 127.0.0.1" "$url/metrics")
m2=$(curl -s -o /dev/null -w '%{http_code}' "$url/metrics")
check "/metrics passed on by the proxy is not local: 403 (got $m1); a loopback peer's is 200 ($m2)" \
    '[ "$m1 $m2" = "403 200" ]'
# failed logins of one username, from fresh addresses each time
u=""
for i in 1 2 3 4; do u="$u $(login 127.0.0.1 "10.0.1.$i" alice)"; done
check "the 4th failed login of one username is 429 (got$u)" '[ "$u" = " 401 401 401 429" ]'

server_stop trusted_proxy
if [ "$fails" != 0 ]; then
    echo "test_server_trusted_proxy: $fails checks FAILED" >&2
    exit 1
fi
echo "test_server_trusted_proxy: all checks passed"
