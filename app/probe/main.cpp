// SPDX-License-Identifier: MIT
// peat-probe: a throw-away process for work that may crash or hang the one doing it.
//   peat-probe plugin PLUGIN           loads a user kernel and checks it
//   peat-probe session FILE [--verify] reads a session file's structure (all its data, with --verify)
//   peat-probe hdf5 FILE DATASET       reads one float dataset of any HDF5 file (file.h5:/path tensors)
//   peat-probe torchscript FILE        loads and rewrites a TorchScript model file (through libpeat_torch.so)
//   peat-probe onnx FILE               reads an ONNX model into SAVE's graph (through libpeat_onnx.so)
// Prints "ok..." or "error\treason"; a crash or a hang is seen by the parent.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/sys.h"
#include "core/io/tensor_source.h"
#include "core/cli/torch_commands.h"
#include "core/plugin/plugin_probe.h"
#include "core/save/onnx_model.h"
#include "core/torch_module.h"
#include "core/store/session.h"

int main(int argc, char** argv) {
  const std::string mode = argc >= 2 ? argv[1] : "";
  // The helper lives in the module directory: the modules it loads (LibTorch's, ONNX's) are beside it.
  if (const char* dir = std::getenv("PEAT_MODULE_DIR"); !dir || !*dir)
    ::setenv("PEAT_MODULE_DIR", peat::sys::executableDirectory().c_str(), 1);
  try {
    if (mode == "plugin" && argc == 3) {
      const peat::plugin::PluginInfo info = peat::plugin::checkPluginInProcess(argv[2]);
      std::printf("ok\t%s\t%u\t%u\t%u\t%u\t%u\t%.9g\t%d\n", info.name.c_str(), info.abiVersion, info.opKind, info.dtype,
                  info.memory, info.probeMismatches, info.probeMaxAbsError, info.probeFirstMismatch);
      return 0;
    }
    if (mode == "session" && (argc == 3 || (argc == 4 && std::strcmp(argv[3], "--verify") == 0))) {
      const peat::store::SessionReader reader(argv[2], peat::store::SessionReader::InsideProbe{});
      const peat::store::SessionSummary s = reader.summaryWithoutTensors();
      for (const peat::store::RunInfo& r : s.runs) (void)reader.verdicts(r.name);  // the string tables
      if (argc == 4) {
        const peat::store::SessionReader::Verification v = reader.verify();
        std::printf("ok\t%zu\t%llu\t%llu\t%llu\t%llu\n", s.runs.size(), (unsigned long long)v.datasets,
                    (unsigned long long)v.bytes, (unsigned long long)v.withoutChecksum,
                    (unsigned long long)v.incompleteGroups);
      } else {
        std::printf("ok\t%zu\n", s.runs.size());
      }
      return 0;
    }
    if (mode == "torchscript" && argc == 3) {
      // LibTorch's loader and the graph rewrite on a model file from someone else: `peat models
      // --inspect FILE` in this throw-away process, its report discarded (the caller loads the file
      // again for the messages of a clean refusal); only a crash or a hang matters here.
      peat::cli::TorchCommand c;
      c.name = "models";
      c.inspect = argv[2];
      c.insideProbe = true;
      std::fflush(stdout);
      const int saved = ::dup(1), devnull = ::open("/dev/null", O_WRONLY);
      ::dup2(devnull, 1);
      const int rc = peat::runTorchCommand(peat::cli::encode(c));
      std::fflush(stdout);
      ::dup2(saved, 1);
      std::printf(rc == 0 ? "ok\t0\n" : "error\tthe model file was refused (exit %d)\n", rc);
      return rc == 0 ? 0 : 1;
    }
    if (mode == "onnx" && argc == 3) {  // protobuf, ONNX's checker and the mapping onto SAVE's graph
      const peat::save::Graph g = peat::save::onnxGraph(argv[2], peat::save::InsideProbe{});
      std::printf("ok\t%zu\n", g.nodes.size());
      return 0;
    }
    if (mode == "hdf5" && argc == 4) {
      const peat::io::FloatTensor t = peat::io::readHdf5Dataset(argv[2], argv[3], peat::io::InsideProbe{});
      std::printf("ok\t%llu\n", (unsigned long long)t.size());
      return 0;
    }
  } catch (const std::exception& e) {
    std::printf("error\t%s\n", e.what());
    return 1;
  }
  std::printf("error\tusage: peat-probe plugin PLUGIN | peat-probe session FILE [--verify] | peat-probe hdf5 FILE DATASET | peat-probe torchscript FILE | peat-probe onnx FILE\n");
  return 2;
}
