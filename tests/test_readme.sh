#!/usr/bin/env bash
# tests/test_readme.sh - the tables the docs paste from the library are the
# ones it prints, so that they cannot drift apart:
#  - README.md's knob table is `baton-bench --params` (tools/readme-knobs.sh);
#  - docs/algorithms.md's table of algorithms, between its begin and end
#    markers, is `baton-model --list-algorithms --markdown`, made from the
#    algorithm table and its costs (tools/docs-algorithms.sh).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
passed=0 failed=0

table=$("$BUILD/bin/baton-bench" --params)
if grep -qxF -- "$(printf '%s\n' "$table" | head -1)" README.md &&
   diff <(printf '%s\n' "$table") <(grep -A$(($(printf '%s\n' "$table" | wc -l) - 1)) -xF -- "$(printf '%s\n' "$table" | head -1)" README.md) >/dev/null; then
  passed=$((passed + 1))
else
  echo "README.md's knob table differs from 'baton-bench --params'; run tools/readme-knobs.sh, or paste the new table in:"
  printf '%s\n' "$table"
  failed=$((failed + 1))
fi

table=$("$BUILD/bin/baton-model" --list-algorithms --markdown)
pasted=$(awk '/^<!-- end: baton-model --list-algorithms --markdown/ { exit }
              inside { print }
              /^<!-- begin: baton-model --list-algorithms --markdown/ { inside = 1 }' docs/algorithms.md)
if [ -n "$table" ] && [ "$table" = "$pasted" ]; then
  passed=$((passed + 1))
else
  echo "docs/algorithms.md's table of algorithms differs from 'baton-model --list-algorithms --markdown'; run tools/docs-algorithms.sh:"
  diff <(printf '%s\n' "$pasted") <(printf '%s\n' "$table")
  failed=$((failed + 1))
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
