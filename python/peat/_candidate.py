# SPDX-License-Identifier: MIT
"""Candidate kernels written in Python: a plain function called with the ATen op's arguments, or one
wrapped by a decorator (peat.gemm, peat.softmax, peat.attention) that takes the op's math in its
usual form and declares which ops it runs."""
import importlib
import inspect

import torch

from ._classify import GEMM_OPS


class CandidateError(Exception):
    """A candidate that cannot be loaded or cannot take the chosen op: one line for the user."""


# The formats a decorated candidate may declare for its inputs and output (plugin ABI v2's dtypes), by
# the names peat's verdicts use; a torch dtype names its format too.
_FORMAT_NAMES = {"f32": "f32", "float32": "f32", "bf16": "bf16", "bfloat16": "bf16", "f16": "f16", "fp16": "f16",
                 "float16": "f16", "fp8_e4m3": "fp8_e4m3", "float8_e4m3fn": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2",
                 "float8_e5m2": "fp8_e5m2"}
_FP8 = {"fp8_e4m3": ("float8_e4m3fn", 448.0), "fp8_e5m2": ("float8_e5m2", 57344.0)}


def _format(value, what):
    """A declared format ("bf16", torch.bfloat16, ...) as its name; None stays None."""
    if value is None:
        return None
    key = str(value).replace("torch.", "") if isinstance(value, torch.dtype) else str(value)
    name = _FORMAT_NAMES.get(key)
    if name is None:
        raise ValueError("%s=%r is not a format peat replays (f32, bf16, f16, fp8_e4m3, fp8_e5m2)" % (what, value))
    if name in _FP8 and not hasattr(torch, _FP8[name][0]):
        raise ValueError("%s=%s needs torch.%s (PyTorch 2.1 or later; this is %s)"
                         % (what, name, _FP8[name][0], torch.__version__))
    return name


def _rounder(name):
    """The rounding a declared format applies to a tensor, which stays in its own dtype: as plugin ABI
    v2 hands a kernel its inputs (fp8 with one scale per tensor, amax over the format's largest value)."""
    if name in (None, "f32"):
        return lambda t: t
    if name in _FP8:
        dtype, largest = getattr(torch, _FP8[name][0]), _FP8[name][1]

        def fp8(t):
            if not t.is_floating_point():
                return t
            amax = t.detach().abs().max().float() if t.numel() else torch.zeros(())
            scale = amax / largest if float(amax) > 0 else torch.ones(())
            return ((t.float() / scale).clamp(-largest, largest).to(dtype).float() * scale).to(t.dtype)
        return fp8
    dtype = torch.bfloat16 if name == "bf16" else torch.float16
    return lambda t: t.to(dtype).to(t.dtype) if t.is_floating_point() else t


def _declare(run, fn, kinds, inputs, output):
    """What a decorated candidate declares: its ops' kinds with the formats, as a plugin's
    declared_formats ("gemm:bf16->f32,batched_gemm:bf16->f32"); nothing when it declared no format."""
    run.__wrapped__ = fn
    if inputs or output:
        run.__peat_declared__ = ",".join("%s:%s->%s" % (k, inputs or "f32", output or "f32") for k in kinds)
    return run


def gemm(fn=None, *, inputs=None, output=None):
    """A GEMM candidate: fn(a, b) returns a @ b (2-D, or batched 3-D). peat calls it for every GEMM
    form (mm, bmm, addmm, baddbmm, addbmm) and adds the bias and scales as the op defines them.
    `@peat.gemm(inputs="bf16", output="bf16")` declares the formats it computes in, as plugin ABI v2
    does: peat rounds a and b to `inputs` before the call, and the result (bias included, the bias
    given in `output` as cuBLAS's C) to `output` after it; the verdicts judge the call with them."""
    if fn is None:
        return lambda f: gemm(f, inputs=inputs, output=output)
    inputs, output = _format(inputs, "inputs"), _format(output, "output")
    rin, rout = _rounder(inputs), _rounder(output)

    def run(func, args, kwargs):
        name = func._schema.name.split("::")[1]
        if name in ("mm", "bmm"):
            return rout(fn(rin(args[0]), rin(args[1])))
        beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
        prod = fn(rin(args[1]), rin(args[2]))
        if name == "addbmm":
            prod = prod.sum(0)
        out = prod if alpha == 1 else prod * alpha
        if beta == 0:
            return rout(out)
        c0 = rout(args[0])
        return rout(out + (c0 if beta == 1 else c0 * beta))
    run.__peat_protocol__ = "aten"
    run.__peat_ops__ = set(GEMM_OPS)
    run.__name__ = getattr(fn, "__name__", "gemm")
    return _declare(run, fn, ("gemm", "batched_gemm"), inputs, output)


def softmax(fn=None, *, inputs=None, output=None):
    """A softmax candidate: fn(x, dim) returns softmax(x, dim); forward calls of softmax only (a
    log_softmax taken as log(softmax) underflows to -inf, which is not what a port computes).
    `inputs=`/`output=` declare its formats, as for peat.gemm."""
    if fn is None:
        return lambda f: softmax(f, inputs=inputs, output=output)
    inputs, output = _format(inputs, "inputs"), _format(output, "output")
    rin, rout = _rounder(inputs), _rounder(output)

    def run(func, args, kwargs):
        x, dim = args[0], args[1]
        half_to_float = len(args) > 2 and args[2]
        return rout(fn(rin(x.float() if half_to_float else x), dim))
    run.__peat_protocol__ = "aten"
    run.__peat_forward_only__ = True
    run.__peat_ops__ = {"softmax"}
    run.__name__ = getattr(fn, "__name__", "softmax")
    return _declare(run, fn, ("softmax",), inputs, output)


def attention(fn=None, *, inputs=None, output=None):
    """An attention candidate: fn(q, k, v, mask, causal, scale) returns the attention output. peat
    passes the fused kernel's other outputs (log-sum-exp, ...) through from the golden run.
    `inputs=`/`output=` declare its formats (q, k and v rounded; the mask stays as recorded)."""
    if fn is None:
        return lambda f: attention(f, inputs=inputs, output=output)
    inputs, output = _format(inputs, "inputs"), _format(output, "output")
    rin, rout = _rounder(inputs), _rounder(output)

    def run(func, args, kwargs):
        names = [a.name for a in func._schema.arguments]
        b = dict(zip(names, args))
        b.update(kwargs)
        q = b["query"]
        scale = b.get("scale")
        if scale is None:
            scale = q.shape[-1] ** -0.5
        mask = b.get("attn_mask", b.get("attn_bias"))
        return rout(fn(rin(q), rin(b["key"]), rin(b["value"]), mask, bool(b.get("is_causal", False)), float(scale)))
    run.__peat_protocol__ = "aten"
    run.__peat_ops__ = {"attention"}
    run.__peat_forward_only__ = True
    run.__name__ = getattr(fn, "__name__", "attention")
    return _declare(run, fn, ("attention",), inputs, output)


class Candidate:
    """A loaded candidate: `spec` as given, the callable, and the ops it declares (None: any)."""

    def __init__(self, spec, fn):
        self.spec, self.fn = spec, fn
        self.name = spec.split(":")[-1] if spec.startswith("python:") else spec
        self.ops = getattr(fn, "__peat_ops__", None)
        self.aten = getattr(fn, "__peat_protocol__", None) == "aten"
        self.forward_only = getattr(fn, "__peat_forward_only__", False)
        self.declared = getattr(fn, "__peat_declared__", "")  # "gemm:bf16->f32,...": the formats it declared

    def takes(self, op, variant):
        if self.ops is not None and op not in self.ops:
            return False
        return not (self.forward_only and variant != 0)

    def __call__(self, func, args, kwargs):
        if self.aten:
            return self.fn(func, args, kwargs)
        return self.fn(*args, **kwargs)


def load(spec):
    """python:MODULE:FUNCTION (MODULE on sys.path / PYTHONPATH) -> Candidate; CandidateError otherwise."""
    body = spec[len("python:"):] if spec.startswith("python:") else spec
    if body.count(":") != 1:
        raise CandidateError("kernel '%s' is not python:MODULE:FUNCTION" % spec)
    module, function = body.split(":")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        raise CandidateError("kernel '%s': no module named '%s' on PYTHONPATH" % (spec, e.name or module))
    except Exception as e:  # the module itself raised on import
        raise CandidateError("kernel '%s': importing '%s' raised %s: %s" % (spec, module, type(e).__name__, e))
    fn = mod
    for part in function.split("."):
        if not hasattr(fn, part):
            raise CandidateError("kernel '%s': module '%s' has no '%s'" % (spec, module, function))
        fn = getattr(fn, part)
    if not callable(fn):
        raise CandidateError("kernel '%s': '%s' is not callable" % (spec, function))
    return Candidate(spec, fn)


def check_arity(cand, func, args, kwargs):
    """A plain function must accept the ATen op's arguments: checked before anything runs."""
    if cand.aten:
        return
    try:
        inspect.signature(cand.fn).bind(*args, **kwargs)
    except TypeError as e:
        raise CandidateError("kernel '%s' cannot take %s's arguments (%s): %s"
                             % (cand.spec, func._schema.name, ", ".join(a.name for a in func._schema.arguments), e))
    except ValueError:  # builtins without a signature
        pass
