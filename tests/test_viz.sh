#!/usr/bin/env bash
# tests/test_viz.sh - baton-viz and baton-model, as a user runs them.
#
#  - Every collective and algorithm the library has (baton-viz --list) at
#    N = 1..8 and 16 (uneven counts at 3, 5 and 8), every root of a rooted
#    collective at N = 5: baton-viz simulates the schedule (what every
#    rank's INPUT and WORK hold after each step) and exits 0 only when the
#    result is what the collective promises, which the last panel says; the
#    SVG and the HTML page are well-formed XML (xmllint --noout).
#  - An algorithm asked for a collective it does not serve is refused with
#    a message that names the ones that do.
#  - The tree layout puts the root on top and every other rank below a rank
#    it talks to.
#  - rhd at N = 5 (where it has been merged) draws its fold and unfold.
#  - The ring at N = 4 draws exactly N-1 panels per phase, N arrows in each,
#    labelled with the chunks of the textbook ring: receiving rank r gets
#    chunk r-s-2 (reduce-scatter step s) or r-s-1 (allgather step s) mod N.
#  - flat is drawn from the schedule the library runs: one round in which
#    every rank puts its input in its mailbox and reads the others'.
#  - A hand-written trace of a 2-rank ring allreduce (one line a step, the
#    format of docs/trace.md) renders; the same with one step's kind
#    changed is refused, naming the step.
#  - A traced 4-rank run (test_trace under baton-run with BATON_TRACE), and
#    one per algorithm forced with BATON_ALGO at N = 5 (flat included),
#    renders with --trace, well-formed, to the same panels and labels as
#    the schedule drawn offline for the same call.
#  - baton-model lists, for a collective, exactly the algorithms that serve
#    it; --measure at N = 2 and 3 gives each allreduce algorithm a measured
#    time or a reason from its traits (hier on one host); --list-algorithms
#    names every algorithm baton-viz draws.
#  - Bad input to either tool is a clear error (exit 2), not a crash.
# Needs xmllint (Debian: libxml2-utils).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
VIZ=$BUILD/bin/baton-viz
MODEL=$BUILD/bin/baton-model
tmp=$(mktemp -d /tmp/baton-viz.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0 skipped=0
ok() { passed=$((passed + 1)); }
skip() { skipped=$((skipped + 1)); echo "SKIP: $*"; }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
check() { if "${@:2}"; then ok; else fail "$1"; fi; }

if ! command -v xmllint >/dev/null; then
  echo "xmllint is missing: apt-get install -y libxml2-utils"
  echo "0 passed, 1 failed"
  exit 1
fi

# bad WORD CMD...: CMD fails with status 2 and a message that says WORD.
bad() { # bad WORD CMD...: fails with status 2 and says WORD
  "${@:2}" >"$tmp/out" 2>&1
  local rc=$?
  if [ $rc = 2 ] && grep -q -- "$1" "$tmp/out"; then ok; else
    fail "'${*:2}' gave status $rc and: $(head -2 "$tmp/out")"
  fi
}

# Drawn, well-formed and as promised, for everything the library can draw.
promised() { grep -q "class='ttl'[^>]*>result: what $1 promises<" "$2"; }
rooted() { case $1 in broadcast|reduce|gather|scatter) return 0;; esac; return 1; }
while read -r coll algo; do
  for n in 1 2 3 4 5 6 7 8 16; do
    for count in "" $(case $n in 3|5|8) echo 103;; esac); do
      out=$tmp/$coll-$algo-$n-${count:-0}
      if "$VIZ" -c "$coll" -a "$algo" -n "$n" ${count:+--count $count} -o "$out.svg" 2>"$out.err" &&
         xmllint --noout "$out.svg" 2>>"$out.err" && promised "$coll" "$out.svg"; then ok; else
        fail "$coll $algo n=$n count=${count:-none}: $(head -3 "$out.err")"
      fi
    done
  done
  if rooted "$coll"; then
    for root in 1 2 3 4; do
      out=$tmp/$coll-$algo-root$root
      if "$VIZ" -c "$coll" -a "$algo" -n 5 --root $root -o "$out.svg" 2>"$out.err" &&
         promised "$coll" "$out.svg"; then ok; else fail "$coll $algo n=5 root $root: $(head -3 "$out.err")"; fi
    done
  fi
  check "$coll $algo page" sh -c "'$VIZ' -c $coll -a $algo -n 5 -o '$tmp/p.html' && xmllint --noout '$tmp/p.html'"
done < <("$VIZ" --list)

# Ranks on hosts (what hier reads; the others ignore it): 2 hosts of 3 and 2.
for algo in $("$VIZ" --list | awk '$1 == "allreduce" {print $2}'); do
  out=$tmp/hosts-$algo
  if "$VIZ" -c allreduce -a "$algo" -n 5 --hosts 0,0,0,1,1 -o "$out.svg" 2>"$out.err" &&
     promised allreduce "$out.svg"; then ok; else fail "allreduce $algo on hosts 0,0,0,1,1: $(head -3 "$out.err")"; fi
done
bad "--hosts" "$VIZ" -c allreduce -n 3 --hosts 0,1

# The tree layout: the root (rank 2) on top, alone; every other rank's box
# lower down. Rank q's box is the rect just before its "rank q" label.
node_y() { grep -o "y='[0-9.]*' class='rk'>rank $2<" "$1" | head -1 | sed "s/y='\([0-9.]*\)'.*/\1/"; }
for algo in ring $("$VIZ" --list | awk '$1 == "broadcast" && $2 != "ring" && $2 != "flat" {print $2}'); do
  "$VIZ" -c broadcast -a "$algo" -n 7 --root 2 --layout tree -o "$tmp/tree.svg" 2>"$tmp/err"
  top=$(node_y "$tmp/tree.svg" 2)
  below=1
  for q in 0 1 3 4 5 6; do
    y=$(node_y "$tmp/tree.svg" $q)
    awk -v a="$y" -v b="$top" 'BEGIN { exit !(a > b) }' || below=0
  done
  check "tree layout of $algo broadcast from 2: the root above every other rank" test "$below" = 1
done

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
  want+="result: what $coll promises"$'\n'
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

# Recursive halving-doubling as the textbook has it: on 8 ranks, log2(8) = 3
# reduce-scatter steps in which every rank sends half, then a quarter, then
# an eighth of the chunks (runs of 4, 2, 1), then 3 allgather steps of 1,
# 2, 4; on 5 ranks the extra rank folds in first and gets the result last.
runs() { # runs FILE N: the run length of every arrow label, in order
  grep -o "class='lab'[^>]*>[^<]*" "$1" | sed 's/.*>//' | while read -r l; do
    case $l in
      all) echo "$2" ;;
      c*–c*) a=${l%%–*} b=${l##*–}; echo $(( ((${b#c} - ${a#c}) % $2 + $2) % $2 + 1 )) ;;
      *) echo 1 ;;
    esac
  done | tr '\n' ' '
}
if "$VIZ" --list | grep -q '^allreduce rhd$'; then
  "$VIZ" -c allreduce -a rhd -n 8 -o "$tmp/rhd8.svg"
  want="reduce_scatter step 0;reduce_scatter step 1;reduce_scatter step 2;allgather step 0;allgather step 1;allgather step 2;result: what allreduce promises;"
  check "rhd allreduce n=8: 3 reduce-scatter and 3 allgather steps" \
    test "$(grep -o "class='ttl'[^>]*>[^<]*" "$tmp/rhd8.svg" | sed 's/.*>//' | tr '\n' ';')" = "$want"
  want="$(printf '4 %.0s' 1 2 3 4 5 6 7 8)$(printf '2 %.0s' 1 2 3 4 5 6 7 8)$(printf '1 %.0s' 1 2 3 4 5 6 7 8)"
  want+="$(printf '1 %.0s' 1 2 3 4 5 6 7 8)$(printf '2 %.0s' 1 2 3 4 5 6 7 8)$(printf '4 %.0s' 1 2 3 4 5 6 7 8)"
  got=$(runs "$tmp/rhd8.svg" 8)
  check "rhd allreduce n=8: every rank sends runs of 4, 2, 1 chunks, then 1, 2, 4 (got: $got)" \
    test "$got" = "$want"
  "$VIZ" -c allreduce -a rhd -n 5 -o "$tmp/rhd5.svg"
  titles=$(grep -o "class='ttl'[^>]*>[^<]*" "$tmp/rhd5.svg" | sed 's/.*>//' | tr '\n' ';')
  check "rhd allreduce n=5 folds first and unfolds last: $titles" \
    sh -c "echo '$titles' | grep -q '^fold step 0;reduce_scatter.*;unfold step 0;result'"
else
  skip "the rhd checks: no rhd in baton-viz --list"
fi

# flat: the mailbox rendezvous as the library runs it, one round: an
# allgather on 4 ranks reads 3 mailboxes on every rank, a broadcast only
# the root's.
"$VIZ" -c allgather -a flat -n 4 -o "$tmp/flat.svg"
check "flat allgather n=4: one round, then the result" \
  test "$(grep -o "class='ttl'[^>]*>[^<]*" "$tmp/flat.svg" | sed 's/.*>//' | tr '\n' ';')" = \
  "flat step 0;result: what allgather promises;"
check "flat allgather n=4: 12 mailbox reads" \
  test "$(grep -c "from its mailbox" "$tmp/flat.svg")" = 12
"$VIZ" -c broadcast -a flat -n 4 --root 2 -o "$tmp/flatb.svg"
check "flat broadcast n=4 root 2: 3 reads of rank 2's mailbox" \
  test "$(grep -c "rank 2 to rank [013]: .* from its mailbox" "$tmp/flatb.svg")" = 3

# A trace written by hand: a 2-rank ring allreduce, one line a step.
tline() { # tline RANK PHASE STEP KIND CHUNK SRC SEND_TO RECV_FROM FINISH
  printf '{"rank":%d,"size":2,"seq":1,"coll":"allreduce","algo":"ring","dtype":"float32","count":4,"root":-1,"host":%d,"phase":"%s","step":%d,"kind":"%s","chunk":%d,"n":1,"src":"%s","send_to":%d,"recv_from":%d,"finish":%d,"bytes":8,"t_start_us":%d,"t_end_us":%d,"rc":0}\n' \
    "$1" "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$9" $((10 + $3)) $((12 + $3))
}
for r in 0 1; do
  o=$((1 - r))
  { tline $r reduce_scatter 0 send $o input $o -1 0
    tline $r reduce_scatter 0 recv_reduce_copy_send $r input $o $o 1
    tline $r allgather 0 recv_copy $o none -1 $o 0; } >"$tmp/hand.$r"
done
check "a hand-written ring trace renders" \
  sh -c "'$VIZ' --trace '$tmp/hand.%r' -o '$tmp/hand.svg' && grep -q 'slowest: rank' '$tmp/hand.svg'"
sed 's/recv_reduce_copy_send/recv_reduce_send/' "$tmp/hand.1" >"$tmp/kind.1"
cp "$tmp/hand.0" "$tmp/kind.0"
bad "rank 1, collective 1: the trace's step 1 (recv_reduce_send" "$VIZ" --trace "$tmp/kind.%r"

# Real runs, traced, drawn with --trace: the same picture as the schedule
# drawn offline for the same call (what ran is read from the trace).
# test_trace makes 11 calls and a barrier (seq 1..12; the calls it makes
# afterwards are not drawn); every one of its checks passes.
jfield() { grep -o "\"$2\":\"*[^,\"]*" <<<"$1" | head -1 | sed 's/.*[:"]//'; }
traced() { # traced N LABEL [ENV...]
  local n=$1 label=$2 dir=$tmp/$2
  shift 2
  mkdir -p "$dir"
  if env "$@" BATON_TRACE="$dir/trace.%r" "$BUILD/bin/baton-run" -n "$n" "$BUILD/tests/test_trace" \
       >"$dir/run.log" 2>&1; then ok; else fail "traced run $label: $(tail -5 "$dir/run.log")"; return; fi
  for i in $(grep -o '"seq":[0-9]*' "$dir/trace.0" | sed 's/.*://' | sort -nu | awk '$1 <= 12'); do
    local line
    line=$(grep -m1 "\"seq\":$i," "$dir/trace.0")
    local coll algo count root
    coll=$(jfield "$line" coll) algo=$(jfield "$line" algo) count=$(jfield "$line" count)
    root=$(jfield "$line" root)
    [ "$root" = -1 ] && root=0
    if "$VIZ" --trace "$dir/trace.%r" --seq $i -o "$dir/traced$i.svg" 2>"$dir/err" &&
       xmllint --noout "$dir/traced$i.svg"; then ok; else fail "$label --trace seq $i: $(cat "$dir/err")"; fi
    local hosts="" counts
    for ((r = 0; r < n; r++)); do hosts+="${hosts:+,}$(jfield "$(head -1 "$dir/trace.$r")" host)"; done
    counts=$(grep -o '"counts":"[^"]*' <<<"$line" | sed 's/.*"//')
    if [ -n "$counts" ]; then count=""; fi
    "$VIZ" -c "$coll" -a "$algo" -n "$n" ${count:+--count $count} ${counts:+--counts $counts} \
      --root "$root" --hosts "$hosts" -o "$dir/offline$i.svg"
    check "$label --trace seq $i ($coll $algo) draws what the schedule draws" \
      test "$(content "$dir/traced$i.svg")" = "$(content "$dir/offline$i.svg")"
    check "$label --trace seq $i shows step times" grep -q "slowest: rank" "$dir/traced$i.svg"
  done
  check "$label --trace page" sh -c "'$VIZ' --trace '$dir/trace.%r' -o '$dir/traced.html' && xmllint --noout '$dir/traced.html'"
}
traced 4 default
for algo in $("$VIZ" --list | awk '$2 != "ring" {print $2}' | sort -u); do
  traced 5 "$algo" BATON_ALGO="$algo"
done

# Bad input to either tool: exit 2 and a message that names what was wrong.
bad "nonesuch" "$VIZ" -c nonesuch -n 4
bad "-n" "$VIZ" -c allreduce -n 0
bad "-n" "$VIZ" -c allreduce -n 65
bad "zzz" "$VIZ" -c allreduce -a zzz -n 4
bad "flat does not serve reduce; the algorithms that do: ring" "$VIZ" -c reduce -a flat -n 4
bad "nothing to draw" "$VIZ" -c barrier -n 4
bad "nothere" "$VIZ" --trace "$tmp/nothere.%r"
echo '{"seq":1,"rank":0' >"$tmp/broken.0"
bad "broken.0" "$VIZ" --trace "$tmp/broken.%r"
echo '{"seq":1,"rank":0,"size":2,"coll":"allreduce","algo":"ring","dtype":"float32","count":4,"root":-1,"host":5,"phase":"reduce_scatter","step":0,"kind":"send","chunk":1,"n":1,"src":"input","send_to":1,"recv_from":-1,"finish":0,"bytes":8,"t_start_us":1,"t_end_us":2,"rc":0}' >"$tmp/host.0"
bad "host 5 is not a host of 2 ranks" "$VIZ" --trace "$tmp/host.%r"
printf 'not json at all\n' >"$tmp/junk.0"
bad "junk.0" "$VIZ" --trace "$tmp/junk.%r"
bad "--bw" "$MODEL" -n 4 -s 1M --bw fast
bad "--size" "$MODEL" -n 4 -s lots
bad "nonesuch" "$MODEL" -c nonesuch -n 4 -s 1M

# baton-model: the ring row is the issue's 2(N-1)(K/N)/B with alpha 0.
line=$("$MODEL" -c allreduce -n 16 -s 64M --alpha 0 --bw 12.5GB/s | grep '^ring ')
check "baton-model ring allreduce N=16 64M 12.5GB/s = 10.066 ms: $line" \
  sh -c "echo '$line' | grep -q ' 10.066 ms'"
want=$("$VIZ" --list | awk '$1 == "broadcast" {print $2}' | sort | tr '\n' ' ')
got=$("$MODEL" -c broadcast -n 8 -s 1M | awk 'NR > 3 && !/^#/ {print $1}' | sort | tr '\n' ' ')
check "baton-model lists every algorithm of broadcast, and only those: $got" test "$got" = "$want"
# baton-model --measure: every algorithm of the table that serves the
# collective is run, forced with BATON_ALGO, or says why it cannot run here
# from its traits (hier needs several hosts; flat, shared memory).
for n in 2 3; do
  "$MODEL" -c allreduce -n $n -s 1K --measure --iters 5 >"$tmp/measure" 2>&1
  for algo in $("$VIZ" --list | awk '$1 == "allreduce" {print $2}'); do
    line=$(grep "^$algo " "$tmp/measure")
    if grep -qE "^$algo +[0-9.]+ [mu]?s +[0-9.]+ [mu]?s " <<<"$line" ||
       grep -qE "\(measured: $algo (folds each host|meets in shared-memory|takes at most)" <<<"$line"; then
      ok
    else
      fail "baton-model --measure -n $n: $algo has neither a measured time nor a reason: ${line:-no row}"
    fi
  done
  check "baton-model --measure -n $n: hier, on one host, says it needs several" \
    grep -q "^hier .*(measured: hier folds each host into a leader: it needs several hosts" "$tmp/measure"
  check "baton-model --measure -n $n: every knob found" sh -c "! grep -q 'no knob selects' '$tmp/measure'"
done
line=$("$MODEL" -c broadcast -n 3 -s 1K --measure --iters 5 | grep '^ring ')
check "baton-model --measure times the broadcast: $line" \
  sh -c "echo '$line' | grep -qE '^ring +[0-9.]+ [mu]?s +[0-9.]+ [mu]?s'"
check "baton-model --list-algorithms names every algorithm baton-viz draws" \
  test "$("$MODEL" --list-algorithms | awk '!/^[# ]/ {print $1}' | sort | tr '\n' ' ')" = \
  "$("$VIZ" --list | awk '{print $2}' | sort -u | tr '\n' ' ')"

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
