// SPDX-License-Identifier: MIT
// GPU kernel benchmark: injection cost against buffer size, range check and histograms against a
// device-to-device copy measured in the same run, candidate GEMMs against the golden one. Times are
// device events around the kernel alone (the median of several runs); no Qt, no HDF5.
//
//   bench_gpu --device cuda:0            the sizes: 4 GiB injection target, 256 MiB+ tensors, 4096^3 GEMMs
//   bench_gpu --device cpu --quick       small sizes: a smoke test of every path
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gpu/backend.h"

using namespace peat::gpu;

namespace {

struct Bench {
  Device& d;
  Stream& s;
  int repeats;

  // Median milliseconds of `run`, timed with events on the stream.
  double time(const std::function<void()>& run) {
    run();  // warm-up
    d.synchronize(s);
    std::vector<double> ms;
    auto a = d.createEvent(), b = d.createEvent();
    for (int i = 0; i < repeats; ++i) {
      d.record(*a, s);
      run();
      d.record(*b, s);
      ms.push_back(d.elapsedMs(*a, *b));
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
};

std::unique_ptr<Buffer> filled(Device& d, Stream& s, uint64_t floats, uint32_t seed, float roundMask = 0) {
  auto buf = d.allocate(floats * 4);
  std::vector<float> chunk(std::min<uint64_t>(floats, 1 << 24));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  for (float& x : chunk) x = normal(rng);
  if (roundMask != 0) {  // a candidate: the same values, some rounded to bf16
    std::mt19937 pick(seed + 1);
    for (float& x : chunk)
      if (std::uniform_real_distribution<float>(0, 1)(pick) < roundMask) {
        uint32_t u;
        std::memcpy(&u, &x, 4);
        u &= 0xffff0000u;
        std::memcpy(&x, &u, 4);
      }
  }
  for (uint64_t at = 0; at < floats; at += chunk.size()) {
    const uint64_t n = std::min<uint64_t>(chunk.size(), floats - at);
    d.upload(*buf, at * 4, chunk.data(), n * 4, s);
    d.synchronize(s);
  }
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  std::string spec = "cpu";
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--device" && i + 1 < argc) spec = argv[++i];
    else if (arg == "--quick") quick = true;
    else {
      std::fprintf(stderr, "usage: bench_gpu [--device cpu|cuda:N|hip:N] [--quick]\n");
      return 2;
    }
  }
  OpenedDevice opened;
  try {
    opened = openDevice(spec);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu: error: %s\n", e.what());
    return 1;
  }
  Device& d = *opened.device;
  auto stream = d.createStream();
  Stream& s = *stream;
  const DeviceInfo info = d.info();
  std::printf("device %s:%d  %s, %s, %.1f GiB\n", info.backend.c_str(), info.index, info.name.c_str(), info.arch.c_str(),
              double(info.totalMemory) / (1u << 30));
  Bench bench{d, s, quick ? 3 : 9};
  try {
    // --- injection: 1 M flips, cost against buffer size --------------------------------------------
    const uint64_t flipsWanted = quick ? (1 << 16) : (1 << 20);
    std::printf("\ninjection of %llu single-bit flips (kernel only; the list is prepared once)\n",
                static_cast<unsigned long long>(flipsWanted));
    for (uint64_t bytes : quick ? std::vector<uint64_t>{16ull << 20, 64ull << 20}
                                : std::vector<uint64_t>{256ull << 20, 4ull << 30}) {
      auto words = d.allocate(bytes);
      std::mt19937_64 rng(1);
      std::vector<BitFlip> flips(flipsWanted);
      for (BitFlip& f : flips) f = {rng() % (bytes / 4), uint32_t(1) << (rng() % 32)};
      const FlipList list = d.prepareFlips(flips, s);
      d.synchronize(s);
      const double ms = bench.time([&] { d.applyFlips(*words, list, s); });
      std::printf("  into %8.0f MiB: %8.3f ms\n", double(bytes) / (1 << 20), ms);
    }

    // --- bandwidth: copy, range check, histograms ----------------------------------------------------
    const uint64_t n = quick ? (4ull << 20) : (64ull << 20);  // floats: 16 MiB or 256 MiB per tensor
    const double mib = double(n * 4) / (1 << 20);
    auto g = filled(d, s, n, 1), c = filled(d, s, n, 1, 0.5f), c1 = filled(d, s, n, 1, 0.01f);
    auto lo = filled(d, s, n, 2), hi = filled(d, s, n, 3), scratch = d.allocate(n * 4);
    auto range = d.allocate(kRangeResultBytes), hist = d.allocate(kHistogramWords * 8);
    const auto gbps = [](double bytes, double ms) { return bytes / ms / 1e6; };
    const double copyMs = bench.time([&] { d.copy(*scratch, *g, n * 4, s); });
    const double copyGBs = gbps(2.0 * double(n) * 4, copyMs);  // read + write
    std::printf("\nbandwidth on %.0f MiB tensors (bytes moved / time; ratio to the device-to-device copy)\n", mib);
    std::printf("  %-34s %8.3f ms %9.1f GB/s   1.00\n", "copy (read + write)", copyMs, copyGBs);
    const auto row = [&](const char* name, double bytes, double ms) {
      std::printf("  %-34s %8.3f ms %9.1f GB/s   %.2f\n", name, ms, gbps(bytes, ms), gbps(bytes, ms) / copyGBs);
    };
    row("range check, one interval", double(n) * 4, bench.time([&] { d.rangeCheck(*g, n, {nullptr, nullptr, -4, 4}, *range, s); }));
    row("range check, per-element bounds", 3.0 * double(n) * 4,
        bench.time([&] { d.rangeCheck(*g, n, {lo.get(), hi.get()}, *range, s); }));
    row("histograms, 1% of pairs differ", 2.0 * double(n) * 4, bench.time([&] { d.histograms(*g, *c1, n, *hist, s); }));
    row("histograms, 50% of pairs differ", 2.0 * double(n) * 4, bench.time([&] { d.histograms(*g, *c, n, *hist, s); }));
    const ErrorHistograms h = readHistograms(d, *hist, s);
    std::printf("  (the 50%% pair: %llu of %llu mismatched)\n", static_cast<unsigned long long>(h.mismatched),
                static_cast<unsigned long long>(n));

    // --- GEMMs ------------------------------------------------------------------------------------
    const uint64_t dim = quick ? 128 : 4096;
    const GemmShape shape{dim, dim, dim, 4};
    auto a = filled(d, s, dim * dim, 4), b = filled(d, s, dim * dim, 5), out = d.allocate(dim * dim * 4);
    const double flop = 2.0 * double(dim) * double(dim) * double(dim);
    std::printf("\nGEMM %llu x %llu x %llu fp32 (TFLOP/s; ratio to golden)\n", static_cast<unsigned long long>(dim),
                static_cast<unsigned long long>(dim), static_cast<unsigned long long>(dim));
    Bench gemmBench{d, s, quick ? 1 : 3};
    double golden = 0;
    for (GemmKind kind : gemmKinds()) {
      const double ms = gemmBench.time([&] { d.gemm(kind, shape, *a, *b, *out, s); });
      const double tflops = flop / ms / 1e9;
      if (kind == GemmKind::Golden) golden = tflops;
      std::printf("  %-10s %10.3f ms %9.3f TFLOP/s   %.3f\n", gemmName(kind), ms, tflops, tflops / golden);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
