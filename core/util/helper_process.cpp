// SPDX-License-Identifier: MIT
#include "core/util/helper_process.h"

#include "base/sys.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "base/sys.h"

namespace peat::sys {

HelperResult runHelper(const std::vector<std::string>& argv, double timeoutSeconds) {
  HelperResult r;
  if (argv.empty()) {
    r.started = false;
    r.output = "no helper given";
    return r;
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    r.started = false;
    r.output = "cannot create a pipe";
    return r;
  }
  // posix_spawn, not fork: the caller may be a large process (LibTorch loaded) whose page tables
  // fork would copy. The child gets the pipe as stdout, /dev/null as stderr, and nothing else of
  // ours (an inherited HDF5 file would keep our lock on it alive).
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  pid_t child = -1;
  const int rc = ::posix_spawn(&child, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    ::close(out[0]);
    ::close(out[1]);
    r.started = false;
    r.output = "cannot run " + argv[0] + ": " + std::strerror(rc);
    return r;
  }
  ::close(out[1]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSeconds);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timedOut = true;
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, int(left.count())) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(out[0], buffer, sizeof buffer);
    if (n <= 0) break;
    if (r.output.size() < 65536) r.output.append(buffer, std::size_t(n));
  }
  ::close(out[0]);
  if (r.timedOut) ::kill(child, SIGKILL);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  else if (WIFEXITED(status)) r.exitCode = WEXITSTATUS(status);
  while (!r.output.empty() && (r.output.back() == '\n' || r.output.back() == '\r')) r.output.pop_back();
  return r;
}

std::string describeSignal(int signal) { return "signal " + std::to_string(signal) + ", " + ::strsignal(signal); }

double probeTimeout(double fallback) {
  if (const char* t = std::getenv("PEAT_PROBE_TIMEOUT")) return std::max(0.1, std::atof(t));
  return fallback;
}

int64_t modelMemoryMiB() {
  const char* v = std::getenv("PEAT_MODEL_MEMORY_MIB");
  if (!v || !*v) return 4096;
  char* end = nullptr;
  const long long mib = std::strtoll(v, &end, 10);
  return end && *end == '\0' && mib >= 256 ? int64_t(mib) : 4096;
}

HelperResult runProbeHelper(const std::vector<std::string>& args, double seconds, const std::string& doing,
                            const std::string& crashed) {
  const std::string helper = moduleDirectory() + "/peat-probe";
  if (!fileExists(helper)) throw std::runtime_error("the probe helper is missing: " + helper);
  std::vector<std::string> argv{helper};
  argv.insert(argv.end(), args.begin(), args.end());
  HelperResult r = runHelper(argv, seconds);
  if (!r.started) throw std::runtime_error("cannot start the probe helper: " + r.output);
  if (r.timedOut)
    throw std::runtime_error(doing + " did not finish within " + std::to_string(int(seconds)) +
                             " s in the probe helper; it was not loaded");
  if (r.signal)
    throw std::runtime_error(crashed + " in the probe helper (" + describeSignal(r.signal) + "); it was not loaded");
  return r;
}

}  // namespace peat::sys
