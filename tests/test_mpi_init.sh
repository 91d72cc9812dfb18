#!/usr/bin/env bash
# tests/test_mpi_init.sh - a real `mpirun` starts an MPI program that makes
# its baton communicator with baton_mpi.h (the unique id travels by
# MPI_Bcast). Needs Debian's openmpi-bin and libopenmpi-dev; says so and
# exits 77, a skip, when they are missing.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MPICC=$(command -v mpicc.openmpi || command -v mpicc || true)
MPIRUN=$(command -v mpirun.openmpi || command -v mpirun || true)
if [ -z "$MPICC" ] || [ -z "$MPIRUN" ]; then
  echo "SKIP: no mpicc/mpirun (apt-get install openmpi-bin libopenmpi-dev to run this test)"
  exit 77
fi
mkdir -p "$BUILD/tests"
"$MPICC" -O2 -Iinclude tests/mpi/test_mpi_init.c -o "$BUILD/tests/test_mpi_init" \
  "$BUILD/lib/libbaton.a" -pthread -lrt -lcrypto || exit 1
for n in 1 3 4; do
  echo "mpirun -np $n"
  "$MPIRUN" --allow-run-as-root --oversubscribe -np "$n" "$BUILD/tests/test_mpi_init" || exit 1
done
