// SPDX-License-Identifier: MIT
#pragma once
// The device kernels, one source for CUDA and HIP. Kernel syntax (__global__, blockIdx, atomics,
// __shared__) is common to both; the per-element math is gpu/device/math.h, which the CPU
// reference compiles too. Every kernel is a grid-stride loop, so any launch size is correct.
#include <cstdint>

#include "gpu/device/portable.h"  // first: the device intrinsics math.h uses
#include "gpu/device/math.h"

namespace peat::gpu::kernels {

using u64 = unsigned long long;

// The layout of peat::gpu::BitFlip (uint64 index, uint32 mask, 4 bytes padding), uploaded as is.
struct DeviceFlip {
  u64 index;
  unsigned int mask;
  unsigned int pad;
};

__device__ inline u64 globalThread() { return u64(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline u64 gridThreads() { return u64(gridDim.x) * blockDim.x; }

// One thread per flip, so cost follows the number of flips, not the buffer size. atomicXor makes
// repeated indices compose exactly as the sequential CPU reference does.
__global__ void sparseBitFlip(unsigned int* words, const DeviceFlip* flips, u64 count) {
  for (u64 i = globalThread(); i < count; i += gridThreads()) atomicXor(&words[flips[i].index], flips[i].mask);
}

__global__ void stuckAt(unsigned int* words, u64 first, u64 count, unsigned int mask, int value) {
  for (u64 i = globalThread(); i < count; i += gridThreads()) {
    const unsigned int w = words[first + i];
    words[first + i] = value ? (w | mask) : (w & ~mask);
  }
}

__global__ void initRangeResult(u64* result) {
  result[0] = 0;
  result[1] = ~0ull;
}

// One pass: each thread counts its violations and keeps its first; a block folds them in shared
// memory and adds one count and one minimum to the result. Four floats per load where possible.
template <bool PerElement>
__global__ void rangeCheck(const float* values, u64 n, const float* lo, const float* hi, float low, float high,
                           u64* result) {
  u64 count = 0, first = ~0ull;
  const u64 quads = n / 4;
  const float4* v4 = reinterpret_cast<const float4*>(values);
  const float4* lo4 = reinterpret_cast<const float4*>(lo);
  const float4* hi4 = reinterpret_cast<const float4*>(hi);
  for (u64 q = globalThread(); q < quads; q += gridThreads()) {
    const float4 v = v4[q];
    float4 a = make_float4(low, low, low, low), b = make_float4(high, high, high, high);
    if (PerElement) {
      a = lo4[q];
      b = hi4[q];
    }
    const bool bad[4] = {!math::inRange(v.x, a.x, b.x), !math::inRange(v.y, a.y, b.y), !math::inRange(v.z, a.z, b.z),
                         !math::inRange(v.w, a.w, b.w)};
    for (int k = 0; k < 4; ++k)
      if (bad[k]) {
        ++count;
        first = first < 4 * q + k ? first : 4 * q + k;
      }
  }
  for (u64 i = 4 * quads + globalThread(); i < n; i += gridThreads())
    if (!math::inRange(values[i], PerElement ? lo[i] : low, PerElement ? hi[i] : high)) {
      ++count;
      first = first < i ? first : i;
    }
  __shared__ u64 blockCount, blockFirst;
  if (threadIdx.x == 0) {
    blockCount = 0;
    blockFirst = ~0ull;
  }
  __syncthreads();
  if (count) {
    atomicAdd(&blockCount, count);
    atomicMin(&blockFirst, first);
  }
  __syncthreads();
  if (threadIdx.x == 0 && blockCount) {
    atomicAdd(&result[0], blockCount);
    atomicMin(&result[1], blockFirst);
  }
}

// The analyzer's histograms. Bit counts stay in each thread's registers; the ULP and |error| bins
// are shared-memory counters; each block adds its counts to the result once.
inline constexpr int kHistCounters = 1 + 32 + 33 + 291;  // mismatched, bits, log2 ULP, log2 |error|

__device__ inline void countPair(unsigned int g, unsigned int c, unsigned int* bits, unsigned int* shared) {
  const math::PairBins p = math::classifyPair(g, c);
  if (!p.diff) return;
#pragma unroll
  for (int b = 0; b < 32; ++b) bits[b] += (p.diff >> b) & 1u;
  atomicAdd(&shared[0], 1u);
  if (p.ulp >= 0) atomicAdd(&shared[1 + 32 + p.ulp], 1u);
  if (p.abs >= 0) atomicAdd(&shared[1 + 32 + 33 + p.abs], 1u);
}

// A block's counters are 32-bit: the host launches enough blocks that none sees 2^31 elements.
__global__ void errorHistograms(const unsigned int* golden, const unsigned int* candidate, u64 n, u64* result) {
  __shared__ unsigned int shared[kHistCounters];
  for (int i = threadIdx.x; i < kHistCounters; i += blockDim.x) shared[i] = 0;
  __syncthreads();
  unsigned int bits[32];
#pragma unroll
  for (int b = 0; b < 32; ++b) bits[b] = 0;
  const u64 quads = n / 4;
  const uint4* g4 = reinterpret_cast<const uint4*>(golden);
  const uint4* c4 = reinterpret_cast<const uint4*>(candidate);
  for (u64 q = globalThread(); q < quads; q += gridThreads()) {
    const uint4 g = g4[q], c = c4[q];
    if (g.x == c.x && g.y == c.y && g.z == c.z && g.w == c.w) continue;  // the common case: identical
    countPair(g.x, c.x, bits, shared);
    countPair(g.y, c.y, bits, shared);
    countPair(g.z, c.z, bits, shared);
    countPair(g.w, c.w, bits, shared);
  }
  for (u64 i = 4 * quads + globalThread(); i < n; i += gridThreads()) countPair(golden[i], candidate[i], bits, shared);
#pragma unroll
  for (int b = 0; b < 32; ++b)
    if (bits[b]) atomicAdd(&shared[1 + b], bits[b]);
  __syncthreads();
  for (int i = threadIdx.x; i < kHistCounters; i += blockDim.x)
    if (shared[i]) atomicAdd(&result[i], u64(shared[i]));
}

// --- GEMMs: C[m x n] = A[m x k] * B[k x n], row-major fp32 ------------------------------------------

inline constexpr int kTile = 16;

// Naive, TileEdge (edge != 0: the last column of every 16-column tile reads the next column of B),
// HalfInputs emulated (half != 0: inputs rounded to fp16 first). One thread per output, fmaf over k.
__global__ void gemmNaive(const float* a, const float* b, float* c, u64 m, u64 n, u64 k, int edge, int half) {
  for (u64 e = globalThread(); e < m * n; e += gridThreads()) {
    const u64 i = e / n, j = e % n;
    const u64 col = (edge && j % kTile == kTile - 1 && j + 1 < n) ? j + 1 : j;
    float acc = 0;
    for (u64 t = 0; t < k; ++t) {
      const float x = a[i * k + t], y = b[t * n + col];
      acc = half ? fmaf(math::roundToHalf(x), math::roundToHalf(y), acc) : fmaf(x, y, acc);
    }
    c[i * n + j] = acc;
  }
}

// Shared-memory tiles, 16 x 16 threads per block, one output each; the same fmaf order as gemmNaive.
__global__ void gemmTiled(const float* a, const float* b, float* c, u64 m, u64 n, u64 k) {
  __shared__ float as[kTile][kTile];
  __shared__ float bs[kTile][kTile + 1];
  const u64 row = u64(blockIdx.y) * kTile + threadIdx.y, col = u64(blockIdx.x) * kTile + threadIdx.x;
  float acc = 0;
  for (u64 t0 = 0; t0 < k; t0 += kTile) {
    as[threadIdx.y][threadIdx.x] = row < m && t0 + threadIdx.x < k ? a[row * k + t0 + threadIdx.x] : 0.f;
    bs[threadIdx.y][threadIdx.x] = col < n && t0 + threadIdx.y < k ? b[(t0 + threadIdx.y) * n + col] : 0.f;
    __syncthreads();
    const int steps = k - t0 < u64(kTile) ? int(k - t0) : kTile;
    for (int t = 0; t < steps; ++t) acc = fmaf(as[threadIdx.y][t], bs[t][threadIdx.x], acc);
    __syncthreads();
  }
  if (row < m && col < n) c[row * n + col] = acc;
}

// Split-K, first pass: partial[p][i][j] over k in [k p / parts, k (p + 1) / parts).
__global__ void gemmSplitKPartial(const float* a, const float* b, float* partial, u64 m, u64 n, u64 k, u64 parts) {
  for (u64 e = globalThread(); e < parts * m * n; e += gridThreads()) {
    const u64 p = e / (m * n), i = (e / n) % m, j = e % n;
    float acc = 0;
    for (u64 t = k * p / parts; t < k * (p + 1) / parts; ++t) acc = fmaf(a[i * k + t], b[t * n + j], acc);
    partial[e] = acc;
  }
}

// Split-K, second pass: the partial sums added in part order.
__global__ void gemmSplitKReduce(const float* partial, float* c, u64 mn, u64 parts) {
  for (u64 e = globalThread(); e < mn; e += gridThreads()) {
    float acc = 0;
    for (u64 p = 0; p < parts; ++p) acc += partial[p * mn + e];
    c[e] = acc;
  }
}

// Golden where no vendor library is used: exact products summed in double, rounded once.
__global__ void gemmDouble(const float* a, const float* b, float* c, u64 m, u64 n, u64 k) {
  for (u64 e = globalThread(); e < m * n; e += gridThreads()) {
    const u64 i = e / n, j = e % n;
    double acc = 0;
    for (u64 t = 0; t < k; ++t) acc += double(a[i * k + t]) * double(b[t * n + j]);
    c[e] = float(acc);
  }
}

#if defined(PEAT_DEVICE_CUDA)
// HalfInputs on tensor cores: inputs converted to fp16 (round to nearest even) into buffers padded
// to multiples of 16 with zeros; one warp per 16 x 16 output tile, fp32 accumulation (WMMA).
__global__ void toHalfPadded(const float* src, __half* dst, u64 rows, u64 cols, u64 paddedRows, u64 paddedCols) {
  for (u64 e = globalThread(); e < paddedRows * paddedCols; e += gridThreads()) {
    const u64 r = e / paddedCols, c = e % paddedCols;
    dst[e] = r < rows && c < cols ? __float2half_rn(src[r * cols + c]) : __float2half_rn(0.f);
  }
}

__global__ void gemmWmma(const __half* a, const __half* b, float* c, u64 mp, u64 np, u64 kp) {
  using namespace nvcuda;
  const u64 warp = globalThread() / 32, across = np / 16;
  if (warp >= (mp / 16) * across) return;  // whole warps leave together
  const u64 ti = warp / across, tj = warp % across;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.f);
  for (u64 t = 0; t < kp; t += 16) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
    wmma::load_matrix_sync(fa, a + ti * 16 * kp + t, unsigned(kp));
    wmma::load_matrix_sync(fb, b + t * np + tj * 16, unsigned(np));
    wmma::mma_sync(acc, fa, fb, acc);
  }
  wmma::store_matrix_sync(c + ti * 16 * np + tj * 16, acc, unsigned(np), wmma::mem_row_major);
}

__global__ void unpad(const float* src, float* dst, u64 m, u64 n, u64 paddedCols) {
  for (u64 e = globalThread(); e < m * n; e += gridThreads()) dst[e] = src[(e / n) * paddedCols + e % n];
}
#endif

}  // namespace peat::gpu::kernels
