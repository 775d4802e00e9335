# SPDX-License-Identifier: MIT
# Candidate kernels as a kernel developer writes them for `peat playback -k python:MODULE:FUNCTION`:
# a legitimate bf16 GEMM, two planted bugs, and candidates that fail in the ways real ones do.
import torch

import peat


@peat.gemm
def bf16_gemm(a, b):
    """bf16 inputs, fp32 accumulation and output (what a bf16 tensor-core GEMM computes)."""
    return torch.matmul(a.to(torch.bfloat16).float(), b.to(torch.bfloat16).float()).to(a.dtype)


@peat.gemm(inputs="bf16", output="bf16")
def bf16_io_gemm(a, b):
    """A port that declares bf16 inputs and output (peat rounds both, as plugin ABI v2 does); fp32 sums."""
    return torch.matmul(a, b)


@peat.gemm(output="bf16")
def bf16_out_gemm(a, b):
    """A port that stores bf16 (fp32 inputs and sums): ktail_bf16_gemm's twin, without its bug."""
    return torch.matmul(a, b)


@peat.gemm(output="bf16")
def ktail_bf16_gemm(a, b):
    """A planted bug in a port that stores bf16: the last partial K tile of 16 is never summed."""
    k = a.shape[-1] // 16 * 16
    return torch.matmul(a[..., :k], b[..., :k, :]) if k else torch.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)


if hasattr(torch, "float8_e4m3fn"):
    @peat.gemm(inputs="fp8_e4m3")
    def fp8_gemm(a, b):
        """fp8 e4m3 inputs with one scale per tensor (peat quantises them), fp32 sums and output."""
        return torch.matmul(a, b)


_last = {}


@peat.gemm
def stale_row_gemm(a, b):
    """A planted race: the output's last row is the one this kernel wrote for the previous call
    of the same shape (a stale tile read back), else left as zeros."""
    out = torch.matmul(a, b)
    key = tuple(out.shape)
    prev = _last.get(key)
    _last[key] = out.detach().clone()
    out = out.clone()
    out[..., -1, :] = prev[..., -1, :] if prev is not None else 0
    return out


@peat.attention
def causal_off_by_one(q, k, v, mask, causal, scale):
    """A planted bug: the causal limit lets each query see one key past itself."""
    t, s = q.shape[-2], k.shape[-2]
    scores = torch.matmul(q.float(), k.float().transpose(-2, -1)) * scale
    allowed = torch.ones(t, s, dtype=torch.bool, device=q.device).tril(diagonal=1)
    if causal or (mask is not None and bool((mask.float()[..., :t, :s] < -1e30).any())):
        scores = scores.masked_fill(~allowed, float("-inf"))
    elif mask is not None:
        scores = scores + mask.float()
    return torch.matmul(torch.softmax(scores, -1), v.float()).to(q.dtype)


@peat.softmax
def softmax_fast_exp(x, dim):
    """A legitimate port: exp2 with a pre-scaled argument, in fp32."""
    m = x.amax(dim, keepdim=True)
    e = torch.exp2((x - m) * 1.4426950408889634)
    return e / e.sum(dim, keepdim=True)


def raises(*args, **kwargs):
    raise RuntimeError("CUDA error: an illegal memory access was encountered")


def wrong_shape(a, b):
    return torch.matmul(a, b)[:-1]


def nan_out(a, b):
    out = torch.matmul(a, b)
    out.view(-1)[0] = float("nan")
    return out


def one_arg(a):
    return a
