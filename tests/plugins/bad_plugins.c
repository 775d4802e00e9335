/* SPDX-License-Identifier: MIT */
/* Deliberately broken user kernels for the probe tests; one file, three libraries (-D selects). */
#include <peat/kernel_abi.h>
#include <stddef.h>

#if defined(PEAT_BAD_CRASH)
static const peat_kernel_info info = {PEAT_KERNEL_ABI_VERSION_1, "crasher", PEAT_OP_GEMM, PEAT_DTYPE_F32, PEAT_MEMORY_HOST};
const peat_kernel_info* peat_kernel_info_v1(void) { return &info; }
int peat_kernel_gemm_v1(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  volatile float* nowhere = NULL;
  (void)a, (void)b, (void)c, (void)m, (void)n, (void)k;
  *nowhere = 1.0f; /* SIGSEGV */
  return 0;
}
#elif defined(PEAT_BAD_ABI)
static const peat_kernel_info info = {99, "future", PEAT_OP_GEMM, PEAT_DTYPE_F32, PEAT_MEMORY_HOST};
const peat_kernel_info* peat_kernel_info_v1(void) { return &info; }
int peat_kernel_gemm_v1(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  (void)a, (void)b, (void)c, (void)m, (void)n, (void)k;
  return 0;
}
#elif defined(PEAT_BAD_MISSING)
static const peat_kernel_info info = {PEAT_KERNEL_ABI_VERSION_1, "no-gemm", PEAT_OP_GEMM, PEAT_DTYPE_F32, PEAT_MEMORY_HOST};
const peat_kernel_info* peat_kernel_info_v1(void) { return &info; }
#elif defined(PEAT_BAD_WRONG)
static const peat_kernel_info info = {PEAT_KERNEL_ABI_VERSION_1, "wrong", PEAT_OP_GEMM, PEAT_DTYPE_F32, PEAT_MEMORY_HOST};
const peat_kernel_info* peat_kernel_info_v1(void) { return &info; }
int peat_kernel_gemm_v1(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  (void)a, (void)b, (void)k;
  for (int64_t i = 0; i < m * n; ++i) c[i] = 42.0f; /* wrong answer */
  return 0;
}
#else
#error "choose a broken plugin"
#endif
