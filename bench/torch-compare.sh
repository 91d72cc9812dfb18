#!/usr/bin/env bash
# bench/torch-compare.sh - baton beside Gloo through torch.distributed, in one run.
#
#   make && bench/torch-compare.sh [options]
#
# Parts:
#   shm2, shm4   N=2 and N=4 on this host (baton over shared memory, Gloo over
#                loopback TCP: it has nothing else)
#   cluster4     4 emulated hosts of scripts/cluster.sh, one rank each, links
#                shaped to --rate (1gbit), with iperf3's rate over one link
#                measured in the same cluster first (root, iproute2, iperf3)
#   ddp          examples/train_torch.py (the 25.2M-parameter MLP, batch 16
#                per rank, one thread per rank) at N=2 and N=4 on this host,
#                --reps rounds of: one process alone, then DDP over baton and
#                over Gloo (the median step of each run; the best run of each
#                kept, and each round's own ratio); the overhead is the step
#                time at N minus the step time alone. Beside them DDP with a
#                comm hook that does not communicate (--noop-hook): what
#                bucketing and N ranks sharing the machine cost without any
#                backend
#   ddp-cluster4 the same DDP on the 4 emulated hosts (alone: this host)
# Each collective part runs bench/torch_bench.py under baton-run: allreduce,
# allgather, reduce_scatter, broadcast and alltoall, --min to --max by
# factors of 4, baton and Gloo in the same processes, one right after the
# other at each size (see torch_bench.py for how a call is timed).
#
# Writes bench/results/torch-<date>.md (the machine, the commands, a table
# per part, the DDP figures and the targets of issue 19) and keeps every
# part's raw output in torch-<date>.raw/ (ignored by git). Takes
# /tmp/baton-bench.lock for the whole run, so two benchmarks never overlap.
#
# Options:
#   --parts "shm2 shm4 cluster4 ddp ddp-cluster4"   which parts (default all)
#   --min SIZE --max SIZE    sizes (default 8 and 128M)
#   --budget S     seconds of calls per measurement (default 0.5)
#   --reps R       repetitions of each measurement, best kept (default 1);
#                  of each DDP run (default 1)
#   --steps S      DDP steps per run, the first 2 left out (default 8)
#   --rate RATE    link rate of the emulated hosts (default 1gbit)
#   --colls LIST   collectives, comma-separated (default all five;
#                  allgather_base: baton's _all_gather_base beside Gloo's list)
#   --registered   baton's tensors from baton.torch.empty (registered memory:
#                  the direct algorithm, no staging copy); Gloo's as ever.
#                  The report says so in its header
#   --bucket-view  DDP with gradient_as_bucket_view=True in every DDP run
#                  (baton, Gloo and the one without communication): the
#                  gradients are views of DDP's buckets, not copied into them
#                  and back each step. The report says so
#   --out DIR      where the report goes (default bench/results)
# With BATON_MEM_LOCAL=1 in the environment, torch's tensors of 256 KiB and
# more are baton's local memory (python/baton/torch.py); the report says so.
set -uo pipefail
cd "$(dirname "$0")/.."

PARTS="shm2 shm4 cluster4 ddp ddp-cluster4"
MINB=8 MAXB=128M BUDGET=0.5 REPS=1 STEPS=8 RATE=1gbit OUTDIR=bench/results REGISTERED= BUCKET_VIEW=
COLLS=allreduce,allgather,reduce_scatter,broadcast,alltoall
BUILD=${BUILD:-build}
PY=/usr/bin/python3
CLUSTER=scripts/cluster.sh

die() { echo "torch-compare.sh: $*" >&2; exit 2; }
say() { echo "torch-compare.sh: $*" >&2; }

ARGS="$*"
while [ $# -gt 0 ]; do
  case "$1" in
    --parts) PARTS=$2; shift 2 ;;
    --min) MINB=$2; shift 2 ;;
    --max) MAXB=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --colls) COLLS=$2; shift 2 ;;
    --out) OUTDIR=$2; shift 2 ;;
    --registered) REGISTERED=--registered; shift ;;
    --bucket-view) BUCKET_VIEW=--bucket-view; shift ;;
    --inside) shift; break ;; # internal: a part inside `cluster.sh with`
    -h|--help) sed -n '2,/^set -uo/s/^# \{0,1\}//p' "$0" | grep -v '^set -uo'; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
done
for p in $PARTS; do
  case "$p" in shm2|shm4|cluster4|ddp|ddp-cluster4) ;; *) die "--parts: unknown part '$p'" ;; esac
done
for c in ${COLLS//,/ }; do
  case "$c" in allreduce|allgather|reduce_scatter|broadcast|alltoall|allgather_base) ;;
    *) die "--colls: unknown collective '$c' (allreduce, allgather, reduce_scatter, broadcast, alltoall, allgather_base)" ;;
  esac
done
[[ "$STEPS" =~ ^[0-9]+$ ]] && [ "$STEPS" -ge 3 ] || die "--steps $STEPS: 3 or more"
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || die "--reps $REPS: a whole number"
BATON_RUN=$BUILD/bin/baton-run
[ -x "$BATON_RUN" ] || die "$BATON_RUN missing: run make"
PYTHONPATH=python "$PY" -c 'import baton.torch' 2>/dev/null ||
  die "$PY cannot import baton.torch: $(PYTHONPATH=python "$PY" -c 'import baton.torch' 2>&1 | tail -n 1)"
BENCH=(bench/torch_bench.py --min "$MINB" --max "$MAXB" --budget "$BUDGET" --reps "$REPS"
  --colls "$COLLS" $REGISTERED)
TRAIN=(examples/train_torch.py --steps "$STEPS" --warmup 2 --json)
DDP_ARGS=($BUCKET_VIEW) # the DDP runs only: --alone has no DDP

# --inside RAW PART: inside `cluster.sh with 4`: iperf3, then the part.
if [ "${1:-}" != "" ]; then
  RAW=$1 part=$2
  launch=("$CLUSTER" launch -n 4 --ppn 1 -- env GLOO_SOCKET_IFNAME=eth0 PYTHONPATH=python "$PY")
  if [ ! -s "$RAW/iperf3.txt" ] && command -v iperf3 >/dev/null; then
    "$CLUSTER" exec 0 -- iperf3 -s -1 -D >/dev/null
    sleep 0.5
    "$CLUSTER" exec 1 -- iperf3 -c 198.18.0.1 -t 5 -f m >"$RAW/iperf3.txt" 2>&1
  fi
  case $part in
    cluster4) "${launch[@]}" "${BENCH[@]}" ;;
    ddp-cluster4)
      for b in baton gloo; do "${launch[@]}" "${TRAIN[@]}" --backend "$b"; done ;;
  esac
  exit
fi

exec 8>/tmp/baton-bench.lock
flock -n 8 || { say "another benchmark holds /tmp/baton-bench.lock; waiting"; flock 8; }

stamp=$(date -u +%Y-%m-%d-%H%M%S)
mkdir -p "$OUTDIR"
RAW=$OUTDIR/torch-$stamp.raw
OUT=$OUTDIR/torch-$stamp.md
mkdir -p "$RAW"
cmdline="${BATON_MEM_LOCAL:+BATON_MEM_LOCAL=$BATON_MEM_LOCAL }bench/torch-compare.sh${ARGS:+ $ARGS}"

# The DDP runs: median step of a run, from its JSON line.
median_step() { # FILE -> seconds
  sed -n 's/^JSON //p' "$1" | tail -n 1 |
    "$PY" -c 'import json, statistics, sys; r = json.load(sys.stdin); print(statistics.median(r["step_s"][r["warmup"]:]))'
}
best_of() { sort -g | head -n 1; }

ddp_json=""
alone_runs=()
alone_once() { # NAME: one run alone, its median step added to alone_runs
  local f=$RAW/ddp-alone.$1.log
  say "ddp: one rank alone, run $1"
  "$PY" "${TRAIN[@]}" --alone >"$f" 2>&1 || say "ddp alone failed; see $f"
  alone_runs+=("$(median_step "$f")")
}
ddp_alone() {
  local i
  for ((i = 1; i <= REPS; i++)); do alone_once "r$i"; done
}
json_list() { local IFS=,; echo "[$*]"; }
ddp_rows=()
ddp_part() { # ranks where
  local n=$1 where=$2 i b f tb=() tg=() tn=() ta=() opt
  for ((i = 1; i <= REPS; i++)); do
    # On one host each round runs alone too, right before the DDP runs, so
    # that a machine whose speed drifts over minutes (a shared one) drifts
    # under the baseline as much as under the runs it is subtracted from.
    if [ "$where" = host ]; then
      alone_once "n$n.r$i"
      ta+=("${alone_runs[-1]}")
    fi
    for b in baton gloo noop; do
      f=$RAW/ddp-$where-n$n.$b.r$i.log
      opt=(--backend "$b" "${DDP_ARGS[@]}")
      [ "$b" = noop ] && opt=(--backend baton --noop-hook "${DDP_ARGS[@]}")
      say "ddp: $n ranks ($where), ${opt[*]}, run $i"
      if [ "$where" = cluster4 ]; then
        "$CLUSTER" with 4 --rate "$RATE" -- env GLOO_SOCKET_IFNAME=eth0 PYTHONPATH=python \
          "$CLUSTER" launch -n 4 --ppn 1 -- "$PY" "${TRAIN[@]}" "${opt[@]}" >"$f" 2>&1
      else
        "$BATON_RUN" -n "$n" "$PY" "${TRAIN[@]}" "${opt[@]}" >"$f" 2>&1
      fi || say "ddp ${opt[*]} at $n ranks failed; see $f"
      case $b in
        baton) tb+=("$(median_step "$f")") ;;
        gloo) tg+=("$(median_step "$f")") ;;
        noop) tn+=("$(median_step "$f")") ;;
      esac
    done
  done
  ddp_rows+=("{\"ranks\": $n, \"where\": \"$([ "$where" = cluster4 ] && echo "4 emulated hosts" || echo "one host")\", \"baton_s\": $(printf '%s\n' "${tb[@]}" | best_of), \"gloo_s\": $(printf '%s\n' "${tg[@]}" | best_of), \"noop_s\": $(printf '%s\n' "${tn[@]}" | best_of), \"rounds\": {\"alone\": $(json_list "${ta[@]}"), \"baton\": $(json_list "${tb[@]}"), \"gloo\": $(json_list "${tg[@]}"), \"noop\": $(json_list "${tn[@]}")}}")
}

declare -A describe=(
  [shm2]="one host (baton: shared memory; Gloo: loopback TCP)"
  [shm4]="one host, 2 ranks per core (baton: shared memory; Gloo: loopback TCP)"
  [cluster4]="4 emulated hosts, one rank each, links of $RATE each way (both over TCP)"
)
for part in $PARTS; do
  t0=$(date +%s)
  case $part in
    shm2|shm4)
      n=${part#shm}
      say "$part: $n ranks on this host"
      "$BATON_RUN" -n "$n" "$PY" "${BENCH[@]}" >"$RAW/$part.jsonl" 2>"$RAW/$part.log" ||
        say "$part failed; see $RAW/$part.log" ;;
    cluster4)
      say "cluster4: 4 emulated hosts at $RATE"
      command -v iperf3 >/dev/null ||
        say "no iperf3 (apt-get install -y iperf3): the link's rate is not measured, nor the share of it"
      "$CLUSTER" with 4 --rate "$RATE" -- bash "$0" --budget "$BUDGET" --reps "$REPS" --min "$MINB" \
        --max "$MAXB" --colls "$COLLS" $REGISTERED --inside "$RAW" cluster4 >"$RAW/$part.jsonl" 2>"$RAW/$part.log" ||
        say "cluster4 failed; see $RAW/$part.log" ;;
    ddp)
      ddp_part 2 host
      ddp_part 4 host ;;
    ddp-cluster4)
      [ ${#alone_runs[@]} -gt 0 ] || ddp_alone
      ddp_part 4 cluster4 ;;
  esac
  say "$part: $(($(date +%s) - t0)) s"
done

iperf=""
if [ -s "$RAW/iperf3.txt" ]; then
  iperf=$(awk '/receiver/ {print $(NF-2) / 8}' "$RAW/iperf3.txt")
fi
if [ ${#alone_runs[@]} -gt 0 ]; then
  alone=$(printf '%s\n' "${alone_runs[@]}" | best_of)
  rows=$(IFS=,; echo "${ddp_rows[*]}")
  ddp_json=", \"ddp\": {\"describe\": \"25.2M parameters, batch 16 per rank, one thread per rank, median of steps 2..$((STEPS - 1)), best of $REPS run(s)\", \"alone_s\": $alone, \"alone_runs\": [$(IFS=,; echo "${alone_runs[*]}")], \"rows\": [$rows]}"
fi
parts_json=$(printf '"%s",' $PARTS)
desc_json=$(for p in shm2 shm4 cluster4; do printf '"%s": "%s",' "$p" "${describe[$p]}"; done)
cat >"$RAW/meta.json" <<EOF
{"parts": [${parts_json%,}], "describe": {${desc_json%,}}, "iperf_MBps": ${iperf:-null}$ddp_json}
EOF
{
  echo "# baton beside Gloo through torch.distributed ($stamp UTC)"
  echo
  echo "git $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src python || echo ' (with uncommitted changes)'), $("$PY" -c 'import torch; print("torch", torch.__version__)'), $(nproc) cores ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), $(uname -sr)."
  echo
  echo '```sh'
  echo "make && $cmdline"
  echo '```'
  echo
  echo "Times are a call's time on the slowest rank (mean over the calls of a measurement, best of $REPS), through torch.distributed: baton's group and a Gloo group in the same processes, one right after the other at each size. Sizes are the whole buffer of a call (nccl-tests' convention), float32. Gloo 1.13 has no reduce_scatter: its column there is all_reduce of the whole input."
  [ -n "$REGISTERED" ] && { echo; echo "--registered: baton's tensors come from baton.torch.empty (registered memory, so the direct algorithm on one host); Gloo's are ordinary tensors."; }
  [ -n "$BUCKET_VIEW" ] && { echo; echo "--bucket-view: every DDP run (baton, Gloo, no communication) has gradient_as_bucket_view=True."; }
  [ "${BATON_MEM_LOCAL:-}" = 1 ] && { echo; echo "BATON_MEM_LOCAL=1: torch's CPU tensors of 256 KiB and more (Gloo's as well as baton's: the same processes) are baton's local memory, so baton runs direct on them on one host."; }
  [ -n "$iperf" ] && { echo; echo "iperf3 over one link of the emulated hosts, host 1 -> host 0, 5 s: $iperf MB/s."; }
} >"$RAW/header.md"
"$PY" bench/torch_bench.py report "$RAW" "$OUT" >/dev/null || die "the report failed"
say "wrote $OUT (raw output in $RAW/)"
cat "$OUT"
