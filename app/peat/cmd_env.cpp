// SPDX-License-Identifier: MIT
#include <iostream>
#include <thread>

#include "app/peat/commands.h"
#include "core/analyzer/report.h"
#include "core/torch_module.h"
#include "core/util/json_writer.h"
#include "core/version.h"
#include "gpu/backend.h"
#include "base/sys.h"

namespace peat::cli {

int runEnv(const EnvOptions& o) {
  const std::vector<gpu::BackendProbe> backends = gpu::probeBackends();
  TorchRuntimeInfo torch;
  std::string torchError;
  if (!o.skipTorch) {
    try {
      torch = loadTorchRuntime();
    } catch (const std::exception& e) {
      torchError = e.what();
    }
  }

  if (o.json) {
    JsonWriter j(std::cout);
    j.beginObject().field("version", toolVersion()).field("git_commit", gitCommit());
    j.field("hdf5_version", hdf5Version()).field("module_dir", sys::moduleDirectory());
    j.field("analyzer_simd", analyzer::simdTarget()).field("cpu_threads", uint64_t(std::thread::hardware_concurrency()));
    j.field("mpi", builtWithMpi());
    j.key("libtorch").beginObject();
    j.field("loaded", !o.skipTorch && torchError.empty());
    if (!torch.version.empty()) {
      j.field("version", torch.version).field("cuda_available", torch.cudaAvailable);
      j.field("cuda_devices", torch.cudaDevices).field("threads", torch.intraOpThreads);
      j.field("load_seconds", torch.loadSeconds);
    }
    if (!torchError.empty()) j.field("error", torchError);
    j.endObject();
    j.key("backends").beginArray();
    for (const gpu::BackendProbe& b : backends) {
      j.beginObject().field("name", b.name).field("built", b.built).field("usable", b.usable).field("status", b.status);
      j.key("devices").beginArray();
      for (const gpu::DeviceInfo& d : b.devices) {
        j.beginObject().field("index", d.index).field("name", d.name).field("memory_bytes", d.totalMemory);
        j.field("arch", d.arch).endObject();
      }
      j.endArray().endObject();
    }
    j.endArray().endObject();
    std::cout << '\n';
    return 0;
  }

  std::cout << "peat " << toolVersion() << " (commit " << gitCommit() << ")\n";
  std::cout << "HDF5      " << hdf5Version() << '\n';
  std::cout << "analyzer  SIMD " << analyzer::simdTarget() << ", " << std::thread::hardware_concurrency() << " threads\n";
  if (o.skipTorch)
    std::cout << "LibTorch  not loaded (--no-torch)\n";
  else if (!torchError.empty())
    std::cout << "LibTorch  unavailable: " << torchError << '\n';
  else
    std::cout << "LibTorch  " << torch.version << ", " << torch.intraOpThreads << " threads, CUDA "
              << (torch.cudaAvailable ? std::to_string(torch.cudaDevices) + " devices" : std::string("not available"))
              << " (loaded in " << int(torch.loadSeconds * 1000) << " ms)\n";
  std::cout << "MPI       "
            << (builtWithMpi() ? "yes (--mpi for check-bits, SAVE campaigns, playback and runtime-FI sweeps)"
                               : "no (built without libopenmpi-dev)")
            << '\n';
  std::cout << "modules   " << sys::moduleDirectory() << '\n';
  std::cout << "backends\n";
  for (const gpu::BackendProbe& b : backends) {
    std::cout << "  " << b.name << ": " << (b.usable ? "usable" : "unavailable") << " - " << b.status << '\n';
    for (const gpu::DeviceInfo& d : b.devices)
      std::cout << "    " << b.name << ':' << d.index << "  " << d.name << ", " << d.arch << ", "
                << (d.totalMemory >> 20) << " MiB\n";
  }
  return 0;
}

}  // namespace peat::cli
