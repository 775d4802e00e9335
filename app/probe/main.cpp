// SPDX-License-Identifier: MIT
// peat-probe: a throw-away process for work that may crash or hang the one doing it.
//   peat-probe plugin PLUGIN           loads a user kernel and checks it
//   peat-probe session FILE [--verify] reads a session file's structure (all its data, with --verify)
//   peat-probe hdf5 FILE DATASET       reads one float dataset of any HDF5 file (file.h5:/path tensors)
//   peat-probe torchscript FILE [SHAPE TASK]
//                                      loads and rewrites a TorchScript model file (through libpeat_torch.so)
//                                      under a memory limit (PEAT_MODEL_MEMORY_MIB), after checking the
//                                      sizes its archive declares; with SHAPE ("2,3,32,32") and TASK, also
//                                      runs its first forward on zeros of that shape, under the same limit
//   peat-probe onnx FILE               reads an ONNX model into SAVE's graph (through libpeat_onnx.so)
// Prints "ok..." or "error\treason"; a crash or a hang is seen by the parent.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "base/sys.h"
#include "core/io/tensor_source.h"
#include "core/cli/torch_commands.h"
#include "core/plugin/plugin_probe.h"
#include "core/save/onnx_model.h"
#include "core/torch_module.h"
#include "core/util/helper_process.h"
#include "core/store/session.h"

namespace {

// "3.2 GiB"
std::string sizeText(uint64_t bytes) {
  static const char* const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) v /= 1024, ++u;
  char text[48];
  if (u == 0) std::snprintf(text, sizeof text, "%llu bytes", (unsigned long long)bytes);
  else std::snprintf(text, sizeof text, "%.1f %s", v, units[u]);
  return text;
}

uint64_t little(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A TorchScript file is a zip archive whose central directory declares each record's size, and
// LibTorch allocates that much before it inflates a record. So the declared sizes are checked
// first, against the memory limit the load runs under, and a deflated record that expands more than
// 100:1 to over 64 MiB is refused as a compressed bomb (PyTorch stores tensor data uncompressed).
// Returns the reason for a refusal, or "" (also for a file that is no zip: the loader says what it is).
std::string archiveRefusal(const std::string& path, uint64_t limitBytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";  // never block on a FIFO here
  std::ifstream in(path, std::ios::binary);
  in.seekg(0, std::ios::end);
  const std::streamoff fileSize = in.tellg();
  if (!in || fileSize < 22) return "";
  auto readAt = [&](uint64_t at, std::size_t n) {
    std::vector<unsigned char> b(n);
    if (at + n > uint64_t(fileSize)) return std::vector<unsigned char>();
    in.seekg(std::streamoff(at));
    in.read(reinterpret_cast<char*>(b.data()), std::streamsize(n));
    return in ? b : std::vector<unsigned char>();
  };
  // the end-of-central-directory record, within the last 64 KiB (its comment) of the file
  const uint64_t tailSize = std::min<uint64_t>(uint64_t(fileSize), 65557);
  const std::vector<unsigned char> tail = readAt(uint64_t(fileSize) - tailSize, tailSize);
  if (tail.empty()) return "";
  std::size_t eocd = std::string::npos;
  for (std::size_t i = tail.size() - 22 + 1; i-- > 0;)
    if (little(&tail[i], 4) == 0x06054b50) {
      eocd = i;
      break;
    }
  if (eocd == std::string::npos) return "";
  uint64_t entries = little(&tail[eocd + 10], 2), directorySize = little(&tail[eocd + 12], 4),
           directoryAt = little(&tail[eocd + 16], 4);
  if (eocd >= 20 && little(&tail[eocd - 20], 4) == 0x07064b50) {  // zip64: the real counts are elsewhere
    const std::vector<unsigned char> z = readAt(little(&tail[eocd - 20 + 8], 8), 56);
    if (z.empty() || little(&z[0], 4) != 0x06064b50) return "";
    entries = little(&z[32], 8);
    directorySize = little(&z[40], 8);
    directoryAt = little(&z[48], 8);
  }
  if (directorySize > uint64_t(fileSize) || directoryAt > uint64_t(fileSize) - directorySize || entries > directorySize / 46)
    return "";
  const std::vector<unsigned char> dir = readAt(directoryAt, std::size_t(directorySize));
  if (dir.size() != directorySize) return "";
  const std::string model = "model file '" + path + "'";
  uint64_t total = 0;
  std::string largest;
  uint64_t largestSize = 0;
  for (std::size_t at = 0, n = 0; n < entries && at + 46 <= dir.size(); ++n) {
    const unsigned char* h = &dir[at];
    if (little(h, 4) != 0x02014b50) return "";
    const uint64_t method = little(h + 10, 2), nameLength = little(h + 28, 2), extraLength = little(h + 30, 2),
                   commentLength = little(h + 32, 2);
    uint64_t packed = little(h + 20, 4), size = little(h + 24, 4);
    if (at + 46 + nameLength + extraLength + commentLength > dir.size()) return "";
    const std::string name(reinterpret_cast<const char*>(h + 46), std::size_t(nameLength));
    // zip64's extra field holds the sizes the header marks 0xFFFFFFFF: uncompressed first
    for (std::size_t e = 0; e + 4 <= extraLength;) {
      const unsigned char* x = h + 46 + nameLength + e;
      const uint64_t id = little(x, 2), length = little(x + 2, 2);
      if (e + 4 + length > extraLength) break;
      if (id == 0x0001) {
        std::size_t field = 4;
        if (size == 0xFFFFFFFF && field + 8 <= 4 + length) size = little(x + field, 8), field += 8;
        if (packed == 0xFFFFFFFF && field + 8 <= 4 + length) packed = little(x + field, 8);
      }
      e += 4 + length;
    }
    if (method != 0 && size > (uint64_t(64) << 20) && size / std::max<uint64_t>(packed, 1) > 100)
      return model + " holds a compressed bomb: record '" + name + "' inflates from " + sizeText(packed) + " to " +
             sizeText(size) + " (" + std::to_string(size / std::max<uint64_t>(packed, 1)) +
             ":1), and PyTorch stores tensor data uncompressed; it was not loaded";
    total += std::min<uint64_t>(size, UINT64_MAX - total);
    if (size > largestSize) largestSize = size, largest = name;
    at += 46 + nameLength + extraLength + commentLength;
  }
  if (total > limitBytes)
    return model + " declares " + sizeText(total) + " of records (the largest, '" + largest + "', " +
           sizeText(largestSize) + "), more than the " + std::to_string(limitBytes >> 20) +
           " MiB its loading may take (PEAT_MODEL_MEMORY_MIB); it was not loaded";
  return "";
}

// The torch module ends the process on an error (after printing it): the command runs in a child
// of this helper, with its standard error in a file, so that its message can be passed on. The
// child dies with this helper (a parent's time-out kills both); a signal that ends the child ends
// this helper the same way, so the caller sees the crash.
int runTorchScriptProbe(const peat::cli::TorchCommand& c) {
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
    {  // heap and anonymous mappings: the archive's records as they are read, a forward's tensors
      // LibTorch first, outside the limit: OpenBLAS's start-up spins forever when its buffers are refused
      try {
        static const peat::sys::SharedLibrary torch(peat::sys::modulePath("peat_torch"));
      } catch (const std::exception&) {
        // the command below reports the missing module
      }
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
  // A load refused memory: say which limit (a forward's refusal is told its limits by the caller).
  const bool memory = message.find("bad_alloc") != std::string::npos ||
                      message.find("can't allocate memory") != std::string::npos ||
                      message.find("Cannot allocate memory") != std::string::npos;
  if (memory && c.inputShape.empty())
    message = "loading model file '" + c.inspect + "' took more than the " + std::to_string(peat::sys::modelMemoryMiB()) +
              " MiB it may (PEAT_MODEL_MEMORY_MIB): " + message;
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
      std::printf("%s\n", peat::plugin::probeAnswer(info).c_str());  // v1 or v2 (parseProbeAnswer)
      return 0;
    }
    if (mode == "session" && (argc == 3 || (argc == 4 && std::strcmp(argv[3], "--verify") == 0))) {
      const peat::store::SessionReader reader(argv[2], peat::store::SessionReader::InsideProbe{});
      // every run's calls read as `peat` reads them, an iteration at a time and dropped: the walk's
      // memory does not grow with the calls (a summary of them all was 5 KB a call)
      const peat::store::SessionSummary s = reader.summaryWithoutCalls();
      for (const peat::store::RunInfo& r : s.runs) {
        reader.forEachIteration(r.name, false, [](const peat::store::IterationInfo&) {});
        (void)reader.verdicts(r.name);  // the string tables
      }
      if (argc == 4) {
        const peat::store::SessionReader::Verification v = reader.verify();
        std::printf("ok\t%zu\t%llu\t%llu\t%llu\t%llu\t%llu\n", s.runs.size(), (unsigned long long)v.datasets,
                    (unsigned long long)v.bytes, (unsigned long long)v.withoutChecksum,
                    (unsigned long long)v.incompleteGroups, (unsigned long long)v.readWhole);
        // then the datasets no checksum vouches for, a line each (printable: no tab or newline)
        for (const std::string& p : v.withoutChecksumPaths) std::printf("without\t%s\n", p.c_str());
        for (const std::string& p : v.readWholePaths) std::printf("whole\t%s\n", p.c_str());
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
      const std::string refusal = archiveRefusal(argv[2], uint64_t(peat::sys::modelMemoryMiB()) << 20);
      if (!refusal.empty()) {
        std::printf("error\t%s\n", refusal.c_str());
        return 1;
      }
      peat::cli::TorchCommand c;
      c.name = "models";
      c.inspect = argv[2];
      c.insideProbe = true;
      if (argc == 5) {
        c.inputShape = argv[3];
        c.task = argv[4];
      }
      return runTorchScriptProbe(c);
    }
    if (mode == "onnx" && argc == 3) {  // protobuf, ONNX's checker and the mapping onto SAVE's graph
      // under the same memory limit as a TorchScript model's load: a crafted file fails an
      // allocation here, in the helper, rather than taking the machine's memory
      const rlim_t mib = rlim_t(peat::sys::modelMemoryMiB());
      const rlimit limit{mib << 20, mib << 20};
      ::setrlimit(RLIMIT_DATA, &limit);
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
