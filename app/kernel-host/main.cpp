// SPDX-License-Identifier: MIT
// peat-kernel-host PLUGIN PARENT_PID MEMORY_MIB: the process a user kernel runs in
// (core/plugin/kernel_host.h). Descriptor 3 is the shared memory (core/plugin/kernel_wire.h), 4 a
// socket to peat. Sets its memory limit (RLIMIT_DATA: heap and private mappings; the shared
// tensors are not counted), loads the plugin, replies "ready", then serves one call per sequence
// number received, until the socket ends. A fault, an abort or any other deadly signal is reported
// in the reply block before this process dies of it; a fault on a guard page or on an input's
// read-only pages is `out_of_bounds`; an allocation refused under the limit is reported with it.
#include <dlfcn.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "base/sys.h"
#include "core/plugin/kernel_wire.h"
#include "core/plugin/peat/kernel_abi.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PEAT_HOST_SANITIZED 1  // the sanitizer owns malloc and reserves terabytes of shadow memory
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define PEAT_HOST_SANITIZED 1
#endif
#endif

namespace {
// Bytes of the first allocation refused in the call in flight (0: none). A kernel that runs out of
// memory then usually dies on the null pointer or of std::bad_alloc; with this its outcome is
// out_of_memory instead of a crash. Lock-free: the signal handler reads it.
std::atomic<uint64_t> g_failedAllocation{0};
static_assert(std::atomic<uint64_t>::is_always_lock_free);

void noteFailedAllocation(std::size_t bytes) {
  uint64_t none = 0;
  g_failedAllocation.compare_exchange_strong(none, bytes ? uint64_t(bytes) : 1);
}
}  // namespace

#if !defined(PEAT_HOST_SANITIZED)
// This executable's allocation functions come first for every library it loads, the plugin's
// included: they forward to glibc's and note a refusal. free() stays glibc's (the same heap).
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);

void* malloc(std::size_t n) noexcept {
  void* p = __libc_malloc(n);
  if (!p && n) noteFailedAllocation(n);
  return p;
}
void* calloc(std::size_t count, std::size_t n) noexcept {
  void* p = __libc_calloc(count, n);
  if (!p && count && n) noteFailedAllocation(n > SIZE_MAX / count ? SIZE_MAX : count * n);
  return p;
}
void* realloc(void* old, std::size_t n) noexcept {
  using Realloc = void* (*)(void*, std::size_t);
  static const Realloc next = reinterpret_cast<Realloc>(::dlsym(RTLD_NEXT, "realloc"));
  void* p = next(old, n);
  if (!p && n) noteFailedAllocation(n);
  return p;
}
void* memalign(std::size_t alignment, std::size_t n) noexcept {
  void* p = __libc_memalign(alignment, n);
  if (!p && n && errno == ENOMEM) noteFailedAllocation(n);
  return p;
}
void* aligned_alloc(std::size_t alignment, std::size_t n) noexcept { return memalign(alignment, n); }
void* valloc(std::size_t n) noexcept { return memalign(std::size_t(::sysconf(_SC_PAGESIZE)), n); }
int posix_memalign(void** out, std::size_t alignment, std::size_t n) noexcept {
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0) return EINVAL;
  void* p = memalign(alignment, n);
  if (!p && n) return ENOMEM;
  *out = p;
  return 0;
}
}
#endif

namespace {

namespace wire = peat::plugin::wire;

constexpr int kMemory = 3, kSocket = 4;

// What the signal handler needs, set between calls only.
unsigned char* g_base = nullptr;  // the mapping: control block, then the arena
uint64_t g_mapped = 0;            // its bytes
uint64_t g_sequence = 0;          // of the request in flight (0: loading)
volatile sig_atomic_t g_inCall = 0, g_loading = 0;
wire::Tensor g_tensors[wire::kMaxTensors];
uint32_t g_tensorCount = 0;

wire::Control* control() { return reinterpret_cast<wire::Control*>(g_base); }
unsigned char* arena() { return g_base + wire::arenaStart(); }

void sendSequence(uint64_t sequence) { (void)::send(kSocket, &sequence, sizeof sequence, MSG_NOSIGNAL); }

void copyMessage(wire::Reply& r, const char* text) {
  std::size_t n = 0;
  for (; text && text[n] && n + 1 < sizeof r.message; ++n) r.message[n] = text[n];
  r.message[n] = '\0';
}

// Async-signal-safe: plain stores, mprotect, send, raise.
void onDeadlySignal(int signal, siginfo_t* info, void* context) {
  ::mprotect(g_base, wire::arenaStart(), PROT_READ | PROT_WRITE);  // read-only during a call
  wire::Reply& r = control()->reply;
  r.sequence = g_sequence;
  r.status = wire::kCrashed;
  r.signal = signal;
  r.tensor = -1;
  r.write = -1;
  r.faultOffset = 0;
  r.loading = g_loading;
  r.message[0] = '\0';
  r.failedAllocation = g_failedAllocation.load();
  if ((signal == SIGSEGV || signal == SIGBUS) && g_inCall && info->si_code > 0) {
    const uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
    const uintptr_t begin = reinterpret_cast<uintptr_t>(arena()), end = reinterpret_cast<uintptr_t>(g_base) + g_mapped;
    const uint64_t page = wire::pageSize();
    if (address >= begin && address < end) {
      const uint64_t at = address - begin;
      for (uint32_t i = 0; i < g_tensorCount; ++i) {
        const wire::Tensor& t = g_tensors[i];
        const bool guard = at >= t.regionEnd && at < t.regionEnd + page;
        const bool readOnly = t.role == wire::kInput && at >= t.regionBegin && at < t.regionEnd;
        if (guard || readOnly) {
          r.status = wire::kOutOfBounds;
          r.tensor = int32_t(i);
          r.faultOffset = int64_t(at) - int64_t(t.offset);
          break;
        }
      }
    }
#if defined(__x86_64__)
    r.write = (static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_ERR] & 2) ? 1 : 0;
#else
    (void)context;
#endif
  }
  std::atomic_thread_fence(std::memory_order_release);
  sendSequence(g_sequence);
  ::raise(signal);  // SA_RESETHAND restored the default action; SA_NODEFER lets it through now
}

void installHandlers() {
  static char stack[1 << 16];  // the handler runs here, so a stack overflow in the kernel is reported too
  stack_t s{};
  s.ss_sp = stack;
  s.ss_size = sizeof stack;
  ::sigaltstack(&s, nullptr);
  struct sigaction a {};
  a.sa_sigaction = onDeadlySignal;
  a.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND | SA_NODEFER;
  sigemptyset(&a.sa_mask);
  for (int signal : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGXCPU, SIGXFSZ, SIGTERM})
    ::sigaction(signal, &a, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGINT, SIG_IGN);  // peat's Ctrl-C cancels its run; this call finishes
}

bool mapFile(uint64_t bytes) {
  struct stat st {};
  if (::fstat(kMemory, &st) != 0 || uint64_t(st.st_size) < bytes) return false;
  // the new mapping first: on failure the old one (and the reply block in it) stays usable
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, kMemory, 0);
  if (p == MAP_FAILED) return false;
  if (g_base) ::munmap(g_base, g_mapped);
  g_base = static_cast<unsigned char*>(p);
  g_mapped = bytes;
  return true;
}

void reply(uint64_t sequence, int32_t status, const char* message = nullptr, int32_t returnCode = 0) {
  wire::Reply& r = control()->reply;
  r.sequence = sequence;
  r.status = status;
  r.returnCode = returnCode;
  r.signal = 0;
  r.tensor = -1;
  r.write = -1;
  r.loading = 0;
  r.failedAllocation = g_failedAllocation.load();
  copyMessage(r, message);
  std::atomic_thread_fence(std::memory_order_release);
  sendSequence(sequence);
}

// Whether a byte of an output's pages outside it lost its canary; `at`: the first such, as an
// offset from the output's start (negative: before it).
bool canaryHit(const wire::Tensor& t, int64_t& at) {
  const unsigned char* a = arena();
  for (uint64_t p = t.regionBegin; p < t.offset; ++p)
    if (a[p] != wire::kCanary) return at = int64_t(p) - int64_t(t.offset), true;
  for (uint64_t p = t.offset + t.bytes; p < t.regionEnd; ++p)
    if (a[p] != wire::kCanary) return at = int64_t(p) - int64_t(t.offset), true;
  return false;
}

struct Plugin {
  std::unique_ptr<peat::sys::SharedLibrary> library;
  int (*gemm)(const float*, const float*, float*, int64_t, int64_t, int64_t) = nullptr;  // ABI v1
  int (*run)(const peat_call*) = nullptr;                                                 // ABI v2
  const char* (*lastError)() = nullptr;
};

// Checks the op's own contract on top of checkRequest: GEMM takes [m,k] and [k,n] into [m,n].
const char* checkGemm(const wire::Request& r) {
  if (r.tensorCount != 3) return "a gemm takes 3 tensors";
  const wire::Tensor &a = r.tensors[0], &b = r.tensors[1], &c = r.tensors[2];
  const int64_t m = r.params[0], n = r.params[1], k = r.params[2];
  if (a.role != wire::kInput || b.role != wire::kInput || c.role != wire::kOutput) return "a gemm's roles are in, in, out";
  if (a.dtype != PEAT_DTYPE_F32 || b.dtype != PEAT_DTYPE_F32 || c.dtype != PEAT_DTYPE_F32) return "a v1 gemm is fp32";
  if (a.rank != 2 || b.rank != 2 || c.rank != 2) return "a gemm's tensors are matrices";
  if (a.shape[0] != m || a.shape[1] != k || b.shape[0] != k || b.shape[1] != n || c.shape[0] != m || c.shape[1] != n)
    return "a gemm's shapes do not match m, n, k";
  return nullptr;
}

// ABI v2: the op kind and variant are the kernel's to check (it declared them); here only that
// inputs come before outputs and there is an output.
const char* checkV2(const wire::Request& r) {
  if (r.opKind < PEAT_OP_GEMM || r.opKind > PEAT_OP_KIND_COUNT) return "an unknown op kind";
  bool output = false;
  for (uint32_t i = 0; i < r.tensorCount; ++i) {
    if (r.tensors[i].role == wire::kOutput) output = true;
    else if (output) return "an input after an output";
  }
  return output ? nullptr : "a call without an output";
}

void serve(const Plugin& plugin, const wire::Request& r) {
  const uint64_t page = wire::pageSize();
  unsigned char* a = arena();
  for (uint32_t i = 0; i < r.tensorCount; ++i) {
    const wire::Tensor& t = r.tensors[i];
    if (t.role == wire::kOutput) {
      std::memset(a + t.regionBegin, wire::kCanary, t.offset - t.regionBegin);
      std::memset(a + t.offset, 0xFF, t.bytes);  // NaN in every float format: an element left unwritten shows
      std::memset(a + t.offset + t.bytes, wire::kCanary, t.regionEnd - t.offset - t.bytes);
    } else {
      ::mprotect(a + t.regionBegin, t.regionEnd - t.regionBegin, PROT_READ);
    }
    ::mprotect(a + t.regionEnd, page, PROT_NONE);
    g_tensors[i] = t;
  }
  g_tensorCount = r.tensorCount;
  ::mprotect(g_base, wire::arenaStart(), PROT_READ);  // the request and the reply: not the kernel's
  // ABI v2: the tensors in the request's order, inputs first, as peat_tensor descriptions
  peat_tensor inputs[wire::kMaxTensors], outputs[wire::kMaxTensors];
  peat_call call{};
  if (r.abiVersion == 2) {
    for (uint32_t i = 0; i < r.tensorCount; ++i) {
      const wire::Tensor& t = r.tensors[i];
      peat_tensor& p = t.role == wire::kInput ? inputs[call.input_count++] : outputs[call.output_count++];
      p = peat_tensor{};
      p.data = a + t.offset;
      p.dtype = t.dtype;
      p.rank = t.rank;
      for (uint32_t d = 0; d < t.rank; ++d) p.shape[d] = t.shape[d];
      p.scale = t.role == wire::kInput ? t.scale : 1.0f;
    }
    call.op_kind = r.opKind;
    call.variant = r.variant;
    call.inputs = inputs;
    call.outputs = outputs;
    call.params = r.abiParams;
  }
  g_failedAllocation.store(0);
  g_inCall = 1;
  const int rc = r.abiVersion == 2 ? plugin.run(&call)
                                   : plugin.gemm(reinterpret_cast<const float*>(a + r.tensors[0].offset),
                                                 reinterpret_cast<const float*>(a + r.tensors[1].offset),
                                                 reinterpret_cast<float*>(a + r.tensors[2].offset), r.params[0],
                                                 r.params[1], r.params[2]);
  g_inCall = 0;
  ::mprotect(g_base, g_mapped, PROT_READ | PROT_WRITE);
  g_tensorCount = 0;
  for (uint32_t i = 0; i < r.tensorCount; ++i) {
    int64_t at = 0;
    if (r.tensors[i].role == wire::kOutput && canaryHit(r.tensors[i], at)) {
      wire::Reply& out = control()->reply;
      out.sequence = r.sequence;
      out.status = wire::kOutOfBounds;
      out.returnCode = rc;
      out.signal = 0;  // seen by the canary: this process lives on
      out.tensor = int32_t(i);
      out.faultOffset = at;
      out.write = 1;
      out.loading = 0;
      out.message[0] = '\0';
      out.failedAllocation = g_failedAllocation.load();
      std::atomic_thread_fence(std::memory_order_release);
      sendSequence(r.sequence);
      return;
    }
  }
  if (rc != 0) {
    const char* why = plugin.lastError ? plugin.lastError() : nullptr;
    reply(r.sequence, wire::kKernelFailed, why, rc);
    return;
  }
  for (uint32_t i = 0, o = 0; i < r.tensorCount && i < uint32_t(wire::kMaxTensors); ++i)
    control()->reply.scales[i] = r.tensors[i].role == wire::kOutput && r.abiVersion == 2 ? outputs[o++].scale : 1.0f;
  reply(r.sequence, wire::kOk);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  // Dies with peat, even when peat is killed outright: a hanging kernel must not outlive it.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (std::to_string(::getppid()) != argv[2]) return 3;
  char* end = nullptr;
  const unsigned long long memoryMiB = std::strtoull(argv[3], &end, 10);
  if (end == argv[3] || *end != '\0' || memoryMiB == 0 || memoryMiB > (1ULL << 40)) return 2;
#if !defined(PEAT_HOST_SANITIZED)
  // before the plugin loads: its constructors count too
  const rlimit limit{rlim_t(memoryMiB) << 20, rlim_t(memoryMiB) << 20};
  if (::setrlimit(RLIMIT_DATA, &limit) != 0) return 6;
#endif
  installHandlers();
  if (!mapFile(wire::arenaStart())) return 4;
  Plugin plugin;
  g_loading = 1;
  try {
    plugin.library = std::make_unique<peat::sys::SharedLibrary>(argv[1]);
    auto optional = [&](const char* name) -> void* {
      try {
        return plugin.library->symbol(name);
      } catch (const std::exception&) {
        return nullptr;
      }
    };
    // a library exporting the v2 info is a v2 plugin (as the probe decided)
    if (optional("peat_kernel_info_v2")) {
      plugin.run = reinterpret_cast<decltype(plugin.run)>(plugin.library->symbol("peat_kernel_run_v2"));
      plugin.lastError = reinterpret_cast<decltype(plugin.lastError)>(optional("peat_kernel_last_error_v2"));
    } else {
      plugin.gemm = reinterpret_cast<decltype(plugin.gemm)>(plugin.library->symbol("peat_kernel_gemm_v1"));
    }
    if (!plugin.lastError)
      plugin.lastError = reinterpret_cast<decltype(plugin.lastError)>(optional("peat_kernel_last_error_v1"));
  } catch (const std::exception& e) {
    reply(0, wire::kBadRequest, e.what());
    return 1;
  }
  g_loading = 0;
  reply(0, wire::kReady);
  for (;;) {
    uint64_t sequence = 0;
    const ssize_t n = ::recv(kSocket, &sequence, sizeof sequence, 0);
    if (n == 0) return 0;  // peat closed the socket: done
    if (n < 0 && errno == EINTR) continue;
    if (n != ssize_t(sizeof sequence)) return 5;
    std::atomic_thread_fence(std::memory_order_acquire);
    const wire::Request r = control()->request;
    g_sequence = sequence;
    const uint64_t file = wire::arenaStart() + r.arenaBytes;
    if (r.sequence != sequence || r.arenaBytes > (uint64_t(1) << 46)) {
      reply(sequence, wire::kBadRequest, "the request does not carry the sequence sent");
      continue;
    }
    if (file != g_mapped && !mapFile(file)) {
      reply(sequence, wire::kBadRequest, "cannot map the arena the request names");
      continue;
    }
    const std::string bad = wire::checkRequest(r, r.arenaBytes);
    const char* opBad = r.abiVersion == 2 ? (plugin.run ? checkV2(r) : "a v1 plugin takes no v2 call")
                        : !plugin.gemm       ? "a v2 plugin takes no v1 call"
                        : r.opKind == PEAT_OP_GEMM ? checkGemm(r)
                                                   : "an op kind this host does not serve";
    if (!bad.empty() || opBad) {
      reply(sequence, wire::kBadRequest, !bad.empty() ? bad.c_str() : opBad);
      continue;
    }
    serve(plugin, r);
  }
}
