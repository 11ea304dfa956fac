# lib_server.sh - what the controller's own integration tests share: a temporary
# directory removed on exit, a free loopback port, and a real server started there and
# stopped by its PID.
#
# usage, at the top of a test (after `set -euo pipefail`):
#   source "$(dirname "$0")/lib_server.sh"
#   server_start NAME BIN [server flags...]
#       makes $tmp, picks $port, sets $url, starts `BIN server` with its data in
#       $tmp/data and its log in $tmp/server.log, sets $server_pid, waits for /healthz
#   server_admin USER EMAIL PASSWORD
#       creates the first admin with the server's one-time setup token
#       ($tmp/data/setup-token); the reply on stdout
#   server_stop NAME [LOG_LINES]
#       SIGTERM; fails with the log's last lines unless the server exits 0 (under ASan
#       that includes no leak and no memory error)

tmp=
server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    [ -n "$tmp" ] && rm -rf "$tmp"
}
trap cleanup EXIT

server_start() {
    local name=$1 bin=$2
    shift 2
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/fg_$name.XXXXXX")
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    url=http://127.0.0.1:$port
    export FG_SETUP_TOKEN_FILE=$tmp/data/setup-token # read by the tests' Python parts
    "$bin" server --data-dir "$tmp/data" --listen "127.0.0.1:$port" "$@" >"$tmp/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 200); do
        curl -fsS "$url/healthz" >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    echo "$name: the server did not answer /healthz" >&2
    tail -20 "$tmp/server.log" >&2
    return 1
}

server_stop() {
    local name=$1 lines=${2:-20}
    kill -TERM "$server_pid"
    wait "$server_pid" || {
        echo "$name: server exited with $?" >&2
        tail -"$lines" "$tmp/server.log" >&2
        exit 1
    }
    server_pid=
}

server_admin() {
    curl -s -X POST "$url/v1/users" -d "$(python3 -c 'import json, os, sys
b = {"username": sys.argv[1], "email": sys.argv[2], "password": sys.argv[3]}
if os.path.exists(sys.argv[4]):  # (a server without setup tokens: the first user is admin)
    b["setup_token"] = open(sys.argv[4]).read().strip()
print(json.dumps(b))' "$1" "$2" "$3" "$tmp/data/setup-token")"
}
