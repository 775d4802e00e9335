// SPDX-License-Identifier: MIT
#pragma once
// The compute backend interface: device discovery and the kernels the workbench runs.
// Plain types only (no torch, no Qt), so CUDA and HIP modules compile against it as is.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace peat::gpu {

// Bumped whenever Backend's layout or the module entry point changes; modules built for another version are refused.
inline constexpr int kBackendAbiVersion = 1;

struct DeviceInfo {
  std::string backend;       // "cpu", "cuda", "hip"
  int index = 0;             // ordinal within the backend
  std::string name;          // e.g. "NVIDIA H200"
  uint64_t totalMemory = 0;  // bytes
  std::string arch;          // "sm_90", "gfx90a", "x86_64"
};

// One sparse injection: XOR `mask` into 32-bit word `index`. Several flips of one word compose.
struct BitFlip {
  uint64_t index = 0;
  uint32_t mask = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual std::vector<DeviceInfo> devices() const = 0;
  // Applies `flips` to `words` (host memory, `count` words) on `device`; cost grows with flips, not count,
  // on the device side. Throws std::out_of_range for an index past `count`, std::runtime_error for device errors.
  virtual void injectBitFlips(int device, uint32_t* words, uint64_t count, const std::vector<BitFlip>& flips) = 0;
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

}  // namespace peat::gpu
