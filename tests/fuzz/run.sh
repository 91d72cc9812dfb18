#!/usr/bin/env bash
# tests/fuzz/run.sh SECONDS [TARGET...] - runs each fuzz target of
# build-fuzz/ (`make fuzz`) for SECONDS, starting from its committed corpus
# in tests/fuzz/corpus/TARGET/ (seeds, and every crash found so far as a
# regression input), with new inputs kept in build-fuzz/corpus/TARGET/.
# A crash leaves build-fuzz/crash-TARGET-* and makes the exit status 1:
# copy that file into tests/fuzz/corpus/TARGET/ once fixed.
#   make fuzz-run FUZZ_SECONDS=600      the longer run
set -u
cd "$(dirname "$0")/../.."
seconds=${1:-20}
shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_store_server fuzz_store_client fuzz_auth fuzz_tcp)
passed=0 failed=0
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t"
  echo "== $t for $seconds s"
  if "build-fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="build-fuzz/crash-$t-" \
      "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" 2>"build-fuzz/$t.log"; then
    grep -E "Done [0-9]+ runs" "build-fuzz/$t.log" | tail -1
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: $t crashed; see build-fuzz/$t.log and build-fuzz/crash-$t-*"
    tail -30 "build-fuzz/$t.log"
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
