// SPDX-License-Identifier: MIT
#include "core/plugin/kernel_host.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/sys.h"
#include "core/plugin/dtypes.h"
#include "core/plugin/peat/kernel_abi.h"
#include "core/plugin/plugin_probe.h"
#include "core/util/helper_process.h"

namespace peat::plugin {

namespace {

using Clock = std::chrono::steady_clock;

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", s);
  return text;
}

std::string bytesText(int64_t n) { return std::to_string(n) + (n == 1 ? " byte" : " bytes"); }

std::string shapeText(const wire::Tensor& t) {
  std::string s = "[";
  for (uint32_t d = 0; d < t.rank && d < uint32_t(wire::kMaxRank); ++d) s += (d ? "x" : "") + std::to_string(t.shape[d]);
  return s + "]";
}

}  // namespace

std::string signalName(int signal) {
  switch (signal) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGABRT: return "SIGABRT";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGSYS: return "SIGSYS";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    default: return "SIG" + std::to_string(signal);
  }
}

std::string CallOutcome::text() const {
  switch (kind) {
    case Ok: return "ok";
    case KernelFailed: return "kernel_error";
    case OutOfBounds: return "out_of_bounds";
    case Crashed: return "crash:" + signalName(signal);
    case Hung: return "hang";
    case Exited: return "exit:" + std::to_string(exitCode);
    case OutOfMemory: return "out_of_memory";
  }
  return "unknown";
}

HostLimits hostLimitsFromEnvironment() {
  HostLimits limits;
  if (const char* mib = std::getenv("PEAT_KERNEL_MEMORY_MIB"); mib && *mib) {
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(mib, &end, 10);
    if (end == mib || *end != '\0' || errno != 0 || n < 64 || n > (int64_t(1) << 40))
      throw PluginError("PEAT_KERNEL_MEMORY_MIB='" + std::string(mib) +
                        "' is not a number of MiB from 64 up, e.g. 4096 (the default)");
    limits.memoryMiB = n;
  }
  const char* text = std::getenv("PEAT_KERNEL_TIMEOUT");
  if (!text || !*text) return limits;
  const std::string s = text;
  char* end = nullptr;
  const double floor = std::strtod(s.c_str(), &end);
  double perGflop = limits.secondsPerGflop;
  bool good = end != s.c_str() && std::isfinite(floor) && floor > 0;
  if (good && *end == ',') {
    const char* second = end + 1;
    perGflop = std::strtod(second, &end);
    good = end != second && std::isfinite(perGflop) && perGflop >= 0;
  }
  if (!good || *end != '\0')
    throw PluginError("PEAT_KERNEL_TIMEOUT='" + s +
                      "' is not SECONDS[,SECONDS_PER_GFLOP] with SECONDS > 0, e.g. 5 or 5,10");
  limits.floorSeconds = floor;
  limits.secondsPerGflop = perGflop;
  return limits;
}

KernelHost::KernelHost(std::string path, std::string name, HostLimits limits)
    : path_(std::move(path)), name_(std::move(name)), limits_(limits) {
  memfd_ = ::memfd_create("peat-kernel-host", MFD_CLOEXEC);
  if (memfd_ < 0) throw PluginError(std::string("cannot create the kernel host's shared memory: ") + std::strerror(errno));
  try {
    ensureArena(1 << 20);
    start();
  } catch (...) {
    stop();
    throw;
  }
}

KernelHost::~KernelHost() { stop(); }

void KernelHost::stop() {
  if (pid_ > 0) {
    int signal = 0, exitCode = 0;
    ::shutdown(socket_, SHUT_RDWR);  // the host sees the end of its requests and exits
    reap(false, 1.0, signal, exitCode);
  }
  if (map_) ::munmap(map_, mapped_);
  map_ = nullptr;
  if (memfd_ >= 0) ::close(memfd_);
  memfd_ = -1;
}

void KernelHost::ensureArena(uint64_t arenaBytes) {
  const uint64_t need = wire::arenaStart() + arenaBytes;
  if (map_ && need <= mapped_) return;
  const uint64_t page = wire::pageSize();
  uint64_t size = std::max<uint64_t>(need, mapped_ + mapped_ / 2);
  size = (size + page - 1) / page * page;
  if (::ftruncate(memfd_, off_t(size)) != 0)
    throw PluginError("cannot grow the kernel host's shared memory to " + std::to_string(size >> 20) +
                      " MiB: " + std::strerror(errno));
  if (map_) ::munmap(map_, mapped_);
  map_ = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd_, 0);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    mapped_ = 0;
    throw PluginError(std::string("cannot map the kernel host's shared memory: ") + std::strerror(errno));
  }
  mapped_ = size;
}

void KernelHost::start() {
  const std::string helper = sys::moduleDirectory() + "/peat-kernel-host";
  if (!sys::fileExists(helper))
    throw PluginError("the kernel host is missing: " + helper + " (run a trusted kernel in peat with --in-process)");
  auto* control = static_cast<wire::Control*>(map_);
  std::memset(&control->reply, 0, sizeof control->reply);
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
    throw PluginError(std::string("cannot create the kernel host's socket: ") + std::strerror(errno));
  // The child's descriptors 3 and 4; copied above 9 first so that dup2 onto 3 and 4 clobbers nothing.
  const int memHigh = ::fcntl(memfd_, F_DUPFD_CLOEXEC, 10), sockHigh = ::fcntl(pair[1], F_DUPFD_CLOEXEC, 10);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  // the plugin's own messages would mix into peat's (machine-readable events go to stderr)
  if (!std::getenv("PEAT_KERNEL_HOST_STDERR"))
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, memHigh, 3);
  posix_spawn_file_actions_adddup2(&actions, sockHigh, 4);
  posix_spawn_file_actions_addclosefrom_np(&actions, 5);
  // Its own process group: a Ctrl-C for peat cancels the run, it does not kill the call in flight.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigfillset(&defaults);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  const std::string parent = std::to_string(::getpid()), memory = std::to_string(limits_.memoryMiB);
  std::vector<char*> argv{const_cast<char*>(helper.c_str()), const_cast<char*>(path_.c_str()),
                          const_cast<char*>(parent.c_str()), const_cast<char*>(memory.c_str()), nullptr};
  pid_t child = -1;
  const int rc = ::posix_spawn(&child, helper.c_str(), &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  ::close(memHigh);
  ::close(sockHigh);
  ::close(pair[1]);
  if (rc != 0) {
    ::close(pair[0]);
    throw PluginError("cannot start the kernel host " + helper + ": " + std::strerror(rc));
  }
  pid_ = child;
  socket_ = pair[0];
  ++starts_;
  bool timedOut = false;
  const bool ready = awaitReply(0, limits_.loadSeconds, timedOut);
  wire::Reply reply = control->reply;
  reply.message[sizeof reply.message - 1] = '\0';
  if (ready && reply.status == wire::kReady) return;
  int signal = 0, exitCode = 0;
  reap(true, 1.0, signal, exitCode);
  const std::string who = "plugin '" + name_ + "' (" + path_ + ")";
  if (timedOut)
    throw PluginError(who + " did not finish loading in the kernel host within " + seconds(limits_.loadSeconds) +
                      " s and was stopped; it was not used");
  if (ready && reply.status == wire::kBadRequest)
    throw PluginError(who + " cannot be loaded in the kernel host: " + reply.message);
  if (ready && reply.status == wire::kCrashed) signal = reply.signal;
  if (signal)
    throw PluginError(who + " passed its probe but crashed while loading in the kernel host (" +
                      sys::describeSignal(signal) + "): its constructors fail outside the probe; it was not used");
  throw PluginError(who + " ended the kernel host while loading (exit code " + std::to_string(exitCode) +
                    "); it was not used");
}

void KernelHost::reap(bool kill, double waitSeconds, int& signal, int& exitCode) {
  signal = 0;
  exitCode = 0;
  if (pid_ <= 0) return;
  if (kill) ::kill(pid_, SIGKILL);
  int status = 0;
  const auto deadline = Clock::now() + std::chrono::duration<double>(waitSeconds);
  pid_t done = 0;
  while ((done = ::waitpid(pid_, &status, WNOHANG)) == 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (done == 0) {  // a host that reported its crash but lives on, or ignores the end of its requests
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (done >= 0 || errno != ECHILD) {
    if (WIFSIGNALED(status)) signal = WTERMSIG(status);
    else if (WIFEXITED(status)) exitCode = WEXITSTATUS(status);
  }
  pid_ = -1;
  if (socket_ >= 0) ::close(socket_);
  socket_ = -1;
}

bool KernelHost::awaitReply(uint64_t sequence, double limit, bool& timedOut) {
  timedOut = false;
  const auto deadline = Clock::now() + std::chrono::duration<double>(limit);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timedOut = true;
      return false;
    }
    pollfd p{socket_, POLLIN, 0};
    const int n = ::poll(&p, 1, int(std::min<long long>(left, 1 << 30)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    uint64_t got = 0;
    const ssize_t r = ::recv(socket_, &got, sizeof got, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (r != ssize_t(sizeof got)) return false;  // the host ended
    std::atomic_thread_fence(std::memory_order_acquire);
    if (got == sequence && static_cast<wire::Control*>(map_)->reply.sequence == sequence) return true;
  }
}

std::string KernelHost::describe(const CallOutcome& o, const wire::Reply& reply, const wire::Request& request) const {
  const std::string who = "plugin '" + name_ + "'";
  switch (o.kind) {
    case CallOutcome::Ok: return "";
    case CallOutcome::KernelFailed:
      return who + " failed (code " + std::to_string(o.returnCode) + ")" +
             (reply.message[0] ? std::string(": ") + reply.message : std::string());
    case CallOutcome::Hung: return who + " did not return within " + seconds(limits_.seconds(0)) + " s";
    case CallOutcome::Exited: return who + " ended its kernel host (exit code " + std::to_string(o.exitCode) + ")";
    case CallOutcome::Crashed: return who + " crashed in the kernel host (" + sys::describeSignal(o.signal) + ")";
    case CallOutcome::OutOfMemory:
      return who + " ran out of memory in the kernel host: an allocation of " + bytesText(int64_t(o.failedAllocation)) +
             " failed under its limit of " + std::to_string(limits_.memoryMiB) + " MiB (PEAT_KERNEL_MEMORY_MIB), then " +
             (o.signal ? "it crashed (" + sys::describeSignal(o.signal) + ")"
                       : "it failed (code " + std::to_string(o.returnCode) + ")");
    case CallOutcome::OutOfBounds: break;
  }
  if (reply.tensor < 0 || uint32_t(reply.tensor) >= request.tensorCount)
    return who + " accessed memory outside its tensors";
  const wire::Tensor& t = request.tensors[reply.tensor];
  const bool output = t.role == wire::kOutput;
  const std::string tensor = std::string(output ? "output " : "input ") + std::to_string(reply.tensor) + " " +
                             shapeText(t);
  const std::string how = reply.write == 1 ? "wrote" : reply.write == 0 ? "read" : "accessed";
  const int64_t at = reply.faultOffset;
  const std::string where = " (" + bytesText(int64_t(t.bytes)) + ") at byte " + std::to_string(at) + " of it" +
                            (reply.signal ? " (a guard page)" : "");
  if (at < 0) return who + " " + how + " before the start of " + tensor + where;
  if (uint64_t(at) >= t.bytes) return who + " " + how + " past the end of " + tensor + where;
  return who + " wrote into " + tensor + ", which is read-only, at byte " + std::to_string(at) + " of it";
}

CallOutcome KernelHost::gemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  std::vector<Arg> args(3);
  args[0] = {wire::kInput, PEAT_DTYPE_F32, {m, k}, a, nullptr};
  args[1] = {wire::kInput, PEAT_DTYPE_F32, {k, n}, b, nullptr};
  args[2] = {wire::kOutput, PEAT_DTYPE_F32, {m, n}, nullptr, c};
  return call(PEAT_OP_GEMM, args, {m, n, k}, 2.0 * double(m) * double(n) * double(k));
}

CallOutcome KernelHost::call(uint32_t opKind, const std::vector<Arg>& args, const std::vector<int64_t>& params,
                             double flops) {
  if (params.size() > std::size_t(wire::kMaxParams)) throw PluginError("a kernel host call takes at most 16 parameters");
  wire::Request request{};
  request.abiVersion = 1;
  request.opKind = opKind;
  for (std::size_t i = 0; i < params.size(); ++i) request.params[i] = params[i];
  std::vector<Arg> copy = args;
  return exchange(request, copy, flops);
}

CallOutcome KernelHost::callV2(uint32_t opKind, uint32_t variant, std::vector<Arg>& args, const peat_params& params,
                               double flops) {
  wire::Request request{};
  request.abiVersion = 2;
  request.opKind = opKind;
  request.variant = variant;
  request.abiParams = params;
  return exchange(request, args, flops);
}

CallOutcome KernelHost::exchange(wire::Request& request, std::vector<Arg>& args, double flops) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (args.empty() || args.size() > std::size_t(wire::kMaxTensors))
    throw PluginError("a kernel host call takes 1 to 16 tensors");
  CallOutcome outcome;
  if (pid_ <= 0) {  // the last call ended the host: a new one for this call
    try {
      start();
      failedStarts_ = 0;
    } catch (const PluginError& e) {
      if (++failedStarts_ >= 3)
        throw PluginError(std::string(e.what()) + " (the kernel host could not be started three times in a row)");
      outcome.kind = CallOutcome::Crashed;
      outcome.message = e.what();
      return outcome;
    }
  }
  request.magic = wire::kMagic;
  request.version = wire::kVersion;
  request.sequence = ++sequence_;
  request.tensorCount = uint32_t(args.size());
  for (std::size_t i = 0; i < args.size(); ++i) {
    wire::Tensor& t = request.tensors[i];
    const Arg& a = args[i];
    if (a.shape.size() > std::size_t(wire::kMaxRank)) throw PluginError("a kernel host tensor has more than 8 dimensions");
    t.role = a.role;
    t.dtype = a.dtype;
    t.rank = uint32_t(a.shape.size());
    t.scale = a.scale;
    uint64_t count = 1;
    for (std::size_t d = 0; d < a.shape.size(); ++d) {
      t.shape[d] = a.shape[d];
      count *= uint64_t(a.shape[d]);
    }
    t.bytes = count * dtypeSize(a.dtype);
  }
  const uint64_t needed = wire::layout(request);
  ensureArena(needed);
  request.arenaBytes = mapped_ - wire::arenaStart();
  auto* base = static_cast<unsigned char*>(map_);
  unsigned char* arena = base + wire::arenaStart();
  for (std::size_t i = 0; i < args.size(); ++i)
    if (args[i].role == wire::kInput && request.tensors[i].bytes)
      std::memcpy(arena + request.tensors[i].offset, args[i].in, request.tensors[i].bytes);
  auto* control = static_cast<wire::Control*>(map_);
  control->request = request;
  std::memset(&control->reply, 0, sizeof control->reply);
  std::atomic_thread_fence(std::memory_order_release);
  bool timedOut = false, replied = false;
  if (::send(socket_, &request.sequence, sizeof request.sequence, MSG_NOSIGNAL) == ssize_t(sizeof request.sequence))
    replied = awaitReply(request.sequence, limits_.seconds(flops), timedOut);
  wire::Reply reply = control->reply;
  reply.message[sizeof reply.message - 1] = '\0';
  bool hostAlive = true;
  if (replied) {
    switch (reply.status) {
      case wire::kOk: break;
      case wire::kKernelFailed:
        outcome.kind = CallOutcome::KernelFailed;
        outcome.returnCode = reply.returnCode;
        break;
      case wire::kOutOfBounds:
        outcome.kind = CallOutcome::OutOfBounds;
        outcome.signal = reply.signal;
        hostAlive = reply.signal == 0;  // a canary: the host lives on; a guard page: it dies of the fault
        break;
      case wire::kCrashed:
        outcome.kind = CallOutcome::Crashed;
        outcome.signal = reply.signal;
        hostAlive = false;
        break;
      case wire::kBadRequest: {
        int signal = 0, exitCode = 0;
        reap(true, 1.0, signal, exitCode);
        throw PluginError(std::string("the kernel host refused a call: ") + reply.message);
      }
      default: outcome.kind = CallOutcome::Crashed, hostAlive = false;  // a reply scribbled over
    }
  } else {
    hostAlive = false;
    outcome.kind = timedOut ? CallOutcome::Hung : CallOutcome::Crashed;
  }
  // A crash or an error after an allocation failed under the memory limit: the kernel ran out of
  // memory. Its host is not reused (the kernel may hold all it got).
  const bool outOfMemory = replied && reply.failedAllocation > 0 &&
                           (outcome.kind == CallOutcome::Crashed || outcome.kind == CallOutcome::KernelFailed);
  if (outOfMemory) {
    outcome.kind = CallOutcome::OutOfMemory;
    outcome.failedAllocation = reply.failedAllocation;
    hostAlive = false;
  }
  if (!hostAlive) {
    int signal = 0, exitCode = 0;
    reap(timedOut || outOfMemory, 2.0, signal, exitCode);
    if (outcome.kind == CallOutcome::Crashed && outcome.signal == 0) {
      outcome.signal = signal;
      if (signal == 0) outcome.kind = CallOutcome::Exited, outcome.exitCode = exitCode;
    }
  }
  if (outcome.kind == CallOutcome::Hung) {
    outcome.message = "plugin '" + name_ + "' did not return within " + seconds(limits_.seconds(flops)) +
                      " s (PEAT_KERNEL_TIMEOUT) and its kernel host was stopped";
  } else {
    outcome.message = describe(outcome, reply, request);
  }
  if (outcome.ok())
    for (std::size_t i = 0; i < args.size(); ++i)
      if (args[i].role == wire::kOutput) {
        if (request.tensors[i].bytes) std::memcpy(args[i].out, arena + request.tensors[i].offset, request.tensors[i].bytes);
        args[i].scale = reply.scales[i];
      }
  return outcome;
}

}  // namespace peat::plugin
