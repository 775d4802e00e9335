// SPDX-License-Identifier: MIT
#include "core/torch/train/detect_eval.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

#include "core/analysis/session_analysis.h"
#include "core/detector/detector.h"
#include "core/io/tensor_source.h"
#include "core/torch/kernels/kernel.h"

namespace peat::train {

namespace {

struct Labelled {
  const char* kernel;
  const char* expected;
  const char* format;  // expected precision format, or ""
  bool gemmOnly;
  bool replayTwice;    // races need two replays of the same input
};

// The label each built-in kernel's difference should receive.
const Labelled kCorpus[] = {
    {"golden", "exact", "", false, false},
    {"fp16", "precision_loss", "fp16", false, false},
    {"bf16", "precision_loss", "bf16", false, false},
    {"tf32", "precision_loss", "tf32", false, false},
    {"fp8-e4m3", "precision_loss", "fp8_e4m3", false, false},
    {"fp8-e5m2", "precision_loss", "fp8_e5m2", false, false},
    {"fp16acc", "precision_loss", "fp16", true, false},
    {"splitk:parts=4", "accumulation_order", "", true, false},
    {"pairwise", "accumulation_order", "", true, false},
    {"reversed", "accumulation_order", "", true, false},
    {"tile-edge", "index_error", "", true, false},
    {"missing-ktile", "index_error", "", true, false},
    {"zeroed-tail", "zeroed", "", true, false},
    {"stale-race", "nondeterministic", "", true, true},
    {"bitflip:bit=27", "bit_flip", "", false, false},
    {"bitflip", "bit_flip", "", false, false},
    {"multibit:bits=3,start=20", "multi_bit_flip", "", false, false},
    {"stuckat1:bit=29,region=0.05", "stuck_at", "", false, false},
    {"stuckat0:bit=22,region=0.05", "stuck_at", "", false, false},
    {"random-value", "random_value", "", false, false},
    {"zero:count=4", "zeroed", "", false, false},
    {"nan", "nan_inf", "", false, false},
    {"inf", "nan_inf", "", false, false},
};


ops::OpCall makeCall(const std::string& op, int seed) {
  at::manual_seed(seed);
  if (op == "linear") return {ops::OpKind::Linear, ops::Variant::Forward, {at::randn({64, 256}), at::randn({96, 256}) * 0.1, at::randn({96})}, {}};
  if (op == "conv2d")
    return {ops::OpKind::Conv2d, ops::Variant::Forward, {at::randn({8, 6, 14, 14}), at::randn({16, 6, 5, 5}) * 0.1, at::randn({16})},
            {{"stride", 1}, {"padding", 0}}};
  if (op == "softmax") return {ops::OpKind::Softmax, ops::Variant::Forward, {at::randn({64, 100}) * 3}, {}};
  return {ops::OpKind::LayerNorm, ops::Variant::Forward, {at::randn({64, 128}) * 2 + 1, at::randn({128}), at::randn({128})}, {}};
}

// The call's GEMM as the detector's bound: linear y = x w^T + b, conv2d as its im2col GEMM.
std::optional<detector::GemmBound> boundOf(const ops::OpCall& call, const at::Tensor& golden, std::vector<uint64_t>& seen,
                                           std::optional<analyzer::ConvGemm>& conv) {
  const at::Tensor x = call.inputs[0].contiguous(), w = call.inputs[1].contiguous();
  const at::Tensor b = call.inputs.size() > 2 ? call.inputs[2].contiguous() : at::Tensor();
  if (call.kind == ops::OpKind::Linear) {
    const at::Tensor wt = w.t().contiguous();
    seen = {uint64_t(x.size(0)), uint64_t(w.size(0))};
    return detector::gemmBound(x.data_ptr<float>(), wt.data_ptr<float>(), x.size(0), x.size(1), w.size(0),
                               b.defined() ? b.data_ptr<float>() : nullptr);
  }
  if (call.kind != ops::OpKind::Conv2d) return std::nullopt;
  const auto shapeOf = [](const at::Tensor& t) { return std::vector<uint64_t>(t.sizes().begin(), t.sizes().end()); };
  conv = analyzer::convGemm(x.data_ptr<float>(), shapeOf(x), w.data_ptr<float>(), shapeOf(w),
                            b.defined() ? b.data_ptr<float>() : nullptr, b.defined() ? std::size_t(b.numel()) : 0, call.params,
                            shapeOf(golden));
  if (!conv) return std::nullopt;
  seen = conv->seenShape();
  return conv->bound;
}

// Counts one case in r. expected "legitimate": any legitimate verdict is right.
void judge(DetectEvalResult& r, DetectEvalCase c, const detector::Detection& d) {
  c.got = d.verdict.model;
  c.confidence = d.verdict.confidence;
  if (d.verdict.parameters.count("format")) c.gotFormat = d.verdict.parameters.at("format");
  if (d.verdict.parameters.count("also_reproduced_by")) c.alsoReproducedBy = d.verdict.parameters.at("also_reproduced_by");
  for (const detector::Verdict& v : d.alternatives) c.alternatives.push_back(v.model);
  const bool anyLegitimate = c.expected == "legitimate";
  c.correct = anyLegitimate ? detector::legitimateVerdict(c.got) : c.got == c.expected;
  ++r.confusion[c.expected][c.got];
  if (c.correct) ++r.correct;
  if (!c.expectedFormat.empty() && c.correct && (!anyLegitimate || c.got == "precision_loss")) {
    ++r.formatChecked;
    if (c.gotFormat == c.expectedFormat) ++r.formatCorrect;
    else if (("," + c.alsoReproducedBy + ",").find("," + c.expectedFormat + ",") != std::string::npos) ++r.formatTied;
    ++r.formatConfusion[c.expectedFormat][c.gotFormat.empty() ? "none" : c.gotFormat];
  }
  if (anyLegitimate || detector::legitimateVerdict(c.expected)) {
    ++r.legitimate;
    if (c.got == "unknown") ++r.legitimateUnknown;
    else if (!detector::legitimateVerdict(c.got)) ++r.legitimateFaultVerdicts;
  } else {
    ++r.faults;
    if (detector::legitimateVerdict(c.got)) ++r.faultLegitimateVerdicts;
  }
  r.cases.push_back(c);
}

void judge(DetectEvalResult& r, const char* op, const Labelled& l, bool masked, const detector::Detection& d) {
  DetectEvalCase c;
  c.op = op;
  c.kernel = l.kernel;
  c.expected = masked ? "exact" : l.expected;
  c.expectedFormat = masked ? "" : l.format;
  judge(r, std::move(c), d);
}

std::vector<std::string> split(const std::string& s, char by) {
  std::vector<std::string> out(1);
  for (char ch : s) {
    if (ch == by) out.emplace_back();
    else out.back() += ch;
  }
  return out;
}

}  // namespace

DetectEvalRun runDetectEval(int seeds) {
  DetectEvalRun run;
  DetectEvalResult& r = run.outputsOnly;
  for (const char* op : {"linear", "conv2d", "softmax", "layernorm"}) {
    const bool gemm = std::string(op) == "linear" || std::string(op) == "conv2d";
    for (const Labelled& l : kCorpus) {
      if (l.gemmOnly && !gemm) continue;
      for (int seed = 0; seed < seeds; ++seed) {
        const ops::OpCall call = makeCall(op, 1000 * seed + 17);
        auto kernel = kernels::makeKernel(l.kernel, uint64_t(seed) + 1);
        const at::Tensor golden = kernels::runGolden(call).contiguous();
        std::vector<at::Tensor> outs{kernel->run(call, {}).contiguous()};
        if (l.replayTwice)  // three replays: two alone agree by chance a few percent of the time
          for (int k = 0; k < 2; ++k) outs.push_back(kernel->run(call, {}).contiguous());
        std::vector<const float*> pointers;
        for (const at::Tensor& t : outs) pointers.push_back(t.data_ptr<float>());
        std::vector<uint64_t> shape(golden.sizes().begin(), golden.sizes().end());
        // A fault that changed nothing (a bit already at its stuck value) is masked: the right answer is exact.
        const bool masked = outs.front().equal(golden) && std::string(l.expected) != "exact";
        judge(r, op, l, masked, detector::detect(golden.data_ptr<float>(), pointers, shape));
        // the same pair with the operands, as a session's recorded GEMM calls give them
        std::vector<uint64_t> seen;
        std::optional<analyzer::ConvGemm> conv;
        const std::optional<detector::GemmBound> bound = gemm ? boundOf(call, golden, seen, conv) : std::nullopt;
        if (!bound) continue;
        std::vector<float> g(golden.data_ptr<float>(), golden.data_ptr<float>() + golden.numel());
        std::vector<std::vector<float>> cs;
        for (const at::Tensor& t : outs) cs.emplace_back(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
        if (conv) {  // the conv's outputs in its GEMM's layout
          g = conv->toGemm(g);
          for (auto& cv : cs) cv = conv->toGemm(cv);
        }
        std::vector<const float*> seenPointers;
        for (const auto& cv : cs) seenPointers.push_back(cv.data());
        judge(run.withOperands, op, l, masked, detector::detect(g.data(), seenPointers, seen, {}, &*bound));
      }
    }
  }
  return run;
}

ExternalEvalRun runExternalEval(const std::string& dir) {
  ExternalEvalRun run;
  run.labels = (std::filesystem::path(dir) / "labels.tsv").string();
  std::ifstream in(run.labels);
  if (!in) throw std::invalid_argument("--external: cannot read " + run.labels);
  const std::vector<std::string>& names = detector::verdictNames();
  auto path = [&](const std::string& f) {  // a file's path relative to DIR, or file.h5:/dataset
    return std::filesystem::path(f).is_absolute() ? f : (std::filesystem::path(dir) / f).string();
  };
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> f = split(line, '\t');
    const std::string where = run.labels + " line " + std::to_string(number);
    if (f.size() != 6) throw std::invalid_argument(where + ": " + std::to_string(f.size()) + " fields, not 6");
    if (f[2] != "legitimate" && std::find(names.begin(), names.end(), f[2]) == names.end())
      throw std::invalid_argument(where + ": '" + f[2] + "' is neither legitimate nor a verdict");
    const io::FloatTensor golden = io::readSource(path(f[4]));
    std::vector<io::FloatTensor> candidates;
    std::vector<const float*> pointers;
    for (const std::string& c : split(f[5], ',')) {
      candidates.push_back(io::readSource(path(c)));
      io::checkComparable(golden, candidates.back());
    }
    for (const io::FloatTensor& c : candidates) pointers.push_back(c.data());
    const detector::Detection d = detector::detect(golden.data(), pointers, golden.shape());
    DetectEvalCase c;
    c.op = f[0];
    c.kernel = f[1];
    c.expected = f[2];
    c.expectedFormat = f[3] == "-" ? "" : f[3];
    judge(run.all, c, d);
    auto part = std::find_if(run.parts.begin(), run.parts.end(), [&](const auto& p) { return p.first == f[0]; });
    if (part == run.parts.end()) part = run.parts.insert(run.parts.end(), {f[0], DetectEvalResult{}});
    judge(part->second, c, d);
  }
  if (run.all.cases.empty()) throw std::invalid_argument("--external: " + run.labels + " lists no pairs");
  return run;
}

}  // namespace peat::train
