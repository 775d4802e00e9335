// SPDX-License-Identifier: MIT
#pragma once
// What the bit explorer shows of one encoding (issue 18): its fields, value, class, the size of one
// ULP there and its neighbours one ULP away, and what toggling one bit does. All of it from
// core/fp, so that the workbench draws and computes nothing itself.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/fp/format.h"

namespace peat::fp {

struct Explained {  // one encoding of a format, explained
  uint32_t bits = 0;
  float value = 0;
  Fields fields{};
  double ulp = 0;                    // the distance to the next larger magnitude (NaN/Inf: 0)
  std::optional<float> below, above;  // the neighbours one ULP away on the value line (none past the ends)
};


Explained explain(const Format& f, uint32_t bits);

// Toggling one bit: the new encoding and the change it makes.
struct Toggle {
  Explained after;
  double absoluteChange = 0;         // |after - before| (Inf when one side is not finite)
  double relativeChange = 0;         // absoluteChange / |before| (Inf for before = 0)
  std::optional<uint64_t> ulpChange;  // none when either side is NaN
};
Toggle toggle(const Format& f, uint32_t bits, int bit);
// The same numbers between any two encodings (a reference and what toggles made of it).
Toggle change(const Format& f, uint32_t from, uint32_t to);

// A value rounded to a narrow format the way the candidate kernels round it (core/torch/kernels'
// registry): fp8 (E4M3, E5M2) saturates to its largest finite value (65504 is E4M3's 448, not
// NaN); fp16, bf16 and tf32 overflow to Inf; the fp6/fp4 formats have no Inf or NaN and saturate.
struct Narrowed {
  uint32_t code = 0;       // the format's encoding
  float value = 0;         // decoded
  bool saturated = false;  // clamped to the largest finite magnitude
  Overflow overflow = Overflow::Standard;
};
Overflow candidateOverflow(const Format& f);
Narrowed narrowAsCandidate(const Format& f, float x);
// The narrow formats the bit explorer offers, narrowest-exponent last: fp16, bf16, tf32, e4m3,
// e5m2, e3m2, e2m3, e2m1.
std::vector<Format> narrowFormats();

// One fp64 value: its 64 bits' fields and the exact decimal it stands for.
struct Explained64 {
  uint64_t bits = 0;
  double value = 0;
  bool sign = false;
  int exponent = 0;             // the biased field, 0-2047
  int unbiasedExponent = 0;     // the power of two of a normal value (subnormals: -1022)
  uint64_t mantissa = 0;        // 52 bits
  std::string exact;            // every decimal digit of the value ("" for Inf and NaN)
  std::string significand;      // 1.m (or 0.m for subnormals) in decimal, to 17 digits
};
Explained64 explain64(double value);
// Every decimal digit of a finite binary float (a dyadic rational has a finite decimal expansion).
std::string exactDecimal(double value);

// Where a value sits in a block-scaled format (core/fp/block.h): the block of its row it belongs to,
// the block's amax and shared scale, and what the value becomes, for each block format.
struct BlockPlace {
  std::string format;           // "mxfp4", ...
  int blockSize = 0;
  uint64_t block = 0;           // which block of the row
  uint64_t first = 0, last = 0; // its columns, [first, last)
  double amax = 0;
  double scale = 0;             // the block's shared scale (NaN: a NaN scale)
  double tensorScale = 1;       // NVFP4's per-tensor fp32 scale; 1 for MX
  float quantized = 0;          // the value, quantised in its block and decoded
  bool flushed = false;         // a nonzero value that became zero
  bool saturated = false;       // clamped to the element format's largest magnitude
};
// `row` holds `length` values, the value is row[column]; `tensorAmax` is the whole tensor's largest
// finite magnitude (NVFP4's tensor scale; negative: the row's).
std::vector<BlockPlace> blockPlaces(const float* row, uint64_t length, uint64_t column, float tensorAmax);
// The same for element `index` of a tensor of n values whose rows are `cols` long (blocks run
// along the rows; the tensor's amax sets NVFP4's tensor scale).
std::vector<BlockPlace> blockPlacesInTensor(const float* tensor, uint64_t n, uint64_t cols, uint64_t index);

}  // namespace peat::fp
