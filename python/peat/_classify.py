# SPDX-License-Identifier: MIT
"""ATen calls into the kernel slot's op vocabulary.

A call seen by the dispatch mode becomes one or more recorded calls, each with the slot's op name,
variant and inputs in the order the slot keeps them (docs/models.md), so `peat playback` with a
built-in or plugin kernel and the detector's replays read them like the C++ profiler's calls. Each
call also keeps how to re-run the ATen op itself (`label.aten`, `label.replay`): a golden replay runs
exactly that op on the same inputs, laid out with the same strides.
"""
import json
import math

import torch

from ._tensors import dtype_name, storable

# op groups for --ops
GEMM_OPS = {"linear", "matmul", "addmm", "baddbmm", "addbmm"}
GROUPS = {"gemm": GEMM_OPS,
          "conv": {"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}}


class Call:
    """One recorded call: slot op, variant, named tensors, integer params and the ATen replay."""
    __slots__ = ("op", "variant", "tensors", "params", "replay", "output")

    def __init__(self, op, variant, tensors, params, replay, output):
        self.op, self.variant, self.tensors, self.params, self.replay, self.output = op, variant, tensors, params, replay, output


def real(params, name, value):
    """A real parameter as the bits of a double (the slot's NAME_f64 convention)."""
    import struct
    params[name + "_f64"] = struct.unpack("<q", struct.pack("<d", float(value)))[0]


class _Encoder:
    """Encodes an ATen call's arguments as JSON; tensors become references to stored datasets."""

    def __init__(self, named, placeholders):
        self.named = named              # id(tensor) -> (dataset name, transposed)
        self.placeholders = placeholders  # ids of tensors replayed as empty ones of the same layout
        self.tensors = []               # (name, tensor) to store, named ones and aux ones
        self.stored = {}                # dataset name -> tensor, to store once
        self.aux = 0

    def tensor(self, t):
        spec = {"dt": dtype_name(t.dtype), "sh": list(t.shape), "st": list(t.stride()), "dev": str(t.device)}
        if t.storage_offset():  # a view into a larger tensor: replayed at the same offset, so the same alignment
            spec["so"] = int(t.storage_offset())
        if id(t) in self.placeholders:
            spec["E"] = 1
            return spec
        if id(t) in self.named:
            name, transposed = self.named[id(t)]
        else:
            name, transposed = "aux_%d" % self.aux, False
            self.aux += 1
            self.named[id(t)] = (name, False)
        if transposed:
            spec["t"] = 1
        spec["T"] = name
        if name not in self.stored:
            self.stored[name] = t.t() if transposed else t
        return spec

    def encode(self, x):
        if isinstance(x, torch.Tensor):
            return self.tensor(x)
        if isinstance(x, (list, tuple)):
            return [self.encode(v) for v in x]
        if isinstance(x, dict):
            return {"D": {k: self.encode(v) for k, v in x.items()}}
        if isinstance(x, torch.dtype):
            return {"dtype": dtype_name(x)}
        if isinstance(x, torch.device):
            return {"device": str(x)}
        if isinstance(x, (torch.layout, torch.memory_format)):
            return {"enum": str(x).replace("torch.", "")}
        if isinstance(x, float) and not math.isfinite(x):
            return {"float": repr(x)}
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        if isinstance(x, torch.Generator):
            raise TypeError("a generator argument cannot be replayed")
        try:  # SymInt, SymFloat and the like
            return int(x) if float(x) == int(x) else float(x)
        except Exception:
            raise TypeError("argument of type %s cannot be recorded" % type(x).__name__)


def _qual(func):
    return "%s.%s" % (func._schema.name, func._overloadname)


def _make(func, op, variant, named, output, params, args, kwargs, index=None, placeholders=(), mode="aten"):
    """A Call whose slot inputs are `named` [(dataset name, tensor, transposed)], replayed as
    func(*args, **kwargs)[index]."""
    enc = _Encoder({id(t): (n, tr) for n, t, tr in named}, {id(t) for t in placeholders})
    for n, t, tr in named:  # the slot's inputs first, in order
        enc.stored[n] = t.t() if tr else t
    replay = {"op": _qual(func), "args": enc.encode(list(args)), "kwargs": enc.encode(dict(kwargs)),
              "index": index, "mode": mode}
    tensors = list(enc.stored.items())
    return Call(op, variant, tensors, params, replay, output)


def _out(out, index):
    return out if index is None else out[index]


def _scalar(v, default):
    return default if v is None else (v.item() if isinstance(v, torch.Tensor) else v)


def _arg(args, kwargs, i, name, default=None):
    if len(args) > i:
        return args[i]
    return kwargs.get(name, default)


# ---- GEMMs ---------------------------------------------------------------------------------------

def _mm(func, args, kwargs, out):
    a, b = args[0], args[1]
    return [_make(func, "matmul", 0, [("input_0", a, False), ("input_1", b, False)], out, {}, args, kwargs)]


def _addmm(func, args, kwargs, out):
    bias, m1, m2 = args[0], args[1], args[2]
    beta, alpha = _scalar(kwargs.get("beta"), 1), _scalar(kwargs.get("alpha"), 1)
    if beta == 1 and alpha == 1 and bias.dim() == 1 and bias.shape[0] == m2.shape[1] and m2.dim() == 2:
        # y = x W^T + b: the slot's linear forward with W = m2^T [N, K]
        return [_make(func, "linear", 0, [("input_0", m1, False), ("input_1", m2, True), ("input_2", bias, False)],
                      out, {}, args, kwargs)]
    params = {}
    real(params, "beta", beta)
    real(params, "alpha", alpha)
    return [_make(func, "addmm", 0, [("input_0", m1, False), ("input_1", m2, False), ("input_2", bias, False)],
                  out, params, args, kwargs)]


def _baddbmm(func, args, kwargs, out):
    params = {}
    real(params, "beta", _scalar(kwargs.get("beta"), 1))
    real(params, "alpha", _scalar(kwargs.get("alpha"), 1))
    return [_make(func, func._schema.name.split("::")[1], 0,
                  [("input_0", args[1], False), ("input_1", args[2], False), ("input_2", args[0], False)],
                  out, params, args, kwargs)]


# ---- convolutions --------------------------------------------------------------------------------

def _conv_params(stride, padding, dilation, groups, nd):
    stride, padding, dilation = list(stride), list(padding), list(dilation)
    if nd == 2:
        return {"stride": stride[0], "padding": padding[0], "stride_w": stride[1], "padding_w": padding[1],
                "dilation_h": dilation[0], "dilation_w": dilation[1], "groups": groups}
    p = {"groups": groups}
    for i in range(nd):
        p["stride_%d" % i], p["padding_%d" % i], p["dilation_%d" % i] = stride[i], padding[i], dilation[i]
    return p


def _conv_name(weight, transposed):
    nd = weight.dim() - 2
    return ("conv_transpose%dd" if transposed else "conv%dd") % nd, nd


def _convolution(func, args, kwargs, out):
    x, w, b = args[0], args[1], args[2]
    stride, padding, dilation, transposed, _, groups = args[3:9]
    op, nd = _conv_name(w, transposed)
    named = [("input_0", x, False), ("input_1", w, False)] + ([("input_2", b, False)] if b is not None else [])
    return [_make(func, op, 0, named, out, _conv_params(stride, padding, dilation, groups, nd), args, kwargs)]


def _convolution_backward(func, args, kwargs, out):
    dy, x, w = args[0], args[1], args[2]
    stride, padding, dilation, transposed, _, groups, mask = args[4:11]
    op, nd = _conv_name(w, transposed)
    base = _conv_params(stride, padding, dilation, groups, nd)
    calls = []
    for index, (variant, on) in enumerate(zip((1, 2, 3), mask)):
        if not on or out[index] is None:
            continue
        rargs = list(args)
        rargs[10] = [i == index for i in range(3)]
        params = dict(base)
        if variant == 1:  # dX from dY and W; X only lends its shape
            if nd == 2:
                params.update(in_h=x.shape[2], in_w=x.shape[3])
            named, ph = [("input_0", dy, False), ("input_1", w, False)], [x]
        elif variant == 2:  # dW from dY and X; W only lends its shape
            if nd == 2:
                params.update(k_h=w.shape[2], k_w=w.shape[3])
            named, ph = [("input_0", dy, False), ("input_1", x, False)], [w]
        else:
            named, ph = [("input_0", dy, False)], [x, w]
        params["variant"] = variant
        # the slot's convolutions have no bias-gradient variant: another op name, replayed here only
        name = op if variant != 3 else op + "_grad_bias"
        calls.append(_make(func, name, variant, named, out[index], params, rargs, kwargs, index=index, placeholders=ph))
    return calls


# ---- softmax, layer norm, attention --------------------------------------------------------------

def _softmax(op):
    def h(func, args, kwargs, out):
        return [_make(func, op, 0, [("input_0", args[0], False)], out, {"dim": int(args[1])}, args, kwargs)]
    return h


def _softmax_backward(op):
    def h(func, args, kwargs, out):  # (grad_output, output, dim, input_dtype)
        return [_make(func, op, 1, [("input_0", args[0], False), ("input_1", args[1], False)], out,
                      {"dim": int(args[2]), "variant": 1}, args, kwargs)]
    return h


def _layer_norm(func, args, kwargs, out):
    x, shape, w, b, eps = args[0], args[1], args[2], args[3], args[4]
    params = {"normalized": len(shape), "weight": int(w is not None), "bias": int(b is not None)}
    real(params, "eps", eps)
    named = [("input_0", x, False)] + ([("input_1", w, False)] if w is not None else []) + \
            ([("input_2", b, False)] if b is not None else [])
    return [_make(func, "layernorm", 0, named, out[0], params, args, kwargs, index=0)]


def _layer_norm_backward(func, args, kwargs, out):
    dy, x, shape, mean, rstd, w, b, mask = args[:8]
    calls = []
    for index, (variant, on) in enumerate(zip((1, 2, 3), mask)):
        if not on or out[index] is None:
            continue
        rargs = list(args)
        rargs[7] = [i == index for i in range(3)]
        named = [("input_0", dy, False)]
        if variant in (1, 2):
            named.append(("input_1", x, False))
        if variant == 1 and w is not None:
            named.append(("input_2", w, False))
        params = {"normalized": len(shape), "weight": int(w is not None), "bias": int(b is not None), "variant": variant}
        calls.append(_make(func, "layernorm", variant, named, out[index], params, rargs, kwargs, index=index))
    return calls


def _bound(func, args, kwargs):
    """The call's arguments by their schema names."""
    names = [a.name for a in func._schema.arguments]
    b = dict(zip(names, args))
    b.update(kwargs)
    return b


def _attention(func, args, kwargs, out):
    """The fused scaled dot-product attention kernels (flash, efficient, cuDNN, CPU flash)."""
    b = _bound(func, args, kwargs)
    q, k, v = b["query"], b["key"], b["value"]
    scale = b.get("scale")
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    params = {"causal": int(bool(b.get("is_causal", False))), "mask": 0,
              "dropout": int(float(b.get("dropout_p", 0.0) or 0.0) > 0)}
    real(params, "scale", scale)
    real(params, "p", float(b.get("dropout_p", 0.0) or 0.0))
    named = [("input_0", q, False), ("input_1", k, False), ("input_2", v, False)]
    mask = b.get("attn_mask", b.get("attn_bias"))
    if isinstance(mask, torch.Tensor):
        params["mask"] = 1
        named.append(("input_3", mask, False))
    return [_make(func, "attention", 0, named, out[0], params, args, kwargs, index=0)]


def _attention_backward(func, args, kwargs, out):
    calls = []
    # (grad_out, query, key, value, ...): dq, dk, dv are the first three outputs of every variant
    dy, q, k, v = args[0], args[1], args[2], args[3]
    for wrt in range(3):
        if out[wrt] is None:
            continue
        params = {"wrt": wrt, "variant": 1}
        named = [("input_0", dy, False), ("input_1", q, False), ("input_2", k, False), ("input_3", v, False)]
        calls.append(_make(func, "attention", 1, named, out[wrt], params, args, kwargs, index=wrt))
    return calls


# ---- element-wise, dropout, embedding, losses, pooling, norms -----------------------------------

def _unary(op, params_of=None):
    def h(func, args, kwargs, out):
        params = params_of(args, kwargs) if params_of else {}
        return [_make(func, op, 0, [("input_0", args[0], False)], out, params, args, kwargs)]
    return h


def _unary_backward(op, params_of=None):
    def h(func, args, kwargs, out):  # (grad, x or y, ...)
        params = params_of(args, kwargs) if params_of else {}
        params["variant"] = 1
        return [_make(func, op, 1, [("input_0", args[0], False), ("input_1", args[1], False)], out, params, args, kwargs)]
    return h


def _gelu_params(args, kwargs):
    return {"approximate": int(kwargs.get("approximate", args[-1] if len(args) > 1 and isinstance(args[-1], str) else "none") == "tanh")}


def _dropout(func, args, kwargs, out):
    x, p = args[0], float(args[1])
    keep = out[1].to(x.dtype) * (1.0 / (1.0 - p)) if p < 1 else torch.zeros_like(x)
    params = {}
    real(params, "p", p)
    call = _make(func, "dropout", 0, [("input_0", x, False), ("input_1", keep, False)], out[0], params, args, kwargs,
                 index=0, mode="dropout")
    call.tensors.append(("aux_mask", out[1]))
    return [call]


def _dropout_backward(func, args, kwargs, out):  # (grad, mask, scale)
    dy, mask, scale = args[0], args[1], float(args[2])
    keep = mask.to(dy.dtype) * scale
    params = {"variant": 1}
    call = _make(func, "dropout", 1, [("input_0", dy, False), ("input_1", keep, False)], out, params, args, kwargs)
    return [call]


def _embedding(func, args, kwargs, out):
    table, ids = args[0], args[1]
    return [_make(func, "embedding", 0, [("input_0", ids, False), ("input_1", table, False)], out,
                  {"padding_idx": int(_arg(args, kwargs, 2, "padding_idx", -1))}, args, kwargs)]


def _embedding_backward(func, args, kwargs, out):  # (grad, indices, num_weights, padding_idx, scale_grad_by_freq)
    return [_make(func, "embedding", 2, [("input_0", args[0], False), ("input_1", args[1], False)], out,
                  {"num_weights": int(args[2]), "padding_idx": int(args[3]), "variant": 2}, args, kwargs)]


def _generic(op, index=None):
    """Every tensor argument an input, in order; the output (or output `index`)."""
    def h(func, args, kwargs, out):
        flat = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
        named = [("input_%d" % i, t, False) for i, t in enumerate(flat)]
        o = out if index is None else out[index]
        variant = 1 if "backward" in func._schema.name else 0
        params = {"variant": variant} if variant else {}
        return [_make(func, op, variant, named, o, params, args, kwargs, index=index)]
    return h


# ATen op -> (the slot op it is selected and counted as, the handler that builds its calls): the one
# table of the vocabulary. An addmm counts as "linear" (the handler names a plain addmm "addmm"), a
# convolution as "conv" (the handler names conv1d/2d/3d and the transposed ones).
_ENTRIES = [
    ("aten::mm", "matmul", _mm), ("aten::bmm", "matmul", _mm), ("aten::addmm", "linear", _addmm),
    ("aten::baddbmm", "baddbmm", _baddbmm), ("aten::addbmm", "addbmm", _baddbmm),
    ("aten::convolution", "conv", _convolution), ("aten::convolution_backward", "conv", _convolution_backward),
    ("aten::_softmax", "softmax", _softmax("softmax")), ("aten::_log_softmax", "log_softmax", _softmax("log_softmax")),
    ("aten::_softmax_backward_data", "softmax", _softmax_backward("softmax")),
    ("aten::_log_softmax_backward_data", "log_softmax", _softmax_backward("log_softmax")),
    ("aten::native_layer_norm", "layernorm", _layer_norm),
    ("aten::native_layer_norm_backward", "layernorm", _layer_norm_backward),
] + [(name, "attention", _attention) for name in (
    "aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_flash_attention_for_cpu",
    "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention")] + [
    (name + "_backward", "attention", _attention_backward) for name in (
        "aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_flash_attention_for_cpu",
        "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention")] + [
    ("aten::gelu", "gelu", _unary("gelu", _gelu_params)), ("aten::gelu_backward", "gelu", _unary_backward("gelu", _gelu_params)),
    ("aten::relu", "relu", _unary("relu")), ("aten::relu_", "relu", _unary("relu")),
    ("aten::threshold_backward", "relu", _unary_backward("relu")),
    ("aten::silu", "silu", _unary("silu")), ("aten::silu_", "silu", _unary("silu")),
    ("aten::silu_backward", "silu", _unary_backward("silu")),
    ("aten::tanh", "tanh", _unary("tanh")), ("aten::tanh_backward", "tanh", _unary_backward("tanh")),
    ("aten::sigmoid", "sigmoid", _unary("sigmoid")), ("aten::sigmoid_backward", "sigmoid", _unary_backward("sigmoid")),
    ("aten::native_dropout", "dropout", _dropout), ("aten::native_dropout_backward", "dropout", _dropout_backward),
    ("aten::embedding", "embedding", _embedding), ("aten::embedding_dense_backward", "embedding", _embedding_backward),
] + [(aten, op, _generic(op, index)) for aten, op, index in (
    ("aten::nll_loss_forward", "nll_loss", 0), ("aten::nll_loss_backward", "nll_loss", None),
    ("aten::nll_loss2d_forward", "nll_loss2d", 0), ("aten::nll_loss2d_backward", "nll_loss2d", None),
    ("aten::mse_loss", "mse_loss", None), ("aten::mse_loss_backward", "mse_loss", None),
    ("aten::binary_cross_entropy_with_logits", "bce_with_logits", None),
    ("aten::max_pool2d_with_indices", "max_pool2d", 0), ("aten::max_pool2d_with_indices_backward", "max_pool2d", None),
    ("aten::avg_pool2d", "avg_pool2d", None), ("aten::avg_pool2d_backward", "avg_pool2d", None),
    ("aten::_adaptive_avg_pool2d", "adaptive_avg_pool2d", None),
    ("aten::_adaptive_avg_pool2d_backward", "adaptive_avg_pool2d", None),
    ("aten::upsample_nearest2d", "interpolate", None), ("aten::upsample_bilinear2d", "interpolate", None),
    ("aten::upsample_nearest2d_backward", "interpolate", None), ("aten::upsample_bilinear2d_backward", "interpolate", None),
    ("aten::native_batch_norm", "batch_norm", 0), ("aten::_native_batch_norm_legit", "batch_norm", 0),
    ("aten::_native_batch_norm_legit_functional", "batch_norm", 0),
    ("aten::_native_batch_norm_legit_no_training", "batch_norm", 0),
    ("aten::native_batch_norm_backward", "batch_norm", 0))]
HANDLERS = {aten: handler for aten, _, handler in _ENTRIES}
_NAMES = {aten: op for aten, op, _ in _ENTRIES}

# ops that only move, view or make tensors: never worth a kernel, counted apart from the
# unclassified so that the list says what a kernel developer would miss
PLUMBING = {"view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "contiguous", "clone",
            "detach", "alias", "slice", "select", "unsqueeze", "squeeze", "split", "split_with_sizes", "chunk",
            "as_strided", "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like",
            "full", "full_like", "fill_", "zero_", "copy_", "_to_copy", "lift_fresh", "arange", "_local_scalar_dense",
            "new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided", "unbind", "cat", "stack",
            "index_select", "unfold", "_reshape_alias", "is_same_size", "_has_compatible_shallow_copy_type",
            "set_", "resize_", "scalar_tensor", "randperm", "normal_", "uniform_", "bernoulli_", "random_",
            "kaiming_uniform_", "_assert_async", "item", "sym_size", "sym_stride", "sym_numel", "equal",
            "_pin_memory", "is_pinned", "_record_function_enter", "_record_function_enter_new", "_record_function_exit", "record_stream", "_conj", "conj", "resolve_conj", "resolve_neg"}


def op_name_of(func):
    return func._schema.name


def classify(func, args, kwargs, out):
    """The calls an ATen call makes in the slot's vocabulary, or None when it has no slot op."""
    h = HANDLERS.get(func._schema.name)
    if h is None:
        return None
    return h(func, args, kwargs, out)


def slot_op_of(func):
    """The slot op an ATen op maps to, without building a call (for counting and --ops)."""
    return _NAMES.get(func._schema.name)


def selected(op, wanted, func_name=None):
    """Whether slot op `op` is chosen by --ops (a set of names and groups; None = all)."""
    if wanted is None:
        return True
    if op in wanted:
        return True
    if op == "conv":
        return any(w in wanted for w in ("conv",) + tuple(GROUPS["conv"]))
    if op == "linear" and "linear" not in wanted:  # an addmm may be a linear or a plain addmm
        return "gemm" in wanted or "addmm" in wanted
    return any(op in GROUPS.get(w, ()) for w in wanted)


def known_names():
    return sorted(set(_NAMES.values()) | set(GROUPS) | GEMM_OPS | GROUPS["conv"] | {"optimizer", "all"})


def replay_json(call):
    return json.dumps(call.replay, separators=(",", ":"))
