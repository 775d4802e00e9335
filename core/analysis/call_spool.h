// SPDX-License-Identifier: MIT
#pragma once
// Private to core/analysis: each call's whole analysis (its report with the histograms and tile
// counts, the detection with its findings and alternatives, the criteria) kept in an anonymous file
// beside the session from the moment a worker finishes it until the analysis is stored and handed
// on in call order, so that analyze's memory does not grow with the calls a session holds (the
// session cannot be written while it is read, so nothing can be stored as it goes).
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/analysis/session_analysis.h"
#include "core/util/spool_file.h"

namespace peat::analyzer {

class CallSpool {
 public:
  CallSpool(const std::string& besideSession, std::size_t calls) : file_(besideSession), at_(calls) {}
  // Keeps call `index`'s analysis; thread-safe.
  void add(std::size_t index, const CallAnalysis& analysis);
  // The analysis kept as call `index`, every field as it was given.
  CallAnalysis read(std::size_t index) const;
  std::size_t size() const { return at_.size(); }

  // The byte form, exposed for its round-trip test.
  static std::vector<unsigned char> encode(const CallAnalysis& analysis);
  static CallAnalysis decode(const std::vector<unsigned char>& bytes);

 private:
  util::SpoolFile file_;
  std::vector<std::pair<uint64_t, uint64_t>> at_;  // each call's (offset, size) in the file
  std::mutex mutex_;
};

}  // namespace peat::analyzer
