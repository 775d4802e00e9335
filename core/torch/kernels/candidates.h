// SPDX-License-Identifier: MIT
#pragma once
// Factories of the built-in candidates; kernels/registry.cpp maps names and options onto them.
#include "core/fp/block.h"
#include "core/fp/format.h"
#include "core/torch/kernels/kernel.h"
#include "gpu/backend.h"

namespace peat::kernels {

// Rounds the inputs (GEMM operands, or every float input of an element-wise op) to `format`.
std::unique_ptr<Kernel> makePrecisionKernel(const std::string& name, const fp::Format& format, fp::Overflow overflow);
std::unique_ptr<Kernel> makeGemmCandidate(const std::string& name, GemmEngine engine);

GemmEngine fp16AccumulationEngine();                         // fp16 inputs, fp16 sum after every step
GemmEngine reversedEngine();                                 // fp32, k from last to first
GemmEngine splitKEngine(int64_t parts);                      // K in `parts` slices, partial GEMMs summed
GemmEngine pairwiseEngine(int64_t leaf);                     // K halved recursively down to `leaf`
GemmEngine tileEdgeBugEngine(int64_t tile);                  // last column of each tile reads its neighbour
GemmEngine missingLastKTileEngine(int64_t tile);             // the last K tile is never accumulated
// Block-scaled inputs (core/fp/block.h): a's rows and b's columns quantised along K in blocks of
// `block`, fp32 products and sums; `output`: the result quantised too (along N); `bug`: a planted
// scale bug; `wrongDimension`: blocks taken along M (a) and N (b) instead of K, a port's mistake.
GemmEngine blockScaledEngine(const fp::BlockFormat& format, int block, bool output, fp::BlockBug bug, bool wrongDimension);
// A partial write: the last `fraction` of the op's output (after any bias) is never written and reads 0.
std::unique_ptr<Kernel> makeZeroedTailKernel(const std::string& name, double fraction);
GemmEngine staleRaceEngine(double probability, int64_t tile);  // random tiles hold half-accumulated sums
// A GEMM of gpu/ on `device` ("cpu", "cuda:0", "hip:0"); throws KernelError when it cannot be opened.
std::unique_ptr<Kernel> makeDeviceGemmKernel(const std::string& name, gpu::GemmKind kind, int parts,
                                             const std::string& device);

}  // namespace peat::kernels
