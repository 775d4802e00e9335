// SPDX-License-Identifier: MIT
#pragma once
// The kernel host's wire format (core/plugin/kernel_host.h, app/kernel-host/): one shared-memory
// file holds a control block (a request and its reply) and, after it, the arena with the call's
// tensors. A request names an op kind and, per tensor, its role, dtype, shape and place in the
// arena, so other ops and dtypes (plugin ABI v2) travel the same way. Plain C types only.
//
// Arena layout: every tensor owns whole pages and a PROT_NONE guard page follows each. An input
// starts at its first page (read-only in the host); an output ends within 64 bytes of its guard
// (its start 64-byte aligned), and the bytes of its pages around it hold a canary, so a write past
// either end is seen: by the guard page's fault, or by the canary checked after the call.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/plugin/peat/kernel_abi.h"

namespace peat::plugin::wire {

inline constexpr uint32_t kMagic = 0x50454154;  // "PEAT"
inline constexpr uint32_t kVersion = 3;
inline constexpr int kMaxTensors = 16, kMaxRank = 8, kMaxParams = 16, kMaxScalars = 8;
inline constexpr uint8_t kCanary = 0xA5;  // around outputs: -2.9e-16 as fp32, never a result by chance
inline constexpr uint64_t kOutputAlignment = 64;

enum Role : uint32_t { kInput = 1, kOutput = 2 };

struct Tensor {
  uint32_t role;   // Role
  uint32_t dtype;  // enum peat_dtype (peat/kernel_abi.h)
  uint32_t rank;
  float scale;     // fp8: the tensor's scale (peat_tensor::scale); 1 otherwise
  int64_t shape[kMaxRank];
  uint64_t bytes;
  uint64_t offset;                  // of its first byte, from the start of the arena
  uint64_t regionBegin, regionEnd;  // the pages it owns; the guard page starts at regionEnd
};

struct Request {
  uint32_t magic, version;
  uint64_t sequence;
  uint32_t opKind;  // enum peat_op_kind
  uint32_t tensorCount;
  uint32_t abiVersion;  // 1: peat_kernel_gemm_v1 (params m, n, k); 2: peat_kernel_run_v2 (variant, abiParams)
  uint32_t variant;     // enum peat_variant
  uint64_t arenaBytes;              // the arena's size (the file is arenaStart() + arenaBytes)
  int64_t params[kMaxParams];       // the op's integer parameters (gemm: m, n, k)
  double scalars[kMaxScalars];      // its real ones (unused so far)
  peat_params abiParams;            // ABI v2: the call's parameters, as the kernel receives them
  Tensor tensors[kMaxTensors];
};

enum Status : int32_t {
  kOk = 0,
  kReady = 1,          // the host loaded the plugin (sequence 0)
  kKernelFailed = 2,   // the kernel returned non-zero (returnCode, message: its last error)
  kOutOfBounds = 3,    // a guard page or a canary was hit (tensor, faultOffset, write)
  kCrashed = 4,        // a signal (signal); the host dies after replying
  kBadRequest = 5,     // the host refused the request or could not load the plugin (message)
};

struct Reply {
  uint64_t sequence;
  int32_t status;       // Status
  int32_t returnCode;   // kKernelFailed: the kernel's
  int32_t signal;       // kCrashed, kOutOfBounds by a fault: the signal (0: a canary was found changed)
  int32_t tensor;       // kOutOfBounds: whose guard, canary or read-only pages (-1: none)
  int64_t faultOffset;  // kOutOfBounds: bytes from that tensor's first byte (negative: before it)
  int32_t write;        // kOutOfBounds: 1 a write, 0 a read, -1 unknown
  int32_t loading;      // kCrashed: 1 while loading the plugin, 0 in a call
  char message[256];    // NUL-terminated
  uint64_t failedAllocation;  // bytes of the first allocation the kernel was refused in the call (0: none)
  float scales[kMaxTensors];  // kOk: each tensor's scale after the call (an fp8 output's, as the kernel set it)
};

struct Control {
  Request request;
  Reply reply;
};

std::size_t pageSize();
// The control block, rounded up to whole pages: where the arena starts in the file.
std::size_t arenaStart();

// Places the request's tensors (role, dtype, rank, shape and bytes set) in the arena as described
// above and returns the arena bytes they need, guards included.
uint64_t layout(Request& request);

// Checks a request against the arena it claims to use: magic, version, counts, every tensor's
// region within `arenaBytes`, page aligned, in order, its bytes inside it and matching its shape.
// Empty when fine, else the reason. The host runs it before touching anything.
std::string checkRequest(const Request& request, uint64_t arenaBytes);

}  // namespace peat::plugin::wire
