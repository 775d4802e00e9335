// SPDX-License-Identifier: MIT
#pragma once
// The facts that the CLI, the GUI, the LibTorch module and SAVE all name, typed once (issue 43):
// the model zoo (names, tasks, datasets and their input normalisation, which zoo models SAVE has
// a graph of, each model's layers) and the catalog of candidate kernels and fault models (names, families, the ops they
// apply to, options and a line for people). No Qt, no LibTorch: `peat --help`, the run panel and the
// shell completion read it without loading the LibTorch module; ctest catalog_consumers fails when
// any of them lists something this does not.
#include <cstdint>
#include <string>
#include <vector>

namespace peat::catalog {

// Fashion-MNIST's pixel mean and deviation (of pixels / 255), as the trainer normalises it.
constexpr float kFashionMnistMean = 0.2860f, kFashionMnistStd = 0.3530f;
// ImageNet's per-channel normalisation (torchvision's), and its mean over the channels (SAVE's
// ResNet-18 timing graph normalises its one box with these).
constexpr float kImageNetMean[3] = {0.485f, 0.456f, 0.406f}, kImageNetStd[3] = {0.229f, 0.224f, 0.225f};
constexpr float kImageNetMeanAll = 0.449f, kImageNetStdAll = 0.226f;

enum class Task { Images, Text };

struct ZooModel {
  std::string name;
  Task task;
  std::string data;           // its built-in dataset
  bool saveGraph;             // SAVE has its graph (core/save/zoo_graph.cpp)
  std::string summary;        // one line for people
};
const std::vector<ZooModel>& zooModels();

// Each zoo model's layers, typed once (issue 43): the LibTorch zoo (core/torch/models/zoo.cpp)
// builds its modules from this and SAVE (core/save/zoo_graph.cpp) its graphs, so their parameters'
// names and shapes cannot drift apart (SAVE reads the zoo's checkpoints by those names).
struct ZooConv {
  std::string name;
  int64_t in, out, kernel, stride, padding;
  bool bias;
};
struct ZooLinear {
  std::string name;
  int64_t in, out;
};
// A basic residual block: 3x3 conv, batch norm, ReLU, 3x3 conv, batch norm, plus the input (through
// a 1x1 conv and batch norm, "<name>.shortcut", when the block changes the shape), then ReLU.
struct ZooBlock {
  std::string name;
  int64_t in, out, stride;
};
struct ZooSpec {
  std::vector<int64_t> input;    // one sample of the images ({1, 28, 28}); empty for text
  // lenet: each conv then ReLU and a 2x2 max-pool (pool1, pool2); resnet: the stem (then batch
  // norm and ReLU); vit: the patch embedding
  std::vector<ZooConv> convs;
  std::vector<ZooBlock> blocks;  // resnet
  // mlp, lenet: ReLU between them; resnet and vit: the head
  std::vector<ZooLinear> linears;
  // vit and chargpt: pre-norm transformer blocks of `heads`-head self-attention and a GELU MLP of
  // mlpRatio * width features
  int64_t width = 0, heads = 0, depth = 0, mlpRatio = 4;
};
// Throws std::invalid_argument for a name that is no zoo model.
const ZooSpec& zooSpec(const std::string& name);
const ZooModel* zooModel(const std::string& name);  // null: not a zoo model
std::string zooModelList();                         // "mlp, lenet, ...", for messages
std::string saveModelList();                        // the zoo models SAVE has a graph of

struct KernelDescription {
  std::string name;
  std::string family;   // "golden", "precision", "order", "bug", "fault", "plugin", "device"
  std::string ops;      // which ops it applies to
  std::string options;  // accepted options with defaults
  std::string summary;
};
const std::vector<KernelDescription>& kernels();
const KernelDescription* kernel(const std::string& name);  // null: none of that name
std::string kernelList();  // names for error messages

}  // namespace peat::catalog
