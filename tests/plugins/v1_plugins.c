/* SPDX-License-Identifier: MIT */
/* A GEMM kernel written as plugin ABI v1 code was written before v2 existed: its info names its
 * version with PEAT_KERNEL_ABI_VERSION, which read 1 then and reads 2 in today's header. It must
 * compile against today's header and load as the v1 plugin it is (tst_plugin_abi2). One file, one
 * library per -D (PEAT_V1_MACRO). */
#include <peat/kernel_abi.h>

static const peat_kernel_info info = {PEAT_KERNEL_ABI_VERSION, "v1-macro", PEAT_OP_GEMM, PEAT_DTYPE_F32,
                                      PEAT_MEMORY_HOST};
const peat_kernel_info* peat_kernel_info_v1(void) { return &info; }

/* c[m, n] = a[m, k] b[k, n], row-major, summed in order */
int peat_kernel_gemm_v1(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float s = 0.0f;
      for (int64_t q = 0; q < k; ++q) s += a[i * k + q] * b[q * n + j];
      c[i * n + j] = s;
    }
  return 0;
}
