// SPDX-License-Identifier: MIT
#pragma once
// Launch geometry shared by the device backends (gpu/device/device_backend.inc) and the host
// launcher that runs the same kernels on the CPU (gpu/device/host_emulation.h): plain host C++.
#include <algorithm>
#include <cstdint>

namespace peat::gpu {

// Blocks for a grid-stride loop over `work` items: enough to fill the device, no more than needed.
inline unsigned blocksFor(uint64_t work, unsigned threads, int multiprocessors) {
  const uint64_t needed = (work + threads - 1) / threads;
  const uint64_t fill = uint64_t(std::max(multiprocessors, 1)) * 8;
  return unsigned(std::max<uint64_t>(1, std::min<uint64_t>({needed, fill, 65535})));
}

// Blocks of the histogram kernel: as blocksFor, and enough that no block's 32-bit shared counters
// see 2^31 elements.
inline unsigned histogramBlocks(uint64_t n, unsigned threads, int multiprocessors) {
  return std::max<unsigned>(blocksFor(std::max<uint64_t>(n / 4, 1), threads, multiprocessors), unsigned(n >> 30) + 1);
}

// The tiled GEMM's grid: one 16 x 16 block per output tile, x across the columns (N), y down the rows (M).
struct TileGrid {
  unsigned across = 0, down = 0;
};
inline TileGrid tiledGemmGrid(uint64_t m, uint64_t n, unsigned tile) {
  return {unsigned((n + tile - 1) / tile), unsigned((m + tile - 1) / tile)};
}

}  // namespace peat::gpu
