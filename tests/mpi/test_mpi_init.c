/*
 * test_mpi_init.c - a program that uses MPI starts baton from
 * MPI_COMM_WORLD through baton_mpi.h, then checks baton's allreduce
 * against MPI's own. Built and run by tests/test_mpi_init.sh.
 */
#include <mpi.h>
#include <stdio.h>

#include "baton_mpi.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, failed = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  baton_comm_t *comm;
  int rc = baton_comm_init_mpi(MPI_COMM_WORLD, &comm);
  if (rc != BATON_OK) {
    fprintf(stderr, "rank %d: baton_comm_init_mpi: %s: %s\n", rank, baton_err_name(rc),
            baton_last_init_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  failed += baton_comm_rank(comm) != rank || baton_comm_size(comm) != size;
  enum { N = 1000 };
  static long long v[N], ours[N], theirs[N];
  for (int i = 0; i < N; i++)
    v[i] = (long long)rank * 1000003 + i * (rank + 1);
  rc = baton_allreduce(v, ours, N, BATON_INT64, BATON_SUM, comm);
  MPI_Allreduce(v, theirs, N, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  failed += rc != BATON_OK;
  for (int i = 0; i < N; i++)
    failed += ours[i] != theirs[i];
  failed += baton_comm_destroy(comm) != BATON_OK;
  int total = 0;
  MPI_Reduce(&failed, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0)
    printf("%d passed, %d failed\n", total ? 0 : 1, total ? 1 : 0);
  MPI_Finalize();
  return failed != 0;
}
