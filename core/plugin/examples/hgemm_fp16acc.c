/* SPDX-License-Identifier: MIT */
/* Example user kernel: an HGEMM as a half-precision port does it. The inputs are rounded to fp16
 * and summed in an fp16 accumulator over K-blocks of 16, and the block sums are added in fp16. It is
 * a correct kernel that loses precision twice: in its inputs and in its running sums. The detector
 * names it precision_loss (format=fp16, accumulation=fp16) on recorded calls (docs/plugins.md). */
#include <peat/kernel_abi.h>
#include <stddef.h>

static const peat_kernel_info info = {PEAT_KERNEL_ABI_VERSION_1, "example-hgemm-fp16acc", PEAT_OP_GEMM,
                                      PEAT_DTYPE_F32, PEAT_MEMORY_HOST};

const peat_kernel_info* peat_kernel_info_v1(void) { return &info; }

static float half(float x) { return (float)(_Float16)x; }

int peat_kernel_gemm_v1(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  enum { KB = 16 };
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float total = 0.0f;
      for (int64_t k0 = 0; k0 < k; k0 += KB) {
        const int64_t k1 = k0 + KB < k ? k0 + KB : k;
        float block = 0.0f;
        for (int64_t kk = k0; kk < k1; ++kk) block = half(block + half(a[i * k + kk]) * half(b[kk * n + j]));
        total = half(total + block);
      }
      c[i * n + j] = total;
    }
  return 0;
}

const char* peat_kernel_last_error_v1(void) { return NULL; }
