// SPDX-License-Identifier: MIT
#include "tests/support/torchref.h"

#include <ATen/ATen.h>

#include <cstring>

namespace peat::testsupport {
namespace {
at::ScalarType scalarType(TorchHalfKind k) { return k == TorchHalfKind::Half ? at::kHalf : at::kBFloat16; }
}  // namespace

std::vector<float> torchWiden(TorchHalfKind kind, const std::vector<uint16_t>& bits) {
  at::Tensor raw = at::empty({int64_t(bits.size())}, at::kShort);
  std::memcpy(raw.data_ptr(), bits.data(), bits.size() * sizeof(uint16_t));
  at::Tensor wide = raw.view(scalarType(kind)).to(at::kFloat).contiguous();
  std::vector<float> out(bits.size());
  std::memcpy(out.data(), wide.data_ptr<float>(), out.size() * sizeof(float));
  return out;
}

std::vector<uint16_t> torchNarrow(TorchHalfKind kind, const std::vector<float>& values) {
  at::Tensor wide = at::empty({int64_t(values.size())}, at::kFloat);
  std::memcpy(wide.data_ptr(), values.data(), values.size() * sizeof(float));
  at::Tensor narrow = wide.to(scalarType(kind)).view(at::kShort).contiguous();
  std::vector<uint16_t> out(values.size());
  std::memcpy(out.data(), narrow.data_ptr(), out.size() * sizeof(uint16_t));
  return out;
}

}  // namespace peat::testsupport
