#!/usr/bin/env bash
# test_launch_env.sh - baton_comm_init under the launchers users already
# have: torchrun's variables set by hand for 4 processes started here, a
# real Open MPI mpirun, which launcher wins when several are set, and
# malformed or missing values, which must fail fast with an error naming the
# variable.
#   BUILD=build bash tests/test_launch_env.sh
# Prints `N passed, M failed, K skipped`; the mpirun cases are skipped,
# saying so, when mpirun is not installed (Debian: openmpi-bin).
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
RUN=$BUILD/bin/baton-run
COLL=$BUILD/tests/test_coll
# shellcheck source=tests/shlib.sh
. tests/shlib.sh

if [ ! -x "$RUN" ] || [ ! -x "$COLL" ]; then
  echo "no $RUN or $COLL: run make first" >&2
  echo "0 passed, 1 failed"
  exit 1
fi

# Nothing of the caller's launcher may leak into the cases.
unset BATON_RANK BATON_SIZE BATON_ADDR BATON_LOCAL_RANK BATON_LOCAL_SIZE \
  RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT TORCHELASTIC_USE_AGENT_STORE \
  OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK OMPI_COMM_WORLD_LOCAL_SIZE \
  PMI_RANK PMI_SIZE MPI_LOCALRANKID MPI_LOCALNRANKS SLURM_PROCID SLURM_NTASKS SLURM_LOCALID
export BATON_TIMEOUT=20

# A port that was free a moment ago, chosen the way baton-run chooses it.
# shellcheck disable=SC2016 # the rank expands it
free_port() { "$RUN" -n 1 sh -c 'echo "${BATON_ADDR##*:}"'; }

# The sweep's summary line of rank 0 says all passed.
summary_ok() { grep -Eq '(^|[^0-9])[1-9][0-9]* passed, 0 failed' "$1"; }

# --- torchrun's variables, set by hand: 4 processes started here
port=$(free_port)
pids=()
for r in 0 1 2 3; do
  RANK=$r WORLD_SIZE=4 LOCAL_RANK=$r LOCAL_WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
    BATON_DEBUG=INFO BATON_DEBUG_SUBSYS=ENV timeout -k 5 60 "$COLL" --quick >"$tmp/t$r" 2>&1 &
  pids+=($!)
done
for r in 0 1 2 3; do
  wait "${pids[$r]}"
  expect "torchrun-style rank $r exit status" $? 0
done
if summary_ok "$tmp/t0"; then ok; else bad "torchrun-style: rank 0's sweep did not pass:"; tail -5 "$tmp/t0" >&2; fi
expect_line "torchrun-style: the source is logged" "$tmp/t2" \
  "rank 2 of 4 \(2 of 4 on this host\) from torchrun \(RANK, WORLD_SIZE\); rendezvous at 127\.0\.0\.1:$port from MASTER_ADDR:MASTER_PORT"

# --- a real mpirun
if ! command -v mpirun >/dev/null 2>&1; then
  skip "the mpirun cases: mpirun not found (apt-get install -y openmpi-bin)"
else
  MPIRUN=(mpirun --allow-run-as-root --oversubscribe -n 4)
  port=$(free_port)
  timeout -k 5 120 "${MPIRUN[@]}" -x BATON_ADDR=127.0.0.1:"$port" -x BATON_TIMEOUT \
    -x BATON_DEBUG=INFO -x BATON_DEBUG_SUBSYS=ENV "$COLL" --quick >"$tmp/mpi" 2>&1
  expect "mpirun -n 4 exit status" $? 0
  if summary_ok "$tmp/mpi"; then ok; else bad "mpirun: the sweep did not pass:"; tail -20 "$tmp/mpi" >&2; fi
  expect_line "mpirun: the source is logged" "$tmp/mpi" \
    "rank 3 of 4 \(3 of 4 on this host\) from Open MPI \(OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE\); rendezvous at 127\.0\.0\.1:$port from BATON_ADDR"
  # Without an address every rank stops at once and says what to set.
  timeout -k 5 60 "${MPIRUN[@]}" "$COLL" --quick >"$tmp/mpi-noaddr" 2>&1
  expect_failure "mpirun without BATON_ADDR" $?
  expect_line "mpirun without BATON_ADDR: the error" "$tmp/mpi-noaddr" \
    "rank and size come from Open MPI .*no rendezvous address: set BATON_ADDR=HOST:PORT .*-x BATON_ADDR"
fi

# --- one process of size 1: which source wins. Each case: NAME, the
# regex the INFO line must match, then the variables.
one() {
  local name=$1 want=$2
  shift 2
  env "$@" BATON_DEBUG=INFO BATON_DEBUG_SUBSYS=ENV timeout -k 5 30 \
    "$COLL" --quick --coll allreduce --dtype float32 --op sum >"$tmp/one" 2>&1
  expect "$name: exit status" $? 0
  expect_line "$name" "$tmp/one" "$want"
}
port=$(free_port)
A=127.0.0.1:$port
one "BATON_* over torchrun" "from BATON_\*, over torchrun; rendezvous at $A from BATON_ADDR" \
  BATON_RANK=0 BATON_SIZE=1 BATON_ADDR="$A" RANK=3 WORLD_SIZE=8 MASTER_ADDR=127.0.0.1 MASTER_PORT=1
one "BATON_* over a malformed launcher" "rank 0 of 1 from BATON_\*, over Open MPI" \
  BATON_RANK=0 BATON_SIZE=1 BATON_ADDR="$A" OMPI_COMM_WORLD_RANK=x OMPI_COMM_WORLD_LOCAL_RANK=y
one "BATON_SIZE over WORLD_SIZE" "rank 0 of 1 from torchrun \(RANK, BATON_SIZE\)" \
  RANK=0 WORLD_SIZE=4 BATON_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port"
one "BATON_ADDR over MASTER_ADDR" "rendezvous at $A from BATON_ADDR" \
  RANK=0 WORLD_SIZE=1 BATON_ADDR="$A" MASTER_ADDR=127.0.0.1 MASTER_PORT=1
one "Open MPI over Slurm" "rank 0 of 1 \(0 of 1 on this host\) from Open MPI" \
  OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 OMPI_COMM_WORLD_LOCAL_RANK=0 \
  OMPI_COMM_WORLD_LOCAL_SIZE=1 SLURM_PROCID=5 SLURM_NTASKS=9 BATON_ADDR="$A"
one "MPICH Hydra over Slurm" "rank 0 of 1 \(0 of 1 on this host\) from MPICH Hydra \(PMI_RANK, PMI_SIZE\)" \
  PMI_RANK=0 PMI_SIZE=1 MPI_LOCALRANKID=0 MPI_LOCALNRANKS=1 SLURM_PROCID=5 SLURM_NTASKS=9 BATON_ADDR="$A"
one "torchrun over Slurm" "from torchrun \(RANK, WORLD_SIZE\)" \
  RANK=0 WORLD_SIZE=1 SLURM_PROCID=5 SLURM_NTASKS=9 BATON_ADDR="$A"
one "Slurm with MASTER_ADDR" "rank 0 of 1 \(0 on this host\) from Slurm \(SLURM_PROCID, SLURM_NTASKS\); rendezvous at $A from MASTER_ADDR:MASTER_PORT" \
  SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_LOCALID=0 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port"
# Under a real torchrun its agent's store already has MASTER_PORT.
one "torchrun's agent store" "rendezvous at $A from MASTER_ADDR, MASTER_PORT\+1" \
  RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port - 1)) TORCHELASTIC_USE_AGENT_STORE=True

# --- bad values: a fast failure whose message names the variable
bad_env() {
  local name=$1 want=$2
  shift 2
  env "$@" timeout -k 5 30 "$COLL" --quick --coll allreduce --dtype float32 --op sum >"$tmp/bad" 2>&1
  expect_failure "$name" $?
  expect_line "$name" "$tmp/bad" "$want"
}
T="MASTER_ADDR=127.0.0.1 MASTER_PORT=$port"
# shellcheck disable=SC2086 # $T is several variables on purpose
{
  bad_env "RANK not a number" 'RANK="abc" \(from torchrun\) is not an integer' RANK=abc WORLD_SIZE=2 $T
  bad_env "RANK negative" 'RANK="-1" \(from torchrun\)' RANK=-1 WORLD_SIZE=2 $T
  bad_env "WORLD_SIZE zero" 'WORLD_SIZE="0" \(from torchrun\) is not an integer in 1\.\.' RANK=0 WORLD_SIZE=0 $T
  bad_env "RANK not below WORLD_SIZE" 'RANK=2 is not below WORLD_SIZE=2' RANK=2 WORLD_SIZE=2 $T
  bad_env "RANK without WORLD_SIZE" 'RANK is set \(torchrun\) but WORLD_SIZE is not' RANK=0 $T
  bad_env "LOCAL_RANK malformed" 'LOCAL_RANK="1.5" \(from torchrun\)' RANK=0 WORLD_SIZE=1 LOCAL_RANK=1.5 $T
  bad_env "MASTER_PORT out of range" 'MASTER_PORT="70000"' RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=70000
  bad_env "MASTER_PORT missing" 'MASTER_ADDR="127\.0\.0\.1" is set but MASTER_PORT is not' RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1
  bad_env "MASTER_ADDR empty" 'MASTER_ADDR="" is not a host name' RANK=0 WORLD_SIZE=1 MASTER_ADDR= MASTER_PORT="$port"
  bad_env "OMPI rank malformed" 'OMPI_COMM_WORLD_RANK="1x" \(from Open MPI\)' OMPI_COMM_WORLD_RANK=1x OMPI_COMM_WORLD_SIZE=2 BATON_ADDR="$A"
  bad_env "OMPI rank not below size" 'OMPI_COMM_WORLD_RANK=4 is not below OMPI_COMM_WORLD_SIZE=4' OMPI_COMM_WORLD_RANK=4 OMPI_COMM_WORLD_SIZE=4 BATON_ADDR="$A"
  bad_env "OMPI without an address" 'from Open MPI .*no rendezvous address: set BATON_ADDR' OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1
  bad_env "PMI_SIZE negative" 'PMI_SIZE="-3" \(from MPICH Hydra\)' PMI_RANK=0 PMI_SIZE=-3 BATON_ADDR="$A"
  bad_env "Hydra without an address" 'from MPICH Hydra .*no rendezvous address' PMI_RANK=0 PMI_SIZE=1
  bad_env "SLURM_LOCALID malformed" 'SLURM_LOCALID="z" \(from Slurm\)' SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_LOCALID=z BATON_ADDR="$A"
  bad_env "SLURM_NTASKS malformed" 'SLURM_NTASKS="2x"' SLURM_PROCID=0 SLURM_NTASKS=2x BATON_ADDR="$A"
  bad_env "BATON_SIZE over a smaller rank" 'RANK=3 is not below BATON_SIZE=2' RANK=3 WORLD_SIZE=8 BATON_SIZE=2 $T
  bad_env "BATON_LOCAL_RANK malformed" 'BATON_LOCAL_RANK="q" \(from BATON_\*\)' BATON_RANK=0 BATON_SIZE=1 BATON_ADDR="$A" BATON_LOCAL_RANK=q
  bad_env "nothing set" 'BATON_RANK is not set: start the program with baton-run, torchrun, mpirun or srun'
}

finish
