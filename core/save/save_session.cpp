// SPDX-License-Identifier: MIT
#include "core/save/save_session.h"

#include <algorithm>
#include <fstream>
#include <vector>

namespace peat::save {

store::Provenance saveProvenance(const std::string& model, uint64_t seed, const std::string& commandLine) {
  store::Provenance prov;
  prov.model = model;
  prov.dataset = "fashion-mnist";
  prov.backend = prov.device = "cpu";
  prov.seed = int64_t(seed);
  prov.commandLine = commandLine;
  return prov;
}

std::unique_ptr<store::SessionWriter> openSaveSession(const std::string& path, const store::Provenance& prov) {
  const bool exists = std::ifstream(path).good();
  return std::make_unique<store::SessionWriter>(path, prov, exists ? store::WriteMode::Append : store::WriteMode::Create);
}

std::string freeResultId(const std::string& session, const std::string& base) {
  const std::vector<std::string> taken = store::SessionReader(session).summaryWithoutTensors().saveResults;
  std::string id = base;
  for (int k = 2; std::find(taken.begin(), taken.end(), id) != taken.end(); ++k) id = base + "-" + std::to_string(k);
  return id;
}

}  // namespace peat::save
