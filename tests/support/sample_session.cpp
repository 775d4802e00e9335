// SPDX-License-Identifier: MIT
#include "tests/support/sample_session.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <vector>

#include "core/fp/format.h"
#include "core/store/h5.h"
#include "core/store/session.h"

namespace peat::testsupport {

float sampleValue(int salt, long i) { return float(std::sin(0.37 * double(i) + salt) * (1.0 + salt)); }

namespace {
std::vector<float> values(int salt, long n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (long i = 0; i < n; ++i) v[std::size_t(i)] = sampleValue(salt, i);
  return v;
}

std::vector<uint16_t> narrowed(const fp::Format& f, const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = uint16_t(fp::encode(f, v[i]));
  return out;
}
}  // namespace

void writeSampleSession(const std::string& path, int iterations) {
  using namespace store;
  Provenance p;
  p.seed = 42;
  p.model = "format-sample";
  p.dataset = "synthetic";
  p.backend = "cpu";
  p.device = "host CPU";
  p.commandLine = "peat-sample-session";
  SessionWriter w(path, p, WriteMode::Overwrite);
  w.beginRun({"golden", "profile", "golden", "sample run for format tests"});
  for (int it = 0; it < iterations; ++it) {
    w.beginIteration(it);
    for (int c = 0; c < 4; ++c) {
      const int salt = it * 10 + c;
      const std::vector<float> input = values(salt, 64 * 128);  // 32 KiB: chunked and compressed
      const std::vector<float> output = values(salt + 100, 64 * 32);
      const std::vector<uint16_t> half = narrowed(fp::kFp16, output);
      const std::vector<uint16_t> bf = narrowed(fp::kBf16, output);
      const std::vector<int64_t> labels{int64_t(c), 3, 1, 4, 1, 5};
      CallId id{"fc" + std::to_string(c), c % 2 ? "relu" : "linear", c == 3 ? Phase::Backward : Phase::Forward, it, c};
      w.recordCall(id, {{"input_0", {DType::F32, {64, 128}, input.data()}},
                        {"output", {DType::F32, {64, 32}, output.data()}},
                        {"output_fp16", {DType::F16, {64, 32}, half.data()}},
                        {"output_bf16", {DType::BF16, {64, 32}, bf.data()}},
                        {"labels", {DType::I64, {6}, labels.data()}}});
    }
    w.endIteration();
  }
  const std::vector<float> weight = values(7, 32 * 128), momentum = values(8, 32 * 128);
  w.writeCheckpoint(std::min(2, iterations - 1), {{"fc0.weight", {DType::F32, {32, 128}, weight.data()}}},
                    {{"fc0.weight.momentum", {DType::F32, {32, 128}, momentum.data()}}});
  const std::vector<double> histogram{0, 3, 17, 40, 12, 1};
  ResultRecord report;
  report.scalars = {{"abs_error_max", 0.125}, {"mismatched", 57.0}};
  report.labels = {{"call", "iterations/000001/calls/000002"}, {"candidate", "fp16_inputs"}};
  report.arrays = {{"log2_abs_error_hist", {DType::F64, {6}, histogram.data()}}};
  w.writeReport("call-000001-000002", report);
  // the first verdict as written before findings were stored; the second with its findings
  std::vector<Verdict> verdicts{
      {"iterations/000001/calls/000002", "precision_loss", 0.9, "errors confined to mantissa bits 0-12", {}},
      {"iterations/000002/calls/000000", "bit_flip", 0.75, "one element, bit 27",
       {{"bit_flip", 0.75, {{"bit", 27.0}, {"elements", 1.0}}, {{"format", "fp32"}}}, {"accumulation_order", 0.5, {}, {}}}}};
  verdicts.resize(std::size_t(std::clamp(iterations - 1, 0, 2)));  // only of calls the session holds
  w.writeVerdicts(verdicts);
  w.endRun(RunStatus::Complete);
  const std::vector<uint8_t> classes{0, 1, 2, 2, 1, 0};
  ResultRecord save;
  save.scalars = {{"robust_fraction", 0.5}};
  save.labels = {{"layer", "fc0"}};
  save.arrays = {{"bit_class", {DType::U8, {2, 3}, classes.data()}}};
  w.writeSaveResult("fc0-bits", save);
}

void writeFutureSession(const std::string& path) {
  writeSampleSession(path);
  const h5::Lock lock;
  h5::File f(lock, path, h5::File::Mode::ReadWrite);
  f.root().setAttribute("schema_version", store::kSchemaVersion + 1);
}

void writeForeignHdf5(const std::string& path) {
  const h5::Lock lock;
  h5::File f(lock, path, h5::File::Mode::Truncate);
  const std::vector<float> v{1, 2, 3};
  f.root().createDataset("data", h5::Type::F32, {3}, v.data());
}

void writeTruncatedCopy(const std::string& source, const std::string& path, double fraction) {
  std::ifstream in(source, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + source);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(double(bytes.size()) * fraction));
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace peat::testsupport
