// SPDX-License-Identifier: MIT
#pragma once
// Numerics statistics of one tensor (issue 21): how it would fare in narrow formats, in the manner of
// Transformer Engine's FP8 debug statistics, extended to block-scaled formats. amax, the smallest
// nonzero magnitude, the dynamic range in binades, and for each format the share of nonzero finite
// values that would flush to zero (underflow) or exceed the largest value (saturate):
//  - plain: the values as they are;
//  - tensor-scaled: one scale per tensor that maps amax to the format's largest value;
//  - block-scaled: the MX / NVFP4 rules of core/fp/block.h, in blocks along the last dimension.
// For block formats also the distribution of the block scales (log2) and of each block's own
// dynamic range. Counting only: thresholds, no rounding of the data, so it is cheap enough to run
// on every recorded call.
#include <cstdint>
#include <string>
#include <vector>

namespace peat::analyzer {

struct FormatShare {
  std::string format;     // "fp16", "bf16", "e4m3", "e5m2", "e3m2", "e2m3", "e2m1", or a block format
  double underflow = 0;   // share of nonzero finite values that round to zero
  double saturated = 0;   // share of nonzero finite values beyond the largest finite value
};

struct BlockStatistics {
  std::string format;                  // "mxfp8-e4m3", ... "nvfp4"
  int scaleLog2Min = 0;                // scaleLog2Counts[i]: blocks whose scale is 2^(scaleLog2Min + i)
  std::vector<uint64_t> scaleLog2Counts;
  std::vector<uint64_t> rangeCounts;   // [b]: blocks whose amax / min nonzero spans b binades (last: more)
};

struct TensorNumerics {
  uint64_t count = 0, nonzero = 0, nonFinite = 0;  // nonzero: finite and nonzero
  double amax = 0, minNonzero = 0, rangeBinades = 0;  // log2(amax / minNonzero)
  std::vector<FormatShare> plain, tensorScaled, blockScaled;
  std::vector<BlockStatistics> blocks;
};

// Plain statistics of one tensor (the call page shows the golden's and the candidate's side by
// side): over the finite values, in double; the non-finite ones counted apart.
struct ValueStats {
  uint64_t count = 0, finite = 0, nan = 0, inf = 0, zeros = 0;
  double min = 0, max = 0, mean = 0, stddev = 0, amax = 0;  // 0 when no value is finite
};
ValueStats valueStats(const float* values, uint64_t n);

// `lastDim`: the length of the last dimension (blocks do not cross rows); 0 or n: one row.
TensorNumerics tensorNumerics(const float* values, uint64_t n, uint64_t lastDim = 0);

}  // namespace peat::analyzer
