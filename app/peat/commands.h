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

}  // namespace peat::cli
