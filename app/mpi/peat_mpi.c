/* SPDX-License-Identifier: MIT */
/* The MPI half of `--mpi` (peat_mpi.h): the only code of ours that links MPI. */
#include "peat_mpi.h"

#include <mpi.h>

#define PEAT_EXPORT __attribute__((visibility("default")))

PEAT_EXPORT int peat_mpi_abi_version(void) { return PEAT_MPI_ABI_VERSION; }

PEAT_EXPORT int peat_mpi_init(struct peat_mpi_world* world) {
  int rc = MPI_Init(NULL, NULL);
  if (rc != MPI_SUCCESS) return rc;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &world->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world->size);
  MPI_Comm node;
  rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world->rank, MPI_INFO_NULL, &node);
  if (rc != MPI_SUCCESS) return rc;
  MPI_Comm_size(node, &world->on_node);
  return MPI_Comm_free(&node);
}

PEAT_EXPORT int peat_mpi_barrier(void) { return MPI_Barrier(MPI_COMM_WORLD); }

PEAT_EXPORT int peat_mpi_gather_chars(const char* sent, int count, char* received) {
  return MPI_Gather(sent, count, MPI_CHAR, received, count, MPI_CHAR, 0, MPI_COMM_WORLD);
}

PEAT_EXPORT int peat_mpi_sum_to_root(const long long* sent, long long* sums, int count) {
  return MPI_Reduce(sent, sums, count, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
}

PEAT_EXPORT int peat_mpi_finalize(void) { return MPI_Finalize(); }
