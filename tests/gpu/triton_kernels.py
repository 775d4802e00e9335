# SPDX-License-Identifier: MIT
# Triton kernels as a kernel developer brings them to `peat playback -k python:triton_kernels:NAME`
# on a GPU (docs/gpu.md): a row softmax, a bf16-input GEMM with fp32 accumulation, and the same
# GEMM with a planted port bug (the last partial K tile dropped).
import torch
import triton
import triton.language as tl

import peat


@triton.jit
def _softmax_rows(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)


@peat.softmax
def softmax(x, dim):
    """Row softmax over the last dimension (fp32), for any leading shape."""
    if dim not in (-1, x.dim() - 1):
        return torch.softmax(x, dim)
    x2 = x.contiguous().view(-1, x.shape[-1]).float()
    y = torch.empty_like(x2)
    _softmax_rows[(x2.shape[0],)](x2, y, x2.shape[1], x2.stride(0), BLOCK=triton.next_power_of_2(x2.shape[1]))
    return y.view(x.shape).to(x.dtype)


@triton.jit
def _gemm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn, DROP_TAIL: tl.constexpr,
          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    k_end = (K // BK) * BK if DROP_TAIL else K
    for k0 in range(0, k_end, BK):
        ka = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * sam + ka[None, :] * sak, mask=(rm[:, None] < M) & (ka[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ka[:, None] * sbk + rn[None, :] * sbn, mask=(ka[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16), out_dtype=tl.float32)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def _matmul(a, b, drop_tail):
    if a.dim() == 3:
        return torch.stack([_matmul(a[i], b[i], drop_tail) for i in range(a.shape[0])])
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=torch.float32)
    grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
    _gemm[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                DROP_TAIL=drop_tail, BM=64, BN=64, BK=32)
    return c.to(a.dtype)


@peat.gemm
def bf16_gemm(a, b):
    """bf16 tensor-core GEMM, fp32 accumulation and output."""
    return _matmul(a, b, False)


@peat.gemm
def bf16_gemm_drop_ktail(a, b):
    """The planted bug: the last partial K tile (K % 32 columns) is never accumulated."""
    return _matmul(a, b, True)
