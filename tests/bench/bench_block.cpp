// SPDX-License-Identifier: MIT
// Issue 21's speed target: quantising a 4096 x 4096 fp32 matrix to MXFP4 and back (core/fp/block.h,
// in place, blocks of 32 along the rows) against one read-and-write pass over the same matrix, both on
// one core. Quantising values already on the grid does the same work as the first time (every
// element is scaled, encoded, decoded and stored), so the matrix is not restored between iterations.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <vector>

#include "core/fp/block.h"

namespace {

constexpr int64_t kSide = 4096;

std::vector<float>& matrix() {
  static std::vector<float> m = [] {
    std::vector<float> v(std::size_t(kSide * kSide));
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& x : v) x = normal(rng);
    return v;
  }();
  return m;
}

void BM_ReadWritePass(benchmark::State& state) {
  std::vector<float>& m = matrix();
  for (auto _ : state) {
    for (float& x : m) x = -x;  // read and write every element once
    benchmark::DoNotOptimize(m.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * kSide * kSide * 8);
}

void quantiseAll(benchmark::State& state, const peat::fp::BlockFormat& f) {
  std::vector<float>& m = matrix();
  for (auto _ : state) {
    for (int64_t r = 0; r < kSide; ++r) peat::fp::quantizeBlocks(f, m.data() + r * kSide, uint64_t(kSide));
    benchmark::DoNotOptimize(m.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * kSide * kSide * 8);
}

void BM_Mxfp4RoundTrip(benchmark::State& state) { quantiseAll(state, peat::fp::kMxfp4); }
void BM_Nvfp4RoundTrip(benchmark::State& state) { quantiseAll(state, peat::fp::kNvfp4); }
void BM_Mxfp8E4m3RoundTrip(benchmark::State& state) { quantiseAll(state, peat::fp::kMxfp8E4m3); }

}  // namespace

BENCHMARK(BM_ReadWritePass)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_Mxfp4RoundTrip)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_Nvfp4RoundTrip)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_Mxfp8E4m3RoundTrip)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_MAIN();
