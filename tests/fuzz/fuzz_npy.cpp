// SPDX-License-Identifier: MIT
// libFuzzer target for the .npy reader: any byte string is either a valid layout whose data fits
// the buffer, or a SourceError. Nothing else may happen (no crash, no leak, no huge allocation).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/io/tensor_source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const peat::io::NpyLayout l = peat::io::validateNpy(data, size, "fuzz");
    // The promised elements must lie inside the input: touch the last byte.
    if (l.count > 0) {
      volatile uint8_t last = data[l.header.dataOffset + l.count * uint64_t(l.element.bytes) - 1];
      (void)last;
    }
    if (l.header.dataOffset > size) std::abort();
  } catch (const peat::io::SourceError&) {
  }
  return 0;
}
