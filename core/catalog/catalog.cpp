// SPDX-License-Identifier: MIT
#include "core/catalog/catalog.h"

#include <map>
#include <stdexcept>

namespace peat::catalog {

const std::vector<ZooModel>& zooModels() {
  static const std::vector<ZooModel> models{
      {"mlp", Task::Images, "fashion-mnist", true, "two-layer perceptron over the 784 pixels"},
      {"lenet", Task::Images, "fashion-mnist", true, "LeNet-5: two convolutions with ReLU and pooling, three linear layers"},
      {"resnet", Task::Images, "fashion-mnist", true, "a small residual network with batch norm"},
      {"vit", Task::Images, "fashion-mnist", true, "a vision transformer over 7x7 patches"},
      {"chargpt", Task::Text, "text (characters)", false, "a character-level GPT (embedding, causal attention, layer norm)"},
  };
  return models;
}

const ZooSpec& zooSpec(const std::string& name) {
  static const std::map<std::string, ZooSpec> specs = [] {
    std::map<std::string, ZooSpec> m;
    ZooSpec& mlp = m["mlp"];
    mlp.input = {1, 28, 28};
    mlp.linears = {{"fc1", 784, 256}, {"fc2", 256, 128}, {"fc3", 128, 10}};
    ZooSpec& lenet = m["lenet"];
    lenet.input = {1, 28, 28};
    lenet.convs = {{"conv1", 1, 6, 5, 1, 2, true}, {"conv2", 6, 16, 5, 1, 0, true}};
    lenet.linears = {{"fc1", 400, 120}, {"fc2", 120, 84}, {"fc3", 84, 10}};
    ZooSpec& resnet = m["resnet"];
    resnet.input = {1, 28, 28};
    resnet.convs = {{"stem.conv", 1, 16, 3, 1, 1, false}};
    resnet.blocks = {{"block1", 16, 16, 1}, {"block2", 16, 32, 2}, {"block3", 32, 64, 2}};
    resnet.linears = {{"fc", 64, 10}};
    ZooSpec& vit = m["vit"];  // 7x7 patches: 16 tokens
    vit.input = {1, 28, 28};
    vit.convs = {{"patch_embed", 1, 32, 7, 7, 0, true}};
    vit.linears = {{"head", 32, 10}};
    vit.width = 32;
    vit.heads = 2;
    vit.depth = 2;
    ZooSpec& gpt = m["chargpt"];  // its vocabulary and context come from the text it trains on
    gpt.width = 64;
    gpt.heads = 4;
    gpt.depth = 2;
    return m;
  }();
  const auto it = specs.find(name);
  if (it == specs.end()) throw std::invalid_argument("unknown model '" + name + "' (the zoo has " + zooModelList() + ")");
  return it->second;
}

const ZooModel* zooModel(const std::string& name) {
  for (const ZooModel& m : zooModels())
    if (m.name == name) return &m;
  return nullptr;
}

namespace {
template <class List, class Keep>
std::string names(const List& list, Keep keep) {
  std::string out;
  for (const auto& item : list)
    if (keep(item)) out += (out.empty() ? "" : ", ") + item.name;
  return out;
}
}  // namespace

std::string zooModelList() {
  return names(zooModels(), [](const ZooModel&) { return true; });
}
std::string saveModelList() {
  return names(zooModels(), [](const ZooModel& m) { return m.saveGraph; });
}

const std::vector<KernelDescription>& kernels() {
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

const KernelDescription* kernel(const std::string& name) {
  for (const KernelDescription& k : kernels())
    if (k.name == name) return &k;
  return nullptr;
}

std::string kernelList() {
  return names(kernels(), [](const KernelDescription&) { return true; });
}

}  // namespace peat::catalog
