// SPDX-License-Identifier: MIT
// Frequency-based runtime fault injection: a golden and an FI training in lockstep, the FI one with
// the candidate kernel replacing chosen calls; sweeps of (every, seed) points into one session.
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>

#include "core/torch/ops/dispatcher.h"
#include "core/torch/train/profiler.h"
#include "core/torch/train/run_common.h"
#include "core/util/campaign_key.h"

namespace peat::train {

using namespace detail;

namespace {

RuntimeFiResult runtimeFiInto(const RuntimeFiOptions& o, const Progress& progress, bool& created);

}  // namespace

std::string runtimeFiCampaign(const RuntimeFiOptions& o) {
  auto list = [](const auto& values, auto single) {
    std::string out;
    if (values.empty()) return std::to_string(single);
    for (const auto& v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
    return out;
  };
  const TrainOptions& t = o.train;
  return util::CampaignKey()
      .add("kernel", o.kernel)
      .add("every", list(o.everySweep, o.every))
      .add("seeds", list(o.seedSweep, t.seed))
      .add("op", o.op ? ops::opName(*o.op) : "all")
      .add("layer", o.layer)
      .add("forward", o.forward)
      .add("backward", o.backward)
      .add("prob", o.probability)
      .add("lr", t.learningRate)
      .add("model", t.model)
      .add("iterations", t.iterations)
      .add("batch", t.batch)
      .add("threads", t.threads)
      .add("eval_every", t.evalEvery)
      .add("eval_batches", t.evalBatches)
      .add("context", t.context)
      .add("attention", t.attention)
      .add("init", t.init)
      .text();
}

RuntimeFiResult runRuntimeFi(const RuntimeFiOptions& o, const Progress& progress) {
  if (o.everySweep.empty() && o.seedSweep.empty() && o.shardCount == 1)
    return withSessionCleanup(o.out, [&](bool& created) { return runtimeFiInto(o, progress, created); });
  // A sweep: this shard's (every, seed) points, one after another, into one session.
  if (o.shardCount < 1 || o.shardIndex < 0 || o.shardIndex >= o.shardCount)
    throw std::invalid_argument("shard " + std::to_string(o.shardIndex) + "/" + std::to_string(o.shardCount) +
                                " does not exist");
  const std::vector<int64_t> everys = o.everySweep.empty() ? std::vector<int64_t>{o.every} : o.everySweep;
  const std::vector<uint64_t> seeds = o.seedSweep.empty() ? std::vector<uint64_t>{o.train.seed} : o.seedSweep;
  if (o.probability > 0 && everys.size() > 1)
    throw std::invalid_argument("--prob substitutes at random: sweep the seeds, not --every");
  std::vector<std::pair<int64_t, uint64_t>> points;
  for (int64_t k : everys)
    for (uint64_t seed : seeds) points.emplace_back(k, seed);
  std::vector<std::size_t> mine;
  for (std::size_t p = std::size_t(o.shardIndex); p < points.size(); p += std::size_t(o.shardCount)) mine.push_back(p);
  if (mine.empty())
    throw std::invalid_argument("shard " + std::to_string(o.shardIndex) + "/" + std::to_string(o.shardCount) +
                                " has no point: the sweep has only " + std::to_string(points.size()));
  const std::string kernelName = kernels::parseKernelSpec(o.kernel).name;
  const auto start = Clock::now();
  return withSessionCleanup(o.out, [&](bool& created) {
    std::map<uint64_t, RuntimeFiOptions::KnownGolden> trained;  // per seed
    RuntimeFiResult total;
    total.session = o.out;
    total.points = 0;
    for (std::size_t p : mine) {
      const auto [every, seed] = points[p];
      RuntimeFiOptions q = o;
      q.every = every;
      q.train.seed = seed;
      q.sweepPoint = int64_t(p);
      q.goldenRun = "golden-seed-" + std::to_string(seed);
      q.fiRun = "runtime-fi-" + kernelName + (o.probability > 0 ? "" : "-every-" + std::to_string(every)) + "-seed-" +
                std::to_string(seed);
      q.mode = total.points == 0 ? o.mode : store::WriteMode::Append;
      const auto known = trained.find(seed);
      q.knownGolden = known == trained.end() ? nullptr : &known->second;
      bool made = false;
      const RuntimeFiResult r = runtimeFiInto(q, progress, made);
      if (!q.knownGolden && !r.cancelled) trained[seed] = r.golden;
      if (total.points == 0) created = made;
      ++total.points;
      total.iterations += r.iterations;
      total.substitutions += r.substitutions;
      total.injections += r.injections;
      total.failedCalls += r.failedCalls;
      total.failedSteps += r.failedSteps;
      if (total.firstKernelFailure.empty()) total.firstKernelFailure = r.firstKernelFailure;
      if (!r.kernelFailures.empty())
        total.kernelFailures += (total.kernelFailures.empty() ? "" : "; ") + q.fiRun + ": " + r.kernelFailures;
      keepWorst(total.worst, r.worst);
      total.goldenLoss = r.goldenLoss, total.fiLoss = r.fiLoss;
      total.goldenTestAccuracy = r.goldenTestAccuracy, total.fiTestAccuracy = r.fiTestAccuracy;
      if (r.cancelled || r.stoppedOnKernelFailure) {
        total.cancelled = r.cancelled;
        total.stoppedOnKernelFailure = r.stoppedOnKernelFailure;
        break;
      }
    }
    total.seconds = since(start);
    return total;
  });
}

namespace {

// What the FI training's kernel slot substitutes: the candidate, at the chosen calls.
ops::SubstitutionPolicy substitutionPolicy(const RuntimeFiOptions& o,
                                           const std::shared_ptr<kernels::Kernel>& candidate) {
  ops::SubstitutionPolicy policy;
  policy.candidate = candidate;
  policy.op = o.op;
  policy.layer = o.layer;
  policy.forward = o.forward;
  policy.backward = o.backward;
  policy.every = o.every;
  policy.probability = o.probability;
  policy.seed = o.train.seed;
  return policy;
}

// The attributes that place a sweep point's runs in the sweep (none outside a sweep).
void setSweepAttributes(store::SessionWriter& w, const RuntimeFiOptions& o) {
  if (o.sweepPoint < 0) return;
  w.setRunAttribute("campaign", runtimeFiCampaign(o));
  w.setRunAttribute("shard", std::to_string(o.shardIndex) + "/" + std::to_string(o.shardCount));
  w.setRunAttribute("sweep_point", std::to_string(o.sweepPoint));
}

// Writes the FI run: what was substituted, its curve, the substituted calls' errors and the injections.
void writeFiRun(store::SessionWriter& w, const RuntimeFiOptions& o, const kernels::Kernel& candidate, const Trainer& fi,
                const std::string& fiRun, const std::string& goldenRun, const Curve& fiCurve, const Table& errors,
                const Table& injections, const KernelFailures& failures, const RuntimeFiResult& r,
                store::RunStatus status) {
  w.beginRun({fiRun, "runtime_fi", o.kernel,
              "runtime FI: " + candidate.name() + " replaces " + (o.op ? ops::opName(*o.op) : "every op") +
                  (o.probability > 0 ? " with probability " + std::to_string(o.probability)
                                     : " every " + std::to_string(o.every) + " calls")});
  setTrainAttributes(w, fi.options(), fi.datasetName(), fi.initDescription());
  w.setRunAttribute("every", std::to_string(o.every));
  w.setRunAttribute("probability", std::to_string(o.probability));
  w.setRunAttribute("target_op", o.op ? ops::opName(*o.op) : "");
  w.setRunAttribute("target_layer", o.layer);
  w.setRunAttribute("golden_run", goldenRun);
  setSweepAttributes(w, o);
  w.writeTable("curve", fiCurve.table.columns());
  w.writeTable("call_errors", errors.columns());
  if (injections.rows() > 0) w.writeTable("injections", injections.columns());
  failures.setAttributes(w, r.substitutions);
  if (failures.calls > 0) w.setRunAttribute("failed_steps", std::to_string(r.failedSteps));
  w.endRun(status);
}

RuntimeFiResult runtimeFiInto(const RuntimeFiOptions& o, const Progress& progress, bool& created) {
  const auto start = Clock::now();
  RuntimeFiResult r;
  r.session = o.out;
  std::shared_ptr<kernels::Kernel> candidate = kernels::makeKernel(
      o.kernel, o.train.seed,
      o.kernelInProcess ? kernels::PluginPlacement::InProcess : kernels::PluginPlacement::KernelHost);
  if (o.op && !candidate->supports(*o.op))
    throw std::invalid_argument("kernel '" + candidate->name() + "' does not apply to op " + ops::opName(*o.op));
  if (o.every <= 0 && o.probability <= 0) throw std::invalid_argument("give --every K > 0 or --prob P in (0, 1]");

  ops::Dispatcher goldenOps, fiOps;
  Trainer golden(o.train, goldenOps), fi(o.train, fiOps);
  if (!golden.routingSummary().empty() && o.knownGolden == nullptr)
    std::cerr << "peat: " << o.train.model << ": " << golden.routingSummary() << "\n";
  fiOps.setSubstitution(substitutionPolicy(o, candidate));

  store::SessionWriter w(o.out, makeProvenance(golden.options(), golden.datasetName(), o.commandLine), o.mode);
  created = o.mode != store::WriteMode::Append;
  Curve goldenCurve, fiCurve;
  Table errors = callErrorTable();
  Table injections = injectionTable();
  KernelFailures failures;
  const std::string fiRun = o.fiRun.empty() ? "runtime-fi-" + kernels::parseKernelSpec(o.kernel).name : o.fiRun;
  const std::string goldenRun = o.goldenRun.empty() ? "golden" : o.goldenRun;
  // In a sweep, the golden run of a seed is trained and written once.
  const bool writeGolden = o.knownGolden == nullptr;
  if (writeGolden) {
    w.beginRun({goldenRun, "runtime_fi_golden", "golden", "golden run with the same seed and data order"});
    setTrainAttributes(w, golden.options(), golden.datasetName(), golden.initDescription());
    setSweepAttributes(w, o);
  }

  // Golden and FI runs step in lockstep so that a stop leaves both curves equally long.
  StepStats g, f;
  for (int64_t it = 0; it < o.train.iterations; ++it) {
    if (progress.cancelled()) {
      r.cancelled = true;
      break;
    }
    if (writeGolden)
      g = golden.step(it);
    else
      g.loss = o.knownGolden->loss.at(std::size_t(it));
    f = fi.step(it);
    std::optional<EvalStats> ge, fe;
    if (evaluateNow(o.train, it)) {
      if (writeGolden) {
        ge = golden.evaluate();
        r.goldenTestAccuracy = ge->accuracy;
      }
      fe = fi.evaluate();
      r.fiTestAccuracy = fe->accuracy;
    }
    if (writeGolden) {
      goldenCurve.add(it, g, ge ? &*ge : nullptr);
      r.golden.loss.push_back(g.loss);
    }
    fiCurve.add(it, f, fe ? &*fe : nullptr);
    bool stepFailed = false;
    for (const ops::Substitution& s : fiOps.takeSubstitutions()) {
      ++r.substitutions;
      if (s.outcome != "ok") {  // failed in the kernel host: golden's output was used
        addFailedCall(errors, s.id, s.variant, s.outcome);
        failures.add(s.outcome,
                     "it " + std::to_string(s.id.iteration) + " call " + std::to_string(s.id.callIndex) + " " +
                         s.id.layer + " " + s.id.op + " " + ops::variantName(s.variant),
                     s.message);
        stepFailed = true;
        continue;
      }
      addCallError(errors, s.id, s.variant, s.error);
      keepWorst(r.worst, s.error);
    }
    r.failedSteps += stepFailed;
    const auto log = fiOps.takeInjections();
    r.injections += int64_t(log.size());
    addInjections(injections, log);
    r.iterations = it + 1;
    progress.send(events::Event("loss").add("iteration", int64_t(it)).add("loss", double(g.loss))
                      .add("candidate_loss", double(f.loss)));
    progress(it + 1, o.train.iterations,
             "loss " + std::to_string(g.loss).substr(0, 6) + " vs " + std::to_string(f.loss).substr(0, 6));
    if (stepFailed && o.stopOnKernelFailure) {
      r.stoppedOnKernelFailure = true;
      break;
    }
  }
  r.failedCalls = failures.calls;
  r.kernelFailures = failures.summary(r.substitutions);
  r.firstKernelFailure = failures.first;
  const store::RunStatus status = r.cancelled                  ? store::RunStatus::Cancelled
                                  : r.stoppedOnKernelFailure ? store::RunStatus::Failed
                                                             : store::RunStatus::Complete;
  if (writeGolden) {
    w.writeTable("curve", goldenCurve.table.columns());
    w.endRun(status);
  }
  writeFiRun(w, o, *candidate, fi, fiRun, goldenRun, fiCurve, errors, injections, failures, r, status);
  if (!writeGolden) r.goldenTestAccuracy = o.knownGolden->testAccuracy;
  r.golden.testAccuracy = r.goldenTestAccuracy;
  r.goldenLoss = g.loss;
  r.fiLoss = f.loss;
  r.seconds = since(start);
  return r;
}

}  // namespace

}  // namespace peat::train
