#!/usr/bin/env bash
# Each agent-host example in a fresh venv holding only its framework's extra, as a new
# user would run it: pip install 'decision-ledger[<framework>]', then the example as written.
# Not run by CI (it downloads each framework); run it before a release.
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
status=0
for fw in langgraph pydantic-ai openai-agents google-adk agent-framework; do
  d="$(mktemp -d)"
  python3 -m venv "$d/venv"
  if ! "$d/venv/bin/pip" install -q "$root[$fw]" >"$d/pip.log" 2>&1; then
    echo "$fw: pip install failed (log: $d/pip.log)"; status=1; continue
  fi
  example="$root/examples/$(echo "$fw" | tr - _)_approval.py"
  if out="$(cd "$d" && "$d/venv/bin/python" "$example" 2>&1)"; then
    echo "$fw: ok"; echo "$out" | sed 's/^/  /'
    rm -rf "$d"
  else
    echo "$fw: FAILED"; echo "$out" | tail -5 | sed 's/^/  /'; status=1
  fi
done
exit "$status"
