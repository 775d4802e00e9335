// SPDX-License-Identifier: MIT
#pragma once
// The compute backend interface: device discovery, device memory, streams, events, copies and the
// kernels the workbench runs (fault injection, range checks, the analyzer's histograms, candidate
// GEMMs). Plain types only (no torch, no Qt), so CUDA and HIP modules compile against it as is.
//
// The CPU backend is the reference: every device kernel whose math is identical (injection, masks,
// range check, histograms) must give bit-identical results, and the GEMMs meet the error bounds
// documented in docs/gpu.md. Calls are asynchronous on a stream where the API takes one; results
// written to device buffers are valid after synchronize().
#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace peat::gpu {

// Bumped whenever the layout of these classes or the module entry point changes; modules built for
// another version are refused.
inline constexpr int kBackendAbiVersion = 2;

struct DeviceInfo {
  std::string backend;       // "cpu", "cuda", "hip"
  int index = 0;             // ordinal within the backend
  std::string name;          // e.g. "NVIDIA H200"
  uint64_t totalMemory = 0;  // bytes
  std::string arch;          // "sm_90", "gfx90a", "x86_64"
  int multiprocessors = 0;   // SMs or CUs; CPU: cores
};

// Device memory could not be allocated. The message says how much was asked for and how much is free.
struct OutOfDeviceMemory : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The device stopped answering (reset, fell off the bus, a kernel faulted): nothing on it can be
// trusted, the host side is intact.
struct DeviceLost : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Memory on one device. Made by Device::allocate, used only with that device.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual uint64_t bytes() const = 0;
  virtual const void* owner() const = 0;  // the Device that made it
};

class Stream {
 public:
  virtual ~Stream() = default;
};

class Event {
 public:
  virtual ~Event() = default;
};

// One sparse injection: XOR `mask` into 32-bit word `index`. Several flips of one word compose.
struct BitFlip {
  uint64_t index = 0;
  uint32_t mask = 0;
};

// A list of flips on a device, ready to apply (prepared once, applied to any large enough buffer).
struct FlipList {
  std::unique_ptr<Buffer> list;  // the BitFlip records, as uploaded
  uint64_t count = 0;
  uint64_t maxIndex = 0;  // checked against the target buffer before anything is applied
};

// Bits forced over a region: words [first, first + count) get `mask` set (value 1) or cleared (0).
struct StuckAt {
  uint64_t first = 0, count = 0;
  uint32_t mask = 0;
  bool value = false;
};

// Bounds of a range check: per element (lo[i] <= v[i] <= hi[i], buffers of n floats) when the
// buffers are given, else one interval for every element.
struct RangeBounds {
  const Buffer* lo = nullptr;
  const Buffer* hi = nullptr;
  float low = 0, high = 0;
};

// What a range check found: values outside their bounds (NaN is outside any bound), and the first.
struct RangeCheckResult {
  uint64_t violations = 0;
  uint64_t firstIndex = UINT64_MAX;  // UINT64_MAX: none
};
inline constexpr uint64_t kRangeResultBytes = 16;  // the device result: two uint64 words

// The analyzer's histograms of a (golden, candidate) fp32 pair, with the analyzer's definitions
// (core/analyzer/report.h): a pair mismatches when its bits differ; bit[b] counts mismatched pairs
// whose bit b differs; log2Ulp[b] counts pairs, neither NaN and a nonzero ULP distance apart, with
// floor(log2 ULP distance) = b; log2Abs[i] counts pairs, both finite and different, with
// floor(log2 |c - g|) = kLog2AbsMin + i (|c - g| in double).
struct ErrorHistograms {
  static constexpr int kLog2AbsMin = -160, kLog2AbsMax = 130;
  static constexpr int kAbsBins = kLog2AbsMax - kLog2AbsMin + 1;
  uint64_t mismatched = 0;
  std::array<uint64_t, 32> bits{};
  std::array<uint64_t, 33> log2Ulp{};
  std::array<uint64_t, kAbsBins> log2Abs{};
  bool operator==(const ErrorHistograms& o) const {
    return mismatched == o.mismatched && bits == o.bits && log2Ulp == o.log2Ulp && log2Abs == o.log2Abs;
  }
};
// The device result: the counters above as uint64 words, in that order.
inline constexpr uint64_t kHistBitsAt = 1, kHistUlpAt = kHistBitsAt + 32, kHistAbsAt = kHistUlpAt + 33;
inline constexpr uint64_t kHistogramWords = kHistAbsAt + ErrorHistograms::kAbsBins;

// Candidate GEMMs, C[M x N] = A[M x K] * B[K x N], fp32 row-major.
enum class GemmKind {
  Naive,       // one thread per output element, fmaf over k in order
  Tiled,       // shared-memory tiles (16 x 16), fmaf over k in order: the same sums as Naive
  HalfInputs,  // inputs rounded to fp16, fp32 accumulation: tensor cores (WMMA) on CUDA, emulated elsewhere
  SplitK,      // K split into `parts` ranges, partial sums added in part order
  TileEdge,    // planted bug: the last column of every 16-column output tile reads the next column of B
  Golden,      // the vendor library (cuBLAS) on CUDA; the CPU and HIP use fp32 sums in double
};
struct GemmShape {
  uint64_t m = 0, n = 0, k = 0;
  int parts = 4;  // SplitK only
};
const char* gemmName(GemmKind kind);
std::vector<GemmKind> gemmKinds();
GemmKind gemmFromName(const std::string& name);  // throws std::invalid_argument naming the choices

// One device of a backend. Methods throw std::invalid_argument for bad arguments (sizes, buffers of
// another device, indices), OutOfDeviceMemory, DeviceLost, or std::runtime_error for other device
// errors; a call that throws for its arguments changes nothing.
class Device {
 public:
  virtual ~Device() = default;
  virtual DeviceInfo info() const = 0;
  virtual uint64_t freeMemory() const = 0;

  virtual std::unique_ptr<Buffer> allocate(uint64_t bytes) = 0;
  virtual std::unique_ptr<Stream> createStream() = 0;
  virtual std::unique_ptr<Event> createEvent() = 0;
  virtual void record(Event& event, Stream& stream) = 0;
  // Milliseconds between two recorded events, after both completed.
  virtual double elapsedMs(Event& start, Event& end) = 0;
  virtual void synchronize(Stream& stream) = 0;

  // Asynchronous copies; host memory must stay valid until the stream is synchronized.
  virtual void upload(Buffer& dst, uint64_t offset, const void* src, uint64_t bytes, Stream& stream) = 0;
  virtual void download(void* dst, const Buffer& src, uint64_t offset, uint64_t bytes, Stream& stream) = 0;
  virtual void copy(Buffer& dst, const Buffer& src, uint64_t bytes, Stream& stream) = 0;

  // Bit-flip injection into `words` (32-bit words: its size a multiple of 4). prepareFlips uploads a
  // list (`flips` must stay alive until the stream is synchronized); applyFlips checks the largest
  // index against the buffer before any flip is applied, and costs in proportion to the number of
  // flips, not the buffer size. injectBitFlips does both and synchronizes.
  FlipList prepareFlips(const std::vector<BitFlip>& flips, Stream& stream);
  virtual void applyFlips(Buffer& words, const FlipList& flips, Stream& stream) = 0;
  void injectBitFlips(Buffer& words, const std::vector<BitFlip>& flips, Stream& stream);
  virtual void stuckAt(Buffer& words, const StuckAt& region, Stream& stream) = 0;
  // One pass over n floats; writes a RangeCheckResult (kRangeResultBytes) into `result`.
  virtual void rangeCheck(const Buffer& values, uint64_t n, const RangeBounds& bounds, Buffer& result,
                          Stream& stream) = 0;
  // One pass over n pairs; writes kHistogramWords uint64 counters into `result`.
  virtual void histograms(const Buffer& golden, const Buffer& candidate, uint64_t n, Buffer& result,
                          Stream& stream) = 0;
  virtual void gemm(GemmKind kind, const GemmShape& shape, const Buffer& a, const Buffer& b, Buffer& c,
                    Stream& stream) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual std::vector<DeviceInfo> devices() const = 0;
  virtual std::unique_ptr<Device> open(int index) = 0;  // throws std::out_of_range for a device that is not there
};

std::unique_ptr<Backend> makeCpuBackend();

// What a look for one backend found. A missing module or a machine without the device is a normal outcome.
struct BackendProbe {
  std::string name;                  // "cpu", "cuda", "hip"
  bool built = false;                // the module exists next to this program
  bool usable = false;               // it loaded and reported at least one device
  std::string status;                // one line: "2 devices", "not built", "no device: ..."
  std::vector<DeviceInfo> devices;
};

std::vector<BackendProbe> probeBackends();

// "cpu", "cuda" or "hip"; throws std::runtime_error with a one-line reason when it is not usable here.
std::unique_ptr<Backend> openBackend(const std::string& name);

// A device named as users write it: "cpu", "cpu:0", "cuda", "cuda:1", "hip:0". The backend stays
// alive as long as the device.
struct OpenedDevice {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Device> device;
};
OpenedDevice openDevice(const std::string& spec);

// Convenience over the asynchronous calls: run on `stream`, synchronize, read the result back.
RangeCheckResult readRangeResult(Device& device, const Buffer& result, Stream& stream);
ErrorHistograms readHistograms(Device& device, const Buffer& result, Stream& stream);

}  // namespace peat::gpu
