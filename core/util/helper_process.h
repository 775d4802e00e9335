// SPDX-License-Identifier: MIT
#pragma once
// Runs one of peat's helper programs (in the module directory) as a throw-away child process and
// collects what it prints: work that may crash or hang (a user's plugin, a session file from
// someone else read by the HDF5 library) happens there, never in the caller.
#include <cstdint>
#include <string>
#include <vector>

namespace peat::sys {

struct HelperResult {
  std::string output;     // its standard output (at most 64 KiB), trailing newlines removed
  int exitCode = -1;      // when it exited
  int signal = 0;         // when a signal ended it (0: it exited)
  bool timedOut = false;  // it ran past the timeout and was killed
  bool started = true;    // false: it could not be started (output says why)
};

// argv[0] is the helper's path. Standard error goes to /dev/null.
HelperResult runHelper(const std::vector<std::string>& argv, double timeoutSeconds);

// "signal 11, Segmentation fault"
std::string describeSignal(int signal);

// `fallback` seconds, or what $PEAT_PROBE_TIMEOUT says (at least 0.1 s).
double probeTimeout(double fallback);

// The memory a model file's first forward may take in the probe helper, in MiB: 4096, or what
// $PEAT_MODEL_MEMORY_MIB says (at least 256).
int64_t modelMemoryMiB();

// Runs peat-probe (in the module directory) with `args` on a file from someone else, for the model
// loaders. Messages name the work: "`doing` did not finish within N s in the probe helper; it was
// not loaded" and "`crashed` in the probe helper (signal 11, ...); it was not loaded". Throws
// std::runtime_error with that one line when the helper is missing, cannot start, hangs or
// crashes; otherwise returns what it printed and its exit code.
HelperResult runProbeHelper(const std::vector<std::string>& args, double seconds, const std::string& doing,
                            const std::string& crashed);

}  // namespace peat::sys
