// SPDX-License-Identifier: MIT
// Writes the fuzzer's seed sessions (tests/fuzz/corpus/session): small, but with every kind of
// object a reader meets (runs, complete and unfinished iterations, calls with linked tensors of
// several types, a checkpoint, a table, verdicts, a report, a SAVE result).
//   make_session_seeds DIR
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/store/packed_records.h"
#include "core/store/session.h"

namespace peat {
const char* toolVersion() { return "seed"; }
const char* gitCommit() { return "seed"; }
}  // namespace peat

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  using namespace peat::store;
  const std::string dir = argv[1];
  const std::vector<float> a{1.5f, -2.25f, 3.0f, 0.0f, -0.0f, 1e-40f};
  const std::vector<uint16_t> bf{0x3fc0, 0xc010, 0x4040};
  const std::vector<int64_t> labels{3, 1, 4};
  const std::vector<double> hist{1, 2};
  for (int variant = 0; variant < 3; ++variant) {
    Provenance p;
    p.model = "seed";
    p.seed = variant;
    SessionWriter w(dir + "/seed" + std::to_string(variant) + ".h5", p, WriteMode::Overwrite);
    w.beginRun({"golden", "profile", "golden", "seed"});
    for (int it = 0; it < (variant == 0 ? 1 : 2); ++it) {
      w.beginIteration(it);
      const std::string first = w.recordCall({"fc1", "linear", Phase::Forward, it, 0},
                                             {{"input_0", {DType::F32, {2, 3}, a.data()}},
                                              {"output", {DType::BF16, {3}, bf.data()}},
                                              {"labels", {DType::I64, {3}, labels.data()}}});
      w.recordCall({"fc1", "linear", Phase::Backward, it, 1},
                   {NamedTensor{"input_0", {}, first + "/input_0"}, NamedTensor{"output", {DType::F32, {6}, a.data()}}});
      if (variant != 2 || it == 0) w.endIteration();  // variant 2 ends with an iteration in flight
    }
    if (variant >= 1) {
      w.writeCheckpoint(1, {{"fc1.weight", {DType::F32, {2, 3}, a.data()}}}, {{"fc1.weight.m", {DType::F32, {6}, a.data()}}});
      w.writeTable("curve", {{"iteration", false, {}, {0, 1}}, {"loss", false, {}, {2.3, 2.1}}});
      w.writeVerdicts({{"iterations/000000/calls/000000", "precision_loss", 0.9, "bit 13"}});
      ResultRecord r;
      r.scalars["abs_error_max"] = 0.125;
      r.labels["candidate"] = "fp16";
      r.arrays.push_back({"hist", {DType::F64, {2}, hist.data()}});
      w.writeReport("call-000000-000000", r);
      RecordPacker packer;  // two reports as rows of one record, as analyze --session stores them
      packer.add("call-000001-000000", r);
      r.labels["verdict"] = "exact";
      packer.add("call-000001-000001", r);
      w.writeReport(packer.firstId() + kPackSuffix, packer.record());
      w.writeSaveResult("fc1-bits", r);
    }
    if (variant != 2) w.endRun(RunStatus::Complete);
  }
  return 0;
}
