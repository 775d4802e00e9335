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


def gemm(fn):
    """A GEMM candidate: fn(a, b) returns a @ b (2-D, or batched 3-D). peat calls it for every GEMM
    form (mm, bmm, addmm, baddbmm, addbmm) and adds the bias and scales as the op defines them."""
    def run(func, args, kwargs):
        name = func._schema.name.split("::")[1]
        if name in ("mm", "bmm"):
            return fn(args[0], args[1])
        beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
        prod = fn(args[1], args[2])
        if name == "addbmm":
            prod = prod.sum(0)
        out = prod if alpha == 1 else prod * alpha
        if beta == 0:
            return out
        return out + (args[0] if beta == 1 else args[0] * beta)
    run.__peat_protocol__ = "aten"
    run.__peat_ops__ = set(GEMM_OPS)
    run.__wrapped__ = fn
    run.__name__ = getattr(fn, "__name__", "gemm")
    return run


def softmax(fn):
    """A softmax candidate: fn(x, dim) returns softmax(x, dim); forward calls of softmax only (a
    log_softmax taken as log(softmax) underflows to -inf, which is not what a port computes)."""
    def run(func, args, kwargs):
        x, dim = args[0], args[1]
        half_to_float = len(args) > 2 and args[2]
        return fn(x.float() if half_to_float else x, dim)
    run.__peat_protocol__ = "aten"
    run.__peat_forward_only__ = True
    run.__peat_ops__ = {"softmax"}
    run.__wrapped__ = fn
    run.__name__ = getattr(fn, "__name__", "softmax")
    return run


def attention(fn):
    """An attention candidate: fn(q, k, v, mask, causal, scale) returns the attention output. peat
    passes the fused kernel's other outputs (log-sum-exp, ...) through from the golden run."""
    def run(func, args, kwargs):
        names = [a.name for a in func._schema.arguments]
        b = dict(zip(names, args))
        b.update(kwargs)
        q = b["query"]
        scale = b.get("scale")
        if scale is None:
            scale = q.shape[-1] ** -0.5
        mask = b.get("attn_mask", b.get("attn_bias"))
        return fn(q, b["key"], b["value"], mask, bool(b.get("is_causal", False)), float(scale))
    run.__peat_protocol__ = "aten"
    run.__peat_ops__ = {"attention"}
    run.__peat_forward_only__ = True
    run.__wrapped__ = fn
    run.__name__ = getattr(fn, "__name__", "attention")
    return run


class Candidate:
    """A loaded candidate: `spec` as given, the callable, and the ops it declares (None: any)."""

    def __init__(self, spec, fn):
        self.spec, self.fn = spec, fn
        self.name = spec.split(":")[-1] if spec.startswith("python:") else spec
        self.ops = getattr(fn, "__peat_ops__", None)
        self.aten = getattr(fn, "__peat_protocol__", None) == "aten"
        self.forward_only = getattr(fn, "__peat_forward_only__", False)

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
