// SPDX-License-Identifier: MIT
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "gpu/backend.h"
#include "base/sys.h"

namespace peat::gpu {
namespace {

using CreateFn = Backend* (*)(int, char*, unsigned long);

struct ModuleResult {
  std::unique_ptr<Backend> backend;
  bool built = false;
  std::string why;
};

// Loads libpeat_gpu_<name>.so once per process; later calls reuse the handle.
ModuleResult loadDeviceModule(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<sys::SharedLibrary>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  ModuleResult r;
  const std::string path = sys::modulePath("peat_gpu_" + name);
  if (!sys::fileExists(path)) {
    r.why = "not built (its compiler was not found when this copy was built)";
    return r;
  }
  r.built = true;
  try {
    auto& lib = loaded[name];
    if (!lib) lib = std::make_unique<sys::SharedLibrary>(path);
    auto create = reinterpret_cast<CreateFn>(lib->symbol("peat_gpu_create_backend"));
    char why[512] = {};
    r.backend.reset(create(kBackendAbiVersion, why, sizeof why));
    if (!r.backend) r.why = why;
  } catch (const std::exception& e) {
    r.why = e.what();
  }
  return r;
}

}  // namespace

std::vector<BackendProbe> probeBackends() {
  std::vector<BackendProbe> out;
  BackendProbe cpu{"cpu", true, true, "", makeCpuBackend()->devices()};
  cpu.status = "reference backend, always available";
  out.push_back(std::move(cpu));
  for (const char* name : {"cuda", "hip"}) {
    ModuleResult m = loadDeviceModule(name);
    BackendProbe p;
    p.name = name;
    p.built = m.built;
    if (m.backend) {
      p.usable = true;
      p.devices = m.backend->devices();
      p.status = std::to_string(p.devices.size()) + (p.devices.size() == 1 ? " device" : " devices");
    } else {
      p.status = m.why;
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::unique_ptr<Backend> openBackend(const std::string& name) {
  if (name == "cpu") return makeCpuBackend();
  if (name != "cuda" && name != "hip")
    throw std::runtime_error("unknown backend '" + name + "' (expected cpu, cuda or hip)");
  ModuleResult m = loadDeviceModule(name);
  if (!m.backend) throw std::runtime_error("backend '" + name + "' is not usable here: " + m.why);
  return std::move(m.backend);
}

}  // namespace peat::gpu
