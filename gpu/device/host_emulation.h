// SPDX-License-Identifier: MIT
#pragma once
// The CUDA/HIP kernel dialect on the host, so that gpu/device/kernels.h compiles with g++ and its
// kernels run on the CPU, unchanged (tests/gpu/host_kernels.cpp checks them against the reference).
// A launch runs its blocks one after another and the threads of a block as fibers (ucontext): each
// runs until __syncthreads(), and a barrier is passed once every thread of the block has reached it,
// so shared memory (`__shared__`: storage that every thread of the running block sees) and barriers
// behave as on a device. Atomics are plain read-modify-writes: one host thread runs everything.
// Include it instead of gpu/device/portable.h (define PEAT_DEVICE_HOST); never in production code.
#include <ucontext.h>

#include <math.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __shared__ static

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct float4 {
  float x, y, z, w;
};
struct uint4 {
  unsigned int x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

// What a kernel reads as its position; set by the launcher for the thread it resumes.
inline dim3 threadIdx, blockIdx, blockDim, gridDim;

inline unsigned int atomicXor(unsigned int* p, unsigned int v) {
  const unsigned int old = *p;
  *p = old ^ v;
  return old;
}
inline unsigned int atomicAdd(unsigned int* p, unsigned int v) {
  const unsigned int old = *p;
  *p = old + v;
  return old;
}
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  const unsigned long long old = *p;
  *p = old + v;
  return old;
}
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
  const unsigned long long old = *p;
  *p = v < old ? v : old;
  return old;
}

namespace peat::gpu::host {

struct Fiber {
  ucontext_t context{};
  std::unique_ptr<char[]> stack;
  dim3 thread;
  bool done = false;
};

struct LaunchState {
  ucontext_t scheduler{};
  Fiber* running = nullptr;
  std::function<void()> body;
  uint64_t barriers = 0;  // barrier passes of this launch (a test can see that the kernel synchronised)
};

inline LaunchState*& current() {
  static LaunchState* state = nullptr;
  return state;
}

inline void fiberEntry() {
  LaunchState* s = current();
  s->body();
  s->running->done = true;  // returning resumes the scheduler (uc_link)
}

// Runs `body` as every thread of a grid x block launch; returns the number of barriers passed.
inline uint64_t launch(dim3 grid, dim3 block, std::function<void()> body) {
  constexpr std::size_t kStack = 64 * 1024;
  const unsigned threads = block.x * block.y * block.z;
  if (threads == 0 || threads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0)
    throw std::invalid_argument("host launch: an empty grid or more than 1024 threads per block");
  LaunchState state;
  state.body = std::move(body);
  LaunchState* outer = current();
  current() = &state;
  std::vector<Fiber> fibers(threads);
  for (Fiber& f : fibers) f.stack = std::make_unique<char[]>(kStack);
  gridDim = grid;
  blockDim = block;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        blockIdx = dim3(bx, by, bz);
        for (unsigned t = 0; t < threads; ++t) {
          Fiber& f = fibers[t];
          f.thread = dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
          f.done = false;
          getcontext(&f.context);
          f.context.uc_stack.ss_sp = f.stack.get();
          f.context.uc_stack.ss_size = kStack;
          f.context.uc_link = &state.scheduler;
          makecontext(&f.context, fiberEntry, 0);
        }
        // rounds: every live thread runs to its next barrier (or its end); a round ends when all have
        bool live = true;
        for (uint64_t round = 0; live; ++round) {
          live = false;
          for (Fiber& f : fibers) {
            if (f.done) continue;
            threadIdx = f.thread;
            state.running = &f;
            swapcontext(&state.scheduler, &f.context);
            live = live || !f.done;
          }
          if (live) ++state.barriers;
        }
      }
  current() = outer;
  return state.barriers;
}

}  // namespace peat::gpu::host

// Yields to the launcher until every thread of the block has arrived.
inline void __syncthreads() {
  peat::gpu::host::LaunchState* s = peat::gpu::host::current();
  swapcontext(&s->running->context, &s->scheduler);
}
