#!/usr/bin/env bash
# test_tls_proxy.sh - the shipped TLS proxy (deploy/nginx/fairgpu.conf) in front of a
# real controller: a throwaway CA and server certificate (openssl), nginx as its own
# process (own prefix, pid and logs in the test's directory, a random loopback port,
# stopped by its PID), then the CLI and an agent through https with --ca-file.
#
# Checked: the CLI and an agent work through the proxy; a followed log streams through
# it while the job runs (not buffered); the certificate is verified: a wrong CA, and the
# default (the system's store, which lacks the test CA), fail with a clear error; the
# config file's "ca_file" works; a body over the controller's 1 MiB is refused by nginx.
#
# usage: bash test_tls_proxy.sh /path/to/fairgpu      (needs curl, jq, nginx, openssl)
FG_TEST_NAME=test_tls_proxy
for tool in nginx openssl; do
    command -v $tool >/dev/null || [ -x /usr/sbin/$tool ] ||
        { echo "SKIP: $tool not installed (scripts/deps)"; exit 77; }
done
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
SERVER_EXTRA=()
# the controller takes the client address from X-Forwarded-For only from this proxy
if "${1:?}" server --help 2>&1 | grep -q -- --trusted-proxy; then
    SERVER_EXTRA+=(--trusted-proxy 127.0.0.1)
fi
source "$(dirname "$0")/lib_agent.sh"
CONF_SRC="$(cd "$(dirname "$0")/../.." && pwd)/deploy/nginx/fairgpu.conf"
[ -f "$CONF_SRC" ] || { echo "FAIL: $CONF_SRC missing"; exit 1; }

# ------------------------------------------------------------- certificates --
PKI="$TMP/pki"
mkdir -p "$PKI"
mkca() { # mkca NAME
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=fairgpu test $1" \
        -keyout "$PKI/$1.key" -out "$PKI/$1.pem" 2>>"$PKI/openssl.log"
}
mkca ca && mkca wrong-ca || { echo "FAIL: openssl"; cat "$PKI/openssl.log"; exit 1; }
openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$PKI/server.key" \
    -out "$PKI/server.csr" 2>>"$PKI/openssl.log"
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$PKI/ext"
openssl x509 -req -in "$PKI/server.csr" -CA "$PKI/ca.pem" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 2 -extfile "$PKI/ext" -out "$PKI/server.crt" 2>>"$PKI/openssl.log" ||
    { echo "FAIL: openssl x509"; cat "$PKI/openssl.log"; exit 1; }

# ------------------------------------------------------------------ nginx --
NG="$TMP/nginx"
mkdir -p "$NG/conf.d" "$NG/logs"
NGINX_PID=
stop_nginx() {
    if [ -n "$NGINX_PID" ]; then
        kill "$NGINX_PID" 2>/dev/null
        wait "$NGINX_PID" 2>/dev/null
        NGINX_PID=
    fi
}
trap 'stop_nginx; cleanup' EXIT
for _ in 1 2 3 4 5 6 7 8; do
    NPORT=$((20000 + RANDOM % 40000))
    port_free "$NPORT" || continue
    # the shipped file, with this test's port, certificate and controller address
    sed -e "s|listen 443 ssl;|listen 127.0.0.1:$NPORT ssl;|" \
        -e "s|/etc/fairgpu/tls/server.crt|$PKI/server.crt|" \
        -e "s|/etc/fairgpu/tls/server.key|$PKI/server.key|" \
        -e "s|server 127.0.0.1:8080;|server 127.0.0.1:$PORT;|" "$CONF_SRC" >"$NG/conf.d/fairgpu.conf"
    cat >"$NG/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $NG/nginx.pid;
error_log $NG/logs/error.log info;
events { worker_connections 1024; }
http {
    access_log $NG/logs/access.log;
    client_body_temp_path $NG/client_body;
    proxy_temp_path $NG/proxy;
    fastcgi_temp_path $NG/fastcgi;
    uwsgi_temp_path $NG/uwsgi;
    scgi_temp_path $NG/scgi;
    include $NG/conf.d/fairgpu.conf;
}
EOF
    "$NGINX" -p "$NG" -c "$NG/nginx.conf" -e "$NG/logs/error.log" >"$NG/logs/stdout.log" 2>&1 &
    NGINX_PID=$!
    for _ in $(seq 1 50); do
        kill -0 "$NGINX_PID" 2>/dev/null || break
        port_free "$NPORT" || break
        sleep 0.1
    done
    if kill -0 "$NGINX_PID" 2>/dev/null && ! port_free "$NPORT"; then break; fi
    stop_nginx
done
if [ -z "$NGINX_PID" ]; then
    echo "FAIL: nginx did not start:" >&2
    cat "$NG/logs/error.log" "$NG/logs/stdout.log" >&2
    exit 1
fi
HTTPS="https://127.0.0.1:$NPORT"

# ------------------------------------------------------------------ the CLI --
cli() { FAIRGPU_URL=$HTTPS FAIRGPU_TOKEN=$ALICE XDG_CONFIG_HOME="$TMP/xdg-none" "$FG" "$@"; }
check "curl reaches the controller through the proxy" \
    test "$(curl -s --cacert "$PKI/ca.pem" "$HTTPS/healthz" | jq -r .status)" = ok
check "the proxy does not pass /metrics on (404)" \
    test "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$PKI/ca.pem" "$HTTPS/metrics")" = 404
check "... while a loopback peer of the controller reads it" \
    test "$(curl -s -o /dev/null -w '%{http_code}' "$URL/metrics")" = 200
check "the CLI works over https with --ca-file" \
    bash -c "FAIRGPU_URL=$HTTPS FAIRGPU_TOKEN=$ALICE XDG_CONFIG_HOME=$TMP/xdg-none '$FG' whoami --ca-file '$PKI/ca.pem' | grep -q alice"
cli whoami --ca-file "$PKI/wrong-ca.pem" >"$TMP/wrong.out" 2>"$TMP/wrong.err"
rc=$?
check "a wrong CA fails (exit $rc)" test "$rc" != 0
check "... with a clear error: $(tail -1 "$TMP/wrong.err")" grep -q "certificate could not be verified" "$TMP/wrong.err"
check "... and prints nothing of the answer" test ! -s "$TMP/wrong.out"
cli whoami >"$TMP/sys.out" 2>"$TMP/sys.err"
rc=$?
check "by default the system's store verifies: the test CA is not in it (exit $rc)" test "$rc" != 0
check "... with a clear error" grep -q "with the system's CA store" "$TMP/sys.err"
mkdir -p "$TMP/xdg/fairgpu"
jq -n --arg u "$HTTPS" --arg t "$ALICE" --arg c "$PKI/ca.pem" '{url:$u, token:$t, ca_file:$c}' >"$TMP/xdg/fairgpu/config.json"
check "the config file's ca_file works" \
    bash -c "env -u FAIRGPU_URL -u FAIRGPU_TOKEN XDG_CONFIG_HOME=$TMP/xdg '$FG' whoami | grep -q alice"
check "FAIRGPU_CA_FILE works" bash -c "FAIRGPU_CA_FILE=$PKI/ca.pem FAIRGPU_URL=$HTTPS FAIRGPU_TOKEN=$ALICE XDG_CONFIG_HOME=$TMP/xdg-none '$FG' whoami | grep -q alice"
big=$(head -c 1100000 /dev/zero | tr '\0' 'a')
check "a body over 1 MiB is refused by the proxy (413)" test "$(printf '{"x":"%s"}' "$big" |
    curl -s -o /dev/null -w '%{http_code}' --cacert "$PKI/ca.pem" -X POST "$HTTPS/v1/jobs" \
        -H "Authorization: Bearer $ALICE" -H 'Content-Type: application/json' --data-binary @-)" = 413

# ---------------------------------------------------------------- the agent --
"$FG" agent --server "$HTTPS" --ca-file "$PKI/ca.pem" --token-file "$TMP/data/agent.token" \
    --name tls1 --fake-gpus 2 --gpu-type h100 --work-dir "$TMP/w-tls1" --heartbeat 1 \
    --user-map "$TMP/usermap" --stop-jobs-on-exit >>"$TMP/agent-tls1.log" 2>&1 &
AGENT_PIDS+=($!)
"$FG" agent --server "$HTTPS" --ca-file "$PKI/wrong-ca.pem" --token-file "$TMP/data/agent.token" \
    --name tls2 --fake-gpus 2 --gpu-type h100 --work-dir "$TMP/w-tls2" --heartbeat 1 \
    --user-map "$TMP/usermap" --stop-jobs-on-exit >>"$TMP/agent-tls2.log" 2>&1 &
AGENT_PIDS+=($!)
node_state() { api GET /v1/nodes | jq -r ".items[] | select(.name==\"$1\") | .state"; }
check "an agent registers through the proxy" wait_for 20 bash -c "[ \"\$(curl -s '$URL/v1/nodes' -H 'Authorization: Bearer $ALICE' | jq -r '.items[] | select(.name==\"tls1\") | .state')\" = up ]"
J=$(cli submit --ca-file "$PKI/ca.pem" --gpus 1 --json -- sh -c 'echo first; sleep 4; echo second' | jq -r .id)
check "a job submitted over https runs on it" wait_for 20 bash -c "[ \"\$(curl -s '$URL/v1/jobs/$J' -H 'Authorization: Bearer $ALICE' | jq -r .state)\" = RUNNING ]"
cli logs -f --ca-file "$PKI/ca.pem" "$J" >"$TMP/follow.out" 2>"$TMP/follow.err" &
FOLLOW=$!
BG_PIDS+=($FOLLOW)
check "a followed log streams through the proxy while the job runs" \
    wait_for 15 grep -q first "$TMP/follow.out"
check "... before the job ends" test "$(api GET "/v1/jobs/$J" | jq -r .state)" = RUNNING
check "the job completes" wait_for 30 bash -c "[ \"\$(curl -s '$URL/v1/jobs/$J' -H 'Authorization: Bearer $ALICE' | jq -r .state)\" = COMPLETED ]"
check "the follow ends with the job" wait_for 15 bash -c "! kill -0 $FOLLOW 2>/dev/null"
check "... with the whole log" test "$(tr '\n' ' ' <"$TMP/follow.out")" = "first second "
check "the agent with the wrong CA never registers" test -z "$(node_state tls2)"
check "... and says why" grep -qi "certificate" "$TMP/agent-tls2.log"
# logout (last: it ends alice's session) trusts --ca-file like every other command
check "logout over https with --ca-file ends the session" \
    bash -c "env -u FAIRGPU_URL -u FAIRGPU_TOKEN XDG_CONFIG_HOME=$TMP/xdg '$FG' logout --ca-file '$PKI/ca.pem'"
check "... on the server (401 after)" \
    test "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/me" -H "Authorization: Bearer $ALICE")" = 401

stop_nginx
if [ "$FAILS" != 0 ]; then
    echo "--- nginx error log (tail)" >&2
    tail -10 "$NG/logs/error.log" >&2
    echo "--- agent tls1 log (tail)" >&2
    tail -10 "$TMP/agent-tls1.log" >&2
    echo "--- server log (tail)" >&2
    tail -10 "$TMP/server.log" >&2
fi
echo "$CHECKS checks passed, $FAILS failed"
[ "$FAILS" = 0 ]
