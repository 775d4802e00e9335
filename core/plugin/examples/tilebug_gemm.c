/* SPDX-License-Identifier: MIT */
/* Example user kernel with a bug, for the plugin author's workflow (docs/plugins.md): a GEMM tiled
 * 8 columns wide whose last, partial column tile reads its columns one to the left. Full tiles are
 * right, so the bug shows only where n is not a multiple of 8. PEAT's probe GEMM (n = 6) catches it
 * and loads the kernel anyway with a warning; playback and the detector then say what is wrong. */
#include <peat/kernel_abi.h>
#include <stddef.h>

static const peat_kernel_info info = {PEAT_KERNEL_ABI_VERSION_1, "user-tilebug", PEAT_OP_GEMM, PEAT_DTYPE_F32,
                                      PEAT_MEMORY_HOST};

const peat_kernel_info* peat_kernel_info_v1(void) { return &info; }

int peat_kernel_gemm_v1(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  enum { TILE = 8 };
  for (int64_t j0 = 0; j0 < n; j0 += TILE) {
    const int64_t j1 = j0 + TILE < n ? j0 + TILE : n;
    const int partial = j1 - j0 < TILE;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = j0; j < j1; ++j) {
        const int64_t col = partial && j > 0 ? j - 1 : j; /* the bug: off by one in the partial tile */
        float sum = 0.0f;
        for (int64_t q = 0; q < k; ++q) sum += a[i * k + q] * b[q * n + col];
        c[i * n + j] = sum;
      }
  }
  return 0;
}

const char* peat_kernel_last_error_v1(void) { return NULL; }
