// SPDX-License-Identifier: MIT
#pragma once
// Progress for programs that drive `peat` (the workbench's run panel): with PEAT_PROGRESS=lines in
// the environment, long commands print "progress DONE TOTAL STATUS" lines on stderr, flushed, at
// most ten a second and always for the last step (or for every step that carries a result).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace peat::util {

class ProgressLines {
 public:
  ProgressLines() {
    const char* v = std::getenv("PEAT_PROGRESS");
    on_ = v && std::strcmp(v, "lines") == 0;
  }
  bool on() const { return on_; }
  void operator()(int64_t done, int64_t total, const std::string& status = {}, bool always = false) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    if (!always && done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    std::fprintf(stderr, "progress %lld %lld %s\n", static_cast<long long>(done), static_cast<long long>(total),
                 status.c_str());
    std::fflush(stderr);
  }

 private:
  bool on_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace peat::util
