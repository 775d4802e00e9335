// SPDX-License-Identifier: MIT
// Backend conformance: every kernel of a device against the CPU reference (gpu/cpu/reference.h),
// bit for bit where the math is identical (injection, stuck-at, range check, histograms, and the
// GEMMs whose sums are specified), against the documented error bounds where it is not (tensor-core
// and vendor GEMMs), plus the bad input every backend must refuse the same way.
//
// No Qt and no HDF5: it builds on the GPU machine from gpu/ alone (tools/gpu-check.sh).
//   gpu_tests                 cpu:0 and every device found
//   gpu_tests --device cuda:0 that device only; exit 77 (skip) when this machine has no such
//                             device, 1 (failure, with the reason) when it has one (the driver's
//                             device node is there, or PEAT_EXPECT_DEVICE=1) but it cannot be opened
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gpu/backend.h"
#include "gpu/cpu/reference.h"
#include "gpu/device/math.h"

using namespace peat::gpu;

namespace {

int failures = 0, checksRun = 0;
std::string current;

#define EXPECT(cond)                                                                                  \
  do {                                                                                                \
    ++checksRun;                                                                                      \
    if (!(cond)) {                                                                                    \
      ++failures;                                                                                     \
      std::fprintf(stderr, "FAIL %s: %s (%s:%d)\n", current.c_str(), #cond, __FILE__, __LINE__);       \
    }                                                                                                 \
  } while (0)

template <class E, class F>
bool throws(F&& f, const char* needle = nullptr) {
  try {
    f();
  } catch (const E& e) {
    return !needle || std::strstr(e.what(), needle) != nullptr;
  } catch (...) {
    return false;
  }
  return false;
}

using math::bitsOf;
using math::floatOf;

struct Harness {
  Device& d;
  std::unique_ptr<Stream> s = d.createStream();

  template <class T>
  std::unique_ptr<Buffer> put(const std::vector<T>& v) {
    auto b = d.allocate(v.size() * sizeof(T));
    d.upload(*b, 0, v.data(), v.size() * sizeof(T), *s);
    d.synchronize(*s);
    return b;
  }
  template <class T>
  std::vector<T> get(const Buffer& b, std::size_t n) {
    std::vector<T> v(n);
    d.download(v.data(), b, 0, n * sizeof(T), *s);
    d.synchronize(*s);
    return v;
  }
};

void testInjection(Harness& h) {
  current = "injection";
  std::mt19937_64 rng(7);
  std::vector<uint32_t> words((1 << 20) + 3);
  for (uint32_t& w : words) w = uint32_t(rng());
  std::vector<BitFlip> flips(100000);
  for (BitFlip& f : flips) f = {rng() % 4096, uint32_t(1) << (rng() % 32)};  // many repeats: the atomics
  flips.push_back({words.size() - 1, 0xffffffffu});
  auto buf = h.put(words);
  std::vector<uint32_t> expected = words;
  reference::injectBitFlips(expected.data(), flips);
  h.d.injectBitFlips(*buf, flips, *h.s);
  EXPECT(h.get<uint32_t>(*buf, words.size()) == expected);

  // a prepared list applied twice cancels out
  const FlipList list = h.d.prepareFlips(flips, *h.s);
  h.d.applyFlips(*buf, list, *h.s);
  h.d.applyFlips(*buf, list, *h.s);
  EXPECT(h.get<uint32_t>(*buf, words.size()) == expected);

  // out of range: refused, nothing applied
  std::vector<BitFlip> bad{{0, 1}, {words.size(), 1}};
  EXPECT(throws<std::out_of_range>([&] { h.d.injectBitFlips(*buf, bad, *h.s); }, "outside the buffer"));
  const FlipList badList = h.d.prepareFlips(bad, *h.s);
  EXPECT(throws<std::out_of_range>([&] { h.d.applyFlips(*buf, badList, *h.s); }));
  EXPECT(h.get<uint32_t>(*buf, words.size()) == expected);
  // a buffer that is not whole words
  auto odd = h.d.allocate(10);
  EXPECT(throws<std::invalid_argument>([&] { h.d.injectBitFlips(*odd, {{0, 1}}, *h.s); }, "not whole 32-bit words"));
}

void testStuckAt(Harness& h) {
  current = "stuck-at";
  std::mt19937 rng(3);
  std::vector<uint32_t> words(100003);
  for (uint32_t& w : words) w = rng();
  auto buf = h.put(words);
  std::vector<uint32_t> expected = words;
  const StuckAt one{1000, 5001, 0x40000000u, true}, zero{70000, 30003, 0x00000101u, false};
  reference::stuckAt(expected.data(), one);
  reference::stuckAt(expected.data(), zero);
  h.d.stuckAt(*buf, one, *h.s);
  h.d.stuckAt(*buf, zero, *h.s);
  EXPECT(h.get<uint32_t>(*buf, words.size()) == expected);
  EXPECT(throws<std::out_of_range>([&] { h.d.stuckAt(*buf, {words.size() - 2, 3, 1, true}, *h.s); }));
  EXPECT(throws<std::out_of_range>([&] { h.d.stuckAt(*buf, {2, UINT64_MAX, 1, true}, *h.s); }));  // overflow
  EXPECT(h.get<uint32_t>(*buf, words.size()) == expected);
}

void testRangeCheck(Harness& h) {
  current = "range check";
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  const std::size_t n = 1000003;  // not a multiple of 4: the tail path
  std::vector<float> v(n), lo(n), hi(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = u(rng);
    lo[i] = v[i] - 0.25f * std::fabs(u(rng));
    hi[i] = v[i] + 0.25f * std::fabs(u(rng));
  }
  auto result = h.d.allocate(kRangeResultBytes);
  auto check = [&](const std::vector<float>& values, bool perElement, float low, float high) {
    auto vb = h.put(values), lb = h.put(lo), hb = h.put(hi);
    RangeBounds bounds{perElement ? lb.get() : nullptr, perElement ? hb.get() : nullptr, low, high};
    h.d.rangeCheck(*vb, values.size(), bounds, *result, *h.s);
    const RangeCheckResult got = readRangeResult(h.d, *result, *h.s);
    const RangeCheckResult want = reference::rangeCheck(values.data(), values.size(), perElement ? lo.data() : nullptr,
                                                        perElement ? hi.data() : nullptr, low, high);
    EXPECT(got.violations == want.violations);
    EXPECT(got.firstIndex == want.firstIndex);
    return want;
  };
  EXPECT(check(v, true, 0, 0).violations == 0);  // every value inside its own bounds
  EXPECT(check(v, true, 0, 0).firstIndex == UINT64_MAX);
  std::vector<float> faulty = v;
  for (std::size_t i : {std::size_t(777777), std::size_t(12), std::size_t(n - 1), std::size_t(500000)})
    faulty[i] = floatOf(bitsOf(faulty[i]) ^ (1u << 30));  // an exponent flip leaves the range
  faulty[31337] = std::numeric_limits<float>::quiet_NaN();
  const RangeCheckResult r = check(faulty, true, 0, 0);
  EXPECT(r.violations == 5);
  EXPECT(r.firstIndex == 12);
  EXPECT(check(faulty, false, -0.5f, 0.5f).violations > 400000);  // one interval for all
  // bounds of the wrong size, one bound alone
  auto shortBound = h.d.allocate(8);
  auto vb = h.put(v);
  EXPECT(throws<std::invalid_argument>([&] { h.d.rangeCheck(*vb, n, {shortBound.get(), shortBound.get()}, *result, *h.s); }));
  EXPECT(throws<std::invalid_argument>([&] { h.d.rangeCheck(*vb, n, {vb.get(), nullptr}, *result, *h.s); }));
  EXPECT(throws<std::invalid_argument>([&] { h.d.rangeCheck(*vb, n + 1, {}, *result, *h.s); }));
}

void testHistograms(Harness& h) {
  current = "histograms";
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0, 3);
  const std::size_t n = (1 << 20) + 1;
  std::vector<float> g(n), c(n);
  for (std::size_t i = 0; i < n; ++i) {
    g[i] = normal(rng);
    switch (i % 7) {
      case 0: c[i] = g[i]; break;                                              // identical
      case 1: c[i] = floatOf(bitsOf(g[i]) & 0xffff0000u); break;               // bf16 truncation
      case 2: c[i] = floatOf(bitsOf(g[i]) ^ (1u << (rng() % 32))); break;      // one bit
      case 3: c[i] = g[i] * (1 + 1e-6f); break;
      case 4: c[i] = -g[i]; break;
      default: c[i] = g[i] + normal(rng); break;
    }
  }
  // the special values: NaN, Inf, signed zeros, subnormals, the extremes
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float specials[][2] = {{0.f, -0.f}, {nan, 1.f}, {1.f, nan}, {inf, 1.f}, {1.f, -inf}, {inf, -inf},
                               {1e-45f, 0.f}, {1e-45f, -1e-45f}, {3.4e38f, -3.4e38f}, {1e-40f, 2e-40f}, {nan, nan}};
  for (std::size_t k = 0; k < std::size(specials); ++k) {
    g[n - 1 - k] = specials[k][0];
    c[n - 1 - k] = specials[k][1];
  }
  auto gb = h.put(g), cb = h.put(c);
  auto result = h.d.allocate(kHistogramWords * 8);
  h.d.histograms(*gb, *cb, n, *result, *h.s);
  const ErrorHistograms got = readHistograms(h.d, *result, *h.s);
  const ErrorHistograms want = reference::histograms(g.data(), c.data(), n);
  EXPECT(got == want);
  EXPECT(want.mismatched > n / 2);
  EXPECT(want.log2Ulp[31] > 0);  // a sign flip of a large value is more than 2^31 ULPs away
  // a second pass clears the counters first
  h.d.histograms(*gb, *gb, n, *result, *h.s);
  EXPECT(readHistograms(h.d, *result, *h.s) == ErrorHistograms{});
  auto shortCandidate = h.d.allocate(4 * (n - 1));
  EXPECT(throws<std::invalid_argument>([&] { h.d.histograms(*gb, *shortCandidate, n, *result, *h.s); }, "candidate"));
  auto smallResult = h.d.allocate(16);
  EXPECT(throws<std::invalid_argument>([&] { h.d.histograms(*gb, *cb, n, *smallResult, *h.s); }));
}

void testGemms(Harness& h, bool cuda) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> u(-2, 2);
  for (const GemmShape& shape : {GemmShape{67, 45, 129, 4}, GemmShape{128, 96, 512, 7}, GemmShape{1, 17, 3, 3}}) {
    std::vector<float> a(shape.m * shape.k), b(shape.k * shape.n);
    for (float& x : a) x = u(rng);
    for (float& x : b) x = u(rng);
    std::vector<double> exact, magnitude;
    reference::gemmExact(shape, a.data(), b.data(), exact, magnitude);
    auto ab = h.put(a), bb = h.put(b);
    auto cb = h.d.allocate(shape.m * shape.n * 4);
    for (GemmKind kind : gemmKinds()) {
      current = std::string("GEMM ") + gemmName(kind) + " " + std::to_string(shape.m) + "x" + std::to_string(shape.n) +
                "x" + std::to_string(shape.k);
      h.d.gemm(kind, shape, *ab, *bb, *cb, *h.s);
      const std::vector<float> got = h.get<float>(*cb, shape.m * shape.n);
      std::vector<float> want(got.size());
      reference::gemm(kind, shape, a.data(), b.data(), want.data());
      // sums the reference specifies exactly: bit for bit (tensor cores and cuBLAS choose their own)
      const bool specified = !(cuda && (kind == GemmKind::HalfInputs || kind == GemmKind::Golden));
      if (specified) EXPECT(std::memcmp(got.data(), want.data(), got.size() * 4) == 0);
      const double factor = reference::gemmBoundFactor(kind, shape.k);
      std::size_t outside = 0, planted = 0;
      for (uint64_t i = 0; i < shape.m; ++i)
        for (uint64_t j = 0; j < shape.n; ++j) {
          const std::size_t e = i * shape.n + j;
          const bool isPlanted = j % 16 == 15 && j + 1 < shape.n;
          planted += isPlanted;
          if (kind == GemmKind::TileEdge && isPlanted) continue;
          const double bound = (kind == GemmKind::TileEdge ? reference::gemmBoundFactor(GemmKind::Naive, shape.k) : factor) *
                               magnitude[e];
          outside += std::fabs(double(got[e]) - exact[e]) > bound;
        }
      EXPECT(outside == 0);  // within the documented bound (TileEdge: away from its planted columns)
      if (kind == GemmKind::TileEdge && planted) {
        // the planted columns are wrong by far more than any rounding
        std::size_t wrong = 0;
        for (uint64_t i = 0; i < shape.m; ++i)
          for (uint64_t j = 15; j + 1 < shape.n; j += 16)
            wrong += std::fabs(double(got[i * shape.n + j]) - exact[i * shape.n + j]) >
                     100 * reference::gemmBoundFactor(GemmKind::Naive, shape.k) * magnitude[i * shape.n + j];
        EXPECT(wrong > planted * 9 / 10);
      }
    }
  }
  current = "GEMM bad input";
  auto small = h.d.allocate(16);
  EXPECT(throws<std::invalid_argument>([&] { h.d.gemm(GemmKind::Naive, {4, 4, 4}, *small, *small, *small, *h.s); }));
  auto big = h.d.allocate(64 * 4), big2 = h.d.allocate(64 * 4);
  EXPECT(throws<std::invalid_argument>([&] { h.d.gemm(GemmKind::SplitK, {4, 4, 4, 5}, *big, *big, *big2, *h.s); }, "split-K"));
  EXPECT(throws<std::invalid_argument>([&] { h.d.gemm(GemmKind::Naive, {4, 4, 4}, *big, *big2, *big, *h.s); }, "alias"));
  EXPECT(throws<std::invalid_argument>([&] { h.d.gemm(GemmKind::Naive, {0, 4, 4}, *big, *big, *small, *h.s); }));
}

void testMemoryAndBuffers(Harness& h, Backend& backend, int index) {
  current = "memory";
  const uint64_t total = h.d.info().totalMemory;
  EXPECT(total > 0);
  EXPECT(throws<OutOfDeviceMemory>([&] { h.d.allocate(total * 4); }, "out of"));
  // still usable afterwards
  auto after = h.d.allocate(1 << 20);
  std::vector<uint32_t> zeros(1 << 18, 0);
  h.d.upload(*after, 0, zeros.data(), zeros.size() * 4, *h.s);
  h.d.stuckAt(*after, {0, zeros.size(), 1u, true}, *h.s);
  EXPECT(h.get<uint32_t>(*after, 4) == std::vector<uint32_t>(4, 1u));
  // copies: inside the buffer only; device-to-device
  EXPECT(throws<std::invalid_argument>([&] { h.d.upload(*after, (1 << 20) - 2, zeros.data(), 4, *h.s); }, "outside"));
  EXPECT(throws<std::invalid_argument>([&] { h.d.upload(*after, UINT64_MAX, zeros.data(), 4, *h.s); }));
  auto copy = h.d.allocate(1 << 20);
  h.d.copy(*copy, *after, 1 << 20, *h.s);
  EXPECT(h.get<uint32_t>(*copy, 4) == std::vector<uint32_t>(4, 1u));
  // a buffer of another device (another instance, even of the same GPU) is refused
  current = "foreign buffer";
  auto other = backend.open(index);
  auto foreign = other->allocate(1 << 20);
  EXPECT(throws<std::invalid_argument>([&] { h.d.copy(*copy, *foreign, 16, *h.s); }, "another device"));
  EXPECT(throws<std::invalid_argument>([&] { h.d.injectBitFlips(*foreign, {{0, 1}}, *h.s); }, "another device"));
  // events
  current = "events";
  auto start = h.d.createEvent(), end = h.d.createEvent();
  h.d.record(*start, *h.s);
  h.d.copy(*copy, *after, 1 << 20, *h.s);
  h.d.record(*end, *h.s);
  EXPECT(h.d.elapsedMs(*start, *end) >= 0);
}

void runOn(Backend& backend, int index) {
  auto device = backend.open(index);
  const DeviceInfo info = device->info();
  std::printf("%s:%d  %s, %s, %.0f MiB\n", info.backend.c_str(), index, info.name.c_str(), info.arch.c_str(),
              double(info.totalMemory) / (1 << 20));
  const int before = failures;
  Harness h{*device};
  const std::function<void()> cases[] = {
      [&] { testInjection(h); },       [&] { testStuckAt(h); },
      [&] { testRangeCheck(h); },      [&] { testHistograms(h); },
      [&] { testGemms(h, info.backend == "cuda"); }, [&] { testMemoryAndBuffers(h, backend, index); }};
  for (const auto& run : cases) {
    try {
      run();
    } catch (const std::exception& e) {
      ++failures;
      std::fprintf(stderr, "FAIL %s: threw %s\n", current.c_str(), e.what());
    }
  }
  std::printf("  %s\n", failures == before ? "all kernels match the reference" : "FAILED");
}

// The driver's sign that this machine has the device `spec` names, or "" when it has none: then a
// module that does not load only means the device is absent; otherwise it is a failure.
std::string visibleDevice(const std::string& spec) {
  const char* expect = std::getenv("PEAT_EXPECT_DEVICE");
  if (expect && std::string(expect) == "1") return "PEAT_EXPECT_DEVICE=1";
  const std::size_t colon = spec.find(':');
  const std::string index = colon == std::string::npos ? "0" : spec.substr(colon + 1);
  if (spec.rfind("cuda", 0) == 0) {
    const std::string node = "/dev/nvidia" + index;
    if (::access(node.c_str(), F_OK) == 0) return node;
  }
  if (spec.rfind("hip", 0) == 0 && ::access("/dev/kfd", F_OK) == 0) return "/dev/kfd";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> specs;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--device" && i + 1 < argc) {
      specs.push_back(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: gpu_tests [--device cpu|cuda:N|hip:N]...\n");
      return 2;
    }
  }
  if (specs.empty()) {
    for (const BackendProbe& p : probeBackends()) {
      if (!p.usable) std::printf("%s: skipped (%s)\n", p.name.c_str(), p.status.c_str());
      for (const DeviceInfo& d : p.devices) specs.push_back(p.name + ":" + std::to_string(d.index));
    }
  }
  for (const std::string& spec : specs) {
    OpenedDevice opened;
    try {
      opened = openDevice(spec);
    } catch (const std::exception& e) {
      const std::string seen = spec == "cpu" ? "" : visibleDevice(spec);
      if (!seen.empty()) {  // the machine has the device: not loading it is a failure, not a skip
        std::printf("FAIL %s: this machine has the device (%s) but it cannot be used: %s\n", spec.c_str(), seen.c_str(), e.what());
        ++failures;
        continue;
      }
      std::printf("SKIP %s: %s\n", spec.c_str(), e.what());
      if (specs.size() == 1) return 77;  // ctest's skip code
      continue;
    }
    opened.device.reset();  // runOn opens its own
    const std::size_t colon = spec.find(':');
    runOn(*opened.backend, colon == std::string::npos ? 0 : std::stoi(spec.substr(colon + 1)));
  }
  std::printf("%d checks, %d failed\n", checksRun, failures);
  return failures ? 1 : 0;
}
