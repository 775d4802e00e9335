// SPDX-License-Identifier: MIT
#include "core/catalog/catalog.h"
#include "core/cli/torch_commands.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>

namespace peat::cli {

namespace {

// Every field of a TorchCommand, once: encode and decode walk this list, so they cannot drift.
template <class Command, class F>
void forEachField(Command& c, F&& f) {
  f("name", c.name);
  f("command_line", c.commandLine);
  f("json", c.json);
  f("force", c.force);
  f("model", c.model);
  f("iterations", c.iterations);
  f("batch", c.batch);
  f("learning_rate", c.learningRate);
  f("seed", c.seed);
  f("threads", c.threads);
  f("eval_every", c.evalEvery);
  f("eval_batches", c.evalBatches);
  f("context", c.context);
  f("attention", c.attention);
  f("init", c.init);
  f("data", c.data);
  f("task", c.task);
  f("input_mean", c.inputMean);
  f("input_std", c.inputStd);
  f("inspect", c.inspect);
  f("probe", c.probe);
  f("input_shape", c.inputShape);
  f("inside_probe", c.insideProbe);
  f("out", c.out);
  f("checkpoint_every", c.checkpointEvery);
  f("compression", c.compression);
  f("numerics", c.numerics);
  f("record_every", c.recordEvery);
  f("record_ops", c.recordOps);
  f("no_backward", c.noBackward);
  f("session", c.session);
  f("run", c.run);
  f("kernel", c.kernel);
  f("expect_model", c.expectModel);
  f("op", c.op);
  f("max_calls", c.maxCalls);
  f("call", c.call);
  f("resume_iterations", c.resumeIterations);
  f("resume_from", c.resumeFrom);
  f("run_name", c.runName);
  f("shard", c.shard);
  f("device", c.device);
  f("store_outputs", c.storeOutputs);
  f("in_process", c.inProcess);
  f("stop_on_kernel_failure", c.stopOnKernelFailure);
  f("mpi", c.mpi);
  f("shards", c.shards);
  f("layer", c.layer);
  f("every", c.every);
  f("seeds", c.seeds);
  f("phase", c.phase);
  f("probability", c.probability);
  f("eval_seeds", c.evalSeeds);
  f("eval_external", c.evalExternal);
}

std::string escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '\\') out += "\\\\";
    else if (ch == '\n') out += "\\n";
    else if (ch == '\r') out += "\\r";
    else out += ch;
  }
  return out;
}

std::string unescape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char next = s[++i];
    out += next == 'n' ? '\n' : next == 'r' ? '\r' : next;
  }
  return out;
}

std::string text(const std::string& v) { return v; }
std::string text(bool v) { return v ? "1" : "0"; }
std::string text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
template <class I>
std::string text(I v) {
  return std::to_string(v);
}

void parse(const std::string& s, std::string& v) { v = s; }
void parse(const std::string& s, bool& v) { v = s == "1"; }
void parse(const std::string& s, double& v) { v = std::strtod(s.c_str(), nullptr); }
void parse(const std::string& s, int& v) { v = int(std::strtol(s.c_str(), nullptr, 10)); }
void parse(const std::string& s, int64_t& v) { v = std::strtoll(s.c_str(), nullptr, 10); }
void parse(const std::string& s, uint64_t& v) { v = std::strtoull(s.c_str(), nullptr, 10); }

}  // namespace

const std::vector<TorchCommandInfo>& torchCommands() {
  static const std::vector<TorchCommandInfo> list{
      {"train", "Train a zoo model or your TorchScript model on real data and save checkpoints"},
      {"profile", "Golden profiling: train and record op calls and checkpoints into a session"},
      {"playback", "Playback FI: replay recorded calls through a candidate kernel"},
      {"runtime-fi", "Runtime FI: substitute a candidate every k-th call during live training"},
      {"detect-eval", "Confusion matrix of the detector on a labelled corpus of the project's own kernels"},
      {"kernels", "List candidate kernels and fault models"},
      {"models", "List the model zoo, or inspect a TorchScript file's GEMM sites"},
  };
  return list;
}

const std::vector<std::string>& zooModelNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const catalog::ZooModel& m : catalog::zooModels()) out.push_back(m.name);
    return out;
  }();
  return names;
}

std::string zooModelList() { return catalog::zooModelList(); }

std::string recordableOpList() {
  return "linear, conv2d, matmul, softmax, layernorm, gelu, relu, add, embedding, batchnorm, maxpool2d, avgpool2d, "
         "log_softmax, silu, tanh, sigmoid, dropout, cross_entropy, sgd, adam, attention";
}

std::string encode(const TorchCommand& command) {
  std::string out;
  forEachField(command, [&](const char* name, const auto& value) { out += std::string(name) + "=" + escape(text(value)) + "\n"; });
  return out;
}

TorchCommand decode(const std::string& encoded) {
  std::map<std::string, std::string> values;
  std::size_t start = 0;
  while (start < encoded.size()) {
    std::size_t end = encoded.find('\n', start);
    if (end == std::string::npos) end = encoded.size();
    const std::string line = encoded.substr(start, end - start);
    start = end + 1;
    const auto eq = line.find('=');
    if (eq == std::string::npos || eq == 0) throw std::invalid_argument("a torch command line without 'name=value': " + line);
    values[line.substr(0, eq)] = unescape(line.substr(eq + 1));
  }
  TorchCommand c;
  forEachField(c, [&](const char* name, auto& value) {
    const auto it = values.find(name);
    if (it == values.end()) throw std::invalid_argument(std::string("a torch command without the field '") + name + "'");
    parse(it->second, value);
  });
  return c;
}

}  // namespace peat::cli
