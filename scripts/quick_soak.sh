#!/usr/bin/env bash
# Issue 12's flake check (by hand, not CI): run the quick profile N times in a row against
# every backend's conformance classes and stop at the first failure, printing how long each
# round took. Usage: scripts/quick_soak.sh [N=20] [pytest -k expression]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. .venv/bin/activate
rounds="${1:-20}"
select="${2:-}"
files=(
  tests/test_conformance_sqlite.py
  tests/redis/test_conformance_redis.py
  tests/postgres/test_conformance_postgres.py
  tests/mongodb/test_conformance_mongodb.py
)
for round in $(seq 1 "$rounds"); do
  start=$(date +%s)
  args=(-q -p no:cacheprovider -o addopts= --tb=short -rfE)
  if [ -n "$select" ]; then args+=(-k "$select"); fi
  if ! python -m pytest "${files[@]}" "${args[@]}" >"/tmp/quick_soak.$round.log" 2>&1; then
    echo "round $round FAILED (log: /tmp/quick_soak.$round.log)"
    tail -20 "/tmp/quick_soak.$round.log"
    exit 1
  fi
  echo "round $round passed in $(( $(date +%s) - start )) s"
done
echo "$rounds rounds, no flake"
