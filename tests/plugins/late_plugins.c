/* SPDX-License-Identifier: MIT */
/* User kernels that pass their probe (a 7x5 by 5x6 GEMM) and then fail on a later call: on every
 * GEMM with 10 output columns (the MLP's fc3 forward), or, for the constructor, whenever loaded
 * outside the probe. HUNGRY and GREEDY allocate without bound (tests/cli/kernel_memory.py). One file, one library per -D; tests/cli/kernel_host.sh runs them. */
#define _GNU_SOURCE
#include <errno.h>
#include <peat/kernel_abi.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static const peat_kernel_info info = {PEAT_KERNEL_ABI_VERSION_1, "late-failure", PEAT_OP_GEMM, PEAT_DTYPE_F32,
                                      PEAT_MEMORY_HOST};
const peat_kernel_info* peat_kernel_info_v1(void) { return &info; }

#if defined(PEAT_LATE_CTOR)
/* Passes the probe (in peat-probe), crashes wherever else it is loaded. */
__attribute__((constructor)) static void crashOutsideTheProbe(void) {
  if (strcmp(program_invocation_short_name, "peat-probe") != 0) raise(SIGSEGV);
}
#endif

#if defined(PEAT_LATE_HUNGRY) || defined(PEAT_LATE_GREEDY)
static char* volatile hoard; /* keeps the allocations alive for the compiler */
#endif

int peat_kernel_gemm_v1(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  if (n == 10) {
#if defined(PEAT_LATE_SEGV)
    volatile float* nowhere = NULL;
    *nowhere = 1.0f;
#elif defined(PEAT_LATE_ABORT)
    abort();
#elif defined(PEAT_LATE_HANG)
    for (volatile int spin = 1; spin;) {
    }
#elif defined(PEAT_LATE_OVERFLOW)
    /* 4 KiB past the output: a heap overflow in peat, a guard page in the kernel host */
    for (int64_t i = 0; i < 1024; ++i) c[m * n + i] = 1.0f;
#elif defined(PEAT_LATE_TAIL)
    c[m * n] = 1.0f; /* one element past the output: the canary behind it */
#elif defined(PEAT_LATE_HUNGRY)
    /* allocates and touches 64 MiB after 64 MiB without bound, never checking: all of the machine's
     * memory in peat; in the kernel host a refused allocation, then a fault on the null pointer */
    for (;;) {
      char* block = malloc(64 << 20);
      memset(block, 1, 64 << 20);
      hoard = block;
    }
#elif defined(PEAT_LATE_GREEDY)
    /* the same, but it checks: it returns an error once an allocation is refused */
    for (;;) {
      char* block = malloc(64 << 20);
      if (!block) return 12;
      memset(block, 1, 64 << 20);
      hoard = block;
    }
#endif
  }
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (int64_t q = 0; q < k; ++q) sum += a[i * k + q] * b[q * n + j];
      c[i * n + j] = sum;
    }
  return 0;
}
