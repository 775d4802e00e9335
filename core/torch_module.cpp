// SPDX-License-Identifier: MIT
#include "core/torch_module.h"

#include <chrono>
#include <memory>
#include <stdexcept>

#include "core/torch/torch_entry.h"
#include "base/sys.h"

namespace peat {

namespace {
const sys::SharedLibrary& torchModule() {
  static std::unique_ptr<sys::SharedLibrary> lib;  // stays loaded for the process
  if (!lib) {
    const std::string path = sys::modulePath("peat_torch");
    if (!sys::fileExists(path)) throw std::runtime_error("the LibTorch module is missing: " + path);
    lib = std::make_unique<sys::SharedLibrary>(path);
  }
  return *lib;
}
}  // namespace

int runTorchCommand(const std::string& encodedCommand) {
  auto entry = reinterpret_cast<int (*)(const char*)>(torchModule().symbol("peat_torch_run"));
  return entry(encodedCommand.c_str());
}

TorchRuntimeInfo loadTorchRuntime() {
  const auto start = std::chrono::steady_clock::now();
  const sys::SharedLibrary& lib = torchModule();
  const std::string path = lib.path();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto info = reinterpret_cast<int (*)(PeatTorchInfo*)>(lib.symbol("peat_torch_info"));
  PeatTorchInfo raw{};
  if (info(&raw) != 0 || raw.abiVersion != PEAT_TORCH_ABI_VERSION)
    throw std::runtime_error("the LibTorch module at " + path + " is from another PEAT version");
  TorchRuntimeInfo out;
  out.version = raw.version;
  out.cudaAvailable = raw.cudaAvailable != 0;
  out.cudaDevices = raw.cudaDevices;
  out.intraOpThreads = raw.intraOpThreads;
  out.loadSeconds = seconds;
  return out;
}

}  // namespace peat
