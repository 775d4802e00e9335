/* SPDX-License-Identifier: MIT */
/* PEAT Workbench user-kernel ABI, version 1.
 *
 * A user kernel is a shared library exporting the two required C symbols below. PEAT loads it at
 * run time (`--kernel plugin:path=/path/libmykernel.so`), first in a child process that checks the
 * ABI version and runs a small GEMM against a reference, so a crashing kernel cannot take the
 * workbench down. The library runs with the user's rights: load only code you trust.
 *
 * Versioning: the symbol names carry the ABI version (_v1). A future ABI adds _v2 symbols; a library
 * may export several versions. `abi_version` in the info must equal PEAT_KERNEL_ABI_VERSION.
 */
#ifndef PEAT_KERNEL_ABI_H
#define PEAT_KERNEL_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PEAT_KERNEL_ABI_VERSION 1

enum peat_op_kind { PEAT_OP_GEMM = 1 };          /* c = a b; more kinds in later versions */
enum peat_dtype { PEAT_DTYPE_F32 = 1 };          /* element type of a, b and c */
enum peat_memory {
  PEAT_MEMORY_HOST = 1,   /* pointers are host memory; the kernel copies to its device itself if it has one */
  PEAT_MEMORY_DEVICE = 2  /* pointers are device memory of the current CUDA/HIP device (not yet accepted) */
};

typedef struct peat_kernel_info {
  uint32_t abi_version; /* PEAT_KERNEL_ABI_VERSION */
  const char* name;     /* short name: letters, digits, '-', '_' and '.' */
  uint32_t op_kind;     /* enum peat_op_kind */
  uint32_t dtype;       /* enum peat_dtype */
  uint32_t memory;      /* enum peat_memory */
} peat_kernel_info;

/* Required. Returns static information; must not fail. */
const peat_kernel_info* peat_kernel_info_v1(void);

/* Required. c[m,n] = sum_k a[m,k] * b[k,n]; row-major, contiguous, no aliasing.
 * Returns 0 on success and non-zero on failure (e.g. no device). */
int peat_kernel_gemm_v1(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k);

/* Optional. A one-line reason for the last failure, or NULL. */
const char* peat_kernel_last_error_v1(void);

#ifdef __cplusplus
}
#endif

#endif /* PEAT_KERNEL_ABI_H */
