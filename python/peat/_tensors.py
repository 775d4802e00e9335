# SPDX-License-Identifier: MIT
"""Tensors between PyTorch and the session store: NumPy arrays in the store's dtypes (bfloat16 as its
uint16 bit patterns, bool as uint8), and back, on any device."""
import numpy as np
import torch

# torch dtype -> (store dtype name, numpy dtype of the bytes)
_STORE = {
    torch.float32: ("float32", np.float32),
    torch.float64: ("float64", np.float64),
    torch.float16: ("float16", np.float16),
    torch.bfloat16: ("bfloat16", np.uint16),
    torch.int64: ("int64", np.int64),
    torch.int32: ("int32", np.int32),
    torch.int8: ("int8", np.int8),
    torch.uint8: ("uint8", np.uint8),
    torch.bool: ("uint8", np.uint8),
}
_NUMPY = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "bfloat16": np.uint16,
          "int64": np.int64, "int32": np.int32, "int8": np.int8, "uint8": np.uint8, "uint16": np.uint16,
          "uint32": np.uint32, "uint64": np.uint64}


def storable(t):
    return isinstance(t, torch.Tensor) and t.dtype in _STORE and t.layout == torch.strided and not t.is_sparse


def dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def to_numpy(t):
    """A host, C-contiguous array of `t`'s values and the store's dtype name."""
    name, _ = _STORE[t.dtype]
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16), name
    if t.dtype == torch.bool:
        return t.to(torch.uint8).numpy(), name
    return t.numpy(), name


def from_stored(dtype, shape, data, original=None, device="cpu"):
    """The stored bytes as a tensor of the original torch dtype (name, e.g. "bfloat16", "bool")."""
    arr = np.frombuffer(data, dtype=_NUMPY[dtype]).reshape(tuple(shape)).copy()
    if dtype == "bfloat16":
        t = torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    else:
        t = torch.from_numpy(arr)
    if original and original != dtype_name(t.dtype):
        t = t.to(getattr(torch, original))
    return t.to(device) if device != "cpu" else t


def as_float32(t):
    """float32 values on the host for error numbers (an exact widening for float16 and bfloat16)."""
    return t.detach().to("cpu", torch.float32).contiguous().numpy()
