// SPDX-License-Identifier: MIT
#include "core/catalog/catalog.h"
#include "core/torch/models/zoo.h"

#include "core/cli/torch_commands.h"

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

namespace peat::models {

namespace {

// PyTorch's default initialisation of Linear and Conv2d: U(+-1/sqrt(fan_in)) for weight and bias.
at::Tensor uniformParam(Model& m, const std::string& name, at::IntArrayRef shape, int64_t fanIn) {
  const double bound = 1.0 / std::sqrt(double(fanIn));
  return m.registerParameter(name, torch::empty(shape).uniform_(-bound, bound));
}

struct LinearParams {
  at::Tensor w, b;
  void init(Model& m, const std::string& name, int64_t in, int64_t out) {
    w = uniformParam(m, name + ".weight", {out, in}, in);
    b = uniformParam(m, name + ".bias", {out}, in);
  }
  at::Tensor operator()(ops::Dispatcher& d, const std::string& name, const at::Tensor& x) const {
    return d.linear(name, x, w, b);
  }
};

struct ConvParams {
  at::Tensor w, b;
  int64_t stride = 1, padding = 0;
  void init(Model& m, const std::string& name, int64_t in, int64_t out, int64_t k, int64_t s, int64_t p,
            bool bias = true) {
    w = uniformParam(m, name + ".weight", {out, in, k, k}, in * k * k);
    if (bias) b = uniformParam(m, name + ".bias", {out}, in * k * k);
    stride = s;
    padding = p;
  }
  at::Tensor operator()(ops::Dispatcher& d, const std::string& name, const at::Tensor& x) const {
    return d.conv2d(name, x, w, b, stride, padding);
  }
};

struct NormParams {
  at::Tensor gamma, beta, mean, var;
  void initLayerNorm(Model& m, const std::string& name, int64_t n) {
    gamma = m.registerParameter(name + ".weight", torch::ones({n}));
    beta = m.registerParameter(name + ".bias", torch::zeros({n}));
  }
  void initBatchNorm(Model& m, const std::string& name, int64_t n) {
    initLayerNorm(m, name, n);
    mean = m.registerBuffer(name + ".running_mean", torch::zeros({n}));
    var = m.registerBuffer(name + ".running_var", torch::ones({n}));
  }
};

// The spec's linear layers (catalog::zooSpec), ReLU between them.
struct LinearStack {
  std::vector<std::pair<std::string, LinearParams>> layers;
  void init(Model& m, const std::vector<catalog::ZooLinear>& spec) {
    for (const catalog::ZooLinear& l : spec) {
      layers.emplace_back(l.name, LinearParams());
      layers.back().second.init(m, l.name, l.in, l.out);
    }
  }
  at::Tensor operator()(ops::Dispatcher& d, at::Tensor x) const {
    for (std::size_t i = 0; i < layers.size(); ++i) {
      x = layers[i].second(d, layers[i].first, x);
      if (i + 1 < layers.size()) x = d.relu(layers[i].first, x);
    }
    return x;
  }
};

class Mlp final : public Model {
 public:
  Mlp() { fcs.init(*this, catalog::zooSpec("mlp").linears); }
  std::string modelName() const override { return "mlp"; }
  Task task() const override { return Task::Images; }
  at::Tensor forward(ops::Dispatcher& d, const at::Tensor& input) override {
    return fcs(d, input.reshape({input.size(0), -1}));
  }

 private:
  LinearStack fcs;
};

class LeNet final : public Model {
 public:
  LeNet() {
    const catalog::ZooSpec& spec = catalog::zooSpec("lenet");
    for (const catalog::ZooConv& c : spec.convs) {
      convs.emplace_back(c.name, ConvParams());
      convs.back().second.init(*this, c.name, c.in, c.out, c.kernel, c.stride, c.padding, c.bias);
    }
    fcs.init(*this, spec.linears);
  }
  std::string modelName() const override { return "lenet"; }
  Task task() const override { return Task::Images; }
  at::Tensor forward(ops::Dispatcher& d, const at::Tensor& input) override {
    at::Tensor x = input;
    for (std::size_t i = 0; i < convs.size(); ++i) {
      const std::string& name = convs[i].first;
      x = d.maxPool2d("pool" + std::to_string(i + 1), d.relu(name, convs[i].second(d, name, x)), 2, 2);
    }
    return fcs(d, x.reshape({x.size(0), -1}));
  }

 private:
  std::vector<std::pair<std::string, ConvParams>> convs;
  LinearStack fcs;
};

// A small ResNet: a 3x3 stem and three basic blocks (16, 32, 64 channels), batch norm, global pooling.
class ResNet final : public Model {
  struct Block {
    std::string name;
    ConvParams conv1, conv2, shortcut;
    NormParams bn1, bn2, bnShortcut;
    bool project = false;
  };

 public:
  ResNet() {
    const catalog::ZooSpec& spec = catalog::zooSpec("resnet");
    const catalog::ZooConv& s = spec.convs.at(0);
    stem.init(*this, s.name, s.in, s.out, s.kernel, s.stride, s.padding, s.bias);
    stemBn.initBatchNorm(*this, "stem.bn", s.out);
    for (const catalog::ZooBlock& b : spec.blocks) addBlock(b.name, b.in, b.out, b.stride);
    fcName = spec.linears.at(0).name;
    fc.init(*this, fcName, spec.linears.at(0).in, spec.linears.at(0).out);
  }
  std::string modelName() const override { return "resnet"; }
  Task task() const override { return Task::Images; }
  at::Tensor forward(ops::Dispatcher& d, const at::Tensor& input) override {
    at::Tensor x = d.relu("stem", d.batchNorm("stem.bn", stem(d, "stem.conv", input), stemBn.gamma, stemBn.beta,
                                              stemBn.mean, stemBn.var));
    for (Block& b : blocks) {
      at::Tensor h = d.batchNorm(b.name + ".bn1", b.conv1(d, b.name + ".conv1", x), b.bn1.gamma, b.bn1.beta, b.bn1.mean,
                                 b.bn1.var);
      h = d.relu(b.name + ".relu1", h);
      h = d.batchNorm(b.name + ".bn2", b.conv2(d, b.name + ".conv2", h), b.bn2.gamma, b.bn2.beta, b.bn2.mean,
                      b.bn2.var);
      at::Tensor skip = x;
      if (b.project)
        skip = d.batchNorm(b.name + ".shortcut.bn", b.shortcut(d, b.name + ".shortcut", x), b.bnShortcut.gamma,
                           b.bnShortcut.beta, b.bnShortcut.mean, b.bnShortcut.var);
      x = d.relu(b.name + ".relu2", d.add(b.name + ".add", h, skip));
    }
    return fc(d, fcName, d.globalAvgPool("pool", x));
  }

 private:
  void addBlock(const std::string& name, int64_t in, int64_t out, int64_t stride) {
    Block b;
    b.name = name;
    b.conv1.init(*this, name + ".conv1", in, out, 3, stride, 1, false);
    b.bn1.initBatchNorm(*this, name + ".bn1", out);
    b.conv2.init(*this, name + ".conv2", out, out, 3, 1, 1, false);
    b.bn2.initBatchNorm(*this, name + ".bn2", out);
    b.project = stride != 1 || in != out;
    if (b.project) {
      b.shortcut.init(*this, name + ".shortcut", in, out, 1, stride, 0, false);
      b.bnShortcut.initBatchNorm(*this, name + ".shortcut.bn", out);
    }
    blocks.push_back(std::move(b));
  }

  ConvParams stem;
  NormParams stemBn;
  std::vector<Block> blocks;
  std::string fcName;
  LinearParams fc;
};

// A pre-norm transformer block: self-attention (optionally masked) and a GELU MLP, each with a
// residual connection. Shared by the character GPT and the vision transformer.
struct TransformerLayer {
  std::string name;
  NormParams ln1, ln2;
  LinearParams qkv, proj, up, down;
  void init(Model& m, const std::string& layerName, int64_t width, int64_t mlpRatio) {
    name = layerName;
    ln1.initLayerNorm(m, name + ".ln1", width);
    qkv.init(m, name + ".attn.qkv", width, 3 * width);
    proj.init(m, name + ".attn.proj", width, width);
    ln2.initLayerNorm(m, name + ".ln2", width);
    up.init(m, name + ".mlp.up", width, mlpRatio * width);
    down.init(m, name + ".mlp.down", mlpRatio * width, width);
  }
  bool fused = false;  // attention as one call (ModelOptions::fusedAttention)
  // x: [n, t, width]; mask: [t, t] added to the scores, or undefined.
  at::Tensor operator()(ops::Dispatcher& d, at::Tensor x, int64_t heads, const at::Tensor& mask) const {
    const int64_t n = x.size(0), t = x.size(1), width = x.size(2), hd = width / heads;
    at::Tensor h = d.layerNorm(name + ".ln1", x, ln1.gamma, ln1.beta);
    at::Tensor qkvOut = qkv(d, name + ".attn.qkv", h).reshape({n, t, 3, heads, hd}).permute({2, 0, 3, 1, 4});
    at::Tensor q = qkvOut[0] * (1.0 / std::sqrt(double(hd))), k = qkvOut[1], v = qkvOut[2];  // [n, heads, t, hd]
    at::Tensor y;
    if (fused) {
      y = d.attention(name + ".attn.attention", q, k, v, mask);
    } else {
      at::Tensor scores = d.matmul(name + ".attn.scores", q, k.transpose(-1, -2));
      if (mask.defined()) scores = d.add(name + ".attn.mask", scores, mask);
      at::Tensor att = d.softmax(name + ".attn.softmax", scores);
      y = d.matmul(name + ".attn.values", att, v);
    }
    y = y.permute({0, 2, 1, 3}).reshape({n, t, width});
    x = d.add(name + ".attn.residual", x, proj(d, name + ".attn.proj", y));
    h = d.layerNorm(name + ".ln2", x, ln2.gamma, ln2.beta);
    h = down(d, name + ".mlp.down", d.gelu(name + ".mlp.gelu", up(d, name + ".mlp.up", h)));
    return d.add(name + ".mlp.residual", x, h);
  }
};

// A character-level GPT: token and position embeddings, pre-norm blocks of causal self-attention and
// a GELU MLP, a final layer norm and a linear head.
class CharGpt final : public Model {
 public:
  CharGpt(int64_t vocabulary, int64_t context, bool fused)
      : vocab_(vocabulary), context_(context), width_(catalog::zooSpec("chargpt").width),
        heads_(catalog::zooSpec("chargpt").heads), depth_(catalog::zooSpec("chargpt").depth) {
    if (vocabulary < 2) throw std::invalid_argument("chargpt needs a vocabulary of at least 2 characters");
    tokens = registerParameter("tok_emb.weight", torch::randn({vocab_, width_}) * 0.02);
    positions = registerParameter("pos_emb.weight", torch::randn({context_, width_}) * 0.02);
    for (int64_t i = 0; i < depth_; ++i) {
      layers.emplace_back();
      layers.back().init(*this, "blocks." + std::to_string(i), width_, mlpRatio_);
      layers.back().fused = fused;
    }
    lnf.initLayerNorm(*this, "ln_f", width_);
    head.init(*this, "head", width_, vocab_);
    mask = registerBuffer("causal_mask",
                           torch::full({context_, context_}, -INFINITY).triu(1));  // 0 on and below the diagonal
  }
  std::string modelName() const override { return "chargpt"; }
  Task task() const override { return Task::Text; }
  at::Tensor forward(ops::Dispatcher& d, const at::Tensor& input) override {
    const int64_t n = input.size(0), t = input.size(1);
    const at::Tensor pos = torch::arange(t, torch::kLong).unsqueeze(0).expand({n, t});
    at::Tensor x = d.add("embed", d.embedding("tok_emb", input, tokens), d.embedding("pos_emb", pos, positions));
    const at::Tensor causal = mask.slice(0, 0, t).slice(1, 0, t);
    for (const TransformerLayer& l : layers) x = l(d, x, heads_, causal);
    return head(d, "head", d.layerNorm("ln_f", x, lnf.gamma, lnf.beta));
  }

 private:
  int64_t vocab_, context_;
  int64_t width_, heads_, depth_, mlpRatio_ = catalog::zooSpec("chargpt").mlpRatio;
  at::Tensor tokens, positions, mask;
  std::vector<TransformerLayer> layers;
  NormParams lnf;
  LinearParams head;
};

// A small vision transformer for 28x28 images: 7x7 patches (16 tokens) embedded by a strided
// convolution, learned position embeddings, two pre-norm blocks (two heads), a final layer norm,
// mean pooling over the tokens and a linear head.
class Vit final : public Model {
 public:
  explicit Vit(bool fused) {
    const catalog::ZooSpec& spec = catalog::zooSpec("vit");
    const catalog::ZooConv& p = spec.convs.at(0);
    patchName_ = p.name;
    patch.init(*this, p.name, p.in, p.out, p.kernel, p.stride, p.padding, p.bias);
    const int64_t side = (spec.input.at(1) + 2 * p.padding - p.kernel) / p.stride + 1;
    tokens_ = side * side;
    positions = registerParameter("pos_emb", torch::randn({tokens_, width_}) * 0.02);
    for (int64_t i = 0; i < depth_; ++i) {
      layers.emplace_back();
      layers.back().init(*this, "blocks." + std::to_string(i), width_, mlpRatio_);
      layers.back().fused = fused;
    }
    lnf.initLayerNorm(*this, "ln_f", width_);
    headName_ = spec.linears.at(0).name;
    head.init(*this, headName_, spec.linears.at(0).in, spec.linears.at(0).out);
  }
  std::string modelName() const override { return "vit"; }
  Task task() const override { return Task::Images; }
  at::Tensor forward(ops::Dispatcher& d, const at::Tensor& input) override {
    const int64_t n = input.size(0);
    at::Tensor x = patch(d, patchName_, input).flatten(2).transpose(1, 2);  // [n, tokens, width]
    x = d.add("pos_embed", x, positions);
    for (const TransformerLayer& l : layers) x = l(d, x, heads_, at::Tensor());
    x = d.layerNorm("ln_f", x, lnf.gamma, lnf.beta);
    x = d.globalAvgPool("pool", x.transpose(1, 2).reshape({n, width_, tokens_, 1}));  // mean over the tokens
    return head(d, headName_, x);
  }

 private:
  int64_t width_ = catalog::zooSpec("vit").width, heads_ = catalog::zooSpec("vit").heads,
          depth_ = catalog::zooSpec("vit").depth, mlpRatio_ = catalog::zooSpec("vit").mlpRatio, tokens_ = 0;
  std::string headName_, patchName_;
  ConvParams patch;
  at::Tensor positions;
  std::vector<TransformerLayer> layers;
  NormParams lnf;
  LinearParams head;
};

}  // namespace

at::Tensor Model::registerParameter(const std::string& name, at::Tensor value) {
  value = value.detach().contiguous().set_requires_grad(true);
  parameters_.emplace_back(name, value);
  return value;
}

at::Tensor Model::registerBuffer(const std::string& name, at::Tensor value) {
  value = value.detach().contiguous();
  buffers_.emplace_back(name, value);
  return value;
}

int64_t Model::parameterCount() const {
  int64_t n = 0;
  for (const auto& p : parameters_) n += p.second.numel();
  return n;
}

// The list lives in core/cli (torch-free), so that `peat --help` names the models without LibTorch.
const std::vector<std::string>& modelNames() { return cli::zooModelNames(); }

std::string modelList() { return cli::zooModelList(); }

Task taskOf(const std::string& name) {
  const catalog::ZooModel* m = catalog::zooModel(name);
  if (!m) throw std::invalid_argument("unknown model '" + name + "'; valid models: " + modelList());
  return m->task == catalog::Task::Text ? Task::Text : Task::Images;
}

std::shared_ptr<Model> makeModel(const std::string& name, const ModelOptions& options) {
  if (name == "mlp") return std::make_shared<Mlp>();
  if (name == "lenet") return std::make_shared<LeNet>();
  if (name == "resnet") return std::make_shared<ResNet>();
  if (name == "vit") return std::make_shared<Vit>(options.fusedAttention);
  if (name == "chargpt") return std::make_shared<CharGpt>(options.vocabulary, options.context, options.fusedAttention);
  throw std::invalid_argument("unknown model '" + name + "'; valid models: " + modelList());
}

}  // namespace peat::models
