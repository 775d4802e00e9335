/* SPDX-License-Identifier: MIT */
/* Example user kernel (ABI v2): attention as FlashAttention computes it (Dao et al., 2022). The
 * forward walks over the keys in blocks of 16 and keeps, per query, a running maximum and a running
 * sum of exp(score - max); when a block raises the maximum, the sum and the accumulated output are
 * rescaled. As FlashAttention's bf16 kernels do, the probabilities are rounded to bf16 before they
 * multiply V (the sum keeps them in fp32), and q, k and v come in bf16 (declared below; PEAT rounds
 * its fp32 values before the call): errors of bf16's size, a legitimate port. The backward recomputes
 * the probabilities exactly in fp32 and writes dq, dk and dv with the standard formulas. Causal
 * (query i sees keys j <= i + Tk - Tq), an additive f32 mask, the scale and dropout on the
 * probabilities (PEAT_FEATURE_ATTENTION_DROPOUT: the call's `keep` multipliers, applied to P after its
 * normalisation as FlashAttention applies its dropout; the sum l stays undropped) are supported.
 *
 * Built a second time with -DPEAT_PLANT_CAUSAL_OFF_BY_ONE as "flash-attention-causalbug": the causal
 * limit is off by one (query i also sees key i + 1 + Tk - Tq), in the forward and the backward. That
 * is the planted bug the probe and the detector find (docs/plugins.md). C99, libm only:
 *   cc -O2 -std=c99 -shared -fPIC -I core/plugin core/plugin/examples/flash_attention.c -o libflash_attention.so -lm
 *   cc -O2 -std=c99 -shared -fPIC -I core/plugin -DPEAT_PLANT_CAUSAL_OFF_BY_ONE \
 *      core/plugin/examples/flash_attention.c -o libflash_attention_causalbug.so -lm */
#include <math.h>
#include <peat/kernel_abi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef PEAT_PLANT_CAUSAL_OFF_BY_ONE
#define KERNEL_NAME "flash-attention-causalbug"
#else
#define KERNEL_NAME "flash-attention"
#endif

static const peat_op_desc ops[] = {
    {PEAT_OP_ATTENTION, PEAT_VARIANT_BIT(PEAT_VARIANT_FORWARD) | PEAT_VARIANT_BIT(PEAT_VARIANT_GRAD_INPUT),
     PEAT_DTYPE_BF16, PEAT_DTYPE_F32, PEAT_FEATURE_ATTENTION_DROPOUT},
};
static const peat_plugin_info info = {PEAT_KERNEL_ABI_VERSION, KERNEL_NAME, PEAT_MEMORY_HOST, 1, ops};

const peat_plugin_info* peat_kernel_info_v2(void) { return &info; }

static char last_error[200];
const char* peat_kernel_last_error_v2(void) { return last_error[0] ? last_error : NULL; }

static int fail(const char* why) {
  snprintf(last_error, sizeof last_error, KERNEL_NAME ": %s", why);
  return 1;
}

enum { BLOCK = 16 }; /* keys per block */

/* fp32 -> bf16 -> fp32, round to nearest even */
static float round_bf16(float x) {
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7f800000u) != 0x7f800000u) bits += 0x7fffu + ((bits >> 16) & 1u);
  bits &= 0xffff0000u;
  memcpy(&x, &bits, sizeof x);
  return x;
}

/* A floating input widened to fp32 (bf16 is the upper half of an fp32); NULL when out of memory. */
static float* widen(const peat_tensor* t, int64_t n) {
  float* out = (float*)malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  if (!out) return NULL;
  if (t->dtype == PEAT_DTYPE_F32) {
    memcpy(out, t->data, sizeof(float) * (size_t)n);
    return out;
  }
  const uint16_t* h = (const uint16_t*)t->data;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = (uint32_t)h[i] << 16;
    memcpy(&out[i], &bits, sizeof bits);
  }
  return out;
}

/* The last key query i sees. */
static int64_t last_key(int64_t i, int64_t tq, int64_t tk, int causal) {
  if (!causal) return tk - 1;
  int64_t last = i + (tk - tq);
#ifdef PEAT_PLANT_CAUSAL_OFF_BY_ONE
  last += 1; /* the planted bug: one key into the future */
#endif
  return last < tk - 1 ? last : tk - 1;
}

typedef struct {
  int64_t B, Tq, Tk, D, Dv;
  float scale;
  const float* mask; /* [Tq, Tk] or NULL */
  const float* keep; /* [B, Tq, Tk]: the dropout's multipliers, or NULL */
  int causal;
} dims;

static float kept(const dims* g, int64_t b, int64_t i, int64_t j) {
  return g->keep ? g->keep[(b * g->Tq + i) * g->Tk + j] : 1.0f;
}

static float score(const dims* g, const float* q, const float* k, int64_t i, int64_t j) {
  float dot = 0.0f;
  for (int64_t d = 0; d < g->D; ++d) dot += q[d] * k[d];
  return g->scale * dot + (g->mask ? g->mask[i * g->Tk + j] : 0.0f);
}

static void forward(const dims* g, const float* q, const float* k, const float* v, float* o, float* acc) {
  for (int64_t b = 0; b < g->B; ++b)
    for (int64_t i = 0; i < g->Tq; ++i) {
      const float* qi = q + (b * g->Tq + i) * g->D;
      const int64_t last = last_key(i, g->Tq, g->Tk, g->causal);
      float m = -INFINITY, l = 0.0f;
      for (int64_t d = 0; d < g->Dv; ++d) acc[d] = 0.0f;
      for (int64_t j0 = 0; j0 <= last; j0 += BLOCK) {
        const int64_t j1 = j0 + BLOCK <= last + 1 ? j0 + BLOCK : last + 1;
        float s[BLOCK], block_max = -INFINITY;
        for (int64_t j = j0; j < j1; ++j) {
          s[j - j0] = score(g, qi, k + (b * g->Tk + j) * g->D, i, j);
          if (s[j - j0] > block_max) block_max = s[j - j0];
        }
        const float m_new = block_max > m ? block_max : m;
        if (m_new == -INFINITY) continue; /* every key so far masked out */
        const float correction = m == -INFINITY ? 0.0f : expf(m - m_new);
        l *= correction;
        for (int64_t d = 0; d < g->Dv; ++d) acc[d] *= correction;
        for (int64_t j = j0; j < j1; ++j) {
          const float p = expf(s[j - j0] - m_new);
          l += p;                          /* the sum in fp32 */
          const float p16 = round_bf16(p) * kept(g, b, i, j); /* P in bf16 for the product with V, dropped */
          const float* vj = v + (b * g->Tk + j) * g->Dv;
          for (int64_t d = 0; d < g->Dv; ++d) acc[d] += p16 * vj[d];
        }
        m = m_new;
      }
      float* oi = o + (b * g->Tq + i) * g->Dv;
      for (int64_t d = 0; d < g->Dv; ++d) oi[d] = l > 0.0f ? acc[d] / l : 0.0f;
    }
}

/* dP = dO V^T, dS = P (dP - rowsum(dO o)), dq = scale dS K, dk = scale dS^T Q, dv = P^T dO; P exact in fp32 */
static void backward(const dims* g, const float* dout, const float* q, const float* k, const float* v, float* dq,
                     float* dk, float* dv, float* p, float* oi) {
  memset(dq, 0, sizeof(float) * (size_t)(g->B * g->Tq * g->D));
  memset(dk, 0, sizeof(float) * (size_t)(g->B * g->Tk * g->D));
  memset(dv, 0, sizeof(float) * (size_t)(g->B * g->Tk * g->Dv));
  for (int64_t b = 0; b < g->B; ++b)
    for (int64_t i = 0; i < g->Tq; ++i) {
      const float* qi = q + (b * g->Tq + i) * g->D;
      const float* doi = dout + (b * g->Tq + i) * g->Dv;
      const int64_t last = last_key(i, g->Tq, g->Tk, g->causal);
      float m = -INFINITY, l = 0.0f;
      for (int64_t j = 0; j <= last; ++j) {
        p[j] = score(g, qi, k + (b * g->Tk + j) * g->D, i, j);
        if (p[j] > m) m = p[j];
      }
      if (m == -INFINITY) continue; /* no key: a zero row, no gradient */
      for (int64_t j = 0; j <= last; ++j) {
        p[j] = expf(p[j] - m);
        l += p[j];
      }
      for (int64_t d = 0; d < g->Dv; ++d) oi[d] = 0.0f;
      for (int64_t j = 0; j <= last; ++j) {
        p[j] /= l;
        const float* vj = v + (b * g->Tk + j) * g->Dv;
        for (int64_t d = 0; d < g->Dv; ++d) oi[d] += p[j] * kept(g, b, i, j) * vj[d];
      }
      float row = 0.0f;
      for (int64_t d = 0; d < g->Dv; ++d) row += doi[d] * oi[d];
      for (int64_t j = 0; j <= last; ++j) {
        const float* vj = v + (b * g->Tk + j) * g->Dv;
        float dp = 0.0f;
        const float keep = kept(g, b, i, j);
        for (int64_t d = 0; d < g->Dv; ++d) {
          dp += doi[d] * vj[d];
          dv[(b * g->Tk + j) * g->Dv + d] += p[j] * keep * doi[d];
        }
        const float ds = p[j] * (keep * dp - row) * g->scale; /* dP = (dO V^T) keep; row = rowsum(dO o) */
        const float* kj = k + (b * g->Tk + j) * g->D;
        for (int64_t d = 0; d < g->D; ++d) {
          dq[(b * g->Tq + i) * g->D + d] += ds * kj[d];
          dk[(b * g->Tk + j) * g->D + d] += ds * qi[d];
        }
      }
    }
}

static int shaped(const peat_tensor* t, int64_t a, int64_t b, int64_t c) {
  return t->rank == 3 && t->shape[0] == a && t->shape[1] == b && t->shape[2] == c;
}

int peat_kernel_run_v2(const peat_call* call) {
  if (call->op_kind != PEAT_OP_ATTENTION) return fail("only attention");
  const int back = call->variant == PEAT_VARIANT_GRAD_INPUT;
  if (!back && call->variant != PEAT_VARIANT_FORWARD) return fail("forward and grad input only");
  const peat_params* p = &call->params;
  const uint32_t first = back ? 1 : 0; /* where q is */
  if (call->input_count != first + 3 + (p->has_mask ? 1u : 0u) + (p->has_dropout ? 1u : 0u) ||
      call->output_count != (back ? 3u : 1u))
    return fail("q, k, v[, mask][, keep] in (grad input: do first), o out (grad input: dq, dk, dv)");
  const peat_tensor *tq = &call->inputs[first], *tk = &call->inputs[first + 1], *tv = &call->inputs[first + 2];
  if (tq->rank != 3 || tk->rank != 3 || tv->rank != 3) return fail("q, k and v are [B, T, D]");
  dims g;
  g.B = tq->shape[0], g.Tq = tq->shape[1], g.D = tq->shape[2], g.Tk = tk->shape[1], g.Dv = tv->shape[2];
  g.scale = (float)p->scale;
  g.causal = p->causal;
  g.mask = NULL;
  g.keep = NULL;
  if (!shaped(tk, g.B, g.Tk, g.D) || !shaped(tv, g.B, g.Tk, g.Dv)) return fail("q, k and v do not fit");
  for (uint32_t i = 0; i < first + 3; ++i)
    if (call->inputs[i].dtype != PEAT_DTYPE_BF16 && call->inputs[i].dtype != PEAT_DTYPE_F32)
      return fail("q, k, v and do must be bf16 or f32");
  if (p->has_mask) {
    const peat_tensor* tm = &call->inputs[first + 3];
    if (tm->dtype != PEAT_DTYPE_F32 || tm->rank != 2 || tm->shape[0] != g.Tq || tm->shape[1] != g.Tk)
      return fail("the mask is f32 [Tq, Tk]");
    g.mask = (const float*)tm->data;
  }
  if (p->has_dropout) {
    const peat_tensor* tkeep = &call->inputs[first + 3 + (p->has_mask ? 1u : 0u)];
    if (tkeep->dtype != PEAT_DTYPE_F32 || !shaped(tkeep, g.B, g.Tq, g.Tk)) return fail("keep is f32 [B, Tq, Tk]");
    g.keep = (const float*)tkeep->data;
  }
  for (uint32_t i = 0; i < call->output_count; ++i)
    if (call->outputs[i].dtype != PEAT_DTYPE_F32) return fail("outputs must be f32");
  if (back && !shaped(&call->inputs[0], g.B, g.Tq, g.Dv)) return fail("do is [B, Tq, Dv]");
  float* q = widen(tq, g.B * g.Tq * g.D);
  float* k = widen(tk, g.B * g.Tk * g.D);
  float* v = widen(tv, g.B * g.Tk * g.Dv);
  float* dout = back ? widen(&call->inputs[0], g.B * g.Tq * g.Dv) : NULL;
  float* scratch = (float*)malloc(sizeof(float) * (size_t)(g.Tk + g.Dv + 1));
  int rc = 0;
  if (!q || !k || !v || (back && !dout) || !scratch) {
    rc = fail("out of memory");
  } else if (back) {
    backward(&g, dout, q, k, v, (float*)call->outputs[0].data, (float*)call->outputs[1].data,
             (float*)call->outputs[2].data, scratch, scratch + g.Tk);
  } else {
    forward(&g, q, k, v, (float*)call->outputs[0].data, scratch);
  }
  free(q);
  free(k);
  free(v);
  free(dout);
  free(scratch);
  return rc;
}
