// SPDX-License-Identifier: MIT
#include "core/save/layer_map.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/save/graph.h"

namespace peat::save {

int64_t LayerMap::tileOf(int64_t element) const {
  return (element / cols / tileRows) * tilesAcross + (element % cols) / tileCols;
}

BitClass LayerMap::bitClass(int64_t element, int bit) const {
  const uint32_t mask = uint32_t(1) << bit;
  if (rangingMask[std::size_t(element)] & mask) return BitClass::Ranging;
  if (robustMask[std::size_t(element)] & mask) return BitClass::Robust;
  return BitClass::Vulnerable;
}

MapElement LayerMap::element(int64_t index) const {
  if (index < 0 || index >= elements())
    throw SaveError("layer " + name + " has no element " + std::to_string(index) + " (it has " +
                    std::to_string(elements()) + ")");
  MapElement e;
  e.index = index;
  const int64_t plane = height * width;
  e.channel = index / plane;
  e.y = (index % plane) / width;
  e.x = index % width;
  e.lo = lo[std::size_t(index)];
  e.hi = hi[std::size_t(index)];
  for (int b = 0; b < 32; ++b) {
    e.bits[std::size_t(b)] = bitClass(index, b);
    e.vulnerableBits += e.bits[std::size_t(b)] == BitClass::Vulnerable;
  }
  e.tile = tileOf(index);
  e.reliable = std::size_t(e.tile) < tileReliable.size() && tileReliable[std::size_t(e.tile)] != 0;
  return e;
}

int64_t LayerMap::indexAt(int64_t channel, int64_t y, int64_t x) const {
  if (channel < 0 || channel >= channels || y < 0 || y >= height || x < 0 || x >= width) return -1;
  return (channel * height + y) * width + x;
}

std::vector<float> LayerMap::values(MapQuantity quantity, int bit) const {
  const std::size_t n = lo.size();
  std::vector<float> out(n);
  if (quantity == MapQuantity::Width) {
    double smallest = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < n; ++i)
      if (hi[i] - lo[i] > 0) smallest = std::min(smallest, hi[i] - lo[i]);
    if (!std::isfinite(smallest)) smallest = 1;
    for (std::size_t i = 0; i < n; ++i) {
      const double w = hi[i] - lo[i];
      out[i] = float(std::log10(std::isfinite(w) ? std::max(w, smallest) : std::numeric_limits<double>::max()));
    }
    return out;
  }
  const uint32_t bitMask = uint32_t(1) << std::clamp(bit, 0, 31);
  for (std::size_t i = 0; i < n; ++i) {
    const uint32_t vulnerable = ~(robustMask[i] | rangingMask[i]);
    switch (quantity) {
      case MapQuantity::VulnerableBits: out[i] = float(__builtin_popcount(vulnerable)); break;
      case MapQuantity::Type: out[i] = vulnerable ? 2.0f : 1.0f; break;
      case MapQuantity::BitClassAt:
        out[i] = (rangingMask[i] & bitMask) ? 1.0f : (robustMask[i] & bitMask) ? 0.0f : 2.0f;
        break;
      case MapQuantity::Width: break;
    }
  }
  return out;
}

LayerMap::Counts LayerMap::counts() const {
  Counts c;
  for (uint8_t r : tileReliable) c.reliableTiles += r != 0;
  double bits = 0;
  for (int64_t i = 0; i < elements(); ++i) {
    const uint32_t vulnerable = ~(robustMask[std::size_t(i)] | rangingMask[std::size_t(i)]);
    const int64_t t = tileOf(i);
    const bool reliable = std::size_t(t) < tileReliable.size() && tileReliable[std::size_t(t)] != 0;
    bits += __builtin_popcount(vulnerable);
    c.type2 += vulnerable != 0;
    c.reliableValues += reliable;
    c.type2InUnreliable += vulnerable != 0 && !reliable;
  }
  c.meanVulnerableBits = elements() ? bits / double(elements()) : 0;
  return c;
}

std::vector<float> LayerMap::vulnerableShareByBitAndChannel() const {
  std::vector<float> out(std::size_t(32 * channels), 0.0f);
  const int64_t plane = height * width;
  for (int64_t c = 0; c < channels; ++c)
    for (int b = 0; b < 32; ++b) {
      const uint32_t mask = uint32_t(1) << b;
      int64_t count = 0;
      for (int64_t i = c * plane; i < (c + 1) * plane; ++i)
        count += !((robustMask[std::size_t(i)] | rangingMask[std::size_t(i)]) & mask);
      out[std::size_t(b * channels + c)] = float(double(count) / double(plane));
    }
  return out;
}

}  // namespace peat::save
