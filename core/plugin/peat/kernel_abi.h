/* SPDX-License-Identifier: MIT */
/* PEAT Workbench user-kernel ABI, versions 1 and 2.
 *
 * A user kernel is a shared library exporting the C symbols below. PEAT loads it at run time
 * (`--kernel plugin:path=/path/libmykernel.so`), first in a child process (the probe) that checks
 * the ABI version and runs every op kind the library exports on small cases against a reference, so
 * a crashing kernel cannot take the workbench down; then in a kernel host process that serves the
 * calls of a playback or of runtime fault injection (docs/plugins.md). The library runs with the
 * user's rights: load only code you trust.
 *
 * Version 1: one fp32 row-major host GEMM (peat_kernel_info_v1, peat_kernel_gemm_v1). Still accepted.
 * Version 2: op kinds (GEMM with transposes, leading dimensions, alpha and beta; batched GEMM;
 * conv2d; softmax; layer norm; attention; element-wise activations; optimiser steps), forward and
 * backward, in f32, f16, bf16 and the fp8 formats, chosen separately for inputs and outputs
 * (peat_kernel_info_v2, peat_kernel_run_v2). A library exporting peat_kernel_info_v2 is used as v2.
 *
 * Conversions: PEAT's training runs in fp32. Before a call, the slot rounds every floating input to
 * the op's declared input dtype (round to nearest even; fp8 with one scale per tensor, chosen so that
 * the tensor's largest magnitude maps to the format's largest finite value, and passed in `scale`),
 * hands the kernel those values, and converts its outputs back to fp32 (times the output's `scale`,
 * which the kernel may set for an fp8 output; it starts at 1). So what the kernel was given is what a
 * port in that dtype is given, and the detector judges the kernel against golden fp32 with the
 * declared formats in mind.
 */
#ifndef PEAT_KERNEL_ABI_H
#define PEAT_KERNEL_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PEAT_KERNEL_ABI_VERSION_1 1
#define PEAT_KERNEL_ABI_VERSION 2  /* the newest; peat_kernel_info_v2's abi_version */

enum peat_op_kind {
  PEAT_OP_GEMM = 1,          /* C = alpha op(A) op(B) + beta C0 */
  PEAT_OP_BATCHED_GEMM = 2,  /* the same for `batch` matrices at element strides (0: one shared matrix) */
  PEAT_OP_CONV2D = 3,        /* NCHW convolution: forward, grad input, grad weight */
  PEAT_OP_SOFTMAX = 4,       /* softmax or log-softmax over the last dimension: forward, grad input */
  PEAT_OP_LAYER_NORM = 5,    /* layer norm over the last dimension: forward, grad input, grad gamma, grad beta */
  PEAT_OP_ATTENTION = 6,     /* softmax(scale q k^T + mask) v, causal or not: forward, grad input (dq, dk, dv) */
  PEAT_OP_ACTIVATION = 7,    /* element-wise: forward, grad input */
  PEAT_OP_OPTIMIZER = 8      /* one optimiser step over a parameter tensor: update */
};
#define PEAT_OP_KIND_COUNT 8

enum peat_dtype {
  PEAT_DTYPE_F32 = 1,
  PEAT_DTYPE_F16 = 2,       /* IEEE binary16 */
  PEAT_DTYPE_BF16 = 3,      /* bfloat16: the upper half of an fp32 */
  PEAT_DTYPE_FP8_E4M3 = 4,  /* OCP E4M3 (max 448, no infinities), with the tensor's scale */
  PEAT_DTYPE_FP8_E5M2 = 5   /* OCP E5M2 (max 57344), with the tensor's scale */
};

enum peat_memory {
  PEAT_MEMORY_HOST = 1,   /* pointers are host memory; the kernel copies to its device itself if it has one */
  PEAT_MEMORY_DEVICE = 2  /* pointers are device memory of the current CUDA/HIP device (refused on a machine without one) */
};

/* The same numbers as PEAT's call variants (docs/models.md). */
enum peat_variant {
  PEAT_VARIANT_FORWARD = 0,
  PEAT_VARIANT_GRAD_INPUT = 1,   /* the gradient of the data input(s); attention: dq, dk and dv */
  PEAT_VARIANT_GRAD_WEIGHT = 2,  /* conv2d: dW; layer norm: dgamma */
  PEAT_VARIANT_GRAD_BIAS = 3,    /* layer norm: dbeta */
  PEAT_VARIANT_UPDATE = 4        /* optimiser */
};
#define PEAT_VARIANT_BIT(v) (1u << (v))

enum peat_activation {
  PEAT_ACTIVATION_RELU = 1,
  PEAT_ACTIVATION_GELU = 2,       /* x Phi(x), with erf */
  PEAT_ACTIVATION_GELU_TANH = 3,  /* the tanh approximation */
  PEAT_ACTIVATION_SILU = 4,
  PEAT_ACTIVATION_TANH = 5,
  PEAT_ACTIVATION_SIGMOID = 6
};

enum peat_optimizer {
  PEAT_OPTIMIZER_SGD = 1,  /* buf' = momentum buf + g; p' = p - lr buf' */
  PEAT_OPTIMIZER_ADAM = 2  /* m' = b1 m + (1-b1) g; v' = b2 v + (1-b2) g^2;
                              p' = p - lr (m'/(1-b1^step)) / (sqrt(v'/(1-b2^step)) + eps) */
};

/* ---------------------------------------------------------------------------------------------- */
/* Version 1 */

typedef struct peat_kernel_info {
  uint32_t abi_version; /* PEAT_KERNEL_ABI_VERSION_1 */
  const char* name;     /* short name: letters, digits, '-', '_' and '.' */
  uint32_t op_kind;     /* PEAT_OP_GEMM */
  uint32_t dtype;       /* PEAT_DTYPE_F32 */
  uint32_t memory;      /* PEAT_MEMORY_HOST */
} peat_kernel_info;

/* Required in v1. Returns static information; must not fail. */
const peat_kernel_info* peat_kernel_info_v1(void);

/* Required in v1. c[m,n] = sum_k a[m,k] * b[k,n]; row-major, contiguous, no aliasing.
 * Returns 0 on success and non-zero on failure (e.g. no device). */
int peat_kernel_gemm_v1(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k);

/* Optional (v1 and v2). A one-line reason for the last failure, or NULL. */
const char* peat_kernel_last_error_v1(void);

/* ---------------------------------------------------------------------------------------------- */
/* Version 2 */

/* One op kind a library implements. */
typedef struct peat_op_desc {
  uint32_t op_kind;       /* enum peat_op_kind; each kind at most once */
  uint32_t variants;      /* PEAT_VARIANT_BIT of each variant it implements */
  uint32_t input_dtype;   /* the dtype of its floating inputs (the attention mask stays f32) */
  uint32_t output_dtype;  /* the dtype of its outputs */
  uint32_t features;      /* PEAT_FEATURE_* it implements beyond the op's basic form; 0 for none */
} peat_op_desc;

/* Attention with dropout on its probabilities (FlashAttention's dropout): the call carries the
 * dropout's multipliers (`has_dropout`); a kernel without this feature gets no such call (PEAT
 * replays those calls through it only when it declares the feature). */
#define PEAT_FEATURE_ATTENTION_DROPOUT 1u

typedef struct peat_plugin_info {
  uint32_t abi_version;     /* PEAT_KERNEL_ABI_VERSION (2) */
  const char* name;         /* short name: letters, digits, '-', '_' and '.' */
  uint32_t memory;          /* enum peat_memory */
  uint32_t op_count;        /* 1 to PEAT_OP_KIND_COUNT */
  const peat_op_desc* ops;  /* op_count descriptions */
} peat_plugin_info;

/* A tensor: row-major and contiguous unless the op says otherwise (GEMM's leading dimensions). */
typedef struct peat_tensor {
  void* data;         /* inputs: read-only (write-protected in the kernel host) */
  uint32_t dtype;     /* enum peat_dtype */
  uint32_t rank;      /* 0 to 8 */
  int64_t shape[8];
  float scale;        /* fp8: a value is its decoded code times scale; 1 for the other dtypes. A kernel
                         may set an fp8 output's scale; PEAT reads it after the call */
  uint32_t reserved;
} peat_tensor;

/* The parameters of a call; those its op kind does not use are 0. */
typedef struct peat_params {
  /* GEMM and batched GEMM: C[m,n] = alpha op(A)[m,k] op(B)[k,n] + beta C0[m,n]. op(X) is X, or X^T
   * when trans_x is 1; A is stored as rows of lda elements (m rows of k, or k rows of m when
   * transposed), B likewise with ldb, C and C0 with ldc. Batched: matrix i of A starts at
   * i * stride_a elements (0: all share one), the same for B and C. */
  int32_t trans_a, trans_b;
  int64_t m, n, k, lda, ldb, ldc;
  int64_t batch, stride_a, stride_b, stride_c;
  double alpha, beta;
  /* conv2d */
  int64_t stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups;
  /* softmax: 1 for log-softmax */
  int32_t log;
  /* activation: enum peat_activation */
  int32_t activation;
  /* layer norm and Adam */
  double eps;
  /* attention */
  double scale;
  int32_t causal;    /* 1: query i sees keys 0..i + Tk - Tq (a query that sees none gets an undefined row) */
  int32_t has_mask;  /* 1: an additive f32 mask [Tq, Tk] follows v */
  /* optimiser: enum peat_optimizer */
  int32_t optimizer;
  /* attention: 1 when the dropout's multipliers `keep` [B, Tq, Tk] (f32: 0 or 1/(1-p) per probability)
   * follow v (and the mask, when there is one): o = (softmax(...) * keep) v */
  int32_t has_dropout;
  double lr, momentum, beta1, beta2, weight_decay;
  int64_t step;  /* Adam: 1 on the first step */
  int64_t reserved[8];
} peat_params;

/* One call. Inputs and outputs per op kind and variant (shapes; every floating tensor in the op's
 * declared dtypes unless said):
 *   GEMM             forward:     in A, B[, C0 when beta != 0]            out C [m, ldc]
 *                                 (C0 in the op's output dtype, as C is: cuBLAS's C)
 *   BATCHED_GEMM     forward:     in A, B[, C0]                           out C (batch matrices)
 *   CONV2D           forward:     in x [N,C,H,W], w [O,C/groups,kh,kw][, b [O]]  out y [N,O,OH,OW]
 *                    grad input:  in dy [N,O,OH,OW], w                    out dx [N,C,H,W]
 *                    grad weight: in dy, x                                out dw [O,C/groups,kh,kw]
 *   SOFTMAX          forward:     in x [rows, n]                          out y
 *                    grad input:  in dy, y (the forward's output)         out dx
 *   LAYER_NORM       forward:     in x [rows, n], gamma [n], beta [n]     out y
 *                    grad input:  in dy, x, gamma                         out dx
 *                    grad weight: in dy, x                                out dgamma [n]
 *                    grad bias:   in dy                                   out dbeta [n]
 *   ATTENTION        forward:     in q [B,Tq,D], k [B,Tk,D], v [B,Tk,Dv][, mask [Tq,Tk] f32][, keep [B,Tq,Tk] f32]
 *                                 out o [B,Tq,Dv]   (keep: has_dropout, PEAT_FEATURE_ATTENTION_DROPOUT)
 *                    grad input:  in do [B,Tq,Dv], q, k, v[, mask][, keep] out dq, dk, dv
 *   ACTIVATION       forward:     in x                                    out y
 *                    grad input:  in dy, s                                out dx; s is x for GELU, GELU_TANH
 *                                 and SILU, the forward's output y for RELU, TANH and SIGMOID
 *   OPTIMIZER        update:      in p, g, m[, v (Adam)]                  out p', m'[, v']  (m: SGD's
 *                                 momentum buffer or Adam's first moment)
 */
typedef struct peat_call {
  uint32_t op_kind;  /* enum peat_op_kind */
  uint32_t variant;  /* enum peat_variant */
  uint32_t input_count, output_count;
  const peat_tensor* inputs;
  peat_tensor* outputs;
  peat_params params;
} peat_call;

/* Required in v2. Returns static information; must not fail. */
const peat_plugin_info* peat_kernel_info_v2(void);

/* Required in v2. Runs one call of an op kind and variant the info declares. Returns 0 on success
 * and non-zero on failure (an unsupported shape, no device). */
int peat_kernel_run_v2(const peat_call* call);

/* Optional in v2. A one-line reason for the last failure, or NULL. */
const char* peat_kernel_last_error_v2(void);

#ifdef __cplusplus
}
#endif

#endif /* PEAT_KERNEL_ABI_H */
