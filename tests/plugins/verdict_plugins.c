/* SPDX-License-Identifier: MIT */
/* ABI v2 kernels for the verdict tests (tests/models/file_models.py, case "bugs"): the bugs a kernel
 * developer plants by accident, and one correct fp8 GEMM, written from docs/plugins.md's call table
 * alone. Each computes in double from its decoded inputs and stores f32. One file, one library per -D:
 *   KTAIL      GEMM and batched GEMM that drop the last partial K tile of 16 (an all-zero output where
 *              K < 16): the tail loop a tiled kernel forgets
 *   ATTNSCALE  attention (forward) that scales the scores by 1/D itself and ignores the call's scale
 *   CONVBORDER conv2d (forward) that pads by repeating the edge pixel instead of with zeros
 *   FP8        GEMM with fp8 e4m3 inputs, each with its per-tensor scale as the ABI gives it: correct
 *   FP8NOSCALE the same GEMM, but B's scale is never applied (the dequantisation of one operand missed)
 * and the bugs' twins without the bug, the same arithmetic otherwise (what a call would be had the bug
 * not touched it: the test counts a call as changed by a bug where the two differ):
 *   GEMM (KTAIL's), CONV (CONVBORDER's: zero padding), ATTN (ATTNSCALE's: the call's scale)
 * and, with bf16 outputs (rounded to nearest even from the double result, as a port storing bf16 does):
 *   KTAILBF16, ATTNSCALEBF16 (the bugs), GEMMBF16, ATTNBF16 (their twins, correct bf16-output ports)
 * and a layer norm (forward) with bf16 inputs and outputs:
 *   LNBESSELBF16 the variance divided by N-1 (0.8% at N = 64: two bf16 steps), LNBF16 its twin, correct */
#if defined(PEAT_VERDICT_KTAILBF16)
#define PEAT_VERDICT_KTAIL 1
#define OUT_BF16 1
#elif defined(PEAT_VERDICT_GEMMBF16)
#define PEAT_VERDICT_GEMM 1
#define OUT_BF16 1
#elif defined(PEAT_VERDICT_ATTNSCALEBF16)
#define PEAT_VERDICT_ATTNSCALE 1
#define OUT_BF16 1
#elif defined(PEAT_VERDICT_ATTNBF16)
#define PEAT_VERDICT_ATTN 1
#define OUT_BF16 1
#endif
#ifdef OUT_BF16
#define OUT_DTYPE PEAT_DTYPE_BF16
#define OUT_SUFFIX "-bf16-out"
#else
#define OUT_DTYPE PEAT_DTYPE_F32
#define OUT_SUFFIX ""
#endif
#include <math.h>
#include <peat/kernel_abi.h>
#include <stdlib.h>
#include <string.h>

#define F PEAT_VARIANT_BIT(PEAT_VARIANT_FORWARD)

#if defined(PEAT_VERDICT_KTAIL) || defined(PEAT_VERDICT_GEMM)
#define GEMM_KERNEL 1
static const peat_op_desc ops[] = {{PEAT_OP_GEMM, F, PEAT_DTYPE_F32, OUT_DTYPE, 0},
                                   {PEAT_OP_BATCHED_GEMM, F, PEAT_DTYPE_F32, OUT_DTYPE, 0}};
#ifdef PEAT_VERDICT_KTAIL
static const peat_plugin_info info = {PEAT_KERNEL_ABI_VERSION, "ktail-gemm" OUT_SUFFIX, PEAT_MEMORY_HOST, 2, ops};
#else
static const peat_plugin_info info = {PEAT_KERNEL_ABI_VERSION, "double-gemm" OUT_SUFFIX, PEAT_MEMORY_HOST, 2, ops};
#endif
#elif defined(PEAT_VERDICT_ATTNSCALE) || defined(PEAT_VERDICT_ATTN)
#define ATTENTION_KERNEL 1
static const peat_op_desc ops[] = {{PEAT_OP_ATTENTION, F, PEAT_DTYPE_F32, OUT_DTYPE, 0}};
#ifdef PEAT_VERDICT_ATTNSCALE
static const peat_plugin_info info = {PEAT_KERNEL_ABI_VERSION, "attention-scale-1-over-d" OUT_SUFFIX, PEAT_MEMORY_HOST, 1, ops};
#else
static const peat_plugin_info info = {PEAT_KERNEL_ABI_VERSION, "double-attention" OUT_SUFFIX, PEAT_MEMORY_HOST, 1, ops};
#endif
#elif defined(PEAT_VERDICT_CONVBORDER) || defined(PEAT_VERDICT_CONV)
#define CONV_KERNEL 1
static const peat_op_desc ops[] = {{PEAT_OP_CONV2D, F, PEAT_DTYPE_F32, PEAT_DTYPE_F32, 0}};
#ifdef PEAT_VERDICT_CONVBORDER
static const peat_plugin_info info = {PEAT_KERNEL_ABI_VERSION, "conv-replicate-border", PEAT_MEMORY_HOST, 1, ops};
#else
static const peat_plugin_info info = {PEAT_KERNEL_ABI_VERSION, "double-conv", PEAT_MEMORY_HOST, 1, ops};
#endif
#elif defined(PEAT_VERDICT_LNBESSELBF16) || defined(PEAT_VERDICT_LNBF16)
#define LAYER_NORM_KERNEL 1
static const peat_op_desc ops[] = {{PEAT_OP_LAYER_NORM, F, PEAT_DTYPE_BF16, PEAT_DTYPE_BF16, 0}};
#ifdef PEAT_VERDICT_LNBESSELBF16
static const peat_plugin_info info = {PEAT_KERNEL_ABI_VERSION, "layer-norm-bessel-bf16", PEAT_MEMORY_HOST, 1, ops};
#else
static const peat_plugin_info info = {PEAT_KERNEL_ABI_VERSION, "layer-norm-bf16", PEAT_MEMORY_HOST, 1, ops};
#endif
#elif defined(PEAT_VERDICT_FP8) || defined(PEAT_VERDICT_FP8NOSCALE)
#define GEMM_KERNEL 1
static const peat_op_desc ops[] = {{PEAT_OP_GEMM, F, PEAT_DTYPE_FP8_E4M3, PEAT_DTYPE_F32, 0},
                                   {PEAT_OP_BATCHED_GEMM, F, PEAT_DTYPE_FP8_E4M3, PEAT_DTYPE_F32, 0}};
static const peat_plugin_info info = {PEAT_KERNEL_ABI_VERSION,
#ifdef PEAT_VERDICT_FP8
                                      "fp8-e4m3-scaled-gemm",
#else
                                      "fp8-e4m3-gemm-b-unscaled",
#endif
                                      PEAT_MEMORY_HOST, 2, ops};
#else
#error "choose a kernel"
#endif
const peat_plugin_info* peat_kernel_info_v2(void) { return &info; }

/* OCP FP8 E4M3: 1 sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities, S.1111.111 is NaN */
static double e4m3(uint8_t c) {
  const int sign = c >> 7, e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return NAN;
  const double v = e == 0 ? ldexp((double)m, -9) : ldexp((double)(8 + m), e - 10);
  return sign ? -v : v;
}

/* bf16: the upper half of an f32 */
static double bf16(uint16_t h) {
  const uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint16_t toBf16(float f) { /* round to nearest even; NaN stays NaN */
  uint32_t u;
  memcpy(&u, &f, 4);
  if (isnan(f)) return (uint16_t)((u >> 16) | 0x40);
  return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

static int64_t count(const peat_tensor* t) {
  int64_t n = 1;
  for (uint32_t d = 0; d < t->rank; ++d) n *= t->shape[d];
  return n;
}

/* input i as doubles (malloc'd); fp8 decoded and times its scale, unless `unscaled` */
static double* in(const peat_call* c, uint32_t i, int unscaled) {
  const peat_tensor* t = &c->inputs[i];
  const int64_t n = count(t);
  double* v = (double*)malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t j = 0; j < n; ++j) {
    if (t->dtype == PEAT_DTYPE_F32) v[j] = ((const float*)t->data)[j];
    else if (t->dtype == PEAT_DTYPE_BF16) v[j] = bf16(((const uint16_t*)t->data)[j]);
    else v[j] = e4m3(((const uint8_t*)t->data)[j]) * (unscaled ? 1.0 : (double)t->scale);
  }
  return v;
}

static void store(peat_tensor* t, const double* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (t->dtype == PEAT_DTYPE_BF16) ((uint16_t*)t->data)[i] = toBf16((float)v[i]); /* double->f32->bf16 */
    else ((float*)t->data)[i] = (float)v[i];
  }
}

#ifdef GEMM_KERNEL
static int gemm(const peat_call* c) {
  const peat_params* p = &c->params;
  const int batched = c->op_kind == PEAT_OP_BATCHED_GEMM;
#ifdef PEAT_VERDICT_FP8NOSCALE
  const int bUnscaled = 1;
#else
  const int bUnscaled = 0;
#endif
  double *a = in(c, 0, 0), *b = in(c, 1, bUnscaled), *c0 = p->beta != 0 ? in(c, 2, 0) : NULL;
  const int64_t nOut = count(&c->outputs[0]), batch = batched && p->batch > 0 ? p->batch : 1;
#ifdef PEAT_VERDICT_KTAIL
  const int64_t kEnd = p->k / 16 * 16; /* whole tiles of 16 only: the tail tile is never summed */
#else
  const int64_t kEnd = p->k;
#endif
  double* out = (double*)calloc((size_t)(nOut ? nOut : 1), sizeof(double));
  if (!a || !b || !out) return 1;
  for (int64_t q = 0; q < batch; ++q)
    for (int64_t i = 0; i < p->m; ++i)
      for (int64_t j = 0; j < p->n; ++j) {
        double s = 0;
        for (int64_t k = 0; k < kEnd; ++k) {
          const int64_t ia = (batched ? q * p->stride_a : 0) + (p->trans_a ? k * p->lda + i : i * p->lda + k);
          const int64_t ib = (batched ? q * p->stride_b : 0) + (p->trans_b ? j * p->ldb + k : k * p->ldb + j);
          s += a[ia] * b[ib];
        }
        const int64_t at = (batched ? q * p->stride_c : 0) + i * p->ldc + j;
        out[at] = p->alpha * s + (c0 ? p->beta * c0[at] : 0.0);
      }
  store(&c->outputs[0], out, nOut);
  free(a), free(b), free(c0), free(out);
  return 0;
}
#endif

#ifdef ATTENTION_KERNEL
static int attention(const peat_call* c) {
  const peat_params* p = &c->params;
  const peat_tensor *tq = &c->inputs[0], *tk = &c->inputs[1], *tv = &c->inputs[2];
  const int64_t B = tq->shape[0], Tq = tq->shape[1], D = tq->shape[2], Tk = tk->shape[1], Dv = tv->shape[2];
  double *q = in(c, 0, 0), *k = in(c, 1, 0), *v = in(c, 2, 0), *mask = p->has_mask ? in(c, 3, 0) : NULL;
  double *o = (double*)calloc((size_t)(B * Tq * Dv), sizeof(double)), *pr = (double*)calloc((size_t)Tk, sizeof(double));
  if (!q || !k || !v || !o || !pr) return 1;
#ifdef PEAT_VERDICT_ATTNSCALE
  const double scale = 1.0 / (double)D; /* the bug: 1/D, and the call's scale never read */
#else
  const double scale = p->scale;
#endif
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < Tq; ++i) {
      int64_t last = p->causal ? i + Tk - Tq : Tk - 1;
      if (last > Tk - 1) last = Tk - 1;
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j <= last; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += q[(b * Tq + i) * D + d] * k[(b * Tk + j) * D + d];
        pr[j] = scale * dot + (mask ? mask[i * Tk + j] : 0);
        mx = pr[j] > mx ? pr[j] : mx;
      }
      for (int64_t j = 0; j <= last; ++j) sum += (pr[j] = isfinite(pr[j]) ? exp(pr[j] - mx) : 0.0);
      for (int64_t j = 0; j <= last; ++j)
        for (int64_t d = 0; d < Dv; ++d) o[(b * Tq + i) * Dv + d] += pr[j] / sum * v[(b * Tk + j) * Dv + d];
    }
  store(&c->outputs[0], o, B * Tq * Dv);
  free(q), free(k), free(v), free(mask), free(o), free(pr);
  return 0;
}
#endif

#ifdef CONV_KERNEL
static int64_t clamp(int64_t x, int64_t hi) { return x < 0 ? 0 : x > hi ? hi : x; }

static int conv2d(const peat_call* c) {
  const peat_params* p = &c->params;
  const peat_tensor *x = &c->inputs[0], *w = &c->inputs[1], *y = &c->outputs[0];
  const int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
  const int64_t O = w->shape[0], Cg = w->shape[1], KH = w->shape[2], KW = w->shape[3], OH = y->shape[2], OW = y->shape[3];
  const int64_t G = p->groups > 0 ? p->groups : 1, Og = O / G;
  const int64_t dh = p->dilation_h > 0 ? p->dilation_h : 1, dw = p->dilation_w > 0 ? p->dilation_w : 1;
  double *xi = in(c, 0, 0), *wi = in(c, 1, 0), *bias = c->input_count > 2 ? in(c, 2, 0) : NULL;
  const int64_t nOut = count(y);
  double* out = (double*)calloc((size_t)(nOut ? nOut : 1), sizeof(double));
  if (!xi || !wi || !out) return 1;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = bias ? bias[o] : 0.0;
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih0 = oh * p->stride_h - p->pad_h + kh * dh, iw0 = ow * p->stride_w - p->pad_w + kw * dw;
#ifndef PEAT_VERDICT_CONVBORDER
                if (ih0 < 0 || ih0 >= H || iw0 < 0 || iw0 >= W) continue; /* zero padding */
#endif
                /* CONVBORDER's bug: a tap in the padding reads the nearest edge pixel instead of a zero */
                const int64_t ih = clamp(ih0, H - 1), iw = clamp(iw0, W - 1);
                s += xi[((n * C + (o / Og) * Cg + ci) * H + ih) * W + iw] * wi[((o * Cg + ci) * KH + kh) * KW + kw];
              }
          out[((n * O + o) * OH + oh) * OW + ow] = s;
        }
  store(&c->outputs[0], out, nOut);
  free(xi), free(wi), free(bias), free(out);
  return 0;
}
#endif

#ifdef LAYER_NORM_KERNEL
/* forward: x [.., n], gamma [n], beta [n]; the statistics in double over the last dimension */
static int layer_norm(const peat_call* c) {
  const peat_tensor* t = &c->inputs[0];
  const int64_t n = t->shape[t->rank - 1], rows = count(t) / n;
  double *x = in(c, 0, 0), *gamma = c->input_count > 1 ? in(c, 1, 0) : NULL, *beta = c->input_count > 2 ? in(c, 2, 0) : NULL;
  double* out = (double*)calloc((size_t)(rows * n ? rows * n : 1), sizeof(double));
  if (!x || !out || n < 2) return 1;
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x + r * n;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mean += xr[j];
    mean /= (double)n;
    for (int64_t j = 0; j < n; ++j) var += (xr[j] - mean) * (xr[j] - mean);
#ifdef PEAT_VERDICT_LNBESSELBF16
    var /= (double)(n - 1); /* the bug: the unbiased variance */
#else
    var /= (double)n;
#endif
    const double rstd = 1 / sqrt(var + c->params.eps);
    for (int64_t j = 0; j < n; ++j)
      out[r * n + j] = (xr[j] - mean) * rstd * (gamma ? gamma[j] : 1.0) + (beta ? beta[j] : 0.0);
  }
  store(&c->outputs[0], out, rows * n);
  free(x), free(gamma), free(beta), free(out);
  return 0;
}
#endif

int peat_kernel_run_v2(const peat_call* c) {
  switch (c->op_kind) {
#ifdef GEMM_KERNEL
    case PEAT_OP_GEMM:
    case PEAT_OP_BATCHED_GEMM: return gemm(c);
#endif
#ifdef ATTENTION_KERNEL
    case PEAT_OP_ATTENTION: return attention(c);
#endif
#ifdef CONV_KERNEL
    case PEAT_OP_CONV2D: return conv2d(c);
#endif
#ifdef LAYER_NORM_KERNEL
    case PEAT_OP_LAYER_NORM: return layer_norm(c);
#endif
    default: return 1;
  }
}
