/* SPDX-License-Identifier: MIT */
/* Example user kernel: a cache-blocked fp32 GEMM. Its blocking over k changes the summation order
 * against the golden kernel, so PEAT sees small, dense "summation order" differences. */
#include <peat/kernel_abi.h>
#include <string.h>

static const peat_kernel_info info = {PEAT_KERNEL_ABI_VERSION_1, "example-blocked-gemm", PEAT_OP_GEMM,
                                      PEAT_DTYPE_F32, PEAT_MEMORY_HOST};

const peat_kernel_info* peat_kernel_info_v1(void) { return &info; }

int peat_kernel_gemm_v1(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  enum { KB = 32 };
  memset(c, 0, sizeof(float) * (size_t)(m * n));
  for (int64_t k0 = 0; k0 < k; k0 += KB) {
    const int64_t k1 = k0 + KB < k ? k0 + KB : k;
    for (int64_t i = 0; i < m; ++i) {
      float* row = c + i * n;
      for (int64_t j = 0; j < n; ++j) {
        float partial = 0.0f; /* each k-block is summed on its own, then added: another order */
        for (int64_t kk = k0; kk < k1; ++kk) partial += a[i * k + kk] * b[kk * n + j];
        row[j] += partial;
      }
    }
  }
  return 0;
}

const char* peat_kernel_last_error_v1(void) { return NULL; }
