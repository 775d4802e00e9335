/* SPDX-License-Identifier: MIT */
#pragma once
/* libpeat_mpi.so: the MPI calls of `peat ... --mpi`, behind plain C functions. `peat` loads this
 * module only when a command is given --mpi, so the other commands start without MPI's libraries
 * (docs/scale-out.md). Every function returns an MPI error code (0: success). */
#ifdef __cplusplus
extern "C" {
#endif

#define PEAT_MPI_ABI_VERSION 1

struct peat_mpi_world {
  int rank, size;
  int on_node; /* ranks on this rank's node, to share its cores */
};

typedef int (*peat_mpi_abi_version_fn)(void);
typedef int (*peat_mpi_init_fn)(struct peat_mpi_world* world);
typedef int (*peat_mpi_barrier_fn)(void);
/* rank 0 receives `count` chars from every rank, in rank order, in `received` (size * count) */
typedef int (*peat_mpi_gather_chars_fn)(const char* sent, int count, char* received);
/* rank 0 receives the element-wise sums of `count` long longs */
typedef int (*peat_mpi_sum_to_root_fn)(const long long* sent, long long* sums, int count);
typedef int (*peat_mpi_finalize_fn)(void);

int peat_mpi_abi_version(void);
int peat_mpi_init(struct peat_mpi_world* world);
int peat_mpi_barrier(void);
int peat_mpi_gather_chars(const char* sent, int count, char* received);
int peat_mpi_sum_to_root(const long long* sent, long long* sums, int count);
int peat_mpi_finalize(void);

#ifdef __cplusplus
}
#endif
