#!/usr/bin/env bash
# tests/test_select.sh - the algorithm choice as a user meets it.
#
#  - BATON_ALGO=bogus, allreduce:bogus and nosuchcoll:ring stop init with
#    a message naming what was wrong (exit status not 0, no hang);
#  - BATON_DEBUG=INFO prints each decision with the candidates' predicted
#    times, once per (collective, power of two) and rank, not per call;
#    with BATON_ALGO=ring the line says the choice was forced;
#  - BATON_ALGO=allreduce:flat over TCP says once why flat cannot serve and
#    the calls still run;
#  - at N=2 an allgather of 2 MiB is priced with the ring channel's beta
#    for every algorithm, so the ring, not rd, is picked (BATON_CMA=0);
#    with CMA, direct is picked for an allgather and an alltoall at half
#    the L2 cache, and at 4 times it unless rank 0's copy by the kernel
#    costs two memcpys or more;
#  - baton-tune writes a tune file that init then reads (rank 0 says so at
#    INFO), and a malformed tune file is a WARN naming the line, not a
#    failure.
# No timing is checked: only what is printed and that the runs succeed.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
RUN=$BUILD/bin/baton-run
BENCH=$BUILD/bin/baton-bench
TUNE=$BUILD/bin/baton-tune
tmp=$(mktemp -d /tmp/baton-select.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

# expect_init_error SPEC TEXT: init fails and stderr contains TEXT.
expect_init_error() {
  local spec=$1 text=$2
  if BATON_ALGO=$spec timeout 60 "$RUN" -n 2 "$BENCH" -b 8 -e 8 -w 1 -n 1 >"$tmp/out" 2>&1; then
    fail "BATON_ALGO=$spec: the run succeeded"
  elif ! grep -qF -- "$text" "$tmp/out"; then
    fail "BATON_ALGO=$spec: no \"$text\" in:"
    sed 's/^/    /' "$tmp/out" | head -5
  else
    ok
  fi
}
expect_init_error bogus 'BATON_ALGO: unknown algorithm "bogus"; known: ring'
expect_init_error allreduce:bogus 'BATON_ALGO: unknown algorithm "bogus"'
expect_init_error nosuchcoll:ring 'BATON_ALGO: unknown collective "nosuchcoll" in "nosuchcoll:ring"'

# The decision lines: "allreduce 1024 B on 2 ranks (shm): A t us < B t us -> A".
line_re='allreduce 1024 B on 2 ranks \(shm\): [a-z]+ [0-9.e+-]+ us( < [a-z]+ [0-9.e+-]+ us)* -> [a-z]+'
BATON_DEBUG=INFO BATON_DEBUG_SUBSYS=COLL "$RUN" -n 2 "$BENCH" -b 1K -e 1K -w 2 -n 10 \
  >"$tmp/info" 2>&1 || fail "INFO run failed: $(tail -3 "$tmp/info")"
n=$(grep -Ec "$line_re" "$tmp/info")
calls=$(grep -c 'allreduce #' "$tmp/info")
if [ "$n" = 2 ] && [ "$calls" -gt 4 ]; then ok; else
  fail "want one decision line per rank for 1 KiB ($calls calls logged), got $n:"
  grep 'on 2 ranks' "$tmp/info" | head -5
fi
# The chosen algorithm is the first, cheapest candidate.
if grep -E "$line_re" "$tmp/info" | head -1 | grep -Eq ': ([a-z]+) [^<]* (< .*)?-> \1$'; then ok; else
  fail "the choice is not the cheapest candidate: $(grep -E "$line_re" "$tmp/info" | head -1)"
fi
BATON_ALGO=ring BATON_DEBUG=INFO BATON_DEBUG_SUBSYS=COLL "$RUN" -n 2 "$BENCH" -b 1K -e 1K -w 1 \
  -n 2 >"$tmp/forced" 2>&1 || fail "BATON_ALGO=ring run failed"
if grep -Eq "allreduce 1024 B on 2 ranks \(shm\): .* -> ring \(BATON_ALGO\)" "$tmp/forced"; then ok; else
  fail "BATON_ALGO=ring: no forced decision line: $(grep 'on 2 ranks' "$tmp/forced" | head -2)"
fi

# At N=2 every algorithm reaches the one peer over the ring's channel, so
# rd's allgather is priced with the ring's beta and, with its extra rounds,
# is not picked over the ring (the pair channels' beta made rd win from 32
# KiB). Built-in costs: a tune file that does not exist. Among the staged
# algorithms, so BATON_CMA=0; with it, direct by the kernel goes first up
# to the L2 cache, and past it where the kernel's copy beats two memcpys
# (select.c, cma_cannot).
BATON_CMA=0 BATON_TUNE_FILE=$tmp/none BATON_DEBUG=INFO BATON_DEBUG_SUBSYS=COLL "$RUN" -n 2 \
  "$BENCH" -c allgather -b 2M -e 2M -w 1 -n 1 >"$tmp/ag2" 2>&1 || fail "allgather 2 MiB run failed"
if grep -Eq "allgather 2097152 B on 2 ranks \(shm\): ring .* -> ring$" "$tmp/ag2"; then ok; else
  fail "N=2 allgather 2 MiB: want ring first: $(grep 'on 2 ranks' "$tmp/ag2" | head -1)"
fi
l2=$(getconf LEVEL2_CACHE_SIZE 2>/dev/null || echo 0)
if [ "${l2:-0}" -ge $((1 << 20)) ] && [ "$l2" -le $((64 << 20)) ]; then
  for c in allgather alltoall; do
    BATON_TUNE_FILE=$tmp/none BATON_DEBUG=INFO BATON_DEBUG_SUBSYS=COLL,INIT "$RUN" -n 2 "$BENCH" \
      -c $c -b $((l2 / 2)) -e $((l2 * 4)) -f 8 -w 1 -n 1 >"$tmp/cma-$c" 2>&1 ||
      fail "$c by CMA run failed"
  done
  # Past the cache only where rank 0's kernel copy costs less than two
  # memcpys, both measured past the cache (its INIT line says them, after
  # the two in the cache): else a staged algorithm.
  for c in allgather alltoall; do
    big=direct
    line=$(grep -m1 'a copy by the kernel (CMA):' "$tmp/cma-$c") ||
      fail "$c by CMA: rank 0 did not say what the kernel's copy costs"
    [[ "$line" =~ \;\ ([0-9.e+-]+)\ and\ ([0-9.e+-]+)\ past\ it ]] ||
      fail "$c by CMA: no figures past the cache in: $line"
    awk -v k="${BASH_REMATCH[1]}" -v m="${BASH_REMATCH[2]}" 'BEGIN {exit !(k + 0 >= 2 * m)}' &&
      big=staged
    small=$(grep -E "$c $((l2 / 2)) B on 2 ranks \(shm\): " "$tmp/cma-$c" | head -1)
    large=$(grep -E "$c $((l2 * 4)) B on 2 ranks \(shm\): " "$tmp/cma-$c" | head -1) got=
    if [[ -n "$large" ]]; then [[ "$large" == *"-> direct" ]] && got=direct || got=staged; fi
    if [[ "$small" == *"-> direct" ]] && [ "${got:-}" = $big ]; then ok; else
      fail "N=2 $c by CMA: want direct at L2/2 and $big at 4 L2: $small / $large"
    fi
  done
fi

# Flat cannot run over TCP: said once per collective, and the calls run.
BATON_TRANSPORT=tcp BATON_ALGO=allreduce:flat BATON_DEBUG=INFO BATON_DEBUG_SUBSYS=COLL \
  "$RUN" -n 2 "$BENCH" -b 8 -e 4K -f 8 -w 1 -n 3 --check >"$tmp/tcp" 2>&1 ||
  fail "BATON_ALGO=allreduce:flat over TCP failed: $(tail -3 "$tmp/tcp")"
n=$(grep -c 'allreduce: BATON_ALGO asks for flat, but it needs every rank on one host' "$tmp/tcp")
if [ "$n" = 2 ]; then ok; else fail "flat over TCP: want the reason once per rank, got $n"; fi
if grep -Eq 'on 2 ranks \(tcp\): .* -> [a-z]+$' "$tmp/tcp" && ! grep -q ' -> flat' "$tmp/tcp"; then ok; else
  fail "flat over TCP: no tcp decision for another algorithm: $(grep 'on 2 ranks' "$tmp/tcp" | head -2)"
fi

# baton-tune writes the file; init reads it.
"$RUN" -n 2 "$TUNE" -o "$tmp/tune" >"$tmp/tune.out" 2>&1 || fail "baton-tune: $(tail -3 "$tmp/tune.out")"
if grep -Eq '^shm alpha=[0-9.e+-]+ beta=[0-9.e+-]+ gamma=[0-9.e+-]+ oversub=[0-9.e+-]+ obeta=' "$tmp/tune" &&
  grep -q '^tcp ' "$tmp/tune"; then ok; else fail "baton-tune wrote: $(cat "$tmp/tune" 2>&1)"; fi
BATON_TUNE_FILE=$tmp/tune BATON_DEBUG=INFO BATON_DEBUG_SUBSYS=INIT "$RUN" -n 2 "$BENCH" -b 8 \
  -e 8 -w 1 -n 1 >"$tmp/read" 2>&1 || fail "run with the tune file failed"
if grep -q "link costs from $tmp/tune" "$tmp/read"; then ok; else fail "init did not read the tune file"; fi
printf 'shm alpha=1e-6\nshm speed=fast\n' >"$tmp/bad"
BATON_TUNE_FILE=$tmp/bad "$RUN" -n 2 "$BENCH" -b 8 -e 8 -w 1 -n 1 >"$tmp/badout" 2>&1 ||
  fail "a malformed tune file stopped the run: $(tail -3 "$tmp/badout")"
if grep -q "WARN INIT tune file: $tmp/bad:2: \"shm speed=fast\"" "$tmp/badout"; then ok; else
  fail "malformed tune file: no WARN naming line 2: $(grep -i tune "$tmp/badout" | head -2)"
fi
BATON_TUNE_FILE=$tmp/missing "$RUN" -n 2 "$BENCH" -b 8 -e 8 -w 1 -n 1 >"$tmp/missing.out" 2>&1 ||
  fail "a missing BATON_TUNE_FILE stopped the run"
if grep -q "BATON_TUNE_FILE=$tmp/missing does not exist" "$tmp/missing.out"; then ok; else
  fail "missing BATON_TUNE_FILE: not said"
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
