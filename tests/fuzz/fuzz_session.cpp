// SPDX-License-Identifier: MIT
// libFuzzer target for reading session files from someone else, on mutated small sessions
// (tests/fuzz/corpus/session, made by make_session_seeds.cpp).
//
// The HDF5 library (Debian's 1.10.8) can crash, hang or corrupt memory on a crafted file; that is
// why peat reads a file first in a helper process (store::probeSession). This target does the same:
// each input is read in a forked child (every SessionReader call, tensors, tables, verify()) with a
// 2 s alarm. What must hold, and makes the run fail otherwise:
//   - the calling process never crashes, hangs or leaks, whatever the child does;
//   - our reader turns every problem it sees into a SessionError: any other exception escaping in
//     the child (std::bad_alloc from a size we did not bound, a logic error) is a finding.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/store/session.h"

// The writer's provenance needs these; the reader never calls them.
namespace peat {
const char* toolVersion() { return "fuzz"; }
const char* gitCommit() { return "fuzz"; }
}  // namespace peat

namespace {

constexpr int kEscaped = 3;  // the child's exit code for an exception that is not a SessionError

[[noreturn]] void readAll(const std::string& path) {
  using namespace peat::store;
  try {
    SessionReader reader(path, SessionReader::InsideProbe{});
    const SessionSummary s = reader.summary();
    int reads = 0;
    for (const RunInfo& run : s.runs) {
      (void)reader.verdicts(run.name);
      for (const std::string& table : run.tables) (void)reader.table(run.name, table);
      for (const IterationInfo& it : run.iterations)
        for (const CallInfo& call : it.calls)
          for (const TensorInfo& t : call.tensors)
            if (reads++ < 64) (void)reader.readTensor(run.name, call.path, t.name);
      for (int64_t cp : run.checkpoints) (void)reader.checkpoint(run.name, cp);
      for (const std::string& id : run.reports) (void)reader.report(run.name, id);
    }
    for (const std::string& id : s.saveResults) (void)reader.saveResult(id);
    (void)reader.verify();
  } catch (const SessionError&) {
    _exit(1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_session: escaped: %s\n", e.what());
    _exit(kEscaped);
  }
  _exit(0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/peat-fuzz-session-" + std::to_string(::getpid()) + ".h5";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
  const pid_t child = ::fork();
  if (child < 0) return 0;
  if (child == 0) {
    // A hang in the HDF5 library ends here. The child inherits libFuzzer's SIGALRM handler, which
    // ignores an alarm it did not set (seen: a crafted 'format' attribute hung H5Aread for good).
    std::signal(SIGALRM, SIG_DFL);
    ::alarm(2);  // a 40 KiB file reads in milliseconds, even under ASan
    std::freopen("/dev/null", "w", stderr);  // HDF5's own crash reports are not ours
    readAll(path);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == kEscaped) {
    std::fprintf(stderr, "fuzz_session: an exception other than SessionError escaped the reader\n");
    std::abort();
  }
  return 0;
}
