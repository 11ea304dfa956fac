# lib_agent.sh - what the agent end-to-end tests share: argument and tool checks, a
# temporary directory, cleanup of every process started (by PID), check helpers, a real
# server on a free loopback port, users root (admin, made with the setup token:
# create_admin) and alice with their tokens, a user map sending jobs to 'nobody',
# wait_for, and host_pid (a job's pid as we see it).
#
# usage, at the top of a test:  FG_TEST_NAME=test_x; SERVER_EXTRA=(flags...);
#                               source "$(dirname "$0")/lib_agent.sh"
: "${FG_TEST_NAME:?set FG_TEST_NAME before sourcing lib_agent.sh}"
set -uo pipefail

FG=${1:?usage: $FG_TEST_NAME.sh /path/to/fairgpu}
case "$FG" in /*) ;; *) FG="$PWD/$FG" ;; esac
for tool in curl jq; do
    command -v $tool >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
# Not under /tmp: isolated jobs get a private /tmp, and the tests' jobs read files the
# test writes (go signals) in $TMP.
TMP=$(mktemp -d "${FG_TEST_TMPDIR:-/var/tmp}/fg_$FG_TEST_NAME.XXXXXX")
chmod 711 "$TMP"
SERVER_PID=
AGENT_PIDS=()
BG_PIDS=()
cleanup() {
    for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${AGENT_PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${AGENT_PIDS[@]}"; do wait "$p" 2>/dev/null; done
    if [ -n "$SERVER_PID" ]; then
        kill "$SERVER_PID" 2>/dev/null
        wait "$SERVER_PID" 2>/dev/null
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT

FAILS=0
CHECKS=0
fail() {
    echo "FAIL: $*" >&2
    FAILS=$((FAILS + 1))
}
ok() { CHECKS=$((CHECKS + 1)); }
check() { # check DESCRIPTION CONDITION...
    local what=$1
    shift
    if "$@"; then ok; else fail "$what"; fi
}

# --------------------------------------------------------------- server, agents --

# FG_REAL_PASSWORD_HASH=1: Argon2id at its real cost (a login flood test needs it)
FAST_HASH=(--insecure-fast-password-hash)
[ -n "${FG_REAL_PASSWORD_HASH:-}" ] && FAST_HASH=()
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
start_server() {
    for _ in 1 2 3 4 5 6 7 8; do
        PORT=$((20000 + RANDOM % 40000))
        port_free "$PORT" || continue
        "$FG" server --data-dir "$TMP/data" --listen "127.0.0.1:$PORT" --rate-limit 0 \
            --heartbeat-interval 1s ${FAST_HASH[@]+"${FAST_HASH[@]}"} ${SERVER_EXTRA[@]+"${SERVER_EXTRA[@]}"} >"$TMP/server.log" 2>&1 &
        SERVER_PID=$!
        for _ in $(seq 1 100); do
            kill -0 "$SERVER_PID" 2>/dev/null || break
            port_free "$PORT" || return 0
            sleep 0.1
        done
        kill "$SERVER_PID" 2>/dev/null
        wait "$SERVER_PID" 2>/dev/null
        SERVER_PID=
    done
    echo "FAIL: the server did not start; its output:" >&2
    cat "$TMP/server.log" >&2
    exit 1
}
mkdir -p "$TMP/data"
start_server
URL="http://127.0.0.1:$PORT"

# api METHOD PATH [BODY]: as alice (or $AS); the body of the reply on stdout.
api() {
    curl -s -X "$1" "$URL$2" -H "Authorization: Bearer ${AS:-$ALICE}" \
        -H 'Content-Type: application/json' ${3:+-d "$3"}
}
# create_admin USER EMAIL PASSWORD: the first admin, made with the server's one-time
# setup token (DATA_DIR/setup-token); the reply on stdout.
create_admin() {
    curl -s -X POST "$URL/v1/users" -d "$(jq -cn --arg u "$1" --arg e "$2" --arg p "$3" \
        --arg t "$(cat "$TMP/data/setup-token" 2>/dev/null)" \
        '{username: $u, email: $e, password: $p} + (if $t == "" then {} else {setup_token: $t} end)')"
}
create_admin root r@example.org root-password-1 >/dev/null
curl -s -X POST "$URL/v1/users" -d '{"username":"alice","email":"a@example.org","password":"alice-password-1"}' >/dev/null
ALICE=$(curl -s -X POST "$URL/v1/sessions" -d '{"username":"alice","password":"alice-password-1"}' | jq -r .token)
ROOT=$(curl -s -X POST "$URL/v1/sessions" -d '{"username":"root","password":"root-password-1"}' | jq -r .token)
[ -n "$ALICE" ] && [ "$ALICE" != null ] || { echo "FAIL: cannot log in"; cat "$TMP/server.log"; exit 1; }

# An agent that is not root cannot isolate its jobs (developer mode) and refuses to start
# unless told: tests pass ${AGENT_ISO[@]} to every agent.
AGENT_ISO=()
if [ "$(id -u)" != 0 ]; then
    AGENT_ISO=(--allow-unisolated)
    echo "note: not root: agents run with --allow-unisolated (their jobs are not isolated)"
fi

# Jobs run as the mapped account when the agent is root: map everyone to nobody.
echo "* nobody" >"$TMP/usermap"

# wait_for SECONDS COMMAND...: polls every 0.1 s until COMMAND succeeds.
wait_for() {
    local end=$((SECONDS + $1))
    shift
    while [ $SECONDS -le $end ]; do
        "$@" && return 0
        sleep 0.1
    done
    return 1
}

# ours PID: is PID a descendant of one of this test's agents? (Namespace PIDs repeat
# across jobs, so another test's job may hold the same NSpid and command.)
ours() {
    local p=$1 a k
    for k in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do
        p=$(sed -n 's/^PPid:[[:space:]]*//p' "/proc/$p/status" 2>/dev/null) || return 1
        [ -n "$p" ] && [ "$p" != 0 ] || return 1
        for a in ${AGENT_PIDS[@]+"${AGENT_PIDS[@]}"}; do [ "$p" = "$a" ] && return 0; done
    done
    return 1
}

# host_pid NSPID ARGS: the pid, as this shell sees it, of the job process that calls
# itself NSPID (what `$!` said inside the job: isolated jobs have their own PID
# namespace) and whose command line is ARGS (its words, blank-separated). Prints NSPID
# itself when there is no such process (unisolated jobs share our PID namespace).
host_pid() {
    local f p ns
    for f in /proc/[0-9]*/status; do
        ns=$(sed -n 's/^NSpid:[[:space:]]*//p' "$f" 2>/dev/null)
        [ "${ns##*[[:space:]]}" = "$1" ] || continue
        p=${f#/proc/}
        p=${p%/status}
        if [ "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" = "$2 " ] && ours "$p"; then
            echo "$p"
            return 0
        fi
    done
    echo "$1"
}

# start_h100_agent NAME [GPUS]: one agent with GPUS (default 8) fake H100 GPUs, waited
# for until it is up (the billing tests price H100).
start_h100_agent() {
    "$FG" agent --server "$URL" --token-file "$TMP/data/agent.token" --name "$1" \
        --fake-gpus "${2:-8}" --gpu-type H100 --work-dir "$TMP/w-$1" --checkpoint-root "$TMP/ckpt" \
        --heartbeat 1 --user-map "$TMP/usermap" --stop-jobs-on-exit ${AGENT_ISO[@]+"${AGENT_ISO[@]}"} \
        >>"$TMP/agent-$1.log" 2>&1 &
    AGENT_PIDS+=($!)
    local node=$1
    node_up() { [ "$(api GET /v1/nodes | jq --arg n "$node" '[.items[] | select(.name==$n and .state=="up")] | length')" = 1 ]; }
    check "agent $1 registers" wait_for 15 node_up
}
