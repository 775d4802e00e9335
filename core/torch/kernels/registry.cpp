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
  return catalog::kernels();
}

std::string kernelList() { return catalog::kernelList(); }

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
