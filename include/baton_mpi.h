/*
 * baton_mpi.h - start a baton communicator from an MPI communicator.
 *
 * Header-only: include it after <mpi.h> in a program that already uses MPI.
 * libbaton itself never links MPI; this only uses MPI to hand the unique id
 * from rank 0 to the others, as NCCL programs do.
 *
 *   baton_comm_t *comm;
 *   int rc = baton_comm_init_mpi(MPI_COMM_WORLD, &comm);
 *
 * Collective over `mc`: every rank of it must call it. baton ranks equal
 * the ranks in `mc`. On failure every rank returns the same error when the
 * id could not be made; later failures are per rank, as with
 * baton_comm_init_rank.
 */
#ifndef BATON_MPI_H
#define BATON_MPI_H

#include <mpi.h>
#include <string.h>

#include "baton.h"

static inline int baton_comm_init_mpi(MPI_Comm mc, baton_comm_t **comm) {
  int rank = 0, size = 0, rc = BATON_OK;
  baton_unique_id_t id;
  if (!comm)
    return BATON_EINVAL;
  *comm = NULL;
  if (MPI_Comm_rank(mc, &rank) != MPI_SUCCESS || MPI_Comm_size(mc, &size) != MPI_SUCCESS)
    return BATON_EUSAGE;
  memset(&id, 0, sizeof id);
  if (rank == 0)
    rc = baton_get_unique_id(&id);
  if (MPI_Bcast(&rc, 1, MPI_INT, 0, mc) != MPI_SUCCESS)
    return BATON_EUSAGE;
  if (rc != BATON_OK)
    return rc;
  if (MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, mc) != MPI_SUCCESS)
    return BATON_EUSAGE;
  return baton_comm_init_rank(comm, size, &id, rank);
}

#endif /* BATON_MPI_H */
