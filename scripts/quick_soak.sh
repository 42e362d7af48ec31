#!/usr/bin/env bash
# Issue 12's flake check (by hand, not CI): the quick profile N times in a row per backend,
# stopping at the first failure, with each round's time and a min/median/max per backend.
# Usage: scripts/quick_soak.sh [N=20] [backend ...]   (default: every backend below)
#        SOAK_SELECT='C1 or C2' scripts/quick_soak.sh 5 sqlite   (a pytest -k expression)
# Servers come from the test harness (a URL from the env, else a local binary on a free port).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. .venv/bin/activate
declare -A FILES=(
  [memory]=tests/test_conformance_memory.py
  [sqlite]=tests/sqlite/test_conformance_sqlite.py
  [redis]=tests/redis/test_conformance_redis.py
  [postgres]=tests/postgres/test_conformance_postgres.py
  [mongodb]=tests/mongodb/test_conformance_mongodb.py
  [dynamodb]=tests/dynamodb/test_conformance_dynamodb.py
)
rounds="${1:-20}"
shift || true
backends=("$@")
if [ "${#backends[@]}" -eq 0 ]; then backends=(memory sqlite redis postgres mongodb dynamodb); fi
logs="$(mktemp -d -t quick_soak.XXXXXX)"
echo "logs: $logs (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
for backend in "${backends[@]}"; do
  file="${FILES[$backend]:-}"
  alt="tests/$backend/test_conformance_$backend.py"  # the tests/<store>/ shape
  if { [ -z "$file" ] || [ ! -f "$file" ]; } && [ -f "$alt" ]; then file="$alt"; fi
  if [ -z "$file" ] || [ ! -f "$file" ]; then
    echo "$backend: no conformance file (known: ${!FILES[*]})"
    exit 2
  fi
  times=()
  for round in $(seq 1 "$rounds"); do
    # the per-clause table stays in each round's log: what each round left out, and why
    args=(-q -p no:cacheprovider -o addopts= --tb=short -rfE)
    if [ -n "${SOAK_SELECT:-}" ]; then args+=(-k "$SOAK_SELECT"); fi
    log="$logs/$backend.$round.log"
    start=$(date +%s.%N)
    if ! python -m pytest "$file" "${args[@]}" >"$log" 2>&1; then
      echo "$backend round $round FAILED (log: $log)"
      tail -20 "$log"
      exit 1
    fi
    took=$(echo "$(date +%s.%N) - $start" | bc)
    times+=("$took")
    printf '%s round %d passed in %.1f s, load %s (%s)\n' "$backend" "$round" "$took" \
      "$(cut -d' ' -f1-3 /proc/loadavg)" "$(tail -1 "$log")"
  done
  printf '%s\n' "${times[@]}" | sort -n | awk -v b="$backend" -v n="$rounds" \
    '{t[NR]=$1} END {printf "%s: %d rounds, no flake; seconds min %.1f, median %.1f, max %.1f\n", b, n, t[1], t[int((NR+1)/2)], t[NR]}'
done
