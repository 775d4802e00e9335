// SPDX-License-Identifier: MIT
// peat-probe: a throw-away process for work that may crash or hang the one doing it.
//   peat-probe plugin PLUGIN           loads a user kernel and checks it
//   peat-probe session FILE [--verify] reads a session file's structure (all its data, with --verify)
//   peat-probe hdf5 FILE DATASET       reads one float dataset of any HDF5 file (file.h5:/path tensors)
//   peat-probe torchscript FILE [SHAPE TASK]
//                                      loads and rewrites a TorchScript model file (through libpeat_torch.so);
//                                      with SHAPE ("2,3,32,32") and TASK, also runs its first forward on
//                                      zeros of that shape, under a memory limit (PEAT_MODEL_MEMORY_MIB)
//   peat-probe onnx FILE               reads an ONNX model into SAVE's graph (through libpeat_onnx.so)
// Prints "ok..." or "error\treason"; a crash or a hang is seen by the parent.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
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
#include "core/util/helper_process.h"
#include "core/store/session.h"

namespace {

// The torch module ends the process on an error (after printing it): the command runs in a child
// of this helper, with its standard error in a file, so that its message can be passed on. The
// child dies with this helper (a parent's time-out kills both); a signal that ends the child ends
// this helper the same way, so the caller sees the crash.
int runTorchScriptProbe(const peat::cli::TorchCommand& c, bool limited) {
  char errors[] = "/tmp/peat-probe-XXXXXX";
  const int errFd = ::mkstemp(errors);
  if (errFd < 0) {
    std::printf("error\tcannot make a temporary file for the model's messages\n");
    return 1;
  }
  ::unlink(errors);
  std::fflush(stdout);
  const pid_t child = ::fork();
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(errFd, 2);
    if (limited) {  // heap and anonymous mappings: a forward's tensors
      const rlim_t mib = rlim_t(peat::sys::modelMemoryMiB());
      const rlimit limit{mib << 20, mib << 20};
      ::setrlimit(RLIMIT_DATA, &limit);
    }
    const int rc = peat::runTorchCommand(peat::cli::encode(c));
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(rc);
  }
  int status = 0;
  if (child < 0 || ::waitpid(child, &status, 0) != child) {
    std::printf("error\tcannot start the model's probe\n");
    return 1;
  }
  if (WIFSIGNALED(status)) {  // the model crashed: so does this helper, for the caller to see
    ::signal(WTERMSIG(status), SIG_DFL);
    ::raise(WTERMSIG(status));
    std::_Exit(128 + WTERMSIG(status));
  }
  if (WEXITSTATUS(status) == 0) {
    std::printf("ok\t0\n");
    return 0;
  }
  char buffer[8192] = {};
  const ssize_t n = ::pread(errFd, buffer, sizeof buffer - 1, 0);
  std::string message(buffer, std::size_t(n > 0 ? n : 0));
  const std::size_t at = message.rfind("peat: error: ");
  message = at == std::string::npos ? std::string("the model file was refused") : message.substr(at + 13);
  message = message.substr(0, message.find('\n'));
  std::printf("error\t%s\n", message.c_str());
  return 1;
}

}  // namespace

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
    if (mode == "torchscript" && (argc == 3 || argc == 5)) {
      // LibTorch's loader and the graph rewrite on a model file from someone else: `peat models
      // --inspect FILE` in this throw-away process, its report discarded; only a crash or a hang
      // matters here (the caller loads the file again for the messages of a clean refusal). With a
      // shape, the model's own code runs too (its first forward), under a memory limit, and a clean
      // refusal's message is passed on: the caller must not run that forward itself to learn it.
      peat::cli::TorchCommand c;
      c.name = "models";
      c.inspect = argv[2];
      c.insideProbe = true;
      if (argc == 5) {
        c.inputShape = argv[3];
        c.task = argv[4];
      }
      return runTorchScriptProbe(c, argc == 5);
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
