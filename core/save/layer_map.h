// SPDX-License-Identifier: MIT
#pragma once
// The data behind a layer's map (issue 17, item 5): one stored SAVE layer read back per element
// (its range, the bit class of each of its 32 bits, its tile and whether that tile sits in reliable
// memory), laid out as channels of a spatial map, and the quantities a map colours its elements by.
// The workbench's map widget draws what this computes; tools and tests use it without Qt. Read
// from a session by loadLayerMap (core/save/analysis_record.h).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/save/bits.h"


namespace peat::save {

// What a map colours each element by.
enum class MapQuantity {
  VulnerableBits,  // the number of vulnerable bits of the value (0-32)
  Width,           // log10 of the interval's width (hi - lo)
  Type,            // 1: every bit robust or ranging; 2: some bit vulnerable
  BitClassAt,      // the class of one bit position (0 robust, 1 ranging, 2 vulnerable)
};

struct MapElement {
  int64_t index = 0, channel = 0, y = 0, x = 0;
  double lo = 0, hi = 0;
  std::array<BitClass, 32> bits{};  // [bit position] (31: the sign)
  int vulnerableBits = 0;
  int64_t tile = 0;
  bool reliable = false;
};

struct LayerMap {
  std::string analysis, name, op;
  std::vector<int64_t> shape;  // one sample's output as stored ([C, H, W], [T, F] or [F])
  // The layout drawn: `channels` maps of height x width elements, element i at channel i / (h w),
  // row (i % (h w)) / w, column i % w. [C, H, W] gives C maps of H x W; [T, F] one map of T rows
  // (tokens) by F columns; [F] one strip 1 x F.
  int64_t channels = 1, height = 1, width = 1;
  // The tile grid: the tensor seen as [rows, cols] = [C, H W] (or [T, F]), cut into tiles of
  // tileRows x tileCols; tile t = (row / tileRows) * tilesAcross + col / tileCols.
  int64_t rows = 1, cols = 1, tileRows = 1, tileCols = 1, tilesDown = 1, tilesAcross = 1;
  std::vector<double> lo, hi;
  std::vector<uint32_t> robustMask, rangingMask;
  std::vector<uint8_t> tileReliable;  // [tilesDown * tilesAcross]

  int64_t elements() const { return int64_t(lo.size()); }
  int64_t tileOf(int64_t element) const;
  BitClass bitClass(int64_t element, int bit) const;  // the classes are disjoint (core/save/bits.h)
  MapElement element(int64_t index) const;  // throws SaveError when out of range
  // The element drawn at (channel, y, x); -1 outside the tensor.
  int64_t indexAt(int64_t channel, int64_t y, int64_t x) const;
  // One value per element (`bit` only for BitClassAt, 0-31). Width: log10(hi - lo), with widths of
  // 0 (a constant) drawn at the smallest positive width of the layer.
  std::vector<float> values(MapQuantity quantity, int bit = 0) const;
  // Counts over the layer: values with a vulnerable bit, tiles in reliable memory, the mean number
  // of vulnerable bits per value, and the values sitting in reliable tiles.
  struct Counts {
    int64_t type2 = 0, reliableTiles = 0, reliableValues = 0, type2InUnreliable = 0;
    double meanVulnerableBits = 0;
  };
  Counts counts() const;
  // Share of the elements of each channel whose bit b is vulnerable: [32 * channels], bit-major.
  std::vector<float> vulnerableShareByBitAndChannel() const;
};

}  // namespace peat::save
