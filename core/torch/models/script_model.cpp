// SPDX-License-Identifier: MIT
#include "core/torch/models/script_model.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>
#include <torch/version.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "base/sys.h"
#include "core/cli/torch_commands.h"
#include "core/torch/models/script_ops.h"
#include "core/torch/models/script_rewriter.h"
#include "core/util/helper_process.h"

namespace peat::models {

namespace {

// The first line of a message that says something (LibTorch's load errors start with a newline).
std::string firstLine(const std::string& s) {
  const auto start = s.find_first_not_of("\n \t");
  if (start == std::string::npos) return std::string();
  return s.substr(start, s.find('\n', start) - start);
}

// What a file that torch::jit::load refused is, for a message that says what to do.
std::string describeLoadFailure(const std::string& path, const std::string& loaderMessage) {
  std::ifstream in(path, std::ios::binary);
  char head[8] = {};
  in.read(head, sizeof head);
  const std::string howTo =
      "export TorchScript with torch.jit.trace(model, example_input).save(FILE) or torch.jit.script(model).save(FILE)";
  if (in.gcount() >= 2 && static_cast<unsigned char>(head[0]) == 0x80)
    return "'" + path + "' is a pickled Python object (torch.save of a module or state dict), not TorchScript: " + howTo;
  if (in.gcount() >= 4 && head[0] == 'P' && head[1] == 'K') {
    try {
      caffe2::serialize::PyTorchStreamReader reader(path);
      const auto records = reader.getAllRecords();
      const bool hasCode = std::any_of(records.begin(), records.end(),
                                       [](const std::string& r) { return r.rfind("code/", 0) == 0; });
      if (!hasCode)
        return "'" + path + "' is a torch.save archive (an eager module or state dict), not TorchScript: " + howTo;
      const std::string libtorch =
          "LibTorch " + std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);
      const std::string record =
          "or record the training in your own PyTorch instead: peat record -o S.h5 -- python3 train.py (docs/record.md)";
      // "Unknown builtin op: aten::scaled_dot_product_attention." (an op newer than this LibTorch)
      const std::string unknown = "Unknown builtin op: ";
      const auto at = loaderMessage.find(unknown);
      if (at != std::string::npos) {
        std::string op = loaderMessage.substr(at + unknown.size());
        op = op.substr(0, op.find_first_of(".\n "));
        return "'" + path + "' uses " + op + ", which " + libtorch + " does not have (the file was saved by a newer PyTorch, " +
               "archive format version " + std::to_string(reader.version()) + "): re-export it with PyTorch 1.13 " +
               "without that op, " + record;
      }
      return libtorch + " cannot load '" + path + "' (archive format version " + std::to_string(reader.version()) +
             "): " + firstLine(loaderMessage) + "; it was probably saved by a newer PyTorch: re-export it with " +
             "PyTorch 1.13 (Debian's python3-torch), avoiding operators newer than 1.13, " + record;
    } catch (const c10::Error&) {
    }
  }
  if (path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0)
    return "'" + path + "' is an ONNX file, not TorchScript: training needs TorchScript; " + howTo;
  return "'" + path + "' is not a TorchScript archive (" + firstLine(loaderMessage) + "): " + howTo;
}

}  // namespace

std::string interpreterMessage(const std::string& what) {
  std::istringstream in(what);
  std::string line, found;
  while (std::getline(in, line)) {
    const auto colon = line.find("Error: ");
    if (colon != std::string::npos && line.find(' ') > colon) found = line.substr(colon + 7);
  }
  return found.empty() ? firstLine(what) : found;
}

bool isModelFile(const std::string& spec) {
  const auto& zoo = cli::zooModelNames();
  return std::find(zoo.begin(), zoo.end(), spec) == zoo.end();
}

struct ScriptedModel::Impl {
  torch::jit::Module module;
};

ScriptedModel::ScriptedModel(const std::string& path, Task task, bool fuseAttention)
    : impl_(std::make_unique<Impl>()), path_(path), task_(task) {
  {
    std::ifstream probe(path, std::ios::binary);
    if (!probe) throw std::invalid_argument("cannot read model file '" + path + "'");
  }
  // The rewritten graph runs as it is: no profiling executor, no fusion, no autodiff subgraphs.
  torch::jit::getExecutorMode() = false;
  torch::jit::getProfilingMode() = false;
  torch::jit::setGraphExecutorOptimize(false);
  try {
    impl_->module = torch::jit::load(path, c10::Device(c10::kCPU));
  } catch (const c10::Error& e) {
    throw std::invalid_argument(describeLoadFailure(path, e.what_without_backtrace()));
  } catch (const std::exception& e) {
    throw std::invalid_argument(describeLoadFailure(path, e.what()));
  }
  torch::jit::Module& m = impl_->module;
  if (!m.find_method("forward")) throw std::invalid_argument("model file '" + path + "' has no forward method");
  auto graph = m.get_method("forward").graph();
  // Inline takes each callee's optimised graph, itself inlined only while the executor optimises:
  // on for the inlining, so that every node's call stack names its whole module path.
  torch::jit::setGraphExecutorOptimize(true);
  for (int depth = 0; depth < 256 && hasCalls(graph->block()); ++depth) torch::jit::Inline(*graph);
  torch::jit::setGraphExecutorOptimize(false);
  // PEAT_BENCH_NO_SLOT=1 (benchmarks only: tests/bench/models.sh) leaves the graph on ATen, to time
  // the slot against plain LibTorch on the same module, data and training loop.
  if (const char* plain = std::getenv("PEAT_BENCH_NO_SLOT"); plain && *plain == '1')
    sites_.push_back({"(all)", "-", false, "PEAT_BENCH_NO_SLOT=1: the graph runs on ATen, nothing is routed", ""});
  else
    sites_ = rewriteForSlot(m, graph, fuseAttention);
  std::set<const void*> seen;  // a tied parameter (one tensor under two names) is trained once
  for (const auto& p : m.named_parameters(true)) {
    const at::Tensor& t = p.value;
    if (!seen.insert(t.unsafeGetTensorImpl()).second) continue;
    if (t.scalar_type() != at::kFloat)
      throw std::invalid_argument("model file '" + path + "': parameter '" + p.name + "' is " +
                                  std::string(c10::toString(t.scalar_type())) + "; only float32 models are trained");
    adoptParameter(p.name, t);  // frozen parameters (requires_grad false) stay frozen
  }
  for (const auto& b : m.named_buffers(true)) {
    if (b.value.scalar_type() == at::kFloat || b.value.scalar_type() == at::kLong)
      adoptBuffer(b.name, b.value);
    else
      skippedBuffers_.push_back(b.name);
  }
  if (parameters().empty()) throw std::invalid_argument("model file '" + path + "' has no parameters to train");
}

ScriptedModel::~ScriptedModel() = default;

void ScriptedModel::setTrainingMode(bool training) { impl_->module.train(training); }

at::Tensor ScriptedModel::forward(ops::Dispatcher& ops, const at::Tensor& input) {
  const SlotScope current(&ops);
  c10::IValue out = impl_->module.forward({input});
  if (out.isTuple() && !out.toTupleRef().elements().empty()) out = out.toTupleRef().elements()[0];
  if (!out.isTensor())
    throw std::invalid_argument("model file '" + path_ + "' returns " + out.tagKind() + ", not a tensor");
  return out.toTensor();
}

std::string ScriptedModel::routingSummary() const {
  // routed sites counted by slot op; GEMMs and recurrent layers left on ATen named one by one with
  // their reason; the other kernels left on ATen counted by kind
  std::map<std::string, int64_t> routed, others;
  int64_t routedCount = 0, leftCount = 0;
  std::string namedLeft;
  for (const ScriptSite& s : sites_) {
    if (s.routed) {
      ++routedCount;
      ++routed[s.op.empty() ? s.aten : s.op];
      continue;
    }
    ++leftCount;
    if (isOtherComputeKind(s.aten))
      ++others[s.aten];
    else
      namedLeft += (namedLeft.empty() ? "" : "; ") + s.layer + " (" + s.aten + "): " + s.detail;
  }
  std::string out = "routed " + std::to_string(routedCount) + " op site" + (routedCount == 1 ? "" : "s");
  if (!routed.empty()) {
    std::string parts;
    for (const auto& [op, n] : routed) parts += (parts.empty() ? "" : ", ") + std::to_string(n) + " " + op;
    out += " (" + parts + ")";
  }
  if (leftCount > 0) {
    out += ", " + std::to_string(leftCount) + " left on ATen: " + namedLeft;
    std::string counted;
    for (const auto& [kind, n] : others) counted += (counted.empty() ? "" : ", ") + std::to_string(n) + " " + kind;
    if (!counted.empty()) out += (namedLeft.empty() ? "" : "; ") + std::string("no slot op for ") + counted;
  }
  return out;
}

namespace {

std::string shapeText(at::IntArrayRef shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

class FirstCalls final : public ops::CallObserver {
 public:
  void onCall(const store::CallId& id, const ops::OpCall& call, const at::Tensor& output) override {
    const std::string key = id.layer + "\t" + ops::opName(call.kind);
    auto it = index_.find(key);
    if (it != index_.end()) {
      ++calls[it->second].calls;
      return;
    }
    SiteCall s{id.layer, ops::opName(call.kind), "", 0, 1};
    if (ops::isGemmOp(call.kind)) {
      const at::Tensor& a = call.inputs[0];
      const at::Tensor& b = call.inputs[1];
      s.shapes = (call.kind == ops::OpKind::Matmul ? "a " : "x ") + shapeText(a.sizes()) +
                 (call.kind == ops::OpKind::Matmul ? " b " : " w ") + shapeText(b.sizes()) + " -> " + shapeText(output.sizes());
      if (call.kind == ops::OpKind::Linear) s.reduction = b.size(1);
      if (call.kind == ops::OpKind::Matmul) s.reduction = a.size(-1);
      if (call.kind == ops::OpKind::Conv2d) {
        s.reduction = b.size(1) * b.size(2) * b.size(3);
        s.shapes += ", " + ops::convGeometry(call).text();
      }
    } else {
      for (std::size_t i = 0; i < call.inputs.size(); ++i)
        s.shapes += (i ? " " : "") + std::string(i == 0 ? "x " : "in" + std::to_string(i) + " ") + shapeText(call.inputs[i].sizes());
      s.shapes += " -> " + shapeText(output.sizes());
      if (call.kind == ops::OpKind::Softmax || call.kind == ops::OpKind::LogSoftmax)
        s.reduction = call.inputs[0].size(call.paramOr("dim", call.inputs[0].dim() - 1));
      if (call.kind == ops::OpKind::LayerNorm) s.reduction = call.inputs[0].size(-1);
    }
    index_[key] = calls.size();
    calls.push_back(s);
  }
  void reset() {  // a forward that failed part-way: its calls do not count
    calls.clear();
    index_.clear();
  }
  std::vector<SiteCall> calls;

 private:
  std::map<std::string, std::size_t> index_;
};

}  // namespace

std::vector<SiteCall> forwardCalls(ScriptedModel& model, const std::vector<int64_t>& inputShape) {
  at::NoGradGuard noGrad;
  ops::Dispatcher d;
  FirstCalls observer;
  d.addObserver(&observer);
  model.setTrainingMode(false);
  at::Tensor input = model.task() == Task::Text ? at::zeros(inputShape, at::kLong) : at::zeros(inputShape);
  try {
    try {
      model.forward(d, input);
    } catch (const std::exception& e) {  // c10::Error, or the model's own wrapping of it
      // a token classifier's embedding wants ids: the same shape as int64 (as its data would be fed)
      const std::string what = e.what();
      if (input.scalar_type() != at::kFloat ||
          (what.find("Long") == std::string::npos && what.find("indices") == std::string::npos))
        throw;
      observer.reset();
      input = at::zeros(inputShape, at::kLong);
      model.forward(d, input);
    }
  } catch (const c10::Error& e) {
    throw std::invalid_argument("model file '" + model.modelName() + "' does not take an input of shape " +
                                shapeText(inputShape) + ": " + interpreterMessage(e.what_without_backtrace()));
  } catch (const std::invalid_argument&) {
    throw;
  } catch (const std::exception& e) {
    throw std::invalid_argument("model file '" + model.modelName() + "' does not take an input of shape " +
                                shapeText(inputShape) + ": " + interpreterMessage(e.what()));
  }
  return observer.calls;
}

namespace {

// A model file as the probes remember it: its path, size and modification time (a changed file is
// probed again).
std::string probeKey(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw std::invalid_argument("cannot read model file '" + path + "'");
  return path + "\t" + std::to_string(st.st_size) + "\t" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

}  // namespace

void probeModelFile(const std::string& path) {
  static std::mutex mutex;
  static std::set<std::string> probed;  // once per file per process
  const std::string key = probeKey(path);
  std::lock_guard<std::mutex> lock(mutex);
  if (probed.count(key)) return;
  const sys::HelperResult r =
      sys::runProbeHelper({"torchscript", path}, sys::probeTimeout(120), "loading model file '" + path + "'",
                          "LibTorch's loader crashed on model file '" + path + "'");
  if (r.exitCode != 0)  // the helper's refusal, passed on: a file it refused is never loaded here
    throw std::invalid_argument(r.output.rfind("error\t", 0) == 0 ? r.output.substr(6) : r.output);
  probed.insert(key);
}

void probeModelForward(const std::string& path, const std::vector<int64_t>& inputShape, Task task) {
  static std::mutex mutex;
  static std::set<std::string> probed;
  std::string shape;
  for (int64_t d : inputShape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
  const std::string taskText = task == Task::Text ? "lm" : task == Task::Regression ? "regression" : "classification";
  const std::string key = probeKey(path) + "\t" + shape + "\t" + taskText;
  std::lock_guard<std::mutex> lock(mutex);
  if (probed.count(key)) return;
  const double seconds = sys::probeTimeout(120);
  const std::string limits = "under " + std::to_string(sys::modelMemoryMiB()) +
                             " MiB (PEAT_MODEL_MEMORY_MIB) and " + std::to_string(int(seconds)) + " s (PEAT_PROBE_TIMEOUT)";
  const sys::HelperResult r =
      sys::runProbeHelper({"torchscript", path, shape, taskText}, seconds,
                          "the first forward of model file '" + path + "' (" + limits + ")",
                          "the first forward of model file '" + path + "' crashed");
  if (r.exitCode != 0) {
    const std::string why = r.output.rfind("error\t", 0) == 0 ? r.output.substr(6) : r.output;
    throw std::invalid_argument(why + " (its first forward ran in the probe helper " + limits + ")");
  }
  probed.insert(key);
}

std::shared_ptr<ScriptedModel> loadScriptedModel(const std::string& path, Task task, Probe probe, bool fuseAttention) {
  if (probe == Probe::First) probeModelFile(path);
  return std::make_shared<ScriptedModel>(path, task, fuseAttention);
}

}  // namespace peat::models
