// SPDX-License-Identifier: MIT
// Kernel names, their options, and the factory behind `--kernel`.
#include <ATen/ATen.h>

#include <iostream>
#include <limits>
#include <set>
#include <sstream>

#include "core/plugin/kernel_host.h"
#include "core/plugin/plugin_probe.h"
#include "core/torch/kernels/candidates.h"
#include "core/torch/kernels/op_candidates.h"
#include "core/torch/kernels/plugin_kernel.h"
#include "core/torch/kernels/faults.h"
#include "core/torch/kernels/kernel.h"

namespace peat::kernels {

const std::vector<KernelDescription>& kernelCatalog() {
  static const std::vector<KernelDescription> catalog{
      {"golden", "golden", "all", "", "ATen's own kernels: the reference"},
      {"fp16", "precision", "all", "", "inputs rounded to fp16 (RNE), fp32 accumulation"},
      {"bf16", "precision", "all", "", "inputs rounded to bf16 (RNE), fp32 accumulation"},
      {"tf32", "precision", "all", "", "inputs rounded to tf32 (10 mantissa bits), fp32 accumulation"},
      {"fp8-e4m3", "precision", "all", "", "inputs rounded to OCP FP8 E4M3, saturating, fp32 accumulation"},
      {"fp8-e5m2", "precision", "all", "", "inputs rounded to OCP FP8 E5M2, saturating, fp32 accumulation"},
      {"fp16acc", "precision", "gemm", "", "fp16 inputs and an fp16 accumulator rounded after every step"},
      {"mxfp8-e4m3", "precision", "gemm", "block=32,output=0,bug=none",
       "OCP MXFP8 E4M3 inputs: blocks of 32 along K with an E8M0 scale, fp32 sums"},
      {"mxfp8-e5m2", "precision", "gemm", "block=32,output=0,bug=none", "OCP MXFP8 E5M2 inputs, blocks along K, fp32 sums"},
      {"mxfp6-e3m2", "precision", "gemm", "block=32,output=0,bug=none", "OCP MXFP6 E3M2 inputs, blocks along K, fp32 sums"},
      {"mxfp6-e2m3", "precision", "gemm", "block=32,output=0,bug=none", "OCP MXFP6 E2M3 inputs, blocks along K, fp32 sums"},
      {"mxfp4", "precision", "gemm", "block=32,output=0,bug=none", "OCP MXFP4 (E2M1) inputs, blocks along K, fp32 sums"},
      {"nvfp4", "precision", "gemm", "block=16,output=0,bug=none",
       "NVFP4 inputs: E2M1 in blocks of 16 along K, E4M3 block scales and an fp32 tensor scale, fp32 sums"},
      {"splitk", "order", "gemm", "parts=4", "K split into parts, partial GEMMs summed in order"},
      {"pairwise", "order", "gemm", "leaf=8", "K halved recursively, partial sums added pairwise"},
      {"reversed", "order", "gemm", "", "fp32 sequential sum over k from last to first"},
      {"tile-edge", "bug", "gemm", "tile=16", "the last column of every output tile reads its neighbour's column"},
      {"missing-ktile", "bug", "gemm", "tile=16", "the last K tile is never accumulated"},
      {"zeroed-tail", "bug", "gemm", "fraction=0.0625", "the last fraction of the output is never written"},
      {"stale-race", "bug", "gemm", "prob=0.02,tile=8",
       "random output tiles hold half-accumulated sums; differs on every call"},
      {"softmax-exp2", "precision", "softmax", "", "softmax with exp as exp2(x log2 e) in fp32, a reciprocal of the sum"},
      {"softmax-poly", "precision", "softmax", "degree=3",
       "softmax with a fast exp: 2^t by range reduction and a polynomial (degree 3 or 5) in fp32"},
      {"softmax-online", "order", "softmax", "", "one-pass (online) softmax: the sum rescaled as the running max grows"},
      {"softmax-nomax", "bug", "softmax", "", "softmax without max subtraction: exp overflows for logits above 88"},
      {"softmax-bf16", "precision", "softmax", "", "a bf16 softmax: input rounded to bf16, fp32 sums, output stored in bf16"},
      {"softmax-fp16", "precision", "softmax", "", "an fp16 softmax: input rounded to fp16, fp32 sums, output stored in fp16"},
      {"attention-flash", "precision", "attention", "",
       "FlashAttention's forward: keys in blocks of 16, running max and sum, bf16 probabilities times V"},
      {"attention-causal-off", "bug", "attention", "",
       "attention whose causal limit is one key late (query i also sees key i+1), forward and backward"},
      {"layernorm-onepass", "order", "layernorm", "", "layer norm with one-pass variance E[x^2] - E[x]^2 in fp32"},
      {"layernorm-fp16stats", "precision", "layernorm", "", "layer norm with its mean and variance kept in fp16"},
      {"layernorm-eps-outside", "bug", "layernorm", "", "layer norm dividing by sqrt(var) + eps instead of sqrt(var + eps)"},
      {"layernorm-bessel", "bug", "layernorm", "", "layer norm with Bessel's correction (N-1) where the reference has none"},
      {"rmsnorm", "bug", "layernorm", "", "RMSNorm in place of layer norm: no mean subtraction"},
      {"gelu-tanh", "precision", "gelu", "", "GELU by its tanh approximation, forward and backward"},
      {"adam-bf16", "precision", "adam", "", "Adam with its moments stored in bf16"},
      {"adam-eps-inside", "order", "adam", "", "Adam with epsilon inside the square root: sqrt(v_hat + eps)"},
      {"embedding-atomic", "order", "embedding", "",
       "embedding backward as atomic adds in an unordered (random) sequence: differs on every call"},
      {"dropout-reuse", "bug", "dropout", "", "dropout that reuses the first mask it saw for a shape at every step"},
      {"grad-unscaled", "bug", "all", "scale=1024", "backward outputs still carry the loss scale (never unscaled)"},
      {"bitflip", "fault", "all", "bit=random,count=1,target=output", "flip one bit of `count` random elements"},
      {"multibit", "fault", "all", "bits=2,start=random,count=1,target=output", "flip adjacent bits of one element"},
      {"stuckat0", "fault", "all", "bit=random,region=0.01,target=output", "force a bit to 0 over a contiguous region"},
      {"stuckat1", "fault", "all", "bit=random,region=0.01,target=output", "force a bit to 1 over a contiguous region"},
      {"random-value", "fault", "all", "count=1,target=output", "replace elements by random finite values"},
      {"zero", "fault", "all", "count=1,target=output", "set elements to zero"},
      {"nan", "fault", "all", "count=1,target=output", "set elements to NaN"},
      {"inf", "fault", "all", "count=1,target=output", "set elements to +Inf"},
      {"plugin", "plugin", "gemm (v1); the op kinds it exports (v2)", "path=FILE",
       "a user kernel from a shared library (peat/kernel_abi.h): an fp32 GEMM (ABI v1), or GEMMs, convolutions, "
       "softmax, layer norm, attention, activations and optimiser steps in f32, f16, bf16 or fp8 (ABI v2)"},
      {"gpu-naive", "device", "gemm", "device=cpu", "gpu/ GEMM, one thread per output, fmaf over k in order"},
      {"gpu-tiled", "device", "gemm", "device=cpu", "gpu/ GEMM, 16x16 shared-memory tiles (the same sums as gpu-naive)"},
      {"gpu-half", "device", "gemm", "device=cpu", "gpu/ GEMM, fp16 inputs, fp32 sums: tensor cores (WMMA) on CUDA"},
      {"gpu-splitk", "device", "gemm", "device=cpu,parts=4", "gpu/ GEMM, K split into parts summed in order"},
      {"gpu-tile-edge", "device", "gemm", "device=cpu", "gpu/ GEMM with a planted bug: column 15 of each 16 reads column 16"},
      {"gpu-golden", "device", "gemm", "device=cpu", "gpu/ golden GEMM: cuBLAS on CUDA, double sums elsewhere"},
  };
  return catalog;
}

std::string kernelList() {
  std::string out;
  for (const KernelDescription& d : kernelCatalog()) out += (out.empty() ? "" : ", ") + d.name;
  return out;
}

KernelSpec parseKernelSpec(const std::string& text) {
  KernelSpec spec;
  spec.text = text;
  const auto colon = text.find(':');
  spec.name = text.substr(0, colon);
  if (colon == std::string::npos) return spec;
  std::stringstream rest(text.substr(colon + 1));
  for (std::string item; std::getline(rest, item, ',');) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw KernelError("kernel option '" + item + "' in '" + text + "' is not key=value");
    spec.options[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return spec;
}

namespace {

class Options {
 public:
  Options(const KernelSpec& spec, const KernelDescription& d) : spec_(spec) {
    std::set<std::string> allowed;
    std::stringstream s(d.options);
    for (std::string item; std::getline(s, item, ',');) allowed.insert(item.substr(0, item.find('=')));
    for (const auto& [key, value] : spec.options)
      if (!allowed.count(key))
        throw KernelError("kernel '" + spec.name + "' has no option '" + key + "'" +
                          (d.options.empty() ? " (it takes none)" : " (it takes " + d.options + ")"));
  }
  std::string text(const std::string& key, const std::string& fallback) const {
    auto it = spec_.options.find(key);
    return it == spec_.options.end() ? fallback : it->second;
  }
  int64_t integer(const std::string& key, int64_t fallback, int64_t lo, int64_t hi) const {
    auto it = spec_.options.find(key);
    if (it == spec_.options.end()) return fallback;
    try {
      std::size_t used = 0;
      const long long v = std::stoll(it->second, &used);
      if (used == it->second.size() && v >= lo && v <= hi) return v;
    } catch (const std::exception&) {
    }
    throw KernelError("kernel option " + key + "=" + it->second + " must be an integer in [" + std::to_string(lo) +
                      ", " + std::to_string(hi) + "]");
  }
  double real(const std::string& key, double fallback, double lo, double hi) const {
    auto it = spec_.options.find(key);
    if (it == spec_.options.end()) return fallback;
    try {
      std::size_t used = 0;
      const double v = std::stod(it->second, &used);
      if (used == it->second.size() && v >= lo && v <= hi) return v;
    } catch (const std::exception&) {
    }
    throw KernelError("kernel option " + key + "=" + it->second + " must be a number in [" + std::to_string(lo) +
                      ", " + std::to_string(hi) + "]");
  }
  int bitOrRandom(const std::string& key, int width) const {
    if (text(key, "random") == "random") return -1;
    return int(integer(key, -1, 0, width - 1));
  }

 private:
  const KernelSpec& spec_;
};

FaultSpec faultSpec(FaultModel model, const Options& o) {
  FaultSpec f;
  f.model = model;
  f.target = o.text("target", "output");
  if (f.target != "output" && f.target != "input" && f.target != "weight")
    throw KernelError("fault target '" + f.target + "' is not one of output, input, weight");
  f.count = o.integer("count", 1, 1, 1 << 20);
  if (model == FaultModel::MultiBitFlip) {
    f.bits = int(o.integer("bits", 2, 2, 32));
    f.bit = o.text("start", "random") == "random" ? -1 : int(o.integer("start", 0, 0, 32 - f.bits));
  } else {
    f.bit = o.bitOrRandom("bit", 32);
  }
  f.region = o.real("region", 0.01, 1e-9, 1.0);
  return f;
}

}  // namespace

std::string withDevice(const std::string& text, const std::string& device) {
  if (device.empty()) return text;
  const KernelSpec spec = parseKernelSpec(text);
  if (spec.name.rfind("gpu-", 0) != 0) {
    if (device == "cpu" || device == "cpu:0") return text;
    throw KernelError("kernel '" + spec.name + "' runs on the CPU (LibTorch); --device " + device +
                      " applies to the gpu-* kernels (see peat kernels)");
  }
  const auto it = spec.options.find("device");
  if (it != spec.options.end() && it->second != device)
    throw KernelError("kernel '" + text + "' names device " + it->second + " but --device is " + device);
  if (it != spec.options.end()) return text;
  return text + (text.find(':') == std::string::npos ? ":" : ",") + "device=" + device;
}

std::unique_ptr<Kernel> makeKernel(const std::string& text, uint64_t seed, PluginPlacement placement) {
  const KernelSpec spec = parseKernelSpec(text);
  const KernelDescription* d = nullptr;
  for (const KernelDescription& c : kernelCatalog())
    if (c.name == spec.name) d = &c;
  if (!d) throw KernelError("unknown kernel '" + spec.name + "'; valid kernels: " + kernelList());
  const Options o(spec, *d);
  const std::string& n = spec.name;
  if (n == "golden") return makeGolden();
  if (n == "fp16") return makePrecisionKernel(n, fp::kFp16, fp::Overflow::Standard);
  if (n == "bf16") return makePrecisionKernel(n, fp::kBf16, fp::Overflow::Standard);
  if (n == "tf32") return makePrecisionKernel(n, fp::kTf32, fp::Overflow::Standard);
  if (n == "fp8-e4m3") return makePrecisionKernel(n, fp::kE4M3, fp::Overflow::Saturate);
  if (n == "fp8-e5m2") return makePrecisionKernel(n, fp::kE5M2, fp::Overflow::Saturate);
  if (n == "fp16acc") return makeGemmCandidate(n, fp16AccumulationEngine());
  if (const auto block = fp::blockFormatByName(n)) {
    // bug: none; wrong-block (the next block's scale), truncated-scale, wrong-dim (blocks along M and N)
    const std::string bug = o.text("bug", "none");
    if (bug != "none" && bug != "wrong-block" && bug != "truncated-scale" && bug != "wrong-dim")
      throw KernelError("kernel option bug=" + bug + " is none of none, wrong-block, truncated-scale, wrong-dim");
    const fp::BlockBug planted = bug == "wrong-block"       ? fp::BlockBug::WrongBlock
                                 : bug == "truncated-scale" ? fp::BlockBug::TruncatedScale
                                                            : fp::BlockBug::None;
    return makeGemmCandidate(spec.text, blockScaledEngine(*block, int(o.integer("block", block->blockSize, 1, 1 << 20)),
                                                          o.integer("output", 0, 0, 1) == 1, planted, bug == "wrong-dim"));
  }
  if (n == "splitk") return makeGemmCandidate(spec.text, splitKEngine(o.integer("parts", 4, 2, 4096)));
  if (n == "pairwise") return makeGemmCandidate(spec.text, pairwiseEngine(o.integer("leaf", 8, 1, 4096)));
  if (n == "reversed") return makeGemmCandidate(n, reversedEngine());
  if (n == "tile-edge") return makeGemmCandidate(spec.text, tileEdgeBugEngine(o.integer("tile", 16, 2, 4096)));
  if (n == "missing-ktile") return makeGemmCandidate(spec.text, missingLastKTileEngine(o.integer("tile", 16, 1, 4096)));
  if (n == "zeroed-tail") return makeZeroedTailKernel(spec.text, o.real("fraction", 0.0625, 1e-9, 1.0));
  if (n == "stale-race")
    return makeGemmCandidate(spec.text, staleRaceEngine(o.real("prob", 0.02, 0.0, 1.0), o.integer("tile", 8, 1, 4096)));
  if (n == "softmax-poly" || n == "grad-unscaled") {
    std::map<std::string, double> numbers;
    if (n == "softmax-poly") {
      numbers["degree"] = double(o.integer("degree", 3, 3, 5));
      if (numbers["degree"] != 3 && numbers["degree"] != 5) throw KernelError("kernel option degree must be 3 or 5");
    } else {
      numbers["scale"] = o.real("scale", 1024, 1e-30, 1e30);
    }
    return makeOpCandidate(n, spec.text, numbers);
  }
  if (auto op = makeOpCandidate(n, spec.text, {})) return op;
  if (n == "bitflip") return makeFaultKernel(spec.text, faultSpec(FaultModel::BitFlip, o), seed);
  if (n == "multibit") return makeFaultKernel(spec.text, faultSpec(FaultModel::MultiBitFlip, o), seed);
  if (n == "stuckat0") return makeFaultKernel(spec.text, faultSpec(FaultModel::StuckAt0, o), seed);
  if (n == "stuckat1") return makeFaultKernel(spec.text, faultSpec(FaultModel::StuckAt1, o), seed);
  if (n == "random-value") return makeFaultKernel(spec.text, faultSpec(FaultModel::RandomValue, o), seed);
  if (n == "zero") return makeFaultKernel(spec.text, faultSpec(FaultModel::Zero, o), seed);
  if (n == "nan") return makeFaultKernel(spec.text, faultSpec(FaultModel::NaN, o), seed);
  if (n == "inf") return makeFaultKernel(spec.text, faultSpec(FaultModel::Inf, o), seed);
  if (n.rfind("gpu-", 0) == 0) {
    const std::string device = o.text("device", "cpu");
    const int parts = n == "gpu-splitk" ? int(o.integer("parts", 4, 1, 4096)) : 1;
    return makeDeviceGemmKernel(spec.text, gpu::gemmFromName(n.substr(4)), parts, device);
  }
  if (n == "plugin") return makePluginKernel(o.text("path", ""), placement);
  throw std::logic_error("kernel catalog and factory disagree on '" + n + "'");
}

}  // namespace peat::kernels
