// SPDX-License-Identifier: MIT
#include "core/catalog/catalog.h"
#include "core/save/onnx_model.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "base/sys.h"
#include "core/util/helper_process.h"

namespace peat::save {

namespace {

using ImportFn = int (*)(const char*, const void*, void*, char*, unsigned long);

ImportFn importer() {
  static std::mutex mutex;
  static std::unique_ptr<sys::SharedLibrary> module;
  static ImportFn fn = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (!fn) {
    const std::string path = sys::modulePath("peat_onnx");
    if (!sys::fileExists(path))
      throw SaveError("ONNX support is not built (" + path + " is missing; tools/setup.sh installs libonnx-dev)");
    try {
      module = std::make_unique<sys::SharedLibrary>(path);
      fn = reinterpret_cast<ImportFn>(module->symbol("peat_onnx_import_v1"));
    } catch (const std::exception& e) {
      throw SaveError(std::string("cannot load the ONNX module: ") + e.what());
    }
  }
  return fn;
}

}  // namespace

bool isOnnxModel(const std::string& spec) {
  return spec.size() > 5 && spec.compare(spec.size() - 5, 5, ".onnx") == 0;
}

Graph onnxGraph(const std::string& path, InsideProbe, const std::map<std::string, store::Tensor>* replacements) {
  if (!sys::fileExists(path)) throw SaveError("cannot read ONNX model '" + path + "'");
  Graph g;
  char error[4096] = {};
  if (importer()(path.c_str(), replacements, &g, error, sizeof error) != 0) throw SaveError(error);
  g.inputMean = catalog::kFashionMnistMean;  // Fashion-MNIST, as the zoo's graphs
  g.inputDeviation = catalog::kFashionMnistStd;
  return g;
}

Graph onnxGraph(const std::string& path, const std::map<std::string, store::Tensor>* replacements) {
  if (!sys::fileExists(path)) throw SaveError("cannot read ONNX model '" + path + "'");
  const sys::HelperResult r = sys::runProbeHelper({"onnx", path}, sys::probeTimeout(120),
                                                  "reading ONNX model '" + path + "'",
                                                  "the ONNX parser crashed on '" + path + "'");
  if (r.output.rfind("error\t", 0) == 0) throw SaveError(r.output.substr(6));
  if (r.output.rfind("ok\t", 0) != 0) throw SaveError("the ONNX probe answered in an unknown format");
  return onnxGraph(path, InsideProbe{}, replacements);
}

}  // namespace peat::save
