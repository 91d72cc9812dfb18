#!/usr/bin/env bash
# tools/readme-knobs.sh - pastes `baton-bench --params` into README.md in
# place of the old knob table (tests/test_readme.sh checks they agree).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
table=$("$BUILD/bin/baton-bench" --params)
first=$(printf '%s\n' "$table" | head -1)
awk -v first="$first" -v table="$table" '
  $0 == first { print table; skipping = 1; next }
  skipping && /^BATON_/ { next }
  { skipping = 0; print }
' README.md >README.md.new
mv README.md.new README.md
