#!/usr/bin/env bash
# test_sim_reference.sh - the scheduler's decisions on the shared traces stay what they
# were: every policy on each trace at two cluster sizes (scripts/refcheck with
# FG_REF_QUICK=1: metrics, job records with every start and end, share series) must
# give the bytes whose digests are in tests/reference/sim.sha256.
# A change meant to change decisions writes the digests again and says why:
#   bash tests/integration/test_sim_reference.sh FAIRGPU --update
# usage: bash test_sim_reference.sh /path/to/fairgpu [--update]
set -euo pipefail
FG=${1:?usage: test_sim_reference.sh FAIRGPU [--update]}
SRC=${FG_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
SUMS=$SRC/tests/reference/sim.sha256
if [ ! -d "$SRC/../shared/traces" ]; then
  echo "skip: no shared traces beside the repository"
  exit 77
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FG_REF_QUICK=1 "$SRC/scripts/refcheck" write "$FG" "$TMP/out"
if [ "${2:-}" = --update ]; then
  (cd "$TMP/out" && sha256sum -- *) > "$SUMS"
  echo "wrote $(wc -l < "$SUMS") digests to tests/reference/sim.sha256"
  exit 0
fi
[ "$(find "$TMP/out" -type f | wc -l)" = "$(wc -l < "$SUMS")" ] ||
  { echo "FAIL: $(find "$TMP/out" -type f | wc -l) outputs, $(wc -l < "$SUMS") digests" >&2; exit 1; }
if ! (cd "$TMP/out" && sha256sum --quiet -c "$SUMS"); then
  echo "FAIL: decisions changed on the reference traces (see above)" >&2
  exit 1
fi
echo "ok: $(wc -l < "$SUMS") reference outputs the same bytes"
