// SPDX-License-Identifier: MIT
// The zoo's models as SAVE graphs (their layer specification from catalog::zooSpec, the same the
// LibTorch zoo builds from), with a checkpoint's weights or random ones, and checkpoints read back.
#include "core/save/graph.h"

#include <random>

#include "core/catalog/catalog.h"
#include "core/save/graph_builder.h"
#include "core/store/session.h"

namespace peat::save {

namespace {

using detail::Builder;

// ResNet-18 (torchvision's layout) on 3x224x224 images.
int resnet18(Builder& b) {
  int x = b.input({3, 224, 224});
  x = b.relu("relu", b.batchNorm("bn1", b.conv("conv1", x, 64, 7, 2, 3, false)));
  x = b.maxPool("maxpool", x, 3, 2, 1);
  int64_t in = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t out = int64_t(64) << stage;
    for (int block = 0; block < 2; ++block) {
      const std::string n = "layer" + std::to_string(stage + 1) + "." + std::to_string(block);
      const int64_t stride = block == 0 && stage > 0 ? 2 : 1;
      int h = b.relu(n + ".relu1", b.batchNorm(n + ".bn1", b.conv(n + ".conv1", x, out, 3, stride, 1, false)));
      h = b.batchNorm(n + ".bn2", b.conv(n + ".conv2", h, out, 3, 1, 1, false));
      int skip = x;
      if (stride != 1 || in != out)
        skip = b.batchNorm(n + ".downsample.1", b.conv(n + ".downsample.0", x, out, 1, stride, 0, false));
      x = b.relu(n + ".relu2", b.addNodes(n + ".add", h, skip));
      in = out;
    }
  }
  return b.linear("fc", b.globalAvgPool("avgpool", x), 1000);
}

// The zoo's vision transformer (core/torch/models/zoo.cpp; its sizes from catalog::zooSpec): patches
// embedded by a strided convolution into tokens, position embeddings, pre-norm blocks of
// self-attention and a GELU MLP, a final layer norm, the mean over the tokens and a linear head.
int vit(Builder& b) {
  const catalog::ZooSpec& spec = catalog::zooSpec("vit");
  const catalog::ZooConv& patch = spec.convs.at(0);
  const int64_t width = spec.width, heads = spec.heads, hd = width / heads, depth = spec.depth;
  int x = b.conv(patch.name, b.input(spec.input), patch.out, patch.kernel, patch.stride, patch.padding, patch.bias);
  const int64_t t = b.node(x).shape[1] * b.node(x).shape[2];
  std::vector<int64_t> gather;
  for (int64_t tok = 0; tok < t; ++tok)  // flatten(2).transpose(1, 2): [C, T] -> [T, C]
    for (int64_t c = 0; c < width; ++c) gather.push_back(c * t + tok);
  x = b.select("patch_embed.tokens", x, {t, width}, gather);
  x = b.addConst("pos_embed", x, "pos_emb");
  for (int64_t i = 0; i < depth; ++i) {
    const std::string n = "blocks." + std::to_string(i);
    const int qkv = b.linear(n + ".attn.qkv", b.layerNorm(n + ".ln1", x), 3 * width);  // [T, 3W]
    b.scaleRows(qkv, 0, width, 1.0f / std::sqrt(float(hd)));
    // q, k: [H, T, hd] from columns (part * W + h * hd + d); v transposed: [H, hd, T]
    auto part = [&](const std::string& name, int64_t which, bool transposed) {
      std::vector<int64_t> idx;
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t r = 0; r < (transposed ? hd : t); ++r)
          for (int64_t c = 0; c < (transposed ? t : hd); ++c) {
            const int64_t tok = transposed ? c : r, d = transposed ? r : c;
            idx.push_back(tok * 3 * width + which * width + h * hd + d);
          }
      return b.select(n + ".attn." + name, qkv, transposed ? std::vector<int64_t>{heads, hd, t} : std::vector<int64_t>{heads, t, hd},
                      idx);
    };
    const int q = part("q", 0, false), k = part("k", 1, false), vt = part("v", 2, true);
    const int att = b.softmax(n + ".attn.softmax", b.matmul(n + ".attn.scores", q, k));  // [H, T, T]
    const int values = b.matmul(n + ".attn.values", att, vt);                               // [H, T, hd]
    std::vector<int64_t> merge;  // [H, T, hd] -> [T, H * hd]
    for (int64_t tok = 0; tok < t; ++tok)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t d = 0; d < hd; ++d) merge.push_back((h * t + tok) * hd + d);
    const int y = b.select(n + ".attn.merge", values, {t, width}, merge);
    x = b.addNodes(n + ".attn.residual", x, b.linear(n + ".attn.proj", y, width));
    int h = b.gelu(n + ".mlp.gelu", b.linear(n + ".mlp.up", b.layerNorm(n + ".ln2", x), spec.mlpRatio * width));
    x = b.addNodes(n + ".mlp.residual", x, b.linear(n + ".mlp.down", h, width));
  }
  x = b.layerNorm("ln_f", x);
  std::vector<int64_t> channels;  // [T, W] -> [W, T, 1] for the mean over the tokens
  for (int64_t c = 0; c < width; ++c)
    for (int64_t tok = 0; tok < t; ++tok) channels.push_back(tok * width + c);
  x = b.globalAvgPool("pool", b.select("pool.transpose", x, {width, t, 1}, channels));
  return b.linear(spec.linears.at(0).name, x, spec.linears.at(0).out);
}

// A convolution of the spec on node x.
int conv(Builder& b, const catalog::ZooConv& c, int x) {
  return b.conv(c.name, x, c.out, c.kernel, c.stride, c.padding, c.bias);
}

}  // namespace

// MobileNet's and DeepLab's convolution geometry on 1x28x28 images: a dilated conv with ReLU6, a
// strided depthwise conv with batch norm and a clip, a grouped conv, a padded average pool.
int groupedNet(Builder& b) {
  int x = b.input({1, 28, 28});
  x = b.clip("dilated.relu6", b.conv("dilated", x, 8, 3, 1, 2, true, 1, 2), 0.0f, 6.0f);                   // 8x28x28
  x = b.clip("depthwise.clip", b.batchNorm("depthwise.bn", b.conv("depthwise", x, 8, 3, 2, 1, false, 8)), -1.0f, 2.0f);
  x = b.relu("grouped.relu", b.conv("grouped", x, 12, 3, 1, 1, true, 4));                                // 12x14x14
  x = b.flatten("flatten", b.avgPool("pool", x, 3, 2, 1));                                               // 12x7x7
  return b.linear("fc", x, 10);
}

Graph randomGraph(const std::string& model, uint64_t seed) {
  if (model != "resnet18" && model != "grouped") return zooGraph(model, {}, seed);
  Graph g;
  g.model = model;
  // Fashion-MNIST; ImageNet's, averaged over the channels
  g.inputMean = model == "grouped" ? catalog::kFashionMnistMean : catalog::kImageNetMeanAll;
  g.inputDeviation = model == "grouped" ? catalog::kFashionMnistStd : catalog::kImageNetStdAll;
  const std::map<std::string, store::Tensor> none;
  Builder b(g, none);
  b.randomFill(seed);
  g.output = model == "grouped" ? groupedNet(b) : resnet18(b);
  return g;
}

Graph zooGraph(const std::string& model, const std::map<std::string, store::Tensor>& parameters) {
  return zooGraph(model, parameters, 0);
}

Graph zooGraph(const std::string& model, const std::map<std::string, store::Tensor>& parameters, uint64_t randomSeed) {
  Graph g;
  g.model = model;
  g.inputMean = catalog::kFashionMnistMean;  // as the trainer normalises it
  g.inputDeviation = catalog::kFashionMnistStd;
  Builder b(g, parameters);
  if (randomSeed) b.randomFill(randomSeed);
  if (!catalog::zooModel(model))
    throw SaveError("unknown model '" + model + "' (SAVE knows " + catalog::saveModelList() + ")");
  const catalog::ZooSpec& spec = catalog::zooSpec(model);
  // the linear layers of the spec, ReLU between them (mlp, lenet)
  auto linears = [&](int x) {
    for (std::size_t i = 0; i < spec.linears.size(); ++i) {
      const catalog::ZooLinear& l = spec.linears[i];
      x = b.linear(l.name, x, l.out);
      if (i + 1 < spec.linears.size()) x = b.relu(l.name + ".relu", x);
    }
    return x;
  };
  if (model == "mlp") {
    g.output = linears(b.flatten("flatten", b.input(spec.input)));
  } else if (model == "lenet") {
    int x = b.input(spec.input);
    for (std::size_t i = 0; i < spec.convs.size(); ++i)
      x = b.maxPool("pool" + std::to_string(i + 1), b.relu(spec.convs[i].name + ".relu", conv(b, spec.convs[i], x)), 2, 2);
    g.output = linears(b.flatten("flatten", x));
  } else if (model == "resnet") {
    int x = b.input(spec.input);
    x = b.relu("stem.relu", b.batchNorm("stem.bn", conv(b, spec.convs.at(0), x)));
    for (const catalog::ZooBlock& blk : spec.blocks) {
      const std::string n = blk.name;
      int h = b.batchNorm(n + ".bn1", b.conv(n + ".conv1", x, blk.out, 3, blk.stride, 1, false));
      h = b.relu(n + ".relu1", h);
      h = b.batchNorm(n + ".bn2", b.conv(n + ".conv2", h, blk.out, 3, 1, 1, false));
      int skip = x;
      if (blk.stride != 1 || blk.in != blk.out)
        skip = b.batchNorm(n + ".shortcut.bn", b.conv(n + ".shortcut", x, blk.out, 1, blk.stride, 0, false));
      x = b.relu(n + ".relu2", b.addNodes(n + ".add", h, skip));
    }
    g.output = b.linear(spec.linears.at(0).name, b.globalAvgPool("pool", x), spec.linears.at(0).out);
  } else if (model == "chargpt") {
    throw SaveError("model chargpt uses op 'embedding', which has no range transfer function in SAVE");
  } else if (model == "vit") {
    g.output = vit(b);
  } else {
    throw SaveError("unknown model '" + model + "' (SAVE knows " + catalog::saveModelList() + ")");
  }
  return g;
}

std::map<std::string, store::Tensor> loadCheckpoint(const std::string& path, const std::string& run,
                                                    int64_t iteration) {
  store::SessionReader reader(path);
  if (iteration < 0) {
    const store::SessionSummary s = reader.summary();
    for (const store::RunInfo& r : s.runs)
      if (r.name == run && !r.checkpoints.empty()) iteration = r.checkpoints.back();
    if (iteration < 0) throw SaveError("run '" + run + "' of " + path + " has no checkpoint");
  }
  return reader.checkpoint(run, iteration).parameters;
}

}  // namespace peat::save
