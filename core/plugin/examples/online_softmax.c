/* SPDX-License-Identifier: MIT */
/* Example user kernel (ABI v2): the online softmax (Milakov & Gimelshein, 2018). The forward reads
 * each row once for its maximum and its sum together: when a larger value comes, the running sum is
 * rescaled by exp(old max - new max); a second pass writes the outputs. Golden takes the maximum
 * first, then the sum, so the roundings differ a little; the result is the same softmax. Log-softmax
 * (params.log) and both backward formulas are here too. A legitimate kernel (docs/plugins.md). C99,
 * libm only:
 *   cc -O2 -std=c99 -shared -fPIC -I core/plugin core/plugin/examples/online_softmax.c -o libonline_softmax.so -lm */
#include <math.h>
#include <peat/kernel_abi.h>
#include <stdio.h>

static const peat_op_desc ops[] = {
    {PEAT_OP_SOFTMAX, PEAT_VARIANT_BIT(PEAT_VARIANT_FORWARD) | PEAT_VARIANT_BIT(PEAT_VARIANT_GRAD_INPUT),
     PEAT_DTYPE_F32, PEAT_DTYPE_F32, 0},
};
static const peat_plugin_info info = {PEAT_KERNEL_ABI_VERSION, "online-softmax", PEAT_MEMORY_HOST, 1, ops};

const peat_plugin_info* peat_kernel_info_v2(void) { return &info; }

static char last_error[200];
const char* peat_kernel_last_error_v2(void) { return last_error[0] ? last_error : NULL; }

static int fail(const char* why) {
  snprintf(last_error, sizeof last_error, "%s", why);
  return 1;
}

static void forward(const float* x, float* y, int64_t n, int log_softmax) {
  float m = -INFINITY, l = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    if (x[j] > m) {
      l = (m == -INFINITY ? 0.0f : l * expf(m - x[j])) + 1.0f; /* rescale the sum to the new maximum */
      m = x[j];
    } else if (m != -INFINITY) {
      l += expf(x[j] - m);
    }
  }
  const float logl = logf(l);
  for (int64_t j = 0; j < n; ++j) y[j] = log_softmax ? x[j] - m - logl : expf(x[j] - m) / l;
}

/* softmax: dx = y (dy - sum dy y); log-softmax: dx = dy - exp(y) sum dy */
static void backward(const float* dy, const float* y, float* dx, int64_t n, int log_softmax) {
  float s = 0.0f;
  for (int64_t j = 0; j < n; ++j) s += log_softmax ? dy[j] : dy[j] * y[j];
  for (int64_t j = 0; j < n; ++j) dx[j] = log_softmax ? dy[j] - expf(y[j]) * s : y[j] * (dy[j] - s);
}

int peat_kernel_run_v2(const peat_call* call) {
  if (call->op_kind != PEAT_OP_SOFTMAX) return fail("online-softmax: only softmax");
  const int back = call->variant == PEAT_VARIANT_GRAD_INPUT;
  if (!back && call->variant != PEAT_VARIANT_FORWARD) return fail("online-softmax: forward and grad input only");
  if (call->input_count != (back ? 2u : 1u) || call->output_count != 1) return fail("online-softmax: x (or dy, y) in, one out");
  const peat_tensor* x = &call->inputs[0];
  if (x->rank < 1 || x->shape[x->rank - 1] <= 0) return fail("online-softmax: a tensor without a last dimension");
  for (uint32_t i = 0; i < call->input_count; ++i)
    if (call->inputs[i].dtype != PEAT_DTYPE_F32) return fail("online-softmax: inputs must be f32");
  if (call->outputs[0].dtype != PEAT_DTYPE_F32) return fail("online-softmax: the output must be f32");
  const int64_t n = x->shape[x->rank - 1];
  int64_t rows = 1;
  for (uint32_t d = 0; d + 1 < x->rank; ++d) rows *= x->shape[d];
  const float* in = (const float*)x->data;
  float* out = (float*)call->outputs[0].data;
  for (int64_t r = 0; r < rows; ++r) {
    if (back) backward(in + r * n, (const float*)call->inputs[1].data + r * n, out + r * n, n, call->params.log);
    else forward(in + r * n, out + r * n, n, call->params.log);
  }
  return 0;
}
