// SPDX-License-Identifier: MIT
// The CPU reference backend: always present, the definition of "correct" for the device kernels.
// Buffers are host memory, streams run each call at once, events read a monotonic clock.
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "gpu/backend.h"
#include "gpu/checks.h"
#include "gpu/cpu/reference.h"

namespace peat::gpu {
namespace {

class CpuBuffer final : public Buffer {
 public:
  CpuBuffer(const void* owner, uint64_t bytes) : owner_(owner), bytes_(bytes) {
    // 64-byte aligned, like device allocations; zero bytes still gets a distinct pointer
    data_ = static_cast<unsigned char*>(::operator new[](std::size_t(std::max<uint64_t>(bytes, 1)), std::align_val_t(64)));
  }
  ~CpuBuffer() override { ::operator delete[](data_, std::align_val_t(64)); }
  uint64_t bytes() const override { return bytes_; }
  const void* owner() const override { return owner_; }
  unsigned char* data() const { return data_; }
  float* floats() const { return reinterpret_cast<float*>(data_); }
  uint32_t* words() const { return reinterpret_cast<uint32_t*>(data_); }

 private:
  const void* owner_;
  uint64_t bytes_;
  unsigned char* data_;
};

class CpuStream final : public Stream {};

class CpuEvent final : public Event {
 public:
  std::chrono::steady_clock::time_point at{};
  bool recorded = false;
};

const CpuBuffer& own(const void* device, const Buffer& b, const char* what) {
  checks::ownBuffer(device, b, what);
  return static_cast<const CpuBuffer&>(b);
}

DeviceInfo hostInfo() {
  DeviceInfo d;
  d.backend = "cpu";
  d.index = 0;
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  d.name = "host CPU (" + std::to_string(cores) + " cores)";
  d.totalMemory = uint64_t(::sysconf(_SC_PHYS_PAGES)) * uint64_t(::sysconf(_SC_PAGE_SIZE));
  utsname u{};
  d.arch = ::uname(&u) == 0 ? u.machine : "unknown";
  d.multiprocessors = int(cores);
  return d;
}

class CpuDevice final : public Device {
 public:
  // PEAT_TEST_DEVICE_LOST_AFTER=N: the device "disappears" at its N+1-th GEMM, as a GPU that falls
  // off the bus would, so the layers above can be tested for a clean error and an intact session.
  CpuDevice() {
    if (const char* n = std::getenv("PEAT_TEST_DEVICE_LOST_AFTER")) lostAfter_ = std::strtoll(n, nullptr, 10);
  }
  void simulateLoss() {
    if (lostAfter_ >= 0 && calls_++ >= lostAfter_)
      throw DeviceLost("cpu:0: device lost after " + std::to_string(lostAfter_) +
                       " GEMMs (simulated by PEAT_TEST_DEVICE_LOST_AFTER); host data is intact");
  }

  DeviceInfo info() const override { return hostInfo(); }
  uint64_t freeMemory() const override { return uint64_t(::sysconf(_SC_AVPHYS_PAGES)) * uint64_t(::sysconf(_SC_PAGE_SIZE)); }

  std::unique_ptr<Buffer> allocate(uint64_t bytes) override {
    const uint64_t total = hostInfo().totalMemory;
    if (bytes > total)
      throw OutOfDeviceMemory("cpu: out of memory: " + checks::mib(bytes) + " asked for, the machine has " + checks::mib(total));
    try {
      return std::make_unique<CpuBuffer>(this, bytes);
    } catch (const std::bad_alloc&) {
      throw OutOfDeviceMemory("cpu: out of memory allocating " + checks::mib(bytes) + " (" + checks::mib(freeMemory()) + " free)");
    }
  }
  std::unique_ptr<Stream> createStream() override { return std::make_unique<CpuStream>(); }
  std::unique_ptr<Event> createEvent() override { return std::make_unique<CpuEvent>(); }
  void record(Event& event, Stream&) override {
    auto& e = static_cast<CpuEvent&>(event);
    e.at = std::chrono::steady_clock::now();
    e.recorded = true;
  }
  double elapsedMs(Event& start, Event& end) override {
    const auto& a = static_cast<CpuEvent&>(start);
    const auto& b = static_cast<CpuEvent&>(end);
    if (!a.recorded || !b.recorded) throw std::invalid_argument("elapsed time of an event that was never recorded");
    return std::chrono::duration<double, std::milli>(b.at - a.at).count();
  }
  void synchronize(Stream&) override {}

  void upload(Buffer& dst, uint64_t offset, const void* src, uint64_t bytes, Stream&) override {
    const CpuBuffer& d = own(this, dst, "upload destination");
    checks::span(d.bytes(), offset, bytes, "upload");
    if (bytes) std::memcpy(d.data() + offset, src, bytes);
  }
  void download(void* dst, const Buffer& src, uint64_t offset, uint64_t bytes, Stream&) override {
    const CpuBuffer& s = own(this, src, "download source");
    checks::span(s.bytes(), offset, bytes, "download");
    if (bytes) std::memcpy(dst, s.data() + offset, bytes);
  }
  void copy(Buffer& dst, const Buffer& src, uint64_t bytes, Stream&) override {
    const CpuBuffer& d = own(this, dst, "copy destination");
    const CpuBuffer& s = own(this, src, "copy source");
    checks::span(d.bytes(), 0, bytes, "copy destination");
    checks::span(s.bytes(), 0, bytes, "copy source");
    if (bytes) std::memmove(d.data(), s.data(), bytes);
  }

  void applyFlips(Buffer& words, const FlipList& flips, Stream&) override {
    const CpuBuffer& w = own(this, words, "injection");
    checks::flipList(checks::words(w), flips);
    const auto* list = reinterpret_cast<const BitFlip*>(own(this, *flips.list, "flip list").data());
    reference::injectBitFlips(w.words(), std::vector<BitFlip>(list, list + flips.count));
  }
  void stuckAt(Buffer& words, const StuckAt& region, Stream&) override {
    const CpuBuffer& w = own(this, words, "stuck-at");
    checks::stuckAt(checks::words(w), region);
    reference::stuckAt(w.words(), region);
  }
  void rangeCheck(const Buffer& values, uint64_t n, const RangeBounds& bounds, Buffer& result, Stream&) override {
    const CpuBuffer& v = own(this, values, "range check values");
    checks::floats(v, n, "range check values");
    const float *lo = nullptr, *hi = nullptr;
    if ((bounds.lo == nullptr) != (bounds.hi == nullptr))
      throw std::invalid_argument("range check: give both per-element bounds or neither");
    if (bounds.lo) {
      lo = own(this, *bounds.lo, "range check lower bound").floats();
      hi = own(this, *bounds.hi, "range check upper bound").floats();
      checks::floats(*bounds.lo, n, "range check lower bound");
      checks::floats(*bounds.hi, n, "range check upper bound");
    }
    const CpuBuffer& r = own(this, result, "range check");
    checks::result(r, kRangeResultBytes, "range check");
    const RangeCheckResult out = reference::rangeCheck(v.floats(), n, lo, hi, bounds.low, bounds.high);
    const uint64_t words[2] = {out.violations, out.firstIndex};
    std::memcpy(r.data(), words, sizeof words);
  }
  void histograms(const Buffer& golden, const Buffer& candidate, uint64_t n, Buffer& result, Stream&) override {
    const CpuBuffer& g = own(this, golden, "golden");
    const CpuBuffer& c = own(this, candidate, "candidate");
    checks::floats(g, n, "golden");
    checks::floats(c, n, "candidate");
    const CpuBuffer& r = own(this, result, "histogram");
    checks::result(r, kHistogramWords * 8, "histogram");
    const ErrorHistograms h = reference::histograms(g.floats(), c.floats(), n);
    auto* out = reinterpret_cast<uint64_t*>(r.data());
    out[0] = h.mismatched;
    std::copy(h.bits.begin(), h.bits.end(), out + kHistBitsAt);
    std::copy(h.log2Ulp.begin(), h.log2Ulp.end(), out + kHistUlpAt);
    std::copy(h.log2Abs.begin(), h.log2Abs.end(), out + kHistAbsAt);
  }
  void gemm(GemmKind kind, const GemmShape& shape, const Buffer& a, const Buffer& b, Buffer& c, Stream&) override {
    simulateLoss();
    const CpuBuffer& ab = own(this, a, "GEMM A");
    const CpuBuffer& bb = own(this, b, "GEMM B");
    const CpuBuffer& cb = own(this, c, "GEMM C");
    checks::gemm(kind, shape, a, b, c);
    reference::gemm(kind, shape, ab.floats(), bb.floats(), cb.floats());
  }

 private:
  long long lostAfter_ = -1, calls_ = 0;
};

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  std::vector<DeviceInfo> devices() const override { return {hostInfo()}; }
  std::unique_ptr<Device> open(int index) override {
    if (index != 0) throw std::out_of_range("the cpu backend has one device, cpu:0 (asked for cpu:" + std::to_string(index) + ")");
    return std::make_unique<CpuDevice>();
  }
};

}  // namespace

std::unique_ptr<Backend> makeCpuBackend() { return std::make_unique<CpuBackend>(); }

}  // namespace peat::gpu
