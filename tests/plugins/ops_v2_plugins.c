/* SPDX-License-Identifier: MIT */
/* ABI v2 user kernels of every op kind and variant for the probe tests (tests/unit/tst_plugin_abi2.cpp),
 * written from the call table of peat/kernel_abi.h alone: each computes in double from its decoded
 * inputs and encodes its outputs in the declared dtype, so the probe must find them right, in any
 * dtypes; WRONG plants one plausible bug per op kind, which the probe must find. One file, one
 * library per -D:
 *   F32    f32 in, f32 out
 *   F16    f16 in, bf16 out
 *   FP8    fp8 e4m3 in, fp8 e5m2 out (the kernel chooses each output's scale)
 *   WRONG  f32 in and out; gemm ignores alpha, batched gemm beta, conv2d its bias, log-softmax's
 *          backward is softmax's, layer norm takes the unbiased variance, attention ignores the mask,
 *          GELU is x sigmoid(1.702 x), Adam forgets the bias correction */
#include <math.h>
#include <peat/kernel_abi.h>
#include <stdlib.h>
#include <string.h>

#if defined(PEAT_OPS_V2_F32) || defined(PEAT_OPS_V2_WRONG)
#define IN_DTYPE PEAT_DTYPE_F32
#define OUT_DTYPE PEAT_DTYPE_F32
#elif defined(PEAT_OPS_V2_F16)
#define IN_DTYPE PEAT_DTYPE_F16
#define OUT_DTYPE PEAT_DTYPE_BF16
#elif defined(PEAT_OPS_V2_FP8)
#define IN_DTYPE PEAT_DTYPE_FP8_E4M3
#define OUT_DTYPE PEAT_DTYPE_FP8_E5M2
#else
#error "choose a dtype set"
#endif

#ifdef PEAT_OPS_V2_WRONG
#define WRONG 1
#else
#define WRONG 0
#endif

#define F PEAT_VARIANT_BIT(PEAT_VARIANT_FORWARD)
#define GI PEAT_VARIANT_BIT(PEAT_VARIANT_GRAD_INPUT)
#define GW PEAT_VARIANT_BIT(PEAT_VARIANT_GRAD_WEIGHT)
#define GB PEAT_VARIANT_BIT(PEAT_VARIANT_GRAD_BIAS)
#define UP PEAT_VARIANT_BIT(PEAT_VARIANT_UPDATE)

static const peat_op_desc ops[] = {
    {PEAT_OP_GEMM, F, IN_DTYPE, OUT_DTYPE, 0},           {PEAT_OP_BATCHED_GEMM, F, IN_DTYPE, OUT_DTYPE, 0},
    {PEAT_OP_CONV2D, F | GI | GW, IN_DTYPE, OUT_DTYPE, 0}, {PEAT_OP_SOFTMAX, F | GI, IN_DTYPE, OUT_DTYPE, 0},
    {PEAT_OP_LAYER_NORM, F | GI | GW | GB, IN_DTYPE, OUT_DTYPE, 0}, {PEAT_OP_ATTENTION, F | GI, IN_DTYPE, OUT_DTYPE, 0},
    {PEAT_OP_ACTIVATION, F | GI, IN_DTYPE, OUT_DTYPE, 0}, {PEAT_OP_OPTIMIZER, UP, IN_DTYPE, OUT_DTYPE, 0},
};
static const peat_plugin_info info = {PEAT_KERNEL_ABI_VERSION, "all-ops", PEAT_MEMORY_HOST, 8, ops};
const peat_plugin_info* peat_kernel_info_v2(void) { return &info; }

/* --- dtypes ------------------------------------------------------------------------------------- */

static double fp8_decode(uint8_t c, int e4m3) {
  const int sign = c >> 7, mbits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const int e = (c & 0x7f) >> mbits, m = c & ((1 << mbits) - 1);
  double v;
  if (e4m3 && e == 15 && m == 7) return NAN;
  if (!e4m3 && e == 31) return m ? NAN : (sign ? -INFINITY : INFINITY);
  if (e == 0) v = ldexp((double)m, 1 - bias - mbits);
  else v = ldexp((double)((1 << mbits) + m), e - bias - mbits);
  return sign ? -v : v;
}

/* the nearest finite code (ties to the even one): slow and plain, enough for the probe's sizes */
static uint8_t fp8_encode(double v, int e4m3) {
  if (isnan(v)) return 0x7f;
  int best = 0;
  double bestError = INFINITY;
  for (int c = 0; c < 256; ++c) {
    const double d = fp8_decode((uint8_t)c, e4m3);
    if (!isfinite(d)) continue;
    const double error = fabs(d - v);
    if (error < bestError || (error == bestError && !(c & 1))) best = c, bestError = error;
  }
  return (uint8_t)best;
}

static double load(const peat_tensor* t, int64_t i) {
  switch (t->dtype) {
    case PEAT_DTYPE_F32: return ((const float*)t->data)[i];
    case PEAT_DTYPE_F16: return (double)((const _Float16*)t->data)[i];
    case PEAT_DTYPE_BF16: {
      const uint32_t bits = (uint32_t)((const uint16_t*)t->data)[i] << 16;
      float f;
      memcpy(&f, &bits, sizeof f);
      return f;
    }
    case PEAT_DTYPE_FP8_E4M3: return fp8_decode(((const uint8_t*)t->data)[i], 1) * t->scale;
    default: return fp8_decode(((const uint8_t*)t->data)[i], 0) * t->scale;
  }
}

static int64_t count(const peat_tensor* t) {
  int64_t n = 1;
  for (uint32_t d = 0; d < t->rank; ++d) n *= t->shape[d];
  return n;
}

/* an input as doubles (malloc'd) */
static double* in(const peat_call* c, uint32_t i) {
  const int64_t n = count(&c->inputs[i]);
  double* v = (double*)malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t j = 0; j < n; ++j) v[j] = load(&c->inputs[i], j);
  return v;
}

/* writes n values into output t in its dtype; an fp8 output gets the scale that maps its largest
 * magnitude to the format's largest finite value */
static void store(peat_tensor* t, const double* v, int64_t n) {
  if (t->dtype == PEAT_DTYPE_FP8_E4M3 || t->dtype == PEAT_DTYPE_FP8_E5M2) {
    const int e4m3 = t->dtype == PEAT_DTYPE_FP8_E4M3;
    double amax = 0;
    for (int64_t i = 0; i < n; ++i)
      if (isfinite(v[i]) && fabs(v[i]) > amax) amax = fabs(v[i]);
    t->scale = amax > 0 ? (float)(amax / (e4m3 ? 448.0 : 57344.0)) : 1.0f;
    for (int64_t i = 0; i < n; ++i) ((uint8_t*)t->data)[i] = fp8_encode(v[i] / t->scale, e4m3);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float f = (float)v[i];
    if (t->dtype == PEAT_DTYPE_F32) {
      ((float*)t->data)[i] = f;
    } else if (t->dtype == PEAT_DTYPE_F16) {
      ((_Float16*)t->data)[i] = (_Float16)f;
    } else {
      uint32_t bits;
      memcpy(&bits, &f, sizeof bits);
      if ((bits & 0x7f800000u) != 0x7f800000u) bits += 0x7fffu + ((bits >> 16) & 1u);
      ((uint16_t*)t->data)[i] = (uint16_t)(bits >> 16);
    }
  }
}

static double* zeros(int64_t n) { return (double*)calloc((size_t)(n ? n : 1), sizeof(double)); }

/* --- ops ------------------------------------------------------------------------------------------ */

static int gemm(const peat_call* c, int batched) {
  const peat_params* p = &c->params;
  double *a = in(c, 0), *b = in(c, 1), *c0 = p->beta != 0 ? in(c, 2) : NULL;
  const int64_t n_out = count(&c->outputs[0]);
  double* out = zeros(n_out);
  const int64_t batch = batched && p->batch > 0 ? p->batch : 1;
  const double alpha = WRONG && !batched ? 1.0 : p->alpha, beta = WRONG && batched ? 0.0 : p->beta;
  for (int64_t q = 0; q < batch; ++q)
    for (int64_t i = 0; i < p->m; ++i)
      for (int64_t j = 0; j < p->n; ++j) {
        double s = 0;
        for (int64_t k = 0; k < p->k; ++k) {
          const int64_t ia = (batched ? q * p->stride_a : 0) + (p->trans_a ? k * p->lda + i : i * p->lda + k);
          const int64_t ib = (batched ? q * p->stride_b : 0) + (p->trans_b ? j * p->ldb + k : k * p->ldb + j);
          s += a[ia] * b[ib];
        }
        const int64_t at = (batched ? q * p->stride_c : 0) + i * p->ldc + j;
        out[at] = alpha * s + (c0 ? beta * c0[at] : 0.0);
      }
  store(&c->outputs[0], out, n_out);
  free(a), free(b), free(c0), free(out);
  return 0;
}

static int conv2d(const peat_call* c) {
  const peat_params* p = &c->params;
  const peat_tensor *x, *w, *y;
  if (c->variant == PEAT_VARIANT_FORWARD) x = &c->inputs[0], w = &c->inputs[1], y = &c->outputs[0];
  else if (c->variant == PEAT_VARIANT_GRAD_INPUT) x = &c->outputs[0], w = &c->inputs[1], y = &c->inputs[0];
  else x = &c->inputs[1], w = &c->outputs[0], y = &c->inputs[0];
  const int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
  const int64_t O = w->shape[0], Cg = w->shape[1], KH = w->shape[2], KW = w->shape[3], OH = y->shape[2], OW = y->shape[3];
  const int64_t G = p->groups > 0 ? p->groups : 1, Og = O / G;
  const int64_t dh = p->dilation_h > 0 ? p->dilation_h : 1, dw = p->dilation_w > 0 ? p->dilation_w : 1;
  double *i0 = in(c, 0), *i1 = in(c, 1);
  const int64_t n_out = count(&c->outputs[0]);
  double* out = zeros(n_out);
  if (c->variant == PEAT_VARIANT_FORWARD && c->input_count == 3 && !WRONG) {
    double* bias = in(c, 2);
    for (int64_t i = 0; i < n_out; ++i) out[i] = bias[(i / (OH * OW)) % O];
    free(bias);
  }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow)
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih = oh * p->stride_h - p->pad_h + kh * dh, iw = ow * p->stride_w - p->pad_w + kw * dw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const int64_t xi = ((n * C + (o / Og) * Cg + ci) * H + ih) * W + iw;
                const int64_t wi = ((o * Cg + ci) * KH + kh) * KW + kw, yi = ((n * O + o) * OH + oh) * OW + ow;
                if (c->variant == PEAT_VARIANT_FORWARD) out[yi] += i0[xi] * i1[wi];
                else if (c->variant == PEAT_VARIANT_GRAD_INPUT) out[xi] += i0[yi] * i1[wi];
                else out[wi] += i0[yi] * i1[xi];
              }
  store(&c->outputs[0], out, n_out);
  free(i0), free(i1), free(out);
  return 0;
}

static int softmax(const peat_call* c) {
  const peat_tensor* t = &c->inputs[0];
  const int64_t n = t->shape[t->rank - 1], rows = count(t) / n, lg = c->params.log;
  double* x = in(c, 0);
  double* y = c->variant == PEAT_VARIANT_GRAD_INPUT ? in(c, 1) : NULL;
  double* out = zeros(rows * n);
  for (int64_t r = 0; r < rows; ++r) {
    double* xr = x + r * n;
    double s = 0;
    if (!y) {
      double mx = xr[0];
      for (int64_t j = 1; j < n; ++j) mx = xr[j] > mx ? xr[j] : mx;
      for (int64_t j = 0; j < n; ++j) s += exp(xr[j] - mx);
      for (int64_t j = 0; j < n; ++j) out[r * n + j] = lg ? xr[j] - mx - log(s) : exp(xr[j] - mx) / s;
    } else {
      const double* yr = y + r * n;
      const int asLog = lg && !WRONG;
      for (int64_t j = 0; j < n; ++j) s += asLog ? xr[j] : xr[j] * yr[j];
      for (int64_t j = 0; j < n; ++j) out[r * n + j] = asLog ? xr[j] - exp(yr[j]) * s : yr[j] * (xr[j] - s);
    }
  }
  store(&c->outputs[0], out, rows * n);
  free(x), free(y), free(out);
  return 0;
}

static int layer_norm(const peat_call* c) {
  const peat_tensor* t = &c->inputs[0];
  const int64_t n = t->shape[t->rank - 1], rows = count(t) / n;
  const uint32_t v = c->variant;
  double* i0 = in(c, 0);
  double* i1 = c->input_count > 1 ? in(c, 1) : NULL;
  double* i2 = c->input_count > 2 ? in(c, 2) : NULL;
  const int64_t n_out = count(&c->outputs[0]);
  double* out = zeros(n_out);
  const double* x = v == PEAT_VARIANT_FORWARD ? i0 : i1;
  for (int64_t r = 0; r < rows; ++r) {
    if (v == PEAT_VARIANT_GRAD_BIAS) {
      for (int64_t j = 0; j < n; ++j) out[j] += i0[r * n + j];
      continue;
    }
    const double* xr = x + r * n;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mean += xr[j];
    mean /= (double)n;
    for (int64_t j = 0; j < n; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    var /= WRONG ? (double)(n - 1) : (double)n;
    const double rstd = 1 / sqrt(var + c->params.eps);
    if (v == PEAT_VARIANT_FORWARD) {
      for (int64_t j = 0; j < n; ++j) out[r * n + j] = (xr[j] - mean) * rstd * i1[j] + i2[j];
    } else if (v == PEAT_VARIANT_GRAD_WEIGHT) {
      for (int64_t j = 0; j < n; ++j) out[j] += i0[r * n + j] * (xr[j] - mean) * rstd;
    } else {
      double mg = 0, mgx = 0;
      for (int64_t j = 0; j < n; ++j) {
        mg += i0[r * n + j] * i2[j];
        mgx += i0[r * n + j] * i2[j] * (xr[j] - mean) * rstd;
      }
      mg /= (double)n, mgx /= (double)n;
      for (int64_t j = 0; j < n; ++j) out[r * n + j] = rstd * (i0[r * n + j] * i2[j] - mg - (xr[j] - mean) * rstd * mgx);
    }
  }
  store(&c->outputs[0], out, n_out);
  free(i0), free(i1), free(i2), free(out);
  return 0;
}

static int attention(const peat_call* c) {
  const peat_params* p = &c->params;
  const int back = c->variant == PEAT_VARIANT_GRAD_INPUT;
  const uint32_t f = back ? 1 : 0;
  const peat_tensor *tq = &c->inputs[f], *tk = &c->inputs[f + 1], *tv = &c->inputs[f + 2];
  const int64_t B = tq->shape[0], Tq = tq->shape[1], D = tq->shape[2], Tk = tk->shape[1], Dv = tv->shape[2];
  double *q = in(c, f), *k = in(c, f + 1), *v = in(c, f + 2);
  double* mask = p->has_mask && !WRONG ? in(c, f + 3) : NULL;
  double* dout = back ? in(c, 0) : NULL;
  double *o = zeros(B * Tq * Dv), *dq = zeros(B * Tq * D), *dk = zeros(B * Tk * D), *dv = zeros(B * Tk * Dv);
  double* pr = zeros(Tk);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < Tq; ++i) {
      int64_t last = p->causal ? i + Tk - Tq : Tk - 1;
      if (last > Tk - 1) last = Tk - 1;
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j <= last; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += q[(b * Tq + i) * D + d] * k[(b * Tk + j) * D + d];
        pr[j] = p->scale * dot + (mask ? mask[i * Tk + j] : 0);
        mx = pr[j] > mx ? pr[j] : mx;
      }
      for (int64_t j = 0; j <= last; ++j) sum += (pr[j] = exp(pr[j] - mx));
      double* oi = o + (b * Tq + i) * Dv;
      for (int64_t j = 0; j <= last; ++j) {
        pr[j] /= sum;
        for (int64_t d = 0; d < Dv; ++d) oi[d] += pr[j] * v[(b * Tk + j) * Dv + d];
      }
      if (!back) continue;
      const double* doi = dout + (b * Tq + i) * Dv;
      double row = 0;
      for (int64_t d = 0; d < Dv; ++d) row += doi[d] * oi[d];
      for (int64_t j = 0; j <= last; ++j) {
        double dp = 0;
        for (int64_t d = 0; d < Dv; ++d) {
          dp += doi[d] * v[(b * Tk + j) * Dv + d];
          dv[(b * Tk + j) * Dv + d] += pr[j] * doi[d];
        }
        const double ds = pr[j] * (dp - row) * p->scale;
        for (int64_t d = 0; d < D; ++d) {
          dq[(b * Tq + i) * D + d] += ds * k[(b * Tk + j) * D + d];
          dk[(b * Tk + j) * D + d] += ds * q[(b * Tq + i) * D + d];
        }
      }
    }
  if (back) {
    store(&c->outputs[0], dq, B * Tq * D);
    store(&c->outputs[1], dk, B * Tk * D);
    store(&c->outputs[2], dv, B * Tk * Dv);
  } else {
    store(&c->outputs[0], o, B * Tq * Dv);
  }
  free(q), free(k), free(v), free(mask), free(dout), free(o), free(dq), free(dk), free(dv), free(pr);
  return 0;
}

static const double PI = 3.14159265358979323846;
static double sigmoid(double x) { return 1 / (1 + exp(-x)); }

static int activation(const peat_call* c) {
  const int64_t n = count(&c->inputs[0]);
  const int kind = c->params.activation;
  const double k0 = sqrt(2 / PI), k1 = 0.044715;
  const int gelu_tanh = kind == PEAT_ACTIVATION_GELU_TANH, quick_gelu = WRONG && kind == PEAT_ACTIVATION_GELU;
  double* a = in(c, 0);
  double* s = c->variant == PEAT_VARIANT_GRAD_INPUT ? in(c, 1) : NULL;
  double* out = zeros(n);
  for (int64_t i = 0; i < n; ++i) {
    const double x = s ? s[i] : a[i];
    double f = 0, d = 0; /* the forward at x, or the derivative from s */
    if (quick_gelu) {
      const double g = sigmoid(1.702 * x);
      f = x * g, d = g + 1.702 * x * g * (1 - g);
    } else if (gelu_tanh) {
      const double t = tanh(k0 * (x + k1 * x * x * x));
      f = 0.5 * x * (1 + t), d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k0 * (1 + 3 * k1 * x * x);
    } else if (kind == PEAT_ACTIVATION_GELU) {
      const double cdf = 0.5 * (1 + erf(x / sqrt(2.0)));
      f = x * cdf, d = cdf + x * exp(-0.5 * x * x) / sqrt(2 * PI);
    } else if (kind == PEAT_ACTIVATION_SILU) {
      f = x * sigmoid(x), d = sigmoid(x) * (1 + x * (1 - sigmoid(x)));
    } else if (kind == PEAT_ACTIVATION_RELU) {
      f = x > 0 ? x : 0, d = x > 0 ? 1 : 0; /* from y: y > 0 where x > 0 */
    } else if (kind == PEAT_ACTIVATION_TANH) {
      f = tanh(x), d = 1 - x * x; /* from y */
    } else {
      f = sigmoid(x), d = x * (1 - x); /* from y */
    }
    out[i] = s ? a[i] * d : f;
  }
  store(&c->outputs[0], out, n);
  free(a), free(s), free(out);
  return 0;
}

static int optimizer(const peat_call* c) {
  const peat_params* p = &c->params;
  const int adam = p->optimizer == PEAT_OPTIMIZER_ADAM;
  const int64_t n = count(&c->inputs[0]);
  double *w = in(c, 0), *g = in(c, 1), *m = in(c, 2), *v = adam ? in(c, 3) : NULL;
  double *wn = zeros(n), *mn = zeros(n), *vn = zeros(n);
  for (int64_t i = 0; i < n; ++i) {
    const double gi = g[i] + p->weight_decay * w[i];
    if (!adam) {
      mn[i] = p->momentum * m[i] + gi;
      wn[i] = w[i] - p->lr * mn[i];
      continue;
    }
    mn[i] = p->beta1 * m[i] + (1 - p->beta1) * gi;
    vn[i] = p->beta2 * v[i] + (1 - p->beta2) * gi * gi;
    const double c1 = WRONG ? 1 : 1 - pow(p->beta1, (double)p->step), c2 = WRONG ? 1 : 1 - pow(p->beta2, (double)p->step);
    wn[i] = w[i] - p->lr * (mn[i] / c1) / (sqrt(vn[i] / c2) + p->eps);
  }
  store(&c->outputs[0], wn, n);
  store(&c->outputs[1], mn, n);
  if (adam) store(&c->outputs[2], vn, n);
  free(w), free(g), free(m), free(v), free(wn), free(mn), free(vn);
  return 0;
}

int peat_kernel_run_v2(const peat_call* c) {
  switch (c->op_kind) {
    case PEAT_OP_GEMM: return gemm(c, 0);
    case PEAT_OP_BATCHED_GEMM: return gemm(c, 1);
    case PEAT_OP_CONV2D: return conv2d(c);
    case PEAT_OP_SOFTMAX: return softmax(c);
    case PEAT_OP_LAYER_NORM: return layer_norm(c);
    case PEAT_OP_ATTENTION: return attention(c);
    case PEAT_OP_ACTIVATION: return activation(c);
    case PEAT_OP_OPTIMIZER: return optimizer(c);
    default: return 1;
  }
}
