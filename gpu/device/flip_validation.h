// SPDX-License-Identifier: MIT
#pragma once
// Host-side checks shared by every backend, so all reject the same bad input the same way.
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/backend.h"

namespace peat::gpu {

inline void validateFlips(uint64_t count, const std::vector<BitFlip>& flips) {
  for (const BitFlip& f : flips)
    if (f.index >= count)
      throw std::out_of_range("bit flip at word " + std::to_string(f.index) + " is outside the buffer of " +
                              std::to_string(count) + " words");
}

}  // namespace peat::gpu
