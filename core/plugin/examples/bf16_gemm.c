/* SPDX-License-Identifier: MIT */
/* Example user kernel (ABI v2): a bf16 GEMM and batched GEMM as a port to bf16 tensor cores does
 * them. PEAT hands it bf16 inputs (declared below; PEAT rounds its fp32 values to bf16 before the
 * call), the kernel widens them and accumulates in fp32 over K-blocks of 32, then adds the block sums:
 * another summation order than golden, and inputs with 8 significant bits. A legitimate port: the
 * probe finds it right for bf16 inputs (docs/plugins.md). C99, libm only:
 *   cc -O2 -std=c99 -shared -fPIC -I core/plugin core/plugin/examples/bf16_gemm.c -o libbf16_gemm.so */
#include <peat/kernel_abi.h>
#include <stdio.h>
#include <string.h>

static const peat_op_desc ops[] = {
    {PEAT_OP_GEMM, PEAT_VARIANT_BIT(PEAT_VARIANT_FORWARD), PEAT_DTYPE_BF16, PEAT_DTYPE_F32, 0},
    {PEAT_OP_BATCHED_GEMM, PEAT_VARIANT_BIT(PEAT_VARIANT_FORWARD), PEAT_DTYPE_BF16, PEAT_DTYPE_F32, 0},
};
static const peat_plugin_info info = {PEAT_KERNEL_ABI_VERSION, "bf16-gemm", PEAT_MEMORY_HOST, 2, ops};

const peat_plugin_info* peat_kernel_info_v2(void) { return &info; }

static char last_error[200];
const char* peat_kernel_last_error_v2(void) { return last_error[0] ? last_error : NULL; }

static int fail(const char* why) {
  snprintf(last_error, sizeof last_error, "%s", why);
  return 1;
}

/* bf16 is the upper half of an fp32 */
static float widen(uint16_t h) {
  const uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

int peat_kernel_run_v2(const peat_call* call) {
  enum { KB = 32 };
  const peat_params* p = &call->params;
  const int batched = call->op_kind == PEAT_OP_BATCHED_GEMM;
  if (call->op_kind != PEAT_OP_GEMM && !batched) return fail("bf16-gemm: only GEMM and batched GEMM");
  if (call->variant != PEAT_VARIANT_FORWARD) return fail("bf16-gemm: forward only");
  const uint32_t inputs = p->beta != 0 ? 3 : 2; /* C0 only when beta is non-zero */
  if (call->input_count != inputs || call->output_count != 1) return fail("bf16-gemm: A, B[, C0] in and C out");
  for (uint32_t i = 0; i < 2; ++i)
    if (call->inputs[i].dtype != PEAT_DTYPE_BF16) return fail("bf16-gemm: A and B must be bf16");
  if (inputs == 3 && call->inputs[2].dtype != PEAT_DTYPE_F32) return fail("bf16-gemm: C0 must be f32, as C");
  if (call->outputs[0].dtype != PEAT_DTYPE_F32) return fail("bf16-gemm: the output must be f32");
  const int64_t m = p->m, n = p->n, k = p->k;
  if (m <= 0 || n <= 0 || k <= 0) return fail("bf16-gemm: m, n and k must be positive");
  const uint16_t* a = (const uint16_t*)call->inputs[0].data;
  const uint16_t* b = (const uint16_t*)call->inputs[1].data;
  const float* c0 = inputs == 3 ? (const float*)call->inputs[2].data : NULL; /* C0 in C's dtype */
  float* c = (float*)call->outputs[0].data;
  const int64_t batch = batched && p->batch > 0 ? p->batch : 1;
  const int64_t sa = batched ? p->stride_a : 0, sb = batched ? p->stride_b : 0, sc = batched ? p->stride_c : 0;
  const float alpha = (float)p->alpha, beta = (float)p->beta;
  for (int64_t q = 0; q < batch; ++q) {
    const uint16_t* A = a + q * sa; /* stride 0: one matrix shared by the batch */
    const uint16_t* B = b + q * sb;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float total = 0.0f;
        for (int64_t k0 = 0; k0 < k; k0 += KB) {
          const int64_t k1 = k0 + KB < k ? k0 + KB : k;
          float block = 0.0f;
          for (int64_t kk = k0; kk < k1; ++kk) {
            const float x = widen(p->trans_a ? A[kk * p->lda + i] : A[i * p->lda + kk]);
            const float y = widen(p->trans_b ? B[j * p->ldb + kk] : B[kk * p->ldb + j]);
            block += x * y;
          }
          total += block;
        }
        const int64_t at = q * sc + i * p->ldc + j;
        c[at] = alpha * total + (c0 ? beta * c0[at] : 0.0f);
      }
  }
  return 0;
}
