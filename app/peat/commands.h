// SPDX-License-Identifier: MIT
#pragma once
#include <string>

namespace peat::cli {

struct InfoOptions {
  std::string path;
  bool json = false;
  bool calls = false;  // list every recorded call
};
int runInfo(const InfoOptions& o);

struct EnvOptions {
  bool json = false;
  bool skipTorch = false;
};
int runEnv(const EnvOptions& o);

struct AnalyzeOptions {
  std::string golden, candidate;
  std::string tile = "16x16";
  unsigned threads = 0;
  bool json = false;
};
int runAnalyze(const AnalyzeOptions& o);

}  // namespace peat::cli
