// SPDX-License-Identifier: MIT
#pragma once
// Seeded standard-normal fp32 values for synthetic unit-test tensors.
#include <cstdint>
#include <random>
#include <vector>

namespace peat::testsupport {

inline std::vector<float> normalValues(std::size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0, 1);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace peat::testsupport
