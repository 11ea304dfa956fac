#!/usr/bin/env bash
# test_agent_symlinks.sh - the root agent follows no symbolic link a job planted, with
# the real server and a real agent running as root (8 fake GPUs), a shared checkpoint
# root writable by every user (mode 1777), and two users on different accounts (alice
# as nobody, bob as daemon):
#
#   1. a low job links FAIRGPU_PREEMPT (and the names a notice may be written through)
#      in its checkpoint dir to root-owned files and is preempted by a high job: the
#      files are unchanged, the notice is a regular file in the checkpoint dir;
#   2. a job plants, at the predictable checkpoint paths of the next two job ids, a
#      symbolic link to a root-owned directory and a directory of its own with a file in
#      it: bob's next jobs start, the root-owned directory keeps its owner and mode, and
#      each of bob's jobs gets a fresh, real checkpoint dir of its own (nothing planted).
#
# usage: bash test_agent_symlinks.sh /path/to/fairgpu      (root, curl, jq)
FG_TEST_NAME=test_agent_symlinks
source "$(dirname "$0")/lib_agent.sh"
if [ "$(id -u)" != 0 ] || ! getent passwd daemon >/dev/null; then
    echo "SKIP: needs root and the account daemon"
    exit 77
fi
R=$(printf '%05d' $((RANDOM % 100000)))
BOB=bob$R
curl -s -X POST "$URL/v1/users" -d "{\"username\":\"$BOB\",\"email\":\"b@example.org\",\"password\":\"bob-password-1\"}" >/dev/null
BOB_TOK=$(curl -s -X POST "$URL/v1/sessions" -d "{\"username\":\"$BOB\",\"password\":\"bob-password-1\"}" | jq -r .token)
check "bob registered" test -n "$BOB_TOK" -a "$BOB_TOK" != null

SHARED=$TMP/shared
mkdir -p "$SHARED" && chmod 1777 "$SHARED"
printf 'alice nobody\n%s daemon\n' "$BOB" >"$TMP/usermap-sl"
"$FG" agent --server "$URL" --token-file "$TMP/data/agent.token" --name sl \
    --fake-gpus 8 --gpu-type h100 --work-dir "$TMP/w" --checkpoint-root "$SHARED" \
    --heartbeat 1 --grace 5 --user-map "$TMP/usermap-sl" --stop-jobs-on-exit \
    >>"$TMP/agent.log" 2>&1 &
AGENT_PIDS+=($!)
node_up() { [ "$(api GET /v1/nodes | jq '[.items[] | select(.state=="up")] | length')" = 1 ]; }
check "the agent registers" wait_for 15 node_up

state() { AS=${2:-$ALICE} api GET "/v1/jobs/$1" | jq -r .state; }
is_state() { [ "$(state "$1" "${3:-}")" = "$2" ]; }
log_has() { AS=${3:-$ALICE} api GET "/v1/jobs/$1/logs" | grep -q "$2"; }

# ------------------------------------------- 1. the preemption notice ------------
printf 'original\n' >"$TMP/rootfile"
printf 'original\n' >"$TMP/rootfile2"
chmod 644 "$TMP/rootfile" "$TMP/rootfile2"
D='$FAIRGPU_CHECKPOINT_DIR'
PCMD="if [ \$FAIRGPU_ATTEMPT = 1 ]; then ln -sf $TMP/rootfile $D/FAIRGPU_PREEMPT; ln -sf $TMP/rootfile2 $D/FAIRGPU_PREEMPT.tmp; ln -sf $TMP/rootfile2 $D/.FAIRGPU_PREEMPT.fairgpu-tmp; echo planted; fi; trap 'exit 0' TERM; while :; do sleep 0.2; done"
LOW=$(api POST /v1/jobs "$(jq -nc --arg c "$PCMD" '{name:"low",gpus:8,priority:"low",command:$c}')" | jq -r .id)
check "the low job runs and plants its links" wait_for 20 log_has "$LOW" '^planted'
HIGH=$(api POST /v1/jobs '{"name":"urgent","gpus":8,"priority":"high","command":"echo urgent"}' | jq -r .id)
preempted() { [ "$(api GET "/v1/jobs/$LOW/attempts" | jq -r '.items[0].end_cause')" = preempted ]; }
check "the low job is preempted" wait_for 30 preempted
check "the high job completes" wait_for 20 is_state "$HIGH" COMPLETED
check "the file FAIRGPU_PREEMPT linked to is unchanged" test "$(cat "$TMP/rootfile")" = original
check "the file FAIRGPU_PREEMPT.tmp linked to is unchanged" test "$(cat "$TMP/rootfile2")" = original
check "the notice is a regular file in the checkpoint dir" \
    test -f "$SHARED/$LOW/FAIRGPU_PREEMPT" -a ! -L "$SHARED/$LOW/FAIRGPU_PREEMPT"
check "the notice says preempt" grep -q '^preempt ' "$SHARED/$LOW/FAIRGPU_PREEMPT"
api POST "/v1/jobs/$LOW/cancel" >/dev/null
low_done() { local s; s=$(state "$LOW"); [ "$s" = CANCELLED ] || [ "$s" = COMPLETED ]; }
check "the low job ends after its cancel" wait_for 20 low_done

# ------------------------------- 2. links at predictable checkpoint paths --------
mkdir -p "$TMP/rootdir" && chmod 755 "$TMP/rootdir"
BEFORE=$(stat -c '%u:%g:%a' "$TMP/rootdir")
PLANT='S=$(dirname $FAIRGPU_CHECKPOINT_DIR); N=$((FAIRGPU_JOB_ID + 1)); M=$((FAIRGPU_JOB_ID + 2)); ln -s '"$TMP/rootdir"' $S/$N && mkdir $S/$M && echo evil >$S/$M/planted && chmod 777 $S/$M && echo planted'
P=$(api POST /v1/jobs "$(jq -nc --arg c "$PLANT" '{name:"plant",gpus:1,command:$c}')" | jq -r .id)
check "the planting job completes" wait_for 20 is_state "$P" COMPLETED
check "it planted a link and a directory" log_has "$P" '^planted'
check "the link is there" test -L "$SHARED/$((P + 1))"
VCMD='if [ -L "$FAIRGPU_CHECKPOINT_DIR" ]; then echo LINK; else echo REAL; fi; ls -A $FAIRGPU_CHECKPOINT_DIR | sed "s/^/has:/"; echo x >$FAIRGPU_CHECKPOINT_DIR/ckpt && echo wrote'
V1=$(AS=$BOB_TOK api POST /v1/jobs "$(jq -nc --arg c "$VCMD" '{name:"v1",gpus:1,command:$c}')" | jq -r .id)
V2=$(AS=$BOB_TOK api POST /v1/jobs "$(jq -nc --arg c "$VCMD" '{name:"v2",gpus:1,command:$c}')" | jq -r .id)
check "bob's jobs got the planted ids" test "$V1" = $((P + 1)) -a "$V2" = $((P + 2))
nothing_in() { ! log_has "$1" '^has:' "$BOB_TOK"; }
for V in "$V1" "$V2"; do
    check "job $V completes" wait_for 20 is_state "$V" COMPLETED "$BOB_TOK"
    check "job $V had a real checkpoint dir" log_has "$V" '^REAL' "$BOB_TOK"
    check "job $V found nothing planted in it" nothing_in "$V"
    check "job $V wrote its checkpoint" log_has "$V" '^wrote' "$BOB_TOK"
    check "job $V's checkpoint dir belongs to daemon, mode 700" \
        test "$(stat -c '%U:%a' "$SHARED/$V")" = daemon:700 -a ! -L "$SHARED/$V"
done
check "the root-owned directory keeps its owner and mode ($BEFORE)" \
    test "$(stat -c '%u:%g:%a' "$TMP/rootdir")" = "$BEFORE"
check "nothing was written into the root-owned directory" test ! -e "$TMP/rootdir/ckpt"
check "the planted entries were moved aside" \
    test "$(find "$SHARED" -maxdepth 1 -name '.fairgpu-rejected.*' | wc -l)" = 2
check "the agent is still up" kill -0 "${AGENT_PIDS[0]}"

if [ $FAILS -ne 0 ]; then
    echo "--- agent log (tail)" >&2
    tail -20 "$TMP/agent.log" >&2
    echo "test_agent_symlinks: $FAILS of $((CHECKS + FAILS)) checks FAILED" >&2
    exit 1
fi
echo "test_agent_symlinks: all $CHECKS checks passed"
