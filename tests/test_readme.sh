#!/usr/bin/env bash
# tests/test_readme.sh - the knob table in README.md is the one the library
# prints (`baton-bench --params`), so the two cannot drift apart.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
table=$("$BUILD/bin/baton-bench" --params)
if grep -qxF -- "$(printf '%s\n' "$table" | head -1)" README.md &&
   diff <(printf '%s\n' "$table") <(grep -A$(($(printf '%s\n' "$table" | wc -l) - 1)) -xF -- "$(printf '%s\n' "$table" | head -1)" README.md) >/dev/null; then
  echo "1 passed, 0 failed"
else
  echo "README.md's knob table differs from 'baton-bench --params'; paste the new table in:"
  printf '%s\n' "$table"
  echo "0 passed, 1 failed"
  exit 1
fi
