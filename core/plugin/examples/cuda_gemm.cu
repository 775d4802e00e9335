// SPDX-License-Identifier: MIT
// Example user kernel on CUDA: a shared-memory tiled GEMM. Takes host pointers (PEAT_MEMORY_HOST)
// and copies to and from the current device itself; fails cleanly where there is no device.
#include <cuda_runtime.h>
#include <peat/kernel_abi.h>

#include <cstdio>

namespace {
constexpr int kTile = 16;
char lastError[256] = "";

__global__ void tiledGemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  __shared__ float as[kTile][kTile];
  __shared__ float bs[kTile][kTile];
  const int64_t row = int64_t(blockIdx.y) * kTile + threadIdx.y;
  const int64_t col = int64_t(blockIdx.x) * kTile + threadIdx.x;
  float acc = 0.0f;
  for (int64_t k0 = 0; k0 < k; k0 += kTile) {
    as[threadIdx.y][threadIdx.x] = (row < m && k0 + threadIdx.x < k) ? a[row * k + k0 + threadIdx.x] : 0.0f;
    bs[threadIdx.y][threadIdx.x] = (col < n && k0 + threadIdx.y < k) ? b[(k0 + threadIdx.y) * n + col] : 0.0f;
    __syncthreads();
    for (int kk = 0; kk < kTile; ++kk) acc += as[threadIdx.y][kk] * bs[kk][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) c[row * n + col] = acc;
}

bool ok(cudaError_t rc, const char* what) {
  if (rc == cudaSuccess) return true;
  std::snprintf(lastError, sizeof lastError, "%s: %s", what, cudaGetErrorString(rc));
  return false;
}

const peat_kernel_info info = {PEAT_KERNEL_ABI_VERSION_1, "example-cuda-tiled-gemm", PEAT_OP_GEMM, PEAT_DTYPE_F32,
                               PEAT_MEMORY_HOST};
}  // namespace

extern "C" const peat_kernel_info* peat_kernel_info_v1(void) { return &info; }

extern "C" int peat_kernel_gemm_v1(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  float *da = nullptr, *db = nullptr, *dc = nullptr;
  bool good = ok(cudaMalloc(&da, sizeof(float) * m * k), "cudaMalloc") &&
              ok(cudaMalloc(&db, sizeof(float) * k * n), "cudaMalloc") &&
              ok(cudaMalloc(&dc, sizeof(float) * m * n), "cudaMalloc") &&
              ok(cudaMemcpy(da, a, sizeof(float) * m * k, cudaMemcpyHostToDevice), "cudaMemcpy") &&
              ok(cudaMemcpy(db, b, sizeof(float) * k * n, cudaMemcpyHostToDevice), "cudaMemcpy");
  if (good) {
    const dim3 block(kTile, kTile);
    const dim3 grid(unsigned((n + kTile - 1) / kTile), unsigned((m + kTile - 1) / kTile));
    tiledGemm<<<grid, block>>>(da, db, dc, m, n, k);
    good = ok(cudaGetLastError(), "launch") &&
           ok(cudaMemcpy(c, dc, sizeof(float) * m * n, cudaMemcpyDeviceToHost), "cudaMemcpy");
  }
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  return good ? 0 : 1;
}

extern "C" const char* peat_kernel_last_error_v1(void) { return lastError[0] ? lastError : nullptr; }
