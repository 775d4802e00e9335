// SPDX-License-Identifier: MIT
#pragma once
// The detector's replays of block-scaled quantisation (core/fp/block.h) on a GEMM's recorded
// operands: which way of quantising the inputs (format, block size, along K or not, which scale
// rule), and perhaps the output, reproduces a candidate up to fp32 reordering. The legitimate
// schemes name a precision loss; the schemes with a planted mistake name the mistake.
#include <optional>
#include <string>
#include <vector>

#include "core/detector/detector.h"
#include "core/fp/block.h"

namespace peat::detector {

struct BlockScheme {
  fp::BlockFormat format;
  int block = 0;
  bool output = false;          // the product quantised too, in blocks along its rows, before the bias
  fp::BlockBug bug = fp::BlockBug::None;
  bool wrongDimension = false;  // blocks along M (a) and N (b) instead of along K
  bool legitimate() const { return bug == fp::BlockBug::None && !wrongDimension; }
  std::string bugName() const;  // "none", "wrong-block", "truncated-scale", "wrong-dim"
};

// True when replaying `s` on the operands gives the candidate `c` [rows, cols], every element within
// the fp32 reordering bound (with the output quantised, at most max(2, rows cols / 1000) elements
// may land one rounding step away, where the replay's sum sits at a rounding midpoint).
bool replaysBlockScheme(const float* c, const GemmBound& b, const BlockScheme& s);

struct BlockMatch {
  BlockScheme scheme;
  std::vector<std::string> alsoReproducedBy;  // other formats with the same block, output and scale rule
};

// The first scheme that reproduces `c`, trying the legitimate ones first (each format at its own
// block size, then at 16, 32, 64 and 128; inputs only, then output too), then the planted mistakes
// (off by one block, truncated scales, blocks along the wrong dimension). Empty when none does, or
// when the GEMM is too large to replay here (m n k > 5e8).
std::optional<BlockMatch> reproducingBlockScheme(const float* c, const GemmBound& b);

// From outputs alone: the block-scaled format whose grid every block of `block` consecutive values
// along each row (of length `cols`) lies on, for a kernel that quantised its output. A block is on
// format f's grid when one scale s puts every value / s exactly on f's element grid within its
// largest magnitude: s = 2^(floor(log2 amax) - emax) for MX (the specification's rule, which the
// quantised amax keeps), and amax / 6 or amax / 4 for NVFP4 (its largest element is 6 or 4). Tries
// mxfp4, then nvfp4 (blocks of 16, scales not powers of two), then the wider MX elements when
// `wideElements`; the largest block size of 128, 64, 32, 16 whose every block fits is reported.
// Empty when the golden output fits too, or fewer than 8 blocks hold a nonzero value.
struct OutputGrid {
  std::string format;
  int block = 0;
};
std::optional<OutputGrid> outputBlockGrid(const float* golden, const float* c, uint64_t n, uint64_t cols,
                                          bool wideElements);

}  // namespace peat::detector
