// SPDX-License-Identifier: MIT
#include "core/save/command_settings.h"

#include <algorithm>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "core/util/campaign_key.h"
#include "core/util/text.h"

namespace peat::save {

namespace {

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  for (char c : text + ",") {
    if (c == ',') {
      if (!item.empty()) out.push_back(item);
      item.clear();
    } else if (c != ' ') {
      item += c;
    }
  }
  return out;
}

// The data and the input normalisation, where given (left out otherwise, so that the settings of
// campaigns on Fashion-MNIST read as before and their shards still merge).
// --input-range as a campaign's key: the range for every input, then the named ones sorted, joined
// by ';' (the same ranges in any order make the same key; one range alone stays as it was, "0,1")
std::string inputRangeKey(const std::string& text) {
  std::string all;
  std::vector<std::string> named;
  for (const std::string& e : inputRangeEntries(text)) (e.find('=') == std::string::npos ? all : named.emplace_back()) = e;
  std::sort(named.begin(), named.end());
  std::string key = all.empty() && named.empty() ? text : all;
  for (const std::string& e : named) key += (key.empty() ? "" : ";") + e;
  return key;
}

util::CampaignKey& addInputSettings(util::CampaignKey& key, const cli::SaveAnalyzeOptions& a) {
  if (!a.data.empty()) key.add("data", a.data);
  if (!a.inputMean.empty()) key.add("input_mean", inputRangeKey(a.inputMean));  // the named ones sorted, as ranges
  if (!a.inputStd.empty()) key.add("input_std", inputRangeKey(a.inputStd));
  if (a.criterion != "value") key.add("criterion", a.criterion).add("epsilon", a.epsilon);
  if (a.rtol != 0) key.add("rtol", a.rtol);
  if (a.placement != "ranked") key.add("placement", a.placement);
  return key;
}

}  // namespace

std::pair<int, int> shardOption(const std::string& text) {
  if (const auto shard = util::parseShard(text)) return *shard;
  throw std::invalid_argument("--shard '" + text + "' is not INDEX/COUNT with 0 <= INDEX < COUNT, e.g. 0/4");
}

std::vector<std::string> inputRangeEntries(const std::string& text) {
  std::vector<std::string> entries;
  std::size_t from = 0;
  while (from <= text.size()) {  // the option given several times: its values joined by newlines
    const std::size_t to = std::min(text.find('\n', from), text.size());
    if (to > from) entries.push_back(text.substr(from, to - from));
    from = to + 1;
  }
  return entries;
}

std::pair<double, double> inputRangeOption(const std::string& text) {
  std::string all = "0,1";  // the default where only named inputs' ranges are given
  int unnamed = 0;
  for (const std::string& e : inputRangeEntries(text))
    if (e.find('=') == std::string::npos) {
      all = e;
      if (++unnamed > 1) throw std::invalid_argument("--input-range gives two ranges for every input");
    }
  return rangeText(all, "--input-range");
}

void applyBudget(const std::string& budget, SelectionOptions& so) {
  if (budget.empty()) return;
  std::string text = budget;
  const bool share = text.back() == '%';
  if (share) text.pop_back();
  if (!share && text.size() > 3 && text.compare(text.size() - 3, 3, "MiB") == 0) text.resize(text.size() - 3);
  const std::vector<double> v = util::parseNumberList(text, "--budget");
  if (v.size() != 1 || !(v[0] > 0)) throw std::invalid_argument("--budget '" + budget + "' is not 5% or 2.5MiB");
  if (share) {
    if (v[0] > 100) throw std::invalid_argument("--budget '" + budget + "' is more than the whole working set");
    so.budgetShare = v[0] / 100;
  } else {
    so.budgetBytes = int64_t(v[0] * 1048576.0);
  }
}

SelectionOptions selectionOptions(const cli::SaveAnalyzeOptions& o) {
  SelectionOptions so;
  std::tie(so.pixelLo, so.pixelHi) = inputRangeOption(o.inputRange);
  const auto [tileRows, tileCols] = cli::parseTile(o.tile);
  so.tileRows = int64_t(tileRows);
  so.tileCols = int64_t(tileCols);
  so.tau = o.tau;
  so.rtol = o.rtol;
  so.criterion = o.criterion;
  so.epsilon = o.epsilon;
  so.budgetBytes = int64_t(o.budgetMiB * 1048576.0);
  applyBudget(o.budget, so);
  so.batch = o.batch;
  if (o.placement != "ranked" && o.placement != "random" && o.placement != "none")
    throw std::invalid_argument("--placement '" + o.placement + "' is none of ranked, random, none");
  so.placement = o.placement;
  if (o.mode == "symbolic" || o.mode == "profiled")
    so.ranges.mode = RangeMode::Symbolic;
  else if (o.mode == "interval")
    so.ranges.mode = RangeMode::Interval;
  else
    throw std::invalid_argument("--mode '" + o.mode + "' is not symbolic, interval or profiled");
  if (o.depth < 0 || o.splits < 0 || o.splits > 12) throw std::invalid_argument("--depth must be >= 0 and --splits 0..12");
  so.ranges.depth = o.depth;
  so.ranges.splits = o.splits;
  checkOptions(so);  // bad ranges, tiles and budgets are refused before the weights are read
  return so;
}

ModelSource modelSource(const cli::SaveAnalyzeOptions& o) {
  ModelSource source;
  source.model = o.model;
  source.weights = o.weights;
  source.run = o.run;
  source.iteration = o.iteration;
  source.randomSeed = o.randomWeights;
  auto parse = [](const std::string& text, const char* option) {
    if (text.empty()) return std::vector<float>{};
    const std::vector<double> v = util::parseNumberList(text, option);
    return std::vector<float>(v.begin(), v.end());
  };
  // each given once for every input ("V" or "V,V,V") and once per named input ("NAME=V,..."): the
  // option repeated, its values joined by newlines
  for (auto [text, all, named, option] : {std::tuple{&o.inputMean, &source.inputMean, &source.inputMeans, "--input-mean"},
                                          std::tuple{&o.inputStd, &source.inputStd, &source.inputStds, "--input-std"}}) {
    int unnamed = 0;
    for (const std::string& e : inputRangeEntries(*text)) {
      if (e.find('=') != std::string::npos) {
        named->push_back(e);
        continue;
      }
      if (++unnamed > 1) throw std::invalid_argument(std::string(option) + " gives two values for every input");
      *all = parse(e, option);
    }
  }
  for (const std::string& e : inputRangeEntries(o.inputRange))
    if (e.find('=') != std::string::npos) source.inputRanges.push_back(e);
  return source;
}

Graph modelGraph(const cli::SaveAnalyzeOptions& o) { return buildGraph(modelSource(o)); }

CheckBitsCampaign checkBitsCampaign(const cli::SaveCheckBitsOptions& o) {
  const cli::SaveAnalyzeOptions& a = o.analysis;
  CheckBitsCampaign c;
  c.model = a.model;
  c.weights = a.weights + ":" + a.run + "@" + std::to_string(a.iteration);
  // Everything the counts depend on; not the threads, the shard or the session.
  util::CampaignKey key = util::CampaignKey()
                   .add("batch", o.batch)
                   .add("weight_flips", o.weightFlips)
                   .add("weights_per_stratum", o.weightsPerStratum)
                   .add("activation_flips", o.activationFlips)
                   .add("activation_images", o.activationImages)
                   .add("seed", o.seed)
                   .add("mode", a.mode)
                   .add("depth", a.depth)
                   .add("splits", a.splits)
                   .add("tau", a.tau)
                   .add("input_range", inputRangeKey(a.inputRange))
                   .add("tile", a.tile)
                   .add("budget_mib", a.budgetMiB)
                   .add("budget", a.budget)
                   .add("selection_batch", 1);
  c.settings = addInputSettings(key, a).text();
  std::tie(c.shardIndex, c.shardCount) = shardOption(o.shard);
  return c;
}

std::string campaignSettings(const cli::SaveCampaignOptions& o) {
  util::CampaignKey key = util::CampaignKey()
      .add("flips", o.flips)
      .add("schemes", o.schemes)
      .add("pattern", o.pattern)
      .add("bits", o.bits)
      .add("images", o.images)
      .add("batch", o.analysis.batch)
      .add("seed", o.seed)
      .add("budget_mib", o.analysis.budgetMiB)
      .add("budget", o.analysis.budget)
      .add("mode", o.analysis.mode)
      .add("tau", o.analysis.tau)
      .add("tile", o.analysis.tile)
      .add("input_range", inputRangeKey(o.analysis.inputRange))
      .add("verifier", o.verifier);
  if (o.agreement) key.add("agreement", "1");
  // the fault model, where it differs from the first round's (whose shards keep merging)
  if (o.target != "both") key.add("target", o.target);
  if (o.basis != "inference") key.add("basis", o.basis);
  if (!o.noRerunFaults) key.add("rerun_faults", "1").add("max_recoveries", o.maxRecoveries);
  key.add("recovery", "layer").add("check_lag", o.checkLag);  // a failed layer is rerun and checked (2026-12-02)
  return addInputSettings(key, o.analysis).text();
}

CampaignOptions campaignOptions(const cli::SaveCampaignOptions& o) {
  CampaignOptions co;
  co.flips.clear();
  for (const std::string& f : splitList(o.flips)) {
    std::size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(f, &used);
    } catch (const std::exception&) {
    }
    if (used != f.size() || v < 0) throw std::invalid_argument("--flips '" + o.flips + "' is not a list of counts >= 0");
    co.flips.push_back(v);
  }
  co.schemes.clear();
  for (const std::string& s : splitList(o.schemes)) co.schemes.push_back(schemeFromName(s));
  if (co.flips.empty() || co.schemes.empty()) throw std::invalid_argument("--flips and --schemes must not be empty");
  co.faults.pattern = patternFromName(o.pattern);
  co.faults.target = targetFromName(o.target);
  if (o.basis != "inference" && o.basis != "memory")
    throw std::invalid_argument("unknown --basis '" + o.basis + "'; valid: inference, memory");
  co.sameRatePerByte = o.basis == "memory";
  co.faults.duringReruns = !o.noRerunFaults;
  if (o.maxRecoveries < 1 || o.maxRecoveries > 100) throw std::invalid_argument("--max-recoveries must be 1..100");
  co.faults.maxRecoveries = o.maxRecoveries;
  if (o.checkLag < 1 || o.checkLag > 64) throw std::invalid_argument("--check-lag must be 1..64");
  co.faults.checkLag = o.checkLag;
  if (o.bits < 1 || o.bits > 32) throw std::invalid_argument("--bits must be 1..32");
  co.faults.bitsPerFault = o.bits;
  co.images = o.images;
  co.batch = o.analysis.batch;
  co.seed = o.seed;
  std::tie(co.shardIndex, co.shardCount) = shardOption(o.shard);
  if (co.batch <= 0 || co.images < co.batch || co.images % co.batch || co.images > 10000)
    throw std::invalid_argument("--images must be a multiple of --batch, at most 10000");
  return co;
}

}  // namespace peat::save
