#!/usr/bin/env bash
# tests/test_viz.sh - baton-viz and baton-model, as a user runs them.
#
#  - Every collective and algorithm the library has (baton-viz --list) at
#    N = 1, 2, 3, 4, 5, 7, 8, 16, with equal and uneven counts: the SVG and
#    the HTML page are well-formed XML (xmllint --noout).
#  - The ring at N = 4 draws exactly N-1 panels per phase, N arrows in each,
#    labelled with the chunks of the textbook ring: receiving rank r gets
#    chunk r-s-2 (reduce-scatter step s) or r-s-1 (allgather step s) mod N.
#  - A traced 4-rank run (test_trace under baton-run with BATON_TRACE)
#    renders with --trace, well-formed, to the same panels and labels as the
#    schedule drawn offline for the same call.
#  - Bad input to either tool is a clear error (exit 2), not a crash.
# Needs xmllint (Debian: libxml2-utils).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
VIZ=$BUILD/bin/baton-viz
MODEL=$BUILD/bin/baton-model
tmp=$(mktemp -d /tmp/baton-viz.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
check() { if "${@:2}"; then ok; else fail "$1"; fi; }

if ! command -v xmllint >/dev/null; then
  echo "xmllint is missing: apt-get install -y libxml2-utils"
  echo "0 passed, 1 failed"
  exit 1
fi

# Well-formed, for everything the library can draw.
while read -r coll algo; do
  for n in 1 2 3 4 5 7 8 16; do
    for count in "" 103; do
      out=$tmp/$coll-$algo-$n-${count:-0}
      if "$VIZ" -c "$coll" -a "$algo" -n "$n" ${count:+--count $count} -o "$out.svg" 2>"$out.err" &&
         xmllint --noout "$out.svg" 2>>"$out.err"; then ok; else fail "$coll $algo n=$n count=${count:-none} SVG: $(head -3 "$out.err")"; fi
    done
  done
  check "$coll $algo page" sh -c "'$VIZ' -c $coll -a $algo -n 5 -o '$tmp/p.html' && xmllint --noout '$tmp/p.html'"
done < <("$VIZ" --list)
check "the tree layout" sh -c "'$VIZ' -c allreduce -n 6 --layout tree -o '$tmp/t.svg' && xmllint --noout '$tmp/t.svg'"

# What a drawing says: its panel titles, then its arrow labels, in order.
content() {
  grep -o "class='ttl'[^>]*>[^<]*" "$1" | sed 's/.*>//'
  grep -o "class='lab'[^>]*>[^<]*" "$1" | sed 's/.*>//'
}

# The ring at N = 4 against the textbook.
for coll in allreduce reduce_scatter allgather; do
  "$VIZ" -c "$coll" -n 4 -o "$tmp/ring.svg"
  want=""
  for phase in reduce_scatter allgather; do
    [ "$coll" = allgather ] && [ $phase = reduce_scatter ] && continue
    [ "$coll" = reduce_scatter ] && [ $phase = allgather ] && continue
    for s in 0 1 2; do want+="$phase step $s"$'\n'; done
  done
  want+="result"$'\n'
  for phase in reduce_scatter allgather; do
    [ "$coll" = allgather ] && [ $phase = reduce_scatter ] && continue
    [ "$coll" = reduce_scatter ] && [ $phase = allgather ] && continue
    off=$([ $phase = reduce_scatter ] && echo 2 || echo 1)
    for s in 0 1 2; do
      for r in 0 1 2 3; do want+="c$(( ((r - s - off) % 4 + 4) % 4 ))"$'\n'; done
    done
  done
  got=$(content "$tmp/ring.svg")
  if [ "$got" = "${want%$'\n'}" ]; then ok; else
    fail "ring $coll n=4: panels and labels differ from the textbook ring"
    diff <(printf '%s\n' "$got") <(printf '%s' "$want") | head -10
  fi
done

# A real 4-rank run, traced, drawn with --trace: the same picture.
if BATON_TRACE="$tmp/trace.%r" "$BUILD/bin/baton-run" -n 4 "$BUILD/tests/test_trace" >"$tmp/run.log" 2>&1; then
  ok
  i=0
  # test_trace's calls, in order: collective, count, algorithm, root.
  for call in "allreduce 50003 ring 0" "reduce_scatter 20001 ring 0" "allgather 20001 ring 0" \
              "broadcast 50003 ring 1" "allreduce 3 flat 0"; do
    i=$((i + 1))
    set -- $call
    if "$VIZ" --trace "$tmp/trace.%r" --seq $i -o "$tmp/traced$i.svg" 2>"$tmp/err" &&
       xmllint --noout "$tmp/traced$i.svg"; then ok; else fail "--trace seq $i: $(cat "$tmp/err")"; fi
    "$VIZ" -c "$1" -a "$3" -n 4 --count "$2" --root "$4" -o "$tmp/offline$i.svg"
    check "--trace seq $i ($1 $3) draws what the schedule draws" \
      test "$(content "$tmp/traced$i.svg")" = "$(content "$tmp/offline$i.svg")"
    check "--trace seq $i shows step times" grep -q "slowest: rank" "$tmp/traced$i.svg"
  done
  check "--trace page" sh -c "'$VIZ' --trace '$tmp/trace.%r' -o '$tmp/traced.html' && xmllint --noout '$tmp/traced.html'"
else
  fail "traced run: $(tail -5 "$tmp/run.log")"
fi

# Bad input: exit 2 and a message that names what was wrong.
bad() { # bad WORD CMD...: fails with status 2 and says WORD
  "${@:2}" >"$tmp/out" 2>&1
  local rc=$?
  if [ $rc = 2 ] && grep -q -- "$1" "$tmp/out"; then ok; else
    fail "'${*:2}' gave status $rc and: $(head -2 "$tmp/out")"
  fi
}
bad "nonesuch" "$VIZ" -c nonesuch -n 4
bad "-n" "$VIZ" -c allreduce -n 0
bad "-n" "$VIZ" -c allreduce -n 65
bad "zzz" "$VIZ" -c allreduce -a zzz -n 4
bad "nothere" "$VIZ" --trace "$tmp/nothere.%r"
echo '{"seq":1,"rank":0' >"$tmp/broken.0"
bad "broken.0" "$VIZ" --trace "$tmp/broken.%r"
printf 'not json at all\n' >"$tmp/junk.0"
bad "junk.0" "$VIZ" --trace "$tmp/junk.%r"
bad "--bw" "$MODEL" -n 4 -s 1M --bw fast
bad "--size" "$MODEL" -n 4 -s lots
bad "nonesuch" "$MODEL" -c nonesuch -n 4 -s 1M

# baton-model: the ring row is the issue's 2(N-1)(K/N)/B with alpha 0.
line=$("$MODEL" -c allreduce -n 16 -s 64M --alpha 0 --bw 12.5GB/s | grep '^ring ')
check "baton-model ring allreduce N=16 64M 12.5GB/s = 10.066 ms: $line" \
  sh -c "echo '$line' | grep -q ' 10.066 ms'"
check "baton-model lists every algorithm of broadcast" \
  test "$("$MODEL" -c broadcast -n 8 -s 1M | grep -cE '^(naive|tree|chain) ')" = 3
line=$("$MODEL" -c allreduce -n 2 -s 1M --measure --iters 2 | grep '^ring ')
check "baton-model --measure times the ring: $line" \
  sh -c "echo '$line' | grep -qE '^ring +[0-9.]+ [mu]?s +[0-9.]+ [mu]?s'"
line=$("$MODEL" -c broadcast -n 3 -s 1M --measure --iters 2 | grep '^ring ')
check "baton-model --measure times the broadcast: $line" \
  sh -c "echo '$line' | grep -qE '^ring +[0-9.]+ [mu]?s +[0-9.]+ [mu]?s'"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
