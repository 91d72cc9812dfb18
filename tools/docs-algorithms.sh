#!/usr/bin/env bash
# tools/docs-algorithms.sh - pastes `baton-model --list-algorithms --markdown`
# into docs/algorithms.md between its begin and end markers, in place of the
# old table (tests/test_readme.sh checks they agree).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
table=$("$BUILD/bin/baton-model" --list-algorithms --markdown)
awk -v table="$table" '
  /^<!-- begin: baton-model --list-algorithms --markdown/ { print; print table; skipping = 1; next }
  /^<!-- end: baton-model --list-algorithms --markdown/ { skipping = 0 }
  !skipping { print }
' docs/algorithms.md >docs/algorithms.md.new
mv docs/algorithms.md.new docs/algorithms.md
