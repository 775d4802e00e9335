// SPDX-License-Identifier: MIT
// The CPU reference backend: always present, the definition of "correct" for the device kernels.
#include <sys/utsname.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

#include "gpu/backend.h"
#include "gpu/device/flip_validation.h"

namespace peat::gpu {
namespace {

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }

  std::vector<DeviceInfo> devices() const override {
    DeviceInfo d;
    d.backend = "cpu";
    d.index = 0;
    d.name = "host CPU (" + std::to_string(::sysconf(_SC_NPROCESSORS_ONLN)) + " cores)";
    d.totalMemory = uint64_t(::sysconf(_SC_PHYS_PAGES)) * uint64_t(::sysconf(_SC_PAGE_SIZE));
    utsname u{};
    d.arch = ::uname(&u) == 0 ? u.machine : "unknown";
    return {d};
  }

  void injectBitFlips(int device, uint32_t* words, uint64_t count, const std::vector<BitFlip>& flips) override {
    if (device != 0) throw std::out_of_range("the cpu backend has one device, 0");
    validateFlips(count, flips);
    for (const BitFlip& f : flips) words[f.index] ^= f.mask;
  }
};

}  // namespace

std::unique_ptr<Backend> makeCpuBackend() { return std::make_unique<CpuBackend>(); }

}  // namespace peat::gpu
