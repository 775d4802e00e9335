// SPDX-License-Identifier: MIT
// The device kernels' own code on the CPU: gpu/device/kernels.h compiled by g++ through the host
// dialect (gpu/device/host_emulation.h: blocks in turn, a block's threads as fibers that meet at
// __syncthreads), launched with the device backends' geometry (gpu/device/launch.h) and with odd
// geometries, and compared with the independent CPU reference (gpu/cpu/reference.h) bit for bit:
// injection, stuck-at, both range checks, the histograms, and the naive, tiled, split-K,
// half-input, tile-edge and double GEMMs, on sizes that are not multiples of the tile or of four.
// (The tensor-core GEMM is CUDA only and is tested on a device.)
#define PEAT_DEVICE_HOST 1
#include "gpu/device/kernels.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu/backend.h"
#include "gpu/cpu/reference.h"
#include "gpu/device/launch.h"

using namespace peat::gpu;
namespace k = peat::gpu::kernels;

namespace {

int failures = 0, checks = 0;

#define EXPECT(cond, ...)                                                 \
  do {                                                                    \
    ++checks;                                                             \
    if (!(cond)) {                                                        \
      ++failures;                                                         \
      std::fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                  \
      std::fprintf(stderr, "\n");                                         \
    }                                                                     \
  } while (0)

// Launch geometries: what the device backends use on a device of 132 SMs (an H100/H200) and of 2,
// and odd ones (one thread, one block, a block of 33).
struct Geometry {
  std::string name;
  unsigned threads;
  int sms;
  unsigned forcedBlocks = 0;  // > 0: this many blocks whatever the work
};
const std::vector<Geometry>& geometries() {
  static const std::vector<Geometry> g = {{"device 132 SMs", 256, 132}, {"device 2 SMs", 256, 2},
                                          {"1 x 33", 33, 1, 1},         {"7 x 1", 1, 1, 7}};
  return g;
}
unsigned blocksOf(const Geometry& g, uint64_t work) { return g.forcedBlocks ? g.forcedBlocks : blocksFor(work, g.threads, g.sms); }

std::vector<uint32_t> randomWords(std::size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> w(n);
  for (uint32_t& x : w) x = uint32_t(rng());
  return w;
}

std::vector<float> randomFloats(std::size_t n, uint64_t seed, float scale = 1) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

void testInjection() {
  for (const Geometry& g : geometries())
    for (const uint64_t count : {uint64_t(0), uint64_t(1), uint64_t(4999)}) {
      std::vector<uint32_t> words = randomWords(10007, 1), want = words;
      std::mt19937_64 rng(count + 3);
      std::vector<BitFlip> flips(count);
      for (BitFlip& f : flips) f = {rng() % 300, uint32_t(1) << (rng() % 32)};  // many repeats of each word
      reference::injectBitFlips(want.data(), flips);
      std::vector<k::DeviceFlip> device(count);
      for (uint64_t i = 0; i < count; ++i) device[i] = {flips[i].index, flips[i].mask, 0};
      host::launch(dim3(blocksOf(g, count)), dim3(g.threads), [&] { k::sparseBitFlip(words.data(), device.data(), count); });
      EXPECT(words == want, "sparseBitFlip, %llu flips, %s", (unsigned long long)count, g.name.c_str());
    }
}

void testStuckAt() {
  for (const Geometry& g : geometries())
    for (const bool value : {false, true}) {
      std::vector<uint32_t> words = randomWords(5003, 2), want = words;
      const StuckAt region{17, 4001, 0x80400001u, value};
      reference::stuckAt(want.data(), region);
      host::launch(dim3(blocksOf(g, region.count)), dim3(g.threads),
                   [&] { k::stuckAt(words.data(), region.first, region.count, region.mask, value ? 1 : 0); });
      EXPECT(words == want, "stuckAt value %d, %s", int(value), g.name.c_str());
    }
}

void testRangeCheck() {
  for (const Geometry& g : geometries())
    for (const uint64_t n : {uint64_t(1), uint64_t(3), uint64_t(4), uint64_t(1001), uint64_t(40003)})
      for (const bool perElement : {false, true}) {
        std::vector<float> v = randomFloats(n, n), lo(n), hi(n);
        for (uint64_t i = 0; i < n; ++i) {
          lo[i] = -2.0f - float(i % 5);
          hi[i] = 2.0f + float(i % 3);
        }
        // violations in the vectorised part and in the tail, a NaN, a bound itself (allowed)
        if (n > 2) v[n - 1] = 100.0f, v[n / 2] = std::nanf(""), v[1] = perElement ? hi[1] : 2.0f;
        if (n > 1000) v[777] = -50.0f, v[n - 2] = 3e38f;
        const RangeCheckResult want = reference::rangeCheck(v.data(), n, perElement ? lo.data() : nullptr,
                                                            perElement ? hi.data() : nullptr, -2.0f, 2.0f);
        k::u64 result[2];
        host::launch(dim3(1), dim3(1), [&] { k::initRangeResult(result); });
        const unsigned blocks = blocksOf(g, std::max<uint64_t>(n / 4, 1));
        const uint64_t barriers = host::launch(dim3(blocks), dim3(g.threads), [&] {
          if (perElement)
            k::rangeCheck<true>(v.data(), n, lo.data(), hi.data(), 0.f, 0.f, result);
          else
            k::rangeCheck<false>(v.data(), n, nullptr, nullptr, -2.0f, 2.0f, result);
        });
        EXPECT(result[0] == want.violations && result[1] == want.firstIndex,
               "rangeCheck n %llu per-element %d, %s: %llu violations from %llu, want %llu from %llu",
               (unsigned long long)n, int(perElement), g.name.c_str(), result[0], result[1],
               (unsigned long long)want.violations, (unsigned long long)want.firstIndex);
        EXPECT(barriers == 2ull * blocks, "rangeCheck passed %llu barriers in %u blocks", (unsigned long long)barriers, blocks);
      }
}

void testHistograms() {
  for (const Geometry& g : geometries())
    for (const uint64_t n : {uint64_t(5), uint64_t(4096), uint64_t(30001)}) {
      const std::vector<float> golden = randomFloats(n, 7, 3);
      std::vector<float> candidate = golden;
      std::mt19937_64 rng(n);
      for (uint64_t i = 0; i < n; ++i) {  // rounding-sized errors, flipped bits, specials
        uint32_t b;
        std::memcpy(&b, &candidate[i], 4);
        switch (rng() % 6) {
          case 0: b += 1 + uint32_t(rng() % 300); break;
          case 1: b ^= uint32_t(1) << (rng() % 32); break;
          case 2: b = rng() % 2 ? 0x7fc00000u : 0x7f800000u; break;
          default: break;  // equal
        }
        std::memcpy(&candidate[i], &b, 4);
      }
      const ErrorHistograms want = reference::histograms(golden.data(), candidate.data(), n);
      std::vector<k::u64> words(kHistogramWords, 0);
      const uint64_t barriers = host::launch(dim3(g.forcedBlocks ? g.forcedBlocks : histogramBlocks(n, g.threads, g.sms)), dim3(g.threads), [&] {
        k::errorHistograms(reinterpret_cast<const unsigned int*>(golden.data()),
                           reinterpret_cast<const unsigned int*>(candidate.data()), n, words.data());
      });
      ErrorHistograms got;
      got.mismatched = words[0];
      std::copy(words.begin() + kHistBitsAt, words.begin() + kHistUlpAt, got.bits.begin());
      std::copy(words.begin() + kHistUlpAt, words.begin() + kHistAbsAt, got.log2Ulp.begin());
      std::copy(words.begin() + kHistAbsAt, words.end(), got.log2Abs.begin());
      EXPECT(got == want && want.mismatched > 0, "errorHistograms n %llu, %s: %llu mismatched, want %llu", (unsigned long long)n,
             g.name.c_str(), (unsigned long long)got.mismatched, (unsigned long long)want.mismatched);
      EXPECT(barriers > 0, "errorHistograms never synchronised");
    }
}

bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void testGemms() {
  const GemmShape shapes[] = {{1, 1, 1, 4}, {16, 16, 16, 4}, {37, 53, 29, 4}, {33, 17, 70, 3}, {5, 40, 7, 5}};
  for (const GemmShape& s : shapes) {
    const std::vector<float> a = randomFloats(s.m * s.k, s.m + 11), b = randomFloats(s.k * s.n, s.n + 13);
    auto reference = [&](GemmKind kind) {
      std::vector<float> c(s.m * s.n);
      reference::gemm(kind, s, a.data(), b.data(), c.data());
      return c;
    };
    const std::string shape = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
    for (const Geometry& g : geometries()) {
      std::vector<float> c(s.m * s.n, -1.0f);
      for (const auto& [kind, edge, half] : {std::tuple{GemmKind::Naive, 0, 0}, std::tuple{GemmKind::TileEdge, 1, 0},
                                             std::tuple{GemmKind::HalfInputs, 0, 1}}) {
        host::launch(dim3(blocksOf(g, s.m * s.n)), dim3(g.threads),
                     [&] { k::gemmNaive(a.data(), b.data(), c.data(), s.m, s.n, s.k, edge, half); });
        EXPECT(sameBits(c, reference(kind)), "gemmNaive (%s) %s, %s", gemmName(kind), shape.c_str(), g.name.c_str());
      }
      const uint64_t parts = uint64_t(s.parts);
      std::vector<float> partial(parts * s.m * s.n);
      host::launch(dim3(blocksOf(g, parts * s.m * s.n)), dim3(g.threads),
                   [&] { k::gemmSplitKPartial(a.data(), b.data(), partial.data(), s.m, s.n, s.k, parts); });
      host::launch(dim3(blocksOf(g, s.m * s.n)), dim3(g.threads), [&] { k::gemmSplitKReduce(partial.data(), c.data(), s.m * s.n, parts); });
      EXPECT(sameBits(c, reference(GemmKind::SplitK)), "split-K (%llu parts) %s, %s", (unsigned long long)parts, shape.c_str(),
             g.name.c_str());
      host::launch(dim3(blocksOf(g, s.m * s.n)), dim3(g.threads), [&] { k::gemmDouble(a.data(), b.data(), c.data(), s.m, s.n, s.k); });
      EXPECT(sameBits(c, reference(GemmKind::Golden)), "gemmDouble %s, %s", shape.c_str(), g.name.c_str());
    }
    // the tiled GEMM with the backends' grid: 16 x 16 threads per output tile, meeting at barriers
    std::vector<float> c(s.m * s.n, -1.0f);
    const TileGrid tiles = tiledGemmGrid(s.m, s.n, k::kTile);
    const uint64_t barriers = host::launch(dim3(tiles.across, tiles.down), dim3(k::kTile, k::kTile),
                                           [&] { k::gemmTiled(a.data(), b.data(), c.data(), s.m, s.n, s.k); });
    EXPECT(sameBits(c, reference(GemmKind::Tiled)), "gemmTiled %s", shape.c_str());
    const uint64_t kTiles = (s.k + k::kTile - 1) / k::kTile;
    EXPECT(barriers == 2 * kTiles * tiles.across * tiles.down, "gemmTiled %s passed %llu barriers", shape.c_str(),
           (unsigned long long)barriers);
  }
}

// The launch geometry itself: grid-stride loops cover any work with these blocks.
void testGeometry() {
  EXPECT(blocksFor(0, 256, 132) == 1, "no work still launches one block");
  EXPECT(blocksFor(1000, 256, 132) == 4, "1000 items in blocks of 256");
  EXPECT(blocksFor(uint64_t(1) << 40, 256, 132) == 132 * 8, "fills the device, no more");
  EXPECT(histogramBlocks(uint64_t(100) << 30, 256, 1) == 101, "no block's 32-bit counters see 2^31 elements");
  const TileGrid t = tiledGemmGrid(33, 17, 16);
  EXPECT(t.across == 2 && t.down == 3, "a 33 x 17 output needs 2 x 3 tiles");
}

}  // namespace

int main() {
  testGeometry();
  testInjection();
  testStuckAt();
  testRangeCheck();
  testHistograms();
  testGemms();
  std::printf("host-compiled kernels against the reference: %d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
