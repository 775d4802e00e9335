// SPDX-License-Identifier: MIT
#pragma once
// The facts that the CLI, the GUI, the LibTorch module and SAVE all name, typed once (issue 43):
// the model zoo (names, tasks, datasets and their input normalisation, which zoo models SAVE has
// a graph of) and the catalog of candidate kernels and fault models (names, families, the ops they
// apply to, options and a line for people). No Qt, no LibTorch: `peat --help`, the run panel and the
// shell completion read it without loading the LibTorch module; ctest catalog_consumers fails when
// any of them lists something this does not.
#include <string>
#include <vector>

namespace peat::catalog {

// Fashion-MNIST's pixel mean and deviation (of pixels / 255), as the trainer normalises it.
constexpr float kFashionMnistMean = 0.2860f, kFashionMnistStd = 0.3530f;

enum class Task { Images, Text };

struct ZooModel {
  std::string name;
  Task task;
  std::string data;           // its built-in dataset
  bool saveGraph;             // SAVE has its graph (core/save/graph.cpp)
  std::string summary;        // one line for people
};
const std::vector<ZooModel>& zooModels();
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
