// SPDX-License-Identifier: MIT
#pragma once
// Plain tensors as the store, analyzer and views see them: no LibTorch here.
#include <cstdint>
#include <string>
#include <vector>

#include "core/store/h5.h"

namespace peat::store {

using DType = h5::Type;

// A borrowed view of contiguous row-major memory, for writing.
struct TensorView {
  DType dtype = DType::F32;
  std::vector<uint64_t> shape;  // empty = scalar
  const void* data = nullptr;   // elementCount() * typeSize(dtype) bytes
  uint64_t elementCount() const;
};

struct NamedTensor {
  std::string name;  // dataset name: "input_0", "output", "fc1.weight", ...
  TensorView view;
  // When set, no data is written: `name` becomes another HDF5 hard link to the dataset at this path
  // (absolute, written earlier). A tensor read by several calls is stored once.
  std::string linkTo = {};
};

// An owned tensor, for reading.
struct Tensor {
  DType dtype = DType::F32;
  std::vector<uint64_t> shape;
  std::vector<unsigned char> bytes;
  uint64_t elementCount() const;
  TensorView view() const { return {dtype, shape, bytes.data()}; }
};

}  // namespace peat::store
