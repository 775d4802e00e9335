// SPDX-License-Identifier: MIT
// peat detect: which error model a candidate's difference from golden matches, with evidence.
#include <iostream>
#include <stdexcept>

#include "app/peat/commands.h"
#include "core/detector/detector.h"
#include "core/io/tensor_source.h"
#include "core/util/json_writer.h"

namespace peat::cli {

void writeVerdict(JsonWriter& j, const detector::Verdict& v, bool top) {
  if (!top) j.beginObject();
  j.field(top ? "verdict" : "model", v.model).field("confidence", v.confidence).field("explanation", v.explanation);
  j.key("parameters").beginObject();
  for (const auto& [k, val] : v.parameters) j.field(k, val);
  j.endObject().key("evidence").beginObject();
  for (const auto& [k, val] : v.evidence) j.field(k, val);
  j.endObject();
  if (!top) j.endObject();
}

std::string parameters(const detector::Verdict& v) {
  std::string s;
  for (const auto& [k, val] : v.parameters) s += (s.empty() ? " (" : ", ") + k + "=" + val;
  return s.empty() ? s : s + ")";
}

int runDetect(const DetectOptions& o) {
  const io::FloatTensor g = io::readSource(o.golden);
  std::vector<io::FloatTensor> candidates;
  std::vector<const float*> pointers;
  for (const std::string& spec : o.candidates) {
    candidates.push_back(io::readSource(spec));
    io::checkComparable(g, candidates.back());  // what peat analyze refuses, with the same message
  }
  for (const io::FloatTensor& c : candidates) pointers.push_back(c.data());
  const detector::Detection d = detector::detect(g.data(), pointers, g.shape());
  if (o.json) {
    JsonWriter j(std::cout);
    j.beginObject();
    writeVerdict(j, d.verdict, true);
    j.key("findings").beginArray();  // secondary findings beside the primary verdict
    for (const detector::Verdict& v : d.findings) writeVerdict(j, v, false);
    j.endArray();
    j.key("alternatives").beginArray();
    for (const detector::Verdict& v : d.alternatives) writeVerdict(j, v, false);
    j.endArray().endObject();
    std::cout << '\n';
    return 0;
  }
  std::cout << "verdict     " << d.verdict.model << parameters(d.verdict) << ", confidence " << d.verdict.confidence
            << "\n            " << d.verdict.explanation << '\n';
  for (const detector::Verdict& v : d.findings)
    std::cout << "also        " << v.model << parameters(v) << ", confidence " << v.confidence << ": " << v.explanation
              << '\n';
  for (const detector::Verdict& v : d.alternatives)
    std::cout << "alternative " << v.model << parameters(v) << ", confidence " << v.confidence << ": " << v.explanation
              << '\n';
  return 0;
}

}  // namespace peat::cli
